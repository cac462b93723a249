/**
 * A usage key's permissions as the page edits them, and their one-line summary. Group lists use the
 * API's convention: 0 is the wildcard "all groups" (present or not, never mixed with ids in the UI).
 */
import { FLAG_SCOPES, GROUP_SCOPES_FOR_PEOPLE } from "../../vocabulary/scopes";

export const ALL_GROUPS = 0;

/** The scopes' field names and labels come from the one scope vocabulary (vocabulary/scopes.ts). */
export const GROUP_SCOPES = GROUP_SCOPES_FOR_PEOPLE;
export const FLAGS = FLAG_SCOPES;

export type GroupField = (typeof GROUP_SCOPES)[number]["field"];
export type FlagField = (typeof FLAGS)[number]["field"];

export interface Scopes {
  flags: Record<FlagField, boolean>;
  groups: Record<GroupField, number[]>;
}

export function emptyScopes(): Scopes {
  return {
    flags: { can_create_groups: false, can_delete_groups: false, can_create_pkps: false },
    groups: {
      execute_in_groups: [],
      manage_ipfs_ids_in_groups: [],
      add_pkp_to_groups: [],
      remove_pkp_from_groups: [],
    },
  };
}

/** Group ids for people: their names where known ("demo, billing"), "group 7" for one without. */
export function groupsText(ids: number[], names?: Map<number, string>): string {
  if (ids.includes(ALL_GROUPS)) return "all groups";
  const label = (id: number) => names?.get(id) || `group ${id}`;
  if (names) return ids.map(label).join(", ");
  return ids.length === 1 ? `group ${ids[0]}` : `groups ${ids.join(", ")}`;
}

/** "execute: demo; create PKPs", or "no permissions". */
export function scopeSummary(s: Scopes, names?: Map<number, string>): string {
  const parts: string[] = [];
  for (const g of GROUP_SCOPES)
    if (s.groups[g.field].length) parts.push(`${g.label}: ${groupsText(s.groups[g.field], names)}`);
  for (const f of FLAGS) if (s.flags[f.field]) parts.push(f.label);
  return parts.length ? parts.join("; ") : "no permissions";
}

type Listed = {
  can_create_groups: boolean;
  can_delete_groups: boolean;
  can_create_pkps: boolean;
  can_execute_in_groups: number[];
  can_manage_ipfs_ids_in_groups: number[];
  can_add_pkp_to_groups: number[];
  can_remove_pkp_from_groups: number[];
};

export function scopesOf(k: Listed): Scopes {
  const s = emptyScopes();
  for (const f of FLAGS) s.flags[f.field] = k[f.field];
  for (const g of GROUP_SCOPES) s.groups[g.field] = [...k[g.listed]];
  return s;
}

/** Whether the scopes grant anything at all. */
export function grantsAnything(s: Scopes): boolean {
  return Object.values(s.flags).some(Boolean) || Object.values(s.groups).some((ids) => ids.length > 0);
}
