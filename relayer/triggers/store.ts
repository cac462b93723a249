/**
 * Triggers and their runs on the data layer (migration 16), the same statements on SQLite and
 * PostgreSQL. Two rules live here because they must hold across instances:
 *
 * - A firing is stored once: `UNIQUE (trigger_id, firing_id)`; `fire` looks the pair up under the
 *   trigger's row lock (PostgreSQL `FOR UPDATE`, SQLite's file write lock), where it also counts the
 *   trigger's queued runs and its runs of the last minute, so concurrent firings cannot together pass
 *   `max_queued_runs` or `runs_per_minute`.
 * - A run is claimed by one instance: the claim's UPDATE re-checks `status = 'queued'` or an expired
 *   lease on the row it changes (PostgreSQL re-evaluates the WHERE on the newest row version), so of
 *   two instances racing for one run, one changes it and the other changes nothing. A serial trigger's
 *   run is claimed only while no other run of it holds a live lease (checked under the trigger's lock).
 */
import { randomUUID } from "node:crypto";
import type { DataLayer, Sql } from "../db";
import type { Schema } from "../db/schema";
import type { Trigger, TriggerKind } from "./model";

export type TriggerRow = Schema["triggers"];
export type RunRow = Schema["trigger_runs"];
export type RunStatus = "queued" | "running" | "succeeded" | "failed" | "skipped";

/** `?` placeholders for both engines (PostgreSQL numbers them). */
function q(kind: Sql["kind"], text: string): string {
  if (kind === "sqlite") return text;
  let i = 0;
  return text.replace(/\?/g, () => `$${++i}`);
}

async function exec<R>(db: Sql, text: string, params: readonly unknown[] = []): Promise<R[]> {
  return (await db.exec(q(db.kind, text), params)) as R[];
}

const num = (v: unknown): number => Number(v);
const numOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

/** A row as the model's Trigger (plus what only the service sees: paused, the sealed secret). */
export interface StoredTrigger extends Trigger {
  paused: string | null;
  hmacSecretSealed: string | null;
  lastFiredMs: number | null;
}

export function triggerOf(r: TriggerRow): StoredTrigger {
  const schedule = r.schedule === null ? null : (JSON.parse(r.schedule) as Trigger["schedule"]);
  return {
    id: r.trigger_id,
    accountId: r.account_id,
    name: r.name,
    kind: r.kind as TriggerKind,
    enabled: num(r.enabled) === 1,
    paused: r.paused,
    cid: r.cid,
    pkpIds: JSON.parse(r.pkp_ids) as string[],
    jsParams: JSON.parse(r.js_params) as unknown,
    runAsKeyAddress: r.run_as,
    schedule,
    webhook:
      r.hook_id === null
        ? null
        : { hookId: r.hook_id, hmac: r.hmac === null ? null : (JSON.parse(r.hmac) as never) },
    chainEvent: r.chain_event === null ? null : (JSON.parse(r.chain_event) as Trigger["chainEvent"]),
    limits: {
      runsPerMinute: num(r.runs_per_minute),
      maxQueuedRuns: num(r.max_queued_runs),
      concurrency: r.concurrency as Trigger["limits"]["concurrency"],
    },
    retry: { maxAttempts: num(r.max_attempts), backoffMs: num(r.backoff_ms) },
    createdAt: num(r.created_ms),
    updatedAt: num(r.updated_ms),
    hmacSecretSealed: r.hmac_secret_sealed,
    lastFiredMs: numOrNull(r.last_fired_ms),
  };
}

