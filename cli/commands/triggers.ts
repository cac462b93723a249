/**
 * `sigil triggers …`: schedules, inbound webhooks and chain events that run an action as one of the
 * account's usage keys (docs/triggers.md), and their run history. Account key only; every call goes
 * through the SDK's `sigil.triggers`.
 */
import type { Command } from "commander";
import type { NewTrigger, Trigger, TriggerRun, TriggerUpdate } from "sigil/sdk";
import { UsageError } from "../api";
import { contextOf } from "../context";
import { fields, table } from "../output";

interface SpecOptions {
  name?: string;
  cid?: string;
  pkp?: string;
  keyAddress?: string;
  params?: string;
  cron?: string;
  missed?: string;
  webhook?: boolean;
  hmac?: boolean;
  chainId?: string;
  address?: string;
  event?: string;
  topic0?: string;
  topics?: string;
  fromBlock?: string;
  runsPerMinute?: string;
  maxQueued?: string;
  parallel?: boolean;
  maxAttempts?: string;
  backoffMs?: string;
  disabled?: boolean;
}

function int(v: string | undefined, flag: string): number | undefined {
  if (v === undefined) return undefined;
  if (!/^[0-9]+$/.test(v)) throw new UsageError(`${flag} must be a whole number`);
  return Number(v);
}

/** A topic filter: "any" (null), a 32-byte topic, or an address (left-padded to 32 bytes, as indexed addresses are). */
function topic(v: string): string | null {
  const t = v.trim();
  if (t === "any" || t === "") return null;
  if (/^0x[0-9a-fA-F]{40}$/.test(t)) return "0x" + "0".repeat(24) + t.slice(2).toLowerCase();
  if (/^0x[0-9a-fA-F]{64}$/.test(t)) return t.toLowerCase();
  throw new UsageError(`--topics: "${t}" is not "any", an address or a 32-byte topic`);
}

/** The body fields the options give (absent options are left out: an update keeps them). */
function specBody(o: SpecOptions): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  if (o.name !== undefined) body.name = o.name;
  if (o.cid !== undefined) body.cid = o.cid;
  if (o.pkp !== undefined)
    body.pkp_ids = o.pkp
      .split(",")
      .map((p) => p.trim())
      .filter((p) => p !== "");
  if (o.keyAddress !== undefined) body.run_as = { key_address: o.keyAddress };
  if (o.params !== undefined) {
    try {
      body.js_params = JSON.parse(o.params);
    } catch {
      throw new UsageError("--params must be a JSON object");
    }
  }
  if (o.cron !== undefined) body.schedule = { cron: o.cron, ...(o.missed ? { missed: o.missed } : {}) };
  if (o.webhook || o.hmac) body.webhook = { hmac: o.hmac ? true : null };
  if (o.chainId !== undefined || o.address !== undefined || o.event !== undefined || o.topic0 !== undefined) {
    body.chain_event = {
      chain_id: int(o.chainId, "--chain-id"),
      address: o.address,
      ...(o.event !== undefined ? { event: o.event } : {}),
      ...(o.topic0 !== undefined ? { topic0: o.topic0 } : {}),
      ...(o.topics !== undefined ? { topics: o.topics.split(",").map(topic) } : {}),
      ...(o.fromBlock !== undefined ? { from_block: int(o.fromBlock, "--from-block") } : {}),
    };
  }
  const limits = {
    ...(o.runsPerMinute !== undefined ? { runs_per_minute: int(o.runsPerMinute, "--runs-per-minute") } : {}),
    ...(o.maxQueued !== undefined ? { max_queued_runs: int(o.maxQueued, "--max-queued") } : {}),
    ...(o.parallel ? { concurrency: "parallel" } : {}),
  };
  if (Object.keys(limits).length) body.limits = limits;
  const retry = {
    ...(o.maxAttempts !== undefined ? { max_attempts: int(o.maxAttempts, "--max-attempts") } : {}),
    ...(o.backoffMs !== undefined ? { backoff_ms: int(o.backoffMs, "--backoff-ms") } : {}),
  };
  if (Object.keys(retry).length) body.retry = retry;
  if (o.disabled) body.enabled = false;
  return body;
}

