/**
 * What a client builds around an action that signs for Solana or Bitcoin, with each chain's own library
 * and no network: a compiled Solana transfer message (@solana/kit), a PSBT spending a PKP's Taproot
 * output (bitcoinjs-lib), and the offline checks of what comes back (the transaction assembled, encoded,
 * decoded and its signature verified; the PSBT finalized and extracted, its witness signature verified
 * over the sighash bitcoinjs-lib computes).
 */
import * as ecc from "@bitcoinerlab/secp256k1";
import * as bitcoin from "bitcoinjs-lib";
import {
  AccountRole,
  address,
  appendTransactionMessageInstructions,
  blockhash,
  compileTransactionMessage,
  createTransactionMessage,
  getCompiledTransactionMessageEncoder,
  getPublicKeyFromAddress,
  getTransactionDecoder,
  getTransactionEncoder,
  pipe,
  setTransactionMessageFeePayer,
  setTransactionMessageLifetimeUsingBlockhash,
  verifySignature,
  type Address,
} from "@solana/kit";

bitcoin.initEccLib(ecc);

export const SYSTEM_PROGRAM = "11111111111111111111111111111111";
export const MEMO_PROGRAM = "MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr";
const BLOCKHASH = "4uQeVj5tqViQh7yWWGStvkEG1Zmhx6uasJtWCJziofM";

/** System Program Transfer: u32 LE 2, then the lamports as u64 LE. */
function transferData(lamports: bigint): Uint8Array {
  const data = new Uint8Array(12);
  const view = new DataView(data.buffer);
  view.setUint32(0, 2, true);
  view.setBigUint64(4, lamports, true);
  return data;
}

/** A compiled v0 message: `from` pays `lamports` to `to`, optionally with a memo instruction. */
export function solanaTransferMessage(from: string, to: string, lamports: bigint, memo?: string): Uint8Array {
  const payer = address(from);
  const transfer = {
    programAddress: address(SYSTEM_PROGRAM),
    accounts: [
      { address: payer, role: AccountRole.WRITABLE_SIGNER },
      { address: address(to), role: AccountRole.WRITABLE },
    ],
    data: transferData(lamports),
  };
  const memoIx = { programAddress: address(MEMO_PROGRAM), data: new TextEncoder().encode(memo ?? "") };
  const message = pipe(
    createTransactionMessage({ version: 0 }),
    (m) => setTransactionMessageFeePayer(payer, m),
    (m) =>
      setTransactionMessageLifetimeUsingBlockhash(
        { blockhash: blockhash(BLOCKHASH), lastValidBlockHeight: 1n },
        m,
      ),
    (m) => appendTransactionMessageInstructions(memo === undefined ? [transfer] : [transfer, memoIx], m),
  );
  return new Uint8Array(getCompiledTransactionMessageEncoder().encode(compileTransactionMessage(message)));
}

/**
 * The wire transaction of `messageBytes` with `signature` (0x-hex) as `signer`'s, encoded and decoded
 * again by @solana/kit, and whether that signature verifies (WebCrypto Ed25519) over its message.
 */
export async function verifySolanaTransaction(
  messageBytes: Uint8Array,
  signer: string,
  signatureHex: string,
): Promise<boolean> {
  const signature = Uint8Array.from(Buffer.from(signatureHex.slice(2), "hex"));
  const wire = getTransactionEncoder().encode({
    messageBytes: messageBytes as never,
    signatures: { [signer as Address]: signature as never },
  });
  const decoded = getTransactionDecoder().decode(wire);
  const sig = decoded.signatures[signer as Address];
  if (sig === null || sig === undefined) return false;
  const key = await getPublicKeyFromAddress(address(signer));
  return verifySignature(key, sig, decoded.messageBytes);
}

/** The P2TR output script of an x-only internal key (no script tree). */
export function p2trScript(xOnlyHex: string, network = bitcoin.networks.bitcoin): Uint8Array {
  return bitcoin.payments.p2tr({ internalPubkey: Buffer.from(xOnlyHex.slice(2), "hex"), network }).output!;
}

/** A PSBT spending one UTXO of `inputValue` sat at the PKP's P2TR script to `outputs`. */
export function taprootPsbt(
  ownXOnlyHex: string,
  inputValue: bigint,
  outputs: { script: Uint8Array; value: bigint }[],
): string {
  const psbt = new bitcoin.Psbt({ network: bitcoin.networks.bitcoin });
  psbt.addInput({
    hash: "ab".repeat(32),
    index: 0,
    witnessUtxo: { script: p2trScript(ownXOnlyHex), value: inputValue },
  });
  for (const o of outputs) psbt.addOutput({ script: o.script, value: o.value });
  return psbt.toBase64();
}

/**
 * Finalizes and extracts the signed PSBT with bitcoinjs-lib, then checks the key-path witness against
 * the output key with @bitcoinerlab/secp256k1 over the sighash bitcoinjs-lib computes itself.
 */
export function verifyTaprootSpend(
  signedBase64: string,
  outputKeyHex: string,
): { txHex: string; ok: boolean } {
  const psbt = bitcoin.Psbt.fromBase64(signedBase64);
  psbt.finalizeAllInputs();
  const tx = psbt.extractTransaction();
  const witness = tx.ins[0].witness;
  const sig = witness[0];
  const prev = psbt.data.inputs.map((i) => i.witnessUtxo!);
  const hashType = sig.length === 65 ? sig[64] : bitcoin.Transaction.SIGHASH_DEFAULT;
  const sighash = tx.hashForWitnessV1(
    0,
    prev.map((p) => p.script),
    prev.map((p) => p.value),
    hashType,
  );
  const key = Buffer.from(outputKeyHex.slice(2), "hex");
  return {
    txHex: tx.toHex(),
    ok: witness.length === 1 && ecc.verifySchnorr(sighash, key, sig.subarray(0, 64)),
  };
}
