/* Test helpers: see common.h. */
#include "common.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

long long t_file_size(const char *path) {
  struct stat sb;
  if (stat(path, &sb) != 0)
    return -1;
  return (long long)sb.st_size;
}

void t_remove_db(const char *path) {
  char buf[1024];
  static const char *const ext[] = {"", "-wal", "-shm", "-journal"};
  for (size_t i = 0; i < sizeof ext / sizeof *ext; i++) {
    snprintf(buf, sizeof buf, "%s%s", path, ext[i]);
    unlink(buf);
  }
}

const char *const t_bank_migrations[] = {
    "CREATE TABLE accounts(id INTEGER PRIMARY KEY, balance INTEGER NOT NULL CHECK (balance >= 0));"
    "CREATE TABLE ledger(id INTEGER PRIMARY KEY, producer INTEGER NOT NULL, seq INTEGER NOT NULL,"
    " src INTEGER NOT NULL, dst INTEGER NOT NULL, amount INTEGER NOT NULL, UNIQUE(producer, seq));",
    "CREATE TABLE kv(k TEXT PRIMARY KEY, v INTEGER NOT NULL);",
};
const int t_bank_nmigrations = 2;

void t_bank_options(lith_options *opt) {
  lith_options_default(opt);
  opt->migrations = t_bank_migrations;
  opt->n_migrations = t_bank_nmigrations;
  opt->readers = 2;
  opt->busy_timeout_ms = 2000;
  opt->cache_size_kib = 2048;
}

lith *t_open_fresh(const char *path, const lith_options *opt) {
  lith *db = NULL;
  t_remove_db(path);
  int rc = lith_open(path, opt, &db);
  if (rc != LITH_OK)
    fprintf(stderr, "lith_open(%s): %s: %s\n", path, lith_errstr(rc), lith_errmsg(NULL));
  assert_int_equal(rc, LITH_OK);
  assert_non_null(db);
  return db;
}

typedef struct seed_arg {
  int n;
  int64_t balance;
} seed_arg;

static int seed_cmd(lith_tx *tx, void *arg) {
  seed_arg *a = arg;
  for (int i = 1; i <= a->n; i++) {
    int rc = lith_tx_exec(tx, "INSERT INTO accounts(id, balance) VALUES (?, ?)", "iI", i, a->balance);
    if (rc != LITH_OK)
      return rc;
  }
  return LITH_OK;
}

void t_seed_accounts(lith *db, int n, int64_t balance) {
  seed_arg a = {n, balance};
  assert_int_equal(lith_do(db, seed_cmd, &a), LITH_OK);
}

int t_transfer_cmd(lith_tx *tx, void *arg) {
  t_transfer *t = arg;
  int64_t bal = 0;
  int rc = lith_tx_int64(tx, &bal, "SELECT balance FROM accounts WHERE id = ?", "I", t->src);
  if (rc != LITH_OK)
    return rc;
  if (bal < t->amount)
    return lith_tx_error(tx, LITH_USER, "insufficient funds in %lld", (long long)t->src);
  if ((rc = lith_tx_exec(tx, "UPDATE accounts SET balance = balance - ? WHERE id = ?", "II", t->amount,
                         t->src)) != LITH_OK)
    return rc;
  if ((rc = lith_tx_exec(tx, "UPDATE accounts SET balance = balance + ? WHERE id = ?", "II", t->amount,
                         t->dst)) != LITH_OK)
    return rc;
  if ((rc = lith_tx_exec(tx, "INSERT INTO ledger(producer, seq, src, dst, amount) VALUES (?, ?, ?, ?, ?)",
                         "IIIII", t->producer, t->seq, t->src, t->dst, t->amount)) != LITH_OK)
    return rc;
  if (t->topic)
    lith_tx_touch(tx, t->topic);
  return LITH_OK;
}

