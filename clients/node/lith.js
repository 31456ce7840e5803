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
//     and https with a CA of the caller's ({ca}) through node:https's, which
//     fetch cannot do. All give the same {status, retryAfter, text}. https
//     always verifies lithd's certificate and name: against {ca} when
//     given, else Node's CAs (plus NODE_EXTRA_CA_CERTS, read when node
//     starts).
//   - 64-bit integers: JSON.parse rounds integers beyond 2^53. By default
//     the client asks lithd for int64=string, so those (and only those)
//     come as strings of their digits, never as another number. With
//     {bigint: true} it reads lithd's answer with its own exact parser
//     (parseExact): every integer of the answer is a BigInt. lithd writes
//     every REAL with a '.' or an exponent, so the two never mix.
//   - What is sent again is what cannot apply anything twice, and the
//     errors say which side a failure is on: ConnectionFailed (nothing
//     committed: safe to send again) and OutcomeUnknown (may have
//     committed; AnswerLost) are separate classes, neither extending the
//     other, so a caller's `catch (e) { if (e instanceof ConnectionFailed)
//     retry }` never resends a write that ran.
//   - Retried within maxRetries and maxRetryWait (milliseconds of waiting
//     in all), one budget for both: a 503 (lithd answers it when the
//     request was not run or was rolled back), waiting its Retry-After;
//     and a request that could not connect because lithd was not there
//     (ECONNREFUSED, ENOENT: lithd restarting), waiting 50 ms doubling to
//     1 s. 504 (outcome_unknown) and every other status are never
//     retried; nor a timeout, nor a certificate refused.
//   - A lost connection is sent again only for a read (query, GETs) that
//     got no answer at all, once. A write (do, command, batch,
//     backupToServer) that connected and was lost or timed out before its
//     answer, or whose answer was cut short after a 200 began, rejects
//     with AnswerLost (an OutcomeUnknown): it may have committed (a 200
//     cut short did). fetch cannot tell whether a byte went out on a
//     connection that failed after connecting, so every such failure of a
//     write is an AnswerLost. Kept-alive connections the server closed
//     while idle are dropped by fetch and node:http's Agent before they
//     are used again.
//   - Where and the token, when not given: the environment as the lith CLI
//     reads it (docs/cli.md): LITHD_UNIX, else LITHD_URL, else
//     http://127.0.0.1:8765; LITHD_TOKEN_FILE, else LITHD_TOKEN.
//   - Concurrency: one Client serves any number of calls at once. TCP
//     connections are fetch's (Node's global pool: one per call in flight,
//     idle ones kept a few seconds); a Unix socket's and https-with-ca's
//     are the client's node:http Agent's, which keeps at most poolSize
//     idle (8).
//   - Answers are gathered into one Buffer (of Content-Length's size when
//     there is one), decoded to a string and dropped before the JSON is
//     parsed, and bounded by maxAnswerBytes (LithError "answer_too_large").
//     A body shorter than its Content-Length is an error, never a shorter
//     answer. backup() streams to a new file beside the destination,
//     synced, and renamed only when the whole download arrived.
//   - {db: "NAME"}: a lithd serving several databases (lithd --db NAME=PATH
//     ...); every /v1/ request goes to /v1/db/NAME/... instead. NAME is
//     checked against lithd's rule (1 to 64 of A-Z a-z 0-9 _ -), so it can
//     never add a piece to the path.

// ---- Errors ----------------------------------------------------------------

/**
 * An error lithd answered (status, code, message, statement), or no answer
 * (ConnectionFailed, AnswerLost). outcomeUnknown: true when the request may
 * have committed (OutcomeUnknown and AnswerLost, and only they).
 */
