/*
 * test_lithd_leader — who leads, visibly (issue 34): lithd --dqlite in front
 * of three lith-node processes (dqlite/test/nodes.h), its log in a file.
 *   - at start, /metrics and /v1/stats name the leader (the writer's watch
 *     connects before any write) and the log says "dqlite leader: ...";
 *   - the leader SIGKILLed while nothing is written: /metrics names the new
 *     leader with lith_dqlite_failovers_total one more, and the log has the
 *     failover line ("no write waited"), within 1 s of the new leader's
 *     election, measured from the moment a node first names itself leader
 *     (the test asks the nodes' LEADER every few ms);
 *   - the same under write load (4 clients writing): the failover line says
 *     how long writes waited, /v1/stats the last failover's wait;
 *   - each kill: one "lost" line and one failover line, never a line per
 *     retry of the search;
 *   - the exposition of /metrics on --dqlite is well formed (HELP and TYPE
 *     before a metric's samples, one block per metric);
 *   - no majority left (two nodes of three killed, nothing written): the
 *     lost leader once, leader_known 0 and no leader_info in /metrics, a
 *     null leader in /v1/stats, and one error line once
 *     --dqlite-failover-ms passed (not one per round of the search); the
 *     nodes back: a failover line and the leader known again;
 *   - a fresh lithd whose first write meets a leader killed a moment
 *     before (before the watch's next look) answers it and lives: its
 *     first statement's vetting read the schema on the dead connection and
 *     freed rows it had never made (SIGSEGV, found by this work).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "child.h"
#include "client.h"
#include "nodes.h"

/* Within this of a node first naming itself leader, lithd must show it. */
#define SHOWN_WITHIN_MS 1000
#define NWRITERS 4

static t_node nodes[3];
static char all[256];
static struct tl_child lithd;

/* ---- What lithd shows ---- */

/* /metrics' leader and failovers: 0, or -1 when the series are not there
 * (no leader known). Never asserts (polled). */
static int shown(char *leader, size_t cap, uint64_t *id, uint64_t *failovers) {
  struct tl_resp r;
  static const char info[] = "\nlith_dqlite_leader_info{db=\"main\",address=\"";
  static const char fo[] = "\nlith_dqlite_failovers_total{db=\"main\"} ";
  tl_http(&lithd, "GET", "/metrics", NULL, NULL, &r);
  const char *p = r.status == 200 ? strstr(r.body, info) : NULL;
  const char *f = r.status == 200 ? strstr(r.body, fo) : NULL;
  int rc = -1;
  if (p != NULL && f != NULL) {
    p += sizeof info - 1;
    size_t n = strcspn(p, "\"");
    snprintf(leader, cap, "%.*s", (int)n, p);
    const char *q = strstr(p, "id=\"");
    *id = q != NULL ? strtoull(q + 4, NULL, 10) : 0;
    *failovers = strtoull(f + sizeof fo - 1, NULL, 10);
    rc = 0;
  }
  tl_resp_free(&r);
  return rc;
}

/* The log so far (lithd --log lithd.log). */
static void read_log(char *buf, size_t cap) {
  FILE *f = fopen("lithd.log", "r");
  size_t n = f != NULL ? fread(buf, 1, cap - 1, f) : 0;
  buf[n] = '\0';
  if (f != NULL)
    fclose(f);
}

static int count(const char *text, const char *what) {
  int n = 0;
  for (const char *p = strstr(text, what); p != NULL; p = strstr(p + 1, what))
    n++;
  return n;
}

/* Whether the node at address names itself leader (asked now). */
static int names_itself(const char *address) {
  lith__dq_conn *c = lith__dq_new(200);
  uint64_t id;
  const char *addr;
  int yes = c != NULL && lith__dq_connect(c, address) == LITH_DQ_OK &&
            lith__dq_leader(c, &id, &addr) == LITH_DQ_OK && strcmp(addr, address) == 0;
  lith__dq_close(c);
  return yes;
}

/* ---- Writers ---- */

static atomic_int stop_writing;
static atomic_int answered[600];

