/**
 * Gas for the relayer instance's own wallets (each instance has its own: SIGIL_INSTANCE_ID selects
 * them, see `instanceGasAddresses`). On a dev chain the wallets are topped up for free with
 * `anvil_setBalance` (or `hardhat_setBalance`), or, on a dev node without those methods, by a transfer
 * from its well-known dev account. Outside dev mode Sigil never moves funds on its own: it reports the
 * wallets that are low so that an operator can fund them.
 */
import { ethers } from "ethers";

/** Account #0 of anvil's and Hardhat's default mnemonic: public knowledge, worthless outside dev chains. */
export const DEV_ACCOUNT_KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";

/** Below this a wallet is topped up (dev) or reported (production). */
export const LOW_GAS_WEI = ethers.parseEther("1");
/** What a dev wallet is topped up to. */
export const DEV_GAS_TARGET_WEI = ethers.parseEther("1000");

/**
 * The addresses of the gas wallets this instance sends from: derived in the enclave from the root key,
 * the instance id (none: the wallets of a single instance, unchanged since before instance ids) and the
 * wallet index. Funding these, and only these, is what keeps instances from sharing a wallet.
 */
export function instanceGasAddresses(
  enclave: { gasAddress(index: number, instanceId?: string): string },
  count: number,
  instanceId: string | undefined,
): string[] {
  return Array.from({ length: count }, (_, i) => enclave.gasAddress(i, instanceId));
}

export interface FundingReport {
  funded: string[];
  low: { address: string; balanceWei: bigint }[];
}

async function trySetBalance(
  provider: ethers.JsonRpcProvider,
  address: string,
  wei: bigint,
): Promise<boolean> {
  for (const method of ["anvil_setBalance", "hardhat_setBalance"]) {
    try {
      await provider.send(method, [address, ethers.toQuantity(wei)]);
      return true;
    } catch {
      // method not available on this node: try the next way
    }
  }
  return false;
}

export async function fundGasWallets(opts: {
  provider: ethers.JsonRpcProvider;
  addresses: string[];
  devMode: boolean;
}): Promise<FundingReport> {
  const report: FundingReport = { funded: [], low: [] };
  let devSigner: ethers.NonceManager | undefined;
  for (const address of opts.addresses) {
    const balance = await opts.provider.getBalance(address);
    if (balance >= LOW_GAS_WEI) continue;
    if (!opts.devMode) {
      report.low.push({ address, balanceWei: balance });
      continue;
    }
    if (await trySetBalance(opts.provider, address, DEV_GAS_TARGET_WEI)) {
      report.funded.push(address);
      continue;
    }
    devSigner ??= new ethers.NonceManager(new ethers.Wallet(DEV_ACCOUNT_KEY, opts.provider));
    try {
      const tx = await devSigner.sendTransaction({ to: address, value: DEV_GAS_TARGET_WEI - balance });
      await tx.wait();
      report.funded.push(address);
    } catch {
      report.low.push({ address, balanceWei: balance });
    }
  }
  return report;
}
