/*
 * test_metrics — metrics.c, the /metrics text: after a known number of
 * commands (some failing) every metric has its HELP and TYPE lines, the
 * counters say what ran, and every histogram is well formed for
 * Prometheus (buckets cumulative and never falling, +Inf equal to _count,
 * batch sizes summing to the commands). Without an HTTP server its
 * counters read 0 and no response line appears; responses count by route
 * (unknown ones as "other") and code, reads by their times; a buffer that
 * already failed gets nothing more. Each database's series carry its db
 * label, two databases' series sit under one HELP and TYPE, and hundreds
 * of route labels (many databases) count each response under its own.
 * Databases on a dqlite cluster get the lith_dqlite_* series (who leads,
 * failovers), a leader's address escaped as a label value; a local file
 * none of them. Every text written passes assert_exposition, a check of
 * the format itself (each metric introduced once by HELP and TYPE before
 * its samples, its samples together, labels and values well formed).
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

/* A histogram `name` of database `db`: its buckets never fall, +Inf is
 * _count; returns the count. */
static uint64_t histogram_of(const char *text, const char *name, const char *db) {
  char prefix[128], line[160];
  uint64_t last = 0, count;
  int buckets = 0;
  snprintf(line, sizeof line, "# TYPE %s histogram\n", name);
  assert_non_null(strstr(text, line));
  snprintf(prefix, sizeof prefix, "%s_bucket{db=\"%s\",le=\"", name, db);
  for (const char *p = strstr(text, prefix); p != NULL; p = strstr(p + 1, prefix)) {
    const char *v = strstr(p, "} ");
    assert_non_null(v);
    uint64_t n = strtoull(v + 2, NULL, 10);
    assert_true(n >= last);
    last = n;
    buckets++;
  }
  assert_true(buckets > 2);
  snprintf(line, sizeof line, "%s_count{db=\"%s\"}", name, db);
  count = sample(text, line);
  snprintf(line, sizeof line, "%s_bucket{db=\"%s\",le=\"+Inf\"}", name, db);
  assert_int_equal(sample(text, line), count);
  assert_int_equal(last, count); /* +Inf is the last bucket */
  return count;
}

static uint64_t histogram(const char *text, const char *name) { return histogram_of(text, name, "main"); }

/* [a-zA-Z_:][a-zA-Z0-9_:]* at p: its length (0: none). */
static size_t metric_name(const char *p) {
  size_t n = 0;
  while ((p[n] >= 'a' && p[n] <= 'z') || (p[n] >= 'A' && p[n] <= 'Z') || p[n] == '_' || p[n] == ':' ||
         (n > 0 && p[n] >= '0' && p[n] <= '9'))
    n++;
  return n;
}

/* The text format 0.0.4, line by line: "# HELP name text", then "# TYPE name
 * counter|gauge|histogram" once per metric, then its samples and no other
 * metric's (a histogram's: name_bucket with an le label, name_sum,
 * name_count), each "name{label="value",...} number" with only \\, \" and
 * \n escaped in values; no metric introduced twice. */
