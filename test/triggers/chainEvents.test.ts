/**
 * Chain-event triggers end to end on a real anvil with a real ERC-20: the source hands the intake one
 * firing per confirmed matching log, decoded, and never one for a block a reorganisation dropped before
 * confirmation; a restart continues from the cursor in the data layer (SQLite and PostgreSQL).
 */
import { expect } from "chai";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import pino from "pino";
import { getAddress, zeroPadValue, ZeroAddress } from "ethers";
import type { ChainEndpoint } from "../../relayer/chains";
import { migrate, openEngine, type DataLayer } from "../../relayer/db";
import { ChainEventSource, firingIdOf } from "../../relayer/triggers/chainEvents";
import { ChainCursorStore, specKey } from "../../relayer/triggers/chainEvents/cursors";
import { ChainWatcher } from "../../relayer/triggers/chainEvents/watcher";
import type { Firing } from "../../relayer/triggers/model";
import { startChain, type TestChain } from "../helpers/anvil";
import { describeOnEngines, freshDatabaseUrl } from "../helpers/postgres";
import {
  RecordingIntake,
  TestDirectory,
  TRANSFER,
  chainTrigger,
  deployToken,
  eventually,
  type TokenChain,
} from "./chainEventsKit";

const ALICE = "0x70997970c51812dc3a010c7d01b50e20d4b64c79";
const BOB = "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc";

type ChainEventFiring = Firing & { input: { kind: "chain_event" } };
const inputOf = (f: Firing) =>
  (f as ChainEventFiring).input as Extract<Firing["input"], { kind: "chain_event" }>;

interface Rig {
  chain: TestChain;
  tok: TokenChain;
  chains: ChainEndpoint[];
  db: DataLayer;
  dir: string;
}

async function openRig(
  confirmations: number,
  databaseUrl?: string,
  opts: { keepState?: boolean } = {},
): Promise<Rig> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-chainev-"));
  const chain = await startChain(opts.keepState ? { stateFile: path.join(dir, "anvil-state.json") } : {});
  const tok = await deployToken(chain.rpcUrl);
  const db = openEngine({ databaseUrl, sqlitePath: path.join(dir, "relayer.sqlite") });
  await migrate(db);
  return {
    chain,
    tok,
    chains: [{ chainId: 31337, name: "embedded", rpcUrl: chain.rpcUrl, confirmations }],
    db,
    dir,
  };
}

async function closeRig(r: Rig | undefined): Promise<void> {
  if (!r) return;
  r.tok.close();
  await r.db.close();
  await r.chain.stop();
  fs.rmSync(r.dir, { recursive: true, force: true });
}

function source(
  r: Rig,
  intake: RecordingIntake,
  directory: TestDirectory,
  extra: { maxRange?: number } = {},
) {
  return new ChainEventSource({
    intake,
    directory,
    db: r.db,
    chains: r.chains,
    logger: pino({ level: "silent" }),
    pollIntervalMs: 30,
    maxBackoffMs: 200,
    ...extra,
  });
}

