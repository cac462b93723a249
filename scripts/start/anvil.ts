/**
 * The embedded chain: anvil from the @foundry-rs/anvil npm package with its state in the data folder.
 *
 * anvil's `--state FILE` loads FILE at start and writes it on exit; SIGINT and SIGTERM both make anvil
 * write it (verified with anvil 1.7.1), SIGKILL does not, so while it runs the file is also saved by
 * ChainStateSaver (./chainStateSaver.ts): after new blocks only, and never taking more than a twentieth
 * of the time (anvil's own `--state-interval` rewrote the whole, ever-growing file every few seconds,
 * idle or not). The binary is spawned directly (not through the
 * package's node wrapper, which re-raises the signal on itself before anvil has finished writing) and in
 * its own process group, so a terminal Ctrl-C reaches only `npm start`, which stops the API first and the
 * chain last. A pid file lets the next start clean up an anvil orphaned by a hard kill of its parent.
 */
import { ChildProcess, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import { ChainStateSaver } from "./chainStateSaver";

export interface AnvilOptions {
  /** The chain state file (created on first start). */
  statePath: string;
  /** Where the pid of the running anvil is written, for orphan clean-up. */
  pidPath: string;
  host?: string;
  /** 0 = pick a free port. */
  port: number;
  chainId: number;
  /**
   * Shortest time between two saves of the state file while running, in seconds; default 2 (longer
   * once a save is costly: see ChainStateSaver). What a hard kill can lose.
   */
  stateIntervalSeconds?: number;
  /** Where a failed save of the state file is reported (default: nowhere; the next save retries). */
  onStateSaveError?: (err: Error) => void;
  /** How long to wait for the RPC to answer; default 15 s. */
  readyTimeoutMs?: number;
  binary?: string;
}

export interface RunningAnvil {
  rpcUrl: string;
  port: number;
  pid: number;
  /** Stops anvil with SIGTERM (it writes the state file) and waits for it to exit; SIGKILL after 10 s. */
  stop(): Promise<void>;
  /** Saves the state file now, whatever changed (after start-up's deployment and funding). */
  saveState(): Promise<void>;
  /** The saver of the state file (its counters: tests, benchmarks). */
  saver: ChainStateSaver;
  /** Resolves when the process exits for any reason (so the service can notice a crashed chain). */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export class AnvilError extends Error {
  constructor(
    readonly code:
      | "anvil_not_found"
      | "anvil_port_in_use"
      | "anvil_in_use"
      | "anvil_failed_to_start"
      | "anvil_state_unreadable",
    message: string,
  ) {
    super(message);
    this.name = "AnvilError";
  }
}

/** The anvil executable: the platform package's binary, falling back to node_modules/.bin/anvil. */
export function anvilBinary(): string {
  const pkg = `@foundry-rs/anvil-${process.platform}-${process.arch === "x64" ? "amd64" : process.arch}`;
  const exe = process.platform === "win32" ? "anvil.exe" : "anvil";
  try {
    const candidate = require.resolve(`${pkg}/bin/${exe}`);
    if (fs.existsSync(candidate)) return candidate;
  } catch {
    // fall through
  }
  const shim = path.resolve(__dirname, "..", "..", "node_modules", ".bin", "anvil");
  if (fs.existsSync(shim)) return shim;
  throw new AnvilError(
    "anvil_not_found",
    `anvil was not found (looked for ${pkg} and node_modules/.bin/anvil). Run npm install.`,
  );
}

export async function freePort(host = "127.0.0.1"): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, host, () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/** True if something accepts connections on host:port (checked before we try to listen there). */
export async function portInUse(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
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
 * The pid file holds "<anvil pid> <owner pid>". If the owner (the `npm start` that launched it) is still
 * alive, another Sigil is using this data folder: refuse. If only the anvil is alive and it uses this very
 * state file, it is an orphan of a hard-killed start: stop it (SIGTERM, so it writes its state) so that
 * its port and state file are free again. Any other process is left alone.
 */
export async function reapOrphan(pidPath: string, statePath: string): Promise<boolean> {
  if (!fs.existsSync(pidPath)) return false;
  const [pid, owner] = fs.readFileSync(pidPath, "utf8").trim().split(/\s+/).map(Number);
  if (
    Number.isInteger(owner) &&
    owner > 1 &&
    owner !== process.pid &&
    isAlive(owner) &&
    Number.isInteger(pid) &&
    isAlive(pid)
  )
    throw new AnvilError(
      "anvil_in_use",
      `Another Sigil (pid ${owner}) is already running with this data folder (${path.dirname(pidPath)}). ` +
        `Stop it first (Ctrl-C in its terminal, or kill -TERM ${owner}), or use another SIGIL_DATA_DIR.`,
    );
  fs.rmSync(pidPath, { force: true });
  if (!Number.isInteger(pid) || pid <= 1 || !isAlive(pid)) return false;
  let cmdline = "";
  try {
    cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ");
  } catch {
    return false; // no /proc: cannot prove it is ours, so leave it
  }
  if (!cmdline.includes("anvil") || !cmdline.includes(statePath)) return false;
  process.kill(pid, "SIGTERM"); // anvil writes its state on SIGTERM
  for (let i = 0; i < 100 && isAlive(pid); i++) await new Promise((r) => setTimeout(r, 100));
  if (isAlive(pid)) process.kill(pid, "SIGKILL");
  return true;
}

async function rpcAnswers(url: string): Promise<boolean> {
  try {
    const res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] }),
      signal: AbortSignal.timeout(1000),
    });
    return res.ok;
  } catch {
    return false;
  }
}

