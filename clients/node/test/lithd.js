// What the Node client's tests share (client.test.js, retry.test.js): a real
// lithd in a temporary directory, and a fake one for what lithd does not do
// on purpose.
import { spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";

import * as lith from "../lith.js";

export const LITHD = process.env.LITHD;
export const TOKEN = "s3cret-token-for-tests";
const COMMANDS = `-- name: put
-- Store v under k.
INSERT INTO kv(k, v) VALUES (:k, :v) RETURNING k, v;
`;
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function freePort() {
  const srv = net.createServer();
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  const { port } = srv.address();
  await new Promise((r) => srv.close(r));
  return port;
}

// A lithd on a free port and a Unix socket; stop() sends SIGTERM and checks
// it exited 0; kill() SIGKILLs it and start() starts it again on the same
// database, port and socket.
export async function startLithd(args = [], token = null, certs = null) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lith-node-"));
  const port = await freePort();
  const sock = path.join(dir, "lithd.sock");
  fs.mkdirSync(path.join(dir, "backups"));
  fs.writeFileSync(path.join(dir, "commands.sql"), COMMANDS);
  fs.writeFileSync(path.join(dir, "schema.sql"), "CREATE TABLE kv(k TEXT PRIMARY KEY, v);\n");
  const argv = ["--db", "t.db", "--listen", `127.0.0.1:${port}`, "--unix", sock, "--schema", "schema.sql",
    "--commands", "commands.sql", "--backup-dir", path.join(dir, "backups"), ...args];
  if (token) {
    fs.writeFileSync(path.join(dir, "token"), token + "\n", { mode: 0o600 });
    argv.push("--token-file", "token");
  }
  if (certs) argv.push("--tls-cert", path.join(certs, "cert.pem"), "--tls-key", path.join(certs, "key.pem"));
  const log = fs.openSync(path.join(dir, "lithd.log"), "w");
  const url = `${certs ? "https" : "http"}://127.0.0.1:${port}`;
  const ca = certs ? fs.readFileSync(path.join(certs, "ca.pem")) : undefined;
  let proc;
  const start = async () => {
    proc = spawn(LITHD, argv, { cwd: dir, stdio: ["ignore", log, log] });
    const probe = new lith.Client(url, { token, maxRetries: 0, timeout: 2000, ca });
    for (const deadline = Date.now() + 30000; ;) {
      try {
        await probe.health();
        break;
      } catch (e) {
        if (!(e instanceof lith.ConnectionFailed) || proc.exitCode !== null || Date.now() > deadline)
          throw new Error("lithd did not start: " + fs.readFileSync(path.join(dir, "lithd.log"), "utf8"));
        await sleep(50);
      }
    }
    while (!fs.existsSync(sock)) await sleep(50);
  };
  const exited = () => proc.exitCode !== null || proc.signalCode !== null;
  await start();
  return {
    url, sock, dir, start,
    // SIGKILL: no drain, no checkpoint, the socket file left behind
    async kill() {
      if (!exited()) {
        const gone = new Promise((r) => proc.once("exit", r));
        proc.kill("SIGKILL");
        await gone;
      }
    },
    // SIGTERM; lithd must exit 0 (a crash or a sanitizer's report fails the suite)
    async stop() {
      if (!exited()) {
        const gone = new Promise((r) => proc.once("exit", r));
        proc.kill("SIGTERM");
        await gone;
      }
      fs.closeSync(log);
      const out = fs.readFileSync(path.join(dir, "lithd.log"), "utf8");
      fs.rmSync(dir, { recursive: true, force: true });
      if (proc.exitCode !== 0) throw new Error(`lithd exited ${proc.exitCode ?? proc.signalCode}:\n${out}`);
    },
  };
}

const OK = '{"results": [], "commands": [], "ok": true}';

// An HTTP/1.1 answer: status, headers, Content-Length (`length` if given, else the body's), body.
export function httpAnswer(status, body = OK, headers = [], length = null) {
  body = Buffer.from(body);
  const head = [`HTTP/1.1 ${status} X`, "Content-Type: application/json", `Content-Length: ${length ?? body.length}`, ...headers];
  return Buffer.concat([Buffer.from(head.join("\r\n") + "\r\n\r\n"), body]);
}

// A 200 with `body` in chunks of 1000 bytes; without the last chunk unless `last`.
export function chunkedAnswer(body, last = true) {
  body = Buffer.from(body);
  const out = [Buffer.from("HTTP/1.1 200 X\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")];
  for (let i = 0; i < body.length; i += 1000) {
    const piece = body.subarray(i, i + 1000);
    out.push(Buffer.from(piece.length.toString(16) + "\r\n"), piece, Buffer.from("\r\n"));
  }
  if (last) out.push(Buffer.from("0\r\n\r\n"));
  return Buffer.concat(out);
}

// A raw HTTP/1.1 server (TCP, or a Unix socket with unix: true), for what
// lithd does not do on purpose (die after a request arrived, cut an answer,
// close a kept-alive connection). Every request is recorded in .requests as
// {method, path, body} and handed to script(n, method, path, body), which
// returns (or resolves to) [bytes to send or null, then "keep" the
// connection, "close" it or "rst" it]; accepted() counts the connections.
export async function startFake(script, { unix = false } = {}) {
  const requests = [];
  const sockets = new Set();
  let accepted = 0;
  const srv = net.createServer((sock) => {
    accepted++;
    sockets.add(sock);
    sock.on("close", () => sockets.delete(sock));
    sock.on("error", () => {});
    let buf = Buffer.alloc(0);
    let busy = false;
    const step = async () => {
      if (busy) return;
      busy = true;
      for (;;) {
        const end = buf.indexOf("\r\n\r\n");
        if (end < 0) break;
        const head = buf.subarray(0, end).toString("latin1");
        const m = /\r\ncontent-length:\s*(\d+)/i.exec(head);
        const len = m ? Number(m[1]) : 0;
        if (buf.length < end + 4 + len) break;
        const body = buf.subarray(end + 4, end + 4 + len).toString();
        const [method, path] = head.split(" ");
        buf = buf.subarray(end + 4 + len);
        const n = requests.length;
        requests.push({ method, path, body });
        const [out, then] = await script(n, method, path, body);
        if (sock.destroyed) return;
        if (out) sock.write(out);
        if (then === "rst") return unix ? sock.destroy() : sock.resetAndDestroy(); // no RST on a Unix socket
        if (then === "close") return sock.end();
      }
      busy = false;
    };
    sock.on("data", (d) => {
      buf = Buffer.concat([buf, d]);
      step();
    });
  });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lith-node-fake-"));
  const where = unix ? path.join(dir, "fake.sock") : 0;
  await new Promise((r) => (unix ? srv.listen(where, r) : srv.listen(0, "127.0.0.1", r)));
  return {
    url: unix ? where : `http://127.0.0.1:${srv.address().port}`,
    requests,
    accepted: () => accepted, // connections
    paths: () => requests.map((r) => `${r.method} ${r.path.replace(/\?int64=string$/, "")}`),
    dir,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise((r) => srv.close(r));
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
