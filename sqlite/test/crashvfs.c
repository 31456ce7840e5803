/*
 * "lith_crash": a VFS that simulates losing power inside an xSync.
 *
 * The idea is SQLite's src/test6.c; the mechanics differ. Writes go through
 * to the real file at once (the real file plays the page cache: whatever a
 * connection reads is the latest data), and each write or truncate records
 * the pre-image of the sectors it touches. That record, per file (by path,
 * shared by every connection's handle, as an inode's dirty pages are), is
 * the data the "disk" does not hold yet. xSync on any handle of a file
 * makes it durable: the record is dropped. The real fsync is skipped: this
 * disk is simulated, and the real one never loses power here.
 *
 * At the crash point — inside the n-th xSync, which does not complete — the
 * files are rewritten to one state the disk may be in after the power
 * failed there, then the process ends (exit status T_CRASHVFS_EXIT):
 *   - each unsynced write or truncate, newest first, is kept, dropped (its
 *     pre-image put back) or torn: each of its sectors is new, old or
 *     garbage. Going newest first, every sector ends as one of the versions
 *     it had since the file's last sync (or as garbage, if torn);
 *   - garbage is most likely in a sector the write covered only in part:
 *     what a disk that rewrites whole sectors leaves when power fails
 *     mid-sector, bytes the write never touched included — unless the
 *     device is armed as powersafe (T_CRASHVFS_PSOW): then garbage stays
 *     within the bytes written;
 *   - the file's size is the size after the newest op not dropped (the
 *     size at the last sync if all were): the size may persist without the
 *     data, so a dropped append below a kept one reads back as zeros;
 *   - the -shm of every database is deleted (it lives in memory only);
 *   - a file created since its directory was last synced may vanish. As in
 *     os_unix.c, a handle opened with SQLITE_OPEN_CREATE on a WAL or a
 *     journal syncs the directory at its first xSync (UNIXFILE_DIRSYNC);
 *     no other sync does. A file created outside the VFS (lith creates the
 *     database file itself to set its mode) is taken as durable.
 * Deleting is taken as durable: SQLite deletes only a WAL or journal it no
 *   longer needs, and in these tests no xSync follows a delete.
 *
 * Device characteristics, then: no ATOMIC* (writes tear), no SAFE_APPEND
 * (a size can persist without its data), no SEQUENTIAL (a newer write can
 * persist without an older one), so SQLite syncs the WAL header before the
 * frames after it. POWERSAFE_OVERWRITE only for the powersafe device
 * (T_CRASHVFS_PSOW); without it SQLite pads each WAL commit it syncs to a
 * sector boundary, so that the next commit never shares a sector with it.
 * xSectorSize is T_CRASHVFS_SECTOR, the unit of tearing.
 *
 * The other flags are lies (T_CRASHVFS_LIE_*), for a test that the checker
 * catches a VFS whose promises its faults break.
 *
 * One mutex covers every recorded write, sync, read and size, so a crash
 * sees a settled record and no thread sees its rewrite: other threads stop
 * at their next file call, and the process ends before they go on. Locks
 * and the -shm mapping pass through untouched.
 */
#include "crashvfs.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <sqlite3.h>

#define SECTOR ((sqlite3_int64)T_CRASHVFS_SECTOR)

/* One unsynced write or truncate. */
typedef struct cv_op {
  sqlite3_int64 off;        /* first byte of the pre-image: sector-aligned */
  sqlite3_int64 len;        /* bytes of the pre-image: whole sectors, or to the old end of a truncate */
  sqlite3_int64 woff, wend; /* the bytes the op changed: written, or cut off */
  sqlite3_int64 post_size;  /* the file's size after the op */
  unsigned char *pre;       /* [off, off + len) before the op (zeros past the old end) */
} cv_op;

/* A file by path: what of it is not durable yet. */
typedef struct cv_file {
  struct cv_file *next;
  char *path;
  int main_db;   /* opened as a database: its -shm goes at the crash */
  int entry_new; /* created since its directory was last synced */
  int gone;      /* deleted */
  sqlite3_int64 synced_size;
  cv_op *ops; /* oldest first */
  size_t nops, cap;
} cv_file;

typedef struct cv_handle {
  sqlite3_file base;  /* pMethods = &cv_io; first, as SQLite requires */
  cv_file *f;         /* NULL for a file without a name (a temp file) */
  int dirsync;        /* this handle's first xSync syncs the directory too */
  sqlite3_file *real; /* the unix VFS's file, after this struct */
} cv_handle;

