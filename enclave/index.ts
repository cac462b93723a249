/**
 * The enclave's public API: the only module outside code may import from enclave/ (a test enforces
 * it). Everything that touches key material sits behind these names, so moving the enclave into a
 * separate process (a TEE) later changes no caller.
 */
export { EnclaveError, isEnclaveError } from "./errors";
export type { EnclaveErrorCode } from "./errors";
export { Enclave, FORWARD_REQUEST_TYPES } from "./enclave";
export type { ForwardRequestInput, ForwarderDomain, SignedForwardRequest } from "./enclave";
export { keyHash } from "./apiKeys";
// keccak-256 over bytes, native where built: public data only (the relayer's signature checks).
export { keccak256Bytes } from "./keccak";
// Attestation: the document format, its canonical serialisation, and the measurement of enclave/.
export { ATTESTATION_FORMAT, attestationReportData, canonicalJson, measureEnclave } from "./attestation";
// Audit-log checkpoints are signed by the identity key under their own domain (docs/audit-log.md).
export { AUDIT_CHECKPOINT_DOMAIN, auditCheckpointMessage } from "./attestation";
// Where the root key comes from (file for development, dstack's KMS in a TDX CVM): configuration only.
export { ROOT_KEY_PROVIDERS, DSTACK_ROOT_KEY_PATH, DSTACK_ROOT_KEY_PURPOSE } from "./rootKeyProviders";
export type { RootKeyOptions, RootKeyProviderName } from "./rootKeyProviders";
export type { Measurement } from "./attestation";
export type { ApiKeyKind, ParsedApiKey, GeneratedApiKey } from "./apiKeys";
export { computeCid, parseCid, isValidCid } from "./cid";
export { ContentStore } from "./contentStore";
export { GatewayClient } from "./gateway";
export type { GatewayClientOptions } from "./gateway";
export type { KeyCapabilities } from "./capabilities";
export type { PkpPublicKeys } from "./chainKeys";
// The action executor (SES workers). It runs on the enclave side: it holds a KeyCapabilities (the
// Enclave) and answers its workers' key operations after the relayer's authorization callback.
export {
  ActionExecutor,
  DEFAULT_LIMITS,
  ExecutorBusyError,
  ExecutorClosedError,
  ACTION_ERROR_CODES,
} from "./executor";
export type {
  ExecutorLimits,
  ActionErrorCode,
  RunRequest,
  RunResult,
  ExecutorOptions,
  FetchPolicy,
  ModuleOptions,
  UnhandledRejectionMode,
  PoliciesFor,
  PolicyWindowCounters,
  RunPolicyDecision,
} from "./executor";
// SSRF protection for every feature that contacts user-supplied URLs (actions' fetch today, webhooks
// next): which addresses are public, and an HTTP request that connects only to permitted addresses.
export { classifyAddress, makeAddressGuard } from "./net/address-guard";
export type { AddressCategory, AddressGuard } from "./net/address-guard";
export { guardedLookup, guardedRequest, AddressRefusedError, BodyTooLargeError } from "./net/guarded-request";
export type { GuardedResponse } from "./net/guarded-request";
// Signing policies (docs/policies.md): the schema, the parsing of what is signed and the evaluation, as
// pure functions (no keys): the relayer validates uploads and answers dry runs with the enclave's own rules.
export {
  OPERATION_KINDS,
  POLICY_SCHEMA,
  OperationError,
  checkPolicy,
  deepFreeze,
  evaluatePolicy,
  parseDigest,
  parseEd25519,
  parseMessage,
  parseSchnorrDigest,
  parseSolanaMessage,
  parseTaprootInput,
  parsePolicy,
  parseTransaction,
  parseTypedData,
  plainOperation,
  windowExcess,
} from "./policy";
export type { GroupPolicy, OperationFacts, Policy, WindowClaim, WindowUse, WindowExcess } from "./policy";
