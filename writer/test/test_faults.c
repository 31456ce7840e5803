/*
 * The disk fails: lith never reports a false success, keeps nothing of a
 * failed batch, and recovers once the disk works again.
 *
 * A fault-injecting SQLite VFS, "faulty", wraps the default one: every file
 * it opens wraps the real file's sqlite3_io_methods (all of them, version 3:
 * shm and fetch included) and forwards each call. A test arms one fault: an
 * operation (xWrite, xSync, or a shm lock request), the files it hits (the
 * WAL, the main database file), the error to return, and how many matching
 * calls still succeed before it; once it fires it keeps firing (a full disk
 * stays full) until cleared. lith opens every connection with
 * opt.vfs = "faulty"; the checks afterwards use plain connections.
 *
 *   - COMMIT meets a full disk (or a write I/O error part-way through the
 *     frames): a gated batch of good commands all get LITH_DISKFULL
 *     (LITH_IOERR) with a message, none LITH_OK; a reader sees none of their
 *     rows at once, and after lith_close none is in the file; the rows of
 *     earlier batches all are; once the fault is cleared, new commands
 *     succeed and are kept; stats.failed counts the batch; integrity ok.
 *   - fsync of the WAL fails at COMMIT under synchronous FULL: the batch gets
 *     LITH_IOERR, none OK, recovery as above. SQLite has written the commit
 *     frame before the fsync failed; whether the "failed" rows show up later
 *     is printed (not asserted): after a clean close they cannot (the WAL is
 *     checkpointed up to the last good commit and truncated); after a close
 *     that leaves the WAL (EXTERNAL mode, as after a crash) WAL recovery may
 *     find the frames.
 *   - The disk fails inside a command: with a tiny page cache a big command
 *     spills pages to the WAL while it runs and the write fails; SQLite rolls
 *     back the transaction; the culprit sees the error itself, it and every
 *     other command of the batch (the ones that ran before it and the ones
 *     that never ran) get it, none is retried (environmental), none OK,
 *     nothing of the batch kept; the writer recovers (the same big command
 *     then succeeds).
 *   - BEGIN IMMEDIATE fails with an I/O error (a shm lock request fails):
 *     the batch gets LITH_IOERR, no command runs, stats.busy does not count
 *     it; recovery.
 *   - lith_tx_commit inside a command submitted alone meets a full disk: it
 *     returns LITH_DISKFULL and what the command did since its last commit
 *     is gone, what it committed before stays; the disk still full, no new
 *     transaction can begin, so every later call of the command is
 *     LITH_ABORTED and it fails with nothing more kept; the writer goes on
 *     with the next commands once the disk has room.
 *   - A checkpoint that cannot write the database file never fails a commit:
 *     every lith_do is LITH_OK and kept.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common.h"

#define DB "faults.db"

/* ---- The fault-injecting VFS ---------------------------------------------- */

enum { F_MAIN = 1, F_WAL = 2, F_OTHER = 4 };
enum { OP_NONE = 0, OP_WRITE, OP_SYNC, OP_SHMLOCK, OP_SHMGROW };

static _Atomic int g_op = OP_NONE; /* armed operation; set last, cleared first */
static _Atomic int g_target;       /* F_* mask of files it hits */
static _Atomic int g_rc;           /* SQLite code to return */
static _Atomic long g_skip;        /* matching calls that still succeed */
static _Atomic long g_fired;       /* faults injected since armed */

static void fault_arm(int op, int target, int rc, long after) {
  atomic_store(&g_op, OP_NONE);
  atomic_store(&g_target, target);
  atomic_store(&g_rc, rc);
  atomic_store(&g_skip, after);
  atomic_store(&g_fired, 0);
  atomic_store(&g_op, op);
}

static void fault_clear(void) { atomic_store(&g_op, OP_NONE); }

static long fault_fired(void) { return atomic_load(&g_fired); }

typedef struct ffile {
  sqlite3_file base;  /* pMethods: &f_io, or NULL */
  sqlite3_file *real; /* the wrapped file, right after this struct */
  int kind;           /* F_* */
} ffile;

static sqlite3_vfs *real_vfs(sqlite3_vfs *v) { return (sqlite3_vfs *)v->pAppData; }

/* SQLITE_OK, or the armed error if this call is to fail. */
static int fault_check(const ffile *f, int op) {
  if (atomic_load(&g_op) != op || !(atomic_load(&g_target) & f->kind))
    return SQLITE_OK;
  if (atomic_fetch_sub(&g_skip, 1) > 0)
    return SQLITE_OK;
  atomic_fetch_add(&g_fired, 1);
  return atomic_load(&g_rc);
}

