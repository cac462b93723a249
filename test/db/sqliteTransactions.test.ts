/**
 * The SQLite engine serves a whole process on one connection. A statement sent from outside an open
 * transaction (another request, another component) must not run inside it: it would see the
 * transaction's uncommitted rows and roll back with it. It waits for the transaction to end instead,
 * while the transaction's own callback, and the helpers it calls with the layer, run at once.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import { openEngine, type DataLayer } from "../../relayer/db/engine";

describe("data layer: SQLite transactions and the statements around them", function () {
  let dir: string;
  let db: DataLayer;

  beforeEach(async function () {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-sqlite-tx-"));
    db = openEngine({ sqlitePath: path.join(dir, "t.sqlite") });
    await db.exec("CREATE TABLE t (v TEXT NOT NULL)");
  });
  afterEach(async function () {
    await db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const values = async () =>
    ((await db.exec("SELECT v FROM t ORDER BY v")) as { v: string }[]).map((r) => r.v);

  it("keeps a write made from outside when the open transaction rolls back", async function () {
    let entered!: () => void;
    const inside = new Promise<void>((r) => (entered = r));
    const failing = db
      .transaction(async (tx) => {
        await tx.exec("INSERT INTO t (v) VALUES ('rolled back')");
        entered();
        await new Promise((r) => setTimeout(r, 50));
        throw new Error("the transaction fails");
      })
      .catch((e: Error) => e.message);
    await inside;
    await db.exec("INSERT INTO t (v) VALUES ('outside')");
    expect([await failing, await values()]).to.deep.equal(["the transaction fails", ["outside"]]);
  });

  it("does not let a read from outside see the open transaction's uncommitted rows", async function () {
    let entered!: () => void;
    const inside = new Promise<void>((r) => (entered = r));
    const failing = db
      .transaction(async (tx) => {
        await tx.exec("INSERT INTO t (v) VALUES ('uncommitted')");
        entered();
        await new Promise((r) => setTimeout(r, 50));
        throw new Error("rolled back");
      })
      .catch(() => undefined);
    await inside;
    const seen = await values();
    await failing;
    expect(seen).to.deep.equal([]);
  });

  it("runs the layer's statements made by the transaction's own callback inside it", async function () {
    await db
      .transaction(async () => {
        // A helper that was handed the layer, not the transaction: it is the transaction's work.
        await db.exec("INSERT INTO t (v) VALUES ('helper')");
        throw new Error("rolled back");
      })
      .catch(() => undefined);
    await db.transaction(async () => {
      await db.exec("INSERT INTO t (v) VALUES ('committed')");
    });
    expect(await values()).to.deep.equal(["committed"]);
  });
});
