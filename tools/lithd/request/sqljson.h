/*
 * sqljson — lithd's bridge between JSON requests and SQLite statements.
 *
 * A request body names a list of statements with their parameters:
 *
 *   {"statements": [{"sql": "UPDATE t SET v = ? WHERE id = ?", "params": [2, 7]},
 *                   {"sql": "SELECT * FROM t WHERE id = :id", "params": {":id": 7}}]}
 *
 * lithd_batch_parse() reads it with lithd's own JSON reader (json.h),
 * checks it against limits and turns it into a lithd_batch that holds no
 * JSON any more (plain C values in one arena), so the writer thread never
 * walks a JSON tree. lithd_batch_run() runs the whole
 * list inside one lith command (so in one SAVEPOINT: a failing statement
 * undoes the others) and lithd_batch_read() inside lith_read; both collect
 * every row into a lithd_result, which lithd_result_json() turns into
 *
 *   {"results": [{"changes": 1, "last_insert_rowid": 0, "columns": [], "rows": []},
 *                {"changes": 0, "last_insert_rowid": 0, "columns": ["id", "v"],
 *                 "rows": [[7, 2]]}]}
 *
 * or, when a statement failed, into
 *
 *   {"error": {"code": "constraint", "message": "UNIQUE constraint failed: t.id",
 *              "statement": 1}}
 *
 * Values, both ways:
 *   JSON integer  <-> INTEGER, exact over the whole 64-bit range (json.h;
 *                     integers outside it are refused as "too big integer",
 *                     never rounded to a real)
 *   JSON real      -> REAL; a REAL comes back as a JSON number with a '.' or
 *                     an exponent, in the fewest digits that read back as the
 *                     same double; +-Infinity (SQLite can hold it: 1e999)
 *                     comes back as null, JSON has no way to say it
 *   JSON string   <-> TEXT (may contain U+0000)
 *   null          <-> NULL
 *   true / false   -> INTEGER 1 / 0
 *   {"base64": s} <-> BLOB; s in the standard alphabet with '=' padding,
 *                     strict: no whitespace, no missing padding, no stray
 *                     bits. The empty blob is {"base64": ""}.
 * (Integers: see "int64" under Answer format below for JavaScript.)
 * TEXT that is not valid UTF-8 cannot be a JSON string: the statement fails
 * (LITHD_UNENCODABLE, naming row and column) rather than come back as
 * something else; CAST(x AS BLOB) reads such a column as a blob.
 *
 * Parameters: an array binds by position and must hold exactly as many
 * values as the statement has parameters (sqlite3_bind_parameter_count); an
 * object binds by name, its keys spelled as in the SQL (":id", "@id",
 * "$id"), and must name every parameter of the statement and nothing else.
 * No "params" is the same as []. An unbound parameter would silently be
 * NULL; here it is an error.
 *
 * Threads: a lithd_batch or lithd_result is used by one thread at a time
 * (parsed on a lithd thread, run on the writer thread inside lith_do, read
 * back on the lithd thread after lith_do returned: lith orders those).
 *
 * Memory: every object here is created by one call and freed by its own
 * free function; JSON text returned as char * is malloc'd and freed by the
 * caller with free().
 *
 * Inside: three stages, one file each (sqljson_parse.c, sqljson_run.c,
 * sqljson_encode.c), sharing sqljson_int.h; sqljson.c holds the errors and
 * limits all of them use.
 */
#ifndef LITHD_SQLJSON_H
#define LITHD_SQLJSON_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "json.h"
#include "lith.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Result codes --------------------------------------------------------
 * Functions here return LITH_OK, a lith code (a statement's SQLite error
 * through lith_from_sqlite, or LITH_NOMEM), or one of these. They sit in the
 * range lith leaves to commands (LITH_USER and above), so a command that
 * fails with one hands it unchanged to its producer. */
