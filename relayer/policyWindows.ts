/**
 * The counters of signing-policy windows (docs/policies.md, "Windows"), in the data layer (migration
 * 15), so every instance on one PostgreSQL database shares them and they survive restarts.
 *
 * One row per counter (PKP, group, rule, chain, token) holds the uses still inside its period. Taking
 * a use is a reservation made before the signature exists, and it is atomic:
 * - PostgreSQL: one conditional upsert. `ON CONFLICT DO UPDATE` locks the counter's row and evaluates
 *   its WHERE on the newest version of that row, so of 50 concurrent takes against a window of 10,
 *   on any number of instances, exactly 10 find room; the others change nothing.
 * - SQLite: one transaction under the file's write lock (BEGIN IMMEDIATE), which serializes every
 *   writer of the file; the arithmetic is the engine's own (`windowExcess`).
 * Both state the same rule; test/policy/windows.test.ts holds them to the same outcomes.
 *
 * A reservation whose signature is then not produced is released (its use removed by id). Uses leave
 * a window as they age out of its period; they are pruned when the counter is next taken.
 */
import { randomUUID } from "node:crypto";
import { windowExcess, type WindowClaim, type WindowExcess, type WindowUse } from "../enclave";
import type { PolicyWindowCounters } from "../enclave";
import type { DataLayer } from "./db";

/** The database's clock, once per statement: every instance counts periods on the same clock. */
const PG_NOW_MS = "(extract(epoch from statement_timestamp()) * 1000)::bigint";
const LIVE = (now: string) => `(e->>1)::bigint > ${now} - $4::bigint`;

/**
 * $1 key, $2 reservation id, $3 amount, $4 period (ms), $5 count bound, $6 value bound (null: none).
 * A first use creates the row (if it fits at all); later ones rewrite it with the live uses plus this
 * one, only if the live uses leave room. Answers one row when the use was taken, none otherwise.
 */
const PG_TAKE = `
INSERT INTO policy_windows AS w (window_key, uses, updated_ms)
SELECT $1::text, jsonb_build_array(jsonb_build_array($2::text, ${PG_NOW_MS}, $3::numeric::text)), ${PG_NOW_MS}
 WHERE $5::int >= 1 AND ($6::numeric IS NULL OR $3::numeric <= $6::numeric)
ON CONFLICT (window_key) DO UPDATE SET
  uses = COALESCE((SELECT jsonb_agg(e) FROM jsonb_array_elements(w.uses) e WHERE ${LIVE(PG_NOW_MS)}), '[]'::jsonb)
         || jsonb_build_array(jsonb_build_array($2::text, ${PG_NOW_MS}, $3::numeric::text)),
  updated_ms = ${PG_NOW_MS}
WHERE (SELECT COUNT(*) FROM jsonb_array_elements(w.uses) e WHERE ${LIVE(PG_NOW_MS)}) < $5::int
  AND ($6::numeric IS NULL
       OR COALESCE((SELECT SUM((e->>2)::numeric) FROM jsonb_array_elements(w.uses) e WHERE ${LIVE(PG_NOW_MS)}), 0)
          + $3::numeric <= $6::numeric)
RETURNING 1 AS taken`;

const PG_RELEASE = `
UPDATE policy_windows
   SET uses = COALESCE((SELECT jsonb_agg(e) FROM jsonb_array_elements(uses) e WHERE e->>0 <> $2::text), '[]'::jsonb)
 WHERE window_key = $1::text`;

const PG_READ = `SELECT uses, ${PG_NOW_MS} AS now_ms FROM policy_windows WHERE window_key = $1::text`;

type StoredUse = [string, number, string];

function parseUses(stored: unknown): WindowUse[] {
  const list = (typeof stored === "string" ? JSON.parse(stored) : stored) as StoredUse[] | null;
  return (list ?? []).map(([id, atMs, amount]) => ({ id, atMs: Number(atMs), amount: BigInt(amount) }));
}

function storeUses(uses: readonly WindowUse[]): string {
  return JSON.stringify(uses.map((u): StoredUse => [u.id, u.atMs, u.amount.toString()]));
}

