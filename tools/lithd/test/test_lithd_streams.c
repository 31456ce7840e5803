/*
 * test_lithd_streams — Hrana's streams and their transactions under
 * hostile and racing clients (routes/hrana_http.c, store/local.c; the life
 * they follow is store/tx_life.h): a deferred transaction whose move to the
 * writer races other writers, run for seconds (a minute under the
 * sanitizers), with every increment accounted for; what get_autocommit
 * says after a bound ended a transaction; read transactions never take the
 * writer; a snapshot that keeps the WAL from starting over is ended.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "child.h"

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- Requests that never assert (for client threads) ------------------------ */

/* POST /v3/pipeline on k: the parsed answer (the caller decrefs) and its
 * status, or NULL when no whole answer came. */
static json_t *conn_pipeline(struct tl_conn *k, const char *baton, const char *requests, int *status) {
  size_t n = strlen(requests) + (baton ? strlen(baton) : 4) + 64;
  char *body = malloc(n);
  struct tl_resp r;
  if (body == NULL)
    return NULL;
  if (baton)
    snprintf(body, n, "{\"baton\":\"%s\",\"requests\":%s}", baton, requests);
  else
    snprintf(body, n, "{\"baton\":null,\"requests\":%s}", requests);
  int rc = tl_conn_request(k, "POST", "/v3/pipeline", NULL, body, &r, 30000);
  free(body);
  if (rc != TL_OK)
    return NULL;
  *status = r.status;
  json_t *j = json_loads(r.body, 0, NULL);
  tl_resp_free(&r);
  return j;
}

/* The type of result k ("ok", "error") and, for an error, its code. */
static const char *result_type(json_t *a, size_t k, const char **code) {
  json_t *r = json_array_get(json_object_get(a, "results"), k);
  *code = json_string_value(json_object_get(json_object_get(r, "error"), "code"));
  return json_string_value(json_object_get(r, "type"));
}

static int result_ok(json_t *a, size_t k) {
  const char *code;
  const char *t = result_type(a, k, &code);
  return t != NULL && strcmp(t, "ok") == 0;
}

static int result_code_is(json_t *a, size_t k, const char *want) {
  const char *code;
  const char *t = result_type(a, k, &code);
  return t != NULL && strcmp(t, "error") == 0 && code != NULL && strcmp(code, want) == 0;
}

/* The first cell of execute result k as an integer. */
static int64_t cell_int(json_t *a, size_t k) {
  json_t *r = json_array_get(json_object_get(a, "results"), k);
  json_t *rows = json_object_get(json_object_get(json_object_get(r, "response"), "result"), "rows");
  const char *v = json_string_value(json_object_get(json_array_get(json_array_get(rows, 0), 0), "value"));
  return v ? strtoll(v, NULL, 10) : -1;
}

#define EXEC(sql) "{\"type\":\"execute\",\"stmt\":{\"sql\":\"" sql "\"}}"
#define CLOSE "{\"type\":\"close\"}"

/* The same, asserting (the test's own thread). */
static json_t *pipeline(const struct tl_child *c, const char *baton, const char *requests) {
  struct tl_conn k;
  int status = 0;
  tl_conn_init(&k, c);
  json_t *a = conn_pipeline(&k, baton, requests, &status);
  tl_conn_close(&k);
  assert_non_null(a);
  if (status != 200)
    fprintf(stderr, "status %d: %s\n", status, json_dumps(a, 0));
  assert_int_equal(status, 200);
  return a;
}

static char *baton_of(json_t *a) {
  const char *b = json_string_value(json_object_get(a, "baton"));
  assert_non_null(b);
  return strdup(b);
}

static void expect_code(json_t *a, size_t k, const char *code) {
  if (!result_code_is(a, k, code))
    fprintf(stderr, "result %zu is not %s: %s\n", k, code, json_dumps(a, 0));
  assert_true(result_code_is(a, k, code));
}

