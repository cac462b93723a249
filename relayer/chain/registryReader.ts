/**
 * Read-only calls to the registry through the shared provider: encode, eth_call (optionally at a block,
 * so the permission cache can load a consistent snapshot), decode. A revert becomes a RegistryRevert
 * carrying the decoded custom error; an unreachable chain becomes 503 chain_unavailable after retries.
 */
import type { ErrorDescription, JsonRpcProvider, Result } from "ethers";
import { registryInterface } from "./abi";
import { decodeRevert } from "./registryErrors";
import { revertData, withRetry } from "./rpc";

export class RegistryRevert extends Error {
  constructor(
    readonly data: string,
    readonly decoded: ErrorDescription | null,
  ) {
    super(`registry reverted: ${decoded?.name ?? data}`);
    this.name = "RegistryRevert";
  }
}

export class RegistryReader {
  constructor(
    private readonly provider: JsonRpcProvider,
    readonly address: string,
    private readonly onTransient?: (err: unknown) => void,
  ) {}

  /** Raw JSON-RPC on the reader's node (eth_getLogs for an account's history, relayer/keyHistory.ts). */
  send(method: string, params: unknown[]): Promise<unknown> {
    return this.provider.send(method, params);
  }

  /** `from`: the caller the registry sees (`_msgSender`), for simulating a write without sending it. */
  async call(fn: string, args: unknown[], blockTag?: number, from?: string): Promise<Result> {
    const data = registryInterface.encodeFunctionData(fn, args);
    const tag = blockTag === undefined ? "latest" : "0x" + blockTag.toString(16);
    const tx = from === undefined ? { to: this.address, data } : { from, to: this.address, data };
    const raw = await withRetry(
      async () => {
        try {
          return (await this.provider.send("eth_call", [tx, tag])) as string;
        } catch (err) {
          const d = revertData(err);
          if (d) throw new RegistryRevert(d, decodeRevert(d));
          throw err;
        }
      },
      3,
      this.onTransient,
    );
    return registryInterface.decodeFunctionResult(fn, raw);
  }
}
