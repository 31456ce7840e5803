/*
 * test_lithd_litestream — lithd beside Litestream (--litestream), without
 * Litestream itself: what lithd must do so that Litestream can replicate.
 *
 *   - --litestream starts with checkpoint external and a busy timeout of
 *     LITHD_LITESTREAM_BUSY_MS, and says so on the startup line; a WAL of
 *     6,100 pages (one Litestream reaches under load) is no warning; it never
 *     checkpoints, not even at exit: after SIGTERM the -wal file still holds
 *     every frame written;
 *   - a plain SQLite connection holding the write lock (BEGIN IMMEDIATE,
 *     as Litestream's checkpoints and its _litestream_seq writes do) for
 *     300 ms delays a /v1/do, which then succeeds (200, nothing counted busy);
 *     PRAGMA wal_checkpoint is refused on /v1/do and on /v1/query;
 *   - --litestream with --checkpoint writer or auto, from the command line
 *     or the config file, is refused (exit 2, a message that says why);
 *     --checkpoint external beside it is fine; "litestream = true" in the
 *     config file works as the flag;
 *   - a database that already holds Litestream's _litestream_seq and
 *     _litestream_lock tables (made by plain SQLite, as Litestream makes
 *     them) opens, runs its --schema steps, serves /v1/do, /v1/query and a
 *     named command, and Litestream writing its table meanwhile does not
 *     disturb it; both tables keep their definitions and rows.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "../options.h" /* LITHD_LITESTREAM_BUSY_MS */
#include "child.h"

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  assert_int_equal(fclose(f), 0);
}

