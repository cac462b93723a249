import { expect } from "chai";
import { createCipheriv, createHash } from "node:crypto";
import { computeCid, isValidCid, parseCid } from "../../enclave";
import { contentMatchesCid } from "../../enclave/cid";
import { expectEnclaveError, expectEnclaveRejection } from "./helpers";

/** Expected CIDs come from ipfs-unixfs-importer, an independent implementation, with `ipfs add` defaults. */
async function importerCid(bytes: Uint8Array, version: 0 | 1): Promise<string> {
  const { importBytes } = require("ipfs-unixfs-importer") as typeof import("ipfs-unixfs-importer");
  const blockstore = {
    put: async (cid: unknown) => cid,
    get: async () => new Uint8Array(),
    has: async () => false,
  };
  const opts =
    version === 0
      ? { cidVersion: 0 as const, rawLeaves: false, reduceSingleLeafToSelf: true }
      : { cidVersion: 1 as const, rawLeaves: true, reduceSingleLeafToSelf: true };
  const entry = await importBytes(bytes, blockstore as never, opts);
  return entry.cid.toString();
}

/** Deterministic pseudo-random bytes (AES-128-CTR keystream of a seed), so the content is not trivially compressible. */
function content(size: number, seed: string): Uint8Array {
  const key = createHash("sha256").update(seed).digest().subarray(0, 16);
  return new Uint8Array(createCipheriv("aes-128-ctr", key, Buffer.alloc(16)).update(Buffer.alloc(size)));
}

const utf8 = (s: string) => new TextEncoder().encode(s);

