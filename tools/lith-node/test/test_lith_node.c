/*
 * tools/lith-node: three nodes on loopback (spawned processes).
 *   - node 1 bootstraps alone, nodes 2 and 3 join through --join (ADD, then
 *     ASSIGN voter through the leader): CLUSTER, asked of the leader, lists
 *     the three as voters with their addresses, and each node's LEADER
 *     names the same leader;
 *   - a follower opens a database but answers a read and a write with
 *     FAILURE SQLITE_IOERR_NOT_LEADER;
 *   - a table written on the leader; a follower stopped with SIGTERM exits
 *     0, and restarted with the same --dir and --join it serves again as a
 *     voter (not added twice: still three members); a write made while it
 *     was down and one made after are both read through the leader, and
 *     the restarted node's LEADER names the leader;
 *   - every node exits 0 on SIGTERM;
 *   - a slow statement does not take the leader down (issue 20): a second
 *     cluster, Raft latency 100 ms (election timeout 1.5 s), --max-run-ms
 *     600: a recursive CTE that would run for minutes, sent to the leader,
 *     fails SQLITE_INTERRUPT after ~600 ms, while a writer committing
 *     inserts the whole time sees no failover, the leader stays the same
 *     node and no write waits longer than --max-run-ms + 1 s; in a writer
 *     command the same statement fails that command alone (SQLITE_INTERRUPT)
 *     and its batch's neighbours commit; --max-program-ops refuses a
 *     statement compiling to more (SQLITE_NOMEM, SQLite's code for it), and
 *     the next one runs;
 *   - --status (issue 34) on a fresh cluster: a line per node (its id,
 *     role, leader or follower), the leader, the members with their roles,
 *     exit 0; the same as JSON with --json; a node that does not answer is
 *     said so and the others still answer (exit 0). The leader SIGKILLed:
 *     the node elected prints "id N leads" and --status names it (the dead
 *     one "no answer"); a follower killed too: the last node prints "id N
 *     no longer leads" once it knows no leader, and --status exits 2
 *     ("leader: none"); no node answering: exit 1. --help says it; --json
 *     without --status, --status with --id: exit 1;
 *   - bad arguments (no --id; a bound out of range) exit 1.
 */
#include <semaphore.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>

#include "client.h"
#include "nodes.h"
#include "writer.h"

static t_node nodes[3];

#define TL_ARGV(...) ((const char *const[]){__VA_ARGS__, NULL})

static void exec_ok(lith__dq_conn *c, uint32_t db, const char *sql) {
  int rc = lith__dq_exec_sql(c, db, sql, NULL, 0, NULL);
  if (rc != LITH_DQ_OK)
    fail_msg("%s: %s: %s", sql, lith__dq_rc_str(rc), lith__dq_errmsg(c));
}

static int64_t query_int(lith__dq_conn *c, uint32_t db, const char *sql) {
  char err[512];
  int64_t v = 0;
  if (t_query_int(c, db, sql, &v, err, sizeof err) != 0)
    fail_msg("%s", err);
  return v;
}

/* "a,b,c": every node's address. */
static void all_addresses(char *buf, size_t n) {
  snprintf(buf, n, "%s,%s,%s", nodes[0].address, nodes[1].address, nodes[2].address);
}

/* The leader's address as node i sees it. */
static void leader_of(int i, char *buf, size_t n) {
  lith__dq_conn *c = lith__dq_new(2000);
  uint64_t id;
  const char *addr;
  assert_int_equal(lith__dq_connect(c, nodes[i].address), LITH_DQ_OK);
  assert_int_equal(lith__dq_leader(c, &id, &addr), LITH_DQ_OK);
  snprintf(buf, n, "%s", addr);
  lith__dq_close(c);
}

