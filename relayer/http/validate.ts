/**
 * Request validation with precise messages: every refusal names the field, what was expected and what was
 * received, and unknown fields are refused (a typo such as `exeucte_in_groups` silently granting nothing
 * would be worse than an error). Ids have one format everywhere (reference gap 9, docs/background.md): group ids are JSON
 * numbers, PKP ids 0x-prefixed 32-byte hex (lower case), addresses checksummed.
 */
import { getAddress, isHexString, ZeroAddress } from "ethers";
import { ApiError, type ErrorCode } from "../errors";

const PKP_ID = /^0x[0-9a-fA-F]{64}$/;
const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
/** With the `u` flag, paired surrogates form one code point, so only unpaired ones match. */
const LONE_SURROGATE = /\p{Cs}/u;

export function invalid(
  field: string,
  expected: string,
  got: unknown,
  code: ErrorCode = "invalid_request",
): ApiError {
  return new ApiError(code, `\`${field}\` must be ${expected} (got ${show(got)}).`, {
    details: { field },
  });
}

/** A short, safe rendering of a received value for error messages (never long, never a key). */
function show(v: unknown): string {
  if (v === undefined) return "nothing";
  if (v === null) return "null";
  if (Array.isArray(v)) return `an array of ${v.length}`;
  if (typeof v === "object") return "an object";
  if (typeof v === "string") {
    if (/^(ak_|uk_)/.test(v) || /^(0x)?[0-9a-fA-F]{64}$/.test(v)) return `a string of ${v.length} characters`;
    return v.length > 40 ? `a string of ${v.length} characters` : JSON.stringify(v);
  }
  return `${typeof v} ${String(v)}`;
}

export function parseGroupId(v: unknown, field: string, allowWildcard = false): number {
  let n: number | undefined;
  if (typeof v === "number") n = v;
  else if (typeof v === "string" && /^[0-9]{1,16}$/.test(v)) n = Number(v);
  const min = allowWildcard ? 0 : 1;
  if (n === undefined || !Number.isSafeInteger(n) || n < min) {
    throw invalid(
      field,
      allowWildcard ? "a group id: an integer >= 0 (0 = every group)" : "a group id: an integer >= 1",
      v,
      "invalid_group_id",
    );
  }
  return n;
}

/** Canonical PKP id: 0x + 64 lower-case hex digits. */
export function parsePkpId(v: unknown, field: string): string {
  if (typeof v !== "string" || !PKP_ID.test(v))
    throw invalid(field, "a PKP id: 0x followed by 64 hex digits", v, "invalid_pkp_id");
  if (/^0x0{64}$/.test(v)) throw invalid(field, "a PKP id other than zero", v, "invalid_pkp_id");
  return v.toLowerCase();
}

export function isPkpAddress(v: unknown): v is string {
  return typeof v === "string" && ADDRESS.test(v);
}

export function parseAddress(v: unknown, field: string): string {
  if (typeof v !== "string" || !ADDRESS.test(v) || !isHexString(v, 20)) {
    throw invalid(field, "an address: 0x followed by 40 hex digits", v, "invalid_address");
  }
  let addr: string;
  try {
    addr = getAddress(v);
  } catch {
    // Mixed case with a wrong checksum: refuse, it is most likely a typo.
    throw invalid(field, "an address with a valid EIP-55 checksum (or all lower case)", v, "invalid_address");
  }
  if (addr === ZeroAddress) throw invalid(field, "a non-zero address", v, "invalid_address");
  return addr;
}

export interface Page {
  pageNumber: number;
  pageSize: number;
}

export function parsePage(query: Record<string, unknown>, maxPageSize: number, defaultSize = 20): Page {
  const read = (name: string, def: number, min: number, max: number): number => {
    const raw = query[name];
    if (raw === undefined || raw === "") return def;
    if (typeof raw !== "string" || !/^[0-9]{1,9}$/.test(raw)) {
      throw invalid(name, `an integer from ${min} to ${max}`, raw, "invalid_pagination");
    }
    const n = Number(raw);
    if (n < min || n > max)
      throw invalid(name, `an integer from ${min} to ${max}`, raw, "invalid_pagination");
    return n;
  };
  return {
    pageNumber: read("page_number", 0, 0, 1e9),
    pageSize: read("page_size", defaultSize, 1, maxPageSize),
  };
}

