/*
 * sqljson — JSON statement lists in, SQLite work, JSON results out.
 *
 * Design:
 *   - lithd_batch_parse reads the body with json.c's reader into the
 *     batch's own arena, checks the whole request (shape, types, limits,
 *     base64) and turns it into plain C values in that arena. So a bad
 *     request is refused before it reaches the writer, the writer thread
 *     runs over a few flat arrays without allocating per value, and a
 *     request costs a handful of mallocs.
 *   - Running (lithd_batch_run on the writer, lithd_batch_read on a
 *     reader) shares one loop: fetch the cached statement, bind, step to the
 *     end while copying every cell into the result's arena, reset. Anything
 *     that could make the answer unsendable (too many rows or bytes, TEXT
 *     that is not UTF-8) is found here, while the command can still fail,
 *     never after a commit.
 *   - Encoding writes JSON text straight into a growing buffer, off the
 *     writer thread. Doing it by hand rather than through a json_t tree
 *     saves a node per cell and lets REALs come out in their shortest exact
 *     form (0.1, not jansson's 0.10000000000000001).
 *   - A command may run more than once, so a run always starts by freeing
 *     whatever result the previous run left in *out.
 */
#include "sqljson.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "arena.h"
#include "guard.h"
#include "json.h"

/* Arenas: arena.h. */
typedef lithd_arena arena;
#define arena_alloc lithd_arena_alloc
#define arena_copy lithd_arena_copy
#define arena_free lithd_arena_free

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

typedef struct param {
  const char *name; /* NULL when bound by position */
  value v;
} param;

typedef struct stmt_spec {
  const char *sql;
  int named;
  int nparams;
  param *params;
} stmt_spec;

struct lithd_batch {
  lithd_limits lim;
  int n;
  stmt_spec *stmts;
  arena mem;
};

typedef struct stmt_out {
  int64_t changes;
  int64_t last_rowid;
  int ncols;
  const char **cols;
  int64_t nrows;
  value *vals; /* nrows * ncols, row by row */
  size_t nvals, capvals;
} stmt_out;

struct lithd_result {
  lithd_error err;
  int n;          /* statements that ran (all of them on success) */
  int nouts;
  stmt_out *outs; /* nouts: one per statement of the batch */
  int64_t rows;   /* all statements together */
  size_t bytes;
  arena mem;
};

/* ---- Errors ---------------------------------------------------------------- */

static int verror_set(lithd_error *err, int code, int statement, const char *fmt, va_list ap) {
  if (err) {
    err->code = code;
    err->statement = statement;
    vsnprintf(err->message, sizeof err->message, fmt, ap);
  }
  return code;
}

int lithd_error_set(lithd_error *err, int code, int statement, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  verror_set(err, code, statement, fmt, ap);
  va_end(ap);
  return code;
}

static void error_clear(lithd_error *err) {
  err->code = LITH_OK;
  err->statement = -1;
  err->message[0] = '\0';
}

const char *lithd_code_name(int code) {
  switch (code) {
  case LITH_OK: return "ok";
  case LITH_ERROR: return "sql_error";
  case LITH_MISUSE: return "misuse";
  case LITH_NOMEM: return "nomem";
  case LITH_CLOSED: return "closed";
  case LITH_QUEUE_FULL: return "queue_full";
  case LITH_BUSY: return "busy";
  case LITH_CONSTRAINT: return "constraint";
  case LITH_IOERR: return "ioerr";
  case LITH_DISKFULL: return "disk_full";
  case LITH_ABORTED: return "aborted";
  case LITH_CANTOPEN: return "cantopen";
  case LITH_CORRUPT: return "corrupt";
  case LITH_READONLY: return "readonly";
  case LITH_SCHEMA: return "schema";
  case LITH_INTERRUPTED: return "interrupted";
  case LITHD_BAD_REQUEST: return "bad_request";
  case LITHD_TOO_LARGE: return "too_large";
  case LITHD_RESULT_TOO_LARGE: return "result_too_large";
  case LITHD_UNENCODABLE: return "unencodable";
  case LITHD_NOT_A_QUERY: return "not_a_query";
  case LITHD_TIMEOUT: return "timeout";
  case LITHD_NOT_FOUND: return "not_found";
  case LITHD_FORBIDDEN: return "forbidden";
  case LITHD_CONFLICT: return "conflict";
  default: return code >= LITH_USER ? "command_error" : "unknown";
  }
}

int lithd_http_status(int code) {
  switch (code) {
  case LITH_OK: return 200;
  case LITHD_BAD_REQUEST:
  case LITH_ERROR:
  case LITH_MISUSE: return 400;
  case LITHD_NOT_A_QUERY:
  case LITHD_FORBIDDEN: return 403;
  case LITHD_NOT_FOUND: return 404;
  case LITH_CONSTRAINT:
  case LITHD_CONFLICT: return 409;
  case LITHD_TOO_LARGE: return 413;
  case LITHD_RESULT_TOO_LARGE:
  case LITHD_UNENCODABLE:
  case LITHD_TIMEOUT: return 422;
  case LITH_BUSY:
  case LITH_QUEUE_FULL:
  case LITH_CLOSED:
  case LITH_INTERRUPTED:
  case LITH_ABORTED: return 503;
  case LITH_DISKFULL: return 507;
  default: return 500; /* NOMEM, IOERR, CORRUPT, CANTOPEN, READONLY, SCHEMA, ... */
  }
}

/* ---- Limits ------------------------------------------------------------------ */

