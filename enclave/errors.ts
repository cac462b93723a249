/**
 * The enclave's one error type, shaped like viem's BaseError: a stable machine-readable `code`, a short
 * human message, optional `details`. Messages and details are written by this module only and never
 * contain key material: callers may log them and return them to clients.
 */
export type EnclaveErrorCode =
  | "invalid_api_key"
  | "invalid_pkp_id"
  | "invalid_cid"
  | "invalid_address"
  | "invalid_index"
  | "invalid_instance_id"
  | "invalid_digest"
  | "invalid_message"
  | "invalid_typed_data"
  | "invalid_request"
  | "invalid_content"
  | "cid_mismatch"
  | "content_too_large"
  | "content_not_found"
  | "gateway_timeout"
  | "gateway_error"
  | "decryption_failed"
  | "policy_denied"
  | "root_key_missing"
  | "root_key_invalid"
  | "root_key_unavailable"
  | "tee_quote_failed";

export class EnclaveError extends Error {
  override name = "EnclaveError";
  readonly code: EnclaveErrorCode;
  readonly shortMessage: string;
  readonly details?: string;

  constructor(
    code: EnclaveErrorCode,
    shortMessage: string,
    opts: { details?: string; cause?: unknown } = {},
  ) {
    super(opts.details ? `${shortMessage}\n\nDetails: ${opts.details}` : shortMessage, {
      cause: opts.cause,
    });
    this.code = code;
    this.shortMessage = shortMessage;
    this.details = opts.details;
  }

  toJSON(): { code: string; message: string; details?: string } {
    return this.details === undefined
      ? { code: this.code, message: this.shortMessage }
      : { code: this.code, message: this.shortMessage, details: this.details };
  }
}

export function isEnclaveError(e: unknown): e is EnclaveError {
  return e instanceof EnclaveError;
}
