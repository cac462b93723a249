/**
 * Saves the embedded chain's state file while anvil runs (anvil itself writes it at start-up's load and
 * on SIGTERM/SIGINT; a SIGKILL or a power loss loses what changed since the last save).
 *
 * Why not anvil's own `--state-interval`: it rewrites the whole file every interval whether anything
 * changed or not, and the file holds every block and transaction with its receipt, so the cost of one
 * save grows with the chain's age. Measured on a long-lived chain: an idle service kept 13% of a core
 * busy rewriting a 117 MB file every 2 s, and under load the saves were about half of anvil's growing
 * CPU per write. Here a save happens only when a new block was mined since the last one, and never
 * more often than `SAVE_COST_SHARE` of the time allows: after a save that took `d` ms the next waits at
 * least `d / SAVE_COST_SHARE`. So an idle chain costs nothing and a busy one spends at most a twentieth
 * of anvil's time saving; the price is a loss window on a hard kill that grows with the save's cost
 * (the configured interval while a save is cheap: 2 s by default; ~20 s once a save takes a second).
 *
 * A save is `anvil_dumpState` (the same JSON as the file anvil writes, gzipped), unzipped off the main
 * thread and written to a temporary file renamed over the state file, so a crash mid-save leaves the
 * previous file whole.
 */
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import { promisify } from "node:util";
import * as zlib from "node:zlib";

const gunzip = promisify(zlib.gunzip);

/** The largest share of wall time the saves may take (the rest of the time, anvil serves requests). */
export const SAVE_COST_SHARE = 0.05;

export interface ChainStateSaverOptions {
  rpcUrl: string;
  statePath: string;
  /** The shortest time between two saves, and how often the chain is looked at, in ms. */
  minIntervalMs: number;
  /** Where a failed save is reported (the next one is tried at the next interval). */
  onError?: (err: Error) => void;
}

export class ChainStateSaver {
  private timer: NodeJS.Timeout | null = null;
  private saving: Promise<void> | null = null;
  /** The block the file on disk holds (null: not saved by us yet, so the first look saves). */
  private savedBlock: string | null = null;
  private nextAllowedAt = 0;
  private stopped = false;
  /** Saves written (tests, benchmarks). */
  saves = 0;
  /** How long the last save took, in ms. */
  lastSaveMs = 0;

  constructor(private readonly o: ChainStateSaverOptions) {}

  start(): void {
    this.timer = setInterval(() => void this.tick(), this.o.minIntervalMs);
    this.timer.unref();
  }

  /** Stops looking and waits for a save in progress (before anvil is stopped and writes the file itself). */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.saving?.catch(() => undefined);
  }

  /**
   * Saves now if a block was mined since the last save, or whatever the chain holds with `force` (a
   * change without a block, such as the dev funding's anvil_setBalance). Joins a save in progress.
   */
  saveIfChanged(force = false): Promise<void> {
    if (this.saving) return force ? this.saving.then(() => this.saveIfChanged(true)) : this.saving;
    const p = this.saveIfChangedNow(force).catch((err: Error) => this.o.onError?.(err));
    this.saving = p.finally(() => {
      this.saving = null;
    });
    return this.saving;
  }

  private tick(): void {
    if (this.stopped || this.saving || Date.now() < this.nextAllowedAt) return;
    void this.saveIfChanged();
  }

  private async saveIfChangedNow(force: boolean): Promise<void> {
    const block = (await this.rpc("eth_blockNumber")) as string;
    if ((block === this.savedBlock && !force) || this.stopped) return;
    const t0 = performance.now();
    const hex = (await this.rpc("anvil_dumpState")) as string;
    const json = await gunzip(Buffer.from(hex.slice(2), "hex"));
    if (this.stopped) return; // anvil is about to write the file itself
    const tmp = `${this.o.statePath}.${randomUUID()}.tmp`;
    try {
      await fs.promises.writeFile(tmp, json);
      await fs.promises.rename(tmp, this.o.statePath);
    } catch (err) {
      await fs.promises.rm(tmp, { force: true });
      throw err;
    }
    // The dump may hold blocks mined after `block` was read: saving again for those is harmless.
    this.savedBlock = block;
    this.saves++;
    this.lastSaveMs = performance.now() - t0;
    this.nextAllowedAt = Date.now() + this.lastSaveMs / SAVE_COST_SHARE;
  }

  private async rpc(method: string): Promise<unknown> {
    const res = await fetch(this.o.rpcUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params: [] }),
      signal: AbortSignal.timeout(60_000),
    });
    const body = (await res.json()) as { result?: unknown; error?: { message?: string } };
    if (body.error || body.result === undefined)
      throw new Error(`${method}: ${body.error?.message ?? `HTTP ${res.status}`}`);
    return body.result;
  }
}
