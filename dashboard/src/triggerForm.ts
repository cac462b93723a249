/**
 * The trigger form's rules, without React: the form's state, the JSON body it sends (previewed as it is
 * typed), the next times a cron expression fires (UTC), an address as a topic filter, and where an API
 * error belongs (`details.field` names the body's field; the form shows it next to that input).
 */
import { Cron } from "croner";
import type { NewTrigger, Trigger, TriggerUpdate } from "../../sdk";

export type Kind = "schedule" | "webhook" | "chain_event";

export const KIND_LABELS: Record<Kind, string> = {
  schedule: "Schedule",
  webhook: "Webhook",
  chain_event: "Chain event",
};

export interface TriggerFormState {
  name: string;
  kind: Kind;
  cron: string;
  missed: "skip" | "run_once";
  hmac: boolean;
  hmacHeader: string;
  hmacPrefix: string;
  hmacEncoding: "hex" | "base64";
  chainId: string;
  address: string;
  event: string;
  topics: [string, string, string];
  fromBlock: string;
  cid: string;
  pkpIds: string[];
  jsParams: string;
  keyAddress: string;
  runsPerMinute: string;
  maxQueuedRuns: string;
  concurrency: "serial" | "parallel";
  maxAttempts: string;
  backoffMs: string;
}

/** The service's defaults (docs/triggers.md), so the form starts where the API would. */
export function emptyForm(chainId: number | null): TriggerFormState {
  return {
    name: "",
    kind: "schedule",
    cron: "*/5 * * * *",
    missed: "skip",
    hmac: false,
    hmacHeader: "x-sigil-signature",
    hmacPrefix: "sha256=",
    hmacEncoding: "hex",
    chainId: chainId === null ? "" : String(chainId),
    address: "",
    event: "Transfer(address indexed from, address indexed to, uint256 value)",
    topics: ["", "", ""],
    fromBlock: "",
    cid: "",
    pkpIds: [],
    jsParams: "{}",
    keyAddress: "",
    runsPerMinute: "60",
    maxQueuedRuns: "100",
    concurrency: "serial",
    maxAttempts: "3",
    backoffMs: "10000",
  };
}

/** A stored trigger as the form edits it. */
export function formOf(t: Trigger): TriggerFormState {
  const base = emptyForm(t.chain_event?.chain_id ?? null);
  const topic = (i: number) => t.chain_event?.topics?.[i] ?? "";
  return {
    ...base,
    name: t.name,
    kind: t.kind,
    cron: t.schedule?.cron ?? base.cron,
    missed: t.schedule?.missed ?? "skip",
    hmac: Boolean(t.webhook?.hmac),
    hmacHeader: t.webhook?.hmac?.header ?? base.hmacHeader,
    hmacPrefix: t.webhook?.hmac?.prefix ?? base.hmacPrefix,
    hmacEncoding: t.webhook?.hmac?.encoding ?? base.hmacEncoding,
    address: t.chain_event?.address ?? "",
    event: t.chain_event?.event ?? "",
    topics: [topic(0), topic(1), topic(2)],
    fromBlock: t.chain_event ? String(t.chain_event.from_block) : "",
    cid: t.cid,
    pkpIds: [...t.pkp_ids],
    jsParams: JSON.stringify(t.js_params ?? {}, null, 2),
    keyAddress: t.run_as.key_address,
    runsPerMinute: String(t.limits.runs_per_minute),
    maxQueuedRuns: String(t.limits.max_queued_runs),
    concurrency: t.limits.concurrency,
    maxAttempts: String(t.retry.max_attempts),
    backoffMs: String(t.retry.backoff_ms),
  };
}

/** Field name (the API's, as in `details.field`) → what is wrong, found before anything is sent. */
export type FieldErrors = Record<string, string>;

/** A whole number typed into a field, or the inline error; an empty field is left to the service's default. */
function wholeNumber(text: string, field: string, errors: FieldErrors): number | undefined {
  const t = text.trim();
  if (t === "") return undefined;
  if (!/^\d{1,15}$/.test(t)) {
    errors[field] = "A whole number.";
    return undefined;
  }
  return Number(t);
}

/**
 * The body the form sends: the create body, or (with `existing`) the update body, which never names
 * the kind and names `webhook` only when the HMAC setting changed (adding one makes a new secret).
 * Only what must be read locally to build JSON is checked here (numbers, the `js_params` JSON); every
 * other rule is the service's, shown where its answer names the field.
 */
