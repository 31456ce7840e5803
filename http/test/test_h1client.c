/*
 * Tests of http/h1client.c: reading HTTP/1.1 answers. Canned bytes come
 * from a source that cuts them where the test says (every cut must give the
 * same answer) or through a socket pair; no server.
 *
 * The lith CLI's test (tools/lith/test) checks the same reader through
 * lithc_response_read; here are the framing rules one by one, the limits,
 * keep-alive (bytes after an answer stay for the next), the in-place head
 * parser the benchmarks use, and the deadline on a blocking socket.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "h1client.h"

/* ---- a canned source ------------------------------------------------------ */

/* text[0..n) in reads of `piece` bytes (0: as many as asked), then the end
 * of the stream, or ECONNRESET when `reset`. */
struct canned {
  const char *text;
  size_t n, off, piece;
  int reset;
};

static ssize_t canned_read(void *ctx, char *buf, size_t n) {
  struct canned *c = ctx;
  size_t k = c->n - c->off;
  if (k == 0) {
    if (c->reset) {
      errno = ECONNRESET;
      return -1;
    }
    return 0;
  }
  if (c->piece > 0 && k > c->piece)
    k = c->piece;
  if (k > n)
    k = n;
  memcpy(buf, c->text + c->off, k);
  c->off += k;
  return (ssize_t)k;
}

/* Read text (cut into pieces of `piece`) as the answer to `method`: the
 * code; err holds the message. */
static int read_text(const char *text, size_t len, size_t piece, const char *method, h1c_response *r,
                     char *err, size_t errsz) {
  struct canned c = {text, len, 0, piece, 0};
  h1c_conn k;
  int rc;
  h1c_init_source(&k, canned_read, &c, "srv", err, errsz);
  rc = h1c_read(&k, method, r);
  h1c_release(&k);
  return rc;
}

static int read_str(const char *text, size_t piece, h1c_response *r, char *err, size_t errsz) {
  return read_text(text, strlen(text), piece, "GET", r, err, errsz);
}

/* text must fail with `code` and a message holding `want`, whatever the
 * cuts, and leave the response empty. */
static void expect_error(const char *text, int code, const char *want) {
  char err[256];
  h1c_response r;
  for (size_t piece = 0; piece <= 5; piece++) {
    err[0] = '\0';
    int rc = read_str(text, piece, &r, err, sizeof err);
    if (rc != code || strstr(err, want) == NULL)
      print_error("piece %zu: %d %s\n", piece, rc, err);
    assert_int_equal(rc, code);
    assert_non_null(strstr(err, want));
    assert_null(r.head);
    assert_null(r.body);
  }
}

/* ---- framing ---------------------------------------------------------------- */

static void test_content_length_any_cuts(void **state) {
  static const char text[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A:  v \r\n\r\nhello";
  char err[256];
  h1c_response r;
  size_t len = 0;
  (void)state;
  for (size_t piece = 0; piece <= 9; piece++) {
    assert_int_equal(read_str(text, piece, &r, err, sizeof err), H1C_OK);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, 5);
    assert_string_equal(r.body, "hello");
    assert_int_equal(r.n_headers, 2);
    const char *v = h1c_response_header(&r, "x-a", &len);
    assert_non_null(v);
    assert_int_equal(len, 1); /* blanks around a value dropped */
    assert_true(v[0] == 'v');
    assert_null(h1c_response_header(&r, "x-b", NULL));
    assert_int_equal(strncmp(r.head, "HTTP/1.1 200 OK\r\n", 17), 0);
    assert_int_equal(strlen(r.head), sizeof text - 1 - 5); /* the head through its empty line */
    h1c_response_free(&r);
    h1c_response_free(&r); /* twice is fine */
  }
}

static void test_chunked_and_interim(void **state) {
  static const char text[] = "HTTP/1.1 100 Continue\r\n\r\n"
                             "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                             "5;x=1\r\nhello\r\nA\r\n, world!!!\r\n0\r\nT: 1\r\n\r\n";
  char err[256];
  h1c_response r;
  (void)state;
  for (size_t piece = 0; piece <= 7; piece++) {
    assert_int_equal(read_str(text, piece, &r, err, sizeof err), H1C_OK);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, 15);
    assert_string_equal(r.body, "hello, world!!!");
    h1c_response_free(&r);
  }
  /* bare LFs are lines too */
  assert_int_equal(
      read_str("HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n2\nok\n0\n\n", 1, &r, err, sizeof err),
      H1C_OK);
  assert_string_equal(r.body, "ok");
  h1c_response_free(&r);
}

