/**
 * Wallet sign-in is bound to the service's own public URLs (RelayerOptions.publicUrls,
 * SIGIL_PUBLIC_URLS), never to the request's Host header. The attack: a phishing page on another domain
 * has the owner sign a standard sign-in message for that domain naming a session key the page made, then
 * calls the real service with that domain as its Host header. Real stack (anvil, registry, relayer);
 * requests through node:http so that the Host header is whatever the test says.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import { Wallet } from "ethers";
import { startRelayer, type RunningRelayer } from "../../relayer";
import { resolveConfig } from "../../relayer/config";
import { signRequest } from "../../sdk/index";
import { ConfigError, loadConfig } from "../../scripts/start/config";
import { DEV_KEYS } from "../helpers/anvil";
import { ownedAccount, ownerSession, sendWithHost, type OwnerSession } from "../helpers/siweOwner";
import { startStack, type Stack } from "../helpers/stack";

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any
const OWNER_KEY = DEV_KEYS[4];
const owner = new Wallet(OWNER_KEY);
const CHAIN_ID = 31337;

type Session = OwnerSession;
const send = sendWithHost;

/** A message signed by the owner for `domain` (URI `uri`, default http://<domain>). */
const session = (domain: string, uri?: string) => ownerSession(owner, { domain, uri, chainId: CHAIN_ID });

const signIn = (baseUrl: string, host: string, x: Session) =>
  send(
    baseUrl,
    host,
    "POST",
    "/core/v1/auth/siwe",
    { "content-type": "application/json" },
    JSON.stringify({ message: x.message, signature: x.signature }),
  );

const codeOf = (r: { status: number; body: Json }) => [r.status, r.body?.error?.code ?? null];

describe("wallet sign-in is bound to the service's own URLs, not to the Host header", function () {
  this.timeout(180_000);
  let s: Stack;
  let own: string;
  let port: string;
  let registry: string;

  /** The usage-key list read by a session, sent with the Host header `host`. */
  function listKeys(baseUrl: string, host: string, x: Session) {
    const route = "/core/v1/list_api_keys";
    const headers: Record<string, string> = {
      ...signRequest(x.key, { chainId: CHAIN_ID, registryAddress: registry }, "GET", route, new Uint8Array()),
      "sigil-siwe": Buffer.from(x.message, "utf8").toString("base64"),
      "sigil-siwe-signature": x.signature,
    };
    return send(baseUrl, host, "GET", route, headers);
  }

  before(async () => {
    s = await startStack();
    own = new URL(s.url).host;
    port = new URL(s.url).port;
    registry = s.deployment.registry;
    await ownedAccount(s, OWNER_KEY);
  });
  after(async () => {
    await s?.close();
  });

  describe("default: the URL the relayer listens on", () => {
    it("a message for another domain sent with that domain as Host: 401 siwe_wrong_domain", async () => {
      const x = await session("evil.example", "https://evil.example/login");
      expect(codeOf(await signIn(s.url, "evil.example", x))).to.deep.equal([401, "siwe_wrong_domain"]);
    });

    it("a session for another domain reading with that domain as Host: 401 siwe_wrong_domain", async () => {
      const x = await session("evil.example", "https://evil.example/login");
      expect(codeOf(await listKeys(s.url, "evil.example", x))).to.deep.equal([401, "siwe_wrong_domain"]);
    });

    it("the refusal names the domain and the service's own URLs", async () => {
      const x = await session("evil.example");
      const r = await signIn(s.url, "evil.example", x);
      expect(r.body.error.details).to.deep.equal({
        domain: "evil.example",
        expected: own,
        public_urls: [`http://${own}`, `http://localhost:${port}`],
      });
    });

    it("a message for the real origin is accepted (200)", async () => {
      const x = await session(own);
      expect(codeOf(await signIn(s.url, own, x))).to.deep.equal([200, null]);
    });

    it("a message for the real origin is accepted whatever Host the request carries", async () => {
      const x = await session(own);
      expect(codeOf(await signIn(s.url, "evil.example", x))).to.deep.equal([200, null]);
    });

    it("a session for the real origin reads the usage keys (200)", async () => {
      const x = await session(own);
      expect((await listKeys(s.url, own, x)).status).to.equal(200);
    });

    it("localhost on the same port is the same service (200)", async () => {
      const x = await session(`localhost:${port}`);
      expect(codeOf(await signIn(s.url, own, x))).to.deep.equal([200, null]);
    });

    it("the real host with an https URI (another origin): 401 siwe_wrong_domain", async () => {
      const x = await session(own, `https://${own}/`);
      expect(codeOf(await signIn(s.url, own, x))).to.deep.equal([401, "siwe_wrong_domain"]);
    });
  });

  describe("configured public URLs (behind a load balancer)", () => {
    let lb: RunningRelayer;
    before(async () => {
      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-relayer-origin-"));
      lb = await startRelayer({
        ...s.relayerOptions,
        dataDir,
        port: 0,
        publicUrls: ["https://sigil.example", "https://keys.example:8443/"],
      });
    });
    after(async () => {
      await lb?.close();
    });

    it("a message for a public URL is accepted (200)", async () => {
      const x = await session("sigil.example", "https://sigil.example/");
      expect(codeOf(await signIn(lb.url, "sigil.example", x))).to.deep.equal([200, null]);
    });

    it("a message for the second public URL, with its port, is accepted (200)", async () => {
      const x = await session("keys.example:8443", "https://keys.example:8443/dashboard");
      expect(codeOf(await signIn(lb.url, "10.0.0.7:8000", x))).to.deep.equal([200, null]);
    });

    it("the default port written out is the same origin (200)", async () => {
      const x = await session("sigil.example:443", "https://sigil.example/");
      expect(codeOf(await signIn(lb.url, "sigil.example", x))).to.deep.equal([200, null]);
    });

    it("a message for the instance's own address: 401 siwe_wrong_domain", async () => {
      const host = new URL(lb.url).host;
      const x = await session(host);
      expect(codeOf(await signIn(lb.url, host, x))).to.deep.equal([401, "siwe_wrong_domain"]);
    });

    it("a message for the public host over http://: 401 siwe_wrong_domain", async () => {
      const x = await session("sigil.example", "http://sigil.example/");
      expect(codeOf(await signIn(lb.url, "sigil.example", x))).to.deep.equal([401, "siwe_wrong_domain"]);
    });
  });
});