export function paginate<T>(
  all: T[],
  page: Page,
): { items: T[]; page_number: number; page_size: number; total: number } {
  const start = page.pageNumber * page.pageSize;
  return {
    items: all.slice(start, start + page.pageSize),
    page_number: page.pageNumber,
    page_size: page.pageSize,
    total: all.length,
  };
}

/** Reads a JSON object body field by field and refuses fields nobody read. */
export class BodyReader {
  private readonly body: Record<string, unknown>;
  private readonly read = new Set<string>();

  constructor(body: unknown) {
    if (body === undefined) body = {};
    if (body === null || typeof body !== "object" || Array.isArray(body)) {
      throw new ApiError("invalid_request", `The body must be a JSON object (got ${show(body)}).`);
    }
    this.body = body as Record<string, unknown>;
  }

  has(name: string): boolean {
    return this.body[name] !== undefined;
  }

  raw(name: string): unknown {
    this.read.add(name);
    return this.body[name];
  }

  string(name: string, opts: { required?: boolean; max: number; nonEmpty?: boolean; def?: string }): string {
    const v = this.raw(name);
    if (v === undefined || v === null) {
      if (opts.required) throw invalid(name, "a string", v);
      return opts.def ?? "";
    }
    if (typeof v !== "string") throw invalid(name, "a string", v);
    // JSON may carry an unpaired surrogate ("\ud800"); no UTF-8 encoder (ethers' included) can encode
    // it, so it would fail deep inside a write instead of here.
    if (LONE_SURROGATE.test(v)) throw invalid(name, "well-formed Unicode text (no unpaired surrogate)", v);
    if (opts.nonEmpty && v.trim() === "") throw invalid(name, "a non-empty string", v);
    if (Buffer.byteLength(v, "utf8") > opts.max) {
      throw new ApiError("string_too_long", `\`${name}\` is longer than ${opts.max} bytes.`, {
        details: { field: name, max: opts.max },
      });
    }
    return v;
  }

  optionalString(name: string, max: number): string | undefined {
    if (this.body[name] === undefined || this.body[name] === null) {
      this.read.add(name);
      return undefined;
    }
    return this.string(name, { max });
  }

  bool(name: string, def = false): boolean {
    const v = this.raw(name);
    if (v === undefined || v === null) return def;
    if (typeof v !== "boolean") throw invalid(name, "true or false", v);
    return v;
  }

  array(name: string, maxEntries: number): unknown[] {
    const v = this.raw(name);
    if (v === undefined || v === null) return [];
    if (!Array.isArray(v)) throw invalid(name, "an array", v);
    if (v.length > maxEntries) {
      throw new ApiError(
        "too_many_entries",
        `\`${name}\` has ${v.length} entries; at most ${maxEntries} are allowed.`,
        {
          details: { field: name, max: maxEntries },
        },
      );
    }
    return v;
  }

  /** A permission array of group ids: 0 is the wildcard. Duplicates are dropped, order kept. */
  groupIds(name: string, maxEntries: number): number[] {
    const ids = this.array(name, maxEntries).map((x, i) => parseGroupId(x, `${name}[${i}]`, true));
    return [...new Set(ids)];
  }

  /** Unix seconds in the future, or null/absent for "never" (0 on chain). */
  expiration(name: string, nowSeconds: number): number {
    const v = this.raw(name);
    if (v === undefined || v === null || v === 0) return 0;
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0 || v > 2 ** 63) {
      throw invalid(name, "unix time in seconds (an integer), or null for no expiration", v);
    }
    if (v <= nowSeconds) {
      throw new ApiError(
        "expiration_in_past",
        `\`${name}\` (${v}) is not in the future (now is ${nowSeconds}).`,
        { details: { field: name } },
      );
    }
    return v;
  }

  /** A per-key spend cap in cents (a non-negative integer), or null/absent for no cap. */
  spendCap(name: string): number | null {
    const v = this.raw(name);
    if (v === undefined || v === null) return null;
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) {
      throw invalid(name, "a non-negative integer number of cents, or null for no cap", v);
    }
    return v;
  }

  /** Refuse any field that no reader asked for. */
  done(): void {
    for (const k of Object.keys(this.body)) {
      if (!this.read.has(k)) {
        throw new ApiError("unknown_field", `Unknown field \`${k.slice(0, 64)}\`.`, {
          details: { field: k.slice(0, 64) },
        });
      }
    }
  }
}