export async function startAnvil(opts: AnvilOptions): Promise<RunningAnvil> {
  const host = opts.host ?? "127.0.0.1";
  const binary = opts.binary ?? anvilBinary();
  await reapOrphan(opts.pidPath, opts.statePath);
  const port = opts.port === 0 ? await freePort(host) : opts.port;
  if (await portInUse(host, port))
    throw new AnvilError(
      "anvil_port_in_use",
      `Port ${port} on ${host} is already in use, so the embedded chain cannot start. Stop whatever uses it, or set SIGIL_ANVIL_PORT to another port.`,
    );
  if (fs.existsSync(opts.statePath)) {
    try {
      JSON.parse(fs.readFileSync(opts.statePath, "utf8"));
    } catch {
      throw new AnvilError(
        "anvil_state_unreadable",
        `The chain state file ${opts.statePath} is unreadable (truncated or corrupted). Restore it from a backup, ` +
          `or move the data folder away to start from scratch (every account on this chain would be lost).`,
      );
    }
  }
  const args = [
    "--state",
    opts.statePath,
    "--chain-id",
    String(opts.chainId),
    "--host",
    host,
    "--port",
    String(port),
    "--silent",
  ];
  const child: ChildProcess = spawn(binary, args, { stdio: ["ignore", "ignore", "pipe"], detached: true });
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4000);
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once("exit", (code, signal) => resolve({ code, signal }));
    child.once("error", () => resolve({ code: null, signal: null }));
  });
  const spawnError = new Promise<Error>((resolve) => child.once("error", resolve));
  fs.writeFileSync(opts.pidPath, `${child.pid ?? ""} ${process.pid}`);
  // A crash of our own process (not a signal we handle) must not leave the chain running.
  const killOnExit = () => {
    try {
      if (child.exitCode === null) child.kill("SIGTERM");
    } catch {
      // already gone
    }
  };
  process.once("exit", killOnExit);

  const rpcUrl = `http://${host}:${port}`;
  const deadline = Date.now() + (opts.readyTimeoutMs ?? 15_000);
  let ready = false;
  while (Date.now() < deadline) {
    const outcome = await Promise.race([
      rpcAnswers(rpcUrl).then((ok) => (ok ? "ready" : "wait")),
      exited.then(() => "exited" as const),
      spawnError.then(() => "exited" as const),
    ]);
    if (outcome === "ready") {
      ready = true;
      break;
    }
    if (outcome === "exited") break;
    await new Promise((r) => setTimeout(r, 100));
  }
  if (!ready) {
    killOnExit();
    process.off("exit", killOnExit);
    fs.rmSync(opts.pidPath, { force: true });
    throw new AnvilError(
      "anvil_failed_to_start",
      `The embedded chain (anvil) did not start on ${rpcUrl}.${stderr ? ` anvil said: ${stderr.trim()}` : ""}`,
    );
  }

  const saver = new ChainStateSaver({
    rpcUrl,
    statePath: opts.statePath,
    minIntervalMs: (opts.stateIntervalSeconds ?? 2) * 1000,
    onError: opts.onStateSaveError,
  });
  saver.start();
  void exited.then(() => saver.stop());

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      // A save in progress finishes first: anvil's own write on SIGTERM must be the last one.
      await saver.stop();
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
        await exited;
        clearTimeout(timer);
      }
      process.off("exit", killOnExit);
      fs.rmSync(opts.pidPath, { force: true });
    })();
    return stopping;
  };
  return { rpcUrl, port, pid: child.pid!, stop, exited, saver, saveState: () => saver.saveIfChanged(true) };
}