int64_t t_query_int(const char *path, const char *sql) {
  sqlite3 *c = NULL;
  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_open_v2(path, &c, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
  sqlite3_busy_timeout(c, 5000);
  int rc = sqlite3_prepare_v2(c, sql, -1, &st, NULL);
  if (rc != SQLITE_OK)
    fprintf(stderr, "t_query_int(%s): %s\n", sql, sqlite3_errmsg(c));
  assert_int_equal(rc, SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  int64_t v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(c);
  return v;
}

void t_assert_integrity(const char *path) {
  sqlite3 *c = NULL;
  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_open_v2(path, &c, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
  sqlite3_busy_timeout(c, 5000);
  assert_int_equal(sqlite3_prepare_v2(c, "PRAGMA integrity_check", -1, &st, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_string_equal((const char *)sqlite3_column_text(st, 0), "ok");
  sqlite3_finalize(st);
  sqlite3_close(c);
}

int t_put_cmd(lith_tx *tx, void *arg) {
  return lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES (?, 1)", "s", (const char *)arg);
}

int t_scaled(int n) {
  const char *s = getenv("LITH_TEST_SCALE");
  int d = s ? atoi(s) : 1;
  if (d < 1)
    d = 1;
  int r = n / d;
  return r < 1 ? 1 : r;
}

static int gate_cmd(lith_tx *tx, void *arg) {
  t_gate *g = arg;
  (void)tx;
  atomic_store(&g->entered, 1);
  while (!atomic_load(&g->open))
    usleep(200);
  return LITH_OK;
}

static void gate_done(lith_request *req) { (void)req; }

void t_gate_close(lith *db, t_gate *g) {
  atomic_store(&g->entered, 0);
  atomic_store(&g->open, 0);
  memset(&g->req, 0, sizeof g->req);
  g->req.fn = gate_cmd;
  g->req.arg = g;
  g->req.done = gate_done;
  assert_int_equal(lith_submit(db, &g->req), LITH_OK);
  while (!atomic_load(&g->entered))
    usleep(100);
}

void t_gate_open(t_gate *g) { atomic_store(&g->open, 1); }

static void async_done(lith_request *req) {
  t_async *c = req->data;
  atomic_fetch_add(&c->done, 1);
}

static void submit_with(lith *db, lith_request *req, lith_command fn, void *arg, t_async *counter,
                        int alone) {
  memset(req, 0, sizeof *req);
  req->fn = fn;
  req->arg = arg;
  req->done = async_done;
  req->data = counter;
  int rc = alone ? lith_submit_alone(db, req) : lith_submit(db, req);
  if (rc != LITH_OK)
    fprintf(stderr, "%s: %s\n", alone ? "lith_submit_alone" : "lith_submit", lith_errmsg(db));
  assert_int_equal(rc, LITH_OK);
}

void t_submit(lith *db, lith_request *req, lith_command fn, void *arg, t_async *counter) {
  submit_with(db, req, fn, arg, counter, 0);
}

void t_submit_alone(lith *db, lith_request *req, lith_command fn, void *arg, t_async *counter) {
  submit_with(db, req, fn, arg, counter, 1);
}

void t_async_wait(t_async *c, int n) {
  for (int i = 0; i < 30000 && atomic_load(&c->done) < n; i++)
    usleep(1000);
  assert_int_equal(atomic_load(&c->done), n);
}

int t_indexed_rc(int i) {
  if (i % 7 == 3)
    return LITH_USER + i % 5;
  if (i % 11 == 5)
    return LITH_CONSTRAINT;
  return LITH_OK;
}

int t_indexed_cmd(lith_tx *tx, void *arg) {
  int i = (int)(intptr_t)arg;
  int want = t_indexed_rc(i);
  if (want >= LITH_USER)
    return lith_tx_error(tx, want, "fail %d", i);
  if (want == LITH_CONSTRAINT)
    return lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES ('dup', 2)", NULL);
  char k[32];
  snprintf(k, sizeof k, "k%d", i);
  return lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES (?, 1)", "s", k);
}

int t_indexed_ok(int n) {
  int ok = 0;
  for (int i = 0; i < n; i++)
    ok += t_indexed_rc(i) == LITH_OK;
  return ok;
}

lith *t_open_indexed(const char *path, int queue_capacity) {
  lith_options opt;
  t_bank_options(&opt);
  opt.queue_capacity = queue_capacity;
  lith *db = t_open_fresh(path, &opt);
  assert_int_equal(lith_do(db, t_put_cmd, "dup"), LITH_OK);
  return db;
}
