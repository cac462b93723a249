/**
 * Signed forward requests and billing (real ledger, simulated processor): a forwarded write is charged
 * like the bearer endpoint's write (one write, under the same operation name, to the key), and an
 * account without credits is refused with 402 before anything reaches the chain.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import { createSigil, SigilError } from "sigil/sdk";
import { createBilling, SimulatedProcessor, type Billing } from "../../relayer/billing";
import { setupAccount, startStack, type Stack } from "../helpers/stack";

describe("signed forward requests: billing", function () {
  this.timeout(120_000);
  let s: Stack;
  let dir: string;
  let billing: Billing;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-forward-billing-"));
    billing = await createBilling({
      dbPath: path.join(dir, "billing.sqlite"),
      processor: new SimulatedProcessor(),
      signupCreditCents: 100,
      chargeFlushMs: 0,
    });
    s = await startStack({ billing });
  });
  after(async () => {
    await s?.close();
    await billing?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const balance = async (key: string) =>
    (await s.api("GET", "/core/v1/billing/balance", { key })).body.balance_cents as number;
  const usageKey = async (accountKey: string) =>
    (
      await s.api("POST", "/core/v1/add_usage_api_key", {
        key: accountKey,
        body: { name: "writer", can_create_pkps: true },
      })
    ).body.usage_api_key as string;

  it("charges one write, as create_pkp, to the signing key", async () => {
    const a = await setupAccount(s);
    const key = await usageKey(a.accountKey);
    const before = await balance(a.accountKey);
    const pkp = await createSigil({ baseUrl: s.url, apiKey: key }).createPkp({ name: "billed" });
    expect(await balance(a.accountKey)).to.equal(before - 1);
    const last = (await billing.history(String(a.accountId), 0, 1)).items[0];
    const signer = createSigil({ baseUrl: s.url, apiKey: key }).keyAddress!.toLowerCase();
    // One charge per forward request (the key's first forwarder nonce), never per transaction.
    const forwarder = s.deployment.forwarder.toLowerCase();
    expect([last.operation, last.reference, last.amount_cents]).to.deep.equal([
      "create_pkp",
      `write:31337:${forwarder}:${signer}:0`,
      1,
    ]);
    expect(pkp.tx_hash).to.match(/^0x[0-9a-f]{64}$/);
    expect(last.key_address).to.equal(signer);
  });

  it("without credits: 402 insufficient_credits, nothing written", async () => {
    const a = await setupAccount(s);
    const key = await usageKey(a.accountKey);
    while ((await balance(a.accountKey)) > 0)
      expect((await s.api("POST", "/core/v1/pkps/create", { key: a.accountKey, body: {} })).status).to.equal(
        201,
      );
    const pkps = (await s.api("GET", "/core/v1/pkps", { key: a.accountKey })).body.total as number;
    const err = (await createSigil({ baseUrl: s.url, apiKey: key })
      .createPkp({ name: "unpaid" })
      .catch((e: unknown) => e)) as SigilError;
    expect([err.status, err.code]).to.deep.equal([402, "insufficient_credits"]);
    expect((await s.api("GET", "/core/v1/pkps", { key: a.accountKey })).body.total).to.equal(pkps);
  });
});
