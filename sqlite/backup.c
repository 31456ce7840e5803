/* Online backup: see backup.h. */
#include "backup.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conn.h"
#include "errcode.h"

static int fsync_path(const char *path, int dir) {
  int fd = open(path, (dir ? O_RDONLY | O_DIRECTORY : O_RDWR) | O_CLOEXEC);
  if (fd < 0)
    return -1;
  int rc = fsync(fd);
  close(fd);
  return rc;
}

static void remove_sidecars(const char *path) {
  char buf[4200];
  static const char *const ext[] = {"-journal", "-wal", "-shm"};
  for (size_t i = 0; i < sizeof ext / sizeof *ext; i++) {
    snprintf(buf, sizeof buf, "%s%s", path, ext[i]);
    unlink(buf);
  }
}

/* Non-zero if `dest` names the source database or one of its sidecar files
 * (also through another spelling, a hard link or a symbolic link): renaming
 * over it would throw away the live file under the writer. */
static int is_source(const char *src, const char *dest) {
  struct stat d, x;
  char buf[4200];
  if (stat(dest, &d) != 0)
    return 0;
  static const char *const ext[] = {"", "-wal", "-shm", "-journal"};
  for (size_t i = 0; i < sizeof ext / sizeof *ext; i++) {
    snprintf(buf, sizeof buf, "%s%s", src, ext[i]);
    if (stat(buf, &x) == 0 && x.st_dev == d.st_dev && x.st_ino == d.st_ino)
      return 1;
  }
  return 0;
}

/* Pages per backup step: 1 MiB of 4 KiB pages, about a millisecond; how
 * soon lith_interrupt stops a backup. */
#define BACKUP_STEP_PAGES 256

/* The longest destination path taken (below PATH_MAX), and room for it plus
 * the temporary name's suffix ".tmp-<pid>-<counter>". */
#define BACKUP_PATH_MAX 4000
#define BACKUP_TMP_MAX (BACKUP_PATH_MAX + 64)

