/*
 * Back-pressure and lock contention.
 *
 * Queue full: with queue_capacity 4 and the writer held inside a gate
 * command, four lith_submit calls are accepted and the fifth gets
 * LITH_QUEUE_FULL at once; lith_do_deadline with a deadline 100 ms ahead
 * gives up with LITH_QUEUE_FULL no sooner than the deadline (and not much
 * later) and its command never runs; one with a past deadline gives up at
 * once; one with a long deadline, started in another thread, waits while the
 * queue is full and succeeds once the gate opens.
 *
 * Another connection holds the write lock (BEGIN IMMEDIATE on a plain
 * sqlite3 connection): with busy_timeout_ms 300 a lith_do returns LITH_BUSY
 * after about that long, with a message that says "locked", its row absent
 * and stats.busy counting it (as do async commands queued meanwhile: every
 * batch is refused, none of them runs); once the other connection commits, the writer
 * recovers (the next lith_do succeeds) and the other connection's write is
 * kept beside lith's. The same after a ROLLBACK, which keeps nothing of the
 * other connection.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common.h"

#define DB "busy.db"

static int64_t count_kv(const char *k) {
  char sql[256];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM kv WHERE k = '%s'", k);
  return t_query_int(DB, sql);
}

/* A put that records that it ran. */
typedef struct marked_put {
  const char *key;
  _Atomic int runs;
} marked_put;

static int marked_put_cmd(lith_tx *tx, void *arg) {
  marked_put *m = arg;
  atomic_fetch_add(&m->runs, 1);
  return t_put_cmd(tx, (void *)m->key);
}

typedef struct waiter {
  lith *db;
  marked_put put;
  int64_t deadline_ms;
  _Atomic int started;
  _Atomic int finished;
  int rc;
  int64_t elapsed_ms;
} waiter;

static void *waiter_main(void *arg) {
  waiter *w = arg;
  int64_t t0 = lith_clock_ms(); /* before started: the test waits 200 ms after it */
  atomic_store(&w->started, 1);
  w->rc = lith_do_deadline(w->db, marked_put_cmd, &w->put, w->deadline_ms);
  w->elapsed_ms = lith_clock_ms() - t0;
  atomic_store(&w->finished, 1);
  return NULL;
}

#define AT_ONCE_TRIES 5

static int64_t least(int64_t a, int64_t b) { return a < b ? a : b; }

static void count_done(lith_request *req) { atomic_fetch_add(&((t_async *)req->data)->done, 1); }

static void join_within(pthread_t th, int seconds) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += seconds;
  int rc = pthread_timedjoin_np(th, NULL, &ts);
  if (rc != 0)
    fail_msg("thread did not finish within %d s (pthread_timedjoin_np: %d)", seconds, rc);
}

