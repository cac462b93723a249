import { expect } from "chai";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { inspect } from "node:util";
import { ethers } from "ethers";
import {
  computeCid,
  ContentStore,
  Enclave,
  GatewayClient,
  isValidCid,
  keyHash,
  parseCid,
} from "../../enclave";
import { deriveAesKey, deriveSecp256k1, ids, LABELS } from "../../enclave/derive";

/**
 * Exercises every public function, success and failure paths, while capturing everything written to
 * the console, stdout and stderr, plus every error's message/details/stack/JSON and the inspect/JSON
 * views of the objects; then checks that no secret (root key, derived keys, API keys) appears in any
 * of it.
 */
describe("enclave secrets never leak", function () {
  it("no secret appears in logs, errors or object dumps while every function runs", async function () {
    const dir = mkdtempSync(path.join(tmpdir(), "sigil-leak-"));
    const captured: string[] = [];
    const restore = captureOutput(captured);
    const secrets: string[] = [];
    try {
      // Dev mode with the default warn (console.warn), so the warning itself is captured.
      const rootFile = path.join(dir, "root.key");
      const enclave = await Enclave.open({ rootKeyFile: rootFile, devMode: true });
      const rootHex = readFileSync(rootFile, "utf8").trim();
      const root = ethers.getBytes("0x" + rootHex);
      secrets.push(rootHex);

      const pkp = ethers.keccak256(ethers.toUtf8Bytes("leak pkp"));
      const cid = "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o";
      const account = enclave.generateAccountKey();
      const usage = enclave.generateUsageKey();
      const raw = ethers.Wallet.createRandom().privateKey;
      secrets.push(account.apiKey.slice(3), usage.apiKey.slice(3), raw.slice(2));
      secrets.push(
        ethers.hexlify(deriveSecp256k1(root, LABELS.pkpSigning, ids.pkp(ethers.getBytes(pkp)))).slice(2),
      );
      secrets.push(ethers.hexlify(deriveAesKey(root, ids.pkp(ethers.getBytes(pkp)))).slice(2));
      secrets.push(ethers.hexlify(deriveSecp256k1(root, LABELS.action, ids.action(cid))).slice(2));
      secrets.push(
        ethers
          .hexlify(deriveSecp256k1(root, LABELS.owner, ids.owner(ethers.getBytes(account.address))))
          .slice(2),
      );
      secrets.push(ethers.hexlify(deriveSecp256k1(root, LABELS.gas, ids.gas(0))).slice(2));

      const attempt = async (fn: () => unknown) => {
        try {
          await fn();
        } catch (e) {
          captured.push(dumpError(e));
        }
      };
      const domain = {
        name: "SigilForwarder",
        version: "1",
        chainId: 1,
        verifyingContract: "0x" + "ab".repeat(20),
      };
      const req = { to: "0x" + "22".repeat(20), data: "0x", gas: 1n, nonce: 0n, deadline: 1 };

      // Successful calls (their return values may be secret by design; only side channels are checked).
      for (const k of [account.apiKey, usage.apiKey, raw]) {
        enclave.parseApiKey(k);
        enclave.principalAddress(k);
        await enclave.signForwardRequest(k, req, domain);
        keyHash(k);
      }
      enclave.ownerAddress(account.address);
      enclave.pkpPublicKey(pkp);
      enclave.pkpAddress(pkp);
      enclave.pkpSignDigest(pkp, ethers.ZeroHash.replace(/0$/, "1"));
      enclave.pkpSignMessage(pkp, "m");
      enclave.pkpSignTypedData(pkp, domain, { T: [{ name: "a", type: "uint256" }] }, { a: 1 });
      enclave.pkpDecrypt(pkp, enclave.pkpEncrypt(pkp, "p"));
      enclave.pkpPrivateKey(pkp);
      enclave.actionPrivateKey(cid);
      enclave.actionPublicKey(cid);
      enclave.actionAddress(cid);
      enclave.gasAddress(0);
      const gas = enclave.gasSigner(0, null);
      await gas.signMessage("m");

      // Failure paths that receive secret input.
      for (const k of [account.apiKey, usage.apiKey, raw]) {
        await attempt(() => enclave.parseApiKey(" " + k));
        await attempt(() => enclave.parseApiKey(k + "0"));
        await attempt(() => enclave.parseApiKey(k.toUpperCase()));
        await attempt(() => enclave.signForwardRequest(k, { ...req, to: "bad" }, domain));
        await attempt(() => enclave.signForwardRequest(k, req, { ...domain, chainId: -1 }));
      }
      await attempt(() => Enclave.fromRootKey(rootHex + "00"));
      await attempt(() => Enclave.fromRootKey(rootHex.slice(0, 62) + "zz"));
      await attempt(() => Enclave.open({ rootKeyHex: " " + rootHex + "ff" }));
      await attempt(() => enclave.pkpSignDigest(pkp, "0x12"));
      await attempt(() =>
        enclave.pkpSignTypedData(pkp, domain, { T: [{ name: "a", type: "uint8" }] }, { a: 1000 }),
      );
      await attempt(() => enclave.pkpDecrypt(pkp, "0x01" + "00".repeat(40)));
      await attempt(() => enclave.pkpDecrypt(ethers.keccak256("0x01"), enclave.pkpEncrypt(pkp, "p")));
      await attempt(() => enclave.pkpPrivateKey("0x" + "00".repeat(32)));
      await attempt(() => enclave.actionPrivateKey("bad"));
      await attempt(() => enclave.ownerAddress("bad"));
      await attempt(() => enclave.gasSigner(-1, null));
      await attempt(() =>
        gas.signTransaction({
          from: "0x" + "11".repeat(20),
          to: "0x" + "22".repeat(20),
          chainId: 1n,
          gasLimit: 1n,
        }),
      );
      await attempt(() => gas.sendTransaction({ to: "0x" + "22".repeat(20) }));

      // Content functions (no secrets pass through them, but their errors are captured too).
      await computeCid(new Uint8Array(10));
      await attempt(() => parseCid("bad"));
      isValidCid("bad");
      const store = new ContentStore(path.join(dir, "store"), { maxBytes: 8 });
      await attempt(() => store.put(new Uint8Array(100)));
      await attempt(() => store.get("bad"));
      await attempt(() =>
        new GatewayClient({ gateways: ["http://127.0.0.1:1"], maxBytes: 10, timeoutMs: 500 }).fetch(cid),
      );

      // Object dumps.
      captured.push(
        inspect(enclave, { showHidden: true, depth: 10 }),
        JSON.stringify(enclave),
        String(enclave),
      );
      captured.push(inspect(gas, { showHidden: true, depth: 10 }), JSON.stringify(gas));
      captured.push(
        Object.getOwnPropertyNames(enclave).join(","),
        Object.getOwnPropertyNames(Object.getPrototypeOf(enclave)).join(","),
      );
    } finally {
      restore();
      rmSync(dir, { recursive: true, force: true });
    }

    expect(captured.join("\n")).to.match(/DEV MODE/); // the capture worked: the dev-mode warning is there
    expect(captured.length).to.be.greaterThan(30);
    expect(secrets).to.have.length(9);
    const haystack = captured.join("\n").toLowerCase();
    for (const s of secrets) {
      expect(s).to.match(/^[0-9a-f]{64}$/);
      expect(haystack.includes(s), "a secret leaked").to.equal(false);
      // Also no 16-hex-character window of it (e.g. a truncated "0x1234…" rendering).
      for (let i = 0; i + 16 <= 64; i += 8)
        expect(haystack.includes(s.slice(i, i + 16)), "part of a secret leaked").to.equal(false);
    }
  });

  it("the Enclave has no property or getter that returns the root key", function () {
    const e = Enclave.fromRootKey("0x" + "ab".repeat(32));
    const names = [...Object.getOwnPropertyNames(e), ...Object.getOwnPropertyNames(Enclave.prototype)];
    for (const n of names) {
      if (n === "constructor") continue;
      const d =
        Object.getOwnPropertyDescriptor(e, n) ?? Object.getOwnPropertyDescriptor(Enclave.prototype, n);
      expect(d?.get, n).to.equal(undefined);
    }
    expect(Object.keys(e)).to.deep.equal([]);
    expect(names.some((n) => /root/i.test(n))).to.equal(false);
  });
});

