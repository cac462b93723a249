/**
 * The hooks' own listener, the main thread's side (docs/triggers.md, "The hooks' own listener"): starts
 * the thread that serves `POST /hooks/v1/<id>` on a port of its own (hookThread.ts), keeps the thread's
 * hints current (the trigger behind a hook id when it asks, a full queue, room again, and "forget
 * everything" on any change: TriggerService.watchIntake), and serves what the thread hands over: the
 * calls it could not refuse, each stored as a firing by the same code as the app's route
 * (hookDelivery.ts) and answered through the thread. The thread's refusals reach this side only as
 * counts, about once a second: the metrics, and one log line.
 *
 * The thread is given a trigger's HMAC secret, opened, with its hint, so that a wrong signature is
 * refused there too: it stays in this process's memory, as it does on the main thread, and is never
 * logged. If the thread stops, the main port's `/hooks/v1` (the app and its fast path) still serves
 * every hook; the triggers' URLs then point back at it.
 */
import * as path from "node:path";
import { Worker } from "node:worker_threads";
import type { RelayerContext } from "../context";
import { ApiError } from "../errors";
import { toApiError, errorBody, retryAfterHeader } from "../http/errorHandler";
import { logRequest } from "../http/requestLog";
import { TokenBuckets } from "../rateLimit";
import { deliverHook } from "./hookDelivery";
import { HOOK_ROUTE } from "./hookRequest";
import type { FromThread, HandedAnswer, HookHint, HookThreadConfig, ToThread } from "./hookThread";
import type { StoredTrigger } from "./store";

const THREAD_SCRIPT = path.join(__dirname, `hookThread${path.extname(__filename)}`);

export interface HookListenerOptions {
  /** 0: any free port. */
  port: number;
  host: string;
  /** The URL base the triggers' answers announce (a proxy in front); default the address listened on. */
  publicUrl: string | null;
}

export class HookListener {
  /** What the thread has handed this thread so far: hook lookups and calls (its refusals never are). */
  readonly handed = { lookups: 0, calls: 0 };
  private readonly stopWatching: () => void;
  private closing: Promise<void> | null = null;
  private exited = false;

  private constructor(
    private readonly ctx: RelayerContext,
    private readonly thread: Worker,
    readonly port: number,
    /** The URL base the hooks are served at (what the triggers' answers announce). */
    readonly origin: string,
  ) {
    thread.on("message", (m: FromThread) => this.onMessage(m));
    thread.on("error", (err) =>
      ctx.logger.error({ err: err.message }, "the hooks' listener failed; hooks are served on the main port"),
    );
    thread.on("exit", () => {
      this.exited = true;
      // Its URLs no longer answer: point new answers back at the main port.
      if (ctx.triggers.hookOrigin === origin) ctx.triggers.hookOrigin = null;
    });
    const post = (m: ToThread) => {
      if (!this.exited) thread.postMessage(m);
    };
    this.stopWatching = ctx.triggers.watchIntake({
      full: (triggerId, reason, limit) => post({ type: "full", triggerId, reason, limit }),
      room: (triggerId) => post({ type: "room", triggerId }),
      forget: () => post({ type: "forget" }),
    });
  }

