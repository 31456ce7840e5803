// The other libSQL client families npm installs (issue 33), each running the
// same small app against a lithd of its own (node --test): create, insert
// with positional and named parameters, a constraint error, a transaction
// committed and one rolled back, a batch, a migration. Each sends what sqld
// takes and lithd once refused:
//   libsql (libsql-js 0.5: the Rust crate's remote mode)  no Content-Type;
//     its reads through /v3/cursor
//   @tursodatabase/serverless 1.4                        /v3/cursor
//   knex 3 + @libsql/knex-libsql 0.1 (hrana-client 0.4)  text/plain;charset=UTF-8
//     on /v2/pipeline; knex.migrate.latest
//   Kysely on @libsql/client (@libsql/kysely-libsql)     application/json
// (Prisma, its adapter and its CLI's migrations: prisma.test.js.)
// Each runs on both stores: a local file, and lithd --dqlite in front of one
// lith-node (skipped without lith-node). lithd's /metrics counts the answers
// per route: each family is seen using the routes it is said to. LITHD and
// LITH_HRANA_MODULES as for client.test.js; a family whose packages are not
// installed is skipped.
"use strict";

const { after, before, describe, it } = require("node:test");
const assert = require("node:assert/strict");

const h = require("./harness.js");

const { STORES, startOn, answered, missing } = h;

for (const [store, noStore] of STORES)
describe(`libsql (libsql-js) against lithd on ${store}`, { skip: missing("libsql") || noStore, timeout: 60000 }, () => {
  let lithd;
  let server;
  let db;
  before(async () => {
    lithd = await startOn(store);
    server = lithd.server;
    const Database = h.load("libsql");
    db = new Database(server.url);
  });
  after(async () => {
    db?.close();
    await lithd?.stop();
  });

  it("runs the app: no Content-Type, reads through /v3/cursor", async () => {
    // a migration: one script of several statements
    db.exec(`CREATE TABLE authors (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
             CREATE INDEX authors_name ON authors (name);
             CREATE TABLE meta (k TEXT PRIMARY KEY, v INTEGER)`);
    const ins = db.prepare("INSERT INTO authors (name) VALUES (?)").run("Ursula");
    assert.equal(ins.changes, 1);
    assert.equal(Number(ins.lastInsertRowid), 1);
    assert.equal(db.prepare("INSERT INTO authors (id, name) VALUES (?, ?)").run(7, "Terry").changes, 1);
    // named: libsql 0.5.29's remote mode sends an object's values as no
    // argument at all (the same against sqld): the statement fails whole
    assert.throws(() => db.prepare("INSERT INTO authors (name) VALUES (:name)").run({ name: "Iain" }),
      (e) => /ARGS_INVALID/.test(e.message));
    assert.throws(() => db.prepare("INSERT INTO authors (name) VALUES (?)").run("Ursula"),
      (e) => /SQLITE_CONSTRAINT/.test(e.message) && /UNIQUE constraint failed: authors.name/.test(e.message));
    const add = db.transaction((name) => db.prepare("INSERT INTO authors (name) VALUES (?)").run(name));
    add("Octavia");
    assert.throws(() => db.transaction(() => {
      db.prepare("INSERT INTO authors (name) VALUES (?)").run("Gone");
      throw new Error("changed my mind");
    })(), /changed my mind/);
    // a batch: one exec of several writes
    db.exec("INSERT INTO meta VALUES ('a', 1); INSERT INTO meta VALUES ('b', 2)");
    assert.deepEqual(db.prepare("SELECT name FROM authors ORDER BY id").all().map((r) => r.name),
      ["Ursula", "Terry", "Octavia"]);
    assert.equal(db.prepare("SELECT sum(v) AS s FROM meta").get().s, 3);
    assert.ok((await answered(server, "/v3/cursor")) > 0, "no read came through /v3/cursor");
  });
});