describe("chain-event triggers: the watcher on anvil", function () {
  this.timeout(120_000);
  let r: Rig;
  let intake: RecordingIntake;
  let directory: TestDirectory;
  let src: ChainEventSource;

  beforeEach(async () => {
    r = await openRig(3);
    intake = new RecordingIntake();
    directory = new TestDirectory();
    src = source(r, intake, directory);
    src.start();
  });
  afterEach(async () => {
    await src?.stop();
    await closeRig(r);
  });

  it("a Transfer fires once, only after `confirmations` blocks, with decoded args", async () => {
    const t = chainTrigger({ address: r.tok.address, event: TRANSFER }, r.chains, await r.tok.head());
    directory.put(t);
    const { block, txHash } = await r.tok.mint(ALICE, 1_000n);
    await r.tok.mine(2); // the log is 2 deep: not confirmed at depth 3
    await directory.polls(3);
    expect(intake.handed).to.have.length(0);
    await r.tok.mine(1);
    await eventually(() => intake.handed.length === 1, "the firing once confirmed");
    await r.tok.mine(4);
    await directory.polls(3);
    expect(intake.handed).to.have.length(1);
    const f = intake.handed[0];
    expect(f.triggerId).to.equal(t.id);
    expect(f.firingId).to.equal(`chain:31337:${txHash}:0`);
    const input = inputOf(f);
    expect(input.chainId).to.equal(31337);
    expect(input.log).to.include({
      address: r.tok.address,
      blockNumber: block,
      transactionHash: txHash,
      logIndex: 0,
    });
    expect(input.log.topics).to.deep.equal([
      t.chainEvent!.topic0,
      zeroPadValue(ZeroAddress, 32),
      zeroPadValue(ALICE, 32),
    ]);
    expect(input.args).to.deep.equal({
      "0": ZeroAddress,
      from: ZeroAddress,
      "1": getAddress(ALICE),
      to: getAddress(ALICE),
      "2": "1000",
      value: "1000",
    });
  });

  it("topic filters select only the matching logs (to = my address), with other triggers on the same event", async () => {
    const head = await r.tok.head();
    const toAlice = chainTrigger(
      { address: r.tok.address, event: TRANSFER, topics: [null, ALICE] },
      r.chains,
      head,
    );
    const toBob = chainTrigger(
      { address: r.tok.address, event: TRANSFER, topics: [null, BOB] },
      r.chains,
      head,
    );
    const any = chainTrigger({ address: r.tok.address, event: TRANSFER }, r.chains, head);
    for (const t of [toAlice, toBob, any]) directory.put(t);
    const a1 = await r.tok.mint(ALICE, 1n);
    const b1 = await r.tok.mint(BOB, 2n);
    const a2 = await r.tok.mint(ALICE, 3n);
    await r.tok.mine(3);
    await eventually(
      () => intake.runsOf(any.id).length === 3,
      "all three transfers for the unfiltered trigger",
    );
    await directory.polls(3);
    const ids = (id: string) => intake.runsOf(id).map((f) => f.firingId);
    expect(ids(toAlice.id)).to.deep.equal([a1, a2].map((m) => `chain:31337:${m.txHash}:0`));
    expect(ids(toBob.id)).to.deep.equal([`chain:31337:${b1.txHash}:0`]);
    expect(intake.runsOf(toBob.id).map((f) => inputOf(f).args!.value)).to.deep.equal(["2"]);
    expect(intake.handed).to.have.length(6);
  });

  it("a reorganisation that drops the log's block before confirmation fires nothing", async () => {
    const t = chainTrigger({ address: r.tok.address, event: TRANSFER }, r.chains, await r.tok.head());
    directory.put(t);
    const { block } = await r.tok.mint(ALICE, 5n);
    await r.tok.mine(1);
    await directory.polls(2);
    // The mint's block and the one above it are replaced by empty blocks.
    await r.tok.provider.send("anvil_reorg", [2, []]);
    expect(await r.tok.head()).to.equal(block + 1);
    const replaced = await r.tok.provider.send("eth_getBlockByNumber", ["0x" + block.toString(16), false]);
    expect(replaced.transactions).to.have.length(0);
    await r.tok.mine(6);
    await directory.polls(4);
    expect(intake.handed).to.have.length(0);
  });

  it("a log confirmed before a deeper reorganisation re-mines it: one run (the firing id absorbs the repeat)", async () => {
    const t = chainTrigger({ address: r.tok.address, event: TRANSFER }, r.chains, await r.tok.head());
    directory.put(t);
    const { block, txHash } = await r.tok.mint(ALICE, 7n);
    await r.tok.mine(3);
    await eventually(() => intake.handed.length === 1, "the firing once confirmed");
    const oldHash = inputOf(intake.handed[0]).log.blockHash;
    const raw = await r.tok.provider.send("eth_getRawTransactionByHash", [txHash]);
    // Deeper than the confirmation depth: the watcher's cursor stood on a block that is now replaced.
    await r.tok.provider.send("anvil_reorg", [4, [[raw, 0]]]);
    const newBlock = await r.tok.provider.send("eth_getBlockByNumber", ["0x" + block.toString(16), false]);
    expect(newBlock.hash.toLowerCase()).to.not.equal(oldHash);
    expect(newBlock.transactions.map((h: string) => h.toLowerCase())).to.deep.equal([txHash]);
    await eventually(() => intake.handed.length === 2, "the log read again after the rewind");
    await r.tok.mine(3);
    await directory.polls(3);
    const again = intake.handed[1];
    expect(again.firingId).to.equal(intake.handed[0].firingId);
    expect(inputOf(again).log.blockHash).to.equal(newBlock.hash.toLowerCase());
    expect(intake.runsOf(t.id)).to.have.length(1);
    expect(intake.handed).to.have.length(2);
  });

  it("backfills from `fromBlock` in bounded ranges; a disabled trigger stops being read", async () => {
    await src.stop();
    src = source(r, intake, directory, { maxRange: 3 });
    src.start();
    const start = (await r.tok.head()) + 1;
    const old = [];
    for (let i = 0; i < 4; i++) {
      old.push(await r.tok.mint(ALICE, BigInt(10 + i)));
      await r.tok.mine(2);
    }
    await r.tok.mine(3);
    const head = await r.tok.head();
    const backfill = chainTrigger(
      { address: r.tok.address, event: TRANSFER, fromBlock: start },
      r.chains,
      head,
    );
    const fromNow = chainTrigger({ address: r.tok.address, event: TRANSFER }, r.chains, head);
    directory.put(backfill);
    directory.put(fromNow);
    await eventually(() => intake.runsOf(backfill.id).length === 4, "the four old transfers");
    expect(intake.runsOf(backfill.id).map((f) => f.firingId)).to.deep.equal(
      old.map((m) => firingIdOf(31337, { transactionHash: m.txHash, logIndex: 0 })),
    );
    expect(intake.runsOf(fromNow.id)).to.have.length(0);

    directory.setEnabled(backfill.id, false);
    await directory.polls(2);
    const fresh = await r.tok.mint(BOB, 99n);
    await r.tok.mine(3);
    await eventually(
      () => intake.runsOf(fromNow.id).length === 1,
      "the new transfer for the enabled trigger",
    );
    await directory.polls(3);
    expect(intake.runsOf(fromNow.id)[0].firingId).to.equal(`chain:31337:${fresh.txHash}:0`);
    expect(intake.runsOf(backfill.id)).to.have.length(4);
  });

  it("a stored signature that does not parse stalls nobody: its trigger gets the raw log with args null", async () => {
    const head = await r.tok.head();
    const good = chainTrigger({ address: r.tok.address, event: TRANSFER }, r.chains, head);
    const made = chainTrigger({ address: r.tok.address, event: TRANSFER }, r.chains, head);
    // Written around the creation checks (a hand-edited row, an older release's rules).
    const bad = { ...made, chainEvent: { ...made.chainEvent!, event: "Transfer(address indexed from," } };
    directory.put(bad);
    directory.put(good);
    await r.tok.mint(ALICE, 8n);
    await r.tok.mine(3);
    await eventually(() => intake.handed.length === 2, "both triggers fired");
    expect(inputOf(intake.runsOf(good.id)[0]).args!.value).to.equal("8");
    expect(inputOf(intake.runsOf(bad.id)[0]).args).to.equal(null);
  });

  it("a refused firing (queue full) is handed again later, never skipped", async () => {
    const t = chainTrigger({ address: r.tok.address, event: TRANSFER }, r.chains, await r.tok.head());
    intake.refuse = t.id;
    directory.put(t);
    const m = await r.tok.mint(ALICE, 1n);
    await r.tok.mine(5);
    await directory.polls(4);
    expect(intake.handed).to.have.length(0);
    intake.refuse = null;
    await eventually(() => intake.handed.length === 1, "the firing once the queue has room");
    expect(intake.handed[0].firingId).to.equal(`chain:31337:${m.txHash}:0`);
  });
});