static void assert_three_voters(lith__dq_conn *c) {
  lith__dq_servers s;
  assert_int_equal(lith__dq_cluster(c, &s), LITH_DQ_OK);
  assert_int_equal(s.n, 3);
  for (int i = 0; i < 3; i++) {
    int found = 0;
    for (size_t j = 0; j < s.n; j++) {
      if (s.v[j].id == (uint64_t)nodes[i].id) {
        found = 1;
        assert_string_equal(s.v[j].address, nodes[i].address);
        assert_int_equal(s.v[j].role, LITH_DQ_VOTER);
      }
    }
    assert_true(found);
  }
  free(s.v);
}

static void test_three_nodes(void **state) {
  (void)state;
  char all[256], join2[128], leader[64], seen[64];
  uint32_t db;
  for (int i = 0; i < 3; i++)
    t_node_init(&nodes[i], i + 1);
  snprintf(join2, sizeof join2, "%s,%s", nodes[0].address, nodes[1].address);
  assert_int_equal(t_node_start(&nodes[0], NULL, 10000), 0);
  assert_non_null(strstr(nodes[0].line, "serving on"));
  assert_int_equal(t_node_start(&nodes[1], nodes[0].address, 15000), 0);
  assert_int_equal(t_node_start(&nodes[2], join2, 15000), 0);
  all_addresses(all, sizeof all);

  lith__dq_conn *c = lith__dq_new(5000);
  assert_int_equal(lith__dq_connect_leader(c, all, 5000), LITH_DQ_OK);
  snprintf(leader, sizeof leader, "%s", lith__dq_address(c));
  assert_three_voters(c);
  for (int i = 0; i < 3; i++) {
    leader_of(i, seen, sizeof seen);
    assert_string_equal(seen, leader);
  }

  assert_int_equal(lith__dq_open(c, "ha.db", &db), LITH_DQ_OK);
  exec_ok(c, db, "CREATE TABLE w(n INTEGER PRIMARY KEY, who TEXT)");
  exec_ok(c, db, "INSERT INTO w VALUES (1, 'before')");

  /* A follower opens a database but serves neither reads nor writes. */
  int f = strcmp(nodes[0].address, leader) != 0 ? 0 : 1;
  uint32_t fdb;
  lith__dq_rows r;
  lith__dq_rows_init(&r);
  lith__dq_conn *fc = lith__dq_new(5000);
  assert_int_equal(lith__dq_connect(fc, nodes[f].address), LITH_DQ_OK);
  assert_int_equal(lith__dq_open(fc, "ha.db", &fdb), LITH_DQ_OK);
  assert_int_equal(lith__dq_query_sql(fc, fdb, "SELECT count(*) FROM w", NULL, 0, &r), LITH_DQ_FAILURE);
  assert_int_equal(lith__dq_errcode(fc), LITH_DQ_IOERR_NOT_LEADER);
  assert_int_equal(lith__dq_exec_sql(fc, fdb, "INSERT INTO w VALUES (9, 'no')", NULL, 0, NULL),
                   LITH_DQ_FAILURE);
  assert_int_equal(lith__dq_errcode(fc), LITH_DQ_IOERR_NOT_LEADER);
  lith__dq_close(fc);

  /* Restart that follower. */
  assert_int_equal(t_node_stop(&nodes[f], SIGTERM, 5000), 0);
  exec_ok(c, db, "INSERT INTO w VALUES (2, 'while down')");
  assert_int_equal(t_node_start(&nodes[f], all, 15000), 0);
  exec_ok(c, db, "INSERT INTO w VALUES (3, 'after')");
  assert_int_equal(query_int(c, db, "SELECT count(*) FROM w"), 3);
  assert_int_equal(query_int(c, db, "SELECT sum(n) FROM w"), 6);
  assert_three_voters(c);
  leader_of(f, seen, sizeof seen);
  assert_string_equal(seen, leader);
  lith__dq_close(c);

  for (int i = 0; i < 3; i++)
    assert_int_equal(t_node_stop(&nodes[i], SIGTERM, 10000), 0);
}

/* ---- A slow statement (--max-run-ms) ---- */

#define SLOW_RUN_MS 600
#define SLOW_LATENCY_MS 100
#define ENDLESS_CTE                                                                                       \
  "WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM k WHERE n < 4000000000) SELECT count(*) " \
  "FROM k"