#define REAL(file) (((ffile *)(file))->real)
#define RM(file) (REAL(file)->pMethods)

static int f_close(sqlite3_file *file) {
  int rc = RM(file)->xClose(REAL(file));
  file->pMethods = NULL;
  return rc;
}
static int f_read(sqlite3_file *file, void *buf, int n, sqlite3_int64 off) {
  return RM(file)->xRead(REAL(file), buf, n, off);
}
static int f_write(sqlite3_file *file, const void *buf, int n, sqlite3_int64 off) {
  int rc = fault_check((ffile *)file, OP_WRITE);
  return rc != SQLITE_OK ? rc : RM(file)->xWrite(REAL(file), buf, n, off);
}
static int f_truncate(sqlite3_file *file, sqlite3_int64 size) {
  return RM(file)->xTruncate(REAL(file), size);
}
static int f_sync(sqlite3_file *file, int flags) {
  int rc = fault_check((ffile *)file, OP_SYNC);
  return rc != SQLITE_OK ? rc : RM(file)->xSync(REAL(file), flags);
}
static int f_file_size(sqlite3_file *file, sqlite3_int64 *size) {
  return RM(file)->xFileSize(REAL(file), size);
}
static int f_lock(sqlite3_file *file, int lock) { return RM(file)->xLock(REAL(file), lock); }
static int f_unlock(sqlite3_file *file, int lock) { return RM(file)->xUnlock(REAL(file), lock); }
static int f_check_reserved(sqlite3_file *file, int *out) {
  return RM(file)->xCheckReservedLock(REAL(file), out);
}
static int f_file_control(sqlite3_file *file, int op, void *arg) {
  return RM(file)->xFileControl(REAL(file), op, arg);
}
static int f_sector_size(sqlite3_file *file) { return RM(file)->xSectorSize(REAL(file)); }
static int f_device_chars(sqlite3_file *file) { return RM(file)->xDeviceCharacteristics(REAL(file)); }
static int f_shm_map(sqlite3_file *file, int pg, int pgsz, int extend, void volatile **out) {
  if (RM(file)->iVersion < 2 || !RM(file)->xShmMap)
    return SQLITE_IOERR_SHMMAP;
  if (pg > 0 && extend) { /* a new region of the WAL index: the disk must grow */
    int rc = fault_check((ffile *)file, OP_SHMGROW);
    if (rc != SQLITE_OK)
      return rc;
  }
  return RM(file)->xShmMap(REAL(file), pg, pgsz, extend, out);
}
static int f_shm_lock(sqlite3_file *file, int offset, int n, int flags) {
  if (RM(file)->iVersion < 2 || !RM(file)->xShmLock)
    return SQLITE_IOERR_SHMLOCK;
  if (flags & SQLITE_SHM_LOCK) { /* only acquisitions fail: an unlock always works */
    int rc = fault_check((ffile *)file, OP_SHMLOCK);
    if (rc != SQLITE_OK)
      return rc;
  }
  return RM(file)->xShmLock(REAL(file), offset, n, flags);
}
static void f_shm_barrier(sqlite3_file *file) {
  if (RM(file)->iVersion >= 2 && RM(file)->xShmBarrier)
    RM(file)->xShmBarrier(REAL(file));
}
static int f_shm_unmap(sqlite3_file *file, int del) {
  if (RM(file)->iVersion < 2 || !RM(file)->xShmUnmap)
    return SQLITE_OK;
  return RM(file)->xShmUnmap(REAL(file), del);
}
static int f_fetch(sqlite3_file *file, sqlite3_int64 off, int n, void **out) {
  if (RM(file)->iVersion < 3 || !RM(file)->xFetch) {
    *out = NULL;
    return SQLITE_OK;
  }
  return RM(file)->xFetch(REAL(file), off, n, out);
}
static int f_unfetch(sqlite3_file *file, sqlite3_int64 off, void *p) {
  if (RM(file)->iVersion < 3 || !RM(file)->xUnfetch)
    return SQLITE_OK;
  return RM(file)->xUnfetch(REAL(file), off, p);
}

