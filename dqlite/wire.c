/*
 * dqlite's wire protocol: see wire.h for the format. The decoders read
 * through a cursor that never moves past the end of the body: each get_*
 * checks the bytes it needs first, so a short or lying frame ends in
 * LITH_DQ_PROTO, never in a read outside the body. Counts (columns,
 * servers) are checked against the bytes left before anything is
 * allocated, so a frame cannot make the client allocate more than a small
 * multiple of its own size.
 */
#include "wire.h"

#include <stdlib.h>
#include <string.h>

const char *lith__dq_rc_str(int rc) {
  switch (rc) {
  case LITH_DQ_OK: return "ok";
  case LITH_DQ_FAILURE: return "failure";
  case LITH_DQ_PROTO: return "protocol error";
  case LITH_DQ_IO: return "i/o error";
  case LITH_DQ_TIMEOUT: return "timeout";
  case LITH_DQ_NOMEM: return "out of memory";
  case LITH_DQ_MISUSE: return "misuse";
  case LITH_DQ_STOPPED: return "stopped";
  case LITH_DQ_TOOBIG: return "answer too large";
  default: return "unknown";
  }
}

static size_t pad8(size_t n) { return (n + 7) & ~(size_t)7; }

lith__dq_value lith__dq_int(int64_t i) {
  lith__dq_value v = {.type = LITH_DQ_INTEGER, .i = i};
  return v;
}

lith__dq_value lith__dq_float(double f) {
  lith__dq_value v = {.type = LITH_DQ_FLOAT, .f = f};
  return v;
}

lith__dq_value lith__dq_text(const char *s) {
  lith__dq_value v = {.type = LITH_DQ_TEXT, .p = s, .n = strlen(s)};
  return v;
}

lith__dq_value lith__dq_blob(const void *p, size_t n) {
  lith__dq_value v = {.type = LITH_DQ_BLOB, .p = p, .n = n};
  return v;
}

lith__dq_value lith__dq_null(void) {
  lith__dq_value v = {.type = LITH_DQ_NULL};
  return v;
}

/* ---- Encoding ---- */

void lith__dq_buf_init(lith__dq_buf *b) { memset(b, 0, sizeof *b); }

void lith__dq_buf_free(lith__dq_buf *b) {
  free(b->data);
  lith__dq_buf_init(b);
}

void lith__dq_buf_reset(lith__dq_buf *b) {
  b->len = 0;
  b->err = 0;
  b->start = 0;
}

/* Room for n more bytes, zeroed (padding is zeros); NULL after an error. */
static uint8_t *grow(lith__dq_buf *b, size_t n) {
  if (b->err)
    return NULL;
  if (n > b->cap - b->len) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < n) {
      if (cap > SIZE_MAX / 2) {
        b->err = LITH_DQ_NOMEM;
        return NULL;
      }
      cap *= 2;
    }
    uint8_t *p = realloc(b->data, cap);
    if (p == NULL) {
      b->err = LITH_DQ_NOMEM;
      return NULL;
    }
    b->data = p;
    b->cap = cap;
  }
  uint8_t *p = b->data + b->len;
  memset(p, 0, n);
  b->len += n;
  return p;
}

static void le64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static void le32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

void lith__dq_put_handshake(lith__dq_buf *b) {
  uint8_t *p = grow(b, 8);
  if (p != NULL)
    le64(p, LITH_DQ_PROTOCOL_VERSION);
}

void lith__dq_req_begin(lith__dq_buf *b, int type) {
  b->start = b->len;
  uint8_t *p = grow(b, 8);
  if (p != NULL)
    p[4] = (uint8_t)type; /* schema 0, words filled in by end */
}

void lith__dq_put_u64(lith__dq_buf *b, uint64_t v) {
  uint8_t *p = grow(b, 8);
  if (p != NULL)
    le64(p, v);
}

/* Two uint32 fields share a word: the caller puts them in pairs. */
void lith__dq_put_u32(lith__dq_buf *b, uint32_t v) {
  uint8_t *p = grow(b, 4);
  if (p != NULL)
    le32(p, v);
}

void lith__dq_put_text(lith__dq_buf *b, const char *s) {
  size_t n = strlen(s);
  uint8_t *p = grow(b, pad8(n + 1));
  if (p != NULL)
    memcpy(p, s, n);
}

