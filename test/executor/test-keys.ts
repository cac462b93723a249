/**
 * TEMPORARY test-only KeyCapabilities built on ethers, used until enclave/index.ts (the real Enclave)
 * is committed. Keys are derived deterministically from a test root so tests can recompute them.
 */
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { ethers } from "ethers";
import type { KeyCapabilities } from "../../enclave/capabilities";

export class TestKeys implements KeyCapabilities {
  constructor(private readonly root: string) {}
  private wallet(label: string, id: string): ethers.Wallet {
    return new ethers.Wallet(ethers.keccak256(ethers.toUtf8Bytes(`${this.root}/${label}/${id}`)));
  }
  private aesKey(id: string): Buffer {
    return Buffer.from(ethers.getBytes(ethers.keccak256(ethers.toUtf8Bytes(`${this.root}/aes/${id}`))));
  }
  pkpPublicKey(id: string) {
    return this.wallet("pkp", id).signingKey.publicKey;
  }
  pkpAddress(id: string) {
    return this.wallet("pkp", id).address;
  }
  pkpSignDigest(id: string, digest: string) {
    return this.wallet("pkp", id).signingKey.sign(digest).serialized;
  }
  pkpSignMessage(id: string, message: string | Uint8Array) {
    return this.wallet("pkp", id).signMessageSync(message);
  }
  pkpSignTypedData(id: string, domain: Record<string, unknown>, types: Record<string, Array<{ name: string; type: string }>>, value: Record<string, unknown>) {
    const w = this.wallet("pkp", id);
    return w.signingKey.sign(ethers.TypedDataEncoder.hash(domain, types, value)).serialized;
  }
  pkpEncrypt(id: string, plaintext: string | Uint8Array) {
    const nonce = randomBytes(12);
    const c = createCipheriv("aes-256-gcm", this.aesKey(id), nonce);
    const data = typeof plaintext === "string" ? Buffer.from(plaintext) : Buffer.from(plaintext);
    const body = Buffer.concat([c.update(data), c.final()]);
    return "0x" + Buffer.concat([nonce, body, c.getAuthTag()]).toString("hex");
  }
  pkpDecrypt(id: string, ciphertext: string) {
    const b = Buffer.from(ciphertext.slice(2), "hex");
    const d = createDecipheriv("aes-256-gcm", this.aesKey(id), b.subarray(0, 12));
    d.setAuthTag(b.subarray(b.length - 16));
    try {
      return new Uint8Array(Buffer.concat([d.update(b.subarray(12, b.length - 16)), d.final()]));
    } catch {
      throw Object.assign(new Error("decryption failed"), { code: "decryption_failed", shortMessage: "decryption failed" });
    }
  }
  pkpPrivateKey(id: string) {
    return this.wallet("pkp", id).privateKey;
  }
  actionPrivateKey(cid: string) {
    return this.wallet("action", cid).privateKey;
  }
  actionPublicKey(cid: string) {
    return this.wallet("action", cid).signingKey.publicKey;
  }
  actionAddress(cid: string) {
    return this.wallet("action", cid).address;
  }
}
