/**
 * A log as the node's JSON-RPC returns it (eth_getLogs, a receipt's logs): hex strings, not decoded.
 * In a module of its own because both ends of the sender use it: batch.ts splits a receipt's logs per
 * request and send/types.ts carries them in a landed write; batch.ts importing it from the sender made
 * an import cycle (sender → batch → sender).
 */
export interface RawLog {
  address: string;
  topics: string[];
  data: string;
  blockNumber: string;
  transactionHash: string;
  logIndex: string;
}
