/*
 * The statement cache (sqlite/stmt_cache.h, internal API) on a plain
 * in-memory SQLite connection, without the writer:
 *   - the same SQL text gives back the same statement and is prepared once,
 *     also when it comes from another buffer; a buffer reused for other SQL
 *     gives the other statement;
 *   - a statement comes back reset (not mid-step) and with its bindings
 *     cleared, both within one release period and after a release;
 *   - the bound holds: past capacity the least recently used statement that
 *     is not in use is evicted (and is prepared again when asked for);
 *   - statements handed out since the last release are never evicted (the
 *     cache grows past its bound and every one of them stays valid), release
 *     resets them, and the next insertion shrinks the cache back;
 *   - more than one statement, empty SQL, only a comment or NULL are refused
 *     with LITH_MISUSE and nothing is cached; a syntax error or a missing
 *     table gives LITH_ERROR with SQLite's message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../stmt_cache.h"
#include "common.h"

static sqlite3 *open_mem(void) {
  sqlite3 *conn = NULL;
  assert_int_equal(sqlite3_open_v2(":memory:", &conn, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_exec(conn,
                                "CREATE TABLE t(x INTEGER);"
                                "INSERT INTO t VALUES (1), (2), (3);",
                                NULL, NULL, NULL),
                   SQLITE_OK);
  return conn;
}

static sqlite3_stmt *get_ok(lith__stmt_cache *c, const char *sql) {
  sqlite3_stmt *st = (sqlite3_stmt *)(uintptr_t)1;
  int rc = lith__stmt_cache_get(c, sql, &st);
  if (rc != LITH_OK)
    fprintf(stderr, "get(%s): %s: %s\n", sql, lith_errstr(rc), lith_errmsg(NULL));
  assert_int_equal(rc, LITH_OK);
  assert_non_null(st);
  return st;
}

/* Step st once and return column 0 as an integer (asserts a row). */
static int64_t step_int(sqlite3_stmt *st) {
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  return sqlite3_column_int64(st, 0);
}

static void test_same_text_same_statement_prepared_once(void **state) {
  (void)state;
  sqlite3 *conn = open_mem();
  lith__stmt_cache *c = NULL;
  assert_int_equal(lith__stmt_cache_create(conn, 8, &c), LITH_OK);
  assert_non_null(c);
  assert_int_equal(lith__stmt_cache_count(c), 0);
  assert_int_equal(lith__stmt_cache_prepares(c), 0);

  sqlite3_stmt *a = get_ok(c, "SELECT count(*) FROM t");
  assert_int_equal(lith__stmt_cache_prepares(c), 1);
  assert_int_equal(lith__stmt_cache_count(c), 1);
  assert_string_equal(sqlite3_sql(a), "SELECT count(*) FROM t");

  /* same text, same period */
  assert_ptr_equal(get_ok(c, "SELECT count(*) FROM t"), a);
  /* same text from another buffer (heap copy, not the literal) */
  char buf[64];
  snprintf(buf, sizeof buf, "SELECT %s FROM t", "count(*)");
  assert_ptr_equal(get_ok(c, buf), a);
  lith__stmt_cache_release(c);
  /* and after a release */
  assert_ptr_equal(get_ok(c, buf), a);
  assert_int_equal(lith__stmt_cache_prepares(c), 1);
  assert_int_equal(lith__stmt_cache_count(c), 1);
  assert_int_equal(step_int(a), 3);

  /* one buffer reused for other SQL must not hit the old entry */
  snprintf(buf, sizeof buf, "SELECT max(x) FROM t");
  sqlite3_stmt *b = get_ok(c, buf);
  assert_ptr_not_equal(b, a);
  assert_int_equal(step_int(b), 3);
  snprintf(buf, sizeof buf, "SELECT min(x) FROM t");
  sqlite3_stmt *m = get_ok(c, buf);
  assert_ptr_not_equal(m, b);
  assert_ptr_not_equal(m, a);
  assert_int_equal(step_int(m), 1);
  /* texts that differ only by a trailing space are different texts */
  sqlite3_stmt *sp = get_ok(c, "SELECT min(x) FROM t ");
  assert_ptr_not_equal(sp, m);
  assert_int_equal(lith__stmt_cache_prepares(c), 4);
  assert_int_equal(lith__stmt_cache_count(c), 4);

  lith__stmt_cache_release(c);
  lith__stmt_cache_destroy(c);
  lith__stmt_cache_destroy(NULL);                   /* allowed */
  assert_int_equal(sqlite3_close(conn), SQLITE_OK); /* every statement was finalized */
}

