/*
 * dqlite/client.c against a real node (one lith-node process, started once
 * for the group) and against a fake node that sends bad frames:
 *   - LEADER names the node itself, CLIENT is welcomed, CLUSTER lists it as
 *     the one voter; OPEN gives a database, a second OPEN on the connection
 *     is a FAILURE (SQLITE_BUSY) that leaves the connection usable;
 *   - EXEC_SQL with bound parameters of every type, and QUERY_SQL (with a
 *     bound parameter) gives them back with their types: integer, float,
 *     text, blob (with a NUL inside), NULL; last_insert_id and
 *     rows_affected are SQLite's;
 *   - a result larger than one message (2,000 rows of 100 bytes: dqlite
 *     sends a PART per ~4 KiB) arrives whole and in order;
 *   - bad SQL is FAILURE with SQLite's code (SQLITE_ERROR) and message
 *     ("syntax error"); a UNIQUE violation is SQLITE_CONSTRAINT (primary
 *     code); the connection stays usable after both;
 *   - the writer's batch: BEGIN, SAVEPOINT / INSERT / RELEASE, SAVEPOINT /
 *     INSERT / failing INSERT / ROLLBACK TO / RELEASE, COMMIT keeps the
 *     first command's row and none of the second's, each step answered on
 *     its own; BEGIN ... ROLLBACK keeps nothing;
 *   - PREPARE (parameter count), EXEC twice with parameters (the second
 *     breaking a UNIQUE key: FAILURE), QUERY, FINALIZE; an id never
 *     prepared is FAILURE SQLITE_NOTFOUND; a bad PREPARE is SQLITE_ERROR;
 *   - the node exits 0 on SIGTERM at the end (the group teardown);
 *   - a fake node: a header announcing 1 GiB, an answer of the wrong type,
 *     a malformed FAILURE, all LITH_DQ_PROTO; a node that closes mid-way is
 *     LITH_DQ_IO, one that goes silent is LITH_DQ_TIMEOUT within the
 *     handle's timeout; each drops the connection (later calls: IO); a
 *     closed port is LITH_DQ_IO.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "client.h"
#include "nodes.h"

static t_node node;

static int group_setup(void **state) {
  (void)state;
  t_node_init(&node, 1);
  return t_node_start(&node, NULL, 10000);
}

static int group_teardown(void **state) {
  (void)state;
  int status = t_node_stop(&node, SIGTERM, 5000);
  if (status != 0)
    fprintf(stderr, "node 1: exit status %d after SIGTERM\n", status);
  return status == 0 ? 0 : -1;
}

/* A connection to the node with database `name` open. */
static lith__dq_conn *open_db(const char *name, uint32_t *db) {
  lith__dq_conn *c = lith__dq_new(5000);
  assert_non_null(c);
  assert_int_equal(lith__dq_connect(c, node.address), LITH_DQ_OK);
  assert_int_equal(lith__dq_open(c, name, db), LITH_DQ_OK);
  return c;
}

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

static void test_leader_client_cluster_open(void **state) {
  (void)state;
  uint64_t id, hb = 0;
  const char *addr;
  lith__dq_servers s;
  uint32_t db;
  lith__dq_conn *c = lith__dq_new(5000);
  assert_int_equal(lith__dq_connect(c, node.address), LITH_DQ_OK);
  assert_int_equal(lith__dq_leader(c, &id, &addr), LITH_DQ_OK);
  assert_int_equal(id, 1);
  assert_string_equal(addr, node.address);
  assert_int_equal(lith__dq_client(c, 7, &hb), LITH_DQ_OK);
  assert_true(hb > 0);
  assert_int_equal(lith__dq_cluster(c, &s), LITH_DQ_OK);
  assert_int_equal(s.n, 1);
  assert_int_equal(s.v[0].id, 1);
  assert_string_equal(s.v[0].address, node.address);
  assert_int_equal(s.v[0].role, LITH_DQ_VOTER);
  free(s.v);
  assert_int_equal(lith__dq_open(c, "a.db", &db), LITH_DQ_OK);
  assert_int_equal(lith__dq_open(c, "b.db", &db), LITH_DQ_FAILURE);
  assert_int_equal(lith__dq_errcode(c), SQLITE_BUSY);
  assert_true(lith__dq_connected(c));
  exec_ok(c, db, "CREATE TABLE IF NOT EXISTS x(a)");
  lith__dq_close(c);
}

