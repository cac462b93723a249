/**
 * The audit log's tables (migration 14, docs/audit-log.md "Several instances"):
 *
 *  - `audit_pending`: entries as requests wrote them, before answering. An INSERT, nothing else: no lock,
 *    no read of the chain's head, so the request path never waits for another request of the account.
 *  - `audit_entries`: each account's chain. `chain(account)` moves the account's pending rows into it in
 *    one transaction that holds the account's `audit_heads` row (SELECT … FOR UPDATE on PostgreSQL; SQLite
 *    runs one writer at a time anyway): one writer per account at a time, whichever instance it runs on,
 *    and accounts never wait for each other. A pending row is deleted in the transaction that chains it,
 *    so each is chained exactly once; a crash before the commit leaves it pending for the next pass.
 *  - `audit_checkpoints`: the head (sequence, hash) at least every `checkpointEvery` entries or
 *    `checkpointMs`, signed by the enclave's identity key, written in the transaction that chained it
 *    (on SQLite's writer thread, in the next one: the thread holds no key, sqliteWriter.ts).
 *
 * On SQLite in a file, the request path's writes and the chaining run on a writer thread with its own
 * connection (sqliteWriter.ts, docs/audit-log.md "What it costs"), which chains recorded entries in the
 * transaction that writes them (it is the file's one writer of these tables: no pending step); the
 * reads, and the rare writes of exports, sweeps, path-B entries and retention, stay on the data
 * layer's connection.
 *
 * SQL is written by hand here (placeholders adapted per engine): these tables belong to this module alone.
 */
import type { Statement } from "better-sqlite3";
import { canonicalJson } from "../../enclave";
import type { DataLayer, Sql } from "../db";
import type { AuditData, AuditKind, PendingEntry } from "./entries";
import { GENESIS_HASH, checkpointDigest } from "./format";
import { ENTRY_COLUMNS, chainOnto, type PendingRow } from "./entryHash";
import { SqliteWriterThread } from "./sqliteWriter";

export interface CheckpointSigner {
  /** The identity key's address (the attestation document's identity). */
  readonly address: string;
  /** The identity key's signature over a checkpoint digest (Enclave.signAuditCheckpoint). */
  sign(digest: string): string;
}

export interface AuditStoreOptions {
  /** Sign a checkpoint once the head is this many entries past the last one (default 100). */
  checkpointEvery?: number;
  /** …or once the last one is this old and entries were chained since (default 5 minutes). */
  checkpointMs?: number;
  /** Rows chained per transaction (default 200). */
  batch?: number;
  /**
   * SQLite in a file: write pending entries from a thread of their own (sqliteWriter.ts; default true).
   * False: on the data layer's connection, in the main thread.
   */
  writerThread?: boolean;
  /**
   * Group commit: how long (ms) a request's entry may wait for others to share its transaction while
   * `moreSoon` says more are coming (default DEFAULT_GROUP_COMMIT_MS; 0: never wait).
   */
  groupCommitMs?: number;
  /**
   * Whether more entries are about to be recorded (the relayer: runs are in the executor, each of which
   * records one when it ends). Absent: never wait.
   */
  moreSoon?: () => boolean;
  now?: () => number;
}

/**
 * The group-commit window (docs/audit-log.md, "What it costs"): a transaction costs about the same
 * for one entry as for fifty (the SQLite writer thread's round trip and commit, PostgreSQL's round trip
 * and statement), and under load requests finish a couple of milliseconds apart, so without waiting
 * each entry would be a transaction of its own. Its cost per entry, not the entry, was the log's.
 */
export const DEFAULT_GROUP_COMMIT_MS = 4;

export interface StoredEntry {
  account: string;
  seq: number;
  prev_hash: string;
  hash: string;
  kind: AuditKind;
  time_ms: number;
  data: AuditData;
}

export interface StoredCheckpoint {
  account: string;
  seq: number;
  head_hash: string;
  time_ms: number;
  signer: string;
  signature: string;
  /** Where the checkpoint was anchored on chain (anchor.ts), when it was. */
  anchor?: CheckpointAnchor;
}