describe("public URLs: configuration", () => {
  const base = { rpcUrl: "http://127.0.0.1:1", dataDir: "/tmp/x", registryAddress: "", forwarderAddress: "" };

  it("the relayer keeps the origins of its public URLs", () => {
    const cfg = resolveConfig({
      ...base,
      deployBlock: 0,
      enclave: undefined as never,
      publicUrls: ["https://Sigil.Example:443/", "http://10.0.0.1:8000"],
    });
    expect(cfg.publicOrigins).to.deep.equal(["https://sigil.example", "http://10.0.0.1:8000"]);
  });

  it("the relayer refuses a public URL with a path", () => {
    expect(() =>
      resolveConfig({
        ...base,
        deployBlock: 0,
        enclave: undefined as never,
        publicUrls: ["https://sigil.example/app"],
      }),
    ).to.throw(/must be an origin only/);
  });

  it("npm start reads SIGIL_PUBLIC_URLS as a comma-separated list", () => {
    const cwd = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-config-"));
    expect(
      loadConfig({ SIGIL_PUBLIC_URLS: "https://sigil.example, https://keys.example" }, cwd).publicUrls,
    ).to.deep.equal(["https://sigil.example", "https://keys.example"]);
  });

  it("npm start refuses a SIGIL_PUBLIC_URLS entry that is not an http(s) origin", () => {
    const cwd = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-config-"));
    let err: unknown;
    try {
      loadConfig({ SIGIL_PUBLIC_URLS: "ftp://sigil.example" }, cwd);
    } catch (e) {
      err = e;
    }
    expect(err).to.be.instanceOf(ConfigError);
    expect((err as ConfigError).problems).to.deep.equal([
      'SIGIL_PUBLIC_URLS: "ftp://sigil.example" is not an http(s) URL. Give the URL(s) users open the service at, comma-separated (e.g. https://sigil.example; behind a load balancer, the balancer\'s URL).',
    ]);
  });
});
