// The Node client against a real lithd (node --test). LITHD names the lithd
// binary (make test passes the one it just built); without it the tests are
// skipped. Each lithd runs in a temporary directory on a free port and a
// Unix socket, and is stopped with SIGTERM at the end.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";

import * as lith from "../lith.js";

const LITHD = process.env.LITHD;
const TOKEN = "s3cret-token-for-tests";
// One INSERT that runs about a second here (longer under sanitizers).
const SLOW =
  "INSERT INTO kv(k, v) SELECT 'slow-' || hex(randomblob(8)), count(*) FROM (WITH RECURSIVE c(i) AS " +
  "(SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 4000000) SELECT i FROM c)";
const COMMANDS = `-- name: put
-- Store v under k.
INSERT INTO kv(k, v) VALUES (:k, :v) RETURNING k, v;
`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function freePort() {
  const srv = net.createServer();
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  const { port } = srv.address();
  await new Promise((r) => srv.close(r));
  return port;
}

async function startLithd(args = [], token = null) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lith-node-"));
  const port = await freePort();
  const sock = path.join(dir, "lithd.sock");
  fs.mkdirSync(path.join(dir, "backups"));
  fs.writeFileSync(path.join(dir, "commands.sql"), COMMANDS);
  fs.writeFileSync(path.join(dir, "schema.sql"), "CREATE TABLE kv(k TEXT PRIMARY KEY, v);\n");
  const argv = ["--db", "t.db", "--listen", `127.0.0.1:${port}`, "--unix", sock, "--schema", "schema.sql",
    "--commands", "commands.sql", "--backup-dir", path.join(dir, "backups"), ...args];
  if (token) {
    fs.writeFileSync(path.join(dir, "token"), token + "\n", { mode: 0o600 });
    argv.push("--token-file", "token");
  }
  const log = fs.openSync(path.join(dir, "lithd.log"), "w");
  const proc = spawn(LITHD, argv, { cwd: dir, stdio: ["ignore", log, log] });
  const url = `http://127.0.0.1:${port}`;
  const probe = new lith.Client(url, { token, maxRetries: 0, timeout: 2000 });
  for (const deadline = Date.now() + 30000; ;) {
    try {
      await probe.health();
      break;
    } catch (e) {
      if (!(e instanceof lith.ConnectionFailed) || proc.exitCode !== null || Date.now() > deadline)
        throw new Error("lithd did not start: " + fs.readFileSync(path.join(dir, "lithd.log"), "utf8"));
      await sleep(50);
    }
  }
  while (!fs.existsSync(sock)) await sleep(50);
  return {
    url, sock, dir,
    // SIGTERM; lithd must exit 0 (a crash or a sanitizer's report fails the suite)
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) {
        const exited = new Promise((r) => proc.once("exit", r));
        proc.kill("SIGTERM");
        await exited;
      }
      fs.closeSync(log);
      const out = fs.readFileSync(path.join(dir, "lithd.log"), "utf8");
      fs.rmSync(dir, { recursive: true, force: true });
      if (proc.exitCode !== 0) throw new Error(`lithd exited ${proc.exitCode ?? proc.signalCode}:\n${out}`);
    },
  };
}

