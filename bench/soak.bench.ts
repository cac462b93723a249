/**
 * The embedded default over a long life (`npm run bench:soak`). Everything real: `npm start` itself
 * (scripts/start.ts in a child process, on a fresh data folder, with the embedded anvil), then N path-A
 * writes (`POST /core/v1/pkps/create`) over HTTP from several accounts at 8 concurrent clients, from this
 * process (the clients must not share the service's main thread).
 *
 * Prints, per window of N/10 writes: the write rate, the chain block number and the size of the chain
 * state file in the data folder; then the figure, last window / first window (goal ≥ 0.80: the rate
 * must not fall as the chain's history grows), and bytes of chain state per block and per write.
 *
 *   SOAK_WRITES=…   number of writes (default 4,000: a few minutes on a 2-CPU machine)
 *   SOAK_ACCOUNTS=… accounts the writes are spread over (default 8)
 *   SOAK_CLIENTS=…  concurrent clients (default 8)
 *   SOAK_ENV='{"SIGIL_…":"…"}' extra environment for the service (to compare settings in one shell)
 */
import { spawn, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { freePort } from "../scripts/start/anvil";
import { DATA_FILES } from "../scripts/start/service";
import { keepAliveAgent, postBytes } from "./httpPost";

const WRITES = Number(process.env.SOAK_WRITES ?? 4_000);
const ACCOUNTS = Number(process.env.SOAK_ACCOUNTS ?? 8);
const CLIENTS = Number(process.env.SOAK_CLIENTS ?? 8);
const WINDOW = Math.max(1, Math.floor(WRITES / 10));
const ROOT = path.resolve(__dirname, "..");

const agent = keepAliveAgent();
const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  postBytes(agent, url, Buffer.from(JSON.stringify(body)), headers);

/** CPU seconds (user + system) a process has used so far, from /proc (Linux); NaN elsewhere. */
function cpuSeconds(pid: number | undefined): number {
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ 100)
  } catch {
    return NaN;
  }
}

async function rpc(url: string, method: string): Promise<string> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params: [] }),
  });
  return ((await res.json()) as { result: string }).result;
}

/** `npm start` as a user runs it (same entry point, same loader), with every limit out of the way. */
async function startService(dataDir: string): Promise<{ child: ChildProcess; url: string; rpcUrl: string }> {
  const [port, anvilPort] = [await freePort(), await freePort()];
  const child = spawn(
    process.execPath,
    ["-r", "ts-node/register/transpile-only", path.join(ROOT, "scripts", "start.ts")],
    {
      cwd: ROOT,
      stdio: ["ignore", "ignore", "pipe"],
      env: {
        ...process.env,
        SIGIL_DATA_DIR: dataDir,
        PORT: String(port),
        SIGIL_ANVIL_PORT: String(anvilPort),
        SIGIL_LOG_FILE: path.join(dataDir, "sigil.log"),
        SIGIL_RATE_LIMIT_PER_KEY_PER_MINUTE: "1000000",
        SIGIL_RATE_LIMIT_PER_ACCOUNT_PER_MINUTE: "1000000",
        SIGIL_RATE_LIMIT_NEW_ACCOUNTS_PER_IP_PER_HOUR: "1000000",
        SIGIL_RATE_LIMIT_PER_IP_PER_MINUTE: "1000000",
        SIGIL_SIGNUP_CREDIT_CENTS: "1000000", // billing stays on the path, the credit never runs out
        ...(process.env.SOAK_ENV ? (JSON.parse(process.env.SOAK_ENV) as Record<string, string>) : {}),
      },
    },
  );
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 180_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`npm start exited: ${stderr}`);
    if (Date.now() > deadline) throw new Error(`npm start did not answer in 180 s: ${stderr}`);
    try {
      if ((await fetch(`${url}/health`)).ok) break;
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  const external = process.env.SOAK_ENV
    ? (JSON.parse(process.env.SOAK_ENV) as Record<string, string>).SIGIL_RPC_URL
    : undefined;
  return { child, url, rpcUrl: external ?? `http://127.0.0.1:${anvilPort}` };
}

async function stopService(child: ChildProcess): Promise<number> {
  if (child.exitCode !== null) return 0;
  const t = performance.now();
  const exited = new Promise((r) => child.once("exit", r));
  child.kill("SIGTERM"); // npm start stops the API, then the chain (which writes its state)
  const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
  await exited;
  clearTimeout(timer);
  return performance.now() - t;
}

