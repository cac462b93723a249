/**
 * Who may rotate (relayer/policy.ts, requireRotator), for generated callers: only the account key of an
 * API-mode account; a usage key never, whatever its scopes (it holds the key it would rotate, so "itself"
 * included); the account key of a ChainSecured account gets 409 account_chain_secured.
 */
import { expect } from "chai";
import fc from "fast-check";
import { Wallet } from "ethers";
import { emptyAccount } from "../../relayer/permissions/accountHistory";
import type { KeyRecord } from "../../relayer/permissions/projection";
import { ApiError } from "../../relayer/errors";
import { requireRotator, type Caller } from "../../relayer/policy";

const idsArb = fc.array(fc.integer({ min: 0, max: 4 }), { maxLength: 4 });
const keyArb = fc.record({
  canCreateGroups: fc.boolean(),
  canDeleteGroups: fc.boolean(),
  canCreatePkps: fc.boolean(),
  manageIpfsIdsInGroups: idsArb,
  addPkpToGroups: idsArb,
  removePkpFromGroups: idsArb,
  executeInGroups: idsArb,
});
const callerArb = fc.record({
  kind: fc.constantFrom("account" as const, "usage" as const),
  mode: fc.constantFrom("api" as const, "chain_secured" as const),
  scopes: keyArb,
});

function refusal(caller: Caller): ApiError | null {
  try {
    requireRotator(caller);
    return null;
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
}

describe("rotation: who may rotate (policy)", function () {
  it("property: only the account key in API mode; usage keys 403 owner_only; ChainSecured 409", function () {
    fc.assert(
      fc.property(callerArb, ({ kind, mode, scopes }) => {
        const address = Wallet.createRandom().address;
        const key: KeyRecord = {
          address,
          keyHash: "0x" + "0".repeat(64),
          name: "",
          description: "",
          expiration: 0,
          createdAt: 0,
          scopes,
        };
        const account = emptyAccount(1);
        account.keys.set(address, key);
        for (let g = 1; g <= 4; g++)
          account.groups.set(g, {
            id: g,
            name: "",
            description: "",
            pkps: new Set(),
            actions: new Map(),
            policy: null,
          });
        const got = refusal({ principal: { kind }, mode, account, key: kind === "usage" ? key : undefined });
        if (kind === "usage") {
          expect(got?.status).to.equal(403);
          expect(got?.code).to.equal("owner_only");
        } else if (mode === "chain_secured") {
          expect(got?.status).to.equal(409);
          expect(got?.code).to.equal("account_chain_secured");
        } else {
          expect(got).to.equal(null);
        }
      }),
      { numRuns: 300 },
    );
  });
});
