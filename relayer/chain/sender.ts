/**
 * Path A (design §4, docs/background.md): a registry call signed by the principal (usage key, or the
 * service-managed owner for the account key) and submitted through the ERC-2771 forwarder by one of the
 * relayer instance's gas wallets. This module orchestrates; each step has its own module in send/:
 *
 *  - send/simulate.ts: eth_simulateV1 / eth_estimateGas of the call as the forwarder makes it, which
 *    decodes a refusal into a typed error without spending gas;
 *  - send/nonces.ts: the principals' forwarder nonces (cached) and the gas wallets' pending counts;
 *  - send/queue.ts: the batch queue and the forwarder transaction carrying a batch;
 *  - send/walletPool.ts: which gas wallet sends next (least loaded, skipping wallets that cannot pay);
 *  - send/broadcast.ts: signing and sending in a wallet's nonce order (sync sends, fee retries);
 *  - send/receipts.ts: waiting for and reading receipts;
 *  - send/balanceMonitor.ts: the wallets' balances and the low-balance warning.
 *
 * Per principal, writes are serialized: the forwarder nonce is sequential per signer, so two requests
 * of one principal mined out of order would fail. Whenever a send slot is free (at most
 * `sendConcurrency` transactions in flight, each from its own gas wallet) the next transaction takes up
 * to `maxBatchSize` queued requests. Transient RPC failures are retried; when the chain stays
 * unreachable the caller gets 503.
 */
import type { AbstractSigner, JsonRpcProvider } from "ethers";
import type { Logger } from "pino";
import { ApiError } from "../errors";
import { KeyedMutex } from "../mutex";
import { parseRegistryLog } from "./abi";
import type { SignedForwardRequest } from "./batch";
import { DEFAULT_MAX_PRIORITY_FEE_WEI, FeeOracle } from "./fees";
import { BalanceMonitor } from "./send/balanceMonitor";
import { Broadcaster, isUnfunded, unfunded } from "./send/broadcast";
import { ForwarderNonces } from "./send/nonces";
import { BatchQueue, DEFAULT_MAX_BATCH, settleFromReceipt, transactionFor } from "./send/queue";
import { waitForReceipt, type Receipt } from "./send/receipts";
import { reconcile, type Reconciled } from "./send/reconcile";
import { requestGasFor, Simulator } from "./send/simulate";
import type {
  ForwardSigner,
  LandedWrite,
  Outcome,
  Pending,
  RawLog,
  RecordedForwardRequest,
  WriteJournal,
  WriteRequest,
  WriteResult,
} from "./send/types";
import { WalletPool, type GasWallet } from "./send/walletPool";

export { encodeExecute } from "./batch";
export { isMethodUnsupported, pendingHash } from "./send/nodeErrors";
export { requestGasFor, simulatedCall } from "./send/simulate";
export type {
  ForwardSigner,
  LandedWrite,
  RecordedForwardRequest,
  WriteJournal,
  WriteResult,
} from "./send/types";

export interface SenderOptions {
  provider: JsonRpcProvider;
  signer: ForwardSigner;
  gasSigners: AbstractSigner[];
  chainId: number;
  registry: string;
  forwarder: string;
  receiptTimeoutMs: number;
  rpcTimeoutMs: number;
  onTransient?: (err: unknown) => void;
  onSent?: (wallet: number) => void;
  /** eth_sendRawTransactionSync: "auto" (default) or "off" (send/broadcast.ts). */
  syncSend?: "auto" | "off";
  /** Overrides SYNC_SEND_SLOW_MS (tests on a loaded machine; a node that mines on arrival answers in ms). */
  syncSendSlowMs?: number;
  /** Most forward requests in one transaction (default DEFAULT_MAX_BATCH; 1 = never batch). */
  maxBatchSize?: number;
  /**
   * Most path-A transactions in flight at once, each from a different gas wallet (default: every gas
   * wallet while sends are asynchronous; DEFAULT_SYNC_SEND_CONCURRENCY while sync sends are used, since a
   * chain that mines on arrival mines one transaction at a time whichever wallet sent it).
   */
  sendConcurrency?: number;
  /** How writes are simulated: "auto" (default: eth_simulateV1 where available) or "estimateGas". */
  simulation?: "auto" | "estimateGas";
  /**
   * Called synchronously with every successful path-A transaction's receipt (all its logs) and its index
   * in the block, before any write it carried is answered.
   */
  onMined?: (result: WriteResult, transactionIndex: number | null) => void;
  /** Called with the number of requests of every transaction sent (metrics, tests). */
  onBatch?: (size: number) => void;
  /** Highest tip (wei) paid on EIP-1559 chains (default DEFAULT_MAX_PRIORITY_FEE_WEI; fees.ts). */
  maxPriorityFeePerGas?: bigint;
  /** Low-balance threshold (wei); default: send/balanceMonitor.ts. */
  lowBalanceWei?: bigint;
  /** Time between two balance readings (default DEFAULT_BALANCE_POLL_MS). */
  balancePollMs?: number;
  /** Where the low-balance warnings go (default: nowhere). */
  logger?: Pick<Logger, "warn" | "info">;
  /** Named in the low-balance warnings. */
  instanceId?: string;
}

