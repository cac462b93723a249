/**
 * The action executor: runs untrusted action code in an SES sandbox inside a pool of worker threads
 * (docs/actions.md). It lives on the enclave side, holds a KeyCapabilities object (never the root key)
 * and serves its workers' key operations after the run's authorization callback approves them.
 */
import os from "node:os";
import type { KeyCapabilities } from "../capabilities";
import { ACTION_ERROR_CODES, ExecutorBusyError, ExecutorClosedError } from "./errors";
import { DEFAULT_LIMITS, mergeLimits, type ExecutorLimits } from "./limits";
import { WorkerPool, type PoolJob, type RunKeyGrant, type RunOutcome } from "./pool";
import type { KeyOperationRecord } from "./key-operation-log";
import { checkFetchPolicy, mergeFetchPolicy, type FetchPolicy } from "./fetch-policy";
import { PriorityFairQueue, mayTakeWorker, workerShare, type Priority } from "./fair-queue";
import { ModuleLoader, type ModuleOptions } from "./modules/loader";
import { ModuleError } from "./modules/errors";
import { mayImport, transformAction } from "./modules/transform";
import { PolicyGate, type PoliciesFor, type RunPolicyDecision } from "./policy-gate";
import type { PolicyWindowCounters } from "./policy-windows";
import { SendService, type SendChain, type SendServiceOptions } from "./send";

export { DEFAULT_LIMITS, ExecutorBusyError, ExecutorClosedError, ACTION_ERROR_CODES };
export type {
  ExecutorLimits,
  FetchPolicy,
  ModuleOptions,
  PoliciesFor,
  PolicyWindowCounters,
  RunPolicyDecision,
  SendChain,
};
export { DEFAULT_MODULE_ORIGIN } from "./modules/specifier";
export type { ActionErrorCode } from "./errors";

export interface RunRequest {
  /**
   * Whose run this is (the relayer passes the account id). Runs and key operations are shared fairly
   * between accounts (docs/actions.md, "Scheduling between accounts"). Absent: one anonymous account.
   */
  account?: string | number;
  /**
   * "background" for work nobody waits on the line for (the relayer's triggered runs): an interactive
   * run of any account is dispatched before it, and it keeps at least one dispatch in BACKGROUND_EVERY
   * while both wait (fair-queue.ts, PriorityFairQueue). Absent: "interactive".
   */
  priority?: Priority;
  /** Action source: defines `async function main(params)` and/or calls `Actions.setResponse`. */
  code: string;
  /** CID of the code (computed by the caller): binds the action identity key and authorization. */
  cid: string;
  /** Delivered to the action as `params` (the argument of main) and the global `jsParams`. */
  jsParams?: unknown;
  /**
   * Relayer callback: resolves a PKP id or address to the canonical bytes32 id and checks (caller key,
   * this cid, pkp). Throw to refuse; the error's message is shown to the action.
   */
  authorizePkp: (pkpIdOrAddress: string) => Promise<string>;
  /**
   * Signing policies (docs/policies.md): the policies of the groups that grant (caller key, this cid,
   * pkp), asked with the canonical PKP id before every signature, key export, encryption and decryption,
   * so a change applies to the run's next operation. Null: no policy applies to that PKP. Absent: no
   * policy applies to the run. A run PKP that a policy applies to is never handed to the worker (runPkp):
   * its operations all come to the enclave side to be checked.
   */
  policiesFor?: PoliciesFor;
  /**
   * The shared counters of policy windows (policy-windows.ts), where a rule that allowed a signature
   * takes one use of its window first. Absent: a rule with a window allows nothing.
   */
  policyWindows?: PolicyWindowCounters;
  /**
   * The PKP the request named, if any. If authorizePkp approves it when the run is accepted, its key
   * is moved into the worker for this run, and its signatures, public key and address are served there
   * without a round trip (docs/actions.md, "The run's own PKP"). Other PKPs are still authorized per
   * operation. Refused or absent: every key operation is authorized per operation.
   */
  runPkp?: RunPkp;
  /**
   * This run's fetch policy, merged over the executor's (its fields win); false disables fetch.
   * Undefined: the executor's policy.
   */
  fetch?: FetchPolicy | false;
  limits?: Partial<ExecutorLimits>;
  /**
   * Request headers the action may read as `Lit.Headers`: the relayer passes `x-request-id` and
   * `x-correlation-id` only (other headers may carry credentials).
   */
  requestHeaders?: Record<string, string>;
  /** Overrides the executor's unhandledRejections mode for this run. */
  unhandledRejections?: UnhandledRejectionMode;
}

