/**
 * Property-based fuzzing of the whole HTTP API: every operation of the served OpenAPI document, driven
 * with generated path parameters, query strings, headers and bodies, both schema-shaped and hostile
 * (wrong types, huge and negative numbers, 2^64, deep nesting, unicode, `__proto__` / `constructor` keys,
 * empty and oversized strings, broken JSON, wrong content types).
 *
 * For every request:
 * - the status is never 5xx;
 * - every 4xx carries an error code documented in docs/errors.md;
 * - a refused request (4xx) wrote nothing: the chain's block number (anvil mines one block per
 *   transaction), the billing ledger's rows, the idempotency records, the pinned code and the content store's entries are
 *   the same after it as before.
 *
 * Requests run one at a time so "before" and "after" belong to one request. Seeded: SIGIL_FUZZ_SEED
 * replays a run, SIGIL_FUZZ_RUNS changes the count; a failure prints the seed, the shrunk
 * counterexample and the failing request.
 *
 * How many: the default run (`npm test`, CI) sends 2,000 requests; a release run sends 10,000
 * (`SIGIL_FUZZ_RUNS=10000`). Every run draws a new seed, so the default runs together cover far more
 * than any one 10,000-request run, while each costs a fifth of the time: 2,000 is still about 30
 * requests per operation of the document, and every assertion holds per request. The time limit grows
 * with the count (a minute of set-up plus 120 ms a request, several times what a request takes on a
 * heavily loaded 2-CPU machine), so neither count hits it on a busy machine.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import * as os from "node:os";
import Database from "better-sqlite3";
import { expect } from "chai";
import fc from "fast-check";
import { createBilling, SimulatedProcessor, type Billing } from "../../relayer/billing";
import { setupAccount, startStack, type Stack } from "../helpers/stack";

/**
 * The live keys stand in generated requests as placeholders, replaced when sent: a counterexample
 * printed on failure shows which key a request used, never the key itself.
 */
const ACCOUNT_KEY = "<account key>";
const USAGE_KEY = "<usage key>";
const RUNS = Number(process.env.SIGIL_FUZZ_RUNS ?? 2_000);
/** Set-up (a stack, an account, billing) plus a generous per-request budget: see the header. */
const TIMEOUT_MS = 60_000 + RUNS * 120;
const SEED = Number(process.env.SIGIL_FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));

interface Operation {
  method: string;
  /** OpenAPI path template, e.g. /core/v1/groups/{id}. */
  template: string;
  pathParams: Array<{ name: string; schema: Schema }>;
  queryParams: string[];
  body?: Schema;
}

interface Schema {
  type?: string;
  properties?: Record<string, Schema>;
  items?: Schema;
  pattern?: string;
  oneOf?: Schema[];
}

interface FuzzRequest {
  method: string;
  path: string;
  query: string;
  headers: Record<string, string>;
  body?: string;
}

/** Every code docs/errors.md documents (relayer and billing tables). */
function documentedCodes(): Set<string> {
  const md = fs.readFileSync(path.join(__dirname, "..", "..", "docs", "errors.md"), "utf8");
  return new Set([...md.matchAll(/^\| `([a-z_]+)` +\|/gm)].map((m) => m[1]));
}

function operationsOf(doc: { paths: Record<string, Record<string, Record<string, unknown>>> }): Operation[] {
  const ops: Operation[] = [];
  for (const [template, methods] of Object.entries(doc.paths)) {
    for (const [method, o] of Object.entries(methods)) {
      const params = (o.parameters ?? []) as Array<{ name: string; in: string; schema: Schema }>;
      const body = (o.requestBody as { content: Record<string, { schema: Schema }> } | undefined)?.content[
        "application/json"
      ].schema;
      ops.push({
        method: method.toUpperCase(),
        template,
        pathParams: params.filter((p) => p.in === "path"),
        queryParams: params.filter((p) => p.in === "query").map((p) => p.name),
        body,
      });
    }
  }
  return ops;
}

/** Hostile scalars and shapes that any field may receive instead of what its schema says. */
const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(
    null,
    true,
    0,
    -1,
    1.5,
    2 ** 53,
    2 ** 64,
    -(2 ** 64),
    1e308,
    "",
    " ",
    "__proto__",
    "constructor",
    "0x",
    "x".repeat(300),
    "é".repeat(700),
    "\u0000\u202e\ud83d\ude00",
    {},
    [],
    { __proto__: null, polluted: true },
  ),
  fc.string({ unit: "grapheme", maxLength: 40 }),
  fc.jsonValue({ maxDepth: 3 }),
);