export const DEFAULT_SYNC_SEND_CONCURRENCY = 1;

/** No gas wallet can pay (WalletPool.pick found none). */
const unfundedNoWallet = () => unfunded("every gas wallet");
const DEADLINE_SECONDS = 600;
const SILENT = { warn: () => undefined, info: () => undefined };

/** How far below the newest block seen the search for a recorded request's execution starts. */
const RECORD_SEARCH_MARGIN_BLOCKS = 128;

/** Attempts after a stale forwarder nonce before write() gives up with 409 write_reverted. */
const STALE_NONCE_RETRIES = 4;

export class Sender {
  private readonly pool = new WalletPool();
  private readonly principals = new KeyedMutex();
  private readonly forwarderNonces: ForwarderNonces;
  private readonly simulator: Simulator;
  private readonly broadcaster: Broadcaster;
  /** The gas wallets' balance readings: the relayer starts them, /health and the metrics read them. */
  readonly balances: BalanceMonitor;
  private readonly queue: BatchQueue;
  private inFlight = 0;
  /** The newest block a receipt was seen in: a lower bound for where a request about to be sent lands. */
  private seenBlock: number | null = null;

  constructor(private readonly o: SenderOptions) {
    const fees = new FeeOracle({
      provider: o.provider,
      maxPriorityFeePerGas: o.maxPriorityFeePerGas ?? DEFAULT_MAX_PRIORITY_FEE_WEI,
      onTransient: o.onTransient,
    });
    this.forwarderNonces = new ForwarderNonces(o.provider, o.forwarder, o.onTransient);
    this.simulator = new Simulator({
      provider: o.provider,
      registry: o.registry,
      forwarder: o.forwarder,
      mode: o.simulation,
      onTransient: o.onTransient,
    });
    this.broadcaster = new Broadcaster({
      provider: o.provider,
      chainId: o.chainId,
      forwarder: o.forwarder,
      fees,
      syncSend: o.syncSend,
      syncSendSlowMs: o.syncSendSlowMs,
      onTransient: o.onTransient,
      onSent: o.onSent,
    });
    this.balances = new BalanceMonitor({
      provider: o.provider,
      pool: this.pool,
      fees,
      lowBalanceWei: o.lowBalanceWei,
      pollMs: o.balancePollMs,
      logger: o.logger ?? SILENT,
      instanceId: o.instanceId,
      onTransient: o.onTransient,
    });
    this.queue = new BatchQueue(Math.max(1, o.maxBatchSize ?? DEFAULT_MAX_BATCH));
  }

  /** Whether writes are currently sent with eth_sendRawTransactionSync (false after a fallback). */
  usesSyncSend(): boolean {
    return this.broadcaster.usesSyncSend();
  }

  async init(): Promise<void> {
    await this.pool.add(this.o.gasSigners);
  }

  async stop(): Promise<void> {
    await this.balances.stop();
  }

  /** After a chain reset or reorganisation: every cached nonce may be wrong; re-read them from the chain. */
  resetNonces(): void {
    this.pool.resetNonces();
    this.forwarderNonces.clear();
    // The newest block seen may have been replaced: ask the chain again for where a search starts.
    this.seenBlock = null;
  }

  provider(): JsonRpcProvider {
    return this.o.provider;
  }

