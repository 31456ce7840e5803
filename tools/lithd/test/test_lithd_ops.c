/*
 * test_lithd_ops — what an operator sees of a running lithd (issue 12,
 * Operations): /metrics parsed as Prometheus would parse it, the request
 * log lines in text and JSON, --checkpoint-pages, the warning of a WAL
 * nobody checkpoints (--checkpoint external), and the startup line.
 *
 * The /metrics check is a small parser of the text exposition format 0.0.4
 * (https://prometheus.io/docs/instrumenting/exposition_formats/): every
 * metric family has its HELP and TYPE before its samples, every sample
 * line belongs to the family declared last (a histogram's _bucket, _sum and
 * _count), counters end in _total, no series appears twice, and each
 * histogram's buckets rise with le to +Inf, which equals _count. The
 * values are then compared between two scrapes around known requests.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ctype.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <sqlite3.h>

#include "child.h"

#ifndef LITHD_PATH
#error "LITHD_PATH must name the lithd binary"
#endif

extern char **environ;

#define CREATE "{\"statements\":[{\"sql\":\"CREATE TABLE t(id INTEGER PRIMARY KEY, v)\"}]}"
#define INSERT "{\"statements\":[{\"sql\":\"INSERT INTO t(v) VALUES (1)\"}]}"
#define QUERY "{\"statements\":[{\"sql\":\"SELECT count(*) FROM t\"}]}"
/* about 75 pages of 4 KiB in the WAL */
#define BIG "{\"statements\":[{\"sql\":\"INSERT INTO t(v) VALUES (zeroblob(300000))\"}]}"

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void read_text(const char *path, char *buf, size_t cap) {
  FILE *f = fopen(path, "r");
  size_t n;
  assert_non_null(f);
  n = fread(buf, 1, cap - 1, f);
  buf[n] = '\0';
  fclose(f);
}

/* How many times `needle` occurs in `hay`. */
static int occurrences(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + 1, needle))
    n++;
  return n;
}

/* ---- A parser of the Prometheus text format ------------------------------- */

#define PM_FAMILIES 96
#define PM_SAMPLES 1024

struct pm_family {
  char name[128];
  char type[16]; /* counter, gauge, histogram */
  int help, samples;
};

struct pm_sample {
  char name[128];   /* the sample's own name (a histogram's ..._bucket) */
  char labels[256]; /* as written between the braces, "" for none */
  char le[32];      /* a bucket's le label */
  double value;
};

struct pm {
  struct pm_family fam[PM_FAMILIES];
  size_t nfam;
  struct pm_sample s[PM_SAMPLES];
  size_t ns;
};

static int is_name_char(int ch, int first) {
  return isalpha(ch) || ch == '_' || ch == ':' || (!first && isdigit(ch));
}

static struct pm_family *pm_family(struct pm *pm, const char *name) {
  for (size_t i = 0; i < pm->nfam; i++)
    if (strcmp(pm->fam[i].name, name) == 0)
      return &pm->fam[i];
  return NULL;
}

static int ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* Parse `labels` (k="v",...): every name well formed, every value quoted
 * with only \\, \" and \n escaped; the value of le into le (or ""). */
static void pm_labels(const char *labels, char *le, size_t lecap, const char *line) {
  const char *p = labels;
  le[0] = '\0';
  while (*p) {
    char key[64], val[128];
    size_t k = 0, v = 0;
    if (!is_name_char((unsigned char)*p, 1))
      fail_msg("bad label name in: %s", line);
    while (is_name_char((unsigned char)*p, 0) && k < sizeof key - 1)
      key[k++] = *p++;
    key[k] = '\0';
    if (p[0] != '=' || p[1] != '"')
      fail_msg("label %s without =\"...\" in: %s", key, line);
    p += 2;
    while (*p && *p != '"') {
      if (*p == '\\') {
        if (p[1] != '\\' && p[1] != '"' && p[1] != 'n')
          fail_msg("bad escape in: %s", line);
        p++;
      }
      if (v < sizeof val - 1)
        val[v++] = *p;
      p++;
    }
    val[v] = '\0';
    if (*p != '"')
      fail_msg("unterminated label value in: %s", line);
    p++;
    if (strcmp(key, "le") == 0 && strlen(val) < lecap)
      memcpy(le, val, strlen(val) + 1);
    if (*p == ',')
      p++;
    else if (*p)
      fail_msg("junk after a label in: %s", line);
  }
}

/* Parse the whole text into *pm, failing the test on anything Prometheus
 * would refuse or that breaks the conventions above. */
