/**
 * `Idempotency-Key` on POST (design §4, docs/background.md): the first successful response for (caller, key) is
 * kept for 24 h and replayed for the same method, path and body, without sending anything again. The same
 * key with a different request is 409 idempotency_key_reused. A request still in flight with the same key
 * is joined, not re-run. Only 2xx answers are kept: a refused or failed request wrote nothing, so
 * retrying it with the same key is safe and may succeed once the cause is fixed.
 *
 * Kept answers are sealed at rest (an action's answer may be a decrypted secret or a private key): the
 * enclave encrypts each one under a key derived from the root key and the record's context (scope, the
 * caller's API key, the Idempotency-Key), so neither the database file nor its WAL holds an answer in
 * clear, and the fingerprint is keyed by the same context.
 */
import { createHmac } from "node:crypto";
import { ApiError } from "./errors";
import { type DataLayer, IdempotencyRecords, openEngine } from "./db";
import type { Db } from "./store";

export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
const KEY_FORMAT = /^[\x20-\x7e]{1,255}$/;

export interface StoredResponse {
  status: number;
  body: unknown;
}

export function validateIdempotencyKey(v: string | undefined): string | undefined {
  if (v === undefined) return undefined;
  if (!KEY_FORMAT.test(v) || v.trim() === "") {
    throw new ApiError(
      400,
      "invalid_idempotency_key",
      "Idempotency-Key must be 1 to 255 printable ASCII characters.",
    );
  }
  return v;
}

/**
 * Stable JSON: object keys sorted, so {"a":1,"b":2} and {"b":2,"a":1} are the same request. Iterative (an
 * explicit stack of pending output tokens and values) so that no nesting can overflow the call stack, even
 * though the HTTP guard already bounds bodies to MAX_JSON_DEPTH levels.
 */
export function canonical(root: unknown): string {
  const out: string[] = [];
  // Work items: a value still to render, or a literal piece of output (punctuation, a key).
  const stack: Array<{ value: unknown } | { text: string }> = [{ value: root }];
  while (stack.length) {
    const item = stack.pop()!;
    if ("text" in item) {
      out.push(item.text);
      continue;
    }
    const v = item.value;
    if (v === null || typeof v !== "object") {
      out.push(JSON.stringify(v) ?? "null");
      continue;
    }
    const pieces: Array<{ value: unknown } | { text: string }> = [];
    if (Array.isArray(v)) {
      pieces.push({ text: "[" });
      v.forEach((e, i) => {
        if (i) pieces.push({ text: "," });
        pieces.push({ value: e });
      });
      pieces.push({ text: "]" });
    } else {
      const o = v as Record<string, unknown>;
      pieces.push({ text: "{" });
      Object.keys(o)
        .sort()
        .forEach((k, i) => {
          pieces.push({ text: `${i ? "," : ""}${JSON.stringify(k)}:` }, { value: o[k] });
        });
      pieces.push({ text: "}" });
    }
    for (let i = pieces.length - 1; i >= 0; i--) stack.push(pieces[i]);
  }
  return out.join("");
}

/**
 * The request's fingerprint. `secret` (the record's sealing context, which holds the caller's API key
 * when there is one) is mixed in so that a stored fingerprint cannot be used to guess a low-entropy value
 * of the body (a password in js_params, say) by hashing candidates.
 */
export function fingerprint(method: string, path: string, body: unknown, secret = ""): string {
  return createHmac("sha256", secret)
    .update(`${method} ${path}\n${canonical(body ?? null)}`)
    .digest("hex");
}

/** How often a duplicate polls for the answer of a request running on another instance. */
const POLL_MS = 50;
/** How long a duplicate waits for that answer before giving up with 409 idempotency_key_in_flight. */
export const IDEMPOTENCY_WAIT_MS = 30_000;
/**
 * A claim older than this belongs to a request whose instance died before answering (no request runs
 * this long: the receipt timeout is 60 s); it is released so the request can be retried.
 */
export const IDEMPOTENCY_CLAIM_LEASE_MS = 5 * 60 * 1000;

/** The enclave's record sealing (enclave/index.ts Enclave.sealRecord / openRecord). */
export interface RecordSealer {
  sealRecord(context: string, plaintext: Uint8Array): string;
  openRecord(context: string, envelope: string): Uint8Array;
}

export interface RunOptions {
  /**
   * Context of the record's sealing key: it must hold what only the caller has (its API key) where there
   * is one, so the database file alone never opens a record.
   */
  sealContext: string;
  /** Rewrites the answer before it is kept (e.g. drops a secret no later caller may see again). */
  keep?: (body: unknown) => unknown;
}

export class IdempotencyStore {
  private readonly inFlight = new Map<string, { fingerprint: string; result: Promise<StoredResponse> }>();
  private readonly records: IdempotencyRecords;

