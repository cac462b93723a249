import { ethers } from "ethers";
import { SafeCliError } from "./errors";
import { startSettings } from "./startSettings";

/** Default RPC: what `npm start` uses (SIGIL_RPC_URL, else the embedded chain on SIGIL_ANVIL_PORT). */
export function defaultRpcUrl(): string {
  return startSettings().rpcUrl;
}

/**
 * A JSON-RPC provider for scripts. `cacheTimeout: -1` because with caching anvil answers stale nonces to
 * back-to-back transactions (TOOLCHAIN.md).
 */
export function rpcProvider(rpcUrl: string, timeoutMs = 30_000): ethers.JsonRpcProvider {
  // ethers' default request timeout is 5 minutes; a node that drops a request should fail the command
  // with a clear error long before that.
  const request = new ethers.FetchRequest(rpcUrl);
  request.timeout = timeoutMs;
  return new ethers.JsonRpcProvider(request, undefined, { cacheTimeout: -1 });
}

/** A wallet from a 0x-prefixed (or bare) 32-byte hex private key; a clear error otherwise. */
export function walletFromKey(privateKey: string, provider?: ethers.Provider): ethers.Wallet {
  const hex = privateKey.startsWith("0x") ? privateKey : `0x${privateKey}`;
  if (!/^0x[0-9a-fA-F]{64}$/.test(hex)) {
    throw new SafeCliError("invalid_argument", "a private key must be 32 bytes of hex (0x + 64 hex digits)");
  }
  return new ethers.Wallet(hex, provider);
}

/** Normalise a private key to the 0x-prefixed form protocol-kit expects. */
export function normaliseKey(privateKey: string): string {
  return walletFromKey(privateKey).privateKey;
}

export function requireAddress(value: string, what: string): string {
  if (!ethers.isAddress(value))
    throw new SafeCliError("invalid_argument", `${what} is not an address: ${value}`);
  return ethers.getAddress(value);
}

/** The chain id served at `rpcUrl`, or a clear `rpc_unreachable` error (never a bare ECONNREFUSED). */
export async function chainIdAt(rpcUrl: string): Promise<bigint> {
  const provider = rpcProvider(rpcUrl, 10_000);
  try {
    return BigInt(await provider.send("eth_chainId", []));
  } catch (cause) {
    const reason = (cause as { code?: string; message?: string }).code ?? (cause as Error).message;
    throw new SafeCliError(
      "rpc_unreachable",
      `cannot reach a chain at ${rpcUrl} (${reason}); start one or pass --rpc`,
      { rpcUrl },
      cause,
    );
  } finally {
    provider.destroy();
  }
}
