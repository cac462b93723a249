/**
 * Path-A batching (relayer/chain/batch.ts, Sender): writes of several principals that are ready at the
 * same time go in ONE forwarder.executeBatch transaction, each caller gets its own events, a request that
 * reverts on chain (or is skipped by the forwarder) fails alone with the same typed error as an unbatched
 * write, and a principal's writes keep their order.
 *
 * To make "ready at the same time" deterministic, the sender's forward-request signer is wrapped in a
 * barrier: the first `n` signatures are held until all `n` writes have been simulated, then released
 * together (and, for the failure cases, the chain is changed behind the sender's back first). Released in
 * one tick, they are queued together and the sender's single send slot takes them in one transaction.
 */
import { expect } from "chai";
import { Contract, NonceManager, Wallet, parseEther, type JsonRpcProvider } from "ethers";
import { forwarderInterface, registryInterface } from "../../relayer/chain/abi";
import {
  EXECUTED_FORWARD_REQUEST_TOPIC,
  encodeExecute,
  encodeExecuteBatch,
  splitBatchLogs,
} from "../../relayer/chain/batch";
import { makeProvider } from "../../relayer/chain/rpc";
import { Sender, registryEvents, type ForwardSigner, type WriteResult } from "../../relayer/chain/sender";
import { ApiError } from "../../relayer/errors";
import { AccountRegistry__factory } from "../../typechain-types";
import { DEV_KEY } from "../helpers/anvil";
import { startStack, type Stack } from "../helpers/stack";

