/**
 * The relayer: the /core/v1 HTTP API (SPEC sections 4 and 5). `startRelayer` wires the pieces together
 * and listens; `close()` stops everything it started (HTTP server, event poller, executor, database).
 */
import * as fs from "node:fs";
import * as http from "node:http";
import * as path from "node:path";
import type { AddressInfo } from "node:net";
import type { Express } from "express";
import { getAddress } from "ethers";
import { ContentStore, GatewayClient } from "../enclave";
import { ActionExecutor } from "../enclave";
import { buildApp } from "./app";
import { Authenticator } from "./auth";
import { SignedRequestVerifier } from "./http/signedRequest";
import { SiweVerifier } from "./http/siwe";
import { PermissionCache } from "./permissions/permissionCache";
import { RegistryReader } from "./chain/registryReader";
import { fetchChainId, makeProvider } from "./chain/rpc";
import { Sender } from "./chain/sender";
import { relayerChains, resolveConfig, type RelayerOptions } from "./config";
import type { RelayerContext } from "./context";
import { IdempotencyStore } from "./idempotency";
import { defaultLogger } from "./logger";
import { createMetrics } from "./metrics";
import { ConcurrencyCap, TokenBuckets } from "./rateLimit";
import { withHookFastPath } from "./triggers/hookFastPath";
import { HookListener } from "./triggers/hookListener";
import {
  type DataLayer,
  SharedConcurrencyCap,
  SharedSignInNonces,
  SharedTokenBuckets,
  sessionRevocationsFor,
} from "./db";
import { PinLedger } from "./pins";
import { PinnedCode } from "./pinnedCode";
import { SharedWriteMark, listenForWriteMarks } from "./cluster/writeMark";
import { SharedNonceStore } from "./cluster/sharedNonces";
import { PolicyWindowStore } from "./policyWindows";
import { TriggerService } from "./triggers/service";
import type { TriggerServiceApi } from "./triggers/serviceApi";
import { ProfileStore } from "./profiles";
import { openRelayerDatabase } from "./relayerDatabase";
import { startHotTableVacuum } from "./db/hotTableVacuum";
import { Webhooks } from "./webhooks";
import { AuditAnchorer } from "./audit/anchor";
import { AuditLog } from "./audit/log";
import { AuditChainWrites, registryLogsFrom } from "./audit/chainWrites";

export type { RelayerOptions, RateLimitOptions } from "./config";
export type { Principal } from "./auth";
export { ApiError, isApiError } from "./errors";
export { ERROR_CATALOGUE } from "./errorCatalogue";

export interface RunningRelayer {
  url: string;
  port: number;
  app: Express;
  /** The trigger service: where a chain-event source hands its firings (TriggerIntake, TriggerDirectory). */
  triggers: TriggerServiceApi;
  /** The hooks' own listener (`triggers.hooksPort`), or null: hooks on the main port only. */
  hooks: HookListener | null;
  close(): Promise<void>;
}

const MINUTE = 60_000;

