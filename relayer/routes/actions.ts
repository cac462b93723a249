/**
 * Actions (content-addressed code) and their execution (design §6, docs/background.md).
 *
 * svc_action: resolve the code (inline → its CID is computed; by CID → content store, then the IPFS
 * gateways, always verified against the CID), authorize from the cache (docs/background.md §4.3: some group this key may
 * execute in lists the CID and, if given, the PKP), billing gate, run in the executor, whose every key
 * operation calls back `authorizePkp`, which re-checks (key, CID, PKP) against the *current* cache, so a
 * revocation processed mid-run is honoured by the next key operation.
 */
import { computeCid, isEnclaveError } from "../../enclave";
import { DEFAULT_LIMITS, ExecutorBusyError, ExecutorClosedError } from "../../enclave";
import { authOf, type AuthContext } from "../auth";
import { pkpAddressIndexOf } from "../permissions/pkpAddressIndex";
import { canPin, executionRefusal } from "../policy";
import { pinContent } from "../pinning";
import { policiesForRun } from "../runPolicies";
import { cidHash } from "../permissions/projection";
import { type RelayerContext } from "../context";
import { ApiError } from "../errors";
import { isPkpAddress, parseCidField, parsePage } from "../http/validate";
import { recordExecution } from "../audit/record";
import { endpoint, type BodyOf } from "./endpoint";
import * as s from "./schemas";

/** Inline JavaScript, as an action's `code` field. */
const code = (description?: string): s.Typed<string> => ({
  ...s.bytes(s.BODY_LIMITS.inlineCodeBytes, description),
  "x-sigil-non-blank": true,
  "x-sigil-too-large": "code_too_large",
});
const codeBody = s.obj({ code: code() }, ["code"]);

/**
 * Verified code by CID, one memory per relayer. Content is immutable, so once verified it never needs
 * re-reading or re-hashing.
 */
class VerifiedCode {
  private readonly byCid = new Map<string, string>();
  private bytes = 0;
  get(cid: string): string | undefined {
    return this.byCid.get(cid);
  }
  remember(cid: string, code: string): void {
    if (this.bytes > 64 * 1024 * 1024) {
      this.byCid.clear();
      this.bytes = 0;
    }
    this.byCid.set(cid, code);
    this.bytes += code.length;
  }
}
const verifiedCode = new WeakMap<RelayerContext, VerifiedCode>();

/** Pins `bytes` for the caller's account (relayer/pinning.ts: permission, billing, quota, store, charge). */
const pin = (ctx: RelayerContext, auth: AuthContext, bytes: Uint8Array) => pinContent(ctx, auth, bytes);

/**
 * Code of a CID: memory, then the content store, then the gateways (always verified against the CID).
 * Code fetched from the gateways is pinned for the caller's account (pin() above: same permission,
 * quota and price as POST /actions), so fetching by CID cannot fill the disk for free.
 */
async function loadCode(ctx: RelayerContext, cid: string, auth: AuthContext): Promise<string> {
  let verified = verifiedCode.get(ctx);
  if (!verified) verifiedCode.set(ctx, (verified = new VerifiedCode()));
  const hit = verified.get(cid);
  if (hit !== undefined) return hit;
  const code = await loadVerified(ctx, cid, auth);
  verified.remember(cid, code);
  return code;
}

async function loadVerified(ctx: RelayerContext, cid: string, auth: AuthContext): Promise<string> {
  let bytes: Uint8Array | null = null;
  try {
    bytes = await ctx.contentStore.get(cid);
  } catch (err) {
    if (!isEnclaveError(err)) throw err;
    ctx.logger.warn({ cid, code: err.code }, "content store entry does not match its CID");
  }
  if (!bytes && ctx.gateway) {
    // Before any gateway traffic: a caller who may not pin cannot make the relayer fetch and store.
    if (!canPin(auth)) {
      throw new ApiError(
        "not_authorized_to_pin",
        `${cid} is not stored here; fetching it from IPFS pins it for the account, which this key may not do.`,
        { details: { cid } },
      );
    }
    try {
      bytes = await ctx.gateway.fetch(cid);
    } catch (err) {
      if (isEnclaveError(err) && err.code === "content_not_found") bytes = null;
      else if (isEnclaveError(err)) {
        throw new ApiError(
          "action_fetch_failed",
          `The IPFS gateways could not deliver ${cid} (${err.code}).`,
          { details: { cid, reason: err.code } },
        );
      } else throw err;
    }
    if (bytes) {
      if (bytes.length > ctx.cfg.limits.ipfsCodeBytes)
        throw new ApiError(
          "code_too_large",
          `The code of ${cid} is larger than ${ctx.cfg.limits.ipfsCodeBytes} bytes.`,
        );
      // Refusals (permission, quota, credits) are the caller's answer. A store that cannot write is
      // not: the verified code is still served, unstored and uncounted (pin() released it), as before
      // pins were counted.
      await pin(ctx, auth, bytes).catch((err: unknown) => {
        if (err instanceof ApiError) throw err;
        ctx.logger.warn({ cid, err: String(err) }, "could not store code fetched from the gateways");
      });
    }
  }
  if (!bytes)
    throw new ApiError(
      "action_not_found",
      `No code is known for ${cid}; pin it with POST /actions or send it inline.`,
      { details: { cid } },
    );
  return Buffer.from(bytes).toString("utf8");
}

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
  errors: [
    ...s.BODY_ERRORS,
    "invalid_request",
    "code_too_large",
    "not_authorized_to_pin",
    "pin_quota_exceeded",
    "insufficient_credits",
    "spend_cap_reached",
  ],
  async handle(ctx, _req, res, { code }: BodyOf<typeof codeBody>) {
    const bytes = new TextEncoder().encode(code);
    const { cid, charged_cents } = await pin(ctx, authOf(res), bytes);
    const { used_bytes, quota_bytes } = await ctx.pins.usage(authOf(res).principal.accountId);
    return { status: 201, body: { cid, bytes: bytes.length, charged_cents, used_bytes, quota_bytes } };
  },
});