/** The transaction that emitted a checkpoint's AuditCheckpointAnchored event. */
export interface CheckpointAnchor {
  chain_id: number;
  contract: string;
  tx_hash: string;
  block_number: number;
}

export interface AuditFilter {
  fromMs?: number;
  toMs?: number;
  kind?: AuditKind;
  /** The acting key's (or sender's) address, lowercase. */
  principal?: string;
  cid?: string;
  /** A PKP id, lowercase. */
  pkp?: string;
  outcome?: "ok" | "error" | "refused";
}

interface EntryRow {
  account_id: string;
  seq: number;
  prev_hash: string;
  hash: string;
  kind: string;
  time_ms: number;
  data: string;
}

interface HeadRow {
  seq: number;
  hash: string;
  checkpoint_seq: number;
  checkpoint_ms: number;
}

/** Entries per INSERT statement (11 parameters each when chaining). */
const INSERT_ROWS = 50;
/** Entries per transaction of the writer thread (which splits them into INSERTs of 50). */
const WRITER_BATCH = 500;
/** A group that reaches this many entries is sent without waiting for the rest of the window. */
const GROUP_TARGET = 50;

/** An audit_pending row's values, in the order of its INSERTs (here and in sqliteWriter-thread.js). */
function pendingRow(e: PendingEntry): unknown[] {
  return [
    e.account,
    e.kind,
    e.timeMs,
    canonicalJson(e.data),
    e.principal,
    e.cid,
    pkpColumn(e.pkps),
    e.outcome,
  ];
}

/** The PKP column: every id between commas, so one LIKE '%,id,%' finds an entry naming it. */
const pkpColumn = (pkps: string[]) => (pkps.length ? "," + pkps.join(",") + "," : "");

export class AuditStore {
  readonly checkpointEvery: number;
  readonly checkpointMs: number;
  private readonly batch: number;
  private readonly now: () => number;
  private readonly statements = new Map<string, Statement>();
  private readonly queued: Array<{
    e: PendingEntry;
    /** When it was queued (performance.now()): its group waits at most groupCommitMs from then. */
    at: number;
    resolve: (chained: boolean) => void;
    reject: (err: unknown) => void;
  }> = [];
  /** Checkpoints the writer thread reported due, being signed and stored behind the answers. */
  private signing: Promise<void> = Promise.resolve();
  private inserting = false;
  /** The group-commit timer, while the queued entries wait for others (see enqueue). */
  private groupTimer: NodeJS.Timeout | null = null;
  private readonly groupCommitMs: number;
  private readonly moreSoon: () => boolean;
  /** The batches being written, until the queue is empty (close waits for it). */
  private writing: Promise<void> = Promise.resolve();
  private readonly useWriterThread: boolean;
  /** undefined until the first write (a store that is only read starts no thread). */
  private writerThread: SqliteWriterThread | null | undefined;

  constructor(
    readonly db: DataLayer,
    private readonly signer: CheckpointSigner,
    opts: AuditStoreOptions = {},
  ) {
    this.checkpointEvery = opts.checkpointEvery ?? 100;
    this.checkpointMs = opts.checkpointMs ?? 5 * 60_000;
    this.batch = opts.batch ?? 200;
    this.now = opts.now ?? Date.now;
    this.useWriterThread = opts.writerThread !== false;
    this.groupCommitMs = opts.groupCommitMs ?? DEFAULT_GROUP_COMMIT_MS;
    this.moreSoon = opts.moreSoon ?? (() => false);
  }

  /**
   * The log's writer on SQLite in a file (sqliteWriter.ts), started on the first write; null: this
   * store's connection writes (PostgreSQL, SQLite in memory, or the thread was closed or failed).
   */
  private get writer(): SqliteWriterThread | null {
    if (this.writerThread === undefined)
      this.writerThread = this.useWriterThread ? SqliteWriterThread.forLayer(this.db) : null;
    return this.writerThread?.running ? this.writerThread : null;
  }

  /** The writer thread's CPU so far in ns (Linux), or null (no thread): for the benchmarks. */
  async writerCpuNs(): Promise<number | null> {
    return (await this.writer?.cpuNs()) ?? null;
  }

