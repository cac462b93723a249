/**
 * SIGIL_CONFIRMATIONS: an event is emitted only once its log is that many blocks deep, so a log a
 * reorganisation drops before then is never announced.
 */
import { expect } from "chai";
import type { Stack } from "../helpers/stack";
import { Receiver } from "./receiver";
import { newAccount, register, startWebhookStack, testWebhookOptions } from "./support";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("webhooks: confirmations", function () {
  this.timeout(120_000);
  let s: Stack;
  let receiver: Receiver;
  let key: string;
  let block: number;

  before(async () => {
    s = await startWebhookStack(testWebhookOptions(), { confirmations: 3 });
    receiver = await new Receiver().start();
    ({ key } = await newAccount(s));
    await register(s, key, receiver.url, ["pkp.created"]);
    const r = await s.api("POST", "/core/v1/pkps/create", { key, body: {} });
    expect(r.status).to.equal(201);
    block = (await s.provider.getTransactionReceipt(r.body.tx_hash))!.blockNumber;
  });
  after(async () => {
    await receiver?.close();
    await s?.close();
  });

  it("a log fewer blocks deep than the confirmations is not announced", async () => {
    await s.provider.send("anvil_mine", ["0x2"]); // 2 blocks on top: not yet 3 deep
    await sleep(1_500); // many scan intervals (100 ms)
    expect(await s.provider.getBlockNumber()).to.equal(block + 2);
    expect(receiver.received).to.have.length(0);
  });

  it("once it is deep enough, it is announced once", async () => {
    await s.provider.send("anvil_mine", ["0x1"]);
    await receiver.until(() => receiver.received.length >= 1);
    await sleep(500);
    expect(receiver.events().map((e) => [e.type, e.block_number])).to.deep.equal([["pkp.created", block]]);
  });
});