static int cmd_sql(lith__dqw_tx *tx, void *arg) { return lith__dqw_exec(tx, arg, NULL, 0, NULL); }

static int cmd_insert(lith__dqw_tx *tx, void *arg) {
  lith__dq_value v = lith__dq_int(*(int64_t *)arg);
  return lith__dqw_exec(tx, "INSERT INTO w(n) VALUES (?)", &v, 1, NULL);
}

typedef struct writes {
  lith__dqw *w;
  atomic_int stop;
  int n, failed;
  int64_t worst_ms; /* the longest a command waited */
} writes;

static void *write_loop(void *arg) {
  writes *wr = arg;
  for (int64_t k = 1000; !atomic_load(&wr->stop); k++) {
    lith__dqw_err err;
    int64_t t0 = t_ms_now();
    int rc = lith__dqw_do(wr->w, cmd_insert, &k, &err);
    int64_t took = t_ms_now() - t0;
    if (took > wr->worst_ms)
      wr->worst_ms = took;
    if (rc == LITH_DQW_OK)
      wr->n++;
    else if (wr->failed++ < 3)
      fprintf(stderr, "write %lld: %s: %s\n", (long long)k, lith__dqw_rc_str(rc), err.errmsg);
    t_sleep_ms(5);
  }
  return NULL;
}

typedef struct areq {
  lith__dqw_req req;
  sem_t *sem;
} areq;

static void adone(lith__dqw_req *r) { sem_post(((areq *)r)->sem); }

/* Holds the writer a while, so that what is submitted meanwhile shares the
 * next batch. */
static int cmd_gate(lith__dqw_tx *tx, void *arg) {
  int64_t one;
  (void)arg;
  t_sleep_ms(300);
  return lith__dqw_query_int(tx, &one, "SELECT 1", NULL, 0);
}

