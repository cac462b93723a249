/**
 * A data folder as the previous release's `npm start` left it, for the `migrate:registry` tests: the
 * embedded chain (anvil with its state file in the folder) holding a forwarder and a layout-2 registry
 * (test/fixtures/accountRegistryV2.json), and an enclave to make writes as the old relayer did. The
 * caller fills the registry, then `writeDeployment()` and `stopChain()`; the migration runs on the folder.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { Contract, ContractFactory, ethers, Wallet } from "ethers";
import { Enclave } from "../../enclave";
import { freePort, startAnvil } from "../../scripts/start/anvil";
import { DEV_ACCOUNT_KEY } from "../../scripts/start/funding";
import { SigilForwarder__factory } from "../../typechain-types";

const V2 = JSON.parse(
  fs.readFileSync(path.join(__dirname, "..", "fixtures", "accountRegistryV2.json"), "utf8"),
) as { abi: string[]; bytecode: string };

export interface Layout2Folder {
  /** Temporary parent folder (the caller removes it); the data folder is `<dir>/data`. */
  dir: string;
  dataDir: string;
  anvilPort: number;
  provider: ethers.JsonRpcProvider;
  enclave: Enclave;
  forwarder: ReturnType<SigilForwarder__factory["attach"]>;
  forwarderAddress: string;
  deployBlock: number;
  /** The layout-2 registry. */
  old: Contract;
  oldRegistry: string;
  /** A write as the old relayer made it: signed in the enclave with `key`, relayed by the forwarder. */
  asAccount(key: string, fn: string, args: unknown[]): Promise<void>;
  /** deployment.json as the old release wrote it, naming the layout-2 registry. */
  writeDeployment(): void;
  /** Stops the chain (its state stays in the folder for the migration). */
  stopChain(): Promise<void>;
}

export async function startLayout2Folder(prefix: string, rootKeyHex: string): Promise<Layout2Folder> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const dataDir = path.join(dir, "data");
  fs.mkdirSync(dataDir, { mode: 0o700 });
  const anvilPort = await freePort();
  const anvil = await startAnvil({
    statePath: path.join(dataDir, "chain-state.json"),
    pidPath: path.join(dataDir, "anvil.pid"),
    port: anvilPort,
    chainId: 31337,
  });
  const provider = new ethers.JsonRpcProvider(anvil.rpcUrl, undefined, { cacheTimeout: -1 });
  const stopChain = async () => {
    provider.destroy();
    await anvil.stop();
  };
  try {
    const payer = new ethers.NonceManager(new Wallet(DEV_ACCOUNT_KEY, provider));
    const forwarder = await new SigilForwarder__factory(payer).deploy();
    const deployBlock = (await forwarder.deploymentTransaction()!.wait())!.blockNumber;
    const forwarderAddress = await forwarder.getAddress();
    const old = (await new ContractFactory(V2.abi, V2.bytecode, payer).deploy(forwarderAddress)) as Contract;
    await old.waitForDeployment();
    const oldRegistry = await old.getAddress();
    const enclave = await Enclave.open({ rootKeyHex, rootKeyFile: path.join(dir, "none") });
    const domain = {
      name: "SigilForwarder",
      version: "1",
      chainId: 31337n,
      verifyingContract: forwarderAddress,
    };
    return {
      dir,
      dataDir,
      anvilPort,
      provider,
      enclave,
      forwarder,
      forwarderAddress,
      deployBlock,
      old,
      oldRegistry,
      async asAccount(key, fn, args) {
        const signed = await enclave.signForwardRequest(
          key,
          {
            to: oldRegistry,
            data: old.interface.encodeFunctionData(fn, args),
            gas: 2_000_000n,
            nonce: await forwarder.nonces(enclave.principalAddress(key)),
            deadline: 2 ** 40,
          },
          domain,
        );
        await (await forwarder.execute(signed)).wait();
      },
      writeDeployment() {
        fs.writeFileSync(
          path.join(dataDir, "deployment.json"),
          JSON.stringify({
            registry: oldRegistry,
            forwarder: forwarderAddress,
            deployBlock,
            chainId: 31337,
            chain: "embedded",
            deployedAt: "2026-01-01T00:00:00.000Z",
          }),
        );
      },
      stopChain,
    };
  } catch (err) {
    await stopChain();
    throw err;
  }
}