/**
 * What a promise rejection that nobody handles does to a run (docs/actions.md, "The result"):
 * "strict" (default) fails the run; "lenient" fails it only if the action had not yet set its response.
 */
export type UnhandledRejectionMode = "strict" | "lenient";

export interface RunPkp {
  /** The PKP id or address the request named. */
  ref: string;
  /**
   * What the run's authorization depends on, as an authorization scope of invalidateRunKeys (the
   * relayer uses the account id). From the moment the caller invalidates it, the worker stops serving
   * this PKP itself: every later operation goes through authorizePkp again, as if the key had never
   * been handed over (so a key revoked during a run cannot sign afterwards).
   */
  scope: number;
  /** From this time (ms since the epoch; e.g. the caller key's expiry) the same happens. */
  notAfterMs?: number;
  /**
   * The check made when the run is accepted (after the scope's epoch is read), if it differs from
   * authorizePkp: it also says until when its answer holds (e.g. the caller key's expiry *as that check
   * saw it*: an expiry read before the epoch could be stale without any later invalidation). Absent:
   * authorizePkp, until notAfterMs. With both, the earlier time applies.
   */
  authorize?: (pkpIdOrAddress: string) => Promise<{ pkpId: string; notAfterMs?: number }>;
}

export interface RunResult {
  response: unknown;
  logs: string;
  has_error: boolean;
  error?: { code: string; message: string };
  execution_ms: number;
  key_ops: number;
  fetches: number;
  /**
   * Signatures made with the older `signEcdsa({toSign, publicKey, sigName})` API, by sigName (present
   * only when the run made some and succeeded).
   */
  signatures?: Record<string, LegacySignature>;
  /**
   * Every signing-policy decision of the run, in order (present when policies were checked): the rule
   * that decided, whether it allowed, the operation kind, the digest, the PKP, and for a refusal the
   * value that failed. The audit log records them.
   */
  policy_decisions?: RunPolicyDecision[];
  /**
   * What each key operation of the run did (present when it made any, failed runs included): kind, PKP,
   * and for a signature the digest signed (key-operation-log.ts). The audit log records them.
   */
  key_operations?: KeyOperationRecord[];
}

/** One named signature of the older signEcdsa API (docs/actions.md, "Older API"). */
export interface LegacySignature {
  r: string;
  s: string;
  recid: number;
  signature: string;
  publicKey: string;
  dataSigned: string;
}

export interface ExecutorOptions {
  keys: KeyCapabilities;
  /** Worker threads one account may use; default os.availableParallelism(). */
  poolSize?: number;
  /**
   * Workers kept beyond poolSize for other accounts (default 1): one account alone never holds them,
   * so an account that arrives while another fills the pool starts at once instead of waiting for one
   * of its runs (up to the wall-time limit) to end. Started with the first run that names an account
   * (the executor serves several), or the first time two accounts want workers.
   */
  reserveWorkers?: number;
  /**
   * A worker never runs two accounts' code: one that ran another account's run is replaced (a new
   * thread, warmed and locked down) before it takes this account's. Off by default: see docs/actions.md,
   * "Isolation between accounts", for what it costs.
   */
  isolateAccounts?: boolean;
  /** Runs waiting for a worker before run() answers ExecutorBusyError; default 32 per worker. */
  maxQueue?: number;
  limits?: Partial<ExecutorLimits>;
  /** Default "strict": see UnhandledRejectionMode. */
  unhandledRejections?: UnhandledRejectionMode;
  /** Default `{}`: fetch on, any host, public addresses only. false disables fetch. */
  fetch?: FetchPolicy | false;
  /** ES module imports (docs/actions.md); default `{}`: jsDelivr, memory only. false disables them. */
  modules?: ModuleOptions | false;
  /**
   * The chains `Actions.sendTransaction` may send to, with the operator's RPC URL of each (docs/actions.md,
   * "EVM send"); absent or empty: every send answers chain_not_configured.
   */
  chains?: readonly SendChain[];
  /** sendTransaction's RPC timeout and receipt polling (send/send.ts); tests shorten them. */
  send?: SendServiceOptions;
  /**
   * Where the executor reports, at warn level, each run it stopped at its wall-time limit and where
   * that run was (pool.ts, WallTimeStop: started or not, queued behind another run, waiting on which
   * key operation); a pino logger fits. Absent: not reported.
   */
  logger?: ExecutorLogger;
}

