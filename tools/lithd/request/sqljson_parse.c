/*
 * sqljson, stage 1 of 3: parse a request body into a lithd_batch (see
 * sqljson.h for the format, sqljson_int.h for the stages).
 *
 * Design: lithd_batch_parse reads the body with json.c's reader into the
 * batch's own arena, checks the whole request (shape, types, limits,
 * base64) and turns it into plain C values in that arena. So a bad request
 * is refused before it reaches the writer, the writer thread runs over a
 * few flat arrays without allocating per value, and a request costs a
 * handful of mallocs. lithd_batch_from_value does the same from a tree
 * the caller built (named commands): its strings are copied, the tree
 * being the caller's.
 */
#include "sqljson_int.h"

#include <ctype.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

/* ---- Limits ------------------------------------------------------------------ */

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
  out->cell_frame = given->cell_frame;
}

/* ---- Base64 (RFC 4648, standard alphabet, padded, strict) ---------------- */

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

int lithd__b64_decode(const char *s, size_t n, int unpadded_ok, unsigned char *out, size_t *outn, char *why) {
  size_t rem = n % 4, head = n - rem, o1 = 0, o2 = 0;
  char q[4] = {'=', '=', '=', '='};
  if (rem == 0 || !unpadded_ok)
    return b64_decode(s, n, out, outn, why);
  if (rem == 1) {
    snprintf(why, 64, "length %zu: a lone character at the end", n);
    return -1;
  }
  if (head > 0 && s[head - 1] == '=') { /* padding, then more */
    snprintf(why, 64, "bad character at offset %zu", head);
    return -1;
  }
  if (b64_decode(s, head, out, &o1, why) != 0)
    return -1;
  memcpy(q, s + head, rem);
  if (b64_decode(q, 4, out + o1, &o2, why) != 0)
    return -1;
  *outn = o1 + o2;
  return 0;
}

lithd_batch *lithd__batch_new(const lithd_limits *lim, int n) {
  lithd_batch *b = calloc(1, sizeof *b);
  if (!b)
    return NULL;
  limits_resolve(lim, &b->lim);
  if (n > 0) {
    b->stmts = lithd_arena_alloc(&b->mem, (size_t)n * sizeof *b->stmts, _Alignof(max_align_t));
    if (!b->stmts) {
      lithd_batch_free(b);
      return NULL;
    }
    memset(b->stmts, 0, (size_t)n * sizeof *b->stmts);
  }
  b->n = n;
  return b;
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
  return c->own ? s : lithd_arena_copy(&c->b->mem, s, n);
}

static int parse_blob(const pctx *c, const lj_value *obj, value *v) {
  const lj_value *s = lj_get(obj, "base64");
  if (!s || obj->n != 1 || unknown_key(obj, "base64", NULL))
    return pfail(c, LITHD_BAD_REQUEST,
                 "an object must be {\"base64\": \"...\"} (a blob); arrays and other objects are not values");
  if (s->type != LJ_STRING)
    return pfail(c, LITHD_BAD_REQUEST, "\"base64\" must be a string");
  size_t n = s->n;
  unsigned char *buf = lithd_arena_alloc(&c->b->mem, n / 4 * 3 + 1, 1);
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
  case LJ_NULL: v->type = SQLITE_NULL; return LITH_OK;
  case LJ_OBJECT: return parse_blob(c, j, v);
  case LJ_ARRAY:
  default: return pfail(c, LITHD_BAD_REQUEST, "an array is not a value (a blob is {\"base64\": \"...\"})");
  }
}

static int only_space(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isspace((unsigned char)s[i]))
      return 0;
  return 1;
}

static int parse_params(lithd_batch *b, stmt_spec *spec, int i, const lj_value *params, lithd_error *err,
                        int own) {
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
    return lithd_error_set(err, LITHD_TOO_LARGE, i, "%zu parameters, over the limit of %d", n,
                           lim->max_params);
  spec->params = lithd_arena_alloc(&b->mem, n * sizeof *spec->params, _Alignof(max_align_t));
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
    return lithd_error_set(err, LITHD_TOO_LARGE, i, "the SQL is %zu bytes, over the limit of %zu", len,
                           b->lim.max_sql_bytes);
  if (strlen(text) != len)
    return lithd_error_set(err, LITHD_BAD_REQUEST, i, "\"sql\" contains a NUL character");
  if (only_space(text, len))
    return lithd_error_set(err, LITHD_BAD_REQUEST, i, "\"sql\" is empty");
  spec->sql = own ? text : lithd_arena_copy(&b->mem, text, len);
  if (!spec->sql)
    return lithd_error_set(err, LITH_NOMEM, i, "out of memory");
  return parse_params(b, spec, i, lj_get(j, "params"), err, own);
}

/* ---- Answer format ------------------------------------------------------------ */

/* The three options of lithd_format, each with its two spellings (the
 * default first): one table for the body's keys and the query's. */
typedef struct fmt_opt {
  const char *name;
  const char *off, *on;
  size_t field; /* offsetof the int in lithd_format */
} fmt_opt;

static const fmt_opt fmt_opts[] = {
    {"rows", "arrays", "objects", offsetof(lithd_format, rows_objects)},
    {"types", "false", "true", offsetof(lithd_format, types)},
    {"int64", "number", "string", offsetof(lithd_format, int64_strings)},
};
#define NFMT (sizeof fmt_opts / sizeof *fmt_opts)

static const fmt_opt *fmt_find(const char *name, size_t len) {
  for (size_t i = 0; i < NFMT; i++)
    if (strlen(fmt_opts[i].name) == len && memcmp(fmt_opts[i].name, name, len) == 0)
      return &fmt_opts[i];
  return NULL;
}

