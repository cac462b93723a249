/**
 * The CLI's HTTP client of the relayer. It knows the wire conventions (DESIGN.md section 8: key in
 * X-Api-Key, JSON in and out, the error envelope) and nothing about particular endpoints. Two failure
 * types map to the CLI's exit codes: ApiCallError (the service answered with an error: exit 2) and
 * ConnectionError (no answer: exit 3).
 */
import { randomUUID } from "node:crypto";

export class ApiCallError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
    readonly requestId?: string,
  ) {
    super(message);
    this.name = "ApiCallError";
  }
}

export class ConnectionError extends Error {
  constructor(
    readonly url: string,
    message: string,
  ) {
    super(message);
    this.name = "ConnectionError";
  }
}

/** A mistake in how the CLI was called (exit 1). */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

/**
 * A Sigil key pasted incompletely (cut off, or the README's `ak_...` placeholder) would reach the service
 * and come back as a bare 401; said here, the person learns what is wrong with it. Never echoes the key.
 * Keys that do not start with ak_/uk_ (a raw 0x usage key) are left to the service.
 */
export function incompleteKeyReason(key: string): string | undefined {
  const m = /^(ak|uk)_(.*)$/s.exec(key);
  if (!m || /^[0-9a-f]{64}$/.test(m[2])) return undefined;
  const kind = m[1] === "ak" ? "an account key" : "a usage key";
  const what = /^[0-9a-f]*$/.test(m[2])
    ? `this one has ${m[2].length} hex digits after ${m[1]}_`
    : `this one has other characters after ${m[1]}_ (a placeholder such as ${m[1]}_... or a stray quote?)`;
  return (
    `The API key (--api-key or SIGIL_API_KEY) is incomplete: ${kind} is ${m[1]}_ followed by 64 hex digits, ` +
    `${what}. Copy the whole key from where it was printed.`
  );
}

export interface RequestOptions {
  body?: unknown;
  /** Send the API key: true (default; required), false, or "optional" (sent when there is one). */
  auth?: boolean | "optional";
  query?: Record<string, string | number | undefined>;
}

export class SigilClient {
  constructor(
    readonly baseUrl: string,
    private readonly apiKey: string | undefined,
    private readonly timeoutMs = 120_000,
  ) {}

  get hasApiKey(): boolean {
    return this.apiKey !== undefined && this.apiKey !== "";
  }

  async request<T = Record<string, unknown>>(
    method: string,
    apiPath: string,
    opts: RequestOptions = {},
  ): Promise<T> {
    const url = new URL(
      apiPath.replace(/^\//, ""),
      this.baseUrl.endsWith("/") ? this.baseUrl : this.baseUrl + "/",
    );
    for (const [k, v] of Object.entries(opts.query ?? {}))
      if (v !== undefined) url.searchParams.set(k, String(v));
    const headers: Record<string, string> = { accept: "application/json" };
    if (opts.auth === "optional") {
      if (this.hasApiKey) headers["x-api-key"] = this.apiKey!;
    } else if (opts.auth !== false) {
      if (!this.hasApiKey)
        throw new UsageError(
          "This command needs an API key: pass --api-key or set SIGIL_API_KEY (see `sigil account create`).",
        );
      const incomplete = incompleteKeyReason(this.apiKey!);
      if (incomplete) throw new UsageError(incomplete);
      headers["x-api-key"] = this.apiKey!;
    }
    if (opts.body !== undefined) headers["content-type"] = "application/json";
    // One key per invocation: if the service retries or the connection drops after the write, a replay
    // of this exact request cannot write twice.
    if (method === "POST") headers["idempotency-key"] = randomUUID();
    let res: Response;
    try {
      res = await fetch(url, {
        method,
        headers,
        body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (e) {
      const cause = (e as { cause?: { code?: string; message?: string } }).cause;
      const why = cause?.code ?? cause?.message ?? (e as Error).message;
      throw new ConnectionError(
        this.baseUrl,
        `Cannot reach Sigil at ${this.baseUrl} (${why}). Is it running (npm start)? Set SIGIL_URL or --url if it listens elsewhere.`,
      );
    }
    const text = await res.text();
    let payload: unknown = undefined;
    if (text !== "") {
      try {
        payload = JSON.parse(text);
      } catch {
        payload = text;
      }
    }
    if (!res.ok) {
      const err =
        (payload as {
          error?: { code?: string; message?: string; details?: unknown };
          request_id?: string;
        }) ?? {};
      const code = err.error?.code ?? `http_${res.status}`;
      const message =
        err.error?.message ??
        (typeof payload === "string" && payload ? payload.slice(0, 300) : res.statusText);
      throw new ApiCallError(
        res.status,
        code,
        message,
        err.error?.details,
        err.request_id ?? res.headers.get("x-request-id") ?? undefined,
      );
    }
    return (payload ?? {}) as T;
  }
}
