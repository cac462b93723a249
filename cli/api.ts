/**
 * The CLI's access to the service: the SDK (sdk/), one client per invocation. The SDK carries the wire
 * conventions (key handling — a usage key signs and is never sent —, Idempotency-Key, retries on
 * 429/503, the error envelope); this module adds only what a command line needs: the key checks that
 * give a person a useful message before anything is sent, and the mapping of failures to exit codes.
 */
import { createSigil, SigilError, type Sigil } from "sigil/sdk";

/** A mistake in how the CLI was called (exit 1). */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

/** SigilError codes that mean "no answer" (exit 3) rather than "the service said no" (exit 2). */
export const CONNECTION_CODES = new Set(["network_error", "timeout", "aborted"]);

export function isConnectionError(e: unknown): e is SigilError {
  return e instanceof SigilError && CONNECTION_CODES.has(e.code);
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
  /** Use the API key: true (default; required), false, or "optional" (used when there is one). */
  auth?: boolean | "optional";
  query?: Record<string, string | number | undefined>;
}

export interface CliClient {
  readonly hasApiKey: boolean;
  /** The SDK client with the key (typed operations; writes of a usage key go as signed forward requests). */
  sigil(): Sigil;
  /** Any endpoint by method and path (billing, and commands that print the answer as it is). */
  request<T = Record<string, unknown>>(method: string, apiPath: string, opts?: RequestOptions): Promise<T>;
}

export function cliClient(baseUrl: string, apiKey: string | undefined, timeoutMs = 120_000): CliClient {
  const hasApiKey = apiKey !== undefined && apiKey !== "";
  let withKey: Sigil | null = null;
  let anonymous: Sigil | null = null;
  const keyed = (): Sigil => {
    if (!hasApiKey)
      throw new UsageError(
        "This command needs an API key: pass --api-key or set SIGIL_API_KEY (see `sigil account create`).",
      );
    const incomplete = incompleteKeyReason(apiKey!);
    if (incomplete) throw new UsageError(incomplete);
    try {
      withKey ??= createSigil({ baseUrl, apiKey, timeoutMs });
    } catch {
      throw new UsageError(
        "The API key (--api-key or SIGIL_API_KEY) is not a Sigil key: ak_ or uk_ followed by 64 hex digits, or a 0x private key.",
      );
    }
    return withKey;
  };
  const open = (): Sigil => (anonymous ??= createSigil({ baseUrl, timeoutMs }));
  return {
    hasApiKey,
    sigil: keyed,
    async request<T>(method: string, apiPath: string, opts: RequestOptions = {}): Promise<T> {
      const client = opts.auth === false ? open() : opts.auth === "optional" && !hasApiKey ? open() : keyed();
      const query = Object.fromEntries(Object.entries(opts.query ?? {}).filter(([, v]) => v !== undefined));
      // Paths outside the typed document (billing) go through the same transport, untyped.
      const untyped = client.api.request as unknown as (
        m: string,
        p: string,
        init: unknown,
      ) => Promise<{ data?: unknown }>;
      const r = await untyped(method.toLowerCase(), apiPath, {
        params: Object.keys(query).length ? { query } : undefined,
        body: opts.body,
      });
      return (r.data ?? {}) as T;
    },
  };
}

/** The message a connection failure prints (exit 3). */
export function connectionMessage(baseUrl: string, e: SigilError): string {
  const cause =
    (e.cause as { cause?: { code?: string; message?: string }; message?: string } | undefined) ?? {};
  const why =
    e.code === "timeout"
      ? "no answer in time"
      : (cause.cause?.code ?? cause.cause?.message ?? cause.message ?? e.code);
  return `Cannot reach Sigil at ${baseUrl} (${why}). Is it running (npm start)? Set SIGIL_URL or --url if it listens elsewhere.`;
}
