/**
 * The audit's comparison (relayer/billing/audit.ts compareWriteCharges) on generated chain histories
 * and ledgers: exact differences for each kind of mismatch, ledgers written before per-request
 * references (`write:<tx hash>`), and a property: a ledger with one correct charge per billable write is
 * clean, and removing, duplicating or misattributing any charge is reported as exactly that.
 */
import { expect } from "chai";
import fc from "fast-check";
import { compareWriteCharges, type LedgerWriteCharge } from "../../relayer/billing/audit";
import type { ChainWrite } from "../../relayer/billing/chainWrites";
import { writeChargeReference } from "../../relayer/billing/references";

const CHAIN_ID = 31337;
const FORWARDER = "0x" + "f".repeat(40);
const GAS = "0x" + "9".repeat(40);
const addr = (n: number) => "0x" + n.toString(16).padStart(40, "0");
const tx = (n: number) => "0x" + n.toString(16).padStart(64, "0");

function write(o: Partial<ChainWrite> & { signer: string; nonce: bigint }): ChainWrite {
  return {
    success: true,
    kind: "write",
    accountId: "1",
    txHash: tx(1),
    position: 0,
    blockNumber: 10,
    sentBy: GAS,
    ...o,
  };
}

let nextEntry = 1;
function chargeFor(w: ChainWrite, accountId = w.accountId ?? "1"): LedgerWriteCharge {
  return {
    entryId: nextEntry++,
    accountId,
    reference: writeChargeReference({
      chainId: CHAIN_ID,
      forwarder: FORWARDER,
      signer: w.signer,
      nonce: w.nonce,
    }),
    amountCents: 1,
    operation: "create_pkp",
  };
}

const compare = (writes: ChainWrite[], charges: LedgerWriteCharge[], settledBlock = 1_000) =>
  compareWriteCharges({
    chainId: CHAIN_ID,
    forwarder: FORWARDER,
    writes,
    charges,
    gasWallets: [GAS],
    settledBlock,
  });

describe("billing: the audit's comparison of chain writes and ledger charges", function () {
  const a = write({ signer: addr(1), nonce: 0n, position: 0 });
  const b = write({ signer: addr(2), nonce: 0n, position: 1, accountId: "2" });

  it("one charge per billable write on the right account: no differences", async () => {
    expect(compare([a, b], [chargeFor(a), chargeFor(b)])).to.deep.equal([]);
  });

  it("a billable write without a charge is uncharged", async () => {
    expect(compare([a, b], [chargeFor(a)])).to.deep.equal([{ kind: "uncharged", write: b }]);
  });

  it("a write mined after the settled block is not yet reported uncharged", async () => {
    expect(compare([a, { ...b, blockNumber: 11 }], [chargeFor(a)], 10)).to.deep.equal([]);
  });

  it("a charge on another account than the write acted on is wrong_account", async () => {
    const c = chargeFor(b, "1");
    expect(compare([a, b], [chargeFor(a), c])).to.deep.equal([
      { kind: "wrong_account", write: b, charge: c },
    ]);
  });

  for (const [what, w, reason] of [
    [
      "a reverted request",
      write({ signer: addr(3), nonce: 0n, success: false }),
      "the request reverted on chain",
    ],
    [
      "an account creation",
      write({ signer: addr(3), nonce: 0n, kind: "account_creation" }),
      "account creation is free",
    ],
    [
      "a request another address sent",
      write({ signer: addr(3), nonce: 0n, sentBy: addr(77) }),
      "not sent by a relayer gas wallet",
    ],
  ] as const) {
    it(`a charge for ${what} is a stray charge saying so`, async () => {
      const c = chargeFor(w);
      expect(compare([a, w], [chargeFor(a), c])).to.deep.equal([
        { kind: "stray_charge", charge: c, reason, write: w },
      ]);
    });
  }

  it("a charge of another chain or forwarder is a stray charge", async () => {
    const c = { ...chargeFor(a), reference: `write:1:${FORWARDER}:${a.signer}:0` };
    expect(compare([a], [chargeFor(a), c])).to.deep.equal([
      { kind: "stray_charge", charge: c, reason: "another chain or forwarder" },
    ]);
  });

  it("a ledger written before per-request references: a tx-hash charge covers one write of its account in that transaction", async () => {
    const legacy = (accountId: string): LedgerWriteCharge => ({
      entryId: nextEntry++,
      accountId,
      reference: `write:${tx(1)}`,
      amountCents: 1,
      operation: "create_pkp",
    });
    // The old defect, as the audit sees it: b shared a's transaction and was never charged.
    expect(compare([a, b], [legacy("1")])).to.deep.equal([{ kind: "uncharged", write: b }]);
    const stray = legacy("5");
    expect(compare([a], [chargeFor(a), stray])).to.deep.equal([
      {
        kind: "stray_charge",
        charge: stray,
        reason: "no successful write of this account in that transaction",
      },
    ]);
  });

  it("property: correct ledgers are clean; each removed, doubled or misattributed charge is reported as such", async () => {
    const history = fc
      .array(fc.record({ account: fc.integer({ min: 1, max: 5 }), tx: fc.integer({ min: 1, max: 6 }) }), {
        minLength: 1,
        maxLength: 30,
      })
      .map((items) => {
        const nonces = new Map<number, bigint>();
        return items.map((it, i) => {
          const nonce = nonces.get(it.account) ?? 0n;
          nonces.set(it.account, nonce + 1n);
          return write({
            signer: addr(it.account),
            nonce,
            accountId: String(it.account),
            txHash: tx(it.tx),
            position: i,
          });
        });
      });
    fc.assert(
      fc.property(
        history,
        fc.nat(),
        fc.constantFrom("remove", "double", "misattribute"),
        (writes, pick, change) => {
          const charges = writes.map((w) => chargeFor(w));
          if (compare(writes, charges).length !== 0) return false;
          const i = pick % writes.length;
          const w = writes[i];
          if (change === "remove") {
            const d = compare(
              writes,
              charges.filter((_, j) => j !== i),
            );
            return d.length === 1 && d[0].kind === "uncharged" && d[0].write === w;
          }
          if (change === "double") {
            // The ledger's UNIQUE reference forbids a second row with the same reference; a legacy
            // tx-hash row for the same account is how a request could be charged twice.
            const extra = { ...chargeFor(w), reference: `write:${w.txHash}` };
            const others = writes.filter((x) => x.txHash === w.txHash && x.accountId === w.accountId);
            const d = compare(writes, [...charges, extra]);
            // The legacy row lands on the first write of that account in that transaction.
            return d.length === 1 && d[0].kind === "charged_twice" && d[0].write === others[0];
          }
          const wrong = String(Number(w.accountId) + 10);
          const moved = charges.map((c, j) => (j === i ? { ...c, accountId: wrong } : c));
          const d = compare(writes, moved);
          return d.length === 1 && d[0].kind === "wrong_account" && d[0].write === w;
        },
      ),
      { numRuns: 300, seed: 1313 },
    );
  });
});
