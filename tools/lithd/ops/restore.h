/*
 * lithd --restore FROM --db TO [--force]: put a backup in place of a
 * database, then exit (0: restored; 1: refused or failed, nothing changed).
 * lithd does not go on to serve: a restore is an operator's step between
 * "stop" and "start" (a service manager starts lithd as usual afterwards),
 * and a refusal must not leave a half-started daemon behind.
 *
 * What it refuses, each with a message and exit 1:
 *   - TO served by a running lithd: the caller holds TO's lock file
 *     (REAL-lithd.lock, REAL TO's real name: lithd_database_lock in
 *     database.c, called by main.c) for the whole restore, so a lithd running
 *     refuses the restore and a lithd starting meanwhile refuses to start;
 *   - TO existing, unless --force; and even with --force, TO open in another
 *     process (its -wal is still there after lithd's own connection closed);
 *   - FROM empty, not an SQLite database (its first 16 bytes), failing
 *     PRAGMA integrity_check, or with a hot journal (below).
 *
 * How: FROM is opened read-only through SQLite, so read as SQLite reads
 * it: through a link, its -wal (beside the real file, where SQLite looks,
 * not beside the link) read with it, a live database read in one committed
 * state. A hot -journal (a transaction cut off after it wrote into the
 * file) must be rolled back before anything is read, and a read-only
 * connection cannot (SQLITE_READONLY_ROLLBACK): refused, naming the
 * journal and the command that rolls it back (a restore does not write
 * FROM). It is copied with the backup API (one read transaction) into
 * TO.restore-tmp, created first with mode file_mode, then synced; the copy
 * itself is checked with integrity_check (what is installed is what was
 * checked); TO's stale -shm and -journal are removed (TO's -wal, when it
 * exists, was checkpointed away by closing TO); the copy is renamed over
 * TO and the directory synced. TO a link: the file it names is replaced,
 * not the link. A crash leaves TO as it was (or the new copy) and at worst
 * a TO.restore-tmp, replaced by the next restore.
 *
 * Nothing else is left behind, restored or refused: reading a WAL-mode
 * FROM that had no -wal and -shm (a downloaded backup) makes both, and a
 * read-only connection never removes them, so lithd_restore_tidy lets
 * SQLite do it (a read-write close, which removes them only when it is
 * FROM's last connection: another process's stay); TO's lock file goes
 * with the lock (lithd_database_unlock, main.c).
 */
#ifndef LITHD_RESTORE_H
#define LITHD_RESTORE_H

#include <sys/stat.h>

#include <sqlite3.h>

/* Restore `from` into `to` as above; the caller holds to's lock. Messages
 * go to the log (stderr); the success line to stdout. Returns the exit
 * code, 0 or 1. */
int lithd_restore(const char *from, const char *to, int force, int file_mode);

/* The checks of FROM shared with lithd --dqlite --restore (dqlite_restore.h),
 * each 0, or -1 after a message:
 *   lithd_restore_source: FROM a non-empty regular file starting with
 *     SQLite's header (*st: its stat);
 *   lithd_restore_open: FROM opened read-only through SQLite and readable
 *     (its -wal read with it; a hot journal refused, as above); *db the
 *     caller's (sqlite3_close), NULL after a failure; made[PATH_MAX]: what
 *     lithd_restore_tidy takes once *db is closed (the -wal and -shm the
 *     read made go);
 *   lithd_restore_integrity: PRAGMA integrity_check on db says "ok"
 *     (messages name `from`). */
int lithd_restore_source(const char *from, struct stat *st);
int lithd_restore_open(const char *from, sqlite3 **db, char *made);
void lithd_restore_tidy(const char *made);
int lithd_restore_integrity(sqlite3 *db, const char *from);

#endif /* LITHD_RESTORE_H */
