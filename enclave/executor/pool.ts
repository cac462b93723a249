/**
 * The pool of pre-warmed, locked-down worker threads that runs actions, one run per worker at a time.
 *
 * The parent (this module, in the main thread) owns everything that must survive a misbehaving worker:
 * the wall-time timer, the captured logs (streamed from the worker as they are written), the key-op
 * and fetch counters, and the memory watchdog. A worker that times out, runs out of heap, exceeds its
 * off-heap budget, or dies is terminated and replaced; its run ends with a stable error code and the
 * logs so far, and the pool keeps serving.
 */
import type { PreparedImports } from "./modules/loader";
import { MessageChannel, Worker, type MessagePort } from "node:worker_threads";
import type { KeyCapabilities } from "../capabilities";
import { cryptoThread } from "./crypto-thread";
import { InFlightLimit } from "./in-flight-limit";
import { KeyOpScheduler } from "./key-op-scheduler";
import { serveKeyOp, type KeyOpError } from "./key-ops";
import { sendDeadline, type SendService } from "./send";
import { KeyOperationLog, type KeyOperationRecord } from "./key-operation-log";
import type { PolicyGate } from "./policy-gate";
import type { GroupPolicy } from "../policy";
import { SentPolicies } from "./policy-handover";
import { SentCode } from "./code-handover";
import type { ExecutorLimits } from "./limits";
import { SIGNER_SCRIPT, WORKER_SCRIPT } from "./pool-paths";
import type { FetchPolicy } from "./fetch-policy";
import type { Priority } from "./fair-queue";

export { SIGNER_SCRIPT, WORKER_SCRIPT };

const MB = 1024 * 1024;
/** How often the watchdog samples memory while runs are in progress. */
const WATCHDOG_INTERVAL_MS = 25;
/** A worker that has not answered a memory probe for this long, under memory pressure, is killed. */
const UNRESPONSIVE_MS = 100;
/** Headroom over the idle RSS before the process counts as under memory pressure. */
const PRESSURE_SLACK_BYTES = 64 * MB;
/**
 * The idle RSS is re-read when a run starts on an idle pool, at most this often: reading it is a system
 * call (a tenth of the main thread's time per run when runs follow each other one at a time), and a
 * baseline a second old is as good a reference against 64 MB of slack.
 */
const IDLE_RSS_REFRESH_MS = 1000;
/** Consecutive workers that die before becoming ready, after which the pool stops respawning. */
const MAX_STARTUP_FAILURES = 3;
/**
 * Requests one run may have in the crypto thread at once (key-ops.ts): enough to keep that thread busy
 * for one run, few enough that other runs' requests are never stuck behind a flood of one run's.
 */
const CRYPTO_IN_FLIGHT_PER_RUN = 2;
/** A job queued behind a run that has gone on this long is taken back when another worker is idle. */
const PIPELINE_RELEASE_MS = 20;
/**
 * Key operations of one account in progress on the main thread at once (key-op-scheduler.ts): enough
 * for a run's requests to the crypto thread (two per run) and an authorization or two, few enough that
 * another account's operation waits for at most these.
 */
const KEY_OPS_IN_FLIGHT_PER_ACCOUNT = 4;
/**
 * Key operations started in one turn of the event loop, across accounts, before the loop polls for
 * I/O again: a flood of tens of microseconds each delays an HTTP request by a few milliseconds at most.
 */
const KEY_OPS_PER_TURN = 64;

export interface PoolJob {
  /**
   * Whose run this is (the relayer's account id; "" when the caller has no accounts): runs and key
   * operations are shared fairly between accounts (fair-queue.ts).
   */
  account: string;
  /** Interactive runs are dispatched before background ones (fair-queue.ts, PriorityFairQueue). */
  priority: Priority;
  code: string;
  /** The run's imported modules, verified and transformed (modules/loader.ts); absent: none. */
  imports?: { modules: PreparedImports["modules"]; actionDeps: number[] };
  cid: string;
  paramsJson: string;
  limits: ExecutorLimits;
  /** Null: fetch disabled for this run. */
  fetchPolicy: FetchPolicy | null;
  /** Lenient: an unhandled rejection after the action set its response does not fail the run. */
  lenientRejections: boolean;
  /** Request headers the action sees as Lit.Headers (x-request-id, x-correlation-id). */
  requestHeaders: Record<string, string>;
  authorizePkp: (pkpIdOrAddress: string) => Promise<string>;
  /** The run's signing-policy check (policy-gate.ts); absent: no policy applies. */
  policy?: PolicyGate;
  /**
   * The run's own PKP, already authorized through authorizePkp: its key is derived at dispatch and moved
   * into the worker for this run (worker/run-key.js). Null: every key operation comes to the main thread.
   */
  runKey: RunKeyGrant | null;
  finish: (outcome: RunOutcome) => void;
}

