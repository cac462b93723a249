/**
 * relayer/chain/send/simulate.ts against the real registry and forwarder on anvil: a call's gas as the
 * forwarder would make it, a refusal decoded into its typed error, and both simulation methods agreeing.
 */
import { expect } from "chai";
import { Wallet } from "ethers";
import { registryInterface } from "../../../relayer/chain/abi";
import { makeProvider } from "../../../relayer/chain/rpc";
import { requestGasFor, Simulator } from "../../../relayer/chain/send/simulate";
import { ApiError } from "../../../relayer/errors";
import { startStack, type Stack } from "../../helpers/stack";

describe("relayer/chain/send/simulate", function () {
  this.timeout(120_000);
  let s: Stack;
  let rpc: ReturnType<typeof makeProvider>;
  let owner: string;

  before(async () => {
    s = await startStack({ gasWallets: 1 });
    rpc = makeProvider(s.chain.rpcUrl, 31337, 2_000);
    const key = (await s.api("POST", "/core/v1/new_account", { body: {} })).body.api_key;
    owner = s.enclave.principalAddress(key);
  });
  after(async () => {
    rpc?.close();
    await s?.close();
  });

  const simulator = (mode: "auto" | "estimateGas", seen: string[] = []) => {
    const provider = rpc.provider;
    const counting = Object.create(provider, {
      send: { value: (m: string, p: unknown[]) => (seen.push(m), provider.send(m, p)) },
    });
    return new Simulator({
      provider: counting,
      registry: s.deployment.registry,
      forwarder: s.deployment.forwarder,
      mode,
    });
  };
  const createPkp = (principal: string) => ({
    apiKey: "",
    principal,
    kind: "account" as const,
    data: registryInterface.encodeFunctionData("createPkp", ["sim", ""]),
  });

  it("gives the owner's createPkp gas with one eth_simulateV1, close to what eth_estimateGas finds", async () => {
    const seen: string[] = [];
    const v1 = await simulator("auto", seen).simulate(createPkp(owner));
    expect(seen).to.deep.equal(["eth_simulateV1"]);
    const estimated = await simulator("estimateGas").simulate(createPkp(owner));
    expect(v1 > 50_000n && v1 <= estimated).to.equal(true);
    // The request's margin covers what estimateGas adds (refunds, the 63/64 rule).
    expect(requestGasFor(v1) >= estimated).to.equal(true);
  });

  it("an account-key call signed by a non-owner is refused with 409 account_chain_secured, from either method", async () => {
    const stranger = Wallet.createRandom().address;
    for (const mode of ["auto", "estimateGas"] as const) {
      let caught: unknown;
      try {
        await simulator(mode).simulate(createPkp(stranger));
      } catch (err) {
        caught = err;
      }
      expect(caught, mode).to.be.instanceOf(ApiError);
      const e = caught as ApiError;
      expect([e.status, e.code], mode).to.deep.equal([409, "account_chain_secured"]);
    }
  });

  it("requestGasFor adds a quarter and 10,000", () => {
    expect(requestGasFor(100_000n)).to.equal(135_000n);
  });
});
