/**
 * Read-your-writes from our own receipts (PermissionCache.applyOwnTransaction): a path-A transaction's
 * events are applied straight from its receipt only when that is exactly what the poller would do next,
 * all or nothing, and the poller then skips them (never applies an event twice).
 */
import { expect } from "chai";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { NonceManager, Wallet, parseEther } from "ethers";
import { registryInterface } from "../../relayer/chain/abi";
import { RegistryReader } from "../../relayer/chain/registryReader";
import { makeProvider } from "../../relayer/chain/rpc";
import { Sender, type WriteResult } from "../../relayer/chain/sender";
import { PermissionCache } from "../../relayer/permissions/permissionCache";
import { DEV_KEY } from "../helpers/anvil";
import { quietLogger, startStack, type Stack } from "../helpers/stack";

describe("relayer: events applied from our own receipts", function () {
  this.timeout(120_000);
  let s: Stack;
  let close: () => void;
  let sender: Sender;
  let accountKey: string;
  let accountId: number;
  const mined: Array<{ result: WriteResult; index: number | null }> = [];
  const cleanups: Array<() => unknown> = [];

  before(async () => {
    s = await startStack();
    const rpc = makeProvider(s.chain.rpcUrl, 31337, 2_000);
    close = rpc.close;
    const funder = new NonceManager(new Wallet(DEV_KEY, s.provider));
    await (await funder.sendTransaction({ to: s.enclave.gasAddress(30), value: parseEther("10") })).wait();
    sender = new Sender({
      provider: rpc.provider,
      signer: s.enclave,
      gasSigners: [s.enclave.gasSigner(30, rpc.provider)],
      chainId: 31337,
      registry: s.deployment.registry,
      forwarder: s.deployment.forwarder,
      receiptTimeoutMs: 10_000,
      rpcTimeoutMs: 2_000,
      onMined: (result, index) => mined.push({ result, index }),
    });
    await sender.init();
    const created = (await s.api("POST", "/core/v1/new_account", { body: {} })).body;
    accountKey = created.api_key;
    accountId = Number(created.account_id);
  });
  after(async () => {
    for (const c of cleanups) await c();
    close?.();
    await s?.close();
  });

  /** A cache of its own (not started: it moves only when a test asks), counting applied events. */
  async function freshCache() {
    const rpc = makeProvider(s.chain.rpcUrl, 31337, 2_000);
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-cache-"));
    cleanups.push(() => {
      rpc.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    });
    const counts = { applied: 0 };
    const cache = new PermissionCache({
      provider: rpc.provider,
      reader: new RegistryReader(rpc.provider, s.deployment.registry),
      registry: s.deployment.registry,
      chainId: 31337,
      deployBlock: s.deployment.deployBlock,
      dataDir,
      pollIntervalMs: 60_000,
      logger: quietLogger(),
      onApplied: (n) => (counts.applied += n),
    });
    await cache.syncTo(await s.provider.getBlockNumber());
    return { cache, counts };
  }

  const createPkp = (name: string) =>
    sender.write({
      apiKey: accountKey,
      principal: s.enclave.principalAddress(accountKey),
      kind: "account",
      data: registryInterface.encodeFunctionData("createPkp", [name, ""]),
    });

  it("the sender reports each mined transaction with its index in the block (0 on an automining chain)", async () => {
    mined.length = 0;
    const r = await createPkp("reported");
    expect(mined).to.have.length(1);
    expect(mined[0].result.txHash).to.equal(r.txHash);
    expect(mined[0].index).to.equal(0);
  });

  it("applies a transaction that opens the block after the cursor, at once, and the poller skips it", async () => {
    const { cache, counts } = await freshCache();
    const before = (await cache.account(accountId)).pkps.size;
    const r = await createPkp("fast");
    const head = cache.lastProcessedBlock;
    expect(r.blockNumber).to.equal(head + 1);
    expect(cache.applyOwnTransaction(r, 0)).to.equal(true);
    expect(cache.isApplied(r.txHash)).to.equal(true);
    const acc = await cache.account(accountId);
    expect(acc.pkps.size).to.equal(before + 1);
    expect(counts.applied).to.equal(1);
    await cache.syncTo(r.blockNumber);
    expect(cache.lastProcessedBlock).to.be.at.least(r.blockNumber);
    expect(counts.applied, "the poller skipped the event applied from the receipt").to.equal(1);
    expect((await cache.account(accountId)).pkps.size).to.equal(before + 1);
    expect(cache.isApplied(r.txHash), "forgotten once the poller has passed it").to.equal(false);
  });

  it("applies nothing when the transaction is not first in its block", async () => {
    const { cache, counts } = await freshCache();
    const before = (await cache.account(accountId)).pkps.size;
    const r = await createPkp("second in block");
    expect(cache.applyOwnTransaction(r, 1)).to.equal(false);
    expect(cache.applyOwnTransaction(r, null)).to.equal(false);
    expect((await cache.account(accountId)).pkps.size).to.equal(before);
    expect(counts.applied).to.equal(0);
    expect(cache.isApplied(r.txHash)).to.equal(false);
  });

  it("applies nothing when the cursor is not at the block before (earlier events are unapplied)", async () => {
    const { cache, counts } = await freshCache();
    await cache.account(accountId);
    await createPkp("unseen by the cache");
    const r = await createPkp("after a gap");
    expect(cache.applyOwnTransaction(r, 0)).to.equal(false);
    expect(counts.applied).to.equal(0);
    await cache.syncTo(r.blockNumber);
    expect(counts.applied, "the poller applies both, in order").to.equal(2);
  });

  it("applies nothing for an account it does not hold, or an event that needs more than the log", async () => {
    const { cache, counts } = await freshCache();
    // The account is not loaded in this cache.
    const r = await createPkp("not loaded");
    expect(cache.applyOwnTransaction(r, 0)).to.equal(false);
    await cache.syncTo(r.blockNumber);
    // KeyAdded needs its block's time (a key's created_at).
    await cache.account(accountId);
    const usage = s.enclave.generateUsageKey();
    const added = await sender.write({
      apiKey: accountKey,
      principal: s.enclave.principalAddress(accountKey),
      kind: "account",
      data: registryInterface.encodeFunctionData("addKey", [
        usage.address,
        usage.keyHash,
        "k",
        "",
        0,
        {
          canCreateGroups: false,
          canDeleteGroups: false,
          canCreatePkps: false,
          manageIpfsIdsInGroups: [],
          addPkpToGroups: [],
          removePkpFromGroups: [],
          executeInGroups: [],
        },
      ]),
    });
    const applied = counts.applied;
    expect(cache.applyOwnTransaction(added, 0)).to.equal(false);
    expect(counts.applied).to.equal(applied);
  });
});
