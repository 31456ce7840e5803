/*
 * Power loss: what an answered command survives when the power fails in
 * the middle of any fsync of a run.
 *
 * The binary re-executes itself (/proc/self/exe --child ...) with a pipe on
 * fd 3. The child opens lith on a copy of a ready database through the
 * "lith_crash" VFS (sqlite/test/crashvfs.c), armed to lose power inside its
 * N-th xSync: the files are left as a disk may hold them (unsynced writes
 * kept, dropped or torn at 512-byte sectors, the -shm gone, a WAL whose
 * directory was never synced perhaps gone) and the child exits. Its
 * workload: three threads looping lith_do and one submitting bursts of
 * async requests; each command inserts its row (id, batch) and bumps
 * batches(b).n for its batch, where b counts the commits of the run (the
 * on_commit hook counts them; every command that succeeds touches its id as
 * a topic, so every commit with rows is counted). Some commands fail alone
 * (their own error, a constraint) and some make SQLite roll the transaction
 * back (INSERT OR ROLLBACK), which splits the batch. The child writes to
 * the pipe: from the hook, each committed batch's members then the batch
 * (before any of them is answered); from the producers, each answer with
 * its batch, only after it came back. So the parent knows every batch whose
 * COMMIT returned — all but the one in flight at the crash.
 *
 * A dry run (never crashes) counts the syncs of a run, N_total; then one
 * child per crash point N in 1..N_total: FULL on a device without
 * POWERSAFE_OVERWRITE and on a powersafe one, NORMAL on a powersafe one
 * (why not without: test_powerloss_normal). After each, with plain SQLite:
 *   - PRAGMA integrity_check is ok; the -shm is gone;
 *   - no command that failed left a row; every batch present is whole
 *     (its rows number batches.n) and the batches present are 1..K, a prefix
 *     of the commits; K is at most one past the last batch reported (the one
 *     whose COMMIT was under way); a reported batch <= K has exactly its
 *     reported members, one > K none; an answered command is present iff its
 *     batch <= K;
 *   - FULL: K >= the last batch reported, so every answered command is
 *     there (the hook runs after COMMIT returned, before the answers).
 * And lith opens the file and takes a write: after the check, or at odd
 * points before it (so lith's open recovers what the crash left).
 *
 * Coverage: every N of the dry run's count, unless LITH_TEST_SCALE=d > 1
 * (the sanitizer runs): then every d-th N, from an offset the seed picks.
 * Thread timing differs from run to run, so the N-th sync is not the same
 * event in every run, and a run may sync fewer times than the dry run (it
 * then finishes and is checked as a clean run). LITH_POWERLOSS_SEED fixes
 * the crash's choices (and the offset); timing still varies. After a
 * failure the files as the crash left them are pl_crash.db(-wal) in the
 * scratch directory; LITH_POWERLOSS_TESTS=<name> runs one test,
 * LITH_CRASHVFS_VERBOSE=1|2 has each crash say what it did.
 *
 * The checker is checked too: the same sweep against a VFS that lies —
 * xSync that makes nothing durable; SQLITE_IOCAP_POWERSAFE_OVERWRITE
 * reported while torn sectors turn to garbage — must find a violation (it
 * stops at the first; seen: the lying xSync at about 97% of the points,
 * the lying PSOW at about 11%, so a whole sweep without one is ~1e-5).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../sqlite/test/crashvfs.h"
#include "common.h"

#define CHILD_FD 3
#define NPROD 3     /* lith_do threads */
#define PER_PROD 32 /* commands each */
#define NBURST 4    /* async bursts */
#define BURST 8     /* requests a burst */
#define NIDS (NPROD * PER_PROD + NBURST * BURST)
#define PAD 300 /* random bytes a row */
#define CKPT_PAGES 12
#define CHILD_TIMEOUT_MS 60000
#define AFTER_ID 1000000 /* the row lith writes after the crash */
#define STR_(x) #x
#define STR(x) STR_(x)

static const char *const pl_migrations[] = {
    "CREATE TABLE rows(id INTEGER PRIMARY KEY, batch INTEGER NOT NULL, pad BLOB NOT NULL);"
    "CREATE INDEX rows_batch ON rows(batch);"
    "CREATE TABLE batches(b INTEGER PRIMARY KEY, n INTEGER NOT NULL);"
    "CREATE TABLE uniq(k INTEGER PRIMARY KEY);"
    "INSERT INTO uniq(k) VALUES (0);",
};

/* What a command does; fixed by its id, so the parent knows it too. */
enum { K_OK, K_FAIL_USER, K_FAIL_CONSTRAINT, K_CULPRIT };

static int kind_of(int64_t id) {
  if (id % 13 == 5)
    return K_FAIL_USER;
  if (id % 19 == 7)
    return K_FAIL_CONSTRAINT;
  if (id % 31 == 11)
    return K_CULPRIT; /* SQLite rolls back the whole transaction */
  return K_OK;
}

static int expected_rc(int kind) {
  return kind == K_OK ? LITH_OK : kind == K_FAIL_USER ? LITH_USER : LITH_CONSTRAINT;
}

/* One record on the pipe: 32 bytes, one write() each (atomic on a pipe). */
enum { REC_READY = 1, REC_ANS, REC_MEMBER, REC_BATCH, REC_DONE };
typedef struct rec {
  int64_t tag, a, b, c; /* ANS: id, rc, batch. MEMBER: batch, id. BATCH: batch, members. DONE: syncs */
} rec;

static void pl_options(lith_options *opt, int sync) {
  lith_options_default(opt);
  opt->migrations = pl_migrations;
  opt->n_migrations = 1;
  opt->synchronous = sync;
  opt->checkpoint_pages = CKPT_PAGES;
  opt->readers = 1;
  opt->max_batch = 16;
  opt->cache_size_kib = 1024;
}

