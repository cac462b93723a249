/**
 * A driver for profiling the signing-policy cost (`node --cpu-prof`): the bench's one-signature action
 * at 50 clients, either without a policy (POLICY_PROFILE_MODE=plain) or under the bench's five-rule
 * policy (=policy), on the real stack. Profiles of the two modes, compared by function, show what a run
 * under a policy adds (docs/policies.md, "What it costs").
 *
 *   POLICY_PROFILE_OUT=/tmp/policy.cpuprofile npx ts-node --transpile-only bench/policyProfile.ts
 *
 * The main thread is profiled over the measured runs only (not the set-up, nor ts-node's compiling).
 */
import * as fs from "node:fs";
import { Session } from "node:inspector/promises";
import { startStack } from "../testkit/stack";
import { keepAliveAgent, postBytes } from "./httpPost";
import { LoadGenerator } from "./loadgenClient";
import { UNLIMITED_RATES, FIVE_RULE_POLICY } from "./benchStack";

const agent = keepAliveAgent();
const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  postBytes(agent, url, Buffer.from(JSON.stringify(body)), headers);

async function main(): Promise<void> {
  const mode = process.env.POLICY_PROFILE_MODE === "plain" ? "plain" : "policy";
  const runs = Number(process.env.POLICY_PROFILE_RUNS ?? 8_000);
  const s = await startStack({
    rateLimits: UNLIMITED_RATES,
    executor: { poolSize: 2 },
  });
  const gen = LoadGenerator.start();
  try {
    const auth = { "x-api-key": JSON.parse((await post(`${s.url}/core/v1/new_account`, {})).body).api_key };
    const pkp = JSON.parse((await post(`${s.url}/core/v1/pkps/create`, {}, auth)).body).pkp_id as string;
    const code = `async function main(p) { return await Actions.signMessage({ pkpId: "${pkp}", message: p.m }); }`;
    const cid = JSON.parse((await post(`${s.url}/core/v1/actions`, { code }, auth)).body).cid as string;
    const group = JSON.parse(
      (await post(`${s.url}/core/v1/groups`, { name: "p", pkps: [pkp], actions: [cid] }, auth)).body,
    ).group_id as number;
    if (mode === "policy") {
      const policy = FIVE_RULE_POLICY;
      const policyCid = JSON.parse((await post(`${s.url}/core/v1/policies`, { policy }, auth)).body).cid;
      await post(`${s.url}/core/v1/groups/${group}/policy`, { cid: policyCid }, auth);
    }
    const usage = JSON.parse(
      (await post(`${s.url}/core/v1/add_usage_api_key`, { name: "p", execute_in_groups: [0] }, auth)).body,
    ).usage_api_key as string;
    const spec = {
      url: `${s.url}/core/v1/svc_action`,
      body: { cid, pkp_id: pkp, js_params: { m: "bench" } },
      headers: { "x-api-key": usage },
      expectStatus: 200,
      rejectHasError: true,
    };
    await gen.http(10, 600, spec);
    const out = process.env.POLICY_PROFILE_OUT;
    const session = new Session();
    if (out !== undefined) {
      session.connect();
      await session.post("Profiler.enable");
      await session.post("Profiler.start");
    }
    const st = await gen.http(50, runs, spec);
    if (out !== undefined) {
      const { profile } = await session.post("Profiler.stop");
      fs.writeFileSync(out, JSON.stringify(profile));
      session.disconnect();
    }
    console.log(`${mode}: ${st.n} runs, ${st.rps.toFixed(1)} req/s, p50 ${st.p50.toFixed(1)} ms`);
  } finally {
    await gen.stop();
    agent.destroy();
    await s.close();
  }
}

if (require.main === module)
  main().catch((err) => {
    console.error(err);
    process.exitCode = 1;
  });
