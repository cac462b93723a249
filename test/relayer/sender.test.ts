/**
 * The path-A sender on its own, against the real registry and forwarder: refusals are decoded from the
 * simulation into typed errors even without the relayer's pre-checks (the contract is authoritative), a
 * gas wallet whose nonce moved behind the sender's back is resynchronised, and many writes of one
 * principal are serialized so none fails on the forwarder nonce.
 */
import { expect } from "chai";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { parseEther, NonceManager, Wallet, keccak256 } from "ethers";
import { registryInterface } from "../../relayer/chain/abi";
import { makeProvider } from "../../relayer/chain/rpc";
import {
  Sender,
  encodeExecute,
  isMethodUnsupported,
  pendingHash,
  simulatedCall,
} from "../../relayer/chain/sender";
import { forwarderInterface } from "../../relayer/chain/abi";
import { SLOW_SYNC_SENDS_TO_STOP, SYNC_SEND_SLOW_MS } from "../../relayer/chain/send/broadcast";
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

/**
 * A JSON-RPC proxy in front of the real chain that can pretend not to know eth_sendRawTransactionSync, or
 * answer it with EIP-7966 error 4 (accepted, not yet mined) after forwarding the transaction. It records
 * every method it was asked for.
 */
async function rpcProxy(
  upstream: string,
  mode: "unsupported" | "pending" | "slow" | "noSimulateV1" | "noSimulatedGroups" | "firstSyncSlow",
): Promise<{ url: string; methods: string[]; close(): Promise<void> }> {
  const methods: string[] = [];
  const forward = async (body: unknown) => {
    const r = await fetch(upstream, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    return (await r.json()) as { result?: unknown; error?: unknown };
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      const call = JSON.parse(Buffer.concat(chunks).toString()) as {
        id: number;
        method: string;
        params: unknown[];
      };
      methods.push(call.method);
      let answer: unknown;
      if (
        call.method === "eth_simulateV1" &&
        mode === "noSimulatedGroups" &&
        (call.params[0] as { blockStateCalls: Array<{ calls: unknown[] }> }).blockStateCalls[0].calls.length >
          1
      ) {
        // A node that refuses a block of several calls (a limit of its own), as a node-level error.
        answer = { jsonrpc: "2.0", id: call.id, error: { code: -32000, message: "too many calls" } };
      } else if (call.method === "eth_simulateV1" && mode === "noSimulateV1") {
        answer = { jsonrpc: "2.0", id: call.id, error: { code: -32601, message: "Method not found" } };
      } else if (mode === "noSimulateV1") {
        answer = { ...(await forward(call)), id: call.id };
      } else if (call.method === "eth_sendRawTransactionSync" && mode === "unsupported") {
        answer = { jsonrpc: "2.0", id: call.id, error: { code: -32601, message: "Method not found" } };
      } else if (call.method === "eth_sendRawTransactionSync" && mode === "firstSyncSlow") {
        // Mined at once, as anvil does; the first answer late, as when anvil was busy saving its state.
        answer = { ...(await forward(call)), id: call.id };
        if (methods.filter((m) => m === "eth_sendRawTransactionSync").length === 1)
          await new Promise((r) => setTimeout(r, SYNC_SEND_SLOW_MS + 200));
      } else if (call.method === "eth_sendRawTransactionSync" && mode === "slow") {
        // Forwarded (so the chain has it), then no answer until after the client's timeout.
        await forward({ ...call, method: "eth_sendRawTransaction" });
        await new Promise((r) => setTimeout(r, 1_500));
        answer = { jsonrpc: "2.0", id: call.id, error: { code: -32000, message: "too late" } };
      } else if (call.method === "eth_sendRawTransactionSync") {
        const sent = await forward({ ...call, method: "eth_sendRawTransaction" });
        answer = sent.error
          ? { jsonrpc: "2.0", id: call.id, error: sent.error }
          : {
              jsonrpc: "2.0",
              id: call.id,
              error: { code: 4, message: "transaction not mined within the timeout", data: sent.result },
            };
      } else {
        answer = { ...(await forward(call)), id: call.id };
      }
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify(answer));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    methods,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

describe("relayer: path-A sender, eth_sendRawTransactionSync", function () {
  this.timeout(120_000);
  let s: Stack;
  let accountKey: string;
  const cleanups: Array<() => unknown> = [];
  let nextWallet = 20; // gas wallet indexes the relayer under test does not use

  before(async () => {
    s = await startStack();
    accountKey = (await s.api("POST", "/core/v1/new_account", { body: {} })).body.api_key;
  });
  after(async () => {
    for (const c of cleanups.reverse()) await c();
    await s?.close();
  });

  async function senderOn(
    rpcUrl: string,
    syncSend?: "auto" | "off",
    rpcTimeoutMs = 2_000,
    syncSendSlowMs?: number,
    simulation?: "auto" | "estimateGas",
  ) {
    const index = nextWallet++;
    const funder = new NonceManager(new Wallet(DEV_KEY, s.provider));
    await (await funder.sendTransaction({ to: s.enclave.gasAddress(index), value: parseEther("10") })).wait();
    const rpc = makeProvider(rpcUrl, 31337, rpcTimeoutMs);
    cleanups.push(rpc.close);
    const methods: string[] = [];
    const send = rpc.provider.send.bind(rpc.provider);
    rpc.provider.send = (method: string, params: unknown[] | Record<string, unknown>) => {
      methods.push(method);
      return send(method, params);
    };
    const sender = new Sender({
      provider: rpc.provider,
      signer: s.enclave,
      gasSigners: [s.enclave.gasSigner(index, rpc.provider)],
      chainId: 31337,
      registry: s.deployment.registry,
      forwarder: s.deployment.forwarder,
      receiptTimeoutMs: 10_000,
      rpcTimeoutMs,
      syncSend,
      syncSendSlowMs,
      simulation,
    });
    await sender.init();
    return { sender, methods };
  }

  const write = (sender: Sender, name: string) =>
    sender.write({
      apiKey: accountKey,
      principal: s.enclave.principalAddress(accountKey),
      kind: "account",
      data: registryInterface.encodeFunctionData("createPkp", [name, ""]),
    });

  async function expectMined(txHash: string, blockNumber: number) {
    const r = await s.provider.getTransactionReceipt(txHash);
    expect(r?.status).to.equal(1);
    expect(r?.blockNumber).to.equal(blockNumber);
  }

  it("on anvil, a write is sent with eth_sendRawTransactionSync and no receipt is polled", async () => {
    // A generous slow-send threshold: on a loaded CI machine one send may take over the default 500 ms.
    const { sender, methods } = await senderOn(s.chain.rpcUrl, "auto", 10_000, 10_000);
    const r = await write(sender, "sync");
    await expectMined(r.txHash, r.blockNumber);
    expect(methods).to.include("eth_sendRawTransactionSync");
    expect(methods).to.not.include("eth_sendRawTransaction");
    expect(methods).to.not.include("eth_getTransactionReceipt");
    expect(sender.usesSyncSend()).to.equal(true);
  });

  it("three sync sends in a row slower than the threshold (a chain that mines on an interval) turn sync sends off", async () => {
    const { sender } = await senderOn(s.chain.rpcUrl, "auto", 10_000, 0);
    for (let i = 0; i < SLOW_SYNC_SENDS_TO_STOP; i++) {
      expect(sender.usesSyncSend(), String(i)).to.equal(true);
      const r = await write(sender, `slow-sync ${i}`);
      await expectMined(r.txHash, r.blockNumber);
    }
    expect(sender.usesSyncSend()).to.equal(false);
  });

  it("one slow sync send among fast ones (anvil busy saving its state) keeps sync sends on", async () => {
    const proxy = await rpcProxy(s.chain.rpcUrl, "firstSyncSlow");
    cleanups.push(proxy.close);
    const { sender } = await senderOn(proxy.url);
    for (let i = 0; i < SLOW_SYNC_SENDS_TO_STOP + 1; i++) {
      const r = await write(sender, `one slow ${i}`);
      await expectMined(r.txHash, r.blockNumber);
    }
    expect(sender.usesSyncSend()).to.equal(true);
    expect(proxy.methods.filter((m) => m === "eth_sendRawTransactionSync")).to.have.length(
      SLOW_SYNC_SENDS_TO_STOP + 1,
    );
  });

  it("a node without the method (-32601): the write lands by send + receipt polling, and sync stays off", async () => {
    const proxy = await rpcProxy(s.chain.rpcUrl, "unsupported");
    cleanups.push(proxy.close);
    const { sender } = await senderOn(proxy.url);
    const first = await write(sender, "fallback 1");
    await expectMined(first.txHash, first.blockNumber);
    expect(sender.usesSyncSend()).to.equal(false);
    const second = await write(sender, "fallback 2");
    await expectMined(second.txHash, second.blockNumber);
    // Tried once, then never again; both transactions went out the ordinary way and were polled.
    expect(proxy.methods.filter((m) => m === "eth_sendRawTransactionSync")).to.have.length(1);
    expect(proxy.methods.filter((m) => m === "eth_sendRawTransaction")).to.have.length(2);
    expect(proxy.methods).to.include("eth_getTransactionReceipt");
  });

  it("EIP-7966 error 4 (accepted, not mined in time): the write lands by polling its hash, sync turns off", async () => {
    const proxy = await rpcProxy(s.chain.rpcUrl, "pending");
    cleanups.push(proxy.close);
    const { sender } = await senderOn(proxy.url);
    const r = await write(sender, "pending");
    await expectMined(r.txHash, r.blockNumber);
    expect(sender.usesSyncSend()).to.equal(false);
    expect(proxy.methods.filter((m) => m === "eth_sendRawTransactionSync")).to.have.length(1);
    expect(proxy.methods).to.include("eth_getTransactionReceipt");
  });

  it("a sync send that times out is not sent again: its hash is polled, the write lands once, sync turns off", async () => {
    const proxy = await rpcProxy(s.chain.rpcUrl, "slow");
    cleanups.push(proxy.close);
    const { sender } = await senderOn(proxy.url, "auto", 500);
    const r = await write(sender, "slow");
    await expectMined(r.txHash, r.blockNumber);
    expect(sender.usesSyncSend()).to.equal(false);
    expect(proxy.methods.filter((m) => m === "eth_sendRawTransactionSync")).to.have.length(1);
    expect(proxy.methods).to.not.include("eth_sendRawTransaction");
    expect(proxy.methods).to.include("eth_getTransactionReceipt");
  });

  it("on anvil, writes are simulated with eth_simulateV1 (one execution), never with eth_estimateGas", async () => {
    const { sender, methods } = await senderOn(s.chain.rpcUrl);
    const r = await write(sender, "simulated");
    await expectMined(r.txHash, r.blockNumber);
    expect(methods.filter((m) => m === "eth_simulateV1")).to.have.length(1);
    expect(methods).to.not.include("eth_estimateGas");
  });

  it("a node without eth_simulateV1 (-32601): simulation falls back to eth_estimateGas for good", async () => {
    const proxy = await rpcProxy(s.chain.rpcUrl, "noSimulateV1");
    cleanups.push(proxy.close);
    const { sender } = await senderOn(proxy.url);
    for (const name of ["estimated 1", "estimated 2"]) {
      const r = await write(sender, name);
      await expectMined(r.txHash, r.blockNumber);
    }
    expect(proxy.methods.filter((m) => m === "eth_simulateV1")).to.have.length(1);
    expect(proxy.methods.filter((m) => m === "eth_estimateGas")).to.have.length(2);
  });

  it("writes of several principals share one eth_simulateV1; a node refusing the group simulates each alone", async () => {
    const keys = [accountKey];
    for (let i = 0; i < 2; i++)
      keys.push((await s.api("POST", "/core/v1/new_account", { body: {} })).body.api_key as string);
    const writeAs = (sender: Sender, key: string, name: string) =>
      sender.write({
        apiKey: key,
        principal: s.enclave.principalAddress(key),
        kind: "account",
        data: registryInterface.encodeFunctionData("createPkp", [name, ""]),
      });
    const together = await senderOn(s.chain.rpcUrl);
    for (const r of await Promise.all(keys.map((k, i) => writeAs(together.sender, k, `together ${i}`))))
      await expectMined(r.txHash, r.blockNumber);
    expect(together.methods.filter((m) => m === "eth_simulateV1")).to.have.length(1);

    const proxy = await rpcProxy(s.chain.rpcUrl, "noSimulatedGroups");
    cleanups.push(proxy.close);
    const { sender } = await senderOn(proxy.url);
    for (const r of await Promise.all(keys.map((k, i) => writeAs(sender, k, `alone ${i}`))))
      await expectMined(r.txHash, r.blockNumber);
    // The group once (refused), then each write on its own; never eth_estimateGas.
    expect(proxy.methods.filter((m) => m === "eth_simulateV1")).to.have.length(1 + keys.length);
    expect(proxy.methods).to.not.include("eth_estimateGas");
  });

  it("a refusal decoded from eth_simulateV1 is the same typed error as from eth_estimateGas", async () => {
    const stranger = s.enclave.generateUsageKey(); // a well-formed key the registry has never seen
    const refusedBy = async (simulation: "auto" | "estimateGas") => {
      const { sender, methods } = await senderOn(s.chain.rpcUrl, undefined, 2_000, undefined, simulation);
      let caught: unknown;
      await sender
        .write({
          apiKey: stranger.apiKey,
          principal: stranger.address,
          kind: "usage",
          data: registryInterface.encodeFunctionData("createPkp", ["refused", ""]),
        })
        .catch((e) => (caught = e));
      expect(caught, simulation).to.be.instanceOf(ApiError);
      expect(methods, "nothing was sent").to.not.include("eth_sendRawTransactionSync");
      const e = caught as ApiError;
      return { status: e.status, code: e.code, message: e.message, details: e.details };
    };
    const viaSimulate = await refusedBy("auto");
    expect(viaSimulate.status).to.be.within(400, 499);
    expect(viaSimulate).to.deep.equal(await refusedBy("estimateGas"));
  });

  it('syncSend "off" never tries the method', async () => {
    const { sender, methods } = await senderOn(s.chain.rpcUrl, "off");
    const r = await write(sender, "off");
    await expectMined(r.txHash, r.blockNumber);
    expect(methods).to.not.include("eth_sendRawTransactionSync");
    expect(methods).to.include("eth_sendRawTransaction");
  });

  it("encodeExecute is byte-for-byte ethers' encoding of forwarder.execute, for data of every length", () => {
    for (const len of [0, 1, 31, 32, 33, 64, 100, 260]) {
      const req = {
        from: Wallet.createRandom().address,
        to: Wallet.createRandom().address.toLowerCase(),
        value: BigInt(len) * 10n ** 18n,
        gas: 123_456n + BigInt(len),
        deadline: 2_000_000_000 + len,
        data: "0x" + "a7".repeat(len),
        signature: "0x" + "1c".repeat(65),
      };
      expect(encodeExecute(req)).to.equal(forwarderInterface.encodeFunctionData("execute", [req]));
    }
  });

  it("reads eth_simulateV1 answers: gas used, revert data (error.data or returnData), else null", () => {
    const call = (c: Record<string, unknown>) => [{ number: "0x1", calls: [c] }];
    expect(simulatedCall(call({ status: "0x1", gasUsed: "0x18a1f", returnData: "0x" }))).to.deep.equal({
      ok: true,
      gasUsed: 100_895n,
    });
    const revert = "0x10102b4d" + "12".repeat(32);
    expect(simulatedCall(call({ status: "0x0", gasUsed: "0x1", returnData: revert }))).to.deep.equal({
      ok: false,
      revertData: revert,
    });
    expect(
      simulatedCall(
        call({ status: "0x0", returnData: "0x", error: { code: 3, message: "reverted", data: revert } }),
      ),
    ).to.deep.equal({ ok: false, revertData: revert });
    expect(simulatedCall(call({ status: "0x0", returnData: "0x" }))).to.deep.equal({
      ok: false,
      revertData: undefined,
    });
    for (const odd of [
      null,
      [],
      [{}],
      [{ calls: [] }],
      call({ status: "0x1" }),
      call({ status: "0x2" }),
      "0x1",
    ])
      expect(simulatedCall(odd), JSON.stringify(odd)).to.equal(null);
  });

  it("classifies sync-send errors: -32601 is unsupported, code 4 carries the hash, others are neither", () => {
    const hash = keccak256("0x01");
    const wrapped = (error: unknown) => ({ code: "UNKNOWN_ERROR", info: { error } });
    expect(isMethodUnsupported(wrapped({ code: -32601, message: "Method not found" }))).to.equal(true);
    expect(isMethodUnsupported(wrapped({ code: -32000, message: "nonce too low" }))).to.equal(false);
    expect(pendingHash(wrapped({ code: 4, message: "timeout", data: hash }))).to.equal(hash);
    expect(pendingHash(wrapped({ code: 4, message: "timeout", data: "0x1234" }))).to.equal(null);
    expect(pendingHash(wrapped({ code: -32000, message: "nonce too low", data: hash }))).to.equal(null);
  });
});
