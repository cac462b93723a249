/**
 * Queries written once with kysely's query builder and compiled once per engine, then executed
 * straight through the engine's driver (better-sqlite3 prepared statements, pg parameterised
 * queries). Building and compiling a kysely query costs tens of microseconds, which on SQLite is
 * more than the query itself and more than the metering budget of a trivial execution
 * (docs/billing.md, "Two engines"); compiling once keeps that cost out of the hot path.
 *
 * A query is defined by a function of its arguments; it is called once with placeholder tokens,
 * and the compiled parameter list remembers where each argument goes.
 */
import {
  type Compilable,
  DummyDriver,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
} from "kysely";
import type { Schema } from "./schema";

export type EngineKind = "sqlite" | "postgres";

/** Argument i of a prepared query (typed loosely: it stands for a string, a number or null). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Arg = (i: number) => any;

export interface Compiled {
  sql: string;
  /** For each bound parameter: the index of the argument it takes, or a constant. */
  slots: Array<{ arg: number } | { value: unknown }>;
}

export class Prepared<R> {
  private readonly compiled = new Map<EngineKind, Compiled>();
  /** `returnsRows`: SELECT or RETURNING (SQLite needs to know whether to read rows). */
  constructor(
    readonly name: string,
    private readonly build: (db: Kysely<Schema>, arg: Arg) => Compilable<R>,
  ) {}

  compile(kind: EngineKind): Compiled {
    let c = this.compiled.get(kind);
    if (!c) {
      const q = this.build(compilerFor(kind), (i) => TOKEN + i).compile();
      c = {
        sql: q.sql,
        slots: q.parameters.map((p) =>
          typeof p === "string" && p.startsWith(TOKEN)
            ? { arg: Number(p.slice(TOKEN.length)) }
            : { value: p },
        ),
      };
      this.compiled.set(kind, c);
    }
    return c;
  }
}

export function prepare<R>(
  name: string,
  build: (db: Kysely<Schema>, arg: Arg) => Compilable<R>,
): Prepared<R> {
  return new Prepared(name, build);
}

export function bind(c: Compiled, args: readonly unknown[]): unknown[] {
  return c.slots.map((s) => ("arg" in s ? args[s.arg] : s.value));
}

const TOKEN = "\u0000sigil-arg:";

const compilers = new Map<EngineKind, Kysely<Schema>>();
/** A kysely instance that only compiles (DummyDriver): it never connects anywhere. */
export function compilerFor(kind: EngineKind): Kysely<Schema> {
  let k = compilers.get(kind);
  if (!k) {
    k = new Kysely<Schema>({
      dialect:
        kind === "sqlite"
          ? {
              createAdapter: () => new SqliteAdapter(),
              createDriver: () => new DummyDriver(),
              createIntrospector: (db) => new SqliteIntrospector(db),
              createQueryCompiler: () => new SqliteQueryCompiler(),
            }
          : {
              createAdapter: () => new PostgresAdapter(),
              createDriver: () => new DummyDriver(),
              createIntrospector: (db) => new PostgresIntrospector(db),
              createQueryCompiler: () => new PostgresQueryCompiler(),
            },
    });
    compilers.set(kind, k);
  }
  return k;
}
