/*
 * hrana — the Hrana request format (see hrana.h).
 *
 * Design: the body is read with json.c into one arena (a pipeline); each
 * request is turned into a batch of sql/ only when its turn comes, since
 * a store_sql earlier in the pipeline defines the SQL a later one names.
 * A batch is filled as sqljson's own parser fills one (sqljson_int.h), so
 * everything below the format (binding, limits, the steps' rules, the
 * encoding of cells) is sql/'s, once. The answer is written by hand into
 * a lithd_buf, with sqljson's writers for strings, numbers and base64.
 */
#include "hrana.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "split.h"
#include "sqljson_int.h"

/* What put_value wraps a value in, about ({"type":"integer","value":""}
 * and the comma after it: 30), and a row's brackets: what each cell counts
 * in max_result_bytes beside its value (lithd_limits.cell_frame). */
#define HRANA_CELL_FRAME 32

int lithd_hrana_fail(lithd_hrana_error *e, const char *code, const char *fmt, ...) {
  va_list ap;
  e->code = code;
  va_start(ap, fmt);
  vsnprintf(e->message, sizeof e->message, fmt, ap);
  va_end(ap);
  return -1;
}

const char *lithd_hrana_code(int code, const char *message) {
  const char *m = message != NULL ? message : "";
  switch (code) {
  case LITH_ERROR:
    if (strstr(m, "syntax error") != NULL || strstr(m, "incomplete input") != NULL ||
        strstr(m, "unrecognized token") != NULL)
      return "SQL_PARSE_ERROR";
    if (strstr(m, "string or blob too big") != NULL)
      return "SQLITE_TOOBIG";
    return "SQLITE_ERROR";
  case LITH_MISUSE:
    if (strstr(m, "empty statement") != NULL)
      return "SQL_NO_STATEMENT";
    if (strstr(m, "more than one statement") != NULL)
      return "SQL_MANY_STATEMENTS";
    return "SQLITE_MISUSE";
  case LITH_NOMEM: return "SQLITE_NOMEM";
  case LITH_BUSY:
  case LITH_QUEUE_FULL: return "SQLITE_BUSY";
  case LITH_CONSTRAINT: return "SQLITE_CONSTRAINT";
  case LITH_IOERR: return "SQLITE_IOERR";
  case LITH_DISKFULL: return "SQLITE_FULL";
  case LITH_ABORTED: return "SQLITE_ABORT";
  case LITH_CANTOPEN: return "SQLITE_CANTOPEN";
  case LITH_CORRUPT: return "SQLITE_CORRUPT";
  case LITH_READONLY:
  case LITHD_NOT_A_QUERY: return "SQLITE_READONLY";
  case LITH_SCHEMA: return "SQLITE_SCHEMA";
  case LITH_INTERRUPTED:
  case LITHD_TIMEOUT: return "SQLITE_INTERRUPT";
  case LITH_CLOSED: return "SERVER_SHUTTING_DOWN";
  case LITHD_BAD_REQUEST: return "ARGS_INVALID";
  case LITHD_TOO_LARGE: return "REQUEST_TOO_LARGE";
  case LITHD_RESULT_TOO_LARGE: return "RESPONSE_TOO_LARGE";
  case LITHD_UNENCODABLE: return "RESPONSE_UNENCODABLE";
  case LITHD_FORBIDDEN: return "SQLITE_AUTH";
  case LITHD_OUTCOME_UNKNOWN: return "OUTCOME_UNKNOWN";
  case LITHD_TX_TIMEOUT: return "TRANSACTION_TIMEOUT";
  case LITHD_TX_TOO_OLD: return "SNAPSHOT_TOO_OLD";
  default: return "SQLITE_ERROR";
  }
}

/* ---- A pipeline body -------------------------------------------------------- */

/* The body's tree into p->mem and its baton into p->baton: the root
 * object, or NULL with *e. */
static lj_value *parse_body(lithd_hrana_pipeline *p, const char *body, size_t len, const char *shape,
                            lithd_hrana_error *e) {
  lj_error jerr = {0, 0, ""};
  lj_value *root;
  if (lj_parse(&p->mem, body, len, &root, &jerr) != 0) {
    lithd_hrana_fail(e, "HTTP_PARSE_ERROR", "invalid JSON at line %d column %d: %s", jerr.line, jerr.column,
                     jerr.text);
    return NULL;
  }
  if (root->type != LJ_OBJECT) {
    lithd_hrana_fail(e, "PROTO_ERROR", "the body must be an object: %s", shape);
    return NULL;
  }
  const lj_value *baton = lj_get(root, "baton");
  if (baton != NULL && baton->type != LJ_NULL) {
    if (baton->type != LJ_STRING || memchr(baton->u.s, '\0', baton->n) != NULL) {
      lithd_hrana_fail(e, "PROTO_ERROR", "\"baton\" must be a string or null");
      return NULL;
    }
    p->baton = baton->u.s;
  }
  return root;
}

int lithd_hrana_pipeline_parse(const char *body, size_t len, int max_requests, lithd_hrana_pipeline **out,
                               lithd_hrana_error *e) {
  lj_value *root;
  lithd_hrana_pipeline *p = calloc(1, sizeof *p);
  *out = NULL;
  if (p == NULL)
    return lithd_hrana_fail(e, "SQLITE_NOMEM", "out of memory");
  if ((root = parse_body(p, body, len, "{\"baton\": ..., \"requests\": [...]}", e)) == NULL)
    goto err_free;
  const lj_value *reqs = lj_get(root, "requests");
  if (reqs == NULL || reqs->type != LJ_ARRAY) {
    lithd_hrana_fail(e, "PROTO_ERROR", "\"requests\" must be an array%s", reqs ? "" : " and is missing");
    goto err_free;
  }
  if (reqs->n > (size_t)max_requests) {
    lithd_hrana_fail(e, "REQUEST_TOO_LARGE", "%zu requests in one pipeline, over the limit of %d", reqs->n,
                     max_requests);
    goto err_free;
  }
  for (size_t i = 0; i < reqs->n; i++)
    if (reqs->u.items[i]->type != LJ_OBJECT) {
      lithd_hrana_fail(e, "PROTO_ERROR", "request %zu is not an object", i);
      goto err_free;
    }
  p->n = (int)reqs->n;
  p->requests = reqs->u.items;
  *out = p;
  return 0;

err_free:
  lithd_hrana_pipeline_free(p);
  return -1;
}

int lithd_hrana_cursor_parse(const char *body, size_t len, lithd_hrana_pipeline **out, lithd_hrana_error *e) {
  lj_value *root, *req, *list;
  lithd_hrana_pipeline *p = calloc(1, sizeof *p);
  *out = NULL;
  if (p == NULL)
    return lithd_hrana_fail(e, "SQLITE_NOMEM", "out of memory");
  if ((root = parse_body(p, body, len, "{\"baton\": ..., \"batch\": {\"steps\": [...]}}", e)) == NULL)
    goto err_free;
  lj_value *batch = lj_get(root, "batch");
  const lj_value *steps = lj_get(batch, "steps");
  if (batch == NULL || batch->type != LJ_OBJECT || steps == NULL || steps->type != LJ_ARRAY) {
    lithd_hrana_fail(e, "PROTO_ERROR", "a cursor's body needs \"batch\": {\"steps\": [...]}");
    goto err_free;
  }
  /* the batch request it is: {"type": "batch", "batch": ...} */
  if ((req = lj_make(&p->mem, LJ_OBJECT, 2)) == NULL || (list = lj_make(&p->mem, LJ_ARRAY, 1)) == NULL ||
      (req->u.members[0].value = lj_make_string(&p->mem, "batch", 5)) == NULL) {
    lithd_hrana_fail(e, "SQLITE_NOMEM", "out of memory");
    goto err_free;
  }
  req->u.members[0].key = "type";
  req->u.members[0].keylen = 4;
  req->u.members[1].key = "batch";
  req->u.members[1].keylen = 5;
  req->u.members[1].value = batch;
  list->u.items[0] = req;
  p->n = 1;
  p->requests = list->u.items;
  p->cursor = 1;
  *out = p;
  return 0;

err_free:
  lithd_hrana_pipeline_free(p);
  return -1;
}