static void assert_exposition(const char *text) {
  static char seen[512][128];
  size_t nseen = 0;
  char family[128] = "", type[16] = "", help[128] = "";
  const char *p = text;
  int line = 0;
  while (*p) {
    const char *end = strchr(p, '\n');
    line++;
    if (end == NULL)
      fail_msg("line %d: no newline at the end", line);
    if (strncmp(p, "# HELP ", 7) == 0) {
      size_t n = metric_name(p + 7);
      if (n == 0 || p[7 + n] != ' ')
        fail_msg("line %d: a HELP without a name: %.*s", line, (int)(end - p), p);
      snprintf(help, sizeof help, "%.*s", (int)n, p + 7);
    } else if (strncmp(p, "# TYPE ", 7) == 0) {
      size_t n = metric_name(p + 7);
      snprintf(family, sizeof family, "%.*s", (int)n, p + 7);
      snprintf(type, sizeof type, "%.*s", (int)(end - (p + 8 + n)), p + 8 + n);
      if (strcmp(family, help) != 0)
        fail_msg("line %d: TYPE %s not right after its HELP", line, family);
      if (strcmp(type, "counter") != 0 && strcmp(type, "gauge") != 0 && strcmp(type, "histogram") != 0)
        fail_msg("line %d: type %s", line, type);
      for (size_t i = 0; i < nseen; i++)
        if (strcmp(seen[i], family) == 0)
          fail_msg("line %d: %s introduced twice", line, family);
      assert_true(nseen < 512);
      snprintf(seen[nseen++], sizeof seen[0], "%s", family);
    } else if (*p == '#') {
      fail_msg("line %d: a comment that is neither HELP nor TYPE", line);
    } else {
      size_t n = metric_name(p), f = strlen(family);
      const char *q = p + n;
      if (n == 0 || f == 0 || strncmp(p, family, f) != 0 ||
          (n != f && !(strcmp(type, "histogram") == 0 && ((n == f + 7 && strncmp(p + f, "_bucket", 7) == 0) ||
                                                          (n == f + 4 && strncmp(p + f, "_sum", 4) == 0) ||
                                                          (n == f + 6 && strncmp(p + f, "_count", 6) == 0)))))
        fail_msg("line %d: a sample outside its metric (%s): %.*s", line, family, (int)(end - p), p);
      if (*q == '{') {
        q++;
        for (;;) {
          size_t ln = metric_name(q);
          if (ln == 0 || q[ln] != '=' || q[ln + 1] != '"')
            fail_msg("line %d: a bad label: %.*s", line, (int)(end - p), p);
          q += ln + 2;
          while (*q != '"') {
            if (q >= end)
              fail_msg("line %d: a label value without its end", line);
            if (*q == '\\' && q[1] != '\\' && q[1] != '"' && q[1] != 'n')
              fail_msg("line %d: an escape the format has not: %.*s", line, (int)(end - p), p);
            q += *q == '\\' ? 2 : 1;
          }
          q++;
          if (*q == ',')
            q++;
          else if (*q == '}')
            break;
          else
            fail_msg("line %d: labels not closed: %.*s", line, (int)(end - p), p);
        }
        q++;
      }
      if (*q != ' ')
        fail_msg("line %d: no value: %.*s", line, (int)(end - p), p);
      char *vend;
      q++;
      strtod(q, &vend);
      if (vend != end || vend == q)
        fail_msg("line %d: a value that is not a number: %.*s", line, (int)(end - p), p);
    }
    p = end + 1;
  }
}

/* One database "main" on db, for metrics_on. */
static lithd_metrics_db main_db;
static const lithd_metrics_db *const main_dbs[] = {&main_db};

/* A metrics struct on db with a route table of three paths (one twice,
 * as GET and POST of one path share a label). */
static void metrics_on(lithd_metrics *m, lith *db) {
  static const char *const paths[] = {"/v1/do", "/v1/query", "/v1/do", "/metrics"};
  memset(m, 0, sizeof *m);
  memset(&main_db, 0, sizeof main_db);
  main_db.name = "main";
  main_db.queue_capacity = 123;
  main_db.readers = 3;
  main_db.page_size = 4096;
  main_db.db = db;
  m->dbs = main_dbs;
  m->n_dbs = 1;
  m->start_time = 1e9;
  assert_int_equal(lithd_metrics_init(m, paths, 4), 0);
  assert_int_equal(m->n_routes, 4); /* three paths and "other" */
}

