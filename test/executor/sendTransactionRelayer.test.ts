/**
 * The chain list reaches the executor: through the relayer started as `npm start` starts it (the
 * registry's chain, named "embedded", plus SIGIL_CHAINS entries), an action sends from its PKP on the
 * registry's chain with no chain configured by hand, and a chain id outside the list is refused.
 */
import { expect } from "chai";
import { getAddress } from "ethers";
import { resolveConfig } from "../../relayer/config";
import { setupAccount, startStack, type Stack } from "../helpers/stack";

const CODE = `async function main(p) {
  try {
    return { ok: await Actions.sendTransaction({ pkpId: p.pkpId, chainId: p.chainId, tx: { to: p.to, value: 7 }, wait: true }) };
  } catch (e) {
    return { code: e.code, message: e.message };
  }
}`;

describe("executor: sendTransaction through the relayer's chain list", function () {
  this.timeout(180_000);
  let s: Stack;

  before(async () => {
    s = await startStack({ embeddedChain: true });
  });
  after(() => s?.close());

  it("resolves the chain list: the registry's chain first, then the operator's", () => {
    const cfg = resolveConfig({
      ...s.relayerOptions,
      chainId: 31337,
      confirmations: 2,
      embeddedChain: true,
      chains: [
        { chainId: 84532, name: "base-sepolia", rpcUrl: "https://sepolia.base.org", confirmations: 3 },
      ],
    });
    expect(cfg.chains).to.deep.equal([
      { chainId: 31337, name: "embedded", rpcUrl: s.relayerOptions.rpcUrl, confirmations: 2 },
      { chainId: 84532, name: "base-sepolia", rpcUrl: "https://sepolia.base.org", confirmations: 3 },
    ]);
    const external = resolveConfig({ ...s.relayerOptions, chainId: 10, embeddedChain: false });
    expect(external.chains[0].name).to.equal("registry");
  });

  it("an action sends on the registry's chain, and a chain outside the list is refused", async () => {
    const a = await setupAccount(s, CODE);
    const from = s.enclave.pkpAddress(a.pkpId);
    await s.provider.send("anvil_setBalance", [from, "0x" + (10n ** 18n).toString(16)]);
    const to = getAddress("0x000000000000000000000000000000000000c0de");
    const exec = (chainId: number) =>
      s.api("POST", "/core/v1/svc_action", {
        key: a.accountKey,
        body: { cid: a.cid, pkp_id: a.pkpId, js_params: { pkpId: a.pkpId, chainId, to } },
      });
    const r = await exec(31337);
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    expect(r.body.has_error, JSON.stringify(r.body)).to.equal(false);
    const ok = r.body.response.ok;
    expect(ok, JSON.stringify(r.body.response)).to.not.equal(undefined);
    expect(ok.from).to.equal(from);
    expect(ok.receipt.status).to.equal(1);
    expect(await s.provider.getBalance(to)).to.equal(7n);
    // In the audit log like any signing run: one key operation, on the PKP.
    const audit = await s.api("GET", "/core/v1/audit?type=execution", { key: a.accountKey });
    expect(audit.status, JSON.stringify(audit.body)).to.equal(200);
    const entry = audit.body.items.find((e: { data: { cid: string } }) => e.data.cid === a.cid);
    expect(entry.data.key_operation_count).to.equal(1);
    expect(entry.data.pkps_used).to.deep.equal([a.pkpId.toLowerCase()]);
    const refused = await exec(84532);
    expect(refused.body.response.code).to.equal("chain_not_configured");
  });
});
