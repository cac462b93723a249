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
 *  - Transient RPC failures are retried; when the chain stays unreachable the caller gets 503.
 */
import { keccak256, type AbstractSigner, type JsonRpcProvider } from "ethers";
import { ApiError } from "../errors";
import { KeyedMutex, Mutex } from "../mutex";
import { forwarderInterface, parseRegistryLog } from "./abi";
import { mapRevert } from "./registryErrors";
import { chainUnavailable, isTransient, revertData, sleep, withRetry } from "./rpc";

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
}

const DEADLINE_SECONDS = 600;
/** A sync send slower than this means the node does not mine on arrival: stop using sync sends. */
export const SYNC_SEND_SLOW_MS = 500;
/** Looked up once: encoding by name makes ethers search the ABI (and hash signatures) on every write. */
const EXECUTE = forwarderInterface.getFunction("execute")!;
const NONCES = forwarderInterface.getFunction("nonces")!;

export class Sender {
  private readonly wallets: GasWallet[] = [];
  private readonly principals = new KeyedMutex();
  private readonly forwarderNonces = new Map<string, bigint>();
  private gasPrice: { value: bigint; atMs: number } | null = null;
  private rr = 0;
  private syncSend: boolean;

  constructor(private readonly o: SenderOptions) {
    this.syncSend = o.syncSend !== "off";
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
  async write(req: WriteRequest): Promise<WriteResult> {
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

  private async writeOnce(req: WriteRequest): Promise<WriteResult> {
    const innerGas = await this.simulate(req);
    const nonce = await this.forwarderNonce(req.principal);
    const requestGas = (innerGas * 5n) / 4n + 10_000n;
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
    const outerData = encodeExecute(signed);
    // The forwarder checks that at least `gas` reached the call (EIP-150 keeps 1/64 back), plus its own
    // work: signature recovery, nonce update, calldata.
    const gasLimit = (requestGas * 64n) / 63n + 150_000n + BigInt((outerData.length - 2) / 2) * 16n;
    const wallet = this.pickWallet();
    wallet.load++;
    let sent: { hash: string; receipt: Receipt | null };
    try {
      sent = await this.broadcast(wallet, outerData, gasLimit);
    } finally {
      wallet.load--;
    }
    const txHash = sent.hash;
    let receipt: Receipt;
    try {
      receipt = sent.receipt ?? (await this.waitForReceipt(txHash));
    } catch (err) {
      // Not confirmed: the node may have dropped or parked the transaction, so the wallet's next nonce is
      // unknown. Re-read it before the wallet sends again rather than queue behind a gap.
      wallet.nonce = null;
      throw err;
    }
    if (receipt.status !== 1) {
      // Mined but reverted: something changed between simulation and inclusion. Say what, if we can.
      let again: ApiError | null = null;
      try {
        await this.simulate(req);
      } catch (err) {
        if (err instanceof ApiError) again = err;
      }
      if (again) throw again;
      throw new ApiError(409, "write_reverted", "The transaction reverted on chain; retry.", {
        details: { tx_hash: txHash, reason: "stale_nonce" },
      });
    }
    this.forwarderNonces.set(req.principal.toLowerCase(), nonce + 1n);
    return receipt.result;
  }

  /** Returns the registry call's gas, or throws the decoded refusal. */
  private async simulate(req: WriteRequest): Promise<bigint> {
    const data = req.data + req.principal.slice(2).toLowerCase();
    const hex = await withRetry(
      async () => {
        try {
          return (await this.o.provider.send("eth_estimateGas", [
            { from: this.o.forwarder, to: this.o.registry, data },
          ])) as string;
        } catch (err) {
          if (isTransient(err)) throw err;
          throw mapRevert(revertData(err), { principal: req.principal, kind: req.kind });
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

  private async currentGasPrice(): Promise<bigint> {
    if (this.gasPrice && Date.now() - this.gasPrice.atMs < 3_000) return this.gasPrice.value;
    const hex = await withRetry(
      () => this.o.provider.send("eth_gasPrice", []) as Promise<string>,
      3,
      this.o.onTransient,
    );
    // Twice the suggestion: base fees can rise between blocks and a stuck transaction blocks the wallet.
    const value = BigInt(hex) * 2n + 1n;
    this.gasPrice = { value, atMs: Date.now() };
    return value;
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
        const gasPrice = await this.currentGasPrice();
        const signedTx = await wallet.signer.signTransaction({
          type: 0,
          chainId: this.o.chainId,
          to: this.o.forwarder,
          data,
          gasLimit,
          gasPrice,
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
            this.gasPrice = null;
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
  status: string;
  blockNumber: string;
  logs: RawLog[];
  gasUsed: string;
}

interface Receipt {
  status: number;
  result: WriteResult;
}

function toReceipt(txHash: string, r: RawReceipt): Receipt {
  return {
    status: Number(BigInt(r.status)),
    result: { txHash, blockNumber: Number(BigInt(r.blockNumber)), logs: r.logs, gasUsed: BigInt(r.gasUsed) },
  };
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

/**
 * ABI encoding of ERC2771Forwarder.execute(ForwardRequestData) by hand: the layout is fixed, and ethers'
 * generic coder was one of the larger costs of a write. Byte-for-byte what
 * forwarderInterface.encodeFunctionData("execute", [request]) produces (tested).
 */
export function encodeExecute(r: {
  from: string;
  to: string;
  value: bigint;
  gas: bigint;
  deadline: number | bigint;
  data: string;
  signature: string;
}): string {
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
  const data = bytes(r.data);
  const head = 7 * 32;
  return (
    EXECUTE.selector +
    word(32n) +
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
