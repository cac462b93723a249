/** Types of chainSign.js (plain JavaScript: the executor's crypto thread loads it too). */
export declare function toBigInt(bytes: Uint8Array): bigint;
export declare function to32Bytes(n: bigint): Uint8Array;
export declare function taprootTweak(xOnly: Uint8Array, merkleRoot: Uint8Array | null): bigint;
export declare function taprootSecret(secret: Uint8Array, merkleRoot: Uint8Array | null): Uint8Array;
export declare function schnorrSign(secret: Uint8Array, digest: Uint8Array): Uint8Array;
export declare function schnorrSignWith(
  secret: Uint8Array,
  digest: Uint8Array,
  tweak: "taproot" | null,
  merkleRoot: Uint8Array | null,
): Uint8Array;
export declare function ed25519Sign(seed: Uint8Array, message: Uint8Array): Uint8Array;
