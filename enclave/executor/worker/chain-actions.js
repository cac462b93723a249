"use strict";
/**
 * The Actions members for a PKP's Ed25519 and Schnorr keys (docs/actions.md, "Solana and Bitcoin"):
 * `signEd25519`, `signSchnorr`, `getPublicKey({ scheme })`, `solana.signTransactionMessage` and
 * `bitcoin.signTaprootInput`. Each is one key operation (run.keyOp) that the enclave side authorizes,
 * schedules, counts and checks against the run's policies; the parsing and signing happen there
 * (enclave/executor/chain-key-ops.ts). Here arguments are only copied into plain data (fresh bytes,
 * strings, numbers), so nothing the action holds is shared with the enclave side, and nothing here
 * holds key material. `solana` and `bitcoin` are new objects per run, hardened on first read like every
 * other member (runtime-api.js).
 */
const { platformError } = require("./values");

const SCHEMES = ["secp256k1", "ed25519", "schnorr", "taproot"];

function argsObject(args, fnName) {
  if (typeof args !== "object" || args === null)
    throw platformError("invalid_argument", `${fnName} takes an object argument, e.g. ${fnName}({ pkpId })`);
  return args;
}

function readPkpId(a, fnName) {
  const v = a.pkpId;
  if (typeof v !== "string" || v === "")
    throw platformError("invalid_argument", `${fnName}: pkpId must be a non-empty string`);
  return v;
}

/** Bytes (a fresh copy) or a 0x-hex string; anything else is the action's mistake. */
function readBytes(a, field, fnName) {
  const v = a[field];
  if (v instanceof Uint8Array) return Uint8Array.from(v);
  if (typeof v === "string" && /^0x([0-9a-fA-F]{2})*$/.test(v)) return v;
  throw platformError("invalid_argument", `${fnName}: ${field} must be a Uint8Array or 0x-prefixed hex`);
}

/** The key `getPublicKey({ scheme })` answers, from the enclave's pkpPublicKeys. */
function keyOfScheme(keys, scheme) {
  switch (scheme) {
    case "secp256k1":
      return keys.secp256k1.publicKey;
    case "ed25519":
      return keys.ed25519.publicKey;
    case "schnorr":
      return keys.taproot.xOnly;
    default:
      return keys.taproot.tweakedXOnly;
  }
}

/**
 * The members, given the run and the existing `getPublicKey` (the uncompressed secp256k1 key, which a
 * call without `scheme` still answers).
 */
function chainMembers(run, legacyGetPublicKey) {
  const getPublicKey = async (args) => {
    const a = argsObject(args, "getPublicKey");
    if (a.scheme === undefined) return legacyGetPublicKey(a);
    if (!SCHEMES.includes(a.scheme))
      throw platformError("invalid_argument", `getPublicKey: scheme must be one of ${SCHEMES.join(", ")}`);
    const keys = await run.keyOp("pkpPublicKeys", { pkpId: readPkpId(a, "getPublicKey") });
    return keyOfScheme(keys, a.scheme);
  };

  const signEd25519 = async (args) => {
    const a = argsObject(args, "signEd25519");
    return run.keyOp("pkpSignEd25519", {
      pkpId: readPkpId(a, "signEd25519"),
      message: readBytes(a, "message", "signEd25519"),
    });
  };

  const signSchnorr = async (args) => {
    const a = argsObject(args, "signSchnorr");
    const tweak = a.tweak === undefined ? null : a.tweak;
    if (tweak !== null && tweak !== "taproot")
      throw platformError("invalid_argument", 'signSchnorr: tweak must be "taproot" or null');
    const payload = {
      pkpId: readPkpId(a, "signSchnorr"),
      digest: readBytes(a, "digest", "signSchnorr"),
      tweak,
    };
    if (a.merkleRoot !== undefined && a.merkleRoot !== null)
      payload.merkleRoot = readBytes(a, "merkleRoot", "signSchnorr");
    return run.keyOp("pkpSignSchnorr", payload);
  };

  const signTransactionMessage = async (args) => {
    const a = argsObject(args, "solana.signTransactionMessage");
    return run.keyOp("pkpSignSolanaMessage", {
      pkpId: readPkpId(a, "solana.signTransactionMessage"),
      messageBytes: readBytes(a, "messageBytes", "solana.signTransactionMessage"),
    });
  };

  const signTaprootInput = async (args) => {
    const a = argsObject(args, "bitcoin.signTaprootInput");
    if (typeof a.psbtBase64 !== "string" || a.psbtBase64 === "")
      throw platformError(
        "invalid_argument",
        "bitcoin.signTaprootInput: psbtBase64 must be a non-empty string",
      );
    if (!Number.isSafeInteger(a.inputIndex) || a.inputIndex < 0)
      throw platformError(
        "invalid_argument",
        "bitcoin.signTaprootInput: inputIndex must be a non-negative integer",
      );
    return run.keyOp("pkpSignTaprootInput", {
      pkpId: readPkpId(a, "bitcoin.signTaprootInput"),
      psbtBase64: a.psbtBase64,
      inputIndex: a.inputIndex,
    });
  };

  return {
    getPublicKey,
    signEd25519,
    signSchnorr,
    solana: { signTransactionMessage },
    bitcoin: { signTaprootInput },
  };
}

module.exports = { chainMembers };