  gasWalletAddresses(): string[] {
    return this.pool.addresses();
  }

  /**
   * Simulates, signs, submits and waits for the receipt of one registry call. With a journal (an
   * Idempotency-Key request) the signed request is recorded before it is sent, and a request an earlier
   * attempt recorded is reconciled with the chain first (send/reconcile.ts): its result if it executed,
   * the same request again if it still can, a new one only once it provably never will.
   */
  async write(req: WriteRequest, journal?: WriteJournal): Promise<LandedWrite> {
    return this.principals.run(req.principal.toLowerCase(), async () => {
      for (let attempt = 0; ; attempt++) {
        try {
          return await this.writeOnce(req, journal);
        } catch (err) {
          // A stale forwarder nonce (e.g. the principal also wrote through another relayer instance)
          // shows up as a failed receipt or an invalid-signer refusal: resync and retry. Several
          // instances writing for one principal at once can collide again, so a few attempts, each
          // after a random pause that grows, desynchronise them (nothing was done or charged for a
          // skipped request).
          this.forwarderNonces.forget(req.principal);
          if (
            attempt < STALE_NONCE_RETRIES &&
            err instanceof ApiError &&
            err.code === "write_reverted" &&
            err.details?.reason === "stale_nonce"
          ) {
            await new Promise((r) => setTimeout(r, Math.random() * 50 * (attempt + 1)));
            continue;
          }
          throw err;
        }
      }
    });
  }

  /**
   * A forward request the principal signed itself (the relayer never had its key): checked against the
   * forwarder's current nonce, simulated like any write, then queued and submitted exactly as the
   * relayer's own signed requests are. Not retried on a stale nonce: only the signer can sign anew.
   */
  async writeSigned(
    signed: SignedForwardRequest & { nonce: bigint },
    kind: "usage",
    journal?: WriteJournal,
  ): Promise<LandedWrite> {
    const principal = signed.from;
    const req: WriteRequest = { apiKey: "", principal, kind, data: signed.data };
    return this.principals.run(principal.toLowerCase(), async () => {
      this.queue.startPreparing();
      const earlier = journal?.recorded();
      let executed: Extract<Reconciled, { kind: "executed" }> | null = null;
      try {
        if (earlier) {
          // The same signed request as an earlier attempt (the fingerprint covers the body).
          const state = await this.reconcileRecorded(earlier);
          if (state.kind === "dead") {
            journal!.settled(false);
            throw new ApiError(
              "forward_nonce_mismatch",
              "The forward request can no longer execute (its nonce was used by another request, or its deadline passed); sign a new one.",
              { details: { nonce: signed.nonce.toString(), reason: state.reason } },
            );
          }
          if (state.kind === "executed") executed = state;
        } else {
          await this.checkSigned(signed, req);
          await journal?.record(await this.recordOf(signed, signed.nonce));
        }
      } catch (err) {
        this.queue.donePreparing();
        this.pump();
        throw err;
      }
      if (executed) {
        this.queue.donePreparing();
        this.pump();
        return this.concludeExecuted(req, earlier!, executed, journal!);
      }
      const outcome = await this.enqueue(signed, signed.nonce);
      try {
        return await this.conclude(req, principal, signed.nonce, outcome, journal);
      } catch (err) {
        this.forwarderNonces.forget(principal);
        throw err;
      }
    });
  }

  /** A client-signed request before it is queued: the forwarder's next nonce, and enough gas. */
  private async checkSigned(signed: SignedForwardRequest & { nonce: bigint }, req: WriteRequest) {
    const principal = signed.from;
    let current = await this.forwarderNonces.get(principal);
    if (current !== signed.nonce) {
      // The cache may be behind another relayer instance's writes: ask the chain before refusing.
      this.forwarderNonces.forget(principal);
      current = await this.forwarderNonces.get(principal);
    }
    if (current !== signed.nonce) {
      throw new ApiError(
        "forward_nonce_mismatch",
        `The forward request's nonce is ${signed.nonce}; the forwarder expects ${current} from ${principal} (already used, or not the next one).`,
        { details: { expected_nonce: current.toString(), nonce: signed.nonce.toString() } },
      );
    }
    const innerGas = await this.simulator.simulate(req);
    if (signed.gas < innerGas) {
      throw new ApiError(
        "forward_call_not_allowed",
        `The forward request's gas (${signed.gas}) is below what the call needs (${innerGas}).`,
        { details: { reason: "gas_too_low", gas_needed: innerGas.toString() } },
      );
    }
  }

