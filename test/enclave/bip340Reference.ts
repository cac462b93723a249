/**
 * BIP-340 verification and the BIP-341 key-path tweak written straight from the BIPs' pseudo-code, in
 * affine coordinates with plain BigInt arithmetic and node:crypto's SHA-256: slow, and sharing no code
 * with @noble/curves (which signs) or @bitcoinerlab/secp256k1 (built on another @noble/curves major).
 * A third check, for tests only.
 */
import { createHash } from "node:crypto";

const P = 2n ** 256n - 2n ** 32n - 977n;
const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
const G: Point = [
  0x79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798n,
  0x483ada7726a3c4655da4fbfc0e1108a8fd17b448a68554199c47d08ffb10d4b8n,
];
type Point = [bigint, bigint] | null;

const mod = (a: bigint, m = P) => ((a % m) + m) % m;
function pow(b: bigint, e: bigint, m = P): bigint {
  let r = 1n;
  b = mod(b, m);
  while (e > 0n) {
    if (e & 1n) r = (r * b) % m;
    b = (b * b) % m;
    e >>= 1n;
  }
  return r;
}
const inv = (a: bigint) => pow(a, P - 2n);

function add(p1: Point, p2: Point): Point {
  if (p1 === null) return p2;
  if (p2 === null) return p1;
  if (p1[0] === p2[0] && p1[1] !== p2[1]) return null;
  const lam =
    p1[0] === p2[0] && p1[1] === p2[1]
      ? mod(3n * p1[0] * p1[0] * inv(2n * p1[1]))
      : mod((p2[1] - p1[1]) * inv(mod(p2[0] - p1[0])));
  const x = mod(lam * lam - p1[0] - p2[0]);
  return [x, mod(lam * (p1[0] - x) - p1[1])];
}

function mul(p: Point, k: bigint): Point {
  let r: Point = null;
  for (let i = 255n; i >= 0n; i--) {
    r = add(r, r);
    if ((k >> i) & 1n) r = add(r, p);
  }
  return r;
}

const int = (b: Uint8Array) => BigInt("0x" + Buffer.from(b).toString("hex"));
const bytes32 = (x: bigint) => Buffer.from(x.toString(16).padStart(64, "0"), "hex");

function taggedHash(tag: string, ...parts: Uint8Array[]): Buffer {
  const t = createHash("sha256").update(tag).digest();
  const h = createHash("sha256").update(t).update(t);
  for (const part of parts) h.update(part);
  return h.digest();
}

function liftX(x: bigint): Point {
  if (x >= P) return null;
  const c = mod(x * x * x + 7n);
  const y = pow(c, (P + 1n) / 4n);
  if (mod(y * y) !== c) return null;
  return [x, y % 2n === 0n ? y : P - y];
}

/** BIP-340 Verify(pk, m, sig). */
export function referenceVerify(publicKey: Uint8Array, message: Uint8Array, sig: Uint8Array): boolean {
  if (publicKey.length !== 32 || sig.length !== 64) return false;
  const pk = liftX(int(publicKey));
  const r = int(sig.subarray(0, 32));
  const s = int(sig.subarray(32, 64));
  if (pk === null || r >= P || s >= N) return false;
  const e = mod(int(taggedHash("BIP0340/challenge", sig.subarray(0, 32), publicKey, message)), N);
  const R = add(mul(G, s), mul([pk[0], P - pk[1]], e));
  return R !== null && R[1] % 2n === 0n && R[0] === r;
}

/** BIP-341 taproot_tweak_pubkey: the output key x(Q) for an internal key and an optional merkle root. */
export function referenceTaprootOutputKey(internalKey: Uint8Array, merkleRoot: Uint8Array | null): Buffer {
  const t = int(taggedHash("TapTweak", internalKey, ...(merkleRoot === null ? [] : [merkleRoot])));
  if (t >= N) throw new RangeError("tweak out of range");
  const Q = add(liftX(int(internalKey)), mul(G, t));
  return bytes32(Q![0]);
}
