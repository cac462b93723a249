"use strict";
/**
 * Size limits of key-operation arguments (docs/actions.md, "Limits"), one implementation for both
 * sides: the action worker checks before it posts a request (so an oversized argument is never even
 * copied to the main thread), and the main thread checks again what it receives (key-ops.ts), because
 * the worker runs hostile code and its checks are a courtesy, not a boundary.
 *
 * Every check costs at most O(limit), never O(argument): a 1 GB string is refused after reading its
 * length, and typed data is measured by a walk that stops as soon as it passes the limit (no
 * JSON.stringify of the whole, no recursion to overflow).
 */

/** pkpId (an id is 66 characters, an address 42), cid (at most 128), and a digest given as a string. */
const MAX_ID_CHARS = 128;
/** A digest given as bytes (a valid one is 32). */
const MAX_DIGEST_BYTES = 128;
/** The envelope around a plaintext: version byte, 12-byte nonce, 16-byte tag (docs/enclave.md). */
const ENVELOPE_OVERHEAD_BYTES = 1 + 12 + 16;

/** The names the action used, for messages. */
const PUBLIC_NAME = {
  __proto__: null,
  pkpPublicKey: "getPublicKey",
  pkpAddress: "getAddress",
  pkpSignDigest: "signEcdsa",
  pkpSignMessage: "signMessage",
  pkpSignTypedData: "signTypedData",
  pkpSignTransaction: "signTransaction",
  pkpSendTransaction: "sendTransaction",
  pkpEncrypt: "encrypt",
  pkpDecrypt: "decrypt",
  pkpPrivateKey: "getPrivateKey",
  actionPrivateKey: "getActionPrivateKey",
  actionPublicKey: "getActionPublicKey",
  actionAddress: "getActionAddress",
  pkpPublicKeys: "getPublicKey",
  pkpSignEd25519: "signEd25519",
  pkpSignSchnorr: "signSchnorr",
  pkpSignSolanaMessage: "solana.signTransactionMessage",
  pkpSignTaprootInput: "bitcoin.signTaprootInput",
};

/** UTF-8 length of a string or byte length of bytes, or Infinity once it is certainly over `max`. */
function payloadBytes(v, max) {
  if (typeof v === "string") {
    // UTF-8 takes at least one byte per UTF-16 unit and at most three.
    if (v.length > max) return Infinity;
    return v.length * 3 <= max ? v.length : Buffer.byteLength(v, "utf8");
  }
  if (v instanceof Uint8Array) return v.byteLength;
  return 0; // not a payload: the operation itself refuses the type
}

/** UTF-8 bytes of JSON.stringify(s) for a string already known to be at most `max` long. */
function jsonStringBytes(s) {
  return Buffer.byteLength(JSON.stringify(s), "utf8");
}

/**
 * The JSON size of a plain value, never less than JSON.stringify's UTF-8 length (bigints count their
 * digits, bytes their hex, undefined as null), walking only until `max` is passed (then Infinity): a
 * string longer than `max` is refused by its length before being read.
 */
function jsonSizeWithin(value, max) {
  let size = 0;
  const stack = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === "string") size += v.length > max ? Infinity : jsonStringBytes(v);
    else if (typeof v === "number")
      size += String(v).length + 1; // NaN/Infinity become null (4)
    else if (typeof v === "bigint" || typeof v === "boolean") size += String(v).length + 2;
    else if (v === null || v === undefined) size += 4;
    else if (v instanceof Uint8Array) size += v.byteLength * 2 + 4;
    else if (typeof v === "object") {
      const keys = Array.isArray(v) ? null : Object.keys(v);
      const n = keys === null ? v.length : keys.length;
      size += 2 + n;
      if (size > max) return Infinity;
      if (keys === null) for (let i = 0; i < n; i++) stack.push(v[i]);
      else
        for (const k of keys) {
          size += (k.length > max ? Infinity : jsonStringBytes(k)) + 1;
          if (size > max) return Infinity;
          stack.push(v[k]);
        }
    }
    if (size > max) return Infinity;
  }
  return size;
}

function tooLarge(op, what, size, max, limitName) {
  const name = PUBLIC_NAME[op] ?? op;
  const shown = size === Infinity ? `more than ${max}` : String(size);
  return `${name}: ${what} is ${shown} bytes; the limit is ${max} (${limitName})`;
}

