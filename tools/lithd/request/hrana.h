/*
 * hrana — lithd's third request format: libSQL's Hrana protocol over HTTP
 * (versions 2 and 3, the JSON encoding), which @libsql/client and the ORMs
 * built on it speak to sqld. The routes and the streams are
 * routes/hrana_http.c; this module is the format alone: a pipeline body in,
 * lithd_batches out, lithd_results back into Hrana's JSON.
 *
 * A request of a pipeline becomes a batch of sql/ (the one policy: the
 * authorizer, the limits, parameter numbering, the answer budget), run by
 * a store (store.h) like /v1/do's and /v1/query's:
 *   execute    one statement; a statement that only reads (its first
 *              keyword says so; the reader checks sqlite3_stmt_readonly)
 *              may go to the read pool, anything else is one command;
 *   batch      a batch with steps (sqljson_int.h, "Steps"): each step its
 *              condition and outcome, BEGIN / COMMIT / ROLLBACK steps the
 *              stream's transaction inside ONE command (or one snapshot
 *              when every step reads);
 *   sequence   the statements of one SQL text (split where SQLite ends a
 *              statement, sqlite3_complete), as steps that run while the
 *              ones before succeeded, their rows not kept;
 *   describe   one statement prepared on a reader, never stepped.
 * store_sql, close_sql, close and get_autocommit touch only the stream.
 *
 * Values, both ways: {"type": "null"}, {"type": "integer", "value": "-12"}
 * (a decimal string over the whole 64-bit range; a JSON integer is taken
 * too), {"type": "float", "value": 1.5} (a JSON number; what SQLite holds
 * as +-Infinity goes out as 1e999 / -1e999, which JSON's grammar allows
 * and JavaScript reads back as Infinity), {"type": "text", "value": "..."},
 * {"type": "blob", "base64": "..."} (padded or not; sent padded).
 *
 * Errors are Hrana's {"message", "code"}, the codes as sqld gives them
 * (lithd_hrana_code): SQLite's base name for a statement's SQLite error
 * (SQLITE_CONSTRAINT, SQLITE_ERROR, ...), SQL_PARSE_ERROR for a syntax
 * error, SQL_NO_STATEMENT, SQL_MANY_STATEMENTS, ARGS_INVALID,
 * ARGS_BOTH_POSITIONAL_AND_NAMED, RESPONSE_TOO_LARGE, and lithd's own
 * where sqld has none (docs/hrana.md lists them).
 *
 * Unknown fields are ignored, as the specification requires (forward
 * compatibility); unknown request types are an error of that request.
 *
 * Ownership: a pipeline owns its JSON tree (one arena); a batch made from
 * one of its requests copies what it needs and outlives it; the stored SQL
 * of a stream is the stream's (lithd_hrana_sqls). Loop thread only (no
 * state but the caller's).
 */
#ifndef LITHD_HRANA_H
#define LITHD_HRANA_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "buf.h"
#include "json.h"
#include "sqljson.h"

/* The requests of a stream. */
enum {
  LITHD_HR_UNKNOWN,
  LITHD_HR_CLOSE,
  LITHD_HR_EXECUTE,
  LITHD_HR_BATCH,
  LITHD_HR_SEQUENCE,
  LITHD_HR_DESCRIBE,
  LITHD_HR_STORE_SQL,
  LITHD_HR_CLOSE_SQL,
  LITHD_HR_GET_AUTOCOMMIT
};

/* SQL texts one stream may store, and their bytes together. */
#define LITHD_HRANA_MAX_SQLS 256
#define LITHD_HRANA_MAX_SQL_BYTES ((size_t)4 << 20)

/* A Hrana error: code is a static string. */
typedef struct lithd_hrana_error {
  const char *code;
  char message[LITHD_ERRMSG_MAX];
} lithd_hrana_error;

