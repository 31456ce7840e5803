/*
 * bench/transfer.c — the transfer workload (transfer.h says what, and why it
 * is shared). The per-owner checks read the ledger and the topics once
 * each, grouped by owner, and compare with what the run counted.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "transfer.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the transfer workload ----------------------------------------------------------------------- */

const char BENCH_TRANSFER_SCHEMA[] =
    "CREATE TABLE accounts(id INTEGER PRIMARY KEY, balance INTEGER NOT NULL CHECK (balance >= 0));"
    "CREATE TABLE ledger(id INTEGER PRIMARY KEY, producer INTEGER NOT NULL, seq INTEGER NOT NULL,"
    " src INTEGER NOT NULL, dst INTEGER NOT NULL, amount INTEGER NOT NULL);"
    "CREATE TABLE topics(id INTEGER PRIMARY KEY, version INTEGER NOT NULL);";

bench_transfer bench_transfer_make(int64_t owner, int64_t seq, uint64_t *rng) {
  bench_transfer t;
  int64_t base = owner * BENCH_ACCOUNTS_PER;
  int64_t a = (int64_t)(bench_rng_next(rng) % BENCH_ACCOUNTS_PER);
  int64_t b = (a + 1 + (int64_t)(bench_rng_next(rng) % (BENCH_ACCOUNTS_PER - 1))) % BENCH_ACCOUNTS_PER;
  t.owner = owner;
  t.seq = seq;
  t.src = base + a;
  t.dst = base + b;
  t.amount = 1 + (int64_t)(bench_rng_next(rng) % BENCH_MAX_AMOUNT);
  return t;
}

int bench_stmts_prepare(sqlite3 *conn, bench_stmts *s) {
  memset(s, 0, sizeof *s);
  struct {
    sqlite3_stmt **st;
    const char *sql;
  } all[] = {
      {&s->balance, BENCH_SQL_BALANCE}, {&s->debit, BENCH_SQL_DEBIT},      {&s->credit, BENCH_SQL_CREDIT},
      {&s->ledger, BENCH_SQL_LEDGER},   {&s->topic, BENCH_SQL_TOPIC},      {&s->begin, "BEGIN IMMEDIATE"},
      {&s->commit, "COMMIT"},           {&s->rollback, "ROLLBACK"},        {&s->sp, "SAVEPOINT c"},
      {&s->sp_release, "RELEASE c"},    {&s->sp_rollback, "ROLLBACK TO c"}};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
    int rc = sqlite3_prepare_v3(conn, all[i].sql, -1, SQLITE_PREPARE_PERSISTENT, all[i].st, NULL);
    if (rc != SQLITE_OK)
      return rc;
  }
  return SQLITE_OK;
}

void bench_stmts_finalize(bench_stmts *s) {
  sqlite3_stmt *all[] = {s->balance, s->debit,    s->credit, s->ledger,     s->topic,      s->begin,
                         s->commit,  s->rollback, s->sp,     s->sp_release, s->sp_rollback};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++)
    sqlite3_finalize(all[i]);
  memset(s, 0, sizeof *s);
}

int bench_transfer_sql(const bench_stmts *s, const bench_transfer *t, int read_balance) {
  int rc;
  if (read_balance) {
    sqlite3_bind_int64(s->balance, 1, t->src);
    rc = sqlite3_step(s->balance);
    if (rc != SQLITE_ROW) {
      sqlite3_reset(s->balance);
      return rc == SQLITE_DONE ? SQLITE_NOTFOUND : rc;
    }
    int64_t bal = sqlite3_column_int64(s->balance, 0);
    sqlite3_reset(s->balance);
    if (bal < t->amount)
      return BENCH_REFUSED;
  }
  if ((rc = bench_step2(s->debit, t->amount, t->src)) != SQLITE_OK ||
      (rc = bench_step2(s->credit, t->amount, t->dst)) != SQLITE_OK)
    return rc;
  sqlite3_bind_int64(s->ledger, 1, t->owner);
  sqlite3_bind_int64(s->ledger, 2, t->seq);
  sqlite3_bind_int64(s->ledger, 3, t->src);
  sqlite3_bind_int64(s->ledger, 4, t->dst);
  sqlite3_bind_int64(s->ledger, 5, t->amount);
  if ((rc = bench_step(s->ledger)) != SQLITE_OK)
    return rc;
  sqlite3_bind_int64(s->topic, 1, t->owner);
  return bench_step(s->topic);
}

int bench_transfer_tx(sqlite3 *conn, const bench_stmts *s, const bench_transfer *t, int read_balance,
                      int64_t *locked_at) {
  int rc = bench_step(s->begin);
  if (locked_at)
    *locked_at = bench_now_ns();
  if (rc != SQLITE_OK)
    return rc;
  rc = bench_transfer_sql(s, t, read_balance);
  if (rc == SQLITE_OK)
    rc = bench_step(s->commit);
  if (rc != SQLITE_OK && !sqlite3_get_autocommit(conn))
    bench_step(s->rollback);
  return rc;
}

