/**
 * The billing audit (`npm run audit:billing`, docs/billing.md "Auditing write charges"): the chain's
 * record of path-A writes against the ledger's write charges. Every successful forward request sent by
 * the relayer must have exactly one charge, on the account it acted on; every write charge must name
 * such a request. Both sides are read independently: the chain from the forwarder's events
 * (chainWrites.ts), the ledger from its rows, so a bug in the relayer's charging cannot hide itself.
 */
import BetterSqlite3, { type Database } from "better-sqlite3";
import { openEngine, type Sql } from "../db";
import { replayForwardedWrites, type ChainWrite, type RpcClient } from "./chainWrites";
import { parseWriteReference } from "./references";

export interface LedgerWriteCharge {
  entryId: number;
  accountId: string;
  reference: string;
  amountCents: number;
  operation: string;
}

export type Difference =
  | { kind: "uncharged"; write: ChainWrite }
  | { kind: "charged_twice"; write: ChainWrite; charges: LedgerWriteCharge[] }
  | { kind: "wrong_account"; write: ChainWrite; charge: LedgerWriteCharge }
  | { kind: "stray_charge"; charge: LedgerWriteCharge; reason: string; write?: ChainWrite };

export interface AuditReport {
  chainId: number;
  forwarder: string;
  fromBlock: number;
  toBlock: number;
  /** Writes mined after this block may not be charged yet (see settleMs); they are not reported missing. */
  settledBlock: number;
  /** Forward requests the forwarder executed in the range (all senders). */
  forwardRequests: number;
  /** Of them, successful management writes sent by the relayer: each must be charged once. */
  billableWrites: number;
  writeCharges: number;
  differences: Difference[];
}

/** The columns of a write charge, as every reader of the ledger's write charges selects them. */
export const WRITE_CHARGE_COLUMNS = "id, account_id, reference, amount_cents, operation";
const WRITE_CHARGES_SQL = `SELECT ${WRITE_CHARGE_COLUMNS} FROM ledger_entries
       WHERE kind = 'debit' AND reference LIKE 'write:%' ORDER BY id`;
export type WriteChargeRow = {
  id: number;
  account_id: string;
  reference: string;
  amount_cents: number;
  operation: string;
};

/** Every write charge of a SQLite ledger (debits whose reference starts with `write:`), oldest first. */
export function readWriteCharges(db: Database): LedgerWriteCharge[] {
  return toCharges(db.prepare(WRITE_CHARGES_SQL).all() as WriteChargeRow[]);
}

/** The same from any engine of the data layer (the shared PostgreSQL ledger of several instances). */
export async function readWriteChargesFrom(db: Sql): Promise<LedgerWriteCharge[]> {
  return toCharges((await db.exec(WRITE_CHARGES_SQL)) as WriteChargeRow[]);
}

/** Rows of WRITE_CHARGE_COLUMNS as charges (PostgreSQL may answer its integers as strings). */
export function toCharges(rows: WriteChargeRow[]): LedgerWriteCharge[] {
  return rows.map((r) => ({
    entryId: Number(r.id),
    accountId: r.account_id,
    reference: r.reference,
    amountCents: Number(r.amount_cents),
    operation: r.operation,
  }));
}

export interface CompareInput {
  chainId: number;
  forwarder: string;
  writes: readonly ChainWrite[];
  charges: readonly LedgerWriteCharge[];
  /** The relayer's gas wallets: only their transactions are path A. null: every sender counts. */
  gasWallets: readonly string[] | null;
  settledBlock: number;
}

