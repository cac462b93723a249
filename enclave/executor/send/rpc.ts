/**
 * A minimal JSON-RPC client over HTTP for the chains the operator configured (relayer/chains.ts). Kept
 * apart from ethers' providers on purpose: a send must tell "the node answered an error" (the
 * transaction was refused, its nonce is free again) from "no answer" (it may have been taken: the nonce
 * must be re-read), and the node's own error message and data decide the action's error code.
 *
 * The URL is the operator's; it is never put in an error message (it may carry an API key).
 */
export class RpcAnswerError extends Error {
  constructor(
    readonly rpcCode: number,
    message: string,
    /** The error's `data` (revert data for eth_estimateGas / eth_call), when a hex string. */
    readonly data: string | undefined,
  ) {
    super(message);
    this.name = "RpcAnswerError";
  }
}

/** No usable answer: a network failure, a timeout, an HTTP error, a body that is not JSON-RPC. */
export class RpcUnreachableError extends Error {
  constructor(
    message: string,
    readonly timedOut = false,
  ) {
    super(message);
    this.name = "RpcUnreachableError";
  }
}

export class JsonRpcClient {
  private nextId = 1;

  constructor(
    private readonly url: string,
    private readonly timeoutMs: number,
  ) {}

  /**
   * Calls `method`; at most `timeoutMs` (or `withinMs` when shorter). A read whose connection failed
   * before any answer is tried once more (a kept-alive connection the server had just closed is the
   * usual cause); a broadcast never is here: its caller decides what an unknown outcome means.
   */
  async call<T = unknown>(method: string, params: unknown[], withinMs?: number): Promise<T> {
    const started = performance.now();
    try {
      return await this.once<T>(method, params, withinMs);
    } catch (e) {
      if (!(e instanceof RpcUnreachableError) || e.timedOut || method === "eth_sendRawTransaction") throw e;
      const left = withinMs === undefined ? undefined : withinMs - (performance.now() - started);
      if (left !== undefined && left <= 0) throw e;
      return this.once<T>(method, params, left);
    }
  }

  private async once<T>(method: string, params: unknown[], withinMs?: number): Promise<T> {
    const ms = Math.max(1, Math.ceil(Math.min(this.timeoutMs, withinMs ?? this.timeoutMs)));
    let res: Response;
    try {
      res = await fetch(this.url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: this.nextId++, method, params }),
        signal: AbortSignal.timeout(ms),
      });
    } catch (e) {
      const timedOut = (e as { name?: string }).name === "TimeoutError";
      throw new RpcUnreachableError(
        timedOut ? `${method} took longer than ${ms} ms` : `${method}: no answer`,
      );
    }
    let body: { result?: unknown; error?: { code?: unknown; message?: unknown; data?: unknown } };
    try {
      body = (await res.json()) as typeof body;
    } catch {
      throw new RpcUnreachableError(`${method}: HTTP ${res.status}, not a JSON-RPC answer`);
    }
    if (body && typeof body === "object" && body.error && typeof body.error === "object") {
      const err = body.error;
      const data = typeof err.data === "string" && /^0x[0-9a-fA-F]*$/.test(err.data) ? err.data : undefined;
      throw new RpcAnswerError(
        typeof err.code === "number" ? err.code : 0,
        typeof err.message === "string" ? err.message.slice(0, 500) : "error",
        data,
      );
    }
    if (!res.ok || !body || typeof body !== "object" || !("result" in body))
      throw new RpcUnreachableError(`${method}: HTTP ${res.status}, not a JSON-RPC answer`);
    return body.result as T;
  }
}
