/**
 * Conformance of the write paths (issue 8; reference gap 5, docs/background.md): one table of steps — grants, revocations,
 * group edits, PKP creation, denials — run three ways on the same chain and the same relayer:
 *   A     the owner is the service-managed address, writes go through the relayer with API keys;
 *   B-EOA the owner is an EOA that calls the registry directly;
 *   B-Safe the owner is a 2-of-3 Safe; every owner write is a multisig transaction.
 * Usage keys act over HTTP in all three (keys are API keys in both modes). After every step we take the
 * registry state (views), the relayer's list answers and an execution matrix (every key × action × PKP:
 * allowed or the refusal's code), normalise what legitimately differs (account ids, PKP ids and key
 * addresses become positions and labels), and require the three runs to be identical and the step's
 * outcome to be the one the table expects.
 */
import { expect } from "chai";
import { ethers } from "ethers";
import { computeCid } from "../../enclave";
import {
  SafeCliError,
  decodeRegistryError,
  encodeRegistryCall,
  generateUsageKey,
  type RegistryOp,
  type ScopeFields,
} from "../../scripts/safe/lib";
import { AccountRegistry__factory, type AccountRegistry } from "../../typechain-types";
import { emptyAccount, replayAccount } from "../../relayer/permissions/accountHistory";
import { createSafeOwner, SAFE_OWNER_KEYS } from "../helpers/safeOwner";
import { devKey, sigilWorld, type SigilWorld } from "./support";

// ------------------------------------------------------------------------------------------------
// The table
// ------------------------------------------------------------------------------------------------

const CODES = ["async function main() { return 'zero'; }", "async function main() { return 'one'; }"];

/** PKPs and actions are named by position (creation order / CODES index); groups by their id. */
type Op =
  | { op: "addKey"; label: string; scopes: ScopeFields }
  | { op: "updateKey"; label: string; scopes: ScopeFields }
  | { op: "removeKey"; label: string }
  | { op: "createPkp"; name: string }
  | { op: "createGroup"; name: string; pkps?: number[]; actions?: number[] }
  | { op: "deleteGroup"; group: number }
  | { op: "addAction"; group: number; action: number }
  | { op: "removeAction"; group: number; action: number }
  | { op: "addPkp"; group: number; pkp: number }
  | { op: "removePkp"; group: number; pkp: number }
  | { op: "execute"; action: number; pkp: number };

interface Step {
  /** "owner", or the label of a usage key. */
  actor: string;
  op: Op;
  /** "ok", or the stable error code of the refusal. */
  expect: string;
}

