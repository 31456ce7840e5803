/*
 * Binding parameters from a type string ('i' int, 'I' int64_t, 'd' double,
 * 's' text or NULL, 't' text + size_t length, 'b' blob + size_t length,
 * 'n' NULL: lith.h, lith_tx_exec) and running simple statements: shared by the
 * writer's lith_tx_* and the readers' lith_rx_* helpers.
 */
#ifndef LITH_SQLITE_BIND_H
#define LITH_SQLITE_BIND_H

#include <stdarg.h>
#include <stdint.h>

#include "lith.h"

/* Bind the arguments described by `types` (may be NULL: none) to st. */
int lith__bind_va(sqlite3_stmt *st, const char *types, va_list ap);

/* Step st to the end, discarding rows. */
int lith__step_all(sqlite3_stmt *st);

/* Step st once and read column 0 of the first row as an integer. */
int lith__step_int64(sqlite3_stmt *st, int64_t *out);

/* Get the cached statement for sql from cache c, bind `types`, step it —
 * to the end if out is NULL, else once, reading column 0 into *out — and
 * reset it. The common body of lith_tx_exec, lith_tx_int64, lith_rx_int64. */
struct lith__stmt_cache;
int lith__run_va(struct lith__stmt_cache *c, const char *sql, const char *types, va_list ap, int64_t *out);

#endif