void lithd_hrana_pipeline_free(lithd_hrana_pipeline *p) {
  if (p == NULL)
    return;
  lithd_arena_free(&p->mem);
  free(p);
}

int lithd_hrana_kind(const lj_value *req) {
  static const struct {
    const char *name;
    int kind;
  } kinds[] = {{"close", LITHD_HR_CLOSE},         {"execute", LITHD_HR_EXECUTE},
               {"batch", LITHD_HR_BATCH},         {"sequence", LITHD_HR_SEQUENCE},
               {"describe", LITHD_HR_DESCRIBE},   {"store_sql", LITHD_HR_STORE_SQL},
               {"close_sql", LITHD_HR_CLOSE_SQL}, {"get_autocommit", LITHD_HR_GET_AUTOCOMMIT}};
  const lj_value *t = lj_get(req, "type");
  if (t == NULL || t->type != LJ_STRING)
    return LITHD_HR_UNKNOWN;
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (strlen(kinds[i].name) == t->n && memcmp(kinds[i].name, t->u.s, t->n) == 0)
      return kinds[i].kind;
  return LITHD_HR_UNKNOWN;
}

/* ---- Stored SQL --------------------------------------------------------------- */

struct lithd_hrana_sqls {
  int n;
  size_t bytes;
  struct {
    int32_t id;
    char *sql; /* malloc'd */
  } e[LITHD_HRANA_MAX_SQLS];
};

/* An int32 field of obj into *out: 0, or -1. */
static int get_i32(const lj_value *obj, const char *key, int32_t *out) {
  const lj_value *v = lj_get(obj, key);
  if (v == NULL || v->type != LJ_INT || v->u.i < INT32_MIN || v->u.i > INT32_MAX)
    return -1;
  *out = (int32_t)v->u.i;
  return 0;
}

static const char *sqls_find(const lithd_hrana_sqls *m, int32_t id) {
  for (int i = 0; m != NULL && i < m->n; i++)
    if (m->e[i].id == id)
      return m->e[i].sql;
  return NULL;
}

/* What a stored text of n bytes holds of the answer budget: the copy and
 * its entry. */
#define SQLS_COST(n) ((n) + 1 + 64)

int lithd_hrana_sqls_store(lithd_hrana_sqls **mp, const lj_value *req, const lithd_limits *lim,
                           lithd_hrana_error *e) {
  int32_t id;
  const lj_value *sql = lj_get(req, "sql");
  lithd_limits l;
  lithd_limits_default(&l);
  size_t max_sql = lim != NULL && lim->max_sql_bytes > 0 ? lim->max_sql_bytes : l.max_sql_bytes;
  if (get_i32(req, "sql_id", &id) != 0)
    return lithd_hrana_fail(e, "PROTO_ERROR", "store_sql needs \"sql_id\", a 32-bit integer");
  if (sql == NULL || sql->type != LJ_STRING)
    return lithd_hrana_fail(e, "PROTO_ERROR", "store_sql needs \"sql\", a string");
  if (sql->n > max_sql)
    return lithd_hrana_fail(e, "REQUEST_TOO_LARGE", "the SQL text is %zu bytes, over the limit of %zu",
                            sql->n, max_sql);
  if (sqls_find(*mp, id) != NULL)
    return lithd_hrana_fail(e, "SQL_STORE_ID_IN_USE", "sql_id %" PRId32 " is in use: close_sql it first", id);
  if (*mp == NULL && (*mp = calloc(1, sizeof **mp)) == NULL)
    return lithd_hrana_fail(e, "SQLITE_NOMEM", "out of memory");
  lithd_hrana_sqls *m = *mp;
  if (m->n == LITHD_HRANA_MAX_SQLS)
    return lithd_hrana_fail(e, "SQL_STORE_TOO_MANY",
                            "a stream stores at most %d SQL texts: close_sql some first",
                            LITHD_HRANA_MAX_SQLS);
  if (m->bytes + sql->n > LITHD_HRANA_MAX_SQL_BYTES)
    return lithd_hrana_fail(e, "SQL_STORE_TOO_LARGE",
                            "a stream stores at most %zu bytes of SQL text: close_sql some first",
                            LITHD_HRANA_MAX_SQL_BYTES);
  /* every stream's texts together are held in the process's answer budget */
  if (lithd_answer_budget_charge(SQLS_COST(sql->n)) != 0)
    return lithd_hrana_fail(
        e, "SQL_STORE_TOO_LARGE",
        "lithd holds %zu MiB of answers and stored SQL at most (--max-answer-mib) and has no "
        "room for this text now: close streams, or retry later",
        lithd_answer_budget_cap() >> 20);
  char *copy = malloc(sql->n + 1);
  if (copy == NULL) {
    lithd_answer_budget_release(SQLS_COST(sql->n));
    return lithd_hrana_fail(e, "SQLITE_NOMEM", "out of memory");
  }
  memcpy(copy, sql->u.s, sql->n + 1);
  m->e[m->n].id = id;
  m->e[m->n].sql = copy;
  m->n++;
  m->bytes += sql->n;
  return 0;
}

int lithd_hrana_sqls_close(lithd_hrana_sqls *m, const lj_value *req, lithd_hrana_error *e) {
  int32_t id;
  if (get_i32(req, "sql_id", &id) != 0)
    return lithd_hrana_fail(e, "PROTO_ERROR", "close_sql needs \"sql_id\", a 32-bit integer");
  for (int i = 0; m != NULL && i < m->n; i++)
    if (m->e[i].id == id) {
      size_t n = strlen(m->e[i].sql);
      m->bytes -= n;
      lithd_answer_budget_release(SQLS_COST(n));
      free(m->e[i].sql);
      m->e[i] = m->e[--m->n];
      break;
    }
  return 0;
}

void lithd_hrana_sqls_free(lithd_hrana_sqls *m) {
  for (int i = 0; m != NULL && i < m->n; i++) {
    lithd_answer_budget_release(SQLS_COST(strlen(m->e[i].sql)));
    free(m->e[i].sql);
  }
  free(m);
}

/* ---- Requests into batches ------------------------------------------------------ */

typedef struct build {
  lithd_batch *b;
  const lithd_hrana_sqls *sqls;
  lithd_hrana_error *e;
  int step;
} build;

/* The SQL of a Stmt or of a sequence/describe request: "sql" or "sql_id",
 * exactly one. NULL with *e set. */