void lithd_limits_default(lithd_limits *lim) {
  lim->max_body_bytes = 8u * 1024 * 1024;
  lim->max_statements = 1000;
  lim->max_sql_bytes = 100000;
  lim->max_params = 1000;
  lim->max_rows = 10000;
  lim->max_result_bytes = 64u * 1024 * 1024;
  lim->max_run_ms = 5000;
}

static void limits_resolve(const lithd_limits *given, lithd_limits *out) {
  lithd_limits_default(out);
  if (!given)
    return;
  if (given->max_body_bytes > 0)
    out->max_body_bytes = given->max_body_bytes;
  if (given->max_statements > 0)
    out->max_statements = given->max_statements;
  if (given->max_sql_bytes > 0)
    out->max_sql_bytes = given->max_sql_bytes;
  if (given->max_params > 0)
    out->max_params = given->max_params;
  if (given->max_rows > 0)
    out->max_rows = given->max_rows;
  if (given->max_result_bytes > 0)
    out->max_result_bytes = given->max_result_bytes;
  if (given->max_run_ms > 0)
    out->max_run_ms = given->max_run_ms;
}

/* ---- UTF-8 ------------------------------------------------------------------- */

/* The length of the well-formed UTF-8 sequence at p (n bytes available), or
 * 0 if there is none: no overlong forms, no surrogates, nothing past
 * U+10FFFF — what a JSON parser accepts. */
static size_t utf8_seq(const unsigned char *p, size_t n) {
  unsigned c = p[0];
  size_t len;
  unsigned lo = 0x80, hi = 0xBF; /* bounds of the second byte */
  if (c < 0x80)
    return 1;
  if (c >= 0xC2 && c <= 0xDF)
    len = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0)
      lo = 0xA0;
    else if (c == 0xED)
      hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0)
      lo = 0x90;
    else if (c == 0xF4)
      hi = 0x8F;
  } else
    return 0;
  if (n < len || p[1] < lo || p[1] > hi)
    return 0;
  for (size_t i = 2; i < len; i++)
    if ((p[i] & 0xC0) != 0x80)
      return 0;
  return len;
}

static int utf8_valid(const unsigned char *p, size_t n) {
  size_t i = 0;
  while (i < n) {
    size_t k = utf8_seq(p + i, n - i);
    if (!k)
      return 0;
    i += k;
  }
  return 1;
}

/* ---- Base64 (RFC 4648, standard alphabet, padded, strict) ---------------- */

static const char b64_chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  if (c == '+')
    return 62;
  if (c == '/')
    return 63;
  return -1;
}

/* Decode s (n bytes) into out, which has room for n / 4 * 3 bytes; *outn
 * gets the length. Returns 0, or -1 with a reason in why (64 bytes). */
static int b64_decode(const char *s, size_t n, unsigned char *out, size_t *outn, char *why) {
  size_t o = 0;
  if (n % 4 != 0) {
    snprintf(why, 64, "length %zu is not a multiple of 4", n);
    return -1;
  }
  for (size_t i = 0; i < n; i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; k++) {
      unsigned char c = (unsigned char)s[i + k];
      if (c == '=' && i + 4 == n && k >= 2) {
        v[k] = 0;
        pad++;
        continue;
      }
      v[k] = pad ? -1 : b64_value(c); /* nothing but '=' after a '=' */
      if (v[k] < 0) {
        snprintf(why, 64, "bad character at offset %zu", i + (size_t)k);
        return -1;
      }
    }
    uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
    if ((pad == 1 && (w & 0xFF)) || (pad == 2 && (w & 0xFFFF))) {
      snprintf(why, 64, "stray bits before the padding at offset %zu", i);
      return -1;
    }
    out[o++] = (unsigned char)(w >> 16);
    if (pad < 2)
      out[o++] = (unsigned char)(w >> 8);
    if (pad < 1)
      out[o++] = (unsigned char)w;
  }
  *outn = o;
  return 0;
}

/* ---- Parsing ------------------------------------------------------------------ */

/* The first key of obj that is neither a nor b (b may be NULL), or NULL.
 * Keys are compared with their length: "sql\u0000x" is not "sql". */
static const char *unknown_key(const lj_value *obj, const char *a, const char *b) {
  for (size_t i = 0; i < obj->n; i++) {
    const char *key = obj->u.members[i].key;
    size_t len = obj->u.members[i].keylen;
    if (!(len == strlen(a) && memcmp(key, a, len) == 0) &&
        !(b && len == strlen(b) && memcmp(key, b, len) == 0))
      return key;
  }
  return NULL;
}

/* Describes the parameter being parsed, for messages; `own`: the parsed
 * tree lives in the batch's arena, so its strings need no copy. */
typedef struct pctx {
  lithd_batch *b;
  int stmt;
  const char *name; /* named parameter, or NULL */
  size_t pos;       /* positional parameter, from 1 */
  lithd_error *err;
  int own;
} pctx;

