/**
 * Policy windows at the moment of signing, in the executor with real keys, a real worker pool and the
 * relayer's real counters (SQLite): every signing path of an action counts against the window of the
 * rule that allowed it, a full window is a `policy_denied` the action can catch, and a use whose
 * signature is not produced (the signer fails) is given back.
 */
import { expect } from "chai";
import { verifyMessage } from "ethers";
import { ActionExecutor } from "../../enclave/executor";
import type { KeyCapabilities } from "../../enclave/capabilities";
import type { GroupPolicy, Policy } from "../../enclave/policy";
import { migrate, openEngine, type DataLayer } from "../../relayer/db";
import { PolicyWindowStore } from "../../relayer/policyWindows";
import { expectOk, makeKeys, makeRunner, pkpIds } from "./helpers";

const THREE_LOGINS: Policy = {
  version: 1,
  rules: [
    { name: "three-logins", effect: "allow", operation: "message", window: { seconds: 3600, maxCount: 3 } },
  ],
};
const grants: GroupPolicy[] = [{ group: "7", policy: THREE_LOGINS }];

describe("policy windows: counted at the moment of signing", function () {
  this.timeout(120_000);
  const keys = makeKeys();
  const { allowed: PKP } = pkpIds();
  let db: DataLayer;
  let store: PolicyWindowStore;
  const executors: ActionExecutor[] = [];

  async function executorWith(k: KeyCapabilities) {
    const e = new ActionExecutor({ keys: k, poolSize: 1 });
    await e.ready();
    executors.push(e);
    return makeRunner(e, k);
  }

  beforeEach(async () => {
    db = openEngine({ sqlitePath: ":memory:" });
    await migrate(db);
    store = new PolicyWindowStore(db);
  });
  afterEach(() => db.close());
  after(async () => {
    for (const e of executors) await e.close();
  });

  it("every signing API counts against the one window; a full window is a policy_denied the action catches", async () => {
    const run = await executorWith(keys);
    const r = await run(
      `const out = [];
       const signer = Actions.getSigner({ pkpId: params.pkpId });
       const attempts = [
         () => Actions.signMessage({ pkpId: params.pkpId, message: "login: a" }),
         () => signer.signMessage("login: b"),
         () => Actions.signMessage({ pkpId: params.pkpId, message: "login: c" }),
         () => signer.signMessage("login: d"),
       ];
       for (const attempt of attempts) {
         try { out.push(await attempt()); } catch (e) { out.push(e.code + ": " + e.message); }
       }
       return out;`,
      { jsParams: { pkpId: PKP }, policiesFor: () => grants, policyWindows: store },
    );
    const out = expectOk(r) as string[];
    const address = keys.pkpAddress(PKP);
    expect(verifyMessage("login: a", out[0])).to.equal(address);
    expect(verifyMessage("login: b", out[1])).to.equal(address);
    expect(verifyMessage("login: c", out[2])).to.equal(address);
    expect(out[3])
      .to.match(/^policy_denied: /)
      .and.contain("rule three-logins (group 7)")
      .and.contain("window.maxCount = 4");
    expect(r.policy_decisions!.map((d) => d.allowed)).to.deep.equal([true, true, true, false]);
    expect(r.policy_decisions![3]).to.include({ rule: "three-logins", field: "window.maxCount", value: "4" });
    expect(await store.uses(`${PKP.toLowerCase()}:7:three-logins:any:none`)).to.have.length(3);
  });

  it("a use whose signature is not produced is given back", async () => {
    // The enclave's signer failing after the check (a fault injected into the real capabilities).
    const down = new Set<PropertyKey>(["pkpSignMessage", "pkpSignDigest", "pkpKeyForRun"]);
    const failing = new Proxy(keys, {
      get(target, p) {
        if (down.has(p))
          return () => {
            throw new Error("signer down");
          };
        const v = Reflect.get(target, p, target);
        return typeof v === "function" ? v.bind(target) : v;
      },
    }) as KeyCapabilities;
    const run = await executorWith(failing);
    const r = await run(
      `try { await Actions.signMessage({ pkpId: params.pkpId, message: "login: x" }); return "signed"; }
       catch (e) { return "failed"; }`,
      { jsParams: { pkpId: PKP }, policiesFor: () => grants, policyWindows: store },
    );
    expect(expectOk(r)).to.equal("failed");
    expect(r.policy_decisions!.map((d) => d.allowed)).to.deep.equal([true]);
    expect(await store.uses(`${PKP.toLowerCase()}:7:three-logins:any:none`)).to.deep.equal([]);
  });
});
