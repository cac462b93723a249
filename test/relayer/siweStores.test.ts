/**
 * The data-layer stores behind wallet sign-in (relayer/db/siweNonces.ts, siweRevocations.ts), on
 * both engines (a fresh SQLite file, a fresh PostgreSQL database): a nonce is spent once while live, a
 * sign-out is recorded once, expired rows are swept and live ones kept; on PostgreSQL, two stores (two
 * instances) agree once the reader's copy is older than its staleness bound. Plus a property: any
 * sequence of sign-outs and checks, spread over two instances, answers as a plain map would.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import fc from "fast-check";
import { SharedSignInNonces } from "../../relayer/db";
import { sessionRevocationsFor } from "../../relayer/db";
import { type DataLayer, openDataLayer } from "../../relayer/db";
import { describeOnEngines, describeOnPostgres, freshDatabaseUrl } from "../helpers/postgres";

const OWNER = "0x" + "ab".repeat(20);
const key = (i: number) => "0x" + i.toString(16).padStart(40, "0");

describeOnEngines("wallet sign-in stores", function (engine) {
  this.timeout(60_000);
  let layer: DataLayer;
  let dir: string;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-siwe-stores-"));
    layer = await openDataLayer(
      engine === "postgres"
        ? { databaseUrl: await freshDatabaseUrl(), sqlitePath: "" }
        : { sqlitePath: path.join(dir, "data.sqlite") },
    );
  });
  after(async () => {
    await layer?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("a sign-in nonce is spent once while live, and may be spent again once expired", async () => {
    const nonces = new SharedSignInNonces(layer);
    expect(await nonces.claim(OWNER, "nonce-a", 1_000, 900)).to.equal(true);
    expect(await nonces.claim(OWNER, "nonce-a", 1_000, 950)).to.equal(false);
    expect(await nonces.claim(OWNER, "nonce-a", 2_000, 1_000)).to.equal(true);
  });

  it("the same nonce of another owner is another sign-in", async () => {
    const nonces = new SharedSignInNonces(layer);
    expect(await nonces.claim(OWNER, "nonce-b", 1_000, 900)).to.equal(true);
    expect(await nonces.claim(key(1), "nonce-b", 1_000, 900)).to.equal(true);
  });

  it("sweeping deletes expired nonces and keeps live ones", async () => {
    const nonces = new SharedSignInNonces(layer);
    await nonces.claim(OWNER, "old", 5_000, 4_000);
    await nonces.claim(OWNER, "live", 9_000, 4_000);
    await nonces.sweep(8_000);
    expect(await nonces.claim(OWNER, "live", 9_000, 8_000)).to.equal(false);
    const left = (await layer.exec("SELECT nonce FROM siwe_nonces WHERE expires_s <= 8000")) as unknown[];
    expect(left).to.deep.equal([]);
  });

  it("a sign-out is recorded once: a second one answers false", async () => {
    const revocations = sessionRevocationsFor(layer, { stalenessMs: 0 });
    expect(await revocations.revoke(key(10), 1_000, 900)).to.equal(true);
    expect(await revocations.revoke(key(10), 1_000, 950)).to.equal(false);
    expect(await revocations.isRevoked(key(10), 950)).to.equal(true);
  });

  it("a sign-out ends with the session's expiry; another key is not signed out", async () => {
    const revocations = sessionRevocationsFor(layer, { stalenessMs: 0 });
    await revocations.revoke(key(11), 1_000, 900);
    expect(await revocations.isRevoked(key(11), 1_000)).to.equal(false);
    expect(await revocations.isRevoked(key(12), 900)).to.equal(false);
  });

  it("sweeping deletes expired sign-outs and keeps live ones", async () => {
    const revocations = sessionRevocationsFor(layer, { stalenessMs: 0 });
    await revocations.revoke(key(13), 5_000, 4_000);
    await revocations.revoke(key(14), 9_000, 4_000);
    expect(await revocations.sweep(8_000)).to.be.greaterThanOrEqual(1);
    const rows = (await layer.exec(
      "SELECT session_key FROM siwe_revocations WHERE session_key IN ('" + key(13) + "', '" + key(14) + "')",
    )) as Array<{ session_key: string }>;
    expect(rows.map((r) => r.session_key)).to.deep.equal([key(14)]);
  });

  it("sign-outs spread over two instances answer as one map would (property)", async () => {
    let round = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            instance: fc.integer({ min: 0, max: 1 }),
            revoke: fc.boolean(),
            key: fc.integer({ min: 0, max: 4 }),
            expiresIn: fc.integer({ min: 1, max: 100 }),
            advance: fc.integer({ min: 0, max: 30 }),
          }),
          { maxLength: 25 },
        ),
        async (steps) => {
          // Keys of their own per run: runs never see each other's rows. Staleness 0: every check re-reads.
          const base = 1_000 + ++round * 10;
          const instances = [0, 1].map(() => sessionRevocationsFor(layer, { stalenessMs: 0 }));
          const model = new Map<string, number>();
          // Time only moves forward, as the service's clock does, across runs too: a new instance sweeps
          // expired rows on its first sign-out without being awaited, and a sweep left over from an earlier
          // run (later on its clock) must not find this run's live rows expired.
          let now = 1_000_000 + round * 10_000;
          for (const s of steps) {
            const k = key(base + s.key);
            now += s.advance;
            if (s.revoke) {
              const until = now + s.expiresIn;
              const fresh = await instances[s.instance].revoke(k, until, now);
              // The row is taken over only by a later expiry (an expired one included).
              expect(fresh).to.equal((model.get(k) ?? 0) < until);
              model.set(k, Math.max(model.get(k) ?? 0, until));
            } else {
              const revoked = await instances[s.instance].isRevoked(k, now);
              expect(revoked).to.equal((model.get(k) ?? 0) > now);
            }
          }
        },
      ),
      { numRuns: 40 },
    );
  });
});

describeOnPostgres("signed-out sessions on PostgreSQL: each instance's copy", function () {
  this.timeout(60_000);
  let url: string;
  let layer: DataLayer;

  before(async () => {
    url = await freshDatabaseUrl();
    layer = await openDataLayer({ databaseUrl: url, sqlitePath: "" });
  });
  after(async () => {
    await layer?.close();
  });

  it("an instance refuses a session it signed out at once, whatever its copy's age", async () => {
    const one = sessionRevocationsFor(layer, { stalenessMs: 60_000 });
    expect(await one.isRevoked(key(20), 900)).to.equal(false); // the copy is read now, fresh for a minute
    await one.revoke(key(20), 1_000, 900);
    expect(await one.isRevoked(key(20), 900)).to.equal(true);
  });

  it("another instance keeps its copy until it is older than the bound (no query per request)", async () => {
    const one = sessionRevocationsFor(layer, { stalenessMs: 60_000 });
    const two = sessionRevocationsFor(layer, { stalenessMs: 60_000 });
    expect(await two.isRevoked(key(21), 900)).to.equal(false);
    await one.revoke(key(21), 1_000, 900);
    expect(await two.isRevoked(key(21), 900)).to.equal(false);
    // A new instance (an empty copy) reads it.
    expect(await sessionRevocationsFor(layer).isRevoked(key(21), 900)).to.equal(true);
  });

  it("a copy past the bound that cannot be re-read fails the request: 503 database_unavailable", async () => {
    const own = await openDataLayer({ databaseUrl: url, sqlitePath: "" });
    const revocations = sessionRevocationsFor(own, { stalenessMs: 0 });
    expect(await revocations.isRevoked(key(22), 900)).to.equal(false);
    await own.close();
    const err = await revocations.isRevoked(key(22), 900).then(
      () => null,
      (e: unknown) => e as { status?: number; code?: string },
    );
    expect([err?.status, err?.code]).to.deep.equal([503, "database_unavailable"]);
  });
});