export class LithError extends Error {
  constructor(message, { code = "error", status = null, statement = null, retryAfter = null } = {}) {
    super(message);
    this.name = new.target.name;
    this.code = code;
    this.status = status;
    this.statement = statement;
    this.retryAfter = retryAfter; // seconds, from Retry-After
    this.outcomeUnknown = false;
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
/**
 * A write that may have committed: whether it did is unknown, and the
 * client did not send it again (that could apply it twice). lithd answered
 * 504 "outcome_unknown" (lithd --dqlite lost the leader after COMMIT was
 * sent; a proxy's 504 gateway timeout is the same), or the write was sent
 * and its answer was lost (AnswerLost). Read the database to learn which,
 * or send it again with an idempotency key (a request id in a UNIQUE
 * column, INSERT ... ON CONFLICT DO NOTHING): docs/clients.md. Never a
 * ConnectionFailed; e.outcomeUnknown is true.
 */
export class OutcomeUnknown extends LithError {
  constructor(message, options) {
    super(message, options);
    this.outcomeUnknown = true;
  }
}
/**
 * No answer, and nothing committed: sending the request again is safe.
 * Connecting failed (refused, no such socket, a certificate that does not
 * verify), or a read (query, GETs, backup) got no answer or a cut one, or
 * timed out (code "timeout", else "connection"); or a write's answer was
 * cut short after an error status, which says it did not commit (status
 * then says what lithd answered). Refused connections and a missing socket
 * were retried first, within maxRetries and maxRetryWait (a lithd
 * restarting); a read lost before its answer began was sent once more. A
 * write lost after it connected is an AnswerLost instead, never this class.
 */
export class ConnectionFailed extends LithError {}
/**
 * A write (do, command, batch, backupToServer) that connected, and whose
 * answer never came (the connection was lost, or it timed out) or was cut
 * short after a 200 began (it ran, its results are lost): it may have
 * committed. An OutcomeUnknown, not a ConnectionFailed. status: lithd's
 * when an answer began, else null.
 */
export class AnswerLost extends OutcomeUnknown {}

const BY_STATUS = {
  400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict,
  413: TooLarge, 422: Unprocessable, 503: Unavailable, 504: OutcomeUnknown,
};
const BY_CODE = { constraint: ConstraintError, queue_full: QueueFull, outcome_unknown: OutcomeUnknown };
// lithd_http_status (tools/lithd/sqljson.h), for the errors inside /v1/batch's 200.
const STATUS_OF_CODE = {
  bad_request: 400, sql_error: 400, misuse: 400, not_a_query: 403, forbidden: 403, not_found: 404,
  constraint: 409, conflict: 409, too_large: 413, result_too_large: 422, unencodable: 422, timeout: 422,
  busy: 503, queue_full: 503, closed: 503, interrupted: 503, aborted: 503, outcome_unknown: 504,
  disk_full: 507,
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

// node:fs for LITHD_TOKEN_FILE, where there is one (the client also runs
// where fetch is all there is).
const fs = globalThis.process?.versions?.node ? await import("node:fs") : null;

// lithd's database names (tools/lithd/options.h, LITHD_DB_NAME_MAX).
const DB_NAME = /^[A-Za-z0-9_-]{1,64}$/;

// The default bound on one answer (maxAnswerBytes): lithd's own default
// limit on a result's row data is 64 MiB.
const MAX_ANSWER = 256 * 1024 * 1024;

// The default retry bounds. 12 retries of 50 ms doubling to 1 s wait about
// 8.5 s for a lithd that is not listening: lithd.service restarts a lithd
// that died after RestartSec=2, and lithd listens within about a second of
// starting (longer for a large WAL to recover), so a restart is ridden out
// with room; 30 s is the most a 503's Retry-After waits in all.
const MAX_RETRIES = 12;
const MAX_RETRY_WAIT = 30000;

// Idle connections the node:http Agent keeps (a Unix socket, https with ca).
const POOL_SIZE = 8;

// lithd_token_read (tools/lithd/util/token.h): the CLI's bound on a token file.
const TOKEN_MAX = 4096;

// What a lithd that is not there (stopped, restarting) gives a connect:
// retried within the bounds.
const NOT_THERE = new Set(["ECONNREFUSED", "ENOENT"]);

// Failures to connect: nothing of the request went out.
const NOT_SENT = new Set(["ECONNREFUSED", "ENOENT", "EACCES", "ENOTSOCK", "EAGAIN", "ENOTFOUND", "EAI_AGAIN",
  "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL", "UND_ERR_CONNECT_TIMEOUT"]);

// No answer began: thrown by the transports, sorted by _send.
class NoAnswer extends Error {
  constructor(cause, timeout) {
    super("no answer");
    this.cause = cause;
    this.timeout = timeout;
    const code = cause && (cause.code ?? (cause.cause && cause.cause.code));
    // a certificate refused: the handshake failed, before the request
    this.sent = timeout || !(NOT_SENT.has(code) || /^ERR_(SSL|TLS)_|CERT|^UNABLE_TO_/.test(code ?? ""));
    this.notThere = !timeout && NOT_THERE.has(code);
  }
}

// Nothing of the request went out and lithd was not there: _request sends
// it again within the retry bounds, else rejects with .error.
class Unsent extends Error {
  constructor(error) {
    super(error.message);
    this.error = error;
  }
}

// The environment variable, null when unset or empty (as the CLI).
function env(name) {
  const v = globalThis.process?.env?.[name];
  return v ? v : null;
}

// The token the lith CLI would send: the file LITHD_TOKEN_FILE names (its
// trailing CR/LF dropped), else LITHD_TOKEN; null without either.
function envToken() {
  const file = env("LITHD_TOKEN_FILE");
  if (file === null) {
    const token = env("LITHD_TOKEN");
    if (token !== null && /[\r\n]/.test(token)) throw new TypeError("LITHD_TOKEN holds a line break");
    return token;
  }
  if (fs === null) throw new TypeError("LITHD_TOKEN_FILE: no file system here");
  const data = fs.readFileSync(file);
  if (data.length > TOKEN_MAX) throw new TypeError(`LITHD_TOKEN_FILE ${file}: larger than ${TOKEN_MAX} bytes`);
  const token = data.toString("utf8").replace(/[\r\n]+$/, "");
  if (token === "" || /[\r\n\0]/.test(token)) throw new TypeError(`LITHD_TOKEN_FILE ${file}: empty, or holds a line break`);
  return token;
}

// The answer ended before its framing said it would, or broke off.
class Cut extends Error {}

// A local failure (writing the download): rejected with as it is.
class Local extends Error {
  constructor(error) {
    super(error.message);
    this.error = error;
  }
}


/**
 * A lithd at `url`: "http://host:port", a Unix socket path
 * ("/run/lithd.sock"), "http+unix://%2Frun%2Flithd.sock", or {unixSocket:
 * path}; without either, the lith CLI's environment: LITHD_UNIX (a socket
 * path), else LITHD_URL, else http://127.0.0.1:8765. Options: token (lithd
 * --token-file; without it the file LITHD_TOKEN_FILE names, else
 * LITHD_TOKEN, else none), timeout (ms, per request; default 30000),
 * maxRetries (12) and maxRetryWait (ms of waiting in all, 30000): how often
 * and how long a request is sent again when that cannot apply it twice, a
 * 503 (after its Retry-After) and a connection refused or a missing socket
 * (lithd not there; 50 ms doubling to 1 s): the defaults wait about 8.5 s
 * for a lithd that is not listening, which rides out a restart
 * (lithd.service restarts a lithd that died after 2 s, and it listens within
 * about a second); 0 turns retrying off. onRetry(attempt, waitMs, error),
 * error the Unavailable or ConnectionFailed retried. poolSize: idle
 * connections kept to a Unix socket or an https lithd with {ca} (8; TCP
 * goes through fetch, whose pool is Node's). rows ("arrays" | "objects"), types
 * (declared column types in "types"), bigint (every integer a BigInt), db
 * (the database NAME of a lithd serving several, lithd --db NAME=PATH ...:
 * every call but health() goes to /v1/db/NAME/...; default: lithd's only or
 * default database; a TypeError unless 1 to 64 of A-Z a-z 0-9 _ -),
 * maxAnswerBytes (the largest answer read, 256 MiB; null: no bound; past it a
 * LithError with code "answer_too_large", its status lithd's: 200 means a
 * write committed; downloads are not bounded, they stream to disk). Each
 * call may override rows, types and bigint. ca: for an https:// URL, the CA
 * certificates (PEM, a string or Buffer; an array of them) to trust instead
 * of Node's (a lithd whose certificate a CA of your own signed); without it,
 * Node's CAs and NODE_EXTRA_CA_CERTS (docs/clients.md: what is sent again and
 * why).
 *
 * do, query, command and batch resolve to lithd's "results": one object per
 * statement with changes, last_insert_rowid, columns, rows (and types). A
 * statement is "SQL" or {sql, params}; params an array (positional) or an
 * object (named, ":k"); a Uint8Array or Buffer is a blob, a BigInt an exact
 * integer. Failures reject with LithError subclasses: OutcomeUnknown when a
 * write may have committed (504, or AnswerLost), ConnectionFailed when
 * nothing committed and the request can be sent again; neither extends the
 * other.
 */
export class Client {
  constructor(url = null, options = {}) {
    if (url !== null && typeof url === "object") [url, options] = [null, url];
    const o = options;
    this.token = o.token ?? envToken();
    this.timeout = o.timeout ?? 30000;
    this.maxRetries = o.maxRetries ?? MAX_RETRIES;
    this.maxRetryWait = o.maxRetryWait ?? MAX_RETRY_WAIT;
    this.poolSize = o.poolSize ?? POOL_SIZE;
    if (!Number.isSafeInteger(this.poolSize) || this.poolSize < 0)
      throw new TypeError(`poolSize: ${String(o.poolSize)} is not a count of connections (0 or more)`);
    this.onRetry = o.onRetry ?? null;
    this.maxAnswerBytes = o.maxAnswerBytes === undefined ? MAX_ANSWER : o.maxAnswerBytes;
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
    if (url === null && this.unixSocket === null) {
      this.unixSocket = env("LITHD_UNIX"); // the socket first, as the CLI
      if (this.unixSocket === null) url = env("LITHD_URL") ?? this.base;
    }
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
    this.ca = o.ca ?? null;
    if (this.ca !== null && (this.unixSocket !== null || !this.base.startsWith("https:")))
      throw new TypeError("ca is for an https:// URL");
    this._http = null; // node:http (a Unix socket) or node:https ({ca}), loaded when first used
    this._agent = null;
  }

  /** POST /v1/do: the statements as one command (all or nothing), on the writer. */
  async do(list, opts = {}) {
    return decodeResults(field(await this._call("POST", "/v1/do", { statements: statements(list) }, opts), "results"));
  }

  /** POST /v1/query: read-only statements on one snapshot, on the read pool. */
  async query(list, opts = {}) {
    const answer = await this._call("POST", "/v1/query", { statements: statements(list) }, opts, true);
    return decodeResults(field(answer, "results"));
  }

  /** POST /v1/commands/NAME: a named command (lithd --commands) with its parameters. */
  async command(name, params = {}, opts = {}) {
    const path = "/v1/commands/" + encodeURIComponent(name);
    return decodeResults(field(await this._call("POST", path, { params }, opts), "results"));
  }

  /**
   * POST /v1/batch: several commands, each its own savepoint and outcome.
   * Resolves to one entry per command, in order: its results, or the
   * LithError it failed with (not thrown: the others stand). Commands the
   * full queue refused (503 codes) are sent again, alone, within the retry
   * bounds; nothing of them ran. One whose outcome is unknown
   * (outcome_unknown) is an OutcomeUnknown, never sent again.
   */
  async batch(commands, opts = {}) {
    const cmds = commands.map((c) => ({ statements: statements(c) }));
    const out = new Array(cmds.length).fill(null);
    let pending = cmds.map((_, n) => n);
    for (let attempt = 0, waited = 0; ; attempt++) {
      const answer = await this._call("POST", "/v1/batch", { commands: pending.map((n) => cmds[n]) }, opts);
      const again = [];
      field(answer, "results").forEach((entry, k) => {
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
    return this._json("GET", "/v1/stats");
  }

  /** GET /healthz: {ok: true} while lithd serves. */
  async health() {
    return this._json("GET", "/healthz");
  }

  /** GET /v1/commands: the named commands with their descriptions and parameters. */
  async commands() {
    return field(await this._json("GET", "/v1/commands"), "commands");
  }

  /**
   * GET /v1/backup: download a consistent snapshot of the live database into
   * the local file `path` (format "sqlite", a database, or "sql", a
   * .dump-style text). Streamed into a new file beside `path`
   * (PATH.XXXXXXXX.part, mode 0600), synced, and renamed onto `path` only
   * once the whole download arrived (as many bytes as its Content-Length, or
   * a chunked body to its end); a download cut short rejects with
   * ConnectionFailed and leaves `path` as it was. The timeout bounds each
   * wait for more of it, not the whole download. Resolves to the bytes
   * written. A lithd without the download answers 405 (LithError);
   * backupToServer works there.
   */
  async backup(path, { format = "sqlite" } = {}) {
    const [{ promises: fs }, nodePath, { randomBytes }] = await Promise.all([
      import("node:fs"), import("node:path"), import("node:crypto")]);
    const part = `${path}.${randomBytes(4).toString("hex")}.part`;
    const query = format === "sqlite" ? "" : "?format=" + encodeURIComponent(format);
    const fh = await fs.open(part, "wx", 0o600);
    let size;
    try {
      try {
        size = await this._request("GET", "/v1/backup" + query, null, fh);
        await fh.sync();
      } finally {
        await fh.close();
      }
      await fs.rename(part, path);
    } catch (e) {
      await fs.rm(part, { force: true });
      throw e;
    }
    try {
      const dir = await fs.open(nodePath.dirname(path), "r");
      await dir.sync().catch(() => {});
      await dir.close();
    } catch {} // where a directory cannot be opened or synced
    return size;
  }

  /** POST /v1/backup {"dest": name}: lithd writes the new file `name` into its --backup-dir. */
  async backupToServer(name) {
    return this._json("POST", "/v1/backup", stringify({ dest: name }));
  }

  /** Close kept-alive Unix socket connections (TCP ones are fetch's). */
  close() {
    if (this._agent) this._agent.destroy();
  }

  // ---- Transport -----------------------------------------------------------------

  async _call(method, path, body, opts, read = false) {
    const rows = opts.rows ?? this.rows;
    const types = opts.types ?? this.types;
    const bigint = opts.bigint ?? this.bigint;
    const q = [];
    if (rows !== "arrays") q.push("rows=" + encodeURIComponent(rows));
    if (types) q.push("types=true");
    if (!bigint) q.push("int64=string"); // beyond 2^53: strings, never rounded
    const target = path + (q.length ? "?" + q.join("&") : "");
    return this._json(method, target, stringify(body), read, bigint);
  }

  // The answer's JSON; a 200 that is not JSON is a LithError ("bad_answer").
  async _json(method, path, body = null, read = method === "GET", bigint = false) {
    const text = await this._request(method, path, body, null, read);
    try {
      return bigint ? parseExact(text) : JSON.parse(text);
    } catch (e) {
      const ran = read ? "" : " (lithd answered 200: the request ran)";
      throw new LithError(`${this._where()}: the answer to ${method} ${path} is not JSON${ran}: ${e.message}`,
        { code: "bad_answer", status: 200 });
    }
  }

  // The answer's text, or with a sink (a FileHandle) the bytes a 200 wrote to it.
  async _request(method, path, body = null, sink = null, read = method === "GET") {
    if (this.db !== null && path.startsWith("/v1/")) path = "/v1/db/" + this.db + path.slice(3); // not /healthz
    for (let attempt = 0, waited = 0; ; attempt++) {
      let err, wait = null;
      try {
        const res = await this._send(method, this.prefix + path, body, sink, read);
        if (res.status < 400) return sink !== null ? res.written : res.text;
        err = this._error(res);
        // outcome_unknown is never retried, whatever status came with it
        if (res.status !== 503 || err instanceof OutcomeUnknown) throw err;
        if (err.retryAfter !== null) wait = err.retryAfter * 1000;
      } catch (e) {
        if (!(e instanceof Unsent)) throw e;
        err = e.error; // lithd was not there: nothing of it went out
      }
      wait ??= Math.min(50 * 2 ** attempt, 1000);
      if (attempt >= this.maxRetries || waited + wait > this.maxRetryWait) {
        if (attempt) err.message += ` (sent ${attempt + 1} times over ${waited} ms)`;
        throw err;
      }
      if (this.onRetry) this.onRetry(attempt + 1, wait, err);
      await sleep(wait);
      waited += wait;
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
    // identity: a Content-Length is then the length of what is read
    const h = { accept: "application/json", "accept-encoding": "identity" };
    if (body !== null) h["content-type"] = "application/json";
    if (this.token !== null) h.authorization = "Bearer " + this.token;
    return h;
  }

  _where() {
    return this.unixSocket !== null ? `lithd at ${this.unixSocket}` : `lithd at ${this.base}`;
  }

  /**
   * One exchange: {status, retryAfter, text} (or written, for a 200 to a
   * sink). Sent again only for a read that got no answer at all, once.
   */
  async _send(method, path, body, sink, read) {
    for (let resent = false; ;) {
      try {
        const viaNode = this.unixSocket !== null || this.ca !== null;
        return await (viaNode ? this._sendNode : this._sendFetch).call(this, method, path, body, sink);
      } catch (e) {
        if (e instanceof Local) throw e.error;
        if (e instanceof Cut) throw this._cut(method, path, e.status, read, e.cause ?? e, e.timeout);
        if (!(e instanceof NoAnswer)) throw e;
        if (e.sent && read && !resent && !e.timeout) {
          resent = true; // a read: nothing to apply twice
          continue;
        }
        const Cls = e.sent && !read ? AnswerLost : ConnectionFailed;
        let why = e.timeout ? `timed out after ${this.timeout} ms` : describe(e.cause);
        if (Cls === AnswerLost) why += " (the request was sent: whether it committed is unknown)";
        const err = new Cls(`${this._where()}: ${why}`, { code: e.timeout ? "timeout" : "connection" });
        throw !e.sent && e.notThere ? new Unsent(err) : err;
      }
    }
  }

  // An answer that began and was cut short: for a write whose status says it
  // ran (2xx) or may have (504), an AnswerLost; else (a read, or an error
  // status: nothing committed) a ConnectionFailed.
  _cut(method, path, status, read, cause, timeout) {
    let why = timeout ? `timed out after ${this.timeout} ms` : `cut short (${describe(cause)})`;
    const ran = !read && (status < 400 || status === 504);
    if (ran) why += status === 200 ? " (lithd answered 200: the request ran)" : " (whether it committed is unknown)";
    return new (ran ? AnswerLost : ConnectionFailed)(`${this._where()}: the answer (HTTP ${status}) to ${method} ${path} ${why}`,
      { code: timeout ? "timeout" : "connection", status });
  }

  _tooLarge(status, size) {
    const ran = status === 200 ? " (lithd answered 200: the request ran)" : "";
    return new LithError(`${this._where()}: an answer of ${size} is over maxAnswerBytes (${this.maxAnswerBytes})${ran}`,
      { code: "answer_too_large", status });
  }

  /**
   * A body (chunks from `next()`, null at the end) as text, at most
   * maxAnswerBytes. The chunks are copied into one Buffer (of the
   * Content-Length's size when there is one) as they come and let go; it is
   * decoded at once and dropped before the JSON is parsed. (Decoding each
   * chunk and joining the strings peaked higher: clients/answer-rss.py.)
   */
  async _gather(status, length, next) {
    const limit = this.maxAnswerBytes;
    if (limit !== null && length !== null && length > limit) throw this._tooLarge(status, `${length} bytes`);
    let buf = Buffer.allocUnsafe(length ?? 1 << 16); // not read before it is written
    let got = 0;
    for (let c; (c = await next()) !== null;) {
      if (limit !== null && got + c.length > limit) throw this._tooLarge(status, `more than ${limit} bytes`);
      if (length !== null && got + c.length > length) throw new Cut(`more than its Content-Length (${length} bytes)`);
      if (got + c.length > buf.length) {
        // chunked: grown by doubling (to the bound at most), copied once each time
        const more = Buffer.allocUnsafe(Math.min(Math.max(2 * buf.length, got + c.length), limit ?? Infinity));
        buf.copy(more, 0, 0, got);
        buf = more;
      }
      buf.set(c, got);
      got += c.length;
    }
    if (length !== null && got !== length) throw new Cut(`after ${got} of ${length} bytes`);
    const bytes = buf.subarray(0, got);
    try {
      // a 200 must be UTF-8 (it is parsed); an error's text is only shown
      return status === 200 ? new TextDecoder("utf-8", { fatal: true }).decode(bytes) : bytes.toString("utf8");
    } catch (e) {
      if (e instanceof TypeError)
        throw new LithError(`${this._where()}: the answer (HTTP ${status}) is not UTF-8, so not JSON`, { code: "bad_answer", status });
      throw this._tooLarge(status, `${got} bytes (${e.message})`); // longer than a string can be
    }
  }

  // A 200's body to the FileHandle sink, chunk by chunk; its length. Only a
  // body whose end can be told from a cut (Content-Length, chunked) is taken.
  async _download(length, chunked, next, sink) {
    if (length === null && !chunked)
      throw new LithError(`${this._where()}: the download has neither a Content-Length nor chunks: a cut could not be told from its end`,
        { code: "bad_answer", status: 200 });
    let got = 0;
    for (let c; (c = await next()) !== null;) {
      try {
        for (let off = 0; off < c.length;) {
          const { bytesWritten } = await sink.write(c, off, c.length - off);
          if (bytesWritten <= 0) throw new Error("writing the download: nothing was written");
          off += bytesWritten;
        }
      } catch (e) {
        throw new Local(e);
      }
      got += c.length;
    }
    if (length !== null && got !== length) throw new Cut(`after ${got} of ${length} bytes`);
    return got;
  }

  async _sendFetch(method, path, body, sink) {
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), this.timeout);
    let res;
    try {
      res = await fetch(this.base + path, { method, headers: this._headers(body), body: body ?? undefined, signal: ac.signal });
    } catch (e) {
      clearTimeout(timer);
      throw new NoAnswer(e, ac.signal.aborted);
    }
    const reader = res.body ? res.body.getReader() : null;
    const next = async () => {
      if (reader === null) return null;
      const { done, value } = await reader.read();
      if (sink !== null) timer.refresh(); // a download: the timeout bounds each wait
      return done ? null : value;
    };
    const length = contentLength(res.headers.get("content-length"), res.headers.get("content-encoding"));
    try {
      if (sink !== null && res.status === 200) {
        const chunked = /chunked/i.test(res.headers.get("transfer-encoding") ?? "");
        return { status: 200, retryAfter: null, written: await this._download(length, chunked, next, sink) };
      }
      return { status: res.status, retryAfter: res.headers.get("retry-after"), text: await this._gather(res.status, length, next) };
    } catch (e) {
      const timeout = ac.signal.aborted;
      ac.abort(); // what is left of the answer is not read
      if (e instanceof Cut) e.status = res.status;
      else if (!(e instanceof LithError) && !(e instanceof Local)) e = Object.assign(new Cut(), { status: res.status, cause: e, timeout });
      throw e;
    } finally {
      clearTimeout(timer);
    }
  }

  // A Unix socket (node:http), or https with {ca} (node:https).
  async _sendNode(method, path, body, sink) {
    let where;
    if (this.unixSocket !== null) {
      where = { socketPath: this.unixSocket };
      if (this._http === null) {
        this._http = await import("node:http");
        this._agent = new this._http.Agent({ keepAlive: this.poolSize > 0, maxFreeSockets: Math.max(this.poolSize, 1) });
      }
    } else {
      const u = new URL(this.base);
      where = { host: u.hostname.replace(/^\[(.*)\]$/, "$1"), port: u.port || 443 };
      if (this._http === null) {
        this._http = await import("node:https");
        this._agent = new this._http.Agent({ keepAlive: this.poolSize > 0, maxFreeSockets: Math.max(this.poolSize, 1), ca: this.ca, minVersion: "TLSv1.2" });
      }
    }
    const headers = this._headers(body);
    if (body !== null) headers["content-length"] = Buffer.byteLength(body);
    let timedOutFlag = false;
    const res = await new Promise((resolve, reject) => {
      const req = this._http.request({ ...where, path, method, headers, agent: this._agent }, resolve);
      req.setTimeout(this.timeout, () => {
        timedOutFlag = true;
        req.destroy(new Error("timeout"));
      });
      req.on("error", (e) => reject(new NoAnswer(e, timedOutFlag)));
      req.end(body ?? undefined);
    });
    // the chunks of res, null at its end; an answer that broke off throws
    const it = res[Symbol.asyncIterator]();
    const next = async () => {
      const { done, value } = await it.next();
      if (!done) return value;
      if (!res.complete) throw new Error("the connection closed before the answer's end");
      return null;
    };
    const length = contentLength(res.headers["content-length"], res.headers["content-encoding"]);
    try {
      if (sink !== null && res.statusCode === 200) {
        const chunked = /chunked/i.test(res.headers["transfer-encoding"] ?? "");
        return { status: 200, retryAfter: null, written: await this._download(length, chunked, next, sink) };
      }
      return { status: res.statusCode, retryAfter: res.headers["retry-after"] ?? null, text: await this._gather(res.statusCode, length, next) };
    } catch (e) {
      res.destroy();
      if (e instanceof Cut) e.status = res.statusCode;
      else if (!(e instanceof LithError) && !(e instanceof Local)) e = Object.assign(new Cut(), { status: res.statusCode, cause: e, timeout: timedOutFlag });
      throw e;
    }
  }
}

// answer[key] of a JSON object lithd answered, or a LithError.
function field(answer, key) {
  if (answer === null || typeof answer !== "object" || Array.isArray(answer) || !(key in answer))
    throw new LithError(`the answer has no "${key}": not lithd's, or from a lithd too old or too new`, { code: "bad_answer", status: 200 });
  return answer[key];
}

// A Content-Length to check what was read against: none when the body is encoded.
function contentLength(v, encoding) {
  if (v === null || v === undefined || (encoding && encoding !== "identity")) return null;
  const n = Number(v);
  return Number.isSafeInteger(n) && n >= 0 ? n : null;
}

function describe(e) {
  if (!e) return "no answer";
  const c = e.cause && e.cause.message ? `: ${e.cause.message}` : "";
  return (e.code ? `${e.code} ` : "") + (e.message || String(e)) + c;
}
