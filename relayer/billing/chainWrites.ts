/**
 * The path-A writes the chain recorded, for the billing audit: every forward request the forwarder
 * executed, read back from its `ExecutedForwardRequest(signer, nonce, success)` events and the receipts
 * of the transactions that carried them. Nothing here trusts the relayer's own records.
 *
 * A request's own logs are the receipt's logs after the previous ExecutedForwardRequest of the forwarder
 * up to and including its own (the forwarder emits the event right after the call's logs; see
 * relayer/chain/batch.ts). From them: whether it created an account (new_account is free) and which
 * account it acted on (every registry event has the account id as its first indexed argument).
 */
import { EXECUTED_FORWARD_REQUEST_TOPIC } from "../chain/batch";
import { registryInterface } from "../chain/abi";
import { getLogs, type LogRpc } from "../chain/logs/ranges";
import type { RawLog } from "../chain/rawLog";

/** The JSON-RPC calls the replay needs (an ethers JsonRpcProvider has them). */
export type RpcClient = LogRpc;

export interface ChainWrite {
  signer: string;
  nonce: bigint;
  success: boolean;
  /** "account_creation": new_account's createAccount (free); "write": a billable management write. */
  kind: "write" | "account_creation";
  /** The account its registry events name; null if it emitted none. */
  accountId: string | null;
  txHash: string;
  /** The request's position among the forward requests of its transaction (0 for `execute`). */
  position: number;
  blockNumber: number;
  /** The transaction's sender (a gas wallet for writes sent by the relayer). */
  sentBy: string;
}

interface RawReceipt {
  from: string;
  status: string;
  blockNumber: string;
  logs: RawLog[];
}

const ACCOUNT_CREATED = registryInterface.getEvent("AccountCreated")!.topicHash.toLowerCase();
const RECEIPTS_IN_FLIGHT = 8;

export interface ReplayOptions {
  registry: string;
  forwarder: string;
  fromBlock: number;
  toBlock: number;
}

/** Every forward request the forwarder executed in [fromBlock, toBlock], in chain order. */
export async function replayForwardedWrites(rpc: RpcClient, o: ReplayOptions): Promise<ChainWrite[]> {
  const forwarder = o.forwarder.toLowerCase();
  const registry = o.registry.toLowerCase();
  const txs: string[] = [];
  const seen = new Set<string>();
  const logs = await getLogs(
    rpc,
    { address: forwarder, topics: [EXECUTED_FORWARD_REQUEST_TOPIC] },
    o.fromBlock,
    o.toBlock,
  );
  for (const l of logs) {
    const h = l.transactionHash.toLowerCase();
    if (!seen.has(h)) {
      seen.add(h);
      txs.push(h);
    }
  }
  const out: ChainWrite[] = [];
  // A few receipts at a time: one by one is slow over a long history, all at once floods the node.
  for (let i = 0; i < txs.length; i += RECEIPTS_IN_FLIGHT) {
    const chunk = txs.slice(i, i + RECEIPTS_IN_FLIGHT);
    const receipts = await Promise.all(
      chunk.map((h) => rpc.send("eth_getTransactionReceipt", [h]) as Promise<RawReceipt | null>),
    );
    chunk.forEach((txHash, j) => {
      const receipt = receipts[j];
      if (!receipt) throw new Error(`the node has no receipt for ${txHash}, whose logs it returned`);
      out.push(...splitReceipt(txHash, receipt, forwarder, registry));
    });
  }
  return out;
}

function splitReceipt(txHash: string, r: RawReceipt, forwarder: string, registry: string): ChainWrite[] {
  const out: ChainWrite[] = [];
  let start = 0;
  r.logs.forEach((l, i) => {
    if (
      l.address.toLowerCase() !== forwarder ||
      l.topics[0]?.toLowerCase() !== EXECUTED_FORWARD_REQUEST_TOPIC
    )
      return;
    const own = r.logs.slice(start, i).filter((x) => x.address.toLowerCase() === registry);
    start = i + 1;
    const body = l.data.slice(2);
    const firstRegistryLog = own.find((x) => x.topics.length > 1);
    out.push({
      signer: "0x" + l.topics[1].slice(26).toLowerCase(),
      nonce: BigInt("0x" + body.slice(0, 64)),
      success: BigInt("0x" + body.slice(64, 128)) !== 0n,
      kind: own.some((x) => x.topics[0]?.toLowerCase() === ACCOUNT_CREATED) ? "account_creation" : "write",
      accountId: firstRegistryLog ? BigInt(firstRegistryLog.topics[1]).toString(10) : null,
      txHash,
      position: out.length,
      blockNumber: Number(BigInt(r.blockNumber)),
      sentBy: r.from.toLowerCase(),
    });
  });
  return out;
}