static const char *sql_of(build *c, const lj_value *obj, size_t *n) {
  const lj_value *sql = lj_get(obj, "sql"), *id = lj_get(obj, "sql_id");
  if (sql != NULL && sql->type == LJ_NULL)
    sql = NULL;
  if (id != NULL && id->type == LJ_NULL)
    id = NULL;
  if ((sql == NULL) == (id == NULL)) {
    lithd_hrana_fail(c->e, "PROTO_ERROR", "exactly one of \"sql\" and \"sql_id\" must be given");
    return NULL;
  }
  if (sql != NULL) {
    if (sql->type != LJ_STRING) {
      lithd_hrana_fail(c->e, "PROTO_ERROR", "\"sql\" must be a string");
      return NULL;
    }
    *n = sql->n;
    return sql->u.s;
  }
  if (id->type != LJ_INT || id->u.i < INT32_MIN || id->u.i > INT32_MAX) {
    lithd_hrana_fail(c->e, "PROTO_ERROR", "\"sql_id\" must be a 32-bit integer");
    return NULL;
  }
  const char *s = sqls_find(c->sqls, (int32_t)id->u.i);
  if (s == NULL) {
    lithd_hrana_fail(c->e, "SQL_NOT_FOUND", "no SQL text is stored as sql_id %" PRId64, id->u.i);
    return NULL;
  }
  *n = strlen(s);
  return s;
}

/* s[0..n) as a statement's text, copied into the batch. */
static int set_sql(build *c, stmt_spec *spec, const char *s, size_t n) {
  if (n > c->b->lim.max_sql_bytes)
    return lithd_hrana_fail(c->e, "REQUEST_TOO_LARGE",
                            "the SQL of step %d is %zu bytes, over the limit of %zu", c->step, n,
                            c->b->lim.max_sql_bytes);
  if (memchr(s, '\0', n) != NULL)
    return lithd_hrana_fail(c->e, "SQL_PARSE_ERROR", "the SQL of step %d holds a NUL character", c->step);
  char *copy = lithd_arena_alloc(&c->b->mem, n + 1, 1);
  if (copy == NULL)
    return lithd_hrana_fail(c->e, "SQLITE_NOMEM", "out of memory");
  memcpy(copy, s, n);
  copy[n] = '\0';
  spec->sql = copy;
  spec->txctl = lithd__txctl(copy, &spec->begin_kind);
  spec->fk_set = lithd__fk_pragma(copy);
  return 0;
}

/* How a failing argument is named: "argument 2" (pos from 1) or
 * "argument \"name\""; made only when one fails. */
static const char *arg_label(char *buf, size_t cap, size_t pos, const char *name) {
  if (name != NULL)
    snprintf(buf, cap, "argument \"%.30s\"", name);
  else
    snprintf(buf, cap, "argument %zu", pos);
  return buf;
}

static int parse_value(build *c, const lj_value *j, value *v, size_t pos, const char *name) {
  char label[48];
#define WHAT arg_label(label, sizeof label, pos, name)
  memset(v, 0, sizeof *v);
  if (j == NULL || j->type != LJ_OBJECT)
    return lithd_hrana_fail(c->e, "PROTO_ERROR", "%s: a value must be an object with a \"type\"", WHAT);
  const lj_value *t = lj_get(j, "type"), *val = lj_get(j, "value");
  if (t == NULL || t->type != LJ_STRING)
    return lithd_hrana_fail(c->e, "PROTO_ERROR", "%s: a value must have a \"type\"", WHAT);
  if (strcmp(t->u.s, "null") == 0) {
    v->type = SQLITE_NULL;
    return 0;
  }
  if (strcmp(t->u.s, "integer") == 0) {
    v->type = SQLITE_INTEGER;
    if (val != NULL && val->type == LJ_INT) {
      v->u.i = val->u.i;
      return 0;
    }
    if (val != NULL && val->type == LJ_STRING && val->n > 0 && val->n < 32) {
      char *end;
      errno = 0;
      long long x = strtoll(val->u.s, &end, 10);
      if (errno == 0 && *end == '\0' && !isspace((unsigned char)val->u.s[0])) {
        v->u.i = x;
        return 0;
      }
    }
    return lithd_hrana_fail(c->e, "PROTO_ERROR",
                            "%s: an integer's \"value\" must be a decimal string of a 64-bit integer", WHAT);
  }
  if (strcmp(t->u.s, "float") == 0) {
    v->type = SQLITE_FLOAT;
    if (val != NULL && val->type == LJ_REAL)
      v->u.d = val->u.d;
    else if (val != NULL && val->type == LJ_INT)
      v->u.d = (double)val->u.i;
    else
      return lithd_hrana_fail(c->e, "PROTO_ERROR", "%s: a float's \"value\" must be a number", WHAT);
    return 0;
  }
  if (strcmp(t->u.s, "text") == 0) {
    if (val == NULL || val->type != LJ_STRING)
      return lithd_hrana_fail(c->e, "PROTO_ERROR", "%s: a text's \"value\" must be a string", WHAT);
    v->type = SQLITE_TEXT;
    v->n = val->n;
    v->u.p = lithd_arena_copy(&c->b->mem, val->u.s, val->n + 1);
    if (v->u.p == NULL)
      return lithd_hrana_fail(c->e, "SQLITE_NOMEM", "out of memory");
    return 0;
  }
  if (strcmp(t->u.s, "blob") == 0) {
    const lj_value *b64 = lj_get(j, "base64");
    char why[64];
    if (b64 == NULL || b64->type != LJ_STRING)
      return lithd_hrana_fail(c->e, "PROTO_ERROR", "%s: a blob needs \"base64\", a string", WHAT);
    unsigned char *buf = lithd_arena_alloc(&c->b->mem, (b64->n + 3) / 4 * 3 + 1, 1);
    if (buf == NULL)
      return lithd_hrana_fail(c->e, "SQLITE_NOMEM", "out of memory");
    if (lithd__b64_decode(b64->u.s, b64->n, 1, buf, &v->n, why) != 0)
      return lithd_hrana_fail(c->e, "PROTO_ERROR", "%s: bad base64: %s", WHAT, why);
    v->type = SQLITE_BLOB;
    v->u.p = buf;
    return 0;
  }
  return lithd_hrana_fail(c->e, "PROTO_ERROR", "%s: unknown value type \"%.32s\"", WHAT, t->u.s);
#undef WHAT
}

