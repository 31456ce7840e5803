#!/usr/bin/env node
// bench/node/server.js — lithd's POST /v1/do as a Node.js service written today would serve it: one
// process, Node's http module, one better-sqlite3 connection, each request one transaction
// (db.transaction(...).immediate: BEGIN IMMEDIATE, the statements, COMMIT; ROLLBACK when one throws).
// The peer bench/lithd's node arm measures lithd against: the same requests, the same answers, no
// batching of requests into shared transactions, no worker threads, no cluster.
//
// Usage: node bench/node/server.js --db PATH [--listen 127.0.0.1:0] [--synchronous full|normal]
//          [--modules DIR]
// Prints "listening on http://HOST:PORT" on stdout once it listens (what bench/net.c's
// bench_server_start waits for); serves until SIGTERM (or SIGINT), then closes the database and exits
// 0. --modules: the node_modules folder holding better-sqlite3 (default build/bench-node/node_modules
// of this tree, `make deps-bench`); without it, or without a better-sqlite3 that loads, one line on
// stderr says why and the exit status is 2 (bench/lithd then skips the arm with that line).
//
// Routes, as lithd answers them (docs/lithd.md):
//   POST /v1/do     {"statements": [{"sql", "params"}, ...]}: 200 {"results": [{"changes",
//                   "last_insert_rowid", "columns", "rows"}, ...]} after the COMMIT, or
//                   {"error": {"code", "message", "statement"}} with lithd's status for that code
//                   (409 constraint, 400 sql_error, ...); nothing of a failed request stays.
//   GET /v1/stats   {"commands", "batches", "failed"}: every request is its own transaction, so
//                   batches == commands (bench/transfer_http.c reads commands per transaction).
//   GET /healthz    {"ok":true}
// What lithd has and this peer leaves out: /v1/batch, /v1/query and its reader pool, named commands,
// Hrana, the answer options (rows, types, int64: a query string is refused, 400), exact 64-bit
// integers (JSON.parse and better-sqlite3's default numbers: past 2^53 they round), the SQL lithd
// refuses. The pragmas are lithd's (sqlite/conn.c): WAL, synchronous per --synchronous, a 16 MiB
// page cache, foreign keys on, temp_store in memory, a 5 s busy timeout; the checkpoint is SQLite's
// own (every 1000 pages, inside the COMMIT that crosses them), as a Node service has it.
"use strict";

const http = require("node:http");
const path = require("node:path");

const ROOT = path.resolve(__dirname, "../..");
const MAX_BODY = 8 * 1024 * 1024; // lithd's --max-body default

