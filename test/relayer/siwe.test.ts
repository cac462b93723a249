/**
 * Sign in with Ethereum (relayer/http/siwe.ts, sdk/siwe.ts) on the real stack: anvil, the registry, the
 * relayer, and a real 2-of-3 Safe for the Safe-owned case. The owner is an anvil account that accepted
 * the account's ownership on chain; its wallet is an ethers Wallet behind a minimal EIP-1193 adapter.
 */
import { randomBytes } from "node:crypto";
import { expect } from "chai";
import { ethers } from "ethers";
import fc from "fast-check";
import { parseSiweMessage } from "../../relayer/http/siwe";
import {
  isSigilError,
  signInWithEthereum,
  signRequest,
  siweMessage,
  SESSION_KEY_RESOURCE,
  type Eip1193Provider,
} from "sigil/sdk";
import { encodeRegistryCall } from "../../scripts/safe/lib";
import { createSafeOwner, SAFE_OWNER_KEYS } from "../helpers/safeOwner";
import { devKey, sigilWorld, type ApiResponse, type SigilWorld } from "../safe/support";

const OWNER = devKey(6);

/** An EIP-1193 provider backed by one key: what a browser wallet answers for these calls. */
function walletProvider(privateKey: string): Eip1193Provider {
  const wallet = new ethers.Wallet(privateKey);
  return {
    async request({ method, params }) {
      if (method === "eth_requestAccounts" || method === "eth_accounts") return [wallet.address];
      if (method === "personal_sign") return wallet.signMessage(ethers.getBytes(params![0] as string));
      throw new Error(`walletProvider: ${method} is not supported`);
    },
  };
}

function expectError(r: ApiResponse, status: number, code: string): void {
  expect({ status: r.status, code: r.body?.error?.code }).to.deep.equal({ status, code });
}