describe("enclave CIDs", function () {
  describe("parsing is remembered, refusals are not", function () {
    it("the same canonical form on every parse, cached or not, and every spelling of a refusal refused", function () {
      const v0 = "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o";
      const first = parseCid(v0);
      for (let i = 0; i < 3; i++) {
        expect(parseCid(v0)).to.equal(first);
        expect(isValidCid(v0)).to.equal(true);
      }
      for (const bad of ["Qm" + "1".repeat(44), "bafy", "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5O"]) {
        for (let i = 0; i < 3; i++) {
          expect(isValidCid(bad), bad).to.equal(false);
          expect(() => parseCid(bad), bad).to.throw();
        }
      }
    });
  });

  describe("known CIDs", function () {
    it('"hello world\\n" is QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o', async function () {
      expect(await computeCid(utf8("hello world\n"))).to.equal(
        "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o",
      );
    });

    it("the empty file is QmbFMke1KXqnYyBBWxB74N4c5SBnJMVAiMNRcGu6x1AwQH", async function () {
      expect(await computeCid(new Uint8Array(0))).to.equal("QmbFMke1KXqnYyBBWxB74N4c5SBnJMVAiMNRcGu6x1AwQH");
    });

    it("the empty file's CIDv1 is the raw block bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku", async function () {
      expect(await computeCid(new Uint8Array(0), { version: 1 })).to.equal(
        "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku",
      );
    });

    it('"hello world\\n" as CIDv1 is a raw block whose digest is its SHA-256', async function () {
      const cid = await computeCid(utf8("hello world\n"), { version: 1 });
      expect(cid).to.equal("bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4");
    });
  });

  describe("agreement with ipfs-unixfs-importer (ipfs add defaults)", function () {
    const sizes: Array<[string, number]> = [
      ["1 byte", 1],
      ["1 KB", 1024],
      ["262,143 bytes (one byte under a chunk)", 262_143],
      ["262,144 bytes (exactly one chunk)", 262_144],
      ["262,145 bytes (two chunks)", 262_145],
      ["3 MB (12 chunks, one level)", 3 * 1024 * 1024],
      ["174 chunks (a full node)", 174 * 262_144],
      ["174 chunks + 1 byte (a second tree level)", 174 * 262_144 + 1],
    ];
    for (const [name, size] of sizes) {
      for (const version of [0, 1] as const) {
        it(`${name}, CIDv${version}`, async function () {
          const bytes = content(size, name);
          expect(await computeCid(bytes, { version })).to.equal(await importerCid(bytes, version));
        });
      }
    }

    it("262,144 and 262,145 bytes of zeros give the importer's CIDs", async function () {
      for (const size of [262_144, 262_145]) {
        const bytes = new Uint8Array(size);
        expect(await computeCid(bytes)).to.equal(await importerCid(bytes, 0));
      }
    });

    it("one changed byte in a multi-block file changes the CID", async function () {
      const bytes = content(600_000, "flip");
      const before = await computeCid(bytes);
      bytes[500_000] ^= 1;
      expect(await computeCid(bytes)).to.not.equal(before);
    });
  });

  describe("computeCid input", function () {
    it("refuses a non-bytes input with invalid_content", async function () {
      await expectEnclaveRejection(computeCid("hello" as never), "invalid_content");
    });

    it("refuses an unknown CID version with invalid_cid", async function () {
      await expectEnclaveRejection(computeCid(new Uint8Array(1), { version: 2 as never }), "invalid_cid");
    });
  });

  describe("parseCid / isValidCid", function () {
    it("accepts a CIDv0 unchanged", function () {
      expect(parseCid("QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o")).to.equal(
        "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o",
      );
    });

    it("accepts a CIDv1 raw and a CIDv1 dag-pb unchanged", function () {
      for (const c of [
        "bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4",
        "bafybeigrosvbbw24eykfaduzjk4rkdmyo7khbhw2ybhqz3g23oa5nsc4cm",
      ]) {
        expect(parseCid(c)).to.equal(c);
      }
    });

    it("canonicalises a CIDv1 in base58btc to base32", function () {
      const { CID } = require("multiformats") as typeof import("multiformats");
      const { base58btc } =
        require("multiformats/bases/base58") as typeof import("multiformats/bases/base58");
      const b32 = "bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4";
      expect(parseCid(CID.parse(b32).toString(base58btc))).to.equal(b32);
    });

    const bad: Array<[string, unknown]> = [
      ["empty", ""],
      ["garbage", "not a cid"],
      ["a truncated CIDv0", "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5"],
      ["a CIDv0 with a bad base58 character", "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff50"],
      ["surrounding whitespace", " QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o"],
      ["a path", "/ipfs/QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o"],
      ["a dag-cbor CID (unsupported codec)", "bafyreidykglsfhoixmivffc5uwhcgshx4j465xwqntbmu43nb2dzqwfvae"],
      ["an identity-hash CID (unsupported hash)", "bafkqaaa"],
      ["a very long string", "b" + "a".repeat(500)],
      ["a number", 5],
      ["null", null],
    ];
    for (const [name, input] of bad) {
      it(`refuses ${name} with invalid_cid`, function () {
        expectEnclaveError(() => parseCid(input as string), "invalid_cid");
        expect(isValidCid(input as string)).to.equal(false);
      });
    }

    it("isValidCid is true for valid v0 and v1", function () {
      expect(isValidCid("QmbFMke1KXqnYyBBWxB74N4c5SBnJMVAiMNRcGu6x1AwQH")).to.equal(true);
      expect(isValidCid("bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku")).to.equal(true);
    });
  });

  describe("content verification", function () {
    const bytes = content(300_000, "verify");

    it("accepts the content for its v0, v1 raw-leaf, and v1 dag-pb-leaf CIDs", async function () {
      const v1DagPbLeaves = await (async () => {
        const { importBytes } = require("ipfs-unixfs-importer") as typeof import("ipfs-unixfs-importer");
        const bs = {
          put: async (c: unknown) => c,
          get: async () => new Uint8Array(),
          has: async () => false,
        };
        return (await importBytes(bytes, bs as never, { cidVersion: 1, rawLeaves: false })).cid.toString();
      })();
      for (const cid of [await computeCid(bytes), await computeCid(bytes, { version: 1 }), v1DagPbLeaves]) {
        expect(contentMatchesCid(cid, bytes), cid).to.equal(true);
      }
    });

    it("refuses other content for the same CIDs", async function () {
      const other = content(300_000, "other");
      expect(contentMatchesCid(await computeCid(bytes), other)).to.equal(false);
      expect(contentMatchesCid(await computeCid(bytes, { version: 1 }), other)).to.equal(false);
    });
  });
});
