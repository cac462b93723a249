/**
 * Reading a trigger from a request body (POST /triggers and POST /triggers/:id), after the endpoint's
 * declared schema has checked its shape (types, unknown top-level fields): the rules a schema cannot
 * say, with the field named in the refusal. On update, absent fields keep their value and the kind
 * cannot change. Bounds are documented in docs/triggers.md ("Fields").
 */
import { getAddress } from "ethers";
import type { AuthContext } from "../auth";
import type { ChainEndpoint } from "../chains";
import { ApiError } from "../errors";
import { invalid, isPkpAddress, parseCidField } from "../http/validate";
import { readChainEventInput, type RequestedChainEvent } from "./chainEvents";
import type { TriggerKind, WebhookSpec } from "./model";
import type { TriggerInput } from "./serviceApi";
import { validateCron } from "./schedule";

export const KINDS: readonly TriggerKind[] = ["schedule", "webhook", "chain_event"];
export const BOUNDS = {
  name: 100,
  pkpIds: 16,
  runsPerMinute: { min: 1, max: 600, def: 60 },
  maxQueuedRuns: { min: 1, max: 1000, def: 100 },
  maxAttempts: { min: 1, max: 10, def: 3 },
  backoffMs: { min: 100, max: 3_600_000, def: 10_000 },
} as const;

const bad = (field: string, why: string) =>
  new ApiError("invalid_trigger", `\`${field}\` ${why}`, { details: { field } });

function obj(v: unknown, field: string): Record<string, unknown> {
  if (v === null || typeof v !== "object" || Array.isArray(v)) throw bad(field, "must be an object.");
  return v as Record<string, unknown>;
}

function onlyKnown(o: Record<string, unknown>, field: string, known: readonly string[]): void {
  for (const k of Object.keys(o))
    if (!known.includes(k))
      throw new ApiError("unknown_field", `Unknown field \`${field}.${k.slice(0, 64)}\`.`, {
        details: { field: `${field}.${k.slice(0, 64)}` },
      });
}

function intIn(v: unknown, field: string, b: { min: number; max: number }): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < b.min || v > b.max)
    throw bad(field, `must be an integer from ${b.min} to ${b.max}.`);
  return v;
}

/** A field of the checked body: null is absent, as everywhere in the API. */
function fieldsOf(body: Record<string, unknown>) {
  return {
    has: (name: string) => body[name] !== undefined && body[name] !== null,
    raw: (name: string) => (body[name] === null ? undefined : body[name]),
  };
}

function listOf(v: unknown, field: string, maxEntries: number): unknown[] {
  if (v === undefined) return [];
  if (!Array.isArray(v)) throw invalid(field, "an array", v);
  if (v.length > maxEntries)
    throw new ApiError(
      "too_many_entries",
      `\`${field}\` has ${v.length} entries; at most ${maxEntries} are allowed.`,
      {
        details: { field, max: maxEntries },
      },
    );
  return v;
}

