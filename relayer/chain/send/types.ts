/** The shapes the path-A sender's modules share (relayer/chain/sender.ts orchestrates them). */
import type { SignedForwardRequest } from "../batch";

export interface ForwardSigner {
  signForwardRequest(
    apiKey: string,
    req: { to: string; data: string; value?: bigint; gas: bigint; nonce: bigint; deadline: number },
    domain: { name: string; version: string; chainId: number; verifyingContract: string },
  ): Promise<SignedForwardRequestLike> | SignedForwardRequestLike;
}

interface SignedForwardRequestLike {
  from: string;
  to: string;
  value: bigint;
  gas: bigint;
  deadline: number | bigint;
  data: string;
  signature: string;
}

export interface WriteRequest {
  apiKey: string;
  /** Address the request is signed as. */
  principal: string;
  kind: "account" | "usage";
  /** Registry calldata. */
  data: string;
}

export interface RawLog {
  address: string;
  topics: string[];
  data: string;
  blockNumber: string;
  transactionHash: string;
  logIndex: string;
}

export interface WriteResult {
  txHash: string;
  blockNumber: number;
  logs: RawLog[];
  gasUsed: bigint;
}

/**
 * A write that landed, with the forward request that carried it: the signer and the forwarder nonce it
 * consumed identify it on chain (the forwarder's ExecutedForwardRequest event), unlike the transaction
 * hash, which every request of a batch shares. Billing charges per request with it.
 */
export interface LandedWrite extends WriteResult {
  forwardRequest: { signer: string; nonce: bigint };
}

/** What happened to one forward request of a mined transaction. */
export type Outcome =
  | { kind: "ok"; result: WriteResult }
  /** The forwarder ran the call and it reverted: the nonce is used. */
  | { kind: "reverted"; txHash: string }
  /** The forwarder did not run the request (invalid, or the whole transaction reverted): nonce unused. */
  | { kind: "skipped"; txHash: string };

/** A signed request waiting for (or in) a transaction. */
export interface Pending {
  queuedAt: number;
  signed: SignedForwardRequest;
  nonce: bigint;
  settle: (o: Outcome | { error: unknown }) => void;
}
