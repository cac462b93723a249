/**
 * What became of a recorded forward request (one an earlier attempt signed and may have sent before a
 * crash), asked of the chain alone:
 *  - executed: the forwarder ran *this* request (its ExecutedForwardRequest(signer, nonce) is in a
 *    transaction carrying this exact signature); its receipt gives the result;
 *  - pending: not executed, and it still can be (nonce unused, deadline not passed): sending the same
 *    request again is safe, since the forwarder's nonce lets at most one of its copies execute;
 *  - dead: it can never execute: its nonce was used by another request, or a block later than its
 *    deadline was mined while its nonce was still unused. Only then may a fresh request replace it.
 *
 * The order of the reads matters: the nonce is read at one fixed block before the logs are searched up
 * to that block, so an execution landing between the two reads cannot make a used nonce look like
 * another request's.
 *
 * The search follows the shared range rule (relayer/chain/logs/ranges.ts): ranges of at most the
 * common 5,000-block cap, in chain order, so a node that fails answers at once rather than after a
 * halving over a whole chain's span.
 */
import { ApiError } from "../../errors";
import { forwarderInterface } from "../abi";
import { EXECUTED_FORWARD_REQUEST_TOPIC } from "../batch";
import { blockRanges, DEFAULT_LOG_RANGE, getLogs, type LogRpc } from "../logs/ranges";
import { withRetry } from "../rpc";
import type { RawReceipt } from "./receipts";
import type { RawLog, RecordedForwardRequest, WriteResult } from "./types";

export type Reconciled =
  | { kind: "executed"; success: boolean; result: WriteResult }
  | { kind: "pending" }
  | { kind: "dead"; reason: "nonce_used" | "expired" };

const NONCES = forwarderInterface.getFunction("nonces")!;

export async function reconcile(
  provider: LogRpc,
  forwarder: string,
  r: RecordedForwardRequest,
  onTransient?: (err: unknown) => void,
): Promise<Reconciled> {
  const retry = <T>(fn: () => Promise<T>) => withRetry(fn, 3, onTransient);
  const rpc = <T>(method: string, params: unknown[]) =>
    retry(() => provider.send(method, params) as Promise<T>);
  const head = await rpc<{ number: string; timestamp: string }>("eth_getBlockByNumber", ["latest", false]);
  const headNumber = Number(BigInt(head.number));
  const raw = await rpc<string>("eth_call", [
    { to: forwarder, data: forwarderInterface.encodeFunctionData(NONCES, [r.from]) },
    head.number,
  ]);
  const current = BigInt(forwarderInterface.decodeFunctionResult(NONCES, raw)[0]);
  const nonce = BigInt(r.nonce);
  if (current <= nonce) {
    // Unused at a block whose timestamp is past the deadline: no later block can run it either.
    if (Number(BigInt(head.timestamp)) > r.deadline) return { kind: "dead", reason: "expired" };
    return { kind: "pending" };
  }
  const search = (fromBlock: number) =>
    findExecution({ provider, rpc, retry }, forwarder, r, nonce, fromBlock, headNumber);
  let found = await search(r.fromBlock);
  // The nonce is used, so some request's event is on chain; not finding any from the recorded block
  // means that block was too late (a deep reorganisation): search the whole chain before concluding.
  if (found === "none") found = await search(0);
  return typeof found === "object" ? found : { kind: "dead", reason: "nonce_used" };
}

async function findExecution(
  chain: {
    provider: LogRpc;
    rpc: <T>(method: string, params: unknown[]) => Promise<T>;
    retry: <T>(fn: () => Promise<T>) => Promise<T>;
  },
  forwarder: string,
  r: RecordedForwardRequest,
  nonce: bigint,
  fromBlock: number,
  toBlock: number,
): Promise<Reconciled | "another" | "none"> {
  const { rpc } = chain;
  const signerTopic = "0x" + r.from.slice(2).toLowerCase().padStart(64, "0");
  const signature = r.signature.slice(2).toLowerCase();
  const filter = { address: forwarder, topics: [EXECUTED_FORWARD_REQUEST_TOPIC, signerTopic] };
  // Range by range, stopping at the first execution of this nonce: the fallback search spans the whole
  // chain, and what it looks for is usually near its start.
  for (const [a, b] of blockRanges(fromBlock, toBlock, DEFAULT_LOG_RANGE)) {
    const logs: RawLog[] = await getLogs(chain.provider, filter, a, b, { retry: chain.retry });
    for (const l of logs) {
      if (BigInt("0x" + l.data.slice(2, 66)) !== nonce) continue;
      // The nonce was used; by this request only if its transaction carries this signature.
      const tx = await rpc<{ input: string } | null>("eth_getTransactionByHash", [l.transactionHash]);
      // A node that cannot show the transaction cannot prove whose request it ran: ask again later.
      if (!tx)
        throw new ApiError("chain_unavailable", "The chain's node did not return a transaction.", {
          retryAfter: 5,
          details: { tx_hash: l.transactionHash },
        });
      if (!tx.input.toLowerCase().includes(signature)) return "another";
      const receipt = await rpc<RawReceipt>("eth_getTransactionReceipt", [l.transactionHash]);
      const success = BigInt("0x" + l.data.slice(66, 130)) !== 0n;
      return {
        kind: "executed",
        success,
        result: {
          txHash: l.transactionHash,
          blockNumber: Number(BigInt(receipt.blockNumber)),
          logs: ownLogs(receipt.logs, forwarder, l.logIndex),
          gasUsed: BigInt(receipt.gasUsed),
        },
      };
    }
  }
  return "none";
}

/**
 * The request's own logs in its transaction: after the forwarder's previous ExecutedForwardRequest (a
 * batch runs several requests) up to and including its own (relayer/chain/batch.ts splitBatchLogs).
 */
function ownLogs(logs: RawLog[], forwarder: string, logIndex: string): RawLog[] {
  const fwd = forwarder.toLowerCase();
  let start = 0;
  for (let i = 0; i < logs.length; i++) {
    const l = logs[i];
    if (l.logIndex === logIndex || BigInt(l.logIndex) === BigInt(logIndex)) return logs.slice(start, i + 1);
    if (l.address.toLowerCase() === fwd && l.topics[0]?.toLowerCase() === EXECUTED_FORWARD_REQUEST_TOPIC)
      start = i + 1;
  }
  return logs;
}
