/**
 * Request bodies are checked against their endpoint's declared `body` schema before the handler runs
 * (`declaredRouter`), so the schema the OpenAPI document shows is the rule the service applies. A schema
 * is compiled once, at registration, into one reader per field; the handler receives the read body.
 *
 * The house's subset of JSON Schema, and what each part answers when a body breaks it:
 * - the body is an object (`invalid_request`) whose fields are `properties` (`additionalProperties:
 *   false`: any other is `unknown_field`, reported after every declared field was read, so a typo and
 *   a bad value answer the bad value); `required` fields must be there (`invalid_request`);
 * - null means absent unless the field's schema is nullable (`oneOf: [X, {type: "null"}]`); an absent
 *   field takes its `default`, or stays undefined;
 * - `type` string, boolean, integer (`minimum`, `maximum`), array (`items`; `maxItems` answers
 *   `too_many_entries`); a schema with no type (a `$ref`, `{}`) is handed on as sent;
 * - `format` names an id whose parser gives the id's own code: cid (`invalid_cid`), pkp-id and pkp-ref
 *   (an id or an address; `invalid_pkp_id`), group-id (0 is the wildcard; `invalid_group_id`), address
 *   (EIP-55 checksummed; `invalid_address`); `expiration` (future unix seconds, `expiration_in_past`);
 * - the house's keywords: `x-sigil-max-bytes` (UTF-8 bytes of a string; `string_too_long`, or the code
 *   `x-sigil-too-large` names), `x-sigil-non-blank` (a string with a non-space character) and, on the
 *   body, `x-sigil-exactly-one` (exactly one of these fields is sent; checked first).
 * Every string is also refused if it holds an unpaired surrogate, which no UTF-8 encoder can write.
 * A rule no schema can say (a limit from the configuration, a field parsed by its own module) is a
 * named check in the declaration's `checks`, which reads that field instead.
 */
import { ApiError, type ErrorCode } from "../errors";
import {
  invalid,
  isPkpAddress,
  parseAddress,
  parseCidField,
  parseGroupId,
  parsePkpId,
  show,
} from "../http/validate";

/** A JSON Schema object (the same as endpoint.ts's, which imports this module). */
type Schema = Record<string, unknown>;

/** Reads one field's value (never undefined or an unwanted null: those are handled before). */
type Reader = (v: unknown, field: string) => unknown;
/** A declaration's own check of one field: it receives what was sent (undefined when nothing). */
export type FieldCheck<C> = (v: unknown, c: C) => unknown;
/** A compiled body schema: the read body, or the first refusal thrown as an ApiError. */
export type BodyValidator<C> = (body: unknown, c: C) => Record<string, unknown>;

/** With the `u` flag, paired surrogates form one code point, so only unpaired ones match. */
const LONE_SURROGATE = /\p{Cs}/u;

/** Each id format: its reader, and the code it refuses a value with (`bodyErrors` lists it). */
const FORMATS: Record<string, { read: Reader; code: ErrorCode }> = {
  cid: { read: parseCidField, code: "invalid_cid" },
  "pkp-id": { read: parsePkpId, code: "invalid_pkp_id" },
  // An address is resolved against the account by the handler (it needs the account's PKPs).
  "pkp-ref": { read: (v, field) => (isPkpAddress(v) ? v : parsePkpId(v, field)), code: "invalid_pkp_id" },
  "group-id": { read: (v, field) => parseGroupId(v, field, true), code: "invalid_group_id" },
  address: { read: parseAddress, code: "invalid_address" },
  // A value that is no unix time at all is invalid_request, which every body can answer anyway.
  expiration: { read: readExpiration, code: "expiration_in_past" },
};

/** Unix seconds in the future; 0 stays 0 ("never", like null). */
function readExpiration(v: unknown, field: string): number {
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0 || v > 2 ** 63)
    throw invalid(field, "unix time in seconds (an integer), or null for no expiration", v);
  const now = Math.floor(Date.now() / 1000);
  if (v !== 0 && v <= now)
    throw new ApiError("expiration_in_past", `\`${field}\` (${v}) is not in the future (now is ${now}).`, {
      details: { field },
    });
  return v;
}