static long long file_size(const char *path) {
  FILE *f = fopen(path, "rb");
  long long n;
  if (f == NULL)
    return -1;
  fseek(f, 0, SEEK_END);
  n = ftell(f);
  fclose(f);
  return n;
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static sqlite3 *open_plain(const char *db) {
  sqlite3 *conn = NULL;
  assert_int_equal(sqlite3_open_v2(db, &conn, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL), SQLITE_OK);
  sqlite3_busy_timeout(conn, 5000);
  /* as Litestream's own connection: it checkpoints when it decides to */
  assert_int_equal(sqlite3_exec(conn, "PRAGMA wal_autocheckpoint=0", NULL, NULL, NULL), SQLITE_OK);
  return conn;
}

static void exec_ok(sqlite3 *conn, const char *sql) {
  char *err = NULL;
  int rc = sqlite3_exec(conn, sql, NULL, NULL, &err);
  if (rc != SQLITE_OK)
    print_error("%s: %s\n", sql, err ? err : sqlite3_errstr(rc));
  sqlite3_free(err);
  assert_int_equal(rc, SQLITE_OK);
}

static void expect_refused(const char *const *args, const char *want) {
  char out[4096];
  int rc = tl_run(args, out, sizeof out);
  if (rc != 2 || strstr(out, want) == NULL) {
    print_error("exit %d (want 2), output: %s\n(want \"%s\")\n", rc, out, want);
    fail();
  }
}

#define INSERT(v) "{\"statements\":[{\"sql\":\"INSERT INTO t(v) VALUES (" #v ")\"}]}"

static void test_litestream_flag(void **state) {
  struct tl_child *c = *state;
  char want[128];
  unlink("ls.log");
  tl_start(c, "ls", 0, TL_ARGS("--litestream", "--log", "ls.log"));
  snprintf(want, sizeof want, "checkpoint external for litestream, busy timeout %d ms)",
           LITHD_LITESTREAM_BUSY_MS);
  if (strstr(c->line, want) == NULL) {
    print_error("startup line: %s\n(want \"%s\")\n", c->line, want);
    fail();
  }
  tl_expect(c, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"CREATE TABLE t(v)\"}]}", 200, NULL);
  tl_expect(c, "POST", "/v1/do", NULL, INSERT(1), 200, NULL);

  /* Another connection holds the write lock for 300 ms: the request waits. */
  sqlite3 *lock = open_plain("ls.db");
  exec_ok(lock, "BEGIN IMMEDIATE; INSERT INTO t(v) VALUES (2);");
  int64_t t0 = now_ms();
  int fd = tl_send(c, "POST", "/v1/do", NULL, INSERT(3));
  usleep(300 * 1000);
  exec_ok(lock, "COMMIT");
  assert_int_equal(sqlite3_close(lock), SQLITE_OK); /* lithd's connections stay: no checkpoint */
  struct tl_resp r;
  tl_read(fd, &r);
  int64_t waited = now_ms() - t0;
  if (r.status != 200)
    print_error("%d %s\n", r.status, r.body);
  assert_int_equal(r.status, 200);
  tl_resp_free(&r);
  assert_true(waited >= 250);
  /* a client cannot checkpoint either, on the writer or a reader */
  tl_expect(c, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"PRAGMA wal_checkpoint(TRUNCATE)\"}]}",
            403, "forbidden");
  tl_expect(c, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"PRAGMA wal_checkpoint\"}]}", 403,
            "forbidden");
  tl_expect(c, "POST", "/v1/query", NULL, "{\"statements\":[{\"sql\":\"PRAGMA wal_checkpoint\"}]}", 403,
            "not_a_query");
  tl_http(c, "GET", "/v1/stats", NULL, NULL, &r);
  assert_int_equal(r.status, 200);
  assert_int_equal(tl_json_u64(r.body, "busy"), 0);
  assert_int_equal(tl_json_u64(r.body, "checkpoints"), 0);
  tl_resp_free(&r);

  /* ~6,100 pages: past 4 x the default --checkpoint-pages, a size
   * Litestream's WAL reaches under load; no "nobody checkpoints" warning
   * below 4 x LITHD_LITESTREAM_CKPT_PAGES */
  tl_expect(c, "POST", "/v1/do", NULL,
            "{\"statements\":[{\"sql\":\"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
            "WHERE i < 25) INSERT INTO t(v) SELECT randomblob(1000000) FROM n\"}]}",
            200, NULL);
  tl_http(c, "GET", "/v1/stats", NULL, NULL, &r);
  assert_true(tl_json_u64(r.body, "wal_pages") > 4 * 1000);
  tl_resp_free(&r);
  usleep(1500 * 1000); /* the WAL watch looks once a second */
  {
    char log[8192] = "";
    FILE *f = fopen("ls.log", "r");
    assert_non_null(f);
    log[fread(log, 1, sizeof log - 1, f)] = '\0';
    fclose(f);
    assert_null(strstr(log, "the WAL holds"));
  }

  long long wal = file_size("ls.db-wal");
  assert_true(wal > 32); /* a header and frames */
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  /* no checkpoint at exit: every frame still there for Litestream */
  assert_int_equal(file_size("ls.db-wal"), wal);
  assert_int_equal(tl_sql_int("ls.db", "SELECT count(*) FROM t"), 3 + 25);
}

static void test_litestream_refusals(void **state) {
  struct tl_child *c = *state;
  expect_refused(TL_ARGS("--db", "lsr.db", "--litestream", "--checkpoint", "writer"),
                 "--litestream needs --checkpoint external");
  expect_refused(TL_ARGS("--db", "lsr.db", "--checkpoint", "auto", "--litestream"), "drop --checkpoint auto");
  expect_refused(TL_ARGS("--db", "lsr.db", "--litestream=maybe"), "--litestream takes true or false");
  write_text("lsr.conf", "litestream = true\n");
  expect_refused(TL_ARGS("--db", "lsr.db", "--config", "lsr.conf", "--checkpoint", "writer"),
                 "drop --checkpoint writer");
  write_text("lsr2.conf", "checkpoint = auto\n");
  expect_refused(TL_ARGS("--db", "lsr.db", "--config", "lsr2.conf", "--litestream"),
                 "drop --checkpoint auto");
  assert_int_equal(access("lsr.db", F_OK), -1); /* nothing was created */

  /* --checkpoint external says the same thing: fine; the config file's
   * "litestream = true" is the flag. */
  tl_start(c, "lsr", 0, TL_ARGS("--checkpoint", "external", "--litestream"));
  assert_non_null(strstr(c->line, "checkpoint external for litestream"));
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  tl_start(c, "lsr", 0, TL_ARGS("--config", "lsr.conf"));
  assert_non_null(strstr(c->line, "checkpoint external for litestream"));
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  /* and --litestream=false leaves the default */
  tl_start(c, "lsr", 0, TL_ARGS("--config", "lsr.conf", "--litestream=false"));
  assert_non_null(strstr(c->line, "checkpoint writer every"));
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* Litestream's tables, as Litestream 0.3 creates them. */
#define LITESTREAM_SEQ "CREATE TABLE _litestream_seq (id INTEGER PRIMARY KEY, seq INTEGER)"
#define LITESTREAM_LOCK "CREATE TABLE _litestream_lock (id INTEGER)"

static void test_litestream_tables_untouched(void **state) {
  struct tl_child *c = *state;
  tl_remove_db("lst.db");
  sqlite3 *ls = open_plain("lst.db");
  exec_ok(ls, "PRAGMA journal_mode=WAL; " LITESTREAM_SEQ "; " LITESTREAM_LOCK
              "; INSERT INTO _litestream_seq VALUES (1, 7);");
  write_text("lst-schema.sql", "CREATE TABLE accounts(id INTEGER PRIMARY KEY, balance INTEGER NOT NULL);\n"
                               "-- step\n"
                               "CREATE TABLE ledger(id INTEGER PRIMARY KEY, amount INTEGER);\n"
                               "INSERT INTO accounts VALUES (1, 100);\n");
  write_text("lst-commands.sql", "-- name: pay\n"
                                 "UPDATE accounts SET balance = balance - :amount WHERE id = 1;\n"
                                 "INSERT INTO ledger(amount) VALUES (:amount);\n");
  tl_start(c, "lst", TL_KEEP_DB,
           TL_ARGS("--litestream", "--schema", "lst-schema.sql", "--commands", "lst-commands.sql"));
  tl_expect(c, "POST", "/v1/commands/pay", NULL, "{\"params\":{\"amount\":5}}", 200, NULL);
  /* Litestream writes its table in its own transactions while lithd serves. */
  exec_ok(ls, "BEGIN IMMEDIATE; UPDATE _litestream_seq SET seq = seq + 1 WHERE id = 1; COMMIT;");
  tl_expect(c, "POST", "/v1/do", NULL,
            "{\"statements\":[{\"sql\":\"INSERT INTO ledger(amount) VALUES (1)\"}]}", 200, NULL);
  tl_expect(c, "POST", "/v1/query", NULL,
            "{\"statements\":[{\"sql\":\"SELECT balance FROM accounts WHERE id = 1\"}]}", 200, "95");
  assert_int_equal(sqlite3_close(ls), SQLITE_OK);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);

  assert_int_equal(tl_sql_int("lst.db", "PRAGMA user_version"), 2);
  assert_int_equal(tl_sql_int("lst.db", "SELECT count(*) FROM ledger"), 2);
  assert_int_equal(tl_sql_int("lst.db", "SELECT count(*) FROM sqlite_schema WHERE name = '_litestream_seq' "
                                        "AND sql = '" LITESTREAM_SEQ "'"),
                   1);
  assert_int_equal(tl_sql_int("lst.db", "SELECT count(*) FROM sqlite_schema WHERE name = '_litestream_lock' "
                                        "AND sql = '" LITESTREAM_LOCK "'"),
                   1);
  assert_int_equal(tl_sql_int("lst.db", "SELECT seq FROM _litestream_seq WHERE id = 1"), 8);
  assert_int_equal(tl_sql_int("lst.db", "SELECT count(*) FROM _litestream_seq"), 1);
  assert_int_equal(tl_sql_int("lst.db", "SELECT count(*) FROM _litestream_lock"), 0);
  tl_assert_integrity("lst.db");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_litestream_flag, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_litestream_refusals, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_litestream_tables_untouched, tl_setup, tl_teardown),
  };
  return cmocka_run_group_tests_name("lithd/litestream", tests, NULL, NULL);
}
