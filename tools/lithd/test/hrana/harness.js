// What the Hrana suites (client.test.js, drizzle.test.js, ...) share:
// loading the npm modules from LITH_HRANA_MODULES (make deps-hrana puts them
// in build/hrana/node_modules), starting a lithd of their own on a free port
// in a temporary directory (and a lith-node for one on --dqlite), and a few
// raw-HTTP helpers. Not a test file itself (node --test runs only *.test.js
// here).
"use strict";

const { spawn } = require("node:child_process");
const fs = require("node:fs");
const http = require("node:http");
const net = require("node:net");
const { createRequire } = require("node:module");
const os = require("node:os");
const path = require("node:path");

const LITHD = process.env.LITHD;
const MODULES = process.env.LITH_HRANA_MODULES;

// Why the suites cannot run here, or false.
function skipReason() {
  if (!LITHD) return "LITHD (the lithd binary) is not set";
  if (!MODULES) return "LITH_HRANA_MODULES (build/hrana/node_modules) is not set";
  for (const pkg of ["@libsql/client", "drizzle-orm"])
    if (!fs.existsSync(path.join(MODULES, pkg, "package.json")))
      return `${pkg} is not installed in ${MODULES}: run make deps-hrana`;
  return false;
}

// require() as if from inside node_modules' folder: the packages' own
// "exports" (their CommonJS builds) decide what loads.
function load(name) {
  return createRequire(path.join(MODULES, "hrana-tests.js"))(name);
}

// A lithd of our own: --listen on port 0, the port read from its
// "listening on" line. stop() sends SIGTERM and throws unless lithd exits 0
// (a crash or a sanitizer's report fails the suite). opts.db false: no
// --db of ours (args name the store: --dqlite).
async function startLithd(args = [], opts = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lith-hrana-"));
  const db = opts.db === false ? [] : ["--db", path.join(dir, "t.db")];
  const argv = [...db, "--listen", "127.0.0.1:0", ...args];
  const proc = spawn(LITHD, argv, { cwd: dir, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  let scheme = "http";
  proc.stderr.setEncoding("utf8");
  proc.stderr.on("data", (d) => (err += d));
  proc.stdout.setEncoding("utf8");
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("lithd did not start in 30 s:\n" + err)), 30000);
    proc.stdout.on("data", (d) => {
      out += d;
      const m = /listening on (https?):\/\/127\.0\.0\.1:(\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        scheme = m[1]; // https: lithd --tls-cert
        resolve(Number(m[2]));
      }
    });
    proc.once("exit", (code, sig) => {
      clearTimeout(timer);
      reject(new Error(`lithd exited ${code ?? sig} before listening:\n${err}`));
    });
  });
  const url = `${scheme}://127.0.0.1:${port}`;
  return {
    url,
    port,
    dir,
    log: () => err,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) {
        const exited = new Promise((r) => proc.once("exit", r));
        proc.kill("SIGTERM");
        await exited;
      }
      fs.rmSync(dir, { recursive: true, force: true });
      if (proc.exitCode !== 0) throw new Error(`lithd exited ${proc.exitCode ?? proc.signalCode}:\n${err}`);
    },
  };
}

// "done" if p settles (either way) within ms, else "timeout". The timer is a
// deadline for an event, never a wait for one.
async function within(p, ms) {
  let timer;
  const deadline = new Promise((r) => (timer = setTimeout(() => r("timeout"), ms)));
  try {
    return await Promise.race([p.then(() => "done", () => "done"), deadline]);
  } finally {
    clearTimeout(timer);
  }
}

// One raw Hrana pipeline with fetch: [HTTP status, parsed body].
async function pipeline(url, body, version = 2) {
  const r = await fetch(`${url}/v${version}/pipeline`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await r.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = { unparsed: text };
  }
  return [r.status, json];
}

const stmt = (sql, args) => ({ type: "execute", stmt: args ? { sql, args } : { sql } });

