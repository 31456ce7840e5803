/*
 * bench/transfer_lith.h — the transfer (transfer.h) as a lith command, a
 * producer's timed lith_do and lith's pragmas, for the programs that link
 * liblith: bench/writer, bench/shards, bench/growth.
 *
 * Apart from transfer.h because that one is SQLite only (bench/lithd and
 * bench/kanban_http do not link liblith).
 */
#ifndef LITH_BENCH_TRANSFER_LITH_H
#define LITH_BENCH_TRANSFER_LITH_H

#include "lith.h"
#include "transfer.h"

/* lith_command: arg is a const bench_transfer * (the caller's, read during
 * the run). Reads the source balance (LITH_USER "insufficient funds" when too
 * low), debits, credits, appends the ledger row, bumps the owner's topic and
 * lith_tx_touch(owner). */
int bench_transfer_cmd(lith_tx *tx, void *arg);

/* The pragmas lith gives its writer (lith_options_default's) with synchronous
 * FULL or NORMAL (LITH_SYNC_*), for the plain connections beside it. */
bench_pragmas bench_lith_pragmas(int sync);

/* One producer's calls, as bench_lith_do counts them. */
typedef struct bench_calls {
  int64_t ok, errors; /* answered LITH_OK; answered anything else */
  int64_t win_ok;     /* answered LITH_OK inside the window */
  bench_lat lat;      /* those calls' latency: the producer's to init and free */
} bench_calls;

/* One step of a producer's closed loop: lith_do(db, fn, arg), timed from
 * just before the call to its return, counted in c (its latency when it
 * returns LITH_OK inside [ws, we)). Returns lith_do's code: a failure is
 * counted, and the caller says it in its own words. */
int bench_lith_do(lith *db, lith_command fn, void *arg, int64_t ws, int64_t we, bench_calls *c);

#endif
