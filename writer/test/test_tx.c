/*
 * Inside a command (writer/tx.c), the lith_tx_* calls:
 *   - nested savepoints undo alone, two deep, and what they touched with
 *     them; on_commit sees exactly the touched topics of the committed
 *     commands, each once, in first-touched order;
 *   - lith_tx_stmt hands out the cached statement (the same one again once
 *     reset), NULL for bad SQL with lith_tx_rc and the message set;
 *   - lith_tx_exec binds each type letter ('i', 'I', 'd', 's', 's' NULL,
 *     'n'); lith_tx_int64 reads the first column, or LITH_ERROR "no row";
 *   - lith_tx_rc is LITH_OK until a call fails, then that call's code;
 *     lith_tx_error's message (printf-style) reaches lith_do's caller;
 *   - lith_tx_db is the write connection, inside the writer's transaction;
 *   - lith_cmd_sql runs several statements, refuses NULL (LITH_MISUSE) and
 *     names itself in an SQL error's message;
 *   - lith_tx_savepoint without a function is LITH_MISUSE; a failed nested
 *     savepoint keeps its function's message, not the undo's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common.h"

#define DB "tx.db"

static int64_t count_kv(const char *k) {
  char sql[256];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM kv WHERE k = '%s'", k);
  return t_query_int(DB, sql);
}

static lith *open_db(void) {
  lith_options opt;
  t_bank_options(&opt);
  return t_open_fresh(DB, &opt);
}

static int inner_fail(lith_tx *tx, void *arg) {
  (void)arg;
  lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES ('y', 1)", NULL);
  lith_tx_touch(tx, 98);
  return lith_tx_error(tx, LITH_USER, "inner refused");
}

static int inner_ok(lith_tx *tx, void *arg) {
  (void)arg;
  int rc = lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES ('w', 1)", NULL);
  if (rc != LITH_OK)
    return rc;
  /* a failing savepoint nested two deep */
  assert_int_equal(lith_tx_savepoint(tx, inner_fail, NULL), LITH_USER);
  return LITH_OK;
}

static int outer(lith_tx *tx, void *arg) {
  (void)arg;
  int rc = lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES ('x', 1)", NULL);
  if (rc != LITH_OK)
    return rc;
  lith_tx_touch(tx, 1);
  rc = lith_tx_savepoint(tx, inner_fail, NULL);
  assert_int_equal(rc, LITH_USER);
  assert_int_equal(lith_tx_savepoint(tx, inner_ok, NULL), LITH_OK);
  lith_tx_touch(tx, 2);
  return lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES ('z', 1)", NULL);
}

typedef struct hook_log {
  int64_t topics[64];
  int n;
  int calls;
} hook_log;

static void on_commit(void *ctx, const int64_t *topics, int n) {
  hook_log *h = ctx;
  h->calls++;
  for (int i = 0; i < n && h->n < 64; i++)
    h->topics[h->n++] = topics[i];
}

static void test_nested_savepoints(void **state) {
  (void)state;
  lith_options opt;
  hook_log log = {0};
  t_bank_options(&opt);
  opt.on_commit = on_commit;
  opt.on_commit_ctx = &log;
  lith *db = t_open_fresh(DB, &opt);
  assert_int_equal(lith_do(db, outer, NULL), LITH_OK);
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(count_kv("x"), 1);
  assert_int_equal(count_kv("y"), 0);
  assert_int_equal(count_kv("w"), 1);
  assert_int_equal(count_kv("z"), 1);
  /* topic 98 was touched only inside failed savepoints */
  assert_int_equal(log.n, 2);
  assert_int_equal(log.topics[0], 1);
  assert_int_equal(log.topics[1], 2);
}

typedef struct touch_arg {
  const char *key;
  int64_t topics[3];
  int fail;
} touch_arg;

static int touch_cmd(lith_tx *tx, void *arg) {
  touch_arg *a = arg;
  for (int i = 0; i < 3; i++)
    if (a->topics[i])
      lith_tx_touch(tx, a->topics[i]);
  int rc = lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES (?, 1)", "s", a->key);
  return rc != LITH_OK ? rc : a->fail ? LITH_USER : LITH_OK;
}