describeOnEngines("chain-event triggers: restart over the same database", function (engine) {
  this.timeout(120_000);
  let r: Rig | undefined;
  after(async () => closeRig(r));

  it("a new instance neither hands a log twice nor misses one emitted while it was down", async () => {
    r = await openRig(2, engine === "postgres" ? await freshDatabaseUrl() : undefined);
    const intake = new RecordingIntake();
    const directory = new TestDirectory();
    const t = chainTrigger({ address: r.tok.address, event: TRANSFER }, r.chains, await r.tok.head());
    directory.put(t);
    const first = source(r, intake, directory);
    first.start();
    const before = await r.tok.mint(ALICE, 1n);
    await r.tok.mine(2);
    await eventually(() => intake.handed.length === 1, "the first firing");
    await first.stop();

    const whileDown = [await r.tok.mint(BOB, 2n), await r.tok.mint(ALICE, 3n)];
    await r.tok.mine(2);
    const second = source(r, intake, directory);
    second.start();
    try {
      await eventually(() => intake.handed.length === 3, "the two transfers emitted while down");
      await r.tok.mine(2);
      await directory.polls(3);
    } finally {
      await second.stop();
    }
    expect(intake.handed.map((f) => f.firingId)).to.deep.equal(
      [before, ...whileDown].map((m) => `chain:31337:${m.txHash}:0`),
    );
  });

  it("cursors: advancing never moves back, a rewind does, an edited spec starts over", async () => {
    const url = engine === "postgres" ? await freshDatabaseUrl() : undefined;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-chainev-cursors-"));
    const db = openEngine({ databaseUrl: url, sqlitePath: path.join(dir, "relayer.sqlite") });
    try {
      await migrate(db);
      const store = new ChainCursorStore(db);
      const chains: ChainEndpoint[] = [
        { chainId: 31337, name: "embedded", rpcUrl: "http://127.0.0.1:1", confirmations: 0 },
      ];
      const t = chainTrigger({ address: "0x" + "22".repeat(20), event: TRANSFER, fromBlock: 1 }, chains, 100);
      const spec = t.chainEvent!;
      const at = async (s = spec) => (await store.forChain(31337, new Map([[t.id, specKey(s)]]))).get(t.id);
      expect(await at()).to.equal(undefined);
      await store.advance(t.id, spec, { block: 10, blockHash: "0xaa" });
      await store.advance(t.id, spec, { block: 5, blockHash: "0xbb" }); // a slower instance, finishing late
      expect(await at()).to.deep.equal({ block: 10, blockHash: "0xaa" });
      await store.rewind(t.id, spec, { block: 3, blockHash: null });
      expect(await at()).to.deep.equal({ block: 3, blockHash: null });
      await store.rewind(t.id, spec, { block: 7, blockHash: null }); // a rewind never moves forward
      expect(await at()).to.deep.equal({ block: 3, blockHash: null });
      const edited = { ...spec, fromBlock: 1 + 1 };
      expect(await at(edited)).to.equal(undefined); // the old cursor means nothing for the new spec
      await store.advance(t.id, edited, { block: 1, blockHash: null });
      expect(await at(edited)).to.deep.equal({ block: 1, blockHash: null });
      await store.forget(t.id);
      expect(await at(edited)).to.equal(undefined);
    } finally {
      await db.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("two instances at once on one database: one run per log, the cursor at the confirmed tip", async () => {
    const url = engine === "postgres" ? await freshDatabaseUrl() : undefined;
    const rig = await openRig(1, url);
    const other = openEngine({ databaseUrl: url, sqlitePath: path.join(rig.dir, "relayer.sqlite") });
    await migrate(other);
    const intake = new RecordingIntake(); // the service's store, shared by both instances
    const directory = new TestDirectory();
    const t = chainTrigger({ address: rig.tok.address, event: TRANSFER }, rig.chains, await rig.tok.head());
    directory.put(t);
    const sources = [source(rig, intake, directory), source({ ...rig, db: other }, intake, directory)];
    for (const s of sources) s.start();
    try {
      const mints = [];
      for (let i = 0; i < 5; i++) mints.push(await rig.tok.mint(i % 2 ? ALICE : BOB, BigInt(i + 1)));
      await rig.tok.mine(1);
      await eventually(() => intake.runsOf(t.id).length === 5, "five runs");
      await directory.polls(6);
      expect(intake.runsOf(t.id).map((f) => f.firingId)).to.deep.equal(
        mints.map((m) => `chain:31337:${m.txHash}:0`),
      );
      const tip = (await rig.tok.head()) - 1;
      const rows = (await rig.db.exec("SELECT block FROM trigger_chain_cursors")) as Array<{
        block: unknown;
      }>;
      expect(rows.map((x) => Number(x.block))).to.deep.equal([tip]);
    } finally {
      for (const s of sources) await s.stop();
      await other.close();
      await closeRig(rig);
    }
  });
});

describe("chain-event triggers: requests per poll", function () {
  this.timeout(60_000);
  let r: Rig | undefined;
  after(async () => closeRig(r));

  it("one eth_getLogs per distinct filter; triggers on one event share it; a chain nobody watches is not asked", async () => {
    r = await openRig(1);
    const rig = r;
    const asked: string[] = [];
    // The real provider, with each method it is asked for written down.
    const rpc = {
      send: (method: string, params: unknown[]) => {
        asked.push(method);
        return rig.tok.provider.send(method, params);
      },
    };
    const intake = new RecordingIntake();
    const directory = new TestDirectory();
    const watcher = new ChainWatcher({
      chain: rig.chains[0],
      rpc,
      intake,
      directory,
      cursors: new ChainCursorStore(rig.db),
      logger: pino({ level: "silent" }),
      pollIntervalMs: 1_000,
    });
    await watcher.pollOnce();
    expect(asked).to.deep.equal([]);

    const head = await rig.tok.head();
    const triggers = [ALICE, BOB, null].map((to) =>
      chainTrigger({ address: rig.tok.address, event: TRANSFER, topics: [null, to] }, rig.chains, head),
    );
    for (const t of triggers) directory.put(t);
    await rig.tok.mint(ALICE, 1n);
    await rig.tok.mint(BOB, 1n);
    await rig.tok.mine(1);
    await watcher.pollOnce();
    expect(asked.filter((m) => m === "eth_getLogs")).to.have.length(1);
    expect(intake.handed).to.have.length(4);
    // Caught up, nothing new confirmed: the head and the cursor's block, no eth_getLogs.
    asked.length = 0;
    await watcher.pollOnce();
    expect(asked).to.deep.equal(["eth_blockNumber", "eth_getBlockByNumber"]);
  });
});

describe("chain-event triggers: a chain that goes down", function () {
  this.timeout(120_000);
  let r: Rig | undefined;
  after(async () => closeRig(r));

  it("is retried with backoff and logged; once back, the log emitted before the outage fires (nothing skipped)", async () => {
    r = await openRig(2, undefined, { keepState: true });
    const intake = new RecordingIntake();
    const directory = new TestDirectory();
    const lines: Array<{ msg: string; failures?: number }> = [];
    const src = new ChainEventSource({
      intake,
      directory,
      db: r.db,
      chains: r.chains,
      logger: pino({ level: "info" }, { write: (l: string) => lines.push(JSON.parse(l)) }),
      pollIntervalMs: 20,
      maxBackoffMs: 200,
    });
    const t = chainTrigger({ address: r.tok.address, event: TRANSFER }, r.chains, await r.tok.head());
    directory.put(t);
    src.start();
    try {
      const m = await r.tok.mint(ALICE, 4n);
      await directory.polls(2);
      await r.chain.stop(); // the log is not confirmed yet, and the chain is gone
      await eventually(() => lines.some((l) => /poll failed/.test(l.msg)), "the failure logged");
      const polls = directory.reads;
      await new Promise((res) => setTimeout(res, 600));
      // Backing off: far fewer polls than one per 20 ms.
      expect(directory.reads - polls).to.be.lessThan(10);
      await r.chain.restart();
      await r.tok.mine(2);
      await eventually(() => intake.handed.length === 1, "the firing after the outage");
      expect(intake.handed[0].firingId).to.equal(`chain:31337:${m.txHash}:0`);
      expect(lines.filter((l) => /poll failed/.test(l.msg))[0].failures).to.equal(1);
      // The operator's RPC URL (hosted ones carry an API key) is never in a log line.
      expect(JSON.stringify(lines)).to.not.contain(r.chain.rpcUrl);
      await eventually(() => lines.some((l) => /reachable again/.test(l.msg)), "the recovery logged");
    } finally {
      await src.stop();
    }
  });
});

describe("chain-event triggers: start and stop", function () {
  this.timeout(60_000);

  it("stop leaves no timer and no listener behind; a chain that is down is retried, not fatal", async () => {
    const r = await openRig(0);
    try {
      const timers = () => process.getActiveResourcesInfo().filter((h) => h === "Timeout").length;
      const idle = timers();
      const intake = new RecordingIntake();
      const directory = new TestDirectory();
      const t = chainTrigger({ address: r.tok.address, event: TRANSFER }, r.chains, await r.tok.head());
      directory.put(t);
      // A second configured chain nobody runs: its watcher fails every poll and backs off.
      const down: ChainEndpoint = {
        chainId: 999,
        name: "down",
        rpcUrl: "http://127.0.0.1:9",
        confirmations: 0,
      };
      const lines: Array<{ msg: string; chain?: string }> = [];
      const src = new ChainEventSource({
        intake,
        directory,
        db: r.db,
        chains: [...r.chains, down],
        logger: pino({ level: "info" }, { write: (l: string) => lines.push(JSON.parse(l)) }),
        pollIntervalMs: 20,
        maxBackoffMs: 100,
      });
      const onDown = chainTrigger({ address: r.tok.address, event: TRANSFER, chainId: 999 }, [down], 0);
      directory.put(onDown);
      src.start();
      // What the service calls at creation: the head read through the source's own connection.
      const head = await r.tok.head();
      const spec = await src.specFrom({ chainId: 31337, address: r.tok.address, event: TRANSFER });
      expect(spec.fromBlock).to.equal(head);
      const refused = async (chainId: number) => {
        try {
          await src.specFrom({ chainId, address: r.tok.address, event: TRANSFER });
        } catch (e) {
          return (e as { code: string }).code;
        }
        return "accepted";
      };
      expect(await refused(1)).to.equal("chain_not_configured");
      expect(await refused(999)).to.equal("chain_unavailable");
      const m = await r.tok.mint(ALICE, 1n);
      await eventually(() => intake.runsOf(t.id).length === 1, "the firing on the chain that is up");
      expect(intake.runsOf(t.id)[0].firingId).to.equal(`chain:31337:${m.txHash}:0`);
      await eventually(
        () => lines.some((l) => l.chain === "down" && /poll failed/.test(l.msg)),
        "the down chain logged",
      );
      expect(directory.listenerCount).to.equal(1);
      await src.stop();
      expect(directory.listenerCount).to.equal(0);
      await eventually(() => timers() <= idle, "every timer of the source gone", 5_000);
      const reads = directory.reads;
      await new Promise((res) => setTimeout(res, 150));
      expect(directory.reads).to.equal(reads);
    } finally {
      await closeRig(r);
    }
  });
});
