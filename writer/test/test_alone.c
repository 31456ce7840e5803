/*
 * lith_submit_alone and what only an alone command may do (writer/batch.c):
 *   - the commands taken before it commit (and are answered) before it
 *     runs; those after it wait and commit after it, never in its
 *     transaction;
 *   - it runs once, even when its transaction is rolled back;
 *   - lith_tx_commit / lith_tx_rollback end its transaction in the middle
 *     and go on in a new one (a crash after lith_tx_commit keeps what it
 *     committed), refused in any other command or inside a savepoint, and
 *     a deferred foreign-key violation refuses the commit;
 *   - lith_tx_foreign_keys turns enforcement off for the rest of an alone
 *     command only (refused elsewhere);
 *   - lith_tx_vacuum commits what the command did, runs VACUUM outside any
 *     transaction (the file's pages go down once rows are deleted; an
 *     attach limit of 0 does not stop it) and goes on in a new one; refused
 *     in any other command or inside a savepoint, and bounded by
 *     command_timeout_ms;
 *   - lith_tx_restart_clock gives a waiting command its limit afresh;
 *   - lith_commit_count counts every commit, the mid-command ones too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common.h"

#define DB "alone.db"

static int64_t count_kv(const char *k) {
  char sql[256];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM kv WHERE k = '%s'", k);
  return t_query_int(DB, sql);
}

/* An alone command that checks, from inside, what is committed. */
typedef struct probe {
  int runs;
  int64_t before_seen; /* kv rows 'before' visible to a fresh connection while it runs */
  int64_t after_seen;
} probe;

static int probe_cmd(lith_tx *tx, void *arg) {
  probe *p = arg;
  p->runs++;
  p->before_seen = t_query_int(DB, "SELECT count(*) FROM kv WHERE k = 'before'");
  p->after_seen = t_query_int(DB, "SELECT count(*) FROM kv WHERE k = 'after'");
  return lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES ('alone', 1)", NULL);
}

static void test_order(void **state) {
  (void)state;
  lith_options opt;
  t_bank_options(&opt);
  lith *db = t_open_fresh(DB, &opt);
  t_gate g;
  t_async done = {0};
  lith_request r1, r2, r3;
  probe p = {0};
  t_gate_close(db, &g); /* what follows lands in one take */
  t_submit(db, &r1, t_put_cmd, "before", &done);
  t_submit_alone(db, &r2, probe_cmd, &p, &done);
  t_submit(db, &r3, t_put_cmd, "after", &done);
  t_gate_open(&g);
  t_async_wait(&done, 3);
  assert_int_equal(r1.rc, LITH_OK);
  assert_int_equal(r2.rc, LITH_OK);
  assert_int_equal(r3.rc, LITH_OK);
  assert_int_equal(p.runs, 1);
  assert_int_equal(p.before_seen, 1); /* committed before it ran */
  assert_int_equal(p.after_seen, 0);  /* not yet */
  assert_int_equal(count_kv("after"), 1);
  assert_int_equal(lith_close(db), LITH_OK);
}

/* Alone, a rollback of its transaction is its own failure: it is not run again. */
static int lose_cmd(lith_tx *tx, void *arg) {
  int *runs = arg;
  (*runs)++;
  lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES ('lost', 1)", NULL);
  /* RAISE(ROLLBACK) ends the whole transaction */
  return lith_tx_exec(tx, "INSERT INTO kv(k, v) SELECT 'x', RAISE(ROLLBACK, 'gone')", NULL);
}

static void test_runs_once(void **state) {
  (void)state;
  lith_options opt;
  t_bank_options(&opt);
  lith *db = t_open_fresh(DB, &opt);
  t_async done = {0};
  lith_request r, other;
  int runs = 0;
  t_gate g;
  t_gate_close(db, &g);
  t_submit_alone(db, &r, lose_cmd, &runs, &done);
  t_submit(db, &other, t_put_cmd, "other", &done);
  t_gate_open(&g);
  t_async_wait(&done, 2);
  assert_int_not_equal(r.rc, LITH_OK);
  assert_int_equal(runs, 1);
  assert_int_equal(other.rc, LITH_OK); /* after it, in a transaction of its own */
  assert_int_equal(count_kv("lost"), 0);
  assert_int_equal(count_kv("other"), 1);
  assert_int_equal(lith_close(db), LITH_OK);
}

