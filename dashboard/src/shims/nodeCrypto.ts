/**
 * The two node:crypto functions the SDK's request signing uses (sdk/signRequest.ts), for the browser.
 * Vite aliases `node:crypto` here (vite.config.mts): the SDK is shared with Node programs and is not
 * changed for the dashboard. Same outputs: createHash("sha256").update(bytes).digest("hex") and
 * randomBytes(n).toString("hex"), from @noble/hashes and the Web Crypto random source.
 */
import { sha256 } from "@noble/hashes/sha256";

const toHex = (bytes: Uint8Array) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");

export function createHash(algorithm: string) {
  if (algorithm !== "sha256") throw new Error(`createHash: only sha256 is available in the browser`);
  const parts: Uint8Array[] = [];
  const hash = {
    update(data: Uint8Array | string) {
      parts.push(typeof data === "string" ? new TextEncoder().encode(data) : data);
      return hash;
    },
    digest(encoding: "hex") {
      if (encoding !== "hex") throw new Error("digest: only hex is available in the browser");
      const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
      let at = 0;
      for (const p of parts) all.set(p, (at += p.length) - p.length);
      return toHex(sha256(all));
    },
  };
  return hash;
}

class HexBytes extends Uint8Array {
  override toString(encoding?: string): string {
    if (encoding !== "hex") return super.toString();
    return toHex(this);
  }
}

export function randomBytes(n: number): HexBytes {
  const out = new HexBytes(n);
  crypto.getRandomValues(out);
  return out;
}
