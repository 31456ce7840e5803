/*
 * Opening and tuning connections. Every connection lith opens is in WAL mode
 * with the chosen synchronous level; the write connection has SQLite's own
 * autocheckpoint off unless the mode is AUTO; read connections are opened
 * SQLITE_OPEN_READONLY. All are opened SQLITE_OPEN_NOMUTEX: lith never lets
 * two threads use one connection at once.
 */
#ifndef LITH_SQLITE_CONN_H
#define LITH_SQLITE_CONN_H

#include "lith.h"

/* Check the options for values out of range; returns a lith code and sets
 * this thread's message. */
int lith__options_check(const lith_options *opt);

/* Open the write connection at `path` (created if missing) and tune it.
 * *out is the caller's, to be closed with sqlite3_close. */
int lith__conn_open_writer(const char *path, const lith_options *opt, sqlite3 **out);

/* Open a read-only connection, tuned the same way. */
int lith__conn_open_reader(const char *path, const lith_options *opt, sqlite3 **out);

/* Open the background checkpointer's connection: read-write (checkpoints
 * write the database file), never used for transactions. */
int lith__conn_open_checkpointer(const char *path, const lith_options *opt, sqlite3 **out);

/* Run the migrations of `opt` on the write connection in one transaction:
 * none may BEGIN, COMMIT or ROLLBACK itself, and with foreign keys on what
 * they leave must pass PRAGMA foreign_key_check before it commits. */
int lith__conn_migrate(sqlite3 *conn, const lith_options *opt);

/* Create `path` empty with permission bits `mode` (before the umask) if it
 * does not exist; errors are left for the open that follows to report. */
void lith__create_file(const char *path, int mode);

#endif
