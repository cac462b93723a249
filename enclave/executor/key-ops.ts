/**
 * The enclave side of a worker's key-operation request: authorize, then call the capability.
 *
 * Every PKP operation first calls the run's `authorizePkp` callback (supplied by the relayer), which
 * resolves an id or address to the canonical bytes32 id and checks (caller key, this CID, pkp); a
 * refusal becomes `pkp_not_authorized` with the callback's message. The action identity key is bound
 * to the run's own CID; the public half of any CID's identity key is public information.
 *
 * Before anything else the argument sizes are checked (worker/arg-limits.js; the worker checked them
 * too, but the worker runs hostile code). After authorization, the operations that cost real CPU
 * (encrypt, decrypt, signatures) are computed by the crypto thread (crypto-thread.ts) with a key derived
 * for that one operation, so a flood of them cannot stall the main thread; whatever that thread cannot
 * answer exactly as the enclave would is served by the enclave here, which words any error.
 *
 * When signing policies apply to the run (policy-gate.ts), every signature, key export, encryption and
 * decryption is parsed here, checked, and then made over the digest computed here: the signature is
 * always over exactly what was checked. Transactions (`pkpSignTransaction`) are serialized and hashed
 * here in every case, so the signed transaction returned is the one the enclave built.
 */
import { createHash } from "node:crypto";
import { Signature } from "ethers";
import type { KeyCapabilities } from "../capabilities";
import {
  OperationError,
  parseDigest,
  parseMessage,
  parseTransaction,
  parseTypedData,
  plainOperation,
  type OperationFacts,
} from "../policy";
import type { PolicyGate } from "./policy-gate";
import type { CryptoAnswer, CryptoRequest, CryptoThreadClient } from "./crypto-thread";
import type { InFlightLimit } from "./in-flight-limit";
import type { KeyOperationKind, KeyOperationLog } from "./key-operation-log";
import type { ExecutorLimits } from "./limits";
import { SendError, type SendRun, type SendService } from "./send";
import { keyOpArgsProblem } from "./worker/arg-limits";
import { CHAIN_KEY_OPS, type ChainSigner } from "./chain-key-ops";

export interface KeyOpError {
  code: string;
  message: string;
  /** Plain data the action reads as `error.details` (sendTransaction's errors). */
  details?: Record<string, unknown>;
}

export type KeyOpAnswer = { ok: true; value: unknown } | { ok: false; error: KeyOpError };

type Args = Record<string, unknown>;

/** Messages from the capability are written by the enclave and never contain key material. */
function capabilityError(e: unknown): KeyOpError {
  // A send's error carries details the action reads (e.g. the hash of a send whose wait ran out).
  if (e instanceof SendError) return { code: e.code, message: e.message, details: { ...e.details } };
  if (typeof e === "object" && e !== null && typeof (e as { code?: unknown }).code === "string") {
    const err = e as { code: string; shortMessage?: unknown; message?: unknown };
    const message = typeof err.shortMessage === "string" ? err.shortMessage : String(err.message);
    return { code: err.code, message };
  }
  return { code: "key_op_failed", message: "the enclave could not complete the operation" };
}

function str(args: Args, field: string): string {
  const v = args[field];
  if (typeof v !== "string") throw { code: "invalid_argument", shortMessage: `${field} must be a string` };
  return v;
}

function strOrBytes(args: Args, field: string): string | Uint8Array {
  const v = args[field];
  if (typeof v === "string" || v instanceof Uint8Array) return v;
  throw { code: "invalid_argument", shortMessage: `${field} must be a string or bytes` };
}

function hexOf(v: string | Uint8Array): string {
  return typeof v === "string" ? v : "0x" + Buffer.from(v).toString("hex");
}

function obj<T>(args: Args, field: string): T {
  const v = args[field];
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    throw { code: "invalid_argument", shortMessage: `${field} must be an object` };
  }
  return v as T;
}

/** What serves a run's key operations: the enclave, the crypto thread if any, the run's limits. */
export interface KeyOpServer {
  keys: KeyCapabilities;
  crypto: CryptoThreadClient | null;
  limits: Pick<ExecutorLimits, "maxKeyOpPayloadBytes" | "maxTypedDataBytes">;
  /** The run's share of the crypto thread (in-flight-limit.ts); absent: no limit. */
  cryptoSlots?: InFlightLimit;
  /** The run's signing-policy check; absent: no policy applies to the run. */
  policy?: PolicyGate;
  /** `Actions.sendTransaction`: the executor's chains and the run's deadline; absent: no chain. */
  send?: { service: SendService; run: SendRun };
  /** Where each completed operation is recorded for the audit log; absent: not recorded. */
  operations?: KeyOperationLog;
}

