/**
 * Property tests: random sequences of grants, revocations and group edits by random callers, checked against
 * the TypeScript model in model.ts. Every write's allow/deny (with the exact error) and, after every sequence,
 * canExecute / canExecuteAction for every caller × CID × PKP must match the model.
 *
 * Deterministic by default (fixed seed); set FC_SEED to explore other sequences, FC_RUNS to run more.
 */
import { expect } from "chai";
import fc from "fast-check";
import { loadFixture } from "@nomicfoundation/hardhat-network-helpers";
import { type ContractTransactionResponse, ethers } from "ethers";
import {
  CID_EMPTY,
  CID_HELLO,
  cidHash,
  expectedPkpId,
  twoAccountsFixture,
  type TwoAccounts,
} from "./fixtures";
import { expectProjectionMatchesViews } from "./eventProjection";
import { type Grant, type Outcome, RegistryModel } from "./model";

const CIDS = [CID_HELLO, CID_EMPTY, "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"];
const KEY_COUNT = 3;
const GROUP_IDS = [0n, 1n, 2n, 3n, 4n];

// Callers: 0 = owner A, 1 = owner B, 2.. = usage-key signers (which may or may not be registered). Keys are
// drawn more often: they are where the rules are interesting.
const callerArb = fc.oneof(
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 1 }) },
  { weight: 3, arbitrary: fc.integer({ min: 2, max: 1 + KEY_COUNT }) },
);
/** Key management is owner-only: mostly ask the right owner, sometimes anyone. */
const keyAdminArb = fc.oneof(
  { weight: 3, arbitrary: fc.constant("owner" as const) },
  { weight: 1, arbitrary: callerArb },
);
const accountArb = fc.constantFrom(1n, 2n);
const groupArb = fc.constantFrom(...GROUP_IDS);
const cidArb = fc.integer({ min: 0, max: CIDS.length - 1 });
/** A PKP reference: the n-th PKP of an account (it may not exist yet). */
const pkpArb = fc.record({ account: accountArb, counter: fc.constantFrom(1n, 2n, 3n) });
const idsArb = fc.array(fc.constantFrom(0n, 1n, 2n, 3n), { maxLength: 3 });
const grantArb: fc.Arbitrary<Grant> = fc.record({
  canCreateGroups: fc.boolean(),
  canDeleteGroups: fc.boolean(),
  canCreatePkps: fc.boolean(),
  manageIpfsIdsInGroups: idsArb,
  addPkpToGroups: idsArb,
  removePkpFromGroups: idsArb,
  executeInGroups: idsArb,
});

const opArb = fc.oneof(
  fc.record({
    kind: fc.constant("addKey" as const),
    owner: accountArb,
    key: fc.nat(KEY_COUNT - 1),
    grant: grantArb,
    by: keyAdminArb,
  }),
  fc.record({
    kind: fc.constant("updateKey" as const),
    owner: accountArb,
    key: fc.nat(KEY_COUNT - 1),
    grant: grantArb,
    by: keyAdminArb,
  }),
  fc.record({
    kind: fc.constant("removeKey" as const),
    owner: accountArb,
    key: fc.nat(KEY_COUNT - 1),
    by: keyAdminArb,
  }),
  fc.record({ kind: fc.constant("createPkp" as const), by: callerArb }),
  fc.record({
    kind: fc.constant("createGroup" as const),
    by: callerArb,
    pkps: fc.array(pkpArb, { maxLength: 2 }),
    cids: fc.array(cidArb, { maxLength: 2 }),
  }),
  fc.record({ kind: fc.constant("deleteGroup" as const), by: callerArb, group: groupArb }),
  fc.record({ kind: fc.constant("addAction" as const), by: callerArb, group: groupArb, cid: cidArb }),
  fc.record({ kind: fc.constant("removeAction" as const), by: callerArb, group: groupArb, cid: cidArb }),
  fc.record({ kind: fc.constant("addPkp" as const), by: callerArb, group: groupArb, pkp: pkpArb }),
  // A policy CID, or the empty string (a clear).
  fc.record({
    kind: fc.constant("setGroupPolicy" as const),
    by: callerArb,
    group: groupArb,
    cid: fc.integer({ min: -1, max: CIDS.length - 1 }),
  }),
  fc.record({ kind: fc.constant("removePkp" as const), by: callerArb, group: groupArb, pkp: pkpArb }),
);
type Op = typeof opArb extends fc.Arbitrary<infer T> ? T : never;

