/**
 * What the sign-out check (relayer/db/siweRevocations.ts) adds to an owner session's request, in
 * process (no HTTP), against that request's SIWE check measured in the same run (the baseline: parse,
 * memo hash, domain and time; the signed-request check comes on top of both and is left out). Variants:
 *  - SQLite: one primary-key lookup in the relayer's file per request (what the embedded default does);
 *  - PostgreSQL, cached: the in-memory copy, re-read when older than 1 s (what several instances do);
 *  - PostgreSQL, queried: one primary-key SELECT per request (the alternative not taken).
 * 1,000 live revocations in the table; alternated rounds, medians. Starts its own embedded PostgreSQL.
 *
 *   npx ts-node --transpile-only bench/siweRevocation.bench.ts
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { Wallet } from "ethers";
import { siweMessage, SESSION_KEY_RESOURCE } from "../sdk/index";
import { SiweVerifier } from "../relayer/http/siwe";
import { sessionRevocationsFor, type SessionRevocations } from "../relayer/db";
import { type DataLayer, openDataLayer } from "../relayer/db";
import { startBenchPostgres } from "./embeddedPostgres";

const N = 4_000;
const ROUNDS = 5;
const host = "127.0.0.1:8000";
const ORIGINS = [`http://${host}`];

async function fill(store: SessionRevocations, now: number): Promise<void> {
  for (let i = 0; i < 1_000; i++) await store.revoke(Wallet.createRandom().address, now + 3_600, now);
}

async function main(): Promise<void> {
  const owner = Wallet.createRandom();
  const sessionKey = Wallet.createRandom();
  const nowMs = Math.floor(Date.now() / 1000) * 1000;
  const message = siweMessage({
    domain: host,
    address: owner.address,
    statement: "Sign in to Sigil.",
    uri: `http://${host}`,
    chainId: 31337,
    nonce: randomBytes(16).toString("hex"),
    issuedAt: new Date(nowMs),
    expirationTime: new Date(nowMs + 3_600_000),
    resources: [SESSION_KEY_RESOURCE + sessionKey.address],
  });
  const signature = await owner.signMessage(message);
  const verifier = new SiweVerifier({
    chainId: 31337,
    origins: () => ORIGINS,
    accountOfOwner: async () => 1,
    isContract: async () => false,
  });
  const now = Math.floor(Date.now() / 1000);

  const dir = mkdtempSync(join(tmpdir(), "sigil-bench-siwe-"));
  const sqlite = await openDataLayer({ sqlitePath: join(dir, "relayer.sqlite") });
  const pg = await startBenchPostgres();
  const shared: DataLayer = await openDataLayer({ databaseUrl: pg.url, sqlitePath: "" });
  try {
    const onSqlite = sessionRevocationsFor(sqlite);
    const cached = sessionRevocationsFor(shared);
    await fill(onSqlite, now);
    await fill(cached, now);
    const perRequestQuery = async (key: string) =>
      (
        await shared.exec(
          "SELECT 1 FROM siwe_revocations WHERE session_key = $1 AND expires_s > $2::bigint",
          [key, now],
        )
      ).length > 0;

    const siweCheck = () => verifier.verify(message, signature);
    const paths: Array<[string, () => Promise<unknown>]> = [
      ["SIWE check (baseline)", siweCheck],
      [
        "+ sign-out check, SQLite",
        async () => (await siweCheck(), onSqlite.isRevoked(sessionKey.address, now)),
      ],
      [
        "+ sign-out check, PostgreSQL cached",
        async () => (await siweCheck(), cached.isRevoked(sessionKey.address, now)),
      ],
      [
        "+ sign-out check, PostgreSQL queried",
        async () => (await siweCheck(), perRequestQuery(sessionKey.address)),
      ],
    ];
    const time = async (fn: () => Promise<unknown>, n: number) => {
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < n; i++) await fn();
      return Number(process.hrtime.bigint() - t0) / n / 1e3;
    };
    for (const [, fn] of paths) await time(fn, 500); // warm-up
    const times = paths.map(() => [] as number[]);
    for (let round = 0; round < ROUNDS; round++)
      for (const [i, [, fn]] of paths.entries()) times[i].push(await time(fn, N));
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    const base = median(times[0]);
    paths.forEach(([label], i) =>
      console.log(
        `${label.padEnd(40)} ${median(times[i]).toFixed(1).padStart(7)} µs/request   vs baseline ${(median(times[i]) / base).toFixed(2)}`,
      ),
    );
  } finally {
    await sqlite.close();
    await shared.close();
    await pg.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

void main();
