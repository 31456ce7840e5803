/*
 * test_metrics — metrics.c, the /metrics text: after a known number of
 * commands (some failing) every metric has its HELP and TYPE lines, the
 * counters say what ran, and every histogram is well formed for
 * Prometheus (buckets cumulative and never falling, +Inf equal to _count,
 * batch sizes summing to the commands). Without an HTTP server its
 * counters read 0 and no status line appears; a buffer that already
 * failed gets nothing more.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metrics.h"

#define DB "test_metrics.db"
#define COMMANDS 40
#define FAILING 7

static const char *const migrations[] = {"CREATE TABLE t(v INTEGER NOT NULL)"};

static void remove_db(void) {
  unlink(DB);
  unlink(DB "-wal");
  unlink(DB "-shm");
}

static int insert(lith_tx *tx, void *arg) {
  int i = *(int *)arg;
  if (i % (COMMANDS / FAILING) == 0) /* a command that fails alone */
    return lith_tx_exec(tx, "INSERT INTO t(v) VALUES (NULL)", NULL);
  return lith_tx_exec(tx, "INSERT INTO t(v) VALUES (?)", "i", i);
}

/* The value of the sample line that starts with `name` (followed by a
 * space); the test fails when there is none. */
static uint64_t sample(const char *text, const char *name) {
  size_t n = strlen(name);
  for (const char *p = text; p != NULL && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    if (strncmp(p, name, n) == 0 && p[n] == ' ')
      return strtoull(p + n + 1, NULL, 10);
  }
  fail_msg("no sample %s", name);
  return 0;
}

/* A histogram `name`: its buckets never fall, +Inf is _count; returns the
 * count. */
static uint64_t histogram(const char *text, const char *name) {
  char prefix[128], line[160];
  uint64_t last = 0, count;
  int buckets = 0;
  snprintf(line, sizeof line, "# TYPE %s histogram\n", name);
  assert_non_null(strstr(text, line));
  snprintf(prefix, sizeof prefix, "%s_bucket{le=\"", name);
  for (const char *p = strstr(text, prefix); p != NULL; p = strstr(p + 1, prefix)) {
    const char *v = strstr(p, "} ");
    assert_non_null(v);
    uint64_t n = strtoull(v + 2, NULL, 10);
    assert_true(n >= last);
    last = n;
    buckets++;
  }
  assert_true(buckets > 2);
  snprintf(line, sizeof line, "%s_count", name);
  count = sample(text, line);
  snprintf(line, sizeof line, "%s_bucket{le=\"+Inf\"}", name);
  assert_int_equal(sample(text, line), count);
  assert_int_equal(last, count); /* +Inf is the last bucket */
  return count;
}

static void test_text(void **state) {
  (void)state;
  lith_options opt;
  lith *db = NULL;
  lithd_buf b = {0};
  lith_stats st;

  lith_options_default(&opt);
  opt.migrations = migrations;
  opt.n_migrations = 1;
  remove_db();
  assert_int_equal(lith_open(DB, &opt, &db), LITH_OK);
  for (int i = 0; i < COMMANDS; i++)
    lith_do(db, insert, &i);
  lith_stats_get(db, &st);
  lithd_metrics_write(&b, db, NULL);
  assert_int_equal(b.failed, 0);
  const char *text = b.p;

  assert_int_equal(sample(text, "lith_commands_total"), COMMANDS);
  assert_int_equal(sample(text, "lith_failed_total"), st.failed);
  assert_true(st.failed >= 1);
  assert_int_equal(sample(text, "lith_batches_total"), st.batches);
  assert_int_equal(sample(text, "lith_queue_depth"), 0);
  /* every sample's metric is introduced */
  static const char *const names[] = {"lith_commands_total",
                                      "lith_batches_total",
                                      "lith_failed_total",
                                      "lith_retried_total",
                                      "lith_busy_total",
                                      "lith_queue_depth",
                                      "lith_wal_pages",
                                      "lith_checkpoints_total",
                                      "lith_checkpoint_errors_total",
                                      "lithd_http_connections_total",
                                      "lithd_http_connections_open",
                                      "lithd_http_pending",
                                      "lithd_http_responses_total"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    char help[96], type[96];
    snprintf(help, sizeof help, "# HELP %s ", names[i]);
    snprintf(type, sizeof type, "# TYPE %s ", names[i]);
    if (strstr(text, help) == NULL || strstr(text, type) == NULL)
      fail_msg("%s: no HELP or TYPE", names[i]);
  }
  /* batch sizes: one count per batch, summing to the commands */
  assert_int_equal(histogram(text, "lith_batch_size"), st.batches);
  assert_int_equal(sample(text, "lith_batch_size_sum"), COMMANDS);
  assert_non_null(strstr(text, "lith_batch_size_bucket{le=\"1\"} "));
  assert_non_null(strstr(text, "lith_batch_size_bucket{le=\"1023\"} "));
  /* latencies: one per transaction, one per command */
  assert_int_equal(histogram(text, "lith_transaction_seconds"), st.batches);
  assert_int_equal(histogram(text, "lith_queue_wait_seconds"), COMMANDS);
  assert_non_null(strstr(text, "lith_transaction_seconds_bucket{le=\"0.0001\"} "));
  assert_non_null(strstr(text, "lith_transaction_seconds_bucket{le=\"10\"} "));
  /* no HTTP server: zeros, and no status line */
  assert_int_equal(sample(text, "lithd_http_connections_total"), 0);
  assert_null(strstr(text, "lithd_http_responses_total{code="));

  char *out = lithd_buf_finish(&b);
  assert_non_null(out);
  free(out);
  assert_int_equal(lith_close(db), LITH_OK);
  remove_db();
}

static void test_failed_buffer(void **state) {
  (void)state;
  lith_options opt;
  lith *db = NULL;
  lithd_buf b = {0};
  lith_options_default(&opt);
  remove_db();
  assert_int_equal(lith_open(DB, &opt, &db), LITH_OK);
  b.failed = 1;
  lithd_metrics_write(&b, db, NULL);
  assert_int_equal(b.len, 0);
  assert_null(lithd_buf_finish(&b));
  assert_int_equal(lith_close(db), LITH_OK);
  remove_db();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_text),
      cmocka_unit_test(test_failed_buffer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
