/**
 * The one database the relayer keeps its tables in, chosen once at start:
 *  - PostgreSQL when `SIGIL_DATABASE_URL` is set (shared by every instance);
 *  - else the billing ledger's database when billing is on (`npm start`: `<data folder>/ledger.sqlite`),
 *    so one embedded start opens one database file;
 *  - else `<relayer data dir>/relayer.sqlite` (a relayer embedded without billing).
 * A data folder of a release that kept other files is upgraded into it first (relayer/db/legacyFiles.ts).
 */
import * as path from "node:path";
import {
  type DataLayer,
  RELAYER_SQLITE_FILE,
  importLegacyFiles,
  openDataLayer,
  setAsideLegacyRelayerFile,
} from "./db";
import type { Logger } from "pino";

export interface RelayerDatabase {
  layer: DataLayer;
  /** Closes the database if the relayer opened it (the billing ledger's is closed by billing). */
  close(): Promise<void>;
}

export async function openRelayerDatabase(opts: {
  dataDir: string;
  databaseUrl?: string;
  billingDb?: DataLayer;
  logger: Logger;
}): Promise<RelayerDatabase> {
  setAsideLegacyRelayerFile(opts.dataDir);
  const borrowed = !opts.databaseUrl && opts.billingDb ? opts.billingDb : null;
  const layer =
    borrowed ??
    (await openDataLayer({
      databaseUrl: opts.databaseUrl,
      sqlitePath: path.join(opts.dataDir, RELAYER_SQLITE_FILE),
    }));
  const close = async () => {
    if (!borrowed) await layer.close();
  };
  try {
    const upgrade = await importLegacyFiles(opts.dataDir, layer);
    if (upgrade.files.length)
      opts.logger.info(
        { files: upgrade.files, rows: upgrade.rows, pinnedCode: upgrade.pinnedCode },
        "data folder upgraded: the earlier release's files are now in the one database",
      );
  } catch (err) {
    await close();
    throw err;
  }
  return { layer, close };
}