/* ==== The child ========================================================= */

static lith *c_db;
static int64_t c_batch; /* commits counted by the hook; the writer thread's alone */
static _Atomic int c_async_done;

static void child_die(const char *what, int rc) {
  fprintf(stderr, "powerloss child: %s: %s: %s\n", what, lith_errstr(rc), lith_errmsg(NULL));
  _exit(4);
}

static void child_send(int64_t tag, int64_t a, int64_t b, int64_t c) {
  rec r = {tag, a, b, c};
  ssize_t n;
  do
    n = write(CHILD_FD, &r, sizeof r);
  while (n < 0 && errno == EINTR);
  if (n != (ssize_t)sizeof r)
    _exit(5);
}

static void on_commit(void *ctx, const int64_t *topics, int n) {
  (void)ctx;
  c_batch++;
  for (int i = 0; i < n; i++)
    child_send(REC_MEMBER, c_batch, topics[i], 0);
  child_send(REC_BATCH, c_batch, n, 0); /* last: a batch cut short by the crash is not reported */
}

typedef struct cmd_arg {
  int64_t id, batch;
} cmd_arg;

static int pl_cmd(lith_tx *tx, void *arg) {
  cmd_arg *a = arg;
  int rc;
  a->batch = c_batch + 1; /* the commit this run belongs to, if it commits */
  if ((rc = lith_tx_exec(tx, "INSERT INTO rows(id, batch, pad) VALUES (?, ?, randomblob(?))", "IIi", a->id,
                         a->batch, PAD)) != LITH_OK)
    return rc;
  if ((rc = lith_tx_exec(tx, "INSERT INTO batches(b, n) VALUES (?, 1) ON CONFLICT(b) DO UPDATE SET n = n + 1",
                         "I", a->batch)) != LITH_OK)
    return rc;
  switch (kind_of(a->id)) {
  case K_FAIL_USER: return lith_tx_error(tx, LITH_USER, "command %lld fails alone", (long long)a->id);
  case K_FAIL_CONSTRAINT: return lith_tx_exec(tx, "INSERT INTO uniq(k) VALUES (0)", NULL);
  case K_CULPRIT: return lith_tx_exec(tx, "INSERT OR ROLLBACK INTO uniq(k) VALUES (0)", NULL);
  default: break;
  }
  lith_tx_touch(tx, a->id);
  return LITH_OK;
}

static void answered(int64_t id, int rc, int64_t batch) {
  if (rc != expected_rc(kind_of(id))) {
    fprintf(stderr, "powerloss child: command %lld: %s, expected %s: %s\n", (long long)id, lith_errstr(rc),
            lith_errstr(expected_rc(kind_of(id))), lith_errmsg(c_db));
    _exit(6);
  }
  child_send(REC_ANS, id, rc, batch);
}

static void *producer_main(void *arg) {
  int64_t first = (int64_t)(intptr_t)arg;
  for (int64_t id = first; id < first + PER_PROD; id++) {
    cmd_arg a = {id, 0};
    int rc = lith_do(c_db, pl_cmd, &a); /* before reading a.batch */
    answered(id, rc, a.batch);
  }
  return NULL;
}

static void async_done(lith_request *req) {
  const cmd_arg *a = req->arg;
  answered(a->id, req->rc, a->batch);
  atomic_fetch_add(&c_async_done, 1);
}

static void *async_main(void *arg) {
  (void)arg;
  lith_request reqs[BURST];
  cmd_arg args[BURST];
  for (int b = 0; b < NBURST; b++) {
    atomic_store(&c_async_done, 0);
    for (int i = 0; i < BURST; i++) {
      args[i] = (cmd_arg){1 + NPROD * PER_PROD + b * BURST + i, 0};
      memset(&reqs[i], 0, sizeof reqs[i]);
      reqs[i].fn = pl_cmd;
      reqs[i].arg = &args[i];
      reqs[i].done = async_done;
      int rc = lith_submit(c_db, &reqs[i]);
      if (rc != LITH_OK)
        child_die("lith_submit", rc);
    }
    while (atomic_load(&c_async_done) < BURST)
      usleep(200);
  }
  return NULL;
}

/* argv: --child db sync crash_at seed flags (T_CRASHVFS_*) */
static int child_main(int argc, char **argv) {
  if (argc != 7)
    return 2;
  const char *db = argv[2];
  int sync = atoi(argv[3]), crash_at = atoi(argv[4]), flags = atoi(argv[6]);
  uint64_t seed = strtoull(argv[5], NULL, 0);
  if (t_crashvfs_register() != SQLITE_OK)
    return 3;
  t_crashvfs_arm(seed, crash_at, flags);
  lith_options opt;
  pl_options(&opt, sync);
  opt.vfs = T_CRASHVFS_NAME;
  opt.on_commit = on_commit;
  int rc = lith_open(db, &opt, &c_db);
  if (rc != LITH_OK)
    child_die("lith_open", rc);
  child_send(REC_READY, 0, 0, 0);
  pthread_t th[NPROD + 1];
  for (int i = 0; i < NPROD; i++)
    if (pthread_create(&th[i], NULL, producer_main, (void *)(intptr_t)(1 + i * PER_PROD)) != 0)
      _exit(7);
  if (pthread_create(&th[NPROD], NULL, async_main, NULL) != 0)
    _exit(7);
  for (int i = 0; i <= NPROD; i++)
    pthread_join(th[i], NULL);
  if ((rc = lith_close(c_db)) != LITH_OK)
    child_die("lith_close", rc);
  child_send(REC_DONE, t_crashvfs_syncs(), 0, 0);
  return 0;
}

