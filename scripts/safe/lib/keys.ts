import { ethers } from "ethers";

/**
 * A usage key for ChainSecured mode, made on the signer's own machine: the raw 0x private key is the key
 * string the relayer accepts (design §2, docs/background.md), its address is what the Safe registers, and keccak256 of the
 * string is the `api_key_hash` that list_api_keys shows. The service never sees it before it is used.
 */
export interface LocalUsageKey {
  usageApiKey: string;
  address: string;
  keyHash: string;
}

export function generateUsageKey(): LocalUsageKey {
  const wallet = ethers.Wallet.createRandom();
  return usageKeyFromPrivateKey(wallet.privateKey);
}

export function usageKeyFromPrivateKey(privateKey: string): LocalUsageKey {
  const wallet = new ethers.Wallet(privateKey);
  return {
    usageApiKey: wallet.privateKey,
    address: wallet.address,
    keyHash: ethers.keccak256(ethers.toUtf8Bytes(wallet.privateKey)),
  };
}
