/**
 * The README walk-through as a TypeScript program on the SDK, against the real stack (chain, relayer,
 * SES executor), through a recording proxy: the usage key signs its requests and its writes, and
 * neither its private key nor anything it can be rebuilt from crosses the wire.
 */
import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { promisify } from "node:util";
import { expect } from "chai";
import { verifyMessage } from "ethers";
import { createSigil, SigilError, waitUntilExecutable, type Sigil } from "sigil/sdk";
import { startStack, type Stack } from "../helpers/stack";
import { readmeProgram, readmeSignatureCheck, startFront, wireText, type Front } from "./support";

const ROOT = path.resolve(__dirname, "..", "..");
const README = fs.readFileSync(path.join(ROOT, "README.md"), "utf8");
const run = promisify(execFile);

const SIGN_MESSAGE = `async function main({ pkpId, message }) {
  const signature = await Actions.signMessage({ pkpId, message });
  return { message, signature, address: await Actions.getAddress({ pkpId }) };
}`;

describe("SDK: the walk-through against the real stack", function () {
  this.timeout(120_000);
  let s: Stack;
  let front: Front;
  let owner: Sigil;
  let usageKey: string;
  let server: Sigil;
  let pkp: { pkp_id: string; address: string };
  let cid: string;
  let groupId: number;
  let signature: string;
  /** Exchanges before this index include the key's issuance (its one display to the account holder). */
  let afterIssuance: number;

  before(async () => {
    s = await startStack();
    front = await startFront(s.url);
  });
  after(async () => {
    await front?.close();
    await s?.close();
  });

  it("creates an account and, with its key, a PKP, an action, a group and a usage key", async () => {
    const anonymous = createSigil({ baseUrl: front.url });
    const account = await anonymous.newAccount({ account_name: "sdk walk-through" });
    expect(account.api_key).to.match(/^ak_[0-9a-f]{64}$/);
    owner = createSigil({ baseUrl: front.url, apiKey: account.api_key! });
    pkp = await owner.createPkp({ name: "signer" });
    expect(pkp.address).to.equal(s.enclave.pkpAddress(pkp.pkp_id));
    cid = (await owner.pinAction(SIGN_MESSAGE)).cid;
    const group = await owner.createGroup({ name: "demo", pkps: [pkp.pkp_id], actions: [cid] });
    groupId = group.group_id;
    const key = await owner.addUsageKey({
      name: "server",
      execute_in_groups: [groupId],
      add_pkp_to_groups: [groupId],
      can_create_pkps: true,
    });
    usageKey = key.usage_api_key as string;
    afterIssuance = front.exchanges.length;
    expect(usageKey).to.match(/^uk_[0-9a-f]{64}$/);
  });

  it("runs the action with the usage key (signed) and the signature recovers the PKP's address", async () => {
    server = createSigil({ baseUrl: front.url, apiKey: usageKey });
    expect(server.signing).to.equal(true);
    const result = await server.waitUntilExecutable({
      cid,
      pkp_id: pkp.pkp_id,
      js_params: { pkpId: pkp.pkp_id, message: "hello from Sigil" },
    });
    expect(result.has_error).to.equal(false);
    const response = result.response as { message: string; signature: string; address: string };
    expect(verifyMessage("hello from Sigil", response.signature)).to.equal(pkp.address);
    expect(result.charged_cents).to.be.a("number");
    signature = response.signature;
  });

  it("README step 7's check prints OK for the PKP's address and FAIL (exit 1) for another", async () => {
    const check = readmeSignatureCheck(README);
    const ok = await run(process.execPath, ["-e", check, "hello from Sigil", signature, pkp.address], {
      cwd: ROOT,
    });
    expect(ok.stdout).to.equal("OK\n");
    const other = "0x" + "12".repeat(20);
    const fail = await run(process.execPath, ["-e", check, "hello from Sigil", signature, other], {
      cwd: ROOT,
    }).then(
      () => null,
      (e: { code: number; stdout: string }) => e,
    );
    expect([fail?.code, fail?.stdout]).to.deep.equal([1, "FAIL\n"]);
  });

  it("README's TypeScript program runs the action with the usage key", async () => {
    const file = path.join(ROOT, `.readme-program-${process.pid}.ts`);
    fs.writeFileSync(file, readmeProgram(README));
    try {
      const out = await run(process.execPath, ["-r", "ts-node/register/transpile-only", file], {
        cwd: ROOT,
        env: { ...process.env, SIGIL_URL: front.url, USAGE_KEY: usageKey, CID: cid, PKP: pkp.pkp_id },
      });
      expect(out.stdout).to.contain("hello from Sigil");
      expect(out.stdout).to.contain(signature.slice(0, 20));
    } finally {
      fs.rmSync(file, { force: true });
    }
  });

  it("README's TypeScript program with a wrong key fails fast, prints the fix and exits 1", async () => {
    const file = path.join(ROOT, `.readme-program-wrong-${process.pid}.ts`);
    fs.writeFileSync(file, readmeProgram(README));
    const wrongKey = "uk_" + "5a".repeat(32);
    const started = Date.now();
    try {
      const failed = await run(process.execPath, ["-r", "ts-node/register/transpile-only", file], {
        cwd: ROOT,
        env: { ...process.env, SIGIL_URL: front.url, USAGE_KEY: wrongKey, CID: cid, PKP: pkp.pkp_id },
      }).then(
        () => null,
        (e: { code: number; stderr: string }) => e,
      );
      expect(failed?.code).to.equal(1);
      expect(failed?.stderr).to.match(/^fix: Use a live key/m);
      // ts-node's start-up is most of it; the 30 s deadline of waitUntilExecutable is not waited out.
      expect(Date.now() - started).to.be.below(15_000);
    } finally {
      fs.rmSync(file, { force: true });
    }
  });

  it("waitUntilExecutable throws unknown_api_key on the first answer for an unknown key", async () => {
    let calls = 0;
    const stranger = createSigil({ baseUrl: front.url, apiKey: "uk_" + "6b".repeat(32) });
    const err = await waitUntilExecutable(
      (p, signal) => {
        calls++;
        return stranger.execute(p, signal);
      },
      { cid, pkp_id: pkp.pkp_id, js_params: {} },
    ).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).to.be.instanceOf(SigilError);
    expect((err as SigilError).code).to.equal("unknown_api_key");
    expect(calls).to.equal(1);
  });

  it("reads with the usage key (signed): the account and every PKP through the iterator", async () => {
    const account = await server.account();
    expect(account.caller).to.deep.equal({ kind: "usage", id: server.keyAddress });
    const ids: string[] = [];
    for await (const p of server.pkps()) ids.push(p.pkp_id);
    expect(ids).to.deep.equal([pkp.pkp_id]);
  });

  it("writes with the usage key through signed forward requests (a PKP, then adds it to the group)", async () => {
    const second = await server.createPkp({ name: "second" });
    expect(second.address).to.equal(s.enclave.pkpAddress(second.pkp_id));
    const group = await server.updateGroupPkps(groupId, { add: [second.pkp_id] });
    expect(group.pkps).to.deep.equal([pkp.pkp_id, second.pkp_id]);
    expect(group.tx_hashes).to.have.length(1);
  });

  it("a write the key has no scope for is refused with the API's code", async () => {
    try {
      await server.createGroup({ name: "not allowed" });
      expect.fail("created");
    } catch (err) {
      expect(err).to.be.instanceOf(SigilError);
      expect((err as SigilError).code).to.equal("missing_scope");
      expect((err as SigilError).status).to.equal(403);
    }
  });

  let bearerFrom: number;
  it("never sent the usage key's private key, in any encoding, once it was issued", async () => {
    bearerFrom = front.exchanges.length;
    const hex = usageKey.slice(3);
    const used = front.exchanges.slice(afterIssuance, bearerFrom);
    const wire = wireText(used).toLowerCase();
    const encodings = [
      hex,
      Buffer.from(hex, "hex").toString("base64").toLowerCase(),
      Buffer.from(hex, "hex").toString("base64url").toLowerCase(),
      Buffer.from(hex, "hex").toString("latin1").toLowerCase(),
    ];
    for (const e of encodings) expect(wire.includes(e), e).to.equal(false);
    // Nor half of it (a split key), in any position.
    for (let i = 0; i + 32 <= hex.length; i += 8) expect(wire.includes(hex.slice(i, i + 32))).to.equal(false);
    // The usage key's own requests carried a signature and no key header.
    const own = used.filter((e) => e.requestHeaders["sigil-key"] === server.keyAddress);
    expect(own.length).to.be.greaterThan(5);
    for (const e of own) {
      expect(e.requestHeaders["x-api-key"]).to.equal(undefined);
      expect(e.requestHeaders.authorization).to.equal(undefined);
    }
  });

  it("the bearer form keeps working for a usage key that asks for it", async () => {
    const bearer = createSigil({ baseUrl: front.url, apiKey: usageKey, usageKeyAuth: "bearer" });
    expect(bearer.signing).to.equal(false);
    const result = await bearer.execute({
      cid,
      pkp_id: pkp.pkp_id,
      js_params: { pkpId: pkp.pkp_id, message: "bearer" },
    });
    expect(result.has_error).to.equal(false);
    expect(front.exchanges.at(-1)!.requestHeaders["x-api-key"]).to.equal(usageKey);
  });
});
