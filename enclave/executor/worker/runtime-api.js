"use strict";
/**
 * The `Actions` object of one run (also reachable as `Lit.Actions` and `LitActions`, with the reference
 * runtime's names). Every key operation goes through run.keyOp: a message to the enclave side, which
 * authorizes it for (caller key, this run's CID, pkpId) and answers, except the signatures, public key
 * and address of the run's own, already authorized PKP, which run-key.js answers in this worker. Nothing
 * here holds key material.
 */
const { platformError, copyPlain } = require("./values");
const { makeLegacySignEcdsa } = require("./legacy-sign");
const { readSendArgs } = require("./send-args");
const { chainMembers } = require("./chain-actions");

function argsObject(args, fnName) {
  if (typeof args !== "object" || args === null) {
    throw platformError("invalid_argument", `${fnName} takes an object argument, e.g. ${fnName}({ pkpId })`);
  }
  return args;
}

function readString(args, field, fnName) {
  const v = args[field];
  if (typeof v !== "string" || v === "")
    throw platformError("invalid_argument", `${fnName}: ${field} must be a non-empty string`);
  return v;
}

function readBytesOrString(args, field, fnName) {
  const v = args[field];
  if (typeof v === "string") return v;
  if (v instanceof Uint8Array) return Uint8Array.from(v);
  throw platformError("invalid_argument", `${fnName}: ${field} must be a string or a Uint8Array`);
}

/**
 * The members of one run's API, unhardened: makeActions hands them out one by one, hardened on first
 * read (hardening costs far more than making a closure, and most runs use one or two members).
 * `newSigner(pkpId, keyOp, version)` makes the ethers Signers of getSigner (pkp-signer.js).
 */
function actionMembers(run, newSigner) {
  let utf8 = null; // made on the first decrypt that asks for text

  const pkpOp = (fnName, op, read) => async (args) => {
    const a = argsObject(args, fnName);
    const payload = { pkpId: readString(a, "pkpId", fnName), ...(read ? read(a) : {}) };
    return run.keyOp(op, payload);
  };

  // Ed25519 and Schnorr (chain-actions.js); getPublicKey without `scheme` is the secp256k1 key as before.
  const chain = chainMembers(run, pkpOp("getPublicKey", "pkpPublicKey"));
  const getPublicKey = chain.getPublicKey;
  const getAddress = pkpOp("getAddress", "pkpAddress");
  const signEcdsaById = pkpOp("signEcdsa", "pkpSignDigest", (a) => ({
    digest: readBytesOrString(a, "digest", "signEcdsa"),
  }));
  const legacySignEcdsa = makeLegacySignEcdsa(run);
  /** `{pkpId, digest}`, or the older `{toSign, publicKey, sigName}` (legacy-sign.js). */
  const signEcdsa = async (args) => {
    const a = argsObject(args, "signEcdsa");
    if (a.pkpId === undefined && (a.publicKey !== undefined || a.sigName !== undefined))
      return legacySignEcdsa(a);
    return signEcdsaById(a);
  };
  const signMessage = pkpOp("signMessage", "pkpSignMessage", (a) => ({
    message: readBytesOrString(a, "message", "signMessage"),
  }));
  const signTypedData = pkpOp("signTypedData", "pkpSignTypedData", (a) => ({
    domain: copyPlain(a.domain, "signTypedData domain"),
    types: copyPlain(a.types, "signTypedData types"),
    value: copyPlain(a.value, "signTypedData value"),
  }));
  const encrypt = pkpOp("encrypt", "pkpEncrypt", (a) => ({
    plaintext: readBytesOrString(a, "message", "encrypt"),
  }));
  const decryptBytes = pkpOp("decrypt", "pkpDecrypt", (a) => ({
    ciphertext: readString(a, "ciphertext", "decrypt"),
  }));
  /** Plaintext as a UTF-8 string; `{as: "bytes"}` gives the raw Uint8Array. */
  const decrypt = async (args) => {
    const a = argsObject(args, "decrypt");
    const asBytes = a.as === "bytes";
    const bytes = await decryptBytes(a);
    if (asBytes) return bytes;
    utf8 ??= new TextDecoder("utf-8", { fatal: false });
    return utf8.decode(bytes);
  };
  const getPrivateKey = pkpOp("getPrivateKey", "pkpPrivateKey");
  /** A transaction the enclave serializes, checks and signs: answers the signed raw transaction. */
  const signTransaction = pkpOp("signTransaction", "pkpSignTransaction", (a) => ({
    transaction: copyPlain(a.transaction, "signTransaction transaction"),
  }));
  /** Fill, simulate, sign (policies as above) and broadcast on an operator's chain: `{hash, nonce, from, receipt?}`. */
  const sendTransaction = pkpOp("sendTransaction", "pkpSendTransaction", readSendArgs);
  /** An ethers v5 Signer for the PKP (for `ethers`), or with `{ ethers: 6 }` a v6 one (for `ethers6`). */
  const getSigner = (args) => {
    run.assertLive();
    const a = argsObject(args, "getSigner");
    const pkpId = readString(a, "pkpId", "getSigner");
    if (a.ethers !== undefined && a.ethers !== 5 && a.ethers !== 6)
      throw platformError("invalid_argument", "getSigner: ethers must be 5 or 6");
    return newSigner(pkpId, (op, payload) => run.keyOp(op, payload), a.ethers);
  };

  const getActionPrivateKey = async () => run.keyOp("actionPrivateKey", {});
  const actionKeyOf = (fnName, op, field) => async (args) => {
    const a = args === undefined ? {} : argsObject(args, fnName);
    const cid = a[field] === undefined ? run.cid : readString(a, field, fnName);
    return run.keyOp(op, { cid });
  };
  const getActionPublicKey = actionKeyOf("getActionPublicKey", "actionPublicKey", "cid");
  const getActionAddress = actionKeyOf("getActionAddress", "actionAddress", "cid");

  const setResponse = (args) => {
    run.assertLive();
    const a = argsObject(args, "setResponse");
    run.response = a.response;
    run.responseSet = true;
  };

  /** The modules this run imported: [{url, hash: "sha384-…", size}] (a fresh copy each call). */
  const showImportDetails = () => {
    run.assertLive();
    return run.importDetails.map((d) => ({ ...d }));
  };

  return {
    showImportDetails,
    getPublicKey,
    getAddress,
    signEcdsa,
    signMessage,
    signTypedData,
    signTransaction,
    sendTransaction,
    getSigner,
    encrypt,
    decrypt,
    getPrivateKey,
    getActionPrivateKey,
    getActionPublicKey,
    getActionAddress,
    setResponse,
    signEd25519: chain.signEd25519,
    signSchnorr: chain.signSchnorr,
    solana: chain.solana,
    bitcoin: chain.bitcoin,
    // The reference runtime's names, so its actions run unchanged.
    Encrypt: encrypt,
    Decrypt: decrypt,
    getLitActionPrivateKey: getActionPrivateKey,
    getLitActionPublicKey: actionKeyOf("getLitActionPublicKey", "actionPublicKey", "ipfsId"),
    getLitActionWalletAddress: actionKeyOf("getLitActionWalletAddress", "actionAddress", "ipfsId"),
  };
}