export function readTriggerBody(
  body: Record<string, unknown>,
  auth: AuthContext,
  env: {
    chains: readonly ChainEndpoint[];
    jsParamsBytes: number;
    pkpOfAddress: (a: string) => string | null;
  },
  creating: boolean,
): TriggerInput {
  const b = fieldsOf(body);
  const out: TriggerInput = {};
  if (creating || b.has("name")) {
    const name = b.raw("name");
    if (typeof name !== "string" || name.trim() === "" || name.length > BOUNDS.name)
      throw bad("name", `must be a non-empty string of at most ${BOUNDS.name} characters.`);
    out.name = name.trim();
  }
  if (creating) {
    const kind = b.raw("kind");
    if (!KINDS.includes(kind as TriggerKind)) throw bad("kind", `must be one of ${KINDS.join(", ")}.`);
    out.kind = kind as TriggerKind;
  } else if (b.has("kind")) {
    b.raw("kind");
    throw bad("kind", "cannot change: create a new trigger of the other kind.");
  }
  if (b.has("enabled")) out.enabled = b.raw("enabled") === true;
  if (creating || b.has("cid")) out.cid = parseCidField(b.raw("cid"), "cid");
  if (b.has("pkp_ids") || creating) {
    const list = listOf(b.raw("pkp_ids"), "pkp_ids", BOUNDS.pkpIds);
    const ids = list.map((v: unknown, i: number) => {
      const field = `pkp_ids[${i}]`;
      if (isPkpAddress(v)) {
        const id = env.pkpOfAddress(getAddress(v.toLowerCase()));
        if (id === null)
          throw new ApiError("pkp_not_found", `No PKP of this account has address ${v}.`, {
            details: { field },
          });
        return id;
      }
      if (typeof v !== "string" || !/^0x[0-9a-fA-F]{64}$/.test(v))
        throw invalid(field, "a PKP id or address", v, "invalid_pkp_id");
      const id = v.toLowerCase();
      if (!auth.account.pkps.has(id))
        throw new ApiError("pkp_not_found", `PKP ${id} does not exist in this account.`, {
          details: { field, pkp_id: id },
        });
      return id;
    });
    if (new Set(ids).size !== ids.length) throw bad("pkp_ids", "lists a PKP twice.");
    out.pkpIds = ids;
  }
  if (b.has("js_params") || creating) {
    const p = b.raw("js_params") ?? {};
    if (typeof p !== "object" || Array.isArray(p))
      throw bad("js_params", "must be an object (the run adds `trigger` to it).");
    if ("trigger" in (p as object))
      throw bad("js_params", "must not hold `trigger`: the run sets it to the firing.");
    if (Buffer.byteLength(JSON.stringify(p), "utf8") > env.jsParamsBytes)
      throw new ApiError("js_params_too_large", `\`js_params\` is larger than ${env.jsParamsBytes} bytes.`, {
        details: { field: "js_params", max: env.jsParamsBytes },
      });
    out.jsParams = p;
  }
  if (b.has("run_as") || creating) {
    const r = obj(b.raw("run_as"), "run_as");
    onlyKnown(r, "run_as", ["key_address"]);
    const a = r.key_address;
    if (typeof a !== "string" || !/^0x[0-9a-fA-F]{40}$/.test(a))
      throw invalid("run_as.key_address", "a usage key's address", a, "invalid_address");
    const address = getAddress(a.toLowerCase());
    // The key must be a usage key of this account now; at every run it is checked again as it is then.
    if (!auth.account.keys.has(address))
      throw new ApiError("usage_key_not_found", `This account has no usage key ${address}.`, {
        details: { field: "run_as.key_address" },
      });
    out.runAsKeyAddress = address;
  }
  if (b.has("schedule")) {
    const s = obj(b.raw("schedule"), "schedule");
    onlyKnown(s, "schedule", ["cron", "missed"]);
    const missed = s.missed ?? "skip";
    if (missed !== "skip" && missed !== "run_once")
      throw bad("schedule.missed", 'must be "skip" or "run_once".');
    out.schedule = { cron: validateCron(s.cron), missed };
  }
  if (b.has("webhook")) {
    const w = obj(b.raw("webhook"), "webhook");
    onlyKnown(w, "webhook", ["hmac"]);
    out.webhook = { hmac: readHmac(w.hmac) };
  }
  if (b.has("chain_event"))
    out.chainEvent = readChainEvent(obj(b.raw("chain_event"), "chain_event"), env.chains);
  if (b.has("limits")) {
    const l = obj(b.raw("limits"), "limits");
    onlyKnown(l, "limits", ["runs_per_minute", "max_queued_runs", "concurrency"]);
    out.limits = {};
    if (l.runs_per_minute !== undefined)
      out.limits.runsPerMinute = intIn(l.runs_per_minute, "limits.runs_per_minute", BOUNDS.runsPerMinute);
    if (l.max_queued_runs !== undefined)
      out.limits.maxQueuedRuns = intIn(l.max_queued_runs, "limits.max_queued_runs", BOUNDS.maxQueuedRuns);
    if (l.concurrency !== undefined) {
      if (l.concurrency !== "serial" && l.concurrency !== "parallel")
        throw bad("limits.concurrency", 'must be "serial" or "parallel".');
      out.limits.concurrency = l.concurrency;
    }
  }
  if (b.has("retry")) {
    const r = obj(b.raw("retry"), "retry");
    onlyKnown(r, "retry", ["max_attempts", "backoff_ms"]);
    out.retry = {};
    if (r.max_attempts !== undefined)
      out.retry.maxAttempts = intIn(r.max_attempts, "retry.max_attempts", BOUNDS.maxAttempts);
    if (r.backoff_ms !== undefined)
      out.retry.backoffMs = intIn(r.backoff_ms, "retry.backoff_ms", BOUNDS.backoffMs);
  }
  return out;
}

function readHmac(v: unknown): WebhookSpec["hmac"] {
  if (v === undefined || v === null || v === false) return null;
  const o = v === true ? {} : obj(v, "webhook.hmac");
  onlyKnown(o, "webhook.hmac", ["header", "prefix", "encoding"]);
  const header = o.header ?? "x-sigil-signature";
  if (typeof header !== "string" || !/^[a-z0-9-]{1,64}$/i.test(header))
    throw bad("webhook.hmac.header", "must be a header name.");
  const prefix = o.prefix ?? "sha256=";
  if (typeof prefix !== "string" || prefix.length > 32)
    throw bad("webhook.hmac.prefix", "must be a string of at most 32 characters.");
  const encoding = o.encoding ?? "hex";
  if (encoding !== "hex" && encoding !== "base64")
    throw bad("webhook.hmac.encoding", 'must be "hex" or "base64".');
  return { header: header.toLowerCase(), prefix, encoding };
}

/** The chain-event spec of a trigger body, read by the chain-event source's one parser. */
function readChainEvent(o: Record<string, unknown>, chains: readonly ChainEndpoint[]): RequestedChainEvent {
  onlyKnown(o, "chain_event", ["chain_id", "address", "event", "topic0", "topics", "from_block"]);
  const input = {
    chainId: o.chain_id,
    address: o.address,
    event: o.event,
    topic0: o.topic0,
    topics: o.topics,
    fromBlock: o.from_block,
  };
  return readChainEventInput(input, chains, "chain_event.");
}
