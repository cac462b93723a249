/**
 * `Idempotency-Key` on POST (DESIGN.md section 4): the first successful response for (caller, key) is
 * kept for 24 h and replayed for the same method, path and body, without sending anything again. The same
 * key with a different request is 409 idempotency_key_reused. A request still in flight with the same key
 * is joined, not re-run. Only 2xx answers are kept: a refused or failed request wrote nothing, so
 * retrying it with the same key is safe and may succeed once the cause is fixed.
 */
import { createHash } from "node:crypto";
import { ApiError } from "./errors";
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

export class IdempotencyStore {
  private readonly inFlight = new Map<string, { fingerprint: string; result: Promise<StoredResponse> }>();
  private readonly selectStmt;
  private readonly insertStmt;
  private readonly pruneStmt;

  constructor(
    db: Db,
    private readonly now: () => number = Date.now,
  ) {
    this.selectStmt = db.prepare(
      "SELECT fingerprint, status, body, created_ms FROM idempotency WHERE scope = ? AND key = ?",
    );
    this.insertStmt = db.prepare(
      "INSERT OR REPLACE INTO idempotency (scope, key, fingerprint, status, body, created_ms) VALUES (?, ?, ?, ?, ?, ?)",
    );
    this.pruneStmt = db.prepare("DELETE FROM idempotency WHERE created_ms < ?");
    this.prune();
  }

  /** Deletes records older than 24 h; returns how many. */
  prune(): number {
    return this.pruneStmt.run(this.now() - IDEMPOTENCY_TTL_MS).changes;
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
    const row = this.selectStmt.get(scope, key) as
      { fingerprint: string; status: number; body: string; created_ms: number } | undefined;
    if (row && row.created_ms >= this.now() - IDEMPOTENCY_TTL_MS) {
      if (row.fingerprint !== fp) throw reused();
      return { status: row.status, body: codec.unseal(JSON.parse(row.body)), replayed: true };
    }
    const result = fn();
    this.inFlight.set(id, { fingerprint: fp, result });
    try {
      const r = await result;
      if (r.status >= 200 && r.status < 300)
        this.insertStmt.run(scope, key, fp, r.status, JSON.stringify(codec.seal(r.body)), this.now());
      return { ...r, replayed: false };
    } finally {
      this.inFlight.delete(id);
    }
  }
}

function reused(): ApiError {
  return new ApiError(
    409,
    "idempotency_key_reused",
    "This Idempotency-Key was already used for a different request.",
  );
}
