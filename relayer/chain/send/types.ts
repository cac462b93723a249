/** The shapes the path-A sender's modules share (relayer/chain/sender.ts orchestrates them). */
import type { SignedForwardRequest } from "../batch";
import type { RawLog } from "../rawLog";

export interface ForwardSigner {
  signForwardRequest(
    apiKey: string,
    req: { to: string; data: string; value?: bigint; gas: bigint; nonce: bigint; deadline: number },
    domain: { name: string; version: string; chainId: number; verifyingContract: string },
  ): Promise<SignedForwardRequest> | SignedForwardRequest;
}

export interface WriteRequest {
  apiKey: string;
  /** Address the request is signed as. */
  principal: string;
  kind: "account" | "usage";
  /** Registry calldata. */
  data: string;
}

export type { RawLog };

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

/**
 * A signed forward request exactly as it is (or was) sent, kept durably before it is broadcast
 * (relayer/idempotency.ts): enough to send it again unchanged and to find its execution on chain.
 */
export interface RecordedForwardRequest {
  from: string;
  to: string;
  value: string;
  gas: string;
  nonce: string;
  deadline: number;
  data: string;
  signature: string;
  /** A block no later than the first one the request can be mined in: where the search for it starts. */
  fromBlock: number;
}

/**
 * Where one write of an Idempotency-Key request keeps its forward request across a crash. Without one
 * (no Idempotency-Key) a write is signed and sent as before.
 */
export interface WriteJournal {
  /** The request an earlier attempt of this write recorded (and may have sent), if any. */
  recorded(): RecordedForwardRequest | undefined;
  /** Durably records the request about to be sent; throws when this attempt lost its claim. */
  record(r: RecordedForwardRequest): Promise<void>;
  /**
   * The write's fate is known (landed, reverted, or provably never executable). `replayed`: it landed
   * through an earlier attempt's request, whose receipt gives the answer.
   */
  settled(replayed: boolean): void;
}