/** The comparison itself, pure: what the chain says was billable against what the ledger charged. */
export function compareWriteCharges(input: CompareInput): Difference[] {
  const forwarder = input.forwarder.toLowerCase();
  const senders = input.gasWallets ? new Set(input.gasWallets.map((a) => a.toLowerCase())) : null;
  const key = (signer: string, nonce: bigint) => `${signer.toLowerCase()}:${nonce}`;
  const byRequest = new Map<string, ChainWrite>();
  const billableByTx = new Map<string, ChainWrite[]>();
  const isBillable = (w: ChainWrite) =>
    w.success && w.kind === "write" && (senders === null || senders.has(w.sentBy));
  for (const w of input.writes) {
    byRequest.set(key(w.signer, w.nonce), w);
    if (!isBillable(w)) continue;
    const list = billableByTx.get(w.txHash) ?? [];
    list.push(w);
    billableByTx.set(w.txHash, list);
  }

  const differences: Difference[] = [];
  const chargesOf = new Map<ChainWrite, LedgerWriteCharge[]>();
  const attach = (w: ChainWrite, c: LedgerWriteCharge) => chargesOf.set(w, [...(chargesOf.get(w) ?? []), c]);
  for (const c of input.charges) {
    const ref = parseWriteReference(c.reference);
    if (ref === null) {
      differences.push({ kind: "stray_charge", charge: c, reason: "not a write reference" });
      continue;
    }
    if (ref.kind === "legacy_tx") {
      // Written before per-request references: one charge for a request of this transaction, on the
      // charged account. The other requests that transaction carried were never charged (the defect
      // those references had), and the audit says so.
      const candidates = (billableByTx.get(ref.txHash) ?? []).filter(
        (w) => w.accountId === null || w.accountId === c.accountId,
      );
      const free = candidates.find((w) => !chargesOf.has(w)) ?? candidates[0];
      if (free) attach(free, c);
      else
        differences.push({
          kind: "stray_charge",
          charge: c,
          reason: "no successful write of this account in that transaction",
        });
      continue;
    }
    if (ref.chainId !== input.chainId || ref.forwarder !== forwarder) {
      differences.push({ kind: "stray_charge", charge: c, reason: "another chain or forwarder" });
      continue;
    }
    const w = byRequest.get(key(ref.signer, ref.nonce));
    if (!w) {
      differences.push({
        kind: "stray_charge",
        charge: c,
        reason: "the forwarder executed no such request in the audited blocks",
      });
    } else if (!w.success) {
      differences.push({
        kind: "stray_charge",
        charge: c,
        reason: "the request reverted on chain",
        write: w,
      });
    } else if (w.kind === "account_creation") {
      differences.push({ kind: "stray_charge", charge: c, reason: "account creation is free", write: w });
    } else if (!isBillable(w)) {
      differences.push({
        kind: "stray_charge",
        charge: c,
        reason: "not sent by a relayer gas wallet",
        write: w,
      });
    } else attach(w, c);
  }

  for (const list of billableByTx.values()) {
    for (const w of list) {
      const charges = chargesOf.get(w) ?? [];
      if (charges.length === 0) {
        if (w.blockNumber <= input.settledBlock) differences.push({ kind: "uncharged", write: w });
        continue;
      }
      if (charges.length > 1) differences.push({ kind: "charged_twice", write: w, charges });
      for (const c of charges)
        if (w.accountId !== null && c.accountId !== w.accountId)
          differences.push({ kind: "wrong_account", write: w, charge: c });
    }
  }
  return differences;
}

export interface AuditOptions {
  rpc: RpcClient;
  /** The SQLite ledger file; ignored when `databaseUrl` is set. */
  ledgerPath: string;
  /** postgres://…: the shared ledger of several instances (SIGIL_DATABASE_URL), read instead of the file. */
  databaseUrl?: string;
  registry: string;
  forwarder: string;
  /** Checked against the node's (a ledger of another chain would otherwise look all stray). */
  chainId?: number;
  fromBlock: number;
  toBlock?: number;
  gasWallets: readonly string[] | null;
  /**
   * How long a write may take from being mined to its charge being committed (the write-behind
   * window is 50 ms by default). Writes mined less than this before the ledger was read are not
   * reported as uncharged. Default 2,000 ms; 0 when the service is stopped.
   */
  settleMs?: number;
}

