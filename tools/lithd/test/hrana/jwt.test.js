// The real libSQL client (@libsql/client) with sqld's tokens (its authToken
// option) against a lithd started with --auth-jwt-key-file (node --test;
// LITHD and LITH_HRANA_MODULES as for client.test.js). The tokens are made
// here as sqld's issuers make them: EdDSA over Ed25519 (node:crypto). Over
// http:// and ws://: a full token writes; a read-only one reads, and its
// writes fail with sqld's "Authorization forbidden" (SQLITE_AUTH), in a
// plain execute, a batch and a write transaction, changing nothing; an
// expired token, another database's, alg "none" and another key's are
// refused.
"use strict";

const { after, before, describe, it } = require("node:test");
const assert = require("node:assert/strict");
const crypto = require("node:crypto");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");

const h = require("./harness.js");

const SKIP = h.skipReason();

let libsql; // @libsql/client
let server; // lithd --auth-jwt-key-file
let dir; // its key file's folder
const { publicKey, privateKey } = crypto.generateKeyPairSync("ed25519");
const other = crypto.generateKeyPairSync("ed25519").privateKey;

const b64url = (buf) => Buffer.from(buf).toString("base64url");
// A token of claims, signed with key (alg EdDSA, as sqld's issuers sign).
function jwt(claims, key = privateKey, header = { alg: "EdDSA", typ: "JWT" }) {
  const input = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(claims))}`;
  const sig = header.alg === "none" ? "" : b64url(crypto.sign(null, Buffer.from(input), key));
  return `${input}.${sig}`;
}
const now = () => Math.floor(Date.now() / 1000);
const libsqlError = (code, re) => (e) => {
  assert.ok(e instanceof libsql.LibsqlError, `not a LibsqlError: ${e && e.stack}`);
  if (code) assert.equal(e.code, code, e.message);
  if (re) assert.match(e.message, re);
  return true;
};
const FORBIDDEN = /Authorization forbidden/;

describe("@libsql/client with sqld's JWTs against lithd", { skip: SKIP, timeout: 60000 }, () => {
  before(async () => {
    libsql = h.load("@libsql/client");
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "lith-jwt-"));
    const keyFile = path.join(dir, "jwt.pem");
    fs.writeFileSync(keyFile, publicKey.export({ type: "spki", format: "pem" }));
    server = await h.startLithd(["--auth-jwt-key-file", keyFile]);
    const full = libsql.createClient({ url: server.url, authToken: jwt({ a: "rw" }) });
    await full.execute("CREATE TABLE kv(k TEXT PRIMARY KEY, v)");
    await full.execute({ sql: "INSERT INTO kv VALUES (?, ?)", args: ["a", 1] });
    full.close();
  });
  after(async () => {
    if (server) await server.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  for (const scheme of ["http", "ws"]) {
    const url = () => server.url.replace(/^http:/, scheme + ":");
    const as = (token) => libsql.createClient({ url: url(), authToken: token });

    describe(`over ${scheme}://`, () => {
      it("a read-only token reads, and each write fails with sqld's error, changing nothing", async () => {
        const ro = as(jwt({ a: "ro", id: "main", exp: now() + 600 }));
        try {
          assert.equal((await ro.execute("SELECT v FROM kv WHERE k = 'a'")).rows[0][0], 1);
          await assert.rejects(ro.execute({ sql: "INSERT INTO kv VALUES (?, ?)", args: ["b", 2] }),
            libsqlError("SQLITE_AUTH", FORBIDDEN));
          await assert.rejects(ro.execute("UPDATE kv SET v = 9"), libsqlError("SQLITE_AUTH", FORBIDDEN));
          await assert.rejects(ro.batch(["SELECT 1", "DELETE FROM kv"], "write"), libsqlError(null, FORBIDDEN));
          // a write transaction: it opens, reads, and its write fails
          const tx = await ro.transaction("write");
          assert.equal((await tx.execute("SELECT count(*) FROM kv")).rows[0][0], 1);
          await assert.rejects(tx.execute("INSERT INTO kv VALUES ('c', 3)"), libsqlError("SQLITE_AUTH", FORBIDDEN));
          await tx.rollback();
          // still reads afterwards
          assert.equal((await ro.execute("SELECT count(*) FROM kv")).rows[0][0], 1);
        } finally {
          ro.close();
        }
      });

      it("a full token writes", async () => {
        const rw = as(jwt({}));
        try {
          await rw.execute({ sql: "INSERT INTO kv VALUES (?, ?)", args: [scheme, 5] });
          assert.equal((await rw.execute({ sql: "SELECT v FROM kv WHERE k = ?", args: [scheme] })).rows[0][0], 5);
          await rw.execute({ sql: "DELETE FROM kv WHERE k = ?", args: [scheme] });
        } finally {
          rw.close();
        }
      });

      it("refuses an expired token, another database's, alg none and another key's", async () => {
        const bad = [
          jwt({ exp: now() - 3600 }),
          jwt({ a: "rw", id: "elsewhere" }),
          jwt({ a: "rw" }, null, { alg: "none", typ: "JWT" }),
          jwt({ a: "rw" }, other),
        ];
        for (const token of bad) {
          const c = as(token);
          try {
            await assert.rejects(c.execute("SELECT 1"), (e) => e instanceof Error);
          } finally {
            c.close();
          }
        }
        const c = as(jwt({ a: "rw" }));
        try {
          assert.equal((await c.execute("SELECT count(*) FROM kv")).rows[0][0], 1); // nothing changed
        } finally {
          c.close();
        }
      });
    });
  }
});
