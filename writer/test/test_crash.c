/*
 * Durability across a crash: a producer that heard LITH_OK finds its row
 * after the process died, whatever it was doing when it died.
 *
 * The binary re-executes itself (/proc/self/exe --child ...) with a pipe on
 * fd 3. The child opens the database with lith_open and starts NPROD
 * producer threads; each loops lith_do with a command that inserts the row
 * (producer, seq), bumps the producer's counter and a global one, and only
 * after the LITH_OK writes the record (producer, seq) to the pipe: one
 * fixed-size record per write(), atomic on a pipe. The parent reads the
 * pipe and, a random 20-300 ms after the first answer, kills the child with
 * SIGKILL, drains what is left in the pipe, reaps it, then checks the file:
 *
 *   - PRAGMA integrity_check is "ok" and the file is still in WAL mode;
 *   - every (producer, seq) the child logged is there;
 *   - each producer's rows are exactly seq 0..k-1 (it waits for its answer
 *     before the next command), with k the answers it logged plus at most
 *     one: the command in flight, committed but not yet heard of;
 *   - each producer's counter equals its row count and the global counter
 *     the table's (a command is all or nothing);
 *   - lith_open on the recovered file works and accepts a new write (and
 *     the parent's writes of earlier rounds are all still there).
 *
 * Rounds: synchronous FULL and NORMAL (LITH_CRASH_ITERS each, default 10);
 * killed while the writer checkpoints after almost every batch
 * (checkpoint_pages tiny, WRITER and AUTO modes); killed inside lith_close
 * (the child calls it after N answers with a large WAL and async requests
 * still queued, so close runs commands and a TRUNCATE checkpoint) — the kill
 * delay there is drawn over the close time measured by an unkilled round,
 * which also checks that a clean close keeps exactly the answered rows and
 * leaves the WAL empty. A SIGKILL leaves the page cache intact, so NORMAL
 * must lose nothing either. LITH_CRASH_SEED fixes the random choices.
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
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common.h"

#define CHILD_FD 3          /* the child's end of the pipe */
#define NPROD 8             /* producer threads in the child */
#define MAX_IDS 256         /* producer ids per child run (threads + async) */
#define CHILD_LIFE_MS 60000 /* a child never killed gives up after this */

static const char *const crash_migrations[] = {
    "CREATE TABLE crash_rows(id INTEGER PRIMARY KEY, producer INTEGER NOT NULL,"
    " seq INTEGER NOT NULL, pad BLOB NOT NULL, UNIQUE(producer, seq));"
    "CREATE TABLE ctr(producer INTEGER PRIMARY KEY, n INTEGER NOT NULL);"
    "CREATE TABLE tot(id INTEGER PRIMARY KEY CHECK (id = 1), n INTEGER NOT NULL);"
    "INSERT INTO tot(id, n) VALUES (1, 0);",
};

/* One record on the pipe: 40 bytes, well under PIPE_BUF. */
enum { REC_READY = 1, REC_ROW, REC_STATS, REC_CLOSING, REC_CLOSED };
typedef struct rec {
  int64_t tag;
  int64_t a, b, c, d; /* ROW: producer, seq. STATS: checkpoints, ckpt ns, commands, ns since open */
} rec;

/* What a child run does. */
typedef struct child_cfg {
  int sync;      /* LITH_SYNC_* */
  int ckpt_mode; /* LITH_CHECKPOINT_* */
  int ckpt_pages;
  int nprod; /* producer threads, ids base .. base+nprod-1 */
  int64_t base;
  int pad;         /* bytes of random payload per row */
  int close_after; /* 0: run until killed; else lith_close after this many answers */
  int nasync;      /* close mode: requests submitted just before lith_close,
                      ids base+nprod .., seq 0 each */
} child_cfg;

static void crash_options(lith_options *opt, const child_cfg *c) {
  lith_options_default(opt);
  opt->migrations = crash_migrations;
  opt->n_migrations = 1;
  opt->synchronous = c->sync;
  opt->checkpoint = c->ckpt_mode;
  opt->checkpoint_pages = c->ckpt_pages;
  opt->readers = 1;
  opt->busy_timeout_ms = 5000;
  opt->cache_size_kib = 2048;
}

typedef struct row_arg {
  int64_t producer, seq;
  int pad;
} row_arg;