static const sqlite3_io_methods f_io = {
    3,          f_close,       f_read,           f_write,        f_truncate,    f_sync,         f_file_size,
    f_lock,     f_unlock,      f_check_reserved, f_file_control, f_sector_size, f_device_chars, f_shm_map,
    f_shm_lock, f_shm_barrier, f_shm_unmap,      f_fetch,        f_unfetch,
};

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int v_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *file, int flags, int *out_flags) {
  ffile *f = (ffile *)file;
  sqlite3_vfs *rv = real_vfs(vfs);
  f->real = (sqlite3_file *)(void *)(f + 1);
  memset(f->real, 0, (size_t)rv->szOsFile);
  if (flags & SQLITE_OPEN_MAIN_DB)
    f->kind = F_MAIN;
  else if ((flags & SQLITE_OPEN_WAL) || (name && ends_with(name, "-wal")))
    f->kind = F_WAL;
  else
    f->kind = F_OTHER;
  int rc = rv->xOpen(rv, name, f->real, flags, out_flags);
  /* SQLite calls xClose whenever pMethods is set, even after a failed open. */
  f->base.pMethods = f->real->pMethods ? &f_io : NULL;
  return rc;
}
static int v_delete(sqlite3_vfs *v, const char *name, int sync_dir) {
  return real_vfs(v)->xDelete(real_vfs(v), name, sync_dir);
}
static int v_access(sqlite3_vfs *v, const char *name, int flags, int *out) {
  return real_vfs(v)->xAccess(real_vfs(v), name, flags, out);
}
static int v_full_pathname(sqlite3_vfs *v, const char *name, int n, char *out) {
  return real_vfs(v)->xFullPathname(real_vfs(v), name, n, out);
}
static void *v_dlopen(sqlite3_vfs *v, const char *name) { return real_vfs(v)->xDlOpen(real_vfs(v), name); }
static void v_dlerror(sqlite3_vfs *v, int n, char *msg) { real_vfs(v)->xDlError(real_vfs(v), n, msg); }
static void (*v_dlsym(sqlite3_vfs *v, void *h, const char *sym))(void) {
  return real_vfs(v)->xDlSym(real_vfs(v), h, sym);
}
static void v_dlclose(sqlite3_vfs *v, void *h) { real_vfs(v)->xDlClose(real_vfs(v), h); }
static int v_randomness(sqlite3_vfs *v, int n, char *out) {
  return real_vfs(v)->xRandomness(real_vfs(v), n, out);
}
static int v_sleep(sqlite3_vfs *v, int us) { return real_vfs(v)->xSleep(real_vfs(v), us); }
static int v_current_time(sqlite3_vfs *v, double *out) { return real_vfs(v)->xCurrentTime(real_vfs(v), out); }
static int v_last_error(sqlite3_vfs *v, int n, char *out) {
  return real_vfs(v)->xGetLastError ? real_vfs(v)->xGetLastError(real_vfs(v), n, out) : 0;
}
static int v_current_time64(sqlite3_vfs *v, sqlite3_int64 *out) {
  sqlite3_vfs *rv = real_vfs(v);
  if (rv->iVersion >= 2 && rv->xCurrentTimeInt64)
    return rv->xCurrentTimeInt64(rv, out);
  double d = 0;
  int rc = rv->xCurrentTime(rv, &d);
  *out = (sqlite3_int64)(d * 86400000.0);
  return rc;
}
static int v_set_syscall(sqlite3_vfs *v, const char *name, sqlite3_syscall_ptr p) {
  sqlite3_vfs *rv = real_vfs(v);
  return rv->iVersion >= 3 && rv->xSetSystemCall ? rv->xSetSystemCall(rv, name, p) : SQLITE_NOTFOUND;
}
static sqlite3_syscall_ptr v_get_syscall(sqlite3_vfs *v, const char *name) {
  sqlite3_vfs *rv = real_vfs(v);
  return rv->iVersion >= 3 && rv->xGetSystemCall ? rv->xGetSystemCall(rv, name) : NULL;
}
static const char *v_next_syscall(sqlite3_vfs *v, const char *name) {
  sqlite3_vfs *rv = real_vfs(v);
  return rv->iVersion >= 3 && rv->xNextSystemCall ? rv->xNextSystemCall(rv, name) : NULL;
}

static sqlite3_vfs faulty_vfs;

static void faulty_register(void) {
  sqlite3_vfs *rv = sqlite3_vfs_find(NULL);
  assert_non_null(rv);
  faulty_vfs = (sqlite3_vfs){
      .iVersion = 3,
      .szOsFile = (int)sizeof(ffile) + rv->szOsFile,
      .mxPathname = rv->mxPathname,
      .zName = "faulty",
      .pAppData = rv,
      .xOpen = v_open,
      .xDelete = v_delete,
      .xAccess = v_access,
      .xFullPathname = v_full_pathname,
      .xDlOpen = v_dlopen,
      .xDlError = v_dlerror,
      .xDlSym = v_dlsym,
      .xDlClose = v_dlclose,
      .xRandomness = v_randomness,
      .xSleep = v_sleep,
      .xCurrentTime = v_current_time,
      .xGetLastError = v_last_error,
      .xCurrentTimeInt64 = v_current_time64,
      .xSetSystemCall = v_set_syscall,
      .xGetSystemCall = v_get_syscall,
      .xNextSystemCall = v_next_syscall,
  };
  assert_int_equal(sqlite3_vfs_register(&faulty_vfs, 0), SQLITE_OK);
  assert_true(sqlite3_vfs_find(NULL) == rv); /* not made the default */
}

