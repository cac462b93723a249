/**
 * One delivery attempt: POST the event's JSON to the endpoint, connecting only to an address the
 * address guard permits (the name is resolved once, by the connection's own lookup, and that very
 * address is used: no DNS rebinding), never following a redirect, reading at most `maxResponseBytes`
 * of the answer (kept for the delivery log) and giving up after `timeoutMs`.
 */
import * as http from "node:http";
import * as https from "node:https";
import { isIP } from "node:net";
import { type AddressGuard, guardedLookup } from "../../enclave";

export interface AttemptResult {
  ok: boolean;
  /** The HTTP status, or null when there was no answer. */
  status: number | null;
  /** Why it failed (for the delivery log), or null. */
  error: string | null;
}

export interface SendOptions {
  guard: AddressGuard;
  timeoutMs: number;
  maxResponseBytes: number;
  signal?: AbortSignal;
}

export function sendOnce(
  target: string,
  headers: Record<string, string>,
  body: string,
  opts: SendOptions,
): Promise<AttemptResult> {
  const url = new URL(target);
  const literal = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
  // Node never calls `lookup` for an IP literal: check it here.
  if (isIP(literal) !== 0 && !opts.guard.permits(literal))
    return Promise.resolve({
      ok: false,
      status: null,
      error: `${literal} is a ${opts.guard.reason(literal)} address, which deliveries never go to`,
    });
  const transport = url.protocol === "https:" ? https : http;
  return new Promise<AttemptResult>((resolve) => {
    let settled = false;
    const finish = (r: AttemptResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      opts.signal?.removeEventListener("abort", onAbort);
      req.destroy();
      resolve(r);
    };
    const req = transport.request(url, {
      method: "POST",
      headers: { ...headers, "content-length": String(Buffer.byteLength(body)) },
      lookup: guardedLookup(opts.guard),
      agent: false, // a fresh connection each time: a pooled socket would skip the guarded lookup
    });
    const timer = setTimeout(
      () => finish({ ok: false, status: null, error: `no answer within ${opts.timeoutMs} ms` }),
      opts.timeoutMs,
    );
    const onAbort = () => finish({ ok: false, status: null, error: "aborted: the service is stopping" });
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    req.on("error", (err: Error & { code?: string }) =>
      finish({ ok: false, status: null, error: err.message.slice(0, 300) }),
    );
    req.on("response", (res) => {
      const status = res.statusCode ?? 0;
      let read = 0;
      const done = () => {
        if (status >= 200 && status < 300) finish({ ok: true, status, error: null });
        else if (status >= 300 && status < 400)
          finish({
            ok: false,
            status,
            error: `redirect to ${String(res.headers.location ?? "nowhere").slice(0, 200)} not followed`,
          });
        else finish({ ok: false, status, error: `HTTP ${status}` });
      };
      res.on("data", (chunk: Buffer) => {
        read += chunk.byteLength;
        // Enough to know the receiver answered; the rest of a large body is not our business.
        if (read >= opts.maxResponseBytes) done();
      });
      res.on("end", done);
      res.on("error", done);
    });
    req.end(body);
  });
}
