"use strict";
/**
 * Rule evaluation: one policy against one operation, and the policies of every group that grants a
 * run (docs/policies.md, "Semantics").
 *
 * - A rule matches an operation when its operation kind is the operation's and every condition it
 *   states holds.
 * - Inside one policy, deny wins: a matching deny rule refuses, whatever allow rules say. Otherwise a
 *   matching allow rule allows. An operation no allow rule matches is refused (default deny), so a
 *   policy with no rule for an operation kind refuses that kind.
 * - Several groups that grant the same run are independent grants: the operation is allowed when one
 *   granting group allows it, and a granting group with no policy allows everything.
 *
 * Every decision names the rule that decided it and, for a refusal, the value that failed.
 *
 * Plain JavaScript (types in evaluate.d.ts) because it is the one engine of both sides that enforce
 * policies: the enclave's policy gate, and the action worker's trusted side (worker/run-key.js), which
 * checks the run's own PKP's signatures itself when every applicable policy is stateless.
 */
const { getAddress } = require("ethers");

const DEFAULT_DENY = "(default deny)";
const NO_POLICY = "(no policy)";

const MATCH = Object.freeze({ ok: true });
function miss(field, value, reason) {
  return { ok: false, field, value, reason };
}

function norm(a) {
  return getAddress(a);
}

function inSet(set, address) {
  const a = address.toLowerCase();
  if ("in" in set) return set.in.some((x) => x.toLowerCase() === a);
  return !set.notIn.some((x) => x.toLowerCase() === a);
}

function setText(set) {
  return "in" in set ? `not in the allowed list` : `in the excluded list`;
}

function inRange(range, v) {
  if (range.max !== undefined && v > BigInt(range.max)) return miss("", v.toString(), `above ${range.max}`);
  if (range.min !== undefined && v < BigInt(range.min)) return miss("", v.toString(), `below ${range.min}`);
  return null;
}

function withField(m, field, what) {
  if (m === null || m.ok) return m;
  return miss(field, m.value, `${what} ${m.value} is ${m.reason}`);
}

const DAY_NAMES = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];

/**
 * The instant a decision is made at, read from the clock at most once and only if a rule has a `time`
 * condition: most policies have none, and a Date costs more than their whole evaluation in the action
 * worker (SES tames the constructor). `now` given: that instant.
 */
function instant(now) {
  if (now !== undefined) return () => now;
  let at = null;
  return () => (at ??= new Date());
}

function checkTime(t, now) {
  const day = now.getUTCDay();
  if (t.days !== undefined && !t.days.includes(day))
    return miss("time.days", DAY_NAMES[day], `${DAY_NAMES[day]} (UTC) is not an allowed day`);
  if (t.hours !== undefined) {
    const h = now.getUTCHours();
    const { from, to } = t.hours;
    const inside = from < to ? h >= from && h < to : h >= from || h < to;
    if (!inside)
      return miss("time.hours", String(h), `${h}:00 UTC is outside the hours ${from}:00-${to}:00 UTC`);
  }
  return null;
}

function checkTransaction(r, op) {
  const creation = op.to === null;
  if (creation !== (r.contractCreation === true))
    return creation
      ? miss("contractCreation", "creation", "the transaction creates a contract")
      : miss("contractCreation", op.to, "the rule is about contract creations only");
  if (r.chainIds !== undefined && !r.chainIds.some((c) => BigInt(c) === op.chainId))
    return miss("chainIds", op.chainId.toString(), `chain ${op.chainId} is not an allowed chain`);
  if (r.to !== undefined && op.to !== null && !inSet(r.to, op.to))
    return miss("to", op.to, `recipient ${op.to} is ${setText(r.to)}`);
  const v = r.value === undefined ? null : withField(inRange(r.value, op.value), "value", "value");
  if (v !== null) return v;
  if (r.selectors !== undefined && !r.selectors.some((s) => s.toLowerCase() === op.selector))
    return miss("selectors", op.selector, `function selector ${op.selector} is not an allowed one`);
  if (r.erc20 !== undefined) {
    const e = r.erc20;
    if (op.to === null || op.to !== norm(e.token))
      return miss("erc20.token", op.to ?? "creation", `the transaction is not a call to token ${e.token}`);
    if (op.erc20 === null)
      return miss("erc20.method", op.selector, "the call is not an ERC-20 transfer, approve or transferFrom");
    if (e.methods !== undefined && !e.methods.includes(op.erc20.method))
      return miss("erc20.method", op.erc20.method, `${op.erc20.method} is not an allowed ERC-20 call`);
    if (e.recipients !== undefined && !inSet(e.recipients, op.erc20.recipient))
      return miss(
        "erc20.recipients",
        op.erc20.recipient,
        `token recipient ${op.erc20.recipient} is ${setText(e.recipients)}`,
      );
    const a =
      e.amount === undefined ? null : withField(inRange(e.amount, op.erc20.amount), "erc20.amount", "amount");
    if (a !== null) return a;
  }
  return MATCH;
}