/* The VFS alone (test_vfs_model): argv: --vfs-child seed flags. In the current
 * directory: m.db (the database, its -shm made by hand), m.db-wal written
 * and synced (which syncs the directory too), then n.db-wal created, and
 * unsynced writes to both WALs; the power fails in the next sync. */
enum { M_SECTORS = 8 };

static unsigned char m_byte(int which, int64_t off) {
  return (unsigned char)(which * 37 + (off / T_CRASHVFS_SECTOR) * 11 + 1);
}

static void m_fill(unsigned char *buf, int which, int64_t off, int n) {
  for (int i = 0; i < n; i++)
    buf[i] = m_byte(which, off + i);
}

static sqlite3_file *m_open(sqlite3_vfs *vfs, const char *name, int type) {
  static char names[3][512]; /* SQLite keeps the name while the file is open */
  static int used;
  char *full = names[used++];
  memset(full, 0, sizeof names[0]); /* ends in two NULs, as SQLite passes names */
  sqlite3_file *f = calloc(1, (size_t)vfs->szOsFile);
  int out = 0;
  int rc = SQLITE_NOMEM;
  if (!f || (rc = vfs->xFullPathname(vfs, name, (int)sizeof names[0] - 2, full)) != SQLITE_OK ||
      (rc = vfs->xOpen(vfs, full, f, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | type, &out)) != SQLITE_OK) {
    fprintf(stderr, "vfs child: open %s: %d\n", name, rc);
    _exit(11);
  }
  return f;
}

static void m_write(sqlite3_file *f, int which, int64_t off, int n) {
  unsigned char buf[4096];
  m_fill(buf, which, off, n);
  if (f->pMethods->xWrite(f, buf, n, off) != SQLITE_OK)
    _exit(12);
}

static int vfs_child_main(int argc, char **argv) {
  if (argc != 4 || t_crashvfs_register() != SQLITE_OK)
    return 2;
  uint64_t seed = strtoull(argv[2], NULL, 0);
  int flags = atoi(argv[3]);
  sqlite3_vfs *vfs = sqlite3_vfs_find(T_CRASHVFS_NAME);
  t_crashvfs_arm(seed, 0, flags);
  sqlite3_file *db = m_open(vfs, "m.db", SQLITE_OPEN_MAIN_DB);
  sqlite3_file *wal = m_open(vfs, "m.db-wal", SQLITE_OPEN_WAL);
  m_write(wal, 0, 0, M_SECTORS * T_CRASHVFS_SECTOR);              /* A */
  if (wal->pMethods->xSync(wal, SQLITE_SYNC_NORMAL) != SQLITE_OK) /* A durable, and the directory */
    return 13;
  int fd = open("n.db", O_WRONLY | O_CREAT | O_CLOEXEC, 0600); /* the unix VFS reads its mode for the WAL's */
  if (fd < 0)
    return 14;
  close(fd);
  sqlite3_file *other = m_open(vfs, "n.db-wal", SQLITE_OPEN_WAL);
  m_write(other, 3, 0, T_CRASHVFS_SECTOR);
  m_write(wal, 1, 2 * T_CRASHVFS_SECTOR, 2 * T_CRASHVFS_SECTOR);         /* B: sectors 2-3 whole */
  m_write(wal, 2, 5 * T_CRASHVFS_SECTOR + 100, 100);                     /* C: part of sector 5 */
  m_write(wal, 4, M_SECTORS * T_CRASHVFS_SECTOR, 2 * T_CRASHVFS_SECTOR); /* D: appended */
  fd = open("m.db-shm", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0)
    return 14;
  close(fd);
  t_crashvfs_arm(seed, 1, flags);
  wal->pMethods->xSync(wal, SQLITE_SYNC_NORMAL); /* never returns */
  (void)db;
  return 15;
}

/* ==== The parent ======================================================== */

static char *g_argv0;
static pid_t g_child = -1; /* killed by the teardown if a check failed */

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t pl_seed(void) {
  static uint64_t seed;
  if (!seed) {
    const char *s = getenv("LITH_POWERLOSS_SEED");
    seed = s ? strtoull(s, NULL, 0) : (uint64_t)now_ns() ^ ((uint64_t)getpid() << 32);
    if (!seed)
      seed = 1;
    print_message("powerloss: LITH_POWERLOSS_SEED=%llu\n", (unsigned long long)seed);
  }
  return seed;
}

/* What the parent learned of one child run. */
typedef struct run {
  int ready, done, syncs, status;
  int ans_rc[NIDS + 1]; /* -1: not answered */
  int64_t ans_batch[NIDS + 1];
  int64_t member_of[NIDS + 1]; /* the reported batch that committed the id; 0: none */
  int members[NIDS + 2];       /* members seen per batch */
  int reported;                /* batches 1..reported were reported whole */
  char harness[160];           /* the pipe said something impossible */
} run;