/* Mid-command commits and rollbacks. */
typedef struct steps {
  int rc_commit, rc_rollback, rc_misuse_sp, rc_fk;
  uint64_t count_mid;
  lith *db;
} steps;

static int in_savepoint(lith_tx *tx, void *arg) {
  (void)arg;
  return lith_tx_commit(tx);
}

static int steps_cmd(lith_tx *tx, void *arg) {
  steps *s = arg;
  lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES ('c1', 1)", NULL);
  lith_tx_exec(tx, "CREATE TABLE fkc(k TEXT REFERENCES kv(k))", NULL);
  s->rc_commit = lith_tx_commit(tx);
  s->count_mid = lith_commit_count(s->db);
  lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES ('r1', 1)", NULL);
  s->rc_rollback = lith_tx_rollback(tx);
  s->rc_misuse_sp = lith_tx_savepoint(tx, in_savepoint, NULL);
  /* a deferred violation left: the commit is refused, the transaction stays */
  lith_tx_exec(tx, "PRAGMA defer_foreign_keys = ON", NULL);
  lith_tx_exec(tx, "INSERT INTO fkc VALUES ('nowhere')", NULL);
  s->rc_fk = lith_tx_commit(tx);
  lith_tx_exec(tx, "DELETE FROM fkc", NULL);
  return lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES ('c2', 1)", NULL);
}

static int plain_commit_cmd(lith_tx *tx, void *arg) {
  int *rc = arg;
  *rc = lith_tx_commit(tx);
  return LITH_OK;
}

static void test_commit_and_rollback_inside(void **state) {
  (void)state;
  lith_options opt;
  t_bank_options(&opt);
  lith *db = t_open_fresh(DB, &opt);
  t_async done = {0};
  lith_request r;
  steps s = {.db = db};
  assert_int_equal(lith_do(db, t_put_cmd, "first"), LITH_OK);
  uint64_t before = lith_commit_count(db);
  assert_true(before >= 1);
  t_submit_alone(db, &r, steps_cmd, &s, &done);
  t_async_wait(&done, 1);
  assert_int_equal(r.rc, LITH_OK);
  assert_int_equal(s.rc_commit, LITH_OK);
  assert_int_equal(s.count_mid, before + 1);
  assert_int_equal(s.rc_rollback, LITH_OK);
  assert_int_equal(s.rc_misuse_sp, LITH_MISUSE);
  assert_int_equal(s.rc_fk, LITH_CONSTRAINT);
  assert_int_equal(count_kv("c1"), 1);
  assert_int_equal(count_kv("r1"), 0);
  assert_int_equal(count_kv("c2"), 1);
  assert_int_equal(lith_commit_count(db), before + 2);
  /* in a command not submitted alone: refused */
  int rc = 0;
  assert_int_equal(lith_do(db, plain_commit_cmd, &rc), LITH_OK);
  assert_int_equal(rc, LITH_MISUSE);
  assert_int_equal(lith_close(db), LITH_OK);
  t_assert_integrity(DB);
}

struct fk_run {
  int rc_off, rc_orphan, rc_on_orphaned, rc_on, rc_orphan2;
};

static int fk_cmd(lith_tx *tx, void *arg) {
  struct fk_run *f = arg;
  lith_tx_exec(tx, "CREATE TABLE fkp(id INTEGER PRIMARY KEY)", NULL);
  lith_tx_exec(tx, "CREATE TABLE fkq(p INTEGER REFERENCES fkp(id))", NULL);
  lith_tx_exec(tx, "INSERT INTO fkp VALUES (1)", NULL);
  f->rc_off = lith_tx_foreign_keys(tx, 0);
  f->rc_orphan = lith_tx_exec(tx, "INSERT INTO fkq VALUES (7)", NULL); /* enforcement off: taken */
  f->rc_on_orphaned = lith_tx_foreign_keys(tx, 1); /* but never committed: foreign_key_check */
  lith_tx_exec(tx, "UPDATE fkq SET p = 1", NULL);
  f->rc_on = lith_tx_foreign_keys(tx, 1);
  f->rc_orphan2 = lith_tx_exec(tx, "INSERT INTO fkq VALUES (8)", NULL);
  return LITH_OK;
}

