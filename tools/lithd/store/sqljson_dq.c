/*
 * sqljson on dqlite: a lithd_batch run through the dqlite writer or on a
 * leader connection, into the same lithd_result (see sqljson_dq.h for what
 * differs from the local run and why).
 *
 * Design: each statement is bound (its parameters put in the positions a
 * scan of its SQL finds), sent as one EXEC_SQL or QUERY_SQL, and its rows
 * copied into the result's arena with the checks of the local run (rows,
 * bytes, UTF-8), so an answer that could not be sent is found while the
 * command can still fail, never after the COMMIT. The writer's tx does not
 * hand out a failed statement's message; the result keeps the statement's
 * index and lithd_dq_result_failed completes code and message once the
 * writer answered.
 */
#include "sqljson_dq.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sqljson_int.h"
#include "sqlparams.h"
#include "utf8.h"

/* A marker in r->err.code: a statement failed in the writer; the code and
 * message come with the writer's answer (lithd_dq_result_failed). */
#define DQ_PENDING (-1)

_Static_assert(LITHD_SQL_MAX_PARAMS == LITH_DQ_MAX_PARAMS, "sqlparams.h must follow dqlite's limit");

typedef struct dq_run {
  lith__dqw_tx *tx; /* the writer's command, or NULL */
  lith__dq_conn *c; /* a read: the leader connection, or NULL */
  uint32_t db;      /* a read: the open database */
  int lost;         /* a read: the connection failed */
  lithd_batch *b;
  lithd_result *r;
} dq_run;

