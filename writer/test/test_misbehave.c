/*
 * Commands that misbehave the way application code does, and the promises
 * of lith.h that must hold anyway: a failed command leaves no trace, the
 * other commands of its batch still commit, every caller learns the true
 * outcome, and no command changes the connection for the commands after it.
 *
 * Each test is written as the misbehaving command a user would write
 * (issue 9): savepoint names in another case, writing on after SQLite
 * rolled the transaction back, deferred foreign-key violations, PRAGMAs that
 * change the connection, TEMP triggers and tables, making or changing
 * lith's own _lith_* tables (issue 32) or a foreign key onto one, a write
 * statement left mid-step,
 * several statements through sqlite3_exec, a command returning an SQLite
 * code. The reads' counterparts (a callback leaving a statement
 * mid-step, a recursive walk through the statement cache) are here too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common.h"

#define DB "misbehave.db"

static int64_t q(const char *sql) { return t_query_int(DB, sql); }

static int64_t count_kv(const char *k) {
  char sql[256];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM kv WHERE k = '%s'", k);
  return q(sql);
}

static lith *open_db(void) {
  lith_options opt;
  t_bank_options(&opt);
  return t_open_fresh(DB, &opt);
}

/* A command's view of one statement it ran: its code and message. */
typedef struct step_log {
  int rc;
  char msg[256];
} step_log;

static void log_rc(step_log *l, int rc) {
  l->rc = rc;
  snprintf(l->msg, sizeof l->msg, "%s", rc == LITH_OK ? "" : lith_errmsg(NULL));
}

/* ---- 1. savepoint names in any case ------------------------------------- */

typedef struct sp_case {
  const char *sql; /* the command's own savepoint statement */
  const char *key;
  step_log sp;
} sp_case;

/* Insert, open a savepoint named like the writer's, insert again, fail: the
 * writer's ROLLBACK TO must still undo both rows. */
static int savepoint_then_fail(lith_tx *tx, void *arg) {
  sp_case *c = arg;
  lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES (?, 1)", "s", c->key);
  log_rc(&c->sp, lith_tx_exec(tx, c->sql, NULL));
  char k2[64];
  snprintf(k2, sizeof k2, "%s-2", c->key);
  lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES (?, 2)", "s", k2);
  return lith_tx_error(tx, LITH_USER, "failing on purpose");
}