function permitMatches(p, g) {
  if (g.token !== norm(p.token))
    return miss("permit.token", g.token, `the permit is for token ${g.token}, not ${p.token}`);
  if (p.spenders !== undefined && !inSet(p.spenders, g.spender))
    return miss("permit.spenders", g.spender, `spender ${g.spender} is ${setText(p.spenders)}`);
  const a = p.amount === undefined ? null : withField(inRange(p.amount, g.amount), "permit.amount", "amount");
  return a ?? MATCH;
}

/**
 * Permit conditions read every allowance a message grants: an allow rule matches when every allowance
 * passes (a batch with one excessive entry is not allowed), a deny rule when any does.
 */
function checkTypedData(r, op) {
  const d = r.domain;
  if (d?.chainIds !== undefined && (op.chainId === null || !d.chainIds.some((c) => BigInt(c) === op.chainId)))
    return miss(
      "domain.chainIds",
      String(op.chainId ?? "none"),
      `domain chain ${op.chainId ?? "(none)"} is not allowed`,
    );
  if (d?.verifyingContracts !== undefined) {
    const vc = op.verifyingContract;
    if (vc === null || !inSet(d.verifyingContracts, vc))
      return miss(
        "domain.verifyingContracts",
        vc ?? "none",
        `verifying contract ${vc ?? "(none)"} is not allowed`,
      );
  }
  if (d?.names !== undefined && (op.name === null || !d.names.includes(op.name)))
    return miss("domain.names", op.name ?? "none", `domain name ${JSON.stringify(op.name)} is not allowed`);
  if (r.primaryTypes !== undefined && !r.primaryTypes.includes(op.primaryType))
    return miss("primaryTypes", op.primaryType, `primary type ${op.primaryType} is not allowed`);
  if (r.permit !== undefined) {
    if (op.permits.length === 0)
      return miss("permit", op.primaryType, `${op.primaryType} is not a Permit or Permit2 message`);
    const results = op.permits.map((g) => permitMatches(r.permit, g));
    if (r.effect === "allow") return results.find((m) => !m.ok) ?? MATCH;
    return results.find((m) => m.ok) ?? results[0];
  }
  return MATCH;
}

/**
 * Solana conditions of an ed25519 rule. An allow rule matches a transaction message every program of
 * which is listed and whose System transfers move at most maxLamports; a deny rule, one that calls any
 * listed program or moves more. Either way, bytes that are not a Solana transaction message do not match
 * a rule with Solana conditions (a raw signature never passes for a checked transaction).
 */
function checkSolana(r, op) {
  const s = r.solana;
  if (s === undefined) return MATCH;
  if (op.solana === null)
    return miss(
      "solana",
      "not a transaction",
      "the message is not a Solana transaction message (legacy or v0)",
    );
  const deny = r.effect === "deny";
  if (s.programIds !== undefined) {
    const m = listedItems("solana.programIds", op.solana.programIds, (p) => s.programIds.includes(p), deny, {
      noneListed: "no listed program is called",
      value: (p) => p,
      unlisted: (p) => `program ${p} is not an allowed program`,
    });
    if (!m.ok) return m;
  }
  if (s.maxLamports === undefined) return MATCH;
  return amountWithin(
    "solana.maxLamports",
    op.solana.lamports,
    s.maxLamports,
    deny,
    (amount) => `System transfers of ${amount} lamports`,
  );
}

/**
 * A listed-set condition on the items of an operation (a Solana message's programs, a Taproot
 * transaction's outputs): an allow rule matches when every item is listed, a deny rule when any is.
 * `texts` words the miss: `noneListed` for a deny rule, `value(item)` and `unlisted(item)` for the
 * first unlisted item of an allow rule.
 */
function listedItems(field, items, listed, deny, texts) {
  if (deny) return items.some(listed) ? MATCH : miss(field, "", texts.noneListed);
  const bad = items.find((item) => !listed(item));
  return bad === undefined ? MATCH : miss(field, texts.value(bad), texts.unlisted(bad));
}

/**
 * A maximum amount of a rule: an allow rule matches an amount at most `max`, a deny rule one above it.
 * `what(amount)` names the amount in the miss's message.
 */
function amountWithin(field, amount, max, deny, what) {
  const above = amount > BigInt(max);
  if (above === deny) return MATCH;
  return miss(field, amount.toString(), `${what(amount)} are ${deny ? "not above" : "above"} ${max}`);
}

