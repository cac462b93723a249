/**
 * Tells the webhook event scanner of the new registry where its news starts: after the migration's replay.
 * The replayed writes (accounts, PKPs, groups, keys) describe state that existed before the migration, so
 * announcing them would send every subscriber one false `group.created`, `key.added`, … per write, each with
 * a new event id. The scanner's cursors are keyed by chain and registry (relayer/webhooks/chainCursor.ts):
 * this writes the new registry's cursor, in the database `npm start` keeps its webhooks in (the ledger's:
 * `<data dir>/ledger.sqlite`, or PostgreSQL with SIGIL_DATABASE_URL), before deployment.json names the new
 * registry, so the service never scans it without one.
 */
import * as path from "node:path";
import { openDataLayer } from "../../relayer/db";
import { startChainCursorAfter } from "../../relayer/webhooks/chainCursor";
import { WebhookStore } from "../../relayer/webhooks/store";
import { DATA_FILES } from "../start/service";

export async function startWebhookEventsAfterReplay(o: {
  dataDir: string;
  databaseUrl: string | undefined;
  chainId: number;
  registry: string;
  throughBlock: number;
}): Promise<number> {
  const db = await openDataLayer({
    databaseUrl: o.databaseUrl,
    sqlitePath: path.join(o.dataDir, DATA_FILES.ledger),
  });
  try {
    return await startChainCursorAfter(new WebhookStore(db), o);
  } finally {
    await db.close();
  }
}