const STEPS: Step[] = [
  { actor: "owner", op: { op: "addKey", label: "observer", scopes: {} }, expect: "ok" },
  { actor: "owner", op: { op: "createPkp", name: "p0" }, expect: "ok" },
  { actor: "owner", op: { op: "createPkp", name: "p1" }, expect: "ok" },
  { actor: "owner", op: { op: "createGroup", name: "g1", pkps: [0], actions: [0] }, expect: "ok" },
  { actor: "owner", op: { op: "createGroup", name: "g2", actions: [1] }, expect: "ok" },
  { actor: "owner", op: { op: "addKey", label: "exec", scopes: { execute_in_groups: [1] } }, expect: "ok" },
  {
    actor: "owner",
    op: {
      op: "addKey",
      label: "ops",
      scopes: { can_create_pkps: true, add_pkp_to_groups: [1], manage_ipfs_ids_in_groups: [2] },
    },
    expect: "ok",
  },
  { actor: "exec", op: { op: "execute", action: 0, pkp: 0 }, expect: "ok" },
  { actor: "exec", op: { op: "execute", action: 1, pkp: 1 }, expect: "not_authorized_to_execute" },
  { actor: "ops", op: { op: "createPkp", name: "p2" }, expect: "ok" },
  { actor: "ops", op: { op: "addPkp", group: 1, pkp: 2 }, expect: "ok" },
  { actor: "ops", op: { op: "addPkp", group: 2, pkp: 2 }, expect: "missing_scope" },
  { actor: "ops", op: { op: "addAction", group: 2, action: 0 }, expect: "ok" },
  { actor: "ops", op: { op: "addAction", group: 1, action: 1 }, expect: "missing_scope" },
  { actor: "ops", op: { op: "createGroup", name: "nope" }, expect: "missing_scope" },
  { actor: "ops", op: { op: "removePkp", group: 1, pkp: 2 }, expect: "missing_scope" },
  {
    actor: "exec",
    op: { op: "addKey", label: "rogue", scopes: { execute_in_groups: [0] } },
    expect: "owner_only",
  },
  {
    actor: "owner",
    op: { op: "updateKey", label: "exec", scopes: { execute_in_groups: [0] } },
    expect: "ok",
  },
  { actor: "owner", op: { op: "addPkp", group: 2, pkp: 1 }, expect: "ok" },
  { actor: "exec", op: { op: "execute", action: 1, pkp: 1 }, expect: "ok" },
  { actor: "owner", op: { op: "addPkp", group: 2, pkp: 1 }, expect: "pkp_already_in_group" },
  { actor: "owner", op: { op: "removeAction", group: 1, action: 1 }, expect: "action_not_in_group" },
  { actor: "owner", op: { op: "removePkp", group: 1, pkp: 0 }, expect: "ok" },
  { actor: "exec", op: { op: "execute", action: 0, pkp: 0 }, expect: "not_authorized_to_execute" },
  { actor: "owner", op: { op: "removeAction", group: 2, action: 0 }, expect: "ok" },
  { actor: "owner", op: { op: "deleteGroup", group: 2 }, expect: "ok" },
  { actor: "owner", op: { op: "deleteGroup", group: 2 }, expect: "group_not_found" },
  { actor: "exec", op: { op: "execute", action: 1, pkp: 1 }, expect: "not_authorized_to_execute" },
  { actor: "owner", op: { op: "removeKey", label: "ops" }, expect: "ok" },
  { actor: "ops", op: { op: "createPkp", name: "late" }, expect: "unknown_api_key" },
  { actor: "owner", op: { op: "addKey", label: "exec2", scopes: { execute_in_groups: [1] } }, expect: "ok" },
  { actor: "owner", op: { op: "removeKey", label: "exec" }, expect: "ok" },
  { actor: "exec", op: { op: "execute", action: 0, pkp: 2 }, expect: "unknown_api_key" },
  { actor: "exec2", op: { op: "execute", action: 0, pkp: 2 }, expect: "ok" },
];

/** Registry custom errors → the relayer's codes for the same refusal (docs/errors.md). */
const REGISTRY_TO_API: Record<string, string> = {
  PkpAlreadyInGroup: "pkp_already_in_group",
  PkpNotInGroup: "pkp_not_in_group",
  ActionAlreadyInGroup: "action_already_in_group",
  ActionNotInGroup: "action_not_in_group",
  UnknownGroup: "group_not_found",
  UnknownKey: "usage_key_not_found",
  PkpNotInAccount: "pkp_not_found",
};

// ------------------------------------------------------------------------------------------------
// The three ways of acting as the owner
// ------------------------------------------------------------------------------------------------

type Run = "A (relayer, API keys)" | "B (owner EOA)" | "B (Safe 2-of-3)";
const RUNS: Run[] = ["A (relayer, API keys)", "B (owner EOA)", "B (Safe 2-of-3)"];
const EOA_OWNER = devKey(6);

interface RunState {
  run: Run;
  accountId: bigint;
  /** The account key (run A only). */
  accountKey?: string;
  /** label → usage key value and address. */
  keys: Map<string, { value: string; address: string }>;
  /** PKP ids in creation order. */
  pkps: string[];
  /** Owner write on chain (runs B): returns after the receipt. */
  ownerTx?: (op: RegistryOp) => Promise<void>;
}

interface Snapshot {
  outcome: string;
  registry: unknown;
  relayer: unknown;
  executions: Record<string, string>;
}

