/**
 * An account's former usage keys, for `GET list_api_keys?include=all` (`npx sigil keys list --all`): the
 * permission cache keeps only live keys (the registry forgets removed ones), so revoked keys are read
 * back from the registry's events, the account's KeyAdded … KeyRemoved history, replayed in chain order.
 */
import { withRetry } from "./chain/rpc";
import { accountEvents, emptyAccount, type RpcSender } from "./permissions/accountHistory";
import { applyEvent, type KeyRecord } from "./permissions/projection";

/** Keys of `accountId` that were removed up to `toBlock` (and not added again), each as it was when removed. */
export async function revokedKeys(
  rpc: RpcSender,
  registry: string,
  accountId: number,
  fromBlock: number,
  toBlock: number,
): Promise<KeyRecord[]> {
  const acc = emptyAccount(accountId);
  const revoked = new Map<string, KeyRecord>();
  const events = await accountEvents(rpc, registry, accountId, fromBlock, toBlock, {
    retry: (fn) => withRetry(fn, 1),
  });
  for (const { ev, ts } of events) {
    if (ev.name === "KeyRemoved") {
      const before = [...acc.keys.values()].find(
        (k) => k.address.toLowerCase() === String(ev.args.key).toLowerCase(),
      );
      if (before) revoked.set(before.address, { ...before, scopes: { ...before.scopes } });
    }
    applyEvent(acc, ev, ts);
    if (ev.name === "KeyAdded") {
      for (const address of acc.keys.keys()) revoked.delete(address);
    }
  }
  return [...revoked.values()];
}
