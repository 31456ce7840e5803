// Prisma against lithd (issue 33): Prisma 6 with its libSQL driver adapter
// (@prisma/adapter-libsql, on @libsql/client 0.8), the family's app as
// families.test.js runs it, and Prisma's migrations run by its own CLI
// (prisma migrate deploy) through the adapter, as prisma.config.js sets
// them up (engine "js": Prisma's schema engine in WebAssembly). The app,
// its schema and its migrations are in prisma/ beside this file.
//
// Everything runs from what npm installed (make deps-hrana, no install
// scripts), with no other network: prisma generate makes the client into a
// temporary directory (engineType "client": the query compiler in
// WebAssembly, no engine library), and the schema engine is the CLI's own
// WebAssembly build. Prisma 7 cannot do this: its CLI downloads a native
// schema engine before generate or migrate, and its migrations no longer
// go through an adapter (docs/hrana.md).
//
// The second migration is the one the issue is about: Prisma redefines a
// table to change a column's type, between PRAGMA defer_foreign_keys = ON,
// PRAGMA foreign_keys = OFF and their undoing, under rows that reference
// it. It runs with SQLite's meaning on both stores (on --dqlite the
// settings last the one request, on the cluster writer's connection, and
// are put back after it: foreign keys are enforced again). LITHD and
// LITH_HRANA_MODULES as for client.test.js.
"use strict";

const { after, before, describe, it } = require("node:test");
const assert = require("node:assert/strict");
const { spawn } = require("node:child_process");
const fs = require("node:fs");
const { createRequire } = require("node:module");
const os = require("node:os");
const path = require("node:path");

const h = require("./harness.js");

const { STORES, startOn, missing } = h;
const SKIP = missing("prisma", "@prisma/client", "@prisma/adapter-libsql");
const APP = path.join(__dirname, "prisma");
const FIRST = "20261207000000_init";
const REDEFINE = "20261207000001_born_a_year";

// prisma.config.js of the app: the adapter the CLI migrates through,
// lithd's URL from LITHD_URL. Node's own require (the config loader's is
// slower by a second).
const CONFIG = `const req = require("node:module").createRequire(__filename);
const { defineConfig } = req("prisma/config");
const { PrismaLibSQL } = req("@prisma/adapter-libsql");
module.exports = defineConfig({
  experimental: { adapter: true },
  engine: "js",
  schema: "prisma/schema.prisma",
  adapter: async () => new PrismaLibSQL({ url: process.env.LITHD_URL }),
});
`;

// The app in a directory of its own: the schema, prisma.config.js, the
// migrations named (more are added as the test goes), and node_modules
// (LITH_HRANA_MODULES): what prisma generate and the config find first.
function appDir(migrations) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lith-prisma-"));
  fs.symlinkSync(h.MODULES, path.join(dir, "node_modules"), "dir");
  fs.mkdirSync(path.join(dir, "prisma", "migrations"), { recursive: true });
  fs.copyFileSync(path.join(APP, "schema.prisma"), path.join(dir, "prisma", "schema.prisma"));
  fs.writeFileSync(path.join(dir, "prisma.config.js"), CONFIG);
  addMigrations(dir, ["migration_lock.toml", ...migrations]);
  return dir;
}

function addMigrations(dir, names) {
  for (const m of names)
    fs.cpSync(path.join(APP, "migrations", m), path.join(dir, "prisma", "migrations", m), { recursive: true });
}

// Prisma's CLI in dir, against lithd at url: { code, out } (stdout and
// stderr together). Nothing of Prisma's reaches the network: no update
// check, no telemetry.
function prisma(dir, args, url) {
  const cli = path.join(h.MODULES, "prisma", "build", "index.js");
  const proc = spawn(process.execPath, [cli, ...args], {
    cwd: dir,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, LITHD_URL: url ?? "", CHECKPOINT_DISABLE: "1", PRISMA_HIDE_UPDATE_MESSAGE: "1", NO_COLOR: "1" },
  });
  let out = "";
  proc.stdout.setEncoding("utf8");
  proc.stderr.setEncoding("utf8");
  proc.stdout.on("data", (d) => (out += d));
  proc.stderr.on("data", (d) => (out += d));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => proc.kill("SIGKILL"), 30000);
    proc.once("error", reject);
    proc.once("close", (code, sig) => {
      clearTimeout(timer);
      resolve({ code: code ?? sig, out });
    });
  });
}

// The client, generated once for every store: its directory.
let genDir;
let generating;
function generate() {
  generating ??= (async () => {
    genDir = appDir([]);
    const r = await prisma(genDir, ["generate"]);
    assert.equal(r.code, 0, r.out);
    return path.join(genDir, "generated");
  })();
  return generating;
}

after(() => {
  if (genDir) fs.rmSync(genDir, { recursive: true, force: true });
});

