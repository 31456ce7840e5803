/*
 * lithd store on a dqlite cluster: one consistent copy of the cluster's
 * database in a local file (lithd_store_snapshot's dqlite half; store.h
 * has the contract).
 *
 *   1. A connection of its own to the leader (lith__dq_connect_leader),
 *      the database OPENed, and one query ("SELECT 1"): a dqlite leader
 *      runs a Raft barrier before a query, so once it answers, every
 *      write the cluster committed (every command lithd answered before
 *      the call began among them) is applied in the leader's copy. A
 *      follower's copy may lag: never asked.
 *   2. DUMP on that connection (lith__dq_dump): the node copies its main
 *      file and WAL in one turn of its loop (committed frames only), and
 *      the bytes stream into two new files in a private directory (mkdtemp,
 *      0700) beside `path`, never held in memory; at most what the file
 *      system has free (statvfs), else LITH_DISKFULL before a byte is
 *      written.
 *   3. SQLite folds the WAL into the main file there (wal_checkpoint
 *      (TRUNCATE), journal_mode=DELETE) and checks the result (PRAGMA
 *      integrity_check, "ok" alone); the file is synced.
 *   4. link() puts it at `path`, which fails if `path` appeared meanwhile
 *      (a backup never replaces a file); the directory is removed.
 * A leader lost before the dump (a failover) is looked for again until
 * failover_ms; once the dump began, a failure ends the call, and so does
 * a leader silent for a minute (dq_snapshot.c: SNAP_SILENCE_MS). *cancel set
 * (lithd_store_drain): every wait ends within LITH_DQ_CANCEL_MS, SQLite's
 * work at its next progress step: LITH_INTERRUPTED. On any failure
 * nothing is left at `path` nor beside it.
 */
#ifndef LITHD_STORE_DQ_SNAPSHOT_H
#define LITHD_STORE_DQ_SNAPSHOT_H

#include <stdatomic.h>
#include <stddef.h>

/* The longest a dump may take to arrive, once asked for. */
#define LITHD_DQ_SNAPSHOT_MS (30 * 60 * 1000)

/* See above. addresses, database: the store's (--dqlite, --dqlite-db);
 * cancel: the store's flag, outliving the call. Blocking, any thread.
 * Returns LITH_OK, or a lith code with errmsg[0..cap) saying why
 * (LITH_MISUSE: `path` exists). */
int lithd__dq_snapshot(const char *addresses, const char *database, int failover_ms, const atomic_int *cancel,
                       const char *path, char *errmsg, size_t cap);

#endif /* LITHD_STORE_DQ_SNAPSHOT_H */