  /** Starts the thread and waits until it listens (rejects when it cannot, e.g. the port is taken). */
  static async start(ctx: RelayerContext, opts: HookListenerOptions): Promise<HookListener> {
    const cfg: HookThreadConfig = {
      port: opts.port,
      host: opts.host,
      bodyBytes: ctx.cfg.triggers.hookBodyBytes,
      perIpPerMinute: ctx.cfg.triggers.hookPerIpPerMinute,
      perTriggerPerMinute: ctx.cfg.triggers.hookPerTriggerPerMinute,
      trustProxy: ctx.cfg.trustProxy,
      hintMs: ctx.cfg.triggers.intakeHintMs,
    };
    // Under ts-node (tests, `npm start`) the thread compiles its TypeScript as the main thread does.
    const typescript = THREAD_SCRIPT.endsWith(".ts");
    const thread = new Worker(
      typescript
        ? `require("ts-node").register({ transpileOnly: true }); require(${JSON.stringify(THREAD_SCRIPT)});`
        : THREAD_SCRIPT,
      { eval: typescript, name: "sigil-hooks", workerData: { hookThread: cfg }, execArgv: [] },
    );
    let onMessage: (m: FromThread) => void = () => undefined;
    let onError: (err: Error) => void = () => undefined;
    let onExit: (code: number) => void = () => undefined;
    const port = await new Promise<number>((resolve, reject) => {
      onMessage = (m: FromThread) => {
        if (m.type === "listening") resolve(m.port);
        if (m.type === "failed") reject(new Error(`the hooks' listener could not listen: ${m.error}`));
      };
      onError = reject;
      onExit = (code) => reject(new Error(`the hooks' listener stopped (${code})`));
      thread.on("message", onMessage);
      thread.on("error", onError);
      thread.on("exit", onExit);
    })
      .catch(async (err: unknown) => {
        await thread.terminate();
        throw err;
      })
      .finally(() => {
        thread.off("message", onMessage);
        thread.off("error", onError);
        thread.off("exit", onExit);
      });
    const host = opts.host.includes(":")
      ? `[${opts.host}]`
      : opts.host === "0.0.0.0"
        ? "127.0.0.1"
        : opts.host;
    const origin = (opts.publicUrl ?? `http://${host}:${port}`).replace(/\/+$/, "");
    const listener = new HookListener(ctx, thread, port, origin);
    ctx.triggers.hookOrigin = origin;
    ctx.logger.info({ port, origin }, "hooks' listener listening");
    return listener;
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      this.stopWatching();
      if (this.ctx.triggers.hookOrigin === this.origin) this.ctx.triggers.hookOrigin = null;
      if (this.exited) return;
      const closed = new Promise<void>((resolve) => this.thread.once("exit", () => resolve()));
      this.thread.postMessage({ type: "close" } satisfies ToThread);
      const timer = setTimeout(() => void this.thread.terminate(), 5_000);
      await closed;
      clearTimeout(timer);
    })();
    return this.closing;
  }

  private post(m: ToThread): void {
    if (!this.exited) this.thread.postMessage(m);
  }

  private onMessage(m: FromThread): void {
    switch (m.type) {
      case "lookup":
        this.handed.lookups++;
        this.ctx.triggers.byHookId(m.hookId).then(
          (t) => this.post({ type: "hint", seq: m.seq, hookId: m.hookId, hint: this.hintOf(t) }),
          (err: unknown) => {
            // The database decides when the call is handed over (and answers its failure then).
            this.ctx.logger.warn({ err: String(err) }, "hooks' listener: looking up a hook failed");
            this.post({ type: "hint", seq: m.seq, hookId: m.hookId, hint: "unknown" });
          },
        );
        break;
      case "deliver":
        this.handed.calls++;
        void this.deliver(m);
        break;
      case "refused":
        this.account(m);
        break;
    }
  }

  /** What the thread may know of the trigger (null: answer 404, whether it existed or not). */
  private hintOf(t: StoredTrigger | null): HookHint {
    if (!t || !t.enabled || !t.webhook) return null;
    const hmac = t.webhook.hmac;
    return {
      triggerId: t.id,
      paused: t.paused !== null,
      maxQueuedRuns: t.limits.maxQueuedRuns,
      hmac: hmac ? { ...hmac, secret: this.ctx.triggers.openSecret(t) } : null,
    };
  }

  /** A call the thread could not refuse: a firing stored (202), or the refusal the database gives. */
  private async deliver(m: Extract<FromThread, { type: "deliver" }>): Promise<void> {
    const started = process.hrtime.bigint();
    const { ctx } = this;
    // With limits shared by every instance, this instance's buckets in the thread are not the bound.
    const shared = !(ctx.triggers.hookIpLimit instanceof TokenBuckets);
    let status = 202;
    let code: string | undefined;
    let answer: HandedAnswer;
    const headers = {
      "X-Request-Id": m.requestId,
      "X-Correlation-Id": m.correlationId,
      "Content-Type": "application/json; charset=utf-8",
    };
    try {
      if (shared) await ctx.triggers.hookIpLimit.take(`hip:${m.ip}`, `address ${m.ip}`);
      const out = await deliverHook(ctx, {
        hookId: m.hookId,
        raw: Buffer.from(m.raw.buffer, m.raw.byteOffset, m.raw.byteLength),
        headers: m.headers,
        takeTriggerToken: shared || !m.triggerTokenTaken,
      });
      answer = { status, headers, body: JSON.stringify({ run_id: out.runId, firing_id: out.firingId }) };
    } catch (err) {
      let apiError = toApiError(err);
      if (!apiError) {
        ctx.logger.error({ request_id: m.requestId, err: String(err) }, "unhandled error");
        apiError = new ApiError("internal_error", "Internal error. Report the request_id.");
      }
      status = apiError.status;
      code = apiError.code;
      const retryAfter = retryAfterHeader(apiError);
      answer = {
        status,
        headers: { ...headers, ...(retryAfter !== undefined ? { "Retry-After": retryAfter } : {}) },
        body: JSON.stringify(errorBody(apiError, m.requestId)),
      };
    }
    this.post({ type: "answer", seq: m.seq, answer });
    logRequest(ctx, {
      requestId: m.requestId,
      correlationId: m.correlationId,
      method: "POST",
      route: HOOK_ROUTE,
      status,
      ms: Number(process.hrtime.bigint() - started) / 1e6,
      code,
    });
  }

  /** The thread's refusals: counted in the metrics, and one log line for the lot. */
  private account(m: Extract<FromThread, { type: "refused" }>): void {
    const { metrics, logger } = this.ctx;
    const refused: Record<string, number> = {};
    for (const [method, status, code, n] of m.counts) {
      metrics.httpRequests.inc({ method, route: HOOK_ROUTE, status: String(status) }, n);
      refused[`${status} ${code}`] = (refused[`${status} ${code}`] ?? 0) + n;
    }
    for (const ms of m.ms) metrics.httpDuration.observe({ method: "POST", route: HOOK_ROUTE }, ms / 1000);
    logger.info({ route: HOOK_ROUTE, refused }, "hook calls refused by the hooks' listener");
  }
}