/* Insert (producer, seq), count it; the producer's counter must then be
 * seq + 1: every earlier answered row of this producer is there. */
static int insert_row_cmd(lith_tx *tx, void *arg) {
  const row_arg *r = arg;
  int64_t n = 0;
  int rc;
  if ((rc = lith_tx_exec(tx, "INSERT INTO crash_rows(producer, seq, pad) VALUES (?, ?, randomblob(?))", "IIi",
                         r->producer, r->seq, r->pad)) != LITH_OK)
    return rc;
  if ((rc = lith_tx_exec(tx,
                         "INSERT INTO ctr(producer, n) VALUES (?, 1)"
                         " ON CONFLICT(producer) DO UPDATE SET n = n + 1",
                         "I", r->producer)) != LITH_OK)
    return rc;
  if ((rc = lith_tx_int64(tx, &n, "SELECT n FROM ctr WHERE producer = ?", "I", r->producer)) != LITH_OK)
    return rc;
  if (n != r->seq + 1)
    return lith_tx_error(tx, LITH_USER, "producer %lld: counter %lld at seq %lld", (long long)r->producer,
                         (long long)n, (long long)r->seq);
  return lith_tx_exec(tx, "UPDATE tot SET n = n + 1 WHERE id = 1", NULL);
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ==== The child ========================================================= */

static lith *c_db;
static _Atomic int c_stop;
static _Atomic int64_t c_answered;
static _Atomic int c_async_done;
static _Atomic int c_async_failed;

static void child_die(const char *what, int rc) {
  fprintf(stderr, "crash child %d: %s: %s: %s\n", (int)getpid(), what, lith_errstr(rc), lith_errmsg(NULL));
  _exit(4);
}

static void child_send(int64_t tag, int64_t a, int64_t b, int64_t c, int64_t d) {
  rec r = {tag, a, b, c, d};
  ssize_t n;
  do
    n = write(CHILD_FD, &r, sizeof r);
  while (n < 0 && errno == EINTR);
  if (n != (ssize_t)sizeof r) {
    fprintf(stderr, "crash child: write to the pipe: %zd (%s)\n", n, strerror(errno));
    _exit(5);
  }
}

typedef struct producer {
  pthread_t thread;
  int64_t id;
  int pad;
} producer;

static void *producer_main(void *arg) {
  producer *p = arg;
  for (int64_t seq = 0; !atomic_load(&c_stop); seq++) {
    row_arg r = {p->id, seq, p->pad};
    int rc = lith_do(c_db, insert_row_cmd, &r);
    if (rc != LITH_OK)
      child_die("lith_do", rc);
    child_send(REC_ROW, p->id, seq, 0, 0); /* only after the answer */
    atomic_fetch_add(&c_answered, 1);
  }
  return NULL;
}

static void async_done_cb(lith_request *req) {
  const row_arg *r = req->arg;
  if (req->rc == LITH_OK) {
    child_send(REC_ROW, r->producer, r->seq, 0, 0);
  } else {
    fprintf(stderr, "crash child: async %lld: %s: %s\n", (long long)r->producer, lith_errstr(req->rc),
            req->errmsg);
    atomic_store(&c_async_failed, 1);
  }
  atomic_fetch_add(&c_async_done, 1);
}

static int64_t arg_int(char **argv, int i) { return strtoll(argv[i], NULL, 10); }

/* argv: exe --child db sync ckpt_mode ckpt_pages nprod base pad close_after nasync */
static int child_main(int argc, char **argv) {
  if (argc != 11) {
    fprintf(stderr, "crash child: bad arguments\n");
    return 2;
  }
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  const char *path = argv[2];
  child_cfg c = {(int)arg_int(argv, 3), (int)arg_int(argv, 4), (int)arg_int(argv, 5), (int)arg_int(argv, 6),
                 arg_int(argv, 7),      (int)arg_int(argv, 8), (int)arg_int(argv, 9), (int)arg_int(argv, 10)};
  if (c.nprod < 1 || c.nprod + c.nasync > MAX_IDS)
    return 2;
  lith_options opt;
  crash_options(&opt, &c);
  int rc = lith_open(path, &opt, &c_db);
  if (rc != LITH_OK)
    child_die("lith_open", rc);
  int64_t t_open = now_ns();
  child_send(REC_READY, 0, 0, 0, 0);

  producer prod[MAX_IDS];
  for (int i = 0; i < c.nprod; i++) {
    prod[i].id = c.base + i;
    prod[i].pad = c.pad;
    if (pthread_create(&prod[i].thread, NULL, producer_main, &prod[i]) != 0)
      child_die("pthread_create", LITH_NOMEM);
  }
  for (;;) {
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
    lith_stats st;
    lith_stats_get(c_db, &st);
    child_send(REC_STATS, (int64_t)st.checkpoints, (int64_t)st.checkpoint_ns_total, (int64_t)st.commands,
               now_ns() - t_open);
    if (c.close_after > 0 && atomic_load(&c_answered) >= c.close_after)
      break;
    if (now_ns() - t_open > (int64_t)CHILD_LIFE_MS * 1000000) {
      fprintf(stderr, "crash child: never killed\n");
      _exit(3);
    }
  }

  /* Close mode: stop the producers (each finishes its lith_do), queue a
   * last round of requests and close; the parent kills us somewhere in
   * here. */
  atomic_store(&c_stop, 1);
  for (int i = 0; i < c.nprod; i++)
    pthread_join(prod[i].thread, NULL);
  lith_request *reqs = calloc((size_t)c.nasync + 1, sizeof *reqs);
  row_arg *args = calloc((size_t)c.nasync + 1, sizeof *args);
  if (!reqs || !args)
    child_die("calloc", LITH_NOMEM);
  child_send(REC_CLOSING, 0, 0, 0, 0);
  for (int i = 0; i < c.nasync; i++) {
    args[i] = (row_arg){c.base + c.nprod + i, 0, c.pad};
    reqs[i].fn = insert_row_cmd;
    reqs[i].arg = &args[i];
    reqs[i].done = async_done_cb;
    if ((rc = lith_submit(c_db, &reqs[i])) != LITH_OK)
      child_die("lith_submit", rc);
  }
  rc = lith_close(c_db);
  if (rc != LITH_OK)
    child_die("lith_close", rc);
  child_send(REC_CLOSED, 0, 0, 0, 0);
  int bad = atomic_load(&c_async_done) != c.nasync || atomic_load(&c_async_failed);
  free(reqs);
  free(args);
  return bad ? 6 : 0;
}

/* ==== The parent ======================================================== */

static char *g_argv0;
static uint64_t g_rng;
static pid_t g_child = -1; /* running child, killed by the teardown if a check failed */

static uint64_t rnd(void) {
  uint64_t x = g_rng; /* xorshift64* */
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  g_rng = x;
  return x * 0x2545F4914F6CDD1DULL;
}

/* Uniform in [lo, hi]. */
static int64_t rnd_between(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1)); }

