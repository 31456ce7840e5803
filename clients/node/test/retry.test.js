// What a retry loop can rely on (node --test): the two branches of the
// errors, the client's own retry of what was not sent, and the safe loop
// through lithd being SIGKILLed and restarted. The lithd and the fake
// server are lithd.js's.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import * as lith from "../lith.js";
import { LITHD, TOKEN, freePort, httpAnswer, sleep, startFake, startLithd } from "./lithd.js";

const failure = (p) => p.then(() => null, (e) => e);

describe("the two branches", () => {
  it("neither extends the other", () => {
    const lost = new lith.AnswerLost("x");
    const unknown = new lith.OutcomeUnknown("x");
    const failed = new lith.ConnectionFailed("x");
    assert.ok(lost instanceof lith.OutcomeUnknown && !(lost instanceof lith.ConnectionFailed));
    assert.ok(!(failed instanceof lith.OutcomeUnknown) && !(unknown instanceof lith.ConnectionFailed));
    assert.ok(!(unknown instanceof lith.AnswerLost));
    assert.deepEqual([lost.outcomeUnknown, unknown.outcomeUnknown, failed.outcomeUnknown], [true, true, false]);
  });

  for (const unix of [false, true]) {
    describe(unix ? "Unix socket, node:http" : "TCP, fetch", () => {
      const open = [];
      after(async () => {
        for (const [f, c] of open) {
          c.close();
          await f.close();
        }
      });
      const fake = async (script, options = {}) => {
        const f = await startFake(script, { unix });
        const c = new lith.Client(f.url, { timeout: 5000, ...options });
        open.push([f, c]);
        return [f, c];
      };

      it("an `instanceof ConnectionFailed` loop never sends a sent write again", async () => {
        // lithd took the write and died before answering
        const [f, c] = await fake(() => [null, "close"]);
        let sends = 0;
        const e = await failure((async () => {
          for (let i = 0; i < 3; i++) {
            try {
              sends++;
              return await c.do("INSERT INTO kv VALUES (1)");
            } catch (x) {
              if (!(x instanceof lith.ConnectionFailed)) throw x;
            }
          }
        })());
        assert.ok(e instanceof lith.AnswerLost, String(e));
        assert.deepEqual([sends, f.paths()], [1, ["POST /v1/do"]]);
      });

      it("classes an answer cut short by what it said", async () => {
        const body = '{"results": [{"changes": 1}]}';
        const refused = '{"error": {"code": "constraint", "message": "x"}}';
        const cases = [
          ["do", 200, body, lith.AnswerLost], // it ran: its results are lost
          ["do", 504, refused, lith.AnswerLost],
          ["do", 409, refused, lith.ConnectionFailed], // lithd said it did not commit
          ["query", 200, body, lith.ConnectionFailed], // a read
        ];
        for (const [call, status, answer, Cls] of cases) {
          const [f, c] = await fake(() => [httpAnswer(status, answer.slice(0, 10), [], answer.length), "close"], { maxRetries: 3 });
          const e = await failure(call === "do" ? c.do("INSERT INTO kv VALUES (1)") : c.query("SELECT 1"));
          assert.equal(e && e.constructor, Cls, `${call} ${status}: ${e}`);
          assert.equal(e.status, status);
          assert.match(e.message, /cut short/);
          assert.equal(f.requests.length, 1); // never sent again
          if (status === 200 && Cls === lith.AnswerLost) assert.match(e.message, /the request ran/);
        }
      });

      // poolSize is the node:http Agent's (a Unix socket, https with ca)
      it("keeps at most poolSize idle connections", { skip: !unix && "TCP goes through fetch, whose pool is Node's" }, async () => {
        for (const [poolSize, connections] of [[undefined, 1], [0, 3]]) {
          const [f, c] = await fake(() => [httpAnswer(200), "keep"], { poolSize });
          for (let i = 0; i < 3; i++) await c.stats();
          assert.equal(f.accepted(), connections, `poolSize ${poolSize}`);
        }
        for (const poolSize of [-1, 1.5, "8"])
          assert.throws(() => new lith.Client("http://127.0.0.1:1", { poolSize }), TypeError, String(poolSize));
      });
    });
  }
});