/** What lets a worker serve the run's own PKP, and until when (index.ts, invalidateRunKeys). */
export interface RunKeyGrant {
  /** Canonical PKP id, as authorizePkp answered it. */
  pkpId: string;
  /** The epoch counter guarding this grant, and its value before authorization. */
  slot: number;
  epoch: number;
  notAfterMs: number;
  /**
   * The stateless policies the worker checks every signature of this PKP against (policy-gate.ts,
   * handOver), read after the epoch above; null: no policy applies.
   */
  policies: readonly GroupPolicy[] | null;
}

export interface RunOutcome {
  responseJson?: string;
  /** Named signatures of the older signEcdsa API (worker/legacy-sign.js), as a JSON object. */
  signaturesJson?: string;
  error: KeyOpError | null;
  logs: string;
  executionMs: number;
  keyOps: number;
  fetches: number;
  /** What each key operation did, both sides' (key-operation-log.ts); absent when the run made none. */
  keyOperations?: KeyOperationRecord[];
}

/**
 * Where a run was when it was stopped at its wall-time limit: for the operator's log line (never the
 * action's parameters or code, nor any key material). A run that never started in its worker, or one
 * waiting on a key operation, points at the executor, not at the action.
 */
export interface WallTimeStop {
  runId: number;
  account: string;
  cid: string;
  wallTimeMs: number;
  /** Posted to its worker behind another run (pipelining) rather than to an idle worker. */
  pipelined: boolean;
  /** A "release" was asked for it while it was queued behind that run. */
  releaseAsked: boolean;
  /** Milliseconds from being posted to the worker to becoming its current run here. */
  queuedMs: number;
  /** Whether the worker had claimed it (worker/sandbox-worker.js, start); false: never started. */
  startedInWorker: boolean;
  /** Milliseconds since the worker last answered a memory probe, if one is outstanding (a blocked loop). */
  probeUnansweredMs: number | null;
  /** Key operations the run had asked of the main thread, and where those not answered yet were. */
  keyOps: {
    asked: number;
    /** Waiting for the account's turn in the main thread's scheduler (key-op-scheduler.ts). */
    waitingForTurn: number;
    /** Being served on the main thread (authorization, derivation, or a send). */
    serving: number;
    /** Of those, at the crypto thread or waiting for the run's share of it (crypto-thread.ts). */
    cryptoThread: number;
    cryptoWaiting: number;
  };
  /** Requests from the worker to the signer thread not answered yet (the run's own PKP). */
  signerThread: number;
}

interface ActiveRun {
  job: PoolJob;
  runId: number;
  startedAt: number;
  /** When it was posted to the worker (for a pipelined run, before startedAt). */
  postedAt: number;
  /** Posted behind another run on its worker (pipeline). */
  pipelined: boolean;
  /** Key operations submitted to the scheduler and not started, and started and not answered. */
  keyOpsWaiting: number;
  keyOpsServing: number;
  logs: string[];
  logBytes: number;
  keyOps: number;
  fetches: number;
  timer: NodeJS.Timeout | undefined;
  done: boolean;
  /** A "release" was sent for this queued job (pool.releaseStuck). */
  releaseAsked: boolean;
  /** This run's share of the crypto thread. */
  cryptoSlots: InFlightLimit;
  /** Its key operations, as each side served them (key-operation-log.ts). */
  operations: KeyOperationLog;
}

interface Slot {
  worker: Worker;
  state: "starting" | "idle" | "busy" | "dead";
  run: ActiveRun | null;
  /** A job posted to the worker behind its run (pipelining, see dispatch); not started yet. */
  next: ActiveRun | null;
  /**
   * Shared with the worker. [0]: the id of the last run it started, which it claims by compare-and-swap
   * before starting one; -1 once this side has given up on the worker (kill), after which it starts
   * nothing. Tells kill() whether a job queued behind the run may already have started. [1]: the
   * worker's requests to the signer thread not answered yet (whereStopped).
   */
  started: Int32Array;
  probeSentAt: number | null; // outstanding memory probe, if any
  /** The account whose job the worker was last given; null: none yet (a fresh worker). */
  account: string | null;
  /** The policy documents this worker has been sent (policy-handover.ts). */
  sentPolicies: SentPolicies;
  /** The action code this worker holds, by CID (code-handover.ts). */
  sentCode: SentCode;
}

export interface PoolOptions {
  keys: KeyCapabilities;
  poolSize: number;
  heapMb: number;
  /** Authorization epochs (shared memory), given to every worker at start. */
  epochs: Int32Array;
  /**
   * A worker never runs two accounts' code: a worker that ran another account's job is replaced
   * before it takes this one (docs/actions.md, "Isolation between accounts"; off by default).
   */
  isolateAccounts?: boolean;
  /** `Actions.sendTransaction`'s chains and nonces (send/); absent: no chain is configured. */
  send?: SendService;
}

/**
 * The worker's final message, checked: the worker runs hostile code, so the parent treats what it says
 * as untrusted too (a malformed message becomes worker_crashed, never an exception in the main thread).
 */
