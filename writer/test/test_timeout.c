/*
 * lith_options.command_timeout_ms (writer/batch.c, writer/tx.c): a command
 * that runs past its limit is interrupted and fails alone with
 * LITH_INTERRUPTED; the other commands of its batch commit.
 *   - a read-only statement looping in a recursive CTE: interrupted near
 *     the limit; SQLite keeps the transaction, so the others run once;
 *   - a write statement looping (INSERT ... SELECT from an endless CTE):
 *     SQLite rolls back the whole transaction for an interrupted write; the
 *     commands before it run again, once, and commit; those after it commit;
 *   - a command looping in C over lith_tx_exec: the call past the limit
 *     fails with LITH_INTERRUPTED, and so does every call after it;
 *   - a command that ignores the failures and returns LITH_OK still fails
 *     with LITH_INTERRUPTED, and nothing of it is kept; one that answers
 *     with its own code (LITH_USER and above) keeps it;
 *   - lith_tx_savepoint and lith_cmd_sql past the limit fail at once, and
 *     the writer goes on;
 *   - the limit is per command (a batch of commands each under it but
 *     together over it commits), each run afresh, and 0 (the default) is
 *     no limit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common.h"

#define DB "timeout.db"
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define LIMIT_MS 300
#else
#define LIMIT_MS 100
#endif
#define SLACK_MS 5000 /* a loaded machine; what it guards against is a command never stopped */

#define ENDLESS "WITH RECURSIVE c(x) AS (VALUES (1) UNION ALL SELECT x + 1 FROM c)"

static int64_t count_kv(const char *k) {
  char sql[256];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM kv WHERE k = '%s'", k);
  return t_query_int(DB, sql);
}

static lith *open_db(int limit_ms) {
  lith_options opt;
  t_bank_options(&opt);
  opt.command_timeout_ms = limit_ms;
  return t_open_fresh(DB, &opt);
}

/* An innocent that counts its runs. */
typedef struct counted_put {
  char key[32];
  int runs;
} counted_put;

static int counted_put_cmd(lith_tx *tx, void *arg) {
  counted_put *c = arg;
  c->runs++;
  return lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES (?, 1)", "s", c->key);
}

typedef struct looper {
  const char *how; /* "read", "write", "calls", "ignore", "own" */
  int64_t took_ms;
  int step_rc, after_rc, calls;
} looper;

static int looper_cmd(lith_tx *tx, void *arg) {
  looper *l = arg;
  int64_t t0 = lith_clock_ms();
  int rc = lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES ('looper', 1)", NULL);
  if (rc != LITH_OK)
    return rc;
  if (strcmp(l->how, "read") == 0) {
    int64_t n = 0;
    rc = lith_tx_int64(tx, &n, ENDLESS " SELECT count(*) FROM c", NULL);
  } else if (strcmp(l->how, "write") == 0) {
    rc = lith_tx_exec(tx, "INSERT INTO kv(k, v) " ENDLESS " SELECT 'r' || x, x FROM c", NULL);
  } else {
    /* short statements in a C loop, until one fails */
    do {
      l->calls++;
      rc = lith_tx_exec(tx, "UPDATE kv SET v = v + 1 WHERE k = 'looper'", NULL);
    } while (rc == LITH_OK);
  }
  l->took_ms = lith_clock_ms() - t0;
  l->step_rc = rc;
  l->after_rc = lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES ('after', 1)", NULL);
  if (strcmp(l->how, "ignore") == 0)
    return LITH_OK; /* as if all went well */
  if (strcmp(l->how, "own") == 0)
    return lith_tx_error(tx, LITH_USER + 4, "gave up: %s", lith_errstr(rc));
  return rc;
}

/* [a, b, looper, c, d] in one batch. */
static void run_batch_with(lith *db, looper *l, counted_put *c, lith_request *r) {
  t_gate gate;
  t_async done = {0};
  for (int i = 0; i < 4; i++) {
    snprintf(c[i].key, sizeof c[i].key, "%s-%d", l->how, i);
    c[i].runs = 0;
  }
  t_gate_close(db, &gate);
  t_submit(db, &r[0], counted_put_cmd, &c[0], &done);
  t_submit(db, &r[1], counted_put_cmd, &c[1], &done);
  t_submit(db, &r[2], looper_cmd, l, &done);
  t_submit(db, &r[3], counted_put_cmd, &c[2], &done);
  t_submit(db, &r[4], counted_put_cmd, &c[3], &done);
  t_gate_open(&gate);
  t_async_wait(&done, 5);
}

static void check_innocents_committed(const counted_put *c, const lith_request *r) {
  for (int i = 0; i < 4; i++) {
    assert_int_equal(r[i < 2 ? i : i + 1].rc, LITH_OK);
    assert_int_equal(count_kv(c[i].key), 1);
  }
}

