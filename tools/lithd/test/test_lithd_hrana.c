/*
 * test_lithd_hrana — Hrana over HTTP (request/hrana.h, routes/hrana_http.h)
 * against a lithd, raw JSON pipelines, no client library (the libSQL
 * client's own runs are tools/lithd/test/hrana/, with node): values at their
 * limits both ways, batch conditions (on a skipped step too) and the
 * transaction steps, named arguments, the error codes, stored SQL and its
 * bounds, batons (forged, naming a free slot, reused, expired, another
 * database's), the stream table's bound, the
 * gate's refusals in Hrana's shape, --only-named, and interactive
 * transactions: they hold the writer while open, commit, roll back, end by
 * themselves past their bounds, and the writer serves others afterwards;
 * deferred and read-only ones on a snapshot, and a stale snapshot's write;
 * the client's savepoints; PRAGMA foreign_keys in a batch.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "child.h"
#include "nodes.h"

/* ---- Helpers ------------------------------------------------------------------ */

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* How long pipeline_at waits for an answer, ms (0: TL_TIMEOUT_MS): longer
 * for one that waits on purpose behind a slow command, which a sanitizer
 * on a busy machine makes slower still. */
static int answer_ms;

/* POST path {"baton": baton, "requests": requests (JSON text)}: the
 * answer's status into *status and its body parsed (the caller decrefs). */
static json_t *pipeline_at(const struct tl_child *c, const char *path, const char *auth, const char *baton,
                           const char *requests, int *status) {
  size_t n = strlen(requests) + (baton ? strlen(baton) : 4) + 64;
  char *body = malloc(n);
  struct tl_resp r;
  json_error_t jerr;
  assert_non_null(body);
  if (baton)
    snprintf(body, n, "{\"baton\":\"%s\",\"requests\":%s}", baton, requests);
  else
    snprintf(body, n, "{\"baton\":null,\"requests\":%s}", requests);
  tl_read_within(tl_send(c, "POST", path, auth, body), &r, answer_ms > 0 ? answer_ms : TL_TIMEOUT_MS);
  free(body);
  *status = r.status;
  json_t *j = json_loads(r.body, JSON_ALLOW_NUL, &jerr);
  if (j == NULL)
    fprintf(stderr, "not JSON (%d): %s\n%s\n", r.status, jerr.text, r.body);
  assert_non_null(j);
  if (r.status != 200) { /* Hrana's error shape, exactly application/json */
    assert_non_null(strstr(r.head, "content-type: application/json\r\n"));
    assert_non_null(json_object_get(j, "message"));
  }
  tl_resp_free(&r);
  return j;
}

/* The same on /v3/pipeline, asserting 200. */
static json_t *pipeline(const struct tl_child *c, const char *baton, const char *requests) {
  int status;
  json_t *j = pipeline_at(c, "/v3/pipeline", NULL, baton, requests, &status);
  if (status != 200)
    fprintf(stderr, "status %d: %s\n", status, json_dumps(j, 0));
  assert_int_equal(status, 200);
  return j;
}

/* results[k] of an answer. */
static json_t *result(json_t *answer, size_t k) {
  json_t *rs = json_object_get(answer, "results");
  assert_true(json_is_array(rs));
  assert_true(k < json_array_size(rs));
  return json_array_get(rs, k);
}

/* results[k] must be an error with this code (and message containing want). */
static void expect_error(json_t *answer, size_t k, const char *code, const char *want) {
  json_t *r = result(answer, k);
  const char *type = json_string_value(json_object_get(r, "type"));
  if (type == NULL || strcmp(type, "error") != 0)
    fprintf(stderr, "result %zu is no error: %s\n", k, json_dumps(r, 0));
  assert_string_equal(type, "error");
  json_t *e = json_object_get(r, "error");
  const char *got = json_string_value(json_object_get(e, "code"));
  const char *msg = json_string_value(json_object_get(e, "message"));
  if (strcmp(got, code) != 0 || (want && !strstr(msg, want)))
    fprintf(stderr, "result %zu: %s: %s\n", k, got, msg);
  assert_string_equal(got, code);
  if (want)
    assert_non_null(strstr(msg, want));
}

/* results[k]'s response (asserting it is ok and of the type). */
static json_t *response(json_t *answer, size_t k, const char *type) {
  json_t *r = result(answer, k);
  const char *t = json_string_value(json_object_get(r, "type"));
  if (t == NULL || strcmp(t, "ok") != 0)
    fprintf(stderr, "result %zu is not ok: %s\n", k, json_dumps(r, 0));
  assert_string_equal(t, "ok");
  json_t *resp = json_object_get(r, "response");
  assert_string_equal(json_string_value(json_object_get(resp, "type")), type);
  return resp;
}

/* The first cell of an execute's result at k, as the value object. */
static json_t *cell(json_t *answer, size_t k, size_t row, size_t col) {
  json_t *rows = json_object_get(json_object_get(response(answer, k, "execute"), "result"), "rows");
  return json_array_get(json_array_get(rows, row), col);
}

/* One statement's execute request. */
#define EXEC(sql) "{\"type\":\"execute\",\"stmt\":{\"sql\":\"" sql "\"}}"
#define CLOSE "{\"type\":\"close\"}"

/* SELECT count(*) FROM t through a fresh stream. */
static int64_t count_rows(const struct tl_child *c, const char *table) {
  char req[256];
  snprintf(req, sizeof req,
           "[{\"type\":\"execute\",\"stmt\":{\"sql\":\"SELECT count(*) FROM %s\"}}," CLOSE "]", table);
  json_t *a = pipeline(c, NULL, req);
  int64_t n = strtoll(json_string_value(json_object_get(cell(a, 0, 0, 0), "value")), NULL, 10);
  json_decref(a);
  return n;
}

static char *baton_of(json_t *a) {
  const char *b = json_string_value(json_object_get(a, "baton"));
  assert_non_null(b);
  return strdup(b);
}

/* ---- Tests -------------------------------------------------------------------- */

/* The pipelines below are JSON written as concatenated literals, one
 * request a line; clang-format would break them inside the macros. */
/* clang-format off */

static void test_values(void **state) {
  struct tl_child *c = *state;
  tl_start(c, "values", 0, NULL);
  json_t *a = pipeline(
      c, NULL,
      "[" EXEC("CREATE TABLE v(i INTEGER, r REAL, t TEXT, b BLOB)")
      ",{\"type\":\"execute\",\"stmt\":{\"sql\":\"INSERT INTO v VALUES (?, ?, ?, ?), (?, ?, ?, ?)\","
      "\"args\":[{\"type\":\"integer\",\"value\":\"9223372036854775807\"},{\"type\":\"float\",\"value\":1},"
      "{\"type\":\"text\",\"value\":\"a\\u0000b \\u00e9\"},{\"type\":\"blob\",\"base64\":\"AQI=\"},"
      "{\"type\":\"integer\",\"value\":\"-9223372036854775808\"},{\"type\":\"float\",\"value\":0.1},"
      "{\"type\":\"null\"},{\"type\":\"blob\",\"base64\":\"AQI\"}]}}"
      "," EXEC("SELECT i, r, t, b, typeof(r) FROM v ORDER BY i DESC") "," CLOSE "]");
  response(a, 1, "execute");
  json_t *ins = json_object_get(response(a, 1, "execute"), "result");
  assert_int_equal(json_integer_value(json_object_get(ins, "affected_row_count")), 2);
  assert_string_equal(json_string_value(json_object_get(ins, "last_insert_rowid")), "2");
  /* every integer a string, exact at both ends */
  assert_string_equal(json_string_value(json_object_get(cell(a, 2, 0, 0), "type")), "integer");
  assert_string_equal(json_string_value(json_object_get(cell(a, 2, 0, 0), "value")), "9223372036854775807");
  assert_string_equal(json_string_value(json_object_get(cell(a, 2, 1, 0), "value")), "-9223372036854775808");
  /* a whole float stays a REAL, 0.1 reads back as the same double */
  assert_string_equal(json_string_value(json_object_get(cell(a, 2, 0, 4), "value")), "real");
  assert_true(json_real_value(json_object_get(cell(a, 2, 1, 1), "value")) == 0.1);
  /* text with a NUL, UTF-8 */
  json_t *t = json_object_get(cell(a, 2, 0, 2), "value");
  assert_int_equal(json_string_length(t), 6);
  assert_memory_equal(json_string_value(t), "a\0b \xc3\xa9", 6);
  assert_string_equal(json_string_value(json_object_get(cell(a, 2, 1, 2), "type")), "null");
  /* blobs padded out, whether they came padded or not */
  assert_string_equal(json_string_value(json_object_get(cell(a, 2, 0, 3), "base64")), "AQI=");
  assert_string_equal(json_string_value(json_object_get(cell(a, 2, 1, 3), "base64")), "AQI=");
  json_decref(a);

  /* +-Infinity: 1e999 in the text (jansson refuses to read it, so the raw body) */
  struct tl_resp r;
  tl_http(c, "POST", "/v2/pipeline", NULL,
          "{\"baton\":null,\"requests\":[" EXEC("SELECT 1e999, -1e999, 2.5") "]}", &r);
  assert_int_equal(r.status, 200);
  assert_non_null(strstr(r.body, "{\"type\":\"float\",\"value\":1e999},{\"type\":\"float\",\"value\":-1e999},"
                                 "{\"type\":\"float\",\"value\":2.5}"));
  assert_null(strstr(r.body, "rows_read")); /* v2: no v3 fields */
  tl_resp_free(&r);

  /* want_rows false runs the statement and sends no rows */
  a = pipeline(c, NULL,
               "[{\"type\":\"execute\",\"stmt\":{\"sql\":\"INSERT INTO v(i) VALUES (5) RETURNING i\","
               "\"want_rows\":false}}," EXEC("SELECT count(*) FROM v WHERE i = 5") "]");
  assert_int_equal(json_array_size(json_object_get(json_object_get(response(a, 0, "execute"), "result"), "rows")),
                   0);
  assert_string_equal(json_string_value(json_object_get(cell(a, 1, 0, 0), "value")), "1");
  json_decref(a);

  /* bad values: their request's error, the pipeline goes on */
  a = pipeline(c, NULL,
               "[{\"type\":\"execute\",\"stmt\":{\"sql\":\"SELECT ?\",\"args\":[{\"type\":\"integer\","
               "\"value\":\"9223372036854775808\"}]}},"
               "{\"type\":\"execute\",\"stmt\":{\"sql\":\"SELECT ?\",\"args\":[{\"type\":\"blob\",\"base64\":"
               "\"A\"}]}},"
               "{\"type\":\"execute\",\"stmt\":{\"sql\":\"SELECT ?\",\"args\":[{\"type\":\"date\"}]}},"
               "{\"type\":\"execute\",\"stmt\":{\"sql\":\"SELECT ?\",\"args\":[{\"type\":\"text\",\"value\":\"ok\"}]"
               ",\"unknown_field\":1}}]");
  expect_error(a, 0, "PROTO_ERROR", "64-bit");
  expect_error(a, 1, "PROTO_ERROR", "base64");
  expect_error(a, 2, "PROTO_ERROR", "unknown value type");
  assert_string_equal(json_string_value(json_object_get(cell(a, 3, 0, 0), "value")), "ok");
  json_decref(a);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

static void test_errors_and_arguments(void **state) {
  struct tl_child *c = *state;
  tl_start(c, "errors", 0, NULL);
  json_t *a = pipeline(
      c, NULL,
      "[" EXEC("CREATE TABLE u(id INTEGER PRIMARY KEY, k TEXT UNIQUE)") "," EXEC("INSERT INTO u VALUES (1, 'a')")
      "," EXEC("INSERT INTO u VALUES (1, 'b')") "," EXEC("INSERT INTO u VALUES (2, 'a')") "," EXEC("SELEKT 1")
      "," EXEC("SELECT * FROM nowhere") "," EXEC("") "," EXEC("SELECT 1; SELECT 2")
      "," EXEC("ATTACH 'x.db' AS x") "," EXEC("PRAGMA journal_mode = delete")
      ",{\"type\":\"execute\",\"stmt\":{\"sql\":\"SELECT ?, ?\",\"args\":[{\"type\":\"null\"}]}}"
      ",{\"type\":\"execute\",\"stmt\":{\"sql\":\"SELECT :a\",\"args\":[{\"type\":\"null\"}],"
      "\"named_args\":[{\"name\":\"a\",\"value\":{\"type\":\"null\"}}]}}"
      ",{\"type\":\"explode\"},{\"type\":\"execute\"}"
      ",{\"type\":\"execute\",\"stmt\":{\"sql\":\"SELECT :a || @b || $c\",\"named_args\":["
      "{\"name\":\"a\",\"value\":{\"type\":\"text\",\"value\":\"x\"}},"
      "{\"name\":\"@b\",\"value\":{\"type\":\"text\",\"value\":\"y\"}},"
      "{\"name\":\"c\",\"value\":{\"type\":\"text\",\"value\":\"z\"}}]}}"
      ",{\"type\":\"execute\",\"stmt\":{\"sql\":\"SELECT :a\",\"named_args\":["
      "{\"name\":\"b\",\"value\":{\"type\":\"null\"}}]}}]");
  response(a, 1, "execute");
  expect_error(a, 2, "SQLITE_CONSTRAINT", "UNIQUE constraint failed: u.id");
  expect_error(a, 3, "SQLITE_CONSTRAINT", "UNIQUE constraint failed: u.k");
  expect_error(a, 4, "SQL_PARSE_ERROR", "syntax error");
  expect_error(a, 5, "SQLITE_ERROR", "no such table");
  expect_error(a, 6, "SQL_NO_STATEMENT", NULL);
  expect_error(a, 7, "SQL_MANY_STATEMENTS", NULL);
  expect_error(a, 8, "SQLITE_AUTH", "not authorized");
  expect_error(a, 9, "SQLITE_AUTH", "not authorized");
  expect_error(a, 10, "ARGS_INVALID", "2 parameters, 1 given");
  expect_error(a, 11, "ARGS_BOTH_POSITIONAL_AND_NAMED", NULL);
  expect_error(a, 12, "PROTO_ERROR", "unknown request type");
  expect_error(a, 13, "PROTO_ERROR", "\"stmt\"");
  assert_string_equal(json_string_value(json_object_get(cell(a, 14, 0, 0), "value")), "xyz");
  expect_error(a, 15, "ARGS_INVALID", "no parameter");
  json_decref(a);
  assert_int_equal(count_rows(c, "u"), 1);

  /* describe: parameters, columns, read-only or not, never run */
  a = pipeline(c, NULL,
               "[{\"type\":\"describe\",\"sql\":\"SELECT k, id + 1 FROM u WHERE id = :id AND k = ?\"},"
               "{\"type\":\"describe\",\"sql\":\"DELETE FROM u\"},{\"type\":\"describe\",\"sql\":\"EXPLAIN SELECT 1\"}]");
  json_t *d = json_object_get(response(a, 0, "describe"), "result");
  assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(d, "params"), 0), "name")),
                      ":id");
  assert_true(json_is_null(json_object_get(json_array_get(json_object_get(d, "params"), 1), "name")));
  assert_string_equal(
      json_string_value(json_object_get(json_array_get(json_object_get(d, "cols"), 0), "decltype")), "TEXT");
  assert_true(json_is_true(json_object_get(d, "is_readonly")));
  d = json_object_get(response(a, 1, "describe"), "result");
  assert_true(json_is_false(json_object_get(d, "is_readonly")));
  assert_true(json_is_true(json_object_get(json_object_get(response(a, 2, "describe"), "result"), "is_explain")));
  json_decref(a);
  assert_int_equal(count_rows(c, "u"), 1); /* the DELETE described, not run */

  /* GET /v2, /v3 */
  tl_expect(c, "GET", "/v2", NULL, NULL, 200, NULL);
  tl_expect(c, "GET", "/v3", NULL, NULL, 200, NULL);
  /* a body that is no pipeline: HTTP 400, Hrana's error shape */
  int status;
  json_t *e = pipeline_at(c, "/v2/pipeline", NULL, NULL, "{}", &status);
  assert_int_equal(status, 400);
  assert_string_equal(json_string_value(json_object_get(e, "code")), "PROTO_ERROR");
  json_decref(e);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* Batches on a store: the local one, or (dq) a lithd --dqlite in front of
 * one fresh lith-node: the same steps must give the same answers. */
