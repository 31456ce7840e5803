/*
 * bench/transfer.h — the transfer workload of bench/writer (on liblith and on
 * plain SQLite) and of bench/lithd (the same transfers as lithd commands):
 * its schema, its statements, one transfer, and the check after a run that
 * no money was made or lost.
 *
 * Shared so that the two programs measure the same work and check it the
 * same way. SQLite only, like common.h (whose bench_pragmas and
 * bench_open_plain it uses).
 */
#ifndef LITH_BENCH_TRANSFER_H
#define LITH_BENCH_TRANSFER_H

#include <stdint.h>

#include <sqlite3.h>

#include "common.h"

/* ---- the transfer workload (bench/writer; bench/lithd over HTTP) -------------------------------
 *
 * Owner p (a producer thread, a client) owns accounts 10p..10p+9 and topic
 * p. A transfer reads one of its accounts' balance (bench/lithd leaves the
 * read out), debits it, credits another of p's, appends (p, seq, src, dst,
 * amount) to the ledger and bumps topic p's version. Balances start so
 * high that none is refused. */

enum { BENCH_ACCOUNTS_PER = 10, BENCH_MAX_AMOUNT = 50, BENCH_REFUSED = -1 };
#define BENCH_START_BALANCE INT64_C(1000000000000) /* 10^12 */

#define BENCH_SQL_BALANCE "SELECT balance FROM accounts WHERE id = ?"
#define BENCH_SQL_DEBIT "UPDATE accounts SET balance = balance - ? WHERE id = ?"
#define BENCH_SQL_CREDIT "UPDATE accounts SET balance = balance + ? WHERE id = ?"
#define BENCH_SQL_LEDGER "INSERT INTO ledger(producer, seq, src, dst, amount) VALUES (?, ?, ?, ?, ?)"
#define BENCH_SQL_TOPIC "UPDATE topics SET version = version + 1 WHERE id = ?"

/* The schema (accounts, ledger, topics), three statements; bench/dqlite
 * sends it to a dqlite cluster. */
extern const char BENCH_TRANSFER_SCHEMA[];

typedef struct bench_transfer {
  int64_t owner, seq, src, dst, amount;
} bench_transfer;

bench_transfer bench_transfer_make(int64_t owner, int64_t seq, uint64_t *rng);

/* The transfer's statements and the transaction's, prepared on a plain connection. */
typedef struct bench_stmts {
  sqlite3_stmt *balance, *debit, *credit, *ledger, *topic;
  sqlite3_stmt *begin, *commit, *rollback, *sp, *sp_release, *sp_rollback;
} bench_stmts;

int bench_stmts_prepare(sqlite3 *conn, bench_stmts *s); /* SQLITE_OK or the error */
void bench_stmts_finalize(bench_stmts *s);
/* The transfer's statements (the balance read first when read_balance):
 * SQLITE_OK, BENCH_REFUSED (balance too low), or an SQLite error. */
int bench_transfer_sql(const bench_stmts *s, const bench_transfer *t, int read_balance);
/* BEGIN IMMEDIATE, the transfer, COMMIT; rolled back on failure. *locked_at
 * (when not NULL) is when BEGIN returned. */
int bench_transfer_tx(sqlite3 *conn, const bench_stmts *s, const bench_transfer *t, int read_balance,
                      int64_t *locked_at);

/* A fresh database (whatever was at path removed): the schema, n owners'
 * accounts and topics; closed, so the WAL is checkpointed and gone. 0 or -1. */
int bench_transfer_create(const char *path, int n, const bench_pragmas *p);

/* After a run: quick_check, money conserved, ledger rows and topic versions
 * equal to the transfers answered OK, in total and per owner (ok[0..n)).
 * Each finding goes to say(ctx, "check: ...") naming an owner as `who`
 * ("producer 3"); returns how many. */
typedef void (*bench_say_fn)(void *ctx, const char *msg);
int64_t bench_transfer_check(const char *path, int n, const int64_t *ok, const bench_pragmas *p,
                             const char *who, bench_say_fn say, void *ctx);

#endif
