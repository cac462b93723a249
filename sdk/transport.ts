/**
 * The fetch the SDK hands to openapi-fetch: everything about *how* a request travels, nothing about
 * endpoints.
 *
 *  - Authentication: a RequestAuth adds its headers to every attempt (bearer: X-Api-Key; signed: a
 *    fresh signature per attempt, since the service refuses a nonce it has seen).
 *  - Writes (POST) carry an Idempotency-Key: the caller's, else a random one generated once per call
 *    and the same on every retry of this call, so a retried write is applied once, even after a crash
 *    of the service (docs/consistency.md, "Idempotency-Key across a crash").
 *  - 429 and 503 are retried (the service says both are temporary), and so is 409
 *    idempotency_key_in_flight (the same call's earlier attempt is still running): after Retry-After
 *    when the answer has one, else with exponential backoff and jitter.
 *  - A lost connection (no answer at all) is retried too: the call's Idempotency-Key makes that safe
 *    for a write (the service answers from what the first attempt did, never writes twice), and reads
 *    change nothing. Not for an action run (svc_action): if its instance crashed, a retry would run the
 *    action again, and an action's effects outside the chain are the caller's to judge. Nothing else
 *    is retried: another 4xx will not change by asking again, and another 5xx may have done something.
 *  - One deadline (timeoutMs) for the whole call, retries included, and the caller's AbortSignal.
 *  - Any non-2xx answer becomes a thrown SigilError, so a resolved call always holds data.
 */
import { SigilError, errorFromResponse } from "./errors";

export interface RequestAuth {
  /** Headers for one attempt of `method path` with exactly these body bytes. */
  headers(method: string, pathAndQuery: string, body: Uint8Array): Promise<Record<string, string>>;
}

export interface RetryOptions {
  /** Retries after the first attempt (default 3). */
  retries?: number;
  /** First backoff delay in ms without Retry-After (default 250); doubles each time. */
  baseDelayMs?: number;
  /** A Retry-After longer than this is not waited for: the error is thrown (default 30 000). */
  maxDelayMs?: number;
}

export interface TransportOptions extends RetryOptions {
  auth?: RequestAuth;
  /** Whole-call deadline in ms, retries included (default 60 000). */
  timeoutMs?: number;
  fetch?: typeof globalThis.fetch;
}

export const RETRIED_STATUSES = new Set([429, 503]);
/** A 409 with this code is temporary: the same Idempotency-Key's earlier attempt has not answered yet. */
const IN_FLIGHT_CODE = "idempotency_key_in_flight";

export function createTransport(o: TransportOptions): (request: Request) => Promise<Response> {
  const doFetch = o.fetch ?? globalThis.fetch;
  const retries = o.retries ?? 3;
  const baseDelay = o.baseDelayMs ?? 250;
  const maxDelay = o.maxDelayMs ?? 30_000;
  const timeoutMs = o.timeoutMs ?? 60_000;

  return async (request: Request) => {
    const url = new URL(request.url);
    const label = `${request.method} ${url.pathname}`;
    const body = new Uint8Array(await request.arrayBuffer());
    const headers = new Headers(request.headers);
    if (request.method === "POST" && !headers.has("idempotency-key"))
      headers.set("idempotency-key", crypto.randomUUID());
    const deadline = AbortSignal.timeout(timeoutMs);
    const signal = AbortSignal.any([deadline, request.signal]);

    for (let attempt = 0; ; attempt++) {
      const attemptHeaders = new Headers(headers);
      if (o.auth) {
        const extra = await o.auth.headers(request.method, url.pathname + url.search, body);
        for (const [k, v] of Object.entries(extra)) attemptHeaders.set(k, v);
      }
      let response: Response;
      try {
        response = await doFetch(url, {
          method: request.method,
          headers: attemptHeaders,
          body: body.length ? body : undefined,
          signal,
        });
      } catch (cause) {
        const failure = abortOrNetwork(cause, deadline, request.signal, label, timeoutMs);
        // No answer: the attempt may or may not have run. Asked again with the same Idempotency-Key
        // (every POST has one), the service finishes or replays it; never a second write.
        if (failure.code !== "network_error" || attempt >= retries || runsAction(request.method, url))
          throw failure;
        try {
          await sleep(backoffMs(attempt, baseDelay, maxDelay), signal);
        } catch (c) {
          throw abortOrNetwork(c, deadline, request.signal, label, timeoutMs);
        }
        continue;
      }
      if (response.ok) return response;
      const wait = (await isInFlight(response))
        ? inFlightDelay(response, attempt, retries, baseDelay, maxDelay)
        : retryDelay(response, attempt, retries, baseDelay, maxDelay);
      if (wait === null) throw await errorFromResponse(response, label);
      await response.body?.cancel().catch(() => undefined);
      try {
        await sleep(wait, signal);
      } catch (cause) {
        throw abortOrNetwork(cause, deadline, request.signal, label, timeoutMs);
      }
    }
  };
}

/** Milliseconds to wait before retrying this answer, or null when it is final. */
export function retryDelay(
  response: Response,
  attempt: number,
  retries: number,
  baseDelayMs: number,
  maxDelayMs: number,
): number | null {
  if (!RETRIED_STATUSES.has(response.status) || attempt >= retries) return null;
  const after = parseRetryAfter(response.headers.get("retry-after"));
  if (after !== null) return after > maxDelayMs ? null : after;
  return backoffMs(attempt, baseDelayMs, maxDelayMs);
}

/** Exponential backoff with jitter: between half and all of base * 2^attempt, at most maxDelayMs. */
function backoffMs(attempt: number, baseDelayMs: number, maxDelayMs: number): number {
  const backoff = baseDelayMs * 2 ** attempt;
  return Math.min(maxDelayMs, backoff / 2 + Math.random() * (backoff / 2));
}

/** An action run: not retried after a lost connection (see the header). */
function runsAction(method: string, url: URL): boolean {
  return method === "POST" && url.pathname.endsWith("/core/v1/svc_action");
}

/** 409 idempotency_key_in_flight (read from a copy: the original stays for errorFromResponse). */
async function isInFlight(response: Response): Promise<boolean> {
  if (response.status !== 409) return false;
  try {
    const body = (await response.clone().json()) as { error?: { code?: string } };
    return body?.error?.code === IN_FLIGHT_CODE;
  } catch {
    return false;
  }
}

function inFlightDelay(
  response: Response,
  attempt: number,
  retries: number,
  baseDelayMs: number,
  maxDelayMs: number,
): number | null {
  if (attempt >= retries) return null;
  const after = parseRetryAfter(response.headers.get("retry-after"));
  if (after !== null) return after > maxDelayMs ? null : after;
  return backoffMs(attempt, baseDelayMs, maxDelayMs);
}

/** Retry-After in ms: delta-seconds or an HTTP date; null when absent or unreadable. */
export function parseRetryAfter(value: string | null): number | null {
  if (value === null) return null;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, at - Date.now());
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal.reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

function abortOrNetwork(
  cause: unknown,
  deadline: AbortSignal,
  callerSignal: AbortSignal,
  label: string,
  timeoutMs: number,
): SigilError {
  if (callerSignal.aborted)
    return new SigilError("The request was aborted.", { code: "aborted", request: label, cause });
  if (deadline.aborted)
    return new SigilError(`No answer within ${timeoutMs} ms.`, { code: "timeout", request: label, cause });
  return new SigilError("The service could not be reached.", {
    code: "network_error",
    request: label,
    cause,
  });
}
