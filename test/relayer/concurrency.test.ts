/**
 * 50 concurrent path-A writes from several keys of several accounts (several per principal, so the
 * per-principal serialization and the per-wallet nonce order are both exercised) all land, and the
 * answers match chain state.
 */
import { expect } from "chai";
import { AccountRegistry__factory } from "../../typechain-types";
import { startStack, type Stack } from "../helpers/stack";

describe("relayer: concurrent writes", function () {
  this.timeout(120_000);
  let s: Stack;

  before(async () => {
    s = await startStack({ gasWallets: 3 });
  });
  after(async () => {
    await s?.close();
  });

  it("50 concurrent writes from 9 principals in 3 accounts all land, with chain state matching the answers", async () => {
    const accounts: { id: number; keys: string[] }[] = [];
    for (let i = 0; i < 3; i++) {
      const a = await s.api("POST", "/core/v1/new_account", { body: { account_name: `c${i}` } });
      const keys = [a.body.api_key as string];
      for (let j = 0; j < 2; j++) {
        const k = await s.api("POST", "/core/v1/add_usage_api_key", {
          key: a.body.api_key,
          body: { name: `k${j}`, can_create_pkps: true, can_create_groups: true },
        });
        keys.push(k.body.usage_api_key);
      }
      accounts.push({ id: a.body.account_id, keys });
    }
    const jobs = Array.from({ length: 50 }, (_, i) => {
      const acct = accounts[i % 3];
      const key = acct.keys[Math.floor(i / 3) % 3];
      const route = i % 2 === 0 ? "/core/v1/pkps/create" : "/core/v1/groups";
      return { acct, route, p: s.api("POST", route, { key, body: { name: `w${i}` } }) };
    });
    const results = await Promise.all(jobs.map((j) => j.p));
    for (const r of results) expect(r.status, JSON.stringify(r.body)).to.equal(201);

    const registry = AccountRegistry__factory.connect(s.deployment.registry, s.provider);
    for (const acct of accounts) {
      const mine = jobs.map((j, i) => ({ ...j, r: results[i] })).filter((j) => j.acct === acct);
      const pkpIds = mine.filter((j) => j.route.endsWith("create")).map((j) => j.r.body.pkp_id as string);
      const groupIds = mine
        .filter((j) => j.route === "/core/v1/groups")
        .map((j) => j.r.body.group_id as number);
      const [chainPkps, pkpTotal] = await registry.listPkps(acct.id, 0, 100);
      expect(Number(pkpTotal)).to.equal(pkpIds.length);
      expect(chainPkps.map((p) => p.id.toLowerCase()).sort()).to.deep.equal([...pkpIds].sort());
      const [chainGroups] = await registry.listGroups(acct.id, 0, 100);
      expect(chainGroups.map((g) => Number(g.id)).sort((x, y) => x - y)).to.deep.equal(
        [...groupIds].sort((x, y) => x - y),
      );
      // Group ids are sequential and unique per account.
      expect(new Set(groupIds).size).to.equal(groupIds.length);
      // The cache agrees with the chain.
      const listed = await s.api("GET", "/core/v1/pkps?page_size=100", { key: acct.keys[0] });
      expect(listed.body.total).to.equal(pkpIds.length);
    }
  });
});