/** How many times a refused take on PostgreSQL is retried when the re-read finds room (a use aged out). */
const RETRIES = 3;

export class PolicyWindowStore implements PolicyWindowCounters {
  constructor(
    private readonly db: DataLayer,
    /** SQLite only: the clock periods are counted on (PostgreSQL uses the database's). */
    private readonly nowMs: () => number = Date.now,
  ) {}

  async reserve(claim: WindowClaim): Promise<{ release: () => Promise<void> } | { excess: WindowExcess }> {
    const id = randomUUID();
    const excess =
      this.db.kind === "postgres" ? await this.takePostgres(claim, id) : await this.takeSqlite(claim, id);
    if (excess !== null) return { excess };
    let released = false;
    return {
      release: async () => {
        if (released) return;
        released = true;
        await this.release(claim.key, id);
      },
    };
  }

  /** The uses a counter holds (tests, support). */
  async uses(key: string): Promise<WindowUse[]> {
    const rows = (await this.db.exec(
      this.db.kind === "postgres" ? PG_READ : "SELECT uses FROM policy_windows WHERE window_key = ?",
      [key],
    )) as Array<{ uses: unknown }>;
    return rows.length === 0 ? [] : parseUses(rows[0].uses);
  }

  private async takePostgres(claim: WindowClaim, id: string): Promise<WindowExcess | null> {
    const params = [
      claim.key,
      id,
      claim.amount.toString(),
      claim.periodMs,
      claim.maxCount,
      claim.maxValue === null ? null : claim.maxValue.toString(),
    ];
    for (let attempt = 0; ; attempt++) {
      const taken = await this.db.exec(PG_TAKE, params, { prepared: true });
      if (taken.length === 1) return null;
      // Refused: say which bound, from the row as it is now (off the admitted path).
      const rows = (await this.db.exec(PG_READ, [claim.key], { prepared: true })) as Array<{
        uses: unknown;
        now_ms: string | number;
      }>;
      const uses = rows.length === 0 ? [] : parseUses(rows[0].uses);
      const now = rows.length === 0 ? Date.now() : Number(rows[0].now_ms);
      const excess = windowExcess(claim, uses, now);
      if (excess !== null) return excess;
      // A use aged out (or was released) between the take and the read: there is room now.
      if (attempt >= RETRIES)
        return { field: "window.maxCount", value: String(uses.length + 1), reason: "the window is full" };
    }
  }

  private takeSqlite(claim: WindowClaim, id: string): Promise<WindowExcess | null> {
    return this.db.transaction(async (tx) => {
      const rows = (await tx.exec("SELECT uses FROM policy_windows WHERE window_key = ?", [
        claim.key,
      ])) as Array<{
        uses: string;
      }>;
      const now = this.nowMs();
      const uses = rows.length === 0 ? [] : parseUses(rows[0].uses);
      const excess = windowExcess(claim, uses, now);
      if (excess !== null) return excess;
      const kept = uses.filter((u) => u.atMs > now - claim.periodMs);
      kept.push({ id, atMs: now, amount: claim.amount });
      await tx.exec(
        `INSERT INTO policy_windows (window_key, uses, updated_ms) VALUES (?, ?, ?)
         ON CONFLICT (window_key) DO UPDATE SET uses = excluded.uses, updated_ms = excluded.updated_ms`,
        [claim.key, storeUses(kept), now],
      );
      return null;
    });
  }

  private async release(key: string, id: string): Promise<void> {
    if (this.db.kind === "postgres") {
      await this.db.exec(PG_RELEASE, [key, id], { prepared: true });
      return;
    }
    await this.db.transaction(async (tx) => {
      const rows = (await tx.exec("SELECT uses FROM policy_windows WHERE window_key = ?", [key])) as Array<{
        uses: string;
      }>;
      if (rows.length === 0) return;
      const kept = parseUses(rows[0].uses).filter((u) => u.id !== id);
      await tx.exec("UPDATE policy_windows SET uses = ? WHERE window_key = ?", [storeUses(kept), key]);
    });
  }
}
