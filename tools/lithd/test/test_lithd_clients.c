/*
 * test_lithd_clients — the exact requests of libSQL clients that cannot run
 * here, replayed byte for byte against lithd.
 *
 * libsql-client-go (and the `turso db shell` on it) is Go, which Debian's CI
 * machine lacks: its requests are rebuilt here as its sources build them
 * (libsql/internal/http/hranaV2/hranaV2.go and the hrana package beside it):
 *   - POST <url>/v2/pipeline with Go's net/http headers: Host, User-Agent
 *     "Go-http-client/1.1", Content-Length, "Accept-Encoding: gzip", an
 *     Authorization only when it has a token, and NO Content-Type;
 *   - the body {"baton":...,"requests":[...]}, "baton" left out while it has
 *     none (omitempty), "want_rows" always, "args"/"named_args" left out
 *     when empty; values {"type":"integer","value":"1"} (a string),
 *     {"type":"float","value":1.5} (a number), {"type":"null"} (no value),
 *     blobs in base64 WITHOUT padding (StdEncoding.WithPadding(NoPadding));
 *   - database/sql's Prepare: store_sql then execute by sql_id, close_sql
 *     at Stmt.Close; a transaction: "BEGIN", statements, "COMMIT" or
 *     "ROLLBACK" as executes on the one stream; Exec of several statements:
 *     one batch whose steps are chained by {"type":"ok","step":k-1} with a
 *     last ROLLBACK step on {"type":"not","cond":{"type":"ok","step":n-1}};
 *   - the stream is never closed (its Conn.Close does nothing): lithd's
 *     idle bound ends it; an answer not 200 ends the client's stream, which
 *     reads {"message","code"} from the body.
 *
 * Python's libsql-client (libsql_client/hrana/conn.py, client.py,
 * convert.py) speaks Hrana over WebSocket through aiohttp:
 *   - the handshake offers the one subprotocol "hrana2" and aiohttp's
 *     permessage-deflate (which lithd declines: frames stay plain);
 *   - the hello is queued before the socket opens, jwt null without a token;
 *   - json.dumps's text: ", " and ": " between items, every non-ASCII
 *     character as \u escapes (surrogate pairs past the BMP);
 *   - client.execute sends open_stream, execute and close_stream at once,
 *     without waiting; ids (requests, streams) are reused once answered;
 *   - every stmt carries "args": [] and "named_args": [] even when empty;
 *     blobs in padded base64;
 *   - client.batch wraps the statements in BEGIN ... COMMIT, then a
 *     ROLLBACK on "not ok", and insists on stmt_count + 3 entries in
 *     step_results and in step_errors (skipped steps: null);
 *   - a transaction: open_stream and BEGIN at once; COMMIT (or ROLLBACK)
 *     and close_stream at once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "child.h"
#include "h1client.h"
#include "wsclient.h"

/* The body of a Go client's pipeline (baton: NULL for none), sent with
 * exactly Go's headers; the answer in *r. */
static void go_pipeline(const struct tl_child *c, const char *token, const char *baton, const char *requests,
                        struct tl_resp *r) {
  char body[8192], head[512];
  int n = baton != NULL ? snprintf(body, sizeof body, "{\"baton\":\"%s\",\"requests\":%s}", baton, requests)
                        : snprintf(body, sizeof body, "{\"requests\":%s}", requests);
  assert_true(n > 0 && (size_t)n < sizeof body);
  char auth[256] = "";
  if (token != NULL)
    snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n", token);
  int h = snprintf(head, sizeof head,
                   "POST /v2/pipeline HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUser-Agent: Go-http-client/1.1\r\n"
                   "Content-Length: %d\r\n%sAccept-Encoding: gzip\r\n\r\n",
                   c->port, n, auth);
  int fd = tl_connect(c);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, head, (size_t)h), h);
  assert_int_equal(write(fd, body, (size_t)n), n);
  /* Go keeps the connection open: the answer is read by its framing */
  h1c_conn k;
  h1c_response resp = {0};
  char err[256];
  h1c_init(&k, fd, NULL, err, sizeof err);
  h1c_deadline(&k, TL_TIMEOUT_MS);
  k.sent = 1;
  int rc = h1c_read(&k, "POST", &resp);
  if (rc != H1C_OK)
    printf("%s\n", err);
  assert_int_equal(rc, H1C_OK);
  r->status = resp.status;
  r->head = strdup(resp.head);
  r->body = strdup(resp.body);
  h1c_response_free(&resp);
  h1c_release(&k);
  close(fd);
}