describe("lith client", { skip: !LITHD && "LITHD (the lithd binary) is not set" }, () => {
  let server;
  let db;
  before(async () => {
    server = await startLithd([], TOKEN);
    db = new lith.Client(server.url, { token: TOKEN });
  });
  after(async () => {
    if (server) await server.stop();
  });

  it("runs do and query", async () => {
    await db.do("DELETE FROM kv");
    const r = await db.do([
      { sql: "INSERT INTO kv VALUES (?, ?)", params: ["a", 1] },
      { sql: "INSERT INTO kv VALUES (:k, :v) RETURNING rowid", params: { ":k": "b", ":v": "two" } },
    ]);
    assert.equal(r.length, 2);
    assert.equal(r[0].changes, 1);
    assert.deepEqual(r[1].rows, [[r[1].last_insert_rowid]]);
    const q = await db.query("SELECT k, v FROM kv ORDER BY k");
    assert.deepEqual(q[0].columns, ["k", "v"]);
    assert.deepEqual(q[0].rows, [["a", 1], ["b", "two"]]);
  });

  it("keeps 64-bit integers exact: strings by default, BigInt when asked", async () => {
    await db.do("DELETE FROM kv");
    await db.do([
      { sql: "INSERT INTO kv VALUES ('max', ?)", params: [2n ** 63n - 1n] },
      { sql: "INSERT INTO kv VALUES ('min', ?)", params: [-(2n ** 63n)] },
      { sql: "INSERT INTO kv VALUES ('safe', ?)", params: [Number.MAX_SAFE_INTEGER] },
      { sql: "INSERT INTO kv VALUES ('real', 0.5)" },
    ]);
    const sql = "SELECT v FROM kv ORDER BY k";
    // default: JSON.parse would round these, so lithd sends them as strings
    assert.deepEqual((await db.query(sql))[0].rows, [["9223372036854775807"], ["-9223372036854775808"], [0.5], [9007199254740991]]);
    // bigint: every integer a BigInt, reals numbers
    const big = await db.query(sql, { bigint: true });
    assert.deepEqual(big[0].rows, [[9223372036854775807n], [-9223372036854775808n], [0.5], [9007199254740991n]]);
    assert.equal(big[0].changes, 0n);
    // the server compares what it stored with the exact value
    const same = await db.query({ sql: "SELECT v = ? FROM kv WHERE k = 'max'", params: [9223372036854775807n] });
    assert.deepEqual(same[0].rows, [[1]]);
    // a client that always wants BigInt, with objects
    const c = new lith.Client(server.url, { token: TOKEN, bigint: true, rows: "objects" });
    assert.deepEqual((await c.query("SELECT k, v FROM kv WHERE k = 'max'"))[0].rows, [{ k: "max", v: 2n ** 63n - 1n }]);
    await assert.rejects(c.do({ sql: "SELECT ?", params: [2n ** 63n] }), (e) => e instanceof lith.BadRequest && /too big integer/.test(e.message));
  });

  it("round-trips blobs, text, null, reals", async () => {
    await db.do("DELETE FROM kv");
    const bytes = new Uint8Array([0, 255, 1]);
    await db.do({ sql: "INSERT INTO kv VALUES (?, ?), (?, ?), (?, ?), (?, ?)", params: ["1", bytes, "2", "é\u0000x", "3", null, "4", 0.1] });
    const rows = (await db.query("SELECT v FROM kv ORDER BY k"))[0].rows;
    assert.deepEqual([...rows[0][0]], [0, 255, 1]);
    assert.deepEqual(rows.slice(1), [["é\u0000x"], [null], [0.1]]);
    await assert.rejects(db.do({ sql: "SELECT ?", params: [NaN] }), TypeError);
  });

  it("answers rows as objects, with declared types", async () => {
    await db.do("DELETE FROM kv");
    await db.do({ sql: "INSERT INTO kv VALUES ('a', 1)" });
    const q = (await db.query("SELECT k, v, length(k) AS __proto__ FROM kv", { rows: "objects", types: true }))[0];
    assert.deepEqual(q.types, ["TEXT", null, null]);
    assert.equal(q.rows.length, 1);
    assert.deepEqual(Object.keys(q.rows[0]), ["k", "v", "__proto__"]);
    assert.equal(q.rows[0].k, "a");
    assert.equal(Object.getOwnPropertyDescriptor(q.rows[0], "__proto__").value, 1);
    const big = (await db.query("SELECT k, 1 AS __proto__ FROM kv", { rows: "objects", bigint: true }))[0];
    assert.equal(Object.getOwnPropertyDescriptor(big.rows[0], "__proto__").value, 1n);
    await assert.rejects(db.query("SELECT k, v AS k FROM kv", { rows: "objects" }), (e) =>
      e instanceof lith.BadRequest && e.status === 400 && e.statement === 0 && /both named "k"/.test(e.message));
    assert.throws(() => new lith.Client(server.url, { rows: "dicts" }), TypeError);
  });

  it("runs named commands", async () => {
    await db.do("DELETE FROM kv");
    const r = await db.command("put", { k: "n", v: 2n ** 62n }, { rows: "objects", bigint: true });
    assert.deepEqual(r[0].rows, [{ k: "n", v: 2n ** 62n }]);
    assert.deepEqual((await db.commands()).map((c) => c.name), ["put"]);
    await assert.rejects(db.command("nope"), (e) => e instanceof lith.NotFound && e.status === 404 && e.code === "not_found");
    await assert.rejects(db.command("put", { k: "n", v: 1 }), lith.ConstraintError);
  });

  it("runs batches, each command its own outcome", async () => {
    await db.do("DELETE FROM kv");
    const out = await db.batch([
      [{ sql: "INSERT INTO kv VALUES (?, 1)", params: ["x"] }],
      [{ sql: "INSERT INTO kv VALUES (?, 2)", params: ["x"] }],
      ["SELECT count(*) AS n FROM kv"],
    ], { rows: "objects" });
    assert.equal(out[0][0].changes, 1);
    assert.ok(out[1] instanceof lith.ConstraintError);
    assert.deepEqual([out[1].status, out[1].code, out[1].statement], [409, "constraint", 0]);
    assert.deepEqual(out[2][0].rows, [{ n: 1 }]);
    await assert.rejects(db.batch([]), lith.BadRequest);
  });

  it("raises LithError subclasses with code, message, status", async () => {
    await db.do("DELETE FROM kv");
    const e = await db.do(["INSERT INTO kv VALUES ('a', 1)", "INSERT INTO kv VALUES ('a', 2)"]).catch((x) => x);
    assert.ok(e instanceof lith.ConstraintError && e instanceof lith.Conflict && e instanceof lith.LithError && e instanceof Error);
    assert.deepEqual([e.status, e.code, e.statement, e.name], [409, "constraint", 1, "ConstraintError"]);
    assert.match(e.message, /UNIQUE constraint failed/);
    assert.deepEqual((await db.query("SELECT count(*) FROM kv"))[0].rows, [[0]]);
    await assert.rejects(db.do("SELEC 1"), (x) => x instanceof lith.BadRequest && x.status === 400);
    await assert.rejects(db.query("DELETE FROM kv"), (x) => x instanceof lith.Forbidden && x.code === "not_a_query");
    for (const token of [null, "wrong"])
      await assert.rejects(new lith.Client(server.url, { token }).query("SELECT 1"), (x) => x instanceof lith.Unauthorized && x.status === 401);
    await assert.rejects(new lith.Client(`http://127.0.0.1:${await freePort()}`).stats(),
      (x) => x instanceof lith.ConnectionFailed && x.status === null && x.code === "connection");
    await assert.rejects(db.do([42]), TypeError);
  });

  it("talks over a Unix socket", async () => {
    const enc = "http+unix://" + encodeURIComponent(server.sock);
    for (const c of [new lith.Client({ unixSocket: server.sock, token: TOKEN }), new lith.Client(server.sock, { token: TOKEN }),
      new lith.Client(enc, { token: TOKEN, bigint: true })]) {
      await c.do({ sql: "INSERT OR REPLACE INTO kv VALUES ('u', ?)", params: [2n ** 62n + 1n] });
      const v = (await c.query("SELECT v FROM kv WHERE k = 'u'"))[0].rows[0][0];
      assert.equal(BigInt(v), 2n ** 62n + 1n);
      assert.deepEqual(await c.health(), { ok: true });
      await assert.rejects(c.do("SELEC 1"), lith.BadRequest);
      c.close();
    }
    const nobody = new lith.Client({ unixSocket: path.join(server.dir, "no.sock") });
    await assert.rejects(nobody.stats(), lith.ConnectionFailed);
    const anon = new lith.Client({ unixSocket: server.sock });
    await assert.rejects(anon.stats(), lith.Unauthorized);
    anon.close();
  });

  it("reads stats", async () => {
    await db.do("SELECT 1");
    const s = await db.stats();
    assert.ok(s.commands > 0);
  });

  it("backs up, to a local file where lithd has GET /v1/backup, and into --backup-dir", async () => {
    await db.do({ sql: "INSERT OR REPLACE INTO kv VALUES ('kept', ?)", params: [2n ** 63n - 1n] });
    const answer = await db.backupToServer("copy.db");
    assert.ok(fs.existsSync(path.join(server.dir, "backups", "copy.db")), JSON.stringify(answer));
    await assert.rejects(db.backupToServer("copy.db"), lith.Conflict);
    for (const c of [db, new lith.Client({ unixSocket: server.sock, token: TOKEN })]) {
      const dest = path.join(server.dir, "download.db");
      fs.rmSync(dest, { force: true });
      let size;
      try {
        size = await c.backup(dest);
      } catch (e) {
        assert.equal(e.status, 405, String(e)); // a lithd without the download
        assert.ok(!fs.existsSync(dest) && !fs.existsSync(dest + ".part"));
        c.close();
        continue;
      }
      assert.equal(size, fs.statSync(dest).size);
      assert.equal(fs.readFileSync(dest).subarray(0, 16).toString("latin1"), "SQLite format 3\u0000");
      const sql = path.join(server.dir, "dump.sql");
      await c.backup(sql, { format: "sql" });
      assert.match(fs.readFileSync(sql, "utf8"), /9223372036854775807/);
      c.close();
    }
  });
});

