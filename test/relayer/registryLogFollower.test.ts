/**
 * The registry-log follower (relayer/chain/logs/) on a real anvil with the real contracts: ranges of at
 * most `maxRange` blocks, the confirmation depth (how deep a reorganisation is undone exactly, and where a
 * confirmed-only consumer stops), reorganisations rolling subscriptions back, and a restart resuming
 * from the persisted cursor.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import pino from "pino";
import { NonceManager, Wallet, ZeroAddress, type JsonRpcProvider } from "ethers";
import {
  RegistryLogFollower,
  type FollowerOptions,
  type LogSubscription,
} from "../../relayer/chain/logs/follower";
import { blockRanges, getLogs, nextConfirmedRange } from "../../relayer/chain/logs/ranges";
import { deploySigil, type SigilDeployment } from "../../scripts/deploy";
import { AccountRegistry__factory } from "../../typechain-types";
import { DEV_KEY, startChain, type TestChain } from "../helpers/anvil";
import { testProvider } from "../helpers/stack";

/** What a subscription saw: the events it holds (block:name), its batches, rollbacks and resets. */
function recorder() {
  const r = {
    held: [] as Array<{ block: number; name: string }>,
    batches: [] as Array<[number, number]>,
    rollbacks: [] as number[],
    resets: 0,
    subscription: null as unknown as LogSubscription,
  };
  r.subscription = {
    onLogs: async (b) => () => {
      r.batches.push([b.from, b.to]);
      for (const l of b.logs) r.held.push({ block: l.block, name: l.ev.name });
    },
    onRollback: (fork) => {
      r.rollbacks.push(fork);
      r.held = r.held.filter((e) => e.block < fork);
    },
    onReset: () => {
      r.resets++;
      r.held = [];
    },
  };
  return r;
}

