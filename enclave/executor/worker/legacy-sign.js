"use strict";
/**
 * The older signing API of the reference runtime's predecessors:
 * `await Lit.Actions.signEcdsa({ toSign, publicKey, sigName })` resolves to "success", and the signature
 * is reported with the run's result under `signatures[sigName]` (no peer ran both API generations;
 * Sigil does).
 *
 * `publicKey` names the PKP (hex, with or without `0x`, uncompressed `04…` or compressed): it is turned
 * into the PKP's address and the signature goes through exactly the same path as
 * `signEcdsa({pkpId, digest})`, including the enclave-side authorization of (caller key, this action's
 * CID, that PKP). `toSign` is the 32-byte digest (Uint8Array, array of byte values, or hex string).
 */
const { computeAddress, getBytes, Signature } = require("ethers");
const { platformError } = require("./values");

function invalid(message) {
  return platformError("invalid_argument", `signEcdsa: ${message}`);
}

function readDigest(toSign) {
  let bytes;
  if (typeof toSign === "string") {
    try {
      bytes = getBytes(toSign.startsWith("0x") ? toSign : "0x" + toSign);
    } catch {
      throw invalid("toSign must be 32 bytes (a Uint8Array, an array of byte values or hex)");
    }
  } else if (toSign instanceof Uint8Array) bytes = Uint8Array.from(toSign);
  else if (Array.isArray(toSign) && toSign.every((b) => Number.isInteger(b) && b >= 0 && b <= 255))
    bytes = Uint8Array.from(toSign);
  if (bytes === undefined || bytes.length !== 32)
    throw invalid("toSign must be 32 bytes (a Uint8Array, an array of byte values or hex)");
  return bytes;
}

function readPublicKey(publicKey) {
  if (typeof publicKey !== "string" || !/^(0x)?[0-9a-fA-F]+$/.test(publicKey))
    throw invalid("publicKey must be the PKP's public key in hex");
  const hex = (publicKey.startsWith("0x") ? publicKey : "0x" + publicKey).toLowerCase();
  try {
    return { hex, address: computeAddress(hex) };
  } catch {
    throw invalid("publicKey is not a valid secp256k1 public key");
  }
}

function hex(bytes) {
  return Buffer.from(bytes).toString("hex");
}

function makeLegacySignEcdsa(run) {
  return async (a) => {
    if (typeof a.sigName !== "string" || a.sigName === "" || a.sigName.length > 128)
      throw invalid("sigName must be a non-empty string of at most 128 characters");
    const sigName = a.sigName;
    if (run.signatures !== null && Object.prototype.hasOwnProperty.call(run.signatures, sigName))
      throw invalid(`a signature named "${sigName}" was already made in this run`);
    const digest = readDigest(a.toSign);
    const { hex: publicKey, address } = readPublicKey(a.publicKey);
    const signature = await run.keyOp("pkpSignDigest", { pkpId: address, digest });
    const sig = Signature.from(signature);
    if (run.signatures === null) run.signatures = Object.create(null);
    run.signatures[sigName] = {
      r: sig.r.slice(2),
      s: sig.s.slice(2),
      recid: sig.v - 27,
      signature: sig.serialized,
      publicKey,
      dataSigned: "0x" + hex(digest),
    };
    return "success";
  };
}

module.exports = { makeLegacySignEcdsa };
