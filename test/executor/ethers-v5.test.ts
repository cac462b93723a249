/**
 * `ethers` in actions is the real ethers v5 (the reference runtime's API), with the v6 names it lacks,
 * `ethers6` is v6, and `ethers.providers.JsonRpcProvider` talks to a real chain through the run's fetch.
 */
import { expect } from "chai";
import { ethers as hostEthers } from "ethers";
import { ActionExecutor } from "../../enclave/executor";
import { startChain, DEV_KEY, type TestChain } from "../helpers/anvil";
import { makeKeys, makeRunner, type Runner, expectOk as ok } from "./helpers";

describe("executor: ethers v5 in actions", function () {
  this.timeout(60_000);
  const keys = makeKeys();
  let executor: ActionExecutor;
  let run: Runner;
  let chain: TestChain;

  before(async function () {
    chain = await startChain();
    executor = new ActionExecutor({ keys, poolSize: 1 });
    await executor.ready();
    run = makeRunner(executor, keys);
  });

  after(async function () {
    await executor.close();
    await chain.stop();
  });

  it("is ethers 5.8 and keeps ethers6 as the v6 package", async function () {
    expect(ok(await run(`return [ethers.version, ethers6.version];`))).to.deep.equal([
      "ethers/5.8.0",
      hostEthers.version,
    ]);
  });

  it("signs a digest with utils.SigningKey and round-trips joinSignature/splitSignature", async function () {
    const code = `
      const key = new ethers.utils.SigningKey("${DEV_KEY}");
      const digest = ethers.utils.keccak256(ethers.utils.toUtf8Bytes("hello"));
      const sig = key.signDigest(digest);
      const joined = ethers.utils.joinSignature(sig);
      const split = ethers.utils.splitSignature(joined);
      return { joined, v: split.v, recovered: ethers.utils.recoverAddress(ethers.utils.arrayify(digest), joined) };`;
    const r = ok(await run(code)) as { joined: string; v: number; recovered: string };
    const digest = hostEthers.keccak256(hostEthers.toUtf8Bytes("hello"));
    expect(r.joined).to.equal(new hostEthers.SigningKey(DEV_KEY).sign(digest).serialized);
    expect(r.recovered).to.equal(new hostEthers.Wallet(DEV_KEY).address);
    expect([27, 28]).to.include(r.v);
  });

  it("has BigNumber and the unit helpers", async function () {
    const code = `
      const a = ethers.BigNumber.from("1000000000000000000").add(ethers.utils.parseEther("0.5"));
      return [a.toString(), ethers.utils.formatEther(a), ethers.utils.formatUnits("1234567", 6), ethers.utils.parseUnits("2.5", 9).toString(), ethers.BigNumber.isBigNumber(a)];`;
    expect(ok(await run(code))).to.deep.equal(["1500000000000000000", "1.5", "1.234567", "2500000000", true]);
  });

  it("has solidityKeccak256, verifyMessage and Wallet.publicKey", async function () {
    const code = `
      const w = new ethers.Wallet("${DEV_KEY}");
      const sig = await w.signMessage("hi");
      return [w.publicKey, ethers.utils.verifyMessage("hi", sig), ethers.utils.solidityKeccak256(["uint256", "address"], [1, w.address])];`;
    const w = new hostEthers.Wallet(DEV_KEY);
    expect(ok(await run(code))).to.deep.equal([
      w.signingKey.publicKey,
      w.address,
      hostEthers.solidityPackedKeccak256(["uint256", "address"], [1, w.address]),
    ]);
  });

  it("keeps the v6 names v5 lacks on ethers", async function () {
    const code = `return [ethers.keccak256(ethers.toUtf8Bytes("x")), ethers.getBytes("0x0102").length, typeof ethers.Signature.from];`;
    expect(ok(await run(code))).to.deep.equal([
      hostEthers.keccak256(hostEthers.toUtf8Bytes("x")),
      2,
      "function",
    ]);
  });

  it("leaves out v5's host-I/O helpers", async function () {
    const code = `return [typeof ethers.utils.fetchJson, typeof ethers.utils.poll, typeof ethers.getDefaultProvider, typeof ethers.providers.WebSocketProvider, typeof ethers.ethers];`;
    expect(ok(await run(code))).to.deep.equal([
      "undefined",
      "undefined",
      "undefined",
      "undefined",
      "undefined",
    ]);
  });

  it("cannot be patched for later runs (v5 classes, coder, providers)", async function () {
    const r = await run(`
      const out = [];
      const tryIt = (f) => { try { f(); out.push("ran"); } catch (e) { out.push(e.name); } };
      tryIt(() => { ethers.BigNumber.prototype.add = () => 0; });
      tryIt(() => { ethers.utils.defaultAbiCoder.encode = () => "0x"; });
      tryIt(() => { ethers.providers.JsonRpcProvider.prototype.send = async () => "0x1"; });
      tryIt(() => { ethers.utils.keccak256 = () => "0x"; });
      return out;`);
    expect(ok(r)).to.deep.equal(["TypeError", "TypeError", "TypeError", "TypeError"]);
  });

  it("refuses to flip v5's process-wide logger switches", async function () {
    const r = await run(`ethers.utils.Logger.setLogLevel("OFF");`);
    expect(r.error).to.deep.equal({
      code: "action_threw",
      message:
        "TypeError: ethers.utils.Logger.setLogLevel is not available in actions (it is shared by all runs)",
    });
  });

  it("reads a real chain through providers.JsonRpcProvider, counted as fetches", async function () {
    const code = `
      const provider = new ethers.providers.JsonRpcProvider(rpcUrl);
      const [block, balance] = await Promise.all([provider.getBlockNumber(), provider.getBalance(who)]);
      return { block, balance: ethers.utils.formatEther(balance) };`;
    const who = new hostEthers.Wallet(DEV_KEY).address;
    const r = await run(code, {
      jsParams: { rpcUrl: chain.rpcUrl, who },
      fetch: { allowHosts: [`127.0.0.1:${chain.port}`], allowAddresses: ["127.0.0.1"] },
    });
    const res = ok(r) as { block: number; balance: string };
    expect(res.block).to.be.a("number");
    expect(Number(res.balance)).to.be.greaterThan(0);
    expect(r.fetches).to.be.greaterThan(0);
  });

  it("refuses a provider's traffic to a loopback address the operator did not allow", async function () {
    const code = `const provider = new ethers.providers.JsonRpcProvider(rpcUrl); return await provider.getBlockNumber();`;
    const r = await run(code, { jsParams: { rpcUrl: chain.rpcUrl }, fetch: {} });
    expect(r.has_error).to.equal(true);
    expect(r.error?.code).to.equal("fetch_address_refused");
  });

  it("calls a contract with ethers.Contract over the provider", async function () {
    // eth_call to an address without code returns 0x: decoding fails in ethers, reported as the action's error.
    const code = `
      const provider = new ethers.providers.JsonRpcProvider(rpcUrl);
      const c = new ethers.Contract("0x0000000000000000000000000000000000000001", ["function name() view returns (string)"], provider);
      try { await c.name(); return "decoded"; } catch (e) { return e.code; }`;
    const r = await run(code, {
      jsParams: { rpcUrl: chain.rpcUrl },
      fetch: { allowHosts: [`127.0.0.1:${chain.port}`], allowAddresses: ["127.0.0.1"] },
    });
    expect(ok(r)).to.equal("CALL_EXCEPTION");
  });

  it("refuses provider events, which would outlive the run", async function () {
    const code = `const provider = new ethers.providers.JsonRpcProvider(rpcUrl); provider.on("block", () => {});`;
    const r = await run(code, { jsParams: { rpcUrl: chain.rpcUrl } });
    expect(r.error).to.deep.equal({
      code: "invalid_argument",
      message: "provider events and polling are not available in actions; await the calls instead",
    });
  });
});