static void test_no_body_and_to_the_end(void **state) {
  char err[256];
  h1c_response r;
  (void)state;
  /* HEAD, 204, 304: no body whatever the head says */
  assert_int_equal(
      read_text("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", 38, 0, "HEAD", &r, err, sizeof err), H1C_OK);
  assert_int_equal(r.body_len, 0);
  assert_non_null(r.body);
  h1c_response_free(&r);
  assert_int_equal(read_str("HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n", 0, &r, err, sizeof err),
                   H1C_OK);
  assert_int_equal(r.status, 204);
  assert_int_equal(r.body_len, 0);
  h1c_response_free(&r);
  /* no length: up to the end of the connection; HTTP/1.0 too */
  assert_int_equal(read_str("HTTP/1.0 200 OK\r\n\r\nto the end", 3, &r, err, sizeof err), H1C_OK);
  assert_string_equal(r.body, "to the end");
  h1c_response_free(&r);
  /* a body holding a NUL keeps its length */
  assert_int_equal(
      read_text("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\na\0b", 41, 2, "GET", &r, err, sizeof err),
      H1C_OK);
  assert_int_equal(r.body_len, 3);
  assert_memory_equal(r.body, "a\0b", 3);
  h1c_response_free(&r);
}

static void test_bad_framing(void **state) {
  (void)state;
  expect_error("", H1C_IO, "srv closed the connection without answering");
  expect_error("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort", H1C_IO,
               "srv closed the connection before the whole answer arrived");
  expect_error("HTTP/1.1 200 OK\r\nContent-Le", H1C_IO, "before the whole answer arrived");
  expect_error("SSH-2.0-OpenSSH\r\n\r\n", H1C_PROTOCOL, "srv did not answer in HTTP/1.x: no status line");
  expect_error("HTTP/1.1 20 OK\r\n\r\n", H1C_PROTOCOL, "no status line");
  expect_error("HTTP/1.1 099 Low\r\n\r\n", H1C_PROTOCOL, "status below 100");
  expect_error("HTTP/1.1 101 Switching Protocols\r\n\r\n", H1C_PROTOCOL, "101 Switching Protocols");
  expect_error("HTTP/1.1 200 OK\r\n folded\r\n\r\n", H1C_PROTOCOL, "folded header line");
  expect_error("HTTP/1.1 200 OK\r\nno colon\r\n\r\n", H1C_PROTOCOL, "header line without a name");
  expect_error("HTTP/1.1 200 OK\r\n: v\r\n\r\n", H1C_PROTOCOL, "header line without a name");
  expect_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", H1C_PROTOCOL,
               "unsupported Transfer-Encoding");
  expect_error("HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n", H1C_PROTOCOL, "empty Content-Length");
  expect_error("HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n", H1C_PROTOCOL, "bad Content-Length");
  expect_error("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", H1C_PROTOCOL,
               "two different Content-Length headers");
  expect_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", H1C_PROTOCOL, "bad chunk size");
  expect_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokX\r\n0\r\n\r\n", H1C_PROTOCOL,
               "no line end after a chunk");
  expect_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", H1C_IO,
               "before the whole answer arrived");
  /* the same length twice is one length */
  char err[256];
  h1c_response r;
  assert_int_equal(
      read_str("HTTP/1.1 200 OK\r\nContent-Length: 2\r\ncontent-length: 2\r\n\r\nok", 0, &r, err, sizeof err),
      H1C_OK);
  assert_string_equal(r.body, "ok");
  h1c_response_free(&r);
  /* a NUL in the head */
  assert_int_equal(read_text("HTTP/1.1 200 OK\r\nX: a\0b\r\n\r\n", 27, 0, "GET", &r, err, sizeof err),
                   H1C_PROTOCOL);
  assert_non_null(strstr(err, "a NUL byte in the headers"));
}

