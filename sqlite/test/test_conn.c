/*
 * Options and connections (sqlite/conn.c, sqlite/errcode.c, lib/error.c's
 * lith_errstr, through the public API; checkpoints: test_checkpoint.c):
 *   - lith_options_default fills every field with the documented default,
 *     whatever the struct held before;
 *   - every out-of-range option is refused by lith_open with LITH_MISUSE, a
 *     message naming the field, *out NULL and no file created; ":memory:",
 *     "", NULL and "file:" URIs are refused; a path in a missing directory
 *     gives LITH_CANTOPEN, a file that is not a database LITH_CORRUPT (and
 *     is left as it was); opt NULL means the defaults;
 *   - the database is in WAL mode (seen from a separate connection), the
 *     writer and the readers run with the chosen synchronous level (FULL=2,
 *     NORMAL=1), foreign keys are enforced (a violation is LITH_CONSTRAINT)
 *     and can be turned off;
 *   - migrations run once each, set user_version, a reopen with more runs
 *     only the new ones, a reopen with fewer is LITH_SCHEMA, and a failing
 *     migration rolls back everything of that open (user_version and tables
 *     unchanged) with a message naming it;
 *   - lith_errstr names every code and never returns NULL; lith_from_sqlite
 *     maps primary and extended SQLite codes;
 *   - the writer and every reader run with SQLite's defensive settings
 *     (DEFENSIVE on, TRUSTED_SCHEMA off, the FTS3 tokenizer and extensions
 *     off): fts3_tokenizer() with a pointer in the SQL text fails; the
 *     application's authorizer is consulted on reads too.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common.h"

#define DB "conn.db"

/* One text query on a fresh connection; copies the first column of the
 * first row into out. */
