/**
 * The SDK's transport against the real relayer behind a front that answers chosen attempts itself: a
 * 429 with Retry-After and a 503 are retried with the same Idempotency-Key and the write happens once;
 * other 4xx are not retried; the deadline and the caller's AbortSignal end a call.
 */
import { expect } from "chai";
import { createSigil, SigilError } from "sigil/sdk";
import { setupAccount, startStack, type Stack } from "../helpers/stack";
import { startFront } from "./support";

const ERROR = (code: string) => ({ error: { code, message: code }, request_id: "front" });

describe("SDK transport: retries, idempotency, deadlines", function () {
  this.timeout(120_000);
  let s: Stack;
  let accountKey: string;

  before(async () => {
    s = await startStack();
    accountKey = (await setupAccount(s)).accountKey;
  });
  after(async () => {
    await s?.close();
  });

  const pkpCount = async () =>
    (await s.api("GET", "/core/v1/pkps", { key: accountKey })).body.total as number;
  const isCreate = (r: { method: string; url: string }) =>
    r.method === "POST" && r.url === "/core/v1/pkps/create";

  it("429 with Retry-After: waits that long, retries with the same Idempotency-Key, writes once", async () => {
    let seen = 0;
    const front = await startFront(s.url, (r) =>
      isCreate(r) && seen++ === 0
        ? { status: 429, headers: { "retry-after": "1" }, body: ERROR("rate_limited") }
        : null,
    );
    try {
      const before = await pkpCount();
      const started = Date.now();
      await createSigil({ baseUrl: front.url, apiKey: accountKey }).createPkp({ name: "after 429" });
      expect(Date.now() - started).to.be.at.least(1_000);
      const attempts = front.exchanges.filter(isCreate);
      expect(attempts.map((e) => e.status)).to.deep.equal([429, 201]);
      expect(attempts[0].requestHeaders["idempotency-key"]).to.be.a("string");
      expect(attempts[1].requestHeaders["idempotency-key"]).to.equal(
        attempts[0].requestHeaders["idempotency-key"],
      );
      expect(await pkpCount()).to.equal(before + 1);
    } finally {
      await front.close();
    }
  });

  it("503 after the service wrote: the retry replays the kept answer, the write happens once", async () => {
    let seen = 0;
    const front = await startFront(s.url, (r) =>
      isCreate(r) && seen++ === 0
        ? {
            status: 503,
            headers: { "retry-after": "0" },
            body: ERROR("chain_unavailable"),
            afterForwarding: true,
          }
        : null,
    );
    try {
      const before = await pkpCount();
      const pkp = await createSigil({ baseUrl: front.url, apiKey: accountKey }).createPkp({
        name: "after 503",
      });
      const attempts = front.exchanges.filter(isCreate);
      expect(attempts.map((e) => e.status)).to.deep.equal([503, 201]);
      expect(attempts[1].responseHeaders["idempotent-replayed"]).to.equal("true");
      expect(attempts[1].requestHeaders["idempotency-key"]).to.equal(
        attempts[0].requestHeaders["idempotency-key"],
      );
      expect(pkp.pkp_id).to.match(/^0x[0-9a-f]{64}$/);
      expect(await pkpCount()).to.equal(before + 1);
    } finally {
      await front.close();
    }
  });

  it("the caller's Idempotency-Key is used as given", async () => {
    const front = await startFront(s.url);
    try {
      const sigil = createSigil({ baseUrl: front.url, apiKey: accountKey });
      await sigil.post("/core/v1/pkps/create", {
        body: { name: "mine" },
        headers: { "Idempotency-Key": "my-key-1" },
      });
      expect(front.exchanges.at(-1)!.requestHeaders["idempotency-key"]).to.equal("my-key-1");
    } finally {
      await front.close();
    }
  });

  it("another 4xx is not retried: one attempt, a SigilError with the API's code", async () => {
    const front = await startFront(s.url);
    try {
      const sigil = createSigil({ baseUrl: front.url, apiKey: accountKey });
      const err = await sigil.group(999).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).to.be.instanceOf(SigilError);
      const e = err as SigilError;
      expect([e.status, e.code]).to.deep.equal([404, "group_not_found"]);
      expect(e.requestId).to.be.a("string");
      expect(e.shortMessage).to.equal("Group 999 does not exist in this account.");
      expect(front.exchanges.filter((x) => x.url === "/core/v1/groups/999")).to.have.length(1);
    } finally {
      await front.close();
    }
  });

  it("gives up after the configured retries with the last answer's code", async () => {
    const front = await startFront(s.url, (r) =>
      r.url === "/core/v1/account"
        ? { status: 503, headers: { "retry-after": "0" }, body: ERROR("executor_busy") }
        : null,
    );
    try {
      const sigil = createSigil({ baseUrl: front.url, apiKey: accountKey, retries: 2 });
      const err = (await sigil.account().catch((e: unknown) => e)) as SigilError;
      expect([err.status, err.code]).to.deep.equal([503, "executor_busy"]);
      expect(front.exchanges).to.have.length(3);
    } finally {
      await front.close();
    }
  });

  it("the caller's AbortSignal ends a call: code aborted", async () => {
    const controller = new AbortController();
    controller.abort();
    const sigil = createSigil({ baseUrl: s.url, apiKey: accountKey });
    const err = (await sigil.api
      .GET("/core/v1/account", { signal: controller.signal })
      .catch((e: unknown) => e)) as SigilError;
    expect(err.code).to.equal("aborted");
  });

  it("the deadline ends a call that keeps being told to wait: code timeout", async () => {
    const front = await startFront(s.url, (r) =>
      r.url === "/core/v1/account"
        ? { status: 429, headers: { "retry-after": "2" }, body: ERROR("rate_limited") }
        : null,
    );
    try {
      const sigil = createSigil({ baseUrl: front.url, apiKey: accountKey, timeoutMs: 300 });
      const err = (await sigil.account().catch((e: unknown) => e)) as SigilError;
      expect(err.code).to.equal("timeout");
    } finally {
      await front.close();
    }
  });
});