static int group_setup(void **state) {
  (void)state;
  faulty_register();
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  fault_clear();
  sqlite3_vfs_unregister(&faulty_vfs);
  return 0;
}

/* ---- Schema, commands, checks --------------------------------------------- */

static const char *const migrations[] = {
    "CREATE TABLE items(k TEXT PRIMARY KEY, pad BLOB NOT NULL);",
};

static void fault_options(lith_options *opt) {
  lith_options_default(opt);
  opt->migrations = migrations;
  opt->n_migrations = 1;
  opt->readers = 1;
  opt->busy_timeout_ms = 2000;
  opt->cache_size_kib = 2048;
  opt->vfs = "faulty";
}

/* One row, or (n > 1) n rows key#0..key#n-1, each with `pad` random bytes. */
typedef struct item {
  char key[32];
  int pad;
  int n;
  _Atomic int runs;
  int inner_rc; /* the first error a statement of this command met */
} item;

static int item_cmd(lith_tx *tx, void *arg) {
  item *it = arg;
  atomic_fetch_add(&it->runs, 1);
  it->inner_rc = LITH_OK;
  int n = it->n > 0 ? it->n : 1;
  for (int i = 0; i < n; i++) {
    char key[48];
    if (it->n > 1)
      snprintf(key, sizeof key, "%s#%d", it->key, i);
    else
      snprintf(key, sizeof key, "%s", it->key);
    int rc = lith_tx_exec(tx, "INSERT INTO items(k, pad) VALUES (?, randomblob(?))", "si", key, it->pad);
    if (rc != LITH_OK) {
      it->inner_rc = rc;
      return rc;
    }
  }
  return LITH_OK;
}

static void item_init(item *it, const char *key, int pad, int n) {
  memset(it, 0, sizeof *it);
  snprintf(it->key, sizeof it->key, "%s", key);
  it->pad = pad;
  it->n = n;
  atomic_init(&it->runs, 0);
}

/* lith_do one row `prefix-i` for i in [0, n); asserts LITH_OK. */
static void put_rows(lith *db, const char *prefix, int n) {
  for (int i = 0; i < n; i++) {
    item it;
    char key[32];
    snprintf(key, sizeof key, "%s-%d", prefix, i);
    item_init(&it, key, 100, 1);
    int rc = lith_do(db, item_cmd, &it);
    if (rc != LITH_OK)
      fail_msg("lith_do(%s): %s: %s", key, lith_errstr(rc), lith_errmsg(db));
  }
}

static int64_t count_prefix(const char *prefix) {
  char sql[256];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM items WHERE k GLOB '%s-*'", prefix);
  return t_query_int(DB, sql);
}

typedef struct count_arg {
  const char *prefix;
  int64_t n;
} count_arg;

static int count_reader(lith_rx *rx, void *arg) {
  count_arg *c = arg;
  char pattern[64];
  snprintf(pattern, sizeof pattern, "%s-*", c->prefix);
  return lith_rx_int64(rx, &c->n, "SELECT count(*) FROM items WHERE k GLOB ?", "s", pattern);
}

/* The count a reader of the live handle sees. */
static int64_t read_count_prefix(lith *db, const char *prefix) {
  count_arg c = {prefix, -1};
  assert_int_equal(lith_read(db, count_reader, &c), LITH_OK);
  return c.n;
}

static void assert_failed_with(const lith_request *r, int expect, const char *text) {
  if (r->rc != expect)
    fail_msg("expected %s, got %s (%d): \"%s\"", lith_errstr(expect), lith_errstr(r->rc), r->rc, r->errmsg);
  if (!r->errmsg[0])
    fail_msg("%s without a message", lith_errstr(expect));
  if (text && !strstr(r->errmsg, text))
    fail_msg("message \"%s\" does not mention \"%s\"", r->errmsg, text);
}

/* ---- COMMIT fails ------------------------------------------------------------ */

enum { NBAD = 8 };

typedef struct commit_case {
  int op, sqlite_rc, synchronous, checkpoint;
  long after;
  int expect;
  const char *text;
} commit_case;