static void *writer_main(void *arg) {
  struct tl_conn k;
  (void)arg;
  tl_conn_init(&k, &lithd);
  while (!atomic_load(&stop_writing)) {
    struct tl_resp r;
    if (tl_conn_request(&k, "POST", "/v1/do", NULL,
                        "{\"statements\":[{\"sql\":\"INSERT INTO t(x) VALUES (1)\"}]}", &r, 30000) != TL_OK) {
      t_sleep_ms(10);
      continue;
    }
    if (r.status > 0 && r.status < 600)
      atomic_fetch_add(&answered[r.status], 1);
    tl_resp_free(&r);
  }
  tl_conn_close(&k);
  return NULL;
}

/* ---- One kill, watched ---- */

typedef struct seen {
  int64_t t_kill, t_elect, t_metrics, t_log;
  char elected[64], metrics_leader[64];
  uint64_t metrics_id;
} seen;

/* Kill the leader (SIGKILL) and watch, every few ms, the nodes (the first
 * to name itself leader: the election), /metrics (a leader other than the
 * killed one, failovers one more) and the log (the failover line from the
 * killed one), for at most 15 s. */
static void kill_and_watch(seen *s, const char *line_kind) {
  char old[64], log[65536], want[256];
  uint64_t old_id, f0, id, fo;
  memset(s, 0, sizeof *s);
  assert_int_equal(shown(old, sizeof old, &old_id, &f0), 0);
  int li = -1;
  for (int i = 0; i < 3; i++)
    if (strcmp(nodes[i].address, old) == 0)
      li = i;
  if (li < 0) {
    fail_msg("the leader %s is none of the nodes", old);
    return;
  }
  assert_int_equal(old_id, (uint64_t)nodes[li].id);
  read_log(log, sizeof log);
  int lost0 = count(log, "lost:"), failover0 = count(log, "dqlite failover:");
  snprintf(want, sizeof want, "dqlite failover: leader %s (id %d) -> ", old, nodes[li].id);
  s->t_kill = t_ms_now();
  assert_int_equal(t_node_stop(&nodes[li], SIGKILL, 5000), 128 + SIGKILL);
  while (t_ms_now() - s->t_kill < 15000 && (s->t_elect == 0 || s->t_metrics == 0 || s->t_log == 0)) {
    for (int i = 0; i < 3 && s->t_elect == 0; i++)
      if (i != li && names_itself(nodes[i].address)) {
        s->t_elect = t_ms_now();
        snprintf(s->elected, sizeof s->elected, "%s", nodes[i].address);
      }
    if (s->t_metrics == 0 && shown(s->metrics_leader, sizeof s->metrics_leader, &id, &fo) == 0 &&
        strcmp(s->metrics_leader, old) != 0 && fo == f0 + 1) {
      s->t_metrics = t_ms_now();
      s->metrics_id = id;
    }
    if (s->t_log == 0) {
      read_log(log, sizeof log);
      if (count(log, want) > 0)
        s->t_log = t_ms_now();
    }
    t_sleep_ms(5);
  }
  print_message(
      "leader %s killed: a node named itself leader after %lld ms; /metrics showed %s %lld ms and the "
      "log its failover line %lld ms after that\n",
      old, (long long)(s->t_elect - s->t_kill), s->metrics_leader, (long long)(s->t_metrics - s->t_elect),
      (long long)(s->t_log - s->t_elect));
  assert_true(s->t_elect > 0);
  assert_true(s->t_metrics > 0);
  assert_true(s->t_log > 0);
  assert_string_equal(s->metrics_leader, s->elected);
  assert_true(s->t_metrics - s->t_elect < SHOWN_WITHIN_MS);
  assert_true(s->t_log - s->t_elect < SHOWN_WITHIN_MS);
  /* the line names both, and what writes waited; one loss, one failover:
   * never a line per retry */
  read_log(log, sizeof log);
  const char *line = strstr(log, want);
  assert_non_null(line);
  char tail[128];
  snprintf(tail, sizeof tail, "%s (id %" PRIu64 "); %s", s->elected, s->metrics_id, line_kind);
  if (strncmp(line + strlen(want), tail, strlen(tail)) != 0)
    fail_msg("the failover line: %.*s (wanted ...%s)", (int)strcspn(line, "\n"), line, tail);
  t_sleep_ms(500); /* nothing more comes */
  read_log(log, sizeof log);
  assert_int_equal(count(log, "lost:"), lost0 + 1);
  assert_int_equal(count(log, "dqlite failover:"), failover0 + 1);
}

