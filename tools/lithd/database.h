/*
 * lithd database — one database lithd serves, opened and closed as one
 * piece: its lock file, its --schema steps, its named commands, its lith
 * handle (writer thread, read pool) inside its store (store/local.h; on
 * lithd --dqlite the cluster's store, store/dqlite.h), the watch of a WAL
 * nobody checkpoints, and what its routes need (server.h's lithd_dbsrv).
 *
 * Why each database has all of these, and shares none: a database's writer
 * is the one thread that may write it, its queue the one place its commands
 * wait, and its bridge the one way their answers come back to the loop; a
 * second database with its own set is a second writer, so a slow command,
 * a busy lock, a full queue or a full disk of one never holds a command of
 * another. What they share is the process's: the loop (which only parses
 * requests and hands them on), the HTTP server, the token, the limits,
 * SQLite's heap ceiling, libuv's thread pool (sized for every database's
 * readers, main.c).
 *
 * One lithd per database: before opening it, the database's exclusive
 * advisory lock (flock LOCK_EX|LOCK_NB) on PATH-lithd.lock (PATH the
 * file's real name: every link or `..` to it finds one lock) is taken and its
 * descriptor (O_CLOEXEC) kept open until the database is closed; the lock
 * file holds the holder's pid. A second lithd on the same file says which
 * pid and which lock file hold it, and does not start. The kernel drops the
 * lock when the process ends, however it ends, so a stale file never blocks
 * a restart. lithd --restore removes its lock file when it ends
 * (lithd_database_unlock): a lock won on a file removed meanwhile is taken
 * again on the new one.
 *
 * Threads: the loop thread (open and close outside uv_run, the bridge and
 * the watch on the loop).
 */
#ifndef LITHD_DATABASE_H
#define LITHD_DATABASE_H

#include <stdint.h>

#include <uv.h>

#include "commands.h"
#include "dqlite.h"
#include "lith.h"
#include "local.h"
#include "options.h"
#include "schema.h"
#include "server.h"

/* Result codes. */
enum { LITHD_DATABASE_OK = 0, LITHD_DATABASE_ERROR = 1 };

/* The watch of the WAL: a timer looks at lith's figures once a second.
 * With --checkpoint external it warns when the WAL passes
 * LITHD_WAL_WARN_FACTOR x checkpoint_pages
 * (what WRITER mode bounds it at): once per crossing (it must fall below
 * again, a checkpoint, to warn again), and at most once per
 * LITHD_WAL_WARN_EVERY_MS. */
#define LITHD_WAL_WATCH_MS 1000
#define LITHD_WAL_WARN_FACTOR 4
#define LITHD_WAL_WARN_EVERY_MS (60 * 1000)

typedef struct lithd_database {
  /* lithd_database_init's. */
  const lithd_opts_db *opt;
  int named;

  /* Set by lithd_database_open; the caller reads them. */
  lith *db;                           /* opened, until the store took it */
  lithd_store *store;                 /* where its data live; NULL until opened */
  lithd_commands *commands;           /* NULL: none */
  lithd_dbsrv srv;                    /* its routes' state; srv.name .. srv.metrics set */
  char label[LITHD_DB_NAME_MAX + 16]; /* "" or "database NAME: ", before its messages */

  /* Internal. */
  int lock_fd;
  lithd_schema schema;
  uv_timer_t wal_timer;
  uint64_t wal_threshold; /* pages */
  int64_t page_size;
  int wal_external;         /* --checkpoint external: warn of a WAL nobody checkpoints */
  int wal_above;            /* the WAL was past the threshold at the last look */
  int wal_blocked_said;     /* a reader outside lithd kept the WAL from starting over: logged */
  int64_t wal_last_warn_ms; /* lith_clock_ms of the last warning; 0: none yet */
  int wal_open;
  void (*on_closed)(void *arg);
  void *on_closed_arg;
} lithd_database;

/* Lock REAL-lithd.lock, REAL the real name of path (realpath; a file not
 * made yet: its directory's); returns the descriptor to keep open (close it
 * to unlock), or -1 after a message in the log. (--restore takes it alone.) */
int lithd_database_lock(const char *path);

/* Unlock what lithd_database_lock(path) returned and remove the lock file
 * (what lithd --restore does: it leaves nothing behind). fd: closed. */
void lithd_database_unlock(const char *path, int fd);

/* Make d ready to open (or to close unopened): opt is the caller's (the
 * options outlive d); named: several databases are served, so messages
 * name this one. */
void lithd_database_init(lithd_database *d, const lithd_opts_db *opt, int named);

/* Read d's --schema and --commands files (before any database is opened,
 * so that a typo in one stops lithd before a file is created). Returns
 * LITHD_DATABASE_OK, or _ERROR after a message naming the file. */
int lithd_database_load(lithd_database *d);

/* Open d (after lithd_database_load): lock, lith_open with `base` (the process's options; the schema
 * steps become its migrations), check the commands against the opened
 * database, read its page size, open its local store on loop (a write
 * waits at most queue_wait_ms for room). On LITHD_DATABASE_ERROR a message
 * naming the database is logged, and what was opened stays for
 * lithd_database_drain and _close. */
int lithd_database_open(lithd_database *d, const lith_options *base, int64_t queue_wait_ms, uv_loop_t *loop);

/* lithd --dqlite instead of lithd_database_open (after _load): check the
 * named commands against the --schema steps run on an in-memory SQLite
 * database (the cluster's tables are not at hand to prepare on, and the
 * parameters must be learnt at start), then lithd_store_dqlite_open (which
 * applies the schema through the cluster). LITHD_DATABASE_OK, or _ERROR after a
 * message. */
int lithd_database_open_dqlite(lithd_database *d, const lithd_dq_options *o, uv_loop_t *loop);

/* Start the WAL watch on loop. With --checkpoint external it warns past
 * LITHD_WAL_WARN_FACTOR x checkpoint_pages; otherwise it says, once, when
 * a connection outside lithd first kept the WAL from starting over
 * (lith_stats.wal_restart_blocked), which lithd cannot hold. */
void lithd_database_watch_wal(lithd_database *d, uv_loop_t *loop, int checkpoint_pages, int external);

/* Stop the watch (its handle closes on the loop's next turn). Does nothing
 * if it is not running. */
void lithd_database_unwatch_wal(lithd_database *d);

/* The HTTP server stopped: lithd_store_drain (every accepted command's
 * callback runs first); on_drained(arg) runs from the loop once it has
 * (at once when d has no store). */
void lithd_database_drain(lithd_database *d, void (*on_drained)(void *arg), void *arg);

/* After the loop ran its last: lithd_store_close (lith_close: drains the
 * writer, checkpoints unless --checkpoint external), free the schema and commands, unlock.
 * Returns LITHD_DATABASE_OK, or _ERROR after a message (close failed). d
 * may never have been opened, or half. */
int lithd_database_close(lithd_database *d);

#endif /* LITHD_DATABASE_H */
