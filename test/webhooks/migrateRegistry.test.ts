/**
 * `npm run migrate:registry` and webhooks: a layout-2 data folder whose account has an endpoint subscribed
 * to every chain event (its database as the previous release left it: the endpoint, and the unkeyed event
 * cursor at the old registry's head) is migrated by the real command (a child process), then served by
 * `npm start`'s service with a real receiver. The replay's writes (the account's PKPs, group, members,
 * key) are not announced; a write made after the migration is, once.
 */
import { expect } from "chai";
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { ethers } from "ethers";
import { computeCid, makeAddressGuard } from "../../enclave";
import { openDataLayer } from "../../relayer/db";
import { chainCursorName, LEGACY_CHAIN_CURSOR } from "../../relayer/webhooks/chainCursor";
import { Endpoints } from "../../relayer/webhooks/endpoints";
import { CHAIN_EVENT_TYPES } from "../../relayer/webhooks/eventTypes";
import { SecretBox } from "../../relayer/webhooks/secrets";
import { WebhookStore } from "../../relayer/webhooks/store";
import { loadConfig } from "../../scripts/start/config";
import { startSigil, type RunningSigil } from "../../scripts/start/service";
import { startLayout2Folder } from "../helpers/layout2Folder";
import { startWebhookEventsAfterReplay } from "../../scripts/migrate/webhookCursor";
import { describeOnPostgres, freshDatabaseUrl } from "../helpers/postgres";
import { Receiver } from "./receiver";