const postActionsCid = endpoint<RelayerContext>("POST", "/actions/cid", {
  caller: "key",
  summary: "Compute the CID of code without storing it",
  body: codeBody,
  answer: s.out({ cid: s.str() }),
  errors: [...s.BODY_ERRORS, "invalid_request", "code_too_large"],
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

/** The operator's time limit of one run (the executor's wall time). */
const operatorTimeLimit = (ctx: RelayerContext) =>
  ctx.cfg.executorLimits?.wallTimeMs ?? DEFAULT_LIMITS.wallTimeMs;

/**
 * `timeout_ms`: a caller may ask for a shorter time limit than the operator's (a runaway run then
 * costs at most ceil(timeout_ms / 1000) seconds). Absent or null: the operator's limit. A check of
 * its own: the limit is the configuration's.
 */
function readTimeoutMs(v: unknown, ctx: RelayerContext): number | undefined {
  if (v === undefined || v === null) return undefined;
  const operatorLimitMs = operatorTimeLimit(ctx);
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
    ...s.BODY_ERRORS,
    "invalid_request",
    "unknown_field",
    "invalid_cid",
    "invalid_pkp_id",
    "pkp_not_found",
    "code_too_large",
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
    const operatorTimeLimitMs = operatorTimeLimit(ctx);
    const pkpRef = body.pkp_id;
    const pkpId = pkpRef !== undefined && isPkpAddress(pkpRef) ? resolveAddress(ctx, auth, pkpRef) : pkpRef;
    const cid = givenCid ?? (await computeCid(new TextEncoder().encode(inline!)));
    const refusal = executionRefusal(auth, cid, cidHash(cid), pkpId);
    if (refusal) throw refusal;
    const code = inline ?? (await loadCode(ctx, cid, auth));
    // Admission reserves the run's worst case (its limit at the price) until it is settled below:
    // concurrent runs cannot together spend past the key's cap or the balance (docs/billing.md).
    const timeLimitMs = timeoutMs ?? operatorTimeLimitMs;
    const reservation = await ctx.billing?.reserveExecution(auth.principal, timeLimitMs);
    const unreserve = async () => {
      if (reservation) await ctx.billing?.releaseExecution(reservation);
    };
    let release: () => void;
    try {
      release = await ctx.executionCap.enter(auth.principal.accountId);
    } catch (err) {
      await unreserve();
      throw err;
    }
    // Every PKP a key operation of the run was authorized for (the audit log's `pkps_used`).
    const pkpsUsed = new Set<string>();
    const used = <T extends string | { pkpId: string }>(granted: T): T => {
      pkpsUsed.add(typeof granted === "string" ? granted : granted.pkpId);
      return granted;
    };
    let result;
    try {
      result = await ctx.executor.run({
        // Runs and key operations are shared fairly between accounts (docs/actions.md).
        account: auth.principal.accountId,
        code,
        cid,
        jsParams,
        authorizePkp: (ref) => authorizePkp(ctx, auth, cid, ref).then(used),
        // The signing policies of the groups granting the run, checked at every signature.
        policiesFor: policiesForRun(ctx, auth, cid),
        // Where a rule with a window takes its use, before the signature (shared by every instance).
        policyWindows: ctx.policyWindows,
        // Checked just above with the rest of the request; the executor confirms it (after reading
        // the account's epoch) and serves this PKP's signatures in the worker until the account
        // changes (the cache calls invalidateRunKeys) or the key expires, as that confirmation saw
        // the key: the expiration read when the request was authenticated may have changed since.
        runPkp:
          pkpId === undefined
            ? undefined
            : {
                ref: pkpId,
                scope: Number(auth.principal.accountId),
                authorize: (ref) => authorizeRunPkp(ctx, auth, cid, ref).then(used),
              },
        // fetch: the executor-wide policy (relayer/index.ts), including the host allow-list.
        // What the action sees as Lit.Headers: the request's ids, never its credentials.
        requestHeaders: {
          "x-request-id": String(res.locals.requestId),
          "x-correlation-id": String(res.locals.correlationId),
        },
        // Code fetched by CID may be larger than inline code (design §6, docs/background.md: 512 KB vs 256 KB).
        limits: {
          ...(inline === undefined ? { maxCodeBytes: ctx.cfg.limits.ipfsCodeBytes } : {}),
          ...(timeoutMs !== undefined ? { wallTimeMs: timeoutMs } : {}),
        },
      });
    } catch (err) {
      await unreserve();
      if (err instanceof ExecutorBusyError) {
        throw new ApiError("executor_busy", "Every sandbox worker is busy; retry shortly.", {
          retryAfter: err.retryAfterSeconds,
        });
      }
      if (err instanceof ExecutorClosedError)
        throw new ApiError("executor_busy", "The executor is shutting down.", { retryAfter: 5 });
      throw err;
    } finally {
      release();
    }
    ctx.metrics.executions.inc({ has_error: String(result.has_error) });
    // Billed for its time, but never past the limit it ran under (a run stopped at its limit is
    // measured a hair over it).
    // Settling charges the time used (capped at the limit it was reserved for) and releases the rest.
    const charged =
      ctx.billing && reservation
        ? (
            await ctx.billing.settleExecution(
              reservation,
              result.execution_ms,
              res.locals.requestId as string,
              cid,
            )
          ).charged_cents
        : 0;
    // Before the answer: an answered run has its entry (docs/audit-log.md).
    await recordExecution(ctx.audit, auth, {
      requestId: String(res.locals.requestId),
      cid,
      pkpNamed: pkpId ?? null,
      pkpsUsed,
      result,
      chargedCents: charged,
    });
    return {
      body: {
        response: result.response,
        logs: result.logs,
        has_error: result.has_error,
        ...(result.error ? { error: result.error } : {}),
        // Named signatures of the older signEcdsa({toSign, publicKey, sigName}) API.
        ...(result.signatures ? { signatures: result.signatures } : {}),
        cid,
        execution_ms: result.execution_ms,
        charged_cents: charged,
      },
    };
  },
});

