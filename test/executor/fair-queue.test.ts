/**
 * The choice between accounts (enclave/executor/fair-queue.ts): one queue per account, the account
 * holding the least goes first, ties round-robin; interactive work before background work (triggered
 * runs), which keeps one dispatch in BACKGROUND_EVERY; and the share of workers one account may hold.
 */
import { expect } from "chai";
import fc from "fast-check";
import {
  BACKGROUND_EVERY,
  FairQueue,
  PriorityFairQueue,
  mayTakeWorker,
  workerShare,
} from "../../enclave/executor/fair-queue";

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

  describe("PriorityFairQueue: interactive before background", function () {
    /** Items named by class: "t…" and "u…" are background, anything else interactive. */
    const priorityOf = (item: string) => (/^[tu]/.test(item) ? "background" : "interactive");

    function takeAllP(q: PriorityFairQueue<string>): string[] {
      const out: string[] = [];
      for (let next = q.take(all, none); next !== undefined; next = q.take(all, none)) out.push(next.item);
      return out;
    }

    it("interleaves one background dispatch in four while both wait, round-robin inside each class", function () {
      expect(BACKGROUND_EVERY).to.equal(4);
      const q = new PriorityFairQueue<string>(priorityOf);
      for (let i = 1; i <= 3; i++) q.push("trig", `t${i}`);
      for (let i = 1; i <= 6; i++) q.push("a", `a${i}`);
      for (let i = 1; i <= 3; i++) q.push("b", `b${i}`);
      q.push("trig2", "u1");
      expect(q.size).to.equal(13);
      expect([...q.accounts()].sort()).to.deep.equal(["a", "b", "trig", "trig2"]);
      expect(takeAllP(q)).to.deep.equal([
        ...["a1", "b1", "a2", "t1"],
        ...["b2", "a3", "b3", "u1"],
        ...["a4", "a5", "a6", "t2"],
        "t3",
      ]);
      expect(q.size).to.equal(0);
    });

    it("background work goes at once when no interactive run waits; an interactive run arriving goes first", function () {
      const q = new PriorityFairQueue<string>(priorityOf);
      for (let i = 1; i <= 10; i++) q.push("trig", `t${i}`);
      expect(q.take(all, none)?.item).to.equal("t1");
      expect(q.take(all, none)?.item).to.equal("t2");
      q.push("a", "a1");
      // The account holding more (the trigger's, say, with runs in workers) changes nothing across classes.
      expect(q.take(all, (acc) => (acc === "a" ? 5 : 0))?.item).to.equal("a1");
      expect(q.take(all, none)?.item).to.equal("t3");
    });

    it("background's turn waits for an eligible background run, and is then served first", function () {
      const q = new PriorityFairQueue<string>(priorityOf, 2);
      q.push("trig", "t1");
      for (let i = 1; i <= 4; i++) q.push("a", `a${i}`);
      const notTrig = (acc: string) => acc !== "trig";
      expect(q.take(all, none)?.item).to.equal("a1");
      // Background's turn, but its account may not start now (at its share, say): interactive goes on.
      expect(q.take(notTrig, none)?.item).to.equal("a2");
      expect(q.take(notTrig, none)?.item).to.equal("a3");
      expect(q.take(all, none)?.item).to.equal("t1");
      expect(q.take(all, none)?.item).to.equal("a4");
    });

    it("a background item put back keeps its class and its turn at the head of its account", function () {
      const q = new PriorityFairQueue<string>(priorityOf);
      q.push("trig", "t2");
      q.unshift("trig", "t1");
      q.push("a", "a1");
      expect(takeAllP(q)).to.deep.equal(["a1", "t1", "t2"]);
      q.push("a", "a2");
      q.push("trig", "t3");
      expect(q.drain().sort()).to.deep.equal(["a2", "t3"]);
      expect(q.size).to.equal(0);
    });

    it("property: background is never passed over more than N-1 times in a row, nor served while interactive waits out of turn", function () {
      const op = fc.oneof(
        fc.record({ push: fc.constantFrom("a", "b", "c"), background: fc.boolean() }),
        fc.record({ take: fc.constant(true), blocked: fc.constantFrom(null, "a", "b", "c", "t1", "t2") }),
      );
      fc.assert(
        fc.property(fc.integer({ min: 1, max: 6 }), fc.array(op, { maxLength: 300 }), (every, ops) => {
          const q = new PriorityFairQueue<string>(priorityOf, every);
          let n = 0;
          /** Interactive dispatches in a row while an eligible background item waited. */
          let passedOver = 0;
          const waiting = { interactive: new Map<string, number>(), background: new Map<string, number>() };
          for (const o of ops) {
            if ("push" in o) {
              const account = o.background ? (o.push === "a" ? "t1" : "t2") : o.push;
              const cls = o.background ? "background" : "interactive";
              q.push(account, `${o.background ? "t" : "i"}${n++}`);
              waiting[cls].set(account, (waiting[cls].get(account) ?? 0) + 1);
              continue;
            }
            const eligible = (acc: string) => acc !== o.blocked;
            const has = (cls: "interactive" | "background") =>
              [...waiting[cls]].some(([acc, k]) => k > 0 && eligible(acc));
            const [bgWaits, fgWaits] = [has("background"), has("interactive")];
            const next = q.take(eligible, none);
            if (!bgWaits && !fgWaits) {
              expect(next).to.equal(undefined);
              continue;
            }
            expect(next).to.not.equal(undefined);
            const cls = priorityOf(next!.item);
            expect(eligible(next!.account)).to.equal(true);
            waiting[cls].set(next!.account, waiting[cls].get(next!.account)! - 1);
            const backgroundLeft = [...waiting.background.values()].reduce((x, y) => x + y, 0);
            if (cls === "background") {
              // Served while interactive work could go: only on its turn.
              if (fgWaits) expect(passedOver).to.be.at.least(every - 1);
              passedOver = 0;
            } else if (backgroundLeft === 0) {
              passedOver = 0;
            } else if (bgWaits) {
              passedOver++;
              expect(passedOver, "interactive dispatches in a row past waiting background").to.be.at.most(
                every - 1,
              );
            }
          }
        }),
        { numRuns: 300 },
      );
    });
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