static void put_blob(lith__dq_buf *b, const void *data, size_t n) {
  lith__dq_put_u64(b, n);
  uint8_t *p = grow(b, pad8(n));
  if (p != NULL && n > 0)
    memcpy(p, data, n);
}

void lith__dq_put_params(lith__dq_buf *b, const lith__dq_value *params, unsigned n) {
  if (n == 0 || b->err)
    return;
  if (n > LITH_DQ_MAX_PARAMS) {
    b->err = LITH_DQ_MISUSE;
    return;
  }
  uint8_t *h = grow(b, pad8(1 + (size_t)n));
  if (h == NULL)
    return;
  h[0] = (uint8_t)n;
  for (unsigned i = 0; i < n; i++)
    h[1 + i] = (uint8_t)params[i].type;
  for (unsigned i = 0; i < n; i++) {
    const lith__dq_value *v = &params[i];
    switch (v->type) {
    case LITH_DQ_INTEGER:
    case LITH_DQ_BOOLEAN:
    case LITH_DQ_UNIXTIME: lith__dq_put_u64(b, (uint64_t)v->i); break;
    case LITH_DQ_FLOAT: {
      uint64_t u;
      memcpy(&u, &v->f, 8);
      lith__dq_put_u64(b, u);
      break;
    }
    case LITH_DQ_TEXT:
    case LITH_DQ_ISO8601: lith__dq_put_text(b, v->p != NULL ? (const char *)v->p : ""); break;
    case LITH_DQ_BLOB: put_blob(b, v->p, v->n); break;
    case LITH_DQ_NULL: lith__dq_put_u64(b, 0); break;
    default: b->err = LITH_DQ_MISUSE; return;
    }
  }
}

int lith__dq_req_end(lith__dq_buf *b) {
  if (b->err)
    return b->err;
  size_t body = b->len - b->start - 8;
  if (body % 8 != 0 || body / 8 > UINT32_MAX) {
    b->err = LITH_DQ_MISUSE;
    return b->err;
  }
  le32(b->data + b->start, (uint32_t)(body / 8));
  return LITH_DQ_OK;
}

int lith__dq_req_leader(lith__dq_buf *b) {
  lith__dq_req_begin(b, LITH_DQ_REQ_LEADER);
  lith__dq_put_u64(b, 0);
  return lith__dq_req_end(b);
}

int lith__dq_req_client(lith__dq_buf *b, uint64_t id) {
  lith__dq_req_begin(b, LITH_DQ_REQ_CLIENT);
  lith__dq_put_u64(b, id);
  return lith__dq_req_end(b);
}

int lith__dq_req_open(lith__dq_buf *b, const char *name, uint64_t flags, const char *vfs) {
  lith__dq_req_begin(b, LITH_DQ_REQ_OPEN);
  lith__dq_put_text(b, name);
  lith__dq_put_u64(b, flags);
  lith__dq_put_text(b, vfs != NULL ? vfs : "");
  return lith__dq_req_end(b);
}

int lith__dq_req_prepare(lith__dq_buf *b, uint32_t db, const char *sql) {
  lith__dq_req_begin(b, LITH_DQ_REQ_PREPARE);
  lith__dq_put_u64(b, db);
  lith__dq_put_text(b, sql);
  return lith__dq_req_end(b);
}

int lith__dq_req_exec(lith__dq_buf *b, int type, uint32_t db, uint32_t stmt, const lith__dq_value *params,
                      unsigned n) {
  lith__dq_req_begin(b, type);
  lith__dq_put_u32(b, db);
  lith__dq_put_u32(b, stmt);
  lith__dq_put_params(b, params, n);
  return lith__dq_req_end(b);
}

int lith__dq_req_finalize(lith__dq_buf *b, uint32_t db, uint32_t stmt) {
  return lith__dq_req_exec(b, LITH_DQ_REQ_FINALIZE, db, stmt, NULL, 0);
}

int lith__dq_req_sql(lith__dq_buf *b, int type, uint32_t db, const char *sql, const lith__dq_value *params,
                     unsigned n) {
  lith__dq_req_begin(b, type);
  lith__dq_put_u64(b, db);
  lith__dq_put_text(b, sql);
  lith__dq_put_params(b, params, n);
  return lith__dq_req_end(b);
}

/* The one-word requests. */
static int req_u64(lith__dq_buf *b, int type, uint64_t v) {
  lith__dq_req_begin(b, type);
  lith__dq_put_u64(b, v);
  return lith__dq_req_end(b);
}

