/**
 * The data layer's two engines behind one small interface: SQLite (the embedded default, one file,
 * better-sqlite3, synchronous under the hood) and PostgreSQL (`SIGIL_DATABASE_URL`, shared by every
 * relayer instance, through a `pg` pool). Callers run prepared queries (prepared.ts) and transactions;
 * they never see which engine they talk to, except through `kind` where SQL must differ.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import BetterSqlite3, { type Database as SqliteHandle, type Statement } from "better-sqlite3";
import { createHash } from "node:crypto";
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import type { Pool, PoolClient } from "pg";
import { Mutex } from "../mutex";
import { databaseUnavailable, isConnectionError } from "./errors";
import { type Compiled, type EngineKind, type Prepared, bind } from "./prepared";

export type { EngineKind };

/** What a query runs on: the whole database, or one open transaction. */
export interface Sql {
  readonly kind: EngineKind;
  all<R>(q: Prepared<R>, args?: readonly unknown[]): Promise<R[]>;
  first<R>(q: Prepared<R>, args?: readonly unknown[]): Promise<R | undefined>;
  /** Runs a statement; returns how many rows it changed. */
  run(q: Prepared<unknown>, args?: readonly unknown[]): Promise<number>;
  /**
   * Raw SQL (migrations, locks, pragmas). `prepared`: on PostgreSQL, keep it parsed and planned on
   * each pooled connection (statements on every request's path); SQLite ignores it.
   */
  exec(sqlText: string, params?: readonly unknown[], opts?: { prepared?: boolean }): Promise<unknown[]>;
}

export interface DataLayer extends Sql {
  /**
   * Runs `fn` in one transaction: all of it commits or none. SQLite: BEGIN IMMEDIATE (the write
   * lock up front, so two processes on one file never deadlock upgrading a read lock), serialised
   * within the process. PostgreSQL: READ COMMITTED on one pooled connection; callers make
   * concurrent transactions safe with row locks and unique constraints, never process-local locks.
   * `durable`: on SQLite, fsync this commit (synchronous=FULL) even though the file runs NORMAL.
   */
  transaction<T>(fn: (tx: Sql) => Promise<T>, opts?: { durable?: boolean }): Promise<T>;
  /** The SQLite handle (tests and the migration of existing files); null on PostgreSQL. */
  readonly sqlite: SqliteHandle | null;
  readonly open: boolean;
  close(): Promise<void>;
}

export interface DataLayerOptions {
  /** postgres://… selects PostgreSQL; absent or empty selects SQLite at `sqlitePath`. */
  databaseUrl?: string;
  sqlitePath: string;
  /** Wrap this already open SQLite handle instead of opening `sqlitePath` (closing the layer closes it). */
  sqliteHandle?: SqliteHandle;
  /** PostgreSQL pool size per instance (default 10). */
  poolSize?: number;
}

export function isPostgresUrl(url: string | undefined): url is string {
  return !!url && /^postgres(ql)?:\/\//i.test(url);
}

export function openEngine(opts: DataLayerOptions): DataLayer {
  if (opts.databaseUrl) {
    if (!isPostgresUrl(opts.databaseUrl))
      throw new Error("SIGIL_DATABASE_URL must start with postgres:// or postgresql://");
    return new PostgresLayer(opts.databaseUrl, opts.poolSize ?? 10);
  }
  return new SqliteLayer(opts.sqliteHandle ?? opts.sqlitePath);
}

// ---------------------------------------------------------------------------------------------- SQLite

class SqliteExecutor implements Sql {
  readonly kind = "sqlite" as const;
  private readonly statements = new WeakMap<Compiled, Statement>();
  constructor(protected readonly handle: SqliteHandle) {}

  private stmt(q: Prepared<unknown>): { s: Statement; c: Compiled } {
    const c = q.compile("sqlite");
    let s = this.statements.get(c);
    if (!s) {
      s = this.handle.prepare(c.sql);
      this.statements.set(c, s);
    }
    return { s, c };
  }

  // The methods are async only to share the interface with PostgreSQL: the work is done synchronously.
  async all<R>(q: Prepared<R>, args: readonly unknown[] = []): Promise<R[]> {
    const { s, c } = this.stmt(q);
    return (s.reader ? s.all(...bind(c, args)) : (s.run(...bind(c, args)), [])) as R[];
  }
  async first<R>(q: Prepared<R>, args: readonly unknown[] = []): Promise<R | undefined> {
    const { s, c } = this.stmt(q);
    return (s.reader ? s.get(...bind(c, args)) : (s.run(...bind(c, args)), undefined)) as R | undefined;
  }
  async run(q: Prepared<unknown>, args: readonly unknown[] = []): Promise<number> {
    const { s, c } = this.stmt(q);
    if (s.reader) return s.all(...bind(c, args)).length;
    return s.run(...bind(c, args)).changes;
  }
  async exec(sqlText: string, params: readonly unknown[] = []): Promise<unknown[]> {
    const s = this.handle.prepare(sqlText);
    if (s.reader) return s.all(...params);
    s.run(...params);
    return [];
  }
}

