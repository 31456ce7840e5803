/*
 * Tests of http/request.c: dispatch to a handler, reading a request (body,
 * query, headers, peer), whole responses, the 500 for a handler that forgot
 * to answer, the body limit, keep-alive, HEAD and pipelining, an answer given
 * later from the loop.
 *
 * The server runs on a loop thread of its own and the client writes raw
 * HTTP on plain sockets (helper.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
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

static void test_post_echo(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  char v[128];
  exchange(f->port,
           "POST /echo?a=1&b=two HTTP/1.1\r\nHost: t\r\nX-Test: yes\r\nContent-Length: 11\r\n\r\n"
           "hello world",
           r);
  assert_int_equal(r->status, 200);
  assert_int_equal(r->body_len, 11);
  assert_string_equal(r->body, "hello world");
  assert_string_equal(resp_header(r, "x-query", v, sizeof v), "a=1&b=two");
  assert_string_equal(resp_header(r, "x-test-was", v, sizeof v), "yes");
  assert_string_equal(resp_header(r, "x-loopback", v, sizeof v), "1");
  assert_true(!strncmp(resp_header(r, "x-peer", v, sizeof v), "127.0.0.1:", 10));
  assert_string_equal(resp_header_nth(r, "set-cookie", 0, v, sizeof v), "a=1");
  assert_string_equal(resp_header_nth(r, "set-cookie", 1, v, sizeof v), "b=2");
  /* a chunked request body arrives whole */
  exchange(f->port,
           "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
           "5\r\nabcde\r\n3\r\nfgh\r\n0\r\n\r\n",
           r);
  assert_int_equal(r->status, 200);
  assert_string_equal(r->body, "abcdefgh");
  /* a body with NUL bytes is kept whole */
  int fd = tcp_connect(f->port);
  rbuf *b = malloc(sizeof *b);
  rbuf_init(b, fd);
  send_str(fd, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\n");
  send_all(fd, "a\0b", 3);
  assert_true(read_response(b, r));
  assert_int_equal(r->body_len, 3);
  assert_memory_equal(r->body, "a\0b", 3);
  /* the peer is this connection's (kept per connection, asked once):
   * its own port, on both of its requests */
  struct sockaddr_in me;
  socklen_t melen = sizeof me;
  char want[64];
  assert_int_equal(getsockname(fd, (struct sockaddr *)&me, &melen), 0);
  snprintf(want, sizeof want, "127.0.0.1:%u", ntohs(me.sin_port));
  assert_string_equal(resp_header(r, "x-peer", v, sizeof v), want);
  send_str(fd, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\n\r\nx");
  assert_true(read_response(b, r));
  assert_string_equal(resp_header(r, "x-peer", v, sizeof v), want);
  close(fd);
  free(b);
  assert_int_equal(atomic_load(&f->echo_runs), 4);
  free(r);
}

static void test_handler_without_answer_500(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  exchange(f->port, "GET /noanswer HTTP/1.1\r\nHost: t\r\n\r\n", r);
  assert_int_equal(r->status, 500);
  assert_string_equal(
      r->body,
      "{\"error\":{\"code\":\"internal_server_error\",\"message\":\"the handler sent no response\"}}");
  free(r);
}

static void test_body_limit_413(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  char v[128], req[4096], body[MAX_BODY + 100];
  memset(body, 'b', sizeof body);
  /* Content-Length over the limit: refused from the headers alone */
  int n =
      snprintf(req, sizeof req, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: %zu\r\n\r\n", sizeof body);
  int fd = tcp_connect(f->port);
  rbuf *b = malloc(sizeof *b);
  rbuf_init(b, fd);
  send_all(fd, req, (size_t)n);
  assert_true(read_response(b, r));
  assert_int_equal(r->status, 413);
  assert_string_equal(resp_header(r, "content-type", v, sizeof v), "application/json");
  assert_string_equal(
      r->body, "{\"error\":{\"code\":\"payload_too_large\",\"message\":\"request entity too large\"}}");
  assert_string_equal(resp_header(r, "connection", v, sizeof v), "close");
  close(fd);
  /* a chunked body that grows past the limit */
  fd = tcp_connect(f->port);
  rbuf_init(b, fd);
  send_str(fd, "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
  n = snprintf(req, sizeof req, "%zx\r\n", sizeof body);
  send_all(fd, req, (size_t)n);
  send_all(fd, body, sizeof body);
  send_str(fd, "\r\n0\r\n\r\n");
  assert_true(read_response(b, r));
  assert_int_equal(r->status, 413);
  assert_non_null(strstr(r->body, "\"error\""));
  close(fd);
  free(b);
  /* exactly the limit is fine */
  char *big = malloc(MAX_BODY + 256);
  n = snprintf(big, MAX_BODY + 256, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n", MAX_BODY);
  memset(big + n, 'c', MAX_BODY);
  big[n + MAX_BODY] = '\0';
  exchange(f->port, big, r);
  assert_int_equal(r->status, 200);
  assert_int_equal(r->body_len, MAX_BODY);
  free(big);
  assert_int_equal(atomic_load(&f->echo_runs), 1); /* the handler never saw the big ones */
  free(r);
}

/* ---- keep-alive and pipelining ------------------------------------------------ */

static void test_keepalive(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  char v[64];
  int fd = tcp_connect(f->port);
  rbuf *b = malloc(sizeof *b);
  rbuf_init(b, fd);
  send_str(fd, "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n");
  assert_true(read_response(b, r));
  assert_int_equal(r->status, 200);
  assert_string_equal(resp_header(r, "connection", v, sizeof v), "keep-alive");
  send_str(fd, "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n");
  assert_true(read_response(b, r));
  assert_int_equal(r->status, 200);
  assert_string_equal(r->body, "hello");
  close(fd);
  free(b);
  assert_int_equal(atomic_load(&f->hello_runs), 2);
  free(r);
}

static void test_head_is_get_without_body(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  char v[64];
  int fd = tcp_connect(f->port);
  rbuf *b = malloc(sizeof *b);
  rbuf_init(b, fd);
  /* HEAD then GET on one connection: no body bytes may sit between them */
  send_str(fd, "HEAD /hello HTTP/1.1\r\nHost: t\r\n\r\nGET /hello HTTP/1.1\r\nHost: t\r\n\r\n");
  assert_true(read_head(b, r));
  assert_int_equal(r->status, 200);
  assert_string_equal(resp_header(r, "content-length", v, sizeof v), "5");
  assert_true(read_response(b, r));
  assert_int_equal(r->status, 200);
  assert_string_equal(r->body, "hello");
  close(fd);
  free(b);
  free(r);
}

/* While a request is held, more input on its connection (here 60 KB of a
 * next request) must not disturb it: h2o parsed it in place, in the socket's
 * buffer, and the layer watches for a leaving client without reading
 * (watch.c), so those bytes wait in the kernel for h2o. */
static void test_held_request_then_more_input(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  int fd = tcp_connect(f->port);
  rbuf *b = malloc(sizeof *b);
  rbuf_init(b, fd);
  send_str(fd, "GET /async HTTP/1.1\r\nHost: t\r\nX-Pad: 0123456789\r\n\r\n");
  assert_true(wait_for(&f->async_runs, 1, 2000));
  char *more = malloc(60000);
  int n = snprintf(more, 60000, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n");
  memset(more + n, 'x', 60000 - (size_t)n); /* one enormous header line: h2o refuses it later */
  send_all(fd, more, 60000);
  assert_true(read_response(b, r));
  assert_int_equal(r->status, 200);
  assert_string_equal(r->body, "async");
  close(fd);
  free(more);
  free(b);
  free(r);
}

static void test_pipelining(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  int fd = tcp_connect(f->port);
  rbuf *b = malloc(sizeof *b);
  rbuf_init(b, fd);
  /* four requests in one write; the second is answered later from a timer */
  send_str(fd, "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n"
               "GET /async HTTP/1.1\r\nHost: t\r\n\r\n"
               "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nthird"
               "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n");
  assert_true(read_response(b, r));
  assert_string_equal(r->body, "hello");
  assert_true(read_response(b, r));
  assert_string_equal(r->body, "async");
  assert_true(read_response(b, r));
  assert_string_equal(r->body, "third");
  assert_true(read_response(b, r));
  assert_int_equal(r->status, 404);
  close(fd);
  free(b);
  free(r);
}

/* ---- asynchronous answers ----------------------------------------------------- */

static void test_async_response(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  int64_t t0 = now_ms();
  exchange(f->port, "GET /async HTTP/1.1\r\nHost: t\r\n\r\n", r);
  int64_t dt = now_ms() - t0;
  assert_int_equal(r->status, 200);
  assert_string_equal(r->body, "async");
  assert_true(dt >= 45);
  assert_int_equal(atomic_load(&f->async_runs), 1);
  free(r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_post_echo, setup, teardown),
      cmocka_unit_test_setup_teardown(test_handler_without_answer_500, setup, teardown),
      cmocka_unit_test_setup_teardown(test_body_limit_413, setup, teardown),
      cmocka_unit_test_setup_teardown(test_keepalive, setup, teardown),
      cmocka_unit_test_setup_teardown(test_head_is_get_without_body, setup, teardown),
      cmocka_unit_test_setup_teardown(test_held_request_then_more_input, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pipelining, setup, teardown),
      cmocka_unit_test_setup_teardown(test_async_response, setup, teardown),
  };
  return HT_RUN(tests);
}
