#!/usr/bin/env node
// bench/hrana — @libsql/client (0.17.4) doing bench/transfer.h's transfer
// through lithd's Hrana endpoint, against lithd's own Node client and against
// @libsql/client on a local file: what an app that already speaks libSQL gets
// by pointing its URL at lithd.
//
// The workload is bench/lithd's transfer (bench/transfer.h): loop c owns
// accounts 10c..10c+9 and topic c; a transfer debits one of its accounts,
// credits another, appends (c, seq, src, dst, amount) to the ledger and bumps
// topic c's version: four statements, one transaction, the balance read left
// out as in bench/lithd (the CHECK (balance >= 0) never refuses: balances
// start at 10^12). Source and destination: a = rng % 10, b = (a + 1 +
// rng % 9) % 10; amount 1 + rng % 50; seq counts from 1 per loop.
//
// Arms, each point (arm, N) on a freshly seeded database in a temp dir:
//
//   A  hrana   @libsql/client, http:// URL at lithd (spawned by this program,
//              --synchronous normal), each transfer
//              client.batch([debit, credit, ledger, topic], "write"): one
//              POST /v2/pipeline (store_sql x4, batch of BEGIN IMMEDIATE, the
//              four, COMMIT, ROLLBACK-if-not-ok; close).
//   W  ws      arm A's client code exactly (same options, same statements), its
//              URL ws:// at the same lithd build: Hrana 3 over one WebSocket
//              (the client's batch() there is open_stream, open_cursor and
//              fetch_cursor on it, close_cursor, close_stream). W / A is what
//              the WebSocket transport gives this client over http://.
//   B  lith    clients/node/lith.js, the same lithd build, each transfer
//              client.do([the four]): one POST /v1/do, one command (all or
//              nothing, lithd's savepoint).
//   C  file    @libsql/client with a file: URL in this process (the libsql
//              native module), the same client.batch(..., "write") (BEGIN
//              IMMEDIATE ... COMMIT on one connection), after PRAGMA
//              synchronous=NORMAL (and lithd's cache_size and foreign_keys).
//   N  null    arm A's client code exactly (same options, same statements),
//              its http:// URL at bench/hrana_null (spawned like lithd): a
//              "null" Hrana server that runs no SQL and answers each pipeline
//              with a valid canned answer at almost no cost. N is the most any
//              server could give this client on this machine (the client's
//              ceiling): A / N is lithd's share of it, N / C whether any server
//              could reach a given multiple of the file. Nothing is stored, so
//              no database is made or checked for N. Run by default when
//              --null PATH is given or build/default/bench/hrana_null exists
//              (else skipped, saying why).
//
// Concurrency N = N async loops in this one Node process, each a closed loop
// (await the transfer, start the next), all sharing ONE client object, as an
// app shares the client it created at startup among its request handlers.
// @libsql/client's default `concurrency` (20 requests in flight per client)
// would hold 64 loops to 20 in flight, so arms A and C are created with
// concurrency: N (lith.js has no such limit). Arms A, B and N go through
// Node's global fetch (undici), keep-alive, one connection per request in
// flight; arm W through one WebSocket (the client's, from its `ws` module),
// every request in flight multiplexed on it.
//
// Each point: --warmup s, then a window of --seconds s; a transfer counts when
// its answer arrives inside the window; latency is from the call to the
// resolution of its promise. CPU time of this process (process.cpuUsage) and
// of the server (lithd or hrana_null; per thread, /proc/PID/task) is read at
// the window's edges, with lithd's /v1/stats (commands / batches = transfers
// per transaction). After each point the server gets SIGTERM and must exit 0;
// then (not for N) the file is checked with the local client: quick_check,
// money conserved, ledger rows and topic versions equal to the transfers
// answered OK, in total and per loop. Any mismatch or failed call is an error
// (the err column); exit status 1 if any.
//
// The second table: 64 arm-A loops alone, then the same with one more client
// (its own client object) that every 10 ms opens client.transaction("write"),
// runs one UPDATE (its own topic, N) and commits: two HTTP requests, and
// lithd's writer is held from the first one's BEGIN to the second's COMMIT.
// Reported: the batches' p99 without and with, and each interactive
// transaction's time (transaction() to commit() resolved).
//
// Results (bench/results.md, the C programs' format): one JSON line per run
// (arm × loops × synchronous × round), written as the run ends, to
// bench/results/hrana-YYYYMMDD-HHMMSS.jsonl (UTC) or --results PATH. The JIT
// warm-up runs write none. program "hrana", workload "transfer"; arm: A, W,
// B, C, N as above, A-tx (the second table's 64 arm-A loops alone) and A+tx
// (beside the interactive transactions; cell {"tx_every_ms": MS}); n: the
// loops (n_of "loops"); sync: FULL or NORMAL (null for N, which has no
// database and runs at the first --sync only, its row repeated in each
// table); every other cell is {}. Standard keys, from m: rate =
// transfers_per_s, p50_ms, p99_ms, p999_ms (a transfer's latency), cpu_us_op =
// cpu_us_per_transfer (the server's, lithd's or hrana_null's; arm C's is this
// process's, where its database runs). m (null where not measured):
// transfers (answered OK in the window), max_ms, tx_per_commit,
// lithd_wait_p99_ms, lithd_tx_max_ms, node_cpu, server_cpu, lithd_cpu_loop,
// lithd_cpu_writer, lithd_cpu_other, else_cpu (shares of one CPU),
// server_us_per_transfer, node_us_per_transfer, and for A+tx itx_done,
// itx_p50_ms, itx_p99_ms, itx_max_ms, itx_commit_p50_ms, itx_commit_p99_ms.
// The controls on them: bench/controls.csv's hrana-client-* lines.
//
// Usage: node bench/hrana.js [--lithd PATH] [--null PATH] [--conc 1,16,64] [--arms A,W,B,C,N]
//          [--seconds 3] [--warmup 1] [--rounds 1] [--sync normal]
//          [--db-dir DIR] [--modules DIR] [--tx-every 10] [--no-tx] [--jit-warmup 1]
//          [--results PATH] [--quick]
// --lithd: default $LITHD, else build/default/tools/lithd/lithd;
// --null: hrana_null for arm N, default build/default/bench/hrana_null (make
// build/default/bench/hrana_null); --arms: default A,W,B,C,N, or A,W,B,C without a
// hrana_null; --modules: build/hrana/node_modules's folder (default build/hrana, from
// make deps-hrana). lithd and hrana_null listen on a free port of 8950-8999. --quick: 1 s windows
// after 0.5 s, at 1 and 64 loops, 0.5 s of JIT warm-up. --results PATH: the results file (default
// bench/results/hrana-YYYYMMDD-HHMMSS.jsonl).
"use strict";