/* A gated batch of NBAD good commands meets the armed fault at COMMIT.
 * Returns the number of "bad" rows in the file after lith_close. */
static int64_t commit_fails(const commit_case *c, int recover) {
  lith_options opt;
  fault_options(&opt);
  opt.synchronous = c->synchronous;
  opt.checkpoint = c->checkpoint;
  lith *db = t_open_fresh(DB, &opt);

  /* earlier batches: singles and a gated batch of 4 */
  put_rows(db, "pre", 5);
  {
    t_gate gate;
    t_async done = {0};
    lith_request r[4];
    item it[4];
    t_gate_close(db, &gate);
    for (int i = 0; i < 4; i++) {
      char key[32];
      snprintf(key, sizeof key, "pre-g%d", i);
      item_init(&it[i], key, 500, 1);
      t_submit(db, &r[i], item_cmd, &it[i], &done);
    }
    t_gate_open(&gate);
    t_async_wait(&done, 4);
    for (int i = 0; i < 4; i++)
      assert_int_equal(r[i].rc, LITH_OK);
  }

  lith_stats before, after;
  t_gate gate;
  t_async done = {0};
  lith_request r[NBAD];
  item it[NBAD];
  t_gate_close(db, &gate);
  lith_stats_get(db, &before);
  for (int i = 0; i < NBAD; i++) {
    char key[32];
    snprintf(key, sizeof key, "bad-%d", i);
    item_init(&it[i], key, 2000, 1); /* ~16 KiB in all: several WAL frames */
    t_submit(db, &r[i], item_cmd, &it[i], &done);
  }
  /* The gate's own transaction wrote nothing: its COMMIT writes no frame. */
  fault_arm(c->op, F_WAL, c->sqlite_rc, c->after);
  t_gate_open(&gate);
  t_async_wait(&done, NBAD);
  long fired = fault_fired();
  fault_clear();
  lith_stats_get(db, &after);

  assert_true(fired >= 1);
  assert_int_equal(gate.req.rc, LITH_OK);
  for (int i = 0; i < NBAD; i++) {
    assert_failed_with(&r[i], c->expect, c->text);
    assert_int_equal(atomic_load(&it[i].runs), 1); /* environmental: not run again */
    assert_int_equal(it[i].inner_rc, LITH_OK);     /* the commands themselves were fine */
  }
  assert_int_equal(after.commands - before.commands, NBAD + 1); /* + the gate */
  assert_int_equal(after.batches - before.batches, 2);
  assert_int_equal(after.failed - before.failed, NBAD);
  assert_int_equal(after.retried - before.retried, 0);
  assert_int_equal(after.busy - before.busy, 0);

  /* a reader of the live handle sees none of the batch */
  assert_int_equal(read_count_prefix(db, "bad"), 0);
  assert_int_equal(read_count_prefix(db, "pre"), 9);

  if (recover) {
    /* the fault is gone: the writer works again */
    put_rows(db, "post", 5);
    assert_int_equal(read_count_prefix(db, "post"), 5);
    lith_stats st;
    lith_stats_get(db, &st);
    assert_int_equal(st.failed, after.failed); /* no more failures */
  }
  assert_int_equal(lith_close(db), LITH_OK);

  assert_int_equal(count_prefix("pre"), 9);
  assert_int_equal(count_prefix("post"), recover ? 5 : 0);
  t_assert_integrity(DB);
  return count_prefix("bad");
}

static void test_commit_disk_full(void **state) {
  (void)state;
  commit_case c = {OP_WRITE, SQLITE_FULL, LITH_SYNC_NORMAL, LITH_CHECKPOINT_WRITER, 0, LITH_DISKFULL, "full"};
  assert_int_equal(commit_fails(&c, 1), 0);
}

static void test_commit_disk_full_part_way(void **state) {
  (void)state;
  /* the first frames of the commit reach the WAL, then the disk is full */
  commit_case c = {OP_WRITE, SQLITE_FULL, LITH_SYNC_NORMAL, LITH_CHECKPOINT_WRITER, 3, LITH_DISKFULL, "full"};
  assert_int_equal(commit_fails(&c, 1), 0);
}

static void test_commit_write_ioerr(void **state) {
  (void)state;
  commit_case c = {OP_WRITE, SQLITE_IOERR_WRITE, LITH_SYNC_FULL, LITH_CHECKPOINT_WRITER,
                   2,        LITH_IOERR,         "I/O"};
  assert_int_equal(commit_fails(&c, 1), 0);
}

