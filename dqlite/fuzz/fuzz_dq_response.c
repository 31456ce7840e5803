/*
 * libFuzzer harness: what a dqlite node sends the client (dqlite/wire.c's
 * response decoders). The input is a sequence of messages as on the wire,
 * an 8-byte header (body size in words, type, schema) and its body; each
 * body is copied into a buffer of exactly its size, so that ASan sees a read
 * one byte past it. Each message goes to the decoder of its type, SERVERS
 * to both formats; consecutive ROWS messages are gathered into one result
 * as the client does (PART, then more parts, until DONE). Unknown types go
 * to every fixed decoder.
 *
 * FAILURE bodies also go to the tail decoder (a query's FAILURE, read from
 * the end: libdqlite 1.11.1 puts a part's rows before the code).
 *
 * Oracle, besides the sanitizers: a decoded result holds only what its
 * bodies contain (every text and blob lies inside one of them, a text's
 * length is its strlen), the rows count times the columns values are all
 * readable, a failed decode leaves the rows as they were, a decoded
 * SERVERS list's addresses are strings, a FAILURE read from the end has
 * its message on a word boundary ending the body with its padding, and a
 * plain FAILURE reads the same both ways.
 *
 * Seeds: dqlite/fuzz/corpus/dq_response, real answers of a lith-node
 * (libdqlite 1.11.1) captured with dqlite/fuzz/capture.py.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond) {
  if (!cond)
    abort();
}

/* Does [p, p + n) lie inside one of r's bodies? The sizes are kept beside. */
static int inside(const lith__dq_rows *r, const size_t *sizes, const void *p, size_t n) {
  const uint8_t *q = p;
  for (size_t i = 0; i < r->nbodies; i++)
    if (q >= r->bodies[i] && n <= sizes[i] && q - r->bodies[i] <= (ptrdiff_t)(sizes[i] - n))
      return 1;
  return 0;
}

static void check_rows(const lith__dq_rows *r, const size_t *sizes) {
  check(r->ncols > 0 && r->names != NULL);
  for (unsigned j = 0; j < r->ncols; j++)
    check(inside(r, sizes, r->names[j], strlen(r->names[j]) + 1));
  for (size_t i = 0; i < r->nrows; i++) {
    for (unsigned j = 0; j < r->ncols; j++) {
      const lith__dq_value *v = lith__dq_rows_at(r, i, j);
      check(v != NULL);
      if (v->type == LITH_DQ_TEXT || v->type == LITH_DQ_ISO8601)
        check(inside(r, sizes, v->p, v->n + 1) && strlen(v->p) == v->n);
      else if (v->type == LITH_DQ_BLOB)
        check(v->n == 0 || inside(r, sizes, v->p, v->n));
    }
  }
  check(lith__dq_rows_at(r, r->nrows, 0) == NULL);
}

static void fixed(int type, const uint8_t *b, size_t n) {
  uint64_t u1, u2;
  uint32_t a, c;
  const char *s;
  lith__dq_servers sv;
  if (type == LITH_DQ_RES_FAILURE || type > LITH_DQ_RES_EMPTY) {
    const char *t;
    int fwd = lith__dq_decode_failure(b, n, &u1, &s) == LITH_DQ_OK;
    if (fwd)
      check((const uint8_t *)s >= b && (const uint8_t *)s + strlen(s) < b + n);
    /* From the end (a query's FAILURE): the message ends the body, the
     * code is the word before it; a plain FAILURE that fills its body
     * exactly (zero padding, code below 2^56) reads the same both ways. */
    if (lith__dq_decode_failure_tail(b, n, &u2, &t) == LITH_DQ_OK) {
      size_t len = strlen(t);
      check((const uint8_t *)t >= b + 8 && ((const uint8_t *)t - b) % 8 == 0);
      check((const uint8_t *)t + len < b + n &&
            ((len + 8) & ~(size_t)7) == (size_t)(b + n - (const uint8_t *)t));
      check(u2 < (1ULL << 56));
    }
    if (fwd && u1 < (1ULL << 56) && n % 8 == 0) {
      size_t len = strlen(s), whole = ((len + 8) & ~(size_t)7);
      int zeros = 1;
      for (size_t i = len; i < whole && (const uint8_t *)s + i < b + n; i++)
        zeros &= s[i] == 0;
      if ((const uint8_t *)s == b + 8 && 8 + whole == n && zeros) {
        check(lith__dq_decode_failure_tail(b, n, &u2, &t) == LITH_DQ_OK);
        check(u2 == u1 && t == s);
      }
    }
  }
  if (type == LITH_DQ_RES_SERVER || type > LITH_DQ_RES_EMPTY) {
    if (lith__dq_decode_server(b, n, &u1, &s) == LITH_DQ_OK)
      check((const uint8_t *)s >= b && (const uint8_t *)s + strlen(s) < b + n);
  }
  if (type == LITH_DQ_RES_WELCOME || type > LITH_DQ_RES_EMPTY)
    lith__dq_decode_welcome(b, n, &u1);
  if (type == LITH_DQ_RES_DB || type > LITH_DQ_RES_EMPTY)
    lith__dq_decode_db(b, n, &a);
  if (type == LITH_DQ_RES_STMT || type > LITH_DQ_RES_EMPTY)
    lith__dq_decode_stmt(b, n, &a, &c, &u1);
  if (type == LITH_DQ_RES_RESULT || type > LITH_DQ_RES_EMPTY)
    lith__dq_decode_result(b, n, &u1, &u2);
  if (type == LITH_DQ_RES_EMPTY || type > LITH_DQ_RES_EMPTY)
    lith__dq_decode_empty(b, n);
  if (type == LITH_DQ_RES_SERVERS || type > LITH_DQ_RES_EMPTY) {
    for (uint64_t format = 0; format <= 1; format++) {
      if (lith__dq_decode_servers(b, n, format, &sv) != LITH_DQ_OK) {
        check(sv.v == NULL && sv.n == 0);
        continue;
      }
      check(sv.n <= n / 16);
      for (size_t i = 0; i < sv.n; i++)
        check(strlen(sv.v[i].address) < n);
      free(sv.v);
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lith__dq_rows rows;
  size_t sizes[64];
  lith__dq_rows_init(&rows);
  while (size >= 8) {
    lith__dq_header h;
    lith__dq_header_decode(data, &h);
    data += 8;
    size -= 8;
    size_t n = (size_t)h.words * 8;
    if (n > size)
      n = size; /* what a short read would leave: a body that is too short */
    uint8_t *body = malloc(n ? n : 1);
    if (body == NULL)
      break;
    memcpy(body, data, n);
    data += n;
    size -= n;
    if (h.type != LITH_DQ_RES_ROWS) {
      fixed(h.type, body, n);
      free(body);
      continue;
    }
    if (rows.nbodies == sizeof sizes / sizeof sizes[0]) {
      lith__dq_rows_free(&rows);
    }
    size_t nrows = rows.nrows, nbodies = rows.nbodies;
    int done = 0;
    sizes[rows.nbodies] = n;
    if (lith__dq_rows_decode(&rows, body, n, &done) != LITH_DQ_OK) {
      check(rows.nrows == nrows && rows.nbodies == nbodies);
      lith__dq_rows_free(&rows);
      continue;
    }
    check_rows(&rows, sizes);
    if (done)
      lith__dq_rows_free(&rows);
  }
  lith__dq_rows_free(&rows);
  return 0;
}
