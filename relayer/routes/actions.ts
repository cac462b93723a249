/**
 * Actions (content-addressed code) and their execution (design §6, docs/background.md).
 *
 * svc_action: resolve the code (inline → its CID is computed; by CID → content store, then the IPFS
 * gateways, always verified against the CID), authorize from the cache (docs/background.md §4.3: some group this key may
 * execute in lists the CID and, if given, the PKP), billing gate, run in the executor, whose every key
 * operation calls back `authorizePkp`, which re-checks (key, CID, PKP) against the *current* cache, so a
 * revocation processed mid-run is honoured by the next key operation.
 */
import { computeCid } from "../../enclave";
import { authOf, type AuthContext } from "../auth";
import { canPin } from "../policy";
import { pinContent } from "../pinning";
import { loadCode } from "../execution/loadCode";
import { operatorTimeLimitMs, pkpOfAddress, runAction } from "../execution/runAction";
import { type RelayerContext } from "../context";
import { ApiError } from "../errors";
import { isPkpAddress, parseCidField, parsePage } from "../http/validate";
import { endpoint, type BodyOf } from "./endpoint";
import * as s from "./schemas";

/** Inline JavaScript, as an action's `code` field. */
const code = (description?: string): s.Typed<string> => ({
  ...s.bytes(s.BODY_LIMITS.inlineCodeBytes, description),
  "x-sigil-non-blank": true,
  "x-sigil-too-large": "code_too_large",
});
const codeBody = s.obj({ code: code() }, ["code"]);

const postActions = endpoint<RelayerContext>("POST", "/actions", {
  caller: "key",
  scopes: ["group:manageActions", "execute"],
  summary: "Pin code in the content store (counted against the account's pin quota, billed once per CID)",
  status: 201,
  body: codeBody,
  answer: s.out({
    cid: s.str(),
    bytes: s.int(),
    charged_cents: s.int(),
    used_bytes: s.int(),
    quota_bytes: s.int(),
  }),
  errors: ["not_authorized_to_pin", "pin_quota_exceeded", "insufficient_credits", "spend_cap_reached"],
  async handle(ctx, _req, res, { code }: BodyOf<typeof codeBody>) {
    const bytes = new TextEncoder().encode(code);
    const { cid, charged_cents } = await pinContent(ctx, authOf(res), bytes);
    const { used_bytes, quota_bytes } = await ctx.pins.usage(authOf(res).principal.accountId);
    return { status: 201, body: { cid, bytes: bytes.length, charged_cents, used_bytes, quota_bytes } };
  },
});

const postActionsCid = endpoint<RelayerContext>("POST", "/actions/cid", {
  caller: "key",
  summary: "Compute the CID of code without storing it",
  body: codeBody,
  answer: s.out({ cid: s.str() }),
  errors: [],
  async handle(_ctx, _req, _res, { code }: BodyOf<typeof codeBody>) {
    return { body: { cid: await computeCid(new TextEncoder().encode(code)) } };
  },
});

// Registered before /actions/:cid, which would otherwise read "pinned" as a CID.
const getActionsPinned = endpoint<RelayerContext>("GET", "/actions/pinned", {
  caller: "key",
  scopes: ["group:manageActions", "execute"],
  summary: "The account's pinned actions, newest first (account key, or a usage key that may pin)",
  params: s.pagingParams,
  answer: s.page(
    s.out({
      cid: s.str(),
      bytes: s.int(),
      pinned_at: s.str("When the account first pinned this CID (ISO 8601, UTC)"),
    }),
  ),
  errors: ["invalid_pagination", "not_authorized_to_pin"],
  async handle(ctx, req, res) {
    const auth = authOf(res);
    // The same rule as pinning: a key that may not pin has no use for the account's stored code.
    if (!canPin(auth))
      throw new ApiError(
        "not_authorized_to_pin",
        "Only the account key, or a usage key that may manage actions or execute in some group, can list the account's pinned actions.",
      );
    const page = parsePage(req.query as Record<string, unknown>, ctx.cfg.limits.maxPageSize);
    const { items, total } = await ctx.pins.list(auth.principal.accountId, page.pageNumber, page.pageSize);
    return { body: { items, page_number: page.pageNumber, page_size: page.pageSize, total } };
  },
});

