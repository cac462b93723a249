/**
 * The relayer instance's gas wallets and which one sends the next transaction.
 *
 * Each wallet sends its transactions strictly in nonce order under its own lock (automining chains
 * refuse gaps), so spreading transactions over wallets is what lets several be in flight at once. The
 * next transaction goes to the least-loaded wallet (round robin among equals), skipping wallets that
 * could not pay for their last transaction ("dry") while any other wallet can still pay: one empty
 * wallet then costs one refused send, not a share of every later write. A dry wallet is used again once
 * its balance rises (balanceMonitor.ts reads it) or when every wallet is dry (the write then fails with
 * 503 gas_wallet_unfunded, which is the truth).
 */
import type { AbstractSigner } from "ethers";
import { Mutex } from "../../mutex";

export interface GasWallet {
  index: number;
  address: string;
  signer: AbstractSigner;
  /** The next transaction nonce; null = must resynchronise from the chain before the next send. */
  nonce: number | null;
  lock: Mutex;
  /** Transactions in flight from this wallet (its lock serialises them). */
  load: number;
  /** Its last send failed for insufficient funds: skipped while another wallet can pay. */
  dry: boolean;
  /** Last balance read (wei), or null before the first read. */
  balanceWei: bigint | null;
  /** Balance when it went dry: a higher balance means it was funded since. */
  dryAtBalanceWei: bigint | null;
}

export class WalletPool {
  private readonly wallets: GasWallet[] = [];
  private rr = 0;

  /** Reads each signer's address once (they never change). */
  async add(signers: AbstractSigner[]): Promise<void> {
    for (const signer of signers) {
      this.wallets.push({
        index: this.wallets.length,
        address: await signer.getAddress(),
        signer,
        nonce: null,
        lock: new Mutex(),
        load: 0,
        dry: false,
        balanceWei: null,
        dryAtBalanceWei: null,
      });
    }
  }

  get size(): number {
    return this.wallets.length;
  }

  all(): readonly GasWallet[] {
    return this.wallets;
  }

  addresses(): string[] {
    return this.wallets.map((w) => w.address);
  }

  /**
   * The wallet for the next transaction: the least loaded of those that can pay (round robin among
   * equals), or of all of them when none can. `exclude`: wallets already tried for this transaction.
   * Null when every wallet is excluded.
   */
  pick(exclude: ReadonlySet<GasWallet> = new Set()): GasWallet | null {
    const open = this.wallets.filter((w) => !exclude.has(w));
    if (open.length === 0) return null;
    const paying = open.filter((w) => !w.dry);
    const candidates = paying.length > 0 ? paying : open;
    let best = candidates[this.rr++ % candidates.length];
    for (const w of candidates) if (w.load < best.load) best = w;
    return best;
  }

  /** Whether another wallet than those in `exclude` could pay for a transaction now. */
  hasPayingWalletBesides(exclude: ReadonlySet<GasWallet>): boolean {
    return this.wallets.some((w) => !w.dry && !exclude.has(w));
  }

  /** The node refused the wallet's transaction for insufficient funds. */
  markDry(wallet: GasWallet): void {
    if (wallet.dry) return;
    wallet.dry = true;
    // The last reading may predate the spending that emptied it: the next reading is the baseline.
    wallet.dryAtBalanceWei = null;
  }

  /**
   * A fresh balance reading. A dry wallet counts as funded again when its balance rose since it went
   * dry, or reaches `fundedAtWei` (a reading taken before the refusal may already have been low).
   */
  recordBalance(wallet: GasWallet, balanceWei: bigint, fundedAtWei: bigint): void {
    wallet.balanceWei = balanceWei;
    if (!wallet.dry) return;
    if (wallet.dryAtBalanceWei === null) {
      // First reading since the refusal: the baseline any funding must rise above.
      wallet.dryAtBalanceWei = balanceWei;
      if (balanceWei < fundedAtWei) return;
    } else if (balanceWei <= wallet.dryAtBalanceWei && balanceWei < fundedAtWei) return;
    wallet.dry = false;
    wallet.dryAtBalanceWei = null;
  }

  /** After a chain reset or reorganisation: every wallet's nonce is re-read before its next send. */
  resetNonces(): void {
    for (const w of this.wallets) w.nonce = null;
  }
}
