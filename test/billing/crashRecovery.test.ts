import { expect } from "chai";
import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { CRASH_POINT_ENV } from "../../relayer/billing";
import { StripeStub } from "../helpers/stripeStub";
import { httpCall, tempDir } from "./harness";

/**
 * SIGKILL between "the processor says succeeded" and "credited", then restart on the same file:
 * the credit must appear exactly once, whichever path repairs it.
 */
describe("billing: crash recovery (server in a child process, killed with SIGKILL)", function () {
  this.timeout(60_000);
  let stub: StripeStub;
  let tmp: ReturnType<typeof tempDir>;
  let dbPath: string;
  const children = new Set<ChildProcess>();
  const A = "42";

  beforeEach(async function () {
    tmp = tempDir();
    dbPath = join(tmp.dir, "billing.sqlite");
    stub = await new StripeStub().start();
  });

  afterEach(async function () {
    for (const c of children) {
      if (c.exitCode === null && c.signalCode === null) {
        c.kill("SIGKILL");
        await new Promise((r) => c.once("exit", r));
      }
    }
    children.clear();
    await stub.stop();
    tmp.cleanup();
  });

  interface Child {
    proc: ChildProcess;
    url: string;
    stdout: string[];
    exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  }

  /**
   * Spawns a billing server on the test's database. A spare loads its code at once but opens the
   * database only when `start()` is called (fixtures/billingServer.ts, WAIT_FOR_GO): the server that
   * recovers from a crash is spawned beside the doomed one, so its start costs no extra wait, and still
   * opens the file only after the crash, as a restarted process would.
   */
  function spawnServer(opts: { crash?: boolean; reconcile?: boolean; spare?: boolean } = {}): {
    start(): Promise<Child>;
  } {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      BILLING_DB: dbPath,
      STRIPE_SECRET: stub.secretKey,
      STRIPE_WEBHOOK_SECRET: stub.webhookSecret,
      STRIPE_PORT: String(stub.port),
      RECONCILE_ON_START: opts.reconcile ? "1" : "0",
    };
    delete env[CRASH_POINT_ENV];
    delete env.WAIT_FOR_GO;
    if (opts.crash) env[CRASH_POINT_ENV] = "before_credit";
    if (opts.spare) env.WAIT_FOR_GO = "1";
    const proc = spawn(
      process.execPath,
      ["-r", "ts-node/register/transpile-only", join(__dirname, "fixtures", "billingServer.ts")],
      {
        env,
        stdio: [opts.spare ? "pipe" : "ignore", "pipe", "pipe"],
      },
    );
    children.add(proc);
    const stdout: string[] = [];
    let stderr = "";
    proc.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      proc.once("exit", (code, signal) => resolve({ code, signal })),
    );
    const port = new Promise<number>((resolve, reject) => {
      let buf = "";
      proc.stdout!.on("data", (d: Buffer) => {
        buf += d.toString();
        const lines = buf.split("\n");
        buf = lines.pop()!;
        for (const line of lines) {
          if (opts.spare && line === "LOADED") continue; // the spare's "code loaded", not the server's output
          stdout.push(line);
          const m = line.match(/^READY (\d+)$/);
          if (m) resolve(Number(m[1]));
        }
      });
      void exited.then(({ code, signal }) =>
        reject(new Error(`billing server exited early (${code ?? signal}): ${stderr}`)),
      );
    });
    port.catch(() => undefined); // a spare never started is killed in afterEach; start() still sees the error
    return {
      async start() {
        if (opts.spare) proc.stdin!.write("GO\n");
        return { proc, url: `http://127.0.0.1:${await port}`, stdout, exited };
      },
    };
  }

  async function startServer(opts: { crash?: boolean; reconcile?: boolean } = {}): Promise<Child> {
    return spawnServer(opts).start();
  }

  async function stopServer(c: Child): Promise<void> {
    c.proc.kill("SIGTERM");
    await c.exited;
  }

  /** Creates an intent, lets Stripe succeed it, and triggers crediting in a server armed to die before the credit. */
  async function paidIntentLostInCrash(
    trigger: "confirm" | "webhook",
    amount = 3000,
  ): Promise<{ id: string; event: Record<string, unknown> }> {
    const doomed = await startServer({ crash: true });
    const created = await httpCall(doomed.url, "POST", "/create_payment_intent", {
      account: A,
      body: { amount_cents: amount },
    });
    expect(created.status).to.equal(200);
    const id = created.body.payment_intent_id as string;
    stub.succeed(id);
    const event = stub.event("payment_intent.succeeded", id);
    let answered = true;
    try {
      if (trigger === "confirm")
        await httpCall(doomed.url, "POST", "/confirm_payment", {
          account: A,
          body: { payment_intent_id: id },
        });
      else {
        const { payload, header } = stub.sign(event);
        await httpCall(doomed.url, "POST", "/webhook", {
          rawBody: payload,
          headers: { "stripe-signature": header, "content-type": "application/json" },
        });
      }
    } catch {
      answered = false; // the connection died with the process
    }
    expect(answered, "the server answered instead of dying").to.equal(false);
    expect(await doomed.exited).to.deep.equal({ code: null, signal: "SIGKILL" });
    return { id, event };
  }

  async function balanceAndHistory(url: string) {
    const b = await httpCall(url, "GET", "/balance", { account: A });
    const h = await httpCall(url, "GET", "/history", { account: A });
    return { balance: b.body.balance_cents as number, entries: h.body.total as number };
  }

  it("the crash really loses the credit window: after restart the balance is still 0 until something repairs it", async function () {
    const restart = spawnServer({ spare: true });
    await paidIntentLostInCrash("confirm");
    const s = await restart.start();
    expect(await balanceAndHistory(s.url)).to.deep.equal({ balance: 0, entries: 0 });
    await stopServer(s);
  });

  it("repaired by the next confirm_payment: credited exactly once", async function () {
    const restart = spawnServer({ spare: true });
    const { id } = await paidIntentLostInCrash("confirm");
    const s = await restart.start();
    const first = await httpCall(s.url, "POST", "/confirm_payment", {
      account: A,
      body: { payment_intent_id: id },
    });
    const second = await httpCall(s.url, "POST", "/confirm_payment", {
      account: A,
      body: { payment_intent_id: id },
    });
    expect(first.body).to.include({
      status: "succeeded",
      credited_cents: 3000,
      newly_credited: true,
      balance_cents: 3000,
    });
    expect(second.body).to.include({ newly_credited: false, balance_cents: 3000 });
    expect(await balanceAndHistory(s.url)).to.deep.equal({ balance: 3000, entries: 1 });
    await stopServer(s);
  });

  it("repaired by the webhook: credited exactly once, and a later confirm does not credit again", async function () {
    const restart = spawnServer({ spare: true });
    const { id, event } = await paidIntentLostInCrash("confirm");
    const s = await restart.start();
    const { payload, header } = stub.sign(event);
    const w = await httpCall(s.url, "POST", "/webhook", {
      rawBody: payload,
      headers: { "stripe-signature": header, "content-type": "application/json" },
    });
    expect(w.body.outcome).to.equal("credited");
    const c = await httpCall(s.url, "POST", "/confirm_payment", {
      account: A,
      body: { payment_intent_id: id },
    });
    expect(c.body).to.include({ newly_credited: false, balance_cents: 3000 });
    expect(await balanceAndHistory(s.url)).to.deep.equal({ balance: 3000, entries: 1 });
    await stopServer(s);
  });

  it("repaired by reconciliation at start-up: credited exactly once, and a second restart changes nothing", async function () {
    const restart = spawnServer({ reconcile: true, spare: true });
    const secondRestart = spawnServer({ reconcile: true, spare: true });
    await paidIntentLostInCrash("confirm");
    const s = await restart.start();
    expect(s.stdout[0]).to.equal(`RECONCILED ${JSON.stringify({ checked: 1, credited: 1, errors: 0 })}`);
    expect(await balanceAndHistory(s.url)).to.deep.equal({ balance: 3000, entries: 1 });
    await stopServer(s);
    const again = await secondRestart.start();
    expect(again.stdout[0]).to.equal(`RECONCILED ${JSON.stringify({ checked: 0, credited: 0, errors: 0 })}`);
    expect(await balanceAndHistory(again.url)).to.deep.equal({ balance: 3000, entries: 1 });
    await stopServer(again);
  });

  it("a webhook whose processing was killed is not remembered, so Stripe's redelivery of the same event credits once", async function () {
    const restart = spawnServer({ spare: true });
    const { id, event } = await paidIntentLostInCrash("webhook");
    const s = await restart.start();
    const { payload, header } = stub.sign(event);
    const redelivered = await httpCall(s.url, "POST", "/webhook", {
      rawBody: payload,
      headers: { "stripe-signature": header, "content-type": "application/json" },
    });
    const again = await httpCall(s.url, "POST", "/webhook", {
      rawBody: payload,
      headers: { "stripe-signature": header, "content-type": "application/json" },
    });
    expect(redelivered.body.outcome).to.equal("credited");
    expect(again.body.outcome).to.equal("duplicate");
    const c = await httpCall(s.url, "POST", "/confirm_payment", {
      account: A,
      body: { payment_intent_id: id },
    });
    expect(c.body).to.include({ newly_credited: false, balance_cents: 3000 });
    await stopServer(s);
  });
});
