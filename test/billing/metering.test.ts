import { expect } from "chai";
import fc from "fast-check";
import { join } from "node:path";
import { type Billing, SimulatedProcessor, createBilling } from "../../relayer/billing";
import { ApiError } from "../../relayer/errors";
import { ENGINES, freshDatabaseUrl } from "../helpers/postgres";
import { type TestServer, forwardRequest, principalFor, serve, tempDir } from "./harness";

async function thrown(fn: () => Promise<unknown>): Promise<ApiError> {
  try {
    await fn();
  } catch (e) {
    if (e instanceof ApiError) return e;
    throw e;
  }
  throw new Error("expected an ApiError");
}

const modes = ENGINES.flatMap((engine) => [50, 0].map((chargeFlushMs) => ({ engine, chargeFlushMs })));
for (const { engine, chargeFlushMs } of modes)
  describe(`billing: metering (${chargeFlushMs ? "write-behind charges" : "strict charges"}, ${engine})`, function () {
    this.timeout(60_000);
    let databaseUrl: string | undefined;
    let tmp: ReturnType<typeof tempDir>;
    let billing: Billing;
    let srv: TestServer;
    const A = "3";
    const B = "4";
    const owner = principalFor(A, "account");
    const usage1 = principalFor(A, "usage", "0x1111111111111111111111111111111111111111");
    const usage2 = principalFor(A, "usage", "0x2222222222222222222222222222222222222222");

    async function open(
      opts: { prices?: Parameters<typeof createBilling>[0]["prices"]; signupCreditCents?: number } = {},
    ) {
      databaseUrl ??= engine === "postgres" ? await freshDatabaseUrl() : undefined;
      billing = await createBilling({
        dbPath: join(tmp.dir, "billing.sqlite"),
        databaseUrl,
        processor: new SimulatedProcessor(),
        chargeFlushMs,
        ...opts,
      });
      srv = await serve(billing);
    }

    /** Tops the account up the way a user would (simulated processor): create, pay, confirm. */
    async function topUp(account: string, cents: number): Promise<void> {
      const c = await srv.call("POST", "/create_payment_intent", {
        account,
        body: { amount_cents: cents },
      });
      const id = c.body.payment_intent_id;
      expect((await srv.call("POST", `/simulated/intents/${id}/succeed`, { account })).status).to.equal(200);
    }

    beforeEach(async function () {
      tmp = tempDir();
      databaseUrl = undefined;
    });

    afterEach(async function () {
      await srv?.close();
      await billing?.close();
      tmp.cleanup();
    });

    it("default prices: write 1 cent, execution 1 cent per started second, minimum payment 500, pin 1 cent per started 100 KB", async function () {
      await open();
      expect(billing.prices()).to.deep.equal({
        write_cents: 1,
        execution_cents_per_second: 1,
        minimum_payment_cents: 500,
        pin_cents_per_100kb: 1,
      });
    });

    it("a scripted session lowers the balance by exactly the documented prices", async function () {
      await open();
      await topUp(A, 1000);
      const steps: Array<[string, () => unknown, number]> = [
        ["write", () => billing.chargeWrite(usage1, "add_group", forwardRequest("0xtx1")), 1],
        ["execution 0 ms", () => billing.chargeExecution(usage1, 0, "req-1"), 1],
        ["execution 999 ms", () => billing.chargeExecution(usage1, 999, "req-2"), 1],
        ["execution 1000 ms", () => billing.chargeExecution(usage1, 1000, "req-3"), 1],
        ["execution 1001 ms", () => billing.chargeExecution(usage2, 1001, "req-4"), 2],
        ["execution 29 500 ms", () => billing.chargeExecution(owner, 29_500, "req-5"), 30],
        ["write", () => billing.chargeWrite(owner, "add_pkp_to_group", forwardRequest("0xtx2")), 1],
      ];
      let expected = 1000;
      for (const [what, step, price] of steps) {
        await billing.assertCanAfford(usage1, what === "write" ? "write" : "execution");
        await step();
        expected -= price;
        expect((await billing.balance(A)).balance_cents, what).to.equal(expected);
      }
      expect(expected).to.equal(963);
      expect(await billing.audit(A)).to.deep.equal({ balance_cents: 963, ledger_sum_cents: 963 });
      const b = await srv.call("GET", "/balance", { account: A });
      expect(b.body).to.deep.equal({ balance_cents: 963, balance_display: "$9.63", reserved_cents: 0 });
    });

    it("reads are free: balance and history calls do not change the balance", async function () {
      await open();
      await topUp(A, 500);
      for (let i = 0; i < 3; i++) {
        await srv.call("GET", "/balance", { account: A });
        await srv.call("GET", "/history", { account: A });
      }
      expect((await billing.balance(A)).balance_cents).to.equal(500);
    });

    it("configured prices replace the defaults", async function () {
      await open({ prices: { write_cents: 3, execution_cents_per_second: 2 } });
      await topUp(A, 500);
      await billing.chargeWrite(owner, "add_group", forwardRequest("0xa"));
      await billing.chargeExecution(owner, 1500, "r1");
      expect((await billing.balance(A)).balance_cents).to.equal(500 - 3 - 4);
      expect(billing.executionPriceCents(2001)).to.equal(6);
    });

    it("an empty account is refused with 402 insufficient_credits naming balance and price", async function () {
      await open();
      const e = await thrown(() => billing.assertCanAfford(usage1, "write"));
      expect(e.status).to.equal(402);
      expect(e.code).to.equal("insufficient_credits");
      expect(e.details).to.deep.equal({ balance_cents: 0, price_cents: 1 });
    });

    it("an execution is refused with 402 when the balance is below its one-second minimum price", async function () {
      await open({ prices: { execution_cents_per_second: 7 } });
      await topUp(A, 500);
      await billing.chargeExecution(owner, 70_001, "long"); // 71 s × 7 = 497, leaving 3
      const e = await thrown(() => billing.assertCanAfford(owner, "execution"));
      expect(e.code).to.equal("insufficient_credits");
      expect(e.details).to.deep.equal({ balance_cents: 3, price_cents: 7 });
    });

    it("the pre-check charges nothing, so a write that fails after it costs nothing", async function () {
      await open();
      await topUp(A, 500);
      await billing.assertCanAfford(usage1, "write");
      // …the write reverts on chain: the relayer never calls chargeWrite.
      expect((await billing.balance(A)).balance_cents).to.equal(500);
      expect((await billing.history(A, 0, 10)).total).to.equal(1); // only the top-up
      expect((await billing.keySpend(usage1.keyAddress)).spent_cents).to.equal(0);
    });

    it("chargeWrite is idempotent on its forward request (a retried request is charged once)", async function () {
      await open();
      await topUp(A, 500);
      const first = await billing.chargeWrite(usage1, "add_group", forwardRequest("0xsame"));
      const second = await billing.chargeWrite(usage1, "add_group", forwardRequest("0xsame"));
      expect(first).to.deep.equal({ charged_cents: 1, applied: true });
      expect(second).to.deep.equal({ charged_cents: 0, applied: false });
      expect((await billing.balance(A)).balance_cents).to.equal(499);
      expect((await billing.keySpend(usage1.keyAddress)).spent_cents).to.equal(1);
    });

    it("writes that shared a transaction are each charged: the reference is the forward request, not the hash", async function () {
      await open();
      await topUp(A, 500);
      // Same chain, forwarder and signer; consecutive forwarder nonces (two requests of one batch).
      const first = forwardRequest("batch", usage1.keyAddress);
      const second = { ...first, nonce: first.nonce + 1n };
      const other = forwardRequest("batch", usage2.keyAddress); // same nonce, another signer
      expect((await billing.chargeWrite(usage1, "add_group", first)).applied).to.equal(true);
      expect((await billing.chargeWrite(usage1, "add_group", second)).applied).to.equal(true);
      expect((await billing.chargeWrite(usage2, "add_group", other)).applied).to.equal(true);
      expect((await billing.balance(A)).balance_cents).to.equal(497);
      expect((await billing.history(A, 0, 3)).items.map((i) => i.reference)).to.deep.equal([
        `write:31337:0x${"f".repeat(40)}:${usage2.keyAddress}:${other.nonce}`,
        `write:31337:0x${"f".repeat(40)}:${usage1.keyAddress}:${second.nonce}`,
        `write:31337:0x${"f".repeat(40)}:${usage1.keyAddress}:${first.nonce}`,
      ]);
    });

    it("a run stopped at its time limit is charged ceil(limit / 1000) seconds, never the overrun", async function () {
      await open();
      await topUp(A, 500);
      expect(
        (await billing.chargeExecution(usage1, 30_000.4, "killed-at-30s", 30_000)).charged_cents,
      ).to.equal(30);
      expect(
        (await billing.chargeExecution(usage1, 1_500.7, "killed-at-1.5s", 1_500)).charged_cents,
      ).to.equal(2);
      // Under its limit, a run pays for the time it used.
      expect((await billing.chargeExecution(usage1, 2_100, "short", 30_000)).charged_cents).to.equal(3);
      expect((await billing.balance(A)).balance_cents).to.equal(500 - 30 - 2 - 3);
    });

    it("chargeExecution is idempotent on its reference", async function () {
      await open();
      await topUp(A, 500);
      await billing.chargeExecution(usage1, 2500, "req-x");
      await billing.chargeExecution(usage1, 2500, "req-x");
      expect((await billing.balance(A)).balance_cents).to.equal(497);
    });

    it("an execution that outran the balance is charged in full and leaves it negative; the next check refuses", async function () {
      await open();
      await topUp(A, 500);
      await billing.chargeExecution(owner, 498_000, "burn"); // 498 cents → 2 left
      await billing.assertCanAfford(owner, "execution");
      const r = await billing.chargeExecution(owner, 4200, "overrun"); // 5 cents
      expect(r).to.deep.equal({ charged_cents: 5, applied: true });
      const e = await thrown(() => billing.assertCanAfford(owner, "execution"));
      expect(e.details).to.deep.equal({ balance_cents: -3, price_cents: 1 });
      const b = await srv.call("GET", "/balance", { account: A });
      expect(b.body).to.deep.equal({ balance_cents: -3, balance_display: "-$0.03", reserved_cents: 0 });
    });

    it("spend is recorded per key, case-insensitively by address", async function () {
      await open();
      await topUp(A, 500);
      await billing.chargeExecution(usage1, 3000, "a");
      await billing.chargeWrite(usage2, "add_group", forwardRequest("b"));
      await billing.chargeWrite(owner, "add_group", forwardRequest("c"));
      expect(await billing.keySpend(usage1.keyAddress)).to.deep.equal({ spent_cents: 3, cap_cents: null });
      expect(await billing.keySpend(usage2.keyAddress.toUpperCase().replace("0X", "0x"))).to.deep.equal({
        spent_cents: 1,
        cap_cents: null,
      });
      expect(await billing.keySpend("0x9999999999999999999999999999999999999999")).to.deep.equal({
        spent_cents: 0,
        cap_cents: null,
      });
    });

    it("a key at its spend cap is refused with 403 spend_cap_reached while other keys keep working", async function () {
      await open();
      await topUp(A, 500);
      await billing.setKeySpendCap(A, usage1.keyAddress, 3);
      await billing.chargeExecution(usage1, 2500, "r1"); // 3 cents
      const e = await thrown(() => billing.assertCanAfford(usage1, "write"));
      expect(e.status).to.equal(403);
      expect(e.code).to.equal("spend_cap_reached");
      expect(e.details).to.deep.equal({
        key_address: usage1.keyAddress,
        spent_cents: 3,
        cap_cents: 3,
        price_cents: 1,
      });
      await billing.assertCanAfford(usage2, "write");
      expect(await billing.keySpend(usage1.keyAddress)).to.deep.equal({ spent_cents: 3, cap_cents: 3 });
    });

    it("removing a cap (null) lets the key spend again", async function () {
      await open();
      await topUp(A, 500);
      await billing.setKeySpendCap(A, usage1.keyAddress, 0);
      expect((await thrown(() => billing.assertCanAfford(usage1, "execution"))).code).to.equal(
        "spend_cap_reached",
      );
      await billing.setKeySpendCap(A, usage1.keyAddress, null);
      await billing.assertCanAfford(usage1, "execution");
    });

    it("a key address registered again under another account starts with no spend and no cap", async function () {
      await open();
      await topUp(A, 500);
      await topUp(B, 500);
      await billing.setKeySpendCap(A, usage1.keyAddress, 3);
      await billing.chargeExecution(usage1, 2500, "r1"); // 3 cents: A's key is at its cap
      await billing.flushCharges();
      // The address was removed from A and registered under B (path B takes any unused address).
      const underB = { ...usage1, accountId: B };
      await billing.assertCanAfford(underB, "write");
      await billing.chargeWrite(underB, "add_group", forwardRequest("0xb1"));
      await billing.flushCharges();
      expect(await billing.keySpend(usage1.keyAddress)).to.deep.equal({ spent_cents: 1, cap_cents: null });
      await billing.setKeySpendCap(B, usage1.keyAddress, 5);
      expect(await billing.keySpend(usage1.keyAddress)).to.deep.equal({ spent_cents: 1, cap_cents: 5 });
    });

    it("setting a cap for a key address last used by another account resets its spend", async function () {
      await open();
      await topUp(A, 500);
      await billing.chargeExecution(usage1, 2500, "r1");
      await billing.flushCharges();
      await billing.setKeySpendCap(B, usage1.keyAddress, 10);
      expect(await billing.keySpend(usage1.keyAddress)).to.deep.equal({ spent_cents: 0, cap_cents: 10 });
    });

    it("an invalid cap is refused with 400 invalid_request", async function () {
      await open();
      for (const cap of [-1, 1.5]) {
        const e = await thrown(() => billing.setKeySpendCap(A, usage1.keyAddress, cap));
        expect(e.status).to.equal(400);
        expect(e.code).to.equal("invalid_request");
        expect(e.details).to.deep.equal({ field: "cap_cents" });
      }
    });

    it("onAccountCreated grants the sign-up credit once", async function () {
      await open({ signupCreditCents: 100 });
      await billing.onAccountCreated(B);
      await billing.onAccountCreated(B);
      expect((await billing.balance(B)).balance_cents).to.equal(100);
      expect((await billing.history(B, 0, 10)).items.map((i) => i.operation)).to.deep.equal([
        "signup_credit",
      ]);
    });

    it("onAccountCreated with the default sign-up credit (0) creates a zero balance and no ledger row", async function () {
      await open();
      await billing.onAccountCreated(B);
      expect(await billing.audit(B)).to.deep.equal({ balance_cents: 0, ledger_sum_cents: 0 });
      expect((await billing.history(B, 0, 10)).total).to.equal(0);
    });

    it("an execution charge records its action's CID (action_cid in the history); other entries record none", async function () {
      await open();
      await topUp(A, 500);
      const cid = "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o";
      await billing.chargeExecution(usage1, 1500, "with-cid", undefined, cid);
      await billing.chargeWrite(owner, "add_group", forwardRequest("0xa"));
      const h = await srv.call("GET", "/history", { account: A });
      expect(
        h.body.items.map((i: { operation: string; action_cid: string | null }) => [
          i.operation,
          i.action_cid,
        ]),
      ).to.deep.equal([
        ["add_group", null],
        ["execution", cid],
        ["top_up", null],
      ]);
    });

    it("a retried reference is charged once even when the first charge was already committed", async function () {
      await open();
      await topUp(A, 500);
      await billing.chargeExecution(usage1, 10, "req-retry");
      await billing.flushCharges();
      expect(await billing.chargeExecution(usage1, 10, "req-retry")).to.deep.equal({
        charged_cents: 0,
        applied: false,
      });
      expect(await billing.audit(A)).to.deep.equal({ balance_cents: 499, ledger_sum_cents: 499 });
    });

    it("a charge is seen by the next assertCanAfford at once", async function () {
      await open();
      await topUp(A, 500);
      await billing.chargeExecution(usage1, 499_000, "big"); // 499 cents, 1 left
      await billing.chargeWrite(usage1, "add_group", forwardRequest("0x1")); // 0 left
      expect((await thrown(() => billing.assertCanAfford(usage1, "write"))).details).to.deep.equal({
        balance_cents: 0,
        price_cents: 1,
      });
    });

    it("a charge that is not a safe integer is refused at once and holds up no other charge", async function () {
      await open();
      await topUp(A, 500);
      // 1e300 ms prices at 1e297 cents: once in the write-behind batch, every flush would fail on it
      // and every other account's charge would stay uncommitted (and be lost on a restart).
      expect(
        await billing.chargeExecution(usage1, 1e300, "absurd").then(
          () => null,
          (e: Error) => e.message,
        ),
      ).to.include("a charge must be a safe integer number of cents");
      await billing.chargeWrite(usage2, "add_group", forwardRequest("0xafter"));
      expect(await billing.audit(A)).to.deep.equal({ balance_cents: 499, ledger_sum_cents: 499 });
      expect((await billing.keySpend(usage1.keyAddress)).spent_cents).to.equal(0);
    });

    it("charges are committed by close() and found after reopening the file", async function () {
      await open();
      await topUp(A, 500);
      await billing.chargeExecution(usage1, 1500, "r1");
      await billing.chargeWrite(usage1, "add_group", forwardRequest("0x2"));
      await srv.close();
      await billing.close();
      await open();
      expect(await billing.audit(A)).to.deep.equal({ balance_cents: 497, ledger_sum_cents: 497 });
      expect((await billing.keySpend(usage1.keyAddress)).spent_cents).to.equal(3);
    });

    it("property: any sequence of charges, with retried references, keeps ledger sum = balance = top-up − unique charges", async function () {
      await open();
      await topUp(A, 5000);
      const op = fc.record({
        kind: fc.constantFrom("write" as const, "execution" as const),
        ref: fc.integer({ min: 0, max: 15 }),
        ms: fc.integer({ min: 0, max: 10_000 }),
        key: fc.constantFrom(usage1, usage2, owner),
      });
      let run = 0;
      await fc.assert(
        fc.asyncProperty(fc.array(op, { maxLength: 40 }), async (ops) => {
          run++;
          const before = (await billing.balance(A)).balance_cents;
          const charged = new Map<string, number>();
          for (const o of ops) {
            const ref = `p${run}-${o.ref}`;
            if (o.kind === "write") {
              await billing.chargeWrite(o.key, "w", forwardRequest(ref));
              if (!charged.has("write:" + ref)) charged.set("write:" + ref, 1);
            } else {
              await billing.chargeExecution(o.key, o.ms, ref);
              if (!charged.has("exec:" + ref))
                charged.set("exec:" + ref, Math.max(1, Math.ceil(o.ms / 1000)));
            }
          }
          const total = [...charged.values()].reduce((a, b) => a + b, 0);
          const audit = await billing.audit(A);
          return audit.balance_cents === before - total && audit.ledger_sum_cents === audit.balance_cents;
        }),
        { numRuns: 60, seed: 424242 },
      );
    });
  });

