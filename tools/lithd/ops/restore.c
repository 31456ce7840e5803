/* lithd --restore: see restore.h. */
#include "restore.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "lith.h"
#include "log.h"

/* How long the copy waits for a write in FROM to end (a process that holds
 * its write lock: rollback mode's EXCLUSIVE, a WAL reset). */
#define FROM_BUSY_MS 5000

/* "<path><suffix>" into buf; 0, or -1 if it does not fit. */
static int with_suffix(char *buf, size_t cap, const char *path, const char *suffix) {
  return snprintf(buf, cap, "%s%s", path, suffix) < (int)cap ? 0 : -1;
}

static int exists(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0;
}

/* 1 if `path` exists and is not empty. */
static int nonempty(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && st.st_size > 0;
}

/* Open `from` read-only through SQLite and begin reading it: what FROM's
 * -wal holds is read with it, found beside the real file however FROM is
 * named (SQLite resolves links), and a hot -journal must be rolled back
 * first, which a read-only connection cannot do. *db: the connection, or
 * NULL after a message (-1). made[PATH_MAX]: FROM's real name when
 * neither its -wal nor its -shm was there before the read (reading a WAL
 * database makes both, and a read-only connection never removes them:
 * tidy_from does), else "". */
int lithd_restore_open(const char *from, sqlite3 **db, char *made) {
  made[0] = '\0';
  int rc = sqlite3_open_v2(from, db, SQLITE_OPEN_READONLY, NULL);
  if (rc == SQLITE_OK) {
    const char *real = sqlite3_db_filename(*db, "main");
    char wal[PATH_MAX + 16], shm[PATH_MAX + 16];
    if (real != NULL && strlen(real) < PATH_MAX && with_suffix(wal, sizeof wal, real, "-wal") == 0 &&
        with_suffix(shm, sizeof shm, real, "-shm") == 0 && !exists(wal) && !exists(shm))
      snprintf(made, PATH_MAX, "%s", real);
    sqlite3_busy_timeout(*db, FROM_BUSY_MS);
    rc = sqlite3_exec(*db, "SELECT count(*) FROM sqlite_schema", NULL, NULL, NULL);
  }
  if (rc == SQLITE_OK)
    return 0;
  if (*db != NULL && sqlite3_extended_errcode(*db) == SQLITE_READONLY_ROLLBACK) {
    const char *journal = sqlite3_filename_journal(sqlite3_db_filename(*db, "main"));
    lithd_log(LITHD_LOG_ERROR,
              "restore: %s has a hot journal (%s): a transaction was cut off after it wrote into the "
              "file, and only a read-write open rolls it back (a restore opens FROM read-only, and a "
              "copy as it is would hold rows never committed); roll it back with sqlite3 %s 'PRAGMA "
              "integrity_check', then restore again",
              from, journal != NULL ? journal : "its -journal", from);
  } else {
    lithd_log(LITHD_LOG_ERROR, "restore: cannot read %s: %s", from,
              *db != NULL ? sqlite3_errmsg(*db) : sqlite3_errstr(rc));
  }
  sqlite3_close(*db);
  *db = NULL;
  return -1;
}

/* Remove the -wal and -shm that reading FROM made (open_from's `made`;
 * "": none). Only SQLite knows whether another process opened FROM since
 * and uses them, so SQLite removes them: a read-write connection's close
 * does when it is FROM's last, after checkpointing a WAL that is empty (no
 * byte of FROM written), and leaves them otherwise. Not with a -journal
 * there: a read-write open would roll it back, and FROM is not ours to
 * change. */
