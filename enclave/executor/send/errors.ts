/**
 * The errors of `Actions.sendTransaction` (docs/actions.md, "EVM send"): each a stable code the action
 * can switch on, with `details` it can read (`e.details.hash` of a send whose wait ran out, the decoded
 * revert reason, the unfunded address and the wei it needs). Messages are written here, never copied
 * from anywhere a secret could be: an RPC's answer is quoted, but the RPC URL never is (it may carry
 * the operator's provider key).
 */
export const SEND_ERROR_CODES = [
  "chain_not_configured",
  "send_reverted",
  "send_underpriced",
  "send_nonce_gap",
  "send_insufficient_funds",
  "send_rpc_failed",
  "send_wait_timeout",
] as const;

export type SendErrorCode = (typeof SEND_ERROR_CODES)[number];

/** Plain data only: it crosses to the worker and is handed to the action as `error.details`. */
export type SendErrorDetails = Record<string, string | number | boolean | null>;

export class SendError extends Error {
  constructor(
    readonly code: SendErrorCode,
    message: string,
    readonly details: SendErrorDetails = {},
  ) {
    super(message);
    this.name = "SendError";
  }

  /** As capabilityError reads enclave errors: `shortMessage` is what the action sees. */
  get shortMessage(): string {
    return this.message;
  }
}
