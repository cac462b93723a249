/**
 * Signed forward requests (relayer/routes/forward.ts): writes a usage key signs itself, built here by
 * an independent implementation (ethers v5's EIP-712 signer, not the SDK). A request the key has no
 * scope for is refused by the relayer and, sent to the forwarder directly, by the chain; altered,
 * replayed, expired and other-chain or other-forwarder requests get clear 4xx codes and write nothing.
 */
import { expect } from "chai";
import { Contract, Wallet as WalletV6 } from "ethers";
import { ethers as ethers5 } from "ethers5";
import { REGISTRY_WRITE_ABI } from "sigil/sdk";
import { forwarderInterface, registryInterface } from "../../relayer/chain/abi";
import { DEV_KEY } from "../helpers/anvil";
import { setupAccount, startStack, type Stack } from "../helpers/stack";

const TYPES = {
  ForwardRequest: [
    { name: "from", type: "address" },
    { name: "to", type: "address" },
    { name: "value", type: "uint256" },
    { name: "gas", type: "uint256" },
    { name: "nonce", type: "uint256" },
    { name: "deadline", type: "uint48" },
    { name: "data", type: "bytes" },
  ],
};
const registryV5 = new ethers5.utils.Interface([
  "function createGroup(string,string,bytes32[],string[])",
  "function createPkp(string,string)",
]);

interface Unsigned {
  from: string;
  to: string;
  value: string;
  gas: string;
  nonce: string;
  deadline: number;
  data: string;
}

