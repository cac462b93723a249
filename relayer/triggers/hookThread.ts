/**
 * The hooks' own listener, in a thread of its own (started by hookListener.ts): `POST /hooks/v1/<id>`
 * on a port of its own, so that a flood of hook calls is parsed, read and refused on this thread's
 * event loop and never waits in line with other accounts' requests on the relayer's main loop.
 *
 * It answers every refusal itself, in the app's order (routes/hooks.ts, hookDelivery.ts) and with the
 * app's answers (status, headers, JSON body, request ids):
 *
 *  0. a source its per-IP rate refused a moment ago, at the socket (without parsing HTTP:
 *     hookSourceGate.ts): 429 rate_limited, and the connection closed;
 *  1. the source's per-IP rate: 429 rate_limited (with `Connection: close`);
 *  2. the body, read raw up to the limit: 413 payload_too_large past it;
 *  3. a malformed hook id, or one whose trigger is unknown, disabled or deleted: 404 trigger_not_found;
 *  4. the trigger's own rate: 429 rate_limited;
 *  5. the HMAC, when the trigger asks for one: 401 webhook_signature_invalid;
 *  6. a fresh delivery while the trigger's queue is known full, or its minute's runs fired: 429
 *     trigger_queue_full. A run claimed since makes room for one delivery: that one crosses, the rest
 *     are still refused here (the same hints as the main thread's, intakeHints.ts). Before the database
 *     has said "full", the fresh deliveries of a trigger handed over and not yet answered are held to
 *     its max_queued_runs: past that many the queue is full once they are stored, so the next is
 *     refused here too (without this, a flood's first burst crossed up to the flood's concurrency, and
 *     more the busier the main thread was, before the database's first "full" came back).
 *
 * What it needs to know comes from the main thread as hints (the same hints the main thread keeps for
 * itself, intakeHints.ts, pushed here as they change): the trigger behind a hook id (asked once, then
 * remembered for `triggers.intakeHintMs`), which queues are full, and "forget everything" on any change. Only a
 * call it cannot refuse crosses to the main thread, with its body, and is answered there (a firing
 * stored, or a refusal only the database knows). A stale hint refuses early at worst, as on the main
 * thread: the database decides every firing it stores.
 *
 * The rate limits here are this thread's own in-memory buckets (the per-instance limits). With limits
 * shared by every instance (PostgreSQL), the main thread also takes the shared tokens of the calls it is
 * handed, so the cluster-wide bound holds for every call that can start work.
 *
 * Refused calls are not logged one line each: the thread counts them and hands the main thread the
 * counts (metrics and one summary log line) about once a second.
 */
import * as http from "node:http";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import { parentPort, workerData } from "node:worker_threads";
import express from "express";
import type { ApiError } from "../errors";
import { clientIpBeforeExpress, requestIds } from "../http/context";
import { errorBody, retryAfterHeader } from "../http/errorHandler";
import { TokenBuckets } from "../rateLimit";
import { ApiError as Err, isApiError } from "../errors";
import { deliveryIdOf, HOOK_ID, HOOK_PATH, HOOK_ROUTE, hmacMatches } from "./hookRequest";
import { HookSourceGate } from "./hookSourceGate";
import { type IntakeLimit, QueueFullHints } from "./intakeHints";
import { notFound, refusal } from "./intakeRefusals";

/** What the main thread starts the thread with. */
export interface HookThreadConfig {
  port: number;
  host: string;
  bodyBytes: number;
  perIpPerMinute: number;
  perTriggerPerMinute: number;
  /** The app's `trust proxy` setting: the client's address is read the same way. */
  trustProxy: unknown;
  hintMs: number;
}

/** What the thread knows of a hook's trigger: null when there is none (or it is disabled, or deleted). */
export type HookHint = {
  triggerId: string;
  paused: boolean;
  /** The trigger's queue bound (limits.max_queued_runs): fresh deliveries in flight are held to it. */
  maxQueuedRuns: number;
  hmac: { header: string; prefix: string; encoding: "hex" | "base64"; secret: string | null } | null;
} | null;