static void test_slow_statement(void **state) {
  (void)state;
  static const char *const extra[] = {"--max-run-ms", "600", "--max-program-ops", "5000", NULL};
  char all[256], join2[128];
  for (int i = 0; i < 3; i++) {
    t_node_init(&nodes[i], i + 1);
    snprintf(nodes[i].dir, sizeof nodes[i].dir, "slow%d", i + 1);
    nodes[i].latency_ms = SLOW_LATENCY_MS;
    nodes[i].extra = extra;
  }
  snprintf(join2, sizeof join2, "%s,%s", nodes[0].address, nodes[1].address);
  assert_int_equal(t_node_start(&nodes[0], NULL, 20000), 0);
  assert_int_equal(t_node_start(&nodes[1], nodes[0].address, 20000), 0);
  assert_int_equal(t_node_start(&nodes[2], join2, 20000), 0);
  all_addresses(all, sizeof all);

  lith__dqw_options o = {.addresses = all, .database = "slow.db", .request_timeout_ms = 3000};
  lith__dqw *w = NULL;
  lith__dqw_err err;
  assert_int_equal(lith__dqw_start(&o, &w), LITH_DQW_OK);
  assert_int_equal(lith__dqw_do(w, cmd_sql, "CREATE TABLE w(n INTEGER PRIMARY KEY)", &err), LITH_DQW_OK);
  int leader = t_leader_index(nodes, 3, all);
  assert_true(leader >= 0);
  lith__dqw_stats before, after;
  lith__dqw_get_stats(w, &before);

  /* Writes the whole time; the CTE on a connection of its own. */
  writes wr = {.w = w};
  pthread_t th;
  pthread_create(&th, NULL, write_loop, &wr);
  t_sleep_ms(300);
  uint32_t db;
  lith__dq_conn *c = lith__dq_new(20000);
  assert_int_equal(lith__dq_connect_leader(c, all, 5000), LITH_DQ_OK);
  assert_int_equal(lith__dq_open(c, "slow.db", &db), LITH_DQ_OK);
  lith__dq_rows r;
  lith__dq_rows_init(&r);
  int64_t t0 = t_ms_now();
  int rc = lith__dq_query_sql(c, db, ENDLESS_CTE, NULL, 0, &r);
  int64_t took = t_ms_now() - t0;
  uint64_t code = lith__dq_errcode(c);
  print_message("recursive CTE on the leader: %s after %lld ms: %llu %s\n", lith__dq_rc_str(rc),
                (long long)took, (unsigned long long)code, lith__dq_errmsg(c));
  /* lith_max_run_ms: a connection lowers its own bound, never raises it */
  int bound = -1;
  assert_int_equal(lith__dq_max_run(c, db, 100000, &bound), LITH_DQ_OK);
  assert_int_equal(bound, SLOW_RUN_MS);
  assert_int_equal(lith__dq_max_run(c, db, 150, &bound), LITH_DQ_OK);
  assert_int_equal(bound, 150);
  assert_int_equal(lith__dq_max_run(c, db, 0, &bound), LITH_DQ_OK); /* asks nothing */
  assert_int_equal(bound, 150);
  lith__dq_rows_free(&r);
  lith__dq_rows_init(&r);
  int64_t t1 = t_ms_now();
  int rc2 = lith__dq_query_sql(c, db, ENDLESS_CTE, NULL, 0, &r);
  int64_t took2 = t_ms_now() - t1;
  print_message("the same at lith_max_run_ms(150): %s after %lld ms\n", lith__dq_rc_str(rc2),
                (long long)took2);
  assert_int_equal(rc2, LITH_DQ_FAILURE);
  assert_int_equal(lith__dq_errcode(c) & 0xff, 9 /* SQLITE_INTERRUPT */);
  assert_true(took2 >= 140 && took2 < SLOW_RUN_MS);
  t_sleep_ms(500);
  atomic_store(&wr.stop, 1);
  pthread_join(th, NULL);
  lith__dqw_get_stats(w, &after);
  int leader_after = t_leader_index(nodes, 3, all);
  print_message(
      "meanwhile: %d writes committed, %d failed, the longest waited %lld ms; failovers %llu; leader "
      "node %d then %d\n",
      wr.n, wr.failed, (long long)wr.worst_ms, (unsigned long long)(after.failovers - before.failovers),
      leader + 1, leader_after + 1);
  assert_int_equal(rc, LITH_DQ_FAILURE);
  assert_int_equal(code, 9 /* SQLITE_INTERRUPT */);
  assert_true(took >= SLOW_RUN_MS - 10 && took < SLOW_RUN_MS + 1000);
  assert_int_equal(after.failovers, before.failovers);
  assert_int_equal(leader_after, leader);
  assert_int_equal(wr.failed, 0);
  assert_true(wr.n > 0);
  assert_true(wr.worst_ms < SLOW_RUN_MS + 1000);
  assert_true(lith__dq_connected(c));
  lith__dq_close(c);

  /* In a writer command: that command fails alone; an interrupted write
   * inside the transaction may roll it all back (SQLite's rule), and the
   * writer runs the neighbours again. A gate holds the writer so the three
   * share a batch. No failover. */
  sem_t sem;
  sem_init(&sem, 0, 0);
  static int64_t k1 = 1, k3 = 3;
  areq gate = {.sem = &sem}, q[3];
  memset(q, 0, sizeof q);
  gate.req = (lith__dqw_req){.fn = cmd_gate, .done = adone};
  lith__dqw_get_stats(w, &before);
  lith__dqw_submit(w, &gate.req);
  t_sleep_ms(100);
  q[0].req = (lith__dqw_req){.fn = cmd_insert, .arg = &k1, .done = adone};
  q[1].req = (lith__dqw_req){
      .fn = cmd_sql, .arg = "INSERT INTO w(n) SELECT 2 + (" ENDLESS_CTE ") * 0", .done = adone};
  q[2].req = (lith__dqw_req){.fn = cmd_insert, .arg = &k3, .done = adone};
  for (int i = 0; i < 3; i++) {
    q[i].sem = &sem;
    lith__dqw_submit(w, &q[i].req);
  }
  for (int i = 0; i < 4; i++)
    sem_wait(&sem);
  sem_destroy(&sem);
  lith__dqw_get_stats(w, &after);
  print_message("in a command: %s / %s (%d %s) / %s; %llu transactions, %llu re-runs, %llu failovers\n",
                lith__dqw_rc_str(q[0].req.rc), lith__dqw_rc_str(q[1].req.rc), q[1].req.err.code,
                q[1].req.err.errmsg, lith__dqw_rc_str(q[2].req.rc),
                (unsigned long long)(after.batches - before.batches),
                (unsigned long long)(after.reruns - before.reruns),
                (unsigned long long)(after.failovers - before.failovers));
  assert_int_equal(gate.req.rc, LITH_DQW_OK);
  assert_int_equal(after.batches - before.batches, 2); /* the gate's; the three's */
  assert_int_equal(after.failovers, before.failovers);
  assert_int_equal(q[0].req.rc, LITH_DQW_OK);
  assert_int_equal(q[1].req.rc, LITH_DQW_SQL);
  assert_int_equal(q[1].req.err.code, 9);
  assert_int_equal(q[2].req.rc, LITH_DQW_OK);

  /* --max-program-ops 5000: a CASE of 2,000 branches compiles to more;
   * SQLite reports a program over SQLITE_LIMIT_VDBE_OP as SQLITE_NOMEM. */
  static char big[64 * 1024];
  size_t len = (size_t)snprintf(big, sizeof big, "INSERT INTO w(n) SELECT CASE 1");
  for (int i = 0; i < 2000; i++)
    len += (size_t)snprintf(big + len, sizeof big - len, " WHEN %d THEN %d", i + 10, i);
  snprintf(big + len, sizeof big - len, " ELSE 4 END");
  assert_int_equal(lith__dqw_do(w, cmd_sql, big, &err), LITH_DQW_SQL);
  print_message("2,000 CASE branches: %d %s\n", err.code, err.errmsg);
  assert_int_equal(err.code, 7 /* SQLITE_NOMEM */);
  assert_int_equal(lith__dqw_do(w, cmd_sql, "INSERT INTO w(n) SELECT CASE 1 WHEN 1 THEN 5 END", &err),
                   LITH_DQW_OK);
  lith__dqw_stop(w);

  c = lith__dq_new(5000);
  assert_int_equal(lith__dq_connect_leader(c, all, 5000), LITH_DQ_OK);
  assert_int_equal(lith__dq_open(c, "slow.db", &db), LITH_DQ_OK);
  assert_int_equal(query_int(c, db, "SELECT count(*) FROM w WHERE n IN (1, 2, 3, 5)"), 3);
  lith__dq_close(c);
  for (int i = 0; i < 3; i++)
    assert_int_equal(t_node_stop(&nodes[i], SIGTERM, 10000), 0);
}

