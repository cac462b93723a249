/**
 * From what a route knows to the entry the log keeps (entries.ts): one function per kind, so each rule
 * of what goes into an entry (and what never does) is written once. Callers await these before they
 * answer: an answered request has its entry written.
 */
import type { AuthContext } from "../auth";
import { parseRegistryLog } from "../chain/abi";
import type { RawLog } from "../chain/rawLog";
import { catalogueEntry } from "../errors";
import type {
  AuditPrincipal,
  BillingData,
  ExecutionData,
  KeyOperation,
  RefusalData,
  WriteData,
  WriteEvent,
} from "./entries";
import { responseDigest } from "./format";
import type { AuditLog } from "./log";

export function auditPrincipal(auth: Pick<AuthContext, "principal" | "ownerSession">): AuditPrincipal {
  const kind = auth.ownerSession
    ? "wallet_session"
    : auth.principal.kind === "account"
      ? "account_key"
      : "usage_key";
  return { kind, address: auth.principal.keyAddress.toLowerCase() };
}

/**
 * The registry's events among a transaction's logs, with their log index and their arguments as strings
 * (numbers in decimal): ids, addresses, CID hashes, all public on chain already. A batch transaction
 * carries several requests; `logs` is the one request's share.
 */
export function writeEvents(logs: readonly RawLog[], registry: string): WriteEvent[] {
  const out: WriteEvent[] = [];
  for (const l of logs) {
    if (l.address.toLowerCase() !== registry.toLowerCase()) continue;
    const ev = parseRegistryLog(l.topics, l.data);
    if (!ev) continue;
    const args: Record<string, string> = {};
    ev.fragment.inputs.forEach((input, j) => {
      const v: unknown = ev.args[j];
      args[input.name || String(j)] = typeof v === "string" ? v : String(v);
    });
    out.push({ name: ev.name, log_index: Number(l.logIndex), args });
  }
  return out;
}

/**
 * The run's key operations as its result reports them: every operation it made (`key_operations`: kind,
 * PKP, and for a signature the digest signed, whichever side served it), each with the rule of the
 * signing-policy decision that allowed it when a policy decided; then every operation a policy refused
 * (`policy_decisions` that did not allow: the rule and the value that failed), which made nothing.
 */
export function keyOperationsOf(result: unknown): KeyOperation[] {
  const r = result as {
    policy_decisions?: Array<Record<string, unknown>>;
    key_operations?: Array<Record<string, unknown>>;
  };
  const str = (v: unknown) => (typeof v === "string" ? v : undefined);
  const lower = (v: unknown) => str(v)?.toLowerCase();
  const decisions = Array.isArray(r.policy_decisions) ? r.policy_decisions : [];
  // The allowed decisions, by what they allowed, in order: each names the rule of one operation made.
  const rules = new Map<string, string[]>();
  const keyOf = (kind: unknown, pkp: unknown, digest: unknown) =>
    `${str(kind)}|${lower(pkp)}|${lower(digest) ?? ""}`;
  for (const d of decisions) {
    if (d.allowed !== true || str(d.rule) === undefined) continue;
    const k = keyOf(d.operation, d.pkp, d.digest);
    const list = rules.get(k);
    if (list) list.push(str(d.rule) as string);
    else rules.set(k, [str(d.rule) as string]);
  }
  const made: KeyOperation[] = (Array.isArray(r.key_operations) ? r.key_operations : []).map((op) => {
    const rule = rules.get(keyOf(op.kind, op.pkp, op.digest))?.shift();
    return {
      operation: str(op.kind) ?? "unknown",
      allowed: true,
      ...(lower(op.pkp) !== undefined ? { pkp: lower(op.pkp) } : {}),
      ...(lower(op.digest) !== undefined ? { digest: lower(op.digest) } : {}),
      ...(rule !== undefined ? { rule } : {}),
    };
  });
  const refused: KeyOperation[] = decisions
    .filter((d) => d.allowed !== true)
    .map((d) => ({
      operation: str(d.operation) ?? "unknown",
      allowed: false,
      ...(str(d.rule) !== undefined ? { rule: str(d.rule) } : {}),
      ...(lower(d.pkp) !== undefined ? { pkp: lower(d.pkp) } : {}),
      ...(lower(d.digest) !== undefined ? { digest: lower(d.digest) } : {}),
      ...(d.value !== undefined && d.value !== null ? { value: String(d.value) } : {}),
    }));
  return [...made, ...refused];
}

