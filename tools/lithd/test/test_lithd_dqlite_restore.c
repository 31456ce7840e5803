/*
 * test_lithd_dqlite_restore — lithd --dqlite --restore (issue 34, item 2;
 * ops/dqlite_restore.h) on three lith-node processes (dqlite/test/nodes.h):
 *   - test_seed_awkward: a file with what a copy through SQL gets wrong
 *     (blobs, text holding NUL, rows of 900 KB over several transactions,
 *     WITHOUT ROWID, AUTOINCREMENT with a sequence past its rows, rowids
 *     with gaps and under _rowid_, a generated column, triggers that must
 *     not fire on the copy, views, indexes, foreign keys, user_version and
 *     application_id) is loaded and compared table by table, row by row,
 *     value by value (type and bytes) against the file, with the schema,
 *     integrity_check on the cluster, and the trigger still working;
 *   - test_refusals: a database that is not empty, a corrupt file, a
 *     missing one, not an SQLite file, --force: each refused (the cluster's
 *     database left empty), exit 1 (2 for --force);
 *   - test_partial_load: a load cut midway (a value longer than the nodes'
 *     --max-value-bytes, in the last table: rows committed before it) is
 *     said to be partial; a second --restore into it says so; lithd
 *     --dqlite refuses to serve it;
 *   - test_local_schema_moves: a local lithd's file (--schema counted in
 *     user_version) restored into the cluster; lithd --dqlite with the
 *     same --schema applies nothing again;
 *   - test_backup_wipe_restore: the end to end: writers under load
 *     recording every id answered 200, GET /v1/backup downloaded meanwhile
 *     (it passes integrity_check), the cluster wiped (lithd and the nodes
 *     killed, their directories removed), a new cluster, --restore from
 *     the backup, lithd on it: every id answered before the backup began
 *     is there, and integrity_check says ok.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "child.h"
#include "client.h"
#include "nodes.h"

static t_node nodes[3];
static char all[256];

/* ---- Clusters ---- */

/* Three new nodes with directories <prefix>1..3 (removed first). */
static void cluster_start(const char *prefix) {
  char join2[160], cmd[256];
  for (int i = 0; i < 3; i++) {
    t_node_init(&nodes[i], i + 1);
    snprintf(nodes[i].dir, sizeof nodes[i].dir, "%s%d", prefix, i + 1);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", nodes[i].dir);
    assert_int_equal(system(cmd), 0);
  }
  snprintf(all, sizeof all, "%s,%s,%s", nodes[0].address, nodes[1].address, nodes[2].address);
  snprintf(join2, sizeof join2, "%s,%s", nodes[0].address, nodes[1].address);
  assert_int_equal(t_node_start(&nodes[0], NULL, 10000), 0);
  assert_int_equal(t_node_start(&nodes[1], nodes[0].address, 15000), 0);
  assert_int_equal(t_node_start(&nodes[2], join2, 15000), 0);
}

/* Every node killed, its directory removed: the cluster is gone. */
static void cluster_wipe(void) {
  char cmd[256];
  for (int i = 0; i < 3; i++) {
    if (nodes[i].pid > 0)
      t_node_stop(&nodes[i], SIGKILL, 5000);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", nodes[i].dir);
    assert_int_equal(system(cmd), 0);
  }
}

static lith__dq_conn *leader_conn(const char *name, uint32_t *db) {
  char err[512];
  lith__dq_conn *c = t_leader_conn(all, name, "SELECT 1", 15000, db, err, sizeof err);
  if (c == NULL)
    fail_msg("no leader answering: %s", err);
  return c;
}

static int64_t dq_int(const char *name, const char *sql) {
  uint32_t db;
  char err[512];
  int64_t v = 0;
  lith__dq_conn *c = leader_conn(name, &db);
  if (t_query_int(c, db, sql, &v, err, sizeof err) != 0)
    fail_msg("%s: %s", sql, err);
  lith__dq_close(c);
  return v;
}

/* lithd --dqlite ALL [--dqlite-db name] --restore from: its exit code,
 * its output in out. */
