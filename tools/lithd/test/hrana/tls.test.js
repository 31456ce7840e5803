// @libsql/client over https://, wss:// (and libsql://, which it maps to TLS) against
// a lithd with --tls-cert, its certificate signed by a CA of the test's own
// (clients/test-certs.sh). Node reads NODE_EXTRA_CA_CERTS once, when it
// starts, so each client runs in a child node with the variable set, as a
// user would run it (docs/hrana.md); a child without it must be refused.
"use strict";

const { after, before, describe, it } = require("node:test");
const assert = require("node:assert/strict");
const { spawnSync } = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");

const h = require("./harness.js");

const hasOpenssl = spawnSync("openssl", ["version"]).status === 0;
const SKIP = h.skipReason() || (!hasOpenssl && "openssl (for the test certificates) is not installed");

// What the child runs: a small app (create, insert with positional and
// named arguments, a batch, a transaction committed and one rolled back, a
// constraint error), printed as JSON.
const APP = `
const { createRequire } = require("node:module");
const { createClient } = createRequire(process.env.LITH_HRANA_MODULES + "/x.js")("@libsql/client");
(async () => {
  const db = createClient({ url: process.argv[1] });
  const t = process.argv[2]; // a table of this run's own
  const out = {};
  try {
    await db.execute("CREATE TABLE IF NOT EXISTS " + t + "(id INTEGER PRIMARY KEY, v TEXT UNIQUE)");
    await db.execute({ sql: "INSERT INTO " + t + "(v) VALUES (?)", args: ["one"] });
    await db.execute({ sql: "INSERT INTO " + t + "(v) VALUES (:v)", args: { v: "two" } });
    await db.batch(["INSERT INTO " + t + "(v) VALUES ('three')", "INSERT INTO " + t + "(v) VALUES ('four')"], "write");
    const tx = await db.transaction("write");
    await tx.execute("INSERT INTO " + t + "(v) VALUES ('kept')");
    await tx.commit();
    const rb = await db.transaction("write");
    await rb.execute("INSERT INTO " + t + "(v) VALUES ('dropped')");
    await rb.rollback();
    try {
      await db.execute({ sql: "INSERT INTO " + t + "(v) VALUES (?)", args: ["one"] });
    } catch (e) {
      out.constraint = e.code;
    }
    out.rows = (await db.execute("SELECT v FROM " + t + " ORDER BY id")).rows.map((r) => r.v);
  } catch (e) {
    out.error = String(e && (e.cause ? e.message + ": " + e.cause.message : e.message));
  }
  db.close();
  console.log(JSON.stringify(out));
})();
`;

function runApp(url, table, extraCa) {
  const env = { ...process.env, LITH_HRANA_MODULES: h.MODULES };
  delete env.NODE_EXTRA_CA_CERTS; // this machine's may name its own bundle
  if (extraCa) env.NODE_EXTRA_CA_CERTS = extraCa;
  const r = spawnSync(process.execPath, ["-e", APP, url, table], { env, encoding: "utf8", timeout: 60000 });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout.trim().split("\n").pop());
}

describe("@libsql/client over TLS", { skip: SKIP, timeout: 120000 }, () => {
  let server, certs, ca, port;
  before(async () => {
    certs = fs.mkdtempSync(path.join(os.tmpdir(), "lith-hrana-certs-"));
    const made = spawnSync("sh", [path.join(__dirname, "..", "..", "..", "..", "clients", "test-certs.sh"), certs]);
    assert.equal(made.status, 0, String(made.stderr));
    ca = path.join(certs, "ca.pem");
    server = await h.startLithd(["--tls-cert", path.join(certs, "cert.pem"), "--tls-key", path.join(certs, "key.pem")]);
    port = server.port;
  });
  after(async () => {
    if (server) await server.stop();
    if (certs) fs.rmSync(certs, { recursive: true, force: true });
  });

  it("runs an app over https:// with NODE_EXTRA_CA_CERTS", () => {
    assert.match(server.url, /^https:/);
    const out = runApp(`https://localhost:${port}`, "t1", ca);
    assert.equal(out.error, undefined);
    assert.deepEqual(out.rows, ["one", "two", "three", "four", "kept"]);
    assert.match(out.constraint, /^SQLITE_CONSTRAINT/);
  });

  it("maps libsql:// to TLS", () => {
    const out = runApp(`libsql://127.0.0.1:${port}`, "t2", ca);
    assert.equal(out.error, undefined);
    assert.deepEqual(out.rows, ["one", "two", "three", "four", "kept"]);
  });

  it("runs an app over wss:// (Hrana over WebSocket, the same TLS listener)", () => {
    const out = runApp(`wss://localhost:${port}`, "t4", ca);
    assert.equal(out.error, undefined);
    assert.deepEqual(out.rows, ["one", "two", "three", "four", "kept"]);
  });

  it("refuses lithd's certificate without its CA, before anything is sent", () => {
    const out = runApp(`https://localhost:${port}`, "t3", null);
    assert.match(out.error ?? "", /certificate|CERT/i);
    const again = runApp(`https://localhost:${port}`, "t3", ca);
    assert.equal(again.error, undefined); // the refused app wrote nothing: "one" is new
    assert.equal(again.rows.length, 5);
  });
});