describe("relayer: property-based fuzzer over the OpenAPI document", function () {
  this.timeout(TIMEOUT_MS);
  let s: Stack;
  let gasAtStart: bigint[];
  let billing: Billing;
  let billingDir: string;
  let ledger: Database.Database;
  let a: Awaited<ReturnType<typeof setupAccount>>;
  let usageKey: string;
  let ops: Operation[];
  let documented: Set<string>;

  before(async () => {
    billingDir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-fuzz-billing-"));
    billing = await createBilling({
      dbPath: path.join(billingDir, "billing.sqlite"),
      processor: new SimulatedProcessor(),
      // Enough credit that charges never run out during a run: refusals are the point, not 402s.
      signupCreditCents: 100_000_000,
      chargeFlushMs: 0,
    });
    s = await startStack({ billing });
    // The gas wallets keep the 100 ETH the stack funds them with: path-A fees no longer compound
    // (relayer/chain/fees.ts; the former "twice eth_gasPrice" spent ~300 ETH per wallet over this run).
    gasAtStart = await Promise.all([0, 1, 2, 3].map((i) => s.provider.getBalance(s.enclave.gasAddress(i))));
    a = await setupAccount(s);
    const k = await s.api("POST", "/core/v1/add_usage_api_key", {
      key: a.accountKey,
      body: {
        name: "fuzz",
        execute_in_groups: [0],
        can_create_pkps: true,
        can_create_groups: true,
        manage_ipfs_ids_in_groups: [0],
        add_pkp_to_groups: [0],
      },
    });
    expect(k.status, JSON.stringify(k.body)).to.equal(201);
    usageKey = k.body.usage_api_key;
    ledger = new Database(path.join(billingDir, "billing.sqlite"), { readonly: true });
    const doc = await s.api("GET", "/core/v1/openapi.json");
    ops = operationsOf(doc.body);
    documented = documentedCodes();
  });
  after(async () => {
    ledger?.close();
    await s?.close();
    await billing?.close();
    fs.rmSync(billingDir, { recursive: true, force: true });
  });

  // ---- generators ---------------------------------------------------------------------------------

  const strings = (): fc.Arbitrary<string> =>
    fc.oneof(
      fc.string({ maxLength: 30 }),
      fc.constantFrom(a.cid, a.pkpId, s.enclave.pkpAddress(a.pkpId), usageKey, "0x" + "ab".repeat(20)),
    );

  /** A value shaped like `schema` most of the time, a hostile one otherwise. */
  function valueFor(schema: Schema | undefined): fc.Arbitrary<unknown> {
    const shaped = ((): fc.Arbitrary<unknown> => {
      if (!schema) return fc.jsonValue({ maxDepth: 4 });
      if (schema.oneOf) return fc.oneof(...schema.oneOf.map((x) => valueFor(x)));
      switch (schema.type) {
        case "string":
          return strings();
        case "integer":
          return fc.oneof(
            fc.integer({ min: -3, max: 10 }),
            fc.constant(Math.floor(Date.now() / 1000) + 3600),
            fc.constant(a.groupId),
          );
        case "boolean":
          return fc.boolean();
        case "array":
          return fc.oneof(
            fc.array(valueFor(schema.items), { maxLength: 4 }),
            fc.constant(Array.from({ length: 65 }, (_, i) => i)),
            fc.constant([a.groupId]),
            fc.constant([0]),
          );
        case "null":
          return fc.constant(null);
        default:
          return fc.jsonValue({ maxDepth: 3 });
      }
    })();
    return fc.oneof({ weight: 3, arbitrary: shaped }, { weight: 1, arbitrary: hostileValue });
  }

  function schemaBody(schema: Schema): fc.Arbitrary<string> {
    const props = schema.properties ?? {};
    const record = fc.record(Object.fromEntries(Object.entries(props).map(([k, v]) => [k, valueFor(v)])), {
      requiredKeys: [],
    });
    const names = Object.keys(props).length ? Object.keys(props) : ["x"];
    // Raw JSON members prepended to the body: prototype-pollution keys, an unknown field, or one of the
    // operation's own fields nested far deeper than any parser should be asked to recurse.
    const extra = fc.oneof(
      {
        weight: 4,
        arbitrary: fc.constantFrom(
          "",
          '"__proto__": {"polluted": true}',
          '"constructor": {"prototype": {"polluted": true}}',
          '"unknown_field": 1',
        ),
      },
      {
        weight: 1,
        arbitrary: fc
          .tuple(fc.constantFrom(...names), depths, fc.boolean())
          .map(([name, depth, arrays]) =>
            arrays
              ? `"${name}": ${"[".repeat(depth)}1${"]".repeat(depth)}`
              : `"${name}": ${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`,
          ),
      },
    );
    return fc.tuple(record, extra).map(([r, extra]) => {
      if (!extra) return JSON.stringify(r);
      // The generated field wins over the raw one if both name it: drop it from the record.
      const name = extra.slice(1, extra.indexOf('"', 1));
      const rest = Object.fromEntries(Object.entries(r).filter(([k]) => k !== name));
      const json = JSON.stringify(rest);
      return json === "{}" ? `{${extra}}` : `{${extra},${json.slice(1)}`;
    });
  }

  /** A body each operation accepts (where one exists), for mutating one field at a time. */
  function validBody(template: string): Record<string, unknown> {
    const bodies: Record<string, Record<string, unknown>> = {
      "/core/v1/new_account": { account_name: "fuzz" },
      "/core/v1/account/transfer_ownership": { new_owner: "0x" + "ab".repeat(20) },
      "/core/v1/add_usage_api_key": { name: "k", execute_in_groups: [a.groupId] },
      "/core/v1/update_usage_api_key": { usage_api_key: usageKey, name: "fuzz" },
      "/core/v1/update_usage_api_key_metadata": { usage_api_key: usageKey, name: "m" },
      "/core/v1/remove_usage_api_key": { usage_api_key: s.enclave.generateUsageKey().apiKey },
      "/core/v1/pkps/create": { name: "p" },
      "/core/v1/groups": { name: "g", pkps: [a.pkpId], actions: [a.cid] },
      "/core/v1/groups/{id}/actions": { add: [a.cid] },
      "/core/v1/groups/{id}/pkps": { add: [a.pkpId] },
      "/core/v1/actions": { code: a.code },
      "/core/v1/actions/cid": { code: a.code },
      "/core/v1/svc_action": { cid: a.cid, pkp_id: a.pkpId, js_params: { who: "fuzz" } },
    };
    return bodies[template] ?? {};
  }

  /** Deep nesting as raw JSON text (JSON.stringify itself could not build it). */
  const depths = fc.oneof(
    { weight: 4, arbitrary: fc.integer({ min: 2, max: 64 }) },
    { weight: 1, arbitrary: fc.constantFrom(1_000, 100_000) },
  );
  const deepRaw = fc
    .tuple(depths, fc.boolean())
    .map(([depth, arrays]) =>
      arrays ? `${"[".repeat(depth)}1${"]".repeat(depth)}` : `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`,
    );

  /** A valid body with one field (known or not) replaced by a generated, hostile or deeply nested value. */
  function mutatedBody(op: Operation): fc.Arbitrary<string> {
    const base = validBody(op.template);
    const props = op.body?.properties ?? {};
    const names = [...new Set([...Object.keys(base), ...Object.keys(props)])];
    if (!names.length) names.push("x");
    return fc
      .constantFrom(...names)
      .chain((name) =>
        fc.tuple(
          fc.constant(name),
          fc.oneof(
            { weight: 3, arbitrary: valueFor(props[name]).map((v) => JSON.stringify(v) ?? "null") },
            { weight: 1, arbitrary: deepRaw },
          ),
        ),
      )
      .map(([name, raw]) => {
        const rest = JSON.stringify(Object.fromEntries(Object.entries(base).filter(([k]) => k !== name)));
        const member = `${JSON.stringify(name)}: ${raw}`;
        return rest === "{}" ? `{${member}}` : `{${member},${rest.slice(1)}`;
      });
  }

  const hostileBody: fc.Arbitrary<string> = fc.oneof(
    depths.map((d) => "[".repeat(d) + "]".repeat(d)),
    fc.integer({ min: 20, max: 200 }).map((d) => `{"js_params": ${'{"a":'.repeat(d)}1${"}".repeat(d)}}`),
    fc.constantFrom(
      "",
      "null",
      '"a string"',
      "123",
      "18446744073709551616",
      "[]",
      "{",
      '{"a": }',
      "{'single': 1}",
      '{"__proto__": {"isAdmin": true}}',
      '{"name": "\\ud800"}',
      "\ufeff{}",
    ),
    fc.json({ maxDepth: 4 }),
    fc.string({ unit: "grapheme", maxLength: 50 }),
  );

  function pathFor(op: Operation): fc.Arbitrary<string> {
    if (!op.pathParams.length) return fc.constant(op.template);
    // DELETE names the groups the fuzzer itself creates, so the group every execution needs survives.
    const valid = op.template.includes("{cid}")
      ? [a.cid]
      : op.template.startsWith("/core/v1/pkps")
        ? [a.pkpId, s.enclave.pkpAddress(a.pkpId)]
        : op.method === "DELETE"
          ? [1, 2, 3, 4, 5].map((i) => String(a.groupId + i))
          : [String(a.groupId)];
    const param = fc.oneof(
      { weight: 3, arbitrary: fc.constantFrom(...valid) },
      {
        weight: 2,
        arbitrary: fc.constantFrom(
          "0",
          "-1",
          "1.5",
          "18446744073709551616",
          "1e3",
          "__proto__",
          "constructor",
          "%zz",
          "%00",
          "0x" + "0".repeat(64),
          "0x" + "f".repeat(64),
          "x".repeat(500),
        ),
      },
      {
        weight: 1,
        arbitrary: fc.string({ unit: "grapheme", minLength: 1, maxLength: 20 }).map(encodeURIComponent),
      },
    );
    return param.map((p) => op.template.replace(/\{[a-z_]+\}/, p));
  }

  function queryFor(op: Operation): fc.Arbitrary<string> {
    const value = fc.oneof(
      fc.integer({ min: -2, max: 120 }).map(String),
      fc.constantFrom("", "abc", "1e3", "18446744073709551616", "%zz", "1.5", "__proto__"),
    );
    const names = op.queryParams.length ? op.queryParams : ["page_size"];
    return fc.oneof(
      { weight: 6, arbitrary: fc.constant("") },
      {
        weight: 5,
        arbitrary: fc
          .uniqueArray(fc.tuple(fc.constantFrom(...names, "__proto__", "unknown"), value), {
            maxLength: 3,
            selector: ([k]) => k,
          })
          .map((pairs) => pairs.map(([k, v]) => `${k}=${v}`).join("&")),
      },
      { weight: 1, arbitrary: fc.constantFrom(`page_size=${"9".repeat(1_100)}`, "page_size=1&page_size=2") },
    );
  }

  const headersArb = (): fc.Arbitrary<Record<string, string>> =>
    fc
      .record({
        key: fc.constantFrom(
          "none",
          "account",
          "account",
          "usage",
          "usage",
          "bearer-usage",
          "garbage",
          "short",
          "unknown-usage",
          "unknown-account",
          "both-different",
        ),
        // Mostly well-formed headers, so most requests reach the routes rather than the guard.
        idem: fc.oneof(
          { weight: 6, arbitrary: fc.constant(undefined) },
          {
            weight: 3,
            arbitrary: fc
              .string({ minLength: 1, maxLength: 20 })
              .map((x) => `idem-${x.replace(/[^\x21-\x7e]/g, "_")}`),
          },
          { weight: 1, arbitrary: fc.constantFrom(" ", "k".repeat(300)) },
        ),
        correlation: fc.oneof(
          { weight: 8, arbitrary: fc.constant(undefined) },
          { weight: 1, arbitrary: fc.constant("corr-1") },
          { weight: 1, arbitrary: fc.constant("c".repeat(2_000)) },
        ),
        contentType: fc.oneof(
          { weight: 6, arbitrary: fc.constant("application/json") },
          { weight: 1, arbitrary: fc.constant("application/json; charset=utf-8") },
          { weight: 1, arbitrary: fc.constant("application/merge-patch+json") },
          { weight: 1, arbitrary: fc.constant("text/plain") },
        ),
      })
      .map(({ key, idem, correlation, contentType }) => {
        const h: Record<string, string> = { "content-type": contentType };
        const k = {
          none: undefined,
          account: ACCOUNT_KEY,
          usage: USAGE_KEY,
          "bearer-usage": undefined,
          garbage: "hunter2",
          short: "ak_" + "a".repeat(63),
          "unknown-usage": s.enclave.generateUsageKey().apiKey,
          "unknown-account": s.enclave.generateAccountKey().apiKey,
          "both-different": USAGE_KEY,
        }[key];
        if (k !== undefined) h["x-api-key"] = k;
        if (key === "bearer-usage") h.authorization = `Bearer ${USAGE_KEY}`;
        if (key === "both-different") h.authorization = `Bearer ${ACCOUNT_KEY}`;
        if (idem !== undefined) h["idempotency-key"] = idem;
        if (correlation !== undefined) h["x-correlation-id"] = correlation;
        return h;
      });

  function requestFor(op: Operation): fc.Arbitrary<FuzzRequest> {
    const bodies =
      op.method === "GET"
        ? fc.constant(undefined)
        : fc.oneof(
            { weight: 2, arbitrary: mutatedBody(op) },
            { weight: 3, arbitrary: op.body ? schemaBody(op.body) : fc.constant("{}") },
            { weight: 2, arbitrary: hostileBody },
            { weight: 1, arbitrary: fc.constant(undefined) },
          );
    return fc
      .record({ path: pathFor(op), query: queryFor(op), headers: headersArb(), body: bodies })
      .map((r) => ({ method: op.method, ...r }));
  }

  // ---- the observed state -------------------------------------------------------------------------

  async function written(): Promise<Record<string, number>> {
    const count = (db: Database.Database, table: string) =>
      (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
    return {
      block: await s.provider.getBlockNumber(),
      ledger_entries: count(ledger, "ledger_entries"),
      // The relayer keeps its tables in the billing ledger's database (one file).
      idempotency_records: count(ledger, "idempotency"),
      pinned_code: count(ledger, "pinned_code"),
      pinned_actions: fs.readdirSync(path.join(s.relayerOptions.dataDir, "actions"), { recursive: true })
        .length,
    };
  }

  async function send(r: FuzzRequest): Promise<{ status: number; text: string }> {
    const url = `${s.url}${r.path}${r.query ? "?" + r.query : ""}`;
    const headers = Object.fromEntries(
      Object.entries(r.headers).map(([k, v]) => [
        k,
        v.replace(ACCOUNT_KEY, a.accountKey).replace(USAGE_KEY, usageKey),
      ]),
    );
    const res = await fetch(url, { method: r.method, headers, body: r.body });
    return { status: res.status, text: await res.text() };
  }

  it(`${RUNS} generated requests: no 5xx, every 4xx documented, refusals write nothing`, async () => {
    const counts = { requests: 0, ok: 0, refused: 0 };
    const byCode = new Map<string, number>();
    // Only these requests change the state, one at a time: the state after one is the state before the next.
    let last = await written();
    const property = fc.asyncProperty(
      fc.constantFrom(...ops).chain((op) => requestFor(op)),
      async (req) => {
        const before = last;
        const res = await send(req);
        last = await written();
        counts.requests++;
        const shown =
          `${req.method} ${req.path.slice(0, 120)}?${req.query.slice(0, 60)} ` +
          `headers=${JSON.stringify(req.headers).slice(0, 300)} body=${(req.body ?? "").slice(0, 200)} ` +
          `→ ${res.status} ${res.text.slice(0, 300)}`;
        expect(res.status, shown).to.be.below(500);
        if (res.status < 400) {
          counts.ok++;
          return;
        }
        counts.refused++;
        const code = (JSON.parse(res.text) as { error?: { code?: string } }).error?.code;
        expect(documented.has(String(code)), `undocumented code: ${shown}`).to.equal(true);
        byCode.set(String(code), (byCode.get(String(code)) ?? 0) + 1);
        expect(last, `a refused request wrote: ${shown}`).to.deep.equal(before);
      },
    );
    try {
      await fc.assert(property, { numRuns: RUNS, seed: SEED });
    } catch (err) {
      console.log(`fuzz: failed with SIGIL_FUZZ_SEED=${SEED} (re-run with it to reproduce)`);
      throw err;
    }
    expect(counts.requests).to.be.at.least(RUNS);
    // Both sides were exercised: schema-shaped requests got through, hostile ones were refused.
    expect(counts.ok).to.be.greaterThan(RUNS / 50);
    expect(counts.refused).to.be.greaterThan(RUNS / 2);
    if (process.env.SIGIL_FUZZ_VERBOSE) {
      const balances = await Promise.all(
        [0, 1, 2, 3].map((i) => s.provider.getBalance(s.enclave.gasAddress(i))),
      );
      console.log(
        "gas spent (wei):",
        balances.map((b, i) => (gasAtStart[i] - b).toString()),
      );
      const head = await s.provider.getBlock("latest");
      console.log(
        "gas price:",
        await s.provider.send("eth_gasPrice", []),
        "base fee:",
        head?.baseFeePerGas,
        "gas used:",
        head?.gasUsed,
      );
    }
    if (process.env.SIGIL_FUZZ_VERBOSE)
      console.log(counts, "blocks:", last.block, Object.fromEntries([...byCode].sort((x, y) => y[1] - x[1])));
  });
});
