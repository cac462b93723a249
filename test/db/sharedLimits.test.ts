/**
 * The shared (PostgreSQL) rate limits and execution cap as two instances see them: two data layers
 * (two pools, as two relayer processes have) on one database. The combined statements must enforce
 * exactly what separate takes enforced: never more admissions than the capacity, the same order
 * semantics as the in-memory limiter (a refusal charges the limits before it, not those after).
 */
import { expect } from "chai";
import fc from "fast-check";
import {
  type DataLayer,
  SharedConcurrencyCap,
  SharedTokenBuckets,
  openDataLayer,
  postgresStatementCount,
} from "../../relayer/db";
import { ApiError } from "../../relayer/errors";
import { type LimitTake, TokenBuckets, takeInOrder } from "../../relayer/rateLimit";
import { describeOnPostgres, freshDatabaseUrl } from "../helpers/postgres";

const HOUR = 3_600_000; // long windows: refill over a test (< 1 token) never admits one more

async function outcome(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return "admitted";
  } catch (e) {
    if (e instanceof ApiError)
      return `${e.code}:${(e.details as { scope?: string } | undefined)?.scope ?? ""}`;
    throw e;
  }
}

describeOnPostgres("data layer: shared limits across two instances (postgres)", function () {
  this.timeout(60_000);
  const layers: DataLayer[] = [];
  let url: string;

  before(async function () {
    url = await freshDatabaseUrl();
    for (let i = 0; i < 2; i++) layers.push(await openDataLayer({ databaseUrl: url, sqlitePath: "" }));
  });
  after(async function () {
    for (const l of layers) await l.close();
  });

  const pairOn = (layer: DataLayer, tag: string, keyCap: number, accountCap: number) => {
    const perKey = new SharedTokenBuckets(layer, `key-${tag}`, keyCap, HOUR);
    const perAccount = new SharedTokenBuckets(layer, `account-${tag}`, accountCap, HOUR);
    return (key: string, account: string): LimitTake[] => [
      { limiter: perKey, key, what: `key ${key}` },
      { limiter: perAccount, key: account, what: `account ${account}` },
    ];
  };

  it("200 concurrent key-and-account takes spread over both instances admit exactly the account's 25", async function () {
    const takes = layers.map((l) => pairOn(l, "burst", 1_000, 25));
    const answers = await Promise.all(
      Array.from({ length: 200 }, (_, i) => outcome(takeInOrder(takes[i % 2](`k${i % 7}`, "a1")))),
    );
    expect(answers.filter((a) => a === "admitted")).to.have.length(25);
    expect(answers.filter((a) => a === "rate_limited:account")).to.have.length(175);
  });

  it("the key and the account are taken in one statement", async function () {
    const take = pairOn(layers[0], "one", 10, 10);
    const before = postgresStatementCount();
    await takeInOrder(take("k", "a"));
    expect(postgresStatementCount() - before).to.equal(1);
  });

  it("a refusal by the key's limit leaves the account's bucket untouched", async function () {
    const take = pairOn(layers[0], "order", 1, 5);
    expect(await outcome(takeInOrder(take("k", "a")))).to.equal("admitted");
    expect(await outcome(takeInOrder(take("k", "a")))).to.equal("rate_limited:key");
    const rows = (await layers[0].exec("SELECT tokens FROM rate_buckets WHERE bucket = $1", [
      "account-order:a",
    ])) as Array<{ tokens: number }>;
    expect(rows.map((r) => Math.floor(r.tokens))).to.deep.equal([4]);
  });

  it("a refusal by the account's limit keeps the key's token spent, as separate takes did", async function () {
    const take = pairOn(layers[1], "second", 5, 1);
    expect(await outcome(takeInOrder(take("k", "a")))).to.equal("admitted");
    const refused = await takeInOrder(take("k", "a")).catch((e: ApiError) => e);
    expect(refused).to.be.instanceOf(ApiError);
    expect((refused as ApiError).code).to.equal("rate_limited");
    expect((refused as ApiError).message).to.equal("Rate limit reached for account a; retry in 3600 s.");
    const rows = (await layers[1].exec("SELECT tokens FROM rate_buckets WHERE bucket = $1", [
      "key-second:k",
    ])) as Array<{ tokens: number }>;
    expect(rows.map((r) => Math.floor(r.tokens))).to.deep.equal([3]);
  });

  it("property: any sequence of takes over both instances answers as the in-memory limiter does", async function () {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 4 }),
        fc.array(fc.tuple(fc.nat(1), fc.nat(2), fc.nat(1)), { minLength: 1, maxLength: 12 }),
        async (keyCap, accountCap, steps) => {
          const tag = `prop${run++}`;
          const shared = layers.map((l) => pairOn(l, tag, keyCap, accountCap));
          const model = [
            new TokenBuckets(keyCap, HOUR, () => 0),
            new TokenBuckets(accountCap, HOUR, () => 0),
          ];
          for (const [instance, key, account] of steps) {
            const expected = await outcome(
              takeInOrder([
                { limiter: model[0], key: `k${key}`, what: `key k${key}` },
                { limiter: model[1], key: `a${account}`, what: `account a${account}` },
              ]),
            );
            const got = await outcome(takeInOrder(shared[instance](`k${key}`, `a${account}`)));
            if (got !== expected)
              throw new Error(`step ${instance}/${key}/${account}: ${got}, expected ${expected}`);
          }
        },
      ),
      { numRuns: 25 },
    );
  });

  it("a sweep drops the buckets that have refilled completely and keeps the others", async function () {
    const fast = new SharedTokenBuckets(layers[0], "sweep-fast", 2, 50); // refills within 50 ms
    const slow = new SharedTokenBuckets(layers[0], "sweep-slow", 2, HOUR);
    await fast.take("x", "x");
    await slow.take("y", "y");
    await new Promise((r) => setTimeout(r, 100));
    expect(await fast.sweep()).to.equal(1);
    expect(await slow.sweep()).to.equal(0);
    const rows = (await layers[0].exec(
      "SELECT bucket FROM rate_buckets WHERE bucket LIKE 'sweep-%' ORDER BY bucket",
    )) as Array<{ bucket: string }>;
    expect(rows.map((r) => r.bucket)).to.deep.equal(["sweep-slow:y"]);
  });

  it("300 concurrent admissions to one account over both instances admit exactly the cap of 7", async function () {
    const caps = layers.map((l) => new SharedConcurrencyCap(l, 7));
    // Every pooled connection open first, so that the admissions really run side by side.
    await Promise.all(
      layers.flatMap((l) => Array.from({ length: 10 }, () => l.exec("SELECT pg_sleep(0.05)"))),
    );
    const answers = await Promise.all(
      Array.from({ length: 300 }, (_, i) => outcome(caps[i % 2].enter("31"))),
    );
    expect(answers.filter((a) => a === "admitted")).to.have.length(7);
    expect(answers.filter((a) => a === "too_many_concurrent_executions:")).to.have.length(293);
  });

  it("an admission is one statement, and carries this instance's releases with it: the slot is free at once", async function () {
    const cap = new SharedConcurrencyCap(layers[0], 1);
    const release = await cap.enter("32");
    release();
    const before = postgresStatementCount();
    const again = await cap.enter("32"); // right after the release, before its flush could have run
    expect(postgresStatementCount() - before).to.equal(1);
    again();
  });

  it("a release reaches the other instance on its own within a few milliseconds", async function () {
    const caps = layers.map((l) => new SharedConcurrencyCap(l, 1));
    const release = await caps[0].enter("33");
    expect(await outcome(caps[1].enter("33"))).to.equal("too_many_concurrent_executions:");
    release();
    await new Promise((r) => setTimeout(r, 50));
    expect(await outcome(caps[1].enter("33"))).to.equal("admitted");
  });

  it("refuses an account id that is not digits (a caller's bug, stopped before the database)", async function () {
    const cap = new SharedConcurrencyCap(layers[0], 1);
    let err: unknown;
    await cap.enter("1'; DROP TABLE execution_leases; --").catch((e: unknown) => (err = e));
    expect((err as Error).message).to.equal("not an account id: 1'; DROP TABLE execution_leases; --");
  });
});
