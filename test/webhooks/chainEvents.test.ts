/**
 * Every chain event type reaches a real receiver once, for a change made through the API (path A),
 * for the same change made on chain by the owner's wallet (path B), and for changes made through a
 * Safe; each delivery's signature verifies with the snippet of docs/webhooks.md.
 * (ownership.transferred has no path-A form: only the new owner can accept a transfer.)
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { createHash } from "node:crypto";
import { expect } from "chai";
import { Wallet, ethers } from "ethers";
import { AccountRegistry__factory, type AccountRegistry } from "../../typechain-types";
import { ensureSafeSuite, rpcProvider } from "../../scripts/safe/lib";
import { createSafeOwner } from "../helpers/safeOwner";
import { CHAIN_EVENT_TYPES } from "../../relayer/webhooks/eventTypes";
import { DEV_KEYS } from "../helpers/anvil";
import type { Stack } from "../helpers/stack";
import { devKey, freshDeployer } from "../safe/support";
import { Receiver } from "./receiver";
import { newAccount, register, startWebhookStack } from "./support";
const { verifySigilSignature } = require("./verifySnippet.js");

type Ev = ReturnType<Receiver["events"]>[number];

describe("webhooks: chain events, path A, path B and a Safe", function () {
  this.timeout(240_000);
  let s: Stack;
  let receiver: Receiver;
  let secret: string;
  let accountId: number;
  let chainId: number;
  const phases: Record<"a" | "b" | "safe", Ev[]> = { a: [], b: [], safe: [] };
  let cidA: string;
  let cidB: string;

  /**
   * The events of blocks (from, through]: waits for one of block `through` (the scanner stores a whole
   * range in one transaction, so by then every earlier one is stored too), then for the deliveries to settle.
   */
  async function eventsThrough(from: number, through: number): Promise<Ev[]> {
    const inRange = () =>
      receiver.events().filter((e) => e.block_number! > from && e.block_number! <= through);
    await receiver.until(() => inRange().some((e) => e.block_number === through), 30_000);
    let count = -1;
    while (inRange().length !== count) {
      count = inRange().length;
      await new Promise((r) => setTimeout(r, 500));
    }
    return inRange();
  }

  before(async function () {
    s = await startWebhookStack();
    chainId = Number((await s.provider.getNetwork()).chainId);
    receiver = await new Receiver().start();
    const acct = await newAccount(s);
    accountId = acct.id;
    const key = acct.key;
    ({ secret } = await register(s, key, receiver.url));
    const api = async (method: string, route: string, body?: unknown) => {
      const r = await s.api(method, route, { key, body });
      if (r.status >= 300) throw new Error(`${method} ${route}: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body;
    };

    // Path A: every change through the API (the relayer's forwarder).
    const start = await s.provider.getBlockNumber();
    cidA = (await api("POST", "/core/v1/actions", { code: "async function main() { return 'a'; }" })).cid;
    const pkp = (await api("POST", "/core/v1/pkps/create", { name: "pa" })).pkp_id;
    const group = (await api("POST", "/core/v1/groups", { name: "ga", pkps: [pkp], actions: [cidA] }))
      .group_id;
    const k = await api("POST", "/core/v1/add_usage_api_key", { name: "ka", execute_in_groups: [group] });
    await api("POST", "/core/v1/update_usage_api_key", { id: k.id, name: "ka2", execute_in_groups: [0] });
    const policy = { version: 1, rules: [{ name: "messages", effect: "allow", operation: "message" }] };
    const policyCid = (await api("POST", "/core/v1/policies", { policy })).cid;
    await api("POST", "/core/v1/groups/" + group + "/policy", { cid: policyCid });
    await api("POST", "/core/v1/groups/" + group + "/actions", { remove: [cidA] });
    await api("POST", "/core/v1/groups/" + group + "/pkps", { remove: [pkp] });
    await api("POST", "/core/v1/remove_usage_api_key", { id: k.id });
    await api("DELETE", "/core/v1/groups/" + group);
    const wallet = new Wallet(DEV_KEYS[3], s.provider);
    await api("POST", "/core/v1/account/transfer_ownership", { new_owner: Wallet.createRandom().address });
    await api("POST", "/core/v1/account/cancel_ownership_transfer", {});
    await api("POST", "/core/v1/account/transfer_ownership", { new_owner: wallet.address });
    const endA = await s.provider.getBlockNumber();
    phases.a = await eventsThrough(start, endA);

    // Path B: the wallet accepts and makes the same changes directly on chain.
    const registry: AccountRegistry = AccountRegistry__factory.connect(s.deployment.registry, wallet);
    const send = async (p: Promise<ethers.ContractTransactionResponse>) => (await (await p).wait())!;
    await send(registry.acceptOwnership(accountId));
    cidB = (await api("POST", "/core/v1/actions", { code: "async function main() { return 'b'; }" })).cid;
    const pkpRc = await send(registry.createPkp("pb", ""));
    const pkpB = registry.interface.parseLog(pkpRc.logs[0])!.args.pkpId as string;
    const gRc = await send(registry.createGroup("gb", "", [pkpB], [cidB]));
    const groupB = registry.interface.parseLog(gRc.logs[0])!.args.groupId as bigint;
    const gen = s.enclave.generateUsageKey();
    const scopes = {
      canCreateGroups: false,
      canDeleteGroups: false,
      canCreatePkps: false,
      manageIpfsIdsInGroups: [],
      addPkpToGroups: [],
      removePkpFromGroups: [],
      executeInGroups: [groupB],
    };
    await send(registry.addKey(gen.address, gen.keyHash, "kb", "", 0, scopes));
    await send(registry.updateKey(gen.address, "kb2", "", 0, { ...scopes, executeInGroups: [0] }));
    await send(registry.setGroupPolicy(groupB, cidB));
    await send(registry.removeAction(groupB, cidB));
    await send(registry.removePkp(groupB, pkpB));
    await send(registry.removeKey(gen.address));
    await send(registry.deleteGroup(groupB));
    await send(registry.transferOwnership(Wallet.createRandom().address));
    await send(registry.cancelOwnershipTransfer());

    // A Safe: the wallet hands the account to a 2-of-3 Safe, which accepts and creates a group.
    const provider = rpcProvider(s.chain.rpcUrl);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-wh-safe-"));
    try {
      const { suite, chainId: cid } = await ensureSafeSuite(
        await freshDeployer(provider),
        path.join(dir, "safe-deployments.json"),
      );
      const ctx = { rpcUrl: s.chain.rpcUrl, chainId: cid, suite };
      const safe = await createSafeOwner(ctx, s.deployment.registry, {
        ownerKeys: [devKey(1), devKey(2), devKey(4)],
      });
      await send(registry.transferOwnership(safe.address));
      const endB = await s.provider.getBlockNumber();
      phases.b = await eventsThrough(endA, endB);
      await safe.tx({ op: "accept-ownership", accountId });
      await safe.tx({ op: "create-group", name: "from the safe", pkpIds: [pkpB], cids: [cidB] });
      phases.safe = await eventsThrough(endB, await s.provider.getBlockNumber());
    } finally {
      provider.destroy();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  after(async () => {
    await receiver?.close();
    await s?.close();
  });

  const types = (evs: Ev[]) => [...new Set(evs.map((e) => e.type))].sort();
  const pathATypes = CHAIN_EVENT_TYPES.filter((t) => t !== "ownership.transferred");

  it("path A: every type but ownership.transferred arrives", () => {
    expect(types(phases.a)).to.deep.equal([...pathATypes].sort());
  });

  it("path B: every type arrives", () => {
    expect(types(phases.b)).to.deep.equal([...CHAIN_EVENT_TYPES].sort());
  });

  it("through a Safe: ownership.transferred, group.created and the group's members arrive", () => {
    expect(types(phases.safe)).to.deep.equal([
      "group.actions_changed",
      "group.created",
      "group.pkps_changed",
      "ownership.transferred",
    ]);
  });

  it("each event arrives once (one delivery per log: no event id twice)", () => {
    const ids = receiver.events().map((e) => e.id);
    expect(ids.length).to.be.greaterThan(30);
    expect(new Set(ids).size).to.equal(ids.length);
    const logs = receiver.events().map((e) => `${e.transaction_hash}:${e.log_index}`);
    expect(new Set(logs).size).to.equal(logs.length);
  });

  it("the event id is derived from chain id, transaction hash and log index", () => {
    for (const e of receiver.events()) {
      const h = createHash("sha256").update(
        `sigil/webhook-event/v1:${chainId}:${e.transaction_hash}:${e.log_index}`,
      );
      expect(e.id).to.equal("evt_" + h.digest("hex").slice(0, 32));
    }
  });

  it("every signature verifies with the documented snippet, and the Sigil-Event-Id header names the event", () => {
    for (const r of receiver.received) {
      expect(verifySigilSignature(secret, r.headers["sigil-signature"], r.body), r.body).to.equal(true);
      expect(r.headers["sigil-event-id"]).to.equal(JSON.parse(r.body).id);
    }
  });

  it("a signature does not verify with another secret or an altered body", () => {
    const r = receiver.received[0];
    expect(verifySigilSignature("whsec_other", r.headers["sigil-signature"], r.body)).to.equal(false);
    expect(verifySigilSignature(secret, r.headers["sigil-signature"], r.body + " ")).to.equal(false);
  });

  it("a removed action names its CID, on both paths (the log carries only its hash)", () => {
    const removed = (evs: Ev[]) =>
      evs
        .filter((e) => e.type === "group.actions_changed" && e.data.change === "removed")
        .map((e) => e.data.cid);
    expect([removed(phases.a), removed(phases.b)]).to.deep.equal([[cidA], [cidB]]);
  });

  it("key.added carries the key's name and scopes in the API's field names", () => {
    const added = phases.a.find((e) => e.type === "key.added")!;
    expect(added.data).to.include({ name: "ka", can_create_groups: false });
    expect(added.data.can_execute_in_groups).to.have.length(1);
    expect(added.data.key_id).to.match(/^0x[0-9a-fA-F]{40}$/);
  });

  it("every event names the account, its block, block hash, transaction and log index", () => {
    for (const e of receiver.events()) {
      expect(e).to.include({ account_id: accountId });
      expect(e.block_number).to.be.a("number");
      expect((e as unknown as { block_hash: string }).block_hash).to.match(/^0x[0-9a-f]{64}$/);
      expect(e.transaction_hash).to.match(/^0x[0-9a-f]{64}$/);
      expect(e.log_index).to.be.a("number");
    }
  });
});
