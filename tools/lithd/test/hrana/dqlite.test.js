// The real @libsql/client and Drizzle transactions against lithd --dqlite
// (node --test): one lith-node (beside LITHD in the build tree, or
// LITH_NODE) and a lithd in front of it. client.transaction() and Drizzle's
// db.transaction() hold the cluster's writer across requests: committed,
// rolled back, a read-only one's write refused, a /v1/do write waiting
// behind one. Skipped without LITHD, the modules, or lith-node.
"use strict";

const { after, before, describe, it } = require("node:test");
const assert = require("node:assert/strict");
const { spawn } = require("node:child_process");
const fs = require("node:fs");
const net = require("node:net");
const os = require("node:os");
const path = require("node:path");

const h = require("./harness.js");

const NODE_BIN =
  process.env.LITH_NODE || (h.LITHD ? path.join(path.dirname(h.LITHD), "..", "lith-node", "lith-node") : "");
const SKIP = h.skipReason() || (fs.existsSync(NODE_BIN) ? false : `no lith-node at ${NODE_BIN}`);

// A free port on 127.0.0.1 (bound and released: the usual small race).
function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

// One lith-node bootstrapping a cluster of one; resolves once it serves.
async function startNode() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lith-node-"));
  const address = `127.0.0.1:${await freePort()}`;
  const proc = spawn(NODE_BIN, ["--id", "1", "--address", address, "--dir", dir, "--latency-ms", "20"], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let log = "";
  proc.stdout.setEncoding("utf8");
  proc.stderr.setEncoding("utf8");
  proc.stderr.on("data", (d) => (log += d));
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("lith-node did not serve in 15 s:\n" + log)), 15000);
    proc.stdout.on("data", (d) => {
      log += d;
      if (/serving on/.test(log)) {
        clearTimeout(timer);
        resolve();
      }
    });
    proc.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`lith-node exited ${code}:\n${log}`));
    });
  });
  return {
    address,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) {
        const exited = new Promise((r) => proc.once("exit", r));
        proc.kill("SIGTERM");
        await exited;
      }
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

describe("transactions on lithd --dqlite (@libsql/client, Drizzle)", { skip: SKIP, timeout: 60000 }, () => {
  let node, server, libsql, client, d, db, items;

  before(async () => {
    libsql = h.load("@libsql/client");
    d = {
      ...h.load("drizzle-orm"),
      ...h.load("drizzle-orm/sqlite-core"),
      drizzle: h.load("drizzle-orm/libsql").drizzle,
    };
    node = await startNode();
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
