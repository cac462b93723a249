/**
 * IPFS gateway client: GET <gateway>/ipfs/<cid> from each configured gateway in order, with a size
 * limit (enforced while streaming, not only from Content-Length) and a per-gateway timeout covering
 * the whole response. Bytes are returned only after they hash to the CID: a gateway is never trusted.
 * When every gateway fails, the error reports the most informative failure seen (too large, mismatch,
 * not found, timeout, other), with one line per gateway naming only its origin.
 */
import { EnclaveError, EnclaveErrorCode } from "./errors";
import { contentMatchesCid, parseCid } from "./cid";

export interface GatewayClientOptions {
  gateways: string[];
  maxBytes: number;
  timeoutMs: number;
}

const PRECEDENCE: EnclaveErrorCode[] = [
  "content_too_large",
  "cid_mismatch",
  "content_not_found",
  "gateway_timeout",
  "gateway_error",
];

export class GatewayClient {
  readonly #gateways: URL[];
  readonly #maxBytes: number;
  readonly #timeoutMs: number;

  constructor(opts: GatewayClientOptions) {
    if (!Array.isArray(opts.gateways) || opts.gateways.length === 0)
      throw new RangeError("at least one gateway is required");
    this.#gateways = opts.gateways.map((g) => {
      const u = new URL(g);
      if (u.protocol !== "http:" && u.protocol !== "https:")
        throw new RangeError("gateways must be http(s) URLs");
      return u;
    });
    if (!(opts.maxBytes > 0) || !(opts.timeoutMs > 0))
      throw new RangeError("maxBytes and timeoutMs must be positive");
    this.#maxBytes = opts.maxBytes;
    this.#timeoutMs = opts.timeoutMs;
  }

  async fetch(cid: string): Promise<Uint8Array> {
    const canonical = parseCid(cid);
    const failures: EnclaveError[] = [];
    for (const gw of this.#gateways) {
      try {
        const bytes = await this.#fetchOne(gw, canonical);
        if (!contentMatchesCid(canonical, bytes)) {
          throw new EnclaveError("cid_mismatch", "Gateway content does not match the CID.", {
            details: gw.origin,
          });
        }
        return bytes;
      } catch (e) {
        failures.push(
          e instanceof EnclaveError
            ? e
            : new EnclaveError("gateway_error", "Gateway request failed.", { details: gw.origin }),
        );
      }
    }
    const worst = PRECEDENCE.find((code) => failures.some((f) => f.code === code)) ?? "gateway_error";
    const first = failures.find((f) => f.code === worst)!;
    throw new EnclaveError(worst, first.shortMessage, {
      details: failures.map((f) => `${f.details}: ${f.code}`).join("; ") + ` (cid ${canonical})`,
    });
  }

  async #fetchOne(gw: URL, cid: string): Promise<Uint8Array> {
    const url = new URL(gw.pathname.replace(/\/$/, "") + "/ipfs/" + cid, gw);
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, this.#timeoutMs);
    try {
      const res = await fetch(url, { signal: controller.signal, redirect: "follow" });
      if (res.status === 404 || res.status === 410) {
        await res.body?.cancel();
        throw new EnclaveError("content_not_found", "Content not found on the gateway.", {
          details: gw.origin,
        });
      }
      if (!res.ok || !res.body) {
        await res.body?.cancel();
        throw new EnclaveError("gateway_error", "Gateway request failed.", {
          details: `${gw.origin} answered ${res.status}`,
        });
      }
      const declared = Number(res.headers.get("content-length"));
      if (Number.isFinite(declared) && declared > this.#maxBytes) {
        await res.body.cancel();
        throw this.#tooLarge(gw);
      }
      const chunks: Uint8Array[] = [];
      let total = 0;
      const reader = res.body.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        total += value.length;
        if (total > this.#maxBytes) {
          await reader.cancel();
          throw this.#tooLarge(gw);
        }
        chunks.push(value);
      }
      return new Uint8Array(Buffer.concat(chunks));
    } catch (e) {
      if (e instanceof EnclaveError) throw e;
      if (timedOut) {
        throw new EnclaveError("gateway_timeout", "Gateway timed out.", {
          details: `${gw.origin} after ${this.#timeoutMs} ms`,
        });
      }
      throw new EnclaveError("gateway_error", "Gateway request failed.", { details: gw.origin });
    } finally {
      clearTimeout(timer);
    }
  }

  #tooLarge(gw: URL): EnclaveError {
    return new EnclaveError("content_too_large", "Content too large.", {
      details: `${gw.origin} exceeds ${this.#maxBytes} bytes`,
    });
  }
}
