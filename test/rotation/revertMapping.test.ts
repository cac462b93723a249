/** The registry's rotation errors as the relayer answers them (relayer/chain/registryErrors.ts). */
import { expect } from "chai";
import { Wallet } from "ethers";
import { registryInterface } from "../../relayer/chain/abi";
import { mapRevert } from "../../relayer/chain/registryErrors";
import { ERROR_CATALOGUE } from "../../relayer/errorCatalogue";

const owner = { principal: Wallet.createRandom().address, kind: "account" as const };

describe("rotation: registry refusals as API errors", function () {
  it("ScopesMismatch(key) is 409 rotation_scopes_changed naming the key", function () {
    const key = Wallet.createRandom().address;
    const e = mapRevert(registryInterface.encodeErrorResult("ScopesMismatch", [key]), owner);
    expect(e.status).to.equal(409);
    expect(e.code).to.equal("rotation_scopes_changed");
    expect(e.details).to.deep.equal({ id: key });
    expect(ERROR_CATALOGUE.rotation_scopes_changed.status).to.equal(409);
  });

  it("OverlapTooLong(overlap, max) is 400 overlap_too_long naming the field and the maximum", function () {
    const e = mapRevert(registryInterface.encodeErrorResult("OverlapTooLong", [2_592_001, 2_592_000]), owner);
    expect(e.status).to.equal(400);
    expect(e.code).to.equal("overlap_too_long");
    expect(e.details).to.deep.equal({ field: "overlap_seconds", max: 2_592_000 });
    expect(ERROR_CATALOGUE.overlap_too_long.status).to.equal(400);
  });
});