for (const [store, noStore] of STORES)
describe(`@tursodatabase/serverless against lithd on ${store}`, { skip: missing("@tursodatabase/serverless") || noStore, timeout: 60000 }, () => {
  let lithd;
  let server;
  let conn;
  before(async () => {
    lithd = await startOn(store);
    server = lithd.server;
    conn = h.load("@tursodatabase/serverless").connect({ url: server.url });
  });
  after(async () => {
    await conn?.close();
    await lithd?.stop();
  });

  it("runs the app through /v3/cursor", async () => {
    await conn.exec(`CREATE TABLE authors (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
                     CREATE TABLE meta (k TEXT PRIMARY KEY, v INTEGER)`);
    const ins = await conn.run("INSERT INTO authors (name) VALUES (?)", "Ursula");
    assert.equal(ins.changes, 1);
    assert.equal(Number(ins.lastInsertRowid), 1);
    await conn.run("INSERT INTO authors (name) VALUES (:name)", { name: "Terry" });
    await assert.rejects(conn.run("INSERT INTO authors (name) VALUES (?)", "Ursula"),
      (e) => e.code === "SQLITE_CONSTRAINT" && /UNIQUE constraint failed: authors.name/.test(e.message));
    await conn.transaction(async () => {
      await conn.run("INSERT INTO authors (name) VALUES (?)", "Octavia");
    })();
    await assert.rejects(conn.transaction(async () => {
      await conn.run("INSERT INTO authors (name) VALUES (?)", "Gone");
      throw new Error("changed my mind");
    })(), /changed my mind/);
    const b = await conn.batch(["INSERT INTO meta VALUES ('a', 1)", "INSERT INTO meta VALUES ('b', 2)"]);
    assert.equal(b.length, 2);
    // a migration: a column added, its rows filled
    await conn.exec("ALTER TABLE authors ADD COLUMN born INTEGER; UPDATE authors SET born = 1929 WHERE id = 1");
    assert.deepEqual((await conn.all("SELECT name FROM authors ORDER BY id")).map((r) => r.name),
      ["Ursula", "Terry", "Octavia"]);
    assert.deepEqual(await conn.get("SELECT born FROM authors WHERE id = ?", 1), { born: 1929 });
    assert.equal((await conn.get("SELECT sum(v) AS s FROM meta")).s, 3);
    assert.ok((await answered(server, "/v3/cursor")) > 0, "nothing came through /v3/cursor");
  });
});

for (const [store, noStore] of STORES)
describe(`knex + @libsql/knex-libsql against lithd on ${store}`, { skip: missing("knex", "@libsql/knex-libsql") || noStore, timeout: 60000 }, () => {
  let lithd;
  let server;
  let knex;
  before(async () => {
    lithd = await startOn(store);
    server = lithd.server;
    knex = h.load("knex")({
      client: h.load("@libsql/knex-libsql"),
      connection: { filename: server.url },
      useNullAsDefault: true,
    });
  });
  after(async () => {
    await knex?.destroy();
    await lithd?.stop();
  });

  it("runs the app (text/plain on /v2/pipeline), migrate.latest included", async () => {
    // migrations as knex runs them: its lock and list tables, each in a transaction
    const migrations = {
      "001_authors": {
        up: (k) => k.schema.createTable("authors", (t) => {
          t.increments("id");
          t.string("name").notNullable().unique();
        }),
        down: (k) => k.schema.dropTable("authors"),
      },
      "002_meta": {
        up: (k) => k.schema.createTable("meta", (t) => {
          t.string("k").primary();
          t.integer("v");
        }),
        down: (k) => k.schema.dropTable("meta"),
      },
    };
    const migrationSource = {
      getMigrations: async () => Object.keys(migrations),
      getMigrationName: (m) => m,
      getMigration: async (m) => migrations[m],
    };
    const [batch, done] = await knex.migrate.latest({ migrationSource });
    assert.equal(batch, 1);
    assert.deepEqual(done, ["001_authors", "002_meta"]);
    assert.deepEqual(await knex.migrate.latest({ migrationSource }), [1, []]); // nothing left to run

    await knex("authors").insert({ name: "Ursula" });
    await knex.raw("INSERT INTO authors (name) VALUES (?)", ["Terry"]);
    await knex.raw("INSERT INTO authors (name) VALUES (:name)", { name: "Iain" });
    await assert.rejects(knex("authors").insert({ name: "Ursula" }),
      (e) => /SQLITE_CONSTRAINT/.test(`${e.code} ${e.message}`) && /UNIQUE/.test(e.message));
    await knex.transaction(async (trx) => {
      await trx("authors").insert({ name: "Octavia" });
    });
    await assert.rejects(knex.transaction(async (trx) => {
      await trx("authors").insert({ name: "Gone" });
      throw new Error("changed my mind");
    }), /changed my mind/);
    await knex("meta").insert([{ k: "a", v: 1 }, { k: "b", v: 2 }]); // one statement, many rows
    assert.deepEqual((await knex("authors").orderBy("id").select("name")).map((r) => r.name),
      ["Ursula", "Terry", "Iain", "Octavia"]);
    assert.equal((await knex("meta").sum({ s: "v" }))[0].s, 3);
    assert.ok((await answered(server, "/v2/pipeline")) > 0);
  });
});