static void seed_rng(const char *mode) {
  const char *s = getenv("LITH_CRASH_SEED");
  uint64_t seed = s ? strtoull(s, NULL, 0) : (uint64_t)now_ns() ^ ((uint64_t)getpid() << 32);
  if (seed == 0)
    seed = 1;
  g_rng = seed;
  print_message("crash[%s]: LITH_CRASH_SEED=%llu\n", mode, (unsigned long long)seed);
}

static int iters(void) {
  const char *s = getenv("LITH_CRASH_ITERS");
  int n = s ? atoi(s) : 10;
  return n < 1 ? 1 : n;
}

enum { KILL_NONE, KILL_AFTER_FIRST_ANSWER, KILL_AFTER_CLOSING };

/* What the parent saw of one child run. */
typedef struct run_result {
  int64_t logged[MAX_IDS]; /* answers logged per id (id - base); seqs come in order */
  int64_t answered;
  int ready, closing, closed;
  int64_t t_closing, t_closed;
  int64_t ckpts, ckpt_ns, commands, alive_ns; /* the last STATS */
  int killed;                                 /* the parent sent SIGKILL */
  int status;                                 /* from waitpid */
} run_result;

static pid_t spawn_child(const char *db, const child_cfg *c, int *rfd) {
  int fds[2];
  assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
  char a[9][32];
  snprintf(a[0], sizeof a[0], "%d", c->sync);
  snprintf(a[1], sizeof a[1], "%d", c->ckpt_mode);
  snprintf(a[2], sizeof a[2], "%d", c->ckpt_pages);
  snprintf(a[3], sizeof a[3], "%d", c->nprod);
  snprintf(a[4], sizeof a[4], "%lld", (long long)c->base);
  snprintf(a[5], sizeof a[5], "%d", c->pad);
  snprintf(a[6], sizeof a[6], "%d", c->close_after);
  snprintf(a[7], sizeof a[7], "%d", c->nasync);
  char *argv[] = {g_argv0, "--child", (char *)db, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], NULL};
  posix_spawn_file_actions_t fa;
  assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
  /* dup2 clears close-on-exec on CHILD_FD; the pipe's own fds close at exec. */
  assert_int_equal(posix_spawn_file_actions_adddup2(&fa, fds[1], CHILD_FD), 0);
  pid_t pid = -1;
  int err = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (err != 0)
    fprintf(stderr, "posix_spawn: %s\n", strerror(err));
  assert_int_equal(err, 0);
  close(fds[1]);
  *rfd = fds[0];
  g_child = pid;
  return pid;
}