describe("retries on 503", { skip: !LITHD && "LITHD (the lithd binary) is not set" }, () => {
  let server;
  before(async () => {
    server = await startLithd(["--max-queue", "1", "--max-batch", "1", "--queue-wait-ms", "0", "--max-run-ms", "120000"]);
  });
  after(async () => {
    if (server) await server.stop();
  });

  it("raises 503 without retries, waits Retry-After with them, bounded", async () => {
    const once = new lith.Client(server.url, { maxRetries: 0, timeout: 120000 });
    const settle = (p) => p.then((v) => v, (e) => e);
    let slowDone = false;
    const slow = settle(once.do(SLOW)).then((v) => ((slowDone = true), v));
    await sleep(300);
    const fast = [0, 1, 2, 3].map((i) => settle(once.do({ sql: "INSERT INTO kv VALUES (?, 1)", params: [`fast-${i}`] })));
    const refused = [];
    for (const p of fast) p.then((v) => v instanceof lith.LithError && refused.push(v));
    for (const deadline = Date.now() + 30000; refused.length < 3 && Date.now() < deadline;) await sleep(10);
    assert.equal(slowDone, false, "the slow command ended too soon for the test");
    assert.equal(refused.length, 3);
    for (const e of refused) {
      assert.ok(e instanceof lith.QueueFull && e instanceof lith.Unavailable);
      assert.deepEqual([e.status, e.code, e.retryAfter], [503, "queue_full", 1]);
    }

    // bounded: lithd's Retry-After of 1 s does not fit in 500 ms of waiting
    const retries = [];
    const onRetry = (n, wait, e) => retries.push([n, wait, e.code]);
    const bounded = new lith.Client(server.url, { maxRetries: 5, maxRetryWait: 500, onRetry });
    const t0 = Date.now();
    await assert.rejects(bounded.do("INSERT INTO kv VALUES ('bounded', 1)"), lith.QueueFull);
    assert.ok(Date.now() - t0 < 900);
    assert.deepEqual(retries, []);

    // retried: every write gets in once the writer is free
    const retrying = new lith.Client(server.url, { maxRetries: 1000, maxRetryWait: 600000, timeout: 120000, onRetry });
    const writes = [0, 1, 2, 3].map((i) => retrying.do({ sql: "INSERT INTO kv VALUES (?, 1)", params: [`retried-${i}`] }));
    const results = await Promise.all(writes);
    assert.equal((await slow)[0].changes, 1);
    await Promise.all(fast);
    assert.ok(results.every((r) => r[0].changes === 1));
    assert.ok(retries.length > 0, "no 503 was retried");
    assert.ok(retries.every(([, wait, code]) => wait === 1000 && code === "queue_full"), JSON.stringify(retries));
    assert.deepEqual((await retrying.query("SELECT count(*) FROM kv WHERE k LIKE 'retried-%'"))[0].rows, [[4]]);
    assert.deepEqual((await retrying.query("SELECT count(*) FROM kv WHERE k = 'bounded'"))[0].rows, [[0]]);

    // /v1/batch: a command the full queue refused is sent again alone
    const slow2 = once.do(SLOW);
    await sleep(300);
    const out = await retrying.batch([0, 1, 2].map((i) => [{ sql: "INSERT INTO kv VALUES (?, 1)", params: [`b-${i}`] }]));
    await slow2;
    assert.ok(out.every((r) => Array.isArray(r) && r[0].changes === 1), String(out));
    assert.deepEqual((await retrying.query("SELECT count(*) FROM kv WHERE k LIKE 'b-%'"))[0].rows, [[3]]);
  });
});