static int pfail(const pctx *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int pfail(const pctx *c, int code, const char *fmt, ...) {
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (c->name)
    return lithd_error_set(c->err, code, c->stmt, "parameter \"%.64s\": %s", c->name, what);
  return lithd_error_set(c->err, code, c->stmt, "parameter %zu: %s", c->pos, what);
}

/* s[0..n) in the batch's arena: as it is when the tree lives there. */
static const char *keep(const pctx *c, const char *s, size_t n) {
  return c->own ? s : arena_copy(&c->b->mem, s, n);
}

static int parse_blob(const pctx *c, const lj_value *obj, value *v) {
  const lj_value *s = lj_get(obj, "base64");
  if (!s || obj->n != 1 || unknown_key(obj, "base64", NULL))
    return pfail(c, LITHD_BAD_REQUEST,
                 "an object must be {\"base64\": \"...\"} (a blob); arrays and other objects are not values");
  if (s->type != LJ_STRING)
    return pfail(c, LITHD_BAD_REQUEST, "\"base64\" must be a string");
  size_t n = s->n;
  unsigned char *buf = arena_alloc(&c->b->mem, n / 4 * 3 + 1, 1);
  if (!buf)
    return lithd_error_set(c->err, LITH_NOMEM, c->stmt, "out of memory");
  char why[64];
  if (b64_decode(s->u.s, n, buf, &v->n, why) != 0)
    return pfail(c, LITHD_BAD_REQUEST, "bad base64: %s", why);
  v->type = SQLITE_BLOB;
  v->u.p = buf;
  return LITH_OK;
}

static int parse_value(const pctx *c, const lj_value *j, value *v) {
  memset(v, 0, sizeof *v);
  switch (j->type) {
  case LJ_INT: /* exact over the whole 64-bit range; json.c refuses what does not fit */
    v->type = SQLITE_INTEGER;
    v->u.i = j->u.i;
    return LITH_OK;
  case LJ_REAL: /* finite: json.c refuses overflow */
    v->type = SQLITE_FLOAT;
    v->u.d = j->u.d;
    return LITH_OK;
  case LJ_STRING:
    v->type = SQLITE_TEXT;
    v->n = j->n;
    v->u.p = (const unsigned char *)keep(c, j->u.s, j->n);
    if (!v->u.p)
      return lithd_error_set(c->err, LITH_NOMEM, c->stmt, "out of memory");
    return LITH_OK;
  case LJ_TRUE:
  case LJ_FALSE:
    v->type = SQLITE_INTEGER;
    v->u.i = j->type == LJ_TRUE ? 1 : 0;
    return LITH_OK;
  case LJ_NULL:
    v->type = SQLITE_NULL;
    return LITH_OK;
  case LJ_OBJECT:
    return parse_blob(c, j, v);
  case LJ_ARRAY:
  default:
    return pfail(c, LITHD_BAD_REQUEST,
                 "an array is not a value (a blob is {\"base64\": \"...\"})");
  }
}

static int only_space(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isspace((unsigned char)s[i]))
      return 0;
  return 1;
}

static int parse_params(lithd_batch *b, stmt_spec *spec, int i, const lj_value *params,
                        lithd_error *err, int own) {
  const lithd_limits *lim = &b->lim;
  pctx c = {b, i, NULL, 0, err, own};
  size_t n;
  if (!params || params->type == LJ_NULL)
    return LITH_OK;
  if (params->type != LJ_ARRAY && params->type != LJ_OBJECT)
    return lithd_error_set(err, LITHD_BAD_REQUEST, i,
                           "\"params\" must be an array (by position) or an object (by name)");
  n = params->n;
  if (n > (size_t)lim->max_params)
    return lithd_error_set(err, LITHD_TOO_LARGE, i, "%zu parameters, over the limit of %d",
                           n, lim->max_params);
  spec->params = arena_alloc(&b->mem, n * sizeof *spec->params, _Alignof(max_align_t));
  if (n && !spec->params)
    return lithd_error_set(err, LITH_NOMEM, i, "out of memory");
  spec->nparams = (int)n;

  int rc;
  if (params->type == LJ_ARRAY) {
    for (size_t k = 0; k < n; k++) {
      c.pos = k + 1;
      spec->params[k].name = NULL;
      if ((rc = parse_value(&c, params->u.items[k], &spec->params[k].v)) != LITH_OK)
        return rc;
    }
    return LITH_OK;
  }

  spec->named = 1;
  for (size_t k = 0; k < n; k++) {
    const lj_member *m = &params->u.members[k];
    c.name = m->key;
    if (m->keylen == 0 || strlen(m->key) != m->keylen || !strchr(":@$?", m->key[0]))
      return pfail(&c, LITHD_BAD_REQUEST,
                   "a name must be spelt as in the SQL, beginning with ':', '@', '$' or '?'");
    spec->params[k].name = keep(&c, m->key, m->keylen);
    if (!spec->params[k].name)
      return lithd_error_set(err, LITH_NOMEM, i, "out of memory");
    if ((rc = parse_value(&c, m->value, &spec->params[k].v)) != LITH_OK)
      return rc;
  }
  return LITH_OK;
}

static int parse_statement(lithd_batch *b, int i, const lj_value *j, lithd_error *err, int own) {
  stmt_spec *spec = &b->stmts[i];
  const char *key;
  if (j->type != LJ_OBJECT)
    return lithd_error_set(err, LITHD_BAD_REQUEST, i,
                           "a statement must be an object: {\"sql\": \"...\", \"params\": [...]}");
  if ((key = unknown_key(j, "sql", "params")) != NULL)
    return lithd_error_set(err, LITHD_BAD_REQUEST, i,
                           "unknown key \"%.64s\" (a statement has \"sql\" and \"params\")", key);
  const lj_value *sql = lj_get(j, "sql");
  if (!sql)
    return lithd_error_set(err, LITHD_BAD_REQUEST, i, "\"sql\" is missing");
  if (sql->type != LJ_STRING)
    return lithd_error_set(err, LITHD_BAD_REQUEST, i, "\"sql\" must be a string");
  const char *text = sql->u.s;
  size_t len = sql->n;
  if (len > b->lim.max_sql_bytes)
    return lithd_error_set(err, LITHD_TOO_LARGE, i, "the SQL is %zu bytes, over the limit of %zu",
                           len, b->lim.max_sql_bytes);
  if (strlen(text) != len)
    return lithd_error_set(err, LITHD_BAD_REQUEST, i, "\"sql\" contains a NUL character");
  if (only_space(text, len))
    return lithd_error_set(err, LITHD_BAD_REQUEST, i, "\"sql\" is empty");
  spec->sql = own ? text : arena_copy(&b->mem, text, len);
  if (!spec->sql)
    return lithd_error_set(err, LITH_NOMEM, i, "out of memory");
  return parse_params(b, spec, i, lj_get(j, "params"), err, own);
}