const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { spawn, execFileSync } = require("node:child_process");
const { createRequire } = require("node:module");
const { pathToFileURL } = require("node:url");
const { performance } = require("node:perf_hooks");

const ROOT = path.resolve(__dirname, "..");

// ---- options -------------------------------------------------------------------------------------

function usage(msg) {
  if (msg) process.stderr.write(`bench/hrana: ${msg}\n`);
  process.stderr.write(
    "usage: node bench/hrana.js [--lithd PATH] [--null PATH] [--conc 1,16,64] [--arms A,W,B,C,N]\n" +
      "         [--seconds S] [--warmup S] [--rounds R] [--sync normal|full[,...]] [--db-dir DIR]\n" +
      "         [--modules DIR] [--tx-every MS] [--no-tx] [--jit-warmup S] [--results PATH] [--quick]\n" +
      "  arms: A @libsql/client -> lithd /v2/pipeline; W @libsql/client -> lithd ws://;\n" +
      "        B lith.js -> lithd /v1/do; C @libsql/client file:;\n" +
      "        N @libsql/client -> hrana_null (a null Hrana server, no SQL: the client's ceiling)\n" +
      "  --null PATH: hrana_null for arm N (default build/default/bench/hrana_null; arms default to\n" +
      "        A,W,B,C,N when it exists or --null is given, else A,W,B,C)\n" +
      "  --results PATH: the results, a JSON line per run (bench/results.md; default\n" +
      "        bench/results/hrana-YYYYMMDD-HHMMSS.jsonl, UTC); the second table's runs are arms\n" +
      "        A-tx (those A loops alone) and A+tx (beside an interactive transaction every MS)\n");
  process.exit(2);
}

function parseArgs(argv) {
  const o = {
    lithd: process.env.LITHD || path.join(ROOT, "build/default/tools/lithd/lithd"),
    conc: [1, 16, 64],
    arms: null, // A,W,B,C,N, or A,W,B,C without a hrana_null (below)
    null: null, // hrana_null (arm N)
    nullNote: null, // why arm N is skipped
    seconds: 3,
    warmup: 1,
    rounds: 1,
    sync: ["normal"],
    dbDir: null,
    modules: process.env.HRANA_MODULES || path.join(ROOT, "build/hrana"),
    txEvery: 10,
    txTable: true,
    txConc: 64,
    jitWarmup: 1,
    results: null,
    quick: false,
  };
  const num = (v, what) => {
    const n = Number(v);
    if (!Number.isFinite(n) || n <= 0) usage(`${what}: not a positive number: ${v}`);
    return n;
  };
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i];
    const eq = a.indexOf("=");
    const key = eq > 0 ? a.slice(0, eq) : a;
    const val = () => (eq > 0 ? a.slice(eq + 1) : i + 1 < argv.length ? argv[++i] : usage(`${a} needs a value`));
    switch (key) {
      case "--lithd": o.lithd = path.resolve(val()); break;
      case "--null": o.null = path.resolve(val()); break;
      case "--conc": case "--conns": o.conc = val().split(",").filter(Boolean).map((v) => Math.round(num(v, key))); break;
      case "--arms": o.arms = val().toUpperCase().split(",").filter(Boolean); break;
      case "--seconds": o.seconds = num(val(), key); break;
      case "--warmup": o.warmup = Number(val()); if (!(o.warmup >= 0)) usage("--warmup: not a number"); break;
      case "--rounds": o.rounds = Math.round(num(val(), key)); break;
      case "--sync": o.sync = val().toLowerCase().split(",").filter(Boolean); break;
      case "--db-dir": o.dbDir = path.resolve(val()); break;
      case "--modules": o.modules = path.resolve(val()); break;
      case "--tx-every": o.txEvery = num(val(), key); break;
      case "--no-tx": o.txTable = false; break;
      case "--results": o.results = path.resolve(val()); break;
      case "--jit-warmup": o.jitWarmup = Number(val()); if (!(o.jitWarmup >= 0)) usage("--jit-warmup: not a number"); break;
      case "--quick": o.seconds = 1; o.warmup = 0.5; o.rounds = 1; o.conc = [1, 64]; o.jitWarmup = 0.5; o.quick = true; break;
      case "--help": case "-h": usage();
      default: usage(`unknown option ${a}`);
    }
  }
  if (o.arms === null) {
    const dflt = path.join(ROOT, "build/default/bench/hrana_null");
    if (o.null === null && fs.existsSync(dflt)) o.null = dflt;
    if (o.null !== null) o.arms = ["A", "W", "B", "C", "N"];
    else {
      o.arms = ["A", "W", "B", "C"];
      o.nullNote = `arm N skipped: no hrana_null at ${dflt} (make build/default/bench/hrana_null, or --null PATH)`;
    }
  } else if (o.null === null) o.null = path.join(ROOT, "build/default/bench/hrana_null");
  for (const a of o.arms) if (!"ABCNW".includes(a) || a.length !== 1) usage(`--arms: A, W, B, C or N, not ${a}`);
  for (const s of o.sync) if (s !== "normal" && s !== "full") usage(`--sync: normal or full, not ${s}`);
  if (o.conc.length === 0 || o.arms.length === 0) usage("nothing to run");
  o.txConc = o.conc.includes(64) ? 64 : Math.max(...o.conc);
  return o;
}

// ---- the transfer (bench/transfer.h) ----------------------------------------------------------------

const ACCOUNTS_PER = 10;
const MAX_AMOUNT = 50;
const START_BALANCE = 1000000000000n; // 10^12
const SQL_DEBIT = "UPDATE accounts SET balance = balance - ? WHERE id = ?";
const SQL_CREDIT = "UPDATE accounts SET balance = balance + ? WHERE id = ?";
const SQL_LEDGER = "INSERT INTO ledger(producer, seq, src, dst, amount) VALUES (?, ?, ?, ?, ?)";
const SQL_TOPIC = "UPDATE topics SET version = version + 1 WHERE id = ?";
const SCHEMA = [
  "CREATE TABLE accounts(id INTEGER PRIMARY KEY, balance INTEGER NOT NULL CHECK (balance >= 0))",
  "CREATE TABLE ledger(id INTEGER PRIMARY KEY, producer INTEGER NOT NULL, seq INTEGER NOT NULL," +
    " src INTEGER NOT NULL, dst INTEGER NOT NULL, amount INTEGER NOT NULL)",
  "CREATE TABLE topics(id INTEGER PRIMARY KEY, version INTEGER NOT NULL)",
];