static void take(run *r, const rec *m) {
  switch (m->tag) {
  case REC_READY: r->ready = 1; return;
  case REC_DONE:
    r->done = 1;
    r->syncs = (int)m->a;
    return;
  case REC_ANS:
    if (m->a >= 1 && m->a <= NIDS && r->ans_rc[m->a] == -1) {
      r->ans_rc[m->a] = (int)m->b;
      r->ans_batch[m->a] = m->c;
      return;
    }
    break;
  case REC_MEMBER:
    if (m->b >= 1 && m->b <= NIDS && m->a == r->reported + 1 && m->a <= NIDS) {
      if (r->member_of[m->b] != 0) {
        snprintf(r->harness, sizeof r->harness, "command %lld committed in batch %lld and again in %lld",
                 (long long)m->b, (long long)r->member_of[m->b], (long long)m->a);
        return;
      }
      r->member_of[m->b] = m->a;
      r->members[m->a]++;
      return;
    }
    break;
  case REC_BATCH:
    if (m->a == r->reported + 1 && m->b == r->members[m->a]) {
      r->reported++;
      return;
    }
    break;
  default: break;
  }
  if (!r->harness[0])
    snprintf(r->harness, sizeof r->harness, "unexpected record %lld (%lld, %lld, %lld) after batch %d",
             (long long)m->tag, (long long)m->a, (long long)m->b, (long long)m->c, r->reported);
}

static void run_child(const char *db, int sync, int crash_at, uint64_t seed, int flags, run *r) {
  memset(r, 0, sizeof *r);
  for (int i = 0; i <= NIDS; i++)
    r->ans_rc[i] = -1;
  int fds[2];
  assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
  char a[4][32];
  snprintf(a[0], sizeof a[0], "%d", sync);
  snprintf(a[1], sizeof a[1], "%d", crash_at);
  snprintf(a[2], sizeof a[2], "%llu", (unsigned long long)seed);
  snprintf(a[3], sizeof a[3], "%d", flags);
  char *argv[] = {g_argv0, "--child", (char *)db, a[0], a[1], a[2], a[3], NULL};
  posix_spawn_file_actions_t fa;
  assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
  assert_int_equal(posix_spawn_file_actions_adddup2(&fa, fds[1], CHILD_FD), 0);
  pid_t pid = -1;
  int err = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (err != 0) {
    close(fds[0]);
    fail_msg("posix_spawn: %s", strerror(err));
  }
  g_child = pid;
  unsigned char buf[sizeof(rec) * 128];
  size_t have = 0;
  for (;;) {
    struct pollfd p = {fds[0], POLLIN, 0};
    int pr = poll(&p, 1, CHILD_TIMEOUT_MS);
    if (pr < 0 && errno == EINTR)
      continue;
    if (pr == 0) {
      close(fds[0]);
      fail_msg("the child (crash at sync %d) sent nothing for %d ms", crash_at, CHILD_TIMEOUT_MS);
    }
    ssize_t n = read(fds[0], buf + have, sizeof buf - have);
    if (n < 0 && errno == EINTR)
      continue;
    assert_true(n >= 0);
    if (n == 0)
      break;
    have += (size_t)n;
    size_t off = 0;
    for (; have - off >= sizeof(rec); off += sizeof(rec)) {
      rec m;
      memcpy(&m, buf + off, sizeof m);
      take(r, &m);
    }
    memmove(buf, buf + off, have - off);
    have -= off;
  }
  close(fds[0]);
  assert_int_equal(have, 0); /* whole records only */
  pid_t w;
  do
    w = waitpid(pid, &r->status, 0);
  while (w < 0 && errno == EINTR);
  assert_int_equal(w, pid);
  g_child = -1;
}

static int crashed(const run *r) { return WIFEXITED(r->status) && WEXITSTATUS(r->status) == T_CRASHVFS_EXIT; }

static void assert_run_ended_well(const run *r, int crash_at) {
  if (crashed(r))
    return;
  if (WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0 && r->done)
    return;
  fail_msg("the child (crash at sync %d) ended otherwise: status 0x%x (exit %d, signal %d)", crash_at,
           r->status, WIFEXITED(r->status) ? WEXITSTATUS(r->status) : -1,
           WIFSIGNALED(r->status) ? WTERMSIG(r->status) : 0);
}

static void copy_file(const char *from, const char *to) {
  int in = open(from, O_RDONLY | O_CLOEXEC);
  int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  assert_true(in >= 0 && out >= 0);
  char buf[65536];
  ssize_t n;
  while ((n = read(in, buf, sizeof buf)) > 0)
    assert_int_equal(write(out, buf, (size_t)n), n);
  assert_int_equal(n, 0);
  close(in);
  close(out);
}

/* Copy the ready database to db (no -wal, no -shm): written by the parent
 * outside the VFS, so the simulated disk holds it from the start. */
static void copy_template(const char *tmpl, const char *db) {
  t_remove_db(db);
  copy_file(tmpl, db);
}

/* Keep a copy of the files as the crash left them (recovery changes them):
 * after a failure they are in the scratch directory, pl_crash.db(-wal). */
static void keep_crash_files(const char *db) {
  char wal[64];
  copy_template(db, "pl_crash.db");
  snprintf(wal, sizeof wal, "%s-wal", db);
  if (access(wal, F_OK) == 0)
    copy_file(wal, "pl_crash.db-wal");
}

static void make_template(const char *tmpl, int sync) {
  lith_options opt;
  pl_options(&opt, sync);
  lith *h = t_open_fresh(tmpl, &opt);
  assert_int_equal(lith_close(h), LITH_OK);
  char wal[64];
  struct stat sb;
  snprintf(wal, sizeof wal, "%s-wal", tmpl);
  assert_true(stat(wal, &sb) != 0); /* all of it in the file */
}

/* What the checks counted, for the summary. */
typedef struct tally {
  int points, crashes, finished, violations;
  int64_t rows, answered;
  int lost_answered; /* crash points where answered batches were lost (NORMAL only) */
  int inflight_kept; /* crash points where the batch under way at the crash survived */
  char first[512];   /* the first violation */
} tally;

static int violation(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int violation(char *why, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, n, fmt, ap);
  va_end(ap);
  return 1;
}

