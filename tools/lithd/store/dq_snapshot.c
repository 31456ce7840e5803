/*
 * lithd store on a dqlite cluster: a snapshot into a local file (see
 * dq_snapshot.h for the steps and why each).
 */
#include "dq_snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <sqlite3.h>

#include "client.h"
#include "lith.h"

/* What the leader's connection may take per call before the dump. */
#define SNAP_CALL_MS 5000
/* The longest silence of the leader during its dump (lith__dq_dump): it
 * copies the whole database in one turn of its loop before the first byte
 * (200 MB: 0.3 to 2.6 s measured), and its loop may be busy with more; a
 * leader silent longer is gone (stopped, cut off without a reset), and the
 * download's slot is freed then rather than at LITHD_DQ_SNAPSHOT_MS. */
#define SNAP_SILENCE_MS 60000
/* Free space kept on the file system beyond the dump (the fold rewrites
 * pages into the main file, which grows by up to the WAL's size). */
#define SNAP_SLACK (4u << 20)

static int say(char *errmsg, size_t cap, int rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(errmsg, cap, fmt, ap);
  va_end(ap);
  return rc;
}

/* The lith code of a dqlite client's failure. */
static int from_dq(int dqrc) {
  switch (dqrc) {
  case LITH_DQ_STOPPED: return LITH_INTERRUPTED;
  case LITH_DQ_TOOBIG: return LITH_DISKFULL;
  case LITH_DQ_NOMEM: return LITH_NOMEM;
  case LITH_DQ_IO:
  case LITH_DQ_TIMEOUT: return LITH_BUSY; /* the cluster out of reach: retry later */
  default: return LITH_IOERR;
  }
}

/* Connect to the leader, open the database, and settle the leader's copy
 * (the barrier of a query), retrying a lost leader until `until`. */
static int leader_ready(lith__dq_conn *c, const char *addresses, const char *database, int64_t until,
                        uint32_t *db) {
  for (;;) {
    int64_t left = until - lith_clock_ms();
    lith__dq_rows rows;
    int rc = lith__dq_connect_leader(c, addresses, left > 0 ? (int)left : 1);
    if (rc == LITH_DQ_OK)
      rc = lith__dq_open(c, database, db);
    if (rc == LITH_DQ_OK) {
      lith__dq_rows_init(&rows);
      rc = lith__dq_query_sql(c, *db, "SELECT 1", NULL, 0, &rows);
      lith__dq_rows_free(&rows);
    }
    if (rc == LITH_DQ_OK || rc == LITH_DQ_STOPPED || lith_clock_ms() >= until)
      return rc;
    if (rc == LITH_DQ_FAILURE && lith__dq_errcode(c) != LITH_DQ_IOERR_NOT_LEADER &&
        lith__dq_errcode(c) != LITH_DQ_IOERR_LEADERSHIP_LOST)
      return rc;
    lith__dq_disconnect(c); /* a lost or changed leader: look again */
  }
}

static int cancel_progress(void *arg) { return atomic_load((const atomic_int *)arg) != 0; }

/* One PRAGMA whose single row's first column must read `want` (NULL: any
 * row is fine; the checkpoint's: busy must be 0). */