static int dfail(dq_run *rn, int code, int stmt, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* The result's error; in a command it also fails the command on its own
 * (LITH_DQW_USER). Returns the code to return from the run. */
static int dfail(dq_run *rn, int code, int stmt, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  lithd__error_vset(&rn->r->err, code, stmt, fmt, ap);
  va_end(ap);
  if (rn->tx)
    return lith__dqw_error(rn->tx, "statement %d: %s", stmt, rn->r->err.message);
  return code;
}

/* ---- Parameters ------------------------------------------------------------ */

static int to_dq(dq_run *rn, int i, const value *v, lith__dq_value *out) {
  switch (v->type) {
  case SQLITE_INTEGER: *out = lith__dq_int(v->u.i); break;
  case SQLITE_FLOAT: *out = lith__dq_float(v->u.d); break;
  case SQLITE_TEXT:
    if (memchr(v->u.p, '\0', v->n) != NULL)
      return dfail(rn, LITHD_BAD_REQUEST, i,
                   "a string holding U+0000 cannot travel through dqlite's protocol: send it as a blob");
    *out = lith__dq_text((const char *)v->u.p);
    break;
  case SQLITE_BLOB: *out = lith__dq_blob(v->u.p, v->n); break;
  default: *out = lith__dq_null(); break;
  }
  return LITH_OK;
}

/* Bind statement i's parameters into pv[0..*n). */
static int bind_params(dq_run *rn, int i, lith__dq_value *pv, unsigned *n) {
  const stmt_spec *spec = &rn->b->stmts[i];
  const char *names[LITHD_SQL_MAX_PARAMS];
  size_t lens[LITHD_SQL_MAX_PARAMS];
  int count = 0, rc;
  if (lithd_sql_params(spec->sql, names, lens, &count) != 0)
    return dfail(rn, LITHD_BAD_REQUEST, i, "more than %d parameters: dqlite binds at most %d",
                 LITHD_SQL_MAX_PARAMS, LITHD_SQL_MAX_PARAMS);
  *n = (unsigned)count;
  if (!spec->named) {
    if (spec->nparams != count)
      return dfail(rn, LITHD_BAD_REQUEST, i, "the statement has %d parameter%s, %d given", count,
                   count == 1 ? "" : "s", spec->nparams);
    for (int k = 0; k < count; k++)
      if ((rc = to_dq(rn, i, &spec->params[k].v, &pv[k])) != LITH_OK)
        return rc;
    return LITH_OK;
  }
  for (int k = 0; k < spec->nparams; k++) {
    const char *name = spec->params[k].name;
    int idx;
    for (idx = 0; idx < count; idx++)
      if (names[idx] && strlen(name) == lens[idx] && memcmp(name, names[idx], lens[idx]) == 0)
        break;
    if (idx == count)
      return dfail(rn, LITHD_BAD_REQUEST, i, "the statement has no parameter \"%.64s\"", name);
  }
  for (int idx = 0; idx < count; idx++) {
    int k;
    if (names[idx] == NULL)
      return dfail(rn, LITHD_BAD_REQUEST, i, "parameter %d has no name: give \"params\" as an array",
                   idx + 1);
    for (k = 0; k < spec->nparams; k++)
      if (strlen(spec->params[k].name) == lens[idx] &&
          memcmp(spec->params[k].name, names[idx], lens[idx]) == 0)
        break;
    if (k == spec->nparams)
      return dfail(rn, LITHD_BAD_REQUEST, i, "parameter \"%.*s\" is not given", (int)lens[idx], names[idx]);
    if ((rc = to_dq(rn, i, &spec->params[k].v, &pv[idx])) != LITH_OK)
      return rc;
  }
  return LITH_OK;
}

/* ---- Statements -------------------------------------------------------------- */

/* Whether sql returns rows: its first keyword (or PRAGMA), or the word
 * RETURNING outside strings and comments. */
static int returns_rows(const char *sql) {
  const char *s = sql;
  if (lithd__first_keyword(sql) == FIRST_QUERY)
    return 1;
  while (isspace((unsigned char)*s))
    s++;
  if (strncasecmp(s, "PRAGMA", 6) == 0)
    return 1;
  while (*s) {
    char ch = *s;
    const char *past = lithd_sql_skip_literal(s);
    if (past != NULL) {
      s = past;
    } else if (isalpha((unsigned char)ch) || ch == '_') {
      const char *w = s;
      while (isalnum((unsigned char)*s) || *s == '_' || *s == '$')
        s++;
      if (s - w == 9 && strncasecmp(w, "RETURNING", 9) == 0)
        return 1;
    } else {
      s++;
    }
  }
  return 0;
}

/* What the first keyword says of the counts an exec gives. */
enum { DML_NONE, DML_INSERT, DML_OTHER };
static int dml_kind(const char *sql) {
  const char *s = sql;
  while (isspace((unsigned char)*s))
    s++;
  if (strncasecmp(s, "INSERT", 6) == 0 || strncasecmp(s, "REPLACE", 7) == 0)
    return DML_INSERT;
  if (strncasecmp(s, "UPDATE", 6) == 0 || strncasecmp(s, "DELETE", 6) == 0)
    return DML_OTHER;
  return DML_NONE;
}

/* The first keyword, for what no node-side authorizer can refuse. */
static int refused_keyword(const char *sql) {
  static const char *const words[] = {"ATTACH", "DETACH", "PRAGMA"};
  const char *s = sql;
  while (isspace((unsigned char)*s))
    s++;
  for (size_t k = 0; k < sizeof words / sizeof *words; k++) {
    size_t n = strlen(words[k]);
    if (strncasecmp(s, words[k], n) == 0 && !isalnum((unsigned char)s[n]) && s[n] != '_')
      return 1;
  }
  return 0;
}

/* Copy rows into statement i's output, with the local run's checks. */
static int collect(dq_run *rn, int i, const lith__dq_rows *rows, stmt_out *o) {
  lithd_result *r = rn->r;
  const lithd_limits *lim = &rn->b->lim;
  o->ncols = (int)rows->ncols;
  if (o->ncols > 0) {
    o->cols = lithd_arena_alloc(&r->mem, (size_t)o->ncols * sizeof *o->cols, _Alignof(max_align_t));
    o->decls = lithd_arena_alloc(&r->mem, (size_t)o->ncols * sizeof *o->decls, _Alignof(max_align_t));
    if (!o->cols || !o->decls)
      return dfail(rn, LITH_NOMEM, i, "out of memory");
    for (int col = 0; col < o->ncols; col++) {
      const char *name = rows->names[col];
      size_t len = strlen(name);
      if (!lithd_utf8_valid((const unsigned char *)name, len))
        return dfail(rn, LITHD_UNENCODABLE, i, "the name of column %d is not valid UTF-8", col);
      o->decls[col] = NULL; /* dqlite does not send declared types */
      if (!(o->cols[col] = lithd_arena_copy(&r->mem, name, len)))
        return dfail(rn, LITH_NOMEM, i, "out of memory");
    }
    if (r->fmt.rows_objects) {
      int a = 0, b = 0, dup = lithd__same_names(o, &a, &b);
      if (dup < 0)
        return dfail(rn, LITH_NOMEM, i, "out of memory");
      if (dup > 0)
        return dfail(rn, LITHD_BAD_REQUEST, i, LITHD_SAME_NAMES_MSG, a, b, o->cols[a]);
    }
  }
  if ((int64_t)rows->nrows > lim->max_rows - r->rows)
    return dfail(rn, LITHD_RESULT_TOO_LARGE, i, "the answer would hold more than %" PRId64 " rows (max_rows)",
                 lim->max_rows);
  o->capvals = o->nvals = rows->nrows * (size_t)o->ncols;
  if (o->nvals > 0 && !(o->vals = calloc(o->nvals, sizeof *o->vals)))
    return dfail(rn, LITH_NOMEM, i, "out of memory");
  for (size_t row = 0; row < rows->nrows; row++)
    for (int col = 0; col < o->ncols; col++) {
      const lith__dq_value *dv = lith__dq_rows_at(rows, row, (unsigned)col);
      value *v = &o->vals[row * (size_t)o->ncols + (size_t)col];
      switch (dv->type) {
      case LITH_DQ_INTEGER:
      case LITH_DQ_UNIXTIME:
      case LITH_DQ_BOOLEAN:
        v->type = SQLITE_INTEGER;
        v->u.i = dv->i;
        break;
      case LITH_DQ_FLOAT:
        v->type = SQLITE_FLOAT;
        v->u.d = dv->f;
        break;
      case LITH_DQ_TEXT:
      case LITH_DQ_ISO8601:
      case LITH_DQ_BLOB:
        v->type = dv->type == LITH_DQ_BLOB ? SQLITE_BLOB : SQLITE_TEXT;
        v->n = dv->n;
        if (v->n > lim->max_result_bytes - r->bytes)
          return dfail(rn, LITHD_RESULT_TOO_LARGE, i,
                       "the answer would hold more than %zu bytes of text and blobs (max_result_bytes)",
                       lim->max_result_bytes);
        if (v->type == SQLITE_TEXT && !lithd_utf8_valid(dv->p, v->n))
          return dfail(rn, LITHD_UNENCODABLE, i,
                       "text is not valid UTF-8 in row %zu column %d; CAST(x AS BLOB) reads it", row, col);
        r->bytes += v->n;
        if (!(v->u.p = lithd_arena_copy(&r->mem, dv->p, v->n)))
          return dfail(rn, LITH_NOMEM, i, "out of memory");
        break;
      default: v->type = SQLITE_NULL; break;
      }
    }
  o->nrows = (int64_t)rows->nrows;
  r->rows += o->nrows;
  return LITH_OK;
}

/* A read's failure on the connection: FAILURE is the statement's, anything
 * else lost the connection. */
static int read_failed(dq_run *rn, int i, int dqrc) {
  if (dqrc == LITH_DQ_FAILURE) {
    uint64_t code = lith__dq_errcode(rn->c);
    if (code == LITH_DQ_IOERR_NOT_LEADER || code == LITH_DQ_IOERR_LEADERSHIP_LOST) {
      rn->lost = 1;
      lith__dq_disconnect(rn->c);
    }
    return dfail(rn, lith_from_sqlite((int)code), i, "%s", lith__dq_errmsg(rn->c));
  }
  rn->lost = 1;
  return dfail(rn, dqrc == LITH_DQ_NOMEM ? LITH_NOMEM : LITH_IOERR, i, "the dqlite leader: %s",
               lith__dq_errmsg(rn->c));
}

static int run_one(dq_run *rn, int i) {
  const char *sql = rn->b->stmts[i].sql;
  stmt_out *o = &rn->r->outs[i];
  lith__dq_value pv[LITHD_SQL_MAX_PARAMS];
  unsigned n = 0;
  int rc, rows_back;

  if (rn->c && lithd__first_keyword(sql) != FIRST_QUERY)
    return dfail(rn, LITHD_NOT_A_QUERY, i,
                 "write statement on /v1/query: only SELECT, WITH, VALUES and EXPLAIN run here "
                 "(a PRAGMA reads through its function: SELECT * FROM pragma_table_info('t'))");
  if (refused_keyword(sql))
    return dfail(rn, LITHD_FORBIDDEN, i,
                 "lithd --dqlite refuses ATTACH, DETACH and PRAGMA statements (a PRAGMA reads through its "
                 "function: SELECT * FROM pragma_table_info('t'))");
  if ((rc = bind_params(rn, i, pv, &n)) != LITH_OK)
    return rc;
  rows_back = rn->c != NULL || returns_rows(sql);
  if (rows_back) {
    lith__dq_rows rows;
    lith__dq_rows_init(&rows);
    rc = rn->tx ? lith__dqw_query(rn->tx, sql, pv, n, &rows)
                : lith__dq_query_sql(rn->c, rn->db, sql, pv, n, &rows);
    if (rc == LITH_OK) {
      rc = collect(rn, i, &rows, o);
      if (rc == LITH_OK && lithd__first_keyword(sql) != FIRST_QUERY)
        o->changes = o->nrows; /* RETURNING: a row for each row changed */
    } else if (rn->c) {
      rc = read_failed(rn, i, rc);
    } else {
      rn->r->err.code = DQ_PENDING;
      rn->r->err.statement = i;
    }
    lith__dq_rows_free(&rows);
    return rc;
  }
  lith__dq_result res = {0, 0};
  rc = lith__dqw_exec(rn->tx, sql, pv, n, &res);
  if (rc != LITH_DQW_OK) {
    rn->r->err.code = DQ_PENDING;
    rn->r->err.statement = i;
    return rc;
  }
  /* dqlite sends the connection's counts (sqlite3_changes and
   * last_insert_rowid), which keep the last INSERT's, UPDATE's or DELETE's
   * (the writer's own _lith_batches row included): they are this
   * statement's only when it is one of those, and the rowid only for an
   * INSERT (REPLACE) that inserted. */
  switch (dml_kind(sql)) {
  case DML_INSERT:
    o->changes = (int64_t)res.rows_affected;
    o->last_rowid = o->changes > 0 ? (int64_t)res.last_insert_id : 0;
    break;
  case DML_OTHER: o->changes = (int64_t)res.rows_affected; break;
  default: break;
  }
  return LITH_OK;
}

/* A fresh result for b into *out (the previous run's freed). */
static int new_result(dq_run *rn, lithd_result **out) {
  lithd_result *r;
  lithd_result_free(*out);
  *out = NULL;
  if (!(r = calloc(1, sizeof *r)))
    return -1;
  if (!(r->outs = calloc(rn->b->n ? (size_t)rn->b->n : 1, sizeof *r->outs))) {
    free(r);
    return -1;
  }
  r->nouts = rn->b->n;
  r->fmt = rn->b->fmt;
  lithd__error_clear(&r->err);
  rn->r = *out = r;
  return 0;
}

int lithd_batch_run_dq(lith__dqw_tx *tx, lithd_batch *b, lithd_result **out) {
  dq_run rn = {.tx = tx, .b = b};
  if (new_result(&rn, out) != 0)
    return lith__dqw_error(tx, "out of memory");
  for (int i = 0; i < b->n; i++) {
    int rc = run_one(&rn, i);
    if (rc != LITH_DQW_OK)
      return rc; /* RETRY included: the run is abandoned */
    rn.r->n = i + 1;
  }
  return LITH_DQW_OK;
}

int lithd_dq_result_failed(lithd_result *r, int rc, const lith__dqw_err *err, char *errmsg, size_t cap) {
  errmsg[0] = '\0';
  switch (rc) {
  case LITH_DQW_OK: return LITH_OK;
  case LITH_DQW_SQL:
  case LITH_DQW_MISUSE: {
    int code = rc == LITH_DQW_SQL ? lith_from_sqlite(err->code) : LITH_MISUSE;
    if (code == LITH_OK)
      code = LITH_ERROR;
    if (r != NULL && r->err.code == DQ_PENDING) { /* a statement of the run failed */
      lithd_error_set(&r->err, code, r->err.statement, "%s", err->errmsg);
      return code;
    }
    /* the COMMIT, blamed on this command (a deferred foreign key): no
     * statement to name */
    snprintf(errmsg, cap, "%s", err->errmsg);
    return code;
  }
  case LITH_DQW_USER:
    if (r != NULL && r->err.code != LITH_OK && r->err.code != DQ_PENDING)
      return r->err.code;
    if (r == NULL) { /* the run could not even begin its result */
      snprintf(errmsg, cap, "out of memory");
      return LITH_NOMEM;
    }
    break;
  case LITH_DQW_UNAVAILABLE:
    snprintf(errmsg, cap, "no dqlite leader could be reached: the command was not committed (%s)",
             err->errmsg);
    return LITH_BUSY;
  case LITH_DQW_UNKNOWN:
    snprintf(errmsg, cap,
             "the dqlite leader was lost after COMMIT was sent and no leader came back in time: the outcome "
             "is unknown (it may or may not have committed; read before retrying) (%s)",
             err->errmsg);
    return LITH_BUSY;
  case LITH_DQW_CLOSED: snprintf(errmsg, cap, "lithd is shutting down"); return LITH_CLOSED;
  case LITH_DQW_NOMEM: snprintf(errmsg, cap, "out of memory"); return LITH_NOMEM;
  default: break;
  }
  snprintf(errmsg, cap, "%s: %s", lith__dqw_rc_str(rc), err->errmsg);
  return rc == LITH_DQW_MISUSE ? LITH_MISUSE : LITH_ERROR;
}

int lithd_batch_read_dq(lith__dq_conn *c, uint32_t db, lithd_batch *b, lithd_result **out, int *conn_lost) {
  dq_run rn = {.c = c, .db = db, .b = b};
  int rc = LITH_OK, drc;
  *conn_lost = 0;
  if (new_result(&rn, out) != 0)
    return LITH_NOMEM;
  if ((drc = lith__dq_exec_sql(c, db, "BEGIN", NULL, 0, NULL)) != LITH_DQ_OK) {
    rc = read_failed(&rn, -1, drc);
    *conn_lost = rn.lost;
    return rc;
  }
  for (int i = 0; i < b->n; i++) {
    if ((rc = run_one(&rn, i)) != LITH_OK)
      break;
    rn.r->n = i + 1;
  }
  if (!rn.lost && (drc = lith__dq_exec_sql(c, db, "ROLLBACK", NULL, 0, NULL)) != LITH_DQ_OK &&
      drc != LITH_DQ_FAILURE) {
    lith__dq_disconnect(c); /* an open transaction must not stay on a pooled connection */
  }
  *conn_lost = rn.lost;
  return rc;
}
