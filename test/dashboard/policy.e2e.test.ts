/**
 * The group page's signing policy, in a real Chromium on the real stack: the editor shows the schema's
 * problems inline, the preview answers allow or deny with the deciding rule before anything is written,
 * "set policy" uploads the document and sets it through path A (the group then names its CID), "clear
 * policy" clears it; for a ChainSecured account the same change is the owner's setGroupPolicy
 * transaction, whose Safe Transaction Builder file decodes to that call and which the wallet can send.
 */
import * as fs from "node:fs";
import { expect } from "chai";
import { Wallet } from "ethers";
import type { Browser } from "playwright-core";
import { encodeRegistryCall } from "../../scripts/safe/lib";
import { registryInterface } from "../../scripts/safe/lib/registryCalls";
import { setupAccount, type Stack } from "../helpers/stack";
import { openPage, seriousViolations, type WatchedPage } from "./browser";
import { ANVIL_KEY_1, injectWallet } from "./injectedWallet";
import { guardSteps, signIn, startDashboardRig, visit, type DashboardRig } from "./support";

const POLICY = {
  version: 1,
  description: "Transfers of at most 1000 wei on the local chain",
  rules: [
    {
      name: "small-transfers",
      effect: "allow",
      operation: "transaction",
      chainIds: [31337],
      value: { max: "1000" },
    },
  ],
};

