/*
 * SQLite's result codes as lith's, and messages from a connection's last
 * error (set through lib/error.h's per-thread message).
 */
#ifndef LITH_SQLITE_ERRCODE_H
#define LITH_SQLITE_ERRCODE_H

#include "../lib/error.h"
#include "lith.h"

/* Set this thread's message from an SQLite connection's last error, prefixed
 * by `what`, and return the mapped lith code (lith__code_of). conn may be
 * NULL: the message is then sqlite3_errstr(sqlite_rc). */
int lith__fail_sqlite(int sqlite_rc, sqlite3 *conn, const char *what);

/* lith_from_sqlite, but an I/O error the operating system put down to a
 * full disk or quota (ENOSPC, EDQUOT: sqlite3_system_errno) is
 * LITH_DISKFULL. conn may be NULL. */
int lith__code_of(int sqlite_rc, sqlite3 *conn);

#endif
