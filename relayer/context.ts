/**
 * What route handlers share: configuration, the enclave, the chain (reader, sender), the permission
 * cache, stores, billing. Plus the two helpers every write route uses: `write` (billing gate, path-A
 * submit, cache sync, charge) and `handler` (Idempotency-Key on POST, JSON answer).
 */
import type { Request, RequestHandler, Response } from "express";
import type { LogDescription } from "ethers";
import type { Logger } from "pino";
import type { Enclave, GatewayClient } from "../enclave";
import type { PinnedCode } from "./pinnedCode";
import type { ActionExecutor } from "../enclave";
import type { AuthContext, Authenticator } from "./auth";
import type { Billing } from "./billing";
import type { PermissionCache } from "./permissions/permissionCache";
import type { RegistryReader } from "./chain/registryReader";
import { registryEvents, type LandedWrite, type Sender, type WriteJournal } from "./chain/sender";
import type { RelayerConfig } from "./config";
import { ApiError } from "./errors";
import {
  currentClaim,
  fingerprint,
  sealContextOf,
  validateIdempotencyKey,
  type IdempotencyStore,
} from "./idempotency";
import type { RelayerMetrics } from "./metrics";
import type { ExecutionCap, RateLimiter } from "./rateLimit";
import type { PinLedger } from "./pins";
import type { SharedWriteMark } from "./cluster/writeMark";
import type { PolicyWindowStore } from "./policyWindows";
import type { ProfileStore } from "./profiles";
import type { Webhooks } from "./webhooks";
import type { AuditLog } from "./audit/log";
import type { TriggerServiceApi } from "./triggers/serviceApi";
import { recordWrite, writeEvents } from "./audit/record";
import { clientIp } from "./http/context";
import type { Endpoint, HandlerResult } from "./routes/endpoint";

export interface RelayerContext {
  cfg: RelayerConfig;
  chainId: number;
  enclave: Enclave;
  cache: PermissionCache;
  reader: RegistryReader;
  sender: Sender;
  executor: ActionExecutor;
  /** Pinned code: the data layer's copy, cached on this instance's disk (relayer/pinnedCode.ts). */
  contentStore: PinnedCode;
  gateway: GatewayClient | null;
  billing: Billing | null;
  /** The cross-instance write mark (PostgreSQL), raised by every landed path-A write; null in one process. */
  writeMark: SharedWriteMark | null;
  idempotency: IdempotencyStore;
  profiles: ProfileStore;
  /** The counters of signing-policy windows, shared through the data layer (relayer/policyWindows.ts). */
  policyWindows: PolicyWindowStore;
  pins: PinLedger;
  auth: Authenticator;
  newAccountLimit: RateLimiter;
  /** Every /core/v1 request, per client IP, before authentication. */
  ipLimit: RateLimiter;
  executionCap: ExecutionCap;
  /** Outgoing webhooks: endpoints, event scanners, deliveries (relayer/webhooks/). */
  webhooks: Webhooks;
  /** Triggers: the account's, the intake sources fire into, the runner and the scheduler (relayer/triggers/). */
  triggers: TriggerServiceApi;
  /** The verifiable audit log (relayer/audit/); null when the operator turned it off. */
  audit: AuditLog | null;
  metrics: RelayerMetrics;
  logger: Logger;
}

export interface WriteOutcome extends LandedWrite {
  events: LogDescription[];
}

/** An operation name billing records for a write (the same for bearer and forwarded writes). */
export type BilledOperation = Parameters<NonNullable<RelayerContext["billing"]>["chargeWrite"]>[1];

/**
 * A path-A write for an authenticated caller, signed by the relayer with the caller's key: see `landWrite`.
 * `revocation` (removing a usage key): no billing gate, so a leaked key can always be revoked at once;
 * the write is still charged after it landed, which may leave a debt (docs/billing.md, "Revocation is never refused for credit").
 */
export async function write(
  ctx: RelayerContext,
  auth: AuthContext,
  operation: BilledOperation,
  data: string,
  opts: { revocation?: boolean } = {},
): Promise<WriteOutcome> {
  if (auth.apiKey === null) {
    // A signed request: the relayer never had the key, so it cannot sign a write with it.
    throw new ApiError(
      "forward_request_required",
      "A signed request cannot make this write: sign a forward request (POST /core/v1/forward/prepare, then POST /core/v1/forward), or send the key as a bearer credential.",
    );
  }
  const who = { apiKey: auth.apiKey, principal: auth.signer, kind: auth.principal.kind };
  return landWrite(ctx, {
    payer: { auth, operation, revocation: opts.revocation },
    send: (journal) => ctx.sender.write({ ...who, data }, journal),
  });
}

/** A write without a payer: new_account's (the account does not exist until it lands). */
export function submit(
  ctx: RelayerContext,
  who: { apiKey: string; principal: string; kind: "account" | "usage" },
  data: string,
): Promise<WriteOutcome> {
  return landWrite(ctx, { send: (journal) => ctx.sender.write({ ...who, data }, journal) });
}

export interface LandingWrite {
  /**
   * Who pays: gated before the write is sent and charged once it landed, per forward request (chain,
   * forwarder, signer, nonce), never per transaction, since a batch carries many writes under one hash.
   * A revocation is never refused for credit (a leaked key must always be removable); a retry of a
   * write an earlier attempt already sent is not a new write: its price was (or will be) charged for
   * that request, so it is not refused for a balance that charge used up.
   */
  payer?: {
    auth: Pick<AuthContext, "principal" | "ownerSession" | "requestId">;
    operation: BilledOperation;
    revocation?: boolean;
  };
  /**
   * The request's write journal (relayer/idempotency.ts): under an Idempotency-Key the signed request is
   * recorded before it is sent, and a retry after a crash reconciles it instead of writing again. Taken
   * from the current claim unless the route took it already (forward checks its deadline against it).
   */
  journal?: WriteJournal;
  /** Sends the write: the relayer signs it with the caller's key, or relays the client's signed request. */
  send(journal: WriteJournal | undefined): Promise<LandedWrite>;
}

