/**
 * Two relayer instances on one chain and one PostgreSQL database: both scan the registry's logs and
 * both deliver, yet each event reaches the receiver once (unique event ids, leased deliveries).
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import { startRelayer, type RunningRelayer } from "../../relayer";
import { describeOnPostgres, freshDatabaseUrl } from "../helpers/postgres";
import { fundInstanceGasWallets, type Stack } from "../helpers/stack";
import { Receiver } from "./receiver";
import { newAccount, register, startWebhookStack, testWebhookOptions } from "./support";

describeOnPostgres("webhooks: two instances on one PostgreSQL", function () {
  this.timeout(180_000);
  let s: Stack;
  let second: RunningRelayer;
  let receiver: Receiver;
  let dir: string;

  before(async () => {
    const databaseUrl = await freshDatabaseUrl();
    s = await startWebhookStack(testWebhookOptions(), { databaseUrl, instanceId: "one" });
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-relayer-2-"));
    await fundInstanceGasWallets(s, "two", s.relayerOptions.gasWallets);
    second = await startRelayer({ ...s.relayerOptions, dataDir: dir, port: 0, instanceId: "two" });
    receiver = await new Receiver().start();
  });
  after(async () => {
    await receiver?.close();
    await second?.close();
    await s?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("each event is delivered once", async () => {
    const { key } = await newAccount(s);
    await register(s, key, receiver.url, ["pkp.created"]);
    // Writes through both instances, so each has its own receipts to read too. The second instance
    // learns of the new account from the chain, within a poll (and its 5 s memory of unknown keys).
    const urls = [s.url, second.url];
    for (let i = 0; ; i++) {
      const r = await fetch(second.url + "/core/v1/pkps", { headers: { "x-api-key": key } });
      if (r.status === 200) break;
      if (i > 100) throw new Error(`the second instance does not know the account: ${r.status}`);
      await new Promise((res) => setTimeout(res, 100));
    }
    for (let i = 0; i < 12; i++) {
      const r = await fetch(urls[i % 2] + "/core/v1/pkps/create", {
        method: "POST",
        headers: { "x-api-key": key, "content-type": "application/json" },
        body: JSON.stringify({ name: `p${i}` }),
      });
      expect(r.status, await r.clone().text()).to.equal(201);
    }
    await receiver.until(() => receiver.received.length >= 12);
    await new Promise((r) => setTimeout(r, 1_500));
    const ids = receiver.events().map((e) => e.id);
    expect([ids.length, new Set(ids).size]).to.deep.equal([12, 12]);
  });
});