export async function startRelayer(opts: RelayerOptions): Promise<RunningRelayer> {
  const cfg = resolveConfig(opts);
  const logger = opts.logger ?? defaultLogger();
  const enclave = opts.enclave;
  fs.mkdirSync(cfg.dataDir, { recursive: true });
  cfg.registryAddress = getAddress(cfg.registryAddress);
  cfg.forwarderAddress = getAddress(cfg.forwarderAddress);

  const chainId = cfg.chainId ?? (await fetchChainId(cfg.rpcUrl, cfg.rpcTimeoutMs));
  cfg.chains = relayerChains(opts, chainId);
  const rpc = makeProvider(cfg.rpcUrl, chainId, cfg.rpcTimeoutMs);
  const provider = rpc.provider;

  let executor: ActionExecutor | null = null;
  let cache: PermissionCache | null = null;
  const metrics = createMetrics({
    cacheBlock: () => cache?.lastProcessedBlock ?? 0,
    executor: () => executor?.stats() ?? null,
    gasWallets: () => ({
      wallets: sender.balances.statuses(),
      thresholdWei: sender.balances.thresholdWei(),
    }),
  });
  const onTransient = () => metrics.rpcFailures.inc();
  const reader = new RegistryReader(provider, cfg.registryAddress, onTransient);
  // With PostgreSQL: the block of the newest write through any instance (opened below, read only
  // once serving starts).
  let writeMark: SharedWriteMark | null = null;
  cache = new PermissionCache({
    provider,
    reader,
    registry: cfg.registryAddress,
    chainId,
    deployBlock: cfg.deployBlock,
    dataDir: cfg.dataDir,
    pollIntervalMs: cfg.pollIntervalMs,
    missTtlMs: cfg.unknownTtlMs,
    missMaxEntries: cfg.unknownMaxEntries,
    logger,
    onApplied: (n) => metrics.eventsApplied.inc(n),
    // Runs of a changed account stop signing with the PKP key they were handed (docs/actions.md).
    onAccountChanged: (id) => executor?.invalidateRunKeys(id),
    // The sender and executor are created below; a reset can only be detected after start.
    onReset: () => {
      sender.resetNonces();
      executor?.invalidateRunKeys();
    },
    // Transactions of ours in replaced blocks are gone: the gas wallets' nonces must be re-read.
    onRollback: () => sender.resetNonces(),
    confirmations: cfg.confirmations,
    sharedMark: cfg.databaseUrl ? { read: () => writeMark!.read() } : undefined,
  });
  const sender = new Sender({
    provider,
    signer: enclave,
    // This instance's own wallets: instances sharing a chain never race for one wallet's nonces.
    gasSigners: Array.from({ length: cfg.gasWallets }, (_, i) =>
      enclave.gasSigner(i, provider, cfg.instanceId),
    ),
    chainId,
    registry: cfg.registryAddress,
    forwarder: cfg.forwarderAddress,
    receiptTimeoutMs: cfg.receiptTimeoutMs,
    rpcTimeoutMs: cfg.rpcTimeoutMs,
    syncSend: cfg.syncSend,
    maxBatchSize: cfg.maxBatchSize,
    sendConcurrency: cfg.sendConcurrency,
    maxPriorityFeePerGas: cfg.maxPriorityFeePerGas,
    lowBalanceWei: cfg.gasLowBalanceWei,
    balancePollMs: cfg.gasBalancePollMs,
    logger,
    instanceId: cfg.instanceId,
    onTransient,
    // Read-your-writes without a log query where that is exactly right (PermissionCache).
    onMined: (result, transactionIndex) => cache?.applyOwnTransaction(result, transactionIndex),
  });
  await sender.init();

  executor = new ActionExecutor({
    keys: enclave,
    poolSize: cfg.executorPoolSize,
    reserveWorkers: cfg.executorReserveWorkers,
    isolateAccounts: cfg.executorIsolateAccounts,
    limits: cfg.executorLimits,
    // The operator's host allow-list (SIGIL_FETCH_ALLOW_HOSTS) belongs to the executor-wide policy, so
    // that turning fetch off (executor.fetch = false) cannot be undone by a run's own policy.
    fetch:
      cfg.executorFetch === false
        ? false
        : {
            ...(cfg.executorFetch ?? {}),
            ...(cfg.fetchAllowHosts.length ? { allowHosts: cfg.fetchAllowHosts } : {}),
          },
    unhandledRejections: cfg.executorUnhandledRejections,
    modules: cfg.executorModules,
    // Actions.sendTransaction: the operator's chains, as the enclave's structural pairs.
    chains: cfg.chains.map(({ chainId: id, rpcUrl }) => ({ chainId: id, rpcUrl })),
    // Runs stopped at their wall-time limit, and where each was (an executor stall shows here).
    logger,
  });
  // Every table of the relayer in one database (relayer/relayerDatabase.ts); a data folder of an earlier
  // release is upgraded into it here, before anything reads it.
  let database: Awaited<ReturnType<typeof openRelayerDatabase>>;
  try {
    database = await openRelayerDatabase({
      dataDir: cfg.dataDir,
      databaseUrl: cfg.databaseUrl,
      billingDb: opts.billing?.db,
      logger,
    });
  } catch (err) {
    await executor.close();
    throw err;
  }
  const db = database.layer;
  // With PostgreSQL, what a duplicate or a burst arriving at another instance must see is shared.
  const shared: DataLayer | null = cfg.databaseUrl ? db : null;
  const webhooks = new Webhooks({
    // The ledger's database when billing is on, so ledger events and deliveries share it.
    db: opts.billing?.db ?? db,
    sealer: enclave,
    provider,
    registry: cfg.registryAddress,
    chainId,
    deployBlock: cfg.deployBlock,
    confirmations: cfg.confirmations,
    pollIntervalMs: cfg.pollIntervalMs,
    ledgerId: opts.billing?.ledgerId ?? null,
    instanceId: cfg.instanceId,
    logger,
    options: cfg.webhooks,
  });
  // The audit log shares the webhooks' database (the ledger's, or the relayer's one database).
  const audit =
    cfg.audit.enabled === false
      ? null
      : new AuditLog(
          opts.billing?.db ?? db,
          {
            address: enclave.attestationIdentity().address,
            sign: (digest) => enclave.signAuditCheckpoint(digest),
          },
          cfg.instanceId ?? "default",
          cfg.audit,
          logger,
          // Runs in the executor record an entry each when they end: an entry may wait a moment to
          // share its transaction with theirs (group commit, relayer/audit/store.ts).
          { moreSoon: () => executor.stats().busy > 0 },
          // Cluster-wide on PostgreSQL: refusalsPerMinute per account whatever the number of instances.
          shared
            ? new SharedTokenBuckets(shared, "audit_refusals", cfg.audit.refusalsPerMinute ?? 60, 60_000)
            : undefined,
        );
  if (audit) {
    // Path-B writes, from the registry's logs (the integrator's follower can replace registryLogsFrom).
    const chainWrites = new AuditChainWrites({
      log: audit,
      provider,
      logs: registryLogsFrom(provider, cfg.registryAddress),
      registry: cfg.registryAddress,
      forwarder: cfg.forwarderAddress,
      chainId,
      deployBlock: cfg.deployBlock,
      confirmations: cfg.confirmations,
      logger,
    });
    audit.followChain(() => chainWrites.scanOnce());
    if (cfg.audit.anchor) {
      const anchorer = new AuditAnchorer(audit.store, sender, {
        ...cfg.audit.anchor,
        chainId,
        instance: cfg.instanceId ?? "default",
        logger,
      });
      audit.anchorWith(() => anchorer.anchorDue());
    }
  }
  let stopListening: (() => Promise<void>) | null = null;
  if (shared && cfg.databaseUrl) {
    writeMark = new SharedWriteMark(shared, SharedWriteMark.scopeOf(chainId, cfg.registryAddress));
    // Catch up ahead of the next request when another instance announces a write (best effort; the
    // per-request read of the mark is what guarantees it).
    stopListening = listenForWriteMarks(
      cfg.databaseUrl,
      writeMark.scope,
      (block) => {
        if (block > cache!.lastProcessedBlock) cache!.catchUpTo(block).catch(() => undefined);
      },
      (err) => logger.warn({ err: err.message }, "write-mark listener lost its connection; reconnecting"),
    );
  }
  const limiter = (name: string, capacity: number, windowMs: number) =>
    shared ? new SharedTokenBuckets(shared, name, capacity, windowMs) : new TokenBuckets(capacity, windowMs);
  // Wallet sign-in's origins: the configured public URLs, else (once listening) the URL listened on.
  let ownOrigins: readonly string[] = cfg.publicOrigins ?? [];
  const base: Omit<RelayerContext, "triggers"> = {
    cfg,
    chainId,
    enclave,
    cache,
    reader,
    sender,
    executor,
    // Pinned code in the database, cached on this instance's disk: every instance serves every pin.
    contentStore: new PinnedCode(
      db,
      new ContentStore(path.join(cfg.dataDir, "actions"), { maxBytes: cfg.limits.ipfsCodeBytes }),
    ),
    gateway: cfg.ipfsGateways.length
      ? new GatewayClient({
          gateways: cfg.ipfsGateways,
          maxBytes: cfg.limits.ipfsCodeBytes,
          timeoutMs: 10_000,
        })
      : null,
    billing: opts.billing ?? null,
    writeMark,
    idempotency: new IdempotencyStore(db, enclave),
    profiles: new ProfileStore(db),
    policyWindows: new PolicyWindowStore(db),
    // On PostgreSQL a quota holds across every instance.
    pins: new PinLedger(db, cfg.limits.pinQuotaBytes),
    auth: new Authenticator(
      enclave,
      cache,
      {
        perKey: limiter("key", cfg.rateLimits.perKeyPerMinute, MINUTE),
        perAccount: limiter("account", cfg.rateLimits.perAccountPerMinute, MINUTE),
      },
      new SignedRequestVerifier({
        chainId,
        registryAddress: cfg.registryAddress,
        // Several instances: a request replayed to another one is refused there too.
        sharedNonces: shared
          ? new SharedNonceStore(shared, (err) =>
              logger.warn({ err: err.message }, "sweeping expired signed-request nonces failed"),
            )
          : undefined,
      }),
      new SiweVerifier({
        chainId,
        // The service's own URLs, never the request's Host header (a client chooses that).
        origins: () => ownOrigins,
        accountOfOwner: async (owner) => Number((await reader.call("accountOfOwner", [owner]))[0]),
        isContract: async (address) => (await provider.getCode(address)) !== "0x",
        // A sign-in message opens one session in all; a signed-out session is refused by every instance.
        nonces: new SharedSignInNonces(db, (err) =>
          logger.warn({ err: err.message }, "sweeping expired sign-in nonces failed"),
        ),
        revocations: sessionRevocationsFor(db, {
          onSweepError: (err) => logger.warn({ err: err.message }, "sweeping expired sign-outs failed"),
        }),
      }),
    ),
    newAccountLimit: limiter("new_account_ip", cfg.rateLimits.newAccountPerIpPerHour, 60 * MINUTE),
    ipLimit: limiter("ip", cfg.rateLimits.perIpPerMinute, MINUTE),
    executionCap: shared
      ? new SharedConcurrencyCap(
          shared,
          cfg.rateLimits.concurrentExecutionsPerAccount,
          // A lease must outlive the longest run the operator allows, or it would stop counting mid-run.
          Math.max(10 * MINUTE, 2 * (cfg.executorLimits?.wallTimeMs ?? 0)),
        )
      : new ConcurrencyCap(cfg.rateLimits.concurrentExecutionsPerAccount),
    webhooks,
    audit,
    metrics,
    logger,
  };
  const ctx = base as RelayerContext;
  ctx.triggers = new TriggerService(
    ctx,
    db,
    limiter("hook_ip", cfg.triggers.hookPerIpPerMinute, MINUTE),
    limiter("hook_trigger", cfg.triggers.hookPerTriggerPerMinute, MINUTE),
    cfg.triggers.clock,
    logger,
  );

  try {
    // Claims found in a database no other process uses belong to requests that never answered.
    if (db.kind === "sqlite") await ctx.idempotency.recoverAfterRestart();
    await executor.ready();
    // Catch up with the chain before serving, if it is there; if not, requests answer 503 until it is.
    await cache
      .ensureSynced()
      .catch((err) =>
        logger.warn(
          { err: (err as Error).message },
          "chain unreachable at start; serving 503 until it is back",
        ),
      );
  } catch (err) {
    await executor.close();
    await stopListening?.();
    await database.close();
    throw err;
  }
  cache.start();
  webhooks.start();
  audit?.start();
  ctx.triggers.start();
  sender.balances.start();
  const stopHotVacuum = startHotTableVacuum(db, cfg.hotVacuumMs, logger);
  const pruneTimer = setInterval(() => {
    ctx.idempotency
      .prune()
      .catch((err: unknown) =>
        logger.warn({ err: (err as Error).message }, "idempotency prune failed; retried in an hour"),
      );
  }, 60 * MINUTE);
  pruneTimer.unref();

  const app = buildApp(ctx);
  // The hooks' refusals that need no body and no database are answered before the app sees them.
  const server = http.createServer(withHookFastPath(ctx, app));
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(cfg.port, cfg.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const hostForUrl = cfg.host.includes(":")
    ? `[${cfg.host}]`
    : cfg.host === "0.0.0.0"
      ? "127.0.0.1"
      : cfg.host;
  if (cfg.publicOrigins === null) {
    const loopback = ["127.0.0.1", "0.0.0.0", "::1", "::", "localhost"].includes(cfg.host);
    ownOrigins = [
      `http://${hostForUrl}:${port}`,
      ...(loopback && hostForUrl !== "localhost" ? [`http://localhost:${port}`] : []),
    ];
  }
  logger.info({ port, chainId, registry: cfg.registryAddress }, "relayer listening");
  // Charges lost to a crash (mined writes whose charge never committed), in the background: it never
  // delays serving (relayer/billing/catchUp.ts).
  const writeCatchUp =
    opts.billing?.writeCatchUp({
      rpc: provider,
      chainId,
      registry: cfg.registryAddress,
      forwarder: cfg.forwarderAddress,
      deployBlock: cfg.deployBlock,
      confirmations: cfg.confirmations,
      gasWallets: Array.from({ length: cfg.gasWallets }, (_, i) => enclave.gasAddress(i, cfg.instanceId)),
      instanceId: cfg.instanceId,
      logger,
      onCharged: (n) => metrics.writesCaughtUp.inc(n),
    }) ?? null;
  writeCatchUp?.start();

  let closed = false;
  let hooks: HookListener | null = null;
  const running: RunningRelayer = {
    url: `http://${hostForUrl}:${port}`,
    port,
    app,
    triggers: ctx.triggers,
    hooks: null,
    async close() {
      if (closed) return;
      closed = true;
      clearInterval(pruneTimer);
      await stopHotVacuum();
      await writeCatchUp?.stop();
      await hooks?.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await ctx.triggers.stop();
      await webhooks.stop();
      await audit?.stop();
      // No catch-up started by a notification after the cache stopped.
      await stopListening?.();
      await cache!.stop();
      await sender.stop();
      await executor!.close();
      rpc.close();
      await database.close();
    },
  };
  if (cfg.triggers.hooksPort !== null) {
    try {
      hooks = await HookListener.start(ctx, {
        port: cfg.triggers.hooksPort,
        host: cfg.triggers.hooksHost ?? cfg.host,
        publicUrl: cfg.triggers.hooksPublicUrl,
      });
    } catch (err) {
      await running.close();
      throw err;
    }
    running.hooks = hooks;
  }
  return running;
}
