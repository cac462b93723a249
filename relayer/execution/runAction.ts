/**
 * One run of an action, whoever started it (svc_action's caller, a trigger): the execution refusal, the
 * code, the admission (a reservation of the run's worst case, the per-account execution cap), the run in
 * the executor (every key operation re-authorized against the cache as it is then, the groups' signing
 * policies and their windows), the metrics, the settlement and the audit-log entry. The answer is the
 * body svc_action returns.
 */
import { DEFAULT_LIMITS, ExecutorBusyError, ExecutorClosedError } from "../../enclave";
import type { AuthContext } from "../auth";
import type { RelayerContext } from "../context";
import { ApiError } from "../errors";
import { isPkpAddress } from "../http/validate";
import { pkpAddressIndexOf } from "../permissions/pkpAddressIndex";
import { cidHash } from "../permissions/projection";
import { executionRefusal } from "../policy";
import { policiesForRun } from "../runPolicies";
import { recordExecution } from "../audit/record";
import { admitRun } from "./admission";
import { interactiveLoadOf } from "./interactiveLoad";
import { loadCode } from "./loadCode";

export interface RunRequest {
  /** The action's CID (computed from `code` by the caller when the code is inline). */
  cid: string;
  /** Inline code; absent: the code of `cid` (memory, content store, gateways). */
  code?: string;
  /** The PKP the run is named for (its id), if any. */
  pkpId?: string;
  jsParams: unknown;
  /** A time limit below the operator's; absent: the operator's. */
  timeoutMs?: number;
  /** The request (or the triggered run) this run answers: the ledger reference and the audit entry name it. */
  requestId: string;
  correlationId?: string;
  /** Set for a triggered run: its audit entry names the trigger. */
  triggerId?: string;
  firingId?: string;
}

export interface RunAnswer {
  response: unknown;
  logs: string;
  has_error: boolean;
  error?: { code: string; message?: string };
  signatures?: unknown;
  cid: string;
  execution_ms: number;
  charged_cents: number;
}

/** The time limit a run gets when it asks for none (the operator's). */
export function operatorTimeLimitMs(ctx: RelayerContext): number {
  return ctx.cfg.executorLimits?.wallTimeMs ?? DEFAULT_LIMITS.wallTimeMs;
}

export async function runAction(ctx: RelayerContext, auth: AuthContext, req: RunRequest): Promise<RunAnswer> {
  // An interactive run holds the triggers' runs back while it lasts (./interactiveLoad.ts).
  const ended = req.triggerId === undefined ? interactiveLoadOf(ctx).begin() : undefined;
  try {
    return await runOnce(ctx, auth, req);
  } finally {
    ended?.();
  }
}

async function runOnce(ctx: RelayerContext, auth: AuthContext, req: RunRequest): Promise<RunAnswer> {
  const cid = req.cid;
  const refusal = executionRefusal(auth, cid, cidHash(cid), req.pkpId);
  if (refusal) throw refusal;
  const code = req.code ?? (await loadCode(ctx, cid, auth));
  // Admission reserves the run's worst case (its limit at the price) until it is settled below:
  // concurrent runs cannot together spend past the key's cap or the balance (docs/billing.md); and
  // takes one of the account's execution slots (relayer/execution/admission.ts).
  const timeLimitMs = req.timeoutMs ?? operatorTimeLimitMs(ctx);
  const { reservation, releaseLease: release, unreserve } = await admitRun(ctx, auth.principal, timeLimitMs);
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
      // A triggered run has nobody waiting on the line: any account's interactive runs go before it
      // (docs/triggers.md, "Performance"), and it keeps a guaranteed share of dispatches.
      priority: req.triggerId !== undefined ? "background" : "interactive",
      code,
      cid,
      jsParams: req.jsParams,
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
        req.pkpId === undefined
          ? undefined
          : {
              ref: req.pkpId,
              scope: Number(auth.principal.accountId),
              authorize: (ref) => authorizeRunPkp(ctx, auth, cid, ref).then(used),
            },
      // fetch: the executor-wide policy (relayer/index.ts), including the host allow-list.
      // What the action sees as Lit.Headers: the request's ids, never its credentials.
      requestHeaders: {
        "x-request-id": req.requestId,
        "x-correlation-id": req.correlationId ?? req.requestId,
      },
      // Code fetched by CID may be larger than inline code (design §6, docs/background.md: 512 KB vs 256 KB).
      limits: {
        ...(req.code === undefined ? { maxCodeBytes: ctx.cfg.limits.ipfsCodeBytes } : {}),
        ...(req.timeoutMs !== undefined ? { wallTimeMs: req.timeoutMs } : {}),
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
      ? (await ctx.billing.settleExecution(reservation, result.execution_ms, req.requestId, cid))
          .charged_cents
      : 0;
  // Before the answer: an answered run has its entry (docs/audit-log.md).
  await recordExecution(ctx.audit, auth, {
    requestId: req.requestId,
    cid,
    pkpNamed: req.pkpId ?? null,
    pkpsUsed,
    result,
    chargedCents: charged,
    ...(req.triggerId !== undefined ? { triggerId: req.triggerId } : {}),
  });
  return {
    response: result.response,
    logs: result.logs,
    has_error: result.has_error,
    ...(result.error ? { error: result.error } : {}),
    // Named signatures of the older signEcdsa({toSign, publicKey, sigName}) API.
    ...(result.signatures ? { signatures: result.signatures } : {}),
    cid,
    execution_ms: result.execution_ms,
    charged_cents: charged,
  };
}

/** The account's PKP with this address, through the address index (no scan of the account's PKPs). */
export function pkpOfAddress(
  ctx: RelayerContext,
  account: AuthContext["account"],
  address: string,
): string | null {
  return pkpAddressIndexOf(ctx.enclave).lookup(account.pkps, address);
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
