/**
 * Signing policies (docs/policies.md): upload a document (checked against the schema, then pinned like
 * action code), read it back by CID, a dry run that evaluates a policy against an operation without
 * signing anything or counting towards any window, and setting or clearing a group's policy (path A).
 */
import {
  OperationError,
  evaluatePolicy,
  parseDigest,
  parseEd25519,
  parseMessage,
  parseSchnorrDigest,
  parseTransaction,
  parseTypedData,
  plainOperation,
  type OperationFacts,
  type Policy,
} from "../../enclave";
import { authOf } from "../auth";
import { registryInterface, Scope } from "../chain/abi";
import { write, type RelayerContext } from "../context";
import { ApiError } from "../errors";
import { parseCidField, parseGroupId } from "../http/validate";
import { requireGroup, requireWriteScope } from "../policy";
import { groupDetail } from "../present";
import { pinContent } from "../pinning";
import { loadPolicy, policyBytes, readPolicy } from "../policyDocuments";
import { endpoint, type BodyOf } from "./endpoint";
import * as s from "./schemas";

const PLAIN_KINDS = new Set(["keyExport", "encrypt", "decrypt"]);
/** The fields of an operation (components.schemas.PolicyOperation in the OpenAPI document). */
const OPERATION_FIELDS = new Set([
  "kind",
  "transaction",
  "domain",
  "types",
  "value",
  "message",
  "encoding",
  "digest",
]);

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function badOperation(message: string): ApiError {
  return new ApiError("invalid_request", `\`operation\`: ${message}`, { details: { field: "operation" } });
}

/**
 * The operation of a dry run, parsed exactly as the enclave parses what an action asks to sign:
 * `{kind: "transaction", transaction}`, `{kind: "typedData", domain, types, value}`,
 * `{kind: "message", message}` (a 0x-hex message with `encoding: "hex"` is bytes),
 * `{kind: "digest", digest}`, `{kind: "ed25519", message}` (0x-hex bytes, read as a Solana transaction
 * message when it is one), `{kind: "schnorr", digest}`, or `{kind: "keyExport" | "encrypt" | "decrypt"}`.
 */
export function readOperation(v: unknown): OperationFacts {
  if (!isObject(v)) throw badOperation("must be an object with a `kind`");
  const unknown = Object.keys(v).find((k) => !OPERATION_FIELDS.has(k));
  if (unknown !== undefined)
    throw new ApiError("unknown_field", `\`operation.${unknown}\` is not a field of an operation.`, {
      details: { field: `operation.${unknown}` },
    });
  try {
    switch (v.kind) {
      case "transaction":
        return parseTransaction(v.transaction);
      case "typedData":
        return parseTypedData(v.domain, v.types, v.value);
      case "message": {
        if (v.encoding === "hex") {
          if (typeof v.message !== "string" || !/^0x([0-9a-fA-F]{2})*$/.test(v.message))
            throw new OperationError('a message with encoding "hex" must be 0x-prefixed hex');
          return parseMessage(Uint8Array.from(Buffer.from(v.message.slice(2), "hex")));
        }
        return parseMessage(v.message);
      }
      case "digest":
        return parseDigest(v.digest);
      case "ed25519":
        return parseEd25519(v.message);
      case "schnorr":
        return parseSchnorrDigest(v.digest);
      default:
        if (typeof v.kind === "string" && PLAIN_KINDS.has(v.kind))
          return plainOperation(v.kind as "keyExport" | "encrypt" | "decrypt");
        throw new OperationError(
          "kind must be transaction, typedData, message, digest, ed25519, schnorr, keyExport, encrypt or decrypt",
        );
    }
  } catch (e) {
    if (e instanceof OperationError) throw badOperation(e.message);
    throw e;
  }
}

async function policyAt(ctx: RelayerContext, cid: string): Promise<Policy> {
  const policy = await loadPolicy(ctx, cid);
  if (policy === null)
    throw new ApiError(
      "policy_not_found",
      `No policy document is stored for ${cid}; upload it with POST /policies.`,
      {
        details: { cid },
      },
    );
  return policy;
}

const PIN_ERRORS = [
  "not_authorized_to_pin",
  "pin_quota_exceeded",
  "insufficient_credits",
  "spend_cap_reached",
] as const;

const uploadBody = s.obj({ policy: s.ref("Policy") as s.Typed<Policy> }, ["policy"]);

const uploadPolicy = endpoint<RelayerContext>("POST", "/policies", {
  caller: "key",
  summary:
    "Upload a signing-policy document: checked against the policy schema, then pinned like action code",
  status: 201,
  body: uploadBody,
  checks: { policy: (v) => readPolicy(v) },
  answer: s.out({ cid: s.str(), bytes: s.int(), charged_cents: s.int() }),
  errors: [...s.BODY_ERRORS, "invalid_request", "unknown_field", "invalid_policy", ...PIN_ERRORS],
  async handle(ctx, _req, res, { policy }: BodyOf<typeof uploadBody>) {
    const bytes = policyBytes(policy);
    const { cid, charged_cents } = await pinContent(ctx, authOf(res), bytes);
    return { status: 201, body: { cid, bytes: bytes.length, charged_cents } };
  },
});

