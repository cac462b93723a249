/**
 * Signed requests (relayer/http/signedRequest.ts), driven by a second, independent implementation of
 * the signing written here from docs/api.md with ethers' primitives (not the SDK): every way a signature
 * can be wrong gets its own 401 code, and the bearer form keeps working.
 */
import { createHash, randomBytes } from "node:crypto";
import { expect } from "chai";
import { SigningKey, Wallet, computeAddress, hashMessage, toUtf8Bytes } from "ethers";
import { signRequest } from "../../sdk";
import { SignedRequestVerifier } from "../../relayer/http/signedRequest";
import { setupAccount, startStack, type Stack } from "../helpers/stack";

interface Signable {
  chainId: number;
  registry: string;
  method: string;
  path: string;
  body: string;
  timestamp?: number;
  nonce?: string;
}

/** docs/api.md "Signed requests", implemented on its own. */
function independentHeaders(privateKey: string, r: Signable): Record<string, string> {
  const timestamp = r.timestamp ?? Math.floor(Date.now() / 1000);
  const nonce = r.nonce ?? randomBytes(16).toString("hex");
  const bodySha = createHash("sha256").update(Buffer.from(r.body, "utf8")).digest("hex");
  const message = `SIGIL-REQUEST-V1\n${r.chainId}\n${r.registry.toLowerCase()}\n${r.method}\n${r.path}\n${bodySha}\n${timestamp}\n${nonce}`;
  const signature = new SigningKey(privateKey).sign(hashMessage(toUtf8Bytes(message))).serialized;
  return {
    "Sigil-Key": computeAddress(privateKey),
    "Sigil-Timestamp": String(timestamp),
    "Sigil-Nonce": nonce,
    "Sigil-Content-Sha256": bodySha,
    "Sigil-Signature": signature,
  };
}