/* The "baton" of an answer, copied into out (cap bytes); "" for null. */
static void baton_of(const char *body, char *out, size_t cap) {
  const char *b = strstr(body, "\"baton\":");
  assert_non_null(b);
  b += strlen("\"baton\":");
  out[0] = '\0';
  if (*b != '"')
    return;
  const char *e = strchr(b + 1, '"');
  assert_non_null(e);
  assert_true((size_t)(e - b - 1) < cap);
  memcpy(out, b + 1, (size_t)(e - b - 1));
  out[e - b - 1] = '\0';
}

/* One pipeline on the stream whose baton is in baton (updated from the
 * answer); the answer must be 200 and hold `want`. */
static void step(const struct tl_child *c, char *baton, const char *requests, const char *want) {
  struct tl_resp r;
  go_pipeline(c, NULL, baton[0] ? baton : NULL, requests, &r);
  if (r.status != 200 || (want != NULL && strstr(r.body, want) == NULL))
    printf("sent %s\ngot %d %s\n", requests, r.status, r.body);
  assert_int_equal(r.status, 200);
  if (want != NULL)
    assert_non_null(strstr(r.body, want));
  baton_of(r.body, baton, 128);
  tl_resp_free(&r);
}

static void test_go_client(void **state) {
  struct tl_child *c = *state;
  tl_start(c, "goclient", 0, NULL);
  char baton[128] = "";
  /* db.Exec: one execute, no baton yet, want_rows false */
  step(c, baton,
       "[{\"type\":\"execute\",\"stmt\":{\"sql\":\"CREATE TABLE t(i INTEGER UNIQUE, s TEXT, b BLOB, f "
       "REAL, n)\",\"want_rows\":false}}]",
       "\"type\":\"ok\"");
  assert_true(baton[0] != '\0');
  /* positional args as Go encodes them: an integer as a string, a float as
   * a number, a blob in unpadded base64 (0x00 0x01 0x02 0x03), a nil */
  step(c, baton,
       "[{\"type\":\"execute\",\"stmt\":{\"sql\":\"INSERT INTO t VALUES (?, ?, ?, ?, ?)\",\"args\":["
       "{\"type\":\"integer\",\"value\":\"1\"},{\"type\":\"text\",\"value\":\"one\"},"
       "{\"type\":\"blob\",\"base64\":\"AAECAw\"},{\"type\":\"float\",\"value\":1.5},{\"type\":\"null\"}],"
       "\"want_rows\":false}}]",
       "\"affected_row_count\":1");
  /* named args: sql.Named("i", 2) arrives as the bare name */
  step(c, baton,
       "[{\"type\":\"execute\",\"stmt\":{\"sql\":\"INSERT INTO t(i, s) VALUES (:i, :s)\",\"named_args\":["
       "{\"name\":\"i\",\"value\":{\"type\":\"integer\",\"value\":\"2\"}},"
       "{\"name\":\"s\",\"value\":{\"type\":\"text\",\"value\":\"two\"}}],\"want_rows\":false}}]",
       "\"affected_row_count\":1");
  /* db.Query reads back what was written, blob and all */
  step(c, baton,
       "[{\"type\":\"execute\",\"stmt\":{\"sql\":\"SELECT i, s, b, f, n FROM t WHERE i = 1\","
       "\"want_rows\":true}}]",
       "{\"type\":\"blob\",\"base64\":\"AAECAw");
  step(c, baton,
       "[{\"type\":\"execute\",\"stmt\":{\"sql\":\"SELECT s FROM t WHERE i = 2\",\"want_rows\":true}}]",
       "\"value\":\"two\"");
  /* db.Prepare: store_sql, then execute by sql_id, then Stmt.Close */
  step(c, baton, "[{\"type\":\"store_sql\",\"sql\":\"SELECT count(*) FROM t WHERE i > ?\",\"sql_id\":0}]",
       "\"type\":\"ok\"");
  step(c, baton,
       "[{\"type\":\"execute\",\"stmt\":{\"sql_id\":0,\"args\":[{\"type\":\"integer\",\"value\":\"0\"}],"
       "\"want_rows\":true}}]",
       "\"value\":\"2\"");
  step(c, baton, "[{\"type\":\"close_sql\",\"sql_id\":0}]", "\"type\":\"ok\"");
  /* a constraint error: the result is an error, the stream goes on */
  step(c, baton,
       "[{\"type\":\"execute\",\"stmt\":{\"sql\":\"INSERT INTO t(i) VALUES (?)\",\"args\":[{\"type\":"
       "\"integer\",\"value\":\"1\"}],\"want_rows\":false}}]",
       "UNIQUE constraint failed");
  /* db.Begin: BEGIN, an insert, COMMIT; then one rolled back */
  step(c, baton, "[{\"type\":\"execute\",\"stmt\":{\"sql\":\"BEGIN\",\"want_rows\":false}}]",
       "\"type\":\"ok\"");
  step(c, baton,
       "[{\"type\":\"execute\",\"stmt\":{\"sql\":\"INSERT INTO t(i) VALUES (3)\",\"want_rows\":false}}]",
       "\"affected_row_count\":1");
  step(c, baton, "[{\"type\":\"execute\",\"stmt\":{\"sql\":\"COMMIT\",\"want_rows\":false}}]",
       "\"type\":\"ok\"");
  step(c, baton, "[{\"type\":\"execute\",\"stmt\":{\"sql\":\"BEGIN\",\"want_rows\":false}}]",
       "\"type\":\"ok\"");
  step(c, baton,
       "[{\"type\":\"execute\",\"stmt\":{\"sql\":\"INSERT INTO t(i) VALUES (4)\",\"want_rows\":false}}]",
       "\"affected_row_count\":1");
  step(c, baton, "[{\"type\":\"execute\",\"stmt\":{\"sql\":\"ROLLBACK\",\"want_rows\":false}}]",
       "\"type\":\"ok\"");
  /* Exec of two statements: one batch, chained, its ROLLBACK step skipped */
  step(c, baton,
       "[{\"type\":\"batch\",\"batch\":{\"steps\":["
       "{\"stmt\":{\"sql\":\"INSERT INTO t(i) VALUES (5)\",\"want_rows\":false}},"
       "{\"stmt\":{\"sql\":\"INSERT INTO t(i) VALUES "
       "(6)\",\"want_rows\":false},\"condition\":{\"type\":\"ok\","
       "\"step\":0}},"
       "{\"stmt\":{\"sql\":\"ROLLBACK\",\"want_rows\":false},\"condition\":{\"type\":\"not\",\"cond\":{"
       "\"type\":"
       "\"ok\",\"step\":1}}}]}}]",
       "\"step_results\":[{");
  /* the same with its second step failing: the ROLLBACK step runs */
  step(c, baton,
       "[{\"type\":\"batch\",\"batch\":{\"steps\":["
       "{\"stmt\":{\"sql\":\"BEGIN\",\"want_rows\":false}},"
       "{\"stmt\":{\"sql\":\"INSERT INTO t(i) VALUES "
       "(7)\",\"want_rows\":false},\"condition\":{\"type\":\"ok\","
       "\"step\":0}},"
       "{\"stmt\":{\"sql\":\"INSERT INTO t(i) VALUES "
       "(1)\",\"want_rows\":false},\"condition\":{\"type\":\"ok\","
       "\"step\":1}},"
       "{\"stmt\":{\"sql\":\"ROLLBACK\",\"want_rows\":false},\"condition\":{\"type\":\"not\",\"cond\":{"
       "\"type\":"
       "\"ok\",\"step\":2}}}]}}]",
       "UNIQUE constraint failed");
  step(c, baton,
       "[{\"type\":\"execute\",\"stmt\":{\"sql\":\"SELECT group_concat(i) FROM t\",\"want_rows\":true}}]",
       "\"value\":\"1,2,3,5,6\"");
  /* the stream is left open, as the Go client leaves it */
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  assert_int_equal(tl_sql_int(c->db, "SELECT count(*) FROM t"), 5);
}

