/**
 * Key operations on the main thread, fair between accounts (enclave/executor/key-op-scheduler.ts):
 * a bounded number per account in progress, accounts served fairly, a bounded number started per
 * turn of the event loop.
 */
import { expect } from "chai";
import { KeyOpScheduler } from "../../enclave/executor/key-op-scheduler";

describe("executor: key-operation scheduler", function () {
  /** A task that records its start and finishes when the test says so. */
  function gated(log: string[], name: string, gates: Array<() => void>) {
    return () => {
      log.push(name);
      return new Promise<void>((resolve) => gates.push(resolve));
    };
  }

  it("holds one account to perAccount operations in progress; the rest wait", function () {
    const s = new KeyOpScheduler(4, 1000);
    const log: string[] = [];
    const gates: Array<() => void> = [];
    for (let i = 0; i < 100; i++) s.submit("flood", gated(log, `f${i}`, gates), () => true);
    expect(log).to.have.length(4);
    expect(s.stats()).to.deep.equal({ waiting: 96, inFlight: 4 });
  });

  it("another account's operation starts at once while a flood waits", function () {
    const s = new KeyOpScheduler(4, 1000);
    const log: string[] = [];
    const gates: Array<() => void> = [];
    for (let i = 0; i < 100; i++) s.submit("flood", gated(log, `f${i}`, gates), () => true);
    s.submit("other", gated(log, "o", gates), () => true);
    expect(log.indexOf("o")).to.equal(4);
  });

  it("a freed place goes to the account holding the fewest", async function () {
    const s = new KeyOpScheduler(2, 1000);
    const log: string[] = [];
    const gates: Array<() => void> = [];
    for (let i = 0; i < 10; i++) s.submit("flood", gated(log, `f${i}`, gates), () => true);
    s.submit("other", gated(log, "o1", gates), () => true);
    s.submit("other", gated(log, "o2", gates), () => true);
    expect(log).to.deep.equal(["f0", "f1", "o1", "o2"]);
    gates[0](); // f0 done: flood holds 1, other 2
    await new Promise((r) => setImmediate(r));
    expect(log.slice(4)).to.deep.equal(["f2"]);
  });

  it("drops an operation whose run has ended without starting it", function () {
    const s = new KeyOpScheduler(1, 1000);
    const log: string[] = [];
    const gates: Array<() => void> = [];
    s.submit("a", gated(log, "first", gates), () => true);
    s.submit("a", gated(log, "dropped", gates), () => false);
    s.submit("a", gated(log, "third", gates), () => true);
    gates[0]();
    return new Promise<void>((r) => setImmediate(r)).then(() => {
      expect(log).to.deep.equal(["first", "third"]);
    });
  });

  it("starts at most perTurn operations per turn of the event loop; the next turn continues", async function () {
    const s = new KeyOpScheduler(1000, 10);
    let started = 0;
    const instant = () => {
      started++;
      return Promise.resolve();
    };
    for (let i = 0; i < 25; i++) s.submit(`acc${i % 3}`, instant, () => true);
    expect(started).to.equal(10);
    await new Promise((r) => setImmediate(r));
    expect(started).to.equal(20);
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    expect(started).to.equal(25);
  });
});