type PkpOp = (server: KeyOpServer, id: string, args: Args) => unknown;

const DIGEST = /^0x[0-9a-fA-F]{64}$/;

/**
 * Through the crypto thread with `key` (derived for this operation, zeroed by request()), else, when
 * there is no thread or it cannot answer exactly as the enclave would, `inMain` in this thread.
 */
async function offMain(
  server: KeyOpServer,
  deriveKey: () => Uint8Array,
  req: CryptoRequest,
  inMain: () => unknown,
  /** Called with the digest the thread signed, when it reports one (message and typed-data signatures). */
  signed?: (digest: Uint8Array) => void,
): Promise<unknown> {
  const crypto = server.crypto;
  if (crypto === null) return inMain();
  // The key is derived only once this run's turn has come (see InFlightLimit).
  const ask = () => crypto.request(req, deriveKey());
  const answer: CryptoAnswer | null = await (server.cryptoSlots ? server.cryptoSlots.run(ask) : ask());
  if (answer === null) return inMain();
  if (answer.failed !== undefined)
    throw { code: "decryption_failed", shortMessage: "Decryption failed.", details: answer.failed };
  if (signed !== undefined && answer.digest instanceof Uint8Array) signed(answer.digest);
  return answer.value;
}

/** Records a completed operation (key-operation-log.ts) and passes its answer on. */
async function recorded<T>(
  s: KeyOpServer,
  kind: KeyOperationKind,
  id: string,
  digest: string | null,
  op: Promise<T> | T,
): Promise<T> {
  const value = await op;
  s.operations?.recordKeyOperation(kind, id, digest);
  return value;
}

/** What is to be signed, parsed; a parse failure is the enclave's error of that kind. */
function parsed<T extends OperationFacts>(code: string, parse: () => T): T {
  try {
    return parse();
  } catch (e) {
    if (e instanceof OperationError) throw { code, shortMessage: e.message };
    throw e;
  }
}

/** Refuses (policy_denied) unless the run's policies allow the operation; nothing to do without them. */
async function allowed(s: KeyOpServer, id: string, facts: OperationFacts): Promise<void> {
  if (s.policy !== undefined) await s.policy.check(id, facts);
}

/**
 * Checks, then signs; a window use the check took is given back when no signature comes out (the
 * signing failed), so a failure does not count against the window.
 */
async function signIfAllowed<T>(
  s: KeyOpServer,
  id: string,
  facts: OperationFacts,
  sign: () => Promise<T>,
): Promise<T> {
  if (s.policy === undefined) return sign();
  const release = await s.policy.check(id, facts);
  try {
    return await sign();
  } catch (e) {
    await release().catch(() => undefined);
    throw e;
  }
}

function signDigestHex(s: KeyOpServer, id: string, digest: string): Promise<unknown> {
  const bytes = Uint8Array.from(Buffer.from(digest.slice(2), "hex"));
  return offMain(
    s,
    () => s.keys.pkpKeyForRun(id),
    { op: "signDigest", digest: bytes },
    () => s.keys.pkpSignDigest(id, digest),
  );
}

/** Under a policy: check, then sign the digest the check was made on. */
async function checkedSignature(s: KeyOpServer, id: string, facts: OperationFacts & { digest: string }) {
  return recorded(
    s,
    facts.kind as KeyOperationKind,
    id,
    facts.digest,
    signIfAllowed(s, id, facts, () => signDigestHex(s, id, facts.digest)),
  );
}

/**
 * A message or typed-data signature without a policy: the crypto thread hashes and signs, and reports
 * the digest it signed; when the enclave here signs instead (no thread, or it could not answer), the
 * digest is computed here from the same input.
 */
async function hashedOffMain(
  s: KeyOpServer,
  kind: "message" | "typedData",
  id: string,
  req: CryptoRequest,
  inMain: () => unknown,
  digestHere: () => string,
): Promise<unknown> {
  let digest: Uint8Array | null = null;
  const value = await offMain(
    s,
    () => s.keys.pkpKeyForRun(id),
    req,
    inMain,
    (d) => (digest = d),
  );
  if (s.operations !== undefined) {
    let hex: string | null = digest === null ? null : "0x" + Buffer.from(digest).toString("hex");
    if (hex === null) hex = digestHere();
    s.operations.recordKeyOperation(kind, id, hex);
  }
  return value;
}