static void test_text(void **state) {
  (void)state;
  lith_options opt;
  lith *db = NULL;
  lithd_buf b = {0};
  lithd_metrics m;
  lith_stats st;

  lith_options_default(&opt);
  opt.migrations = migrations;
  opt.n_migrations = 1;
  remove_db();
  assert_int_equal(lith_open(DB, &opt, &db), LITH_OK);
  for (int i = 0; i < COMMANDS; i++)
    lith_do(db, insert, &i);
  lith_stats_get(db, &st);
  metrics_on(&m, db);
  lithd_metrics_write(&b, &m);
  assert_int_equal(b.failed, 0);
  const char *text = b.p;
  assert_exposition(text);
  assert_null(strstr(text, "lith_dqlite_")); /* a local file: no cluster */

  assert_int_equal(sample(text, "lith_commands_total{db=\"main\"}"), COMMANDS);
  assert_int_equal(sample(text, "lith_commands_failed_total{db=\"main\"}"), st.failed);
  assert_true(st.failed >= 1);
  assert_int_equal(sample(text, "lith_batches_total{db=\"main\"}"), st.batches);
  assert_int_equal(sample(text, "lith_queue_depth{db=\"main\"}"), 0);
  assert_int_equal(sample(text, "lith_queue_capacity{db=\"main\"}"), 123);
  assert_int_equal(sample(text, "lith_readers{db=\"main\"}"), 3);
  assert_int_equal(sample(text, "lith_wal_bytes{db=\"main\"}"),
                   sample(text, "lith_wal_pages{db=\"main\"}") * 4096);
  assert_non_null(strstr(text, "\nlithd_build_info{version=\"" LITH_VERSION "\",sqlite=\""));
  /* every sample's metric is introduced */
  static const char *const names[] = {"lith_commands_total",
                                      "lith_commands_failed_total",
                                      "lith_command_retries_total",
                                      "lith_batches_total",
                                      "lith_write_lock_busy_total",
                                      "lith_queue_depth",
                                      "lith_queue_capacity",
                                      "lith_readers",
                                      "lith_wal_pages",
                                      "lith_wal_bytes",
                                      "lith_checkpoints_total",
                                      "lith_checkpoint_errors_total",
                                      "lith_checkpoint_seconds_total",
                                      "lith_checkpoint_writer_seconds_total",
                                      "lith_commit_seconds_total",
                                      "lithd_build_info",
                                      "lithd_http_connections_total",
                                      "lithd_http_connections_open",
                                      "lithd_http_requests_pending",
                                      "lithd_http_responses_total",
                                      "lithd_read_wait_seconds",
                                      "lithd_read_seconds",
                                      "lithd_reads_failed_total",
                                      "process_resident_memory_bytes",
                                      "process_virtual_memory_bytes",
                                      "process_open_fds",
                                      "process_max_fds",
                                      "process_cpu_seconds_total",
                                      "process_start_time_seconds"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    char help[96], type[96];
    snprintf(help, sizeof help, "# HELP %s ", names[i]);
    snprintf(type, sizeof type, "# TYPE %s ", names[i]);
    if (strstr(text, help) == NULL || strstr(text, type) == NULL)
      fail_msg("%s: no HELP or TYPE", names[i]);
  }
  /* the old names are gone */
  assert_null(strstr(text, "lith_failed_total"));
  assert_null(strstr(text, "lith_busy_total"));
  /* batch sizes: one count per batch, summing to the commands */
  assert_int_equal(histogram(text, "lith_batch_size"), st.batches);
  assert_int_equal(sample(text, "lith_batch_size_sum{db=\"main\"}"), COMMANDS);
  assert_non_null(strstr(text, "lith_batch_size_bucket{db=\"main\",le=\"1\"} "));
  assert_non_null(strstr(text, "lith_batch_size_bucket{db=\"main\",le=\"1023\"} "));
  /* latencies: one per transaction, one per command */
  assert_int_equal(histogram(text, "lith_transaction_seconds"), st.batches);
  assert_int_equal(histogram(text, "lith_queue_wait_seconds"), COMMANDS);
  assert_non_null(strstr(text, "lith_transaction_seconds_bucket{db=\"main\",le=\"0.0001\"} "));
  assert_non_null(strstr(text, "lith_transaction_seconds_bucket{db=\"main\",le=\"10\"} "));
  /* no reads, no HTTP server: zeros, and no response line */
  assert_int_equal(histogram(text, "lithd_read_seconds"), 0);
  assert_int_equal(sample(text, "lithd_http_connections_total"), 0);
  assert_null(strstr(text, "lithd_http_responses_total{"));
  /* the process: this one */
  assert_true(sample(text, "process_resident_memory_bytes") > 0);
  assert_true(sample(text, "process_open_fds") >= 3);
  assert_true(sample(text, "process_start_time_seconds") > 1700000000);

  char *out = lithd_buf_finish(&b);
  assert_non_null(out);
  free(out);
  lithd_metrics_free(&m);
  assert_int_equal(lith_close(db), LITH_OK);
  remove_db();
}