describe("sign in with Ethereum (EIP-4361) as a ChainSecured account's owner", function () {
  this.timeout(180_000);
  let w: SigilWorld;
  let host: string;
  let chainId: number;
  let registry: string;
  let ownerAccountId: number;
  let safe: string;

  /** Accepts a pending ownership transfer from `key`'s address and waits for the relayer. */
  async function accept(key: string, accountId: number): Promise<void> {
    const owner = new ethers.Wallet(key, w.chain.provider);
    const tx = await owner.sendTransaction({
      to: registry,
      data: encodeRegistryCall({ op: "accept-ownership", accountId }).data,
    });
    const receipt = await tx.wait();
    await w.api.waitForBlock(receipt!.blockNumber);
  }

  async function newAccount(): Promise<{ key: string; id: number }> {
    const a = await w.api.post("/new_account", undefined, { account_name: "siwe" });
    expect(a.status).to.equal(201);
    return { key: a.body.api_key, id: a.body.account_id };
  }

  /** A SIWE message as the SDK builds it, with any field overridden. */
  function message(
    over: Partial<Parameters<typeof siweMessage>[0]> = {},
    sessionKey: { address: string } = ethers.Wallet.createRandom(),
  ) {
    const now = Math.floor(Date.now() / 1000) * 1000;
    return siweMessage({
      domain: host,
      address: new ethers.Wallet(OWNER).address,
      statement: "Sign in to Sigil.",
      uri: w.api.base,
      chainId,
      nonce: randomBytes(16).toString("hex"),
      issuedAt: new Date(now),
      expirationTime: new Date(now + 600_000),
      resources: [SESSION_KEY_RESOURCE + sessionKey.address],
      ...over,
    });
  }

  const sign = (text: string, key = OWNER) => new ethers.Wallet(key).signMessage(text);
  const signIn = async (text: string, signature: string) =>
    w.api.post("/auth/siwe", undefined, { message: text, signature });

  /** A GET signed by `sessionKey` carrying the SIWE headers. */
  async function sessionGet(route: string, text: string, signature: string, sessionKey: ethers.Wallet) {
    const path = `/core/v1${route}`;
    const headers = {
      ...signRequest(sessionKey, { chainId, registryAddress: registry }, "GET", path, new Uint8Array()),
      "sigil-siwe": Buffer.from(text, "utf8").toString("base64"),
      "sigil-siwe-signature": signature,
    };
    const res = await fetch(w.api.base + path, { headers });
    return { status: res.status, body: await res.json() } as ApiResponse;
  }

  before(async () => {
    w = await sigilWorld();
    host = new URL(w.api.base).host;
    registry = w.registry;
    chainId = Number((await w.chain.provider.getNetwork()).chainId);
    // The owner's account: transferred to an anvil EOA, accepted on chain.
    const a = await newAccount();
    ownerAccountId = a.id;
    const owner = new ethers.Wallet(OWNER).address;
    expect((await w.api.post("/account/transfer_ownership", a.key, { new_owner: owner })).status).to.equal(
      200,
    );
    await accept(OWNER, a.id);
    // A Safe-owned account.
    const b = await newAccount();
    const safeOwner = await createSafeOwner(w.ctx, registry);
    safe = safeOwner.address;
    expect((await w.api.post("/account/transfer_ownership", b.key, { new_owner: safe })).status).to.equal(
      200,
    );
    const r = await safeOwner.tx({ op: "accept-ownership", accountId: b.id });
    await w.api.waitForBlock(r.blockNumber);
  });

  after(async () => {
    await w?.stopAll();
  });

  it("the SDK signs in through an EIP-1193 wallet and reads the account as its owner", async () => {
    const { sigil, session } = await signInWithEthereum({
      baseUrl: w.api.base,
      provider: walletProvider(OWNER),
    });
    expect(session.accountId).to.equal(ownerAccountId);
    expect(session.sessionKey).to.not.equal(OWNER);
    const account = await sigil.account();
    expect([account.account_id, account.mode, account.owner_address]).to.deep.equal([
      ownerAccountId,
      "chain_secured",
      new ethers.Wallet(OWNER).address,
    ]);
  });

  it("the owner's session lists the usage keys (an account-key read)", async () => {
    const { sigil } = await signInWithEthereum({ baseUrl: w.api.base, provider: walletProvider(OWNER) });
    const page = await sigil.get("/core/v1/list_api_keys");
    expect(page.items).to.deep.equal([]);
  });

  it("the owner's session cannot write: 403 siwe_read_only", async () => {
    const { sigil } = await signInWithEthereum({ baseUrl: w.api.base, provider: walletProvider(OWNER) });
    const err = await sigil.createPkp({ name: "x" }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(isSigilError(err) && [err.status, err.code]).to.deep.equal([403, "siwe_read_only"]);
  });

  it("a message for another domain: 401 siwe_wrong_domain", async () => {
    const text = message({ domain: "evil.example", uri: "https://evil.example/" });
    expectError(await signIn(text, await sign(text)), 401, "siwe_wrong_domain");
  });

  it("a URI on another host: 401 siwe_wrong_domain", async () => {
    const text = message({ uri: "https://evil.example/" });
    expectError(await signIn(text, await sign(text)), 401, "siwe_wrong_domain");
  });

  it("a message for another chain: 401 siwe_wrong_chain", async () => {
    const text = message({ chainId: 1 });
    expectError(await signIn(text, await sign(text)), 401, "siwe_wrong_chain");
  });

  it("an expired message: 401 siwe_expired", async () => {
    const now = Date.now();
    const text = message({ issuedAt: new Date(now - 1_800_000), expirationTime: new Date(now - 60_000) });
    expectError(await signIn(text, await sign(text)), 401, "siwe_expired");
  });

  it("a message valid for more than an hour: 401 siwe_invalid", async () => {
    const now = Date.now();
    const text = message({ issuedAt: new Date(now), expirationTime: new Date(now + 3_601_000) });
    expectError(await signIn(text, await sign(text)), 401, "siwe_invalid");
  });

  it("a message signed by another key than its address: 401 siwe_invalid", async () => {
    const text = message();
    expectError(await signIn(text, await sign(text, devKey(7))), 401, "siwe_invalid");
  });

  it("an address that owns no account: 401 siwe_not_owner", async () => {
    const other = ethers.Wallet.createRandom();
    const text = message({ address: other.address });
    expectError(await signIn(text, await other.signMessage(text)), 401, "siwe_not_owner");
  });

  it("the same nonce signing in twice: 401 siwe_nonce_replayed", async () => {
    const text = message();
    const signature = await sign(text);
    expect((await signIn(text, signature)).status).to.equal(200);
    expectError(await signIn(text, signature), 401, "siwe_nonce_replayed");
  });

  it("a Safe-owned account: its Safe's address signed by one of its owners is 401 siwe_owner_is_contract", async () => {
    const text = message({ address: safe });
    expectError(await signIn(text, await sign(text, SAFE_OWNER_KEYS[0])), 401, "siwe_owner_is_contract");
  });

  it("a Safe owner's own address owns no account: 401 siwe_not_owner", async () => {
    const text = message({ address: new ethers.Wallet(SAFE_OWNER_KEYS[0]).address });
    expectError(await signIn(text, await sign(text, SAFE_OWNER_KEYS[0])), 401, "siwe_not_owner");
  });

  it("a request signed by a key the message does not name: 401 siwe_invalid", async () => {
    const text = message();
    const signature = await sign(text);
    const stranger = new ethers.Wallet(ethers.Wallet.createRandom().privateKey);
    const r = await sessionGet("/account", text, signature, stranger);
    expectError(r, 401, "siwe_invalid");
  });

  it("a request with the session key the message names reads the account", async () => {
    const sessionKey = new ethers.Wallet(ethers.Wallet.createRandom().privateKey);
    const text = message({}, sessionKey);
    const r = await sessionGet("/account", text, await sign(text), sessionKey);
    expect([r.status, r.body.account_id]).to.deep.equal([200, ownerAccountId]);
  });

  it("SIWE headers without a request signature: 401 siwe_invalid", async () => {
    const text = message();
    const res = await fetch(`${w.api.base}/core/v1/account`, {
      headers: {
        "sigil-siwe": Buffer.from(text).toString("base64"),
        "sigil-siwe-signature": await sign(text),
      },
    });
    expectError({ status: res.status, body: await res.json() }, 401, "siwe_invalid");
  });

  // Last: it moves the account to another owner.
  it("a session ends on the request after its owner transferred the account: 401 siwe_not_owner", async () => {
    const sessionKey = new ethers.Wallet(ethers.Wallet.createRandom().privateKey);
    const text = message({}, sessionKey);
    const signature = await sign(text);
    expect((await sessionGet("/account", text, signature, sessionKey)).status).to.equal(200);
    const next = devKey(8);
    const owner = new ethers.Wallet(OWNER, w.chain.provider);
    await (
      await owner.sendTransaction({
        to: registry,
        data: encodeRegistryCall({ op: "transfer-ownership", newOwner: new ethers.Wallet(next).address })
          .data,
      })
    ).wait();
    await accept(next, ownerAccountId);
    expectError(await sessionGet("/account", text, signature, sessionKey), 401, "siwe_not_owner");
  });
});

describe("SIWE messages: the SDK's and the relayer's reading agree", function () {
  this.timeout(60_000);
  it("every message the SDK builds parses back to its fields (property)", () => {
    const host = fc.constantFrom("127.0.0.1:8000", "sigil.example", "[::1]:8080", "a-b.c.example:443");
    fc.assert(
      fc.property(
        host,
        fc.uint8Array({ minLength: 20, maxLength: 20 }),
        fc.option(
          fc.string({ minLength: 1, maxLength: 80 }).filter((t) => !t.includes("\n")),
          {
            nil: undefined,
          },
        ),
        fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
        fc.stringMatching(/^[A-Za-z0-9]{16,40}$/),
        fc.integer({ min: 0, max: 4_000_000_000 }),
        fc.integer({ min: 1, max: 3600 }),
        fc.array(fc.webUrl(), { maxLength: 3 }),
        (domain, addressBytes, statement, chainId, nonce, issued, lifetime, extra) => {
          const address = ethers.getAddress(ethers.hexlify(addressBytes));
          const issuedAt = new Date(issued * 1000);
          const expirationTime = new Date((issued + lifetime) * 1000);
          const resources = [SESSION_KEY_RESOURCE + address, ...extra];
          const text = siweMessage({
            domain,
            address,
            statement,
            uri: `https://${domain}/`,
            chainId,
            nonce,
            issuedAt,
            expirationTime,
            resources,
          });
          const m = parseSiweMessage(text);
          expect(m).to.deep.equal({
            domain,
            address,
            statement: statement ?? null,
            uri: `https://${domain}/`,
            version: "1",
            chainId,
            nonce,
            issuedAt: issuedAt.toISOString(),
            expirationTime: expirationTime.toISOString(),
            notBefore: null,
            requestId: null,
            resources,
          });
        },
      ),
    );
  });

  it("a message with its fields out of the standard's order is refused: 401 siwe_invalid", () => {
    const text = siweMessage({
      domain: "sigil.example",
      address: ethers.ZeroAddress,
      uri: "https://sigil.example/",
      chainId: 1,
      nonce: "abcdefghijklmnop",
      issuedAt: new Date(0),
      expirationTime: new Date(1000),
    }).replace("Version: 1\nChain ID: 1", "Chain ID: 1\nVersion: 1");
    expect(() => parseSiweMessage(text))
      .to.throw()
      .that.deep.includes({ status: 401, code: "siwe_invalid" });
  });
});