/** The part of a structured logger (pino's signature) the executor uses. */
export interface ExecutorLogger {
  warn(fields: Record<string, unknown>, message: string): void;
}

const KNOWN_CODES = new Set<string>(ACTION_ERROR_CODES);

/**
 * An account whose last run ended this recently still counts as wanting workers (see pump): a client
 * that sends its next request as soon as the last answer arrives holds no worker between the two, and
 * another account's flood must not take its place in that moment.
 */
const RECENT_MS = 1000;

/**
 * Scopes share EPOCH_SLOTS counters (scope mod slots): two accounts on one slot only means that a change
 * to one sends the other's in-flight runs back to per-operation authorization, which is always correct.
 */
const EPOCH_SLOTS = 4096;
function epochSlot(scope: number): number {
  return ((scope % EPOCH_SLOTS) + EPOCH_SLOTS) % EPOCH_SLOTS;
}

export class ActionExecutor {
  private readonly pool: WorkerPool;
  private readonly limits: ExecutorLimits;
  private readonly maxQueue: number;
  private readonly unhandledRejections: UnhandledRejectionMode;
  private readonly fetchPolicy: FetchPolicy | false;
  private readonly modules: ModuleLoader | null;
  /** Runs waiting for a worker: interactive before background, one queue per account (fair-queue.ts). */
  private readonly queue = new PriorityFairQueue<PoolJob>((job) => job.priority);
  /** Per account: its runs on a worker or queued behind a run in a worker (dispatched, not finished). */
  private readonly held = new Map<string, number>();
  /** The jobs counted in `held`. */
  private readonly dispatched = new Set<PoolJob>();
  private readonly poolSize: number;
  /** Reserve workers not started yet (see ExecutorOptions.reserveWorkers). */
  private reserveToStart: number;
  /** When each account's last run ended (performance.now()), while it has none; pruned after RECENT_MS. */
  private readonly lastEnded = new Map<string, number>();
  /** A pump due when an account stops counting as recent (it may free a share for another). */
  private recentTimer: NodeJS.Timeout | null = null;
  /** Authorization epochs shared with the workers (see invalidateRunKeys), one per scope slot. */
  private readonly epochs = new Int32Array(new SharedArrayBuffer(4 * EPOCH_SLOTS));
  private closed = false;
  /** Moving average of run time, for the Retry-After estimate of a busy answer. */
  private avgRunMs = 50;

  constructor(opts: ExecutorOptions) {
    this.limits = mergeLimits(DEFAULT_LIMITS, opts.limits);
    const poolSize = opts.poolSize ?? os.availableParallelism();
    if (!Number.isInteger(poolSize) || poolSize < 1)
      throw new RangeError("poolSize must be a positive integer");
    this.maxQueue = opts.maxQueue ?? poolSize * 32;
    this.unhandledRejections = checkRejectionMode(opts.unhandledRejections ?? "strict");
    checkFetchPolicy(opts.fetch, "ActionExecutor");
    this.fetchPolicy = opts.fetch ?? {};
    this.modules = opts.modules === false ? null : new ModuleLoader(opts.modules ?? {});
    if (!Number.isInteger(this.maxQueue) || this.maxQueue < 0)
      throw new RangeError("maxQueue must be an integer ≥ 0");
    this.poolSize = poolSize;
    this.reserveToStart = opts.reserveWorkers ?? 1;
    if (!Number.isInteger(this.reserveToStart) || this.reserveToStart < 0)
      throw new RangeError("reserveWorkers must be an integer ≥ 0");
    this.pool = new WorkerPool({
      keys: opts.keys,
      poolSize,
      heapMb: this.limits.heapMb,
      epochs: this.epochs,
      isolateAccounts: opts.isolateAccounts,
      send: new SendService(opts.chains ?? [], opts.send),
    });
    this.pool.onIdle = () => this.pump();
    this.pool.onRequeue = (job) => {
      this.release(job);
      this.queue.unshift(job.account, job);
    };
    this.pool.shouldRelease = (job) => this.shouldRelease(job.account);
    const logger = opts.logger;
    if (logger !== undefined)
      this.pool.onWallTimeStop = (where) =>
        logger.warn({ executorStop: where }, "executor: a run was stopped at its wall-time limit");
  }

