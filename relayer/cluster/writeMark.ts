/**
 * The cross-instance write mark: with PostgreSQL, every path-A write that lands records the block it
 * landed in, before its answer leaves (one row per chain and registry, only ever raised). Every instance
 * reads it before authorizing a request and, if its permission cache has not processed that block yet,
 * catches up first (PermissionCache.freshen). So a change made through any instance is honoured by every
 * instance on the next request after the write's answer: a removed key is refused, a new key works.
 *
 * Why a read per request rather than only a notification: a notification reaches the other instances
 * some time after the write's answer, and a client can be faster than that; the row is durable before
 * the answer leaves, so a read after the answer always sees it. The notification (NOTIFY on every raise,
 * LISTENed by `listen`) only lets an idle instance catch up ahead of its next request, so that the read
 * usually finds nothing to wait for.
 *
 * Path-B writes (owners and Safes writing to the registry directly) never pass through an instance:
 * they are seen within one poll interval, as before. Without PostgreSQL (one process) none of this runs.
 */
import type { Client } from "pg";
import type { DataLayer } from "../db";

/** The PostgreSQL channel the raises are announced on (payload: "<scope> <block>"). */
export const WRITE_MARK_CHANNEL = "sigil_write_mark";

export class SharedWriteMark {
  /** The read on the wire (sent at some moment, possibly before a caller arrived). */
  private sending: Promise<number> | null = null;
  /** The next read, not sent yet: every caller that arrives before it is sent may share it. */
  private queued: Promise<number> | null = null;
  /** Reads sent to the database (tests, benchmarks). */
  queries = 0;

  /** @param scope which chain and registry the mark is about: instances of other deployments may share the database. */
  constructor(
    private readonly db: DataLayer,
    readonly scope: string,
  ) {}

  static scopeOf(chainId: number, registry: string): string {
    return `${chainId}:${registry.toLowerCase()}`;
  }

  /** Raises the mark to `block` (never lowers it) and announces it; resolves once committed. */
  async record(block: number): Promise<void> {
    // One statement, autocommitted: the notification goes out with the commit, never before it.
    await this.db.exec(
      `WITH raised AS (
         INSERT INTO write_marks (scope, block) VALUES ($1, $2::bigint)
         ON CONFLICT (scope) DO UPDATE SET block = GREATEST(write_marks.block, EXCLUDED.block)
         RETURNING block)
       SELECT pg_notify($3, $1 || ' ' || block::text) FROM raised`,
      [this.scope, block, WRITE_MARK_CHANNEL],
      { prepared: true },
    );
  }

  /**
   * The newest block any instance's write landed in (0 before the first), as of a moment after this
   * call. Concurrent callers share reads, but only reads sent after they arrived: one that is already
   * on the wire may predate a write whose answer the caller has seen, so latecomers queue for the next
   * one. Under load that is one read in flight at a time instead of one per request.
   */
  read(): Promise<number> {
    if (this.queued) return this.queued;
    if (!this.sending) return (this.sending = this.send());
    const onWire = this.sending;
    this.queued = onWire.then(
      () => this.sendQueued(),
      () => this.sendQueued(),
    );
    return this.queued;
  }

  private sendQueued(): Promise<number> {
    this.queued = null;
    return (this.sending = this.send());
  }

  private send(): Promise<number> {
    const p = this.query();
    const done = () => {
      if (this.sending === p) this.sending = null;
    };
    p.then(done, done);
    return p;
  }

  private async query(): Promise<number> {
    this.queries++;
    const rows = (await this.db.exec("SELECT block FROM write_marks WHERE scope = $1", [this.scope], {
      prepared: true,
    })) as Array<{ block: number | string }>;
    return rows.length ? Number(rows[0].block) : 0;
  }
}

/**
 * Listens for raises of `scope`'s mark on a dedicated connection and hands each block to `onRaise`
 * (the cache catches up in the background). Best effort: a lost connection is reopened after a pause;
 * correctness never depends on it (see above). Returns a function that stops listening.
 */
export function listenForWriteMarks(
  databaseUrl: string,
  scope: string,
  onRaise: (block: number) => void,
  onError: (err: Error) => void,
): () => Promise<void> {
  const pg = require("pg") as typeof import("pg");
  let client: Client | null = null;
  let stopped = false;
  let retry: NodeJS.Timeout | null = null;
  const connect = async () => {
    if (stopped) return;
    const c = new pg.Client({ connectionString: databaseUrl });
    c.on("error", (err: Error) => {
      onError(err);
      reconnect(c);
    });
    c.on("notification", (n) => {
      if (n.channel !== WRITE_MARK_CHANNEL || !n.payload) return;
      const [s, block] = n.payload.split(" ");
      if (s === scope && /^[0-9]+$/.test(block)) onRaise(Number(block));
    });
    try {
      await c.connect();
      await c.query(`LISTEN ${WRITE_MARK_CHANNEL}`);
      if (stopped) await c.end();
      else client = c;
    } catch (err) {
      onError(err as Error);
      reconnect(c);
    }
  };
  const reconnect = (c: Client) => {
    if (client === c) client = null;
    c.end().catch(() => undefined);
    if (stopped || retry) return;
    retry = setTimeout(() => {
      retry = null;
      void connect();
    }, 1_000);
    retry.unref();
  };
  void connect();
  return async () => {
    stopped = true;
    if (retry) clearTimeout(retry);
    await client?.end().catch(() => undefined);
    client = null;
  };
}