typedef struct reader {
  unsigned char buf[sizeof(rec) * 256];
  size_t have;
} reader;

/* Read what is there (blocking once) and take in the whole records.
 * Returns 0 at end of file. Sets *trigger to the arrival time of the first
 * record of kind `trigger_tag` (if *trigger was 0). */
static int pump(int fd, reader *rd, const child_cfg *c, run_result *r, int64_t trigger_tag,
                int64_t *trigger) {
  ssize_t n;
  do
    n = read(fd, rd->buf + rd->have, sizeof rd->buf - rd->have);
  while (n < 0 && errno == EINTR);
  assert_true(n >= 0);
  if (n == 0) {
    assert_int_equal(rd->have, 0); /* writes are whole records */
    return 0;
  }
  int64_t t = now_ns();
  rd->have += (size_t)n;
  size_t off = 0;
  for (; rd->have - off >= sizeof(rec); off += sizeof(rec)) {
    rec m;
    memcpy(&m, rd->buf + off, sizeof m);
    switch (m.tag) {
    case REC_READY: r->ready = 1; break;
    case REC_ROW: {
      int64_t i = m.a - c->base;
      assert_true(i >= 0 && i < c->nprod + c->nasync);
      assert_int_equal(m.b, r->logged[i]); /* each producer logs 0, 1, 2, ... */
      r->logged[i]++;
      r->answered++;
      break;
    }
    case REC_STATS:
      r->ckpts = m.a;
      r->ckpt_ns = m.b;
      r->commands = m.c;
      r->alive_ns = m.d;
      break;
    case REC_CLOSING:
      r->closing = 1;
      r->t_closing = t;
      break;
    case REC_CLOSED:
      r->closed = 1;
      r->t_closed = t;
      break;
    default: fail_msg("bad record tag %lld", (long long)m.tag);
    }
    if (m.tag == trigger_tag && *trigger == 0)
      *trigger = t;
  }
  memmove(rd->buf, rd->buf + off, rd->have - off);
  rd->have -= off;
  return 1;
}

/* Run one child; with a kill mode, SIGKILL it `delay_ns` after the trigger
 * record arrived. Drains the pipe to its end and reaps the child. */
static void run_child(const char *db, const child_cfg *c, int kill_mode, int64_t delay_ns, run_result *r) {
  memset(r, 0, sizeof *r);
  reader rd = {.have = 0};
  int fd = -1;
  pid_t pid = spawn_child(db, c, &fd);
  int64_t tag = kill_mode == KILL_AFTER_FIRST_ANSWER ? REC_ROW
                : kill_mode == KILL_AFTER_CLOSING    ? REC_CLOSING
                                                     : 0;
  int64_t trigger = 0;
  int eof = 0;
  while (!eof) {
    int timeout_ms = 30000; /* no record for this long: the child is stuck */
    if (trigger) {
      int64_t left = trigger + delay_ns - now_ns();
      if (left <= 0) {
        assert_int_equal(kill(pid, SIGKILL), 0);
        r->killed = 1;
        break;
      }
      timeout_ms = (int)((left + 999999) / 1000000);
    }
    struct pollfd p = {fd, POLLIN, 0};
    int pr = poll(&p, 1, timeout_ms);
    if (pr < 0 && errno == EINTR)
      continue;
    assert_true(pr >= 0);
    if (pr == 0 && !trigger) {
      close(fd);
      fail_msg("the child sent nothing for %d ms", timeout_ms);
    }
    if (pr > 0)
      eof = !pump(fd, &rd, c, r, tag, &trigger);
  }
  while (!eof) /* what the child wrote before it died */
    eof = !pump(fd, &rd, c, r, 0, &trigger);
  close(fd);
  pid_t w;
  do
    w = waitpid(pid, &r->status, 0);
  while (w < 0 && errno == EINTR);
  assert_int_equal(w, pid);
  g_child = -1;
  assert_true(r->ready);
}