static int restore(const char *name, const char *from, char *out, size_t cap) {
  if (name == NULL)
    return tl_run(TL_ARGS("--dqlite", all, "--restore", from), out, cap);
  return tl_run(TL_ARGS("--dqlite", all, "--dqlite-db", name, "--restore", from), out, cap);
}

/* ---- The file ---- */

static void exec_ok(sqlite3 *db, const char *sql) {
  char *err = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK)
    fail_msg("%s: %s", sql, err);
}

#define BIG_ROW 900000 /* under the nodes' default --max-value-bytes (1 MiB) */
#define BIG_ROWS 7     /* 6.3 MB: the rows take two transactions or more */

static const char *awkward_sql =
    "PRAGMA user_version = 42; PRAGMA application_id = 1234567;"
    "CREATE TABLE parent(id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, b BLOB, r REAL);"
    "CREATE TABLE child(id INTEGER PRIMARY KEY, pid INTEGER NOT NULL REFERENCES parent(id), note TEXT);"
    "CREATE TABLE kv(k TEXT PRIMARY KEY, v ANY) WITHOUT ROWID;"
    "CREATE TABLE plain(a, b);"        /* rowids of its own, gaps kept */
    "CREATE TABLE odd(rowid TEXT, x);" /* its rowid goes as _rowid_ */
    "CREATE TABLE gen(a INTEGER, twice INTEGER GENERATED ALWAYS AS (a * 2) STORED);"
    "CREATE TABLE big(id INTEGER PRIMARY KEY, data BLOB);"
    "CREATE TABLE audit(what TEXT, at INTEGER);"
    "CREATE INDEX child_pid ON child(pid);"
    "CREATE UNIQUE INDEX parent_name ON parent(name);"
    "CREATE INDEX plain_expr ON plain(a + 1) WHERE a > 10;"
    "CREATE VIEW named AS SELECT p.name, count(c.id) AS n FROM parent p LEFT JOIN child c ON c.pid = p.id "
    "GROUP BY p.id;"
    "CREATE VIEW named2 AS SELECT name FROM named WHERE n > 0;"
    "CREATE TRIGGER parent_ins AFTER INSERT ON parent BEGIN INSERT INTO audit VALUES('parent ' || new.name, "
    "new.id); END;"
    "INSERT INTO parent(name, b, r) VALUES ('one', X'00FF00', 1.5), ('two', zeroblob(0), -0.0),"
    "  ('three', NULL, 1e308), ('four', X'', 0.1), ('five', randomblob(3000), -1e-300);"
    "INSERT INTO parent(name, r) VALUES ('inf', 9e999), ('minf', -9e999);"
    "INSERT INTO parent(id, name) VALUES (1000, 'gone'); DELETE FROM parent WHERE id = 1000;"
    "INSERT INTO child(pid, note) VALUES (1, 'a'), (1, 'b'), (2, 'it''s'), (3, NULL);"
    "INSERT INTO kv VALUES ('int', 9223372036854775807), ('neg', -9223372036854775808), ('real', 2.5),"
    "  ('text', 'héllo ☃'), ('blob', X'DEADBEEF'), ('null', NULL), ('empty', '');"
    "INSERT INTO plain(rowid, a, b) VALUES (3, 1, 'x'), (10, 20, 'y'), (77, 30, X'01');"
    "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 3000)"
    "  INSERT INTO plain(a, b) SELECT i, printf('row %d', i) FROM c;"
    "DELETE FROM plain WHERE a % 7 = 0;"
    "INSERT INTO odd(rowid, x) VALUES ('not the rowid', 1), ('neither', 2);"
    "INSERT INTO gen(a) VALUES (1), (21), (NULL);";

