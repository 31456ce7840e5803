// Drizzle ORM (drizzle-orm/libsql, on @libsql/client) against a real lithd
// (node --test). LITHD and LITH_HRANA_MODULES as for client.test.js; without
// them the tests are skipped. The first test runs the Drizzle program of
// docs/hrana.md ("Drizzle"), read from the page, and checks what it prints.
"use strict";

const { after, before, describe, it } = require("node:test");
const assert = require("node:assert/strict");
const { execFile } = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");

const h = require("./harness.js");

const SKIP = h.skipReason();
const DOC = path.join(__dirname, "..", "..", "..", "..", "docs", "hrana.md");
const DOC_URL = "http://127.0.0.1:8765"; // the URL the page's program names

let server;
let libsql; // @libsql/client
let client; // its client, under Drizzle
let db; // drizzle(client)
let d; // { drizzle, sqliteTable, ... }
let authors;
let books;

// The code of an error out of Drizzle: its own (0.45 wraps a failed query in
// a DrizzleQueryError whose cause is the LibsqlError) or the client's.
const codeOf = (e) => e?.cause?.code ?? e?.code;
const messageOf = (e) => `${e?.message} / ${e?.cause?.message}`;

// The ```js block under "## Drizzle" in docs/hrana.md, and its //> lines.
function docProgram() {
  const text = fs.readFileSync(DOC, "utf8");
  const at = text.indexOf("\n## Drizzle\n");
  assert.ok(at >= 0, "docs/hrana.md has no \"## Drizzle\" section");
  const m = /\n```js\n([\s\S]*?)\n```\n/.exec(text.slice(at));
  assert.ok(m, "the Drizzle section has no ```js block");
  const code = m[1];
  const expected = code.split("\n").filter((l) => l.startsWith("//> ")).map((l) => l.slice(4));
  assert.ok(expected.length > 0, "the Drizzle program has no //> line to check");
  return { code, expected };
}

