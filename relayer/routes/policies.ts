/**
 * Signing policies (docs/policies.md): upload a document (checked against the schema, then pinned like
 * action code), read it back by CID, a dry run that evaluates a policy against an operation without
 * signing anything or counting towards any window, and setting or clearing a group's policy (path A).
 */
import { Router } from "express";
import {
  OperationError,
  evaluatePolicy,
  parseDigest,
  parseMessage,
  parseTransaction,
  parseTypedData,
  plainOperation,
  type OperationFacts,
  type Policy,
} from "../../enclave/policy";
import { authOf } from "../auth";
import { registryInterface, Scope } from "../chain/abi";
import { handler, write, type RelayerContext } from "../context";
import { ApiError } from "../errors";
import { BodyReader, parseGroupId } from "../http/validate";
import { requireGroup, requireWriteScope } from "../policy";
import { groupDetail } from "../present";
import { pinContent } from "../pinning";
import { loadPolicy, policyBytes, readPolicy } from "../policyDocuments";
import { parseCidField } from "./groups";

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
 * `{kind: "digest", digest}`, or `{kind: "keyExport" | "encrypt" | "decrypt"}`.
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
      default:
        if (typeof v.kind === "string" && PLAIN_KINDS.has(v.kind))
          return plainOperation(v.kind as "keyExport" | "encrypt" | "decrypt");
        throw new OperationError(
          "kind must be transaction, typedData, message, digest, keyExport, encrypt or decrypt",
        );
    }
  } catch (e) {
    if (e instanceof OperationError) throw badOperation(e.message);
    throw e;
  }
}

export function policyRoutes(ctx: RelayerContext): Router {
  const r = Router();

  async function policyAt(cid: string): Promise<Policy> {
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

  r.post(
    "/policies",
    ctx.auth.requireKey(),
    handler(ctx, async (req, res) => {
      const b = new BodyReader(req.body);
      const policy = readPolicy(b.raw("policy"));
      b.done();
      const bytes = policyBytes(policy);
      const { cid, charged_cents } = await pinContent(ctx, authOf(res), bytes);
      return { status: 201, body: { cid, bytes: bytes.length, charged_cents } };
    }),
  );

  r.post(
    "/policies/evaluate",
    ctx.auth.requireKey(),
    handler(ctx, async (req) => {
      const b = new BodyReader(req.body);
      const doc = b.raw("policy");
      const cidField = b.raw("cid");
      const operation = b.raw("operation");
      const at = b.raw("at");
      b.done();
      if ((doc === undefined) === (cidField === undefined))
        throw new ApiError("invalid_request", "Send exactly one of `policy` and `cid`.", {
          details: { field: "policy" },
        });
      const policy = doc !== undefined ? readPolicy(doc) : await policyAt(parseCidField(cidField, "cid"));
      const facts = readOperation(operation);
      let now = new Date();
      if (at !== undefined) {
        now = typeof at === "string" ? new Date(at) : new Date(NaN);
        if (Number.isNaN(now.getTime()))
          throw new ApiError("invalid_request", "`at` must be an ISO 8601 time.", {
            details: { field: "at" },
          });
      }
      return { body: evaluatePolicy(policy, facts, now) };
    }),
  );

  /**
   * Path A: set (`{cid}`) or clear (`{cid: null}`) a group's policy, governed like the group's actions
   * (the owner, or a key with manageActions on the group). The document must be stored and valid first,
   * so a group never names a policy the service cannot enforce as written.
   */
  r.post(
    "/groups/:id/policy",
    ctx.auth.requireKey(),
    handler(ctx, async (req, res) => {
      const auth = authOf(res);
      const id = parseGroupId(req.params.id, "id");
      const b = new BodyReader(req.body);
      const raw = b.raw("cid");
      b.done();
      if (raw === undefined)
        throw new ApiError(
          "invalid_request",
          "Send `cid` (a policy's CID), or `cid: null` to clear the policy.",
          {
            details: { field: "cid" },
          },
        );
      const cid = raw === null ? null : parseCidField(raw, "cid");
      requireGroup(auth.account, id);
      requireWriteScope(auth, Scope.ManageActions, id);
      if (cid !== null) await policyAt(cid);
      const out = await write(
        ctx,
        auth,
        cid === null ? "group_policy_clear" : "group_policy_set",
        registryInterface.encodeFunctionData("setGroupPolicy", [id, cid ?? ""]),
      );
      const now = (await ctx.cache.account(auth.account.id)).groups.get(id);
      return { body: { ...(now ? groupDetail(now) : { group_id: id }), tx_hash: out.txHash } };
    }),
  );

  r.get(
    "/policies/:cid",
    ctx.auth.requireKey(),
    handler(ctx, async (req) => {
      const cid = parseCidField(req.params.cid, "cid");
      return { body: { cid, policy: await policyAt(cid) } };
    }),
  );

  return r;
}
