/**
 * `npm run migrate:registry`: moves a data folder whose deployment.json names a layout-2 registry onto a
 * new layout-3 registry, keys and all. Same configuration as `npm start` (scripts/start/config.ts); the
 * embedded chain is started from the data folder exactly as `npm start` starts it.
 *
 * Steps: open the enclave (the data folder's root key, never a generated one: a new root key would
 * change every key) → chain → read deployment.json → find or deploy the new registry continuing the old
 * one's PKP id domain behind the same forwarder, recorded in migration.json before any replay (so a re-run
 * resumes) → the library (scripts/migrate/migrate.ts), with a progress display → check every account again
 * → start the new registry's webhook event cursor after the replay (webhookCursor.ts: subscribers are not
 * told about the copies) → rewrite deployment.json to the new registry, keeping the old one as
 * `previous_registry`.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { ethers, Interface, ZeroAddress, type Provider } from "ethers";
import { Enclave } from "../../enclave";
import { AccountRegistry__factory } from "../../typechain-types";
import { deploySigil } from "../deploy";
import { startAnvil, type RunningAnvil } from "../start/anvil";
import type { SigilConfig } from "../start/config";
import {
  describeRpc,
  readDeployment,
  registryVersionAt,
  REGISTRY_VERSION,
  writeDeployment,
} from "../start/deployment";
import { DEV_ACCOUNT_KEY } from "../start/funding";
import { DATA_FILES } from "../start/service";
import { migrateRegistry, type AccountOutcome, type RequestSigner } from "./migrate";
import { planAccount, type OldRegistry } from "./plan";
import { MigrationProgress, type ProgressOutput } from "./progress";
import { MIGRATION_FILE, readRecord, writeRecord, type MigrationRecord } from "./record";
import { verifyAccount } from "./verify";
import { startWebhookEventsAfterReplay } from "./webhookCursor";

/** The layout this command migrates from (the library reads its events with the layout-2 ABI). */
const FROM_VERSION = 2n;
const V2_ABI_FILE = path.join(__dirname, "layout2.abi.json");

export interface CommandIo {
  /** The summary and the dry-run plan. */
  out: (text: string) => void;
  /** Progress (a bar on a terminal) and refusals. */
  err: ProgressOutput;
  /** Set by the caller on SIGINT/SIGTERM: cleanup stops the chain cleanly (it writes its state). */
  onCleanup?: (cleanup: () => Promise<void>) => void;
}

/** A refusal the user can act on: printed as is, exit code 1. */
export class MigrationRefused extends Error {}

export async function runMigration(config: SigilConfig, dryRun: boolean, io: CommandIo): Promise<void> {
  const file = (name: string) => path.join(config.dataDir, name);
  const deploymentFile = file(DATA_FILES.deployment);
  if (config.deployment)
    throw new MigrationRefused(
      "SIGIL_REGISTRY_ADDRESS is set: the deployment is fixed by configuration, not by the data folder. Deploy the " +
        "new registry yourself (deploySigil with `continues`, docs/contracts.md) or unset it to migrate the data folder's.",
    );
  if (!fs.existsSync(deploymentFile))
    throw new MigrationRefused(`${deploymentFile} does not exist: there is no deployment to migrate.`);
  if (
    config.rootKeyProvider === "file" &&
    config.rootKeyHex === undefined &&
    !fs.existsSync(file(DATA_FILES.rootKey))
  )
    throw new MigrationRefused(
      `No root key: set SIGIL_ROOT_KEY or restore ${file(DATA_FILES.rootKey)}. A new root key would change every key.`,
    );
  // The same provider as the service's (a TEE's KMS under SIGIL_ROOT_KEY_PROVIDER=dstack): the migration
  // must see the root key the service signs with.
  const enclave = await Enclave.open({
    provider: config.rootKeyProvider,
    dstack: { endpoint: config.dstackEndpoint },
    rootKeyFile: file(DATA_FILES.rootKey),
    rootKeyHex: config.rootKeyHex,
    devMode: false,
  });

  let anvil: RunningAnvil | undefined;
  let provider: ethers.JsonRpcProvider | undefined;
  const cleanup = async () => {
    provider?.destroy();
    provider = undefined;
    await anvil?.stop();
    anvil = undefined;
  };
  io.onCleanup?.(cleanup);
  try {
    if (config.rpcUrl === undefined)
      anvil = await startAnvil({
        statePath: file(DATA_FILES.chainState),
        pidPath: file(DATA_FILES.anvilPid),
        port: config.anvilPort,
        chainId: config.chainId!,
      });
    const rpcUrl = anvil?.rpcUrl ?? config.rpcUrl!;
    provider = new ethers.JsonRpcProvider(rpcUrl, undefined, { cacheTimeout: -1, staticNetwork: false });
    await migrateFolder({
      config,
      dryRun,
      io,
      enclave,
      provider,
      deploymentFile,
      recordFile: file(MIGRATION_FILE),
    });
  } finally {
    await cleanup();
  }
}