/* With --token: Go sends "Authorization: Bearer <jwt>" only when it has
 * one; without, the refusal is a body the client reads ({"message","code"}). */
static void test_go_client_token(void **state) {
  struct tl_child *c = *state;
  FILE *f = fopen("goclient.token", "w");
  assert_non_null(f);
  fputs("s3cret-go-token\n", f);
  fclose(f);
  tl_start(c, "gotoken", 0, TL_ARGS("--token-file", "goclient.token"));
  struct tl_resp r;
  const char *q = "[{\"type\":\"execute\",\"stmt\":{\"sql\":\"SELECT 41 + 1\",\"want_rows\":true}}]";
  go_pipeline(c, NULL, NULL, q, &r);
  assert_int_equal(r.status, 401);
  assert_non_null(strstr(r.body, "\"message\":"));
  assert_non_null(strstr(r.body, "\"code\":"));
  tl_resp_free(&r);
  go_pipeline(c, "s3cret-go-token", NULL, q, &r);
  assert_int_equal(r.status, 200);
  assert_non_null(strstr(r.body, "\"value\":\"42\""));
  tl_resp_free(&r);
  unlink("goclient.token");
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* ---- Python's libsql-client over WebSocket ------------------------------------- */

/* Send one text message as json.dumps writes it. */
static void py_send(int fd, const char *msg) { assert_int_equal(wsc_send_text(fd, msg), 0); }

/* The next message must hold every one of want[] (NULL-terminated). */
static void py_expect(int fd, const char *const *want) {
  char buf[16384];
  int code = 0;
  long n = wsc_read_text(fd, buf, sizeof buf, &code);
  if (n < 0)
    printf("no message (%ld, close code %d)\n", n, code);
  assert_true(n >= 0);
  for (const char *const *w = want; *w != NULL; w++) {
    if (strstr(buf, *w) == NULL)
      printf("wanted %s in %s\n", *w, buf);
    assert_non_null(strstr(buf, *w));
  }
}
#define PY_EXPECT(fd, ...) py_expect(fd, (const char *const[]){__VA_ARGS__, NULL})

/* client.execute(sql_json's stmt): three requests at once, three answers. */
static void py_execute(int fd, const char *stmt, const char *want) {
  char msg[4096];
  py_send(fd, "{\"type\": \"request\", \"request_id\": 0, \"request\": {\"type\": \"open_stream\", "
              "\"stream_id\": 0}}");
  snprintf(
      msg, sizeof msg,
      "{\"type\": \"request\", \"request_id\": 1, \"request\": {\"type\": \"execute\", \"stream_id\": 0, "
      "\"stmt\": %s}}",
      stmt);
  py_send(fd, msg);
  py_send(fd, "{\"type\": \"request\", \"request_id\": 2, \"request\": {\"type\": \"close_stream\", "
              "\"stream_id\": 0}}");
  PY_EXPECT(fd, "\"type\":\"response_ok\"", "\"request_id\":0", "\"type\":\"open_stream\"");
  PY_EXPECT(fd, "\"request_id\":1", want);
  PY_EXPECT(fd, "\"type\":\"response_ok\"", "\"request_id\":2", "\"type\":\"close_stream\"");
}

static void test_python_client(void **state) {
  struct tl_child *c = *state;
  tl_start(c, "pyclient", 0, NULL);
  char head[2048], v[64];
  int fd = wsc_tcp(c->port, 0);
  assert_true(fd >= 0);
  assert_int_equal(wsc_handshake(fd, "/", "hrana2",
                                 "Accept: */*\r\nAccept-Encoding: gzip, deflate\r\nUser-Agent: Python/3.11 "
                                 "aiohttp/3.9.5\r\nSec-WebSocket-Extensions: permessage-deflate; "
                                 "client_max_window_bits\r\n",
                                 head, sizeof head),
                   101);
  assert_string_equal(wsc_header(head, "sec-websocket-protocol", v, sizeof v), "hrana2");
  assert_null(wsc_header(head, "sec-websocket-extensions", v, sizeof v)); /* frames stay plain */
  py_send(fd, "{\"type\": \"hello\", \"jwt\": null}");
  PY_EXPECT(fd, "\"type\":\"hello_ok\"");

  py_execute(fd,
             "{\"sql\": \"CREATE TABLE t(i INTEGER UNIQUE, s TEXT, b BLOB, f REAL, n)\", \"args\": [], "
             "\"named_args\": [], \"want_rows\": true}",
             "\"type\":\"execute\"");
  /* json.dumps escapes: caf\u00e9 \u2615 and U+1F389 as a surrogate pair */
  py_execute(fd,
             "{\"sql\": \"INSERT INTO t VALUES (?, ?, ?, ?, ?)\", \"args\": [{\"type\": \"integer\", "
             "\"value\": \"1\"}, {\"type\": \"text\", \"value\": \"caf\\u00e9 \\u2615 \\ud83c\\udf89\"}, "
             "{\"type\": \"blob\", \"base64\": \"AAECAw==\"}, {\"type\": \"float\", \"value\": 1.5}, "
             "{\"type\": \"null\"}], \"named_args\": [], \"want_rows\": true}",
             "\"affected_row_count\":1");
  py_execute(fd,
             "{\"sql\": \"INSERT INTO t(i, s) VALUES (:i, :s)\", \"args\": [], \"named_args\": [{\"name\": "
             "\":i\", \"value\": {\"type\": \"integer\", \"value\": \"2\"}}, {\"name\": \":s\", \"value\": "
             "{\"type\": \"text\", \"value\": \"two\"}}], \"want_rows\": true}",
             "\"affected_row_count\":1");
  /* what was stored is what Python sent: UTF-8 of the escapes, the blob's bytes */
  py_execute(fd,
             "{\"sql\": \"SELECT s, hex(s), hex(b), f FROM t WHERE i = 1\", \"args\": [], \"named_args\": "
             "[], \"want_rows\": true}",
             "\"value\":\"636166C3A920E2989520F09F8E89\"");
  /* a constraint error: response_error for the execute alone */
  py_send(fd, "{\"type\": \"request\", \"request_id\": 0, \"request\": {\"type\": \"open_stream\", "
              "\"stream_id\": 0}}");
  py_send(fd, "{\"type\": \"request\", \"request_id\": 1, \"request\": {\"type\": \"execute\", "
              "\"stream_id\": 0, \"stmt\": {\"sql\": \"INSERT INTO t(i) VALUES (1)\", \"args\": [], "
              "\"named_args\": [], \"want_rows\": true}}}");
  py_send(fd, "{\"type\": \"request\", \"request_id\": 2, \"request\": {\"type\": \"close_stream\", "
              "\"stream_id\": 0}}");
  PY_EXPECT(fd, "\"request_id\":0", "response_ok");
  PY_EXPECT(fd, "\"type\":\"response_error\"", "\"request_id\":1", "UNIQUE constraint failed");
  PY_EXPECT(fd, "\"request_id\":2", "response_ok");

  /* client.batch([insert 3, insert 4]): BEGIN, the steps, COMMIT, ROLLBACK;
   * 2 + 3 entries each in step_results and step_errors */
  const char *batch_fmt =
      "{\"type\": \"request\", \"request_id\": 1, \"request\": {\"type\": \"batch\", \"stream_id\": 0, "
      "\"batch\": {\"steps\": [{\"stmt\": {\"sql\": \"BEGIN\", \"want_rows\": false}}, {\"condition\": "
      "{\"type\": \"ok\", \"step\": 0}, \"stmt\": {\"sql\": \"INSERT INTO t(i) VALUES (%d)\", \"args\": [], "
      "\"named_args\": [], \"want_rows\": true}}, {\"condition\": {\"type\": \"ok\", \"step\": 1}, \"stmt\": "
      "{\"sql\": \"INSERT INTO t(i) VALUES (%d)\", \"args\": [], \"named_args\": [], \"want_rows\": true}}, "
      "{\"condition\": {\"type\": \"ok\", \"step\": 2}, \"stmt\": {\"sql\": \"COMMIT\", \"want_rows\": "
      "false}}, {\"condition\": {\"type\": \"not\", \"cond\": {\"type\": \"ok\", \"step\": 3}}, \"stmt\": "
      "{\"sql\": \"ROLLBACK\", \"want_rows\": false}}]}}}";
  char msg[4096];
  for (int round = 0; round < 2; round++) {
    py_send(fd, "{\"type\": \"request\", \"request_id\": 0, \"request\": {\"type\": \"open_stream\", "
                "\"stream_id\": 0}}");
    /* the second round's second insert breaks the UNIQUE: all of it undone */
    snprintf(msg, sizeof msg, batch_fmt, round == 0 ? 3 : 5, round == 0 ? 4 : 1);
    py_send(fd, msg);
    py_send(fd, "{\"type\": \"request\", \"request_id\": 2, \"request\": {\"type\": \"close_stream\", "
                "\"stream_id\": 0}}");
    PY_EXPECT(fd, "\"request_id\":0");
    if (round == 0)
      PY_EXPECT(fd, "\"request_id\":1", "\"type\":\"batch\"", "\"step_errors\":[null,null,null,null,null]",
                /* ROLLBACK skipped: */ "},null]");
    else
      PY_EXPECT(fd, "\"request_id\":1", "UNIQUE constraint failed");
    PY_EXPECT(fd, "\"request_id\":2");
  }

  /* a transaction: open_stream + BEGIN, an insert, COMMIT + close_stream;
   * then one rolled back */
  for (int round = 0; round < 2; round++) {
    py_send(fd, "{\"type\": \"request\", \"request_id\": 0, \"request\": {\"type\": \"open_stream\", "
                "\"stream_id\": 0}}");
    py_send(fd, "{\"type\": \"request\", \"request_id\": 1, \"request\": {\"type\": \"execute\", "
                "\"stream_id\": 0, \"stmt\": {\"sql\": \"BEGIN\", \"want_rows\": false}}}");
    PY_EXPECT(fd, "\"request_id\":0");
    PY_EXPECT(fd, "\"request_id\":1", "response_ok");
    snprintf(msg, sizeof msg,
             "{\"type\": \"request\", \"request_id\": 0, \"request\": {\"type\": \"execute\", \"stream_id\": "
             "0, \"stmt\": {\"sql\": \"INSERT INTO t(i) VALUES (%d)\", \"args\": [], \"named_args\": [], "
             "\"want_rows\": true}}}",
             10 + round);
    py_send(fd, msg);
    PY_EXPECT(fd, "\"request_id\":0", "\"affected_row_count\":1");
    snprintf(msg, sizeof msg,
             "{\"type\": \"request\", \"request_id\": 0, \"request\": {\"type\": \"execute\", \"stream_id\": "
             "0, \"stmt\": {\"sql\": \"%s\", \"want_rows\": false}}}",
             round == 0 ? "COMMIT" : "ROLLBACK");
    py_send(fd, msg);
    py_send(fd, "{\"type\": \"request\", \"request_id\": 1, \"request\": {\"type\": \"close_stream\", "
                "\"stream_id\": 0}}");
    PY_EXPECT(fd, "\"request_id\":0", "response_ok");
    PY_EXPECT(fd, "\"request_id\":1", "response_ok");
  }
  py_execute(fd,
             "{\"sql\": \"SELECT group_concat(i) FROM (SELECT i FROM t ORDER BY i)\", \"args\": [], "
             "\"named_args\": [], \"want_rows\": true}",
             "\"value\":\"1,2,3,4,10\"");
  close(fd);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  assert_int_equal(tl_sql_int(c->db, "SELECT count(*) FROM t"), 5);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_go_client, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_go_client_token, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_python_client, tl_setup, tl_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