describe("Drizzle (drizzle-orm/libsql) against lithd", { skip: SKIP, timeout: 60000 }, () => {
  before(async () => {
    libsql = h.load("@libsql/client");
    d = {
      ...h.load("drizzle-orm"),
      ...h.load("drizzle-orm/sqlite-core"),
      drizzle: h.load("drizzle-orm/libsql").drizzle,
    };
    server = await h.startLithd();
    client = libsql.createClient({ url: server.url });
    db = d.drizzle(client);
    const { sqliteTable, integer, text, real } = d;
    authors = sqliteTable("authors", {
      id: integer("id").primaryKey(),
      name: text("name").notNull().unique(),
      born: integer("born"),
    });
    books = sqliteTable("books", {
      id: integer("id").primaryKey(),
      authorId: integer("author_id").notNull().references(() => authors.id),
      title: text("title").notNull(),
      price: real("price"),
    });
    const { sql } = d;
    await db.run(sql`CREATE TABLE authors(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, born INTEGER)`);
    await db.run(sql`CREATE TABLE books(id INTEGER PRIMARY KEY, author_id INTEGER NOT NULL REFERENCES authors(id),
      title TEXT NOT NULL, price REAL)`);
  });
  after(async () => {
    if (client) client.close();
    if (server) await server.stop();
  });

  const titles = async () => (await db.select({ t: books.title }).from(books).orderBy(books.id)).map((r) => r.t);
  const names = async () => (await db.select({ n: authors.name }).from(authors).orderBy(authors.id)).map((r) => r.n);

  it("runs the program of docs/hrana.md and prints its //> lines", async () => {
    const { code, expected } = docProgram();
    assert.equal(code.split(DOC_URL).length, 2, `the program names ${DOC_URL} once`);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lith-drizzle-doc-"));
    try {
      // an ES module resolves its imports from node_modules beside it
      fs.symlinkSync(path.resolve(h.MODULES), path.join(dir, "node_modules"), "dir");
      fs.writeFileSync(path.join(dir, "example.mjs"), code.replace(DOC_URL, server.url));
      const stdout = await new Promise((resolve, reject) =>
        execFile(process.execPath, ["example.mjs"], { cwd: dir, timeout: 30000 }, (err, out, errout) =>
          err ? reject(new Error(`the program failed: ${err.message}\n${errout}`)) : resolve(out)));
      assert.deepEqual(stdout.trimEnd().split("\n"), expected);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
    // and it left what it printed
    assert.deepEqual((await client.execute("SELECT id, body FROM notes ORDER BY id")).rows.map((r) => Array.from(r)),
      [[1, "hello, lithd"], [2, "second"]]);
  });

  it("inserts, selects, updates and deletes with the query builder", async () => {
    const { eq, and, gt, count, desc, sql } = d;
    const inserted = await db.insert(authors).values([{ name: "Ursula", born: 1929 }, { name: "Stanisław", born: 1921 }])
      .returning();
    assert.deepEqual(inserted, [{ id: 1, name: "Ursula", born: 1929 }, { id: 2, name: "Stanisław", born: 1921 }]);
    const r = await db.insert(books).values([
      { authorId: 1, title: "The Dispossessed", price: 9.5 },
      { authorId: 1, title: "The Left Hand of Darkness", price: 8.25 },
      { authorId: 2, title: "Solaris", price: 7 },
    ]);
    assert.equal(r.rowsAffected, 3);
    assert.equal(r.lastInsertRowid, 3n);

    const byUrsula = await db.select({ title: books.title, author: authors.name }).from(books)
      .innerJoin(authors, eq(books.authorId, authors.id))
      .where(and(eq(authors.name, "Ursula"), gt(books.price, 9)));
    assert.deepEqual(byUrsula, [{ title: "The Dispossessed", author: "Ursula" }]);
    const perAuthor = await db.select({ name: authors.name, n: count(books.id) }).from(authors)
      .leftJoin(books, eq(books.authorId, authors.id)).groupBy(authors.id).orderBy(desc(count(books.id)));
    assert.deepEqual(perAuthor, [{ name: "Ursula", n: 2 }, { name: "Stanisław", n: 1 }]);
    assert.deepEqual(await db.select().from(authors).where(eq(authors.id, 2)).get(),
      { id: 2, name: "Stanisław", born: 1921 });

    const updated = await db.update(books).set({ price: sql`${books.price} * 2` }).where(eq(books.authorId, 1))
      .returning({ title: books.title, price: books.price });
    assert.deepEqual(updated.sort((a, b) => a.price - b.price),
      [{ title: "The Left Hand of Darkness", price: 16.5 }, { title: "The Dispossessed", price: 19 }]);
    const deleted = await db.delete(books).where(eq(books.title, "Solaris")).returning({ id: books.id });
    assert.deepEqual(deleted, [{ id: 3 }]);
    assert.deepEqual(await titles(), ["The Dispossessed", "The Left Hand of Darkness"]);
    // the foreign key holds: lithd's writer has foreign_keys on
    const err = await db.insert(books).values({ authorId: 99, title: "Orphan" }).then(() => null, (e) => e);
    assert.ok(err, "a book of no author was inserted");
    assert.equal(codeOf(err), "SQLITE_CONSTRAINT", messageOf(err));
    assert.match(messageOf(err), /FOREIGN KEY constraint failed/);
  });

  it("commits a db.transaction, returning its callback's value", async () => {
    const { eq } = d;
    const id = await db.transaction(async (tx) => {
      const [a] = await tx.insert(authors).values({ name: "Octavia", born: 1947 }).returning({ id: authors.id });
      await tx.insert(books).values({ authorId: a.id, title: "Kindred" });
      await tx.update(authors).set({ born: 1947 }).where(eq(authors.id, a.id));
      // the transaction reads its own writes
      assert.deepEqual(await tx.select({ t: books.title }).from(books).where(eq(books.authorId, a.id)), [{ t: "Kindred" }]);
      return a.id;
    });
    assert.equal(id, 3);
    assert.deepEqual(await db.select({ t: books.title }).from(books).where(eq(books.authorId, id)), [{ t: "Kindred" }]);
  });

  it("leaves nothing of a db.transaction that throws, and rethrows its error", async () => {
    const before = [await names(), await titles()];
    const mine = new Error("changed my mind");
    await assert.rejects(db.transaction(async (tx) => {
      const [a] = await tx.insert(authors).values({ name: "Nobody" }).returning();
      await tx.insert(books).values({ authorId: a.id, title: "Unwritten" });
      await tx.delete(books).where(d.eq(books.title, "Kindred"));
      throw mine;
    }), (e) => e === mine);
    assert.deepEqual([await names(), await titles()], before);
    // tx.rollback() too
    await assert.rejects(db.transaction(async (tx) => {
      await tx.insert(authors).values({ name: "Rolled" });
      tx.rollback();
    }), (e) => e instanceof d.TransactionRollbackError);
    assert.deepEqual(await names(), before[0]);
  });

  // Drizzle nests with SAVEPOINT spN / RELEASE / ROLLBACK TO inside the
  // stream's interactive transaction.
  it("rolls back a nested tx.transaction alone while the outer one commits", async () => {
    const inner = new Error("inner fails");
    let nested;
    await db.transaction(async (tx) => {
      await tx.insert(authors).values({ name: "Outer" });
      // as a program would: the nested part may fail, the rest goes on
      nested = await tx.transaction(async (tx2) => {
        await tx2.insert(authors).values({ name: "Inner" });
        throw inner;
      }).then(() => null, (e) => e);
      await tx.insert(authors).values({ name: "Outer again" });
    });
    const got = await names();
    assert.ok(!got.includes("Inner"),
      `the nested transaction's insert was committed; the nested call failed with: ${messageOf(nested)}`);
    assert.equal(nested, inner, `the nested transaction failed with another error: ${messageOf(nested)}`);
    assert.ok(got.includes("Outer") && got.includes("Outer again"), got.join());
  });

  it("commits a nested tx.transaction that succeeds with the outer one", async () => {
    const v = await db.transaction(async (tx) => {
      await tx.insert(authors).values({ name: "Outer 2" });
      return tx.transaction(async (tx2) => {
        await tx2.insert(authors).values({ name: "Inner 2" });
        return "inner value";
      });
    }).catch((e) => e);
    // on success Drizzle runs RELEASE SAVEPOINT sp0; if that fails, ROLLBACK TO SAVEPOINT sp0
    assert.equal(v, "inner value", `the transaction failed: ${messageOf(v)}`);
    const got = await names();
    assert.ok(got.includes("Outer 2") && got.includes("Inner 2"), got.join());
  });

  it("runs db.batch as one transaction: every result, or nothing of it", async () => {
    const { eq } = d;
    const [ins, upd, sel] = await db.batch([
      db.insert(authors).values({ name: "Batch" }).returning({ id: authors.id }),
      db.update(authors).set({ born: 2000 }).where(eq(authors.name, "Batch")),
      db.select({ name: authors.name, born: authors.born }).from(authors).where(eq(authors.name, "Batch")),
    ]);
    assert.equal(ins.length, 1);
    assert.equal(typeof ins[0].id, "number");
    assert.equal(upd.rowsAffected, 1);
    assert.deepEqual(sel, [{ name: "Batch", born: 2000 }]);

    const before = [await names(), await titles()];
    const err = await db.batch([
      db.insert(authors).values({ name: "Batch 2" }),
      db.insert(books).values({ authorId: 1, title: "Batch book" }),
      db.insert(books).values({ authorId: 12345, title: "No author" }), // fails: the foreign key
    ]).then(() => null, (e) => e);
    assert.ok(err, "the batch succeeded");
    assert.equal(codeOf(err), "SQLITE_CONSTRAINT", messageOf(err));
    assert.deepEqual([await names(), await titles()], before);
  });
});
