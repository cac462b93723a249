/**
 * Sigil key strings as the SDK sees them. A usage key (`uk_` + 64 hex, or a raw `0x` + 64 hex private
 * key) is a secp256k1 private key: the SDK signs with it and never sends it. An account key (`ak_`)
 * drives the service-managed owner, whose key only the service can derive: it is always sent as a
 * bearer credential.
 */
import { Wallet } from "ethers";

export type KeyKind = "account" | "usage";

export function keyKind(apiKey: string): KeyKind | null {
  if (/^ak_[0-9a-f]{64}$/.test(apiKey)) return "account";
  if (/^uk_[0-9a-f]{64}$/.test(apiKey) || /^0x[0-9a-fA-F]{64}$/.test(apiKey)) return "usage";
  return null;
}

/** The wallet of a usage key (its address is the key's id on chain). */
export function usageKeyWallet(apiKey: string): Wallet {
  if (keyKind(apiKey) !== "usage") throw new TypeError("not a usage key (uk_ + 64 hex, or 0x + 64 hex)");
  return new Wallet(apiKey.startsWith("uk_") ? "0x" + apiKey.slice(3) : apiKey);
}
