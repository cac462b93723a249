/**
 * What a wallet session costs the relayer per request, against the signed usage-key request it builds
 * on, measured in the same run (in process, no HTTP): the signed-request check alone (the baseline:
 * every signed usage-key request pays it), the same plus the look for SIWE headers (what a usage-key
 * request now pays on top), and an owner session's request (signed-request check plus the SIWE check,
 * whose recovery and owner lookup are memoised per message, so only parsing and the domain and time
 * checks run again).
 *
 *   npx ts-node --transpile-only bench/siwe.bench.ts
 */
import { randomBytes } from "node:crypto";
import type { Request } from "express";
import { Wallet } from "ethers";
import { signRequest, siweMessage, SESSION_KEY_RESOURCE } from "../sdk/index";
import { SignedRequestVerifier } from "../relayer/http/signedRequest";
import { siweHeaders, SiweVerifier } from "../relayer/http/siwe";

const N = 4_000;
const chainId = 31337;
const registryAddress = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
const host = "127.0.0.1:8000";
const ORIGINS = [`http://${host}`];

function fakeRequest(headers: Record<string, string>): Request {
  const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
  return {
    method: "GET",
    originalUrl: "/core/v1/account",
    headers: lower,
    get: (n: string) => lower[n.toLowerCase()],
  } as never;
}

async function main(): Promise<void> {
  const owner = Wallet.createRandom();
  const sessionKey = new Wallet(Wallet.createRandom().privateKey);
  const now = Math.floor(Date.now() / 1000) * 1000;
  const message = siweMessage({
    domain: host,
    address: owner.address,
    statement: "Sign in to Sigil.",
    uri: `http://${host}`,
    chainId,
    nonce: randomBytes(16).toString("hex"),
    issuedAt: new Date(now),
    expirationTime: new Date(now + 3_600_000),
    resources: [SESSION_KEY_RESOURCE + sessionKey.address],
  });
  const signature = await owner.signMessage(message);
  const siwe = { "sigil-siwe": Buffer.from(message).toString("base64"), "sigil-siwe-signature": signature };
  // Requests signed up front: signing is the client's cost, not the relayer's.
  const signed = (extra: Record<string, string>) =>
    Array.from({ length: N }, () =>
      fakeRequest({
        ...signRequest(sessionKey, { chainId, registryAddress }, "GET", "/core/v1/account", new Uint8Array()),
        ...extra,
      }),
    );
  const siweVerifier = new SiweVerifier({
    chainId,
    origins: () => ORIGINS,
    accountOfOwner: async () => 1,
    isContract: async () => false,
  });

  const run = async (
    label: string,
    reqs: Request[],
    fn: (r: Request, v: SignedRequestVerifier) => unknown,
  ) => {
    const v = new SignedRequestVerifier({ chainId, registryAddress, maxNonces: 10 * N });
    const t0 = process.hrtime.bigint();
    for (const r of reqs) await fn(r, v);
    const us = Number(process.hrtime.bigint() - t0) / reqs.length / 1e3;
    return { label, us };
  };
  // Warm-up of every path (JIT), then the measured runs.
  await run("warm-up", signed(siwe).slice(0, 2_000), async (r, v) => {
    v.verify(r, undefined);
    await siweVerifier.verify(message, signature);
  });
  // Alternated rounds, median per path: drift in the machine's load (shared CPUs) hits all three alike.
  const paths: Array<[string, Record<string, string>, (r: Request, v: SignedRequestVerifier) => unknown]> = [
    ["signed request (usage key), baseline", {}, (r, v) => v.verify(r, undefined)],
    [
      "signed request + SIWE header look-up",
      {},
      (r, v) => {
        v.verify(r, undefined);
        return siweHeaders((n) => r.get(n));
      },
    ],
    [
      "owner session (signed + SIWE check)",
      siwe,
      async (r, v) => {
        v.verify(r, undefined);
        const h = siweHeaders((n) => r.get(n))!;
        return siweVerifier.verify(h.message, h.signature);
      },
    ],
  ];
  const times = paths.map(() => [] as number[]);
  for (let round = 0; round < 5; round++)
    for (const [i, [label, extra, fn]] of paths.entries())
      times[i].push((await run(label, signed(extra), fn)).us);
  const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
  const base = median(times[0]);
  paths.forEach(([label], i) =>
    console.log(
      `${label.padEnd(40)} ${median(times[i]).toFixed(1).padStart(7)} µs/request   vs baseline ${(median(times[i]) / base).toFixed(2)}`,
    ),
  );
}

void main();
