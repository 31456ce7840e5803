/*
 * The read pool: a fixed set of read-only connections, each with its own
 * statement cache. lith__pool_read() borrows one, runs the caller's
 * function inside one read transaction (one WAL snapshot), and returns it.
 * Readers never touch the write connection; in WAL mode they never wait for
 * the writer either, only for a free connection of the pool.
 */
#ifndef LITH_SQLITE_READ_POOL_H
#define LITH_SQLITE_READ_POOL_H

#include "lith.h"

typedef struct lith__pool lith__pool;

/* Open opt->readers read-only connections to `path`. */
int lith__pool_open(const char *path, const lith_options *opt, lith__pool **out);

/* Refuse new reads, wait until every borrowed connection is back, close all
 * and free the pool. NULL is allowed. */
void lith__pool_close(lith__pool *p);

/* Run fn(rx, arg) in one read transaction. */
int lith__pool_read(lith__pool *p, lith_reader fn, void *arg);

/* sqlite3_interrupt every connection borrowed now: its running statement
 * fails with SQLITE_INTERRUPT (one not yet started runs as usual: SQLite
 * clears the flag when no statement of the connection is running). */
void lith__pool_interrupt(lith__pool *p);

#endif
