/**
 * The migration's record in the data folder (`<data dir>/migration.json`, mode 0600): which old registry is
 * being moved onto which new one, and the library's resumable state. It is written before the first write
 * to the new registry, so an interrupted `npm run migrate:registry` finds the half-done registry again
 * instead of deploying a second one. It holds the temporary owners' private keys (each owns a wallet-owned
 * account until its real owner calls acceptOwnership), hence the file mode; it is kept after the migration
 * for support and for a re-run.
 */
import * as fs from "node:fs";
import { emptyState, type MigrationState } from "./migrate";

export const MIGRATION_FILE = "migration.json";

export interface MigrationRecord {
  from_registry: string;
  from_deploy_block: number;
  to_registry: string;
  /** The new registry's deployment block: its events (the relayer's index) start there. */
  to_deploy_block: number;
  forwarder: string;
  chain_id: number;
  started_at: string;
  /** The head once every account was copied and checked: the new registry's webhook events start after it. */
  replay_end_block?: number;
  finished_at?: string;
  state: MigrationState;
}

export function readRecord(file: string): MigrationRecord | undefined {
  if (!fs.existsSync(file)) return undefined;
  const record = JSON.parse(fs.readFileSync(file, "utf8")) as MigrationRecord;
  record.state = { ...emptyState(), ...record.state };
  return record;
}

/** Write-then-rename, so a crash never leaves a half-written record (the state would be lost). */
export function writeRecord(file: string, record: MigrationRecord): void {
  fs.writeFileSync(`${file}.tmp`, JSON.stringify(record, null, 2) + "\n", { mode: 0o600 });
  fs.renameSync(`${file}.tmp`, file);
}
