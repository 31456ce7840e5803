/*
 * End-to-end tests of Hrana over WebSocket (routes/hrana_ws.c): a lithd
 * spawned per test, spoken to with the raw WebSocket client of
 * http/test/wsclient.c, so every message is seen as sent. The subprotocol
 * chosen, the hello and its token, every request type (request_id echoed),
 * a transaction across requests, a connection dropped inside one (the
 * writer is free at once), and the bounds: streams per connection,
 * requests waiting per connection, a message's size, binary and broken
 * messages, the stop.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "child.h"
#include "wsclient.h"

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static char buf[1 << 20];

/* The next text message, parsed (the caller decrefs); fails on a close. */
static json_t *recv_json(int fd) {
  int code = 0;
  long n = wsc_read_text(fd, buf, sizeof buf, &code);
  if (n < 0)
    fprintf(stderr, "no message: %ld (close %d: %s)\n", n, code, n == -2 ? buf + 2 : "");
  assert_true(n >= 0);
  json_error_t jerr;
  json_t *j = json_loads(buf, 0, &jerr);
  if (j == NULL)
    fprintf(stderr, "not JSON: %s\n", buf);
  assert_non_null(j);
  return j;
}

static void send_fmt(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void send_fmt(int fd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  assert_int_equal(wsc_send_text(fd, buf), 0);
}

/* Send request `id` (the request object's JSON) and read one answer. */
static json_t *request(int fd, int id, const char *req) {
  send_fmt(fd, "{\"type\":\"request\",\"request_id\":%d,\"request\":%s}", id, req);
  json_t *j = recv_json(fd);
  assert_int_equal(json_integer_value(json_object_get(j, "request_id")), id);
  return j;
}

/* A response_ok's response, of `type` (borrowed from j). */
static json_t *ok(json_t *j, const char *type) {
  const char *t = json_string_value(json_object_get(j, "type"));
  if (t == NULL || strcmp(t, "response_ok") != 0)
    fprintf(stderr, "not ok: %s\n", json_dumps(j, 0));
  assert_string_equal(t, "response_ok");
  json_t *r = json_object_get(j, "response");
  assert_string_equal(json_string_value(json_object_get(r, "type")), type);
  return r;
}

/* A response_error with this code (and `want` in its message). */
static void err(json_t *j, const char *code, const char *want) {
  const char *t = json_string_value(json_object_get(j, "type"));
  if (t == NULL || strcmp(t, "response_error") != 0)
    fprintf(stderr, "not an error: %s\n", json_dumps(j, 0));
  assert_string_equal(t, "response_error");
  json_t *e = json_object_get(j, "error");
  assert_string_equal(json_string_value(json_object_get(e, "code")), code);
  if (want != NULL)
    assert_non_null(strstr(json_string_value(json_object_get(e, "message")), want));
}

/* A connection that said hello (jwt: NULL for null) and got hello_ok. */
static int open_hello(const struct tl_child *c, const char *protocols, const char *jwt) {
  int fd = wsc_open(c->port, "/", protocols, NULL);
  assert_true(fd >= 0);
  if (jwt != NULL)
    send_fmt(fd, "{\"type\":\"hello\",\"jwt\":\"%s\"}", jwt);
  else
    assert_int_equal(wsc_send_text(fd, "{\"type\":\"hello\",\"jwt\":null}"), 0);
  json_t *j = recv_json(fd);
  assert_string_equal(json_string_value(json_object_get(j, "type")), "hello_ok");
  json_decref(j);
  return fd;
}

static void exec_ok(int fd, int id, int stream, const char *sql) {
  char req[1024];
  snprintf(req, sizeof req, "{\"type\":\"execute\",\"stream_id\":%d,\"stmt\":{\"sql\":\"%s\"}}", stream, sql);
  json_t *j = request(fd, id, req);
  ok(j, "execute");
  json_decref(j);
}

/* The first row's first cell's value of an execute's answer, as text. */
static const char *cell0(json_t *j) {
  json_t *rows = json_object_get(json_object_get(ok(j, "execute"), "result"), "rows");
  return json_string_value(json_object_get(json_array_get(json_array_get(rows, 0), 0), "value"));
}

/* Expect the server to close with `code`. */
static void expect_close(int fd, int code) {
  int got = 0;
  long n;
  while ((n = wsc_read_text(fd, buf, sizeof buf, &got)) >= 0)
    ;
  assert_int_equal(n, -2);
  assert_int_equal(got, code);
}

/* ---- The handshake ------------------------------------------------------------ */

static void test_ws_subprotocols(void **state) {
  struct tl_child *c = *state;
  char head[4096], v[64];
  tl_start(c, "wsproto", TL_NO_DB, TL_ARGS("--db", "a=wsproto.db"));
  int fd = wsc_tcp(c->port, 0);
  /* JSON's highest; never Protobuf's */
  assert_int_equal(wsc_handshake(fd, "/", "hrana3-protobuf, hrana3, hrana2", NULL, head, sizeof head), 101);
  assert_string_equal(wsc_header(head, "sec-websocket-protocol", v, sizeof v), "hrana3");
  close(fd);
  fd = wsc_tcp(c->port, 0);
  assert_int_equal(wsc_handshake(fd, "/", "hrana2,hrana1", NULL, head, sizeof head), 101);
  assert_string_equal(wsc_header(head, "sec-websocket-protocol", v, sizeof v), "hrana2");
  close(fd);
  /* none offered: hrana1, and no header */
  fd = wsc_tcp(c->port, 0);
  assert_int_equal(wsc_handshake(fd, "/", NULL, NULL, head, sizeof head), 101);
  assert_null(wsc_header(head, "sec-websocket-protocol", v, sizeof v));
  close(fd);
  fd = wsc_tcp(c->port, 0);
  assert_int_equal(wsc_handshake(fd, "/", "hrana3-protobuf", NULL, head, sizeof head), 400);
  close(fd);
  /* a named database's path; an unknown one */
  fd = wsc_tcp(c->port, 0);
  assert_int_equal(wsc_handshake(fd, "/v1/db/a/", "hrana3", NULL, head, sizeof head), 101);
  close(fd);
  fd = wsc_tcp(c->port, 0);
  assert_int_equal(wsc_handshake(fd, "/v1/db/nope/", "hrana3", NULL, head, sizeof head), 404);
  close(fd);
  /* a web page's handshake on a token-less lithd: refused before the upgrade */
  fd = wsc_tcp(c->port, 0);
  assert_int_equal(wsc_handshake(fd, "/", "hrana3", "Origin: http://evil.example\r\n", head, sizeof head),
                   403);
  close(fd);
  /* GET / that is no handshake */
  struct tl_resp r;
  tl_http(c, "GET", "/", NULL, NULL, &r);
  assert_int_equal(r.status, 426);
  tl_resp_free(&r);
  /* hrana1 has no sequence, hrana2 no get_autocommit */
  fd = open_hello(c, NULL, NULL);
  json_t *j = request(fd, 1, "{\"type\":\"open_stream\",\"stream_id\":1}");
  ok(j, "open_stream");
  json_decref(j);
  j = request(fd, 2, "{\"type\":\"sequence\",\"stream_id\":1,\"sql\":\"SELECT 1\"}");
  err(j, "PROTO_ERROR", "hrana1");
  json_decref(j);
  close(fd);
  fd = open_hello(c, "hrana2", NULL);
  j = request(fd, 1, "{\"type\":\"open_stream\",\"stream_id\":1}");
  json_decref(j);
  j = request(fd, 2, "{\"type\":\"get_autocommit\",\"stream_id\":1}");
  err(j, "PROTO_ERROR", "hrana2");
  json_decref(j);
  close(fd);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* ---- Every request ----------------------------------------------------------- */

static void test_ws_requests(void **state) {
  struct tl_child *c = *state;
  tl_start(c, "wsreq", 0, NULL);
  int fd = open_hello(c, "hrana3", NULL);
  json_t *j = request(fd, 70000, "{\"type\":\"open_stream\",\"stream_id\":5}");
  ok(j, "open_stream");
  json_decref(j);
  j = request(fd, 2, "{\"type\":\"open_stream\",\"stream_id\":6}");
  ok(j, "open_stream");
  json_decref(j);
  exec_ok(fd, -3, 5, "CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT UNIQUE)");
  /* a WebSocket's stream has no baton: the one of a fresh slot (generation
   * 0, a secret of zeros) names none */
  struct tl_resp forged;
  tl_http(c, "POST", "/v3/pipeline", NULL,
          "{\"baton\":\"0000.00000000.00000000000000000000000000000000\",\"requests\":[{\"type\":"
          "\"execute\",\"stmt\":{\"sql\":\"SELECT 1\"}}]}",
          &forged);
  assert_int_equal(forged.status, 400);
  assert_non_null(strstr(forged.body, "STREAM_EXPIRED"));
  tl_resp_free(&forged);
  j = request(fd, 4,
              "{\"type\":\"execute\",\"stream_id\":5,\"stmt\":{\"sql\":\"INSERT INTO t(b) VALUES (?), (:n)\","
              "\"args\":[{\"type\":\"text\",\"value\":\"x\"}]}}");
  err(j, "ARGS_INVALID", NULL); /* one argument for two parameters */
  json_decref(j);
  j = request(fd, 5,
              "{\"type\":\"execute\",\"stream_id\":5,\"stmt\":{\"sql\":\"INSERT INTO t(b) VALUES (:n)\","
              "\"named_args\":[{\"name\":\":n\",\"value\":{\"type\":\"text\",\"value\":\"x\"}}]}}");
  json_t *res = json_object_get(ok(j, "execute"), "result");
  assert_int_equal(json_integer_value(json_object_get(res, "affected_row_count")), 1);
  assert_string_equal(json_string_value(json_object_get(res, "last_insert_rowid")), "1");
  assert_non_null(json_object_get(res, "rows_written")); /* hrana3's fields */
  json_decref(j);
  j = request(fd, 6,
              "{\"type\":\"execute\",\"stream_id\":6,\"stmt\":{\"sql\":\"INSERT INTO t(b) VALUES ('x')\"}}");
  err(j, "SQLITE_CONSTRAINT", "UNIQUE");
  json_decref(j);
  /* a batch with a condition */
  j = request(
      fd, 7,
      "{\"type\":\"batch\",\"stream_id\":5,\"batch\":{\"steps\":["
      "{\"stmt\":{\"sql\":\"INSERT INTO t(b) VALUES ('y')\"}},"
      "{\"condition\":{\"type\":\"ok\",\"step\":0},\"stmt\":{\"sql\":\"SELECT count(*) FROM t\"}}]}}");
  res = json_object_get(ok(j, "batch"), "result");
  json_t *second = json_array_get(json_object_get(res, "step_results"), 1);
  assert_string_equal(json_string_value(json_object_get(
                          json_array_get(json_array_get(json_object_get(second, "rows"), 0), 0), "value")),
                      "2");
  json_decref(j);
  /* sequence, describe */
  j = request(
      fd, 8,
      "{\"type\":\"sequence\",\"stream_id\":5,\"sql\":\"CREATE TABLE u(x); INSERT INTO u VALUES (9);\"}");
  ok(j, "sequence");
  json_decref(j);
  j = request(fd, 9, "{\"type\":\"describe\",\"stream_id\":6,\"sql\":\"SELECT x FROM u WHERE x = ?\"}");
  res = json_object_get(ok(j, "describe"), "result");
  assert_int_equal(json_array_size(json_object_get(res, "params")), 1);
  assert_int_equal(json_is_true(json_object_get(res, "is_readonly")), 1);
  json_decref(j);
  /* stored SQL is the connection's: stored once, used on either stream */
  j = request(fd, 10, "{\"type\":\"store_sql\",\"sql_id\":3,\"sql\":\"SELECT x * 2 FROM u\"}");
  ok(j, "store_sql");
  json_decref(j);
  j = request(fd, 11, "{\"type\":\"store_sql\",\"sql_id\":3,\"sql\":\"SELECT 1\"}");
  err(j, "SQL_STORE_ID_IN_USE", NULL);
  json_decref(j);
  j = request(fd, 12, "{\"type\":\"execute\",\"stream_id\":6,\"stmt\":{\"sql_id\":3}}");
  assert_string_equal(cell0(j), "18");
  json_decref(j);
  j = request(fd, 13, "{\"type\":\"close_sql\",\"sql_id\":3}");
  ok(j, "close_sql");
  json_decref(j);
  j = request(fd, 14, "{\"type\":\"execute\",\"stream_id\":5,\"stmt\":{\"sql_id\":3}}");
  assert_string_equal(json_string_value(json_object_get(j, "type")), "response_error");
  json_decref(j);
  /* get_autocommit and a transaction across requests */
  j = request(fd, 15, "{\"type\":\"get_autocommit\",\"stream_id\":5}");
  assert_true(json_is_true(json_object_get(ok(j, "get_autocommit"), "is_autocommit")));
  json_decref(j);
  exec_ok(fd, 16, 5, "BEGIN");
  exec_ok(fd, 17, 5, "INSERT INTO u VALUES (10)");
  j = request(fd, 18, "{\"type\":\"get_autocommit\",\"stream_id\":5}");
  assert_true(json_is_false(json_object_get(ok(j, "get_autocommit"), "is_autocommit")));
  json_decref(j);
  exec_ok(fd, 19, 5, "ROLLBACK");
  j = request(fd, 20, "{\"type\":\"execute\",\"stream_id\":6,\"stmt\":{\"sql\":\"SELECT count(*) FROM u\"}}");
  assert_string_equal(cell0(j), "1");
  json_decref(j);
  /* a cursor: its entries fetched two at a time */
  j = request(fd, 21,
              "{\"type\":\"open_cursor\",\"stream_id\":5,\"cursor_id\":1,\"batch\":{\"steps\":["
              "{\"stmt\":{\"sql\":\"SELECT b FROM t ORDER BY a\"}}]}}");
  ok(j, "open_cursor");
  json_decref(j);
  const char *want[] = {"step_begin", "row", "row", "step_end"};
  size_t got = 0;
  for (int k = 0; k < 3; k++) {
    j = request(fd, 22 + k, "{\"type\":\"fetch_cursor\",\"cursor_id\":1,\"max_count\":2}");
    json_t *r = ok(j, "fetch_cursor");
    json_t *entries = json_object_get(r, "entries");
    for (size_t i = 0; i < json_array_size(entries); i++, got++)
      assert_string_equal(json_string_value(json_object_get(json_array_get(entries, i), "type")), want[got]);
    assert_int_equal(json_is_true(json_object_get(r, "done")), got == 4);
    json_decref(j);
  }
  assert_int_equal(got, 4);
  j = request(fd, 30, "{\"type\":\"close_cursor\",\"cursor_id\":1}");
  ok(j, "close_cursor");
  json_decref(j);
  j = request(fd, 31, "{\"type\":\"fetch_cursor\",\"cursor_id\":1,\"max_count\":2}");
  err(j, "CURSOR_NOT_FOUND", NULL);
  json_decref(j);
  /* close_stream; the stream is gone; its id may be opened again */
  j = request(fd, 32, "{\"type\":\"close_stream\",\"stream_id\":5}");
  ok(j, "close_stream");
  json_decref(j);
  j = request(fd, 33, "{\"type\":\"execute\",\"stream_id\":5,\"stmt\":{\"sql\":\"SELECT 1\"}}");
  err(j, "STREAM_NOT_FOUND", NULL);
  json_decref(j);
  j = request(fd, 34, "{\"type\":\"open_stream\",\"stream_id\":5}");
  ok(j, "open_stream");
  json_decref(j);
  j = request(fd, 35, "{\"type\":\"frobnicate\",\"stream_id\":5}");
  err(j, "PROTO_ERROR", "unknown");
  json_decref(j);
  /* pipelined: the requests of one stream answered in order, ids echoed */
  for (int k = 0; k < 20; k++)
    send_fmt(fd,
             "{\"type\":\"request\",\"request_id\":%d,\"request\":{\"type\":\"execute\",\"stream_id\":5,"
             "\"stmt\":{\"sql\":\"INSERT INTO u VALUES (%d)\"}}}",
             100 + k, k);
  for (int k = 0; k < 20; k++) {
    j = recv_json(fd);
    assert_int_equal(json_integer_value(json_object_get(j, "request_id")), 100 + k);
    ok(j, "execute");
    json_decref(j);
  }
  close(fd);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* Stored SQL is resolved when a request arrives (as sqld): a request
 * queued behind a held writer runs the text its sql_id named then, though
 * the id was closed and stored again with other SQL before it ran. */
static void test_ws_sql_ids_at_receipt(void **state) {
  struct tl_child *c = *state;
  tl_start(c, "wsids", 0, TL_ARGS("--tx-idle-ms", "5000"));
  int a = open_hello(c, "hrana3", NULL), b = open_hello(c, "hrana3", NULL);
  json_t *j = request(a, 1, "{\"type\":\"open_stream\",\"stream_id\":1}");
  json_decref(j);
  j = request(b, 1, "{\"type\":\"open_stream\",\"stream_id\":1}");
  json_decref(j);
  exec_ok(b, 2, 1, "CREATE TABLE t(x)");
  exec_ok(a, 2, 1, "BEGIN IMMEDIATE"); /* the writer held */
  j = request(b, 3, "{\"type\":\"store_sql\",\"sql_id\":7,\"sql\":\"INSERT INTO t VALUES (1)\"}");
  ok(j, "store_sql");
  json_decref(j);
  /* a write waiting for the writer, and behind it on its stream a request
   * naming 7; then 7 closed and stored again */
  send_fmt(b, "{\"type\":\"request\",\"request_id\":30,\"request\":{\"type\":\"execute\",\"stream_id\":1,"
              "\"stmt\":{\"sql\":\"INSERT INTO t VALUES (0)\"}}}");
  send_fmt(b, "{\"type\":\"request\",\"request_id\":4,\"request\":{\"type\":\"execute\",\"stream_id\":1,"
              "\"stmt\":{\"sql_id\":7}}}");
  j = request(b, 5, "{\"type\":\"close_sql\",\"sql_id\":7}");
  ok(j, "close_sql");
  json_decref(j);
  j = request(b, 6, "{\"type\":\"store_sql\",\"sql_id\":7,\"sql\":\"INSERT INTO t VALUES (2)\"}");
  ok(j, "store_sql");
  json_decref(j);
  exec_ok(a, 3, 1, "ROLLBACK");
  for (int k = 0; k < 2; k++) { /* in the stream's order */
    j = recv_json(b);
    assert_int_equal(json_integer_value(json_object_get(j, "request_id")), k == 0 ? 30 : 4);
    ok(j, "execute");
    json_decref(j);
  }
  j = request(b, 8,
              "{\"type\":\"execute\",\"stream_id\":1,\"stmt\":{\"sql\":\"SELECT group_concat(x) FROM t\"}}");
  assert_string_equal(cell0(j), "0,1");
  json_decref(j);
  close(a);
  close(b);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* ---- The hello and the gate ----------------------------------------------------- */

static void test_ws_token(void **state) {
  struct tl_child *c = *state;
  FILE *f = fopen("ws.token", "w");
  assert_non_null(f);
  fputs("ws-s3cret\n", f);
  assert_int_equal(fclose(f), 0);
  tl_start(c, "wstok", 0, TL_ARGS("--token-file", "ws.token"));
  /* the right token in the hello */
  int fd = open_hello(c, "hrana3", "ws-s3cret");
  json_t *j = request(fd, 1, "{\"type\":\"open_stream\",\"stream_id\":1}");
  ok(j, "open_stream");
  json_decref(j);
  exec_ok(fd, 2, 1, "SELECT 1");
  /* a hello again (Hrana 2 and 3 re-authenticate so): the right token goes
   * on, a wrong one ends the connection as a first hello's would */
  assert_int_equal(wsc_send_text(fd, "{\"type\":\"hello\",\"jwt\":\"ws-s3cret\"}"), 0);
  j = recv_json(fd);
  assert_string_equal(json_string_value(json_object_get(j, "type")), "hello_ok");
  json_decref(j);
  exec_ok(fd, 3, 1, "SELECT 1");
  assert_int_equal(wsc_send_text(fd, "{\"type\":\"hello\",\"jwt\":\"wrong\"}"), 0);
  j = recv_json(fd);
  assert_string_equal(json_string_value(json_object_get(j, "type")), "hello_error");
  json_decref(j);
  expect_close(fd, 1008);
  close(fd);
  /* a wrong one: hello_error, then the close */
  fd = wsc_open(c->port, "/", "hrana3", NULL);
  assert_int_equal(wsc_send_text(fd, "{\"type\":\"hello\",\"jwt\":\"wrong\"}"), 0);
  j = recv_json(fd);
  assert_string_equal(json_string_value(json_object_get(j, "type")), "hello_error");
  assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "code")), "AUTH_FAILED");
  json_decref(j);
  expect_close(fd, 1008);
  close(fd);
  /* none */
  fd = wsc_open(c->port, "/", "hrana3", NULL);
  assert_int_equal(wsc_send_text(fd, "{\"type\":\"hello\",\"jwt\":null}"), 0);
  j = recv_json(fd);
  assert_string_equal(json_string_value(json_object_get(j, "type")), "hello_error");
  json_decref(j);
  close(fd);
  /* a request before the hello: a protocol error */
  fd = wsc_open(c->port, "/", "hrana3", NULL);
  assert_int_equal(
      wsc_send_text(
          fd,
          "{\"type\":\"request\",\"request_id\":1,\"request\":{\"type\":\"open_stream\",\"stream_id\":1}}"),
      0);
  expect_close(fd, 1002);
  close(fd);
  /* the token in the handshake's Authorization: the hello may carry none */
  fd = wsc_open(c->port, "/", "hrana3", "Authorization: Bearer ws-s3cret\r\n");
  assert_true(fd >= 0);
  assert_int_equal(wsc_send_text(fd, "{\"type\":\"hello\",\"jwt\":null}"), 0);
  j = recv_json(fd);
  assert_string_equal(json_string_value(json_object_get(j, "type")), "hello_ok");
  json_decref(j);
  close(fd);
  char head[4096];
  fd = wsc_tcp(c->port, 0);
  assert_int_equal(wsc_handshake(fd, "/", "hrana3", "Authorization: Bearer wrong\r\n", head, sizeof head),
                   401);
  close(fd);
  /* a web page's Origin: refused before the upgrade */
  fd = wsc_tcp(c->port, 0);
  assert_int_equal(wsc_handshake(fd, "/", "hrana3", "Origin: https://evil.example\r\n", head, sizeof head),
                   403);
  close(fd);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* ---- Ends and bounds ---------------------------------------------------------------- */

/* A connection dropped inside a transaction: rolled back, the writer free
 * at once (not after --tx-idle-ms). */
static void test_ws_dropped_transaction(void **state) {
  struct tl_child *c = *state;
  tl_start(c, "wsdrop", 0, TL_ARGS("--tx-idle-ms", "5000", "--tx-max-ms", "20000"));
  int a = open_hello(c, "hrana3", NULL);
  int b = open_hello(c, "hrana3", NULL);
  json_t *j = request(a, 1, "{\"type\":\"open_stream\",\"stream_id\":1}");
  json_decref(j);
  j = request(b, 1, "{\"type\":\"open_stream\",\"stream_id\":1}");
  json_decref(j);
  exec_ok(b, 2, 1, "CREATE TABLE t(x)");
  exec_ok(a, 2, 1, "BEGIN IMMEDIATE");
  exec_ok(a, 3, 1, "INSERT INTO t VALUES (1)");
  close(a); /* with the writer held */
  int64_t t0 = now_ms();
  exec_ok(b, 3, 1, "INSERT INTO t VALUES (2)");
  int64_t took = now_ms() - t0;
  assert_true(took < 2000);
  j = request(b, 4,
              "{\"type\":\"execute\",\"stream_id\":1,\"stmt\":{\"sql\":\"SELECT group_concat(x) FROM t\"}}");
  assert_string_equal(cell0(j), "2");
  json_decref(j);
  close(b);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

static void test_ws_bounds(void **state) {
  struct tl_child *c = *state;
  tl_start(c, "wsbound", 0, TL_ARGS("--max-body", "4096", "--tx-idle-ms", "5000"));
  /* a message past --max-body */
  int fd = open_hello(c, "hrana3", NULL);
  char *big = malloc(5000);
  memset(big, ' ', 5000);
  memcpy(big, "{\"type\":\"hello\"}", 16);
  assert_int_equal(wsc_send_frame(fd, 1, WSC_TEXT, big, 5000, 1), 0);
  expect_close(fd, 1009);
  close(fd);
  free(big);
  /* binary, not JSON, not a message */
  fd = open_hello(c, "hrana3", NULL);
  assert_int_equal(wsc_send_frame(fd, 1, WSC_BINARY, "\x08\x01", 2, 1), 0);
  expect_close(fd, 1003);
  close(fd);
  fd = open_hello(c, "hrana3", NULL);
  assert_int_equal(wsc_send_text(fd, "{\"type\":\"request\",\"request_id\":1,"), 0);
  expect_close(fd, 1002);
  close(fd);
  fd = open_hello(c, "hrana3", NULL);
  assert_int_equal(
      wsc_send_text(fd, "{\"type\":\"request\",\"request\":{\"type\":\"open_stream\",\"stream_id\":1}}"),
      0); /* no request_id */
  expect_close(fd, 1002);
  close(fd);
  /* streams per connection */
  fd = open_hello(c, "hrana3", NULL);
  json_t *j;
  for (int k = 0; k < 64; k++) {
    char rq[128];
    snprintf(rq, sizeof rq, "{\"type\":\"open_stream\",\"stream_id\":%d}", k);
    j = request(fd, k, rq);
    ok(j, "open_stream");
    json_decref(j);
  }
  j = request(fd, 64, "{\"type\":\"open_stream\",\"stream_id\":64}");
  err(j, "STREAMS_EXHAUSTED", "64");
  json_decref(j);
  exec_ok(fd, 65, 0, "CREATE TABLE t(x)");
  /* stored SQL: the connection's, with a stream's bounds over HTTP (256
   * texts); freed with the connection */
  for (int k = 0; k < 257; k++) {
    char rq[128];
    snprintf(rq, sizeof rq, "{\"type\":\"store_sql\",\"sql_id\":%d,\"sql\":\"SELECT %d\"}", k, k);
    j = request(fd, 500 + k, rq);
    if (k < 256)
      ok(j, "store_sql");
    else
      err(j, "SQL_STORE_TOO_MANY", NULL);
    json_decref(j);
  }
  /* cursors per connection (16): the 17th open_cursor is refused, and a
   * cursor closed makes room */
  for (int k = 0; k < 17; k++) {
    char rq[256];
    snprintf(rq, sizeof rq,
             "{\"type\":\"open_cursor\",\"stream_id\":%d,\"cursor_id\":%d,"
             "\"batch\":{\"steps\":[{\"stmt\":{\"sql\":\"SELECT 1\"}}]}}",
             2 + k, 100 + k);
    j = request(fd, 800 + k, rq);
    if (k < 16)
      ok(j, "open_cursor");
    else
      err(j, "CURSORS_EXHAUSTED", "16");
    json_decref(j);
  }
  for (int k = 0; k < 17; k++) {
    char rq[128];
    snprintf(rq, sizeof rq, "{\"type\":\"close_cursor\",\"cursor_id\":%d}", 100 + k);
    j = request(fd, 820 + k, rq);
    ok(j, "close_cursor");
    json_decref(j);
  }
  j = request(fd, 840,
              "{\"type\":\"open_cursor\",\"stream_id\":18,\"cursor_id\":116,"
              "\"batch\":{\"steps\":[{\"stmt\":{\"sql\":\"SELECT 1\"}}]}}");
  ok(j, "open_cursor");
  json_decref(j);
  j = request(fd, 841, "{\"type\":\"close_cursor\",\"cursor_id\":116}");
  ok(j, "close_cursor");
  json_decref(j);
  /* requests waiting per connection: another connection holds the writer */
  int holder = open_hello(c, "hrana3", NULL);
  j = request(holder, 1, "{\"type\":\"open_stream\",\"stream_id\":1}");
  json_decref(j);
  exec_ok(holder, 2, 1, "BEGIN IMMEDIATE");
  for (int k = 0; k < 129; k++)
    send_fmt(fd,
             "{\"type\":\"request\",\"request_id\":%d,\"request\":{\"type\":\"execute\",\"stream_id\":1,"
             "\"stmt\":{\"sql\":\"INSERT INTO t VALUES (%d)\"}}}",
             1000 + k, k);
  j = recv_json(fd); /* the 129th, refused at once */
  assert_int_equal(json_integer_value(json_object_get(j, "request_id")), 1128);
  err(j, "TOO_MANY_REQUESTS", "128");
  json_decref(j);
  exec_ok(holder, 3, 1, "ROLLBACK");
  for (int k = 0; k < 128; k++) {
    j = recv_json(fd);
    assert_int_equal(json_integer_value(json_object_get(j, "request_id")), 1000 + k);
    ok(j, "execute");
    json_decref(j);
  }
  close(holder);
  close(fd);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* A WebSocket's stream outlives --stream-idle-ms while its connection
 * lives (messages on another stream keep the connection): the idle sweep
 * is HTTP's; the connection's own idle bound is --stream-idle-ms too. */
static void test_ws_streams_not_swept(void **state) {
  struct tl_child *c = *state;
  tl_start(c, "wsidle", 0, TL_ARGS("--stream-idle-ms", "300"));
  int fd = open_hello(c, "hrana3", NULL);
  json_t *j = request(fd, 1, "{\"type\":\"open_stream\",\"stream_id\":1}");
  json_decref(j);
  j = request(fd, 10, "{\"type\":\"open_stream\",\"stream_id\":2}");
  json_decref(j);
  for (int k = 0; k < 4; k++) {
    usleep(200 * 1000);
    exec_ok(fd, 11 + k, 2, "SELECT 1");
  }
  exec_ok(fd, 2, 1, "SELECT 1");
  /* idle: the connection closes (1001) */
  expect_close(fd, 1001);
  close(fd);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* The idle bound (--stream-idle-ms) never closes a connection whose
 * request waits (a BEGIN IMMEDIATE behind another connection's
 * transaction), and pings are no activity: one that only pings, never
 * saying hello, is closed at the bound. */
static void test_ws_idle_while_waiting(void **state) {
  struct tl_child *c = *state;
  tl_start(c, "wswait", 0, TL_ARGS("--stream-idle-ms", "300", "--tx-max-ms", "20000"));
  int a = open_hello(c, "hrana3", NULL);
  int b = open_hello(c, "hrana3", NULL);
  int p = wsc_open(c->port, "/", "hrana3", NULL);
  assert_true(p >= 0);
  json_t *j = request(a, 1, "{\"type\":\"open_stream\",\"stream_id\":1}");
  json_decref(j);
  j = request(a, 2, "{\"type\":\"open_stream\",\"stream_id\":2}");
  json_decref(j);
  j = request(b, 1, "{\"type\":\"open_stream\",\"stream_id\":1}");
  json_decref(j);
  exec_ok(a, 3, 1, "BEGIN IMMEDIATE");
  send_fmt(b, "{\"type\":\"request\",\"request_id\":2,\"request\":{\"type\":\"execute\",\"stream_id\":1,"
              "\"stmt\":{\"sql\":\"BEGIN IMMEDIATE\"}}}");
  int64_t t0 = now_ms();
  for (int k = 0; k < 9; k++) { /* a keeps its connection; p pings */
    usleep(100 * 1000);
    exec_ok(a, 10 + k, 2, "SELECT 1");
    assert_int_equal(wsc_send_frame(p, 1, WSC_PING, "k", 1, 1), 0);
  }
  int64_t t1 = now_ms();
  expect_close(p, 1001); /* already sent */
  assert_true(now_ms() - t1 < 150);
  close(p);
  exec_ok(a, 4, 1, "COMMIT");
  j = recv_json(b); /* b's BEGIN, answered after 900 ms */
  ok(j, "execute");
  json_decref(j);
  assert_true(now_ms() - t0 >= 800);
  exec_ok(b, 3, 1, "COMMIT");
  close(a);
  close(b);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* An answer waiting for a client that does not read holds its share of
 * the answer budget (--max-answer-mib) until it has left, as over HTTP:
 * another client's large answer meanwhile is refused (retry later); once
 * the first is read, it passes. */
static void test_ws_answer_held_until_sent(void **state) {
  struct tl_child *c = *state;
  static char big[8 << 20];
  char head[4096];
  int code = 0;
  const char *five =
      "{\"type\":\"execute\",\"stream_id\":1,\"stmt\":{\"sql\":\"WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL "
      "SELECT i+1 FROM r WHERE i<50) SELECT hex(zeroblob(50000)) FROM r\"}}";
  tl_start(c, "wsheld", 0, TL_ARGS("--max-answer-mib", "16", "--max-result-mib", "16"));
  int a = wsc_tcp(c->port, 4096);
  assert_int_equal(wsc_handshake(a, "/", "hrana3", NULL, head, sizeof head), 101);
  assert_int_equal(wsc_send_text(a, "{\"type\":\"hello\",\"jwt\":null}"), 0);
  assert_int_equal(wsc_read_text(a, big, sizeof big, &code), 19); /* hello_ok */
  send_fmt(a,
           "{\"type\":\"request\",\"request_id\":1,\"request\":{\"type\":\"open_stream\",\"stream_id\":1}}");
  send_fmt(a, "{\"type\":\"request\",\"request_id\":2,\"request\":%s}", five);
  usleep(500 * 1000); /* its answer waits for a */
  int b = open_hello(c, "hrana3", NULL);
  json_t *j = request(b, 1, "{\"type\":\"open_stream\",\"stream_id\":1}");
  json_decref(j);
  send_fmt(b, "{\"type\":\"request\",\"request_id\":2,\"request\":%s}", five);
  long n = wsc_read_text(b, big, sizeof big, &code);
  assert_true(n > 0 && n < 4096);
  assert_non_null(strstr(big, "\"response_error\"")); /* no room while a's answer waits */
  assert_non_null(strstr(big, "--max-answer-mib"));
  assert_true(wsc_read_text(a, big, sizeof big, &code) > 0); /* open_stream's */
  n = wsc_read_text(a, big, sizeof big, &code);
  assert_true(n > 5000000);
  assert_non_null(strstr(big, "\"response_ok\""));
  usleep(100 * 1000); /* its share given back: room again */
  send_fmt(b, "{\"type\":\"request\",\"request_id\":3,\"request\":%s}", five);
  n = wsc_read_text(b, big, sizeof big, &code);
  assert_true(n > 5000000);
  assert_non_null(strstr(big, "\"response_ok\""));
  close(a);
  close(b);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* A WebSocket from the source address `from` (127.0.0.0/8: all this
 * machine's) that said hello. */
static int open_from(const struct tl_child *c, const char *from) {
  struct sockaddr_in src = {.sin_family = AF_INET}, dst = {.sin_family = AF_INET};
  struct timeval tv = {5, 0};
  char head[4096];
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  inet_pton(AF_INET, from, &src.sin_addr);
  inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
  dst.sin_port = htons((uint16_t)c->port);
  assert_int_equal(bind(fd, (struct sockaddr *)&src, sizeof src), 0);
  assert_int_equal(connect(fd, (struct sockaddr *)&dst, sizeof dst), 0);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  assert_int_equal(wsc_handshake(fd, "/", "hrana3", NULL, head, sizeof head), 101);
  assert_int_equal(wsc_send_text(fd, "{\"type\":\"hello\",\"jwt\":null}"), 0);
  json_t *j = recv_json(fd);
  assert_string_equal(json_string_value(json_object_get(j, "type")), "hello_ok");
  json_decref(j);
  return fd;
}

/* Idle WebSocket streams cannot take the table from anyone: 16
 * connections from 4 addresses holding 64 idle streams each (all 1024)
 * once refused every Hrana-over-HTTP client ("each running or in a
 * transaction", false). The stream idle the longest with no transaction
 * is closed for a newcomer, as an HTTP one is; its next request:
 * STREAM_EXPIRED. */
static void test_ws_idle_streams_yield(void **state) {
  struct tl_child *c = *state;
  int fds[16];
  tl_start(c, "wsyield", 0, NULL);
  for (int k = 0; k < 16; k++) {
    char from[32];
    snprintf(from, sizeof from, "127.0.0.%d", 2 + k / 4);
    fds[k] = open_from(c, from);
    for (int i = 0; i < 64; i++)
      send_fmt(
          fds[k],
          "{\"type\":\"request\",\"request_id\":%d,\"request\":{\"type\":\"open_stream\",\"stream_id\":%d}}",
          i, i);
    for (int i = 0; i < 64; i++) {
      json_t *j = recv_json(fds[k]);
      ok(j, "open_stream");
      json_decref(j);
    }
    if (k == 0)
      usleep(20 * 1000); /* the first connection's streams: the idlest */
  }
  /* the table is full: an HTTP client still gets a stream */
  tl_expect(c, "POST", "/v3/pipeline", NULL,
            "{\"baton\":null,\"requests\":[{\"type\":\"execute\",\"stmt\":{\"sql\":\"SELECT 1\"}}]}", 200,
            "\"baton\":\"");
  /* the first connection lost one stream (STREAM_EXPIRED), the rest go on */
  int expired = 0;
  for (int i = 0; i < 64; i++) {
    char req[128];
    snprintf(req, sizeof req, "{\"type\":\"execute\",\"stream_id\":%d,\"stmt\":{\"sql\":\"SELECT 1\"}}", i);
    json_t *j = request(fds[0], 100 + i, req);
    if (strcmp(json_string_value(json_object_get(j, "type")), "response_error") == 0) {
      err(j, "STREAM_EXPIRED", "idle the longest");
      expired++;
    }
    json_decref(j);
  }
  assert_int_equal(expired, 1);
  for (int k = 0; k < 16; k++)
    close(fds[k]);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* A cursor whose batch wrote and ran is answered as run: its entries keep
 * the pipeline's share of the budget (never charged twice). With another
 * client's ~2 MB cursor held under --max-answer-mib 8, a cursor of
 * [INSERT, ~2 MB SELECT] was answered SQLITE_BUSY "retry later" after its
 * INSERT had committed (3 retries: 3 rows). */
static void test_ws_cursor_after_write(void **state) {
  struct tl_child *c = *state;
  const char *cursor =
      "{\"type\":\"open_cursor\",\"stream_id\":1,\"cursor_id\":1,\"batch\":{\"steps\":[%s{\"stmt\":{\"sql\":"
      "\"WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r WHERE i<4000) SELECT "
      "printf('%%0500d', i) FROM r\"}}]}}";
  char req[1024];
  tl_start(c, "wscursw", 0, TL_ARGS("--max-answer-mib", "8"));
  int a = open_hello(c, "hrana3", NULL);
  int b = open_hello(c, "hrana3", NULL);
  json_t *j = request(a, 1, "{\"type\":\"open_stream\",\"stream_id\":1}");
  json_decref(j);
  j = request(b, 1, "{\"type\":\"open_stream\",\"stream_id\":1}");
  json_decref(j);
  exec_ok(b, 2, 1, "CREATE TABLE t(x)");
  snprintf(req, sizeof req, cursor, "");
  j = request(a, 2, req);
  ok(j, "open_cursor");
  json_decref(j);
  snprintf(req, sizeof req, cursor, "{\"stmt\":{\"sql\":\"INSERT INTO t VALUES (1)\"}},");
  j = request(b, 3, req);
  ok(j, "open_cursor");
  json_decref(j);
  j = request(b, 4, "{\"type\":\"fetch_cursor\",\"cursor_id\":1,\"max_count\":3}");
  json_t *entries = json_object_get(ok(j, "fetch_cursor"), "entries");
  assert_string_equal(json_string_value(json_object_get(json_array_get(entries, 1), "type")), "step_end");
  assert_int_equal(json_integer_value(json_object_get(json_array_get(entries, 1), "affected_row_count")), 1);
  json_decref(j);
  j = request(b, 5, "{\"type\":\"close_cursor\",\"cursor_id\":1}");
  json_decref(j);
  j = request(b, 6, "{\"type\":\"execute\",\"stream_id\":1,\"stmt\":{\"sql\":\"SELECT count(*) FROM t\"}}");
  assert_string_equal(cell0(j), "1");
  json_decref(j);
  close(a);
  close(b);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* The stop: a close (1001) to each connection, and lithd exits 0. */
static void test_ws_stop(void **state) {
  struct tl_child *c = *state;
  tl_start(c, "wsstop", 0, NULL);
  int fd = open_hello(c, "hrana3", NULL);
  json_t *j = request(fd, 1, "{\"type\":\"open_stream\",\"stream_id\":1}");
  json_decref(j);
  exec_ok(fd, 2, 1, "CREATE TABLE t(x)");
  exec_ok(fd, 3, 1, "BEGIN");
  exec_ok(fd, 4, 1, "INSERT INTO t VALUES (1)");
  kill(c->pid, SIGTERM);
  expect_close(fd, 1001);
  assert_int_equal(wsc_send_frame(fd, 1, WSC_CLOSE, "\x03\xe9", 2, 1), 0);
  close(fd);
  assert_int_equal(tl_stop(c, 0, TL_TIMEOUT_MS), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_ws_subprotocols, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_ws_requests, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_ws_sql_ids_at_receipt, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_ws_token, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_ws_dropped_transaction, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_ws_bounds, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_ws_streams_not_swept, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_ws_idle_while_waiting, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_ws_answer_held_until_sent, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_ws_idle_streams_yield, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_ws_cursor_after_write, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_ws_stop, tl_setup, tl_teardown),
  };
  if (getenv("TEST_FILTER") != NULL)
    cmocka_set_test_filter(getenv("TEST_FILTER"));
  return cmocka_run_group_tests(tests, NULL, NULL);
}