/**
 * Bitcoin conditions of a schnorr rule, read from a Taproot PSBT input's transaction (outputs that pay
 * the PKP's own script, change, are not counted). An allow rule matches when every output pays a listed
 * script and their total is at most maxAmount; a deny rule when any output pays a listed script or the
 * total is more. A raw digest matches no rule with Bitcoin conditions.
 */
function checkBitcoin(r, op) {
  const b = r.bitcoin;
  if (b === undefined) return MATCH;
  if (op.bitcoin === null)
    return miss("bitcoin", op.digest, "a raw digest is not a Taproot input the rule can read");
  const deny = r.effect === "deny";
  if (b.outputScripts !== undefined) {
    const listed = (o) => b.outputScripts.some((x) => x.toLowerCase() === o.script);
    const m = listedItems("bitcoin.outputScripts", op.bitcoin.outputs, listed, deny, {
      noneListed: "no output pays a listed script",
      value: (o) => o.script,
      unlisted: (o) => `output script ${o.script} is not an allowed one`,
    });
    if (!m.ok) return m;
  }
  if (b.maxAmount === undefined) return MATCH;
  return amountWithin(
    "bitcoin.maxAmount",
    op.bitcoin.amount,
    b.maxAmount,
    deny,
    (amount) => `outputs of ${amount} sat`,
  );
}

/**
 * What evaluation derives from a document alone, kept per document when the document is frozen (a
 * shared, content-addressed copy: freeze.js): its deny and allow rules of each operation kind, and each
 * message prefix as bytes. A document that is not frozen may still change, so it is read afresh.
 */
const derived = new WeakMap();
const NO_RULES = Object.freeze({ deny: Object.freeze([]), allow: Object.freeze([]) });

function sortRules(rules, kind) {
  const deny = [];
  const allow = [];
  for (const r of rules) {
    if (r.operation !== kind) continue;
    if (r.effect === "deny") deny.push(r);
    else if (r.effect === "allow") allow.push(r);
  }
  return { deny, allow };
}

function rulesOf(policy, kind) {
  if (!Object.isFrozen(policy) || !Object.isFrozen(policy.rules)) return sortRules(policy.rules, kind);
  let byKind = derived.get(policy);
  if (byKind === undefined) {
    byKind = new Map();
    for (const r of policy.rules)
      if (!byKind.has(r.operation)) byKind.set(r.operation, sortRules(policy.rules, r.operation));
    derived.set(policy, byKind);
  }
  return byKind.get(kind) ?? NO_RULES;
}

const prefixBytes = new WeakMap();

function prefixOf(r) {
  if (!Object.isFrozen(r)) return Buffer.from(r.prefix, "utf8");
  let bytes = prefixBytes.get(r);
  if (bytes === undefined) {
    bytes = Buffer.from(r.prefix, "utf8");
    prefixBytes.set(r, bytes);
  }
  return bytes;
}

function startsWith(bytes, prefix) {
  if (prefix.length > bytes.length) return false;
  for (let i = 0; i < prefix.length; i++) if (bytes[i] !== prefix[i]) return false;
  return true;
}

/** Whether one rule matches the operation (its kind is assumed to be the operation's). */
function ruleMatches(r, op, now) {
  return matches(r, op, () => now, false);
}

/**
 * A miss that is not worded: what `matches` answers, when `quiet`, for the conditions the common
 * operations meet (time, message prefix), where only whether the rule matches is read (a deny rule
 * that does not match; an allow rule when another allows). Wording a miss builds its text per call.
 */
const QUIET_MISS = Object.freeze({ ok: false });

/** ruleMatches with the decision's clock (instant), and without wording a miss when `quiet`. */
function matches(r, op, clock, quiet) {
  if (r.time !== undefined) {
    const t = checkTime(r.time, clock());
    if (t !== null) return quiet ? QUIET_MISS : t;
  }
  switch (op.kind) {
    case "transaction":
      return checkTransaction(r, op);
    case "typedData":
      return checkTypedData(r, op);
    case "message":
      if (r.prefix !== undefined && !startsWith(op.bytes, prefixOf(r)))
        return quiet
          ? QUIET_MISS
          : miss("prefix", preview(op.bytes), `the message does not start with ${JSON.stringify(r.prefix)}`);
      return MATCH;
    case "ed25519":
      return checkSolana(r, op);
    case "schnorr":
      return checkBitcoin(r, op);
    default:
      return MATCH;
  }
}

function preview(bytes) {
  const text = Buffer.from(bytes.subarray(0, 32)).toString("utf8");
  return bytes.length > 32 ? text + "…" : text;
}

