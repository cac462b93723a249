/** Types of arg-limits.js (shared by the action worker and the main thread's key-ops.ts). */
export declare const MAX_ID_CHARS: number;
export declare const MAX_DIGEST_BYTES: number;
export declare function keyOpArgsProblem(
  op: string,
  args: unknown,
  limits: { maxKeyOpPayloadBytes: number; maxTypedDataBytes: number },
): string | null;
export declare function maxCiphertextChars(maxPayloadBytes: number): number;