// {db: "NAME"} against a lithd serving more than one (its t.db is "main",
// beside --db a=a.db --db b=b.db): the data lands in the named file only.
describe("two databases", { skip: !LITHD && "LITHD (the lithd binary) is not set" }, () => {
  let server;
  before(async () => {
    server = await startLithd(["--db", "a=a.db", "--db", "b=b.db"]);
  });
  after(async () => {
    if (server) await server.stop();
  });

  it("sends each call to the named database", async () => {
    const a = new lith.Client(server.url, { db: "a" });
    const b = new lith.Client(server.url, { db: "b" });
    await a.do({ sql: "INSERT INTO kv VALUES (?, ?)", params: ["k", "in-a"] });
    await b.command("put", { k: "k", v: "in-b" });
    const out = await b.batch([[{ sql: "INSERT INTO kv VALUES (?, ?)", params: ["batch", "b-batch"] }]]);
    assert.equal(out[0][0].changes, 1);
    assert.deepEqual((await a.query("SELECT k, v FROM kv ORDER BY k"))[0].rows, [["k", "in-a"]]);
    assert.deepEqual((await b.query("SELECT k, v FROM kv ORDER BY k"))[0].rows, [["batch", "b-batch"], ["k", "in-b"]]);
    // in the files themselves: each database's own backup of itself, and lithd's own files
    const copyA = path.join(server.dir, "a-copy.db");
    const copyB = path.join(server.dir, "b-copy.db");
    await a.backup(copyA, { format: "sql" });
    await b.backup(copyB, { format: "sql" });
    const dumpA = fs.readFileSync(copyA, "utf8");
    const dumpB = fs.readFileSync(copyB, "utf8");
    assert.match(dumpA, /'in-a'/);
    assert.doesNotMatch(dumpA, /'in-b'|'b-batch'/);
    assert.match(dumpB, /'in-b'/);
    assert.match(dumpB, /'b-batch'/);
    assert.doesNotMatch(dumpB, /'in-a'/);
    const dumpMain = path.join(server.dir, "main-copy.sql");
    await new lith.Client(server.url, { db: "main" }).backup(dumpMain, { format: "sql" });
    assert.doesNotMatch(fs.readFileSync(dumpMain, "utf8"), /'in-a'|'in-b'|'b-batch'/);
    await a.backupToServer("snap-a.db");
    assert.ok(fs.statSync(path.join(server.dir, "backups", "snap-a.db")).size > 0);
    assert.deepEqual((await b.commands()).map((c) => c.name), ["put"]);
    assert.ok("commands" in (await b.stats()));
    assert.deepEqual(await a.health(), { ok: true });
    await assert.rejects(new lith.Client(server.url, { db: "c" }).do("SELECT 1"), (e) =>
      e instanceof lith.NotFound && /no database "c" here/.test(e.message));
    await assert.rejects(new lith.Client(server.url).do("SELECT 1"), (e) =>
      e instanceof lith.NotFound && /none is the default/.test(e.message));
  });
});

