/**
 * Path A: requests signed by a principal and submitted by a gas wallet through SigilForwarder. The registry
 * must see the signer as the caller, so a forwarded request succeeds or fails exactly like a direct call.
 */
import { expect } from "chai";
import { loadFixture, time } from "@nomicfoundation/hardhat-network-helpers";
import { anyValue } from "@nomicfoundation/hardhat-chai-matchers/withArgs";
import { ethers } from "hardhat";
import type { HardhatEthersSigner } from "@nomicfoundation/hardhat-ethers/signers";
import { SigilForwarder__factory } from "../../typechain-types";
import {
  pinnedNow,
  ALL_SCOPES,
  CID_HELLO,
  Scope,
  type TwoAccounts,
  cidHash,
  grantKey,
  readAccount,
  scopes,
  twoAccountsFixture,
} from "./fixtures";

const FORWARD_REQUEST_TYPES = {
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

interface SignOptions {
  deadline?: bigint;
  nonce?: bigint;
  forwarderAddress?: string;
}

/** An EIP-712 ForwardRequest for `data` on the registry, signed by `signer` (as the enclave does). */
async function signRequest(
  ctx: TwoAccounts,
  signer: HardhatEthersSigner,
  data: string,
  options: SignOptions = {},
) {
  const forwarderAddress = options.forwarderAddress ?? ctx.deployment.forwarder;
  const forwarder = SigilForwarder__factory.connect(forwarderAddress, ethers.provider);
  const request = {
    from: signer.address,
    to: ctx.deployment.registry,
    value: 0n,
    gas: 1_000_000n,
    nonce: options.nonce ?? (await forwarder.nonces(signer.address)),
    deadline: options.deadline ?? (await pinnedNow()) + 300n,
    data,
  };
  const domain = {
    name: "SigilForwarder",
    version: "1",
    chainId: ctx.deployment.chainId,
    verifyingContract: forwarderAddress,
  };
  const signature = await signer.signTypedData(domain, FORWARD_REQUEST_TYPES, request);
  return {
    from: request.from,
    to: request.to,
    value: request.value,
    gas: request.gas,
    deadline: request.deadline,
    data,
    signature,
  };
}

/** What the registry answers when the forwarder relays `data` for `from` (how the relayer decodes a revert). */
function simulateForwarded(ctx: TwoAccounts, from: string, data: string) {
  return ethers.provider.call({
    from: ctx.deployment.forwarder,
    to: ctx.deployment.registry,
    data: ethers.concat([data, from]),
  });
}

describe("AccountRegistry: forwarded calls (path A)", function () {
  it("the forwarder's EIP-712 domain is SigilForwarder, version 1", async function () {
    const { forwarder } = await loadFixture(twoAccountsFixture);
    const domain = await forwarder.eip712Domain();
    expect([domain.name, domain.version]).to.deep.equal(["SigilForwarder", "1"]);
  });

  it("a request signed by a key holding the scope succeeds, with the key as caller", async function () {
    const ctx = await loadFixture(twoAccountsFixture);
    const [key] = ctx.keySigners;
    await grantKey(ctx.registry, ctx.ownerA, key, scopes({ ManageActions: [1] }));
    const request = await signRequest(
      ctx,
      key,
      ctx.registry.interface.encodeFunctionData("addAction", [1n, CID_HELLO]),
    );
    await expect(ctx.forwarder.connect(ctx.relayer).execute(request))
      .to.emit(ctx.registry, "ActionAdded")
      .withArgs(1n, 1n, cidHash(CID_HELLO), CID_HELLO);
  });

  it("a forwarded write has the same effect as the direct call", async function () {
    const ctx = await loadFixture(twoAccountsFixture);
    const [key] = ctx.keySigners;
    await grantKey(ctx.registry, ctx.ownerA, key, scopes({ CreateGroup: true }));
    const direct = await ctx.registry.connect(key).createGroup.staticCall("g", "", [], []);
    const request = await signRequest(
      ctx,
      key,
      ctx.registry.interface.encodeFunctionData("createGroup", ["g", "", [], []]),
    );
    await ctx.forwarder.connect(ctx.relayer).execute(request);
    expect((await readAccount(ctx.registry, 1n)).groups.get(Number(direct))?.name).to.equal("g");
  });

  it("a request signed by a key holding manageActions on the group sets the group's policy", async function () {
    const ctx = await loadFixture(twoAccountsFixture);
    const [key] = ctx.keySigners;
    await grantKey(ctx.registry, ctx.ownerA, key, scopes({ ManageActions: [1] }));
    const request = await signRequest(
      ctx,
      key,
      ctx.registry.interface.encodeFunctionData("setGroupPolicy", [1n, CID_HELLO]),
    );
    await expect(ctx.forwarder.connect(ctx.relayer).execute(request))
      .to.emit(ctx.registry, "GroupPolicySet")
      .withArgs(1n, 1n, cidHash(CID_HELLO), CID_HELLO);
    expect(await ctx.registry.groupPolicy(1n, 1n)).to.equal(cidHash(CID_HELLO));
  });

  it("a forwarded policy write by a key scoped to another group fails with MissingScope", async function () {
    const ctx = await loadFixture(twoAccountsFixture);
    const [key] = ctx.keySigners;
    await grantKey(ctx.registry, ctx.ownerA, key, scopes({ ManageActions: [2] }));
    const data = ctx.registry.interface.encodeFunctionData("setGroupPolicy", [1n, CID_HELLO]);
    await expect(simulateForwarded(ctx, key.address, data))
      .to.be.revertedWithCustomError(ctx.registry, "MissingScope")
      .withArgs(key.address, 1n, Scope.ManageActions, 1n);
  });

  it("a request signed by the owner can perform owner-only operations", async function () {
    const ctx = await loadFixture(twoAccountsFixture);
    const key = ctx.keySigners[0].address;
    const data = ctx.registry.interface.encodeFunctionData("addKey", [
      key,
      ethers.ZeroHash,
      "k",
      "",
      0n,
      ALL_SCOPES,
    ]);
    await ctx.forwarder.connect(ctx.relayer).execute(await signRequest(ctx, ctx.ownerA, data));
    expect(await ctx.registry.accountOfKey(key)).to.equal(1n);
  });

  it("a request signed by a key lacking the scope fails", async function () {
    const ctx = await loadFixture(twoAccountsFixture);
    const [key] = ctx.keySigners;
    await grantKey(ctx.registry, ctx.ownerA, key, scopes({ ManageActions: [2] }));
    const request = await signRequest(
      ctx,
      key,
      ctx.registry.interface.encodeFunctionData("addAction", [1n, CID_HELLO]),
    );
    await expect(ctx.forwarder.connect(ctx.relayer).execute(request)).to.be.revertedWithCustomError(
      ctx.forwarder,
      "FailedCall",
    );
  });

  it("the forwarded failure is the direct call's error, naming the signer", async function () {
    const ctx = await loadFixture(twoAccountsFixture);
    const [key] = ctx.keySigners;
    await grantKey(ctx.registry, ctx.ownerA, key, scopes({ ManageActions: [2] }));
    const data = ctx.registry.interface.encodeFunctionData("addAction", [1n, CID_HELLO]);
    await expect(ctx.registry.connect(key).addAction(1n, CID_HELLO))
      .to.be.revertedWithCustomError(ctx.registry, "MissingScope")
      .withArgs(key.address, 1n, Scope.ManageActions, 1n);
    await expect(simulateForwarded(ctx, key.address, data))
      .to.be.revertedWithCustomError(ctx.registry, "MissingScope")
      .withArgs(key.address, 1n, Scope.ManageActions, 1n);
  });

  it("an owner-only request signed by a key fails with NotOwner naming the key", async function () {
    const ctx = await loadFixture(twoAccountsFixture);
    const [key] = ctx.keySigners;
    await grantKey(ctx.registry, ctx.ownerA, key, ALL_SCOPES);
    const data = ctx.registry.interface.encodeFunctionData("transferOwnership", [ctx.outsider.address]);
    await expect(
      ctx.forwarder.connect(ctx.relayer).execute(await signRequest(ctx, key, data)),
    ).to.be.revertedWithCustomError(ctx.forwarder, "FailedCall");
    await expect(simulateForwarded(ctx, key.address, data))
      .to.be.revertedWithCustomError(ctx.registry, "NotOwner")
      .withArgs(key.address, 1n);
  });

  it("a request signed before the key was removed fails after the removal", async function () {
    const ctx = await loadFixture(twoAccountsFixture);
    const [key] = ctx.keySigners;
    await grantKey(ctx.registry, ctx.ownerA, key, ALL_SCOPES);
    const data = ctx.registry.interface.encodeFunctionData("createPkp", ["p", ""]);
    const request = await signRequest(ctx, key, data);
    await ctx.registry.connect(ctx.ownerA).removeKey(key.address);
    await expect(ctx.forwarder.connect(ctx.relayer).execute(request)).to.be.revertedWithCustomError(
      ctx.forwarder,
      "FailedCall",
    );
    await expect(simulateForwarded(ctx, key.address, data))
      .to.be.revertedWithCustomError(ctx.registry, "NoAccount")
      .withArgs(key.address);
  });

  it("a tampered request is refused", async function () {
    const ctx = await loadFixture(twoAccountsFixture);
    const [key] = ctx.keySigners;
    await grantKey(ctx.registry, ctx.ownerA, key, ALL_SCOPES);
    const request = await signRequest(
      ctx,
      key,
      ctx.registry.interface.encodeFunctionData("addAction", [1n, CID_HELLO]),
    );
    const tampered = { ...request, data: ctx.registry.interface.encodeFunctionData("deleteGroup", [1n]) };
    await expect(ctx.forwarder.connect(ctx.relayer).execute(tampered))
      .to.be.revertedWithCustomError(ctx.forwarder, "ERC2771ForwarderInvalidSigner")
      .withArgs(anyValue, key.address);
  });

  it("a request whose from is swapped for the owner is refused", async function () {
    const ctx = await loadFixture(twoAccountsFixture);
    const [key] = ctx.keySigners;
    await grantKey(ctx.registry, ctx.ownerA, key, scopes());
    const request = await signRequest(
      ctx,
      key,
      ctx.registry.interface.encodeFunctionData("deleteGroup", [1n]),
    );
    await expect(ctx.forwarder.connect(ctx.relayer).execute({ ...request, from: ctx.ownerA.address }))
      .to.be.revertedWithCustomError(ctx.forwarder, "ERC2771ForwarderInvalidSigner")
      .withArgs(anyValue, ctx.ownerA.address);
  });

  it("a replayed request is refused", async function () {
    const ctx = await loadFixture(twoAccountsFixture);
    const [key] = ctx.keySigners;
    await grantKey(ctx.registry, ctx.ownerA, key, scopes({ CreatePkp: true }));
    const request = await signRequest(
      ctx,
      key,
      ctx.registry.interface.encodeFunctionData("createPkp", ["once", ""]),
    );
    await ctx.forwarder.connect(ctx.relayer).execute(request);
    await expect(ctx.forwarder.connect(ctx.relayer).execute(request))
      .to.be.revertedWithCustomError(ctx.forwarder, "ERC2771ForwarderInvalidSigner")
      .withArgs(anyValue, key.address);
  });

  it("an expired request is refused", async function () {
    const ctx = await loadFixture(twoAccountsFixture);
    const [key] = ctx.keySigners;
    await grantKey(ctx.registry, ctx.ownerA, key, scopes({ CreatePkp: true }));
    const deadline = (await pinnedNow()) + 60n;
    const request = await signRequest(
      ctx,
      key,
      ctx.registry.interface.encodeFunctionData("createPkp", ["late", ""]),
      { deadline },
    );
    await time.increaseTo(deadline + 1n);
    await expect(ctx.forwarder.connect(ctx.relayer).execute(request))
      .to.be.revertedWithCustomError(ctx.forwarder, "ERC2771ForwarderExpiredRequest")
      .withArgs(deadline);
  });

  it("a request through another forwarder is refused: the registry trusts exactly one", async function () {
    const ctx = await loadFixture(twoAccountsFixture);
    const [key] = ctx.keySigners;
    await grantKey(ctx.registry, ctx.ownerA, key, ALL_SCOPES);
    const rogue = await new SigilForwarder__factory(ctx.deployer).deploy();
    const rogueAddress = await rogue.getAddress();
    const request = await signRequest(
      ctx,
      key,
      ctx.registry.interface.encodeFunctionData("createPkp", ["p", ""]),
      {
        forwarderAddress: rogueAddress,
      },
    );
    await expect(rogue.connect(ctx.relayer).execute(request))
      .to.be.revertedWithCustomError(rogue, "ERC2771UntrustfulTarget")
      .withArgs(ctx.deployment.registry, rogueAddress);
  });

  it("an address appended by anyone but the trusted forwarder is ignored", async function () {
    const ctx = await loadFixture(twoAccountsFixture);
    const data = ethers.concat([
      ctx.registry.interface.encodeFunctionData("createPkp", ["p", ""]),
      ctx.ownerA.address,
    ]);
    await expect(ctx.outsider.sendTransaction({ to: ctx.deployment.registry, data }))
      .to.be.revertedWithCustomError(ctx.registry, "NoAccount")
      .withArgs(ctx.outsider.address);
  });

  it("the gas wallet that submits requests has no authority of its own", async function () {
    const ctx = await loadFixture(twoAccountsFixture);
    await expect(ctx.registry.connect(ctx.relayer).createPkp("p", ""))
      .to.be.revertedWithCustomError(ctx.registry, "NoAccount")
      .withArgs(ctx.relayer.address);
  });
});