/** An answer the main thread wrote for a call it was handed. */
export interface HandedAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export type ToThread =
  | { type: "hint"; seq: number; hookId: string; hint: HookHint | "unknown" }
  | { type: "full"; triggerId: string; reason: IntakeLimit; limit: number }
  | { type: "room"; triggerId: string }
  | { type: "forget" }
  | { type: "answer"; seq: number; answer: HandedAnswer }
  | { type: "close" };

export type FromThread =
  | { type: "listening"; port: number }
  | { type: "failed"; error: string }
  | { type: "lookup"; seq: number; hookId: string }
  | {
      type: "deliver";
      seq: number;
      hookId: string;
      ip: string;
      headers: http.IncomingHttpHeaders;
      raw: Uint8Array;
      requestId: string;
      correlationId: string;
      /** Whether this thread took the trigger's token (not when the trigger could not be looked up). */
      triggerTokenTaken: boolean;
    }
  | {
      type: "refused";
      counts: Array<[method: string, status: number, code: string, n: number]>;
      ms: number[];
    }
  | { type: "closed" };

const MINUTE = 60_000;
/** How often the refusals' counts go to the main thread (and at most how many durations at once). */
const REPORT_MS = 1_000;
const REPORT_MAX = 10_000;

/**
 * This thread's scheduling priority (nice): below the main thread's and the executor's. Under a flood
 * the thread's CPU is the flood's; when the machine's CPUs are short, the other accounts' requests and
 * runs go first and the flood's answers wait (its calls are refused either way). With CPU to spare it
 * changes nothing.
 */
export const HOOK_THREAD_NICE = 10;

/** Lowers this thread's priority alone (Linux: setpriority on the thread's id); elsewhere nothing. */
function lowerThisThreadsPriority(): void {
  try {
    // "/proc/thread-self" names the calling thread: "<pid>/task/<tid>".
    const tid = Number(fs.readlinkSync("/proc/thread-self").split("/").pop());
    if (Number.isInteger(tid) && tid > 0 && tid !== process.pid)
      os.setPriority(tid, Math.max(os.getPriority(tid), HOOK_THREAD_NICE));
  } catch {
    // No /proc, or not permitted: the thread runs at the process's priority.
  }
}

