/**
 * /core/v1/triggers: the account's triggers and their run history (docs/triggers.md). The account key
 * manages them, and so does the owner of a ChainSecured account through its wallet session (caller
 * "owner"): a trigger is a record of this service, never a registry write, and it runs only as a usage
 * key the chain already knows. A usage key gets 403 owner_only (a trigger spends the account's credit
 * as one of its keys).
 */
import type { Request } from "express";
import { authOf } from "../auth";
import { type RelayerContext } from "../context";
import { ApiError } from "../errors";
import { parsePage } from "../http/validate";
import { pkpOfAddress } from "../execution/runAction";
import type { RunStatus } from "../triggers/store";
import { readTriggerBody } from "../triggers/validate";
import { runView, triggerView } from "../triggers/views";
import { endpoint, type BodyOf } from "./endpoint";
import * as s from "./schemas";

const nstr = s.nullable(s.str());
const triggerSchema = s.out(
  {
    id: { type: "string", pattern: "^trg_[0-9a-f]{32}$" },
    name: s.str(),
    kind: { type: "string", enum: ["schedule", "webhook", "chain_event"] },
    enabled: s.bool(),
    paused: s.nullable({ type: "string", enum: ["insufficient_credits"] }),
    cid: s.str(),
    pkp_ids: s.arr(s.str()),
    js_params: { type: "object" },
    run_as: s.out({ key_address: s.address }),
    schedule: s.out({
      cron: s.str("Five fields, UTC"),
      missed: { type: "string", enum: ["skip", "run_once"] },
      next_run_at: nstr,
    }),
    webhook: s.out({
      url: s.str("The public URL to POST deliveries to"),
      hmac: s.nullable(
        s.out({ header: s.str(), prefix: s.str(), encoding: { type: "string", enum: ["hex", "base64"] } }),
      ),
    }),
    chain_event: s.out({
      chain_id: s.int(),
      address: s.str(),
      event: nstr,
      topic0: s.str(),
      topics: s.arr(nstr),
      from_block: s.int(),
    }),
    limits: s.out({
      runs_per_minute: s.int(),
      max_queued_runs: s.int(),
      concurrency: { type: "string", enum: ["serial", "parallel"] },
    }),
    retry: s.out({ max_attempts: s.int(), backoff_ms: s.int() }),
    created_at: s.str(),
    updated_at: s.str(),
    webhook_secret: {
      type: "string",
      description: "The HMAC secret, answered once (create, or the update that adds an HMAC)",
    },
  },
  ["schedule", "webhook", "chain_event", "webhook_secret"],
);
const RUN_STATUSES: readonly RunStatus[] = ["queued", "running", "succeeded", "failed", "skipped"];
const runSchema = s.out({
  id: s.str(),
  trigger_id: s.str(),
  firing_id: s.str(),
  status: { type: "string", enum: [...RUN_STATUSES] },
  skip_reason: nstr,
  attempt: s.int(),
  input_summary: s.str(),
  response: {},
  error: s.nullable(s.out({ code: s.str(), message: nstr })),
  logs: nstr,
  charged_cents: s.int(),
  fired_at: nstr,
  created_at: nstr,
  started_at: nstr,
  finished_at: nstr,
  next_attempt_at: nstr,
  instance: nstr,
});
const triggerBody = s.obj({
  name: s.str(),
  kind: { type: "string", enum: ["schedule", "webhook", "chain_event"] },
  enabled: s.bool(),
  cid: s.str(),
  pkp_ids: s.arr(s.str()),
  js_params: { type: "object" },
  run_as: s.obj({ key_address: s.address }, ["key_address"]),
  schedule: s.obj({ cron: s.str(), missed: { type: "string", enum: ["skip", "run_once"] } }, ["cron"]),
  webhook: s.obj({ hmac: {} }),
  chain_event: s.obj(
    {
      chain_id: s.int(),
      address: s.str(),
      event: s.str(),
      topic0: s.str(),
      topics: s.arr(nstr),
      from_block: s.int(),
    },
    ["chain_id", "address"],
  ),
  limits: s.obj({
    runs_per_minute: s.int(),
    max_queued_runs: s.int(),
    concurrency: { type: "string", enum: ["serial", "parallel"] },
  }),
  retry: s.obj({ max_attempts: s.int(), backoff_ms: s.int() }),
});
const triggerId = s.idParam("id", { type: "string" });
const runId = s.idParam("run_id", { type: "string" });
const TRIGGER_BODY_ERRORS = [
  ...s.BODY_ERRORS,
  "invalid_request",
  "unknown_field",
  "invalid_trigger",
  "invalid_cid",
  "invalid_pkp_id",
  "pkp_not_found",
  "invalid_address",
  "usage_key_not_found",
  "js_params_too_large",
  "too_many_entries",
  "chain_unavailable",
  "invalid_chain_event",
  "chain_not_configured",
  "backfill_too_deep",
  "owner_only",
] as const;

