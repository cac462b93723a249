/**
 * The bytes of pinned code, in the data layer (migration 13), so that every instance serves every pin:
 * code pinned through one instance runs through any other sharing its PostgreSQL database. Each
 * instance keeps a content store on disk in front of it as a cache (`<data dir>/actions`), so running
 * code by CID reads the database once per instance, not once per run.
 *
 * Reads are verified against the CID wherever they come from: a cached file or a row that no longer
 * hashes to its CID is never returned (EnclaveError cid_mismatch when nothing else has the CID).
 */
import { type ContentStore, EnclaveError, computeCid, isEnclaveError, parseCid } from "../enclave";
import { type DataLayer, prepare } from "./db";

const Q = {
  put: prepare("pinnedCode.put", (db, a) =>
    db
      .insertInto("pinned_code")
      .values({ cid: a(0), code: a(1), created_ms: a(2) })
      .onConflict((oc) => oc.column("cid").doNothing()),
  ),
  get: prepare("pinnedCode.get", (db, a) =>
    db.selectFrom("pinned_code").select("code").where("cid", "=", a(0)),
  ),
};

export class PinnedCode {
  constructor(
    private readonly db: DataLayer,
    /** This instance's cache on disk. */
    private readonly cache: ContentStore,
  ) {}

  /** Stores `bytes` (size-checked by the cache's limit) and returns its CIDv0; idempotent. */
  async put(bytes: Uint8Array): Promise<string> {
    const cid = await this.cache.put(bytes);
    await this.db.run(Q.put, [cid, Buffer.from(bytes), Date.now()]);
    return cid;
  }

  /** The verified bytes of `cid`, or null when no instance pinned it. */
  async get(cid: string): Promise<Uint8Array | null> {
    let cacheError: unknown = null;
    try {
      const cached = await this.cache.get(cid);
      if (cached) return cached;
    } catch (err) {
      if (!isEnclaveError(err)) throw err;
      cacheError = err; // a damaged cache file: the database's copy may still be whole
    }
    const canonical = parseCid(cid);
    const row = await this.db.first(Q.get, [canonical]);
    if (!row) {
      if (cacheError) throw cacheError;
      return null;
    }
    const bytes = new Uint8Array(row.code);
    if ((await computeCid(bytes)) !== canonical)
      throw new EnclaveError("cid_mismatch", "Stored content does not match its CID.", {
        details: `the database row for ${canonical} is corrupted`,
      });
    // Best effort: a cache that cannot be written only costs the next read a query.
    await this.cache.put(bytes).catch(() => undefined);
    return bytes;
  }
}