export function readDone(m: Record<string, unknown>): {
  error: KeyOpError | null;
  responseJson?: string;
  signaturesJson?: string;
} {
  const e = m.error as { code?: unknown; message?: unknown } | null | undefined;
  if (e === null || e === undefined) {
    if (typeof m.responseJson !== "string") return { error: MALFORMED };
    try {
      JSON.parse(m.responseJson);
      if (m.signaturesJson !== undefined) {
        const sigs: unknown = typeof m.signaturesJson === "string" ? JSON.parse(m.signaturesJson) : null;
        if (typeof sigs !== "object" || sigs === null || Array.isArray(sigs)) return { error: MALFORMED };
      }
    } catch {
      return { error: MALFORMED };
    }
    return {
      error: null,
      responseJson: m.responseJson,
      ...(m.signaturesJson !== undefined ? { signaturesJson: m.signaturesJson as string } : {}),
    };
  }
  if (typeof e !== "object" || typeof e.code !== "string" || typeof e.message !== "string")
    return { error: MALFORMED };
  return { error: { code: e.code, message: e.message } };
}

/**
 * The signer thread (worker/signer-thread.js): libsecp256k1 for the action workers' own-PKP operations,
 * one per process, shared by every executor. It is started on first use and never terminated or
 * replaced: a thread loading that binding after another thread that loaded it has ended crashes the
 * process. It does not keep the process alive. If it ever fails, the workers' ports to it close and
 * those operations go to the main thread, like every other key operation.
 */
let signer: Worker | null | undefined;
function signerThread(): Worker | null {
  if (signer !== undefined) return signer;
  const thread = new Worker(SIGNER_SCRIPT, { name: "sigil-signer", env: {}, execArgv: [] });
  thread.unref();
  const gone = () => {
    signer = null;
  };
  thread.on("error", gone);
  thread.on("exit", gone);
  signer = thread;
  return signer;
}

/** A new port to the signer thread (for one action worker), or null without a signer thread. */
export function connectSigner(): MessagePort | null {
  const thread = signerThread();
  if (thread === null) return null;
  const { port1, port2 } = new MessageChannel();
  thread.postMessage({ type: "attach", port: port1 }, [port1]);
  return port2;
}

const MALFORMED: KeyOpError = { code: "worker_crashed", message: "the worker sent a malformed result" };

export class WorkerPool {
  private readonly slots = new Set<Slot>();
  /** Idle workers, longest idle first: runs rotate over the pool instead of piling on one worker. */
  private idle: Slot[] = [];
  private readonly keys: KeyCapabilities;
  private readonly epochs: Int32Array;
  private readonly heapMb: number;
  private readonly isolateAccounts: boolean;
  private poolSize: number;
  private readonly readyWaiters: Array<{ resolve: () => void; reject: (e: Error) => void }> = [];
  private nextRunId = 1;
  private restartCount = 0;
  /** Runs given the Compartment their account's previous run left (worker/compartment-keeper.js). */
  private compartmentReuses = 0;
  private startupFailures = 0;
  private broken: Error | null = null;
  private closed = false;
  private watchdog: NodeJS.Timeout | null = null;
  private idleRss = process.memoryUsage.rss();
  private idleRssReadAt = performance.now();
  /**
   * Set when a worker became ready: a new worker (a replacement, say) adds its whole footprint to the
   * RSS at once, far more than the slack, so the baseline must be re-read before the next run however
   * recent it is, or that run would be taken for an off-heap allocation (memory_limit) while it merely
   * failed to answer a probe.
   */
  private idleRssStale = true;
  /** Told where each run stopped at its wall-time limit was (the executor logs it at warn level). */
  onWallTimeStop: (where: WallTimeStop) => void = () => {};
  /** Called whenever a worker becomes idle, so the owner can hand it the next queued job. */
  onIdle: () => void = () => {};
  /** Gives back a job that was queued behind a run and never started (released, or its worker died). */
  onRequeue: (job: PoolJob) => void = () => {};
  /**
   * Whether a job queued behind a run that has gone on for a while should be asked back, so that it
   * (or another account's job) can have a worker sooner. Default: when a worker is idle.
   */
  shouldRelease: (job: PoolJob) => boolean = () => this.idle.length > 0;
  /** Key operations that reach the main thread, fair between accounts. */
  private readonly keyOps = new KeyOpScheduler(KEY_OPS_IN_FLIGHT_PER_ACCOUNT, KEY_OPS_PER_TURN);

  private readonly send: SendService | undefined;

  constructor(opts: PoolOptions) {
    this.keys = opts.keys;
    this.epochs = opts.epochs;
    this.heapMb = opts.heapMb;
    this.poolSize = opts.poolSize;
    this.isolateAccounts = opts.isolateAccounts === true;
    this.send = opts.send;
    for (let i = 0; i < opts.poolSize; i++) this.spawn();
  }

  /** Resolves when every worker is warmed and locked down; rejects if workers cannot start. */
  ready(): Promise<void> {
    if (this.broken) return Promise.reject(this.broken);
    if (this.allStarted()) return Promise.resolve();
    return new Promise((resolve, reject) => this.readyWaiters.push({ resolve, reject }));
  }

