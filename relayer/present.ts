/**
 * JSON shapes of resources, one format everywhere (reference gap 9, docs/background.md): group and account ids are JSON
 * numbers, PKP ids 0x-prefixed 32-byte lower-case hex, addresses EIP-55 checksummed, times unix seconds.
 */
import type { Enclave } from "../enclave";
import { listedScopes } from "../vocabulary/scopes";
import type { Billing } from "./billing";
import type { GroupRecord, KeyRecord, PkpRecord } from "./permissions/projection";

export async function keyItem(k: KeyRecord, billing: Billing | null) {
  const spend = billing ? await billing.keySpend(k.address) : null;
  return {
    id: k.address,
    api_key_hash: BigInt(k.keyHash) === 0n ? null : k.keyHash,
    name: k.name,
    description: k.description,
    expiration: k.expiration === 0 ? null : k.expiration,
    // Remaining spend allowance in cents (cap − spent) when billing is on and the key has a cap; else null.
    balance: spend && spend.cap_cents !== null ? Math.max(0, spend.cap_cents - spend.spent_cents) : null,
    spent_cents: spend ? spend.spent_cents : null,
    spend_cap_cents: spend ? spend.cap_cents : null,
    ...listedScopes(k.scopes),
    created_at: k.createdAt,
  };
}

export function pkpItem(p: PkpRecord, enclave: Enclave) {
  // Public forms of the PKP's Ed25519 and Schnorr keys (enclave/chainKeys.ts), cached by the enclave.
  const keys = enclave.pkpPublicKeys(p.id);
  return {
    pkp_id: p.id,
    address: enclave.pkpAddress(p.id),
    public_key: enclave.pkpPublicKey(p.id),
    solana_address: keys.ed25519.solanaAddress,
    taproot_address: keys.taproot.address,
    ed25519_public_key: keys.ed25519.publicKey,
    schnorr_public_key: keys.taproot.xOnly,
    name: p.name,
    description: p.description,
  };
}

export function groupSummary(g: GroupRecord) {
  return {
    group_id: g.id,
    name: g.name,
    description: g.description,
    pkp_count: g.pkps.size,
    action_count: g.actions.size,
    policy_cid: g.policy,
  };
}

export function groupDetail(g: GroupRecord) {
  return {
    group_id: g.id,
    name: g.name,
    description: g.description,
    pkps: [...g.pkps],
    actions: [...g.actions.values()],
    policy_cid: g.policy,
  };
}
