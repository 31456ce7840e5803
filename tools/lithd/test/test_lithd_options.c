/*
 * test_lithd_options — lithd's configuration end to end: named commands and
 * --only-named, --schema steps, the config file, the request limits,
 * POST /v1/backup, waiting for queue room under overload, the log file and
 * SIGHUP, the Unix socket, and the startup refusals (each must exit non-zero
 * with a message that names the problem, and touch nothing).
 *
 * Design: the daemon is spawned by child.c's helpers; a start that must fail
 * is run by tl_run() (child.h), which captures its output and the exit status.
 * Every outcome is checked through the API and, where it matters, by opening
 * the file with SQLite directly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "child.h"

extern char **environ;

#define TOKEN "options-token"

static const char *const SCHEMA1 =
    "CREATE TABLE accounts(id INTEGER PRIMARY KEY, balance INTEGER NOT NULL CHECK (balance >= 0));\n"
    "INSERT INTO accounts VALUES (1, 100), (2, 0);\n";
static const char *const SCHEMA2 =
    "-- step 2: a ledger\n"
    "CREATE TABLE ledger(id INTEGER PRIMARY KEY, src INTEGER, dst INTEGER, amount INTEGER);\n";

static const char *const COMMANDS =
    "-- The application's writes.\n"
    "-- name: transfer\n"
    "-- Move :amount from account :from to account :to.\n"
    "UPDATE accounts SET balance = balance - :amount WHERE id = :from;\n"
    "UPDATE accounts SET balance = balance + :amount WHERE id = :to;\n"
    "INSERT INTO ledger(src, dst, amount) VALUES (:from, :to, :amount) RETURNING id;\n"
    "\n"
    "-- name: open_account\n"
    "INSERT INTO accounts(id, balance) VALUES (@id, 0);\n"
    "-- name: semicolons\n"
    "SELECT 'a;b' AS x, ';' AS y;\n";

static void write_file(const char *path, const char *a, const char *b) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(a, f);
  if (b != NULL)
    fputs(b, f);
  assert_int_equal(fclose(f), 0);
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void expect_fail(const char *const *args, int code, const char *want) {
  char err[4096];
  int rc = tl_run(args, err, sizeof err);
  if (rc != code || strstr(err, want) == NULL) {
    print_error("exit %d (want %d), stderr: %s\n(want \"%s\")\n", rc, code, err, want);
    fail();
  }
}

/* ---- Named commands ----------------------------------------------------- */

static void test_named_commands(void **state) {
  struct tl_child *c = *state;
  write_file("named-schema.sql", SCHEMA1, SCHEMA2);
  write_file("named-cmds.sql", COMMANDS, NULL);
  tl_start(c, "named", 0, TL_ARGS("--schema", "named-schema.sql", "--commands", "named-cmds.sql"));

  tl_expect(c, "GET", "/v1/commands", NULL, NULL, 200,
            "{\"name\":\"transfer\",\"description\":\"Move :amount from account :from to account "
            ":to.\",\"statements\":3,\"params\":[\"amount\",\"from\",\"to\"]}");
  tl_expect(c, "POST", "/v1/commands/transfer", NULL, "{\"params\":{\"from\":1,\"to\":2,\"amount\":30}}", 200,
            "{\"changes\":1,\"last_insert_rowid\":1,\"columns\":[\"id\"],\"rows\":[[1]]}");
  /* A failing statement undoes the whole command: the CHECK fails at the
   * first UPDATE, so no credit and no ledger row. */
  tl_expect(c, "POST", "/v1/commands/transfer", NULL, "{\"params\":{\"from\":1,\"to\":2,\"amount\":1000}}",
            409, "\"statement\":0");
  tl_expect(c, "POST", "/v1/commands/transfer", NULL, "{\"params\":{\"from\":1,\"to\":2}}", 400,
            "parameter \\\"amount\\\" of command \\\"transfer\\\" is missing");
  tl_expect(c, "POST", "/v1/commands/transfer", NULL,
            "{\"params\":{\"from\":1,\"to\":2,\"amount\":1,\"amont\":1}}", 400,
            "has no parameter \\\"amont\\\"");
  tl_expect(c, "POST", "/v1/commands/transfer", NULL, "{\"from\":1}", 400, "bad_request");
  tl_expect(c, "POST", "/v1/commands/transfer", NULL, "{\"params\":{\"from\":1,", 400, "invalid JSON");
  tl_expect(c, "POST", "/v1/commands/transfer", NULL, "{\"params\":{\"from\":[1],\"to\":2,\"amount\":1}}",
            400, "array");
  tl_expect(c, "POST", "/v1/commands/nope", NULL, "{}", 404, "not_found");
  /* Keys may carry the SQL's sigil, as /v1/do wants them; not both forms. */
  tl_expect(c, "POST", "/v1/commands/transfer", NULL, "{\"params\":{\":from\":2,\"to\":1,\"amount\":0}}", 200,
            NULL);
  tl_expect(c, "POST", "/v1/commands/transfer", NULL,
            "{\"params\":{\":from\":2,\"from\":2,\"to\":1,\"amount\":0}}", 400, "given twice");
  tl_expect(c, "GET", "/v1/commands/transfer", NULL, NULL, 405, NULL);
  /* @id in the SQL, "id" in the request; an empty body for no parameters. */
  tl_expect(c, "POST", "/v1/commands/open_account", NULL, "{\"params\":{\"id\":3}}", 200, "\"changes\":1");
  tl_expect(c, "POST", "/v1/commands/open_account", NULL, "{\"params\":{\"id\":3}}", 409, "constraint");
  tl_expect(c, "POST", "/v1/commands/semicolons", NULL, "", 200, "\"rows\":[[\"a;b\",\";\"]]");
  /* Raw SQL still works without --only-named. */
  tl_expect(c, "POST", "/v1/do", NULL,
            "{\"statements\":[{\"sql\":\"UPDATE accounts SET balance = balance WHERE id = 1\"}]}", 200, NULL);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  assert_int_equal(tl_sql_int("named.db", "SELECT balance FROM accounts WHERE id = 1"), 70);
  assert_int_equal(tl_sql_int("named.db", "SELECT balance FROM accounts WHERE id = 2"), 30);
  assert_int_equal(tl_sql_int("named.db", "SELECT count(*) FROM ledger"), 2);
  assert_int_equal(tl_sql_int("named.db", "SELECT count(*) FROM accounts"), 3);
}

static void test_only_named(void **state) {
  struct tl_child *c = *state;
  write_file("only-schema.sql", SCHEMA1, SCHEMA2);
  write_file("only-cmds.sql", COMMANDS, NULL);
  tl_start(c, "only", 0,
           TL_ARGS("--schema", "only-schema.sql", "--commands", "only-cmds.sql", "--only-named"));
  tl_expect(c, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"UPDATE accounts SET balance = 0\"}]}",
            403, "forbidden");
  tl_expect(c, "POST", "/v1/batch", NULL,
            "{\"commands\":[{\"statements\":[{\"sql\":\"DELETE FROM accounts\"}]}]}", 403, "--only-named");
  tl_expect(c, "POST", "/v1/commands/transfer", NULL, "{\"params\":{\"from\":1,\"to\":2,\"amount\":5}}", 200,
            NULL);
  /* Reads stay open: they cannot change anything. */
  tl_expect(c, "POST", "/v1/query", NULL,
            "{\"statements\":[{\"sql\":\"SELECT sum(balance) FROM accounts\"}]}", 200, "\"rows\":[[100]]");
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  assert_int_equal(tl_sql_int("only.db", "SELECT balance FROM accounts WHERE id = 1"), 95);
  assert_int_equal(tl_sql_int("only.db", "SELECT count(*) FROM accounts"), 2);
}

