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
import type { AbstractSigner, JsonRpcProvider } from "ethers";
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
}

const DEADLINE_SECONDS = 600;

export class Sender {
  private readonly wallets: GasWallet[] = [];
  private readonly principals = new KeyedMutex();
  private readonly forwarderNonces = new Map<string, bigint>();
  private gasPrice: { value: bigint; atMs: number } | null = null;
  private rr = 0;

  constructor(private readonly o: SenderOptions) {}

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
    const outerData = forwarderInterface.encodeFunctionData("execute", [
      {
        from: signed.from,
        to: signed.to,
        value: signed.value,
        gas: signed.gas,
        deadline: signed.deadline,
        data: signed.data,
        signature: signed.signature,
      },
    ]);
    // The forwarder checks that at least `gas` reached the call (EIP-150 keeps 1/64 back), plus its own
    // work: signature recovery, nonce update, calldata.
    const gasLimit = (requestGas * 64n) / 63n + 150_000n + BigInt((outerData.length - 2) / 2) * 16n;
    const wallet = this.pickWallet();
    wallet.load++;
    let txHash: string;
    try {
      txHash = await this.broadcast(wallet, outerData, gasLimit);
    } finally {
      wallet.load--;
    }
    let receipt;
    try {
      receipt = await this.waitForReceipt(txHash);
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
    const data = forwarderInterface.encodeFunctionData("nonces", [principal]);
    const raw = await withRetry(
      () => this.o.provider.send("eth_call", [{ to: this.o.forwarder, data }, "latest"]) as Promise<string>,
      3,
      this.o.onTransient,
    );
    const nonce = BigInt(forwarderInterface.decodeFunctionResult("nonces", raw)[0]);
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

  /** Signs and broadcasts in nonce order for this wallet; returns the transaction hash. */
  private async broadcast(wallet: GasWallet, data: string, gasLimit: bigint): Promise<string> {
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
          const hash = (await this.o.provider.send("eth_sendRawTransaction", [signedTx])) as string;
          wallet.nonce = nonce + 1;
          this.o.onSent?.(wallet.index);
          return hash;
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

  private async waitForReceipt(txHash: string): Promise<{ status: number; result: WriteResult }> {
    const deadline = Date.now() + this.o.receiptTimeoutMs;
    // Automining chains include a transaction within milliseconds: poll tightly at first, then back off.
    let delay = 2;
    let failingSince: number | null = null;
    for (;;) {
      try {
        const r = (await this.o.provider.send("eth_getTransactionReceipt", [txHash])) as {
          status: string;
          blockNumber: string;
          logs: RawLog[];
          gasUsed: string;
        } | null;
        failingSince = null;
        if (r) {
          return {
            status: Number(BigInt(r.status)),
            result: {
              txHash,
              blockNumber: Number(BigInt(r.blockNumber)),
              logs: r.logs,
              gasUsed: BigInt(r.gasUsed),
            },
          };
        }
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
