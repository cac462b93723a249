/**
 * The Enclave: the only object that holds the root key. Every key it uses is derived on demand from the
 * root (derive.ts) or decoded from an API key string the caller presents (apiKeys.ts), used, and dropped.
 * The root key lives in a #private field: no getter, not enumerable, not shown by util.inspect or
 * JSON.stringify, never part of an error.
 */
import {
  AbstractSigner,
  getAddress,
  hashMessage,
  isAddress,
  keccak256,
  toUtf8Bytes,
  TypedDataEncoder,
} from "ethers";
import { keccak256Bytes, registerNativeKeccakWithEthers } from "./keccak";
import type { Provider, TypedDataDomain, TypedDataField } from "ethers";
import { EnclaveError } from "./errors";
import {
  deriveAesKey,
  deriveEd25519Seed,
  deriveRecordKey,
  deriveSecp256k1,
  ids,
  LABELS,
  rootKeyObject,
} from "./derive";
import {
  ed25519PublicKey,
  ed25519Sign,
  publicKeysOf,
  schnorrSign,
  taprootSecret,
  type PkpPublicKeys,
} from "./chainKeys";
import { ApiKeyParser, decodeApiKey, generateKeyString } from "./apiKeys";
import type { GeneratedApiKey, ParsedApiKey, ApiKeyKind } from "./apiKeys";
import { addressOf, addressOfPublicKey, hex, publicKeyOf, signDigest } from "./secp";
import { open, seal } from "./aesEnvelope";
import { createHash, type KeyObject } from "node:crypto";
import { parseCid } from "./cid";
import { Lru } from "./lru";
import { decodeRootKey } from "./rootKey";
import { rootKeyProvider, type RootKeyOptions, type TeeSource } from "./rootKeyProviders";
import { GasSigner, gasWalletDerivation } from "./gasSigner";
import {
  attestationReportData,
  identityOf,
  signAttestationFields,
  signAuditCheckpointDigest,
} from "./attestation";
import type { KeyCapabilities } from "./capabilities";

// ethers hashes addresses (checksums), typed data and messages for the enclave: natively from here on.
registerNativeKeccakWithEthers();

/** The EIP-712 type of OpenZeppelin 5's ERC2771Forwarder. */
export const FORWARD_REQUEST_TYPES: Record<string, TypedDataField[]> = {
  ForwardRequest: [
    { name: "from", type: "address" },
    { name: "to", type: "address" },
    { name: "value", type: "uint256" },
    { name: "gas", type: "uint256" },
    { name: "nonce", type: "uint256" },
    { name: "deadline", type: "uint48" },
    { name: "data", type: "bytes" },
  ],
};

/**
 * ForwardRequest hashing without ethers' generic encoder: TypedDataEncoder.hash re-parses the types and
 * re-hashes the domain on every call, which cost more than the signature itself on the path-A hot path.
 * The digest is the same EIP-712 value, keccak256(0x1901 ‖ domainSeparator ‖ hashStruct(request)), with
 * hashStruct laid out by hand for this one fixed type (the tests verify against ethers).
 */
const FORWARD_REQUEST_TYPEHASH = hexToBytes(
  keccak256(toUtf8Bytes(TypedDataEncoder.from(FORWARD_REQUEST_TYPES).encodeType("ForwardRequest"))),
);
const domainSeparators = new Lru<string, Uint8Array>(64);

