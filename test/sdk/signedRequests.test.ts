/**
 * Signed requests (relayer/http/signedRequest.ts), driven by a second, independent implementation of
 * the signing written here from docs/api.md with ethers' primitives (not the SDK): every way a signature
 * can be wrong gets its own 401 code, and the bearer form keeps working.
 */
import { createHash, randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { expect } from "chai";
import fc from "fast-check";
import { SigningKey, Wallet, computeAddress, hashMessage, toUtf8Bytes } from "ethers";
import { signRequest } from "sigil/sdk";
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

  it("docs/api.md's worked example is what both implementations sign", () => {
    const doc = fs.readFileSync(path.join(__dirname, "..", "..", "docs", "api.md"), "utf8");
    const example = {
      chainId: 31337,
      registry: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
      method: "GET",
      path: "/core/v1/account",
      body: "",
      timestamp: 1_700_000_000,
      nonce: "000102030405060708090a0b0c0d0e0f",
    };
    const key = "0x" + "11".repeat(32);
    const theirs = independentHeaders(key, example);
    const ours = signRequest(
      new Wallet(key),
      { chainId: 31337, registryAddress: example.registry },
      "GET",
      example.path,
      new Uint8Array(),
      {
        timestamp: example.timestamp,
        nonce: example.nonce,
      },
    );
    expect(ours["sigil-signature"]).to.equal(theirs["Sigil-Signature"]);
    expect(doc).to.contain(`Sigil-Signature: ${theirs["Sigil-Signature"]}`);
    expect(doc).to.contain(`Sigil-Key: ${theirs["Sigil-Key"]}`);
  });

  it("the SDK's signing makes the same bytes as the independent implementation", () => {
    const timestamp = 1_700_000_000;
    const ours = signRequest(
      new Wallet(privateKey),
      { chainId, registryAddress: registry },
      "POST",
      "/core/v1/svc_action",
      Buffer.from(execBody()),
      { timestamp },
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

/** What the verifier reads of an Express request: Node lower-cases header names, `get` looks them up. */
function expressLikeRequest(method: string, path: string, headers: Record<string, string>): never {
  const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
  return {
    method,
    originalUrl: path,
    headers: lower,
    get: (name: string) => lower[name.toLowerCase()],
  } as never;
}

describe("SignedRequestVerifier: replay memory", () => {
  const key = Wallet.createRandom();
  const registry = "0x" + "11".repeat(20);
  const request = (headers: Record<string, string>) => expressLikeRequest("GET", "/core/v1/account", headers);
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

describe("SignedRequestVerifier: properties", () => {
  const key = Wallet.createRandom();
  const registry = "0x" + "22".repeat(20);
  const NOW = 1_700_000_000;
  const parts = fc.record({
    method: fc.constantFrom("GET", "POST", "DELETE"),
    path: fc.stringMatching(/^\/core\/v1\/[a-z_/]{1,30}(\?[a-z_=&0-9]{0,20})?$/),
    body: fc.string({ maxLength: 200 }),
  });
  const verifier = () => new SignedRequestVerifier({ chainId: 7, registryAddress: registry, now: () => NOW });
  const attempt = (
    v: SignedRequestVerifier,
    method: string,
    path: string,
    body: string,
    headers: Record<string, string>,
  ) => {
    const req = expressLikeRequest(method, path, headers);
    try {
      return v.verify(req, Buffer.from(body, "utf8"));
    } catch (err) {
      return (err as { status: number; code: string }).status + " " + (err as { code: string }).code;
    }
  };

  it("accepts exactly what was signed, as the signer", () => {
    fc.assert(
      fc.property(parts, (p) => {
        const headers = independentHeaders(key.privateKey, { chainId: 7, registry, ...p, timestamp: NOW });
        expect(attempt(verifier(), p.method, p.path, p.body, headers)).to.equal(key.address);
      }),
      { numRuns: 60 },
    );
  });

  it("refuses with a 401 any request whose method, path or body differs from what was signed", () => {
    fc.assert(
      fc.property(parts, parts, (signed, sent) => {
        fc.pre(signed.method !== sent.method || signed.path !== sent.path || signed.body !== sent.body);
        const headers = independentHeaders(key.privateKey, {
          chainId: 7,
          registry,
          ...signed,
          timestamp: NOW,
        });
        expect(attempt(verifier(), sent.method, sent.path, sent.body, headers)).to.match(
          /^401 signature_(invalid|body_mismatch)$/,
        );
      }),
      { numRuns: 60 },
    );
  });

  it("refuses a timestamp outside the window, accepts one inside, whatever the request", () => {
    fc.assert(
      fc.property(parts, fc.integer({ min: -1000, max: 1000 }), (p, skew) => {
        const headers = independentHeaders(key.privateKey, {
          chainId: 7,
          registry,
          ...p,
          timestamp: NOW + skew,
        });
        const out = attempt(verifier(), p.method, p.path, p.body, headers);
        expect(out).to.equal(Math.abs(skew) > 120 ? "401 signature_expired" : key.address);
      }),
      { numRuns: 60 },
    );
  });
});