/** Every key starts registered (to A or B, by its owner) with a random grant, so sequences exercise scopes. */
const initialKeysArb = fc.array(fc.record({ owner: accountArb, grant: grantArb }), {
  minLength: KEY_COUNT,
  maxLength: KEY_COUNT,
});
/** Initial members of the fixture's groups (A: 1 and 2, B: 1), added by the owners, so execution has material. */
const contentArb = fc.array(
  fc.record({ cids: fc.subarray([0, 1, 2]), pkps: fc.subarray<1n | 2n>([1n, 2n]) }),
  { minLength: 3, maxLength: 3 },
);
const scenarioArb = fc.record({
  keys: initialKeysArb,
  content: contentArb,
  ops: fc.array(opArb, { minLength: 1, maxLength: 12 }),
});
type Scenario = typeof scenarioArb extends fc.Arbitrary<infer T> ? T : never;

/** The transaction's outcome as the model spells it: ok, or the custom error's name and arguments. */
async function outcomeOf(
  ctx: TwoAccounts,
  send: () => Promise<ContractTransactionResponse>,
): Promise<Outcome> {
  try {
    await (await send()).wait();
    return { ok: true };
  } catch (error) {
    const data = (error as { data?: string }).data;
    const parsed = data ? ctx.registry.interface.parseError(data) : null;
    if (!parsed) throw error;
    return { ok: false, error: parsed.name, args: [...parsed.args] };
  }
}

