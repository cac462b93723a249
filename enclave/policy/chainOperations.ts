/**
 * What an Ed25519 or Schnorr signature is about to sign, parsed by the enclave into the facts a policy
 * reads (docs/policies.md, "ed25519" and "schnorr"), like operation.ts does for the EVM:
 *
 * - Ed25519: every message is tried as a compiled Solana transaction message (@solana/kit's decoder,
 *   whole input consumed). When it is one, its program ids and the lamports its System transfers move
 *   are the facts, whichever entry point signs it: a raw `signEd25519` of a transaction message meets
 *   the same Solana rules as `solana.signTransactionMessage`.
 * - Schnorr: a raw digest says nothing; a Taproot PSBT input (bitcoinjs-lib) gives its BIP-341 sighash,
 *   computed here and signed as is, and the transaction's outputs, read from the PSBT.
 */
import { getCompiledTransactionMessageDecoder, type CompiledTransactionMessage } from "@solana/kit";
import { Psbt, Transaction } from "bitcoinjs-lib";
import { OperationError } from "./operationError";
import { readDigest } from "./digest";

export const SYSTEM_PROGRAM = "11111111111111111111111111111111";

export interface SolanaFacts {
  /** The program of every instruction, in order (base58). */
  programIds: string[];
  /** Lamports moved by System transfers (Transfer, TransferWithSeed, CreateAccount, CreateAccountWithSeed). */
  lamports: bigint;
  /** The accounts that must sign (base58), the fee payer first. */
  signers: string[];
}

export interface Ed25519Facts {
  kind: "ed25519";
  /** Exactly the bytes that get signed. */
  message: Uint8Array;
  /** The Solana transaction message these bytes are, or null when they are not one. */
  solana: SolanaFacts | null;
}

export interface BitcoinOutput {
  /** The output script, 0x-hex. */
  script: string;
  /** Satoshis. */
  amount: bigint;
}

export interface BitcoinFacts {
  /** The outputs that do not pay back to the signing key's own script (change is not spending). */
  outputs: BitcoinOutput[];
  /** Their total, in satoshis. */
  amount: bigint;
}

export interface SchnorrFacts {
  kind: "schnorr";
  /** The 32-byte digest signed (0x-hex): the caller's, or the sighash computed here. */
  digest: string;
  /** The Taproot PSBT input this digest is the sighash of, or null for a raw digest. */
  bitcoin: BitcoinFacts | null;
}

const HEX_BYTES = /^0x([0-9a-fA-F]{2})*$/;

function bytesOf(v: unknown, what: string): Uint8Array {
  if (v instanceof Uint8Array) return Uint8Array.from(v);
  if (typeof v === "string" && HEX_BYTES.test(v)) return Uint8Array.from(Buffer.from(v.slice(2), "hex"));
  throw new OperationError(`${what} must be bytes or 0x-prefixed hex`);
}

const messageDecoder = getCompiledTransactionMessageDecoder();

/** The compiled Solana message `bytes` are, or null when they are not exactly one. */
function decodeSolanaMessage(bytes: Uint8Array): CompiledTransactionMessage | null {
  try {
    const [message, end] = messageDecoder.read(bytes, 0);
    return end === bytes.length ? message : null;
  } catch {
    return null;
  }
}

function u64le(data: Uint8Array, at: number): bigint | null {
  if (data.length < at + 8) return null;
  return new DataView(data.buffer, data.byteOffset, data.byteLength).getBigUint64(at, true);
}

/** Lamports one System instruction moves (0 for those that move none); null when its data is malformed. */
function systemLamports(data: Uint8Array): bigint | null {
  if (data.length < 4) return null;
  const kind = new DataView(data.buffer, data.byteOffset, data.byteLength).getUint32(0, true);
  switch (kind) {
    case 0: // CreateAccount { lamports, space, owner }
    case 2: // Transfer { lamports }
      return u64le(data, 4);
    case 3: {
      // CreateAccountWithSeed { base: Pubkey, seed: String (u64 length), lamports, space, owner }
      const seedLength = u64le(data, 36);
      if (seedLength === null || seedLength > 32n) return null;
      return u64le(data, 44 + Number(seedLength));
    }
    case 11: // TransferWithSeed { lamports, from_seed, from_owner }
      return u64le(data, 4);
    default:
      return 0n;
  }
}

function solanaFacts(m: CompiledTransactionMessage): SolanaFacts {
  // Version 1 messages (a later format) are not read here: to the rules, such bytes are no transaction.
  if (!("instructions" in m)) throw new OperationError("only legacy and version 0 Solana messages are read");
  const accounts = m.staticAccounts.map(String);
  const programIds: string[] = [];
  let lamports = 0n;
  for (const ix of m.instructions) {
    // Program ids are always static accounts (the runtime refuses them from lookup tables).
    const program = accounts[ix.programAddressIndex];
    if (program === undefined) throw new OperationError("an instruction's program is not a static account");
    programIds.push(program);
    if (program === SYSTEM_PROGRAM) {
      const moved = systemLamports(Uint8Array.from(ix.data ?? []));
      if (moved === null) throw new OperationError("a System Program instruction's data is malformed");
      lamports += moved;
    }
  }
  return { programIds, lamports, signers: accounts.slice(0, m.header.numSignerAccounts) };
}