  /** The forwarder nonce the principal's next request must carry (cached; see send/nonces.ts). */
  nextForwarderNonce(principal: string): Promise<bigint> {
    return this.principals.run(principal.toLowerCase(), () => this.forwarderNonces.get(principal));
  }

  /** Simulates a registry call as `principal` through the forwarder: its gas, or the typed refusal. */
  simulateAs(principal: string, kind: "usage", data: string): Promise<bigint> {
    return this.simulator.simulate({ apiKey: "", principal, kind, data });
  }

  private async writeOnce(req: WriteRequest, journal?: WriteJournal): Promise<LandedWrite> {
    this.queue.startPreparing();
    const earlier = journal?.recorded();
    let prepared: { signed: SignedForwardRequest; nonce: bigint } | null = null;
    let executed: Extract<Reconciled, { kind: "executed" }> | null = null;
    try {
      const state = earlier ? await this.reconcileRecorded(earlier) : null;
      if (earlier && state && state.kind !== "dead" && !sameWrite(earlier, req))
        throw notRebuildable(earlier, state);
      if (state?.kind === "executed") executed = state;
      else if (earlier && state?.kind === "pending") {
        // Sent again unchanged: whichever copy is mined first executes, the others are skipped.
        prepared = { signed: fromRecord(earlier), nonce: BigInt(earlier.nonce) };
      } else {
        // Nothing recorded yet, or the recorded request is dead: its nonce may be cached as next.
        if (earlier) this.forwarderNonces.forget(req.principal);
        prepared = await this.prepare(req);
        await journal?.record(await this.recordOf(prepared.signed, prepared.nonce));
      }
    } catch (err) {
      this.queue.donePreparing();
      this.pump(); // queued requests may have been held for this one
      throw err;
    }
    if (executed) {
      this.queue.donePreparing();
      this.pump();
      return this.concludeExecuted(req, earlier!, executed, journal!);
    }
    const { signed, nonce } = prepared!;
    const outcome = await this.enqueue(signed, nonce);
    return this.conclude(req, signed.from, nonce, outcome, journal);
  }

  private reconcileRecorded(r: RecordedForwardRequest) {
    return reconcile(this.o.provider, this.o.forwarder, r, this.o.onTransient);
  }

  /** An earlier attempt's request executed: its receipt is the write's result, never a second write. */
  private async concludeExecuted(
    req: WriteRequest,
    r: RecordedForwardRequest,
    state: { success: boolean; result: WriteResult },
    journal: WriteJournal,
  ): Promise<LandedWrite> {
    const nonce = BigInt(r.nonce);
    // Another process used the nonce: whatever this one cached for the principal is behind.
    this.forwarderNonces.forget(req.principal);
    if (!state.success) {
      journal.settled(false);
      return this.conclude(req, r.from, nonce, { kind: "reverted", txHash: state.result.txHash });
    }
    journal.settled(true);
    return { ...state.result, forwardRequest: { signer: r.from.toLowerCase(), nonce } };
  }

  /** The durable form of a request about to be sent, with the block its search starts from. */
  private async recordOf(signed: SignedForwardRequest, nonce: bigint): Promise<RecordedForwardRequest> {
    const head =
      this.seenBlock ?? Number(BigInt((await this.o.provider.send("eth_blockNumber", [])) as string));
    // A margin below it: a reorganisation deeper than this between recording and landing would hide
    // the request's execution from the search (reconcile.ts).
    const fromBlock = Math.max(0, head - RECORD_SEARCH_MARGIN_BLOCKS);
    return {
      from: signed.from,
      to: signed.to,
      value: signed.value.toString(),
      gas: signed.gas.toString(),
      nonce: nonce.toString(),
      deadline: Number(signed.deadline),
      data: signed.data,
      signature: signed.signature,
      fromBlock,
    };
  }

