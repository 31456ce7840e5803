/*
 * bench/transfer_lith.h — the transfer (transfer.h) as a lith command, for
 * the programs that link liblith: bench/writer and bench/shards.
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

#endif