const getActionsCid = endpoint<RelayerContext>("GET", "/actions/:cid", {
  caller: "key",
  summary: "The code of a CID (a CID fetched from IPFS is pinned for the account)",
  params: [s.idParam("cid", s.str())],
  answer: s.out({ cid: s.str(), code: s.str() }),
  errors: [
    "invalid_cid",
    "action_not_found",
    "action_fetch_failed",
    "code_too_large",
    "not_authorized_to_pin",
    "pin_quota_exceeded",
    "insufficient_credits",
    "spend_cap_reached",
  ],
  async handle(ctx, req, res) {
    const cid = parseCidField(req.params.cid, "cid");
    return { body: { cid, code: await loadCode(ctx, cid, authOf(res)) } };
  },
});

/**
 * `timeout_ms`: a caller may ask for a shorter time limit than the operator's (a runaway run then
 * costs at most ceil(timeout_ms / 1000) seconds). Absent or null: the operator's limit. A check of
 * its own: the limit is the configuration's.
 */
function readTimeoutMs(v: unknown, ctx: RelayerContext): number | undefined {
  if (v === undefined || v === null) return undefined;
  const operatorLimitMs = operatorTimeLimitMs(ctx);
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1 || v > operatorLimitMs) {
    throw new ApiError(
      "invalid_request",
      `\`timeout_ms\` must be an integer number of milliseconds from 1 to ${operatorLimitMs} (this service's limit).`,
      { details: { field: "timeout_ms", min: 1, max: operatorLimitMs } },
    );
  }
  return v;
}

/** `js_params`: any JSON, at most BODY_LIMITS.jsParamsBytes once serialized. */
function readJsParams(v: unknown): unknown {
  const max = s.BODY_LIMITS.jsParamsBytes;
  if (v !== undefined && Buffer.byteLength(JSON.stringify(v) ?? "", "utf8") > max)
    throw new ApiError("js_params_too_large", `\`js_params\` is larger than ${max} bytes.`, {
      details: { field: "js_params", max },
    });
  return v;
}

const svcActionBody = s.exactlyOne(
  ["code", "cid"],
  s.obj({
    code: code("Inline JavaScript"),
    cid: s.cid(),
    pkp_id: s.pkpRef,
    js_params: {},
    timeout_ms: {
      ...s.int(
        "Time limit of this run in ms, at most the service's (30000 unless configured; a refusal names it in details.max); a run stopped at it is charged ceil(timeout_ms / 1000) seconds",
      ),
      minimum: 1,
    } as s.Typed<number>,
  }),
);

const postSvcAction = endpoint<RelayerContext>("POST", "/svc_action", {
  caller: "key",
  scopes: ["execute"],
  summary: "Execute an action (some group the key may execute in lists the CID and the PKP)",
  body: svcActionBody,
  checks: { js_params: readJsParams, timeout_ms: readTimeoutMs },
  answer: s.ref("ExecutionResult"),
  errors: [
    "pkp_not_found",
    "js_params_too_large",
    "not_authorized_to_execute",
    "account_chain_secured",
    "action_not_found",
    "action_fetch_failed",
    "not_authorized_to_pin",
    "pin_quota_exceeded",
    "too_many_concurrent_executions",
    "executor_busy",
    "insufficient_credits",
    "spend_cap_reached",
  ],
  async handle(ctx, _req, res, body: BodyOf<typeof svcActionBody>) {
    const auth = authOf(res);
    const { code: inline, cid: givenCid, js_params: jsParams, timeout_ms: timeoutMs } = body;
    const pkpRef = body.pkp_id;
    const pkpId = pkpRef !== undefined && isPkpAddress(pkpRef) ? resolveAddress(ctx, auth, pkpRef) : pkpRef;
    const cid = givenCid ?? (await computeCid(new TextEncoder().encode(inline!)));
    return {
      body: await runAction(ctx, auth, {
        cid,
        ...(inline !== undefined ? { code: inline } : {}),
        ...(pkpId !== undefined ? { pkpId } : {}),
        jsParams,
        ...(timeoutMs !== undefined ? { timeoutMs } : {}),
        requestId: String(res.locals.requestId),
        correlationId: String(res.locals.correlationId),
      }),
    };
  },
});

export const ACTION_ENDPOINTS = [postActions, postActionsCid, getActionsPinned, getActionsCid, postSvcAction];

function resolveAddress(ctx: RelayerContext, auth: AuthContext, address: string): string {
  const id = pkpOfAddress(ctx, auth.account, address);
  if (id !== null) return id;
  throw new ApiError("pkp_not_found", `No PKP of this account has address ${address}.`, {
    details: { address },
  });
}