  /** Resolves when every worker is warmed and locked down. */
  ready(): Promise<void> {
    return this.pool.ready();
  }

  /**
   * Run one action. Rejects only with ExecutorBusyError (queue full) or ExecutorClosedError (and with a
   * TypeError for a malformed request, which is a caller bug); every failure of the action itself,
   * including limits, is a result with `has_error: true`.
   */
  async run(req: RunRequest): Promise<RunResult> {
    if (this.closed) throw new ExecutorClosedError();
    checkRequestShape(req);
    const account = req.account === undefined ? "" : String(req.account);
    // Warm before it is needed: a reserve started only when a second account arrives makes that
    // account wait for its warm-up (0.4 s idle, seconds on a loaded machine).
    if (req.account !== undefined) this.startReserve(true);
    const limits = mergeLimits(this.limits, req.limits);
    limits.heapMb = this.limits.heapMb; // a property of the pre-warmed workers, not of one run
    const checked = checkInput(req, limits);
    if (typeof checked !== "string") return checked;
    if (this.full(account)) {
      throw new ExecutorBusyError(this.retryAfterSeconds());
    }
    // No await for code without `import`: such a run is queued in this very call, as before.
    const imports = mayImport(req.code) ? await this.prepareImports(req.code) : { prepared: null };
    if ("refusal" in imports) return imports.refusal;
    // Loading modules let other calls in: admit this run as of now, as after authorization below.
    if (this.closed) throw new ExecutorClosedError();
    if (imports.prepared !== null && this.full(account))
      throw new ExecutorBusyError(this.retryAfterSeconds());
    let runKey: RunKeyGrant | null = null;
    const policy =
      req.policiesFor === undefined
        ? undefined
        : new PolicyGate(req.policiesFor, undefined, req.policyWindows);
    if (req.runPkp !== undefined) {
      // Read the epoch before authorizing: a change applied after this read, even one that lands
      // before authorizePkp looks, makes the worker fall back to per-operation authorization.
      const slot = epochSlot(req.runPkp.scope);
      const epoch = Atomics.load(this.epochs, slot);
      try {
        const { authorize, ref, notAfterMs } = req.runPkp;
        const granted = authorize ? await authorize(ref) : { pkpId: await req.authorizePkp(ref) };
        // Under a policy the worker signs by itself only when it can check every applicable policy
        // itself (policy-gate.ts, handOver); otherwise the key stays on this side.
        const handOver =
          typeof granted?.pkpId !== "string"
            ? null
            : policy === undefined
              ? { policies: null }
              : await policy.handOver(granted.pkpId);
        if (handOver !== null) {
          const until = Math.min(
            notAfterMs ?? Number.MAX_SAFE_INTEGER,
            typeof granted.notAfterMs === "number" ? granted.notAfterMs : Number.MAX_SAFE_INTEGER,
          );
          runKey = { pkpId: granted.pkpId, slot, epoch, notAfterMs: until, policies: handOver.policies };
        }
      } catch {
        runKey = null; // not authorized: the action's own requests get the refusal, per operation
      }
      // The wait above let other calls in: admit this run as of now (close() has already drained the
      // queue, and runs admitted meanwhile count against maxQueue).
      if (this.closed) throw new ExecutorClosedError();
      if (this.full(account)) {
        throw new ExecutorBusyError(this.retryAfterSeconds());
      }
    }
    return new Promise<RunResult>((resolve, reject) => {
      const job: PoolJob = {
        account,
        priority: req.priority ?? "interactive",
        code: imports.prepared?.code ?? req.code,
        imports: imports.prepared
          ? { modules: imports.prepared.modules, actionDeps: imports.prepared.actionDeps }
          : undefined,
        cid: req.cid,
        paramsJson: checked,
        limits,
        fetchPolicy: mergeFetchPolicy(this.fetchPolicy, req.fetch),
        lenientRejections: (req.unhandledRejections ?? this.unhandledRejections) === "lenient",
        requestHeaders: { ...(req.requestHeaders ?? {}) },
        authorizePkp: req.authorizePkp,
        policy,
        runKey,
        finish: (outcome) => {
          this.release(job);
          if (outcome.error?.code === "executor_closed") return reject(new ExecutorClosedError());
          this.avgRunMs = this.avgRunMs * 0.9 + outcome.executionMs * 0.1;
          const result = toResult(outcome);
          if (policy !== undefined && policy.decisions.length > 0) result.policy_decisions = policy.decisions;
          resolve(result);
        },
      };
      this.queue.push(account, job);
      this.pump();
    });
  }