/** Where the service is reached: its configured public URL, else the one this request came to. */
/** Where a webhook trigger's URL points: the hooks' own listener when there is one, else this service. */
function originOf(ctx: RelayerContext, req: Request): string {
  return (
    ctx.triggers.hookOrigin ??
    ctx.cfg.publicOrigins?.[0] ??
    `${req.protocol}://${req.get("host") ?? "localhost"}`
  );
}

const env = (ctx: RelayerContext, account: Parameters<typeof pkpOfAddress>[1]) => ({
  chains: ctx.cfg.chains,
  jsParamsBytes: s.BODY_LIMITS.jsParamsBytes,
  pkpOfAddress: (a: string) => pkpOfAddress(ctx, account, a),
});

const postTriggers = endpoint<RelayerContext>("POST", "/triggers", {
  caller: "owner",
  summary: "Create a trigger: a schedule, an inbound webhook or a chain event runs an action as a usage key",
  status: 201,
  body: triggerBody,
  answer: triggerSchema,
  errors: [...TRIGGER_BODY_ERRORS, "trigger_limit_reached"],
  // The HMAC secret: kept sealed under the caller's key for an Idempotency-Key replay.
  secretFields: { names: ["webhook_secret"], mode: "encrypt" },
  async handle(ctx, req, res, body: BodyOf<typeof triggerBody>) {
    const auth = authOf(res);
    const input = readTriggerBody(body, auth, env(ctx, auth.account), true);
    const { trigger, secret } = await ctx.triggers.create(auth, input);
    return {
      status: 201,
      body: {
        ...triggerView(trigger, originOf(ctx, req), Date.now()),
        ...(secret ? { webhook_secret: secret } : {}),
      },
    };
  },
});

const getTriggers = endpoint<RelayerContext>("GET", "/triggers", {
  caller: "owner",
  summary: "The account's triggers, oldest first",
  params: s.pagingParams,
  answer: s.page(triggerSchema),
  errors: ["owner_only", "invalid_pagination"],
  async handle(ctx, req, res) {
    const accountId = authOf(res).principal.accountId;
    const page = parsePage(req.query as Record<string, unknown>, ctx.cfg.limits.maxPageSize);
    const items = await ctx.triggers.store.list(accountId, page.pageSize, page.pageNumber * page.pageSize);
    const origin = originOf(ctx, req);
    return {
      body: {
        items: items.map((t) => triggerView(t, origin, Date.now())),
        page_number: page.pageNumber,
        page_size: page.pageSize,
        total: await ctx.triggers.store.count(accountId),
      },
    };
  },
});

const getTrigger = endpoint<RelayerContext>("GET", "/triggers/:id", {
  caller: "owner",
  summary: "A trigger",
  params: [triggerId],
  answer: triggerSchema,
  errors: ["owner_only", "trigger_not_found"],
  async handle(ctx, req, res) {
    const t = await ctx.triggers.get(authOf(res), String(req.params.id));
    return { body: triggerView(t, originOf(ctx, req), Date.now()) };
  },
});

const postTrigger = endpoint<RelayerContext>("POST", "/triggers/:id", {
  caller: "owner",
  summary: "Update a trigger (any field but its kind; absent fields keep their value)",
  params: [triggerId],
  body: triggerBody,
  answer: triggerSchema,
  errors: [...TRIGGER_BODY_ERRORS, "trigger_not_found"],
  secretFields: { names: ["webhook_secret"], mode: "encrypt" },
  async handle(ctx, req, res, body: BodyOf<typeof triggerBody>) {
    const auth = authOf(res);
    const input = readTriggerBody(body, auth, env(ctx, auth.account), false);
    const { trigger, secret } = await ctx.triggers.update(auth, String(req.params.id), input);
    return {
      body: {
        ...triggerView(trigger, originOf(ctx, req), Date.now()),
        ...(secret ? { webhook_secret: secret } : {}),
      },
    };
  },
});