void lithd_restore_tidy(const char *made) {
  char journal[PATH_MAX + 16];
  sqlite3 *db = NULL;

  if (made[0] == '\0' || with_suffix(journal, sizeof journal, made, "-journal") != 0 || exists(journal))
    return;
  if (sqlite3_open_v2(made, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK)
    sqlite3_exec(db, "SELECT count(*) FROM sqlite_schema", NULL, NULL, NULL);
  sqlite3_close(db);
}

/* Copy the database `src` (FROM's connection) to a new file `tmp` (mode)
 * with SQLite's backup API: one read transaction, so one committed state
 * of FROM, its WAL's frames included. Synced; *bytes: its size. 0, or -1
 * after a message. */
static int copy_db(sqlite3 *src, const char *from, const char *tmp, int mode, long long *bytes) {
  sqlite3 *dst = NULL;
  sqlite3_backup *b = NULL;
  struct stat st;
  int fd, rc, out = -1;

  *bytes = 0;
  unlink(tmp); /* a crashed restore's: we hold the lock, it is ours */
  /* Created here, empty (an empty database to SQLite), so that the copy
   * has `mode` (SQLite would make it 0644 less the umask, and gives its
   * -journal the file's mode). */
  fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, (mode_t)mode);
  if (fd < 0) {
    lithd_log(LITHD_LOG_ERROR, "restore: cannot create %s: %s", tmp, strerror(errno));
    return -1;
  }
  close(fd);
  if ((rc = sqlite3_open_v2(tmp, &dst, SQLITE_OPEN_READWRITE, NULL)) != SQLITE_OK) {
    lithd_log(LITHD_LOG_ERROR, "restore: cannot open %s: %s", tmp,
              dst != NULL ? sqlite3_errmsg(dst) : sqlite3_errstr(rc));
    goto out;
  }
  if ((b = sqlite3_backup_init(dst, "main", src, "main")) == NULL) {
    lithd_log(LITHD_LOG_ERROR, "restore: cannot copy %s: %s", from, sqlite3_errmsg(dst));
    goto out;
  }
  rc = sqlite3_backup_step(b, -1); /* all pages, one read of FROM */
  int frc = sqlite3_backup_finish(b);
  if (rc != SQLITE_DONE || frc != SQLITE_OK) {
    int e = (rc != SQLITE_DONE ? rc : frc) & 0xff;
    if (e == SQLITE_BUSY || e == SQLITE_LOCKED)
      lithd_log(LITHD_LOG_ERROR,
                "restore: cannot copy %s: another process held its write lock for %d s; try again", from,
                FROM_BUSY_MS / 1000);
    else
      lithd_log(LITHD_LOG_ERROR, "restore: cannot copy %s into %s: %s", from, tmp, sqlite3_errmsg(dst));
    goto out;
  }
  if ((rc = sqlite3_close(dst)) != SQLITE_OK) {
    lithd_log(LITHD_LOG_ERROR, "restore: cannot close %s: %s", tmp, sqlite3_errstr(rc));
    dst = NULL;
    goto out;
  }
  dst = NULL;
  fd = open(tmp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 || fsync(fd) != 0 || fstat(fd, &st) != 0) {
    lithd_log(LITHD_LOG_ERROR, "restore: cannot sync %s: %s", tmp, strerror(errno));
    if (fd >= 0)
      close(fd);
    goto out;
  }
  close(fd);
  *bytes = (long long)st.st_size;
  out = 0;
out:
  sqlite3_close(dst);
  return out;
}

int lithd_restore_integrity(sqlite3 *db, const char *from) {
  sqlite3_stmt *st = NULL;
  int rc = -1;

  if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    const char *text = (const char *)sqlite3_column_text(st, 0);
    if (text != NULL && strcmp(text, "ok") == 0) {
      rc = 0;
    } else {
      /* A copy: the next step (is there more?) frees the column's text. */
      char first[512];
      snprintf(first, sizeof first, "%s", text != NULL ? text : "");
      int more = sqlite3_step(st) == SQLITE_ROW;
      lithd_log(LITHD_LOG_ERROR, "restore: %s fails PRAGMA integrity_check: %s%s", from, first,
                more ? " (and more)" : "");
    }
  } else {
    lithd_log(LITHD_LOG_ERROR, "restore: %s fails PRAGMA integrity_check: %s", from, sqlite3_errmsg(db));
  }
  sqlite3_finalize(st);
  return rc;
}

/* PRAGMA integrity_check on `path` (the copy). 0 when it says "ok", else
 * -1 after a message naming `from`. */
static int check_copy(const char *path, const char *from) {
  sqlite3 *db = NULL;
  int rc = -1, src;

  src = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL);
  if (src == SQLITE_OK)
    rc = lithd_restore_integrity(db, from);
  else
    lithd_log(LITHD_LOG_ERROR, "restore: %s fails PRAGMA integrity_check: %s", from,
              db != NULL ? sqlite3_errmsg(db) : sqlite3_errstr(src));
  sqlite3_close(db); /* the last connection: the copy's -wal and -shm go */
  return rc;
}

/* TO exists and is to be replaced: its own -wal is checkpointed and
 * removed by opening and closing it; if the -wal stays, another process
 * has TO open. 0, or -1 after a message. */
