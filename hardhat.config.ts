import { HardhatUserConfig, subtask } from "hardhat/config";
import { TASK_COMPILE_SOLIDITY_GET_SOLC_BUILD } from "hardhat/builtin-tasks/task-names";
import "@nomicfoundation/hardhat-toolbox";

// This machine (and CI) is offline: Hardhat cannot download a native compiler. Use the solc-js build
// shipped in the `solc` npm package, pinned to the version below (docs/development.md, "Things that bit us").
const SOLC_VERSION = "0.8.28";
subtask(TASK_COMPILE_SOLIDITY_GET_SOLC_BUILD, async (args: { solcVersion: string }, _hre, runSuper) => {
  if (args.solcVersion !== SOLC_VERSION) return runSuper(args);
  return {
    compilerPath: require.resolve("solc/soljson.js"),
    isSolcJs: true,
    version: SOLC_VERSION,
    longVersion: require("solc").version(),
  };
});

const config: HardhatUserConfig = {
  solidity: {
    version: SOLC_VERSION,
    settings: {
      optimizer: { enabled: true, runs: 200 },
      evmVersion: "cancun",
    },
  },
  networks: {
    hardhat: {},
    // Any RPC endpoint: `SIGIL_RPC_URL=... SIGIL_DEPLOYER_KEY=0x... npx hardhat run scripts/deploy.ts --network custom`
    custom: {
      url: process.env.SIGIL_RPC_URL ?? "http://127.0.0.1:8545",
      accounts: process.env.SIGIL_DEPLOYER_KEY ? [process.env.SIGIL_DEPLOYER_KEY] : [],
    },
  },
  typechain: { outDir: "typechain-types", target: "ethers-v6" },
  gasReporter: {
    enabled: process.env.REPORT_GAS === "1",
    offline: true,
    outputFile: process.env.REPORT_GAS_FILE,
    noColors: !!process.env.REPORT_GAS_FILE,
    // REPORT_GAS_FORMAT=markdown gives the table pasted into docs/contracts.md.
    reportFormat: (process.env.REPORT_GAS_FORMAT as "terminal" | "markdown" | undefined) ?? "terminal",
  },
  mocha: {
    timeout: 120_000,
  },
};

export default config;