/* The real file follows the handle, aligned for anything it holds. */
#define HANDLE_SIZE ((sizeof(cv_handle) + 15) & ~(size_t)15)

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_register_rc = SQLITE_ERROR;
static sqlite3_vfs *g_real;
static sqlite3_vfs g_vfs;
static cv_file *g_files;
static int g_syncs, g_crash_at, g_flags, g_verbose;
static uint64_t g_seed;

/* ---- Random choices --------------------------------------------------- */

static uint64_t rnd_next(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

static unsigned rnd_pct(uint64_t *s) { return (unsigned)(rnd_next(s) % 100); }

/* ---- The record ------------------------------------------------------- */

static cv_file *file_find(const char *path) {
  for (cv_file *f = g_files; f; f = f->next)
    if (strcmp(f->path, path) == 0)
      return f;
  return NULL;
}

static void file_forget_ops(cv_file *f) {
  for (size_t i = 0; i < f->nops; i++)
    free(f->ops[i].pre);
  f->nops = 0;
}

static int file_push(cv_file *f, const cv_op *op) {
  if (f->nops == f->cap) {
    size_t cap = f->cap ? 2 * f->cap : 64;
    cv_op *ops = realloc(f->ops, cap * sizeof *ops);
    if (!ops)
      return SQLITE_NOMEM;
    f->ops = ops;
    f->cap = cap;
  }
  f->ops[f->nops++] = *op;
  return SQLITE_OK;
}

/* The length of the directory part of path ("/a/b" of "/a/b/c"). */
static size_t dir_len(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? (size_t)(slash - path) : 0;
}

/* The directory of `path` was synced: every entry in it is durable. */
static void dir_synced(const char *path) {
  size_t n = dir_len(path);
  for (cv_file *f = g_files; f; f = f->next)
    if (dir_len(f->path) == n && strncmp(f->path, path, n) == 0)
      f->entry_new = 0;
}

/* Read [off, off + len) of the real file into buf; zeros past its end. */
static int read_pre(sqlite3_file *real, unsigned char *buf, sqlite3_int64 len, sqlite3_int64 off) {
  int rc = real->pMethods->xRead(real, buf, (int)len, off);
  return rc == SQLITE_IOERR_SHORT_READ ? SQLITE_OK : rc; /* the VFS zero-filled the rest */
}

/* ---- The crash ------------------------------------------------------- */

enum { KEEP, DROP, TEAR };
enum { S_NEW, S_OLD, S_GARBAGE };

typedef struct crash_counts {
  int files, vanished, kept, dropped, torn, garbage;
} crash_counts;

static int put(int fd, const unsigned char *buf, sqlite3_int64 n, sqlite3_int64 off) {
  while (n > 0) {
    ssize_t w = pwrite(fd, buf, (size_t)n, (off_t)off);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    buf += w;
    n -= w;
    off += w;
  }
  return 0;
}

/* Put one sector of op back the way `what` says. */
static int sector_apply(int fd, const cv_op *op, sqlite3_int64 s, int what, uint64_t *rng) {
  sqlite3_int64 from = op->off + s, to = from + (op->len - s < SECTOR ? op->len - s : SECTOR);
  if (what == S_OLD)
    return put(fd, op->pre + s, to - from, from);
  if (g_flags & T_CRASHVFS_PSOW) { /* the bytes written alone */
    from = from > op->woff ? from : op->woff;
    to = to < op->wend ? to : op->wend;
  }
  unsigned char junk[T_CRASHVFS_SECTOR];
  for (size_t i = 0; i < sizeof junk; i += 8) {
    uint64_t r = rnd_next(rng);
    memcpy(junk + i, &r, 8);
  }
  return to > from ? put(fd, junk, to - from, from) : 0;
}

/* Rewrite f to one state its disk may hold: see the top of the file. */
static void file_crash(cv_file *f, uint64_t *rng, crash_counts *cc) {
  int fd = open(f->path, O_RDWR | O_CLOEXEC);
  unsigned char *fate = f->nops ? malloc(f->nops) : NULL;
  if (fd < 0 || (f->nops && !fate)) {
    fprintf(stderr, "crashvfs: %s: cannot rewrite (%s)\n", f->path, strerror(errno));
    _exit(T_CRASHVFS_EXIT + 1);
  }
  cc->files++;
  for (size_t i = f->nops; i-- > 0;) {
    const cv_op *op = &f->ops[i];
    unsigned p = rnd_pct(rng);
    fate[i] = p < 40 ? KEEP : p < 70 ? DROP : TEAR;
    if (g_verbose > 1)
      fprintf(stderr, "crashvfs: %s op %zu [%lld, %lld) size -> %lld: %s\n", f->path, i, (long long)op->woff,
              (long long)op->wend, (long long)op->post_size,
              fate[i] == KEEP   ? "kept"
              : fate[i] == DROP ? "dropped"
                                : "torn");
    if (fate[i] == KEEP) {
      cc->kept++;
      continue;
    }
    if (fate[i] == DROP)
      cc->dropped++;
    else
      cc->torn++;
    for (sqlite3_int64 s = 0; s < op->len; s += SECTOR) {
      int what = S_OLD;
      if (fate[i] == TEAR) {
        int partial = op->off + s < op->woff || op->off + s + SECTOR > op->wend;
        unsigned q = rnd_pct(rng);
        if (partial) /* a sector the op rewrote only in part */
          what = q < 30 ? S_NEW : q < 60 ? S_OLD : S_GARBAGE;
        else
          what = q < 45 ? S_NEW : q < 90 ? S_OLD : S_GARBAGE;
      }
      if (what == S_NEW)
        continue;
      cc->garbage += what == S_GARBAGE;
      if (sector_apply(fd, op, s, what, rng) != 0) {
        fprintf(stderr, "crashvfs: %s: pwrite: %s\n", f->path, strerror(errno));
        _exit(T_CRASHVFS_EXIT + 1);
      }
    }
  }
  sqlite3_int64 size = f->synced_size;
  for (size_t i = 0; i < f->nops; i++)
    if (fate[i] != DROP)
      size = f->ops[i].post_size;
  if (ftruncate(fd, (off_t)size) != 0) {
    fprintf(stderr, "crashvfs: %s: ftruncate: %s\n", f->path, strerror(errno));
    _exit(T_CRASHVFS_EXIT + 1);
  }
  free(fate);
  close(fd);
}

/* The power fails now (g_mu held; never returns). */
static void crash(void) {
  uint64_t rng = g_seed ^ ((uint64_t)g_crash_at * 0xD1B54A32D192ED03ULL);
  crash_counts cc = {0, 0, 0, 0, 0, 0};
  for (cv_file *f = g_files; f; f = f->next) {
    if (f->gone)
      continue;
    if (f->entry_new && rnd_pct(&rng) < 50) { /* its directory entry never reached the disk */
      unlink(f->path);
      cc.vanished++;
      continue;
    }
    file_crash(f, &rng, &cc);
  }
  for (cv_file *f = g_files; f; f = f->next) {
    if (!f->main_db)
      continue;
    char shm[4096];
    snprintf(shm, sizeof shm, "%s-shm", f->path);
    unlink(shm); /* the mapping stays valid for the threads still running */
  }
  if (g_verbose)
    fprintf(stderr,
            "crashvfs: power lost in sync %d: %d files rewritten, %d vanished; ops kept %d, dropped %d, "
            "torn %d (%d garbage sectors)\n",
            g_crash_at, cc.files, cc.vanished, cc.kept, cc.dropped, cc.torn, cc.garbage);
  /* Straight to the kernel: no exit handler, no sanitizer report of the
   * threads left running — nothing runs after a power loss. */
  syscall(SYS_exit_group, T_CRASHVFS_EXIT);
  _exit(T_CRASHVFS_EXIT);
}

/* ---- sqlite3_io_methods ---------------------------------------------- */

static sqlite3_file *real_of(sqlite3_file *file) { return ((cv_handle *)file)->real; }

static int cv_close(sqlite3_file *file) {
  sqlite3_file *real = real_of(file);
  return real->pMethods ? real->pMethods->xClose(real) : SQLITE_OK;
}

/* Reads and sizes of a tracked file take the mutex too: the crash rewrites
 * the files while holding it, and a thread reading meanwhile would see the
 * disk after the power failed in a process that is still running (a
 * command answered "malformed" before the exit). */
static int cv_read(sqlite3_file *file, void *buf, int amt, sqlite3_int64 off) {
  cv_handle *h = (cv_handle *)file;
  sqlite3_file *real = h->real;
  if (!h->f)
    return real->pMethods->xRead(real, buf, amt, off);
  pthread_mutex_lock(&g_mu);
  int rc = real->pMethods->xRead(real, buf, amt, off);
  pthread_mutex_unlock(&g_mu);
  return rc;
}

static int cv_write(sqlite3_file *file, const void *buf, int amt, sqlite3_int64 off) {
  cv_handle *h = (cv_handle *)file;
  sqlite3_file *real = h->real;
  if (!h->f)
    return real->pMethods->xWrite(real, buf, amt, off);
  cv_op op = {0, 0, off, off + amt, 0, NULL};
  sqlite3_int64 size = 0;
  pthread_mutex_lock(&g_mu);
  int rc = real->pMethods->xFileSize(real, &size);
  if (rc != SQLITE_OK)
    goto out;
  op.off = off / SECTOR * SECTOR;
  op.len = (off + amt + SECTOR - 1) / SECTOR * SECTOR - op.off;
  op.post_size = size > off + amt ? size : off + amt;
  if (!(op.pre = malloc((size_t)op.len))) {
    rc = SQLITE_NOMEM;
    goto out;
  }
  if ((rc = read_pre(real, op.pre, op.len, op.off)) != SQLITE_OK)
    goto out_free;
  if ((rc = real->pMethods->xWrite(real, buf, amt, off)) != SQLITE_OK)
    goto out_free;
  if ((rc = file_push(h->f, &op)) != SQLITE_OK)
    goto out_free;
  pthread_mutex_unlock(&g_mu);
  return SQLITE_OK;

out_free:
  free(op.pre);
out:
  pthread_mutex_unlock(&g_mu);
  return rc;
}

static int cv_truncate(sqlite3_file *file, sqlite3_int64 size) {
  cv_handle *h = (cv_handle *)file;
  sqlite3_file *real = h->real;
  if (!h->f)
    return real->pMethods->xTruncate(real, size);
  cv_op op = {0, 0, size, size, size, NULL};
  sqlite3_int64 old = 0;
  pthread_mutex_lock(&g_mu);
  int rc = real->pMethods->xFileSize(real, &old);
  if (rc != SQLITE_OK)
    goto out;
  if (size < old) { /* keep what is cut off, from the sector it begins in */
    op.off = size / SECTOR * SECTOR;
    op.len = old - op.off;
    op.wend = old;
    if (!(op.pre = malloc((size_t)op.len))) {
      rc = SQLITE_NOMEM;
      goto out;
    }
    if ((rc = read_pre(real, op.pre, op.len, op.off)) != SQLITE_OK)
      goto out_free;
  }
  if ((rc = real->pMethods->xTruncate(real, size)) != SQLITE_OK)
    goto out_free;
  if ((rc = file_push(h->f, &op)) != SQLITE_OK)
    goto out_free;
  pthread_mutex_unlock(&g_mu);
  return SQLITE_OK;

out_free:
  free(op.pre);
out:
  pthread_mutex_unlock(&g_mu);
  return rc;
}

static int cv_sync(sqlite3_file *file, int flags) {
  cv_handle *h = (cv_handle *)file;
  (void)flags; /* NORMAL, FULL, DATAONLY: all make the data durable here */
  pthread_mutex_lock(&g_mu);
  if (++g_syncs == g_crash_at)
    crash();
  int rc = SQLITE_OK;
  if (h->f && !(g_flags & T_CRASHVFS_LIE_SYNC)) {
    file_forget_ops(h->f);
    rc = h->real->pMethods->xFileSize(h->real, &h->f->synced_size);
    if (h->dirsync)
      dir_synced(h->f->path);
    h->dirsync = 0;
  }
  pthread_mutex_unlock(&g_mu);
  return rc;
}

static int cv_file_size(sqlite3_file *file, sqlite3_int64 *size) {
  cv_handle *h = (cv_handle *)file;
  sqlite3_file *real = h->real;
  if (!h->f)
    return real->pMethods->xFileSize(real, size);
  pthread_mutex_lock(&g_mu);
  int rc = real->pMethods->xFileSize(real, size);
  pthread_mutex_unlock(&g_mu);
  return rc;
}

static int cv_lock(sqlite3_file *file, int lock) {
  sqlite3_file *real = real_of(file);
  return real->pMethods->xLock(real, lock);
}

static int cv_unlock(sqlite3_file *file, int lock) {
  sqlite3_file *real = real_of(file);
  return real->pMethods->xUnlock(real, lock);
}

static int cv_check_reserved(sqlite3_file *file, int *out) {
  sqlite3_file *real = real_of(file);
  return real->pMethods->xCheckReservedLock(real, out);
}

static int cv_file_control(sqlite3_file *file, int op, void *arg) {
  sqlite3_file *real = real_of(file);
  return real->pMethods->xFileControl(real, op, arg);
}

static int cv_sector_size(sqlite3_file *file) {
  (void)file;
  return T_CRASHVFS_SECTOR;
}

static int cv_device_characteristics(sqlite3_file *file) {
  (void)file;
  return (g_flags & (T_CRASHVFS_PSOW | T_CRASHVFS_LIE_PSOW)) ? SQLITE_IOCAP_POWERSAFE_OVERWRITE : 0;
}

static int cv_shm_map(sqlite3_file *file, int pg, int pgsz, int extend, void volatile **out) {
  sqlite3_file *real = real_of(file);
  return real->pMethods->xShmMap(real, pg, pgsz, extend, out);
}

static int cv_shm_lock(sqlite3_file *file, int off, int n, int flags) {
  sqlite3_file *real = real_of(file);
  return real->pMethods->xShmLock(real, off, n, flags);
}

static void cv_shm_barrier(sqlite3_file *file) {
  sqlite3_file *real = real_of(file);
  real->pMethods->xShmBarrier(real);
}

static int cv_shm_unmap(sqlite3_file *file, int del) {
  sqlite3_file *real = real_of(file);
  return real->pMethods->xShmUnmap(real, del);
}

static int cv_fetch(sqlite3_file *file, sqlite3_int64 off, int amt, void **out) {
  sqlite3_file *real = real_of(file);
  return real->pMethods->xFetch(real, off, amt, out);
}

static int cv_unfetch(sqlite3_file *file, sqlite3_int64 off, void *p) {
  sqlite3_file *real = real_of(file);
  return real->pMethods->xUnfetch(real, off, p);
}

static const sqlite3_io_methods cv_io = {
    3,
    cv_close,
    cv_read,
    cv_write,
    cv_truncate,
    cv_sync,
    cv_file_size,
    cv_lock,
    cv_unlock,
    cv_check_reserved,
    cv_file_control,
    cv_sector_size,
    cv_device_characteristics,
    cv_shm_map,
    cv_shm_lock,
    cv_shm_barrier,
    cv_shm_unmap,
    cv_fetch,
    cv_unfetch,
};

/* ---- sqlite3_vfs ------------------------------------------------------ */

static int cv_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags, int *out_flags) {
  cv_handle *h = (cv_handle *)file;
  (void)vfs;
  memset(h, 0, sizeof *h);
  h->real = (sqlite3_file *)(void *)((char *)h + HANDLE_SIZE);
  struct stat st;
  pthread_mutex_lock(&g_mu);
  int existed = name && stat(name, &st) == 0;
  int rc = g_real->xOpen(g_real, name, h->real, flags, out_flags);
  if (rc != SQLITE_OK)
    goto out;
  h->base.pMethods = &cv_io;
  if (!name)
    goto out;
  cv_file *f = file_find(name);
  if (!f) {
    if (!(f = calloc(1, sizeof *f)) || !(f->path = strdup(name))) {
      free(f);
      rc = SQLITE_NOMEM;
      goto err_close;
    }
    f->next = g_files;
    g_files = f;
    if (existed && (rc = h->real->pMethods->xFileSize(h->real, &f->synced_size)) != SQLITE_OK)
      goto err_close;
  }
  if (!existed) { /* a new file: nothing of it is durable, not even its name */
    file_forget_ops(f);
    f->synced_size = 0;
    f->entry_new = 1;
  }
  f->gone = 0;
  f->main_db |= (flags & SQLITE_OPEN_MAIN_DB) != 0;
  h->f = f;
  /* os_unix.c sets UNIXFILE_DIRSYNC exactly so */
  int type = flags & 0x0FFFFF00;
  h->dirsync = (flags & SQLITE_OPEN_CREATE) && (type == SQLITE_OPEN_WAL || type == SQLITE_OPEN_MAIN_JOURNAL ||
                                                type == SQLITE_OPEN_SUPER_JOURNAL);
  goto out;

err_close:
  h->real->pMethods->xClose(h->real);
  h->base.pMethods = NULL;
out:
  pthread_mutex_unlock(&g_mu);
  return rc;
}

