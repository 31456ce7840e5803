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
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "client.h"
#include "nodes.h"

/* AddressSanitizer keeps what is freed in its quarantine (256 MiB by
 * default) before reusing it, so there RSS grows with what passed through,
 * not with what is held: the memory bounds are the plain build's. */
#if defined(__SANITIZE_ADDRESS__)
#define RSS_SLACK_KIB (320 * 1024)
#else
#define RSS_SLACK_KIB 0
#endif

/* n divided by env LITH_TEST_SCALE (a divisor, default 1), at least 1:
 * fewer parts under the sanitizers, as in the other suites. */
static int scaled(int n) {
  const char *s = getenv("LITH_TEST_SCALE");
  int d = s != NULL ? atoi(s) : 1;
  return d > 1 && n / d > 0 ? n / d : n;
}

/* A handle's timeout where the test bounds memory, not time: what a busy
 * machine under a sanitizer takes to move tens of MB is no failure. */
#define SLOW_OK_MS 120000

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
  /* A failure at a step: libdqlite 1.11.1 puts the part's column header
   * (and rows) before the code and message (wire.h). */
  assert_int_equal(
      lith__dq_query_sql(c, db, "SELECT 1 AS n, abs(-9223372036854775807 - 1) AS pad", NULL, 0, &r),
      LITH_DQ_FAILURE);
  assert_int_equal(lith__dq_errcode(c), SQLITE_ERROR);
  assert_string_equal(lith__dq_errmsg(c), "integer overflow");
  assert_true(lith__dq_connected(c));

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

/* lith-node's statement guard at its defaults (tools/lith-node/main.c): a
 * recursive CTE of ~30 s or more is interrupted after --max-run-ms 5000
 * (FAILURE SQLITE_INTERRUPT), the connection usable after; SQLite's limits:
 * no value over 1 MiB, no LIKE pattern over 50 bytes, no ATTACH. */
