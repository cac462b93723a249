/**
 * The write catch-up (docs/billing.md, "Writes charged after a crash"): charges path-A writes that the
 * chain has and the ledger does not. A write is charged after its receipt, through the write-behind
 * buffer; a process killed between the two (SIGKILL, power loss) would otherwise give that write away.
 *
 * It reads the chain exactly as `npm run audit:billing` does (chainWrites.ts) and decides exactly as the
 * audit does (compareWriteCharges): whatever the audit would list as an `uncharged write` is charged
 * here, with the reference the normal path would have used. The ledger's UNIQUE reference makes every
 * charge idempotent: against the normal path charging the same write at the same moment, against a
 * rescan after a crash, and against other instances running their catch-up on a shared database.
 */
import type { Logger } from "pino";
import { blockRanges, DEFAULT_LOG_RANGE } from "../chain/logs/ranges";
import type { DataLayer, Sql } from "../db";
import {
  compareWriteCharges,
  toCharges,
  WRITE_CHARGE_COLUMNS,
  type LedgerWriteCharge,
  type WriteChargeRow,
} from "./audit";
import { replayForwardedWrites, type ChainWrite, type RpcClient } from "./chainWrites";
import type { Ledger } from "./ledger";
import { addKeySpend, normalizeAddress } from "./metering";
import { writeChargeReference } from "./references";

/** What the relayer hands the catch-up: the chain, the deployment, and this instance's gas wallets. */
export interface WriteCatchUpOptions {
  rpc: RpcClient;
  chainId: number;
  registry: string;
  forwarder: string;
  /** Where the scan starts when the ledger has no cursor for this chain and forwarder yet. */
  deployBlock: number;
  /** Blocks newer than `head - confirmations` are left for a later pass (docs/consistency.md). */
  confirmations: number;
  /** This instance's gas wallets: registered in the ledger so every instance's catch-up knows them. */
  gasWallets: readonly string[];
  /** Names this instance's wallets in the ledger (SIGIL_INSTANCE_ID); "" for the unnamed instance. */
  instanceId?: string;
  /** Pause between passes after the first one (ms). Default 300,000 (5 min); 0: the start pass only. */
  everyMs?: number;
  /**
   * How long after reading the head a pass waits before reading the ledger (ms), so that writes mined
   * just before are charged by the normal path (write-behind window: 50 ms) rather than caught up.
   * Default 2,000.
   */
  settleMs?: number;
  logger?: Logger;
  /** Called with the number of writes each pass charged (the metric). */
  onCharged?: (count: number) => void;
}

export interface CatchUpReport {
  fromBlock: number;
  /** Last block scanned; fromBlock - 1 when there was nothing new to scan. */
  toBlock: number;
  /** Billable writes the pass found without a charge, and charged. */
  charged: number;
  /** Found uncharged but not charged: a billable write whose events name no account (logged). */
  skipped: number;
}

export interface WriteCatchUp {
  /** One pass now (never two at once in this process: a second caller waits for the first's pass). */
  runOnce(): Promise<CatchUpReport>;
  /** The first pass at once, in the background, then one every `everyMs`. */
  start(): void;
  /** Stops the timer and waits for a pass in progress. */
  stop(): Promise<void>;
}

/** The operation recorded on caught-up charges (the history's `operation`): the route is not on chain. */
export const CAUGHT_UP_OPERATION = "write_caught_up";

export interface CatchUpLedger {
  db: DataLayer;
  ledger: Ledger;
  /** The current write price (prices can change between the write and its catch-up). */
  writeCents: () => number;
}

