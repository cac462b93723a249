/**
 * relayer/http/ethSignatures.ts against ethers as the independent implementation: the first signature
 * of an address is recovered, later ones are verified against the remembered public key, and both
 * answer exactly as ethers' recovery does.
 */
import { expect } from "chai";
import fc from "fast-check";
import { Signature, Wallet, getBytes, hashMessage, recoverAddress as ethersRecover } from "ethers";
import {
  isSignatureOf,
  personalMessageDigest,
  personalMessageDigestBytes,
  recoverAddress,
} from "../../relayer/http/ethSignatures";

const CURVE_N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

/** The same signature with s replaced by n − s and v flipped: as valid, and what a careless signer makes. */
function highS(signature: string): string {
  const sig = Signature.from(signature);
  const s = CURVE_N - BigInt(sig.s);
  const v = sig.v === 27 ? 28 : 27;
  return sig.r + s.toString(16).padStart(64, "0") + v.toString(16);
}

function withV(signature: string, v: number): string {
  return signature.slice(0, 130) + v.toString(16).padStart(2, "0");
}

describe("ethSignatures: checking client signatures", () => {
  it("hashes personal messages as ethers' hashMessage does, ASCII and not", () => {
    fc.assert(
      fc.property(fc.string({ unit: "grapheme", maxLength: 300 }), (text) => {
        expect(personalMessageDigest(text)).to.equal(hashMessage(text));
        expect("0x" + Buffer.from(personalMessageDigestBytes(text)).toString("hex")).to.equal(
          hashMessage(text),
        );
      }),
      { numRuns: 200 },
    );
  });

  it("recovers the checksummed signer of a digest, as ethers does", () => {
    const w = Wallet.createRandom();
    const digest = hashMessage("recover me");
    const sig = w.signingKey.sign(digest).serialized;
    expect(recoverAddress(digest, sig)).to.equal(w.address);
    expect(recoverAddress(digest, sig)).to.equal(ethersRecover(digest, sig));
  });

  it("answers null for a signature whose v is neither 27/28 nor 0/1", () => {
    const w = Wallet.createRandom();
    const digest = hashMessage("v");
    expect(recoverAddress(digest, withV(w.signingKey.sign(digest).serialized, 29))).to.equal(null);
  });

  it("accepts the signer's signatures and refuses others', first by recovery, then by verification", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 200 }), fc.string({ maxLength: 200 }), (text, other) => {
        const signer = Wallet.createRandom();
        const stranger = Wallet.createRandom();
        const claimed = signer.address.toLowerCase();
        const digest = personalMessageDigestBytes(text);
        // Twice each: the first call recovers (and remembers the key), the second verifies.
        for (let round = 0; round < 2; round++) {
          expect(
            isSignatureOf(claimed, digest, signer.signMessageSync(text)),
            `own, round ${round}`,
          ).to.equal(true);
          expect(
            isSignatureOf(claimed, digest, stranger.signMessageSync(text)),
            `stranger, ${round}`,
          ).to.equal(false);
          if (other !== text)
            expect(
              isSignatureOf(claimed, digest, signer.signMessageSync(other)),
              `other text, ${round}`,
            ).to.equal(false);
        }
      }),
      { numRuns: 60 },
    );
  });

  // ethers refuses high s (its own choice); Ethereum's ecrecover and libsecp256k1's recovery accept it.
  // What matters here is that both paths give the same answer.
  it("accepts a high-s signature both when recovering and when verifying", () => {
    const w = Wallet.createRandom();
    const digest = getBytes(hashMessage("high s"));
    const malleated = highS(w.signingKey.sign(digest).serialized);
    expect(isSignatureOf(w.address.toLowerCase(), digest, malleated), "recovered").to.equal(true);
    expect(isSignatureOf(w.address.toLowerCase(), digest, malleated), "verified").to.equal(true);
  });

  it("refuses a malformed signature without throwing", () => {
    const w = Wallet.createRandom();
    const digest = personalMessageDigestBytes("malformed");
    const good = w.signMessageSync("malformed");
    isSignatureOf(w.address.toLowerCase(), digest, good); // remembered
    for (const bad of [
      good.slice(0, 130),
      good + "00",
      "0x" + "zz".repeat(65),
      withV(good, 2),
      "0x" + "00".repeat(65),
    ])
      expect(isSignatureOf(w.address.toLowerCase(), digest, bad), bad).to.equal(false);
  });

  it("refuses a signature claimed for an address it does not recover to, and remembers nothing from it", () => {
    const signer = Wallet.createRandom();
    const victim = Wallet.createRandom();
    const digest = personalMessageDigestBytes("plant");
    // The attacker claims the victim's address with its own signature: refused, and the victim's own
    // signature still passes afterwards (nothing of the attacker's key was stored under the victim).
    expect(isSignatureOf(victim.address.toLowerCase(), digest, signer.signMessageSync("plant"))).to.equal(
      false,
    );
    expect(isSignatureOf(victim.address.toLowerCase(), digest, victim.signMessageSync("plant"))).to.equal(
      true,
    );
    expect(isSignatureOf(victim.address.toLowerCase(), digest, signer.signMessageSync("plant"))).to.equal(
      false,
    );
  });
});
