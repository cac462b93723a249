/**
 * Brings the whole service up in one process, in dependency order, and down again in reverse:
 * data folder → root key (enclave) → chain (embedded anvil or SIGIL_RPC_URL) → contracts (deployed once,
 * remembered) → gas → billing ledger (+ reconciliation) → relayer (HTTP API). If any step fails, whatever
 * was already started is stopped before the error propagates, so a failed start leaves no process behind.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { ethers } from "ethers";
import pino from "pino";
import { Enclave } from "../../enclave";
import { startRelayer, type RunningRelayer } from "../../relayer";
import { createBilling, SimulatedProcessor, StripeProcessor, type Billing } from "../../relayer/billing";
import { deploySigil } from "../deploy";
import { portInUse, startAnvil, type RunningAnvil } from "./anvil";
import type { SigilConfig } from "./config";
import { describeRpc, ensureDeployment, type Deployment } from "./deployment";
import { DEV_ACCOUNT_KEY, fundGasWallets, instanceGasAddresses, type FundingReport } from "./funding";

export interface RunningSigil {
  url: string;
  chainId: number;
  rpcUrl: string;
  embeddedChain: boolean;
  deployment: Deployment;
  freshDeployment: boolean;
  funding: FundingReport;
  /** This instance's gas wallets (the banner lists them: the operator funds these). */
  gasWallets: string[];
  paymentProcessor: "simulated" | "stripe";
  /** Resolves if the embedded chain exits on its own (a crash), so the caller can shut down. */
  chainExited: Promise<void>;
  /** Stops the API, the ledger and the chain, in that order; safe to call more than once. */
  close(): Promise<void>;
}

export interface StartHooks {
  /** One line of progress for the terminal ("starting the chain…"). */
  step?: (message: string) => void;
  /** Warnings meant for a human (dev root key generated, low gas …). */
  warn?: (message: string) => void;
}

export const DATA_FILES = {
  rootKey: "root.key",
  chainState: "chain-state.json",
  anvilPid: "anvil.pid",
  deployment: "deployment.json",
  ledger: "ledger.sqlite",
  relayer: "relayer",
} as const;

/** The one wording for a busy API port, whether found before starting or when listening (a race). */
export function apiPortInUseMessage(host: string, port: number): string {
  return (
    `Port ${port} on ${host} is already in use (is another Sigil running?), so the API cannot start. ` +
    `Stop whatever uses it, or set PORT to another port.`
  );
}

