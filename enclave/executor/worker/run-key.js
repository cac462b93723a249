"use strict";
/**
 * The run's own PKP, served inside the worker (docs/actions.md, "The run's own PKP").
 *
 * When the relayer starts a run for a request that named a PKP, it has already authorized
 * (caller key, CID, that PKP): it is the execution's own permission check (docs/background.md §4.3). The main thread
 * then moves that one PKP's private key into this worker for the run, so that the commonest key
 * operations (signatures, the public key, the address of that PKP) cost no round trip to the main
 * thread, which is the service's bottleneck. Anything else still goes to the main thread and is
 * authorized per operation there: other PKPs, encryption (a different derived key), the raw private
 * key, the action identity key, and any request this module does not recognise as well formed (so the
 * enclave produces the one canonical error for it).
 *
 * Every answer here is byte-for-byte what the enclave itself answers (test/executor/run-key.test.ts
 * holds it to that): hashing as ethers does it (natively where possible, keccak.js), and the curve
 * operations by the same libsecp256k1 binding the enclave uses, in the executor's signer thread
 * (signer-thread.js explains why not here). The key is only reachable from this module's closure (not
 * from the Compartment), and is zeroed when the run ends.
 *
 * Under signing policies (docs/policies.md) the key is handed over only when every policy that applies
 * is stateless (enclave/policy/stateless.ts); it comes with those policies, and each message or digest
 * signature is checked here by the enclave's own engine (enclave/policy/evaluate.js) over the digest
 * computed here, the one then signed. An allowed signature's decision is reported to the main thread
 * (the run's policy_decisions) with the run's next message (policy-decisions.js); anything refused, and typed data, goes to the main thread's policy gate,
 * which decides afresh and words the refusal. The same epoch that cancels the key cancels the policies
 * with it: a policy change makes the main thread bump it, so the run's next signature is checked there
 * against the new policy.
 */
const { getAddress } = require("ethers");
const { keccak, messageDigest, typedDataDigest, isPlainObject } = require("./digests");
const { allowingGrant } = require("../../policy/evaluate");

const DIGEST = /^0x[0-9a-fA-F]{64}$/;
const SERVED = new Set(["pkpPublicKey", "pkpAddress", "pkpSignDigest", "pkpSignMessage", "pkpSignTypedData"]);

function toHex(bytes) {
  return "0x" + Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("hex");
}

/**
 * @param grant {pkpId, key, slot, epoch, notAfterMs}: the canonical bytes32 id the run was authorized
 *   for; its 32-byte key, an ArrayBuffer transferred from the main thread (owned here from now on); the
 *   authorization epoch counter guarding it and its value when the run was authorized; and a time after
 *   which it must not be used (the caller key's expiry).
 * @param epochs the shared Int32Array of epochs (null: the grant is refused)
 * @param curve the signer thread's client: request(op, key, digest?) resolves with its answer, or null
 *   when it cannot answer (then the operation goes to the main thread)
 * @param noteDecision called with (grant, facts) for each signature made here under a policy: which
 *   group and rule allowed it (allowingGrant's answer) and what was signed
 * @param recordKeyOperation called with (kind, pkpId, digest) for each signature made here
 *   (key-operation-log.js)
 */