  /**
   * Authorization that runs depend on may have changed (the relayer calls this whenever its permission
   * cache applies a change to an account, with the account id, or with no argument after a reset).
   * Runs guarded by this scope stop using their handed-over PKP key at once, without a message: the
   * workers read these counters from shared memory before each operation they would serve themselves.
   */
  invalidateRunKeys(scope?: number): void {
    if (scope === undefined) {
      for (let i = 0; i < this.epochs.length; i++) Atomics.add(this.epochs, i, 1);
      return;
    }
    Atomics.add(this.epochs, epochSlot(scope), 1);
  }

  /** compartmentReuses: runs given the Compartment their account's previous run left (docs/actions.md). */
  stats(): {
    poolSize: number;
    alive: number;
    busy: number;
    queued: number;
    restarts: number;
    compartmentReuses: number;
  } {
    return { ...this.pool.stats(), queued: this.queue.size + this.pool.pipelined() };
  }

  /**
   * The run's modules, loaded and verified before it takes a worker (a run waiting for the network
   * holds no worker). Code without `import` costs one regular-expression test.
   */
  private async prepareImports(
    code: string,
  ): Promise<{ prepared: Awaited<ReturnType<ModuleLoader["prepare"]>> } | { refusal: RunResult }> {
    if (!mayImport(code)) return { prepared: null };
    if (this.modules === null) {
      if (transformAction(code) === null) return { prepared: null };
      return { refusal: refusal("imports_disabled", "ES module imports are disabled on this service") };
    }
    try {
      return { prepared: await this.modules.prepare(code) };
    } catch (e) {
      if (e instanceof ModuleError) return { refusal: refusal(e.code, e.message) };
      throw e;
    }
  }

