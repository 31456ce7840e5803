/*
 * Batch semantics: in one transaction a good command commits, a failing
 * command and a command whose statement errors leave no trace; commands
 * cannot end the writer's transaction; a command that makes SQLite roll
 * back the whole transaction is failed alone and the others run again.
 * (Nested savepoints and touched topics: test_tx.c.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common.h"

#define DB "batch.db"

static int64_t count_kv(const char *k) {
  char sql[256];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM kv WHERE k = '%s'", k);
  return t_query_int(DB, sql);
}

static int put_then_fail(lith_tx *tx, void *arg) {
  int rc = lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES (?, 1)", "s", (const char *)arg);
  if (rc != LITH_OK)
    return rc;
  return lith_tx_error(tx, LITH_USER + 1, "refused %s", (const char *)arg);
}

static int put_then_bad_sql(lith_tx *tx, void *arg) {
  int rc = lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES (?, 1)", "s", (const char *)arg);
  if (rc != LITH_OK)
    return rc;
  return lith_tx_exec(tx, "INSERT INTO no_such_table VALUES (1)", NULL);
}

static void test_good_failing_and_erroring_in_one_batch(void **state) {
  (void)state;
  lith_options opt;
  t_bank_options(&opt);
  lith *db = t_open_fresh(DB, &opt);
  lith_stats before, after;
  t_gate gate;
  t_async done = {0};
  lith_request r[5];

  t_gate_close(db, &gate);
  lith_stats_get(db, &before);
  t_submit(db, &r[0], t_put_cmd, "a", &done);
  t_submit(db, &r[1], put_then_fail, "b", &done);
  t_submit(db, &r[2], put_then_bad_sql, "c", &done);
  t_submit(db, &r[3], t_put_cmd, "a", &done); /* duplicate key of r[0] */
  t_submit(db, &r[4], t_put_cmd, "e", &done);
  t_gate_open(&gate);
  t_async_wait(&done, 5);
  lith_stats_get(db, &after);

  assert_int_equal(r[0].rc, LITH_OK);
  assert_string_equal(r[0].errmsg, "");
  assert_int_equal(r[1].rc, LITH_USER + 1);
  assert_string_equal(r[1].errmsg, "refused b");
  assert_int_equal(r[2].rc, LITH_ERROR);
  assert_non_null(strstr(r[2].errmsg, "no such table"));
  assert_int_equal(r[3].rc, LITH_CONSTRAINT);
  assert_non_null(strstr(r[3].errmsg, "UNIQUE"));
  assert_int_equal(r[4].rc, LITH_OK);
  /* the five ran as one transaction: the gate's batch plus this one */
  assert_int_equal(after.batches - before.batches, 2);
  assert_int_equal(after.batch_hist[2] - before.batch_hist[2], 1); /* size 5: bucket [4, 8) */
  assert_int_equal(after.failed - before.failed, 3);
  assert_int_equal(lith_close(db), LITH_OK);

  assert_int_equal(count_kv("a"), 1);
  assert_int_equal(count_kv("b"), 0);
  assert_int_equal(count_kv("c"), 0);
  assert_int_equal(count_kv("e"), 1);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM kv"), 2);
}

static int run_sql(lith_tx *tx, void *arg) { return lith_tx_exec(tx, (const char *)arg, NULL); }

static void test_commands_cannot_end_the_transaction(void **state) {
  (void)state;
  lith_options opt;
  t_bank_options(&opt);
  lith *db = t_open_fresh(DB, &opt);
  t_gate gate;
  t_async done = {0};
  lith_request r[6];
  static const char *const sql[] = {"COMMIT", "ROLLBACK", "BEGIN", "RELEASE lith_c", "ROLLBACK TO lith_c"};
  t_gate_close(db, &gate);
  t_submit(db, &r[0], t_put_cmd, "before", &done);
  for (int i = 0; i < 5; i++)
    t_submit(db, &r[i + 1], run_sql, (void *)sql[i], &done);
  t_gate_open(&gate);
  t_async_wait(&done, 6);
  assert_int_equal(r[0].rc, LITH_OK);
  for (int i = 1; i < 6; i++) {
    assert_int_not_equal(r[i].rc, LITH_OK);
    assert_non_null(strstr(r[i].errmsg, "not authorized"));
  }
  /* a savepoint of the command's own is fine */
  assert_int_equal(lith_do(db, run_sql, "SAVEPOINT mine"), LITH_OK);
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(count_kv("before"), 1);
}

static int rollback_conflict(lith_tx *tx, void *arg) {
  /* ON CONFLICT ROLLBACK makes SQLite roll back the whole transaction. */
  return lith_tx_exec(tx, "INSERT OR ROLLBACK INTO kv(k, v) VALUES (?, 2)", "s", (const char *)arg);
}

typedef struct counted {
  const char *key;
  int runs;
} counted;

static int counted_put(lith_tx *tx, void *arg) {
  counted *c = arg;
  c->runs++;
  return lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES (?, 1)", "s", c->key);
}