// xorshift32: cheap, one state per loop
function rngFor(a, b) {
  let s = (Math.imul(a + 1, 0x9e3779b1) ^ Math.imul(b + 7, 0x85ebca6b)) >>> 0 || 1;
  return () => {
    s ^= s << 13; s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5; s >>>= 0;
    return s;
  };
}

function makeTransfer(owner, seq, rng) {
  const base = owner * ACCOUNTS_PER;
  const a = rng() % ACCOUNTS_PER;
  const b = (a + 1 + (rng() % (ACCOUNTS_PER - 1))) % ACCOUNTS_PER;
  return { owner, seq, src: base + a, dst: base + b, amount: 1 + (rng() % MAX_AMOUNT) };
}

// The four statements, as @libsql/client ({sql, args}) or lith.js ({sql, params}) takes them. Plain JS
// numbers, as an app passes them (@libsql/client sends a number as a Hrana float; SQLite's INTEGER
// affinity stores it as the integer).
function libsqlStmts(t) {
  return [
    { sql: SQL_DEBIT, args: [t.amount, t.src] },
    { sql: SQL_CREDIT, args: [t.amount, t.dst] },
    { sql: SQL_LEDGER, args: [t.owner, t.seq, t.src, t.dst, t.amount] },
    { sql: SQL_TOPIC, args: [t.owner] },
  ];
}
function lithStmts(t) {
  return [
    { sql: SQL_DEBIT, params: [t.amount, t.src] },
    { sql: SQL_CREDIT, params: [t.amount, t.dst] },
    { sql: SQL_LEDGER, params: [t.owner, t.seq, t.src, t.dst, t.amount] },
    { sql: SQL_TOPIC, params: [t.owner] },
  ];
}

// ---- the modules -----------------------------------------------------------------------------------

let libsql = null; // @libsql/client
let Lith = null; // clients/node/lith.js's Client

async function loadModules(o) {
  const req = createRequire(path.join(o.modules, "package.json"));
  libsql = req("@libsql/client");
  const pkg = path.join(o.modules, "node_modules/@libsql/client/package.json");
  const version = JSON.parse(fs.readFileSync(pkg, "utf8")).version;
  Lith = (await import(pathToFileURL(path.join(ROOT, "clients/node/lith.js")).href)).Client;
  return version;
}

// ---- the database: seeding and the check (bench_transfer_create, bench_transfer_check) -------------------

const PRAGMAS = (sync) => [`PRAGMA synchronous=${sync.toUpperCase()}`, "PRAGMA cache_size=-16384", "PRAGMA foreign_keys=ON"];

function removeDb(p) {
  for (const s of ["", "-wal", "-shm", "-journal", "-lithd.lock"]) fs.rmSync(p + s, { force: true });
}

// owners 0..n-1 get accounts and a topic; topic n is the interactive transactions'.
async function createDb(p, n) {
  removeDb(p);
  const c = libsql.createClient({ url: pathToFileURL(p).href });
  try {
    await c.execute("PRAGMA journal_mode=WAL");
    await c.executeMultiple(SCHEMA.join(";\n") + ";");
    const stmts = [];
    for (let o = 0; o < n; o++)
      for (let k = 0; k < ACCOUNTS_PER; k++)
        stmts.push({ sql: "INSERT INTO accounts(id, balance) VALUES (?, ?)", args: [o * ACCOUNTS_PER + k, START_BALANCE] });
    for (let o = 0; o <= n; o++) stmts.push({ sql: "INSERT INTO topics(id, version) VALUES (?, 0)", args: [o] });
    await c.batch(stmts, "write");
  } finally {
    c.close();
  }
}

async function checkDb(p, n, ok, txOk, say) {
  let bad = 0;
  const c = libsql.createClient({ url: pathToFileURL(p).href, intMode: "bigint" });
  try {
    const one = async (sql) => (await c.execute(sql)).rows[0][0];
    const qc = await one("PRAGMA quick_check");
    if (qc !== "ok") { say(`check: quick_check: ${qc}`); bad++; }
    const total = ok.reduce((s, v) => s + v, 0);
    const money = BigInt(n * ACCOUNTS_PER) * START_BALANCE;
    const sum = await one("SELECT sum(balance) FROM accounts");
    if (sum !== money) { say(`check: money ${sum}, expected ${money}`); bad++; }
    const rows = await one("SELECT count(*) FROM ledger");
    if (rows !== BigInt(total)) { say(`check: ${rows} ledger rows, ${total} transfers answered OK`); bad++; }
    const vers = await one(`SELECT coalesce(sum(version), 0) FROM topics WHERE id < ${n}`);
    if (vers !== BigInt(total)) { say(`check: topic versions sum to ${vers}, ${total} transfers answered OK`); bad++; }
    const txv = await one(`SELECT version FROM topics WHERE id = ${n}`);
    if (txv !== BigInt(txOk)) { say(`check: the interactive transactions' topic is ${txv}, ${txOk} committed`); bad++; }
    const per = new Map();
    for (const r of (await c.execute("SELECT producer, count(*) FROM ledger GROUP BY producer")).rows)
      per.set(Number(r[0]), Number(r[1]));
    const tv = new Map();
    for (const r of (await c.execute(`SELECT id, version FROM topics WHERE id < ${n}`)).rows) tv.set(Number(r[0]), Number(r[1]));
    for (let o = 0; o < n; o++) {
      const lr = per.get(o) ?? 0, v = tv.get(o) ?? 0;
      if (lr !== ok[o] || v !== ok[o]) {
        if (bad < 8) say(`check: loop ${o}: ${ok[o]} answered OK, ${lr} ledger rows, topic version ${v}`);
        bad++;
      }
    }
    for (const o of per.keys()) if (o < 0 || o >= n) { say(`check: ledger rows of unknown loop ${o}`); bad++; }
  } finally {
    c.close();
  }
  return bad;
}

// ---- the servers: lithd, hrana_null ------------------------------------------------------------------

const PORT_LO = 8950, PORT_HI = 8999;
let nextPort = PORT_LO;
const live = new Set(); // server processes running, killed on the way out