describe("signed requests: a usage key that is never sent", function () {
  this.timeout(120_000);
  let s: Stack;
  let usageKey: string;
  let privateKey: string;
  let pkpId: string;
  let cid: string;
  let chainId: number;
  let registry: string;
  let accountKey: string;

  before(async () => {
    s = await startStack();
    const a = await setupAccount(s);
    pkpId = a.pkpId;
    accountKey = a.accountKey;
    cid = a.cid;
    const k = await s.api("POST", "/core/v1/add_usage_api_key", {
      key: a.accountKey,
      body: { name: "signed", execute_in_groups: [a.groupId], can_create_pkps: true },
    });
    usageKey = k.body.usage_api_key;
    privateKey = "0x" + usageKey.slice(3);
    chainId = 31337;
    registry = s.deployment.registry;
  });
  after(async () => {
    await s?.close();
  });

  const execBody = () => JSON.stringify({ cid, pkp_id: pkpId, js_params: { who: "signed" } });
  const signed = (over: Partial<Signable> = {}, key = privateKey) =>
    independentHeaders(key, {
      chainId,
      registry,
      method: "POST",
      path: "/core/v1/svc_action",
      body: execBody(),
      ...over,
    });
  const send = (headers: Record<string, string>, body = execBody()) =>
    s.api("POST", "/core/v1/svc_action", {
      rawBody: body,
      headers: { "content-type": "application/json", ...headers },
    });

  it("executes with a correct signature and authorizes as the key", async () => {
    const r = await send(signed());
    expect(r.status).to.equal(200);
    expect(r.body.response).to.deep.equal({ hello: "signed" });
  });

  it("reads with a correct signature (GET, empty body)", async () => {
    const r = await s.api("GET", "/core/v1/account", {
      headers: independentHeaders(privateKey, {
        chainId,
        registry,
        method: "GET",
        path: "/core/v1/account",
        body: "",
      }),
    });
    expect(r.status).to.equal(200);
    expect(r.body.caller).to.deep.equal({ kind: "usage", id: computeAddress(privateKey) });
  });

  it("wrong signature (another key, claiming this key's address): 401 signature_invalid", async () => {
    const headers = signed({}, Wallet.createRandom().privateKey);
    headers["Sigil-Key"] = computeAddress(privateKey);
    const r = await send(headers);
    expect([r.status, r.body.error.code]).to.deep.equal([401, "signature_invalid"]);
  });

  it("stale timestamp (10 minutes old): 401 signature_expired", async () => {
    const r = await send(signed({ timestamp: Math.floor(Date.now() / 1000) - 600 }));
    expect([r.status, r.body.error.code]).to.deep.equal([401, "signature_expired"]);
    expect(r.body.error.details.window_seconds).to.equal(120);
  });

  it("replayed nonce (the same signed request twice): 401 signature_replayed", async () => {
    const headers = signed();
    expect((await send(headers)).status).to.equal(200);
    const again = await send(headers);
    expect([again.status, again.body.error.code]).to.deep.equal([401, "signature_replayed"]);
  });

  it("body changed after signing: 401 signature_body_mismatch", async () => {
    const headers = signed();
    const r = await send(headers, JSON.stringify({ cid, pkp_id: pkpId, js_params: { who: "mallory" } }));
    expect([r.status, r.body.error.code]).to.deep.equal([401, "signature_body_mismatch"]);
  });

  it("body and its hash changed after signing: 401 signature_invalid", async () => {
    const headers = signed();
    const body = JSON.stringify({ cid, pkp_id: pkpId, js_params: { who: "mallory" } });
    headers["Sigil-Content-Sha256"] = createHash("sha256").update(body).digest("hex");
    const r = await send(headers, body);
    expect([r.status, r.body.error.code]).to.deep.equal([401, "signature_invalid"]);
  });

  it("signed for another deployment (chain id): 401 signature_invalid", async () => {
    const r = await send(signed({ chainId: 1 }));
    expect([r.status, r.body.error.code]).to.deep.equal([401, "signature_invalid"]);
  });

  it("signed for another path: 401 signature_invalid", async () => {
    const r = await send(signed({ path: "/core/v1/actions/cid" }));
    expect([r.status, r.body.error.code]).to.deep.equal([401, "signature_invalid"]);
  });

  it("a missing header: 401 signature_malformed naming it", async () => {
    const headers = signed();
    delete headers["Sigil-Nonce"];
    const r = await send(headers);
    expect([r.status, r.body.error.code]).to.deep.equal([401, "signature_malformed"]);
    expect(r.body.error.details.missing).to.deep.equal(["sigil-nonce"]);
  });

  it("a signature and a key together: 401 signature_malformed", async () => {
    const r = await send({ ...signed(), "X-Api-Key": usageKey });
    expect([r.status, r.body.error.code]).to.deep.equal([401, "signature_malformed"]);
  });

  it("a signed write on a bearer endpoint: 400 forward_request_required, nothing written", async () => {
    const body = JSON.stringify({ name: "nope" });
    const r = await s.api("POST", "/core/v1/pkps/create", {
      rawBody: body,
      headers: {
        "content-type": "application/json",
        ...independentHeaders(privateKey, {
          chainId,
          registry,
          method: "POST",
          path: "/core/v1/pkps/create",
          body,
        }),
      },
    });
    expect([r.status, r.body.error.code]).to.deep.equal([400, "forward_request_required"]);
    const pkps = await s.api("GET", "/core/v1/pkps", { key: accountKey });
    expect(pkps.body.total).to.equal(1);
  });

  it("the bearer form keeps working", async () => {
    const r = await s.api("POST", "/core/v1/svc_action", { key: usageKey, body: JSON.parse(execBody()) });
    expect(r.status).to.equal(200);
  });

  it("the SDK's signing makes the same bytes as the independent implementation", () => {
    const timestamp = 1_700_000_000;
    const ours = signRequest(
      new Wallet(privateKey),
      { chainId, registryAddress: registry },
      "POST",
      "/core/v1/svc_action",
      Buffer.from(execBody()),
      () => timestamp,
    );
    const theirs = independentHeaders(privateKey, {
      chainId,
      registry,
      method: "POST",
      path: "/core/v1/svc_action",
      body: execBody(),
      timestamp,
      nonce: ours["sigil-nonce"],
    });
    expect(ours["sigil-signature"]).to.equal(theirs["Sigil-Signature"]);
    expect(ours["sigil-content-sha256"]).to.equal(theirs["Sigil-Content-Sha256"]);
  });
});

describe("SignedRequestVerifier: replay memory", () => {
  const key = Wallet.createRandom();
  const registry = "0x" + "11".repeat(20);
  const request = (headers: Record<string, string>) =>
    ({
      method: "GET",
      originalUrl: "/core/v1/account",
      get: (name: string) =>
        Object.entries(headers).find(([k]) => k.toLowerCase() === name.toLowerCase())?.[1],
    }) as never;
  const headersAt = (timestamp: number) =>
    independentHeaders(key.privateKey, {
      chainId: 1,
      registry,
      method: "GET",
      path: "/core/v1/account",
      body: "",
      timestamp,
    });

  it("forgets a nonce once its timestamp has left the window", () => {
    let now = 1_000_000;
    const v = new SignedRequestVerifier({
      chainId: 1,
      registryAddress: registry,
      now: () => now,
      windowSeconds: 120,
    });
    v.verify(request(headersAt(now)), undefined);
    expect(v.remembered).to.equal(1);
    now += 241;
    v.verify(request(headersAt(now)), undefined);
    expect(v.remembered).to.equal(1);
  });

  it("is bounded: when full, refuses with 429 rather than forget a live nonce", () => {
    const now = 1_000_000;
    const v = new SignedRequestVerifier({
      chainId: 1,
      registryAddress: registry,
      now: () => now,
      maxNonces: 2,
    });
    v.verify(request(headersAt(now)), undefined);
    v.verify(request(headersAt(now)), undefined);
    try {
      v.verify(request(headersAt(now)), undefined);
      expect.fail("accepted");
    } catch (err) {
      expect((err as { status: number; code: string }).status).to.equal(429);
      expect((err as { code: string }).code).to.equal("rate_limited");
    }
  });
});