static const char *text1(sqlite3 *c, const char *sql) {
  static char out[256];
  sqlite3_stmt *st = NULL;
  out[0] = '\0';
  if (sqlite3_prepare_v2(c, sql, -1, &st, NULL) != SQLITE_OK) {
    snprintf(out, sizeof out, "(prepare failed: %s)", sqlite3_errmsg(c));
    return out;
  }
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW)
    snprintf(out, sizeof out, "%s",
             sqlite3_column_text(st, 0) ? (const char *)sqlite3_column_text(st, 0) : "NULL");
  else
    snprintf(out, sizeof out, "(step: %s)", sqlite3_errmsg(c));
  sqlite3_finalize(st);
  return out;
}

/* Check the file after run r (see the top). Returns 0, or 1 with the first
 * violation in why. */
static int check_db(const char *db, int full, const run *r, tally *t, char *why, size_t wn) {
  static int64_t present[NIDS + 1], bn[NIDS + 2], count[NIDS + 2];
  memset(present, 0, sizeof present);
  memset(bn, 0, sizeof bn);
  memset(count, 0, sizeof count);
  if (r->harness[0])
    return violation(why, wn, "the child's records: %s", r->harness);
  sqlite3 *c = NULL;
  int bad = 0;
  if (sqlite3_open_v2(db, &c, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
    bad = violation(why, wn, "open: %s", c ? sqlite3_errmsg(c) : "?");
    goto out;
  }
  sqlite3_busy_timeout(c, 5000);
  /* leave the WAL as recovery found it: lith opens it next */
  sqlite3_db_config(c, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)NULL);
  const char *ic = text1(c, "PRAGMA integrity_check");
  if (strcmp(ic, "ok") != 0) {
    bad = violation(why, wn, "integrity_check: %s", ic);
    goto out;
  }
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(c, "SELECT id, batch FROM rows WHERE id != " STR(AFTER_ID), -1, &st, NULL) !=
      SQLITE_OK) {
    bad = violation(why, wn, "SELECT rows: %s", sqlite3_errmsg(c));
    goto out;
  }
  int64_t k = 0, nrows = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    int64_t id = sqlite3_column_int64(st, 0), b = sqlite3_column_int64(st, 1);
    if (id < 1 || id > NIDS || b < 1 || b > NIDS + 1) {
      sqlite3_finalize(st);
      bad = violation(why, wn, "a stray row (%lld, batch %lld)", (long long)id, (long long)b);
      goto out;
    }
    present[id] = b;
    count[b]++;
    nrows++;
    if (b > k)
      k = b;
  }
  sqlite3_finalize(st);
  if (sqlite3_prepare_v2(c, "SELECT b, n FROM batches", -1, &st, NULL) != SQLITE_OK) {
    bad = violation(why, wn, "SELECT batches: %s", sqlite3_errmsg(c));
    goto out;
  }
  while (sqlite3_step(st) == SQLITE_ROW) {
    int64_t b = sqlite3_column_int64(st, 0);
    if (b < 1 || b > NIDS + 1) {
      sqlite3_finalize(st);
      bad = violation(why, wn, "a stray batch %lld", (long long)b);
      goto out;
    }
    bn[b] = sqlite3_column_int64(st, 1);
  }
  sqlite3_finalize(st);
  t->rows += nrows;

  for (int64_t id = 1; id <= NIDS; id++)
    if (present[id] && kind_of(id) != K_OK) {
      bad = violation(why, wn, "command %lld failed, yet its row is there (batch %lld)", (long long)id,
                      (long long)present[id]);
      goto out;
    }
  for (int64_t b = 1; b <= NIDS + 1; b++) {
    if (b <= k && bn[b] == 0) {
      bad = violation(why, wn, "batch %lld is missing while batch %lld is there: not a prefix", (long long)b,
                      (long long)k);
      goto out;
    }
    if (bn[b] != count[b]) {
      bad = violation(why, wn, "half a batch: batch %lld holds %lld of its %lld rows", (long long)b,
                      (long long)count[b], (long long)bn[b]);
      goto out;
    }
  }
  if (k > r->reported + 1) {
    bad =
        violation(why, wn, "batch %lld is there, but only %d were reported (the next one could be in flight)",
                  (long long)k, r->reported);
    goto out;
  }
  for (int64_t id = 1; id <= NIDS; id++) {
    int64_t b = r->member_of[id];
    if (b >= 1 && b <= r->reported && (b <= k) != (present[id] != 0)) {
      bad = violation(why, wn, "command %lld of reported batch %lld: %s with batches 1..%lld there",
                      (long long)id, (long long)b, present[id] ? "present" : "missing", (long long)k);
      goto out;
    }
    if (b >= 1 && b <= r->reported && present[id] && present[id] != b) {
      bad = violation(why, wn, "command %lld: reported in batch %lld, stored in batch %lld", (long long)id,
                      (long long)b, (long long)present[id]);
      goto out;
    }
    if (present[id] && present[id] <= r->reported && b != present[id]) {
      bad = violation(why, wn, "command %lld is in batch %lld, which was reported without it", (long long)id,
                      (long long)present[id]);
      goto out;
    }
    if (r->ans_rc[id] == LITH_OK) {
      t->answered++;
      if (r->ans_batch[id] != b || b < 1 || b > r->reported) {
        bad = violation(why, wn, "command %lld answered in batch %lld, reported in %lld", (long long)id,
                        (long long)r->ans_batch[id], (long long)b);
        goto out;
      }
    }
  }
  for (int64_t b = 1; b <= r->reported; b++)
    if (b <= k && bn[b] != r->members[b]) {
      bad = violation(why, wn, "batch %lld: %lld rows, %d reported members", (long long)b, (long long)bn[b],
                      r->members[b]);
      goto out;
    }
  if (full && k < r->reported) {
    int64_t lost = 0;
    for (int64_t id = 1; id <= NIDS; id++)
      lost += r->ans_rc[id] == LITH_OK && r->ans_batch[id] > k;
    bad = violation(why, wn, "FULL lost committed batches %lld..%d (%lld answered commands)",
                    (long long)k + 1, r->reported, (long long)lost);
    goto out;
  }
  for (int64_t id = 1; id <= NIDS; id++)
    if (r->ans_rc[id] == LITH_OK && r->ans_batch[id] > k) {
      t->lost_answered++;
      break;
    }
  if (k == r->reported + 1)
    t->inflight_kept++;