/* The awkward file at path. */
static void make_awkward(const char *path) {
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  unlink(path);
  assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
  exec_ok(db, awkward_sql);
  /* Text holding U+0000, in a table with a rowid and in a WITHOUT ROWID. */
  exec_ok(db, "INSERT INTO kv VALUES ('nul', CAST(X'610062006300' AS TEXT)), (CAST(X'6B00' AS TEXT), 'key');"
              "INSERT INTO child(pid, note) VALUES (4, CAST(X'00' AS TEXT)), (5, CAST(X'7800' AS TEXT));");
  /* Big rows, enough for several transactions. */
  assert_int_equal(sqlite3_prepare_v2(db, "INSERT INTO big(data) VALUES (?)", -1, &st, NULL), SQLITE_OK);
  char *blob = malloc(BIG_ROW);
  assert_non_null(blob);
  for (int i = 0; i < BIG_ROWS; i++) {
    for (int j = 0; j < BIG_ROW; j++)
      blob[j] = (char)(i * 31 + j * 7);
    sqlite3_bind_blob(st, 1, blob, BIG_ROW, SQLITE_STATIC);
    assert_int_equal(sqlite3_step(st), SQLITE_DONE);
    sqlite3_reset(st);
  }
  sqlite3_finalize(st);
  free(blob);
  assert_int_equal(sqlite3_close(db), SQLITE_OK);
}

/* ---- Comparing ---- */

/* Each table of the file (every one must be named here), the columns and
 * order compared: typeof and the value of each (text as hex: the wire's
 * text ends at a NUL). */
static const struct {
  const char *table, *cols, *order;
} compared[] = {
    {"parent", "id,name,b,r", "id"},
    {"child", "id,pid,note", "id"},
    {"kv", "k,v", "hex(k)"},
    {"plain", "rowid,a,b", "rowid"},
    {"odd", "_rowid_,rowid,x", "_rowid_"},
    {"gen", "rowid,a,twice", "rowid"},
    {"big", "id,data", "id"},
    {"audit", "rowid,what,at", "rowid"},
    {"sqlite_sequence", "name,seq", "name"},
};

static char *compare_sql(const char *table, const char *cols, const char *order) {
  static char sql[2048];
  char c[256];
  size_t n = (size_t)snprintf(sql, sizeof sql, "SELECT ");
  snprintf(c, sizeof c, "%s", cols);
  int first = 1;
  for (char *save = NULL, *col = strtok_r(c, ",", &save); col != NULL; col = strtok_r(NULL, ",", &save)) {
    n += (size_t)snprintf(sql + n, sizeof sql - n,
                          "%stypeof(%s), CASE typeof(%s) WHEN 'text' THEN hex(%s) ELSE %s END",
                          first ? "" : ", ", col, col, col, col);
    first = 0;
  }
  snprintf(sql + n, sizeof sql - n, " FROM \"%s\" ORDER BY %s", table, order);
  return sql;
}

/* One value of the file's row against the cluster's. */
static void same_value(sqlite3_stmt *st, int i, const lith__dq_value *v, const char *where) {
  switch (sqlite3_column_type(st, i)) {
  case SQLITE_INTEGER:
    if (v->type != LITH_DQ_INTEGER || v->i != sqlite3_column_int64(st, i))
      fail_msg("%s column %d: integer %lld, the cluster's type %d", where, i, sqlite3_column_int64(st, i),
               v->type);
    break;
  case SQLITE_FLOAT: {
    double f = sqlite3_column_double(st, i);
    if (v->type != LITH_DQ_FLOAT || memcmp(&f, &v->f, sizeof f) != 0)
      fail_msg("%s column %d: real %.17g, the cluster's %.17g (type %d)", where, i, f, v->f, v->type);
    break;
  }
  case SQLITE_TEXT:
    if (v->type != LITH_DQ_TEXT || strcmp((const char *)sqlite3_column_text(st, i), (const char *)v->p) != 0)
      fail_msg("%s column %d: text %s, the cluster's type %d", where, i, sqlite3_column_text(st, i), v->type);
    break;
  case SQLITE_BLOB: {
    size_t n = (size_t)sqlite3_column_bytes(st, i);
    if (v->type != LITH_DQ_BLOB || v->n != n || (n > 0 && memcmp(v->p, sqlite3_column_blob(st, i), n) != 0))
      fail_msg("%s column %d: a blob of %zu bytes differs (the cluster's type %d, %zu bytes)", where, i, n,
               v->type, v->n);
    break;
  }
  default:
    if (v->type != LITH_DQ_NULL)
      fail_msg("%s column %d: NULL, the cluster's type %d", where, i, v->type);
  }
}

