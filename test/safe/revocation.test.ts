/**
 * Revocation by a Safe while a client keeps executing with the key being revoked (issue 8; reference gap 5, docs/background.md:
 * the reference keeps honouring a revoked key for up to an hour). Clients hammer /svc_action with the key;
 * the Safe removes it on chain (path B: the relayer takes no part in the write). Invariant: no request sent
 * after the relayer has processed the revoking block succeeds. The lag (revoking block mined → first
 * refusal) is measured over several rounds at the relayer's default poll interval and printed.
 */
import { expect } from "chai";
import { computeCid } from "../../enclave";
import {
  encodeRegistryCall,
  executeProposal,
  generateUsageKey,
  propose,
  signProposal,
} from "../../scripts/safe/lib";
import { createSafeOwner, safeAccountWithGroup, type SafeOwner } from "../helpers/safeOwner";
import { sigilWorld, type SigilWorld } from "./support";

const CODE = "async function main() { return 'alive'; }";
const ROUNDS = 5;
const CLIENTS = 2;

interface Sample {
  sentAt: number;
  doneAt: number;
  status: number;
  code?: string;
}

describe("revocation by a Safe while a client keeps executing", function () {
  this.timeout(180_000);
  let w: SigilWorld;
  let safe: SafeOwner;
  let pkpId: string;
  const lags: number[] = [];
  const rounds: { samples: Sample[]; minedBy: number; processedAt: number }[] = [];

  before(async function () {
    w = await sigilWorld({ pollIntervalMs: 250 }); // the relayer's default interval: the lag users get
    safe = await createSafeOwner(w.ctx, w.registry);
    const cid = await computeCid(new TextEncoder().encode(CODE));
    ({ pkpId } = await safeAccountWithGroup(safe, w.registry, w.chain.provider, "revocation", [cid]));

    for (let round = 0; round < ROUNDS; round++) {
      const key = generateUsageKey();
      const added = await safe.tx({
        op: "add-key",
        key: key.address,
        keyHash: key.keyHash,
        name: `k${round}`,
        scopes: { execute_in_groups: [1] },
      });
      await w.api.waitForBlock(added.blockNumber);

      // The revocation is fully signed up front so that only its execution overlaps the clients.
      let removal = await propose(w.ctx, {
        safe: safe.address,
        to: w.registry,
        data: encodeRegistryCall({ op: "remove-key", key: key.address }).data,
      });
      for (const k of safe.signerKeys) removal = await signProposal(w.ctx, removal, k);

      const samples: Sample[] = [];
      let stop = false;
      const client = async () => {
        while (!stop) {
          const sentAt = performance.now();
          const r = await w.api.post("/svc_action", key.usageApiKey, { code: CODE, pkp_id: pkpId });
          samples.push({ sentAt, doneAt: performance.now(), status: r.status, code: r.body?.error?.code });
        }
      };
      const clients = Array.from({ length: CLIENTS }, client);
      await new Promise((r) => setTimeout(r, 300)); // let the clients run with the live key first
      const { blockNumber } = await executeProposal(w.ctx, removal, safe.payerKey);
      const minedBy = performance.now(); // the receipt is back: the block is mined no later than this
      await w.api.waitForBlock(blockNumber);
      const processedAt = performance.now();
      await new Promise((r) => setTimeout(r, 300)); // keep hammering after the relayer caught up
      stop = true;
      await Promise.all(clients);
      rounds.push({ samples, minedBy, processedAt });
      const firstRefusal = samples.filter((s) => s.status === 401).sort((a, b) => a.doneAt - b.doneAt)[0];
      if (firstRefusal) lags.push(Math.max(0, firstRefusal.doneAt - minedBy));
    }
    const sorted = [...lags].sort((a, b) => a - b);
    // The measurement the issue asks for (printed, not asserted: speed claims belong in benchmarks).
    console.log(
      `      revocation lag over ${lags.length} rounds, poll interval 250 ms (ms from the revoking block's receipt to the first refusal): ` +
        `min ${sorted[0]?.toFixed(0)}, median ${sorted[Math.floor(sorted.length / 2)]?.toFixed(0)}, max ${sorted[sorted.length - 1]?.toFixed(0)}`,
    );
  });
  after(async function () {
    await w?.stopAll();
  });

  it("the key worked before the revocation in every round", async function () {
    expect(rounds.map((r) => r.samples.some((s) => s.status === 200))).to.deep.equal(
      Array(ROUNDS).fill(true),
    );
  });

  it("no request sent after the relayer processed the revoking block succeeded", async function () {
    const late = rounds.flatMap((r) => r.samples.filter((s) => s.sentAt >= r.processedAt));
    expect(late.length).to.be.greaterThan(0);
    expect(late.filter((s) => s.status !== 401)).to.deep.equal([]);
  });

  it("refusals name the cause: the key is unknown (removed)", async function () {
    const codes = new Set(
      rounds.flatMap((r) => r.samples.filter((s) => s.status !== 200).map((s) => s.code)),
    );
    expect([...codes]).to.deep.equal(["unknown_api_key"]);
  });

  it("once refused, a key is never accepted again", async function () {
    for (const r of rounds) {
      const ordered = [...r.samples].sort((a, b) => a.sentAt - b.sentAt);
      const firstRefusalSent = ordered.find((s) => s.status === 401)!.doneAt;
      expect(ordered.filter((s) => s.sentAt > firstRefusalSent && s.status === 200)).to.deep.equal([]);
    }
  });

  it("every round measured a lag", async function () {
    expect(lags.length).to.equal(ROUNDS);
  });
});