/** The schema inside `oneOf: [X, {type: "null"}]`, or undefined when the schema is not nullable. */
function nullableInner(s: Schema): Schema | undefined {
  const alts = s.oneOf as Schema[] | undefined;
  if (!alts || alts.length !== 2 || !alts.some((a) => a.type === "null")) return undefined;
  return alts.find((a) => a.type !== "null");
}

/** What a string over its `x-sigil-max-bytes` answers. */
const tooLargeCode = (s: Schema): ErrorCode =>
  (s["x-sigil-too-large"] as ErrorCode | undefined) ?? "string_too_long";

function stringReader(s: Schema): Reader {
  const maxBytes = s["x-sigil-max-bytes"] as number | undefined;
  const tooLarge = tooLargeCode(s);
  const nonBlank = s["x-sigil-non-blank"] === true;
  const values = s.enum as unknown[] | undefined;
  return (v, field) => {
    if (typeof v !== "string") throw invalid(field, "a string", v);
    if (LONE_SURROGATE.test(v)) throw invalid(field, "well-formed Unicode text (no unpaired surrogate)", v);
    if (nonBlank && v.trim() === "") throw invalid(field, "a non-empty string", v);
    if (maxBytes !== undefined && Buffer.byteLength(v, "utf8") > maxBytes)
      throw new ApiError(tooLarge, `\`${field}\` is longer than ${maxBytes} bytes.`, {
        details: { field, max: maxBytes },
      });
    if (values && !values.includes(v)) throw invalid(field, `one of ${values.join(", ")}`, v);
    return v;
  };
}

function integerReader(s: Schema): Reader {
  const min = s.minimum as number | undefined;
  const max = s.maximum as number | undefined;
  const expected =
    min !== undefined && max !== undefined
      ? `an integer from ${min} to ${max}`
      : min !== undefined
        ? `an integer >= ${min}`
        : "an integer";
  return (v, field) => {
    if (typeof v !== "number" || !Number.isSafeInteger(v)) throw invalid(field, expected, v);
    if ((min !== undefined && v < min) || (max !== undefined && v > max)) throw invalid(field, expected, v);
    return v;
  };
}

function arrayReader(s: Schema): Reader {
  const item = readerOf((s.items as Schema | undefined) ?? {});
  const maxItems = s.maxItems as number | undefined;
  return (v, field) => {
    if (!Array.isArray(v)) throw invalid(field, "an array", v);
    if (maxItems !== undefined && v.length > maxItems)
      throw new ApiError(
        "too_many_entries",
        `\`${field}\` has ${v.length} entries; at most ${maxItems} are allowed.`,
        { details: { field, max: maxItems } },
      );
    return v.map((x, i) => item(x, `${field}[${i}]`));
  };
}

/** The reader of a value of this schema (a field's, or an array item's). */
function readerOf(s: Schema): Reader {
  const format = s.format as string | undefined;
  if (format !== undefined && FORMATS[format]) return FORMATS[format].read;
  switch (s.type) {
    case "string":
      return stringReader(s);
    case "integer":
      return integerReader(s);
    case "boolean":
      return (v, field) => {
        if (typeof v !== "boolean") throw invalid(field, "true or false", v);
        return v;
      };
    case "array":
      return arrayReader(s);
    default:
      return (v) => v;
  }
}

/** The codes the reader of this schema (`readerOf`) refuses a value with, beyond invalid_request. */
function valueErrors(s: Schema, codes: Set<ErrorCode>): void {
  const format = FORMATS[s.format as string];
  if (format) codes.add(format.code);
  else if (s.type === "string" && s["x-sigil-max-bytes"] !== undefined) codes.add(tooLargeCode(s));
  else if (s.type === "array") {
    if (s.maxItems !== undefined) codes.add("too_many_entries");
    valueErrors((s.items as Schema | undefined) ?? {}, codes);
  }
}