const evaluateBody = s.exactlyOne(
  ["policy", "cid"],
  s.obj(
    {
      policy: s.ref("Policy") as s.Typed<Policy>,
      cid: s.cid("CID of an uploaded policy (instead of `policy`)"),
      operation: s.ref("PolicyOperation") as s.Typed<OperationFacts>,
      // Read as a Date by its check (readAt).
      at: s.str("Evaluate as of this time (ISO 8601); default now (time rules are UTC)") as s.Typed<Date>,
    },
    ["operation"],
  ),
);

/** `at`: an ISO 8601 time, read as a Date (now when absent). */
function readAt(at: unknown): Date {
  if (at === undefined) return new Date();
  const when = typeof at === "string" ? new Date(at) : new Date(NaN);
  if (Number.isNaN(when.getTime()))
    throw new ApiError("invalid_request", "`at` must be an ISO 8601 time.", { details: { field: "at" } });
  return when;
}

const evaluate = endpoint<RelayerContext>("POST", "/policies/evaluate", {
  caller: "key",
  summary:
    "Dry run: a policy (inline or by CID) against an operation; allow or deny with the deciding rule, nothing signed or counted",
  body: evaluateBody,
  checks: {
    policy: (v) => (v === undefined ? undefined : readPolicy(v)),
    operation: readOperation,
    at: readAt,
  },
  answer: s.ref("PolicyDecision"),
  errors: [
    ...s.BODY_ERRORS,
    "invalid_request",
    "unknown_field",
    "invalid_policy",
    "invalid_cid",
    "policy_not_found",
  ],
  async handle(ctx, _req, _res, body: BodyOf<typeof evaluateBody>) {
    const policy = body.policy ?? (await policyAt(ctx, body.cid!));
    return { body: evaluatePolicy(policy, body.operation, body.at!) };
  },
});

/**
 * Path A: set (`{cid}`) or clear (`{cid: null}`) a group's policy, governed like the group's actions
 * (the owner, or a key with manageActions on the group). The document must be stored and valid first,
 * so a group never names a policy the service cannot enforce as written.
 */
const setPolicyBody = s.obj({ cid: s.nullable(s.cid("CID of an uploaded policy; null clears")) }, ["cid"]);

/** `cid`: a policy's CID, or null to clear; left out, it is asked for by name. */
function readPolicyCid(raw: unknown): string | null {
  if (raw === undefined)
    throw new ApiError(
      "invalid_request",
      "Send `cid` (a policy's CID), or `cid: null` to clear the policy.",
      {
        details: { field: "cid" },
      },
    );
  return raw === null ? null : parseCidField(raw, "cid");
}

const setGroupPolicy = endpoint<RelayerContext>("POST", "/groups/:id/policy", {
  caller: "key",
  scopes: ["group:manageActions"],
  summary: "Set (cid) or clear (cid: null) the group's signing policy (owner, or manageActions on the group)",
  params: [s.idParam("id", s.int())],
  body: setPolicyBody,
  checks: { cid: readPolicyCid },
  answer: s.out({ ...s.groupFields, tx_hash: s.txHash }),
  errors: [
    ...s.WRITE_ERRORS,
    "invalid_group_id",
    "group_not_found",
    "missing_scope",
    "invalid_cid",
    "invalid_policy",
    "policy_not_found",
  ],
  async handle(ctx, req, res, { cid }: BodyOf<typeof setPolicyBody>) {
    const auth = authOf(res);
    const id = parseGroupId(req.params.id, "id");
    requireGroup(auth.account, id);
    requireWriteScope(auth, Scope.ManageActions, id);
    if (cid !== null) await policyAt(ctx, cid);
    const out = await write(
      ctx,
      auth,
      cid === null ? "group_policy_clear" : "group_policy_set",
      registryInterface.encodeFunctionData("setGroupPolicy", [id, cid ?? ""]),
    );
    const now = (await ctx.cache.account(auth.account.id)).groups.get(id);
    return { body: { ...(now ? groupDetail(now) : { group_id: id }), tx_hash: out.txHash } };
  },
});

const getPolicy = endpoint<RelayerContext>("GET", "/policies/:cid", {
  caller: "key",
  summary: "A stored signing-policy document",
  params: [s.idParam("cid", s.str())],
  answer: s.out({ cid: s.str(), policy: s.ref("Policy") }),
  errors: ["invalid_cid", "invalid_policy", "policy_not_found"],
  async handle(ctx, req) {
    const cid = parseCidField(req.params.cid, "cid");
    return { body: { cid, policy: await policyAt(ctx, cid) } };
  },
});

export const POLICY_ENDPOINTS = [uploadPolicy, evaluate, setGroupPolicy, getPolicy];