static void test_comes_back_reset_and_unbound(void **state) {
  (void)state;
  sqlite3 *conn = open_mem();
  lith__stmt_cache *c = NULL;
  assert_int_equal(lith__stmt_cache_create(conn, 8, &c), LITH_OK);

  const char *scan = "SELECT x FROM t WHERE x >= ? ORDER BY x";
  sqlite3_stmt *st = get_ok(c, scan);
  assert_int_equal(sqlite3_bind_int(st, 1, 2), SQLITE_OK);
  assert_int_equal(step_int(st), 2); /* left mid-step */
  assert_true(sqlite3_stmt_busy(st));

  /* again in the same period while it is mid-step (a recursive walk): a
   * second statement, unbound (NULL >= ... is no row); the first keeps its
   * place */
  sqlite3_stmt *st2 = get_ok(c, scan);
  assert_ptr_not_equal(st2, st);
  assert_false(sqlite3_stmt_busy(st2));
  assert_int_equal(sqlite3_step(st2), SQLITE_DONE);
  assert_int_equal(step_int(st), 3);
  /* once the first has run to its end, asking again gives it back, reset
   * and unbound */
  while (sqlite3_step(st) == SQLITE_ROW)
    ;
  assert_ptr_equal(get_ok(c, scan), st);
  assert_false(sqlite3_stmt_busy(st));
  assert_int_equal(sqlite3_step(st), SQLITE_DONE);
  sqlite3_reset(st);
  assert_int_equal(lith__stmt_cache_count(c), 1); /* one text, one entry */

  assert_int_equal(sqlite3_bind_int(st, 1, 1), SQLITE_OK);
  assert_int_equal(step_int(st), 1);
  assert_true(sqlite3_stmt_busy(st));
  /* release resets what was handed out */
  lith__stmt_cache_release(c);
  assert_false(sqlite3_stmt_busy(st));
  /* after the release: still bound? must not be */
  assert_ptr_equal(get_ok(c, scan), st);
  assert_false(sqlite3_stmt_busy(st));
  assert_int_equal(sqlite3_step(st), SQLITE_DONE);
  sqlite3_reset(st);

  /* a bound value must not leak into the next use, even without stepping */
  sqlite3_stmt *echo = get_ok(c, "SELECT ?1");
  assert_int_equal(sqlite3_bind_int(echo, 1, 42), SQLITE_OK);
  lith__stmt_cache_release(c);
  assert_ptr_equal(get_ok(c, "SELECT ?1"), echo);
  assert_int_equal(sqlite3_step(echo), SQLITE_ROW);
  assert_int_equal(sqlite3_column_type(echo, 0), SQLITE_NULL);

  assert_int_equal(lith__stmt_cache_prepares(c), 3); /* scan, its copy, echo */
  lith__stmt_cache_release(c);
  lith__stmt_cache_destroy(c);
  assert_int_equal(sqlite3_close(conn), SQLITE_OK); /* the copy was finalized too */
}

/* Copies for the same text while each is mid-step: a walk as deep as the
 * cap works, and is cheap the next time (the copies are kept); one deeper
 * fails loudly instead of resetting a statement in use. */