int lith__dq_req_interrupt(lith__dq_buf *b, uint32_t db) { return req_u64(b, LITH_DQ_REQ_INTERRUPT, db); }
int lith__dq_req_remove(lith__dq_buf *b, uint64_t id) { return req_u64(b, LITH_DQ_REQ_REMOVE, id); }
int lith__dq_req_cluster(lith__dq_buf *b, uint64_t format) { return req_u64(b, LITH_DQ_REQ_CLUSTER, format); }

int lith__dq_req_dump(lith__dq_buf *b, const char *name) {
  lith__dq_req_begin(b, LITH_DQ_REQ_DUMP);
  lith__dq_put_text(b, name);
  return lith__dq_req_end(b);
}

int lith__dq_req_add(lith__dq_buf *b, uint64_t id, const char *address) {
  lith__dq_req_begin(b, LITH_DQ_REQ_ADD);
  lith__dq_put_u64(b, id);
  lith__dq_put_text(b, address);
  return lith__dq_req_end(b);
}

int lith__dq_req_assign(lith__dq_buf *b, uint64_t id, uint64_t role) {
  lith__dq_req_begin(b, LITH_DQ_REQ_ASSIGN);
  lith__dq_put_u64(b, id);
  lith__dq_put_u64(b, role);
  return lith__dq_req_end(b);
}

/* ---- Decoding ---- */

void lith__dq_header_decode(const uint8_t h[8], lith__dq_header *out) {
  out->words = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 24;
  out->type = h[4];
  out->schema = h[5];
}

typedef struct cursor {
  const uint8_t *p;
  size_t left;
} cursor;

static uint64_t rd64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

static int get_u64(cursor *c, uint64_t *v) {
  if (c->left < 8)
    return LITH_DQ_PROTO;
  *v = rd64(c->p);
  c->p += 8;
  c->left -= 8;
  return LITH_DQ_OK;
}

/* Two uint32 in one word. */
static int get_u32x2(cursor *c, uint32_t *a, uint32_t *b) {
  uint64_t w;
  int rc = get_u64(c, &w);
  if (rc != LITH_DQ_OK)
    return rc;
  *a = (uint32_t)w;
  *b = (uint32_t)(w >> 32);
  return LITH_DQ_OK;
}

/* A text: its NUL must lie inside the body, its padding too. */
static int get_text(cursor *c, const char **s, size_t *len) {
  const uint8_t *nul = memchr(c->p, 0, c->left);
  if (nul == NULL)
    return LITH_DQ_PROTO;
  size_t n = (size_t)(nul - c->p);
  size_t adv = pad8(n + 1);
  if (adv > c->left)
    return LITH_DQ_PROTO;
  *s = (const char *)c->p;
  if (len != NULL)
    *len = n;
  c->p += adv;
  c->left -= adv;
  return LITH_DQ_OK;
}

static int get_blob(cursor *c, const void **p, size_t *len) {
  uint64_t n;
  int rc = get_u64(c, &n);
  if (rc != LITH_DQ_OK)
    return rc;
  if (n > c->left || pad8((size_t)n) > c->left)
    return LITH_DQ_PROTO;
  *p = c->p;
  *len = (size_t)n;
  c->p += pad8((size_t)n);
  c->left -= pad8((size_t)n);
  return LITH_DQ_OK;
}

int lith__dq_decode_failure(const uint8_t *body, size_t n, uint64_t *code, const char **message) {
  cursor c = {body, n};
  int rc = get_u64(&c, code);
  if (rc == LITH_DQ_OK)
    rc = get_text(&c, message, NULL);
  return rc;
}

/* From the end: a text takes pad8(len + 1) bytes, so it ends in 1 to 8
 * zero bytes (its NUL and padding). More than 8 trailing zeros: the message
 * is empty (a word of zeros) and the zeros before are the code's top bytes.
 * Otherwise the message is the run of non-zero bytes before them, which
 * must start on a word boundary after a zero byte (the top byte of the
 * code, which is below 2^56); the code is the word before it. */