/* Responses by route and code: a known route under its path, anything
 * else (no route, an unknown path) under "other"; codes outside 100..599
 * as "0". Reads land in the bucket of their time. */
static void test_counts(void **state) {
  (void)state;
  lith_options opt;
  lith *db = NULL;
  lithd_buf b = {0};
  lithd_metrics m;

  lith_options_default(&opt);
  remove_db();
  assert_int_equal(lith_open(DB, &opt, &db), LITH_OK);
  metrics_on(&m, db);
  lithd_metrics_response(&m, "/v1/do", 200);
  lithd_metrics_response(&m, "/v1/do", 200);
  lithd_metrics_response(&m, "/v1/do", 409);
  lithd_metrics_response(&m, "/metrics", 599);
  lithd_metrics_response(&m, NULL, 404);
  lithd_metrics_response(&m, "/not/a/route", 405);
  lithd_metrics_response(&m, "/v1/query", 0);
  lithd_metrics_read(&main_db, 50 * 1000, 3 * 1000 * 1000, 0);     /* 50 us waited, 3 ms ran */
  lithd_metrics_read(&main_db, 20LL * 1000 * 1000 * 1000, 100, 1); /* 20 s waited (+Inf), failed */
  lithd_metrics_write(&b, &m);
  const char *text = b.p;
  assert_non_null(text);
  assert_exposition(text);
  assert_int_equal(sample(text, "lithd_http_responses_total{route=\"/v1/do\",code=\"200\"}"), 2);
  assert_int_equal(sample(text, "lithd_http_responses_total{route=\"/v1/do\",code=\"409\"}"), 1);
  assert_int_equal(sample(text, "lithd_http_responses_total{route=\"/metrics\",code=\"599\"}"), 1);
  assert_int_equal(sample(text, "lithd_http_responses_total{route=\"other\",code=\"404\"}"), 1);
  assert_int_equal(sample(text, "lithd_http_responses_total{route=\"other\",code=\"405\"}"), 1);
  assert_int_equal(sample(text, "lithd_http_responses_total{route=\"/v1/query\",code=\"0\"}"), 1);
  assert_null(strstr(text, "code=\"201\""));
  assert_int_equal(histogram(text, "lithd_read_wait_seconds"), 2);
  assert_int_equal(sample(text, "lithd_read_wait_seconds_bucket{db=\"main\",le=\"0.0001\"}"), 1);
  assert_int_equal(sample(text, "lithd_read_wait_seconds_bucket{db=\"main\",le=\"10\"}"), 1);
  assert_int_equal(histogram(text, "lithd_read_seconds"), 2);
  assert_int_equal(sample(text, "lithd_read_seconds_bucket{db=\"main\",le=\"0.0025\"}"), 1);
  assert_int_equal(sample(text, "lithd_read_seconds_bucket{db=\"main\",le=\"0.005\"}"), 2);
  assert_int_equal(sample(text, "lithd_reads_failed_total{db=\"main\"}"), 1);
  free(lithd_buf_finish(&b));
  lithd_metrics_free(&m);

  /* many databases' routes: every label its own count, in any order */
  static char names[300][32];
  const char *many[300];
  for (int i = 0; i < 300; i++) {
    snprintf(names[i], sizeof names[i], "/v1/db/d%d/do", (i * 7919) % 300);
    many[i] = names[i];
  }
  assert_int_equal(lithd_metrics_init(&m, many, 300), 0);
  assert_int_equal(m.n_routes, 301);
  for (int i = 0; i < 300; i++)
    for (int k = 0; k <= i % 3; k++)
      lithd_metrics_response(&m, many[i], 200);
  lithd_metrics_response(&m, "/v1/db/nope/do", 404);
  b = (lithd_buf){0};
  lithd_metrics_write(&b, &m);
  text = b.p;
  assert_non_null(text);
  for (int i = 0; i < 300; i++) {
    char line[96];
    snprintf(line, sizeof line, "lithd_http_responses_total{route=\"%s\",code=\"200\"}", many[i]);
    assert_int_equal(sample(text, line), (uint64_t)(i % 3 + 1));
  }
  assert_int_equal(sample(text, "lithd_http_responses_total{route=\"other\",code=\"404\"}"), 1);
  free(lithd_buf_finish(&b));
  lithd_metrics_free(&m);
  assert_int_equal(lith_close(db), LITH_OK);
  remove_db();
}