/**
 * The one way a path-A write lands, relayer-signed or client-signed alike: billing gate, send (counted
 * in the chain-write metrics), read-your-writes (the cache reflects the receipt before the answer), the
 * shared write mark, the charge, and the receipt's registry events.
 */
export async function landWrite(ctx: RelayerContext, w: LandingWrite): Promise<WriteOutcome> {
  const journal = w.journal ?? currentClaim()?.nextWrite();
  if (w.payer && !w.payer.revocation && !journal?.recorded())
    await ctx.billing?.assertCanAfford(w.payer.auth.principal, "write");
  let result: LandedWrite;
  try {
    result = await w.send(journal);
    ctx.metrics.chainWrites.inc({ result: "ok" });
  } catch (err) {
    ctx.metrics.chainWrites.inc({ result: err instanceof ApiError ? err.code : "error" });
    throw err;
  }
  try {
    // Read-your-writes: the sender's onMined hook usually applied the receipt already; else catch up.
    if (!ctx.cache.isApplied(result.txHash)) await ctx.cache.syncTo(result.blockNumber);
  } catch (err) {
    // The write landed; the cache catches up on its next poll. Answer with the result anyway.
    ctx.logger.warn(
      { err: (err as Error).message, block: result.blockNumber },
      "cache sync after a write failed",
    );
  }
  // Other instances honour this write from their next request on: durable before the answer leaves.
  await ctx.writeMark?.record(result.blockNumber);
  if (w.payer) {
    const charge = await ctx.billing?.chargeWrite(w.payer.auth.principal, w.payer.operation, {
      chainId: ctx.chainId,
      forwarder: ctx.cfg.forwarderAddress,
      ...result.forwardRequest,
    });
    // Its audit-log entry, before the answer (docs/audit-log.md).
    await recordWrite(ctx.audit, w.payer.auth, {
      operation: w.payer.operation,
      txHash: result.txHash,
      blockNumber: result.blockNumber,
      events: writeEvents(result.logs, ctx.cfg.registryAddress),
      chargedCents: charge?.charged_cents ?? 0,
    });
  }
  return { ...result, events: registryEvents(result.logs, ctx.cfg.registryAddress) };
}

/**
 * `secretFields`: fields of the answer that hold a secret (a new key). Every kept answer is sealed whole
 * (idempotency.ts); "encrypt" keeps these fields inside the sealed answer (the sealing context holds the
 * caller's own API key, so only the same caller reads them back on a replay); "drop" leaves them out
 * (new_account: there is no caller key, only an IP, to bind them to).
 */
export type HandlerOptions = Pick<Endpoint<unknown>, "secretFields">;

/**
 * Wraps a route: runs it, and for POST with an Idempotency-Key, keeps and replays its successful answer.
 */
export function handler(
  ctx: RelayerContext,
  fn: (req: Request, res: Response) => Promise<HandlerResult | void>,
  opts: HandlerOptions = {},
): RequestHandler {
  return async (req: Request, res: Response) => {
    const idemKey = req.method === "POST" ? validateIdempotencyKey(req.get("idempotency-key")) : undefined;
    if (idemKey === undefined) {
      const out = await fn(req, res);
      // Nothing returned: the route wrote its own answer (GET /health's status, /metrics' text).
      if (out) res.status(out.status ?? 200).json(out.body);
      return;
    }
    const auth = res.locals.auth as AuthContext | undefined;
    const scope = auth ? `key:${auth.principal.keyAddress}` : `ip:${clientIp(req)}`;
    // The caller's own key is part of the sealing context: only the same caller opens its answers.
    const sealContext = sealContextOf(scope, auth?.apiKey ?? null, idemKey);
    const fp = fingerprint(req.method, req.baseUrl + req.path, req.body, sealContext);
    const out = await ctx.idempotency.run(
      scope,
      idemKey,
      fp,
      async () => {
        const r = await fn(req, res);
        if (!r) throw new Error(`${req.method} ${req.path}: a POST route must return its answer to be kept`);
        return { status: r.status ?? 200, body: r.body };
      },
      { sealContext, keep: (body) => withholdSecrets(body, opts.secretFields) },
    );
    if (out.replayed) res.setHeader("Idempotent-Replayed", "true");
    res.status(out.status).json(out.body);
  };
}

/** "drop" secret fields are never kept, even sealed: the scope of an unauthenticated caller is its IP. */
function withholdSecrets(body: unknown, secret: HandlerOptions["secretFields"]): unknown {
  if (!secret || secret.mode !== "drop" || body === null || typeof body !== "object") return body;
  const copy = { ...(body as Record<string, unknown>) };
  for (const name of secret.names) {
    if (copy[name] === undefined) continue;
    copy[name] = null;
    copy[`${name}_withheld`] = true;
  }
  return copy;
}

export function firstEvent(out: WriteOutcome, name: string): LogDescription {
  const ev = out.events.find((e) => e.name === name);
  if (!ev) throw new Error(`the receipt of ${out.txHash} has no ${name} event`);
  return ev;
}
