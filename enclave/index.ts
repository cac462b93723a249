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
export type { ApiKeyKind, ParsedApiKey, GeneratedApiKey } from "./apiKeys";
export { computeCid, parseCid, isValidCid } from "./cid";
export { ContentStore } from "./contentStore";
export { GatewayClient } from "./gateway";
export type { GatewayClientOptions } from "./gateway";
export type { KeyCapabilities } from "./capabilities";