/**
 * Reads both sides and compares them. Order matters against a running service: the settled block is
 * taken first, then (after settleMs) the ledger, then the chain up to its head; so every charge read
 * names a request the chain already has, and every write of a settled block had time to be charged.
 */
export async function auditWriteCharges(o: AuditOptions): Promise<AuditReport> {
  const chainId = Number(BigInt((await o.rpc.send("eth_chainId", [])) as string));
  if (o.chainId !== undefined && o.chainId !== chainId)
    throw new Error(`the node reports chain id ${chainId}, not ${o.chainId}`);
  const settledBlock = Number(BigInt((await o.rpc.send("eth_blockNumber", [])) as string));
  const settleMs = o.settleMs ?? 2_000;
  if (settleMs > 0) await new Promise((r) => setTimeout(r, settleMs));
  const charges = await readLedgerCharges(o);
  const toBlock = o.toBlock ?? Number(BigInt((await o.rpc.send("eth_blockNumber", [])) as string));
  const writes = await replayForwardedWrites(o.rpc, {
    registry: o.registry,
    forwarder: o.forwarder,
    fromBlock: o.fromBlock,
    toBlock,
  });
  const senders = o.gasWallets ? new Set(o.gasWallets.map((a) => a.toLowerCase())) : null;
  return {
    chainId,
    forwarder: o.forwarder.toLowerCase(),
    fromBlock: o.fromBlock,
    toBlock,
    settledBlock: Math.min(settledBlock, toBlock),
    forwardRequests: writes.length,
    billableWrites: writes.filter(
      (w) => w.success && w.kind === "write" && (senders === null || senders.has(w.sentBy)),
    ).length,
    writeCharges: charges.length,
    differences: compareWriteCharges({
      chainId,
      forwarder: o.forwarder,
      writes,
      charges,
      gasWallets: o.gasWallets,
      settledBlock: Math.min(settledBlock, toBlock),
    }),
  };
}

async function readLedgerCharges(o: AuditOptions): Promise<LedgerWriteCharge[]> {
  if (o.databaseUrl) {
    // Read only: no migration, and a pool of one (the audit makes one query).
    const layer = openEngine({ databaseUrl: o.databaseUrl, sqlitePath: "", poolSize: 1 });
    try {
      return await readWriteChargesFrom(layer);
    } finally {
      await layer.close();
    }
  }
  const db = new BetterSqlite3(o.ledgerPath, { readonly: true, fileMustExist: true });
  try {
    return readWriteCharges(db);
  } finally {
    db.close();
  }
}

/** The differences as a fixed-width table (one row each), for people. */
export function formatDifferences(differences: readonly Difference[]): string {
  const header = [
    "DIFFERENCE",
    "ACCOUNT",
    "SIGNER",
    "NONCE",
    "TRANSACTION #POSITION",
    "BLOCK",
    "LEDGER ENTRY",
  ];
  const rows = differences.map((d) => {
    const w = d.write;
    const charges = d.kind === "charged_twice" ? d.charges : "charge" in d ? [d.charge] : [];
    const what =
      d.kind === "stray_charge"
        ? `stray charge (${d.reason})`
        : d.kind === "wrong_account"
          ? `charged to account ${d.charge.accountId}`
          : d.kind === "charged_twice"
            ? `charged ${d.charges.length} times`
            : "uncharged write";
    return [
      what,
      w?.accountId ?? charges[0]?.accountId ?? "?",
      w?.signer ?? "-",
      w ? w.nonce.toString() : "-",
      w ? `${w.txHash} #${w.position}` : "-",
      w ? String(w.blockNumber) : "-",
      charges.length ? charges.map((c) => `#${c.entryId} ${c.reference}`).join(", ") : "-",
    ];
  });
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i]))
      .join("  ")
      .trimEnd();
  return [line(header), ...rows.map(line)].join("\n");
}