  stats(): { poolSize: number; alive: number; busy: number; restarts: number; compartmentReuses: number } {
    let alive = 0;
    let busy = 0;
    for (const s of this.slots) {
      if (s.state === "idle" || s.state === "busy") alive++;
      if (s.state === "busy") busy++;
    }
    return {
      poolSize: this.poolSize,
      alive,
      busy,
      restarts: this.restartCount,
      compartmentReuses: this.compartmentReuses,
    };
  }

  /** Idle workers; with isolateAccounts, those that may take a job of `account`. */
  idleCount(account?: string): number {
    if (!this.isolateAccounts || account === undefined) return this.idle.length;
    let n = 0;
    for (const s of this.idle) if (s.account === null || s.account === account) n++;
    return n;
  }

  /**
   * With isolateAccounts: replace idle workers that last ran some account by fresh ones (each reports
   * idle when warm) until `wanted` fresh workers are starting.
   */
  recycle(wanted: number): void {
    if (!this.isolateAccounts) return;
    let starting = 0;
    for (const s of this.slots) if (s.state === "starting") starting++;
    while (starting < wanted) {
      const stale = this.idle.find((s) => s.account !== null);
      if (stale === undefined) return;
      this.kill(stale, { code: "worker_crashed", message: "recycled for another account" });
      starting++;
    }
  }

  /** Workers the pool keeps alive (replaced when they die), including those still starting. */
  size(): number {
    return this.poolSize;
  }

  /** Start `n` more workers, for good (the executor's reserve for other accounts: fair-queue.ts). */
  grow(n: number): void {
    if (this.closed || this.broken) return;
    this.poolSize += n;
    for (let i = 0; i < n; i++) this.spawn();
  }

  isBroken(): Error | null {
    return this.broken;
  }

  /** Whether pipeline() can take a job now: a busy worker with nothing queued behind its run. */
  canPipeline(): boolean {
    for (const s of this.slots) if (s.state === "busy" && s.next === null) return true;
    return false;
  }

  /**
   * Queue a job on a busy worker behind its run (one deep): that worker starts it as soon as its run is
   * done, without waiting for the main thread, and the message reaches a thread that is running rather
   * than one that must be woken (each wake-up is a context switch, the largest single cost of a run on
   * the main thread of a busy 2-core machine). A job queued behind a run that turns out long is taken
   * back (release) when shouldRelease says so, and one queued on a worker that dies is handed back to
   * the executor (onRequeue). The executor pipelines only jobs of the one account that has runs, so a
   * job never waits behind another account's run. The caller checks canPipeline() first.
   */
  pipeline(job: PoolJob): void {
    const behind = this.pipelineSlot();
    if (behind === null) throw new Error("pipeline without a busy worker");
    const run = this.newRun(job);
    run.pipelined = true;
    behind.next = run;
    this.postRun(behind, run);
  }

  /** Start a job on an idle worker. The caller checks idleCount() first. */
  start(job: PoolJob): void {
    // Isolating: a worker that last ran this account, else a fresh one (recycle() makes them).
    const same = this.isolateAccounts ? this.idle.findIndex((s) => s.account === job.account) : 0;
    const i = same >= 0 ? same : this.idle.findIndex((s) => s.account === null);
    const slot = i < 0 ? undefined : this.idle.splice(i, 1)[0];
    if (slot === undefined) throw new Error("start without an idle worker");
    if (this.busyCount() === 0) this.refreshIdleRss();
    const run = this.newRun(job);
    this.begin(slot, run);
    this.postRun(slot, run);
    this.startWatchdog();
  }

  private refreshIdleRss(): void {
    const now = performance.now();
    if (!this.idleRssStale && now - this.idleRssReadAt < IDLE_RSS_REFRESH_MS) return;
    this.idleRssStale = false;
    this.idleRss = process.memoryUsage.rss();
    this.idleRssReadAt = now;
  }

  /** Jobs posted to a worker behind its run and not started yet: they are waiting, like the queue's. */
  pipelined(): number {
    let n = 0;
    for (const s of this.slots) if (s.next !== null) n++;
    return n;
  }

  /** The busy worker to queue a job behind: the one whose run started last (the least likely to be long). */
  private pipelineSlot(): Slot | null {
    let best: Slot | null = null;
    for (const s of this.slots) {
      if (s.state !== "busy" || s.next !== null || s.run === null) continue;
      if (best === null || s.run.startedAt > best.run!.startedAt) best = s;
    }
    return best;
  }

  private newRun(job: PoolJob): ActiveRun {
    return {
      job,
      runId: this.nextRunId++,
      startedAt: performance.now(),
      postedAt: performance.now(),
      pipelined: false,
      keyOpsWaiting: 0,
      keyOpsServing: 0,
      logs: [],
      logBytes: 0,
      keyOps: 0,
      fetches: 0,
      timer: undefined,
      done: false,
      releaseAsked: false,
      cryptoSlots: new InFlightLimit(CRYPTO_IN_FLIGHT_PER_RUN),
      operations: new KeyOperationLog(),
    };
  }