static void test_copies_while_mid_step(void **state) {
  (void)state;
  sqlite3 *conn = open_mem();
  lith__stmt_cache *c = NULL;
  assert_int_equal(lith__stmt_cache_create(conn, 4, &c), LITH_OK);
  const char *scan = "SELECT x FROM t ORDER BY x";
  enum { DEPTH = 33 }; /* the statement and 32 copies */
  sqlite3_stmt *st[DEPTH];
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < DEPTH; i++) {
      st[i] = get_ok(c, scan);
      for (int j = 0; j < i; j++)
        assert_ptr_not_equal(st[i], st[j]);
      assert_int_equal(step_int(st[i]), 1);
    }
    for (int i = 0; i < DEPTH; i++) /* every one where it was left */
      assert_int_equal(step_int(st[i]), 2);
    sqlite3_stmt *none = (sqlite3_stmt *)1;
    assert_int_equal(lith__stmt_cache_get(c, scan, &none), LITH_MISUSE);
    assert_null(none);
    assert_non_null(strstr(lith_errmsg(NULL), "mid-step"));
    lith__stmt_cache_release(c);
    for (int i = 0; i < DEPTH; i++)
      assert_false(sqlite3_stmt_busy(st[i]));
  }
  assert_int_equal(lith__stmt_cache_prepares(c), DEPTH); /* the second round prepared none */
  assert_int_equal(lith__stmt_cache_count(c), 1);
  lith__stmt_cache_destroy(c);
  assert_int_equal(sqlite3_close(conn), SQLITE_OK);
}

/* Get sql in a period of its own; returns 1 if it had to be prepared. */
static int fetch_alone(lith__stmt_cache *c, const char *sql) {
  unsigned long before = lith__stmt_cache_prepares(c);
  get_ok(c, sql);
  lith__stmt_cache_release(c);
  return lith__stmt_cache_prepares(c) != before;
}

static void test_bound_evicts_least_recently_used(void **state) {
  (void)state;
  sqlite3 *conn = open_mem();
  lith__stmt_cache *c = NULL;
  assert_int_equal(lith__stmt_cache_create(conn, 3, &c), LITH_OK);

  assert_true(fetch_alone(c, "SELECT 1"));
  assert_true(fetch_alone(c, "SELECT 2"));
  assert_true(fetch_alone(c, "SELECT 3"));
  assert_int_equal(lith__stmt_cache_count(c), 3);
  /* use 1 again: 2 is now the least recently used */
  assert_false(fetch_alone(c, "SELECT 1"));
  assert_true(fetch_alone(c, "SELECT 4"));
  assert_int_equal(lith__stmt_cache_count(c), 3);
  /* 1, 3, 4 are still cached (in this order of use they become 1 < 3 < 4) */
  assert_false(fetch_alone(c, "SELECT 1"));
  assert_false(fetch_alone(c, "SELECT 3"));
  assert_false(fetch_alone(c, "SELECT 4"));
  /* 2 was evicted: prepared again, evicting 1 (least recent now) */
  assert_true(fetch_alone(c, "SELECT 2"));
  assert_int_equal(lith__stmt_cache_count(c), 3);
  assert_false(fetch_alone(c, "SELECT 3"));
  assert_false(fetch_alone(c, "SELECT 4"));
  assert_false(fetch_alone(c, "SELECT 2"));
  assert_true(fetch_alone(c, "SELECT 1"));
  assert_int_equal(lith__stmt_cache_count(c), 3);
  assert_int_equal(lith__stmt_cache_prepares(c), 6);

  /* a long run of distinct texts never lets the cache exceed its bound */
  char sql[64];
  for (int i = 0; i < 200; i++) {
    snprintf(sql, sizeof sql, "SELECT %d + 1000", i);
    assert_true(fetch_alone(c, sql));
    assert_true(lith__stmt_cache_count(c) <= 3);
  }
  assert_int_equal(lith__stmt_cache_count(c), 3);

  lith__stmt_cache_destroy(c);
  assert_int_equal(sqlite3_close(conn), SQLITE_OK);
}

