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
import { hex, signDigestParts } from "./secp";
import { keccak256Bytes } from "./keccak";
import { rlpList } from "./rlp";

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
    const fast = this.#signLegacy(request);
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
   * The relayer's own transactions (type 0, every field given, `to` an address): signed without building
   * an ethers Transaction, which serialises twice and cost three times the signature itself on the
   * path-A hot path. EIP-155 legacy encoding; byte-for-byte what ethers produces (tested). Anything else
   * returns null and takes the general path.
   */
  #signLegacy(r: TransactionRequest): string | null {
    if (r.type !== 0 || r.from != null || r.accessList != null || r.maxFeePerGas != null) return null;
    if (r.maxPriorityFeePerGas != null || r.blobs != null || r.authorizationList != null) return null;
    const { nonce, gasPrice, gasLimit, to, chainId } = r;
    const value = r.value ?? 0n;
    const data = r.data ?? "0x";
    if (typeof nonce !== "number" || !Number.isSafeInteger(nonce) || nonce < 0) return null;
    for (const v of [gasPrice, gasLimit, value, chainId])
      if (typeof v !== "bigint" && typeof v !== "number") return null;
    if (typeof to !== "string" || !isHexString(to, 20)) return null;
    if (typeof data !== "string" || !isHexString(data)) return null;
    const chain = BigInt(chainId as bigint | number);
    if (chain <= 0n) return null;
    const fields = [
      toBeArray(nonce),
      toBeArray(gasPrice as bigint | number),
      toBeArray(gasLimit as bigint | number),
      Buffer.from(to.slice(2), "hex"),
      toBeArray(value as bigint | number),
      Buffer.from(data.slice(2), "hex"), // validated above; Buffer parses kilobytes natively
    ];
    const unsigned = rlpList([...fields, toBeArray(chain), new Uint8Array(0), new Uint8Array(0)]);
    const digest = keccak256Bytes(Buffer.from(unsigned.slice(2), "hex"));
    const sig = signDigestParts(this.#scalar, digest);
    const v = chain * 2n + 35n + BigInt(sig.recovery);
    // RLP integers are minimal big-endian: r and s lose their leading zero bytes.
    const sigR = stripZeros(sig.compact.subarray(0, 32));
    const sigS = stripZeros(sig.compact.subarray(32, 64));
    return rlpList([...fields, toBeArray(v), sigR, sigS]);
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

function stripZeros(b: Uint8Array): Uint8Array {
  let i = 0;
  while (i < b.length && b[i] === 0) i++;
  return b.subarray(i);
}