/* A commands file of ~200 KB: the reader's buffer doubles several times
 * and every command is read (the last one runs). */
static void test_large_commands_file(void **state) {
  struct tl_child *c = *state;
  FILE *f = fopen("many.sql", "w");
  assert_non_null(f);
  for (int i = 0; i < 4000; i++)
    fprintf(f, "-- name: c%d\nSELECT %d AS value_of_command;\n", i, i);
  fclose(f);
  tl_start(c, "many", 0, TL_ARGS("--commands", "many.sql"));
  tl_expect(c, "POST", "/v1/commands/c3999", NULL, "{}", 200, "[[3999]]");
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

static void test_commands_refused_at_startup(void **state) {
  (void)state;
  write_file("bad-schema.sql", SCHEMA1, SCHEMA2);
  write_file("bad-typo.sql", "-- name: ok\nSELECT 1;\n-- name: typo\nUPDATE acounts SET balance = 0;\n",
             NULL);
  expect_fail(TL_ARGS("--db", "bad1.db", "--schema", "bad-schema.sql", "--commands", "bad-typo.sql"), 1,
              "bad-typo.sql:4: command \"typo\", statement 1: no such table: acounts");
  write_file("bad-pos.sql", "-- name: pos\nUPDATE accounts SET balance = ? WHERE id = :id;\n", NULL);
  expect_fail(TL_ARGS("--db", "bad2.db", "--schema", "bad-schema.sql", "--commands", "bad-pos.sql"), 1,
              "parameter 1 has no name");
  write_file("bad-dup.sql", "-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;\n", NULL);
  expect_fail(TL_ARGS("--db", "bad3.db", "--commands", "bad-dup.sql"), 1, "declared twice");
  write_file("bad-pre.sql", "SELECT 1;\n-- name: a\nSELECT 2;\n", NULL);
  expect_fail(TL_ARGS("--db", "bad4.db", "--commands", "bad-pre.sql"), 1,
              "bad-pre.sql:1: SQL before the first");
  write_file("bad-empty.sql", "-- name: a\n-- nothing\n", NULL);
  expect_fail(TL_ARGS("--db", "bad5.db", "--commands", "bad-empty.sql"), 1, "has no statements");
  expect_fail(TL_ARGS("--db", "bad6.db", "--commands", "missing.sql"), 1, "missing.sql");
  /* Files are read into a buffer that grows: past 16 MiB, or holding a NUL
   * byte, they are refused; just under, read whole. */
  {
    FILE *f = fopen("big.sql", "w");
    assert_non_null(f);
    fputs("-- name: a\nSELECT 1;\n", f);
    for (long i = 0; i < (16L << 20) / 16; i++)
      fputs("-- padding ....\n", f);
    fclose(f);
    expect_fail(TL_ARGS("--db", "bad7.db", "--commands", "big.sql"), 1, "larger than");
    expect_fail(TL_ARGS("--db", "bad7.db", "--schema", "big.sql"), 1, "larger than");
    f = fopen("nul.sql", "w");
    assert_non_null(f);
    fputs("-- name: a\nSELECT 1;", f);
    fputc('\0', f);
    fclose(f);
    expect_fail(TL_ARGS("--db", "bad8.db", "--commands", "nul.sql"), 1, "NUL byte");
    unlink("big.sql");
  }
  expect_fail(TL_ARGS("--db", "bad7.db", "--only-named"), 1, "--only-named needs --commands");
}

/* ---- --schema ------------------------------------------------------------ */

static void test_schema_steps(void **state) {
  struct tl_child *c = *state;
  write_file("steps.sql", SCHEMA1, NULL);
  tl_start(c, "steps", 0, TL_ARGS("--schema", "steps.sql"));
  tl_expect(c, "POST", "/v1/do", NULL,
            "{\"statements\":[{\"sql\":\"UPDATE accounts SET balance = 7 WHERE id = 2\"}]}", 200, NULL);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  assert_int_equal(tl_sql_int("steps.db", "PRAGMA user_version"), 1);

  /* Step 2 appended: only it runs (step 1's INSERT would fail on the
   * existing rows if it ran again), and the data stays. */
  write_file("steps.sql", SCHEMA1, SCHEMA2);
  tl_start(c, "steps", TL_KEEP_DB, TL_ARGS("--schema", "steps.sql"));
  tl_expect(c, "POST", "/v1/do", NULL,
            "{\"statements\":[{\"sql\":\"INSERT INTO ledger(src, dst, amount) VALUES (1, 2, 3)\"}]}", 200,
            NULL);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  assert_int_equal(tl_sql_int("steps.db", "PRAGMA user_version"), 2);
  assert_int_equal(tl_sql_int("steps.db", "SELECT balance FROM accounts WHERE id = 2"), 7);

  /* An older schema file (fewer steps than applied) is refused. */
  write_file("steps-old.sql", SCHEMA1, NULL);
  expect_fail(TL_ARGS("--db", "steps.db", "--schema", "steps-old.sql"), 1, "newer than");
  /* A failing step changes nothing: the steps run in one transaction. */
  write_file("steps-bad.sql", SCHEMA1, "-- step 2\nCREATE TABLE t2(x);\n-- step 3\nSELEC oops;\n");
  expect_fail(TL_ARGS("--db", "stepsbad.db", "--schema", "steps-bad.sql"), 1, "migration 3");
  assert_int_equal(tl_sql_int("stepsbad.db", "PRAGMA user_version"), 0);
  assert_int_equal(tl_sql_int("stepsbad.db", "SELECT count(*) FROM sqlite_schema"), 0);
  write_file("steps-empty.sql", SCHEMA1, "-- step 2\n-- step 3\nCREATE TABLE t3(x);\n");
  expect_fail(TL_ARGS("--db", "stepsempty.db", "--schema", "steps-empty.sql"), 1, "step 2 is empty");
}

/* ---- Config file ----------------------------------------------------------- */

static void test_config_file(void **state) {
  struct tl_child *c = *state;
  const char *three =
      "{\"statements\":[{\"sql\":\"SELECT 1\"},{\"sql\":\"SELECT 2\"},{\"sql\":\"SELECT 3\"}]}";

  assert_int_equal(mkdir("conf", 0700) == 0 || errno == EEXIST, 1);
  write_file("conf/schema.sql", SCHEMA1, SCHEMA2);
  write_file("conf/cmds.sql", COMMANDS, NULL);
  /* Relative paths from the file's directory; comments; a flag alone. */
  write_file("conf/lithd.conf",
             "# lithd settings\n"
             "schema = schema.sql\n"
             "commands=cmds.sql   # trailing comment\n"
             "  max-statements = 2\n"
             "synchronous = full\n"
             "only-named\n",
             NULL);
  tl_start(c, "conf", 0, TL_ARGS("--config", "conf/lithd.conf", "--only-named=false"));
  /* The command line wins: --only-named=false lets /v1/do through; the
   * file's max-statements (2) holds. */
  tl_expect(c, "POST", "/v1/do", NULL, three, 413, "too_large");
  tl_expect(c, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"SELECT 1\"}]}", 200, NULL);
  tl_expect(c, "POST", "/v1/commands/transfer", NULL, "{\"params\":{\"from\":1,\"to\":2,\"amount\":5}}", 200,
            NULL);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  assert_int_equal(tl_sql_int("conf.db", "SELECT count(*) FROM ledger"), 1);

  write_file("bad.conf", "max-statements = 2\nmax-statment = 3\n", NULL);
  expect_fail(TL_ARGS("--db", "x.db", "--config", "bad.conf"), 2,
              "bad.conf:2: unknown setting \"max-statment\"");
  write_file("bad2.conf", "readers = 0\n", NULL);
  expect_fail(TL_ARGS("--db", "x.db", "--config", "bad2.conf"), 2, "(in the config file bad2.conf)");
  write_file("bad3.conf", "schema =\n", NULL);
  expect_fail(TL_ARGS("--db", "x.db", "--config", "bad3.conf"), 2, "needs a value");
  expect_fail(TL_ARGS("--db", "x.db", "--config", "nosuch.conf"), 2, "nosuch.conf");
  {
    /* a NUL byte would end the text early and hide what follows it */
    FILE *f = fopen("nul.conf", "wb");
    assert_non_null(f);
    assert_int_equal(fwrite("readers = 2\n\0bogus = 1\n", 1, 24, f), 24);
    assert_int_equal(fclose(f), 0);
    expect_fail(TL_ARGS("--db", "x.db", "--config", "nul.conf"), 2, "a NUL byte");
  }
  expect_fail(TL_ARGS("--db", "x.db", "--max-memory-mib", "8"), 2, "--max-memory-mib wants 0");
  expect_fail(TL_ARGS("--db", "x.db", "--max-value-bytes", "100"), 2, "--max-value-bytes");
  expect_fail(TL_ARGS("--db", "x.db", "--max-rows", "-1"), 2, "--max-rows wants");
  expect_fail(TL_ARGS("--db", "x.db", "--write-timeout-ms", "-1"), 2, "--write-timeout-ms wants");
  expect_fail(TL_ARGS("--db", "x.db", "--write-timeout-ms", "1s"), 2, "--write-timeout-ms wants");
  expect_fail(TL_ARGS("--db", "x.db", "--log-level", "loud"), 2, "--log-level");
  assert_int_equal(access("x.db", F_OK), -1);
}

/* Several databases in the config file: "db = NAME=PATH" lines, a plain
 * schema for all and NAME=FILE for one, a default; the command line
 * replaces one database's path and keeps the others; the refusals. */
static void test_config_file_many_databases(void **state) {
  struct tl_child *c = *state;
  char out[16384];

  assert_int_equal(mkdir("many", 0700) == 0 || errno == EEXIST, 1);
  tl_remove_db("many/users.db");
  tl_remove_db("many/orders.db");
  tl_remove_db("moved-orders.db");
  write_file("many/schema.sql", SCHEMA1, SCHEMA2);
  write_file("many/orders.sql", "CREATE TABLE orders(id INTEGER PRIMARY KEY, total INTEGER);\n", NULL);
  write_file("many/cmds.sql", COMMANDS, NULL);
  write_file("many/lithd.conf",
             "db = users=users.db\n"
             "db = orders=orders.db\n"
             "schema = schema.sql          # every database\n"
             "schema = orders=orders.sql   # this one instead\n"
             "commands = users=cmds.sql\n"
             "default = users\n",
             NULL);
  tl_start(c, "many", TL_NO_DB, TL_ARGS("--config", "many/lithd.conf"));
  assert_non_null(strstr(c->line, "(dbs users=many/users.db orders=many/orders.db, default users,"));
  /* the default: users, with its commands */
  tl_expect(c, "POST", "/v1/commands/transfer", NULL, "{\"params\":{\"from\":1,\"to\":2,\"amount\":5}}", 200,
            NULL);
  tl_expect(c, "POST", "/v1/db/orders/do", NULL,
            "{\"statements\":[{\"sql\":\"INSERT INTO orders(total) VALUES (12)\"}]}", 200, NULL);
  tl_expect(c, "POST", "/v1/db/orders/commands/transfer", NULL,
            "{\"params\":{\"from\":1,\"to\":2,\"amount\":5}}", 404, NULL);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  assert_int_equal(tl_sql_int("many/users.db", "SELECT count(*) FROM ledger"), 1);
  assert_int_equal(tl_sql_int("many/users.db", "SELECT count(*) FROM sqlite_master WHERE name = 'orders'"),
                   0);
  assert_int_equal(tl_sql_int("many/orders.db", "SELECT total FROM orders"), 12);
  assert_int_equal(tl_sql_int("many/orders.db", "SELECT count(*) FROM sqlite_master WHERE name = 'ledger'"),
                   0);

  /* the command line replaces orders' path, users stays the file's */
  tl_start(c, "many2", TL_NO_DB, TL_ARGS("--config", "many/lithd.conf", "--db", "orders=moved-orders.db"));
  assert_non_null(strstr(c->line, "(dbs users=many/users.db orders=moved-orders.db, default users,"));
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  assert_int_equal(tl_sql_int("moved-orders.db", "SELECT count(*) FROM orders"), 0);

  /* a path whose text before '=' would be a name: ./ makes it a path */
  tl_remove_db("k=v.db");
  tl_start(c, "eq", TL_NO_DB, TL_ARGS("--db", "./k=v.db"));
  assert_non_null(strstr(c->line, "(db ./k=v.db, synchronous"));
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  tl_remove_db("k=v.db");

  /* refusals: exit 2, a message naming the problem, no file made */
  expect_fail(TL_ARGS("--db", "a=x.db", "--db", "a=y.db"), 2, "the database \"a\" is given twice");
  expect_fail(TL_ARGS("--db", "x.db", "--db", "y.db"), 2, "several databases need a name each");
  expect_fail(TL_ARGS("--db", "a="), 2, "no path after the name");
  expect_fail(TL_ARGS("--db", "x.db", "--schema", "nope=s.sql"), 2, "no database is named \"nope\"");
  expect_fail(TL_ARGS("--db", "x.db", "--commands", "main=a.sql", "--commands", "main=b.sql"), 2,
              "--commands is given twice for the database \"main\"");
  expect_fail(TL_ARGS("--db", "a=x.db", "--db", "b=y.db", "--default", "c"), 2,
              "--default c: no database is named so; the databases: a b");
  expect_fail(TL_ARGS("--db", "x.db", "--default", "no such"), 2, "--default wants a database name");
  expect_fail(TL_ARGS("--db", "a=x.db", "--db", "b=y.db", "--restore", "backup.db"), 2,
              "--restore puts one database in place");
  write_file("twice.conf", "db = a=x.db\ndb = a=y.db\n", NULL);
  expect_fail(TL_ARGS("--config", "twice.conf"), 2, "(in the config file twice.conf)");
  assert_int_equal(tl_run(TL_ARGS("--help"), out, sizeof out), 0);
  assert_non_null(strstr(out, "--db NAME=PATH"));
  assert_non_null(strstr(out, "--default NAME"));
  assert_int_equal(access("x.db", F_OK), -1);
  assert_int_equal(access("y.db", F_OK), -1);
}

/* ---- Limits --------------------------------------------------------------- */

static void test_limits(void **state) {
  struct tl_child *c = *state;
  char sql[300];
  tl_start(c, "limits", 0,
           TL_ARGS("--max-statements", "3", "--max-sql", "120", "--max-rows", "5", "--max-run-ms", "150"));
  tl_expect(c, "POST", "/v1/do", NULL,
            "{\"statements\":[{\"sql\":\"CREATE TABLE t(x INTEGER PRIMARY KEY, y)\"}]}", 200, NULL);
  /* Too many statements: 413, nothing runs (the INSERT is not kept). */
  tl_expect(c, "POST", "/v1/do", NULL,
            "{\"statements\":[{\"sql\":\"INSERT INTO t VALUES (1, 1)\"},{\"sql\":\"SELECT 1\"},"
            "{\"sql\":\"SELECT 2\"},{\"sql\":\"SELECT 3\"}]}",
            413, "4 statements, over the limit of 3");
  /* SQL too long. */
  snprintf(sql, sizeof sql, "{\"statements\":[{\"sql\":\"INSERT INTO t VALUES (2, '%0130d')\"}]}", 0);
  tl_expect(c, "POST", "/v1/do", NULL, sql, 413, "over the limit of 120");
  /* Too many rows: 422, and the write before it in the command is undone. */
  tl_expect(c, "POST", "/v1/do", NULL,
            "{\"statements\":[{\"sql\":\"INSERT INTO t VALUES (3, 3)\"},"
            "{\"sql\":\"WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 6) "
            "SELECT i FROM c\"}]}",
            422, "result_too_large");
  tl_expect(c, "POST", "/v1/query", NULL,
            "{\"statements\":[{\"sql\":\"WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 "
            "FROM c WHERE i < 6) SELECT i FROM c\"}]}",
            422, "result_too_large");
  /* Too long a run: 422 timeout, the write before it undone. */
  tl_expect(c, "POST", "/v1/do", NULL,
            "{\"statements\":[{\"sql\":\"INSERT INTO t VALUES (4, 4)\"},"
            "{\"sql\":\"WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 100000000) "
            "SELECT count(*) FROM c\"}]}",
            422, "timeout");
  tl_expect(c, "POST", "/v1/query", NULL,
            "{\"statements\":[{\"sql\":\"WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 "
            "FROM c WHERE i < 100000000) SELECT count(*) FROM c\"}]}",
            422, "timeout");
  /* Within every limit it works, and nothing of the refused ones is there. */
  tl_expect(c, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"INSERT INTO t VALUES (5, 5)\"}]}", 200,
            NULL);
  tl_expect(c, "POST", "/v1/query", NULL, "{\"statements\":[{\"sql\":\"SELECT group_concat(x) FROM t\"}]}",
            200, "\"rows\":[[\"5\"]]");
}

/* The whole file at `path` (at most cap - 1 bytes) into buf; asserts. */
static void read_text(const char *path, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY);
  assert_true(fd >= 0);
  tl_read_all(fd, buf, cap);
  close(fd);
}

