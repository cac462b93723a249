/**
 * Batched path-A submission: several signed forward requests in one transaction with the forwarder's
 * `executeBatch(requests, refundReceiver)` (OpenZeppelin 5 ERC2771Forwarder).
 *
 * With a non-zero refund receiver the batch is not atomic:
 *  - a valid request whose call reverts emits ExecutedForwardRequest(signer, nonce, false) and consumes
 *    its nonce;
 *  - an invalid request (bad signature, stale nonce, expired) is skipped: no event, nonce not consumed;
 *  - a successful one emits ExecutedForwardRequest(signer, nonce, true) right after its own call's logs.
 * So each request's outcome, and its own logs, are read from the receipt's logs in order (splitBatchLogs).
 */
import { forwarderInterface } from "./abi";
import type { RawLog } from "./rawLog";

export interface SignedForwardRequest {
  from: string;
  to: string;
  value: bigint;
  gas: bigint;
  deadline: number | bigint;
  data: string;
  signature: string;
}

const EXECUTE = forwarderInterface.getFunction("execute")!;
const EXECUTE_BATCH = forwarderInterface.getFunction("executeBatch")!;
export const EXECUTED_FORWARD_REQUEST_TOPIC = forwarderInterface
  .getEvent("ExecutedForwardRequest")!
  .topicHash.toLowerCase();

const word = (n: bigint) => {
  if (n < 0n || n >= 1n << 256n) throw new RangeError("not a uint256");
  return n.toString(16).padStart(64, "0");
};
const address = (a: string) => {
  if (!/^0x[0-9a-fA-F]{40}$/.test(a)) throw new TypeError("not an address");
  return a.slice(2).toLowerCase().padStart(64, "0");
};
const bytes = (h: string) => {
  if (!/^0x([0-9a-fA-F]{2})*$/.test(h)) throw new TypeError("not hex bytes");
  const body = h.slice(2).toLowerCase();
  const len = body.length / 2;
  return word(BigInt(len)) + body.padEnd(Math.ceil(len / 32) * 64, "0");
};

/** The ABI encoding of one ForwardRequestData tuple (dynamic: its own head and tail), as hex without 0x. */
function encodeTuple(r: SignedForwardRequest): string {
  const data = bytes(r.data);
  const head = 7 * 32;
  return (
    address(r.from) +
    address(r.to) +
    word(r.value) +
    word(r.gas) +
    word(BigInt(r.deadline)) +
    word(BigInt(head)) +
    word(BigInt(head + data.length / 2)) +
    data +
    bytes(r.signature)
  );
}

/**
 * ABI encoding of ERC2771Forwarder.execute(ForwardRequestData) by hand: the layout is fixed, and ethers'
 * generic coder was one of the larger costs of a write. Byte-for-byte what
 * forwarderInterface.encodeFunctionData("execute", [request]) produces (tested).
 */
export function encodeExecute(r: SignedForwardRequest): string {
  return EXECUTE.selector + word(32n) + encodeTuple(r);
}

/** ABI encoding of executeBatch(ForwardRequestData[], address) by hand, byte-for-byte ethers' (tested). */
export function encodeExecuteBatch(rs: SignedForwardRequest[], refundReceiver: string): string {
  const tuples = rs.map(encodeTuple);
  let offsets = "";
  let at = 32 * rs.length;
  for (const t of tuples) {
    offsets += word(BigInt(at));
    at += t.length / 2;
  }
  return (
    EXECUTE_BATCH.selector +
    word(64n) +
    address(refundReceiver) +
    word(BigInt(rs.length)) +
    offsets +
    tuples.join("")
  );
}

export type BatchItemOutcome =
  | { kind: "executed"; success: boolean; logs: RawLog[] }
  /** No ExecutedForwardRequest for it: the forwarder found it invalid and skipped it (nonce unused). */
  | { kind: "skipped" };

/**
 * Splits the logs of a mined executeBatch transaction between its requests. A request's logs are those
 * after the previous ExecutedForwardRequest of the forwarder (whoever it belonged to) up to and including
 * its own, matched by signer and nonce. `requests` are in batch order.
 */
export function splitBatchLogs(
  logs: RawLog[],
  forwarder: string,
  requests: Array<{ from: string; nonce: bigint }>,
): BatchItemOutcome[] {
  const fwd = forwarder.toLowerCase();
  const byKey = new Map<string, number>();
  requests.forEach((r, i) => byKey.set(`${r.from.toLowerCase()}:${r.nonce}`, i));
  const out: BatchItemOutcome[] = requests.map(() => ({ kind: "skipped" }));
  let start = 0;
  for (let i = 0; i < logs.length; i++) {
    const l = logs[i];
    if (l.address.toLowerCase() !== fwd || l.topics[0]?.toLowerCase() !== EXECUTED_FORWARD_REQUEST_TOPIC)
      continue;
    const signer = "0x" + l.topics[1].slice(26).toLowerCase();
    const body = l.data.slice(2);
    const nonce = BigInt("0x" + body.slice(0, 64));
    const success = BigInt("0x" + body.slice(64, 128)) !== 0n;
    const at = byKey.get(`${signer}:${nonce}`);
    if (at !== undefined) out[at] = { kind: "executed", success, logs: logs.slice(start, i + 1) };
    start = i + 1;
  }
  return out;
}