describe("AccountRegistry: properties against the model", function () {
  const seed = process.env.FC_SEED ? Number(process.env.FC_SEED) : 20261122;
  const numRuns = process.env.FC_RUNS ? Number(process.env.FC_RUNS) : 30;

  /** Replays a scenario on the chain and on the model; checks writes as it goes, and views at the end if asked. */
  async function replay(
    { keys, content, ops }: Scenario,
    checkViews: boolean,
    checkEvents = false,
  ): Promise<void> {
    const ctx = await loadFixture(twoAccountsFixture);
    const { registry, deployment } = ctx;
    const chainId = BigInt(deployment.chainId);
    const pkpIdOf = (account: bigint, counter: bigint) =>
      expectedPkpId(chainId, deployment.registry, account, counter);
    const callers = [ctx.ownerA, ctx.ownerB, ...ctx.keySigners.slice(0, KEY_COUNT)];
    const keyAddress = (index: number) => ctx.keySigners[index].address;

    const model = new RegistryModel();
    model.addAccount(1n, ctx.ownerA.address, 2n, [ctx.pkpA1, ctx.pkpA2]);
    model.addAccount(2n, ctx.ownerB.address, 1n, [ctx.pkpB1]);

    const setup: Op[] = keys.map((k, key) => ({
      kind: "addKey" as const,
      owner: k.owner,
      key,
      grant: k.grant,
      by: "owner" as const,
    }));
    const groups: Array<{ account: 1n | 2n; group: bigint }> = [
      { account: 1n, group: 1n },
      { account: 1n, group: 2n },
      { account: 2n, group: 1n },
    ];
    groups.forEach(({ account, group }, index) => {
      const by = Number(account) - 1;
      for (const cid of content[index].cids) setup.push({ kind: "addAction", by, group, cid });
      for (const counter of content[index].pkps) {
        if (account === 1n || counter === 1n)
          setup.push({ kind: "addPkp", by, group, pkp: { account, counter } });
      }
    });
    for (const op of [...setup, ...ops]) {
      const caller =
        op.by === "owner" && "owner" in op ? callers[Number(op.owner) - 1] : callers[op.by as number];
      const as = registry.connect(caller);
      let expected: Outcome;
      let actual: Outcome;
      switch (op.kind) {
        case "addKey":
          expected = model.addKey(caller.address, keyAddress(op.key), op.grant);
          actual = await outcomeOf(ctx, () =>
            as.addKey(keyAddress(op.key), cidHash("k"), "k", "", 0n, op.grant),
          );
          break;
        case "updateKey":
          expected = model.updateKey(caller.address, keyAddress(op.key), op.grant);
          actual = await outcomeOf(ctx, () => as.updateKey(keyAddress(op.key), "k", "", 0n, op.grant));
          break;
        case "removeKey":
          expected = model.removeKey(caller.address, keyAddress(op.key));
          actual = await outcomeOf(ctx, () => as.removeKey(keyAddress(op.key)));
          break;
        case "createPkp":
          expected = model.createPkp(caller.address, pkpIdOf);
          actual = await outcomeOf(ctx, () => as.createPkp("p", ""));
          break;
        case "createGroup": {
          const pkps = op.pkps.map((ref) => pkpIdOf(ref.account, ref.counter));
          const cids = op.cids.map((index) => CIDS[index]);
          expected = model.createGroup(caller.address, pkps, cids);
          actual = await outcomeOf(ctx, () => as.createGroup("g", "", pkps, cids));
          break;
        }
        case "deleteGroup":
          expected = model.deleteGroup(caller.address, op.group);
          actual = await outcomeOf(ctx, () => as.deleteGroup(op.group));
          break;
        case "addAction":
          expected = model.addAction(caller.address, op.group, CIDS[op.cid]);
          actual = await outcomeOf(ctx, () => as.addAction(op.group, CIDS[op.cid]));
          break;
        case "removeAction":
          expected = model.removeAction(caller.address, op.group, CIDS[op.cid]);
          actual = await outcomeOf(ctx, () => as.removeAction(op.group, CIDS[op.cid]));
          break;
        case "setGroupPolicy": {
          const cid = op.cid < 0 ? "" : CIDS[op.cid];
          expected = model.setGroupPolicy(caller.address, op.group, cid);
          actual = await outcomeOf(ctx, () => as.setGroupPolicy(op.group, cid));
          break;
        }
        case "addPkp": {
          const pkp = pkpIdOf(op.pkp.account, op.pkp.counter);
          expected = model.addPkp(caller.address, op.group, pkp);
          actual = await outcomeOf(ctx, () => as.addPkp(op.group, pkp));
          break;
        }
        case "removePkp": {
          const pkp = pkpIdOf(op.pkp.account, op.pkp.counter);
          expected = model.removePkp(caller.address, op.group, pkp);
          actual = await outcomeOf(ctx, () => as.removePkp(op.group, pkp));
          break;
        }
      }
      expect(
        actual,
        `${op.kind} by caller ${op.by}: ${JSON.stringify(op, (_k, v) => (typeof v === "bigint" ? `${v}` : v))}`,
      ).to.deep.equal(expected);
    }

    if (checkEvents) {
      await expectProjectionMatchesViews(
        registry,
        ctx.keySigners.slice(0, KEY_COUNT).map((s) => s.address),
      );
    }
    if (!checkViews) return;
    for (const account of [1n, 2n]) {
      for (const groupId of GROUP_IDS) {
        const policy = model.policyOf(account, groupId);
        expect(await registry.groupPolicy(account, groupId), `groupPolicy ${account}:${groupId}`).to.equal(
          policy === undefined ? ethers.ZeroHash : cidHash(policy),
        );
      }
    }
    const pkps = [1n, 2n].flatMap((account) => [1n, 2n, 3n].map((counter) => pkpIdOf(account, counter)));
    for (const caller of callers) {
      for (const cid of CIDS) {
        expect(
          await registry.canExecuteAction(caller.address, cidHash(cid)),
          `canExecuteAction ${caller.address} ${cid}`,
        ).to.equal(model.canExecute(caller.address, cid));
        for (const pkp of pkps) {
          expect(
            await registry.canExecute(caller.address, cidHash(cid), pkp),
            `canExecute ${caller.address} ${cid} ${pkp}`,
          ).to.equal(model.canExecute(caller.address, cid, pkp));
        }
      }
    }
  }

  it("every write's allow/deny, with the exact error, matches the model", async function () {
    this.timeout(600_000);
    await fc.assert(
      fc.asyncProperty(scenarioArb, (scenario) => replay(scenario, false)),
      { seed, numRuns, endOnFailure: true },
    );
  });

  it("the state rebuilt from events alone equals every view after any sequence", async function () {
    this.timeout(600_000);
    await fc.assert(
      fc.asyncProperty(scenarioArb, (scenario) => replay(scenario, false, true)),
      { seed: seed + 2, numRuns, endOnFailure: true },
    );
  });

  it("canExecute and canExecuteAction match the model after any sequence", async function () {
    this.timeout(600_000);
    await fc.assert(
      fc.asyncProperty(scenarioArb, (scenario) => replay(scenario, true)),
      { seed: seed + 1, numRuns, endOnFailure: true },
    );
  });
});

