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
 */
#include <cmocka.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "child.h"
#include "h1client.h"

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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_go_client, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_go_client_token, tl_setup, tl_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
