/**
 * The nonce manager of sendTransaction (enclave/executor/send/nonces.ts) on its own: what becomes of a
 * nonce when the send that held it was taken, refused, or left without an answer. The chain's pending
 * count is a counter here, moved as the chain would move it.
 */
import { expect } from "chai";
import { NonceManager, withNonceOutcome } from "../../enclave/executor/send/nonces";

describe("executor: sendTransaction's nonce manager", () => {
  const ADDRESS = "0x00000000000000000000000000000000000000Aa";

  function chain(start: number) {
    const state = { pending: start, reads: 0 };
    const readPending = async () => {
      state.reads++;
      return state.pending;
    };
    return { state, readPending };
  }

  it("reads the pending count once, then hands out consecutive nonces to concurrent sends", async () => {
    const m = new NonceManager();
    const c = chain(7);
    const taken = await Promise.all(
      Array.from({ length: 20 }, () =>
        m.withNonce(1, ADDRESS, c.readPending, async (slot) => {
          await new Promise((r) => setTimeout(r, Math.random() * 3));
          c.state.pending++;
          return { value: slot.nonce, outcome: "taken" as const };
        }),
      ),
    );
    expect([...taken].sort((a, b) => a - b)).to.deep.equal(Array.from({ length: 20 }, (_, i) => 7 + i));
    expect(c.state.reads).to.equal(1);
  });

  it("gives a refused send's nonce to the next send, and re-reads after a send with no answer", async () => {
    const m = new NonceManager();
    const c = chain(0);
    const refused = m.withNonce(1, ADDRESS, c.readPending, async () => {
      throw new Error("policy_denied");
    });
    expect(
      await refused.then(
        () => "sent",
        (e: Error) => e.message,
      ),
    ).to.equal("policy_denied");
    const next = await m.withNonce(1, ADDRESS, c.readPending, async (slot) => ({
      value: slot.nonce,
      outcome: "free" as const,
    }));
    expect(next).to.equal(0);
    // No answer: the chain took it after all; the next send learns that from the pending count.
    const lost = m.withNonce(1, ADDRESS, c.readPending, async () => {
      c.state.pending = 1;
      throw withNonceOutcome(new Error("no answer"), "unknown");
    });
    expect(
      await lost.then(
        () => "sent",
        (e: Error) => e.message,
      ),
    ).to.equal("no answer");
    const reads = c.state.reads;
    const after = await m.withNonce(1, ADDRESS, c.readPending, async (slot) => ({
      value: slot.nonce,
      outcome: "taken" as const,
    }));
    expect(after).to.equal(1);
    expect(c.state.reads).to.equal(reads + 1);
  });

  it("keeps one counter per chain and address, whatever the address's case", async () => {
    const m = new NonceManager();
    const a = chain(5);
    const b = chain(100);
    const use = async (slot: { nonce: number }) => ({ value: slot.nonce, outcome: "taken" as const });
    expect(await m.withNonce(1, ADDRESS, a.readPending, use)).to.equal(5);
    expect(await m.withNonce(1, ADDRESS.toLowerCase(), a.readPending, use)).to.equal(6);
    expect(await m.withNonce(2, ADDRESS, b.readPending, use)).to.equal(100);
  });

  it("re-reads a counter left idle (a dropped transaction or a reset chain leaves no lasting gap)", async () => {
    const m = new NonceManager(50);
    const c = chain(4);
    const use = async (slot: { nonce: number }) => ({ value: slot.nonce, outcome: "taken" as const });
    expect(await m.withNonce(1, ADDRESS, c.readPending, use)).to.equal(4);
    expect(await m.withNonce(1, ADDRESS, c.readPending, use)).to.equal(5); // within the burst: the counter
    c.state.pending = 5; // the transaction with nonce 5 was dropped
    await new Promise((r) => setTimeout(r, 80));
    expect(await m.withNonce(1, ADDRESS, c.readPending, use)).to.equal(5);
    expect(c.state.reads).to.equal(2);
  });

  it("resync takes the chain's count (after a nonce too low)", async () => {
    const m = new NonceManager();
    const c = chain(3);
    const use = async (slot: { nonce: number }) => ({ value: slot.nonce, outcome: "taken" as const });
    expect(await m.withNonce(1, ADDRESS, c.readPending, use)).to.equal(3);
    c.state.pending = 9; // another sender used 4..8
    const got = await m.withNonce(1, ADDRESS, c.readPending, async (slot) => {
      expect(slot.nonce).to.equal(4);
      await slot.resync();
      return { value: slot.nonce, outcome: "taken" as const };
    });
    expect(got).to.equal(9);
    expect(await m.withNonce(1, ADDRESS, c.readPending, use)).to.equal(10);
  });
});