/* ---- POST /v1/backup ------------------------------------------------------- */

static void test_backup(void **state) {
  struct tl_child *c = *state;
  char cwd[512], dest[1100];
  const char *good = "Bearer " TOKEN;

  write_file("backup-token.txt", TOKEN "\n", NULL);
  assert_non_null(getcwd(cwd, sizeof cwd));
  /* no --backup-dir: the endpoint is off */
  tl_start(c, "nobackup", 0, TL_ARGS("--token-file", "backup-token.txt"));
  tl_expect(c, "POST", "/v1/backup", good, "{\"dest\":\"copy.db\"}", 403, "--backup-dir");
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  /* --backup-dir: lithd makes it (mode 0700) but not its parents; a file
   * there, or (not as root: root writes anywhere) a directory lithd cannot
   * write, stops it at start, rather than failing every backup later. */
  expect_fail(TL_ARGS("--db", "bk2.db", "--backup-dir", "no-such-dir/backups"), 1,
              "cannot make it: No such file or directory (lithd makes the directory, not its parents)");
  write_file("bk-file", "not a directory\n", NULL);
  expect_fail(TL_ARGS("--db", "bk2.db", "--backup-dir", "bk-file"), 1,
              "--backup-dir bk-file: not a directory");
  if (geteuid() != 0) {
    mkdir("bk-ro", 0500);
    expect_fail(TL_ARGS("--db", "bk2.db", "--backup-dir", "bk-ro"), 1, "not writable by lithd");
  }
  {
    DIR *d = opendir("backups");
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL)
      if (e->d_name[0] != '.')
        assert_int_equal(unlinkat(dirfd(d), e->d_name, 0), 0);
    if (d != NULL)
      closedir(d);
    rmdir("backups");
  }
  snprintf(dest, sizeof dest, "%s/backups/copy.db", cwd);
  unlink(dest);
  /* --allow-host after --backup-dir: the option reader once freed the
   * backup directory there (found by fuzz_config; ASan sees the use). */
  tl_start(
      c, "backup", 0,
      TL_ARGS("--token-file", "backup-token.txt", "--backup-dir", "backups", "--allow-host", "app.internal"));
  {
    struct stat st;
    assert_int_equal(stat("backups", &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0700);
  }
  tl_expect(c, "POST", "/v1/do", good,
            "{\"statements\":[{\"sql\":\"CREATE TABLE t(x)\"},{\"sql\":\"INSERT INTO t VALUES (42)\"}]}", 200,
            NULL);
  const char *body = "{\"dest\":\"copy.db\"}";
  tl_expect(c, "POST", "/v1/backup", NULL, body, 401, NULL);
  /* the named-command routes are behind the token too */
  tl_expect(c, "GET", "/v1/commands", NULL, NULL, 401, "unauthorized");
  tl_expect(c, "POST", "/v1/commands/x", "Bearer nope", "{}", 401, NULL);
  tl_expect(c, "POST", "/v1/commands/x", good, "{}", 404, "not_found");
  tl_expect(c, "POST", "/v1/backup", "Bearer nope", body, 401, NULL);
  assert_int_equal(access(dest, F_OK), -1);
  tl_expect(c, "POST", "/v1/backup", good, body, 200, "\"bytes\":");
  assert_int_equal(tl_sql_int(dest, "SELECT x FROM t"), 42);
  tl_assert_integrity(dest);
  {
    struct stat st;
    assert_int_equal(stat(dest, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
  }
  /* Again to the same name: a backup never replaces a file. */
  tl_expect(c, "POST", "/v1/do", good, "{\"statements\":[{\"sql\":\"INSERT INTO t VALUES (43)\"}]}", 200,
            NULL);
  tl_expect(c, "POST", "/v1/backup", good, body, 409, "exists");
  assert_int_equal(tl_sql_int(dest, "SELECT count(*) FROM t"), 1);
  tl_expect(c, "POST", "/v1/backup", good, "{\"dest\":\"copy-2.db\"}", 200, NULL);
  snprintf(dest, sizeof dest, "%s/backups/copy-2.db", cwd);
  assert_int_equal(tl_sql_int(dest, "SELECT count(*) FROM t"), 2);

  /* Names only: no path, no way out of the directory, no hidden files. */
  static const char *const bad[] = {
      "{\"dest\":\"/tmp/evil.db\"}", "{\"dest\":\"../evil.db\"}",
      "{\"dest\":\"sub/evil.db\"}",  "{\"dest\":\"..\"}",
      "{\"dest\":\".ssh\"}",         "{\"dest\":\"\"}",
      "{\"dest\":\"a b.db\"}",       "{\"dest\":42}",
      "{\"dest\":\"x\",\"more\":1}", "not json",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    tl_expect(c, "POST", "/v1/backup", good, bad[i], 400, "bad_request");
  assert_int_equal(access("/tmp/evil.db", F_OK), -1);
  assert_int_equal(access("evil.db", F_OK), -1);
  /* What stands in the directory is never replaced, followed or opened:
   * a file, a link to a file elsewhere, a FIFO (which would block). */
  write_file("notes.txt", "my notes\n", NULL);
  write_file("backups/mine.txt", "my notes\n", NULL);
  unlink("backups/link.db");
  assert_int_equal(symlink("../notes.txt", "backups/link.db"), 0);
  unlink("backups/fifo.db");
  assert_int_equal(mkfifo("backups/fifo.db", 0600), 0);
  tl_expect(c, "POST", "/v1/backup", good, "{\"dest\":\"mine.txt\"}", 409, "\"code\":\"conflict\"");
  tl_expect(c, "POST", "/v1/backup", good, "{\"dest\":\"link.db\"}", 409, "exists");
  tl_expect(c, "POST", "/v1/backup", good, "{\"dest\":\"fifo.db\"}", 409, "exists");
  {
    char buf[64];
    read_text("notes.txt", buf, sizeof buf);
    assert_string_equal(buf, "my notes\n");
    read_text("backups/mine.txt", buf, sizeof buf);
    assert_string_equal(buf, "my notes\n");
  }
  /* The live database is untouched by all that. */
  tl_expect(c, "POST", "/v1/query", good, "{\"statements\":[{\"sql\":\"SELECT count(*) FROM t\"}]}", 200,
            "\"rows\":[[2]]");
}

/* ---- Overload ------------------------------------------------------------- */

#define SLOW_WRITE(n)                                                                          \
  "{\"statements\":[{\"sql\":\"INSERT INTO t(v) SELECT count(*) FROM (WITH RECURSIVE c(i) AS " \
  "(SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < " #n ") SELECT i FROM c)\"}]}"
#define FAST_WRITE "{\"statements\":[{\"sql\":\"INSERT INTO t(v) VALUES (1)\"}]}"
#define NFAST 12
/* How long an answer queued behind SLOW_WRITE may take: 6M rows run in
 * about 1.5 s here, 10-12 s under ThreadSanitizer (whose runs then failed
 * TL_TIMEOUT_MS); lithd's own promptness is checked by the times measured,
 * not by this bound. */
#define SLOW_WAIT_MS (6 * TL_TIMEOUT_MS)

/* One slow command holds the writer; NFAST more arrive at once behind it,
 * with room for one in lith's queue. Returns how many were refused (503);
 * each refusal must carry Retry-After; *max_ms: the longest answer. */
static int overload_round(struct tl_child *c, int *ok, int64_t *max_ms) {
  int fds[NFAST], slow, i, refused = 0;
  struct tl_resp r;
  int64_t t0;

  slow = tl_send(c, "POST", "/v1/do", NULL, SLOW_WRITE(3000000));
  usleep(100 * 1000); /* the writer is inside the slow command now */
  t0 = now_ms();
  for (i = 0; i < NFAST; i++)
    fds[i] = tl_send(c, "POST", "/v1/do", NULL, FAST_WRITE);
  *ok = 0;
  *max_ms = 0;
  for (i = 0; i < NFAST; i++) {
    int64_t took;
    tl_read_within(fds[i], &r, SLOW_WAIT_MS);
    took = now_ms() - t0;
    if (took > *max_ms)
      *max_ms = took;
    if (r.status == 503) {
      refused++;
      assert_non_null(strcasestr(r.head, "\nretry-after: 1\r\n"));
      assert_non_null(strstr(r.body, "queue_full"));
    } else {
      assert_int_equal(r.status, 200);
      (*ok)++;
    }
    tl_resp_free(&r);
  }
  tl_read_within(slow, &r, SLOW_WAIT_MS);
  assert_int_equal(r.status, 200);
  tl_resp_free(&r);
  return refused;
}

static void test_overload_waits_then_503(void **state) {
  struct tl_child *c = *state;
  int ok, refused;
  int64_t max_ms;

  /* No waiting: the queue holds one, the rest are refused at once. */
  tl_start(c, "overload0", 0,
           TL_ARGS("--max-queue", "1", "--max-batch", "1", "--queue-wait-ms", "0", "--max-run-ms", "120000"));
  tl_expect(c, "POST", "/v1/do", NULL,
            "{\"statements\":[{\"sql\":\"CREATE TABLE t(id INTEGER PRIMARY KEY, v)\"}]}", 200, NULL);
  refused = overload_round(c, &ok, &max_ms);
  assert_true(refused >= NFAST - 2);
  assert_int_equal(ok + refused, NFAST);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  /* Exactly the answered ones are in (plus the slow one). */
  assert_int_equal(tl_sql_int("overload0.db", "SELECT count(*) FROM t"), ok + 1);

  /* Waiting long enough: everyone gets in, in turn. */
  tl_start(
      c, "overload1", 0,
      TL_ARGS("--max-queue", "1", "--max-batch", "1", "--queue-wait-ms", "20000", "--max-run-ms", "120000"));
  tl_expect(c, "POST", "/v1/do", NULL,
            "{\"statements\":[{\"sql\":\"CREATE TABLE t(id INTEGER PRIMARY KEY, v)\"}]}", 200, NULL);
  refused = overload_round(c, &ok, &max_ms);
  assert_int_equal(refused, 0);
  assert_int_equal(ok, NFAST);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  assert_int_equal(tl_sql_int("overload1.db", "SELECT count(*) FROM t"), NFAST + 1);

  /* A short wait behind a long command: refused when the wait is over,
   * not when the command ends. */
  tl_start(
      c, "overload2", 0,
      TL_ARGS("--max-queue", "1", "--max-batch", "1", "--queue-wait-ms", "100", "--max-run-ms", "120000"));
  tl_expect(c, "POST", "/v1/do", NULL,
            "{\"statements\":[{\"sql\":\"CREATE TABLE t(id INTEGER PRIMARY KEY, v)\"}]}", 200, NULL);
  {
    int fds[4], i, n503 = 0;
    struct tl_resp r;
    int slow = tl_send(c, "POST", "/v1/do", NULL, SLOW_WRITE(6000000));
    int64_t t0, took_max = 0, slow_ms;
    usleep(100 * 1000);
    t0 = now_ms();
    for (i = 0; i < 4; i++)
      fds[i] = tl_send(c, "POST", "/v1/do", NULL, FAST_WRITE);
    /* Read each answer as it comes (the one admitted to the queue comes
     * only after the slow command). */
    for (int left = 4; left > 0;) {
      struct pollfd p[4];
      for (i = 0; i < 4; i++) {
        p[i].fd = fds[i];
        p[i].events = POLLIN;
        p[i].revents = 0;
      }
      assert_true(poll(p, 4, SLOW_WAIT_MS) > 0);
      for (i = 0; i < 4; i++) {
        if (fds[i] < 0 || p[i].revents == 0)
          continue;
        tl_read(fds[i], &r);
        fds[i] = -1;
        left--;
        if (r.status == 503) {
          int64_t took = now_ms() - t0;
          n503++;
          if (took > took_max)
            took_max = took;
        }
        tl_resp_free(&r);
      }
    }
    tl_read_within(slow, &r, SLOW_WAIT_MS);
    slow_ms = now_ms() - t0;
    assert_int_equal(r.status, 200);
    tl_resp_free(&r);
    assert_true(n503 >= 2);
    /* The refusals came well before the slow command ended. */
    if (!(took_max < slow_ms)) {
      print_error("503 after %lld ms, slow command done after %lld ms\n", (long long)took_max,
                  (long long)slow_ms);
      fail();
    }
  }
}

/* ---- Log file and SIGHUP ---------------------------------------------------- */

static void test_log_file_and_sighup(void **state) {
  struct tl_child *c = *state;
  char buf[8192];
  int i;

  unlink("lithd.log");
  unlink("lithd.log.1");
  tl_start(c, "logs", 0, TL_ARGS("--log", "lithd.log", "--log-level", "debug"));
  tl_expect(c, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"SELECT 1\"}]}", 200, NULL);
  /* logrotate: rename, then SIGHUP; new lines go to a new file. */
  assert_int_equal(rename("lithd.log", "lithd.log.1"), 0);
  assert_int_equal(kill(c->pid, SIGHUP), 0);
  for (i = 0; i < 100 && access("lithd.log", F_OK) != 0; i++)
    usleep(20 * 1000);
  assert_int_equal(access("lithd.log", F_OK), 0);
  tl_expect(c, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"SELEC 1\"}]}", 400, NULL);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);

  read_text("lithd.log.1", buf, sizeof buf);
  assert_non_null(strstr(buf, " info: started"));
  assert_non_null(strstr(buf, " debug: POST /v1/do 200"));
  assert_null(strstr(buf, "stopped"));
  read_text("lithd.log", buf, sizeof buf);
  assert_non_null(strstr(buf, "SIGHUP: log reopened"));
  assert_non_null(strstr(buf, "SIGTERM, stopping"));
  assert_non_null(strstr(buf, " info: stopped"));

  /* warn level: no debug lines. */
  unlink("quiet.log");
  tl_start(c, "quiet", 0, TL_ARGS("--log", "quiet.log", "--log-level", "warn"));
  tl_expect(c, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"SELECT 1\"}]}", 200, NULL);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  read_text("quiet.log", buf, sizeof buf);
  assert_null(strstr(buf, "debug"));
  assert_null(strstr(buf, "info"));
}

/* ---- Unix socket ------------------------------------------------------------ */

/* One request with the given extra header lines (each ending in CRLF) and
 * a JSON body; the answer's status (its body into r). */
static int raw_post(const struct tl_child *c, const char *path, const char *headers, const char *body,
                    struct tl_resp *r) {
  char req[2048];
  int fd = tl_connect(c);
  assert_true(fd >= 0);
  int n =
      snprintf(req, sizeof req, "POST %s HTTP/1.1\r\n%sContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
               path, headers, strlen(body), body);
  assert_true(n > 0 && (size_t)n < sizeof req);
  assert_int_equal(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
  tl_read(fd, r);
  return r->status;
}

static void test_unix_socket(void **state) {
  struct tl_child *c = *state;
  struct stat st;
  tl_start(c, "unixonly", TL_UNIX, NULL);
  assert_int_equal(stat(c->unix_path, &st), 0);
  assert_true(S_ISSOCK(st.st_mode));
  assert_int_equal(st.st_mode & 0777, 0600);
  tl_expect(c, "POST", "/v1/do", NULL,
            "{\"statements\":[{\"sql\":\"CREATE TABLE t(x)\"},{\"sql\":\"INSERT INTO t VALUES "
            "(9007199254740993)\"}]}",
            200, NULL);
  tl_expect(c, "POST", "/v1/query", NULL, "{\"statements\":[{\"sql\":\"SELECT x FROM t\"}]}", 200,
            "[[9007199254740993]]");
  /* Any Host over the socket (curl --unix-socket sends its URL's): no
   * browser reaches it, so no DNS-rebinding check. */
  {
    struct tl_resp r;
    assert_int_equal(raw_post(c, "/v1/query", "Host: lithd\r\nContent-Type: application/json\r\n",
                              "{\"statements\":[{\"sql\":\"SELECT 1\"}]}", &r),
                     200);
    tl_resp_free(&r);
  }
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  /* The socket file goes with the daemon. */
  assert_int_equal(access("unixonly.sock", F_OK), -1);
  assert_int_equal(tl_sql_int("unixonly.db", "SELECT count(*) FROM t"), 1);
}

/* A client that sends requests and never reads the answers holds only its
 * own connection: others are answered, and lithd stops reading from it
 * (h2o answers HTTP/1 requests in order), so what it can make lithd buffer
 * is bounded by the socket buffers. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SLOW_READER_20_MS 20000 /* 5631 ms seen under TSan on a busy machine */
#else
#define SLOW_READER_20_MS 5000
#endif
static void test_slow_reader_blocks_nobody(void **state) {
  struct tl_child *c = *state;
  char req[512];
  const char *q = "{\"statements\":[{\"sql\":\"SELECT randomblob(200000)\"}]}";
  int fd, i, n, sent = 0;
  int64_t t0;

  tl_start(c, "slowreader", 0, NULL);
  tl_expect(c, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"CREATE TABLE t(x)\"}]}", 200, NULL);
  fd = tl_connect(c);
  assert_true(fd >= 0);
  n = snprintf(req, sizeof req,
               "POST /v1/query HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               "Content-Length: %zu\r\n\r\n%s",
               strlen(q), q);
  /* 200 pipelined requests for ~270 KB answers each (54 MB), none read;
   * stop when the kernel will take no more. */
  for (i = 0; i < 200; i++) {
    struct pollfd p = {fd, POLLOUT, 0};
    if (poll(&p, 1, 200) != 1)
      break;
    if (send(fd, req, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) != n)
      break;
    sent++;
  }
  assert_true(sent > 0);
  usleep(300 * 1000);
  t0 = now_ms();
  for (i = 0; i < 20; i++)
    tl_expect(c, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"INSERT INTO t VALUES (1)\"}]}", 200,
              NULL);
  if (now_ms() - t0 > SLOW_READER_20_MS) {
    print_error("20 commands took %lld ms beside a client that does not read\n", (long long)(now_ms() - t0));
    fail();
  }
  close(fd);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  assert_int_equal(tl_sql_int("slowreader.db", "SELECT count(*) FROM t"), 20);
}

/* TEMP objects a request makes live for its command: a TEMP trigger does
 * not change other clients' writes (named commands included), and TEMP
 * tables do not pile up in lithd's memory (five of ~24 MB each stay within
 * 48 MiB of one). */
static void test_temp_objects_do_not_outlive_the_request(void **state) {
  struct tl_child *c = *state;
  write_file("temp-schema.sql", "CREATE TABLE t(x);\n", NULL);
  write_file("temp-cmds.sql", "-- name: put\nINSERT INTO t VALUES (:x);\n", NULL);
  tl_start(c, "temps", 0, TL_ARGS("--schema", "temp-schema.sql", "--commands", "temp-cmds.sql"));
  tl_expect(c, "POST", "/v1/do", NULL,
            "{\"statements\":[{\"sql\":\"CREATE TEMP TRIGGER nope BEFORE INSERT ON main.t "
            "BEGIN SELECT RAISE(ABORT, 'hijacked'); END\"}]}",
            200, NULL);
  tl_expect(c, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"INSERT INTO t VALUES (1)\"}]}", 200,
            NULL);
  tl_expect(c, "POST", "/v1/commands/put", NULL, "{\"params\":{\"x\":2}}", 200, NULL);
  /* a TEMP table of ~24 MB a request, five times */
  const char *big =
      "{\"statements\":[{\"sql\":\"CREATE TEMP TABLE big AS WITH RECURSIVE c(i) AS "
      "(SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 12000) SELECT i, randomblob(2000) AS b FROM c\"},"
      "{\"sql\":\"SELECT count(*) FROM temp.big\"}]}";
  tl_expect(c, "POST", "/v1/do", NULL, big, 200, "\"rows\":[[12000]]");
  long after_one = tl_rss_kib(c->pid);
  for (int i = 0; i < 4; i++)
    tl_expect(c, "POST", "/v1/do", NULL, big, 200, "\"rows\":[[12000]]"); /* the name is free again */
  long after_five = tl_rss_kib(c->pid);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  after_five = after_one; /* the sanitizers hold freed memory back (quarantine): no RSS bound */
#endif
  /* Kept, four more tables would be ~96 MB more; the allocator's own
   * caching and fragmentation account for up to ~22 MB seen here. */
  if (after_five > after_one + 48 * 1024) {
    print_error("RSS %ld KiB after one TEMP table, %ld after five\n", after_one, after_five);
    fail();
  }
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  assert_int_equal(tl_sql_int("temps.db", "SELECT count(*) FROM t"), 2);
}

/* Clients' SQL cannot reach files or change the shared connection. */
static void test_authorizer(void **state) {
  struct tl_child *c = *state;
  tl_start(c, "authz", 0, NULL);
  tl_expect(c, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"CREATE TABLE t(x)\"}]}", 200, NULL);
  tl_expect(c, "POST", "/v1/do", NULL,
            "{\"statements\":[{\"sql\":\"INSERT INTO t VALUES (1)\"},"
            "{\"sql\":\"ATTACH DATABASE 'elsewhere.db' AS e\"}]}",
            403, "not authorized");
  tl_expect(c, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"PRAGMA synchronous = OFF\"}]}", 403,
            "forbidden");
  tl_expect(c, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"PRAGMA main.journal_mode = DELETE\"}]}",
            403, NULL);
  tl_expect(c, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"PRAGMA writable_schema = ON\"}]}", 403,
            NULL);
  tl_expect(c, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"SELECT load_extension('x')\"}]}", 403,
            NULL);
  /* fts3_tokenizer hands out a pointer into libsqlite3 (one argument) and
   * takes one to call (two, bound): refused on the readers as on the
   * writer, and lithd lives on to serve FTS. */
  tl_expect(c, "POST", "/v1/query", NULL,
            "{\"statements\":[{\"sql\":\"SELECT hex(fts3_tokenizer(?))\",\"params\":[\"simple\"]}]}", 403,
            "not authorized");
  tl_expect(c, "POST", "/v1/query", NULL,
            "{\"statements\":[{\"sql\":\"SELECT hex(FTS3_TOKENIZER('simple'))\"}]}", 403, NULL);
  tl_expect(c, "POST", "/v1/do", NULL,
            "{\"statements\":[{\"sql\":\"SELECT fts3_tokenizer(?, ?)\","
            "\"params\":[\"simple\",{\"base64\":\"QUFBQUFBQUE=\"}]}]}",
            403, "not authorized");
  tl_expect(c, "POST", "/v1/query", NULL, "{\"statements\":[{\"sql\":\"SELECT load_extension('x')\"}]}", 403,
            NULL);
  tl_expect(c, "POST", "/v1/do", NULL,
            "{\"statements\":[{\"sql\":\"CREATE VIRTUAL TABLE temp.f USING fts3(body, tokenize=simple)\"},"
            "{\"sql\":\"INSERT INTO temp.f VALUES ('hello world')\"},"
            "{\"sql\":\"SELECT count(*) FROM temp.f WHERE f MATCH 'hello'\"}]}",
            200, "\"rows\":[[1]]");
  /* Reading PRAGMAs are fine. */
  tl_expect(c, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"PRAGMA table_info(t)\"}]}", 200, "\"x\"");
  tl_expect(c, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"PRAGMA synchronous\"}]}", 200,
            "\"rows\":[[1]]");
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  assert_int_equal(access("elsewhere.db", F_OK), -1);
  assert_int_equal(tl_sql_int("authz.db", "SELECT count(*) FROM t"), 0);
}

/* What a web page the operator opens could make a browser send to a
 * token-less lithd on loopback: a cross-site text/plain POST, a foreign
 * Origin, a DNS-rebinding Host. Refused, and nothing written. */
static void test_browser_requests_refused(void **state) {
  struct tl_child *c = *state;
  struct tl_resp r;
  const char *ins = "{\"statements\":[{\"sql\":\"INSERT INTO t VALUES (1)\"}]}";
  tl_start(c, "browser", 0,
           TL_ARGS("--allow-origin", "http://app.example, http://other.example", "--allow-host",
                   "lithd.internal"));
  tl_expect(c, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"CREATE TABLE t(x)\"}]}", 200, NULL);
  /* a "simple" cross-site POST: text/plain, or no type at all */
  assert_int_equal(raw_post(c, "/v1/do", "Host: 127.0.0.1\r\nContent-Type: text/plain\r\n", ins, &r), 415);
  assert_non_null(strstr(r.body, "application/json"));
  tl_resp_free(&r);
  assert_int_equal(raw_post(c, "/v1/do", "Host: 127.0.0.1\r\n", ins, &r), 415);
  tl_resp_free(&r);
  assert_int_equal(raw_post(c, "/v1/backup", "Host: 127.0.0.1\r\nContent-Type: text/plain\r\n",
                            "{\"dest\": \"/tmp/x.db\"}", &r),
                   415);
  tl_resp_free(&r);
  /* a foreign Origin */
  assert_int_equal(
      raw_post(c, "/v1/do",
               "Host: 127.0.0.1\r\nContent-Type: application/json\r\nOrigin: http://evil.example\r\n", ins,
               &r),
      403);
  assert_non_null(strstr(r.body, "allow-origin"));
  tl_resp_free(&r);
  assert_int_equal(
      raw_post(c, "/v1/do", "Host: 127.0.0.1\r\nContent-Type: application/json\r\nOrigin: null\r\n", ins, &r),
      403);
  tl_resp_free(&r);
  /* a DNS-rebinding page: its own name in Host */
  assert_int_equal(
      raw_post(c, "/v1/do", "Host: evil.example:8765\r\nContent-Type: application/json\r\n", ins, &r), 403);
  assert_non_null(strstr(r.body, "allow-host"));
  tl_resp_free(&r);
  assert_int_equal(raw_post(c, "/v1/query", "Host: evil.example\r\nContent-Type: application/json\r\n",
                            "{\"statements\":[{\"sql\":\"SELECT 1\"}]}", &r),
                   403);
  tl_resp_free(&r);
  /* what is allowed: the listed origins, localhost, addresses, listed names,
   * a charset parameter */
  assert_int_equal(raw_post(c, "/v1/do",
                            "Host: localhost:1\r\nContent-Type: application/json; charset=utf-8\r\n"
                            "Origin: http://other.example\r\n",
                            ins, &r),
                   200);
  tl_resp_free(&r);
  assert_int_equal(raw_post(c, "/v1/do", "Host: [::1]:8765\r\nContent-Type: Application/JSON\r\n", ins, &r),
                   200);
  tl_resp_free(&r);
  assert_int_equal(
      raw_post(c, "/v1/do", "Host: LITHD.internal\r\nContent-Type: application/json\r\n", ins, &r), 200);
  tl_resp_free(&r);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  assert_int_equal(tl_sql_int("browser.db", "SELECT count(*) FROM t"), 3);
}

static unsigned mode_of(const char *path) {
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  return (unsigned)(st.st_mode & 07777);
}

/* The database and its -wal, -shm are the owner's alone unless told
 * otherwise (another local user could read them directly). */
static void test_file_mode(void **state) {
  struct tl_child *c = *state;
  mode_t old = umask(022);
  tl_start(c, "modes", 0, NULL);
  tl_expect(c, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"CREATE TABLE t(x)\"}]}", 200, NULL);
  assert_int_equal(mode_of("modes.db"), 0600);
  assert_int_equal(mode_of("modes.db-wal"), 0600);
  assert_int_equal(mode_of("modes.db-shm"), 0600);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  tl_start(c, "modes2", 0, TL_ARGS("--file-mode", "0640"));
  tl_expect(c, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"CREATE TABLE t(x)\"}]}", 200, NULL);
  assert_int_equal(mode_of("modes2.db"), 0640);
  assert_int_equal(mode_of("modes2.db-wal"), 0640);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  umask(old);
  expect_fail(TL_ARGS("--db", "modes3.db", "--file-mode", "0400"), 2, "--file-mode wants");
  expect_fail(TL_ARGS("--db", "modes3.db", "--file-mode", "0644x"), 2, "--file-mode wants");
  expect_fail(TL_ARGS("--db", "modes3.db", "--file-mode", "4600"), 2, "--file-mode wants");
  assert_int_equal(access("modes3.db", F_OK), -1);
}

/* Is path mapped into process pid's memory (/proc/PID/maps)? */
static int mapped(pid_t pid, const char *path) {
  char file[64], line[4096], abs[PATH_MAX];
  int found = 0;
  assert_non_null(realpath(path, abs));
  snprintf(file, sizeof file, "/proc/%d/maps", (int)pid);
  FILE *f = fopen(file, "r");
  assert_non_null(f);
  while (!found && fgets(line, sizeof line, f) != NULL) {
    line[strcspn(line, "\n")] = '\0';
    size_t n = strlen(line), m = strlen(abs);
    found = n >= m && strcmp(line + n - m, abs) == 0;
  }
  fclose(f);
  return found;
}

/* The soft limit on open files of /proc/PID/limits ("Max open files"). */
static long soft_open_files(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/limits", (int)pid);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  long soft = -1;
  while (fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, "Max open files", 14) == 0)
      soft = strtol(line + 14, NULL, 10);
  fclose(f);
  return soft;
}

/* Started with a soft limit of 256 open files (a shell's ulimit -Sn), lithd
 * raises it to the hard limit: a few hundred half-open connections must
 * not keep every other client out. */
static void test_open_files_raised(void **state) {
  struct tl_child *c = *state;
  struct rlimit was, low;
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &was), 0);
  if (was.rlim_max <= 256)
    skip(); /* nothing to raise to */
  low = was;
  low.rlim_cur = 256;
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
  tl_start(c, "nofile", 0, NULL); /* inherits 256 */
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &was), 0);
  long soft = soft_open_files(c->pid);
  print_message("lithd's soft limit: %ld (hard %llu)\n", soft, (unsigned long long)was.rlim_max);
  assert_true(was.rlim_max == RLIM_INFINITY ? soft == -1 || soft > 256 : soft == (long)was.rlim_max);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* --cache-kib and --mmap-mib reach every connection: the writer's and the
 * readers' page cache, the file mapped once read; without them, lith's
 * defaults (16 MiB, no mmap). */