function kindOf(o: SpecOptions): "schedule" | "webhook" | "chain_event" {
  const kinds = [
    o.cron !== undefined ? "schedule" : null,
    o.webhook || o.hmac ? "webhook" : null,
    o.chainId !== undefined ? "chain_event" : null,
  ].filter((k) => k !== null);
  if (kinds.length !== 1)
    throw new UsageError("say what fires the trigger: one of --cron, --webhook (or --hmac), --chain-id");
  return kinds[0] as "schedule" | "webhook" | "chain_event";
}

function triggerFields(t: Trigger): string {
  const rows: [string, unknown][] = [
    ["id", t.id],
    ["name", t.name],
    ["kind", t.kind],
    ["enabled", t.enabled],
    ...(t.paused ? ([["paused", t.paused]] as [string, unknown][]) : []),
    ["action", t.cid],
    ["pkps", t.pkp_ids.join(", ")],
    ["runs as", t.run_as.key_address],
  ];
  if (t.schedule)
    rows.push(
      ["cron (UTC)", t.schedule.cron],
      ["missed", t.schedule.missed],
      ["next run", t.schedule.next_run_at],
    );
  if (t.webhook)
    rows.push(
      ["url", t.webhook.url],
      ["hmac", t.webhook.hmac ? `${t.webhook.hmac.header} (${t.webhook.hmac.encoding})` : "none"],
    );
  if (t.chain_event)
    rows.push(
      ["chain", t.chain_event.chain_id],
      ["contract", t.chain_event.address],
      ["event", t.chain_event.event ?? t.chain_event.topic0],
      ["from block", t.chain_event.from_block],
    );
  rows.push(
    [
      "limits",
      `${t.limits.runs_per_minute}/min, ${t.limits.max_queued_runs} queued, ${t.limits.concurrency}`,
    ],
    ["retry", `${t.retry.max_attempts} attempts, backoff ${t.retry.backoff_ms} ms`],
  );
  return fields(rows);
}

function secretLines(secret: unknown): string[] {
  return secret
    ? ["", "HMAC secret (shown this once; sign deliveries with it):", "", `  ${String(secret)}`]
    : [];
}

function addSpecOptions(c: Command): Command {
  return c
    .option("--name <name>", "a name")
    .option("--cid <cid>", "the action to run")
    .option("--pkp <ids>", "comma-separated PKP ids or addresses the action uses")
    .option("--key-address <address>", "the usage key the runs act as (its address)")
    .option("--params <json>", "default js_params (a JSON object)")
    .option("--cron <expr>", 'schedule: five fields, UTC ("*/5 * * * *")')
    .option("--missed <mode>", "schedule: skip (default) or run_once after downtime")
    .option("--webhook", "webhook: a public URL fires it")
    .option("--hmac", "webhook: deliveries must carry an HMAC-SHA256 of the body (secret printed once)")
    .option("--chain-id <id>", "chain event: a chain of the service's configuration")
    .option("--address <address>", "chain event: the emitting contract")
    .option(
      "--event <signature>",
      'chain event: e.g. "Transfer(address indexed from, address indexed to, uint256 value)"',
    )
    .option("--topic0 <topic>", "chain event: topic0, instead of --event")
    .option(
      "--topics <list>",
      "chain event: up to three comma-separated filters (any, an address or a topic)",
    )
    .option("--from-block <n>", "chain event: first block to look at (default: the head now)")
    .option("--runs-per-minute <n>", "limit (default 60)")
    .option("--max-queued <n>", "limit of runs waiting (default 100)")
    .option("--parallel", "runs may overlap (default: one at a time)")
    .option("--max-attempts <n>", "attempts in all for transient failures (default 3)")
    .option("--backoff-ms <n>", "delay before the second attempt, doubled each time (default 10000)")
    .option("--disabled", "create it disabled");
}

