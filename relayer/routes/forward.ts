/**
 * Path-A writes signed by the client (keys that never leave the client; docs/api.md "Signed forward
 * requests"). The usage key's holder builds the registry call, signs the EIP-712 ForwardRequest for the
 * deployment's forwarder, and sends only the signed request. The relayer cannot alter it (the forwarder
 * checks the signature on chain) and does what it does for its own writes: check, simulate, pay gas,
 * submit through the forwarder, sync the cache, charge the account.
 *
 *   POST /core/v1/forward/prepare {data}  (a usage key, signed or bearer) → the request to sign: the
 *        forwarder nonce, gas from a simulation, a deadline, and the EIP-712 domain.
 *   POST /core/v1/forward {from,to,value,gas,nonce,deadline,data,signature}  (no key: the signature is
 *        the credential) → {tx_hash, block_number, operation, pkp_id, group_id}.
 *
 * Checks before anything is spent, each with its own code: the call is one the API allows a usage key
 * (forward_call_not_allowed), the deadline is in the future and not too far (forward_request_expired),
 * the signature recovers `from` under this chain's forwarder domain (forward_signature_invalid: also
 * what a request signed for another chain or forwarder gets), `from` is a live usage key (401 as for
 * any key), the nonce is the forwarder's next one for `from` (forward_nonce_mismatch: a replay), and the
 * simulation passes (the registry's own refusal, e.g. 403 missing_scope). The registry checks the scope
 * again on chain.
 */
import { TypedDataEncoder, getAddress, isAddress, type TypedDataField } from "ethers";
import { FORWARD_REQUEST_TYPES } from "../../enclave";
import { authOf } from "../auth";
import { registryInterface } from "../chain/abi";
import { requestGasFor } from "../chain/sender";
import { landWrite, type RelayerContext } from "../context";
import { currentClaim } from "../idempotency";
import { ApiError } from "../errors";
import { recoverAddress } from "../http/ethSignatures";
import { endpoint, type BodyOf } from "./endpoint";
import * as s from "./schemas";

/**
 * The registry calls a usage key may make through a forward request (the writes its scopes can allow),
 * each with the operation name billing records, the same as for the bearer endpoints' writes.
 */
const BILLED_AS: Record<string, string> = {
  createPkp: "create_pkp",
  createGroup: "create_group",
  deleteGroup: "delete_group",
  addAction: "group_actions_add",
  removeAction: "group_actions_remove",
  addActions: "group_actions_add",
  removeActions: "group_actions_remove",
  addPkp: "group_pkps_add",
  removePkp: "group_pkps_remove",
  addPkps: "group_pkps_add",
  removePkps: "group_pkps_remove",
  setGroupPolicy: "group_policy_set",
};
export const FORWARDABLE_CALLS = Object.keys(BILLED_AS);

/** A signed forward request may be valid for at most this long (seconds). */
export const MAX_FORWARD_DEADLINE_SECONDS = 3_600;
/** The deadline prepare suggests (seconds from now). */
export const PREPARED_DEADLINE_SECONDS = 600;
/** Most gas a forward request may ask for (the relayer pays it). */
export const MAX_FORWARD_GAS = 5_000_000n;

const FORWARDER_NAME = "SigilForwarder";
const FORWARDER_VERSION = "1";

/** The EIP-712 domain of this deployment's forwarder. */
const forwarderDomain = (ctx: RelayerContext) => ({
  name: FORWARDER_NAME,
  version: FORWARDER_VERSION,
  chainId: ctx.chainId,
  verifyingContract: ctx.cfg.forwarderAddress,
});

function forwardAddress(v: unknown, field: string): string {
  if (typeof v !== "string" || !isAddress(v))
    throw new ApiError("invalid_request", `\`${field}\` must be a 0x address.`, { details: { field } });
  return getAddress(v.toLowerCase());
}

/** How /forward reads each field of the request (its own messages; uint256 values as bigints). */
const FORWARD_REQUEST_CHECKS = {
  from: (v: unknown) => forwardAddress(v, "from"),
  to: (v: unknown) => forwardAddress(v, "to"),
  value: (v: unknown) => uintField(v, "value"),
  gas: (v: unknown) => uintField(v, "gas"),
  nonce: (v: unknown) => uintField(v, "nonce"),
  deadline: (v: unknown) => Number(uintField(v, "deadline")),
  data: (v: unknown) => hexField(v, "data"),
  signature: (v: unknown) => {
    if (typeof v !== "string" || !/^0x[0-9a-fA-F]{130}$/.test(v))
      throw new ApiError("invalid_request", "`signature` must be 0x + 65 bytes in hex.", {
        details: { field: "signature" },
      });
    return v;
  },
};