  /** Stops the writer thread, once what was sent to it is written (before the database closes). */
  async close(): Promise<void> {
    // Entries waiting for their group go now, and every batch is written before the thread stops.
    while (this.inserting || this.queued.length > 0) {
      if (!this.inserting) this.startBatches();
      await this.writing;
    }
    await this.settled();
    await this.writerThread?.close();
  }

  /** Once the checkpoints due so far are signed and stored (AuditLog.flush waits for it). */
  async settled(): Promise<void> {
    for (let s = this.signing; ; s = this.signing) {
      await s;
      if (s === this.signing) return;
    }
  }

  /** `?` placeholders as the engine wants them. */
  sql(text: string): string {
    if (this.db.kind !== "postgres") return text;
    let i = 0;
    return text.replace(/\?/g, () => `$${++i}`);
  }

  exec<R>(on: Sql, text: string, params: unknown[] = []): Promise<R[]> {
    const handle = this.db.sqlite;
    if (handle) {
      // SQLite: one connection (a transaction's statements run on it too); statements kept prepared,
      // as the data layer's prepared queries are (its raw exec prepares on every call).
      let st = this.statements.get(text);
      if (!st) {
        st = handle.prepare(text);
        if (this.statements.size > 200) this.statements.clear();
        this.statements.set(text, st);
      }
      return Promise.resolve((st.reader ? st.all(...params) : (st.run(...params), [])) as R[]);
    }
    return on.exec(this.sql(text), params, { prepared: true }) as Promise<R[]>;
  }

  /**
   * The request path's only write. On SQLite in a file the writer thread chains the entry at once (it
   * is the database's one writer: nothing to wait for) and the promise answers true; elsewhere it is
   * one row INSERTed into audit_pending, no lock, chained behind the answer (false). Entries recorded
   * while an earlier batch is on its way go together in the next one (a group commit: one round trip
   * and one WAL flush for many requests under load); each caller still returns only once its entry is
   * committed, and the entries of one batch are committed together or not at all. `on`: inside the
   * caller's own transaction instead (written to audit_pending at once, with it).
   */
  enqueue(e: PendingEntry, on?: Sql): Promise<boolean> {
    if (on) return this.insertPending(on, [e]).then(() => false);
    return new Promise<boolean>((resolve, reject) => {
      this.queued.push({ e, at: performance.now(), resolve, reject });
      this.sendWhenDue();
    });
  }

  /**
   * Starts the next batch when it is due. Never while a batch is on its way: what arrives meanwhile
   * goes in the next one. The entries of requests that finish in the same turn of the event loop go
   * together (SQLite on this connection answers synchronously: without this every entry would be its
   * own commit). And while more entries are about to be recorded (moreSoon: runs in the executor), the
   * batch waits for them, up to groupCommitMs after its first entry or until it holds GROUP_TARGET: a
   * transaction's fixed cost (a round trip to the writer thread or the server, a commit) is shared by
   * many entries instead of paid by each. With nothing else running (one client) nothing waits.
   */
  private sendWhenDue(): void {
    if (this.inserting || this.queued.length === 0) return;
    const left = this.groupCommitMs - (performance.now() - this.queued[0].at);
    if (this.queued.length < GROUP_TARGET && left > 0 && this.moreSoon()) {
      this.groupTimer ??= setTimeout(() => this.startBatches(), left);
      return;
    }
    this.startBatches();
  }

  private startBatches(): void {
    if (this.groupTimer) clearTimeout(this.groupTimer);
    this.groupTimer = null;
    if (this.inserting) return;
    this.inserting = true;
    this.writing = new Promise<void>((resolve) =>
      setImmediate(() => void this.insertQueued().finally(resolve)),
    );
  }

  private async insertQueued(): Promise<void> {
    try {
      // One batch; what arrived while it was on its way goes next, when due (sendWhenDue).
      const batch = this.queued.splice(0, this.writer ? WRITER_BATCH : INSERT_ROWS);
      try {
        const entries = batch.map((q) => q.e);
        const writer = this.writer;
        if (writer) {
          const { due } = await writer.record(entries.map(pendingRow), this.rules());
          for (const q of batch) q.resolve(true);
          if (due.length > 0) this.signBehind(writer, due);
        } else {
          await this.insertPending(this.db, entries);
          for (const q of batch) q.resolve(false);
        }
      } catch (err) {
        for (const q of batch) q.reject(err);
      }
    } finally {
      this.inserting = false;
      this.sendWhenDue();
    }
  }

