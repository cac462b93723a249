/**
 * Path A (DESIGN.md section 4): a registry call signed by the principal (usage key, or the
 * service-managed owner for the account key) and submitted through the ERC-2771 forwarder by one of the
 * relayer's gas wallets.
 *
 *  - Simulate first: eth_estimateGas of the registry call *as the forwarder would make it* (from the
 *    forwarder, with the principal appended to the calldata). The forwarder swallows the registry's
 *    revert reason (it reverts with FailedCall), so this is how a refusal is decoded into a typed error
 *    without spending gas.
 *  - Per principal, writes are serialized: the forwarder nonce is sequential per signer, so two requests
 *    of one principal mined out of order would fail.
 *  - Per gas wallet, nonces are assigned and broadcast strictly in order under a lock (automining chains
 *    refuse gaps); after any doubtful failure the wallet resynchronises its nonce from the chain.
 *  - Batching: signed requests wait in one queue; whenever a send slot is free (at most
 *    `sendConcurrency` transactions in flight, each from its own gas wallet) the next one takes up to
 *    `maxBatchSize` of them into one transaction: `execute` for one, else `executeBatch` with the gas
 *    wallet as refund receiver (not atomic: see batch.ts). No timer: a request that finds a free slot
 *    goes at once, the ones that arrive while every slot is busy go together in the next transaction.
 *    Each request's outcome and logs are read from the ExecutedForwardRequest events of the receipt.
 *  - Transient RPC failures are retried; when the chain stays unreachable the caller gets 503.
 */
import { keccak256, type AbstractSigner, type JsonRpcProvider } from "ethers";
import { ApiError } from "../errors";
import { KeyedMutex, Mutex } from "../mutex";
import { forwarderInterface, parseRegistryLog } from "./abi";
import { encodeExecute, encodeExecuteBatch, splitBatchLogs, type SignedForwardRequest } from "./batch";
import { bumpLegacy, DEFAULT_MAX_PRIORITY_FEE_WEI, FeeOracle } from "./fees";
import { mapRevert } from "./registryErrors";
import { chainUnavailable, isTransient, revertData, sleep, withRetry } from "./rpc";

export { encodeExecute, encodeExecuteBatch } from "./batch";

export interface ForwardSigner {
  signForwardRequest(
    apiKey: string,
    req: { to: string; data: string; value?: bigint; gas: bigint; nonce: bigint; deadline: number },
    domain: { name: string; version: string; chainId: number; verifyingContract: string },
  ):
    | Promise<{
        from: string;
        to: string;
        value: bigint;
        gas: bigint;
        deadline: number | bigint;
        data: string;
        signature: string;
      }>
    | {
        from: string;
        to: string;
        value: bigint;
        gas: bigint;
        deadline: number | bigint;
        data: string;
        signature: string;
      };
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

interface GasWallet {
  index: number;
  address: string;
  signer: AbstractSigner;
  nonce: number | null; // null = must resynchronise from the chain before the next send
  lock: Mutex;
  load: number;
}

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
  /**
   * Send with eth_sendRawTransactionSync (EIP-7966: the node answers with the receipt, saving the
   * receipt polls). "auto" (default) tries it and falls back to send + poll for good when the node does
   * not know the method, or when a sync send takes longer than SYNC_SEND_SLOW_MS (the chain mines on an
   * interval: holding a gas wallet's nonce lock for a whole block would serialise that wallet). "off"
   * never tries it.
   */
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
  /**
   * How writes are simulated before signing: "auto" (default) uses eth_simulateV1 where the node has it
   * (one execution; it reports the gas used and the revert data) and eth_estimateGas otherwise;
   * "estimateGas" always estimates.
   */
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
}

/** A signed request waiting for (or in) a transaction. */
interface Pending {
  queuedAt: number;
  signed: SignedForwardRequest;
  nonce: bigint;
  settle: (o: Outcome | { error: unknown }) => void;
}