static int release_target(const char *to) {
  char wal[PATH_MAX + 16];
  sqlite3 *db = NULL;

  if (with_suffix(wal, sizeof wal, to, "-wal") != 0)
    return -1;
  if (sqlite3_open_v2(to, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK)
    sqlite3_exec(db, "SELECT count(*) FROM sqlite_schema", NULL, NULL, NULL);
  sqlite3_close(db);
  if (nonempty(wal)) {
    lithd_log(LITHD_LOG_ERROR,
              "restore: %s is open in another process (its -wal is still there after closing it): "
              "stop what uses it first",
              to);
    return -1;
  }
  return 0;
}

int lithd_restore_source(const char *from, struct stat *fs) {
  unsigned char head[16];
  /* O_NONBLOCK: a FIFO's open would wait for a writer (forever); it is
   * refused below, as not a file. */
  int in = open(from, O_RDONLY | O_NONBLOCK | O_CLOEXEC), rc = -1;

  if (in < 0 || fstat(in, fs) != 0) {
    lithd_log(LITHD_LOG_ERROR, "restore: cannot open %s: %s", from, strerror(errno));
    goto out;
  }
  if (!S_ISREG(fs->st_mode) || fs->st_size == 0) {
    lithd_log(LITHD_LOG_ERROR, "restore: %s is %s, not a backup", from,
              S_ISREG(fs->st_mode) ? "empty" : "not a file");
    goto out;
  }
  if (pread(in, head, sizeof head, 0) != (ssize_t)sizeof head || memcmp(head, "SQLite format 3", 16) != 0) {
    lithd_log(LITHD_LOG_ERROR,
              "restore: %s is not an SQLite database (an SQL dump from GET /v1/backup?format=sql loads "
              "with: sqlite3 NEW.db < DUMP.sql)",
              from);
    goto out;
  }
  rc = 0;
out:
  if (in >= 0)
    close(in);
  return rc;
}

int lithd_restore(const char *from, const char *to_arg, int force, int file_mode) {
  char tmp[PATH_MAX + 32], side[PATH_MAX + 16], dir[PATH_MAX], real_to[PATH_MAX], made[PATH_MAX];
  const char *to = to_arg;
  struct stat fs, ts;
  long long bytes = 0;
  int code = 1;
  sqlite3 *src = NULL;
  int64_t t0 = lith_clock_ms();

  made[0] = '\0';

  /* TO a link: the file it names is replaced (what SQLite opens through
   * the link, and what the lock, taken by the real name, covers), not the
   * link. A link to nothing is refused below. */
  if (lstat(to_arg, &ts) == 0 && S_ISLNK(ts.st_mode) && realpath(to_arg, real_to) != NULL)
    to = real_to;
  if (with_suffix(tmp, sizeof tmp, to, ".restore-tmp") != 0) {
    lithd_log(LITHD_LOG_ERROR, "restore: path too long");
    return 1;
  }
  if (lithd_restore_source(from, &fs) != 0)
    goto out;
  if (stat(to, &ts) == 0) {
    if (ts.st_dev == fs.st_dev && ts.st_ino == fs.st_ino) {
      lithd_log(LITHD_LOG_ERROR, "restore: %s and %s are the same file", from, to_arg);
      goto out;
    }
    if (!force) {
      lithd_log(LITHD_LOG_ERROR, "restore: %s exists; --force replaces it (never while a lithd serves it)",
                to_arg);
      goto out;
    }
  } else if (exists(to)) { /* a dangling link, or stat failed for another reason */
    lithd_log(LITHD_LOG_ERROR, "restore: %s: %s", to_arg, strerror(errno));
    goto out;
  }
  if (lithd_restore_open(from, &src, made) != 0)
    goto out;
  if (copy_db(src, from, tmp, file_mode, &bytes) != 0)
    goto out_tmp;
  sqlite3_close(src); /* read-only: FROM and its -wal stay as they are */
  src = NULL;
  lithd_restore_tidy(made);
  made[0] = '\0';
  if (check_copy(tmp, from) != 0)
    goto out_tmp;
  if (exists(to) && release_target(to) != 0)
    goto out_tmp;
  /* No -wal of TO's is left (release_target); a stale -shm or -journal
   * would be read with the new file: gone. */
  if (with_suffix(side, sizeof side, to, "-wal") == 0)
    unlink(side);
  if (with_suffix(side, sizeof side, to, "-shm") == 0)
    unlink(side);
  if (with_suffix(side, sizeof side, to, "-journal") == 0)
    unlink(side);
  if (rename(tmp, to) != 0) {
    lithd_log(LITHD_LOG_ERROR, "restore: cannot rename %s to %s: %s", tmp, to, strerror(errno));
    goto out_tmp;
  }
  snprintf(dir, sizeof dir, "%s", to);
  {
    int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      fsync(dfd);
      close(dfd);
    }
  }
  printf("lithd: restored %s into %s%s%s%s: %lld bytes, integrity_check ok, %lld ms; start lithd --db %s to "
         "serve it\n",
         from, to_arg, to != to_arg ? " (" : "", to != to_arg ? to : "", to != to_arg ? ")" : "", bytes,
         (long long)(lith_clock_ms() - t0), to_arg);
  fflush(stdout);
  code = 0;
  goto out;
out_tmp:
  unlink(tmp);
  if (with_suffix(side, sizeof side, tmp, "-journal") == 0)
    unlink(side);
  if (with_suffix(side, sizeof side, tmp, "-wal") == 0)
    unlink(side);
  if (with_suffix(side, sizeof side, tmp, "-shm") == 0)
    unlink(side);
out:
  sqlite3_close(src);
  lithd_restore_tidy(made);
  return code;
}
