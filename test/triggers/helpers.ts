/**
 * Shared steps of the trigger tests: an account with a usage key that may execute its action, a
 * trigger made through the API, and waiting for a run to reach a final status.
 */
import { expect } from "chai";
import { setupAccount, type Stack } from "../helpers/stack";

export const FINAL = ["succeeded", "failed", "skipped"];

export async function accountWithKey(s: Stack, code?: string) {
  const a = await setupAccount(s, code);
  const k = await s.api("POST", "/core/v1/add_usage_api_key", {
    key: a.accountKey,
    body: { name: "trigger-key", execute_in_groups: [a.groupId] },
  });
  expect(k.status, JSON.stringify(k.body)).to.equal(201);
  return { ...a, usageKey: k.body.usage_api_key as string, keyAddress: k.body.id as string };
}

export async function createTrigger(
  s: Stack,
  a: { accountKey: string; cid: string; pkpId: string; keyAddress: string },
  over: Record<string, unknown>,
) {
  const r = await s.api("POST", "/core/v1/triggers", {
    key: a.accountKey,
    body: { name: "t", cid: a.cid, pkp_ids: [a.pkpId], run_as: { key_address: a.keyAddress }, ...over },
  });
  expect(r.status, JSON.stringify(r.body)).to.equal(201);
  return r.body;
}

export async function waitForRun(
  s: Stack,
  key: string,
  triggerId: string,
  runId: string,
  statuses: string[] = FINAL,
  timeoutMs = 20_000,
) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const r = await s.api("GET", `/core/v1/triggers/${triggerId}/runs/${runId}`, { key });
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    if (statuses.includes(r.body.status)) return r.body;
    if (Date.now() > until) throw new Error(`run ${runId} still ${r.body.status}`);
    await new Promise((res) => setTimeout(res, 50));
  }
}