export function rowOf(t: StoredTrigger): TriggerRow {
  return {
    trigger_id: t.id,
    account_id: t.accountId,
    name: t.name,
    kind: t.kind,
    enabled: t.enabled ? 1 : 0,
    paused: t.paused,
    cid: t.cid,
    pkp_ids: JSON.stringify(t.pkpIds),
    js_params: JSON.stringify(t.jsParams ?? null),
    run_as: t.runAsKeyAddress,
    schedule: t.schedule === null ? null : JSON.stringify(t.schedule),
    hook_id: t.webhook?.hookId ?? null,
    hmac: t.webhook?.hmac ? JSON.stringify(t.webhook.hmac) : null,
    hmac_secret_sealed: t.hmacSecretSealed,
    chain_event: t.chainEvent === null ? null : JSON.stringify(t.chainEvent),
    runs_per_minute: t.limits.runsPerMinute,
    max_queued_runs: t.limits.maxQueuedRuns,
    concurrency: t.limits.concurrency,
    max_attempts: t.retry.maxAttempts,
    backoff_ms: t.retry.backoffMs,
    last_fired_ms: t.lastFiredMs,
    created_ms: t.createdAt,
    updated_ms: t.updatedAt,
  };
}

const TRIGGER_COLUMNS = [
  "trigger_id",
  "account_id",
  "name",
  "kind",
  "enabled",
  "paused",
  "cid",
  "pkp_ids",
  "js_params",
  "run_as",
  "schedule",
  "hook_id",
  "hmac",
  "hmac_secret_sealed",
  "chain_event",
  "runs_per_minute",
  "max_queued_runs",
  "concurrency",
  "max_attempts",
  "backoff_ms",
  "last_fired_ms",
  "created_ms",
  "updated_ms",
] as const;

/** Why `fire` refused a firing: the trigger's queue is full, or it fired its runs of this minute. */
export type FireRefusal = "queue_full" | "rate";

export type FireResult =
  | { runId: string; created: boolean }
  | { refused: FireRefusal; limit: number }
  | { paused: string }
  | { missing: true };

export interface NewRun {
  triggerId: string;
  firingId: string;
  firedMs: number;
  input: string;
  inputSummary: string;
}

export class TriggerStore {
  constructor(readonly db: DataLayer) {}

  async insert(t: StoredTrigger): Promise<void> {
    const row = rowOf(t);
    await this.db.transaction((tx) =>
      exec(
        tx,
        `INSERT INTO triggers (${TRIGGER_COLUMNS.join(", ")}) VALUES (${TRIGGER_COLUMNS.map(() => "?").join(", ")})`,
        TRIGGER_COLUMNS.map((c) => row[c]),
      ),
    );
  }

  /** Writes every column but the id, account, creation time, last fired time and pause (setPaused owns it). */
  async update(t: StoredTrigger): Promise<boolean> {
    const row = rowOf(t);
    const cols = TRIGGER_COLUMNS.filter(
      (c) => !["trigger_id", "account_id", "created_ms", "last_fired_ms", "paused"].includes(c),
    );
    const rows = await this.db.transaction((tx) =>
      exec(
        tx,
        `UPDATE triggers SET ${cols.map((c) => `${c} = ?`).join(", ")} WHERE trigger_id = ? AND account_id = ? RETURNING trigger_id`,
        [...cols.map((c) => row[c]), t.id, t.accountId],
      ),
    );
    return rows.length === 1;
  }

  async count(accountId: string): Promise<number> {
    const [r] = await exec<{ n: unknown }>(
      this.db,
      "SELECT COUNT(*) AS n FROM triggers WHERE account_id = ?",
      [accountId],
    );
    return num(r.n);
  }

  async list(accountId: string, limit: number, offset: number): Promise<StoredTrigger[]> {
    const rows = await exec<TriggerRow>(
      this.db,
      `SELECT ${TRIGGER_COLUMNS.join(", ")} FROM triggers WHERE account_id = ? ORDER BY created_ms, trigger_id LIMIT ? OFFSET ?`,
      [accountId, limit, offset],
    );
    return rows.map(triggerOf);
  }

  /** The trigger with this id in this account (another account's is not found). */
  async get(accountId: string, id: string): Promise<StoredTrigger | null> {
    const rows = await exec<TriggerRow>(
      this.db,
      `SELECT ${TRIGGER_COLUMNS.join(", ")} FROM triggers WHERE trigger_id = ? AND account_id = ?`,
      [id, accountId],
    );
    return rows.length ? triggerOf(rows[0]) : null;
  }