interface FolderMigration {
  config: SigilConfig;
  dryRun: boolean;
  io: CommandIo;
  enclave: Enclave;
  provider: ethers.JsonRpcProvider;
  deploymentFile: string;
  recordFile: string;
}

async function migrateFolder(m: FolderMigration): Promise<void> {
  const { provider, io } = m;
  const deployment = readDeployment(m.deploymentFile)!;
  const chainId = Number((await provider.getNetwork()).chainId);
  if (chainId !== deployment.chainId)
    throw new MigrationRefused(
      `${m.deploymentFile} names chain ${deployment.chainId}, but the chain reports ${chainId}. Check SIGIL_RPC_URL.`,
    );
  if ((await provider.getCode(deployment.registry)) === "0x")
    throw new MigrationRefused(
      `There is no contract at the remembered registry ${deployment.registry}: the chain was reset. Restore it first.`,
    );
  const version = await registryVersionAt(provider, deployment.registry);
  if (version === REGISTRY_VERSION) {
    const from = (deployment as { previous_registry?: string }).previous_registry;
    io.out(
      `The data folder is already current: its registry ${deployment.registry} has layout ${version}` +
        `${from ? ` (migrated from ${from})` : ""}. Nothing to do.\n`,
    );
    return;
  }
  if (version !== FROM_VERSION)
    throw new MigrationRefused(
      `The registry ${deployment.registry} has layout ${version}; this command migrates layout ${FROM_VERSION} only. ` +
        `Serve this data folder with the Sigil release that made it.`,
    );

  const old: OldRegistry = {
    address: deployment.registry,
    iface: new Interface(JSON.parse(fs.readFileSync(V2_ABI_FILE, "utf8")) as string[]),
    fromBlock: deployment.deployBlock,
  };
  const total = (
    await provider.getLogs({
      address: old.address,
      fromBlock: old.fromBlock,
      topics: [old.iface.getEvent("AccountCreated")!.topicHash],
    })
  ).length;
  let record = readRecord(m.recordFile);
  if (record && record.from_registry.toLowerCase() !== old.address.toLowerCase())
    throw new MigrationRefused(
      `${m.recordFile} belongs to a migration of ${record.from_registry}, not of ${old.address}. Move it away first.`,
    );

  const ownerSigner = (owner: string, masterKey: string): RequestSigner | undefined =>
    masterKey !== ZeroAddress && m.enclave.ownerAddress(masterKey) === owner
      ? enclaveOwnerSigner(m.enclave, masterKey, owner)
      : undefined;

  if (m.dryRun) {
    io.out(
      `Would migrate ${total} account(s) of registry ${old.address} (layout ${version}) onto ` +
        (record
          ? `the new registry ${record.to_registry} (resuming: ${record.state.done.length} done)`
          : `a new layout-${REGISTRY_VERSION} registry continuing its PKP ids, behind forwarder ${deployment.forwarder}`) +
        `, then point ${m.deploymentFile} at it.\n`,
    );
    for (let id = 1n; ; id++) {
      const plan = await planAccount(provider, old, id);
      if (!plan) break;
      const byService = ownerSigner(plan.owner, plan.masterKey) !== undefined;
      io.out(
        `  account ${id}: ${plan.writes.length} writes, ` +
          (byService
            ? "written by its service-managed owner"
            : `rebuilt by a temporary owner, then ${plan.owner} must call acceptOwnership(${id})`) +
          (plan.skippedKeys.length ? `; ${plan.skippedKeys.length} expired key(s) not copied` : "") +
          "\n",
      );
    }
    io.out("Nothing was written (--dry-run).\n");
    return;
  }

  const deployerKey = m.config.deployerKey ?? (m.config.devMode ? DEV_ACCOUNT_KEY : undefined);
  if (!deployerKey)
    throw new MigrationRefused(
      "No one pays for the migration: set SIGIL_DEPLOYER_KEY to a funded account's private key (it deploys the " +
        "new registry and carries every account's writes).",
    );
  const payer = new ethers.NonceManager(new ethers.Wallet(deployerKey, provider));

  if (record) {
    await checkResumable(provider, record);
  } else {
    const next = await deploySigil(payer, {
      continues: { pkpIdDomain: old.address, forwarder: deployment.forwarder },
    });
    record = {
      from_registry: old.address,
      from_deploy_block: deployment.deployBlock,
      to_registry: next.registry,
      to_deploy_block: next.deployBlock,
      forwarder: deployment.forwarder,
      chain_id: chainId,
      started_at: new Date().toISOString(),
      state: { done: [], temporaryOwners: {}, startNonces: {} },
    };
    writeRecord(m.recordFile, record);
  }
  const rec: MigrationRecord = record;

  const progress = new MigrationProgress(io.err, total);
  let outcomes: AccountOutcome[];
  try {
    outcomes = await migrateRegistry({
      provider,
      payer,
      old,
      newRegistry: rec.to_registry,
      forwarder: rec.forwarder,
      ownerSigner,
      state: rec.state,
      save: (state) => writeRecord(m.recordFile, { ...rec, state }),
      starting: (id) => progress.starting(id),
      progress: (id, outcome) =>
        outcome === "skipped" ? progress.skipped(id) : progress.finished(id, outcome.writes),
    });
  } finally {
    progress.end();
  }

  await verifyAll(provider, old, rec.to_registry);
  // Every replay write has its receipt by now and nothing else writes to the new registry during the
  // migration (docs/contracts.md), so every log of it up to the head is the replay's.
  rec.replay_end_block = await provider.getBlockNumber();
  await startWebhookEventsAfterReplay({
    dataDir: m.config.dataDir,
    databaseUrl: process.env.SIGIL_DATABASE_URL || undefined,
    chainId,
    registry: rec.to_registry,
    throughBlock: rec.replay_end_block,
  });
  rec.finished_at = new Date().toISOString();
  writeRecord(m.recordFile, rec);
  writeDeployment(m.deploymentFile, {
    registry: rec.to_registry,
    forwarder: rec.forwarder,
    deployBlock: rec.to_deploy_block,
    chainId,
    chain: describeRpc(m.config.rpcUrl),
    deployedAt: rec.started_at,
    previous_registry: old.address,
    previous_deploy_block: old.fromBlock,
  });
  io.out(summary(m.deploymentFile, old.address, rec, total, outcomes));
}

