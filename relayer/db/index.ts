/**
 * The data layer: one schema, one set of migrations and one query interface over two engines
 * (SQLite by default, PostgreSQL with SIGIL_DATABASE_URL). See docs/configuration.md, "Database".
 */
import { type DataLayer, type DataLayerOptions, openEngine } from "./engine";
import { migrate } from "./migrations";

export {
  type DataLayer,
  type Sql,
  isPostgresUrl,
  openEngine,
  postgresStatementCount,
  tallyPostgresStatements,
} from "./engine";
export { MIGRATIONS, migrate, readVersion, type Migration } from "./migrations";
export { prepare } from "./prepared";
export { IdempotencyRecords, type IdempotencyRow } from "./idempotencyRecords";
export { ExpiringRows, SweepThrottle } from "./expiringRows";
export { SharedSignInNonces, type SignInNonces } from "./siweNonces";
export { REVOCATION_STALENESS_MS, sessionRevocationsFor, type SessionRevocations } from "./siweRevocations";
export { RELAYER_SQLITE_FILE, importLegacyFiles, setAsideLegacyRelayerFile } from "./legacyFiles";
export { SharedConcurrencyCap, SharedTokenBuckets } from "./sharedLimits";

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