static void test_limits(void **state) {
  char err[256];
  h1c_response r;
  (void)state;
  /* a head over H1C_MAX_HEADERS, with or without its end */
  size_t n = H1C_MAX_HEADERS + 100;
  char *big = malloc(n + 8);
  assert_non_null(big);
  memcpy(big, "HTTP/1.1 200 OK\r\nX: ", 20);
  memset(big + 20, 'a', n - 20);
  assert_int_equal(read_text(big, n, 0, "GET", &r, err, sizeof err), H1C_PROTOCOL);
  assert_non_null(strstr(err, "the headers are too large"));
  memcpy(big + n, "\r\n\r\n", 4);
  assert_int_equal(read_text(big, n + 4, 4096, "GET", &r, err, sizeof err), H1C_PROTOCOL);
  assert_non_null(strstr(err, "the headers are too large"));
  free(big);
  /* a Content-Length over H1C_MAX_ANSWER, and one that would overflow */
  assert_int_equal(read_str("HTTP/1.1 200 OK\r\nContent-Length: 2000000000\r\n\r\n", 0, &r, err, sizeof err),
                   H1C_PROTOCOL);
  assert_non_null(strstr(err, "the answer of srv is larger than"));
  assert_int_equal(
      read_str("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n", 0, &r, err, sizeof err),
      H1C_PROTOCOL);
  assert_non_null(strstr(err, "bad Content-Length"));
  /* a chunk size line longer than the reader takes */
  char line[5000];
  int k = snprintf(line, sizeof line, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;");
  memset(line + k, 'e', sizeof line - (size_t)k - 3);
  memcpy(line + sizeof line - 3, "\r\n", 3);
  assert_int_equal(read_str(line, 0, &r, err, sizeof err), H1C_PROTOCOL);
  assert_non_null(strstr(err, "sent a line longer than"));
}

/* ---- the connection ------------------------------------------------------------ */

/* Two answers in one stream: the second is read from what the first left. */
static void test_keep_alive(void **state) {
  static const char text[] = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\none"
                             "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                             "3\r\ntwo\r\n0\r\n\r\n";
  char err[256];
  (void)state;
  for (size_t piece = 0; piece <= 6; piece++) {
    struct canned c = {text, sizeof text - 1, 0, piece, 0};
    h1c_conn k;
    h1c_response r;
    size_t len = 0;
    h1c_init_source(&k, canned_read, &c, "srv", err, sizeof err);
    assert_int_equal(h1c_read(&k, "GET", &r), H1C_OK);
    assert_string_equal(r.body, "one");
    assert_null(h1c_response_header(&r, "connection", NULL));
    h1c_response_free(&r);
    assert_int_equal(h1c_read(&k, "GET", &r), H1C_OK);
    assert_string_equal(r.body, "two");
    assert_non_null(h1c_response_header(&r, "Connection", &len));
    assert_int_equal(len, 5);
    h1c_response_free(&r);
    assert_int_equal(h1c_pending(&k), 0);
    assert_int_equal(h1c_read_eof(&k), H1C_OK);
    h1c_release(&k);
  }
  /* bytes after an answer the server said it would close */
  static const char junk[] = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n1junk";
  struct canned c = {junk, sizeof junk - 1, 0, 0, 0};
  h1c_conn k;
  h1c_response r;
  h1c_init_source(&k, canned_read, &c, "srv", err, sizeof err);
  assert_int_equal(h1c_read(&k, "GET", &r), H1C_OK);
  h1c_response_free(&r);
  assert_int_equal(h1c_pending(&k), 4);
  assert_int_equal(h1c_read_eof(&k), H1C_PROTOCOL);
  assert_non_null(strstr(err, "srv sent 4 bytes after its answer"));
  h1c_release(&k);
  /* a reset ends an answer framed by the end of the connection */
  struct canned cr = {"HTTP/1.1 200 OK\r\n\r\nto the end", 29, 0, 3, 1};
  h1c_init_source(&k, canned_read, &cr, "srv", err, sizeof err);
  k.sent = 1;
  assert_int_equal(h1c_read(&k, "GET", &r), H1C_IO);
  assert_non_null(strstr(err, "reading the answer of srv: "));
  assert_non_null(strstr(err, "whether it ran is unknown"));
  h1c_release(&k);
}

/* A blocking socket that never answers: the deadline still holds. */
static void test_deadline_on_blocking_socket(void **state) {
  int sv[2];
  char err[256];
  h1c_conn k;
  h1c_response r;
  struct timespec t0, t1;
  (void)state;
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  assert_int_equal(send(sv[1], "HTTP/1.1 200 OK\r\n", 17, 0), 17);
  h1c_init(&k, sv[0], NULL, err, sizeof err);
  h1c_deadline(&k, 200);
  k.sent = 1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  assert_int_equal(h1c_read(&k, "GET", &r), H1C_TIMEOUT);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  assert_non_null(strstr(err, "no answer from the server within 0.2 s"));
  int64_t ms = (int64_t)(t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
  assert_true(ms >= 150 && ms < 5000);
  h1c_release(&k);
  /* the rest arrives: a new deadline, the answer */
  assert_int_equal(send(sv[1], "Content-Length: 2\r\n\r\nok", 23, 0), 23);
  h1c_init(&k, sv[0], NULL, err, sizeof err);
  h1c_deadline(&k, 5000);
  assert_int_equal(h1c_read(&k, "GET", &r), H1C_PROTOCOL); /* its status line was dropped */
  h1c_release(&k);
  close(sv[0]);
  close(sv[1]);
}

/* ---- the in-place parser ------------------------------------------------------- */

static void test_parse_head(void **state) {
  static const char text[] = "HTTP/1.1 503 Busy\r\nContent-Length: 7\r\nConnection: close\r\n"
                             "Retry-After: 1\r\n\r\nqueued!";
  h1c_head h;
  h1c_header hdrs[4];
  const char *why;
  size_t head = sizeof text - 1 - 7;
  (void)state;
  for (size_t len = 0; len < head; len++)
    assert_int_equal(h1c_parse_head(text, len, NULL, &h, NULL, 0, &why), H1C_MORE);
  assert_int_equal(h1c_parse_head(text, head, NULL, &h, hdrs, 4, &why), H1C_OK);
  assert_int_equal(h.status, 503);
  assert_int_equal(h.head_len, head);
  assert_int_equal(h.n_lines, 5);
  assert_int_equal(h.n_headers, 3);
  assert_int_equal(h.body, H1C_BODY_LENGTH);
  assert_int_equal(h.length, 7);
  assert_int_equal(h.closes, 1);
  assert_int_equal(hdrs[2].name_len, 11);
  assert_memory_equal(hdrs[2].value, "1", 1);
  /* for HEAD, no body; chunked; neither */
  assert_int_equal(h1c_parse_head(text, sizeof text - 1, "HEAD", &h, NULL, 0, &why), H1C_OK);
  assert_int_equal(h.body, H1C_BODY_NONE);
  assert_int_equal(h.length, 0);
  static const char both[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n";
  assert_int_equal(h1c_parse_head(both, sizeof both - 1, NULL, &h, NULL, 0, &why), H1C_OK);
  assert_int_equal(h.body, H1C_BODY_CHUNKED); /* chunked wins over a length */
  assert_int_equal(h1c_parse_head("HTTP/1.1 200 OK\r\n\r\n", 19, NULL, &h, NULL, 0, &why), H1C_OK);
  assert_int_equal(h.body, H1C_BODY_EOF);
  assert_int_equal(h.closes, 0);
  static const char huge[] = "HTTP/1.1 200 OK\r\nContent-Length: 3000000000\r\n\r\n";
  assert_int_equal(h1c_parse_head(huge, sizeof huge - 1, NULL, &h, NULL, 0, &why), H1C_TOO_LARGE);
  assert_int_equal(h1c_parse_head("HTTP/1.1 OK\r\n\r\n", 15, NULL, &h, NULL, 0, &why), H1C_PROTOCOL);
  assert_string_equal(why, "no status line");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_content_length_any_cuts),
      cmocka_unit_test(test_chunked_and_interim),
      cmocka_unit_test(test_no_body_and_to_the_end),
      cmocka_unit_test(test_bad_framing),
      cmocka_unit_test(test_limits),
      cmocka_unit_test(test_keep_alive),
      cmocka_unit_test(test_deadline_on_blocking_socket),
      cmocka_unit_test(test_parse_head),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