/** Every member name, in the order the object lists them (the same for every run). */
const MEMBER_NAMES = Object.freeze(Object.keys(actionMembers({ cid: "" })));

/**
 * Actions object -> its holder, whose `current` is the binding ({members, hardened, harden}) of the run
 * the object serves now (undefined between runs); never reachable from an action.
 */
const bindings = new WeakMap();

/**
 * The binding of the run whose Actions object `receiver` is (or inherits from, for an object made with
 * Object.create(Actions)); undefined for anything else, and between runs.
 */
function bindingOf(receiver) {
  let o = receiver;
  for (
    let depth = 0;
    depth < 32 && o !== null && (typeof o === "object" || typeof o === "function");
    depth++
  ) {
    const holder = bindings.get(o);
    if (holder !== undefined) return holder.current;
    o = Reflect.getPrototypeOf(o);
  }
  return undefined;
}

/**
 * The property descriptors of every Actions object: shared accessors (hardened once per worker) that
 * answer the member of the run the object belongs to. Made on first use, after lockdown.
 */
let sharedDescriptors = null;
function descriptors(harden) {
  if (sharedDescriptors !== null) return sharedDescriptors;
  const d = {};
  for (const name of MEMBER_NAMES) {
    d[name] = {
      get: {
        [name]() {
          const b = bindingOf(this);
          if (b === undefined)
            throw new TypeError(`Actions.${name} was read from an object that is not Actions`);
          const made = b.hardened[name];
          if (made !== undefined) return made;
          return (b.hardened[name] = b.harden(b.members[name]));
        },
      }[name],
      enumerable: true,
      configurable: false,
    };
  }
  sharedDescriptors = harden(d);
  return sharedDescriptors;
}

/**
 * The `Actions` object of one Compartment, serving one run at a time. Its members are functions bound
 * to the run in progress: made when the run starts, each hardened on first read (the same function
 * object from then on), so a run pays only for the members it uses. The object itself is frozen and
 * its accessors are shared and hardened, so nothing about it is writable or shared with another run
 * (docs/actions.md, "Nothing shared is writable"); it is made once per Compartment because defining its
 * two dozen accessors cost more per run than the rest of the object. A Compartment serves only runs of
 * one account, one after another, and nothing of a run can run after it has ended
 * (compartment-keeper.js): a run can never reach an earlier run's members through it.
 *
 * `object` is the Actions object; `bind(run, newSigner)` makes it serve `run` and returns it; `unbind()`
 * when the run has ended.
 */
function makeActionsSlot(harden) {
  const actions = Object.freeze(Object.defineProperties({}, descriptors(harden)));
  const holder = { current: undefined };
  bindings.set(actions, holder);
  return {
    object: actions,
    bind(run, newSigner) {
      holder.current = { members: actionMembers(run, newSigner), hardened: Object.create(null), harden };
      return actions;
    },
    unbind() {
      holder.current = undefined;
    },
  };
}

module.exports = { makeActionsSlot };