  /** The run becomes the worker's current one: its wall time counts from now. */
  private begin(slot: Slot, run: ActiveRun): void {
    const job = run.job;
    run.startedAt = performance.now();
    // libuv timers run on the loop's cached millisecond clock and can fire a fraction of a millisecond
    // early by performance.now(): re-arm for the remainder so a timed-out run has really used its time.
    const onTimer = () => {
      const left = job.limits.wallTimeMs - (performance.now() - run.startedAt);
      if (left > 0) {
        run.timer = setTimeout(onTimer, Math.ceil(left));
        return;
      }
      const where = this.whereStopped(slot, run);
      this.kill(slot, {
        code: "timeout",
        message: `the run exceeded ${job.limits.wallTimeMs} ms of wall time`,
      });
      this.onWallTimeStop(where);
    };
    run.timer = setTimeout(onTimer, job.limits.wallTimeMs);
    slot.state = "busy";
    slot.run = run;
    slot.probeSentAt = null;
  }

  /** Where the run is, as this side and the worker's shared counters know it (see WallTimeStop). */
  private whereStopped(slot: Slot, run: ActiveRun): WallTimeStop {
    const now = performance.now();
    const crypto = run.cryptoSlots.stats();
    const ms = (x: number) => Math.round(x);
    return {
      runId: run.runId,
      account: run.job.account,
      cid: run.job.cid,
      wallTimeMs: run.job.limits.wallTimeMs,
      pipelined: run.pipelined,
      releaseAsked: run.releaseAsked,
      queuedMs: ms(run.startedAt - run.postedAt),
      startedInWorker: Atomics.load(slot.started, 0) === run.runId,
      probeUnansweredMs: slot.probeSentAt === null ? null : ms(now - slot.probeSentAt),
      keyOps: {
        asked: run.keyOps,
        waitingForTurn: run.keyOpsWaiting,
        serving: run.keyOpsServing,
        cryptoThread: crypto.running,
        cryptoWaiting: crypto.waiting,
      },
      signerThread: Atomics.load(slot.started, 1),
    };
  }

  private postRun(slot: Slot, run: ActiveRun): void {
    const job = run.job;
    slot.account = job.account;
    const {
      wallTimeMs: _w,
      heapMb: _h,
      maxCodeBytes: _c,
      maxParamsBytes: _p,
      offHeapMb: _o,
      ...workerLimits
    } = job.limits;
    const granted = job.runKey === null ? null : this.runKeyFor(job.runKey);
    // A policy document this worker was sent before goes as its CID alone (policy-handover.ts).
    const runKey = granted === null ? null : { ...granted, ...slot.sentPolicies.wire(granted.policies) };
    slot.worker.postMessage(
      {
        type: "run",
        runId: run.runId,
        // Sent once per worker and CID, then the CID alone (code-handover.ts).
        ...slot.sentCode.wire(job.cid, job.code),
        imports: job.imports,
        cid: job.cid,
        // Runs of one account may use the Compartment its last run left (worker/compartment-keeper.js).
        account: job.account,
        paramsJson: job.paramsJson,
        limits: workerLimits,
        fetchPolicy: job.fetchPolicy,
        lenientRejections: job.lenientRejections,
        requestHeaders: job.requestHeaders,
        runKey,
      },
      // Moved, not copied: after this call the main thread holds no copy of the key.
      runKey === null ? [] : [runKey.key],
    );
  }

  /**
   * Jobs queued behind a run that has gone on for PIPELINE_RELEASE_MS while a worker is idle are asked
   * back; the worker answers "released" if it has not started the job (a run blocking its event loop
   * cannot answer: the job then waits for that run's end, or its kill, which hands the job back).
   */
  private releaseStuck(now: number): void {
    for (const s of this.slots) {
      const next = s.next;
      if (s.state !== "busy" || next === null || next.releaseAsked || s.run === null) continue;
      if (now - s.run.startedAt < PIPELINE_RELEASE_MS || !this.shouldRelease(next.job)) continue;
      next.releaseAsked = true;
      s.worker.postMessage({ type: "release", runId: next.runId });
    }
  }

  /**
   * The run's own PKP key in a buffer of its own, ready to be transferred to the worker; the derived
   * copy is zeroed here. Null if the enclave refuses the id (the run then asks per operation, and the
   * enclave words the error).
   */
  private runKeyFor(grant: RunKeyGrant): (RunKeyGrant & { key: ArrayBuffer }) | null {
    // Already invalidated while queued: do not hand it over at all.
    if (Atomics.load(this.epochs, grant.slot) !== grant.epoch) return null;
    let derived: Uint8Array;
    try {
      derived = this.keys.pkpKeyForRun(grant.pkpId);
    } catch {
      return null;
    }
    const key = new ArrayBuffer(32);
    new Uint8Array(key).set(derived);
    derived.fill(0);
    return { ...grant, key };
  }