static void test_queue_full_and_deadline(void **state) {
  (void)state;
  lith_options opt;
  t_bank_options(&opt);
  opt.queue_capacity = 4;
  lith *db = t_open_fresh(DB, &opt);
  t_gate gate;
  t_async done = {0};
  lith_request r[4];
  static const char *const keys[4] = {"q0", "q1", "q2", "q3"};
  lith_stats st;

  t_gate_close(db, &gate); /* the gate is taken off the queue: 4 free slots */
  for (int i = 0; i < 4; i++)
    t_submit(db, &r[i], t_put_cmd, (void *)keys[i], &done);
  lith_stats_get(db, &st);
  assert_int_equal(st.queue_depth, 4);

  /* the fifth is refused at once, and its done never runs. "At once": the
   * fastest of AT_ONCE_TRIES is under 50 ms (a busy machine can keep one
   * try off the CPU longer; a call that waits waits in every try) */
  t_async extra_done = {0};
  lith_request extra;
  int64_t fastest = INT64_MAX;
  for (int i = 0; i < AT_ONCE_TRIES; i++) {
    memset(&extra, 0, sizeof extra);
    extra.fn = t_put_cmd;
    extra.arg = "q4";
    extra.done = count_done;
    extra.data = &extra_done;
    int64_t t0 = lith_clock_ms();
    assert_int_equal(lith_submit(db, &extra), LITH_QUEUE_FULL);
    fastest = least(fastest, lith_clock_ms() - t0);
    assert_non_null(strstr(lith_errmsg(db), "queue full"));
  }
  assert_true(fastest < 50);

  /* a past deadline: only if there is room now */
  marked_put past = {"past", 0};
  fastest = INT64_MAX;
  for (int i = 0; i < AT_ONCE_TRIES; i++) {
    int64_t t0 = lith_clock_ms();
    assert_int_equal(lith_do_deadline(db, marked_put_cmd, &past, lith_clock_ms() - 1), LITH_QUEUE_FULL);
    fastest = least(fastest, lith_clock_ms() - t0);
  }
  assert_true(fastest < 50);

  /* a deadline 100 ms ahead: waits it out, then gives up */
  marked_put late = {"late", 0};
  int64_t t0 = lith_clock_ms();
  int rc = lith_do_deadline(db, marked_put_cmd, &late, t0 + 100);
  int64_t elapsed = lith_clock_ms() - t0;
  assert_int_equal(rc, LITH_QUEUE_FULL);
  assert_non_null(strstr(lith_errmsg(db), "queue full"));
  assert_true(elapsed >= 100);
  assert_true(elapsed < 1000);
  lith_stats_get(db, &st);
  assert_int_equal(st.queue_depth, 4); /* the refused ones left no slot taken */

  /* a long deadline in another thread: waits for room */
  waiter w;
  memset(&w, 0, sizeof w);
  w.db = db;
  w.put.key = "patient";
  w.deadline_ms = lith_clock_ms() + 30000;
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, waiter_main, &w), 0);
  while (!atomic_load(&w.started))
    usleep(100);
  usleep(200 * 1000);
  assert_int_equal(atomic_load(&w.finished), 0); /* still waiting: the queue is full */
  assert_int_equal(atomic_load(&w.put.runs), 0);

  t_gate_open(&gate);
  join_within(th, 30);
  assert_int_equal(w.rc, LITH_OK);
  assert_true(w.elapsed_ms >= 200);
  assert_int_equal(atomic_load(&w.put.runs), 1);
  t_async_wait(&done, 4);
  for (int i = 0; i < 4; i++)
    assert_int_equal(r[i].rc, LITH_OK);
  assert_int_equal(atomic_load(&done.done), 4);

  /* with room again, a short deadline is no obstacle */
  marked_put after = {"after", 0};
  assert_int_equal(lith_do_deadline(db, marked_put_cmd, &after, lith_clock_ms() + 100), LITH_OK);
  assert_int_equal(lith_close(db), LITH_OK);

  assert_int_equal(atomic_load(&extra_done.done), 0); /* refused: its done never ran */
  assert_int_equal(atomic_load(&late.runs), 0);
  assert_int_equal(atomic_load(&past.runs), 0);
  assert_int_equal(atomic_load(&after.runs), 1);
  for (int i = 0; i < 4; i++)
    assert_int_equal(count_kv(keys[i]), 1);
  assert_int_equal(count_kv("q4"), 0);
  assert_int_equal(count_kv("past"), 0);
  assert_int_equal(count_kv("late"), 0);
  assert_int_equal(count_kv("patient"), 1);
  assert_int_equal(count_kv("after"), 1);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM kv"), 6);
}

