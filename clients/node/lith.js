// lith: a client for lithd, the single-writer SQLite server. No
// dependencies; Node 18+; an ES module.
//
//   import { Client } from "lith";
//   const db = new Client("http://127.0.0.1:8765", { rows: "objects" });
//   await db.do(["CREATE TABLE IF NOT EXISTS kv(k TEXT PRIMARY KEY, v)",
//                { sql: "INSERT INTO kv VALUES (?, ?)", params: ["a", 1] }]);
//   console.log((await db.query("SELECT * FROM kv"))[0].rows);  // [ { k: 'a', v: 1 } ]
//
// Design:
//   - TCP goes through fetch (so the client also runs where fetch is all
//     there is); a Unix socket through node:http's request({socketPath}),
//     which fetch cannot do. Both give the same {status, retryAfter, text}.
//   - 64-bit integers: JSON.parse rounds integers beyond 2^53. By default
//     the client asks lithd for int64=string, so those (and only those)
//     come as strings of their digits, never as another number. With
//     {bigint: true} it reads lithd's answer with its own exact parser
//     (parseExact): every integer of the answer is a BigInt. lithd writes
//     every REAL with a '.' or an exponent, so the two never mix.
//   - 503 is retried, and only 503: lithd answers it when the request was
//     not run or was rolled back, so a retry never applies a write twice.
//     The wait is Retry-After, else a short doubling backoff; bounded by
//     maxRetries and by maxRetryWait milliseconds of waiting in all.
//   - {db: "NAME"}: a lithd serving several databases (lithd --db NAME=PATH
//     ...); every /v1/ request goes to /v1/db/NAME/... instead. NAME is
//     checked against lithd's rule (1 to 64 of A-Z a-z 0-9 _ -), so it can
//     never add a piece to the path.

// ---- Errors ----------------------------------------------------------------

/** An error lithd answered (status, code, message, statement), or no answer (ConnectionFailed). */
export class LithError extends Error {
  constructor(message, { code = "error", status = null, statement = null, retryAfter = null } = {}) {
    super(message);
    this.name = new.target.name;
    this.code = code;
    this.status = status;
    this.statement = statement;
    this.retryAfter = retryAfter; // seconds, from Retry-After
  }
}
/** 400: the request or its SQL is wrong (bad_request, sql_error, misuse). */
export class BadRequest extends LithError {}
/** 401: no bearer token, or the wrong one. */
export class Unauthorized extends LithError {}
/** 403: refused by configuration (not_a_query, forbidden, an Origin). */
export class Forbidden extends LithError {}
/** 404: no such named command or route. */
export class NotFound extends LithError {}
/** 409: conflicts with the database's state. */
export class Conflict extends LithError {}
/** 409 with code "constraint": UNIQUE, NOT NULL, CHECK, FOREIGN KEY. */
export class ConstraintError extends Conflict {}
/** 413: over one of lithd's limits. */
export class TooLarge extends LithError {}
/** 422: cannot be answered within the limits (result_too_large, unencodable, timeout). */
export class Unprocessable extends LithError {}
/** 503 after the client's retries: nothing of the request was committed. */
export class Unavailable extends LithError {}
/** 503 with code "queue_full". */
export class QueueFull extends Unavailable {}
/** Other 5xx: lithd's own failure (500), disk full (507). */
export class ServerError extends LithError {}
/** No answer: connecting, sending or reading failed, or timed out (code "timeout"). */
export class ConnectionFailed extends LithError {}

const BY_STATUS = {
  400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict,
  413: TooLarge, 422: Unprocessable, 503: Unavailable,
};
const BY_CODE = { constraint: ConstraintError, queue_full: QueueFull };
// lithd_http_status (tools/lithd/sqljson.h), for the errors inside /v1/batch's 200.
const STATUS_OF_CODE = {
  bad_request: 400, sql_error: 400, misuse: 400, not_a_query: 403, forbidden: 403, not_found: 404,
  constraint: 409, conflict: 409, too_large: 413, result_too_large: 422, unencodable: 422, timeout: 422,
  busy: 503, queue_full: 503, closed: 503, interrupted: 503, aborted: 503, disk_full: 507,
};

