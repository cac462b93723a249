import { OperationError } from "./operationError";

const DIGEST = /^0x[0-9a-fA-F]{64}$/;

/** A 32-byte digest given as bytes or 0x-hex, as lower-case 0x-hex; anything else is refused. */
export function readDigest(digest: unknown): string {
  const hex =
    digest instanceof Uint8Array && digest.length === 32
      ? "0x" + Buffer.from(digest).toString("hex")
      : digest;
  if (typeof hex !== "string" || !DIGEST.test(hex))
    throw new OperationError("the digest must be 32 bytes (0x followed by 64 hex characters)");
  return hex.toLowerCase();
}
