/*
 * Result codes and messages. Every lith call that fails leaves a message in
 * a per-thread buffer (lith_errmsg), because one handle is shared by many
 * threads and a per-handle "last error" would be another thread's. The
 * buffer is allocated at the thread's first error and freed when it exits;
 * a thread that never fails has none (lith_errmsg gives ""), and if there is
 * no memory for it lith_errmsg says so instead of the message.
 */
#ifndef LITH_SQLITE_ERROR_H
#define LITH_SQLITE_ERROR_H

#include <stddef.h>

#include "lith.h"

/* Set this thread's message (printf-style) and return rc. */
int lith__fail(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Set this thread's message from an SQLite connection's last error, prefixed
 * by `what`, and return the mapped lith code. */
int lith__fail_sqlite(int sqlite_rc, sqlite3 *conn, const char *what);

/* lith_from_sqlite, but an I/O error the operating system put down to a
 * full disk or quota (ENOSPC, EDQUOT: sqlite3_system_errno) is
 * LITH_DISKFULL. conn may be NULL. */
int lith__code_of(int sqlite_rc, sqlite3 *conn);

/* Clear this thread's message (allocates nothing). */
void lith__clear_error(void);

/* Set this thread's message to a copy of msg (truncated to fit; "" or NULL
 * clears it). */
void lith__set_errmsg(const char *msg);

/* Copy at most n-1 bytes of src into dst and terminate it. */
void lith__strlcpy(char *dst, const char *src, size_t n);

#endif
