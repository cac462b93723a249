/**
 * The data layer: one schema, one set of migrations and one query interface over two engines
 * (SQLite by default, PostgreSQL with SIGIL_DATABASE_URL). See docs/configuration.md, "Database".
 */
import { type DataLayer, type DataLayerOptions, openEngine } from "./engine";
import { migrate } from "./migrations";

export {
  type DataLayer,
  type DataLayerOptions,
  type Sql,
  type EngineKind,
  isPostgresUrl,
  openEngine,
  postgresStatementCount,
  tallyPostgresStatements,
} from "./engine";
export {
  MIGRATIONS,
  MIGRATION_LOCK_KEY,
  migrate,
  readVersion,
  type Migration,
  type MigrationContext,
} from "./migrations";
export { prepare, type Prepared } from "./prepared";
export { IdempotencyRecords, type IdempotencyRow } from "./idempotencyRecords";
export { ExpiringRows, SweepThrottle, type ExpiringTable } from "./expiringRows";
export { SharedSignInNonces, type SignInNonces } from "./siweNonces";
export { REVOCATION_STALENESS_MS, sessionRevocationsFor, type SessionRevocations } from "./siweRevocations";
export {
  RELAYER_SQLITE_FILE,
  importLegacyFiles,
  setAsideLegacyRelayerFile,
  type UpgradeReport,
} from "./legacyFiles";
export { SharedConcurrencyCap, SharedTokenBuckets } from "./sharedLimits";
export { databaseUnavailable, isConnectionError } from "./errors";
export type { Schema } from "./schema";

/** Opens the engine and brings its schema up to date; closes it again if that fails. */
export async function openDataLayer(opts: DataLayerOptions): Promise<DataLayer> {
  const layer = openEngine(opts);
  try {
    await migrate(layer);
  } catch (e) {
    await layer.close();
    throw e;
  }
  return layer;
}