  private rules(): { checkpointEvery: number; checkpointMs: number; now: number } {
    return { checkpointEvery: this.checkpointEvery, checkpointMs: this.checkpointMs, now: this.now() };
  }

  /** A checkpoint's row (account, seq, head_hash, time_ms, signer, signature), signed now. */
  private signedCheckpoint(account: string, seq: number, headHash: string): unknown[] {
    const time_ms = this.now();
    const signature = this.signer.sign(checkpointDigest({ account, seq, head_hash: headHash, time_ms }));
    return [account, seq, headHash, time_ms, this.signer.address, signature];
  }

  /**
   * Signs and stores, behind the answers, the checkpoints the writer thread found due while chaining
   * recorded entries; one after the other, in order. A failure leaves those heads unsigned until a
   * later checkpoint (the next one due, or the one an export signs) covers them.
   */
  private signBehind(
    writer: SqliteWriterThread,
    due: Array<{ account: string; seq: number; hash: string }>,
  ): void {
    this.signing = this.signing
      .then(() => writer.storeCheckpoints(due.map((d) => this.signedCheckpoint(d.account, d.seq, d.hash))))
      .catch(() => undefined);
  }

  private async insertPending(on: Sql, entries: PendingEntry[]): Promise<void> {
    await this.exec(
      on,
      "INSERT INTO audit_pending (account_id, kind, time_ms, data, principal, cid, pkps, outcome) VALUES " +
        entries.map(() => "(?, ?, ?, ?, ?, ?, ?, ?)").join(", "),
      entries.flatMap(pendingRow),
    );
  }

  /** Accounts with entries waiting for their chain (a restart's or another instance's leftovers too). */
  async accountsPending(): Promise<string[]> {
    const rows = await this.exec<{ account_id: string }>(
      this.db,
      "SELECT DISTINCT account_id FROM audit_pending",
    );
    return rows.map((r) => r.account_id);
  }

  /** Chains every pending entry of the account; returns how many. */
  async chain(account: string): Promise<number> {
    let total = 0;
    for (;;) {
      const n = this.writer
        ? await this.chainOnWriter(account)
        : await this.db.transaction((tx) => this.chainBatch(tx, account));
      total += n;
      if (n < this.batch) return total;
    }
  }

  /**
   * chainBatch on the writer thread (SQLite in a file): the thread chains, this thread signs the heads
   * it says are due (the key stays here), and the thread stores the checkpoints in a second transaction.
   * A crash between the two leaves those heads unsigned; the next pass then signs the head it reaches,
   * since the last checkpoint is more than checkpointEvery entries behind it.
   */
  private async chainOnWriter(account: string): Promise<number> {
    const writer = this.writer as SqliteWriterThread;
    const { count, due } = await writer.chain(account, { batch: this.batch, ...this.rules() });
    if (due.length > 0)
      await writer.storeCheckpoints(due.map((d) => this.signedCheckpoint(account, d.seq, d.hash)));
    return count;
  }

  /** The account's head, locked for this transaction (created at the genesis on first use). */
  private async lockHead(tx: Sql, account: string): Promise<HeadRow> {
    const lock = this.db.kind === "postgres" ? " FOR UPDATE" : "";
    const select =
      "SELECT seq, hash, checkpoint_seq, checkpoint_ms FROM audit_heads WHERE account_id = ?" + lock;
    const [head] = await this.exec<HeadRow>(tx, select, [account]);
    if (head) return head;
    await this.exec(
      tx,
      "INSERT INTO audit_heads (account_id, seq, hash, checkpoint_seq, checkpoint_ms) VALUES (?, 0, ?, 0, ?) ON CONFLICT (account_id) DO NOTHING",
      [account, GENESIS_HASH, this.now()],
    );
    return (await this.exec<HeadRow>(tx, select, [account]))[0];
  }