static void test_in_use_never_evicted(void **state) {
  (void)state;
  sqlite3 *conn = open_mem();
  lith__stmt_cache *c = NULL;
  assert_int_equal(lith__stmt_cache_create(conn, 2, &c), LITH_OK);

  /* an older statement not in use: the first to go when room is needed */
  assert_true(fetch_alone(c, "SELECT 'old'"));

  enum { N = 12 };
  sqlite3_stmt *st[N];
  char sql[64];
  for (int i = 0; i < N; i++) {
    snprintf(sql, sizeof sql, "SELECT x + %d FROM t ORDER BY x", i * 10);
    st[i] = get_ok(c, sql);
    for (int j = 0; j < i; j++)
      assert_ptr_not_equal(st[i], st[j]);
    /* leave every one mid-step */
    assert_int_equal(step_int(st[i]), 1 + i * 10);
  }
  /* all twelve in use: the cache grew past its bound of 2 */
  assert_int_equal(lith__stmt_cache_count(c), N);
  /* every one still valid and still where it was */
  for (int i = 0; i < N; i++) {
    assert_true(sqlite3_stmt_busy(st[i]));
    assert_int_equal(step_int(st[i]), 2 + i * 10);
  }
  /* asking again in the same period, once reset, gives the same statements */
  for (int i = 0; i < N; i++) {
    snprintf(sql, sizeof sql, "SELECT x + %d FROM t ORDER BY x", i * 10);
    sqlite3_reset(st[i]);
    assert_ptr_equal(get_ok(c, sql), st[i]);
    assert_false(sqlite3_stmt_busy(st[i]));
    assert_int_equal(step_int(st[i]), 1 + i * 10);
  }
  assert_int_equal(lith__stmt_cache_prepares(c), 1 + N);

  lith__stmt_cache_release(c);
  for (int i = 0; i < N; i++)
    assert_false(sqlite3_stmt_busy(st[i]));

  /* the next insertion shrinks the cache back to its bound */
  assert_true(fetch_alone(c, "SELECT 'new'"));
  assert_int_equal(lith__stmt_cache_count(c), 2);
  /* the most recent of the twelve survived, the old one did not */
  snprintf(sql, sizeof sql, "SELECT x + %d FROM t ORDER BY x", (N - 1) * 10);
  assert_false(fetch_alone(c, sql));
  assert_true(fetch_alone(c, "SELECT 'old'"));

  lith__stmt_cache_destroy(c);
  assert_int_equal(sqlite3_close(conn), SQLITE_OK);
}

static void expect_refused(lith__stmt_cache *c, const char *sql, int want, const char *msg_part) {
  sqlite3_stmt *st = (sqlite3_stmt *)(uintptr_t)1;
  int count = lith__stmt_cache_count(c);
  unsigned long prepares = lith__stmt_cache_prepares(c);
  int rc = lith__stmt_cache_get(c, sql, &st);
  if (rc != want)
    fprintf(stderr, "get(%s): got %s, want %s (%s)\n", sql ? sql : "NULL", lith_errstr(rc), lith_errstr(want),
            lith_errmsg(NULL));
  assert_int_equal(rc, want);
  assert_null(st);
  assert_true(strlen(lith_errmsg(NULL)) > 0);
  if (msg_part && !strstr(lith_errmsg(NULL), msg_part))
    fprintf(stderr, "get(%s): message \"%s\" lacks \"%s\"\n", sql, lith_errmsg(NULL), msg_part);
  if (msg_part)
    assert_non_null(strstr(lith_errmsg(NULL), msg_part));
  assert_int_equal(lith__stmt_cache_count(c), count);
  assert_int_equal(lith__stmt_cache_prepares(c), prepares);
}