out:
  sqlite3_close(c);
  return bad;
}

/* lith opens the recovered file and takes a write (NORMAL: what it shows
 * is that the file works, and real fsyncs would only cost time). */
static void write_after(const char *db) {
  lith_options opt;
  lith *h = NULL;
  pl_options(&opt, LITH_SYNC_NORMAL);
  int rc = lith_open(db, &opt, &h);
  if (rc != LITH_OK)
    fail_msg("lith_open after the power loss: %s: %s", lith_errstr(rc), lith_errmsg(NULL));
  assert_int_equal(
      lith_do(h, lith_cmd_sql, "INSERT INTO rows(id, batch, pad) VALUES (" STR(AFTER_ID) ", 0, x'00')"),
      LITH_OK);
  assert_int_equal(lith_close(h), LITH_OK);
  assert_int_equal(t_query_int(db, "SELECT count(*) FROM rows WHERE id = " STR(AFTER_ID)), 1);
  t_assert_integrity(db);
}

/* The crash points of a sweep over n syncs: all of them, or every d-th
 * under LITH_TEST_SCALE=d (from an offset the seed picks). A self-test
 * (lie) goes through all of them, but stops at its first catch. */
static int next_point(int prev, int n, uint64_t seed, int lie) {
  const char *s = getenv("LITH_TEST_SCALE");
  int d = s && !lie ? atoi(s) : 1;
  if (d < 1)
    d = 1;
  int next = prev == 0 ? 1 + (int)(seed % (uint64_t)d) : prev + d;
  return next <= n ? next : 0;
}

enum { LIES = T_CRASHVFS_LIE_SYNC | T_CRASHVFS_LIE_PSOW };

/* One sweep: a dry run, then a crash at every point. A VFS that lies (a
 * self-test) counts the violations instead of failing on the first. */
static void sweep(int sync, int flags, tally *t) {
  const char *tmpl = "pl_template.db", *db = "pl.db";
  const int lie = flags & LIES;
  char mode[64];
  snprintf(mode, sizeof mode, "%s, %s%s", sync == LITH_SYNC_FULL ? "FULL" : "NORMAL",
           (flags & T_CRASHVFS_PSOW) ? "powersafe device" : "device without PSOW",
           (flags & T_CRASHVFS_LIE_SYNC)   ? ", lying xSync"
           : (flags & T_CRASHVFS_LIE_PSOW) ? ", lying: PSOW reported"
                                           : "");
  uint64_t seed = pl_seed() ^ (uint64_t)(sync * 7919 + flags * 104729);
  char why[512];
  run *r = malloc(sizeof *r);
  assert_non_null(r);
  memset(t, 0, sizeof *t);
  int64_t t0 = now_ns();
  make_template(tmpl, sync);

  copy_template(tmpl, db);
  run_child(db, sync, 0, seed, flags, r);
  assert_run_ended_well(r, 0);
  assert_true(r->done && r->syncs > 0);
  if (check_db(db, 1, r, t, why, sizeof why)) /* a clean close keeps everything */
    fail_msg("powerloss[%s] dry run: %s", mode, why);
  int total = r->syncs;

  for (int n = next_point(0, total, seed, lie); n; n = next_point(n, total, seed, lie)) {
    copy_template(tmpl, db);
    run_child(db, sync, n, seed, flags, r);
    assert_run_ended_well(r, n);
    if (!lie)
      keep_crash_files(db);
    t->points++;
    if (crashed(r)) {
      t->crashes++;
      char shm[64];
      snprintf(shm, sizeof shm, "%s-shm", db);
      assert_true(access(shm, F_OK) != 0);
    } else {
      t->finished++;
    }
    /* At odd points lith recovers the file before the check (which then
     * looks past lith's row), at even points plain SQLite does. */
    int lith_first = !lie && n % 2;
    if (lith_first)
      write_after(db);
    if (check_db(db, sync == LITH_SYNC_FULL || !crashed(r), r, t, why, sizeof why)) {
      t->violations++;
      if (!t->first[0])
        snprintf(t->first, sizeof t->first, "crash at sync %d of %d: %.400s", n, total, why);
      if (!lie)
        fail_msg(
            "powerloss[%s] LITH_POWERLOSS_SEED=%llu, crash at sync %d of %d: %s (the files as the crash left "
            "them: pl_crash.db, pl_crash.db-wal)",
            mode, (unsigned long long)pl_seed(), n, total, why);
      break; /* the self-test has its answer */
    }
    if (!lith_first)
      write_after(db);
  }
  t_remove_db(db);
  t_remove_db(tmpl);
  t_remove_db("pl_crash.db");
  free(r);
  print_message("powerloss[%s]: %d syncs in the dry run, %d crash points (%d crashed, %d ran to the end), "
                "%lld rows and %lld answered commands checked; answered batches lost at %d points, "
                "the batch in flight kept at %d; %d violations; %.1f s\n",
                mode, total, t->points, t->crashes, t->finished, (long long)t->rows, (long long)t->answered,
                t->lost_answered, t->inflight_kept, t->violations, (double)(now_ns() - t0) / 1e9);
  if (lie)
    print_message("powerloss[%s]: caught: %s\n", mode, t->violations ? t->first : "nothing");
}

