/*
 * Tests of http/guard.c: a request whose body length two readers could take
 * differently (two Content-Length, Content-Length with Transfer-Encoding, odd
 * header lines) is answered 400 and its connection closed, and what follows
 * never runs as a request.
 *
 * The server runs on a loop thread of its own and the client writes raw
 * HTTP on plain sockets (helper.h).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "helper.h"

/* ---- ambiguous framing (issue 10, item 6) ------------------------------------- */

/* What a proxy in front might take for the rest of a body and we for a next
 * request: it must never run (hello_runs stays 0). */
#define SMUGGLED "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n"

/* Read until the server closes fd (EOF or reset) within 3 s, keeping what
 * comes; 1 if it closed. */
static int read_to_close(rbuf *b) {
  struct pollfd p = {.fd = b->fd, .events = POLLIN};
  int64_t end = now_ms() + 3000;
  while (now_ms() < end) {
    if (poll(&p, 1, 100) <= 0)
      continue;
    if (b->len == sizeof b->data)
      return 0;
    ssize_t n = recv(b->fd, b->data + b->len, sizeof b->data - b->len, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN))
      return 1;
    if (n > 0)
      b->len += (size_t)n;
  }
  return 0;
}

/* `request` then SMUGGLED in one write: one 400 with Connection: close, its
 * JSON naming `why` (NULL: h2o's own 400, any body), then the connection
 * closes with nothing more sent, and no handler ran. */
static void expect_refused(fx *f, const char *request, const char *why) {
  resp *r = new_resp();
  rbuf *b = malloc(sizeof *b);
  char v[64];
  uint64_t before = count_of(f, 400);
  int fd = tcp_connect(f->port);
  rbuf_init(b, fd);
  send_str(fd, request);
  send_str(fd, SMUGGLED);
  assert_true(read_response(b, r));
  if (r->status != 400)
    fprintf(stderr, "not refused: %s\n-> %s%s\n", request, r->head, r->body);
  assert_int_equal(r->status, 400);
  assert_string_equal(resp_header(r, "connection", v, sizeof v), "close");
  if (why) {
    char want[256];
    snprintf(want, sizeof want, "{\"error\":{\"code\":\"bad_request\",\"message\":\"%s\"}}", why);
    assert_string_equal(r->body, want);
    assert_string_equal(resp_header(r, "content-type", v, sizeof v), "application/json");
  }
  assert_true(read_to_close(b));
  assert_int_equal(b->len, 0); /* no second answer */
  close(fd);
  free(b);
  free(r);
  /* h2o's plain-text 400 for a head it cannot parse is written without a
   * request, so nothing counts it */
  assert_true(count_of(f, 400) == before + 1 || (!why && count_of(f, 400) == before));
  assert_int_equal(atomic_load(&f->hello_runs), 0);
  assert_int_equal(atomic_load(&f->echo_runs), 0);
}

