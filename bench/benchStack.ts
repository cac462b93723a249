/**
 * How the HTTP benchmarks start what they measure: a whole stack (testkit/stack.ts) with rate limits
 * out of the way, optionally billing with the simulated processor and a database URL (an embedded
 * PostgreSQL from bench/embeddedPostgres.ts), in a temp folder that `close()` removes; and the account
 * set-up every execution benchmark makes (a PKP, an action in a group, a usage key that may run it).
 */
import { mkdtempSync, rmSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { SimulatedProcessor, createBilling, type Billing } from "../relayer/billing";
import { startStack, type Stack } from "../testkit/stack";
import { keepAliveAgent, postBytes } from "./httpPost";
import type { HttpRequestSpec } from "./loadgen";

/** Limits no benchmark reaches: what is measured is the work, not the throttle. */
export const UNLIMITED_RATES = {
  perKeyPerMinute: 1e9,
  perAccountPerMinute: 1e9,
  newAccountPerIpPerHour: 1e9,
  perIpPerMinute: 1e9,
  concurrentExecutionsPerAccount: 1000,
};

/**
 * The five-rule signing policy the policy benchmarks put on a PKP's group (docs/policies.md): it allows
 * the benchmark's message ("bench…") and denies or bounds everything else.
 */
export const FIVE_RULE_POLICY = {
  version: 1,
  rules: [
    { name: "bench-messages", effect: "allow", operation: "message", prefix: "bench" },
    { name: "no-night-messages", effect: "deny", operation: "message", prefix: "night" },
    { name: "no-export", effect: "deny", operation: "keyExport" },
    { name: "no-digests", effect: "deny", operation: "digest" },
    { name: "mainnet-only", effect: "allow", operation: "transaction", chainIds: [1], value: { max: "0" } },
  ],
};

const agent = keepAliveAgent();

/** POST a JSON body; the answer's JSON body. */
export async function postJson(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<Record<string, unknown>> {
  const r = await postBytes(agent, url, Buffer.from(JSON.stringify(body)), headers);
  return JSON.parse(r.body) as Record<string, unknown>;
}

/** Closes the kept-alive connections of postJson, so that the process can exit by itself. */
export function closeBenchConnections(): void {
  agent.destroy();
}

/** A successful execution by the usage key: what the load generator sends, `body` the svc_action body. */
export function executionRequest(
  url: string,
  usageKey: string,
  body: Record<string, unknown>,
): HttpRequestSpec {
  return {
    url: `${url}/core/v1/svc_action`,
    body,
    headers: { "x-api-key": usageKey },
    expectStatus: 200,
    rejectHasError: true,
  };
}

export interface BenchStack {
  stack: Stack;
  /** Present when started with `billing: true` (the ledger on `databaseUrl`, else in the temp folder). */
  billing?: Billing;
  dir: string;
  /** Stops the stack and billing and removes the temp folder. */
  close(): Promise<void>;
}

export async function startBenchStack(opts: {
  /** Names the temp folder (sigil-bench-<tag>-…). */
  tag: string;
  databaseUrl?: string;
  billing: boolean;
  /** Further relayer options (rate limits are UNLIMITED_RATES unless given). */
  relayer?: Parameters<typeof startStack>[0];
}): Promise<BenchStack> {
  const dir = mkdtempSync(path.join(os.tmpdir(), `sigil-bench-${opts.tag}-`));
  const billing = opts.billing
    ? await createBilling({
        dbPath: path.join(dir, "billing.sqlite"),
        databaseUrl: opts.databaseUrl,
        processor: new SimulatedProcessor(),
        signupCreditCents: 1_000_000_000,
      })
    : undefined;
  const stack = await startStack({
    databaseUrl: opts.databaseUrl,
    billing,
    rateLimits: UNLIMITED_RATES,
    executor: { poolSize: 2 },
    ...opts.relayer,
  });
  return {
    stack,
    billing,
    dir,
    async close() {
      await stack.close();
      await billing?.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A new account with a PKP, the action `code` (or the code made for that PKP) in group 0, and a usage
 * key that may execute in it.
 */
export async function benchAccount(
  url: string,
  code: string | ((pkpId: string) => string),
): Promise<{ accountKey: string; pkpId: string; cid: string; usageKey: string }> {
  const accountKey = (await postJson(`${url}/core/v1/new_account`, {})).api_key as string;
  const auth = { "x-api-key": accountKey };
  const pkpId = (await postJson(`${url}/core/v1/pkps/create`, {}, auth)).pkp_id as string;
  const source = typeof code === "string" ? code : code(pkpId);
  const cid = (await postJson(`${url}/core/v1/actions`, { code: source }, auth)).cid as string;
  await postJson(`${url}/core/v1/groups`, { name: "bench", pkps: [pkpId], actions: [cid] }, auth);
  const usageKey = (
    await postJson(`${url}/core/v1/add_usage_api_key`, { name: "bench", execute_in_groups: [0] }, auth)
  ).usage_api_key as string;
  return { accountKey, pkpId, cid, usageKey };
}
