/**
 * Owner transactions for a ChainSecured account: the calldata the dashboard prepares, sent by an
 * injected EIP-1193 wallet (window.ethereum) or downloaded as a Safe Transaction Builder file. The page
 * never holds the owner's key.
 */
import { Interface } from "ethers";
import { KEY_SCOPES_TUPLE } from "../../vocabulary/scopes";
import {
  REGISTRY_WRITE_ABI,
  signInWithEthereum,
  type Eip1193Provider,
  type OwnerSession,
  type Sigil,
} from "../../sdk";

/**
 * Signs in as the owner through the injected wallet: one personal_sign of an EIP-4361 message for this
 * page's host, naming a session key made here (sdk/siwe.ts). The wallet's key never reaches the page.
 */
export async function signInWithWallet(): Promise<OwnerSession> {
  const wallet = injectedWallet();
  if (!wallet) throw new Error("No browser wallet found (window.ethereum).");
  const { session } = await signInWithEthereum({
    baseUrl: window.location.origin,
    provider: wallet,
    domain: window.location.host,
    uri: window.location.origin,
  });
  return session;
}

/** The registry calls an owner makes directly (path B): the SDK's writes plus accepting ownership. */
const KEY_SCOPES = KEY_SCOPES_TUPLE;
export const ownerCalls = new Interface([
  ...REGISTRY_WRITE_ABI,
  "function acceptOwnership(uint64 accountId)",
  // A group's signing policy: a CID, or "" to clear (docs/policies.md).
  "function setGroupPolicy(uint64 groupId, string cid)",
  // Usage-key management: the owner's alone (contracts/interfaces/IAccountRegistry.sol).
  `function addKey(address key, bytes32 keyHash, string name, string description, uint64 expiration, ${KEY_SCOPES})`,
  `function updateKey(address key, string name, string description, uint64 expiration, ${KEY_SCOPES})`,
  "function updateKeyMetadata(address key, string name, string description)",
  "function removeKey(address key)",
]);

export interface OwnerTx {
  /** What it does, in words ("Create group demo"). */
  title: string;
  chainId: number;
  to: string;
  functionName: string;
  args: unknown[];
  data: string;
}

export function ownerTx(
  title: string,
  chainId: number,
  to: string,
  functionName: string,
  args: unknown[],
): OwnerTx {
  return { title, chainId, to, functionName, args, data: ownerCalls.encodeFunctionData(functionName, args) };
}

/** The call decoded back from its calldata: what the wallet will be asked to sign. */
export function decoded(tx: OwnerTx): Array<{ name: string; type: string; value: string }> {
  const fn = ownerCalls.getFunction(tx.functionName)!;
  const values = ownerCalls.decodeFunctionData(fn, tx.data);
  const show = (v: unknown): string => (Array.isArray(v) ? `[${v.map(show).join(", ")}]` : String(v));
  return fn.inputs.map((input, i) => ({ name: input.name, type: input.type, value: show(values[i]) }));
}

type Eip1193 = Eip1193Provider;

export function injectedWallet(): Eip1193 | null {
  const w = (window as unknown as { ethereum?: Eip1193 }).ethereum;
  return w && typeof w.request === "function" ? w : null;
}

/** Sends through the injected wallet from its first account; resolves with the mined receipt's status. */
export async function sendWithWallet(
  wallet: Eip1193,
  tx: OwnerTx,
): Promise<{ hash: string; from: string; blockNumber: number }> {
  const accounts = (await wallet.request({ method: "eth_requestAccounts" })) as string[];
  if (!accounts.length) throw new Error("The wallet shared no account.");
  const chainId = Number(await wallet.request({ method: "eth_chainId" }));
  if (chainId !== tx.chainId)
    throw new Error(`The wallet is on chain ${chainId}; switch it to chain ${tx.chainId} (Sigil's chain).`);
  const from = accounts[0];
  const hash = (await wallet.request({
    method: "eth_sendTransaction",
    params: [{ from, to: tx.to, data: tx.data, value: "0x0" }],
  })) as string;
  for (let i = 0; i < 120; i++) {
    const receipt = (await wallet.request({ method: "eth_getTransactionReceipt", params: [hash] })) as {
      status: string;
      blockNumber: string;
    } | null;
    if (receipt) {
      if (Number(receipt.status) !== 1) throw new Error(`The transaction ${hash} reverted.`);
      return { hash, from, blockNumber: Number(receipt.blockNumber) };
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`The transaction ${hash} was not mined within a minute.`);
}

/** A Safe{Wallet} Transaction Builder batch file (importable in the Transaction Builder app). */
export function safeBatchFile(tx: OwnerTx, safeAddress: string): string {
  return JSON.stringify(
    {
      version: "1.0",
      chainId: String(tx.chainId),
      createdAt: Date.now(),
      meta: {
        name: tx.title,
        description: `Sigil registry call ${tx.functionName}, prepared by the Sigil dashboard`,
        txBuilderVersion: "1.16.5",
        createdFromSafeAddress: safeAddress,
        createdFromOwnerAddress: "",
      },
      transactions: [
        { to: tx.to, value: "0", data: tx.data, contractMethod: null, contractInputsValues: null },
      ],
    },
    null,
    2,
  );
}

/**
 * Waits until the service has read `blockNumber` (GET /health: the permission cache's last processed
 * block), so that a list reloaded afterwards shows what the owner's transaction changed.
 */
export async function waitForService(sigil: Sigil, blockNumber: number, timeoutMs = 30_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const health = await sigil.get("/health").catch(() => null);
    if (health && health.last_processed_block >= blockNumber) return;
    await new Promise((r) => setTimeout(r, 300));
  }
}