function forwardRequestDigest(
  domain: TypedDataDomain,
  v: { from: string; to: string; value: bigint; gas: bigint; nonce: bigint; deadline: number; data: string },
): Uint8Array {
  const domainKey = `${domain.name}\n${domain.version}\n${String(domain.chainId)}\n${domain.verifyingContract}`;
  let separator = domainSeparators.get(domainKey);
  if (separator === undefined) {
    separator = hexToBytes(TypedDataEncoder.hashDomain(domain));
    domainSeparators.set(domainKey, separator);
  }
  const struct = new Uint8Array(8 * 32);
  struct.set(FORWARD_REQUEST_TYPEHASH, 0);
  struct.set(hexToBytes(v.from), 32 + 12);
  struct.set(hexToBytes(v.to), 64 + 12);
  struct.set(word(v.value), 96);
  struct.set(word(v.gas), 128);
  struct.set(word(v.nonce), 160);
  struct.set(word(BigInt(v.deadline)), 192);
  struct.set(keccak256Bytes(hexToBytes(v.data)), 224);
  const out = new Uint8Array(2 + 32 + 32);
  out[0] = 0x19;
  out[1] = 0x01;
  out.set(separator, 2);
  out.set(keccak256Bytes(struct), 34);
  return keccak256Bytes(out);
}

/** A uint256 as 32 big-endian bytes (callers have range-checked it). */
function word(n: bigint): Uint8Array {
  return hexToBytes("0x" + n.toString(16).padStart(64, "0"));
}

export interface ForwardRequestInput {
  to: string;
  data: string;
  value?: bigint;
  gas: bigint;
  nonce: bigint;
  deadline: number;
}

export interface ForwarderDomain {
  name: string;
  version: string;
  chainId: bigint | number;
  verifyingContract: string;
}

/** Exactly the tuple ERC2771Forwarder.execute takes. */
export interface SignedForwardRequest {
  from: string;
  to: string;
  value: bigint;
  gas: bigint;
  deadline: number;
  data: string;
  signature: string;
}

const UINT256_MAX = (1n << 256n) - 1n;
const UINT48_MAX = 2 ** 48 - 1;
const PKP_ID = /^0x[0-9a-fA-F]{64}$/;
const DIGEST = /^0x[0-9a-fA-F]{64}$/;

export class Enclave implements KeyCapabilities {
  /**
   * The root key as a secret KeyObject made once (derive.ts, RootKey: each derivation would otherwise
   * make a new one); the bytes it was made from are zeroed.
   */
  readonly #root: KeyObject;
  readonly #apiKeys = new ApiKeyParser();
  /** Public keys only: deriving a PKP's address on every list request would redo the EC multiplication. */
  readonly #pkpPublicKeys = new Lru<string, Uint8Array>(10_000);
  /** Every public form of a PKP's keys (public): the Ed25519 key and the Taproot tweak cost curve work. */
  readonly #pkpKeySets = new Lru<string, PkpPublicKeys>(10_000);
  /** PKP addresses (public), so address lookups skip the keccak and checksum of the public key. */
  readonly #pkpAddresses = new Lru<string, string>(10_000);
  /**
   * Service-managed owner addresses by master-key address (public): every path-A write of an account
   * key is signed as the owner, and re-deriving its address costs a curve multiplication. The owner's
   * private key is still derived per signature and zeroed after use; only the address is kept.
   */
  readonly #ownerAddresses = new Lru<string, string>(10_000);
  #identity: { address: string; publicKey: string } | null = null;
  /** The TEE the root key came from (the dstack provider), or null (file provider, tests). */
  readonly #tee: TeeSource | null;

  private constructor(root: Uint8Array, tee: TeeSource | null = null) {
    this.#root = rootKeyObject(root);
    root.fill(0);
    this.#tee = tee;
  }

  /** The root key from the configured provider (rootKeyProviders/): `file` unless `provider` says otherwise. */
  static async open(opts: RootKeyOptions): Promise<Enclave> {
    const { rootKey, tee } = await rootKeyProvider(opts).open();
    return new Enclave(rootKey, tee);
  }

  static fromRootKey(rootKey: Uint8Array | string): Enclave {
    return new Enclave(decodeRootKey(rootKey, "fromRootKey"));
  }

  // ---- API keys ---------------------------------------------------------------------------------

  generateAccountKey(): GeneratedApiKey {
    return this.#generate("account");
  }

  generateUsageKey(): GeneratedApiKey {
    return this.#generate("usage");
  }

  #generate(kind: ApiKeyKind): GeneratedApiKey {
    const apiKey = generateKeyString(kind);
    return { apiKey, ...this.#apiKeys.parse(apiKey) };
  }

