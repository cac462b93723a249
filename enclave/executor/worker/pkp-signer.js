"use strict";
/**
 * `Actions.getSigner({ pkpId })`: ethers Signers backed by a PKP, for actions written against ethers'
 * Signer API (`new ethers.Wallet(await Actions.getPrivateKey(...))` becomes `Actions.getSigner(...)`).
 * The v5 one (for `ethers`) and, with `{ ethers: 6 }`, the v6 one (for `ethers6`).
 *
 * They hold no key: every signature is a key operation (pkpSignTransaction, pkpSignMessage,
 * pkpSignTypedData) that the enclave side authorizes, checks against the run's signing policies, and
 * signs over what it parsed and hashed itself (key-ops.ts). What the action passes is only copied into
 * plain data here; nothing here decides anything.
 */
const ethers6 = require("ethers");
const ethers5 = require("ethers5");
const { platformError, copyPlain } = require("./values");

/** The transaction fields the enclave reads (enclave/policy/operation.ts); others are dropped. */
const TX_FIELDS = [
  "type",
  "chainId",
  "nonce",
  "gasLimit",
  "gasPrice",
  "maxFeePerGas",
  "maxPriorityFeePerGas",
  "to",
  "value",
  "data",
  "accessList",
];

/** v5 BigNumbers and v6 values as plain data (decimal strings for BigNumbers). */
function plain(v, what, depth = 0) {
  if (depth > 64) throw platformError("invalid_argument", `${what} is too deep`);
  if (ethers5.BigNumber.isBigNumber(v)) return v.toString();
  if (Array.isArray(v)) return v.map((x) => plain(x, what, depth + 1));
  if (v !== null && typeof v === "object" && !(v instanceof Uint8Array)) {
    const out = {};
    for (const k of Object.keys(v)) out[k] = plain(v[k], what, depth + 1);
    return out;
  }
  return v;
}

function transactionFields(tx) {
  const out = {};
  for (const k of TX_FIELDS) {
    const v = tx[k];
    if (v === undefined || v === null) continue;
    out[k] = k === "data" && v instanceof Uint8Array ? ethers6.hexlify(v) : plain(v, "transaction");
  }
  return copyPlain(out, "transaction");
}

/** keyOp of the run that made the signer: reachable from this module only. */
const opsOf = new WeakMap();

function ops(signer) {
  const o = opsOf.get(signer);
  if (o === undefined) throw platformError("invalid_argument", "not a signer made by Actions.getSigner");
  return o;
}

function messageArg(message) {
  if (typeof message === "string") return message;
  return Uint8Array.from(ethers6.getBytes(message));
}

class PkpSignerV5 extends ethers5.Signer {
  constructor(pkpId, keyOp, provider) {
    super();
    opsOf.set(this, { pkpId, keyOp });
    ethers5.utils.defineReadOnly(this, "provider", provider ?? undefined);
  }

  getAddress() {
    const { pkpId, keyOp } = ops(this);
    return keyOp("pkpAddress", { pkpId });
  }

  async signMessage(message) {
    const { pkpId, keyOp } = ops(this);
    return keyOp("pkpSignMessage", { pkpId, message: messageArg(message) });
  }

  async signTransaction(transaction) {
    const { pkpId, keyOp } = ops(this);
    const tx = await ethers5.utils.resolveProperties(transaction);
    if (tx.from != null) {
      const from = ethers5.utils.getAddress(tx.from);
      if (from !== (await this.getAddress()))
        throw platformError("invalid_argument", `signTransaction: from ${from} is not this PKP's address`);
    }
    return keyOp("pkpSignTransaction", { pkpId, transaction: transactionFields(tx) });
  }

  async _signTypedData(domain, types, value) {
    const { pkpId, keyOp } = ops(this);
    return keyOp("pkpSignTypedData", {
      pkpId,
      domain: copyPlain(plain(domain, "domain"), "signTypedData domain"),
      types: copyPlain(types, "signTypedData types"),
      value: copyPlain(plain(value, "value"), "signTypedData value"),
    });
  }

  connect(provider) {
    const { pkpId, keyOp } = ops(this);
    return new PkpSignerV5(pkpId, keyOp, provider);
  }
}

class PkpSignerV6 extends ethers6.AbstractSigner {
  constructor(pkpId, keyOp, provider) {
    super(provider ?? null);
    opsOf.set(this, { pkpId, keyOp });
  }

  getAddress() {
    const { pkpId, keyOp } = ops(this);
    return keyOp("pkpAddress", { pkpId });
  }

  async signMessage(message) {
    const { pkpId, keyOp } = ops(this);
    return keyOp("pkpSignMessage", { pkpId, message: messageArg(message) });
  }

  async signTransaction(transaction) {
    const { pkpId, keyOp } = ops(this);
    const tx = { ...transaction };
    for (const k of ["to", "from"]) {
      if (tx[k] != null && typeof tx[k] !== "string")
        tx[k] = await ethers6.resolveAddress(tx[k], this.provider);
    }
    if (tx.from != null && ethers6.getAddress(tx.from) !== (await this.getAddress()))
      throw platformError("invalid_argument", `signTransaction: from ${tx.from} is not this PKP's address`);
    return keyOp("pkpSignTransaction", { pkpId, transaction: transactionFields(tx) });
  }

  async signTypedData(domain, types, value) {
    const { pkpId, keyOp } = ops(this);
    return keyOp("pkpSignTypedData", {
      pkpId,
      domain: copyPlain(domain, "signTypedData domain"),
      types: copyPlain(types, "signTypedData types"),
      value: copyPlain(value, "signTypedData value"),
    });
  }

  connect(provider) {
    const { pkpId, keyOp } = ops(this);
    return new PkpSignerV6(pkpId, keyOp, provider);
  }
}

/** Once per worker, after lockdown: the classes are shared by every run, so they are hardened. */
function makeSignerFactory(harden) {
  harden(PkpSignerV5);
  harden(PkpSignerV6);
  /** A signer of `pkpId` whose operations go through `keyOp` (the run's). */
  return (pkpId, keyOp, version) =>
    version === 6 ? new PkpSignerV6(pkpId, keyOp, null) : new PkpSignerV5(pkpId, keyOp, undefined);
}

module.exports = { makeSignerFactory };