int bench_transfer_create(const char *path, int n, const bench_pragmas *p) {
  sqlite3 *conn;
  sqlite3_stmt *acc = NULL, *top = NULL;
  bench_remove_db(path);
  if (bench_open_plain(path, p, 5000, &conn) != SQLITE_OK)
    return -1;
  int rc = sqlite3_exec(conn, BENCH_TRANSFER_SCHEMA, NULL, NULL, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_exec(conn, "BEGIN", NULL, NULL, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(conn, "INSERT INTO accounts(id, balance) VALUES (?, ?)", -1, &acc, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(conn, "INSERT INTO topics(id, version) VALUES (?, 0)", -1, &top, NULL);
  for (int64_t o = 0; rc == SQLITE_OK && o < n; o++) {
    for (int64_t k = 0; rc == SQLITE_OK && k < BENCH_ACCOUNTS_PER; k++)
      rc = bench_step2(acc, o * BENCH_ACCOUNTS_PER + k, BENCH_START_BALANCE);
    if (rc == SQLITE_OK) {
      sqlite3_bind_int64(top, 1, o);
      rc = bench_step(top);
    }
  }
  sqlite3_finalize(acc);
  sqlite3_finalize(top);
  if (rc == SQLITE_OK)
    rc = sqlite3_exec(conn, "COMMIT", NULL, NULL, NULL);
  if (rc != SQLITE_OK)
    fprintf(stderr, "creating %s: %s\n", path, sqlite3_errmsg(conn));
  if (sqlite3_close(conn) != SQLITE_OK && rc == SQLITE_OK)
    rc = SQLITE_ERROR;
  return rc == SQLITE_OK ? 0 : -1;
}

static void say(bench_say_fn fn, void *ctx, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(bench_say_fn fn, void *ctx, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fn(ctx, msg);
}

/* SELECT owner, n: per-owner counts into per[0..n); rows naming no owner count as bad. */
static int64_t per_owner(sqlite3 *conn, const char *sql, int n, int64_t *per) {
  sqlite3_stmt *st = NULL;
  int64_t bad = 0;
  if (sqlite3_prepare_v2(conn, sql, -1, &st, NULL) == SQLITE_OK) {
    while (sqlite3_step(st) == SQLITE_ROW) {
      int64_t o = sqlite3_column_int64(st, 0);
      if (o >= 0 && o < n)
        per[o] = sqlite3_column_int64(st, 1);
      else
        bad++;
    }
  }
  sqlite3_finalize(st);
  return bad;
}

int64_t bench_transfer_check(const char *path, int n, const int64_t *ok, const bench_pragmas *p,
                             const char *who, bench_say_fn fn, void *ctx) {
  int64_t bad = 0, total = 0, v;
  int failed = 0;
  sqlite3 *conn;
  for (int o = 0; o < n; o++)
    total += ok[o];
  if (bench_open_plain(path, p, 5000, &conn) != SQLITE_OK) {
    say(fn, ctx, "check: cannot open the database");
    return 1;
  }
  if (!bench_quick_check_ok(conn)) {
    say(fn, ctx, "check: quick_check failed");
    bad++;
  }
  int64_t money = (int64_t)n * BENCH_ACCOUNTS_PER * BENCH_START_BALANCE;
  if ((v = bench_query_int(conn, "SELECT sum(balance) FROM accounts", 0, &failed)) != money || failed) {
    say(fn, ctx, "check: money %lld, expected %lld", (long long)v, (long long)money);
    bad++;
  }
  failed = 0;
  if ((v = bench_query_int(conn, "SELECT count(*) FROM ledger", 0, &failed)) != total || failed) {
    say(fn, ctx, "check: %lld ledger rows, %lld commands answered OK", (long long)v, (long long)total);
    bad++;
  }
  failed = 0;
  if ((v = bench_query_int(conn, "SELECT sum(version) FROM topics", 0, &failed)) != total || failed) {
    say(fn, ctx, "check: topic versions sum to %lld, %lld commands answered OK", (long long)v,
        (long long)total);
    bad++;
  }
  int64_t *rows = calloc((size_t)n, sizeof *rows), *vers = calloc((size_t)n, sizeof *vers);
  if (!rows || !vers) {
    say(fn, ctx, "check: out of memory");
    bad++;
  } else {
    bad += per_owner(conn, "SELECT producer, count(*) FROM ledger GROUP BY producer", n, rows);
    per_owner(conn, "SELECT id, version FROM topics", n, vers);
    for (int o = 0; o < n; o++)
      if (rows[o] != ok[o] || vers[o] != ok[o]) {
        say(fn, ctx, "check: %s %d: %lld answered OK, %lld ledger rows, topic version %lld", who, o,
            (long long)ok[o], (long long)rows[o], (long long)vers[o]);
        bad++;
      }
  }
  free(rows);
  free(vers);
  sqlite3_close(conn);
  return bad;
}