  /** Queues a prepared request (it stops counting as being prepared) and waits for its transaction. */
  private enqueue(signed: SignedForwardRequest, nonce: bigint): Promise<Outcome> {
    return new Promise<Outcome>((resolve, reject) => {
      this.queue.donePreparing({
        queuedAt: performance.now(),
        signed,
        nonce,
        settle: (o) => ("error" in o ? reject(o.error) : resolve(o)),
      });
      this.pump();
    });
  }

  private async prepare(req: WriteRequest): Promise<{ signed: SignedForwardRequest; nonce: bigint }> {
    const innerGas = await this.simulator.simulate(req);
    const nonce = await this.forwarderNonces.get(req.principal);
    const signed = await this.o.signer.signForwardRequest(
      req.apiKey,
      {
        to: this.o.registry,
        data: req.data,
        value: 0n,
        gas: requestGasFor(innerGas),
        nonce,
        deadline: Math.floor(Date.now() / 1000) + DEADLINE_SECONDS,
      },
      { name: "SigilForwarder", version: "1", chainId: this.o.chainId, verifyingContract: this.o.forwarder },
    );
    return { signed, nonce };
  }

  private async conclude(
    req: WriteRequest,
    signer: string,
    nonce: bigint,
    outcome: Outcome,
    journal?: WriteJournal,
  ): Promise<LandedWrite> {
    if (outcome.kind === "ok") {
      this.forwarderNonces.consumed(req.principal, nonce);
      journal?.settled(false);
      return { ...outcome.result, forwardRequest: { signer: signer.toLowerCase(), nonce } };
    }
    // The forwarder ran the request and the call reverted: its nonce is used, nothing was written.
    // (Skipped: not run at all; an idempotent write stays unsettled and is reconciled on its retry.)
    if (outcome.kind === "reverted") journal?.settled(false);
    // Mined but not done: something changed between simulation and inclusion. Say what, if we can.
    let again: ApiError | null = null;
    try {
      await this.simulator.simulate(req);
    } catch (err) {
      if (err instanceof ApiError) again = err;
    }
    if (again) throw again;
    throw new ApiError("write_reverted", "The transaction reverted on chain; retry.", {
      details: {
        tx_hash: outcome.txHash,
        // Not run by the forwarder at all: most likely a stale forwarder nonce (write() retries).
        reason: outcome.kind === "skipped" ? "stale_nonce" : "reverted",
      },
    });
  }

  /**
   * One plain call from a gas wallet to `to` (not a registry write: the audit log's anchors,
   * relayer/audit/anchor.ts), through the same wallets, nonce order, fees and receipt wait as path-A
   * transactions. Resolves with the mined receipt; a reverted one is an error.
   */
  async sendCall(to: string, data: string, gasLimit: bigint): Promise<WriteResult> {
    const wallet = this.pool.pick();
    if (wallet === null) throw unfundedNoWallet();
    wallet.load++;
    try {
      const sent = await this.broadcaster.broadcast(wallet, data, gasLimit, to);
      let receipt: Receipt;
      try {
        receipt = sent.receipt ?? (await waitForReceipt(this.o, sent.hash));
      } catch (err) {
        wallet.nonce = null; // as in sendBatch: the wallet's next nonce is unknown
        throw err;
      }
      if (receipt.status !== 1) throw new Error(`the call to ${to} reverted (${sent.hash})`);
      return receipt.result;
    } finally {
      wallet.load--;
    }
  }

  /**
   * Starts transactions for queued requests while send slots are free. A free slot never waits for work
   * that does not exist yet; it does wait for writes already being prepared (simulated and signed: one
   * RPC away) unless the batch is full, so that they share the transaction (send/queue.ts shouldHold;
   * on a busy relayer batches become about twice as large, measured on bench/relayer.bench.ts:
   * +10-25% writes/s).
   */
  private pump(): void {
    while (this.queue.length > 0 && this.inFlight < this.concurrency()) {
      if (this.queue.shouldHold(() => this.pump())) return;
      const batch = this.queue.takeBatch();
      const wallet = this.pool.pick()!;
      this.inFlight++;
      wallet.load++;
      void this.sendBatch(wallet, batch).finally(() => {
        this.inFlight--;
        this.pump();
      });
    }
  }

  private concurrency(): number {
    const wallets = this.pool.size;
    const n = this.o.sendConcurrency ?? (this.usesSyncSend() ? DEFAULT_SYNC_SEND_CONCURRENCY : wallets);
    return Math.max(1, Math.min(n, wallets));
  }

