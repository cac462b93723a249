/**
 * The Sigil SDK: `import { createSigil } from "sigil/sdk"`. See docs/sdk.md.
 */
export { createSigil, type Sigil, type SigilOptions, type CallInit } from "./createSigil";
export {
  SigilError,
  isSigilError,
  type SigilErrorCode,
  type ApiErrorCode,
  type ClientErrorCode,
} from "./errors";
export { paginate, type Page } from "./paginate";
export { waitUntilExecutable, NOT_YET_VISIBLE, type WaitOptions } from "./waitUntilExecutable";
export { signRequest, signedRequestMessage, SIGNED_REQUEST_VERSION, type Deployment } from "./signRequest";
export { forwardCall } from "./forward";
export { registryWrites, REGISTRY_WRITE_ABI } from "./registryCalls";
export { keyKind, usageKeyWallet } from "./keys";
export {
  verifyAttestation,
  canonicalJson,
  AttestationError,
  ATTESTATION_FORMAT,
  type AttestationDocument,
  type AttestationFailure,
  type VerifyAttestationOptions,
  type VerifiedAttestation,
} from "./attestation";
export {
  verifyAuditExport,
  verifyAuditAnchors,
  parseAuditExport,
  auditEntryHash,
  auditCheckpointDigest,
  AUDIT_EXPORT_FORMAT,
  AUDIT_CHECKPOINT_DOMAIN,
  type AuditEntry,
  type AuditEntryKind,
  type AuditCheckpoint,
  type AuditExportHeader,
  type AuditLine,
  type AuditBreak,
  type AuditBreakReason,
  type AuditVerification,
  type VerifyAuditOptions,
  type AuditCheckpointAnchor,
  type AuditAnchorVerification,
} from "./audit";
export {
  verifyTdxAttestation,
  verifyTdxQuote,
  checkTdxBinding,
  tdxReportData,
  parseTdReport,
  type TdReport,
  type TdxCollateral,
  type TcbStatus,
  type VerifyTdxAttestationOptions,
  type VerifyTdxQuoteOptions,
  type TdxBindingOptions,
  type VerifiedTdxAttestation,
  type VerifiedTdxQuote,
} from "./tdx";
export {
  verifyWebhookSignature,
  parseWebhookEvent,
  type VerifyOptions,
  type WebhookEvent,
  type WebhookEventType,
  type WebhookEndpoint,
  type NewWebhookEndpoint,
  type WebhookDelivery,
} from "./webhooks";
export {
  triggerOperations,
  type Trigger,
  type NewTrigger,
  type TriggerUpdate,
  type TriggerRun,
  type TriggerRunStatus,
} from "./triggers";
export {
  signInWithEthereum,
  siweMessage,
  SESSION_KEY_RESOURCE,
  SIWE_MAX_LIFETIME_SECONDS,
  type Eip1193Provider,
  type SiweFields,
  type SignInOptions,
} from "./siwe";
export { ownerSessionAuth, signOutOwnerSession, type OwnerSession, type SignOutResult } from "./ownerSession";
export type {
  paths,
  components,
  Answer,
  Body,
  Query,
  ExecuteParams,
  ExecutionResult,
  Pkp,
  Group,
  UsageKey,
  SigilConfig,
} from "./types";