  async byId(id: string, db: Sql = this.db): Promise<StoredTrigger | null> {
    const rows = await exec<TriggerRow>(
      db,
      `SELECT ${TRIGGER_COLUMNS.join(", ")} FROM triggers WHERE trigger_id = ?`,
      [id],
    );
    return rows.length ? triggerOf(rows[0]) : null;
  }

  async byHookId(hookId: string): Promise<StoredTrigger | null> {
    const rows = await exec<TriggerRow>(
      this.db,
      `SELECT ${TRIGGER_COLUMNS.join(", ")} FROM triggers WHERE hook_id = ?`,
      [hookId],
    );
    return rows.length ? triggerOf(rows[0]) : null;
  }

  async enabledOfKind(kind: TriggerKind): Promise<StoredTrigger[]> {
    const rows = await exec<TriggerRow>(
      this.db,
      `SELECT ${TRIGGER_COLUMNS.join(", ")} FROM triggers WHERE kind = ? AND enabled = 1 AND paused IS NULL ORDER BY created_ms, trigger_id`,
      [kind],
    );
    return rows.map(triggerOf);
  }

  /** Deletes the trigger and its run history; false when there was no such trigger in the account. */
  async delete(accountId: string, id: string): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      const gone = await exec(
        tx,
        "DELETE FROM triggers WHERE trigger_id = ? AND account_id = ? RETURNING trigger_id",
        [id, accountId],
      );
      if (gone.length === 0) return false;
      await exec(tx, "DELETE FROM trigger_runs WHERE trigger_id = ?", [id]);
      return true;
    });
  }

  /** Pauses (reason) or resumes (null) every trigger of the account; answers the ids that changed. */
  async setPaused(accountId: string, reason: string | null, nowMs: number): Promise<string[]> {
    const rows = await this.db.transaction((tx) =>
      exec<{ trigger_id: string }>(
        tx,
        reason === null
          ? "UPDATE triggers SET paused = NULL, updated_ms = ? WHERE account_id = ? AND paused IS NOT NULL RETURNING trigger_id"
          : "UPDATE triggers SET paused = ?, updated_ms = ? WHERE account_id = ? AND paused IS NULL RETURNING trigger_id",
        reason === null ? [nowMs, accountId] : [reason, nowMs, accountId],
      ),
    );
    return rows.map((r) => r.trigger_id);
  }

  /** Accounts with at least one paused trigger (what a top-up may resume). */
  async pausedAccounts(): Promise<string[]> {
    const rows = await exec<{ account_id: string }>(
      this.db,
      "SELECT DISTINCT account_id FROM triggers WHERE paused IS NOT NULL",
    );
    return rows.map((r) => r.account_id);
  }

  /** A schedule's last fired time, moved forward only (two instances may both write it). */
  async setLastFired(id: string, ms: number): Promise<void> {
    await this.db.transaction((tx) =>
      exec(
        tx,
        "UPDATE triggers SET last_fired_ms = ? WHERE trigger_id = ? AND (last_fired_ms IS NULL OR last_fired_ms < ?)",
        [ms, id, ms],
      ),
    );
  }

  /**
   * Stores a firing once, under the trigger's lock: a disabled or deleted trigger is missing and a
   * paused one answers why (the row as it is now, whatever the caller read before); a known firing id
   * answers its run; else the queue and the per-minute rate are checked and the run is inserted `queued`.
   */
  async fire(run: NewRun, nowMs: number): Promise<FireResult> {
    return this.db.transaction(async (tx) => {
      const lock = tx.kind === "postgres" ? " FOR UPDATE" : "";
      const trig = await exec<{
        max_queued_runs: unknown;
        runs_per_minute: unknown;
        account_id: string;
        enabled: unknown;
        paused: string | null;
      }>(
        tx,
        `SELECT max_queued_runs, runs_per_minute, account_id, enabled, paused FROM triggers WHERE trigger_id = ?${lock}`,
        [run.triggerId],
      );
      if (trig.length === 0 || num(trig[0].enabled) !== 1) return { missing: true as const };
      if (trig[0].paused !== null) return { paused: trig[0].paused };
      const known = await exec<{ run_id: string }>(
        tx,
        "SELECT run_id FROM trigger_runs WHERE trigger_id = ? AND firing_id = ?",
        [run.triggerId, run.firingId],
      );
      if (known.length) return { runId: known[0].run_id, created: false };
      const maxQueued = num(trig[0].max_queued_runs);
      const [queued] = await exec<{ n: unknown }>(
        tx,
        "SELECT COUNT(*) AS n FROM trigger_runs WHERE trigger_id = ? AND status = 'queued'",
        [run.triggerId],
      );
      if (num(queued.n) >= maxQueued) return { refused: "queue_full" as const, limit: maxQueued };
      const perMinute = num(trig[0].runs_per_minute);
      const [recent] = await exec<{ n: unknown }>(
        tx,
        "SELECT COUNT(*) AS n FROM trigger_runs WHERE trigger_id = ? AND created_ms > ?",
        [run.triggerId, nowMs - 60_000],
      );
      if (num(recent.n) >= perMinute) return { refused: "rate" as const, limit: perMinute };
      const runId = "trun_" + randomUUID().replace(/-/g, "");
      await exec(
        tx,
        `INSERT INTO trigger_runs (run_id, trigger_id, account_id, firing_id, status, skip_reason, attempt,
           next_attempt_ms, lease_owner, lease_expires_ms, input, input_summary, response, error_code,
           error_message, logs, charged_cents, fired_ms, created_ms, started_ms, finished_ms, instance)
         VALUES (?, ?, ?, ?, 'queued', NULL, 0, ?, NULL, NULL, ?, ?, NULL, NULL, NULL, NULL, 0, ?, ?, NULL, NULL, NULL)`,
        [
          runId,
          run.triggerId,
          trig[0].account_id,
          run.firingId,
          nowMs,
          run.input,
          run.inputSummary,
          run.firedMs,
          nowMs,
        ],
      );
      return { runId, created: true };
    });
  }

  /**
   * Claims one due run for `owner` until `nowMs + leaseMs`: a queued run whose time has come, or a
   * running one whose lease expired (its instance died), of an enabled, unpaused trigger; a serial
   * trigger's only while none of its runs holds a live lease; none of the triggers in `held` (the
   * runner's background class holds them back). Answers the run with `attempt` counted.
   */
  async claim(
    owner: string,
    nowMs: number,
    leaseMs: number,
    held: readonly string[] = [],
  ): Promise<RunRow | null> {
    return this.db.transaction(async (tx) => {
      const notHeld = held.length ? ` AND r.trigger_id NOT IN (${held.map(() => "?").join(", ")})` : "";
      const candidates = await exec<{ run_id: string; trigger_id: string; concurrency: string }>(
        tx,
        `SELECT r.run_id, r.trigger_id, t.concurrency FROM trigger_runs r JOIN triggers t ON t.trigger_id = r.trigger_id
          WHERE ((r.status = 'queued' AND r.next_attempt_ms <= ?) OR (r.status = 'running' AND r.lease_expires_ms < ?))
            AND t.enabled = 1 AND t.paused IS NULL${notHeld}
          ORDER BY r.next_attempt_ms, r.created_ms LIMIT 16`,
        [nowMs, nowMs, ...held],
      );
      for (const c of candidates) {
        if (c.concurrency === "serial") {
          if (tx.kind === "postgres")
            await exec(tx, "SELECT trigger_id FROM triggers WHERE trigger_id = ? FOR UPDATE", [c.trigger_id]);
          const busy = await exec(
            tx,
            "SELECT run_id FROM trigger_runs WHERE trigger_id = ? AND status = 'running' AND lease_expires_ms >= ? AND run_id <> ?",
            [c.trigger_id, nowMs, c.run_id],
          );
          if (busy.length) continue;
        }
        const rows = await exec<RunRow>(
          tx,
          `UPDATE trigger_runs SET status = 'running', attempt = attempt + 1, lease_owner = ?, lease_expires_ms = ?,
             started_ms = ?, instance = ?
           WHERE run_id = ? AND ((status = 'queued' AND next_attempt_ms <= ?) OR (status = 'running' AND lease_expires_ms < ?))
           RETURNING *`,
          [owner, nowMs + leaseMs, nowMs, owner, c.run_id, nowMs, nowMs],
        );
        if (rows.length === 1) return rows[0];
      }
      return null;
    });
  }

  /** Extends a lease this owner still holds; false when it lost it. */
  async renew(runId: string, owner: string, untilMs: number): Promise<boolean> {
    const rows = await this.db.transaction((tx) =>
      exec(
        tx,
        "UPDATE trigger_runs SET lease_expires_ms = ? WHERE run_id = ? AND lease_owner = ? AND status = 'running' RETURNING run_id",
        [untilMs, runId, owner],
      ),
    );
    return rows.length === 1;
  }

  /** Ends a run this owner holds with its final status; false when the lease was lost meanwhile. */
  async finish(
    runId: string,
    owner: string | null,
    end: {
      status: "succeeded" | "failed" | "skipped";
      skipReason?: string | null;
      response?: string | null;
      errorCode?: string | null;
      errorMessage?: string | null;
      logs?: string | null;
      chargedCents?: number;
      nowMs: number;
    },
  ): Promise<boolean> {
    const rows = await this.db.transaction((tx) =>
      exec(
        tx,
        `UPDATE trigger_runs SET status = ?, skip_reason = ?, response = ?, error_code = ?, error_message = ?, logs = ?,
           charged_cents = ?, finished_ms = ?, lease_owner = NULL, lease_expires_ms = NULL
         WHERE run_id = ? AND ${owner === null ? "status = 'queued'" : "lease_owner = ? AND status = 'running'"} RETURNING run_id`,
        [
          end.status,
          end.skipReason ?? null,
          end.response ?? null,
          end.errorCode ?? null,
          end.errorMessage ?? null,
          end.logs ?? null,
          end.chargedCents ?? 0,
          end.nowMs,
          runId,
          ...(owner === null ? [] : [owner]),
        ],
      ),
    );
    return rows.length === 1;
  }

  /** Puts a run this owner holds back in the queue for another attempt at `atMs`. */
  async retryLater(
    runId: string,
    owner: string,
    atMs: number,
    error: { code: string; message: string },
  ): Promise<void> {
    await this.db.transaction((tx) =>
      exec(
        tx,
        `UPDATE trigger_runs SET status = 'queued', next_attempt_ms = ?, lease_owner = NULL, lease_expires_ms = NULL,
           error_code = ?, error_message = ?
         WHERE run_id = ? AND lease_owner = ? AND status = 'running'`,
        [atMs, error.code, error.message, runId, owner],
      ),
    );
  }

  async runs(
    triggerId: string,
    opts: { status?: RunStatus; limit: number; offset: number },
  ): Promise<{ items: RunRow[]; total: number }> {
    const where = `trigger_id = ?${opts.status ? " AND status = ?" : ""}`;
    const args = [triggerId, ...(opts.status ? [opts.status] : [])];
    const items = await exec<RunRow>(
      this.db,
      `SELECT * FROM trigger_runs WHERE ${where} ORDER BY created_ms DESC, run_id DESC LIMIT ? OFFSET ?`,
      [...args, opts.limit, opts.offset],
    );
    const [t] = await exec<{ n: unknown }>(
      this.db,
      `SELECT COUNT(*) AS n FROM trigger_runs WHERE ${where}`,
      args,
    );
    return { items, total: num(t.n) };
  }

  async run(triggerId: string, runId: string): Promise<RunRow | null> {
    const rows = await exec<RunRow>(
      this.db,
      "SELECT * FROM trigger_runs WHERE trigger_id = ? AND run_id = ?",
      [triggerId, runId],
    );
    return rows.length ? rows[0] : null;
  }

  async runByFiring(triggerId: string, firingId: string): Promise<RunRow | null> {
    const rows = await exec<RunRow>(
      this.db,
      "SELECT * FROM trigger_runs WHERE trigger_id = ? AND firing_id = ?",
      [triggerId, firingId],
    );
    return rows.length ? rows[0] : null;
  }
}