describe("what was not sent is sent again", () => {
  const client = (url, options = {}) => {
    const seen = [];
    const c = new lith.Client(url, { timeout: 5000, onRetry: (n, wait, e) => seen.push([n, wait, e.constructor]), ...options });
    return [c, seen];
  };

  it("retries a refused connection and a missing socket within the bounds", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lith-node-retry-"));
    try {
      for (const where of [`http://127.0.0.1:${await freePort()}`, path.join(dir, "no.sock")]) {
        for (const call of [(c) => c.do("INSERT INTO kv VALUES (1)"), (c) => c.query("SELECT 1")]) {
          const [c, seen] = client(where, { maxRetries: 3, maxRetryWait: 5000 });
          const e = await failure(call(c));
          assert.ok(e instanceof lith.ConnectionFailed && e.code === "connection", String(e));
          assert.match(e.message, /\(sent 4 times over 350 ms\)$/);
          const F = lith.ConnectionFailed;
          assert.deepEqual(seen, [[1, 50, F], [2, 100, F], [3, 200, F]], where);
        }
        let [c, seen] = client(where, { maxRetries: 0 });
        assert.ok((await failure(c.do("INSERT INTO kv VALUES (1)"))) instanceof lith.ConnectionFailed);
        assert.deepEqual(seen, []);
        // the wait bound: 50 fits in 100 ms, 50 + 100 does not
        [c, seen] = client(where, { maxRetries: 10, maxRetryWait: 100 });
        assert.ok((await failure(c.do("INSERT INTO kv VALUES (1)"))) instanceof lith.ConnectionFailed);
        assert.deepEqual(seen, [[1, 50, lith.ConnectionFailed]]);
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
    // the defaults: 12 retries, 50 ms doubling to 1 s, about 8.5 s (lith.js says why)
    const c = new lith.Client("http://127.0.0.1:1");
    assert.deepEqual([c.maxRetries, c.maxRetryWait], [12, 30000]);
  });

  it("a write made while lithd is down lands once when it is back", { skip: !LITHD && "LITHD is not set" }, async () => {
    const server = await startLithd();
    try {
      await server.kill();
      for (const where of [server.url, server.sock]) { // refused, and a socket file left behind
        const [c, seen] = client(where); // the defaults
        const back = sleep(600).then(() => server.start());
        const r = await c.do([{ sql: "INSERT INTO kv VALUES (?, 1)", params: [where] }]);
        await back;
        assert.equal(r[0].changes, 1);
        assert.ok(seen.length > 0 && seen.every(([, , Cls]) => Cls === lith.ConnectionFailed), String(seen));
        assert.deepEqual((await c.query({ sql: "SELECT count(*) FROM kv WHERE k = ?", params: [where] }))[0].rows, [[1]]);
        c.close();
        await server.kill();
      }
      await server.start();
    } finally {
      await server.stop();
    }
  });
});

describe("LITHD_UNIX, LITHD_URL, LITHD_TOKEN_FILE, LITHD_TOKEN: as the lith CLI", { skip: !LITHD && "LITHD is not set" }, () => {
  const NAMES = ["LITHD_UNIX", "LITHD_URL", "LITHD_TOKEN_FILE", "LITHD_TOKEN"];
  const saved = Object.fromEntries(NAMES.map((k) => [k, process.env[k]]));
  const env = (values = {}) => {
    for (const k of NAMES) delete process.env[k];
    Object.assign(process.env, values);
  };
  let server;
  after(async () => {
    env(Object.fromEntries(Object.entries(saved).filter(([, v]) => v !== undefined)));
    if (server) await server.stop();
  });
  // where a client goes, and whether its token is lithd's
  const reaches = async (...args) => {
    const c = new lith.Client(...args);
    c.maxRetries = 0;
    const where = c.unixSocket ?? c.base;
    try {
      await c.stats();
      return [where, true];
    } catch (e) {
      if (!(e instanceof lith.Unauthorized)) throw e;
      return [where, false];
    } finally {
      c.close();
    }
  };

  it("where", async () => {
    server = await startLithd([], TOKEN);
    const nowhere = `http://127.0.0.1:${await freePort()}`;
    env({ LITHD_URL: server.url, LITHD_TOKEN: TOKEN });
    assert.deepEqual(await reaches(), [server.url, true]);
    env({ LITHD_URL: nowhere, LITHD_UNIX: server.sock, LITHD_TOKEN: TOKEN }); // the socket wins
    assert.deepEqual(await reaches(), [server.sock, true]);
    env({ LITHD_URL: nowhere, LITHD_TOKEN: TOKEN }); // an argument wins
    assert.deepEqual(await reaches(server.url), [server.url, true]);
    assert.deepEqual(await reaches({ unixSocket: server.sock }), [server.sock, true]);
    env({ LITHD_URL: "", LITHD_UNIX: "" }); // empty: unset
    assert.equal(new lith.Client().base, "http://127.0.0.1:8765");
  });

  it("the token", async () => {
    const file = path.join(server.dir, "env-token");
    fs.writeFileSync(file, TOKEN + "\r\n");
    env();
    assert.deepEqual(await reaches(server.url), [server.url, false]);
    env({ LITHD_TOKEN: TOKEN });
    assert.deepEqual(await reaches(server.url), [server.url, true]);
    env({ LITHD_TOKEN: "wrong" });
    assert.deepEqual(await reaches(server.url), [server.url, false]);
    assert.deepEqual(await reaches(server.url, { token: TOKEN }), [server.url, true]); // an argument wins
    env({ LITHD_TOKEN_FILE: file, LITHD_TOKEN: "wrong" }); // the file wins
    assert.deepEqual(await reaches(server.url), [server.url, true]);
    env({ LITHD_TOKEN_FILE: "", LITHD_TOKEN: TOKEN }); // empty: unset
    assert.deepEqual(await reaches(server.url), [server.url, true]);
    // refused as the CLI refuses them, before anything is sent
    for (const text of ["", "\n", "a\nb\n", "x".repeat(4097)]) {
      fs.writeFileSync(file, text);
      env({ LITHD_TOKEN_FILE: file });
      assert.throws(() => new lith.Client(server.url), TypeError, JSON.stringify(text));
    }
    env({ LITHD_TOKEN_FILE: path.join(server.dir, "missing") });
    assert.throws(() => new lith.Client(server.url), (e) => e.code === "ENOENT");
    env({ LITHD_TOKEN: "a\nb" });
    assert.throws(() => new lith.Client(server.url), TypeError);
    env();
  });
});

// docs/clients.md's safe loop through SIGKILLs and restarts of lithd:
// concurrent writers, half over TCP (fetch), half over the Unix socket
// (node:http); each write carries an idempotency key (a UNIQUE column, ON
// CONFLICT DO NOTHING) and is sent again on OutcomeUnknown, never on
// anything else. Every write counted done is there exactly once, and no call
// of the client was run twice.
describe("the safe loop through kills and restarts", { skip: !LITHD && "LITHD is not set" }, () => {
  it("loses and doubles no write", async () => {
    const server = await startLithd();
    const counts = { lost: 0, notSent: 0 };
    const onRetry = (n, wait, e) => {
      if (e instanceof lith.ConnectionFailed) counts.notSent++;
    };
    const clients = [new lith.Client(server.url, { onRetry }), new lith.Client(server.sock, { onRetry })];
    const db = clients[0];
    try {
      // w: the writes, by key. calls: one row per call of do (the writer's
      // attempt number, no UNIQUE): two rows for one (key, attempt) would be
      // the client sending one call twice.
      await db.do(["CREATE TABLE w(key TEXT UNIQUE NOT NULL, writer INTEGER)",
        "CREATE TABLE calls(key TEXT NOT NULL, attempt INTEGER NOT NULL)"]);
      const done = [];
      let stop = false;
      const writer = async (t) => {
        const c = clients[t % 2];
        for (let i = 0; !stop; i++) {
          const key = `${t}-${i}`;
          for (let attempt = 0; ; attempt++) { // the safe loop (docs/clients.md)
            try {
              await c.do([
                { sql: "INSERT INTO w(key, writer) VALUES (?, ?) ON CONFLICT(key) DO NOTHING", params: [key, t] },
                { sql: "INSERT INTO calls(key, attempt) VALUES (?, ?)", params: [key, attempt] }]);
              break;
            } catch (e) {
              if (!(e instanceof lith.OutcomeUnknown)) throw e;
              counts.lost++;
            }
          }
          done.push(key);
        }
      };
      const t0 = Date.now();
      const writers = [0, 1, 2, 3].map(writer);
      const KILLS = 4;
      for (let k = 0; k < KILLS; k++) {
        await sleep(600);
        await server.kill();
        await sleep(300); // down: connections refused meanwhile
        await server.start();
      }
      await sleep(300);
      stop = true;
      const outcomes = await Promise.allSettled(writers);
      assert.deepEqual(outcomes.filter((o) => o.status === "rejected").map((o) => String(o.reason)), []);
      const keys = [];
      for (let last = 0; ;) { // in pages: an answer holds at most lithd's max_rows
        const page = (await db.query({ sql: "SELECT rowid, key FROM w WHERE rowid > ? ORDER BY rowid LIMIT 5000", params: [last] }))[0].rows;
        if (page.length === 0) break;
        keys.push(...page.map(([, k]) => k));
        last = page[page.length - 1][0];
      }
      assert.deepEqual(keys.sort(), [...done].sort()); // none lost, none doubled, none unaccounted
      assert.equal(new Set(done).size, done.length);
      const twice = await db.query("SELECT key, attempt, count(*) FROM calls GROUP BY key, attempt HAVING count(*) > 1");
      assert.deepEqual(twice[0].rows, []);
      // the run went through what it is for
      assert.ok(counts.lost > 0 && counts.notSent > 0, JSON.stringify(counts));
      const absorbed = (await db.query("SELECT count(*) FROM (SELECT key FROM calls GROUP BY key HAVING count(*) > 1)"))[0].rows[0][0];
      console.log(`${done.length} writes through ${KILLS} kills in ${((Date.now() - t0) / 1000).toFixed(1)} s: ` +
        `${counts.lost} answers lost and sent again by the loop (${absorbed} of them had committed), ` +
        `${counts.notSent} retries of what was not sent`);
    } finally {
      for (const c of clients) c.close();
      await server.stop();
    }
  });
});
