/**
 * The chain scanner's cursor is keyed by what it reads: the chain id and the registry's address
 * (`chain:<chain id>:<registry, lower case>`). A service pointed at another registry, on the same
 * database, therefore never continues the previous registry's position: it gets a cursor of its own.
 *
 * Where a registry's cursor starts, the first time any instance scans it (docs/webhooks.md, "The event
 * cursor"):
 * 1. a cursor written before the service first ran, by `npm run migrate:registry`: after the last block
 *    of the migration's replay, since the replayed writes describe state that existed before (nothing
 *    here is involved: it is simply the existing row);
 * 2. else the cursor of a build that kept one unkeyed cursor (name `chain`), when it can be this
 *    registry's: its position is at or after the block before this registry's deployment (the unkeyed
 *    cursor starts there and only moves forward). A database upgraded in place continues exactly where
 *    it was: nothing delivered twice, nothing skipped. An unkeyed cursor below that belongs to an earlier
 *    registry and is left alone (a build of that time, rolled back to, still finds it);
 * 3. else the deployment block: a fresh deployment announces everything from its first write on.
 */
import type { WebhookStore } from "./store";

/** The one cursor of builds that did not key it by registry. */
export const LEGACY_CHAIN_CURSOR = "chain";

export function chainCursorName(chainId: number, registry: string): string {
  return `chain:${chainId}:${registry.toLowerCase()}`;
}

export type CursorOrigin = "existing" | "unkeyed_cursor" | "deployment_block";

export interface OpenedCursor {
  name: string;
  /** The last block already scanned: the next scan starts after it. */
  position: number;
  /** Where the position came from; `existing` when the cursor was there already (another instance, a restart, a migration). */
  origin: CursorOrigin;
  /** The unkeyed cursor's position when one exists and was not taken over (it belongs to an earlier registry). */
  ignoredUnkeyed?: number;
}

/**
 * The registry's cursor, created on first use as described above. Safe with several instances at once:
 * the creation is insert-or-nothing, and every instance then reads the one row that stands.
 */
export async function openChainCursor(
  store: WebhookStore,
  o: { chainId: number; registry: string; deployBlock: number },
): Promise<OpenedCursor> {
  const name = chainCursorName(o.chainId, o.registry);
  return store.db.transaction(async (tx) => {
    const existing = await store.cursorIfAny(name, tx);
    if (existing !== undefined) return { name, position: existing, origin: "existing" as const };
    const fresh = o.deployBlock - 1;
    const unkeyed = await store.cursorIfAny(LEGACY_CHAIN_CURSOR, tx);
    const adopt = unkeyed !== undefined && unkeyed >= fresh;
    const created = await store.createCursor(tx, name, adopt ? unkeyed : fresh);
    const position = (await store.cursorIfAny(name, tx))!;
    if (!created) return { name, position, origin: "existing" as const };
    return {
      name,
      position,
      origin: adopt ? ("unkeyed_cursor" as const) : ("deployment_block" as const),
      ...(unkeyed !== undefined && !adopt ? { ignoredUnkeyed: unkeyed } : {}),
    };
  });
}

/**
 * For `npm run migrate:registry`: the new registry's events up to `throughBlock` (its replay) are not
 * news, so its cursor starts there. Forward only: a re-run of a finished migration never moves a
 * cursor the service has already advanced back over delivered blocks.
 */
export async function startChainCursorAfter(
  store: WebhookStore,
  o: { chainId: number; registry: string; throughBlock: number },
): Promise<number> {
  const name = chainCursorName(o.chainId, o.registry);
  return store.db.transaction(async (tx) => {
    await store.createCursor(tx, name, o.throughBlock);
    await store.advanceCursor(tx, name, o.throughBlock);
    return (await store.cursorIfAny(name, tx))!;
  });
}
