/**
 * An ethers signer for a gas wallet whose private key is unreachable from the object: it sits in a
 * #private SigningKey, with no `privateKey`/`signingKey` getter (unlike ethers' Wallet). Gas wallets
 * pay for forwarder transactions and carry no authority in the registry.
 */
import {
  AbstractSigner,
  computeAddress,
  copyRequest,
  getAddress,
  getBytes,
  isHexString,
  toBeArray,
  hashMessage,
  resolveAddress,
  resolveProperties,
  SigningKey,
  Transaction,
  TypedDataEncoder,
} from "ethers";
import type { Provider, TransactionRequest, TypedDataDomain, TypedDataField } from "ethers";
import { ids, LABELS, type Label } from "./derive";
import { EnclaveError } from "./errors";
import { hex, signDigestParts } from "./secp";
import { keccak256Bytes } from "./keccak";
import { rlpList, rlpListBytes } from "./rlp";

const TYPE_2 = Buffer.of(2);

/** What names a relayer instance (SIGIL_INSTANCE_ID): short, lowercase, safe in logs and metric labels. */
export const INSTANCE_ID_PATTERN = /^[a-z0-9][a-z0-9-]{0,31}$/;

/**
 * Where gas wallet `index` of a relayer instance is derived from the root key.
 *
 * No instance id: the original path (LABELS.gas, u32be(index)), so a single instance, and every data
 * folder created before instances had ids, keeps the wallets it funded. With an id: a separate label
 * (LABELS.gasInstance), id = utf8(instanceId) ‖ u32be(index). The index has a fixed width at the end, so
 * (instanceId, index) pairs never share an encoding, and the label differs from the unnamed path, so no
 * named instance can land on an unnamed instance's wallet: two instances with different ids never race
 * for one wallet's nonces.
 */
export function gasWalletDerivation(index: number, instanceId?: string): { label: Label; id: Uint8Array } {
  const indexBytes = ids.gas(checkGasIndex(index));
  if (instanceId === undefined) return { label: LABELS.gas, id: indexBytes };
  if (typeof instanceId !== "string" || !INSTANCE_ID_PATTERN.test(instanceId)) {
    throw new EnclaveError("invalid_instance_id", "Invalid instance id.", {
      details: "expected 1 to 32 lowercase letters, digits or dashes, starting with a letter or digit",
    });
  }
  const name = Buffer.from(instanceId, "utf8");
  const id = new Uint8Array(name.length + indexBytes.length);
  id.set(name, 0);
  id.set(indexBytes, name.length);
  return { label: LABELS.gasInstance, id };
}

function checkGasIndex(index: unknown): number {
  if (typeof index !== "number" || !Number.isInteger(index) || index < 0 || index > 0xffffffff) {
    throw new EnclaveError("invalid_index", "Invalid gas wallet index.", {
      details: "expected an integer in [0, 2^32)",
    });
  }
  return index;
}

export class GasSigner extends AbstractSigner {
  readonly address: string;
  readonly #key: SigningKey;
  /** The same private key as bytes, for the lean transaction path (libsecp256k1 signs raw scalars). */
  readonly #scalar: Uint8Array;