/* The cluster whole again, and lithd naming a leader. */
static void whole_again(void) {
  char l[64];
  uint64_t id, fo;
  assert_int_equal(t_nodes_start_missing(nodes, 3, all, 15000), 0);
  int64_t t0 = t_ms_now();
  while (shown(l, sizeof l, &id, &fo) != 0) {
    assert_true(t_ms_now() - t0 < 10000);
    t_sleep_ms(20);
  }
}

/* ---- Tests ---- */

/* At start: known before any write; /v1/stats and /metrics say it; the log
 * has the first leader; the exposition is well formed. */
static void test_start(void **state) {
  (void)state;
  char l[64], log[65536], line[160];
  uint64_t id, fo;
  struct tl_resp r;
  int64_t t0 = t_ms_now();
  while (shown(l, sizeof l, &id, &fo) != 0) { /* the watch's first round */
    assert_true(t_ms_now() - t0 < 5000);
    t_sleep_ms(20);
  }
  int li = t_leader_index(nodes, 3, all);
  assert_true(li >= 0);
  assert_string_equal(l, nodes[li].address);
  assert_int_equal(id, (uint64_t)nodes[li].id);
  assert_int_equal(fo, 0);
  tl_http(&lithd, "GET", "/v1/stats", NULL, NULL, &r);
  assert_int_equal(r.status, 200);
  snprintf(line, sizeof line, "\"leader\":\"%s\",\"leader_id\":%d,", l, nodes[li].id);
  assert_non_null(strstr(r.body, line));
  assert_non_null(strstr(r.body, "\"failovers\":0,"));
  assert_non_null(strstr(r.body, "\"failover_wait_ms\":0,"));
  tl_resp_free(&r);
  tl_http(&lithd, "GET", "/metrics", NULL, NULL, &r);
  assert_int_equal(r.status, 200);
  assert_non_null(strstr(r.body, "\nlith_dqlite_leader_known{db=\"main\"} 1\n"));
  assert_non_null(strstr(r.body, "\nlith_dqlite_reruns_total{db=\"main\"} "));
  assert_non_null(strstr(r.body, "\nlith_dqlite_last_failover_wait_seconds{db=\"main\"} 0"));
  assert_non_null(strstr(r.body, "# TYPE lith_dqlite_failovers_total counter\n"));
  /* one HELP and TYPE per metric, before its samples, its samples together */
  const char *p = r.body;
  char last[128] = "", typed[128] = "";
  while (*p) {
    size_t n = strcspn(p, "\n");
    char name[128];
    if (strncmp(p, "# TYPE ", 7) == 0) {
      snprintf(typed, sizeof typed, "%.*s", (int)strcspn(p + 7, " "), p + 7);
    } else if (*p != '#' && n > 0) {
      snprintf(name, sizeof name, "%.*s", (int)strcspn(p, "{ "), p);
      size_t t = strlen(typed);
      if (strncmp(name, typed, t) != 0 || (name[t] != '\0' && strcmp(name + t, "_bucket") != 0 &&
                                           strcmp(name + t, "_sum") != 0 && strcmp(name + t, "_count") != 0))
        fail_msg("sample %s outside its metric's block (%s)", name, typed);
      snprintf(last, sizeof last, "%s", name);
    }
    p += n + (p[n] == '\n');
  }
  assert_true(last[0] != '\0');
  tl_resp_free(&r);
  read_log(log, sizeof log);
  snprintf(line, sizeof line, "dqlite leader: %s (id %d)\n", l, nodes[li].id);
  assert_non_null(strstr(log, line));
}

