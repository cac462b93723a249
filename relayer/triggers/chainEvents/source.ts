/**
 * The chain-event source of the trigger service: one watcher per configured chain (watcher.ts), all
 * woken when the trigger directory changes, all stopped together. It talks to the service only through
 * the two interfaces of model.ts: the directory it reads triggers from and the intake it hands firings
 * to. The RPC connections are opened here, to the operator's configured URLs and nothing else.
 */
import type { Logger } from "pino";
import { chainById, type ChainEndpoint } from "../../chains";
import { chainUnavailable, makeProvider } from "../../chain/rpc";
import type { LogRpc } from "../../chain/logs/ranges";
import type { DataLayer } from "../../db";
import type { ChainEventSpec, TriggerDirectory, TriggerIntake } from "../model";
import { ChainCursorStore } from "./cursors";
import { chainEventSpecFrom, configuredChain, type ChainEventInput } from "./eventSpec";
import { ChainWatcher } from "./watcher";

export interface ChainEventSourceOptions {
  intake: TriggerIntake;
  directory: TriggerDirectory;
  /** The relayer's data layer (migration 17's `trigger_chain_cursors` lives there). */
  db: DataLayer;
  /** The operator's chains (relayer/chains.ts resolveChains). */
  chains: readonly ChainEndpoint[];
  logger: Logger;
  /** Time between polls of each chain (default 2 s). */
  pollIntervalMs?: number;
  /** Longest wait between polls of a chain that is down (default 30 s). */
  maxBackoffMs?: number;
  /** Timeout of one RPC request (default 10 s). */
  rpcTimeoutMs?: number;
  /** Widest block range one eth_getLogs asks for (default 5,000). */
  maxRange?: number;
}

export class ChainEventSource {
  readonly cursors: ChainCursorStore;
  private readonly watchers: ChainWatcher[] = [];
  /** One connection per configured chain, to its configured RPC URL (and to nothing else). */
  private readonly rpcs = new Map<number, { rpc: LogRpc; close(): void }>();
  private unsubscribe: (() => void) | null = null;

  constructor(private readonly o: ChainEventSourceOptions) {
    this.cursors = new ChainCursorStore(o.db);
    for (const chain of o.chains) {
      const { provider, close } = makeProvider(chain.rpcUrl, chain.chainId, o.rpcTimeoutMs ?? 10_000);
      this.rpcs.set(chain.chainId, { rpc: provider, close });
    }
  }

  /** Starts one watcher per chain; polling begins at once. Never throws for a chain that is down. */
  start(): void {
    if (this.watchers.length) return;
    for (const chain of this.o.chains)
      this.watchers.push(
        new ChainWatcher({
          chain,
          rpc: this.rpcs.get(chain.chainId)!.rpc,
          intake: this.o.intake,
          directory: this.o.directory,
          cursors: this.cursors,
          logger: this.o.logger,
          pollIntervalMs: this.o.pollIntervalMs ?? 2_000,
          maxBackoffMs: this.o.maxBackoffMs,
          maxRange: this.o.maxRange,
        }),
      );
    this.unsubscribe = this.o.directory.onChange(() => {
      for (const w of this.watchers) w.wake();
    });
    for (const w of this.watchers) w.start();
  }

  /** The chain's head now. Throws 400 chain_not_configured, or 503 chain_unavailable when it is down. */
  async head(chainId: number): Promise<number> {
    const entry = this.rpcs.get(configuredChain(this.o.chains, chainId).chainId)!;
    try {
      return Number(BigInt((await entry.rpc.send("eth_blockNumber", [])) as string));
    } catch (err) {
      throw chainUnavailable(err, { chain_id: chainId });
    }
  }

  /**
   * A creation request's spec, validated against the chain's head now (chainEventSpecFrom): what the
   * trigger service calls on create and update, so it needs no connection of its own to the chain.
   */
  async specFrom(input: ChainEventInput): Promise<ChainEventSpec> {
    const chainId = input.chainId;
    // The chain is checked before it is asked for its head: an unknown chain is the user's mistake.
    const head =
      typeof chainId === "number" && chainById(this.o.chains, chainId) ? await this.head(chainId) : 0;
    return chainEventSpecFrom(input, this.o.chains, head);
  }

  /** Stops every watcher (waiting for polls under way) and closes the RPC connections (for good). */
  async stop(): Promise<void> {
    this.unsubscribe?.();
    this.unsubscribe = null;
    await Promise.all(this.watchers.map((w) => w.stop()));
    this.watchers.length = 0;
    for (const { close } of this.rpcs.values()) close();
    this.rpcs.clear();
  }

  /** Drops a deleted trigger's cursor (a re-created trigger starts at its own from_block anyway). */
  forget(triggerId: string): Promise<void> {
    return this.cursors.forget(triggerId);
  }
}
