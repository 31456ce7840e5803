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

#define COPY_PIECE (1 << 20)

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

/* Copy the open file `in` to a new file `tmp` (mode), synced. 0, or -1
 * after a message. */
static int copy_file(int in, const char *from, const char *tmp, int mode, long long *bytes) {
  char *buf = malloc(COPY_PIECE);
  int out = -1, rc = -1;
  ssize_t n;

  *bytes = 0;
  if (buf == NULL) {
    lithd_log(LITHD_LOG_ERROR, "restore: out of memory");
    return -1;
  }
  unlink(tmp); /* a crashed restore's: we hold the lock, it is ours */
  out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, (mode_t)mode);
  if (out < 0) {
    lithd_log(LITHD_LOG_ERROR, "restore: cannot create %s: %s", tmp, strerror(errno));
    goto out;
  }
  while ((n = read(in, buf, COPY_PIECE)) != 0) {
    if (n < 0) {
      if (errno == EINTR)
        continue;
      lithd_log(LITHD_LOG_ERROR, "restore: cannot read %s: %s", from, strerror(errno));
      goto out;
    }
    for (ssize_t done = 0; done < n;) {
      ssize_t w = write(out, buf + done, (size_t)(n - done));
      if (w < 0 && errno == EINTR)
        continue;
      if (w < 0) {
        lithd_log(LITHD_LOG_ERROR, "restore: cannot write %s: %s", tmp, strerror(errno));
        goto out;
      }
      done += w;
    }
    *bytes += n;
  }
  if (fsync(out) != 0) {
    lithd_log(LITHD_LOG_ERROR, "restore: cannot sync %s: %s", tmp, strerror(errno));
    goto out;
  }
  rc = 0;
out:
  if (out >= 0 && close(out) != 0 && rc == 0) {
    lithd_log(LITHD_LOG_ERROR, "restore: cannot write %s: %s", tmp, strerror(errno));
    rc = -1;
  }
  free(buf);
  return rc;
}

/* PRAGMA integrity_check on `path` (the copy). 0 when it says "ok", else
 * -1 after a message naming `from`. */
static int check_copy(const char *path, const char *from) {
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  int rc = -1, src;

  src = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL);
  if (src == SQLITE_OK)
    src = sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL);
  if (src == SQLITE_OK && (src = sqlite3_step(st)) == SQLITE_ROW) {
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
    lithd_log(LITHD_LOG_ERROR, "restore: %s fails PRAGMA integrity_check: %s", from,
              db != NULL ? sqlite3_errmsg(db) : sqlite3_errstr(src));
  }
  sqlite3_finalize(st);
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

int lithd_restore(const char *from, const char *to, int force, int file_mode) {
  char tmp[PATH_MAX + 32], side[PATH_MAX + 16], dir[PATH_MAX];
  unsigned char head[16];
  struct stat fs, ts;
  long long bytes = 0;
  int in = -1, code = 1;
  int64_t t0 = lith_clock_ms();

  if (with_suffix(tmp, sizeof tmp, to, ".restore-tmp") != 0 ||
      with_suffix(side, sizeof side, from, "-wal") != 0) {
    lithd_log(LITHD_LOG_ERROR, "restore: path too long");
    return 1;
  }
  in = open(from, O_RDONLY | O_CLOEXEC);
  if (in < 0 || fstat(in, &fs) != 0) {
    lithd_log(LITHD_LOG_ERROR, "restore: cannot open %s: %s", from, strerror(errno));
    goto out;
  }
  if (!S_ISREG(fs.st_mode) || fs.st_size == 0) {
    lithd_log(LITHD_LOG_ERROR, "restore: %s is %s, not a backup", from,
              S_ISREG(fs.st_mode) ? "empty" : "not a file");
    goto out;
  }
  if (pread(in, head, sizeof head, 0) != (ssize_t)sizeof head || memcmp(head, "SQLite format 3", 16) != 0) {
    lithd_log(LITHD_LOG_ERROR,
              "restore: %s is not an SQLite database (an SQL dump from GET /v1/backup?format=sql loads "
              "with: sqlite3 NEW.db < DUMP.sql)",
              from);
    goto out;
  }
  if (nonempty(side)) {
    lithd_log(LITHD_LOG_ERROR,
              "restore: %s has a -wal file beside it: it is a live database (or was not closed cleanly), "
              "and a copy would miss what the -wal holds; restore from a backup (GET /v1/backup)",
              from);
    goto out;
  }
  if (stat(to, &ts) == 0) {
    if (ts.st_dev == fs.st_dev && ts.st_ino == fs.st_ino) {
      lithd_log(LITHD_LOG_ERROR, "restore: %s and %s are the same file", from, to);
      goto out;
    }
    if (!force) {
      lithd_log(LITHD_LOG_ERROR, "restore: %s exists; --force replaces it (never while a lithd serves it)",
                to);
      goto out;
    }
  } else if (exists(to)) { /* a dangling link, or stat failed for another reason */
    lithd_log(LITHD_LOG_ERROR, "restore: %s: %s", to, strerror(errno));
    goto out;
  }
  if (copy_file(in, from, tmp, file_mode, &bytes) != 0)
    goto out_tmp;
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
  printf("lithd: restored %s into %s: %lld bytes, integrity_check ok, %lld ms; start lithd --db %s to serve "
         "it\n",
         from, to, bytes, (long long)(lith_clock_ms() - t0), to);
  fflush(stdout);
  code = 0;
  goto out;
out_tmp:
  unlink(tmp);
  if (with_suffix(side, sizeof side, tmp, "-wal") == 0)
    unlink(side);
  if (with_suffix(side, sizeof side, tmp, "-shm") == 0)
    unlink(side);
out:
  if (in >= 0)
    close(in);
  return code;
}
