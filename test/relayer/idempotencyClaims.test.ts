/**
 * Idempotency-Key claims between attempts (relayer/idempotency.ts), on the real engines: a retry whose
 * original is still running on a live holder waits for its answer or answers 409
 * idempotency_key_in_flight, and never runs the request itself; a holder whose heartbeat stopped is
 * taken over with what it recorded, and can then record nothing more. Two stores on one database stand
 * for two processes (or instances); the claim timings are shortened.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import type { RecordedForwardRequest } from "../../relayer/chain/sender";
import { openDataLayer, openEngine, type DataLayer } from "../../relayer/db";
import { ApiError } from "../../relayer/errors";
import {
  currentClaim,
  IdempotencyStore,
  type ClaimTiming,
  type RecordSealer,
  type StoredResponse,
} from "../../relayer/idempotency";
import { describeOnEngines, freshDatabaseUrl } from "../helpers/postgres";

const sealer: RecordSealer = {
  sealRecord: (_c, p) => Buffer.from(p).toString("base64"),
  openRecord: (_c, e) => Buffer.from(e, "base64"),
};
const TIMING: ClaimTiming = { waitMs: 600, heartbeatMs: 50, leaseMs: 400 };
const OPTS = { sealContext: "ctx" };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const RECORDED: RecordedForwardRequest = {
  from: "0x" + "11".repeat(20),
  to: "0x" + "22".repeat(20),
  value: "0",
  gas: "100000",
  nonce: "7",
  deadline: 2_000_000_000,
  data: "0x1234",
  signature: "0x" + "33".repeat(65),
  fromBlock: 1,
};

describeOnEngines("relayer: Idempotency-Key claims between attempts", function (engine) {
  this.timeout(60_000);
  let dir: string;
  let layer: DataLayer | null = null;
  const handles: DataLayer[] = [];
  let file: string;
  /** One process's handle on the embedded file (migrated once, in `before`). */
  const openFile = () => {
    const h = openEngine({ sqlitePath: file });
    handles.push(h);
    return h;
  };

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-claims-"));
    file = path.join(dir, "relayer.sqlite");
    if (engine === "postgres")
      layer = await openDataLayer({ databaseUrl: await freshDatabaseUrl(), sqlitePath: "" });
    else await (await openDataLayer({ sqlitePath: file })).close();
  });
  after(async () => {
    for (const h of handles) await h.close();
    await layer?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** A store as one process (or instance) opens it. */
  const store = () => {
    if (layer) return new IdempotencyStore(layer, sealer, Date.now, TIMING);
    return new IdempotencyStore(openFile(), sealer, Date.now, TIMING);
  };
  let n = 0;
  const nextKey = () => `claims-${++n}`;

  /** A request that runs until `release` is called, on store `a`: the original, on a live holder. */
  function running(
    a: IdempotencyStore,
    key: string,
    answer: StoredResponse = { status: 201, body: { v: 1 } },
  ) {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const result = a.run("scope", key, "fp", async () => (await gate, answer), OPTS);
    return { result, release };
  }

  it("a retry on another holder waits for the running original's answer and never runs", async () => {
    const a = store();
    const b = store();
    const key = nextKey();
    const original = running(a, key);
    await sleep(50);
    let ran = false;
    const retry = b.run(
      "scope",
      key,
      "fp",
      async () => ((ran = true), { status: 201, body: { v: 2 } }),
      OPTS,
    );
    await sleep(200);
    original.release();
    expect(await retry).to.deep.equal({ status: 201, body: { v: 1 }, replayed: true });
    expect(ran).to.equal(false);
    expect((await original.result).replayed).to.equal(false);
  });

  it("a retry still finding the original running after its wait answers 409 idempotency_key_in_flight", async () => {
    const a = store();
    const b = store();
    const key = nextKey();
    const original = running(a, key);
    await sleep(50);
    let ran = false;
    const err = await b
      .run("scope", key, "fp", async () => ((ran = true), { status: 201, body: {} }), OPTS)
      .catch((e: unknown) => e);
    expect(err).to.be.instanceOf(ApiError);
    expect((err as ApiError).status).to.equal(409);
    expect((err as ApiError).code).to.equal("idempotency_key_in_flight");
    expect(ran).to.equal(false);
    original.release();
    await original.result;
  });

  it("a holder that recorded a write and stopped (its heartbeat with it) is taken over with that record", async () => {
    const a = store();
    const b = store();
    const key = nextKey();
    // The original records its write, then fails without knowing its fate (as a 503 after sending).
    const failed = a.run(
      "scope",
      key,
      "fp",
      async () => {
        await currentClaim()!.nextWrite().record(RECORDED);
        throw new ApiError("chain_unavailable", "sent, not confirmed");
      },
      OPTS,
    );
    await failed.catch(() => undefined);
    let seen: RecordedForwardRequest | undefined;
    const r = await b.run(
      "scope",
      key,
      "fp",
      async () => {
        seen = currentClaim()!.nextWrite().recorded();
        return { status: 201, body: { v: 3 } };
      },
      OPTS,
    );
    expect(seen).to.deep.equal(RECORDED);
    expect(r.status).to.equal(201);
  });

  it("a holder taken over after its lease can record no further write", async () => {
    const a = store();
    const b = store();
    const key = nextKey();
    let recordOriginal!: () => Promise<void>;
    const stalled = new Promise<void>((ready) => {
      void a
        .run(
          "scope",
          key,
          "fp",
          async () => {
            const journal = currentClaim()!.nextWrite();
            recordOriginal = () => journal.record(RECORDED);
            ready();
            await new Promise(() => undefined); // a process frozen mid-request
            return { status: 201, body: {} };
          },
          OPTS,
        )
        .catch(() => undefined);
    });
    await stalled;
    // Its heartbeat stops as a dead process's would: the claim's row is no longer refreshed.
    const stop = "UPDATE idempotency SET heartbeat_ms = 0, owner = 'frozen' WHERE key = $1";
    if (layer) await layer.exec(stop, [key]);
    else handles[handles.length - 2].sqlite!.prepare(stop.replace("$1", "?")).run(key);
    const r = await b.run("scope", key, "fp", async () => ({ status: 201, body: { v: 4 } }), OPTS);
    expect(r.status).to.equal(201);
    const err = await recordOriginal().catch((e: unknown) => e);
    expect((err as ApiError).code).to.equal("idempotency_key_in_flight");
  });

  if (engine === "sqlite")
    it("a restart drops a claim that recorded nothing and keeps one that recorded a write, for its retry", async () => {
      // The process before the restart (its heartbeat slow enough not to race the restart).
      const a = new IdempotencyStore(openFile(), sealer, Date.now, { ...TIMING, heartbeatMs: 60_000 });
      const sent = nextKey();
      const unsent = nextKey();
      void a.run(
        "scope",
        sent,
        "fp",
        async () => {
          await currentClaim()!.nextWrite().record(RECORDED);
          await new Promise(() => undefined);
          return { status: 201, body: {} };
        },
        OPTS,
      );
      void a.run("scope", unsent, "fp", () => new Promise<StoredResponse>(() => undefined), OPTS);
      await sleep(50);
      const h = openFile();
      // The restarted process.
      await new IdempotencyStore(h, sealer, Date.now, { ...TIMING, leaseMs: 60_000 }).recoverAfterRestart();
      const rows = h
        .sqlite!.prepare("SELECT key, heartbeat_ms, writes FROM idempotency WHERE key IN (?, ?)")
        .all(sent, unsent) as Array<{ key: string; heartbeat_ms: number; writes: string }>;
      expect(rows.map((x) => [x.key, x.heartbeat_ms, JSON.parse(x.writes)])).to.deep.equal([
        [sent, 0, [RECORDED]],
      ]);
    });
});