static void check_looper_failed(const looper *l, const lith_request *r) {
  print_message("%-6s interrupted after %lld ms (limit %d ms), %d calls: %s\n", l->how, (long long)l->took_ms,
                LIMIT_MS, l->calls, r[2].errmsg);
  assert_int_equal(l->step_rc, LITH_INTERRUPTED);
  assert_int_equal(l->after_rc, LITH_INTERRUPTED); /* every call past the limit */
  assert_true(l->took_ms >= LIMIT_MS - 1);
  assert_true(l->took_ms < LIMIT_MS + SLACK_MS);
  assert_int_equal(r[2].rc, strcmp(l->how, "own") == 0 ? LITH_USER + 4 : LITH_INTERRUPTED);
  if (strcmp(l->how, "own") != 0)
    assert_non_null(strstr(r[2].errmsg, "command_timeout_ms"));
  assert_int_equal(count_kv("looper"), 0); /* nothing of it is kept */
  assert_int_equal(count_kv("after"), 0);
}

static void test_read_loop_interrupted_alone(void **state) {
  (void)state;
  lith *db = open_db(LIMIT_MS);
  looper l = {.how = "read"};
  counted_put c[4];
  lith_request r[5];
  lith_stats before, after;
  lith_stats_get(db, &before);
  run_batch_with(db, &l, c, r);
  check_looper_failed(&l, r);
  check_innocents_committed(c, r);
  for (int i = 0; i < 4; i++) /* an interrupted read keeps the transaction: nobody ran twice */
    assert_int_equal(c[i].runs, 1);
  lith_stats_get(db, &after);
  assert_int_equal(after.retried, before.retried);
  assert_int_equal(lith_do(db, t_put_cmd, "next"), LITH_OK); /* the writer goes on */
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(count_kv("next"), 1);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM kv"), 5);
}

static void test_write_loop_loses_the_transaction_others_run_again(void **state) {
  (void)state;
  lith *db = open_db(LIMIT_MS);
  looper l = {.how = "write"};
  counted_put c[4];
  lith_request r[5];
  lith_stats before, after;
  lith_stats_get(db, &before);
  run_batch_with(db, &l, c, r);
  check_looper_failed(&l, r);
  check_innocents_committed(c, r);
  /* SQLite rolled back the whole transaction for the interrupted INSERT:
   * the two before the looper ran again (once), the two after it once */
  assert_int_equal(c[0].runs, 2);
  assert_int_equal(c[1].runs, 2);
  assert_int_equal(c[2].runs, 1);
  assert_int_equal(c[3].runs, 1);
  lith_stats_get(db, &after);
  assert_int_equal(after.retried - before.retried, 2);
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM kv WHERE k LIKE 'r%'"), 0);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM kv"), 4);
  t_assert_integrity(DB);
}

static void test_c_loop_over_calls_interrupted(void **state) {
  (void)state;
  const char *hows[] = {"calls", "ignore", "own"};
  for (size_t i = 0; i < sizeof hows / sizeof *hows; i++) {
    lith *db = open_db(LIMIT_MS);
    looper l = {.how = hows[i]};
    counted_put c[4];
    lith_request r[5];
    run_batch_with(db, &l, c, r);
    check_looper_failed(&l, r);
    check_innocents_committed(c, r);
    assert_true(l.calls > 1);
    assert_int_equal(lith_close(db), LITH_OK);
  }
}

/* ---- the calls past the limit --------------------------------------------- */

typedef struct late {
  int savepoint_rc, sql_rc, stmt_null, int64_rc, ran_inner;
} late;

static int inner_cmd(lith_tx *tx, void *arg) {
  late *l = arg;
  l->ran_inner = 1;
  return lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES ('inner', 1)", NULL);
}

/* Sleeps past the limit in C (nothing can stop that), then calls. */
static int sleepy_cmd(lith_tx *tx, void *arg) {
  late *l = arg;
  int rc = lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES ('sleepy', 1)", NULL);
  if (rc != LITH_OK)
    return rc;
  usleep((LIMIT_MS + 30) * 1000);
  l->savepoint_rc = lith_tx_savepoint(tx, inner_cmd, l);
  l->sql_rc = lith_cmd_sql(tx, "INSERT INTO kv(k, v) VALUES ('sql', 1)");
  l->stmt_null = lith_tx_stmt(tx, "SELECT 1") == NULL;
  int64_t n;
  l->int64_rc = lith_tx_int64(tx, &n, "SELECT 1", NULL);
  return LITH_OK;
}

static void test_calls_past_the_limit_fail_at_once(void **state) {
  (void)state;
  lith *db = open_db(LIMIT_MS);
  late l;
  memset(&l, 0, sizeof l);
  assert_int_equal(lith_do(db, sleepy_cmd, &l), LITH_INTERRUPTED);
  assert_non_null(strstr(lith_errmsg(db), "command_timeout_ms"));
  assert_int_equal(l.savepoint_rc, LITH_INTERRUPTED);
  assert_int_equal(l.ran_inner, 0);
  assert_int_equal(l.sql_rc, LITH_INTERRUPTED);
  assert_int_equal(l.stmt_null, 1);
  assert_int_equal(l.int64_rc, LITH_INTERRUPTED);
  assert_int_equal(lith_do(db, t_put_cmd, "next"), LITH_OK);
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM kv"), 1); /* 'next' alone */
}

