/*
 * dqlite/wire.c without a node:
 *   - requests are the bytes the protocol reference describes: the header's
 *     word count, type and schema, uint32 pairs in one word, texts
 *     NUL-terminated and zero-padded to a word (7 bytes take one word, 8 take
 *     two), the parameter tuple (count, type bytes, padding, values; a blob
 *     as length + padded bytes); more than 255 parameters or an unknown type
 *     is LITH_DQ_MISUSE;
 *   - hand-made responses decode: FAILURE, SERVER, DB, STMT (with a later
 *     schema's extra word ignored), RESULT, EMPTY, SERVERS in both formats;
 *   - ROWS: every value type, a 17-column row (two header words), a result in
 *     a PART and a DONE message gathered into one set, a later part with
 *     another column count refused;
 *   - a node is not trusted: every truncation of valid answers, a text
 *     without its NUL, a blob or a count larger than the body, a type nibble
 *     that is no type, zero columns, all give LITH_DQ_PROTO and leave the
 *     rows as they were (ASan/UBSan builds check no byte outside is read);
 *   - FILES (DUMP's answer), decoded in pieces of any size (the whole body,
 *     one byte at a time, 5 bytes at a time: the same files), DUMP's
 *     request; every truncation, a count the body cannot hold, a size past
 *     the body (or near 2^64), files after one that cannot fit, a name
 *     with no NUL within LITH_DQ_FILE_NAME_MAX: LITH_DQ_PROTO, and no byte
 *     of a file is handed out before its size was checked.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "wire.h"

static uint64_t rd64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

static void test_request_layout(void **state) {
  (void)state;
  lith__dq_buf b;
  lith__dq_buf_init(&b);

  lith__dq_put_handshake(&b);
  assert_int_equal(b.len, 8);
  assert_int_equal(rd64(b.data), 1);

  lith__dq_buf_reset(&b);
  assert_int_equal(lith__dq_req_leader(&b), LITH_DQ_OK);
  const uint8_t leader[16] = {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  assert_int_equal(b.len, 16);
  assert_memory_equal(b.data, leader, 16);

  /* 7 characters + NUL: one word; 8 characters: two. */
  lith__dq_buf_reset(&b);
  assert_int_equal(lith__dq_req_open(&b, "abcdefg", 0, "abcdefgh"), LITH_DQ_OK);
  assert_int_equal(b.len, 8 + 8 + 8 + 16);
  assert_int_equal(b.data[0], 4); /* words */
  assert_int_equal(b.data[4], LITH_DQ_REQ_OPEN);
  assert_int_equal(b.data[5], 0); /* schema */
  assert_memory_equal(b.data + 8, "abcdefg", 8);
  assert_memory_equal(b.data + 24, "abcdefgh\0\0\0\0\0\0\0\0", 16);

  /* EXEC: db and stmt share a word. */
  lith__dq_buf_reset(&b);
  assert_int_equal(lith__dq_req_exec(&b, LITH_DQ_REQ_EXEC, 3, 7, NULL, 0), LITH_DQ_OK);
  assert_int_equal(b.len, 16);
  assert_int_equal(rd64(b.data + 8), (7ULL << 32) | 3);

  /* EXEC_SQL with one parameter of each kind. */
  const char blob[3] = {1, 2, 3};
  lith__dq_value p[5] = {lith__dq_int(-2),
                         {.type = LITH_DQ_FLOAT, .f = 1.5},
                         {.type = LITH_DQ_TEXT, .p = "hi"},
                         {.type = LITH_DQ_BLOB, .p = blob, .n = 3},
                         {.type = LITH_DQ_NULL}};
  lith__dq_buf_reset(&b);
  assert_int_equal(lith__dq_req_sql(&b, LITH_DQ_REQ_EXEC_SQL, 0, "SELECT ?", p, 5), LITH_DQ_OK);
  const uint8_t *q = b.data + 8;
  assert_int_equal(rd64(q), 0);                             /* db */
  assert_memory_equal(q + 8, "SELECT ?\0\0\0\0\0\0\0", 16); /* text, 9 bytes -> 16 */
  const uint8_t head[8] = {5, LITH_DQ_INTEGER, LITH_DQ_FLOAT, LITH_DQ_TEXT, LITH_DQ_BLOB, LITH_DQ_NULL, 0, 0};
  assert_memory_equal(q + 24, head, 8);
  assert_int_equal((int64_t)rd64(q + 32), -2);
  double f;
  uint64_t u = rd64(q + 40);
  memcpy(&f, &u, 8);
  assert_true(f == 1.5);
  assert_memory_equal(q + 48, "hi\0\0\0\0\0\0", 8);
  assert_int_equal(rd64(q + 56), 3);
  assert_memory_equal(q + 64, "\1\2\3\0\0\0\0\0", 8);
  assert_int_equal(rd64(q + 72), 0);
  assert_int_equal(b.len, 8 + 80);
  assert_int_equal(b.data[0], 10);

  /* Seven parameters fill the first header word, the eighth needs two. */
  lith__dq_value many[256];
  for (int i = 0; i < 256; i++)
    many[i] = lith__dq_int(i);
  lith__dq_buf_reset(&b);
  assert_int_equal(lith__dq_req_sql(&b, LITH_DQ_REQ_QUERY_SQL, 0, "", many, 7), LITH_DQ_OK);
  assert_int_equal(b.len, 8 + 8 + 8 + 8 + 7 * 8);
  lith__dq_buf_reset(&b);
  assert_int_equal(lith__dq_req_sql(&b, LITH_DQ_REQ_QUERY_SQL, 0, "", many, 8), LITH_DQ_OK);
  assert_int_equal(b.len, 8 + 8 + 8 + 16 + 8 * 8);
  lith__dq_buf_reset(&b);
  assert_int_equal(lith__dq_req_sql(&b, LITH_DQ_REQ_QUERY_SQL, 0, "", many, 255), LITH_DQ_OK);
  lith__dq_buf_reset(&b);
  assert_int_equal(lith__dq_req_sql(&b, LITH_DQ_REQ_QUERY_SQL, 0, "", many, 256), LITH_DQ_MISUSE);
  lith__dq_value bad = {.type = 42};
  lith__dq_buf_reset(&b);
  assert_int_equal(lith__dq_req_sql(&b, LITH_DQ_REQ_EXEC_SQL, 0, "", &bad, 1), LITH_DQ_MISUSE);

  /* ASSIGN: id and role, one word each. */
  lith__dq_buf_reset(&b);
  assert_int_equal(lith__dq_req_assign(&b, 2, LITH_DQ_VOTER), LITH_DQ_OK);
  assert_int_equal(b.len, 24);
  assert_int_equal(b.data[4], LITH_DQ_REQ_ASSIGN);
  assert_int_equal(rd64(b.data + 8), 2);
  lith__dq_buf_free(&b);
}