static void test_touch_reports_exactly_committed_topics(void **state) {
  (void)state;
  lith_options opt;
  hook_log log = {0};
  t_bank_options(&opt);
  opt.on_commit = on_commit;
  opt.on_commit_ctx = &log;
  lith *db = t_open_fresh(DB, &opt);
  t_gate gate;
  t_async done = {0};
  lith_request r[4];
  touch_arg a[4] = {
      {"t1", {7, 3, 7}, 0},
      {"t2", {99, 0, 0}, 1}, /* fails: 99 must not be reported */
      {"t3", {3, 11, 0}, 0},
      {"t1", {55, 0, 0}, 0}, /* duplicate key: constraint error, 55 not reported */
  };
  t_gate_close(db, &gate);
  int calls_before = log.calls; /* on_commit runs on the writer: log.calls moves below */
  for (int i = 0; i < 4; i++)
    t_submit(db, &r[i], touch_cmd, &a[i], &done);
  t_gate_open(&gate);
  t_async_wait(&done, 4);
  assert_int_equal(r[0].rc, LITH_OK);
  assert_int_equal(r[1].rc, LITH_USER);
  assert_int_equal(r[2].rc, LITH_OK);
  assert_int_equal(r[3].rc, LITH_CONSTRAINT);
  // cppcheck-suppress duplicateExpression
  assert_int_equal(log.calls - calls_before, 1);
  /* each once, in first-touched order */
  assert_int_equal(log.n, 3);
  assert_int_equal(log.topics[0], 7);
  assert_int_equal(log.topics[1], 3);
  assert_int_equal(log.topics[2], 11);
  assert_int_equal(lith_close(db), LITH_OK);
}

/* ---- statements and values --------------------------------------------- */

typedef struct stmt_seen {
  sqlite3_stmt *first, *again, *bad;
  int rc_before, rc_after;
  char msg[LITH_ERRMSG_MAX];
} stmt_seen;

static int stmt_cmd(lith_tx *tx, void *arg) {
  stmt_seen *s = arg;
  s->rc_before = lith_tx_rc(tx);
  s->first = lith_tx_stmt(tx, "SELECT count(*) FROM kv");
  assert_non_null(s->first);
  assert_int_equal(sqlite3_step(s->first), SQLITE_ROW);
  sqlite3_reset(s->first);
  s->again = lith_tx_stmt(tx, "SELECT count(*) FROM kv");
  s->bad = lith_tx_stmt(tx, "SELECT x FROM no_such_table");
  s->rc_after = lith_tx_rc(tx);
  snprintf(s->msg, sizeof s->msg, "%s", lith_errmsg(NULL));
  return LITH_OK;
}

static void test_stmt_cached_and_errors_noted(void **state) {
  (void)state;
  lith *db = open_db();
  stmt_seen s;
  memset(&s, 0, sizeof s);
  assert_int_equal(lith_do(db, stmt_cmd, &s), LITH_OK);
  assert_int_equal(s.rc_before, LITH_OK);
  assert_ptr_equal(s.first, s.again); /* cached, handed out again once reset */
  assert_null(s.bad);
  assert_int_equal(s.rc_after, LITH_ERROR);
  assert_non_null(strstr(s.msg, "no_such_table"));
  assert_int_equal(lith_close(db), LITH_OK);
}

typedef struct typed {
  int64_t i, big, no_row_rc, no_row_value;
  double d;
  int64_t text_is_null, n_is_null;
  char no_row_msg[LITH_ERRMSG_MAX];
} typed;

static int typed_cmd(lith_tx *tx, void *arg) {
  typed *t = arg;
  int rc = lith_tx_exec(tx, "CREATE TABLE t(a INTEGER, b INTEGER, c REAL, d TEXT, e TEXT, f)", NULL);
  if (rc == LITH_OK)
    rc = lith_tx_exec(tx, "INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)", "iIdssn", 42, (int64_t)1 << 40, 2.5,
                      "text", (const char *)NULL);
  if (rc != LITH_OK)
    return rc;
  if ((rc = lith_tx_int64(tx, &t->i, "SELECT a FROM t", NULL)) != LITH_OK ||
      (rc = lith_tx_int64(tx, &t->big, "SELECT b FROM t WHERE d = ?", "s", "text")) != LITH_OK ||
      (rc = lith_tx_int64(tx, &t->text_is_null, "SELECT e IS NULL FROM t", NULL)) != LITH_OK ||
      (rc = lith_tx_int64(tx, &t->n_is_null, "SELECT f IS NULL FROM t", NULL)) != LITH_OK)
    return rc;
  sqlite3_stmt *st = lith_tx_stmt(tx, "SELECT c FROM t");
  assert_non_null(st);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  t->d = sqlite3_column_double(st, 0);
  sqlite3_reset(st);
  t->no_row_value = -7;
  t->no_row_rc = lith_tx_int64(tx, &t->no_row_value, "SELECT a FROM t WHERE a = ?", "i", 0);
  snprintf(t->no_row_msg, sizeof t->no_row_msg, "%s", lith_errmsg(NULL));
  return LITH_OK;
}