/* A Stmt object into spec. */
static int parse_stmt(build *c, stmt_spec *spec, const lj_value *stmt) {
  size_t n = 0;
  if (stmt == NULL || stmt->type != LJ_OBJECT)
    return lithd_hrana_fail(c->e, "PROTO_ERROR", "step %d: \"stmt\" must be an object", c->step);
  const char *sql = sql_of(c, stmt, &n);
  if (sql == NULL || set_sql(c, spec, sql, n) != 0)
    return -1;
  const lj_value *args = lj_get(stmt, "args"), *named = lj_get(stmt, "named_args");
  const lj_value *want = lj_get(stmt, "want_rows");
  if (args != NULL && args->type == LJ_NULL)
    args = NULL;
  if (named != NULL && named->type == LJ_NULL)
    named = NULL;
  if ((args != NULL && args->type != LJ_ARRAY) || (named != NULL && named->type != LJ_ARRAY))
    return lithd_hrana_fail(c->e, "PROTO_ERROR", "\"args\" and \"named_args\" must be arrays");
  size_t na = args ? args->n : 0, nn = named ? named->n : 0;
  if (na > 0 && nn > 0)
    return lithd_hrana_fail(c->e, "ARGS_BOTH_POSITIONAL_AND_NAMED",
                            "Specifying both positional and named arguments is not supported");
  if (na + nn > (size_t)c->b->lim.max_params)
    return lithd_hrana_fail(c->e, "REQUEST_TOO_LARGE", "%zu arguments, over the limit of %d", na + nn,
                            c->b->lim.max_params);
  if (want != NULL && want->type != LJ_NULL) {
    if (want->type != LJ_TRUE && want->type != LJ_FALSE)
      return lithd_hrana_fail(c->e, "PROTO_ERROR", "\"want_rows\" must be a boolean");
    spec->no_rows = want->type == LJ_FALSE;
  }
  spec->nparams = (int)(na + nn);
  spec->named = nn > 0;
  spec->guess_prefix = 1;
  if (spec->nparams == 0)
    return 0;
  spec->params =
      lithd_arena_alloc(&c->b->mem, (size_t)spec->nparams * sizeof *spec->params, _Alignof(max_align_t));
  if (spec->params == NULL)
    return lithd_hrana_fail(c->e, "SQLITE_NOMEM", "out of memory");
  for (size_t k = 0; k < na; k++) {
    spec->params[k].name = NULL;
    if (parse_value(c, args->u.items[k], &spec->params[k].v, k + 1, NULL) != 0)
      return -1;
  }
  for (size_t k = 0; k < nn; k++) {
    const lj_value *arg = named->u.items[k];
    const lj_value *name = arg->type == LJ_OBJECT ? lj_get(arg, "name") : NULL;
    if (name == NULL || name->type != LJ_STRING || name->n == 0 || memchr(name->u.s, '\0', name->n))
      return lithd_hrana_fail(c->e, "PROTO_ERROR", "named argument %zu needs a \"name\", a string", k);
    spec->params[k].name = lithd_arena_copy(&c->b->mem, name->u.s, name->n + 1);
    if (spec->params[k].name == NULL)
      return lithd_hrana_fail(c->e, "SQLITE_NOMEM", "out of memory");
    if (parse_value(c, lj_get(arg, "value"), &spec->params[k].v, k + 1, name->u.s) != 0)
      return -1;
  }
  return 0;
}

/* A BatchCond into *out (in the batch's arena); depth bounds the nesting
 * (json.c bounds it too). */
static int parse_cond(build *c, const lj_value *j, step_cond *out, int depth) {
  memset(out, 0, sizeof *out);
  if (j == NULL || j->type != LJ_OBJECT)
    return lithd_hrana_fail(c->e, "PROTO_ERROR", "step %d: a condition must be an object", c->step);
  const lj_value *t = lj_get(j, "type");
  if (t == NULL || t->type != LJ_STRING)
    return lithd_hrana_fail(c->e, "PROTO_ERROR", "step %d: a condition needs a \"type\"", c->step);
  if (strcmp(t->u.s, "ok") == 0 || strcmp(t->u.s, "error") == 0) {
    const lj_value *s = lj_get(j, "step");
    out->op = t->u.s[0] == 'o' ? COND_OK : COND_ERROR;
    if (s == NULL || s->type != LJ_INT || s->u.i < 0 || s->u.i >= c->step)
      return lithd_hrana_fail(c->e, "PROTO_ERROR", "step %d: a condition may only name an earlier step",
                              c->step);
    out->step = (int)s->u.i;
    return 0;
  }
  if (strcmp(t->u.s, "is_autocommit") == 0) {
    out->op = COND_AUTOCOMMIT;
    return 0;
  }
  if (depth > 32)
    return lithd_hrana_fail(c->e, "PROTO_ERROR", "step %d: conditions nested too deep", c->step);
  const lj_value *list = NULL;
  if (strcmp(t->u.s, "not") == 0) {
    out->op = COND_NOT;
    out->n = 1;
  } else if (strcmp(t->u.s, "and") == 0 || strcmp(t->u.s, "or") == 0) {
    out->op = t->u.s[0] == 'a' ? COND_AND : COND_OR;
    list = lj_get(j, "conds");
    if (list == NULL || list->type != LJ_ARRAY)
      return lithd_hrana_fail(c->e, "PROTO_ERROR", "step %d: \"%s\" needs \"conds\", an array", c->step,
                              t->u.s);
    out->n = (int)list->n;
  } else {
    return lithd_hrana_fail(c->e, "PROTO_ERROR", "step %d: unknown condition \"%.32s\"", c->step, t->u.s);
  }
  step_cond *kids = lithd_arena_alloc(&c->b->mem, ((size_t)out->n + 1) * sizeof *kids, _Alignof(max_align_t));
  if (kids == NULL)
    return lithd_hrana_fail(c->e, "SQLITE_NOMEM", "out of memory");
  out->kids = kids;
  if (out->op == COND_NOT)
    return parse_cond(c, lj_get(j, "cond"), &kids[0], depth + 1);
  for (int k = 0; k < out->n; k++)
    if (parse_cond(c, list->u.items[k], &kids[k], depth + 1) != 0)
      return -1;
  return 0;
}

/* One statement of a sequence, a step on the success of the one before. */
static int add_piece(build *c, const char *p, size_t len) {
  stmt_spec *spec = &c->b->stmts[c->step];
  if (set_sql(c, spec, p, len) != 0)
    return -1;
  spec->no_rows = 1;
  if (c->step > 0) {
    step_cond *cond = lithd_arena_alloc(&c->b->mem, sizeof *cond, _Alignof(max_align_t));
    if (cond == NULL)
      return lithd_hrana_fail(c->e, "SQLITE_NOMEM", "out of memory");
    memset(cond, 0, sizeof *cond);
    cond->op = COND_OK;
    cond->step = c->step - 1;
    spec->cond = cond;
  }
  c->step++;
  return 0;
}

/* Whether spec may run on a reader: a query by its first keyword, or a
 * transaction step (a savepoint is the writer's). */
static int reads(const stmt_spec *spec) {
  if (spec->txctl == TXC_SAVEPOINT)
    return 0;
  return spec->txctl != TXC_NONE || lithd__first_keyword(spec->sql) == FIRST_QUERY;
}

/* Whether the stream's transaction may outlive the batch: a BEGIN step
 * not surely ended after it. Surely ended: a COMMIT or ROLLBACK step
 * after the last BEGIN that always runs, or client.batch()'s pattern, a
 * ROLLBACK that runs when a COMMIT step after the BEGIN did not succeed
 * (condition not(ok(that COMMIT))). Anything else may leave it open (a
 * sequence stops at its first error): such a batch runs as an interactive
 * transaction's first, so the stream can go on in it. */
static int opens(const lithd_batch *b) {
  int last = -1;
  for (int i = 0; i < b->n; i++)
    if (b->stmts[i].txctl == TXC_BEGIN)
      last = i;
  if (last < 0)
    return 0;
  for (int j = last + 1; j < b->n; j++) {
    const stmt_spec *sp = &b->stmts[j];
    if (sp->txctl != TXC_COMMIT && sp->txctl != TXC_ROLLBACK)
      continue;
    if (sp->cond == NULL)
      return 0;
    const step_cond *c = sp->cond;
    if (sp->txctl == TXC_ROLLBACK && c->op == COND_NOT && c->kids[0].op == COND_OK &&
        c->kids[0].step > last && b->stmts[c->kids[0].step].txctl == TXC_COMMIT)
      return 0;
  }
  return 1;
}

