/**
 * The one helper for rows that expire (relayer/db/expiringRows.ts), on both engines: a claim inserts
 * once, is refused while the row is live, and takes over an expired row in the same statement (so an
 * answer never depends on whether a sweep ran); which second is the last a row guards is the table's
 * choice; a sweep deletes at most one batch of expired rows, never a live one; and the throttle runs
 * at most one sweep per period.
 */
import { expect } from "chai";
import { eventually } from "../../testkit/eventually";
import { type DataLayer, ExpiringRows, SweepThrottle, openDataLayer } from "../../relayer/db";
import { describeOnEngines, freshDatabaseUrl } from "../helpers/postgres";

describeOnEngines("data layer: expiring rows (claim, sweep)", function (engine) {
  this.timeout(60_000);
  let db: DataLayer;

  before(async () => {
    db = await openDataLayer(
      engine === "postgres"
        ? { databaseUrl: await freshDatabaseUrl(), sqlitePath: "" }
        : { sqlitePath: ":memory:" },
    );
  });
  after(async () => {
    await db?.close();
  });
  beforeEach(async () => {
    await db.exec("DELETE FROM signed_nonces");
    await db.exec("DELETE FROM siwe_nonces");
  });

  const table = (liveAtExpiry: boolean, batch = 1_000) =>
    new ExpiringRows(db, {
      table: liveAtExpiry ? "signed_nonces" : "siwe_nonces",
      key: liveAtExpiry ? ["key_address", "nonce"] : ["owner", "nonce"],
      expiry: "expires_s",
      liveAtExpiry,
      batch,
      sweepEveryMs: 3_600_000,
    });
  const count = async (t: string) =>
    Number(((await db.exec(`SELECT COUNT(*) AS n FROM ${t}`)) as Array<{ n: number }>)[0].n);

  it("a key is claimed once while its row is live, by whichever claim comes first", async () => {
    const rows = table(true);
    const claims = await Promise.all(Array.from({ length: 8 }, () => rows.claim(["a", "n1"], 100, 50)));
    expect(claims.filter(Boolean)).to.have.length(1);
    expect(await rows.claim(["a", "n2"], 100, 50)).to.equal(true);
    expect(await rows.claim(["b", "n1"], 100, 50)).to.equal(true);
  });

  it("an expired row not yet swept is taken over by the next claim, at the table's boundary", async () => {
    const inclusive = table(true); // a signed request is still accepted at its last second
    await inclusive.claim(["a", "n"], 100, 50);
    expect(await inclusive.claim(["a", "n"], 200, 100)).to.equal(false);
    expect(await inclusive.claim(["a", "n"], 200, 101)).to.equal(true);
    expect(await inclusive.claim(["a", "n"], 300, 150)).to.equal(false); // the taken-over row guards to 200

    const exclusive = table(false); // a sign-in message is refused from its Expiration Time on
    await exclusive.claim(["o", "n"], 100, 50);
    expect(await exclusive.claim(["o", "n"], 200, 99)).to.equal(false);
    expect(await exclusive.claim(["o", "n"], 200, 100)).to.equal(true);
  });

  it("a sweep deletes expired rows only, at most one batch at a time", async () => {
    const rows = table(false, 3);
    for (let i = 0; i < 7; i++) await rows.claim(["o", `old-${i}`], 100, 50);
    await rows.claim(["o", "live"], 500, 50);
    expect(await rows.sweep(100)).to.equal(3);
    expect(await rows.sweep(100)).to.equal(3);
    expect(await rows.sweep(100)).to.equal(1);
    expect(await rows.sweep(100)).to.equal(0);
    expect(await count("siwe_nonces")).to.equal(1);
    // The same boundary as claims: at second 500 the live row expires (exclusive table).
    expect(await rows.sweep(499)).to.equal(0);
    expect(await rows.sweep(500)).to.equal(1);
  });

  it("a claim sweeps in the background, at most once per period", async () => {
    const rows = new ExpiringRows(db, {
      table: "signed_nonces",
      key: ["key_address", "nonce"],
      expiry: "expires_s",
      liveAtExpiry: true,
      batch: 1_000,
      sweepEveryMs: 3_600_000,
    });
    await db.exec(
      "INSERT INTO signed_nonces (key_address, nonce, expires_s) VALUES ('x', 'old-1', 10), ('x', 'old-2', 10)",
    );
    await rows.claim(["x", "first"], 1_000, 500); // sweeps (the first claim of the process may)
    await eventually(async () => (await count("signed_nonces")) === 1, { timeoutMs: 5_000 });
    await db.exec("INSERT INTO signed_nonces (key_address, nonce, expires_s) VALUES ('x', 'old-3', 10)");
    await rows.claim(["x", "second"], 1_000, 500); // within the period: no sweep
    await new Promise((r) => setTimeout(r, 100));
    expect(await count("signed_nonces")).to.equal(3);
  });
});

describe("data layer: SweepThrottle", () => {
  it("runs at most once per period, first at the first poke unless told to wait a period", async () => {
    const ran: number[] = [];
    const now = new SweepThrottle<number>(60_000, async (at) => void ran.push(at));
    now.poke(1);
    now.poke(2);
    const later = new SweepThrottle<number>(60_000, async (at) => void ran.push(at), undefined, false);
    later.poke(3);
    expect(ran).to.deep.equal([1]);
  });

  it("hands a failed sweep to its error handler, never to the caller", async () => {
    const errors: string[] = [];
    new SweepThrottle(
      1,
      async () => {
        throw new Error("database gone");
      },
      (e) => errors.push(e.message),
    ).poke();
    await new Promise((r) => setTimeout(r, 10));
    expect(errors).to.deep.equal(["database gone"]);
  });
});
