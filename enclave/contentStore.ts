/**
 * Content-addressed store on disk: one file per CIDv0, named by the CID. Writes go to a temporary file
 * and are renamed into place, so a reader never sees a half-written file. Every read re-hashes the
 * bytes: a file altered on disk is refused with EnclaveError("cid_mismatch"), never returned.
 */
import { promises as fs } from "node:fs";
import { randomBytes } from "node:crypto";
import path from "node:path";
import { EnclaveError } from "./errors";
import { computeCidSync, contentMatchesCid, parseCid } from "./cid";

export const DEFAULT_STORE_MAX_BYTES = 512 * 1024; // the limit on code fetched by CID (design §6, docs/background.md)

export class ContentStore {
  readonly #dir: string;
  readonly #maxBytes: number;

  constructor(dir: string, opts: { maxBytes?: number } = {}) {
    this.#dir = path.resolve(dir);
    this.#maxBytes = opts.maxBytes ?? DEFAULT_STORE_MAX_BYTES;
  }

  /** Stores `bytes` and returns its CIDv0 (idempotent). */
  async put(bytes: Uint8Array): Promise<string> {
    if (!(bytes instanceof Uint8Array)) {
      throw new EnclaveError("invalid_content", "Content must be bytes.", {
        details: "expected a Uint8Array",
      });
    }
    if (bytes.length > this.#maxBytes) {
      throw new EnclaveError("content_too_large", "Content too large.", {
        details: `${bytes.length} bytes exceeds the limit of ${this.#maxBytes}`,
      });
    }
    const cid = computeCidSync(bytes, 0);
    await fs.mkdir(this.#dir, { recursive: true });
    const tmp = path.join(this.#dir, `.tmp-${randomBytes(8).toString("hex")}`);
    await fs.writeFile(tmp, bytes);
    await fs.rename(tmp, this.#file(cid));
    return cid;
  }

  /** The bytes stored under `cid`, or null; throws cid_mismatch if the file no longer matches. */
  async get(cid: string): Promise<Uint8Array | null> {
    const canonical = parseCid(cid);
    let bytes: Buffer;
    try {
      bytes = await fs.readFile(this.#file(canonical));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw e;
    }
    if (!contentMatchesCid(canonical, bytes)) {
      throw new EnclaveError("cid_mismatch", "Stored content does not match its CID.", {
        details: `the file for ${canonical} is corrupted`,
      });
    }
    return new Uint8Array(bytes);
  }

  async has(cid: string): Promise<boolean> {
    try {
      await fs.access(this.#file(parseCid(cid)));
      return true;
    } catch (e) {
      if (e instanceof EnclaveError) throw e;
      return false;
    }
  }

  #file(canonicalCid: string): string {
    // Canonical CIDs are base58btc or base32 lowercase: no path separators, no dots.
    return path.join(this.#dir, canonicalCid);
  }
}