/* ---- per command, per run; 0 is none ---------------------------------------- */

/* The limit is per command: commands of a third of it each, one batch of
 * them taking twice the limit together, all commit. Its own limit, 1 s
 * (not LIMIT_MS), so that each command's third leaves it two thirds for a
 * loaded machine's delays (a usleep that oversleeps, the INSERT's wait for
 * the CPU): with 100 ms commands of 66 ms failed there. A limit armed once
 * for the batch (or not re-armed for each command) fails the last three. */
#define PER_CMD_LIMIT_MS 1000
#define PER_CMD_N 6

typedef struct third {
  const char *key;
  int64_t start_ms, end_ms;
} third;

static int third_cmd(lith_tx *tx, void *arg) {
  third *t = arg;
  t->start_ms = lith_clock_ms();
  usleep(PER_CMD_LIMIT_MS / 3 * 1000);
  int rc = lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES (?, 1)", "s", t->key);
  t->end_ms = lith_clock_ms();
  return rc;
}

static void test_limit_is_per_command(void **state) {
  (void)state;
  lith *db = open_db(PER_CMD_LIMIT_MS);
  t_gate gate;
  t_async done = {0};
  lith_request r[PER_CMD_N];
  third t[PER_CMD_N];
  static const char *const keys[PER_CMD_N] = {"p0", "p1", "p2", "p3", "p4", "p5"};
  lith_stats before, after;
  lith_stats_get(db, &before);
  t_gate_close(db, &gate);
  for (int i = 0; i < PER_CMD_N; i++) {
    t[i] = (third){.key = keys[i]};
    t_submit(db, &r[i], third_cmd, &t[i], &done);
  }
  t_gate_open(&gate);
  t_async_wait(&done, PER_CMD_N);
  lith_stats_get(db, &after);
  int64_t longest = 0;
  for (int i = 0; i < PER_CMD_N; i++)
    if (t[i].end_ms - t[i].start_ms > longest)
      longest = t[i].end_ms - t[i].start_ms;
  print_message("%d commands in %lld ms (limit %d ms each), the longest %lld ms\n", PER_CMD_N,
                (long long)(t[PER_CMD_N - 1].end_ms - t[0].start_ms), PER_CMD_LIMIT_MS, (long long)longest);
  for (int i = 0; i < PER_CMD_N; i++)
    if (r[i].rc != LITH_OK)
      fail_msg("command %d of %d, %lld ms after the first began (it ran %lld ms): %s: %s", i + 1, PER_CMD_N,
               (long long)(t[i].end_ms - t[0].start_ms), (long long)(t[i].end_ms - t[i].start_ms),
               lith_errstr(r[i].rc), r[i].errmsg);
  /* what makes it the case: one batch (and the gate's), over the limit together */
  assert_int_equal(after.batches - before.batches, 2);
  assert_true(t[PER_CMD_N - 1].end_ms - t[0].start_ms > PER_CMD_LIMIT_MS);
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM kv"), PER_CMD_N);
}

static int long_insert_cmd(lith_tx *tx, void *arg) {
  (void)arg;
  return lith_tx_exec(tx,
                      "INSERT INTO kv(k, v) WITH RECURSIVE c(x) AS (VALUES (1) UNION ALL SELECT x + 1 FROM c"
                      " WHERE x < ?) SELECT 'n' || x, x FROM c",
                      "i", 300000);
}

static void test_no_limit_by_default(void **state) {
  (void)state;
  lith_options opt;
  lith_options_default(&opt);
  assert_int_equal(opt.command_timeout_ms, 0);
  opt.command_timeout_ms = -1;
  lith *bad = NULL;
  assert_int_equal(lith_open(DB, &opt, &bad), LITH_MISUSE);
  assert_null(bad);
  assert_non_null(strstr(lith_errmsg(NULL), "command_timeout_ms"));
  lith *db = open_db(0);
  int64_t t0 = lith_clock_ms();
  assert_int_equal(lith_do(db, long_insert_cmd, NULL), LITH_OK);
  print_message("an unlimited command ran %lld ms\n", (long long)(lith_clock_ms() - t0));
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM kv"), 300000);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_read_loop_interrupted_alone),
      cmocka_unit_test(test_write_loop_loses_the_transaction_others_run_again),
      cmocka_unit_test(test_c_loop_over_calls_interrupted),
      cmocka_unit_test(test_calls_past_the_limit_fail_at_once),
      cmocka_unit_test(test_limit_is_per_command),
      cmocka_unit_test(test_no_limit_by_default),
  };
  return cmocka_run_group_tests_name("writer/timeout", tests, NULL, NULL);
}