/* Every table of `file` against the cluster's database `name`, row by row;
 * the schema (sqlite_schema but rootpage), user_version, application_id. */
static void compare_all(const char *file, const char *name) {
  sqlite3 *src = NULL;
  sqlite3_stmt *st = NULL;
  uint32_t db;
  lith__dq_conn *c = leader_conn(name, &db);
  int64_t tables = 0;

  assert_int_equal(sqlite3_open_v2(file, &src, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  for (size_t t = 0; t < sizeof compared / sizeof compared[0]; t++) {
    const char *sql = compare_sql(compared[t].table, compared[t].cols, compared[t].order);
    lith__dq_rows rows;
    size_t r = 0;
    char where[128];
    lith__dq_rows_init(&rows);
    if (lith__dq_query_sql(c, db, sql, NULL, 0, &rows) != LITH_DQ_OK)
      fail_msg("%s on the cluster: %s", sql, lith__dq_errmsg(c));
    assert_int_equal(sqlite3_prepare_v2(src, sql, -1, &st, NULL), SQLITE_OK);
    while (sqlite3_step(st) == SQLITE_ROW) {
      snprintf(where, sizeof where, "table %s row %zu", compared[t].table, r);
      if (r >= rows.nrows)
        fail_msg("%s: missing on the cluster", where);
      assert_int_equal((unsigned)sqlite3_column_count(st), rows.ncols);
      for (unsigned i = 0; i < rows.ncols; i++)
        same_value(st, (int)i, lith__dq_rows_at(&rows, r, i), where);
      r++;
    }
    sqlite3_finalize(st);
    if (r != rows.nrows)
      fail_msg("table %s: %zu rows in the file, %zu on the cluster", compared[t].table, r, rows.nrows);
    lith__dq_rows_free(&rows);
  }
  /* Every table of the file was compared. */
  assert_int_equal(
      sqlite3_prepare_v2(src, "SELECT count(*) FROM sqlite_schema WHERE type = 'table'", -1, &st, NULL),
      SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  tables = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  assert_int_equal(tables, (int64_t)(sizeof compared / sizeof compared[0]));
  {
    /* The schema, as text, and the header's numbers. */
    const char *q = "SELECT group_concat(type || ' ' || name || ' ' || tbl_name || ' ' || ifnull(sql, ''), "
                    "char(10)) FROM (SELECT * FROM sqlite_schema ORDER BY name)";
    lith__dq_rows rows;
    lith__dq_rows_init(&rows);
    assert_int_equal(lith__dq_query_sql(c, db, q, NULL, 0, &rows), LITH_DQ_OK);
    assert_int_equal(sqlite3_prepare_v2(src, q, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)lith__dq_rows_at(&rows, 0, 0)->p,
                        (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    lith__dq_rows_free(&rows);
  }
  {
    char err[256];
    int64_t v;
    assert_int_equal(t_query_int(c, db, "SELECT user_version FROM pragma_user_version", &v, err, sizeof err),
                     0);
    assert_int_equal(v, 42);
    assert_int_equal(
        t_query_int(c, db, "SELECT application_id FROM pragma_application_id", &v, err, sizeof err), 0);
    assert_int_equal(v, 1234567);
  }
  sqlite3_close(src);
  lith__dq_close(c);
}

/* PRAGMA integrity_check on the cluster's database `name`: "ok". */
static void cluster_integrity_ok(const char *name) {
  uint32_t db;
  lith__dq_conn *c = leader_conn(name, &db);
  lith__dq_rows rows;
  lith__dq_rows_init(&rows);
  if (lith__dq_query_sql(c, db, "PRAGMA integrity_check", NULL, 0, &rows) != LITH_DQ_OK)
    fail_msg("integrity_check: %s", lith__dq_errmsg(c));
  assert_int_equal(rows.nrows, 1);
  assert_string_equal((const char *)lith__dq_rows_at(&rows, 0, 0)->p, "ok");
  lith__dq_rows_free(&rows);
  lith__dq_close(c);
}

/* ---- Tests ---- */

static void test_seed_awkward(void **state) {
  char out[8192];
  (void)state;
  make_awkward("awkward.db");
  int rc = restore("seed", "awkward.db", out, sizeof out);
  if (rc != 0)
    fail_msg("restore: %d: %s", rc, out);
  assert_non_null(strstr(out, "restored awkward.db into the cluster's database seed"));
  {
    /* Cut into transactions of about 2 MiB of what they write at worst:
     * the big rows (6.3 MB: 3 or more) and plain's ~2,600 rows under an
     * index, a page each (10.5 MB: 5 or more); with the schema's first. */
    const char *t = strstr(out, " bytes of values in ");
    assert_non_null(t);
    assert_true(atoi(t + strlen(" bytes of values in ")) >= 9);
  }
  compare_all("awkward.db", "seed");
  cluster_integrity_ok("seed");
  /* No marker left; the trigger came after the rows (audit holds only the
   * file's rows, compared above) and fires now. */
  assert_int_equal(dq_int("seed", "SELECT count(*) FROM sqlite_schema WHERE name = '_lith_restore'"), 0);
  {
    uint32_t db;
    lith__dq_conn *c = leader_conn("seed", &db);
    assert_int_equal(lith__dq_exec_sql(c, db, "INSERT INTO parent(name) VALUES ('new')", NULL, 0, NULL),
                     LITH_DQ_OK);
    lith__dq_close(c);
  }
  /* AUTOINCREMENT goes on from the file's sequence (1000), not its rows. */
  assert_int_equal(dq_int("seed", "SELECT id FROM parent WHERE name = 'new'"), 1001);
  assert_int_equal(dq_int("seed", "SELECT at FROM audit WHERE what = 'parent new'"), 1001);
  assert_int_equal(dq_int("seed", "SELECT count(*) FROM audit"), 9); /* the file's 8, and this one */
}

static void test_refusals(void **state) {
  char out[8192];
  FILE *f;
  (void)state;
  make_awkward("awkward.db");
  /* Not empty: "seed" holds the load above (or: load it now). */
  if (dq_int("seed", "SELECT count(*) FROM sqlite_schema") == 0)
    assert_int_equal(restore("seed", "awkward.db", out, sizeof out), 0);
  assert_int_equal(restore("seed", "awkward.db", out, sizeof out), 1);
  assert_non_null(strstr(out, "is not empty"));
  assert_non_null(strstr(out, "start a new cluster"));
  /* Missing, not SQLite, corrupt: refused before the cluster is touched. */
  assert_int_equal(restore("fresh", "missing.db", out, sizeof out), 1);
  assert_non_null(strstr(out, "cannot open missing.db"));
  f = fopen("text.db", "w");
  assert_non_null(f);
  fputs("CREATE TABLE t(a);\n", f);
  fclose(f);
  assert_int_equal(restore("fresh", "text.db", out, sizeof out), 1);
  assert_non_null(strstr(out, "not an SQLite database"));
  {
    /* A page of the table's b-tree overwritten: integrity_check fails. */
    sqlite3 *db = NULL;
    unlink("corrupt.db");
    assert_int_equal(sqlite3_open("corrupt.db", &db), SQLITE_OK);
    exec_ok(db, "PRAGMA page_size = 4096; CREATE TABLE t(a, b); CREATE INDEX ti ON t(a);"
                "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 2000)"
                "  INSERT INTO t SELECT i, printf('%0100d', i) FROM c;");
    sqlite3_close(db);
    f = fopen("corrupt.db", "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, 4096 * 5 + 200, SEEK_SET), 0);
    for (int i = 0; i < 300; i++)
      fputc(0x5a, f);
    fclose(f);
    assert_int_equal(restore("fresh", "corrupt.db", out, sizeof out), 1);
    assert_non_null(strstr(out, "integrity_check"));
  }
  /* --force empties no cluster. */
  assert_int_equal(tl_run(TL_ARGS("--dqlite", all, "--restore", "awkward.db", "--force"), out, sizeof out),
                   2);
  assert_non_null(strstr(out, "a cluster's database is never replaced"));
  assert_int_equal(dq_int("fresh", "SELECT count(*) FROM sqlite_schema"), 0);
}

static void test_partial_load(void **state) {
  char out[8192];
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  (void)state;
  make_awkward("partial.db");
  /* A last table with a value longer than the nodes take (1 MiB): the
   * rows before it are committed, then the load fails. */
  assert_int_equal(sqlite3_open("partial.db", &db), SQLITE_OK);
  exec_ok(db, "CREATE TABLE zz_last(v BLOB)");
  assert_int_equal(sqlite3_prepare_v2(db, "INSERT INTO zz_last VALUES (zeroblob(1500000))", -1, &st, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_DONE);
  sqlite3_finalize(st);
  sqlite3_close(db);
  assert_int_equal(restore("part", "partial.db", out, sizeof out), 1);
  assert_non_null(strstr(out, "--max-value-bytes"));
  assert_non_null(strstr(out, "now holds a partial load"));
  assert_true(dq_int("part", "SELECT count(*) FROM big") > 0); /* rows were committed */
  assert_int_equal(dq_int("part", "SELECT count(*) FROM _lith_restore WHERE state = 'loading'"), 1);
  /* A second restore says what the database holds. */
  assert_int_equal(restore("part", "awkward.db", out, sizeof out), 1);
  assert_non_null(strstr(out, "holds a partial load: lithd --restore of partial.db begun"));
  /* lithd does not serve it. */
  assert_int_equal(
      tl_run(TL_ARGS("--dqlite", all, "--dqlite-db", "part", "--listen", "127.0.0.1:0"), out, sizeof out), 1);
  assert_non_null(strstr(out, "holds a partial load"));
}

/* A local lithd's file, its --schema counted in user_version, moved to
 * the cluster: lithd --dqlite with the same --schema applies nothing
 * again (it failed "table notes already exists"). */
static void test_local_schema_moves(void **state) {
  struct tl_child local, moved;
  char out[8192];
  FILE *f = fopen("app.sql", "w");
  (void)state;
  assert_non_null(f);
  fputs("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT);\n-- step 2\nCREATE INDEX notes_body ON "
        "notes(body);\n",
        f);
  fclose(f);
  tl_start(&local, "local", 0, TL_ARGS("--schema", "app.sql"));
  tl_expect(&local, "POST", "/v1/do", NULL,
            "{\"statements\":[{\"sql\":\"INSERT INTO notes(body) VALUES ('x')\"}]}", 200, NULL);
  assert_int_equal(tl_stop(&local, SIGTERM, 10000), 0);
  int rc = restore("moved", "local.db", out, sizeof out);
  if (rc != 0)
    fail_msg("restore: %d: %s", rc, out);
  tl_start(&moved, "moved", TL_NO_DB,
           TL_ARGS("--dqlite", all, "--dqlite-db", "moved", "--schema", "app.sql"));
  tl_expect(&moved, "POST", "/v1/query", NULL, "{\"statements\":[{\"sql\":\"SELECT count(*) FROM notes\"}]}",
            200, "[[1]]");
  assert_int_equal(tl_stop(&moved, SIGTERM, 10000), 0);
}

/* ---- The end to end ---- */

#define NWRITER 6
#define MAXID 100000

static struct tl_child lithd;
static atomic_int stop_writers;
static _Atomic int64_t acked_ms[MAXID]; /* id -> when answered 200 (0: never) */
static atomic_int next_id;

static void *writer_main(void *arg) {
  struct tl_conn conn;
  (void)arg;
  tl_conn_init(&conn, &lithd);
  while (!atomic_load(&stop_writers)) {
    int id = atomic_fetch_add(&next_id, 1) + 1;
    char body[256];
    struct tl_resp r;
    if (id >= MAXID)
      break;
    snprintf(body, sizeof body,
             "{\"statements\":[{\"sql\":\"INSERT INTO acks(id, pad) VALUES (?, "
             "randomblob(64))\",\"params\":[%d]}]}",
             id);
    if (tl_conn_request(&conn, "POST", "/v1/do", NULL, body, &r, 30000) != TL_OK)
      continue;
    if (r.status == 200)
      atomic_store(&acked_ms[id], t_ms_now());
    tl_resp_free(&r);
  }
  tl_conn_close(&conn);
  return NULL;
}

/* GET `path` into the file `out` when 200 (Content-Length bytes); the
 * status. */
static int download(const char *path, const char *out, int timeout_ms) {
  char buf[65536];
  size_t len = 0, hlen = 0;
  long long length = -1, got;
  int status = 0, fd = tl_send(&lithd, "GET", path, NULL, NULL);
  int64_t deadline = t_ms_now() + timeout_ms;
  FILE *f;
  for (;;) {
    struct pollfd p = {fd, POLLIN, 0};
    assert_int_equal(poll(&p, 1, (int)(deadline - t_ms_now())), 1);
    ssize_t n = read(fd, buf + len, sizeof buf - 1 - len);
    assert_true(n > 0);
    len += (size_t)n;
    buf[len] = '\0';
    char *end = strstr(buf, "\r\n\r\n");
    if (end != NULL) {
      hlen = (size_t)(end + 4 - buf);
      break;
    }
    assert_true(len < sizeof buf - 1);
  }
  assert_int_equal(sscanf(buf, "HTTP/1.1 %d", &status), 1);
  if (status != 200) {
    close(fd);
    return status;
  }
  const char *cl = strcasestr(buf, "\r\ncontent-length:");
  assert_non_null(cl);
  length = atoll(cl + 17);
  f = fopen(out, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(buf + hlen, 1, len - hlen, f), len - hlen);
  got = (long long)(len - hlen);
  while (got < length) {
    struct pollfd p = {fd, POLLIN, 0};
    assert_int_equal(poll(&p, 1, (int)(deadline - t_ms_now())), 1);
    ssize_t n = read(fd, buf, sizeof buf);
    assert_true(n > 0);
    assert_int_equal(fwrite(buf, 1, (size_t)n, f), (size_t)n);
    got += n;
  }
  assert_int_equal(got, length);
  assert_int_equal(fclose(f), 0);
  close(fd);
  return status;
}

/* The ids of acks on the cluster into have[MAXID]. */
static void cluster_ids(unsigned char *have) {
  uint32_t db;
  lith__dq_conn *c = leader_conn("main", &db);
  lith__dq_rows rows;
  lith__dq_rows_init(&rows);
  if (lith__dq_query_sql(c, db, "SELECT id FROM acks", NULL, 0, &rows) != LITH_DQ_OK)
    fail_msg("SELECT id FROM acks: %s", lith__dq_errmsg(c));
  for (size_t i = 0; i < rows.nrows; i++) {
    int64_t id = lith__dq_rows_at(&rows, i, 0)->i;
    assert_true(id > 0 && id < MAXID);
    have[id] = 1;
  }
  lith__dq_rows_free(&rows);
  lith__dq_close(c);
}

static void test_backup_wipe_restore(void **state) {
  pthread_t w[NWRITER];
  static unsigned char in_backup[MAXID], restored[MAXID];
  char out[8192];
  int64_t began, t_restore;
  int status, acked_before = 0, acked_all = 0, backup_rows = 0;
  sqlite3 *b = NULL;
  sqlite3_stmt *st = NULL;
  (void)state;
  cluster_wipe();
  cluster_start("e2e");
  tl_start(&lithd, "e2e", TL_NO_DB, TL_ARGS("--dqlite", all, "--dqlite-failover-ms", "5000"));
  tl_expect(&lithd, "POST", "/v1/do", NULL,
            "{\"statements\":[{\"sql\":\"CREATE TABLE acks(id INTEGER PRIMARY KEY, pad BLOB)\"}]}", 200,
            NULL);
  for (int i = 0; i < NWRITER; i++)
    assert_int_equal(pthread_create(&w[i], NULL, writer_main, NULL), 0);
  /* At least 700 ms of writes and over 100 acked before the backup (the
   * check below): on a busy machine the writers are slower, so until both
   * (at most 30 s), not a fixed sleep. */
  began = t_ms_now();
  for (int acked = 0; t_ms_now() - began < 30000; acked = 0) {
    t_sleep_ms(50);
    for (int id = 1; id < MAXID && id <= atomic_load(&next_id); id++)
      acked += atomic_load(&acked_ms[id]) > 0;
    if (acked > 100 && t_ms_now() - began >= 700)
      break;
  }
  /* The backup, while the writers go on. */
  began = t_ms_now();
  status = download("/v1/backup", "backup.db", 60000);
  t_sleep_ms(200);
  atomic_store(&stop_writers, 1);
  for (int i = 0; i < NWRITER; i++)
    pthread_join(w[i], NULL);
  if (status == 501) {
    tl_stop(&lithd, SIGKILL, 5000);
    print_message("GET /v1/backup answers 501 on --dqlite: the end to end waits for it\n");
    skip();
  }
  assert_int_equal(status, 200);
  for (int id = 1; id < MAXID; id++) {
    int64_t at = atomic_load(&acked_ms[id]);
    acked_all += at > 0;
    acked_before += at > 0 && at < began;
  }
  assert_true(acked_before > 100);
  /* The backup: integrity_check, and every write answered before it. */
  assert_int_equal(sqlite3_open_v2("backup.db", &b, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_prepare_v2(b, "PRAGMA integrity_check", -1, &st, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_string_equal((const char *)sqlite3_column_text(st, 0), "ok");
  sqlite3_finalize(st);
  assert_int_equal(sqlite3_prepare_v2(b, "SELECT id FROM acks", -1, &st, NULL), SQLITE_OK);
  while (sqlite3_step(st) == SQLITE_ROW) {
    in_backup[sqlite3_column_int64(st, 0)] = 1;
    backup_rows++;
  }
  sqlite3_finalize(st);
  sqlite3_close(b);
  for (int id = 1; id < MAXID; id++)
    if (atomic_load(&acked_ms[id]) > 0 && atomic_load(&acked_ms[id]) < began && !in_backup[id])
      fail_msg("id %d answered 200 before the backup began, not in it", id);

  /* Wiped: lithd and every node killed, their directories gone. */
  tl_stop(&lithd, SIGKILL, 5000);
  cluster_wipe();
  /* A new cluster, the backup restored into it, lithd on it. */
  cluster_start("new");
  t_restore = t_ms_now();
  int rc = restore(NULL, "backup.db", out, sizeof out);
  if (rc != 0)
    fail_msg("restore: %d: %s", rc, out);
  t_restore = t_ms_now() - t_restore;
  tl_start(&lithd, "e2e2", TL_NO_DB, TL_ARGS("--dqlite", all));
  tl_expect(&lithd, "POST", "/v1/query", NULL, "{\"statements\":[{\"sql\":\"SELECT count(*) FROM acks\"}]}",
            200, NULL);
  cluster_ids(restored);
  for (int id = 1; id < MAXID; id++) {
    if (atomic_load(&acked_ms[id]) > 0 && atomic_load(&acked_ms[id]) < began && !restored[id])
      fail_msg("id %d answered 200 before the backup began, not restored", id);
    if (in_backup[id] != restored[id])
      fail_msg("id %d: %s the backup, %s the restored cluster", id, in_backup[id] ? "in" : "not in",
               restored[id] ? "in" : "not in");
  }
  cluster_integrity_ok("main");
  /* The restored cluster takes writes (the writer finds its own table,
   * _lith_batches, copied with the rest). */
  tl_expect(&lithd, "POST", "/v1/do", NULL,
            "{\"statements\":[{\"sql\":\"INSERT INTO acks(id, pad) VALUES (0, NULL)\"}]}", 200, NULL);
  print_message(
      "%d writes answered 200 before the backup began (%d in all); the backup held %d rows; restored "
      "in %lld ms, all present\n",
      acked_before, acked_all, backup_rows, (long long)t_restore);
  tl_stop(&lithd, SIGTERM, 10000);
}

static int group_setup(void **state) {
  (void)state;
  signal(SIGPIPE, SIG_IGN);
  cluster_start("node");
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
      cmocka_unit_test(test_seed_awkward),        cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_partial_load),        cmocka_unit_test(test_local_schema_moves),
      cmocka_unit_test(test_backup_wipe_restore),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