describe("relayer: path-A batching (executeBatch)", function () {
  this.timeout(120_000);
  let s: Stack;
  let funder: NonceManager;
  const cleanups: Array<() => unknown> = [];
  let nextWallet = 30; // gas wallet indexes the relayer under test does not use

  before(async () => {
    s = await startStack();
    funder = new NonceManager(new Wallet(DEV_KEY, s.provider));
  });
  after(async () => {
    for (const c of cleanups.reverse()) await c();
    await s?.close();
  });

  interface Principal {
    apiKey: string;
    principal: string;
    kind: "account" | "usage";
    accountId: number;
  }

  async function newAccount(): Promise<Principal> {
    const r = await s.api("POST", "/core/v1/new_account", { body: {} });
    expect(r.status).to.equal(201);
    return {
      apiKey: r.body.api_key,
      principal: s.enclave.principalAddress(r.body.api_key),
      kind: "account",
      accountId: Number(r.body.account_id),
    };
  }

  /**
   * A Sender on its own funded gas wallet, one send slot, whose first `barrier` signatures wait for each
   * other; `beforeRelease` runs (and is awaited) before they are released.
   */
  async function batchingSender(opts: {
    barrier: number;
    beforeRelease?: () => Promise<void>;
    maxBatchSize?: number;
  }) {
    const index = nextWallet++;
    await (await funder.sendTransaction({ to: s.enclave.gasAddress(index), value: parseEther("10") })).wait();
    const rpc = makeProvider(s.chain.rpcUrl, 31337, 5_000);
    cleanups.push(rpc.close);
    const batches: number[] = [];
    let waiting = 0;
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const signer: ForwardSigner = {
      async signForwardRequest(apiKey, req, domain) {
        const signed = await s.enclave.signForwardRequest(apiKey, req, domain);
        if (waiting < opts.barrier) {
          waiting++;
          if (waiting === opts.barrier) {
            await opts.beforeRelease?.();
            release();
          }
          await released;
        }
        return signed;
      },
    };
    const sender = new Sender({
      provider: rpc.provider,
      signer,
      gasSigners: [s.enclave.gasSigner(index, rpc.provider)],
      chainId: 31337,
      registry: s.deployment.registry,
      forwarder: s.deployment.forwarder,
      receiptTimeoutMs: 10_000,
      rpcTimeoutMs: 5_000,
      sendConcurrency: 1,
      maxBatchSize: opts.maxBatchSize,
      onBatch: (n) => batches.push(n),
    });
    await sender.init();
    return { sender, batches };
  }

  const createPkp = (sender: Sender, p: Principal, name: string) =>
    sender.write({
      apiKey: p.apiKey,
      principal: p.principal,
      kind: p.kind,
      data: registryInterface.encodeFunctionData("createPkp", [name, ""]),
    });

  /** A forward request of `p` executed by someone else (not the sender under test): uses p's nonce. */
  async function executeBehindTheSendersBack(p: Principal, data: string, provider: JsonRpcProvider) {
    const fwd = new Contract(s.deployment.forwarder, forwarderInterface, provider);
    const nonce = (await fwd.nonces(p.principal)) as bigint;
    const signed = await s.enclave.signForwardRequest(
      p.apiKey,
      {
        to: s.deployment.registry,
        data,
        value: 0n,
        gas: 1_000_000n,
        nonce,
        deadline: Math.floor(Date.now() / 1000) + 600,
      },
      { name: "SigilForwarder", version: "1", chainId: 31337, verifyingContract: s.deployment.forwarder },
    );
    const rc = await (
      await funder.sendTransaction({
        to: s.deployment.forwarder,
        data: encodeExecute(signed),
        gasLimit: 3_000_000,
      })
    ).wait();
    expect(rc?.status).to.equal(1);
  }

  /** The one PkpCreated of a write's own logs, checked against the chain. */
  async function ownPkp(r: WriteResult, p: Principal): Promise<string> {
    const events = registryEvents(r.logs, s.deployment.registry);
    expect(events.map((e) => e.name)).to.deep.equal(["PkpCreated"]);
    expect(Number(events[0].args.accountId)).to.equal(p.accountId);
    // Its own ExecutedForwardRequest closes its logs, signed by its principal.
    const last = r.logs[r.logs.length - 1];
    expect(last.topics[0].toLowerCase()).to.equal(EXECUTED_FORWARD_REQUEST_TOPIC);
    expect("0x" + last.topics[1].slice(26)).to.equal(p.principal.toLowerCase());
    const pkpId = events[0].args.pkpId as string;
    const onChain = await AccountRegistry__factory.connect(s.deployment.registry, s.provider).getPkp(pkpId);
    expect(Number(onChain.accountId)).to.equal(p.accountId);
    return pkpId;
  }

  async function txSelector(txHash: string): Promise<string> {
    const tx = await s.provider.getTransaction(txHash);
    return tx!.data.slice(0, 10);
  }
  const EXECUTE_BATCH = forwarderInterface.getFunction("executeBatch")!.selector;

  it("writes of four principals ready together land in ONE executeBatch transaction, each with its own PKP", async () => {
    const ps = await Promise.all([newAccount(), newAccount(), newAccount(), newAccount()]);
    const { sender, batches } = await batchingSender({ barrier: 4 });
    const rs = await Promise.all(ps.map((p, i) => createPkp(sender, p, `batched ${i}`)));
    expect(batches).to.deep.equal([4]);
    expect(new Set(rs.map((r) => r.txHash)).size).to.equal(1);
    expect(await txSelector(rs[0].txHash)).to.equal(EXECUTE_BATCH);
    const ids = await Promise.all(rs.map((r, i) => ownPkp(r, ps[i])));
    expect(new Set(ids).size).to.equal(4);
    // Each caller's logs are its own contiguous slice of the receipt; together, the whole receipt.
    const receipt = await s.provider.getTransactionReceipt(rs[0].txHash);
    const slices = rs.map((r) => r.logs.map((l) => Number(BigInt(l.logIndex))));
    for (const sl of slices) expect(sl).to.deep.equal(sl.map((_, j) => sl[0] + j));
    expect(slices.flat().sort((x, y) => x - y)).to.deep.equal(receipt!.logs.map((l) => l.index));
  });

  it("a lone write is sent with plain execute", async () => {
    const p = await newAccount();
    const { sender, batches } = await batchingSender({ barrier: 0 });
    const r = await createPkp(sender, p, "alone");
    expect(batches).to.deep.equal([1]);
    expect(await txSelector(r.txHash)).to.equal(forwarderInterface.getFunction("execute")!.selector);
    await ownPkp(r, p);
  });

  it("maxBatchSize caps a transaction: five ready writes with a cap of 2 go as 2 + 2 + 1", async () => {
    const ps = await Promise.all(Array.from({ length: 5 }, () => newAccount()));
    const { sender, batches } = await batchingSender({ barrier: 5, maxBatchSize: 2 });
    const rs = await Promise.all(ps.map((p, i) => createPkp(sender, p, `capped ${i}`)));
    expect(batches).to.deep.equal([2, 2, 1]);
    expect(new Set(rs.map((r) => r.txHash)).size).to.equal(3);
    await Promise.all(rs.map((r, i) => ownPkp(r, ps[i])));
  });

  it("a request whose call reverts on chain fails alone with the typed error; the others of its batch land", async () => {
    const [a, b, c] = await Promise.all([newAccount(), newAccount(), newAccount()]);
    // A usage key of account A that may create PKPs: it passes the simulation ...
    const k = await s.api("POST", "/core/v1/add_usage_api_key", {
      key: a.apiKey,
      body: { name: "doomed", can_create_pkps: true },
    });
    expect(k.status).to.equal(201);
    const usage: Principal = {
      apiKey: k.body.usage_api_key,
      principal: s.enclave.principalAddress(k.body.usage_api_key),
      kind: "usage",
      accountId: a.accountId,
    };
    // ... and is removed by the account's owner between simulation and inclusion.
    const { sender, batches } = await batchingSender({
      barrier: 3,
      beforeRelease: () =>
        executeBehindTheSendersBack(
          a,
          registryInterface.encodeFunctionData("removeKey", [usage.principal]),
          s.provider,
        ),
    });
    const [ru, rb, rc] = await Promise.allSettled([
      createPkp(sender, usage, "never"),
      createPkp(sender, b, "b"),
      createPkp(sender, c, "c"),
    ]);
    expect(batches).to.deep.equal([3]);
    expect(ru.status).to.equal("rejected");
    const err = (ru as PromiseRejectedResult).reason;
    expect(err).to.be.instanceOf(ApiError);
    expect([(err as ApiError).status, (err as ApiError).code]).to.deep.equal([401, "unknown_api_key"]);
    expect(rb.status).to.equal("fulfilled");
    expect(rc.status).to.equal("fulfilled");
    const okB = (rb as PromiseFulfilledResult<WriteResult>).value;
    const okC = (rc as PromiseFulfilledResult<WriteResult>).value;
    expect(okB.txHash).to.equal(okC.txHash);
    await ownPkp(okB, b);
    await ownPkp(okC, c);
    // On chain: the usage key's request ran and failed (nonce used), in the same transaction.
    const receipt = await s.provider.getTransactionReceipt(okB.txHash);
    const executed = receipt!.logs
      .filter((l) => l.topics[0].toLowerCase() === EXECUTED_FORWARD_REQUEST_TOPIC)
      .map((l) => forwarderInterface.parseLog(l)!.args);
    const outcome = new Map(executed.map((e) => [e.signer.toLowerCase(), e.success]));
    expect(outcome.size).to.equal(3);
    expect(outcome.get(usage.principal.toLowerCase())).to.equal(false);
    expect(outcome.get(b.principal.toLowerCase())).to.equal(true);
    expect(outcome.get(c.principal.toLowerCase())).to.equal(true);
  });

  it("a request the forwarder skips (its nonce was used elsewhere) is resynchronised and retried; the others land", async () => {
    const [b, c, d] = await Promise.all([newAccount(), newAccount(), newAccount()]);
    const { sender, batches } = await batchingSender({
      barrier: 3,
      beforeRelease: () =>
        executeBehindTheSendersBack(
          d,
          registryInterface.encodeFunctionData("createPkp", ["outside", ""]),
          s.provider,
        ),
    });
    const [rb, rc, rd] = await Promise.all([
      createPkp(sender, b, "b"),
      createPkp(sender, c, "c"),
      createPkp(sender, d, "d"),
    ]);
    // The batch of three carried d's stale request (skipped: no event, nonce unused); d's retry went alone.
    expect(batches).to.deep.equal([3, 1]);
    expect(rb.txHash).to.equal(rc.txHash);
    expect(rd.txHash).to.not.equal(rb.txHash);
    await ownPkp(rb, b);
    await ownPkp(rc, c);
    await ownPkp(rd, d);
    const first = await s.provider.getTransactionReceipt(rb.txHash);
    const signers = first!.logs
      .filter((l) => l.topics[0].toLowerCase() === EXECUTED_FORWARD_REQUEST_TOPIC)
      .map((l) => forwarderInterface.parseLog(l)!.args.signer.toLowerCase());
    expect(signers.sort()).to.deep.equal([b.principal.toLowerCase(), c.principal.toLowerCase()].sort());
    // And the sender's cached nonce for d is right again: its next write lands first time.
    const again = await createPkp(sender, d, "d again");
    expect(batches).to.deep.equal([3, 1, 1]);
    await ownPkp(again, d);
  });

  it("a principal's writes keep their order while other principals' writes are batched around them", async () => {
    const [p, q, r] = await Promise.all([newAccount(), newAccount(), newAccount()]);
    const { sender, batches } = await batchingSender({ barrier: 3 });
    const mine = Array.from({ length: 6 }, (_, i) => createPkp(sender, p, `p${i}`));
    const others = [q, r].flatMap((o) => Array.from({ length: 3 }, (_, i) => createPkp(sender, o, `o${i}`)));
    const rs = await Promise.all(mine);
    await Promise.all(others);
    expect(batches.some((n) => n > 1)).to.equal(true);
    const names = rs.map((x) => registryEvents(x.logs, s.deployment.registry)[0].args.name);
    expect(names).to.deep.equal(["p0", "p1", "p2", "p3", "p4", "p5"]);
    for (let i = 1; i < rs.length; i++) expect(rs[i].blockNumber).to.be.greaterThan(rs[i - 1].blockNumber);
    // The chain lists p's PKPs in the same order.
    const [listed] = await AccountRegistry__factory.connect(s.deployment.registry, s.provider).listPkps(
      p.accountId,
      0,
      100,
    );
    expect(listed.map((x) => x.name)).to.deep.equal(names);
  });
});

