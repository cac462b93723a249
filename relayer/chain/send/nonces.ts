/**
 * The two kinds of nonce a path-A write consumes:
 *  - the forwarder nonce of the principal (ERC-2771 forward requests are sequential per signer), cached
 *    so that a burst of one principal's writes does not read the chain for each; forgotten whenever an
 *    outcome says the cache may be behind (another instance wrote for the same principal);
 *  - the transaction nonce of a gas wallet, read from the chain's pending count when the wallet's own
 *    counter is unknown (at start, after a restart, after any doubtful send).
 */
import type { JsonRpcProvider } from "ethers";
import { forwarderInterface } from "../abi";
import { withRetry } from "../rpc";

/** Looked up once: encoding by name makes ethers search the ABI (and hash signatures) on every write. */
const NONCES = forwarderInterface.getFunction("nonces")!;

export class ForwarderNonces {
  private readonly cache = new Map<string, bigint>();

  constructor(
    private readonly provider: JsonRpcProvider,
    private readonly forwarder: string,
    private readonly onTransient?: (err: unknown) => void,
  ) {}

  /** The nonce the principal's next forward request must carry (cached after the first read). */
  async get(principal: string): Promise<bigint> {
    const key = principal.toLowerCase();
    const cached = this.cache.get(key);
    if (cached !== undefined) return cached;
    const data = forwarderInterface.encodeFunctionData(NONCES, [principal]);
    const raw = await withRetry(
      () => this.provider.send("eth_call", [{ to: this.forwarder, data }, "latest"]) as Promise<string>,
      3,
      this.onTransient,
    );
    const nonce = BigInt(forwarderInterface.decodeFunctionResult(NONCES, raw)[0]);
    this.cache.set(key, nonce);
    return nonce;
  }

  /** After a request with `used` landed: the next one carries used + 1. */
  consumed(principal: string, used: bigint): void {
    this.cache.set(principal.toLowerCase(), used + 1n);
  }

  /** The cache may be behind the chain: the next get() reads it again. */
  forget(principal: string): void {
    this.cache.delete(principal.toLowerCase());
  }

  clear(): void {
    this.cache.clear();
  }
}

/**
 * The next transaction nonce of `address` counting its transactions still in the node's pool: what a
 * restarted instance must continue from, or it would replace (or collide with) its own pending sends.
 */
export async function pendingTransactionCount(
  provider: JsonRpcProvider,
  address: string,
  onTransient?: (err: unknown) => void,
): Promise<number> {
  const hex = await withRetry(
    () => provider.send("eth_getTransactionCount", [address, "pending"]) as Promise<string>,
    3,
    onTransient,
  );
  return Number(BigInt(hex));
}