static void test_duplicate_content_length(void **state) {
  fx *f = *state;
  char req[512];
  /* equal values: RFC 9112 would let us merge them; refused all the same */
  expect_refused(f,
                 "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n"
                 "hello",
                 "more than one Content-Length");
  /* differing: h2o took the first, a proxy taking the last sees SMUGGLED as body */
  snprintf(req, sizeof req,
           "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\ncontent-length: %zu\r\n\r\nhello",
           5 + strlen(SMUGGLED));
  expect_refused(f, req, "more than one Content-Length");
  /* the other way round, and on a GET */
  expect_refused(f,
                 "GET /hello HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nX-A: b\r\n"
                 "Content-Length: 0\r\n\r\n",
                 "more than one Content-Length");
  /* not a number: h2o's own 400 */
  expect_refused(f, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5, 5\r\n\r\nhello", NULL);
}

static void test_content_length_with_transfer_encoding(void **state) {
  fx *f = *state;
  char req[512];
  /* h2o decodes the chunked body; a proxy trusting Content-Length reads on */
  snprintf(req, sizeof req,
           "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: %zu\r\n"
           "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
           5 + strlen(SMUGGLED));
  expect_refused(f, req, "Content-Length together with Transfer-Encoding");
  expect_refused(f,
                 "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
                 "Content-Length: 3\r\n\r\n0\r\n\r\n",
                 "Content-Length together with Transfer-Encoding");
}

static void test_transfer_encoding_variants(void **state) {
  fx *f = *state;
  /* codings h2o does not decode: its own 400 (our JSON shape) */
  expect_refused(f, "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n", NULL);
  expect_refused(f,
                 "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                 "0\r\n\r\n",
                 NULL);
  expect_refused(f,
                 "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"
                 "0\r\n\r\n",
                 NULL);
  expect_refused(f,
                 "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked \r\n\r\n"
                 "0\r\n\r\n",
                 NULL);
  /* two: h2o took the last one (chunked), a proxy may take the first */
  expect_refused(f,
                 "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                 "more than one Transfer-Encoding");
  expect_refused(f,
                 "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                 "more than one Transfer-Encoding");
  /* h2o compares without case; a proxy may not, and not decode it */
  expect_refused(f,
                 "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: Chunked\r\n\r\n"
                 "0\r\n\r\n",
                 "a Transfer-Encoding other than chunked");
  /* RFC 9112 6.1: faulty framing in HTTP/1.0 */
  expect_refused(f,
                 "POST /echo HTTP/1.0\r\nHost: t\r\nConnection: keep-alive\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                 "Transfer-Encoding in an HTTP/1.0 request");
}

static void test_header_line_tricks(void **state) {
  fx *f = *state;
  char req[512];
  /* obs-fold: a proxy joining the lines reads another length */
  snprintf(req, sizeof req, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n %zu\r\n\r\nhello",
           5 + strlen(SMUGGLED));
  expect_refused(f, req, "a header line is continued on the next (obs-fold)");
  expect_refused(f,
                 "POST /echo HTTP/1.1\r\nHost: t\r\nX-A: b\r\n\tTransfer-Encoding: chunked\r\n"
                 "Content-Length: 5\r\n\r\nhello",
                 "a header line is continued on the next (obs-fold)");
  /* whitespace before the colon: h2o's parser refuses it (plain text) */
  expect_refused(f, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length : 5\r\n\r\nhello", NULL);
  expect_refused(f,
                 "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding\t: chunked\r\n\r\n"
                 "0\r\n\r\n",
                 NULL);
  /* a bare LF ends a line for h2o, maybe not for a proxy */
  expect_refused(f, "POST /echo HTTP/1.1\r\nHost: t\nContent-Length: 5\r\n\r\nhello",
                 "a line of the request head ends in a bare LF");
  expect_refused(f, "GET /hello HTTP/1.1\nHost: t\r\n\r\n", "a line of the request head ends in a bare LF");
  /* and where h2o itself would answer (a request-target that is not a path) */
  expect_refused(f, "OPTIONS * HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n",
                 "more than one Content-Length");
}

/* Well-framed requests back to back still work, on one connection that
 * stays open: Content-Length, chunked, a CRLF a client put after a body
 * (h2o skips one), and a GET. */
static void test_pipelined_pair_still_works(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  char v[64];
  int fd = tcp_connect(f->port);
  rbuf *b = malloc(sizeof *b);
  rbuf_init(b, fd);
  send_str(fd, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nfirst"
               "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
               "6\r\nsecond\r\n0\r\n\r\n\r\n" SMUGGLED);
  assert_true(read_response(b, r));
  assert_int_equal(r->status, 200);
  assert_string_equal(r->body, "first");
  assert_string_equal(resp_header(r, "connection", v, sizeof v), "keep-alive");
  assert_true(read_response(b, r));
  assert_int_equal(r->status, 200);
  assert_string_equal(r->body, "second");
  assert_true(read_response(b, r));
  assert_int_equal(r->status, 200);
  assert_string_equal(r->body, "hello");
  send_str(fd, "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n"); /* still open */
  assert_true(read_response(b, r));
  assert_string_equal(r->body, "hello");
  close(fd);
  free(b);
  free(r);
  assert_int_equal(atomic_load(&f->echo_runs), 2);
  assert_int_equal(atomic_load(&f->hello_runs), 2);
  assert_int_equal(count_of(f, 400), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_duplicate_content_length, setup, teardown),
      cmocka_unit_test_setup_teardown(test_content_length_with_transfer_encoding, setup, teardown),
      cmocka_unit_test_setup_teardown(test_transfer_encoding_variants, setup, teardown),
      cmocka_unit_test_setup_teardown(test_header_line_tricks, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pipelined_pair_still_works, setup, teardown),
  };
  return HT_RUN(tests);
}