static int fk_off_only(lith_tx *tx, void *arg) {
  int *rc = arg;
  *rc = lith_tx_foreign_keys(tx, 0);
  return LITH_OK;
}

static int fk_orphan_left(lith_tx *tx, void *arg) {
  (void)arg;
  lith_tx_foreign_keys(tx, 0);
  return lith_tx_exec(tx, "INSERT INTO fkq VALUES (9)", NULL);
}

static int orphan_cmd(lith_tx *tx, void *arg) {
  (void)arg;
  return lith_tx_exec(tx, "INSERT INTO fkq VALUES (9)", NULL);
}

static void test_foreign_keys(void **state) {
  (void)state;
  lith_options opt;
  t_bank_options(&opt);
  lith *db = t_open_fresh(DB, &opt);
  t_async done = {0};
  lith_request r;
  struct fk_run f = {-1, -1, -1, -1, -1};
  t_submit_alone(db, &r, fk_cmd, &f, &done);
  t_async_wait(&done, 1);
  assert_int_equal(r.rc, LITH_OK);
  assert_int_equal(f.rc_off, LITH_OK);
  assert_int_equal(f.rc_orphan, LITH_OK);
  assert_int_equal(f.rc_on_orphaned, LITH_CONSTRAINT);
  assert_int_equal(f.rc_on, LITH_OK);
  assert_int_equal(f.rc_orphan2, LITH_CONSTRAINT);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM fkq WHERE p = 1"), 1);
  /* a command that ends with a violation it made while they were off fails */
  t_submit_alone(db, &r, fk_orphan_left, NULL, &done);
  t_async_wait(&done, 2);
  assert_int_equal(r.rc, LITH_CONSTRAINT);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM fkq"), 1);
  /* off to the end of an alone command only: the next command has lith's setting */
  int rc = -1;
  t_submit_alone(db, &r, fk_off_only, &rc, &done);
  t_async_wait(&done, 3);
  assert_int_equal(rc, LITH_OK);
  assert_int_equal(r.rc, LITH_OK);
  assert_int_equal(lith_do(db, orphan_cmd, NULL), LITH_CONSTRAINT);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM fkq"), 1);
  /* in a command not submitted alone: refused */
  assert_int_equal(lith_do(db, fk_off_only, &rc), LITH_OK);
  assert_int_equal(rc, LITH_MISUSE);
  assert_int_equal(lith_close(db), LITH_OK);
  t_assert_integrity(DB);
}

/* Half the rows deleted, then VACUUM: the pages they held go. What runs
 * after it in the command commits with the command. */
struct vac_run {
  int rc_vacuum, rc_after;
};

static int vac_cmd(lith_tx *tx, void *arg) {
  struct vac_run *v = arg;
  lith_tx_exec(tx, "DELETE FROM kv WHERE rowid % 2 = 0", NULL);
  v->rc_vacuum = lith_tx_vacuum(tx);
  v->rc_after = lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES ('after-vacuum', 1)", NULL);
  return LITH_OK;
}

static int vac_plain(lith_tx *tx, void *arg) {
  int *rc = arg;
  *rc = lith_tx_vacuum(tx);
  return LITH_OK;
}

static int vac_nested_body(lith_tx *tx, void *arg) { return *(int *)arg = lith_tx_vacuum(tx), LITH_OK; }

static int vac_nested(lith_tx *tx, void *arg) { return lith_tx_savepoint(tx, vac_nested_body, arg); }

static int fill_cmd(lith_tx *tx, void *arg) {
  (void)arg;
  return lith_tx_exec(tx,
                      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 4000) "
                      "INSERT INTO kv(k, v) SELECT 'fill-' || i || '-' || hex(randomblob(100)), i FROM n",
                      NULL);
}

