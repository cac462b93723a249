/**
 * Triggers benchmark (`npm run bench:triggers`). Everything real: anvil, the contracts, the relayer,
 * the executor. Prints a ratio against a baseline measured in the same run, on the same stack:
 *
 *  p95 latency of another account's `svc_action` runs while one webhook trigger is flooded (1,000
 *  calls, `max_queued_runs: 20`: 20 queued and run, the rest refused 429), against the same runs
 *  with no flood, interleaved round by round. Goal: ratio ≈ 1 (a refused hook call is one rate-limit
 *  check and one lookup; the queued runs are shared fairly with other accounts by the executor).
 */
import { startStack, setupAccount, type Stack } from "../testkit/stack";

const ROUNDS = 4;
const RUNS_PER_ROUND = 40;
const FLOOD = 1_000;

async function timedRuns(s: Stack, key: string, cid: string, pkpId: string, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    const r = await s.api("POST", "/core/v1/svc_action", { key, body: { cid, pkp_id: pkpId } });
    if (r.status !== 200) throw new Error(`run failed: ${r.status} ${JSON.stringify(r.body)}`);
    out.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  return out;
}

async function flood(url: string): Promise<Map<number, number>> {
  const statuses = new Map<number, number>();
  for (let i = 0; i < FLOOD; i += 50) {
    const rs = await Promise.all(
      Array.from({ length: 50 }, () =>
        fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" }),
      ),
    );
    for (const r of rs) {
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      await r.arrayBuffer();
    }
  }
  return statuses;
}

const p95 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.95)];

async function main(): Promise<void> {
  const s = await startStack({
    triggers: { pollMs: 50, hookPerIpPerMinute: 1_000_000, hookPerTriggerPerMinute: 1_000_000 },
  });
  try {
    const victim = await setupAccount(s, "async function main() { return 1; }");
    const flooded = await setupAccount(s, "async function main() { return 2; }");
    const k = await s.api("POST", "/core/v1/add_usage_api_key", {
      key: flooded.accountKey,
      body: { name: "t", execute_in_groups: [flooded.groupId] },
    });
    const before: number[] = [];
    const during: number[] = [];
    let accepted = 0;
    let refused = 0;
    for (let round = 0; round < ROUNDS; round++) {
      before.push(...(await timedRuns(s, victim.accountKey, victim.cid, victim.pkpId, RUNS_PER_ROUND)));
      const t = await s.api("POST", "/core/v1/triggers", {
        key: flooded.accountKey,
        body: {
          name: `flood-${round}`,
          kind: "webhook",
          cid: flooded.cid,
          pkp_ids: [flooded.pkpId],
          run_as: { key_address: k.body.id },
          limits: { max_queued_runs: 20, runs_per_minute: 600, concurrency: "parallel" },
        },
      });
      const flooding = flood(t.body.webhook.url);
      during.push(...(await timedRuns(s, victim.accountKey, victim.cid, victim.pkpId, RUNS_PER_ROUND)));
      const st = await flooding;
      accepted += st.get(202) ?? 0;
      refused += st.get(429) ?? 0;
    }
    console.log(`flood: ${ROUNDS} x ${FLOOD} hook calls, ${accepted} accepted, ${refused} answered 429`);
    console.log(`svc_action p95 without flood: ${p95(before).toFixed(1)} ms (n=${before.length})`);
    console.log(`svc_action p95 during flood:  ${p95(during).toFixed(1)} ms (n=${during.length})`);
    console.log(`ratio during / without: ${(p95(during) / p95(before)).toFixed(2)} (goal ≈ 1)`);
  } finally {
    await s.close();
  }
}

if (require.main === module) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
