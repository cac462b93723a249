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
 *
 * Exactly once across a crash (docs/consistency.md, "Idempotency-Key across a crash"): a write of a
 * claimed request records its signed forward request in the claim's row before broadcasting it
 * (WriteJournal, used by relayer/chain/sender.ts). A claim whose holder died (its heartbeat stopped for
 * a lease; on the embedded SQLite file, every claim found at start) is taken over by the next retry,
 * which runs the route again: each write then finds the request recorded for it and reconciles it with
 * the chain (relayer/chain/send/reconcile.ts) instead of signing a new one. A claim that recorded
 * nothing sent nothing, and runs afresh.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { createHmac, randomBytes } from "node:crypto";
import type { Enclave } from "../enclave";
import type { RecordedForwardRequest, WriteJournal } from "./chain/sender";
import { ApiError } from "./errors";
import { type DataLayer, IdempotencyRecords } from "./db";
import type { IdempotencyRow } from "./db";

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
/** How often the attempt holding a claim says it is alive. */
export const IDEMPOTENCY_HEARTBEAT_MS = 1_000;
/**
 * A claim not refreshed for this long belongs to an attempt whose process died (or lost the database):
 * the next retry takes it over and reconciles. Safe even if the holder is only slow: a taken-over
 * holder can no longer record or send a new request (every update is conditional on the holder), and
 * a request it had recorded is what the taker reconciles.
 */
export const IDEMPOTENCY_CLAIM_LEASE_MS = 10_000;

/** The claim a request holds while its route runs (read by `submit` in relayer/context.ts). */
const running = new AsyncLocalStorage<ClaimedRun>();

/** The claimed Idempotency-Key request this code runs for, if any. */
export function currentClaim(): ClaimedRun | undefined {
  return running.getStore();
}

/** The sealing context of a record: what only the caller has (its API key) and the key itself. */
export function sealContextOf(scope: string, apiKey: string | null, idempotencyKey: string): string {
  return `sigil/idempotency/v2\n${scope}\n${apiKey ?? ""}\n${idempotencyKey}`;
}

/** The enclave's record sealing: all this module needs of the enclave. */
export type RecordSealer = Pick<Enclave, "sealRecord" | "openRecord">;

export interface RunOptions {
  /**
   * Context of the record's sealing key: it must hold what only the caller has (its API key) where there
   * is one, so the database file alone never opens a record.
   */
  sealContext: string;
  /** Rewrites the answer before it is kept (e.g. drops a secret no later caller may see again). */
  keep?: (body: unknown) => unknown;
}

/** The waits of claims (defaults: the constants above; tests shorten them). */
export interface ClaimTiming {
  waitMs: number;
  heartbeatMs: number;
  leaseMs: number;
}

export class IdempotencyStore {
  private readonly inFlight = new Map<string, { fingerprint: string; result: Promise<StoredResponse> }>();
  private readonly records: IdempotencyRecords;

  /**
   * `db`: the relayer's database: the embedded SQLite file, or the shared PostgreSQL where a duplicate
   * arriving at another instance finds the first request's claim or answer.
   */
  constructor(
    db: DataLayer,
    private readonly sealer: RecordSealer,
    private readonly now: () => number = Date.now,
    private readonly timing: ClaimTiming = {
      waitMs: IDEMPOTENCY_WAIT_MS,
      heartbeatMs: IDEMPOTENCY_HEARTBEAT_MS,
      leaseMs: IDEMPOTENCY_CLAIM_LEASE_MS,
    },
  ) {
    this.records = new IdempotencyRecords(db);
    // Records left from before a restart; a failure here is retried by the hourly prune.
    this.prune().catch(() => undefined);
  }