/**
 * Every code reading a body by this schema can answer, derived from the schema the reader is compiled
 * from, so the endpoint's OpenAPI operation (endpoint.ts) cannot miss one or list one the body cannot
 * cause. A field the declaration checks itself (`checked`) is read by its check, which is the
 * declaration's to list.
 */
export function bodyErrors(schema: Schema, checked: readonly string[] = []): ErrorCode[] {
  const codes = new Set<ErrorCode>(["invalid_request"]);
  if (schema.additionalProperties === false) codes.add("unknown_field");
  for (const [name, s] of Object.entries((schema.properties ?? {}) as Record<string, Schema>))
    if (!checked.includes(name)) valueErrors(nullableInner(s) ?? s, codes);
  return [...codes];
}

interface FieldPlan<C> {
  name: string;
  required: boolean;
  nullable: boolean;
  hasDefault: boolean;
  def: unknown;
  read: Reader;
  /** Read by a `format` (which refuses a missing value with its own code). */
  formatted: boolean;
  /** The declaration's own check: it reads the field as sent, absent or null included. */
  check?: FieldCheck<C>;
}

/** Compiles an object body schema, with the declaration's own checks for some of its fields. */
export function compileBody<C>(schema: Schema, checks: Record<string, FieldCheck<C>> = {}): BodyValidator<C> {
  if (schema.type !== "object") throw new Error("a request body is declared as an object schema");
  const properties = (schema.properties ?? {}) as Record<string, Schema>;
  const required = new Set((schema.required ?? []) as string[]);
  for (const name of Object.keys(checks))
    if (!(name in properties)) throw new Error(`a check for \`${name}\`, which the body does not declare`);
  const fields: FieldPlan<C>[] = Object.entries(properties).map(([name, s]) => {
    const inner = nullableInner(s);
    return {
      name,
      required: required.has(name),
      nullable: inner !== undefined,
      hasDefault: "default" in s,
      def: s.default,
      read: readerOf(inner ?? s),
      formatted: FORMATS[(inner ?? s).format as string] !== undefined,
      check: Object.prototype.hasOwnProperty.call(checks, name) ? checks[name] : undefined,
    };
  });
  const known = new Set(Object.keys(properties));
  const open = schema.additionalProperties !== false;
  const exactlyOne = schema["x-sigil-exactly-one"] as string[] | undefined;
  return (raw, c) => {
    const body = raw === undefined ? {} : raw;
    if (body === null || typeof body !== "object" || Array.isArray(body))
      throw new ApiError("invalid_request", `The body must be a JSON object (got ${show(body)}).`);
    const sent = body as Record<string, unknown>;
    if (exactlyOne && countSent(sent, exactlyOne) !== 1)
      throw new ApiError(
        "invalid_request",
        `Send exactly one of ${exactlyOne.map((f) => `\`${f}\``).join(" and ")}.`,
        { details: { field: exactlyOne[0] } },
      );
    const out: Record<string, unknown> = {};
    for (const f of fields) {
      const v = sent[f.name];
      if (f.check) out[f.name] = f.check(v, c);
      else if (f.nullable && v === null) out[f.name] = null;
      else if (v !== undefined && v !== null) out[f.name] = f.read(v, f.name);
      else if (f.required) {
        // A required id left out answers its format's code (invalid_address, …), like a bad one.
        if (f.formatted) f.read(v, f.name);
        throw invalid(f.name, "sent", v);
      }
      // A fresh copy of an array default, so no handler can change the declaration's.
      else if (f.hasDefault) out[f.name] = structuredClone(f.def);
    }
    if (!open)
      for (const k of Object.keys(sent))
        if (!known.has(k))
          throw new ApiError("unknown_field", `Unknown field \`${k.slice(0, 64)}\`.`, {
            details: { field: k.slice(0, 64) },
          });
    return out;
  };
}

/** How many of `fields` were sent (null counts as not sent). */
function countSent(sent: Record<string, unknown>, fields: string[]): number {
  let n = 0;
  for (const f of fields) if (sent[f] !== undefined && sent[f] !== null) n++;
  return n;
}
