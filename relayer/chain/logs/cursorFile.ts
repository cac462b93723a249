/**
 * The follower's persistent cursor: `event-cursor.json` in the data folder, holding the last processed
 * block and the hashes of the last processed blocks (so a restart after a reorganisation, or during one,
 * still detects it). Keyed by chain and registry: a file written for another deployment is ignored.
 * Per instance on purpose: what it describes (the in-memory projections) is this process's own.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import type { Logger } from "pino";

export interface SavedCursor {
  block: number;
  hashes: unknown;
}

/** How often an unforced checkpoint is written at most: a crash replays at most this much (plus a poll). */
export const DEFAULT_CHECKPOINT_EVERY_MS = 5_000;

export class CursorFile {
  private readonly file: string;
  private readonly everyMs: number;
  private lastWriteMs = 0;
  /** The block the file holds (read or written by this process); null: unknown, write at the next chance. */
  private writtenBlock: number | null = null;

  constructor(
    dataDir: string,
    private readonly o: {
      chainId: number;
      registry: string;
      deployBlock: number;
      logger: Logger;
      /** At most one unforced write per this many ms (default DEFAULT_CHECKPOINT_EVERY_MS). */
      checkpointEveryMs?: number;
    },
  ) {
    this.file = path.join(dataDir, "event-cursor.json");
    this.everyMs = o.checkpointEveryMs ?? DEFAULT_CHECKPOINT_EVERY_MS;
  }

  read(): SavedCursor | undefined {
    try {
      const c = JSON.parse(fs.readFileSync(this.file, "utf8")) as {
        chainId: number;
        registry: string;
        block: number;
        hashes?: unknown;
      };
      if (c.chainId !== this.o.chainId || c.registry.toLowerCase() !== this.o.registry.toLowerCase())
        return undefined;
      if (!Number.isSafeInteger(c.block) || c.block < this.o.deployBlock - 1) return undefined;
      this.writtenBlock = c.block;
      return { block: c.block, hashes: c.hashes ?? null };
    } catch {
      return undefined;
    }
  }

  /**
   * Saves the cursor (atomically: write then rename). Unforced, only if the block moved since the file
   * was last written, and at most once every `checkpointEveryMs`: the follower calls this after every
   * poll, and an unchanged cursor rewritten on each one cost more CPU on the write path than the
   * simulations did. Skipping is safe because the file then holds an older cursor, which a restart
   * replays from; a write that moves the file's cursor *back* (a rollback, a reset) must be forced, or
   * the file would name blocks that are no longer applied. `snapshot` (the remembered hashes) is only
   * computed when the file is written.
   */
  save(block: number, snapshot: () => unknown, force: boolean): void {
    if (!force) {
      if (block === this.writtenBlock) return;
      if (Date.now() - this.lastWriteMs < this.everyMs) return;
    }
    this.lastWriteMs = Date.now();
    const tmp = `${this.file}.tmp`;
    try {
      const { chainId, registry } = this.o;
      fs.writeFileSync(tmp, JSON.stringify({ chainId, registry, block, hashes: snapshot() }));
      fs.renameSync(tmp, this.file);
      this.writtenBlock = block;
    } catch (err) {
      this.writtenBlock = null;
      this.o.logger.warn({ err: (err as Error).message }, "could not write the event-cursor checkpoint");
    }
  }
}