int lith__dq_decode_failure_tail(const uint8_t *body, size_t n, uint64_t *code, const char **message) {
  if (n < 16 || n % 8 != 0)
    return LITH_DQ_PROTO;
  size_t zeros = 0; /* trailing, counted up to 9 */
  while (zeros < 9 && body[n - 1 - zeros] == 0)
    zeros++;
  size_t start = n - 8; /* an empty message */
  if (zeros <= 8) {
    if (zeros == 0)
      return LITH_DQ_PROTO; /* no NUL at the end */
    start = n - zeros;      /* one past the message's last byte, for now */
    while (start > 0 && body[start - 1] != 0)
      start--;
    if (start % 8 != 0 || start < 8)
      return LITH_DQ_PROTO;
  }
  cursor c = {body + start - 8, 8};
  *message = (const char *)body + start;
  return get_u64(&c, code);
}

int lith__dq_decode_server(const uint8_t *body, size_t n, uint64_t *id, const char **address) {
  cursor c = {body, n};
  int rc = get_u64(&c, id);
  if (rc == LITH_DQ_OK)
    rc = get_text(&c, address, NULL);
  return rc;
}

int lith__dq_decode_welcome(const uint8_t *body, size_t n, uint64_t *heartbeat_timeout) {
  cursor c = {body, n};
  return get_u64(&c, heartbeat_timeout);
}

int lith__dq_decode_db(const uint8_t *body, size_t n, uint32_t *db) {
  cursor c = {body, n};
  uint32_t pad;
  return get_u32x2(&c, db, &pad);
}

int lith__dq_decode_stmt(const uint8_t *body, size_t n, uint32_t *db, uint32_t *stmt, uint64_t *params) {
  cursor c = {body, n};
  int rc = get_u32x2(&c, db, stmt);
  if (rc == LITH_DQ_OK)
    rc = get_u64(&c, params);
  return rc;
}

int lith__dq_decode_result(const uint8_t *body, size_t n, uint64_t *last_insert_id, uint64_t *rows_affected) {
  cursor c = {body, n};
  int rc = get_u64(&c, last_insert_id);
  if (rc == LITH_DQ_OK)
    rc = get_u64(&c, rows_affected);
  return rc;
}

int lith__dq_decode_empty(const uint8_t *body, size_t n) {
  cursor c = {body, n};
  uint64_t unused;
  return get_u64(&c, &unused);
}

/* Two passes: the first checks the frame and sums the addresses' sizes,
 * the second copies into one block. An entry takes at least two words (three
 * with the role), which bounds n before the allocation. */
int lith__dq_decode_servers(const uint8_t *body, size_t n, uint64_t format, lith__dq_servers *out) {
  cursor c = {body, n};
  uint64_t count, id, role;
  const char *addr;
  size_t len, strings = 0;
  size_t entry_min = format == 1 ? 24 : 16;
  out->n = 0;
  out->v = NULL;
  if (format > 1)
    return LITH_DQ_MISUSE;
  if (get_u64(&c, &count) != LITH_DQ_OK || count > c.left / entry_min)
    return LITH_DQ_PROTO;
  cursor first = c;
  for (uint64_t i = 0; i < count; i++) {
    if (get_u64(&c, &id) != LITH_DQ_OK || get_text(&c, &addr, &len) != LITH_DQ_OK)
      return LITH_DQ_PROTO;
    if (format == 1 && get_u64(&c, &role) != LITH_DQ_OK)
      return LITH_DQ_PROTO;
    strings += len + 1;
  }
  size_t head = (size_t)count * sizeof(lith__dq_server);
  lith__dq_server *v = malloc(head + strings + 1);
  if (v == NULL)
    return LITH_DQ_NOMEM;
  char *s = (char *)(v + count);
  c = first;
  for (uint64_t i = 0; i < count; i++) {
    get_u64(&c, &v[i].id);
    get_text(&c, &addr, &len);
    memcpy(s, addr, len + 1);
    v[i].address = s;
    s += len + 1;
    v[i].role = LITH_DQ_VOTER;
    if (format == 1)
      get_u64(&c, &v[i].role);
  }
  out->n = (size_t)count;
  out->v = v;
  return LITH_DQ_OK;
}

/* ---- Rows ---- */

void lith__dq_rows_init(lith__dq_rows *r) { memset(r, 0, sizeof *r); }

void lith__dq_rows_free(lith__dq_rows *r) {
  for (size_t i = 0; i < r->nbodies; i++)
    free(r->bodies[i]);
  free(r->bodies);
  free(r->names);
  free(r->values);
  lith__dq_rows_init(r);
}

const lith__dq_value *lith__dq_rows_at(const lith__dq_rows *r, size_t i, unsigned j) {
  if (i >= r->nrows || j >= r->ncols)
    return NULL;
  return &r->values[i * r->ncols + j];
}