const toggle = (enabled: boolean) =>
  endpoint<RelayerContext>("POST", `/triggers/:id/${enabled ? "enable" : "disable"}`, {
    caller: "owner",
    summary: enabled ? "Enable a trigger" : "Disable a trigger (it fires nothing; its hook answers 404)",
    params: [triggerId],
    answer: triggerSchema,
    body: s.obj({}),
    errors: [...s.BODY_ERRORS, "invalid_request", "unknown_field", "owner_only", "trigger_not_found"],
    async handle(ctx, req, res) {
      const t = await ctx.triggers.setEnabled(authOf(res), String(req.params.id), enabled);
      return { body: triggerView(t, originOf(ctx, req), Date.now()) };
    },
  });

const deleteTrigger = endpoint<RelayerContext>("DELETE", "/triggers/:id", {
  caller: "owner",
  summary: "Delete a trigger and its run history",
  params: [triggerId],
  answer: s.out({ deleted: s.bool() }),
  errors: ["owner_only", "trigger_not_found"],
  async handle(ctx, req, res) {
    await ctx.triggers.remove(authOf(res), String(req.params.id));
    return { body: { deleted: true } };
  },
});

const postFire = endpoint<RelayerContext>("POST", "/triggers/:id/fire", {
  caller: "owner",
  summary: "Fire a trigger now, by hand (firing id manual:<uuid>); the run is queued",
  params: [triggerId],
  status: 202,
  body: s.obj({}),
  answer: s.out({ run_id: s.str(), firing_id: s.str() }),
  errors: [
    ...s.BODY_ERRORS,
    "invalid_request",
    "unknown_field",
    "owner_only",
    "trigger_not_found",
    "trigger_queue_full",
    "insufficient_credits",
  ],
  async handle(ctx, req, res) {
    const { runId, firingId } = await ctx.triggers.fireManual(authOf(res), String(req.params.id));
    return { status: 202, body: { run_id: runId, firing_id: firingId } };
  },
});

const getRuns = endpoint<RelayerContext>("GET", "/triggers/:id/runs", {
  caller: "owner",
  summary: "A trigger's runs, newest first (filter with ?status=)",
  params: [
    ...s.pagingParams,
    { name: "status", in: "query", schema: { type: "string", enum: [...RUN_STATUSES] } },
    triggerId,
  ],
  answer: s.page(runSchema),
  errors: ["owner_only", "trigger_not_found", "invalid_pagination", "invalid_request"],
  async handle(ctx, req, res) {
    const t = await ctx.triggers.get(authOf(res), String(req.params.id));
    const query = req.query as Record<string, unknown>;
    const page = parsePage(query, ctx.cfg.limits.maxPageSize);
    const status = query.status;
    if (status !== undefined && !RUN_STATUSES.includes(status as RunStatus))
      throw new ApiError("invalid_request", `\`status\` must be one of ${RUN_STATUSES.join(", ")}.`, {
        details: { field: "status" },
      });
    const { items, total } = await ctx.triggers.store.runs(t.id, {
      ...(status ? { status: status as RunStatus } : {}),
      limit: page.pageSize,
      offset: page.pageNumber * page.pageSize,
    });
    return {
      body: { items: items.map(runView), page_number: page.pageNumber, page_size: page.pageSize, total },
    };
  },
});

const getRun = endpoint<RelayerContext>("GET", "/triggers/:id/runs/:run_id", {
  caller: "owner",
  summary: "One run of a trigger",
  params: [triggerId, runId],
  answer: runSchema,
  errors: ["owner_only", "trigger_not_found", "trigger_run_not_found"],
  async handle(ctx, req, res) {
    const t = await ctx.triggers.get(authOf(res), String(req.params.id));
    const r = await ctx.triggers.store.run(t.id, String(req.params.run_id));
    if (!r) throw new ApiError("trigger_run_not_found", "The trigger has no run with this id.");
    return { body: runView(r) };
  },
});

export const TRIGGER_ENDPOINTS = [
  postTriggers,
  getTriggers,
  getTrigger,
  postTrigger,
  toggle(true),
  toggle(false),
  deleteTrigger,
  postFire,
  getRuns,
  getRun,
];