/* Whether cond holds only if step k succeeded (ok(k), or an and() of it). */
static int needs_ok(const step_cond *c, int k) {
  if (c == NULL)
    return 0;
  if (c->op == COND_OK)
    return c->step == k;
  if (c->op == COND_AND)
    for (int i = 0; i < c->n; i++)
      if (needs_ok(&c->kids[i], k))
        return 1;
  return 0;
}

/* Mark the steps whose failure the batch's own ROLLBACK undoes: between a
 * BEGIN and its COMMIT, each step on the success of the one before (so a
 * failure skips all to the COMMIT, the COMMIT included), and a ROLLBACK
 * after it unless the COMMIT succeeded. What client.batch() and migrate()
 * send: their steps then run without a savepoint each. */
static void mark_chains(lithd_batch *b) {
  for (int s = 0; s < b->n; s++) {
    if (b->stmts[s].txctl != TXC_BEGIN)
      continue;
    int c = s + 1;
    while (c < b->n && b->stmts[c].txctl == TXC_NONE && b->stmts[c].fk_set == FK_NONE)
      c++;
    if (c >= b->n || b->stmts[c].txctl != TXC_COMMIT)
      continue;
    int ok = 1;
    for (int j = s + 1; j <= c && ok; j++)
      ok = needs_ok(b->stmts[j].cond, j - 1);
    int rb = 0;
    for (int r = c + 1; r < b->n && !rb; r++) {
      const step_cond *rc = b->stmts[r].cond;
      rb = b->stmts[r].txctl == TXC_ROLLBACK && rc != NULL && rc->op == COND_NOT &&
           rc->kids[0].op == COND_OK && rc->kids[0].step == c;
    }
    for (int j = s + 1; ok && rb && j < c; j++)
      b->stmts[j].chained = 1;
  }
}

int lithd_hrana_batch(const lj_value *req, int kind, const lithd_hrana_sqls *m, const lithd_limits *lim,
                      lithd_batch **out, lithd_hrana_plan *plan, lithd_hrana_error *e) {
  build c = {.sqls = m, .e = e};
  const lj_value *steps = NULL;
  const char *text = NULL;
  size_t textn = 0;
  int n = 1, max;
  *out = NULL;
  memset(plan, 0, sizeof *plan);
  {
    lithd_limits l;
    lithd_limits_default(&l);
    max = lim != NULL && lim->max_statements > 0 ? lim->max_statements : l.max_statements;
  }

  if (kind == LITHD_HR_BATCH) {
    const lj_value *batch = lj_get(req, "batch");
    steps = batch != NULL ? lj_get(batch, "steps") : NULL;
    if (steps == NULL || steps->type != LJ_ARRAY)
      return lithd_hrana_fail(e, "PROTO_ERROR", "a batch request needs \"batch\": {\"steps\": [...]}");
    n = (int)steps->n;
  } else if (kind == LITHD_HR_SEQUENCE) {
    if ((text = sql_of(&c, req, &textn)) == NULL)
      return -1;
    /* counted no further than the limit: a text over it is not read whole */
    size_t k = lithd_split_count(text, textn, (size_t)max);
    if (k > (size_t)max)
      return lithd_hrana_fail(e, "REQUEST_TOO_LARGE", "more statements than the limit of %d", max);
    n = (int)k;
  } else if (kind != LITHD_HR_EXECUTE && kind != LITHD_HR_DESCRIBE) {
    return lithd_hrana_fail(e, "PROTO_ERROR", "not a request that runs SQL");
  }
  if (n > max)
    return lithd_hrana_fail(e, "REQUEST_TOO_LARGE", "%d statements, over the limit of %d", n, max);
  if ((c.b = lithd__batch_new(lim, n)) == NULL)
    return lithd_hrana_fail(e, "SQLITE_NOMEM", "out of memory");
  c.b->fmt.types = 1; /* every Col has its decltype */
  /* An answer bounded by its bytes alone, as sqld's (max_result_bytes
   * counts every cell: lithd_limits.cell_frame); no row bound. */
  c.b->lim.max_rows = INT64_MAX;
  c.b->lim.cell_frame = HRANA_CELL_FRAME;

  switch (kind) {
  case LITHD_HR_EXECUTE:
    if (parse_stmt(&c, &c.b->stmts[0], lj_get(req, "stmt")) != 0)
      goto err_free;
    /* A transaction statement is a step: its rules are the steps' */
    c.b->steps = (c.b->stmts[0].txctl != TXC_NONE && c.b->stmts[0].txctl != TXC_SAVEPOINT) ||
                 c.b->stmts[0].fk_set != FK_NONE;
    break;
  case LITHD_HR_DESCRIBE: {
    size_t len = 0;
    const char *s = sql_of(&c, req, &len);
    if (s == NULL || set_sql(&c, &c.b->stmts[0], s, len) != 0)
      goto err_free;
    c.b->stmts[0].describe = 1;
    c.b->stmts[0].txctl = TXC_NONE;
    plan->reads = 1;
    *out = c.b;
    return 0;
  }
  case LITHD_HR_SEQUENCE:
    c.b->steps = 1;
    {
      lithd_split sp;
      const char *p;
      size_t len;
      lithd_split_init(&sp, text, textn);
      while (c.step < n && lithd_split_next(&sp, &p, &len))
        if (add_piece(&c, p, len) != 0)
          goto err_free;
    }
    break;
  default: /* LITHD_HR_BATCH */
    c.b->steps = 1;
    for (c.step = 0; c.step < n; c.step++) {
      const lj_value *st = steps->u.items[c.step];
      if (st->type != LJ_OBJECT) {
        lithd_hrana_fail(e, "PROTO_ERROR", "step %d is not an object", c.step);
        goto err_free;
      }
      if (parse_stmt(&c, &c.b->stmts[c.step], lj_get(st, "stmt")) != 0)
        goto err_free;
      const lj_value *cond = lj_get(st, "condition");
      if (cond != NULL && cond->type != LJ_NULL) {
        step_cond *sc = lithd_arena_alloc(&c.b->mem, sizeof *sc, _Alignof(max_align_t));
        if (sc == NULL) {
          lithd_hrana_fail(e, "SQLITE_NOMEM", "out of memory");
          goto err_free;
        }
        if (parse_cond(&c, cond, sc, 0) != 0)
          goto err_free;
        c.b->stmts[c.step].cond = sc;
      }
    }
    break;
  }
  plan->reads = 1;
  for (int i = 0; i < c.b->n; i++) {
    const stmt_spec *sp = &c.b->stmts[i];
    if (!reads(sp))
      plan->reads = 0;
    if (sp->txctl == TXC_BEGIN && sp->begin_kind == TXB_READONLY)
      plan->readonly = 1;
    if (sp->txctl == TXC_BEGIN && sp->begin_kind == TXB_DEFERRED)
      plan->deferred = 1;
    if (sp->fk_set != FK_NONE)
      plan->fk = 1;
  }
  plan->opens = opens(c.b) || plan->fk; /* fk: a command alone plays the connection */
  mark_chains(c.b);
  if (plan->fk)
    plan->reads = 0;
  if (c.b->n == 0)
    plan->reads = 0; /* an empty sequence or batch: nothing to read */
  *out = c.b;
  return 0;

err_free:
  lithd_batch_free(c.b);
  return -1;
}

