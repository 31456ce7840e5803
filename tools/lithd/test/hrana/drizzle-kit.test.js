// Drizzle's migrations against lithd (issue 34): drizzle-kit's own CLI
// (generate from a Drizzle schema, migrate) and drizzle-orm's migrate()
// (drizzle-orm/libsql/migrator), on a file and on a three-node --dqlite
// cluster, with the same expectations on both.
//
// drizzle-kit generates with dialect "sqlite": SQLite's DDL, so a column's
// type change is a table redefinition between PRAGMA foreign_keys=OFF and
// ON (its "turso" dialect writes libSQL's ALTER COLUMN instead, which
// SQLite has not). It migrates with dialect "turso" over http://, as a
// Turso user would: @libsql/client's migrate(), one Hrana batch with
// foreign keys off around BEGIN ... COMMIT. lithd runs that request alone
// on the writer and checks foreign keys before it commits, as on a file:
// a migration that leaves a row without its parent fails whole.
// LITHD and LITH_HRANA_MODULES as for client.test.js.
"use strict";

const { after, before, describe, it } = require("node:test");
const assert = require("node:assert/strict");
const { spawn } = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");

const h = require("./harness.js");

const SKIP = h.missing("drizzle-kit", "drizzle-orm", "@libsql/client");

const SCHEMA = (born) => `const { sqliteTable, integer, text } = require("drizzle-orm/sqlite-core");
exports.authors = sqliteTable("authors", {
  id: integer("id").primaryKey(),
  name: text("name").notNull(),
  born: ${born}("born"),
});
exports.books = sqliteTable("books", {
  id: integer("id").primaryKey(),
  title: text("title").notNull(),
  authorId: integer("author_id").notNull().references(() => exports.authors.id),
});
`;

// One config, its dialect and URL from the environment: "sqlite" to
// generate, "turso" to migrate.
const CONFIG = `module.exports = {
  dialect: process.env.DK_DIALECT,
  schema: "./schema.js",
  out: "./drizzle",
  dbCredentials: { url: process.env.LITHD_URL || "http://127.0.0.1:9" },
};
`;

// The third migration, written by hand into drizzle-kit's --custom file:
// the same redefinition, but author 1 is left out while books still name
// them. Foreign keys are off, so SQLite itself would let it commit.
const ORPHANING = `PRAGMA foreign_keys=OFF;--> statement-breakpoint
CREATE TABLE \`__new_authors\` (\`id\` integer PRIMARY KEY NOT NULL, \`name\` text NOT NULL, \`born\` integer);--> statement-breakpoint
INSERT INTO \`__new_authors\`("id", "name", "born") SELECT "id", "name", "born" FROM \`authors\` WHERE "id" <> 1;--> statement-breakpoint
DROP TABLE \`authors\`;--> statement-breakpoint
ALTER TABLE \`__new_authors\` RENAME TO \`authors\`;--> statement-breakpoint
PRAGMA foreign_keys=ON;
`;

// The app in a directory of its own, node_modules beside it (what
// drizzle-kit and the schema resolve from).
function appDir() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lith-drizzle-kit-"));
  fs.symlinkSync(h.MODULES, path.join(dir, "node_modules"), "dir");
  fs.writeFileSync(path.join(dir, "schema.js"), SCHEMA("text"));
  fs.writeFileSync(path.join(dir, "drizzle.config.js"), CONFIG);
  return dir;
}

