/**
 * Readers of request values with precise messages: every refusal names the field, what was expected and
 * what was received. Ids have one format everywhere (reference gap 9, docs/background.md): group ids are
 * JSON numbers, PKP ids 0x-prefixed 32-byte hex (lower case), addresses checksummed.
 */
import { getAddress, isHexString, ZeroAddress } from "ethers";
import { parseCid } from "../../enclave";
import { ApiError, type ErrorCode } from "../errors";

const PKP_ID = /^0x[0-9a-fA-F]{64}$/;
const ADDRESS = /^0x[0-9a-fA-F]{40}$/;

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
export function show(v: unknown): string {
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

/** The longest CID the registry stores (its MAX_CID_BYTES). */
const MAX_CID_BYTES = 128;

/** An IPFS CID, in its canonical form. */
export function parseCidField(v: unknown, field: string): string {
  if (typeof v === "string" && v.length > 0 && v.length <= MAX_CID_BYTES)
    try {
      return parseCid(v);
    } catch {
      // not a CID: refused below
    }
  throw invalid(field, "an IPFS CID (e.g. Qm… or bafy…)", v, "invalid_cid");
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
    const n = typeof raw === "string" && /^[0-9]{1,9}$/.test(raw) ? Number(raw) : NaN;
    if (!(n >= min && n <= max))
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