/* ---- Answers ------------------------------------------------------------------ */

static const char *kind_name(int kind) {
  switch (kind) {
  case LITHD_HR_CLOSE: return "close";
  case LITHD_HR_EXECUTE: return "execute";
  case LITHD_HR_BATCH: return "batch";
  case LITHD_HR_SEQUENCE: return "sequence";
  case LITHD_HR_DESCRIBE: return "describe";
  case LITHD_HR_STORE_SQL: return "store_sql";
  case LITHD_HR_CLOSE_SQL: return "close_sql";
  default: return "get_autocommit";
  }
}

void lithd_hrana_put_ok(lithd_buf *b, int kind, int is_autocommit) {
  lithd_buf_puts(b, "{\"type\":\"ok\",\"response\":{\"type\":\"");
  lithd_buf_puts(b, kind_name(kind));
  lithd_buf_puts(b, "\"");
  if (kind == LITHD_HR_GET_AUTOCOMMIT)
    lithd_buf_printf(b, ",\"is_autocommit\":%s", is_autocommit ? "true" : "false");
  lithd_buf_puts(b, "}}");
}

static void put_error_object(lithd_buf *b, const char *code, const char *message) {
  lithd_buf_puts(b, "{\"message\":");
  lithd_json_put_string(b, message, strlen(message));
  lithd_buf_puts(b, ",\"code\":");
  lithd_json_put_string(b, code, strlen(code));
  lithd_buf_puts(b, "}");
}

void lithd_hrana_put_error(lithd_buf *b, const lithd_hrana_error *e) {
  lithd_buf_puts(b, "{\"type\":\"error\",\"error\":");
  put_error_object(b, e->code != NULL ? e->code : "SQLITE_ERROR", e->message);
  lithd_buf_puts(b, "}");
}

char *lithd_hrana_error_json(const lithd_hrana_error *e) {
  lithd_buf b = {0};
  put_error_object(&b, e->code != NULL ? e->code : "SQLITE_ERROR", e->message);
  return lithd_buf_finish(&b);
}

static void put_value(lithd_buf *b, const value *v) {
  switch (v->type) {
  case SQLITE_INTEGER:
    lithd_buf_puts(b, "{\"type\":\"integer\",\"value\":\"");
    lithd_buf_put_i64(b, v->u.i);
    lithd_buf_puts(b, "\"}");
    break;
  case SQLITE_FLOAT:
    lithd_buf_puts(b, "{\"type\":\"float\",\"value\":");
    if (isfinite(v->u.d))
      lithd__put_real(b, v->u.d);
    else
      lithd_buf_puts(b, v->u.d > 0 ? "1e999" : "-1e999");
    lithd_buf_puts(b, "}");
    break;
  case SQLITE_TEXT:
    lithd_buf_puts(b, "{\"type\":\"text\",\"value\":");
    lithd_json_put_string(b, (const char *)v->u.p, v->n);
    lithd_buf_puts(b, "}");
    break;
  case SQLITE_BLOB:
    lithd_buf_puts(b, "{\"type\":\"blob\",\"base64\":\"");
    lithd__put_base64_text(b, v->u.p, v->n);
    lithd_buf_puts(b, "\"}");
    break;
  default: lithd_buf_puts(b, "{\"type\":\"null\"}"); break;
  }
}

static void put_str_or_null(lithd_buf *b, const char *s) {
  if (s == NULL)
    lithd_buf_puts(b, "null");
  else
    lithd_json_put_string(b, s, strlen(s));
}

static void put_cols(lithd_buf *b, const stmt_out *o) {
  lithd_buf_puts(b, "[");
  for (int c = 0; c < o->ncols; c++) {
    lithd_buf_puts(b, c ? ",{\"name\":" : "{\"name\":");
    put_str_or_null(b, o->cols ? o->cols[c] : NULL);
    lithd_buf_puts(b, ",\"decltype\":");
    put_str_or_null(b, o->decls ? o->decls[c] : NULL);
    lithd_buf_puts(b, "}");
  }
  lithd_buf_puts(b, "]");
}

/* Row r of o as [value, ...]. */
static void put_row(lithd_buf *b, const stmt_out *o, int64_t r) {
  lithd_buf_puts(b, "[");
  for (int c = 0; c < o->ncols; c++) {
    if (c)
      lithd_buf_puts(b, ",");
    put_value(b, &o->vals[(size_t)r * (size_t)o->ncols + (size_t)c]);
  }
  lithd_buf_puts(b, "]");
}

/* A StmtResult's fields after its rows (a cursor's step_end has them). */
static void put_stmt_tail(lithd_buf *b, const stmt_out *o, int version);

static void put_stmt_result(lithd_buf *b, const stmt_out *o, int version) {
  lithd_buf_puts(b, "{\"cols\":");
  put_cols(b, o);
  lithd_buf_puts(b, ",\"rows\":[");
  for (int64_t r = 0; r < o->nrows; r++) {
    if (r)
      lithd_buf_puts(b, ",");
    put_row(b, o, r);
  }
  lithd_buf_puts(b, "],");
  put_stmt_tail(b, o, version);
  lithd_buf_puts(b, "}");
}

static void put_stmt_tail(lithd_buf *b, const stmt_out *o, int version) {
  lithd_buf_puts(b, "\"affected_row_count\":");
  lithd_buf_put_i64(b, o->changes);
  lithd_buf_puts(b, ",\"last_insert_rowid\":");
  if (o->last_rowid != 0) {
    lithd_buf_puts(b, "\"");
    lithd_buf_put_i64(b, o->last_rowid);
    lithd_buf_puts(b, "\"");
  } else {
    lithd_buf_puts(b, "null");
  }
  if (version >= 3) {
    /* the milliseconds to the microsecond, as %.3f would round them */
    int64_t us = o->duration_ns > 0 ? (o->duration_ns + 500) / 1000 : 0;
    char frac[4] = {(char)('0' + us % 1000 / 100), (char)('0' + us % 100 / 10), (char)('0' + us % 10), 0};
    lithd_buf_puts(b, ",\"rows_read\":");
    lithd_buf_put_i64(b, o->nrows);
    lithd_buf_puts(b, ",\"rows_written\":");
    lithd_buf_put_i64(b, o->changes);
    lithd_buf_puts(b, ",\"query_duration_ms\":");
    lithd_buf_put_i64(b, us / 1000);
    lithd_buf_puts(b, ".");
    lithd_buf_puts(b, frac);
  }
}

static void put_describe(lithd_buf *b, const stmt_out *o) {
  lithd_buf_puts(b, "{\"params\":[");
  for (int k = 0; k < o->nparam_names; k++) {
    lithd_buf_puts(b, k ? ",{\"name\":" : "{\"name\":");
    put_str_or_null(b, o->param_names[k]);
    lithd_buf_puts(b, "}");
  }
  lithd_buf_puts(b, "],\"cols\":");
  put_cols(b, o);
  lithd_buf_printf(b, ",\"is_explain\":%s,\"is_readonly\":%s}", o->is_explain ? "true" : "false",
                   o->is_readonly ? "true" : "false");
}