// drizzle-kit's CLI in dir: { code, out } (stdout and stderr together).
function kit(dir, args, env) {
  const cli = path.join(h.MODULES, "drizzle-kit", "bin.cjs");
  const proc = spawn(process.execPath, [cli, ...args], {
    cwd: dir,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, NO_COLOR: "1", ...env },
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

const generate = (dir, ...args) => kit(dir, ["generate", ...args], { DK_DIALECT: "sqlite" });

// The migration drizzle-kit generated last: its SQL.
function lastMigration(dir) {
  const journal = JSON.parse(fs.readFileSync(path.join(dir, "drizzle", "meta", "_journal.json"), "utf8"));
  const tag = journal.entries.at(-1).tag;
  return { journal, file: path.join(dir, "drizzle", `${tag}.sql`) };
}

// A lithd on a file, or on a cluster of three lith-nodes.
async function start(store) {
  if (store === "a file") {
    const server = await h.startLithd();
    return { server, stop: () => server.stop() };
  }
  const cluster = await h.startCluster(3);
  try {
    const server = await h.startLithd(["--dqlite", cluster.addresses, "--dqlite-failover-ms", "3000"], { db: false });
    return {
      server,
      async stop() {
        try {
          await server.stop();
        } finally {
          await cluster.stop();
        }
      },
    };
  } catch (e) {
    await cluster.stop();
    throw e;
  }
}

const STORES = [
  ["a file", false],
  ["--dqlite (three nodes)", h.noNode()],
];

for (const [store, noStore] of STORES)
describe(`drizzle-kit and drizzle-orm's migrate() against lithd on ${store}`, { skip: SKIP || noStore, timeout: 120000 }, () => {
  let lithd, dir, client, db, migrate;
  before(async () => {
    const libsql = h.load("@libsql/client");
    migrate = h.load("drizzle-orm/libsql/migrator").migrate;
    lithd = await start(store);
    dir = appDir();
    client = libsql.createClient({ url: lithd.server.url });
    db = h.load("drizzle-orm/libsql").drizzle(client);
  });
  after(async () => {
    client?.close();
    await lithd?.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  const rows = async (sql) => (await client.execute(sql)).rows.map((r) => Object.values(r));
  const schema = () => rows("SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE '_lith%' ORDER BY name");
  const journal = () => rows('SELECT hash, created_at FROM "__drizzle_migrations" ORDER BY created_at');
  const migrateKit = () => kit(dir, ["migrate"], { DK_DIALECT: "turso", LITHD_URL: lithd.server.url });

  it("drizzle-kit generate, then drizzle-kit migrate (dialect turso, http://): the schema and the journal", async () => {
    let r = await generate(dir, "--name", "init");
    assert.equal(r.code, 0, r.out);
    r = await migrateKit();
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /migrations applied successfully/);
    const s = await schema();
    assert.deepEqual(s.map(([type, name]) => `${type} ${name}`), [
      "table __drizzle_migrations",
      "table authors",
      "table books",
      "index sqlite_autoindex___drizzle_migrations_1",
    ]);
    assert.match(s.find(([, n]) => n === "books")[2], /FOREIGN KEY \(`author_id`\) REFERENCES `authors`\(`id`\)/);
    assert.match(s.find(([, n]) => n === "authors")[2], /`born` text/);
    const { journal: j } = lastMigration(dir);
    assert.deepEqual((await journal()).map(([, at]) => Number(at)), [j.entries[0].when]);
    // run again: nothing to apply
    r = await migrateKit();
    assert.equal(r.code, 0, r.out);
    assert.equal((await journal()).length, 1);
  });

  it("drizzle-orm's migrate(): a column's type changed, its table redefined under the rows that reference it", async () => {
    await client.batch([
      "INSERT INTO authors(id, name, born) VALUES (1, 'Ursula', '1929'), (2, 'Iain', '1954')",
      "INSERT INTO books(title, author_id) VALUES ('The Dispossessed', 1), ('Excession', 2)",
    ]);
    fs.writeFileSync(path.join(dir, "schema.js"), SCHEMA("integer"));
    const r = await generate(dir, "--name", "born_a_year");
    assert.equal(r.code, 0, r.out);
    const sql = fs.readFileSync(lastMigration(dir).file, "utf8");
    assert.match(sql, /^PRAGMA foreign_keys=OFF;[\s\S]*DROP TABLE `authors`;[\s\S]*PRAGMA foreign_keys=ON;$/);

    await migrate(db, { migrationsFolder: path.join(dir, "drizzle") });
    assert.match((await schema()).find(([, n]) => n === "authors")[2], /`born` integer/);
    assert.deepEqual(await rows("SELECT id, name, born, typeof(born) FROM authors ORDER BY id"), [
      [1, "Ursula", 1929, "integer"],
      [2, "Iain", 1954, "integer"],
    ]);
    assert.equal((await journal()).length, 2);
    // foreign keys are on again: a book of nobody's is refused
    await assert.rejects(client.execute("INSERT INTO books(title, author_id) VALUES ('Nobody''s', 99)"), (e) =>
      /FOREIGN KEY/.test(e.message),
    );
    assert.deepEqual(await rows("PRAGMA foreign_keys"), [[1]]);
  });

  it("a migration that leaves a book without its author fails whole, drizzle-kit's and migrate(), and the database stays as it was", async () => {
    const r0 = await generate(dir, "--custom", "--name", "orphans");
    assert.equal(r0.code, 0, r0.out);
    fs.writeFileSync(lastMigration(dir).file, ORPHANING);
    const before = [await schema(), await journal(), await rows("SELECT * FROM authors ORDER BY id")];

    const r = await migrateKit();
    assert.notEqual(r.code, 0, r.out);
    assert.deepEqual([await schema(), await journal(), await rows("SELECT * FROM authors ORDER BY id")], before);

    await assert.rejects(migrate(db, { migrationsFolder: path.join(dir, "drizzle") }), (e) =>
      /SQLITE_CONSTRAINT/.test(e.code) && /FOREIGN KEY constraint failed/.test(e.message),
    );
    assert.deepEqual([await schema(), await journal(), await rows("SELECT * FROM authors ORDER BY id")], before);
    assert.deepEqual(await rows("PRAGMA foreign_keys"), [[1]]);
  });
});
