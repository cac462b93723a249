/** SigilError and the transport's retry arithmetic, without a server. */
import { expect } from "chai";
import { SigilError } from "sigil/sdk";
import { errorFromResponse } from "../../sdk/errors";
import { parseRetryAfter, retryDelay } from "../../sdk/transport";

const answer = (status: number, body: string, headers: Record<string, string> = {}) =>
  new Response(body, { status, headers: { "content-type": "application/json", ...headers } });

describe("SDK: SigilError", () => {
  it("carries the API's code, status, details and request id, and a short message", async () => {
    const body = {
      error: {
        code: "missing_scope",
        message: "The key lacks the group:create scope.",
        details: { scope: "group:create" },
      },
      request_id: "req-1",
    };
    const e = await errorFromResponse(answer(403, JSON.stringify(body)), "POST /core/v1/groups");
    expect(e).to.be.instanceOf(SigilError);
    expect([e.code, e.status, e.requestId, e.shortMessage]).to.deep.equal([
      "missing_scope",
      403,
      "req-1",
      "The key lacks the group:create scope.",
    ]);
    expect(e.details).to.deep.equal({ scope: "group:create" });
    expect(e.message).to.equal(
      [
        "The key lacks the group:create scope.",
        "",
        "Request: POST /core/v1/groups",
        "Status: 403 (missing_scope)",
        'Details: {"scope":"group:create"}',
        "Request id: req-1",
      ].join("\n"),
    );
  });

  it("exposes the service's fix and docs_url as fix and docsUrl, and puts them in the message", async () => {
    const body = {
      error: {
        code: "missing_scope",
        message: "The key lacks the group:create scope.",
        fix: "The owner grants it.",
        docs_url: "docs/errors.md#missing_scope",
      },
      request_id: "req-1",
    };
    const e = await errorFromResponse(answer(403, JSON.stringify(body)), "POST /core/v1/groups");
    expect([e.fix, e.docsUrl]).to.deep.equal(["The owner grants it.", "docs/errors.md#missing_scope"]);
    expect(e.message).to.contain("\nFix: The owner grants it.\nDocs: docs/errors.md#missing_scope\n");
  });

  it("an answer that is not the API's JSON is invalid_response, with the status and the header's request id", async () => {
    const e = await errorFromResponse(
      answer(502, "<html>bad gateway</html>", { "x-request-id": "r2" }),
      "GET /x",
    );
    expect([e.code, e.status, e.requestId]).to.deep.equal(["invalid_response", 502, "r2"]);
  });
});

describe("SDK: retry arithmetic", () => {
  it("Retry-After in seconds or as an HTTP date", () => {
    expect(parseRetryAfter("3")).to.equal(3000);
    expect(parseRetryAfter(null)).to.equal(null);
    expect(parseRetryAfter("soon")).to.equal(null);
    const inTwoSeconds = new Date(Date.now() + 2_000).toUTCString();
    expect(parseRetryAfter(inTwoSeconds)).to.be.within(0, 2_000);
  });

  it("retries 429 and 503 only, within the retry budget, and never waits past maxDelayMs", () => {
    const r = (status: number, retryAfter?: string) =>
      new Response(null, { status, headers: retryAfter ? { "retry-after": retryAfter } : {} });
    expect(retryDelay(r(429, "2"), 0, 3, 250, 30_000)).to.equal(2_000);
    expect(retryDelay(r(503, "1"), 2, 3, 250, 30_000)).to.equal(1_000);
    expect(retryDelay(r(503, "1"), 3, 3, 250, 30_000)).to.equal(null);
    expect(retryDelay(r(429, "60"), 0, 3, 250, 30_000)).to.equal(null);
    for (const status of [400, 401, 403, 404, 409, 500, 502])
      expect(retryDelay(r(status), 0, 3, 250, 30_000)).to.equal(null);
    const backoff = retryDelay(r(503), 2, 3, 250, 30_000)!;
    expect(backoff).to.be.within(500, 1_000);
  });
});
