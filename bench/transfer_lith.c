/*
 * bench/transfer_lith.c — the transfer as a lith command, a producer's timed
 * lith_do (transfer_lith.h).
 */
#include "transfer_lith.h"

int bench_transfer_cmd(lith_tx *tx, void *arg) {
  const bench_transfer *t = arg;
  int64_t bal;
  int rc = lith_tx_int64(tx, &bal, BENCH_SQL_BALANCE, "I", t->src);
  if (rc != LITH_OK)
    return rc;
  if (bal < t->amount)
    return lith_tx_error(tx, LITH_USER, "insufficient funds");
  if ((rc = lith_tx_exec(tx, BENCH_SQL_DEBIT, "II", t->amount, t->src)) != LITH_OK ||
      (rc = lith_tx_exec(tx, BENCH_SQL_CREDIT, "II", t->amount, t->dst)) != LITH_OK ||
      (rc = lith_tx_exec(tx, BENCH_SQL_LEDGER, "IIIII", t->owner, t->seq, t->src, t->dst, t->amount)) !=
          LITH_OK ||
      (rc = lith_tx_exec(tx, BENCH_SQL_TOPIC, "I", t->owner)) != LITH_OK)
    return rc;
  lith_tx_touch(tx, t->owner);
  return LITH_OK;
}

int bench_lith_do(lith *db, lith_command fn, void *arg, int64_t ws, int64_t we, bench_calls *c) {
  int64_t t0 = bench_now_ns();
  int rc = lith_do(db, fn, arg);
  int64_t t1 = bench_now_ns();
  if (rc != LITH_OK) {
    c->errors++;
    return rc;
  }
  c->ok++;
  if (t1 >= ws && t1 < we) {
    c->win_ok++;
    bench_lat_add(&c->lat, (uint64_t)(t1 - t0));
  }
  return LITH_OK;
}

bench_pragmas bench_lith_pragmas(int sync) {
  lith_options d;
  lith_options_default(&d);
  bench_pragmas p = {sync == LITH_SYNC_FULL, d.cache_size_kib, (long long)d.mmap_size, d.foreign_keys};
  return p;
}