function base(op) {
  return "digest" in op ? { operation: op.kind, digest: op.digest } : { operation: op.kind };
}

/**
 * Why an allowed operation was allowed: by rule `rule`, or because group `group` has no policy. One
 * place for both sides: a decision the worker made travels as what names it and is rebuilt on the main
 * thread (allowedDecision).
 */
function allowedReason(rule, group) {
  return rule === NO_POLICY ? `group ${group} has no policy` : `allowed by rule "${rule}"`;
}

/**
 * The decision evaluateGrants gives when group `group`'s rule `rule` (or NO_POLICY) allowed an
 * operation of kind `operation` over `digest` (undefined: one without a digest).
 */
function allowedDecision(rule, group, operation, digest) {
  const reason = allowedReason(rule, group);
  return digest === undefined
    ? { allowed: true, rule, operation, reason, group }
    : { allowed: true, rule, operation, digest, reason, group };
}

/**
 * The name of the rule of `policy` that allows the operation, or null when the policy refuses it: the
 * decision of evaluatePolicy without its wording (deny rules first, then the first allow rule that
 * matches). What an allowed operation needs, and the common case, so nothing is worded here.
 */
function allowingRule(policy, op, clock) {
  const { deny, allow } = rulesOf(policy, op.kind);
  for (const r of deny) if (matches(r, op, clock, true).ok) return null;
  for (const r of allow) if (matches(r, op, clock, true).ok) return r.name;
  return null;
}

/** One policy's decision on one operation. */
function evaluatePolicy(policy, op, now) {
  return decidePolicy(policy, op, instant(now));
}

function decidePolicy(policy, op, clock) {
  const { deny, allow } = rulesOf(policy, op.kind);
  for (const r of deny) {
    if (matches(r, op, clock, true).ok)
      return { allowed: false, rule: r.name, ...base(op), reason: `denied by rule "${r.name}"` };
  }
  let firstMiss = null;
  for (const r of allow) {
    // Only the first miss is reported: the others need not be worded.
    const m = matches(r, op, clock, firstMiss !== null);
    if (m.ok) return { allowed: true, rule: r.name, ...base(op), reason: allowedReason(r.name) };
    firstMiss ??= { rule: r.name, m };
  }
  if (firstMiss !== null) {
    const { rule, m } = firstMiss;
    return { allowed: false, rule, ...base(op), field: m.field, value: m.value, reason: m.reason };
  }
  return {
    allowed: false,
    rule: DEFAULT_DENY,
    ...base(op),
    reason: `the policy has no rule allowing ${op.kind}`,
  };
}

/**
 * Which grant allows the operation: `{group, rule}` (rule NO_POLICY for a group without a policy), or
 * null when none does. evaluateGrants' decision without its wording: what the action worker's trusted
 * side needs (worker/run-key.js; a refusal goes to the gate, which words it).
 * `now`: the instant to decide at; omitted, the clock is read only if a rule has a `time` condition.
 */
function allowingGrant(grants, op, now) {
  const clock = instant(now);
  for (const g of grants) {
    if (g.policy === null) return { group: g.group, rule: NO_POLICY };
    const rule = allowingRule(g.policy, op, clock);
    if (rule !== null) return { group: g.group, rule };
  }
  return null;
}

/**
 * The decision for a run granted by `grants`: allowed when one granting group allows it (a group with
 * no policy allows everything). A refusal reports the first group's refusal, and names that group.
 * With no granting group at all nothing grants the operation: refused.
 * `now`: as allowingGrant's.
 */
function evaluateGrants(grants, op, now) {
  const clock = instant(now);
  let firstRefusal = null;
  for (const g of grants) {
    if (g.policy === null) return allowedDecision(NO_POLICY, g.group, op.kind, op.digest);
    const d = decidePolicy(g.policy, op, clock);
    if (d.allowed) return { ...d, group: g.group };
    firstRefusal ??= { ...d, group: g.group };
  }
  return (
    firstRefusal ?? {
      allowed: false,
      rule: DEFAULT_DENY,
      ...base(op),
      reason: "no group grants this operation",
    }
  );
}

/** The message of a `policy_denied` error: the rule, the group and the value that failed. */
function refusalMessage(d) {
  const where = d.group === undefined ? "" : ` (group ${d.group})`;
  const failed = d.field === undefined ? "" : `; ${d.field} = ${d.value}`;
  return `policy refused ${d.operation}: rule ${d.rule}${where}: ${d.reason}${failed}`;
}

module.exports = {
  DEFAULT_DENY,
  NO_POLICY,
  ruleMatches,
  evaluatePolicy,
  evaluateGrants,
  allowingGrant,
  allowedDecision,
  refusalMessage,
};