export function registerTriggers(program: Command): void {
  const triggers = program
    .command("triggers")
    .description("schedules, webhooks and chain events that run an action (account key; docs/triggers.md)");

  addSpecOptions(triggers.command("create").description("create a trigger")).action(
    async (o: SpecOptions, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      for (const [flag, v] of [
        ["--name", o.name],
        ["--cid", o.cid],
        ["--key-address", o.keyAddress],
      ] as const)
        if (v === undefined) throw new UsageError(`create needs ${flag}`);
      const body = { kind: kindOf(o), ...specBody(o) } as unknown as NewTrigger;
      const r = await client.sigil().triggers.create(body);
      out.result(r, () =>
        [triggerFields(r), ...secretLines((r as { webhook_secret?: string }).webhook_secret)].join("\n"),
      );
    },
  );

  triggers
    .command("list")
    .description("the account's triggers")
    .action(async (_o: unknown, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const items: Trigger[] = [];
      for await (const t of client.sigil().triggers.list()) items.push(t);
      out.result({ items }, () =>
        table(
          ["id", "name", "kind", "enabled"],
          items.map((t) => [
            t.id,
            t.name,
            t.kind,
            t.paused ? `paused (${t.paused})` : t.enabled ? "yes" : "no",
          ]),
        ),
      );
    });

  triggers
    .command("get <id>")
    .description("one trigger")
    .action(async (id: string, _o: unknown, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const r = await client.sigil().triggers.get(id);
      out.result(r, () => triggerFields(r));
    });

  addSpecOptions(
    triggers.command("update <id>").description("change the fields given (not the kind)"),
  ).action(async (id: string, o: SpecOptions, cmd: Command) => {
    const { client, out } = contextOf(cmd);
    const body = specBody(o);
    if (Object.keys(body).length === 0) throw new UsageError("nothing to change");
    const r = await client.sigil().triggers.update(id, body as unknown as TriggerUpdate);
    out.result(r, () =>
      [triggerFields(r), ...secretLines((r as { webhook_secret?: string }).webhook_secret)].join("\n"),
    );
  });

  for (const [name, enable] of [
    ["enable", true],
    ["disable", false],
  ] as const)
    triggers
      .command(`${name} <id>`)
      .description(enable ? "enable a trigger" : "disable a trigger (it fires nothing)")
      .action(async (id: string, _o: unknown, cmd: Command) => {
        const { client, out } = contextOf(cmd);
        const r = enable
          ? await client.sigil().triggers.enable(id)
          : await client.sigil().triggers.disable(id);
        out.result(r, () => triggerFields(r));
      });

  triggers
    .command("delete <id>")
    .description("delete a trigger and its run history")
    .action(async (id: string, _o: unknown, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const r = await client.sigil().triggers.remove(id);
      out.result(r, () => `deleted ${id}`);
    });

  triggers
    .command("fire <id>")
    .description("fire a trigger now (a manual firing; the run is queued)")
    .action(async (id: string, _o: unknown, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const r = await client.sigil().triggers.fire(id);
      out.result(r, () => `queued run ${r.run_id} (firing ${r.firing_id})`);
    });

  triggers
    .command("runs <id>")
    .description("a trigger's runs, newest first")
    .option("--status <status>", "queued, running, succeeded, failed or skipped")
    .option("--limit <n>", "most runs shown", "20")
    .action(async (id: string, o: { status?: string; limit: string }, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const limit = int(o.limit, "--limit");
      if (!limit) throw new UsageError("--limit must be a positive integer");
      const items: TriggerRun[] = [];
      for await (const r of client.sigil().triggers.runs(id, o.status as TriggerRun["status"] | undefined)) {
        items.push(r);
        if (items.length >= limit) break;
      }
      out.result({ items }, () =>
        table(
          ["run", "firing", "status", "attempt", "cents", "error"],
          items.map((r) => [
            r.id,
            r.firing_id,
            r.skip_reason ? `${r.status} (${r.skip_reason})` : r.status,
            String(r.attempt),
            String(r.charged_cents),
            r.error ? r.error.code : "",
          ]),
        ),
      );
    });
}