// Spawns a server on the next port of PORT_LO-PORT_HI (the next one again when it says the port is in
// use) and waits for the line that says it listens: { child, url, port }. argsFor(port): its arguments;
// listening: a regexp whose group 1 is the port, matched once a whole line has arrived.
function startServer(name, bin, argsFor, listening, log) {
  const tryPort = (tries) =>
    new Promise((resolve, reject) => {
      const port = nextPort;
      nextPort = nextPort >= PORT_HI ? PORT_LO : nextPort + 1;
      const err = fs.openSync(log, "w");
      const child = spawn(bin, argsFor(port), { stdio: ["ignore", "pipe", err] });
      fs.closeSync(err);
      live.add(child);
      let out = "", done = false;
      const timer = setTimeout(() => finish(new Error(`${name} printed no listening line within 10 s (got "${out.slice(0, 200)}")`)), 10000);
      function finish(e, url) {
        if (done) return;
        done = true;
        clearTimeout(timer);
        if (e) {
          child.kill("SIGKILL");
          reject(e);
        } else resolve({ child, url, port });
      }
      child.stdout.on("data", (b) => {
        out += b;
        const m = listening.exec(out);
        if (m && out.includes("\n")) {
          child.stdout.resume(); // it prints nothing more we read
          finish(null, `http://127.0.0.1:${m[1]}`);
        }
      });
      child.on("error", (e) => finish(e));
      child.on("exit", (code, sig) => {
        live.delete(child);
        child.exitStatus = { code, sig };
        if (!done) {
          const tail = tailOf(log);
          // a port in use: the next one
          if (/in use|EADDRINUSE|bind/i.test(tail) && tries > 0) {
            done = true;
            clearTimeout(timer);
            resolve(null);
          } else finish(new Error(`${name} exited (${code ?? sig}) before listening: ${tail}`));
        }
      });
    });
  return (async () => {
    for (let tries = PORT_HI - PORT_LO; tries >= 0; tries--) {
      const r = await tryPort(tries);
      if (r) return r;
    }
    throw new Error(`no free port in ${PORT_LO}-${PORT_HI}`);
  })();
}

function startLithd(o, db, sync, log) {
  return startServer("lithd", o.lithd, (port) => ["--db", db, "--listen", `127.0.0.1:${port}`, "--synchronous", sync],
    /http:\/\/127\.0\.0\.1:(\d+)/, log);
}

// hrana_null (bench/hrana_null.c) prints exactly "listening 127.0.0.1:PORT".
function startNull(o, log) {
  return startServer("hrana_null", o.null, (port) => ["--listen", `127.0.0.1:${port}`], /^listening 127\.0\.0\.1:(\d+)$/m, log);
}

// SIGTERM, then the exit status ({ code, sig }); SIGKILL after 20 s.
function stopServer(l) {
  return new Promise((resolve) => {
    const done = () => resolve(l.child.exitStatus);
    if (l.child.exitStatus) return done();
    l.child.once("exit", () => setImmediate(done));
    l.child.kill("SIGTERM");
    setTimeout(() => l.child.exitStatus || l.child.kill("SIGKILL"), 20000).unref();
  });
}

function tailOf(log) {
  try {
    const t = fs.readFileSync(log, "utf8");
    return t.slice(-600).trim();
  } catch {
    return "(no log)";
  }
}

async function lithdStats(url) {
  try {
    const r = await fetch(url + "/v1/stats");
    return await r.json();
  } catch {
    return null;
  }
}

// ---- CPU time from /proc ----------------------------------------------------------------------------

let CLK_TCK = 100;
try {
  CLK_TCK = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
} catch {}

function statTicks(file) {
  try {
    const s = fs.readFileSync(file, "utf8");
    const close = s.lastIndexOf(")");
    const comm = s.slice(s.indexOf("(") + 1, close);
    const f = s.slice(close + 2).split(" "); // f[0] is field 3 (state)
    return { comm, ticks: Number(f[11]) + Number(f[12]) }; // utime, stime
  } catch {
    return null;
  }
}

// A server's CPU seconds per thread kind: lithd's first thread runs the loop (h2o, JSON, Hrana), and
// hrana_null's only thread is all loop.
function serverCpu(pid) {
  const out = { loop: 0, writer: 0, other: 0 };
  let tids = [];
  try {
    tids = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return null;
  }
  for (const tid of tids) {
    const st = statTicks(`/proc/${pid}/task/${tid}/stat`);
    if (!st) continue;
    const s = st.ticks / CLK_TCK;
    if (String(pid) === tid) out.loop += s;
    else if (st.comm === "lith-writer") out.writer += s;
    else out.other += s;
  }
  return out;
}

function machineBusy() {
  try {
    const f = fs.readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal: busy without idle, iowait and steal
    return (f[0] + f[1] + f[2] + (f[5] || 0) + (f[6] || 0)) / CLK_TCK;
  } catch {
    return NaN;
  }
}

function snapshot(pid) {
  const u = process.cpuUsage();
  return { t: performance.now(), self: (u.user + u.system) / 1e6, server: pid ? serverCpu(pid) : null, busy: machineBusy() };
}

// ---- percentiles ------------------------------------------------------------------------------------

function pct(sorted, q) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}
function summary(lat) {
  const s = Float64Array.from(lat).sort();
  return { n: s.length, p50: pct(s, 0.5), p99: pct(s, 0.99), p999: pct(s, 0.999), max: s.length ? s[s.length - 1] : NaN };
}

// ---- one point ------------------------------------------------------------------------------------------

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const ARM_NAME = { A: "A @libsql/client → lithd /v2/pipeline", W: "W @libsql/client → lithd ws:// (Hrana 3 over WebSocket)", B: "B lith.js → lithd /v1/do", C: "C @libsql/client file: (in process)",
  N: "N @libsql/client → hrana_null /v2/pipeline (a null server, no SQL: the client's ceiling; no database, nothing checked)" };
const ARM_SHORT = { A: "A hrana", W: "W hrana ws://", B: "B lith /v1/do", C: "C file:", N: "N null server" };

