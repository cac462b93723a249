/**
 * RLP of a list of byte strings (and lists of them, such as a type-2 transaction's empty access list),
 * with Buffers: what the relayer's transactions are made of. ethers' encodeRlp builds JavaScript arrays
 * byte by byte, which made signing a batch transaction (kilobytes of calldata) cost more than the
 * signature. Byte-for-byte ethers' encoding (test/enclave/signing.test.ts).
 */

/** An RLP item: a byte string, or a list of items. */
export type RlpItem = Uint8Array | readonly RlpItem[];

/** The length prefix of a string (offset 0x80) or a list (offset 0xc0). */
function prefix(length: number, offset: number): Buffer {
  if (length < 56) return Buffer.of(offset + length);
  const hex = length.toString(16);
  const bytes = Buffer.from(hex.length % 2 ? "0" + hex : hex, "hex");
  return Buffer.concat([Buffer.of(offset + 55 + bytes.length), bytes]);
}

function encodeItem(item: RlpItem): Buffer {
  if (!(item instanceof Uint8Array)) return encodeList(item);
  if (item.length === 1 && item[0] < 0x80) return Buffer.from(item);
  return Buffer.concat([prefix(item.length, 0x80), item]);
}

function encodeList(items: readonly RlpItem[]): Buffer {
  const payload = Buffer.concat(items.map(encodeItem));
  return Buffer.concat([prefix(payload.length, 0xc0), payload]);
}

/** RLP of a list, as bytes. */
export function rlpListBytes(items: readonly RlpItem[]): Buffer {
  return encodeList(items);
}

/** RLP of a list, as 0x-prefixed hex. */
export function rlpList(items: readonly RlpItem[]): string {
  return "0x" + encodeList(items).toString("hex");
}
