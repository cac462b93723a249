/**
 * The account's audit log (docs/audit-log.md): GET /core/v1/audit lists entries newest first with
 * filters and a cursor; GET /core/v1/audit/export streams the verifiable JSON Lines export (entries and
 * signed checkpoints). Account key (or the owner's wallet session): the log is the account's.
 */
import { authOf } from "../auth";
import { AUDIT_KINDS, type AuditKind } from "../audit/entries";
import { exportLines } from "../audit/export";
import type { AuditFilter } from "../audit/store";
import type { RelayerContext } from "../context";
import { ApiError } from "../errors";
import { endpoint } from "./endpoint";
import * as s from "./schemas";

const OUTCOMES = ["ok", "error", "refused"] as const;
const MAX_LIMIT = 500;

function invalid(field: string, expected: string): ApiError {
  return new ApiError("invalid_request", `\`${field}\` must be ${expected}.`, { details: { field } });
}

/** An instant: integer milliseconds since the epoch, or an ISO 8601 date-time. */
function readTime(query: Record<string, unknown>, field: string): number | undefined {
  const raw = query[field];
  if (raw === undefined || raw === "") return undefined;
  if (typeof raw === "string") {
    if (/^[0-9]{1,15}$/.test(raw)) return Number(raw);
    if (/^\d{4}-\d{2}-\d{2}/.test(raw)) {
      const ms = Date.parse(raw);
      if (Number.isFinite(ms)) return ms;
    }
  }
  throw invalid(field, "milliseconds since 1970 or an ISO 8601 date-time");
}

function readOne<T extends string>(
  query: Record<string, unknown>,
  field: string,
  allowed: readonly T[],
): T | undefined {
  const raw = query[field];
  if (raw === undefined || raw === "") return undefined;
  if (typeof raw === "string" && (allowed as readonly string[]).includes(raw)) return raw as T;
  throw invalid(field, `one of ${allowed.join(", ")}`);
}

function readPattern(
  query: Record<string, unknown>,
  field: string,
  re: RegExp,
  what: string,
): string | undefined {
  const raw = query[field];
  if (raw === undefined || raw === "") return undefined;
  if (typeof raw === "string" && re.test(raw)) return raw.toLowerCase();
  throw invalid(field, what);
}

export function readAuditFilter(query: Record<string, unknown>): AuditFilter {
  return {
    fromMs: readTime(query, "from"),
    toMs: readTime(query, "to"),
    kind: readOne<AuditKind>(query, "type", AUDIT_KINDS),
    principal: readPattern(query, "usage_key", /^0x[0-9a-fA-F]{40}$/, "a key's address (0x + 40 hex)"),
    cid: (() => {
      const raw = query.cid;
      if (raw === undefined || raw === "") return undefined;
      if (typeof raw === "string" && /^[A-Za-z0-9]{10,128}$/.test(raw)) return raw;
      throw invalid("cid", "a CID");
    })(),
    pkp: readPattern(query, "pkp", /^0x[0-9a-fA-F]{64}$/, "a PKP id (0x + 64 hex)"),
    outcome: readOne(query, "outcome", OUTCOMES),
  };
}

/** An audit-log entry (relayer/audit/entries.ts): `data` has one shape per kind (docs/audit-log.md). */
const auditEntry = s.out({
  account: s.str(),
  seq: s.int("Gap-free, from 1, per account"),
  prev_hash: s.str("SHA-256 (0x hex) of the previous entry; zeros for the first"),
  hash: s.str("SHA-256 (0x hex) of this entry's canonical JSON"),
  kind: { type: "string", enum: [...AUDIT_KINDS] },
  time_ms: s.int(),
  time: s.str("ISO 8601"),
  data: { type: "object" },
});