function captureOutput(into: string[]): () => void {
  const methods = ["log", "info", "warn", "error", "debug", "trace"] as const;
  const saved = methods.map((m) => console[m]);
  for (const m of methods)
    console[m] = (...args: unknown[]) =>
      void into.push(args.map((a) => (typeof a === "string" ? a : inspect(a))).join(" "));
  const out = process.stdout.write.bind(process.stdout);
  const err = process.stderr.write.bind(process.stderr);
  const grab = (chunk: unknown) => {
    into.push(String(chunk));
    return true;
  };
  process.stdout.write = grab as typeof process.stdout.write;
  process.stderr.write = grab as typeof process.stderr.write;
  return () => {
    methods.forEach((m, i) => (console[m] = saved[i] as never));
    process.stdout.write = out;
    process.stderr.write = err;
  };
}

function dumpError(e: unknown): string {
  const parts: string[] = [];
  for (let cur: unknown = e, depth = 0; cur && depth < 5; cur = (cur as { cause?: unknown }).cause, depth++) {
    const x = cur as { message?: string; stack?: string; details?: string; shortMessage?: string };
    parts.push(
      String(x.message),
      String(x.stack),
      String(x.details),
      String(x.shortMessage),
      inspect(cur, { depth: 5 }),
    );
    try {
      parts.push(JSON.stringify(cur));
    } catch {
      /* circular */
    }
  }
  return parts.join("\n");
}