static void batch_conditions(struct tl_child *c, int dq) {
  t_node node;
  if (dq) {
    assert_int_equal(system("rm -rf node1"), 0);
    t_node_init(&node, 1); /* the one that bootstraps a cluster */
    assert_int_equal(t_node_start(&node, NULL, 10000), 0);
    tl_start(c, "batch", TL_NO_DB, TL_ARGS("--dqlite", node.address, "--dqlite-failover-ms", "3000"));
  } else {
    tl_start(c, "batch", 0, NULL);
  }
  /* autocommit: a failing step is undone alone, the others commit */
  json_t *a = pipeline(c, NULL,
                       "[{\"type\":\"batch\",\"batch\":{\"steps\":["
                       "{\"stmt\":{\"sql\":\"CREATE TABLE t(x INTEGER UNIQUE)\"}},"
                       "{\"stmt\":{\"sql\":\"INSERT INTO t VALUES (1), (2)\"}},"
                       "{\"stmt\":{\"sql\":\"INSERT INTO t VALUES (3), (1)\"}},"
                       "{\"stmt\":{\"sql\":\"INSERT INTO t VALUES (10)\"},\"condition\":{\"type\":\"error\",\"step\":2}},"
                       "{\"stmt\":{\"sql\":\"INSERT INTO t VALUES (20)\"},\"condition\":{\"type\":\"ok\",\"step\":2}},"
                       "{\"stmt\":{\"sql\":\"INSERT INTO t VALUES (30)\"},\"condition\":{\"type\":\"and\",\"conds\":["
                       "{\"type\":\"ok\",\"step\":1},{\"type\":\"not\",\"cond\":{\"type\":\"ok\",\"step\":2}}]}},"
                       "{\"stmt\":{\"sql\":\"INSERT INTO t VALUES (40)\"},\"condition\":{\"type\":\"or\",\"conds\":[]}},"
                       "{\"stmt\":{\"sql\":\"SELECT 1\"},\"condition\":{\"type\":\"is_autocommit\"}}"
                       "]}}]");
  json_t *r = json_object_get(response(a, 0, "batch"), "result");
  json_t *res = json_object_get(r, "step_results"), *errs = json_object_get(r, "step_errors");
  assert_int_equal(json_array_size(res), 8);
  assert_true(json_is_object(json_array_get(res, 1)) && json_is_null(json_array_get(errs, 1)));
  assert_true(json_is_null(json_array_get(res, 2)) && json_is_object(json_array_get(errs, 2)));
  assert_string_equal(json_string_value(json_object_get(json_array_get(errs, 2), "code")), "SQLITE_CONSTRAINT");
  assert_true(json_is_object(json_array_get(res, 3)));
  assert_true(json_is_null(json_array_get(res, 4)) && json_is_null(json_array_get(errs, 4))); /* skipped */
  assert_true(json_is_object(json_array_get(res, 5)));
  assert_true(json_is_null(json_array_get(res, 6)) && json_is_null(json_array_get(errs, 6)));
  assert_true(json_is_object(json_array_get(res, 7)));
  json_decref(a);
  assert_int_equal(count_rows(c, "t"), 4); /* 1, 2, 10, 30: step 2's 3 undone with it */

  /* client.batch(): BEGIN, steps, COMMIT if all ok, ROLLBACK if not: one
   * command either way (BEGIN and COMMIT known past comments, as SQLite
   * reads them) */
  static const char *const tx_batch =
      "[{\"type\":\"batch\",\"batch\":{\"steps\":["
      "{\"stmt\":{\"sql\":\"-- a transfer\\nBEGIN IMMEDIATE\"}},"
      "{\"stmt\":{\"sql\":\"INSERT INTO t VALUES (100)\"},\"condition\":{\"type\":\"ok\",\"step\":0}},"
      "{\"stmt\":{\"sql\":\"INSERT INTO t VALUES (%d)\"},\"condition\":{\"type\":\"ok\",\"step\":1}},"
      "{\"stmt\":{\"sql\":\"/* all ok */ COMMIT\"},\"condition\":{\"type\":\"ok\",\"step\":2}},"
      "{\"stmt\":{\"sql\":\"ROLLBACK\"},\"condition\":{\"type\":\"not\",\"cond\":{\"type\":\"ok\",\"step\":3}}}"
      "]}}," CLOSE "]";
  char req[1024];
  snprintf(req, sizeof req, tx_batch, 1); /* 1 exists: the whole transaction goes */
  a = pipeline(c, NULL, req);
  r = json_object_get(response(a, 0, "batch"), "result");
  assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(r, "step_errors"), 2), "code")),
                      "SQLITE_CONSTRAINT");
  assert_true(json_is_null(json_array_get(json_object_get(r, "step_results"), 3)));  /* no COMMIT */
  assert_true(json_is_object(json_array_get(json_object_get(r, "step_results"), 4))); /* ROLLBACK ran */
  assert_true(json_is_null(json_object_get(a, "baton")));
  json_decref(a);
  assert_int_equal(count_rows(c, "t"), 4); /* 100 undone too */
  snprintf(req, sizeof req, tx_batch, 200);
  a = pipeline(c, NULL, req);
  r = json_object_get(response(a, 0, "batch"), "result");
  assert_true(json_is_object(json_array_get(json_object_get(r, "step_results"), 3)));
  assert_true(json_is_null(json_array_get(json_object_get(r, "step_results"), 4)));
  json_decref(a);
  assert_int_equal(count_rows(c, "t"), 6);
  /* its steps run without a savepoint each (the ROLLBACK undoes them): a
   * statement that fails after changing rows (OR FAIL keeps them) leaves
   * nothing either */
  a = pipeline(c, NULL,
               "[{\"type\":\"batch\",\"batch\":{\"steps\":["
               "{\"stmt\":{\"sql\":\"BEGIN IMMEDIATE\"}},"
               "{\"stmt\":{\"sql\":\"INSERT INTO t VALUES (499)\"},\"condition\":{\"type\":\"ok\",\"step\":0}},"
               "{\"stmt\":{\"sql\":\"INSERT OR FAIL INTO t VALUES (500), (501), (1)\"},"
               "\"condition\":{\"type\":\"and\",\"conds\":[{\"type\":\"ok\",\"step\":1},"
               "{\"type\":\"not\",\"cond\":{\"type\":\"is_autocommit\"}}]}},"
               "{\"stmt\":{\"sql\":\"COMMIT\"},\"condition\":{\"type\":\"ok\",\"step\":2}},"
               "{\"stmt\":{\"sql\":\"ROLLBACK\"},\"condition\":{\"type\":\"not\",\"cond\":{\"type\":\"ok\",\"step\":3}}},"
               "{\"stmt\":{\"sql\":\"SELECT count(*) FROM t WHERE x >= 499\"}}"
               "]}}," CLOSE "]");
  r = json_object_get(response(a, 0, "batch"), "result");
  assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(r, "step_errors"), 2), "code")),
                      "SQLITE_CONSTRAINT");
  assert_string_equal(json_string_value(json_object_get(json_array_get(json_array_get(json_object_get(
                          json_array_get(json_object_get(r, "step_results"), 5), "rows"), 0), 0), "value")),
                      "0");
  json_decref(a);
  assert_int_equal(count_rows(c, "t"), 6);

  /* transaction statements out of place fail as SQLite fails them */
  a = pipeline(c, NULL, "[" EXEC("COMMIT") "," EXEC("ROLLBACK") "]");
  expect_error(a, 0, "SQLITE_ERROR", "no transaction is active");
  expect_error(a, 1, "SQLITE_ERROR", "no transaction is active");
  json_decref(a);

  /* sequence: runs until the first error; what ran before it stays */
  a = pipeline(c, NULL,
               "[{\"type\":\"sequence\",\"sql\":\"INSERT INTO t VALUES (300); -- a ; in a comment\\n"
               "INSERT INTO t VALUES (';'); INSERT INTO t VALUES (300); INSERT INTO t VALUES (400);\"},"
               "{\"type\":\"sequence\",\"sql\":\"CREATE TRIGGER tr AFTER INSERT ON t BEGIN SELECT 1; END; "
               "DROP TRIGGER tr\"}," CLOSE "]");
  expect_error(a, 0, "SQLITE_CONSTRAINT", NULL);
  if (dq) /* the dqlite writer sends one statement per call: a trigger's body is refused */
    expect_error(a, 1, "SQLITE_MISUSE", "one statement per call");
  else
    response(a, 1, "sequence");
  json_decref(a);
  assert_int_equal(count_rows(c, "t"), 8);

  /* executeMultiple's pipeline (a sequence, then close) with its own BEGIN:
   * one batch, what it leaves open at its error rolled back as the close
   * would, nothing held across requests; with its COMMIT it commits */
  a = pipeline(c, NULL,
               "[{\"type\":\"sequence\",\"sql\":\"BEGIN; INSERT INTO t VALUES (800); INSERT INTO t VALUES (1); "
               "INSERT INTO t VALUES (801); COMMIT\"}," CLOSE "]");
  expect_error(a, 0, "SQLITE_CONSTRAINT", "UNIQUE");
  assert_true(json_is_null(json_object_get(a, "baton")));
  json_decref(a);
  assert_int_equal(count_rows(c, "t"), 8);
  a = pipeline(c, NULL,
               "[{\"type\":\"sequence\",\"sql\":\"BEGIN; INSERT INTO t VALUES (800); INSERT INTO t VALUES (801); "
               "COMMIT\"}," CLOSE "]");
  response(a, 0, "sequence");
  json_decref(a);
  assert_int_equal(count_rows(c, "t"), 10);
  a = pipeline(c, NULL, "[" EXEC("DELETE FROM t WHERE x IN (800, 801)") "," CLOSE "]");
  json_decref(a);

  /* a step whose failure ends SQLite's transaction (OR ROLLBACK) cannot be
   * undone alone: the batch fails whole, nothing of it stays, and the
   * writer goes on */
  a = pipeline(c, NULL,
               "[{\"type\":\"batch\",\"batch\":{\"steps\":["
               "{\"stmt\":{\"sql\":\"INSERT INTO t VALUES (600)\"}},"
               "{\"stmt\":{\"sql\":\"INSERT OR ROLLBACK INTO t VALUES (601), (1)\"}},"
               "{\"stmt\":{\"sql\":\"INSERT INTO t VALUES (602)\"}}"
               "]}}," EXEC("INSERT INTO t VALUES (603)") "," CLOSE "]");
  expect_error(a, 0, "SQLITE_CONSTRAINT", "UNIQUE");
  response(a, 1, "execute");
  json_decref(a);
  assert_int_equal(count_rows(c, "t"), 9); /* 603 alone */

  /* describe: prepared where the policy runs, never stepped */
  a = pipeline(c, NULL,
               "[{\"type\":\"describe\",\"sql\":\"SELECT x AS y FROM t WHERE x > :lo\"},"
               "{\"type\":\"describe\",\"sql\":\"INSERT INTO t VALUES (?)\"}," CLOSE "]");
  json_t *d = json_object_get(response(a, 0, "describe"), "result");
  assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(d, "params"), 0), "name")), ":lo");
  assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(d, "cols"), 0), "name")), "y");
  assert_true(json_is_true(json_object_get(d, "is_readonly")));
  d = json_object_get(response(a, 1, "describe"), "result");
  assert_true(json_is_false(json_object_get(d, "is_readonly")));
  json_decref(a);

  /* a read-only batch runs on one snapshot; its write is refused */
  a = pipeline(c, NULL,
               "[{\"type\":\"batch\",\"batch\":{\"steps\":["
               "{\"stmt\":{\"sql\":\"BEGIN TRANSACTION READONLY\"}},"
               "{\"stmt\":{\"sql\":\"SELECT count(*) FROM t\"},\"condition\":{\"type\":\"ok\",\"step\":0}},"
               "{\"stmt\":{\"sql\":\"COMMIT\"},\"condition\":{\"type\":\"ok\",\"step\":1}},"
               "{\"stmt\":{\"sql\":\"ROLLBACK\"},\"condition\":{\"type\":\"not\",\"cond\":{\"type\":\"ok\",\"step\":2}}}"
               "]}}," CLOSE "]");
  r = json_object_get(response(a, 0, "batch"), "result");
  assert_string_equal(json_string_value(json_object_get(json_array_get(json_array_get(json_object_get(
                          json_array_get(json_object_get(r, "step_results"), 1), "rows"), 0), 0), "value")),
                      "9");
  assert_true(json_is_object(json_array_get(json_object_get(r, "step_results"), 2)));
  json_decref(a);

  if (dq) {
    /* what the dqlite store does not run, refused in words */
    a = pipeline(c, NULL,
                 "[{\"type\":\"batch\",\"batch\":{\"steps\":["
                 "{\"stmt\":{\"sql\":\"SAVEPOINT a\"}},"
                 "{\"stmt\":{\"sql\":\"INSERT INTO t VALUES (700)\"}}"
                 "]}}," EXEC("BEGIN") "," EXEC("ROLLBACK") "," CLOSE "]"); /* (an interactive transaction) */
    r = json_object_get(response(a, 0, "batch"), "result");
    assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(r, "step_errors"), 0), "code")),
                        "SQLITE_AUTH");
    assert_true(json_is_object(json_array_get(json_object_get(r, "step_results"), 1)));
    response(a, 1, "execute");
    response(a, 2, "execute");
    json_decref(a);
    a = pipeline(c, NULL,
                 "[{\"type\":\"batch\",\"batch\":{\"steps\":["
                 "{\"stmt\":{\"sql\":\"PRAGMA foreign_keys = off\"}},"
                 "{\"stmt\":{\"sql\":\"INSERT INTO t VALUES (701)\"}}"
                 "]}}," CLOSE "]");
    response(a, 0, "batch"); /* migrate()'s: runs there too (test_lithd_migrate) */
    json_decref(a);
    assert_int_equal(count_rows(c, "t"), 11);
    a = pipeline(c, NULL, "[" EXEC("DELETE FROM t WHERE x = 701") "]");
    json_decref(a);
  }
  /* a NULL of a DATETIME column reads null on both stores (the dqlite
   * node sends it as an empty ISO8601 text; Prisma's migrations read
   * their rolled_back_at so); a text there reads as the text */
  a = pipeline(c, NULL,
               "[" EXEC("CREATE TABLE dt(d DATETIME)") "," EXEC("INSERT INTO dt VALUES (NULL), ('2026-12-07')") "," EXEC(
                   "SELECT d FROM dt ORDER BY rowid") "]");
  assert_string_equal(json_string_value(json_object_get(cell(a, 2, 0, 0), "type")), "null");
  assert_string_equal(json_string_value(json_object_get(cell(a, 2, 1, 0), "value")), "2026-12-07");
  json_decref(a);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  if (dq) {
    assert_int_equal(t_node_stop(&node, SIGTERM, 5000), 0);
    assert_int_equal(system("rm -rf node1"), 0); /* the next test's node starts afresh */
  }
}

/* The number of columns of results[k] (an execute's or a batch step's). */
static size_t ncols_of(json_t *result) { return json_array_size(json_object_get(result, "cols")); }

/* After a migration adds a column, a statement each connection cached
 * before answers with the new columns: its first step prepares it again,
 * and its columns are read after it (one reader, so the read that cached
 * it is the one that runs it again; the writer's batch likewise). */