function errorFor(status, code, message, statement = null, retryAfter = null) {
  const Cls = BY_CODE[code] || BY_STATUS[status] || (status >= 500 ? ServerError : LithError);
  statement = statement === null || statement === undefined ? null : Number(statement);
  return new Cls(message, { code, status, statement, retryAfter });
}

// ---- Exact JSON --------------------------------------------------------------

const NUMBER = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;

/** JSON.parse, except that every integer becomes a BigInt (reals stay numbers). */
export function parseExact(text) {
  let i = 0;
  const fail = (what) => {
    throw new SyntaxError(`JSON: ${what} at offset ${i}`);
  };
  const ws = () => {
    for (let c = text.charCodeAt(i); c === 32 || c === 9 || c === 10 || c === 13; c = text.charCodeAt(++i));
  };
  const string = () => {
    const start = i++;
    for (;;) {
      const c = text.charCodeAt(i);
      if (Number.isNaN(c)) fail("unterminated string");
      if (c === 92) i += 2; // a backslash and what it escapes
      else if (c === 34) break;
      else i++;
    }
    i++;
    return JSON.parse(text.slice(start, i)); // the escapes, exactly as JSON.parse does them
  };
  const value = () => {
    ws();
    const c = text[i];
    if (c === "{") {
      const o = {};
      i++;
      ws();
      if (text[i] === "}") return i++, o;
      for (;;) {
        ws();
        if (text[i] !== '"') fail("expected a key");
        const k = string();
        ws();
        if (text[i++] !== ":") fail("expected ':'");
        // an own property even for "__proto__", as JSON.parse makes it
        Object.defineProperty(o, k, { value: value(), enumerable: true, writable: true, configurable: true });
        ws();
        if (text[i] === ",") i++;
        else if (text[i] === "}") return i++, o;
        else fail("expected ',' or '}'");
      }
    }
    if (c === "[") {
      const a = [];
      i++;
      ws();
      if (text[i] === "]") return i++, a;
      for (;;) {
        a.push(value());
        ws();
        if (text[i] === ",") i++;
        else if (text[i] === "]") return i++, a;
        else fail("expected ',' or ']'");
      }
    }
    if (c === '"') return string();
    for (const [word, v] of [["true", true], ["false", false], ["null", null]])
      if (text.startsWith(word, i)) return (i += word.length), v;
    NUMBER.lastIndex = i;
    const m = NUMBER.exec(text);
    if (!m) fail("unexpected character");
    i = NUMBER.lastIndex;
    return m[1] === undefined && m[2] === undefined ? BigInt(m[0]) : Number(m[0]);
  };
  const v = value();
  ws();
  if (i !== text.length) fail("trailing text");
  return v;
}

/** JSON text for a request: BigInt as its digits, bytes as {"base64": ...}. */
function stringify(v) {
  if (typeof v === "bigint") return v.toString();
  if (v instanceof Uint8Array) return JSON.stringify({ base64: toBase64(v) });
  if (v instanceof ArrayBuffer) return stringify(new Uint8Array(v));
  if (typeof v === "number" && !Number.isFinite(v)) throw new TypeError(`${v} has no JSON form`);
  if (Array.isArray(v)) return "[" + v.map((x) => (x === undefined ? "null" : stringify(x))).join(",") + "]";
  if (v !== null && typeof v === "object") {
    const parts = [];
    for (const [k, x] of Object.entries(v)) if (x !== undefined) parts.push(JSON.stringify(k) + ":" + stringify(x));
    return "{" + parts.join(",") + "}";
  }
  return JSON.stringify(v === undefined ? null : v);
}

function toBase64(bytes) {
  if (globalThis.Buffer) return globalThis.Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s);
}

function fromBase64(s) {
  if (globalThis.Buffer) return globalThis.Buffer.from(s, "base64");
  return Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
}

// ---- Statements and results ----------------------------------------------------

function statement(s) {
  if (typeof s === "string") return { sql: s };
  if (s !== null && typeof s === "object" && typeof s.sql === "string") return s;
  throw new TypeError(`a statement is "SQL" or {sql, params}, not ${String(s)}`);
}

function statements(list) {
  return (Array.isArray(list) ? list : [list]).map(statement);
}