static void test_commit_fsync_fails(void **state) {
  (void)state;
  commit_case c = {OP_SYNC, SQLITE_IOERR_FSYNC, LITH_SYNC_FULL, LITH_CHECKPOINT_WRITER, 0, LITH_IOERR, "I/O"};
  int64_t bad = commit_fails(&c, 1);
  if (bad != 0)
    print_message("NOTE fsync failure, clean close: %lld of %d rows reported LITH_IOERR are in the file\n",
                  (long long)bad, NBAD);
  /* The WAL is checkpointed up to the last good commit and truncated. */
  assert_int_equal(bad, 0);
}

static void test_commit_fsync_fails_then_clean_close(void **state) {
  (void)state;
  /* No write after the failure: the close's TRUNCATE checkpoint copies up
   * to the last good commit and empties the WAL, frames and all. */
  commit_case c = {OP_SYNC, SQLITE_IOERR_FSYNC, LITH_SYNC_FULL, LITH_CHECKPOINT_WRITER, 0, LITH_IOERR, "I/O"};
  int64_t bad = commit_fails(&c, 0);
  if (bad != 0)
    print_message(
        "NOTE fsync failure, no write after, clean close: %lld of %d rows reported LITH_IOERR are in "
        "the file\n",
        (long long)bad, NBAD);
  assert_int_equal(bad, 0);
}

static void test_commit_fsync_fails_wal_kept(void **state) {
  (void)state;
  /* As after a crash right after the failure: the WAL stays (EXTERNAL mode
   * never checkpoints), the next open recovers the WAL from the file. */
  commit_case c = {OP_SYNC, SQLITE_IOERR_FSYNC, LITH_SYNC_FULL, LITH_CHECKPOINT_EXTERNAL,
                   0,       LITH_IOERR,         "I/O"};
  int64_t bad = commit_fails(&c, 0);
  print_message(
      "NOTE fsync failure, WAL kept, reopened: %lld of %d rows reported LITH_IOERR are in the file\n",
      (long long)bad, NBAD);
  assert_true(bad == 0 || bad == NBAD); /* all or nothing, whatever SQLite finds */
}

/* ---- The disk fails inside a command ----------------------------------------- */

static void in_command_case(int sqlite_rc, long after, int expect) {
  lith_options opt;
  fault_options(&opt);
  opt.cache_size_kib = 64; /* 16 pages of 4 KiB: a big command spills to the WAL */
  lith *db = t_open_fresh(DB, &opt);
  put_rows(db, "pre", 3);

  enum { N = 5, BIG = 2 };
  lith_stats before, after_st;
  t_gate gate;
  t_async done = {0};
  lith_request r[N];
  item it[N];
  static const char *const keys[N] = {"bad-a", "bad-b", "bad-big", "bad-c", "bad-d"};
  t_gate_close(db, &gate);
  lith_stats_get(db, &before);
  for (int i = 0; i < N; i++) {
    if (i == BIG)
      item_init(&it[i], keys[i], 2000, 200); /* ~400 KiB */
    else
      item_init(&it[i], keys[i], 100, 1);
    t_submit(db, &r[i], item_cmd, &it[i], &done);
  }
  fault_arm(OP_WRITE, F_WAL, sqlite_rc, after);
  t_gate_open(&gate);
  t_async_wait(&done, N);
  long fired = fault_fired();
  fault_clear();
  lith_stats_get(db, &after_st);

  assert_true(fired >= 1);
  /* the culprit met the error in its own statement, while it ran */
  assert_int_equal(it[BIG].inner_rc, expect);
  assert_failed_with(&r[BIG], expect, NULL);
  for (int i = 0; i < N; i++) {
    assert_failed_with(&r[i], expect, NULL);
    int runs = atomic_load(&it[i].runs);
    if (i < BIG)
      assert_int_equal(runs, 1); /* ran, rolled back with the transaction, not retried */
    else if (i > BIG)
      assert_int_equal(runs, 0); /* never ran */
    else
      assert_int_equal(runs, 1);
  }
  assert_int_equal(after_st.failed - before.failed, N);
  assert_int_equal(after_st.retried - before.retried, 0);
  assert_int_equal(after_st.batches - before.batches, 2);
  assert_int_equal(read_count_prefix(db, "bad"), 0);

  /* recovery: small commands, and the same big one, succeed */
  put_rows(db, "post", 3);
  item big;
  item_init(&big, "post-big", 2000, 200);
  assert_int_equal(lith_do(db, item_cmd, &big), LITH_OK);
  assert_int_equal(lith_close(db), LITH_OK);

  assert_int_equal(count_prefix("pre"), 3);
  assert_int_equal(count_prefix("bad"), 0);
  assert_int_equal(count_prefix("post"), 3 + 200);
  t_assert_integrity(DB);
}