  /**
   * `db`: the relayer's SQLite file (the embedded default) or the shared data layer (PostgreSQL), where
   * a duplicate arriving at another instance finds the first request's claim or answer.
   */
  constructor(
    db: Db | DataLayer,
    private readonly sealer: RecordSealer,
    private readonly now: () => number = Date.now,
  ) {
    const shared = "kind" in db;
    this.records = new IdempotencyRecords(shared ? db : openEngine({ sqlitePath: "", sqliteHandle: db }));
    // The relayer's own SQLite file belongs to this process alone: a claim found there is from a
    // request that never answered before a restart, so a retry may run now. (Shared claims wait for
    // their lease instead: another instance may still be running them.)
    if (!shared) this.records.releaseClaims().catch(() => undefined);
    // Records left from before a restart; a failure here is retried by the hourly prune.
    this.prune().catch(() => undefined);
  }

  /** Deletes records older than 24 h; returns how many. */
  prune(): Promise<number> {
    return this.records.prune(this.now() - IDEMPOTENCY_TTL_MS);
  }

  /**
   * Runs `fn` once per (scope, key, fingerprint). `scope` isolates callers (one caller's key never
   * collides with another's).
   */
  async run(
    scope: string,
    key: string,
    fp: string,
    fn: () => Promise<StoredResponse>,
    opts: RunOptions,
  ): Promise<StoredResponse & { replayed: boolean }> {
    const id = `${scope}\n${key}`;
    const flying = this.inFlight.get(id);
    if (flying) {
      if (flying.fingerprint !== fp) throw reused();
      // Joins the running request; its failure is this request's failure too (nothing was written twice).
      return { ...(await flying.result), replayed: true };
    }
    const deadline = this.now() + IDEMPOTENCY_WAIT_MS;
    for (;;) {
      const claimedMs = this.now();
      if (await this.records.claim(scope, key, fp, claimedMs)) {
        return { ...(await this.runClaimed(id, scope, key, fp, claimedMs, fn, opts)), replayed: false };
      }
      const row = await this.records.read(scope, key);
      if (!row) continue; // released or pruned between the claim and the read: claim again
      const expired = row.created_ms < this.now() - IDEMPOTENCY_TTL_MS;
      const abandoned = row.status === 0 && row.created_ms < this.now() - IDEMPOTENCY_CLAIM_LEASE_MS;
      if (expired || abandoned) {
        await this.records.remove(scope, key, row);
        continue;
      }
      if (row.fingerprint !== fp) throw reused();
      if (row.status !== 0)
        return { status: row.status, body: this.open(opts.sealContext, row.body), replayed: true };
      // The first request is running on another instance (or in this one, before its in-flight entry
      // existed): wait for its answer, as a local duplicate joins it.
      if (this.now() >= deadline) throw inProgress();
      await new Promise((r) => setTimeout(r, POLL_MS));
      const local = this.inFlight.get(id);
      if (local) {
        if (local.fingerprint !== fp) throw reused();
        return { ...(await local.result), replayed: true };
      }
    }
  }

  private async runClaimed(
    id: string,
    scope: string,
    key: string,
    fp: string,
    claimedMs: number,
    fn: () => Promise<StoredResponse>,
    opts: RunOptions,
  ): Promise<StoredResponse> {
    const result = fn();
    this.inFlight.set(id, { fingerprint: fp, result });
    let r: StoredResponse;
    try {
      r = await result;
    } catch (e) {
      // A failed request wrote nothing: release the claim so a retry with the same key can run.
      await this.records.remove(scope, key, { created_ms: claimedMs, status: 0 }).catch(() => undefined);
      this.inFlight.delete(id);
      throw e;
    }
    try {
      if (r.status >= 200 && r.status < 300)
        await this.records.complete(
          scope,
          key,
          claimedMs,
          r.status,
          this.seal(opts.sealContext, opts.keep ? opts.keep(r.body) : r.body),
        );
      else await this.records.remove(scope, key, { created_ms: claimedMs, status: 0 });
    } catch {
      // The work is done and its answer is owed to the caller: a database that cannot keep the record
      // now leaves the claim, which duplicates wait on until its lease ends.
    } finally {
      this.inFlight.delete(id);
    }
    return r;
  }

  /** The body column: the enclave's envelope of the answer's JSON, never the answer itself. */
  private seal(context: string, body: unknown): string {
    const json = Buffer.from(JSON.stringify(body) ?? "null", "utf8");
    return SEALED_PREFIX + this.sealer.sealRecord(context, json);
  }

  private open(context: string, column: string): unknown {
    // Rows kept by a version without sealing (at most 24 h old at the upgrade) replay as they were kept.
    if (!column.startsWith(SEALED_PREFIX)) return JSON.parse(column);
    const json = this.sealer.openRecord(context, column.slice(SEALED_PREFIX.length));
    return JSON.parse(Buffer.from(json).toString("utf8"));
  }
}

function inProgress(): ApiError {
  return new ApiError(
    409,
    "idempotency_key_in_flight",
    "A request with this Idempotency-Key is still running; retry once it has answered.",
    { retryAfter: 1 },
  );
}

/** Marks a sealed body column; a row written before sealing existed holds plain JSON. */
const SEALED_PREFIX = "sealed:v1:";

function reused(): ApiError {
  return new ApiError(
    409,
    "idempotency_key_reused",
    "This Idempotency-Key was already used for a different request.",
  );
}