/* The statements of a parsed body into a new batch (b is empty, its
 * limits resolved); `own`: the tree lives in b's arena. */
static int batch_fill(lithd_batch *b, const lj_value *root, lithd_error *err, int own) {
  const char *key;
  if (root->type != LJ_OBJECT)
    return lithd_error_set(err, LITHD_BAD_REQUEST, -1,
                           "the body must be an object: {\"statements\": [...]}");
  if ((key = unknown_key(root, "statements", NULL)) != NULL)
    return lithd_error_set(err, LITHD_BAD_REQUEST, -1,
                           "unknown key \"%.64s\" (the body has \"statements\")", key);
  const lj_value *list = lj_get(root, "statements");
  if (!list || list->type != LJ_ARRAY)
    return lithd_error_set(err, LITHD_BAD_REQUEST, -1, "\"statements\" must be an array%s",
                           list ? "" : " and is missing");
  size_t n = list->n;
  if (n > (size_t)b->lim.max_statements)
    return lithd_error_set(err, LITHD_TOO_LARGE, -1, "%zu statements, over the limit of %d", n,
                           b->lim.max_statements);
  b->stmts = arena_alloc(&b->mem, n * sizeof *b->stmts, _Alignof(max_align_t));
  if (n && !b->stmts)
    return lithd_error_set(err, LITH_NOMEM, -1, "out of memory");
  if (n)
    memset(b->stmts, 0, n * sizeof *b->stmts);
  b->n = (int)n;
  for (int i = 0; i < b->n; i++) {
    int rc = parse_statement(b, i, list->u.items[i], err, own);
    if (rc != LITH_OK)
      return rc;
  }
  return LITH_OK;
}

int lithd_batch_parse(const char *body, size_t len, const lithd_limits *lim,
                      lithd_batch **out, lithd_error *err) {
  lithd_error scratch;
  lj_error jerr = {0, 0, ""};
  lj_value *root;
  int rc;
  if (!err)
    err = &scratch;
  error_clear(err);
  if (!out)
    return lithd_error_set(err, LITH_MISUSE, -1, "lithd_batch_parse: no out");
  *out = NULL;
  if (!body && len)
    return lithd_error_set(err, LITH_MISUSE, -1, "lithd_batch_parse: no body");

  lithd_batch *b = calloc(1, sizeof *b);
  if (!b)
    return lithd_error_set(err, LITH_NOMEM, -1, "out of memory");
  limits_resolve(lim, &b->lim);
  if (len > b->lim.max_body_bytes) {
    rc = lithd_error_set(err, LITHD_TOO_LARGE, -1, "the body is %zu bytes, over the limit of %zu",
                         len, b->lim.max_body_bytes);
    goto err_free_batch;
  }
  /* The tree goes into the batch's own arena: its strings become the
   * batch's without a copy. */
  if (lj_parse(&b->mem, body, len, &root, &jerr) != 0) {
    rc = lithd_error_set(err, strcmp(jerr.text, "out of memory") == 0 ? LITH_NOMEM : LITHD_BAD_REQUEST,
                         -1, "invalid JSON at line %d column %d: %s", jerr.line, jerr.column,
                         jerr.text);
    goto err_free_batch;
  }
  if ((rc = batch_fill(b, root, err, 1)) != LITH_OK)
    goto err_free_batch;
  *out = b;
  return LITH_OK;

err_free_batch:
  lithd_batch_free(b);
  return rc;
}

int lithd_batch_from_value(const lj_value *root, const lithd_limits *lim, lithd_batch **out,
                           lithd_error *err) {
  lithd_error scratch;
  int rc;
  if (!err)
    err = &scratch;
  error_clear(err);
  if (!out || !root)
    return lithd_error_set(err, LITH_MISUSE, -1, "lithd_batch_from_value: no out or no root");
  *out = NULL;
  lithd_batch *b = calloc(1, sizeof *b);
  if (!b)
    return lithd_error_set(err, LITH_NOMEM, -1, "out of memory");
  limits_resolve(lim, &b->lim);
  if ((rc = batch_fill(b, root, err, 0)) != LITH_OK) {
    lithd_batch_free(b);
    return rc;
  }
  *out = b;
  return LITH_OK;
}

int lithd_batch_count(const lithd_batch *b) { return b ? b->n : 0; }

void lithd_batch_free(lithd_batch *b) {
  if (!b)
    return;
  arena_free(&b->mem);
  free(b);
}

/* ---- Running ------------------------------------------------------------------ */

/* Where statements come from: the writer's command or a reader. */
typedef struct runner {
  lith_tx *tx;
  lith_rx *rx;
  sqlite3 *conn;
  lithd_batch *b;
  lithd_result *r;
  int64_t deadline; /* on lith_clock_ms() */
  lithd_guard_slot *guard; /* NULL: the connection has no guard */
  int timed_out;      /* a LITHD_GUARD_ reason: why the run was cut */
} runner;