// Runs arm on N loops (and the interactive-transaction client when withTx); the result.
async function runPoint(o, tmp, arm, N, sync, round, withTx = false) {
  const tag = `${arm} N=${N} ${sync}${withTx ? " +tx" : ""} round ${round + 1}`;
  const res = { arm, N, sync, round, withTx, errors: 0, msgs: 0, ok: 0, tps: NaN, lat: null, cpu: {}, cmdsPerTx: NaN, tx: null,
    waitP99: NaN, txMax: NaN };
  const say = (m) => {
    if (res.msgs++ < 5) process.stderr.write(`  error [${tag}]: ${m}\n`);
  };
  const db = path.join(tmp, `hrana-${arm}-${N}-${round}${withTx ? "-tx" : ""}.db`);
  const log = db + ".log";
  const t00 = performance.now();
  const isLithd = arm === "A" || arm === "B" || arm === "W";
  const server = arm === "N" ? "hrana_null" : "lithd";
  if (arm !== "N") await createDb(db, N); // N stores nothing
  let l = null, client = null, txClient = null, call;
  // Arms A, W and N: the same client, the same options, the same call; only the URL differs.
  const hranaClient = (url) => {
    client = libsql.createClient({ url, concurrency: Math.max(N, 1) });
    call = (t) => client.batch(libsqlStmts(t), "write");
  };
  try {
    if (arm === "N") {
      l = await startNull(o, log);
      hranaClient(l.url);
    } else if (isLithd) {
      l = await startLithd(o, db, sync, log);
      if (arm === "A") {
        hranaClient(l.url);
      } else if (arm === "W") {
        hranaClient(l.url.replace(/^http:/, "ws:"));
      } else {
        client = new Lith(l.url);
        call = (t) => client.do(lithStmts(t));
      }
      if (withTx) txClient = libsql.createClient({ url: l.url });
    } else {
      client = libsql.createClient({ url: pathToFileURL(db).href, concurrency: Math.max(N, 1) });
      for (const p of PRAGMAS(sync)) await client.execute(p);
      const got = (await client.execute("PRAGMA synchronous")).rows[0][0];
      if (Number(got) !== (sync === "full" ? 2 : 1)) say(`PRAGMA synchronous reads ${got}`), res.errors++;
      call = (t) => client.batch(libsqlStmts(t), "write");
    }

    const ok = new Array(N).fill(0);
    const lat = [];
    const t0 = performance.now();
    const ws = t0 + o.warmup * 1000, we = ws + o.seconds * 1000;
    const pid = l ? l.child.pid : 0;
    let snapA = null, snapB = null, statsA = null, statsB = null;
    // The window's edges are noticed by the loops themselves: arm C's loops never leave the microtask
    // queue (its calls resolve at once), so a timer would not fire before they end.
    const edge = (now) => {
      if (snapA === null && now >= ws) {
        snapA = snapshot(pid);
        if (isLithd) statsA = lithdStats(l.url);
      } else if (snapB === null && snapA !== null && now >= we) {
        snapB = snapshot(pid);
        if (isLithd) statsB = lithdStats(l.url);
      }
    };
    const loop = async (id) => {
      const rng = rngFor(id, round * 1000 + 17 + (withTx ? 500 : 0));
      let seq = 0;
      for (;;) {
        const t = makeTransfer(id, ++seq, rng);
        const a = performance.now();
        edge(a);
        if (a >= we) break;
        try {
          await call(t);
        } catch (e) {
          res.errors++;
          say(`transfer: ${e.code ?? ""} ${e.message}`);
          if (res.errors > 1000) break;
          continue;
        }
        const b = performance.now();
        ok[id]++;
        if (b >= ws && b < we) lat.push(b - a);
      }
    };

    // The interactive transactions: one every txEvery ms (the next starts at once when one ran over).
    let txOk = 0;
    const txLat = [], txHold = [];
    const txLoop = async () => {
      let next = performance.now();
      for (;;) {
        const now = performance.now();
        if (now >= we) break;
        if (next > now) await sleep(next - now);
        next = Math.max(next + o.txEvery, performance.now());
        const a = performance.now();
        if (a >= we) break;
        let tx = null;
        try {
          tx = await txClient.transaction("write");
          await tx.execute({ sql: SQL_TOPIC, args: [N] });
          const h = performance.now();
          await tx.commit();
          const b = performance.now();
          txOk++;
          if (b >= ws && b < we) {
            txLat.push(b - a);
            txHold.push(b - h);
          }
        } catch (e) {
          res.errors++;
          say(`interactive transaction: ${e.code ?? ""} ${e.message}`);
          try { if (tx) tx.close(); } catch {}
          await sleep(o.txEvery);
        }
      }
    };

    const loops = [];
    for (let i = 0; i < N; i++) loops.push(loop(i));
    if (withTx) loops.push(txLoop());
    await Promise.all(loops);
    if (snapB === null) snapB = snapshot(pid);
    const [sa, sb] = await Promise.all([statsA, statsB]);

    const win = (snapB.t - snapA.t) / 1000;
    res.ok = lat.length;
    res.tps = lat.length / o.seconds;
    res.lat = summary(lat);
    res.cpu.node = (snapB.self - snapA.self) / win;
    if (snapA.server && snapB.server) {
      const d = (k) => (snapB.server[k] - snapA.server[k]) / win;
      res.cpu.server = d("loop") + d("writer") + d("other");
      if (isLithd) {
        res.cpu.loop = d("loop");
        res.cpu.writer = d("writer");
        res.cpu.lithdOther = d("other");
        res.cpu.lithd = res.cpu.server;
      }
    }
    res.cpu.else = (snapB.busy - snapA.busy) / win - res.cpu.node - (res.cpu.server || 0);
    if (sa && sb && sb.batches > sa.batches) res.cmdsPerTx = (sb.commands - sa.commands) / (sb.batches - sa.batches);
    if (withTx) res.tx = { ok: txOk, lat: summary(txLat), hold: summary(txHold) };
    if (isLithd) {
      // lith's own histograms, over lithd's life (warm-up included): the queue wait of a command
      // before its transaction begins, and the longest transaction.
      const fin = await lithdStats(l.url);
      if (fin) {
        res.waitP99 = fin.wait_p99_ns / 1e6;
        res.txMax = fin.tx_max_ns / 1e6;
      }
    }

    client.close();
    client = null;
    if (txClient) txClient.close(), (txClient = null);
    if (l) {
      const st = await stopServer(l);
      if (st.code !== 0) {
        res.errors++;
        say(`${server} exited ${st.code ?? st.sig} after SIGTERM: ${tailOf(log)}`);
      }
      l = null;
    }
    if (arm !== "N") res.errors += await checkDb(db, N, ok, txOk, say);
  } catch (e) {
    res.errors++;
    say(e.stack || String(e));
  } finally {
    try { if (client) client.close(); } catch {}
    try { if (txClient) txClient.close(); } catch {}
    if (l) await stopServer(l);
    removeDb(db);
    fs.rmSync(log, { force: true });
  }
  res.wall = (performance.now() - t00) / 1000;
  return res;
}

// ---- tables -----------------------------------------------------------------------------------------

function median(v) {
  const s = v.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}