static int pragma(sqlite3 *s, const char *sql, const char *want, char *errmsg, size_t cap) {
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(s, sql, -1, &st, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_step(st);
  if (rc != SQLITE_ROW) {
    say(errmsg, cap, 0, "%s: %s", sql, sqlite3_errmsg(s));
    rc = sqlite3_errcode(s);
    sqlite3_finalize(st);
    return rc == SQLITE_INTERRUPT ? LITH_INTERRUPTED : rc == SQLITE_FULL ? LITH_DISKFULL : LITH_IOERR;
  }
  const char *got = (const char *)sqlite3_column_text(st, 0);
  int ok = want == NULL ? sqlite3_column_int(st, 0) == 0 : got != NULL && sqlite3_stricmp(got, want) == 0;
  if (ok && want != NULL && sqlite3_step(st) != SQLITE_DONE)
    ok = 0; /* integrity_check: "ok" must be the only row */
  if (!ok)
    say(errmsg, cap, 0, "%s answered %s: the dump is not a sound database", sql, got != NULL ? got : "busy");
  sqlite3_finalize(st);
  return ok ? LITH_OK : LITH_CORRUPT;
}

/* Fold file's WAL into it and check it (step 3). */
static int fold(const char *file, const atomic_int *cancel, char *errmsg, size_t cap) {
  sqlite3 *s = NULL;
  int rc = sqlite3_open_v2(file, &s, SQLITE_OPEN_READWRITE, NULL);
  if (rc != SQLITE_OK) {
    say(errmsg, cap, 0, "opening the dump: %s", s != NULL ? sqlite3_errmsg(s) : sqlite3_errstr(rc));
    sqlite3_close(s);
    return LITH_IOERR;
  }
  sqlite3_progress_handler(s, 1000, cancel_progress, (void *)cancel);
  rc = pragma(s, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, errmsg, cap);
  if (rc == LITH_OK)
    rc = pragma(s, "PRAGMA journal_mode=DELETE", "delete", errmsg, cap);
  if (rc == LITH_OK)
    rc = pragma(s, "PRAGMA integrity_check", "ok", errmsg, cap);
  if (sqlite3_close(s) != SQLITE_OK && rc == LITH_OK)
    rc = say(errmsg, cap, LITH_IOERR, "closing the dump: %s", sqlite3_errmsg(s));
  return rc;
}

static int sync_file(const char *file) {
  int fd = open(file, O_RDONLY | O_CLOEXEC);
  int rc = fd >= 0 && fsync(fd) == 0 ? 0 : -1;
  if (fd >= 0)
    close(fd);
  return rc;
}

int lithd__dq_snapshot(const char *addresses, const char *database, int failover_ms, const atomic_int *cancel,
                       const char *path, char *errmsg, size_t cap) {
  char base[PATH_MAX], dir[PATH_MAX], main_file[PATH_MAX + 16], side[PATH_MAX + 24];
  int fds[2] = {-1, -1}, rc, dqrc;
  uint64_t sizes[2] = {0, 0}, room;
  uint32_t db;
  struct stat st;
  struct statvfs vfs;
  lith__dq_conn *c = NULL;

  errmsg[0] = '\0';
  if (atomic_load(cancel))
    return say(errmsg, cap, LITH_INTERRUPTED, "lithd is stopping");
  if (lstat(path, &st) == 0)
    return say(errmsg, cap, LITH_MISUSE, "%s exists: a backup never replaces a file", path);
  snprintf(base, sizeof base, "%s", path);
  if (snprintf(dir, sizeof dir, "%s/.lithd-snapshot-XXXXXX", dirname(base)) >= (int)sizeof dir ||
      mkdtemp(dir) == NULL)
    return say(errmsg, cap, errno == ENOSPC ? LITH_DISKFULL : LITH_IOERR,
               "cannot make a directory beside %s: %s", path, strerror(errno));
  snprintf(main_file, sizeof main_file, "%s/snapshot", dir);
  snprintf(side, sizeof side, "%s-wal", main_file);
  if ((fds[0] = open(main_file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0 ||
      (fds[1] = open(side, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0) {
    rc = say(errmsg, cap, errno == ENOSPC ? LITH_DISKFULL : LITH_IOERR,
             "cannot create the snapshot in %s: %s", dir, strerror(errno));
    goto out;
  }
  /* The dump may take what the file system has free, less a margin. */
  room = statvfs(dir, &vfs) == 0 ? (uint64_t)vfs.f_bavail * vfs.f_frsize : UINT64_MAX;
  room = room > SNAP_SLACK ? room - SNAP_SLACK : 0;

  if ((c = lith__dq_new(SNAP_CALL_MS)) == NULL) {
    rc = say(errmsg, cap, LITH_NOMEM, "out of memory");
    goto out;
  }
  lith__dq_set_cancel(c, cancel);
  dqrc = leader_ready(c, addresses, database, lith_clock_ms() + (failover_ms > 0 ? failover_ms : 10000), &db);
  if (dqrc == LITH_DQ_OK) {
    lith__dq_set_timeout(c, SNAP_SILENCE_MS);
    dqrc = lith__dq_dump(c, database, fds, sizes, room, lith_clock_ms() + LITHD_DQ_SNAPSHOT_MS);
  }
  if (dqrc != LITH_DQ_OK) {
    /* A write to our own file that failed is the disk's, not the cluster's. */
    uint64_t werr = dqrc == LITH_DQ_IO ? lith__dq_errcode(c) : 0;
    rc = werr == ENOSPC || werr == EDQUOT ? LITH_DISKFULL : werr != 0 ? LITH_IOERR : from_dq(dqrc);
    rc = say(errmsg, cap, rc, "the dump from the leader: %s%s", lith__dq_errmsg(c),
             dqrc == LITH_DQ_TOOBIG ? " (the free space beside the backup)" : "");
    goto out;
  }
  int bad = fsync(fds[0]) != 0;
  bad |= close(fds[0]) != 0;
  bad |= close(fds[1]) != 0;
  fds[0] = fds[1] = -1;
  if (bad) {
    rc = say(errmsg, cap, errno == ENOSPC ? LITH_DISKFULL : LITH_IOERR, "writing the snapshot: %s",
             strerror(errno));
    goto out;
  }
  if (sizes[0] == 0 && sizes[1] > 0) { /* a WAL with no database: nothing SQLite could read */
    rc = say(errmsg, cap, LITH_CORRUPT, "the leader's dump has a WAL but no database file");
    goto out;
  }
  if ((rc = fold(main_file, cancel, errmsg, cap)) != LITH_OK)
    goto out;
  if (sync_file(main_file) != 0) {
    rc = say(errmsg, cap, LITH_IOERR, "syncing the snapshot: %s", strerror(errno));
    goto out;
  }
  if (link(main_file, path) != 0) {
    rc = errno == EEXIST ? say(errmsg, cap, LITH_MISUSE, "%s exists: a backup never replaces a file", path)
                         : say(errmsg, cap, errno == ENOSPC ? LITH_DISKFULL : LITH_IOERR,
                               "cannot put the snapshot at %s: %s", path, strerror(errno));
    goto out;
  }
  rc = LITH_OK;
out:
  lith__dq_close(c);
  for (int i = 0; i < 2; i++)
    if (fds[i] >= 0)
      close(fds[i]);
  /* Whatever SQLite or the dump left beside it, then the directory. */
  unlink(main_file);
  unlink(side);
  snprintf(side, sizeof side, "%s-shm", main_file);
  unlink(side);
  snprintf(side, sizeof side, "%s-journal", main_file);
  unlink(side);
  rmdir(dir);
  return rc;
}
