/**
 * The key operations of a PKP's Ed25519 and Schnorr keys (docs/actions.md, "Solana and Bitcoin"),
 * served like every other PKP operation by key-ops.ts: authorized first, scheduled fairly, counted, and
 * then checked against the run's signing policies over exactly what is signed.
 *
 * The libraries that read what is signed (@solana/kit's message decoder, bitcoinjs-lib's PSBT) run here,
 * on the enclave side: the action hands in bytes or a base64 string, never an object of theirs, and gets
 * back a signature or a PSBT string. The Taproot sighash is computed here from the PSBT, and only the
 * PKP's own key-path input is signed.
 */
import type { KeyCapabilities } from "../capabilities";
import {
  OperationError,
  parseEd25519,
  parseSchnorrDigest,
  parseSolanaMessage,
  parseTaprootInput,
  type OperationFacts,
} from "../policy";

type Args = Record<string, unknown>;

/** key-ops.ts's check-then-sign of the run (no policy: sign). */
export type SignIfAllowed = <T>(facts: OperationFacts, sign: () => Promise<T>) => Promise<T>;

/**
 * The run's signatures by this PKP (key-ops.ts): on the crypto thread with a key derived for the one
 * operation, or in the enclave where the thread cannot answer. 0x-hex, 64 bytes.
 */
export interface ChainSigner {
  ed25519(message: Uint8Array): Promise<string>;
  schnorr(digest: string, tweak: "taproot" | null, merkleRoot: string | null): Promise<string>;
}

export type ChainKeyOp = (
  keys: KeyCapabilities,
  pkpId: string,
  args: Args,
  signIfAllowed: SignIfAllowed,
  signer: ChainSigner,
) => unknown;

const DIGEST = /^0x[0-9a-fA-F]{64}$/;

function invalid(message: string): never {
  throw { code: "invalid_argument", shortMessage: message };
}

/** What is to be signed, parsed; a parse failure is an invalid_argument naming the problem. */
function parsed<T>(what: string, parse: () => T): T {
  try {
    return parse();
  } catch (e) {
    if (e instanceof OperationError) invalid(`${what}: ${e.message}`);
    throw e;
  }
}

function hexOf(v: unknown, what: string): string | null {
  if (v === undefined || v === null) return null;
  if (v instanceof Uint8Array) return "0x" + Buffer.from(v).toString("hex");
  if (typeof v === "string") return v;
  return invalid(`${what} must be bytes or 0x-prefixed hex`);
}

/** The P2TR output script of a PKP's Taproot address (no script tree): OP_1 PUSH32 output key. */
function ownTaprootScript(keys: KeyCapabilities, pkpId: string): Uint8Array {
  const outputKey = Buffer.from(keys.pkpPublicKeys(pkpId).taproot.tweakedXOnly.slice(2), "hex");
  return Uint8Array.from([0x51, 0x20, ...outputKey]);
}

export const CHAIN_KEY_OPS: Record<string, ChainKeyOp> = {
  __proto__: null as never,
  /** Public: no policy. The worker picks the scheme's key (chain-actions.js). */
  pkpPublicKeys: (keys, id) => keys.pkpPublicKeys(id),

  pkpSignEd25519: (_keys, _id, a, signIfAllowed, signer) => {
    const facts = parsed("signEd25519", () => parseEd25519(a.message));
    return signIfAllowed(facts, () => signer.ed25519(facts.message));
  },

  pkpSignSchnorr: (_keys, _id, a, signIfAllowed, signer) => {
    const tweak = a.tweak ?? null;
    if (tweak !== null && tweak !== "taproot") invalid('signSchnorr: tweak must be "taproot" or null');
    const merkleRoot = hexOf(a.merkleRoot, "signSchnorr: merkleRoot");
    if (merkleRoot !== null && (tweak === null || !DIGEST.test(merkleRoot)))
      invalid('signSchnorr: merkleRoot must be 32 bytes, with tweak "taproot"');
    const facts = parsed("signSchnorr", () => parseSchnorrDigest(a.digest));
    return signIfAllowed(facts, () => signer.schnorr(facts.digest, tweak as "taproot" | null, merkleRoot));
  },

  /** A compiled Solana transaction message the PKP signs: {signature (0x-hex, 64 bytes), address}. */
  pkpSignSolanaMessage: (keys, id, a, signIfAllowed, signer) => {
    const address = keys.pkpPublicKeys(id).ed25519.solanaAddress;
    const facts = parsed("solana.signTransactionMessage", () => parseSolanaMessage(a.messageBytes, address));
    return signIfAllowed(facts, async () => ({ signature: await signer.ed25519(facts.message), address }));
  },

  /** One key-path input of a PSBT, signed with the Taproot key: the updated PSBT, base64. */
  pkpSignTaprootInput: (keys, id, a, signIfAllowed, signer) => {
    const facts = parsed("bitcoin.signTaprootInput", () =>
      parseTaprootInput(a.psbtBase64, a.inputIndex, ownTaprootScript(keys, id)),
    );
    return signIfAllowed(facts, async () => {
      const signature = Buffer.from((await signer.schnorr(facts.digest, "taproot", null)).slice(2), "hex");
      // BIP-341: a 64-byte signature means SIGHASH_DEFAULT; any other type is appended.
      const tapKeySig =
        facts.sighashType === 0 ? signature : Buffer.concat([signature, Buffer.of(facts.sighashType)]);
      const input = facts.psbt.data.inputs[facts.inputIndex];
      const internalKey = Buffer.from(keys.pkpPublicKeys(id).taproot.xOnly.slice(2), "hex");
      facts.psbt.updateInput(facts.inputIndex, {
        tapKeySig,
        ...(input.tapInternalKey === undefined ? { tapInternalKey: internalKey } : {}),
      });
      return facts.psbt.toBase64();
    });
  },
};