static void pm_parse(const char *text, struct pm *pm) {
  char line[1024];
  const char *p = text;
  struct pm_family *cur = NULL;

  memset(pm, 0, sizeof *pm);
  assert_true(*text != '\0');
  assert_true(text[strlen(text) - 1] == '\n');
  while (*p) {
    const char *nl = strchr(p, '\n');
    size_t n = (size_t)(nl - p);
    assert_non_null(nl);
    assert_true(n < sizeof line);
    memcpy(line, p, n);
    line[n] = '\0';
    p = nl + 1;
    if (n == 0)
      fail_msg("an empty line");
    if (strncmp(line, "# HELP ", 7) == 0 || strncmp(line, "# TYPE ", 7) == 0) {
      char name[128], rest[512];
      if (sscanf(line + 7, "%127s %511[^\n]", name, rest) != 2)
        fail_msg("HELP or TYPE without text: %s", line);
      struct pm_family *f = pm_family(pm, name);
      if (f == NULL) {
        assert_true(pm->nfam < PM_FAMILIES);
        f = &pm->fam[pm->nfam++];
        snprintf(f->name, sizeof f->name, "%s", name);
      } else if (f != cur) {
        fail_msg("%s declared again after other families", name);
      }
      if (f->samples > 0)
        fail_msg("%s: HELP or TYPE after its samples", name);
      if (line[2] == 'H') {
        if (f->help++)
          fail_msg("%s: two HELP lines", name);
        if (f->type[0])
          fail_msg("%s: HELP after TYPE", name);
      } else {
        if (f->type[0])
          fail_msg("%s: two TYPE lines", name);
        if (strcmp(rest, "counter") != 0 && strcmp(rest, "gauge") != 0 && strcmp(rest, "histogram") != 0)
          fail_msg("%s: type %s", name, rest);
        memcpy(f->type, rest, strlen(rest) + 1); /* one of the three names above */
        if (strcmp(rest, "counter") == 0 && !ends_with(name, "_total"))
          fail_msg("counter %s does not end in _total", name);
        if (strcmp(rest, "counter") != 0 && ends_with(name, "_total"))
          fail_msg("%s %s ends in _total", rest, name);
      }
      cur = f;
      continue;
    }
    if (line[0] == '#')
      fail_msg("a comment that is neither HELP nor TYPE: %s", line);

    /* A sample: name[{labels}] value */
    assert_true(pm->ns < PM_SAMPLES);
    struct pm_sample *s = &pm->s[pm->ns++];
    const char *q = line;
    size_t k = 0;
    if (!is_name_char((unsigned char)*q, 1))
      fail_msg("bad metric name: %s", line);
    while (is_name_char((unsigned char)*q, 0) && k < sizeof s->name - 1)
      s->name[k++] = *q++;
    s->name[k] = '\0';
    if (*q == '{') {
      const char *close = strchr(q, '}');
      if (close == NULL || (size_t)(close - q - 1) >= sizeof s->labels)
        fail_msg("bad labels: %s", line);
      memcpy(s->labels, q + 1, (size_t)(close - q - 1));
      s->labels[close - q - 1] = '\0';
      pm_labels(s->labels, s->le, sizeof s->le, line);
      q = close + 1;
    }
    if (*q != ' ')
      fail_msg("no value: %s", line);
    char *end;
    s->value = strtod(q + 1, &end);
    if (end == q + 1 || *end != '\0' || isnan(s->value))
      fail_msg("bad value: %s", line);
    /* It belongs to the family declared last. */
    if (cur == NULL || !cur->type[0])
      fail_msg("a sample before any TYPE: %s", line);
    if (strcmp(cur->type, "histogram") == 0) {
      char want[160];
      int ok = 0;
      static const char *const parts[] = {"_bucket", "_sum", "_count"};
      for (int i = 0; i < 3; i++) {
        snprintf(want, sizeof want, "%s%s", cur->name, parts[i]);
        ok |= strcmp(s->name, want) == 0;
      }
      if (!ok)
        fail_msg("%s is not a sample of histogram %s", s->name, cur->name);
      if (ends_with(s->name, "_bucket") && !s->le[0])
        fail_msg("a bucket without le: %s", line);
    } else if (strcmp(s->name, cur->name) != 0) {
      fail_msg("%s is not a sample of %s", s->name, cur->name);
    }
    if (strcmp(cur->type, "counter") == 0 && s->value < 0)
      fail_msg("negative counter: %s", line);
    cur->samples++;
    /* No series twice. */
    for (size_t i = 0; i + 1 < pm->ns; i++)
      if (strcmp(pm->s[i].name, s->name) == 0 && strcmp(pm->s[i].labels, s->labels) == 0)
        fail_msg("series twice: %s", line);
  }
  /* Every family: HELP, TYPE, samples; every histogram well formed. */
  for (size_t i = 0; i < pm->nfam; i++) {
    struct pm_family *f = &pm->fam[i];
    if (!f->help || !f->type[0])
      fail_msg("%s: no HELP or no TYPE", f->name);
    if (strcmp(f->type, "histogram") != 0)
      continue;
    char bucket[160], sum[160], count[160];
    double prev_le = -INFINITY, prev = 0, inf = -1, cnt = -1;
    int has_sum = 0;
    snprintf(bucket, sizeof bucket, "%s_bucket", f->name);
    snprintf(sum, sizeof sum, "%s_sum", f->name);
    snprintf(count, sizeof count, "%s_count", f->name);
    for (size_t j = 0; j < pm->ns; j++) {
      const struct pm_sample *s = &pm->s[j];
      if (strcmp(s->name, bucket) == 0) {
        double le = strcmp(s->le, "+Inf") == 0 ? INFINITY : strtod(s->le, NULL);
        if (inf >= 0)
          fail_msg("%s: a bucket after +Inf", f->name);
        if (!(le > prev_le))
          fail_msg("%s: le %s does not rise", f->name, s->le);
        if (s->value < prev)
          fail_msg("%s: bucket le=%s falls", f->name, s->le);
        prev_le = le;
        prev = s->value;
        if (isinf(le))
          inf = s->value;
      } else if (strcmp(s->name, sum) == 0) {
        has_sum = 1;
      } else if (strcmp(s->name, count) == 0) {
        cnt = s->value;
      }
    }
    if (inf < 0 || cnt < 0 || !has_sum)
      fail_msg("%s: no +Inf bucket, _sum or _count", f->name);
    if (inf != cnt)
      fail_msg("%s: +Inf %g != _count %g", f->name, inf, cnt);
  }
}