describe("signed forward requests: writes whose key never leaves the client", function () {
  this.timeout(120_000);
  let s: Stack;
  let accountKey: string;
  let noScope: ethers5.Wallet;
  let creator: ethers5.Wallet;
  let chainId: number;

  before(async () => {
    s = await startStack();
    const a = await setupAccount(s);
    accountKey = a.accountKey;
    const add = async (body: Record<string, unknown>) =>
      (await s.api("POST", "/core/v1/add_usage_api_key", { key: accountKey, body })).body
        .usage_api_key as string;
    noScope = new ethers5.Wallet(
      "0x" + (await add({ name: "runner", execute_in_groups: [a.groupId] })).slice(3),
    );
    creator = new ethers5.Wallet("0x" + (await add({ name: "creator", can_create_groups: true })).slice(3));
    chainId = 31337;
  });
  after(async () => {
    await s?.close();
  });

  const forwarderNonce = async (address: string) =>
    BigInt(
      forwarderInterface.decodeFunctionResult(
        "nonces",
        await s.provider.call({
          to: s.deployment.forwarder,
          data: forwarderInterface.encodeFunctionData("nonces", [address]),
        }),
      )[0],
    );
  const groupCount = async () =>
    (await s.api("GET", "/core/v1/groups", { key: accountKey })).body.total as number;
  const unsigned = async (wallet: ethers5.Wallet, over: Partial<Unsigned> = {}): Promise<Unsigned> => ({
    from: wallet.address,
    to: s.deployment.registry,
    value: "0",
    gas: "500000",
    nonce: String(await forwarderNonce(wallet.address)),
    deadline: Math.floor(Date.now() / 1000) + 300,
    data: registryV5.encodeFunctionData("createGroup", ["from the client", "", [], []]),
    ...over,
  });
  const sign = (
    wallet: ethers5.Wallet,
    r: Unsigned,
    domain: Partial<Record<"chainId" | "verifyingContract", unknown>> = {},
  ) =>
    wallet._signTypedData(
      {
        name: "SigilForwarder",
        version: "1",
        chainId,
        verifyingContract: s.deployment.forwarder,
        ...domain,
      } as never,
      TYPES,
      r,
    );
  const submit = (body: unknown) => s.api("POST", "/core/v1/forward", { body });

  it("the SDK's registry ABI has the registry's selectors", () => {
    for (const fragment of REGISTRY_WRITE_ABI) {
      const name = /function (\w+)/.exec(fragment)![1];
      const sdk = new ethers5.utils.Interface([fragment]).getSighash(name);
      expect(sdk, name).to.equal(registryInterface.getFunction(name)!.selector);
    }
  });

  it("a key with the scope writes: the group exists and the forwarder nonce moved", async () => {
    const before = await groupCount();
    const r = await unsigned(creator);
    const answer = await submit({ ...r, signature: await sign(creator, r) });
    expect(answer.status).to.equal(200);
    expect(answer.body.operation).to.equal("createGroup");
    expect(answer.body.group_id).to.be.a("number");
    expect(await groupCount()).to.equal(before + 1);
    expect(await forwarderNonce(creator.address)).to.equal(BigInt(r.nonce) + 1n);
  });

  it("a key without the scope: the relayer refuses with 403 missing_scope, nothing written", async () => {
    const before = await groupCount();
    const r = await unsigned(noScope);
    const answer = await submit({ ...r, signature: await sign(noScope, r) });
    expect([answer.status, answer.body.error.code]).to.deep.equal([403, "missing_scope"]);
    expect(await groupCount()).to.equal(before);
    expect(await forwarderNonce(noScope.address)).to.equal(0n);
  });

  it("a key without the scope, sent to the forwarder directly: the chain refuses it", async () => {
    const before = await groupCount();
    const r = await unsigned(noScope);
    const signature = await sign(noScope, r);
    const payer = new WalletV6(DEV_KEY, s.provider);
    const forwarder = new Contract(s.deployment.forwarder, forwarderInterface, payer);
    let reverted = false;
    try {
      const tx = await forwarder.execute({ ...r, signature }, { gasLimit: 1_000_000 });
      await tx.wait();
    } catch {
      reverted = true;
    }
    expect(reverted).to.equal(true);
    expect(await groupCount()).to.equal(before);
    expect(await forwarderNonce(noScope.address)).to.equal(0n);
  });

  it("control: a key with the scope, sent to the forwarder directly, writes", async () => {
    const before = await groupCount();
    const r = await unsigned(creator);
    const forwarder = new Contract(
      s.deployment.forwarder,
      forwarderInterface,
      new WalletV6(DEV_KEY, s.provider),
    );
    await (
      await forwarder.execute({ ...r, signature: await sign(creator, r) }, { gasLimit: 1_000_000 })
    ).wait();
    // Not the relayer's own write: its cache sees it on its next poll (100 ms here).
    const deadline = Date.now() + 10_000;
    while ((await groupCount()) !== before + 1 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));
    expect(await groupCount()).to.equal(before + 1);
  });

  it("altered after signing (the group's name): 401 forward_signature_invalid, nothing written", async () => {
    const before = await groupCount();
    const r = await unsigned(creator);
    const signature = await sign(creator, r);
    const altered = { ...r, data: registryV5.encodeFunctionData("createGroup", ["mallory's", "", [], []]) };
    const answer = await submit({ ...altered, signature });
    expect([answer.status, answer.body.error.code]).to.deep.equal([401, "forward_signature_invalid"]);
    expect(await groupCount()).to.equal(before);
  });

  it("replayed (the same signed request again): 409 forward_nonce_mismatch, written once", async () => {
    const before = await groupCount();
    const r = await unsigned(creator);
    const body = { ...r, signature: await sign(creator, r) };
    expect((await submit(body)).status).to.equal(200);
    const again = await submit(body);
    expect([again.status, again.body.error.code]).to.deep.equal([409, "forward_nonce_mismatch"]);
    expect(await groupCount()).to.equal(before + 1);
  });

  it("expired: 400 forward_request_expired, nothing written", async () => {
    const before = await groupCount();
    const r = await unsigned(creator, { deadline: Math.floor(Date.now() / 1000) - 5 });
    const answer = await submit({ ...r, signature: await sign(creator, r) });
    expect([answer.status, answer.body.error.code]).to.deep.equal([400, "forward_request_expired"]);
    expect(await groupCount()).to.equal(before);
  });

  it("signed for another chain: 401 forward_signature_invalid, nothing written", async () => {
    const before = await groupCount();
    const r = await unsigned(creator);
    const answer = await submit({ ...r, signature: await sign(creator, r, { chainId: 1 }) });
    expect([answer.status, answer.body.error.code]).to.deep.equal([401, "forward_signature_invalid"]);
    expect(await groupCount()).to.equal(before);
  });

  it("signed for another forwarder: 401 forward_signature_invalid, nothing written", async () => {
    const before = await groupCount();
    const r = await unsigned(creator);
    const other = ethers5.Wallet.createRandom().address;
    const answer = await submit({ ...r, signature: await sign(creator, r, { verifyingContract: other }) });
    expect([answer.status, answer.body.error.code]).to.deep.equal([401, "forward_signature_invalid"]);
    expect(await groupCount()).to.equal(before);
  });

  it("a call a usage key may not make (removeKey): 400 forward_call_not_allowed", async () => {
    const data = registryInterface.encodeFunctionData("removeKey", [noScope.address]);
    const r = await unsigned(creator, { data });
    const answer = await submit({ ...r, signature: await sign(creator, r) });
    expect([answer.status, answer.body.error.code]).to.deep.equal([400, "forward_call_not_allowed"]);
    expect(answer.body.error.details.reason).to.equal("call");
  });

  it("another target than the registry: 400 forward_call_not_allowed", async () => {
    const r = await unsigned(creator, { to: s.deployment.forwarder });
    const answer = await submit({ ...r, signature: await sign(creator, r) });
    expect([answer.status, answer.body.error.code]).to.deep.equal([400, "forward_call_not_allowed"]);
    expect(answer.body.error.details.reason).to.equal("wrong_target");
  });

  it("a removed key's signed request: 401 unknown_api_key, nothing written", async () => {
    const victim = new ethers5.Wallet(
      "0x" +
        (
          await s.api("POST", "/core/v1/add_usage_api_key", {
            key: accountKey,
            body: { name: "soon gone", can_create_groups: true },
          })
        ).body.usage_api_key.slice(3),
    );
    const r = await unsigned(victim);
    const body = { ...r, signature: await sign(victim, r) };
    const removed = await s.api("POST", "/core/v1/remove_usage_api_key", {
      key: accountKey,
      body: { id: victim.address },
    });
    expect(removed.status).to.equal(200);
    const before = await groupCount();
    const answer = await submit(body);
    expect([answer.status, answer.body.error.code]).to.deep.equal([401, "unknown_api_key"]);
    expect(await groupCount()).to.equal(before);
  });
});