const ROOT = path.resolve(__dirname, "..", "..");
const ROOT_KEY = "3b".repeat(32);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("webhooks after npm run migrate:registry (a layout-2 data folder with a subscribed endpoint)", function () {
  this.timeout(300_000);
  let dir: string;
  let dataDir: string;
  let anvilPort: number;
  let accountKey: string;
  let receiver: Receiver;
  let migration: { code: number | null; stderr: string };

  const env = () => ({
    ...process.env,
    SIGIL_DATA_DIR: dataDir,
    SIGIL_ANVIL_PORT: String(anvilPort),
    SIGIL_ROOT_KEY: ROOT_KEY,
    SIGIL_LOG_FILE: path.join(dir, "sigil.log"),
    SIGIL_WEBHOOK_ALLOW_ADDRESSES: "127.0.0.0/8",
    PORT: "0",
  });
  const record = () =>
    JSON.parse(fs.readFileSync(path.join(dataDir, "migration.json"), "utf8")) as {
      to_registry: string;
      to_deploy_block: number;
      replay_end_block: number;
    };

  /** The previous release's data folder (chain, deployment.json, webhooks in ledger.sqlite), then the migration. */
  before(async () => {
    receiver = await new Receiver().start();
    const folder = await startLayout2Folder("sigil-migrate-hooks-", ROOT_KEY);
    ({ dir, dataDir, anvilPort } = folder);
    const { provider, old, enclave, asAccount } = folder;
    try {
      const account = enclave.generateAccountKey();
      accountKey = account.apiKey;
      await asAccount(accountKey, "createAccount", ["hooks", account.address]);
      await asAccount(accountKey, "createPkp", ["signer", ""]);
      await asAccount(accountKey, "createPkp", ["spare", ""]);
      const pkpIds = ((await old.listPkps(1n, 0n, 10n))[0] as { id: string }[]).map((p) => p.id);
      await asAccount(accountKey, "createGroup", ["demo", "", pkpIds, [await computeCid(Buffer.from("x"))]]);
      const usage = enclave.generateUsageKey();
      await asAccount(accountKey, "addKey", [
        usage.address,
        usage.keyHash,
        "server",
        "",
        0n,
        {
          canCreateGroups: false,
          canDeleteGroups: false,
          canCreatePkps: false,
          manageIpfsIdsInGroups: [],
          addPkpToGroups: [],
          removePkpFromGroups: [],
          executeInGroups: [1],
        },
      ]);
      folder.writeDeployment();
      // What the previous release's service left in its database: the endpoint, and its scanner's one
      // unkeyed cursor at the head (everything of the old registry already announced).
      const db = await openDataLayer({ sqlitePath: path.join(dataDir, "ledger.sqlite") });
      try {
        const store = new WebhookStore(db);
        await new Endpoints({
          store,
          secrets: new SecretBox(enclave),
          urlPolicy: { guard: makeAddressGuard(["127.0.0.0/8"]), allowHttp: true },
          maxPerAccount: 16,
        }).create("1", { url: receiver.url, eventTypes: [...CHAIN_EVENT_TYPES], description: "" });
        await store.cursor(LEGACY_CHAIN_CURSOR, await provider.getBlockNumber());
      } finally {
        await db.close();
      }
    } finally {
      await folder.stopChain();
    }
    migration = await new Promise((resolve) => {
      const child = spawn(
        process.execPath,
        [require.resolve("ts-node/dist/bin"), "--transpile-only", "scripts/migrate/cli.ts"],
        { cwd: ROOT, env: env(), stdio: ["ignore", "ignore", "pipe"] },
      );
      let stderr = "";
      child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
      child.on("exit", (code) => resolve({ code, stderr }));
    });
  });
  after(async () => {
    await receiver?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("the migration starts the new registry's event cursor after its replay, in the service's database", async () => {
    expect(migration.code, migration.stderr).to.equal(0);
    const { to_registry, to_deploy_block, replay_end_block } = record();
    const db = await openDataLayer({ sqlitePath: path.join(dataDir, "ledger.sqlite") });
    try {
      const position = await new WebhookStore(db).cursorIfAny(chainCursorName(31337, to_registry));
      expect([position, replay_end_block > to_deploy_block]).to.deep.equal([replay_end_block, true]);
    } finally {
      await db.close();
    }
  });

  describe("the service started on the migrated folder", function () {
    let sigil: RunningSigil;
    const http = async (method: string, route: string, body?: unknown) => {
      const res = await fetch(`${sigil.url}/core/v1/${route}`, {
        method,
        headers: { "content-type": "application/json", "x-api-key": accountKey },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, json: (await res.json()) as Record<string, unknown> };
    };

    before(async () => {
      sigil = await startSigil(loadConfig(env(), dir));
      // The folder never had a ledger balance: buy the write's credit as `npx sigil billing top-up` does.
      const intent = (await http("POST", "billing/create_payment_intent", { amount_cents: 500 })).json;
      const steps = [
        await http("POST", `billing/simulated/intents/${String(intent.payment_intent_id)}/succeed`),
        await http("POST", "billing/confirm_payment", { payment_intent_id: intent.payment_intent_id }),
      ];
      expect(
        steps.map((r) => r.status),
        JSON.stringify([intent, ...steps]),
      ).to.deep.equal([200, 200]);
    });
    after(async () => {
      await sigil?.close();
    });

    it("announces a write made after the migration once, and nothing of the replay", async () => {
      const created = await http("POST", "pkps/create", { name: "after the migration" });
      expect(created.status, JSON.stringify(created.json)).to.equal(201);
      const block = (await new ethers.JsonRpcProvider(sigil.rpcUrl).getTransactionReceipt(
        String(created.json.tx_hash),
      ))!.blockNumber;
      await receiver.until(() => receiver.received.length >= 1);
      await sleep(2_000); // many scan intervals: a duplicate or a late replay event would have arrived
      expect(receiver.events().map((e) => [e.type, e.block_number, e.data.pkp_id])).to.deep.equal([
        ["pkp.created", block, created.json.pkp_id],
      ]);
    });
  });
});

describeOnPostgres(
  "migrate:registry's webhook cursor with SIGIL_DATABASE_URL (scripts/migrate/webhookCursor.ts)",
  function () {
    this.timeout(60_000);

    it("is written into the PostgreSQL database the service uses, not a SQLite file of the data folder", async () => {
      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-migrate-pg-"));
      const databaseUrl = await freshDatabaseUrl();
      const registry = "0x" + "5e".repeat(20);
      try {
        await startWebhookEventsAfterReplay({
          dataDir,
          databaseUrl,
          chainId: 31337,
          registry,
          throughBlock: 77,
        });
        const db = await openDataLayer({ databaseUrl, sqlitePath: "" });
        try {
          expect([
            await new WebhookStore(db).cursorIfAny(chainCursorName(31337, registry)),
            fs.readdirSync(dataDir),
          ]).to.deep.equal([77, []]);
        } finally {
          await db.close();
        }
      } finally {
        fs.rmSync(dataDir, { recursive: true, force: true });
      }
    });
  },
);