  /** Takes ownership of `scalar` (a SigningKey copy is kept; the array is zeroed). */
  constructor(scalar: Uint8Array | SigningKey, provider: Provider | null) {
    super(provider);
    if (scalar instanceof SigningKey) {
      this.#key = scalar;
    } else {
      this.#key = new SigningKey(hex(scalar));
      scalar.fill(0);
    }
    this.#scalar = getBytes(this.#key.privateKey);
    this.address = computeAddress(this.#key.publicKey);
  }

  async getAddress(): Promise<string> {
    return this.address;
  }

  connect(provider: Provider | null): GasSigner {
    return new GasSigner(this.#key, provider);
  }

  async signTransaction(request: TransactionRequest): Promise<string> {
    const fast = this.#signLean(request);
    if (fast !== null) return fast;
    const tx = copyRequest(request);
    const { to, from } = await resolveProperties({
      to: tx.to ? resolveAddress(tx.to, this) : undefined,
      from: tx.from ? resolveAddress(tx.from, this) : undefined,
    });
    if (to != null) tx.to = to;
    if (from != null) {
      if (getAddress(from) !== this.address) throw new Error("transaction from address mismatch");
      delete tx.from;
    }
    const btx = Transaction.from(tx as Parameters<typeof Transaction.from>[0]);
    btx.signature = this.#key.sign(btx.unsignedHash);
    return btx.serialized;
  }

  /**
   * The relayer's own transactions (type 0 or 2, every field given, `to` an address, no access list):
   * signed without building an ethers Transaction, which serialises twice and cost three times the
   * signature itself on the path-A hot path. Byte-for-byte what ethers produces (tested). Anything else
   * returns null and takes the general path.
   */
  #signLean(r: TransactionRequest): string | null {
    if (r.from != null || r.blobs != null || r.authorizationList != null) return null;
    if (r.type === 0) return this.#signLegacy(r);
    if (r.type === 2) return this.#signEip1559(r);
    return null;
  }

  /** EIP-155 legacy: rlp([nonce, gasPrice, gasLimit, to, value, data, v, r, s]). */
  #signLegacy(r: TransactionRequest): string | null {
    if (r.accessList != null || r.maxFeePerGas != null || r.maxPriorityFeePerGas != null) return null;
    const common = leanFields(r);
    if (common === null || !isQuantity(r.gasPrice)) return null;
    const { chain, nonce, gasLimit, to, value, data } = common;
    const fields = [nonce, toBeArray(r.gasPrice), gasLimit, to, value, data];
    const unsigned = rlpListBytes([...fields, toBeArray(chain), new Uint8Array(0), new Uint8Array(0)]);
    const sig = signDigestParts(this.#scalar, keccak256Bytes(unsigned));
    const v = chain * 2n + 35n + BigInt(sig.recovery);
    return rlpList([...fields, toBeArray(v), ...signatureRS(sig.compact)]);
  }

  /**
   * EIP-1559: 0x02 || rlp([chainId, nonce, maxPriorityFeePerGas, maxFeePerGas, gasLimit, to, value,
   * data, accessList, yParity, r, s]), signed over 0x02 || rlp(the list without the signature).
   */
  #signEip1559(r: TransactionRequest): string | null {
    if (r.gasPrice != null) return null;
    if (r.accessList != null && !(Array.isArray(r.accessList) && r.accessList.length === 0)) return null;
    const common = leanFields(r);
    const { maxPriorityFeePerGas: tip, maxFeePerGas: cap } = r;
    if (common === null || !isQuantity(tip) || !isQuantity(cap)) return null;
    // ethers refuses a tip above the fee cap; leave that (and its error) to the general path.
    if (BigInt(tip) > BigInt(cap)) return null;
    const { chain, nonce, gasLimit, to, value, data } = common;
    const fields = [toBeArray(chain), nonce, toBeArray(tip), toBeArray(cap), gasLimit, to, value, data, []];
    const unsigned = rlpListBytes(fields);
    const digest = keccak256Bytes(Buffer.concat([TYPE_2, unsigned]));
    const sig = signDigestParts(this.#scalar, digest);
    return "0x02" + rlpList([...fields, toBeArray(sig.recovery), ...signatureRS(sig.compact)]).slice(2);
  }

  async signMessage(message: string | Uint8Array): Promise<string> {
    return this.#key.sign(hashMessage(message)).serialized;
  }

  async signTypedData(
    domain: TypedDataDomain,
    types: Record<string, TypedDataField[]>,
    value: Record<string, unknown>,
  ): Promise<string> {
    const populated = await TypedDataEncoder.resolveNames(domain, types, value, async (name: string) => {
      if (!this.provider) throw new Error("cannot resolve ENS names without a provider");
      const address = await this.provider.resolveName(name);
      if (!address) throw new Error("unconfigured ENS name");
      return address;
    });
    return this.#key.sign(TypedDataEncoder.hash(populated.domain, types, populated.value)).serialized;
  }

  toJSON(): { address: string } {
    return { address: this.address };
  }
}

type Quantity = bigint | number;

function isQuantity(v: unknown): v is Quantity {
  return typeof v === "bigint" || typeof v === "number";
}

/**
 * The fields both lean encodings share, as RLP byte strings (minimal big-endian integers), or null when
 * the request is not one the lean path handles exactly like ethers (the general path takes it then).
 */
function leanFields(r: TransactionRequest): {
  chain: bigint;
  nonce: Uint8Array;
  gasLimit: Uint8Array;
  to: Uint8Array;
  value: Uint8Array;
  data: Uint8Array;
} | null {
  const { nonce, gasLimit, to, chainId } = r;
  const value = r.value ?? 0n;
  const data = r.data ?? "0x";
  if (typeof nonce !== "number" || !Number.isSafeInteger(nonce) || nonce < 0) return null;
  if (!isQuantity(gasLimit) || !isQuantity(value) || !isQuantity(chainId)) return null;
  if (typeof to !== "string" || !isHexString(to, 20)) return null;
  if (typeof data !== "string" || !isHexString(data)) return null;
  const chain = BigInt(chainId);
  if (chain <= 0n) return null;
  return {
    chain,
    nonce: toBeArray(nonce),
    gasLimit: toBeArray(gasLimit),
    to: Buffer.from(to.slice(2), "hex"),
    value: toBeArray(value),
    data: Buffer.from(data.slice(2), "hex"), // validated above; Buffer parses kilobytes natively
  };
}

/** r and s of a 64-byte compact signature as RLP integers: minimal big-endian, leading zeros dropped. */
function signatureRS(compact: Uint8Array): [Uint8Array, Uint8Array] {
  return [stripZeros(compact.subarray(0, 32)), stripZeros(compact.subarray(32, 64))];
}

function stripZeros(b: Uint8Array): Uint8Array {
  let i = 0;
  while (i < b.length && b[i] === 0) i++;
  return b.subarray(i);
}