static int *fmt_field(lithd_format *f, const fmt_opt *o) { return (int *)((char *)f + o->field); }

/* Set o's field of f from its spelling v[0..n); -1 if v is neither. */
static int fmt_set(lithd_format *f, const fmt_opt *o, const char *v, size_t n) {
  if (strlen(o->off) == n && memcmp(o->off, v, n) == 0)
    *fmt_field(f, o) = 0;
  else if (strlen(o->on) == n && memcmp(o->on, v, n) == 0)
    *fmt_field(f, o) = 1;
  else
    return -1;
  return 0;
}

/* A body key of the answer format: a string spelt as in the query
 * ("objects"), but a JSON boolean for "types". */
static int parse_format_key(lithd_batch *b, const fmt_opt *o, const lj_value *v, lithd_error *err) {
  const char *q = "\"";
  int bad = -1;
  if (strcmp(o->on, "true") == 0) {
    q = "";
    if (v->type == LJ_TRUE || v->type == LJ_FALSE) {
      *fmt_field(&b->fmt, o) = v->type == LJ_TRUE;
      bad = 0;
    }
  } else if (v->type == LJ_STRING)
    bad = fmt_set(&b->fmt, o, v->u.s, v->n);
  if (bad)
    return lithd_error_set(err, LITHD_BAD_REQUEST, -1, "\"%s\" must be %s%s%s or %s%s%s", o->name, q, o->off,
                           q, q, o->on, q);
  return LITH_OK;
}

int lithd_batch_apply_query(lithd_batch *b, const char *query, lithd_error *err) {
  lithd_format f;
  if (!b)
    return lithd_error_set(err, LITH_MISUSE, -1, "lithd_batch_apply_query: no batch");
  f = b->fmt;
  for (const char *p = query ? query : ""; *p;) {
    size_t len = strcspn(p, "&");
    const char *eq = memchr(p, '=', len);
    size_t klen = eq ? (size_t)(eq - p) : len;
    const fmt_opt *o = len ? fmt_find(p, klen) : NULL;
    if (len && !o)
      return lithd_error_set(err, LITHD_BAD_REQUEST, -1,
                             "unknown query parameter \"%.*s\" (the answer's are rows, types and int64)",
                             (int)(klen > 64 ? 64 : klen), p);
    if (o && (!eq || fmt_set(&f, o, eq + 1, len - klen - 1) != 0))
      return lithd_error_set(err, LITHD_BAD_REQUEST, -1, "query parameter %s must be %s=%s or %s=%s", o->name,
                             o->name, o->off, o->name, o->on);
    p += len;
    if (*p == '&')
      p++;
  }
  b->fmt = f; /* all or nothing */
  return LITH_OK;
}

/* The statements of a parsed body into a new batch (b is empty, its
 * limits resolved); `own`: the tree lives in b's arena. */
static int batch_fill(lithd_batch *b, const lj_value *root, lithd_error *err, int own) {
  if (root->type != LJ_OBJECT)
    return lithd_error_set(err, LITHD_BAD_REQUEST, -1, "the body must be an object: {\"statements\": [...]}");
  for (size_t i = 0; i < root->n; i++) {
    const lj_member *m = &root->u.members[i];
    const fmt_opt *o;
    if (m->keylen == strlen("statements") && memcmp(m->key, "statements", m->keylen) == 0)
      continue;
    if (!(o = fmt_find(m->key, m->keylen)))
      return lithd_error_set(err, LITHD_BAD_REQUEST, -1,
                             "unknown key \"%.64s\" (the body has \"statements\", and may have \"rows\", "
                             "\"types\" and \"int64\")",
                             m->key);
    int rc = parse_format_key(b, o, m->value, err);
    if (rc != LITH_OK)
      return rc;
  }
  const lj_value *list = lj_get(root, "statements");
  if (!list || list->type != LJ_ARRAY)
    return lithd_error_set(err, LITHD_BAD_REQUEST, -1, "\"statements\" must be an array%s",
                           list ? "" : " and is missing");
  size_t n = list->n;
  if (n > (size_t)b->lim.max_statements)
    return lithd_error_set(err, LITHD_TOO_LARGE, -1, "%zu statements, over the limit of %d", n,
                           b->lim.max_statements);
  b->stmts = lithd_arena_alloc(&b->mem, n * sizeof *b->stmts, _Alignof(max_align_t));
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

int lithd_batch_parse(const char *body, size_t len, const lithd_limits *lim, lithd_batch **out,
                      lithd_error *err) {
  lithd_error scratch;
  lj_error jerr = {0, 0, ""};
  lj_value *root;
  int rc;
  if (!err)
    err = &scratch;
  lithd__error_clear(err);
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
    rc = lithd_error_set(err, LITHD_TOO_LARGE, -1, "the body is %zu bytes, over the limit of %zu", len,
                         b->lim.max_body_bytes);
    goto err_free_batch;
  }
  /* The tree goes into the batch's own arena: its strings become the
   * batch's without a copy. */
  if (lj_parse(&b->mem, body, len, &root, &jerr) != 0) {
    rc = lithd_error_set(err, strcmp(jerr.text, "out of memory") == 0 ? LITH_NOMEM : LITHD_BAD_REQUEST, -1,
                         "invalid JSON at line %d column %d: %s", jerr.line, jerr.column, jerr.text);
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
  lithd__error_clear(err);
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
  lithd_arena_free(&b->mem);
  free(b);
}

void lithd_batch_share_result_bytes(lithd_batch *b, _Atomic size_t *counter) {
  if (b)
    b->shared_bytes = counter;
}
