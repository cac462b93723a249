/**
 * Reading a group with nothing but an RPC endpoint. The registry stores a group's liveness and member
 * counts, not its name, CID strings or member list: those are in its events. This replays the account's
 * registry events (eth_getLogs, filtered by the account id topic) the way the relayer's permission cache
 * does, then checks the result against the on-chain counts, so a node that silently truncates logs is
 * caught instead of showing a partial group.
 */
import fs from "node:fs";
import path from "node:path";
import { ethers } from "ethers";
import { IAccountRegistry__factory } from "../../../typechain-types/factories/contracts/interfaces/IAccountRegistry__factory";
import { emptyAccount, replayAccount } from "../../../relayer/permissions/accountHistory";
import { SafeCliError } from "./errors";
import { decodeRegistryError } from "./registryCalls";

export interface GroupListing {
  accountId: number;
  groupId: number;
  name: string;
  description: string;
  /** PKPs in the order they were added (ids, with the PKP's name). */
  pkps: { id: string; name: string }[];
  /** Action CIDs in the order they were added. */
  actions: { cid: string; cidHash: string }[];
}

/** The registry's deployment block from the start command's deployment file, else 0 (scan from genesis). */
export function deployBlockFrom(dataDir: string): number {
  try {
    const d = JSON.parse(fs.readFileSync(path.join(dataDir, "deployment.json"), "utf8")) as {
      deployBlock?: unknown;
    };
    return Number.isSafeInteger(d.deployBlock) ? (d.deployBlock as number) : 0;
  } catch {
    return 0;
  }
}

export async function readGroup(
  provider: ethers.JsonRpcProvider,
  registry: string,
  accountId: number,
  groupId: number,
  fromBlock = 0,
): Promise<GroupListing> {
  const view = IAccountRegistry__factory.connect(registry, provider);
  const head = await provider.getBlockNumber();
  let header;
  try {
    header = await view.getGroup(accountId, groupId, { blockTag: head });
  } catch (err) {
    if (decodeRegistryError((err as { data?: string }).data)?.name === "UnknownGroup")
      throw new SafeCliError("unknown_group", `account ${accountId} has no live group ${groupId}`, {
        accountId,
        groupId,
      });
    throw err;
  }
  const acc = await replayAccount(provider, registry, emptyAccount(accountId), fromBlock, head);
  const group = acc.groups.get(groupId);
  if (
    !group ||
    BigInt(group.pkps.size) !== header.pkpCount ||
    BigInt(group.actions.size) !== header.actionCount
  )
    throw new SafeCliError(
      "incomplete_logs",
      `the node's logs for account ${accountId} are incomplete (the registry counts ${header.pkpCount} PKPs and ` +
        `${header.actionCount} actions in group ${groupId}); check --from-block and the node's log retention`,
      { accountId, groupId, fromBlock },
    );
  return {
    accountId,
    groupId,
    name: group.name,
    description: group.description,
    pkps: [...group.pkps].map((id) => ({ id, name: acc.pkps.get(id)?.name ?? "" })),
    actions: [...group.actions].map(([cidHash, cid]) => ({ cid, cidHash })),
  };
}