  parseApiKey(apiKey: string): ParsedApiKey {
    return this.#apiKeys.parse(apiKey);
  }

  /** Service-managed owner of an API-mode account: derive(root, "owner", masterKey address). */
  ownerAddress(masterKeyAddress: string): string {
    const cacheKey = typeof masterKeyAddress === "string" ? masterKeyAddress.toLowerCase() : "";
    const hit = this.#ownerAddresses.get(cacheKey);
    if (hit !== undefined) return hit;
    const k = this.#ownerKey(masterKeyAddress); // validates the address
    try {
      const address = addressOf(k);
      this.#ownerAddresses.set(cacheKey, address);
      return address;
    } finally {
      k.fill(0);
    }
  }

  /** The address a forward request carrying this key is signed as. */
  principalAddress(apiKey: string): string {
    const parsed = this.#apiKeys.parse(apiKey);
    return parsed.kind === "account" ? this.ownerAddress(parsed.address) : parsed.address;
  }

  async signForwardRequest(
    apiKey: string,
    req: ForwardRequestInput,
    domain: ForwarderDomain,
  ): Promise<SignedForwardRequest> {
    const parsed = this.#apiKeys.parse(apiKey);
    const fields = validateForwardRequest(req);
    const dom = validateDomain(domain);
    const scalar = parsed.kind === "account" ? this.#ownerKey(parsed.address) : decodeApiKey(apiKey).scalar;
    try {
      const from = parsed.kind === "account" ? this.ownerAddress(parsed.address) : parsed.address;
      const digest = forwardRequestDigest(dom, { from, ...fields });
      const signature = signDigest(scalar, digest);
      const { to, value, gas, deadline, data } = fields;
      return { from, to, value, gas, deadline, data, signature };
    } finally {
      scalar.fill(0);
    }
  }

  /**
   * OPERATOR ONLY (the registry migration command, scripts/migrate/cli.ts): signs a forward request as the
   * service-managed owner of the API-mode account whose master key is `masterKeyAddress`, without that
   * account's key. Whoever can call this can act as every API-mode owner, so it is never reachable from the
   * relayer's HTTP paths (a test greps relayer/ for its name); in a TEE deployment it belongs behind an
   * operator-authenticated channel. The owner's private key is derived, used once and zeroed, as above.
   */
  async signForwardRequestAsOwnerOf(
    masterKeyAddress: string,
    req: ForwardRequestInput,
    domain: ForwarderDomain,
  ): Promise<SignedForwardRequest> {
    const fields = validateForwardRequest(req);
    const dom = validateDomain(domain);
    const scalar = this.#ownerKey(masterKeyAddress);
    try {
      const from = this.ownerAddress(masterKeyAddress);
      const signature = signDigest(scalar, forwardRequestDigest(dom, { from, ...fields }));
      const { to, value, gas, deadline, data } = fields;
      return { from, to, value, gas, deadline, data, signature };
    } finally {
      scalar.fill(0);
    }
  }

  #ownerKey(masterKeyAddress: string): Uint8Array {
    if (typeof masterKeyAddress !== "string" || !isAddress(masterKeyAddress)) {
      throw new EnclaveError("invalid_address", "Invalid address.", {
        details: "expected a 20-byte hex address",
      });
    }
    return deriveSecp256k1(this.#root, LABELS.owner, ids.owner(hexToBytes(getAddress(masterKeyAddress))));
  }

  // ---- Attestation (attestation.ts) -------------------------------------------------------------

