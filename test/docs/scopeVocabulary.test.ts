import { expect } from "chai";
import { readFileSync } from "node:fs";
import path from "node:path";
import { Interface } from "ethers";
import { registryInterface, Scope, SCOPE_NAMES as RELAYER_SCOPE_NAMES } from "../../relayer/chain/abi";
import { scopesFromStruct } from "../../relayer/permissions/projection";
import { toKeyScopes } from "../../scripts/safe/lib/registryCalls";
import {
  FLAG_SCOPES,
  GROUP_SCOPES,
  GROUP_SCOPES_FOR_PEOPLE,
  KEY_SCOPES_TUPLE,
  listedScopes,
  SCOPE_NAMES,
  SCOPES,
  structArgs,
} from "../../vocabulary/scopes";

/**
 * The one scope vocabulary (vocabulary/scopes.ts) against what it names: the registry's KeyScopes struct
 * and Scope enum (contracts/interfaces/IAccountRegistry.sol), and the layers that read it.
 */
const REPO = path.resolve(__dirname, "../..");

describe("scope vocabulary", () => {
  it("lists the registry's KeyScopes struct fields, in order, with their types", () => {
    const scopes = registryInterface.getFunction("addKey")!.inputs.find((p) => p.name === "scopes")!;
    expect(scopes.components!.map((c) => [c.name, c.type])).to.deep.equal(
      SCOPES.map((s) => [s.struct, s.perGroup ? "uint64[]" : "bool"]),
    );
    const human = new Interface([
      `function addKey(address key, bytes32 keyHash, string name, string description, uint64 expiration, ${KEY_SCOPES_TUPLE})`,
    ]);
    expect(human.getFunction("addKey")!.selector).to.equal(registryInterface.getFunction("addKey")!.selector);
  });

  it("gives each scope the registry's Scope enum value, in the enum's order in the Solidity source", () => {
    const sol = readFileSync(path.join(REPO, "contracts", "interfaces", "IAccountRegistry.sol"), "utf8");
    const members = /enum Scope \{([^}]*)\}/
      .exec(sol)![1]
      .split(",")
      .map((m) => m.trim());
    expect(members).to.deep.equal(Object.keys(Scope));
    expect([...SCOPES.map((s) => s.index)].sort()).to.deep.equal([0, 1, 2, 3, 4, 5, 6]);
    expect(RELAYER_SCOPE_NAMES).to.deep.equal(SCOPE_NAMES);
    expect(SCOPE_NAMES[Scope.ManageActions]).to.equal("group:manageActions");
    expect(SCOPE_NAMES[Scope.CreatePkp]).to.equal("pkp:create");
  });

  it("splits into three flags and four per-group lists, and names each way once", () => {
    expect(FLAG_SCOPES.map((s) => s.field)).to.deep.equal([
      "can_create_groups",
      "can_delete_groups",
      "can_create_pkps",
    ]);
    expect(GROUP_SCOPES).to.have.length(4);
    expect(GROUP_SCOPES_FOR_PEOPLE.map((s) => s.label)).to.deep.equal([
      "execute",
      "manage actions",
      "add PKPs",
      "remove PKPs",
    ]);
    for (const key of ["struct", "field", "listed", "name", "label"] as const)
      expect(new Set(SCOPES.map((s) => s[key])).size, key).to.equal(7);
    for (const s of GROUP_SCOPES) expect(s.listed).to.equal(`can_${s.field}`);
  });

  it("the relayer, the Safe scripts and the listing agree through it", () => {
    const struct = toKeyScopes({
      can_create_pkps: true,
      manage_ipfs_ids_in_groups: [3],
      execute_in_groups: [0],
    });
    expect(structArgs(scopesFromStruct(struct as never))).to.deep.equal([
      false,
      false,
      true,
      [3],
      [],
      [],
      [0],
    ]);
    expect(Object.keys(listedScopes(scopesFromStruct(struct as never)))).to.deep.equal(
      SCOPES.map((s) => s.listed),
    );
  });

  it("docs/api.md names every request field and every listed field", () => {
    const api = readFileSync(path.join(REPO, "docs", "api.md"), "utf8");
    for (const s of SCOPES) {
      expect(api, s.field).to.contain(s.field);
      expect(api, s.listed).to.contain(s.listed);
    }
  });
});