  /**
   * For a database this process alone uses (the embedded SQLite file), at start, before any request
   * can look at a claim: a claim found there is from a request that never answered before a restart.
   * One that recorded nothing sent nothing and is dropped; one that recorded a forward request is left
   * for its retry to take over at once and reconcile. (Shared claims are taken over when their
   * holder's heartbeat stops: another instance may still be running them.)
   */
  recoverAfterRestart(): Promise<void> {
    return this.records.recoverAfterRestart();
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
    const deadline = this.now() + this.timing.waitMs;
    for (;;) {
      const owner = randomBytes(12).toString("hex");
      if (await this.records.claim(scope, key, fp, this.now(), owner)) {
        const run = new ClaimedRun(this.records, scope, key, owner, []);
        return this.runClaimed(id, fp, run, fn, opts);
      }
      const row = await this.records.read(scope, key);
      if (!row) continue; // released or pruned between the claim and the read: claim again
      if (row.created_ms < this.now() - IDEMPOTENCY_TTL_MS) {
        await this.records.remove(scope, key, row);
        continue;
      }
      if (row.fingerprint !== fp) throw reused();
      if (row.status !== 0)
        return { status: row.status, body: this.open(opts.sealContext, row.body), replayed: true };
      if (!this.inFlight.has(id) && row.heartbeat_ms < this.now() - this.timing.leaseMs) {
        // Its holder is gone: this retry continues its work, from what it recorded.
        if (await this.records.takeOver(scope, key, row, owner, this.now())) {
          const run = new ClaimedRun(this.records, scope, key, owner, parseWrites(row));
          return this.runClaimed(id, fp, run, fn, opts);
        }
        continue;
      }
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
    fp: string,
    run: ClaimedRun,
    fn: () => Promise<StoredResponse>,
    opts: RunOptions,
  ): Promise<StoredResponse & { replayed: boolean }> {
    const { scope, key, owner } = run;
    const beat = setInterval(() => {
      this.records.heartbeat(scope, key, owner, this.now()).catch(() => undefined);
    }, this.timing.heartbeatMs);
    beat.unref();
    const result = running.run(run, fn);
    const joined = result.then((r) => ({ ...r, replayed: true }));
    joined.catch(() => undefined);
    this.inFlight.set(id, { fingerprint: fp, result: joined });
    let r: StoredResponse;
    try {
      r = await result;
    } catch (e) {
      clearInterval(beat);
      // A failed request whose writes are all settled wrote nothing more than it was answered for:
      // release the claim so a retry runs afresh. One that may still land (sent, not confirmed) keeps
      // its claim, marked abandoned: the retry takes it over at once and reconciles.
      const done = run.unsettled()
        ? this.records.heartbeat(scope, key, owner, 0)
        : this.records.release(scope, key, owner);
      await done.catch(() => undefined);
      this.inFlight.delete(id);
      throw e;
    }
    clearInterval(beat);
    try {
      if (r.status >= 200 && r.status < 300)
        await this.records.complete(
          scope,
          key,
          owner,
          r.status,
          this.seal(opts.sealContext, opts.keep ? opts.keep(r.body) : r.body),
        );
      else if (run.unsettled()) await this.records.heartbeat(scope, key, owner, 0);
      else await this.records.release(scope, key, owner);
    } catch {
      // The work is done and its answer is owed to the caller: a database that cannot keep the record
      // now leaves the claim, which a retry takes over once its lease ends, and reconciles.
    } finally {
      this.inFlight.delete(id);
    }
    return { ...r, replayed: run.replayed };
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
    "idempotency_key_in_flight",
    "A request with this Idempotency-Key is still running; retry once it has answered.",
    { retryAfter: 1 },
  );
}

/** Marks a sealed body column; a row written before sealing existed holds plain JSON. */
const SEALED_PREFIX = "sealed:v1:";

function reused(): ApiError {
  return new ApiError(
    "idempotency_key_reused",
    "This Idempotency-Key was already used for a different request.",
  );
}

function parseWrites(row: IdempotencyRow): RecordedForwardRequest[] {
  if (!row.writes) return [];
  return JSON.parse(row.writes) as RecordedForwardRequest[];
}

/**
 * One attempt holding a claim: hands each write of the route, in order, its journal (the request an
 * earlier attempt recorded for the same write, and where to record the one about to be sent).
 */
export class ClaimedRun {
  private next = 0;
  private readonly open = new Set<number>();
  /** Some write's answer came from an earlier attempt's request (the answer is a replay). */
  replayed = false;

  constructor(
    private readonly records: IdempotencyRecords,
    readonly scope: string,
    readonly key: string,
    readonly owner: string,
    private readonly writes: RecordedForwardRequest[],
  ) {}

  /** Some write was recorded (so may have been sent) and its fate is not known. */
  unsettled(): boolean {
    return this.open.size > 0;
  }

  /** The journal of the route's next write. */
  nextWrite(): WriteJournal {
    const i = this.next++;
    if (this.writes[i]) this.open.add(i);
    return {
      recorded: () => this.writes[i],
      record: async (r) => {
        const writes = [...this.writes];
        writes[i] = r;
        if (!(await this.records.recordWrites(this.scope, this.key, this.owner, JSON.stringify(writes))))
          throw inProgress();
        this.writes[i] = r;
        this.open.add(i);
      },
      settled: (replayed) => {
        this.open.delete(i);
        if (replayed) this.replayed = true;
      },
    };
  }
}