static void query_text(const char *path, const char *sql, char *out, size_t n) {
  sqlite3 *c = NULL;
  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_open_v2(path, &c, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
  sqlite3_busy_timeout(c, 5000);
  assert_int_equal(sqlite3_prepare_v2(c, sql, -1, &st, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  snprintf(out, n, "%s", (const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  assert_int_equal(sqlite3_close(c), SQLITE_OK);
}

static int table_exists(const char *path, const char *name) {
  char sql[256];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '%s'", name);
  return (int)t_query_int(path, sql);
}

/* ---- defaults and refused options ------------------------------------- */

static void test_defaults(void **state) {
  (void)state;
  lith_options o;
  memset(&o, 0xA5, sizeof o);
  lith_options_default(&o);
  assert_int_equal(o.synchronous, LITH_SYNC_NORMAL);
  assert_int_equal(o.checkpoint, LITH_CHECKPOINT_WRITER);
  assert_int_equal(o.checkpoint_pages, 1000);
  assert_true(o.readers >= 1);
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus > 0)
    assert_int_equal(o.readers, (int)cpus);
  assert_int_equal(o.max_batch, 1024);
  assert_int_equal(o.queue_capacity, 65536);
  assert_int_equal(o.busy_timeout_ms, 5000);
  assert_int_equal(o.cache_size_kib, 16384);
  assert_int_equal(o.mmap_size, 0);
  assert_int_equal(o.foreign_keys, 1);
  assert_int_equal(o.file_mode, 0600);
  assert_int_equal(o.stmt_cache_size, 256);
  assert_null(o.migrations);
  assert_int_equal(o.n_migrations, 0);
  assert_null(o.on_commit);
  assert_null(o.on_commit_ctx);
}

typedef struct bad_opt {
  const char *field; /* must appear in the message */
  void (*set)(lith_options *o);
} bad_opt;

static void sync0(lith_options *o) { o->synchronous = 0; }
static void sync3(lith_options *o) { o->synchronous = 3; }
static void ckpt_neg(lith_options *o) { o->checkpoint = -1; }
static void ckpt3(lith_options *o) { o->checkpoint = 3; }
static void pages0(lith_options *o) { o->checkpoint_pages = 0; }
static void readers0(lith_options *o) { o->readers = 0; }
static void readers_many(lith_options *o) { o->readers = 1025; }
static void batch0(lith_options *o) { o->max_batch = 0; }
static void queue0(lith_options *o) { o->queue_capacity = 0; }
static void busy_neg(lith_options *o) { o->busy_timeout_ms = -1; }
static void cache_neg(lith_options *o) { o->cache_size_kib = -1; }
static void mmap_neg(lith_options *o) { o->mmap_size = -1; }
static void stmts0(lith_options *o) { o->stmt_cache_size = 0; }
static void nmig_neg(lith_options *o) { o->n_migrations = -1; }
static void mode_no_owner(lith_options *o) { o->file_mode = 0400; }
static void mode_setuid(lith_options *o) { o->file_mode = 04600; }
static void mig_null(lith_options *o) {
  o->migrations = NULL;
  o->n_migrations = 2;
}

static void test_bad_options_refused(void **state) {
  (void)state;
  static const bad_opt bad[] = {
      {"synchronous", sync0},        {"synchronous", sync3},        {"checkpoint", ckpt_neg},
      {"checkpoint", ckpt3},         {"checkpoint_pages", pages0},  {"readers", readers0},
      {"readers", readers_many},     {"max_batch", batch0},         {"queue_capacity", queue0},
      {"busy_timeout_ms", busy_neg}, {"cache_size_kib", cache_neg}, {"mmap_size", mmap_neg},
      {"stmt_cache_size", stmts0},   {"n_migrations", nmig_neg},    {"migrations", mig_null},
      {"file_mode", mode_no_owner},  {"file_mode", mode_setuid},
  };
  const char *path = "refused.db";
  t_remove_db(path);
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    lith_options o;
    t_bank_options(&o);
    bad[i].set(&o);
    lith *db = (lith *)&o; /* anything non-NULL: must be set to NULL */
    int rc = lith_open(path, &o, &db);
    if (rc != LITH_MISUSE || !strstr(lith_errmsg(NULL), bad[i].field))
      fprintf(stderr, "bad option %zu (%s): %s: %s\n", i, bad[i].field, lith_errstr(rc), lith_errmsg(NULL));
    assert_int_equal(rc, LITH_MISUSE);
    assert_null(db);
    assert_non_null(strstr(lith_errmsg(NULL), bad[i].field));
    assert_int_equal(t_file_size(path), -1); /* refused before touching the disk */
  }
  /* no place for the handle */
  assert_int_equal(lith_open(path, NULL, NULL), LITH_MISUSE);
  assert_true(strlen(lith_errmsg(NULL)) > 0);
  assert_int_equal(t_file_size(path), -1);
}

static void test_paths(void **state) {
  (void)state;
  static const char *const refused[] = {":memory:", "", "file:conn_uri.db?mode=memory", "file:conn_uri.db"};
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
    lith *db = (lith *)refused;
    int rc = lith_open(refused[i], NULL, &db);
    assert_int_equal(rc, LITH_MISUSE);
    assert_null(db);
    assert_true(strlen(lith_errmsg(NULL)) > 0);
  }
  lith *db = (lith *)refused;
  assert_int_equal(lith_open(NULL, NULL, &db), LITH_MISUSE);
  assert_null(db);
  assert_int_equal(t_file_size(":memory:"), -1);
  assert_int_equal(t_file_size("conn_uri.db"), -1);

  /* a directory that does not exist */
  db = (lith *)refused;
  int rc = lith_open("no_such_dir/x.db", NULL, &db);
  assert_int_equal(rc, LITH_CANTOPEN);
  assert_null(db);
  assert_non_null(strstr(lith_errmsg(NULL), "no_such_dir/x.db"));

  /* not a database: refused as such, and the file is left alone */
  static const char junk[] = "this is not an SQLite database, only some text that is long enough "
                             "to fill a header and then some more text to be sure of it.";
  FILE *f = fopen("junk.db", "wb");
  assert_non_null(f);
  for (int i = 0; i < 64; i++)
    assert_int_equal(fwrite(junk, 1, sizeof junk - 1, f), sizeof junk - 1);
  assert_int_equal(fclose(f), 0);
  long long junk_size = t_file_size("junk.db");
  db = (lith *)refused;
  rc = lith_open("junk.db", NULL, &db);
  assert_int_equal(rc, LITH_CORRUPT);
  assert_null(db);
  assert_true(strlen(lith_errmsg(NULL)) > 0);
  assert_int_equal(t_file_size("junk.db"), junk_size);
  t_remove_db("junk.db");

  /* NULL options: the defaults, on a file */
  t_remove_db(DB);
  assert_int_equal(lith_open(DB, NULL, &db), LITH_OK);
  assert_non_null(db);
  assert_string_equal(lith_errmsg(NULL), "");
  assert_int_equal(lith_do(db, lith_cmd_sql, "CREATE TABLE d(x); INSERT INTO d VALUES (1)"), LITH_OK);
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM d"), 1);
  t_remove_db(DB);
}

/* ---- pragmas ------------------------------------------------------------ */

typedef struct pragmas {
  int64_t synchronous, raw_synchronous, foreign_keys, cache_size, busy_timeout, user_version;
  char journal_mode[16];
} pragmas;

static int read_writer_pragmas(lith_tx *tx, void *arg) {
  pragmas *p = arg;
  int rc;
  if ((rc = lith_tx_int64(tx, &p->synchronous, "PRAGMA synchronous", NULL)) != LITH_OK ||
      (rc = lith_tx_int64(tx, &p->foreign_keys, "PRAGMA foreign_keys", NULL)) != LITH_OK ||
      (rc = lith_tx_int64(tx, &p->cache_size, "PRAGMA cache_size", NULL)) != LITH_OK ||
      (rc = lith_tx_int64(tx, &p->busy_timeout, "PRAGMA busy_timeout", NULL)) != LITH_OK ||
      (rc = lith_tx_int64(tx, &p->user_version, "PRAGMA user_version", NULL)) != LITH_OK)
    return rc;
  /* through the raw connection as well */
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(lith_tx_db(tx), "PRAGMA journal_mode", -1, &st, NULL) != SQLITE_OK)
    return LITH_ERROR;
  if (sqlite3_step(st) == SQLITE_ROW)
    snprintf(p->journal_mode, sizeof p->journal_mode, "%s", (const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  if (sqlite3_prepare_v2(lith_tx_db(tx), "PRAGMA synchronous", -1, &st, NULL) != SQLITE_OK)
    return LITH_ERROR;
  p->raw_synchronous = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
  sqlite3_finalize(st);
  return LITH_OK;
}

static int read_reader_pragmas(lith_rx *rx, void *arg) {
  pragmas *p = arg;
  int rc;
  if ((rc = lith_rx_int64(rx, &p->synchronous, "PRAGMA synchronous", NULL)) != LITH_OK ||
      (rc = lith_rx_int64(rx, &p->foreign_keys, "PRAGMA foreign_keys", NULL)) != LITH_OK ||
      (rc = lith_rx_int64(rx, &p->cache_size, "PRAGMA cache_size", NULL)) != LITH_OK ||
      (rc = lith_rx_int64(rx, &p->user_version, "PRAGMA user_version", NULL)) != LITH_OK)
    return rc;
  sqlite3_stmt *st = lith_rx_stmt(rx, "PRAGMA journal_mode");
  if (!st)
    return LITH_ERROR;
  if (sqlite3_step(st) == SQLITE_ROW)
    snprintf(p->journal_mode, sizeof p->journal_mode, "%s", (const char *)sqlite3_column_text(st, 0));
  return LITH_OK;
}

static void check_sync(int level, int fk) {
  lith_options opt;
  t_bank_options(&opt);
  opt.synchronous = level;
  opt.foreign_keys = fk;
  opt.cache_size_kib = 1234;
  opt.busy_timeout_ms = 4321;
  lith *db = t_open_fresh(DB, &opt);

  pragmas w;
  memset(&w, 0, sizeof w);
  assert_int_equal(lith_do(db, read_writer_pragmas, &w), LITH_OK);
  assert_int_equal(w.synchronous, level); /* NORMAL = 1, FULL = 2 */
  assert_int_equal(w.raw_synchronous, level);
  assert_int_equal(w.foreign_keys, fk);
  assert_int_equal(w.cache_size, -1234);
  assert_int_equal(w.busy_timeout, 4321);
  assert_int_equal(w.user_version, t_bank_nmigrations);
  assert_string_equal(w.journal_mode, "wal");

  for (int i = 0; i < opt.readers + 1; i++) { /* every reader of the pool, and one again */
    pragmas r;
    memset(&r, 0, sizeof r);
    assert_int_equal(lith_read(db, read_reader_pragmas, &r), LITH_OK);
    assert_int_equal(r.synchronous, level);
    assert_int_equal(r.foreign_keys, fk);
    assert_int_equal(r.cache_size, -1234);
    assert_int_equal(r.user_version, t_bank_nmigrations);
    assert_string_equal(r.journal_mode, "wal");
  }

  /* WAL is recorded in the file: a separate plain connection sees it */
  char mode[16];
  query_text(DB, "PRAGMA journal_mode", mode, sizeof mode);
  assert_string_equal(mode, "wal");
  assert_int_equal(lith_close(db), LITH_OK);
  query_text(DB, "PRAGMA journal_mode", mode, sizeof mode);
  assert_string_equal(mode, "wal");
}

static void test_wal_and_synchronous(void **state) {
  (void)state;
  check_sync(LITH_SYNC_NORMAL, 1);
  check_sync(LITH_SYNC_FULL, 1);
  check_sync(LITH_SYNC_FULL, 0);
}

/* ---- foreign keys ------------------------------------------------------- */

static const char *const fk_migrations[] = {
    "CREATE TABLE parent(id INTEGER PRIMARY KEY);"
    "CREATE TABLE child(id INTEGER PRIMARY KEY, parent_id INTEGER NOT NULL REFERENCES parent(id));"
    "INSERT INTO parent(id) VALUES (1);",
};

static int add_child(lith_tx *tx, void *arg) {
  return lith_tx_exec(tx, "INSERT INTO child(parent_id) VALUES (?)", "I", *(const int64_t *)arg);
}

static int delete_parent(lith_tx *tx, void *arg) {
  (void)arg;
  return lith_tx_exec(tx, "DELETE FROM parent WHERE id = 1", NULL);
}

static void test_foreign_keys(void **state) {
  (void)state;
  lith_options opt;
  lith_options_default(&opt);
  opt.readers = 1;
  opt.migrations = fk_migrations;
  opt.n_migrations = 1;
  lith *db = t_open_fresh(DB, &opt);
  int64_t good = 1, bad = 99;
  assert_int_equal(lith_do(db, add_child, &good), LITH_OK);
  assert_int_equal(lith_do(db, add_child, &bad), LITH_CONSTRAINT);
  assert_non_null(strstr(lith_errmsg(db), "FOREIGN KEY"));
  assert_int_equal(lith_do(db, delete_parent, NULL), LITH_CONSTRAINT);
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM child"), 1);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM parent"), 1);

  /* off: the same statements go through */
  opt.foreign_keys = 0;
  assert_int_equal(lith_open(DB, &opt, &db), LITH_OK);
  assert_int_equal(lith_do(db, add_child, &bad), LITH_OK);
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM child WHERE parent_id = 99"), 1);
  t_remove_db(DB);
}

/* ---- migrations --------------------------------------------------------- */

static const char *const migs[] = {
    "CREATE TABLE a(x INTEGER); INSERT INTO a VALUES (1);",
    "INSERT INTO a VALUES (2);",
    "CREATE TABLE b(y INTEGER); INSERT INTO a VALUES (3);",
};

static int open_with(const char *const *m, int n, lith **db) {
  lith_options opt;
  lith_options_default(&opt);
  opt.readers = 1;
  opt.migrations = m;
  opt.n_migrations = n;
  *db = NULL;
  return lith_open(DB, &opt, db);
}

static void reopen_ok(const char *const *m, int n) {
  lith *db;
  int rc = open_with(m, n, &db);
  if (rc != LITH_OK)
    fprintf(stderr, "open with %d migrations: %s\n", n, lith_errmsg(NULL));
  assert_int_equal(rc, LITH_OK);
  assert_int_equal(lith_close(db), LITH_OK);
}

static void test_migrations_once_in_order(void **state) {
  (void)state;
  t_remove_db(DB);
  reopen_ok(migs, 1);
  assert_int_equal(t_query_int(DB, "PRAGMA user_version"), 1);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM a"), 1);
  assert_false(table_exists(DB, "b"));

  /* the same again: nothing runs twice */
  reopen_ok(migs, 1);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM a"), 1);

  /* two more: only 2 and 3 run, in order */
  reopen_ok(migs, 3);
  assert_int_equal(t_query_int(DB, "PRAGMA user_version"), 3);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM a"), 3);
  assert_int_equal(t_query_int(DB, "SELECT group_concat(x, '') FROM (SELECT x FROM a ORDER BY rowid)"), 123);
  assert_true(table_exists(DB, "b"));
  reopen_ok(migs, 3);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM a"), 3);

  /* fewer than the file has seen: the program is older than the schema */
  lith *db = (lith *)migs;
  assert_int_equal(open_with(migs, 2, &db), LITH_SCHEMA);
  assert_null(db);
  assert_non_null(strstr(lith_errmsg(NULL), "3"));
  assert_int_equal(t_query_int(DB, "PRAGMA user_version"), 3);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM a"), 3);
  /* and the refusal left no lock behind */
  reopen_ok(migs, 3);
  t_remove_db(DB);
}

/* A migration may not end lith's transaction: a COMMIT in it is refused
 * and nothing of that open stays. */
static void test_migration_cannot_commit(void **state) {
  (void)state;
  static const char *const sneaky[] = {
      "CREATE TABLE a(x INTEGER);",
      "CREATE TABLE b(y INTEGER); COMMIT; CREATE TABLE c(z INTEGER);",
  };
  t_remove_db(DB);
  lith *db = (lith *)sneaky;
  int rc = open_with(sneaky, 2, &db);
  assert_int_not_equal(rc, LITH_OK);
  assert_null(db);
  assert_non_null(strstr(lith_errmsg(NULL), "migration 2"));
  assert_non_null(strstr(lith_errmsg(NULL), "not authorized"));
  assert_int_equal(t_query_int(DB, "PRAGMA user_version"), 0);
  assert_false(table_exists(DB, "a"));
  assert_false(table_exists(DB, "b"));
  assert_false(table_exists(DB, "c"));
  /* and a good set still applies afterwards */
  reopen_ok(migs, 1);
  assert_int_equal(t_query_int(DB, "PRAGMA user_version"), 1);
  t_remove_db(DB);
}

/* Migrations commit no row without its parent: a table redefined under
 * the rows that reference it (SQLite's advice, defer_foreign_keys around
 * it) commits when every row keeps its parent, and fails whole when one
 * does not (defer_foreign_keys = OFF forgets SQLite's own count: PRAGMA
 * foreign_key_check decides). With foreign keys off, it is not checked. */
static void test_migrations_foreign_keys(void **state) {
  (void)state;
  static const char *const m[] = {
      "CREATE TABLE p(id INTEGER PRIMARY KEY, v TEXT);"
      "CREATE TABLE ch(id INTEGER PRIMARY KEY, pid INTEGER NOT NULL REFERENCES p(id));"
      "INSERT INTO p VALUES (1, '1'), (2, '2'); INSERT INTO ch(pid) VALUES (1), (2);",
      "PRAGMA defer_foreign_keys = ON; CREATE TABLE p2(id INTEGER PRIMARY KEY, v INTEGER);"
      "INSERT INTO p2 SELECT * FROM p WHERE id <> 1; DROP TABLE p; ALTER TABLE p2 RENAME TO p;"
      "PRAGMA defer_foreign_keys = OFF;",
  };
  static const char *const good[] = {
      m[0], "PRAGMA defer_foreign_keys = ON; CREATE TABLE p2(id INTEGER PRIMARY KEY, "
            "v INTEGER); INSERT INTO p2 SELECT * FROM p; DROP TABLE p; ALTER TABLE p2 "
            "RENAME TO p; PRAGMA defer_foreign_keys = OFF;"};
  t_remove_db(DB);
  reopen_ok(m, 1);
  lith *db = (lith *)m;
  assert_int_equal(open_with(m, 2, &db), LITH_CONSTRAINT);
  assert_null(db);
  assert_non_null(strstr(lith_errmsg(NULL), "migrations 2..2: FOREIGN KEY constraint failed"));
  assert_int_equal(t_query_int(DB, "PRAGMA user_version"), 1);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM p WHERE typeof(v) = 'text'"), 2);
  reopen_ok(good, 2);
  assert_int_equal(t_query_int(DB, "PRAGMA user_version"), 2);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM p WHERE typeof(v) = 'integer'"), 2);
  /* foreign keys off: lith does not check them, in migrations either */
  t_remove_db(DB);
  lith_options opt;
  lith_options_default(&opt);
  opt.readers = 1;
  opt.foreign_keys = 0;
  opt.migrations = m;
  opt.n_migrations = 2;
  assert_int_equal(lith_open(DB, &opt, &db), LITH_OK);
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM p"), 1);
  t_remove_db(DB);
}

static void test_failing_migration_rolls_back_the_open(void **state) {
  (void)state;
  /* on a fresh file: the first succeeds, the second fails: neither stays */
  static const char *const fresh[] = {
      "CREATE TABLE a(x INTEGER); INSERT INTO a VALUES (1);",
      "CREATE TABLE half(z INTEGER); INSERT INTO no_such_table VALUES (1);",
  };
  t_remove_db(DB);
  lith *db = (lith *)fresh;
  int rc = open_with(fresh, 2, &db);
  assert_int_equal(rc, LITH_ERROR);
  assert_null(db);
  assert_non_null(strstr(lith_errmsg(NULL), "migration 2"));
  assert_non_null(strstr(lith_errmsg(NULL), "no_such_table"));
  assert_int_equal(t_query_int(DB, "PRAGMA user_version"), 0);
  assert_false(table_exists(DB, "a"));
  assert_false(table_exists(DB, "half"));

  /* on a file at version 1: 2 and 3 pending, 3 fails */
  reopen_ok(migs, 1);
  static const char *const later[] = {
      "CREATE TABLE a(x INTEGER); INSERT INTO a VALUES (1);",
      "CREATE TABLE b(y INTEGER); INSERT INTO a VALUES (2);",
      "CREATE TABLE c(z INTEGER UNIQUE); INSERT INTO c VALUES (1); INSERT INTO c VALUES (1);",
  };
  db = (lith *)later;
  rc = open_with(later, 3, &db);
  assert_int_equal(rc, LITH_CONSTRAINT);
  assert_null(db);
  assert_non_null(strstr(lith_errmsg(NULL), "migration 3"));
  assert_int_equal(t_query_int(DB, "PRAGMA user_version"), 1);
  assert_false(table_exists(DB, "b"));
  assert_false(table_exists(DB, "c"));
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM a"), 1);

  /* the database is not left locked or mid-transaction: a good set applies */
  reopen_ok(migs, 3);
  assert_int_equal(t_query_int(DB, "PRAGMA user_version"), 3);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM a"), 3);
  t_remove_db(DB);
}

/* ---- result codes ------------------------------------------------------- */

static void test_errstr(void **state) {
  (void)state;
  const char *unknown = lith_errstr(999);
  assert_non_null(unknown);
  assert_true(strlen(unknown) > 0);
  const char *names[LITH_INTERRUPTED + 1];
  for (int rc = LITH_OK; rc <= LITH_INTERRUPTED; rc++) {
    names[rc] = lith_errstr(rc);
    assert_non_null(names[rc]);
    assert_true(strlen(names[rc]) > 0);
    assert_string_not_equal(names[rc], unknown);
    for (int j = 0; j < rc; j++)
      assert_string_not_equal(names[rc], names[j]);
  }
  static const int others[] = {-1, -1000, LITH_INTERRUPTED + 1, 500, LITH_USER, LITH_USER + 1, 1 << 30};
  for (size_t i = 0; i < sizeof others / sizeof *others; i++) {
    const char *s = lith_errstr(others[i]);
    assert_non_null(s);
    assert_true(strlen(s) > 0);
  }
  /* commands' own codes are not "unknown" */
  assert_string_not_equal(lith_errstr(LITH_USER), unknown);
  assert_string_equal(lith_errstr(LITH_USER + 7), lith_errstr(LITH_USER));
}

static void test_from_sqlite(void **state) {
  (void)state;
  static const struct {
    int sqlite_rc, lith_rc;
  } map[] = {
      {SQLITE_OK, LITH_OK},
      {SQLITE_DONE, LITH_OK},
      {SQLITE_ROW, LITH_OK},
      {SQLITE_ERROR, LITH_ERROR},
      {SQLITE_BUSY, LITH_BUSY},
      {SQLITE_BUSY_SNAPSHOT, LITH_BUSY},
      {SQLITE_BUSY_TIMEOUT, LITH_BUSY},
      {SQLITE_LOCKED, LITH_BUSY},
      {SQLITE_CONSTRAINT, LITH_CONSTRAINT},
      {SQLITE_CONSTRAINT_UNIQUE, LITH_CONSTRAINT},
      {SQLITE_CONSTRAINT_FOREIGNKEY, LITH_CONSTRAINT},
      {SQLITE_CONSTRAINT_NOTNULL, LITH_CONSTRAINT},
      {SQLITE_CONSTRAINT_CHECK, LITH_CONSTRAINT},
      {SQLITE_CONSTRAINT_PRIMARYKEY, LITH_CONSTRAINT},
      {SQLITE_FULL, LITH_DISKFULL},
      {SQLITE_IOERR, LITH_IOERR},
      {SQLITE_IOERR_WRITE, LITH_IOERR},
      {SQLITE_IOERR_FSYNC, LITH_IOERR},
      {SQLITE_IOERR_SHORT_READ, LITH_IOERR},
      {SQLITE_NOMEM, LITH_NOMEM},
      {SQLITE_CANTOPEN, LITH_CANTOPEN},
      {SQLITE_CORRUPT, LITH_CORRUPT},
      {SQLITE_NOTADB, LITH_CORRUPT},
      {SQLITE_READONLY, LITH_READONLY},
      {SQLITE_READONLY_DBMOVED, LITH_READONLY},
      {SQLITE_MISUSE, LITH_MISUSE},
      {SQLITE_INTERRUPT, LITH_INTERRUPTED},
      {SQLITE_IOERR_SHMSIZE, LITH_DISKFULL},
  };
  for (size_t i = 0; i < sizeof map / sizeof *map; i++) {
    int got = lith_from_sqlite(map[i].sqlite_rc);
    if (got != map[i].lith_rc)
      fprintf(stderr, "lith_from_sqlite(%d): %d, want %d\n", map[i].sqlite_rc, got, map[i].lith_rc);
    assert_int_equal(got, map[i].lith_rc);
  }
}

/* ---- file modes ---------------------------------------------------------------- */

static unsigned mode_of(const char *path) {
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  return (unsigned)(st.st_mode & 07777);
}

/* The database, its -wal and -shm, and a backup are the owner's alone by
 * default (another local user could otherwise read them directly); a wider
 * mode is the application's choice; an existing file keeps its mode. */
static void test_file_modes(void **state) {
  (void)state;
  mode_t old_umask = umask(022);
  lith_options opt;
  t_bank_options(&opt);
  lith *db = t_open_fresh(DB, &opt);
  t_seed_accounts(db, 3, 10);
  assert_int_equal(mode_of(DB), 0600);
  assert_int_equal(mode_of(DB "-wal"), 0600);
  assert_int_equal(mode_of(DB "-shm"), 0600);
  unlink("conn-backup.db");
  assert_int_equal(lith_backup(db, "conn-backup.db"), LITH_OK);
  assert_int_equal(mode_of("conn-backup.db"), 0600);
  assert_int_equal(lith_close(db), LITH_OK);

  opt.file_mode = 0640;
  db = t_open_fresh(DB, &opt);
  t_seed_accounts(db, 3, 10);
  assert_int_equal(mode_of(DB), 0640);
  assert_int_equal(mode_of(DB "-wal"), 0640);
  assert_int_equal(lith_close(db), LITH_OK);

  /* an existing database keeps its mode */
  assert_int_equal(chmod(DB, 0644), 0);
  opt.file_mode = 0600;
  assert_int_equal(lith_open(DB, &opt, &db), LITH_OK);
  assert_int_equal(mode_of(DB), 0644);
  assert_int_equal(lith_close(db), LITH_OK);
  unlink("conn-backup.db");
  umask(old_umask);
}

/* ---- defensive settings ---------------------------------------------------- */

typedef struct guard {
  int defensive, trusted, fts3, ext;
  int tokenizer_rc; /* fts3_tokenizer('x', x'00..') from SQL text */
  char msg[200];
} guard;

static void read_guard(sqlite3 *conn, guard *g) {
  sqlite3_db_config(conn, SQLITE_DBCONFIG_DEFENSIVE, -1, &g->defensive);
  sqlite3_db_config(conn, SQLITE_DBCONFIG_TRUSTED_SCHEMA, -1, &g->trusted);
  sqlite3_db_config(conn, SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER, -1, &g->fts3);
  sqlite3_db_config(conn, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, -1, &g->ext);
  /* A made-up pointer for the tokenizer "x": refused, not stored. */
  g->tokenizer_rc = sqlite3_exec(conn, "SELECT fts3_tokenizer('x', x'4141414141414141')", NULL, NULL, NULL);
  snprintf(g->msg, sizeof g->msg, "%s", sqlite3_errmsg(conn));
}

static int guard_writer(lith_tx *tx, void *arg) {
  read_guard(lith_tx_db(tx), arg);
  return LITH_OK;
}

static int guard_reader(lith_rx *rx, void *arg) {
  read_guard(lith_rx_db(rx), arg);
  return LITH_OK;
}

typedef struct other {
  lith *db;
  sqlite3 *conn_a, *conn_b;
  guard g;
  int rc;
} other;

static int note_reader(lith_rx *rx, void *arg) {
  other *o = arg;
  o->conn_b = lith_rx_db(rx);
  read_guard(o->conn_b, &o->g);
  return LITH_OK;
}

static void *read_other(void *arg) {
  other *o = arg;
  o->rc = lith_read(o->db, note_reader, o);
  return NULL;
}

static int hold_and_read_other(lith_rx *rx, void *arg) {
  other *o = arg;
  pthread_t t;
  o->conn_a = lith_rx_db(rx);
  if (pthread_create(&t, NULL, read_other, o) != 0)
    return LITH_ERROR;
  pthread_join(t, NULL);
  return LITH_OK;
}

static void check_guard(const guard *g) {
  assert_int_equal(g->defensive, 1);
  assert_int_equal(g->trusted, 0);
  assert_int_equal(g->fts3, 0);
  assert_int_equal(g->ext, 0);
  assert_int_not_equal(g->tokenizer_rc, SQLITE_OK);
  assert_non_null(strstr(g->msg, "disabled"));
}

static int deny_abs(void *ctx, int action, const char *a, const char *b, const char *c, const char *d) {
  (void)a, (void)c, (void)d;
  if (action == SQLITE_FUNCTION && b && strcmp(b, "abs") == 0) {
    (*(int *)ctx)++;
    return SQLITE_DENY;
  }
  return SQLITE_OK;
}

static int read_abs(lith_rx *rx, void *arg) { return lith_rx_int64(rx, arg, "SELECT abs(-7)", NULL); }

static void test_defensive_settings_everywhere(void **state) {
  (void)state;
  lith_options opt;
  int denied = 0;
  t_bank_options(&opt);
  opt.readers = 2;
  opt.authorizer = deny_abs;
  opt.authorizer_ctx = &denied;
  lith *db = t_open_fresh(DB, &opt);
  guard w, r1;
  memset(&w, 0, sizeof w);
  memset(&r1, 0, sizeof r1);
  assert_int_equal(lith_do(db, guard_writer, &w), LITH_OK);
  check_guard(&w);
  assert_int_equal(lith_read(db, guard_reader, &r1), LITH_OK);
  check_guard(&r1);
  /* the pool's other reader too: read on another thread while this one
   * holds the first */
  other o;
  memset(&o, 0, sizeof o);
  o.db = db;
  assert_int_equal(lith_read(db, hold_and_read_other, &o), LITH_OK);
  assert_int_equal(o.rc, LITH_OK);
  assert_ptr_not_equal(o.conn_a, o.conn_b);
  check_guard(&o.g);
  /* the application's authorizer applies to reads */
  int64_t v = 0;
  assert_int_equal(lith_read(db, read_abs, &v), LITH_ERROR);
  assert_non_null(strstr(lith_errmsg(db), "not authorized"));
  assert_true(denied >= 1);
  assert_int_equal(lith_close(db), LITH_OK);
}

/* ---- on_connect ------------------------------------------------------------ */

typedef struct connects {
  _Atomic int calls;
  int fail; /* return this instead of SQLITE_OK */
} connects;

static int on_connect_limit(void *ctx, sqlite3 *conn) {
  connects *k = ctx;
  atomic_fetch_add(&k->calls, 1);
  if (k->fail)
    return k->fail;
  sqlite3_limit(conn, SQLITE_LIMIT_LENGTH, 5000);
  return SQLITE_OK;
}

static int length_limit_w(lith_tx *tx, void *arg) {
  *(int *)arg = sqlite3_limit(lith_tx_db(tx), SQLITE_LIMIT_LENGTH, -1);
  return LITH_OK;
}

static int length_limit_r(lith_rx *rx, void *arg) {
  *(int *)arg = sqlite3_limit(lith_rx_db(rx), SQLITE_LIMIT_LENGTH, -1);
  return LITH_OK;
}

static int make_big_value(lith_tx *tx, void *arg) {
  (void)arg;
  return lith_tx_exec(tx, "SELECT zeroblob(6000)", NULL);
}

/* The hook runs once for each connection (writer, readers, checkpointer,
 * a backup's source), its settings hold on them, and a failing hook fails
 * the open with its code. */
static void test_on_connect(void **state) {
  (void)state;
  lith_options opt;
  connects k = {0, 0};
  t_bank_options(&opt);
  opt.readers = 3;
  opt.on_connect = on_connect_limit;
  opt.on_connect_ctx = &k;
  lith *db = t_open_fresh(DB, &opt);
  int calls_at_open = atomic_load(&k.calls);
  assert_true(calls_at_open >= 1 + 3); /* the writer and every reader; the checkpointer when it opens */
  int limit = 0;
  assert_int_equal(lith_do(db, length_limit_w, &limit), LITH_OK);
  assert_int_equal(limit, 5000);
  assert_int_equal(lith_read(db, length_limit_r, &limit), LITH_OK);
  assert_int_equal(limit, 5000);
  assert_int_equal(lith_do(db, make_big_value, NULL), LITH_ERROR);
  assert_non_null(strstr(lith_errmsg(db), "too big"));
  int before = atomic_load(&k.calls);
  assert_int_equal(lith_backup(db, DB ".copy"), LITH_OK);
  assert_int_equal(atomic_load(&k.calls), before + 1);
  assert_int_equal(lith_close(db), LITH_OK);
  t_remove_db(DB ".copy");

  k.fail = SQLITE_NOMEM;
  lith *none = NULL;
  assert_int_equal(lith_open(DB, &opt, &none), LITH_NOMEM);
  assert_null(none);
  assert_non_null(strstr(lith_errmsg(NULL), "on_connect"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_defaults),
      cmocka_unit_test(test_bad_options_refused),
      cmocka_unit_test(test_paths),
      cmocka_unit_test(test_wal_and_synchronous),
      cmocka_unit_test(test_foreign_keys),
      cmocka_unit_test(test_migrations_once_in_order),
      cmocka_unit_test(test_failing_migration_rolls_back_the_open),
      cmocka_unit_test(test_migration_cannot_commit),
      cmocka_unit_test(test_migrations_foreign_keys),
      cmocka_unit_test(test_errstr),
      cmocka_unit_test(test_from_sqlite),
      cmocka_unit_test(test_on_connect),
      cmocka_unit_test(test_defensive_settings_everywhere),
      cmocka_unit_test(test_file_modes),
  };
  return cmocka_run_group_tests_name("sqlite/conn", tests, NULL, NULL);
}
