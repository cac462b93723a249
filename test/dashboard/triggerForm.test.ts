/**
 * The Triggers page's rules without a browser (dashboard/src/triggerForm.ts): the cron preview agrees
 * with the service's own reading of an expression (the same times; refused exactly when the service
 * refuses it), an address becomes the topic an indexed address is logged as, the body sent for a new
 * trigger and for an edit, and where an API error's `details.field` is shown.
 */
import { expect } from "chai";
import { getAddress, zeroPadValue } from "ethers";
import type { Trigger } from "../../sdk/index";
import { nextRunMs, validateCron } from "../../relayer/triggers/schedule";
import {
  addressTopic,
  bodyOf,
  emptyForm,
  fieldOfError,
  formOf,
  nextRuns,
} from "../../dashboard/src/triggerForm";

const FROM = Date.UTC(2026, 0, 30, 23, 58, 30);

describe("dashboard: the trigger form's rules", () => {
  it("previews the same next three times as the service's scheduler, for every expression it accepts", () => {
    for (const cron of ["*/5 * * * *", "0 9 * * MON-FRI", "15 0 1 * *", "0 0 29 2 *", "30 23 * * 0,6"]) {
      const page = nextRuns(cron, 3, new Date(FROM));
      expect(page, cron).to.have.property("times");
      const service: number[] = [];
      let t = FROM;
      for (let i = 0; i < 3; i++) service.push((t = nextRunMs(cron, t)!));
      expect(
        (page as { times: Date[] }).times.map((d) => d.getTime()),
        cron,
      ).to.deep.equal(service);
    }
  });

  it("says what is wrong exactly when the service refuses the expression", () => {
    const cases = ["* * * * * *", "* * * *", "", "61 * * * *", "* * * * FOO", "*/5 * * * *", "  0  9 * * 1 "];
    for (const cron of cases) {
      let refused = false;
      try {
        validateCron(cron);
      } catch {
        refused = true;
      }
      const page = nextRuns(cron);
      expect("problem" in page, `${JSON.stringify(cron)}: ${JSON.stringify(page)}`).to.equal(refused);
    }
    expect(nextRuns("* * * * * *")).to.deep.equal({
      problem: "Five fields (minute hour day-of-month month day-of-week), UTC; this has 6.",
    });
  });

  it("turns an address into the topic an indexed address is logged as; anything else into nothing", () => {
    const a = getAddress("0x" + "ab".repeat(20));
    expect(addressTopic(a)).to.equal(zeroPadValue(a, 32).toLowerCase());
    expect(addressTopic(` ${a.toLowerCase()} `)).to.equal(zeroPadValue(a, 32).toLowerCase());
    for (const bad of ["", "0x1234", "ab".repeat(20), "0x" + "zz".repeat(20)])
      expect(addressTopic(bad)).to.equal(null);
  });

  it("builds the create body: the kind's own part, empty topics after the last one dropped, defaults typed in", () => {
    const f = {
      ...emptyForm(31337),
      name: "sweep",
      kind: "chain_event" as const,
      address: "0x" + "12".repeat(20),
      topics: ["", "0x" + "00".repeat(32), ""] as [string, string, string],
      cid: "QmX",
      pkpIds: ["0x" + "cd".repeat(32)],
      keyAddress: "0x" + "34".repeat(20),
      jsParams: '{"to": "me"}',
      fromBlock: "",
    };
    const { body, errors } = bodyOf(f);
    expect(errors).to.deep.equal({});
    expect(body).to.deep.equal({
      name: "sweep",
      kind: "chain_event",
      cid: "QmX",
      pkp_ids: ["0x" + "cd".repeat(32)],
      js_params: { to: "me" },
      run_as: { key_address: "0x" + "34".repeat(20) },
      chain_event: {
        chain_id: 31337,
        address: "0x" + "12".repeat(20),
        event: "Transfer(address indexed from, address indexed to, uint256 value)",
        topics: [null, "0x" + "00".repeat(32)],
      },
      limits: { runs_per_minute: 60, max_queued_runs: 100, concurrency: "serial" },
      retry: { max_attempts: 3, backoff_ms: 10_000 },
    });
  });

  it("finds what cannot be sent: js_params that are not a JSON object, numbers that are not whole", () => {
    const f = { ...emptyForm(1), jsParams: "{nope", runsPerMinute: "1.5", backoffMs: "ten" };
    const { errors } = bodyOf(f);
    expect(Object.keys(errors).sort()).to.deep.equal([
      "js_params",
      "limits.runs_per_minute",
      "retry.backoff_ms",
    ]);
    expect(errors.js_params).to.match(/^Not JSON: /);
    expect(bodyOf({ ...emptyForm(1), jsParams: "[1]" }).errors.js_params).to.equal(
      "Must be a JSON object, e.g. {}.",
    );
  });

  it("an edit sends no kind, and the webhook's HMAC only when it changed", () => {
    const t = {
      id: "trg_" + "0".repeat(32),
      name: "hook",
      kind: "webhook",
      enabled: true,
      paused: null,
      cid: "QmX",
      pkp_ids: [],
      js_params: {},
      run_as: { key_address: "0x" + "34".repeat(20) },
      webhook: {
        url: "https://x/hooks/v1/hk_1",
        hmac: { header: "x-sigil-signature", prefix: "sha256=", encoding: "hex" },
      },
      limits: { runs_per_minute: 60, max_queued_runs: 100, concurrency: "serial" },
      retry: { max_attempts: 3, backoff_ms: 10_000 },
      created_at: "",
      updated_at: "",
    } as unknown as Trigger;
    const same = bodyOf(formOf(t), t).body as Record<string, unknown>;
    expect(same).to.not.have.property("kind");
    expect(same).to.not.have.property("webhook");
    const off = bodyOf({ ...formOf(t), hmac: false }, t).body as Record<string, unknown>;
    expect(off.webhook).to.deep.equal({ hmac: null });
  });

  it("places an API error at the field its details name", () => {
    expect(fieldOfError({ field: "schedule.cron" })).to.equal("schedule.cron");
    expect(fieldOfError({ field: "pkp_ids[2]" })).to.equal("pkp_ids");
    expect(fieldOfError({ field: "chain_event.topics[1]" })).to.equal("chain_event.topics[1]");
    expect(fieldOfError({ field: "webhook.hmac" })).to.equal("webhook.hmac.header");
    expect(fieldOfError({})).to.equal(null);
    expect(fieldOfError(undefined)).to.equal(null);
  });
});