/* ---- --status ---- */

/* lith-node with args (after its name, NULL-terminated): its exit status,
 * its stdout in out. */
static int run_node(const char *const *args, char *out, size_t cap) {
  int p[2];
  const char *argv[16] = {"lith-node"};
  int argc = 1;
  for (int i = 0; args[i] != NULL && argc < 15; i++)
    argv[argc++] = args[i];
  argv[argc] = NULL;
  assert_int_equal(pipe(p), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(p[1], 1);
    close(p[0]);
    close(p[1]);
    execv(LITH_NODE_PATH, (char *const *)argv);
    _exit(127);
  }
  close(p[1]);
  size_t len = 0;
  ssize_t r;
  while (len + 1 < cap && (r = read(p[0], out + len, cap - 1 - len)) > 0)
    len += (size_t)r;
  out[len] = '\0';
  close(p[0]);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  return WEXITSTATUS(status);
}

static void expect_line(const char *out, const char *line) {
  char want[512];
  snprintf(want, sizeof want, "%s\n", line);
  if (strstr(out, want) == NULL)
    fail_msg("no line \"%s\" in:\n%s", line, out);
}

/* The index of the node that names itself leader, or -1 (asked now). */
static int self_named(int skip) {
  for (int i = 0; i < 3; i++) {
    char seen[64] = "";
    if (i == skip || nodes[i].pid <= 0)
      continue;
    lith__dq_conn *c = lith__dq_new(500);
    uint64_t id;
    const char *addr;
    if (lith__dq_connect(c, nodes[i].address) == LITH_DQ_OK && lith__dq_leader(c, &id, &addr) == LITH_DQ_OK)
      snprintf(seen, sizeof seen, "%s", addr);
    lith__dq_close(c);
    if (strcmp(seen, nodes[i].address) == 0)
      return i;
  }
  return -1;
}

