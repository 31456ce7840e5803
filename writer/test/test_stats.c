/*
 * lith_stats_get reports what happened.
 *
 * Counts and histogram (EXTERNAL checkpoints): a fresh handle reports all
 * zeros; then a lone lith_do (a batch of 1), a gate (1) holding the writer
 * while 5 commands queue (queue_depth reads 5 meanwhile), a second gate (1)
 * holding 20 (queue_depth 20), 3 of the 25 failing: commands 28, batches 5,
 * failed 3, batch_hist bucket 0 = 3, bucket 2 ([4, 8)) = 1, bucket 4
 * ([16, 32)) = 1, every other bucket 0. Times: tx_ns_total > 0 and >=
 * commit_ns_total > 0; tx_ns_p50 <= p99 <= p999 <= max; max is at least
 * the time a gate held its transaction open; wait_ns_total > 0 and
 * wait_ns_max at least the time the gate held the queued commands back;
 * the latency histograms count each batch (tx_lat) and each command
 * (wait_lat) once, their top quantile at least the gate time;
 * queue_depth 0 once answered; wal_pages > 0 and growing with more commits,
 * no checkpoints. After lith_shutdown the final figures are still read,
 * unchanged, until lith_close; lith_stats_get(NULL) gives zeros.
 *
 * retried: an INSERT OR ROLLBACK conflict in a batch aborts the
 * transaction; the one command that had run before it is run again:
 * retried 1, failed 1 (the culprit). busy: another connection holds BEGIN
 * IMMEDIATE, busy_timeout_ms 100: the lith_do gets LITH_BUSY, busy and
 * failed count 1, batches 1; after the other lets go nothing more is
 * counted.
 *
 * Checkpoints: with checkpoint_pages 4, WRITER and AUTO modes both count
 * checkpoints (> 0) and their time (checkpoint_ns_total > 0).
 *
 * Percentiles under concurrency: the ring is sorted in one scratch buffer
 * per process (not per thread), so four threads reading the stats of two
 * handles at once while a producer keeps committing on one of them must
 * each see their own handle's figures: every transaction of the slow handle
 * took at least SLOW_MS, so its p50 does too; the quick handle's p50 stays
 * below that, and p50 <= p99 <= p999 <= max <= tx_ns_total on both.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common.h"

#define DB "stats.db"
#define GATE_MS 60 /* how long a gate holds the writer */

static int put_then_fail(lith_tx *tx, void *arg) {
  int rc = lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES (?, 1)", "s", (const char *)arg);
  if (rc != LITH_OK)
    return rc;
  return lith_tx_error(tx, LITH_USER, "refused %s", (const char *)arg);
}

static void assert_zero_stats(const lith_stats *s) {
  assert_int_equal(s->commands, 0);
  assert_int_equal(s->batches, 0);
  assert_int_equal(s->failed, 0);
  assert_int_equal(s->retried, 0);
  assert_int_equal(s->busy, 0);
  for (int k = 0; k < LITH_HIST_BUCKETS; k++)
    assert_int_equal(s->batch_hist[k], 0);
  assert_int_equal(s->tx_ns_total, 0);
  assert_int_equal(s->commit_ns_total, 0);
  assert_int_equal(s->tx_ns_max, 0);
  assert_int_equal(s->wait_ns_total, 0);
  assert_int_equal(s->wait_ns_max, 0);
  assert_int_equal(s->queue_depth, 0);
  for (int k = 0; k < LITH_LAT_BUCKETS; k++) {
    assert_int_equal(s->tx_lat[k], 0);
    assert_int_equal(s->wait_lat[k], 0);
  }
}

/* Hold the writer in a gate while n commands queue; check queue_depth,
 * wait GATE_MS, let go, wait for the answers. keys[i] is put by command i;
 * commands with fail[i] set fail (LITH_USER). */
static void gated_batch(lith *db, int n, char keys[][16], const int *fail, lith_request *r) {
  t_gate gate;
  t_async done = {0};
  lith_stats st;
  t_gate_close(db, &gate);
  for (int i = 0; i < n; i++)
    t_submit(db, &r[i], fail[i] ? put_then_fail : t_put_cmd, keys[i], &done);
  lith_stats_get(db, &st);
  assert_int_equal(st.queue_depth, n); /* the gate was taken off the queue */
  usleep(GATE_MS * 1000);
  lith_stats_get(db, &st);
  assert_int_equal(st.queue_depth, n);
  t_gate_open(&gate);
  t_async_wait(&done, n);
  assert_int_equal(gate.req.rc, LITH_OK);
  for (int i = 0; i < n; i++)
    assert_int_equal(r[i].rc, fail[i] ? LITH_USER : LITH_OK);
}