static int cv_delete(sqlite3_vfs *vfs, const char *name, int dirsync) {
  (void)vfs;
  pthread_mutex_lock(&g_mu);
  int rc = g_real->xDelete(g_real, name, dirsync);
  cv_file *f = file_find(name);
  if (f && rc == SQLITE_OK) { /* taken as durable: see the top of the file */
    file_forget_ops(f);
    f->gone = 1;
    f->entry_new = 0;
  }
  pthread_mutex_unlock(&g_mu);
  return rc;
}

static int cv_access(sqlite3_vfs *vfs, const char *name, int flags, int *out) {
  (void)vfs;
  return g_real->xAccess(g_real, name, flags, out);
}

static int cv_full_pathname(sqlite3_vfs *vfs, const char *name, int n, char *out) {
  (void)vfs;
  return g_real->xFullPathname(g_real, name, n, out);
}

static void *cv_dlopen(sqlite3_vfs *vfs, const char *name) {
  (void)vfs;
  return g_real->xDlOpen(g_real, name);
}

static void cv_dlerror(sqlite3_vfs *vfs, int n, char *msg) {
  (void)vfs;
  g_real->xDlError(g_real, n, msg);
}

static void (*cv_dlsym(sqlite3_vfs *vfs, void *lib, const char *sym))(void) {
  (void)vfs;
  return g_real->xDlSym(g_real, lib, sym);
}

