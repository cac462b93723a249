"use strict";
/**
 * The audit log's writer on SQLite (sqliteWriter.ts): a thread with its own connection to the relayer's
 * database file that writes the log's tables: the entries requests record (`audit_pending`), their
 * chaining into `audit_entries`, and the checkpoints the main thread signed. better-sqlite3 blocks the
 * thread that calls it, and a commit, quick on average, now and then waits milliseconds on the disk (the
 * kernel throttling writes, a WAL checkpoint's fsync): on the main thread that wait stops every request
 * at once; here it delays only the requests whose entries are in that commit. And with every write of
 * these tables on one connection, the main thread never waits on this one's lock for them.
 *
 * One message, one transaction, answered `{id, ok, …}` once committed:
 *  - `{op: "record", rows, checkpointEvery, checkpointMs, now}`: entries requests recorded, each the
 *    eight values of an `audit_pending` row (account_id, kind, time_ms, data, principal, cid, pkps,
 *    outcome: store.ts's pendingRow), chained at once onto their accounts' heads (after any pending
 *    rows of the account), the whole batch or none of it: they never go through `audit_pending`.
 *    Answers `due`: the heads `{account, seq, hash}` a checkpoint is due at (entryHash.js's chainOnto,
 *    the rule the store's chainer follows too), for the main thread to sign (it holds the key).
 *  - `{op: "chain", account, batch, checkpointEvery, checkpointMs, now}`: at most `batch` pending entries
 *    of the account (path-B writes, a restart's leftovers) chained onto its head, in the order they
 *    were written; answers `count` and `due` (heads `{seq, hash}`), as above.
 *  - `{op: "checkpoints", rows}`: signed checkpoints stored, and the heads' last checkpoint moved to them.
 *  - `{op: "cpu"}`: no transaction; the CPU time this thread has used, in ns (Linux; else null).
 */
const { parentPort, workerData } = require("node:worker_threads");
const BetterSqlite3 = require("better-sqlite3");
const { GENESIS_HASH, ENTRY_COLUMNS, chainOnto } = require("./entryHash");

const db = new BetterSqlite3(workerData.path);
// As the relayer's own connection (relayer/db/engine.ts): a commit is in the WAL file before the answer,
// which a kill -9 of the process cannot take back; the main connection's writers queue on the file lock.
db.pragma("journal_mode = WAL");
db.pragma("synchronous = NORMAL");
db.pragma("busy_timeout = 5000");

/** Rows per INSERT statement (at most 11 parameters each, far below SQLite's limit). */
const ROWS_PER_STATEMENT = 50;
const statements = new Map();
function statement(text) {
  let st = statements.get(text);
  if (!st) {
    st = db.prepare(text);
    statements.set(text, st);
  }
  return st;
}
function insertRows(table, columns, rows) {
  const marks = "(" + columns.map(() => "?").join(", ") + ")";
  for (let i = 0; i < rows.length; i += ROWS_PER_STATEMENT) {
    const chunk = rows.slice(i, i + ROWS_PER_STATEMENT);
    statement(
      `INSERT INTO ${table} (${columns.join(", ")}) VALUES ` + Array(chunk.length).fill(marks).join(", "),
    ).run(chunk.flat());
  }
}

/**
 * Each account's last checkpoint as this thread decided it: the heads it reported due are signed by the
 * main thread a moment later (storeCheckpoints), and a batch chained meanwhile must count from them, not
 * from the older position still in audit_heads. Lost with the thread: a restart counts from the table.
 */
const decided = new Map();

/** The account's head (created at the genesis on first use), with this thread's newer checkpoint. */
function headOf(account, now) {
  const select = "SELECT seq, hash, checkpoint_seq, checkpoint_ms FROM audit_heads WHERE account_id = ?";
  let head = statement(select).get(account);
  if (!head) {
    statement(
      "INSERT INTO audit_heads (account_id, seq, hash, checkpoint_seq, checkpoint_ms) VALUES (?, 0, ?, 0, ?) ON CONFLICT (account_id) DO NOTHING",
    ).run(account, GENESIS_HASH, now);
    head = statement(select).get(account);
  }
  const d = decided.get(account);
  if (d && d.seq > Number(head.checkpoint_seq))
    return { ...head, checkpoint_seq: d.seq, checkpoint_ms: d.ms };
  return head;
}

const PENDING_SELECT =
  "SELECT id, kind, time_ms, data, principal, cid, pkps, outcome FROM audit_pending WHERE account_id = ? ORDER BY id";

/**
 * Chains the account's pending rows (at most `limit`), then `fresh` (rows just recorded, never written
 * to audit_pending), onto its head: the chain keeps the order entries were recorded in. Inside the
 * caller's transaction; answers how many pending rows it took and the heads due a checkpoint.
 */
