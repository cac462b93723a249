/**
 * `Actions.sendTransaction` (docs/actions.md, "EVM send") on a real anvil with real workers: the
 * operator's chain reached through a recording JSON-RPC proxy on 127.0.0.1, so the tests see every
 * method the service called (a refused send must never reach `eth_sendRawTransaction`).
 */
import { expect } from "chai";
import * as fs from "node:fs";
import * as http from "node:http";
import * as path from "node:path";
import type { AddressInfo } from "node:net";
import { JsonRpcProvider, NonceManager, Wallet, getAddress, parseEther } from "ethers";
import { ActionExecutor, type RunRequest } from "../../enclave/executor";
import type { GroupPolicy } from "../../enclave/policy";
import { SendTarget__factory, type SendTarget } from "../../typechain-types";
import { DEV_KEY, startChain, type TestChain } from "../helpers/anvil";
import { expectOk, makeKeys, makeRunner, pkpIds, type Runner } from "./helpers";

const CHAIN_ID = 31337;

/** A JSON-RPC proxy in front of `target` that records each method called through it. */
async function startRecordingProxy(target: string): Promise<{
  url: string;
  methods: string[];
  stop: () => Promise<void>;
}> {
  const methods: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      const body = Buffer.concat(chunks).toString("utf8");
      try {
        const parsed = JSON.parse(body) as { method?: string } | { method?: string }[];
        for (const m of Array.isArray(parsed) ? parsed : [parsed]) methods.push(String(m.method));
        const answer = await fetch(target, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body,
        });
        res.writeHead(answer.status, { "content-type": "application/json" });
        res.end(await answer.text());
      } catch {
        res.writeHead(502).end();
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    methods,
    stop: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** An action that sends what js_params say and answers the outcome, or the error's code and details. */
const SEND_ACTION = `async function main(p) {
  try {
    return { ok: await Actions.sendTransaction({ pkpId: p.pkpId, chainId: p.chainId, tx: p.tx, wait: p.wait }) };
  } catch (e) {
    return { code: e.code, message: e.message, details: e.details ?? null };
  }
}`;

interface SendOutcome {
  ok?: {
    hash: string;
    nonce: number;
    from: string;
    receipt?: {
      status: number;
      blockNumber: number;
      gasUsed: string;
      logs: { address: string; topics: string[]; data: string }[];
    };
  };
  code?: string;
  message?: string;
  details?: Record<string, unknown> | null;
}

describe("executor: Actions.sendTransaction", function () {
  this.timeout(180_000);
  const keys = makeKeys();
  const { allowed: PKP, second: UNFUNDED } = pkpIds();
  const pkpAddress = keys.pkpAddress(PKP);
  const RECIPIENT = getAddress("0x000000000000000000000000000000000000bEEF");
  let chain: TestChain;
  let proxy: Awaited<ReturnType<typeof startRecordingProxy>>;
  let provider: JsonRpcProvider;
  let target: SendTarget;
  let executor: ActionExecutor;
  let run: Runner;

  before(async () => {
    chain = await startChain();
    proxy = await startRecordingProxy(chain.rpcUrl);
    provider = new JsonRpcProvider(chain.rpcUrl, CHAIN_ID, { staticNetwork: true, cacheTimeout: -1 });
    const dev = new NonceManager(new Wallet(DEV_KEY, provider));
    target = await new SendTarget__factory(dev).deploy();
    await target.waitForDeployment();
    await (await dev.sendTransaction({ to: pkpAddress, value: parseEther("10") })).wait();
    executor = new ActionExecutor({
      keys,
      poolSize: 2,
      chains: [{ chainId: CHAIN_ID, rpcUrl: proxy.url }],
      send: { pollMs: 20 },
    });
    await executor.ready();
    run = makeRunner(executor, keys);
  });

  after(async () => {
    await executor?.close();
    await proxy?.stop();
    provider?.destroy();
    await chain?.stop();
  });

  const send = async (
    params: { tx: Record<string, unknown>; wait?: unknown; chainId?: number; pkpId?: string },
    extra: Partial<RunRequest> = {},
  ): Promise<SendOutcome> =>
    expectOk(
      await run(SEND_ACTION, {
        jsParams: { pkpId: PKP, chainId: CHAIN_ID, ...params },
        ...extra,
      }),
    ) as SendOutcome;

  it("sends a value transfer and, with wait: true, returns its receipt", async () => {
    const before = await provider.getBalance(RECIPIENT);
    const out = await send({ tx: { to: RECIPIENT, value: "1000" }, wait: true });
    expect(out.code, out.message).to.equal(undefined);
    expect(out.ok!.from).to.equal(pkpAddress);
    expect(out.ok!.hash).to.match(/^0x[0-9a-f]{64}$/);
    expect(out.ok!.receipt!.status).to.equal(1);
    expect(out.ok!.receipt!.gasUsed).to.equal("21000");
    expect(await provider.getBalance(RECIPIENT)).to.equal(before + 1000n);
    const mined = await provider.getTransaction(out.ok!.hash);
    expect(mined!.from).to.equal(pkpAddress);
    expect(mined!.nonce).to.equal(out.ok!.nonce);
    expect(mined!.type).to.equal(2); // anvil has EIP-1559 fees
    expect(out.ok!.receipt!.blockNumber).to.equal(mined!.blockNumber);
  });

  it("sends a contract call and returns its logs", async () => {
    const data = target.interface.encodeFunctionData("store", [42n]);
    const out = await send({ tx: { to: await target.getAddress(), data }, wait: { confirmations: 1 } });
    expect(out.code, out.message).to.equal(undefined);
    expect(await target.stored()).to.equal(42n);
    const logs = out.ok!.receipt!.logs;
    expect(logs).to.have.length(1);
    const parsed = target.interface.parseLog(logs[0])!;
    expect(parsed.name).to.equal("Stored");
    expect(parsed.args.from).to.equal(pkpAddress);
    expect(parsed.args.value).to.equal(42n);
  });

  it("50 concurrent sends from one PKP, over 5 runs, all land with consecutive nonces", async () => {
    const first = await provider.getTransactionCount(pkpAddress, "pending");
    const code = `async function main(p) {
      const sends = [];
      for (let i = 0; i < 10; i++)
        sends.push(Actions.sendTransaction({ pkpId: p.pkpId, chainId: p.chainId, tx: { to: p.to, value: 1 } }));
      return await Promise.all(sends);
    }`;
    const runs = await Promise.all(
      Array.from({ length: 5 }, () =>
        run(code, { jsParams: { pkpId: PKP, chainId: CHAIN_ID, to: RECIPIENT } }),
      ),
    );
    const sent = runs.flatMap((r) => expectOk(r) as { hash: string; nonce: number }[]);
    expect(sent).to.have.length(50);
    const nonces = sent.map((s) => s.nonce).sort((a, b) => a - b);
    expect(nonces).to.deep.equal(Array.from({ length: 50 }, (_, i) => first + i));
    for (const s of sent) expect((await provider.getTransactionReceipt(s.hash))!.status).to.equal(1);
    expect(await provider.getTransactionCount(pkpAddress, "latest")).to.equal(first + 50);
  });

  it("refuses a reverting call at simulation with its reason, spending no gas", async () => {
    const to = await target.getAddress();
    const cases: [string, string][] = [
      [target.interface.encodeFunctionData("failWithReason"), 'Error("SendTarget: refused")'],
      [target.interface.encodeFunctionData("failWithPanic", [0n]), "Panic(0x12): division or modulo by zero"],
      [target.interface.encodeFunctionData("failWithCustom"), "custom error 0x"],
    ];
    for (const [data, reason] of cases) {
      const balance = await provider.getBalance(pkpAddress);
      const nonce = await provider.getTransactionCount(pkpAddress, "pending");
      proxy.methods.length = 0;
      const out = await send({ tx: { to, data } });
      expect(out.code, JSON.stringify(out)).to.equal("send_reverted");
      expect(String(out.details!.reason)).to.contain(reason);
      expect(out.message).to.contain(reason.slice(0, 12));
      expect(proxy.methods).to.not.include("eth_sendRawTransaction");
      expect(await provider.getBalance(pkpAddress)).to.equal(balance);
      expect(await provider.getTransactionCount(pkpAddress, "pending")).to.equal(nonce);
    }
    // The custom error's data is handed over whole, for the action to decode with its ABI.
    const out = await send({ tx: { to, data: target.interface.encodeFunctionData("failWithCustom") } });
    const decoded = target.interface.parseError(String(out.details!.data))!;
    expect(decoded.name).to.equal("NotAllowed");
    expect(decoded.args.caller).to.equal(pkpAddress);
  });

  it("a policy-denied send never reaches eth_sendRawTransaction, and leaves no nonce gap", async () => {
    // Transactions allowed on chain 1 only: this chain's send is refused by the same check as signTransaction.
    const grants: GroupPolicy[] = [
      {
        group: "7",
        policy: {
          version: 1,
          rules: [{ name: "mainnet-only", effect: "allow", operation: "transaction", chainIds: [1] }],
        },
      },
    ];
    const nonce = await provider.getTransactionCount(pkpAddress, "pending");
    proxy.methods.length = 0;
    const refused = await run(SEND_ACTION, {
      jsParams: { pkpId: PKP, chainId: CHAIN_ID, tx: { to: RECIPIENT, value: 5 } },
      policiesFor: () => grants,
    });
    const out = expectOk(refused) as SendOutcome;
    expect(out.code, JSON.stringify(out)).to.equal("policy_denied");
    expect(refused.policy_decisions?.map((d) => d.allowed)).to.deep.equal([false]);
    expect(proxy.methods).to.include("eth_estimateGas"); // it was prepared…
    expect(proxy.methods).to.not.include("eth_sendRawTransaction"); // …and never sent
    // The nonce it held was given back: the next send uses it.
    const next = await send({ tx: { to: RECIPIENT, value: 5 }, wait: true });
    expect(next.ok!.nonce).to.equal(nonce);
  });

  it("an unfunded PKP gets send_insufficient_funds with its address and the wei it needs", async () => {
    const out = await send({ pkpId: UNFUNDED, tx: { to: RECIPIENT, value: "1000" } });
    expect(out.code, JSON.stringify(out)).to.equal("send_insufficient_funds");
    expect(out.details!.address).to.equal(keys.pkpAddress(UNFUNDED));
    expect(BigInt(String(out.details!.needed_wei)) > 1000n).to.equal(true);
    expect(out.message).to.contain(keys.pkpAddress(UNFUNDED));
  });

  it("an unknown chain id gets chain_not_configured, and reaches no RPC", async () => {
    proxy.methods.length = 0;
    const out = await send({ chainId: 999_999, tx: { to: RECIPIENT, value: 1 } });
    expect(out.code, JSON.stringify(out)).to.equal("chain_not_configured");
    expect(out.message).to.contain("999999");
    expect(proxy.methods).to.deep.equal([]);
    // Uncaught, it is the run's error, with its own code.
    const uncaught = await run(
      `async function main(p) { await Actions.sendTransaction({ pkpId: p.pkpId, chainId: 5, tx: { to: p.to } }); }`,
      { jsParams: { pkpId: PKP, to: RECIPIENT } },
    );
    expect(uncaught.has_error).to.equal(true);
    expect(uncaught.error!.code).to.equal("chain_not_configured");
  });

  it("a wait that would outlive the run ends with send_wait_timeout and the hash", async () => {
    // anvil mines one block per transaction: 5 confirmations never come while nothing else is sent.
    const r = await run(SEND_ACTION, {
      jsParams: {
        pkpId: PKP,
        chainId: CHAIN_ID,
        tx: { to: RECIPIENT, value: 1 },
        wait: { confirmations: 5 },
      },
      limits: { wallTimeMs: 2_000 },
    });
    const out = expectOk(r) as SendOutcome;
    expect(out.code, JSON.stringify(out)).to.equal("send_wait_timeout");
    const hash = String(out.details!.hash);
    expect(hash).to.match(/^0x[0-9a-f]{64}$/);
    expect((await provider.getTransactionReceipt(hash))!.status).to.equal(1); // it was sent all the same
    expect(r.execution_ms).to.be.lessThan(2_000);
  });

  it("re-reads the nonce once when another sender used the PKP's next nonce", async () => {
    // The PKP's key sends one transaction behind the nonce manager's back (as another instance would).
    const wallet = new Wallet(keys.pkpPrivateKey(PKP), provider);
    await (await wallet.sendTransaction({ to: RECIPIENT, value: 1 })).wait();
    const expected = await provider.getTransactionCount(pkpAddress, "pending");
    proxy.methods.length = 0;
    const out = await send({ tx: { to: RECIPIENT, value: 1 }, wait: true });
    expect(out.code, JSON.stringify(out)).to.equal(undefined);
    expect(out.ok!.nonce, JSON.stringify(proxy.methods)).to.equal(expected);
  });

  it("refuses a nonce or a chain id the action gives (the send fills them)", async () => {
    const withNonce = await send({ tx: { to: RECIPIENT, value: 1, nonce: 3 } });
    expect(withNonce.code).to.equal("invalid_argument");
    expect(withNonce.message).to.contain("nonce");
    const otherChain = await send({ tx: { to: RECIPIENT, value: 1, chainId: 1 } });
    expect(otherChain.code).to.equal("invalid_argument");
  });

  it("a fee below the base fee gets send_underpriced, and its nonce is given back", async () => {
    const nonce = await provider.getTransactionCount(pkpAddress, "pending");
    const out = await send({ tx: { to: RECIPIENT, value: 1, maxFeePerGas: 1, maxPriorityFeePerGas: 1 } });
    expect(out.code, JSON.stringify(out)).to.equal("send_underpriced");
    const next = await send({ tx: { to: RECIPIENT, value: 1 }, wait: true });
    expect(next.ok!.nonce).to.equal(nonce);
  });

  it("uses legacy fees on a chain without EIP-1559", async () => {
    const legacy = await startChain({ args: ["--hardfork", "berlin"] });
    const other = new ActionExecutor({
      keys,
      poolSize: 1,
      chains: [{ chainId: CHAIN_ID, rpcUrl: legacy.rpcUrl }],
    });
    const legacyProvider = new JsonRpcProvider(legacy.rpcUrl, CHAIN_ID, {
      staticNetwork: true,
      cacheTimeout: -1,
    });
    try {
      await legacyProvider.send("anvil_setBalance", [pkpAddress, "0x" + (10n ** 18n).toString(16)]);
      await other.ready();
      const runOther = makeRunner(other, keys);
      const r = await runOther(SEND_ACTION, {
        jsParams: { pkpId: PKP, chainId: CHAIN_ID, tx: { to: RECIPIENT, value: 3 }, wait: true },
      });
      const out = expectOk(r) as SendOutcome;
      expect(out.code, JSON.stringify(out)).to.equal(undefined);
      const mined = await legacyProvider.getTransaction(out.ok!.hash);
      expect(mined!.type).to.equal(0);
      expect(await legacyProvider.getBalance(RECIPIENT)).to.equal(3n);
    } finally {
      legacyProvider.destroy();
      await other.close();
      await legacy.stop();
    }
  });

  it("honours an action's legacy type on an EIP-1559 chain (a gas price from the node)", async () => {
    const out = await send({ tx: { to: RECIPIENT, value: 1, type: 0 }, wait: true });
    expect(out.code, JSON.stringify(out)).to.equal(undefined);
    const mined = await provider.getTransaction(out.ok!.hash);
    expect(mined!.type).to.equal(0);
    expect(mined!.gasPrice > 0n).to.equal(true);
  });

  it("runs docs/actions.md's EVM send example as written", async () => {
    const doc = fs.readFileSync(path.join(__dirname, "..", "..", "docs", "actions.md"), "utf8");
    const section = doc.slice(doc.indexOf("## EVM send"));
    const code = /```js\n([\s\S]*?)```/.exec(section)![1];
    const counter = await target.getAddress();
    const r = await run(code, { jsParams: { pkpId: PKP, to: RECIPIENT, counter, chainId: CHAIN_ID } });
    const out = expectOk(r) as { paid: string; call: string; block: number; value: string };
    expect(out.value).to.equal("42");
    expect((await provider.getTransactionReceipt(out.paid))!.status).to.equal(1);
    expect((await provider.getTransactionReceipt(out.call))!.blockNumber).to.equal(out.block);
  });

  it("counts each send as a key operation", async () => {
    const r = await run(SEND_ACTION, {
      jsParams: { pkpId: PKP, chainId: CHAIN_ID, tx: { to: RECIPIENT, value: 1 } },
    });
    expectOk(r);
    expect(r.key_ops).to.equal(1);
  });
});