static void test_columns_after_schema_change(void **state) {
  struct tl_child *c = *state;
  tl_remove_db("reprepare.db");
  tl_start(c, "reprepare", 0, TL_ARGS("--readers", "1"));
#define WRITE_AND_READ                                                                                 \
  "{\"type\":\"batch\",\"batch\":{\"steps\":[{\"stmt\":{\"sql\":\"INSERT INTO s(a) VALUES ('w')\"}}," \
  "{\"stmt\":{\"sql\":\"SELECT * FROM s WHERE a = 'w'\"}}]}}"
  json_t *a = pipeline(c, NULL, "[" EXEC("CREATE TABLE s(a TEXT)") "," EXEC("INSERT INTO s VALUES ('r')") "]");
  json_decref(a);
  for (int pass = 0; pass < 2; pass++) { /* the first caches, the second runs after ALTER TABLE */
    a = pipeline(c, NULL, "[" EXEC("SELECT * FROM s WHERE a = 'r'") "," WRITE_AND_READ "]");
    json_t *read = json_object_get(response(a, 0, "execute"), "result");
    json_t *step = json_array_get(json_object_get(json_object_get(response(a, 1, "batch"), "result"), "step_results"), 1);
    assert_int_equal(ncols_of(read), pass ? 2 : 1);
    assert_int_equal(ncols_of(step), pass ? 2 : 1);
    if (pass) {
      assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(read, "cols"), 1), "name")), "b");
      assert_string_equal(json_string_value(json_object_get(cell(a, 0, 0, 1), "value")), "7");
      assert_string_equal(json_string_value(json_object_get(
                              json_array_get(json_array_get(json_object_get(step, "rows"), 0), 1), "value")),
                          "7");
    }
    json_decref(a);
    if (!pass) {
      a = pipeline(c, NULL, "[" EXEC("ALTER TABLE s ADD COLUMN b INTEGER DEFAULT 7") "," EXEC("DELETE FROM s WHERE a = 'w'") "]");
      response(a, 1, "execute");
      json_decref(a);
    }
  }
#undef WRITE_AND_READ
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

static void test_batch_conditions(void **state) { batch_conditions(*state, 0); }
static void test_batch_conditions_dqlite(void **state) { batch_conditions(*state, 1); }