static void test_disk_full_inside_command(void **state) {
  (void)state;
  in_command_case(SQLITE_FULL, 0, LITH_DISKFULL);
}

static void test_write_ioerr_inside_command(void **state) {
  (void)state;
  in_command_case(SQLITE_IOERR_WRITE, 5, LITH_IOERR);
}

/* ---- A mid-command commit of an alone command meets a full disk ----------------- */

struct mid {
  int rc_first, rc_full, rc_after;
  uint64_t commits_at_full, commits_after;
  lith *db;
};

static int put_key(lith_tx *tx, const char *k) {
  return lith_tx_exec(tx, "INSERT INTO items(k, pad) VALUES (?, zeroblob(20000))", "s", k);
}

static int mid_cmd(lith_tx *tx, void *arg) {
  struct mid *m = arg;
  put_key(tx, "kept-0");
  m->rc_first = lith_tx_commit(tx);
  put_key(tx, "bad-0");
  put_key(tx, "bad-1");
  fault_arm(OP_WRITE, F_WAL, SQLITE_FULL, 0); /* the commit's frames find the disk full */
  uint64_t before = lith_commit_count(m->db);
  m->rc_full = lith_tx_commit(tx);
  fault_clear();
  m->commits_at_full = lith_commit_count(m->db) - before;
  put_key(tx, "post-0");
  m->rc_after = lith_tx_commit(tx);
  m->commits_after = lith_commit_count(m->db) - before;
  return put_key(tx, "post-1"); /* the command's own commit */
}

static void test_mid_command_commit_disk_full(void **state) {
  (void)state;
  lith_options opt;
  fault_options(&opt);
  lith *db = t_open_fresh(DB, &opt);
  put_rows(db, "pre", 3);
  struct mid m = {-1, -1, -1, 0, 0, db};
  lith_request r;
  t_async done = {0};
  t_submit_alone(db, &r, mid_cmd, &m, &done);
  t_async_wait(&done, 1);
  assert_int_equal(m.rc_first, LITH_OK);
  assert_int_equal(m.rc_full, LITH_DISKFULL);
  assert_int_equal(m.commits_at_full, 0); /* not counted: nothing committed */
  assert_int_equal(m.rc_after, LITH_ABORTED);
  assert_int_equal(m.commits_after, 0);
  assert_true(r.rc != LITH_OK);
  assert_int_equal(read_count_prefix(db, "bad"), 0);
  put_rows(db, "later", 2); /* the writer goes on */
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(count_prefix("pre"), 3);
  assert_int_equal(count_prefix("kept"), 1);
  assert_int_equal(count_prefix("bad"), 0);
  assert_int_equal(count_prefix("post"), 0);
  assert_int_equal(count_prefix("later"), 2);
  t_assert_integrity(DB);
}

/* ---- BEGIN fails --------------------------------------------------------------- */

static void test_begin_ioerr(void **state) {
  (void)state;
  lith_options opt;
  fault_options(&opt);
  lith *db = t_open_fresh(DB, &opt);
  put_rows(db, "pre", 3);

  enum { N = 4 };
  lith_stats before, after;
  t_gate gate;
  t_async done = {0};
  lith_request r[N];
  item it[N];
  t_gate_close(db, &gate);
  lith_stats_get(db, &before);
  for (int i = 0; i < N; i++) {
    char key[32];
    snprintf(key, sizeof key, "bad-%d", i);
    item_init(&it[i], key, 100, 1);
    t_submit(db, &r[i], item_cmd, &it[i], &done);
  }
  /* The gate's COMMIT only unlocks; the next BEGIN's read lock fails. */
  fault_arm(OP_SHMLOCK, F_MAIN, SQLITE_IOERR_SHMLOCK, 0);
  t_gate_open(&gate);
  t_async_wait(&done, N);
  long fired = fault_fired();
  fault_clear();
  lith_stats_get(db, &after);

  assert_true(fired >= 1);
  assert_int_equal(gate.req.rc, LITH_OK);
  for (int i = 0; i < N; i++) {
    assert_failed_with(&r[i], LITH_IOERR, "BEGIN");
    assert_int_equal(atomic_load(&it[i].runs), 0);
  }
  assert_int_equal(after.failed - before.failed, N);
  assert_int_equal(after.busy - before.busy, 0); /* an I/O error is not another writer */

  put_rows(db, "post", 3);
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(count_prefix("pre"), 3);
  assert_int_equal(count_prefix("bad"), 0);
  assert_int_equal(count_prefix("post"), 3);
  t_assert_integrity(DB);
}