/**
 * Null if the arguments of `op` are within the limits, else the message of a key_op_too_large error.
 * `limits` needs maxKeyOpPayloadBytes and maxTypedDataBytes.
 */
function keyOpArgsProblem(op, args, limits) {
  if (typeof args !== "object" || args === null) return null;
  for (const field of ["pkpId", "cid"]) {
    const v = args[field];
    if (typeof v === "string" && v.length > MAX_ID_CHARS)
      return tooLarge(op, field, v.length, MAX_ID_CHARS, "fixed");
  }
  const payloadMax = limits.maxKeyOpPayloadBytes;
  switch (op) {
    case "pkpSignDigest": {
      const d = args.digest;
      if (typeof d === "string" && d.length > MAX_ID_CHARS)
        return tooLarge(op, "digest", d.length, MAX_ID_CHARS, "fixed");
      if (d instanceof Uint8Array && d.byteLength > MAX_DIGEST_BYTES)
        return tooLarge(op, "digest", d.byteLength, MAX_DIGEST_BYTES, "fixed");
      return null;
    }
    case "pkpSignSchnorr":
      for (const field of ["digest", "merkleRoot"]) {
        const d = args[field];
        if (typeof d === "string" && d.length > MAX_ID_CHARS)
          return tooLarge(op, field, d.length, MAX_ID_CHARS, "fixed");
        if (d instanceof Uint8Array && d.byteLength > MAX_DIGEST_BYTES)
          return tooLarge(op, field, d.byteLength, MAX_DIGEST_BYTES, "fixed");
      }
      return null;
    case "pkpSignEd25519":
    case "pkpSignSolanaMessage": {
      // Bytes, or 0x-hex of as many bytes (two characters each).
      const field = op === "pkpSignEd25519" ? "message" : "messageBytes";
      const v = args[field];
      const max = typeof v === "string" ? 2 * payloadMax + 2 : payloadMax;
      const n = payloadBytes(v, max);
      return n > max
        ? tooLarge(op, field, n, max, "maxKeyOpPayloadBytes of bytes (as 0x-hex: 2 × that + 2)")
        : null;
    }
    case "pkpSignTaprootInput": {
      // Base64: four characters per three bytes.
      const max = Math.ceil((4 * payloadMax) / 3) + 4;
      const n = payloadBytes(args.psbtBase64, max);
      return n > max ? tooLarge(op, "psbtBase64", n, max, "maxKeyOpPayloadBytes of PSBT, base64") : null;
    }
    case "pkpSignMessage": {
      const n = payloadBytes(args.message, payloadMax);
      return n > payloadMax ? tooLarge(op, "message", n, payloadMax, "maxKeyOpPayloadBytes") : null;
    }
    case "pkpEncrypt": {
      const n = payloadBytes(args.plaintext, payloadMax);
      return n > payloadMax ? tooLarge(op, "message", n, payloadMax, "maxKeyOpPayloadBytes") : null;
    }
    case "pkpDecrypt": {
      const max = maxCiphertextChars(payloadMax);
      const c = args.ciphertext;
      return typeof c === "string" && c.length > max
        ? tooLarge(op, "ciphertext", c.length, max, "2 × (maxKeyOpPayloadBytes + 29) + 2 hex characters")
        : null;
    }
    case "pkpSignTypedData": {
      const max = limits.maxTypedDataBytes;
      const n = jsonSizeWithin([args.domain, args.types, args.value], max);
      return n > max ? tooLarge(op, "typed data", n, max, "maxTypedDataBytes") : null;
    }
    case "pkpSignTransaction":
    case "pkpSendTransaction": {
      // Calldata is hex: twice a payload, plus the other fields.
      const max = 2 * payloadMax + 4096;
      const n = jsonSizeWithin(args.transaction, max);
      return n > max ? tooLarge(op, "transaction", n, max, "2 × maxKeyOpPayloadBytes + 4096") : null;
    }
    default:
      return null;
  }
}

/** The longest ciphertext decrypt accepts: the hex envelope (with 0x) of the largest plaintext. */
function maxCiphertextChars(maxPayloadBytes) {
  return 2 + 2 * (maxPayloadBytes + ENVELOPE_OVERHEAD_BYTES);
}

module.exports = { keyOpArgsProblem, maxCiphertextChars, MAX_ID_CHARS, MAX_DIGEST_BYTES };
