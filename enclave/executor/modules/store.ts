/**
 * The module content store, keyed by URL (files named by the SHA-256 of the URL):
 *  - `<h>.integrity`: the SHA-384 recorded the first time the URL was fetched (trust-on-first-use).
 *    It is never replaced: every later fetch of that URL must give the same bytes.
 *  - `<h>.module`: the bytes, so that a run uses the module without fetching it again, even after a
 *    restart. They may be deleted (to free disk); the next run fetches them again and the recorded
 *    hash decides. Bytes that no longer match the record are ignored, never used.
 * Files are written to a temporary name and renamed into place (a reader never sees half a file).
 */
import { promises as fs } from "node:fs";
import { createHash, randomBytes } from "node:crypto";
import path from "node:path";

export interface StoredModule {
  url: string;
  /** `sha384-<base64>` of `bytes`. */
  integrity: string;
  bytes: Uint8Array;
}

export function sha384Integrity(bytes: Uint8Array): string {
  return "sha384-" + createHash("sha384").update(bytes).digest("base64");
}

export class ModuleStore {
  /** Without a directory (tests, tools) records and bytes live as long as the process. */
  readonly #dir: string | null;
  readonly #records = new Map<string, string>();
  readonly #bytes = new Map<string, Uint8Array>();

  constructor(dir: string | null) {
    this.#dir = dir === null ? null : path.resolve(dir);
  }

  /** The integrity recorded for `url` the first time it was fetched, or null. */
  async recordedIntegrity(url: string): Promise<string | null> {
    if (this.#dir === null) return this.#records.get(url) ?? null;
    const text = await readOrNull(this.#file(url, "integrity"));
    return text === null ? null : text.toString("utf8").trim();
  }

  /** The stored bytes of `url` if they match its recorded integrity, else null (fetch again). */
  async bytes(url: string): Promise<StoredModule | null> {
    const integrity = await this.recordedIntegrity(url);
    if (integrity === null) return null;
    const bytes =
      this.#dir === null ? (this.#bytes.get(url) ?? null) : await readOrNull(this.#file(url, "module"));
    if (bytes === null || sha384Integrity(bytes) !== integrity) return null;
    return { url, integrity, bytes: new Uint8Array(bytes) };
  }

  /** Records the integrity (first time only) and keeps the bytes. */
  async put(module: StoredModule): Promise<void> {
    if (this.#dir === null) {
      if (!this.#records.has(module.url)) this.#records.set(module.url, module.integrity);
      this.#bytes.set(module.url, module.bytes);
      return;
    }
    await fs.mkdir(this.#dir, { recursive: true });
    if ((await this.recordedIntegrity(module.url)) === null)
      await this.#write(this.#file(module.url, "integrity"), module.integrity);
    await this.#write(this.#file(module.url, "module"), module.bytes);
  }

  async #write(file: string, data: string | Uint8Array): Promise<void> {
    const tmp = path.join(this.#dir!, `.tmp-${randomBytes(8).toString("hex")}`);
    await fs.writeFile(tmp, data);
    await fs.rename(tmp, file);
  }

  #file(url: string, kind: "integrity" | "module"): string {
    return path.join(this.#dir!, `${createHash("sha256").update(url).digest("hex")}.${kind}`);
  }
}

async function readOrNull(file: string): Promise<Buffer | null> {
  try {
    return await fs.readFile(file);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw e;
  }
}