const fmtMs = (ms) => (!Number.isFinite(ms) ? "–" : ms < 10 ? ms.toFixed(3) : ms < 100 ? ms.toFixed(2) : ms.toFixed(0));
const fmtInt = (v) => (Number.isFinite(v) ? String(Math.round(v)) : "–");
const fmtPct = (v) => (Number.isFinite(v) ? `${Math.round(v * 100)}%` : "–");
const fmtX = (v) => (Number.isFinite(v) ? `${v.toFixed(2)}×` : "–");
const fmt1 = (v) => (Number.isFinite(v) ? v.toFixed(1) : "–");

// the median over rounds of f(result), and "(min–max)" when there are several rounds
function agg(rs, f) {
  const v = rs.map(f).filter((x) => Number.isFinite(x));
  return { med: median(v), lo: v.length ? Math.min(...v) : NaN, hi: v.length ? Math.max(...v) : NaN, n: v.length };
}
function rate(rs) {
  const a = agg(rs, (r) => r.tps);
  return rs.length > 1 ? `${fmtInt(a.med)} (${fmtInt(a.lo)}–${fmtInt(a.hi)})` : fmtInt(a.med);
}

function target(what, have, pass, detail) {
  console.log(have ? `- ${pass ? "PASS" : "MISS"} ${what} — ${detail}` : `- n/a  ${what} — not run`);
}
function info(what, have, detail) {
  console.log(have ? `- info ${what} — ${detail}` : `- n/a  ${what} — not run`);
}

function printMain(o, results, sync) {
  console.log(`\n### transfers, synchronous=${sync.toUpperCase()}\n`);
  console.log("| N | arm | transfers/s | tx/commit | p50 ms | p99 ms | max ms | lithd wait p99 | err | node CPU | server CPU (lithd: loop + writer + other) | else CPU | A/B | A/C | A/N | N/C | W/A |");
  console.log("|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|");
  const ratios = {};
  for (const N of o.conc) {
    const by = {};
    for (const arm of o.arms)
      by[arm] = results.filter((r) => (r.sync === sync || arm === "N") && r.N === N && r.arm === arm && !r.withTx);
    const m = (arm) => (by[arm] && by[arm].length ? agg(by[arm], (r) => r.tps).med : NaN);
    ratios[N] = { AB: m("A") / m("B"), AC: m("A") / m("C"), AN: m("A") / m("N"), NC: m("N") / m("C"), WA: m("W") / m("A") };
    for (const arm of o.arms) {
      const rs = by[arm];
      if (!rs.length) continue;
      const g = (f) => agg(rs, f).med;
      const serverCpu = arm === "C" ? "–" : arm === "N" ? `${fmtPct(g((r) => r.cpu.server))} (hrana_null)` :
        `${fmtPct(g((r) => r.cpu.lithd))} (${fmtPct(g((r) => r.cpu.loop))} + ${fmtPct(g((r) => r.cpu.writer))} + ${fmtPct(g((r) => r.cpu.lithdOther))})`;
      const errs = rs.reduce((s, r) => s + r.errors, 0);
      console.log(`| ${N} | ${ARM_SHORT[arm]} | ${rate(rs)} | ${arm === "C" ? "1.0" : fmt1(g((r) => r.cmdsPerTx))} | ` +
        `${fmtMs(g((r) => r.lat.p50))} | ${fmtMs(g((r) => r.lat.p99))} | ${fmtMs(g((r) => r.lat.max))} | ` +
        `${fmtMs(g((r) => r.waitP99))} | ${errs} | ${fmtPct(g((r) => r.cpu.node))} | ${serverCpu} | ${fmtPct(g((r) => r.cpu.else))} | ` +
        `${arm === "A" ? fmtX(ratios[N].AB) : ""} | ${arm === "A" ? fmtX(ratios[N].AC) : ""} | ` +
        `${arm === "A" ? fmtX(ratios[N].AN) : ""} | ${arm === "N" ? fmtX(ratios[N].NC) : ""} | ` +
        `${arm === "W" ? fmtX(ratios[N].WA) : ""} |`);
    }
  }
  console.log("\nColumns: medians over rounds (transfers/s also min–max when several). transfers/s: answered OK in");
  console.log("the window ÷ its length. tx/commit: lithd's commands per transaction over the window (/v1/stats; C");
  console.log("commits each one). Latency (ms): the call to its promise's resolution. lithd wait p99: lith's queue");
  console.log("wait before a command's transaction begins, p99 over lithd's life (/v1/stats, warm-up included; a");
  console.log("bucket's upper bound). CPU: share of one CPU over the window (node: this process, all its threads;");
  console.log("server: lithd's loop thread, lith-writer, the rest, or hrana_null's one thread; else: the machine's");
  console.log("other busy time, steal left out). A/B, A/C, A/N: arm A's transfers/s over arm B's, C's, N's (A/N:");
  console.log("lithd's share of what this client can do against any server). N/C: arm N's over arm C's (the most any");
  console.log("server could give this client, as a multiple of its local file). N: hrana_null runs no SQL and");
  console.log("stores nothing, so it has no database, no tx/commit and no check (its answers are canned). W/A: arm");
  console.log("W's transfers/s over arm A's (the same client and lithd, ws:// against http://).\n");
  return ratios;
}