static void test_status(void **state) {
  (void)state;
  char all[256], join2[128], line[256], bad[300];
  int rc;
  static char out[16384];
  for (int i = 0; i < 3; i++) {
    t_node_init(&nodes[i], i + 1);
    snprintf(nodes[i].dir, sizeof nodes[i].dir, "st%d", i + 1);
    nodes[i].keep_out = 1;
  }
  snprintf(join2, sizeof join2, "%s,%s", nodes[0].address, nodes[1].address);
  assert_int_equal(t_node_start(&nodes[0], NULL, 10000), 0);
  assert_int_equal(t_node_start(&nodes[1], nodes[0].address, 15000), 0);
  assert_int_equal(t_node_start(&nodes[2], join2, 15000), 0);
  all_addresses(all, sizeof all);
  int li = t_leader_index(nodes, 3, all);
  assert_true(li >= 0);

  /* lines: each node, the leader, the members */
  assert_int_equal(run_node(TL_ARGV("--status", all), out, sizeof out), 0);
  for (int i = 0; i < 3; i++) {
    snprintf(line, sizeof line, "node %s: id %d, voter, %s", nodes[i].address, nodes[i].id,
             i == li ? "leader" : "follower");
    expect_line(out, line);
    snprintf(line, sizeof line, "member: id %d %s voter", nodes[i].id, nodes[i].address);
    expect_line(out, line);
  }
  snprintf(line, sizeof line, "leader: %s (id %d)", nodes[li].address, nodes[li].id);
  expect_line(out, line);
  /* JSON */
  assert_int_equal(run_node(TL_ARGV("--status", all, "--json"), out, sizeof out), 0);
  assert_true(out[0] == '{' && strcmp(out + strlen(out) - 2, "}\n") == 0);
  for (int i = 0; i < 3; i++) {
    snprintf(line, sizeof line,
             "{\"address\":\"%s\",\"answered\":true,\"id\":%d,\"role\":\"voter\",\"leader\":%s}",
             nodes[i].address, nodes[i].id, i == li ? "true" : "false");
    if (strstr(out, line) == NULL)
      fail_msg("no %s in %s", line, out);
    snprintf(line, sizeof line, "{\"id\":%d,\"address\":\"%s\",\"role\":\"voter\"}", nodes[i].id,
             nodes[i].address);
    assert_non_null(strstr(out, line));
  }
  snprintf(line, sizeof line, "\"leader\":{\"address\":\"%s\",\"id\":%d}", nodes[li].address, nodes[li].id);
  assert_non_null(strstr(out, line));
  /* a node that does not answer, among those that do */
  snprintf(bad, sizeof bad, "127.0.0.1:1,%s", all);
  assert_int_equal(run_node(TL_ARGV("--status", bad), out, sizeof out), 0);
  assert_non_null(strstr(out, "node 127.0.0.1:1: no answer ("));
  assert_int_equal(run_node(TL_ARGV("--status", "127.0.0.1:1", "--json"), out, sizeof out), 1);
  assert_non_null(strstr(out, "{\"address\":\"127.0.0.1:1\",\"answered\":false,\"error\":\""));
  assert_non_null(strstr(out, "\"leader\":null,\"members\":[]}"));

  /* The leader killed: the node elected says it leads; --status names it. */
  assert_int_equal(t_node_stop(&nodes[li], SIGKILL, 5000), 128 + SIGKILL);
  int64_t t0 = t_ms_now();
  int ni;
  /* at once, before the election: the followers still name the dead
   * leader, which --status does not take for the leader (it was asked) */
  rc = run_node(TL_ARGV("--status", all), out, sizeof out);
  snprintf(line, sizeof line, "leader: %s", nodes[li].address);
  if (strstr(out, line) != NULL)
    fail_msg("a dead leader named (exit %d):\n%s", rc, out);
  while ((ni = self_named(li)) < 0) {
    assert_true(t_ms_now() - t0 < 10000);
    t_sleep_ms(20);
  }
  char told[4096] = "";
  snprintf(line, sizeof line, "lith-node: id %d leads\n", nodes[ni].id);
  while (strstr(t_node_read_out(&nodes[ni], told, sizeof told), line) == NULL) {
    assert_true(t_ms_now() - t0 < 12000);
    t_sleep_ms(20);
  }
  print_message("node %d elected %lld ms after the kill; its line: %s", nodes[ni].id,
                (long long)(t_ms_now() - t0), line);
  assert_int_equal(run_node(TL_ARGV("--status", all), out, sizeof out), 0);
  snprintf(line, sizeof line, "node %s: no answer (", nodes[li].address);
  assert_non_null(strstr(out, line));
  snprintf(line, sizeof line, "leader: %s (id %d)", nodes[ni].address, nodes[ni].id);
  expect_line(out, line);

  /* The other follower killed: the last node knows no leader; it says so
   * and --status exits 2. */
  int fi = 3 - li - ni;
  assert_int_equal(t_node_stop(&nodes[fi], SIGKILL, 5000), 128 + SIGKILL);
  t0 = t_ms_now();
  snprintf(line, sizeof line, "lith-node: id %d no longer leads (leader none)\n", nodes[ni].id);
  while (strstr(t_node_read_out(&nodes[ni], told, sizeof told), line) == NULL) {
    assert_true(t_ms_now() - t0 < 12000);
    t_sleep_ms(20);
  }
  while ((rc = run_node(TL_ARGV("--status", all), out, sizeof out)) != 2) {
    assert_int_equal(rc, 0); /* until it knows it leads no more */
    assert_true(t_ms_now() - t0 < 12000);
    t_sleep_ms(50);
  }
  expect_line(out, "leader: none");
  snprintf(line, sizeof line, "node %s: id %d, voter, knows no leader", nodes[ni].address, nodes[ni].id);
  expect_line(out, line);
  /* nobody */
  assert_int_equal(t_node_stop(&nodes[ni], SIGTERM, 10000), 0);
  assert_int_equal(run_node(TL_ARGV("--status", all), out, sizeof out), 1);
  expect_line(out, "leader: none");
  /* its own lines: leads, then no longer; nothing else after serving */
  snprintf(line, sizeof line, "lith-node: id %d leads\nlith-node: id %d no longer leads (leader none)\n",
           nodes[ni].id, nodes[ni].id);
  t_node_read_out(&nodes[ni], told, sizeof told);
  assert_string_equal(told, line);

  /* usage */
  assert_int_equal(run_node(TL_ARGV("--help"), out, sizeof out), 0);
  assert_non_null(strstr(out, "--status ADDR[,ADDR...]"));
  assert_non_null(strstr(out, "--json"));
  assert_int_equal(run_node(TL_ARGV("--json"), out, sizeof out), 1);
  assert_int_equal(run_node(TL_ARGV("--status", all, "--id", "1"), out, sizeof out), 1);
}