static void cv_dlclose(sqlite3_vfs *vfs, void *lib) {
  (void)vfs;
  g_real->xDlClose(g_real, lib);
}

static int cv_randomness(sqlite3_vfs *vfs, int n, char *out) {
  (void)vfs;
  return g_real->xRandomness(g_real, n, out);
}

static int cv_sleep(sqlite3_vfs *vfs, int us) {
  (void)vfs;
  return g_real->xSleep(g_real, us);
}

static int cv_current_time(sqlite3_vfs *vfs, double *out) {
  (void)vfs;
  return g_real->xCurrentTime(g_real, out);
}

static int cv_last_error(sqlite3_vfs *vfs, int n, char *msg) {
  (void)vfs;
  return g_real->xGetLastError(g_real, n, msg);
}

static int cv_current_time64(sqlite3_vfs *vfs, sqlite3_int64 *out) {
  (void)vfs;
  return g_real->xCurrentTimeInt64(g_real, out);
}

static void register_once(void) {
  g_real = sqlite3_vfs_find(NULL);
  if (!g_real || g_real->iVersion < 2) {
    g_register_rc = SQLITE_ERROR;
    return;
  }
  sqlite3_vfs v = {
      2,
      (int)(HANDLE_SIZE + (size_t)g_real->szOsFile),
      g_real->mxPathname,
      NULL,
      T_CRASHVFS_NAME,
      NULL,
      cv_open,
      cv_delete,
      cv_access,
      cv_full_pathname,
      cv_dlopen,
      cv_dlerror,
      cv_dlsym,
      cv_dlclose,
      cv_randomness,
      cv_sleep,
      cv_current_time,
      cv_last_error,
      cv_current_time64,
      NULL,
      NULL,
      NULL,
  };
  g_vfs = v;
  g_register_rc = sqlite3_vfs_register(&g_vfs, 0);
}

int t_crashvfs_register(void) {
  pthread_once(&g_once, register_once);
  return g_register_rc;
}

void t_crashvfs_arm(uint64_t seed, int crash_at, int flags) {
  pthread_mutex_lock(&g_mu);
  g_seed = seed;
  g_crash_at = crash_at;
  g_flags = flags;
  g_syncs = 0;
  const char *v = getenv("LITH_CRASHVFS_VERBOSE"); /* 1: a line a crash; 2: a line an op */
  g_verbose = v ? atoi(v) : 0;
  pthread_mutex_unlock(&g_mu);
}

int t_crashvfs_syncs(void) {
  pthread_mutex_lock(&g_mu);
  int n = g_syncs;
  pthread_mutex_unlock(&g_mu);
  return n;
}
