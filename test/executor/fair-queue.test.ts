/**
 * The choice between accounts (enclave/executor/fair-queue.ts): one queue per account, the account
 * holding the least goes first, ties round-robin; and the share of workers one account may hold.
 */
import { expect } from "chai";
import { FairQueue, mayTakeWorker, workerShare } from "../../enclave/executor/fair-queue";

describe("executor: fair queue between accounts", function () {
  const all = () => true;
  const none = () => 0;

  function takeAll(q: FairQueue<string>, load: (a: string) => number = none): string[] {
    const out: string[] = [];
    for (let next = q.take(all, load); next !== undefined; next = q.take(all, load)) out.push(next.item);
    return out;
  }

  it("serves accounts round-robin, each account's items in order", function () {
    const q = new FairQueue<string>();
    for (let i = 1; i <= 4; i++) q.push("a", `a${i}`);
    q.push("b", "b1");
    q.push("b", "b2");
    q.push("c", "c1");
    expect(takeAll(q)).to.deep.equal(["a1", "b1", "c1", "a2", "b2", "a3", "a4"]);
    expect(q.size).to.equal(0);
  });

  it("an account that arrives behind a long backlog is served next, not after the backlog", function () {
    const q = new FairQueue<string>();
    for (let i = 1; i <= 100; i++) q.push("flood", `f${i}`);
    expect(q.take(all, none)?.item).to.equal("f1");
    q.push("other", "o1");
    expect(q.take(all, none)?.item).to.equal("o1");
  });

  it("prefers the account holding the least", function () {
    const q = new FairQueue<string>();
    q.push("a", "a1");
    q.push("b", "b1");
    const held: Record<string, number> = { a: 2, b: 0 };
    expect(q.take(all, (acc) => held[acc])?.item).to.equal("b1");
  });

  it("skips accounts that are not eligible", function () {
    const q = new FairQueue<string>();
    q.push("a", "a1");
    q.push("b", "b1");
    expect(q.take((acc) => acc !== "a", none)).to.deep.equal({ account: "b", item: "b1" });
    expect(q.take((acc) => acc !== "a", none)).to.equal(undefined);
    expect(q.size).to.equal(1);
  });

  it("an item put back goes to the head of its account's queue", function () {
    const q = new FairQueue<string>();
    q.push("a", "a2");
    q.unshift("a", "a1");
    expect(takeAll(q)).to.deep.equal(["a1", "a2"]);
  });

  it("drain empties every queue", function () {
    const q = new FairQueue<string>();
    q.push("a", "a1");
    q.push("b", "b1");
    expect(q.drain().sort()).to.deep.equal(["a1", "b1"]);
    expect(q.size).to.equal(0);
    expect([...q.accounts()]).to.deep.equal([]);
  });

  describe("workerShare", function () {
    it("an account alone may hold the pool it was configured with, not the reserve", function () {
      expect(workerShare(1, 3, 2)).to.equal(2);
    });

    it("two accounts on two workers hold one each", function () {
      expect(workerShare(2, 2, 2)).to.equal(1);
    });

    it("a share rounds down, and is never below one", function () {
      expect(workerShare(2, 3, 2)).to.equal(1);
      expect(workerShare(2, 9, 8)).to.equal(4);
      expect(workerShare(5, 3, 2)).to.equal(1);
    });
  });

  describe("mayTakeWorker", function () {
    const base = { totalWorkers: 3, soloWorkers: 2, keepIdle: 1 };

    it("an account alone takes workers up to its pool size, never the reserve", function () {
      expect(mayTakeWorker({ ...base, held: 1, accounts: 1, idleWorkers: 2 })).to.equal(true);
      expect(mayTakeWorker({ ...base, held: 2, accounts: 1, idleWorkers: 1 })).to.equal(false);
    });

    it("an account at its share does not take the last idle worker from the next account", function () {
      expect(mayTakeWorker({ ...base, held: 1, accounts: 2, idleWorkers: 1 })).to.equal(false);
    });

    it("an account at its share leaves a worker for an account between two runs", function () {
      expect(mayTakeWorker({ ...base, keepIdle: 2, held: 1, accounts: 2, idleWorkers: 2 })).to.equal(false);
    });

    it("with many accounts, one above its share takes workers nobody waits for, leaving the reserve", function () {
      const nine = { totalWorkers: 9, soloWorkers: 8, keepIdle: 1, accounts: 5 };
      expect(mayTakeWorker({ ...nine, held: 1, idleWorkers: 4 })).to.equal(true);
      expect(mayTakeWorker({ ...nine, held: 1, idleWorkers: 1 })).to.equal(false);
      expect(mayTakeWorker({ ...nine, held: 2, idleWorkers: 4 })).to.equal(false);
    });

    it("never without an idle worker", function () {
      expect(mayTakeWorker({ ...base, held: 0, accounts: 2, idleWorkers: 0 })).to.equal(false);
    });
  });
});
