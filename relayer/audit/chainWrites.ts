/**
 * Path-B writes in the audit log (docs/audit-log.md, "Entry kinds"): transactions the owner's wallet or
 * Safe sent to the registry itself, read from the registry's logs. Path-A writes (sent through the
 * forwarder) are left out here: the relayer recorded each when it answered.
 *
 * The logs come through one function (`RegistryLogSource`), the same reading the webhook chain scanner
 * does today (eth_getLogs on the registry, confirmed blocks only), so it can be pointed at a shared
 * follower of the registry's log without touching the rest. The position is a cursor of its own in the
 * database: the entries of a range and the cursor's move commit together, under the cursor row's lock,
 * so each transaction is recorded once whichever instance reads it.
 */
import { nextConfirmedRange } from "../chain/logs/ranges";
import { getAddress, type JsonRpcProvider, type Log } from "ethers";
import type { Logger } from "pino";
import { parseRegistryLog } from "../chain/abi";
import type { ChainWriteData, PendingEntry, WriteEvent } from "./entries";
import type { AuditLog } from "./log";

/** The registry's logs in [fromBlock, toBlock]. */
export type RegistryLogSource = (fromBlock: number, toBlock: number) => Promise<Log[]>;

export function registryLogsFrom(provider: JsonRpcProvider, registry: string): RegistryLogSource {
  return (fromBlock, toBlock) => provider.getLogs({ address: registry, fromBlock, toBlock });
}

const MAX_RANGE = 2_000;

export interface ChainWritesOptions {
  log: AuditLog;
  provider: JsonRpcProvider;
  logs: RegistryLogSource;
  registry: string;
  forwarder: string;
  chainId: number;
  deployBlock: number;
  confirmations: number;
  logger: Logger;
}

export class AuditChainWrites {
  private readonly cursor: string;
  private cursorExists = false;

  constructor(private readonly o: ChainWritesOptions) {
    this.cursor = `audit:${o.chainId}:${o.registry.toLowerCase()}`;
  }

  /** Reads at most MAX_RANGE confirmed blocks past the cursor; returns how many entries it wrote. */
  async scanOnce(): Promise<number> {
    const { store } = this.o.log;
    const db = store.db;
    if (!this.cursorExists) {
      await store.exec(
        db,
        "INSERT INTO audit_chain_cursor (name, block) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
        [this.cursor, this.o.deployBlock - 1],
      );
      this.cursorExists = true;
    }
    const [row] = await store.exec<{ block: number }>(
      db,
      "SELECT block FROM audit_chain_cursor WHERE name = ?",
      [this.cursor],
    );
    const range = nextConfirmedRange(
      await this.o.provider.getBlockNumber(),
      this.o.confirmations,
      Number(row.block),
      MAX_RANGE,
    );
    if (range === null) return 0;
    const [from, to] = range;
    const entries = await this.entriesOf(await this.o.logs(from, to));
    const written = await db.transaction(async (tx) => {
      const lock = db.kind === "postgres" ? " FOR UPDATE" : "";
      const [now] = await store.exec<{ block: number }>(
        tx,
        "SELECT block FROM audit_chain_cursor WHERE name = ?" + lock,
        [this.cursor],
      );
      if (Number(now.block) !== from - 1) return 0; // another instance read this range meanwhile
      for (const e of entries) await store.enqueue(e, tx);
      await store.exec(tx, "UPDATE audit_chain_cursor SET block = ? WHERE name = ?", [to, this.cursor]);
      return entries.length;
    });
    if (written > 0) this.o.log.chainSoon(new Set(entries.map((e) => e.account)));
    return written;
  }

  /** One entry per (transaction, account) of the path-B transactions among these logs. */
  private async entriesOf(logs: Log[]): Promise<PendingEntry[]> {
    const byTx = new Map<string, Log[]>();
    for (const l of logs) {
      if (l.removed) continue;
      const list = byTx.get(l.transactionHash) ?? [];
      list.push(l);
      byTx.set(l.transactionHash, list);
    }
    const registry = getAddress(this.o.registry);
    const forwarder = getAddress(this.o.forwarder);
    const out: PendingEntry[] = [];
    for (const [hash, txLogs] of byTx) {
      const tx = await this.o.provider.getTransaction(hash);
      if (!tx) throw new Error(`transaction ${hash} of a registry log is not known to the node`);
      const to = tx.to ? getAddress(tx.to) : null;
      if (to === forwarder) continue; // path A: recorded by the relayer when it answered
      // Sent to the registry: the sender is the caller. Sent elsewhere (a Safe, a contract wallet):
      // the contract it called is the registry's caller.
      const sender = (to === registry || to === null ? tx.from : to).toLowerCase();
      const perAccount = new Map<string, WriteEvent[]>();
      for (const l of txLogs) {
        const ev = parseRegistryLog(l.topics, l.data);
        if (!ev) continue;
        const args: Record<string, string> = {};
        ev.fragment.inputs.forEach((input, j) => {
          const v: unknown = ev.args[j];
          args[input.name || String(j)] = typeof v === "string" ? v : String(v);
        });
        const account = String(ev.args[0]);
        const list = perAccount.get(account) ?? [];
        list.push({ name: ev.name, log_index: l.index, args });
        perAccount.set(account, list);
      }
      for (const [account, events] of perAccount) {
        const data: ChainWriteData = {
          principal: { kind: "chain_sender", address: sender },
          operation: events[0].name,
          tx_hash: hash.toLowerCase(),
          block_number: tx.blockNumber ?? txLogs[0].blockNumber,
          events,
        };
        const pkps = events.flatMap((e) => (e.args.pkpId ? [e.args.pkpId.toLowerCase()] : []));
        out.push({
          account,
          kind: "chain_write",
          timeMs: Date.now(),
          data,
          principal: sender,
          cid: null,
          pkps: [...new Set(pkps)].sort(),
          outcome: "ok",
        });
      }
    }
    return out;
  }
}
