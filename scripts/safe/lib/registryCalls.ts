import { ethers } from "ethers";
import { IAccountRegistry__factory } from "../../../typechain-types/factories/contracts/interfaces/IAccountRegistry__factory";
import { SCOPES, type FlagScope, type GroupScope, type ScopeStruct } from "../../../vocabulary/scopes";
import { SafeCliError } from "./errors";

/** The registry's ABI (contracts/interfaces/IAccountRegistry.sol), shared by path A and path B. */
export const registryInterface: ethers.Interface =
  IAccountRegistry__factory.createInterface() as unknown as ethers.Interface;

/** A key's permissions with the write-side field names of docs/background.md §2.3 (all optional, default: nothing). */
export type ScopeFields = { [S in FlagScope as S["field"]]?: boolean } & {
  [S in GroupScope as S["field"]]?: (number | string | bigint)[];
};

/** The registry's `KeyScopes` struct, in field order (vocabulary/scopes.ts). */
export type KeyScopesStruct = ScopeStruct<bigint>;

const SCOPE_FIELDS = new Set<string>(SCOPES.map((s) => s.field));

function groupIds(list: unknown, field: string): bigint[] {
  if (list === undefined) return [];
  if (!Array.isArray(list))
    throw new SafeCliError("invalid_argument", `${field} must be an array of group ids`);
  return list.map((v) => {
    const s = String(v);
    if (!/^\d+$/.test(s) || BigInt(s) >= 1n << 64n) {
      throw new SafeCliError("invalid_argument", `${field} holds ${s}, which is not a u64 group id`);
    }
    return BigInt(s);
  });
}

/** SPEC field names → the on-chain struct. Unknown fields are refused so a typo cannot silently drop a grant. */
export function toKeyScopes(fields: ScopeFields): KeyScopesStruct {
  for (const k of Object.keys(fields)) {
    if (!SCOPE_FIELDS.has(k)) throw new SafeCliError("invalid_argument", `unknown scope field "${k}"`);
  }
  const given = fields as Record<string, unknown>;
  return Object.fromEntries(
    SCOPES.map((s) => [s.struct, s.perGroup ? groupIds(given[s.field], s.field) : given[s.field] === true]),
  ) as KeyScopesStruct;
}

/** Every registry write a Safe (or any owner) may want to make, named as in the CLI. */
export type RegistryOp =
  | {
      op: "add-key";
      key: string;
      keyHash?: string;
      name?: string;
      description?: string;
      expiration?: number | bigint;
      scopes: ScopeFields;
    }
  | {
      op: "update-key";
      key: string;
      name?: string;
      description?: string;
      expiration?: number | bigint;
      scopes: ScopeFields;
    }
  | { op: "update-key-metadata"; key: string; name?: string; description?: string }
  | { op: "remove-key"; key: string }
  | { op: "create-group"; name?: string; description?: string; pkpIds?: string[]; cids?: string[] }
  | { op: "delete-group"; groupId: number | bigint | string }
  | { op: "add-action"; groupId: number | bigint | string; cid: string }
  | { op: "remove-action"; groupId: number | bigint | string; cid: string }
  /** Sets a group's signing policy (the CID of its JSON document), or clears it with an empty `cid`. */
  | { op: "set-group-policy"; groupId: number | bigint | string; cid: string }
  | { op: "add-pkp"; groupId: number | bigint | string; pkpId: string }
  | { op: "remove-pkp"; groupId: number | bigint | string; pkpId: string }
  | { op: "create-pkp"; name?: string; description?: string }
  | { op: "transfer-ownership"; newOwner: string }
  | { op: "cancel-ownership-transfer" }
  | { op: "accept-ownership"; accountId: number | bigint | string }
  | { op: "call"; method: string; args: unknown[] };

export interface EncodedCall {
  method: string;
  args: unknown[];
  data: string;
}

function addr(v: string, what: string): string {
  if (!ethers.isAddress(v)) throw new SafeCliError("invalid_argument", `${what} is not an address: ${v}`);
  return ethers.getAddress(v);
}

function bytes32(v: string, what: string): string {
  if (!/^0x[0-9a-fA-F]{64}$/.test(v))
    throw new SafeCliError("invalid_argument", `${what} must be 0x + 64 hex digits`);
  return v.toLowerCase();
}

