/**
 * Signing and broadcasting one transaction from a gas wallet, in that wallet's nonce order.
 *
 * The wallet's lock is held from choosing the nonce until the node accepted the transaction, so nonces
 * leave each wallet without gaps (automining chains refuse gaps). After any doubtful failure the
 * wallet's nonce is re-read from the chain before its next send. A wallet that cannot pay is reported
 * as 503 gas_wallet_unfunded (the caller may try another wallet: the node refused the transaction, so
 * nothing was sent).
 *
 * Sends use eth_sendRawTransactionSync (EIP-7966: the node answers with the receipt, saving the receipt
 * polls) while it works and is fast; see BroadcasterOptions.syncSend.
 */
import { keccak256, type JsonRpcProvider } from "ethers";
import { ApiError } from "../../errors";
import { bumpLegacy, type FeeOracle } from "../fees";
import { chainUnavailable, isTransient, sleep } from "../rpc";
import { errorText, isMethodUnsupported, isTimeout, pendingHash } from "./nodeErrors";
import { pendingTransactionCount } from "./nonces";
import { toReceipt, type RawReceipt, type Receipt } from "./receipts";
import type { GasWallet } from "./walletPool";

/** A sync send slower than this may mean the node does not mine on arrival (see SLOW_SYNC_SENDS_TO_STOP). */
export const SYNC_SEND_SLOW_MS = 500;
/**
 * Consecutive slow sync sends after which sync sends stop. A chain that mines on an interval makes every
 * sync send slow; an automining chain makes one slow now and then (anvil writing its state file, a
 * loaded machine), and turning sync sends off there for good multiplied its blocks: sends in parallel
 * from every gas wallet, each its own block with a smaller batch, so more of anvil's per-block work per
 * write (measured in bench:soak: blocks per write rose from ~0.2 to ~0.35 over 12,000 writes).
 */
export const SLOW_SYNC_SENDS_TO_STOP = 3;

export interface BroadcasterOptions {
  provider: JsonRpcProvider;
  chainId: number;
  /** Every path-A transaction calls the forwarder. */
  forwarder: string;
  fees: FeeOracle;
  /**
   * "auto" tries eth_sendRawTransactionSync and falls back to send + poll for good when the node does
   * not know the method, or when SLOW_SYNC_SENDS_TO_STOP sync sends in a row take longer than
   * SYNC_SEND_SLOW_MS (the chain mines on an interval: holding a gas wallet's nonce lock for a whole
   * block would serialise that wallet). "off"
   * never tries it.
   */
  syncSend?: "auto" | "off";
  syncSendSlowMs?: number;
  onTransient?: (err: unknown) => void;
  onSent?: (wallet: number) => void;
}

export class Broadcaster {
  private syncSend: boolean;
  /** Sync sends in a row that were slower than the threshold. */
  private slowInARow = 0;

  constructor(private readonly o: BroadcasterOptions) {
    this.syncSend = o.syncSend !== "off";
  }

  usesSyncSend(): boolean {
    return this.syncSend;
  }

  /**
   * Signs and broadcasts in nonce order for this wallet; returns the transaction hash, and the receipt
   * when the node answered a sync send with one.
   */
  async broadcast(
    wallet: GasWallet,
    data: string,
    gasLimit: bigint,
    /** The contract called: the forwarder for every path-A write, another only for sendCall (sender.ts). */
    to: string = this.o.forwarder,
  ): Promise<{ hash: string; receipt: Receipt | null }> {
    return wallet.lock.run(async () => {
      let last: unknown;
      let underpriced = 0;
      for (let attempt = 0; attempt < 4; attempt++) {
        if (wallet.nonce === null) {
          wallet.nonce = await pendingTransactionCount(this.o.provider, wallet.address, this.o.onTransient);
        }
        const nonce = wallet.nonce;
        // Fees: relayer/chain/fees.ts (type 2 where the chain has a base fee, else legacy).
        const fees = bumpLegacy(await this.o.fees.current(), underpriced);
        const signedTx = await wallet.signer.signTransaction({
          ...fees,
          chainId: this.o.chainId,
          to,
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
            throw unfunded(wallet.address);
          }
          if (/underpriced|fee cap|base fee|max fee/i.test(msg)) {
            // Re-read the fees (the base fee rose, or the node's minimum did); a legacy price is also
            // raised a bounded step for this transaction only (fees.ts: never into the cached price).
            this.o.fees.invalidate();
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
    if (performance.now() - started > (this.o.syncSendSlowMs ?? SYNC_SEND_SLOW_MS)) {
      if (++this.slowInARow >= SLOW_SYNC_SENDS_TO_STOP) this.syncSend = false;
    } else this.slowInARow = 0;
    if (!raw || typeof raw !== "object" || typeof raw.transactionHash !== "string") {
      // Not a receipt: stop trusting sync sends, and poll for the transaction by its own hash.
      this.syncSend = false;
      return { hash: keccak256(signedTx), receipt: null };
    }
    return { hash: raw.transactionHash, receipt: toReceipt(raw.transactionHash, raw) };
  }
}

export function unfunded(address: string): ApiError {
  return new ApiError("gas_wallet_unfunded", `Gas wallet ${address} cannot pay for the transaction.`, {
    retryAfter: 30,
    details: { gas_wallet: address },
  });
}

export function isUnfunded(err: unknown): err is ApiError {
  return err instanceof ApiError && err.code === "gas_wallet_unfunded";
}