type Outcome =
  | { kind: "ok"; result: WriteResult }
  /** The forwarder ran the call and it reverted: the nonce is used. */
  | { kind: "reverted"; txHash: string }
  /** The forwarder did not run the request (invalid, or the whole transaction reverted): nonce unused. */
  | { kind: "skipped"; txHash: string };

const DEADLINE_SECONDS = 600;
/** Gas a forward request carries for a call that simulated at `innerGas` (a margin for state changes). */
export function requestGasFor(innerGas: bigint): bigint {
  return (innerGas * 5n) / 4n + 10_000n;
}
/** A sync send slower than this means the node does not mine on arrival: stop using sync sends. */
export const SYNC_SEND_SLOW_MS = 500;
/** Looked up once: encoding by name makes ethers search the ABI (and hash signatures) on every write. */
const NONCES = forwarderInterface.getFunction("nonces")!;
/** Measured on anvil with 8 concurrent principals (bench/relayer.bench.ts): see docs/configuration.md. */
export const DEFAULT_MAX_BATCH = 16;
export const DEFAULT_SYNC_SEND_CONCURRENCY = 1;
/**
 * A batch stays well below the block gas limit (30M on anvil and most chains) and the per-transaction
 * cap of EIP-7825 (2^24 = 16.8M).
 */
export const MAX_BATCH_GAS = 8_000_000n;
/**
 * The forwarder's own work per request of a batch besides the call and calldata: signature recovery,
 * the target's isTrustedForwarder, the nonce update (a cold slot, 22.1k if it was zero), the event.
 * Measured at ~40k; the margin is cheap (unused gas is not paid for).
 */
const BATCH_PER_REQUEST_GAS = 60_000n;
/** Intrinsic transaction gas plus the batch loop's own work. */
const BATCH_BASE_GAS = 60_000n;
/** Longest a queued request is held for writes being prepared (pump); normally one simulation, ~1 ms. */
const HOLD_MAX_MS = 15;

export class Sender {
  private readonly wallets: GasWallet[] = [];
  private readonly principals = new KeyedMutex();
  private readonly forwarderNonces = new Map<string, bigint>();
  private readonly fees: FeeOracle;
  private rr = 0;
  private syncSend: boolean;
  private readonly queue: Pending[] = [];
  private inFlight = 0;
  /** Writes being simulated and signed (they will be queued in a moment). */
  private preparing = 0;
  private holdTimer: ReturnType<typeof setTimeout> | null = null;
  /**
   * Simulate with eth_simulateV1 (one execution, and it reports the gas used) rather than eth_estimateGas
   * (a search over several executions); off for good once the node does not support it.
   */
  private simulateV1: boolean;

  constructor(private readonly o: SenderOptions) {
    this.syncSend = o.syncSend !== "off";
    this.simulateV1 = o.simulation !== "estimateGas";
    this.fees = new FeeOracle({
      provider: o.provider,
      maxPriorityFeePerGas: o.maxPriorityFeePerGas ?? DEFAULT_MAX_PRIORITY_FEE_WEI,
      onTransient: o.onTransient,
    });
  }

  /** Whether writes are currently sent with eth_sendRawTransactionSync (false after a fallback). */
  usesSyncSend(): boolean {
    return this.syncSend;
  }

  async init(): Promise<void> {
    for (let i = 0; i < this.o.gasSigners.length; i++) {
      const signer = this.o.gasSigners[i];
      this.wallets.push({
        index: i,
        address: await signer.getAddress(),
        signer,
        nonce: null,
        lock: new Mutex(),
        load: 0,
      });
    }
  }

  /** After a chain reset or reorganisation: every cached nonce may be wrong; re-read them from the chain. */
  resetNonces(): void {
    for (const w of this.wallets) w.nonce = null;
    this.forwarderNonces.clear();
  }

  provider(): JsonRpcProvider {
    return this.o.provider;
  }

  gasWalletAddresses(): string[] {
    return this.wallets.map((w) => w.address);
  }