/* Two databases: each one's series under its label, both under one HELP
 * and TYPE line per metric (the text format wants a metric's series
 * together). */
static void test_two_databases(void **state) {
  (void)state;
  lith_options opt;
  lith *db = NULL, *db2 = NULL;
  lithd_buf b = {0};
  lithd_metrics m;
  lithd_metrics_db other;
  const lithd_metrics_db *both[2];
  int i = 1;

  lith_options_default(&opt);
  opt.migrations = migrations;
  opt.n_migrations = 1;
  remove_db();
  unlink("other.db");
  unlink("other.db-wal");
  unlink("other.db-shm");
  assert_int_equal(lith_open(DB, &opt, &db), LITH_OK);
  assert_int_equal(lith_open("other.db", &opt, &db2), LITH_OK);
  for (int k = 0; k < 5; k++)
    assert_int_equal(lith_do(db2, insert, &i), LITH_OK);
  metrics_on(&m, db);
  memset(&other, 0, sizeof other);
  other.name = "other";
  other.db = db2;
  other.queue_capacity = 9;
  lithd_metrics_read(&other, 1000, 1000, 1);
  both[0] = &main_db;
  both[1] = &other;
  m.dbs = both;
  m.n_dbs = 2;
  lithd_metrics_write(&b, &m);
  const char *text = b.p;
  assert_non_null(text);
  assert_exposition(text);
  assert_int_equal(sample(text, "lith_commands_total{db=\"main\"}"), 0);
  assert_int_equal(sample(text, "lith_commands_total{db=\"other\"}"), 5);
  assert_int_equal(sample(text, "lith_queue_capacity{db=\"main\"}"), 123);
  assert_int_equal(sample(text, "lith_queue_capacity{db=\"other\"}"), 9);
  assert_int_equal(sample(text, "lithd_reads_failed_total{db=\"main\"}"), 0);
  assert_int_equal(sample(text, "lithd_reads_failed_total{db=\"other\"}"), 1);
  assert_int_equal(histogram_of(text, "lith_transaction_seconds", "other"),
                   sample(text, "lith_batches_total{db=\"other\"}"));
  assert_int_equal(histogram_of(text, "lith_transaction_seconds", "main"), 0);
  assert_int_equal(histogram_of(text, "lithd_read_seconds", "other"), 1);
  /* one HELP per metric, the two series right after it */
  const char *help = strstr(text, "# HELP lith_commands_total ");
  assert_non_null(help);
  assert_null(strstr(help + 1, "# HELP lith_commands_total "));
  const char *s1 = strstr(help, "\nlith_commands_total{db=\"main\"}");
  const char *s2 = strstr(help, "\nlith_commands_total{db=\"other\"}");
  assert_non_null(s1);
  assert_non_null(s2);
  assert_true(s1 < s2 && strstr(help + 1, "# HELP ") > s2);
  free(lithd_buf_finish(&b));
  lithd_metrics_free(&m);
  assert_int_equal(lith_close(db2), LITH_OK);
  assert_int_equal(lith_close(db), LITH_OK);
  unlink("other.db");
  remove_db();
}

