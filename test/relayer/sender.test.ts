/**
 * The path-A sender on its own, against the real registry and forwarder: refusals are decoded from the
 * simulation into typed errors even without the relayer's pre-checks (the contract is authoritative), a
 * gas wallet whose nonce moved behind the sender's back is resynchronised, and many writes of one
 * principal are serialized so none fails on the forwarder nonce.
 */
import { expect } from "chai";
import { parseEther, NonceManager, Wallet } from "ethers";
import { registryInterface } from "../../relayer/chain/abi";
import { makeProvider } from "../../relayer/chain/rpc";
import { Sender } from "../../relayer/chain/sender";
import { ApiError } from "../../relayer/errors";
import { DEV_KEY } from "../helpers/anvil";
import { startStack, type Stack } from "../helpers/stack";

describe("relayer: path-A sender", function () {
  this.timeout(120_000);
  let s: Stack;
  let sender: Sender;
  let close: () => void;
  let accountKey: string;
  const WALLET = 10; // gas wallet indexes the relayer under test does not use

  before(async () => {
    s = await startStack();
    const rpc = makeProvider(s.chain.rpcUrl, 31337, 2_000);
    close = rpc.close;
    const funder = new NonceManager(new Wallet(DEV_KEY, s.provider));
    await (
      await funder.sendTransaction({ to: s.enclave.gasAddress(WALLET), value: parseEther("10") })
    ).wait();
    sender = new Sender({
      provider: rpc.provider,
      signer: s.enclave,
      gasSigners: [s.enclave.gasSigner(WALLET, rpc.provider)],
      chainId: 31337,
      registry: s.deployment.registry,
      forwarder: s.deployment.forwarder,
      receiptTimeoutMs: 10_000,
      rpcTimeoutMs: 2_000,
    });
    await sender.init();
    accountKey = (await s.api("POST", "/core/v1/new_account", { body: {} })).body.api_key;
  });
  after(async () => {
    close?.();
    await s?.close();
  });

  const asOwner = () => ({
    apiKey: accountKey,
    principal: s.enclave.principalAddress(accountKey),
    kind: "account" as const,
  });

  async function refusal(p: Promise<unknown>): Promise<ApiError> {
    try {
      await p;
    } catch (e) {
      if (e instanceof ApiError) return e;
      throw e;
    }
    throw new Error("the write was not refused");
  }

  it("a key lacking a scope is refused by the contract's simulation with 403 missing_scope naming it", async () => {
    const k = await s.api("POST", "/core/v1/add_usage_api_key", { key: accountKey, body: { name: "none" } });
    const key = k.body.usage_api_key as string;
    const e = await refusal(
      sender.write({
        apiKey: key,
        principal: s.enclave.principalAddress(key),
        kind: "usage",
        data: registryInterface.encodeFunctionData("createPkp", ["", ""]),
      }),
    );
    expect([e.status, e.code, e.details]).to.deep.equal([
      403,
      "missing_scope",
      { scope: "pkp:create", group_id: 0 },
    ]);
  });

  it("an owner-only call by a usage key is refused by the contract with 403 owner_only", async () => {
    const k = await s.api("POST", "/core/v1/add_usage_api_key", {
      key: accountKey,
      body: { name: "all", can_create_pkps: true, execute_in_groups: [0] },
    });
    const key = k.body.usage_api_key as string;
    const data = registryInterface.encodeFunctionData("removeKey", [k.body.id]);
    const e = await refusal(
      sender.write({ apiKey: key, principal: s.enclave.principalAddress(key), kind: "usage", data }),
    );
    expect([e.status, e.code]).to.deep.equal([403, "owner_only"]);
  });

  it("an unknown group is 404 group_not_found from the contract", async () => {
    const e = await refusal(
      sender.write({ ...asOwner(), data: registryInterface.encodeFunctionData("deleteGroup", [77]) }),
    );
    expect([e.status, e.code]).to.deep.equal([404, "group_not_found"]);
  });

  it("resynchronises a gas wallet whose nonce moved outside the sender", async () => {
    await sender.write({ ...asOwner(), data: registryInterface.encodeFunctionData("createPkp", ["a", ""]) });
    const wallet = s.enclave.gasSigner(WALLET, s.provider);
    await (await wallet.sendTransaction({ to: wallet.getAddress(), value: 1n })).wait();
    const r = await sender.write({
      ...asOwner(),
      data: registryInterface.encodeFunctionData("createPkp", ["b", ""]),
    });
    expect(r.blockNumber).to.be.greaterThan(0);
  });

  it("20 concurrent writes of one principal all land (forwarder nonces in order)", async () => {
    const rs = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        sender.write({
          ...asOwner(),
          data: registryInterface.encodeFunctionData("createPkp", [`p${i}`, ""]),
        }),
      ),
    );
    expect(new Set(rs.map((r) => r.txHash)).size).to.equal(20);
    const blocks = rs.map((r) => r.blockNumber);
    expect([...blocks].sort((x, y) => x - y)).to.deep.equal(blocks);
  });
});