/**
 * A transaction parsed, checked against the run's policies and signed over the digest of what was
 * parsed; with what gives back the window use the check took (a send the chain refused calls it).
 */
async function signTransactionChecked(
  s: KeyOpServer,
  id: string,
  transaction: unknown,
): Promise<{ raw: string; digest: string; release: () => Promise<void> }> {
  const facts = parsed("invalid_argument", () => parseTransaction(transaction));
  const release = s.policy === undefined ? async () => undefined : await s.policy.check(id, facts);
  try {
    const signature = await signDigestHex(s, id, facts.digest);
    const tx = facts.tx.clone();
    tx.signature = Signature.from(signature as string);
    return { raw: tx.serialized, digest: facts.digest, release: async () => void (await release()) };
  } catch (e) {
    await release().catch(() => undefined);
    throw e;
  }
}

// A null-prototype table looked up with Object.hasOwn: the op name comes from the worker, and a name
// like "constructor" must not reach Object.prototype.
const PKP_OPS: Record<string, PkpOp> = {
  __proto__: null as never,
  // Cached by the enclave after the first call: cheap.
  pkpPublicKey: ({ keys }, id) => keys.pkpPublicKey(id),
  pkpAddress: ({ keys }, id) => keys.pkpAddress(id),
  pkpPrivateKey: async (s, id) => {
    await allowed(s, id, plainOperation("keyExport"));
    return recorded(s, "keyExport", id, null, s.keys.pkpPrivateKey(id));
  },
  pkpSignDigest: (s, id, a) => {
    const digest = hexOf(strOrBytes(a, "digest"));
    if (!DIGEST.test(digest)) return s.keys.pkpSignDigest(id, digest); // the enclave's invalid_digest
    if (s.policy !== undefined) return checkedSignature(s, id, parseDigest(digest));
    const bytes = Uint8Array.from(Buffer.from(digest.slice(2), "hex"));
    return recorded(
      s,
      "digest",
      id,
      digest,
      offMain(
        s,
        () => s.keys.pkpKeyForRun(id),
        { op: "signDigest", digest: bytes },
        () => s.keys.pkpSignDigest(id, digest),
      ),
    );
  },
  pkpSignMessage: (s, id, a) => {
    const message = strOrBytes(a, "message");
    if (s.policy !== undefined)
      return checkedSignature(
        s,
        id,
        parsed("invalid_message", () => parseMessage(message)),
      );
    return hashedOffMain(
      s,
      "message",
      id,
      { op: "signMessage", message },
      () => s.keys.pkpSignMessage(id, message),
      () => parsed("invalid_message", () => parseMessage(message)).digest,
    );
  },
  pkpSignTypedData: (s, id, a) => {
    const domain = obj<Record<string, unknown>>(a, "domain");
    const types = obj<Record<string, Array<{ name: string; type: string }>>>(a, "types");
    const value = obj<Record<string, unknown>>(a, "value");
    if (s.policy !== undefined)
      return checkedSignature(
        s,
        id,
        parsed("invalid_typed_data", () => parseTypedData(domain, types, value)),
      );
    return hashedOffMain(
      s,
      "typedData",
      id,
      { op: "signTypedData", domain, types, value },
      () => s.keys.pkpSignTypedData(id, domain, types, value),
      () => parsed("invalid_typed_data", () => parseTypedData(domain, types, value)).digest,
    );
  },
  /** A transaction the enclave serializes and hashes itself; answers the signed serialized transaction. */
  pkpSignTransaction: async (s, id, a) => {
    const { raw, digest } = await signTransactionChecked(s, id, a.transaction);
    s.operations?.recordKeyOperation("transaction", id, digest);
    return raw;
  },
  /**
   * Fill, simulate, sign (exactly as pkpSignTransaction, policies included) and broadcast on one of
   * the operator's chains (send/send.ts).
   */
  pkpSendTransaction: async (s, id, a) => {
    if (s.send === undefined)
      throw new SendError("chain_not_configured", "this service has no chain configured for sendTransaction");
    const from = (await s.keys.pkpAddress(id)) as string;
    const sign = async (tx: unknown) => {
      const signed = await signTransactionChecked(s, id, tx);
      s.operations?.recordKeyOperation("transaction", id, signed.digest);
      return signed;
    };
    return s.send.service.send(a, from, sign, s.send.run);
  },
  pkpEncrypt: async (s, id, a) => {
    const plaintext = strOrBytes(a, "plaintext");
    await allowed(s, id, plainOperation("encrypt"));
    return recorded(
      s,
      "encrypt",
      id,
      null,
      offMain(
        s,
        () => s.keys.pkpAesKeyForOp(id),
        { op: "encrypt", plaintext },
        () => s.keys.pkpEncrypt(id, plaintext),
      ),
    );
  },
  pkpDecrypt: async (s, id, a) => {
    const ciphertext = str(a, "ciphertext");
    await allowed(s, id, plainOperation("decrypt"));
    return recorded(
      s,
      "decrypt",
      id,
      null,
      offMain(
        s,
        () => s.keys.pkpAesKeyForOp(id),
        { op: "decrypt", ciphertext },
        () => s.keys.pkpDecrypt(id, ciphertext),
      ),
    );
  },
};

