/**
 * The shared limits' admissions batched across the concurrent requests of one instance (migration 21,
 * relayer/db/batching.ts): the answers are those of the same requests sent one by one, in order (exact
 * caps on one instance and across two), a failed statement fails each request of its batch, and under
 * concurrency the batches really hold several requests (fewer statements than requests).
 */
import { expect } from "chai";
import {
  type DataLayer,
  SharedConcurrencyCap,
  SharedTokenBuckets,
  openDataLayer,
  tallyPostgresStatements,
} from "../../relayer/db";
import { StatementBatcher } from "../../relayer/db/batching";
import { ApiError } from "../../relayer/errors";
import { takeInOrder } from "../../relayer/rateLimit";
import { describeOnPostgres, freshDatabaseUrl } from "../helpers/postgres";

const HOUR = 3_600_000;

async function outcome(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return "admitted";
  } catch (e) {
    if (e instanceof ApiError) return e.code;
    return `failed:${(e as Error).message}`;
  }
}

/** Statements sent per text while `work` runs, summed over the texts that contain `fn`. */
async function statementsOf(fn: string, work: () => Promise<unknown>): Promise<number> {
  const stop = tallyPostgresStatements();
  await work().finally(() => undefined);
  const counts = stop();
  let n = 0;
  for (const [text, c] of counts) if (text.includes(fn)) n += c;
  return n;
}

describe("data layer: the statement batcher (a group commit without a timer)", function () {
  it("sends the first request at once and those arriving meanwhile together in the next batch", async function () {
    const batches: number[][] = [];
    let open: (() => void) | null = null;
    const b = new StatementBatcher<number, number>(async (items) => {
      batches.push([...items]);
      if (batches.length === 1) await new Promise<void>((r) => (open = r));
      return items.map((i) => ({ ok: true as const, value: i * 10 }));
    });
    const first = b.submit(1);
    const rest = [2, 3, 4].map((i) => b.submit(i));
    expect(batches).to.deep.equal([[1]]);
    open!();
    expect(await Promise.all([first, ...rest])).to.deep.equal([10, 20, 30, 40]);
    expect(batches).to.deep.equal([[1], [2, 3, 4]]);
  });

  it("a failed batch rejects each of its requests with the error; an item's own error reaches only it", async function () {
    const boom = new Error("boom");
    const b = new StatementBatcher<number, number>(async (items) => {
      if (items.includes(0)) throw boom;
      return items.map((i) =>
        i === 2 ? { ok: false as const, error: new Error("two") } : { ok: true as const, value: i },
      );
    });
    const answers = await Promise.all([0, 1, 2].map((i) => b.submit(i).catch((e: Error) => e.message)));
    // 0 went alone and failed; 1 and 2 went together.
    expect(answers).to.deep.equal(["boom", 1, "two"]);
  });
});

