/**
 * The parent (enclave) side treats its workers as untrusted: if code ever escaped the sandbox inside a
 * worker, what that worker can ask for is still limited to what the run was authorized to do.
 */
import { expect } from "chai";
import { serveKeyOp } from "../../enclave/executor/key-ops";
import { readDone } from "../../enclave/executor/pool";
import { OTHER_CID, TEST_CID, makeAuthorizer, makeKeys, pkpIds } from "./helpers";

describe("executor: enclave side of key operations", function () {
  const keys = makeKeys();
  const { allowed, refused } = pkpIds();

  it("serves only known operations, whatever name a worker sends", async function () {
    const { authorizePkp, calls } = makeAuthorizer(keys, [allowed]);
    for (const op of ["constructor", "__proto__", "toString", "hasOwnProperty", "pkpPrivateKeyX"]) {
      const answer = await serveKeyOp(keys, TEST_CID, authorizePkp, op, { pkpId: allowed });
      expect(answer, op).to.deep.equal({
        ok: false,
        error: { code: "invalid_argument", message: "unknown operation" },
      });
    }
    expect(calls).to.deep.equal([]);
  });

  it("always gives the identity key of the run's own CID", async function () {
    const { authorizePkp } = makeAuthorizer(keys, [allowed]);
    const answer = await serveKeyOp(keys, TEST_CID, authorizePkp, "actionPrivateKey", { cid: OTHER_CID });
    expect(answer).to.deep.equal({ ok: true, value: keys.actionPrivateKey(TEST_CID) });
  });

  it("authorizes every PKP operation, including getPrivateKey", async function () {
    const { authorizePkp, calls } = makeAuthorizer(keys, [allowed]);
    const answer = await serveKeyOp(keys, TEST_CID, authorizePkp, "pkpPrivateKey", { pkpId: refused });
    expect(answer.ok).to.equal(false);
    expect(calls).to.deep.equal([refused]);
  });

  it("answers malformed arguments with invalid_argument", async function () {
    const { authorizePkp } = makeAuthorizer(keys, [allowed]);
    const answer = await serveKeyOp(keys, TEST_CID, authorizePkp, "pkpSignMessage", null as never);
    expect(answer).to.deep.equal({
      ok: false,
      error: { code: "invalid_argument", message: "pkpId must be a string" },
    });
  });

  it("reads a worker's final message defensively", function () {
    const malformed = { error: { code: "worker_crashed", message: "the worker sent a malformed result" } };
    expect(readDone({ responseJson: "{not json" })).to.deep.equal(malformed);
    expect(readDone({ responseJson: 5 })).to.deep.equal(malformed);
    expect(readDone({ error: { code: 1, message: "x" } })).to.deep.equal(malformed);
    expect(readDone({ error: { code: "action_threw", message: "m", extra: 1 } })).to.deep.equal({
      error: { code: "action_threw", message: "m" },
    });
    expect(readDone({ error: null, responseJson: '{"a":1}' })).to.deep.equal({
      error: null,
      responseJson: '{"a":1}',
    });
  });
});
