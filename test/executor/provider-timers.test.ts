/**
 * A v5 provider built without a chain id detects the network itself. ethers would start that on a host
 * timer no run tracks, so an action in the `(async () => …)()` or `go()` style (the run lasts as long
 * as its pending work) ended before the provider's first answer, reported as a success with no
 * response. The run now waits for the detection, and a run that ends while it is pending leaves
 * nothing behind for the next run in the same worker.
 */
import { expect } from "chai";
import http from "node:http";
import { ethers as hostEthers } from "ethers";
import type { AddressInfo } from "node:net";
import { ActionExecutor } from "../../enclave/executor";
import { startChain, type TestChain } from "../helpers/anvil";
import { expectHealthy, makeKeys, makeRunner, waitFor, type Runner, expectOk as ok } from "./helpers";

/** A JSON-RPC endpoint that never answers: it records each request and whether its client went away. */
async function startSilentNode(): Promise<{
  port: number;
  requests: string[];
  closed: () => number;
  stop: () => Promise<void>;
}> {
  const requests: string[] = [];
  let closed = 0;
  const open = new Set<http.ServerResponse>();
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => requests.push(body));
    open.add(res);
    res.on("close", () => {
      open.delete(res);
      closed++;
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    requests,
    closed: () => closed,
    stop: async () => {
      for (const res of open) res.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe("executor: provider network detection belongs to the run", function () {
  this.timeout(60_000);
  const keys = makeKeys();
  let executor: ActionExecutor;
  let run: Runner;
  let chain: TestChain;

  before(async function () {
    chain = await startChain();
    // One worker: the run after a finished one runs in the same worker, where a leftover would show.
    executor = new ActionExecutor({ keys, poolSize: 1 });
    await executor.ready();
    run = makeRunner(executor, keys);
  });

  after(async function () {
    await executor.close();
    await chain.stop();
  });

  const chainFetch = () => ({ allowHosts: [`127.0.0.1:${chain.port}`], allowAddresses: ["127.0.0.1"] });

  it("an (async () => …)() action with a provider and no chain id returns its response", async function () {
    const code = `
      (async () => {
        const provider = new ethers.providers.JsonRpcProvider(rpcUrl);
        const block = await provider.getBlockNumber();
        const network = await provider.getNetwork();
        console.log("after the first await");
        Lit.Actions.setResponse({ response: { block, chainId: network.chainId } });
      })();`;
    const r = await run(code, { jsParams: { rpcUrl: chain.rpcUrl }, fetch: chainFetch() });
    expect(ok(r)).to.deep.equal({
      block: await new hostEthers.JsonRpcProvider(chain.rpcUrl).getBlockNumber(),
      chainId: 31337,
    });
    expect(r.logs).to.equal("after the first await\n");
  });

  it("a go() action with a provider and no chain id returns its response", async function () {
    const code = `
      const go = async () => {
        const provider = new ethers.providers.JsonRpcProvider(rpcUrl);
        const balance = await provider.getBalance(who);
        Lit.Actions.setResponse({ response: balance.toString() });
      };
      go();`;
    const who = "0x0000000000000000000000000000000000000001";
    const r = await run(code, { jsParams: { rpcUrl: chain.rpcUrl, who }, fetch: chainFetch() });
    expect(ok(r)).to.equal((await new hostEthers.JsonRpcProvider(chain.rpcUrl).getBalance(who)).toString());
  });

  it("an (async () => …)() action whose provider's node is refused fails with the refusal's code", async function () {
    const code = `
      (async () => {
        const provider = new ethers.providers.JsonRpcProvider(rpcUrl);
        Lit.Actions.setResponse({ response: await provider.getBlockNumber() });
      })();`;
    const r = await run(code, { jsParams: { rpcUrl: chain.rpcUrl }, fetch: {} });
    expect(r.has_error).to.equal(true);
    expect(r.error?.code).to.equal("fetch_address_refused");
  });

  it("a run that ends while detection is pending aborts it and leaves nothing for the next run", async function () {
    const node = await startSilentNode();
    try {
      const fetch = { allowHosts: [`127.0.0.1:${node.port}`], allowAddresses: ["127.0.0.1"] };
      const first = await run(
        `new ethers.providers.JsonRpcProvider(rpcUrl); await sleep(300); throw new Error("stop while detecting");`,
        { jsParams: { rpcUrl: `http://127.0.0.1:${node.port}/` }, fetch },
      );
      expect(first.error).to.deep.equal({ code: "action_threw", message: "Error: stop while detecting" });
      // The detection request was sent by the first run, and closed when that run ended.
      await waitFor(() => node.requests.length === 1 && node.closed() === 1, 3000);
      expect(JSON.parse(node.requests[0]).method).to.equal("eth_chainId");
      const next = await run(`await sleep(50); return "clean";`, { fetch });
      expect(ok(next)).to.equal("clean");
      expect(next.logs).to.equal("");
      expect(next.fetches).to.equal(0);
      expect(node.requests).to.have.length(1);
    } finally {
      await node.stop();
    }
  });
  it("a run killed at its wall-time limit while detection is pending leaves a healthy pool", async function () {
    const node = await startSilentNode();
    try {
      const fetch = { allowHosts: [`127.0.0.1:${node.port}`], allowAddresses: ["127.0.0.1"] };
      const killed = await run(
        `(async () => { const p = new ethers.providers.JsonRpcProvider(rpcUrl); await p.getBlockNumber(); })();`,
        { jsParams: { rpcUrl: `http://127.0.0.1:${node.port}/` }, fetch, limits: { wallTimeMs: 500 } },
      );
      expect(killed.error).to.deep.equal({
        code: "timeout",
        message: "the run exceeded 500 ms of wall time",
      });
      await waitFor(() => node.closed() === node.requests.length && node.requests.length === 1, 3000);
      await expectHealthy(executor, run);
      expect(node.requests).to.have.length(1);
    } finally {
      await node.stop();
    }
  });
});