/* No write goes: the watch sees the kill. */
static void test_killed_idle(void **state) {
  (void)state;
  seen s;
  whole_again();
  kill_and_watch(&s, "no write waited (the new leader was ready ");
  whole_again();
}

/* Writes go: the writer sees it, and says how long they waited. */
static void test_killed_under_load(void **state) {
  (void)state;
  seen s;
  pthread_t th[NWRITERS];
  struct tl_resp r;
  whole_again();
  atomic_store(&stop_writing, 0);
  for (int i = 0; i < 600; i++)
    atomic_store(&answered[i], 0);
  for (int i = 0; i < NWRITERS; i++)
    assert_int_equal(pthread_create(&th[i], NULL, writer_main, NULL), 0);
  t_sleep_ms(300);
  kill_and_watch(&s, "writes waited ");
  atomic_store(&stop_writing, 1);
  for (int i = 0; i < NWRITERS; i++)
    pthread_join(th[i], NULL);
  print_message("writes: %d answered 200, %d 503\n", atomic_load(&answered[200]),
                atomic_load(&answered[503]));
  assert_true(atomic_load(&answered[200]) > 0);
  tl_http(&lithd, "GET", "/v1/stats", NULL, NULL, &r);
  assert_int_equal(r.status, 200);
  assert_true(tl_json_u64(r.body, "failover_wait_ms") > 0);
  char want[96];
  snprintf(want, sizeof want, "\"leader\":\"%s\"", s.elected);
  assert_non_null(strstr(r.body, want));
  tl_resp_free(&r);
  whole_again();
}

/* A fresh lithd (its vetting connection not made yet), the leader killed,
 * and at once a write: answered (after the failover, or 503 not
 * committed), and lithd still serves. */
static void test_first_write_after_kill(void **state) {
  (void)state;
  struct tl_child fresh;
  struct tl_resp r;
  char l[64];
  uint64_t id, fo;
  whole_again();
  assert_int_equal(shown(l, sizeof l, &id, &fo), 0);
  const char *extra[] = {"--dqlite", all, "--dqlite-failover-ms", "5000", NULL};
  tl_start(&fresh, "fresh", TL_NO_DB, extra);
  int64_t t0 = t_ms_now();
  for (;;) { /* its watch has connected */
    tl_http(&fresh, "GET", "/v1/stats", NULL, NULL, &r);
    int known = strstr(r.body, "\"leader\":\"") != NULL;
    tl_resp_free(&r);
    if (known)
      break;
    assert_true(t_ms_now() - t0 < 5000);
    t_sleep_ms(10);
  }
  int li = t_leader_index(nodes, 3, all);
  assert_true(li >= 0);
  assert_int_equal(t_node_stop(&nodes[li], SIGKILL, 5000), 128 + SIGKILL);
  tl_http(&fresh, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"INSERT INTO t(x) VALUES (2)\"}]}", &r);
  print_message("the first write after the kill: %d %s\n", r.status, r.body);
  assert_true(r.status == 200 || r.status == 503);
  tl_resp_free(&r);
  tl_expect(&fresh, "GET", "/healthz", NULL, NULL, 200, NULL);
  assert_int_equal(tl_stop(&fresh, SIGTERM, 10000), 0);
  whole_again();
}

/* The log file of another lithd. */
static void read_file(const char *path, char *buf, size_t cap) {
  FILE *f = fopen(path, "r");
  size_t n = f != NULL ? fread(buf, 1, cap - 1, f) : 0;
  buf[n] = '\0';
  if (f != NULL)
    fclose(f);
}