  /** Terminate a worker (ending its run with `error`) and start a replacement. */
  kill(slot: Slot, error: KeyOpError): void {
    if (slot.state === "dead") return;
    slot.state = "dead";
    if (slot.run) this.finishRun(slot, slot.run, { error });
    const queued = slot.next;
    slot.next = null;
    if (queued !== null) {
      // The worker starts the job queued behind its run by itself once that run is done, possibly just
      // before this kill (its "done" not read yet). Settle that now: from here on it starts nothing.
      if (Atomics.exchange(slot.started, 0, -1) === queued.runId) {
        // It started, and may have had effects (fetch): never run it again.
        this.finishRun(slot, queued, {
          error: {
            code: "worker_crashed",
            message: "the worker was stopped for the run before this one, after this run had started",
          },
        });
      } else if (!this.closed) this.onRequeue(queued.job); // never started: back to the executor
    }
    this.slots.delete(slot);
    this.idle = this.idle.filter((s) => s !== slot);
    void slot.worker.terminate();
    if (this.busyCount() === 0) this.stopWatchdog();
    this.replace();
  }

  /** Operations and test hook: kill every worker that is running an action, as if it had crashed. */
  crashBusyWorkers(): number {
    let n = 0;
    for (const s of [...this.slots]) {
      if (s.state === "busy") {
        n++;
        this.kill(s, { code: "worker_crashed", message: "the worker running this action was killed" });
      }
    }
    return n;
  }

  async close(reason: KeyOpError): Promise<void> {
    this.closed = true;
    this.stopWatchdog();
    const all = [...this.slots];
    for (const s of all) {
      s.state = "dead";
      if (s.run) this.finishRun(s, s.run, { error: reason });
      if (s.next) this.finishRun(s, s.next, { error: reason });
    }
    this.slots.clear();
    this.idle = [];
    await Promise.all(all.map((s) => s.worker.terminate()));
    for (const w of this.readyWaiters.splice(0)) w.reject(new Error("executor closed"));
  }

  // ---- workers ----

  private spawn(): void {
    // One port per action worker to the signer thread; without a signer, own-PKP operations go to the
    // main thread.
    const signerPort = connectSigner() ?? undefined;
    const started = new Int32Array(new SharedArrayBuffer(8));
    const worker = new Worker(WORKER_SCRIPT, {
      name: "sigil-action-worker",
      workerData: { epochs: this.epochs, signerPort, started },
      transferList: signerPort ? [signerPort] : [],
      // No environment (secrets such as the root key may live in process.env) and no inherited flags.
      // --expose-internals: the worker hardens Node's internal error classes (worker/node-errors.js).
      env: {},
      execArgv: ["--expose-internals"],
      resourceLimits: { maxOldGenerationSizeMb: this.heapMb, maxYoungGenerationSizeMb: 16, stackSizeMb: 4 },
    });
    const slot: Slot = {
      worker,
      state: "starting",
      run: null,
      next: null,
      started,
      probeSentAt: null,
      account: null,
      sentPolicies: new SentPolicies(),
      sentCode: new SentCode(),
    };
    this.slots.add(slot);
    worker.on("message", (m) => this.onMessage(slot, m));
    worker.on("error", (e: Error & { code?: string }) => {
      const error =
        e.code === "ERR_WORKER_OUT_OF_MEMORY"
          ? { code: "heap_limit", message: `the run exceeded the ${this.heapMb} MB heap limit` }
          : { code: "worker_crashed", message: "the worker running this action crashed" };
      this.onWorkerGone(slot, error);
    });
    worker.on("exit", () =>
      this.onWorkerGone(slot, { code: "worker_crashed", message: "the worker running this action exited" }),
    );
  }

  private onWorkerGone(slot: Slot, error: KeyOpError): void {
    if (slot.state === "dead") return;
    if (slot.state === "starting") {
      this.startupFailures++;
      if (this.startupFailures >= MAX_STARTUP_FAILURES) {
        this.broken = new Error("executor workers fail to start");
        for (const w of this.readyWaiters.splice(0)) w.reject(this.broken);
      }
    }
    this.kill(slot, error);
  }

  private replace(): void {
    if (this.closed || this.broken) return;
    this.restartCount++;
    this.spawn();
  }

  private allStarted(): boolean {
    return [...this.slots].every((s) => s.state !== "starting") && this.slots.size === this.poolSize;
  }

  private busyCount(): number {
    let n = 0;
    for (const s of this.slots) if (s.state === "busy") n++;
    return n;
  }

  // ---- messages from a worker ----

  /** Decisions the worker's trusted side made about the run's own PKP (worker/policy-decisions.js). */
  private noteWorkerDecisions(run: ActiveRun, decisions: unknown): void {
    const gate = run.job.policy;
    const pkp = run.job.runKey?.pkpId;
    if (gate === undefined || pkp === undefined || !Array.isArray(decisions)) return;
    for (const d of decisions) gate.noteWorkerDecision(d, pkp);
  }