function printTx(o, results, sync) {
  const rs0 = results.filter((r) => r.sync === sync && r.withTx === "base");
  const rs1 = results.filter((r) => r.sync === sync && r.withTx === true);
  if (!rs0.length && !rs1.length) return null;
  const N = o.txConc;
  console.log(`\n### ${N} batch loops (arm A) without and with an interactive transaction every ${o.txEvery} ms, synchronous=${sync.toUpperCase()}\n`);
  console.log("| interactive client | transfers/s | batch p50 ms | batch p99 ms | batch max ms | tx done | tx ms p50 | tx ms p99 | tx ms max | commit ms p50 | commit ms p99 | lithd wait p99 | lithd tx max | err |");
  console.log("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
  const line = (name, rs, tx) => {
    const g = (f) => agg(rs, f).med;
    const errs = rs.reduce((s, r) => s + r.errors, 0);
    console.log(`| ${name} | ${rate(rs)} | ${fmtMs(g((r) => r.lat.p50))} | ${fmtMs(g((r) => r.lat.p99))} | ${fmtMs(g((r) => r.lat.max))} | ` +
      (tx ? `${fmtInt(g((r) => r.tx.lat.n))} | ${fmtMs(g((r) => r.tx.lat.p50))} | ${fmtMs(g((r) => r.tx.lat.p99))} | ${fmtMs(g((r) => r.tx.lat.max))} | ` +
        `${fmtMs(g((r) => r.tx.hold.p50))} | ${fmtMs(g((r) => r.tx.hold.p99))} |`
        : "– | – | – | – | – | – |") + ` ${fmtMs(g((r) => r.waitP99))} | ${fmtMs(g((r) => r.txMax))} | ${errs} |`);
  };
  if (rs0.length) line("none", rs0, false);
  if (rs1.length) line(`transaction("write") every ${o.txEvery} ms`, rs1, true);
  console.log("\ntx ms: transaction() to commit() resolved, for those that ended in the window (the tx done column);");
  console.log("commit ms: the second request alone (COMMIT, close). lithd's writer is held from the first request's");
  console.log("BEGIN (BEGIN IMMEDIATE and the UPDATE, one pipeline) until the COMMIT arrives. lithd wait p99, tx max:");
  console.log("lith's queue wait (p99) and longest transaction over lithd's life (/v1/stats, warm-up included).\n");
  return {
    p99Without: rs0.length ? agg(rs0, (r) => r.lat.p99).med : NaN,
    p99With: rs1.length ? agg(rs1, (r) => r.lat.p99).med : NaN,
  };
}

// ---- the results (bench/results.md) ----------------------------------------------------------------

// The run's identity, as bench/harness.c reads it: the commit of this tree (git describe, or
// LITH_BENCH_COMMIT; "unknown" outside a checkout), /proc/cpuinfo's first model name, the CPUs.
function runIdentity(started) {
  let commit = process.env.LITH_BENCH_COMMIT || "";
  if (!commit) {
    try {
      commit = execFileSync("git", ["-C", ROOT, "describe", "--always", "--dirty", "--abbrev=10"],
        { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
    } catch {}
  }
  let cpu = "unknown";
  try {
    const m = /^model name\s*:\s*(.*)$/m.exec(fs.readFileSync("/proc/cpuinfo", "utf8"));
    if (m) cpu = m[1].trim();
  } catch {}
  return { commit: commit || "unknown", cpu, nproc: os.cpus().length, date: started.toISOString().slice(0, 19) + "Z" };
}

// The results file, opened at the start (bench/results/hrana-STAMP.jsonl, or --results): { fd, path,
// id }, fd -1 when it cannot be written (said, and the run goes on, as the C programs do).
function openResults(o, started) {
  const stamp = started.toISOString().slice(0, 19).replace(/[-:]/g, "").replace("T", "-");
  const file = o.results ?? path.join(ROOT, "bench/results", `hrana-${stamp}.jsonl`);
  const out = { fd: -1, path: file, id: runIdentity(started) };
  try {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    out.fd = fs.openSync(file, "w");
  } catch (e) {
    console.error(`bench/hrana: cannot write ${file}: ${e.message}`);
  }
  return out;
}

// m's metrics, in the order they are written; ROLE: the standard key that repeats one.
const ROLE = { rate: "transfers_per_s", p50_ms: "p50_ms", p99_ms: "p99_ms", p999_ms: "p999_ms", cpu_us_op: "cpu_us_per_transfer" };
function metricsOf(r) {
  const lat = r.lat ?? {}, cpu = r.cpu, tx = r.tx;
  const per = (share) => (r.tps > 0 ? (share * 1e6) / r.tps : NaN); // a CPU share over the window, as µs per transfer
  const m = {
    transfers_per_s: r.tps, p50_ms: lat.p50, p99_ms: lat.p99, p999_ms: lat.p999, max_ms: lat.max, transfers: r.ok,
    tx_per_commit: r.cmdsPerTx, lithd_wait_p99_ms: r.waitP99, lithd_tx_max_ms: r.txMax,
    node_cpu: cpu.node, server_cpu: cpu.server, lithd_cpu_loop: cpu.loop, lithd_cpu_writer: cpu.writer,
    lithd_cpu_other: cpu.lithdOther, else_cpu: cpu.else,
    server_us_per_transfer: per(cpu.server), node_us_per_transfer: per(cpu.node),
    cpu_us_per_transfer: per(r.arm === "C" ? cpu.node : cpu.server), // C: its database runs in this process
    itx_done: tx?.lat.n, itx_p50_ms: tx?.lat.p50, itx_p99_ms: tx?.lat.p99, itx_max_ms: tx?.lat.max,
    itx_commit_p50_ms: tx?.hold.p50, itx_commit_p99_ms: tx?.hold.p99,
  };
  // a finite number, six significant digits unless an integer (as the C writer's %.6g), or null
  for (const k in m) m[k] = Number.isFinite(m[k]) ? (Number.isInteger(m[k]) ? m[k] : Number(m[k].toPrecision(6))) : null;
  return m;
}

// The results arm of a run: the second table's two are A-tx and A+tx.
const resultArm = (r) => (r.withTx === true ? "A+tx" : r.withTx === "base" ? "A-tx" : r.arm);

// THE writer: one run's line, the keys in bench/harness.c's order, written (unbuffered) as the run
// ends; and its progress line on stderr.
function writeLine(out, o, r) {
  const m = metricsOf(r);
  const line = {
    v: 1, program: "hrana", workload: "transfer", arm: resultArm(r), n: r.N, n_of: "loops",
    sync: r.arm === "N" ? null : r.sync.toUpperCase(),
    cell: r.withTx === true ? { tx_every_ms: o.txEvery } : {},
    round: r.round + 1, rounds: o.rounds,
  };
  for (const [key, name] of Object.entries(ROLE)) line[key] = m[name];
  Object.assign(line, {
    errors: r.errors, sampled: false, wall_s: Number(r.wall.toPrecision(6)), m,
    seconds: o.seconds, warmup: o.warmup, quick: o.quick,
    commit: out.id.commit, cpu: out.id.cpu, nproc: out.id.nproc, date: out.id.date,
  });
  if (out.fd >= 0) {
    try {
      fs.writeSync(out.fd, JSON.stringify(line) + "\n");
    } catch (e) {
      console.error(`bench/hrana: writing ${out.path}: ${e.message}`);
      fs.closeSync(out.fd);
      out.fd = -1;
    }
  }
  const f = (k, d) => (line[k] === null ? "" : `  ${k} ${line[k].toFixed(d)}`);
  process.stderr.write(`[hrana] ${line.arm} loops=${r.N}${line.sync ? ` sync=${line.sync}` : ""} round ${line.round}:` +
    `${f("rate", 0)}${f("p50_ms", 3)}${f("p99_ms", 3)}${f("p999_ms", 3)}${f("cpu_us_op", 3)}  errors ${r.errors}  (${r.wall.toFixed(1)} s)\n`);
}

// ---- main ------------------------------------------------------------------------------------------

async function main() {
  const o = parseArgs(process.argv);
  const started = new Date();
  const t00 = performance.now();
  if (!fs.existsSync(path.join(o.modules, "node_modules/@libsql/client"))) {
    console.log(`bench/hrana: skipped: no ${path.join(o.modules, "node_modules/@libsql/client")} (make deps-hrana)`);
    return 0;
  }
  const needLithd = o.arms.includes("A") || o.arms.includes("B") || o.txTable;
  if (needLithd && !fs.existsSync(o.lithd)) {
    console.error(`bench/hrana: no lithd at ${o.lithd} (--lithd PATH, or LITHD=PATH)`);
    return 1;
  }
  if (o.arms.includes("N") && !fs.existsSync(o.null)) {
    console.error(`bench/hrana: no hrana_null at ${o.null} (make build/default/bench/hrana_null, or --null PATH; --arms A,B,C without it)`);
    return 1;
  }
  const version = await loadModules(o);
  const out = openResults(o, started);
  const tmp = fs.mkdtempSync(path.join(o.dbDir ?? os.tmpdir(), "bench-hrana-"));
  const cleanup = () => {
    for (const c of live) c.kill("SIGKILL");
    fs.rmSync(tmp, { recursive: true, force: true });
  };
  for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => { cleanup(); process.exit(130); });

  console.log("# bench/hrana — @libsql/client through lithd's Hrana endpoint, lithd's own client, a local file" +
    (o.arms.includes("N") ? " and a null Hrana server (the client's ceiling)" : "") + "\n");
  console.log(`started ${started.toISOString()}; node ${process.version}; @libsql/client ${version}; ` +
    `${os.cpus().length} CPUs (${os.cpus()[0]?.model?.trim() ?? "?"}); kernel ${os.release()}`);
  console.log(`lithd ${o.lithd}; databases in ${tmp}`);
  if (o.arms.includes("N")) console.log(`hrana_null ${o.null} (arm N: no SQL, no database)`);
  if (o.nullNote) console.log(o.nullNote);
  console.log(`workload: bench/transfer.h's transfer (debit, credit, ledger row, topic bump), one transaction each;`);
  console.log(`N async loops in this process sharing one client; ${o.warmup} s warm-up, ${o.seconds} s window, ` +
    `${o.rounds} round(s), each point on a fresh database`);
  for (const arm of o.arms) console.log(`  ${ARM_NAME[arm]}`);

  const results = [];
  let totalErrors = 0;
  const record = (r) => {
    results.push(r);
    totalErrors += r.errors;
    writeLine(out, o, r);
  };
  try {
    // Node compiles the clients' code as it runs it (the first seconds of a process are several times
    // slower per call): every arm runs once, unrecorded but checked, before the first point.
    if (o.jitWarmup > 0) {
      const w = { ...o, warmup: 0, seconds: o.jitWarmup };
      for (const arm of o.arms) totalErrors += (await runPoint(w, tmp, arm, Math.min(16, Math.max(...o.conc)), o.sync[0], 0)).errors;
      console.log(`(the clients ran ${o.jitWarmup} s each first, unrecorded, for Node's JIT)`);
    }
    for (const sync of o.sync) {
      for (let round = 0; round < o.rounds; round++) {
        for (const N of o.conc) {
          // odd rounds reverse the arms, so the machine's drift hits them alike
          const arms = round % 2 ? [...o.arms].reverse() : o.arms;
          // N has no database: it runs at the first synchronous mode only (each table shows it)
          for (const arm of arms) if (arm !== "N" || sync === o.sync[0]) record(await runPoint(o, tmp, arm, N, sync, round));
        }
        if (o.txTable) {
          const base = await runPoint(o, tmp, "A", o.txConc, sync, round, false);
          base.withTx = "base";
          record(base);
          record(await runPoint(o, tmp, "A", o.txConc, sync, round, true));
        }
      }
    }
    const tx = {}, ratios = {};
    for (const sync of o.sync) {
      ratios[sync] = printMain(o, results, sync);
      tx[sync] = printTx(o, results, sync);
    }
    console.log("### goals\n");
    for (const sync of o.sync) {
      const S = sync.toUpperCase();
      for (const N of o.conc) {
        const r = ratios[sync][N];
        if (o.arms.includes("A") && o.arms.includes("B"))
          target(`${N} loops ${S}: A (@libsql/client → lithd) ≥ 0.8 × B (lith.js → lithd)`, Number.isFinite(r.AB), r.AB >= 0.8, fmtX(r.AB));
      }
      // Informational: the WebSocket transport beside http://, the same client and lithd.
      for (const N of o.conc)
        info(`${N} loops ${S}: W ÷ A (@libsql/client → lithd ws:// ÷ http://)`, o.arms.includes("W") && o.arms.includes("A"),
          fmtX(ratios[sync][N].WA));
      const r64 = ratios[sync][64];
      target(`64 loops ${S}: A (@libsql/client → lithd) ≥ 6 × C (@libsql/client file:)`,
        r64 && Number.isFinite(r64.AC), r64 && r64.AC >= 6, r64 ? fmtX(r64.AC) : "–");
      // Informational, not goals: what the client allows at all, and lithd's share of it.
      const top = o.conc.includes(64) ? 64 : Math.max(...o.conc);
      const rt = ratios[sync][top];
      info(`${top} loops ${S}: N ÷ C (@libsql/client → null server ÷ @libsql/client file:)`,
        o.arms.includes("N") && o.arms.includes("C"),
        `${fmtX(rt.NC)}: the ceiling of this client on this machine: any server at most ${fmtX(rt.NC)} the file`);
      info(`${top} loops ${S}: A ÷ N (@libsql/client → lithd ÷ @libsql/client → null server)`, o.arms.includes("A") && o.arms.includes("N"),
        `${fmtX(rt.AN)}: lithd's share of the client's ceiling`);
      const t = tx[sync];
      if (o.txTable && t)
        target(`${o.txConc} batch loops ${S}: batch p99 ≤ 10 ms with an interactive transaction every ${o.txEvery} ms`,
          Number.isFinite(t.p99With), t.p99With <= 10, `${fmtMs(t.p99With)} ms (without: ${fmtMs(t.p99Without)} ms)`);
    }
    target("errors, all arms: 0", true, totalErrors === 0, String(totalErrors));
  } finally {
    cleanup();
    if (out.fd >= 0) fs.closeSync(out.fd), console.log(`\nresults: ${out.path}`);
  }
  console.log(`\n${((performance.now() - t00) / 1000).toFixed(1)} s`);
  return totalErrors === 0 ? 0 : 1;
}

main().then(
  (rc) => process.exit(rc),
  (e) => {
    console.error(e);
    process.exit(1);
  });