/* One value of a row, by its type code. */
static int get_value(cursor *c, int type, lith__dq_value *v) {
  uint64_t u = 0;
  int rc;
  memset(v, 0, sizeof *v);
  v->type = type;
  switch (type) {
  case LITH_DQ_INTEGER:
  case LITH_DQ_UNIXTIME:
  case LITH_DQ_BOOLEAN:
  case LITH_DQ_NULL:
    rc = get_u64(c, &u);
    v->i = (int64_t)u;
    if (type == LITH_DQ_NULL)
      v->i = 0;
    return rc;
  case LITH_DQ_FLOAT:
    rc = get_u64(c, &u);
    memcpy(&v->f, &u, 8);
    return rc;
  case LITH_DQ_TEXT:
  case LITH_DQ_ISO8601: {
    const char *s = NULL;
    rc = get_text(c, &s, &v->n);
    v->p = s;
    return rc;
  }
  case LITH_DQ_BLOB: return get_blob(c, &v->p, &v->n);
  default: return LITH_DQ_PROTO;
  }
}

/* Room for one more row of ncols values. The first reservation is one
 * row: a frame of many columns and one row must not buy 16 rows' worth. */
static int reserve_row(lith__dq_rows *r) {
  size_t need = (r->nrows + 1) * r->ncols;
  if (need <= r->cap)
    return LITH_DQ_OK;
  size_t cap = r->cap ? r->cap * 2 : (size_t)r->ncols;
  while (cap < need)
    cap *= 2;
  lith__dq_value *v = realloc(r->values, cap * sizeof *v);
  if (v == NULL)
    return LITH_DQ_NOMEM;
  r->values = v;
  r->cap = cap;
  return LITH_DQ_OK;
}

int lith__dq_rows_decode(lith__dq_rows *r, uint8_t *body, size_t n, int *done) {
  cursor c = {body, n};
  uint64_t ncols, word;
  size_t nrows0 = r->nrows;
  const char **names = NULL;
  int rc = LITH_DQ_PROTO;
  uint8_t **bodies = realloc(r->bodies, (r->nbodies + 1) * sizeof *bodies);
  if (bodies == NULL) {
    rc = LITH_DQ_NOMEM;
    goto fail;
  }
  r->bodies = bodies;

  /* dqlite never sends a result set without columns; one would also let a
   * row be zero bytes long. Every name takes at least a word. */
  if (get_u64(&c, &ncols) != LITH_DQ_OK || ncols == 0 || ncols > c.left / 8)
    goto fail;
  if (r->nbodies > 0 && ncols != r->ncols)
    goto fail;
  if (r->nbodies == 0) {
    names = malloc((size_t)ncols * sizeof *names);
    if (names == NULL) {
      rc = LITH_DQ_NOMEM;
      goto fail;
    }
  }
  for (uint64_t j = 0; j < ncols; j++) {
    const char *name;
    if (get_text(&c, &name, NULL) != LITH_DQ_OK)
      goto fail;
    if (names != NULL)
      names[j] = name;
  }
  if (r->nbodies == 0)
    r->ncols = (unsigned)ncols;

  /* Rows until the closing word; the header's nibbles can never be all 0xe
   * or 0xf (no such type), so the markers cannot be a row. */
  size_t hsize = pad8(((size_t)ncols + 1) / 2);
  for (;;) {
    if (c.left < 8)
      goto fail;
    word = rd64(c.p);
    if (word == LITH_DQ_ROWS_DONE || word == LITH_DQ_ROWS_PART) {
      *done = word == LITH_DQ_ROWS_DONE;
      break;
    }
    if (hsize > c.left)
      goto fail;
    const uint8_t *h = c.p;
    c.p += hsize;
    c.left -= hsize;
    if ((rc = reserve_row(r)) != LITH_DQ_OK)
      goto fail;
    rc = LITH_DQ_PROTO;
    lith__dq_value *row = &r->values[r->nrows * r->ncols];
    for (uint64_t j = 0; j < ncols; j++) {
      int type = (j % 2 == 0) ? (h[j / 2] & 0x0f) : (h[j / 2] >> 4);
      if (get_value(&c, type, &row[j]) != LITH_DQ_OK)
        goto fail;
    }
    r->nrows++;
  }
  if (names != NULL)
    r->names = names;
  r->bodies[r->nbodies++] = body;
  return LITH_DQ_OK;

fail:
  if (names != NULL)
    r->ncols = 0;
  free(names);
  r->nrows = nrows0;
  free(body);
  return rc;
}