/* The WAL index (-shm) cannot grow at COMMIT: the disk is full there too
 * (the soak met it after a restart with a full disk). A commit whose
 * frames pass the first 32 KiB region of the index needs a second one. The
 * batch gets LITH_DISKFULL (lithd: 507), not an I/O error (500). */
static void test_wal_index_cannot_grow(void **state) {
  (void)state;
  lith_options opt;
  fault_options(&opt);
  opt.checkpoint = LITH_CHECKPOINT_EXTERNAL; /* no checkpoint: the WAL only grows */
  lith *db = t_open_fresh(DB, &opt);
  item pre;
  item_init(&pre, "pre-x", 3000, 3800); /* ~3,850 frames: the first region holds 4,062 */
  assert_int_equal(lith_do(db, item_cmd, &pre), LITH_OK);

  enum { N = 4 };
  t_gate gate;
  t_async done = {0};
  lith_request r[N];
  item it[N];
  t_gate_close(db, &gate);
  for (int i = 0; i < N; i++) {
    char key[32];
    snprintf(key, sizeof key, "bad-%d", i);
    item_init(&it[i], key, 3000, 100);
    t_submit(db, &r[i], item_cmd, &it[i], &done);
  }
  fault_arm(OP_SHMGROW, F_MAIN, SQLITE_IOERR_SHMSIZE, 0);
  t_gate_open(&gate);
  t_async_wait(&done, N);
  long fired = fault_fired();
  fault_clear();
  assert_true(fired >= 1);
  for (int i = 0; i < N; i++)
    assert_failed_with(&r[i], LITH_DISKFULL, NULL);
  assert_int_equal(read_count_prefix(db, "bad"), 0);
  put_rows(db, "post", 3); /* room again: the writer goes on */
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(count_prefix("pre"), 3800);
  assert_int_equal(count_prefix("bad"), 0);
  assert_int_equal(count_prefix("post"), 3);
  t_assert_integrity(DB);
}

/* ---- A checkpoint fails ----------------------------------------------------------- */

static void test_checkpoint_failure_never_fails_a_commit(void **state) {
  (void)state;
  lith_options opt;
  fault_options(&opt);
  opt.checkpoint = LITH_CHECKPOINT_WRITER;
  opt.checkpoint_pages = 2; /* after almost every batch */
  lith *db = t_open_fresh(DB, &opt);
  put_rows(db, "pre", 3);
  fault_arm(OP_WRITE, F_MAIN, SQLITE_FULL, 0); /* only checkpoints write the database file */
  put_rows(db, "mid", 10);                     /* asserts LITH_OK for each */
  /* checkpoints run in the background (WRITER mode): give one time to fail */
  int more = 0;
  for (; more < 2000 && fault_fired() == 0; more++) {
    char prefix[32];
    usleep(1000);
    snprintf(prefix, sizeof prefix, "more-%d", more);
    put_rows(db, prefix, 1);
  }
  long fired = fault_fired();
  fault_clear();
  assert_true(fired >= 1);
  assert_int_equal(read_count_prefix(db, "mid"), 10);
  put_rows(db, "post", 3);
  lith_stats st;
  lith_stats_get(db, &st);
  assert_true(st.checkpoint_errors >= 1); /* counted, and nothing else failed */
  assert_int_equal(st.failed, 0);
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(count_prefix("pre"), 3);
  assert_int_equal(count_prefix("mid"), 10);
  assert_int_equal(count_prefix("post"), 3);
  assert_int_equal(count_prefix("more"), more);
  t_assert_integrity(DB);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_commit_disk_full),
      cmocka_unit_test(test_commit_disk_full_part_way),
      cmocka_unit_test(test_commit_write_ioerr),
      cmocka_unit_test(test_commit_fsync_fails),
      cmocka_unit_test(test_commit_fsync_fails_then_clean_close),
      cmocka_unit_test(test_commit_fsync_fails_wal_kept),
      cmocka_unit_test(test_disk_full_inside_command),
      cmocka_unit_test(test_write_ioerr_inside_command),
      cmocka_unit_test(test_begin_ioerr),
      cmocka_unit_test(test_mid_command_commit_disk_full),
      cmocka_unit_test(test_checkpoint_failure_never_fails_a_commit),
      cmocka_unit_test(test_wal_index_cannot_grow),
  };
  return cmocka_run_group_tests_name("writer/faults", tests, group_setup, group_teardown);
}