/** A signed forward request as its checks read it (uint256 values as bigints). */
type SignedForwardRequest = {
  [K in keyof typeof FORWARD_REQUEST_CHECKS]: ReturnType<(typeof FORWARD_REQUEST_CHECKS)[K]>;
};

const prepareBody = s.obj({ data: s.str("Registry calldata (0x hex)") }, ["data"]);

/** What a forwarded registry call may be refused with: the scope check, then the registry's reverts. */
const REGISTRY_CALL_ERRORS = [
  "missing_scope",
  "group_not_found",
  "pkp_not_found",
  "pkp_already_in_group",
  "pkp_not_in_group",
  "action_already_in_group",
  "action_not_in_group",
  "too_many_members",
  "too_many_groups",
  "write_reverted",
] as const;

const postForwardPrepare = endpoint<RelayerContext>("POST", "/forward/prepare", {
  caller: "key",
  summary:
    "A forward request for a registry call, ready for a usage key to sign (nonce, gas from a simulation, deadline, EIP-712 domain)",
  body: prepareBody,
  checks: { data: (v) => hexField(v, "data") },
  answer: s.out({
    operation: s.str("The registry function called"),
    request: s.ref("ForwardRequestFields"),
    domain: s.out({ name: s.str(), version: s.str(), chain_id: s.int(), verifying_contract: s.address }),
    types: s.out({ ForwardRequest: s.arr(s.out({ name: s.str(), type: s.str() })) }),
  }),
  errors: ["forward_call_not_allowed", ...REGISTRY_CALL_ERRORS],
  async handle(ctx, _req, res, { data }: BodyOf<typeof prepareBody>) {
    const auth = authOf(res);
    if (auth.principal.kind !== "usage")
      throw new ApiError(
        "invalid_request",
        "Forward requests are signed by usage keys; the account key writes through the other endpoints.",
      );
    const operation = allowedCall(data);
    const from = auth.principal.keyAddress;
    const gas = requestGasFor(await ctx.sender.simulateAs(from, "usage", data));
    const nonce = await ctx.sender.nextForwarderNonce(from);
    const d = forwarderDomain(ctx);
    return {
      body: {
        operation,
        request: {
          from,
          to: ctx.cfg.registryAddress,
          value: "0",
          gas: gas.toString(),
          nonce: nonce.toString(),
          deadline: Math.floor(Date.now() / 1000) + PREPARED_DEADLINE_SECONDS,
          data,
        },
        domain: {
          name: d.name,
          version: d.version,
          chain_id: d.chainId,
          verifying_contract: d.verifyingContract,
        },
        types: FORWARD_REQUEST_TYPES,
      },
    };
  },
});