for (const [store, noStore] of STORES)
describe(`Prisma 6 (@prisma/adapter-libsql, prisma migrate deploy) against lithd on ${store}`, { skip: SKIP || noStore, timeout: 120000 }, () => {
  let lithd;
  let url;
  let dir;
  let db; // the app's PrismaClient
  before(async () => {
    const { PrismaClient } = createRequire(__filename)(await generate());
    const { PrismaLibSQL } = h.load("@prisma/adapter-libsql");
    lithd = await startOn(store);
    url = lithd.server.url;
    dir = appDir([FIRST]);
    db = new PrismaClient({ adapter: new PrismaLibSQL({ url }) });
  });
  after(async () => {
    await db?.$disconnect();
    await lithd?.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it("migrates through the adapter: a table redefined under the rows that reference it", async () => {
    let r = await prisma(dir, ["migrate", "deploy"], url);
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, new RegExp(`${FIRST}[\\s\\S]*All migrations have been successfully applied`));

    // rows under the first schema: born a text, a book of Ursula's
    assert.equal(await db.$executeRaw`INSERT INTO "Author" (name, born) VALUES (${"Ursula"}, ${"1929"})`, 1);
    assert.equal(await db.$executeRaw`INSERT INTO "Book" (title, "authorId") VALUES (${"The Dispossessed"}, ${1})`, 1);

    addMigrations(dir, [REDEFINE]);
    const sql = fs.readFileSync(path.join(dir, "prisma", "migrations", REDEFINE, "migration.sql"), "utf8");
    assert.match(sql, /PRAGMA defer_foreign_keys=ON;\nPRAGMA foreign_keys=OFF;[\s\S]*DROP TABLE "Author";/);
    // deploy reads _prisma_migrations back first: its rolled_back_at, a
    // DATETIME, must come back NULL (not "", as the dqlite node sends it)
    r = await prisma(dir, ["migrate", "deploy"], url);
    const schema = async () =>
      (await db.$queryRaw`SELECT sql FROM sqlite_schema WHERE name = ${"Author"}`)[0].sql;
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, new RegExp(`${REDEFINE}[\\s\\S]*All migrations have been successfully applied`));
    assert.match(await schema(), /"born" INTEGER/);
    assert.deepEqual(await db.$queryRaw`SELECT typeof(born) AS t FROM "Author"`, [{ t: "integer" }]);
    assert.deepEqual(await db.author.findUnique({ where: { name: "Ursula" } }), { id: 1, name: "Ursula", born: 1929 });
    assert.deepEqual(await db.$queryRaw`SELECT finished_at IS NOT NULL AS done FROM _prisma_migrations WHERE migration_name = ${REDEFINE}`,
      [{ done: 1 }]);
    // the book kept its author, and foreign keys are enforced again (a
    // write's command: on --dqlite the writer's connection), and no setting
    // of the migration is left on it
    assert.deepEqual(await db.$queryRaw`PRAGMA foreign_key_check`, []);
    assert.deepEqual(await db.$queryRaw`PRAGMA foreign_keys`, [{ foreign_keys: 1 }]);
    assert.deepEqual(await db.$queryRaw`PRAGMA defer_foreign_keys`, [{ defer_foreign_keys: 0 }]);
    await assert.rejects(db.$executeRaw`INSERT INTO "Book" (title, "authorId") VALUES (${"Orphan"}, ${999})`,
      (e) => /FOREIGN KEY constraint failed/.test(e.message));
    assert.equal((await db.book.findFirst({ select: { author: { select: { name: true } } } })).author.name, "Ursula");
  });

  it("runs the app", async () => {
    const terry = await db.author.create({ data: { name: "Terry" } });
    assert.equal(terry.name, "Terry");
    assert.equal(terry.born, null);
    // positional: $executeRaw's template values are ? arguments
    assert.equal(await db.$executeRaw`INSERT INTO "Author" (name) VALUES (${"Iain"})`, 1);
    // named: Prisma has no named arguments; a :name takes its value by position
    assert.equal(await db.$executeRawUnsafe('INSERT INTO "Author" (name) VALUES (:name)', "Octavia"), 1);
    await assert.rejects(db.author.create({ data: { name: "Ursula" } }),
      (e) => /UNIQUE constraint failed: Author\.name/.test(e.message));
    await assert.rejects(db.book.create({ data: { title: "Nobody's", authorId: 999 } }),
      (e) => /FOREIGN KEY constraint failed/.test(e.message));
    // an interactive transaction committed, and one rolled back
    await db.$transaction(async (tx) => {
      const a = await tx.author.create({ data: { name: "Le Guin" } });
      await tx.book.create({ data: { title: "The Lathe of Heaven", authorId: a.id } });
    });
    await assert.rejects(db.$transaction(async (tx) => {
      await tx.author.create({ data: { name: "Gone" } });
      throw new Error("changed my mind");
    }), /changed my mind/);
    // a batch: $transaction of several queries, and createMany
    const [a, b] = await db.$transaction([
      db.book.create({ data: { title: "Small Gods", authorId: terry.id } }),
      db.book.create({ data: { title: "Mort", authorId: terry.id } }),
    ]);
    assert.deepEqual([a.title, b.title], ["Small Gods", "Mort"]);
    assert.deepEqual(await db.book.createMany({ data: [{ title: "Excession", authorId: 3 }, { title: "Use of Weapons", authorId: 3 }] }), { count: 2 });

    assert.deepEqual((await db.author.findMany({ select: { name: true }, orderBy: { id: "asc" } })).map((r) => r.name),
      ["Ursula", "Terry", "Iain", "Octavia", "Le Guin"]);
    const terrys = await db.author.findUnique({ where: { name: "Terry" }, select: { books: { select: { title: true }, orderBy: { id: "asc" } } } });
    assert.deepEqual(terrys.books.map((x) => x.title), ["Small Gods", "Mort"]);
    assert.equal(await db.book.count(), 6);
  });
});