static void test_exec_binds_each_type_int64_reads(void **state) {
  (void)state;
  lith *db = open_db();
  typed t;
  memset(&t, 0, sizeof t);
  assert_int_equal(lith_do(db, typed_cmd, &t), LITH_OK);
  assert_int_equal(t.i, 42);
  assert_int_equal(t.big, (int64_t)1 << 40);
  assert_true(t.d == 2.5);
  assert_int_equal(t.text_is_null, 1);
  assert_int_equal(t.n_is_null, 1);
  assert_int_equal(t.no_row_rc, LITH_ERROR);
  assert_non_null(strstr(t.no_row_msg, "no row"));
  assert_int_equal(t.no_row_value, -7); /* untouched */
  assert_int_equal(lith_close(db), LITH_OK);
}

/* ---- the connection, lith_cmd_sql, misuse -------------------------------- */

typedef struct conn_seen {
  int readonly, autocommit;
} conn_seen;

static int conn_cmd(lith_tx *tx, void *arg) {
  conn_seen *c = arg;
  sqlite3 *conn = lith_tx_db(tx);
  assert_non_null(conn);
  c->readonly = sqlite3_db_readonly(conn, "main");
  c->autocommit = sqlite3_get_autocommit(conn);
  return LITH_OK;
}

static int savepoint_null(lith_tx *tx, void *arg) {
  (void)arg;
  int rc = lith_tx_savepoint(tx, NULL, NULL);
  assert_int_equal(lith_tx_rc(tx), LITH_MISUSE);
  return rc;
}

static int refuse_inner(lith_tx *tx, void *arg) {
  (void)arg;
  return lith_tx_error(tx, LITH_USER + 3, "inner says no (%d)", 3);
}

static int keep_inner_message(lith_tx *tx, void *arg) {
  (void)arg;
  return lith_tx_savepoint(tx, refuse_inner, NULL);
}

static void test_db_cmd_sql_and_misuse(void **state) {
  (void)state;
  lith *db = open_db();
  conn_seen c = {-1, -1};
  assert_int_equal(lith_do(db, conn_cmd, &c), LITH_OK);
  assert_int_equal(c.readonly, 0);
  assert_int_equal(c.autocommit, 0); /* inside the writer's transaction */

  assert_int_equal(lith_do(db, lith_cmd_sql,
                           "INSERT INTO kv(k, v) VALUES ('s1', 1); INSERT INTO kv(k, v) VALUES ('s2', 2);"),
                   LITH_OK);
  assert_int_equal(lith_do(db, lith_cmd_sql, NULL), LITH_MISUSE);
  assert_non_null(strstr(lith_errmsg(db), "lith_cmd_sql"));
  assert_int_equal(
      lith_do(db, lith_cmd_sql, "INSERT INTO kv(k, v) VALUES ('s3', 3); INSERT INTO nowhere VALUES (1);"),
      LITH_ERROR);
  assert_non_null(strstr(lith_errmsg(db), "lith_cmd_sql"));
  assert_non_null(strstr(lith_errmsg(db), "nowhere"));

  assert_int_equal(lith_do(db, savepoint_null, NULL), LITH_MISUSE);
  assert_non_null(strstr(lith_errmsg(db), "lith_tx_savepoint"));
  assert_int_equal(lith_do(db, keep_inner_message, NULL), LITH_USER + 3);
  assert_string_equal(lith_errmsg(db), "inner says no (3)");
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(count_kv("s1"), 1);
  assert_int_equal(count_kv("s2"), 1);
  assert_int_equal(count_kv("s3"), 0); /* the failed command left nothing */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_nested_savepoints),
      cmocka_unit_test(test_touch_reports_exactly_committed_topics),
      cmocka_unit_test(test_stmt_cached_and_errors_noted),
      cmocka_unit_test(test_exec_binds_each_type_int64_reads),
      cmocka_unit_test(test_db_cmd_sql_and_misuse),
  };
  return cmocka_run_group_tests_name("writer/tx", tests, NULL, NULL);
}