export const ACTION_ENDPOINTS = [postActions, postActionsCid, getActionsPinned, getActionsCid, postSvcAction];

/** The account's PKP with this address, through the address index (no scan of the account's PKPs). */
function pkpOfAddress(ctx: RelayerContext, account: AuthContext["account"], address: string): string | null {
  return pkpAddressIndexOf(ctx.enclave).lookup(account.pkps, address);
}

function resolveAddress(ctx: RelayerContext, auth: AuthContext, address: string): string {
  const id = pkpOfAddress(ctx, auth.account, address);
  if (id !== null) return id;
  throw new ApiError("pkp_not_found", `No PKP of this account has address ${address}.`, {
    details: { address },
  });
}

/**
 * The executor's per-key-operation check: the caller's key must still be live and still hold execute on
 * a group listing this CID and this PKP, according to the cache as it is *now*.
 */
async function authorizePkp(
  ctx: RelayerContext,
  auth: AuthContext,
  cid: string,
  ref: string,
): Promise<string> {
  return (await authorizeRunPkp(ctx, auth, cid, ref)).pkpId;
}

/** authorizePkp, and until when its answer holds: the caller key's expiration as this check saw it. */
async function authorizeRunPkp(
  ctx: RelayerContext,
  auth: AuthContext,
  cid: string,
  ref: string,
): Promise<{ pkpId: string; notAfterMs?: number }> {
  let current: AuthContext;
  try {
    current = await ctx.auth.reauthenticate(auth);
  } catch {
    throw new Error("the caller's key is no longer valid");
  }
  let pkpId: string;
  if (isPkpAddress(ref)) {
    const hit = pkpOfAddress(ctx, current.account, ref);
    if (!hit) throw new Error(`no PKP of this account has address ${ref}`);
    pkpId = hit;
  } else if (/^0x[0-9a-fA-F]{64}$/.test(String(ref))) {
    pkpId = String(ref).toLowerCase();
  } else {
    throw new Error("expected a PKP id (0x + 64 hex) or a PKP address");
  }
  // The same rule as for a new request (the policy's), against the cache as it is now: a revocation or a
  // switch to ChainSecured processed since the run started stops this key operation.
  const refusal = executionRefusal(current, cid, cidHash(cid), pkpId);
  if (refusal) throw new Error(refusal.message);
  return { pkpId, notAfterMs: current.key?.expiration ? current.key.expiration * 1000 : undefined };
}
