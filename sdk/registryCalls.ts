/**
 * The registry calls a usage key may make, as calldata: the SDK builds them itself so that what the key
 * signs is exactly what it asked for. Human-readable ABI of contracts/interfaces/IAccountRegistry.sol
 * (the same selectors; test/sdk/forward.test.ts compiles both and compares).
 */
import { Interface } from "ethers";

export const REGISTRY_WRITE_ABI = [
  "function createPkp(string name, string description) returns (bytes32 pkpId)",
  "function createGroup(string name, string description, bytes32[] pkpIds, string[] cids) returns (uint64 groupId)",
  "function deleteGroup(uint64 groupId)",
  "function addActions(uint64 groupId, string[] cids)",
  "function removeActions(uint64 groupId, string[] cids)",
  "function addPkps(uint64 groupId, bytes32[] pkpIds)",
  "function removePkps(uint64 groupId, bytes32[] pkpIds)",
  "function setGroupPolicy(uint64 groupId, string cid)",
] as const;

export const registryWrites = new Interface(REGISTRY_WRITE_ABI);