export function createWriteCatchUp(l: CatchUpLedger, o: WriteCatchUpOptions): WriteCatchUp {
  const scope = `${o.chainId}:${o.forwarder.toLowerCase()}`;
  const everyMs = o.everyMs ?? 300_000;
  const settleMs = o.settleMs ?? 2_000;
  let registered = false;
  let current: Promise<CatchUpReport> | null = null;
  let timer: NodeJS.Timeout | null = null;
  let stopped = false;
  // The settle pause ends early on stop(): closing the relayer never waits for it.
  let wake: (() => void) | null = null;
  const settle = (ms: number) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(t);
        resolve();
      };
    }).finally(() => (wake = null));

  async function pass(): Promise<CatchUpReport> {
    if (!registered) {
      await registerGasWallets(l.db, o.gasWallets, o.instanceId ?? "");
      registered = true;
    }
    const head = Number(BigInt((await o.rpc.send("eth_blockNumber", [])) as string));
    const target = head - Math.max(0, o.confirmations);
    if (settleMs > 0) await settle(settleMs);
    if (stopped) return { fromBlock: 0, toBlock: -1, charged: 0, skipped: 0 };
    const start = (await readCursor(l.db, scope)) ?? o.deployBlock;
    const report: CatchUpReport = { fromBlock: start, toBlock: start - 1, charged: 0, skipped: 0 };
    const senders = await readGasWallets(l.db);
    for (const [from, to] of blockRanges(start, target, DEFAULT_LOG_RANGE)) {
      if (stopped) break;
      const writes = await replayForwardedWrites(o.rpc, {
        registry: o.registry,
        forwarder: o.forwarder,
        fromBlock: from,
        toBlock: to,
      });
      const { charged, skipped } = await chargeMissing(writes, senders, to);
      report.toBlock = to;
      report.charged += charged;
      report.skipped += skipped;
    }
    return report;
  }

  /** Charges the range's uncharged writes and moves the cursor past `toBlock`, in one transaction. */
  async function chargeMissing(writes: ChainWrite[], senders: string[], toBlock: number) {
    const charges = await readChargesFor(l.db, writes, o.chainId, o.forwarder);
    const missing = compareWriteCharges({
      chainId: o.chainId,
      forwarder: o.forwarder,
      writes,
      charges,
      gasWallets: senders,
      settledBlock: toBlock,
    }).flatMap((d) => (d.kind === "uncharged" ? [d.write] : []));
    const chargeable = missing.filter((w) => w.accountId !== null);
    for (const w of missing)
      if (w.accountId === null)
        o.logger?.error(
          { signer: w.signer, nonce: w.nonce.toString(), tx: w.txHash },
          "billing catch-up: a billable write names no account; left uncharged",
        );
    const cents = l.writeCents();
    const applied = await l.db.transaction(async (tx) => {
      const entries =
        cents > 0
          ? chargeable.map((w) => ({
              accountId: w.accountId!,
              kind: "debit" as const,
              amountCents: cents,
              reference: writeChargeReference({
                chainId: o.chainId,
                forwarder: o.forwarder,
                signer: w.signer,
                nonce: w.nonce,
              }),
              keyAddress: normalizeAddress(w.signer),
              operation: CAUGHT_UP_OPERATION,
            }))
          : [];
      // Recorded in full even where the balance goes below zero: the write happened (see Metering).
      const results = await l.ledger.applyBatch(tx, entries);
      const done = entries.flatMap((e, i) =>
        results[i].applied ? [{ ...e, balanceAfter: results[i].balanceCents }] : [],
      );
      for (const e of done) await addKeySpend(tx, e.keyAddress, e.accountId, e.amountCents);
      await advanceCursor(tx, scope, toBlock + 1);
      return done;
    });
    for (const e of applied)
      o.logger?.warn(
        {
          account_id: e.accountId,
          reference: e.reference,
          cents: e.amountCents,
          balance_after_cents: e.balanceAfter,
        },
        "billing catch-up: charged a write whose charge had been lost",
      );
    if (applied.length > 0) o.onCharged?.(applied.length);
    return { charged: applied.length, skipped: missing.length - chargeable.length };
  }

  function runOnce(): Promise<CatchUpReport> {
    if (current) return current;
    current = pass().finally(() => (current = null));
    return current;
  }

  function background(): void {
    runOnce().catch((err: unknown) =>
      o.logger?.warn(
        { err: err instanceof Error ? err.message : String(err) },
        "billing catch-up pass failed; retried at the next pass",
      ),
    );
  }

  return {
    runOnce,
    start() {
      if (stopped || timer) return;
      background();
      if (everyMs > 0) {
        timer = setInterval(background, everyMs);
        timer.unref();
      }
    },
    async stop() {
      stopped = true;
      wake?.();
      if (timer) clearInterval(timer);
      timer = null;
      await current?.catch(() => undefined);
    },
  };
}

