/**
 * relayer/chain/send/walletPool.ts: which gas wallet sends next. Pure (signers are never asked to sign
 * here), so the choice is checked over generated pools with fast-check.
 */
import { expect } from "chai";
import fc from "fast-check";
import { Wallet } from "ethers";
import { WalletPool, type GasWallet } from "../../../relayer/chain/send/walletPool";

async function pool(n: number): Promise<WalletPool> {
  const p = new WalletPool();
  await p.add(Array.from({ length: n }, () => Wallet.createRandom()));
  return p;
}

describe("relayer/chain/send/walletPool", () => {
  it("reads each signer's address once, in order", async () => {
    const signers = [Wallet.createRandom(), Wallet.createRandom()];
    const p = new WalletPool();
    await p.add(signers);
    expect(p.addresses()).to.deep.equal(signers.map((s) => s.address));
    expect(p.all().map((w) => [w.index, w.nonce, w.load, w.dry])).to.deep.equal([
      [0, null, 0, false],
      [1, null, 0, false],
    ]);
  });

  it("round-robins among equally loaded wallets", async () => {
    const p = await pool(3);
    expect([p.pick(), p.pick(), p.pick(), p.pick()].map((w) => w!.index)).to.deep.equal([0, 1, 2, 0]);
  });

  it("skips a dry wallet while another can pay, and uses it again when every wallet is dry", async () => {
    const p = await pool(2);
    p.markDry(p.all()[0]);
    expect([p.pick(), p.pick(), p.pick()].map((w) => w!.index)).to.deep.equal([1, 1, 1]);
    p.markDry(p.all()[1]);
    expect(p.pick()).to.not.equal(null);
  });

  it("returns null once every wallet is excluded, and says whether another paying wallet remains", async () => {
    const p = await pool(2);
    const [a, b] = p.all();
    expect(p.hasPayingWalletBesides(new Set([a]))).to.equal(true);
    p.markDry(b);
    expect(p.hasPayingWalletBesides(new Set([a]))).to.equal(false);
    expect(p.pick(new Set<GasWallet>([a, b]))).to.equal(null);
  });

  it("a dry wallet counts as funded again when its balance rises above the first reading after it went dry", async () => {
    const p = await pool(1);
    const w = p.all()[0];
    p.recordBalance(w, 5n, 1000n);
    p.markDry(w);
    p.recordBalance(w, 3n, 1000n); // baseline
    expect(w.dry).to.equal(true);
    p.recordBalance(w, 3n, 1000n);
    expect(w.dry).to.equal(true);
    p.recordBalance(w, 4n, 1000n);
    expect([w.dry, w.balanceWei]).to.deep.equal([false, 4n]);
  });

  it("a dry wallet whose first reading is already at the threshold counts as funded", async () => {
    const p = await pool(1);
    const w = p.all()[0];
    p.markDry(w);
    p.recordBalance(w, 1000n, 1000n);
    expect(w.dry).to.equal(false);
  });

  it("resetNonces makes every wallet re-read its nonce", async () => {
    const p = await pool(2);
    for (const w of p.all()) w.nonce = 7;
    p.resetNonces();
    expect(p.all().map((w) => w.nonce)).to.deep.equal([null, null]);
  });

  it("property: the pick is a least-loaded paying wallet whenever one is not excluded", async () => {
    const p = await pool(5);
    const wallets = p.all() as GasWallet[];
    fc.assert(
      fc.property(
        fc.array(fc.record({ load: fc.nat(4), dry: fc.boolean(), excluded: fc.boolean() }), {
          minLength: 5,
          maxLength: 5,
        }),
        (state) => {
          state.forEach((s, i) => Object.assign(wallets[i], { load: s.load, dry: s.dry }));
          const exclude = new Set(wallets.filter((_, i) => state[i].excluded));
          const picked = p.pick(exclude);
          const open = wallets.filter((w) => !exclude.has(w));
          if (open.length === 0) return picked === null;
          const paying = open.filter((w) => !w.dry);
          const candidates = paying.length > 0 ? paying : open;
          const least = Math.min(...candidates.map((w) => w.load));
          return picked !== null && candidates.includes(picked) && picked.load === least;
        },
      ),
      { numRuns: 500 },
    );
  });
});