static void test_stored_sql_and_batons(void **state) {
  struct tl_child *c = *state;
  tl_remove_db("batons-a.db");
  tl_remove_db("batons-b.db");
  tl_start(c, "batons", TL_NO_DB, TL_ARGS("--db", "a=batons-a.db", "--db", "b=batons-b.db", "--default", "a",
                                          "--stream-idle-ms", "400"));
  json_t *a = pipeline(c, NULL,
                       "[{\"type\":\"store_sql\",\"sql_id\":1,\"sql\":\"SELECT 41 + ?\"},"
                       "{\"type\":\"execute\",\"stmt\":{\"sql_id\":1,\"args\":[{\"type\":\"integer\",\"value\":\"1\"}]}},"
                       "{\"type\":\"store_sql\",\"sql_id\":1,\"sql\":\"SELECT 2\"},"
                       "{\"type\":\"execute\",\"stmt\":{\"sql_id\":7}},"
                       "{\"type\":\"execute\",\"stmt\":{\"sql\":\"SELECT 1\",\"sql_id\":1}},"
                       "{\"type\":\"get_autocommit\"}]");
  assert_string_equal(json_string_value(json_object_get(cell(a, 1, 0, 0), "value")), "42");
  expect_error(a, 2, "SQL_STORE_ID_IN_USE", NULL);
  expect_error(a, 3, "SQL_NOT_FOUND", NULL);
  expect_error(a, 4, "PROTO_ERROR", "exactly one");
  assert_true(json_is_true(json_object_get(response(a, 5, "get_autocommit"), "is_autocommit")));
  char *b1 = baton_of(a);
  json_decref(a);

  /* the stored SQL lives with the stream; each answer brings a new baton */
  a = pipeline(c, b1, "[{\"type\":\"execute\",\"stmt\":{\"sql_id\":1,\"args\":[{\"type\":\"integer\",\"value\":\"2\"}]}},"
                      "{\"type\":\"close_sql\",\"sql_id\":1},{\"type\":\"execute\",\"stmt\":{\"sql_id\":1}}]");
  assert_string_equal(json_string_value(json_object_get(cell(a, 0, 0, 0), "value")), "43");
  expect_error(a, 2, "SQL_NOT_FOUND", NULL);
  char *b2 = baton_of(a);
  assert_string_not_equal(b1, b2);
  json_decref(a);

  int status;
  /* the old baton was answered: refused */
  json_t *e = pipeline_at(c, "/v3/pipeline", NULL, b1, "[" EXEC("SELECT 1") "]", &status);
  assert_int_equal(status, 400);
  assert_string_equal(json_string_value(json_object_get(e, "code")), "STREAM_EXPIRED");
  json_decref(e);
  /* forged: a secret changed in one digit, and garbage */
  char forged[64];
  snprintf(forged, sizeof forged, "%s", b2);
  forged[strlen(forged) - 1] = forged[strlen(forged) - 1] == '0' ? '1' : '0';
  e = pipeline_at(c, "/v3/pipeline", NULL, forged, "[" EXEC("SELECT 1") "]", &status);
  assert_int_equal(status, 400);
  assert_string_equal(json_string_value(json_object_get(e, "code")), "STREAM_EXPIRED");
  json_decref(e);
  e = pipeline_at(c, "/v3/pipeline", NULL, "0000.00000001.x", "[" EXEC("SELECT 1") "]", &status);
  assert_string_equal(json_string_value(json_object_get(e, "code")), "STREAM_INVALID");
  json_decref(e);
  /* another database's route */
  e = pipeline_at(c, "/v1/db/b/v3/pipeline", NULL, b2, "[" EXEC("SELECT 1") "]", &status);
  assert_int_equal(status, 400);
  assert_non_null(strstr(json_string_value(json_object_get(e, "message")), "belongs to the database \"a\""));
  json_decref(e);
  /* still good on its own, then idle past --stream-idle-ms: expired */
  a = pipeline(c, b2, "[" EXEC("SELECT 1") "]");
  char *b3 = baton_of(a);
  json_decref(a);
  usleep(1000 * 1000);
  e = pipeline_at(c, "/v3/pipeline", NULL, b3, "[" EXEC("SELECT 1") "]", &status);
  assert_int_equal(status, 400);
  assert_string_equal(json_string_value(json_object_get(e, "code")), "STREAM_EXPIRED");
  json_decref(e);
  free(b1), free(b2), free(b3);

  /* bounds: one SQL text past --max-sql, more texts than a stream keeps */
  char *big = malloc(120000);
  assert_non_null(big);
  int n = snprintf(big, 120000, "[{\"type\":\"store_sql\",\"sql_id\":1,\"sql\":\"SELECT '");
  memset(big + n, 'x', 100001);
  snprintf(big + n + 100001, 120000 - (size_t)n - 100001, "'\"}," CLOSE "]");
  a = pipeline(c, NULL, big);
  expect_error(a, 0, "REQUEST_TOO_LARGE", NULL);
  json_decref(a);
  free(big);
  size_t cap = 300 * 64 + 64, len = 0;
  char *many = malloc(cap);
  assert_non_null(many);
  len += (size_t)snprintf(many + len, cap - len, "[");
  for (int i = 0; i < 300; i++)
    len += (size_t)snprintf(many + len, cap - len, "%s{\"type\":\"store_sql\",\"sql_id\":%d,\"sql\":\"SELECT 1\"}",
                            i ? "," : "", i);
  snprintf(many + len, cap - len, "," CLOSE "]");
  a = pipeline(c, NULL, many);
  response(a, 255, "store_sql");
  expect_error(a, 256, "SQL_STORE_TOO_MANY", NULL);
  json_decref(a);
  free(many);

  /* the second database by its route */
  a = pipeline_at(c, "/v1/db/b/v2/pipeline", NULL, NULL,
                  "[" EXEC("CREATE TABLE only_b(x)") "," CLOSE "]", &status);
  assert_int_equal(status, 200);
  response(a, 0, "execute");
  json_decref(a);
  assert_int_equal(tl_sql_int("batons-b.db", "SELECT count(*) FROM sqlite_master WHERE name = 'only_b'"), 1);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* Streams that stay open take a slot each, up to the bound (one address's
 * share): past it, its stream idle the longest is closed for the new one
 * (test_lithd_streams test_fair_streams); streams that end in their
 * pipeline take none, however many. */
static void test_stream_bound(void **state) {
  struct tl_child *c = *state;
  tl_start(c, "streams", 0, NULL);
  int status = 0;
  char *first = NULL;
  for (int i = 0; i < 1100; i++) {
    json_t *a = pipeline_at(c, "/v2/pipeline", NULL, NULL, "[" EXEC("SELECT 1") "]", &status);
    assert_int_equal(status, 200);
    if (i == 0)
      first = strdup(json_string_value(json_object_get(a, "baton")));
    json_decref(a);
  }
  json_t *gone = pipeline_at(c, "/v2/pipeline", NULL, first, "[" EXEC("SELECT 1") "]", &status);
  assert_int_equal(status, 400);
  assert_string_equal(json_string_value(json_object_get(gone, "code")), "STREAM_EXPIRED");
  json_decref(gone);
  free(first);
  int n = tl_scaled(3000);
  for (int i = 0; i < n; i++) {
    json_t *a = pipeline(c, NULL, "[" EXEC("SELECT 1") "," CLOSE "]");
    json_decref(a);
  }
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* A batch condition on a step that was skipped: it neither succeeded nor
 * failed, so ok(k) and error(k) are both false (Hrana's spec; a planted
 * error(k) that held for a skipped step went unnoticed, #32). On both
 * stores: the conditions are the steps' own (sql/steps.c). */
static void skipped_step_conditions(struct tl_child *c, int dq) {
  t_node node;
  if (dq) {
    assert_int_equal(system("rm -rf node1"), 0);
    t_node_init(&node, 1);
    assert_int_equal(t_node_start(&node, NULL, 10000), 0);
    tl_start(c, "skipped", TL_NO_DB, TL_ARGS("--dqlite", node.address, "--dqlite-failover-ms", "3000"));
  } else {
    tl_start(c, "skipped", 0, NULL);
  }
  json_t *a = pipeline(c, NULL, "[" EXEC("CREATE TABLE t(x INTEGER)") "," CLOSE "]");
  json_decref(a);
  /* step 0 fails; step 1 (ok(0)) is skipped; the rest ask about step 1 */
  static const char *const batch =
      "[{\"type\":\"batch\",\"batch\":{\"steps\":["
      "{\"stmt\":{\"sql\":\"SELECT * FROM no_such_table\"}},"
      "{\"stmt\":{\"sql\":\"INSERT INTO t VALUES (1)\"},\"condition\":{\"type\":\"ok\",\"step\":0}},"
      "{\"stmt\":{\"sql\":\"INSERT INTO t VALUES (2)\"},\"condition\":{\"type\":\"error\",\"step\":1}},"
      "{\"stmt\":{\"sql\":\"INSERT INTO t VALUES (3)\"},\"condition\":{\"type\":\"not\",\"cond\":{\"type\":\"error\",\"step\":1}}},"
      "{\"stmt\":{\"sql\":\"INSERT INTO t VALUES (4)\"},\"condition\":{\"type\":\"or\",\"conds\":["
      "{\"type\":\"error\",\"step\":1},{\"type\":\"ok\",\"step\":1}]}},"
      "{\"stmt\":{\"sql\":\"INSERT INTO t VALUES (5)\"},\"condition\":{\"type\":\"and\",\"conds\":["
      "{\"type\":\"not\",\"cond\":{\"type\":\"error\",\"step\":1}},{\"type\":\"not\",\"cond\":{\"type\":\"ok\",\"step\":1}}]}},"
      "{\"stmt\":{\"sql\":\"INSERT INTO t VALUES (6)\"},\"condition\":{\"type\":\"error\",\"step\":0}},"
      "{\"stmt\":{\"sql\":\"INSERT INTO t VALUES (7)\"},\"condition\":{\"type\":\"error\",\"step\":2}},"
      "{\"stmt\":{\"sql\":\"INSERT INTO t VALUES (8)\"},\"condition\":{\"type\":\"error\",\"step\":4}}"
      "]}}," CLOSE "]";
  static const int ran[] = {0, 0, 0, 1, 0, 1, 1, 0, 0}; /* step 0 failed: it ran, with an error */
  a = pipeline(c, NULL, batch);
  json_t *r = json_object_get(response(a, 0, "batch"), "result");
  json_t *res = json_object_get(r, "step_results"), *errs = json_object_get(r, "step_errors");
  assert_int_equal(json_array_size(res), 9);
  assert_int_equal(json_array_size(errs), 9);
  assert_true(json_is_null(json_array_get(res, 0)) && json_is_object(json_array_get(errs, 0)));
  for (size_t k = 1; k < 9; k++) {
    if (ran[k] != json_is_object(json_array_get(res, k)) || !json_is_null(json_array_get(errs, k)))
      fprintf(stderr, "step %zu: want %s: %s\n", k, ran[k] ? "run" : "skipped", json_dumps(r, 0));
    assert_int_equal(json_is_object(json_array_get(res, k)), ran[k]);
    assert_true(json_is_null(json_array_get(errs, k))); /* skipped: no error either */
  }
  json_decref(a);
  a = pipeline(c, NULL, "[" EXEC("SELECT group_concat(x) FROM (SELECT x FROM t ORDER BY x)") "," CLOSE "]");
  assert_string_equal(json_string_value(json_object_get(cell(a, 0, 0, 0), "value")), "3,5,6");
  json_decref(a);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  if (dq) {
    assert_int_equal(t_node_stop(&node, SIGTERM, 5000), 0);
    assert_int_equal(system("rm -rf node1"), 0);
  }
}

static void test_skipped_step_conditions(void **state) { skipped_step_conditions(*state, 0); }
static void test_skipped_step_conditions_dqlite(void **state) { skipped_step_conditions(*state, 1); }

/* One forged baton: refused with 400 and a stream code, and lithd answers
 * afterwards. */
static void expect_forged(const struct tl_child *c, const char *baton) {
  int status = 0;
  json_t *e = pipeline_at(c, "/v3/pipeline", NULL, baton, "[" EXEC("SELECT 1") "]", &status);
  const char *code = json_string_value(json_object_get(e, "code"));
  if (status != 400 || code == NULL || (strcmp(code, "STREAM_EXPIRED") != 0 && strcmp(code, "STREAM_INVALID") != 0))
    fprintf(stderr, "baton %s: %d %s\n", baton, status, json_dumps(e, 0));
  assert_int_equal(status, 400);
  assert_non_null(code);
  assert_true(strcmp(code, "STREAM_EXPIRED") == 0 || strcmp(code, "STREAM_INVALID") == 0);
  json_decref(e);
  tl_expect(c, "GET", "/healthz", NULL, NULL, 200, "\"ok\":true");
}

/* Batons naming a slot of the stream table that holds no stream: a free
 * slot's generation is 0 and its secret zeros, so only the "slot in use"
 * test stands between such a baton and a stream without a database (once
 * planted away, lithd died on a NULL database and no test failed, #32). */
static void test_forged_batons_of_free_slots(void **state) {
  struct tl_child *c = *state;
  tl_start(c, "freeslots", 0, NULL);
  static const char *const zeros = "00000000000000000000000000000000";
  /* one stream open, so that the table is not all free */
  json_t *a = pipeline(c, NULL, "[" EXEC("SELECT 1") "]");
  char *open = baton_of(a);
  json_decref(a);
  char forged[64];
  unsigned slots[] = {0, 1, 2, 5, 17, 255, 256, 1023};
  for (size_t i = 0; i < sizeof slots / sizeof *slots; i++) {
    snprintf(forged, sizeof forged, "%04x.00000000.%s", slots[i], zeros); /* #32's: 0005.00000000.0...0 */
    expect_forged(c, forged);
    snprintf(forged, sizeof forged, "%04x.00000001.%s", slots[i], zeros);
    expect_forged(c, forged);
    snprintf(forged, sizeof forged, "%04x.ffffffff.%s", slots[i], "ffffffffffffffffffffffffffffffff");
    expect_forged(c, forged);
  }
  /* the open stream's own slot, with a free slot's generation and secret */
  snprintf(forged, sizeof forged, "%.4s.00000000.%s", open, zeros);
  expect_forged(c, forged);
  /* past the table, and on the older route */
  snprintf(forged, sizeof forged, "0400.00000000.%s", zeros);
  expect_forged(c, forged);
  int status = 0;
  snprintf(forged, sizeof forged, "0005.00000000.%s", zeros);
  json_t *e = pipeline_at(c, "/v2/pipeline", NULL, forged, "[" EXEC("SELECT 1") "," CLOSE "]", &status);
  assert_int_equal(status, 400);
  assert_string_equal(json_string_value(json_object_get(e, "code")), "STREAM_EXPIRED");
  json_decref(e);
  /* the real stream was not disturbed */
  a = pipeline(c, open, "[" EXEC("SELECT 2") "," CLOSE "]");
  assert_string_equal(json_string_value(json_object_get(cell(a, 0, 0, 0), "value")), "2");
  json_decref(a);
  free(open);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* ---- Interactive transactions --------------------------------------------------- */

struct writer_arg {
  const struct tl_child *c;
  int64_t took_ms;
  int status;
  const char *body; /* NULL: one INSERT */
};

/* Another client's write, timed: it waits while a transaction holds the writer. */
static void *other_write(void *p) {
  struct writer_arg *w = p;
  struct tl_conn k;
  struct tl_resp r;
  int64_t t0 = now_ms();
  tl_conn_init(&k, w->c);
  int rc = tl_conn_request(&k, "POST", "/v1/do", NULL,
                           w->body ? w->body : "{\"statements\":[{\"sql\":\"INSERT INTO t VALUES (-1)\"}]}", &r,
                           20000);
  w->took_ms = now_ms() - t0;
  w->status = rc == TL_OK ? r.status : rc;
  if (rc == TL_OK)
    tl_resp_free(&r);
  tl_conn_close(&k);
  return NULL;
}

static void test_interactive(void **state) {
  struct tl_child *c = *state;
  /* bounds a busy machine keeps: 200 ms pauses between requests stay far
   * inside the idle bound (600 ms timed out once beside two CPU hogs) */
  tl_start(c, "itx", 0, TL_ARGS("--tx-idle-ms", "1500", "--tx-max-ms", "4000"));
  json_t *a = pipeline(c, NULL, "[" EXEC("CREATE TABLE t(x INTEGER UNIQUE)") "," CLOSE "]");
  json_decref(a);

  /* BEGIN left open: the stream holds the writer; another write waits */
  a = pipeline(c, NULL,
               "[{\"type\":\"batch\",\"batch\":{\"steps\":[{\"stmt\":{\"sql\":\"BEGIN IMMEDIATE\"}},"
               "{\"stmt\":{\"sql\":\"INSERT INTO t VALUES (1)\"},\"condition\":{\"type\":\"ok\",\"step\":0}}]}},"
               "{\"type\":\"get_autocommit\"}]");
  assert_true(json_is_false(json_object_get(response(a, 1, "get_autocommit"), "is_autocommit")));
  char *b = baton_of(a);
  json_decref(a);
  struct writer_arg w = {c, 0, 0, NULL};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, other_write, &w), 0);
  usleep(200 * 1000);
  /* a failing statement inside is undone alone; the transaction goes on */
  a = pipeline(c, b, "[" EXEC("INSERT INTO t VALUES (1)") "," EXEC("INSERT INTO t VALUES (2)")
                     ",{\"type\":\"batch\",\"batch\":{\"steps\":[{\"stmt\":{\"sql\":\"SELECT count(*) FROM t\"},"
                     "\"condition\":{\"type\":\"not\",\"cond\":{\"type\":\"is_autocommit\"}}}]}}]");
  expect_error(a, 0, "SQLITE_CONSTRAINT", NULL);
  response(a, 1, "execute");
  json_t *st = json_array_get(json_object_get(json_object_get(response(a, 2, "batch"), "result"), "step_results"), 0);
  assert_string_equal(json_string_value(json_object_get(
                          json_array_get(json_array_get(json_object_get(st, "rows"), 0), 0), "value")),
                      "2");
  free(b);
  b = baton_of(a);
  json_decref(a);
  usleep(200 * 1000);
  a = pipeline(c, b, "[" EXEC("COMMIT") ",{\"type\":\"get_autocommit\"}," CLOSE "]");
  response(a, 0, "execute");
  assert_true(json_is_true(json_object_get(response(a, 1, "get_autocommit"), "is_autocommit")));
  json_decref(a);
  free(b);
  pthread_join(th, NULL);
  assert_int_equal(w.status, 200);
  assert_true(w.took_ms >= 300); /* it waited for the COMMIT */
  assert_int_equal(count_rows(c, "t"), 3);

  /* ROLLBACK, and a close without COMMIT: nothing of them stays */
  a = pipeline(c, NULL, "[" EXEC("BEGIN") "," EXEC("INSERT INTO t VALUES (10)") "]");
  b = baton_of(a);
  json_decref(a);
  a = pipeline(c, b, "[" EXEC("ROLLBACK") "," CLOSE "]");
  response(a, 0, "execute");
  json_decref(a);
  free(b);
  a = pipeline(c, NULL, "[" EXEC("BEGIN") "," EXEC("INSERT INTO t VALUES (11)") "," CLOSE "]");
  json_decref(a);
  assert_int_equal(count_rows(c, "t"), 3);

  /* executeMultiple: autocommit statements, then a transaction that stops
   * at an error; the close rolls back only the transaction's part */
  a = pipeline(c, NULL,
               "[{\"type\":\"sequence\",\"sql\":\"INSERT INTO t VALUES (20); BEGIN; INSERT INTO t VALUES (21); "
               "INSERT INTO t VALUES (21); COMMIT;\"}," CLOSE "]");
  expect_error(a, 0, "SQLITE_CONSTRAINT", NULL);
  json_decref(a);
  assert_int_equal(count_rows(c, "t"), 4); /* 20 stays, 21 went */

  /* idle past --tx-idle-ms: rolled back by itself, TRANSACTION_TIMEOUT;
   * the writer serves others again at once */
  a = pipeline(c, NULL, "[" EXEC("BEGIN IMMEDIATE") "," EXEC("INSERT INTO t VALUES (30)") "]");
  b = baton_of(a);
  json_decref(a);
  int64_t t0 = now_ms();
  a = pipeline(c, NULL, "[" EXEC("INSERT INTO t VALUES (31)") "," CLOSE "]");
  response(a, 0, "execute");
  json_decref(a);
  int64_t waited = now_ms() - t0;
  assert_true(waited >= 1300 && waited < 5000); /* behind the transaction, until its idle bound */
  a = pipeline(c, b, "[" EXEC("COMMIT") "," CLOSE "]");
  expect_error(a, 0, "TRANSACTION_TIMEOUT", NULL);
  json_decref(a);
  free(b);
  assert_int_equal(count_rows(c, "t"), 5); /* 31, not 30 */

  /* a stream that never ends its transaction and keeps it busy: --tx-max-ms */
  a = pipeline(c, NULL, "[" EXEC("BEGIN") "]");
  b = baton_of(a);
  json_decref(a);
  t0 = now_ms();
  for (;;) {
    a = pipeline(c, b, "[" EXEC("SELECT 1") "]");
    free(b);
    b = NULL;
    const char *type = json_string_value(json_object_get(result(a, 0), "type"));
    if (strcmp(type, "error") == 0) {
      expect_error(a, 0, "TRANSACTION_TIMEOUT", NULL);
      json_decref(a);
      break;
    }
    b = baton_of(a);
    json_decref(a);
    assert_true(now_ms() - t0 < 8000);
    usleep(100 * 1000);
  }
  assert_true(now_ms() - t0 >= 3500);
  free(b);
  assert_int_equal(count_rows(c, "t"), 5);

  /* a READONLY transaction refuses a write */
  a = pipeline(c, NULL, "[" EXEC("BEGIN TRANSACTION READONLY") "," EXEC("SELECT count(*) FROM t") ","
                        EXEC("INSERT INTO t VALUES (40)") "," CLOSE "]");
  assert_string_equal(json_string_value(json_object_get(cell(a, 1, 0, 0), "value")), "5");
  expect_error(a, 2, "SQLITE_READONLY", NULL);
  json_decref(a);

  /* the client's savepoints (an ORM's nested transactions), over several
   * requests and inside one: each step's own savepoint never swallows them */
  a = pipeline(c, NULL, "[" EXEC("BEGIN IMMEDIATE") "," EXEC("SAVEPOINT s1") "," EXEC("INSERT INTO t VALUES (50)") "]");
  b = baton_of(a);
  json_decref(a);
  a = pipeline(c, b, "[" EXEC("ROLLBACK TO s1") "," EXEC("INSERT INTO t VALUES (51)") "," EXEC("RELEASE s1") "]");
  for (int k = 0; k < 3; k++)
    response(a, (size_t)k, "execute");
  free(b);
  b = baton_of(a);
  json_decref(a);
  a = pipeline(c, b, "[{\"type\":\"batch\",\"batch\":{\"steps\":[{\"stmt\":{\"sql\":\"SAVEPOINT s2\"}},"
                     "{\"stmt\":{\"sql\":\"INSERT INTO t VALUES (52)\"}},{\"stmt\":{\"sql\":\"RELEASE s2\"}},"
                     "{\"stmt\":{\"sql\":\"SAVEPOINT s3\"}},{\"stmt\":{\"sql\":\"INSERT INTO t VALUES (53)\"}},"
                     "{\"stmt\":{\"sql\":\"ROLLBACK TO s3\"}},{\"stmt\":{\"sql\":\"RELEASE s3\"}}]}},"
                     EXEC("RELEASE s9") "," EXEC("COMMIT") "," CLOSE "]");
  json_t *steps = json_object_get(json_object_get(response(a, 0, "batch"), "result"), "step_errors");
  for (size_t k = 0; k < json_array_size(steps); k++)
    assert_true(json_is_null(json_array_get(steps, k)));
  expect_error(a, 1, "SQLITE_ERROR", "no such savepoint");
  response(a, 2, "execute");
  json_decref(a);
  free(b);
  a = pipeline(c, NULL, "[" EXEC("SELECT group_concat(x) FROM t WHERE x >= 50") "," CLOSE "]");
  assert_string_equal(json_string_value(json_object_get(cell(a, 0, 0, 0), "value")), "51,52");
  json_decref(a);

  /* PRAGMA foreign_keys = off in a batch (migrate()'s): for the rest of
   * that request only, and what ran unchecked must pass foreign_key_check */
  a = pipeline(c, NULL, "[" EXEC("CREATE TABLE fp(id INTEGER PRIMARY KEY)") ","
                        EXEC("CREATE TABLE fq(p INTEGER REFERENCES fp(id))") "," CLOSE "]");
  json_decref(a);
  a = pipeline(c, NULL, "[{\"type\":\"batch\",\"batch\":{\"steps\":[{\"stmt\":{\"sql\":\"PRAGMA foreign_keys = off\"}},"
                        "{\"stmt\":{\"sql\":\"INSERT INTO fq VALUES (5)\"}}]}}," CLOSE "]");
  expect_error(a, 0, "SQLITE_CONSTRAINT", "foreign_key_check");
  json_decref(a);
  a = pipeline(c, NULL, "[{\"type\":\"batch\",\"batch\":{\"steps\":[{\"stmt\":{\"sql\":\"PRAGMA foreign_keys = off\"}},"
                        "{\"stmt\":{\"sql\":\"BEGIN\"}},{\"stmt\":{\"sql\":\"INSERT INTO fq VALUES (1)\"}},"
                        "{\"stmt\":{\"sql\":\"INSERT INTO fp VALUES (1)\"}},{\"stmt\":{\"sql\":\"COMMIT\"}},"
                        "{\"stmt\":{\"sql\":\"PRAGMA foreign_keys = on\"}}]}},"
                        EXEC("INSERT INTO fq VALUES (6)") "," EXEC("SELECT count(*) FROM fq") "," CLOSE "]");
  steps = json_object_get(json_object_get(response(a, 0, "batch"), "result"), "step_errors");
  for (size_t k = 0; k < json_array_size(steps); k++)
    assert_true(json_is_null(json_array_get(steps, k)));
  expect_error(a, 1, "SQLITE_CONSTRAINT", "FOREIGN KEY"); /* enforced again after it */
  assert_string_equal(json_string_value(json_object_get(cell(a, 2, 0, 0), "value")), "1");
  json_decref(a);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  assert_int_equal(tl_sql_int("itx.db", "SELECT count(*) FROM t"), 7);
}

/* ---- Interactive transactions on --dqlite -------------------------------------- */

/* A pipeline from a thread (no cmocka there): the body's status, and its
 * baton copied into baton[0..cap) ("" when none). 0 when the answer is 200
 * and holds no error result, else -1. */
static int dq_pipe(const struct tl_child *c, const char *baton, const char *requests, char *out_baton,
                   size_t cap) {
  struct tl_conn k;
  struct tl_resp r;
  char body[1024];
  int ok = -1;
  if (baton && baton[0])
    snprintf(body, sizeof body, "{\"baton\":\"%s\",\"requests\":%s}", baton, requests);
  else
    snprintf(body, sizeof body, "{\"baton\":null,\"requests\":%s}", requests);
  tl_conn_init(&k, c);
  if (tl_conn_request(&k, "POST", "/v3/pipeline", NULL, body, &r, 20000) == TL_OK) {
    const char *b = strstr(r.body, "\"baton\":\"");
    if (out_baton != NULL) {
      out_baton[0] = '\0';
      if (b != NULL)
        snprintf(out_baton, cap, "%.*s", (int)strcspn(b + 9, "\""), b + 9);
    }
    ok = r.status == 200 && strstr(r.body, "\"type\":\"error\"") == NULL ? 0 : -1;
    if (ok != 0)
      fprintf(stderr, "dq_pipe: %d %s\n", r.status, r.body);
    tl_resp_free(&r);
  }
  tl_conn_close(&k);
  return ok;
}

struct dq_tx_arg {
  const struct tl_child *c;
  int id, n, failed;
};

/* n transactions, each over three pipelines (the way @libsql/client's
 * transaction() sends them), rows id*1000 + k*2 and + 1 */
static void *dq_tx_thread(void *p) {
  struct dq_tx_arg *a = p;
  char b[128], req[256];
  for (int k = 0; k < a->n; k++) {
    int x = 100000 + a->id * 1000 + k * 2;
    snprintf(req, sizeof req, "[" EXEC("BEGIN %s") ",{\"type\":\"execute\",\"stmt\":{\"sql\":\"INSERT INTO c VALUES (%d)\"}}]",
             k % 2 ? "DEFERRED" : "IMMEDIATE", x);
    if (dq_pipe(a->c, NULL, req, b, sizeof b) != 0) {
      a->failed++;
      continue;
    }
    snprintf(req, sizeof req, "[{\"type\":\"execute\",\"stmt\":{\"sql\":\"INSERT INTO c VALUES (%d)\"}}]", x + 1);
    if (dq_pipe(a->c, b, req, b, sizeof b) != 0 || dq_pipe(a->c, b, "[" EXEC("COMMIT") "," CLOSE "]", NULL, 0) != 0)
      a->failed++;
  }
  return NULL;
}

struct dq_begin_arg {
  const struct tl_child *c;
  char baton[128];
  int rc;
};

static void *dq_begin_thread(void *p) {
  struct dq_begin_arg *a = p;
  a->rc = dq_pipe(a->c, NULL, "[" EXEC("BEGIN IMMEDIATE") "," EXEC("INSERT INTO t VALUES (92)") "]", a->baton,
                  sizeof a->baton);
  return NULL;
}

/* The same transactions as on a file (test_interactive), on lithd --dqlite
 * in front of one lith-node: held on the cluster's writer across
 * pipelines, the same bounds, errors and rules; and what only a cluster
 * has: the leader restarted mid-transaction. */
static void test_interactive_dqlite(void **state) {
  struct tl_child *c = *state;
  t_node node;
  assert_int_equal(system("rm -rf node1"), 0);
  t_node_init(&node, 1);
  assert_int_equal(t_node_start(&node, NULL, 10000), 0);
  tl_start(c, "itxdq", TL_NO_DB,
           TL_ARGS("--dqlite", node.address, "--dqlite-failover-ms", "3000", "--tx-idle-ms", "1500", "--tx-max-ms",
                   "4000"));
  json_t *a = pipeline(c, NULL, "[" EXEC("CREATE TABLE t(x INTEGER UNIQUE)") "," CLOSE "]");
  json_decref(a);

  /* BEGIN left open across pipelines: the stream holds the writer; a
   * /v1/do write waits, then commits after it */
  a = pipeline(c, NULL,
               "[{\"type\":\"batch\",\"batch\":{\"steps\":[{\"stmt\":{\"sql\":\"BEGIN IMMEDIATE\"}},"
               "{\"stmt\":{\"sql\":\"INSERT INTO t VALUES (1)\"},\"condition\":{\"type\":\"ok\",\"step\":0}}]}},"
               "{\"type\":\"get_autocommit\"}]");
  assert_true(json_is_false(json_object_get(response(a, 1, "get_autocommit"), "is_autocommit")));
  char *b = baton_of(a);
  json_decref(a);
  struct writer_arg w = {c, 0, 0, NULL};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, other_write, &w), 0);
  usleep(200 * 1000);
  /* a failing statement inside is undone alone; the transaction goes on,
   * and does not see the waiting write */
  a = pipeline(c, b, "[" EXEC("INSERT INTO t VALUES (1)") "," EXEC("INSERT INTO t VALUES (2)") ","
                     EXEC("SELECT count(*) FROM t") "]");
  expect_error(a, 0, "SQLITE_CONSTRAINT", NULL);
  response(a, 1, "execute");
  assert_string_equal(json_string_value(json_object_get(cell(a, 2, 0, 0), "value")), "2");
  free(b);
  b = baton_of(a);
  json_decref(a);
  usleep(200 * 1000);
  a = pipeline(c, b, "[" EXEC("COMMIT") ",{\"type\":\"get_autocommit\"}," CLOSE "]");
  response(a, 0, "execute");
  assert_true(json_is_true(json_object_get(response(a, 1, "get_autocommit"), "is_autocommit")));
  json_decref(a);
  free(b);
  pthread_join(th, NULL);
  assert_int_equal(w.status, 200);
  assert_true(w.took_ms >= 300); /* it waited for the COMMIT */
  assert_int_equal(count_rows(c, "t"), 3);

  /* ROLLBACK across pipelines, and a close without COMMIT: nothing stays */
  a = pipeline(c, NULL, "[" EXEC("BEGIN") "," EXEC("INSERT INTO t VALUES (10)") "]");
  b = baton_of(a);
  json_decref(a);
  a = pipeline(c, b, "[" EXEC("INSERT INTO t VALUES (12)") "," EXEC("ROLLBACK") "," EXEC("SELECT count(*) FROM t") "," CLOSE "]");
  response(a, 1, "execute");
  assert_string_equal(json_string_value(json_object_get(cell(a, 2, 0, 0), "value")), "3");
  json_decref(a);
  free(b);
  a = pipeline(c, NULL, "[" EXEC("BEGIN") "," EXEC("INSERT INTO t VALUES (11)") "," CLOSE "]");
  json_decref(a);
  assert_int_equal(count_rows(c, "t"), 3);

  /* autocommit steps before a BEGIN in the same batch commit then; the
   * ROLLBACK later undoes only the transaction */
  a = pipeline(c, NULL, "[{\"type\":\"batch\",\"batch\":{\"steps\":[{\"stmt\":{\"sql\":\"INSERT INTO t VALUES (20)\"}},"
                        "{\"stmt\":{\"sql\":\"BEGIN\"}},{\"stmt\":{\"sql\":\"INSERT INTO t VALUES (21)\"}}]}}]");
  b = baton_of(a);
  json_decref(a);
  a = pipeline(c, b, "[" EXEC("ROLLBACK") "," CLOSE "]");
  response(a, 0, "execute");
  json_decref(a);
  free(b);
  assert_int_equal(count_rows(c, "t"), 4); /* 20 stays, 21 went */

  /* the rules of a command hold inside: lith's tables, ATTACH, a foreign
   * key onto _lith_* (lith_command_check after the CREATE) */
  a = pipeline(c, NULL, "[" EXEC("BEGIN") "," EXEC("DELETE FROM _lith_batches") "," EXEC("ATTACH 'x.db' AS x") ","
                        EXEC("CREATE TABLE evil(v REFERENCES _lith_schema(version))") "," EXEC("INSERT INTO t VALUES (22)") ","
                        EXEC("COMMIT") "," CLOSE "]");
  expect_error(a, 1, "SQLITE_AUTH", NULL);
  expect_error(a, 2, "SQLITE_AUTH", NULL);
  expect_error(a, 3, "SQLITE_AUTH", "_lith_");
  response(a, 5, "execute");
  json_decref(a);
  assert_int_equal(count_rows(c, "t"), 5);

  /* a COMMIT a deferred foreign key refuses: SQLite's error, the
   * transaction still open, as SQLite leaves it */
  a = pipeline(c, NULL, "[" EXEC("CREATE TABLE p(id INTEGER PRIMARY KEY)") ","
                        EXEC("CREATE TABLE q(pid INTEGER REFERENCES p(id) DEFERRABLE INITIALLY DEFERRED)") "," CLOSE "]");
  json_decref(a);
  a = pipeline(c, NULL, "[" EXEC("BEGIN") "," EXEC("INSERT INTO q VALUES (5)") "," EXEC("COMMIT") ",{\"type\":\"get_autocommit\"}]");
  expect_error(a, 2, "SQLITE_CONSTRAINT", "FOREIGN KEY");
  assert_true(json_is_false(json_object_get(response(a, 3, "get_autocommit"), "is_autocommit")));
  b = baton_of(a);
  json_decref(a);
  a = pipeline(c, b, "[" EXEC("INSERT INTO p VALUES (5)") "," EXEC("COMMIT") "," CLOSE "]");
  response(a, 1, "execute");
  json_decref(a);
  free(b);
  assert_int_equal(count_rows(c, "q"), 1);

  /* READONLY: reads go on, a write is refused (SQLite's SQLITE_READONLY),
   * the transaction stays open across pipelines */
  a = pipeline(c, NULL, "[" EXEC("BEGIN TRANSACTION READONLY") "," EXEC("INSERT INTO t VALUES (40)") "]");
  expect_error(a, 1, "SQLITE_READONLY", NULL);
  b = baton_of(a);
  json_decref(a);
  a = pipeline(c, b, "[" EXEC("SELECT count(*) FROM t") "," EXEC("UPDATE t SET x = x + 1000") ","
                     "{\"type\":\"get_autocommit\"}," EXEC("COMMIT") "," CLOSE "]");
  assert_string_equal(json_string_value(json_object_get(cell(a, 0, 0, 0), "value")), "5");
  expect_error(a, 1, "SQLITE_READONLY", NULL);
  assert_true(json_is_false(json_object_get(response(a, 2, "get_autocommit"), "is_autocommit")));
  response(a, 3, "execute");
  json_decref(a);
  free(b);
  assert_int_equal(count_rows(c, "t"), 5);

  /* idle past --tx-idle-ms while a write waits: rolled back by itself,
   * TRANSACTION_TIMEOUT once; the write commits */
  a = pipeline(c, NULL, "[" EXEC("BEGIN IMMEDIATE") "," EXEC("INSERT INTO t VALUES (30)") "]");
  b = baton_of(a);
  json_decref(a);
  int64_t t0 = now_ms();
  a = pipeline(c, NULL, "[" EXEC("INSERT INTO t VALUES (31)") "," CLOSE "]");
  response(a, 0, "execute");
  json_decref(a);
  int64_t waited = now_ms() - t0;
  assert_true(waited >= 1300 && waited < 3500); /* behind the transaction, until its idle bound */
  a = pipeline(c, b, "[" EXEC("COMMIT") "," CLOSE "]");
  expect_error(a, 0, "TRANSACTION_TIMEOUT", "--tx-idle-ms");
  json_decref(a);
  free(b);
  assert_int_equal(count_rows(c, "t"), 6); /* 31, not 30 */

  /* a stream that never ends its transaction and keeps it busy: --tx-max-ms */
  a = pipeline(c, NULL, "[" EXEC("BEGIN") "," EXEC("INSERT INTO t VALUES (32)") "]");
  b = baton_of(a);
  json_decref(a);
  t0 = now_ms();
  for (;;) {
    a = pipeline(c, b, "[" EXEC("SELECT 1") "]");
    free(b);
    b = NULL;
    const char *type = json_string_value(json_object_get(result(a, 0), "type"));
    if (strcmp(type, "error") == 0) {
      expect_error(a, 0, "TRANSACTION_TIMEOUT", "--tx-max-ms");
      json_decref(a);
      break;
    }
    b = baton_of(a);
    json_decref(a);
    assert_true(now_ms() - t0 < 8000);
    usleep(100 * 1000);
  }
  assert_true(now_ms() - t0 >= 3500);
  free(b);
  assert_int_equal(count_rows(c, "t"), 6);

  /* the leader restarted mid-transaction: the stream's next request
   * learns it (SQLITE_BUSY, nothing of it kept), the stream is in
   * autocommit after, and lithd writes again on the new leader */
  a = pipeline(c, NULL, "[" EXEC("BEGIN IMMEDIATE") "," EXEC("INSERT INTO t VALUES (70)") "]");
  b = baton_of(a);
  json_decref(a);
  assert_int_equal(t_node_stop(&node, SIGKILL, 5000), 128 + SIGKILL);
  assert_int_equal(t_node_start(&node, NULL, 10000), 0);
  a = pipeline(c, b, "[" EXEC("INSERT INTO t VALUES (71)") "," EXEC("COMMIT") ",{\"type\":\"get_autocommit\"}," CLOSE "]");
  expect_error(a, 0, "SQLITE_BUSY", "leader was lost");
  expect_error(a, 1, "SQLITE_ERROR", "no transaction is active");
  assert_true(json_is_true(json_object_get(response(a, 2, "get_autocommit"), "is_autocommit")));
  json_decref(a);
  free(b);
  a = pipeline(c, NULL, "[" EXEC("SELECT group_concat(x) FROM t WHERE x >= 70") "," CLOSE "]");
  assert_true(json_is_null(json_object_get(cell(a, 0, 0, 0), "value")) ||
              strcmp(json_string_value(json_object_get(cell(a, 0, 0, 0), "type")), "null") == 0);
  json_decref(a);
  a = pipeline(c, NULL, "[" EXEC("BEGIN") "," EXEC("INSERT INTO t VALUES (72)") "," EXEC("COMMIT") "," CLOSE "]");
  response(a, 2, "execute");
  json_decref(a);
  assert_int_equal(count_rows(c, "t"), 7);

  /* a transaction runs alone: a write queued before it commits when the
   * transaction holding the writer ends, not with the one after it */
  a = pipeline(c, NULL, "[" EXEC("BEGIN IMMEDIATE") "," EXEC("INSERT INTO t VALUES (90)") "]");
  b = baton_of(a);
  json_decref(a);
  struct writer_arg w2 = {c, 0, 0, "{\"statements\":[{\"sql\":\"INSERT INTO t VALUES (91)\"}]}"};
  assert_int_equal(pthread_create(&th, NULL, other_write, &w2), 0);
  usleep(200 * 1000);
  struct dq_begin_arg ba = {c, "", -1};
  pthread_t bt;
  assert_int_equal(pthread_create(&bt, NULL, dq_begin_thread, &ba), 0);
  usleep(200 * 1000);
  a = pipeline(c, b, "[" EXEC("COMMIT") "," CLOSE "]");
  response(a, 0, "execute");
  json_decref(a);
  free(b);
  pthread_join(th, NULL);
  assert_int_equal(w2.status, 200);
  assert_true(w2.took_ms < 3000); /* not behind the second transaction's bound (4 s) */
  pthread_join(bt, NULL);
  assert_int_equal(ba.rc, 0);
  a = pipeline(c, ba.baton, "[" EXEC("ROLLBACK") "," CLOSE "]");
  response(a, 0, "execute");
  json_decref(a);
  assert_int_equal(count_rows(c, "t"), 9); /* 90, 91; not 92 */

  /* at once: transactions of four streams (IMMEDIATE and DEFERRED) over
   * several pipelines each, and /v1/do writes between them: every one
   * commits, in turn */
  a = pipeline(c, NULL, "[" EXEC("CREATE TABLE c(x INTEGER PRIMARY KEY)") "," CLOSE "]");
  json_decref(a);
  enum { NT = 4, NTX = 10 };
  struct dq_tx_arg ta[NT];
  pthread_t tt[NT];
  struct writer_arg wa[2] = {{c, 0, 0, "{\"statements\":[{\"sql\":\"INSERT INTO c VALUES (1)\"}]}"},
                             {c, 0, 0, "{\"statements\":[{\"sql\":\"INSERT INTO c VALUES (2)\"}]}"}};
  pthread_t wt[2];
  t0 = now_ms();
  for (int i = 0; i < NT; i++) {
    ta[i] = (struct dq_tx_arg){c, i, NTX, 0};
    assert_int_equal(pthread_create(&tt[i], NULL, dq_tx_thread, &ta[i]), 0);
  }
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_create(&wt[i], NULL, other_write, &wa[i]), 0);
  for (int i = 0; i < NT; i++) {
    pthread_join(tt[i], NULL);
    assert_int_equal(ta[i].failed, 0);
  }
  print_message("--dqlite, one node: %d transactions of 3 pipelines, %d streams at once: %lld ms (%.0f/s)\n",
                NT * NTX, NT, (long long)(now_ms() - t0), NT * NTX * 1000.0 / (double)(now_ms() - t0 + 1));
  for (int i = 0; i < 2; i++) {
    pthread_join(wt[i], NULL);
    assert_int_equal(wa[i].status, 200);
  }
  assert_int_equal(count_rows(c, "c"), NT * NTX * 2 + 2);

  /* the stop does not wait for a transaction's bound: it is rolled back */
  a = pipeline(c, NULL, "[" EXEC("BEGIN IMMEDIATE") "," EXEC("INSERT INTO t VALUES (80)") "]");
  json_decref(a);
  t0 = now_ms();
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  assert_true(now_ms() - t0 < 2000);
  tl_start(c, "itxdq", TL_NO_DB, TL_ARGS("--dqlite", node.address, "--dqlite-failover-ms", "3000"));
  assert_int_equal(count_rows(c, "t"), 9);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  assert_int_equal(t_node_stop(&node, SIGTERM, 5000), 0);
  assert_int_equal(system("rm -rf node1"), 0);
}

