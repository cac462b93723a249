/**
 * The reason of a reverted simulation, decoded from its revert data: `Error(string)` (require and
 * revert with a message), `Panic(uint256)` (assert, overflow, division by zero…), or a custom error,
 * given as its hex data (the action holds the ABI to decode it; the enclave does not).
 */
import { AbiCoder } from "ethers";

const ERROR_STRING = "0x08c379a0";
const PANIC = "0x4e487b71";

/** Solidity's panic codes (docs.soliditylang.org, "Panic via assert and Error via require"). */
const PANIC_REASONS: Record<number, string> = {
  0x01: "assert failed",
  0x11: "arithmetic overflow or underflow",
  0x12: "division or modulo by zero",
  0x21: "invalid enum value",
  0x22: "invalid storage byte array",
  0x31: "pop on an empty array",
  0x32: "array index out of bounds",
  0x41: "too much memory allocated",
  0x51: "call to an uninitialized function",
};

export interface RevertReason {
  /** One line for the action: `Error("not owner")`, `Panic(0x11): arithmetic overflow…`, `custom error 0x…`. */
  reason: string;
  /** The raw revert data ("0x" when the node gave none). */
  data: string;
}

export function decodeRevert(data: string | undefined, nodeMessage: string): RevertReason {
  const hex = (data ?? "0x").toLowerCase();
  const coder = AbiCoder.defaultAbiCoder();
  try {
    if (hex.startsWith(ERROR_STRING)) {
      const [message] = coder.decode(["string"], "0x" + hex.slice(10));
      return { reason: `Error(${JSON.stringify(message)})`, data: hex };
    }
    if (hex.startsWith(PANIC)) {
      const [code] = coder.decode(["uint256"], "0x" + hex.slice(10));
      const n = Number(code);
      const why = PANIC_REASONS[n];
      return { reason: `Panic(0x${n.toString(16)})${why ? `: ${why}` : ""}`, data: hex };
    }
  } catch {
    // malformed: given as custom data below
  }
  if (hex.length > 2) return { reason: `custom error ${hex.slice(0, 10)}`, data: hex };
  // No data (a bare `revert()`, or a node that does not return it): the node's words.
  return { reason: nodeMessage || "execution reverted", data: "0x" };
}