  /**
   * One transaction for `batch`; settles every request of it (never throws). A wallet the node says
   * cannot pay is marked dry and the same transaction goes to another wallet that can: the node refused
   * it, so nothing was sent and no nonce was spent.
   */
  private async sendBatch(first: GasWallet, batch: Pending[]): Promise<void> {
    let receipt: Receipt;
    let wallet = first;
    const tried = new Set<GasWallet>();
    try {
      this.o.onBatch?.(batch.length);
      for (;;) {
        tried.add(wallet);
        // The refund receiver is part of the batch calldata: built per wallet.
        const { data, gasLimit } = transactionFor(batch, wallet.address);
        let sent: Awaited<ReturnType<Broadcaster["broadcast"]>>;
        try {
          sent = await this.broadcaster.broadcast(wallet, data, gasLimit);
        } catch (err) {
          if (!isUnfunded(err)) throw err;
          this.pool.markDry(wallet);
          if (!this.pool.hasPayingWalletBesides(tried)) throw err;
          const next = this.pool.pick(tried)!;
          wallet.load--;
          next.load++;
          wallet = next;
          continue;
        }
        try {
          receipt = sent.receipt ?? (await waitForReceipt(this.o, sent.hash));
        } catch (err) {
          // Not confirmed: the node may have dropped or parked the transaction, so the wallet's next
          // nonce is unknown. Re-read it before the wallet sends again rather than queue behind a gap.
          wallet.nonce = null;
          throw err;
        }
        break;
      }
    } catch (error) {
      for (const p of batch) p.settle({ error });
      return;
    } finally {
      wallet.load--;
    }
    // Before any caller hears of it: the permission cache may apply this transaction's events right
    // away (read-your-writes without a log query; PermissionCache.applyOwnTransaction).
    this.seenBlock = Math.max(this.seenBlock ?? 0, receipt.result.blockNumber);
    if (receipt.status === 1) this.o.onMined?.(receipt.result, receipt.transactionIndex);
    settleFromReceipt(batch, receipt, this.o.forwarder);
  }
}

/** Decodes the registry events of a receipt (other contracts' logs are skipped). */
export function registryEvents(logs: RawLog[], registry: string) {
  const out = [];
  for (const l of logs) {
    if (l.address.toLowerCase() !== registry.toLowerCase()) continue;
    const parsed = parseRegistryLog(l.topics, l.data);
    if (parsed) out.push(parsed);
  }
  return out;
}

/** A recorded request back in the shape the batch encoder sends. */
function fromRecord(r: RecordedForwardRequest): SignedForwardRequest {
  return {
    from: r.from,
    to: r.to,
    value: BigInt(r.value),
    gas: BigInt(r.gas),
    deadline: r.deadline,
    data: r.data,
    signature: r.signature,
  };
}

/**
 * Whether a recorded request carries the write this attempt makes. Not so when the route chose a
 * secret at random (new_account, a new usage key): the earlier attempt's write is for a key that was
 * never stored, so its answer cannot be given again.
 */
function sameWrite(r: RecordedForwardRequest, req: WriteRequest): boolean {
  return (
    r.from.toLowerCase() === req.principal.toLowerCase() && r.data.toLowerCase() === req.data.toLowerCase()
  );
}

/**
 * An earlier attempt's write for a secret that is gone: it still may land (its deadline not passed) or
 * it has. Either way this attempt writes nothing; the claim stays, so every retry answers the same.
 */
function notRebuildable(r: RecordedForwardRequest, state: Reconciled): ApiError {
  if (state.kind === "pending")
    return new ApiError(
      "idempotency_key_in_flight",
      "An earlier attempt with this Idempotency-Key sent a write that may still land until its deadline; retry after it.",
      { retryAfter: Math.max(1, r.deadline - Math.floor(Date.now() / 1000) + 1) },
    );
  return new ApiError(
    "idempotency_key_reused",
    "An earlier attempt with this Idempotency-Key made its write before a crash, and its answer held a new key that was never stored, so it cannot be given again; use a new Idempotency-Key.",
    {
      details: {
        reason: "answer_lost",
        tx_hash: state.kind === "executed" ? state.result.txHash : null,
      },
    },
  );
}