struct pipe_arg {
  const struct tl_child *c;
  const char *baton, *requests;
  json_t *answer;
};

/* pipeline() on a thread of its own: for a request that waits for the writer. */
/* --tx-max-ms counts from the BEGIN's request: a transaction that waited
 * that long for the writer (behind a slow command) is refused at once,
 * TRANSACTION_TIMEOUT, and leaves nothing; the writer goes on. */
static void test_tx_waited(void **state) {
  struct tl_child *c = *state;
  tl_start(c, "itxw", 0, TL_ARGS("--tx-max-ms", "400", "--max-run-ms", "20000"));
  json_t *a = pipeline(c, NULL, "[" EXEC("CREATE TABLE t(x INTEGER UNIQUE)") "," CLOSE "]");
  json_decref(a);
  struct writer_arg w = {c, 0, 0,
                         "{\"statements\":[{\"sql\":\"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 "
                         "FROM n WHERE i < 5000000) SELECT count(*) FROM n\"}]}"};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, other_write, &w), 0);
  usleep(100 * 1000);
  int64_t t0 = now_ms();
  answer_ms = 25000; /* it waits for the slow command (its bound: 20 s) */
  a = pipeline(c, NULL,
               "[{\"type\":\"batch\",\"batch\":{\"steps\":[{\"stmt\":{\"sql\":\"BEGIN IMMEDIATE\"}},"
               "{\"stmt\":{\"sql\":\"INSERT INTO t VALUES (1)\"},\"condition\":{\"type\":\"ok\",\"step\":0}}]}},"
               "{\"type\":\"get_autocommit\"}]");
  answer_ms = 0;
  int64_t waited = now_ms() - t0;
  pthread_join(th, NULL);
  assert_int_equal(w.status, 200);
  print_message("the slow command took %lld ms; the transaction was answered after %lld ms\n",
                (long long)w.took_ms, (long long)waited);
  if (w.took_ms < 100 + 400 + 200) { /* a machine too fast to hold the writer that long: nothing to see */
    json_decref(a);
    assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
    skip();
  }
  expect_error(a, 0, "TRANSACTION_TIMEOUT", NULL);
  json_decref(a);
  assert_int_equal(count_rows(c, "t"), 0);
  a = pipeline(c, NULL, "[" EXEC("INSERT INTO t VALUES (2)") "," CLOSE "]");
  response(a, 0, "execute");
  json_decref(a);
  assert_int_equal(count_rows(c, "t"), 1);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

