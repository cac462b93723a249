/**
 * Scheduling between accounts (enclave/executor/index.ts, pump; docs/actions.md, "Scheduling between
 * accounts"): one account's flood of long runs, or of key operations, must not make another account's
 * work wait behind it. Asserted on the order in which things start, never on wall time.
 */
import { expect } from "chai";
import { ActionExecutor, type RunRequest, type RunResult } from "../../enclave/executor";
import { makeKeys, pkpIds, TEST_CID, waitFor } from "./helpers";

describe("executor: fair scheduling between accounts", function () {
  this.timeout(60_000);
  const keys = makeKeys();
  const { allowed } = pkpIds();

  /** The order in which runs start: each run's first act is a key operation, whose authorization logs it. */
  function starts() {
    const log: string[] = [];
    const request = (account: string, name: string, body: string, extra: Partial<RunRequest> = {}) => ({
      account,
      code: `async function main(p) { await Actions.getPublicKey({ pkpId: p.pkpId }); ${body} }`,
      cid: TEST_CID,
      jsParams: { pkpId: allowed },
      authorizePkp: async () => {
        if (!log.includes(name)) log.push(name);
        return allowed;
      },
      ...extra,
    });
    return { log, request };
  }

  /**
   * Start the reserve worker (two accounts at once), wait until it is warm, and until those two
   * accounts no longer count as recent (RECENT_MS in enclave/executor/index.ts).
   */
  async function warmReserve(ex: ActionExecutor): Promise<void> {
    await Promise.all(
      ["warm-1", "warm-2"].map((account) =>
        ex.run({ account, code: `return 1;`, cid: TEST_CID, authorizePkp: async () => allowed }),
      ),
    );
    await ex.ready();
    await new Promise((r) => setTimeout(r, 1100));
  }

  const settle = (p: Promise<RunResult>) => p.catch((e: unknown) => e);

  it("another account's run starts before a flood's queued runs (pool of two and its reserve)", async function () {
    const ex = new ActionExecutor({ keys, poolSize: 2 });
    try {
      await ex.ready();
      await warmReserve(ex);
      const { log, request } = starts();
      const flood = Array.from({ length: 6 }, (_, i) =>
        settle(ex.run(request("flood", `flood-${i + 1}`, `await sleep(300); return 1;`))),
      );
      await waitFor(() => log.length === 2);
      const other = await ex.run(request("other", "other", `return "other";`));
      expect(other.response).to.equal("other");
      await Promise.all(flood);
      expect(log.indexOf("other")).to.equal(2);
    } finally {
      await ex.close();
    }
  });

  it("an interactive run of another account starts before triggered (background) runs queued ahead of it", async function () {
    const ex = new ActionExecutor({ keys, poolSize: 1, reserveWorkers: 0 });
    try {
      await ex.ready();
      const { log, request } = starts();
      const hold = settle(ex.run(request("x", "hold", `await sleep(300); return 1;`)));
      await waitFor(() => log.length === 1);
      const background = [1, 2, 3].map((i) =>
        settle(ex.run(request("trig", `trig-${i}`, `return 1;`, { priority: "background" }))),
      );
      const interactive = settle(ex.run(request("b", "b", `return 1;`)));
      await Promise.all([hold, ...background, interactive]);
      // Without classes, round-robin between the two accounts would have started trig-1 first.
      expect(log).to.deep.equal(["hold", "b", "trig-1", "trig-2", "trig-3"]);
    } finally {
      await ex.close();
    }
  });

  it("without a reserve, the first worker the flood frees goes to the waiting account", async function () {
    const ex = new ActionExecutor({ keys, poolSize: 2, reserveWorkers: 0 });
    try {
      await ex.ready();
      const { log, request } = starts();
      // The first run ends well before the others, so that the worker it frees is the one in question.
      const flood = Array.from({ length: 6 }, (_, i) =>
        settle(ex.run(request("flood", `flood-${i + 1}`, `await sleep(${i === 0 ? 300 : 1500}); return 1;`))),
      );
      await waitFor(() => log.length === 2);
      const other = settle(ex.run(request("other", "other", `return "other";`)));
      await Promise.all([other, ...flood]);
      expect(ex.stats().poolSize).to.equal(2);
      expect(log.indexOf("other")).to.equal(2);
    } finally {
      await ex.close();
    }
  });

  it("while one account's busy loops fill the pool, another account's run finishes before any of them", async function () {
    const ex = new ActionExecutor({ keys, poolSize: 2 });
    try {
      await ex.ready();
      await warmReserve(ex);
      const { log, request } = starts();
      const ended: string[] = [];
      const flood = Array.from({ length: 3 }, (_, i) =>
        settle(
          ex.run(request("flood", `flood-${i + 1}`, `for (;;) {}`, { limits: { wallTimeMs: 2000 } })),
        ).then(() => ended.push("flood")),
      );
      await waitFor(() => log.length === 2);
      const other = await ex.run(request("other", "other", `return "other";`));
      ended.push("other");
      expect(other.response).to.equal("other");
      await Promise.all(flood);
      expect(ended[0]).to.equal("other");
    } finally {
      await ex.close();
    }
  });

  it("one account's flood of key operations has at most four in progress; another account's is served meanwhile", async function () {
    const ex = new ActionExecutor({ keys, poolSize: 2 });
    try {
      await ex.ready();
      let floodCalls = 0;
      const gates: Array<() => void> = [];
      const flood = ex.run({
        account: "flood",
        code: `async function main(p) {
          await Promise.all(Array.from({ length: 200 }, () => Actions.getPublicKey({ pkpId: p.pkpId })));
          return "flood done";
        }`,
        cid: TEST_CID,
        jsParams: { pkpId: allowed },
        authorizePkp: () => {
          floodCalls++;
          return new Promise<string>((resolve) => gates.push(() => resolve(allowed)));
        },
      });
      await waitFor(() => floodCalls > 0);
      const other = await ex.run({
        account: "other",
        code: `async function main(p) { return await Actions.getAddress({ pkpId: p.pkpId }); }`,
        cid: TEST_CID,
        jsParams: { pkpId: allowed },
        authorizePkp: async () => allowed,
      });
      expect(other.has_error, JSON.stringify(other.error)).to.equal(false);
      expect(floodCalls).to.be.at.most(4);
      // Open the gates as they come until the flood has been served.
      const opener = setInterval(() => gates.splice(0).forEach((g) => g()), 5);
      try {
        expect((await flood).response).to.equal("flood done");
      } finally {
        clearInterval(opener);
      }
      expect(floodCalls).to.equal(200);
    } finally {
      await ex.close();
    }
  });

  it("accounts above their share still use workers that nobody else is waiting for", async function () {
    const ex = new ActionExecutor({ keys, poolSize: 3, reserveWorkers: 0 });
    try {
      await ex.ready();
      const { log, request } = starts();
      // Two accounts on three workers, their runs arriving in turn: a share of one each, and the third
      // worker is not left idle.
      const runs = [1, 2, 3].flatMap((i) =>
        ["a", "b"].map((account) =>
          settle(ex.run(request(account, `${account}-${i}`, `await sleep(500); return 1;`))),
        ),
      );
      await waitFor(() => log.length === 3);
      expect(ex.stats().busy).to.equal(3);
      await Promise.all(runs);
    } finally {
      await ex.close();
    }
  });

  it("an account alone uses every worker of its pool size, but not the reserve", async function () {
    const ex = new ActionExecutor({ keys, poolSize: 2 });
    try {
      await ex.ready();
      await warmReserve(ex);
      const { log, request } = starts();
      const runs = Array.from({ length: 4 }, (_, i) =>
        settle(ex.run(request("alone", `alone-${i + 1}`, `await sleep(300); return 1;`))),
      );
      await waitFor(() => log.length === 2);
      await new Promise((r) => setTimeout(r, 100));
      expect(ex.stats()).to.include({ poolSize: 3, busy: 2 });
      await Promise.all(runs);
    } finally {
      await ex.close();
    }
  });
});

describe("executor: isolateAccounts (a worker never runs two accounts' code)", function () {
  this.timeout(60_000);
  const keys = makeKeys();
  const run = (ex: ActionExecutor, account: string) =>
    ex.run({ account, code: `return 1;`, cid: TEST_CID, authorizePkp: async () => "" });

  it("replaces the worker before it runs another account's code", async function () {
    const ex = new ActionExecutor({ keys, poolSize: 1, reserveWorkers: 0, isolateAccounts: true });
    try {
      await ex.ready();
      for (const account of ["a", "b", "a"]) expect((await run(ex, account)).response).to.equal(1);
      expect(ex.stats().restarts).to.equal(2);
    } finally {
      await ex.close();
    }
  });

  it("keeps the worker while the account stays the same", async function () {
    const ex = new ActionExecutor({ keys, poolSize: 1, reserveWorkers: 0, isolateAccounts: true });
    try {
      await ex.ready();
      for (const account of ["a", "a", "a"]) expect((await run(ex, account)).response).to.equal(1);
      expect(ex.stats().restarts).to.equal(0);
    } finally {
      await ex.close();
    }
  });
});