/**
 * WAL for concurrent readers, and a busy timeout for other processes on the same file.
 * synchronous=NORMAL: every commit survives a crash of the process; durable transactions (money
 * coming in) switch to FULL for themselves, so they also survive power loss.
 */
class SqliteLayer extends SqliteExecutor implements DataLayer {
  private readonly txLock = new Mutex();
  /**
   * Set inside a transaction's callback (and whatever it awaits). One connection serves the whole
   * process, so a statement sent while a transaction is open would run inside it and roll back with
   * it: a statement from outside the transaction waits for it to end instead (`outside`).
   */
  private readonly transactionScope = new AsyncLocalStorage<{ open: boolean }>();
  readonly sqlite: SqliteHandle;

  constructor(pathOrHandle: string | SqliteHandle) {
    if (typeof pathOrHandle === "string" && pathOrHandle !== ":memory:")
      mkdirSync(dirname(pathOrHandle), { recursive: true });
    const handle = typeof pathOrHandle === "string" ? new BetterSqlite3(pathOrHandle) : pathOrHandle;
    super(handle);
    this.sqlite = handle;
    handle.pragma("journal_mode = WAL");
    handle.pragma("synchronous = NORMAL");
    handle.pragma("busy_timeout = 5000");
    handle.pragma("foreign_keys = ON");
  }

  get open(): boolean {
    return this.handle.open;
  }

  /**
   * Runs a statement of the layer itself: at once when no transaction is open or when it comes from
   * the open transaction's own callback (which may call helpers that use the layer), else after the
   * transactions queued before it.
   */
  private outside<T>(statement: () => Promise<T>): Promise<T> {
    if (!this.txLock.busy || this.transactionScope.getStore()?.open) return statement();
    return this.txLock.run(statement);
  }

  override all<R>(q: Prepared<R>, args?: readonly unknown[]): Promise<R[]> {
    return this.outside(() => super.all(q, args));
  }
  override first<R>(q: Prepared<R>, args?: readonly unknown[]): Promise<R | undefined> {
    return this.outside(() => super.first(q, args));
  }
  override run(q: Prepared<unknown>, args?: readonly unknown[]): Promise<number> {
    return this.outside(() => super.run(q, args));
  }
  override exec(sqlText: string, params?: readonly unknown[]): Promise<unknown[]> {
    return this.outside(() => super.exec(sqlText, params));
  }

  transaction<T>(fn: (tx: Sql) => Promise<T>, opts: { durable?: boolean } = {}): Promise<T> {
    // One connection per process: transactions of this process queue here (a second BEGIN on the
    // same connection would fail), other processes wait on the file lock (busy_timeout).
    return this.txLock.run(() => {
      const scope = { open: true };
      return this.transactionScope.run(scope, async () => {
        if (opts.durable) this.handle.pragma("synchronous = FULL");
        this.handle.exec("BEGIN IMMEDIATE");
        try {
          const result = await fn(this);
          this.handle.exec("COMMIT");
          return result;
        } catch (e) {
          if (this.handle.inTransaction) this.handle.exec("ROLLBACK");
          throw e;
        } finally {
          // Work the callback left running (not awaited) no longer belongs to this transaction.
          scope.open = false;
          if (opts.durable) this.handle.pragma("synchronous = NORMAL");
        }
      });
    });
  }

  async close(): Promise<void> {
    await this.txLock.run(async () => {
      if (this.handle.open) this.handle.close();
    });
  }
}

// ------------------------------------------------------------------------------------------ PostgreSQL

const INT8 = 20;
const NUMERIC = 1700;
/**
 * BIGINT columns (times in ms, cents) and SUM()s come back as numbers, like SQLite's: every value
 * the schema stores is a safe integer (amounts are checked before they are written).
 */
function typeParsers(pg: typeof import("pg")) {
  return {
    getTypeParser(oid: number, format?: "text" | "binary") {
      if (oid === INT8 || oid === NUMERIC) return (v: string) => Number(v);
      return pg.types.getTypeParser(oid, format as "text");
    },
  };
}

/**
 * `pg` is loaded only when PostgreSQL is configured: the embedded default (SQLite) does not pay for
 * loading it at start.
 */
function newPool(url: string, max: number): Pool {
  const pg = require("pg") as typeof import("pg");
  return new pg.Pool({
    connectionString: url,
    max,
    // A database that does not answer is refused quickly (typed 503), not waited on for ever.
    connectionTimeoutMillis: 5_000,
    types: typeParsers(pg),
  });
}

/**
 * Statements sent to PostgreSQL by every data layer of this process (BEGIN and COMMIT included: each
 * is a round trip). Read by the tests and `npm run bench:postgres` to count round trips per request
 * (docs/performance.md, "PostgreSQL per request"); a number, so counting costs nothing measurable.
 */
let statementsSent = 0;
/** The same, per database name: a test counting one stack's statements is not disturbed by another's timers. */
const statementsByDatabase = new Map<string, number>();

/**
 * How many statements this process has sent to PostgreSQL so far: to `database` (a database name), or
 * to every database (all pools together).
 */
export function postgresStatementCount(database?: string): number {
  return database === undefined ? statementsSent : (statementsByDatabase.get(database) ?? 0);
}

