/**
 * The chains this service reaches besides its registry: one list, from the operator's configuration,
 * shared by everything that talks to a chain on a user's behalf (chain-event triggers read their logs,
 * `Actions.sendTransaction` sends to them). The registry's own chain is always in the list (as
 * "embedded" when it is the embedded anvil), so a fresh `npm start` can follow and send on it.
 *
 * `SIGIL_CHAINS` is a JSON array of `{ "chain_id", "name", "rpc_url", "confirmations"? }`; an entry
 * with the registry's chain id replaces the default one (to raise its confirmation depth, say).
 */

export interface ChainEndpoint {
  chainId: number;
  /** A short name for answers and logs ("embedded", "base-sepolia"). */
  name: string;
  rpcUrl: string;
  /** Blocks a log must be buried under before a trigger fires on it (reorg safety). */
  confirmations: number;
}

export class ChainsConfigError extends Error {}

const NAME = /^[a-z0-9][a-z0-9-]{0,39}$/;

/** Parses the value of SIGIL_CHAINS (absent or empty: no extra chain). Throws ChainsConfigError. */
export function parseChainsEnv(value: string | undefined): ChainEndpoint[] {
  if (value === undefined || value.trim() === "") return [];
  let raw: unknown;
  try {
    raw = JSON.parse(value);
  } catch {
    throw new ChainsConfigError("SIGIL_CHAINS is not JSON: expected an array of chain entries.");
  }
  if (!Array.isArray(raw)) throw new ChainsConfigError("SIGIL_CHAINS must be a JSON array.");
  return raw.map((entry, i) => parseEntry(entry, i));
}

function parseEntry(entry: unknown, i: number): ChainEndpoint {
  const where = `SIGIL_CHAINS[${i}]`;
  if (typeof entry !== "object" || entry === null) throw new ChainsConfigError(`${where} must be an object.`);
  const e = entry as Record<string, unknown>;
  const chainId = e.chain_id;
  if (typeof chainId !== "number" || !Number.isSafeInteger(chainId) || chainId < 1)
    throw new ChainsConfigError(`${where}.chain_id must be a positive integer.`);
  const name = e.name;
  if (typeof name !== "string" || !NAME.test(name))
    throw new ChainsConfigError(`${where}.name must be 1-40 lowercase letters, digits or dashes.`);
  const rpcUrl = e.rpc_url;
  if (typeof rpcUrl !== "string" || !/^(https?|wss?):\/\/\S+$/.test(rpcUrl))
    throw new ChainsConfigError(`${where}.rpc_url must be an http(s) or ws(s) URL.`);
  const confirmations = e.confirmations ?? 0;
  if (typeof confirmations !== "number" || !Number.isSafeInteger(confirmations) || confirmations < 0)
    throw new ChainsConfigError(`${where}.confirmations must be a non-negative integer.`);
  return { chainId, name, rpcUrl, confirmations };
}

/**
 * The resolved list: the registry's chain first (unless an entry replaces it), then the operator's
 * others. Two entries for one chain id are refused: a chain has one RPC URL and one confirmation depth.
 */
export function resolveChains(
  registryChain: ChainEndpoint,
  extra: readonly ChainEndpoint[],
): ChainEndpoint[] {
  const seen = new Set<number>();
  for (const c of extra) {
    if (seen.has(c.chainId)) throw new ChainsConfigError(`SIGIL_CHAINS names chain ${c.chainId} twice.`);
    seen.add(c.chainId);
  }
  const replaced = extra.find((c) => c.chainId === registryChain.chainId);
  return [replaced ?? registryChain, ...extra.filter((c) => c !== replaced)];
}

/** The configured chain with this id, or undefined (callers answer `chain_not_configured`). */
export function chainById(chains: readonly ChainEndpoint[], chainId: number): ChainEndpoint | undefined {
  return chains.find((c) => c.chainId === chainId);
}
