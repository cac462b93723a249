/**
 * RLP of a flat list of byte strings, with Buffers: what a legacy transaction is made of. ethers'
 * encodeRlp builds JavaScript arrays byte by byte, which made signing a batch transaction (kilobytes of
 * calldata) cost more than the signature. Byte-for-byte ethers' encoding (test/enclave/signing.test.ts).
 */

/** The length prefix of a string (offset 0x80) or a list (offset 0xc0). */
function prefix(length: number, offset: number): Buffer {
  if (length < 56) return Buffer.of(offset + length);
  const hex = length.toString(16);
  const bytes = Buffer.from(hex.length % 2 ? "0" + hex : hex, "hex");
  return Buffer.concat([Buffer.of(offset + 55 + bytes.length), bytes]);
}

function encodeItem(bytes: Uint8Array): Buffer {
  if (bytes.length === 1 && bytes[0] < 0x80) return Buffer.from(bytes);
  return Buffer.concat([prefix(bytes.length, 0x80), bytes]);
}

/** RLP of a list of byte strings, as 0x-prefixed hex. */
export function rlpList(items: readonly Uint8Array[]): string {
  const payload = Buffer.concat(items.map(encodeItem));
  return "0x" + Buffer.concat([prefix(payload.length, 0xc0), payload]).toString("hex");
}
