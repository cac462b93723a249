/**
 * relayer/chain/send/nodeErrors.ts: what a node's error means, whichever layer of wrapping it sits in.
 */
import { expect } from "chai";
import {
  errorText,
  isMethodUnsupported,
  isTimeout,
  pendingHash,
  rpcErrors,
} from "../../../relayer/chain/send/nodeErrors";

const HASH = "0x" + "ab".repeat(32);

describe("relayer/chain/send/nodeErrors", () => {
  it("walks info.error, error and cause, outermost first, at most five deep", () => {
    const inner = { code: -32000, message: "inner" };
    const err = { message: "outer", info: { error: { message: "middle", cause: inner } } };
    expect(rpcErrors(err).map((e) => e.message)).to.deep.equal(["outer", "middle", "inner"]);
    let deep: Record<string, unknown> = { message: "0" };
    for (let i = 1; i < 8; i++) deep = { message: String(i), cause: deep };
    expect(rpcErrors(deep)).to.have.length(5);
  });

  it("-32601 or a node's wording of it is an unsupported method; other errors are not", () => {
    expect(isMethodUnsupported({ error: { code: -32601, message: "x" } })).to.equal(true);
    expect(
      isMethodUnsupported({ message: "the method eth_simulateV1 does not exist/is not available" }),
    ).to.equal(true);
    expect(isMethodUnsupported({ error: { code: -32000, message: "execution reverted" } })).to.equal(false);
  });

  it("only our transport's TIMEOUT code is a timeout", () => {
    expect(isTimeout({ cause: { code: "TIMEOUT" } })).to.equal(true);
    expect(isTimeout({ code: "ECONNRESET" })).to.equal(false);
  });

  it("EIP-7966 error 4 yields the hash it carries; a malformed hash yields null", () => {
    expect(pendingHash({ error: { code: 4, data: HASH } })).to.equal(HASH);
    expect(pendingHash({ error: { code: 4, data: "0x12" } })).to.equal(null);
  });

  it("errorText joins every layer's message and short message", () => {
    const err = { message: "a", shortMessage: "b", error: { message: "insufficient funds for gas" } };
    expect(errorText(err)).to.equal("a | b | insufficient funds for gas");
  });
});
