/**
 * A data folder written by the release before the one database (issue 24, part 4) is upgraded on the
 * first start, nothing lost. The folder is made faithfully: a real stack writes an account (with its
 * profile), a usage key, an idempotent write, a pin, a webhook endpoint (its secret sealed), a pending
 * delivery, a spent sign-in nonce and a signed-out session; then the relayer stops and its rows are
 * laid out as that release kept them (test/helpers/previousReleaseFolder.ts: its unversioned
 * relayer.sqlite, and without billing a webhooks.sqlite at schema version 11; pinned bytes only in
 * actions/). The relayer starts on that folder and finds everything again, through the API where the
 * API shows it, and every row of the old files in the one database.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import BetterSqlite3 from "better-sqlite3";
import { expect } from "chai";
import { createBilling, SimulatedProcessor, type Billing } from "../../relayer/billing";
import { type DataLayer, SharedSignInNonces, openEngine, sessionRevocationsFor } from "../../relayer/db";
import {
  type PreviousReleaseRows,
  RELAYER_FILE_TABLES,
  WEBHOOK_FILE_TABLES,
  layOutAsPreviousRelease,
} from "../helpers/previousReleaseFolder";
import { startStack, type Stack } from "../helpers/stack";

const PUBLIC_URL = "https://1.1.1.1/sigil-hooks"; // never called: the delivery is due in an hour
const CODE = 'async function main() { return "kept across the upgrade"; }';
const OWNER = "0x" + "ab".repeat(20);
const SESSION_KEY = "0x" + "cd".repeat(20);

for (const withBilling of [false, true])
  describe(`relayer: a data folder of the previous release is upgraded on first start (${withBilling ? "with billing: into the ledger's file" : "without billing: into relayer.sqlite"})`, function () {
    this.timeout(180_000);
    let s: Stack;
    let billing: Billing | undefined;
    let billingDir: string;
    let previous: PreviousReleaseRows;
    let key: string;
    let accountId: number;
    let cid: string;
    let webhookId: string;
    let write: { status: number; body: unknown };
    const idem = { "idempotency-key": "upgrade-1" };
    const nowS = () => Math.floor(Date.now() / 1000);
    /** Where the relayer keeps its tables now. */
    const oneFile = () =>
      withBilling ? path.join(billingDir, "ledger.sqlite") : path.join(s.dataDir, "relayer.sqlite");

    before(async () => {
      billingDir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-upgrade-"));
      if (withBilling)
        billing = await createBilling({
          dbPath: path.join(billingDir, "ledger.sqlite"),
          processor: new SimulatedProcessor(),
          signupCreditCents: 1_000,
          chargeFlushMs: 0,
        });
      s = await startStack({ billing });
      const a = await s.api("POST", "/core/v1/new_account", {
        body: { account_name: "upgrade", account_description: "kept", email: "ops@example.com" },
      });
      expect(a.status, JSON.stringify(a.body)).to.equal(201);
      key = a.body.api_key;
      accountId = a.body.account_id;
      const w = await s.api("POST", "/core/v1/pkps/create", { key, body: { name: "p" }, headers: idem });
      expect(w.status, JSON.stringify(w.body)).to.equal(201);
      write = { status: w.status, body: w.body };
      const p = await s.api("POST", "/core/v1/actions", { key, body: { code: CODE } });
      expect(p.status, JSON.stringify(p.body)).to.equal(201);
      cid = p.body.cid;
      const h = await s.api("POST", "/core/v1/webhooks", {
        key,
        body: { url: PUBLIC_URL, event_types: ["payment.credited"] },
      });
      expect(h.status, JSON.stringify(h.body)).to.equal(201);
      webhookId = h.body.id;

      await s.relayer.close();
      // What the stores write for a sign-in and a sign-out, and a delivery waiting for its next attempt.
      const db = openEngine({ sqlitePath: oneFile() });
      try {
        expect(await new SharedSignInNonces(db).claim(OWNER, "nonce-1", nowS() + 3600, nowS())).to.equal(
          true,
        );
        expect(await sessionRevocationsFor(db).revoke(SESSION_KEY, nowS() + 3600, nowS())).to.equal(true);
        await pendingDelivery(db, webhookId, String(accountId));
      } finally {
        await db.close();
      }
      previous = await layOutAsPreviousRelease({
        relayerDir: s.dataDir,
        oneFile: oneFile(),
        webhooksInOwnFile: !withBilling,
      });
      // The folder is what the previous release left: nothing of the one database's own tables yet.
      expect(fs.existsSync(path.join(s.dataDir, "relayer.sqlite"))).to.equal(true);
      expect(fs.existsSync(path.join(s.dataDir, "webhooks.sqlite"))).to.equal(!withBilling);
      expect(previous.idempotency).to.have.length(1);
      expect(previous.pins).to.have.length(1);
      expect(previous.webhook_deliveries).to.have.length(1);

      await s.restartRelayer();
    });
    after(async () => {
      await s?.close();
      await billing?.close();
      fs.rmSync(billingDir, { recursive: true, force: true });
    });

    it("leaves one database file: the old relayer file's rows are in it and the old files are gone", () => {
      const files = fs.readdirSync(s.dataDir).filter((f) => /\.sqlite/.test(f));
      if (withBilling) expect(files).to.deep.equal([]);
      else expect(files.filter((f) => f.endsWith(".sqlite"))).to.deep.equal(["relayer.sqlite"]);
      expect(fs.readdirSync(s.dataDir).some((f) => f.includes("pre-upgrade"))).to.equal(false);
      const db = new BetterSqlite3(oneFile(), { readonly: true });
      try {
        for (const table of [...RELAYER_FILE_TABLES, ...WEBHOOK_FILE_TABLES]) {
          const rows = db.prepare(`SELECT * FROM ${table}`).all() as Array<Record<string, unknown>>;
          for (const row of previous[table]) {
            const found = rows.find((r) => Object.keys(row).every((c) => r[c] === row[c]));
            expect(found, `${table}: ${JSON.stringify(row)}`).to.not.equal(undefined);
          }
        }
        expect(db.prepare("SELECT cid FROM pinned_code").all()).to.deep.equal([{ cid }]);
      } finally {
        db.close();
      }
    });

    it("the account answers with its profile, and its key still works", async () => {
      const r = await s.api("GET", "/core/v1/account", { key });
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
      expect(r.body).to.include({ account_id: accountId, description: "kept", email: "ops@example.com" });
    });

    it("the idempotent write replays its answer, and writes nothing", async () => {
      const block = await s.provider.getBlockNumber();
      const r = await s.api("POST", "/core/v1/pkps/create", { key, body: { name: "p" }, headers: idem });
      expect({ status: r.status, body: r.body }).to.deep.equal(write);
      expect(r.headers.get("idempotent-replayed")).to.equal("true");
      expect(await s.provider.getBlockNumber()).to.equal(block);
    });

    it("the pin is counted and listed, and its code is served from the database even without the file", async () => {
      const pinned = await s.api("GET", "/core/v1/actions/pinned", { key });
      expect(pinned.status, JSON.stringify(pinned.body)).to.equal(200);
      expect(pinned.body.items.map((i: { cid: string }) => i.cid)).to.deep.equal([cid]);
      fs.rmSync(path.join(s.dataDir, "actions", cid));
      const r = await s.api("GET", `/core/v1/actions/${cid}`, { key });
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
      expect(r.body.code).to.equal(CODE);
    });

    it("the webhook endpoint, its sealed secret and its pending delivery are there", async () => {
      const e = await s.api("GET", `/core/v1/webhooks/${webhookId}`, { key });
      expect(e.status, JSON.stringify(e.body)).to.equal(200);
      expect(e.body.url).to.equal(PUBLIC_URL);
      const d = await s.api("GET", `/core/v1/webhooks/${webhookId}/deliveries`, { key });
      expect(d.status, JSON.stringify(d.body)).to.equal(200);
      expect(d.body.items.map((i: { status: string }) => i.status)).to.deep.equal(["pending"]);
      // The sealed secret itself is compared byte for byte with the old file's row (first test).
    });

    it("the spent sign-in nonce stays spent and the signed-out session stays signed out", async () => {
      const db: DataLayer = openEngine({ sqlitePath: oneFile() });
      try {
        expect(await new SharedSignInNonces(db).claim(OWNER, "nonce-1", nowS() + 3600, nowS())).to.equal(
          false,
        );
        expect(await sessionRevocationsFor(db).isRevoked(SESSION_KEY, nowS())).to.equal(true);
      } finally {
        await db.close();
      }
    });
  });

/** An event and its delivery to `endpointId`, due in an hour (as after a failed attempt). */
async function pendingDelivery(db: DataLayer, endpointId: string, accountId: string): Promise<void> {
  const now = Date.now();
  await db.exec(
    "INSERT INTO webhook_outbox_events (event_id, account_id, type, payload, created_ms) VALUES (?, ?, ?, ?, ?)",
    ["evt_upgrade_1", accountId, "payment.credited", '{"id":"evt_upgrade_1"}', now],
  );
  await db.exec(
    `INSERT INTO webhook_deliveries (delivery_id, endpoint_id, event_id, account_id, status, attempts,
       next_attempt_ms, first_failure_ms, lease_owner, lease_expires_ms, last_status, last_error, last_attempt_ms, created_ms)
     VALUES (?, ?, ?, ?, 'pending', 1, ?, ?, NULL, 0, 503, 'HTTP 503', ?, ?)`,
    ["whd_" + "0".repeat(24), endpointId, "evt_upgrade_1", accountId, now + 3_600_000, now, now, now],
  );
}