function u64(v: number | bigint | string, what: string): bigint {
  const s = String(v);
  if (!/^\d+$/.test(s) || BigInt(s) >= 1n << 64n)
    throw new SafeCliError("invalid_argument", `${what} must be a u64`);
  return BigInt(s);
}

/** The method name and arguments of an operation (before ABI encoding). */
export function registryMethod(op: RegistryOp): { method: string; args: unknown[] } {
  switch (op.op) {
    case "add-key":
      return {
        method: "addKey",
        args: [
          addr(op.key, "the key"),
          op.keyHash ? bytes32(op.keyHash, "the key hash") : ethers.ZeroHash,
          op.name ?? "",
          op.description ?? "",
          u64(op.expiration ?? 0, "the expiration"),
          toKeyScopes(op.scopes),
        ],
      };
    case "update-key":
      return {
        method: "updateKey",
        args: [
          addr(op.key, "the key"),
          op.name ?? "",
          op.description ?? "",
          u64(op.expiration ?? 0, "the expiration"),
          toKeyScopes(op.scopes),
        ],
      };
    case "update-key-metadata":
      return {
        method: "updateKeyMetadata",
        args: [addr(op.key, "the key"), op.name ?? "", op.description ?? ""],
      };
    case "remove-key":
      return { method: "removeKey", args: [addr(op.key, "the key")] };
    case "create-group":
      return {
        method: "createGroup",
        args: [
          op.name ?? "",
          op.description ?? "",
          (op.pkpIds ?? []).map((p) => bytes32(p, "a PKP id")),
          op.cids ?? [],
        ],
      };
    case "delete-group":
      return { method: "deleteGroup", args: [u64(op.groupId, "the group id")] };
    case "add-action":
      return { method: "addAction", args: [u64(op.groupId, "the group id"), op.cid] };
    case "remove-action":
      return { method: "removeAction", args: [u64(op.groupId, "the group id"), op.cid] };
    case "set-group-policy":
      return { method: "setGroupPolicy", args: [u64(op.groupId, "the group id"), op.cid] };
    case "add-pkp":
      return { method: "addPkp", args: [u64(op.groupId, "the group id"), bytes32(op.pkpId, "the PKP id")] };
    case "remove-pkp":
      return {
        method: "removePkp",
        args: [u64(op.groupId, "the group id"), bytes32(op.pkpId, "the PKP id")],
      };
    case "create-pkp":
      return { method: "createPkp", args: [op.name ?? "", op.description ?? ""] };
    case "transfer-ownership":
      return { method: "transferOwnership", args: [addr(op.newOwner, "the new owner")] };
    case "cancel-ownership-transfer":
      return { method: "cancelOwnershipTransfer", args: [] };
    case "accept-ownership":
      return { method: "acceptOwnership", args: [u64(op.accountId, "the account id")] };
    case "call":
      return { method: op.method, args: op.args };
  }
}

/** ABI-encode an operation for the registry; refuses views and unknown methods. */
export function encodeRegistryCall(op: RegistryOp): EncodedCall {
  const { method, args } = registryMethod(op);
  const fragment = registryInterface.getFunction(method);
  if (!fragment) throw new SafeCliError("unknown_method", `the registry has no function "${method}"`);
  if (fragment.constant)
    throw new SafeCliError("unknown_method", `"${method}" is a view; only writes can be proposed`);
  let data: string;
  try {
    data = registryInterface.encodeFunctionData(fragment, args);
  } catch (cause) {
    throw new SafeCliError(
      "invalid_argument",
      `bad arguments for ${method}: ${(cause as Error).message}`,
      { method },
      cause,
    );
  }
  return { method: fragment.name, args, data };
}

/** JSON-safe copy of call arguments (bigints as decimal strings) for the proposal file. */
export function jsonSafe(value: unknown): unknown {
  if (typeof value === "bigint") return value.toString();
  if (Array.isArray(value)) return value.map(jsonSafe);
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, jsonSafe(v)]));
  }
  return value;
}

/**
 * Decode revert data from the registry into `{name, args}` (custom errors such as `MissingScope`), or
 * null when it is not one of the registry's errors.
 */
export function decodeRegistryError(
  data: string | null | undefined,
): { name: string; args: unknown[] } | null {
  if (!data || data === "0x") return null;
  try {
    const parsed = registryInterface.parseError(data);
    return parsed ? { name: parsed.name, args: jsonSafe([...parsed.args]) as unknown[] } : null;
  } catch {
    return null;
  }
}