/* ---- The move's race (hole 1 of issue 32) ----------------------------------------
 * A deferred transaction reads v, then writes v + 1 and commits, while
 * plain /v1/do increments of the same row commit beside it: its move to
 * the writer gets the verdict "stale" often. The writer used to finish the
 * stale command after the loop had freed the transaction under it (a
 * use-after-free on the writer thread). Every increment answered as
 * committed must be in the row at the end: no lost update either. */

struct race {
  const struct tl_child *c;
  int64_t until;
  atomic_llong committed; /* increments answered committed */
  atomic_llong unknown;   /* answers lost: committed or not */
  atomic_llong stale;     /* the transaction's write refused SQLITE_BUSY (stale snapshot) */
  atomic_llong bad;       /* an answer no rule allows */
};

static void *race_tx(void *p) {
  struct race *rc = p;
  struct tl_conn k;
  char req[512];
  tl_conn_init(&k, rc->c);
  while (now_ms() < rc->until) {
    int status = 0;
    json_t *a =
        conn_pipeline(&k, NULL, "[" EXEC("BEGIN") "," EXEC("SELECT v FROM kv WHERE k = 'a'") "]", &status);
    if (a == NULL || status != 200 || !result_ok(a, 0) || !result_ok(a, 1)) {
      if (a == NULL || status != 503) /* STREAMS_EXHAUSTED, a busy reader: retry */
        atomic_fetch_add(&rc->bad, 1);
      json_decref(a);
      continue;
    }
    int64_t v = cell_int(a, 1);
    char *b = strdup(json_string_value(json_object_get(a, "baton")));
    json_decref(a);
    snprintf(req, sizeof req,
             "[{\"type\":\"execute\",\"stmt\":{\"sql\":\"UPDATE kv SET v = ? WHERE k = 'a'\","
             "\"args\":[{\"type\":\"integer\",\"value\":\"%lld\"}]}}," EXEC("COMMIT") "," CLOSE "]",
             (long long)(v + 1));
    a = conn_pipeline(&k, b, req, &status);
    free(b);
    if (a == NULL) {
      atomic_fetch_add(&rc->unknown, 1);
    } else if (status == 200 && result_ok(a, 0) && result_ok(a, 1)) {
      atomic_fetch_add(&rc->committed, 1);
    } else if (status == 200 && result_code_is(a, 0, "SQLITE_BUSY") && result_ok(a, 1)) {
      atomic_fetch_add(&rc->stale, 1); /* the snapshot was stale: nothing written, COMMIT ends the read */
    } else if (status == 200 &&
               (result_code_is(a, 0, "TRANSACTION_TIMEOUT") || result_code_is(a, 0, "SNAPSHOT_TOO_OLD"))) {
      /* a slow machine: nothing written */
    } else {
      fprintf(stderr, "race: unexpected answer %d: %s\n", status, json_dumps(a, 0));
      atomic_fetch_add(&rc->bad, 1);
    }
    json_decref(a);
  }
  tl_conn_close(&k);
  return NULL;
}

static void *race_do(void *p) {
  struct race *rc = p;
  struct tl_conn k;
  struct tl_resp r;
  tl_conn_init(&k, rc->c);
  while (now_ms() < rc->until) {
    int got =
        tl_conn_request(&k, "POST", "/v1/do", NULL,
                        "{\"statements\":[{\"sql\":\"UPDATE kv SET v = v + 1 WHERE k = 'a'\"}]}", &r, 30000);
    if (got != TL_OK) {
      atomic_fetch_add(&rc->unknown, 1);
      continue;
    }
    if (r.status == 200)
      atomic_fetch_add(&rc->committed, 1);
    else if (r.status != 503) /* the queue full: not committed */
      atomic_fetch_add(&rc->bad, 1);
    tl_resp_free(&r);
  }
  tl_conn_close(&k);
  return NULL;
}

/* How long the race runs: a minute under a sanitizer (CI runs the suite
 * so), else 8 s; LITH_RACE_MS overrides. */
