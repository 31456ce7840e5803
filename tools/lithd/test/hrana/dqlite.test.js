// The real @libsql/client and Drizzle transactions against lithd --dqlite
// (node --test): one lith-node (beside LITHD in the build tree, or
// LITH_NODE) and a lithd in front of it. client.transaction() and Drizzle's
// db.transaction() hold the cluster's writer across requests: committed,
// rolled back, a read-only one's write refused, a /v1/do write waiting
// behind one. Skipped without LITHD, the modules, or lith-node.
"use strict";

const { after, before, describe, it } = require("node:test");
const assert = require("node:assert/strict");

const h = require("./harness.js");

const SKIP = h.skipReason() || h.noNode();

describe("transactions on lithd --dqlite (@libsql/client, Drizzle)", { skip: SKIP, timeout: 60000 }, () => {
  let node, server, libsql, client, d, db, items;

  before(async () => {
    libsql = h.load("@libsql/client");
    d = {
      ...h.load("drizzle-orm"),
      ...h.load("drizzle-orm/sqlite-core"),
      drizzle: h.load("drizzle-orm/libsql").drizzle,
    };
    node = await h.startNode();
    server = await h.startLithd(["--dqlite", node.address, "--dqlite-failover-ms", "3000"], { db: false });
    client = libsql.createClient({ url: server.url });
    await client.execute("CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)");
    db = d.drizzle(client);
    items = d.sqliteTable("items", { id: d.integer("id").primaryKey(), name: d.text("name").notNull() });
  });

  after(async () => {
    client?.close();
    await server?.stop();
    await node?.stop();
  });

  const count = async () => Number((await client.execute("SELECT count(*) AS n FROM items")).rows[0].n);

  it("client.transaction(): committed across requests, and one rolled back", async () => {
    const tx = await client.transaction("write");
    await tx.execute({ sql: "INSERT INTO items(name) VALUES (?)", args: ["a"] });
    const rs = await tx.execute("SELECT count(*) AS n FROM items");
    assert.equal(Number(rs.rows[0].n), 1);
    await tx.commit();
    const t2 = await client.transaction("write");
    await t2.execute({ sql: "INSERT INTO items(name) VALUES (?)", args: ["b"] });
    await t2.rollback();
    assert.equal(await count(), 1);
  });

  it("a constraint error inside leaves the transaction open; deferred begins too", async () => {
    const tx = await client.transaction("deferred");
    await assert.rejects(tx.execute({ sql: "INSERT INTO items(name) VALUES (?)", args: ["a"] }), (e) =>
      /SQLITE_CONSTRAINT/.test(e.code),
    );
    await tx.execute({ sql: "INSERT INTO items(name) VALUES (?)", args: ["c"] });
    await tx.commit();
    assert.equal(await count(), 2);
  });

  it("a read transaction's write is refused, SQLITE_READONLY", async () => {
    const tx = await client.transaction("read");
    assert.equal(Number((await tx.execute("SELECT count(*) AS n FROM items")).rows[0].n), 2);
    await assert.rejects(tx.execute("INSERT INTO items(name) VALUES ('r')"), (e) => /SQLITE_READONLY/.test(e.code));
    await tx.commit();
    assert.equal(await count(), 2);
  });

  it("Drizzle's db.transaction(): committed, and rolled back by tx.rollback()", async () => {
    await db.transaction(async (tx) => {
      await tx.insert(items).values({ name: "d1" });
      await tx.insert(items).values({ name: "d2" });
    });
    await assert.rejects(
      db.transaction(async (tx) => {
        await tx.insert(items).values({ name: "d3" });
        tx.rollback();
      }),
    );
    const names = (await db.select().from(items)).map((r) => r.name).sort();
    assert.deepEqual(names, ["a", "c", "d1", "d2"]);
  });

  it("a /v1/do write waits while a transaction holds the writer, then commits", async () => {
    const tx = await client.transaction("write");
    await tx.execute("INSERT INTO items(name) VALUES ('held')");
    let answered = false;
    const write = fetch(`${server.url}/v1/do`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ statements: [{ sql: "INSERT INTO items(name) VALUES ('waited')" }] }),
    }).then((r) => {
      answered = true;
      return r.status;
    });
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(answered, false, "the write did not wait for the transaction");
    await tx.commit();
    assert.equal(await write, 200);
    assert.equal(await count(), 6);
  });
});
