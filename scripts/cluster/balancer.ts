/**
 * A tiny round-robin HTTP front for the local cluster, so the dashboard, the CLI and the SDK talk to one
 * URL. Production puts a real load balancer here (docs/deployment.md); this one exists so that
 * `npm run start:cluster` behaves like that shape on one machine.
 *
 * - Requests go to the instances in turn. Sticky sessions are not needed: every instance answers every
 *   request from the shared chain and database.
 * - Bodies and headers pass through untouched, both ways (a signed request's signature covers them).
 *   No X-Forwarded-For is added: instances do not trust proxy headers unless told to (SIGIL_TRUST_PROXY).
 * - An instance that refuses the connection is marked down for `downForMs` and the request goes to the
 *   next one: a refused connection carried no byte of the request, so sending it elsewhere is safe.
 *   Once every instance has refused, the answer is 503 `no_instance_available`.
 * - An instance that drops a connection after the request was sent (it crashed mid-request) is not
 *   retried elsewhere (the request may have run): 502 `instance_connection_lost`.
 */
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { errorHelp } from "../../relayer/errors";

export interface Backend {
  id: string;
  url: string;
}

export interface BalancerOptions {
  host?: string;
  port: number;
  backends: readonly Backend[];
  /** How long an instance that refused a connection is skipped; default 1000 ms. */
  downForMs?: number;
  /** Largest request body forwarded; default 16 MiB (the API's own limits are far lower). */
  maxBodyBytes?: number;
}

export interface RunningBalancer {
  url: string;
  port: number;
  /** Which instances are currently marked down (ids). */
  down(): string[];
  close(): Promise<void>;
}

interface State extends Backend {
  target: URL;
  downUntil: number;
}

const HOP_BY_HOP = new Set(["connection", "keep-alive", "transfer-encoding", "upgrade"]);

function sendError(
  res: http.ServerResponse,
  status: number,
  code: string,
  message: string,
  retryAfter?: number,
) {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify({
    error: { code, message, details: null, ...errorHelp(code) },
    request_id: null,
  });
  res.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(body),
    ...(retryAfter !== undefined ? { "retry-after": String(retryAfter) } : {}),
  });
  res.end(body);
}

export async function startBalancer(opts: BalancerOptions): Promise<RunningBalancer> {
  const downForMs = opts.downForMs ?? 1000;
  const maxBody = opts.maxBodyBytes ?? 16 * 1024 * 1024;
  const backends: State[] = opts.backends.map((b) => ({ ...b, target: new URL(b.url), downUntil: 0 }));
  // Keep-alive to the instances: a new TCP connection per request would dominate small requests.
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  let next = 0;

  /** The instances to try for one request, in order: round-robin, those marked down last. */
  function order(): State[] {
    const start = next++ % backends.length;
    const turn = backends.map((_, i) => backends[(start + i) % backends.length]);
    const now = Date.now();
    return [...turn.filter((b) => b.downUntil <= now), ...turn.filter((b) => b.downUntil > now)];
  }

  function forward(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    body: Buffer,
    candidates: State[],
  ): void {
    const backend = candidates.shift();
    if (!backend) {
      sendError(res, 503, "no_instance_available", "No Sigil instance is accepting connections.", 1);
      return;
    }
    const headers: http.OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(req.headers))
      if (!HOP_BY_HOP.has(name) && value !== undefined) headers[name] = value;
    // The body is forwarded whole (it was read to be retryable), so its length is known.
    if (req.headers["transfer-encoding"] !== undefined) {
      delete headers["transfer-encoding"];
      headers["content-length"] = String(body.length);
    }
    let sent = false;
    const upstream = http.request(
      {
        host: backend.target.hostname,
        port: backend.target.port,
        method: req.method,
        path: req.url,
        headers,
        agent,
      },
      (answer) => {
        backend.downUntil = 0;
        const out: http.OutgoingHttpHeaders = {};
        for (const [name, value] of Object.entries(answer.headers))
          if (!HOP_BY_HOP.has(name) && value !== undefined) out[name] = value;
        res.writeHead(answer.statusCode ?? 502, answer.statusMessage, out);
        answer.pipe(res);
        answer.once("aborted", () => res.destroy());
      },
    );
    upstream.once("socket", (socket) => {
      // Counted as sent once the connection is up: from then on the instance may have the request.
      if (socket.connecting) socket.once("connect", () => (sent = true));
      else sent = true;
    });
    upstream.once("error", (err: NodeJS.ErrnoException) => {
      // A kept-alive connection to an instance that has just died fails on first use with a reset:
      // the dead process read nothing, so this is as safe to send elsewhere as a refused connection.
      // (An instance that crashes while reading a request on a reused connection looks the same; a
      // write sent with an Idempotency-Key still runs at most once, as the key is claimed in the
      // shared database before anything is sent to the chain.)
      const staleSocket = upstream.reusedSocket && err.code === "ECONNRESET";
      if ((!sent && (err.code === "ECONNREFUSED" || err.code === "ECONNRESET")) || staleSocket) {
        backend.downUntil = Date.now() + downForMs;
        forward(req, res, body, candidates);
        return;
      }
      sendError(
        res,
        502,
        "instance_connection_lost",
        `Instance ${backend.id} closed the connection before answering; the request may have run.`,
      );
    });
    upstream.end(body);
  }

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > maxBody) {
        sendError(res, 413, "payload_too_large", `The request body is larger than ${maxBody} bytes.`);
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on("end", () => {
      if (size <= maxBody) forward(req, res, Buffer.concat(chunks), order());
    });
  });
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port, opts.host ?? "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://${opts.host && opts.host !== "0.0.0.0" ? opts.host : "127.0.0.1"}:${port}`,
    port,
    down: () => backends.filter((b) => b.downUntil > Date.now()).map((b) => b.id),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
        agent.destroy();
      }),
  };
}