  private onMessage(slot: Slot, m: { type: string; runId?: number; [k: string]: unknown }): void {
    if (slot.state === "dead") return;
    if (m.type === "ready") {
      slot.state = "idle";
      this.idleRssStale = true;
      this.idle.push(slot);
      this.startupFailures = 0;
      if (this.allStarted()) for (const w of this.readyWaiters.splice(0)) w.resolve();
      this.onIdle();
      this.releaseStuck(performance.now());
      return;
    }
    if (m.type === "memory") {
      slot.probeSentAt = null;
      const run = slot.run;
      if (run && typeof m.arrayBuffers === "number" && m.arrayBuffers > run.job.limits.offHeapMb * MB) {
        this.kill(slot, {
          code: "memory_limit",
          message: `the run exceeded the ${run.job.limits.offHeapMb} MB off-heap (ArrayBuffer) limit`,
        });
      }
      return;
    }
    if (m.type === "released") {
      const released = this.takeBackReleased(slot, m.runId);
      if (released === null) return;
      this.onRequeue(released.job);
      this.onIdle();
      this.releaseStuck(performance.now());
      return;
    }
    const run = slot.run;
    if (run === null || run.runId !== m.runId || run.done) return;
    // Decisions of signatures the worker's trusted side checked against the run's policies and made
    // itself (worker/run-key.js) ride on its next message (worker/policy-decisions.js): they come
    // first, so the run's decisions keep their order with the gate's.
    if (m.decisions !== undefined) this.noteWorkerDecisions(run, m.decisions);
    switch (m.type) {
      case "log":
        if (typeof m.text === "string") this.appendLog(run, m.text);
        break;
      case "fetch":
        run.fetches++;
        break;
      case "keyop":
        if (typeof m.callId !== "number" || typeof m.op !== "string") return;
        this.onKeyOp(slot, run, m.callId, m.op, m.args as Record<string, unknown>);
        break;
      case "done": {
        // Key operations the worker served itself (the run's own PKP) count towards the result too.
        if (Number.isSafeInteger(m.localKeyOps) && (m.localKeyOps as number) > 0) {
          const served = Math.min(m.localKeyOps as number, run.job.limits.maxKeyOps);
          run.keyOps += served;
          run.operations.addWorkerRecords(m.keyOperations, served, run.job.runKey?.pkpId ?? null);
        }
        // Runs that were given the Compartment of their account's previous run (compartment-keeper.js).
        if (m.compartmentReused === true) this.compartmentReuses++;
        this.finishRun(slot, run, readDone(m));
        this.moveOn(slot);
        this.onIdle();
        this.releaseStuck(performance.now());
        break;
      }
    }
  }

  /**
   * The run a "released" answer gives back, detached from the worker; null if it is not this worker's
   * to give (an answer that crossed a kill, say). Usually the job still queued behind the run. But the
   * worker posts the run's "done" and starts the job queued behind it one event-loop turn later, and a
   * "release" read in between is honoured: "done" arrives first, the job has already become the
   * worker's current run here (begin), and only then comes "released". That job never started (the
   * worker starts nothing after releasing it) and nothing else would ever end it: left alone it waited
   * out its whole wall time and failed with `timeout` (docs/performance.md, the 30-second stall).
   */
  private takeBackReleased(slot: Slot, runId: unknown): ActiveRun | null {
    const next = slot.next;
    if (next !== null && next.runId === runId) {
      slot.next = null;
      return next;
    }
    const run = slot.run;
    if (run === null || run.runId !== runId || run.done || Atomics.load(slot.started, 0) === run.runId)
      return null;
    run.done = true; // never started: no result of its own, the executor runs the job again
    run.cryptoSlots.close();
    clearTimeout(run.timer);
    // A job pipelined behind it meanwhile (on "done", the worker looked busy with it) starts at once in
    // the worker, which runs nothing else.
    this.moveOn(slot);
    return run;
  }

  /**
   * The worker's current run is over (done, or released unstarted): the job queued behind it, which the
   * worker has already moved on to, becomes the current run; without one the worker is idle.
   */
  private moveOn(slot: Slot): void {
    const next = slot.next;
    slot.next = null;
    if (next !== null) {
      this.begin(slot, next);
      return;
    }
    slot.run = null;
    slot.state = "idle";
    this.idle.push(slot);
    if (this.busyCount() === 0) this.stopWatchdog();
  }

  private appendLog(run: ActiveRun, text: string): void {
    // The worker caps its own output; this cap is the parent's defence if the worker misbehaves.
    const cap = run.job.limits.maxLogBytes + 512;
    if (run.logBytes >= cap) return;
    const bytes = Buffer.byteLength(text);
    run.logBytes += bytes;
    run.logs.push(bytes <= cap ? text : text.slice(0, cap));
  }