  /** Kill every worker that is running an action now (their runs end with worker_crashed). */
  crashBusyWorkers(): number {
    return this.pool.crashBusyWorkers();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.recentTimer !== null) clearTimeout(this.recentTimer);
    for (const job of this.queue.drain()) {
      job.finish({
        error: { code: "executor_closed", message: "" },
        logs: "",
        executionMs: 0,
        keyOps: 0,
        fetches: 0,
      });
    }
    await this.pool.close({ code: "executor_closed", message: "the executor was closed" });
  }

  /**
   * Hand waiting runs to workers, fairly between accounts (docs/actions.md, "Scheduling between
   * accounts"): an account may start a run on an idle worker while it holds fewer than its share
   * (workerShare) of the accounts that want workers (runs waiting or in workers, or a run ended within
   * RECENT_MS); among the accounts that may, the one holding the fewest goes first, ties round-robin. A
   * run is queued behind a busy worker's run (pipelining) only while its account is the only one that
   * wants workers, so it never waits behind another account's run, which may be a 30 s busy loop that
   * cannot even answer a release.
   */
  private pump(): void {
    if (this.pool.isBroken()) {
      for (const job of this.queue.drain()) {
        const error = { code: "worker_crashed", message: "the executor's workers cannot start" };
        job.finish({ error, logs: "", executionMs: 0, keyOps: 0, fetches: 0 });
      }
      return;
    }
    this.startReserve();
    for (;;) {
      const next = this.queue.take(
        (a) => this.mayStart(a) || (this.alone(a) && this.pool.canPipeline()),
        (a) => this.held.get(a) ?? 0,
      );
      if (next === undefined) break;
      const { account, item: job } = next;
      const start = this.mayStart(account);
      this.held.set(account, (this.held.get(account) ?? 0) + 1);
      this.dispatched.add(job);
      this.lastEnded.delete(account);
      if (start) this.pool.start(job);
      else this.pool.pipeline(job);
    }
    // isolateAccounts: each account under its share that finds only idle workers of other accounts
    // gets a fresh one (pump runs again when it is warm).
    let wanted = 0;
    for (const account of this.queue.accounts())
      if (this.pool.idleCount(account) === 0 && this.underShare(account)) wanted++;
    if (wanted > 0 && this.pool.idleCount() > 0) this.pool.recycle(wanted);
    // Runs left waiting beside an idle worker wait for a recent account's share to lapse.
    if (this.queue.size > 0 && this.pool.idleCount() > 0 && this.lastEnded.size > 0) this.pumpLater();
  }

  private pumpLater(): void {
    if (this.recentTimer !== null || this.closed) return;
    const oldest = Math.min(...this.lastEnded.values());
    this.recentTimer = setTimeout(
      () => {
        this.recentTimer = null;
        this.pump();
      },
      Math.max(1, oldest + RECENT_MS - performance.now()),
    );
    this.recentTimer.unref();
  }

  private underShare(account: string): boolean {
    return (this.held.get(account) ?? 0) < this.share(account);
  }

  /** An idle worker the account may take (fair-queue.ts, mayTakeWorker). */
  private mayStart(account: string): boolean {
    const wanting = this.wanting();
    wanting.add(account);
    let holdingNone = 0;
    for (const a of wanting) if (a !== account && !this.held.has(a)) holdingNone++;
    return mayTakeWorker({
      held: this.held.get(account) ?? 0,
      accounts: wanting.size,
      totalWorkers: this.pool.size(),
      soloWorkers: this.poolSize,
      keepIdle: this.pool.size() - this.poolSize + holdingNone,
      idleWorkers: this.pool.idleCount(account),
    });
  }

  private share(account: string): number {
    return workerShare(this.accountsWanting(account), this.pool.size(), this.poolSize);
  }

  /** Accounts with runs waiting or in workers, or a run ended within RECENT_MS; `account` included. */
  private accountsWanting(account: string): number {
    const wanting = this.wanting();
    wanting.add(account);
    return wanting.size;
  }

  private wanting(): Set<string> {
    const now = performance.now();
    for (const [a, t] of this.lastEnded) if (now - t >= RECENT_MS) this.lastEnded.delete(a);
    return new Set<string>([...this.held.keys(), ...this.queue.accounts(), ...this.lastEnded.keys()]);
  }

  /** No other account has runs waiting or in workers. */
  private alone(account: string): boolean {
    return this.accountsWanting(account) === 1;
  }

  /** A dispatched job is no longer in a worker (it ended, or was handed back). */
  private release(job: PoolJob): void {
    if (!this.dispatched.delete(job)) return;
    const account = job.account;
    const n = (this.held.get(account) ?? 1) - 1;
    if (n <= 0) {
      this.held.delete(account);
      this.lastEnded.set(account, performance.now());
    } else this.held.set(account, n);
  }

  /**
   * A job of `account` queued behind a run is asked back when it could start on an idle worker now, or
   * when its account holds more than its share while another account wants workers (the worker then
   * goes to that account when its run ends).
   */
  private shouldRelease(account: string): boolean {
    const held = this.held.get(account) ?? 0;
    const share = this.share(account);
    if (this.pool.idleCount() > 0 && held - 1 < share) return true;
    return !this.alone(account) && held > share;
  }

  /**
   * The reserve workers (fair-queue.ts, workerShare), once: `now`, or when a second account wants
   * workers.
   */
  private startReserve(now = false): void {
    if (this.reserveToStart === 0 || (!now && this.wanting().size < 2)) return;
    this.pool.grow(this.reserveToStart);
    this.reserveToStart = 0;
  }

  /**
   * maxQueue runs are waiting and this account could not start one now. Jobs queued behind a worker's
   * run (pool.ts, pipelining) are waiting too: they count against maxQueue.
   */
  private full(account: string): boolean {
    return this.queue.size + this.pool.pipelined() >= this.maxQueue && !this.mayStart(account);
  }

  private retryAfterSeconds(): number {
    const { poolSize } = this.pool.stats();
    return Math.max(1, Math.ceil((this.avgRunMs * (this.queue.size / poolSize + 1)) / 1000));
  }
}

