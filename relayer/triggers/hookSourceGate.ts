/**
 * The hooks' listener's refusal at the socket (hookThread.ts; docs/triggers.md, "The hooks' own
 * listener"): once a source's per-IP budget has refused one of its calls, its connections are refused
 * as they are accepted, until a token is back, without parsing a byte of HTTP: the bytes it sends are
 * read and dropped, a fixed 429 `rate_limited` answer is written and the connection is closed. The call
 * refused by the budget itself is answered with `Connection: close`, so a keep-alive client has to come
 * back through the gate. Only where the socket's address is the client's (no `trust proxy`): behind a
 * proxy every source shares the proxy's address, and the per-IP budget (read from the forwarded
 * address) is all there is.
 */
import type * as net from "node:net";
import { randomUUID } from "node:crypto";
import { errorBody } from "../http/errorHandler";
import { ApiError } from "../errors";

/** A source refused at accept is given this long to send its request (read and dropped) and go. */
const LINGER_MS = 2_000;

export class HookSourceGate {
  /** Address → until when (ms) its connections are refused at accept. Bounded as the buckets are. */
  private readonly refusing = new Map<string, number>();

  constructor(private readonly now: () => number = Date.now) {}

  /** The budget refused a call of `address`, with `retryAfterSeconds` until its next token. */
  overBudget(address: string, retryAfterSeconds: number): void {
    if (this.refusing.size >= 100_000) this.sweep();
    this.refusing.set(address, this.now() + Math.max(1, retryAfterSeconds) * 1_000);
  }

  /** Seconds until `address` may connect again, or null when it may now. */
  refusedFor(address: string | undefined): number | null {
    if (address === undefined) return null;
    const until = this.refusing.get(address);
    if (until === undefined) return null;
    const left = until - this.now();
    if (left <= 0) {
      this.refusing.delete(address);
      return null;
    }
    return Math.ceil(left / 1_000);
  }

  /** Answers a refused connection: its bytes are dropped unread, the fixed answer written, then closed. */
  static refuse(socket: net.Socket, retryAfterSeconds: number): void {
    const requestId = `req_${randomUUID().replace(/-/g, "")}`;
    const err = new ApiError(
      "rate_limited",
      "Too many calls from this address; it is refused until its budget has a token again.",
      { retryAfter: retryAfterSeconds },
    );
    const body = JSON.stringify(errorBody(err, requestId));
    socket.on("data", () => undefined);
    socket.on("error", () => undefined);
    socket.setTimeout(LINGER_MS, () => socket.destroy());
    socket.resume();
    socket.end(
      `HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nRetry-After: ${retryAfterSeconds}\r\n` +
        `X-Request-Id: ${requestId}\r\nX-Correlation-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
    );
  }

  private sweep(): void {
    const now = this.now();
    for (const [a, until] of this.refusing) if (until <= now) this.refusing.delete(a);
    if (this.refusing.size >= 100_000) this.refusing.clear();
  }
}
