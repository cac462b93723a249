/**
 * `Idempotency-Key` on POST (DESIGN.md section 4): the first successful response for (caller, key) is
 * kept for 24 h and replayed for the same method, path and body, without sending anything again. The same
 * key with a different request is 409 idempotency_key_reused. A request still in flight with the same key
 * is joined, not re-run. Only 2xx answers are kept: a refused or failed request wrote nothing, so
 * retrying it with the same key is safe and may succeed once the cause is fixed.
 */
import { createHash } from "node:crypto";
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

/** Stable JSON: object keys sorted, so {"a":1,"b":2} and {"b":2,"a":1} are the same request. */
function canonical(v: unknown): string {
  if (v === null || typeof v !== "object") return JSON.stringify(v) ?? "null";
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  const o = v as Record<string, unknown>;
  return `{${Object.keys(o)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`)
    .join(",")}}`;
}

export function fingerprint(method: string, path: string, body: unknown): string {
  return createHash("sha256")
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

export class IdempotencyStore {
  private readonly inFlight = new Map<string, { fingerprint: string; result: Promise<StoredResponse> }>();
  private readonly records: IdempotencyRecords;

  /**
   * `db`: the relayer's SQLite file (the embedded default) or the shared data layer (PostgreSQL), where
   * a duplicate arriving at another instance finds the first request's claim or answer.
   */
  constructor(
    db: Db | DataLayer,
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
    codec: { seal: (body: unknown) => unknown; unseal: (body: unknown) => unknown } = {
      seal: (b) => b,
      unseal: (b) => b,
    },
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
        return { ...(await this.runClaimed(id, scope, key, fp, claimedMs, fn, codec)), replayed: false };
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
        return { status: row.status, body: codec.unseal(JSON.parse(row.body)), replayed: true };
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
    codec: { seal: (body: unknown) => unknown },
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
        await this.records.complete(scope, key, claimedMs, r.status, JSON.stringify(codec.seal(r.body)));
      else await this.records.remove(scope, key, { created_ms: claimedMs, status: 0 });
    } catch {
      // The work is done and its answer is owed to the caller: a database that cannot keep the record
      // now leaves the claim, which duplicates wait on until its lease ends.
    } finally {
      this.inFlight.delete(id);
    }
    return r;
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

function reused(): ApiError {
  return new ApiError(
    409,
    "idempotency_key_reused",
    "This Idempotency-Key was already used for a different request.",
  );
}