describe("registry-log follower", function () {
  this.timeout(120_000);
  let chain: TestChain;
  let provider: JsonRpcProvider;
  let d: SigilDeployment;
  let createPkp: (name: string) => Promise<number>;
  const dirs: string[] = [];

  before(async () => {
    chain = await startChain();
    provider = testProvider(chain.rpcUrl);
    d = await deploySigil(new NonceManager(new Wallet(DEV_KEY, provider)));
    // A plain wallet asks the node for its nonce: reorganisations below drop its transactions.
    const owner = new Wallet(DEV_KEY, provider);
    const registry = AccountRegistry__factory.connect(d.registry, owner);
    await (await registry.createAccount("follower", ZeroAddress)).wait();
    createPkp = async (name) => (await (await registry.createPkp(name, "")).wait())!.blockNumber;
  });
  after(async () => {
    provider?.destroy();
    await chain?.stop();
    for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
  });

  const head = async () => provider.getBlockNumber();
  const mine = (n: number) => provider.send("anvil_mine", ["0x" + n.toString(16)]);
  function follower(
    o: {
      dataDir?: string;
      confirmations?: number;
      pollIntervalMs?: number;
      maxRange?: number;
      checkpointEveryMs?: number;
    } = {},
    provider_: FollowerOptions["provider"] = provider,
  ) {
    const dataDir = o.dataDir ?? fs.mkdtempSync(path.join(os.tmpdir(), "sigil-follower-"));
    dirs.push(dataDir);
    const lines: Array<Record<string, unknown>> = [];
    const f = new RegistryLogFollower({
      provider: provider_,
      registry: d.registry,
      chainId: 31337,
      deployBlock: d.deployBlock,
      dataDir,
      pollIntervalMs: o.pollIntervalMs ?? 60_000,
      logger: pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) }),
      confirmations: o.confirmations,
      maxRange: o.maxRange,
      checkpointEveryMs: o.checkpointEveryMs,
    });
    const r = recorder();
    f.subscribe(r.subscription);
    return { f, r, dataDir, lines };
  }

  describe("range splitting", function () {
    it("cuts a span into consecutive ranges of at most the given size", () => {
      expect(blockRanges(10, 9, 5)).to.deep.equal([]);
      expect(blockRanges(0, 11_999, 5_000)).to.deep.equal([
        [0, 4_999],
        [5_000, 9_999],
        [10_000, 11_999],
      ]);
    });

    it("follows a long chain in ranges of at most `maxRange` blocks, each block once, each event once", async () => {
      // 5,000 by default; a smaller range here, since anvil mines some 250 blocks a second.
      await mine(250);
      const late = await createPkp("after the gap");
      const { f, r } = follower({ maxRange: 100 });
      await f.syncTo(await head());
      const sizes = r.batches.map(([a, b]) => b - a + 1);
      expect(Math.max(...sizes)).to.equal(100);
      expect(r.batches.length).to.be.at.least(3);
      expect(r.batches[0][0]).to.equal(d.deployBlock);
      for (let i = 1; i < r.batches.length; i++) expect(r.batches[i][0]).to.equal(r.batches[i - 1][1] + 1);
      expect(r.batches[r.batches.length - 1][1]).to.equal(await head());
      expect(r.held.filter((e) => e.block === late)).to.deep.equal([{ block: late, name: "PkpCreated" }]);
    });

    it("asks a node that caps ranges for nothing wider than the cap", async () => {
      const asked: Array<[number, number]> = [];
      const capped = {
        send: async (method: string, params: unknown[]) => {
          const { fromBlock, toBlock } = params[0] as { fromBlock: string; toBlock: string };
          asked.push([Number(fromBlock), Number(toBlock)]);
          if (Number(toBlock) - Number(fromBlock) + 1 > 1_000) throw new Error("range too wide");
          return provider.send(method, params);
        },
      };
      const to = await head();
      const logs = await getLogs(capped, { address: d.registry }, 0, to, { maxRange: 1_000 });
      const all = await getLogs(provider, { address: d.registry }, 0, to, { wholeSpanFirst: true });
      expect(logs.map((l) => l.transactionHash)).to.deep.equal(all.map((l) => l.transactionHash));
      expect(asked.every(([a, b]) => b - a + 1 <= 1_000)).to.equal(true);
    });
  });

  describe("the confirmation depth", function () {
    it("a confirmed-only consumer's next range stops `confirmations` blocks below the head", () => {
      expect(nextConfirmedRange(100, 3, 90, 2_000)).to.deep.equal([91, 97]);
      expect(nextConfirmedRange(100, 3, 97, 2_000)).to.equal(null);
      expect(nextConfirmedRange(100, 0, 90, 5)).to.deep.equal([91, 95]);
    });

    it("a reorganisation as deep as the confirmations is rolled back exactly; a deeper one resets", async () => {
      const { f, r } = follower({ confirmations: 3 });
      const blocks = [await createPkp("one"), await createPkp("two"), await createPkp("three")];
      await f.syncTo(await head());
      await provider.send("anvil_reorg", [3, []]);
      await mine(1);
      await f.syncTo(await head());
      expect(r.rollbacks).to.deep.equal([blocks[0]]);
      expect(r.resets).to.equal(0);
      expect(r.held.filter((e) => e.block >= blocks[0])).to.deep.equal([]);

      const shallow = follower({ confirmations: 0 });
      await createPkp("four");
      await createPkp("five");
      await shallow.f.syncTo(await head());
      await provider.send("anvil_reorg", [2, []]);
      await mine(1);
      await shallow.f.syncTo(await head());
      expect([shallow.r.rollbacks, shallow.r.resets]).to.deep.equal([[], 1]);
    });
  });

  describe("reorganisations", function () {
    it("anvil_reorg: the replaced block's event is rolled back, a re-mined one is applied once", async () => {
      const { f, r, lines } = follower({ confirmations: 2 });
      const block = await createPkp("replaced");
      const replacedHash = (await provider.getBlock(block))!.hash!.toLowerCase();
      await f.syncTo(await head());
      expect(r.held.filter((e) => e.block === block)).to.have.length(1);
      await provider.send("anvil_reorg", [1, []]);
      await mine(1);
      await f.syncTo(await head());
      expect(r.rollbacks).to.deep.equal([block]);
      expect(r.held.filter((e) => e.block >= block)).to.deep.equal([]);
      // The log says which block disagreed, and both hashes.
      const warned = lines.filter((l) => String(l.msg).startsWith("chain reorganisation"));
      expect(warned).to.have.length(1);
      expect(warned[0]).to.include({ block, processedHash: replacedHash });
      expect(warned[0].chainHash).to.equal((await provider.getBlock(block))!.hash!.toLowerCase());
      expect(warned[0].chainHash).to.not.equal(replacedHash);
      const again = await createPkp("after");
      await f.syncTo(again);
      expect(r.held.filter((e) => e.block >= block)).to.deep.equal([{ block: again, name: "PkpCreated" }]);
    });

    it("a head read answered before our own receipt's block was mined is no reorganisation", async () => {
      // Under load, a poll's head read can be answered (block N) before a block N+1 of ours is mined,
      // and arrive after that block's receipt was applied (rememberBlock, as applyOwnTransaction does).
      // The node is real; only the head read's answer is held back, as a busy machine would.
      let holdNext = false;
      let asked!: () => void;
      let release!: () => void;
      const headAsked = new Promise<void>((res) => (asked = res));
      const released = new Promise<void>((res) => (release = res));
      const slow = {
        send: async (method: string, params: unknown[]) => {
          const answer = await provider.send(method, params);
          if (holdNext && method === "eth_getBlockByNumber" && params[0] === "latest") {
            holdNext = false;
            asked();
            await released;
          }
          return answer;
        },
      };
      const { f, r, lines } = follower({}, slow);
      await f.syncTo(await head());
      expect(f.lastProcessedBlock).to.equal(await head());
      holdNext = true;
      f.start(); // its first poll reads the head now, and the answer is held back
      await headAsked;
      const ours = await createPkp("ours");
      expect(ours).to.equal(f.lastProcessedBlock + 1);
      f.rememberBlock(ours, (await provider.getBlock(ours))!.hash!);
      release();
      await f.syncTo(ours);
      await f.stop();
      expect(r.rollbacks).to.deep.equal([]);
      expect(lines.filter((l) => String(l.msg).includes("reorganisation"))).to.deep.equal([]);
      expect(r.held.filter((e) => e.block === ours)).to.deep.equal([{ block: ours, name: "PkpCreated" }]);
    });

    it("evm_revert below the cursor: every consumer starts over at the head", async () => {
      const { f, r } = follower({ confirmations: 1, pollIntervalMs: 20 });
      const snapshot = await provider.send("evm_snapshot", []);
      await createPkp("gone 1");
      await createPkp("gone 2");
      await createPkp("gone 3");
      await f.syncTo(await head());
      await provider.send("evm_revert", [snapshot]);
      f.start(); // the head is below the cursor: only a poll of its own notices
      const deadline = Date.now() + 10_000;
      while (r.resets === 0 && Date.now() < deadline) await new Promise((res) => setTimeout(res, 20));
      await f.stop();
      expect(r.resets).to.equal(1);
      expect(f.lastProcessedBlock).to.equal(await head());
      expect(r.held).to.deep.equal([]);
    });
  });

  describe("the persistent cursor", function () {
    it("a restart resumes after the last processed block, and sees a reorganisation that happened while down", async () => {
      const first = follower({ confirmations: 2 });
      await createPkp("before the restart");
      await first.f.syncTo(await head());
      await first.f.stop();
      const stoppedAt = first.f.lastProcessedBlock;
      const saved = JSON.parse(fs.readFileSync(path.join(first.dataDir, "event-cursor.json"), "utf8"));
      expect(saved.block).to.equal(stoppedAt);

      const later = await createPkp("while down");
      const second = follower({ dataDir: first.dataDir, confirmations: 2 });
      await second.f.syncTo(await head());
      expect(second.r.batches[0][0]).to.equal(stoppedAt + 1);
      expect(second.r.held).to.deep.equal([{ block: later, name: "PkpCreated" }]);
      await second.f.stop();

      await provider.send("anvil_reorg", [1, []]); // replaces `later`'s block while nobody follows
      const third = follower({ dataDir: first.dataDir, confirmations: 2 });
      await mine(1);
      await third.f.syncTo(await head());
      expect(third.r.rollbacks).to.deep.equal([later]);
      expect(third.r.batches[0][0]).to.equal(later);
    });

    const saved = (dataDir: string) => {
      const file = path.join(dataDir, "event-cursor.json");
      const block = (JSON.parse(fs.readFileSync(file, "utf8")) as { block: number }).block;
      return { block, mtimeNs: fs.statSync(file, { bigint: true }).mtimeNs };
    };
    const sleep = (ms: number) => new Promise((res) => setTimeout(res, ms));

    it("is rewritten only when the cursor moved: idle polls leave the file alone", async () => {
      const { f, dataDir } = follower({ pollIntervalMs: 10, checkpointEveryMs: 200 });
      await f.syncTo(await head());
      f.start();
      const ours = await createPkp("moves the cursor");
      const deadline = Date.now() + 10_000;
      while (saved(dataDir).block !== ours && Date.now() < deadline) await sleep(20);
      expect(saved(dataDir).block).to.equal(ours); // a later poll writes what an earlier one skipped
      const written = saved(dataDir).mtimeNs;
      await sleep(1_500); // some hundred polls, past the 200 ms spacing many times over, no new block
      expect(saved(dataDir).mtimeNs).to.equal(written);
      await f.stop();
      expect(f.lastProcessedBlock).to.equal(ours);
    });

    it("is written at most every `checkpointEveryMs`; a crash then replays from an older cursor, never skips", async () => {
      const first = follower({ checkpointEveryMs: 60_000 });
      await first.f.syncTo(await head());
      const checkpointed = saved(first.dataDir).block;
      expect(checkpointed).to.equal(first.f.lastProcessedBlock);
      const applied = [await createPkp("not yet checkpointed 1"), await createPkp("not yet checkpointed 2")];
      await first.f.syncTo(applied[1]);
      expect(first.f.lastProcessedBlock).to.equal(applied[1]);
      expect(saved(first.dataDir).block).to.equal(checkpointed);
      // A crash now (`first` never stops): the next process resumes at the checkpoint, at or before
      // the last applied block, and sees the events after it again.
      const second = follower({ dataDir: first.dataDir, checkpointEveryMs: 60_000 });
      await second.f.syncTo(applied[1]);
      expect(second.r.batches[0][0]).to.equal(checkpointed + 1);
      expect(second.r.held.map((e) => e.block)).to.deep.equal(applied);
      // Stopping writes it at once.
      await second.f.stop();
      expect(saved(first.dataDir).block).to.equal(applied[1]);
    });
  });
});
