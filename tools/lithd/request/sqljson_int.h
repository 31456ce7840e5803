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
#include <stddef.h>
#include <stdint.h>

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
  lithd_format fmt; /* how the answer is written; the result copies it */
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
  lithd_arena mem;
};

/* ---- Shared by the stages (sqljson.c) ------------------------------------- */

/* lithd_error_set with a va_list. Returns code. */
int lithd__error_vset(lithd_error *err, int code, int statement, const char *fmt, va_list ap);

/* *err as "no error": LITH_OK, statement -1, empty message. */
void lithd__error_clear(lithd_error *err);

/* ---- Shared by the runs (sqljson_run.c; sqljson_dq.c runs on dqlite) ---- */

/* What the first keyword of s, past blanks and comments, says of the
 * statement on /v1/query: FIRST_QUERY (SELECT, WITH, VALUES, EXPLAIN),
 * FIRST_OTHER (a keyword that opens any other SQLite statement, or none),
 * FIRST_UNKNOWN (no statement opens so: a typo). */
enum { FIRST_QUERY, FIRST_OTHER, FIRST_UNKNOWN };
int lithd__first_keyword(const char *s);

/* Whether two of o's columns share a name (rows as objects need distinct
 * ones): 1 with *a < *b their indexes, 0 if none, -1 out of memory. */
int lithd__same_names(const stmt_out *o, int *a, int *b);
#define LITHD_SAME_NAMES_MSG                                                         \
  "columns %d and %d are both named \"%.64s\": rows as objects need distinct names " \
  "(name them apart with AS, or ask for rows as arrays)"

#endif /* LITHD_SQLJSON_INT_H */
