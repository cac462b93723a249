/**
 * The OpenAPI 3.1 document served at /core/v1/openapi.json, assembled from the endpoint declarations
 * (relayer/routes/): each declared endpoint is one operation, in the order the groups list them. Only
 * what no single endpoint owns is written here: the document's header, the security schemes and the
 * shared component schemas.
 */
import type { RelayerContext } from "./context";
import { BILLING_ERROR_CATALOGUE } from "./billing/errorCatalogue";
import { ERROR_CATALOGUE } from "./errorCatalogue";
import { OPERATION_KINDS, POLICY_SCHEMA } from "../enclave";
import { openApiPath, operationOf } from "./routes/endpoint";
import { DOCUMENTED_GROUPS } from "./routes";
import {
  address,
  arr,
  bool,
  forwardRequestFields,
  groupFields,
  int,
  nullable,
  obj,
  out,
  pkpFields,
  str,
  webhookFields,
} from "./routes/schemas";

/** The policy schema as a component (its $id is the document's own, not the API's). */
const { $id: _policyId, ...POLICY_DOCUMENT_SCHEMA } = POLICY_SCHEMA;
void _policyId;

/** Every code an answer can carry: the relayer's and billing's (billing gates writes and executions). */
const ALL_ERRORS = { ...ERROR_CATALOGUE, ...BILLING_ERROR_CATALOGUE };

/** Each declared endpoint's operation, under its OpenAPI path ("/core/v1/groups/{id}"). */
function paths(): Record<string, Record<string, unknown>> {
  const out: Record<string, Record<string, unknown>> = {};
  for (const group of DOCUMENTED_GROUPS)
    for (const e of group.endpoints) {
      const path = openApiPath(group.prefix, e.path);
      out[path] = { ...out[path], [e.method.toLowerCase()]: operationOf(e) };
    }
  return out;
}

export function buildOpenApi(ctx: Pick<RelayerContext, "chainId" | "cfg">) {
  return {
    openapi: "3.1.0",
    info: {
      title: "Sigil /core/v1",
      version: "1.0.0",
      description:
        "Programmable key management: accounts, scoped usage keys, PKPs, groups, actions. Errors are " +
        '{"error": {"code", "message", "details"?, "fix", "docs_url"}, "request_id"}; codes are listed in docs/errors.md. ' +
        "Every POST accepts an Idempotency-Key header (kept 24 h).",
    },
    servers: [{ url: "/" }],
    security: [{ apiKey: [] }, { bearer: [] }, { signedRequest: [] }],
    paths: paths(),
    components: {
      securitySchemes: {
        apiKey: { type: "apiKey", in: "header", name: "X-Api-Key" },
        bearer: { type: "http", scheme: "bearer" },
        signedRequest: {
          type: "apiKey",
          in: "header",
          name: "Sigil-Signature",
          description:
            "A usage key that is never sent: Sigil-Key, Sigil-Timestamp, Sigil-Nonce, Sigil-Content-Sha256 and Sigil-Signature (EIP-191 over SIGIL-REQUEST-V1, chain id, registry, method, path and query, body SHA-256, timestamp, nonce; docs/api.md, Signed requests). The owner of a ChainSecured account signed in with a wallet signs the same way with a session key, adding Sigil-Siwe and Sigil-Siwe-Signature (POST /core/v1/auth/siwe); such requests may only read.",
        },
      },
      schemas: {
        Policy: POLICY_DOCUMENT_SCHEMA,
        PolicyOperation: {
          type: "object",
          required: ["kind"],
          additionalProperties: false,
          description:
            "What would be signed: {kind: transaction, transaction}, {kind: typedData, domain, types, value}, {kind: message, message, encoding?: utf8|hex}, {kind: digest, digest}, {kind: ed25519, message (0x-hex)}, {kind: schnorr, digest}, or {kind: keyExport|encrypt|decrypt}",
          properties: {
            kind: { type: "string", enum: [...OPERATION_KINDS] },
            transaction: {
              type: "object",
              description: "ethers TransactionRequest fields; chainId required",
            },
            domain: { type: "object" },
            types: { type: "object" },
            value: { type: "object" },
            message: str(),
            encoding: { type: "string", enum: ["utf8", "hex"] },
            digest: str("0x + 64 hex digits"),
          },
        },
        PolicyDecision: out(
          {
            allowed: bool(),
            rule: str('The deciding rule\'s name, or "(default deny)" when no allow rule matched'),
            operation: { type: "string", enum: [...OPERATION_KINDS] },
            digest: str("What a signature would be made over"),
            field: str("The condition that failed (refusals)"),
            value: str("The value that failed it (refusals)"),
            reason: str(),
          },
          ["digest", "field", "value"],
        ),
        Error: obj(
          {
            error: obj(
              {
                code: { type: "string", enum: Object.keys(ALL_ERRORS) },
                message: str(),
                details: { type: "object" },
                fix: str("How to fix it (docs/errors.md's fix for this code)"),
                docs_url: str("Where the code is explained: its entry in docs/errors.md"),
              },
              ["code", "message", "docs_url"],
            ),
            request_id: str(),
          },
          ["error", "request_id"],
        ),
        Pkp: out({ ...pkpFields, account_id: int() }),
        Group: out(groupFields),
        WebhookEndpoint: out(webhookFields),
        ForwardRequestFields: out(forwardRequestFields),
        ConfirmPayment: out({
          payment_intent_id: str(),
          status: { type: "string", enum: ["succeeded", "processing"] },
          credited_cents: int(),
          newly_credited: bool(),
          balance_cents: int(),
          balance_display: str(),
        }),
        ExecutionResult: out(
          {
            response: { description: "What the action's main returned (any JSON value)" },
            logs: str("console output of the run"),
            has_error: bool(),
            error: out({ code: str(), message: str() }),
            cid: str(),
            execution_ms: { type: "number" },
            charged_cents: int(),
            signatures: {
              type: "object",
              description: "Named signatures of the older signEcdsa API (only when an action made some)",
            },
          },
          ["error", "signatures"],
        ),
        Health: out(
          {
            status: { type: "string", enum: ["ok", "degraded"] },
            last_processed_block: int(
              "The last block whose registry events this service has applied: a path-B change in block N is honoured once this is >= N",
            ),
            chain: out({
              reachable: bool(),
              chain_id: int(),
              head_block: nullable(int()),
              error: nullable(str()),
            }),
            cache: out({
              last_processed_block: int(),
              lag_blocks: nullable(int()),
              last_poll_ok_ms_ago: nullable(int()),
              loaded_accounts: int(),
            }),
            executor: out({ poolSize: int(), alive: int(), busy: int(), queued: int(), restarts: int() }),
            gas_wallets: arr(address),
            gas_wallet_balances: out({
              low_balance_threshold_wei: nullable(str("Wei, decimal; null before the first reading")),
              wallets: arr(
                out({
                  address,
                  balance_wei: nullable(
                    str("Wei, decimal, at the last periodic reading; null before the first"),
                  ),
                  low: bool(),
                  unfunded: bool(),
                }),
              ),
            }),
            degraded_reasons: arr({
              type: "string",
              enum: ["chain_unreachable", "executor_down", "gas_wallets_low"],
            }),
          },
          // Anyone sees only `status`; the rest is the operator's view (X-Operator-Token).
          ["chain", "cache", "executor", "gas_wallets", "gas_wallet_balances", "degraded_reasons"],
        ),
      },
    },
    "x-sigil": {
      chain_id: ctx.chainId,
      registry_address: ctx.cfg.registryAddress,
      forwarder_address: ctx.cfg.forwarderAddress,
    },
  };
}
