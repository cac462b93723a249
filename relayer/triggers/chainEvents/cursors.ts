/**
 * Where each chain-event trigger's logs were read up to (migration 17, `trigger_chain_cursors`), in the
 * data layer so a restart, or another instance on the same PostgreSQL database, continues where the
 * last reader stopped: nothing is skipped, and what is read again is absorbed by the firing id.
 *
 * A cursor belongs to one reading of a spec (`spec_key`): editing the trigger's chain, contract, topics
 * or start block starts it over at the new `fromBlock`. Moving forward never moves a cursor back (two
 * instances finishing out of order); a rewind (a reorganisation) is the one write that may.
 */
import { sql } from "kysely";
import type { DataLayer } from "../../db";
import { prepare } from "../../db";
import type { ChainEventSpec } from "../model";

export interface ChainCursor {
  /** The last block read for the trigger (its logs there were handed over). */
  block: number;
  /** That block's hash when it was read; null when not known (a fresh start or a rewind target). */
  blockHash: string | null;
}

/** The part of a spec a cursor depends on: change any of it and the logs read so far mean nothing. */
export function specKey(spec: ChainEventSpec): string {
  return JSON.stringify([spec.chainId, spec.address, spec.topic0, spec.topics, spec.fromBlock]);
}

const Q = {
  forChain: prepare("triggerChainCursors.forChain", (db, a) =>
    db
      .selectFrom("trigger_chain_cursors")
      .select(["trigger_id", "spec_key", "block", "block_hash"])
      .where("chain_id", "=", a(0)),
  ),
  advance: prepare("triggerChainCursors.advance", (db, a) =>
    db
      .insertInto("trigger_chain_cursors")
      .values({
        trigger_id: a(0),
        chain_id: a(1),
        spec_key: a(2),
        block: a(3),
        block_hash: a(4),
        updated_ms: a(5),
      })
      .onConflict((oc) =>
        oc
          .column("trigger_id")
          .doUpdateSet({
            chain_id: sql`excluded.chain_id`,
            spec_key: sql`excluded.spec_key`,
            block: sql`excluded.block`,
            block_hash: sql`excluded.block_hash`,
            updated_ms: sql`excluded.updated_ms`,
          })
          .where(
            sql<boolean>`trigger_chain_cursors.block < excluded.block OR trigger_chain_cursors.spec_key <> excluded.spec_key`,
          ),
      ),
  ),
  rewind: prepare("triggerChainCursors.rewind", (db, a) =>
    db
      .updateTable("trigger_chain_cursors")
      .set({ block: a(0), block_hash: a(1), updated_ms: a(2) })
      .where("trigger_id", "=", a(3))
      .where("spec_key", "=", a(4))
      .where("block", ">", a(0)),
  ),
  forget: prepare("triggerChainCursors.forget", (db, a) =>
    db.deleteFrom("trigger_chain_cursors").where("trigger_id", "=", a(0)),
  ),
};

export class ChainCursorStore {
  constructor(
    private readonly db: DataLayer,
    private readonly nowMs: () => number = Date.now,
  ) {}

  /** The cursors of the chain's triggers that are still valid for `specs` (trigger id → spec key). */
  async forChain(chainId: number, specs: ReadonlyMap<string, string>): Promise<Map<string, ChainCursor>> {
    const rows = await this.db.all(Q.forChain, [chainId]);
    const out = new Map<string, ChainCursor>();
    for (const r of rows)
      if (specs.get(r.trigger_id) === r.spec_key)
        out.set(r.trigger_id, { block: Number(r.block), blockHash: r.block_hash });
    return out;
  }

  /** Records that the trigger's logs up to `block` were handed over (never moves a cursor back). */
  async advance(triggerId: string, spec: ChainEventSpec, cursor: ChainCursor): Promise<void> {
    await this.db.run(Q.advance, [
      triggerId,
      spec.chainId,
      specKey(spec),
      cursor.block,
      cursor.blockHash,
      this.nowMs(),
    ]);
  }

  /** Moves the cursor back to `cursor` (a reorganisation replaced the block it stood on). */
  async rewind(triggerId: string, spec: ChainEventSpec, cursor: ChainCursor): Promise<void> {
    await this.db.run(Q.rewind, [cursor.block, cursor.blockHash, this.nowMs(), triggerId, specKey(spec)]);
  }

  /** Drops the trigger's cursor (the service calls it when a trigger is deleted). */
  async forget(triggerId: string): Promise<void> {
    await this.db.run(Q.forget, [triggerId]);
  }
}
