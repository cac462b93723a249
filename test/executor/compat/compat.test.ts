/**
 * Compatibility corpus: real actions of the reference runtime (its load-test actions, its documentation's
 * examples and its runtime tests), kept unchanged in ./actions (as `.action` files: the test runner
 * loads every .js file under test/ as a test) with their source in a header comment,
 * each pinned and run through the HTTP API of a real stack (anvil, contracts, relayer, SES workers) with
 * an execute-only usage key, and checked against the result the reference documents. Where Sigil's
 * answer differs by design, the case says why (docs/actions.md, "Compatibility").
 *
 * The chain the actions read and write is the stack's anvil, on loopback: this test's executor
 * configuration (only here) allows 127.0.0.1 and ::1 for fetch.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { expect } from "chai";
import { Wallet, computeAddress, parseEther, verifyMessage } from "ethers";
import { DEV_KEY } from "../../helpers/anvil";
import { startStack, type Stack } from "../../helpers/stack";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

interface Ctx {
  s: Stack;
  pkpId: string;
  pkpAddress: string;
  pkpPublicKey: string;
  cids: Map<string, string>;
  saved: Map<string, Json>;
}

interface Case {
  action: string;
  params?: (c: Ctx) => Json;
  /** Checks the HTTP body; may save values for later cases. */
  check: (body: Json, c: Ctx) => unknown;
}

const ACTIONS = path.join(__dirname, "actions");

function succeeded(body: Json): void {
  expect(body.has_error, JSON.stringify(body)).to.equal(false);
}

function failed(body: Json, code: string, message?: string): void {
  expect(body.has_error, JSON.stringify(body)).to.equal(true);
  expect(body.response).to.equal(null);
  expect(body.error.code).to.equal(code);
  if (message !== undefined) expect(body.error.message).to.equal(message);
}