static void test_refusals(void **state) {
  (void)state;
  sqlite3 *conn = open_mem();
  lith__stmt_cache *c = NULL;
  assert_int_equal(lith__stmt_cache_create(conn, 4, &c), LITH_OK);

  expect_refused(c, "SELECT 1; SELECT 2", LITH_MISUSE, NULL);
  expect_refused(c, "INSERT INTO t VALUES (7); DELETE FROM t", LITH_MISUSE, NULL);
  expect_refused(c, "", LITH_MISUSE, NULL);
  expect_refused(c, "   \n\t ", LITH_MISUSE, NULL);
  expect_refused(c, ";", LITH_MISUSE, NULL);
  expect_refused(c, "-- only a comment", LITH_MISUSE, NULL);
  expect_refused(c, NULL, LITH_MISUSE, NULL);
  expect_refused(c, "SELECT 1; -- why\nSELECT 2", LITH_MISUSE, NULL);
  expect_refused(c, "SELECT 1; /* why */ SELECT 2", LITH_MISUSE, NULL);
  /* a trailing comment is no second statement (sqlite3 runs these too) */
  const char *commented[] = {"SELECT 1; -- why", "SELECT 1 -- why", "SELECT 1; /* why */ ;",
                             "SELECT 1;\n-- a\n/* b */\n", "SELECT 1; /* left open"};
  for (size_t k = 0; k < sizeof commented / sizeof *commented; k++) {
    assert_int_equal(step_int(get_ok(c, commented[k])), 1);
    lith__stmt_cache_release(c);
  }
  expect_refused(c, "SELEKT 1", LITH_ERROR, "syntax error");
  expect_refused(c, "SELECT * FROM no_such_table", LITH_ERROR, "no such table");
  /* the refused multi-statement text did not run its first statement */
  sqlite3_stmt *cnt = get_ok(c, "SELECT count(*) FROM t WHERE x = 7");
  assert_int_equal(step_int(cnt), 0);
  lith__stmt_cache_release(c);

  /* one statement with a trailing semicolon and blanks is fine */
  sqlite3_stmt *st = get_ok(c, "SELECT 5;  \n");
  assert_int_equal(step_int(st), 5);
  lith__stmt_cache_release(c);
  /* a refusal does not disturb what is cached */
  expect_refused(c, "SELECT 1; SELECT 2", LITH_MISUSE, NULL);
  assert_ptr_equal(get_ok(c, "SELECT 5;  \n"), st);

  lith__stmt_cache_release(c);
  lith__stmt_cache_destroy(c);
  assert_int_equal(sqlite3_close(conn), SQLITE_OK);
}

/* The cache works on a file connection too, and its statements see the data
 * as of each step (a cached statement is not a stale snapshot). */
static void test_on_a_file_connection(void **state) {
  (void)state;
  const char *path = "stmt_cache.db";
  t_remove_db(path);
  sqlite3 *conn = NULL;
  assert_int_equal(sqlite3_open_v2(path, &conn, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_exec(conn, "CREATE TABLE k(v)", NULL, NULL, NULL), SQLITE_OK);
  lith__stmt_cache *c = NULL;
  assert_int_equal(lith__stmt_cache_create(conn, 0, &c), LITH_OK); /* 0: treated as 1 */
  for (int i = 1; i <= 5; i++) {
    sqlite3_stmt *ins = get_ok(c, "INSERT INTO k VALUES (?)");
    assert_int_equal(sqlite3_bind_int(ins, 1, i), SQLITE_OK);
    assert_int_equal(sqlite3_step(ins), SQLITE_DONE);
    lith__stmt_cache_release(c);
    sqlite3_stmt *sum = get_ok(c, "SELECT sum(v) FROM k");
    assert_int_equal(step_int(sum), i * (i + 1) / 2);
    lith__stmt_cache_release(c);
  }
  /* capacity 1, alternating texts: each use prepares again */
  assert_int_equal(lith__stmt_cache_prepares(c), 10);
  assert_int_equal(lith__stmt_cache_count(c), 1);
  lith__stmt_cache_destroy(c);
  assert_int_equal(sqlite3_close(conn), SQLITE_OK);
  t_remove_db(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same_text_same_statement_prepared_once),
      cmocka_unit_test(test_comes_back_reset_and_unbound),
      cmocka_unit_test(test_copies_while_mid_step),
      cmocka_unit_test(test_bound_evicts_least_recently_used),
      cmocka_unit_test(test_in_use_never_evicted),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_on_a_file_connection),
  };
  return cmocka_run_group_tests_name("sqlite/stmt_cache", tests, NULL, NULL);
}
