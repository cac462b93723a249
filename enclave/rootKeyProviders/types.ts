/**
 * Where the root key comes from (docs/enclave.md, "Root key"): one interface, one implementation per
 * source, chosen by configuration. A provider is the only way a root key enters the enclave besides
 * Enclave.fromRootKey (tests and known-answer vectors).
 */

/** The names SIGIL_ROOT_KEY_PROVIDER accepts. */
export const ROOT_KEY_PROVIDERS = ["file", "dstack"] as const;
export type RootKeyProviderName = (typeof ROOT_KEY_PROVIDERS)[number];

/** Hardware evidence for one attestation document: what the TEE's quoting service answered. */
export interface TeeEvidence {
  /** The TD quote, 0x + hex, whose 64-byte report data is the one asked for. */
  quote: string;
  /** The TEE's event log (JSON text as dstack returns it): replays to the quote's RTMRs. */
  eventLog: string;
}

/** The TEE a provider runs in, when it runs in one: its identity and a way to quote. */
export interface TeeSource {
  tee: "tdx";
  /** 0x + SHA-256 of the app-compose.json this CVM was started from (dstack's compose hash). */
  composeHash: string;
  /** dstack's app id: the identity the KMS derives this app's keys for. */
  appId: string;
  /** A quote over exactly these 64 bytes of report data. */
  quote(reportData: Uint8Array): Promise<TeeEvidence>;
}

/** What a provider hands the enclave: the 32-byte root key (the caller owns it) and its TEE, if any. */
export interface OpenedRootKey {
  rootKey: Uint8Array;
  tee: TeeSource | null;
}

export interface RootKeyProvider {
  readonly name: RootKeyProviderName;
  open(): Promise<OpenedRootKey>;
}
