/**
 * Wallet sign-in in tests: an account owned by a wallet (transferred, then accepted on chain), a sign-in
 * message that wallet signs for a session key, and requests sent through node:http so that the Host
 * header is whatever the test says (as a browser on another site, or a load balancer, would send it).
 */
import * as http from "node:http";
import { randomBytes } from "node:crypto";
import { expect } from "chai";
import { Wallet } from "ethers";
import { siweMessage, SESSION_KEY_RESOURCE } from "../../sdk/index";
import { encodeRegistryCall } from "../../scripts/safe/lib";
import { OPERATOR_HEADERS, setupAccount, type Stack } from "./stack";
import { eventually } from "../../testkit/eventually";

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

export interface OwnerSession {
  message: string;
  signature: string;
  /** The session key the message names: it signs each request of the session. */
  key: Wallet;
}

/** One request to `baseUrl`, sent with the Host header `host`. */
export function sendWithHost(
  baseUrl: string,
  host: string,
  method: string,
  route: string,
  headers: Record<string, string>,
  body?: string,
): Promise<{ status: number; body: Json }> {
  const url = new URL(baseUrl + route);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { hostname: url.hostname, port: url.port, path: url.pathname, method, headers: { ...headers, host } },
      (res) => {
        let text = "";
        res.on("data", (c) => (text += c));
        res.on("end", () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/** Waits until the relayer at `baseUrl` has applied `block` (an owner's on-chain change reaches it by its poll). */
export async function waitForBlock(baseUrl: string, block: number): Promise<void> {
  // Bounded, with a message naming the block: a stalled poller fails here, not in mocha's timeout.
  await eventually(
    async () => {
      const r = await fetch(`${baseUrl}/health`, { headers: OPERATOR_HEADERS });
      const health = (await r.json()) as { cache: { last_processed_block: number } };
      return health.cache.last_processed_block >= block;
    },
    { timeoutMs: 60_000, intervalMs: 20, what: `${baseUrl} to process block ${block}` },
  );
}

/** Makes an account owned by `ownerKey`'s wallet (transferred, then accepted on chain) and waits for the relayers at `urls`. */
export async function ownedAccount(s: Stack, ownerKey: string, urls: string[] = [s.url]): Promise<number> {
  const a = await setupAccount(s);
  const t = await s.api("POST", "/core/v1/account/transfer_ownership", {
    key: a.accountKey,
    body: { new_owner: new Wallet(ownerKey).address },
  });
  expect(t.status).to.equal(200);
  const tx = await new Wallet(ownerKey, s.provider).sendTransaction({
    to: s.deployment.registry,
    data: encodeRegistryCall({ op: "accept-ownership", accountId: a.accountId }).data,
  });
  const receipt = await tx.wait();
  for (const url of urls) await waitForBlock(url, receipt!.blockNumber);
  return a.accountId;
}

/** A sign-in message for `domain` (URI default http://<domain>) naming a fresh session key, signed by `owner`. */
export async function ownerSession(
  owner: Wallet,
  o: { domain: string; uri?: string; chainId?: number; issuedAgo?: number; seconds?: number },
): Promise<OwnerSession> {
  const key = new Wallet(Wallet.createRandom().privateKey);
  const issuedMs = (Math.floor(Date.now() / 1000) - (o.issuedAgo ?? 0)) * 1000;
  const message = siweMessage({
    domain: o.domain,
    address: owner.address,
    statement: "Sign in to Sigil.",
    uri: o.uri ?? `http://${o.domain}`,
    chainId: o.chainId ?? 31337,
    nonce: randomBytes(16).toString("hex"),
    issuedAt: new Date(issuedMs),
    expirationTime: new Date(issuedMs + (o.seconds ?? 600) * 1000),
    resources: [SESSION_KEY_RESOURCE + key.address],
  });
  return { message, signature: await owner.signMessage(message), key };
}
