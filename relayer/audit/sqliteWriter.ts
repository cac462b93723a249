/**
 * Writes the audit log's tables from a thread of their own on SQLite (sqliteWriter-thread.js,
 * docs/audit-log.md "What it costs"): a commit's occasional wait on the disk then stalls no request but
 * those whose entries it carries, and the main thread never waits on the log's writes. Each call is one
 * transaction, answered once committed; recorded entries are chained in the transaction that writes
 * them. The thread never holds a key: it answers which heads are due a checkpoint, and the store signs
 * them here and hands the signatures back.
 *
 * Only for a database in a file (a second connection to it); an in-memory database, or PostgreSQL, has
 * no use for it (`forLayer` answers null) and the store writes on its own connection.
 */
import * as path from "node:path";
import { Worker } from "node:worker_threads";
import type { DataLayer } from "../db";

const THREAD_SCRIPT = path.join(__dirname, "sqliteWriter-thread.js");

export class SqliteWriterThread {
  private nextId = 1;
  private readonly waiting = new Map<
    number,
    { resolve: (result: unknown) => void; reject: (err: Error) => void }
  >();
  private exited: Error | null = null;

  private constructor(private readonly thread: Worker) {
    thread.on("message", (m: { id: number; ok: boolean; result?: unknown; error?: string }) => {
      const w = this.waiting.get(m.id);
      this.waiting.delete(m.id);
      if (m.ok) w?.resolve(m.result);
      else w?.reject(new Error(`audit: the SQLite writer failed: ${m.error}`));
    });
    const fail = (err: Error) => {
      this.exited = err;
      for (const w of this.waiting.values()) w.reject(err);
      this.waiting.clear();
    };
    thread.on("error", fail);
    thread.on("exit", (code) => fail(new Error(`audit: the SQLite writer stopped (${code})`)));
    // A process ends without waiting for it (the relayer closes it on stop).
    thread.unref();
  }

  /** A writer for this data layer's SQLite file, or null (PostgreSQL, in-memory SQLite). */
  static forLayer(db: DataLayer): SqliteWriterThread | null {
    const handle = db.sqlite;
    if (!handle || handle.memory || !handle.name) return null;
    return new SqliteWriterThread(
      new Worker(THREAD_SCRIPT, {
        name: "sigil-audit-writer",
        workerData: { path: handle.name },
        env: {},
        execArgv: [],
      }),
    );
  }

  /** Whether it still runs (else the caller writes on its own connection). */
  get running(): boolean {
    return this.exited === null;
  }

  /**
   * Chains the entries requests recorded (audit_pending rows) at once, in one transaction; resolves once
   * it is committed, with the heads `{account, seq, hash}` a checkpoint is due at, in order, for the
   * caller to sign and hand to `storeCheckpoints`.
   */
  record(
    rows: unknown[][],
    rules: { checkpointEvery: number; checkpointMs: number; now: number },
  ): Promise<{ due: Array<{ account: string; seq: number; hash: string }> }> {
    return this.send({ op: "record", rows, ...rules }) as Promise<{
      due: Array<{ account: string; seq: number; hash: string }>;
    }>;
  }

  /**
   * Chains at most `batch` pending entries of the account (one transaction); answers how many, and the
   * heads a checkpoint is due at, in order, for the caller to sign and hand to `storeCheckpoints`.
   */
  chain(
    account: string,
    opts: { batch: number; checkpointEvery: number; checkpointMs: number; now: number },
  ): Promise<{ count: number; due: Array<{ seq: number; hash: string }> }> {
    return this.send({ op: "chain", account, ...opts }) as Promise<{
      count: number;
      due: Array<{ seq: number; hash: string }>;
    }>;
  }

  /** Stores signed checkpoints (account, seq, head_hash, time_ms, signer, signature), one transaction. */
  async storeCheckpoints(rows: unknown[][]): Promise<void> {
    await this.send({ op: "checkpoints", rows });
  }

  /** Nanoseconds of CPU this thread has used (Linux), or null: for the benchmarks (bench/auditPath.ts). */
  cpuNs(): Promise<number | null> {
    return this.send({ op: "cpu" }) as Promise<number | null>;
  }

  /** Closes the thread's connection and ends it (after the writes already sent). */
  async close(): Promise<void> {
    if (!this.running) return;
    await this.send({ op: "close" }).catch(() => undefined);
    this.exited ??= new Error("audit: the SQLite writer was closed");
    await this.thread.terminate();
  }

  private send(msg: Record<string, unknown>): Promise<unknown> {
    if (this.exited) return Promise.reject(this.exited);
    const id = this.nextId++;
    return new Promise<unknown>((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.thread.postMessage({ ...msg, id });
    });
  }
}