describe("AccountRegistry: events are complete (scripted)", function () {
  it("the state rebuilt from events alone equals every view after transfers, metadata edits and removals", async function () {
    const ctx = await loadFixture(twoAccountsFixture);
    const { registry, ownerA, ownerB, outsider, keySigners, pkpA1, pkpA2, pkpB1 } = ctx;
    const [k0, k1, k2] = keySigners;
    const a = registry.connect(ownerA);
    await a.addKey(k0.address, cidHash("k0"), "k0", "first", 0n, {
      canCreateGroups: true,
      canDeleteGroups: false,
      canCreatePkps: true,
      manageIpfsIdsInGroups: [2n, 1n, 2n],
      addPkpToGroups: [0n],
      removePkpFromGroups: [1n],
      executeInGroups: [1n],
    });
    await a.addKey(k1.address, cidHash("k1"), "k1", "", 0n, {
      canCreateGroups: false,
      canDeleteGroups: true,
      canCreatePkps: false,
      manageIpfsIdsInGroups: [],
      addPkpToGroups: [],
      removePkpFromGroups: [0n],
      executeInGroups: [0n, 2n],
    });
    await registry.connect(ownerB).addKey(k2.address, cidHash("k2"), "k2", "", 0n, {
      canCreateGroups: true,
      canDeleteGroups: true,
      canCreatePkps: true,
      manageIpfsIdsInGroups: [0n],
      addPkpToGroups: [0n],
      removePkpFromGroups: [0n],
      executeInGroups: [0n],
    });
    await registry.connect(k0).createGroup("by key", "with members", [pkpA1, pkpA2], []);
    await a.addActions(1n, [CID_HELLO, CID_EMPTY]);
    await a.addPkps(1n, [pkpA1, pkpA2]);
    await registry.connect(k0).removePkp(1n, pkpA2);
    await a.removeAction(1n, CID_EMPTY);
    await a.updateKeyMetadata(k0.address, "k0 renamed", "second");
    await a.updateKey(k1.address, "k1 v2", "replaced", 0n, {
      canCreateGroups: true,
      canDeleteGroups: false,
      canCreatePkps: false,
      manageIpfsIdsInGroups: [3n],
      addPkpToGroups: [],
      removePkpFromGroups: [],
      executeInGroups: [3n, 1n],
    });
    await registry.connect(k1).createGroup("second by key", "", [], []);
    await registry.connect(k2).createGroup("B2", "", [pkpB1], [CID_HELLO]);
    await registry.connect(k2).deleteGroup(1n);
    await a.deleteGroup(2n);
    await a.removeKey(k0.address);
    await a.addKey(k0.address, ethers.ZeroHash, "k0 again", "", 0n, {
      canCreateGroups: false,
      canDeleteGroups: false,
      canCreatePkps: false,
      manageIpfsIdsInGroups: [],
      addPkpToGroups: [],
      removePkpFromGroups: [],
      executeInGroups: [3n],
    });
    await a.transferOwnership(outsider.address);
    await a.cancelOwnershipTransfer();
    await registry.connect(ownerB).transferOwnership(outsider.address);
    await a.transferOwnership(keySigners[5].address);
    await registry.connect(keySigners[5]).acceptOwnership(1n);
    await registry.connect(keySigners[5]).createPkp("after transfer", "");

    await expectProjectionMatchesViews(
      registry,
      [k0, k1, k2, keySigners[3]].map((s) => s.address),
    );
  });
});