static void *pipeline_thread(void *p) {
  struct pipe_arg *pa = p;
  int status;
  pa->answer = pipeline_at(pa->c, "/v3/pipeline", NULL, pa->baton, pa->requests, &status);
  return NULL;
}

static const char *value_at(json_t *a, size_t k) { return json_string_value(json_object_get(cell(a, k, 0, 0), "value")); }

/* BEGIN (DEFERRED) and READONLY begin on a read snapshot: they do not hold
 * the writer while they read; a deferred one's first write moves it to the
 * writer when nothing committed since its snapshot, else that write fails
 * with SQLITE_BUSY and the transaction goes on, on its snapshot, until
 * COMMIT or ROLLBACK (found stale before the write, or by the writer's
 * verdict when a commit came while it waited); with one reader they hold
 * it, not the writer; an open one does not hold up the stop. */
static void test_snapshot(void **state) {
  struct tl_child *c = *state;
  tl_start(c, "snap", 0, TL_ARGS("--readers", "3", "--tx-idle-ms", "3000", "--tx-max-ms", "8000"));
  json_t *a = pipeline(c, NULL, "[" EXEC("CREATE TABLE t(x)") "," EXEC("INSERT INTO t VALUES (0)") "," CLOSE "]");
  json_decref(a);

  /* a deferred transaction that reads: another write goes through at once,
   * and the transaction still sees its snapshot */
  a = pipeline(c, NULL, "[" EXEC("BEGIN") "," EXEC("SELECT count(*) FROM t") "]");
  assert_string_equal(value_at(a, 1), "1");
  char *b = baton_of(a);
  json_decref(a);
  struct writer_arg w = {c, 0, 0, NULL};
  other_write(&w);
  assert_int_equal(w.status, 200);
  assert_true(w.took_ms < 1000); /* not behind the transaction (its idle bound is 3 s) */
  a = pipeline(c, b, "[" EXEC("SELECT count(*) FROM t") "," EXEC("COMMIT") ",{\"type\":\"get_autocommit\"}," CLOSE "]");
  assert_string_equal(value_at(a, 0), "1");
  response(a, 1, "execute");
  assert_true(json_is_true(json_object_get(response(a, 2, "get_autocommit"), "is_autocommit")));
  json_decref(a);
  free(b);
  assert_int_equal(count_rows(c, "t"), 2);

  /* READONLY: the same, and a write is refused while the transaction goes on */
  a = pipeline(c, NULL, "[" EXEC("BEGIN TRANSACTION READONLY") "," EXEC("SELECT count(*) FROM t") "]");
  b = baton_of(a);
  json_decref(a);
  other_write(&w);
  assert_true(w.status == 200 && w.took_ms < 1000);
  a = pipeline(c, b, "[" EXEC("DELETE FROM t") "," EXEC("SELECT count(*) FROM t") "," EXEC("COMMIT") "," CLOSE "]");
  expect_error(a, 0, "SQLITE_READONLY", "READONLY");
  assert_string_equal(value_at(a, 1), "2");
  response(a, 2, "execute");
  json_decref(a);
  free(b);
  assert_int_equal(count_rows(c, "t"), 3);

  /* a deferred one that writes with nothing committed since: on the
   * writer from then on (it sees its own row; another write waits) */
  a = pipeline(c, NULL, "[" EXEC("BEGIN DEFERRED") "," EXEC("SELECT count(*) FROM t") "]");
  b = baton_of(a);
  json_decref(a);
  a = pipeline(c, b, "[" EXEC("INSERT INTO t VALUES (1)") "," EXEC("SELECT count(*) FROM t") "]");
  response(a, 0, "execute");
  assert_string_equal(value_at(a, 1), "4");
  free(b);
  b = baton_of(a);
  json_decref(a);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, other_write, &w), 0);
  usleep(300 * 1000);
  a = pipeline(c, b, "[" EXEC("COMMIT") "," CLOSE "]");
  response(a, 0, "execute");
  json_decref(a);
  free(b);
  pthread_join(th, NULL);
  assert_int_equal(w.status, 200);
  assert_true(w.took_ms >= 250); /* it waited for the COMMIT */
  assert_int_equal(count_rows(c, "t"), 5);

  /* stale before its write: SQLITE_BUSY, the snapshot still read, ROLLBACK ends it */
  a = pipeline(c, NULL, "[" EXEC("BEGIN") "," EXEC("SELECT count(*) FROM t") "]");
  b = baton_of(a);
  json_decref(a);
  other_write(&w);
  assert_int_equal(w.status, 200);
  a = pipeline(c, b, "[" EXEC("INSERT INTO t VALUES (2)") "," EXEC("SELECT count(*) FROM t") ",{\"type\":\"get_autocommit\"}]");
  expect_error(a, 0, "SQLITE_BUSY", "SQLITE_BUSY_SNAPSHOT");
  assert_string_equal(value_at(a, 1), "5");
  assert_true(json_is_false(json_object_get(response(a, 2, "get_autocommit"), "is_autocommit")));
  free(b);
  b = baton_of(a);
  json_decref(a);
  a = pipeline(c, b, "[" EXEC("ROLLBACK") "," CLOSE "]");
  response(a, 0, "execute");
  json_decref(a);
  free(b);
  assert_int_equal(count_rows(c, "t"), 6);

  /* stale while its write waited for the writer: another transaction holds
   * it and commits meanwhile; the verdict is SQLITE_BUSY */
  a = pipeline(c, NULL, "[" EXEC("BEGIN IMMEDIATE") "," EXEC("INSERT INTO t VALUES (3)") "]");
  char *holder = baton_of(a);
  json_decref(a);
  a = pipeline(c, NULL, "[" EXEC("BEGIN") "," EXEC("SELECT count(*) FROM t") "]");
  assert_string_equal(value_at(a, 1), "6"); /* the holder's row is not committed */
  b = baton_of(a);
  json_decref(a);
  struct pipe_arg pa = {c, b, "[" EXEC("INSERT INTO t VALUES (4)") "]", NULL};
  assert_int_equal(pthread_create(&th, NULL, pipeline_thread, &pa), 0);
  usleep(300 * 1000); /* its write waits behind the holder */
  a = pipeline(c, holder, "[" EXEC("COMMIT") "," CLOSE "]");
  response(a, 0, "execute");
  json_decref(a);
  free(holder);
  pthread_join(th, NULL);
  expect_error(pa.answer, 0, "SQLITE_BUSY", "SQLITE_BUSY_SNAPSHOT");
  free(b);
  b = baton_of(pa.answer);
  json_decref(pa.answer);
  a = pipeline(c, b, "[" EXEC("SELECT count(*) FROM t") "," EXEC("COMMIT") "," CLOSE "]");
  assert_string_equal(value_at(a, 0), "6"); /* still its snapshot */
  response(a, 1, "execute");
  json_decref(a);
  free(b);
  assert_int_equal(count_rows(c, "t"), 7); /* the holder's row, not the stale one's */

  /* an open one does not hold up the stop */
  a = pipeline(c, NULL, "[" EXEC("BEGIN") "," EXEC("SELECT count(*) FROM t") "]");
  json_decref(a);
  int64_t t0 = now_ms();
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  assert_true(now_ms() - t0 < 2000);

  /* one reader: the transaction holds it, never the writer (a write goes
   * through at once; test_lithd_streams: queries wait for it) */
  assert_int_equal(tl_sql_int("snap.db", "SELECT count(*) FROM t"), 7);
  tl_start(c, "snap1", 0, TL_ARGS("--readers", "1", "--tx-idle-ms", "3000"));
  a = pipeline(c, NULL, "[" EXEC("CREATE TABLE t(x)") "," CLOSE "]");
  json_decref(a);
  a = pipeline(c, NULL, "[" EXEC("BEGIN") "," EXEC("SELECT count(*) FROM t") "]");
  b = baton_of(a);
  json_decref(a);
  other_write(&w); /* while it is open: held, it would wait out the 3 s idle bound */
  assert_true(w.status == 200 && w.took_ms < 2000);
  a = pipeline(c, b, "[" EXEC("COMMIT") "," CLOSE "]");
  response(a, 0, "execute");
  json_decref(a);
  free(b);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  assert_int_equal(tl_sql_int("snap1.db", "SELECT count(*) FROM t"), 1);
}