  /** Simulates, signs, submits and waits for the receipt of one registry call. */
  async write(req: WriteRequest): Promise<LandedWrite> {
    return this.principals.run(req.principal.toLowerCase(), async () => {
      for (let attempt = 0; ; attempt++) {
        try {
          return await this.writeOnce(req);
        } catch (err) {
          // A stale forwarder nonce (e.g. the principal also wrote through another relayer instance)
          // shows up as a failed receipt or an invalid-signer refusal: resync and retry once.
          this.forwarderNonces.delete(req.principal.toLowerCase());
          if (
            attempt === 0 &&
            err instanceof ApiError &&
            err.code === "write_reverted" &&
            err.details?.reason === "stale_nonce"
          )
            continue;
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
  async writeSigned(signed: SignedForwardRequest & { nonce: bigint }, kind: "usage"): Promise<LandedWrite> {
    const principal = signed.from;
    const req: WriteRequest = { apiKey: "", principal, kind, data: signed.data };
    return this.principals.run(principal.toLowerCase(), async () => {
      this.preparing++;
      try {
        let current = await this.forwarderNonce(principal);
        if (current !== signed.nonce) {
          // The cache may be behind another relayer instance's writes: ask the chain before refusing.
          this.forwarderNonces.delete(principal.toLowerCase());
          current = await this.forwarderNonce(principal);
        }
        if (current !== signed.nonce) {
          throw new ApiError(
            409,
            "forward_nonce_mismatch",
            `The forward request's nonce is ${signed.nonce}; the forwarder expects ${current} from ${principal} (already used, or not the next one).`,
            { details: { expected_nonce: current.toString(), nonce: signed.nonce.toString() } },
          );
        }
        const innerGas = await this.simulate(req);
        if (signed.gas < innerGas) {
          throw new ApiError(
            400,
            "forward_call_not_allowed",
            `The forward request's gas (${signed.gas}) is below what the call needs (${innerGas}).`,
            { details: { reason: "gas_too_low", gas_needed: innerGas.toString() } },
          );
        }
      } catch (err) {
        this.preparing--;
        this.pump();
        throw err;
      }
      const nonce = signed.nonce;
      const outcome = await new Promise<Outcome>((resolve, reject) => {
        this.queue.push({
          queuedAt: performance.now(),
          signed,
          nonce,
          settle: (o) => ("error" in o ? reject(o.error) : resolve(o)),
        });
        this.preparing--;
        this.pump();
      });
      try {
        return await this.conclude(req, principal, nonce, outcome);
      } catch (err) {
        this.forwarderNonces.delete(principal.toLowerCase());
        throw err;
      }
    });
  }

  /** The forwarder nonce the principal's next request must carry (cached; see forwarderNonce). */
  nextForwarderNonce(principal: string): Promise<bigint> {
    return this.principals.run(principal.toLowerCase(), () => this.forwarderNonce(principal));
  }

  /** Simulates a registry call as `principal` through the forwarder: its gas, or the typed refusal. */
  simulateAs(principal: string, kind: "usage", data: string): Promise<bigint> {
    return this.simulate({ apiKey: "", principal, kind, data });
  }

  private async writeOnce(req: WriteRequest): Promise<LandedWrite> {
    this.preparing++;
    let prepared: { signed: SignedForwardRequest; nonce: bigint };
    try {
      prepared = await this.prepare(req);
    } catch (err) {
      this.preparing--;
      this.pump(); // queued requests may have been held for this one
      throw err;
    }
    const { signed, nonce } = prepared;
    const outcome = await new Promise<Outcome>((resolve, reject) => {
      // Queued before it stops counting as being prepared, so that a pump in between cannot send the
      // others without it.
      this.queue.push({
        queuedAt: performance.now(),
        signed,
        nonce,
        settle: (o) => ("error" in o ? reject(o.error) : resolve(o)),
      });
      this.preparing--;
      this.pump();
    });
    return this.conclude(req, signed.from, nonce, outcome);
  }

  private async prepare(req: WriteRequest): Promise<{ signed: SignedForwardRequest; nonce: bigint }> {
    const innerGas = await this.simulate(req);
    const nonce = await this.forwarderNonce(req.principal);
    const requestGas = requestGasFor(innerGas);
    const signed = await this.o.signer.signForwardRequest(
      req.apiKey,
      {
        to: this.o.registry,
        data: req.data,
        value: 0n,
        gas: requestGas,
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
  ): Promise<LandedWrite> {
    const key = req.principal.toLowerCase();
    if (outcome.kind === "ok") {
      this.forwarderNonces.set(key, nonce + 1n);
      return { ...outcome.result, forwardRequest: { signer: signer.toLowerCase(), nonce } };
    }
    // Mined but not done: something changed between simulation and inclusion. Say what, if we can.
    let again: ApiError | null = null;
    try {
      await this.simulate(req);
    } catch (err) {
      if (err instanceof ApiError) again = err;
    }
    if (again) throw again;
    throw new ApiError(409, "write_reverted", "The transaction reverted on chain; retry.", {
      details: {
        tx_hash: outcome.txHash,
        // Not run by the forwarder at all: most likely a stale forwarder nonce (write() retries once).
        reason: outcome.kind === "skipped" ? "stale_nonce" : "reverted",
      },
    });
  }

  /**
   * Starts transactions for queued requests while send slots are free. A free slot never waits for work
   * that does not exist yet; it does wait for writes already being prepared (simulated and signed: one
   * RPC away) unless the batch is full, so that they share the transaction. A lone write is not held
   * (nothing else is being prepared); on a busy relayer batches become about twice as large (measured
   * on bench/relayer.bench.ts: +10-25% writes/s). HOLD_MAX_MS, counted from when the oldest queued
   * request was queued, bounds the wait should simulations keep arriving or one hang.
   */
  private pump(): void {
    while (this.queue.length > 0 && this.inFlight < this.concurrency()) {
      if (this.holdFor()) return;
      const batch = this.takeBatch();
      const wallet = this.pickWallet();
      this.inFlight++;
      wallet.load++;
      void this.sendBatch(wallet, batch).finally(() => {
        this.inFlight--;
        wallet.load--;
        this.pump();
      });
    }
  }

  /** Whether to hold the queue for writes being prepared (and arm the bound on that wait). */
  private holdFor(): boolean {
    const first = this.queue[0];
    if (this.queue.length >= this.maxBatch()) return false;
    if (this.preparing === 0) return false;
    const left = HOLD_MAX_MS - (performance.now() - first.queuedAt);
    if (left <= 0) return false;
    if (!this.holdTimer) {
      this.holdTimer = setTimeout(() => {
        this.holdTimer = null;
        this.pump();
      }, Math.ceil(left));
      this.holdTimer.unref?.();
    }
    return true;
  }

  private maxBatch(): number {
    return Math.max(1, this.o.maxBatchSize ?? DEFAULT_MAX_BATCH);
  }

  private concurrency(): number {
    const n = this.o.sendConcurrency ?? (this.syncSend ? DEFAULT_SYNC_SEND_CONCURRENCY : this.wallets.length);
    return Math.max(1, Math.min(n, this.wallets.length));
  }

  /** The oldest queued requests, up to maxBatchSize and MAX_BATCH_GAS (the first is always taken). */
  private takeBatch(): Pending[] {
    const max = this.maxBatch();
    let gas = BATCH_BASE_GAS;
    let n = 0;
    while (n < this.queue.length && n < max) {
      gas += batchItemGas(this.queue[n].signed);
      if (n > 0 && gas > MAX_BATCH_GAS) break;
      n++;
    }
    return this.queue.splice(0, n);
  }

  /** One transaction for `batch`; settles every request of it (never throws). */
  private async sendBatch(wallet: GasWallet, batch: Pending[]): Promise<void> {
    let receipt: Receipt;
    try {
      let outerData: string;
      let gasLimit: bigint;
      if (batch.length === 1) {
        const r = batch[0].signed;
        outerData = encodeExecute(r);
        // The forwarder checks that at least `gas` reached the call (EIP-150 keeps 1/64 back), plus its
        // own work: signature recovery, nonce update, calldata.
        gasLimit = (r.gas * 64n) / 63n + 150_000n + BigInt((outerData.length - 2) / 2) * 16n;
      } else {
        // Refund receiver = the gas wallet: not zero, so one invalid or reverting request does not
        // revert the others (batch.ts).
        outerData = encodeExecuteBatch(
          batch.map((p) => p.signed),
          wallet.address,
        );
        // Each call must find its `gas` (plus 1/63) still available when its turn comes: sum them all.
        gasLimit = BATCH_BASE_GAS;
        for (const p of batch) gasLimit += batchItemGas(p.signed);
      }
      this.o.onBatch?.(batch.length);
      const sent = await this.broadcast(wallet, outerData, gasLimit);
      try {
        receipt = sent.receipt ?? (await this.waitForReceipt(sent.hash));
      } catch (err) {
        // Not confirmed: the node may have dropped or parked the transaction, so the wallet's next nonce
        // is unknown. Re-read it before the wallet sends again rather than queue behind a gap.
        wallet.nonce = null;
        throw err;
      }
    } catch (error) {
      for (const p of batch) p.settle({ error });
      return;
    }
    const txHash = receipt.result.txHash;
    // Before any caller hears of it: the permission cache may apply this transaction's events right
    // away (read-your-writes without a log query; PermissionCache.applyOwnTransaction).
    if (receipt.status === 1) this.o.onMined?.(receipt.result, receipt.transactionIndex);
    if (receipt.status !== 1) {
      // The whole transaction reverted (for `execute`: the call reverted or the request was invalid):
      // no nonce was used.
      for (const p of batch) p.settle({ kind: "skipped", txHash });
      return;
    }
    if (batch.length === 1) {
      batch[0].settle({ kind: "ok", result: receipt.result });
      return;
    }
    const outcomes = splitBatchLogs(
      receipt.result.logs,
      this.o.forwarder,
      batch.map((p) => ({ from: p.signed.from, nonce: p.nonce })),
    );
    batch.forEach((p, i) => {
      const o = outcomes[i];
      if (o.kind === "skipped") p.settle({ kind: "skipped", txHash });
      else if (!o.success) p.settle({ kind: "reverted", txHash });
      else p.settle({ kind: "ok", result: { ...receipt.result, logs: o.logs } });
    });
  }

  /** Returns the registry call's gas, or throws the decoded refusal. */
  private async simulate(req: WriteRequest): Promise<bigint> {
    const call = {
      from: this.o.forwarder,
      to: this.o.registry,
      data: req.data + req.principal.slice(2).toLowerCase(),
    };
    const refusal = (data: string | undefined) =>
      mapRevert(data, { principal: req.principal, kind: req.kind });
    if (this.simulateV1) {
      const answer = await withRetry(
        async () => {
          try {
            return await this.o.provider.send("eth_simulateV1", [
              { blockStateCalls: [{ calls: [call] }] },
              "latest",
            ]);
          } catch (err) {
            if (isTransient(err)) throw err;
            if (isMethodUnsupported(err)) return null;
            throw err;
          }
        },
        3,
        this.o.onTransient,
      );
      const result = simulatedCall(answer);
      if (result !== null) {
        if (result.ok) return result.gasUsed;
        throw refusal(result.revertData);
      }
      // Not supported, or an answer we do not understand: estimate the ordinary way from now on.
      this.simulateV1 = false;
    }
    const hex = await withRetry(
      async () => {
        try {
          return (await this.o.provider.send("eth_estimateGas", [call])) as string;
        } catch (err) {
          if (isTransient(err)) throw err;
          throw refusal(revertData(err));
        }
      },
      3,
      this.o.onTransient,
    );
    return BigInt(hex);
  }

  private async forwarderNonce(principal: string): Promise<bigint> {
    const key = principal.toLowerCase();
    const cached = this.forwarderNonces.get(key);
    if (cached !== undefined) return cached;
    const data = forwarderInterface.encodeFunctionData(NONCES, [principal]);
    const raw = await withRetry(
      () => this.o.provider.send("eth_call", [{ to: this.o.forwarder, data }, "latest"]) as Promise<string>,
      3,
      this.o.onTransient,
    );
    const nonce = BigInt(forwarderInterface.decodeFunctionResult(NONCES, raw)[0]);
    this.forwarderNonces.set(key, nonce);
    return nonce;
  }

  private pickWallet(): GasWallet {
    let best = this.wallets[this.rr++ % this.wallets.length];
    for (const w of this.wallets) if (w.load < best.load) best = w;
    return best;
  }

  /**
   * Signs and broadcasts in nonce order for this wallet; returns the transaction hash, and the receipt
   * when the node answered a sync send with one.
   */
  private async broadcast(
    wallet: GasWallet,
    data: string,
    gasLimit: bigint,
  ): Promise<{ hash: string; receipt: Receipt | null }> {
    return wallet.lock.run(async () => {
      let last: unknown;
      let underpriced = 0;
      for (let attempt = 0; attempt < 4; attempt++) {
        if (wallet.nonce === null) {
          const hex = await withRetry(
            () =>
              this.o.provider.send("eth_getTransactionCount", [wallet.address, "pending"]) as Promise<string>,
            3,
            this.o.onTransient,
          );
          wallet.nonce = Number(BigInt(hex));
        }
        const nonce = wallet.nonce;
        // Fees: relayer/chain/fees.ts (type 2 where the chain has a base fee, else legacy).
        const fees = bumpLegacy(await this.fees.current(), underpriced);
        const signedTx = await wallet.signer.signTransaction({
          ...fees,
          chainId: this.o.chainId,
          to: this.o.forwarder,
          data,
          gasLimit,
          nonce,
          value: 0n,
        });
        try {
          const sent = this.syncSend ? await this.sendSync(signedTx) : null;
          if (sent !== null) {
            wallet.nonce = nonce + 1;
            this.o.onSent?.(wallet.index);
            return sent;
          }
          const hash = (await this.o.provider.send("eth_sendRawTransaction", [signedTx])) as string;
          wallet.nonce = nonce + 1;
          this.o.onSent?.(wallet.index);
          return { hash, receipt: null };
        } catch (err) {
          last = err;
          const msg = errorText(err);
          if (/insufficient funds/i.test(msg)) {
            wallet.nonce = null;
            throw new ApiError(
              503,
              "gas_wallet_unfunded",
              `Gas wallet ${wallet.address} cannot pay for the transaction.`,
              {
                retryAfter: 30,
                details: { gas_wallet: wallet.address },
              },
            );
          }
          if (/underpriced|fee cap|base fee|max fee/i.test(msg)) {
            // Re-read the fees (the base fee rose, or the node's minimum did); a legacy price is also
            // raised a bounded step for this transaction only (fees.ts: never into the cached price).
            this.fees.invalidate();
            // Not for "replacement transaction underpriced": that is a nonce already taken by one of
            // our pending transactions, which a higher price would replace (its writes would never land).
            if (/underpriced/i.test(msg) && !/replacement/i.test(msg)) underpriced++;
            continue;
          }
          // Nonce trouble, or we do not know whether the node took the transaction: resynchronise.
          wallet.nonce = null;
          if (isTransient(err)) {
            this.o.onTransient?.(err);
            if (attempt >= 2) throw chainUnavailable(err);
            await sleep(100 * 3 ** attempt);
            continue;
          }
          if (/nonce|already known|known transaction/i.test(msg)) continue;
          throw err;
        }
      }
      throw isTransient(last) ? chainUnavailable(last) : last;
    });
  }

  /**
   * eth_sendRawTransactionSync. Null when the node does not support it (the caller sends the ordinary
   * way; sync sends stay off from then on). A node that accepted the transaction but did not mine it in
   * its own timeout answers EIP-7966 error 4 with the hash: that is a send, and the receipt is polled.
   * Any other failure is thrown exactly like a failed eth_sendRawTransaction.
   */
  private async sendSync(signedTx: string): Promise<{ hash: string; receipt: Receipt | null } | null> {
    const started = performance.now();
    let raw: RawReceipt;
    try {
      raw = (await this.o.provider.send("eth_sendRawTransactionSync", [signedTx])) as RawReceipt;
    } catch (err) {
      if (isMethodUnsupported(err)) {
        this.syncSend = false;
        return null;
      }
      const pending = pendingHash(err);
      if (pending !== null) {
        this.syncSend = false; // the chain does not mine on arrival
        return { hash: pending, receipt: null };
      }
      if (isTimeout(err)) {
        // The request reached the node and it did not answer within rpcTimeoutMs: it is most likely
        // waiting for a block. Sending again would spend a second nonce on the same forward request, so
        // poll for this transaction by its hash instead (and stop using sync sends).
        this.syncSend = false;
        return { hash: keccak256(signedTx), receipt: null };
      }
      throw err;
    }
    if (performance.now() - started > (this.o.syncSendSlowMs ?? SYNC_SEND_SLOW_MS)) this.syncSend = false;
    if (!raw || typeof raw !== "object" || typeof raw.transactionHash !== "string") {
      // Not a receipt: stop trusting sync sends, and poll for the transaction by its own hash.
      this.syncSend = false;
      return { hash: keccak256(signedTx), receipt: null };
    }
    return { hash: raw.transactionHash, receipt: toReceipt(raw.transactionHash, raw) };
  }

  private async waitForReceipt(txHash: string): Promise<Receipt> {
    const deadline = Date.now() + this.o.receiptTimeoutMs;
    // Automining chains include a transaction within milliseconds: poll tightly at first, then back off.
    let delay = 2;
    let failingSince: number | null = null;
    for (;;) {
      try {
        const r = (await this.o.provider.send("eth_getTransactionReceipt", [txHash])) as RawReceipt | null;
        failingSince = null;
        if (r) return toReceipt(txHash, r);
      } catch (err) {
        if (!isTransient(err)) throw err;
        this.o.onTransient?.(err);
        failingSince ??= Date.now();
        if (Date.now() - failingSince > this.o.rpcTimeoutMs) throw chainUnavailable(err, { tx_hash: txHash });
      }
      if (Date.now() > deadline) {
        throw new ApiError(503, "chain_unavailable", "The write was sent but is not confirmed yet.", {
          retryAfter: 5,
          details: { tx_hash: txHash },
        });
      }
      await sleep(delay);
      delay = Math.min(delay * 2, 25);
    }
  }
}

interface RawReceipt {
  transactionHash: string;
  transactionIndex?: string;
  status: string;
  blockNumber: string;
  logs: RawLog[];
  gasUsed: string;
}

interface Receipt {
  status: number;
  result: WriteResult;
  /** Position of the transaction in its block (null if the node did not say). */
  transactionIndex: number | null;
}

function toReceipt(txHash: string, r: RawReceipt): Receipt {
  return {
    status: Number(BigInt(r.status)),
    result: { txHash, blockNumber: Number(BigInt(r.blockNumber)), logs: r.logs, gasUsed: BigInt(r.gasUsed) },
    transactionIndex:
      typeof r.transactionIndex === "string" && /^0x[0-9a-fA-F]+$/.test(r.transactionIndex)
        ? Number(BigInt(r.transactionIndex))
        : null,
  };
}

/**
 * The one call of an eth_simulateV1 answer: its gas used, or its revert data. The gas used is what
 * eth_estimateGas finds for these calls (the registry makes no external calls); refunds only make it
 * smaller than the gas the call needs while running, by at most a fifth (EIP-3529), which the request
 * gas margin in prepare() covers. Null for an answer of another shape (the caller falls back to
 * eth_estimateGas).
 */
export function simulatedCall(
  answer: unknown,
): { ok: true; gasUsed: bigint } | { ok: false; revertData: string | undefined } | null {
  if (!Array.isArray(answer) || answer.length !== 1) return null;
  const calls = (answer[0] as { calls?: unknown } | null)?.calls;
  if (!Array.isArray(calls) || calls.length !== 1) return null;
  const c = calls[0] as {
    status?: unknown;
    gasUsed?: unknown;
    returnData?: unknown;
    error?: { data?: unknown };
  };
  const hex = (v: unknown) => typeof v === "string" && /^0x[0-9a-fA-F]*$/.test(v);
  if (c.status === "0x1" && hex(c.gasUsed)) return { ok: true, gasUsed: BigInt(c.gasUsed as string) };
  if (c.status === "0x0") {
    // Revert data is error.data in the specification; some nodes (anvil) put it in returnData.
    const data = hex(c.error?.data)
      ? (c.error!.data as string)
      : hex(c.returnData)
        ? (c.returnData as string)
        : undefined;
    return { ok: false, revertData: data !== undefined && data.length >= 10 ? data : undefined };
  }
  return null;
}

/** JSON-RPC error objects carried by an ethers error, outermost first. */
function rpcErrors(err: unknown): Array<{ code?: unknown; message?: unknown; data?: unknown }> {
  const out = [];
  for (let e: unknown = err, d = 0; e && typeof e === "object" && d < 5; d++) {
    out.push(e as { code?: unknown; message?: unknown; data?: unknown });
    const o = e as { info?: { error?: unknown }; error?: unknown; cause?: unknown };
    e = o.info?.error ?? o.error ?? o.cause;
  }
  return out;
}

/** JSON-RPC -32601 (or a node's wording of it): the node has no eth_sendRawTransactionSync. */
export function isMethodUnsupported(err: unknown): boolean {
  return rpcErrors(err).some(
    (e) =>
      e.code === -32601 ||
      (typeof e.message === "string" &&
        /method not found|method .*(not supported|not available|does not exist)|unsupported method/i.test(
          e.message,
        )),
  );
}

/** Our own request timeout (transport.ts: code TIMEOUT), as opposed to a refused or reset connection. */
function isTimeout(err: unknown): boolean {
  return rpcErrors(err).some((e) => e.code === "TIMEOUT");
}

/** EIP-7966 error 4 (accepted, not mined within the node's timeout): the transaction hash it carries. */
export function pendingHash(err: unknown): string | null {
  for (const e of rpcErrors(err)) {
    if (e.code === 4 && typeof e.data === "string" && /^0x[0-9a-fA-F]{64}$/.test(e.data)) return e.data;
  }
  return null;
}

/** Gas a request adds to an executeBatch transaction: its call (+1/63, EIP-150), the forwarder's work, calldata. */
function batchItemGas(r: SignedForwardRequest): bigint {
  const calldata = BigInt(7 * 32 + 64 + (r.data.length - 2) / 2 + (r.signature.length - 2) / 2 + 64);
  return (r.gas * 64n) / 63n + BATCH_PER_REQUEST_GAS + calldata * 16n;
}

function errorText(err: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = err, d = 0; e && d < 5; d++) {
    const o = e as {
      message?: unknown;
      shortMessage?: unknown;
      info?: { error?: unknown };
      error?: unknown;
      cause?: unknown;
    };
    if (typeof o.message === "string") parts.push(o.message);
    if (typeof o.shortMessage === "string") parts.push(o.shortMessage);
    e = o.info?.error ?? o.error ?? o.cause;
  }
  return parts.join(" | ");
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