describe("dashboard: a group's signing policy (Chromium)", function () {
  this.timeout(240_000);
  let rig: DashboardRig;
  let stack: Stack;
  let browser: Browser;
  let tab: WatchedPage | undefined;
  let chainTab: WatchedPage | undefined;
  let account: Awaited<ReturnType<typeof setupAccount>>;
  let setCid = "";
  let chainKey = "";
  let chainGroupId = 0;
  let chainActionCid = "";

  before(async function () {
    rig = await startDashboardRig();
    ({ stack, browser } = rig);
    account = await setupAccount(stack);
    tab = await openPage(browser, stack.url);
    await signIn(tab, account.accountKey);
  });

  after(async () => {
    await rig?.close();
  });

  guardSteps(() => ({ tab, chainTab }));

  const editor = (w: WatchedPage) => w.page.getByTestId("group-policy");
  const openGroup = async (w: WatchedPage, groupId: number) => {
    await visit(w, "groups", "Groups");
    await w.page.locator(`tr[data-group-id="${groupId}"]`).getByRole("button", { name: "Edit" }).click();
    await editor(w).waitFor();
  };
  const policyField = (w: WatchedPage) => editor(w).getByLabel("Policy document (JSON)");
  const groupPolicyCid = async (key: string, groupId: number) =>
    (await stack.api<{ policy_cid: string | null }>("GET", `/core/v1/groups/${groupId}`, { key })).body
      .policy_cid;

  it("shows a group without a policy, and refuses text that is not JSON inline without sending it", async () => {
    await openGroup(tab!, account.groupId);
    await editor(tab!).getByTestId("policy-none").waitFor();
    await policyField(tab!).fill("{ not json");
    tab!.requests.length = 0;
    await editor(tab!).getByRole("button", { name: "Preview" }).click();
    await editor(tab!).getByText("The policy is not valid JSON").waitFor();
    expect(tab!.requests).to.deep.equal([]);
  });

  it("shows the schema's problems inline (the API's invalid_policy details)", async () => {
    const bad = { ...POLICY, rules: [{ ...POLICY.rules[0], effect: "maybe", prefix: "x" }] };
    await policyField(tab!).fill(JSON.stringify(bad, null, 2));
    await editor(tab!).getByRole("button", { name: "Preview" }).click();
    const problems = editor(tab!).getByTestId("policy-problems");
    await problems.waitFor();
    const text = (await problems.textContent())!;
    expect(text).to.contain("effect");
    expect(text).to.contain("prefix");
    expect(await editor(tab!).getByTestId("policy-decision").count()).to.equal(0);
  });

  it("previews allow and deny with the deciding rule, writing nothing", async () => {
    await policyField(tab!).fill(JSON.stringify(POLICY, null, 2));
    const ops = editor(tab!).getByLabel("Operation fields (JSON)");
    const preview = async () => {
      await editor(tab!).getByRole("button", { name: "Preview" }).click();
      await editor(tab!).getByTestId("policy-decision").waitFor();
      return {
        verdict: await editor(tab!).getByTestId("policy-verdict").textContent(),
        rule: await editor(tab!).getByTestId("policy-rule").textContent(),
      };
    };
    tab!.requests.length = 0;
    // The example transaction: 1000 wei on chain 31337, inside the rule.
    expect(await preview()).to.deep.equal({ verdict: "Allowed", rule: "small-transfers" });
    await ops.fill(
      JSON.stringify({
        transaction: { chainId: 31337, to: "0x0000000000000000000000000000000000000002", value: "1001" },
      }),
    );
    // Refused by the allow rule it came closest to, naming the condition and the value that failed.
    expect(await preview()).to.deep.equal({ verdict: "Denied", rule: "small-transfers" });
    expect(await editor(tab!).getByTestId("policy-decision").textContent()).to.contain("1001");
    await editor(tab!).getByLabel("Operation", { exact: true }).selectOption("keyExport");
    expect(await preview()).to.deep.equal({ verdict: "Denied", rule: "(default deny)" });
    // An operation the API cannot parse is explained inline, with its code.
    await editor(tab!).getByLabel("Operation", { exact: true }).selectOption("digest");
    await ops.fill(JSON.stringify({ digest: "0x1234" }));
    await editor(tab!).getByRole("button", { name: "Preview" }).click();
    await editor(tab!).getByRole("alert").filter({ hasText: "invalid_request" }).waitFor();
    expect(tab!.requests.filter((r) => r.startsWith("POST"))).to.deep.equal(
      Array(4).fill("POST /core/v1/policies/evaluate"),
    );
    expect(await groupPolicyCid(account.accountKey, account.groupId)).to.equal(null);
    expect(await seriousViolations(tab!.page)).to.deep.equal([]);
  });

  it("sets the policy (upload, confirm, path A): the group names its CID", async () => {
    await editor(tab!).getByRole("button", { name: "Set policy…" }).click();
    const confirm = editor(tab!).getByTestId("policy-confirm");
    await confirm.waitFor();
    setCid = (await confirm.getByTestId("uploaded-cid").textContent())!;
    // Uploaded, not yet set: nothing changes before the confirmation.
    expect(await groupPolicyCid(account.accountKey, account.groupId)).to.equal(null);
    await confirm.getByRole("button", { name: "Confirm: set policy" }).click();
    await editor(tab!).getByTestId("policy-cid").filter({ hasText: setCid }).waitFor({ timeout: 60_000 });
    expect(await groupPolicyCid(account.accountKey, account.groupId)).to.equal(setCid);
    expect(
      await tab!.page
        .locator(`tr[data-group-id="${account.groupId}"] td[data-policy-cid]`)
        .getAttribute("data-policy-cid"),
    ).to.equal(setCid);
    // The editor now shows the stored document.
    expect(JSON.parse(await policyField(tab!).inputValue())).to.deep.equal(POLICY);
  });

  it("clears the policy after a confirmation", async () => {
    await editor(tab!).getByRole("button", { name: "Clear policy" }).click();
    await tab!.page.getByRole("dialog").getByRole("button", { name: "Clear policy" }).click();
    await editor(tab!).getByTestId("policy-none").waitFor({ timeout: 60_000 });
    expect(await groupPolicyCid(account.accountKey, account.groupId)).to.equal(null);
  });

  it("for a ChainSecured account, offers the owner's setGroupPolicy transaction: the Safe file decodes to it, the wallet sends it", async () => {
    const chainAccount = await setupAccount(stack);
    chainKey = chainAccount.accountKey;
    chainGroupId = chainAccount.groupId;
    chainActionCid = chainAccount.cid;
    const owner = new Wallet(ANVIL_KEY_1, stack.provider);
    const t = await stack.api("POST", "/core/v1/account/transfer_ownership", {
      key: chainAccount.accountKey,
      body: { new_owner: owner.address },
    });
    expect(t.status).to.equal(200);
    await (
      await owner.sendTransaction({
        to: stack.deployment.registry,
        data: encodeRegistryCall({ op: "accept-ownership", accountId: chainAccount.accountId }).data,
      })
    ).wait();
    chainTab = await openPage(browser, stack.url);
    await signIn(chainTab, chainAccount.accountKey);
    // The wallet after signing in (with one, the sign-in page offers a second "Sign in" button).
    await injectWallet(chainTab, stack);
    await chainTab.page.reload();
    await openGroup(chainTab, chainAccount.groupId);
    await policyField(chainTab).fill(JSON.stringify(POLICY, null, 2));
    chainTab.requests.length = 0;
    await editor(chainTab).getByRole("button", { name: "Set policy (owner transaction)…" }).click();
    const preview = chainTab.page.getByTestId("tx-preview");
    await preview.waitFor();
    // Only the upload went to the API; no path-A write.
    expect(chainTab.requests.filter((r) => r.startsWith("POST"))).to.deep.equal(["POST /core/v1/policies"]);
    expect(await preview.getByTestId("tx-function").textContent()).to.equal("setGroupPolicy");
    const [download] = await Promise.all([
      chainTab.page.waitForEvent("download"),
      preview.getByRole("button", { name: "Download Safe Transaction Builder file" }).click(),
    ]);
    const batch = JSON.parse(fs.readFileSync((await download.path())!, "utf8"));
    expect(batch.chainId).to.equal("31337");
    expect(batch.meta.createdFromSafeAddress).to.equal(owner.address);
    expect(batch.transactions).to.have.length(1);
    const [tx] = batch.transactions;
    expect(tx.to).to.equal(stack.deployment.registry);
    expect(tx.value).to.equal("0");
    const call = registryInterface.parseTransaction({ data: tx.data })!;
    expect(call.name).to.equal("setGroupPolicy");
    expect(Number(call.args[0])).to.equal(chainAccount.groupId);
    expect(call.args[1]).to.equal(setCid); // the same document, so the same CID
    // Byte for byte what the Safe tool proposes (npm run safe: propose set-group-policy).
    expect(tx.data).to.equal(
      encodeRegistryCall({ op: "set-group-policy", groupId: chainAccount.groupId, cid: setCid }).data,
    );
    expect(await groupPolicyCid(chainAccount.accountKey, chainAccount.groupId)).to.equal(null);
    await preview.getByRole("button", { name: "Send with wallet" }).click();
    await chainTab.page
      .locator(`tr[data-group-id="${chainAccount.groupId}"] td[data-policy-cid="${setCid}"]`)
      .waitFor({ timeout: 60_000 });
    expect(await groupPolicyCid(chainAccount.accountKey, chainAccount.groupId)).to.equal(setCid);
    await editor(chainTab).getByTestId("policy-cid").filter({ hasText: setCid }).waitFor();
  });

  it("signed in with the wallet (read-only), the owner clears the policy and sets it again by its CID, as transactions", async () => {
    const { page } = chainTab!;
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("button", { name: "Sign in with wallet" }).click();
    await page.getByRole("heading", { level: 1, name: "Overview" }).waitFor();
    await openGroup(chainTab!, chainGroupId);
    await editor(chainTab!).getByTestId("policy-cid").filter({ hasText: setCid }).waitFor();
    // No preview (a POST the wallet session may not make); the stored document is shown.
    await editor(chainTab!).getByTestId("policy-read-only").waitFor();
    expect(await editor(chainTab!).getByRole("button", { name: "Preview" }).count()).to.equal(0);
    expect(JSON.parse(await policyField(chainTab!).inputValue())).to.deep.equal(POLICY);

    await editor(chainTab!).getByRole("button", { name: "Clear policy" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Clear policy" }).click();
    let preview = page.getByTestId("tx-preview");
    await preview.waitFor();
    expect(await preview.getByTestId("tx-function").textContent()).to.equal("setGroupPolicy");
    await preview.getByRole("button", { name: "Send with wallet" }).click();
    await editor(chainTab!).getByTestId("policy-none").waitFor({ timeout: 60_000 });
    expect(await groupPolicyCid(chainKey, chainGroupId)).to.equal(null);

    const cidField = editor(chainTab!).getByLabel("CID of an uploaded policy");
    const propose = editor(chainTab!).getByRole("button", { name: "Set policy (owner transaction)…" });
    await cidField.fill("not-a-cid");
    await propose.click();
    await editor(chainTab!).getByText("A CID (Qm… or b…)").waitFor();
    await cidField.fill(setCid);
    await propose.click();
    preview = page.getByTestId("tx-preview");
    await preview.waitFor();
    expect(await preview.textContent()).to.contain(setCid);
    // What is proposed is shown first: the document stored under that CID.
    expect(JSON.parse(await policyField(chainTab!).inputValue())).to.deep.equal(POLICY);
    await preview.getByRole("button", { name: "Send with wallet" }).click();
    await editor(chainTab!)
      .getByTestId("policy-cid")
      .filter({ hasText: setCid })
      .waitFor({ timeout: 60_000 });
    expect(await groupPolicyCid(chainKey, chainGroupId)).to.equal(setCid);
    expect(await seriousViolations(page)).to.deep.equal([]);
  });

  it("explains a group whose on-chain policy is not a policy document (set by the owner directly) inline", async () => {
    // Path B accepts any CID: here the CID of the account's action code, stored but not a policy.
    const owner = new Wallet(ANVIL_KEY_1, stack.provider);
    await (
      await owner.sendTransaction({
        to: stack.deployment.registry,
        data: encodeRegistryCall({ op: "set-group-policy", groupId: chainGroupId, cid: chainActionCid }).data,
      })
    ).wait();
    const until = Date.now() + 30_000;
    while ((await groupPolicyCid(chainKey, chainGroupId)) !== chainActionCid && Date.now() < until)
      await new Promise((r) => setTimeout(r, 200));
    await chainTab!.page.reload(); // a fresh page: the group list and its editor read the chain's change
    await openGroup(chainTab!, chainGroupId);
    await editor(chainTab!).getByTestId("policy-cid").filter({ hasText: chainActionCid }).waitFor();
    await editor(chainTab!).getByRole("alert").filter({ hasText: "invalid_policy" }).waitFor();
    // The editor is still there: the owner can set a readable policy or clear this one.
    await editor(chainTab!).getByRole("button", { name: "Clear policy" }).waitFor();
  });
});