static int backup_run(const char *src_path, const lith_options *opt, const char *dest_path, int new_only,
                      _Atomic uint32_t *interrupts) {
  static _Atomic unsigned counter;
  char tmp[BACKUP_TMP_MAX], dir[BACKUP_TMP_MAX];
  int rc;
  sqlite3 *src = NULL, *dst = NULL;
  struct stat st;

  if (!dest_path || !*dest_path || strlen(dest_path) > BACKUP_PATH_MAX)
    return lith__fail(LITH_MISUSE, "lith_backup: bad destination path");
  if (is_source(src_path, dest_path))
    return lith__fail(LITH_MISUSE, "lith_backup: %s is the live database itself", dest_path);
  if (new_only && lstat(dest_path, &st) == 0) /* whatever it is: file, link, FIFO, device */
    return lith__fail(LITH_MISUSE, "lith_backup: %s exists: this backup never replaces a file", dest_path);
  snprintf(tmp, sizeof tmp, "%s.tmp-%ld-%u", dest_path, (long)getpid(), atomic_fetch_add(&counter, 1));

  if ((rc = lith__conn_open_reader(src_path, opt, &src)) != LITH_OK)
    goto err;
  /* A copy of the data: the database's mode. New only: the temporary file
   * must be ours, made here, not something found at its name. */
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, (mode_t)opt->file_mode);
  if (fd < 0 && new_only) {
    rc = lith__fail(errno == ENOSPC ? LITH_DISKFULL : LITH_CANTOPEN, "lith_backup: create %s: %s", tmp,
                    strerror(errno));
    sqlite3_close(src);
    return rc;
  }
  if (fd >= 0)
    close(fd);
  int src_rc =
      sqlite3_open_v2(tmp, &dst, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
  if (src_rc != SQLITE_OK) {
    rc = lith__fail(lith_from_sqlite(src_rc), "lith_backup: open %s: %s", tmp,
                    dst ? sqlite3_errmsg(dst) : sqlite3_errstr(src_rc));
    goto err_close;
  }
  sqlite3_exec(dst, "PRAGMA synchronous=FULL", NULL, NULL, NULL);
  /* One snapshot for every step: the read transaction is ours, held until
   * the copy is done (a step that opened its own would start again after
   * each commit of the writer, and might never end). */
  src_rc = sqlite3_exec(src, "BEGIN; SELECT count(*) FROM sqlite_schema", NULL, NULL, NULL);
  if (src_rc != SQLITE_OK) {
    rc = lith__fail_sqlite(src_rc, src, "lith_backup: begin");
    goto err_close;
  }
  sqlite3_backup *b = sqlite3_backup_init(dst, "main", src, "main");
  if (!b) {
    rc = lith__fail_sqlite(sqlite3_errcode(dst), dst, "lith_backup: init");
    goto err_close;
  }
  uint32_t seen = atomic_load(interrupts);
  int stopped = 0;
  do {
    if (atomic_load(interrupts) != seen) {
      stopped = 1;
      break;
    }
    src_rc = sqlite3_backup_step(b, BACKUP_STEP_PAGES);
  } while (src_rc == SQLITE_OK || src_rc == SQLITE_BUSY || src_rc == SQLITE_LOCKED);
  int fin = sqlite3_backup_finish(b);
  sqlite3_exec(src, "COMMIT", NULL, NULL, NULL);
  if (stopped) {
    rc = lith__fail(LITH_INTERRUPTED, "lith_backup: interrupted (lith_interrupt); %s was not written",
                    dest_path);
    goto err_close;
  }
  if (src_rc != SQLITE_DONE) {
    rc = lith__fail(lith_from_sqlite(src_rc), "lith_backup: copy: %s", sqlite3_errstr(src_rc));
    goto err_close;
  }
  if (fin != SQLITE_OK) {
    rc = lith__fail_sqlite(fin, dst, "lith_backup: finish");
    goto err_close;
  }
  src_rc = sqlite3_close(dst);
  dst = NULL;
  if (src_rc != SQLITE_OK) {
    rc = lith__fail(lith_from_sqlite(src_rc), "lith_backup: close copy: %s", sqlite3_errstr(src_rc));
    goto err_close;
  }
  if (fsync_path(tmp, 0) != 0) {
    rc = lith__fail(LITH_IOERR, "lith_backup: fsync %s: %s", tmp, strerror(errno));
    goto err_close;
  }
  if (atomic_load(interrupts) != seen) { /* the sync is long: looked at once more */
    rc = lith__fail(LITH_INTERRUPTED, "lith_backup: interrupted (lith_interrupt); %s was not written",
                    dest_path);
    goto err_close;
  }
  if (new_only) {
    /* link() never replaces: if something took the name meanwhile, it fails. */
    if (link(tmp, dest_path) != 0) {
      rc = errno == EEXIST
               ? lith__fail(LITH_MISUSE, "lith_backup: %s exists: this backup never replaces a file",
                            dest_path)
               : lith__fail(errno == ENOSPC ? LITH_DISKFULL : LITH_IOERR, "lith_backup: link to %s: %s",
                            dest_path, strerror(errno));
      goto err_close;
    }
    unlink(tmp);
  } else {
    /* A stale WAL beside the old destination would be replayed onto the new
     * copy: remove what belongs to the file being replaced. */
    remove_sidecars(dest_path);
    if (rename(tmp, dest_path) != 0) {
      rc = lith__fail(errno == ENOSPC ? LITH_DISKFULL : LITH_IOERR, "lith_backup: rename to %s: %s",
                      dest_path, strerror(errno));
      goto err_close;
    }
  }
  snprintf(dir, sizeof dir, "%s", dest_path);
  fsync_path(dirname(dir), 1);
  sqlite3_close(src);
  return LITH_OK;

err_close:
  sqlite3_close(dst);
  sqlite3_close(src);
  unlink(tmp);
  remove_sidecars(tmp);
err:
  return rc;
}

int lith__backup_run(const char *src_path, const lith_options *opt, const char *dest_path, int new_only,
                     _Atomic uint32_t *interrupts, lith__pool *pool) {
  /* From before its source connection opens (opening reads the schema)
   * until it is closed: the hold sees this reader. */
  lith__pool_backup_begin(pool);
  int rc = backup_run(src_path, opt, dest_path, new_only, interrupts);
  lith__pool_backup_end(pool);
  return rc;
}