for (const [store, noStore] of STORES)
describe(`Kysely (@libsql/kysely-libsql) against lithd on ${store}`, { skip: missing("kysely", "@libsql/kysely-libsql") || noStore, timeout: 60000 }, () => {
  let lithd;
  let server;
  let db;
  let k; // the kysely module
  before(async () => {
    lithd = await startOn(store);
    server = lithd.server;
    k = h.load("kysely");
    const { LibsqlDialect } = h.load("@libsql/kysely-libsql");
    db = new k.Kysely({ dialect: new LibsqlDialect({ url: server.url }) });
  });
  after(async () => {
    await db?.destroy();
    await lithd?.stop();
  });

  it("runs the app, its Migrator included", async () => {
    const migrator = new k.Migrator({
      db,
      provider: {
        getMigrations: async () => ({
          "001_authors": {
            up: (d) => d.schema.createTable("authors")
              .addColumn("id", "integer", (c) => c.primaryKey())
              .addColumn("name", "text", (c) => c.notNull().unique()).execute(),
          },
          "002_meta": {
            up: (d) => d.schema.createTable("meta").addColumn("k", "text", (c) => c.primaryKey())
              .addColumn("v", "integer").execute(),
          },
        }),
      },
    });
    const { error, results } = await migrator.migrateToLatest();
    assert.equal(error, undefined);
    assert.deepEqual(results.map((r) => `${r.migrationName} ${r.status}`), ["001_authors Success", "002_meta Success"]);

    await db.insertInto("authors").values({ name: "Ursula" }).execute();
    await k.sql`INSERT INTO authors (name) VALUES (${"Terry"})`.execute(db);
    await assert.rejects(db.insertInto("authors").values({ name: "Ursula" }).execute(),
      (e) => e.code === "SQLITE_CONSTRAINT" || /UNIQUE/.test(e.message));
    await db.transaction().execute((trx) => trx.insertInto("authors").values({ name: "Octavia" }).execute());
    await assert.rejects(db.transaction().execute(async (trx) => {
      await trx.insertInto("authors").values({ name: "Gone" }).execute();
      throw new Error("changed my mind");
    }), /changed my mind/);
    await db.insertInto("meta").values([{ k: "a", v: 1 }, { k: "b", v: 2 }]).execute();
    assert.deepEqual((await db.selectFrom("authors").select("name").orderBy("id").execute()).map((r) => r.name),
      ["Ursula", "Terry", "Octavia"]);
    const { s } = await db.selectFrom("meta").select((eb) => eb.fn.sum("v").as("s")).executeTakeFirstOrThrow();
    assert.equal(Number(s), 3);
  });
});
