/**
 * The HTTP guard: the one layer every request passes before any route (billing's included) sees it.
 * It bounds what the rest of the relayer may assume about a request, so no handler has to defend itself
 * against input shapes that could exhaust the stack, the heap or the CPU:
 *
 * - headers: an Idempotency-Key is checked here once for every method; the other headers the API reads
 *   (keys, correlation id, Stripe-Signature) are refused above HEADER_MAX_BYTES;
 * - query strings: at most QUERY_MAX_BYTES, each parameter at most once (a repeated parameter would
 *   reach a handler as an array it never expects);
 * - bodies: read here as raw bytes with the size limit of the route's prefix, refused when compressed
 *   (a compressed body's real size and depth are unknown until inflated) and refused when JSON nesting
 *   is deeper than MAX_JSON_DEPTH. The depth is counted on the bytes, before anything parses or
 *   canonicalises the body, so `JSON.parse`, `JSON.stringify`, the idempotency fingerprint and the
 *   executor's structured clone only ever see bounded nesting.
 *
 * The guard then hands the body on as later middleware expects it: parsed JSON in `req.body` (strict, as
 * express.json parses it), the raw Buffer for the billing webhook (its signature covers the bytes), and
 * nothing for other content types (app.ts answers 415). body-parser skips a request whose stream is
 * already read, so billing's own parsers see exactly what the guard left.
 */
import type { NextFunction, Request, RequestHandler, Response } from "express";
import getRawBody from "raw-body";
import { keepRawBody } from "./signedRequest";
import { ApiError } from "../errors";
import { validateIdempotencyKey } from "../idempotency";

/** Deepest JSON nesting accepted anywhere in a body (`{"js_params": {...}}` counts the outer object). */
export const MAX_JSON_DEPTH = 32;
/** Longest query string (after `?`) accepted: the API's queries are two small integers. */
export const QUERY_MAX_BYTES = 1024;
/** Longest value of a header the API reads (keys are under 80 bytes; Node caps all headers at 16 KiB). */
export const HEADER_MAX_BYTES = 1024;
const CHECKED_HEADERS = [
  "x-api-key",
  "authorization",
  "x-correlation-id",
  "x-operator-token",
  "stripe-signature",
];

const BILLING_PREFIX = "/core/v1/billing";
const BILLING_WEBHOOK = "/core/v1/billing/webhook";

export interface GuardOptions {
  /** Body limit of every route outside billing (config `maxBodyBytes`). */
  maxBodyBytes: number;
}

export function httpGuard(opts: GuardOptions): RequestHandler {
  return (req: Request, _res: Response, next: NextFunction) => {
    try {
      checkHeaders(req);
      checkQuery(req.originalUrl);
    } catch (err) {
      next(err);
      return;
    }
    if (!hasBody(req)) {
      next();
      return;
    }
    // Once per request: the body's limit and what it is handed on as both depend on it.
    const path = routePath(req);
    readBody(req, bodyLimit(path, opts.maxBodyBytes)).then(
      (raw) => {
        try {
          assertJsonDepth(raw, MAX_JSON_DEPTH);
          handOn(req, path, raw);
          next();
        } catch (err) {
          next(err);
        }
      },
      (err: unknown) => next(err),
    );
  };
}

function checkHeaders(req: Request): void {
  for (const name of CHECKED_HEADERS) {
    const v = req.headers[name];
    if (v !== undefined && Buffer.byteLength(String(v), "latin1") > HEADER_MAX_BYTES) {
      throw new ApiError("header_too_long", `The ${name} header is longer than ${HEADER_MAX_BYTES} bytes.`, {
        details: { header: name, max: HEADER_MAX_BYTES },
      });
    }
  }
  // Validated for every method (not only the POSTs that use it), so an absurd value is never logged,
  // hashed or stored anywhere.
  validateIdempotencyKey(req.get("idempotency-key"));
}

function checkQuery(url: string): void {
  const at = url.indexOf("?");
  if (at < 0) return;
  const query = url.slice(at + 1);
  if (query.length > QUERY_MAX_BYTES) {
    throw new ApiError("invalid_query", `The query string is longer than ${QUERY_MAX_BYTES} bytes.`, {
      details: { max: QUERY_MAX_BYTES },
    });
  }
  const seen = new Set<string>();
  for (const pair of query.split("&")) {
    if (pair === "") continue;
    const name = safeDecode(pair.split("=", 1)[0]);
    if (seen.has(name)) {
      throw new ApiError("invalid_query", `The query parameter \`${name.slice(0, 64)}\` is repeated.`, {
        details: { parameter: name.slice(0, 64) },
      });
    }
    seen.add(name);
  }
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s.replace(/\+/g, " "));
  } catch {
    return s;
  }
}

/** Same rule as body-parser: a Content-Length above 0 or a Transfer-Encoding means a body follows. */
function hasBody(req: Request): boolean {
  if (req.headers["transfer-encoding"] !== undefined) return true;
  const length = req.headers["content-length"];
  return length !== undefined && length !== "0" && !Number.isNaN(Number(length));
}