/** A malformed request is a bug in the caller (the relayer), not an action failure: TypeError. */
function checkRequestShape(req: RunRequest): void {
  if (typeof req !== "object" || req === null) throw new TypeError("run(req): req must be an object");
  if (typeof req.cid !== "string" || req.cid === "")
    throw new TypeError("run(req): cid must be a non-empty string");
  if (typeof req.authorizePkp !== "function")
    throw new TypeError("run(req): authorizePkp must be a function");
  if (req.policiesFor !== undefined && typeof req.policiesFor !== "function")
    throw new TypeError("run(req): policiesFor must be a function");
  if (req.runPkp !== undefined) {
    const p = req.runPkp;
    if (typeof p !== "object" || p === null || typeof p.ref !== "string" || !Number.isSafeInteger(p.scope))
      throw new TypeError("run(req): runPkp must be { ref: string, scope: integer, notAfterMs?: number }");
    if (p.notAfterMs !== undefined && typeof p.notAfterMs !== "number")
      throw new TypeError("run(req): runPkp.notAfterMs must be a number");
    if (p.authorize !== undefined && typeof p.authorize !== "function")
      throw new TypeError("run(req): runPkp.authorize must be a function");
  }
  if (req.priority !== undefined && req.priority !== "interactive" && req.priority !== "background")
    throw new TypeError('run(req): priority must be "interactive" or "background"');
  if (req.unhandledRejections !== undefined) checkRejectionMode(req.unhandledRejections);
  checkFetchPolicy(req.fetch, "run(req)");
  if (req.requestHeaders !== undefined) {
    const h = req.requestHeaders;
    if (typeof h !== "object" || h === null || !Object.values(h).every((v) => typeof v === "string"))
      throw new TypeError("run(req): requestHeaders must be an object of strings");
  }
}

function checkRejectionMode(mode: unknown): UnhandledRejectionMode {
  if (mode !== "strict" && mode !== "lenient")
    throw new TypeError('unhandledRejections must be "strict" or "lenient"');
  return mode;
}

/** Size and shape checks done before a worker is involved. Returns the params as JSON when accepted. */
function checkInput(req: RunRequest, limits: ExecutorLimits): string | RunResult {
  if (typeof req.code !== "string") return refusal("syntax_error", "code must be a string");
  const codeBytes = Buffer.byteLength(req.code);
  if (codeBytes > limits.maxCodeBytes) {
    return refusal("code_too_large", `the code is ${codeBytes} bytes; the limit is ${limits.maxCodeBytes}`);
  }
  let paramsJson: string | undefined;
  try {
    paramsJson = JSON.stringify(req.jsParams === undefined ? {} : req.jsParams);
  } catch {
    paramsJson = undefined;
  }
  if (typeof paramsJson !== "string")
    return refusal("params_not_json", "js_params must be JSON-serializable");
  const paramsBytes = Buffer.byteLength(paramsJson);
  if (paramsBytes > limits.maxParamsBytes) {
    return refusal(
      "params_too_large",
      `js_params is ${paramsBytes} bytes as JSON; the limit is ${limits.maxParamsBytes}`,
    );
  }
  return paramsJson;
}

function refusal(code: string, message: string): RunResult {
  return {
    response: null,
    logs: "",
    has_error: true,
    error: { code, message },
    execution_ms: 0,
    key_ops: 0,
    fetches: 0,
  };
}

function toResult(o: RunOutcome): RunResult {
  const base = {
    logs: o.logs,
    execution_ms: o.executionMs,
    key_ops: o.keyOps,
    fetches: o.fetches,
    ...(o.keyOperations !== undefined ? { key_operations: o.keyOperations } : {}),
  };
  if (o.error !== null) {
    // Codes the enclave raised (e.g. decryption_failed) reach the action as is; as a run result they are
    // key_op_failed, with the enclave's code kept at the start of the message.
    const known = KNOWN_CODES.has(o.error.code);
    const error = known
      ? { code: o.error.code, message: o.error.message }
      : { code: "key_op_failed", message: `${o.error.code}: ${o.error.message}` };
    return { response: null, has_error: true, error, ...base };
  }
  const signatures = o.signaturesJson === undefined ? {} : { signatures: JSON.parse(o.signaturesJson) };
  return { response: JSON.parse(o.responseJson ?? "null"), has_error: false, ...base, ...signatures };
}