/* The gate answers in Hrana's shape; --only-named lets Hrana read only. */
static void test_gate(void **state) {
  struct tl_child *c = *state;
  FILE *f = fopen("gate.token", "w");
  assert_non_null(f);
  fputs("s3cret-token-of-the-test\n", f);
  assert_int_equal(fclose(f), 0);
  f = fopen("gate-cmds.sql", "w");
  assert_non_null(f);
  fputs("-- name: one\nSELECT 1;\n", f);
  assert_int_equal(fclose(f), 0);
  tl_start(c, "gate", 0, TL_ARGS("--token-file", "gate.token", "--only-named", "--commands", "gate-cmds.sql"));
  int status;
  json_t *e = pipeline_at(c, "/v2/pipeline", NULL, NULL, "[" EXEC("SELECT 1") "]", &status);
  assert_int_equal(status, 401);
  assert_string_equal(json_string_value(json_object_get(e, "code")), "AUTH_FAILED");
  json_decref(e);
  e = pipeline_at(c, "/v2/pipeline", "Bearer wrong", NULL, "[" EXEC("SELECT 1") "]", &status);
  assert_int_equal(status, 401);
  json_decref(e);
  json_t *a = pipeline_at(c, "/v2/pipeline", "Bearer s3cret-token-of-the-test", NULL,
                          "[" EXEC("SELECT 1") "," EXEC("CREATE TABLE x(a)") "," EXEC("BEGIN") "]", &status);
  assert_int_equal(status, 200);
  assert_string_equal(json_string_value(json_object_get(cell(a, 0, 0, 0), "value")), "1");
  expect_error(a, 1, "SQLITE_AUTH", "--only-named");
  expect_error(a, 2, "SQLITE_AUTH", "--only-named");
  json_decref(a);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* ---- The sequence splitter on the loop thread (#32) ------------------------------ */

/* "SELECT '" + n ';' + "'" as a JSON string's contents (malloc'd). */
static char *semicolons_in_string(size_t n) {
  char *s = malloc(n + 16);
  assert_non_null(s);
  memcpy(s, "SELECT '", 8);
  memset(s + 8, ';', n);
  memcpy(s + 8 + n, "'", 2);
  return s;
}

/* While `requests` (sent, not yet answered) is with lithd, /healthz must
 * be answered within 1 s; then requests' own answer within within_ms,
 * parsed (the caller decrefs). The old splitter ran sqlite3_complete once
 * per ';' on the loop thread: 200,000 ';' in one string held /healthz 26.6 s. */
static json_t *healthz_meanwhile(const struct tl_child *c, const char *requests, int within_ms) {
  size_t n = strlen(requests) + 64;
  char *body = malloc(n);
  struct tl_conn k;
  struct tl_resp r;
  json_error_t jerr;
  assert_non_null(body);
  snprintf(body, n, "{\"baton\":null,\"requests\":%s}", requests);
  int64_t t0 = now_ms();
  int fd = tl_send(c, "POST", "/v3/pipeline", NULL, body);
  free(body);
  usleep(50 * 1000); /* the loop has the request by now */
  int64_t t1 = now_ms();
  tl_conn_init(&k, c);
  int rc = tl_conn_request(&k, "GET", "/healthz", NULL, NULL, &r, 1000);
  int64_t took = now_ms() - t1;
  if (rc != TL_OK || took > 1000)
    fprintf(stderr, "/healthz: %d after %lld ms\n", rc, (long long)took);
  assert_int_equal(rc, TL_OK);
  assert_int_equal(r.status, 200);
  assert_true(took <= 1000);
  tl_resp_free(&r);
  tl_conn_close(&k);
  tl_read_within(fd, &r, within_ms);
  took = now_ms() - t0;
  if (r.status != 200 || took > within_ms)
    fprintf(stderr, "the pipeline: %d after %lld ms\n", r.status, (long long)took);
  assert_int_equal(r.status, 200);
  assert_true(took <= within_ms);
  json_t *j = json_loads(r.body, 0, &jerr);
  assert_non_null(j);
  tl_resp_free(&r);
  return j;
}

static void test_sequence_split(void **state) {
  struct tl_child *c = *state;
  tl_start(c, "seqsplit", 0, TL_ARGS("--max-sql", "300000", "--max-statements", "1000"));

  /* where SQLite ends statements: not inside quotes, comments or a trigger */
  json_t *a = pipeline(c, NULL, "[{\"type\":\"sequence\",\"sql\":\""
                       "CREATE TABLE s(a); CREATE TABLE log(b); "
                       "CREATE TRIGGER tr AFTER INSERT ON s BEGIN "
                       "INSERT INTO log VALUES (new.a || ';'); INSERT INTO log VALUES ('x;y'); END; "
                       "INSERT INTO s VALUES ('a;b') -- done;\\n; /* ; */ \"}," CLOSE "]");
  response(a, 0, "sequence");
  json_decref(a);
  assert_int_equal(count_rows(c, "s"), 1);
  assert_int_equal(count_rows(c, "log"), 2);

  /* 200,000 ';' in one string: one statement, at once, the loop free */
  char *sql = semicolons_in_string(200000);
  size_t cap = strlen(sql) + 256;
  char *req = malloc(cap);
  assert_non_null(req);
  snprintf(req, cap, "[{\"type\":\"sequence\",\"sql\":\"%s\"}," CLOSE "]", sql);
  a = healthz_meanwhile(c, req, 3000);
  response(a, 0, "sequence");
  json_decref(a);
  free(req);
  free(sql);

  /* stored once, run 200 times by sql_id: each split as fast */
  sql = semicolons_in_string(50000);
  cap = strlen(sql) + 200 * 48 + 256;
  req = malloc(cap);
  assert_non_null(req);
  size_t len = (size_t)snprintf(req, cap, "[{\"type\":\"store_sql\",\"sql_id\":1,\"sql\":\"%s\"}", sql);
  for (int i = 0; i < 200; i++)
    len += (size_t)snprintf(req + len, cap - len, ",{\"type\":\"sequence\",\"sql_id\":1}");
  snprintf(req + len, cap - len, "," CLOSE "]");
  a = healthz_meanwhile(c, req, 5000);
  response(a, 0, "store_sql");
  for (int i = 1; i <= 200; i++)
    response(a, (size_t)i, "sequence");
  json_decref(a);
  free(req);
  free(sql);

  /* --max-statements: 1000 run; one more is refused, and so is a text of
   * 100,000 statements, counted no further than the limit */
  cap = 100000 * 9 + 256;
  req = malloc(cap);
  assert_non_null(req);
  for (int n = 1000; n <= 1001; n++) {
    len = (size_t)snprintf(req, cap, "[{\"type\":\"sequence\",\"sql\":\"");
    for (int i = 0; i < n; i++)
      len += (size_t)snprintf(req + len, cap - len, "SELECT 1;");
    snprintf(req + len, cap - len, "\"}," CLOSE "]");
    a = pipeline(c, NULL, req);
    if (n == 1000)
      response(a, 0, "sequence");
    else
      expect_error(a, 0, "REQUEST_TOO_LARGE", "more statements than the limit of 1000");
    json_decref(a);
  }
  len = (size_t)snprintf(req, cap, "[{\"type\":\"sequence\",\"sql\":\"");
  memset(req + len, ';', 100000);
  snprintf(req + len + 100000, cap - len - 100000, "\"}," CLOSE "]");
  a = healthz_meanwhile(c, req, 3000);
  expect_error(a, 0, "REQUEST_TOO_LARGE", "more statements than the limit of 1000");
  json_decref(a);
  free(req);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* ---- Bodies by content, /health and /version (#33) ------------------------------ */

/* POST path with exactly these extra header lines (each ending "\r\n"; no
 * Content-Type unless they hold one) and body; the answer into *r. */
static void post_raw(const struct tl_child *c, const char *path, const char *headers, const char *body,
                     struct tl_resp *r) {
  int fd = tl_connect(c);
  assert_true(fd >= 0);
  size_t blen = strlen(body), cap = strlen(path) + strlen(headers) + blen + 256;
  char *msg = malloc(cap);
  assert_non_null(msg);
  int n = snprintf(msg, cap, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%sContent-Length: %zu\r\n\r\n%s",
                   path, headers, blen, body);
  assert_true(n > 0 && (size_t)n < cap);
  assert_int_equal(send(fd, msg, (size_t)n, MSG_NOSIGNAL), n);
  free(msg);
  tl_read(fd, r);
}

/* An error answer of Hrana's shape with this status and code. */
static void expect_refusal(struct tl_resp *r, int status, const char *code) {
  if (r->status != status || strstr(r->body, code) == NULL)
    fprintf(stderr, "expected %d %s, got %d: %s\n", status, code, r->status, r->body);
  assert_int_equal(r->status, status);
  assert_non_null(strstr(r->head, "content-type: application/json\r\n"));
  assert_non_null(strstr(r->body, code));
}

#define INSERT_ONE "{\"baton\":null,\"requests\":[" EXEC("INSERT INTO t VALUES (1)") "," CLOSE "]}"
#define CURSOR_INSERT "{\"baton\":null,\"batch\":{\"steps\":[{\"stmt\":{\"sql\":\"INSERT INTO t VALUES (1)\"}}]}}"

/* The libSQL clients send Hrana bodies as text/plain (hrana-client 0.4:
 * knex, @libsql/client <= 0.3) or with no Content-Type (libsql-js, the Go
 * client): read as JSON, as sqld reads them. A browser's request (it
 * carries Origin) is judged as before: a page's cross-site POST is refused
 * 403 and runs nothing, and even an allowed Origin must say JSON, or a
 * text/plain "simple" request would need no preflight. lithd's own /v1
 * routes keep the JSON Content-Type rule. */
static void test_content_types(void **state) {
  struct tl_child *c = *state;
  struct tl_resp r;
  tl_start(c, "ctype", 0, TL_ARGS("--allow-origin", "http://ok.example"));
  json_t *a = pipeline(c, NULL, "[" EXEC("CREATE TABLE t(x)") "," CLOSE "]");
  json_decref(a);
  static const char *const types[] = {"Content-Type: text/plain;charset=UTF-8\r\n", "",
                                      "Content-Type: application/octet-stream\r\n"};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    post_raw(c, "/v2/pipeline", types[i], INSERT_ONE, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"affected_row_count\":1"));
    tl_resp_free(&r);
    post_raw(c, "/v3/cursor", types[i], CURSOR_INSERT, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"type\":\"step_end\",\"affected_row_count\":1"));
    tl_resp_free(&r);
  }
  /* a database's own routes alike */
  post_raw(c, "/v1/db/main/v3/cursor", "Content-Type: text/plain;charset=UTF-8\r\n", CURSOR_INSERT, &r);
  assert_int_equal(r.status, 200);
  assert_non_null(strstr(r.body, "\"type\":\"step_end\",\"affected_row_count\":1"));
  tl_resp_free(&r);
  post_raw(c, "/v1/db/main/v2/pipeline", "", INSERT_ONE, &r);
  assert_int_equal(r.status, 200);
  tl_resp_free(&r);
  assert_int_equal(count_rows(c, "t"), 8);
  /* what is not JSON is a clear 400, whatever it says it is */
  post_raw(c, "/v3/pipeline", "Content-Type: text/plain\r\n", "INSERT INTO t VALUES (1)", &r);
  expect_refusal(&r, 400, "HTTP_PARSE_ERROR");
  tl_resp_free(&r);
  post_raw(c, "/v3/cursor", "", "{\"baton\":null", &r);
  expect_refusal(&r, 400, "HTTP_PARSE_ERROR");
  tl_resp_free(&r);
  /* a page's cross-site simple POST: refused, nothing run */
  static const char *const paths[] = {"/v2/pipeline", "/v3/pipeline", "/v3/cursor", "/v1/db/main/v3/cursor"};
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
    const char *body = strstr(paths[i], "cursor") ? CURSOR_INSERT : INSERT_ONE;
    post_raw(c, paths[i], "Origin: http://evil.example\r\nContent-Type: text/plain;charset=UTF-8\r\n", body, &r);
    expect_refusal(&r, 403, "FORBIDDEN");
    tl_resp_free(&r);
    post_raw(c, paths[i], "Origin: null\r\n", body, &r); /* a sandboxed page's */
    expect_refusal(&r, 403, "FORBIDDEN");
    tl_resp_free(&r);
    /* an allowed page still cannot skip the preflight */
    post_raw(c, paths[i], "Origin: http://ok.example\r\nContent-Type: text/plain\r\n", body, &r);
    expect_refusal(&r, 415, "HTTP_UNSUPPORTED_MEDIA_TYPE");
    tl_resp_free(&r);
    /* a DNS-rebinding page (same-origin to the browser) */
    post_raw(c, paths[i], "Host: evil.example\r\nContent-Type: text/plain\r\n", body, &r);
    expect_refusal(&r, 403, "FORBIDDEN");
    tl_resp_free(&r);
  }
  assert_int_equal(count_rows(c, "t"), 8);
  post_raw(c, "/v3/pipeline", "Origin: http://ok.example\r\nContent-Type: application/json\r\n", INSERT_ONE, &r);
  assert_int_equal(r.status, 200);
  tl_resp_free(&r);
  assert_int_equal(count_rows(c, "t"), 9);
  /* lithd's own routes keep the rule */
  post_raw(c, "/v1/query", "Content-Type: text/plain\r\n", "{\"statements\":[{\"sql\":\"SELECT 1\"}]}", &r);
  assert_int_equal(r.status, 415);
  tl_resp_free(&r);
  post_raw(c, "/v1/do", "", "{\"statements\":[{\"sql\":\"INSERT INTO t VALUES (2)\"}]}", &r);
  assert_int_equal(r.status, 415);
  tl_resp_free(&r);
  assert_int_equal(count_rows(c, "t"), 9);
  /* sqld's probes */
  tl_http(c, "GET", "/health", NULL, NULL, &r);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.body, "");
  tl_resp_free(&r);
  tl_http(c, "GET", "/version", NULL, NULL, &r);
  assert_int_equal(r.status, 200);
  assert_true(strncmp(r.body, "lithd ", 6) == 0);
  tl_resp_free(&r);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* ---- /v3/cursor (#33) ------------------------------------------------------------ */

/* POST /v3/cursor {"baton": baton, "batch": {"steps": steps}}: the status
 * into *status and the body, raw (the caller frees it). */
static char *cursor_raw(const struct tl_child *c, const char *baton, const char *steps, int *status) {
  size_t n = strlen(steps) + (baton ? strlen(baton) : 4) + 64;
  char *body = malloc(n);
  struct tl_resp r;
  assert_non_null(body);
  if (baton)
    snprintf(body, n, "{\"baton\":\"%s\",\"batch\":{\"steps\":%s}}", baton, steps);
  else
    snprintf(body, n, "{\"baton\":null,\"batch\":{\"steps\":%s}}", steps);
  tl_http(c, "POST", "/v3/cursor", NULL, body, &r);
  free(body);
  *status = r.status;
  char *out = r.body;
  r.body = NULL;
  tl_resp_free(&r);
  return out;
}

/* A cursor's answer as a JSON array of its lines (each parsed; the body
 * ends with '\n', no blank line); asserts 200. */
static json_t *cursor(const struct tl_child *c, const char *baton, const char *steps) {
  int status;
  char *body = cursor_raw(c, baton, steps, &status);
  if (status != 200)
    fprintf(stderr, "cursor: %d %s\n", status, body);
  assert_int_equal(status, 200);
  size_t len = strlen(body);
  assert_true(len > 0 && body[len - 1] == '\n');
  assert_true(body[0] == '{'); /* the first line is the head, nothing before it */
  json_t *lines = json_array();
  for (char *p = body, *nl; *p; p = nl + 1) {
    json_error_t jerr;
    nl = strchr(p, '\n');
    assert_non_null(nl);
    assert_true(nl > p);
    json_t *j = json_loadb(p, (size_t)(nl - p), 0, &jerr);
    if (j == NULL)
      fprintf(stderr, "line not JSON: %.*s\n", (int)(nl - p), p);
    assert_non_null(j);
    json_array_append_new(lines, j);
  }
  free(body);
  /* the first line: {"baton", "base_url": null} */
  json_t *head = json_array_get(lines, 0);
  assert_non_null(head);
  assert_true(json_is_null(json_object_get(head, "base_url")));
  assert_non_null(json_object_get(head, "baton"));
  return lines;
}

/* The entries' types and steps, as "step_begin:0 row step_end ..." */
static void entries_are(json_t *lines, const char *want) {
  char got[2048] = "";
  size_t n = 0;
  for (size_t i = 1; i < json_array_size(lines); i++) {
    json_t *e = json_array_get(lines, i);
    const char *type = json_string_value(json_object_get(e, "type"));
    json_t *step = json_object_get(e, "step");
    n += (size_t)snprintf(got + n, sizeof got - n, "%s%s", i > 1 ? " " : "", type ? type : "?");
    if (step != NULL)
      n += (size_t)snprintf(got + n, sizeof got - n, ":%lld", (long long)json_integer_value(step));
  }
  if (strcmp(got, want) != 0)
    fprintf(stderr, "entries: %s\n   want: %s\n", got, want);
  assert_string_equal(got, want);
}

#define STEP(sql) "{\"stmt\":{\"sql\":\"" sql "\"}}"

/* The entries exactly, on a store (dq: --dqlite): a step's begin with its
 * columns, its rows, its end with the counts; a failing step's error (the
 * batch goes on, as a batch request's); a skipped step nothing; the
 * stream's baton, which a pipeline takes next, and a baton a pipeline gave. */
static void cursor_entries(struct tl_child *c, int dq) {
  t_node node;
  if (dq) {
    assert_int_equal(system("rm -rf node1"), 0);
    t_node_init(&node, 1);
    assert_int_equal(t_node_start(&node, NULL, 10000), 0);
    tl_start(c, "cursor", TL_NO_DB, TL_ARGS("--dqlite", node.address, "--dqlite-failover-ms", "3000"));
  } else {
    tl_start(c, "cursor", 0, NULL);
  }
  json_t *l = cursor(c, NULL,
                     "[" STEP("CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT UNIQUE, r REAL)") ","
                     "{\"stmt\":{\"sql\":\"INSERT INTO t(k, r) VALUES (?, ?)\",\"args\":[{\"type\":\"text\","
                     "\"value\":\"a\"},{\"type\":\"float\",\"value\":1.5}]}},"
                     "{\"stmt\":{\"sql\":\"INSERT INTO t(k) VALUES (:k)\",\"named_args\":[{\"name\":\"k\","
                     "\"value\":{\"type\":\"text\",\"value\":\"b\"}}]}},"
                     "{\"stmt\":{\"sql\":\"INSERT INTO t(k) VALUES ('a')\"}},"
                     "{\"condition\":{\"type\":\"ok\",\"step\":3},\"stmt\":{\"sql\":\"DELETE FROM t\"}},"
                     STEP("SELECT id, k, r FROM t ORDER BY id") "]");
  entries_are(l, "step_begin:0 step_end step_begin:1 step_end step_begin:2 step_end step_error:3 step_begin:5 "
                 "row row step_end");
  json_t *e = json_array_get(l, 3);
  assert_int_equal(json_integer_value(json_object_get(e, "affected_row_count")), 0);
  e = json_array_get(l, 4); /* step 1's end */
  assert_int_equal(json_integer_value(json_object_get(e, "affected_row_count")), 1);
  assert_string_equal(json_string_value(json_object_get(e, "last_insert_rowid")), "1");
  e = json_array_get(l, 6);
  assert_string_equal(json_string_value(json_object_get(e, "last_insert_rowid")), "2");
  e = json_array_get(l, 7); /* the constraint */
  assert_string_equal(json_string_value(json_object_get(json_object_get(e, "error"), "code")), "SQLITE_CONSTRAINT");
  assert_non_null(strstr(json_string_value(json_object_get(json_object_get(e, "error"), "message")),
                         "UNIQUE constraint failed: t.k"));
  e = json_array_get(l, 8); /* the select's begin: its columns */
  json_t *cols = json_object_get(e, "cols");
  assert_int_equal(json_array_size(cols), 3);
  assert_string_equal(json_string_value(json_object_get(json_array_get(cols, 1), "name")), "k");
  assert_string_equal(json_string_value(json_object_get(json_array_get(cols, 1), "decltype")), "TEXT");
  e = json_array_get(l, 9);
  json_t *row = json_object_get(e, "row");
  assert_int_equal(json_array_size(row), 3);
  assert_string_equal(json_string_value(json_object_get(json_array_get(row, 0), "value")), "1");
  assert_string_equal(json_string_value(json_object_get(json_array_get(row, 1), "value")), "a");
  assert_true(json_real_value(json_object_get(json_array_get(row, 2), "value")) == 1.5);
  row = json_object_get(json_array_get(l, 10), "row");
  assert_string_equal(json_string_value(json_object_get(json_array_get(row, 2), "type")), "null");
  e = json_array_get(l, 11);
  assert_true(json_is_null(json_object_get(e, "last_insert_rowid")));
  assert_int_equal(json_integer_value(json_object_get(e, "affected_row_count")), 0);
  /* the stream goes on: its baton in a pipeline, the pipeline's in a cursor */
  char *baton = baton_of(json_array_get(l, 0));
  json_decref(l);
  json_t *a = pipeline(c, baton, "[" EXEC("SELECT count(*) FROM t") "]");
  assert_string_equal(json_string_value(json_object_get(cell(a, 0, 0, 0), "value")), "2");
  free(baton);
  baton = baton_of(a);
  json_decref(a);
  l = cursor(c, baton, "[]"); /* no steps: the head alone */
  entries_are(l, "");
  free(baton);
  baton = baton_of(json_array_get(l, 0));
  json_decref(l);
  /* a batch that fails whole (a step the parser refuses): one error entry */
  l = cursor(c, baton, "[{\"stmt\":{}}]");
  entries_are(l, "error");
  free(baton);
  baton = baton_of(json_array_get(l, 0));
  json_decref(l);
  int status;
  char *body = cursor_raw(c, baton, "[" STEP("SELECT 1") "]", &status);
  free(body);
  body = cursor_raw(c, baton, "[" STEP("SELECT 1") "]", &status); /* answered already */
  assert_int_equal(status, 400);
  assert_non_null(strstr(body, "STREAM_EXPIRED"));
  free(body);
  free(baton);
  /* a forged baton */
  body = cursor_raw(c, "0000.00000001.00000000000000000000000000000000", "[]", &status);
  assert_int_equal(status, 400);
  free(body);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  if (dq) {
    assert_int_equal(t_node_stop(&node, SIGTERM, 5000), 0);
    assert_int_equal(system("rm -rf node1"), 0);
  }
}

static void test_cursor_entries(void **state) { cursor_entries(*state, 0); }
static void test_cursor_entries_dqlite(void **state) { cursor_entries(*state, 1); }

/* Bodies that are no cursor: 400 in Hrana's shape, nothing run. */
static void test_cursor_bad_bodies(void **state) {
  struct tl_child *c = *state;
  struct tl_resp r;
  tl_start(c, "cbad", 0, NULL);
  json_t *a = pipeline(c, NULL, "[" EXEC("CREATE TABLE t(x)") "," CLOSE "]");
  json_decref(a);
  static const struct {
    const char *body, *code;
  } bad[] = {
      {"", "HTTP_PARSE_ERROR"},
      {"nope", "HTTP_PARSE_ERROR"},
      {"[]", "PROTO_ERROR"},
      {"{}", "PROTO_ERROR"},
      {"{\"baton\":null}", "PROTO_ERROR"},
      {"{\"batch\":[]}", "PROTO_ERROR"},
      {"{\"batch\":{}}", "PROTO_ERROR"},
      {"{\"batch\":{\"steps\":{}}}", "PROTO_ERROR"},
      {"{\"baton\":7,\"batch\":{\"steps\":[]}}", "PROTO_ERROR"},
      {"{\"baton\":\"a\\u0000b\",\"batch\":{\"steps\":[]}}", "PROTO_ERROR"},
      {"{\"baton\":\"garbage\",\"batch\":{\"steps\":[]}}", "STREAM_INVALID"},
      {"{\"requests\":[{\"type\":\"execute\",\"stmt\":{\"sql\":\"INSERT INTO t VALUES (1)\"}}]}", "PROTO_ERROR"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    post_raw(c, "/v3/cursor", "", bad[i].body, &r);
    expect_refusal(&r, 400, bad[i].code);
    tl_resp_free(&r);
  }
  tl_expect(c, "GET", "/v3/cursor", NULL, NULL, 405, NULL);
  assert_int_equal(count_rows(c, "t"), 0);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* A cursor runs on the stream like a batch request: it may begin an
 * interactive transaction (which then holds the writer), and commit or
 * roll it back; the same bounds as a batch (--max-statements, the
 * answer's bytes). */
static void test_cursor_transaction_and_limits(void **state) {
  struct tl_child *c = *state;
  tl_start(c, "ctx", 0, TL_ARGS("--max-statements", "5", "--max-run-ms", "60000"));
  json_t *a = pipeline(c, NULL, "[" EXEC("CREATE TABLE t(x INTEGER UNIQUE)") "," CLOSE "]");
  json_decref(a);
  /* begun in a cursor, committed in the next */
  json_t *l = cursor(c, NULL, "[" STEP("BEGIN") "," STEP("INSERT INTO t VALUES (1)") "]");
  entries_are(l, "step_begin:0 step_end step_begin:1 step_end");
  char *baton = baton_of(json_array_get(l, 0));
  json_decref(l);
  a = pipeline(c, baton, "[{\"type\":\"get_autocommit\"}]");
  assert_true(json_is_false(json_object_get(json_object_get(result(a, 0), "response"), "is_autocommit")));
  free(baton);
  baton = baton_of(a);
  json_decref(a);
  assert_int_equal(count_rows(c, "t"), 0); /* not yet committed */
  l = cursor(c, baton, "[" STEP("INSERT INTO t VALUES (2)") "," STEP("COMMIT") "]");
  entries_are(l, "step_begin:0 step_end step_begin:1 step_end");
  free(baton);
  baton = baton_of(json_array_get(l, 0));
  json_decref(l);
  assert_int_equal(count_rows(c, "t"), 2);
  /* begun and rolled back */
  l = cursor(c, baton, "[" STEP("BEGIN IMMEDIATE") "," STEP("INSERT INTO t VALUES (3)") "]");
  free(baton);
  baton = baton_of(json_array_get(l, 0));
  json_decref(l);
  l = cursor(c, baton, "[" STEP("INSERT INTO t VALUES (1)") "," STEP("ROLLBACK") "]");
  entries_are(l, "step_error:0 step_begin:1 step_end");
  free(baton);
  baton = baton_of(json_array_get(l, 0));
  json_decref(l);
  assert_int_equal(count_rows(c, "t"), 2);
  /* --max-statements bounds a cursor's steps as a batch's */
  l = cursor(c, baton, "[" STEP("SELECT 1") "," STEP("SELECT 1") "," STEP("SELECT 1") "," STEP("SELECT 1") ","
                       STEP("SELECT 1") "," STEP("INSERT INTO t VALUES (9)") "]");
  entries_are(l, "error");
  assert_string_equal(
      json_string_value(json_object_get(json_object_get(json_array_get(l, 1), "error"), "code")),
      "REQUEST_TOO_LARGE");
  free(baton);
  baton = baton_of(json_array_get(l, 0));
  json_decref(l);
  assert_int_equal(count_rows(c, "t"), 2);
  /* an answer past the bytes one answer may hold (64 MiB): refused (70 MB
   * of zero blobs: cheap to make, so a sanitizer's build meets the bound
   * before --max-run-ms) */
  l = cursor(c, baton,
             "[" STEP("WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 70) "
                      "SELECT zeroblob(1000000) FROM c") "]");
  size_t n = json_array_size(l);
  json_t *last = json_array_get(l, n - 1);
  const char *code = json_string_value(json_object_get(json_object_get(last, "error"), "code"));
  if (code == NULL || strcmp(code, "RESPONSE_TOO_LARGE") != 0)
    fprintf(stderr, "last entry: %s\n", json_dumps(last, 0));
  assert_non_null(code);
  assert_string_equal(code, "RESPONSE_TOO_LARGE");
  free(baton);
  baton = baton_of(json_array_get(l, 0));
  json_decref(l);
  /* a running cursor holds its stream busy: its write waits behind
   * another stream's transaction, and the same baton meanwhile is refused */
  a = pipeline(c, NULL, "[" EXEC("BEGIN IMMEDIATE") "," EXEC("INSERT INTO t VALUES (5)") "]");
  char *other = baton_of(a);
  json_decref(a);
  char body[256];
  snprintf(body, sizeof body,
           "{\"baton\":\"%s\",\"batch\":{\"steps\":[{\"stmt\":{\"sql\":\"INSERT INTO t VALUES (6)\"}}]}}", baton);
  int fd = tl_send(c, "POST", "/v3/cursor", NULL, body);
  usleep(200 * 1000); /* lithd has it, and it waits for the writer */
  int status;
  a = pipeline_at(c, "/v3/pipeline", NULL, baton, "[" EXEC("SELECT 1") "]", &status);
  assert_int_equal(status, 400);
  assert_string_equal(json_string_value(json_object_get(a, "code")), "STREAM_BUSY");
  json_decref(a);
  a = pipeline(c, other, "[" EXEC("COMMIT") "," CLOSE "]");
  json_decref(a);
  struct tl_resp r;
  tl_read(fd, &r);
  assert_int_equal(r.status, 200);
  assert_non_null(strstr(r.body, "{\"type\":\"step_end\",\"affected_row_count\":1,"));
  tl_resp_free(&r);
  assert_int_equal(count_rows(c, "t"), 4);
  free(other);
  free(baton);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* A client that reads a few bytes of a large cursor answer and goes: its
 * answer and its share of the answer budget go with it (else two such
 * would hold --max-answer-mib 24 and refuse every later one), and the
 * transaction it left open ends by its idle bound. */
static void test_cursor_abandoned(void **state) {
  struct tl_child *c = *state;
  tl_start(c, "cgone", 0, TL_ARGS("--max-answer-mib", "24", "--tx-idle-ms", "300", "--stream-idle-ms", "1000"));
  json_t *a = pipeline(c, NULL, "[" EXEC("CREATE TABLE t(x)") "," CLOSE "]");
  json_decref(a);
  static const char body[] =
      "{\"baton\":null,\"batch\":{\"steps\":[{\"stmt\":{\"sql\":\"BEGIN IMMEDIATE\"}},"
      "{\"stmt\":{\"sql\":\"WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 20) "
      "SELECT hex(zeroblob(250000)) FROM c\"}}]}}"; /* 10 MB of rows, a transaction left open */
  for (int i = 0; i < 4; i++) {
    int64_t until = now_ms() + 5000;
    for (;;) { /* the one before may still be going: its answer's share comes back when lithd sees it gone */
      int fd = tl_send(c, "POST", "/v3/cursor", NULL, body);
      char head[4096];
      ssize_t got = recv(fd, head, sizeof head - 1, MSG_WAITALL);
      assert_true(got > 0);
      head[got] = '\0';
      close(fd); /* half-read: gone */
      if (strncmp(head, "HTTP/1.1 200", 12) == 0 && strstr(head, "{\"type\":\"row\",\"row\":[") != NULL)
        break; /* its rows come: the answer is made, and its client goes */
      if (now_ms() > until)
        fprintf(stderr, "cursor %d: %s\n", i, head);
      assert_true(now_ms() <= until);
      usleep(50 * 1000);
    }
  }
  /* everything given back: a whole cursor is answered in full, and the
   * writer is free (each abandoned transaction ended by its idle bound) */
  int64_t until = now_ms() + 5000;
  json_t *l = NULL;
  for (;;) {
    int status;
    char *raw = cursor_raw(c, NULL, "[" STEP("INSERT INTO t VALUES (1)") "]", &status);
    int ok = status == 200 && strstr(raw, "\"step_end\"") != NULL;
    if (!ok && now_ms() > until)
      fprintf(stderr, "after: %d %s\n", status, raw);
    free(raw);
    if (ok)
      break;
    assert_true(now_ms() <= until);
    usleep(100 * 1000);
  }
  assert_int_equal(count_rows(c, "t"), 1);
  l = cursor(c, NULL,
             "[" STEP("WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 20) "
                      "SELECT hex(zeroblob(250000)) FROM c") "]");
  entries_are(l, "step_begin:0 row row row row row row row row row row row row row row row row row row row row "
                 "step_end");
  json_decref(l);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* clang-format on */

/* What the Hrana 3 spec has beside the cases above (docs/hrana.md,
 * "Hrana 3, row by row"): fields a client may send that lithd has no use
 * for are ignored as the spec asks (sqld's replication_index, an unknown
 * one), a close_sql of an id never stored is no error, v3 results carry
 * sqld's three counters, a request after a close in
 * the same pipeline is refused, and the Protobuf endpoints are not served. */
static void test_spec_fields_and_endpoints(void **state) {
  struct tl_child *c = *state;
  tl_start(c, "spec", 0, NULL);
  json_t *a = pipeline(c, NULL,
                       "[{\"type\":\"execute\",\"stmt\":{\"sql\":\"SELECT 7\",\"replication_index\":\"5\","
                       "\"want_rows\":true,\"some_future_field\":[1]}},"
                       "{\"type\":\"batch\",\"batch\":{\"steps\":[{\"stmt\":{\"sql\":\"SELECT 8\"}}],"
                       "\"replication_index\":\"5\"}},{\"type\":\"close_sql\",\"sql_id\":99}," CLOSE
                       "," EXEC("SELECT 9") "]");
  json_t *r = json_object_get(response(a, 0, "execute"), "result");
  assert_string_equal(json_string_value(json_object_get(cell(a, 0, 0, 0), "value")), "7");
  assert_int_equal(json_integer_value(json_object_get(r, "rows_read")), 1);
  assert_int_equal(json_integer_value(json_object_get(r, "rows_written")), 0);
  assert_true(json_is_number(json_object_get(r, "query_duration_ms")));
  json_t *steps = json_object_get(json_object_get(response(a, 1, "batch"), "result"), "step_results");
  assert_true(json_is_object(json_array_get(steps, 0)));
  response(a, 2, "close_sql"); /* an id never stored: no error, as the spec has it */
  response(a, 3, "close");
  expect_error(a, 4, "STREAM_CLOSED", NULL);
  assert_true(json_is_null(json_object_get(a, "baton")));
  json_decref(a);

  /* get_autocommit on /v2 too (sqld refuses it there: Hrana 3's) */
  int status;
  a = pipeline_at(c, "/v2/pipeline", NULL, NULL, "[{\"type\":\"get_autocommit\"}," CLOSE "]", &status);
  assert_int_equal(status, 200);
  assert_true(json_is_true(json_object_get(response(a, 0, "get_autocommit"), "is_autocommit")));
  json_decref(a);

  /* Hrana 3's Protobuf encoding: neither its probe nor its endpoints */
  tl_expect(c, "GET", "/v3-protobuf", NULL, NULL, 404, NULL);
  tl_expect(c, "POST", "/v3-protobuf/pipeline", NULL, "x", 404, NULL);
  tl_expect(c, "POST", "/v3-protobuf/cursor", NULL, "x", 404, NULL);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* A pipeline running when lithd stops: the request under way finishes,
 * the ones after it fail SERVER_SHUTTING_DOWN at once (its close still
 * closes), and lithd exits 0. The pipeline waits for the writer, which an
 * interactive transaction holds until the stop rolls it back. */
static void test_stop_mid_pipeline(void **state) {
  struct tl_child *c = *state;
  tl_start(c, "stopmid", 0, NULL);
  json_t *a = pipeline(c, NULL, "[" EXEC("CREATE TABLE t(x)") "," EXEC("BEGIN IMMEDIATE") "]");
  json_decref(a);
  int fd = tl_send(
      c, "POST", "/v3/pipeline", NULL,
      "{\"baton\":null,\"requests\":[" EXEC("INSERT INTO t VALUES (1)") "," EXEC("SELECT 1") "," CLOSE "]}");
  usleep(300 * 1000); /* lithd has it, and it waits for the writer */
  kill(c->pid, SIGTERM);
  struct tl_resp r;
  tl_read(fd, &r);
  assert_int_equal(r.status, 200);
  json_error_t jerr;
  a = json_loads(r.body, 0, &jerr);
  assert_non_null(a);
  expect_error(a, 1, "SERVER_SHUTTING_DOWN", NULL);
  response(a, 2, "close");
  json_decref(a);
  tl_resp_free(&r);
  assert_int_equal(tl_stop(c, 0, TL_TIMEOUT_MS), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_values, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_errors_and_arguments, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_batch_conditions, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_batch_conditions_dqlite, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_columns_after_schema_change, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_stored_sql_and_batons, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_stream_bound, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_skipped_step_conditions, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_skipped_step_conditions_dqlite, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_forged_batons_of_free_slots, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_interactive, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_interactive_dqlite, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_tx_waited, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_snapshot, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_gate, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_sequence_split, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_content_types, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_cursor_entries, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_cursor_entries_dqlite, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_cursor_bad_bodies, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_cursor_transaction_and_limits, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_cursor_abandoned, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_spec_fields_and_endpoints, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_stop_mid_pipeline, tl_setup, tl_teardown),
  };
  if (getenv("TEST_FILTER") != NULL) /* one test by name: TEST_FILTER=test_x */
    cmocka_set_test_filter(getenv("TEST_FILTER"));
  return cmocka_run_group_tests(tests, NULL, NULL);
}