  private async chainBatch(tx: Sql, account: string): Promise<number> {
    const head = await this.lockHead(tx, account);
    // Read after the head's lock: another writer's rows for this account are committed or not ours.
    // p.data is the canonical JSON written by insertPending: hashed as it is, not parsed again.
    const pending = await this.exec<PendingRow & { id: number }>(
      tx,
      "SELECT id, kind, time_ms, data, principal, cid, pkps, outcome FROM audit_pending WHERE account_id = ? ORDER BY id LIMIT ?",
      [account, this.batch],
    );
    const c = chainOnto(account, head, pending, this.rules());
    if (pending.length > 0 && this.db.kind === "postgres") {
      // One statement moves the rows and the head: the rows stay on the server, only their ids and new
      // chain fields travel (not their data a second time), in one round trip whatever their number.
      // The DELETE names the account: audit_pending's one index is (account_id, id) (migration 24).
      await this.exec(
        tx,
        `WITH moved AS (DELETE FROM audit_pending WHERE account_id = ? AND id = ANY(?::bigint[]) RETURNING *),
              head AS (UPDATE audit_heads SET seq = ?, hash = ? WHERE account_id = ?)
         INSERT INTO audit_entries (${ENTRY_COLUMNS.join(", ")})
         SELECT m.account_id, u.seq, u.prev_hash, u.hash, m.kind, m.time_ms, m.data, m.principal, m.cid, m.pkps, m.outcome
           FROM moved m JOIN unnest(?::bigint[], ?::bigint[], ?::text[], ?::text[]) AS u(id, seq, prev_hash, hash) ON u.id = m.id`,
        [
          account,
          pending.map((p) => p.id),
          c.seq,
          c.hash,
          account,
          pending.map((p) => p.id),
          c.rows.map((r) => r[1]),
          c.rows.map((r) => r[2]),
          c.rows.map((r) => r[3]),
        ],
      );
    } else if (pending.length > 0) {
      // Many rows per statement: one round trip per INSERT_ROWS entries, not one per entry.
      for (let i = 0; i < c.rows.length; i += INSERT_ROWS) {
        const chunk = c.rows.slice(i, i + INSERT_ROWS);
        await this.exec(
          tx,
          `INSERT INTO audit_entries (${ENTRY_COLUMNS.join(", ")}) VALUES ` +
            chunk.map(() => "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)").join(", "),
          chunk.flat(),
        );
      }
      const ids = pending.map((p) => p.id);
      await this.exec(tx, `DELETE FROM audit_pending WHERE id IN (${ids.map(() => "?").join(", ")})`, ids);
      await this.exec(tx, "UPDATE audit_heads SET seq = ?, hash = ? WHERE account_id = ?", [
        c.seq,
        c.hash,
        account,
      ]);
    }
    for (const d of c.due) await this.storeCheckpoint(tx, this.signedCheckpoint(account, d.seq, d.hash));
    return pending.length;
  }

  /** A signed checkpoint stored, and the head's last checkpoint moved to it (never back). */
  private async storeCheckpoint(tx: Sql, row: unknown[]): Promise<void> {
    const [account, seq, , timeMs] = row;
    await this.exec(
      tx,
      // DO NOTHING: the writer thread (SQLite) may have stored its checkpoint of this head meanwhile.
      "INSERT INTO audit_checkpoints (account_id, seq, head_hash, time_ms, signer, signature) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (account_id, seq) DO NOTHING",
      row,
    );
    await this.exec(
      tx,
      "UPDATE audit_heads SET checkpoint_seq = ?, checkpoint_ms = ? WHERE account_id = ? AND checkpoint_seq < ?",
      [seq, timeMs, account, seq],
    );
  }

  /**
   * Signs the head when it is due (or `force`: a head not yet covered), in the chaining transaction.
   */
  private async checkpointIfDue(tx: Sql, account: string, head: HeadRow, force: boolean): Promise<boolean> {
    if (head.seq <= head.checkpoint_seq) return false;
    const now = this.now();
    const due =
      force ||
      head.seq - head.checkpoint_seq >= this.checkpointEvery ||
      now - head.checkpoint_ms >= this.checkpointMs;
    if (!due) return false;
    await this.storeCheckpoint(tx, this.signedCheckpoint(account, Number(head.seq), head.hash));
    return true;
  }