/* A plain connection to DB that takes the write lock and writes `key`. */
static sqlite3 *lock_writer(const char *key) {
  sqlite3 *c = NULL;
  char sql[256];
  assert_int_equal(sqlite3_open_v2(DB, &c, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
  sqlite3_busy_timeout(c, 5000);
  assert_int_equal(sqlite3_exec(c, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
  snprintf(sql, sizeof sql, "INSERT INTO kv(k, v) VALUES ('%s', 7)", key);
  assert_int_equal(sqlite3_exec(c, sql, NULL, NULL, NULL), SQLITE_OK);
  return c;
}

static void busy_case(int commit) {
  lith_options opt;
  t_bank_options(&opt);
  opt.busy_timeout_ms = 300;
  lith *db = t_open_fresh(DB, &opt);
  assert_int_equal(lith_do(db, t_put_cmd, "first"), LITH_OK);

  sqlite3 *other = lock_writer("other");
  lith_stats before, after;
  lith_stats_get(db, &before);
  /* three asynchronous commands and one lith_do, in one or more batches:
   * every batch is refused at BEGIN */
  enum { NA = 3 };
  static const char *const akeys[NA] = {"async0", "async1", "async2"};
  marked_put aput[NA];
  lith_request areq[NA];
  t_async adone = {0};
  for (int i = 0; i < NA; i++) {
    aput[i].key = akeys[i];
    atomic_init(&aput[i].runs, 0);
    t_submit(db, &areq[i], marked_put_cmd, &aput[i], &adone);
  }
  marked_put blocked = {"blocked", 0};
  int64_t t0 = lith_clock_ms();
  int rc = lith_do(db, marked_put_cmd, &blocked);
  int64_t elapsed = lith_clock_ms() - t0;
  assert_int_equal(rc, LITH_BUSY);
  const char *msg = lith_errmsg(db);
  if (!strstr(msg, "locked"))
    fail_msg("LITH_BUSY message does not say \"locked\": \"%s\"", msg);
  assert_true(elapsed >= 250);
  assert_true(elapsed < 5000);
  assert_int_equal(atomic_load(&blocked.runs), 0); /* BEGIN failed: the command never ran */
  t_async_wait(&adone, NA);
  for (int i = 0; i < NA; i++) {
    assert_int_equal(areq[i].rc, LITH_BUSY);
    if (!strstr(areq[i].errmsg, "locked"))
      fail_msg("async LITH_BUSY message does not say \"locked\": \"%s\"", areq[i].errmsg);
    assert_int_equal(atomic_load(&aput[i].runs), 0);
  }
  lith_stats_get(db, &after);
  uint64_t nbusy = after.busy - before.busy;
  assert_true(nbusy >= 1);
  assert_int_equal(nbusy, after.batches - before.batches); /* every batch meanwhile was refused */
  assert_int_equal(after.failed - before.failed, NA + 1);
  assert_int_equal(after.commands - before.commands, NA + 1);

  /* the other connection lets go; the writer recovers */
  assert_int_equal(sqlite3_exec(other, commit ? "COMMIT" : "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_close(other), SQLITE_OK);
  marked_put again = {"again", 0};
  assert_int_equal(lith_do(db, marked_put_cmd, &again), LITH_OK);
  assert_string_equal(lith_errmsg(db), "");
  assert_int_equal(atomic_load(&again.runs), 1);
  lith_stats_get(db, &after);
  assert_int_equal(after.busy - before.busy, nbusy); /* no more refusals */
  assert_int_equal(lith_close(db), LITH_OK);

  assert_int_equal(count_kv("first"), 1);
  assert_int_equal(count_kv("blocked"), 0);
  for (int i = 0; i < NA; i++)
    assert_int_equal(count_kv(akeys[i]), 0);
  assert_int_equal(count_kv("again"), 1);
  assert_int_equal(count_kv("other"), commit ? 1 : 0);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM kv"), commit ? 3 : 2);
  t_assert_integrity(DB);
}

static void test_other_connection_holds_lock_then_commits(void **state) {
  (void)state;
  busy_case(1);
}

static void test_other_connection_holds_lock_then_rolls_back(void **state) {
  (void)state;
  busy_case(0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_queue_full_and_deadline),
      cmocka_unit_test(test_other_connection_holds_lock_then_commits),
      cmocka_unit_test(test_other_connection_holds_lock_then_rolls_back),
  };
  return cmocka_run_group_tests_name("writer/busy", tests, NULL, NULL);
}
