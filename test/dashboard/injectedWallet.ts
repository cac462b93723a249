/**
 * Shared by the dashboard's browser tests: an injected EIP-1193 wallet (window.ethereum) in the page,
 * backed in the test process by one anvil key on the real chain.
 */
import { getBytes, Wallet } from "ethers";
import type { Stack } from "../helpers/stack";
import type { WatchedPage } from "./browser";

// anvil's well-known second dev account (public test key): the wallet that becomes an account's owner.
export const ANVIL_KEY_1 = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
export const ANVIL_ACCOUNT_1 = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";

/**
 * window.ethereum for every page of the tab's context: it answers the account and chain questions,
 * signs personal_sign messages and sends eth_sendTransaction with the real key on the real chain, and
 * passes every other call to the chain.
 */
export async function injectWallet(w: WatchedPage, stack: Stack, privateKey = ANVIL_KEY_1): Promise<void> {
  const wallet = new Wallet(privateKey, stack.provider);
  const chainId = (await stack.provider.getNetwork()).chainId;
  await w.context.exposeFunction("__sigilTestWallet", async (method: string, params: unknown[]) => {
    if (method === "eth_requestAccounts" || method === "eth_accounts") return [wallet.address];
    if (method === "eth_chainId") return "0x" + chainId.toString(16);
    if (method === "personal_sign") return wallet.signMessage(getBytes(params[0] as string));
    if (method === "eth_sendTransaction") {
      const tx = params[0] as { to: string; data: string };
      return (await wallet.sendTransaction({ to: tx.to, data: tx.data })).hash;
    }
    return stack.provider.send(method, params);
  });
  await w.context.addInitScript(
    "window.ethereum = { request: ({ method, params }) => window.__sigilTestWallet(method, params || []) };",
  );
}