static void test_values_round_trip(void **state) {
  (void)state;
  uint32_t db;
  lith__dq_result res;
  lith__dq_rows r;
  lith__dq_conn *c = open_db("values.db", &db);
  exec_ok(c, db, "CREATE TABLE t(id INTEGER PRIMARY KEY, i INTEGER, f REAL, s TEXT, b BLOB, n)");
  const char blob[5] = {'a', 0, 'b', (char)0xff, 0};
  lith__dq_value p[5] = {lith__dq_int(-9007199254740993LL), lith__dq_float(-2.5), lith__dq_text("héllo"),
                         lith__dq_blob(blob, 5), lith__dq_null()};
  assert_int_equal(
      lith__dq_exec_sql(c, db, "INSERT INTO t(i, f, s, b, n) VALUES (?, ?, ?, ?, ?)", p, 5, &res),
      LITH_DQ_OK);
  assert_int_equal(res.last_insert_id, 1);
  assert_int_equal(res.rows_affected, 1);
  assert_int_equal(lith__dq_exec_sql(c, db, "INSERT INTO t(i) VALUES (1), (2), (3)", NULL, 0, &res),
                   LITH_DQ_OK);
  assert_int_equal(res.last_insert_id, 4);
  assert_int_equal(res.rows_affected, 3);

  lith__dq_rows_init(&r);
  lith__dq_value key = lith__dq_int(1);
  assert_int_equal(lith__dq_query_sql(c, db, "SELECT i, f, s, b, n FROM t WHERE id = ?", &key, 1, &r),
                   LITH_DQ_OK);
  assert_int_equal(r.ncols, 5);
  assert_string_equal(r.names[3], "b");
  assert_int_equal(r.nrows, 1);
  assert_int_equal(lith__dq_rows_at(&r, 0, 0)->type, LITH_DQ_INTEGER);
  assert_int_equal(lith__dq_rows_at(&r, 0, 0)->i, -9007199254740993LL);
  assert_int_equal(lith__dq_rows_at(&r, 0, 1)->type, LITH_DQ_FLOAT);
  assert_true(lith__dq_rows_at(&r, 0, 1)->f == -2.5);
  assert_int_equal(lith__dq_rows_at(&r, 0, 2)->type, LITH_DQ_TEXT);
  assert_string_equal(lith__dq_rows_at(&r, 0, 2)->p, "héllo");
  assert_int_equal(lith__dq_rows_at(&r, 0, 3)->type, LITH_DQ_BLOB);
  assert_int_equal(lith__dq_rows_at(&r, 0, 3)->n, 5);
  assert_memory_equal(lith__dq_rows_at(&r, 0, 3)->p, blob, 5);
  assert_int_equal(lith__dq_rows_at(&r, 0, 4)->type, LITH_DQ_NULL);
  lith__dq_rows_free(&r);

  /* Several messages: 2,000 rows of ~100 bytes. */
  exec_ok(c, db, "CREATE TABLE big(n INTEGER, pad TEXT)");
  exec_ok(c, db,
          "WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM k WHERE n < 2000) "
          "INSERT INTO big SELECT n, printf('%0100d', n) FROM k");
  assert_int_equal(lith__dq_query_sql(c, db, "SELECT n, pad FROM big ORDER BY n", NULL, 0, &r), LITH_DQ_OK);
  assert_int_equal(r.nrows, 2000);
  assert_true(r.nbodies > 1);
  for (size_t i = 0; i < r.nrows; i++) {
    assert_int_equal(lith__dq_rows_at(&r, i, 0)->i, (int64_t)i + 1);
    assert_int_equal(lith__dq_rows_at(&r, i, 1)->n, 100);
  }
  lith__dq_rows_free(&r);
  lith__dq_close(c);
}

static void test_failures(void **state) {
  (void)state;
  uint32_t db;
  lith__dq_conn *c = open_db("fail.db", &db);
  assert_int_equal(lith__dq_exec_sql(c, db, "SELEC 1", NULL, 0, NULL), LITH_DQ_FAILURE);
  assert_int_equal(lith__dq_errcode(c), SQLITE_ERROR);
  assert_non_null(strstr(lith__dq_errmsg(c), "syntax error"));
  lith__dq_rows r;
  lith__dq_rows_init(&r);
  assert_int_equal(lith__dq_query_sql(c, db, "SELECT nope FROM nowhere", NULL, 0, &r), LITH_DQ_FAILURE);
  assert_int_equal(lith__dq_errcode(c), SQLITE_ERROR);
  assert_non_null(strstr(lith__dq_errmsg(c), "no such table"));
  assert_int_equal(r.nrows, 0);

  exec_ok(c, db, "CREATE TABLE u(k TEXT PRIMARY KEY)");
  exec_ok(c, db, "INSERT INTO u VALUES ('a')");
  assert_int_equal(lith__dq_exec_sql(c, db, "INSERT INTO u VALUES ('a')", NULL, 0, NULL), LITH_DQ_FAILURE);
  assert_int_equal(lith__dq_errcode(c) & 0xff, SQLITE_CONSTRAINT);
  assert_non_null(strstr(lith__dq_errmsg(c), "UNIQUE"));
  assert_true(lith__dq_connected(c));
  assert_int_equal(query_int(c, db, "SELECT count(*) FROM u"), 1);
  lith__dq_close(c);
}