static int rfail(const runner *rn, int code, int stmt, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* SQLite's progress handler: a non-zero return interrupts the statement. */
static int on_progress(void *arg) {
  runner *rn = arg;
  if (!rn->timed_out) {
    if (rn->guard != NULL) /* the same deadline, and whether lithd stops: one clock read */
      rn->timed_out = lithd_guard_cut(rn->guard);
    else if (lith_clock_ms() > rn->deadline)
      rn->timed_out = LITHD_GUARD_DEADLINE;
  }
  return rn->timed_out;
}

/* Whether the run was cut: by the progress handler, or inside one step by
 * the guard (a bounded function, the watchdog's interrupt). */
static int was_cut(runner *rn) {
  if (!rn->timed_out && sqlite3_errcode(rn->conn) == SQLITE_INTERRUPT)
    rn->timed_out = lith_clock_ms() > rn->deadline ? LITHD_GUARD_DEADLINE : lithd_guard_cut(rn->guard);
  return rn->timed_out;
}

static int timeout_fail(const runner *rn, int i) {
  if (rn->timed_out == LITHD_GUARD_STOPPING)
    return rfail(rn, LITH_CLOSED, i, "lithd is shutting down: the query was interrupted");
  return rfail(rn, LITHD_TIMEOUT, i, "the statements ran longer than %" PRId64 " ms (max_run_ms)",
               rn->b->lim.max_run_ms);
}

static int rfail(const runner *rn, int code, int stmt, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  verror_set(&rn->r->err, code, stmt, fmt, ap);
  va_end(ap);
  if (rn->tx) /* what lith_errmsg / req->errmsg will say */
    lith_tx_error(rn->tx, code, "statement %d: %s", stmt, rn->r->err.message);
  return code;
}

static int bind_value(sqlite3_stmt *st, int idx, const value *v) {
  switch (v->type) {
  case SQLITE_INTEGER: return sqlite3_bind_int64(st, idx, v->u.i);
  case SQLITE_FLOAT: return sqlite3_bind_double(st, idx, v->u.d);
  case SQLITE_TEXT:
    return sqlite3_bind_text64(st, idx, (const char *)v->u.p, v->n, SQLITE_STATIC, SQLITE_UTF8);
  case SQLITE_BLOB:
    /* a NULL or empty pointer would bind NULL; the empty blob is a zeroblob */
    if (v->n == 0)
      return sqlite3_bind_zeroblob(st, idx, 0);
    return sqlite3_bind_blob64(st, idx, v->u.p, v->n, SQLITE_STATIC);
  default: return sqlite3_bind_null(st, idx);
  }
}

static int bind_all(const runner *rn, int i, sqlite3_stmt *st) {
  const stmt_spec *spec = &rn->b->stmts[i];
  int count = sqlite3_bind_parameter_count(st);
  int src;
  if (!spec->named) {
    if (spec->nparams != count)
      return rfail(rn, LITHD_BAD_REQUEST, i, "the statement has %d parameter%s, %d given", count,
                   count == 1 ? "" : "s", spec->nparams);
    for (int k = 0; k < count; k++)
      if ((src = bind_value(st, k + 1, &spec->params[k].v)) != SQLITE_OK)
        return rfail(rn, lith_from_sqlite(src), i, "parameter %d: %s", k + 1, sqlite3_errmsg(rn->conn));
    return LITH_OK;
  }

  int rc = LITH_OK;
  unsigned char *bound = calloc((size_t)count + 1, 1);
  if (!bound)
    return rfail(rn, LITH_NOMEM, i, "out of memory");
  for (int k = 0; k < spec->nparams; k++) {
    const char *name = spec->params[k].name;
    int idx = sqlite3_bind_parameter_index(st, name);
    if (idx == 0) {
      rc = rfail(rn, LITHD_BAD_REQUEST, i, "the statement has no parameter \"%.64s\"", name);
      goto out;
    }
    if (bound[idx]) { /* two names for one index: SQLite gives each index one
                         name, so this only guards the loop below */
      rc = rfail(rn, LITHD_BAD_REQUEST, i, "parameter \"%.64s\" is given twice", name);
      goto out;
    }
    bound[idx] = 1;
    if ((src = bind_value(st, idx, &spec->params[k].v)) != SQLITE_OK) {
      rc = rfail(rn, lith_from_sqlite(src), i, "parameter \"%.64s\": %s", name, sqlite3_errmsg(rn->conn));
      goto out;
    }
  }
  for (int idx = 1; idx <= count; idx++) {
    if (bound[idx])
      continue;
    const char *name = sqlite3_bind_parameter_name(st, idx);
    if (name)
      rc = rfail(rn, LITHD_BAD_REQUEST, i, "parameter \"%.64s\" is not given", name);
    else
      rc = rfail(rn, LITHD_BAD_REQUEST, i,
                 "parameter %d has no name: give \"params\" as an array", idx);
    goto out;
  }
out:
  free(bound);
  return rc;
}

static int push_value(const runner *rn, int i, stmt_out *o, const value *v) {
  if (o->nvals == o->capvals) {
    size_t ncap = o->capvals ? o->capvals * 2 : 16;
    value *nv = realloc(o->vals, ncap * sizeof *nv);
    if (!nv)
      return rfail(rn, LITH_NOMEM, i, "out of memory");
    o->vals = nv;
    o->capvals = ncap;
  }
  o->vals[o->nvals++] = *v;
  return LITH_OK;
}

static int collect_row(const runner *rn, int i, sqlite3_stmt *st, stmt_out *o) {
  lithd_result *r = rn->r;
  const lithd_limits *lim = &rn->b->lim;
  if (r->rows >= lim->max_rows)
    return rfail(rn, LITHD_RESULT_TOO_LARGE, i,
                 "the answer would hold more than %" PRId64 " rows (max_rows)", lim->max_rows);
  for (int col = 0; col < o->ncols; col++) {
    value v = {.type = sqlite3_column_type(st, col)};
    const unsigned char *p = NULL;
    switch (v.type) {
    case SQLITE_INTEGER: v.u.i = sqlite3_column_int64(st, col); break;
    case SQLITE_FLOAT: v.u.d = sqlite3_column_double(st, col); break;
    case SQLITE_TEXT:
    case SQLITE_BLOB:
      p = v.type == SQLITE_TEXT ? sqlite3_column_text(st, col) : sqlite3_column_blob(st, col);
      v.n = (size_t)sqlite3_column_bytes(st, col);
      if (!p && (v.n || sqlite3_errcode(rn->conn) == SQLITE_NOMEM))
        return rfail(rn, LITH_NOMEM, i, "out of memory reading row %" PRId64 " column %d",
                     o->nrows, col);
      if (v.n > lim->max_result_bytes - r->bytes)
        return rfail(rn, LITHD_RESULT_TOO_LARGE, i,
                     "the answer would hold more than %zu bytes of text and blobs (max_result_bytes)",
                     lim->max_result_bytes);
      if (v.type == SQLITE_TEXT && !utf8_valid(p, v.n))
        return rfail(rn, LITHD_UNENCODABLE, i,
                     "text is not valid UTF-8 in row %" PRId64 " column %d; CAST(x AS BLOB) reads it",
                     o->nrows, col);
      r->bytes += v.n;
      v.u.p = arena_copy(&r->mem, p, v.n);
      if (!v.u.p)
        return rfail(rn, LITH_NOMEM, i, "out of memory");
      break;
    default: v.type = SQLITE_NULL; break;
    }
    int rc = push_value(rn, i, o, &v);
    if (rc != LITH_OK)
      return rc;
  }
  o->nrows++;
  r->rows++;
  return LITH_OK;
}

/* /v1/query runs queries only: the first keyword, past blanks and comments,
 * must open one. */
static int starts_as_query(const char *s) {
  static const char *const words[] = {"SELECT", "WITH", "VALUES", "EXPLAIN"};
  for (;;) {
    while (isspace((unsigned char)*s))
      s++;
    if (s[0] == '-' && s[1] == '-') {
      s = strchr(s, '\n');
      if (!s)
        return 0;
    } else if (s[0] == '/' && s[1] == '*') {
      s = strstr(s + 2, "*/");
      if (!s)
        return 0;
      s += 2;
    } else
      break;
  }
  size_t n = 0;
  while (isalpha((unsigned char)s[n]))
    n++;
  for (size_t k = 0; k < sizeof words / sizeof *words; k++)
    if (strlen(words[k]) == n && strncasecmp(s, words[k], n) == 0)
      return 1;
  return 0;
}

static int column_names(const runner *rn, int i, sqlite3_stmt *st, stmt_out *o) {
  o->ncols = sqlite3_column_count(st);
  if (o->ncols == 0)
    return LITH_OK;
  o->cols = arena_alloc(&rn->r->mem, (size_t)o->ncols * sizeof *o->cols, _Alignof(max_align_t));
  if (!o->cols)
    return rfail(rn, LITH_NOMEM, i, "out of memory");
  for (int col = 0; col < o->ncols; col++) {
    const char *name = sqlite3_column_name(st, col);
    if (!name)
      return rfail(rn, LITH_NOMEM, i, "out of memory");
    size_t len = strlen(name);
    if (!utf8_valid((const unsigned char *)name, len))
      return rfail(rn, LITHD_UNENCODABLE, i, "the name of column %d is not valid UTF-8", col);
    o->cols[col] = arena_copy(&rn->r->mem, name, len);
    if (!o->cols[col])
      return rfail(rn, LITH_NOMEM, i, "out of memory");
  }
  return LITH_OK;
}

static int run_one(runner *rn, int i) {
  const char *sql = rn->b->stmts[i].sql;
  stmt_out *o = &rn->r->outs[i];
  sqlite3_stmt *st;
  sqlite3_int64 before = 0;
  int rc, src;

  if (rn->rx && !starts_as_query(sql))
    return rfail(rn, LITHD_NOT_A_QUERY, i,
                 "write statement on /v1/query: only SELECT, WITH, VALUES and EXPLAIN run here "
                 "(a PRAGMA reads through its function: SELECT * FROM pragma_table_info('t'))");
  st = rn->tx ? lith_tx_stmt(rn->tx, sql) : lith_rx_stmt(rn->rx, sql);
  if (!st) {
    /* lith's message says why (prepare: ..., more than one statement, ...). */
    if (was_cut(rn)) /* a long prepare can be interrupted too */
      return timeout_fail(rn, i);
    rc = rn->tx ? lith_tx_rc(rn->tx) : lith_from_sqlite(sqlite3_extended_errcode(rn->conn));
    if (rc == LITH_OK) /* refused by lith after a good prepare */
      rc = LITH_MISUSE;
    /* An authorizer said no: 403. (A denied function is SQLITE_ERROR with
     * "not authorized to use function" rather than SQLITE_AUTH.) */
    if (sqlite3_errcode(rn->conn) == SQLITE_AUTH ||
        strncmp(sqlite3_errmsg(rn->conn), "not authorized", 14) == 0)
      return rfail(rn, LITHD_FORBIDDEN, i,
                   "%s: lithd refuses ATTACH, DETACH, PRAGMA assignments, load_extension and fts3_tokenizer, "
                   "and the writer owns BEGIN, COMMIT, ROLLBACK and savepoints named lith_*",
                   lith_errmsg(NULL));
    return rfail(rn, rc, i, "%s", lith_errmsg(NULL));
  }
  if (rn->rx && !sqlite3_stmt_readonly(st)) {
    rc = rfail(rn, LITHD_NOT_A_QUERY, i, "write statement on /v1/query");
    goto out;
  }
  if ((rc = bind_all(rn, i, st)) != LITH_OK)
    goto out;
  if ((rc = column_names(rn, i, st, o)) != LITH_OK)
    goto out;

  if (rn->tx) {
    before = sqlite3_total_changes64(rn->conn);
    sqlite3_set_last_insert_rowid(rn->conn, 0);
  }
  while ((src = sqlite3_step(st)) == SQLITE_ROW)
    if ((rc = collect_row(rn, i, st, o)) != LITH_OK)
      goto out;
  if (src != SQLITE_DONE) {
    if (was_cut(rn))
      rc = timeout_fail(rn, i);
    else
      rc = rfail(rn, lith_from_sqlite(src), i, "%s", sqlite3_errmsg(rn->conn));
    goto out;
  }
  if (rn->tx) {
    /* sqlite3_changes64 keeps the count of the last INSERT, UPDATE or
       DELETE: it is this statement's only if the total moved. */
    o->changes = sqlite3_total_changes64(rn->conn) != before ? sqlite3_changes64(rn->conn) : 0;
    o->last_rowid = sqlite3_last_insert_rowid(rn->conn);
  }
  rc = LITH_OK;
out:
  /* Leave nothing running (a half-read SELECT would sit across the
     command's ROLLBACK TO) and nothing pointing into the batch. */
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  return rc;
}

static int run_batch(runner *rn, lithd_result **out) {
  lithd_batch *b = rn->b;
  int rc = LITH_OK;
  lithd_result_free(*out);
  *out = NULL;
  lithd_result *r = calloc(1, sizeof *r);
  if (!r)
    goto err;
  r->outs = calloc(b->n ? (size_t)b->n : 1, sizeof *r->outs);
  if (!r->outs)
    goto err_free_result;
  r->nouts = b->n;
  error_clear(&r->err);
  rn->r = r;
  *out = r;

  int64_t now = lith_clock_ms();
  rn->deadline = b->lim.max_run_ms > INT64_MAX - now ? INT64_MAX : now + b->lim.max_run_ms;
  rn->guard = lithd_guard_begin(rn->conn, rn->deadline, rn->rx != NULL);
  sqlite3_progress_handler(rn->conn, 1000, on_progress, rn);
  for (int i = 0; i < b->n; i++) {
    if ((rc = run_one(rn, i)) != LITH_OK)
      break;
    r->n = i + 1;
  }
  sqlite3_progress_handler(rn->conn, 0, NULL, NULL);
  lithd_guard_end(rn->guard);
  return rc;

err_free_result:
  free(r);
err:
  if (rn->tx)
    return lith_tx_error(rn->tx, LITH_NOMEM, "out of memory");
  return LITH_NOMEM;
}

int lithd_batch_run(lith_tx *tx, lithd_batch *b, lithd_result **out) {
  if (!tx || !b || !out)
    return LITH_MISUSE;
  runner rn = {.tx = tx, .conn = lith_tx_db(tx), .b = b};
  return run_batch(&rn, out);
}

int lithd_batch_read(lith_rx *rx, lithd_batch *b, lithd_result **out) {
  if (!rx || !b || !out)
    return LITH_MISUSE;
  runner rn = {.rx = rx, .conn = lith_rx_db(rx), .b = b};
  return run_batch(&rn, out);
}

int lithd_result_error(const lithd_result *r, lithd_error *err) {
  if (!r)
    return lithd_error_set(err, LITH_MISUSE, -1, "no result");
  if (err)
    *err = r->err;
  return r->err.code;
}

void lithd_result_free(lithd_result *r) {
  if (!r)
    return;
  for (int i = 0; i < r->nouts; i++)
    free(r->outs[i].vals);
  free(r->outs);
  arena_free(&r->mem);
  free(r);
}

/* ---- JSON text -------------------------------------------------------------- */

typedef struct sbuf {
  char *p;
  size_t n, cap;
  int oom;
} sbuf;

static void sb_put(sbuf *sb, const void *s, size_t n) {
  if (sb->oom)
    return;
  if (n >= sb->cap - sb->n) {
    size_t ncap = sb->cap ? sb->cap : 1024; /* most answers fit: one malloc */
    while (n >= ncap - sb->n) {
      if (ncap > SIZE_MAX / 2) {
        sb->oom = 1;
        return;
      }
      ncap *= 2;
    }
    char *np = realloc(sb->p, ncap);
    if (!np) {
      sb->oom = 1;
      return;
    }
    sb->p = np;
    sb->cap = ncap;
  }
  memcpy(sb->p + sb->n, s, n);
  sb->n += n;
  sb->p[sb->n] = '\0';
}

static void sb_puts(sbuf *sb, const char *s) { sb_put(sb, s, strlen(s)); }

static void sb_int(sbuf *sb, int64_t v) {
  /* By hand: a response holds a few per statement, and snprintf's format
   * parsing was a visible share of lithd's loop thread. */
  char buf[24];
  char *p = buf + sizeof buf;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  do {
    *--p = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  if (v < 0)
    *--p = '-';
  sb_put(sb, p, (size_t)(buf + sizeof buf - p));
}

/* The shortest of %.15g, %.16g, %.17g that reads back as d (%.17g always
 * does), with ".0" added when it would read as an integer. Not finite: null
 * (SQLite stores +-Infinity, e.g. 1e999, and math functions can make it;
 * NaN becomes NULL inside SQLite; JSON has neither). */
static void sb_real(sbuf *sb, double d) {
  char buf[40];
  if (!isfinite(d)) {
    sb_puts(sb, "null");
    return;
  }
  for (int prec = 15; prec <= 17; prec++) {
    snprintf(buf, sizeof buf, "%.*g", prec, d);
    if (strtod(buf, NULL) == d)
      break;
  }
  int looks_real = 0;
  for (char *c = buf; *c; c++) {
    if (*c == ',') /* a locale's decimal comma: JSON wants '.' */
      *c = '.';
    if (*c == '.' || *c == 'e' || *c == 'E')
      looks_real = 1;
  }
  sb_puts(sb, buf);
  if (!looks_real)
    sb_puts(sb, ".0");
}

/* A JSON string. Valid UTF-8 is copied as it is; a byte that starts no valid
 * sequence becomes U+FFFD (only messages can have one: row text was
 * checked when collected). */
static void sb_string(sbuf *sb, const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  size_t run = 0; /* bytes copied verbatim, pending */
  sb_put(sb, "\"", 1);
  for (size_t i = 0; i < n;) {
    unsigned c = p[i];
    char esc[8];
    const char *rep = NULL;
    size_t k = 1;
    if (c == '"')
      rep = "\\\"";
    else if (c == '\\')
      rep = "\\\\";
    else if (c == '\n')
      rep = "\\n";
    else if (c == '\r')
      rep = "\\r";
    else if (c == '\t')
      rep = "\\t";
    else if (c < 0x20) {
      snprintf(esc, sizeof esc, "\\u%04x", c);
      rep = esc;
    } else if (c >= 0x80) {
      k = utf8_seq(p + i, n - i);
      if (!k) {
        rep = "\\ufffd";
        k = 1;
      }
    }
    if (rep) {
      sb_put(sb, p + i - run, run);
      run = 0;
      sb_puts(sb, rep);
    } else
      run += k;
    i += k;
  }
  sb_put(sb, p + n - run, run);
  sb_put(sb, "\"", 1);
}

static void sb_base64(sbuf *sb, const unsigned char *p, size_t n) {
  char q[4];
  sb_puts(sb, "{\"base64\":\"");
  for (size_t i = 0; i < n; i += 3) {
    uint32_t w = (uint32_t)p[i] << 16;
    if (i + 1 < n)
      w |= (uint32_t)p[i + 1] << 8;
    if (i + 2 < n)
      w |= p[i + 2];
    q[0] = b64_chars[w >> 18 & 63];
    q[1] = b64_chars[w >> 12 & 63];
    q[2] = i + 1 < n ? b64_chars[w >> 6 & 63] : '=';
    q[3] = i + 2 < n ? b64_chars[w & 63] : '=';
    sb_put(sb, q, 4);
  }
  sb_puts(sb, "\"}");
}

static void sb_value(sbuf *sb, const value *v) {
  switch (v->type) {
  case SQLITE_INTEGER: sb_int(sb, v->u.i); break;
  case SQLITE_FLOAT: sb_real(sb, v->u.d); break;
  case SQLITE_TEXT: sb_string(sb, (const char *)v->u.p, v->n); break;
  case SQLITE_BLOB: sb_base64(sb, v->u.p, v->n); break;
  default: sb_puts(sb, "null"); break;
  }
}

static char *sb_finish(sbuf *sb) {
  if (sb->oom) {
    free(sb->p);
    return NULL;
  }
  return sb->p;
}

char *lithd_error_json(const lithd_error *err) {
  sbuf sb = {0};
  if (!err)
    return NULL;
  sb_puts(&sb, "{\"error\":{\"code\":");
  sb_string(&sb, lithd_code_name(err->code), strlen(lithd_code_name(err->code)));
  sb_puts(&sb, ",\"message\":");
  sb_string(&sb, err->message, strnlen(err->message, sizeof err->message));
  sb_puts(&sb, ",\"statement\":");
  if (err->statement >= 0)
    sb_int(&sb, err->statement);
  else
    sb_puts(&sb, "null");
  sb_puts(&sb, "}}");
  return sb_finish(&sb);
}

char *lithd_result_json(const lithd_result *r) {
  sbuf sb = {0};
  if (!r)
    return NULL;
  if (r->err.code != LITH_OK)
    return lithd_error_json(&r->err);
  sb_puts(&sb, "{\"results\":[");
  for (int i = 0; i < r->n; i++) {
    const stmt_out *o = &r->outs[i];
    if (i)
      sb_put(&sb, ",", 1);
    sb_puts(&sb, "{\"changes\":");
    sb_int(&sb, o->changes);
    sb_puts(&sb, ",\"last_insert_rowid\":");
    sb_int(&sb, o->last_rowid);
    sb_puts(&sb, ",\"columns\":[");
    for (int c = 0; c < o->ncols; c++) {
      if (c)
        sb_put(&sb, ",", 1);
      sb_string(&sb, o->cols[c], strlen(o->cols[c]));
    }
    sb_puts(&sb, "],\"rows\":[");
    const value *v = o->vals;
    for (int64_t row = 0; row < o->nrows; row++) {
      sb_puts(&sb, row ? ",[" : "[");
      for (int c = 0; c < o->ncols; c++, v++) {
        if (c)
          sb_put(&sb, ",", 1);
        sb_value(&sb, v);
      }
      sb_put(&sb, "]", 1);
    }
    sb_puts(&sb, "]}");
  }
  sb_puts(&sb, "]}");
  return sb_finish(&sb);
}