describe("relayer: path-A batching, encoding and log splitting", () => {
  const req = (len: number) => ({
    from: Wallet.createRandom().address,
    to: Wallet.createRandom().address.toLowerCase(),
    value: BigInt(len),
    gas: 100_000n + BigInt(len),
    deadline: 2_000_000_000 + len,
    data: "0x" + "5e".repeat(len),
    signature: "0x" + "1b".repeat(65),
  });

  it("encodeExecuteBatch is byte-for-byte ethers' encoding of forwarder.executeBatch", () => {
    for (const lens of [[0], [1, 33], [31, 32, 64, 100, 260], Array.from({ length: 12 }, (_, i) => i * 7)]) {
      const rs = lens.map(req);
      const refund = Wallet.createRandom().address;
      expect(encodeExecuteBatch(rs, refund)).to.equal(
        forwarderInterface.encodeFunctionData("executeBatch", [rs, refund]),
      );
    }
  });

  it("splitBatchLogs gives each request the logs up to its own event, and marks skipped ones", () => {
    const forwarder = Wallet.createRandom().address;
    const registry = Wallet.createRandom().address;
    const [a, b, c] = [0, 1, 2].map(() => Wallet.createRandom().address);
    const word = (n: bigint) => n.toString(16).padStart(64, "0");
    let i = 0;
    const log = (address: string, topics: string[], data = "0x") => ({
      address,
      topics,
      data,
      blockNumber: "0x1",
      transactionHash: "0x" + "00".repeat(32),
      logIndex: "0x" + (i++).toString(16),
    });
    const executed = (signer: string, nonce: bigint, ok: boolean) =>
      log(
        forwarder,
        [EXECUTED_FORWARD_REQUEST_TOPIC, "0x" + signer.slice(2).toLowerCase().padStart(64, "0")],
        "0x" + word(nonce) + word(ok ? 1n : 0n),
      );
    const other = (n: number) => log(registry, ["0x" + word(BigInt(n))]);
    // a: two registry logs then ok; b: skipped (no event); c: failed (only its event).
    const logs = [other(1), other(2), executed(a, 5n, true), executed(c, 0n, false)];
    const out = splitBatchLogs(logs, forwarder, [
      { from: a, nonce: 5n },
      { from: b, nonce: 9n },
      { from: c, nonce: 0n },
    ]);
    expect(out[0]).to.deep.equal({ kind: "executed", success: true, logs: logs.slice(0, 3) });
    expect(out[1]).to.deep.equal({ kind: "skipped" });
    expect(out[2]).to.deep.equal({ kind: "executed", success: false, logs: logs.slice(3, 4) });
    // A nonce that does not match (e.g. the request was replaced) is not that request's event.
    expect(splitBatchLogs(logs, forwarder, [{ from: a, nonce: 6n }])[0]).to.deep.equal({ kind: "skipped" });
  });
});