static void test_savepoint_names_in_any_case(void **state) {
  (void)state;
  lith *db = open_db();
  sp_case cases[] = {
      {"SAVEPOINT LITH_C", "upper", {0, ""}},      {"SAVEPOINT Lith_c", "mixed", {0, ""}},
      {"SAVEPOINT \"LITH_c\"", "quoted", {0, ""}}, {"SAVEPOINT [lItH_n]", "nested", {0, ""}},
      {"RELEASE LITH_C", "release", {0, ""}},      {"ROLLBACK TO Lith_C", "rollback", {0, ""}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    assert_int_equal(lith_do(db, savepoint_then_fail, &cases[i]), LITH_USER);
    assert_int_not_equal(cases[i].sp.rc, LITH_OK);
    assert_non_null(strstr(cases[i].sp.msg, "not authorized"));
  }
  /* a savepoint of the command's own, in any case, still works */
  assert_int_equal(
      lith_do(db, lith_cmd_sql, "SAVEPOINT Mine; INSERT INTO kv VALUES ('own', 1); RELEASE MINE"), LITH_OK);
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(q("SELECT count(*) FROM kv"), 1); /* only 'own': no row of a failed command */
  assert_int_equal(count_kv("own"), 1);
}

/* ---- 2. writing on after SQLite rolled the transaction back -------------- */

static int nested_put(lith_tx *tx, void *arg) {
  (void)arg;
  return lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES ('late', 1)", NULL);
}

typedef struct write_on {
  const char *how; /* "raise", "conflict", "savepoint", "open", "nested" */
  step_log first, after;
} write_on;

/* Fail in a way that makes SQLite roll back the whole transaction, ignore
 * the error, and write on. */
static int write_on_after_rollback(lith_tx *tx, void *arg) {
  write_on *w = arg;
  if (strcmp(w->how, "conflict") == 0)
    log_rc(&w->first, lith_tx_exec(tx, "INSERT OR ROLLBACK INTO kv(k, v) VALUES ('taken', 2)", NULL));
  else
    log_rc(&w->first, lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES ('boom', 1)", NULL));
  if (strcmp(w->how, "savepoint") == 0) /* begins a transaction of its own, then commits it */
    log_rc(&w->after,
           lith_cmd_sql(tx, "SAVEPOINT again; INSERT INTO kv(k, v) VALUES ('late', 1); RELEASE again"));
  else if (strcmp(w->how, "open") == 0) /* begins one and leaves it open */
    log_rc(&w->after, lith_cmd_sql(tx, "SAVEPOINT again; INSERT INTO kv(k, v) VALUES ('late', 1)"));
  else if (strcmp(w->how, "nested") == 0) /* lith's nested savepoint would begin one */
    log_rc(&w->after, lith_tx_savepoint(tx, nested_put, NULL));
  else
    log_rc(&w->after, lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES ('late', 1)", NULL));
  return LITH_OK; /* as if all went well */
}

static void test_no_write_after_the_transaction_was_rolled_back(void **state) {
  (void)state;
  lith *db = open_db();
  assert_int_equal(lith_do(db, lith_cmd_sql,
                           "INSERT INTO kv VALUES ('taken', 1);"
                           "CREATE TRIGGER boom BEFORE INSERT ON kv WHEN NEW.k = 'boom'"
                           " BEGIN SELECT RAISE(ROLLBACK, 'boom refused'); END"),
                   LITH_OK);
  const char *hows[] = {"raise", "conflict", "savepoint", "open", "nested"};
  for (size_t i = 0; i < sizeof hows / sizeof *hows; i++) {
    write_on w = {hows[i], {0, ""}, {0, ""}};
    t_gate gate;
    t_async done = {0};
    lith_request r[4];
    char keys[3][32];
    t_gate_close(db, &gate);
    for (int k = 0; k < 3; k++)
      snprintf(keys[k], sizeof keys[k], "innocent-%zu-%d", i, k);
    t_submit(db, &r[0], t_put_cmd, keys[0], &done);
    t_submit(db, &r[1], write_on_after_rollback, &w, &done);
    t_submit(db, &r[2], t_put_cmd, keys[1], &done);
    t_submit(db, &r[3], t_put_cmd, keys[2], &done);
    t_gate_open(&gate);
    t_async_wait(&done, 4);
    assert_int_not_equal(w.first.rc, LITH_OK);
    if (strcmp(hows[i], "open") != 0)            /* the write after the loss was refused (or, left */
      assert_int_not_equal(w.after.rc, LITH_OK); /* open, rolled back below) */
    assert_int_not_equal(r[1].rc, LITH_OK);      /* and the command is answered as failed */
    if (strcmp(hows[i], "raise") == 0)           /* with the error that lost the transaction */
      assert_non_null(strstr(r[1].errmsg, "boom refused"));
    if (strcmp(hows[i], "nested") == 0)
      assert_int_equal(w.after.rc, LITH_ABORTED);
    assert_int_equal(r[0].rc, LITH_OK); /* the innocents ran again and committed */
    assert_int_equal(r[2].rc, LITH_OK);
    assert_int_equal(r[3].rc, LITH_OK);
    for (int k = 0; k < 3; k++)
      assert_int_equal(count_kv(keys[k]), 1);
    assert_int_equal(count_kv("late"), 0);
  }
  assert_int_equal(lith_do(db, t_put_cmd, "still-works"), LITH_OK);
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(count_kv("late"), 0);
  assert_int_equal(count_kv("boom"), 0);
  assert_int_equal(q("SELECT v FROM kv WHERE k = 'taken'"), 1);
  assert_int_equal(count_kv("still-works"), 1);
}

/* Many culprits in one batch: each fails alone, every innocent commits,
 * and no command runs more than twice (the commands before a culprit run
 * again and commit by themselves, then the rest go on). */
typedef struct counted_put {
  char key[32];
  int runs;
} counted_put;

static int counted_put_cmd(lith_tx *tx, void *arg) {
  counted_put *c = arg;
  c->runs++;
  return lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES (?, 1)", "s", c->key);
}

static int rollback_on_conflict(lith_tx *tx, void *arg) {
  (void)arg; /* 'taken' exists: ON CONFLICT ROLLBACK ends the whole transaction */
  return lith_tx_exec(tx, "INSERT OR ROLLBACK INTO kv(k, v) VALUES ('taken', 2)", NULL);
}

static void test_many_culprits_fail_alone(void **state) {
  (void)state;
  lith *db = open_db();
  assert_int_equal(lith_do(db, t_put_cmd, "taken"), LITH_OK);
  enum { N = 60 };
  t_gate gate;
  t_async done = {0};
  lith_request r[N];
  counted_put c[N];
  lith_stats before, after;
  memset(c, 0, sizeof c);
  t_gate_close(db, &gate);
  lith_stats_get(db, &before);
  for (int i = 0; i < N; i++) {
    snprintf(c[i].key, sizeof c[i].key, "innocent-%d", i);
    if (i % 3 == 1) /* a third of the batch are culprits, spread through it */
      t_submit(db, &r[i], rollback_on_conflict, NULL, &done);
    else
      t_submit(db, &r[i], counted_put_cmd, &c[i], &done);
  }
  t_gate_open(&gate);
  t_async_wait(&done, N);
  lith_stats_get(db, &after);
  int innocents = 0;
  for (int i = 0; i < N; i++) {
    if (i % 3 == 1) {
      assert_int_equal(r[i].rc, LITH_CONSTRAINT);
      continue;
    }
    if (r[i].rc != LITH_OK)
      fail_msg("innocent %d: %s", i, r[i].errmsg);
    assert_true(c[i].runs >= 1 && c[i].runs <= 2);
    innocents++;
  }
  assert_int_equal(after.failed - before.failed, N / 3);
  /* each culprit made the innocents of its transaction before it run again:
   * one before the first culprit, two before each of the others */
  assert_int_equal(after.retried - before.retried, 1 + 2 * (N / 3 - 1));
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(q("SELECT count(*) FROM kv WHERE k LIKE 'innocent-%'"), innocents);
  assert_int_equal(q("SELECT v FROM kv WHERE k = 'taken'"), 1);
}

/* ---- 3. deferred foreign keys, and PRAGMAs that change the connection ---- */

static const char *const FK_SCHEMA =
    "CREATE TABLE parent(id INTEGER PRIMARY KEY);"
    "CREATE TABLE child(id INTEGER PRIMARY KEY, pid INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY "
    "DEFERRED);"
    "CREATE TABLE strict_child(id INTEGER PRIMARY KEY, pid INTEGER REFERENCES parent(id));"
    "INSERT INTO parent VALUES (1);";

static int orphan_deferred(lith_tx *tx, void *arg) {
  (void)arg;
  return lith_tx_exec(tx, "INSERT INTO child(pid) VALUES (999)", NULL);
}

static int orphan_with_pragma(lith_tx *tx, void *arg) {
  (void)arg;
  int rc = lith_tx_exec(tx, "PRAGMA defer_foreign_keys = ON", NULL);
  if (rc != LITH_OK)
    return rc;
  return lith_tx_exec(tx, "INSERT INTO strict_child(pid) VALUES (998)", NULL); /* deferred now */
}

/* An immediate violation: must fail at its statement, not be deferred by
 * a pragma an earlier command of the batch set. */
static int orphan_immediate(lith_tx *tx, void *arg) {
  step_log *l = arg;
  log_rc(l, lith_tx_exec(tx, "INSERT INTO strict_child(pid) VALUES (997)", NULL));
  return l->rc;
}

/* The legitimate use of defer_foreign_keys: the child first, then its parent. */
static int child_before_parent(lith_tx *tx, void *arg) {
  (void)arg;
  int rc = lith_tx_exec(tx, "PRAGMA defer_foreign_keys = ON", NULL);
  if (rc == LITH_OK)
    rc = lith_tx_exec(tx, "INSERT INTO strict_child(id, pid) VALUES (50, 5)", NULL);
  if (rc == LITH_OK)
    rc = lith_tx_exec(tx, "INSERT INTO parent(id) VALUES (5)", NULL);
  return rc;
}

static int put_child(lith_tx *tx, void *arg) {
  return lith_tx_exec(tx, "INSERT INTO child(id, pid) VALUES (?, 1)", "I", *(int64_t *)arg);
}

static void test_deferred_fk_violation_fails_alone(void **state) {
  (void)state;
  lith *db = open_db();
  assert_int_equal(lith_do(db, lith_cmd_sql, (void *)FK_SCHEMA), LITH_OK);
  t_gate gate;
  t_async done = {0};
  lith_request r[14];
  int64_t ids[14];
  step_log imm = {0, ""};
  t_gate_close(db, &gate);
  for (int i = 0; i < 14; i++) {
    ids[i] = 100 + i;
    if (i == 3)
      t_submit(db, &r[i], orphan_deferred, NULL, &done);
    else if (i == 7)
      t_submit(db, &r[i], orphan_with_pragma, NULL, &done);
    else if (i == 8)
      t_submit(db, &r[i], orphan_immediate, &imm, &done);
    else
      t_submit(db, &r[i], put_child, &ids[i], &done);
  }
  t_gate_open(&gate);
  t_async_wait(&done, 14);
  for (int i = 0; i < 14; i++) {
    if (i == 3 || i == 7 || i == 8) {
      assert_int_equal(r[i].rc, LITH_CONSTRAINT);
      assert_non_null(strstr(r[i].errmsg, "FOREIGN KEY"));
    } else {
      assert_int_equal(r[i].rc, LITH_OK);
    }
  }
  assert_non_null(strstr(r[3].errmsg, "deferred"));
  /* the command after the pragma found it off again: its violation failed
   * its own statement */
  assert_int_equal(imm.rc, LITH_CONSTRAINT);
  assert_int_equal(lith_do(db, child_before_parent, NULL), LITH_OK);
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(q("SELECT count(*) FROM child"), 11); /* the 11 innocents */
  assert_int_equal(q("SELECT count(*) FROM strict_child"), 1);
  assert_int_equal(q("SELECT count(*) FROM child WHERE pid NOT IN (SELECT id FROM parent)"), 0);
}

/* SQLite's defer_foreign_keys = OFF forgets the violations it deferred
 * (its count goes to 0, COMMIT keeps them): a command that does so with one
 * outstanding fails, checked whole; one that mended its violations first
 * (Prisma's migration: ON, rebuild, foreign_key_check, OFF) commits. */
static const char *const ORPHAN_THEN_OFF = "PRAGMA defer_foreign_keys = ON;"
                                           "INSERT INTO strict_child(id, pid) VALUES (61, 996);"
                                           "PRAGMA defer_foreign_keys = OFF";
static const char *const MENDED_THEN_OFF = "PRAGMA defer_foreign_keys = ON;"
                                           "INSERT INTO strict_child(id, pid) VALUES (60, 6);"
                                           "INSERT INTO parent(id) VALUES (6);"
                                           "PRAGMA defer_foreign_keys = OFF";

static void test_defer_off_cannot_forget_a_violation(void **state) {
  (void)state;
  lith *db = open_db();
  assert_int_equal(lith_do(db, lith_cmd_sql, (void *)FK_SCHEMA), LITH_OK);
  assert_int_equal(lith_do(db, lith_cmd_sql, (void *)ORPHAN_THEN_OFF), LITH_CONSTRAINT);
  assert_non_null(strstr(lith_errmsg(db), "defer_foreign_keys"));
  assert_int_equal(lith_do(db, lith_cmd_sql, (void *)MENDED_THEN_OFF), LITH_OK);
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(q("SELECT count(*) FROM strict_child WHERE pid NOT IN (SELECT id FROM parent)"), 0);
  assert_int_equal(q("SELECT count(*) FROM strict_child WHERE id = 60"), 1);
}

typedef struct pragma_probe {
  int64_t recursive, defer, fk;
  char journal[16];
  int64_t sync;
} pragma_probe;

static int probe(lith_tx *tx, void *arg) {
  pragma_probe *p = arg;
  int rc = lith_tx_int64(tx, &p->recursive, "PRAGMA recursive_triggers", NULL);
  if (rc == LITH_OK)
    rc = lith_tx_int64(tx, &p->defer, "PRAGMA defer_foreign_keys", NULL);
  if (rc == LITH_OK)
    rc = lith_tx_int64(tx, &p->fk, "PRAGMA foreign_keys", NULL);
  if (rc == LITH_OK)
    rc = lith_tx_int64(tx, &p->sync, "PRAGMA synchronous", NULL);
  sqlite3_stmt *st = lith_tx_stmt(tx, "PRAGMA journal_mode");
  if (rc == LITH_OK && st && sqlite3_step(st) == SQLITE_ROW)
    snprintf(p->journal, sizeof p->journal, "%s", (const char *)sqlite3_column_text(st, 0));
  return rc;
}

/* Flips both flags from what they were (recursive_triggers' default is the
 * SQLite build's: Debian's is on). */
static int set_flags(lith_tx *tx, void *arg) {
  const pragma_probe *before = arg;
  return lith_cmd_sql(tx, before->recursive
                              ? "PRAGMA recursive_triggers = OFF; PRAGMA defer_foreign_keys = 1"
                              : "PRAGMA recursive_triggers = ON; PRAGMA defer_foreign_keys = 1");
}

static void test_pragmas_cannot_outlive_the_command(void **state) {
  (void)state;
  lith *db = open_db();
  static const char *const refused[] = {
      "PRAGMA journal_mode = DELETE",    "PRAGMA synchronous = OFF",
      "PRAGMA query_only = 1",           "PRAGMA foreign_keys = OFF",
      "PRAGMA Foreign_Keys(0)",          "PRAGMA ignore_check_constraints = 1",
      "PRAGMA wal_checkpoint",           "PRAGMA wal_checkpoint(TRUNCATE)",
      "PRAGMA locking_mode = EXCLUSIVE", "PRAGMA cache_size = 1",
      "PRAGMA writable_schema = 1",      "PRAGMA main.schema_version = 1",
      "PRAGMA busy_timeout = 0",         "PRAGMA wal_autocheckpoint = 1",
      "PRAGMA temp.user_version = 5",    "PRAGMA TEMP.application_id = 5",
  };
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
    int rc = lith_do(db, lith_cmd_sql, (void *)refused[i]);
    if (rc == LITH_OK)
      fail_msg("%s was allowed", refused[i]);
    assert_non_null(strstr(lith_errmsg(db), "not authorized"));
  }
  /* the message says which rule refused */
  assert_int_not_equal(lith_do(db, lith_cmd_sql, "PRAGMA synchronous = OFF"), LITH_OK);
  assert_non_null(strstr(lith_errmsg(db), "settings"));
  assert_int_not_equal(lith_do(db, lith_cmd_sql, "PRAGMA foreign_keys = OFF"), LITH_OK);
  assert_non_null(strstr(lith_errmsg(db), "lith_options.foreign_keys"));

  /* Reading pragmas, and the ones that write the file inside the
   * transaction, are fine. */
  assert_int_equal(lith_do(db, lith_cmd_sql,
                           "PRAGMA table_info(kv); PRAGMA user_version = 7; PRAGMA quick_check(1);"
                           " PRAGMA foreign_key_check(kv); PRAGMA synchronous; PRAGMA main.user_version = 8;"
                           " PRAGMA temp.table_info(kv); PRAGMA temp.user_version"),
                   LITH_OK);

  /* Two flags a command may set for itself; the next command, in the same
   * batch, finds them off again. */
  t_gate gate;
  t_async done = {0};
  lith_request r[2];
  pragma_probe before, p;
  memset(&before, 0, sizeof before);
  memset(&p, 0, sizeof p);
  p.recursive = p.defer = -1;
  assert_int_equal(lith_do(db, probe, &before), LITH_OK);
  t_gate_close(db, &gate);
  t_submit(db, &r[0], set_flags, &before, &done);
  t_submit(db, &r[1], probe, &p, &done);
  t_gate_open(&gate);
  t_async_wait(&done, 2);
  assert_int_equal(r[0].rc, LITH_OK);
  assert_int_equal(r[1].rc, LITH_OK);
  assert_int_equal(p.recursive, before.recursive);
  assert_int_equal(p.defer, 0);
  assert_int_equal(p.fk, 1);
  assert_int_equal(p.sync, 1); /* NORMAL */
  assert_string_equal(p.journal, "wal");
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(q("PRAGMA user_version"), 8);
}

/* ---- TEMP objects live for their command --------------------------------- */

static int temp_trigger(lith_tx *tx, void *arg) {
  (void)arg;
  return lith_cmd_sql(tx, "CREATE TEMP TRIGGER no_more BEFORE INSERT ON main.kv"
                          " BEGIN SELECT RAISE(ABORT, 'no more inserts'); END");
}

static int temp_shadow(lith_tx *tx, void *arg) {
  step_log *l = arg;
  /* a TEMP table named like a table of main shadows it for unqualified names */
  int rc = lith_tx_exec(tx, "CREATE TEMP TABLE kv(k, v)", NULL);
  if (rc == LITH_OK)
    rc = lith_tx_exec(tx, "INSERT INTO kv VALUES ('shadowed', 1)", NULL);
  if (rc == LITH_OK) {
    int64_t n = 0;
    rc = lith_tx_int64(tx, &n, "SELECT count(*) FROM temp.kv", NULL);
    l->rc = (int)n; /* the command saw its own TEMP table */
  }
  return rc;
}

static int temp_scratch(lith_tx *tx, void *arg) {
  int64_t *n = arg;
  /* a scratch table used within the command: the intended use */
  int rc = lith_tx_exec(tx, "CREATE TEMP TABLE scratch(x)", NULL);
  if (rc == LITH_OK)
    rc = lith_tx_exec(tx, "INSERT INTO scratch VALUES (1), (2), (3)", NULL);
  if (rc == LITH_OK)
    rc = lith_tx_int64(tx, n, "SELECT sum(x) FROM scratch", NULL);
  if (rc == LITH_OK) /* and a view and an index on it */
    rc = lith_cmd_sql(tx, "CREATE TEMP VIEW sv AS SELECT x FROM scratch; CREATE INDEX temp.si ON scratch(x)");
  return rc;
}

static int count_temp(lith_tx *tx, void *arg) {
  return lith_tx_int64(tx, (int64_t *)arg, "SELECT count(*) FROM temp.sqlite_schema", NULL);
}

static int trigger_then_fail(lith_tx *tx, void *arg) {
  (void)arg;
  int rc = lith_cmd_sql(tx, "CREATE TRIGGER no_more_main BEFORE INSERT ON kv"
                            " BEGIN SELECT RAISE(ABORT, 'no more inserts'); END");
  return rc != LITH_OK ? rc : lith_tx_error(tx, LITH_USER, "changed my mind");
}

typedef struct temp_left {
  const char *sql; /* run on the TEMP table and left mid-step */
  sqlite3_stmt *st;
} temp_left;

static int temp_left_running(lith_tx *tx, void *arg) {
  temp_left *a = arg;
  int rc = lith_cmd_sql(tx, "CREATE TEMP TABLE s(x); INSERT INTO s VALUES (1), (2)");
  if (rc != LITH_OK)
    return rc;
  if (sqlite3_prepare_v2(lith_tx_db(tx), a->sql, -1, &a->st, NULL) != SQLITE_OK)
    return LITH_ERROR;
  return sqlite3_step(a->st) == SQLITE_ROW ? LITH_OK : LITH_ERROR;
}

static void test_temp_objects_and_triggers(void **state) {
  (void)state;
  lith *db = open_db();
  int64_t n = -1;
  step_log l = {0, ""};
  /* A TEMP trigger that would fail every later insert of every command. */
  assert_int_equal(lith_do(db, temp_trigger, NULL), LITH_OK);
  assert_int_equal(lith_do(db, t_put_cmd, "after-trigger"), LITH_OK);
  /* A TEMP table shadowing main.kv: later commands still write main.kv. */
  assert_int_equal(lith_do(db, temp_shadow, &l), LITH_OK);
  assert_int_equal(l.rc, 1);
  assert_int_equal(lith_do(db, t_put_cmd, "after-shadow"), LITH_OK);
  /* Twice the same cached CREATE TEMP TABLE: dropped after each command. */
  for (int i = 0; i < 2; i++) {
    assert_int_equal(lith_do(db, temp_scratch, &n), LITH_OK);
    assert_int_equal(n, 6);
    assert_int_equal(lith_do(db, count_temp, &n), LITH_OK);
    assert_int_equal(n, 0);
  }
  /* A TEMP virtual table goes too. */
  assert_int_equal(lith_do(db, lith_cmd_sql, "CREATE VIRTUAL TABLE temp.f USING fts4(body)"), LITH_OK);
  assert_int_equal(lith_do(db, count_temp, &n), LITH_OK);
  assert_int_equal(n, 0);
  /* A read left mid-step on its TEMP table does not keep the table (nor
   * fail the command); a write left so fails it, as anywhere. */
  temp_left rd = {"SELECT x FROM s", NULL}, wr = {"INSERT INTO s VALUES (3) RETURNING x", NULL};
  assert_int_equal(lith_do(db, temp_left_running, &rd), LITH_OK);
  assert_int_equal(lith_do(db, count_temp, &n), LITH_OK);
  assert_int_equal(n, 0);
  assert_int_equal(lith_do(db, temp_left_running, &wr), LITH_MISUSE);
  assert_non_null(strstr(lith_errmsg(db), "write statement running"));
  assert_int_equal(lith_do(db, count_temp, &n), LITH_OK);
  assert_int_equal(n, 0);
  sqlite3_finalize(rd.st);
  sqlite3_finalize(wr.st);
  /* A trigger of main made by a command that then fails leaves no trace. */
  assert_int_equal(lith_do(db, trigger_then_fail, NULL), LITH_USER);
  assert_int_equal(lith_do(db, t_put_cmd, "after-main-trigger"), LITH_OK);
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(count_kv("after-trigger"), 1);
  assert_int_equal(count_kv("after-shadow"), 1);
  assert_int_equal(count_kv("shadowed"), 0);
  assert_int_equal(count_kv("after-main-trigger"), 1);
  assert_int_equal(q("SELECT count(*) FROM sqlite_schema WHERE type = 'trigger'"), 0);
}

/* ---- 3b. lith's own tables ---------------------------------------------------- */

/* One authorizer call as SQLite makes it, and whether lith's rule refuses it. */
typedef struct auth_case {
  int action;
  const char *a, *b;
  int refused;
} auth_case;

/* The rule alone (lith_command_rule, what lithd --dqlite vets with): each
 * action's arguments in sqlite3_set_authorizer's order. */
static void test_lith_names_rule(void **state) {
  (void)state;
  static const auth_case cases[] = {
      {SQLITE_CREATE_TABLE, "_lith_x", NULL, 1},
      {SQLITE_CREATE_TABLE, "_LiTh_X", NULL, 1}, /* SQLite's names ignore ASCII case */
      {SQLITE_CREATE_TABLE, "lith_x", NULL, 0},
      {SQLITE_CREATE_TABLE, "_lithx", NULL, 0},
      {SQLITE_CREATE_TABLE, "t", NULL, 0},
      {SQLITE_CREATE_TEMP_TABLE, "_lith_batches", NULL, 1},
      {SQLITE_CREATE_VIEW, "_lith_batches", NULL, 1},
      {SQLITE_CREATE_TEMP_VIEW, "_Lith_v", NULL, 1},
      {SQLITE_CREATE_VTABLE, "_lith_v", "fts5", 1},
      {SQLITE_CREATE_VTABLE, "v", "fts5", 0},
      {SQLITE_CREATE_INDEX, "_lith_i", "t", 1},
      {SQLITE_CREATE_INDEX, "i", "_lith_batches", 1}, /* an index ON lith's table */
      {SQLITE_CREATE_INDEX, "i", "t", 0},
      {SQLITE_CREATE_TEMP_INDEX, "i", "_LITH_batches", 1},
      {SQLITE_CREATE_TRIGGER, "_lith_tr", "t", 1},
      {SQLITE_CREATE_TRIGGER, "tr", "_lith_batches", 1},
      {SQLITE_CREATE_TRIGGER, "tr", "t", 0},
      {SQLITE_CREATE_TEMP_TRIGGER, "tr", "_lith_batches", 1},
      {SQLITE_DROP_TABLE, "_lith_batches", NULL, 1},
      {SQLITE_DROP_TABLE, "t", NULL, 0},
      {SQLITE_DROP_TEMP_TABLE, "_lith_x", NULL, 1},
      {SQLITE_DROP_VIEW, "_lith_v", NULL, 1},
      {SQLITE_DROP_TEMP_VIEW, "_lith_v", NULL, 1},
      {SQLITE_DROP_VTABLE, "_lith_v", "fts5", 1},
      {SQLITE_DROP_INDEX, "_lith_batches_time", "_lith_batches", 1},
      {SQLITE_DROP_INDEX, "i", "_lith_batches", 1},
      {SQLITE_DROP_TEMP_INDEX, "_lith_i", "t", 1},
      {SQLITE_DROP_TRIGGER, "tr", "_lith_batches", 1},
      {SQLITE_DROP_TEMP_TRIGGER, "_lith_tr", "t", 1},
      {SQLITE_ALTER_TABLE, "main", "_lith_batches", 1}, /* the schema first, then the table */
      {SQLITE_ALTER_TABLE, "main", "_LITH_SCHEMA", 1},
      {SQLITE_ALTER_TABLE, "_lith_db", "t", 0},
      {SQLITE_INSERT, "_lith_batches", NULL, 1},
      {SQLITE_UPDATE, "_lith_batches", "lost", 1},
      {SQLITE_DELETE, "_lith_schema", NULL, 1},
      {SQLITE_INSERT, "t", NULL, 0},
      {SQLITE_UPDATE, "t", "_lith_col", 0},
      {SQLITE_READ, "_lith_batches", "lost", 0}, /* reading stays allowed */
      {SQLITE_SELECT, NULL, NULL, 0},
      {SQLITE_ANALYZE, "_lith_batches", NULL, 0},
      {SQLITE_REINDEX, "_lith_batches_time", NULL, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const auth_case *k = &cases[i];
    char why[160] = "stale";
    int rc = lith_command_rule(k->action, k->a, k->b, "main", why, sizeof why);
    if (rc != (k->refused ? SQLITE_DENY : SQLITE_OK))
      fail_msg("case %zu: action %d (%s, %s): %d (%s)", i, k->action, k->a ? k->a : "NULL",
               k->b ? k->b : "NULL", rc, why);
    if (k->refused) {
      assert_non_null(strstr(why, "names beginning _lith_ are lith's"));
      assert_non_null(strstr(why, k->action == SQLITE_ALTER_TABLE ? k->b : k->a));
    } else {
      assert_string_equal(why, "");
    }
  }
  /* a short buffer is filled as far as it goes, and still ends */
  char tiny[8];
  assert_int_equal(lith_command_rule(SQLITE_DELETE, "_lith_batches", NULL, "main", tiny, sizeof tiny),
                   SQLITE_DENY);
  assert_int_equal(strlen(tiny), sizeof tiny - 1);
  assert_int_equal(lith_command_rule(SQLITE_DELETE, "_lith_batches", NULL, "main", NULL, 0), SQLITE_DENY);
}

/* What a command's lith_tx_stmt left in lith_errmsg (what lithd answers). */
typedef struct stmt_probe {
  const char *sql;
  char msg[LITH_ERRMSG_MAX];
} stmt_probe;

static int probe_stmt(lith_tx *tx, void *arg) {
  stmt_probe *p = arg;
  sqlite3_stmt *st = lith_tx_stmt(tx, p->sql);
  snprintf(p->msg, sizeof p->msg, "%s", st ? "" : lith_errmsg(NULL));
  return st ? LITH_OK : lith_tx_rc(tx);
}

static int count_lith_rows(lith_rx *rx, void *arg) {
  return lith_rx_int64(rx, (int64_t *)arg, "SELECT count(*) FROM _lith_batches", "");
}

/* The rule as lith's authorizer, on a file that has _lith_ tables (its
 * migrations made them: they are not commands): every statement that would
 * make or change one fails alone with the rule's reason; reading works; a
 * trigger's body is authorized where it fires. */
static void test_lith_tables_are_lith_s(void **state) {
  (void)state;
  static const char *const migrations[] = {
      "CREATE TABLE kv(k TEXT PRIMARY KEY, v INTEGER NOT NULL);",
      "CREATE TABLE _lith_batches(id INTEGER PRIMARY KEY, time INTEGER NOT NULL, lost INTEGER NOT NULL);"
      "CREATE INDEX _lith_batches_time ON _lith_batches(time);"
      "INSERT INTO _lith_batches VALUES (1, 2, 0)",
  };
  lith_options opt;
  t_bank_options(&opt);
  opt.migrations = migrations;
  opt.n_migrations = 2;
  lith *db = t_open_fresh(DB, &opt);
  static const char *const refused[] = {
      "CREATE TABLE _lith_x(a)",
      "CREATE TABLE \"_LITH_X\"(a)",
      "CREATE TEMP TABLE _lith_batches(id, time, lost)",
      "CREATE VIEW _lith_v AS SELECT 1",
      "CREATE TEMP VIEW _lith_v AS SELECT 1",
      "CREATE INDEX _lith_i ON kv(v)",
      "CREATE INDEX i ON _lith_batches(lost)",
      "CREATE TRIGGER _lith_tr AFTER INSERT ON kv BEGIN SELECT 1; END",
      "CREATE TRIGGER tr AFTER INSERT ON _lith_batches BEGIN SELECT 1; END",
      "CREATE TEMP TRIGGER tr AFTER INSERT ON main._lith_batches BEGIN SELECT 1; END",
      "CREATE VIRTUAL TABLE _lith_f USING fts4(body)",
      "ALTER TABLE _lith_batches RENAME COLUMN lost TO z",
      "ALTER TABLE main._lith_batches RENAME TO y",
      "ALTER TABLE _lith_batches ADD COLUMN z",
      "ALTER TABLE _lith_batches DROP COLUMN lost",
      "DROP TABLE _lith_batches",
      "DROP VIEW _lith_batches",
      "DROP INDEX _lith_batches_time",
      "INSERT INTO _lith_batches VALUES (3, 4, 0)",
      "REPLACE INTO _LITH_BATCHES VALUES (1, 2, 1)",
      "UPDATE _lith_batches SET lost = 1",
      "DELETE FROM _lith_batches",
      "WITH d AS (SELECT 1) DELETE FROM _lith_batches WHERE id IN (SELECT * FROM d)",
  };
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
    int rc = lith_do(db, lith_cmd_sql, (void *)refused[i]);
    if (rc == LITH_OK)
      fail_msg("%s was allowed", refused[i]);
    if (!strstr(lith_errmsg(db), "not authorized") || !strstr(lith_errmsg(db), "names beginning _lith_"))
      fail_msg("%s: %s", refused[i], lith_errmsg(db));
    /* the command's own lith_errmsg says which rule, not only "not authorized" */
    stmt_probe p = {refused[i], ""};
    assert_int_not_equal(lith_do(db, probe_stmt, &p), LITH_OK);
    if (!strstr(p.msg, "names beginning _lith_"))
      fail_msg("%s: lith_tx_stmt: %s", refused[i], p.msg);
  }
  /* a rename onto lith's table fails as onto any name taken */
  assert_int_not_equal(lith_do(db, lith_cmd_sql, "ALTER TABLE kv RENAME TO _lith_batches"), LITH_OK);
  assert_non_null(strstr(lith_errmsg(db), "already another table"));
  /* reading them is allowed, in a command and in a read */
  int64_t n = 0;
  assert_int_equal(lith_do(db, lith_cmd_sql, "INSERT INTO kv SELECT 'n', count(*) FROM _lith_batches"),
                   LITH_OK);
  assert_int_equal(lith_read(db, count_lith_rows, &n), LITH_OK);
  assert_int_equal(n, 1);
  /* A trigger on a table of the client's may name lith's table in its body
   * (SQLite authorizes a body where it fires): every write it fires on is
   * refused there, with the trigger's statement. */
  assert_int_equal(lith_do(db, lith_cmd_sql,
                           "CREATE TRIGGER sneak AFTER INSERT ON kv BEGIN DELETE FROM _lith_batches; END"),
                   LITH_OK);
  assert_int_not_equal(lith_do(db, t_put_cmd, "fires"), LITH_OK);
  assert_non_null(strstr(lith_errmsg(db), "DELETE FROM _lith_batches"));
  assert_int_equal(lith_do(db, lith_cmd_sql, "DROP TRIGGER sneak"), LITH_OK);
  assert_int_equal(lith_do(db, t_put_cmd, "after"), LITH_OK);
  assert_int_equal(lith_close(db), LITH_OK);
  /* lith's tables as the migrations left them; nothing else named _lith_ */
  assert_int_equal(q("SELECT count(*) FROM _lith_batches WHERE id = 1 AND time = 2 AND lost = 0"), 1);
  assert_int_equal(q("SELECT count(*) FROM _lith_batches"), 1);
  assert_int_equal(q("SELECT count(*) FROM sqlite_schema WHERE lower(substr(name, 1, 6)) = '_lith_'"), 2);
  assert_int_equal(q("SELECT count(*) FROM pragma_table_info('_lith_batches')"), 3);
  assert_int_equal(count_kv("n"), 1);
  assert_int_equal(count_kv("fires"), 0);
  assert_int_equal(count_kv("after"), 1);
}

/* ---- 3c. foreign keys onto lith's tables --------------------------------- */

/* lith_command_check alone, on a connection of the test's (what lithd
 * --dqlite runs on its copy of the cluster's schema), and which actions
 * call for it. */
static void test_fk_onto_lith_rule(void **state) {
  (void)state;
  assert_int_not_equal(lith_command_needs_check(SQLITE_CREATE_TABLE), 0);
  assert_int_not_equal(lith_command_needs_check(SQLITE_ALTER_TABLE), 0);
  static const int others[] = {SQLITE_CREATE_TEMP_TABLE,
                               SQLITE_CREATE_INDEX,
                               SQLITE_CREATE_VIEW,
                               SQLITE_CREATE_TRIGGER,
                               SQLITE_DROP_TABLE,
                               SQLITE_INSERT,
                               SQLITE_UPDATE,
                               SQLITE_READ,
                               SQLITE_PRAGMA};
  for (size_t i = 0; i < sizeof others / sizeof *others; i++)
    assert_int_equal(lith_command_needs_check(others[i]), 0);

  sqlite3 *h = NULL;
  assert_int_equal(sqlite3_open(":memory:", &h), SQLITE_OK);
  char why[200] = "stale";
  assert_int_equal(lith_command_check(h, why, sizeof why), SQLITE_OK);
  assert_string_equal(why, "");
  /* keys onto tables of the client's, or names that only look like lith's */
  assert_int_equal(
      sqlite3_exec(h,
                   "CREATE TABLE p(id INTEGER PRIMARY KEY);"
                   "CREATE TABLE c(x REFERENCES p, y REFERENCES lith_batches, "
                   "z REFERENCES _lithbatches, w REFERENCES \"_lith batches\");"
                   "CREATE VIEW v AS SELECT 1;"
                   "CREATE TEMP TABLE tp(x REFERENCES _lith_batches)", /* TEMP: its own schema's */
                   NULL, NULL, NULL),
      SQLITE_OK);
  assert_int_equal(lith_command_check(h, why, sizeof why), SQLITE_OK);
  assert_string_equal(why, "");
  /* one onto _lith_*, in any case and any form: the table and its parent named */
  static const char *const bad[] = {
      "CREATE TABLE \"we ird\"(x REFERENCES _lith_batches(id))",
      "CREATE TABLE \"we ird\"(x, FOREIGN KEY(x) REFERENCES \"_LiTh_Batches\")",
      "CREATE TABLE \"we ird\"(x REFERENCES [_LITH_SCHEMA](version) ON DELETE CASCADE)",
      "CREATE TABLE \"we ird\"(x REFERENCES _lith_batches(time) DEFERRABLE INITIALLY DEFERRED)",
      "CREATE TABLE \"we ird\"(x REFERENCES _lith_not_yet)", /* a parent that does not exist (yet) */
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    assert_int_equal(sqlite3_exec(h, bad[i], NULL, NULL, NULL), SQLITE_OK);
    if (lith_command_check(h, why, sizeof why) != SQLITE_DENY)
      fail_msg("%s: allowed", bad[i]);
    assert_non_null(strstr(why, "we ird REFERENCES _"));
    assert_non_null(strstr(why, "names beginning _lith_ are lith's"));
    assert_int_equal(sqlite3_exec(h, "DROP TABLE \"we ird\"", NULL, NULL, NULL), SQLITE_OK);
  }
  /* a rename rewrites the keys that name the table renamed */
  assert_int_equal(sqlite3_exec(h, "ALTER TABLE p RENAME TO _lith_p", NULL, NULL, NULL), SQLITE_OK);
  assert_int_equal(lith_command_check(h, why, sizeof why), SQLITE_DENY);
  assert_non_null(strstr(why, "c REFERENCES _lith_p"));
  /* a short buffer still ends; no buffer; no connection */
  char tiny[8];
  assert_int_equal(lith_command_check(h, tiny, sizeof tiny), SQLITE_DENY);
  assert_int_equal(strlen(tiny), sizeof tiny - 1);
  assert_int_equal(lith_command_check(h, NULL, 0), SQLITE_DENY);
  assert_int_equal(lith_command_check(NULL, why, sizeof why), SQLITE_MISUSE);
  sqlite3_close(h);
}

/* A command's own step: run one statement, then lith_tx_check. */
typedef struct checked {
  const char *sql;
  int rc_exec, rc_check;
  char msg[LITH_ERRMSG_MAX];
} checked;

static int exec_then_check(lith_tx *tx, void *arg) {
  checked *c = arg;
  c->rc_exec = lith_tx_exec(tx, c->sql, NULL);
  c->rc_check = lith_tx_check(tx);
  snprintf(c->msg, sizeof c->msg, "%s", c->rc_check != LITH_OK ? lith_errmsg(NULL) : "");
  return c->rc_exec != LITH_OK ? c->rc_exec : c->rc_check;
}

/* Statements one by one as a server runs a client's: each in a savepoint of
 * its own, checked after it; a refused one is undone alone, the command goes
 * on and commits the rest. */
static int statements_one_by_one(lith_tx *tx, void *arg) {
  checked *c = arg; /* NULL-terminated by sql */
  for (; c->sql != NULL; c++)
    lith_tx_savepoint(tx, exec_then_check, c);
  return LITH_OK;
}

/* A DDL statement prepared in one command and left unstepped, for the next
 * to run from the statement cache. */
static int prepare_only(lith_tx *tx, void *arg) { return lith_tx_stmt(tx, arg) ? LITH_OK : lith_tx_rc(tx); }

static int step_cached(lith_tx *tx, void *arg) {
  sqlite3_stmt *st = lith_tx_stmt(tx, arg);
  if (st == NULL)
    return lith_tx_rc(tx);
  return sqlite3_step(st) == SQLITE_DONE ? LITH_OK : lith_tx_error(tx, LITH_ERROR, "step failed");
}

static int step_cached_checked(lith_tx *tx, void *arg) {
  int rc = step_cached(tx, arg);
  return rc != LITH_OK ? rc : lith_tx_check(tx);
}

/* In one command: prepare it, check (nothing ran yet: it passes), then run
 * it from the cache: prepared again after the check, so checked again. */
static int prepare_check_step(lith_tx *tx, void *arg) {
  if (lith_tx_stmt(tx, arg) == NULL)
    return lith_tx_rc(tx);
  sqlite3_reset(lith_tx_stmt(tx, arg));
  int rc = lith_tx_check(tx);
  if (rc != LITH_OK)
    return lith_tx_error(tx, LITH_USER, "the check before the statement ran: %d", rc);
  if ((rc = step_cached(tx, arg)) != LITH_OK)
    return rc;
  if ((rc = lith_tx_check(tx)) == LITH_OK) /* the command's end would still refuse it */
    return lith_tx_error(tx, LITH_USER, "lith_tx_check passed the statement");
  return rc;
}

/* Undo a bad key, check (it passes), then undo the undo: the key is back. */
static int undo_then_fail(lith_tx *tx, void *arg) {
  (void)arg;
  int rc = lith_tx_exec(tx, "DROP TABLE bad", NULL);
  if (rc == LITH_OK)
    rc = lith_tx_check(tx);
  return rc != LITH_OK ? rc : lith_tx_error(tx, LITH_USER, "undone on purpose");
}

static int bad_then_savepoint(lith_tx *tx, void *arg) {
  int *inner = arg;
  int rc = lith_tx_exec(tx, "CREATE TABLE bad(x REFERENCES _lith_batches)", NULL);
  if (rc != LITH_OK)
    return rc;
  *inner = lith_tx_savepoint(tx, undo_then_fail, NULL);
  return LITH_OK; /* with the bad key still there */
}

/* Alone, a mid-command COMMIT is where the rule is checked too. */
typedef struct alone_fk {
  int rc_commit, rc_rollback;
  char msg[LITH_ERRMSG_MAX];
} alone_fk;

static int alone_fk_cmd(lith_tx *tx, void *arg) {
  alone_fk *a = arg;
  int rc = lith_tx_exec(tx, "CREATE TABLE bad(x REFERENCES _lith_batches)", NULL);
  if (rc != LITH_OK)
    return rc;
  a->rc_commit = lith_tx_commit(tx);
  snprintf(a->msg, sizeof a->msg, "%s", lith_errmsg(NULL));
  a->rc_rollback = lith_tx_rollback(tx);
  return lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES ('alone', 1)", NULL);
}

static int64_t n_tables(void) {
  return q("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name NOT IN ('kv', 'accounts', "
           "'_lith_batches', '_lith_schema')");
}

/* Through lith's writer, on a file whose migrations made _lith_ tables: no
 * command may leave a table with a foreign key onto one. The authorizer
 * never sees a REFERENCES clause: the rule reads the schema the statement
 * left (lith_tx_check after a statement; every command that prepared a
 * CREATE or ALTER TABLE when it ends), and one prepared in a command and
 * run in a later one, from the statement cache, is checked too (#32: on
 * --dqlite one such key stopped every write). */
static void test_fk_onto_lith_tables(void **state) {
  (void)state;
  static const char *const migrations[] = {
      "CREATE TABLE kv(k TEXT PRIMARY KEY, v INTEGER NOT NULL);",
      "CREATE TABLE _lith_batches(id INTEGER PRIMARY KEY, time INTEGER NOT NULL, lost INTEGER NOT NULL);"
      "CREATE TABLE _lith_schema(version INTEGER NOT NULL);"
      "INSERT INTO _lith_batches VALUES (1, 2, 0)",
  };
  lith_options opt;
  t_bank_options(&opt);
  opt.migrations = migrations;
  opt.n_migrations = 2;
  lith *db = t_open_fresh(DB, &opt);
  assert_int_equal(lith_do(db, lith_cmd_sql,
                           "CREATE TABLE p(id INTEGER PRIMARY KEY); CREATE TABLE pc(x REFERENCES p(id))"),
                   LITH_OK);
  int64_t tables = n_tables();
  static const char *const refused[] = {
      "CREATE TABLE c(x REFERENCES _lith_batches(id))",
      "CREATE TABLE c(x REFERENCES _lith_batches)",
      "CREATE TABLE c(x, FOREIGN KEY(x) REFERENCES \"_LITH_BATCHES\")",
      "CREATE TABLE c(x REFERENCES _LiTh_SchemA(version) ON DELETE CASCADE)",
      "CREATE TABLE c(x REFERENCES _lith_batches(time) DEFERRABLE INITIALLY DEFERRED)",
      "CREATE TABLE IF NOT EXISTS main.c(x REFERENCES _lith_new)",
      "ALTER TABLE kv ADD COLUMN y REFERENCES _lith_schema",
      "ALTER TABLE p RENAME TO _lith_p", /* pc's key follows it */
      "CREATE TABLE c(x); ALTER TABLE c ADD COLUMN y REFERENCES _lith_batches(id)",
  };
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
    /* in a command that checks only when it ends (lith_cmd_sql) */
    if (lith_do(db, lith_cmd_sql, (void *)refused[i]) == LITH_OK)
      fail_msg("%s was allowed", refused[i]);
    if (!strstr(lith_errmsg(db), "not authorized") || !strstr(lith_errmsg(db), "names beginning _lith_"))
      fail_msg("%s: %s", refused[i], lith_errmsg(db));
    assert_int_equal(n_tables(), tables);
  }
  /* statement by statement: the one refused is undone, the rest commit */
  checked steps[] = {
      {"CREATE TABLE ok1(x REFERENCES p(id))", 0, 0, ""},
      {"CREATE TABLE c(x REFERENCES _lith_batches)", 0, 0, ""},
      {"INSERT INTO kv(k, v) VALUES ('after', 1)", 0, 0, ""},
      {"ALTER TABLE kv ADD COLUMN y REFERENCES _LITH_BATCHES", 0, 0, ""},
      {"CREATE TEMP TABLE tp(x REFERENCES _lith_batches)", 0, 0, ""}, /* TEMP: its own schema's */
      {NULL, 0, 0, ""}};
  assert_int_equal(lith_do(db, statements_one_by_one, steps), LITH_OK);
  static const int want[] = {LITH_OK, LITH_ERROR, LITH_OK, LITH_ERROR, LITH_OK};
  for (int i = 0; i < 5; i++) {
    assert_int_equal(steps[i].rc_exec, LITH_OK);
    if (steps[i].rc_check != want[i])
      fail_msg("%s: lith_tx_check %d (%s)", steps[i].sql, steps[i].rc_check, steps[i].msg);
    if (want[i] != LITH_OK && (strncmp(steps[i].msg, "not authorized (", 16) != 0 ||
                               !strstr(steps[i].msg, "REFERENCES _") || !strstr(steps[i].msg, "are lith's")))
      fail_msg("%s: %s", steps[i].sql, steps[i].msg);
  }
  assert_int_equal(q("SELECT count(*) FROM sqlite_schema WHERE name = 'ok1'"), 1);
  assert_int_equal(q("SELECT count(*) FROM sqlite_schema WHERE name IN ('c', 'tp')"), 0);
  assert_int_equal(count_kv("after"), 1);
  assert_int_equal(q("SELECT count(*) FROM pragma_table_info('kv')"), 2);
  /* Prepared in one command, run from the cache in the next: prepared
   * again there (lith expired it), so checked there. */
  static const char cached[] = "CREATE TABLE cached(x REFERENCES _lith_batches(id))";
  assert_int_equal(lith_do(db, prepare_only, (void *)cached), LITH_OK);
  assert_int_not_equal(lith_do(db, step_cached_checked, (void *)cached), LITH_OK);
  assert_non_null(strstr(lith_errmsg(db), "cached REFERENCES _lith_batches"));
  assert_int_equal(lith_do(db, prepare_only, (void *)cached), LITH_OK);
  assert_int_not_equal(lith_do(db, step_cached, (void *)cached), LITH_OK); /* no check: when it ends */
  assert_non_null(strstr(lith_errmsg(db), "cached REFERENCES _lith_batches"));
  /* (a text of its own: prepared first in this command) */
  assert_int_equal(lith_do(db, prepare_check_step, "CREATE TABLE cached2(x REFERENCES _lith_batches(id))"),
                   LITH_ERROR);
  assert_non_null(strstr(lith_errmsg(db), "cached2 REFERENCES _lith_batches"));
  /* a check passed inside a savepoint that is then undone: the key it
   * passed over is back, and the command's end sees it */
  int inner = LITH_OK;
  assert_int_not_equal(lith_do(db, bad_then_savepoint, &inner), LITH_OK);
  assert_int_equal(inner, LITH_USER);
  assert_non_null(strstr(lith_errmsg(db), "bad REFERENCES _lith_batches"));
  /* alone: the mid-command COMMIT refuses it, the rollback undoes it */
  alone_fk a = {-1, -1, ""};
  t_async done = {0};
  lith_request r;
  t_submit_alone(db, &r, alone_fk_cmd, &a, &done);
  t_async_wait(&done, 1);
  assert_int_equal(r.rc, LITH_OK);
  assert_int_equal(a.rc_commit, LITH_ERROR);
  assert_non_null(strstr(a.msg, "bad REFERENCES _lith_batches"));
  assert_int_equal(a.rc_rollback, LITH_OK);
  assert_int_equal(count_kv("alone"), 1);
  /* what is allowed still runs */
  assert_int_equal(lith_do(db, lith_cmd_sql, "CREATE TABLE ok2(x REFERENCES kv(k)); DROP TABLE ok2"),
                   LITH_OK);
  assert_int_equal(lith_close(db), LITH_OK);
  /* nothing anywhere names lith's tables as a parent */
  assert_int_equal(n_tables(), tables + 1); /* ok1 */
  assert_int_equal(q("SELECT count(*) FROM sqlite_schema AS m, pragma_foreign_key_list(m.name) AS f "
                     "WHERE m.type = 'table' AND lower(substr(f.\"table\", 1, 6)) = '_lith_'"),
                   0);
  assert_int_equal(q("SELECT count(*) FROM _lith_batches"), 1);
}

/* ---- 4. a write statement left mid-step ----------------------------------- */

typedef struct left_running {
  sqlite3_stmt *st; /* the command's own statement, finalized by the test */
  int fail;         /* return an error instead of LITH_OK */
  const char *key;
} left_running;

static int insert_returning_once(lith_tx *tx, void *arg) {
  left_running *a = arg;
  if (sqlite3_prepare_v2(lith_tx_db(tx), "INSERT INTO kv(k, v) VALUES (?, 1) RETURNING rowid", -1, &a->st,
                         NULL) != SQLITE_OK)
    return LITH_ERROR;
  sqlite3_bind_text(a->st, 1, a->key, -1, SQLITE_STATIC);
  if (sqlite3_step(a->st) != SQLITE_ROW) /* the row is written; the statement is not done */
    return LITH_ERROR;
  return a->fail ? LITH_USER : LITH_OK; /* neither reset nor finalized */
}

static void test_write_statement_left_running(void **state) {
  (void)state;
  lith *db = open_db();
  left_running ok = {NULL, 0, "left-ok"}, bad = {NULL, 1, "left-bad"};
  assert_int_equal(lith_do(db, insert_returning_once, &ok), LITH_MISUSE);
  assert_non_null(strstr(lith_errmsg(db), "write statement running"));
  assert_non_null(strstr(lith_errmsg(db), "INSERT INTO kv"));
  assert_int_equal(lith_do(db, t_put_cmd, "next-1"), LITH_OK); /* the writer goes on */
  assert_int_equal(lith_do(db, insert_returning_once, &bad), LITH_USER);
  assert_int_equal(lith_do(db, t_put_cmd, "next-2"), LITH_OK);
  /* in one batch with others */
  left_running mid = {NULL, 0, "left-mid"};
  t_gate gate;
  t_async done = {0};
  lith_request r[3];
  t_gate_close(db, &gate);
  t_submit(db, &r[0], t_put_cmd, "batch-a", &done);
  t_submit(db, &r[1], insert_returning_once, &mid, &done);
  t_submit(db, &r[2], t_put_cmd, "batch-b", &done);
  t_gate_open(&gate);
  t_async_wait(&done, 3);
  assert_int_equal(r[0].rc, LITH_OK);
  assert_int_equal(r[1].rc, LITH_MISUSE);
  assert_int_equal(r[2].rc, LITH_OK);
  /* the statements were reset; the application finalizes its own */
  assert_false(sqlite3_stmt_busy(ok.st));
  sqlite3_finalize(ok.st);
  sqlite3_finalize(bad.st);
  sqlite3_finalize(mid.st);
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(q("SELECT count(*) FROM kv WHERE k LIKE 'left-%'"), 0);
  assert_int_equal(q("SELECT count(*) FROM kv"), 4);
}

typedef struct read_left {
  sqlite3_stmt *st;
} read_left;

static int select_once(lith_tx *tx, void *arg) {
  read_left *a = arg;
  int rc = lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES ('with-read', 1), ('with-read-2', 1)", NULL);
  if (rc != LITH_OK)
    return rc;
  if (sqlite3_prepare_v2(lith_tx_db(tx), "SELECT k FROM kv", -1, &a->st, NULL) != SQLITE_OK)
    return LITH_ERROR;
  return sqlite3_step(a->st) == SQLITE_ROW ? LITH_OK : LITH_ERROR; /* one row of two read */
}

static void test_read_statement_left_on_the_writer(void **state) {
  (void)state;
  lith *db = open_db();
  read_left a = {NULL};
  /* A read left mid-step does not fail the command (reads do not block a
   * RELEASE), but it must not keep a read transaction open on the write
   * connection after the batch: that would pin the WAL. */
  assert_int_equal(lith_do(db, select_once, &a), LITH_OK);
  assert_false(sqlite3_stmt_busy(a.st));
  /* No reader holds the WAL: a TRUNCATE checkpoint from outside completes
   * (its first column, "busy", is 0). */
  assert_int_equal(q("PRAGMA wal_checkpoint(TRUNCATE)"), 0);
  sqlite3_finalize(a.st);
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(count_kv("with-read"), 1);
}

static int read_scratch_once(lith_tx *tx, void *arg) {
  read_left *a = arg;
  if (sqlite3_prepare_v2(lith_tx_db(tx), "SELECT x FROM scratch", -1, &a->st, NULL) != SQLITE_OK)
    return LITH_ERROR;
  return sqlite3_step(a->st) == SQLITE_ROW ? LITH_OK : LITH_ERROR; /* and leaves it */
}

/* An innocent command does not fail for a read another command of its
 * batch left mid-step: dropping a table such a read holds is "database
 * table is locked" in SQLite. */
static void test_read_left_does_not_fail_the_next_command(void **state) {
  (void)state;
  lith *db = open_db();
  assert_int_equal(lith_do(db, lith_cmd_sql, "CREATE TABLE scratch(x); INSERT INTO scratch VALUES (1), (2)"),
                   LITH_OK);
  read_left a = {NULL};
  t_gate gate;
  t_async done = {0};
  lith_request r[3];
  t_gate_close(db, &gate);
  t_submit(db, &r[0], read_scratch_once, &a, &done);
  t_submit(db, &r[1], lith_cmd_sql, "DROP TABLE scratch", &done);
  t_submit(db, &r[2], t_put_cmd, "after-drop", &done);
  t_gate_open(&gate);
  t_async_wait(&done, 3);
  assert_int_equal(r[0].rc, LITH_OK);
  if (r[1].rc != LITH_OK)
    fail_msg("DROP TABLE failed: %s", r[1].errmsg);
  assert_int_equal(r[2].rc, LITH_OK);
  sqlite3_finalize(a.st);
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(q("SELECT count(*) FROM sqlite_schema WHERE name = 'scratch'"), 0);
  assert_int_equal(count_kv("after-drop"), 1);
}

/* A statement never finalized by its command does not keep lith_close from
 * closing the connection. */
static void test_statement_never_finalized(void **state) {
  (void)state;
  lith *db = open_db();
  left_running leak = {NULL, 1, "leaked"};
  assert_int_equal(lith_do(db, insert_returning_once, &leak), LITH_USER);
  assert_int_equal(lith_do(db, t_put_cmd, "after-leak"), LITH_OK);
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(count_kv("after-leak"), 1);
  assert_int_equal(count_kv("leaked"), 0);
  sqlite3_finalize(leak.st); /* the connection (a zombie until now) goes with it */
}

/* ---- more misbehaviour ---------------------------------------------------- */

static int returns_sqlite_done(lith_tx *tx, void *arg) {
  (void)arg;
  sqlite3_stmt *st = lith_tx_stmt(tx, "INSERT INTO kv(k, v) VALUES ('done-code', 1)");
  return st ? sqlite3_step(st) : LITH_ERROR; /* SQLITE_DONE (101): not LITH_OK */
}

static int returns_negative(lith_tx *tx, void *arg) {
  (void)arg;
  lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES ('negative', 1)", NULL);
  return -1;
}

static void test_more_misbehaviour(void **state) {
  (void)state;
  lith *db = open_db();
  /* an SQLite code returned as the outcome: rolled back, and reported */
  assert_int_equal(lith_do(db, returns_sqlite_done, NULL), SQLITE_DONE);
  assert_non_null(strstr(lith_errmsg(db), "not a lith result code"));
  assert_int_equal(lith_do(db, returns_negative, NULL), -1);
  /* several statements through sqlite3_exec: the good ones before a bad one
   * are undone with the command */
  assert_int_equal(lith_do(db, lith_cmd_sql,
                           "INSERT INTO kv VALUES ('exec-1', 1); INSERT INTO kv VALUES ('exec-2', 1);"
                           " INSERT INTO nowhere VALUES (1)"),
                   LITH_ERROR);
  assert_int_not_equal(
      lith_do(db, lith_cmd_sql,
              "INSERT INTO kv VALUES ('exec-3', 1); COMMIT; INSERT INTO kv VALUES ('exec-4', 1)"),
      LITH_OK);
  assert_non_null(strstr(lith_errmsg(db), "the writer owns"));
  /* its own savepoint left open: kept when it succeeds, undone when not */
  assert_int_equal(lith_do(db, lith_cmd_sql, "SAVEPOINT a; INSERT INTO kv VALUES ('open-ok', 1)"), LITH_OK);
  assert_int_not_equal(
      lith_do(db, lith_cmd_sql, "SAVEPOINT b; INSERT INTO kv VALUES ('open-bad', 1); SELECT * FROM nowhere"),
      LITH_OK);
  assert_int_equal(lith_do(db, t_put_cmd, "last"), LITH_OK);
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(count_kv("done-code"), 0);
  assert_int_equal(count_kv("negative"), 0);
  assert_int_equal(q("SELECT count(*) FROM kv WHERE k LIKE 'exec-%'"), 0);
  assert_int_equal(count_kv("open-ok"), 1);
  assert_int_equal(count_kv("open-bad"), 0);
  assert_int_equal(count_kv("last"), 1);
}

/* ---- 6. the same SQL twice while the first is mid-step --------------------- */

/* One walk, in a command (tx) or in a read (rx): the same recursion asking
 * the statement cache for the same SQL at every level. */
typedef struct walk {
  lith_tx *tx;
  lith_rx *rx;
  int visited;
  int rc;
  char msg[256];
} walk;

static int walk_from(walk *w, int64_t node) {
  static const char *const sql = "SELECT id FROM node WHERE parent = ? ORDER BY id";
  w->visited++;
  sqlite3_stmt *st = w->tx ? lith_tx_stmt(w->tx, sql) : lith_rx_stmt(w->rx, sql);
  if (!st) {
    w->rc = w->tx ? lith_tx_rc(w->tx) : LITH_ERROR;
    snprintf(w->msg, sizeof w->msg, "%s", lith_errmsg(NULL));
    return w->rc;
  }
  sqlite3_bind_int64(st, 1, node);
  int src;
  while ((src = sqlite3_step(st)) == SQLITE_ROW) {
    int rc = walk_from(w, sqlite3_column_int64(st, 0));
    if (rc != LITH_OK)
      return rc;
  }
  return src == SQLITE_DONE ? LITH_OK : LITH_ERROR;
}

static int walk_cmd(lith_tx *tx, void *arg) {
  walk *w = arg;
  w->tx = tx;
  return walk_from(w, 1);
}

static int walk_read(lith_rx *rx, void *arg) {
  walk *w = arg;
  w->rx = rx;
  return walk_from(w, 1);
}

static void test_recursive_walk_through_the_cache(void **state) {
  (void)state;
  lith *db = open_db();
  /* 1 -> 2, 3; 2 -> 4, 5; 3 -> 6, 7 */
  assert_int_equal(
      lith_do(db, lith_cmd_sql,
              "CREATE TABLE node(id INTEGER PRIMARY KEY, parent INTEGER);"
              "INSERT INTO node VALUES (1, NULL), (2, 1), (3, 1), (4, 2), (5, 2), (6, 3), (7, 3)"),
      LITH_OK);
  for (int round = 0; round < 2; round++) { /* the second round reuses the copies */
    walk w = {0};
    assert_int_equal(lith_do(db, walk_cmd, &w), LITH_OK);
    assert_int_equal(w.visited, 7);
    walk r = {0};
    assert_int_equal(lith_read(db, walk_read, &r), LITH_OK);
    assert_int_equal(r.visited, 7);
  }
  /* A chain deeper than the cache hands out copies: a loud error, never a
   * short walk. */
  assert_int_equal(lith_do(db, lith_cmd_sql,
                           "WITH RECURSIVE c(i) AS (SELECT 8 UNION ALL SELECT i + 1 FROM c WHERE i < 60)"
                           " INSERT INTO node SELECT i, CASE i WHEN 8 THEN 7 ELSE i - 1 END FROM c"),
                   LITH_OK);
  walk deep = {0};
  assert_int_equal(lith_do(db, walk_cmd, &deep), LITH_MISUSE);
  assert_int_equal(deep.rc, LITH_MISUSE);
  assert_non_null(strstr(deep.msg, "mid-step"));
  assert_int_equal(lith_do(db, t_put_cmd, "after-walk"), LITH_OK);
  assert_int_equal(lith_close(db), LITH_OK);
}

/* ---- 5. a read callback that leaves a statement mid-step ------------------- */

typedef struct stale {
  sqlite3_stmt *st;
  int64_t n;
} stale;

static int leave_read_running(lith_rx *rx, void *arg) {
  stale *s = arg;
  if (sqlite3_prepare_v2(lith_rx_db(rx), "SELECT k FROM kv", -1, &s->st, NULL) != SQLITE_OK)
    return LITH_ERROR;
  return sqlite3_step(s->st) == SQLITE_ROW ? LITH_OK : LITH_ERROR; /* and leaves it */
}

static int count_rows(lith_rx *rx, void *arg) {
  return lith_rx_int64(rx, &((stale *)arg)->n, "SELECT count(*) FROM kv", NULL);
}

static int put_many(lith_tx *tx, void *arg) {
  int base = *(int *)arg;
  for (int i = 0; i < 100; i++) {
    char k[32];
    snprintf(k, sizeof k, "many-%d", base + i);
    int rc = lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES (?, 1)", "s", k);
    if (rc != LITH_OK)
      return rc;
  }
  return LITH_OK;
}

static void test_read_callback_leaves_a_statement(void **state) {
  (void)state;
  lith_options opt;
  t_bank_options(&opt);
  opt.readers = 1; /* every read on the same connection */
  lith *db = t_open_fresh(DB, &opt);
  assert_int_equal(lith_do(db, lith_cmd_sql, "INSERT INTO kv VALUES ('a', 1), ('b', 1)"), LITH_OK);
  stale s = {NULL, 0};
  assert_int_equal(lith_read(db, leave_read_running, &s), LITH_OK);
  for (int b = 0; b < 2; b++) {
    int base = b * 100;
    assert_int_equal(lith_do(db, put_many, &base), LITH_OK);
  }
  assert_int_equal(lith_read(db, count_rows, &s), LITH_OK);
  assert_int_equal(s.n, 202); /* a fresh snapshot, not the one the statement held */
  assert_false(sqlite3_stmt_busy(s.st));
  sqlite3_finalize(s.st);
  assert_int_equal(lith_close(db), LITH_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_savepoint_names_in_any_case),
      cmocka_unit_test(test_no_write_after_the_transaction_was_rolled_back),
      cmocka_unit_test(test_many_culprits_fail_alone),
      cmocka_unit_test(test_deferred_fk_violation_fails_alone),
      cmocka_unit_test(test_defer_off_cannot_forget_a_violation),
      cmocka_unit_test(test_pragmas_cannot_outlive_the_command),
      cmocka_unit_test(test_temp_objects_and_triggers),
      cmocka_unit_test(test_lith_names_rule),
      cmocka_unit_test(test_lith_tables_are_lith_s),
      cmocka_unit_test(test_fk_onto_lith_rule),
      cmocka_unit_test(test_fk_onto_lith_tables),
      cmocka_unit_test(test_write_statement_left_running),
      cmocka_unit_test(test_read_statement_left_on_the_writer),
      cmocka_unit_test(test_read_left_does_not_fail_the_next_command),
      cmocka_unit_test(test_statement_never_finalized),
      cmocka_unit_test(test_more_misbehaviour),
      cmocka_unit_test(test_recursive_walk_through_the_cache),
      cmocka_unit_test(test_read_callback_leaves_a_statement),
  };
  return cmocka_run_group_tests_name("writer/misbehave", tests, NULL, NULL);
}