function main(cfg: HookThreadConfig): void {
  lowerThisThreadsPriority();
  const port = parentPort!;
  const send = (m: FromThread, transfer?: ArrayBuffer[]) => port.postMessage(m, transfer);
  const ipLimit = new TokenBuckets(cfg.perIpPerMinute, MINUTE);
  const triggerLimit = new TokenBuckets(cfg.perTriggerPerMinute, MINUTE);
  // Only for reading the client's address as the app does (its `trust proxy`); it serves nothing.
  const addressReader = express();
  addressReader.set("trust proxy", cfg.trustProxy);
  // The socket's address is the client's only without a proxy in front (see hookSourceGate.ts).
  const sourceGate = cfg.trustProxy ? null : new HookSourceGate();

  const hints = new Map<string, { hint: HookHint; untilMs: number }>();
  const full = new QueueFullHints(cfg.hintMs);
  let nextSeq = 1;
  const lookups = new Map<number, (hint: HookHint | "unknown") => void>();
  const waitingLookup = new Map<string, Array<(hint: HookHint | "unknown") => void>>();
  const handed = new Map<number, (answer: HandedAnswer) => void>();
  /** Per trigger: fresh deliveries handed to the main thread and not yet answered. */
  const inFlight = new Map<string, number>();

  const counts = new Map<string, number>();
  let durations: number[] = [];
  const report = () => {
    if (counts.size === 0) return;
    const out: Array<[string, number, string, number]> = [];
    for (const [k, n] of counts) {
      const [method, status, code] = JSON.parse(k) as [string, number, string];
      out.push([method, status, code, n]);
    }
    send({ type: "refused", counts: out, ms: durations });
    counts.clear();
    durations = [];
  };
  const reporter = setInterval(report, REPORT_MS);

  /** The hint for a hook id: remembered while fresh, else asked of the main thread (one ask at a time). */
  const withHint = (hookId: string, then: (hint: HookHint | "unknown") => void) => {
    const h = hints.get(hookId);
    if (h && Date.now() < h.untilMs) return then(h.hint);
    const queue = waitingLookup.get(hookId);
    if (queue) return void queue.push(then);
    waitingLookup.set(hookId, [then]);
    const seq = nextSeq++;
    lookups.set(seq, (hint) => {
      const waiting = waitingLookup.get(hookId) ?? [];
      waitingLookup.delete(hookId);
      for (const w of waiting) w(hint);
    });
    send({ type: "lookup", seq, hookId });
  };

  port.on("message", (m: ToThread) => {
    switch (m.type) {
      case "hint": {
        // Bounded as the main thread's own lookups are (intakeHints.ts).
        if (hints.size >= 10_000) hints.clear();
        if (m.hint !== "unknown") hints.set(m.hookId, { hint: m.hint, untilMs: Date.now() + cfg.hintMs });
        const done = lookups.get(m.seq);
        lookups.delete(m.seq);
        done?.(m.hint);
        break;
      }
      case "full":
        full.markFull(m.triggerId, m.reason, m.limit, Date.now());
        break;
      case "room":
        full.room(m.triggerId);
        break;
      case "forget":
        hints.clear();
        full.clear();
        break;
      case "answer": {
        const done = handed.get(m.seq);
        handed.delete(m.seq);
        done?.(m.answer);
        break;
      }
      case "close":
        clearInterval(reporter);
        front.close();
        server.close(() => {
          report();
          send({ type: "closed" });
          port.close();
        });
        server.closeAllConnections();
        break;
    }
  });

  const server = http.createServer((req, res) => {
    const started = process.hrtime.bigint();
    const offered = req.headers["x-correlation-id"];
    const ids = requestIds(Array.isArray(offered) ? offered.join(", ") : offered);
    const refuse = (err: ApiError) => {
      writeError(req, res, err, ids);
      const key = JSON.stringify([req.method ?? "", err.status, err.code]);
      counts.set(key, (counts.get(key) ?? 0) + 1);
      durations.push(Number(process.hrtime.bigint() - started) / 1e6);
      if (durations.length >= REPORT_MAX) report();
    };
    const m = req.method === "POST" ? HOOK_PATH.exec(req.url ?? "") : null;
    if (!m) {
      req.resume();
      return refuse(new Err("route_not_found", "This listener serves only POST /hooks/v1/<hook id>."));
    }
    const hookId = m[1];
    let ip: string;
    try {
      ip = clientIpBeforeExpress(addressReader, req);
    } catch (err) {
      req.resume();
      return refuse(asApiError(err));
    }
    try {
      ipLimit.take(`hip:${ip}`, `address ${ip}`);
    } catch (err) {
      req.resume();
      const e = asApiError(err);
      if (sourceGate !== null && e.code === "rate_limited") {
        // Its next calls are refused at the socket: make a keep-alive client reconnect to get there.
        sourceGate.overBudget(ip, e.retryAfter ?? 1);
        res.setHeader("Connection", "close");
      }
      return refuse(e);
    }
    readBody(req, cfg.bodyBytes, (err, raw) => {
      if (err) return refuse(err);
      if (!HOOK_ID.test(hookId)) return refuse(notFound());
      withHint(hookId, (hint) => {
        if (hint === null) return refuse(notFound());
        let triggerTokenTaken = false;
        let freshOf: string | null = null;
        if (hint !== "unknown") {
          try {
            triggerLimit.take(`htr:${hint.triggerId}`, `trigger ${hint.triggerId}`);
          } catch (e) {
            return refuse(asApiError(e));
          }
          triggerTokenTaken = true;
          if (hint.hmac) {
            const given = req.headers[hint.hmac.header.toLowerCase()];
            const value = Array.isArray(given) ? given.join(", ") : given;
            if (hint.hmac.secret === null || !hmacMatches(raw!, hint.hmac.secret, hint.hmac, value))
              return refuse(
                new Err(
                  "webhook_signature_invalid",
                  `The ${hint.hmac.header} header does not carry the HMAC-SHA256 of the body under this trigger's secret.`,
                ),
              );
          }
          // A re-delivery is answered its first run, and a paused trigger its own refusal: both the
          // database's to say (as on the main thread's path).
          if (!hint.paused && deliveryIdOf(req.headers) === null) {
            if ((inFlight.get(hint.triggerId) ?? 0) >= hint.maxQueuedRuns)
              return refuse(refusal("queue_full", hint.maxQueuedRuns));
            // The call that crosses takes the room a claimed run made (admit), if any.
            const known = full.admit(hint.triggerId, Date.now());
            if (known !== null) return refuse(refusal(known.reason, known.limit));
            freshOf = hint.triggerId;
            inFlight.set(freshOf, (inFlight.get(freshOf) ?? 0) + 1);
          }
        }
        const seq = nextSeq++;
        handed.set(seq, (answer) => {
          if (freshOf !== null) {
            const n = (inFlight.get(freshOf) ?? 1) - 1;
            if (n > 0) inFlight.set(freshOf, n);
            else inFlight.delete(freshOf);
          }
          res.writeHead(answer.status, answer.headers);
          res.end(answer.body);
        });
        const bytes = new Uint8Array(raw!.buffer, raw!.byteOffset, raw!.byteLength).slice();
        send(
          {
            type: "deliver",
            seq,
            hookId,
            ip,
            headers: req.headers,
            raw: bytes,
            requestId: ids.requestId,
            correlationId: ids.correlationId,
            triggerTokenTaken,
          },
          [bytes.buffer],
        );
      });
    });
  });
  server.keepAliveTimeout = 5_000;
  // The socket is accepted here and handed to the HTTP server only when its source is not refused.
  const front = net.createServer({ pauseOnConnect: true }, (socket) => {
    const refusedFor = sourceGate?.refusedFor(socket.remoteAddress) ?? null;
    if (refusedFor === null) {
      server.emit("connection", socket);
      socket.resume();
      return;
    }
    HookSourceGate.refuse(socket, refusedFor);
    const key = JSON.stringify(["", 429, "rate_limited"]);
    counts.set(key, (counts.get(key) ?? 0) + 1);
  });
  front.once("error", (err) => send({ type: "failed", error: err.message }));
  front.listen(cfg.port, cfg.host, () => {
    send({ type: "listening", port: (front.address() as { port: number }).port });
  });
}