/** The path as express routes it: case-insensitive, with an optional trailing slash. */
function routePath(req: Request): string {
  return req.path.toLowerCase().replace(/\/+$/, "");
}

/** Billing keeps the limits its own parsers had before the guard read the bodies for them. */
function bodyLimit(path: string, maxBodyBytes: number): number {
  if (path === BILLING_WEBHOOK) return 512 * 1024;
  if (path.startsWith(BILLING_PREFIX + "/") || path === BILLING_PREFIX) return 16 * 1024;
  return maxBodyBytes;
}

async function readBody(req: Request, limit: number): Promise<Buffer> {
  const encoding = (req.headers["content-encoding"] ?? "identity").toLowerCase();
  if (encoding !== "identity") {
    throw new ApiError(
      "unsupported_media_type",
      "Compressed request bodies are not accepted; send the JSON uncompressed.",
    );
  }
  // raw-body's errors carry body-parser's `type`s (entity.too.large, request.aborted, ...), which
  // errorHandler already maps to 413 payload_too_large / 400 invalid_request.
  return getRawBody(req, { length: req.headers["content-length"], limit });
}

/**
 * Refuses JSON nested deeper than `max`, counting on the raw bytes: brackets inside strings (and
 * escaped quotes) are skipped. UTF-8 continuation bytes are all >= 0x80, so no multi-byte character can
 * be mistaken for a bracket or a quote. Invalid JSON is not this function's business: JSON.parse
 * refuses it after.
 */
export function assertJsonDepth(bytes: Uint8Array, max: number): void {
  // Buffer's indexOf is memchr; a plain Uint8Array's is a generic (much slower) builtin.
  const raw = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let depth = 0;
  for (let i = 0; i < raw.length; i++) {
    const b = raw[i];
    if (b === 0x22 /* " */) {
      i = endOfString(raw, i);
      if (i < 0) return;
    } else if (b === 0x7b /* { */ || b === 0x5b /* [ */) {
      if (++depth > max) {
        throw new ApiError("json_too_deep", `The JSON body is nested deeper than ${max} levels.`, {
          details: { max_depth: max },
        });
      }
    } else if (b === 0x7d /* } */ || b === 0x5d /* ] */) depth--;
  }
}

/**
 * Index of the quote closing the string that opens at `open`, or -1 if none does. Short strings (keys,
 * ids) are stepped through byte by byte; past SHORT_STRING bytes the search for the next quote is
 * native memchr (Buffer.indexOf), so long strings such as inline code cost little. A quote preceded by
 * an odd number of backslashes is escaped, wherever the search started.
 */
const SHORT_STRING = 1024;

function endOfString(raw: Buffer, open: number): number {
  const stepEnd = Math.min(raw.length, open + 1 + SHORT_STRING);
  let at = open + 1;
  for (; at < stepEnd; at++) {
    const b = raw[at];
    if (b === 0x5c) at++;
    else if (b === 0x22) return at;
  }
  for (;;) {
    const quote = raw.indexOf(0x22, at);
    if (quote < 0) return -1;
    let backslashes = 0;
    for (let k = quote - 1; k > open && raw[k] === 0x5c; k--) backslashes++;
    if (backslashes % 2 === 0) return quote;
    at = quote + 1;
  }
}

function isJsonType(req: Request): boolean {
  const type = (req.headers["content-type"] ?? "").split(";")[0].trim().toLowerCase();
  return type === "application/json" || (type.startsWith("application/") && type.endsWith("+json"));
}

function handOn(req: Request, path: string, raw: Buffer): void {
  // The bytes are decoded as UTF-8 (JSON's only interchange encoding); a body declared in another
  // charset would be misread, so it is refused as express.json refused it.
  const charset = /;\s*charset=("?)([^";]+)\1/i.exec(req.headers["content-type"] ?? "")?.[2].toLowerCase();
  if (charset !== undefined && charset !== "utf-8" && charset !== "utf8") {
    throw new ApiError("unsupported_media_type", "Unsupported charset; send UTF-8 JSON.");
  }
  // Signed requests cover the exact body bytes (relayer/http/signedRequest.ts reads them back).
  keepRawBody(req, undefined, raw);
  if (path === BILLING_WEBHOOK) {
    req.body = raw;
    return;
  }
  // Billing's routes read any content type as JSON (their parser had `type: () => true`).
  if (isJsonType(req) || path.startsWith(BILLING_PREFIX + "/")) req.body = parseStrictJson(raw);
}

/** express.json's strict mode: an empty body is {}, anything but an object or array is invalid. */
function parseStrictJson(raw: Buffer): unknown {
  const text = raw.toString("utf8");
  if (text.trim() === "") return {};
  const first = text.trimStart()[0];
  if (first !== "{" && first !== "[") throw invalidJson();
  try {
    return JSON.parse(text);
  } catch {
    throw invalidJson();
  }
}

function invalidJson(): ApiError {
  return new ApiError("invalid_json", "The request body is not valid JSON.");
}
