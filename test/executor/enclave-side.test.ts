/**
 * The parent (enclave) side treats its workers as untrusted: if code ever escaped the sandbox inside a
 * worker, what that worker can ask for is still limited to what the run was authorized to do.
 */
import { expect } from "chai";
import { serveKeyOp } from "../../enclave/executor/key-ops";
import { DEFAULT_LIMITS } from "../../enclave/executor/limits";
import { readDone } from "../../enclave/executor/pool";
import { OTHER_CID, TEST_CID, makeAuthorizer, makeKeys, pkpIds } from "./helpers";

describe("executor: enclave side of key operations", function () {
  const keys = makeKeys();
  const server = { keys, crypto: null, limits: DEFAULT_LIMITS };
  const { allowed, refused } = pkpIds();

  it("serves only known operations, whatever name a worker sends", async function () {
    const { authorizePkp, calls } = makeAuthorizer(keys, [allowed]);
    for (const op of ["constructor", "__proto__", "toString", "hasOwnProperty", "pkpPrivateKeyX"]) {
      const answer = await serveKeyOp(server, TEST_CID, authorizePkp, op, { pkpId: allowed });
      expect(answer, op).to.deep.equal({
        ok: false,
        error: { code: "invalid_argument", message: "unknown operation" },
      });
    }
    expect(calls).to.deep.equal([]);
  });

  it("always gives the identity key of the run's own CID", async function () {
    const { authorizePkp } = makeAuthorizer(keys, [allowed]);
    const answer = await serveKeyOp(server, TEST_CID, authorizePkp, "actionPrivateKey", { cid: OTHER_CID });
    expect(answer).to.deep.equal({ ok: true, value: keys.actionPrivateKey(TEST_CID) });
  });

  it("authorizes every PKP operation, including getPrivateKey", async function () {
    const { authorizePkp, calls } = makeAuthorizer(keys, [allowed]);
    const answer = await serveKeyOp(server, TEST_CID, authorizePkp, "pkpPrivateKey", { pkpId: refused });
    expect(answer.ok).to.equal(false);
    expect(calls).to.deep.equal([refused]);
  });

  it("answers malformed arguments with invalid_argument", async function () {
    const { authorizePkp } = makeAuthorizer(keys, [allowed]);
    const answer = await serveKeyOp(server, TEST_CID, authorizePkp, "pkpSignMessage", null as never);
    expect(answer).to.deep.equal({
      ok: false,
      error: { code: "invalid_argument", message: "pkpId must be a string" },
    });
  });

  describe("argument sizes, checked again whatever the worker claims to have checked", function () {
    const max = DEFAULT_LIMITS.maxKeyOpPayloadBytes;
    const cases: Array<[string, Record<string, unknown>, string]> = [
      ["pkpEncrypt", { plaintext: "x".repeat(max + 1) }, `encrypt: message is more than ${max} bytes`],
      ["pkpEncrypt", { plaintext: new Uint8Array(max + 1) }, `encrypt: message is ${max + 1} bytes`],
      ["pkpSignMessage", { message: "é".repeat(max / 2 + 1) }, `signMessage: message is ${max + 2} bytes`],
      ["pkpDecrypt", { ciphertext: "0".repeat(2 * (max + 29) + 3) }, "decrypt: ciphertext is"],
      ["pkpSignDigest", { digest: "0x" + "ab".repeat(64) }, "signEcdsa: digest is 130 bytes"],
      [
        "pkpSignTypedData",
        { domain: {}, types: {}, value: { big: "x".repeat(DEFAULT_LIMITS.maxTypedDataBytes) } },
        "signTypedData: typed data is more than",
      ],
    ];
    for (const [op, extra, message] of cases) {
      it(`${op}: key_op_too_large before authorization (${message})`, async function () {
        const { authorizePkp, calls } = makeAuthorizer(keys, [allowed]);
        const answer = await serveKeyOp(server, TEST_CID, authorizePkp, op, { pkpId: allowed, ...extra });
        expect(answer.ok).to.equal(false);
        const { error } = answer as { error: { code: string; message: string } };
        expect(error.code).to.equal("key_op_too_large");
        expect(error.message).to.contain(message);
        expect(calls).to.deep.equal([]);
      });
    }

    it("a PKP reference longer than any id or address: key_op_too_large", async function () {
      const { authorizePkp, calls } = makeAuthorizer(keys, [allowed]);
      const answer = await serveKeyOp(server, TEST_CID, authorizePkp, "pkpAddress", {
        pkpId: "0x" + "1".repeat(200),
      });
      expect(answer).to.deep.equal({
        ok: false,
        error: {
          code: "key_op_too_large",
          message: "getAddress: pkpId is 202 bytes; the limit is 128 (fixed)",
        },
      });
      expect(calls).to.deep.equal([]);
    });

    it("a payload exactly at the limit is served", async function () {
      const { authorizePkp } = makeAuthorizer(keys, [allowed]);
      const answer = await serveKeyOp(server, TEST_CID, authorizePkp, "pkpEncrypt", {
        pkpId: allowed,
        plaintext: "x".repeat(max),
      });
      expect(answer.ok).to.equal(true);
      expect(keys.pkpDecrypt(allowed, (answer as { value: string }).value).length).to.equal(max);
    });
  });

  it("reads a worker's final message defensively", function () {
    const malformed = { error: { code: "worker_crashed", message: "the worker sent a malformed result" } };
    expect(readDone({ responseJson: "{not json" })).to.deep.equal(malformed);
    expect(readDone({ responseJson: 5 })).to.deep.equal(malformed);
    expect(readDone({ error: { code: 1, message: "x" } })).to.deep.equal(malformed);
    expect(readDone({ error: { code: "action_threw", message: "m", extra: 1 } })).to.deep.equal({
      error: { code: "action_threw", message: "m" },
    });
    expect(readDone({ error: null, responseJson: '{"a":1}' })).to.deep.equal({
      error: null,
      responseJson: '{"a":1}',
    });
  });
});