static void test_counts_histogram_and_times(void **state) {
  (void)state;
  lith_options opt;
  t_bank_options(&opt);
  opt.checkpoint = LITH_CHECKPOINT_EXTERNAL;
  lith *db = t_open_fresh(DB, &opt);
  lith_stats s, s2;

  lith_stats_get(NULL, &s);
  assert_zero_stats(&s);
  lith_stats_get(db, &s);
  assert_zero_stats(&s); /* the migrations at open are not commands */
  assert_int_equal(s.wal_pages, 0);
  assert_int_equal(s.checkpoints, 0);

  /* a batch of 1 */
  assert_int_equal(lith_do(db, t_put_cmd, "one"), LITH_OK);
  lith_stats_get(db, &s);
  assert_int_equal(s.commands, 1);
  assert_int_equal(s.batches, 1);
  assert_int_equal(s.batch_hist[0], 1);
  assert_true(s.wal_pages > 0);
  uint64_t wal1 = s.wal_pages;

  /* gate + 5 (one fails) */
  char k5[5][16];
  int f5[5] = {0, 0, 1, 0, 0};
  lith_request r5[5];
  for (int i = 0; i < 5; i++)
    snprintf(k5[i], sizeof k5[i], "five-%d", i);
  gated_batch(db, 5, k5, f5, r5);

  /* gate + 20 (two fail) */
  char k20[20][16];
  int f20[20] = {0};
  lith_request r20[20];
  f20[3] = f20[17] = 1;
  for (int i = 0; i < 20; i++)
    snprintf(k20[i], sizeof k20[i], "twenty-%d", i);
  gated_batch(db, 20, k20, f20, r20);

  lith_stats_get(db, &s);
  assert_int_equal(s.commands, 1 + (1 + 5) + (1 + 20));
  assert_int_equal(s.batches, 5);
  assert_int_equal(s.failed, 3);
  assert_int_equal(s.retried, 0);
  assert_int_equal(s.busy, 0);
  assert_int_equal(s.batch_hist[0], 3); /* "one" and the two gates */
  assert_int_equal(s.batch_hist[1], 0);
  assert_int_equal(s.batch_hist[2], 1); /* 5: [4, 8) */
  assert_int_equal(s.batch_hist[3], 0);
  assert_int_equal(s.batch_hist[4], 1); /* 20: [16, 32) */
  for (int k = 5; k < LITH_HIST_BUCKETS; k++)
    assert_int_equal(s.batch_hist[k], 0);
  uint64_t hist_sum = 0;
  for (int k = 0; k < LITH_HIST_BUCKETS; k++)
    hist_sum += s.batch_hist[k];
  assert_int_equal(hist_sum, s.batches);

  const uint64_t gate_ns = (uint64_t)GATE_MS * 1000000u;
  assert_true(s.commit_ns_total > 0);
  assert_true(s.tx_ns_total > 0);
  assert_true(s.tx_ns_total >= s.commit_ns_total);
  assert_true(s.tx_ns_total >= 2 * gate_ns); /* each gate held its transaction open */
  assert_true(s.tx_ns_max > 0);
  assert_true(s.tx_ns_p50 <= s.tx_ns_p99);
  assert_true(s.tx_ns_p99 <= s.tx_ns_p999);
  assert_true(s.tx_ns_p999 <= s.tx_ns_max);
  assert_true(s.tx_ns_max >= gate_ns);
  assert_true(s.tx_ns_max <= s.tx_ns_total);
  assert_true(s.wait_ns_total > 0);
  assert_true(s.wait_ns_max >= gate_ns);        /* queued behind the gate for GATE_MS at least */
  assert_true(s.wait_ns_total >= 25 * gate_ns); /* 25 commands each waited that long */
  assert_true(s.wait_ns_max <= s.wait_ns_total);
  assert_int_equal(s.queue_depth, 0);
  /* the latency histograms count every batch and every command once */
  uint64_t tx_events = 0, wait_events = 0;
  for (int k = 0; k < LITH_LAT_BUCKETS; k++) {
    tx_events += s.tx_lat[k];
    wait_events += s.wait_lat[k];
  }
  assert_int_equal(tx_events, s.batches);
  assert_int_equal(wait_events, s.commands);
  assert_true(lith_lat_quantile_ns(s.wait_lat, NULL, 1.0) >= gate_ns);
  assert_true(lith_lat_quantile_ns(s.tx_lat, NULL, 1.0) >= gate_ns);
  assert_true(s.wal_pages >= wal1); /* EXTERNAL: the WAL only grows */
  assert_true(s.wal_pages > 0);
  assert_int_equal(s.checkpoints, 0);
  assert_int_equal(s.checkpoint_ns_total, 0);

  /* the final figures survive lith_shutdown until lith_close */
  assert_int_equal(lith_shutdown(db), LITH_OK);
  lith_stats_get(db, &s2);
  assert_int_equal(s2.commands, s.commands);
  assert_int_equal(s2.batches, s.batches);
  assert_int_equal(s2.failed, s.failed);
  assert_memory_equal(s2.batch_hist, s.batch_hist, sizeof s.batch_hist);
  assert_int_equal(s2.tx_ns_total, s.tx_ns_total);
  assert_int_equal(s2.commit_ns_total, s.commit_ns_total);
  assert_int_equal(s2.tx_ns_p50, s.tx_ns_p50);
  assert_int_equal(s2.tx_ns_max, s.tx_ns_max);
  assert_int_equal(s2.wait_ns_total, s.wait_ns_total);
  assert_int_equal(s2.wait_ns_max, s.wait_ns_max);
  assert_memory_equal(s2.tx_lat, s.tx_lat, sizeof s.tx_lat);
  assert_memory_equal(s2.wait_lat, s.wait_lat, sizeof s.wait_lat);
  assert_int_equal(s2.queue_depth, 0);
  assert_int_equal(s2.wal_pages, s.wal_pages);
  assert_int_equal(s2.checkpoints, 0);
  /* commands are refused now and counted nowhere */
  assert_int_equal(lith_do(db, t_put_cmd, "late"), LITH_CLOSED);
  lith_stats_get(db, &s2);
  assert_int_equal(s2.commands, s.commands);
  assert_int_equal(s2.queue_depth, 0);
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM kv"), 1 + 4 + 18);
}