/** Ed25519 and Schnorr signatures by `id`, off the main thread like the others (offMain). */
function chainSigner(s: KeyOpServer, id: string): ChainSigner {
  const bytes = (h: string) => Uint8Array.from(Buffer.from(h.slice(2), "hex"));
  return {
    // Ed25519 signs the message itself: the audit log names it by its SHA-256.
    ed25519: async (message) =>
      (await recorded(
        s,
        "ed25519",
        id,
        "0x" + createHash("sha256").update(message).digest("hex"),
        offMain(
          s,
          () => s.keys.pkpEd25519SeedForOp(id),
          { op: "signEd25519", message },
          () => s.keys.pkpSignEd25519(id, message),
        ),
      )) as string,
    schnorr: async (digest, tweak, merkleRoot) =>
      (await recorded(
        s,
        "schnorr",
        id,
        digest,
        offMain(
          s,
          () => s.keys.pkpKeyForRun(id),
          {
            op: "signSchnorr",
            digest: bytes(digest),
            tweak,
            merkleRoot: merkleRoot === null ? null : bytes(merkleRoot),
          },
          () => s.keys.pkpSignSchnorr(id, digest, { tweak, merkleRoot }),
        ),
      )) as string,
  };
}

// Ed25519 and Schnorr (chain-key-ops.ts): the same authorization, scheduling and policy check.
for (const name of Object.keys(CHAIN_KEY_OPS)) {
  const chainOp = CHAIN_KEY_OPS[name];
  PKP_OPS[name] = (s, id, a) =>
    chainOp(s.keys, id, a, (facts, sign) => signIfAllowed(s, id, facts, sign), chainSigner(s, id));
}

export async function serveKeyOp(
  server: KeyOpServer,
  runCid: string,
  authorizePkp: (pkpIdOrAddress: string) => Promise<string>,
  op: string,
  args: Args,
): Promise<KeyOpAnswer> {
  const { keys } = server;
  try {
    if (typeof args !== "object" || args === null) args = {};
    const tooLarge = keyOpArgsProblem(op, args, server.limits);
    if (tooLarge !== null) return { ok: false, error: { code: "key_op_too_large", message: tooLarge } };
    const pkpOp = typeof op === "string" && Object.hasOwn(PKP_OPS, op) ? PKP_OPS[op] : undefined;
    if (pkpOp !== undefined) {
      const requested = str(args, "pkpId");
      let pkpId: string;
      try {
        pkpId = await authorizePkp(requested);
      } catch (e) {
        const why = e instanceof Error ? e.message : String(e);
        return {
          ok: false,
          error: { code: "pkp_not_authorized", message: `PKP ${requested} refused: ${why}` },
        };
      }
      return { ok: true, value: await pkpOp(server, pkpId, args) };
    }
    switch (op) {
      case "actionPrivateKey":
        return { ok: true, value: keys.actionPrivateKey(runCid) };
      case "actionPublicKey":
        return { ok: true, value: keys.actionPublicKey(str(args, "cid")) };
      case "actionAddress":
        return { ok: true, value: keys.actionAddress(str(args, "cid")) };
      default:
        return { ok: false, error: { code: "invalid_argument", message: "unknown operation" } };
    }
  } catch (e) {
    return { ok: false, error: capabilityError(e) };
  }
}