static int64_t race_ms(void) {
  const char *e = getenv("LITH_RACE_MS");
  if (e != NULL && atoll(e) > 0)
    return atoll(e);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return 60000;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  return 60000;
#else
  return 8000;
#endif
#else
  return 8000;
#endif
}

static void race_with(struct tl_child *c, const char *name, const char *readers) {
  tl_start(c, name, 0, TL_ARGS("--readers", readers));
  json_t *a = pipeline(c, NULL,
                       "[" EXEC("CREATE TABLE kv(k TEXT PRIMARY KEY, v INTEGER NOT NULL)") "," EXEC(
                           "INSERT INTO kv VALUES ('a', 0)") "," CLOSE "]");
  json_decref(a);
  struct race rc = {.c = c, .until = now_ms() + race_ms()};
  pthread_t th[6];
  int ntx = 4, ndo = 2;
  for (int i = 0; i < ntx; i++)
    assert_int_equal(pthread_create(&th[i], NULL, race_tx, &rc), 0);
  for (int i = 0; i < ndo; i++)
    assert_int_equal(pthread_create(&th[ntx + i], NULL, race_do, &rc), 0);
  for (int i = 0; i < ntx + ndo; i++)
    pthread_join(th[i], NULL);
  long long committed = atomic_load(&rc.committed), unknown = atomic_load(&rc.unknown);
  long long stale = atomic_load(&rc.stale), bad = atomic_load(&rc.bad);
  printf("race (--readers %s): %lld committed, %lld stale, %lld unknown, %lld bad\n", readers, committed,
         stale, unknown, bad);
  /* lithd lived through it and stops cleanly (a sanitizer's report makes
   * the exit code non-zero) */
  assert_int_equal(tl_stop(c, SIGTERM, 30000), 0);
  char db[64];
  snprintf(db, sizeof db, "%s.db", name);
  int64_t v = tl_sql_int(db, "SELECT v FROM kv WHERE k = 'a'");
  assert_int_equal(bad, 0);
  assert_int_equal(unknown, 0);
  assert_int_equal(v, committed); /* no lost update, nothing answered that did not commit */
  assert_true(stale > 0);         /* the race was run: moves got the stale verdict */
  assert_true(committed > 0);
  tl_assert_integrity(db);
}

static void test_move_race(void **state) { race_with(*state, "race4", "4"); }
static void test_move_race_default(void **state) { race_with(*state, "race2", "2"); }

/* ---- get_autocommit after a bound (hole 9) ----------------------------------------
 * A transaction its idle bound rolled back is no longer open: the stream is
 * in autocommit again (get_autocommit true), and its next statement is
 * refused TRANSACTION_TIMEOUT rather than run outside the transaction the
 * client thinks it is in. */
static void test_autocommit_after_timeout(void **state) {
  struct tl_child *c = *state;
  tl_start(c, "autoc", 0, TL_ARGS("--readers", "3", "--tx-idle-ms", "300", "--tx-max-ms", "5000"));
  json_t *a = pipeline(c, NULL, "[" EXEC("CREATE TABLE t(x)") "," CLOSE "]");
  json_decref(a);
  const char *begins[] = {EXEC("BEGIN IMMEDIATE"), EXEC("BEGIN"), EXEC("BEGIN TRANSACTION READONLY")};
  for (size_t i = 0; i < sizeof begins / sizeof *begins; i++) {
    char req[256];
    snprintf(req, sizeof req, "[%s,{\"type\":\"get_autocommit\"}]", begins[i]);
    a = pipeline(c, NULL, req);
    assert_true(result_ok(a, 0));
    assert_true(json_is_false(json_object_get(
        json_object_get(json_array_get(json_object_get(a, "results"), 1), "response"), "is_autocommit")));
    char *b = baton_of(a);
    json_decref(a);
    usleep(900 * 1000); /* three idle bounds */
    a = pipeline(c, b, "[{\"type\":\"get_autocommit\"}]");
    json_t *resp = json_object_get(json_array_get(json_object_get(a, "results"), 0), "response");
    if (!json_is_true(json_object_get(resp, "is_autocommit")))
      fprintf(stderr, "%s: get_autocommit after the bound: %s\n", begins[i], json_dumps(a, 0));
    assert_true(json_is_true(json_object_get(resp, "is_autocommit")));
    free(b);
    b = baton_of(a);
    json_decref(a);
    a = pipeline(c, b, "[" EXEC("INSERT INTO t VALUES (1)") "," CLOSE "]");
    expect_code(a, 0, "TRANSACTION_TIMEOUT"); /* never run outside the transaction */
    json_decref(a);
    free(b);
  }
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  assert_int_equal(tl_sql_int("autoc.db", "SELECT count(*) FROM t"), 0);
}