/* The value of series `name` with exactly `labels` ("" for none); fails
 * when there is none, unless `or` is not NaN (then returned). */
static double pm_value_or(const struct pm *pm, const char *name, const char *labels, double or) {
  for (size_t i = 0; i < pm->ns; i++)
    if (strcmp(pm->s[i].name, name) == 0 && strcmp(pm->s[i].labels, labels) == 0)
      return pm->s[i].value;
  if (isnan(or))
    fail_msg("no series %s{%s}", name, labels);
  return or ;
}

static double pm_value(const struct pm *pm, const char *name, const char *labels) {
  return pm_value_or(pm, name, labels, NAN);
}

static void scrape(const struct tl_child *c, struct pm *pm) {
  struct tl_resp r = {0, NULL, NULL};
  tl_http(c, "GET", "/metrics", NULL, NULL, &r);
  assert_int_equal(r.status, 200);
  assert_non_null(strstr(r.head, "text/plain; version=0.0.4"));
  pm_parse(r.body, pm);
  tl_resp_free(&r);
}

/* ---- /metrics ---------------------------------------------------------------- */

static void test_metrics_parse_and_move(void **state) {
  struct tl_child *c = *state;
  struct pm *a = malloc(sizeof *a), *b = malloc(sizeof *b);
  assert_non_null(a);
  assert_non_null(b);

  tl_start(c, "opsmetrics", 0, TL_ARGS("--max-queue", "777", "--readers", "3"));
  tl_expect(c, "POST", "/v1/do", NULL, CREATE, 200, NULL);
  scrape(c, a);
  /* what the issue asks for is there */
  static const char *const names[] = {"lith_commands_total",
                                      "lith_commands_failed_total",
                                      "lith_write_lock_busy_total",
                                      "lith_queue_capacity",
                                      "lith_wal_bytes",
                                      "lith_checkpoint_seconds_total",
                                      "lith_commit_seconds_total",
                                      "lith_transaction_seconds",
                                      "lithd_read_seconds",
                                      "lithd_read_wait_seconds",
                                      "lithd_build_info",
                                      "lithd_http_responses_total",
                                      "process_resident_memory_bytes",
                                      "process_open_fds",
                                      "process_cpu_seconds_total",
                                      "process_start_time_seconds"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (pm_family(a, names[i]) == NULL)
      fail_msg("no metric %s", names[i]);
  assert_true(pm_value(a, "lith_queue_capacity", "db=\"main\"") == 777);
  assert_true(pm_value(a, "lith_readers", "db=\"main\"") == 3);
  {
    int found = 0;
    for (size_t i = 0; i < a->ns; i++)
      if (strcmp(a->s[i].name, "lithd_build_info") == 0) {
        assert_non_null(strstr(a->s[i].labels, "version=\""));
        assert_true(a->s[i].value == 1);
        found++;
      }
    assert_int_equal(found, 1);
  }
  assert_true(pm_value(a, "process_resident_memory_bytes", "") > 1024 * 1024);
  assert_true(pm_value(a, "process_open_fds", "") >= 5);
  {
    double start = pm_value(a, "process_start_time_seconds", ""), now = (double)time(NULL);
    assert_true(start > now - 120 && start <= now + 1);
  }
  assert_true(pm_value(a, "lithd_http_responses_total", "route=\"/v1/do\",code=\"200\"") == 1);

  /* known requests between two scrapes */
  tl_expect(c, "POST", "/v1/do", NULL, INSERT, 200, NULL);
  tl_expect(c, "POST", "/v1/do", NULL, BIG, 200, NULL);
  tl_expect(c, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"INSERT INTO t(id) VALUES (1)\"}]}", 409,
            NULL);
  tl_expect(c, "POST", "/v1/query", NULL, QUERY, 200, "[[2]]");
  tl_expect(c, "POST", "/v1/query", NULL, "{\"statements\":[{\"sql\":\"SELEC 1\"}]}", 400, "sql_error");
  tl_expect(c, "GET", "/no/such/route", NULL, NULL, 404, NULL);
  tl_expect(c, "GET", "/v1/do", NULL, NULL, 405, NULL);
  tl_expect(c, "POST", "/v1/commands/none", NULL, "{}", 404, NULL);
  scrape(c, b);

  assert_true(pm_value(b, "lith_commands_total", "db=\"main\"") -
                  pm_value(a, "lith_commands_total", "db=\"main\"") ==
              3);
  assert_true(pm_value(b, "lith_commands_failed_total", "db=\"main\"") -
                  pm_value(a, "lith_commands_failed_total", "db=\"main\"") ==
              1);
  assert_true(pm_value(b, "lith_transaction_seconds_count", "db=\"main\"") >
              pm_value(a, "lith_transaction_seconds_count", "db=\"main\""));
  assert_true(pm_value(b, "lith_commit_seconds_total", "db=\"main\"") >
              pm_value(a, "lith_commit_seconds_total", "db=\"main\""));
  /* the WAL in bytes: pages x 4096 (SQLite's default page size) */
  assert_true(pm_value(b, "lith_wal_bytes", "db=\"main\"") ==
              pm_value(b, "lith_wal_pages", "db=\"main\"") * 4096);
  assert_true(pm_value(b, "lith_wal_bytes", "db=\"main\"") >= 300000);
  assert_true(pm_value(b, "lithd_read_seconds_count", "db=\"main\"") -
                  pm_value(a, "lithd_read_seconds_count", "db=\"main\"") ==
              2);
  assert_true(pm_value(b, "lithd_read_wait_seconds_count", "db=\"main\"") ==
              pm_value(b, "lithd_read_seconds_count", "db=\"main\""));
  assert_true(pm_value(b, "lithd_reads_failed_total", "db=\"main\"") -
                  pm_value(a, "lithd_reads_failed_total", "db=\"main\"") ==
              1);
  assert_true(pm_value(b, "lithd_http_responses_total", "route=\"/v1/do\",code=\"200\"") == 3);
  assert_true(pm_value(b, "lithd_http_responses_total", "route=\"/v1/do\",code=\"409\"") == 1);
  assert_true(pm_value(b, "lithd_http_responses_total", "route=\"/v1/query\",code=\"200\"") == 1);
  assert_true(pm_value(b, "lithd_http_responses_total", "route=\"/v1/query\",code=\"400\"") == 1);
  assert_true(pm_value(b, "lithd_http_responses_total", "route=\"/metrics\",code=\"200\"") == 1);
  assert_true(pm_value(b, "lithd_http_responses_total", "route=\"/v1/commands/\",code=\"404\"") == 1);
  /* no route took them: "other", whatever the path */
  assert_true(pm_value(b, "lithd_http_responses_total", "route=\"other\",code=\"404\"") == 1);
  assert_true(pm_value(b, "lithd_http_responses_total", "route=\"other\",code=\"405\"") == 1);
  for (size_t i = 0; i < b->ns; i++)
    if (strcmp(b->s[i].name, "lithd_http_responses_total") == 0)
      assert_null(strstr(b->s[i].labels, "/no/such"));
  assert_true(pm_value(b, "lithd_http_connections_total", "") >
              pm_value(a, "lithd_http_connections_total", ""));
  assert_true(pm_value(b, "process_cpu_seconds_total", "") >= pm_value(a, "process_cpu_seconds_total", ""));
  free(a);
  free(b);
}

/* ---- The request log ------------------------------------------------------------ */

static int exit_code_of(const char *const *args);

/* A few requests of every kind, then SIGTERM: the log is complete. */
static void some_requests(struct tl_child *c) {
  tl_expect(c, "POST", "/v1/do", NULL, CREATE, 200, NULL);
  tl_expect(c, "POST", "/v1/query", NULL, QUERY, 200, NULL);
  tl_expect(c, "GET", "/nope%0a2026-01-01T00:00:00.000Z%20lithd[1]%20error:%20forged", NULL, NULL, 404, NULL);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

static void test_request_log_text(void **state) {
  struct tl_child *c = *state;
  char buf[16384];

  unlink("reqs.log");
  tl_start(c, "reqlog", 0, TL_ARGS("--log", "reqs.log", "--log-level", "debug"));
  some_requests(c);
  read_text("reqs.log", buf, sizeof buf);
  /* METHOD PATH STATUS µs bytes client, one line each */
  static const char *const want[] = {" debug: POST /v1/do 200 ", " debug: POST /v1/query 200 ",
                                     " debug: GET /nope\\x0a2026"};
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    const char *line = strstr(buf, want[i]);
    unsigned long long us = 0, bytes = 0;
    char client[64] = "";
    if (line == NULL)
      fail_msg("no line \"%s\" in:\n%s", want[i], buf);
    const char *f = strstr(line, strstr(want[i], "GET") != NULL ? " 404 " : " 200 ");
    assert_non_null(f);
    assert_int_equal(sscanf(f + 5, "%lluus %lluB %63s", &us, &bytes, client), 3);
    assert_true(us > 0 && us < 10 * 1000 * 1000);
    assert_true(bytes > 10);
    assert_true(strncmp(client, "127.0.0.1:", 10) == 0);
  }
  /* the client's line break stayed inside its line */
  assert_null(strstr(buf, "\n2026-01-01T00:00:00.000Z"));
  assert_int_equal(occurrences(buf, " error: forged"), 1);
  assert_non_null(strstr(buf, " debug: GET /nope\\x0a2026-01-01T00:00:00.000Z lithd[1] error: forged 404 "));
  /* info: no request lines */
  unlink("quiet.log");
  tl_start(c, "reqlogq", 0, TL_ARGS("--log", "quiet.log"));
  some_requests(c);
  read_text("quiet.log", buf, sizeof buf);
  assert_null(strstr(buf, "POST /v1/do"));
  assert_non_null(strstr(buf, " info: started"));
}

static void test_request_log_json(void **state) {
  struct tl_child *c = *state;
  char buf[16384];
  int lines = 0, requests = 0;

  assert_int_equal(exit_code_of(TL_ARGS("--db", "x.db", "--log-format", "xml")), 2);
  unlink("json.log");
  tl_start(c, "jsonlog", 0, TL_ARGS("--log", "json.log", "--log-level", "debug", "--log-format", "json"));
  some_requests(c);
  read_text("json.log", buf, sizeof buf);
  for (char *line = strtok(buf, "\n"); line != NULL; line = strtok(NULL, "\n")) {
    json_error_t err;
    json_t *o = json_loads(line, 0, &err);
    if (o == NULL)
      fail_msg("not JSON (%s): %s", err.text, line);
    assert_true(json_is_object(o));
    assert_true(json_is_string(json_object_get(o, "ts")));
    assert_true(strlen(json_string_value(json_object_get(o, "ts"))) == strlen("2026-12-01T17:06:46.068Z"));
    assert_true(json_is_string(json_object_get(o, "level")));
    assert_true(json_is_string(json_object_get(o, "msg")));
    assert_true(json_is_integer(json_object_get(o, "pid")));
    if (strcmp(json_string_value(json_object_get(o, "msg")), "request") == 0) {
      const char *path = json_string_value(json_object_get(o, "path"));
      assert_string_equal(json_string_value(json_object_get(o, "level")), "debug");
      assert_true(json_is_string(json_object_get(o, "method")));
      assert_non_null(path);
      assert_true(json_integer_value(json_object_get(o, "status")) >= 200);
      assert_true(json_integer_value(json_object_get(o, "us")) > 0);
      assert_true(json_integer_value(json_object_get(o, "bytes")) > 0);
      assert_true(strncmp(json_string_value(json_object_get(o, "client")), "127.0.0.1:", 10) == 0);
      if (strncmp(path, "/nope", 5) == 0) /* the line break, as the client sent it, inside the string */
        assert_true(strncmp(path, "/nope\n2026", 10) == 0 &&
                    json_integer_value(json_object_get(o, "status")) == 404);
      requests++;
    }
    json_decref(o);
    lines++;
  }
  assert_int_equal(requests, 3);
  assert_true(lines >= 6); /* started, three requests, SIGTERM, stopped */
}

/* ---- Checkpoints ------------------------------------------------------------------ */

/* lithd's exit code for `args` (it must refuse them: nothing to serve). */
static int exit_code_of(const char *const *args) {
  const char *argv[16] = {LITHD_PATH};
  size_t n = 1;
  pid_t pid;
  int st = 0;
  posix_spawn_file_actions_t fa;
  while (args[n - 1] != NULL && n < 15) {
    argv[n] = args[n - 1];
    n++;
  }
  argv[n] = NULL;
  assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
  assert_int_equal(posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0), 0);
  assert_int_equal(posix_spawn(&pid, LITHD_PATH, &fa, NULL, (char *const *)argv, environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  assert_int_equal(waitpid(pid, &st, 0), pid);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_checkpoint_pages(void **state) {
  struct tl_child *c = *state;
  struct tl_resp r = {0, NULL, NULL};
  uint64_t checkpoints = 0;
  char buf[4096];

  assert_int_equal(exit_code_of(TL_ARGS("--db", "x.db", "--checkpoint-pages", "0")), 2);
  assert_int_equal(exit_code_of(TL_ARGS("--db", "x.db", "--checkpoint-pages", "many")), 2);

  unlink("ckpt.log");
  tl_start(c, "ckpt", 0, TL_ARGS("--checkpoint-pages", "10", "--log", "ckpt.log"));
  assert_non_null(strstr(c->line, "(db ckpt.db, synchronous normal, checkpoint writer every 10 pages)"));
  tl_expect(c, "POST", "/v1/do", NULL, CREATE, 200, NULL);
  tl_expect(c, "POST", "/v1/do", NULL, BIG, 200, NULL); /* ~75 pages: past 10 */
  for (int i = 0; i < 100 && checkpoints == 0; i++) {
    tl_http(c, "GET", "/v1/stats", NULL, NULL, &r);
    checkpoints = tl_json_u64(r.body, "checkpoints");
    tl_resp_free(&r);
    if (checkpoints == 0)
      sleep_ms(50);
  }
  assert_true(checkpoints >= 1);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  read_text("ckpt.log", buf, sizeof buf);
  assert_non_null(strstr(buf, "started: db ckpt.db, synchronous normal, checkpoint writer every 10 pages, "));

  /* the same from a config file */
  FILE *f = fopen("ckpt.conf", "w");
  assert_non_null(f);
  fputs("checkpoint-pages = 10\nlog-format = json\n", f);
  fclose(f);
  tl_start(c, "ckptconf", 0, TL_ARGS("--config", "ckpt.conf"));
  assert_non_null(strstr(c->line, "checkpoint writer every 10 pages"));
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);

  /* the default, 1000 pages: the same writes start no checkpoint */
  tl_start(c, "ckptdef", 0, TL_ARGS("--synchronous", "full"));
  assert_non_null(strstr(c->line, "synchronous full, checkpoint writer every 1000 pages"));
  tl_expect(c, "POST", "/v1/do", NULL, CREATE, 200, NULL);
  tl_expect(c, "POST", "/v1/do", NULL, BIG, 200, NULL);
  sleep_ms(300);
  tl_http(c, "GET", "/v1/stats", NULL, NULL, &r);
  assert_int_equal(tl_json_u64(r.body, "checkpoints"), 0);
  tl_resp_free(&r);
}

/* The warning's words, as main.c writes them. */
#define WAL_WARNING "--checkpoint external means lithd never checkpoints it"

/* Wait up to ms for `want` to appear in the file; its text into buf. */
static int wait_for_text(const char *path, const char *want, char *buf, size_t cap, int ms) {
  for (int waited = 0;; waited += 50) {
    read_text(path, buf, cap);
    if (strstr(buf, want) != NULL)
      return 1;
    if (waited >= ms)
      return 0;
    sleep_ms(50);
  }
}

static void test_external_wal_warning(void **state) {
  struct tl_child *c = *state;
  char buf[16384];
  sqlite3 *db = NULL;

  unlink("ext.log");
  tl_start(c, "ext", 0, TL_ARGS("--checkpoint", "external", "--checkpoint-pages", "10", "--log", "ext.log"));
  assert_non_null(strstr(c->line, "(db ext.db, synchronous normal, checkpoint external)"));
  tl_expect(c, "POST", "/v1/do", NULL, CREATE, 200, NULL);
  /* below 4 x 10 pages: no warning */
  tl_expect(c, "POST", "/v1/do", NULL, INSERT, 200, NULL);
  sleep_ms(1500);
  read_text("ext.log", buf, sizeof buf);
  assert_null(strstr(buf, WAL_WARNING));
  /* past it: one warning within the watch's period */
  tl_expect(c, "POST", "/v1/do", NULL, BIG, 200, NULL);
  if (!wait_for_text("ext.log", WAL_WARNING, buf, sizeof buf, 5000))
    fail_msg("no warning in:\n%s", buf);
  assert_non_null(strstr(buf, " warn: the WAL holds "));
  assert_non_null(strstr(buf, "past 4 x --checkpoint-pages = 40 pages"));
  /* still past it and growing: no second warning (once per crossing) */
  tl_expect(c, "POST", "/v1/do", NULL, BIG, 200, NULL);
  sleep_ms(2500);
  read_text("ext.log", buf, sizeof buf);
  assert_int_equal(occurrences(buf, WAL_WARNING), 1);
  /* a replicator checkpoints (the WAL starts over), then it grows past the
   * threshold again within the minute: the rate limit holds the warning */
  assert_int_equal(sqlite3_open("ext.db", &db), SQLITE_OK);
  assert_int_equal(sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(db);
  tl_expect(c, "POST", "/v1/do", NULL, INSERT, 200, NULL); /* lith sees the small WAL */
  sleep_ms(1500);
  tl_expect(c, "POST", "/v1/do", NULL, BIG, 200, NULL);
  sleep_ms(2500);
  read_text("ext.log", buf, sizeof buf);
  assert_int_equal(occurrences(buf, WAL_WARNING), 1);
  /* writer mode never warns, however large the WAL */
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* ---- The WAL under readers always reading ---------------------------------------- */

#define WB_WRITERS 16
#define WB_READERS 8
#define WB_ACCOUNTS 1000
#define WB_BALANCE 1000000
#define WB_MAX_WAL (64LL << 20)

struct wb_run {
  struct tl_child *c;
  _Atomic int stop;
  _Atomic long ok, reads, bad;
};

struct wb_arg {
  struct wb_run *r;
  int id;
};

static void *wb_writer(void *arg) {
  struct wb_arg *a = arg;
  struct tl_conn k;
  struct tl_resp r;
  char body[512];
  uint64_t x = 0x9e3779b97f4a7c15ULL * (uint64_t)(a->id + 1);
  tl_conn_init(&k, a->r->c);
  while (!atomic_load(&a->r->stop)) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    int src = (int)(x % WB_ACCOUNTS) + 1, dst = (int)((x >> 20) % WB_ACCOUNTS) + 1;
    snprintf(body, sizeof body,
             "{\"statements\":[{\"sql\":\"UPDATE accounts SET balance = balance - 1 WHERE id = ?\","
             "\"params\":[%d]},{\"sql\":\"UPDATE accounts SET balance = balance + 1 WHERE id = ?\","
             "\"params\":[%d]},{\"sql\":\"INSERT INTO ledger(src, dst) VALUES (?, ?)\",\"params\":[%d,%d]}]}",
             src, dst, src, dst);
    if (tl_conn_request(&k, "POST", "/v1/do", NULL, body, &r, 30000) == TL_OK) {
      atomic_fetch_add(r.status == 200 ? &a->r->ok : &a->r->bad, 1);
      tl_resp_free(&r);
    } else {
      atomic_fetch_add(&a->r->bad, 1);
    }
  }
  tl_conn_close(&k);
  return NULL;
}

/* A read as an app's: the money on one snapshot (always all of it) and
 * the ledger's length (a scan that grows with the run). */
static void *wb_reader(void *arg) {
  struct wb_arg *a = arg;
  struct tl_conn k;
  struct tl_resp r;
  char want[64];
  snprintf(want, sizeof want, "\"rows\":[[%lld,", (long long)WB_ACCOUNTS * WB_BALANCE);
  tl_conn_init(&k, a->r->c);
  while (!atomic_load(&a->r->stop)) {
    if (tl_conn_request(&k, "POST", "/v1/query", NULL,
                        "{\"statements\":[{\"sql\":\"SELECT sum(balance), (SELECT count(*) FROM ledger) "
                        "FROM accounts\"}]}",
                        &r, 30000) == TL_OK) {
      atomic_fetch_add(r.status == 200 && strstr(r.body, want) != NULL ? &a->r->reads : &a->r->bad, 1);
      tl_resp_free(&r);
    } else {
      atomic_fetch_add(&a->r->bad, 1);
    }
  }
  tl_conn_close(&k);
  return NULL;
}

/* 16 keep-alive connections writing transfers while 8 always have a
 * /v1/query running, with lithd's default options: the -wal file stays
 * under 64 MiB all along (without --wal-hold-ms it passes that within
 * seconds), nothing answered is lost while reads are held, and the
 * figures say what happened. */
static void test_wal_bounded_under_http_readers(void **state) {
  struct tl_child *c = *state;
  struct wb_run run = {.c = c};
  struct wb_arg args[WB_WRITERS + WB_READERS];
  pthread_t th[WB_WRITERS + WB_READERS];
  char seed[512];

  tl_start(c, "walb", 0, NULL);
  tl_expect(c, "POST", "/v1/do", NULL,
            "{\"statements\":[{\"sql\":\"CREATE TABLE accounts(id INTEGER PRIMARY KEY, balance INTEGER NOT "
            "NULL)\"},{\"sql\":\"CREATE TABLE ledger(id INTEGER PRIMARY KEY, src INTEGER, dst INTEGER)\"}]}",
            200, NULL);
  snprintf(seed, sizeof seed,
           "{\"statements\":[{\"sql\":\"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE "
           "i < %d) INSERT INTO accounts SELECT i, %d FROM n\"}]}",
           WB_ACCOUNTS, WB_BALANCE);
  tl_expect(c, "POST", "/v1/do", NULL, seed, 200, NULL);
  for (int i = 0; i < WB_WRITERS + WB_READERS; i++) {
    args[i] = (struct wb_arg){&run, i};
    assert_int_equal(pthread_create(&th[i], NULL, i < WB_WRITERS ? wb_writer : wb_reader, &args[i]), 0);
  }
  long long max_wal = 0;
  int seconds = tl_scaled(60) < 10 ? 10 : tl_scaled(60);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int ms = 0; ms < seconds * 1000 && max_wal <= WB_MAX_WAL; ms += 20) {
    struct stat sb;
    if (stat("walb.db-wal", &sb) == 0 && sb.st_size > max_wal)
      max_wal = sb.st_size;
    sleep_ms(20);
  }
  atomic_store(&run.stop, 1);
  for (int i = 0; i < WB_WRITERS + WB_READERS; i++)
    pthread_join(th[i], NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);

  struct tl_resp st;
  tl_http(c, "GET", "/v1/stats", NULL, NULL, &st);
  struct pm *pm = malloc(sizeof *pm); /* large: not on the stack */
  assert_non_null(pm);
  scrape(c, pm);
  print_message("%.1f s: %ld transfers, %ld reads; the -wal file at most %lld bytes; %" PRIu64
                " holds (%" PRIu64 " gave up), %" PRIu64 " reads held (%.1f ms in all), %" PRIu64
                " told too old\n",
                (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
                atomic_load(&run.ok), atomic_load(&run.reads), max_wal, tl_json_u64(st.body, "wal_holds"),
                tl_json_u64(st.body, "wal_holds_gave_up"), tl_json_u64(st.body, "reads_held"),
                pm_value(pm, "lith_reads_held_seconds_total", "db=\"main\"") * 1000,
                tl_json_u64(st.body, "reads_too_old"));
  /* short reads are told only when a busy machine kept them past a hold's
   * bound; /v1/stats and /metrics say the same */
  assert_true(pm_value(pm, "lith_reads_too_old_total", "db=\"main\"") >=
              (double)tl_json_u64(st.body, "reads_too_old"));
  assert_int_equal(atomic_load(&run.bad), 0);
  assert_true(atomic_load(&run.reads) > 0);
  assert_true(max_wal <= WB_MAX_WAL);
  assert_true(tl_json_u64(st.body, "wal_holds") > 0);
  /* nobody outside reads it: a WAL copied whole always started over (a
   * read let in during a hold's copy once made it seem otherwise) */
  assert_int_equal(tl_json_u64(st.body, "wal_restart_blocked"), 0);
  assert_true(pm_value(pm, "lith_wal_holds_total", "db=\"main\"") >=
              (double)tl_json_u64(st.body, "wal_holds"));
  assert_true(pm_value(pm, "lith_wal_file_bytes", "db=\"main\"") <= (double)WB_MAX_WAL);
  assert_true(pm_value(pm, "lith_wal_file_bytes", "db=\"main\"") > 0);
  tl_resp_free(&st);
  free(pm);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  /* nothing answered was lost while reads were held */
  assert_int_equal(tl_sql_int("walb.db", "SELECT count(*) FROM ledger"), atomic_load(&run.ok));
  assert_int_equal(tl_sql_int("walb.db", "SELECT sum(balance) FROM accounts"),
                   (int64_t)WB_ACCOUNTS * WB_BALANCE);
  tl_assert_integrity("walb.db");
}

#define BLOCKED_SAID "a connection outside lithd"

/* A reader lithd does not own keeps the WAL from starting over: lithd
 * says so in its log, once, and in its metrics. */
static void test_wal_outside_reader_said_once(void **state) {
  struct tl_child *c = *state;
  char buf[16384];
  sqlite3 *db = NULL;
  sqlite3_stmt *q = NULL;

  unlink("outside.log");
  tl_start(c, "outside", 0, TL_ARGS("--checkpoint-pages", "10", "--log", "outside.log"));
  tl_expect(c, "POST", "/v1/do", NULL, CREATE, 200, NULL);
  tl_expect(c, "POST", "/v1/do", NULL, INSERT, 200, NULL);
  assert_int_equal(sqlite3_open("outside.db", &db), SQLITE_OK);
  assert_int_equal(sqlite3_exec(db, "BEGIN", NULL, NULL, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_prepare_v2(db, "SELECT count(*) FROM t", -1, &q, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(q), SQLITE_ROW); /* its snapshot holds the WAL */
  sqlite3_finalize(q);
  for (int i = 0; i < 4; i++) /* ~300 pages: 30 x --checkpoint-pages */
    tl_expect(c, "POST", "/v1/do", NULL, BIG, 200, NULL);
  if (!wait_for_text("outside.log", BLOCKED_SAID, buf, sizeof buf, 5000))
    fail_msg("nothing said in:\n%s", buf);
  assert_non_null(strstr(buf, " warn: the WAL was wholly checkpointed"));
  for (int i = 0; i < 4; i++)
    tl_expect(c, "POST", "/v1/do", NULL, BIG, 200, NULL);
  sleep_ms(2500);
  read_text("outside.log", buf, sizeof buf);
  assert_int_equal(occurrences(buf, BLOCKED_SAID), 1);
  struct pm *pm = malloc(sizeof *pm);
  assert_non_null(pm);
  scrape(c, pm);
  assert_true(pm_value(pm, "lith_wal_restart_blocked_total", "db=\"main\"") >= 1);
  free(pm);
  assert_int_equal(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(db);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* lithd's own backups read the WAL through a connection of their own: the
 * hold knows them (they wait behind it, and no hold begins while one runs),
 * so backups under load are never taken for a reader outside lithd
 * (issue 32 saw the log say so while only /v1/backup ran). */
struct bk_writer {
  struct tl_child *c;
  _Atomic int stop;
  _Atomic long ok;
};

static void *bk_write(void *arg) {
  struct bk_writer *w = arg;
  struct tl_conn k;
  struct tl_resp r;
  tl_conn_init(&k, w->c);
  while (!atomic_load(&w->stop)) {
    if (tl_conn_request(&k, "POST", "/v1/do", NULL,
                        "{\"statements\":[{\"sql\":\"INSERT INTO t(v) VALUES (randomblob(2000))\"}]}", &r,
                        30000) == TL_OK) {
      if (r.status == 200)
        atomic_fetch_add(&w->ok, 1);
      tl_resp_free(&r);
    }
  }
  tl_conn_close(&k);
  return NULL;
}

static void test_backups_are_not_outside_readers(void **state) {
  struct tl_child *c = *state;
  char buf[16384];
  unlink("bkown.log");
  tl_start(c, "bkown", 0, TL_ARGS("--checkpoint-pages", "10", "--log", "bkown.log"));
  tl_expect(c, "POST", "/v1/do", NULL, CREATE, 200, NULL);
  struct bk_writer w = {.c = c};
  pthread_t th[2];
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_create(&th[i], NULL, bk_write, &w), 0);
  int backups = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do {
    struct tl_resp r;
    tl_http(c, "GET", "/v1/backup", NULL, NULL, &r);
    backups += r.status == 200;
    tl_resp_free(&r);
    clock_gettime(CLOCK_MONOTONIC, &t1);
  } while (t1.tv_sec - t0.tv_sec < 5);
  atomic_store(&w.stop, 1);
  for (int i = 0; i < 2; i++)
    pthread_join(th[i], NULL);
  struct tl_resp st;
  tl_http(c, "GET", "/v1/stats", NULL, NULL, &st);
  print_message("%d backups beside %ld writes: %" PRIu64 " holds, %" PRIu64 " restarts blocked\n", backups,
                atomic_load(&w.ok), tl_json_u64(st.body, "wal_holds"),
                tl_json_u64(st.body, "wal_restart_blocked"));
  assert_true(backups > 0 && atomic_load(&w.ok) > 0);
  assert_true(tl_json_u64(st.body, "wal_holds") > 0);
  assert_int_equal(tl_json_u64(st.body, "wal_restart_blocked"), 0);
  tl_resp_free(&st);
  read_text("bkown.log", buf, sizeof buf);
  assert_int_equal(occurrences(buf, BLOCKED_SAID), 0);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* ---- The startup line ------------------------------------------------------------- */

static void test_startup_line_token_path(void **state) {
  struct tl_child *c = *state;
  char want[PATH_MAX + 64], *cwd = getcwd(NULL, 0);
  FILE *f = fopen("tok file.txt", "w");
  assert_non_null(cwd);
  assert_non_null(f);
  fputs("tok-123\n", f);
  fclose(f);
  tl_start(c, "tokline", 0, TL_ARGS("--token-file", "tok file.txt"));
  /* the real file, absolute and quoted for the shell: the example runs as printed */
  snprintf(want, sizeof want,
           "curl -s -H \"Authorization: Bearer $(cat '%s/tok file.txt')\" http://127.0.0.1:", cwd);
  if (strstr(c->line, want) == NULL)
    fail_msg("want \"%s\" in: %s", want, c->line);
  assert_null(strstr(c->line, "TOKENFILE"));
  free(cwd);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_metrics_parse_and_move, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_request_log_text, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_request_log_json, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_checkpoint_pages, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_external_wal_warning, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_wal_outside_reader_said_once, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_backups_are_not_outside_readers, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_wal_bounded_under_http_readers, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_startup_line_token_path, tl_setup, tl_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
