/** GET config (public chain facts, limits, prices), the OpenAPI document, /health and /metrics. */
import { createHash, timingSafeEqual } from "node:crypto";
import type { RelayerContext } from "../context";
import { ApiError } from "../errors";
import { endpoint } from "./endpoint";
import * as s from "./schemas";

const config = endpoint<RelayerContext>("GET", "/config", {
  caller: "public",
  summary: "Chain id, contract addresses, the chains the service reaches, limits, prices",
  answer: s.out({
    chain_id: s.int(),
    chains: s.arr(
      s.out({
        chain_id: s.int(),
        name: s.str(),
        confirmations: s.int("Blocks a log waits under before a chain-event trigger fires on it"),
      }),
      "The chains chain-event triggers and sendTransaction may name (the registry's first); never their RPC URLs",
    ),
    registry_address: s.address,
    forwarder_address: s.address,
    deploy_block: s.int(),
    limits: s.out({
      inline_code_bytes: s.int(),
      ipfs_code_bytes: s.int(),
      js_params_bytes: s.int(),
      max_body_bytes: s.int(),
      max_page_size: s.int(),
      max_name_bytes: s.int(),
      max_array_entries: s.int(),
      poll_interval_ms: s.int(),
    }),
    rate_limits: s.out({
      per_key_per_minute: s.int(),
      per_account_per_minute: s.int(),
      new_account_per_ip_per_hour: s.int(),
      concurrent_executions_per_account: s.int(),
      per_ip_per_minute: s.int(),
    }),
    prices: s.nullable(
      s.out({
        write_cents: s.int(),
        execution_cents_per_second: s.int(),
        pin_cents_per_100kb: s.int(),
        minimum_payment_cents: s.int(),
      }),
    ),
    billing_enabled: s.bool(),
  }),
  errors: [],
  handle: async (ctx) => ({
    body: {
      chain_id: ctx.chainId,
      // Never the RPC URLs: a hosted endpoint's URL often carries its key.
      chains: ctx.cfg.chains.map((c) => ({
        chain_id: c.chainId,
        name: c.name,
        confirmations: c.confirmations,
      })),
      registry_address: ctx.cfg.registryAddress,
      forwarder_address: ctx.cfg.forwarderAddress,
      deploy_block: ctx.cfg.deployBlock,
      limits: {
        inline_code_bytes: s.BODY_LIMITS.inlineCodeBytes,
        ipfs_code_bytes: ctx.cfg.limits.ipfsCodeBytes,
        js_params_bytes: s.BODY_LIMITS.jsParamsBytes,
        max_body_bytes: ctx.cfg.maxBodyBytes,
        max_page_size: ctx.cfg.limits.maxPageSize,
        max_name_bytes: s.BODY_LIMITS.maxNameLength,
        max_array_entries: s.BODY_LIMITS.maxArrayEntries,
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
  }),
});

/** The OpenAPI document, which app.ts assembles from every declaration when it builds the app. */
const openapiDocument = endpoint<RelayerContext>("GET", "/openapi.json", {
  caller: "public",
  summary: "This document",
  answer: { type: "object" },
  errors: [],
  handle: async (_ctx, req) => ({ body: req.app.locals.openapi }),
});

export const CONFIG_ENDPOINTS = [config];
export const DOCUMENT_ENDPOINTS = [openapiDocument];

/**
 * GET /health. Anyone (a load balancer, a status page) sees only `{status, last_processed_block}`: "ok" or
 * "degraded" with 200
 * or 503. The details (chain head and RPC error text, cache lag, executor pool, gas wallet addresses)
 * help an attacker map the deployment, so they are for the operator only: the same request with
 * `X-Operator-Token` equal to the configured operator token (SIGIL_OPERATOR_TOKEN). Without a configured
 * token there is no detailed view; a token header that does not match is 401 invalid_operator_token.
 */
const health = endpoint<RelayerContext>("GET", "/health", {
  caller: "public",
  summary:
    "{status}: ok or degraded (503). With X-Operator-Token: chain, cache, executor pool and gas wallets",
  params: [
    {
      name: "X-Operator-Token",
      in: "header",
      required: false,
      schema: { type: "string" },
      description: "The operator token (SIGIL_OPERATOR_TOKEN): unlocks the detailed view",
    },
  ],
  answer: s.ref("Health"),
  errors: ["invalid_operator_token"],
  // Degraded is 503 with the same document (load balancers read the status alone).
  alsoAnswers: { status: 503, description: "degraded", schema: s.ref("Health") },
  async handle(ctx, req, res) {
    const offered = req.get("x-operator-token");
    if (offered !== undefined && !operatorTokenMatches(ctx.cfg.operatorToken, offered))
      throw new ApiError(
        "invalid_operator_token",
        "X-Operator-Token does not match the operator token this relayer was configured with.",
      );
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
    // Every gas wallet low (or refused for insufficient funds): degraded, but still 200: reads and
    // executions work, and writes do until the balance runs out; a load balancer that pulled every
    // instance at once because all ran low would turn a funding warning into an outage.
    const gasLow = ctx.sender.balances.allLow();
    const reasons = [
      ...(head === null ? ["chain_unreachable"] : []),
      ...(pool.alive > 0 ? [] : ["executor_down"]),
      ...(gasLow ? ["gas_wallets_low"] : []),
    ];
    const status = reasons.length === 0 ? "ok" : "degraded";
    res.status(ok ? 200 : 503);
    // The processed block is public (the chain is): after a path-B transaction in block N, a client
    // waits until last_processed_block >= N to know this service honours it (the dashboard does).
    const lastProcessedBlock = ctx.cache.lastProcessedBlock;
    if (offered === undefined) {
      res.json({ status, last_processed_block: lastProcessedBlock });
      return;
    }
    res.json({
      status,
      last_processed_block: lastProcessedBlock,
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
      // The documented fields only (the executor's stats carry more, e.g. its Compartment reuses).
      executor: {
        poolSize: pool.poolSize,
        alive: pool.alive,
        busy: pool.busy,
        queued: pool.queued,
        restarts: pool.restarts,
      },
      gas_wallets: ctx.sender.gasWalletAddresses(),
      gas_wallet_balances: {
        low_balance_threshold_wei: ctx.sender.balances.thresholdWei()?.toString() ?? null,
        wallets: ctx.sender.balances.statuses().map((w) => ({
          address: w.address,
          balance_wei: w.balanceWei?.toString() ?? null,
          low: w.low,
          unfunded: w.dry,
        })),
      },
      degraded_reasons: reasons,
    });
  },
});

/**
 * GET /metrics: the same rule as /health for deployment details. Anyone gets the public metrics (gas
 * wallets by index, no address); with the operator token (X-Operator-Token, or Authorization: Bearer
 * for scrapers that only send that) the answer also maps each wallet index to its address. A token that
 * does not match is 401 invalid_operator_token.
 */
const metrics = endpoint<RelayerContext>("GET", "/metrics", {
  caller: "public",
  summary:
    "Prometheus metrics. Gas wallets by index; with the operator token, also sigil_gas_wallet_info{wallet, address}",
  answer: {},
  errors: ["invalid_operator_token"],
  // Text, not JSON: the operation is written out.
  operation: {
    summary:
      "Prometheus metrics. Gas wallets by index; with the operator token, also sigil_gas_wallet_info{wallet, address}",
    security: [],
    parameters: [
      {
        name: "X-Operator-Token",
        in: "header",
        required: false,
        schema: { type: "string" },
        description:
          "The operator token (SIGIL_OPERATOR_TOKEN; or Authorization: Bearer <token>): adds the gas wallet addresses",
      },
    ],
    responses: {
      "200": { description: "text/plain exposition format" },
      "400": {
        description:
          "json_too_deep, header_too_long, invalid_query (the HTTP guard answers before any route)",
        content: { "application/json": { schema: s.ref("Error") } },
      },
      "401": {
        description: "invalid_operator_token",
        content: { "application/json": { schema: s.ref("Error") } },
      },
    },
  },
  async handle(ctx, req, res) {
    const bearer = /^Bearer (.+)$/i.exec(req.get("authorization") ?? "")?.[1];
    const offered = req.get("x-operator-token") ?? bearer;
    if (offered !== undefined && !operatorTokenMatches(ctx.cfg.operatorToken, offered))
      throw new ApiError(
        "invalid_operator_token",
        "The operator token does not match the one this relayer was configured with.",
      );
    let text = await ctx.metrics.registry.metrics();
    if (offered !== undefined)
      text += `${text.endsWith("\n") ? "" : "\n"}${await ctx.metrics.operatorRegistry.metrics()}`;
    res.setHeader("Content-Type", ctx.metrics.registry.contentType);
    res.send(text);
  },
});

export const HEALTH_ENDPOINTS = [health, metrics];

/** Constant-time comparison of SHA-256 digests (equal lengths whatever was offered). */
function operatorTokenMatches(configured: string | null, offered: string): boolean {
  if (!configured) return false;
  const digest = (v: string) => createHash("sha256").update(v, "utf8").digest();
  return timingSafeEqual(digest(configured), digest(offered));
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