static void test_usage(void **state) {
  (void)state;
  pid_t pid = fork();
  if (pid == 0) {
    execl(LITH_NODE_PATH, "lith-node", "--address", "127.0.0.1:1", "--dir", "x", (char *)NULL);
    _exit(127);
  }
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 1);
  pid = fork();
  if (pid == 0) {
    execl(LITH_NODE_PATH, "lith-node", "--id", "1", "--address", "127.0.0.1:1", "--dir", "x", "--max-run-ms",
          "9999999999", (char *)NULL);
    _exit(127);
  }
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 1);
}

/* The bytes of the files in dir (du -sb). */
static long long dir_bytes(const char *dir) {
  char cmd[256], out[64] = "";
  snprintf(cmd, sizeof cmd, "du -sb '%s'", dir);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  assert_non_null(fgets(out, sizeof out, p));
  pclose(p);
  return atoll(out);
}

/* The resident memory of process pid, in kB (/proc/PID/status VmRSS). */
static long rss_kb(pid_t pid) {
  char path[64], line[256];
  long kb = -1;
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  while (fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "VmRSS: %ld", &kb) == 1)
      break;
  fclose(f);
  return kb;
}

/* 3,000 transactions of 20 kB each on one row (the database stays one
 * page of it) into node 1 (alone): its directory's bytes and its RSS in
 * kB after. */
