/**
 * A key's scopes read off a registry (old or new), as plain values. In a module of its own because the
 * planner (which copies keys) and the verifier (which compares them) both need it; the planner importing
 * it from the verifier, which imports the plan's type, was an import cycle.
 */
/** A key's scopes as plain values (the same rebuilding from masks in both registries: compare as is). */
export function scopesOf(s: {
  canCreateGroups: boolean;
  canDeleteGroups: boolean;
  canCreatePkps: boolean;
  manageIpfsIdsInGroups: bigint[];
  addPkpToGroups: bigint[];
  removePkpFromGroups: bigint[];
  executeInGroups: bigint[];
}) {
  return {
    canCreateGroups: s.canCreateGroups,
    canDeleteGroups: s.canDeleteGroups,
    canCreatePkps: s.canCreatePkps,
    manageIpfsIdsInGroups: [...s.manageIpfsIdsInGroups],
    addPkpToGroups: [...s.addPkpToGroups],
    removePkpFromGroups: [...s.removePkpFromGroups],
    executeInGroups: [...s.executeInGroups],
  };
}
