/*
 * A bounded cache of prepared statements for one connection, keyed by SQL
 * text. Each text is prepared once (SQLITE_PREPARE_PERSISTENT) and handed out
 * again, reset and with bindings cleared. Statements handed out since the
 * last lith__stmt_cache_release() are "in use": they are never evicted (the
 * cache grows past its bound instead), and release resets them all so that
 * none stays mid-step across a SAVEPOINT release or a COMMIT.
 */
#ifndef LITH_SQLITE_STMT_CACHE_H
#define LITH_SQLITE_STMT_CACHE_H

#include <sqlite3.h>

typedef struct lith__stmt_cache lith__stmt_cache;

/* `conn` stays the caller's and must outlive the cache. */
int lith__stmt_cache_create(sqlite3 *conn, int capacity, lith__stmt_cache **out);

/* Finalize every statement and free the cache. NULL is allowed. */
void lith__stmt_cache_destroy(lith__stmt_cache *c);

/* The statement for `sql` (one statement; trailing text is an error), owned
 * by the cache, reset and with its bindings cleared. If the statement handed
 * out for the same text since the last release is still mid-step, another
 * statement for it (never resetting one in use). Returns a lith code; on
 * error *out is NULL and this thread's message says why. */
int lith__stmt_cache_get(lith__stmt_cache *c, const char *sql, sqlite3_stmt **out);

/* Reset every statement handed out since the last release. */
void lith__stmt_cache_release(lith__stmt_cache *c);

/* Statements held, and prepares done (for tests and stats). */
int lith__stmt_cache_count(const lith__stmt_cache *c);
unsigned long lith__stmt_cache_prepares(const lith__stmt_cache *c);

#endif