static void put_err(lithd_buf *b, int code, const char *message) {
  lithd_hrana_error e;
  e.code = lithd_hrana_code(code, message);
  snprintf(e.message, sizeof e.message, "%s", message != NULL && message[0] ? message : lith_errstr(code));
  lithd_hrana_put_error(b, &e);
}

void lithd_hrana_put_outcome(lithd_buf *b, int kind, int version, int rc, const lithd_result *r,
                             const char *errmsg) {
  lithd_error e;
  /* sqljson.h's recipe: a result that is not the outcome is never sent */
  if (rc != LITH_OK || r == NULL) {
    if (rc == LITH_OK)
      rc = LITH_NOMEM;
    if (r != NULL && lithd_result_error(r, &e) == rc)
      put_err(b, rc, e.message);
    else
      put_err(b, rc, errmsg);
    return;
  }
  const stmt_out *o = r->nouts > 0 ? &r->outs[0] : NULL;
  if (kind == LITHD_HR_EXECUTE || kind == LITHD_HR_DESCRIBE) {
    if (o == NULL) {
      put_err(b, LITH_MISUSE, "no statement");
      return;
    }
    if (o->state == STEP_FAILED) { /* a transaction step refused */
      put_err(b, o->error->code, o->error->message);
      return;
    }
    lithd_buf_puts(b, "{\"type\":\"ok\",\"response\":{\"type\":\"");
    lithd_buf_puts(b, kind_name(kind));
    lithd_buf_puts(b, "\",\"result\":");
    if (kind == LITHD_HR_DESCRIBE)
      put_describe(b, o);
    else
      put_stmt_result(b, o, version);
    lithd_buf_puts(b, "}}");
    return;
  }
  if (kind == LITHD_HR_SEQUENCE) {
    for (int i = 0; i < r->nouts; i++)
      if (r->outs[i].state == STEP_FAILED) {
        put_err(b, r->outs[i].error->code, r->outs[i].error->message);
        return;
      }
    lithd_buf_puts(b, "{\"type\":\"ok\",\"response\":{\"type\":\"sequence\"}}");
    return;
  }
  lithd_buf_puts(b, "{\"type\":\"ok\",\"response\":{\"type\":\"batch\",\"result\":{\"step_results\":[");
  for (int i = 0; i < r->nouts; i++) {
    if (i)
      lithd_buf_puts(b, ",");
    if (r->outs[i].state == STEP_OK)
      put_stmt_result(b, &r->outs[i], version);
    else
      lithd_buf_puts(b, "null");
  }
  lithd_buf_puts(b, "],\"step_errors\":[");
  for (int i = 0; i < r->nouts; i++) {
    if (i)
      lithd_buf_puts(b, ",");
    if (r->outs[i].state == STEP_FAILED)
      put_error_object(b, lithd_hrana_code(r->outs[i].error->code, r->outs[i].error->message),
                       r->outs[i].error->message);
    else
      lithd_buf_puts(b, "null");
  }
  lithd_buf_puts(b, "]}}}");
}

void lithd_hrana_put_cursor(lithd_buf *b, int rc, const lithd_result *r, const char *errmsg) {
  lithd_error e;
  if (rc != LITH_OK || r == NULL) { /* as put_outcome: the batch failed whole */
    if (rc == LITH_OK)
      rc = LITH_NOMEM;
    put_err(b, rc, r != NULL && lithd_result_error(r, &e) == rc ? e.message : errmsg);
    lithd_buf_puts(b, "\n");
    return;
  }
  for (int i = 0; i < r->nouts; i++) {
    const stmt_out *o = &r->outs[i];
    if (o->state == STEP_FAILED) {
      lithd_buf_printf(b, "{\"type\":\"step_error\",\"step\":%d,\"error\":", i);
      put_error_object(b, lithd_hrana_code(o->error->code, o->error->message), o->error->message);
      lithd_buf_puts(b, "}\n");
      continue;
    }
    if (o->state != STEP_OK)
      continue; /* skipped: no entry */
    lithd_buf_printf(b, "{\"type\":\"step_begin\",\"step\":%d,\"cols\":", i);
    put_cols(b, o);
    lithd_buf_puts(b, "}\n");
    for (int64_t k = 0; k < o->nrows; k++) {
      lithd_buf_puts(b, "{\"type\":\"row\",\"row\":");
      put_row(b, o, k);
      lithd_buf_puts(b, "}\n");
    }
    lithd_buf_puts(b, "{\"type\":\"step_end\",");
    put_stmt_tail(b, o, 3);
    lithd_buf_puts(b, "}\n");
  }
}

/* ---- Hrana over WebSocket ------------------------------------------------------ */

