/**
 * One Sigil instance as its own process: `scripts/start.ts` (what `npm start` runs) pointed at the
 * cluster's chain, deployment and database, with its own id, port and data folder. Everything an
 * instance needs comes through the environment, exactly as an operator would configure a production
 * instance; nothing is shared in memory with the orchestrator.
 */
import { type ChildProcess, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";

const ROOT = path.resolve(__dirname, "..", "..");
const START_SCRIPT = path.join(ROOT, "scripts", "start.ts");
/** What scripts/start.ts prints once the API listens (scripts/start/banner.ts). */
const READY_LINE = /Sigil is running at (\S+)/;

export interface InstanceSpec {
  /** SIGIL_INSTANCE_ID: names the instance among those sharing the database (its gas wallets). */
  id: string;
  port: number;
  host: string;
  /** The instance's own data folder (relayer files, log). */
  dataDir: string;
  /** The environment shared by every instance (chain, deployment, database, root key…). */
  env: NodeJS.ProcessEnv;
  /** How long to wait for the banner; default 120 s (ts-node compiles the service on each start). */
  readyTimeoutMs?: number;
}

export interface RunningInstance {
  id: string;
  url: string;
  port: number;
  pid: number;
  /** Resolves with the exit code (null when killed by a signal) and the signal. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGTERM (a clean stop: the instance commits its charges and closes), SIGKILL after 30 s. */
  stop(): Promise<void>;
  /** SIGKILL: a crash, for the tests. Resolves once the process is gone. */
  kill(): Promise<void>;
}

/** The environment of one instance: the shared part, then what is its own. */
export function instanceEnv(spec: InstanceSpec): NodeJS.ProcessEnv {
  return {
    ...spec.env,
    SIGIL_INSTANCE_ID: spec.id,
    PORT: String(spec.port),
    SIGIL_HOST: spec.host,
    SIGIL_DATA_DIR: spec.dataDir,
    SIGIL_LOG_FILE: path.join(spec.dataDir, "sigil.log"),
  };
}

export async function startInstance(spec: InstanceSpec): Promise<RunningInstance> {
  fs.mkdirSync(spec.dataDir, { recursive: true, mode: 0o700 });
  const console = fs.openSync(path.join(spec.dataDir, "console.log"), "a");
  // Its own process group: a terminal Ctrl-C reaches the orchestrator only, which stops the instances
  // in order (and the database last).
  const child: ChildProcess = spawn(
    process.execPath,
    ["-r", "ts-node/register/transpile-only", START_SCRIPT],
    {
      cwd: ROOT,
      env: instanceEnv(spec),
      stdio: ["ignore", "pipe", console],
      detached: true,
    },
  );
  fs.closeSync(console);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once("exit", (code, signal) => resolve({ code, signal }));
    child.once("error", () => resolve({ code: null, signal: null }));
  });
  let stdout = "";
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(
        new Error(`instance ${spec.id} did not start within ${(spec.readyTimeoutMs ?? 120_000) / 1000} s`),
      );
    }, spec.readyTimeoutMs ?? 120_000);
    child.stdout!.on("data", (d: Buffer) => {
      stdout = (stdout + d.toString()).slice(-8000);
      const m = READY_LINE.exec(stdout);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      const tail = readTail(path.join(spec.dataDir, "console.log"));
      reject(new Error(`instance ${spec.id} exited while starting (${signal ?? code}): ${tail}`));
    });
  });
  // The banner is read; the rest of stdout (nothing, with the log in a file) is drained, never buffered.
  child.stdout!.resume();

  const signalAndWait = async (signal: NodeJS.Signals, graceMs: number) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill(signal);
    const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
    await exited;
    clearTimeout(timer);
  };
  return {
    id: spec.id,
    url,
    port: Number(new URL(url).port),
    pid: child.pid!,
    exited,
    stop: () => signalAndWait("SIGTERM", 30_000),
    kill: () => signalAndWait("SIGKILL", 0),
  };
}

function readTail(file: string): string {
  try {
    return fs.readFileSync(file, "utf8").trim().split("\n").slice(-8).join("\n");
  } catch {
    return "(no output)";
  }
}
