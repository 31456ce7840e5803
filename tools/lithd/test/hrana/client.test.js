// The real libSQL client (@libsql/client, make deps-hrana) against a real
// lithd over Hrana-over-HTTP (node --test). LITHD names the lithd binary,
// LITH_HRANA_MODULES the node_modules folder holding the client; without
// them the tests are skipped. This file starts two lithds of its own (the
// second with short transaction bounds) on free ports in temporary
// directories, and stops them with SIGTERM at the end: each must exit 0.
"use strict";

const { after, before, describe, it } = require("node:test");
const assert = require("node:assert/strict");
const { execFile } = require("node:child_process");
const crypto = require("node:crypto");
const { performance } = require("node:perf_hooks");

const h = require("./harness.js");

const SKIP = h.skipReason();
const TX_IDLE_MS = 300; // the short lithd's --tx-idle-ms
const TX_MAX_MS = 1500; // and --tx-max-ms
const MAX_VALUE = 2 << 20; // the main lithd's --max-value-bytes: a 1 MiB blob fits, with its row
// A deadline for what must happen at once (a write while no one holds the
// writer); far under lithd's 5 s --tx-idle-ms, so a transaction that holds
// the writer shows as a timeout, not as a late success.
const PROMPT_MS = 500;

let libsql; // @libsql/client
let main; // the lithd with default bounds (and a 2 MiB --max-value-bytes)
let short; // the lithd with --tx-idle-ms 300 --tx-max-ms 1500
let db; // a client of main
let other; // another client of main: another program
let big; // main, intMode "bigint"

const client = (server, opts = {}) => libsql.createClient({ url: server.url, ...opts });
const rowsOf = (rs) => rs.rows.map((r) => Array.from(r));
const scalar = async (c, sql, args) => (await c.execute({ sql, args: args ?? [] })).rows[0][0];
// A LibsqlError (or subclass) with this code.
const libsqlError = (code, re) => (e) => {
  assert.ok(e instanceof libsql.LibsqlError, `not a LibsqlError: ${e && e.stack}`);
  assert.equal(e.code, code, e.message);
  if (re) assert.match(e.message, re);
  return true;
};

