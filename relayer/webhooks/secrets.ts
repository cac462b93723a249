/**
 * Endpoint signing secrets: generated here, shown to the account once, and kept only sealed by the
 * enclave (Enclave.sealRecord, the same record sealing as kept Idempotency-Key answers). The sealing
 * context names the endpoint and its account, so a sealed secret copied onto another row does not open.
 */
import { randomBytes } from "node:crypto";
import type { Enclave } from "../../enclave";

/** The enclave's record sealing: all the secrets need of the enclave. */
export type RecordSealer = Pick<Enclave, "sealRecord" | "openRecord">;

/** `whsec_` + 32 random bytes in base64url (43 characters). */
export function newSecret(): string {
  return "whsec_" + randomBytes(32).toString("base64url");
}

function context(endpointId: string, accountId: string): string {
  return `sigil/webhook-secret/v1\n${accountId}\n${endpointId}`;
}

export class SecretBox {
  constructor(private readonly sealer: RecordSealer) {}

  seal(endpointId: string, accountId: string, secret: string): string {
    return this.sealer.sealRecord(context(endpointId, accountId), new TextEncoder().encode(secret));
  }

  open(endpointId: string, accountId: string, sealed: string): string {
    return new TextDecoder().decode(this.sealer.openRecord(context(endpointId, accountId), sealed));
  }
}