static void test_cache_and_mmap(void **state) {
  struct tl_child *c = *state;
  const char *cache = "{\"statements\":[{\"sql\":\"SELECT cache_size FROM pragma_cache_size\"}]}";
  const char *fill = "{\"statements\":[{\"sql\":\"CREATE TABLE t(x)\"},"
                     "{\"sql\":\"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < "
                     "100) INSERT INTO t SELECT randomblob(1000) FROM n\"}]}";
  const char *read = "{\"statements\":[{\"sql\":\"SELECT count(*) FROM t\"}]}";
  tl_start(c, "mm", 0, TL_ARGS("--cache-kib", "1024", "--mmap-mib", "64"));
  tl_expect(c, "POST", "/v1/do", NULL, cache, 200, "\"rows\":[[-1024]]");
  tl_expect(c, "POST", "/v1/query", NULL, cache, 200, "\"rows\":[[-1024]]");
  tl_expect(c, "POST", "/v1/do", NULL, fill, 200, NULL);
  /* the rows are in the WAL until a checkpoint: a restart copies them
   * into the file, which the next read then maps */
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  tl_start(c, "mm", TL_KEEP_DB, TL_ARGS("--cache-kib", "1024", "--mmap-mib", "64"));
  tl_expect(c, "POST", "/v1/query", NULL, read, 200, "\"rows\":[[100]]");
  assert_true(mapped(c->pid, "mm.db"));
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  tl_start(c, "mm2", 0, NULL);
  tl_expect(c, "POST", "/v1/do", NULL, cache, 200, "\"rows\":[[-16384]]");
  tl_expect(c, "POST", "/v1/query", NULL, cache, 200, "\"rows\":[[-16384]]");
  tl_expect(c, "POST", "/v1/do", NULL, fill, 200, NULL);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  tl_start(c, "mm2", TL_KEEP_DB, NULL);
  tl_expect(c, "POST", "/v1/query", NULL, read, 200, "\"rows\":[[100]]");
  assert_false(mapped(c->pid, "mm2.db"));
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  expect_fail(TL_ARGS("--db", "mm3.db", "--cache-kib", "10"), 2, "--cache-kib wants");
  expect_fail(TL_ARGS("--db", "mm3.db", "--mmap-mib", "-1"), 2, "--mmap-mib wants");
  assert_int_equal(access("mm3.db", F_OK), -1);
}