  private onKeyOp(
    slot: Slot,
    run: ActiveRun,
    callId: number,
    op: string,
    args: Record<string, unknown>,
  ): void {
    const reply = (answer: { ok: boolean; value?: unknown; error?: KeyOpError; fatal?: boolean }) => {
      if (slot.run !== run || run.done || slot.state !== "busy") return;
      slot.worker.postMessage({ type: "keyop_result", runId: run.runId, callId, ...answer });
    };
    if (run.keyOps >= run.job.limits.maxKeyOps) {
      const message = `more than ${run.job.limits.maxKeyOps} key operations in one run`;
      reply({ ok: false, fatal: true, error: { code: "key_ops_limit", message } });
      return;
    }
    run.keyOps++;
    const live = () => !run.done && slot.run === run;
    // The task's end frees the account's key-operation slot: a send frees it once broadcast, so that
    // its wait for the receipt does not hold up the account's other operations.
    let freeSlot: () => void = () => undefined;
    const send =
      this.send === undefined || op !== "pkpSendTransaction"
        ? undefined
        : {
            service: this.send,
            run: {
              deadline: sendDeadline(run.startedAt, run.job.limits.wallTimeMs),
              live,
              broadcastDone: () => freeSlot(),
            },
          };
    const served = {
      keys: this.keys,
      crypto: cryptoThread(),
      limits: run.job.limits,
      cryptoSlots: run.cryptoSlots,
      policy: run.job.policy,
      send,
      operations: run.operations,
    };
    // Counted above as it arrives (maxKeyOps), served when its account's turn comes; dropped unserved
    // if the run ends first.
    run.keyOpsWaiting++;
    this.keyOps.submit(
      run.job.account,
      () =>
        new Promise<void>((slotFreed) => {
          freeSlot = slotFreed;
          run.keyOpsWaiting--;
          run.keyOpsServing++;
          void serveKeyOp(served, run.job.cid, run.job.authorizePkp, op, args ?? {})
            .then(reply)
            .finally(() => {
              run.keyOpsServing--;
              slotFreed();
            });
        }),
      live,
    );
  }

  private finishRun(
    slot: Slot,
    run: ActiveRun,
    end: { error: KeyOpError | null; responseJson?: string; signaturesJson?: string },
  ): void {
    if (run.done) return;
    run.done = true;
    run.cryptoSlots.close();
    clearTimeout(run.timer);
    run.job.finish({
      responseJson: end.responseJson,
      signaturesJson: end.signaturesJson,
      error: end.error,
      logs: run.logs.join(""),
      executionMs: Math.round((performance.now() - run.startedAt) * 1000) / 1000,
      keyOps: run.keyOps,
      fetches: run.fetches,
      ...(run.operations.records.length > 0 ? { keyOperations: run.operations.records } : {}),
    });
  }

  // ---- memory watchdog ----

  private startWatchdog(): void {
    if (this.watchdog !== null) return;
    this.watchdog = setInterval(() => this.checkMemory(), WATCHDOG_INTERVAL_MS);
    this.watchdog.unref();
  }

  private stopWatchdog(): void {
    if (this.watchdog === null) return;
    clearInterval(this.watchdog);
    this.watchdog = null;
  }

  /**
   * ArrayBuffer memory lives outside the V8 heap, so resourceLimits does not bound it. Two checks:
   * - each busy worker is asked for its own ArrayBuffer total; over the run's offHeapMb it is killed;
   * - a worker allocating in a synchronous loop cannot answer, so the process RSS is also watched: when it
   *   exceeds the idle RSS plus what the busy workers may legitimately use, busy workers that have left
   *   a probe unanswered for UNRESPONSIVE_MS are killed (memory_limit).
   */
  private checkMemory(): void {
    const now = performance.now();
    this.releaseStuck(now);
    const busy = [...this.slots].filter((s) => s.state === "busy" && s.run !== null);
    if (busy.length === 0) return;
    // The RSS (a system call, every 25 ms while runs are in progress: a percent of the main thread
    // under load) is read only when a worker has left a probe unanswered long enough for it to matter.
    let underPressure: boolean | undefined;
    const pressure = (): boolean => {
      if (underPressure !== undefined) return underPressure;
      let allowance = PRESSURE_SLACK_BYTES;
      for (const s of busy) allowance += (this.heapMb + s.run!.job.limits.offHeapMb) * MB;
      // Replacement workers that are starting up (loading ethers, locking down) grow the RSS too.
      for (const s of this.slots) if (s.state === "starting") allowance += this.heapMb * MB;
      underPressure = process.memoryUsage.rss() > this.idleRss + allowance;
      return underPressure;
    };
    for (const s of busy) {
      if (s.probeSentAt === null) {
        s.probeSentAt = now;
        s.worker.postMessage({ type: "memory_probe" });
      } else if (now - s.probeSentAt >= UNRESPONSIVE_MS && pressure()) {
        this.kill(s, {
          code: "memory_limit",
          message: "the process ran short of memory while this run was not responding (off-heap allocation)",
        });
      }
    }
  }
}