static void assert_killed(const run_result *r) {
  if (!(WIFSIGNALED(r->status) && WTERMSIG(r->status) == SIGKILL))
    fail_msg("the child was not killed by us: status 0x%x (exit %d)", r->status,
             WIFEXITED(r->status) ? WEXITSTATUS(r->status) : -1);
}

static void assert_exited_ok(const run_result *r) {
  if (!(WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0))
    fail_msg("the child failed: status 0x%x (exit %d)", r->status,
             WIFEXITED(r->status) ? WEXITSTATUS(r->status) : -1);
}

static int64_t q_int(sqlite3 *c, const char *sql, int64_t bind) {
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(c, sql, -1, &st, NULL);
  if (rc != SQLITE_OK)
    fail_msg("%s: %s", sql, sqlite3_errmsg(c));
  if (sqlite3_bind_parameter_count(st) > 0)
    sqlite3_bind_int64(st, 1, bind);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  int64_t v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

static void assert_text(sqlite3 *c, const char *sql, const char *want) {
  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_prepare_v2(c, sql, -1, &st, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  const char *got = (const char *)sqlite3_column_text(st, 0);
  if (!got || strcmp(got, want) != 0)
    fail_msg("%s: got \"%s\", want \"%s\"", sql, got ? got : "(null)", want);
  sqlite3_finalize(st);
}

/* Check the file after a run; `exact`: the child closed cleanly, so nothing
 * can be committed without having been answered. `parent_rows`: rows the
 * parent's own writes (producer 0) must have left. Returns the rows of this
 * run found committed. */
static int64_t verify(const char *db, const child_cfg *c, const run_result *r, int exact,
                      int64_t parent_rows) {
  sqlite3 *conn = NULL;
  assert_int_equal(sqlite3_open_v2(db, &conn, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
  sqlite3_busy_timeout(conn, 5000);
  assert_text(conn, "PRAGMA integrity_check", "ok");
  assert_text(conn, "PRAGMA journal_mode", "wal");

  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_prepare_v2(conn,
                                      "SELECT count(*), coalesce(min(seq), -1), coalesce(max(seq), -1),"
                                      " (SELECT n FROM ctr WHERE producer = ?1),"
                                      " (SELECT count(*) FROM crash_rows WHERE producer = ?1 AND seq < ?2)"
                                      " FROM crash_rows WHERE producer = ?1",
                                      -1, &st, NULL),
                   SQLITE_OK);
  int64_t found = 0;
  for (int i = 0; i < c->nprod + c->nasync; i++) {
    int64_t id = c->base + i, logged = r->logged[i];
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int64(st, 2, logged);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t count = sqlite3_column_int64(st, 0), lo = sqlite3_column_int64(st, 1),
            hi = sqlite3_column_int64(st, 2);
    int64_t ctr = sqlite3_column_type(st, 3) == SQLITE_NULL ? 0 : sqlite3_column_int64(st, 3);
    int64_t answered_present = sqlite3_column_int64(st, 4);
    if (answered_present != logged || count < logged || count > logged + (exact ? 0 : 1) ||
        (count > 0 && (lo != 0 || hi != count - 1)) || ctr != count)
      fail_msg(
          "producer %lld: answered %lld, of them present %lld; rows %lld (seq %lld..%lld), counter %lld%s",
          (long long)id, (long long)logged, (long long)answered_present, (long long)count, (long long)lo,
          (long long)hi, (long long)ctr, exact ? " (clean close)" : "");
    sqlite3_reset(st);
    found += count;
  }
  sqlite3_finalize(st);
  /* nothing stray: the global counter, the counters and the table agree */
  assert_int_equal(q_int(conn, "SELECT n FROM tot", 0), q_int(conn, "SELECT count(*) FROM crash_rows", 0));
  assert_int_equal(q_int(conn, "SELECT coalesce(sum(n), 0) FROM ctr", 0),
                   q_int(conn, "SELECT count(*) FROM crash_rows", 0));
  assert_int_equal(q_int(conn, "SELECT count(*) FROM crash_rows WHERE length(pad) != ?", c->pad), 0);
  assert_int_equal(q_int(conn, "SELECT count(*) FROM crash_rows WHERE producer = 0", 0), parent_rows);
  assert_int_equal(sqlite3_close(conn), SQLITE_OK);
  return found;
}

/* After the crash: lith opens the file and takes a write (producer 0). */
static void write_after(const char *db, const child_cfg *c, int64_t seq) {
  lith_options opt;
  lith *h = NULL;
  crash_options(&opt, c);
  int rc = lith_open(db, &opt, &h);
  if (rc != LITH_OK)
    fail_msg("lith_open after the crash: %s: %s", lith_errstr(rc), lith_errmsg(NULL));
  row_arg r = {0, seq, c->pad};
  rc = lith_do(h, insert_row_cmd, &r);
  if (rc != LITH_OK)
    fail_msg("write after the crash: %s: %s", lith_errstr(rc), lith_errmsg(h));
  assert_int_equal(lith_close(h), LITH_OK);
}

/* One crash round: run, kill, verify, write. Even rounds verify with plain
 * SQLite first (it recovers the WAL); odd ones let lith_open recover it and
 * write before the check. Returns the answered rows verified. */
static int64_t crash_round(const char *db, child_cfg *c, int iter, int kill_mode, int64_t delay_ns,
                           run_result *r, int64_t *committed) {
  c->base = 1 + (int64_t)iter * (c->nprod + c->nasync);
  run_child(db, c, kill_mode, delay_ns, r);
  assert_true(r->killed);
  assert_killed(r);
  if (iter % 2 == 0) {
    *committed += verify(db, c, r, 0, iter);
    write_after(db, c, iter);
  } else {
    write_after(db, c, iter);
    *committed += verify(db, c, r, 0, iter + 1);
  }
  return r->answered;
}

static void sync_rounds(int sync, const char *mode, const char *db) {
  seed_rng(mode);
  t_remove_db(db);
  child_cfg c = {sync, LITH_CHECKPOINT_WRITER, 1000, NPROD, 0, 64, 0, 0};
  int n = iters();
  int64_t answered = 0, committed = 0;
  int64_t t0 = now_ns();
  for (int i = 0; i < n; i++) {
    run_result r;
    answered +=
        crash_round(db, &c, i, KILL_AFTER_FIRST_ANSWER, rnd_between(20, 300) * 1000000, &r, &committed);
  }
  t_assert_integrity(db);
  print_message("crash[%s]: %d iterations, %lld answered rows verified (%lld committed), %.1f s\n", mode, n,
                (long long)answered, (long long)committed, (double)(now_ns() - t0) / 1e9);
}

static void test_crash_sync_full(void **state) {
  (void)state;
  sync_rounds(LITH_SYNC_FULL, "FULL", "crash_full.db");
}

static void test_crash_sync_normal(void **state) {
  (void)state;
  sync_rounds(LITH_SYNC_NORMAL, "NORMAL", "crash_normal.db");
}

/* The writer checkpoints after almost every batch (WRITER mode) or SQLite
 * inside almost every COMMIT (AUTO mode): a kill often lands in one. */
static void test_crash_during_checkpoints(void **state) {
  (void)state;
  const char *db = "crash_ckpt.db";
  seed_rng("checkpoint");
  t_remove_db(db);
  int n = iters() / 2 < 2 ? 2 : iters() / 2;
  int64_t answered = 0, committed = 0, ckpts = 0, ckpt_ns = 0, alive_ns = 0;
  int64_t t0 = now_ns();
  for (int i = 0; i < n; i++) {
    child_cfg c = {i % 2 ? LITH_SYNC_NORMAL : LITH_SYNC_FULL,
                   i % 4 < 2 ? LITH_CHECKPOINT_WRITER : LITH_CHECKPOINT_AUTO,
                   4,
                   NPROD,
                   0,
                   1500,
                   0,
                   0};
    run_result r;
    answered +=
        crash_round(db, &c, i, KILL_AFTER_FIRST_ANSWER, rnd_between(20, 300) * 1000000, &r, &committed);
    ckpts += r.ckpts;
    ckpt_ns += r.ckpt_ns;
    alive_ns += r.alive_ns;
  }
  t_assert_integrity(db);
  /* the share of the child's life spent checkpointing: the odds that a
   * kill landed inside a checkpoint */
  print_message("crash[checkpoint]: %d iterations, %lld answered rows verified (%lld committed), "
                "%lld checkpoints seen (checkpointing %.0f%% of the time), %.1f s\n",
                n, (long long)answered, (long long)committed, (long long)ckpts,
                alive_ns ? 100.0 * (double)ckpt_ns / (double)alive_ns : 0.0, (double)(now_ns() - t0) / 1e9);
  assert_true(ckpts > 0);
}

/* Killed inside lith_close: first a clean round measures how long close
 * takes (and checks a clean close keeps exactly what was answered and
 * leaves the WAL empty), then the kills are drawn over that time. */
static void test_crash_during_close(void **state) {
  (void)state;
  const char *db = "crash_close.db";
  seed_rng("close");
  t_remove_db(db);
  int n = iters() / 4 < 2 ? 2 : iters() / 4;
  int64_t answered = 0, committed = 0;
  int in_close = 0;
  int64_t t0 = now_ns();
  /* a large WAL (no checkpoint before close) and requests queued at close */
  child_cfg c = {LITH_SYNC_FULL, LITH_CHECKPOINT_WRITER, 1 << 30, NPROD, 0, 3000, 400, 64};

  run_result r;
  c.base = 1;
  run_child(db, &c, KILL_NONE, 0, &r);
  assert_exited_ok(&r);
  assert_true(r.closing && r.closed);
  for (int i = 0; i < c.nasync; i++)
    assert_int_equal(r.logged[c.nprod + i], 1); /* every queued request answered OK */
  struct stat sb;
  assert_true(stat("crash_close.db-wal", &sb) != 0 || sb.st_size == 0);
  committed += verify(db, &c, &r, 1, 0);
  answered += r.answered;
  int64_t close_ns = r.t_closed - r.t_closing;
  assert_true(close_ns >= 0);

  /* n rounds, and more (up to 8) until one kill did land inside close */
  int rounds = 0;
  for (int i = 1; i <= n || (in_close == 0 && i <= n + 8); i++, rounds++) {
    c.sync = i % 2 ? LITH_SYNC_NORMAL : LITH_SYNC_FULL;
    c.base = 1 + (int64_t)i * (c.nprod + c.nasync);
    run_child(db, &c, KILL_AFTER_CLOSING, rnd_between(0, close_ns * 3 / 4), &r);
    assert_true(r.closing);
    if (r.closed) {
      /* lith_close returned before the kill landed: fine, if it exited 0;
       * aim the next kills within this close time if it was shorter */
      if (!WIFSIGNALED(r.status))
        assert_exited_ok(&r);
      if (r.t_closed - r.t_closing < close_ns)
        close_ns = r.t_closed - r.t_closing;
    } else {
      assert_killed(&r);
      in_close++;
    }
    committed += verify(db, &c, &r, 0, i - 1);
    write_after(db, &c, i - 1);
    answered += r.answered;
  }
  t_assert_integrity(db);
  print_message(
      "crash[close]: 1 clean + %d killed iterations (%d killed inside lith_close, close took %.1f ms), "
      "%lld answered rows verified (%lld committed), %.1f s\n",
      rounds, in_close, (double)close_ns / 1e6, (long long)answered, (long long)committed,
      (double)(now_ns() - t0) / 1e9);
  assert_true(in_close > 0);
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
  g_argv0 = argv[0];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_crash_sync_full, kill_child),
      cmocka_unit_test_teardown(test_crash_sync_normal, kill_child),
      cmocka_unit_test_teardown(test_crash_during_checkpoints, kill_child),
      cmocka_unit_test_teardown(test_crash_during_close, kill_child),
  };
  return cmocka_run_group_tests_name("writer/crash", tests, NULL, NULL);
}