static void test_help_and_version(void **state) {
  char out[16384];
  (void)state;
  /* --help goes to stdout; check the exit code
   * and that nothing was created. */
  assert_int_equal(tl_run(TL_ARGS("--help"), out, sizeof out), 0);
  assert_int_equal(tl_run(TL_ARGS("--version"), out, sizeof out), 0);
  expect_fail(TL_ARGS("--readers", "0", "--db", "h.db"), 2, "--readers wants");
  expect_fail(TL_ARGS("--db", "h.db", "--max-batch", "x"), 2, "--max-batch wants");
  expect_fail(TL_ARGS("--db", "h.db", "stray"), 2, "unexpected argument");
  assert_int_equal(access("h.db", F_OK), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_named_commands, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_file_mode, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_temp_objects_do_not_outlive_the_request, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_browser_requests_refused, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_only_named, tl_setup, tl_teardown),
      cmocka_unit_test(test_commands_refused_at_startup),
      cmocka_unit_test_setup_teardown(test_large_commands_file, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_schema_steps, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_config_file, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_config_file_many_databases, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_limits, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_backup, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_overload_waits_then_503, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_log_file_and_sighup, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_unix_socket, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_authorizer, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_slow_reader_blocks_nobody, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_cache_and_mmap, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_open_files_raised, tl_setup, tl_teardown),
      cmocka_unit_test(test_help_and_version),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