function makeRunKey(grant, epochs, curve, noteDecision = () => {}, recordKeyOperation = () => {}) {
  const { pkpId, slot, epoch, notAfterMs, policies = null } = grant;
  let key = grant.key instanceof ArrayBuffer ? new Uint8Array(grant.key) : new Uint8Array(0);
  if (
    typeof pkpId !== "string" ||
    key.length !== 32 ||
    !(epochs instanceof Int32Array) ||
    curve === null ||
    typeof curve !== "object" ||
    !Number.isInteger(slot) ||
    slot < 0 ||
    slot >= epochs.length ||
    typeof notAfterMs !== "number" ||
    (policies !== null && !Array.isArray(policies))
  ) {
    key.fill(0);
    return null;
  }
  const id = pkpId.toLowerCase();
  let publicKey = null;
  let address = null;

  /** The uncompressed public key, asked once per run (null: the signer thread could not answer). */
  const pub = async () => {
    if (publicKey === null) {
      if (key === null) return null;
      const r = await curve.request("publicKey", key);
      if (r === null || !(r.publicKey instanceof Uint8Array)) return null;
      publicKey = r.publicKey;
    }
    return publicKey;
  };
  const addr = async () => {
    if (address === null) {
      const p = await pub();
      if (p === null) return null;
      address = getAddress("0x" + keccak(p.subarray(1)).subarray(12).toString("hex"));
    }
    return address;
  };
  const sign = async (digest) => {
    if (key === null) return undefined;
    const r = await curve.request("sign", key, digest);
    if (r === null || !(r.signature instanceof Uint8Array) || typeof r.recid !== "number") return undefined;
    return toHex(r.signature) + (27 + r.recid).toString(16);
  };
  /**
   * Sign `digest` if the run's policies (none: anything) allow `facts`, checked here now; undefined
   * when they do not (the main thread's gate then decides and words the refusal).
   */
  const checkedSign = async (digest, facts) => {
    // Only whether, and by which rule, it is allowed: a refusal is worded by the gate (above).
    const allowedBy = policies === null ? null : allowingGrant(policies, facts);
    if (policies !== null && allowedBy === null) return undefined;
    const signature = await sign(digest);
    if (signature === undefined) return undefined;
    if (allowedBy !== null) noteDecision(allowedBy, facts);
    recordKeyOperation(facts.kind, pkpId, digest);
    return signature;
  };
  const hex = (bytes) => "0x" + Buffer.from(bytes).toString("hex");
  const digestBytes = (d) => {
    if (d instanceof Uint8Array) return d.length === 32 ? Uint8Array.from(d) : null;
    return typeof d === "string" && DIGEST.test(d) ? Uint8Array.from(Buffer.from(d.slice(2), "hex")) : null;
  };

  /** Whether a run's PKP reference (an id in any case, or the address) names this PKP. */
  const names = async (ref) => {
    if (typeof ref !== "string" || key === null) return false;
    const lower = ref.toLowerCase();
    if (lower === id) return true;
    if (lower.length !== 42) return false;
    const a = await addr();
    return a !== null && lower === a.toLowerCase();
  };

  /** The answer for a request already known to be about this PKP (undefined: not served here). */
  const answer = async (op, args) => {
    switch (op) {
      case "pkpPublicKey": {
        const p = await pub();
        return p === null ? undefined : toHex(p);
      }
      case "pkpAddress":
        return (await addr()) ?? undefined;
      case "pkpSignDigest": {
        const d = digestBytes(args.digest);
        return d === null ? undefined : checkedSign(d, { kind: "digest", digest: hex(d) });
      }
      case "pkpSignMessage": {
        const m = args.message;
        if (typeof m !== "string" && !(m instanceof Uint8Array)) return undefined;
        const digest = messageDigest(m);
        if (digest === null) return undefined;
        const bytes = typeof m === "string" ? Buffer.from(m, "utf8") : Uint8Array.from(m);
        return checkedSign(digest, { kind: "message", digest: hex(digest), bytes });
      }
      case "pkpSignTypedData": {
        if (policies !== null) return undefined; // its facts are parsed on the enclave side only
        const digest = typedDataDigest(args.domain, args.types, args.value);
        // null: the enclave words the refusal
        return digest === null ? undefined : checkedSign(digest, { kind: "typedData" });
      }
      default:
        return undefined;
    }
  };

  const wipe = () => {
    if (key !== null) key.fill(0);
    key = null;
  };

  /**
   * Still authorized as far as this worker can tell: nothing the run's authorization depends on has
   * changed since it was granted (the main thread bumps the epoch when its permission cache applies a
   * change to the account), and the caller key has not expired. Otherwise the key is dropped for good.
   */
  const live = () => {
    if (key === null) return false;
    if (Atomics.load(epochs, slot) === epoch && Date.now() < notAfterMs) return true;
    wipe();
    return false;
  };

  return {
    /**
     * The answer of a key operation on this PKP, or undefined when it must go to the main thread
     * (another PKP, another operation, input the enclave should judge, or authorization that may have
     * changed since the run started: the main thread then decides afresh).
     */
    serve(op, args) {
      if (!SERVED.has(op) || !live() || !isPlainObject(args) || typeof args.pkpId !== "string")
        return undefined;
      return names(args.pkpId).then((mine) => (mine && live() ? answer(op, args) : undefined));
    },
    /** Zero the key; later operations go to the main thread (which refuses them: the run is over). */
    wipe,
  };
}

module.exports = { makeRunKey };
