/**
 * Starting points for the policy editor: a first policy for a group that has none, and one example
 * operation per kind for the preview (the shapes `POST /core/v1/policies/evaluate` takes; docs/policies.md).
 */

export const OPERATION_KINDS = [
  "transaction",
  "typedData",
  "message",
  "digest",
  "keyExport",
  "encrypt",
  "decrypt",
  "ed25519",
  "schnorr",
] as const;
export type OperationKind = (typeof OPERATION_KINDS)[number];

/** Words for the kind picker. */
export const KIND_LABELS: Record<OperationKind, string> = {
  transaction: "Transaction",
  typedData: "Typed data (EIP-712)",
  message: "Message (EIP-191)",
  digest: "Raw digest (32 bytes)",
  keyExport: "Key export",
  encrypt: "Encrypt",
  decrypt: "Decrypt",
  ed25519: "Ed25519 (Solana)",
  schnorr: "Schnorr (Bitcoin Taproot)",
};

const ZERO = "0x0000000000000000000000000000000000000001";

/** A policy that allows plain transfers of at most 0.1 ETH on one chain (and nothing else). */
export function firstPolicy(chainId: number): string {
  return JSON.stringify(
    {
      version: 1,
      description: "Small transfers on this chain",
      rules: [
        {
          name: "small-transfers",
          effect: "allow",
          operation: "transaction",
          chainIds: [chainId],
          value: { max: "100000000000000000" },
        },
      ],
    },
    null,
    2,
  );
}

/** The fields of an example operation of this kind, without `kind` (the picker adds it). */
export function exampleOperation(kind: OperationKind, chainId: number): string {
  const body: Record<string, unknown> = (() => {
    switch (kind) {
      case "transaction":
        return { transaction: { type: 2, chainId, to: ZERO, value: "1000", nonce: 0, gasLimit: "21000" } };
      case "typedData":
        return {
          domain: { name: "Example", version: "1", chainId, verifyingContract: ZERO },
          types: { Mail: [{ name: "contents", type: "string" }] },
          value: { contents: "hello" },
        };
      case "message":
        return { message: "Sign in to app.example" };
      case "digest":
      case "schnorr":
        return { digest: "0x" + "11".repeat(32) };
      case "ed25519":
        // Any bytes as 0x-hex; a compiled Solana transaction message is read as one.
        return { message: "0x68656c6c6f" };
      default:
        return {};
    }
  })();
  return JSON.stringify(body, null, 2);
}
