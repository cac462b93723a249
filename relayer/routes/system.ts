/** GET config (public chain facts, limits, prices), /health and /metrics. */
import { Router } from "express";
import type { RelayerContext } from "../context";
import { handler } from "../context";

export function configRoute(ctx: RelayerContext): Router {
  const r = Router();
  r.get(
    "/config",
    handler(ctx, async () => ({
      body: {
        chain_id: ctx.chainId,
        registry_address: ctx.cfg.registryAddress,
        forwarder_address: ctx.cfg.forwarderAddress,
        deploy_block: ctx.cfg.deployBlock,
        limits: {
          inline_code_bytes: ctx.cfg.limits.inlineCodeBytes,
          ipfs_code_bytes: ctx.cfg.limits.ipfsCodeBytes,
          js_params_bytes: ctx.cfg.limits.jsParamsBytes,
          max_body_bytes: ctx.cfg.maxBodyBytes,
          max_page_size: ctx.cfg.limits.maxPageSize,
          max_name_bytes: ctx.cfg.limits.maxNameLength,
          max_array_entries: ctx.cfg.limits.maxArrayEntries,
          poll_interval_ms: ctx.cfg.pollIntervalMs,
        },
        rate_limits: {
          per_key_per_minute: ctx.cfg.rateLimits.perKeyPerMinute,
          per_account_per_minute: ctx.cfg.rateLimits.perAccountPerMinute,
          new_account_per_ip_per_hour: ctx.cfg.rateLimits.newAccountPerIpPerHour,
          concurrent_executions_per_account: ctx.cfg.rateLimits.concurrentExecutionsPerAccount,
          per_ip_per_minute: ctx.cfg.rateLimits.perIpPerMinute,
        },
        prices: ctx.billing ? ctx.billing.prices() : null,
        billing_enabled: ctx.billing !== null,
      },
    })),
  );
  return r;
}

export function healthRoutes(ctx: RelayerContext): Router {
  const r = Router();
  r.get("/health", async (_req, res) => {
    let head: number | null = null;
    let chainError: string | null = null;
    try {
      head = Number(
        BigInt(
          await withTimeout(ctx.sender.provider().send("eth_blockNumber", []) as Promise<string>, 1_500),
        ),
      );
    } catch (err) {
      chainError = err instanceof Error ? err.message.split("\n")[0].slice(0, 200) : "unreachable";
    }
    const pool = ctx.executor.stats();
    const ok = head !== null && pool.alive > 0;
    res.status(ok ? 200 : 503).json({
      status: ok ? "ok" : "degraded",
      chain: {
        reachable: head !== null,
        chain_id: ctx.chainId,
        head_block: head,
        error: chainError,
      },
      cache: {
        last_processed_block: ctx.cache.lastProcessedBlock,
        lag_blocks: head === null ? null : Math.max(0, head - ctx.cache.lastProcessedBlock),
        last_poll_ok_ms_ago: ctx.cache.lastPollOkMs === null ? null : Date.now() - ctx.cache.lastPollOkMs,
        loaded_accounts: ctx.cache.loadedAccounts,
      },
      executor: pool,
      gas_wallets: ctx.sender.gasWalletAddresses(),
    });
  });
  r.get("/metrics", async (_req, res) => {
    res.setHeader("Content-Type", ctx.metrics.registry.contentType);
    res.send(await ctx.metrics.registry.metrics());
  });
  return r;
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e) => {
        clearTimeout(t);
        reject(e);
      },
    );
  });
}