// {db: "NAME"}: the routes the client sends to, against a server that records
// them (no lithd needed), and the names it refuses.
describe("the db option", () => {
  it("sends every call but health to /v1/db/NAME/...", async () => {
    const { createServer } = await import("node:http");
    const seen = [];
    const srv = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        seen.push(`${req.method} ${req.url}`);
        const body = '{"results":[],"commands":[]}';
        res.writeHead(200, { "Content-Type": "application/json", "Content-Length": body.length });
        res.end(body);
      });
    });
    await new Promise((r) => srv.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${srv.address().port}`;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lith-node-db-"));
    try {
      const c = new lith.Client(url + "/pre/", { db: "a_B-9" });
      await c.do("SELECT 1");
      await c.query("SELECT 1");
      await c.command("my cmd", { k: 1 });
      await c.batch([["SELECT 1"]]);
      await c.stats();
      await c.commands();
      await c.backupToServer("snap.db");
      await c.backup(path.join(dir, "copy.db"));
      await c.backup(path.join(dir, "copy.sql"), { format: "sql" });
      await c.health();
      await c.query("SELECT 1", { rows: "objects" });
      await new lith.Client(url).do("SELECT 1");
      assert.deepEqual(seen.slice(0, 10), [
        "POST /pre/v1/db/a_B-9/do?int64=string",
        "POST /pre/v1/db/a_B-9/query?int64=string",
        "POST /pre/v1/db/a_B-9/commands/my%20cmd?int64=string",
        "POST /pre/v1/db/a_B-9/batch?int64=string",
        "GET /pre/v1/db/a_B-9/stats",
        "GET /pre/v1/db/a_B-9/commands",
        "POST /pre/v1/db/a_B-9/backup",
        "GET /pre/v1/db/a_B-9/backup",
        "GET /pre/v1/db/a_B-9/backup?format=sql",
        "GET /pre/healthz",
      ]);
      assert.match(seen[10], /^POST \/pre\/v1\/db\/a_B-9\/query\?/);
      assert.equal(seen[11], "POST /v1/do?int64=string");
    } finally {
      srv.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuses names that could change the path", () => {
    const bad = ["", ".", "..", "../do", "a/b", "a%2Fb", "a?x=1", "a#b", "a b", "a.b", "\u00e9", "a\n",
      "x\r\nHost: evil", "a".repeat(65), 7, ["a"]];
    for (const db of bad) assert.throws(() => new lith.Client("http://127.0.0.1:1", { db }), TypeError, JSON.stringify(db));
    assert.equal(new lith.Client("http://127.0.0.1:1", { db: "a".repeat(64) }).db, "a".repeat(64));
  });
});