const postForward = endpoint<RelayerContext>("POST", "/forward", {
  caller: "public",
  summary:
    "Submit a forward request the usage key signed itself (no key sent: the signature is the credential)",
  body: s.obj(
    {
      ...s.forwardRequestFields,
      signature: s.str("EIP-712 signature, 0x + 65 bytes"),
    },
    ["from", "to", "value", "gas", "nonce", "deadline", "data", "signature"],
  ),
  checks: FORWARD_REQUEST_CHECKS,
  answer: s.out({
    tx_hash: s.txHash,
    block_number: s.int(),
    operation: s.str(),
    pkp_id: s.nullable(s.pkpId),
    group_id: s.nullable(s.int()),
  }),
  errors: [
    "forward_call_not_allowed",
    "forward_request_expired",
    "forward_signature_invalid",
    "unknown_api_key",
    "api_key_expired",
    "rate_limited",
    "forward_nonce_mismatch",
    ...REGISTRY_CALL_ERRORS,
    "chain_unavailable",
    "gas_wallet_unfunded",
    "insufficient_credits",
    "spend_cap_reached",
  ],
  async handle(ctx, _req, res, body) {
    const signed = body as unknown as SignedForwardRequest;
    if (getAddress(signed.to) !== getAddress(ctx.cfg.registryAddress))
      throw notAllowed("the target is not this deployment's registry", "wrong_target");
    if (signed.value !== 0n) throw notAllowed("a forward request may not carry value", "value");
    if (signed.gas <= 0n || signed.gas > MAX_FORWARD_GAS)
      throw notAllowed(`gas must be between 1 and ${MAX_FORWARD_GAS}`, "gas_out_of_range");
    const operation = allowedCall(signed.data);
    // Under an Idempotency-Key: recorded before it is sent, reconciled with the chain on a retry
    // (whose request may have expired since it executed: the retry still answers from its receipt).
    const journal = currentClaim()?.nextWrite();
    const now = Math.floor(Date.now() / 1000);
    if (signed.deadline <= now && !journal?.recorded())
      throw new ApiError(
        "forward_request_expired",
        `The forward request's deadline passed ${now - signed.deadline} s ago.`,
        { details: { deadline: signed.deadline, now } },
      );
    if (signed.deadline > now + MAX_FORWARD_DEADLINE_SECONDS)
      throw new ApiError(
        "forward_request_expired",
        `The deadline is more than ${MAX_FORWARD_DEADLINE_SECONDS} s away; sign a request valid for less time.`,
        { details: { deadline: signed.deadline, now, max_seconds: MAX_FORWARD_DEADLINE_SECONDS } },
      );
    const { signature, ...request } = signed;
    const digest = TypedDataEncoder.hash(
      forwarderDomain(ctx),
      FORWARD_REQUEST_TYPES as Record<string, TypedDataField[]>,
      request,
    );
    if (recoverAddress(digest, signature) !== signed.from)
      throw new ApiError(
        "forward_signature_invalid",
        "The signature is not `from`'s over this request for this chain's forwarder (altered, or signed for another chain or forwarder).",
        { details: { chain_id: ctx.chainId, forwarder_address: ctx.cfg.forwarderAddress } },
      );
    const auth = await ctx.auth.authenticateUsageKey(signed.from, null);
    auth.requestId = String(res.locals.requestId);
    res.locals.auth = auth;
    res.locals.principal = auth.principal;
    const result = await landWrite(ctx, {
      payer: { auth, operation: BILLED_AS[operation] },
      journal,
      send: (j) => ctx.sender.writeSigned(signed, "usage", j),
    });
    // What the write created, if anything: at most one PKP or one group per call.
    const created = (name: string) => result.events.find((e) => e.name === name)?.args;
    const pkp = created("PkpCreated");
    const group = created("GroupCreated");
    return {
      body: {
        tx_hash: result.txHash,
        block_number: result.blockNumber,
        operation,
        pkp_id: pkp ? String(pkp.pkpId).toLowerCase() : null,
        group_id: group ? Number(group.groupId) : null,
      },
    };
  },
});

export const FORWARD_ENDPOINTS = [postForwardPrepare, postForward];

function notAllowed(why: string, reason: string): ApiError {
  return new ApiError("forward_call_not_allowed", `This forward request is not one the API relays: ${why}.`, {
    details: { reason },
  });
}

/** The registry function a calldata calls, if a usage key may forward it. */
function allowedCall(data: string): string {
  let name: string;
  try {
    const parsed = registryInterface.parseTransaction({ data });
    if (!parsed) throw new Error("unknown selector");
    name = parsed.name;
  } catch {
    throw notAllowed("the calldata is not a registry call", "unknown_call");
  }
  if (!FORWARDABLE_CALLS.includes(name))
    throw notAllowed(
      `${name} is not a call a usage key may make (allowed: ${FORWARDABLE_CALLS.join(", ")})`,
      "call",
    );
  return name;
}

function hexField(v: unknown, field: string): string {
  if (typeof v !== "string" || !/^0x([0-9a-fA-F]{2})*$/.test(v))
    throw new ApiError("invalid_request", `\`${field}\` must be 0x-prefixed hex bytes.`, {
      details: { field },
    });
  return v.toLowerCase();
}

function uintField(v: unknown, field: string): bigint {
  if (typeof v === "string" && /^[0-9]{1,78}$/.test(v)) return BigInt(v);
  if (typeof v === "number" && Number.isSafeInteger(v) && v >= 0) return BigInt(v);
  throw new ApiError(
    "invalid_request",
    `\`${field}\` must be a non-negative integer (a decimal string for large values).`,
    { details: { field } },
  );
}
