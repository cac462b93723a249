/**
 * What route handlers share: configuration, the enclave, the chain (reader, sender), the permission
 * cache, stores, billing. Plus the two helpers every write route uses: `write` (billing gate, path-A
 * submit, cache sync, charge) and `handler` (Idempotency-Key on POST, JSON answer).
 */
import type { Request, RequestHandler, Response } from "express";
import type { LogDescription } from "ethers";
import type { Logger } from "pino";
import type { ContentStore, Enclave, GatewayClient } from "../enclave";
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
import type { ProfileStore } from "./store";
import type { Webhooks } from "./webhooks";
import type { AuditLog } from "./audit/log";
import { recordWrite, writeEvents } from "./audit/record";
import { clientIp } from "./http/context";

export interface RelayerContext {
  cfg: RelayerConfig;
  chainId: number;
  enclave: Enclave;
  cache: PermissionCache;
  reader: RegistryReader;
  sender: Sender;
  executor: ActionExecutor;
  contentStore: ContentStore;
  gateway: GatewayClient | null;
  billing: Billing | null;
  /** The cross-instance write mark (PostgreSQL), raised by every landed path-A write; null in one process. */
  writeMark: SharedWriteMark | null;
  idempotency: IdempotencyStore;
  profiles: ProfileStore;
  pins: PinLedger;
  auth: Authenticator;
  newAccountLimit: RateLimiter;
  /** Every /core/v1 request, per client IP, before authentication. */
  ipLimit: RateLimiter;
  executionCap: ExecutionCap;
  /** Outgoing webhooks: endpoints, event scanners, deliveries (relayer/webhooks/). */
  webhooks: Webhooks;
  /** The verifiable audit log (relayer/audit/); null when the operator turned it off. */
  audit: AuditLog | null;
  metrics: RelayerMetrics;
  logger: Logger;
}

export interface WriteOutcome extends LandedWrite {
  events: LogDescription[];
}

/**
 * A path-A write for an authenticated caller: billing gate, submit, make the cache reflect the receipt
 * (read-your-writes), then charge: only writes that landed are billed, once per forward request.
 * `revocation` (removing a usage key): no billing gate, so a leaked key can always be revoked at once;
 * the write is still charged after it landed, which may leave a debt (docs/billing.md, "Revocation is never refused for credit").
 */
export async function write(
  ctx: RelayerContext,
  auth: AuthContext,
  operation: string,
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
  const journal = currentClaim()?.nextWrite();
  // A revocation is never refused for credit (a leaked key must always be removable); a retry of a write
  // an earlier attempt already sent is not a new write: its price was (or will be) charged for that
  // request, so it is not refused for a balance that charge used up.
  if (!opts.revocation && !journal?.recorded()) await ctx.billing?.assertCanAfford(auth.principal, "write");
  const result = await submit(
    ctx,
    { apiKey: auth.apiKey, principal: auth.signer, kind: auth.principal.kind },
    data,
    journal,
  );
  await chargeLandedWrite(ctx, auth, operation, result);
  return result;
}

/**
 * Charge one landed path-A write, relayer-signed or client-signed alike: per forward request (chain,
 * forwarder, signer, nonce), never per transaction, since a batch carries many writes under one hash.
 * Then its audit-log entry, before the answer (docs/audit-log.md).
 */
export async function chargeLandedWrite(
  ctx: RelayerContext,
  auth: Pick<AuthContext, "principal" | "ownerSession" | "requestId">,
  operation: Parameters<NonNullable<RelayerContext["billing"]>["chargeWrite"]>[1],
  landed: LandedWrite,
): Promise<void> {
  const charge = await ctx.billing?.chargeWrite(auth.principal, operation, {
    chainId: ctx.chainId,
    forwarder: ctx.cfg.forwarderAddress,
    ...landed.forwardRequest,
  });
  await recordWrite(ctx.audit, auth, {
    operation,
    txHash: landed.txHash,
    blockNumber: landed.blockNumber,
    events: writeEvents(landed.logs, ctx.cfg.registryAddress),
    chargedCents: charge?.charged_cents ?? 0,
  });
}

/**
 * Submit and sync the cache; used directly by new_account (no principal yet). Under an
 * Idempotency-Key the write has a journal (relayer/idempotency.ts): its signed request is recorded
 * before it is sent, and a retry after a crash reconciles that request instead of writing again.
 */
export async function submit(
  ctx: RelayerContext,
  who: { apiKey: string; principal: string; kind: "account" | "usage" },
  data: string,
  journal: WriteJournal | undefined = currentClaim()?.nextWrite(),
): Promise<WriteOutcome> {
  let result: LandedWrite;
  try {
    result = await ctx.sender.write({ ...who, data }, journal);
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
  return { ...result, events: registryEvents(result.logs, ctx.cfg.registryAddress) };
}

export interface HandlerResult {
  status?: number;
  body: unknown;
}

export interface HandlerOptions {
  /**
   * Fields of the answer that hold a secret (a new key). Every kept answer is sealed whole
   * (idempotency.ts); "encrypt" keeps these fields inside the sealed answer (the sealing context holds
   * the caller's own API key, so only the same caller reads them back on a replay); "drop" leaves them
   * out (new_account: there is no caller key, only an IP, to bind them to).
   */
  secretFields?: { names: string[]; mode: "encrypt" | "drop" };
}

/**
 * Wraps a route: runs it, and for POST with an Idempotency-Key, keeps and replays its successful answer.
 */
export function handler(
  ctx: RelayerContext,
  fn: (req: Request, res: Response) => Promise<HandlerResult>,
  opts: HandlerOptions = {},
): RequestHandler {
  return async (req: Request, res: Response) => {
    const idemKey = req.method === "POST" ? validateIdempotencyKey(req.get("idempotency-key")) : undefined;
    if (idemKey === undefined) {
      const out = await fn(req, res);
      res.status(out.status ?? 200).json(out.body);
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