export async function recordExecution(
  log: AuditLog | null,
  auth: AuthContext,
  run: {
    requestId: string;
    cid: string;
    pkpNamed: string | null;
    pkpsUsed: Iterable<string>;
    result: {
      response: unknown;
      has_error: boolean;
      error?: { code: string };
      execution_ms: number;
      key_ops: number;
    };
    chargedCents: number;
    triggerId?: string;
  },
): Promise<void> {
  if (!log) return;
  const pkps = [...new Set([...run.pkpsUsed].map((p) => p.toLowerCase()))].sort();
  const principal = auditPrincipal(auth);
  const data: ExecutionData = {
    request_id: run.requestId,
    principal,
    cid: run.cid,
    pkp_named: run.pkpNamed?.toLowerCase() ?? null,
    pkps_used: pkps,
    key_operations: keyOperationsOf(run.result),
    key_operation_count: run.result.key_ops,
    response_sha256: responseDigest(run.result.response),
    has_error: run.result.has_error,
    error_code: run.result.error?.code ?? null,
    duration_ms: run.result.execution_ms,
    charged_cents: run.chargedCents,
    instance: log.instance,
    ...(run.triggerId !== undefined ? { trigger_id: run.triggerId } : {}),
  };
  const named = data.pkp_named ? [data.pkp_named] : [];
  await log.record({
    account: auth.principal.accountId,
    kind: "execution",
    timeMs: Date.now(),
    data,
    principal: principal.address,
    cid: run.cid,
    pkps: [...new Set([...pkps, ...named])].sort(),
    outcome: run.result.has_error ? "error" : "ok",
  });
}

export async function recordWrite(
  log: AuditLog | null,
  auth: Pick<AuthContext, "principal" | "ownerSession" | "requestId">,
  write: {
    operation: string;
    txHash: string;
    blockNumber: number;
    events: WriteEvent[];
    chargedCents: number;
  },
): Promise<void> {
  if (!log) return;
  const principal = auditPrincipal(auth);
  const data: WriteData = {
    request_id: auth.requestId ?? "",
    principal,
    operation: write.operation,
    tx_hash: write.txHash,
    block_number: write.blockNumber,
    events: write.events,
    charged_cents: write.chargedCents,
    instance: log.instance,
  };
  const pkps = write.events.flatMap((e) => (e.args.pkpId ? [e.args.pkpId.toLowerCase()] : []));
  await log.record({
    account: auth.principal.accountId,
    kind: "write",
    timeMs: Date.now(),
    data,
    principal: principal.address,
    cid: null,
    pkps: [...new Set(pkps)].sort(),
    outcome: "ok",
  });
}

/** Codes that refuse a caller's credentials or their scope (401 and 403 in the catalogues). */
export function isRefusalCode(code: string): boolean {
  const status = catalogueEntry(code)?.status;
  return status === 401 || status === 403;
}

/** Billing's answers that the account holder must see as billing events, not as refusals. */
const BILLING_EVENTS: Record<string, BillingData["event"]> = {
  insufficient_credits: "insufficient_credits",
  spend_cap_reached: "spend_cap_reached",
};

/**
 * A refused request of a known account (its key was recognised): a refusal entry (rate-limited per
 * account) or, for a balance or a spend cap, a billing event. Unknown keys name no account: nothing to
 * record them under.
 */
export async function recordRefusal(
  log: AuditLog | null,
  who: {
    accountId: string;
    keyAddress: string | null;
    apiKeyHash: string | null;
    principal: AuditPrincipal | null;
  },
  request: { requestId: string; method: string; route: string; code: string },
): Promise<void> {
  if (!log) return;
  const billingEvent = BILLING_EVENTS[request.code];
  if (billingEvent) {
    const data: BillingData = {
      event: billingEvent,
      request_id: request.requestId,
      principal: who.principal,
      amount_cents: null,
      reference: null,
    };
    await log.record({
      account: who.accountId,
      kind: "billing",
      timeMs: Date.now(),
      data,
      principal: who.principal?.address ?? null,
      cid: null,
      pkps: [],
      outcome: "refused",
    });
    return;
  }
  if (!isRefusalCode(request.code)) return;
  const { admit, suppressed } = await log.admitRefusal(who.accountId);
  if (!admit) return;
  const data: RefusalData = {
    request_id: request.requestId,
    method: request.method,
    route: request.route,
    key_hash_prefix: who.apiKeyHash ? who.apiKeyHash.slice(0, 10) : null,
    principal: who.principal,
    code: request.code,
    suppressed,
  };
  await log.record({
    account: who.accountId,
    kind: "refusal",
    timeMs: Date.now(),
    data,
    principal: who.principal?.address ?? null,
    cid: null,
    pkps: [],
    outcome: "refused",
  });
}