function fail(msg) {
  process.stderr.write(`bench/node/server.js: ${msg}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const o = { db: null, listen: "127.0.0.1:0", synchronous: "normal",
    modules: path.join(ROOT, "build/bench-node/node_modules") };
  for (let i = 0; i < argv.length; i++) {
    const key = argv[i], val = argv[i + 1];
    if (!["--db", "--listen", "--synchronous", "--modules"].includes(key) || val === undefined)
      fail(`unknown option or missing value: ${key}` +
        " (usage: --db PATH [--listen HOST:PORT] [--synchronous full|normal] [--modules DIR])");
    o[key.slice(2)] = val;
    i++;
  }
  if (!o.db) fail("--db PATH is required");
  if (!["full", "normal"].includes(o.synchronous)) fail(`--synchronous ${o.synchronous}: full or normal`);
  const colon = o.listen.lastIndexOf(":");
  o.host = o.listen.slice(0, colon);
  o.port = Number(o.listen.slice(colon + 1));
  if (colon < 1 || !Number.isInteger(o.port) || o.port < 0 || o.port > 65535)
    fail(`--listen ${o.listen}: HOST:PORT`);
  return o;
}

const opt = parseArgs(process.argv.slice(2));

let Database;
try {
  Database = require(path.join(path.resolve(opt.modules), "better-sqlite3"));
  new Database(":memory:").close(); // its native module loads here, not in require
} catch (e) {
  const why = e.code === "MODULE_NOT_FOUND" ? "is not installed" : `does not load: ${e.message.split("\n")[0]}`;
  fail(`better-sqlite3 in ${opt.modules} ${why} (make deps-bench)`);
}

let db;
try {
  db = new Database(opt.db);
  db.pragma("journal_mode = WAL");
  db.pragma(`synchronous = ${opt.synchronous}`);
  db.pragma("cache_size = -16384");
  db.pragma("foreign_keys = ON");
  db.pragma("temp_store = MEMORY");
  db.pragma("busy_timeout = 5000");
} catch (e) {
  fail(`opening ${opt.db}: ${e.message.split("\n")[0]}`);
}

// ---- statements ------------------------------------------------------------------------------------

// Prepared once per SQL text, as better-sqlite3's docs advise. A statement that returns rows answers
// them as arrays (lithd's default), its columns named.
const cache = new Map();
function prepare(sql) {
  let st = cache.get(sql);
  if (st === undefined) {
    st = db.prepare(sql);
    if (st.reader) st.raw(true);
    cache.set(sql, st);
  }
  return st;
}

// lithd's values: a blob is {"base64": "..."} both ways; named parameters are keyed as the SQL writes
// them (":k", "@k", "$k"), better-sqlite3 wants the bare name.
function fromJSON(v) {
  return v !== null && typeof v === "object" && typeof v.base64 === "string" ? Buffer.from(v.base64, "base64") : v;
}
function toJSON(v) {
  return Buffer.isBuffer(v) ? { base64: v.toString("base64") } : v;
}
function bindings(params) {
  if (params === undefined || params === null) return [];
  if (Array.isArray(params)) return params.map(fromJSON);
  const named = {};
  for (const [k, v] of Object.entries(params)) named[/^[:@$]/.test(k) ? k.slice(1) : k] = fromJSON(v);
  return [named];
}

// better-sqlite3 reports the connection's last rowid after every write; lithd reports a statement's
// own (0 when it inserted nothing): a rowid that did not move was not this statement's.
let lastRowid = 0;

function runOne(s) {
  const st = prepare(s.sql);
  const args = bindings(s.params);
  if (st.reader) {
    // all() reports no changes (an INSERT ... RETURNING's): 0, where lithd counts them
    const rows = st.all(...args).map((row) => row.map(toJSON));
    return { changes: 0, last_insert_rowid: 0, columns: st.columns().map((c) => c.name), rows };
  }
  const info = st.run(...args);
  const rowid = Number(info.lastInsertRowid);
  const own = rowid !== lastRowid ? rowid : 0;
  lastRowid = rowid;
  return { changes: info.changes, last_insert_rowid: own, columns: [], rows: [] };
}

// One request, one transaction: a statement that throws rolls all of it back; its index goes with it.
const runAll = db.transaction((statements) =>
  statements.map((s, i) => {
    try {
      return runOne(s);
    } catch (e) {
      e.statement = i;
      throw e;
    }
  }));

// ---- answers ---------------------------------------------------------------------------------------

// lithd's code and status for an SQLite error (tools/lithd/request/sqljson.c).
const CODES = {
  SQLITE_ERROR: ["sql_error", 400], SQLITE_MISUSE: ["misuse", 400], SQLITE_RANGE: ["sql_error", 400],
  SQLITE_CONSTRAINT: ["constraint", 409], SQLITE_BUSY: ["busy", 503], SQLITE_LOCKED: ["busy", 503],
  SQLITE_INTERRUPT: ["interrupted", 503], SQLITE_FULL: ["disk_full", 507], SQLITE_IOERR: ["ioerr", 500],
  SQLITE_CORRUPT: ["corrupt", 500], SQLITE_READONLY: ["readonly", 500], SQLITE_CANTOPEN: ["cantopen", 500],
  SQLITE_NOMEM: ["nomem", 500], SQLITE_SCHEMA: ["schema", 500],
};

function errorOf(e) {
  if (typeof e.code === "string" && e.code.startsWith("SQLITE_")) {
    const [code, status] = CODES[e.code.replace(/^(SQLITE_[A-Z]+)_.*$/, "$1")] || ["unknown", 500];
    return [status, code, e.message];
  }
  // better-sqlite3's own refusals of a statement (wrong parameters, more than one statement): a bad request
  if (e instanceof TypeError || e instanceof RangeError) return [400, "bad_request", e.message];
  return [500, "unknown", String(e && e.message)];
}

function answer(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) });
  res.end(text);
}

function refuse(res, status, code, message, statement = null) {
  answer(res, status, { error: { code, message, statement } });
}

// ---- the server ------------------------------------------------------------------------------------

const stats = { commands: 0, batches: 0, failed: 0 };

function doRequest(res, body) {
  let req;
  try {
    req = JSON.parse(body);
  } catch (e) {
    return refuse(res, 400, "bad_request", `the body is not JSON: ${e.message}`);
  }
  const statements = req && req.statements;
  if (!Array.isArray(statements) || statements.length === 0 ||
      !statements.every((s) => s && typeof s.sql === "string"))
    return refuse(res, 400, "bad_request", "\"statements\": an array of {\"sql\", \"params\"}");
  stats.commands++;
  stats.batches++;
  try {
    answer(res, 200, { results: runAll.immediate(statements) });
  } catch (e) {
    stats.failed++;
    const [status, code, message] = errorOf(e);
    refuse(res, status, code, message, e.statement === undefined ? null : e.statement);
  }
}

const server = http.createServer((req, res) => {
  const [route, query] = req.url.split("?", 2);
  if (query !== undefined) return refuse(res, 400, "bad_request", "this server takes no query parameters");
  if (req.method === "GET" && route === "/v1/stats") return answer(res, 200, stats);
  if (req.method === "GET" && route === "/healthz") return answer(res, 200, { ok: true });
  if (req.method !== "POST" || route !== "/v1/do") return refuse(res, 404, "not_found", `no route ${route}`);
  if (!/^application\/json\s*(;|$)/i.test(req.headers["content-type"] || ""))
    return refuse(res, 415, "bad_request", "Content-Type must be application/json");
  const chunks = [];
  let size = 0;
  req.on("data", (c) => {
    size += c.length;
    if (size <= MAX_BODY) chunks.push(c);
  });
  req.on("end", () => {
    if (size > MAX_BODY) return refuse(res, 413, "too_large", `the body passes ${MAX_BODY} bytes`);
    doRequest(res, Buffer.concat(chunks).toString("utf8"));
  });
});
// lithd closes a connection idle 10 s (--request-timeout-ms); Node's default, 5 s, would close the
// bench client's stats connections between the window's edges.
server.keepAliveTimeout = 10000;

server.on("error", (e) => fail(`listening on ${opt.listen}: ${e.message}`));
server.listen(opt.port, opt.host, () => {
  const a = server.address();
  process.stdout.write(`listening on http://${a.address}:${a.port}\n`);
  process.stderr.write(`bench/node/server.js: ${opt.db}, synchronous ${opt.synchronous}, SQLite ` +
    `${db.prepare("SELECT sqlite_version()").pluck().get()}, better-sqlite3 ` +
    `${require(path.join(path.resolve(opt.modules), "better-sqlite3/package.json")).version}, ` +
    `node ${process.version}\n`);
});

// SIGTERM: no new connections; the requests already read are answered (each runs to its COMMIT
// before Node reads another event), idle connections close at once, busy ones after 10 s at most
// (lithd's --stop-grace-ms); then the database closes (checkpointing the WAL) and the exit is 0.
function stop() {
  server.close(() => {
    db.close();
    process.exit(0);
  });
  server.closeIdleConnections();
  setTimeout(() => server.closeAllConnections(), 10000).unref();
}
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