describe("billing: metering across processes sharing the ledger file", function () {
  let tmp: ReturnType<typeof tempDir>;
  beforeEach(async () => (tmp = tempDir()));
  afterEach(async () => tmp.cleanup());

  it("strict charges (chargeFlushMs 0) are committed before chargeExecution returns", async function () {
    const path = join(tmp.dir, "billing.sqlite");
    const a = await createBilling({
      dbPath: path,
      processor: new SimulatedProcessor(),
      signupCreditCents: 100,
      chargeFlushMs: 0,
    });
    const b = await createBilling({ dbPath: path, processor: new SimulatedProcessor() });
    await a.onAccountCreated("5");
    await a.chargeExecution(principalFor("5"), 2000, "r");
    expect((await b.balance("5")).balance_cents).to.equal(98);
    await a.close();
    await b.close();
  });

  it("write-behind charges reach the file within the flush window", async function () {
    const path = join(tmp.dir, "billing.sqlite");
    const a = await createBilling({
      dbPath: path,
      processor: new SimulatedProcessor(),
      signupCreditCents: 100,
      chargeFlushMs: 20,
    });
    const b = await createBilling({ dbPath: path, processor: new SimulatedProcessor() });
    await a.onAccountCreated("5");
    await a.chargeExecution(principalFor("5"), 2000, "r");
    expect((await b.balance("5")).balance_cents).to.equal(100);
    await new Promise((r) => setTimeout(r, 200));
    expect((await b.balance("5")).balance_cents).to.equal(98);
    await a.close();
    await b.close();
  });
});
