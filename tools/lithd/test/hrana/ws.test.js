// The real libSQL client (@libsql/client) against a real lithd over Hrana
// over WebSocket: a ws:// URL (node --test; LITHD and LITH_HRANA_MODULES as
// for client.test.js). The same small app as over http://: create, insert
// with positional and named parameters, a constraint error, a transaction
// committed and one rolled back, a batch, executeMultiple; then what only a
// WebSocket has: the subprotocol chosen, the hello's token (--token), and
// a connection dropped inside a transaction letting the writer go.
"use strict";

const { after, before, describe, it } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");

const h = require("./harness.js");

const SKIP = h.skipReason();
const TOKEN = "ws-test-token";

let libsql; // @libsql/client
let open; // a lithd without a token
let locked; // a lithd with --token TOKEN
let db; // a ws:// client of open
let tokenFile; // locked's --token-file

const wsUrl = (server) => server.url.replace(/^http:/, "ws:");
const rowsOf = (rs) => rs.rows.map((r) => Array.from(r));
const libsqlError = (code, re) => (e) => {
  assert.ok(e instanceof libsql.LibsqlError, `not a LibsqlError: ${e && e.stack}`);
  assert.equal(e.code, code, e.message);
  if (re) assert.match(e.message, re);
  return true;
};

describe("@libsql/client over ws:// against lithd", { skip: SKIP, timeout: 60000 }, () => {
  before(async () => {
    libsql = h.load("@libsql/client");
    tokenFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "lith-ws-")), "token");
    fs.writeFileSync(tokenFile, TOKEN + "\n", { mode: 0o600 });
    [open, locked] = await Promise.all([
      h.startLithd(["--tx-idle-ms", "3000"]),
      h.startLithd(["--token-file", tokenFile]),
    ]);
    db = libsql.createClient({ url: wsUrl(open) });
  });
  after(async () => {
    if (db) db.close();
    const stops = [open, locked].filter(Boolean).map((s) => s.stop());
    if (tokenFile) fs.rmSync(path.dirname(tokenFile), { recursive: true, force: true });
    for (const r of await Promise.allSettled(stops)) if (r.status === "rejected") throw r.reason;
  });

  it("runs the small app: create, insert, a constraint error, select", async () => {
    assert.equal(db.protocol, "ws");
    await db.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT NOT NULL UNIQUE, n INTEGER)");
    let rs = await db.execute({ sql: "INSERT INTO notes(body, n) VALUES (?, ?)", args: ["first", 1] });
    assert.equal(rs.rowsAffected, 1);
    assert.equal(Number(rs.lastInsertRowid), 1);
    rs = await db.execute({ sql: "INSERT INTO notes(body, n) VALUES (:body, :n)", args: { body: "second", n: 2 } });
    assert.equal(Number(rs.lastInsertRowid), 2);
    await assert.rejects(
      db.execute({ sql: "INSERT INTO notes(body) VALUES (?)", args: ["first"] }),
      libsqlError("SQLITE_CONSTRAINT", /UNIQUE/),
    );
    rs = await db.execute("SELECT id, body, n FROM notes ORDER BY id");
    assert.deepEqual(rs.columns, ["id", "body", "n"]);
    assert.deepEqual(rowsOf(rs), [
      [1, "first", 1],
      [2, "second", 2],
    ]);
  });

  it("commits one transaction and rolls another back", async () => {
    const tx = await db.transaction("write");
    await tx.execute({ sql: "INSERT INTO notes(body) VALUES (?)", args: ["kept"] });
    assert.equal((await tx.execute("SELECT count(*) FROM notes")).rows[0][0], 3); // sees its own write
    await tx.commit();
    const tx2 = await db.transaction("write");
    await tx2.execute({ sql: "INSERT INTO notes(body) VALUES (?)", args: ["dropped"] });
    await tx2.rollback();
    const rs = await db.execute("SELECT body FROM notes ORDER BY id");
    assert.deepEqual(rowsOf(rs), [["first"], ["second"], ["kept"]]);
  });

  it("runs a batch (a hrana3 cursor) in one transaction, all or nothing", async () => {
    const rs = await db.batch(
      [
        { sql: "INSERT INTO notes(body) VALUES (?)", args: ["b1"] },
        { sql: "INSERT INTO notes(body) VALUES (?)", args: ["b2"] },
        "SELECT count(*) FROM notes",
      ],
      "write",
    );
    assert.equal(rs.length, 3);
    assert.equal(rs[2].rows[0][0], 5);
    await assert.rejects(
      db.batch(
        [
          { sql: "INSERT INTO notes(body) VALUES (?)", args: ["b3"] },
          { sql: "INSERT INTO notes(body) VALUES (?)", args: ["b1"] }, // UNIQUE
        ],
        "write",
      ),
      libsqlError("SQLITE_CONSTRAINT"),
    );
    assert.equal((await db.execute("SELECT count(*) FROM notes WHERE body = 'b3'")).rows[0][0], 0);
  });

  it("runs executeMultiple (a sequence) and many requests side by side", async () => {
    await db.executeMultiple("CREATE TABLE m(x); INSERT INTO m VALUES (1); INSERT INTO m VALUES (2);");
    const all = await Promise.all(
      Array.from({ length: 50 }, (_, i) => db.execute({ sql: "SELECT ? + (SELECT sum(x) FROM m)", args: [i] })),
    );
    all.forEach((rs, i) => assert.equal(rs.rows[0][0], i + 3));
  });

  it("a connection dropped inside a transaction lets the writer go at once", async () => {
    const c = libsql.createClient({ url: wsUrl(open) });
    const tx = await c.transaction("write");
    await tx.execute({ sql: "INSERT INTO notes(body) VALUES (?)", args: ["never"] });
    c.close(); // the WebSocket closes with the transaction open
    const t0 = Date.now();
    await db.execute({ sql: "INSERT INTO notes(body) VALUES (?)", args: ["after"] });
    assert.ok(Date.now() - t0 < 1500, `the writer was held ${Date.now() - t0} ms (--tx-idle-ms 3000)`);
    const rs = await db.execute("SELECT count(*) FROM notes WHERE body IN ('never', 'after')");
    assert.equal(rs.rows[0][0], 1);
  });

  it("takes the token in the hello, and refuses a wrong one", async () => {
    const good = libsql.createClient({ url: wsUrl(locked), authToken: TOKEN });
    assert.equal((await good.execute("SELECT 41 + 1")).rows[0][0], 42);
    good.close();
    const bad = libsql.createClient({ url: wsUrl(locked), authToken: "wrong" });
    await assert.rejects(bad.execute("SELECT 1"), (e) => {
      assert.ok(e instanceof libsql.LibsqlError, String(e));
      assert.match(e.message, /invalid token|AUTH_FAILED|authentication/i);
      return true;
    });
    bad.close();
    const none = libsql.createClient({ url: wsUrl(locked) });
    await assert.rejects(none.execute("SELECT 1"), /token is required|AUTH/);
    none.close();
  });
});