static void test_powerloss(int sync, int flags) {
  tally t;
  sweep(sync, flags, &t);
  assert_int_equal(t.violations, 0);
  assert_true(t.crashes > 0);
}

/* FULL on a device without POWERSAFE_OVERWRITE: SQLite pads every WAL
 * commit it syncs to a sector boundary. */
static void test_powerloss_full(void **state) {
  (void)state;
  test_powerloss(LITH_SYNC_FULL, 0);
}

/* FULL on a powersafe device: no padding, and a commit's first sector
 * shares the last synced one's. */
static void test_powerloss_full_psow(void **state) {
  (void)state;
  test_powerloss(LITH_SYNC_FULL, T_CRASHVFS_PSOW);
}

/* NORMAL on a powersafe device only. Without POWERSAFE_OVERWRITE, SQLite
 * (3.40 and since) does not hold NORMAL's promise: a checkpoint syncs the
 * WAL up to a frame that ends mid-sector and copies it into the database;
 * when the WAL cannot start over (the writer began before the checkpoint
 * ended, or a reader holds a snapshot), the next frames are appended into
 * that sector, and a power loss while they are unsynced may turn the sector
 * to garbage: recovery then ends the WAL before a commit whose pages the
 * database already holds — half a transaction, or a malformed file (seen
 * here under TSan, and with plain SQLite in ~20% of tries of that
 * sequence). SQLite's unix VFS assumes a powersafe device, as this test does. */
static void test_powerloss_normal(void **state) {
  (void)state;
  test_powerloss(LITH_SYNC_NORMAL, T_CRASHVFS_PSOW);
}

/* The checker catches a VFS whose xSync keeps no promise. */
static void test_checker_catches_lying_sync(void **state) {
  (void)state;
  tally t;
  sweep(LITH_SYNC_FULL, T_CRASHVFS_LIE_SYNC, &t);
  assert_true(t.violations > 0);
}

/* The checker catches a VFS that claims POWERSAFE_OVERWRITE while its
 * faults tear sectors beyond the bytes written: SQLite then does not pad a
 * synced WAL commit, and the next commit's torn first sector takes the
 * last frame of an answered one with it. */
static void test_checker_catches_lying_psow(void **state) {
  (void)state;
  tally t;
  sweep(LITH_SYNC_FULL, T_CRASHVFS_LIE_PSOW, &t);
  assert_true(t.violations > 0);
}

