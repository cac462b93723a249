/**
 * Compatibility corpus: actions written for this repository, each exercising one behaviour of the
 * reference runtime the way an action written for that runtime would (its calling styles, its globals,
 * its APIs), kept in ./actions (as `.action` files: the test runner loads every .js file under test/
 * as a test). Each file's header names the behaviour and where the reference documents it (repository,
 * path, commit). Each is pinned and run through the HTTP API of a real stack (anvil, contracts,
 * relayer, SES workers) with an execute-only usage key, and checked against the result the reference
 * documents. Where Sigil's answer differs by design, the case says why (docs/actions.md, "Compatibility").
 *
 * The chain the actions read and write is the stack's anvil, on loopback: this test's executor
 * configuration (only here) allows 127.0.0.1 and ::1 for fetch.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { expect } from "chai";
import {
  Wallet,
  computeAddress,
  keccak256,
  parseEther,
  recoverAddress,
  toUtf8Bytes,
  verifyMessage,
} from "ethers";
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
  // --- behaviours of the reference's load-test actions (k6/LitActionCode)
  {
    action: "main-returns-greeting",
    check: (b) => (succeeded(b), expect(b.response).to.equal("Hello World!")),
  },
  {
    action: "action-identity-signs-message",
    check: (b, c) => {
      succeeded(b);
      const { wallet_address, signature, publicKey } = b.response;
      expect(wallet_address).to.equal(
        c.s.enclave.actionAddress(c.cids.get("action-identity-signs-message")!),
      );
      expect(verifyMessage("Sigil compat corpus", signature)).to.equal(wallet_address);
      expect(computeAddress(publicKey)).to.equal(wallet_address); // v5's Wallet.publicKey
    },
  },
  {
    action: "encrypt-challenge",
    params: (c) => ({ pkpId: c.pkpId, challenge: "sigil" }),
    check: (b, c) => {
      succeeded(b);
      expect(b.response).to.be.a("string");
      c.saved.set("challenge-ciphertext", b.response);
    },
  },
  {
    action: "decrypt-ciphertext",
    params: (c) => ({ pkpId: c.pkpId, ciphertext: c.saved.get("challenge-ciphertext") }),
    check: (b) => (succeeded(b), expect(b.response).to.equal("sigil")),
  },
  // --- the reference's documentation: examples
  {
    action: "pkp-wallet-signs-message",
    params: (c) => ({ pkpId: c.pkpId, message: "sign me" }),
    check: (b, c) => {
      succeeded(b);
      expect(b.response.message).to.equal("sign me");
      expect(verifyMessage("sign me", b.response.signature)).to.equal(c.pkpAddress);
    },
  },
  {
    action: "encrypt-secret-object",
    params: (c) => ({ pkpId: c.pkpId, secret: "s3cret" }),
    check: (b, c) => (succeeded(b), c.saved.set("examples-ciphertext", b.response.ciphertext)),
  },
  {
    action: "decrypt-secret-object",
    params: (c) => ({ pkpId: c.pkpId, ciphertext: c.saved.get("examples-ciphertext") }),
    check: (b) => (succeeded(b), expect(b.response).to.deep.equal({ plaintext: "s3cret" })),
  },
  {
    action: "pkp-sends-eth",
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
    action: "allowlist-refuses-pkp",
    params: (c) => ({ pkpAddress: c.pkpAddress }),
    check: (b) => failed(b, "action_threw", "Error: Unauthorized: PKP not allowed to run this action"),
  },
  {
    action: "caller-signature-guard",
    params: (c) => ({ message: "nonce 1", signature: c.saved.get("stranger-signature") }),
    check: (b) =>
      failed(b, "action_threw", "Error: Unauthorized: caller signature does not match allowed address"),
  },
  {
    action: "vault-encrypt",
    params: (c) => ({ pkpId: c.pkpId, plaintext: "vault" }),
    check: (b) => (
      succeeded(b),
      expect(b.response.ciphertext).to.be.a("string"),
      expect(b.response.length).to.equal(5)
    ),
  },
  {
    action: "seal-api-key",
    params: (c) => ({ pkpId: c.pkpId, apiKey: "key-123" }),
    check: (b, c) => (succeeded(b), c.saved.set("sealed-api-key", b.response.ciphertext)),
  },
  {
    // The apiKey sealed by seal-api-key opens with another action (a different CID) and the same PKP.
    action: "decrypt-ciphertext",
    params: (c) => ({ pkpId: c.pkpId, ciphertext: c.saved.get("sealed-api-key") }),
    check: (b) => (succeeded(b), expect(b.response).to.equal("key-123")),
  },
  // --- migration guide (sketches included: their result is an error, never a silent null)
  {
    action: "sketch-missing-helper",
    check: (b) => failed(b, "action_threw", "ReferenceError: computeSomethingUseful is not defined"),
  },
  {
    action: "globals-setresponse",
    params: (c) => ({ pkpId: c.pkpId, message: "globals" }),
    check: (b, c) => (succeeded(b), expect(verifyMessage("globals", b.response.sig)).to.equal(c.pkpAddress)),
  },
  {
    action: "main-params-object",
    params: (c) => ({ pkpId: c.pkpId, message: "m3" }),
    check: (b, c) => (succeeded(b), expect(verifyMessage("m3", b.response.sig)).to.equal(c.pkpAddress)),
  },
  {
    action: "sketch-undefined-flag",
    check: (b) => failed(b, "action_threw", "ReferenceError: isAllowedToProceed is not defined"),
  },
  {
    action: "provider-no-response",
    check: (b) => (
      succeeded(b),
      expect(b.response).to.equal(null),
      expect(b.logs).to.equal("https://rpc.example.org 8453\n")
    ),
  },
  {
    action: "main-returns-string",
    params: (c) => ({ pkpId: c.pkpId, message: "m7" }),
    check: (b, c) => (succeeded(b), expect(verifyMessage("m7", b.response)).to.equal(c.pkpAddress)),
  },
  {
    action: "provider-read-no-response",
    params: (c) => ({ rpcUrl: c.s.chain.rpcUrl, address: c.pkpAddress }),
    check: async (b, c) => {
      succeeded(b);
      expect(b.response).to.equal(null);
      expect(b.logs).to.equal(`${await c.s.provider.getTransactionCount(c.pkpAddress)}\n`);
    },
  },
  {
    action: "utils-address-no-response",
    params: (c) => ({ publicKey: c.pkpPublicKey }),
    check: (b, c) => (
      succeeded(b),
      expect(b.response).to.equal(null),
      expect(b.logs).to.equal(`${c.pkpAddress}\n`)
    ),
  },
  {
    action: "duplicate-const-digest",
    check: (b) => failed(b, "syntax_error", "SyntaxError: Identifier 'digest' has already been declared"),
  },
  {
    action: "duplicate-const-payload",
    check: (b) => failed(b, "syntax_error", "SyntaxError: Identifier 'payload' has already been declared"),
  },
  {
    action: "gated-encrypt-sketch",
    params: (c) => ({ pkpId: c.pkpId, message: "m" }),
    check: (b) => failed(b, "action_threw", "ReferenceError: checkAccessCondition is not defined"),
  },
  {
    action: "gated-decrypt-sketch",
    params: (c) => ({ pkpId: c.pkpId, ciphertext: "00" }),
    check: (b) => failed(b, "action_threw", "ReferenceError: checkAccessCondition is not defined"),
  },
  // --- the reference's runtime tests (lit-actions/tests/it.rs)
  { action: "main-does-nothing", check: (b) => (succeeded(b), expect(b.response).to.equal(null)) },
  {
    action: "console-log-captured",
    check: (b) => (succeeded(b), expect(b.logs).to.equal("Sigil logs 42\n")),
  },
  {
    action: "namespaces-present",
    check: (b) => (succeeded(b), expect(b.logs).to.equal("true true true true true true true\n")),
  },
  {
    // Ten refusals, worded as SES words them (its global object is not Deno's `#<Window>`, and SES turns
    // read-only globals into constants: "Assignment to constant variable"); an attempt that succeeds logs
    // "NOT PROTECTED: …", which fails the match.
    action: "namespaces-protected",
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
  { action: "setresponse-in-main", check: (b) => (succeeded(b), expect(b.response).to.equal("OK")) },
  { action: "webcrypto-digest", check: (b) => (succeeded(b), expect(b.response).to.equal("32")) },
  {
    // The reference fails with "NotSupported: LocalStorage is not supported"; Sigil has no localStorage at all.
    action: "localstorage-absent",
    check: (b) => failed(b, "action_threw", "ReferenceError: localStorage is not defined"),
  },
  {
    action: "worker-absent",
    check: (b) => failed(b, "action_threw", "ReferenceError: Worker is not defined"),
  },
  {
    action: "call-undefined-function",
    check: (b) => failed(b, "action_threw", "ReferenceError: undefinedHelperFunction is not defined"),
  },
  { action: "throw-error", check: (b) => failed(b, "action_threw", "Error: sigil says no") },
  {
    // The reference's test answers from a stub enclave; a real one refuses a PKP the key may not use.
    action: "decrypt-foreign-pkp",
    check: (b) => failed(b, "pkp_not_authorized"),
  },
  // --- calling styles and APIs the reference documents beyond those
  {
    action: "iife-setresponse",
    params: () => ({ greeting: "hello" }),
    check: (b) => (succeeded(b), expect(b.response).to.equal("HELLO!")),
  },
  {
    action: "go-not-awaited",
    params: () => ({ word: "sigil" }),
    check: (b) => (succeeded(b), expect(b.response).to.equal(keccak256(toUtf8Bytes("sigil")))),
  },
  {
    action: "action-wallet-address",
    params: (c) => ({ ipfsId: c.cids.get("throw-error") }),
    check: (b, c) => {
      succeeded(b);
      const expected = c.s.enclave.actionAddress(c.cids.get("throw-error")!);
      expect(b.response).to.deep.equal({ address: expected, addressFromKey: expected });
    },
  },
  {
    action: "import-details-empty",
    check: (b) => (succeeded(b), expect(b.response).to.deep.equal({ count: 0 })),
  },
  {
    action: "sign-ecdsa-sig-name",
    params: (c) => ({ publicKey: c.pkpPublicKey, message: "named" }),
    check: (b, c) => {
      succeeded(b);
      expect(b.response).to.equal("success");
      const sig = b.signatures.corpusSig;
      expect(sig.dataSigned).to.equal(keccak256(toUtf8Bytes("named")));
      expect(recoverAddress(sig.dataSigned, sig.signature)).to.equal(c.pkpAddress);
    },
  },
];

describe("executor: compatibility corpus (reference behaviours over HTTP)", function () {
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

  it("holds at least 30 actions, each with the behaviour it checks and where the reference documents it", function () {
    const files = fs.readdirSync(ACTIONS).filter((f) => f.endsWith(".action"));
    expect(files.length).to.be.at.least(30);
    for (const f of files) {
      const head = fs.readFileSync(path.join(ACTIONS, f), "utf8").split("\n").slice(0, 5).join("\n");
      expect(head, f).to.match(
        /^\/\/ Written for Sigil's .+\n\/\/ behaviour: .+\n\/\/ reference: \S+\/\S+\n\/\/ path: .+\n\/\/ commit: [0-9a-f]{40}$/,
      );
    }
  });

  it("runs every action in the corpus in at least one case", function () {
    const files = fs.readdirSync(ACTIONS).filter((f) => f.endsWith(".action"));
    const used = new Set(CASES.map((c) => `${c.action}.action`));
    expect(files.filter((f) => !used.has(f))).to.deep.equal([]);
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