static void test_transaction_abort_fails_only_the_culprit(void **state) {
  (void)state;
  lith_options opt;
  t_bank_options(&opt);
  lith *db = t_open_fresh(DB, &opt);
  t_gate gate;
  t_async done = {0};
  lith_request r[4];
  counted a = {"p1", 0}, c = {"p3", 0}, d = {"p4", 0};
  lith_stats before, after;
  t_gate_close(db, &gate);
  lith_stats_get(db, &before);
  t_submit(db, &r[0], counted_put, &a, &done);
  t_submit(db, &r[1], rollback_conflict, "p1", &done); /* conflicts with r[0]'s row */
  t_submit(db, &r[2], counted_put, &c, &done);
  t_submit(db, &r[3], counted_put, &d, &done);
  t_gate_open(&gate);
  t_async_wait(&done, 4);
  lith_stats_get(db, &after);
  assert_int_equal(r[0].rc, LITH_OK);
  assert_int_equal(r[1].rc, LITH_CONSTRAINT);
  assert_int_equal(r[2].rc, LITH_OK);
  assert_int_equal(r[3].rc, LITH_OK);
  assert_int_equal(a.runs, 2); /* ran, was rolled back with the transaction, ran again */
  assert_int_equal(c.runs, 1);
  assert_int_equal(d.runs, 1);
  assert_int_equal(after.retried - before.retried, 1);
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(t_query_int(DB, "SELECT v FROM kv WHERE k = 'p1'"), 1);
  assert_int_equal(count_kv("p3"), 1);
  assert_int_equal(count_kv("p4"), 1);
}

/* The application's authorizer: no ATTACH, no PRAGMA assignment. */
static int app_authorizer(void *ctx, int action, const char *a, const char *b, const char *c, const char *d) {
  int *calls = ctx;
  (void)c, (void)d;
  (*calls)++;
  if (action == SQLITE_ATTACH)
    return SQLITE_DENY;
  if (action == SQLITE_PRAGMA && b != NULL)
    return SQLITE_DENY;
  (void)a;
  return SQLITE_OK;
}

static void test_application_authorizer(void **state) {
  (void)state;
  lith_options opt;
  int calls = 0;
  t_bank_options(&opt);
  opt.authorizer = app_authorizer;
  opt.authorizer_ctx = &calls;
  lith *db = t_open_fresh(DB, &opt);
  assert_int_equal(lith_do(db, run_sql, "ATTACH DATABASE 'other.db' AS o"), LITH_ERROR);
  assert_non_null(strstr(lith_errmsg(db), "not authorized"));
  assert_int_equal(lith_do(db, run_sql, "PRAGMA synchronous = OFF"), LITH_ERROR);
  assert_non_null(strstr(lith_errmsg(db), "not authorized"));
  /* lith's own rules still come first: its savepoints stay refused. */
  assert_int_not_equal(lith_do(db, run_sql, "RELEASE lith_c"), LITH_OK);
  /* Anything else passes through it. */
  assert_int_equal(lith_do(db, run_sql, "PRAGMA user_version"), LITH_OK);
  assert_int_equal(lith_do(db, t_put_cmd, "allowed"), LITH_OK);
  assert_true(calls > 0);
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(count_kv("allowed"), 1);
  assert_int_equal(access("other.db", F_OK), -1);
}

static lith *g_db;

static int nested_do(lith_tx *tx, void *arg) {
  (void)tx;
  (void)arg;
  return lith_do(g_db, t_put_cmd, "never");
}

static void test_lith_do_from_a_command_is_refused(void **state) {
  (void)state;
  lith_options opt;
  t_bank_options(&opt);
  g_db = t_open_fresh(DB, &opt);
  assert_int_equal(lith_do(g_db, nested_do, NULL), LITH_MISUSE);
  assert_non_null(strstr(lith_errmsg(g_db), "writer thread"));
  assert_int_equal(lith_close(g_db), LITH_OK);
  assert_int_equal(count_kv("never"), 0);
}

static void test_error_message_reaches_the_caller(void **state) {
  (void)state;
  lith_options opt;
  t_bank_options(&opt);
  lith *db = t_open_fresh(DB, &opt);
  assert_int_equal(lith_do(db, put_then_fail, "m"), LITH_USER + 1);
  assert_string_equal(lith_errmsg(db), "refused m");
  assert_int_equal(lith_do(db, t_put_cmd, "n"), LITH_OK);
  assert_string_equal(lith_errmsg(db), "");
  assert_int_equal(lith_close(db), LITH_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_good_failing_and_erroring_in_one_batch),
      cmocka_unit_test(test_commands_cannot_end_the_transaction),
      cmocka_unit_test(test_transaction_abort_fails_only_the_culprit),
      cmocka_unit_test(test_lith_do_from_a_command_is_refused),
      cmocka_unit_test(test_error_message_reaches_the_caller),
      cmocka_unit_test(test_application_authorizer),
  };
  return cmocka_run_group_tests_name("writer/batch", tests, NULL, NULL);
}