const CASES: Case[] = [
  // --- the reference's load-test actions (k6/LitActionCode)
  { action: "k6-hello-world", check: (b) => (succeeded(b), expect(b.response).to.equal("Hello World!")) },
  {
    action: "k6-ecdsa-sign",
    check: (b, c) => {
      succeeded(b);
      const { wallet_address, signature, publicKey } = b.response;
      expect(wallet_address).to.equal(c.s.enclave.actionAddress(c.cids.get("k6-ecdsa-sign")!));
      expect(verifyMessage("Chipotle Rocks!", signature)).to.equal(wallet_address);
      expect(computeAddress(publicKey)).to.equal(wallet_address); // v5's Wallet.publicKey
    },
  },
  {
    action: "k6-encrypt",
    params: (c) => ({ pkpId: c.pkpId, challenge: "chipotle" }),
    check: (b, c) => {
      succeeded(b);
      expect(b.response).to.be.a("string");
      c.saved.set("k6-ciphertext", b.response);
    },
  },
  {
    action: "k6-decrypt",
    params: (c) => ({ pkpId: c.pkpId, ciphertext: c.saved.get("k6-ciphertext") }),
    check: (b) => (succeeded(b), expect(b.response).to.equal("chipotle")),
  },
  // --- the reference's documentation: examples
  {
    action: "doc-examples-1",
    params: (c) => ({ pkpId: c.pkpId, message: "sign me" }),
    check: (b, c) => {
      succeeded(b);
      expect(b.response.message).to.equal("sign me");
      expect(verifyMessage("sign me", b.response.signature)).to.equal(c.pkpAddress);
    },
  },
  {
    action: "doc-examples-2",
    params: (c) => ({ pkpId: c.pkpId, secret: "s3cret" }),
    check: (b, c) => (succeeded(b), c.saved.set("examples-ciphertext", b.response.ciphertext)),
  },
  {
    action: "doc-examples-3",
    params: (c) => ({ pkpId: c.pkpId, ciphertext: c.saved.get("examples-ciphertext") }),
    check: (b) => (succeeded(b), expect(b.response).to.deep.equal({ plaintext: "s3cret" })),
  },
  {
    action: "doc-examples-7",
    params: (c) => ({
      pkpId: c.pkpId,
      toAddress: c.saved.get("recipient"),
      amountEth: "0.001",
      chainId: 31337,
      rpcUrl: c.s.chain.rpcUrl,
    }),
    check: async (b, c) => {
      succeeded(b);
      expect(b.response.from).to.equal(c.pkpAddress);
      const receipt = await c.s.provider.getTransactionReceipt(b.response.txHash);
      expect(receipt?.status).to.equal(1);
      expect(receipt?.blockNumber).to.equal(b.response.blockNumber);
      expect(await c.s.provider.getBalance(c.saved.get("recipient"))).to.equal(parseEther("0.001"));
    },
  },
  // --- patterns
  {
    action: "doc-patterns-4",
    params: (c) => ({ pkpAddress: c.pkpAddress }),
    check: (b) => failed(b, "action_threw", "Error: Unauthorized: PKP not allowed to run this action"),
  },
  {
    action: "doc-patterns-5",
    params: (c) => ({ message: "nonce 1", signature: c.saved.get("stranger-signature") }),
    check: (b) =>
      failed(b, "action_threw", "Error: Unauthorized: caller signature does not match allowed address"),
  },
  {
    action: "doc-patterns-6",
    params: (c) => ({ pkpId: c.pkpId, plaintext: "vault" }),
    check: (b) => (succeeded(b), expect(b.response.ciphertext).to.be.a("string")),
  },
  {
    action: "doc-patterns-9",
    params: (c) => ({ pkpId: c.pkpId, apiKey: "key-123" }),
    check: (b, c) => (succeeded(b), c.saved.set("k6-ciphertext", b.response.ciphertext)),
  },
  {
    // The apiKey sealed by doc-patterns-9 opens with the load test's decrypt action.
    action: "k6-decrypt",
    params: (c) => ({ pkpId: c.pkpId, ciphertext: c.saved.get("k6-ciphertext") }),
    check: (b) => (succeeded(b), expect(b.response).to.equal("key-123")),
  },
  // --- migration guide (sketches included: their result is an error, never a silent null)
  {
    action: "doc-changes-1",
    check: (b) => failed(b, "action_threw", "ReferenceError: doSomething is not defined"),
  },
  {
    action: "doc-changes-2",
    params: (c) => ({ pkpId: c.pkpId, message: "globals" }),
    check: (b, c) => (succeeded(b), expect(verifyMessage("globals", b.response.sig)).to.equal(c.pkpAddress)),
  },
  {
    action: "doc-changes-3",
    params: (c) => ({ pkpId: c.pkpId, message: "m3" }),
    check: (b, c) => (succeeded(b), expect(verifyMessage("m3", b.response.sig)).to.equal(c.pkpAddress)),
  },
  {
    action: "doc-changes-4",
    check: (b) => failed(b, "action_threw", "ReferenceError: condition is not defined"),
  },
  { action: "doc-changes-6", check: (b) => (succeeded(b), expect(b.response).to.equal(null)) },
  {
    action: "doc-changes-7",
    params: (c) => ({ pkpId: c.pkpId, message: "m7" }),
    check: (b, c) => (succeeded(b), expect(verifyMessage("m7", b.response)).to.equal(c.pkpAddress)),
  },
  {
    action: "doc-changes-8",
    params: (c) => ({ rpcUrl: c.s.chain.rpcUrl, address: c.pkpAddress }),
    check: (b) => (succeeded(b), expect(b.response).to.equal(null)),
  },
  {
    action: "doc-changes-9",
    params: (c) => ({ publicKey: c.pkpPublicKey }),
    check: (b) => (succeeded(b), expect(b.response).to.equal(null)),
  },
  {
    action: "doc-changes-11",
    check: (b) => failed(b, "syntax_error", "SyntaxError: Identifier 'str' has already been declared"),
  },
  {
    action: "doc-changes-12",
    check: (b) => failed(b, "syntax_error", "SyntaxError: Identifier 'bytes' has already been declared"),
  },
  {
    action: "doc-encryption-1",
    params: (c) => ({ pkpId: c.pkpId, message: "m" }),
    check: (b) => failed(b, "action_threw", "ReferenceError: someGatedCheck is not defined"),
  },
  {
    action: "doc-encryption-2",
    params: (c) => ({ pkpId: c.pkpId, ciphertext: "00" }),
    check: (b) => failed(b, "action_threw", "ReferenceError: someGatedCheck is not defined"),
  },
  // --- the reference's runtime tests (lit-actions/tests/it.rs)
  { action: "runtime-test-nop", check: (b) => (succeeded(b), expect(b.response).to.equal(null)) },
  {
    action: "runtime-test-console-log",
    check: (b) => (succeeded(b), expect(b.logs).to.equal("Lit Actions!\n")),
  },
  {
    action: "runtime-test-lit-namespace",
    check: (b) => (succeeded(b), expect(b.logs).to.equal("true true true true true true true\n")),
  },
  {
    // Same ten refusals, worded differently: SES's global object is not Deno's `#<Window>`, and SES turns
    // read-only globals into constants ("Assignment to constant variable").
    action: "runtime-test-lit-namespace-protection",
    check: (b) => {
      succeeded(b);
      const lines = (b.logs as string).trimEnd().split("\n");
      expect(lines).to.have.length(10);
      for (const line of lines)
        expect(line).to.match(
          /^TypeError: (Cannot (delete|assign to read only|set) property|Assignment to constant variable)/,
        );
    },
  },
  { action: "runtime-test-set-response", check: (b) => (succeeded(b), expect(b.response).to.equal("OK")) },
  { action: "runtime-test-webcrypto", check: (b) => (succeeded(b), expect(b.response).to.equal("32")) },
  {
    // The reference fails with "NotSupported: LocalStorage is not supported"; Sigil has no localStorage at all.
    action: "runtime-test-localstorage-shouldnt-panic",
    check: (b) => failed(b, "action_threw", "ReferenceError: localStorage is not defined"),
  },
  {
    action: "runtime-test-web-worker-shouldnt-panic",
    check: (b) => failed(b, "action_threw", "ReferenceError: Worker is not defined"),
  },
  {
    action: "runtime-test-reference-error",
    check: (b) => failed(b, "action_threw", "ReferenceError: nonexisting_function is not defined"),
  },
  { action: "runtime-test-throw-error", check: (b) => failed(b, "action_threw", "Error: boom") },
  {
    // The reference's test answers from a stub enclave; a real one refuses a PKP named "ignored".
    action: "runtime-test-aes-decrypt",
    check: (b) => failed(b, "pkp_not_authorized"),
  },
];

