/**
 * The JSON-RPC connection: an ethers v6 JsonRpcProvider that never hangs and never loops on network
 * detection (static network, a per-request timeout, no batching stall, no response cache: docs/development.md),
 * plus the classification of failures into "the chain is unreachable" (503 chain_unavailable, retried
 * a little first) and everything else.
 */
import { FetchRequest, JsonRpcProvider, Network } from "ethers";
import { ApiError } from "../errors";
import type { JsonRpcPayload, JsonRpcResult } from "ethers";
import { keepAliveTransport, postJson } from "./transport";

/**
 * ethers' JsonRpcProvider with a lean transport: `_send` posts the payload itself (transport.ts
 * postJson) instead of going through FetchRequest. Everything above `_send` is ethers' own (request ids,
 * error decoding by getRpcError, result matching), so callers see the same results and the same errors.
 */
class LeanJsonRpcProvider extends JsonRpcProvider {
  constructor(
    req: FetchRequest,
    network: Network,
    private readonly post: (body: string) => Promise<unknown>,
  ) {
    super(req, network, { staticNetwork: network, cacheTimeout: -1, batchMaxCount: 1, polling: false });
  }

  // Error entries ({id, error}) are returned as they came, exactly as ethers' own _send does.
  async _send(payload: JsonRpcPayload | JsonRpcPayload[]): Promise<Array<JsonRpcResult>> {
    const resp = await this.post(JSON.stringify(payload));
    return (Array.isArray(resp) ? resp : [resp]) as Array<JsonRpcResult>;
  }
}

export function makeProvider(
  rpcUrl: string,
  chainId: number,
  timeoutMs: number,
): { provider: JsonRpcProvider; close(): void } {
  const transport = keepAliveTransport();
  const req = new FetchRequest(rpcUrl);
  req.timeout = timeoutMs;
  req.getUrlFunc = transport.getUrl;
  const network = Network.from(chainId);
  const url = new URL(rpcUrl);
  const agent = transport.agentFor(url);
  const provider: JsonRpcProvider = agent
    ? new LeanJsonRpcProvider(req, network, (body) => postJson(url, agent, body, timeoutMs))
    : new JsonRpcProvider(req, network, {
        staticNetwork: network,
        cacheTimeout: -1,
        batchMaxCount: 1,
        polling: false,
      });
  return {
    provider,
    close() {
      provider.destroy();
      transport.destroy();
    },
  };
}

/** eth_chainId with a timeout, before the real provider exists. */
export async function fetchChainId(rpcUrl: string, timeoutMs: number): Promise<number> {
  const req = new FetchRequest(rpcUrl);
  req.timeout = timeoutMs;
  req.body = { jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] };
  const resp = await req.send();
  resp.assertOk();
  const json = resp.bodyJson as { result?: string };
  if (typeof json.result !== "string") throw new Error("eth_chainId returned no result");
  return Number(BigInt(json.result));
}

const TRANSIENT_CODES = new Set([
  "TIMEOUT",
  "NETWORK_ERROR",
  "SERVER_ERROR",
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "UND_ERR_SOCKET",
]);

/** True for failures that mean "could not talk to the chain" rather than "the chain said no". */
export function isTransient(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && depth < 5; depth++) {
    const o = e as { code?: unknown; message?: unknown; cause?: unknown; error?: unknown };
    if (typeof o.code === "string" && TRANSIENT_CODES.has(o.code)) return true;
    const msg = typeof o.message === "string" ? o.message : "";
    if (
      /ECONNREFUSED|ECONNRESET|socket hang up|fetch failed|timeout|network|request timeout|EPIPE/i.test(msg)
    )
      return true;
    e = o.cause ?? o.error;
  }
  return false;
}

export function chainUnavailable(cause: unknown, details?: Record<string, unknown>): ApiError {
  return new ApiError("chain_unavailable", "The chain's RPC endpoint is unreachable; retry shortly.", {
    retryAfter: 2,
    cause,
    details,
  });
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Runs an RPC operation, retrying transient failures with a short backoff; after the last attempt a
 * transient failure becomes 503 chain_unavailable. Non-transient errors (reverts, bad params) pass through.
 */
export async function withRetry<T>(
  op: () => Promise<T>,
  attempts = 3,
  onTransient?: (err: unknown) => void,
): Promise<T> {
  let last: unknown;
  for (let i = 0; i < attempts; i++) {
    try {
      return await op();
    } catch (err) {
      if (!isTransient(err)) throw err;
      onTransient?.(err);
      last = err;
      if (i < attempts - 1) await sleep(100 * 3 ** i);
    }
  }
  throw chainUnavailable(last);
}

/** Revert data carried by an ethers / JSON-RPC error, wherever the provider put it. */
export function revertData(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e && depth < 6; depth++) {
    const o = e as { data?: unknown; info?: { error?: unknown }; error?: unknown; cause?: unknown };
    if (typeof o.data === "string" && /^0x[0-9a-fA-F]*$/.test(o.data) && o.data.length >= 10) return o.data;
    if (o.data && typeof o.data === "object" && typeof (o.data as { data?: unknown }).data === "string") {
      const d = (o.data as { data: string }).data;
      if (/^0x[0-9a-fA-F]{8,}$/.test(d)) return d;
    }
    e = o.info?.error ?? o.error ?? o.cause;
  }
  return undefined;
}
