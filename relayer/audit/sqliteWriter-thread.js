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
 *  - `{op: "insert", rows}`: each row the eight values of an `audit_pending` row (column order below);
 *    the batch is written whole or not at all.
 *  - `{op: "chain", account, batch, checkpointEvery, checkpointMs, now}`: at most `batch` pending entries
 *    of the account chained onto its head, in the order they were written (the store's chainBatch on
 *    this connection); answers `count` and `due`: the heads (seq, hash) a checkpoint is due at, exactly
 *    every `checkpointEvery` entries and by time, for the main thread to sign (it holds the key).
 *  - `{op: "checkpoints", rows}`: signed checkpoints stored, and the heads' last checkpoint moved to them.
 *  - `{op: "cpu"}`: no transaction; the CPU time this thread has used, in ns (Linux; else null).
 */
const { parentPort, workerData } = require("node:worker_threads");
const BetterSqlite3 = require("better-sqlite3");
const { GENESIS_HASH, entryHashOfCanonicalData } = require("./entryHash");

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

const PENDING_COLUMNS = ["account_id", "kind", "time_ms", "data", "principal", "cid", "pkps", "outcome"];
const ENTRY_COLUMNS = [
  "account_id",
  "seq",
  "prev_hash",
  "hash",
  "kind",
  "time_ms",
  "data",
  "principal",
  "cid",
  "pkps",
  "outcome",
];

const insertPending = db.transaction((rows) => insertRows("audit_pending", PENDING_COLUMNS, rows));

const chain = db.transaction(({ account, batch, checkpointEvery, checkpointMs, now }) => {
  const select = "SELECT seq, hash, checkpoint_seq, checkpoint_ms FROM audit_heads WHERE account_id = ?";
  let head = statement(select).get(account);
  if (!head) {
    statement(
      "INSERT INTO audit_heads (account_id, seq, hash, checkpoint_seq, checkpoint_ms) VALUES (?, 0, ?, 0, ?) ON CONFLICT (account_id) DO NOTHING",
    ).run(account, GENESIS_HASH, now);
    head = statement(select).get(account);
  }
  const pending = statement(
    "SELECT id, kind, time_ms, data, principal, cid, pkps, outcome FROM audit_pending WHERE account_id = ? ORDER BY id LIMIT ?",
  ).all(account, batch);
  let seq = Number(head.seq);
  let hash = head.hash;
  let signedSeq = Number(head.checkpoint_seq);
  let signedMs = Number(head.checkpoint_ms);
  const due = [];
  const rows = [];
  for (const p of pending) {
    const next = { account, seq: seq + 1, prev_hash: hash, kind: p.kind, time_ms: Number(p.time_ms) };
    const h = entryHashOfCanonicalData(next, p.data);
    rows.push([account, next.seq, hash, h, p.kind, p.time_ms, p.data, p.principal, p.cid, p.pkps, p.outcome]);
    seq = next.seq;
    hash = h;
    // Exactly every checkpointEvery entries, however many one pass chains.
    if (seq - signedSeq >= checkpointEvery) {
      due.push({ seq, hash });
      signedSeq = seq;
      signedMs = now;
    }
  }
  if (pending.length > 0) {
    insertRows("audit_entries", ENTRY_COLUMNS, rows);
    const ids = pending.map((p) => p.id);
    for (let i = 0; i < ids.length; i += 500) {
      const part = ids.slice(i, i + 500);
      statement(`DELETE FROM audit_pending WHERE id IN (${part.map(() => "?").join(", ")})`).run(part);
    }
    statement("UPDATE audit_heads SET seq = ?, hash = ? WHERE account_id = ?").run(seq, hash, account);
  }
  if (seq > signedSeq && now - signedMs >= checkpointMs) due.push({ seq, hash });
  return { count: pending.length, due };
});

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
    if (msg.op === "insert") insertPending.immediate(msg.rows);
    else if (msg.op === "chain") result = chain.immediate(msg);
    else if (msg.op === "checkpoints") storeCheckpoints.immediate(msg.rows);
    else if (msg.op === "cpu") result = threadCpuNs();
    else throw new Error(`unknown operation ${msg.op}`);
    parentPort.postMessage({ id: msg.id, ok: true, result });
  } catch (err) {
    parentPort.postMessage({ id: msg.id, ok: false, error: String((err && err.message) || err) });
  }
});
