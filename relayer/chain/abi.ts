/** ABIs of the registry and the forwarder (from the TypeChain output of `hardhat compile`). */
import { Interface } from "ethers";
import { IAccountRegistry__factory } from "../../typechain-types/factories/contracts/interfaces/IAccountRegistry__factory";
import { ERC2771Forwarder__factory } from "../../typechain-types/factories/@openzeppelin/contracts/metatx/ERC2771Forwarder__factory";

export const registryInterface: Interface = new Interface(IAccountRegistry__factory.abi);
export const forwarderInterface: Interface = new Interface(ERC2771Forwarder__factory.abi);

/** Scope enum of IAccountRegistry, by index, with the names of SPEC 2.4. */
export const SCOPE_NAMES = [
  "pkp:create",
  "group:create",
  "group:delete",
  "execute",
  "group:manageActions",
  "group:addPkp",
  "group:removePkp",
] as const;
export type ScopeName = (typeof SCOPE_NAMES)[number];
export const Scope = {
  CreatePkp: 0,
  CreateGroup: 1,
  DeleteGroup: 2,
  Execute: 3,
  ManageActions: 4,
  AddPkp: 5,
  RemovePkp: 6,
} as const;