describe("@libsql/client against lithd", { skip: SKIP, timeout: 120000 }, () => {
  before(async () => {
    libsql = h.load("@libsql/client");
    [main, short] = await Promise.all([
      h.startLithd(["--max-value-bytes", String(MAX_VALUE)]),
      h.startLithd(["--tx-idle-ms", String(TX_IDLE_MS), "--tx-max-ms", String(TX_MAX_MS)]),
    ]);
    db = client(main);
    other = client(main);
    big = client(main, { intMode: "bigint" });
  });
  after(async () => {
    for (const c of [db, other, big]) if (c) c.close();
    const stops = [main, short].filter(Boolean).map((s) => s.stop());
    for (const r of await Promise.allSettled(stops)) if (r.status === "rejected") throw r.reason;
  });

  describe("execute", () => {
    it("answers a write's rowsAffected and bigint lastInsertRowid with no rows or columns", async () => {
      await db.execute(
        "CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, qty INTEGER, price REAL, data BLOB, extra)");
      const w = await db.execute({ sql: "INSERT INTO items(name, qty, price) VALUES (?, ?, ?)", args: ["apple", 3, 0.5] });
      assert.equal(w.rowsAffected, 1);
      assert.equal(w.lastInsertRowid, 1n);
      assert.deepEqual(w.rows, []);
      assert.deepEqual(w.columns, []);
      assert.deepEqual(w.columnTypes, []);
      const past = await db.execute({ sql: "INSERT INTO items(id, name) VALUES (?, 'past 2^53')", args: [2n ** 53n + 1n] });
      assert.equal(past.lastInsertRowid, 9007199254740993n);
      const three = await db.execute("INSERT INTO items(name, qty) VALUES ('b', 1), ('c', 2), ('d', 3)");
      assert.equal(three.rowsAffected, 3);
      assert.equal(three.lastInsertRowid, 9007199254740996n);
      assert.deepEqual(three.rows, []);
      // a bigint client answers the same bigint
      const w2 = await big.execute("INSERT INTO items(name) VALUES ('e')");
      assert.equal(typeof w2.lastInsertRowid, "bigint");
      assert.equal(w2.lastInsertRowid, 9007199254740997n);
    });

    it("reads back what was written: columns, declared types, rows by index and by name", async () => {
      const r = await db.execute(
        "SELECT id, name, qty, price, data, extra, qty * 2 AS dbl FROM items WHERE name = 'apple'");
      assert.deepEqual(r.columns, ["id", "name", "qty", "price", "data", "extra", "dbl"]);
      assert.deepEqual(r.columnTypes, ["INTEGER", "TEXT", "INTEGER", "REAL", "BLOB", "", ""]);
      assert.equal(r.rowsAffected, 0);
      assert.deepEqual(rowsOf(r), [[1, "apple", 3, 0.5, null, null, 6]]);
      assert.equal(r.rows[0].name, "apple");
      assert.equal(r.rows[0].dbl, 6);
      assert.equal(r.rows[0].length, 7);
      const names = await db.execute("SELECT name FROM items ORDER BY id");
      assert.deepEqual(rowsOf(names), [["apple"], ["past 2^53"], ["b"], ["c"], ["d"], ["e"]]);
    });

    it("answers a SELECT of 10,001 rows: an answer is bounded by its bytes, as sqld's, not by --max-rows", async () => {
      const rs = await db.execute("WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 10001) SELECT i FROM c");
      assert.equal(rs.rows.length, 10001);
      assert.equal(Number(rs.rows[10000][0]), 10001);
    });

    it("counts an UPDATE's and a DELETE's rows; RETURNING answers rows", async () => {
      const u = await db.execute("UPDATE items SET qty = qty + 10 WHERE qty IS NOT NULL");
      assert.equal(u.rowsAffected, 4);
      assert.deepEqual(u.rows, []);
      const d = await db.execute("DELETE FROM items WHERE name IN ('b', 'c')");
      assert.equal(d.rowsAffected, 2);
      // the next rowid is past 2^53: a bigint client reads it
      const ret = await big.execute({ sql: "INSERT INTO items(name, qty) VALUES (?, ?) RETURNING id, name, qty", args: ["f", 7] });
      assert.equal(ret.rowsAffected, 1);
      assert.deepEqual(ret.columns, ["id", "name", "qty"]);
      assert.deepEqual(rowsOf(ret), [[9007199254740998n, "f", 7n]]);
      assert.equal(ret.lastInsertRowid, 9007199254740998n);
      assert.deepEqual(rowsOf(await db.execute("SELECT name, qty FROM items WHERE qty IS NOT NULL ORDER BY id")),
        [["apple", 13], ["d", 13], ["f", 7]]);
    });
  });

  describe("values at their limits", () => {
    before(async () => {
      await db.execute("CREATE TABLE vals(k TEXT PRIMARY KEY, v)"); // v: no affinity, kept as given
    });
    const put = (c, k, v) => c.execute({ sql: "INSERT INTO vals VALUES (?, ?)", args: [k, v] });
    const get = async (c, k) => rowsOf(await c.execute({ sql: "SELECT v, typeof(v) FROM vals WHERE k = ?", args: [k] }))[0];

    it("keeps 64-bit integers exact with intMode bigint: ±(2^63-1), -2^63, 2^53+1", async () => {
      const ints = {
        max: 2n ** 63n - 1n, min: -(2n ** 63n), negmax: -(2n ** 63n - 1n),
        past53: 2n ** 53n + 1n, negpast53: -(2n ** 53n + 1n), zero: 0n, minus1: -1n,
      };
      for (const [k, v] of Object.entries(ints)) await put(big, "i-" + k, v);
      for (const [k, v] of Object.entries(ints)) {
        const [got, type] = await get(big, "i-" + k);
        assert.equal(typeof got, "bigint", k);
        assert.equal(got, v, k);
        assert.equal(type, "integer", k);
      }
      // lithd stored the exact values: SQLite compares them with literals
      assert.deepEqual(rowsOf(await db.execute(
        "SELECT (SELECT v FROM vals WHERE k = 'i-max') = 9223372036854775807, " +
        "(SELECT v FROM vals WHERE k = 'i-min') = -9223372036854775807 - 1, " +
        "(SELECT v FROM vals WHERE k = 'i-past53') = 9007199254740993")), [[1, 1, 1]]);
      // the same integers from SQL, not from an argument
      assert.deepEqual(rowsOf(await big.execute("SELECT 9223372036854775807, -9223372036854775807 - 1, 9007199254740993")),
        [[2n ** 63n - 1n, -(2n ** 63n), 2n ** 53n + 1n]]);
      // intMode "string": exact decimal strings; "number" (the default) refuses what it cannot hold
      const str = client(main, { intMode: "string" });
      try {
        assert.deepEqual(await get(str, "i-min"), ["-9223372036854775808", "integer"]);
      } finally {
        str.close();
      }
      await assert.rejects(get(db, "i-past53"), RangeError);
      assert.equal(await scalar(db, "SELECT 9007199254740991"), Number.MAX_SAFE_INTEGER);
      assert.equal(await scalar(db, "SELECT -9007199254740991"), -Number.MAX_SAFE_INTEGER);
    });

    it("keeps doubles exact: 0.1, 1e308, the smallest subnormal, -0, ±Infinity; a real stays a number", async () => {
      const floats = { tenth: 0.1, huge: 1e308, maxval: Number.MAX_VALUE, subnormal: 5e-324,
        minnormal: 2.2250738585072014e-308, third: 1 / 3, neg: -2.5, pi: Math.PI, twoTo60: 2 ** 60 };
      for (const [k, v] of Object.entries(floats)) await put(db, "f-" + k, v);
      for (const [k, v] of Object.entries(floats)) {
        const [got, type] = await get(db, "f-" + k);
        assert.ok(Object.is(got, v), `${k}: ${got} !== ${v}`);
        assert.equal(type, "real", k);
      }
      // -0 (the client sends an argument's -0 as 0: made in SQL here), ±Infinity (sent as ±1e999)
      await db.execute("INSERT INTO vals VALUES ('f-negzero', -0.0), ('f-inf', 1e999), ('f-ninf', -1e999)");
      assert.ok(Object.is((await get(db, "f-negzero"))[0], -0));
      assert.deepEqual(await get(db, "f-inf"), [Infinity, "real"]);
      assert.deepEqual(await get(db, "f-ninf"), [-Infinity, "real"]);
      assert.ok(Object.is(await scalar(db, "SELECT -0.0"), -0));
      // a real with no fraction is a float on the wire: a number even for a bigint client
      const [one, twoTo60] = rowsOf(await big.execute("SELECT 1.0, (SELECT v FROM vals WHERE k = 'f-twoTo60')"))[0];
      assert.equal(one, 1);
      assert.equal(twoTo60, 2 ** 60);
    });

    it("keeps text exact: NUL inside, characters past the BMP, empty, long", async () => {
      const texts = { nul: "a\u0000b", astral: "😀𝄞\u{10FFFF}", combining: "e\u0301", empty: "", long: "λ".repeat(200000),
        quotes: "it's \"q\" \\ ;" };
      for (const [k, v] of Object.entries(texts)) await put(db, "t-" + k, v);
      for (const [k, v] of Object.entries(texts)) assert.deepEqual(await get(db, "t-" + k), [v, "text"], k);
      // the bytes SQLite holds are the UTF-8 of each
      for (const [k, v] of Object.entries(texts)) {
        const hex = await scalar(db, "SELECT hex(v) FROM vals WHERE k = ?", ["t-" + k]);
        assert.equal(hex, Buffer.from(v, "utf8").toString("hex").toUpperCase(), k);
      }
      assert.equal(await scalar(db, "SELECT v IS NULL FROM vals WHERE k = 't-empty'"), 0);
    });

    it("keeps blobs exact: empty, every byte 0..255, 1 MiB", async () => {
      const all = Uint8Array.from({ length: 256 }, (_, i) => i);
      const mib = crypto.randomBytes(1 << 20);
      await put(db, "b-empty", new Uint8Array(0));
      await put(db, "b-all", all);
      await put(db, "b-mib", mib);
      const [empty, et] = await get(db, "b-empty");
      assert.ok(empty instanceof ArrayBuffer);
      assert.equal(empty.byteLength, 0);
      assert.equal(et, "blob");
      const [got, t] = await get(db, "b-all");
      assert.equal(t, "blob");
      assert.deepEqual(new Uint8Array(got), all);
      assert.equal(await scalar(db, "SELECT hex(v) FROM vals WHERE k = 'b-all'"), Buffer.from(all).toString("hex").toUpperCase());
      const [back] = await get(db, "b-mib");
      assert.equal(back.byteLength, 1 << 20);
      assert.ok(Buffer.from(back).equals(mib), "the 1 MiB blob came back different");
      assert.equal(await scalar(db, "SELECT length(v) FROM vals WHERE k = 'b-mib'"), 1 << 20);
      assert.deepEqual([...new Uint8Array(await scalar(db, "SELECT x'00ff10'"))], [0, 255, 16]);
    });

    it("keeps NULL", async () => {
      await put(db, "n", null);
      assert.deepEqual(await get(db, "n"), [null, "null"]);
      assert.deepEqual(rowsOf(await db.execute("SELECT NULL, ? IS NULL", [null])), [[null, 1]]);
    });

    it("refuses a blob past --max-value-bytes with sqld's code, SQLITE_TOOBIG", async () => {
      await assert.rejects(put(db, "b-toobig", new Uint8Array(MAX_VALUE + 1)), libsqlError("SQLITE_TOOBIG", /too big/));
      assert.equal(await scalar(db, "SELECT count(*) FROM vals WHERE k = 'b-toobig'"), 0);
    });
  });

  describe("arguments", () => {
    it("binds a name without its prefix to :a, @a and $a", async () => {
      assert.deepEqual(rowsOf(await db.execute({ sql: "SELECT :a", args: { a: 1 } })), [[1]]);
      assert.deepEqual(rowsOf(await db.execute({ sql: "SELECT @a", args: { a: "at" } })), [["at"]]);
      assert.deepEqual(rowsOf(await db.execute({ sql: "SELECT $a", args: { a: null } })), [[null]]);
      assert.deepEqual(rowsOf(await db.execute({ sql: "SELECT :x, @y, $z", args: { x: 1, y: 2, z: 3 } })), [[1, 2, 3]]);
      assert.deepEqual(rowsOf(await db.execute({ sql: "SELECT :a || :a", args: { a: "ab" } })), [["abab"]]);
    });

    it("binds keys that carry their prefix: {\":a\": 1}, {\"@b\": ...}, {\"$c\": ...}", async () => {
      assert.deepEqual(rowsOf(await db.execute({ sql: "SELECT :a, @b, $c", args: { ":a": 1, "@b": "two", "$c": 3n } })),
        [[1, "two", 3]]);
    });

    it("binds ? in order and ?N by number", async () => {
      assert.deepEqual(rowsOf(await db.execute({ sql: "SELECT ?, ?, ?", args: [1, "x", null] })), [[1, "x", null]]);
      assert.deepEqual(rowsOf(await db.execute({ sql: "SELECT ?2, ?1, ?2", args: ["one", "two"] })), [["two", "one", "two"]]);
      assert.deepEqual(rowsOf(await db.execute({ sql: "SELECT ?2", args: ["unused", "two"] })), [["two"]]);
    });

    it("refuses a missing or an unknown argument: ARGS_INVALID", async () => {
      await assert.rejects(db.execute({ sql: "SELECT :a, :b", args: { a: 1 } }), libsqlError("ARGS_INVALID", /:b/));
      await assert.rejects(db.execute({ sql: "SELECT :a", args: { a: 1, zz: 2 } }), libsqlError("ARGS_INVALID", /zz/));
      await assert.rejects(db.execute({ sql: "SELECT ?, ?", args: [1] }), libsqlError("ARGS_INVALID"));
      await assert.rejects(db.execute({ sql: "SELECT ?", args: [1, 2] }), libsqlError("ARGS_INVALID"));
    });
  });

  describe("errors", () => {
    before(async () => {
      await db.execute("CREATE TABLE uniq(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, n CHECK (n > 0))");
      await db.execute("INSERT INTO uniq VALUES (1, 'one', 1)");
    });

    it("gives SQLITE_CONSTRAINT for UNIQUE, PRIMARY KEY, NOT NULL and CHECK, and keeps nothing of it", async () => {
      await assert.rejects(db.execute("INSERT INTO uniq VALUES (2, 'one', 1)"),
        libsqlError("SQLITE_CONSTRAINT", /UNIQUE constraint failed: uniq\.name/));
      await assert.rejects(db.execute("INSERT INTO uniq VALUES (1, 'uno', 1)"),
        libsqlError("SQLITE_CONSTRAINT", /UNIQUE constraint failed: uniq\.id/));
      await assert.rejects(db.execute("INSERT INTO uniq VALUES (3, NULL, 1)"),
        libsqlError("SQLITE_CONSTRAINT", /NOT NULL constraint failed: uniq\.name/));
      await assert.rejects(db.execute("INSERT INTO uniq VALUES (4, 'four', -1)"),
        libsqlError("SQLITE_CONSTRAINT", /CHECK constraint failed/));
      await assert.rejects(db.execute("UPDATE uniq SET name = NULL"), libsqlError("SQLITE_CONSTRAINT", /NOT NULL/));
      assert.deepEqual(rowsOf(await db.execute("SELECT * FROM uniq")), [[1, "one", 1]]);
    });

    it("gives SQL_PARSE_ERROR for bad syntax, as sqld does; SQLITE_ERROR for a missing table", async () => {
      for (const sql of ["SELEC 1", "SELECT (1", "SELECT 'unterminated", "INSERT INTO uniq VALUES (1,"])
        await assert.rejects(db.execute(sql), libsqlError("SQL_PARSE_ERROR"), sql);
      await assert.rejects(db.execute("SELECT * FROM no_such_table"), libsqlError("SQLITE_ERROR", /no such table: no_such_table/));
      await assert.rejects(db.execute("SELECT 1; SELECT 2"), libsqlError("SQL_MANY_STATEMENTS"));
      await assert.rejects(db.execute("  -- nothing\n"), libsqlError("SQL_NO_STATEMENT"));
      assert.equal(await scalar(db, "SELECT 40 + 2"), 42); // and lithd goes on
    });
  });

  describe("batch", () => {
    before(async () => {
      await db.execute("CREATE TABLE bt(k INTEGER PRIMARY KEY, v TEXT)");
    });
    const count = () => scalar(db, "SELECT count(*) FROM bt");

    for (const mode of ["write", "deferred"]) {
      it(`runs a "${mode}" batch as one transaction, each statement answered`, async () => {
        const base = mode === "write" ? 100 : 200;
        const rs = await db.batch([
          { sql: "INSERT INTO bt VALUES (?, ?)", args: [base + 1, "a"] },
          { sql: "INSERT INTO bt VALUES (?, ?)", args: [base + 2, "b"] },
          { sql: "UPDATE bt SET v = v || '!' WHERE k >= ?", args: [base] },
          { sql: "SELECT k, v FROM bt WHERE k >= ? AND k < ? ORDER BY k", args: [base, base + 100] },
        ], mode);
        assert.equal(rs.length, 4);
        assert.equal(rs[0].rowsAffected, 1);
        assert.equal(rs[1].lastInsertRowid, BigInt(base + 2));
        assert.equal(rs[2].rowsAffected, 2);
        assert.deepEqual(rowsOf(rs[3]), [[base + 1, "a!"], [base + 2, "b!"]]);
      });

      it(`leaves nothing of a "${mode}" batch whose third statement fails`, async () => {
        const before = await count();
        const err = await db.batch([
          "INSERT INTO bt VALUES (1, 'x')",
          "INSERT INTO bt VALUES (2, 'y')",
          "INSERT INTO bt VALUES (1, 'again')",
          "INSERT INTO bt VALUES (3, 'z')",
        ], mode).then(() => assert.fail("the batch succeeded"), (e) => e);
        assert.ok(err instanceof libsql.LibsqlBatchError, String(err));
        assert.ok(err instanceof libsql.LibsqlError);
        assert.equal(err.code, "SQLITE_CONSTRAINT");
        assert.equal(err.statementIndex, 2);
        assert.match(err.message, /UNIQUE constraint failed: bt\.k/);
        assert.equal(await count(), before);
        assert.equal(await scalar(db, "SELECT count(*) FROM bt WHERE k IN (1, 2, 3)"), 0);
      });
    }

    it('runs a "read" batch on one snapshot and refuses a write in it, keeping nothing', async () => {
      const n = await count();
      const rs = await db.batch(["SELECT count(*) FROM bt", "SELECT max(k) FROM bt"], "read");
      assert.deepEqual(rowsOf(rs[0]), [[n]]);
      assert.deepEqual(rowsOf(rs[1]), [[202]]);
      const err = await db.batch(["SELECT count(*) FROM bt", "INSERT INTO bt VALUES (9, 'no')"], "read")
        .then(() => assert.fail("a read batch wrote"), (e) => e);
      assert.ok(err instanceof libsql.LibsqlBatchError, String(err));
      assert.equal(err.code, "SQLITE_READONLY");
      assert.match(err.message, /a READONLY transaction/); // SQLite's words, not /v1/query's
      assert.equal(err.statementIndex, 1);
      assert.equal(await count(), n);
    });

    it("runs 100 concurrent batches of 3 writes: every one commits, the count is exact", async () => {
      await db.execute("CREATE TABLE conc(id INTEGER PRIMARY KEY, w INTEGER NOT NULL, j INTEGER NOT NULL, UNIQUE (w, j))");
      const wide = client(main, { concurrency: 100 });
      try {
        const results = await Promise.all(Array.from({ length: 100 }, (_, w) =>
          wide.batch([0, 1, 2].map((j) => ({ sql: "INSERT INTO conc(w, j) VALUES (?, ?)", args: [w, j] })), "write")));
        assert.equal(results.length, 100);
        for (const rs of results) assert.deepEqual(rs.map((r) => r.rowsAffected), [1, 1, 1]);
      } finally {
        wide.close();
      }
      assert.deepEqual(rowsOf(await db.execute("SELECT count(*), count(DISTINCT w), sum(w), sum(j) FROM conc")),
        [[300, 100, 3 * 4950, 100 * 3]]);
    });
  });

  describe("executeMultiple", () => {
    it("runs the statements in order, a ';' inside a string literal included", async () => {
      await db.executeMultiple(`
        CREATE TABLE seq(k INTEGER PRIMARY KEY, v TEXT);
        INSERT INTO seq VALUES (1, 'a;b');   -- a ';' in the literal
        INSERT INTO seq VALUES (2, 'it''s; fine');
        /* a comment; with a ';' */ INSERT INTO seq VALUES (3, ';');
        UPDATE seq SET v = v || '.' WHERE k = 3;
      `);
      assert.deepEqual(rowsOf(await db.execute("SELECT k, v FROM seq ORDER BY k")), [[1, "a;b"], [2, "it's; fine"], [3, ";."]]);
    });

    it("stops at the failing statement: those before it stay, those after never run", async () => {
      await assert.rejects(db.executeMultiple(
        "INSERT INTO seq VALUES (10, 'before'); INSERT INTO no_such VALUES (1); INSERT INTO seq VALUES (11, 'after');"),
      libsqlError("SQLITE_ERROR", /no such table: no_such/));
      assert.deepEqual(rowsOf(await db.execute("SELECT k FROM seq WHERE k >= 10")), [[10]]);
      await assert.rejects(db.executeMultiple("INSERT INTO seq VALUES (12, 'x'); INSERT INTO seq VALUES (12, 'dup'); INSERT INTO seq VALUES (13, 'y')"),
        libsqlError("SQLITE_CONSTRAINT"));
      assert.deepEqual(rowsOf(await db.execute("SELECT k FROM seq WHERE k >= 10 ORDER BY k")), [[10], [12]]);
    });
  });

  describe("migrate", () => {
    // migrate() sends "PRAGMA foreign_keys=off" before its BEGIN and "=on"
    // after, as steps of their own whose outcome it never awaits: a refusal
    // would reach the program only as unhandled rejections, which end a
    // Node program that has no handler. So it runs in a child node that
    // records them: there must be none.
    const CHILD = `
      const path = require("node:path");
      const { createClient } = require("node:module").createRequire(path.join(process.env.LITH_HRANA_MODULES, "x.js"))("@libsql/client");
      const out = { rejections: [] };
      process.on("unhandledRejection", (e) => out.rejections.push({ code: e && e.code, message: String(e && e.message) }));
      process.on("exit", () => process.stdout.write(JSON.stringify(out)));
      const db = createClient({ url: process.env.LITHD_URL });
      db.migrate(JSON.parse(process.env.STMTS)).then(
        (rs) => { out.rowsAffected = rs.map((r) => r.rowsAffected); },
        (e) => { out.error = { code: e.code, message: e.message, index: e.statementIndex }; });
    `;
    const migrate = (stmts) => new Promise((resolve, reject) => {
      execFile(process.execPath, ["-e", CHILD], {
        env: { ...process.env, LITHD_URL: main.url, STMTS: JSON.stringify(stmts) }, timeout: 30000,
      }, (err, stdout, stderr) => {
        if (err) reject(new Error(`the child failed: ${err.message}\n${stderr}`));
        else resolve(JSON.parse(stdout));
      });
    });
    // lithd runs migrate()'s PRAGMA foreign_keys as SQLite would on the
    // client's connection: off for the migration, lithd's setting after.
    const clearRefusals = (out) => {
      assert.deepEqual(out.rejections, []);
    };

    it("commits the migration, with no rejection of its PRAGMA foreign_keys", async () => {
      const out = await migrate(["CREATE TABLE mig(x INTEGER)", "INSERT INTO mig VALUES (1), (2)", "CREATE INDEX mig_x ON mig(x)"]);
      assert.equal(out.error, undefined, JSON.stringify(out.error));
      assert.deepEqual(out.rowsAffected, [0, 2, 0]);
      clearRefusals(out);
      assert.deepEqual(rowsOf(await db.execute("SELECT x FROM mig ORDER BY x")), [[1], [2]]);
      assert.equal(await scalar(db, "SELECT count(*) FROM sqlite_schema WHERE name = 'mig_x'"), 1);
      assert.equal(await scalar(db, "PRAGMA foreign_keys"), 1); // lithd's writer keeps its foreign keys on
    });

    it("rebuilds a parent table with foreign keys off: ON DELETE CASCADE does not empty its children", async () => {
      await db.batch(["CREATE TABLE mp(id INTEGER PRIMARY KEY)",
        "CREATE TABLE mc(id INTEGER PRIMARY KEY, p INTEGER REFERENCES mp(id) ON DELETE CASCADE)",
        "INSERT INTO mp VALUES (1), (2)", "INSERT INTO mc VALUES (10, 1), (20, 2)"], "write");
      const out = await migrate(["CREATE TABLE mp_new(id INTEGER PRIMARY KEY, name TEXT)",
        "INSERT INTO mp_new(id) SELECT id FROM mp", "DROP TABLE mp", "ALTER TABLE mp_new RENAME TO mp"]);
      assert.equal(out.error, undefined, JSON.stringify(out.error));
      clearRefusals(out);
      assert.deepEqual(rowsOf(await db.execute("SELECT id, p FROM mc ORDER BY id")), [[10, 1], [20, 2]]);
      // and enforced again for everyone after it
      await assert.rejects(db.execute("INSERT INTO mc VALUES (30, 99)"), libsqlError("SQLITE_CONSTRAINT"));
      assert.equal(await scalar(db, "PRAGMA foreign_keys"), 1);
    });

    it("leaves nothing of a migration whose statement fails", async () => {
      const out = await migrate(["CREATE TABLE mig2(x)", "INSERT INTO mig2 VALUES (1)", "INSERT INTO no_such VALUES (1)"]);
      assert.equal(out.error?.code, "SQLITE_ERROR", JSON.stringify(out));
      assert.equal(out.error.index, 2);
      assert.match(out.error.message, /no such table: no_such/);
      clearRefusals(out);
      assert.equal(await scalar(db, "SELECT count(*) FROM sqlite_schema WHERE name = 'mig2'"), 0);
    });
  });

  describe("migrations as Prisma and migration tools send them", () => {
    const seedParents = () => db.batch(["DROP TABLE IF EXISTS pr_post", "DROP TABLE IF EXISTS pr_user",
      "CREATE TABLE pr_user(id INTEGER PRIMARY KEY, email TEXT NOT NULL)",
      "CREATE TABLE pr_post(id INTEGER PRIMARY KEY, author INTEGER NOT NULL REFERENCES pr_user(id))",
      "INSERT INTO pr_user VALUES (1, 'a@x'), (2, 'b@x')", "INSERT INTO pr_post VALUES (10, 1), (20, 2)"], "write");
    const columns = async (t) => rowsOf(await db.execute(`SELECT name FROM pragma_table_info('${t}') ORDER BY cid`)).flat();

    it("redefines a parent table as Prisma's migration script does (executeMultiple)", async () => {
      await seedParents();
      await db.executeMultiple(`
        -- RedefineTables
        PRAGMA defer_foreign_keys=ON;
        PRAGMA foreign_keys=OFF;
        CREATE TABLE "new_pr_user" ("id" INTEGER NOT NULL PRIMARY KEY, "email" TEXT NOT NULL, "name" TEXT);
        INSERT INTO "new_pr_user" ("id", "email") SELECT "id", "email" FROM "pr_user";
        DROP TABLE "pr_user";
        ALTER TABLE "new_pr_user" RENAME TO "pr_user";
        PRAGMA foreign_keys=ON;
        PRAGMA defer_foreign_keys=OFF;`);
      assert.deepEqual(await columns("pr_user"), ["id", "email", "name"]);
      assert.deepEqual(rowsOf(await db.execute("SELECT p.id, u.email FROM pr_post p JOIN pr_user u ON u.id = p.author ORDER BY p.id")),
        [[10, "a@x"], [20, "b@x"]]);
      assert.equal(await scalar(db, "PRAGMA defer_foreign_keys"), 0);
      assert.equal(await scalar(db, "PRAGMA foreign_keys"), 1);
    });

    it("keeps defer_foreign_keys to the COMMIT of an interactive transaction", async () => {
      await seedParents();
      const tx = await db.transaction("write");
      try {
        await tx.execute("PRAGMA defer_foreign_keys = ON");
        await tx.execute("CREATE TABLE new_pr_user(id INTEGER PRIMARY KEY, email TEXT NOT NULL, born INTEGER)");
        await tx.execute("INSERT INTO new_pr_user(id, email) SELECT id, email FROM pr_user");
        await tx.execute("DROP TABLE pr_user"); // its children's keys: deferred violations until the end
        await tx.execute("ALTER TABLE new_pr_user RENAME TO pr_user");
        assert.equal(await scalar(tx, "PRAGMA defer_foreign_keys"), 1);
        assert.deepEqual((await tx.execute("PRAGMA foreign_key_check")).rows, []);
        await tx.execute("PRAGMA defer_foreign_keys = OFF");
        await tx.commit();
      } finally {
        tx.close();
      }
      assert.deepEqual(await columns("pr_user"), ["id", "email", "born"]);
      assert.equal(await scalar(db, "PRAGMA defer_foreign_keys"), 0); // SQLite's COMMIT ends it
    });

    it("fails the commit whose OFF would forget a violation still there, and keeps nothing of it", async () => {
      await seedParents();
      await assert.rejects(db.batch(["PRAGMA defer_foreign_keys = ON", "INSERT INTO pr_post VALUES (30, 99)",
        "PRAGMA defer_foreign_keys = OFF"], "write"), libsqlError("SQLITE_CONSTRAINT", /defer_foreign_keys/));
      assert.equal(await scalar(db, "SELECT count(*) FROM pr_post WHERE id = 30"), 0);
    });

    it("sets PRAGMA user_version and reads it back", async () => {
      await db.execute("PRAGMA user_version = 3");
      assert.equal(await scalar(db, "PRAGMA user_version"), 3);
      await db.batch(["PRAGMA user_version = 4", "INSERT INTO no_such VALUES (1)"], "write").catch(() => {});
      assert.equal(await scalar(other, "PRAGMA user_version"), 3); // undone with its batch
    });

    it("VACUUM after deleting rows gives the file's pages back", async () => {
      await db.execute("CREATE TABLE vac(x)");
      await db.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000) " +
        "INSERT INTO vac SELECT randomblob(200) FROM n");
      await db.execute("DELETE FROM vac WHERE rowid % 4 <> 0");
      const before = await scalar(db, "PRAGMA page_count");
      await db.execute("VACUUM");
      const after = await scalar(db, "PRAGMA page_count");
      assert.ok(after < before / 2, `page_count ${before}, then ${after}`);
      assert.equal(await scalar(other, "SELECT count(*) FROM vac"), 5000);
      await db.execute("DROP TABLE vac");
    });

    it("refuses VACUUM INTO, and VACUUM inside a transaction as SQLite does", async () => {
      await assert.rejects(db.execute("VACUUM INTO 'copy.db'"), libsqlError("SQLITE_AUTH", /VACUUM INTO/));
      const tx = await db.transaction("write");
      try {
        await assert.rejects(tx.execute("VACUUM"), libsqlError("SQLITE_ERROR", /cannot VACUUM from within a transaction/));
        await tx.execute("PRAGMA user_version = 5"); // the transaction goes on
        await tx.commit();
      } finally {
        tx.close();
      }
      assert.equal(await scalar(db, "PRAGMA user_version"), 5);
    });
  });

  describe("interactive transactions", () => {
    before(async () => {
      await db.execute("CREATE TABLE tx(k TEXT PRIMARY KEY, v)");
    });
    const has = async (k, c = db) => (await scalar(c, "SELECT count(*) FROM tx WHERE k = ?", [k])) === 1;

    it("commits: invisible to others while open, visible after", async () => {
      const tx = await db.transaction("write");
      try {
        const r = await tx.execute({ sql: "INSERT INTO tx VALUES (?, ?)", args: ["c1", 1] });
        assert.equal(r.rowsAffected, 1);
        await tx.batch(["INSERT INTO tx VALUES ('c2', 2)", "UPDATE tx SET v = v * 10 WHERE k IN ('c1', 'c2')"]);
        assert.deepEqual(rowsOf(await tx.execute("SELECT k, v FROM tx WHERE k LIKE 'c%' ORDER BY k")), [["c1", 10], ["c2", 20]]);
        assert.equal(await has("c1", other), false); // readers see the last commit
        await tx.commit();
      } finally {
        tx.close();
      }
      assert.equal(tx.closed, true);
      assert.deepEqual(rowsOf(await other.execute("SELECT k, v FROM tx WHERE k LIKE 'c%' ORDER BY k")), [["c1", 10], ["c2", 20]]);
    });

    it("rolls back: nothing of it stays", async () => {
      const tx = await db.transaction("write");
      await tx.execute("INSERT INTO tx VALUES ('r1', 1)");
      await tx.execute("DELETE FROM tx WHERE k = 'c1'");
      assert.equal(await has("r1", tx), true);
      await tx.rollback();
      assert.equal(await has("r1"), false);
      assert.equal(await has("c1"), true);
    });

    it("rolls back what close() leaves uncommitted, and frees the writer", async () => {
      const tx = await db.transaction("write");
      await tx.execute("INSERT INTO tx VALUES ('closed', 1)");
      tx.close();
      const w = other.execute("INSERT INTO tx VALUES ('after-close', 1)");
      assert.equal(await h.within(w, PROMPT_MS), "done", "a write waited after close()");
      await w;
      assert.equal(await has("closed"), false);
      assert.equal(await has("after-close"), true);
    });

    it("undoes a failing statement alone: the transaction goes on and commits the rest", async () => {
      const tx = await db.transaction("write");
      try {
        await tx.execute("INSERT INTO tx VALUES ('ok1', 1)");
        await assert.rejects(tx.execute("INSERT INTO tx VALUES ('ok1', 2)"), libsqlError("SQLITE_CONSTRAINT"));
        await tx.execute("INSERT INTO tx VALUES ('ok2', 2)");
        await tx.commit();
      } finally {
        tx.close();
      }
      assert.deepEqual(rowsOf(await db.execute("SELECT k, v FROM tx WHERE k LIKE 'ok%' ORDER BY k")), [["ok1", 1], ["ok2", 2]]);
    });

    it("makes another client's write wait while it is open, then lets it succeed after COMMIT", async () => {
      const tx = await db.transaction("write");
      let settled = false;
      let w;
      try {
        await tx.execute("INSERT INTO tx VALUES ('holder', 1)");
        // it runs after the commit, so it sees 'holder'
        w = other.execute("INSERT INTO tx SELECT 'waiter', count(*) FROM tx WHERE k = 'holder'");
        w.then(() => (settled = true), () => (settled = true));
        for (let i = 0; i < 10; i++) await tx.execute("SELECT count(*) FROM tx");
        assert.equal(settled, false, "another write ran inside an open write transaction");
        await tx.commit();
      } finally {
        tx.close();
      }
      const r = await w;
      assert.equal(r.rowsAffected, 1);
      assert.deepEqual(rowsOf(await db.execute("SELECT v FROM tx WHERE k = 'waiter'")), [[1]]);
    });

    it("rolls back to a SAVEPOINT inside it, keeping what came before", async () => {
      const tx = await db.transaction("write");
      try {
        await tx.execute("INSERT INTO tx VALUES ('sp-before', 1)");
        await tx.execute("SAVEPOINT s1");
        await tx.execute("INSERT INTO tx VALUES ('sp-inside', 1)");
        await tx.execute("ROLLBACK TO SAVEPOINT s1");
        await tx.execute("RELEASE SAVEPOINT s1");
        await tx.commit();
      } finally {
        tx.close();
      }
      assert.equal(await has("sp-before"), true);
      assert.equal(await has("sp-inside"), false, "ROLLBACK TO kept the row inserted after its SAVEPOINT");
    });

    describe("bounded by --tx-idle-ms and --tx-max-ms", () => {
      let s; // clients of the short lithd
      let s2;
      before(async () => {
        s = client(short);
        s2 = client(short);
        await s.execute("CREATE TABLE b(k TEXT PRIMARY KEY)");
      });
      after(() => {
        s.close();
        s2.close();
      });
      const hasB = async (k) => (await scalar(s, "SELECT count(*) FROM b WHERE k = ?", [k])) === 1;

      it("rolls back a transaction idle past --tx-idle-ms: its next statement gets TRANSACTION_TIMEOUT, others write on", async () => {
        const tx = await s.transaction("write");
        try {
          await tx.execute("INSERT INTO b VALUES ('idle')");
          const t0 = performance.now();
          // waits for the writer, which lithd frees when the transaction times out
          await s2.execute("INSERT INTO b VALUES ('next-writer')");
          const waited = performance.now() - t0;
          assert.ok(waited >= TX_IDLE_MS * 0.8, `the other write waited only ${waited} ms`);
          assert.ok(waited < TX_IDLE_MS + 3000, `the other write waited ${waited} ms`);
          await assert.rejects(tx.execute("SELECT 1"), libsqlError("TRANSACTION_TIMEOUT"));
        } finally {
          tx.close();
        }
        assert.equal(await hasB("idle"), false);
        assert.equal(await hasB("next-writer"), true);
      });

      it("keeps a transaction idle past --tx-idle-ms while no one else wants the writer: it commits", async () => {
        const tx = await s.transaction("write");
        try {
          await tx.execute("INSERT INTO b VALUES ('alone')");
          await new Promise((r) => setTimeout(r, TX_IDLE_MS * 2.5)); // inside --tx-max-ms
          await tx.commit();
        } finally {
          tx.close();
        }
        assert.equal(await hasB("alone"), true);
      });

      it("rolls back an idle transaction once another writer comes: the client's next statement gets the error, once", async () => {
        const tx = await s.transaction("write");
        try {
          await tx.execute("INSERT INTO b VALUES ('idle-then-wanted')");
          await new Promise((r) => setTimeout(r, TX_IDLE_MS * 2)); // idle, nobody waiting: still open
          const t0 = performance.now();
          await s2.execute("INSERT INTO b VALUES ('the-waiter')");
          const waited = performance.now() - t0;
          assert.ok(waited < 1000, `the other write waited ${waited} ms for an idle transaction`);
          await assert.rejects(tx.execute("SELECT 1"), libsqlError("TRANSACTION_TIMEOUT", /--tx-idle-ms/));
          // once: the stream is in autocommit after it, as on sqld
          assert.equal(Number(await scalar(tx, "SELECT count(*) FROM b WHERE k = 'the-waiter'")), 1);
        } finally {
          tx.close();
        }
        assert.equal(await hasB("idle-then-wanted"), false);
        assert.equal(await hasB("the-waiter"), true);
      });

      it("rolls back a busy transaction open past --tx-max-ms", async () => {
        const t0 = performance.now();
        const tx = await s.transaction("write");
        let err;
        try {
          await tx.execute("INSERT INTO b VALUES ('long')");
          for (let i = 0; i < 100000 && !err; i++) await tx.execute("SELECT count(*) FROM b").catch((e) => (err = e));
        } finally {
          tx.close();
        }
        const open = performance.now() - t0;
        assert.ok(err, "the transaction was never cut");
        libsqlError("TRANSACTION_TIMEOUT")(err);
        assert.ok(open >= TX_MAX_MS - 50 && open < TX_MAX_MS + 3000, `cut after ${open} ms`);
        assert.equal(await hasB("long"), false);
        await s2.execute("INSERT INTO b VALUES ('after-long')");
        assert.equal(await hasB("after-long"), true);
      });

      it("frees the writer from a stream that opens a write transaction and never comes back", async () => {
        const [st, j] = await h.pipeline(short.url, { baton: null, requests: [h.stmt("BEGIN"), h.stmt("INSERT INTO b VALUES ('abandoned')")] });
        assert.equal(st, 200);
        assert.equal(typeof j.baton, "string");
        assert.deepEqual(j.results.map((r) => r.type), ["ok", "ok"]);
        const t0 = performance.now();
        await s2.execute("INSERT INTO b VALUES ('after-abandoned')");
        const waited = performance.now() - t0;
        assert.ok(waited < TX_IDLE_MS + 3000, `the writer came back after ${waited} ms`);
        assert.equal(await hasB("abandoned"), false);
        assert.equal(await hasB("after-abandoned"), true);
        // its baton now names a transaction that is gone
        const [st2, j2] = await h.pipeline(short.url, { baton: j.baton, requests: [h.stmt("COMMIT"), { type: "close" }] });
        assert.equal(st2, 200);
        assert.equal(j2.results[0].type, "error");
        assert.equal(j2.results[0].error.code, "TRANSACTION_TIMEOUT");
        assert.equal(await hasB("abandoned"), false);
      });
    });
  });

  // Written to the specification of deferred and read transactions that
  // start on a read snapshot and do not take the writer until they write
  // (being built): these fail while every transaction holds the writer.
  describe("deferred and read transactions", () => {
    before(async () => {
      await db.execute("CREATE TABLE dr(k TEXT PRIMARY KEY)");
      await db.execute("INSERT INTO dr VALUES ('seed')");
    });
    const hasDr = async (k) => (await scalar(db, "SELECT count(*) FROM dr WHERE k = ?", [k])) === 1;

    for (const mode of ["read", "deferred"]) {
      it(`a "${mode}" transaction that reads does not hold the writer, and keeps its snapshot`, async () => {
        const tx = await db.transaction(mode);
        let w;
        try {
          const first = await scalar(tx, "SELECT count(*) FROM dr");
          w = other.execute({ sql: "INSERT INTO dr VALUES (?)", args: [`during-${mode}`] });
          assert.equal(await h.within(w, PROMPT_MS), "done", `another write waited for a "${mode}" transaction`);
          await w;
          assert.equal(await hasDr(`during-${mode}`), true);
          assert.equal(await scalar(tx, "SELECT count(*) FROM dr"), first, "the transaction saw a later commit");
          assert.equal(await scalar(tx, "SELECT count(*) FROM dr WHERE k = ?", [`during-${mode}`]), 0);
          await tx.commit();
        } finally {
          tx.close();
          await w?.catch(() => {});
        }
      });
    }

    it('commits a "deferred" transaction that reads, then writes, with no commit by anyone between', async () => {
      const tx = await db.transaction("deferred");
      try {
        const n = await scalar(tx, "SELECT count(*) FROM dr");
        await tx.execute({ sql: "INSERT INTO dr VALUES (?)", args: [`deferred-${n}`] });
        await tx.commit();
        assert.equal(await hasDr(`deferred-${n}`), true);
      } finally {
        tx.close();
      }
    });

    it('rejects with SQLITE_BUSY a "deferred" write after another client committed since its read, keeping nothing', async () => {
      const tx = await db.transaction("deferred");
      let w;
      try {
        await scalar(tx, "SELECT count(*) FROM dr");
        w = other.execute("INSERT INTO dr VALUES ('committed-between')");
        assert.equal(await h.within(w, PROMPT_MS), "done", "another write waited for a deferred transaction that only read");
        await w;
        await assert.rejects(tx.execute("INSERT INTO dr VALUES ('stale-write')"), libsqlError("SQLITE_BUSY"));
        await tx.commit().catch(() => {}); // whatever is left of it
      } finally {
        tx.close();
        await w?.catch(() => {});
      }
      assert.equal(await hasDr("committed-between"), true);
      assert.equal(await hasDr("stale-write"), false);
    });

    it('refuses a write in a "read" transaction with SQLITE_READONLY, and the transaction reads on', async () => {
      const tx = await db.transaction("read");
      try {
        const n = await scalar(tx, "SELECT count(*) FROM dr");
        await assert.rejects(tx.execute("INSERT INTO dr VALUES ('from-read')"), libsqlError("SQLITE_READONLY"));
        await assert.rejects(tx.execute("DELETE FROM dr"), libsqlError("SQLITE_READONLY"));
        assert.equal(await scalar(tx, "SELECT count(*) FROM dr"), n);
        await tx.commit();
      } finally {
        tx.close();
      }
      assert.equal(await hasDr("from-read"), false);
      assert.equal(await hasDr("seed"), true);
    });
  });

  describe("hostile clients", () => {
    const open = async (requests = []) => {
      const [st, j] = await h.pipeline(main.url, { baton: null, requests });
      assert.equal(st, 200, JSON.stringify(j));
      assert.equal(typeof j.baton, "string");
      return j;
    };
    const closeStream = async (baton) => {
      const [st, j] = await h.pipeline(main.url, { baton, requests: [{ type: "close" }] });
      assert.equal(st, 200, JSON.stringify(j));
      assert.equal(j.baton, null);
    };
    const value = (j, i = 0) => j.results[i].response.result.rows[0][0].value;

    it("refuses forged batons with an HTTP error, and the real stream goes on", async () => {
      const j = await open([h.stmt("SELECT 1")]);
      const [slot, gen] = j.baton.split(".");
      const forged = [
        "garbage", "", "0000.00000001", `${slot}.${gen}.${"g".repeat(32)}`, "ffff.00000001." + "0".repeat(32),
        `${slot}.${gen}.${crypto.randomBytes(16).toString("hex")}`, // the live stream's slot, a guessed secret
        `${slot}.${(parseInt(gen, 16) + 1).toString(16).padStart(8, "0")}.${j.baton.split(".")[2]}`, // a later generation
        j.baton + "00",
      ];
      for (const baton of forged) {
        const [st, e] = await h.pipeline(main.url, { baton, requests: [h.stmt("SELECT 666")] });
        assert.equal(st, 400, `${baton}: ${JSON.stringify(e)}`);
        assert.ok(["STREAM_INVALID", "STREAM_EXPIRED"].includes(e.code), `${baton}: ${JSON.stringify(e)}`);
        assert.equal(typeof e.message, "string");
      }
      const [st, again] = await h.pipeline(main.url, { baton: j.baton, requests: [h.stmt("SELECT 2")] });
      assert.equal(st, 200);
      assert.equal(value(again), "2");
      await closeStream(again.baton);
    });

    it("refuses a stale baton (already answered) and a closed stream's, and the stream goes on", async () => {
      const j1 = await open([h.stmt("SELECT 1")]);
      const [, j2] = await h.pipeline(main.url, { baton: j1.baton, requests: [h.stmt("SELECT 2")] });
      assert.notEqual(j2.baton, j1.baton);
      const [st, e] = await h.pipeline(main.url, { baton: j1.baton, requests: [h.stmt("SELECT 3")] });
      assert.equal(st, 400);
      assert.equal(e.code, "STREAM_EXPIRED");
      const [st3, j3] = await h.pipeline(main.url, { baton: j2.baton, requests: [h.stmt("SELECT 4")] });
      assert.equal(st3, 200);
      assert.equal(value(j3), "4");
      await closeStream(j3.baton);
      const [st4, e4] = await h.pipeline(main.url, { baton: j3.baton, requests: [h.stmt("SELECT 5")] });
      assert.equal(st4, 400);
      assert.equal(e4.code, "STREAM_EXPIRED");
      assert.equal(await scalar(db, "SELECT 6"), 6);
    });

    it("refuses bodies that are no pipeline, and serves the next one", async () => {
      for (const body of ["not json", "[]", '{"baton": 5, "requests": []}', '{"baton": null, "requests": {}}', "{"]) {
        const [st, e] = await h.pipeline(main.url, body);
        assert.ok(st >= 400 && st < 500, `${body}: ${st}`);
        assert.equal(typeof e.code, "string", body);
      }
      const [st, j] = await h.pipeline(main.url, { baton: null, requests: [{ type: "nonsense" }, h.stmt("SELECT 7"), { type: "close" }] });
      assert.equal(st, 200);
      assert.equal(j.results[0].type, "error");
      assert.equal(value(j, 1), "7");
    });

    it("refuses stored SQL past the per-stream bounds cleanly, and the stream goes on", async () => {
      const j = await open();
      let baton = j.baton;
      const send = async (requests) => {
        const [st, r] = await h.pipeline(main.url, { baton, requests });
        assert.equal(st, 200, JSON.stringify(r).slice(0, 500));
        baton = r.baton;
        return r.results;
      };
      // one text over --max-sql (100000 bytes)
      const [tooLong] = await send([{ type: "store_sql", sql_id: 1, sql: `SELECT '${"x".repeat(100000)}'` }]);
      assert.equal(tooLong.type, "error");
      assert.equal(tooLong.error.code, "REQUEST_TOO_LARGE");
      // 256 texts, then one more
      const many = [];
      for (let i = 0; i < 257; i++) many.push({ type: "store_sql", sql_id: i, sql: `SELECT ${i}` });
      const stored = await send(many);
      assert.ok(stored.slice(0, 256).every((r) => r.type === "ok"));
      assert.equal(stored[256].type, "error");
      assert.equal(stored[256].error.code, "SQL_STORE_TOO_MANY");
      // close_sql makes room; the stored texts run
      const [closed, again, run] = await send([{ type: "close_sql", sql_id: 0 }, { type: "store_sql", sql_id: 1000, sql: "SELECT 'room'" },
        { type: "execute", stmt: { sql_id: 1000 } }]);
      assert.deepEqual([closed.type, again.type, run.type], ["ok", "ok", "ok"]);
      assert.equal(run.response.result.rows[0][0].value, "room");
      await closeStream(baton);
      // past 4 MiB in all, in texts each under --max-sql
      const fat = `SELECT '${"y".repeat(99990)}'`;
      const [st, r] = await h.pipeline(main.url, { baton: null,
        requests: [...Array.from({ length: 43 }, (_, i) => ({ type: "store_sql", sql_id: i, sql: fat })), h.stmt("SELECT 'still here'"), { type: "close" }] });
      assert.equal(st, 200);
      const codes = r.results.slice(0, 43).map((x) => (x.type === "ok" ? "ok" : x.error.code));
      assert.equal(codes.filter((c) => c === "ok").length, Math.floor((4 << 20) / fat.length));
      assert.ok(codes.slice(codes.indexOf("SQL_STORE_TOO_LARGE")).every((c) => c === "SQL_STORE_TOO_LARGE"), codes.join());
      assert.equal(value(r, 43), "still here");
    });

    it("answers 10,000 one-shot streams, 32 at a time, and a new stream still works", async () => {
      const poster = h.httpPoster(main.url, 32);
      let next = 0;
      let answered = 0;
      const bad = [];
      try {
        await Promise.all(Array.from({ length: 32 }, async () => {
          while (next < 10000) {
            const i = next++;
            const [st, j] = await poster.post({ baton: null,
              requests: [h.stmt("SELECT ?", [{ type: "integer", value: String(i) }]), { type: "close" }] });
            if (st === 200 && j.baton === null && j.results[0].type === "ok" && value(j) === String(i) && j.results[1].type === "ok")
              answered++;
            else if (bad.length < 5) bad.push([i, st, j]);
          }
        }));
      } finally {
        poster.close();
      }
      assert.deepEqual(bad, []);
      assert.equal(answered, 10000);
      // a stream that stays open takes a slot: there is one
      const j = await open([h.stmt("SELECT 'kept'")]);
      assert.equal(value(j), "kept");
      await closeStream(j.baton);
      const tx = await db.transaction("write");
      await tx.execute("INSERT INTO tx VALUES ('after-10000', 1)");
      await tx.commit();
      assert.equal(await scalar(db, "SELECT count(*) FROM tx WHERE k = 'after-10000'"), 1);
    });

    // one address holds at most 256 of the table's 1024: past that, its own
    // stream idle the longest is closed for the new one (test_lithd_streams
    // test_fair_streams: which one, others' untouched, and the refusal when
    // each holds a transaction), so a client that never closes goes on
    it("serves streams past one address's 256, closing its idle ones for them, and one-shot pipelines", async () => {
      const batons = [];
      const poster = h.httpPoster(main.url, 16);
      try {
        while (batons.length < 256 + 32) {
          const opened = await Promise.all(Array.from({ length: 16 }, () => poster.post({ baton: null, requests: [] })));
          for (const [st, j] of opened) {
            if (st === 200) batons.push(j.baton);
            else assert.fail(`${st}: ${JSON.stringify(j)}`);
          }
        }
        // pipelines that end with close take no slot
        assert.equal(await scalar(db, "SELECT 'one-shot'"), "one-shot");
        // 256 are open; the 32 idle the longest were closed for the last 32
        let closed = 0, expired = 0;
        for (let i = 0; i < batons.length; i += 16) {
          const answers = await Promise.all(batons.slice(i, i + 16).map((baton) => poster.post({ baton, requests: [{ type: "close" }] })));
          for (const [st, j] of answers) {
            if (st === 200) closed++;
            else if (st === 400 && j.code === "STREAM_EXPIRED") expired++;
            else assert.fail(`${st}: ${JSON.stringify(j)}`);
          }
        }
        assert.deepEqual([closed, expired], [256, 32]);
      } finally {
        poster.close();
      }
      const j = await open([h.stmt("SELECT 'open again'")]);
      assert.equal(value(j), "open again");
      await closeStream(j.baton);
    });
  });
});