/* ---- Files (DUMP's answer) ---- */

/* The decoder's states: the field it is in. NEXT: a file ended, the
 * next one (or the end) comes; BAD: spent. */
enum { F_COUNT, F_NAME, F_SIZE, F_DATA, F_PAD, F_NEXT, F_DONE, F_BAD };

void lith__dq_files_init(lith__dq_files *f, uint64_t body_size) {
  memset(f, 0, sizeof *f);
  f->left = body_size;
  f->state = F_COUNT;
}

/* Gather f->word from p[*k..n): 1 when it is whole. */
static int take_word(lith__dq_files *f, const uint8_t *p, size_t n, size_t *k) {
  size_t want = 8 - f->nword;
  if (want > n - *k)
    want = n - *k;
  memcpy(f->word + f->nword, p + *k, want);
  f->nword += (unsigned)want;
  *k += want;
  f->left -= want;
  if (f->nword < 8)
    return 0;
  f->nword = 0;
  return 1;
}

int lith__dq_files_next(lith__dq_files *f, const uint8_t *p, size_t n, size_t *used, int *ev,
                        const uint8_t **data, size_t *len) {
  size_t k = 0;
  uint64_t w;
  *data = NULL;
  *len = 0;
  if (n > f->left)
    n = (size_t)f->left; /* bytes past the body are not the body's */
  for (;;) {
    switch (f->state) {
    case F_COUNT:
    case F_NAME:
    case F_SIZE:
      /* A word: the body must still hold it, whole. */
      if (f->nword == 0 && f->left < 8)
        goto bad;
      if (k == n || !take_word(f, p, n, &k))
        goto need;
      if (f->state == F_NAME) {
        memcpy(f->name + f->nname, f->word, 8); /* room: checked below, a word before */
        f->nname += 8;
        if (memchr(f->word, 0, 8) != NULL)
          f->state = F_SIZE;
        else if (f->nname >= LITH_DQ_FILE_NAME_MAX)
          goto bad; /* no NUL within the bound: at once, not when more comes */
        continue;
      }
      w = rd64(f->word);
      if (f->state == F_COUNT) {
        /* Each file takes two words at least (a name, a size). */
        if (w > f->left / 16)
          goto bad;
        f->count = w;
        f->index = 0;
        f->nname = 0;
        f->state = w == 0 ? F_DONE : F_NAME;
        continue;
      }
      /* The size: its bytes and padding, and the files after it (two
       * words each at least), must fit what is left of the body. */
      if (w > f->left || pad8((size_t)w) > f->left ||
          (f->count - f->index - 1) > (f->left - pad8((size_t)w)) / 16)
        goto bad;
      f->size = w;
      f->data_left = w;
      f->pad_left = pad8((size_t)w) - w;
      f->state = F_DATA;
      *ev = LITH_DQ_FILES_BEGIN;
      goto out;
    case F_DATA: {
      if (f->data_left == 0) {
        f->state = F_PAD;
        continue;
      }
      if (k == n)
        goto need;
      size_t take = n - k;
      if (take > f->data_left)
        take = (size_t)f->data_left;
      *data = p + k;
      *len = take;
      k += take;
      f->data_left -= take;
      f->left -= take;
      *ev = LITH_DQ_FILES_DATA;
      goto out;
    }
    case F_PAD: {
      if (f->pad_left > 0) {
        if (k == n)
          goto need;
        size_t take = n - k;
        if (take > f->pad_left)
          take = (size_t)f->pad_left;
        k += take;
        f->pad_left -= take;
        f->left -= take;
        continue;
      }
      f->state = F_NEXT;
      *ev = LITH_DQ_FILES_END;
      goto out;
    }
    case F_NEXT:
      if (f->index + 1 == f->count) {
        f->state = F_DONE;
        continue;
      }
      f->index++;
      f->nname = 0;
      f->state = F_NAME;
      continue;
    case F_DONE: *ev = LITH_DQ_FILES_DONE; goto out;
    default: goto bad;
    }
  }
need:
  *ev = LITH_DQ_FILES_NEED;
out:
  *used = k;
  return LITH_DQ_OK;
bad:
  f->state = F_BAD;
  *used = k;
  return LITH_DQ_PROTO;
}