function asApiError(err: unknown): ApiError {
  return isApiError(err) ? err : new Err("invalid_request", "The request could not be read.");
}

/**
 * The body as bytes, up to `limit` (413 past it, before reading when the length is announced; a body
 * that stops short is 400 invalid_request, as the app's raw-body reader answers).
 */
function readBody(
  req: http.IncomingMessage,
  limit: number,
  then: (err: ApiError | null, raw?: Buffer) => void,
): void {
  const tooLarge = () => new Err("payload_too_large", "The request body is larger than the limit.");
  const announced = req.headers["content-length"];
  if (announced !== undefined && Number(announced) > limit) {
    req.resume();
    return then(tooLarge());
  }
  const chunks: Buffer[] = [];
  let size = 0;
  let done = false;
  const finish = (err: ApiError | null) => {
    if (done) return;
    done = true;
    if (err) {
      req.removeAllListeners("data");
      req.resume();
      return then(err);
    }
    then(null, Buffer.concat(chunks, size));
  };
  req.on("data", (chunk: Buffer) => {
    size += chunk.length;
    if (size > limit) return finish(tooLarge());
    chunks.push(chunk);
  });
  req.on("end", () => finish(null));
  req.on("aborted", () => finish(new Err("invalid_request", "The request body could not be read.")));
  req.on("error", () => finish(new Err("invalid_request", "The request body could not be read.")));
}

/** The app's error answer (errorHandler.ts's sendError) with its request ids. */
function writeError(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  err: ApiError,
  ids: { requestId: string; correlationId: string },
): void {
  const body = JSON.stringify(errorBody(err, ids.requestId));
  res.statusCode = err.status;
  res.setHeader("X-Request-Id", ids.requestId);
  res.setHeader("X-Correlation-Id", ids.correlationId);
  const retryAfter = retryAfterHeader(err);
  if (retryAfter !== undefined) res.setHeader("Retry-After", retryAfter);
  res.setHeader("Content-Type", "application/json; charset=utf-8");
  res.setHeader("Content-Length", Buffer.byteLength(body));
  res.end(body);
}

export { HOOK_ROUTE };

if (parentPort && (workerData as { hookThread?: HookThreadConfig } | null)?.hookThread)
  main((workerData as { hookThread: HookThreadConfig }).hookThread);
