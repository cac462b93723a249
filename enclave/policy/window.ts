/**
 * Windows (docs/policies.md, "Windows"): an allow rule may bound how many signatures, and what total
 * value, it allows per PKP over a rolling period. The engine only says what an allowed operation
 * would use of which window (a claim); the counters themselves live in the relayer's database, shared
 * by every instance, and are taken there before the signature exists (relayer/policyWindows.ts).
 *
 * This module is the arithmetic, in one place: what a claim is (which counter, which amount) and
 * whether a window with the given live uses admits one more. The PostgreSQL store states the same
 * test in SQL (one conditional statement); the tests hold both to this function.
 */
import type { OperationFacts } from "./operation";
import type { PolicyDecision, GroupPolicy } from "./evaluate";
import type { PolicyRule, PolicyWindow } from "./schema";

/** Signatures a window counts at most in one period, whatever it states (and when it states no count). */
export const MAX_WINDOW_COUNT = 10_000;

/** The longest period a window may state, in seconds (366 days). */
export const MAX_WINDOW_SECONDS = 366 * 24 * 3600;

/** What one allowed operation uses of one window. */
export interface WindowClaim {
  /** The counter: PKP, group, rule, chain and token (one counter per chain and per token). */
  key: string;
  rule: string;
  group: string;
  periodMs: number;
  maxCount: number;
  /** null: the window bounds the count only. */
  maxValue: bigint | null;
  /** What this operation adds to the total (0 when the rule counts no value). */
  amount: bigint;
  /** What the amount is in, for people: "wei on chain 1", "token 0x… on chain 1". */
  unit: string;
}

/** One use a window holds: its reservation id, when it was taken (ms) and its amount. */
export interface WindowUse {
  id: string;
  atMs: number;
  amount: bigint;
}

/** Why a window refuses one more use: the bound that would be exceeded and the value it would reach. */
export interface WindowExcess {
  field: "window.maxCount" | "window.maxValue";
  /** The count or total the operation would bring the window to. */
  value: string;
  reason: string;
}

/** The uses still inside the period at `nowMs` (a use taken exactly `periodMs` ago has left it). */
export function liveUses(uses: readonly WindowUse[], nowMs: number, periodMs: number): WindowUse[] {
  return uses.filter((u) => u.atMs > nowMs - periodMs);
}

/** Null when the window admits the claim given its uses at `nowMs`, else the bound it would exceed. */
export function windowExcess(
  claim: Pick<WindowClaim, "periodMs" | "maxCount" | "maxValue" | "amount" | "unit" | "rule">,
  uses: readonly WindowUse[],
  nowMs: number,
): WindowExcess | null {
  const live = liveUses(uses, nowMs, claim.periodMs);
  const seconds = claim.periodMs / 1000;
  if (live.length + 1 > claim.maxCount)
    return {
      field: "window.maxCount",
      value: String(live.length + 1),
      reason: `signature ${live.length + 1} in ${seconds} s is above the window's ${claim.maxCount}`,
    };
  if (claim.maxValue !== null) {
    const total = live.reduce((t, u) => t + u.amount, 0n) + claim.amount;
    if (total > claim.maxValue)
      return {
        field: "window.maxValue",
        value: total.toString(),
        reason: `a total of ${total} (${claim.unit}) in ${seconds} s is above the window's ${claim.maxValue}`,
      };
  }
  return null;
}

function counted(r: PolicyRule, op: OperationFacts): { chain: string; token: string; amount: bigint } {
  switch (op.kind) {
    case "transaction":
      // A rule about one token counts that token's amounts; any other transaction rule counts wei.
      if (r.erc20 !== undefined && op.erc20 !== null)
        return { chain: op.chainId.toString(), token: op.to!.toLowerCase(), amount: op.erc20.amount };
      return { chain: op.chainId.toString(), token: "native", amount: op.value };
    case "typedData":
      if (r.permit !== undefined && op.permits.length > 0)
        return {
          chain: op.chainId === null ? "none" : op.chainId.toString(),
          token: r.permit.token.toLowerCase(),
          amount: op.permits.reduce((t, p) => t + p.amount, 0n),
        };
      return { chain: op.chainId === null ? "none" : op.chainId.toString(), token: "none", amount: 0n };
    default:
      return { chain: "any", token: "none", amount: 0n };
  }
}

function unitOf(token: string, chain: string): string {
  if (token === "native") return `wei on chain ${chain}`;
  return `token ${token} on chain ${chain}`;
}

/** The window a rule states, with the count bound filled in. */
export function windowBounds(w: PolicyWindow): {
  periodMs: number;
  maxCount: number;
  maxValue: bigint | null;
} {
  return {
    periodMs: w.seconds * 1000,
    maxCount: Math.min(w.maxCount ?? MAX_WINDOW_COUNT, MAX_WINDOW_COUNT),
    maxValue: w.maxValue === undefined ? null : BigInt(w.maxValue),
  };
}

/**
 * The window claim of an allowed decision: the window of the rule that allowed it, counted for this
 * PKP; null when that rule states no window (or no policy decided).
 */
export function windowClaim(
  grants: readonly GroupPolicy[],
  decision: PolicyDecision,
  op: OperationFacts,
  pkpId: string,
): WindowClaim | null {
  if (!decision.allowed || decision.group === undefined) return null;
  const policy = grants.find((g) => g.group === decision.group)?.policy;
  const rule = policy?.rules.find((r) => r.name === decision.rule && r.effect === "allow");
  if (rule?.window === undefined) return null;
  const { chain, token, amount } = counted(rule, op);
  return {
    key: [pkpId.toLowerCase(), decision.group, rule.name, chain, token].join(":"),
    rule: rule.name,
    group: decision.group,
    ...windowBounds(rule.window),
    amount,
    unit: unitOf(token, chain),
  };
}

/**
 * Whether any granting policy states a window: such a run's signatures must be checked on the main
 * thread against the shared counters, never by a worker on its own.
 */
export function hasWindowRule(grants: readonly GroupPolicy[] | null): boolean {
  return grants !== null && grants.some((g) => g.policy?.rules.some((r) => r.window !== undefined) === true);
}