static int rollback_conflict(lith_tx *tx, void *arg) {
  return lith_tx_exec(tx, "INSERT OR ROLLBACK INTO kv(k, v) VALUES (?, 2)", "s", (const char *)arg);
}

static void test_retried_and_busy(void **state) {
  (void)state;
  lith_options opt;
  t_bank_options(&opt);
  opt.busy_timeout_ms = 100;
  lith *db = t_open_fresh(DB, &opt);
  lith_stats before, after;

  /* retried: r0 runs, r1 aborts the transaction, r0 and r2 run again */
  t_gate gate;
  t_async done = {0};
  lith_request r[3];
  t_gate_close(db, &gate);
  lith_stats_get(db, &before);
  t_submit(db, &r[0], t_put_cmd, "p1", &done);
  t_submit(db, &r[1], rollback_conflict, "p1", &done);
  t_submit(db, &r[2], t_put_cmd, "p3", &done);
  t_gate_open(&gate);
  t_async_wait(&done, 3);
  lith_stats_get(db, &after);
  assert_int_equal(r[0].rc, LITH_OK);
  assert_int_equal(r[1].rc, LITH_CONSTRAINT);
  assert_int_equal(r[2].rc, LITH_OK);
  assert_int_equal(after.retried - before.retried, 1); /* only r0 had run when r1 aborted */
  assert_int_equal(after.failed - before.failed, 1);
  assert_int_equal(after.commands - before.commands, 4);           /* the gate and the three */
  assert_int_equal(after.batch_hist[1] - before.batch_hist[1], 1); /* 3: [2, 4) */
  assert_int_equal(after.busy - before.busy, 0);

  /* busy: another connection holds the write lock */
  sqlite3 *other = NULL;
  assert_int_equal(sqlite3_open_v2(DB, &other, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_exec(other, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
  lith_stats_get(db, &before);
  assert_int_equal(lith_do(db, t_put_cmd, "blocked"), LITH_BUSY);
  lith_stats_get(db, &after);
  assert_int_equal(after.busy - before.busy, 1);
  assert_int_equal(after.failed - before.failed, 1);
  assert_int_equal(after.commands - before.commands, 1);
  assert_int_equal(after.batches - before.batches, 1);
  assert_int_equal(after.retried - before.retried, 0);
  assert_int_equal(sqlite3_exec(other, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_close(other), SQLITE_OK);

  assert_int_equal(lith_do(db, t_put_cmd, "free"), LITH_OK);
  lith_stats st;
  lith_stats_get(db, &st);
  assert_int_equal(st.busy, after.busy);
  assert_int_equal(st.failed, after.failed);
  assert_int_equal(st.commands, after.commands + 1);
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM kv WHERE k IN ('p1', 'p3', 'free')"), 3);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM kv WHERE k = 'blocked'"), 0);
}

static int put_blob(lith_tx *tx, void *arg) {
  return lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES (?, randomblob(3000))", "s", (const char *)arg);
}

static void checkpoint_case(int mode) {
  lith_options opt;
  t_bank_options(&opt);
  opt.checkpoint = mode;
  opt.checkpoint_pages = 4;
  lith *db = t_open_fresh(DB, &opt);
  for (int i = 0; i < 20; i++) {
    char key[32];
    snprintf(key, sizeof key, "blob-%d", i);
    assert_int_equal(lith_do(db, put_blob, key), LITH_OK);
  }
  lith_stats s;
  lith_stats_get(db, &s);
  /* WRITER mode checkpoints on a background thread: give it time */
  for (int i = 0; i < 5000 && s.checkpoints == 0; i++) {
    usleep(1000);
    lith_stats_get(db, &s);
  }
  assert_int_equal(s.commands, 20);
  assert_true(s.checkpoints > 0);
  assert_true(s.checkpoint_ns_total > 0);
  /* a checkpoint runs at most once per batch */
  assert_true(s.checkpoints <= s.batches);
  assert_int_equal(lith_shutdown(db), LITH_OK);
  lith_stats s2;
  lith_stats_get(db, &s2);
  assert_int_equal(s2.commands, 20);
  assert_true(s2.checkpoints >= s.checkpoints);
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM kv"), 20);
}

static void test_checkpoints_writer_mode(void **state) {
  (void)state;
  checkpoint_case(LITH_CHECKPOINT_WRITER);
}

static void test_checkpoints_auto_mode(void **state) {
  (void)state;
  checkpoint_case(LITH_CHECKPOINT_AUTO);
}

/* The final figures after lith_shutdown include its TRUNCATE checkpoint. */
static void test_final_stats_include_the_closing_checkpoint(void **state) {
  (void)state;
  lith_options opt;
  t_bank_options(&opt);
  opt.checkpoint_pages = 1 << 20; /* none before the close */
  lith *db = t_open_fresh(DB, &opt);
  t_seed_accounts(db, 50, 10);
  lith_stats before, after;
  lith_stats_get(db, &before);
  assert_int_equal(before.checkpoints, 0);
  assert_true(before.wal_pages > 0);
  assert_int_equal(lith_shutdown(db), LITH_OK);
  lith_stats_get(db, &after);
  assert_int_equal(after.checkpoints, 1);
  assert_int_equal(after.checkpoint_errors, 0);
  assert_int_equal(after.wal_pages, 0);
  assert_true(after.checkpoint_ns_total > 0);
  assert_int_equal(lith_close(db), LITH_OK);
}

/* Latency buckets: bounds grow by at most 1/8 per bucket, every duration
 * falls below its bucket's bound and at or above the previous one's, and
 * quantiles come from the difference of two snapshots. */
static void test_latency_buckets(void **state) {
  (void)state;
  assert_int_equal(lith_lat_bucket_upper_ns(0), 1024);
  for (int i = 1; i < LITH_LAT_BUCKETS - 1; i++) {
    uint64_t lo = lith_lat_bucket_upper_ns(i - 1), hi = lith_lat_bucket_upper_ns(i);
    assert_true(hi > lo);
    assert_true((hi - lo) * 8 <= lo); /* at most 1/8 wide */
  }
  assert_int_equal(lith_lat_bucket_upper_ns(LITH_LAT_BUCKETS - 1), UINT64_MAX);
  uint64_t a[LITH_LAT_BUCKETS] = {0}, b[LITH_LAT_BUCKETS] = {0};
  assert_int_equal(lith_lat_quantile_ns(a, NULL, 0.99), 0);
  a[3] = 10; /* 10 events in bucket 3 before */
  memcpy(b, a, sizeof b);
  b[3] += 98; /* then 98 more there, 1 in bucket 40, 1 in bucket 100 */
  b[40] = 1;
  b[100] = 1;
  assert_int_equal(lith_lat_quantile_ns(b, a, 0.5), lith_lat_bucket_upper_ns(3));
  assert_int_equal(lith_lat_quantile_ns(b, a, 0.98), lith_lat_bucket_upper_ns(3));
  assert_int_equal(lith_lat_quantile_ns(b, a, 0.99), lith_lat_bucket_upper_ns(40));
  assert_int_equal(lith_lat_quantile_ns(b, a, 1.0), lith_lat_bucket_upper_ns(100));
  /* all of b: 110 events, the 10 earlier ones count too */
  assert_int_equal(lith_lat_quantile_ns(b, NULL, 0.99), lith_lat_bucket_upper_ns(40));
}

/* ---- Percentiles read by many threads at once ------------------------------ */

#define DB2 "stats2.db"
#define SLOW_MS 50

static int slow_cmd(lith_tx *tx, void *arg) {
  usleep(SLOW_MS * 1000);
  return t_put_cmd(tx, arg);
}

typedef struct two_handles {
  lith *slow, *quick;
  _Atomic int stop;
  _Atomic int reads, wrong;
  _Atomic int quick_put;
} two_handles;

static int ordered(const lith_stats *s) {
  return s->tx_ns_p50 <= s->tx_ns_p99 && s->tx_ns_p99 <= s->tx_ns_p999 && s->tx_ns_p999 <= s->tx_ns_max &&
         s->tx_ns_max <= s->tx_ns_total;
}

static void *stats_reader(void *arg) {
  two_handles *h = arg;
  const uint64_t slow_ns = (uint64_t)SLOW_MS * 1000000u;
  while (!atomic_load(&h->stop)) {
    lith_stats a, b;
    lith_stats_get(h->slow, &a);
    lith_stats_get(h->quick, &b);
    if (!ordered(&a) || !ordered(&b) || a.tx_ns_p50 < slow_ns || b.tx_ns_p50 >= slow_ns)
      atomic_fetch_add(&h->wrong, 1);
    atomic_fetch_add(&h->reads, 1);
  }
  return NULL;
}

static void *quick_producer(void *arg) {
  two_handles *h = arg;
  for (int i = 0; !atomic_load(&h->stop); i++) {
    char key[32];
    snprintf(key, sizeof key, "quick-%d", i);
    if (lith_do(h->quick, t_put_cmd, key) == LITH_OK)
      atomic_fetch_add(&h->quick_put, 1);
  }
  return NULL;
}

static void test_percentiles_read_concurrently(void **state) {
  (void)state;
  enum { READERS = 4 };
  lith_options opt;
  t_bank_options(&opt);
  opt.checkpoint = LITH_CHECKPOINT_EXTERNAL;
  two_handles h = {0};
  h.slow = t_open_fresh(DB, &opt);
  h.quick = t_open_fresh(DB2, &opt);
  for (int i = 0; i < 5; i++) {
    char key[32];
    snprintf(key, sizeof key, "slow-%d", i);
    assert_int_equal(lith_do(h.slow, slow_cmd, key), LITH_OK);
  }
  for (int i = 0; i < 50; i++) { /* quick has figures before the readers start */
    char key[32];
    snprintf(key, sizeof key, "first-%d", i);
    assert_int_equal(lith_do(h.quick, t_put_cmd, key), LITH_OK);
  }
  pthread_t readers[READERS], producer;
  for (int i = 0; i < READERS; i++)
    assert_int_equal(pthread_create(&readers[i], NULL, stats_reader, &h), 0);
  assert_int_equal(pthread_create(&producer, NULL, quick_producer, &h), 0);
  usleep(300 * 1000);
  atomic_store(&h.stop, 1);
  for (int i = 0; i < READERS; i++)
    pthread_join(readers[i], NULL);
  pthread_join(producer, NULL);
  printf("stats read %d times by %d threads while %d commands committed: %d wrong\n", atomic_load(&h.reads),
         READERS, atomic_load(&h.quick_put), atomic_load(&h.wrong));
  assert_true(atomic_load(&h.reads) > 0);
  assert_int_equal(atomic_load(&h.wrong), 0);
  assert_int_equal(lith_close(h.quick), LITH_OK);
  assert_int_equal(lith_close(h.slow), LITH_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_counts_histogram_and_times),
      cmocka_unit_test(test_retried_and_busy),
      cmocka_unit_test(test_checkpoints_writer_mode),
      cmocka_unit_test(test_checkpoints_auto_mode),
      cmocka_unit_test(test_final_stats_include_the_closing_checkpoint),
      cmocka_unit_test(test_latency_buckets),
      cmocka_unit_test(test_percentiles_read_concurrently),
  };
  return cmocka_run_group_tests_name("writer/stats", tests, NULL, NULL);
}
