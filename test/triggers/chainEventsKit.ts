/**
 * What the chain-event trigger tests share: the two interfaces the trigger service implements
 * (relayer/triggers/model.ts), implemented small and in memory so the tests can read what the source
 * handed over, a real ERC-20 on a real anvil, and helpers to mine and wait. Definitions only: nothing
 * runs when hardhat loads this file.
 */
import { expect } from "chai";
import { JsonRpcProvider, Wallet } from "ethers";
import type { ChainEndpoint } from "../../relayer/chains";
import { chainEventSpecFrom, type ChainEventInput } from "../../relayer/triggers/chainEvents";
import type {
  FireOutcome,
  Firing,
  Trigger,
  TriggerDirectory,
  TriggerIntake,
  TriggerKind,
} from "../../relayer/triggers/model";
import { TriggerTestToken__factory, type TriggerTestToken } from "../../typechain-types";
import { DEV_KEY } from "../helpers/anvil";

export const TRANSFER = "Transfer(address indexed from, address indexed to, uint256 value)";

/**
 * The intake as the service defines it: a firing id is stored once per trigger, and handing it again
 * returns the earlier run. Every hand-over is recorded too, so a test sees repeats the ids absorbed.
 */
export class RecordingIntake implements TriggerIntake {
  readonly handed: Firing[] = [];
  private readonly runs = new Map<string, string>();
  /** When set, fire() throws for this trigger (a full queue). */
  refuse: string | null = null;

  async fire(firing: Firing): Promise<FireOutcome> {
    if (this.refuse === firing.triggerId) throw new Error("trigger_queue_full");
    this.handed.push(firing);
    const key = `${firing.triggerId}|${firing.firingId}`;
    const earlier = this.runs.get(key);
    if (earlier) return { runId: earlier, created: false };
    const runId = `run_${this.runs.size + 1}`;
    this.runs.set(key, runId);
    return { runId, created: true };
  }

  /** The runs created for a trigger, in order: one per distinct firing id. */
  runsOf(triggerId: string): Firing[] {
    const seen = new Set<string>();
    return this.handed.filter(
      (f) => f.triggerId === triggerId && !seen.has(f.firingId) && seen.add(f.firingId),
    );
  }

  handedCount(triggerId: string, firingId: string): number {
    return this.handed.filter((f) => f.triggerId === triggerId && f.firingId === firingId).length;
  }
}

/** The directory as the service defines it: the enabled triggers of a kind, and a change signal. */
export class TestDirectory implements TriggerDirectory {
  private triggers: Trigger[] = [];
  private readonly listeners = new Set<() => void>();
  /** How many times a source asked (each watcher poll asks once). */
  reads = 0;

  async enabledOfKind(kind: TriggerKind): Promise<Trigger[]> {
    this.reads++;
    return this.triggers.filter((t) => t.kind === kind && t.enabled);
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  get listenerCount(): number {
    return this.listeners.size;
  }

  put(trigger: Trigger): void {
    this.triggers = [...this.triggers.filter((t) => t.id !== trigger.id), trigger];
    for (const l of this.listeners) l();
  }

  setEnabled(id: string, enabled: boolean): void {
    const t = this.triggers.find((x) => x.id === id)!;
    this.put({ ...t, enabled });
  }

  /** Resolves after `n` more reads have started (each one a poll of some watcher). */
  async polls(n = 2): Promise<void> {
    const target = this.reads + n;
    const deadline = Date.now() + 20_000;
    while (this.reads < target) {
      if (Date.now() > deadline) throw new Error("the watcher stopped polling");
      await sleep(10);
    }
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

let counter = 0;

/** A chain-event trigger whose spec goes through the creation path (chainEventSpecFrom). */
export function chainTrigger(
  input: Omit<ChainEventInput, "chainId"> & { chainId?: number },
  chains: readonly ChainEndpoint[],
  head: number,
): Trigger {
  const spec = chainEventSpecFrom({ chainId: chains[0].chainId, ...input }, chains, head);
  const id = `trg_test_${process.pid}_${++counter}`;
  return {
    id,
    accountId: "1",
    name: id,
    kind: "chain_event",
    enabled: true,
    cid: "QmTest",
    pkpIds: [],
    jsParams: {},
    runAsKeyAddress: "0x" + "11".repeat(20),
    schedule: null,
    webhook: null,
    chainEvent: spec,
    limits: { runsPerMinute: 60, maxQueuedRuns: 10, concurrency: "parallel" },
    retry: { maxAttempts: 1, backoffMs: 1_000 },
    createdAt: 0,
    updatedAt: 0,
  };
}

export interface TokenChain {
  provider: JsonRpcProvider;
  token: TriggerTestToken;
  address: string;
  head(): Promise<number>;
  mine(blocks: number): Promise<void>;
  /** Mints `amount` to `to` in its own block; the receipt's block and tx hash. */
  mint(to: string, amount: bigint): Promise<{ block: number; txHash: string }>;
  close(): void;
}

/** Deploys the test ERC-20 on the chain at `rpcUrl`. */
export async function deployToken(rpcUrl: string): Promise<TokenChain> {
  const provider = new JsonRpcProvider(rpcUrl, 31337, {
    staticNetwork: true,
    polling: false,
    cacheTimeout: -1,
  });
  // A plain wallet: it asks the chain for its nonce before each transaction, so a reorganisation that
  // dropped one of its transactions does not leave it counting ahead.
  const signer = new Wallet(DEV_KEY, provider);
  const token = await new TriggerTestToken__factory(signer).deploy();
  await token.waitForDeployment();
  const address = (await token.getAddress()).toLowerCase();
  return {
    provider,
    token,
    address,
    head: async () => provider.getBlockNumber(),
    mine: async (blocks) => {
      await provider.send("anvil_mine", ["0x" + blocks.toString(16)]);
    },
    mint: async (to, amount) => {
      const tx = await token.mint(to, amount);
      const r = await tx.wait();
      expect(r?.status).to.equal(1);
      return { block: r!.blockNumber, txHash: r!.hash.toLowerCase() };
    },
    close: () => provider.destroy(),
  };
}

/** Polls `probe` until it is true (the watcher polls every few tens of ms in these tests). */
export async function eventually(probe: () => boolean, what: string, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await sleep(20);
  }
}