/* ---- Read transactions never take the writer (hole 6) ---------------------------
 * A BEGIN / BEGIN TRANSACTION READONLY holds one of the database's readers
 * (one is kept for queries, unless there is only one); with none to spare
 * the next one waits for a reader, first come first served, at most
 * --tx-idle-ms, and is then refused SQLITE_BUSY. Meanwhile writes go on. */

struct timed {
  const struct tl_child *c;
  const char *path, *body;
  int status;
  int64_t took_ms;
  json_t *answer; /* a pipeline's */
};

static void *timed_post(void *p) {
  struct timed *t = p;
  struct tl_conn k;
  struct tl_resp r;
  int64_t t0 = now_ms();
  tl_conn_init(&k, t->c);
  int rc = tl_conn_request(&k, "POST", t->path, NULL, t->body, &r, 30000);
  t->took_ms = now_ms() - t0;
  t->status = rc == TL_OK ? r.status : rc;
  t->answer = rc == TL_OK ? json_loads(r.body, 0, NULL) : NULL;
  if (rc == TL_OK)
    tl_resp_free(&r);
  tl_conn_close(&k);
  return NULL;
}

static void timed_run(struct timed *t) { timed_post(t); }

#define DO_INSERT "{\"statements\":[{\"sql\":\"INSERT INTO t VALUES (-1)\"}]}"