int lithd_hrana_ws_parse(const char *msg, size_t len, lithd_hrana_wsmsg *out, lithd_hrana_error *e) {
  static const struct {
    const char *name;
    int kind;
  } own[] = {{"open_stream", LITHD_HRWS_OPEN_STREAM},
             {"close_stream", LITHD_HRWS_CLOSE_STREAM},
             {"open_cursor", LITHD_HRWS_OPEN_CURSOR},
             {"close_cursor", LITHD_HRWS_CLOSE_CURSOR},
             {"fetch_cursor", LITHD_HRWS_FETCH_CURSOR}};
  lj_error jerr = {0, 0, ""};
  lj_value *root;
  memset(out, 0, sizeof *out);
  lithd_hrana_pipeline *p = calloc(1, sizeof *p);
  if (p == NULL)
    return lithd_hrana_fail(e, "SQLITE_NOMEM", "out of memory");
  out->p = p;
  if (lj_parse(&p->mem, msg, len, &root, &jerr) != 0) {
    lithd_hrana_fail(e, "PROTO_ERROR", "invalid JSON at line %d column %d: %s", jerr.line, jerr.column,
                     jerr.text);
    goto err;
  }
  const lj_value *t = root->type == LJ_OBJECT ? lj_get(root, "type") : NULL;
  if (t == NULL || t->type != LJ_STRING) {
    lithd_hrana_fail(e, "PROTO_ERROR", "a message is an object with a \"type\"");
    goto err;
  }
  if (t->n == 5 && memcmp(t->u.s, "hello", 5) == 0) {
    const lj_value *jwt = lj_get(root, "jwt");
    out->type = LITHD_HRWS_HELLO;
    if (jwt != NULL && jwt->type != LJ_NULL) {
      if (jwt->type != LJ_STRING || memchr(jwt->u.s, '\0', jwt->n) != NULL) {
        lithd_hrana_fail(e, "PROTO_ERROR", "\"jwt\" must be a string or null");
        goto err;
      }
      out->jwt = jwt->u.s;
    }
    return 0;
  }
  if (t->n != 7 || memcmp(t->u.s, "request", 7) != 0) {
    lithd_hrana_fail(e, "PROTO_ERROR", "a message is a hello or a request");
    goto err;
  }
  out->type = LITHD_HRWS_REQUEST;
  lj_value *rq = lj_get(root, "request");
  if (get_i32(root, "request_id", &out->request_id) != 0 || rq == NULL || rq->type != LJ_OBJECT) {
    lithd_hrana_fail(e, "PROTO_ERROR",
                     "a request message has an int32 \"request_id\" and a \"request\" object");
    goto err;
  }
  p->n = 1;
  p->requests = lithd_arena_alloc(&p->mem, sizeof *p->requests, sizeof(void *));
  if (p->requests == NULL) {
    lithd_hrana_fail(e, "SQLITE_NOMEM", "out of memory");
    goto err;
  }
  p->requests[0] = rq;
  out->kind = lithd_hrana_kind(rq);
  if (out->kind == LITHD_HR_CLOSE)
    out->kind = LITHD_HR_UNKNOWN; /* HTTP's; a WebSocket closes a stream with close_stream */
  const lj_value *rt = lj_get(rq, "type");
  for (size_t i = 0;
       out->kind == LITHD_HR_UNKNOWN && rt != NULL && rt->type == LJ_STRING && i < sizeof own / sizeof own[0];
       i++)
    if (strlen(own[i].name) == rt->n && memcmp(own[i].name, rt->u.s, rt->n) == 0)
      out->kind = own[i].kind;
  if (out->kind == LITHD_HRWS_OPEN_CURSOR) {
    /* its batch runs as a batch request whose outcome is written as a
     * cursor's entries (p->cursor) */
    lj_value *batch = lj_get(rq, "batch"), *req;
    if (batch == NULL || batch->type != LJ_OBJECT || (req = lj_make(&p->mem, LJ_OBJECT, 2)) == NULL ||
        (req->u.members[0].value = lj_make_string(&p->mem, "batch", 5)) == NULL) {
      lithd_hrana_fail(e, "PROTO_ERROR", "open_cursor needs a \"batch\" object");
      goto err;
    }
    req->u.members[0].key = "type";
    req->u.members[0].keylen = 4;
    req->u.members[1].key = "batch";
    req->u.members[1].keylen = 5;
    req->u.members[1].value = batch;
    p->requests[0] = req;
    p->cursor = 1;
  }
  if (out->kind >= LITHD_HRWS_OPEN_CURSOR &&
      (get_i32(rq, "cursor_id", &out->cursor_id) != 0 ||
       (out->kind == LITHD_HRWS_FETCH_CURSOR &&
        (get_i32(rq, "max_count", &out->max_count) != 0 || out->max_count < 0)))) {
    lithd_hrana_fail(e, "PROTO_ERROR",
                     "a cursor's request needs an int32 \"cursor_id\" (and fetch_cursor a \"max_count\")");
    goto err;
  }
  switch (out->kind) {
  case LITHD_HR_UNKNOWN:
  case LITHD_HR_STORE_SQL:
  case LITHD_HR_CLOSE_SQL:
  case LITHD_HRWS_CLOSE_CURSOR:
  case LITHD_HRWS_FETCH_CURSOR: return 0; /* no stream (a cursor has one) */
  default:
    if (get_i32(rq, "stream_id", &out->stream_id) != 0) {
      lithd_hrana_fail(e, "PROTO_ERROR", "the request needs an int32 \"stream_id\"");
      goto err;
    }
    return 0;
  }
err:
  lithd_hrana_pipeline_free(p);
  out->p = NULL;
  return -1;
}

/* obj's "sql_id" (when it has no "sql") replaced by the text stored
 * under it, copied into p's tree; *added counts the bytes, at most max. */
static int resolve_obj(lithd_hrana_pipeline *p, lj_value *obj, const lithd_hrana_sqls *m, size_t max,
                       size_t *added, lithd_hrana_error *e) {
  if (obj == NULL || obj->type != LJ_OBJECT || lj_get(obj, "sql") != NULL)
    return 0;
  for (size_t i = 0; i < obj->n; i++) {
    lj_member *mb = &obj->u.members[i];
    if (mb->keylen != 6 || memcmp(mb->key, "sql_id", 6) != 0)
      continue;
    if (mb->value->type != LJ_INT || mb->value->u.i < INT32_MIN || mb->value->u.i > INT32_MAX)
      return 0; /* the batch's rules say why */
    const char *s = sqls_find(m, (int32_t)mb->value->u.i);
    if (s == NULL)
      return 0; /* SQL_NOT_FOUND when it runs */
    size_t n = strlen(s);
    if (n > max - *added)
      return lithd_hrana_fail(
          e, "REQUEST_TOO_LARGE",
          "the request's stored SQL comes to more than %zu bytes, the most a message may hold "
          "(--max-body)",
          max);
    lj_value *v = lj_make_string(&p->mem, s, n);
    if (v == NULL)
      return lithd_hrana_fail(e, "SQLITE_NOMEM", "out of memory");
    mb->key = "sql";
    mb->keylen = 3;
    mb->value = v;
    *added += n;
    return 0;
  }
  return 0;
}

long lithd_hrana_ws_resolve(lithd_hrana_pipeline *p, const lithd_hrana_sqls *m, size_t max,
                            lithd_hrana_error *e) {
  lj_value *rq = p->n == 1 ? p->requests[0] : NULL;
  size_t added = 0;
  switch (rq != NULL ? lithd_hrana_kind(rq) : LITHD_HR_UNKNOWN) {
  case LITHD_HR_EXECUTE:
    if (resolve_obj(p, lj_get(rq, "stmt"), m, max, &added, e) != 0)
      return -1;
    break;
  case LITHD_HR_BATCH: {
    const lj_value *steps = lj_get(lj_get(rq, "batch"), "steps");
    for (size_t i = 0; steps != NULL && steps->type == LJ_ARRAY && i < steps->n; i++)
      if (steps->u.items[i]->type == LJ_OBJECT &&
          resolve_obj(p, lj_get(steps->u.items[i], "stmt"), m, max, &added, e) != 0)
        return -1;
    break;
  }
  case LITHD_HR_SEQUENCE:
  case LITHD_HR_DESCRIBE:
    if (resolve_obj(p, rq, m, max, &added, e) != 0)
      return -1;
    break;
  default: break;
  }
  return (long)added;
}

void lithd_hrana_ws_response(lithd_buf *b, int32_t id, const char *entry, size_t len) {
  static const char ok[] = "{\"type\":\"ok\",", err[] = "{\"type\":\"error\",";
  int is_ok = len >= sizeof ok - 1 && memcmp(entry, ok, sizeof ok - 1) == 0;
  size_t skip = is_ok                                                              ? sizeof ok - 1
                : len >= sizeof err - 1 && memcmp(entry, err, sizeof err - 1) == 0 ? sizeof err - 1
                                                                                   : 0;
  if (skip == 0) { /* not an entry of ours: never happens, but never malformed either */
    lithd_hrana_error e;
    lithd_hrana_fail(&e, "INTERNAL", "no answer");
    lithd_hrana_ws_error(b, id, &e);
    return;
  }
  lithd_buf_printf(b, "{\"type\":\"%s\",\"request_id\":%" PRId32 ",",
                   is_ok ? "response_ok" : "response_error", id);
  lithd_buf_put(b, entry + skip, len - skip);
}

void lithd_hrana_ws_ok(lithd_buf *b, int32_t id, const char *type) {
  lithd_buf_printf(b, "{\"type\":\"response_ok\",\"request_id\":%" PRId32 ",\"response\":{\"type\":\"%s\"}}",
                   id, type);
}

void lithd_hrana_ws_error(lithd_buf *b, int32_t id, const lithd_hrana_error *e) {
  lithd_buf_printf(b, "{\"type\":\"response_error\",\"request_id\":%" PRId32 ",\"error\":", id);
  put_error_object(b, e->code != NULL ? e->code : "SQLITE_ERROR", e->message);
  lithd_buf_puts(b, "}");
}
