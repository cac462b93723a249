/**
 * The seven permissions (scopes) of a usage key, named once. Every layer spells a scope its own way: the
 * registry's `KeyScopes` struct (`manageIpfsIdsInGroups`), its `Scope` enum (index 4, "group:manageActions"
 * in refusals), the HTTP API's request field (`manage_ipfs_ids_in_groups`) and listed field
 * (`can_manage_ipfs_ids_in_groups`), and the label people read ("manage actions"). This table is the one
 * place that ties them together; the relayer, the CLI, the dashboard, the Safe, migration and gas scripts
 * import it.
 *
 * A leaf with no imports, outside every layer, so that each layer may import it without an arrow back up
 * (dashboard and CLI → SDK → relayer → enclave): the dashboard's bundler and the relayer take it alike.
 * test/docs/scopeVocabulary.test.ts checks it against the contract's ABI.
 */

/** One scope in every spelling. The table's order is the registry's `KeyScopes` struct order. */
export interface ScopeWords {
  /** The field of the registry's `KeyScopes` struct (and of the relayer's KeyScopes). */
  readonly struct: string;
  /** The field of an add/update request body (docs/api.md). */
  readonly field: string;
  /** The field of a listed key (GET /usage_keys, webhook events). */
  readonly listed: string;
  /** True for the four scopes that are lists of group ids (0 = every group); false for the three flags. */
  readonly perGroup: boolean;
  /** The registry's `Scope` enum value (contracts/interfaces/IAccountRegistry.sol). */
  readonly index: number;
  /** The scope's name in refusals and docs/background.md §2.4. */
  readonly name: string;
  /** For people: the dashboard's and the CLI's wording. */
  readonly label: string;
}

export const SCOPES = [
  {
    struct: "canCreateGroups",
    field: "can_create_groups",
    listed: "can_create_groups",
    perGroup: false,
    index: 1,
    name: "group:create",
    label: "create groups",
  },
  {
    struct: "canDeleteGroups",
    field: "can_delete_groups",
    listed: "can_delete_groups",
    perGroup: false,
    index: 2,
    name: "group:delete",
    label: "delete groups",
  },
  {
    struct: "canCreatePkps",
    field: "can_create_pkps",
    listed: "can_create_pkps",
    perGroup: false,
    index: 0,
    name: "pkp:create",
    label: "create PKPs",
  },
  {
    struct: "manageIpfsIdsInGroups",
    field: "manage_ipfs_ids_in_groups",
    listed: "can_manage_ipfs_ids_in_groups",
    perGroup: true,
    index: 4,
    name: "group:manageActions",
    label: "manage actions",
  },
  {
    struct: "addPkpToGroups",
    field: "add_pkp_to_groups",
    listed: "can_add_pkp_to_groups",
    perGroup: true,
    index: 5,
    name: "group:addPkp",
    label: "add PKPs",
  },
  {
    struct: "removePkpFromGroups",
    field: "remove_pkp_from_groups",
    listed: "can_remove_pkp_from_groups",
    perGroup: true,
    index: 6,
    name: "group:removePkp",
    label: "remove PKPs",
  },
  {
    struct: "executeInGroups",
    field: "execute_in_groups",
    listed: "can_execute_in_groups",
    perGroup: true,
    index: 3,
    name: "execute",
    label: "execute",
  },
] as const satisfies readonly ScopeWords[];

export type ScopeEntry = (typeof SCOPES)[number];
/** The three yes/no scopes, and the four lists of group ids. */
export type FlagScope = Extract<ScopeEntry, { perGroup: false }>;
export type GroupScope = Extract<ScopeEntry, { perGroup: true }>;

export const FLAG_SCOPES = SCOPES.filter((s): s is FlagScope => !s.perGroup);
export const GROUP_SCOPES = SCOPES.filter((s): s is GroupScope => s.perGroup);

/** The order people read scopes in (dashboard, CLI): execute, the common grant, first; then the rest. */
export const GROUP_SCOPES_FOR_PEOPLE = [
  ...GROUP_SCOPES.filter((s) => s.struct === "executeInGroups"),
  ...GROUP_SCOPES.filter((s) => s.struct !== "executeInGroups"),
];

/** An add/update request body's scope fields (docs/api.md), group ids of type G. */
export type ScopeBody<G> = { [S in FlagScope as S["field"]]: boolean } & {
  [S in GroupScope as S["field"]]: G[];
};

/**
 * A key's scopes with the struct's field names, group ids of type G (number in the relayer, bigint for
 * ethers' struct arguments).
 */
export type ScopeStruct<G> = { [S in FlagScope as S["struct"]]: boolean } & {
  [S in GroupScope as S["struct"]]: G[];
};

/** The scope names by the registry's `Scope` enum value ("pkp:create" is 0). */
export const SCOPE_NAMES = [...SCOPES].sort((a, b) => a.index - b.index).map((s) => s.name);

/** The struct as a Solidity tuple type, for human-readable ABIs: "(bool canCreateGroups, …) scopes". */
export const KEY_SCOPES_TUPLE = `(${SCOPES.map((s) => `${s.perGroup ? "uint64[]" : "bool"} ${s.struct}`).join(", ")}) scopes`;

/** A key's scopes with the listed fields' names (`can_manage_ipfs_ids_in_groups`, …), in struct order. */
export function listedScopes<G>(s: ScopeStruct<G>): Record<ScopeEntry["listed"], boolean | G[]> {
  return Object.fromEntries(
    SCOPES.map((w) => [w.listed, (s as Record<string, boolean | G[]>)[w.struct]]),
  ) as Record<ScopeEntry["listed"], boolean | G[]>;
}

/** The struct's fields in order: the registry's positional struct argument (addKey, updateKey, rotateKey). */
export function structArgs<G>(s: ScopeStruct<G>): Array<boolean | G[]> {
  return SCOPES.map((w) => (s as Record<string, boolean | G[]>)[w.struct]);
}