async function main(): Promise<void> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-soak-"));
  const statePath = path.join(dataDir, DATA_FILES.chainState);
  const stateSize = () => (fs.existsSync(statePath) ? fs.statSync(statePath).size : 0);
  const t0 = performance.now();
  const { child, url, rpcUrl } = await startService(dataDir);
  const startMs = performance.now() - t0;
  try {
    const keys: string[] = [];
    for (let i = 0; i < ACCOUNTS; i++) {
      const r = await post(`${url}/core/v1/new_account`, {});
      if (r.status !== 200 && r.status !== 201) throw new Error(`new_account: ${r.status} ${r.body}`);
      keys.push(JSON.parse(r.body).api_key as string);
    }
    console.log(
      `soak: ${WRITES} pkps/create writes, ${ACCOUNTS} accounts, ${CLIENTS} clients, window ${WINDOW}; ` +
        `npm start took ${(startMs / 1000).toFixed(1)} s; SOAK_ENV=${process.env.SOAK_ENV ?? "{}"}`,
    );
    // Where the time goes, per window: CPU of anvil (mining, state dumps) and of the service's process.
    // (With SIGIL_RPC_URL in SOAK_ENV the chain is someone else's: no anvil.pid, its columns read NaN.)
    const pidFile = path.join(dataDir, DATA_FILES.anvilPid);
    const anvilPid = fs.existsSync(pidFile) ? Number(fs.readFileSync(pidFile, "utf8").split(/\s+/)[0]) : 0;
    let cpu = { anvil: cpuSeconds(anvilPid), service: cpuSeconds(child.pid) };
    console.log(
      "| writes | writes/s | block | chain-state bytes | anvil CPU ms/write | service CPU ms/write |\n|---|---|---|---|---|---|",
    );
    let issued = 0;
    let done = 0;
    let windowStart = performance.now();
    const rates: number[] = [];
    const windows: Promise<void>[] = [];
    const client = async (c: number) => {
      while (issued < WRITES) {
        const key = keys[issued++ % keys.length];
        const r = await post(`${url}/core/v1/pkps/create`, {}, { "x-api-key": key });
        if (r.status !== 201) throw new Error(`pkps/create (client ${c}): ${r.status} ${r.body}`);
        if (++done % WINDOW === 0) {
          const now = performance.now();
          const rate = WINDOW / ((now - windowStart) / 1000);
          windowStart = now;
          rates.push(rate);
          const n = done;
          const now2 = { anvil: cpuSeconds(anvilPid), service: cpuSeconds(child.pid) };
          const perWrite = (k: "anvil" | "service") => (((now2[k] - cpu[k]) * 1000) / WINDOW).toFixed(2);
          const [a, sv] = [perWrite("anvil"), perWrite("service")];
          cpu = now2;
          windows.push(
            rpc(rpcUrl, "eth_blockNumber").then((b) =>
              console.log(
                `| ${String(n).padStart(6)} | ${rate.toFixed(1).padStart(8)} | ${String(parseInt(b, 16)).padStart(5)} | ${String(stateSize()).padStart(10)} | ${a.padStart(5)} | ${sv.padStart(5)} |`,
              ),
            ),
          );
        }
      }
    };
    await Promise.all(Array.from({ length: CLIENTS }, (_, c) => client(c)));
    await Promise.all(windows);
    const blocks = parseInt(await rpc(rpcUrl, "eth_blockNumber"), 16);
    // With no traffic at all, anvil still rewrites the whole state file every interval.
    const idle0 = cpuSeconds(anvilPid);
    await new Promise((r) => setTimeout(r, 10_000));
    const idleShare = (cpuSeconds(anvilPid) - idle0) / 10;
    const stopMs = await stopService(child);
    const finalSize = stateSize();
    console.log(
      `figure: last/first window = ${(rates[rates.length - 1] / rates[0]).toFixed(2)} ` +
        `(${rates[0].toFixed(1)} → ${rates[rates.length - 1].toFixed(1)} writes/s; goal ≥ 0.80)`,
    );
    console.log(
      `chain state on disk after a clean stop: ${finalSize} bytes, ${blocks} blocks, ` +
        `${(finalSize / Math.max(1, blocks)).toFixed(0)} bytes/block, ${(finalSize / WRITES).toFixed(0)} bytes/write; ` +
        `stop took ${(stopMs / 1000).toFixed(1)} s`,
    );
    console.log(
      `anvil CPU while idle (10 s, no requests) before the stop: ${(idleShare * 100).toFixed(0)}% of a core`,
    );
    // A restart on the grown state: how long until /health answers again.
    const t1 = performance.now();
    const again = await startService(dataDir);
    console.log(`restart on the grown state: ${((performance.now() - t1) / 1000).toFixed(1)} s`);
    await stopService(again.child);
  } finally {
    await stopService(child);
    agent.destroy();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