/* Set *e; returns -1 (for `return lithd_hrana_fail(...)`). */
int lithd_hrana_fail(lithd_hrana_error *e, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The Hrana code of a lithd code with its message (the message decides
 * between SQLITE_ERROR and SQL_PARSE_ERROR, and names lith's refusals of
 * empty and multiple statements). A static string. */
const char *lithd_hrana_code(int code, const char *message);

/* ---- A pipeline body ------------------------------------------------------ */

typedef struct lithd_hrana_pipeline {
  lithd_arena mem;   /* the tree */
  const char *baton; /* NULL: a new stream; else NUL-terminated, in mem */
  int n;             /* requests */
  lj_value **requests;
  int cursor; /* 1: a cursor's body, its one request a batch (lithd_hrana_cursor_parse) */
} lithd_hrana_pipeline;

/* Parse {"baton": string | null, "requests": [...]} (body[0..len)), at
 * most max_requests requests. 0 with *out (freed by
 * lithd_hrana_pipeline_free), or -1 with *e. */
int lithd_hrana_pipeline_parse(const char *body, size_t len, int max_requests, lithd_hrana_pipeline **out,
                               lithd_hrana_error *e);
void lithd_hrana_pipeline_free(lithd_hrana_pipeline *p);

/* Parse a /v3/cursor body, {"baton": string | null, "batch": {"steps":
 * [...]}}, as a pipeline of one request, {"type": "batch", "batch": ...}
 * (the same tree: the steps are read by lithd_hrana_batch, with its
 * limits), cursor set. 0 with *out (lithd_hrana_pipeline_free), or -1 with
 * *e: not JSON, not an object, a baton not a string, no batch object with
 * a steps array. */
int lithd_hrana_cursor_parse(const char *body, size_t len, lithd_hrana_pipeline **out, lithd_hrana_error *e);

/* The LITHD_HR_ kind of a request object (LITHD_HR_UNKNOWN: no such type). */
int lithd_hrana_kind(const lj_value *req);

/* ---- A stream's stored SQL ------------------------------------------------ */

typedef struct lithd_hrana_sqls lithd_hrana_sqls;

/* store_sql {"sql_id", "sql"} into *m (created on first use); close_sql
 * {"sql_id"} (an id not stored is no error). 0, or -1 with *e: an id in
 * use (SQL_STORE_ID_IN_USE), more than LITHD_HRANA_MAX_SQLS texts
 * (SQL_STORE_TOO_MANY), their bytes past LITHD_HRANA_MAX_SQL_BYTES or no
 * room in the process's answer budget, which every stored text is charged
 * to until it is closed or freed (SQL_STORE_TOO_LARGE), one past
 * lim->max_sql_bytes, no memory. */
int lithd_hrana_sqls_store(lithd_hrana_sqls **m, const lj_value *req, const lithd_limits *lim,
                           lithd_hrana_error *e);
int lithd_hrana_sqls_close(lithd_hrana_sqls *m, const lj_value *req, lithd_hrana_error *e);
void lithd_hrana_sqls_free(lithd_hrana_sqls *m);

/* ---- Requests that run ---------------------------------------------------- */

/* How a batch made here may run. */
typedef struct lithd_hrana_plan {
  int reads;    /* 1: every statement reads (first keyword), so the read pool
                   may run it; a reader's LITHD_NOT_A_QUERY means: run it as a
                   command instead (nothing ran that changed anything) */
  int readonly; /* 1: a BEGIN TRANSACTION READONLY step: never a command */
  int deferred; /* 1: a BEGIN or BEGIN DEFERRED step: its transaction may
                   begin on a read snapshot */
  int fk;       /* 1: a PRAGMA foreign_keys step: it runs as a stream's
                   transaction on the writer (opens), which can change it
                   between transactions */
  int opens;    /* 1: a BEGIN step with no COMMIT or ROLLBACK step after it: the
                   stream's transaction outlives the request (store.h,
                   lithd_store_tx) */
} lithd_hrana_plan;

/* The batch of an execute, batch, sequence or describe request (kind), its
 * SQL from the request or from m (may be NULL), lim's limits. 0 with *out
 * (the caller frees it with lithd_batch_free) and *plan, or -1 with *e (the
 * request's error: nothing to run). */
int lithd_hrana_batch(const lj_value *req, int kind, const lithd_hrana_sqls *m, const lithd_limits *lim,
                      lithd_batch **out, lithd_hrana_plan *plan, lithd_hrana_error *e);

/* ---- Answers ------------------------------------------------------------- */

/* A request's result for the pipeline's "results" array. */

/* {"type":"ok","response":{"type": kind}} for close, store_sql, close_sql,
 * and get_autocommit (with is_autocommit). */
void lithd_hrana_put_ok(lithd_buf *b, int kind, int is_autocommit);

/* {"type":"error","error":{"message":..,"code":..}}. */
void lithd_hrana_put_error(lithd_buf *b, const lithd_hrana_error *e);

/* The result of a batch lithd_hrana_batch made for `kind`, after the store
 * answered rc with r (may be NULL) and errmsg (the store's message when no
 * statement is named), following sqljson.h's recipe; version 2 or 3 (3
 * adds rows_read, rows_written, query_duration_ms). */
void lithd_hrana_put_outcome(lithd_buf *b, int kind, int version, int rc, const lithd_result *r,
                             const char *errmsg);

/* The same outcome as a cursor's entries (Hrana 3, "Cursor entries"), one
 * JSON object a line, each ending in '\n': for each step that ran,
 * step_begin {step, cols}, a row {row} per row and step_end
 * {affected_row_count, last_insert_rowid, rows_read, rows_written,
 * query_duration_ms}, or step_error {step, error}; a skipped step writes
 * nothing. A batch that failed as a whole is one error {error} line. */
void lithd_hrana_put_cursor(lithd_buf *b, int rc, const lithd_result *r, const char *errmsg);

/* An HTTP-level error body, {"message": ..., "code": ...}, malloc'd (NULL:
 * no memory). */
char *lithd_hrana_error_json(const lithd_hrana_error *e);

/* ---- Hrana over WebSocket (routes/hrana_ws.c) ------------------------------
 *
 * A client's message is {"type": "hello", "jwt": string | null} or
 * {"type": "request", "request_id": int32, "request": {...}}; a request
 * on a stream has the shape of a pipeline's (its extra "stream_id" aside),
 * so it runs as a pipeline of one. The connection-wide ones are
 * open_stream, close_stream (and Hrana 3's cursors). */

enum { LITHD_HRWS_HELLO = 1, LITHD_HRWS_REQUEST = 2 };
/* Request kinds of WebSocket's own, after the LITHD_HR_ ones. */
enum {
  LITHD_HRWS_OPEN_STREAM = 100,
  LITHD_HRWS_CLOSE_STREAM,
  LITHD_HRWS_OPEN_CURSOR,
  LITHD_HRWS_CLOSE_CURSOR,
  LITHD_HRWS_FETCH_CURSOR
};

typedef struct lithd_hrana_wsmsg {
  lithd_hrana_pipeline *p; /* the tree (free with lithd_hrana_pipeline_free); a
                              request: p->n 1, p->requests[0] the request */
  int type;                /* LITHD_HRWS_HELLO or LITHD_HRWS_REQUEST */
  const char *jwt;         /* hello: the token, NUL-terminated in p->mem; NULL: none */
  int32_t request_id;
  int kind;          /* a request: a LITHD_HR_ kind (LITHD_HR_UNKNOWN: a type this
                        lithd does not know, or "close", which is HTTP's) or a
                        LITHD_HRWS_ one */
  int32_t stream_id; /* the request's, where it has one */
  int32_t cursor_id; /* open_cursor, close_cursor, fetch_cursor */
  int32_t max_count; /* fetch_cursor: at most this many entries (>= 0) */
} lithd_hrana_wsmsg;
/* An open_cursor's p->requests[0] is the batch request {"type": "batch",
 * "batch": ...} with p->cursor set: its outcome is written as the
 * cursor's entries (lithd_hrana_put_cursor). */

/* Parse msg[0..len). 0 with *out (out->p the caller's), or -1 with *e: not
 * a message of the protocol (not JSON, no type, a request without an
 * int32 request_id or stream_id where one is needed): the connection
 * ends. */
int lithd_hrana_ws_parse(const char *msg, size_t len, lithd_hrana_wsmsg *out, lithd_hrana_error *e);

/* Resolve the request's stored SQL now, as sqld does when a request
 * arrives (the connection's stored SQL may change before it runs): each
 * "sql_id" of a Stmt (execute, a batch's steps, an open_cursor's) or of a
 * sequence or describe that m holds becomes the "sql" it names, copied
 * into p's tree; one not stored is left (SQL_NOT_FOUND when it runs).
 * Returns the bytes added, or -1 with *e: more than max in all
 * (REQUEST_TOO_LARGE: no more than the client could have sent inline), no
 * memory. */
long lithd_hrana_ws_resolve(lithd_hrana_pipeline *p, const lithd_hrana_sqls *m, size_t max,
                            lithd_hrana_error *e);

/* The answer to request `id` from a pipeline's entry for it (entry[0..len),
 * what lithd_hrana_put_ok / _put_error / _put_outcome wrote):
 * {"type":"response_ok","request_id":id,"response":...} or
 * {"type":"response_error","request_id":id,"error":...}. */
void lithd_hrana_ws_response(lithd_buf *b, int32_t id, const char *entry, size_t len);

/* {"type":"response_ok","request_id":id,"response":{"type":type}}. */
void lithd_hrana_ws_ok(lithd_buf *b, int32_t id, const char *type);

/* {"type":"response_error","request_id":id,"error":{"message","code"}}. */
void lithd_hrana_ws_error(lithd_buf *b, int32_t id, const lithd_hrana_error *e);

#endif /* LITHD_HRANA_H */
