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
 *   - bad arguments (no --id) exit 1.
 */
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

#include "client.h"
#include "nodes.h"

static t_node nodes[3];

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
      cmocka_unit_test(test_usage),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