// Plain SQL (one statement per engine where placeholders differ): three small queries on tables only
// this module uses.
const ph = (s: Sql, i: number) => (s.kind === "postgres" ? `$${i}` : "?");

async function registerGasWallets(db: Sql, wallets: readonly string[], instanceId: string): Promise<void> {
  for (const w of wallets)
    await db.exec(
      `INSERT INTO billing_gas_wallets (address, instance_id, registered_at) VALUES (${ph(db, 1)}, ${ph(db, 2)}, ${ph(db, 3)})
       ON CONFLICT (address) DO NOTHING`,
      [normalizeAddress(w), instanceId, Date.now()],
    );
}

async function readGasWallets(db: Sql): Promise<string[]> {
  const rows = (await db.exec("SELECT address FROM billing_gas_wallets")) as Array<{ address: string }>;
  return rows.map((r) => r.address);
}

/** The cursor's next block to scan, or null before the first pass for this chain and forwarder. */
export async function readCursor(db: Sql, scope: string): Promise<number | null> {
  const rows = (await db.exec(`SELECT next_block FROM write_catch_up_cursors WHERE scope = ${ph(db, 1)}`, [
    scope,
  ])) as Array<{ next_block: number | string }>;
  return rows.length ? Number(rows[0].next_block) : null;
}

/** Only forward: two instances finishing passes out of order never move it back. */
async function advanceCursor(tx: Sql, scope: string, nextBlock: number): Promise<void> {
  await tx.exec(
    `INSERT INTO write_catch_up_cursors (scope, next_block, updated_at) VALUES (${ph(tx, 1)}, ${ph(tx, 2)}, ${ph(tx, 3)})
     ON CONFLICT (scope) DO UPDATE SET
       next_block = CASE WHEN excluded.next_block > write_catch_up_cursors.next_block
                         THEN excluded.next_block ELSE write_catch_up_cursors.next_block END,
       updated_at = excluded.updated_at`,
    [scope, nextBlock, Date.now()],
  );
}

const IN_LIST = 200;

/**
 * The ledger's charges for these writes, in every form the audit understands: the per-request
 * reference, and the old `write:<transaction hash>` one (a write already charged that way is left
 * alone). Looked up by reference (UNIQUE, indexed) rather than reading every write charge.
 */
async function readChargesFor(
  db: Sql,
  writes: readonly ChainWrite[],
  chainId: number,
  forwarder: string,
): Promise<LedgerWriteCharge[]> {
  const refs = new Set<string>();
  for (const w of writes) {
    refs.add(writeChargeReference({ chainId, forwarder, signer: w.signer, nonce: w.nonce }));
    refs.add(`write:${w.txHash}`);
  }
  const all = [...refs];
  const out: LedgerWriteCharge[] = [];
  for (let i = 0; i < all.length; i += IN_LIST) {
    const chunk = all.slice(i, i + IN_LIST);
    const rows = (await db.exec(
      `SELECT ${WRITE_CHARGE_COLUMNS} FROM ledger_entries
       WHERE kind = 'debit' AND reference IN (${chunk.map((_, j) => ph(db, j + 1)).join(", ")})`,
      chunk,
    )) as WriteChargeRow[];
    out.push(...toCharges(rows));
  }
  return out;
}