/** A half-done new registry found in migration.json must be the one this migration deployed. */
async function checkResumable(provider: Provider, record: MigrationRecord): Promise<void> {
  const registry = AccountRegistry__factory.connect(record.to_registry, provider);
  const ok =
    (await provider.getCode(record.to_registry)) !== "0x" &&
    (await registryVersionAt(provider, record.to_registry)) === REGISTRY_VERSION &&
    (await registry.pkpIdDomain()).toLowerCase() === record.from_registry.toLowerCase();
  if (!ok)
    throw new MigrationRefused(
      `migration.json names ${record.to_registry} as the new registry, but there is no layout-${REGISTRY_VERSION} ` +
        `registry continuing ${record.from_registry} there. Move migration.json away to start the migration again.`,
    );
}

/** Every account again, after the last one: the library checked each right after writing it. */
async function verifyAll(provider: Provider, old: OldRegistry, newRegistry: string): Promise<void> {
  for (let id = 1n; ; id++) {
    const plan = await planAccount(provider, old, id);
    if (!plan) return;
    const problems = await verifyAccount(provider, old, newRegistry, plan);
    if (problems.length) throw new Error(`verification failed:\n${problems.join("\n")}`);
  }
}

function enclaveOwnerSigner(enclave: Enclave, masterKey: string, owner: string): RequestSigner {
  return {
    address: owner,
    signRequest: async (domain, request) =>
      (
        await enclave.signForwardRequestAsOwnerOf(
          masterKey,
          { ...request, deadline: Number(request.deadline) },
          {
            name: String(domain.name),
            version: String(domain.version),
            chainId: BigInt(domain.chainId!),
            verifyingContract: String(domain.verifyingContract),
          },
        )
      ).signature,
  };
}

function summary(
  deploymentFile: string,
  from: string,
  record: MigrationRecord,
  total: number,
  outcomes: AccountOutcome[],
): string {
  const lines = [
    `Migrated ${total} account(s) from registry ${from} to ${record.to_registry}; ${deploymentFile} now names the new one.`,
    `Webhooks: the copies are not announced; events of the new registry are sent from block ${record.replay_end_block! + 1} on.`,
  ];
  for (const o of outcomes) {
    if (o.awaitingAcceptance)
      lines.push(
        `  account ${o.accountId}: its owner ${o.awaitingAcceptance} must call acceptOwnership(${o.accountId}) on ${record.to_registry}`,
      );
    if (o.droppedPendingOwner)
      lines.push(
        `  account ${o.accountId}: the pending transfer to ${o.droppedPendingOwner} was not carried over`,
      );
    for (const k of o.skippedKeys)
      lines.push(`  account ${o.accountId}: key ${k.key} not copied (${k.reason})`);
  }
  lines.push("Start the service with npm start.");
  return lines.join("\n") + "\n";
}
