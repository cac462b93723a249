/**
 * The signing-policy document: its JSON Schema (served in the OpenAPI document and used to validate
 * uploads) and the typed form the evaluator reads. docs/policies.md explains the rule language.
 *
 * The schema is closed (`additionalProperties: false` everywhere): a misspelt condition would otherwise
 * be ignored, and a rule the author believes restricts something would allow it.
 */
import Ajv, { type ErrorObject } from "ajv";

export const OPERATION_KINDS = [
  "transaction",
  "typedData",
  "message",
  "digest",
  "keyExport",
  "encrypt",
  "decrypt",
  "ed25519",
  "schnorr",
] as const;
export type OperationKind = (typeof OPERATION_KINDS)[number];

export const ERC20_METHODS = ["transfer", "approve", "transferFrom"] as const;
export type Erc20Method = (typeof ERC20_METHODS)[number];

/** A set of addresses a value must be in, or must not be in (exactly one of the two). */
export type AddressSet = { in: string[] } | { notIn: string[] };

/** Inclusive bounds on an unsigned integer, written as decimal strings (wei, token base units). */
export interface AmountRange {
  min?: string;
  max?: string;
}

export interface TimeCondition {
  /** UTC days of the week, 0 = Sunday. */
  days?: number[];
  /** UTC hours [from, to): from 0..23, to 1..24; from > to wraps past midnight. */
  hours?: { from: number; to: number };
}

/**
 * At most `maxCount` signatures and at most `maxValue` in total (wei, or the rule's token's base units)
 * per PKP over the last `seconds` (rolling), counted per chain and per token (window.ts).
 */
export interface PolicyWindow {
  seconds: number;
  maxCount?: number;
  maxValue?: string;
}

export interface PolicyRule {
  name: string;
  effect: "allow" | "deny";
  operation: OperationKind;
  time?: TimeCondition;
  // transaction
  chainIds?: number[];
  to?: AddressSet;
  contractCreation?: boolean;
  value?: AmountRange;
  selectors?: string[];
  erc20?: { token: string; methods?: Erc20Method[]; recipients?: AddressSet; amount?: AmountRange };
  // typedData
  domain?: { chainIds?: number[]; verifyingContracts?: AddressSet; names?: string[] };
  primaryTypes?: string[];
  permit?: { token: string; spenders?: AddressSet; amount?: AmountRange };
  // message
  prefix?: string;
  // ed25519: what a Solana transaction message may do (docs/policies.md, "ed25519")
  solana?: { programIds?: string[]; maxLamports?: string };
  // schnorr: what a Taproot input's transaction may pay (docs/policies.md, "schnorr")
  bitcoin?: { outputScripts?: string[]; maxAmount?: string };
  // allow rules of the signing operations
  window?: PolicyWindow;
}

export interface Policy {
  version: 1;
  description?: string;
  rules: PolicyRule[];
}