/* Databases on a dqlite cluster: who leads and the failovers, per db
 * label; none known: leader_known 0 and no info series; an address the
 * format must escape is escaped. */
static void test_cluster(void **state) {
  (void)state;
  lithd_buf b = {0};
  lithd_metrics m;
  lithd_metrics_db other, odd;
  const lithd_metrics_db *dbs[3];

  metrics_on(&m, NULL); /* no local file: lith's figures read 0 */
  main_db.cluster = (lithd_metrics_cluster){.on = 1,
                                            .leader = "10.0.0.2:9001",
                                            .leader_id = 2,
                                            .failovers = 3,
                                            .reruns = 4,
                                            .failover_wait_ms = 1500};
  memset(&other, 0, sizeof other);
  other.name = "other";
  other.cluster = (lithd_metrics_cluster){.on = 1, .failovers = 1};
  memset(&odd, 0, sizeof odd);
  odd.name = "odd";
  odd.cluster = (lithd_metrics_cluster){.on = 1, .leader = "h\"x\\y\nz", .leader_id = 7};
  dbs[0] = &main_db;
  dbs[1] = &other;
  dbs[2] = &odd;
  m.dbs = dbs;
  m.n_dbs = 3;
  lithd_metrics_write(&b, &m);
  const char *text = b.p;
  assert_non_null(text);
  assert_exposition(text);
  assert_int_equal(sample(text, "lith_dqlite_leader_known{db=\"main\"}"), 1);
  assert_int_equal(sample(text, "lith_dqlite_leader_known{db=\"other\"}"), 0);
  assert_int_equal(sample(text, "lith_dqlite_leader_info{db=\"main\",address=\"10.0.0.2:9001\",id=\"2\"}"),
                   1);
  assert_null(strstr(text, "lith_dqlite_leader_info{db=\"other\""));
  assert_int_equal(sample(text, "lith_dqlite_leader_info{db=\"odd\",address=\"h\\\"x\\\\y\\nz\",id=\"7\"}"),
                   1);
  assert_int_equal(sample(text, "lith_dqlite_failovers_total{db=\"main\"}"), 3);
  assert_int_equal(sample(text, "lith_dqlite_failovers_total{db=\"other\"}"), 1);
  assert_int_equal(sample(text, "lith_dqlite_reruns_total{db=\"main\"}"), 4);
  assert_non_null(strstr(text, "\nlith_dqlite_last_failover_wait_seconds{db=\"main\"} 1.5"));
  assert_non_null(strstr(text, "\nlith_dqlite_last_failover_wait_seconds{db=\"other\"} 0"));
  assert_non_null(strstr(text, "# TYPE lith_dqlite_failovers_total counter\n"));
  assert_non_null(strstr(text, "# TYPE lith_dqlite_leader_info gauge\n"));
  assert_non_null(strstr(text, "# TYPE lith_dqlite_last_failover_wait_seconds gauge\n"));
  free(lithd_buf_finish(&b));
  lithd_metrics_free(&m);
}

static void test_failed_buffer(void **state) {
  (void)state;
  lith_options opt;
  lith *db = NULL;
  lithd_buf b = {0};
  lithd_metrics m;
  lith_options_default(&opt);
  remove_db();
  assert_int_equal(lith_open(DB, &opt, &db), LITH_OK);
  metrics_on(&m, db);
  b.failed = 1;
  lithd_metrics_write(&b, &m);
  assert_int_equal(b.len, 0);
  assert_null(lithd_buf_finish(&b));
  lithd_metrics_free(&m);
  assert_int_equal(lith_close(db), LITH_OK);
  remove_db();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_text),          cmocka_unit_test(test_counts),
      cmocka_unit_test(test_two_databases), cmocka_unit_test(test_cluster),
      cmocka_unit_test(test_failed_buffer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