/* What the VFS tells SQLite about the device: nothing its faults break. */
static void test_device_flags(void **state) {
  (void)state;
  const char *db = "pl_flags.db";
  assert_int_equal(t_crashvfs_register(), SQLITE_OK);
  t_crashvfs_arm(1, 0, 0);
  t_remove_db(db);
  sqlite3 *c = NULL;
  assert_int_equal(sqlite3_open_v2(db, &c, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, T_CRASHVFS_NAME),
                   SQLITE_OK);
  assert_int_equal(sqlite3_exec(c, "PRAGMA journal_mode=WAL; CREATE TABLE t(x); INSERT INTO t VALUES (1);",
                                NULL, NULL, NULL),
                   SQLITE_OK);
  sqlite3_file *f = NULL, *wal = NULL;
  assert_int_equal(sqlite3_file_control(c, "main", SQLITE_FCNTL_FILE_POINTER, &f), SQLITE_OK);
  assert_int_equal(sqlite3_file_control(c, "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal), SQLITE_OK);
  assert_non_null(f);
  assert_non_null(wal);
  /* no ATOMIC*, SAFE_APPEND, SEQUENTIAL: the faults break them all */
  assert_int_equal(f->pMethods->xDeviceCharacteristics(f), 0);
  assert_int_equal(wal->pMethods->xDeviceCharacteristics(wal), 0);
  assert_int_equal(f->pMethods->xSectorSize(f), T_CRASHVFS_SECTOR);
  assert_int_equal(wal->pMethods->xSectorSize(wal), T_CRASHVFS_SECTOR);
  t_crashvfs_arm(1, 0, T_CRASHVFS_PSOW); /* the powersafe device says so, and only that */
  assert_int_equal(f->pMethods->xDeviceCharacteristics(f), SQLITE_IOCAP_POWERSAFE_OVERWRITE);
  assert_int_equal(wal->pMethods->xDeviceCharacteristics(wal), SQLITE_IOCAP_POWERSAFE_OVERWRITE);
  assert_int_equal(sqlite3_exec(c, "INSERT INTO t VALUES (2);", NULL, NULL, NULL), SQLITE_OK);
  assert_true(t_crashvfs_syncs() > 0);
  assert_int_equal(sqlite3_close(c), SQLITE_OK);
  t_crashvfs_arm(1, 0, 0);
  t_remove_db(db);
}

/* The simulated disk keeps its promises and breaks the others: after the
 * crash, a sector synced and not written since is as synced, whatever the
 * seed; an unsynced write is kept, lost or torn (garbage too), an append
 * may leave the size without the data, a file created after the
 * directory's last sync may vanish, the -shm goes. The device without PSOW
 * may turn bytes a write did not cover to garbage (in a sector the write
 * covered in part); the powersafe one never does. Over 80 seeds each, each
 * of those outcomes shows up. */
static void test_vfs_model(void **state) {
  (void)state;
  enum { OLD, NEW, JUNK, HOLE, NOUTCOMES };
  int b_seen[NOUTCOMES] = {0}, c_seen[NOUTCOMES] = {0}, d_seen[NOUTCOMES] = {0};
  int vanished = 0, stayed = 0, short_size = 0, long_size = 0, beyond = 0;
  const int64_t sec = T_CRASHVFS_SECTOR;
  uint64_t base = pl_seed();
  for (int i = 0; i < 160; i++) {
    int psow = i % 2;
    unlink("m.db");
    unlink("m.db-wal");
    unlink("n.db");
    unlink("n.db-wal");
    unlink("m.db-shm");
    char seed[32], flags[16];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)(base + (uint64_t)i));
    snprintf(flags, sizeof flags, "%d", psow ? T_CRASHVFS_PSOW : 0);
    char *argv[] = {g_argv0, "--vfs-child", seed, flags, NULL};
    pid_t pid = -1;
    assert_int_equal(posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ), 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != T_CRASHVFS_EXIT)
      fail_msg("the VFS child (seed %s) ended with status 0x%x", seed, status);
    assert_true(access("m.db-shm", F_OK) != 0);
    assert_true(access("m.db", F_OK) == 0); /* its directory was synced */
    if (access("n.db-wal", F_OK) == 0)
      stayed++;
    else
      vanished++;

    unsigned char got[(M_SECTORS + 2) * T_CRASHVFS_SECTOR], want[T_CRASHVFS_SECTOR];
    int fd = open("m.db-wal", O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    ssize_t n = read(fd, got, sizeof got);
    close(fd);
    if (n == M_SECTORS * sec)
      short_size++;
    else if (n == (M_SECTORS + 2) * sec)
      long_size++;
    else
      fail_msg("seed %s: the WAL has %zd bytes", seed, n);
    for (int s = 0; s < n / sec; s++) {
      const unsigned char *g = got + s * sec;
      int is_b = s == 2 || s == 3, is_c = s == 5, is_d = s >= M_SECTORS;
      int outcome = JUNK;
      m_fill(want, 0, s * sec, (int)sec);
      if (!is_d && memcmp(g, want, (size_t)sec) == 0)
        outcome = OLD;
      if (is_c && (memcmp(g, want, 100) != 0 || memcmp(g + 200, want + 200, (size_t)sec - 200) != 0)) {
        if (psow)
          fail_msg("seed %s (powersafe): sector 5 changed beyond the 100 bytes written", seed);
        beyond++;
      }
      if (is_b) {
        m_fill(want, 1, s * sec, (int)sec);
        if (memcmp(g, want, (size_t)sec) == 0)
          outcome = NEW;
      }
      if (is_c) {
        m_fill(want + 100, 2, s * sec + 100, 100);
        if (memcmp(g, want, (size_t)sec) == 0)
          outcome = NEW;
      }
      if (is_d) {
        static const unsigned char zero[T_CRASHVFS_SECTOR];
        m_fill(want, 4, s * sec, (int)sec);
        outcome = memcmp(g, want, (size_t)sec) == 0 ? NEW : memcmp(g, zero, (size_t)sec) == 0 ? HOLE : JUNK;
      }
      if (is_b)
        b_seen[outcome]++;
      else if (is_c)
        c_seen[outcome]++;
      else if (is_d)
        d_seen[outcome]++;
      else if (outcome != OLD)
        fail_msg("seed %s: sector %d was synced and never written again, yet it changed", seed, s);
    }
  }
  unlink("m.db");
  unlink("m.db-wal");
  unlink("n.db");
  unlink("n.db-wal");
  print_message(
      "powerloss[vfs]: whole-sector write: old %d new %d garbage %d; part-sector write: old %d new %d "
      "garbage %d (%d beyond the bytes written, all without PSOW); append: new %d hole %d garbage %d, "
      "size kept %d/%d; unsynced new file vanished %d/%d\n",
      b_seen[OLD], b_seen[NEW], b_seen[JUNK], c_seen[OLD], c_seen[NEW], c_seen[JUNK], beyond, d_seen[NEW],
      d_seen[HOLE], d_seen[JUNK], long_size, long_size + short_size, vanished, vanished + stayed);
  assert_true(b_seen[OLD] && b_seen[NEW] && c_seen[OLD] && c_seen[NEW] && d_seen[NEW] && d_seen[HOLE]);
  assert_true(b_seen[JUNK] + c_seen[JUNK] + d_seen[JUNK] > 0); /* expected ~30 */
  assert_true(beyond > 0);                                     /* expected ~10 */
  assert_true(short_size && long_size && vanished && stayed);
}

static int kill_child(void **state) {
  (void)state;
  if (g_child > 0) {
    kill(g_child, SIGKILL);
    waitpid(g_child, NULL, 0);
    g_child = -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--child") == 0)
    return child_main(argc, argv);
  if (argc > 1 && strcmp(argv[1], "--vfs-child") == 0)
    return vfs_child_main(argc, argv);
  g_argv0 = argv[0];
  if (getenv("LITH_POWERLOSS_TESTS")) /* e.g. test_powerloss_normal, to reproduce one */
    cmocka_set_test_filter(getenv("LITH_POWERLOSS_TESTS"));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_device_flags),
      cmocka_unit_test(test_vfs_model),
      cmocka_unit_test_teardown(test_powerloss_full, kill_child),
      cmocka_unit_test_teardown(test_powerloss_full_psow, kill_child),
      cmocka_unit_test_teardown(test_powerloss_normal, kill_child),
      cmocka_unit_test_teardown(test_checker_catches_lying_sync, kill_child),
      cmocka_unit_test_teardown(test_checker_catches_lying_psow, kill_child),
  };
  return cmocka_run_group_tests_name("writer/powerloss", tests, NULL, NULL);
}
