/**
 * The webhook tables on both engines (SQLite and PostgreSQL, one query set): an event is stored once
 * whoever offers it, the cursor only moves forward, and of several claimants racing for due
 * deliveries each delivery goes to exactly one.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import { type DataLayer, openDataLayer } from "../../relayer/db";
import { WebhookStore } from "../../relayer/webhooks/store";
import { describeOnEngines, freshDatabaseUrl } from "../helpers/postgres";

describeOnEngines("webhooks: storage", function (engine) {
  this.timeout(60_000);
  let db: DataLayer;
  let store: WebhookStore;
  let dir: string;
  let n = 0;
  const id = (prefix: string) => `${prefix}_${(++n).toString(16).padStart(24, "0")}`;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-wh-store-"));
    db = await openDataLayer(
      engine === "postgres"
        ? { databaseUrl: await freshDatabaseUrl(), sqlitePath: "" }
        : { sqlitePath: path.join(dir, "wh.sqlite") },
    );
    store = new WebhookStore(db);
  });
  after(async () => {
    await db?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  async function endpoint(accountId = "1"): Promise<string> {
    const endpointId = id("we");
    await store.createEndpoint({
      endpointId,
      accountId,
      url: "https://1.1.1.1/",
      eventTypes: '["*"]',
      description: "",
      secretSealed: "sealed",
      nowMs: Date.now(),
    });
    return endpointId;
  }

  async function offer(eventId: string, endpoints: string[]): Promise<boolean> {
    return db.transaction((tx) =>
      store.addEvent(
        tx,
        "1",
        { id: eventId, type: "pkp.created", created: 0, account_id: 1, data: {} },
        endpoints.map((endpoint_id) => ({ endpoint_id, sub: ["*"] as const })),
      ),
    );
  }

  it("an event offered twice is stored once, with one delivery per endpoint", async () => {
    const e = await endpoint();
    expect([await offer("evt_once", [e]), await offer("evt_once", [e])]).to.deep.equal([true, false]);
    expect(await store.countDeliveries(e)).to.equal(1);
  });

  it("the cursor never moves back", async () => {
    expect(await store.cursor("test", 10)).to.equal(10);
    await db.transaction((tx) => store.advanceCursor(tx, "test", 20));
    await db.transaction((tx) => store.advanceCursor(tx, "test", 15));
    expect(await store.cursor("test", 0)).to.equal(20);
  });

  it("of four claimants racing for 40 due deliveries, each delivery goes to exactly one", async () => {
    const e = await endpoint("race");
    for (let i = 0; i < 40; i++) await offer(`evt_race_${i}`, [e]);
    const now = Date.now() + 1;
    const claims = await Promise.all(
      ["a", "b", "c", "d"].map(async (owner) => {
        const got: string[] = [];
        for (let round = 0; round < 10; round++)
          got.push(...(await store.claimDue(owner, now, now + 60_000, 5)).map((d) => d.delivery_id));
        return got;
      }),
    );
    const all = claims.flat();
    expect(new Set(all).size).to.equal(all.length);
    expect(all.length).to.be.at.least(40);
  });

  it("a claimed delivery is not claimed again before its lease expires, and is after", async () => {
    const e = await endpoint("lease");
    await offer("evt_lease", [e]);
    const now = Date.now() + 1;
    const first = (await store.claimDue("x", now, now + 1_000, 100)).filter((d) => d.endpoint_id === e);
    const second = (await store.claimDue("y", now + 500, now + 60_000, 100)).filter(
      (d) => d.endpoint_id === e,
    );
    const third = (await store.claimDue("z", now + 1_001, now + 60_000, 100)).filter(
      (d) => d.endpoint_id === e,
    );
    expect([first.length, second.length, third.length]).to.deep.equal([1, 0, 1]);
  });

  it("prune forgets finished deliveries and their events, and keeps pending ones", async () => {
    const e = await endpoint("prune");
    await offer("evt_prune_done", [e]);
    await offer("evt_prune_waiting", [e]);
    const now = Date.now() + 1;
    const [done] = (await store.claimDue("p", now, now + 60_000, 100)).filter(
      (d) => d.event_id === "evt_prune_done",
    );
    await store.recordSuccess("p", done.delivery_id, 200, now);
    await store.prune(Date.now() + 10_000);
    expect([
      await store.eventPayload("evt_prune_done"),
      JSON.parse((await store.eventPayload("evt_prune_waiting")) ?? "null")?.id,
      await store.countDeliveries(e),
    ]).to.deep.equal([undefined, "evt_prune_waiting", 1]);
  });
});