static void test_read_tx_waits_for_a_reader(void **state) {
  struct tl_child *c = *state;
  tl_start(c, "rtx", 0, TL_ARGS("--readers", "2", "--tx-idle-ms", "700", "--tx-max-ms", "8000"));
  json_t *a = pipeline(c, NULL, "[" EXEC("CREATE TABLE t(x)") "," CLOSE "]");
  json_decref(a);

  /* A takes the one reader lithd spares */
  a = pipeline(c, NULL, "[" EXEC("BEGIN TRANSACTION READONLY") "," EXEC("SELECT count(*) FROM t") "]");
  char *ba = baton_of(a);
  json_decref(a);

  /* B waits for it, while a write goes through at once */
  struct timed tb = {c,
                     "/v3/pipeline",
                     "{\"baton\":null,\"requests\":[" EXEC("BEGIN") "," EXEC("SELECT count(*) FROM t") "]}",
                     0,
                     0,
                     NULL};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, timed_post, &tb), 0);
  usleep(150 * 1000);
  struct timed w = {c, "/v1/do", DO_INSERT, 0, 0, NULL};
  timed_run(&w);
  assert_int_equal(w.status, 200);
  assert_true(w.took_ms < 1000); /* never behind a read transaction */
  usleep(200 * 1000);
  /* A commits: B gets its reader and begins, on a snapshot that sees the write */
  a = pipeline(c, ba, "[" EXEC("COMMIT") "," CLOSE "]");
  assert_true(result_ok(a, 0));
  json_decref(a);
  free(ba);
  pthread_join(th, NULL);
  assert_int_equal(tb.status, 200);
  assert_true(tb.took_ms >= 300);
  assert_true(result_ok(tb.answer, 0) && result_ok(tb.answer, 1));
  assert_int_equal(cell_int(tb.answer, 1), 1);
  char *bb = baton_of(tb.answer);
  json_decref(tb.answer);

  /* B kept busy past the wait's bound: C is refused SQLITE_BUSY after it,
   * nothing begun, and writes went on meanwhile */
  struct timed tc = {c,
                     "/v3/pipeline",
                     "{\"baton\":null,\"requests\":[" EXEC("BEGIN TRANSACTION READONLY") "," EXEC(
                         "SELECT count(*) FROM t") ",{\"type\":\"get_autocommit\"}," CLOSE "]}",
                     0,
                     0,
                     NULL};
  assert_int_equal(pthread_create(&th, NULL, timed_post, &tc), 0);
  for (int i = 0; i < 5; i++) { /* B's requests keep it within its idle bound */
    usleep(250 * 1000);
    a = pipeline(c, bb, "[" EXEC("SELECT count(*) FROM t") "]");
    assert_int_equal(cell_int(a, 0), 1); /* its snapshot */
    free(bb);
    bb = baton_of(a);
    json_decref(a);
    timed_run(&w);
    assert_true(w.status == 200 && w.took_ms < 1000);
  }
  pthread_join(th, NULL);
  assert_int_equal(tc.status, 200);
  if (!result_code_is(tc.answer, 0, "SQLITE_BUSY"))
    fprintf(stderr, "C: %s\n", json_dumps(tc.answer, 0));
  assert_true(result_code_is(tc.answer, 0, "SQLITE_BUSY"));
  assert_true(tc.took_ms >= 650 && tc.took_ms < 5000);
  json_t *msg = json_object_get(
      json_object_get(json_array_get(json_object_get(tc.answer, "results"), 0), "error"), "message");
  assert_non_null(strstr(json_string_value(msg), "--readers"));
  /* the rest of its pipeline ran in autocommit: the SELECT on its own */
  assert_true(result_ok(tc.answer, 1));
  json_decref(tc.answer);
  a = pipeline(c, bb, "[" EXEC("ROLLBACK") "," CLOSE "]");
  json_decref(a);
  free(bb);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  assert_int_equal(tl_sql_int("rtx.db", "SELECT count(*) FROM t"), 6);
}

/* With one reader, a read transaction holds it, not the writer: writes go
 * on at once, queries wait for it. */
static void test_read_tx_one_reader(void **state) {
  struct tl_child *c = *state;
  tl_start(c, "rtx1", 0, TL_ARGS("--readers", "1", "--tx-idle-ms", "3000"));
  json_t *a = pipeline(c, NULL, "[" EXEC("CREATE TABLE t(x)") "," CLOSE "]");
  json_decref(a);
  a = pipeline(c, NULL, "[" EXEC("BEGIN") "," EXEC("SELECT count(*) FROM t") "]");
  char *b = baton_of(a);
  json_decref(a);
  struct timed w = {c, "/v1/do", DO_INSERT, 0, 0, NULL};
  timed_run(&w);
  assert_int_equal(w.status, 200);
  assert_true(w.took_ms < 1000);
  struct timed q = {c, "/v1/query", "{\"statements\":[{\"sql\":\"SELECT count(*) FROM t\"}]}", 0, 0, NULL};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, timed_post, &q), 0);
  usleep(300 * 1000);
  a = pipeline(c, b, "[" EXEC("SELECT count(*) FROM t") "," EXEC("COMMIT") "," CLOSE "]");
  assert_int_equal(cell_int(a, 0), 0); /* its snapshot */
  json_decref(a);
  free(b);
  pthread_join(th, NULL);
  assert_int_equal(q.status, 200);
  assert_true(q.took_ms >= 250); /* it waited for the reader */
  json_decref(q.answer);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_move_race, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_move_race_default, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_autocommit_after_timeout, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_read_tx_waits_for_a_reader, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_read_tx_one_reader, tl_setup, tl_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