export async function startSigil(config: SigilConfig, hooks: StartHooks = {}): Promise<RunningSigil> {
  const step = hooks.step ?? (() => {});
  const warn = hooks.warn ?? ((m: string) => console.warn(m));
  const cleanups: (() => Promise<void> | void)[] = [];
  const closeAll = async () => {
    while (cleanups.length > 0) {
      const fn = cleanups.pop()!;
      try {
        await fn();
      } catch (e) {
        warn(`shutdown: ${(e as Error).message}`);
      }
    }
  };

  try {
    fs.mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
    const file = (name: keyof typeof DATA_FILES) => path.join(config.dataDir, DATA_FILES[name]);
    const logger =
      config.logFile === "-"
        ? pino({ level: config.logLevel })
        : pino(
            { level: config.logLevel },
            pino.destination({ dest: config.logFile, mkdir: true, sync: false }),
          );
    // Async log writes are flushed last, after everything else has logged its shutdown.
    cleanups.push(() => new Promise<void>((resolve) => logger.flush(() => resolve())));

    step("opening the enclave (root key)");
    const enclave = await Enclave.open({
      provider: config.rootKeyProvider,
      dstack: { endpoint: config.dstackEndpoint },
      rootKeyFile: file("rootKey"),
      rootKeyHex: config.rootKeyHex,
      devMode: config.devMode,
      warn,
    });

    let rpcUrl: string;
    let anvil: RunningAnvil | undefined;
    if (config.rpcUrl === undefined) {
      step("starting the embedded chain (anvil)");
      anvil = await startAnvil({
        statePath: file("chainState"),
        pidPath: file("anvilPid"),
        port: config.anvilPort,
        stateIntervalSeconds: config.chainStateIntervalSeconds,
        chainId: config.chainId!,
        onStateSaveError: (err) => logger.warn({ err: err.message }, "saving the chain state file failed"),
      });
      cleanups.push(() => anvil!.stop());
      rpcUrl = anvil.rpcUrl;
    } else {
      rpcUrl = config.rpcUrl;
    }
    // Checked now, not when the API finally listens: a busy port found after a first-start deployment
    // (a minute of compiling and deploying) wastes the newcomer's time. After the chain, so that a second
    // `npm start` on the same data folder gets startAnvil's clearer "another Sigil is running" message.
    if (config.port !== 0 && (await portInUse(config.host, config.port)))
      throw Object.assign(new Error(apiPortInUseMessage(config.host, config.port)), {
        code: "api_port_in_use",
      });

    // cacheTimeout -1: no cached nonces/blocks between back-to-back calls (ethers v6 against anvil: "nonce too low" otherwise).
    const provider = new ethers.JsonRpcProvider(rpcUrl, undefined, {
      cacheTimeout: -1,
      staticNetwork: false,
    });
    cleanups.push(() => provider.destroy());
    step("connecting to the chain");
    let chainId: number;
    try {
      chainId = Number((await provider.getNetwork()).chainId);
    } catch (e) {
      throw new Error(
        `Cannot reach the chain at ${describeRpc(rpcUrl)} (${(e as Error).message}). Check SIGIL_RPC_URL and that the node is running.`,
      );
    }
    if (config.chainId !== undefined && chainId !== config.chainId)
      throw new Error(
        `The chain at ${describeRpc(config.rpcUrl)} reports chain id ${chainId}, but SIGIL_CHAIN_ID is ${config.chainId}.`,
      );

    // Who pays for the first deployment: anvil's dev account on a dev chain, else SIGIL_DEPLOYER_KEY.
    const deployerKey = config.deployerKey ?? (config.devMode ? DEV_ACCOUNT_KEY : undefined);
    step("checking the contracts");
    const { deployment, fresh } = await ensureDeployment({
      provider,
      file: file("deployment"),
      chainLabel: describeRpc(config.rpcUrl),
      configured: config.deployment,
      deploy: deployerKey
        ? async () => {
            step("deploying the registry and forwarder (first start)");
            return deploySigil(new ethers.NonceManager(new ethers.Wallet(deployerKey, provider)));
          }
        : undefined,
      deployHint:
        `No contracts are deployed on chain ${chainId} yet. Set SIGIL_DEPLOYER_KEY to a funded account's private key to ` +
        `deploy them on this start, or point SIGIL_REGISTRY_ADDRESS, SIGIL_FORWARDER_ADDRESS and SIGIL_DEPLOY_BLOCK at an existing deployment.`,
    });

    step("funding the gas wallets");
    const gasAddresses = instanceGasAddresses(enclave, config.gasWallets, config.instanceId);
    const funding = await fundGasWallets({ provider, addresses: gasAddresses, devMode: config.devMode });
    // The funding may have changed balances without a block: saved now, not only with the next block.
    await anvil?.saveState();
    for (const low of funding.low)
      warn(
        `gas wallet ${low.address} holds only ${ethers.formatEther(low.balanceWei)} ETH: fund it, or writes will fail with 503.`,
      );

    step("opening the billing ledger");
    const processor = config.stripe
      ? new StripeProcessor({
          secretKey: config.stripe.secretKey,
          publishableKey: config.stripe.publishableKey,
          webhookSecret: config.stripe.webhookSecret,
          ...(config.stripe.apiHost
            ? {
                host: config.stripe.apiHost.split(":")[0],
                port: Number(config.stripe.apiHost.split(":")[1]),
                protocol: "http" as const,
              }
            : {}),
        })
      : new SimulatedProcessor();
    const billing: Billing = await createBilling({
      dbPath: file("ledger"),
      databaseUrl: process.env.SIGIL_DATABASE_URL || undefined,
      processor,
      prices: {
        ...(config.prices.write_cents !== undefined ? { write_cents: config.prices.write_cents } : {}),
        ...(config.prices.execution_cents_per_second !== undefined
          ? { execution_cents_per_second: config.prices.execution_cents_per_second }
          : {}),
        ...(config.prices.pin_cents_per_100kb !== undefined
          ? { pin_cents_per_100kb: config.prices.pin_cents_per_100kb }
          : {}),
      },
      signupCreditCents: config.signupCreditCents,
      ...(config.chargeFlushMs !== undefined ? { chargeFlushMs: config.chargeFlushMs } : {}),
      ...(config.writeCatchUpEveryMs !== undefined
        ? { writeCatchUpEveryMs: config.writeCatchUpEveryMs }
        : {}),
      logger: logger.child({ module: "billing" }),
    });
    cleanups.push(() => billing.close());
    await billing.reconcile();

    step("starting the API");
    const relayer: RunningRelayer = await startRelayer({
      rpcUrl,
      databaseUrl: process.env.SIGIL_DATABASE_URL || undefined,
      chainId,
      registryAddress: deployment.registry,
      forwarderAddress: deployment.forwarder,
      deployBlock: deployment.deployBlock,
      enclave,
      dataDir: path.join(config.dataDir, DATA_FILES.relayer),
      host: config.host,
      port: config.port,
      publicUrls: config.publicUrls,
      gasWallets: config.gasWallets,
      instanceId: config.instanceId,
      gasLowBalanceWei: config.gasLowBalanceWei,
      confirmations: config.confirmations,
      chains: config.chains,
      embeddedChain: config.rpcUrl === undefined,
      maxPriorityFeePerGas: config.maxPriorityFeePerGas,
      executor: {
        poolSize: config.executorPoolSize,
        reserveWorkers: config.executorReserveWorkers,
        isolateAccounts: config.isolateAccounts,
        fetchAllowHosts: config.fetchAllowHosts,
        fetch: config.fetchEnabled ? { allowAddresses: config.fetchAllowAddresses ?? [] } : false,
        unhandledRejections: config.unhandledRejections,
        modules: config.modulesEnabled ? { origin: config.moduleOrigin } : false,
      },
      ipfsGateways: config.ipfsGateways,
      webhooks: { allowAddresses: config.webhookAllowAddresses ?? [] },
      audit: {
        enabled: config.auditLog,
        retentionDays: config.auditRetentionDays,
        ...(config.auditAnchor ? { anchor: config.auditAnchor } : {}),
      },
      pinQuotaBytes: config.pinQuotaBytes,
      rateLimits: config.rateLimits,
      operatorToken: config.operatorToken,
      trustProxy: config.trustProxy,
      triggers: { hooksPort: config.hooksPort, hooksPublicUrl: config.hooksPublicUrl },
      unknownTtlMs: config.unknownTtlMs,
      billing,
      logger,
    });
    cleanups.push(() => relayer.close());

    let closing: Promise<void> | undefined;
    return {
      url: relayer.url,
      chainId,
      rpcUrl,
      embeddedChain: anvil !== undefined,
      deployment,
      freshDeployment: fresh,
      funding,
      gasWallets: gasAddresses,
      paymentProcessor: config.stripe ? "stripe" : "simulated",
      chainExited: anvil ? anvil.exited.then(() => undefined) : new Promise<void>(() => {}),
      close: () => (closing ??= closeAll()),
    };
  } catch (e) {
    await closeAll();
    throw e;
  }
}