/* What lithd does to its connections: no ATTACH at all. */
static int no_attach(void *ctx, sqlite3 *conn) {
  (void)ctx;
  sqlite3_limit(conn, SQLITE_LIMIT_ATTACHED, 0);
  return SQLITE_OK;
}

static void test_vacuum(void **state) {
  (void)state;
  lith_options opt;
  t_bank_options(&opt);
  opt.on_connect = no_attach;
  lith *db = t_open_fresh(DB, &opt);
  assert_int_equal(lith_do(db, fill_cmd, NULL), LITH_OK);
  int64_t pages = t_query_int(DB, "PRAGMA page_count");
  t_async done = {0};
  lith_request r;
  struct vac_run v = {-1, -1};
  t_submit_alone(db, &r, vac_cmd, &v, &done);
  t_async_wait(&done, 1);
  assert_int_equal(r.rc, LITH_OK);
  assert_int_equal(v.rc_vacuum, LITH_OK);
  assert_int_equal(v.rc_after, LITH_OK);
  int64_t now = t_query_int(DB, "PRAGMA page_count");
  if (now > pages * 3 / 4)
    fail_msg("VACUUM left %lld pages of %lld", (long long)now, (long long)pages);
  assert_int_equal(count_kv("after-vacuum"), 1);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM kv WHERE k LIKE 'fill-%'"), 2000);
  /* in a command not submitted alone, or inside a savepoint: refused */
  int rc = -1;
  assert_int_equal(lith_do(db, vac_plain, &rc), LITH_OK);
  assert_int_equal(rc, LITH_MISUSE);
  rc = -1;
  t_submit_alone(db, &r, vac_nested, &rc, &done);
  t_async_wait(&done, 2);
  assert_int_equal(rc, LITH_MISUSE);
  assert_int_equal(lith_close(db), LITH_OK);
  t_assert_integrity(DB);

  /* bounded as the command's own SQL: a limit it cannot meet interrupts it */
  db = t_open_fresh(DB, &opt);
  for (int i = 0; i < 8; i++)
    assert_int_equal(lith_do(db, fill_cmd, NULL), LITH_OK);
  assert_int_equal(lith_close(db), LITH_OK);
  opt.command_timeout_ms = 1;
  assert_int_equal(lith_open(DB, &opt, &db), LITH_OK);
  rc = -1;
  t_submit_alone(db, &r, vac_plain, &rc, &done);
  t_async_wait(&done, 3);
  assert_int_equal(rc, LITH_INTERRUPTED);
  assert_int_equal(lith_close(db), LITH_OK);
  t_assert_integrity(DB);
}

/* A command waiting between statements restarts its clock: it is not cut
 * for the time it waited. */
static int patient_cmd(lith_tx *tx, void *arg) {
  int *rc = arg;
  for (int i = 0; i < 3; i++) {
    usleep(150 * 1000); /* past the 200 ms limit in all, not in any one piece */
    lith_tx_restart_clock(tx);
    if ((*rc = lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES (?, 1)", "i", i)) != LITH_OK)
      return *rc;
  }
  return LITH_OK;
}

static int impatient_cmd(lith_tx *tx, void *arg) {
  int *rc = arg;
  for (int i = 10; i < 13; i++) {
    usleep(150 * 1000);
    if ((*rc = lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES (?, 1)", "i", i)) != LITH_OK)
      return *rc;
  }
  return LITH_OK;
}

static void test_restart_clock(void **state) {
  (void)state;
  lith_options opt;
  t_bank_options(&opt);
  opt.command_timeout_ms = 200;
  lith *db = t_open_fresh(DB, &opt);
  int rc = -1;
  assert_int_equal(lith_do(db, patient_cmd, &rc), LITH_OK);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM kv"), 3);
  assert_int_equal(lith_do(db, impatient_cmd, &rc), LITH_INTERRUPTED); /* without it: cut */
  assert_int_equal(lith_close(db), LITH_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_order),
      cmocka_unit_test(test_runs_once),
      cmocka_unit_test(test_commit_and_rollback_inside),
      cmocka_unit_test(test_restart_clock),
      cmocka_unit_test(test_foreign_keys),
      cmocka_unit_test(test_vacuum),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