static void test_batch_steps(void **state) {
  (void)state;
  uint32_t db;
  lith__dq_conn *c = open_db("batch.db", &db);
  exec_ok(c, db, "CREATE TABLE acct(id INTEGER PRIMARY KEY, bal INTEGER NOT NULL CHECK (bal >= 0))");
  exec_ok(c, db, "INSERT INTO acct VALUES (1, 100), (2, 0)");

  /* Command 1 moves 60; command 2 moves 60 again and fails its CHECK. */
  lith__dq_value mv[2] = {lith__dq_int(60), lith__dq_int(1)};
  lith__dq_value in[2] = {lith__dq_int(60), lith__dq_int(2)};
  exec_ok(c, db, "BEGIN");
  exec_ok(c, db, "SAVEPOINT c1");
  assert_int_equal(lith__dq_exec_sql(c, db, "UPDATE acct SET bal = bal - ? WHERE id = ?", mv, 2, NULL),
                   LITH_DQ_OK);
  assert_int_equal(lith__dq_exec_sql(c, db, "UPDATE acct SET bal = bal + ? WHERE id = ?", in, 2, NULL),
                   LITH_DQ_OK);
  exec_ok(c, db, "RELEASE c1");
  exec_ok(c, db, "SAVEPOINT c2");
  assert_int_equal(lith__dq_exec_sql(c, db, "UPDATE acct SET bal = bal + ? WHERE id = ?", in, 2, NULL),
                   LITH_DQ_OK);
  assert_int_equal(lith__dq_exec_sql(c, db, "UPDATE acct SET bal = bal - ? WHERE id = ?", mv, 2, NULL),
                   LITH_DQ_FAILURE);
  assert_int_equal(lith__dq_errcode(c) & 0xff, SQLITE_CONSTRAINT);
  exec_ok(c, db, "ROLLBACK TO c2");
  exec_ok(c, db, "RELEASE c2");
  exec_ok(c, db, "COMMIT");
  assert_int_equal(query_int(c, db, "SELECT bal FROM acct WHERE id = 1"), 40);
  assert_int_equal(query_int(c, db, "SELECT bal FROM acct WHERE id = 2"), 60);

  /* A new connection sees the committed state. */
  uint32_t db2;
  lith__dq_conn *c2 = open_db("batch.db", &db2);
  assert_int_equal(query_int(c2, db2, "SELECT sum(bal) FROM acct"), 100);
  assert_int_equal(query_int(c2, db2, "SELECT bal FROM acct WHERE id = 2"), 60);

  exec_ok(c, db, "BEGIN");
  exec_ok(c, db, "INSERT INTO acct VALUES (3, 5)");
  exec_ok(c, db, "ROLLBACK");
  assert_int_equal(query_int(c2, db2, "SELECT count(*) FROM acct"), 2);
  lith__dq_close(c2);
  lith__dq_close(c);
}

