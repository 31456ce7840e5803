// The Node client against a real lithd (node --test). LITHD names the lithd
// binary (make test passes the one it just built); without it the tests are
// skipped. Each lithd runs in a temporary directory on a free port and a
// Unix socket, and is stopped with SIGTERM at the end (lithd.js).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import * as lith from "../lith.js";
import { LITHD, TOKEN, chunkedAnswer, freePort, httpAnswer, sleep, startFake, startLithd } from "./lithd.js";

// One INSERT that runs about a second here (longer under sanitizers).
const SLOW =
  "INSERT INTO kv(k, v) SELECT 'slow-' || hex(randomblob(8)), count(*) FROM (WITH RECURSIVE c(i) AS " +
  "(SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 4000000) SELECT i FROM c)";

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
    // (retried first by default: retry.test.js)
    await assert.rejects(new lith.Client(`http://127.0.0.1:${await freePort()}`, { maxRetries: 0 }).stats(),
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
    const nobody = new lith.Client({ unixSocket: path.join(server.dir, "no.sock"), maxRetries: 0 });
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
        assert.ok(!fs.existsSync(dest));
        assert.deepEqual(fs.readdirSync(server.dir).filter((n) => n.endsWith(".part")), []);
        c.close();
        continue;
      }
      assert.equal(size, fs.statSync(dest).size);
      assert.deepEqual(fs.readdirSync(server.dir).filter((n) => n.endsWith(".part")), []);
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

