/**
 * The event scanner's cursor is keyed by chain and registry (relayer/webhooks/chainCursor.ts), on both
 * engines, against real registries on a real anvil: where a new registry's cursor starts (the deployment
 * block, an unkeyed cursor of a database upgraded in place, the end of a migration's replay), and that one
 * registry's cursor never moves or skips another's events. "Announced" here is what the scanner stores:
 * one pending delivery per event for the account's endpoint.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import pino from "pino";
import { NonceManager, Wallet, ZeroAddress, type JsonRpcProvider } from "ethers";
import { type DataLayer, openDataLayer } from "../../relayer/db";
import {
  chainCursorName,
  LEGACY_CHAIN_CURSOR,
  openChainCursor,
  startChainCursorAfter,
} from "../../relayer/webhooks/chainCursor";
import { ChainScanner } from "../../relayer/webhooks/chainScanner";
import { WebhookStore } from "../../relayer/webhooks/store";
import { deploySigil, type SigilDeployment } from "../../scripts/deploy";
import { AccountRegistry__factory, type AccountRegistry } from "../../typechain-types";
import { DEV_KEY, DEV_KEYS, startChain, type TestChain } from "../helpers/anvil";
import { describeOnEngines, freshDatabaseUrl } from "../helpers/postgres";
import { quietLogger, testProvider } from "../helpers/stack";

const CHAIN_ID = 31337;

describeOnEngines("webhooks: the event cursor of each registry", function (engine) {
  this.timeout(120_000);
  let chain: TestChain;
  let provider: JsonRpcProvider;
  let deployer: NonceManager;
  let ownerWallet: NonceManager;
  let dir: string;
  const open: DataLayer[] = [];

  before(async () => {
    chain = await startChain();
    provider = testProvider(chain.rpcUrl);
    deployer = new NonceManager(new Wallet(DEV_KEY, provider));
    ownerWallet = new NonceManager(new Wallet(DEV_KEYS[1], provider));
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-wh-cursor-"));
  });
  after(async () => {
    for (const db of open) await db.close();
    provider?.destroy();
    await chain?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** A fresh database with one endpoint of account 1 subscribed to everything. */
  async function freshStore(): Promise<WebhookStore> {
    const db = await openDataLayer(
      engine === "postgres"
        ? { databaseUrl: await freshDatabaseUrl(), sqlitePath: "" }
        : { sqlitePath: path.join(dir, `wh-${open.length}.sqlite`) },
    );
    open.push(db);
    const store = new WebhookStore(db);
    await store.createEndpoint({
      endpointId: "we_" + "0".repeat(24),
      accountId: "1",
      url: "https://1.1.1.1/",
      eventTypes: '["*"]',
      description: "",
      secretSealed: "sealed",
      nowMs: Date.now(),
    });
    return store;
  }

  /** A registry of its own, with account 1 created by the owner's wallet (path B). */
  async function newRegistry(): Promise<{ d: SigilDeployment; registry: AccountRegistry }> {
    const d = await deploySigil(deployer);
    const registry = AccountRegistry__factory.connect(d.registry, ownerWallet);
    await (await registry.createAccount("cursor test", ZeroAddress)).wait();
    return { d, registry };
  }

  /** Creates a PKP; returns the block it landed in. */
  async function createPkp(registry: AccountRegistry, name: string): Promise<number> {
    return (await (await registry.createPkp(name, "")).wait())!.blockNumber;
  }

  function scanner(store: WebhookStore, d: SigilDeployment, logger = quietLogger()): ChainScanner {
    return new ChainScanner({
      provider,
      registry: d.registry,
      chainId: CHAIN_ID,
      deployBlock: d.deployBlock,
      confirmations: 0,
      store,
      logger,
    });
  }

  /** The announced events, as `type@block`, in chain order. */
  async function announced(store: WebhookStore): Promise<string[]> {
    const deliveries = await store.listDeliveries("we_" + "0".repeat(24), 100, 0);
    const events = await Promise.all(
      deliveries.map(async (d) => JSON.parse((await store.eventPayload(d.event_id))!)),
    );
    return events
      .sort((a, b) => a.block_number - b.block_number || a.log_index - b.log_index)
      .map((e) => `${e.type}@${e.block_number}`);
  }

  it("a fresh deployment announces its events from its deployment block on", async () => {
    const store = await freshStore();
    const { d, registry } = await newRegistry();
    const first = await createPkp(registry, "first");
    const second = await createPkp(registry, "second");
    await scanner(store, d).scanOnce();
    expect(await announced(store)).to.deep.equal([`pkp.created@${first}`, `pkp.created@${second}`]);
  });

  it("a database upgraded in place continues its unkeyed cursor: nothing announced again, nothing skipped", async () => {
    const store = await freshStore();
    const { d, registry } = await newRegistry();
    const before = await createPkp(registry, "announced by the previous build");
    await store.cursor(LEGACY_CHAIN_CURSOR, before); // where the previous build's scanner stopped
    const after = await createPkp(registry, "after the upgrade");
    await scanner(store, d).scanOnce();
    expect(await announced(store)).to.deep.equal([`pkp.created@${after}`]);
  });

  it("a registry's cursor is its own: another registry scanned further on the same database skips none of its events", async () => {
    const store = await freshStore();
    const a = await newRegistry();
    const b = await newRegistry();
    const written = await createPkp(b.registry, "in b, before a is scanned");
    await createPkp(a.registry, "in a");
    await scanner(store, a.d).scanOnce(); // a's cursor is now past `written`
    await scanner(store, b.d).scanOnce();
    expect((await announced(store)).filter((e) => e === `pkp.created@${written}`)).to.have.length(1);
  });

  it("after a migration marks its replay, only writes after it are announced", async () => {
    const store = await freshStore();
    await store.cursor(LEGACY_CHAIN_CURSOR, 1); // the previous registry's cursor, as the old service left it
    const { d, registry } = await newRegistry();
    await createPkp(registry, "replayed");
    await startChainCursorAfter(store, {
      chainId: CHAIN_ID,
      registry: d.registry,
      throughBlock: await provider.getBlockNumber(),
    });
    const news = await createPkp(registry, "after the migration");
    await scanner(store, d).scanOnce();
    expect(await announced(store)).to.deep.equal([`pkp.created@${news}`]);
  });

  it("warns the operator when an earlier registry's unkeyed cursor is left alone and the new one starts at its deployment", async () => {
    const store = await freshStore();
    await store.cursor(LEGACY_CHAIN_CURSOR, 1);
    const { d } = await newRegistry();
    const lines: Array<{ level: number; msg: string; earlierRegistryCursor?: number; afterBlock?: number }> =
      [];
    const logger = pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) });
    await scanner(store, d, logger).scanOnce();
    expect(
      lines.map((l) => [l.level, l.msg.split(";")[0], l.earlierRegistryCursor, l.afterBlock]),
    ).to.deep.equal([
      [
        40,
        "webhook events: new registry, announcing its events from its deployment block (the event cursor of an earlier registry is left alone)",
        1,
        d.deployBlock - 1,
      ],
    ]);
  });

  it("marking the replay again never moves a cursor the service has advanced back", async () => {
    const store = await freshStore();
    const o = { chainId: CHAIN_ID, registry: "0x" + "ab".repeat(20), throughBlock: 10 };
    await startChainCursorAfter(store, o);
    await store.db.transaction((tx) => store.advanceCursor(tx, chainCursorName(CHAIN_ID, o.registry), 25));
    expect(await startChainCursorAfter(store, o)).to.equal(25);
  });

  it("instances opening a new registry's cursor at once agree on one position, created once", async () => {
    const store = await freshStore();
    await store.cursor(LEGACY_CHAIN_CURSOR, 40);
    const o = { chainId: CHAIN_ID, registry: "0x" + "cd".repeat(20), deployBlock: 30 };
    const opened = await Promise.all([1, 2, 3, 4].map(() => openChainCursor(store, o)));
    expect([
      opened.map((c) => c.position),
      opened.filter((c) => c.origin === "unkeyed_cursor").length,
      opened.filter((c) => c.origin === "existing").length,
    ]).to.deep.equal([[40, 40, 40, 40], 1, 3]);
  });
});