const address = { type: "string", pattern: "^0x[0-9a-fA-F]{40}$" } as const;
const addressList = { type: "array", items: address, minItems: 1, maxItems: 256 } as const;
const addressSet = {
  type: "object",
  additionalProperties: false,
  minProperties: 1,
  maxProperties: 1,
  properties: { in: addressList, notIn: addressList },
} as const;
const uint = { type: "string", pattern: "^(0|[1-9][0-9]{0,77})$" } as const;
const amountRange = {
  type: "object",
  additionalProperties: false,
  minProperties: 1,
  properties: { min: uint, max: uint },
} as const;
const chainIds = {
  type: "array",
  minItems: 1,
  maxItems: 64,
  items: { type: "integer", minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
} as const;

/** Conditions allowed per operation kind (besides `time`, which every rule may carry). */
export const CONDITIONS_BY_OPERATION: Record<OperationKind, readonly string[]> = {
  transaction: ["chainIds", "to", "contractCreation", "value", "selectors", "erc20", "window"],
  typedData: ["domain", "primaryTypes", "permit", "window"],
  message: ["prefix", "window"],
  digest: ["window"],
  keyExport: [],
  encrypt: [],
  decrypt: [],
  ed25519: ["solana"],
  schnorr: ["bitcoin"],
};

const ruleProperties = {
  name: { type: "string", pattern: "^[A-Za-z0-9_.:-]{1,64}$" },
  effect: { enum: ["allow", "deny"] },
  operation: { enum: [...OPERATION_KINDS] },
  time: {
    type: "object",
    additionalProperties: false,
    minProperties: 1,
    properties: {
      days: {
        type: "array",
        minItems: 1,
        maxItems: 7,
        uniqueItems: true,
        items: { type: "integer", minimum: 0, maximum: 6 },
      },
      hours: {
        type: "object",
        additionalProperties: false,
        required: ["from", "to"],
        properties: {
          from: { type: "integer", minimum: 0, maximum: 23 },
          to: { type: "integer", minimum: 1, maximum: 24 },
        },
      },
    },
  },
  chainIds,
  to: addressSet,
  contractCreation: { type: "boolean" },
  value: amountRange,
  selectors: {
    type: "array",
    minItems: 1,
    maxItems: 256,
    items: { type: "string", pattern: "^0x([0-9a-fA-F]{8})?$" },
  },
  erc20: {
    type: "object",
    additionalProperties: false,
    required: ["token"],
    properties: {
      token: address,
      methods: {
        type: "array",
        minItems: 1,
        uniqueItems: true,
        items: { enum: [...ERC20_METHODS] },
      },
      recipients: addressSet,
      amount: amountRange,
    },
  },
  domain: {
    type: "object",
    additionalProperties: false,
    minProperties: 1,
    properties: {
      chainIds,
      verifyingContracts: addressSet,
      names: { type: "array", minItems: 1, maxItems: 64, items: { type: "string", maxLength: 256 } },
    },
  },
  primaryTypes: {
    type: "array",
    minItems: 1,
    maxItems: 64,
    items: { type: "string", pattern: "^[A-Za-z_$][A-Za-z0-9_$]{0,127}$" },
  },
  permit: {
    type: "object",
    additionalProperties: false,
    required: ["token"],
    properties: { token: address, spenders: addressSet, amount: amountRange },
  },
  prefix: { type: "string", minLength: 1, maxLength: 1024 },
  solana: {
    type: "object",
    description:
      "A Solana transaction message: the programs its instructions may call, and the most lamports its System transfers may move",
    additionalProperties: false,
    minProperties: 1,
    properties: {
      programIds: {
        type: "array",
        minItems: 1,
        maxItems: 256,
        uniqueItems: true,
        items: { type: "string", pattern: "^[1-9A-HJ-NP-Za-km-z]{32,44}$" },
      },
      maxLamports: uint,
    },
  },
  bitcoin: {
    type: "object",
    description:
      "A Taproot input's transaction: the output scripts it may pay (0x-hex; change back to the PKP is not counted) and the most satoshis it may pay them",
    additionalProperties: false,
    minProperties: 1,
    properties: {
      outputScripts: {
        type: "array",
        minItems: 1,
        maxItems: 256,
        items: { type: "string", pattern: "^0x([0-9a-fA-F]{2}){1,520}$" },
      },
      maxAmount: uint,
    },
  },
  window: {
    type: "object",
    description:
      "At most maxCount signatures and at most maxValue in total per PKP over the last `seconds` (rolling), per chain and per token; allow rules only",
    additionalProperties: false,
    required: ["seconds"],
    // `seconds` and at least one bound (the other fields are those three only).
    minProperties: 2,
    properties: {
      seconds: { type: "integer", minimum: 1, maximum: 366 * 24 * 3600 },
      maxCount: { type: "integer", minimum: 1, maximum: 10_000 },
      maxValue: uint,
    },
  },
} as const;

/** Each operation kind admits its own conditions only: `prefix` on a transaction rule is an error. */
function ruleFor(kind: OperationKind): object {
  const allowed = ["name", "effect", "operation", "time", ...CONDITIONS_BY_OPERATION[kind]];
  return {
    if: { properties: { operation: { const: kind } }, required: ["operation"] },
    then: { propertyNames: { enum: allowed } },
  };
}

export const POLICY_SCHEMA = {
  $id: "https://sigil.dev/schemas/policy-v1.json",
  title: "Signing policy",
  description:
    "What the PKPs of a group may sign. Deny wins inside a policy; an operation no allow rule matches is denied.",
  type: "object",
  additionalProperties: false,
  required: ["version", "rules"],
  properties: {
    version: { const: 1 },
    description: { type: "string", maxLength: 1024 },
    rules: {
      type: "array",
      minItems: 1,
      maxItems: 128,
      items: {
        type: "object",
        additionalProperties: false,
        required: ["name", "effect", "operation"],
        properties: ruleProperties,
        allOf: OPERATION_KINDS.map(ruleFor),
      },
    },
  },
} as const;

const ajv = new Ajv({ allErrors: true, strict: false });
const validate = ajv.compile(POLICY_SCHEMA);

/** Largest policy document accepted, in bytes of JSON. */
export const MAX_POLICY_BYTES = 64 * 1024;

export type PolicyCheck = { ok: true; policy: Policy } | { ok: false; errors: string[] };

function describe(e: ErrorObject): string {
  const where = e.instancePath === "" ? "the document" : e.instancePath;
  if (e.keyword === "additionalProperties")
    return `${where}: unknown field "${(e.params as { additionalProperty: string }).additionalProperty}"`;
  if (e.keyword === "propertyNames")
    return `${where}: "${(e.params as { propertyName: string }).propertyName}" is not a condition of this rule's operation`;
  if (e.keyword === "minProperties" && e.instancePath.endsWith("/window"))
    return `${where}: a window needs maxCount, maxValue or both`;
  if (e.keyword === "enum" && e.instancePath.endsWith("/operation"))
    return `${where}: must be one of ${OPERATION_KINDS.join(", ")}`;
  return `${where}: ${e.message ?? "is invalid"}`;
}

/**
 * Checks a parsed JSON value against the schema, then what a schema cannot say: rule names are unique
 * and ranges are not empty. Errors are written for the author of the document.
 */
export function checkPolicy(doc: unknown): PolicyCheck {
  if (!validate(doc)) {
    const errors = (validate.errors ?? [])
      .filter((e) => e.keyword !== "if")
      .map(describe)
      .filter((m, i, all) => all.indexOf(m) === i);
    return { ok: false, errors: errors.slice(0, 20) };
  }
  const policy = doc as unknown as Policy;
  const errors: string[] = [];
  const seen = new Set<string>();
  policy.rules.forEach((r, i) => {
    if (seen.has(r.name)) errors.push(`/rules/${i}/name: "${r.name}" is used by an earlier rule`);
    seen.add(r.name);
    for (const [field, range] of [
      ["value", r.value],
      ["erc20/amount", r.erc20?.amount],
      ["permit/amount", r.permit?.amount],
    ] as const) {
      if (range?.min !== undefined && range.max !== undefined && BigInt(range.min) > BigInt(range.max))
        errors.push(`/rules/${i}/${field}: min is above max`);
    }
    if (r.window !== undefined && r.effect !== "allow")
      errors.push(
        `/rules/${i}/window: only an allow rule can have a window (it bounds what the rule allows)`,
      );
    if (r.window?.maxValue !== undefined && !countsValue(r))
      errors.push(
        `/rules/${i}/window/maxValue: this rule signs nothing with a value (a transaction, or typed data with a permit, has one)`,
      );
    if (r.time?.hours !== undefined && r.time.hours.from === r.time.hours.to % 24 && r.time.hours.to !== 24)
      errors.push(`/rules/${i}/time/hours: from equals to (an empty window)`);
  });
  return errors.length > 0 ? { ok: false, errors } : { ok: true, policy };
}

/** Whether a rule's window can bound a total: transactions (wei or the token) and permits (the token). */
function countsValue(r: PolicyRule): boolean {
  return r.operation === "transaction" || (r.operation === "typedData" && r.permit !== undefined);
}

/** Parses and checks a policy document given as JSON text or bytes. */
export function parsePolicy(text: string | Uint8Array): PolicyCheck {
  const s = typeof text === "string" ? text : Buffer.from(text).toString("utf8");
  if (Buffer.byteLength(s) > MAX_POLICY_BYTES)
    return { ok: false, errors: [`the document is larger than ${MAX_POLICY_BYTES} bytes`] };
  let doc: unknown;
  try {
    doc = JSON.parse(s);
  } catch {
    return { ok: false, errors: ["the document is not valid JSON"] };
  }
  return checkPolicy(doc);
}