enum {
  LITHD_BAD_REQUEST = LITH_USER + 1,      /* the body is not a valid request: JSON,
                                         shape, types, base64, parameter names */
  LITHD_TOO_LARGE = LITH_USER + 2,        /* the request exceeds a lithd_limits bound */
  LITHD_RESULT_TOO_LARGE = LITH_USER + 3, /* the rows would exceed max_rows or
                                             max_result_bytes (an error, never
                                             a truncated answer) */
  LITHD_UNENCODABLE = LITH_USER + 4,      /* a TEXT value (or column name) is not
                                         valid UTF-8 */
  LITHD_NOT_A_QUERY = LITH_USER + 5,      /* lithd_batch_read met a statement that
                                         is not a read-only query */
  LITHD_TIMEOUT = LITH_USER + 6,          /* the statements ran past max_run_ms */
  LITHD_NOT_FOUND = LITH_USER + 7,        /* no such named command */
  LITHD_FORBIDDEN = LITH_USER + 8,        /* refused by configuration (raw SQL
                                         under --only-named) or the authorizer */
  LITHD_CONFLICT = LITH_USER + 9,         /* the request conflicts with the state of
                                         something (a backup onto the live
                                         database) */
  LITHD_OUTCOME_UNKNOWN = LITH_USER + 10, /* the store lost the answer to its COMMIT
                                         (dqlite: the leader went away after it
                                         was sent): committed or not, nobody
                                         knows; read before sending it again */
  LITHD_TX_TIMEOUT = LITH_USER + 11,      /* an interactive transaction was idle or
                                         open past its bound (store.h) and was
                                         rolled back */
  LITHD_TX_TOO_OLD = LITH_USER + 12       /* a transaction on a snapshot kept the WAL
                                         from starting over past its bound and
                                         was ended (store.h) */
};

/* ---- Limits --------------------------------------------------------------
 * A field left 0 takes the default shown; to lift a bound set it to its
 * type's maximum. The limits are copied into the batch by lithd_batch_parse
 * and hold for its runs. */
typedef struct lithd_limits {
  size_t max_body_bytes;   /* request body; default 8 MiB */
  int max_statements;      /* statements in one request (a Hrana batch's steps, a
                              pipeline's requests); default 10000: a client's
                              bulk batch of a few thousand inserts is common */
  size_t max_sql_bytes;    /* SQL text of one statement; default 100000 */
  int max_params;          /* parameters of one statement; default 1000 */
  int64_t max_rows;        /* rows in one answer, all statements together
                              (RETURNING rows count too); default 10000 */
  size_t max_result_bytes; /* TEXT and BLOB bytes in one answer (with cell_frame,
                              every cell's); default 64 MiB */
  size_t cell_frame;       /* 0 (the default): max_result_bytes counts TEXT and
                              BLOB bytes and column names only, and max_rows
                              bounds the rest (/v1). Else every cell counts
                              too, as its value in JSON (a number's digits, a
                              text's bytes, a blob's base64) plus cell_frame
                              bytes (what the format wraps each value in), and
                              each column name plus cell_frame: max_result_bytes
                              then bounds the answer's size, about, by itself,
                              for a format with no row bound (Hrana, as sqld's
                              answers are bounded by their bytes) */
  int64_t max_run_ms;      /* time to run the whole list, from its first
                              statement (queueing not counted); default 5000.
                              On the writer every other producer waits
                              meanwhile, so keep it short. */
} lithd_limits;

/* Fill *lim with the defaults. */
void lithd_limits_default(lithd_limits *lim);

/* ---- Errors --------------------------------------------------------------
 * What went wrong, and where. Caller-owned storage; nothing to free. */
#define LITHD_ERRMSG_MAX 512
typedef struct lithd_error {
  int code;                       /* LITH_OK, a lith code or a LITHD_ code */
  int statement;                  /* index (from 0) of the statement at fault; -1 if the
                        error is not about one statement */
  char message[LITHD_ERRMSG_MAX]; /* "" when code is LITH_OK */
} lithd_error;

/* Set *err (printf-style message) and return code, so that a caller can
 * write `return lithd_error_set(err, LITHD_BAD_REQUEST, -1, "...")`. A NULL
 * err only returns code. */