const AUDIT_QUERY = [
  {
    name: "from",
    in: "query",
    schema: { type: "string" },
    description: "ms since 1970 or ISO 8601 (inclusive)",
  },
  {
    name: "to",
    in: "query",
    schema: { type: "string" },
    description: "ms since 1970 or ISO 8601 (exclusive)",
  },
  { name: "type", in: "query", schema: { type: "string", enum: [...AUDIT_KINDS] } },
  { name: "usage_key", in: "query", schema: { type: "string" }, description: "The acting key's address" },
  { name: "cid", in: "query", schema: { type: "string" } },
  { name: "pkp", in: "query", schema: { type: "string" }, description: "A PKP id" },
  { name: "outcome", in: "query", schema: { type: "string", enum: [...OUTCOMES] } },
  { name: "cursor", in: "query", schema: { type: "string" } },
  { name: "limit", in: "query", schema: { type: "integer", minimum: 1, maximum: MAX_LIMIT, default: 50 } },
];

const listAudit = endpoint<RelayerContext>("GET", "/audit", {
  caller: "account",
  summary: "The account's audit log, newest first (account key; docs/audit-log.md): filters and a cursor",
  params: AUDIT_QUERY,
  answer: s.out({
    items: s.arr(auditEntry),
    next_cursor: s.nullable(s.str("Pass as `cursor` for the next (older) page; null on the last")),
  }),
  errors: ["owner_only", "invalid_request"],
  async handle(ctx, req, res) {
    const query = req.query as Record<string, unknown>;
    const filter = readAuditFilter(query);
    const cursorRaw = query.cursor;
    let cursor: number | null = null;
    if (cursorRaw !== undefined && cursorRaw !== "") {
      if (typeof cursorRaw !== "string" || !/^[1-9][0-9]{0,15}$/.test(cursorRaw))
        throw invalid("cursor", "the next_cursor of a previous page");
      cursor = Number(cursorRaw);
    }
    const limitRaw = query.limit;
    let limit = 50;
    if (limitRaw !== undefined && limitRaw !== "") {
      if (
        typeof limitRaw !== "string" ||
        !/^[0-9]{1,4}$/.test(limitRaw) ||
        +limitRaw < 1 ||
        +limitRaw > MAX_LIMIT
      )
        throw invalid("limit", `an integer from 1 to ${MAX_LIMIT}`);
      limit = Number(limitRaw);
    }
    const account = authOf(res).principal.accountId;
    if (!ctx.audit) return { body: { items: [], next_cursor: null } };
    // This instance's own entries are in the chain before it reads (read-your-writes).
    await ctx.audit.flush();
    const items = await ctx.audit.store.list(account, filter, cursor, limit + 1);
    const page = items.slice(0, limit);
    return {
      body: {
        items: page.map((e) => ({ ...e, time: new Date(e.time_ms).toISOString() })),
        next_cursor: items.length > limit ? String(page[page.length - 1].seq) : null,
      },
    };
  },
});

const exportAudit = endpoint<RelayerContext>("GET", "/audit/export", {
  caller: "account",
  summary:
    "The verifiable export (JSON Lines: a header, the entries, the signed checkpoints); check it offline with the SDK's verifyAuditExport or `sigil audit verify`",
  params: AUDIT_QUERY.filter((p) => p.name === "from" || p.name === "to"),
  answer: s.str(),
  answerMediaType: "application/x-ndjson",
  errors: ["owner_only", "invalid_request"],
  async handle(ctx, req, res) {
    const query = req.query as Record<string, unknown>;
    const { fromMs, toMs } = readAuditFilter(query);
    const account = authOf(res).principal.accountId;
    if (!ctx.audit)
      throw new ApiError("invalid_request", "The audit log is turned off on this service.", {
        details: { field: "audit" },
      });
    await ctx.audit.flush();
    const lines = exportLines(ctx.audit.store, account, ctx.enclave.attestationIdentity().address, {
      fromMs,
      toMs,
    });
    // The first line is read before the status is sent: a failure there is still a JSON error.
    const first = await lines.next();
    res.status(200);
    res.setHeader("Content-Type", "application/x-ndjson; charset=utf-8");
    res.setHeader("Content-Disposition", `attachment; filename="sigil-audit-${account}.jsonl"`);
    try {
      if (!first.done) res.write(first.value);
      for await (const line of lines) {
        if (!res.write(line)) await new Promise<void>((resolve) => res.once("drain", resolve));
      }
      res.end();
    } catch (err) {
      // Part of the export is already sent: cut the connection so the file cannot pass for whole.
      res.destroy(err as Error);
    }
  },
});

export const AUDIT_ENDPOINTS = [listAudit, exportAudit];
