/*
 * The read pool: a fixed set of read-only connections, each with its own
 * statement cache. lith__pool_read() borrows one, runs the caller's
 * function inside one read transaction (one WAL snapshot), and returns it.
 * Readers never touch the write connection; in WAL mode they never wait for
 * the writer either, only for a free connection of the pool.
 */
#ifndef LITH_SQLITE_READ_POOL_H
#define LITH_SQLITE_READ_POOL_H

#include <stdatomic.h>
#include <stdint.h>

#include "lith.h"

typedef struct lith__pool lith__pool;

/* The pool's figures (lith_stats): written only under the pool's mutex, so
 * plain relaxed loads and stores suffice; read at any time, also after the
 * pool is closed (they live in the caller's memory, not the pool's). */
typedef struct lith__read_stats {
  _Atomic uint64_t reads, waits, timeouts, wait_ns_total, in_use;
  _Atomic uint64_t held, held_ns_total; /* calls that waited behind a hold, and how long */
  _Atomic uint64_t too_old;             /* reads marked too old (lith__pool_mark_too_old) */
  _Atomic uint64_t wait_lat[LITH_LAT_BUCKETS];
} lith__read_stats;

/* Open opt->readers read-only connections to `path`. `stats` (the
 * caller's, zeroed, outliving the pool) receives the figures. */
int lith__pool_open(const char *path, const lith_options *opt, lith__read_stats *stats, lith__pool **out);

/* Refuse new reads, wait until every borrowed connection is back, close all
 * and free the pool. NULL is allowed. */
void lith__pool_close(lith__pool *p);

/* Run fn(rx, arg) in one read transaction. deadline_ms (lith_clock_ms())
 * bounds the wait for a free connection, -1: none; past it, LITH_QUEUE_FULL
 * and fn does not run. */
int lith__pool_read(lith__pool *p, lith_reader fn, void *arg, int64_t deadline_ms);

/* The hold (checkpoint.c: the moment SQLite needs to start the WAL over).
 * While held, a read waits before it takes a connection, until
 * lith__pool_release or until_ms (lith_clock_ms()), whichever comes first,
 * and never past its own deadline; reads already running go on. Returns 1,
 * or 0 without holding while a backup reads (lith__pool_backup_begin): its
 * snapshot keeps the WAL from starting over and it cannot be told to end,
 * so holding the reads would be in vain. */
int lith__pool_hold(lith__pool *p, int64_t until_ms);
void lith__pool_release(lith__pool *p);

/* Reads running now (connections borrowed). */
int lith__pool_running(lith__pool *p);

/* If no read runs now, move the hold's end to until_ms and return 1 (none
 * can begin before the release or until_ms); else 0, the hold unchanged.
 * One step under the pool's lock: a read let go by the hold's bound just
 * before is either running (0) or waits. */
int lith__pool_hold_drained(lith__pool *p, int64_t until_ms);

/* The hold's word to reads that keep the WAL from starting over: mark each
 * read running now that began at or before began_by_ms (lith_clock_ms;
 * INT64_MAX: every one) too old; lith_rx_too_old says 1 from now until
 * that lith_read returns. Returns how many were marked now (one marked
 * before is not counted again); they are added to stats->too_old. */
int lith__pool_mark_too_old(lith__pool *p, int64_t began_by_ms);

/* Reads running now that were marked too old (asked to end, not yet done). */
int lith__pool_too_old_running(lith__pool *p);

/* lith's own reads outside the pool: a backup's source connection
 * (backup.c). lith__pool_backup_begin, before that connection is opened,
 * waits behind a hold as a read does (until the release or the hold's
 * bound), then counts the backup until lith__pool_backup_end; while one is
 * counted, lith__pool_hold refuses. So a backup never takes a snapshot in
 * the WAL while a hold copies it, and a WAL that does not start over after
 * a hold is read by a connection lith does not own. NULL: nothing. */
void lith__pool_backup_begin(lith__pool *p);
void lith__pool_backup_end(lith__pool *p);

/* Backups running now (begun, not yet ended). */
int lith__pool_backups(lith__pool *p);

/* sqlite3_interrupt every connection borrowed now: its running statement
 * fails with SQLITE_INTERRUPT (one not yet started runs as usual: SQLite
 * clears the flag when no statement of the connection is running). */
void lith__pool_interrupt(lith__pool *p);

#endif