static void test_prepared(void **state) {
  (void)state;
  uint32_t db, ins, sel;
  uint64_t np;
  lith__dq_result res;
  lith__dq_rows r;
  lith__dq_conn *c = open_db("prep.db", &db);
  exec_ok(c, db, "CREATE TABLE kv(k TEXT PRIMARY KEY, v INTEGER)");
  assert_int_equal(lith__dq_prepare(c, db, "INSERT INTO kv VALUES (?, ?)", &ins, &np), LITH_DQ_OK);
  assert_int_equal(np, 2);
  lith__dq_value a[2] = {lith__dq_text("a"), lith__dq_int(1)};
  lith__dq_value b[2] = {lith__dq_text("b"), lith__dq_int(2)};
  assert_int_equal(lith__dq_exec(c, db, ins, a, 2, &res), LITH_DQ_OK);
  assert_int_equal(lith__dq_exec(c, db, ins, b, 2, &res), LITH_DQ_OK);
  assert_int_equal(res.last_insert_id, 2);
  assert_int_equal(lith__dq_exec(c, db, ins, b, 2, &res), LITH_DQ_FAILURE);
  assert_int_equal(lith__dq_errcode(c) & 0xff, SQLITE_CONSTRAINT);
  assert_int_equal(lith__dq_prepare(c, db, "SELECT sum(v) FROM kv WHERE k >= ?", &sel, &np), LITH_DQ_OK);
  assert_int_equal(np, 1);
  lith__dq_rows_init(&r);
  assert_int_equal(lith__dq_query(c, db, sel, a, 1, &r), LITH_DQ_OK);
  assert_int_equal(lith__dq_rows_at(&r, 0, 0)->i, 3);
  lith__dq_rows_free(&r);
  assert_int_equal(lith__dq_finalize(c, db, ins), LITH_DQ_OK);
  assert_int_equal(lith__dq_finalize(c, db, sel), LITH_DQ_OK);
  /* An id never prepared is unknown. (A finalized one must not be reused:
   * libdqlite 1.11.1 then reads its freed slot and the node dies, see
   * client.h.) */
  assert_int_equal(lith__dq_exec(c, db, 99, a, 2, &res), LITH_DQ_FAILURE);
  assert_int_equal(lith__dq_errcode(c), SQLITE_NOTFOUND);
  assert_int_equal(lith__dq_prepare(c, db, "SELEC", &sel, &np), LITH_DQ_FAILURE);
  assert_int_equal(lith__dq_errcode(c), SQLITE_ERROR);
  lith__dq_close(c);
}

/* One call against a fake node that answers `reply`; returns the code. */
static int against_fake(const void *reply, size_t n, int close_after, int timeout_ms) {
  t_fake *f = t_fake_start(reply, n, close_after);
  assert_non_null(f);
  lith__dq_conn *c = lith__dq_new(timeout_ms);
  uint64_t id;
  const char *addr;
  assert_int_equal(lith__dq_connect(c, t_fake_address(f)), LITH_DQ_OK);
  int rc = lith__dq_leader(c, &id, &addr);
  if (rc != LITH_DQ_OK) {
    assert_false(lith__dq_connected(c));
    assert_int_equal(lith__dq_leader(c, &id, &addr), LITH_DQ_IO);
  }
  lith__dq_close(c);
  t_fake_free(f);
  return rc;
}

static void test_untrusted_node(void **state) {
  (void)state;
  /* A well-formed SERVER answer first, so that the fake itself is right. */
  const uint8_t good[24] = {2, 0, 0, 0, LITH_DQ_RES_SERVER, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 'x', ':', '1'};
  assert_int_equal(against_fake(good, sizeof good, 1, 2000), LITH_DQ_OK);
  const uint8_t huge[8] = {0, 0, 0, 8, LITH_DQ_RES_SERVER}; /* 2^27 words: 1 GiB */
  assert_int_equal(against_fake(huge, sizeof huge, 1, 2000), LITH_DQ_PROTO);
  const uint8_t wrong[16] = {1, 0, 0, 0, LITH_DQ_RES_DB};
  assert_int_equal(against_fake(wrong, sizeof wrong, 1, 2000), LITH_DQ_PROTO);
  const uint8_t badfail[16] = {1, 0, 0, 0, LITH_DQ_RES_FAILURE, 0, 0, 0, 1};
  assert_int_equal(against_fake(badfail, sizeof badfail, 1, 2000), LITH_DQ_PROTO);
  const uint8_t shortbody[12] = {2, 0, 0, 0, LITH_DQ_RES_SERVER};
  assert_int_equal(against_fake(shortbody, sizeof shortbody, 1, 2000), LITH_DQ_IO);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  assert_int_equal(against_fake(shortbody, sizeof shortbody, 0, 300), LITH_DQ_TIMEOUT);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  assert_true(s >= 0.29 && s < 3.0);

  lith__dq_conn *c = lith__dq_new(1000);
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", t_free_port());
  assert_int_equal(lith__dq_connect(c, addr), LITH_DQ_IO);
  assert_non_null(strstr(lith__dq_errmsg(c), addr));
  assert_int_equal(lith__dq_connect(c, "no-port"), LITH_DQ_MISUSE);
  lith__dq_close(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_leader_client_cluster_open),
      cmocka_unit_test(test_values_round_trip),
      cmocka_unit_test(test_failures),
      cmocka_unit_test(test_batch_steps),
      cmocka_unit_test(test_prepared),
      cmocka_unit_test(test_untrusted_node),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