int lithd_error_set(lithd_error *err, int code, int statement, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The short name of a code as the JSON "code" field carries it: "ok",
 * "sql_error", "constraint", "bad_request", ... A static string, never NULL. */
const char *lithd_code_name(int code);

/* The HTTP status that answers a code:
 *   LITH_OK                                   200
 *   LITHD_BAD_REQUEST, LITH_ERROR (an SQL
 *     error), LITH_MISUSE (empty SQL, two
 *     statements in one "sql", ...)           400
 *   LITHD_NOT_A_QUERY, LITHD_FORBIDDEN        403  the request was understood,
 *                                                  but /v1/query only reads, or
 *                                                  lithd only runs named
 *                                                  commands
 *   LITHD_NOT_FOUND                           404
 *   LITH_CONSTRAINT, LITHD_CONFLICT           409
 *   LITHD_TOO_LARGE                           413
 *   LITHD_RESULT_TOO_LARGE, LITHD_UNENCODABLE,
 *     LITHD_TIMEOUT                           422  valid request that cannot be
 *                                                  answered within the limits;
 *                                                  the same request again will
 *                                                  fail again: ask less
 *   LITH_BUSY, LITH_QUEUE_FULL, LITH_CLOSED,
 *     LITH_INTERRUPTED, LITH_ABORTED          503  retry later
 *   LITHD_OUTCOME_UNKNOWN                     504  may or may not have committed:
 *                                                  never retried blindly (503
 *                                                  always means "not committed")
 *   LITH_DISKFULL                             507
 *   LITH_READONLY                             500  from SQLite this means the
 *                                                  database cannot be written
 *                                                  (file or directory
 *                                                  permissions, WAL recovery):
 *                                                  the server's fault, not the
 *                                                  client's — a write sent to
 *                                                  /v1/query is
 *                                                  LITHD_NOT_A_QUERY instead
 *   LITH_NOMEM, LITH_IOERR, LITH_CORRUPT,
 *     LITH_CANTOPEN, LITH_SCHEMA, other       500 */
int lithd_http_status(int code);

/* {"error": {"code": ..., "message": ..., "statement": n or null}} as a
 * NUL-terminated string the caller frees with free(); NULL when out of
 * memory. Invalid UTF-8 in the message is replaced by U+FFFD. */
char *lithd_error_json(const lithd_error *err);

/* ---- Answer format --------------------------------------------------------
 * How lithd_result_json writes a result. The request chooses, with keys of
 * its body beside "statements" (/v1/do, /v1/query, each command of
 * /v1/batch):
 *
 *   {"statements": [...], "rows": "objects", "types": true, "int64": "string"}
 *
 * or with the same names as query parameters on any route that answers
 * rows (?rows=objects&types=true&int64=string), which win over the body's:
 *
 *   rows   "arrays" (the default): each row is [v, ...] in the order of
 *          "columns". "objects": each row is {"column": v, ...}. A
 *          statement two of whose columns have the same name (SELECT a.id,
 *          b.id) fails with LITHD_BAD_REQUEST before it is stepped, naming
 *          both columns: an object cannot hold both values, and suffixing
 *          one would make a name the query never had. Name them apart with
 *          AS, or ask for arrays, which stay lossless.
 *   types  false (the default); true adds "types" right after "columns":
 *          each column's declared type as written in CREATE TABLE
 *          (sqlite3_column_decltype: "INTEGER", "TEXT", "VARCHAR(20)", ...)
 *          or null when the column is an expression. Declared, not stored:
 *          SQLite lets a column hold any type.
 *   int64  "number" (the default): every integer is a JSON number, exact
 *          over the 64-bit range. "string": integers beyond +-(2^53 - 1),
 *          which JavaScript's JSON.parse would round to another number,
 *          are JSON strings of their decimal digits instead ("changes" and
 *          "last_insert_rowid" too); the others stay numbers, so an answer
 *          without such integers is the same either way.
 *
 * Answers without these keys are as they always were. Errors are not
 * affected. */
typedef struct lithd_format {
  int rows_objects;  /* 1: rows as objects */
  int types;         /* 1: "types" after "columns" */
  int int64_strings; /* 1: integers beyond +-(2^53 - 1) as strings */
} lithd_format;

/* The largest integer JSON.parse reads exactly: 2^53 - 1. */
#define LITHD_JS_SAFE_INT 9007199254740991LL

/* ---- Requests ------------------------------------------------------------ */

typedef struct lithd_batch lithd_batch;

/* Parse a request body: `body` holds `len` bytes (need not be
 * NUL-terminated; read only during the call). `lim` may be NULL for the
 * defaults (read only during the call; copied). On LITH_OK *out is a batch
 * the caller frees with lithd_batch_free(). On error *out is NULL, the code
 * is LITHD_BAD_REQUEST, LITHD_TOO_LARGE or LITH_NOMEM, and *err (may be
 * NULL) says why and which statement. Unknown keys, at the top level or in a
 * statement, are refused: a misspelt "params" must not run a statement
 * without its parameters. */
int lithd_batch_parse(const char *body, size_t len, const lithd_limits *lim, lithd_batch **out,
                      lithd_error *err);

/* As lithd_batch_parse, from a body already read (json.h): `root` is the
 * object {"statements": [...]} (the caller's; read only during the call:
 * what the batch needs is copied). The body size limit is the caller's to
 * check. */
int lithd_batch_from_value(const lj_value *root, const lithd_limits *lim, lithd_batch **out,
                           lithd_error *err);

/* Apply the answer format's query parameters (`query`: the text after
 * '?', undecoded; NULL or "" for none) to `b`, over what its body said.
 * Parameters are separated by '&'; each must be rows=arrays|objects,
 * types=true|false or int64=number|string. Anything else is
 * LITHD_BAD_REQUEST (*err, may be NULL, says which): a misspelt option must
 * not go unnoticed. Returns LITH_OK. */
int lithd_batch_apply_query(lithd_batch *b, const char *query, lithd_error *err);

/* Make max_result_bytes bound several batches together (each command of
 * one /v1/batch request): their text and blob bytes are added up in
 * *counter (the caller's, zeroed, outliving the batches' runs). */
void lithd_batch_share_result_bytes(lithd_batch *b, _Atomic size_t *counter);

/* The number of statements in `b`. */
int lithd_batch_count(const lithd_batch *b);

/* Free a batch (NULL is fine). Not while it runs. */
void lithd_batch_free(lithd_batch *b);

/* ---- Running -------------------------------------------------------------- */

typedef struct lithd_result lithd_result;

/* Run every statement of `b` in order on the write connection, inside the
 * calling command: call it from a lith_command and return its result, e.g.
 *
 *   static int do_cmd(lith_tx *tx, void *arg) {
 *     struct req *r = arg;
 *     return lithd_batch_run(tx, r->batch, &r->result);
 *   }
 *
 * Statements come from lith_tx_stmt (prepared once, cached). Each statement
 * is stepped to its end; its columns, rows, changes (rows it inserted,
 * updated or deleted itself, 0 for anything else) and last_insert_rowid (the
 * rowid it inserted, else 0) are kept.
 *
 * *out must be NULL or a result of an earlier run of the same command: a
 * command can run more than once (lith.h, lith_command), so each run frees
 * what *out holds and stores a fresh result. On return *out holds either all
 * the statements' results (LITH_OK) or the error (any other code): the index
 * of the failing statement, its code (lith_from_sqlite of SQLite's, or a
 * LITHD_ code) and the message (sqlite3_errmsg). The command's message
 * (lith_errmsg after lith_do) is set too, as "statement i: message". The
 * caller frees *out with lithd_result_free() after lith_do returned. *out is
 * NULL only if memory ran out (LITH_NOMEM).
 *
 * Returning the error makes lith undo the whole command, so a failure at
 * statement i leaves nothing of statements 0..i-1. Note that a LITH_OK here
 * is not a commit: lith_do's own result decides (see lithd_result_json).
 *
 * max_run_ms is enforced on the writer by lith: open the handle with
 * lith_options.command_timeout_ms = max_run_ms, as lithd does (lith's
 * progress handler, every 1000 VM steps, for the command's run only), and
 * by the guard's watchdog where one is connected (guard.h); an interrupt
 * is answered as LITHD_TIMEOUT. A write statement interrupted that way
 * makes SQLite roll back the whole transaction; lith then fails this
 * command alone and runs the others of its batch again. */
int lithd_batch_run(lith_tx *tx, lithd_batch *b, lithd_result **out);

/* As lithd_batch_run, inside a lith_read callback, with lith_rx_stmt on the
 * read connection (one snapshot for the whole list). Only queries run: a
 * statement whose first keyword is not SELECT, WITH, VALUES or EXPLAIN, or
 * for which sqlite3_stmt_readonly() is false, fails with LITHD_NOT_A_QUERY
 * ("write statement on /v1/query") before it is stepped. (Transaction
 * control, ATTACH and PRAGMA count as read-only to SQLite but would end the
 * snapshot or change a pooled connection for later requests.) */
int lithd_batch_read(lith_rx *rx, lithd_batch *b, lithd_result **out);

/* The SQLite authorizer lithd puts on the write connection
 * (lith_options.authorizer; ctx unused), and on the readers: clients' SQL
 * may not ATTACH or DETACH files or call load_extension or fts3_tokenizer;
 * a PRAGMA is lith's rule (lith_command_rule, on the readers too): any may
 * be read, and only what a command can undo set (user_version,
 * defer_foreign_keys, ...), never synchronous, journal_mode,
 * writable_schema or foreign_keys, settings every other client depends on.
 * lithd_batch_run answers a refusal with LITHD_FORBIDDEN. */
int lithd_authorizer(void *ctx, int action, const char *a, const char *b, const char *c, const char *d);

/* The result's code: LITH_OK if every statement ran. If err is not NULL it
 * receives the code, statement index and message. */
int lithd_result_error(const lithd_result *r, lithd_error *err);

/* The result as JSON text: {"results": [...]} when every statement ran,
 * else the error object (as lithd_error_json). NUL-terminated; the caller
 * frees it with free(); NULL when out of memory.
 *
 * After lith_do(db, cmd, arg) returned rc:
 *   - rc == LITH_OK: answer lithd_result_json(result), status 200;
 *   - result != NULL and lithd_result_error(result, &e) == rc: a statement
 *     failed; answer lithd_result_json(result), status lithd_http_status(rc);
 *   - otherwise the transaction failed around a command that may have run
 *     (LITH_BUSY, LITH_IOERR, LITH_ABORTED, ...) or the command never ran
 *     (LITH_CLOSED): the result, if any, was not committed and must not be
 *     sent; answer lithd_error_set(&e, rc, -1, "%s", lith_errmsg(db)).
 * The same holds for lith_read with lithd_batch_read. */
char *lithd_result_json(const lithd_result *r);

/* Free a result (NULL is fine). */
void lithd_result_free(lithd_result *r);

/* About what r takes in memory with its JSON (its share of the answer
 * budget below); 0 for NULL. */
size_t lithd_result_size(const lithd_result *r);

/* ---- The process's answer budget -------------------------------------------
 * Every result, while it is held, holds its share of one budget for the
 * whole process: its text and blob bytes, what its JSON will take (escapes
 * and base64 counted as each cell arrives) and a little per cell. A cell
 * that would take the budget past its bound fails its statement with
 * LITH_BUSY ("retry later", 503: nothing of it committed), so many large
 * answers at once, on every database and every route together, wait for
 * memory instead of meeting the OOM killer; max_result_bytes still bounds
 * one request. Freeing a result gives its share back, unless its JSON
 * took it over (lithd_result_take_budget): an answer still being sent
 * holds its share until its last byte went out. Thread-safe. */

/* The bound in bytes (0: the default, 512 MiB). Call before serving. */
void lithd_answer_budget_set(size_t bytes);

/* Bytes held now, and the bound. */
size_t lithd_answer_budget_used(void);
size_t lithd_answer_budget_cap(void);

/* Move r's share of the budget to the caller (r then holds none; NULL: 0),
 * for the JSON answer that outlives r. Give it back with
 * lithd_answer_budget_release once that answer is sent or dropped. */
size_t lithd_result_take_budget(lithd_result *r);
void lithd_answer_budget_release(size_t bytes);

/* Charge `bytes` that a client makes lithd keep outside any result (a
 * Hrana stream's stored SQL, the stream itself, its answer being built):
 * 0 if the budget had room (give it back with lithd_answer_budget_release),
 * -1 if not (nothing charged: refuse what needed it). */
int lithd_answer_budget_charge(size_t bytes);

/* ---- Writing JSON ---------------------------------------------------------
 * The encoder's own writers, for lithd's other hand-written answers: b is
 * the caller's buffer (buf.h). */

/* s[0..n) as a JSON string, quotes included: '"', '\\' and control
 * characters escaped, valid UTF-8 copied as it is, a byte that starts no
 * valid sequence written as U+FFFD. */
void lithd_json_put_string(lithd_buf *b, const char *s, size_t n);

/* v as a JSON integer, every int64_t exact. */
void lithd_json_put_int(lithd_buf *b, int64_t v);

#ifdef __cplusplus
}
#endif

#endif /* LITHD_SQLJSON_H */
