/**
 * Reorganisation-safe permission cache: anvil replaces recent blocks (anvil_reorg: depth, then the
 * transactions to mine in the new blocks as [raw transaction, block offset] pairs), and the relayer's
 * answers follow the chain the node now has, not the blocks it had processed.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { expect } from "chai";
import fc from "fast-check";
import { BlockWindow } from "../../relayer/chain/logs/blockWindow";
import { LoadedAccounts } from "../../relayer/permissions/loadedAccounts";
import { setupAccount, startStack, type Stack } from "../helpers/stack";

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

async function rpc(s: Stack, method: string, params: unknown[]): Promise<Json> {
  return s.provider.send(method, params);
}

async function headNumber(s: Stack): Promise<number> {
  return Number(BigInt(await rpc(s, "eth_blockNumber", [])));
}

/** The raw signed transaction mined in block `n` (path-A writes are one transaction per block here). */
async function rawTxOfBlock(s: Stack, n: number): Promise<string> {
  const block = await rpc(s, "eth_getBlockByNumber", ["0x" + n.toString(16), false]);
  expect(block.transactions, `block ${n}`).to.have.length(1);
  return rpc(s, "eth_getRawTransactionByHash", [block.transactions[0]]);
}

/** Polls `probe` until it returns `want` (the cache notices within a poll interval or two). */
async function eventually<T>(probe: () => Promise<T>, want: T, what: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  let last: T | undefined;
  while (Date.now() < deadline) {
    last = await probe();
    if (JSON.stringify(last) === JSON.stringify(want)) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  expect(last, what).to.deep.equal(want);
}

describe("relayer: reorganisation-safe permission cache", function () {
  this.timeout(120_000);

  describe("within the confirmation depth (SIGIL_CONFIRMATIONS=3)", function () {
    let s: Stack;
    before(async () => {
      s = await startStack({ confirmations: 3 });
    });
    after(async () => {
      await s?.close();
    });

    async function usageKey(accountKey: string, groupId: number): Promise<{ key: string; id: string }> {
      const r = await s.api("POST", "/core/v1/add_usage_api_key", {
        key: accountKey,
        body: { name: "server", execute_in_groups: [groupId] },
      });
      expect(r.status, JSON.stringify(r.body)).to.equal(201);
      return { key: r.body.usage_api_key, id: r.body.id };
    }

    const runStatus = (key: string, a: { cid: string; pkpId: string }) => async () =>
      (await s.api("POST", "/core/v1/svc_action", { key, body: { cid: a.cid, pkp_id: a.pkpId } })).status;

    it("a revocation that a reorganisation drops is undone: the key executes again", async () => {
      const a = await setupAccount(s);
      const k = await usageKey(a.accountKey, a.groupId);
      expect(await runStatus(k.key, a)()).to.equal(200);
      const rm = await s.api("POST", "/core/v1/remove_usage_api_key", {
        key: a.accountKey,
        body: { id: k.id },
      });
      expect(rm.status).to.equal(200);
      expect(await runStatus(k.key, a)()).to.equal(401);
      await rpc(s, "anvil_reorg", [1, []]); // the revocation's block is replaced by an empty one
      await eventually(runStatus(k.key, a), 200, "the key after its revocation was dropped");
    });

    it("a revocation the reorganisation re-mines is applied once, and a dropped group change is undone", async () => {
      const a = await setupAccount(s);
      const k = await usageKey(a.accountKey, a.groupId);
      const rm = await s.api("POST", "/core/v1/remove_usage_api_key", {
        key: a.accountKey,
        body: { id: k.id },
      });
      expect(rm.status).to.equal(200);
      const revokedIn = await headNumber(s);
      const second = await s.api("POST", "/core/v1/pkps/create", { key: a.accountKey, body: { name: "p2" } });
      expect(second.status).to.equal(201);
      const added = await s.api("POST", `/core/v1/groups/${a.groupId}/pkps`, {
        key: a.accountKey,
        body: { add: [second.body.pkp_id] },
      });
      expect(added.status).to.equal(200);
      const group = async () =>
        (await s.api("GET", `/core/v1/groups/${a.groupId}`, { key: a.accountKey })).body.pkps as string[];
      expect(await group()).to.deep.equal([a.pkpId, second.body.pkp_id]);
      // Replace the revocation's block and the two after it; the new first block carries the revocation
      // again (same transaction, new block), the PKP and its group membership are gone.
      const depth = (await headNumber(s)) - revokedIn + 1;
      expect(depth).to.equal(3);
      await rpc(s, "anvil_reorg", [depth, [[await rawTxOfBlock(s, revokedIn), 0]]]);
      await eventually(group, [a.pkpId], "the group's PKPs after the reorganisation");
      expect(await runStatus(k.key, a)()).to.equal(401);
      const keys = await s.api("GET", "/core/v1/list_api_keys", { key: a.accountKey });
      if (keys.status === 200) expect(JSON.stringify(keys.body)).not.to.contain(k.id);
    });

    it("a key added in a dropped block stops working", async () => {
      const a = await setupAccount(s);
      const k = await usageKey(a.accountKey, a.groupId);
      expect(await runStatus(k.key, a)()).to.equal(200);
      await rpc(s, "anvil_reorg", [1, []]);
      await eventually(runStatus(k.key, a), 401, "a key whose KeyAdded was dropped");
    });

    it("an action running with a key whose KeyAdded is dropped cannot sign afterwards", async () => {
      const a = await setupAccount(
        s,
        `async function main(p) {
          await sleep(p.wait);
          return await Actions.signMessage({ pkpId: p.pkp, message: "after the reorganisation" });
        }`,
      );
      const k = await usageKey(a.accountKey, a.groupId);
      const run = s.api("POST", "/core/v1/svc_action", {
        key: k.key,
        body: { cid: a.cid, pkp_id: a.pkpId, js_params: { pkp: a.pkpId, wait: 1_500 } },
      });
      await new Promise((r) => setTimeout(r, 300));
      await rpc(s, "anvil_reorg", [1, []]);
      const r = await run;
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
      expect(r.body.has_error).to.equal(true);
      expect(r.body.response ?? null).to.equal(null);
    });

    it("a key added in a block the chain rolled back (anvil_rollback: a shorter chain) stops working", async () => {
      const a = await setupAccount(s);
      const k = await usageKey(a.accountKey, a.groupId);
      expect(await runStatus(k.key, a)()).to.equal(200);
      await rpc(s, "anvil_rollback", [1]);
      await eventually(runStatus(k.key, a), 401, "a key whose block was rolled back");
      // The gas wallets re-read their nonces: the next write lands.
      const again = await usageKey(a.accountKey, a.groupId);
      expect(await runStatus(again.key, a)()).to.equal(200);
    });

    it("a PKP created in a dropped block is no longer found", async () => {
      const a = await setupAccount(s);
      const p = await s.api("POST", "/core/v1/pkps/create", { key: a.accountKey, body: { name: "gone" } });
      expect(p.status).to.equal(201);
      const found = async () =>
        (await s.api("GET", `/core/v1/pkps/${p.body.pkp_id}`, { key: a.accountKey })).status;
      expect(await found()).to.equal(200);
      await rpc(s, "anvil_reorg", [1, []]);
      await eventually(found, 404, "a PKP whose PkpCreated was dropped");
    });

    it("the cursor checkpoint after a reorganisation names the chain's blocks, and a restart resumes from it", async () => {
      const a = await setupAccount(s);
      const k = await usageKey(a.accountKey, a.groupId);
      await rpc(s, "anvil_reorg", [1, []]);
      await eventually(runStatus(k.key, a), 401, "a key whose KeyAdded was dropped");
      const file = path.join(s.dataDir, "event-cursor.json");
      const checkpoint = async () => {
        const c = JSON.parse(fs.readFileSync(file, "utf8")) as {
          block: number;
          hashes: Record<string, string>;
        };
        const mismatched: number[] = [];
        for (const [h, hash] of Object.entries(c.hashes ?? {})) {
          const b = await rpc(s, "eth_getBlockByNumber", ["0x" + Number(h).toString(16), false]);
          if (b?.hash !== hash) mismatched.push(Number(h));
        }
        return { hasCursorHash: c.hashes?.[String(c.block)] !== undefined, mismatched };
      };
      await eventually(checkpoint, { hasCursorHash: true, mismatched: [] }, "the checkpoint");
      // Replaced while the relayer is down: the restarted cache compares its saved hashes and rolls back.
      const late = await usageKey(a.accountKey, a.groupId);
      expect(await runStatus(late.key, a)()).to.equal(200);
      await s.relayer.close();
      await rpc(s, "anvil_reorg", [1, []]);
      await s.restartRelayer();
      expect(await runStatus(late.key, a)()).to.equal(401);
      const again = await usageKey(a.accountKey, a.groupId);
      expect(await runStatus(again.key, a)()).to.equal(200);
      expect(await runStatus(k.key, a)()).to.equal(401);
      await eventually(
        checkpoint,
        { hasCursorHash: true, mismatched: [] },
        "the checkpoint after the restart",
      );
    });
  });

  describe("deeper than the confirmation depth (default 0)", function () {
    let s: Stack;
    before(async () => {
      s = await startStack();
    });
    after(async () => {
      await s?.close();
    });

    it("rebuilds every projection: a key added three blocks deep in the replaced chain stops working", async () => {
      const a = await setupAccount(s);
      const r = await s.api("POST", "/core/v1/add_usage_api_key", {
        key: a.accountKey,
        body: { name: "deep", execute_in_groups: [a.groupId] },
      });
      expect(r.status).to.equal(201);
      const key = r.body.usage_api_key as string;
      await s.api("POST", "/core/v1/pkps/create", { key: a.accountKey, body: { name: "x" } });
      await s.api("POST", "/core/v1/pkps/create", { key: a.accountKey, body: { name: "y" } });
      const run = async () =>
        (await s.api("POST", "/core/v1/svc_action", { key, body: { cid: a.cid, pkp_id: a.pkpId } })).status;
      expect(await run()).to.equal(200);
      await rpc(s, "anvil_reorg", [3, []]);
      await eventually(run, 401, "a key whose KeyAdded was three blocks deep in the replaced chain");
    });
  });
});

describe("permissions: BlockWindow.forkPoint", function () {
  const hash = (n: number, fork = "a") => "0x" + fork.repeat(60) + n.toString(16).padStart(4, "0");
  const windowOf = (from: number, to: number) => {
    const w = new BlockWindow(to - from + 1);
    for (let h = from; h <= to; h++) w.record(h, hash(h));
    return w;
  };
  const chain = (from: number, to: number, forkAt: number | null, missingAbove = Infinity) => {
    const m = new Map<number, string | undefined>();
    for (let h = from; h <= to; h++)
      m.set(h, h > missingAbove ? undefined : forkAt !== null && h >= forkAt ? hash(h, "b") : hash(h));
    return m;
  };

  it("is null when every remembered block is still the chain's", () => {
    expect(windowOf(10, 13).forkPoint(chain(10, 13, null))).to.equal(null);
  });
  it("is the lowest replaced height", () => {
    expect(windowOf(10, 13).forkPoint(chain(10, 13, 12))).to.equal(12);
  });
  it("is the height above the chain's head when the chain only got shorter", () => {
    expect(windowOf(10, 13).forkPoint(chain(10, 13, null, 11))).to.equal(12);
  });
  it('is "deep" when even the oldest remembered block was replaced', () => {
    expect(windowOf(10, 13).forkPoint(chain(10, 13, 10))).to.equal("deep");
  });
  it("finds exactly the first replaced height for any window, fork and shortening (property)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 1_000 }), // lowest remembered height
        fc.integer({ min: 1, max: 12 }), // remembered heights
        fc.option(fc.integer({ min: 0, max: 14 }), { nil: null }), // fork offset (null: no fork)
        fc.integer({ min: 0, max: 14 }), // how many top heights the chain no longer has
        (low, size, forkOffset, shortened) => {
          const high = low + size - 1;
          const w = windowOf(low, high);
          const forkAt = forkOffset === null ? null : low + forkOffset;
          const headAt = high - shortened;
          const got = w.forkPoint(chain(low, high, forkAt, headAt));
          // The first height whose remembered block is no longer the chain's, if any.
          let first: number | null = null;
          for (let h = low; h <= high; h++)
            if (h > headAt || (forkAt !== null && h >= forkAt)) {
              first = h;
              break;
            }
          const expected = first === null ? null : first === low ? "deep" : first;
          expect(got).to.equal(expected);
        },
      ),
    );
  });

  it("forgets heights below the window and from a fork point on", () => {
    const w = windowOf(10, 13);
    w.prune(14);
    expect(w.heights).to.deep.equal([11, 12, 13]);
    w.dropFrom(12);
    expect(w.heights).to.deep.equal([11]);
  });

  it("the cache drops exactly the accounts that replaced heights touched (LoadedAccounts)", () => {
    const changed: number[] = [];
    const accounts = new LoadedAccounts((id) => changed.push(id));
    accounts.touch(12, 7);
    accounts.touch(13, 8);
    accounts.touch(10, 9);
    accounts.settle(11); // height 10 can no longer be replaced
    expect(accounts.dropTouchedFrom(12)).to.equal(2);
    expect(changed.sort()).to.deep.equal([7, 8]);
    expect(accounts.dropTouchedFrom(0), "height 10 was settled").to.equal(0);
  });
});