  /** The root key's public identity (its identity key's address and public key); memoised, public data. */
  attestationIdentity(): { address: string; publicKey: string } {
    this.#identity ??= identityOf(this.#root);
    return { ...this.#identity };
  }

  /** The identity key's EIP-191 signature over the canonical JSON of an attestation document's fields. */
  signAttestation(fields: Record<string, unknown>): string {
    return signAttestationFields(this.#root, fields);
  }

  /**
   * The identity key's signature over an audit-log checkpoint digest (a SHA-256, 0x + 64 lowercase hex),
   * under the checkpoint domain (attestation.ts, AUDIT_CHECKPOINT_DOMAIN): it can never pass for an
   * attestation document's signature, a transaction or a forward request. Only a digest goes in, so
   * nothing but a 32-byte value the caller computed is ever signed this way.
   */
  signAuditCheckpoint(digest: string): string {
    return signAuditCheckpointDigest(this.#root, digest);
  }

  /** Which TEE stands behind this enclave: "none", or "tdx" with dstack's compose hash and app id. */
  teeInfo(): { tee: "none" } | { tee: "tdx"; composeHash: string; appId: string } {
    const t = this.#tee;
    return t ? { tee: t.tee, composeHash: t.composeHash, appId: t.appId } : { tee: "none" };
  }

  /**
   * A whole attestation document from its deployment fields: the TEE's identity and evidence when there is
   * a TEE (its quote's report data = attestationReportData of the document), then the identity signature
   * over everything. Without a TEE: tee "none", quote null, exactly as before providers existed.
   */
  async attest(fields: Record<string, unknown>): Promise<Record<string, unknown>> {
    const t = this.#tee;
    if (!t) {
      const doc = { ...fields, tee: "none", quote: null };
      return { ...doc, signature: this.signAttestation(doc) };
    }
    const bound = { ...fields, tee: t.tee, compose_hash: t.composeHash, app_id: t.appId };
    const evidence = await t.quote(attestationReportData(bound));
    const doc = { ...bound, quote: evidence.quote, event_log: evidence.eventLog };
    return { ...doc, signature: this.signAttestation(doc) };
  }

  // ---- Gas wallets ------------------------------------------------------------------------------

  /**
   * Gas wallet `index` of the relayer instance `instanceId` (undefined: the unnamed instance, whose
   * wallets predate instance ids). Derivation: gasSigner.ts gasWalletDerivation.
   */
  gasSigner(index: number, provider: Provider | null, instanceId?: string): AbstractSigner {
    const { label, id } = gasWalletDerivation(index, instanceId);
    return new GasSigner(deriveSecp256k1(this.#root, label, id), provider);
  }

  gasAddress(index: number, instanceId?: string): string {
    const { label, id } = gasWalletDerivation(index, instanceId);
    const k = deriveSecp256k1(this.#root, label, id);
    try {
      return addressOf(k);
    } finally {
      k.fill(0);
    }
  }

  // ---- PKPs (KeyCapabilities) -------------------------------------------------------------------

  pkpPublicKey(pkpId: string): string {
    return hex(this.#pkpPublic(pkpId));
  }

  pkpAddress(pkpId: string): string {
    const pub = this.#pkpPublic(pkpId); // validates the id
    const cacheKey = pkpId.toLowerCase();
    const hit = this.#pkpAddresses.get(cacheKey);
    if (hit !== undefined) return hit;
    const address = addressOfPublicKey(pub);
    this.#pkpAddresses.set(cacheKey, address);
    return address;
  }

  pkpSignDigest(pkpId: string, digest: string): string {
    if (typeof digest !== "string" || !DIGEST.test(digest)) {
      throw new EnclaveError("invalid_digest", "Invalid digest.", {
        details: "expected 0x followed by 64 hex characters",
      });
    }
    return this.#withPkpKey(pkpId, (k) => signDigest(k, hexToBytes(digest)));
  }

  pkpSignMessage(pkpId: string, message: string | Uint8Array): string {
    if (typeof message !== "string" && !(message instanceof Uint8Array)) {
      throw new EnclaveError("invalid_message", "Invalid message.", {
        details: "expected a string or bytes",
      });
    }
    return this.#withPkpKey(pkpId, (k) => signDigest(k, hexToBytes(hashMessage(message))));
  }

  pkpSignTypedData(
    pkpId: string,
    domain: Record<string, unknown>,
    types: Record<string, Array<{ name: string; type: string }>>,
    value: Record<string, unknown>,
  ): string {
    const digest = typedDataDigest(domain, types, value);
    return this.#withPkpKey(pkpId, (k) => signDigest(k, hexToBytes(digest)));
  }

  /**
   * The PKP's public keys and addresses on every chain it signs for (chainKeys.ts): secp256k1 (EVM),
   * Ed25519 (Solana) and Taproot. Public data, computed inside the enclave and cached; a fresh copy
   * each call.
   */
  pkpPublicKeys(pkpId: string): PkpPublicKeys {
    const id = pkpIdBytes(pkpId);
    const cacheKey = hex(id);
    let set = this.#pkpKeySets.get(cacheKey);
    if (set === undefined) {
      const seed = deriveEd25519Seed(this.#root, ids.pkp(id));
      let edPublic: Uint8Array;
      try {
        edPublic = ed25519PublicKey(seed);
      } finally {
        seed.fill(0);
      }
      set = publicKeysOf(this.#pkpPublic(pkpId), this.pkpAddress(pkpId), edPublic);
      this.#pkpKeySets.set(cacheKey, set);
    }
    return structuredClone(set);
  }

  /** Ed25519 signature (64 bytes, 0x-hex) of a message given as bytes or 0x-hex, by the PKP's Ed25519 key. */
  pkpSignEd25519(pkpId: string, message: string | Uint8Array): string {
    const bytes = ed25519MessageBytes(message);
    const seed = deriveEd25519Seed(this.#root, ids.pkp(pkpIdBytes(pkpId)));
    try {
      return hex(ed25519Sign(seed, bytes));
    } finally {
      seed.fill(0);
    }
  }

  /**
   * BIP-340 Schnorr signature (64 bytes, 0x-hex) of a 32-byte digest by the PKP's secp256k1 key, or with
   * `tweak: "taproot"` by its BIP-341 tweaked key (key-path spend; `merkleRoot` when the output also
   * commits to a script tree). Fresh auxiliary randomness each call.
   */
  pkpSignSchnorr(
    pkpId: string,
    digest: string,
    opts: { tweak?: "taproot" | null; merkleRoot?: string | null } = {},
  ): string {
    if (typeof digest !== "string" || !DIGEST.test(digest)) {
      throw new EnclaveError("invalid_digest", "Invalid digest.", {
        details: "expected 0x followed by 64 hex characters",
      });
    }
    const tweak = opts.tweak ?? null;
    const merkleRoot = opts.merkleRoot ?? null;
    if (tweak !== null && tweak !== "taproot")
      throw new EnclaveError("invalid_digest", "Invalid Schnorr tweak.", {
        details: 'tweak is "taproot" or null',
      });
    if (merkleRoot !== null && (tweak === null || typeof merkleRoot !== "string" || !DIGEST.test(merkleRoot)))
      throw new EnclaveError("invalid_digest", "Invalid merkle root.", {
        details: 'merkleRoot is 0x followed by 64 hex characters, with tweak "taproot"',
      });
    return this.#withPkpKey(pkpId, (k) => {
      if (tweak === null) return hex(schnorrSign(k, hexToBytes(digest)));
      const tweaked = taprootSecret(k, merkleRoot === null ? null : hexToBytes(merkleRoot));
      try {
        return hex(schnorrSign(tweaked, hexToBytes(digest)));
      } finally {
        tweaked.fill(0);
      }
    });
  }

  pkpEncrypt(pkpId: string, plaintext: string | Uint8Array): string {
    const bytes = toMessageBytes(plaintext);
    return this.#withAesKey(pkpId, (k) => seal(k, bytes));
  }

  pkpDecrypt(pkpId: string, ciphertext: string): Uint8Array {
    return this.#withAesKey(pkpId, (k) => open(k, ciphertext));
  }

  pkpPrivateKey(pkpId: string): string {
    return this.#withPkpKey(pkpId, (k) => hex(k));
  }

  pkpKeyForRun(pkpId: string): Uint8Array {
    return deriveSecp256k1(this.#root, LABELS.pkpSigning, ids.pkp(pkpIdBytes(pkpId)));
  }

  pkpEd25519SeedForOp(pkpId: string): Uint8Array {
    return deriveEd25519Seed(this.#root, ids.pkp(pkpIdBytes(pkpId)));
  }

  pkpAesKeyForOp(pkpId: string): Uint8Array {
    return deriveAesKey(this.#root, ids.pkp(pkpIdBytes(pkpId)));
  }

  // ---- Action identity (KeyCapabilities) -------------------------------------------------------

  actionPrivateKey(cid: string): string {
    const k = this.#actionKey(cid);
    try {
      return hex(k);
    } finally {
      k.fill(0);
    }
  }

  actionPublicKey(cid: string): string {
    const k = this.#actionKey(cid);
    try {
      return hex(publicKeyOf(k));
    } finally {
      k.fill(0);
    }
  }

  actionAddress(cid: string): string {
    const k = this.#actionKey(cid);
    try {
      return addressOf(k);
    } finally {
      k.fill(0);
    }
  }

  #actionKey(cid: string): Uint8Array {
    return deriveSecp256k1(this.#root, LABELS.action, ids.action(parseCid(cid)));
  }

  #pkpPublic(pkpId: string): Uint8Array {
    const id = pkpIdBytes(pkpId);
    const cacheKey = hex(id);
    const hit = this.#pkpPublicKeys.get(cacheKey);
    if (hit) return hit;
    const pub = this.#withPkpKey(pkpId, (k) => publicKeyOf(k));
    this.#pkpPublicKeys.set(cacheKey, pub);
    return pub;
  }

  #withPkpKey<T>(pkpId: string, use: (k: Uint8Array) => T): T {
    const k = deriveSecp256k1(this.#root, LABELS.pkpSigning, ids.pkp(pkpIdBytes(pkpId)));
    try {
      return use(k);
    } finally {
      k.fill(0);
    }
  }

  #withAesKey<T>(pkpId: string, use: (k: Uint8Array) => T): T {
    const k = deriveAesKey(this.#root, ids.pkp(pkpIdBytes(pkpId)));
    try {
      return use(k);
    } finally {
      k.fill(0);
    }
  }

  // ---- Records at rest -----------------------------------------------------------------------------

  /**
   * Seals a record the relayer stores (an idempotent answer may hold a decrypted secret or a key) under a
   * key derived from the root and `context`. The relayer puts the caller's API key into `context`, so
   * opening a record needs both the root key and that caller's key: the database file alone reveals
   * nothing, and one caller's records never open under another's context.
   */
  sealRecord(context: string, plaintext: Uint8Array): string {
    return this.#withRecordKey(context, (k) => seal(k, plaintext));
  }

  /** Opens what sealRecord sealed under the same context; EnclaveError("decryption_failed") otherwise. */
  openRecord(context: string, envelope: string): Uint8Array {
    return this.#withRecordKey(context, (k) => open(k, envelope));
  }

  #withRecordKey<T>(context: string, use: (k: Uint8Array) => T): T {
    const digest = createHash("sha256").update(context, "utf8").digest();
    const k = deriveRecordKey(this.#root, ids.record(digest));
    try {
      return use(k);
    } finally {
      k.fill(0);
    }
  }

  /** Neither util.inspect nor JSON.stringify should ever try to show more than this. */
  toJSON(): string {
    return "[Enclave]";
  }
  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return "[Enclave]";
  }
}

/** A canonical bytes32 pkpId; zero and anything malformed are refused (reference gap 3, docs/background.md). */
export function pkpIdBytes(pkpId: unknown): Uint8Array {
  if (typeof pkpId !== "string" || !PKP_ID.test(pkpId)) {
    throw new EnclaveError("invalid_pkp_id", "Invalid PKP id.", {
      details: "expected 0x followed by 64 hex characters",
    });
  }
  const bytes = hexToBytes(pkpId);
  if (bytes.every((b) => b === 0)) {
    throw new EnclaveError("invalid_pkp_id", "Invalid PKP id.", { details: "the zero id is never derived" });
  }
  return bytes;
}

function hexToBytes(h: string): Uint8Array {
  return Uint8Array.from(Buffer.from(h.slice(2), "hex"));
}

/** An Ed25519 message: bytes, or 0x-hex (a text string would be ambiguous: its UTF-8, or the hex it spells?). */
function ed25519MessageBytes(m: unknown): Uint8Array {
  if (m instanceof Uint8Array) return Uint8Array.from(m);
  if (typeof m === "string" && /^0x([0-9a-fA-F]{2})*$/.test(m)) return hexToBytes(m);
  throw new EnclaveError("invalid_message", "Invalid message.", {
    details: "expected bytes or 0x-prefixed hex",
  });
}

function toMessageBytes(m: unknown): Uint8Array {
  if (typeof m === "string") return new TextEncoder().encode(m);
  if (m instanceof Uint8Array) return m;
  throw new EnclaveError("invalid_message", "Invalid message.", { details: "expected a string or bytes" });
}

function typedDataDigest(domain: unknown, types: unknown, value: unknown): string {
  if (!isPlainObject(domain) || !isPlainObject(types) || !isPlainObject(value)) {
    throw new EnclaveError("invalid_typed_data", "Invalid typed data.", {
      details: "domain, types and value must be objects",
    });
  }
  // Callers (eth_signTypedData_v4 payloads) often include EIP712Domain; ethers derives it from `domain`.
  const { EIP712Domain: _ignored, ...rest } = types as Record<string, TypedDataField[]>;
  void _ignored;
  try {
    return TypedDataEncoder.hash(domain as TypedDataDomain, rest, value as Record<string, unknown>);
  } catch (e) {
    const reason = (e as { shortMessage?: string }).shortMessage ?? "could not encode";
    throw new EnclaveError("invalid_typed_data", "Invalid typed data.", { details: reason });
  }
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function invalidRequest(details: string): EnclaveError {
  return new EnclaveError("invalid_request", "Invalid forward request.", { details });
}

function validateForwardRequest(
  req: ForwardRequestInput,
): Omit<SignedForwardRequest, "from" | "signature"> & { nonce: bigint } {
  if (!isPlainObject(req)) throw invalidRequest("request must be an object");
  const { to, data, gas, nonce, deadline } = req;
  const value = req.value ?? 0n;
  if (typeof to !== "string" || !isAddress(to)) throw invalidRequest("to must be an address");
  if (typeof data !== "string" || !/^0x([0-9a-fA-F]{2})*$/.test(data))
    throw invalidRequest("data must be 0x-prefixed hex bytes");
  for (const [name, v] of [
    ["value", value],
    ["gas", gas],
    ["nonce", nonce],
  ] as const) {
    if (typeof v !== "bigint" || v < 0n || v > UINT256_MAX)
      throw invalidRequest(`${name} must be a uint256 bigint`);
  }
  if (typeof deadline !== "number" || !Number.isInteger(deadline) || deadline < 0 || deadline > UINT48_MAX) {
    throw invalidRequest("deadline must be a uint48 number of seconds");
  }
  return { to: getAddress(to), value, gas, nonce, deadline, data: data.toLowerCase() };
}

function validateDomain(d: ForwarderDomain): TypedDataDomain {
  if (!isPlainObject(d)) throw invalidRequest("domain must be an object");
  if (typeof d.name !== "string" || typeof d.version !== "string")
    throw invalidRequest("domain name and version must be strings");
  const chainOk =
    (typeof d.chainId === "bigint" && d.chainId > 0n) ||
    (typeof d.chainId === "number" && Number.isSafeInteger(d.chainId) && d.chainId > 0);
  if (!chainOk) throw invalidRequest("domain chainId must be a positive integer");
  if (typeof d.verifyingContract !== "string" || !isAddress(d.verifyingContract)) {
    throw invalidRequest("domain verifyingContract must be an address");
  }
  return {
    name: d.name,
    version: d.version,
    chainId: d.chainId,
    verifyingContract: getAddress(d.verifyingContract),
  };
}