// Many small pipelines fast: node:http with keep-alive, `width` sockets.
// Returns post(body) -> [status, parsed body] and close().
function httpPoster(url, width) {
  const u = new URL(url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: width });
  const post = (body) =>
    new Promise((resolve, reject) => {
      const data = JSON.stringify(body);
      const rq = http.request(
        {
          agent, host: u.hostname, port: u.port, path: "/v2/pipeline", method: "POST",
          headers: { "content-type": "application/json", "content-length": Buffer.byteLength(data) },
        },
        (res) => {
          let text = "";
          res.setEncoding("utf8");
          res.on("data", (c) => (text += c));
          res.on("end", () => {
            try {
              resolve([res.statusCode, JSON.parse(text)]);
            } catch (e) {
              reject(e);
            }
          });
        },
      );
      rq.on("error", reject);
      rq.end(data);
    });
  return { post, close: () => agent.destroy() };
}

// lith-node for the suites that run lithd --dqlite: beside LITHD in the
// build tree, or LITH_NODE.
const NODE_BIN =
  process.env.LITH_NODE || (LITHD ? path.join(path.dirname(LITHD), "..", "lith-node", "lith-node") : "");

// Why lithd --dqlite cannot run here, or false.
const noNode = () => (fs.existsSync(NODE_BIN) ? false : `no lith-node at ${NODE_BIN}`);

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

// One lith-node bootstrapping a cluster of one, or node `id` joining the
// cluster at `join`; resolves once it serves.
async function startNode(id = 1, join = null) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lith-node-"));
  const address = `127.0.0.1:${await freePort()}`;
  const argv = ["--id", String(id), "--address", address, "--dir", dir, "--latency-ms", "20"];
  const proc = spawn(NODE_BIN, join ? [...argv, "--join", join] : argv, {
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

// A cluster of n lith-nodes (the first bootstraps it, the others join):
// { addresses ("a,b,c", lithd's --dqlite), stop() }.
async function startCluster(n) {
  const nodes = [await startNode(1)];
  try {
    for (let id = 2; id <= n; id++) nodes.push(await startNode(id, nodes[0].address));
  } catch (e) {
    await Promise.all(nodes.map((x) => x.stop()));
    throw e;
  }
  return {
    addresses: nodes.map((x) => x.address).join(","),
    stop: () => Promise.all(nodes.map((x) => x.stop())),
  };
}

// The stores a family runs on: [name, why it cannot run there or false].
const STORES = [
  ["a file", false],
  ["--dqlite", noNode()],
];

// A lithd on store (a STORES name), with the lith-node it needs:
// { server, stop() }.
async function startOn(store) {
  if (store === "a file") {
    const server = await startLithd();
    return { server, stop: () => server.stop() };
  }
  const node = await startNode();
  try {
    const server = await startLithd(["--dqlite", node.address, "--dqlite-failover-ms", "3000"], { db: false });
    return {
      server,
      async stop() {
        try {
          await server.stop();
        } finally {
          await node.stop();
        }
      },
    };
  } catch (e) {
    await node.stop();
    throw e;
  }
}

// The 200 answers lithd gave on a route so far (its /metrics).
async function answered(server, route) {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const m = new RegExp(`^lithd_http_responses_total\\{route="${route.replace(/\//g, "\\/")}",code="200"\\} (\\d+)$`, "m").exec(text);
  return m ? Number(m[1]) : 0;
}

// Why a family cannot run: the suites' reason, or one of its packages is
// missing (make deps-hrana); false if it can.
function missing(...pkgs) {
  const skip = skipReason();
  if (skip) return skip;
  for (const p of pkgs)
    if (!fs.existsSync(path.join(MODULES, p, "package.json")))
      return `${p} is not installed in ${MODULES}: run make deps-hrana`;
  return false;
}

module.exports = {
  LITHD, MODULES, skipReason, load, startLithd, within, pipeline, stmt, httpPoster, NODE_BIN, noNode, freePort, startNode, startCluster,
  STORES, startOn, answered, missing,
};