/** An Ed25519 message (bytes or 0x-hex), and the Solana transaction it is, if it is one. */
export function parseEd25519(message: unknown): Ed25519Facts {
  const bytes = bytesOf(message, "the message");
  const decoded = decodeSolanaMessage(bytes);
  let solana: SolanaFacts | null = null;
  if (decoded !== null) {
    try {
      solana = solanaFacts(decoded);
    } catch {
      solana = null; // decodes, but no runtime would run it: not a transaction, for the rules
    }
  }
  return { kind: "ed25519", message: bytes, solana };
}

/**
 * A compiled Solana transaction message that `signer` (base58) must sign: refused unless it is exactly
 * one and names `signer` among its signers.
 */
export function parseSolanaMessage(messageBytes: unknown, signer: string): Ed25519Facts {
  const bytes = bytesOf(messageBytes, "messageBytes");
  const decoded = decodeSolanaMessage(bytes);
  if (decoded === null) throw new OperationError("messageBytes is not a compiled Solana transaction message");
  const solana = solanaFacts(decoded);
  if (!solana.signers.includes(signer))
    throw new OperationError(`the message does not list ${signer} among its signers`);
  return { kind: "ed25519", message: bytes, solana };
}

export function parseSchnorrDigest(digest: unknown): SchnorrFacts {
  return { kind: "schnorr", digest: readDigest(digest), bitcoin: null };
}

/** A parsed Taproot key-path input: its sighash and outputs, and the PSBT to put the signature in. */
export interface TaprootInputFacts extends SchnorrFacts {
  bitcoin: BitcoinFacts;
  psbt: Psbt;
  inputIndex: number;
  /** The sighash type byte appended to the signature (none for SIGHASH_DEFAULT). */
  sighashType: number;
}

const SIGHASH_DEFAULT = 0x00;
const SIGHASH_ALL = 0x01;
/** At most this many inputs and outputs (a PSBT larger than any standard transaction is refused). */
const MAX_IO = 2_000;

/**
 * Input `inputIndex` of a PSBT (base64) as a key-path spend of `ownScript` (the PKP's P2TR output
 * script, 0x5120 ‖ output key): every input must carry its witnessUtxo (the BIP-341 sighash commits to
 * all amounts and scripts), the signed input must pay `ownScript`, with no script tree, and sign with
 * SIGHASH_DEFAULT or SIGHASH_ALL (the outputs the policy reads are then exactly the ones signed).
 */
export function parseTaprootInput(
  psbtBase64: unknown,
  inputIndex: unknown,
  ownScript: Uint8Array,
): TaprootInputFacts {
  if (typeof psbtBase64 !== "string" || psbtBase64 === "")
    throw new OperationError("psbtBase64 must be a string");
  if (!Number.isSafeInteger(inputIndex) || (inputIndex as number) < 0)
    throw new OperationError("inputIndex must be a non-negative integer");
  const index = inputIndex as number;
  let psbt: Psbt;
  try {
    psbt = Psbt.fromBase64(psbtBase64);
  } catch (e) {
    throw new OperationError(`the PSBT does not parse: ${(e as Error).message}`);
  }
  const inputs = psbt.data.inputs;
  const tx = Transaction.fromBuffer(psbt.data.globalMap.unsignedTx.toBuffer());
  if (inputs.length > MAX_IO || tx.outs.length > MAX_IO)
    throw new OperationError(`the PSBT has more than ${MAX_IO} inputs or outputs`);
  if (index >= inputs.length)
    throw new OperationError(`input ${index} does not exist (${inputs.length} inputs)`);
  const prevScripts: Uint8Array[] = [];
  const values: bigint[] = [];
  inputs.forEach((input, i) => {
    if (input.witnessUtxo === undefined)
      throw new OperationError(`input ${i} has no witnessUtxo (a Taproot sighash commits to every input's)`);
    prevScripts.push(input.witnessUtxo.script);
    values.push(BigInt(input.witnessUtxo.value));
  });
  const input = inputs[index];
  if (!Buffer.from(prevScripts[index]).equals(Buffer.from(ownScript)))
    throw new OperationError(`input ${index} does not spend this PKP's Taproot output`);
  if (input.tapMerkleRoot !== undefined || (input.tapLeafScript?.length ?? 0) > 0)
    throw new OperationError("script-path spends are not supported (key path only, no script tree)");
  if (input.tapKeySig !== undefined) throw new OperationError(`input ${index} is already signed`);
  const sighashType = input.sighashType ?? SIGHASH_DEFAULT;
  if (sighashType !== SIGHASH_DEFAULT && sighashType !== SIGHASH_ALL)
    throw new OperationError(
      "only SIGHASH_DEFAULT and SIGHASH_ALL are signed (the policy reads every output)",
    );
  const sighash = tx.hashForWitnessV1(index, prevScripts, values, sighashType);
  const outputs = tx.outs
    .filter((o) => !Buffer.from(o.script).equals(Buffer.from(ownScript)))
    .map((o) => ({ script: "0x" + Buffer.from(o.script).toString("hex"), amount: BigInt(o.value) }));
  return {
    kind: "schnorr",
    digest: "0x" + Buffer.from(sighash).toString("hex"),
    bitcoin: { outputs, amount: outputs.reduce((t, o) => t + o.amount, 0n) },
    psbt,
    inputIndex: index,
    sighashType,
  };
}
