/**
 * The enclave side of a worker's key-operation request: authorize, then call the capability.
 *
 * Every PKP operation first calls the run's `authorizePkp` callback (supplied by the relayer), which
 * resolves an id or address to the canonical bytes32 id and checks (caller key, this CID, pkp); a
 * refusal becomes `pkp_not_authorized` with the callback's message. The action identity key is bound
 * to the run's own CID; the public half of any CID's identity key is public information.
 */
import type { KeyCapabilities } from "../capabilities";

export interface KeyOpError {
  code: string;
  message: string;
}

export type KeyOpAnswer = { ok: true; value: unknown } | { ok: false; error: KeyOpError };

type Args = Record<string, unknown>;

/** Messages from the capability are written by the enclave and never contain key material. */
function capabilityError(e: unknown): KeyOpError {
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

// A null-prototype table looked up with Object.hasOwn: the op name comes from the worker, and a name
// like "constructor" must not reach Object.prototype.
const PKP_OPS: Record<string, (keys: KeyCapabilities, id: string, args: Args) => unknown> = {
  __proto__: null as never,
  pkpPublicKey: (k, id) => k.pkpPublicKey(id),
  pkpAddress: (k, id) => k.pkpAddress(id),
  pkpSignDigest: (k, id, a) => k.pkpSignDigest(id, hexOf(strOrBytes(a, "digest"))),
  pkpSignMessage: (k, id, a) => k.pkpSignMessage(id, strOrBytes(a, "message")),
  pkpSignTypedData: (k, id, a) =>
    k.pkpSignTypedData(id, obj(a, "domain"), obj(a, "types"), obj<Record<string, unknown>>(a, "value")),
  pkpEncrypt: (k, id, a) => k.pkpEncrypt(id, strOrBytes(a, "plaintext")),
  pkpDecrypt: (k, id, a) => k.pkpDecrypt(id, str(a, "ciphertext")),
  pkpPrivateKey: (k, id) => k.pkpPrivateKey(id),
};

export async function serveKeyOp(
  keys: KeyCapabilities,
  runCid: string,
  authorizePkp: (pkpIdOrAddress: string) => Promise<string>,
  op: string,
  args: Args,
): Promise<KeyOpAnswer> {
  try {
    if (typeof args !== "object" || args === null) args = {};
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
      return { ok: true, value: pkpOp(keys, pkpId, args) };
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