static void test_no_majority(void **state) {
  (void)state;
  struct tl_child q;
  struct tl_resp r;
  static char log[65536];
  whole_again();
  remove("quiet.log");
  const char *extra[] = {"--dqlite", all, "--dqlite-failover-ms", "1000", "--log", "quiet.log", NULL};
  tl_start(&q, "quiet", TL_NO_DB, extra);
  int64_t t0 = t_ms_now();
  do { /* its watch has connected */
    assert_true(t_ms_now() - t0 < 5000);
    t_sleep_ms(10);
    read_file("quiet.log", log, sizeof log);
  } while (strstr(log, "dqlite leader: ") == NULL);
  int li = t_leader_index(nodes, 3, all);
  assert_true(li >= 0);
  for (int i = 0; i < 3; i++)
    if (i != (li + 1) % 3)
      assert_int_equal(t_node_stop(&nodes[i], SIGKILL, 5000), 128 + SIGKILL);
  t0 = t_ms_now();
  while (strstr(log, "no dqlite leader") == NULL) {
    assert_true(t_ms_now() - t0 < 5000);
    t_sleep_ms(20);
    read_file("quiet.log", log, sizeof log);
  }
  print_message("no majority: the error line %lld ms after the kills\n", (long long)(t_ms_now() - t0));
  t_sleep_ms(1000); /* more rounds: no more lines */
  read_file("quiet.log", log, sizeof log);
  assert_int_equal(count(log, "lost:"), 1);
  assert_int_equal(count(log, "no dqlite leader"), 1);
  assert_int_equal(count(log, "dqlite failover"), 0);
  tl_http(&q, "GET", "/metrics", NULL, NULL, &r);
  assert_int_equal(r.status, 200);
  assert_non_null(strstr(r.body, "\nlith_dqlite_leader_known{db=\"main\"} 0\n"));
  assert_null(strstr(r.body, "\nlith_dqlite_leader_info{"));
  assert_non_null(strstr(r.body, "\nlith_dqlite_failovers_total{db=\"main\"} 1\n"));
  tl_resp_free(&r);
  tl_expect(&q, "GET", "/v1/stats", NULL, NULL, 200, "\"leader\":null,\"leader_id\":0,");
  /* back: the failover is told, the leader known */
  assert_int_equal(t_nodes_start_missing(nodes, 3, all, 15000), 0);
  t0 = t_ms_now();
  while (strstr(log, "dqlite failover") == NULL) {
    assert_true(t_ms_now() - t0 < 10000);
    t_sleep_ms(20);
    read_file("quiet.log", log, sizeof log);
  }
  tl_expect(&q, "GET", "/metrics", NULL, NULL, 200, "\nlith_dqlite_leader_known{db=\"main\"} 1\n");
  assert_int_equal(tl_stop(&q, SIGTERM, 10000), 0);
}

/* ---- Setup ---- */

static int group_setup(void **state) {
  (void)state;
  char join2[160];
  signal(SIGPIPE, SIG_IGN);
  for (int i = 0; i < 3; i++)
    t_node_init(&nodes[i], i + 1);
  snprintf(all, sizeof all, "%s,%s,%s", nodes[0].address, nodes[1].address, nodes[2].address);
  snprintf(join2, sizeof join2, "%s,%s", nodes[0].address, nodes[1].address);
  if (t_node_start(&nodes[0], NULL, 10000) != 0 || t_node_start(&nodes[1], nodes[0].address, 15000) != 0 ||
      t_node_start(&nodes[2], join2, 15000) != 0)
    return -1;
  FILE *f = fopen("schema.sql", "w");
  if (f == NULL || fputs("CREATE TABLE t(x);\n", f) < 0 || fclose(f) != 0)
    return -1;
  remove("lithd.log");
  const char *extra[] = {"--dqlite", all,     "--schema",  "schema.sql", "--dqlite-failover-ms",
                         "5000",     "--log", "lithd.log", NULL};
  tl_start(&lithd, "lithd", TL_NO_DB, extra);
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  if (lithd.pid > 0)
    tl_stop(&lithd, SIGKILL, 5000);
  for (int i = 0; i < 3; i++)
    if (nodes[i].pid > 0)
      t_node_stop(&nodes[i], SIGKILL, 2000);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_start),
      cmocka_unit_test(test_killed_idle),
      cmocka_unit_test(test_killed_under_load),
      cmocka_unit_test(test_first_write_after_kill),
      cmocka_unit_test(test_no_majority),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