/** While a tally runs: statements sent, per statement text (BEGIN and COMMIT included). */
let tally: Map<string, number> | null = null;

/**
 * Starts counting statements per text (the round-trip tables of `npm run bench:pgtrips` and the tests
 * that pin them); the returned function stops the tally and gives its counts. One tally at a time.
 */
export function tallyPostgresStatements(): () => Map<string, number> {
  const mine = new Map<string, number>();
  tally = mine;
  return () => {
    if (tally === mine) tally = null;
    return mine;
  };
}

/**
 * The name a statement is prepared under on each connection: derived from its text, so two texts
 * never share a name (pg refuses that) and the same text always finds its earlier preparation. Named
 * statements are parsed and planned once per connection instead of on every execution.
 */
const statementNames = new Map<string, string>();
function statementName(sqlText: string): string {
  let name = statementNames.get(sqlText);
  if (!name) {
    name = "sigil_" + createHash("sha256").update(sqlText).digest("hex").slice(0, 24);
    statementNames.set(sqlText, name);
  }
  return name;
}

class PostgresExecutor implements Sql {
  readonly kind = "postgres" as const;
  /** The database this executor's statements go to (a Pool keeps it in its options, a client on itself). */
  private readonly database: string;
  constructor(private readonly target: Pool | PoolClient) {
    const t = target as { options?: { database?: string }; database?: string };
    this.database = t.options?.database ?? t.database ?? "";
  }

  protected count(sqlText: string): void {
    statementsSent++;
    statementsByDatabase.set(this.database, (statementsByDatabase.get(this.database) ?? 0) + 1);
    if (tally) tally.set(sqlText, (tally.get(sqlText) ?? 0) + 1);
  }

  private async query(q: Prepared<unknown>, args: readonly unknown[]) {
    const c = q.compile("postgres");
    return this.guard(() => {
      this.count(c.sql);
      return this.target.query({ name: statementName(c.sql), text: c.sql, values: bind(c, args) });
    });
  }
  async all<R>(q: Prepared<R>, args: readonly unknown[] = []): Promise<R[]> {
    return (await this.query(q, args)).rows as R[];
  }
  async first<R>(q: Prepared<R>, args: readonly unknown[] = []): Promise<R | undefined> {
    return (await this.query(q, args)).rows[0] as R | undefined;
  }
  async run(q: Prepared<unknown>, args: readonly unknown[] = []): Promise<number> {
    return (await this.query(q, args)).rowCount ?? 0;
  }
  async exec(
    sqlText: string,
    params: readonly unknown[] = [],
    opts: { prepared?: boolean } = {},
  ): Promise<unknown[]> {
    return (
      await this.guard(() => {
        this.count(sqlText);
        return opts.prepared
          ? this.target.query({ name: statementName(sqlText), text: sqlText, values: params as unknown[] })
          : this.target.query(sqlText, params as unknown[]);
      })
    ).rows;
  }
  protected async guard<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      throw isConnectionError(e) ? databaseUnavailable(e) : e;
    }
  }
}

class PostgresLayer extends PostgresExecutor implements DataLayer {
  readonly sqlite = null;
  private closed = false;

  constructor(
    /** Where it connects: two layers on one URL share tables (sameDatabase). Never logged. */
    readonly url: string,
    poolSize: number,
    private readonly pool = newPool(url, poolSize),
  ) {
    super(pool);
    // An idle client losing its connection emits here; without a listener it would crash the process.
    pool.on("error", () => undefined);
  }

  get open(): boolean {
    return !this.closed;
  }

  async transaction<T>(fn: (tx: Sql) => Promise<T>): Promise<T> {
    const client = await this.guard(() => this.pool.connect());
    let broken = false;
    try {
      this.count("BEGIN");
      await this.guard(() => client.query("BEGIN"));
      const result = await fn(new PostgresExecutor(client));
      this.count("COMMIT");
      await this.guard(() => client.query("COMMIT"));
      return result;
    } catch (e) {
      try {
        this.count("ROLLBACK");
        await client.query("ROLLBACK");
      } catch {
        broken = true; // the connection is gone: do not hand it to the next caller
      }
      throw e;
    } finally {
      client.release(broken);
    }
  }

  /** Runs `fn` on one dedicated connection (session-level advisory locks need that). */
  async session<T>(fn: (s: Sql) => Promise<T>): Promise<T> {
    const client = await this.guard(() => this.pool.connect());
    try {
      return await fn(new PostgresExecutor(client));
    } finally {
      client.release();
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pool.end();
  }
}

export function isPostgresLayer(d: DataLayer): d is DataLayer & { session: PostgresLayer["session"] } {
  return d instanceof PostgresLayer;
}

/**
 * Whether two layers reach the same tables: one layer, or two PostgreSQL pools on one URL (billing
 * opens its own pool on the relayer's database). Two SQLite layers are never treated as one.
 */
export function sameDatabase(a: DataLayer, b: DataLayer): boolean {
  return a === b || (a instanceof PostgresLayer && b instanceof PostgresLayer && a.url === b.url);
}
