/**
 * ERC-20 calls and Permit / Permit2 allowances, decoded from what is signed, for the policy's token
 * conditions. Anything that does not decode exactly (wrong length, extra bytes) is not an ERC-20 call:
 * a rule about ERC-20 transfers then does not match it.
 */
import { AbiCoder, getAddress } from "ethers";
import type { Erc20Method } from "./schema";

export interface Erc20Call {
  method: Erc20Method;
  /** Who receives the tokens (transfer, transferFrom) or the allowance (approve: the spender). */
  recipient: string;
  amount: bigint;
}

const SELECTORS: Record<string, { method: Erc20Method; args: number }> = {
  "0xa9059cbb": { method: "transfer", args: 2 }, // transfer(address,uint256)
  "0x095ea7b3": { method: "approve", args: 2 }, // approve(address,uint256)
  "0x23b872dd": { method: "transferFrom", args: 3 }, // transferFrom(address,address,uint256)
};

const coder = AbiCoder.defaultAbiCoder();

export function decodeErc20Call(data: string): Erc20Call | null {
  const known = SELECTORS[data.slice(0, 10).toLowerCase()];
  if (known === undefined || data.length !== 10 + 64 * known.args) return null;
  try {
    const types = known.args === 2 ? ["address", "uint256"] : ["address", "address", "uint256"];
    const args = coder.decode(types, "0x" + data.slice(10));
    // The decoder accepts dirty high bits in an address word; a strict re-encoding must give the input.
    if (coder.encode(types, [...args]) !== "0x" + data.slice(10).toLowerCase()) return null;
    const recipient = getAddress(String(args[known.args - 2]));
    return { method: known.method, recipient, amount: BigInt(args[known.args - 1]) };
  } catch {
    return null;
  }
}

export interface PermitGrant {
  token: string;
  spender: string;
  amount: bigint;
}

function isObj(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function addr(v: unknown): string | null {
  try {
    return typeof v === "string" ? getAddress(v) : null;
  } catch {
    return null;
  }
}

function amount(v: unknown): bigint | null {
  try {
    if (typeof v === "bigint") return v;
    if (typeof v === "number" && Number.isSafeInteger(v)) return BigInt(v);
    if (typeof v === "string" && v !== "") return BigInt(v);
  } catch {
    /* not a number */
  }
  return null;
}

/**
 * The allowances a typed-data message grants: EIP-2612 `Permit` (the token is the verifying contract)
 * and Uniswap Permit2's `PermitSingle`, `PermitBatch`, `PermitTransferFrom`, `PermitBatchTransferFrom`
 * (and their `…WithWitness` variants). A message of one of these types whose fields do not read as
 * addresses and amounts yields a grant with an unknown token, which no permit condition matches.
 */
export function decodePermits(
  primaryType: string,
  verifyingContract: string | null,
  value: Record<string, unknown>,
): PermitGrant[] {
  const UNKNOWN = "0x0000000000000000000000000000000000000000";
  const grant = (token: unknown, spender: unknown, value: unknown): PermitGrant => ({
    token: addr(token) ?? UNKNOWN,
    spender: addr(spender) ?? UNKNOWN,
    amount: amount(value) ?? 2n ** 256n, // unreadable: above every limit
  });
  const type = primaryType.replace(/WithWitness$/, "");
  switch (type) {
    case "Permit":
      return [grant(verifyingContract, value.spender, value.value)];
    case "PermitSingle": {
      const d = isObj(value.details) ? value.details : {};
      return [grant(d.token, value.spender, d.amount)];
    }
    case "PermitBatch": {
      const list = Array.isArray(value.details) ? value.details : [];
      return list.map((d) => (isObj(d) ? grant(d.token, value.spender, d.amount) : grant(null, null, null)));
    }
    case "PermitTransferFrom": {
      const p = isObj(value.permitted) ? value.permitted : {};
      return [grant(p.token, value.spender, p.amount)];
    }
    case "PermitBatchTransferFrom": {
      const list = Array.isArray(value.permitted) ? value.permitted : [];
      return list.map((p) => (isObj(p) ? grant(p.token, value.spender, p.amount) : grant(null, null, null)));
    }
    default:
      return [];
  }
}