static void test_node_bounds(void **state) {
  (void)state;
  uint32_t db;
  lith__dq_conn *c = lith__dq_new(20000);
  assert_int_equal(lith__dq_connect(c, node.address), LITH_DQ_OK);
  assert_int_equal(lith__dq_open(c, "bounds.db", &db), LITH_DQ_OK);
  lith__dq_rows r;
  lith__dq_rows_init(&r);
  int64_t t0 = t_ms_now();
  int rc = lith__dq_query_sql(
      c, db,
      "WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM k WHERE n < 2000000000) "
      "SELECT count(*) FROM k",
      NULL, 0, &r);
  int64_t took = t_ms_now() - t0;
  print_message("a 2e9-row recursive CTE: %s after %lld ms: %llu %s\n", lith__dq_rc_str(rc), (long long)took,
                (unsigned long long)lith__dq_errcode(c), lith__dq_errmsg(c));
  assert_int_equal(rc, LITH_DQ_FAILURE);
  assert_int_equal(lith__dq_errcode(c), SQLITE_INTERRUPT);
  assert_true(took >= 4900 && took < 8000);
  assert_int_equal(query_int(c, db, "SELECT 6 * 7"), 42); /* the next statement has its own 5 s */

  assert_int_equal(query_int(c, db, "SELECT length(zeroblob(1048576))"), 1048576);
  assert_int_equal(lith__dq_query_sql(c, db, "SELECT length(zeroblob(1048577))", NULL, 0, &r),
                   LITH_DQ_FAILURE);
  assert_int_equal(lith__dq_errcode(c), SQLITE_TOOBIG);
  char sql[256];
  snprintf(sql, sizeof sql, "SELECT 'a' LIKE '%050d'", 0);
  assert_int_equal(query_int(c, db, sql), 0);
  snprintf(sql, sizeof sql, "SELECT 'a' LIKE '%051d'", 0);
  assert_int_equal(lith__dq_query_sql(c, db, sql, NULL, 0, &r), LITH_DQ_FAILURE);
  assert_non_null(strstr(lith__dq_errmsg(c), "LIKE or GLOB pattern too complex"));
  assert_int_equal(lith__dq_exec_sql(c, db, "ATTACH ':memory:' AS other", NULL, 0, NULL), LITH_DQ_FAILURE);
  assert_non_null(strstr(lith__dq_errmsg(c), "too many attached databases"));
  assert_true(lith__dq_connected(c));
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
  assert_int_equal(against_fake(huge, sizeof huge, 1, 2000), LITH_DQ_TOOBIG);
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

/* ---- Rows as they arrive (lith__dq_query_each) ---- */

typedef struct each {
  int parts, stop_after; /* stop at part number stop_after (0: never) */
  size_t rows;
  int64_t next; /* the n expected next */
  int in_order, names_ok;
  long rss0, rss_max;
  lith__dq_conn *c; /* to try a call from inside */
  int inner_rc;
} each;

static int on_rows(const lith__dq_rows *part, void *arg) {
  each *e = arg;
  e->parts++;
  e->names_ok &= part->ncols >= 1 && strcmp(part->names[0], "n") == 0;
  for (size_t i = 0; i < part->nrows; i++) {
    const lith__dq_value *v = lith__dq_rows_at(part, i, 0);
    if (v->type != LITH_DQ_INTEGER || v->i != e->next)
      e->in_order = 0;
    e->next++;
  }
  e->rows += part->nrows;
  long rss = t_rss_kib();
  if (rss > e->rss_max)
    e->rss_max = rss;
  if (e->c != NULL && e->parts == 1)
    e->inner_rc = lith__dq_exec_sql(e->c, 0, "SELECT 1", NULL, 0, NULL);
  return e->stop_after > 0 && e->parts >= e->stop_after;
}

static void each_init(each *e, int stop_after) {
  memset(e, 0, sizeof *e);
  e->stop_after = stop_after;
  e->next = 1;
  e->in_order = e->names_ok = 1;
  e->rss0 = e->rss_max = t_rss_kib();
}

#define MB_ROWS(nrows, mb_cols)                                                                           \
  "WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM k WHERE n < " #nrows ") SELECT n" mb_cols \
  " FROM k"

static void test_query_each_node(void **state) {
  (void)state;
  uint32_t db;
  each e;
  lith__dq_conn *c = open_db("each.db", &db);
  exec_ok(c, db, "CREATE TABLE big(n INTEGER, pad TEXT)");
  exec_ok(c, db,
          "WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM k WHERE n < 2000) "
          "INSERT INTO big SELECT n, printf('%0100d', n) FROM k");

  /* Every part, in order, each with the names. */
  each_init(&e, 0);
  assert_int_equal(lith__dq_query_each(c, db, "SELECT n, pad FROM big ORDER BY n", NULL, 0, on_rows, &e, 0),
                   LITH_DQ_OK);
  assert_int_equal(e.rows, 2000);
  assert_true(e.parts > 1);
  assert_true(e.in_order && e.names_ok);
  print_message("2000 rows of 100 bytes: %d parts\n", e.parts);

  /* A stop after the first part: INTERRUPT, the rest (~200 KB) read and
   * thrown away, the connection still in step; a call from inside on_rows
   * is refused and sends nothing. */
  each_init(&e, 1);
  e.c = c;
  assert_int_equal(lith__dq_query_each(c, db, "SELECT n, pad FROM big ORDER BY n", NULL, 0, on_rows, &e, 0),
                   LITH_DQ_STOPPED);
  assert_int_equal(e.parts, 1);
  assert_int_equal(e.inner_rc, LITH_DQ_MISUSE);
  assert_true(lith__dq_connected(c));
  assert_int_equal(query_int(c, db, "SELECT count(*) FROM big"), 2000);
  /* A stop on the only (DONE) part sends nothing: still in step. */
  each_init(&e, 1);
  assert_int_equal(lith__dq_query_each(c, db, "SELECT 1 AS n", NULL, 0, on_rows, &e, 0), LITH_DQ_STOPPED);
  assert_true(lith__dq_connected(c));
  assert_int_equal(query_int(c, db, "SELECT 41 + 1"), 42);

  /* A statement failing midway: the parts before it, then FAILURE; the
   * connection stays usable. */
  each_init(&e, 0);
  assert_int_equal(
      lith__dq_query_each(c, db,
                          "SELECT n, CASE WHEN n = 1500 THEN abs(n - 1500 - 9223372036854775807 - 1) "
                          "ELSE pad END FROM big",
                          NULL, 0, on_rows, &e, 0),
      LITH_DQ_FAILURE);
  print_message("failing at row 1500: %d parts, %zu rows before the FAILURE (%llu: %s)\n", e.parts, e.rows,
                (unsigned long long)lith__dq_errcode(c), lith__dq_errmsg(c));
  assert_true(e.parts > 1 && e.rows > 0 && e.rows < 1500);
  assert_int_equal(lith__dq_errcode(c), SQLITE_ERROR);
  assert_string_equal(lith__dq_errmsg(c), "integer overflow");
  assert_int_equal(query_int(c, db, "SELECT 2"), 2);

  /* 1,500 rows of 1 MB (the issue's /v1/query): a stop after 50 costs one
   * row's memory, not 1.5 GB; the rest is past LITH_DQ_DRAIN_MAX, so the
   * connection is closed, and the node is fine. */
  each_init(&e, 50);
  lith__dq_set_timeout(c, SLOW_OK_MS); /* 5 s was not enough under TSan on a busy machine */
  int64_t t0 = t_ms_now();
  assert_int_equal(
      lith__dq_query_each(c, db, MB_ROWS(1500, ", zeroblob(1000000) AS b"), NULL, 0, on_rows, &e, 0),
      LITH_DQ_STOPPED);
  print_message("1500 x 1 MB, stopped after %d parts (%zu rows) in %lld ms: RSS %ld -> %ld KiB at most; %s\n",
                e.parts, e.rows, (long long)(t_ms_now() - t0), e.rss0, e.rss_max, lith__dq_errmsg(c));
  assert_int_equal(e.rows, 50);
  assert_true(e.rss_max - e.rss0 < RSS_SLACK_KIB + 16 * 1024);
  assert_false(lith__dq_connected(c));
  assert_non_null(strstr(lith__dq_errmsg(c), "closed"));
  lith__dq_close(c);

  /* The whole-answer call on it stops at LITH_DQ_MAX_ANSWER: TOOBIG. */
  c = open_db("each.db", &db);
  lith__dq_set_timeout(c, SLOW_OK_MS);
  lith__dq_rows r;
  lith__dq_rows_init(&r);
  t0 = t_ms_now();
  assert_int_equal(lith__dq_query_sql(c, db, MB_ROWS(1500, ", zeroblob(1000000) AS b"), NULL, 0, &r),
                   LITH_DQ_TOOBIG);
  print_message("1500 x 1 MB gathered whole: %s after %lld ms: %s\n", lith__dq_rc_str(LITH_DQ_TOOBIG),
                (long long)(t_ms_now() - t0), lith__dq_errmsg(c));
  assert_int_equal(r.nrows, 0);
  lith__dq_close(c);

  /* One frame of 70 MB (one row of 70 x 1 MB): TOOBIG from its header,
   * connection closed; the node is fine. */
  c = open_db("each.db", &db);
  char sql[2048];
  size_t len = (size_t)snprintf(sql, sizeof sql, "SELECT 1 AS n");
  for (int i = 0; i < 70; i++)
    len += (size_t)snprintf(sql + len, sizeof sql - len, ", zeroblob(1000000)");
  each_init(&e, 0);
  assert_int_equal(lith__dq_query_each(c, db, sql, NULL, 0, on_rows, &e, 0), LITH_DQ_TOOBIG);
  assert_int_equal(e.parts, 0);
  assert_false(lith__dq_connected(c));
  assert_non_null(strstr(lith__dq_errmsg(c), "frame"));
  lith__dq_close(c);

  /* A deadline already past: TIMEOUT, nothing sent, closed. */
  c = open_db("each.db", &db);
  assert_int_equal(lith__dq_query_each(c, db, "SELECT 1 AS n", NULL, 0, on_rows, &e, t_ms_now() - 1),
                   LITH_DQ_TIMEOUT);
  assert_false(lith__dq_connected(c));
  lith__dq_close(c);
  c = open_db("each.db", &db);
  assert_int_equal(query_int(c, db, "SELECT count(*) FROM big"), 2000);
  lith__dq_close(c);
}

/* A fake that answers a query with ROWS parts of `rows` rows of `pad`
 * bytes, every `every_ms`, `parts` of them (0: forever) then DONE; an
 * INTERRUPT with EMPTY, a LEADER with itself. */
typedef struct stream {
  int rows, every_ms, parts;
  size_t pad;
  atomic_int interrupts, leaders;
} stream;

static int stream_respond(void *arg, const t_fake_call *call, lith__dq_buf *out) {
  stream *st = arg;
  if (call->type == LITH_DQ_REQ_INTERRUPT) {
    atomic_fetch_add(&st->interrupts, 1);
    lith__dq_req_begin(out, LITH_DQ_RES_EMPTY);
    lith__dq_put_u64(out, 0);
    lith__dq_req_end(out);
    return T_FAKE_NEXT;
  }
  if (call->type == LITH_DQ_REQ_LEADER) {
    atomic_fetch_add(&st->leaders, 1);
    lith__dq_req_begin(out, LITH_DQ_RES_SERVER);
    lith__dq_put_u64(out, 1);
    lith__dq_put_text(out, call->address);
    lith__dq_req_end(out);
    return T_FAKE_NEXT;
  }
  int last = st->parts > 0 && call->repeat + 1 >= st->parts;
  t_rows_frame(out, st->rows, st->pad, last);
  return last ? T_FAKE_NEXT : st->every_ms;
}

static lith__dq_conn *fake_conn(t_fake *f, int timeout_ms) {
  lith__dq_conn *c = lith__dq_new(timeout_ms);
  assert_non_null(f);
  assert_non_null(c);
  assert_int_equal(lith__dq_connect(c, t_fake_address(f)), LITH_DQ_OK);
  return c;
}

/* A node that sends a part every 1.5 s is cut at the deadline: the
 * handle's timeout for the whole answer, or query_each's deadline_ms. */
static void test_drip_cut_at_deadline(void **state) {
  (void)state;
  stream st = {.rows = 1, .every_ms = 1500, .parts = 10};
  t_fake *f = t_fake_script(stream_respond, &st, 1);
  lith__dq_conn *c = fake_conn(f, 2000);
  lith__dq_rows r;
  lith__dq_rows_init(&r);
  int64_t t0 = t_ms_now();
  int rc = lith__dq_query_sql(c, 0, "SELECT n", NULL, 0, &r);
  int64_t took = t_ms_now() - t0;
  print_message("drip, whole answer, timeout 2000 ms: %s after %lld ms\n", lith__dq_rc_str(rc),
                (long long)took);
  assert_int_equal(rc, LITH_DQ_TIMEOUT);
  assert_true(took >= 1990 && took < 3000);
  assert_false(lith__dq_connected(c));
  lith__dq_close(c);
  t_fake_free(f); /* one connection at a time: a fresh fake for the next */

  f = t_fake_script(stream_respond, &st, 1);
  c = fake_conn(f, 10000);
  each e;
  each_init(&e, 0);
  t0 = t_ms_now();
  rc = lith__dq_query_each(c, 0, "SELECT n", NULL, 0, on_rows, &e, t_ms_now() + 2500);
  took = t_ms_now() - t0;
  print_message("drip, query_each, deadline 2500 ms: %s after %lld ms, %d parts\n", lith__dq_rc_str(rc),
                (long long)took, e.parts);
  assert_int_equal(rc, LITH_DQ_TIMEOUT);
  assert_true(took >= 2490 && took < 3500);
  assert_int_equal(e.parts, 2); /* at 0 and 1.5 s */
  assert_false(lith__dq_connected(c));
  lith__dq_close(c);
  t_fake_free(f);
}

/* The most a TCP connection on this machine holds between a writer and a
 * reader who has stopped reading: the largest send buffer and the largest
 * receive buffer the kernel grows a socket's to (tcp_wmem's and tcp_rmem's
 * third numbers; 32 MiB each if they cannot be read). */
static uint64_t tcp_in_flight_max(void) {
  static const char *const files[2] = {"/proc/sys/net/ipv4/tcp_wmem", "/proc/sys/net/ipv4/tcp_rmem"};
  uint64_t sum = 0;
  for (int i = 0; i < 2; i++) {
    unsigned long long lo = 0, mid = 0, hi = 0;
    FILE *f = fopen(files[i], "r");
    if (f == NULL || fscanf(f, "%llu %llu %llu", &lo, &mid, &hi) != 3)
      hi = 32u << 20;
    if (f != NULL)
      fclose(f);
    sum += hi;
  }
  return sum;
}

/* A node that sends parts forever: on_rows stops it, with one part's
 * memory; the node never ends the result, so the drain gives up at
 * LITH_DQ_DRAIN_MAX and closes. The whole-answer call stops at
 * LITH_DQ_MAX_ANSWER. The client reads at most that and one part more
 * (after a stop: the parts it took), then the drain's LITH_DQ_DRAIN_MAX;
 * what the fake node sent is that and what the kernel held in the two
 * sockets' buffers when the client closed. That grows with the time the
 * client is kept off the CPU while the node writes, up to the buffers'
 * largest (tcp_wmem's + tcp_rmem's: 36 MiB on the 2-core machine), so it
 * is the bound's slack: a fixed 16 MiB was less than a busy machine may
 * hold. A drain without its bound reads on until the handle's timeout:
 * gigabytes. 3000 parts (200 MB), fewer under LITH_TEST_SCALE, within
 * SLOW_OK_MS (20 s was too short under TSan on a busy machine). */
static void test_endless_parts(void **state) {
  (void)state;
  /* static: a failed assertion leaves the fake's thread running on it */
  static stream st;
  st = (stream){.rows = 64, .pad = 1000, .every_ms = 0, .parts = 0}; /* ~66 KB a part */
  const int stop_at = scaled(3000);
  lith__dq_buf one;
  lith__dq_buf_init(&one);
  t_rows_frame(&one, st.rows, st.pad, 0);
  uint64_t part = one.len; /* what the fake sends for each */
  lith__dq_buf_free(&one);
  uint64_t in_flight = tcp_in_flight_max();
  t_fake *f = t_fake_script(stream_respond, &st, 1);
  lith__dq_conn *c = fake_conn(f, SLOW_OK_MS);
  each e;
  each_init(&e, stop_at);
  int64_t t0 = t_ms_now();
  int rc = lith__dq_query_each(c, 0, "SELECT n", NULL, 0, on_rows, &e, 0);
  int64_t took = t_ms_now() - t0;
  uint64_t sent = t_fake_written(f);
  /* the parts taken, then the drain's bound, and what the kernel held */
  uint64_t most = (uint64_t)stop_at * part + LITH_DQ_DRAIN_MAX + part + in_flight;
  print_message(
      "endless parts: %s after %d parts (%zu rows, %llu bytes sent, at most %llu) in %lld ms; RSS %ld -> %ld "
      "KiB at most; %s\n",
      lith__dq_rc_str(rc), e.parts, e.rows, (unsigned long long)sent, (unsigned long long)most,
      (long long)took, e.rss0, e.rss_max, lith__dq_errmsg(c));
  assert_int_equal(rc, LITH_DQ_STOPPED);
  assert_int_equal(e.parts, stop_at);
  assert_true(sent < most);
  assert_true(e.rss_max - e.rss0 < RSS_SLACK_KIB + 8 * 1024);
  assert_false(lith__dq_connected(c));
  lith__dq_close(c);
  t_fake_free(f);

  f = t_fake_script(stream_respond, &st, 1);
  c = fake_conn(f, SLOW_OK_MS);
  lith__dq_rows r;
  lith__dq_rows_init(&r);
  rc = lith__dq_query_sql(c, 0, "SELECT n", NULL, 0, &r);
  sent = t_fake_written(f);
  most = (uint64_t)LITH_DQ_MAX_ANSWER + LITH_DQ_DRAIN_MAX + 2 * part + in_flight;
  print_message("endless parts, whole answer: %s after %llu bytes sent (at most %llu): %s\n",
                lith__dq_rc_str(rc), (unsigned long long)sent, (unsigned long long)most, lith__dq_errmsg(c));
  assert_int_equal(rc, LITH_DQ_TOOBIG);
  assert_int_equal(r.nrows, 0);
  assert_true(sent < most);
  lith__dq_close(c);
  t_fake_free(f);
}

/* The stop as libdqlite 1.11.1 answers it: the rest of the result, DONE,
 * then EMPTY for the INTERRUPT: the connection is in step afterwards. */
static void test_stop_drains(void **state) {
  (void)state;
  stream st = {.rows = 10, .pad = 8, .every_ms = 0, .parts = 5};
  t_fake *f = t_fake_script(stream_respond, &st, 0);
  lith__dq_conn *c = fake_conn(f, 5000);
  each e;
  each_init(&e, 2);
  assert_int_equal(lith__dq_query_each(c, 0, "SELECT n", NULL, 0, on_rows, &e, 0), LITH_DQ_STOPPED);
  assert_int_equal(e.parts, 2);
  assert_true(lith__dq_connected(c));
  uint64_t id;
  const char *addr;
  assert_int_equal(lith__dq_leader(c, &id, &addr), LITH_DQ_OK); /* the next answer is the next request's */
  assert_string_equal(addr, t_fake_address(f));
  assert_int_equal(atomic_load(&st.interrupts), 1);
  lith__dq_close(c);
  t_fake_free(f);
}

/* Garbage to every LEADER: lith__dq_connect_leader backs off (10 ms
 * doubling to 1 s) instead of asking again and again. */
static int garbage_respond(void *arg, const t_fake_call *call, lith__dq_buf *out) {
  (void)arg;
  (void)call;
  lith__dq_req_begin(out, 200); /* no such answer type */
  lith__dq_put_u64(out, 0);
  lith__dq_req_end(out);
  return T_FAKE_CLOSE;
}

static void test_connect_leader_backs_off(void **state) {
  (void)state;
  t_fake *f = t_fake_script(garbage_respond, NULL, 1);
  assert_non_null(f);
  lith__dq_conn *c = lith__dq_new(1000);
  int64_t t0 = t_ms_now();
  int rc = lith__dq_connect_leader(c, t_fake_address(f), 3000);
  int64_t took = t_ms_now() - t0;
  int n = t_fake_connections(f);
  print_message("connect_leader against garbage: %s after %lld ms, %d connections\n", lith__dq_rc_str(rc),
                (long long)took, n);
  assert_int_equal(rc, LITH_DQ_PROTO);
  assert_true(took >= 2990 && took < 4000);
  assert_true(n >= 5 && n <= 14); /* 0, 10, 30, 70, 150, 310, 630, 1270, 2270, 3000 ms */
  lith__dq_close(c);
  t_fake_free(f);
}

/* ---- OPEN for writing (lith__dq_open_writer) ---- */

/* "INSERT INTO t SELECT randomblob(500000) ..." for n rows. */
static void insert_blobs(lith__dq_conn *c, uint32_t db, int n) {
  char sql[256];
  snprintf(sql, sizeof sql,
           "INSERT INTO t SELECT randomblob(500000) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL "
           "SELECT x + 1 FROM c WHERE x < %d) SELECT x FROM c)",
           n);
  exec_ok(c, db, sql);
}

/* A transaction larger than the page cache, begun just after the node
 * checkpointed its WAL, reads back pages it wrote: libdqlite 1.11.1 fails
 * that read ("disk I/O error", the transaction rolled back) once SQLite
 * spilled them (client.h). These sizes showed it on every run: 9 rows of
 * 500 kB pass the node's checkpoint threshold, 7 more spill. */
static void test_open_writer_no_spill(void **state) {
  (void)state;
  uint32_t db;
  lith__dq_conn *c = lith__dq_new(5000);
  assert_int_equal(lith__dq_connect(c, node.address), LITH_DQ_OK);
  assert_int_equal(lith__dq_open_writer(c, "spill.db", &db), LITH_DQ_OK);
  exec_ok(c, db, "CREATE TABLE t(v)");
  insert_blobs(c, db, 9);
  exec_ok(c, db, "BEGIN");
  insert_blobs(c, db, 7);
  assert_int_equal(query_int(c, db, "SELECT count(*) FROM t"), 16);
  exec_ok(c, db, "COMMIT");
  assert_int_equal(query_int(c, db, "SELECT count(*) FROM t"), 16);
  lith__dq_close(c);
}

/* ---- DUMP (lith__dq_dump) ---- */

/* A scratch file for a dump, opened read-write; its path in path[64]. */
static int dump_file(const char *what, char path[64]) {
  snprintf(path, 64, "dump-%s-%d", what, (int)getpid());
  unlink(path);
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  assert_true(fd >= 0);
  return fd;
}

static off_t file_size(const char *path) {
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  return st.st_size;
}

/* A real node's dump of a database with rows in its WAL: two files, NAME
 * and NAME-wal, that SQLite opens (as a main file and its WAL) with every
 * row, passing integrity_check; a database never made: two empty files;
 * the cap below the dump's size: TOOBIG, nothing written, the connection
 * closed; the cancel flag set: STOPPED. */
static void test_dump_node(void **state) {
  (void)state;
  uint32_t db;
  char main_path[64], wal_path[64], path[80];
  uint64_t sizes[2] = {9, 9};
  lith__dq_conn *c = open_db("dumped", &db);
  exec_ok(c, db, "CREATE TABLE t(n INTEGER PRIMARY KEY, b BLOB)");
  for (int i = 0; i < 50; i++)
    exec_ok(c, db, "INSERT INTO t(b) VALUES (randomblob(3000))");
  int fds[2] = {dump_file("main", main_path), dump_file("wal", wal_path)};
  int rc = lith__dq_dump(c, "dumped", fds, sizes, 1u << 30, 0);
  if (rc != LITH_DQ_OK)
    fail_msg("dump: %s: %s", lith__dq_rc_str(rc), lith__dq_errmsg(c));
  print_message("dump: main %llu bytes, wal %llu bytes\n", (unsigned long long)sizes[0],
                (unsigned long long)sizes[1]);
  assert_true(sizes[0] >= 4096 && sizes[1] > 0);
  assert_int_equal(file_size(main_path), (off_t)sizes[0]);
  assert_int_equal(file_size(wal_path), (off_t)sizes[1]);
  assert_int_equal(query_int(c, db, "SELECT count(*) FROM t"), 50); /* the connection is in step */
  close(fds[0]);
  close(fds[1]);
  /* As SQLite would find them: a main file and its WAL beside it. */
  snprintf(path, sizeof path, "%s-wal", main_path);
  assert_int_equal(rename(wal_path, path), 0);
  sqlite3 *s = NULL;
  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_open_v2(main_path, &s, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_prepare_v2(s, "SELECT count(*), sum(length(b)) FROM t", -1, &st, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_int_equal(sqlite3_column_int64(st, 0), 50);
  assert_int_equal(sqlite3_column_int64(st, 1), 150000);
  sqlite3_finalize(st);
  assert_int_equal(sqlite3_prepare_v2(s, "PRAGMA integrity_check", -1, &st, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_string_equal((const char *)sqlite3_column_text(st, 0), "ok");
  sqlite3_finalize(st);
  sqlite3_close(s);
  unlink(main_path);
  unlink(path);
  snprintf(path, sizeof path, "%s-shm", main_path);
  unlink(path);

  /* Never made: two empty files. */
  fds[0] = dump_file("main", main_path);
  fds[1] = dump_file("wal", wal_path);
  assert_int_equal(lith__dq_dump(c, "never-made", fds, sizes, 1u << 30, 0), LITH_DQ_OK);
  assert_true(sizes[0] == 0 && sizes[1] == 0);
  /* The cap: refused from the header, nothing written, the connection closed. */
  assert_int_equal(lith__dq_dump(c, "dumped", fds, sizes, 4096, 0), LITH_DQ_TOOBIG);
  assert_non_null(strstr(lith__dq_errmsg(c), "limit"));
  assert_false(lith__dq_connected(c));
  assert_int_equal(file_size(main_path), 0);
  assert_int_equal(file_size(wal_path), 0);
  /* A file that cannot take it (/dev/full): IO with the write's errno,
   * closed (the rest of the frame unread). */
  int full = open("/dev/full", O_WRONLY | O_CLOEXEC);
  if (full >= 0) {
    int fds_full[2] = {full, fds[1]};
    assert_int_equal(lith__dq_connect(c, node.address), LITH_DQ_OK);
    assert_int_equal(lith__dq_dump(c, "dumped", fds_full, sizes, 1u << 30, 0), LITH_DQ_IO);
    assert_int_equal(lith__dq_errcode(c), ENOSPC);
    assert_non_null(strstr(lith__dq_errmsg(c), "writing the dump"));
    assert_false(lith__dq_connected(c));
    close(full);
  }
  /* Cancelled: STOPPED at its first wait, closed. A node that does not
   * answer, so that there is a wait (a real one may answer before the
   * first recv on a busy machine: nothing to cancel, the dump is whole). */
  atomic_int stop = 1;
  t_fake *mute = t_fake_start("", 0, 0);
  assert_non_null(mute);
  assert_int_equal(lith__dq_connect(c, t_fake_address(mute)), LITH_DQ_OK);
  lith__dq_set_cancel(c, &stop);
  assert_int_equal(lith__dq_dump(c, "dumped", fds, sizes, 1u << 30, 0), LITH_DQ_STOPPED);
  assert_false(lith__dq_connected(c));
  t_fake_free(mute);
  close(fds[0]);
  close(fds[1]);
  unlink(main_path);
  unlink(wal_path);
  lith__dq_close(c);
}

/* A fake node's FILES: what a hostile node may send instead of a dump. */
static int dump_against(const void *reply, size_t n, uint64_t cap, uint64_t sizes[2], char wrote[2][64]) {
  char p0[64], p1[64];
  int fds[2] = {dump_file("f0", p0), dump_file("f1", p1)};
  t_fake *f = t_fake_start(reply, n, 1);
  assert_non_null(f);
  lith__dq_conn *c = lith__dq_new(2000);
  assert_int_equal(lith__dq_connect(c, t_fake_address(f)), LITH_DQ_OK);
  int rc = lith__dq_dump(c, "x", fds, sizes, cap, 0);
  for (int i = 0; i < 2; i++) {
    ssize_t k = pread(fds[i], wrote[i], 63, 0);
    wrote[i][k > 0 ? k : 0] = '\0';
    close(fds[i]);
  }
  unlink(p0);
  unlink(p1);
  lith__dq_close(c);
  t_fake_free(f);
  return rc;
}

static void test_dump_untrusted(void **state) {
  (void)state;
  uint64_t sizes[2];
  char wrote[2][64];
  /* Well-formed: "x" of 8 bytes, "x-wal" of 0. */
  const uint8_t good[8 + 48] = {6,   0,   0,   0,   LITH_DQ_RES_FILES,
                                0,   0,   0,   2,   0,
                                0,   0,   0,   0,   0,
                                0,   'x', 0,   0,   0,
                                0,   0,   0,   0,   8,
                                0,   0,   0,   0,   0,
                                0,   0,   'a', 'b', 'c',
                                'd', 'e', 'f', 'g', 'h',
                                'x', '-', 'w', 'a', 'l',
                                0,   0,   0,   0,   0,
                                0,   0,   0,   0,   0,
                                0};
  assert_int_equal(dump_against(good, sizeof good, 1u << 20, sizes, wrote), LITH_DQ_OK);
  assert_true(sizes[0] == 8 && sizes[1] == 0);
  assert_string_equal(wrote[0], "abcdefgh");
  assert_string_equal(wrote[1], "");
  /* Each of these is refused. */
  uint8_t bad[sizeof good];
  memcpy(bad, good, sizeof bad);
  bad[24] = 9; /* a size past the body */
  assert_int_equal(dump_against(bad, sizeof bad, 1u << 20, sizes, wrote), LITH_DQ_PROTO);
  assert_string_equal(wrote[0], ""); /* refused before a byte of it */
  memcpy(bad, good, sizeof bad);
  bad[40] = 'y'; /* the WAL's name is not x-wal */
  assert_int_equal(dump_against(bad, sizeof bad, 1u << 20, sizes, wrote), LITH_DQ_PROTO);
  memcpy(bad, good, sizeof bad);
  bad[8] = 3; /* three files */
  assert_int_equal(dump_against(bad, sizeof bad, 1u << 20, sizes, wrote), LITH_DQ_PROTO);
  memcpy(bad, good, sizeof bad);
  bad[8] = 1; /* one file, the rest trailing: too few */
  assert_int_equal(dump_against(bad, sizeof bad, 1u << 20, sizes, wrote), LITH_DQ_PROTO);
  memcpy(bad, good, sizeof bad);
  bad[4] = LITH_DQ_RES_ROWS; /* not FILES */
  assert_int_equal(dump_against(bad, sizeof bad, 1u << 20, sizes, wrote), LITH_DQ_PROTO);
  /* Over the cap: refused from the header. */
  assert_int_equal(dump_against(good, sizeof good, 40, sizes, wrote), LITH_DQ_TOOBIG);
  /* A header announcing 32 GiB (no cap of the client's refuses it: the
   * caller's cap does), then the node closes: IO, never a 32 GiB buffer. */
  const uint8_t huge[8 + 16] = {0xff, 0xff, 0xff, 0xff, LITH_DQ_RES_FILES, 0, 0, 0, 2};
  assert_int_equal(dump_against(huge, sizeof huge, UINT64_MAX, sizes, wrote), LITH_DQ_IO);
  /* A FAILURE after the count word (handle_dump's): read from its end. */
  const uint8_t failure[8 + 32] = {4,   0,   0,   0,   LITH_DQ_RES_FAILURE,
                                   0,   0,   0,   2,   0,
                                   0,   0,   0,   0,   0,
                                   0,   11,  0,   0,   0,
                                   0,   0,   0,   0,   'c',
                                   'o', 'r', 'r', 'u', 'p',
                                   't'};
  assert_int_equal(dump_against(failure, sizeof failure, 1u << 20, sizes, wrote), LITH_DQ_FAILURE);
}

/* A node that goes silent during its dump (stopped, cut off without a
 * reset): the call ends once nothing came for the handle's timeout, not
 * at the dump's deadline (30 min in lithd), before the header or after
 * part of the body. */
static void test_dump_silent(void **state) {
  (void)state;
  /* The header and one word of a FILES answer of 6 words, then nothing. */
  const uint8_t part[16] = {6, 0, 0, 0, LITH_DQ_RES_FILES, 0, 0, 0, 2};
  for (int k = 0; k < 2; k++) {
    char p0[64], p1[64];
    int fds[2] = {dump_file("s0", p0), dump_file("s1", p1)};
    t_fake *f = t_fake_start(part, k == 0 ? 0 : sizeof part, 0);
    assert_non_null(f);
    lith__dq_conn *c = lith__dq_new(500);
    assert_int_equal(lith__dq_connect(c, t_fake_address(f)), LITH_DQ_OK);
    int64_t t0 = t_ms_now();
    assert_int_equal(lith__dq_dump(c, "x", fds, NULL, 1u << 20, t0 + 60000), LITH_DQ_TIMEOUT);
    int64_t took = t_ms_now() - t0;
    print_message("a silent node (%s): TIMEOUT after %lld ms: %s\n",
                  k == 0 ? "no header" : "part of the body", (long long)took, lith__dq_errmsg(c));
    assert_true(took >= 450 && took < 3000);
    assert_non_null(strstr(lith__dq_errmsg(c), "nothing from"));
    lith__dq_close(c);
    t_fake_free(f);
    for (int i = 0; i < 2; i++)
      close(fds[i]);
    unlink(p0);
    unlink(p1);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_open_writer_no_spill),
      cmocka_unit_test(test_dump_node),
      cmocka_unit_test(test_dump_untrusted),
      cmocka_unit_test(test_dump_silent),
      cmocka_unit_test(test_leader_client_cluster_open),
      cmocka_unit_test(test_values_round_trip),
      cmocka_unit_test(test_failures),
      cmocka_unit_test(test_batch_steps),
      cmocka_unit_test(test_prepared),
      cmocka_unit_test(test_node_bounds),
      cmocka_unit_test(test_untrusted_node),
      cmocka_unit_test(test_query_each_node),
      cmocka_unit_test(test_drip_cut_at_deadline),
      cmocka_unit_test(test_endless_parts),
      cmocka_unit_test(test_stop_drains),
      cmocka_unit_test(test_connect_leader_backs_off),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