describe("executor: compatibility corpus (reference actions over HTTP)", function () {
  this.timeout(300_000);
  const ctx = { saved: new Map(), cids: new Map() } as Ctx;
  let usageKey: string;

  before(async function () {
    ctx.s = await startStack({
      executor: {
        poolSize: 1,
        fetch: { allowAddresses: ["127.0.0.1", "::1"] },
        limits: { maxFetches: 50 },
      },
      rateLimits: {
        perKeyPerMinute: 1e6,
        perAccountPerMinute: 1e6,
        newAccountPerIpPerHour: 1e6,
        concurrentExecutionsPerAccount: 1000,
      },
    });
    const s = ctx.s;
    const acct = await s.api("POST", "/core/v1/new_account", { body: { account_name: "compat" } });
    const accountKey = acct.body.api_key as string;
    const pkp = await s.api("POST", "/core/v1/pkps/create", { key: accountKey, body: { name: "compat" } });
    expect(pkp.status, JSON.stringify(pkp.body)).to.equal(201);
    ctx.pkpId = pkp.body.pkp_id;
    ctx.pkpAddress = s.enclave.pkpAddress(ctx.pkpId);
    ctx.pkpPublicKey = s.enclave.pkpPublicKey(ctx.pkpId);
    for (const file of fs.readdirSync(ACTIONS).filter((f) => f.endsWith(".action"))) {
      const code = fs.readFileSync(path.join(ACTIONS, file), "utf8");
      const pinned = await s.api("POST", "/core/v1/actions", { key: accountKey, body: { code } });
      expect(pinned.status, JSON.stringify(pinned.body)).to.equal(201);
      ctx.cids.set(file.replace(/\.action$/, ""), pinned.body.cid);
    }
    const group = await s.api("POST", "/core/v1/groups", {
      key: accountKey,
      body: { name: "compat", pkps: [ctx.pkpId], actions: [...ctx.cids.values()] },
    });
    expect(group.status, JSON.stringify(group.body)).to.equal(201);
    const key = await s.api("POST", "/core/v1/add_usage_api_key", {
      key: accountKey,
      body: { name: "execute only", execute_in_groups: [group.body.group_id] },
    });
    expect(key.status, JSON.stringify(key.body)).to.equal(201);
    usageKey = key.body.usage_api_key;
    // What some actions need: ETH for the PKP to send, a recipient, a stranger's signature.
    const funder = new Wallet(DEV_KEY, s.provider);
    await (await funder.sendTransaction({ to: ctx.pkpAddress, value: parseEther("1") })).wait();
    ctx.saved.set("recipient", Wallet.createRandom().address);
    ctx.saved.set("stranger-signature", await Wallet.createRandom().signMessage("nonce 1"));
  });

  after(async function () {
    await ctx.s?.close();
  });

  it("holds at least 30 actions, each with its source and commit", function () {
    const files = fs.readdirSync(ACTIONS).filter((f) => f.endsWith(".action"));
    expect(files.length).to.be.at.least(30);
    for (const f of files) {
      const head = fs.readFileSync(path.join(ACTIONS, f), "utf8").split("\n").slice(0, 4).join("\n");
      expect(head, f).to.match(/repository: \S+\/\S+\n\/\/ path: .+\n\/\/ commit: [0-9a-f]{40}/);
    }
  });

  for (const c of CASES) {
    it(`${c.action} gives the reference's documented result`, async function () {
      const cid = ctx.cids.get(c.action);
      expect(cid, `no action file ${c.action}.action`).to.be.a("string");
      const r = await ctx.s.api("POST", "/core/v1/svc_action", {
        key: usageKey,
        body: { cid, js_params: c.params ? c.params(ctx) : {} },
      });
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
      await c.check(r.body, ctx);
    });
  }
});