  /** Signs the account's head now if entries were chained since its last checkpoint (export, prune). */
  async checkpointNow(account: string): Promise<void> {
    await this.db.transaction(async (tx) => {
      const head = await this.lockHead(tx, account);
      await this.checkpointIfDue(tx, account, head, true);
    });
  }

  /** Checkpoints heads whose last checkpoint is older than checkpointMs (the periodic sweep). */
  async checkpointStale(): Promise<number> {
    const rows = await this.exec<{ account_id: string }>(
      this.db,
      "SELECT account_id FROM audit_heads WHERE seq > checkpoint_seq AND checkpoint_ms <= ?",
      [this.now() - this.checkpointMs],
    );
    for (const r of rows) {
      await this.db.transaction(async (tx) => {
        const head = await this.lockHead(tx, r.account_id);
        await this.checkpointIfDue(tx, r.account_id, head, false);
      });
    }
    return rows.length;
  }

  /** Newest first, after `beforeSeq` (the cursor), at most `limit`. */
  async list(
    account: string,
    f: AuditFilter,
    beforeSeq: number | null,
    limit: number,
  ): Promise<StoredEntry[]> {
    const where = ["account_id = ?"];
    const params: unknown[] = [account];
    const add = (clause: string, v: unknown) => {
      where.push(clause);
      params.push(v);
    };
    if (beforeSeq !== null) add("seq < ?", beforeSeq);
    if (f.fromMs !== undefined) add("time_ms >= ?", f.fromMs);
    if (f.toMs !== undefined) add("time_ms < ?", f.toMs);
    if (f.kind !== undefined) add("kind = ?", f.kind);
    if (f.principal !== undefined) add("principal = ?", f.principal);
    if (f.cid !== undefined) add("cid = ?", f.cid);
    if (f.pkp !== undefined) add("pkps LIKE ?", `%,${f.pkp},%`);
    if (f.outcome !== undefined) add("outcome = ?", f.outcome);
    params.push(limit);
    const rows = await this.exec<EntryRow>(
      this.db,
      `SELECT account_id, seq, prev_hash, hash, kind, time_ms, data FROM audit_entries WHERE ${where.join(" AND ")} ORDER BY seq DESC LIMIT ?`,
      params,
    );
    return rows.map(toEntry);
  }

  /** The account's chain in order, from `fromSeq`, a page at a time (the export streams it). */
  async *entries(account: string, fromSeq = 1, page = 1000): AsyncGenerator<StoredEntry> {
    let next = fromSeq;
    for (;;) {
      const rows = await this.exec<EntryRow>(
        this.db,
        "SELECT account_id, seq, prev_hash, hash, kind, time_ms, data FROM audit_entries WHERE account_id = ? AND seq >= ? ORDER BY seq LIMIT ?",
        [account, next, page],
      );
      for (const r of rows) yield toEntry(r);
      if (rows.length < page) return;
      next = rows[rows.length - 1].seq + 1;
    }
  }

  async checkpoints(account: string, fromSeq = 0): Promise<StoredCheckpoint[]> {
    const rows = await this.exec<{
      seq: number;
      head_hash: string;
      time_ms: number;
      signer: string;
      signature: string;
      anchor_chain_id: number | null;
      anchor_contract: string | null;
      anchor_tx: string | null;
      anchor_block: number | null;
    }>(
      this.db,
      "SELECT seq, head_hash, time_ms, signer, signature, anchor_chain_id, anchor_contract, anchor_tx, anchor_block FROM audit_checkpoints WHERE account_id = ? AND seq >= ? ORDER BY seq",
      [account, fromSeq],
    );
    return rows.map((r) => ({
      account,
      seq: Number(r.seq),
      head_hash: r.head_hash,
      time_ms: Number(r.time_ms),
      signer: r.signer,
      signature: r.signature,
      ...(r.anchor_contract !== null && r.anchor_tx !== null && r.anchor_tx.startsWith("0x")
        ? {
            anchor: {
              chain_id: Number(r.anchor_chain_id),
              contract: r.anchor_contract,
              tx_hash: r.anchor_tx,
              block_number: Number(r.anchor_block),
            },
          }
        : {}),
    }));
  }