static void test_header(void **state) {
  (void)state;
  const uint8_t h[8] = {2, 1, 0, 0, 7, 1, 0, 0};
  lith__dq_header hd;
  lith__dq_header_decode(h, &hd);
  assert_int_equal(hd.words, 258);
  assert_int_equal(hd.type, LITH_DQ_RES_ROWS);
  assert_int_equal(hd.schema, 1);
}

static void test_fixed_responses(void **state) {
  (void)state;
  uint64_t code, id, a, b2;
  uint32_t db, stmt;
  const char *s;
  const uint8_t failure[24] = {19, 8, 0, 0, 0, 0, 0, 0, 'n', 'o', 'p', 'e', 0, 0, 0, 0};
  assert_int_equal(lith__dq_decode_failure(failure, 16, &code, &s), LITH_DQ_OK);
  assert_int_equal(code, 2067);
  assert_string_equal(s, "nope");

  const uint8_t server[24] = {3, 0, 0, 0, 0, 0, 0, 0, '1', ':', '2', 0, 0, 0, 0, 0};
  assert_int_equal(lith__dq_decode_server(server, 16, &id, &s), LITH_DQ_OK);
  assert_int_equal(id, 3);
  assert_string_equal(s, "1:2");

  const uint8_t dbb[8] = {5, 0, 0, 0, 0, 0, 0, 0};
  assert_int_equal(lith__dq_decode_db(dbb, 8, &db), LITH_DQ_OK);
  assert_int_equal(db, 5);

  /* STMT with a fourth word (a later schema's offset): ignored. */
  const uint8_t st[32] = {1, 0, 0, 0, 9, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 99};
  assert_int_equal(lith__dq_decode_stmt(st, 32, &db, &stmt, &a), LITH_DQ_OK);
  assert_int_equal(db, 1);
  assert_int_equal(stmt, 9);
  assert_int_equal(a, 2);

  const uint8_t res[16] = {42, 0, 0, 0, 0, 0, 0, 0, 3};
  assert_int_equal(lith__dq_decode_result(res, 16, &a, &b2), LITH_DQ_OK);
  assert_int_equal(a, 42);
  assert_int_equal(b2, 3);
  assert_int_equal(lith__dq_decode_empty(res, 8), LITH_DQ_OK);
  assert_int_equal(lith__dq_decode_welcome(res, 8, &a), LITH_DQ_OK);
  assert_int_equal(a, 42);

  /* Short bodies. */
  for (size_t n = 0; n < 16; n++) {
    assert_int_equal(lith__dq_decode_failure(failure, n, &code, &s), LITH_DQ_PROTO);
    assert_int_equal(lith__dq_decode_result(res, n, &a, &b2), LITH_DQ_PROTO);
    if (n < 8)
      assert_int_equal(lith__dq_decode_db(dbb, n, &db), LITH_DQ_PROTO);
  }
  /* A text without its NUL, and one whose padding is cut. */
  const uint8_t nonul[16] = {1, 0, 0, 0, 0, 0, 0, 0, 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'};
  assert_int_equal(lith__dq_decode_failure(nonul, 16, &code, &s), LITH_DQ_PROTO);
  assert_int_equal(lith__dq_decode_server(server, 12, &id, &s), LITH_DQ_PROTO);
}

/* A query's FAILURE as libdqlite 1.11.1 sends it: the part it was filling
 * (column count, names, rows), then code and message; read from the end.
 * Plain FAILUREs read the same both ways, messages of every length
 * (padding of 1 to 8 zeros), the empty one included. */
static void test_failure_tail(void **state) {
  (void)state;
  uint64_t code, code2;
  const char *s, *s2;
  lith__dq_buf b;
  lith__dq_buf_init(&b);
  /* What test_client saw: 2 columns "n" and "pad", rows, then the failure. */
  lith__dq_req_begin(&b, LITH_DQ_RES_FAILURE);
  lith__dq_put_u64(&b, 2);
  lith__dq_put_text(&b, "n");
  lith__dq_put_text(&b, "pad");
  for (int i = 0; i < 3; i++) {
    lith__dq_put_u64(&b, LITH_DQ_INTEGER | LITH_DQ_TEXT << 4);
    lith__dq_put_u64(&b, (uint64_t)i);
    lith__dq_put_text(&b, "0000000000000000000000000000000000000000000000000000000000000000001");
  }
  lith__dq_put_u64(&b, 1);
  lith__dq_put_text(&b, "integer overflow");
  assert_int_equal(lith__dq_req_end(&b), LITH_DQ_OK);
  const uint8_t *body = b.data + 8;
  size_t n = b.len - 8;
  assert_int_equal(lith__dq_decode_failure(body, n, &code, &s), LITH_DQ_OK);
  assert_int_equal(code, 2); /* the forward reading is wrong for these */
  assert_string_equal(s, "n");
  assert_int_equal(lith__dq_decode_failure_tail(body, n, &code, &s), LITH_DQ_OK);
  assert_int_equal(code, 1);
  assert_string_equal(s, "integer overflow");

  char msg[40];
  for (size_t len = 0; len < 30; len++) {
    memset(msg, 'a' + (int)(len % 26), len);
    msg[len] = '\0';
    for (int prefix = 0; prefix <= 1; prefix++) {
      lith__dq_buf_reset(&b);
      lith__dq_req_begin(&b, LITH_DQ_RES_FAILURE);
      if (prefix) {
        lith__dq_put_u64(&b, 1);
        lith__dq_put_text(&b, "x");
      }
      lith__dq_put_u64(&b, 2067);
      lith__dq_put_text(&b, msg);
      lith__dq_req_end(&b);
      body = b.data + 8;
      n = b.len - 8;
      assert_int_equal(lith__dq_decode_failure_tail(body, n, &code, &s), LITH_DQ_OK);
      assert_int_equal(code, 2067);
      assert_string_equal(s, msg);
      if (!prefix) {
        assert_int_equal(lith__dq_decode_failure(body, n, &code2, &s2), LITH_DQ_OK);
        assert_int_equal(code2, code);
        assert_string_equal(s2, s);
      }
    }
  }
  /* Refused: short, not whole words, no NUL at the end, a message not on a
   * word boundary. */
  const uint8_t nonul[16] = {1, 0, 0, 0, 0, 0, 0, 0, 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'};
  assert_int_equal(lith__dq_decode_failure_tail(nonul, 16, &code, &s), LITH_DQ_PROTO);
  assert_int_equal(lith__dq_decode_failure_tail(nonul, 8, &code, &s), LITH_DQ_PROTO);
  const uint8_t odd[24] = {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 'a', 'b', 0, 0, 0, 0};
  assert_int_equal(lith__dq_decode_failure_tail(odd, 20, &code, &s), LITH_DQ_PROTO);
  assert_int_equal(lith__dq_decode_failure_tail(odd, 16, &code, &s), LITH_DQ_PROTO);
  const uint8_t high[16] = {1, 0, 0, 0, 0, 0, 0, 1, 'a', 'b', 0, 0, 0, 0, 0, 0}; /* code >= 2^56 */
  assert_int_equal(lith__dq_decode_failure_tail(high, 16, &code, &s), LITH_DQ_PROTO);
  lith__dq_buf_free(&b);
}

/* A SERVERS body: n entries "id, address[, role]". */
static void servers_body(lith__dq_buf *b, int format, int n) {
  lith__dq_buf_reset(b);
  lith__dq_put_u64(b, (uint64_t)n);
  for (int i = 1; i <= n; i++) {
    char addr[32];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", 9000 + i);
    lith__dq_put_u64(b, (uint64_t)i);
    lith__dq_put_text(b, addr);
    if (format == 1)
      lith__dq_put_u64(b, i == 3 ? LITH_DQ_STANDBY : LITH_DQ_VOTER);
  }
}

static void test_servers(void **state) {
  (void)state;
  lith__dq_buf b;
  lith__dq_servers s;
  lith__dq_buf_init(&b);
  for (int format = 0; format <= 1; format++) {
    servers_body(&b, format, 3);
    assert_int_equal(lith__dq_decode_servers(b.data, b.len, (uint64_t)format, &s), LITH_DQ_OK);
    assert_int_equal(s.n, 3);
    assert_int_equal(s.v[1].id, 2);
    assert_string_equal(s.v[2].address, "127.0.0.1:9003");
    assert_int_equal(s.v[2].role, format == 1 ? LITH_DQ_STANDBY : LITH_DQ_VOTER);
    free(s.v);
    for (size_t n = 0; n < b.len; n++) {
      assert_int_equal(lith__dq_decode_servers(b.data, n, (uint64_t)format, &s), LITH_DQ_PROTO);
      assert_null(s.v);
    }
  }
  /* A count the body cannot hold is refused before any allocation. */
  lith__dq_buf_reset(&b);
  lith__dq_put_u64(&b, UINT64_MAX / 2);
  lith__dq_put_u64(&b, 1);
  lith__dq_put_text(&b, "x");
  assert_int_equal(lith__dq_decode_servers(b.data, b.len, 0, &s), LITH_DQ_PROTO);
  lith__dq_buf_free(&b);
}

/* The nibble header of a row of types t[0..n). */
static void put_row_header(lith__dq_buf *b, const int *t, int n) {
  uint8_t h[64] = {0};
  for (int i = 0; i < n; i++)
    h[i / 2] |= (uint8_t)(i % 2 == 0 ? t[i] : t[i] << 4);
  size_t len = (((size_t)n + 1) / 2 + 7) / 8 * 8;
  for (size_t i = 0; i < len; i += 8)
    lith__dq_put_u64(b, rd64(h + i));
}

static uint8_t *copy(const lith__dq_buf *b) {
  uint8_t *p = malloc(b->len ? b->len : 1);
  memcpy(p, b->data, b->len);
  return p;
}

/* id, f, t, b, n, d (a DATETIME column: ISO8601), flag (BOOLEAN). */
static void all_types_body(lith__dq_buf *b, uint64_t end) {
  static const int types[7] = {LITH_DQ_INTEGER, LITH_DQ_FLOAT,   LITH_DQ_TEXT,   LITH_DQ_BLOB,
                               LITH_DQ_NULL,    LITH_DQ_ISO8601, LITH_DQ_BOOLEAN};
  static const char *const names[7] = {"id", "f", "t", "b", "n", "d", "flag"};
  lith__dq_buf_reset(b);
  lith__dq_put_u64(b, 7);
  for (int i = 0; i < 7; i++)
    lith__dq_put_text(b, names[i]);
  for (int r = 0; r < 2; r++) {
    put_row_header(b, types, 7);
    lith__dq_put_u64(b, (uint64_t)(r - 5));
    double f = 0.25 * r;
    uint64_t u;
    memcpy(&u, &f, 8);
    lith__dq_put_u64(b, u);
    lith__dq_put_text(b, r ? "second row" : "");
    lith__dq_put_u64(b, 9);
    lith__dq_put_u64(b, rd64((const uint8_t *)"\x01\x02\x00\x03\x04\x05\x06\x07"));
    lith__dq_put_u64(b, 8); /* the ninth byte, 0x08, and the padding */
    lith__dq_put_u64(b, 0);
    lith__dq_put_text(b, "2026-12-01 19:00:00");
    lith__dq_put_u64(b, 1);
  }
  lith__dq_put_u64(b, end);
}

static void test_rows(void **state) {
  (void)state;
  lith__dq_buf b;
  lith__dq_rows r;
  int done = -1;
  lith__dq_buf_init(&b);
  lith__dq_rows_init(&r);

  all_types_body(&b, LITH_DQ_ROWS_DONE);
  assert_int_equal(lith__dq_rows_decode(&r, copy(&b), b.len, &done), LITH_DQ_OK);
  assert_int_equal(done, 1);
  assert_int_equal(r.ncols, 7);
  assert_string_equal(r.names[6], "flag");
  assert_int_equal(r.nrows, 2);
  assert_int_equal(lith__dq_rows_at(&r, 0, 0)->i, -5);
  assert_true(lith__dq_rows_at(&r, 1, 1)->f == 0.25);
  assert_string_equal(lith__dq_rows_at(&r, 1, 2)->p, "second row");
  assert_int_equal(lith__dq_rows_at(&r, 0, 2)->n, 0);
  const lith__dq_value *bl = lith__dq_rows_at(&r, 0, 3);
  assert_int_equal(bl->type, LITH_DQ_BLOB);
  assert_int_equal(bl->n, 9);
  assert_memory_equal(bl->p, "\x01\x02\x00\x03\x04\x05\x06\x07\x08", 9);
  assert_int_equal(lith__dq_rows_at(&r, 0, 4)->type, LITH_DQ_NULL);
  assert_int_equal(lith__dq_rows_at(&r, 0, 5)->type, LITH_DQ_ISO8601);
  assert_string_equal(lith__dq_rows_at(&r, 0, 5)->p, "2026-12-01 19:00:00");
  assert_int_equal(lith__dq_rows_at(&r, 1, 6)->i, 1);
  assert_null(lith__dq_rows_at(&r, 2, 0));
  assert_null(lith__dq_rows_at(&r, 0, 7));

  /* Every truncation is refused and leaves r as it was. */
  lith__dq_rows_free(&r);
  for (size_t n = 0; n < b.len; n++) {
    assert_int_equal(lith__dq_rows_decode(&r, copy(&b), n, &done), LITH_DQ_PROTO);
    assert_int_equal(r.nrows, 0);
    assert_int_equal(r.ncols, 0);
    assert_int_equal(r.nbodies, 0);
  }

  /* PART then DONE: one set of four rows; names from the first. */
  all_types_body(&b, LITH_DQ_ROWS_PART);
  assert_int_equal(lith__dq_rows_decode(&r, copy(&b), b.len, &done), LITH_DQ_OK);
  assert_int_equal(done, 0);
  all_types_body(&b, LITH_DQ_ROWS_DONE);
  assert_int_equal(lith__dq_rows_decode(&r, copy(&b), b.len, &done), LITH_DQ_OK);
  assert_int_equal(done, 1);
  assert_int_equal(r.nrows, 4);
  assert_int_equal(lith__dq_rows_at(&r, 3, 0)->i, -4);
  assert_string_equal(r.names[0], "id");

  /* A later part with another column count. */
  lith__dq_buf_reset(&b);
  lith__dq_put_u64(&b, 1);
  lith__dq_put_text(&b, "x");
  lith__dq_put_u64(&b, LITH_DQ_ROWS_DONE);
  assert_int_equal(lith__dq_rows_decode(&r, copy(&b), b.len, &done), LITH_DQ_PROTO);
  assert_int_equal(r.nrows, 4);
  lith__dq_rows_free(&r);

  /* 17 columns: a two-word header. */
  int t17[17];
  lith__dq_buf_reset(&b);
  lith__dq_put_u64(&b, 17);
  for (int i = 0; i < 17; i++) {
    char name[8];
    snprintf(name, sizeof name, "c%d", i);
    lith__dq_put_text(&b, name);
    t17[i] = LITH_DQ_INTEGER;
  }
  put_row_header(&b, t17, 17);
  for (int i = 0; i < 17; i++)
    lith__dq_put_u64(&b, (uint64_t)i * 10);
  lith__dq_put_u64(&b, LITH_DQ_ROWS_DONE);
  assert_int_equal(lith__dq_rows_decode(&r, copy(&b), b.len, &done), LITH_DQ_OK);
  assert_int_equal(r.nrows, 1);
  assert_int_equal(lith__dq_rows_at(&r, 0, 16)->i, 160);
  lith__dq_rows_free(&r);

  /* A type nibble that is no type; zero columns; a column count beyond the
   * body; a blob longer than the body. */
  static const int badt[1] = {7};
  lith__dq_buf_reset(&b);
  lith__dq_put_u64(&b, 1);
  lith__dq_put_text(&b, "x");
  put_row_header(&b, badt, 1);
  lith__dq_put_u64(&b, 0);
  lith__dq_put_u64(&b, LITH_DQ_ROWS_DONE);
  assert_int_equal(lith__dq_rows_decode(&r, copy(&b), b.len, &done), LITH_DQ_PROTO);
  lith__dq_buf_reset(&b);
  lith__dq_put_u64(&b, 0);
  lith__dq_put_u64(&b, LITH_DQ_ROWS_DONE);
  assert_int_equal(lith__dq_rows_decode(&r, copy(&b), b.len, &done), LITH_DQ_PROTO);
  lith__dq_buf_reset(&b);
  lith__dq_put_u64(&b, 1u << 30);
  lith__dq_put_u64(&b, LITH_DQ_ROWS_DONE);
  assert_int_equal(lith__dq_rows_decode(&r, copy(&b), b.len, &done), LITH_DQ_PROTO);
  static const int blobt[1] = {LITH_DQ_BLOB};
  lith__dq_buf_reset(&b);
  lith__dq_put_u64(&b, 1);
  lith__dq_put_text(&b, "x");
  put_row_header(&b, blobt, 1);
  lith__dq_put_u64(&b, UINT64_MAX - 3);
  lith__dq_put_u64(&b, LITH_DQ_ROWS_DONE);
  assert_int_equal(lith__dq_rows_decode(&r, copy(&b), b.len, &done), LITH_DQ_PROTO);
  assert_int_equal(r.nrows, 0);
  lith__dq_rows_free(&r);
  lith__dq_buf_free(&b);
}

/* ---- FILES ---- */

/* A FILES body: count, then per file name, size, data padded. */
static size_t files_body(uint8_t *out, uint64_t count, int nfiles, const char *const *names,
                         const char *const *datas) {
  size_t n = 0;
  memset(out, 0, 4096);
  for (int i = 0; i < 8; i++)
    out[n++] = (uint8_t)(count >> (8 * i));
  for (int f = 0; f < nfiles; f++) {
    size_t ln = strlen(names[f]), ld = strlen(datas[f]);
    memcpy(out + n, names[f], ln);
    n += (ln + 8) & ~(size_t)7;
    for (int i = 0; i < 8; i++)
      out[n++] = (uint8_t)((uint64_t)ld >> (8 * i));
    memcpy(out + n, datas[f], ld);
    n += (ld + 7) & ~(size_t)7;
  }
  return n;
}

typedef struct got_files {
  int rc, done, nfiles;
  char names[4][LITH_DQ_FILE_NAME_MAX];
  uint64_t sizes[4];
  char data[4][256];
  size_t ndata[4];
  uint64_t trailing;
} got_files;

/* Decode body[0..n) announced as `announced` bytes, fed `piece` bytes at a
 * time; every event checked against what came before it. */
static void decode_files(const uint8_t *body, size_t n, uint64_t announced, size_t piece, got_files *g) {
  lith__dq_files f;
  size_t off = 0;
  memset(g, 0, sizeof *g);
  lith__dq_files_init(&f, announced);
  for (;;) {
    size_t k = n - off < piece ? n - off : piece, used, len;
    const uint8_t *data;
    int ev;
    /* A copy of exactly the piece: ASan sees a read past it. */
    uint8_t *chunk = malloc(k ? k : 1);
    memcpy(chunk, body + off, k);
    g->rc = lith__dq_files_next(&f, chunk, k, &used, &ev, &data, &len);
    assert_true(used <= k);
    if (g->rc == LITH_DQ_OK && ev == LITH_DQ_FILES_DATA) {
      assert_true(len > 0 && data >= chunk && data + len <= chunk + used);
      assert_true(f.index < (uint64_t)g->nfiles && g->ndata[f.index] + len <= f.size);
      memcpy(g->data[f.index] + g->ndata[f.index], data, len);
      g->ndata[f.index] += len;
    }
    free(chunk);
    off += used;
    if (g->rc != LITH_DQ_OK)
      return;
    if (ev == LITH_DQ_FILES_BEGIN) {
      assert_int_equal(f.index, g->nfiles);
      assert_true(f.size < 256);
      snprintf(g->names[g->nfiles], sizeof g->names[0], "%s", f.name);
      g->sizes[g->nfiles++] = f.size;
    } else if (ev == LITH_DQ_FILES_END) {
      assert_int_equal(g->ndata[f.index], g->sizes[f.index]);
    } else if (ev == LITH_DQ_FILES_DONE) {
      assert_int_equal(g->nfiles, f.count);
      g->done = 1;
      g->trailing = f.left;
      return;
    } else if (ev == LITH_DQ_FILES_NEED) {
      assert_int_equal(used, k);
      if (off == n) {
        g->rc = -1; /* no more bytes: truncated */
        return;
      }
    }
  }
}

static void test_files(void **state) {
  (void)state;
  uint8_t body[4096], bad[4096];
  got_files g, g2;
  const char *names[] = {"db", "db-wal"}, *datas[] = {"12345678abcdefgh", "xyz"};
  size_t n = files_body(body, 2, 2, names, datas);

  /* DUMP's request: type 15, the name as a text. */
  lith__dq_buf b;
  lith__dq_buf_init(&b);
  assert_int_equal(lith__dq_req_dump(&b, "main"), LITH_DQ_OK);
  assert_int_equal(b.len, 16);
  assert_int_equal(b.data[0], 1);
  assert_int_equal(b.data[4], LITH_DQ_REQ_DUMP);
  assert_memory_equal(b.data + 8, "main\0\0\0\0", 8);
  lith__dq_buf_free(&b);

  /* Whole, and in pieces: the same. */
  size_t pieces[] = {n, 1, 5, 8, 3};
  for (size_t p = 0; p < sizeof pieces / sizeof pieces[0]; p++) {
    decode_files(body, n, n, pieces[p], &g);
    assert_int_equal(g.rc, LITH_DQ_OK);
    assert_true(g.done);
    assert_int_equal(g.nfiles, 2);
    assert_string_equal(g.names[0], "db");
    assert_string_equal(g.names[1], "db-wal");
    assert_int_equal(g.sizes[0], 16);
    assert_int_equal(g.sizes[1], 3);
    assert_memory_equal(g.data[0], "12345678abcdefgh", 16);
    assert_memory_equal(g.data[1], "xyz", 3);
    assert_int_equal(g.trailing, 0);
  }
  /* A later schema's word after the files: DONE, 8 bytes left over. */
  decode_files(body, n + 8, n + 8, 7, &g);
  assert_true(g.rc == LITH_DQ_OK && g.done && g.trailing == 8);
  /* No files at all: DONE at once. */
  const char *none[] = {NULL};
  size_t n0 = files_body(bad, 0, 0, none, none);
  decode_files(bad, n0, n0, 3, &g);
  assert_true(g.rc == LITH_DQ_OK && g.done && g.nfiles == 0);

  /* Every truncation (the header saying so, or the bytes not coming). */
  for (size_t k = 0; k < n; k++) {
    decode_files(body, k, k, 3, &g);
    assert_int_equal(g.rc, LITH_DQ_PROTO);
    decode_files(body, k, n, 3, &g2);
    assert_int_equal(g2.rc, -1);
  }
  /* A count the body cannot hold (two words a file at least). */
  memcpy(bad, body, n);
  bad[0] = 5;
  decode_files(bad, n, n, n, &g);
  assert_int_equal(g.rc, LITH_DQ_PROTO);
  assert_int_equal(g.nfiles, 0);
  decode_files(bad, 8, n, 8, &g); /* refused from the count word alone */
  assert_int_equal(g.rc, LITH_DQ_PROTO);
  /* A size past the body: refused before a byte of it is handed out. */
  memcpy(bad, body, n);
  bad[16] = 200;
  decode_files(bad, n, n, 1, &g);
  assert_int_equal(g.rc, LITH_DQ_PROTO);
  assert_int_equal(g.ndata[0], 0);
  /* Near 2^64 (its padding would wrap). */
  memcpy(bad, body, n);
  memset(bad + 16, 0xff, 8);
  decode_files(bad, n, n, n, &g);
  assert_int_equal(g.rc, LITH_DQ_PROTO);
  /* The first file fits, but then the second cannot: refused at the first's size. */
  memcpy(bad, body, n);
  bad[16] = 32; /* leaves 8 bytes: the second file needs 16 at least */
  decode_files(bad, n, n, 1, &g);
  assert_int_equal(g.rc, LITH_DQ_PROTO);
  assert_int_equal(g.ndata[0], 0);
  /* A name with no NUL within LITH_DQ_FILE_NAME_MAX. */
  {
    static uint8_t big[LITH_DQ_FILE_NAME_MAX + 64];
    memset(big, 0, sizeof big);
    big[0] = 1;
    memset(big + 8, 'a', LITH_DQ_FILE_NAME_MAX);
    decode_files(big, sizeof big, sizeof big, 100, &g);
    assert_int_equal(g.rc, LITH_DQ_PROTO);
    decode_files(big, 8 + LITH_DQ_FILE_NAME_MAX, sizeof big, 100, &g); /* at its bound, not later */
    assert_int_equal(g.rc, LITH_DQ_PROTO);
    /* One byte shorter, with its NUL: a name. */
    big[8 + LITH_DQ_FILE_NAME_MAX - 1] = 0;
    decode_files(big, sizeof big, sizeof big, 100, &g);
    assert_int_equal(g.rc, LITH_DQ_OK);
    assert_int_equal(strlen(g.names[0]), LITH_DQ_FILE_NAME_MAX - 1);
  }
  /* A name that runs past the body. */
  memcpy(bad, body, 8);
  memcpy(bad + 8, "abcdefgh", 8);
  decode_files(bad, 16, 16, 16, &g);
  assert_int_equal(g.rc, LITH_DQ_PROTO);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_request_layout),  cmocka_unit_test(test_header),
      cmocka_unit_test(test_fixed_responses), cmocka_unit_test(test_failure_tail),
      cmocka_unit_test(test_servers),         cmocka_unit_test(test_rows),
      cmocka_unit_test(test_files),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