function chainAccount(account, fresh, { limit, checkpointEvery, checkpointMs, now }) {
  const head = headOf(account, now);
  const pending = statement(PENDING_SELECT + " LIMIT ?").all(account, limit);
  const c = chainOnto(account, head, pending.length ? pending.concat(fresh) : fresh, {
    checkpointEvery,
    checkpointMs,
    now,
  });
  if (c.rows.length > 0) {
    insertRows("audit_entries", ENTRY_COLUMNS, c.rows);
    const ids = pending.map((p) => p.id);
    for (let i = 0; i < ids.length; i += 500) {
      const part = ids.slice(i, i + 500);
      statement(`DELETE FROM audit_pending WHERE id IN (${part.map(() => "?").join(", ")})`).run(part);
    }
    statement("UPDATE audit_heads SET seq = ?, hash = ? WHERE account_id = ?").run(c.seq, c.hash, account);
  }
  return { count: pending.length, due: c.due, signed: c.due.length > 0 ? c.signed : null };
}

/**
 * Entries recorded by requests, chained at once (SQLite has one writer: this thread, so no other
 * chainer can hold the head meanwhile). `rows` are audit_pending rows (store.ts's pendingRow); an
 * account's pending rows (a restart's leftovers, path-B writes) go first.
 */
const record = db.transaction(({ rows, checkpointEvery, checkpointMs, now }) => {
  const byAccount = new Map();
  for (const r of rows) {
    const entry = {
      kind: r[1],
      time_ms: r[2],
      data: r[3],
      principal: r[4],
      cid: r[5],
      pkps: r[6],
      outcome: r[7],
    };
    const list = byAccount.get(r[0]);
    if (list) list.push(entry);
    else byAccount.set(r[0], [entry]);
  }
  const due = [];
  const signed = [];
  for (const [account, fresh] of byAccount) {
    const c = chainAccount(account, fresh, { limit: -1, checkpointEvery, checkpointMs, now });
    for (const d of c.due) due.push({ account, seq: d.seq, hash: d.hash });
    if (c.signed) signed.push([account, c.signed]);
  }
  return { due, signed };
});

const chain = db.transaction(({ account, batch, checkpointEvery, checkpointMs, now }) => {
  const c = chainAccount(account, [], { limit: batch, checkpointEvery, checkpointMs, now });
  return { count: c.count, due: c.due, signed: c.signed ? [[account, c.signed]] : [] };
});

/** Once a transaction committed: the checkpoints it decided count for the next ones (`decided`). */
function decide(result) {
  for (const [account, signed] of result.signed) decided.set(account, signed);
  delete result.signed;
  return result;
}

const storeCheckpoints = db.transaction((rows) => {
  for (const [account, seq, headHash, timeMs, signer, signature] of rows) {
    // Another writer (an export's checkpoint on the main connection) may have signed this head already.
    statement(
      "INSERT INTO audit_checkpoints (account_id, seq, head_hash, time_ms, signer, signature) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (account_id, seq) DO NOTHING",
    ).run(account, seq, headHash, timeMs, signer, signature);
    statement(
      "UPDATE audit_heads SET checkpoint_seq = ?, checkpoint_ms = ? WHERE account_id = ? AND checkpoint_seq < ?",
    ).run(seq, timeMs, account, seq);
  }
});

/** Nanoseconds this thread has run on a CPU (Linux), or null: what the benchmarks report per thread. */
function threadCpuNs() {
  try {
    return Number(require("node:fs").readFileSync("/proc/thread-self/schedstat", "utf8").split(" ")[0]);
  } catch {
    return null;
  }
}

parentPort.on("message", (msg) => {
  if (msg.op === "close") {
    db.close();
    parentPort.postMessage({ id: msg.id, ok: true });
    parentPort.close();
    return;
  }
  try {
    // .immediate: BEGIN IMMEDIATE takes the write lock first (waiting on busy_timeout), so a
    // transaction never fails half-way on it.
    let result = null;
    if (msg.op === "record") result = decide(record.immediate(msg));
    else if (msg.op === "chain") result = decide(chain.immediate(msg));
    else if (msg.op === "checkpoints") storeCheckpoints.immediate(msg.rows);
    else if (msg.op === "cpu") result = threadCpuNs();
    else throw new Error(`unknown operation ${msg.op}`);
    parentPort.postMessage({ id: msg.id, ok: true, result });
  } catch (err) {
    parentPort.postMessage({ id: msg.id, ok: false, error: String((err && err.message) || err) });
  }
});