describeOnPostgres("data layer: shared limits batched across concurrent requests (postgres)", function () {
  this.timeout(60_000);
  const layers: DataLayer[] = [];

  before(async function () {
    const url = await freshDatabaseUrl();
    for (let i = 0; i < 2; i++) layers.push(await openDataLayer({ databaseUrl: url, sqlitePath: "" }));
    // Every pooled connection open first, so that the admissions really run side by side.
    await Promise.all(
      layers.flatMap((l) => Array.from({ length: 10 }, () => l.exec("SELECT pg_sleep(0.05)"))),
    );
  });
  after(async function () {
    for (const l of layers) await l.close();
  });

  it("100 concurrent admissions on one instance against a cap of 6 admit exactly 6, in fewer statements than requests", async function () {
    const cap = new SharedConcurrencyCap(layers[0], 6);
    let answers: string[] = [];
    const statements = await statementsOf("sigil_lease_batch", async () => {
      answers = await Promise.all(Array.from({ length: 100 }, () => outcome(cap.enter("41"))));
    });
    expect(answers.filter((a) => a === "admitted")).to.have.length(6);
    expect(answers.filter((a) => a === "too_many_concurrent_executions")).to.have.length(94);
    expect(statements).to.be.greaterThan(0).and.lessThan(50); // batches of more than one on average
  });

  it("200 concurrent admissions over two instances against a cap of 9 admit exactly 9", async function () {
    const caps = layers.map((l) => new SharedConcurrencyCap(l, 9));
    const answers = await Promise.all(
      Array.from({ length: 200 }, (_, i) => outcome(caps[i % 2].enter("42"))),
    );
    expect(answers.filter((a) => a === "admitted")).to.have.length(9);
  });

  it("a batch of several accounts admits each up to its own cap and refuses with the count of running leases", async function () {
    const cap = new SharedConcurrencyCap(layers[0], 2);
    const held = await cap.enter("44"); // one running already
    const errors: Array<Error | null> = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        cap.enter(i % 2 ? "43" : "44").then(
          () => null,
          (e: Error) => e,
        ),
      ),
    );
    const admitted = (acct: string) => errors.filter((e, i) => (i % 2 ? "43" : "44") === acct && !e).length;
    expect(admitted("43")).to.equal(2);
    expect(admitted("44")).to.equal(1);
    const refusal = errors.find((e, i) => e && i % 2 === 0);
    expect(refusal?.message).to.equal("Account 44 already runs 2 executions (the maximum).");
    held();
  });

  it("a released slot is admitted again through a batch (the release rides along)", async function () {
    const cap = new SharedConcurrencyCap(layers[0], 1);
    const release = await cap.enter("45");
    release();
    expect(await outcome(cap.enter("45"))).to.equal("admitted");
  });

  it("400 concurrent key-and-account takes over two instances admit exactly the account's 30, batched", async function () {
    const mk = (l: DataLayer) => ({
      key: new SharedTokenBuckets(l, "bkey", 1_000, HOUR),
      account: new SharedTokenBuckets(l, "bacct", 30, HOUR),
    });
    const limits = layers.map(mk);
    let answers: string[] = [];
    const statements = await statementsOf("sigil_take_batch", async () => {
      answers = await Promise.all(
        Array.from({ length: 400 }, (_, i) => {
          const l = limits[i % 2];
          return outcome(
            takeInOrder([
              { limiter: l.key, key: "k", what: "key k" },
              { limiter: l.account, key: "a", what: "account a" },
            ]),
          );
        }),
      );
    });
    expect(answers.filter((a) => a === "admitted")).to.have.length(30);
    expect(answers.filter((a) => a === "rate_limited")).to.have.length(370);
    expect(statements).to.be.greaterThan(0).and.lessThan(200);
    // Every take charged the key (the key comes first), the refused ones too, as separate takes would.
    const [row] = (await layers[0].exec("SELECT tokens FROM rate_buckets WHERE bucket = 'bkey:k'")) as Array<{
      tokens: number;
    }>;
    expect(Math.round(Number(row.tokens))).to.equal(600);
  });

  it("a refused take carries its Retry-After", async function () {
    const one = new SharedTokenBuckets(layers[0], "bone", 1, HOUR);
    const errors = await Promise.all(
      Array.from({ length: 5 }, () =>
        one.take("x", "account x").then(
          () => null,
          (e: ApiError) => e,
        ),
      ),
    );
    const refused = errors.filter((e): e is ApiError => !!e);
    expect(refused).to.have.length(4);
    for (const e of refused) {
      expect(e.code).to.equal("rate_limited");
      expect(e.retryAfter).to.be.within(3_500, 3_600);
    }
  });

  it("a batch that PostgreSQL ends as a deadlock's victim is run again: its request is answered", async function () {
    // An unbatched statement (an older release) locks a request's buckets in its own order, a batch in
    // name order: here another transaction holds "dl-b" and then asks for "dl-a", which the batch holds
    // while it waits for "dl-b". The batch waited first, so its deadlock check (deadlock_timeout, 1 s)
    // ends it; run again, it waits for the other transaction's commit and takes both tokens.
    const a = new SharedTokenBuckets(layers[0], "dl-a", 100, HOUR);
    const b = new SharedTokenBuckets(layers[0], "dl-b", 100, HOUR);
    const takes = () => [
      { limiter: a, key: "k", what: "bucket a" },
      { limiter: b, key: "k", what: "bucket b" },
    ];
    await takeInOrder(takes()); // both rows exist
    let batched: Promise<void> | undefined;
    await layers[1].transaction(async (tx) => {
      await tx.exec("SELECT 1 FROM rate_buckets WHERE bucket = 'dl-b:k' FOR UPDATE");
      batched = takeInOrder(takes());
      await new Promise((r) => setTimeout(r, 300)); // the batch holds dl-a and waits for dl-b
      await tx.exec("SELECT 1 FROM rate_buckets WHERE bucket = 'dl-a:k' FOR UPDATE");
    });
    await batched;
    const rows = (await layers[0].exec(
      "SELECT bucket, tokens FROM rate_buckets WHERE bucket IN ('dl-a:k', 'dl-b:k') ORDER BY bucket",
    )) as Array<{ bucket: string; tokens: number }>;
    expect(rows.map((r) => Math.round(Number(r.tokens)))).to.deep.equal([98, 98]);
  });

  it("a batch whose statement fails answers each of its requests with the error", async function () {
    const url = await freshDatabaseUrl();
    const own = await openDataLayer({ databaseUrl: url, sqlitePath: "" });
    try {
      await Promise.all(Array.from({ length: 6 }, () => own.exec("SELECT pg_sleep(0.05)")));
      const cap = new SharedConcurrencyCap(own, 5);
      const bucket = new SharedTokenBuckets(own, "bfail", 100, HOUR);
      await own.exec(
        "ALTER FUNCTION sigil_lease_batch(text[], text[], int, bigint, text[]) RENAME TO sigil_lease_gone",
      );
      await own.exec(
        "ALTER FUNCTION sigil_take_batch(int[], text[], float8[], float8[]) RENAME TO sigil_take_gone",
      );
      const stop = tallyPostgresStatements();
      const leases = await Promise.all(Array.from({ length: 20 }, () => outcome(cap.enter("46"))));
      const takes = await Promise.all(Array.from({ length: 20 }, () => outcome(bucket.take("y", "ip y"))));
      const counts = stop();
      // The statement's own error, as one request sent alone would have met it.
      expect(new Set(leases)).to.deep.equal(
        new Set([
          "failed:function sigil_lease_batch(text[], text[], integer, bigint, text[]) does not exist",
        ]),
      );
      expect(new Set(takes)).to.deep.equal(
        new Set([
          "failed:function sigil_take_batch(integer[], text[], double precision[], double precision[]) does not exist",
        ]),
      );
      // Fewer statements than requests: whole batches failed together.
      let sent = 0;
      for (const [text, c] of counts) if (text.includes("_batch(")) sent += c;
      expect(sent).to.be.lessThan(40);
      await own.exec(
        "ALTER FUNCTION sigil_lease_gone(text[], text[], int, bigint, text[]) RENAME TO sigil_lease_batch",
      );
      await own.exec(
        "ALTER FUNCTION sigil_take_gone(int[], text[], float8[], float8[]) RENAME TO sigil_take_batch",
      );
      expect(await outcome(cap.enter("46"))).to.equal("admitted");
      expect(await outcome(bucket.take("y", "ip y"))).to.equal("admitted");
    } finally {
      await own.close();
    }
  });

  it("unbatched (batched: false) answers the same: the cap stays exact with one statement per request", async function () {
    const cap = new SharedConcurrencyCap(layers[1], 3, undefined, { batched: false });
    let answers: string[] = [];
    const batched = await statementsOf("sigil_lease_batch", async () => {
      answers = await Promise.all(Array.from({ length: 40 }, () => outcome(cap.enter("47"))));
    });
    expect(batched).to.equal(0);
    expect(answers.filter((a) => a === "admitted")).to.have.length(3);
  });
});
