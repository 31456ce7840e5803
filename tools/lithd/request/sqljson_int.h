/*
 * sqljson_int.h — what the three stages of sqljson share; not for the rest
 * of lithd, which uses sqljson.h.
 *
 * sqljson is one pipeline in three stages, one file each:
 *   sqljson_parse.c   JSON body -> lithd_batch (plain C values in one arena)
 *   sqljson_run.c     lithd_batch -> SQLite -> lithd_result (on the writer
 *                     or a reader)
 *   sqljson_encode.c  lithd_result / lithd_error -> JSON text
 * and sqljson.c holds what all of them use: errors, code names, HTTP
 * statuses, limits. The batch and the result are defined here, since one
 * stage fills what the next reads.
 *
 * Ownership: a batch owns its arena (`mem`), and every string and value
 * of its statements lives there. A result owns its arena (column names,
 * declared types, TEXT and BLOB bytes) and its `outs` and each out's `vals` (malloc'd:
 * they grow row by row).
 */
#ifndef LITHD_SQLJSON_INT_H
#define LITHD_SQLJSON_INT_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "arena.h"
#include "sqljson.h"

/* ---- Values ---------------------------------------------------------------- */

/* One SQLite value; `type` is SQLITE_INTEGER, _FLOAT, _TEXT, _BLOB or
 * _NULL. Text and blob bytes live in the owner's arena. */
typedef struct value {
  int type;
  size_t n;
  union {
    int64_t i;
    double d;
    const unsigned char *p;
  } u;
} value;

/* A statement's parameter: by name, or by position (its index + 1). */
typedef struct param {
  const char *name; /* NULL when bound by position */
  value v;
} param;

/* One statement of a request, parsed. */
typedef struct stmt_spec {
  const char *sql;
  int named;
  int nparams;
  param *params;
} stmt_spec;

/* A parsed request: lithd_batch_parse fills it, lithd_batch_run reads it. */
struct lithd_batch {
  lithd_limits lim;
  _Atomic size_t *shared_bytes; /* NULL, or the request's count that max_result_bytes
                                   bounds for several batches (/v1/batch) */
  lithd_format fmt;             /* how the answer is written; the result copies it */
  int n;
  stmt_spec *stmts;
  lithd_arena mem;
};

/* What one statement gave back. */
typedef struct stmt_out {
  int64_t changes;
  int64_t last_rowid;
  int ncols;
  const char **cols;
  const char **decls; /* declared types (NULL: an expression), with fmt.types */
  int64_t nrows;
  value *vals; /* nrows * ncols, row by row */
  size_t nvals, capvals;
} stmt_out;

/* A run's outcome: lithd_batch_run fills it, lithd_result_json reads it. */
struct lithd_result {
  lithd_error err;
  lithd_format fmt; /* the batch's, when it ran */
  int n;            /* statements that ran (all of them on success) */
  int nouts;
  stmt_out *outs; /* nouts: one per statement of the batch */
  int64_t rows;   /* all statements together */
  size_t bytes;
  _Atomic size_t *shared_bytes; /* the batch's */
  size_t charged;               /* what it holds of the process's answer budget (lithd_answer_budget) */
  lithd_arena mem;
};

/* ---- Shared by the stages (sqljson.c) ------------------------------------- */

/* lithd_error_set with a va_list. Returns code. */
int lithd__error_vset(lithd_error *err, int code, int statement, const char *fmt, va_list ap);

/* *err as "no error": LITH_OK, statement -1, empty message. */
void lithd__error_clear(lithd_error *err);

/* ---- The policy every store runs a statement under (sql/sqljson_run.c) ----
 * Each call that can fail writes the error into r->err (statement i) and
 * returns its code; LITH_OK otherwise. */

/* r->err as code, statement stmt and the message. Returns code. */
int lithd__fail(lithd_result *r, int code, int stmt, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A fresh result for b (its format copied) into *out, after the one an
 * earlier run of the same command left there is freed (its bytes given
 * back to a shared count): 0, or -1 out of memory (*out NULL). */
int lithd__result_renew(lithd_result **out, const lithd_batch *b);

/* What the first keyword of s, past blanks and comments, says of the
 * statement on /v1/query: FIRST_QUERY (SELECT, WITH, VALUES, EXPLAIN),
 * FIRST_OTHER (a keyword that opens any other SQLite statement, or none),
 * FIRST_UNKNOWN (no statement opens so: a typo). */
enum { FIRST_QUERY, FIRST_OTHER, FIRST_UNKNOWN };
int lithd__first_keyword(const char *s);

/* A prepare on conn failed with `code` (a lith code) and `msg`: an
 * authorizer's refusal is LITHD_FORBIDDEN (403), the rest `code`. */
int lithd__prepare_failed(lithd_result *r, int i, int code, sqlite3 *conn, const char *msg);

/* The refusal of a statement that is not a query, on /v1/query. */
int lithd__not_a_query(lithd_result *r, int i);

/* A statement prepared for /v1/query (first: lithd__first_keyword of its
 * text) may run there: a query SQLite calls read-only. */
int lithd__check_read(lithd_result *r, int i, int first, sqlite3_stmt *st);

/* Statement i's values in st's parameter positions, as SQLite numbers
 * them: vals[k] is parameter k + 1's (vals has room for
 * sqlite3_bind_parameter_count(st)); the exact count by position, every
 * name given and none unknown by name. st may be a statement prepared only
 * to learn this (the dqlite store's vetting). */
int lithd__bind_plan(lithd_result *r, int i, const stmt_spec *spec, sqlite3_stmt *st, const value **vals);

/* Statement i's columns into o: names (valid UTF-8), declared types when
 * the answer carries them (decls may be NULL: none known), distinct names
 * when rows are objects. lithd__stmt_columns reads them off st. */
int lithd__columns(lithd_result *r, int i, int ncols, const char *const *names, const char *const *decls,
                   stmt_out *o);
int lithd__stmt_columns(lithd_result *r, int i, sqlite3_stmt *st, stmt_out *o);

/* Rows, as they arrive: lithd__row_room before a row (max_rows), each
 * cell through lithd__put_cell (max_result_bytes, UTF-8 of TEXT; the bytes
 * are copied into r's arena), lithd__row_done after it. */
int lithd__row_room(lithd_result *r, const lithd_limits *lim, int i);
int lithd__put_cell(lithd_result *r, const lithd_limits *lim, int i, stmt_out *o, value v);
void lithd__row_done(lithd_result *r, stmt_out *o);

/* Whether two of o's columns share a name (rows as objects need distinct
 * ones): 1 with *a < *b their indexes, 0 if none, -1 out of memory. */
int lithd__same_names(const stmt_out *o, int *a, int *b);
#define LITHD_SAME_NAMES_MSG                                                         \
  "columns %d and %d are both named \"%.64s\": rows as objects need distinct names " \
  "(name them apart with AS, or ask for rows as arrays)"

#endif /* LITHD_SQLJSON_INT_H */