describe("conformance: relayer (path A), owner EOA and Safe (path B) agree", function () {
  this.timeout(300_000);
  let w: SigilWorld;
  let registry: AccountRegistry;
  let cids: string[];
  const results = new Map<Run, Snapshot[]>();

  const outcomeOf = (r: { status: number; body: { error?: { code?: string } } | null }) =>
    r.status >= 200 && r.status < 300 ? "ok" : (r.body?.error?.code ?? `http_${r.status}`);

  async function setupRun(run: Run): Promise<RunState> {
    const s: RunState = { run, accountId: 0n, keys: new Map(), pkps: [] };
    if (run === "A (relayer, API keys)") {
      const r = await w.api.post("/new_account", undefined, {
        account_name: "conformance",
        account_description: "",
      });
      s.accountKey = r.body.api_key;
      s.accountId = BigInt(r.body.account_id);
      return s;
    }
    if (run === "B (owner EOA)") {
      const owner = new ethers.NonceManager(new ethers.Wallet(EOA_OWNER, w.chain.provider));
      s.ownerTx = async (op) => {
        const data = encodeRegistryCall(op).data;
        // Simulate first so a refusal comes back as the registry's error, as the Safe tool does.
        await w.chain.provider.call({ from: from(EOA_OWNER), to: w.registry, data });
        await (await owner.sendTransaction({ to: w.registry, data })).wait();
      };
      await s.ownerTx({ op: "call", method: "createAccount", args: ["conformance", ethers.ZeroAddress] });
      s.accountId = await registry.accountOfOwner(from(EOA_OWNER));
      return s;
    }
    // Signed by the second and third owners: any two of the three will do.
    const safe = await createSafeOwner(w.ctx, w.registry, { signerKeys: SAFE_OWNER_KEYS.slice(1) });
    s.ownerTx = async (op) => {
      await safe.tx(op);
    };
    await s.ownerTx({ op: "call", method: "createAccount", args: ["conformance", ethers.ZeroAddress] });
    s.accountId = await registry.accountOfOwner(safe.address);
    return s;
  }

  /** The owner's write on chain (runs B), with a refusal mapped to the relayer's code. */
  async function chainOwner(s: RunState, op: RegistryOp): Promise<string> {
    try {
      await s.ownerTx!(op);
      return "ok";
    } catch (e) {
      const name =
        e instanceof SafeCliError
          ? (e.details?.error as string | undefined)
          : decodeRegistryError((e as { data?: string }).data)?.name;
      if (!name) throw e;
      return REGISTRY_TO_API[name] ?? `registry:${name}`;
    }
  }

  function registryOp(s: RunState, op: Op): RegistryOp {
    switch (op.op) {
      case "addKey": {
        const k = generateUsageKey();
        s.keys.set(op.label, { value: k.usageApiKey, address: k.address });
        return { op: "add-key", key: k.address, keyHash: k.keyHash, name: op.label, scopes: op.scopes };
      }
      case "updateKey":
        return { op: "update-key", key: s.keys.get(op.label)!.address, name: op.label, scopes: op.scopes };
      case "removeKey":
        return { op: "remove-key", key: s.keys.get(op.label)!.address };
      case "createPkp":
        return { op: "create-pkp", name: op.name };
      case "createGroup":
        return {
          op: "create-group",
          name: op.name,
          pkpIds: (op.pkps ?? []).map((i) => s.pkps[i]),
          cids: (op.actions ?? []).map((i) => cids[i]),
        };
      case "deleteGroup":
        return { op: "delete-group", groupId: op.group };
      case "addAction":
        return { op: "add-action", groupId: op.group, cid: cids[op.action] };
      case "removeAction":
        return { op: "remove-action", groupId: op.group, cid: cids[op.action] };
      case "addPkp":
        return { op: "add-pkp", groupId: op.group, pkpId: s.pkps[op.pkp] };
      case "removePkp":
        return { op: "remove-pkp", groupId: op.group, pkpId: s.pkps[op.pkp] };
      case "execute":
        throw new Error("the owner does not execute in this table");
    }
  }

  /** The same operation over HTTP with `key` (the account key in run A, or a usage key in any run). */
  async function http(s: RunState, key: string, op: Op): Promise<string> {
    const scopesBody = (f: ScopeFields) => ({
      can_create_groups: false,
      can_delete_groups: false,
      can_create_pkps: false,
      ...f,
    });
    switch (op.op) {
      case "addKey": {
        const r = await w.api.post("/add_usage_api_key", key, {
          name: op.label,
          description: "",
          ...scopesBody(op.scopes),
        });
        if (r.status === 201) s.keys.set(op.label, { value: r.body.usage_api_key, address: r.body.id });
        return outcomeOf(r);
      }
      case "updateKey":
        return outcomeOf(
          await w.api.post("/update_usage_api_key", key, {
            id: s.keys.get(op.label)!.address,
            name: op.label,
            description: "",
            ...scopesBody(op.scopes),
          }),
        );
      case "removeKey":
        return outcomeOf(
          await w.api.post("/remove_usage_api_key", key, { id: s.keys.get(op.label)!.address }),
        );
      case "createPkp":
        return outcomeOf(await w.api.post("/pkps/create", key, { name: op.name, description: "" }));
      case "createGroup":
        return outcomeOf(
          await w.api.post("/groups", key, {
            name: op.name,
            description: "",
            pkps: (op.pkps ?? []).map((i) => s.pkps[i]),
            actions: (op.actions ?? []).map((i) => cids[i]),
          }),
        );
      case "deleteGroup":
        return outcomeOf(await w.api.call("DELETE", `/groups/${op.group}`, key));
      case "addAction":
        return outcomeOf(await w.api.post(`/groups/${op.group}/actions`, key, { add: [cids[op.action]] }));
      case "removeAction":
        return outcomeOf(await w.api.post(`/groups/${op.group}/actions`, key, { remove: [cids[op.action]] }));
      case "addPkp":
        return outcomeOf(await w.api.post(`/groups/${op.group}/pkps`, key, { add: [s.pkps[op.pkp]] }));
      case "removePkp":
        return outcomeOf(await w.api.post(`/groups/${op.group}/pkps`, key, { remove: [s.pkps[op.pkp]] }));
      case "execute":
        return outcomeOf(
          await w.api.post("/svc_action", key, { code: CODES[op.action], pkp_id: s.pkps[op.pkp] }),
        );
    }
  }

  async function perform(s: RunState, step: Step): Promise<string> {
    if (step.actor !== "owner") return http(s, s.keys.get(step.actor)!.value, step.op);
    if (s.accountKey) return http(s, s.accountKey, step.op);
    return chainOwner(s, registryOp(s, step.op));
  }

  // --- snapshots -----------------------------------------------------------------------------------

  async function registrySnapshot(s: RunState) {
    const label = new Map([...s.keys].map(([l, k]) => [k.address, l]));
    const pos = (id: string) => s.pkps.indexOf(id.toLowerCase());
    const a = await registry.getAccount(s.accountId);
    // Names, key hashes, CID strings and member lists live in the registry's events only: read them as
    // every reader does, by replaying the account's events; scopes and counts come from the views.
    const history = await replayAccount(
      w.chain.provider,
      w.registry,
      emptyAccount(Number(s.accountId)),
      0,
      await w.chain.provider.getBlockNumber(),
    );
    const [pkps] = await registry.listPkps(s.accountId, 0, 50);
    const [groups] = await registry.listGroups(s.accountId, 0, 50);
    return {
      counts: { groups: a.groupCount, pkps: a.pkpCount, keys: a.keyCount },
      keys: (
        await Promise.all(
          [...history.keys.values()].map(async (k) => {
            const v = (await registry.getKey(k.address)).scopes;
            return {
              label: label.get(k.address) ?? `unlabelled ${k.address}`,
              name: k.name,
              description: k.description,
              expiration: BigInt(k.expiration),
              hasHash: k.keyHash !== ethers.ZeroHash,
              scopes: {
                canCreateGroups: v.canCreateGroups,
                canDeleteGroups: v.canDeleteGroups,
                canCreatePkps: v.canCreatePkps,
                manage: [...v.manageIpfsIdsInGroups],
                addPkp: [...v.addPkpToGroups],
                removePkp: [...v.removePkpFromGroups],
                execute: [...v.executeInGroups],
              },
            };
          }),
        )
      ).sort((x, y) => x.label.localeCompare(y.label)),
      pkps: pkps.map((p) => ({ pos: pos(p.id), name: p.name, description: p.description })),
      groups: groups.map((g) => {
        const h = history.groups.get(Number(g.id))!;
        return {
          id: g.id,
          name: h.name,
          description: h.description,
          pkps: [...h.pkps].map(pos).sort(),
          actions: [...h.actions.values()].sort(),
        };
      }),
    };
  }

  async function relayerSnapshot(s: RunState) {
    const observer = s.keys.get("observer")?.value;
    if (!observer) return null;
    const pos = (id: string) => s.pkps.indexOf(id.toLowerCase());
    const groups = await w.api.get("/groups?page_size=100", observer);
    const pkps = await w.api.get("/pkps?page_size=100", observer);
    const details = await Promise.all(
      groups.body.items.map(async (g: { group_id: number }) => {
        const d = (await w.api.get(`/groups/${g.group_id}`, observer)).body;
        return { ...d, pkps: d.pkps.map(pos).sort(), actions: [...d.actions].sort() };
      }),
    );
    return {
      groups: { ...groups.body },
      details,
      pkps: {
        ...pkps.body,
        items: pkps.body.items.map((p: { pkp_id: string; name: string; description: string }) => ({
          pos: pos(p.pkp_id),
          name: p.name,
          description: p.description,
        })),
      },
    };
  }

  /** Every key ever made × every action × the first three PKPs: allowed, or the refusal's code. */
  async function executionMatrix(s: RunState): Promise<Record<string, string>> {
    const cells: [string, string, number, number][] = [];
    for (const [label, k] of [...s.keys].sort(([a], [b]) => a.localeCompare(b))) {
      if (label === "observer") continue;
      for (let a = 0; a < CODES.length; a++) {
        for (let p = 0; p < Math.min(3, s.pkps.length); p++)
          cells.push([`${label} action${a} pkp${p}`, k.value, a, p]);
      }
    }
    const outcomes = await Promise.all(
      cells.map(([, key, a, p]) =>
        w.api.post("/svc_action", key, { code: CODES[a], pkp_id: s.pkps[p] }).then(outcomeOf),
      ),
    );
    return Object.fromEntries(cells.map(([name], i) => [name, outcomes[i]]));
  }

  async function runAll(run: Run): Promise<Snapshot[]> {
    const s = await setupRun(run);
    const snaps: Snapshot[] = [];
    for (const step of STEPS) {
      const outcome = await perform(s, step);
      // Path-B writes reach the relayer through its event poll: wait until it has applied the head.
      await w.api.waitForBlock(await w.chain.provider.getBlockNumber());
      const [pkps] = await registry.listPkps(s.accountId, 0, 50);
      s.pkps = pkps.map((p) => p.id.toLowerCase());
      snaps.push({
        outcome,
        registry: await registrySnapshot(s),
        relayer: await relayerSnapshot(s),
        executions: await executionMatrix(s),
      });
    }
    return snaps;
  }

  before(async function () {
    w = await sigilWorld();
    registry = AccountRegistry__factory.connect(w.registry, w.chain.provider);
    cids = await Promise.all(CODES.map((c) => computeCid(new TextEncoder().encode(c))));
    for (const run of RUNS) results.set(run, await runAll(run));
  });
  after(async function () {
    await w?.stopAll();
  });

  STEPS.forEach((step, i) => {
    const what = `${i + 1}. ${step.actor} ${step.op.op}${"group" in step.op ? ` g${step.op.group}` : ""}${"label" in step.op ? ` ${step.op.label}` : ""} → ${step.expect}`;
    it(`${what}: same outcome, registry state, relayer lists and execution matrix in all three runs`, function () {
      const [a, eoa, safe] = RUNS.map((r) => results.get(r)![i]);
      expect(a.outcome, "outcome in run A").to.equal(step.expect);
      expect(eoa, "owner EOA vs relayer").to.deep.equal(a);
      expect(safe, "Safe vs relayer").to.deep.equal(a);
    });
  });

  it("the table exercised allowed and refused executions", function () {
    const values = results.get(RUNS[0])!.flatMap((s) => Object.values(s.executions));
    expect([...new Set(values)].sort()).to.deep.equal(["not_authorized_to_execute", "ok", "unknown_api_key"]);
  });

  it("every run ends in the state the table describes", function () {
    for (const run of RUNS) {
      const last = results.get(run)![STEPS.length - 1].registry as {
        keys: { label: string; scopes: { execute: bigint[] } }[];
        pkps: { name: string }[];
        groups: { id: bigint; pkps: number[]; actions: string[] }[];
      };
      expect(
        last.keys.map((k) => [k.label, k.scopes.execute]),
        run,
      ).to.deep.equal([
        ["exec2", [1n]],
        ["observer", []],
      ]);
      expect(
        last.pkps.map((p) => p.name),
        run,
      ).to.deep.equal(["p0", "p1", "p2"]);
      expect(last.groups, run).to.deep.equal([
        { id: 1n, name: "g1", description: "", pkps: [2], actions: [cids[0]] },
      ]);
    }
  });
});

function from(key: string): string {
  return new ethers.Wallet(key).address;
}