static void log_after_updates(const char *const *extra, long long *bytes, long *kb) {
  t_node_init(&nodes[0], 1);
  snprintf(nodes[0].dir, sizeof nodes[0].dir, "trail%s", extra != NULL ? "s" : "d");
  nodes[0].extra = extra;
  assert_int_equal(t_node_start(&nodes[0], NULL, 20000), 0);
  uint32_t db;
  lith__dq_conn *c = lith__dq_new(5000);
  assert_int_equal(lith__dq_connect(c, nodes[0].address), LITH_DQ_OK);
  assert_int_equal(lith__dq_open(c, "trail.db", &db), LITH_DQ_OK);
  exec_ok(c, db, "CREATE TABLE u(id INTEGER PRIMARY KEY, v BLOB)");
  exec_ok(c, db, "INSERT INTO u VALUES (1, NULL)");
  for (int i = 0; i < 3000; i++)
    exec_ok(c, db, "UPDATE u SET v = randomblob(20000) WHERE id = 1");
  lith__dq_close(c);
  *bytes = dir_bytes(nodes[0].dir);
  *kb = rss_kb(nodes[0].pid);
  t_node_stop(&nodes[0], SIGKILL, 2000);
}

/* A node keeps its Raft log's last --snapshot-trailing transactions beside
 * a snapshot taken every --snapshot-threshold, in memory and on disk: the
 * cost follows the transactions' size, not the database's (libdqlite's
 * own 1024 + 8192 kept 206 MB of DIR and 204 MB of RSS for 12,000
 * transactions of 20 kB on a 20 kB database; lith-node's default is
 * 1024 + 1024). Raft's segment files (8 MB, some made ahead) are a floor
 * of DIR whatever the options. */
static void test_snapshot_trailing(void **state) {
  (void)state;
  static const char *const small[] = {"--snapshot-threshold", "64", "--snapshot-trailing", "64", NULL};
  long long dflt, kept;
  long dflt_kb, kept_kb;
  log_after_updates(NULL, &dflt, &dflt_kb);
  log_after_updates(small, &kept, &kept_kb);
  print_message("3,000 transactions of 20 kB: --dir %lld bytes, RSS %ld kB by default; %lld bytes, %ld kB "
                "with 64 + 64\n",
                dflt, dflt_kb, kept, kept_kb);
  assert_true(kept < dflt - 20 * 1000 * 1000);
  assert_true(kept_kb < dflt_kb - 8 * 1000);
}

static int teardown(void **state) {
  (void)state;
  for (int i = 0; i < 3; i++)
    if (nodes[i].pid > 0)
      t_node_stop(&nodes[i], SIGKILL, 2000);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_three_nodes, teardown),
      cmocka_unit_test_teardown(test_slow_statement, teardown),
      cmocka_unit_test_teardown(test_status, teardown),
      cmocka_unit_test_teardown(test_snapshot_trailing, teardown),
      cmocka_unit_test(test_usage),
  };
  if (getenv("TEST_FILTER") != NULL) /* one test by name: TEST_FILTER=test_x */
    cmocka_set_test_filter(getenv("TEST_FILTER"));
  return cmocka_run_group_tests(tests, NULL, NULL);
}
