/**
 * relayer/chain/send/simulate.ts against the real registry and forwarder on anvil: a call's gas as the
 * forwarder would make it, a refusal decoded into its typed error, and both simulation methods agreeing.
 */
import { expect } from "chai";
import { Wallet } from "ethers";
import { registryInterface } from "../../../relayer/chain/abi";
import { makeProvider } from "../../../relayer/chain/rpc";
import { requestGasFor, simulatedCalls, Simulator } from "../../../relayer/chain/send/simulate";
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

  it("writes waiting together are simulated in one eth_simulateV1, each with its own gas or refusal", async () => {
    const seen: string[] = [];
    const sim = simulator("auto", seen);
    const alone = await simulator("auto").simulate(createPkp(owner));
    const stranger = Wallet.createRandom().address;
    // Eight writes started in one event-loop turn, as eight HTTP requests parsed together are.
    const outcomes = await Promise.allSettled(
      Array.from({ length: 8 }, (_, i) => sim.simulate(createPkp(i === 3 ? stranger : owner))),
    );
    expect(seen).to.deep.equal(["eth_simulateV1"]);
    outcomes.forEach((o, i) => {
      if (i === 3) {
        expect(o.status).to.equal("rejected");
        const e = (o as PromiseRejectedResult).reason as ApiError;
        expect([e.status, e.code]).to.deep.equal([409, "account_chain_secured"]);
      } else {
        expect(o.status, String(i)).to.equal("fulfilled");
        // Each call runs on the state the earlier ones left (another PKP of the same owner): the gas
        // moves a little, within the request's margin of what the call needs alone.
        const gas = (o as PromiseFulfilledResult<bigint>).value;
        expect(requestGasFor(gas) >= alone && requestGasFor(alone) >= gas, `${gas} vs ${alone}`).to.equal(
          true,
        );
      }
    });
  });

  it("writes that arrive while a simulation is in flight go together in the next one", async () => {
    const seen: string[] = [];
    const sim = simulator("auto", seen);
    const first = sim.simulate(createPkp(owner));
    await new Promise((r) => setImmediate(r)); // the first call is on its way
    const later = Array.from({ length: 5 }, () => sim.simulate(createPkp(owner)));
    await Promise.all([first, ...later]);
    expect(seen).to.deep.equal(["eth_simulateV1", "eth_simulateV1"]);
  });

  it("reads the calls of a group's answer in order; any unreadable call makes the whole answer unreadable", () => {
    const ok = { status: "0x1", gasUsed: "0x10", returnData: "0x" };
    const revert = { status: "0x0", gasUsed: "0x1", returnData: "0x08c379a0" + "00".repeat(4) };
    expect(simulatedCalls([{ calls: [ok, revert] }], 2)).to.deep.equal([
      { ok: true, gasUsed: 16n },
      { ok: false, revertData: revert.returnData },
    ]);
    expect(simulatedCalls([{ calls: [ok, revert] }], 3)).to.equal(null);
    expect(simulatedCalls([{ calls: [ok, { status: "0x2" }] }], 2)).to.equal(null);
    expect(simulatedCalls([], 0)).to.equal(null);
  });

  it("requestGasFor adds a quarter and 10,000", () => {
    expect(requestGasFor(100_000n)).to.equal(135_000n);
  });
});