export function bodyOf(
  f: TriggerFormState,
  existing?: Trigger,
): { body: NewTrigger | TriggerUpdate; errors: FieldErrors } {
  const errors: FieldErrors = {};
  let jsParams: unknown = {};
  try {
    jsParams = f.jsParams.trim() === "" ? {} : JSON.parse(f.jsParams);
    if (jsParams === null || typeof jsParams !== "object" || Array.isArray(jsParams))
      errors.js_params = "Must be a JSON object, e.g. {}.";
  } catch (e) {
    errors.js_params = `Not JSON: ${(e as Error).message}`;
  }
  const limits = {
    runs_per_minute: wholeNumber(f.runsPerMinute, "limits.runs_per_minute", errors),
    max_queued_runs: wholeNumber(f.maxQueuedRuns, "limits.max_queued_runs", errors),
    concurrency: f.concurrency,
  };
  const retry = {
    max_attempts: wholeNumber(f.maxAttempts, "retry.max_attempts", errors),
    backoff_ms: wholeNumber(f.backoffMs, "retry.backoff_ms", errors),
  };
  const body: Record<string, unknown> = {
    name: f.name,
    ...(existing ? {} : { kind: f.kind }),
    cid: f.cid,
    pkp_ids: f.pkpIds,
    js_params: jsParams,
    run_as: { key_address: f.keyAddress },
  };
  if (f.kind === "schedule") body.schedule = { cron: f.cron, missed: f.missed };
  if (f.kind === "webhook") {
    const hmac = f.hmac ? { header: f.hmacHeader, prefix: f.hmacPrefix, encoding: f.hmacEncoding } : null;
    const before = existing?.webhook?.hmac ?? null;
    if (!existing || JSON.stringify(before) !== JSON.stringify(hmac)) body.webhook = { hmac };
  }
  if (f.kind === "chain_event") {
    const chainId = wholeNumber(f.chainId, "chain_event.chain_id", errors);
    if (chainId === undefined && !errors["chain_event.chain_id"])
      errors["chain_event.chain_id"] = "Which chain (its id).";
    const fromBlock = wholeNumber(f.fromBlock, "chain_event.from_block", errors);
    const topics = f.topics.map((t) => (t.trim() === "" ? null : t.trim()));
    while (topics.length > 0 && topics[topics.length - 1] === null) topics.pop();
    body.chain_event = {
      chain_id: chainId,
      address: f.address.trim(),
      ...(f.event.trim() ? { event: f.event.trim() } : {}),
      topics,
      ...(fromBlock !== undefined ? { from_block: fromBlock } : {}),
    };
  }
  body.limits = limits;
  body.retry = retry;
  // JSON.stringify drops the undefined numbers: the preview shows exactly what is sent.
  return { body: JSON.parse(JSON.stringify(body)) as NewTrigger, errors };
}

/** An address as a topic filter (an indexed `address` argument: 12 zero bytes, then the address). */
export function addressTopic(address: string): string | null {
  const a = address.trim();
  if (!/^0x[0-9a-fA-F]{40}$/.test(a)) return null;
  return "0x" + "0".repeat(24) + a.slice(2).toLowerCase();
}

const UTC_TIME = new Intl.DateTimeFormat("en-GB", {
  timeZone: "UTC",
  weekday: "short",
  day: "numeric",
  month: "short",
  year: "numeric",
  hour: "2-digit",
  minute: "2-digit",
});

const UTC_SECONDS = new Intl.DateTimeFormat("en-GB", {
  timeZone: "UTC",
  day: "numeric",
  month: "short",
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
});

/** A time as the page shows it: "Fri, 27 Nov 2026, 09:05 UTC". */
export function utc(iso: string | number | Date): string {
  return `${UTC_TIME.format(new Date(iso))} UTC`;
}

/** A run's moment, to the second (runs of one minute are told apart): "27 Nov, 09:05:03". */
export function utcSeconds(iso: string | number | Date): string {
  return UTC_SECONDS.format(new Date(iso));
}

/**
 * The next `n` times a five-field expression fires after `from`, with croner in UTC as the service
 * reads it; or why there is nothing to show (the service's answer on submit is the final word).
 */
export function nextRuns(cron: string, n = 3, from = new Date()): { times: Date[] } | { problem: string } {
  const expr = cron.trim().replace(/\s+/g, " ");
  const fields = expr === "" ? 0 : expr.split(" ").length;
  if (fields !== 5)
    return {
      problem: `Five fields (minute hour day-of-month month day-of-week), UTC; this has ${fields}.`,
    };
  try {
    const c = new Cron(expr, { timezone: "UTC", mode: "5-part", paused: true });
    const times = c.nextRuns(n, from);
    return times.length ? { times } : { problem: "It never fires again." };
  } catch (e) {
    return { problem: `Does not parse: ${(e as Error).message.replace(/^CronPattern: /, "")}` };
  }
}

/**
 * Which form field an API error belongs to: `details.field` as the service names it, with list
 * positions folded into their list (`pkp_ids[1]` → `pkp_ids`) except the topic filters, which each
 * have a field of their own. Null: the error is about the whole request (shown above the buttons).
 */
export function fieldOfError(details: Record<string, unknown> | undefined): string | null {
  const field = details?.field;
  if (typeof field !== "string") return null;
  if (/^chain_event\.topics\[[0-2]\]$/.test(field)) return field;
  return field.replace(/\[\d+\]$/, "").replace(/^webhook\.hmac$/, "webhook.hmac.header");
}