// A cell that is an object is a blob: lithd writes no other object as a value.
function cell(v) {
  if (v !== null && typeof v === "object" && !Array.isArray(v)) {
    const keys = Object.keys(v);
    if (keys.length === 1 && keys[0] === "base64") return fromBase64(v.base64);
  }
  return v;
}

function decodeResults(results) {
  for (const r of results) {
    const rows = r.rows || [];
    for (let n = 0; n < rows.length; n++) {
      const row = rows[n];
      if (Array.isArray(row)) rows[n] = row.map(cell);
      else for (const k of Object.keys(row)) Object.defineProperty(row, k, { value: cell(row[k]), enumerable: true, writable: true, configurable: true });
    }
  }
  return results;
}

function retryAfterSeconds(v) {
  if (!v) return null;
  const n = Number(v);
  if (Number.isFinite(n)) return Math.max(0, n);
  const t = Date.parse(v);
  return Number.isNaN(t) ? null : Math.max(0, (t - Date.now()) / 1000);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- The client ------------------------------------------------------------------

// lithd's database names (tools/lithd/options.h, LITHD_DB_NAME_MAX).
const DB_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * A lithd at `url`: "http://host:port" (default http://127.0.0.1:8765), a Unix
 * socket path ("/run/lithd.sock"), "http+unix://%2Frun%2Flithd.sock", or
 * {unixSocket: path}. Options: token (lithd --token-file), timeout (ms, per
 * request; default 30000), maxRetries (5), maxRetryWait (ms of waiting in all,
 * 30000), onRetry(attempt, waitMs, error), rows ("arrays" | "objects"), types
 * (declared column types in "types"), bigint (every integer a BigInt), db
 * (the database NAME of a lithd serving several, lithd --db NAME=PATH ...:
 * every call but health() goes to /v1/db/NAME/...; default: lithd's only or
 * default database; a TypeError unless 1 to 64 of A-Z a-z 0-9 _ -). Each
 * call may override rows, types and bigint.
 *
 * do, query, command and batch resolve to lithd's "results": one object per
 * statement with changes, last_insert_rowid, columns, rows (and types). A
 * statement is "SQL" or {sql, params}; params an array (positional) or an
 * object (named, ":k"); a Uint8Array or Buffer is a blob, a BigInt an exact
 * integer. Failures reject with LithError subclasses.
 */
export class Client {
  constructor(url = null, options = {}) {
    if (url !== null && typeof url === "object") [url, options] = [null, url];
    const o = options;
    this.token = o.token ?? null;
    this.timeout = o.timeout ?? 30000;
    this.maxRetries = o.maxRetries ?? 5;
    this.maxRetryWait = o.maxRetryWait ?? 30000;
    this.onRetry = o.onRetry ?? null;
    this.rows = o.rows ?? "arrays";
    this.types = o.types ?? false;
    this.bigint = o.bigint ?? false;
    if (this.rows !== "arrays" && this.rows !== "objects") throw new TypeError('rows must be "arrays" or "objects"');
    this.db = o.db ?? null;
    if (this.db !== null && !(typeof this.db === "string" && DB_NAME.test(this.db)))
      throw new TypeError(`db: ${JSON.stringify(this.db)} is not a database name (1 to 64 of A-Z a-z 0-9 _ -)`);
    this.unixSocket = o.unixSocket ?? null;
    this.base = "http://127.0.0.1:8765";
    this.prefix = "";
    if (url === null && this.unixSocket === null) url = this.base;
    if (url !== null) {
      if (url.startsWith("/")) this.unixSocket = url;
      else {
        const u = new URL(url);
        if (u.protocol === "http+unix:") this.unixSocket = decodeURIComponent(u.host);
        else if (u.protocol === "http:" || u.protocol === "https:") this.base = u.origin;
        else throw new TypeError(`not a lithd address: ${url} (http://host:port, a socket path, http+unix://...)`);
        this.prefix = u.pathname.replace(/\/+$/, "");
      }
    }
    this._http = null; // node:http, loaded for a Unix socket
    this._agent = null;
  }

  /** POST /v1/do: the statements as one command (all or nothing), on the writer. */
  async do(list, opts = {}) {
    return decodeResults((await this._call("POST", "/v1/do", { statements: statements(list) }, opts)).results);
  }

  /** POST /v1/query: read-only statements on one snapshot, on the read pool. */
  async query(list, opts = {}) {
    return decodeResults((await this._call("POST", "/v1/query", { statements: statements(list) }, opts)).results);
  }

  /** POST /v1/commands/NAME: a named command (lithd --commands) with its parameters. */
  async command(name, params = {}, opts = {}) {
    const path = "/v1/commands/" + encodeURIComponent(name);
    return decodeResults((await this._call("POST", path, { params }, opts)).results);
  }

  /**
   * POST /v1/batch: several commands, each its own savepoint and outcome.
   * Resolves to one entry per command, in order: its results, or the
   * LithError it failed with (not thrown: the others stand). Commands the
   * full queue refused (503 codes) are sent again, alone, within the retry
   * bounds; nothing of them ran.
   */
  async batch(commands, opts = {}) {
    const cmds = commands.map((c) => ({ statements: statements(c) }));
    const out = new Array(cmds.length).fill(null);
    let pending = cmds.map((_, n) => n);
    for (let attempt = 0, waited = 0; ; attempt++) {
      const answer = await this._call("POST", "/v1/batch", { commands: pending.map((n) => cmds[n]) }, opts);
      const again = [];
      answer.results.forEach((entry, k) => {
        const n = pending[k];
        if (entry.error) {
          const e = entry.error;
          out[n] = errorFor(STATUS_OF_CODE[e.code] ?? 500, e.code, e.message, e.statement);
          if (out[n].status === 503) again.push(n);
        } else out[n] = decodeResults(entry.results);
      });
      const wait = Math.min(50 * 2 ** attempt, 1000);
      if (again.length === 0 || attempt >= this.maxRetries || waited + wait > this.maxRetryWait) return out;
      if (this.onRetry) this.onRetry(attempt + 1, wait, out[again[0]]);
      await sleep(wait);
      waited += wait;
      pending = again;
    }
  }

  /** GET /v1/stats: lithd's counters. */
  async stats() {
    return JSON.parse((await this._request("GET", "/v1/stats")).text);
  }

  /** GET /healthz: {ok: true} while lithd serves. */
  async health() {
    return JSON.parse((await this._request("GET", "/healthz")).text);
  }

  /** GET /v1/commands: the named commands with their descriptions and parameters. */
  async commands() {
    return JSON.parse((await this._request("GET", "/v1/commands")).text).commands;
  }

  /**
   * GET /v1/backup: download a consistent snapshot of the live database into
   * the local file `path` (format "sqlite", a database, or "sql", a
   * .dump-style text), written to path + ".part" and renamed into place when
   * complete. Resolves to the bytes written. A lithd without the download
   * answers 405 (LithError); backupToServer works there.
   */
  async backup(path, { format = "sqlite" } = {}) {
    const fs = await import("node:fs");
    const part = path + ".part";
    const query = format === "sqlite" ? "" : "?format=" + encodeURIComponent(format);
    try {
      await this._request("GET", "/v1/backup" + query, null, part);
      const { size } = await fs.promises.stat(part);
      await fs.promises.rename(part, path);
      return size;
    } catch (e) {
      await fs.promises.rm(part, { force: true });
      throw e;
    }
  }

  /** POST /v1/backup {"dest": name}: lithd writes the new file `name` into its --backup-dir. */
  async backupToServer(name) {
    return JSON.parse((await this._request("POST", "/v1/backup", stringify({ dest: name }))).text);
  }

  /** Close kept-alive Unix socket connections (TCP ones are fetch's). */
  close() {
    if (this._agent) this._agent.destroy();
  }

  // ---- Transport -----------------------------------------------------------------

  async _call(method, path, body, opts) {
    const rows = opts.rows ?? this.rows;
    const types = opts.types ?? this.types;
    const bigint = opts.bigint ?? this.bigint;
    const q = [];
    if (rows !== "arrays") q.push("rows=" + encodeURIComponent(rows));
    if (types) q.push("types=true");
    if (!bigint) q.push("int64=string"); // beyond 2^53: strings, never rounded
    const target = path + (q.length ? "?" + q.join("&") : "");
    const { text } = await this._request(method, target, stringify(body));
    return bigint ? parseExact(text) : JSON.parse(text);
  }

  async _request(method, path, body = null, sink = null) {
    if (this.db !== null && path.startsWith("/v1/")) path = "/v1/db/" + this.db + path.slice(3); // not /healthz
    for (let attempt = 0, waited = 0; ; attempt++) {
      const res = await this._send(method, this.prefix + path, body, sink);
      if (res.status < 400) return res;
      const err = this._error(res);
      if (res.status === 503 && attempt < this.maxRetries) {
        const wait = err.retryAfter !== null ? err.retryAfter * 1000 : Math.min(50 * 2 ** attempt, 1000);
        if (waited + wait <= this.maxRetryWait) {
          if (this.onRetry) this.onRetry(attempt + 1, wait, err);
          await sleep(wait);
          waited += wait;
          continue;
        }
      }
      throw err;
    }
  }

  _error(res) {
    const retryAfter = retryAfterSeconds(res.retryAfter);
    try {
      const e = JSON.parse(res.text).error;
      return errorFor(res.status, e.code ?? "error", e.message ?? "", e.statement ?? null, retryAfter);
    } catch {
      return errorFor(res.status, `http_${res.status}`, res.text.slice(0, 200), null, retryAfter);
    }
  }

  _headers(body) {
    const h = { accept: "application/json" };
    if (body !== null) h["content-type"] = "application/json";
    if (this.token !== null) h.authorization = "Bearer " + this.token;
    return h;
  }

  _where() {
    return this.unixSocket !== null ? `lithd at ${this.unixSocket}` : `lithd at ${this.base}`;
  }

  _noAnswer(e) {
    const timeout = e && (e.name === "TimeoutError" || e.code === "ETIMEDOUT" || e.message === "timeout");
    const why = timeout ? `timed out after ${this.timeout} ms` : (e && e.cause && e.cause.message) || String(e && e.message);
    return new ConnectionFailed(`${this._where()}: ${why}`, { code: timeout ? "timeout" : "connection" });
  }

  async _send(method, path, body, sink) {
    if (this.unixSocket !== null) return this._sendUnix(method, path, body, sink);
    let res;
    try {
      res = await fetch(this.base + path, {
        method, headers: this._headers(body), body: body ?? undefined, signal: AbortSignal.timeout(this.timeout),
      });
      if (sink !== null && res.status === 200) {
        const [{ createWriteStream }, { Readable }, { pipeline }] = await Promise.all([
          import("node:fs"), import("node:stream"), import("node:stream/promises")]);
        await pipeline(Readable.fromWeb(res.body), createWriteStream(sink));
        return { status: res.status, retryAfter: null, text: "" };
      }
      return { status: res.status, retryAfter: res.headers.get("retry-after"), text: await res.text() };
    } catch (e) {
      throw this._noAnswer(e);
    }
  }

  async _sendUnix(method, path, body, sink) {
    if (this._http === null) {
      this._http = await import("node:http");
      this._agent = new this._http.Agent({ keepAlive: true });
    }
    const fs = sink !== null ? await import("node:fs") : null;
    return new Promise((resolve, reject) => {
      const headers = this._headers(body);
      if (body !== null) headers["content-length"] = Buffer.byteLength(body);
      const req = this._http.request({ socketPath: this.unixSocket, path, method, headers, agent: this._agent }, (res) => {
        const done = (text) => resolve({ status: res.statusCode, retryAfter: res.headers["retry-after"] ?? null, text });
        res.on("error", (e) => reject(this._noAnswer(e)));
        if (fs !== null && res.statusCode === 200) {
          const out = fs.createWriteStream(sink);
          out.on("error", reject);
          out.on("finish", () => done(""));
          res.pipe(out);
          return;
        }
        const chunks = [];
        res.on("data", (c) => chunks.push(c));
        res.on("end", () => done(Buffer.concat(chunks).toString("utf8")));
      });
      req.setTimeout(this.timeout, () => req.destroy(new Error("timeout")));
      req.on("error", (e) => reject(this._noAnswer(e)));
      req.end(body ?? undefined);
    });
  }
}
