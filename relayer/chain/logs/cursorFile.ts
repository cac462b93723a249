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

export class CursorFile {
  private readonly file: string;
  private lastWriteMs = 0;

  constructor(
    dataDir: string,
    private readonly o: { chainId: number; registry: string; deployBlock: number; logger: Logger },
  ) {
    this.file = path.join(dataDir, "event-cursor.json");
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
      return { block: c.block, hashes: c.hashes ?? null };
    } catch {
      return undefined;
    }
  }

  /** Atomic (write then rename), at most once a second unless forced. */
  write(cursor: SavedCursor, force: boolean): void {
    const now = Date.now();
    if (!force && now - this.lastWriteMs < 1_000) return;
    this.lastWriteMs = now;
    const tmp = `${this.file}.tmp`;
    try {
      const { chainId, registry } = this.o;
      fs.writeFileSync(
        tmp,
        JSON.stringify({ chainId, registry, block: cursor.block, hashes: cursor.hashes }),
      );
      fs.renameSync(tmp, this.file);
    } catch (err) {
      this.o.logger.warn({ err: (err as Error).message }, "could not write the event-cursor checkpoint");
    }
  }
}
