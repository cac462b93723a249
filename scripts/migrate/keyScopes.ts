/**
 * A key's scopes read off a registry (old or new), as plain values. In a module of its own because the
 * planner (which copies keys) and the verifier (which compares them) both need it; the planner importing
 * it from the verifier, which imports the plan's type, was an import cycle.
 */
import { SCOPES, type ScopeStruct } from "../../vocabulary/scopes";

/** A key's scopes as plain values (the same rebuilding from masks in both registries: compare as is). */
export function scopesOf(s: ScopeStruct<bigint>): ScopeStruct<bigint> {
  const from = s as Record<string, boolean | bigint[]>;
  return Object.fromEntries(
    SCOPES.map((w) => [w.struct, w.perGroup ? [...(from[w.struct] as bigint[])] : from[w.struct]]),
  ) as ScopeStruct<bigint>;
}