  /**
   * Claims the checkpoints to anchor now (anchor.ts): per account, the newest checkpoint once `every`
   * checkpoints were signed after the last one anchored or claimed. A claim marks the row
   * (`claimed:<instance>`), so that of several instances only one sends it.
   */
  async claimAnchors(
    every: number,
    instance: string,
  ): Promise<Array<{ account: string; seq: number; head_hash: string }>> {
    const due = await this.exec<{ account_id: string; seq: number }>(
      this.db,
      `SELECT c.account_id, MAX(c.seq) AS seq FROM audit_checkpoints c
        WHERE c.anchor_tx IS NULL AND c.seq > COALESCE((SELECT MAX(a.seq) FROM audit_checkpoints a
          WHERE a.account_id = c.account_id AND a.anchor_tx IS NOT NULL), 0)
        GROUP BY c.account_id HAVING COUNT(*) >= ?`,
      [every],
    );
    const claimed: Array<{ account: string; seq: number; head_hash: string }> = [];
    for (const d of due) {
      const [row] = await this.exec<{ head_hash: string }>(
        this.db,
        "UPDATE audit_checkpoints SET anchor_tx = ? WHERE account_id = ? AND seq = ? AND anchor_tx IS NULL RETURNING head_hash",
        ["claimed:" + instance, d.account_id, d.seq],
      );
      if (row) claimed.push({ account: d.account_id, seq: Number(d.seq), head_hash: row.head_hash });
    }
    return claimed;
  }

  /** Records where a claimed checkpoint was anchored, or (null) gives the claim back for a later try. */
  async recordAnchor(account: string, seq: number, anchor: CheckpointAnchor | null): Promise<void> {
    if (anchor === null) {
      await this.exec(
        this.db,
        "UPDATE audit_checkpoints SET anchor_tx = NULL WHERE account_id = ? AND seq = ? AND anchor_tx LIKE 'claimed:%'",
        [account, seq],
      );
      return;
    }
    await this.exec(
      this.db,
      "UPDATE audit_checkpoints SET anchor_chain_id = ?, anchor_contract = ?, anchor_tx = ?, anchor_block = ? WHERE account_id = ? AND seq = ?",
      [anchor.chain_id, anchor.contract, anchor.tx_hash, anchor.block_number, account, seq],
    );
  }

  /** The first sequence still kept (1 unless pruned), or null when the account has no entries. */
  async firstSeq(account: string): Promise<number | null> {
    const [row] = await this.exec<{ s: number | null }>(
      this.db,
      "SELECT MIN(seq) AS s FROM audit_entries WHERE account_id = ?",
      [account],
    );
    return row?.s === null || row?.s === undefined ? null : Number(row.s);
  }

  /**
   * Retention: deletes each account's entries up to its newest checkpoint older than `beforeMs` (every
   * entry it covers was recorded before it; checkpoints are kept), always a whole prefix of the chain. The oldest kept entry's previous hash is then exactly
   * that checkpoint's signed head, so what remains still verifies. Returns how many entries went.
   */
  async prune(beforeMs: number): Promise<number> {
    const covers = await this.exec<{ account_id: string; s: number }>(
      this.db,
      "SELECT account_id, MAX(seq) AS s FROM audit_checkpoints WHERE time_ms < ? GROUP BY account_id",
      [beforeMs],
    );
    let removed = 0;
    for (const c of covers) {
      const rows = await this.exec<{ seq: number }>(
        this.db,
        "DELETE FROM audit_entries WHERE account_id = ? AND seq <= ? RETURNING seq",
        [c.account_id, c.s],
      );
      removed += rows.length;
    }
    return removed;
  }
}

function toEntry(r: EntryRow): StoredEntry {
  return {
    account: r.account_id,
    seq: Number(r.seq),
    prev_hash: r.prev_hash,
    hash: r.hash,
    kind: r.kind as AuditKind,
    time_ms: Number(r.time_ms),
    data: JSON.parse(r.data) as AuditData,
  };
}