// https to a lithd with --tls-cert, its certificate signed by a CA of the
// test's own (clients/test-certs.sh, which needs openssl).
const hasOpenssl = spawnSync("openssl", ["version"]).status === 0;
describe("https", { skip: (!LITHD && "LITHD (the lithd binary) is not set") || (!hasOpenssl && "no openssl") }, () => {
  let server, certs, caFile;
  before(async () => {
    certs = fs.mkdtempSync(path.join(os.tmpdir(), "lith-node-certs-"));
    const made = spawnSync("sh", [path.join(import.meta.dirname ?? path.dirname(new URL(import.meta.url).pathname), "..", "..", "test-certs.sh"), certs]);
    assert.equal(made.status, 0, String(made.stderr));
    caFile = path.join(certs, "ca.pem");
    server = await startLithd([], null, certs);
  });
  after(async () => {
    if (server) await server.stop();
    if (certs) fs.rmSync(certs, { recursive: true, force: true });
  });

  it("verifies lithd against {ca}", async () => {
    assert.match(server.url, /^https:/);
    const db = new lith.Client(server.url, { ca: fs.readFileSync(caFile) });
    await db.do({ sql: "INSERT INTO kv VALUES (?, ?)", params: ["tls", 1] });
    assert.deepEqual((await db.query("SELECT v FROM kv WHERE k = 'tls'"))[0].rows, [[1]]);
    const copy = path.join(certs, "copy.db");
    assert.ok((await db.backup(copy)) > 0);
    db.close();
  });

  it("refuses a lithd no CA it trusts signed, before sending", async () => {
    // this process's CAs: Node's, and whatever NODE_EXTRA_CA_CERTS named at its start
    const db = new lith.Client(server.url, { maxRetries: 0 });
    await assert.rejects(db.do("INSERT INTO kv VALUES ('never', 1)"), (e) => e instanceof lith.ConnectionFailed && /certificate|CERT/i.test(e.message));
    const other = new lith.Client(server.url, { maxRetries: 0, ca: fs.readFileSync(path.join(certs, "cert.pem")) });
    await assert.rejects(other.health(), (e) => e instanceof lith.ConnectionFailed);
    other.close();
    const ok = new lith.Client(server.url, { ca: fs.readFileSync(caFile) });
    assert.deepEqual((await ok.query("SELECT count(*) FROM kv WHERE k = 'never'"))[0].rows, [[0]]);
    ok.close();
  });

  it("trusts NODE_EXTRA_CA_CERTS (read when node starts: a child node)", () => {
    const lithJs = new URL("../lith.js", import.meta.url).href;
    const code = `import { Client } from ${JSON.stringify(lithJs)};
      const db = new Client(${JSON.stringify(server.url.replace("127.0.0.1", "localhost"))});
      const r = await db.query("SELECT 40 + 2");
      console.log(JSON.stringify(r[0].rows));`;
    const child = spawnSync(process.execPath, ["--input-type=module", "-e", code],
      { env: { ...process.env, NODE_EXTRA_CA_CERTS: caFile }, encoding: "utf8", timeout: 20000 });
    assert.equal(child.status, 0, child.stderr);
    assert.equal(child.stdout.trim(), "[[42]]");
  });

  it("takes ca only for https", () => {
    assert.throws(() => new lith.Client("http://127.0.0.1:1", { ca: "x" }), TypeError);
    assert.throws(() => new lith.Client("/run/x.sock", { ca: "x" }), TypeError);
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

// ---- Against a fake lithd (lithd.js's startFake) ----------------------------------

for (const unix of [false, true]) {
  describe(`against a fake lithd (${unix ? "Unix socket, node:http" : "TCP, fetch"})`, () => {
    const open = [];
    after(async () => {
      for (const [f, c] of open) {
        c.close();
        await f.close();
      }
    });
    const fake = async (script, options = {}) => {
      const f = await startFake(script, { unix });
      const c = new lith.Client(f.url, { timeout: 5000, maxRetries: 3, maxRetryWait: 5000, ...options });
      open.push([f, c]);
      return [f, c];
    };
    const writes = [
      ["do", (c) => c.do("INSERT INTO kv VALUES (1)"), "POST /v1/do"],
      ["command", (c) => c.command("put", { k: 1 }), "POST /v1/commands/put"],
      ["batch", (c) => c.batch([["INSERT INTO kv VALUES (1)"]]), "POST /v1/batch"],
      ["backupToServer", (c) => c.backupToServer("x.db"), "POST /v1/backup"],
    ];

    it("never sends a write again once it was sent and its connection was lost", async () => {
      for (const [name, call, line] of writes) {
        for (const warm of [true, false]) {
          const [f, c] = await fake((n, m) => (m === "POST" ? [null, "close"] : [httpAnswer(200), "keep"]));
          if (warm) await c.health();
          const e = await call(c).then(() => null, (x) => x);
          assert.ok(e instanceof lith.AnswerLost, `${name}: ${e}`);
          assert.ok(e instanceof lith.OutcomeUnknown && !(e instanceof lith.ConnectionFailed) && e instanceof lith.LithError);
          assert.equal(e.outcomeUnknown, true);
          assert.deepEqual([e.status, e.code], [null, "connection"]);
          assert.match(e.message, /whether it committed is unknown/);
          assert.deepEqual(f.paths(), [...(warm ? ["GET /healthz"] : []), line], name);
        }
      }
      // nothing sent: not an OutcomeUnknown
      const gone = new lith.Client(unix ? "/nonexistent/lithd.sock" : `http://127.0.0.1:${await freePort()}`, { maxRetries: 0 });
      const e = await gone.do("INSERT INTO kv VALUES (1)").then(() => null, (x) => x);
      assert.ok(e instanceof lith.ConnectionFailed && !(e instanceof lith.OutcomeUnknown) && e.outcomeUnknown === false, String(e));
    });

    it("never sends a write again after it timed out", async () => {
      const [f, c] = await fake(async () => {
        await sleep(600);
        return [httpAnswer(200), "keep"];
      }, { timeout: 200 });
      const e = await c.do("INSERT INTO kv VALUES (1)").then(() => null, (x) => x);
      assert.ok(e instanceof lith.AnswerLost, String(e));
      assert.equal(e.code, "timeout");
      await sleep(600);
      assert.deepEqual(f.paths(), ["POST /v1/do"]);
    });

    it("sends a read that got no answer once more", async () => {
      const reads = [
        ["query", (c) => c.query("SELECT 1"), "POST /v1/query"],
        ["stats", (c) => c.stats(), "GET /v1/stats"],
        ["commands", (c) => c.commands(), "GET /v1/commands"],
      ];
      for (const [name, call, line] of reads) {
        let [f, c] = await fake((n) => (n === 1 ? [null, "close"] : [httpAnswer(200), "keep"]));
        await c.health();
        await call(c);
        assert.deepEqual(f.paths(), ["GET /healthz", line, line], name);
        [f, c] = await fake(() => [null, "close"]);
        const e = await call(c).then(() => null, (x) => x);
        assert.ok(e instanceof lith.ConnectionFailed && !(e instanceof lith.OutcomeUnknown), `${name}: ${e}`);
        assert.deepEqual(f.paths(), [line, line], name);
      }
    });

    it("does not send on a kept-alive connection the server closed while idle", async () => {
      for (const then of ["close", "rst"]) {
        const [f, c] = await fake(() => [httpAnswer(200), then]);
        for (let i = 0; i < 3; i++) {
          await c.do("INSERT INTO kv VALUES (1)");
          await sleep(50); // the FIN or RST arrives
        }
        assert.deepEqual(f.paths(), ["POST /v1/do", "POST /v1/do", "POST /v1/do"], then);
      }
    });

    it("retries 503 alone, never 504 or outcome_unknown", async () => {
      const unknown = '{"error": {"code": "outcome_unknown", "message": "the leader was lost after COMMIT"}}';
      const cases = [
        [504, unknown, lith.OutcomeUnknown, "outcome_unknown"],
        [503, unknown, lith.OutcomeUnknown, "outcome_unknown"], // the code wins
        [504, "<html>Gateway Timeout</html>", lith.OutcomeUnknown, "http_504"], // a proxy's
        [500, '{"error": {"code": "internal", "message": "x"}}', lith.ServerError, "internal"],
        [502, "Bad Gateway", lith.ServerError, "http_502"],
        [507, '{"error": {"code": "disk_full", "message": "x"}}', lith.ServerError, "disk_full"],
        [409, '{"error": {"code": "constraint", "message": "x"}}', lith.ConstraintError, "constraint"],
      ];
      for (const [status, body, Cls, code] of cases) {
        for (const call of [(c) => c.do("INSERT INTO kv VALUES (1)"), (c) => c.query("SELECT 1")]) {
          const [f, c] = await fake(() => [httpAnswer(status, body), "keep"]);
          const e = await call(c).then(() => null, (x) => x);
          assert.ok(e instanceof Cls, `${status} ${code}: ${e}`);
          assert.deepEqual([e.status, e.code, f.requests.length], [status, code, 1]);
        }
      }
      assert.ok(!(new lith.ServerError("x") instanceof lith.OutcomeUnknown));
      const busy = httpAnswer(503, '{"error": {"code": "busy", "message": "x"}}', ["Retry-After: 0"]);
      let [f, c] = await fake(() => [busy, "keep"]);
      const e = await c.do("INSERT INTO kv VALUES (1)").then(() => null, (x) => x);
      assert.ok(e instanceof lith.Unavailable && !(e instanceof lith.OutcomeUnknown), String(e));
      assert.deepEqual([e.code, f.requests.length], ["busy", 4]);
      [f, c] = await fake((n) => [n < 2 ? busy : httpAnswer(200), "keep"]);
      assert.deepEqual(await c.do("INSERT INTO kv VALUES (1)"), []);
      assert.equal(f.requests.length, 3);
    });

    it("sends again, in a batch, only the commands that did not run", async () => {
      const first = '{"results": [{"error": {"code": "outcome_unknown", "message": "lost"}}, ' +
        '{"error": {"code": "busy", "message": "x"}}, {"results": []}]}';
      const [f, c] = await fake((n) => [httpAnswer(200, n === 0 ? first : '{"results": [{"results": []}]}'), "keep"]);
      const out = await c.batch([["INSERT INTO kv VALUES (1)"], ["INSERT INTO kv VALUES (2)"], ["SELECT 1"]]);
      assert.ok(out[0] instanceof lith.OutcomeUnknown, String(out[0]));
      assert.deepEqual([out[0].status, out[0].code], [504, "outcome_unknown"]);
      assert.deepEqual(out.slice(1), [[], []]);
      assert.equal(f.requests.length, 2);
      assert.deepEqual(JSON.parse(f.requests[1].body).commands, [{ statements: [{ sql: "INSERT INTO kv VALUES (2)" }] }]);
    });

    // backup() from a server answering `answer`, then closing the connection
    // or not: [its result or error, dest, the directory's files]. (A whole
    // answer is not followed by a close: Node 20's fetch may then lose its
    // end, nodejs/undici#3300; an error, never a short file.)
    const backupInto = async (answer, then = "close") => {
      const [f, c] = await fake(() => [answer, then]);
      const dest = path.join(f.dir, "copy.db");
      fs.writeFileSync(dest, "the old copy");
      const got = await c.backup(dest).then((v) => v, (e) => e);
      return [got, dest, fs.readdirSync(f.dir).filter((n) => n !== "fake.sock").sort()];
    };

    it("never installs a download cut short", async () => {
      const data = Buffer.alloc(102400);
      for (let i = 0; i < data.length; i++) data[i] = i % 256;
      for (const [name, answer, why] of [
        ["Content-Length", httpAnswer(200, data.subarray(0, 50000), [], data.length), /cut short/],
        ["chunked", chunkedAnswer(data, false), /cut short/],
      ]) {
        const [got, dest, files] = await backupInto(answer);
        assert.ok(got instanceof lith.ConnectionFailed, `${name}: ${got}`);
        assert.equal(got.status, 200);
        assert.match(got.message, why);
        assert.deepEqual(files, ["copy.db"], name); // no partial file left beside it
        assert.equal(fs.readFileSync(dest, "utf8"), "the old copy", name);
      }
      // neither a length nor chunks: a cut could not be told from the end
      let [got, , files] = await backupInto(Buffer.concat([Buffer.from("HTTP/1.1 200 X\r\nConnection: close\r\n\r\n"), data]));
      assert.ok(got instanceof lith.LithError, String(got));
      assert.deepEqual([got.code, files], ["bad_answer", ["copy.db"]]);
      for (const [name, answer] of [["Content-Length", httpAnswer(200, data)], ["chunked", chunkedAnswer(data)]]) {
        const [size, dest, names] = await backupInto(answer, "keep");
        assert.deepEqual([size, names], [data.length, ["copy.db"]], name);
        assert.ok(fs.readFileSync(dest).equals(data), name);
        assert.equal(fs.statSync(dest).mode & 0o777, 0o600);
      }
      [got, , files] = await backupInto(httpAnswer(405, '{"error": {"code": "method_not_allowed", "message": "x"}}'));
      assert.deepEqual([got.status, files], [405, ["copy.db"]]);
    });

    it("bounds answers by maxAnswerBytes", async () => {
      const rows = '{"results": [{"rows": [["' + "x".repeat(2000) + '"]]}]}';
      for (const [name, answer] of [["Content-Length", httpAnswer(200, rows)], ["chunked", chunkedAnswer(rows)]]) {
        const [, c] = await fake(() => [answer, "keep"], { maxAnswerBytes: 1000 });
        for (const call of [() => c.query("SELECT 1"), () => c.do("SELECT 1"), () => c.query("SELECT 1", { bigint: true })]) {
          const e = await call().then(() => null, (x) => x);
          assert.ok(e instanceof lith.LithError, `${name}: ${e}`);
          assert.deepEqual([e.code, e.status], ["answer_too_large", 200], name);
          assert.match(e.message, /maxAnswerBytes \(1000\)/);
          assert.match(e.message, /the request ran/);
        }
        c.maxAnswerBytes = rows.length;
        assert.deepEqual((await c.query("SELECT 1"))[0].rows, [["x".repeat(2000)]], name);
        c.maxAnswerBytes = null;
        assert.deepEqual((await c.query("SELECT 1"))[0].rows, [["x".repeat(2000)]], name);
      }
      assert.equal(new lith.Client("http://127.0.0.1:1").maxAnswerBytes, 256 * 1024 * 1024);
      // refused on its Content-Length, before any of it is waited for
      const [, big] = await fake(() => [httpAnswer(200, "{}", [], 1e9), "keep"], { timeout: 3000 });
      const t0 = Date.now();
      const tooBig = await big.query("SELECT 1").then(() => null, (x) => x);
      assert.deepEqual([tooBig && tooBig.code, tooBig && tooBig.status], ["answer_too_large", 200], String(tooBig));
      assert.ok(Date.now() - t0 < 2000);
      // an answer shorter than its Content-Length is no answer
      const [, c] = await fake(() => [httpAnswer(200, rows.slice(0, 100), [], rows.length), "close"]);
      const e = await c.query("SELECT 1").then(() => null, (x) => x);
      assert.ok(e instanceof lith.ConnectionFailed && e.status === 200, String(e));
      assert.match(e.message, /cut short/);
    });

    it("rejects a 200 that is not JSON with a LithError", async () => {
      const notUtf8 = Buffer.concat([Buffer.from('{"results": [{"rows": [["'), Buffer.from([0xff]), Buffer.from('"]]}]}')]);
      for (const body of ["not json", "", '{"results": [', Buffer.from([0xff, 0xfe]), notUtf8, "[1, 2]", '{"other": 1}']) {
        const [, c] = await fake(() => [httpAnswer(200, body), "keep"]);
        for (const call of [() => c.do("SELECT 1"), () => c.query("SELECT 1"), () => c.query("SELECT 1", { bigint: true }), () => c.commands()]) {
          const e = await call().then(() => null, (x) => x);
          assert.ok(e instanceof lith.LithError, `${JSON.stringify(String(body))}: ${e}`);
          assert.deepEqual([e.code, e.status], ["bad_answer", 200], String(body));
        }
      }
    });
  });
}

// fetch and node:http find a body cut short before the client does (above);
// the client's own count is the last word, for a transport that did not.
describe("a body shorter than its Content-Length", () => {
  it("is a cut, in an answer and in a download", async () => {
    const c = new lith.Client("http://127.0.0.1:1");
    const pieces = () => {
      const left = [Buffer.from('{"a":'), null];
      return async () => left.shift();
    };
    await assert.rejects(c._gather(200, 10, pieces()), (e) => e.constructor.name === "Cut" && /after 5 of 10 bytes/.test(e.message));
    const sink = { write: async (b, off, n) => ({ bytesWritten: n }) };
    await assert.rejects(c._download(10, false, pieces(), sink), (e) => e.constructor.name === "Cut" && /after 5 of 10 bytes/.test(e.message));
    assert.equal(await c._gather(200, 5, pieces()), '{"a":');
    assert.equal(await c._download(5, false, pieces(), sink), 5);
  });

  it("a chunked answer is gathered whole, past the first buffer, and bounded", async () => {
    const c = new lith.Client("http://127.0.0.1:1");
    const whole = Buffer.from(Array.from({ length: 300000 }, (_, i) => String.fromCharCode(97 + (i % 26))).join(""));
    const chunks = () => {
      const left = [];
      for (let i = 0; i < whole.length; i += 7001) left.push(whole.subarray(i, i + 7001));
      left.push(null);
      return async () => left.shift();
    };
    assert.equal(await c._gather(200, null, chunks()), whole.toString());
    c.maxAnswerBytes = whole.length;
    assert.equal(await c._gather(200, null, chunks()), whole.toString());
    c.maxAnswerBytes = whole.length - 1;
    await assert.rejects(c._gather(200, null, chunks()), (e) => e.code === "answer_too_large");
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
