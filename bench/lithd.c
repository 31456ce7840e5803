/*
 * bench/lithd — what lithd, one writer behind HTTP/JSON, buys the processes
 * that today each open the database and write to it themselves.
 *
 * The workload is bench/writer's transfer, as four statements on the same
 * schema: client c owns accounts 10c..10c+9 and topic c; a transfer debits
 * one of its accounts, credits another, appends (client, seq, src, dst,
 * amount) to the ledger and bumps topic c's version. Balances are seeded so
 * high that the CHECK (balance >= 0) never refuses. (bench/writer's command
 * also reads the balance first; over HTTP that read would be a fifth
 * statement that adds nothing the CHECK does not, so both arms here leave it
 * out.)
 *
 * A cell is (synchronous NORMAL|FULL, clients N). Arms, each on a fresh
 * database seeded with plain SQLite (WAL, then closed so the WAL is empty),
 * removed afterwards:
 *
 *   lithd      the bench spawns `lithd --db PATH --listen 127.0.0.1:0
 *              --synchronous MODE` (default checkpointing: WRITER), reads the
 *              port from the line it prints, and holds N keep-alive HTTP/1.1
 *              connections to it. Each connection is a closed loop: POST
 *              /v1/do with one transfer, wait for the answer, send the next.
 *              SIGTERM at the end; lithd must exit 0.
 *   multiproc  N processes (fork), each with its own sqlite3 connection to
 *              the file (busy_timeout 30 s, lithd's pragmas), one BEGIN
 *              IMMEDIATE ... COMMIT per transfer: what multi-process apps do.
 *
 * The client must stay cheap: it shares the machine's CPUs with lithd, and
 * every cycle it burns is one lithd does not get. So it is one thread and one
 * epoll set over nonblocking sockets (TCP_NODELAY). Each connection's request
 * is built once: every number sits in a fixed-width slot padded with spaces
 * (JSON allows whitespace after a value), so Content-Length never changes and
 * sending a transfer is ten integer-to-text copies and one send(). Answers are
 * read with one recv() per readiness event and parsed only as far as the
 * status line and Content-Length; the body is skipped. An answer that is not
 * 200, a broken connection or a malformed answer is an error. The whole
 * answer must fit in 16 KiB (a transfer's is about 500 bytes).
 *
 * A third, idle connection asks GET /v1/stats at the window's two edges:
 * commands/batches between them is lithd's mean commands per transaction.
 * At the same edges the bench reads the CPU time of each of lithd's threads
 * (/proc/PID/task/TID/stat: the loop thread that runs h2o and jansson,
 * lith-writer, lith-waker, lith-checkpoint) and its own, so the tables say
 * where two shared CPUs went. For multiproc it reads the N processes' CPU
 * time the same way.
 *
 * Timing, as in bench/writer: after --warmup seconds a window of --seconds;
 * a command counts when its answer arrives inside the window. Latency is
 * from just before send() (or BEGIN IMMEDIATE) to the complete answer (or the
 * end of COMMIT), so for multiproc it includes the wait for the write lock,
 * and for lithd the time the client thread took to notice the answer.
 * Percentiles are exact over every value unless more were recorded than the
 * buffers hold (then a weighted uniform sample; the CSV says "sampled").
 * Rounds interleave: round r runs every arm of every cell before round r+1,
 * and odd rounds run multiproc before lithd, so the machine's drift hits
 * both arms alike. Reported: median over rounds and the range.
 *
 * After every arm the database is checked with plain SQLite: quick_check,
 * money conserved, ledger rows == commands answered OK (in total and per
 * client), topic versions == commands answered OK. Each mismatch is an
 * error; the exit status is 0 only when no arm had an error (a missed target
 * is reported, not an error).
 *
 * This program links SQLite only, not liblith: lithd is the thing measured,
 * as a separate process.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#ifndef LITHD_PATH
#define LITHD_PATH "build/default/tools/lithd/lithd"
#endif

/* ---- the workload -------------------------------------------------------- */

enum { ACCOUNTS_PER_CLIENT = 10, MAX_AMOUNT = 50 };
#define START_BALANCE INT64_C(1000000000000) /* 10^12: never refused */

#define SQL_DEBIT "UPDATE accounts SET balance = balance - ? WHERE id = ?"
#define SQL_CREDIT "UPDATE accounts SET balance = balance + ? WHERE id = ?"
#define SQL_LEDGER "INSERT INTO ledger(producer, seq, src, dst, amount) VALUES (?, ?, ?, ?, ?)"
#define SQL_TOPIC "UPDATE topics SET version = version + 1 WHERE id = ?"

static const char SCHEMA[] =
    "CREATE TABLE accounts(id INTEGER PRIMARY KEY, balance INTEGER NOT NULL CHECK (balance >= 0));"
    "CREATE TABLE ledger(id INTEGER PRIMARY KEY, producer INTEGER NOT NULL, seq INTEGER NOT NULL,"
    " src INTEGER NOT NULL, dst INTEGER NOT NULL, amount INTEGER NOT NULL);"
    "CREATE TABLE topics(id INTEGER PRIMARY KEY, version INTEGER NOT NULL);";

/* lithd's connection settings (lith_options_default): the baseline gets the same. */
enum { CACHE_SIZE_KIB = 16384, BUSY_MS_MULTI = 30000 };

typedef struct transfer {
  int64_t client, seq, src, dst, amount;
} transfer;

/* xorshift64*: per client, no shared state. */
static uint64_t rng_next(uint64_t *s) {
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * UINT64_C(2685821657736338717);
}

static uint64_t rng_seed(uint64_t a, uint64_t b) {
  uint64_t s = (a + 1) * UINT64_C(0x9E3779B97F4A7C15) ^ (b + 7) * UINT64_C(0xBF58476D1CE4E5B9);
  return s ? s : 1;
}

static transfer make_transfer(int64_t client, int64_t seq, uint64_t *rng) {
  transfer t;
  int64_t base = client * ACCOUNTS_PER_CLIENT;
  int64_t a = (int64_t)(rng_next(rng) % ACCOUNTS_PER_CLIENT);
  int64_t b = (a + 1 + (int64_t)(rng_next(rng) % (ACCOUNTS_PER_CLIENT - 1))) % ACCOUNTS_PER_CLIENT;
  t.client = client;
  t.seq = seq;
  t.src = base + a;
  t.dst = base + b;
  t.amount = 1 + (int64_t)(rng_next(rng) % MAX_AMOUNT);
  return t;
}

/* ---- clock ----------------------------------------------------------------- */

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_until(int64_t t) {
  struct timespec ts = {(time_t)(t / 1000000000), (long)(t % 1000000000)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
    ;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
    ;
}

/* ---- latency recording ------------------------------------------------------ */

#define LAT_BUDGET 2000000 /* values kept per arm run, over all holders */

typedef struct lat_buf {
  uint64_t *v;
  size_t cap, n;     /* n <= cap values kept */
  uint64_t seen;     /* values offered */
  uint64_t sum, max; /* over every value offered */
  uint64_t rng;
} lat_buf;

static void lat_add(lat_buf *b, uint64_t ns) {
  b->seen++;
  b->sum += ns;
  if (ns > b->max)
    b->max = ns;
  if (b->n < b->cap) {
    b->v[b->n++] = ns;
    return;
  }
  uint64_t j = rng_next(&b->rng) % b->seen; /* reservoir: keep with probability cap/seen */
  if (j < b->cap)
    b->v[j] = ns;
}

/* Values one holder keeps: a share of the budget, never fewer than 4096,
 * never more than 500k per second of window. */
static size_t lat_cap(int holders, double seconds) {
  double bound = seconds * 500000.0 + 1024;
  double share = (double)LAT_BUDGET / (holders > 0 ? holders : 1);
  double cap = share < bound ? share : bound;
  return cap < 4096 ? 4096 : (size_t)cap;
}

typedef struct weighted {
  uint64_t v;
  double w;
} weighted;

static int cmp_weighted(const void *a, const void *b) {
  uint64_t x = ((const weighted *)a)->v, y = ((const weighted *)b)->v;
  return (x > y) - (x < y);
}

typedef struct lat_summary {
  uint64_t count, max;
  double p50, p99; /* ns; NAN when empty */
  int sampled;
} lat_summary;

/* Merge the buffers; nearest-rank quantiles, each value weighted by its
 * holder's seen/kept. Returns -1 when out of memory. */
static int lat_merge(lat_buf *const *bufs, int nb, lat_summary *out) {
  memset(out, 0, sizeof *out);
  out->p50 = out->p99 = NAN;
  size_t n = 0;
  for (int i = 0; i < nb; i++) {
    n += bufs[i]->n;
    out->count += bufs[i]->seen;
    if (bufs[i]->max > out->max)
      out->max = bufs[i]->max;
    if (bufs[i]->seen > bufs[i]->n)
      out->sampled = 1;
  }
  if (n == 0)
    return 0;
  weighted *all = malloc(n * sizeof *all);
  if (!all)
    return -1;
  size_t m = 0;
  double total = 0;
  for (int i = 0; i < nb; i++) {
    double w = bufs[i]->n ? (double)bufs[i]->seen / (double)bufs[i]->n : 0;
    for (size_t j = 0; j < bufs[i]->n; j++) {
      all[m].v = bufs[i]->v[j];
      all[m].w = w;
      m++;
    }
    total += w * (double)bufs[i]->n;
  }
  qsort(all, m, sizeof *all, cmp_weighted);
  const double qs[2] = {0.50, 0.99};
  double *dst[2] = {&out->p50, &out->p99};
  for (int k = 0; k < 2; k++) {
    double want = qs[k] * total * (1 - 1e-12), cum = 0;
    size_t j = 0;
    for (; j < m; j++) {
      cum += all[j].w;
      if (cum >= want)
        break;
    }
    *dst[k] = (double)all[j < m ? j : m - 1].v;
  }
  free(all);
  return 0;
}

/* ---- configuration ------------------------------------------------------------ */

enum { ARM_LITHD, ARM_MULTI, NARMS };
static const char *const ARM_NAME[NARMS] = {"lithd", "multiproc"};

enum { SYNC_NORMAL, SYNC_FULL };
static const char *sync_name(int s) { return s == SYNC_FULL ? "FULL" : "NORMAL"; }
static const char *sync_arg(int s) { return s == SYNC_FULL ? "full" : "normal"; }

enum { MAX_LIST = 16, MAX_CONNS = 4096 };

typedef struct config {
  int conns[MAX_LIST], nconns;
  int sync[2], nsync;
  int arms[NARMS]; /* enabled */
  double seconds, warmup;
  int rounds;
  const char *db_dir;
  const char *csv;
  const char *lithd;
} config;

/* ---- metrics and results ------------------------------------------------------- */

/* lithd's threads, by name (the loop thread is the process's first). */
enum { T_LOOP, T_WRITER, T_WAKER, T_CKPT, T_OTHER, NTHREAD };

enum {
  M_CMDS_S,  /* commands answered OK per second of the window */
  M_P50,     /* call latency, ms */
  M_P99,
  M_MAX,
  M_CMDS_TX, /* lithd: commands per transaction over the window (/v1/stats) */
  M_CPU_SRV, /* lithd: its CPU time over the window, in CPUs (1.0 = one CPU busy) */
  M_CPU_T0,  /* lithd: per thread kind, T_LOOP .. T_OTHER */
  M_CPU_CLI = M_CPU_T0 + NTHREAD, /* the client thread (lithd) or the N processes (multiproc), in CPUs */
  M_US_SRV,  /* lithd CPU microseconds per command */
  M_US_CLI,  /* client CPU microseconds per command */
  M_CPU_ELSE, /* the machine's busy CPU time not accounted above: other processes, interrupts (in CPUs) */
  NMETRIC
};

typedef struct result {
  int ran;
  double m[NMETRIC]; /* NAN: not measured */
  uint64_t commands; /* answered OK inside the window */
  int64_t errors;
  int sampled;
  double wall_s; /* the whole arm: setup, run, stop and check */
} result;

/* ---- one arm run ------------------------------------------------------------------ */

typedef struct run {
  const config *cfg;
  int arm, sync, N, round;
  char path[4096];
  char log[4200]; /* lithd's stderr */
  int msgs;       /* error messages printed */
} run;

static void report_error(run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report_error(run *r, const char *fmt, ...) {
  if (r->msgs++ >= 5)
    return;
  char buf[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  fprintf(stderr, "  error [%s %s N=%d round %d]: %s\n", ARM_NAME[r->arm], sync_name(r->sync), r->N, r->round + 1,
          buf);
}

/* ---- the database ------------------------------------------------------------------ */

static void remove_db(const char *path) {
  static const char *const suffix[] = {"", "-wal", "-shm", "-journal", "-lithd.lock"};
  char p[4200];
  for (size_t i = 0; i < sizeof suffix / sizeof *suffix; i++) {
    snprintf(p, sizeof p, "%s%s", path, suffix[i]);
    unlink(p);
  }
}

/* A connection with the pragmas lithd gives its writer. */
static int open_plain(const char *path, int sync, int busy_ms, sqlite3 **out) {
  sqlite3 *conn = NULL;
  char sql[300];
  int rc = sqlite3_open_v2(path, &conn, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
  if (rc != SQLITE_OK)
    goto fail;
  sqlite3_extended_result_codes(conn, 1);
  sqlite3_busy_timeout(conn, busy_ms);
  snprintf(sql, sizeof sql,
           "PRAGMA journal_mode=WAL; PRAGMA synchronous=%s; PRAGMA cache_size=-%d; PRAGMA mmap_size=0;"
           " PRAGMA foreign_keys=ON; PRAGMA temp_store=MEMORY;",
           sync_name(sync), CACHE_SIZE_KIB);
  rc = sqlite3_exec(conn, sql, NULL, NULL, NULL);
  if (rc != SQLITE_OK)
    goto fail;
  sqlite3_wal_autocheckpoint(conn, 1000); /* SQLite's default, and lithd's checkpoint_pages */
  *out = conn;
  return SQLITE_OK;
fail:
  fprintf(stderr, "open %s: %s\n", path, conn ? sqlite3_errmsg(conn) : sqlite3_errstr(rc));
  sqlite3_close(conn);
  *out = NULL;
  return rc ? rc : SQLITE_ERROR;
}

static int step_done(sqlite3_stmt *st) {
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
}

static int step2(sqlite3_stmt *st, int64_t a, int64_t b) {
  sqlite3_bind_int64(st, 1, a);
  sqlite3_bind_int64(st, 2, b);
  return step_done(st);
}

/* A fresh database: schema, N*10 accounts, N topics; closed, so the WAL is
 * checkpointed and gone. */
static int create_db(const char *path, int N) {
  sqlite3 *conn;
  sqlite3_stmt *acc = NULL, *top = NULL;
  int rc;
  remove_db(path);
  if (open_plain(path, SYNC_NORMAL, 5000, &conn) != SQLITE_OK)
    return -1;
  rc = sqlite3_exec(conn, SCHEMA, NULL, NULL, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_exec(conn, "BEGIN", NULL, NULL, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(conn, "INSERT INTO accounts(id, balance) VALUES (?, ?)", -1, &acc, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(conn, "INSERT INTO topics(id, version) VALUES (?, 0)", -1, &top, NULL);
  for (int64_t c = 0; rc == SQLITE_OK && c < N; c++) {
    for (int64_t k = 0; rc == SQLITE_OK && k < ACCOUNTS_PER_CLIENT; k++)
      rc = step2(acc, c * ACCOUNTS_PER_CLIENT + k, START_BALANCE);
    if (rc == SQLITE_OK) {
      sqlite3_bind_int64(top, 1, c);
      rc = step_done(top);
    }
  }
  sqlite3_finalize(acc);
  sqlite3_finalize(top);
  if (rc == SQLITE_OK)
    rc = sqlite3_exec(conn, "COMMIT", NULL, NULL, NULL);
  if (rc != SQLITE_OK)
    fprintf(stderr, "creating %s: %s\n", path, sqlite3_errmsg(conn));
  if (sqlite3_close(conn) != SQLITE_OK && rc == SQLITE_OK)
    rc = SQLITE_ERROR;
  return rc == SQLITE_OK ? 0 : -1;
}

static int query_int64(sqlite3 *conn, const char *sql, int64_t *out) {
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(conn, sql, -1, &st, NULL);
  if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    *out = sqlite3_column_int64(st, 0);
    rc = SQLITE_OK;
  }
  sqlite3_finalize(st);
  return rc;
}

/* Check the database after an arm; `ok` has N entries, the commands answered
 * OK per client. Returns the number of mismatches. */
static int64_t verify_db(run *r, const int64_t *ok) {
  int64_t bad = 0, total = 0, v = 0;
  int64_t *rows = NULL, *vers = NULL;
  sqlite3 *conn = NULL;
  sqlite3_stmt *st = NULL;
  for (int c = 0; c < r->N; c++)
    total += ok[c];
  if (open_plain(r->path, SYNC_NORMAL, 5000, &conn) != SQLITE_OK) {
    report_error(r, "check: cannot open the database");
    return 1;
  }
  if (sqlite3_prepare_v2(conn, "PRAGMA quick_check", -1, &st, NULL) != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW ||
      strcmp((const char *)sqlite3_column_text(st, 0), "ok") != 0) {
    report_error(r, "check: quick_check failed");
    bad++;
  }
  sqlite3_finalize(st);
  st = NULL;
  int64_t money = (int64_t)r->N * ACCOUNTS_PER_CLIENT * START_BALANCE;
  if (query_int64(conn, "SELECT sum(balance) FROM accounts", &v) != SQLITE_OK || v != money) {
    report_error(r, "check: money %lld, expected %lld", (long long)v, (long long)money);
    bad++;
  }
  if (query_int64(conn, "SELECT count(*) FROM ledger", &v) != SQLITE_OK || v != total) {
    report_error(r, "check: %lld ledger rows, %lld commands answered OK", (long long)v, (long long)total);
    bad++;
  }
  if (query_int64(conn, "SELECT sum(version) FROM topics", &v) != SQLITE_OK || v != total) {
    report_error(r, "check: topic versions sum to %lld, %lld commands answered OK", (long long)v, (long long)total);
    bad++;
  }
  rows = calloc((size_t)r->N, sizeof *rows);
  vers = calloc((size_t)r->N, sizeof *vers);
  if (!rows || !vers) {
    report_error(r, "check: out of memory");
    bad++;
    goto out;
  }
  if (sqlite3_prepare_v2(conn, "SELECT producer, count(*) FROM ledger GROUP BY producer", -1, &st, NULL) ==
      SQLITE_OK) {
    while (sqlite3_step(st) == SQLITE_ROW) {
      int64_t c = sqlite3_column_int64(st, 0);
      if (c >= 0 && c < r->N)
        rows[c] = sqlite3_column_int64(st, 1);
      else
        bad++;
    }
  }
  sqlite3_finalize(st);
  st = NULL;
  if (sqlite3_prepare_v2(conn, "SELECT id, version FROM topics", -1, &st, NULL) == SQLITE_OK) {
    while (sqlite3_step(st) == SQLITE_ROW) {
      int64_t c = sqlite3_column_int64(st, 0);
      if (c >= 0 && c < r->N)
        vers[c] = sqlite3_column_int64(st, 1);
    }
  }
  sqlite3_finalize(st);
  st = NULL;
  for (int c = 0; c < r->N; c++)
    if (rows[c] != ok[c] || vers[c] != ok[c]) {
      report_error(r, "check: client %d: %lld answered OK, %lld ledger rows, topic version %lld", c,
                   (long long)ok[c], (long long)rows[c], (long long)vers[c]);
      bad++;
    }
out:
  free(rows);
  free(vers);
  sqlite3_close(conn);
  return bad;
}

/* ---- CPU time from /proc ------------------------------------------------------------ */

/* utime + stime of one /proc/.../stat file, in seconds; the comm field
 * (between the parentheses) into comm. -1 when it cannot be read. */
static double stat_cpu_s(const char *path, char *comm, size_t commsz) {
  char buf[1024];
  unsigned long long ut = 0, st = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return -1;
  buf[n] = '\0';
  char *l = strchr(buf, '('), *r = strrchr(buf, ')');
  if (!l || !r || r < l)
    return -1;
  if (comm) {
    size_t len = (size_t)(r - l - 1) < commsz - 1 ? (size_t)(r - l - 1) : commsz - 1;
    memcpy(comm, l + 1, len);
    comm[len] = '\0';
  }
  /* after ")": state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime */
  if (sscanf(r + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
    return -1;
  return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* lithd's CPU seconds per thread kind. Returns -1 when /proc fails. */
static int lithd_cpu(pid_t pid, double out[NTHREAD]) {
  char dir[64], path[128], comm[64];
  struct dirent *e;
  DIR *d;
  for (int k = 0; k < NTHREAD; k++)
    out[k] = 0;
  snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
  if (!(d = opendir(dir)))
    return -1;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9')
      continue;
    snprintf(path, sizeof path, "%s/%.20s/stat", dir, e->d_name);
    double s = stat_cpu_s(path, comm, sizeof comm);
    if (s < 0)
      continue; /* a thread that just ended */
    int k = atoi(e->d_name) == (int)pid            ? T_LOOP
            : !strcmp(comm, "lith-writer")         ? T_WRITER
            : !strcmp(comm, "lith-waker")          ? T_WAKER
            : !strcmp(comm, "lith-checkpoint")     ? T_CKPT
                                                   : T_OTHER;
    out[k] += s;
  }
  closedir(d);
  return 0;
}

/* The machine's busy CPU seconds (every CPU, /proc/stat); -1 on failure. */
static double machine_busy_s(void) {
  unsigned long long v[8] = {0};
  FILE *f = fopen("/proc/stat", "r");
  if (!f)
    return -1;
  int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
                 &v[7]);
  fclose(f);
  if (n != 8)
    return -1;
  /* user nice system idle iowait irq softirq steal: busy is all but idle and iowait */
  return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)sysconf(_SC_CLK_TCK);
}

static double self_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the lithd process ------------------------------------------------------------- */

/* Print the end of lithd's stderr, for a failure. */
static void print_log_tail(const char *log) {
  char buf[2048];
  int fd = open(log, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return;
  off_t size = lseek(fd, 0, SEEK_END);
  off_t from = size > (off_t)sizeof buf - 1 ? size - (off_t)sizeof buf + 1 : 0;
  ssize_t n = pread(fd, buf, sizeof buf - 1, from);
  close(fd);
  if (n > 0) {
    buf[n] = '\0';
    fprintf(stderr, "  lithd's stderr (%s), its end:\n%s", log, buf);
  }
}

/* Spawn lithd on r->path; its stdout comes back through a pipe, its stderr
 * goes to r->log. Returns the port, or -1 (then *pid is reaped or -1). */
static int start_lithd(run *r, pid_t *pid) {
  int pfd[2] = {-1, -1}, port = -1, spawned = 0;
  posix_spawn_file_actions_t fa;
  char line[1024] = "";
  size_t len = 0;
  char *argv[] = {(char *)r->cfg->lithd, "--db",          r->path, "--listen", "127.0.0.1:0", "--synchronous",
                  (char *)sync_arg(r->sync), NULL};
  *pid = -1;
  if (pipe2(pfd, O_CLOEXEC) != 0) {
    report_error(r, "pipe: %s", strerror(errno));
    return -1;
  }
  if (posix_spawn_file_actions_init(&fa) != 0) {
    report_error(r, "posix_spawn_file_actions_init failed");
    goto out;
  }
  int rc = posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
  if (rc == 0)
    rc = posix_spawn_file_actions_addopen(&fa, 2, r->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (rc == 0)
    rc = posix_spawn(pid, r->cfg->lithd, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    report_error(r, "cannot start %s: %s", r->cfg->lithd, strerror(rc));
    *pid = -1;
    goto out;
  }
  spawned = 1;
  close(pfd[1]);
  pfd[1] = -1;
  /* The first line on stdout names the URL; 10 s at most. */
  while (!memchr(line, '\n', len)) {
    struct pollfd p = {pfd[0], POLLIN, 0};
    if (len >= sizeof line - 1 || poll(&p, 1, 10000) != 1) {
      report_error(r, "lithd printed no URL line within 10 s");
      goto out;
    }
    ssize_t got = read(pfd[0], line + len, sizeof line - 1 - len);
    if (got <= 0) {
      report_error(r, "lithd exited before it listened");
      goto out;
    }
    len += (size_t)got;
    line[len] = '\0';
  }
  const char *url = strstr(line, "http://127.0.0.1:");
  if (url)
    port = atoi(url + strlen("http://127.0.0.1:"));
  if (port <= 0 || port > 65535) {
    report_error(r, "no port in lithd's line: %s", line);
    port = -1;
  }
out:
  if (pfd[0] >= 0)
    close(pfd[0]); /* lithd writes nothing more on stdout */
  if (pfd[1] >= 0)
    close(pfd[1]);
  if (port < 0 && spawned) {
    int st;
    kill(*pid, SIGKILL);
    waitpid(*pid, &st, 0);
    print_log_tail(r->log);
    *pid = -1;
  }
  return port;
}

/* SIGTERM, wait (60 s at most); 0 when lithd exited 0. */
static int stop_lithd(run *r, pid_t pid) {
  int st = 0;
  pid_t got = 0;
  if (kill(pid, SIGTERM) != 0) {
    report_error(r, "kill(SIGTERM): %s", strerror(errno));
    return -1;
  }
  int64_t deadline = now_ns() + INT64_C(60000000000);
  while ((got = waitpid(pid, &st, WNOHANG)) == 0 && now_ns() < deadline)
    sleep_ms(2);
  if (got == 0) {
    report_error(r, "lithd did not stop within 60 s of SIGTERM; killed");
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    print_log_tail(r->log);
    return -1;
  }
  if (got < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    report_error(r, "lithd ended with %s %d", got < 0 ? "waitpid error" : WIFEXITED(st) ? "status" : "signal",
                 got < 0 ? errno : WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    print_log_tail(r->log);
    return -1;
  }
  return 0;
}

/* ---- the HTTP client ----------------------------------------------------------------- */

enum { NUM_W = 20, IN_CAP = 16384, NSLOT = 10 };
enum { F_AMT, F_SRC, F_DST, F_CLIENT, F_SEQ };

/* The request body, piece by piece: each text is followed by the number slot
 * `kind` (-1: the end). */
static const struct {
  const char *text;
  int kind;
} BODY[] = {{"{\"statements\":[{\"sql\":\"" SQL_DEBIT "\",\"params\":[", F_AMT},
            {",", F_SRC},
            {"]},{\"sql\":\"" SQL_CREDIT "\",\"params\":[", F_AMT},
            {",", F_DST},
            {"]},{\"sql\":\"" SQL_LEDGER "\",\"params\":[", F_CLIENT},
            {",", F_SEQ},
            {",", F_SRC},
            {",", F_DST},
            {",", F_AMT},
            {"]},{\"sql\":\"" SQL_TOPIC "\",\"params\":[", F_CLIENT},
            {"]}]}", -1}};

static const char STATS_REQ[] = "GET /v1/stats HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

typedef struct hconn {
  int fd;
  int id;            /* the client: its accounts and topic; -1 for the stats connection */
  char *req;         /* the request bytes (transfer: built once, numbers rewritten) */
  size_t req_len, sent;
  size_t slot[NSLOT];
  int kind[NSLOT];
  int busy;          /* a request is outstanding */
  int want_out;      /* EPOLLOUT registered */
  int64_t t0;        /* when its request was sent */
  int64_t seq, ok;   /* transfers sent, answered 200 */
  uint64_t rng;
  size_t in_len;
  char in[IN_CAP + 1];
} hconn;

/* The transfer request of connection c, with empty slots. */
static int build_request(hconn *c) {
  size_t body = 0, nslot = 0;
  for (size_t i = 0; i < sizeof BODY / sizeof *BODY; i++)
    body += strlen(BODY[i].text) + (BODY[i].kind >= 0 ? NUM_W : 0);
  char head[200];
  int hl = snprintf(head, sizeof head,
                    "POST /v1/do HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    "Content-Length: %zu\r\n\r\n",
                    body);
  c->req = malloc((size_t)hl + body + 1);
  if (!c->req)
    return -1;
  memcpy(c->req, head, (size_t)hl);
  char *p = c->req + hl;
  for (size_t i = 0; i < sizeof BODY / sizeof *BODY; i++) {
    size_t tl = strlen(BODY[i].text);
    memcpy(p, BODY[i].text, tl);
    p += tl;
    if (BODY[i].kind < 0)
      continue;
    c->slot[nslot] = (size_t)(p - c->req);
    c->kind[nslot++] = BODY[i].kind;
    memset(p, ' ', NUM_W);
    p += NUM_W;
  }
  *p = '\0';
  c->req_len = (size_t)(p - c->req);
  return nslot == NSLOT ? 0 : -1;
}

/* v (>= 0) in decimal, left-aligned in a NUM_W slot padded with spaces. */
static void put_num(char *slot, int64_t v) {
  char tmp[24];
  int n = 0;
  uint64_t u = (uint64_t)v;
  do {
    tmp[n++] = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  for (int i = 0; i < NUM_W; i++)
    slot[i] = i < n ? tmp[n - 1 - i] : ' ';
}

static void fill_request(hconn *c, const transfer *t) {
  for (int i = 0; i < NSLOT; i++) {
    int64_t v = c->kind[i] == F_AMT ? t->amount
                : c->kind[i] == F_SRC ? t->src
                : c->kind[i] == F_DST ? t->dst
                : c->kind[i] == F_CLIENT ? t->client
                                         : t->seq;
    put_num(c->req + c->slot[i], v);
  }
}

/* One parsed answer. */
typedef struct answer {
  int status;
  size_t used;  /* bytes of the answer (headers and body) */
  int closes;   /* "Connection: close" */
  const char *body;
  size_t body_len;
} answer;

/* 1: a whole answer is in in[0..len) (in[len] is a NUL); 0: more is
 * needed; -1: not an answer this client reads. */
static int parse_answer(const char *in, size_t len, answer *a) {
  const char *end = memmem(in, len, "\r\n\r\n", 4);
  long long cl = -1;
  memset(a, 0, sizeof *a);
  if (!end)
    return len >= IN_CAP ? -1 : 0;
  if (end - in < 12 || memcmp(in, "HTTP/1.", 7) != 0 || in[8] != ' ' || in[9] < '1' || in[9] > '5')
    return -1;
  a->status = (in[9] - '0') * 100 + (in[10] - '0') * 10 + (in[11] - '0');
  const char *p = memchr(in, '\n', (size_t)(end - in));
  while (p && p < end) {
    p++; /* start of a header line */
    if (!strncasecmp(p, "content-length:", 15))
      cl = strtoll(p + 15, NULL, 10);
    else if (!strncasecmp(p, "transfer-encoding:", 18))
      return -1; /* chunked: lithd sends a length */
    else if (!strncasecmp(p, "connection:", 11) && !strncasecmp(p + 11 + strspn(p + 11, " \t"), "close", 5))
      a->closes = 1;
    p = memchr(p, '\n', (size_t)(end + 2 - p));
  }
  size_t hl = (size_t)(end - in) + 4;
  if (cl < 0 || (size_t)cl > IN_CAP - hl)
    return -1;
  if (len < hl + (size_t)cl)
    return 0;
  a->used = hl + (size_t)cl;
  a->body = in + hl;
  a->body_len = (size_t)cl;
  return 1;
}

static uint64_t json_u64(const char *body, const char *key) {
  const char *p = strstr(body, key);
  return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

typedef struct client {
  run *r;
  int ep, port, N;
  hconn *c;    /* N transfer connections */
  hconn stats; /* GET /v1/stats at the window's edges */
  int64_t ws, we;
  int inflight;         /* transfers outstanding */
  int stats_pending;    /* a stats request outstanding */
  int stats_got;        /* answers received: 0, 1, 2 */
  uint64_t cmds[2], batches[2];
  lat_buf lat;
  uint64_t win_ok;
  int64_t errors;
} client;

static int conn_open(client *cl, hconn *c) {
  struct sockaddr_in sa;
  int one = 1;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)cl->port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c->fd < 0)
    goto fail;
  if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
      setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0 ||
      fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK) != 0)
    goto fail;
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
  if (epoll_ctl(cl->ep, EPOLL_CTL_ADD, c->fd, &ev) != 0)
    goto fail;
  c->in_len = 0;
  c->busy = c->want_out = 0;
  return 0;
fail:
  report_error(cl->r, "connection %d: %s", c->id, strerror(errno));
  if (c->fd >= 0)
    close(c->fd);
  c->fd = -1;
  return -1;
}

static void conn_close(hconn *c) {
  if (c->fd >= 0)
    close(c->fd); /* leaves the epoll set with it */
  c->fd = -1;
}

static int set_out(client *cl, hconn *c, int on) {
  struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c};
  if (epoll_ctl(cl->ep, EPOLL_CTL_MOD, c->fd, &ev) != 0)
    return -1;
  c->want_out = on;
  return 0;
}

/* Send what is left of c's request. 0, or -1 on a broken connection. */
static int conn_flush(client *cl, hconn *c) {
  while (c->sent < c->req_len) {
    ssize_t n = send(c->fd, c->req + c->sent, c->req_len - c->sent, MSG_NOSIGNAL);
    if (n > 0) {
      c->sent += (size_t)n;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return c->want_out ? 0 : set_out(cl, c, 1);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return -1;
    }
  }
  return c->want_out ? set_out(cl, c, 0) : 0;
}

static void conn_failed(client *cl, hconn *c, const char *what);

/* Start c's next request (a transfer, or GET /v1/stats). */
static void conn_send(client *cl, hconn *c) {
  if (c->fd < 0)
    return;
  if (c->id >= 0) {
    transfer t = make_transfer(c->id, ++c->seq, &c->rng);
    fill_request(c, &t);
    cl->inflight++;
  } else {
    cl->stats_pending = 1;
  }
  c->busy = 1;
  c->sent = 0;
  c->t0 = now_ns();
  if (conn_flush(cl, c) != 0)
    conn_failed(cl, c, "send");
}

/* A broken connection: an error; the outstanding request's fate is unknown
 * (the database check will tell). Transfer connections reconnect while the
 * window is open. */
static void conn_failed(client *cl, hconn *c, const char *what) {
  cl->errors++;
  report_error(cl->r, "connection %d: %s failed%s%s", c->id, what, errno ? ": " : "", errno ? strerror(errno) : "");
  if (c->busy) {
    if (c->id >= 0)
      cl->inflight--;
    else
      cl->stats_pending = 0;
    c->busy = 0;
  }
  conn_close(c);
  if (c->id >= 0 && now_ns() < cl->we && conn_open(cl, c) == 0)
    conn_send(cl, c);
}

static void on_answer(client *cl, hconn *c, const answer *a) {
  int64_t t1 = now_ns();
  c->busy = 0;
  if (c->id < 0) { /* stats */
    cl->stats_pending = 0;
    if (a->status != 200 || cl->stats_got >= 2) {
      cl->errors++;
      report_error(cl->r, "GET /v1/stats: HTTP %d", a->status);
      return;
    }
    cl->cmds[cl->stats_got] = json_u64(a->body, "\"commands\":");
    cl->batches[cl->stats_got] = json_u64(a->body, "\"batches\":");
    cl->stats_got++;
    return;
  }
  cl->inflight--;
  if (a->status == 200) {
    c->ok++;
    if (t1 >= cl->ws && t1 < cl->we) {
      cl->win_ok++;
      lat_add(&cl->lat, (uint64_t)(t1 - c->t0));
    }
  } else {
    cl->errors++;
    report_error(cl->r, "POST /v1/do: HTTP %d: %.*s", a->status, (int)(a->body_len < 300 ? a->body_len : 300),
                 a->body);
  }
  if (t1 < cl->we)
    conn_send(cl, c);
}

static void conn_readable(client *cl, hconn *c) {
  answer a;
  ssize_t n = recv(c->fd, c->in + c->in_len, IN_CAP - c->in_len, 0);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    return;
  if (n <= 0) {
    if (n == 0)
      errno = 0;
    conn_failed(cl, c, n == 0 ? "read (closed by lithd)" : "read");
    return;
  }
  c->in_len += (size_t)n;
  c->in[c->in_len] = '\0';
  int rc = parse_answer(c->in, c->in_len, &a);
  if (rc == 0)
    return;
  if (rc < 0 || !c->busy || a.used != c->in_len) {
    errno = 0;
    conn_failed(cl, c, rc < 0 ? "parsing the answer" : "an answer nobody asked for");
    return;
  }
  c->in_len = 0;
  on_answer(cl, c, &a);
  if (a.closes && c->fd >= 0) {
    errno = 0;
    conn_failed(cl, c, "keep-alive (lithd closed the connection)");
  }
}

/* The moment of a window edge: lithd's stats and everyone's CPU time. */
typedef struct snap {
  int64_t t;
  double thread[NTHREAD];
  int have_threads;
  double self, machine;
} snap;

static void take_snap(client *cl, pid_t pid, snap *s) {
  s->t = now_ns();
  s->have_threads = lithd_cpu(pid, s->thread) == 0;
  s->self = self_cpu_s();
  s->machine = machine_busy_s();
  if (cl->stats.fd >= 0 && !cl->stats.busy)
    conn_send(cl, &cl->stats);
}

/* Run the closed loops from now until every answer after the window came
 * back. Returns 0, or -1 when the client could not start at all. */
static int client_run(client *cl, pid_t pid, snap sn[2]) {
  const config *cfg = cl->r->cfg;
  enum { MAXEV = 256 };
  struct epoll_event ev[MAXEV];
  int edge = 0; /* snapshots taken */
  for (int i = 0; i < cl->N; i++)
    if (conn_open(cl, &cl->c[i]) != 0)
      return -1;
  if (conn_open(cl, &cl->stats) != 0)
    return -1;
  cl->ws = now_ns() + (int64_t)(cfg->warmup * 1e9);
  cl->we = cl->ws + (int64_t)(cfg->seconds * 1e9);
  int64_t drain_end = cl->we + INT64_C(60000000000);
  for (int i = 0; i < cl->N; i++)
    conn_send(cl, &cl->c[i]);
  for (;;) {
    int64_t now = now_ns();
    if (edge < 2 && now >= (edge == 0 ? cl->ws : cl->we)) {
      take_snap(cl, pid, &sn[edge]);
      edge++;
      continue;
    }
    if (edge == 2 && cl->inflight == 0 && !cl->stats_pending)
      break;
    if (now >= drain_end) {
      report_error(cl->r, "%d requests still unanswered 60 s after the window", cl->inflight);
      cl->errors += cl->inflight;
      break;
    }
    int64_t until = edge == 0 ? cl->ws : edge == 1 ? cl->we : now + 100000000;
    int timeout = (int)((until - now + 999999) / 1000000);
    int n = epoll_wait(cl->ep, ev, MAXEV, timeout);
    if (n < 0 && errno != EINTR) {
      report_error(cl->r, "epoll_wait: %s", strerror(errno));
      cl->errors++;
      return -1;
    }
    for (int i = 0; i < n; i++) {
      hconn *c = ev[i].data.ptr;
      if (c->fd < 0)
        continue; /* closed by an earlier event of this round */
      if ((ev[i].events & EPOLLOUT) && c->busy && c->sent < c->req_len && conn_flush(cl, c) != 0) {
        conn_failed(cl, c, "send");
        continue;
      }
      if (ev[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
        conn_readable(cl, c);
    }
  }
  return 0;
}

static void fill_latency(result *res, lat_buf *const *bufs, int nb, run *r) {
  lat_summary s;
  if (lat_merge(bufs, nb, &s) != 0) {
    report_error(r, "out of memory merging latencies");
    res->errors++;
    return;
  }
  res->m[M_P50] = s.p50 / 1e6;
  res->m[M_P99] = s.p99 / 1e6;
  res->m[M_MAX] = s.count ? (double)s.max / 1e6 : NAN;
  res->sampled |= s.sampled;
}

static void arm_lithd(run *r, result *res) {
  const config *cfg = r->cfg;
  client cl;
  snap sn[2];
  int64_t *ok = NULL;
  pid_t pid = -1;
  memset(&cl, 0, sizeof cl);
  memset(sn, 0, sizeof sn);
  cl.r = r;
  cl.N = r->N;
  cl.ep = -1;
  cl.stats.fd = -1;
  cl.stats.id = -1;
  cl.stats.req = (char *)STATS_REQ;
  cl.stats.req_len = strlen(STATS_REQ);
  cl.lat.cap = lat_cap(1, cfg->seconds);
  cl.lat.v = malloc(cl.lat.cap * sizeof *cl.lat.v);
  cl.lat.rng = rng_seed((uint64_t)r->round, 77);
  cl.c = calloc((size_t)r->N, sizeof *cl.c);
  ok = calloc((size_t)r->N, sizeof *ok);
  if (!cl.lat.v || !cl.c || !ok) {
    report_error(r, "out of memory");
    res->errors++;
    goto out;
  }
  for (int i = 0; i < r->N; i++) {
    cl.c[i].fd = -1;
    cl.c[i].id = i;
    cl.c[i].rng = rng_seed((uint64_t)i, (uint64_t)r->round * 1000 + 17);
    if (build_request(&cl.c[i]) != 0) {
      report_error(r, "out of memory");
      res->errors++;
      goto out;
    }
  }
  if ((cl.port = start_lithd(r, &pid)) < 0) {
    res->errors++;
    goto out;
  }
  if ((cl.ep = epoll_create1(EPOLL_CLOEXEC)) < 0) {
    report_error(r, "epoll_create1: %s", strerror(errno));
    res->errors++;
  } else if (client_run(&cl, pid, sn) != 0) {
    res->errors++;
  }
  for (int i = 0; i < r->N; i++) {
    conn_close(&cl.c[i]);
    ok[i] = cl.c[i].ok;
  }
  conn_close(&cl.stats);
  res->errors += cl.errors;
  if (stop_lithd(r, pid) != 0)
    res->errors++;
  pid = -1;

  res->commands = cl.win_ok;
  res->m[M_CMDS_S] = (double)cl.win_ok / cfg->seconds;
  lat_buf *bufs[1] = {&cl.lat};
  fill_latency(res, bufs, 1, r);
  if (cl.stats_got == 2 && cl.batches[1] > cl.batches[0])
    res->m[M_CMDS_TX] = (double)(cl.cmds[1] - cl.cmds[0]) / (double)(cl.batches[1] - cl.batches[0]);
  double dt = (double)(sn[1].t - sn[0].t) / 1e9;
  if (sn[0].t && sn[1].t && dt > 0) {
    if (sn[0].have_threads && sn[1].have_threads) {
      double total = 0;
      for (int k = 0; k < NTHREAD; k++) {
        double d = sn[1].thread[k] - sn[0].thread[k];
        res->m[M_CPU_T0 + k] = d / dt;
        total += d;
      }
      res->m[M_CPU_SRV] = total / dt;
      if (cl.win_ok)
        res->m[M_US_SRV] = total / dt * cfg->seconds / (double)cl.win_ok * 1e6;
    }
    res->m[M_CPU_CLI] = (sn[1].self - sn[0].self) / dt;
    if (sn[0].machine >= 0 && sn[1].machine >= 0 && !isnan(res->m[M_CPU_SRV]))
      res->m[M_CPU_ELSE] = (sn[1].machine - sn[0].machine) / dt - res->m[M_CPU_SRV] - res->m[M_CPU_CLI];
    if (cl.win_ok)
      res->m[M_US_CLI] = res->m[M_CPU_CLI] * cfg->seconds / (double)cl.win_ok * 1e6;
  }
  res->errors += verify_db(r, ok);
out:
  if (pid > 0) {
    int st;
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
  }
  if (cl.ep >= 0)
    close(cl.ep);
  if (cl.c)
    for (int i = 0; i < r->N; i++)
      free(cl.c[i].req);
  free(cl.c);
  free(cl.lat.v);
  free(ok);
}

/* ---- the multi-process baseline ------------------------------------------------------ */

/* Shared (MAP_SHARED) between the bench and its N processes: the window, and
 * one slot per process that only that process writes until it exits. */
typedef struct mp_slot {
  int64_t ok, win_ok, errors;
  lat_buf lat; /* its values live in the shared mapping too */
  char msg[256]; /* the first error */
} mp_slot;

typedef struct mp_shared {
  int64_t ws, we;
  mp_slot slot[];
} mp_shared;

typedef struct mp_stmts {
  sqlite3_stmt *debit, *credit, *ledger, *topic, *begin, *commit, *rollback;
} mp_stmts;

static void slot_error(mp_slot *s, const char *what, sqlite3 *conn, int rc) {
  s->errors++;
  if (!s->msg[0])
    snprintf(s->msg, sizeof s->msg, "%s: %s (%d)", what, conn ? sqlite3_errmsg(conn) : sqlite3_errstr(rc), rc);
}

/* BEGIN IMMEDIATE, the four statements, COMMIT; rolled back on failure. */
static int mp_transfer(sqlite3 *conn, const mp_stmts *s, const transfer *t) {
  int rc = step_done(s->begin);
  if (rc == SQLITE_OK)
    rc = step2(s->debit, t->amount, t->src);
  if (rc == SQLITE_OK)
    rc = step2(s->credit, t->amount, t->dst);
  if (rc == SQLITE_OK) {
    sqlite3_bind_int64(s->ledger, 1, t->client);
    sqlite3_bind_int64(s->ledger, 2, t->seq);
    sqlite3_bind_int64(s->ledger, 3, t->src);
    sqlite3_bind_int64(s->ledger, 4, t->dst);
    sqlite3_bind_int64(s->ledger, 5, t->amount);
    rc = step_done(s->ledger);
  }
  if (rc == SQLITE_OK) {
    sqlite3_bind_int64(s->topic, 1, t->client);
    rc = step_done(s->topic);
  }
  if (rc == SQLITE_OK)
    rc = step_done(s->commit);
  if (rc != SQLITE_OK && !sqlite3_get_autocommit(conn))
    step_done(s->rollback);
  return rc;
}

/* One process of the multiproc arm: open, say ready, wait for the gate (EOF
 * on go_fd), run until the window's end. Never returns. */
static void mp_child(run *r, mp_shared *sh, int id, int ready_fd, int go_fd) {
  mp_slot *s = &sh->slot[id];
  sqlite3 *conn = NULL;
  mp_stmts st;
  char b;
  uint64_t rng = rng_seed((uint64_t)id, (uint64_t)r->round * 1000 + 29);
  int64_t seq = 0;
  memset(&st, 0, sizeof st);
  int ready = open_plain(r->path, r->sync, BUSY_MS_MULTI, &conn) == SQLITE_OK;
  struct {
    sqlite3_stmt **p;
    const char *sql;
  } all[] = {{&st.debit, SQL_DEBIT},       {&st.credit, SQL_CREDIT}, {&st.ledger, SQL_LEDGER},
             {&st.topic, SQL_TOPIC},       {&st.begin, "BEGIN IMMEDIATE"}, {&st.commit, "COMMIT"},
             {&st.rollback, "ROLLBACK"}};
  for (size_t i = 0; ready && i < sizeof all / sizeof *all; i++)
    if (sqlite3_prepare_v3(conn, all[i].sql, -1, SQLITE_PREPARE_PERSISTENT, all[i].p, NULL) != SQLITE_OK)
      ready = 0;
  if (!ready)
    slot_error(s, "opening its connection", conn, SQLITE_ERROR);
  b = ready ? '1' : '0';
  if (write(ready_fd, &b, 1) != 1)
    _exit(3);
  while (read(go_fd, &b, 1) < 0 && errno == EINTR)
    ; /* EOF: the gate is open */
  int64_t ws = sh->ws, we = sh->we;
  while (ready) {
    transfer t = make_transfer(id, ++seq, &rng);
    int64_t t0 = now_ns();
    if (t0 >= we)
      break;
    int rc = mp_transfer(conn, &st, &t);
    int64_t t1 = now_ns();
    if (rc != SQLITE_OK) {
      slot_error(s, "transfer", conn, rc);
      continue;
    }
    s->ok++;
    if (t1 >= ws && t1 < we) {
      s->win_ok++;
      lat_add(&s->lat, (uint64_t)(t1 - t0));
    }
  }
  for (size_t i = 0; i < sizeof all / sizeof *all; i++)
    sqlite3_finalize(*all[i].p);
  if (conn && sqlite3_close(conn) != SQLITE_OK)
    slot_error(s, "close", conn, SQLITE_ERROR);
  _exit(0);
}

/* The N processes' CPU seconds; -1 when /proc fails. */
static double children_cpu(const pid_t *pids, int n) {
  char path[64];
  double total = 0;
  for (int i = 0; i < n; i++) {
    if (pids[i] <= 0)
      continue;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pids[i]);
    double s = stat_cpu_s(path, NULL, 0);
    if (s < 0)
      return -1;
    total += s;
  }
  return total;
}

static void arm_multi(run *r, result *res) {
  const config *cfg = r->cfg;
  int N = r->N, ready_p[2] = {-1, -1}, go_p[2] = {-1, -1}, started = 0;
  size_t cap = lat_cap(N, cfg->seconds);
  size_t bytes = sizeof(mp_shared) + (size_t)N * sizeof(mp_slot) + (size_t)N * cap * sizeof(uint64_t);
  pid_t *pids = calloc((size_t)N, sizeof *pids);
  int64_t *ok = calloc((size_t)N, sizeof *ok);
  lat_buf **bufs = calloc((size_t)N, sizeof *bufs);
  mp_shared *sh = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED)
    sh = NULL;
  if (!pids || !ok || !bufs || !sh) {
    report_error(r, "out of memory");
    res->errors++;
    goto out;
  }
  uint64_t *vals = (uint64_t *)(void *)((char *)sh + sizeof(mp_shared) + (size_t)N * sizeof(mp_slot));
  for (int i = 0; i < N; i++) {
    lat_buf *b = &sh->slot[i].lat;
    b->v = vals + (size_t)i * cap;
    b->cap = cap;
    b->rng = rng_seed((uint64_t)i, 4242);
    bufs[i] = b;
  }
  if (pipe2(ready_p, O_CLOEXEC) != 0 || pipe2(go_p, O_CLOEXEC) != 0) {
    report_error(r, "pipe: %s", strerror(errno));
    res->errors++;
    goto out;
  }
  fflush(stdout);
  fflush(stderr);
  for (int i = 0; i < N; i++) {
    pid_t p = fork();
    if (p == 0) {
      close(ready_p[0]);
      close(go_p[1]);
      mp_child(r, sh, i, ready_p[1], go_p[0]);
    }
    if (p < 0) {
      report_error(r, "fork: %s", strerror(errno));
      res->errors++;
      break;
    }
    pids[i] = p;
    started++;
  }
  close(ready_p[1]);
  ready_p[1] = -1;
  for (int got = 0; got < started;) {
    char buf[256];
    ssize_t n = read(ready_p[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break; /* a process died before it said ready: waitpid reports it */
    got += (int)n;
  }
  sh->ws = now_ns() + (int64_t)(cfg->warmup * 1e9);
  sh->we = sh->ws + (int64_t)(cfg->seconds * 1e9);
  close(go_p[1]); /* opens the gate: every read() returns 0 */
  go_p[1] = -1;

  sleep_until(sh->ws);
  int64_t t0 = now_ns();
  double c0 = children_cpu(pids, started), m0 = machine_busy_s();
  sleep_until(sh->we);
  int64_t t1 = now_ns();
  double c1 = children_cpu(pids, started), m1 = machine_busy_s();
  if (c0 >= 0 && c1 >= 0 && t1 > t0) {
    double dt = (double)(t1 - t0) / 1e9;
    res->m[M_CPU_CLI] = (c1 - c0) / dt;
    if (m0 >= 0 && m1 >= 0)
      res->m[M_CPU_ELSE] = (m1 - m0) / dt - res->m[M_CPU_CLI];
  }

  for (int i = 0; i < started; i++) {
    int st = 0;
    if (waitpid(pids[i], &st, 0) != pids[i] || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      report_error(r, "process %d ended badly (status 0x%x)", i, st);
      res->errors++;
    }
  }
  for (int i = 0; i < N; i++) {
    mp_slot *s = &sh->slot[i];
    ok[i] = s->ok;
    res->commands += (uint64_t)s->win_ok;
    res->errors += s->errors;
    if (s->msg[0])
      report_error(r, "process %d: %s", i, s->msg);
  }
  res->m[M_CMDS_S] = (double)res->commands / cfg->seconds;
  if (res->commands)
    res->m[M_US_CLI] = res->m[M_CPU_CLI] * cfg->seconds / (double)res->commands * 1e6;
  res->m[M_CMDS_TX] = 1;
  fill_latency(res, bufs, N, r);
  res->errors += verify_db(r, ok);
out:
  for (int k = 0; k < 2; k++) {
    if (ready_p[k] >= 0)
      close(ready_p[k]);
    if (go_p[k] >= 0)
      close(go_p[k]);
  }
  if (sh)
    munmap(sh, bytes);
  free(pids);
  free(ok);
  free(bufs);
}

/* ---- the plan ----------------------------------------------------------------------- */

typedef struct bench {
  config cfg;
  result *res; /* [arm][sync][conns][round] */
  FILE *csv;
  int64_t total_errors;
} bench;

static result *res_at(bench *b, int arm, int si, int ni, int r) {
  const config *c = &b->cfg;
  size_t i = (((size_t)arm * (size_t)c->nsync + (size_t)si) * (size_t)c->nconns + (size_t)ni) * (size_t)c->rounds +
             (size_t)r;
  return &b->res[i];
}

static const char *const METRIC_CSV[NMETRIC] = {
    "cmds_per_s", "p50_ms",   "p99_ms",     "max_ms",    "cmds_per_tx",   "lithd_cpu",     "lithd_cpu_loop",
    "lithd_cpu_writer", "lithd_cpu_waker", "lithd_cpu_ckpt", "lithd_cpu_other", "client_cpu", "lithd_us_per_cmd",
    "client_us_per_cmd", "else_cpu"};

static void csv_header(FILE *f) {
  fprintf(f, "sync,conns,arm,round");
  for (int m = 0; m < NMETRIC; m++)
    fprintf(f, ",%s", METRIC_CSV[m]);
  fprintf(f, ",commands,errors,sampled,arm_wall_s\n");
}

static void csv_num(FILE *f, double v) {
  if (isnan(v))
    fprintf(f, ",");
  else
    fprintf(f, ",%.6g", v);
}

static void csv_row(bench *b, int arm, int si, int ni, const char *round, const result *x) {
  const config *c = &b->cfg;
  if (!b->csv)
    return;
  fprintf(b->csv, "%s,%d,%s,%s", sync_name(c->sync[si]), c->conns[ni], ARM_NAME[arm], round);
  for (int m = 0; m < NMETRIC; m++)
    csv_num(b->csv, x->m[m]);
  if (x->ran)
    fprintf(b->csv, ",%llu", (unsigned long long)x->commands);
  else /* a summary row */
    fprintf(b->csv, ",");
  fprintf(b->csv, ",%lld,%d", (long long)x->errors, x->sampled);
  csv_num(b->csv, x->wall_s);
  fprintf(b->csv, "\n");
  fflush(b->csv);
}

static void run_one(bench *b, int arm, int si, int ni, int round) {
  const config *c = &b->cfg;
  run r;
  memset(&r, 0, sizeof r);
  r.cfg = c;
  r.arm = arm;
  r.sync = c->sync[si];
  r.N = c->conns[ni];
  r.round = round;
  snprintf(r.path, sizeof r.path, "%s/%s-%s-n%d-r%d.db", c->db_dir, ARM_NAME[arm], sync_name(r.sync), r.N, round + 1);
  snprintf(r.log, sizeof r.log, "%s/lithd-stderr.log", c->db_dir);
  result *res = res_at(b, arm, si, ni, round);
  memset(res, 0, sizeof *res);
  for (int m = 0; m < NMETRIC; m++)
    res->m[m] = NAN;
  int64_t t0 = now_ns();
  if (create_db(r.path, r.N) != 0)
    res->errors++;
  else if (arm == ARM_LITHD)
    arm_lithd(&r, res);
  else
    arm_multi(&r, res);
  remove_db(r.path);
  res->wall_s = (double)(now_ns() - t0) / 1e9;
  res->ran = 1;
  b->total_errors += res->errors;

  char rbuf[16];
  snprintf(rbuf, sizeof rbuf, "%d", round + 1);
  csv_row(b, arm, si, ni, rbuf, res);
  fprintf(stderr,
          "[round %d/%d] %-6s N=%-4d %-9s %9.0f cmd/s %6.1f cmd/tx  p50 %.3f p99 %.3f max %.3f ms"
          "  CPU lithd %.2f client %.2f else %.2f  errors %lld  (%.1f s)\n",
          round + 1, c->rounds, sync_name(r.sync), r.N, ARM_NAME[arm], res->m[M_CMDS_S], res->m[M_CMDS_TX],
          res->m[M_P50], res->m[M_P99], res->m[M_MAX], res->m[M_CPU_SRV], res->m[M_CPU_CLI], res->m[M_CPU_ELSE], (long long)res->errors,
          res->wall_s);
}

/* ---- summaries ------------------------------------------------------------------------ */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

typedef struct agg {
  int n;              /* rounds with a value */
  double med, lo, hi; /* NAN when n == 0 */
} agg;

static agg aggregate(bench *b, int arm, int si, int ni, int metric) {
  double v[128];
  agg a = {0, NAN, NAN, NAN};
  for (int r = 0; r < b->cfg.rounds && a.n < 128; r++) {
    const result *x = res_at(b, arm, si, ni, r);
    if (x->ran && !isnan(x->m[metric]))
      v[a.n++] = x->m[metric];
  }
  if (a.n == 0)
    return a;
  qsort(v, (size_t)a.n, sizeof *v, cmp_double);
  a.lo = v[0];
  a.hi = v[a.n - 1];
  a.med = a.n % 2 ? v[a.n / 2] : (v[a.n / 2 - 1] + v[a.n / 2]) / 2;
  return a;
}

static int64_t errors_of(bench *b, int arm, int si, int ni) {
  int64_t e = 0;
  for (int r = 0; r < b->cfg.rounds; r++)
    e += res_at(b, arm, si, ni, r)->errors;
  return e;
}

static int arm_ran(bench *b, int arm, int si, int ni) { return res_at(b, arm, si, ni, 0)->ran; }

static void csv_summaries(bench *b) {
  const config *c = &b->cfg;
  static const char *const what[3] = {"median", "min", "max"};
  if (!b->csv)
    return;
  for (int arm = 0; arm < NARMS; arm++)
    for (int si = 0; si < c->nsync; si++)
      for (int ni = 0; ni < c->nconns; ni++) {
        if (!arm_ran(b, arm, si, ni))
          continue;
        for (int w = 0; w < 3; w++) {
          result x;
          memset(&x, 0, sizeof x);
          for (int m = 0; m < NMETRIC; m++) {
            agg a = aggregate(b, arm, si, ni, m);
            x.m[m] = w == 0 ? a.med : w == 1 ? a.lo : a.hi;
          }
          x.wall_s = NAN;
          x.errors = errors_of(b, arm, si, ni);
          for (int r = 0; r < c->rounds; r++)
            x.sampled |= res_at(b, arm, si, ni, r)->sampled;
          csv_row(b, arm, si, ni, what[w], &x);
        }
      }
}

static void fmt_ms(char *buf, size_t n, double ms) {
  if (isnan(ms))
    snprintf(buf, n, "–");
  else if (ms < 1)
    snprintf(buf, n, "%.3f", ms);
  else if (ms < 100)
    snprintf(buf, n, "%.2f", ms);
  else
    snprintf(buf, n, "%.0f", ms);
}

static void fmt_pct(char *buf, size_t n, double cpus) {
  if (isnan(cpus))
    snprintf(buf, n, "–");
  else
    snprintf(buf, n, "%.0f%%", cpus * 100);
}

static double ratio(bench *b, int si, int ni) {
  if (!arm_ran(b, ARM_LITHD, si, ni) || !arm_ran(b, ARM_MULTI, si, ni))
    return NAN;
  double l = aggregate(b, ARM_LITHD, si, ni, M_CMDS_S).med, m = aggregate(b, ARM_MULTI, si, ni, M_CMDS_S).med;
  return m > 0 ? l / m : NAN;
}

static void table_row(bench *b, int arm, int si, int ni) {
  const config *c = &b->cfg;
  char p50[32], p99[32], mx[32], tx[32], srv[32], cli[32], oth[32], rt[32];
  agg cs = aggregate(b, arm, si, ni, M_CMDS_S);
  double ctx = aggregate(b, arm, si, ni, M_CMDS_TX).med;
  fmt_ms(p50, sizeof p50, aggregate(b, arm, si, ni, M_P50).med);
  fmt_ms(p99, sizeof p99, aggregate(b, arm, si, ni, M_P99).med);
  fmt_ms(mx, sizeof mx, aggregate(b, arm, si, ni, M_MAX).hi);
  fmt_pct(srv, sizeof srv, aggregate(b, arm, si, ni, M_CPU_SRV).med);
  fmt_pct(cli, sizeof cli, aggregate(b, arm, si, ni, M_CPU_CLI).med);
  fmt_pct(oth, sizeof oth, aggregate(b, arm, si, ni, M_CPU_ELSE).hi);
  snprintf(tx, sizeof tx, isnan(ctx) ? "–" : "%.1f", ctx);
  snprintf(rt, sizeof rt, " ");
  if (arm == ARM_LITHD) {
    double x = ratio(b, si, ni);
    snprintf(rt, sizeof rt, isnan(x) ? "–" : "%.2f×", x);
  }
  printf("| %d | %s | %.0f (%.0f–%.0f) | %s | %s | %s | %s | %lld | %s | %s | %s | %s |\n", c->conns[ni],
         ARM_NAME[arm], cs.med, cs.lo, cs.hi, tx, p50, p99, mx, (long long)errors_of(b, arm, si, ni), srv, cli, oth,
         rt);
}

static void print_tables(bench *b) {
  const config *c = &b->cfg;
  for (int si = 0; si < c->nsync; si++) {
    printf("\n### synchronous=%s\n\n", sync_name(c->sync[si]));
    printf("| N | arm | cmd/s median (min–max) | cmd/tx | p50 ms | p99 ms | max ms | err | lithd CPU | client CPU "
           "| else CPU | ÷multiproc |\n");
    printf("|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for (int ni = 0; ni < c->nconns; ni++)
      for (int arm = 0; arm < NARMS; arm++)
        if (arm_ran(b, arm, si, ni))
          table_row(b, arm, si, ni);
  }
  printf("\nColumns: median over rounds (cmd/s also min–max; max ms: the worst round). Latency from sending the\n"
         "request (multiproc: BEGIN IMMEDIATE) to the whole answer (end of COMMIT). cmd/tx: lithd's commands per\n"
         "transaction over the window (GET /v1/stats). CPU in %% of one CPU over the window (the machine has\n"
         "%ld): lithd's process; the client thread (lithd arm) or the N processes (multiproc); else: the rest of\n"
         "the machine's busy time in the worst round (other processes, interrupts: noise if much above 0).\n"
         "÷multiproc: lithd's median cmd/s over multiproc's.\n",
         sysconf(_SC_NPROCESSORS_ONLN));
}

/* Where the CPU went in the lithd arm: lithd's threads, the client. */
static void print_cpu(bench *b) {
  const config *c = &b->cfg;
  static const char *const head[NTHREAD] = {"loop thread (h2o, JSON, bridge)", "lith-writer", "lith-waker",
                                            "lith-checkpoint", "other"};
  if (!c->arms[ARM_LITHD])
    return;
  printf("\n### lithd: where the CPU goes (medians, %% of one CPU)\n\n");
  printf("| sync | N | cmd/s |");
  for (int k = 0; k < NTHREAD; k++)
    printf(" %s |", head[k]);
  printf(" lithd total | client | lithd µs/cmd | client µs/cmd |\n|---|--:|--:|");
  for (int k = 0; k < NTHREAD; k++)
    printf("--:|");
  printf("--:|--:|--:|--:|\n");
  for (int si = 0; si < c->nsync; si++)
    for (int ni = 0; ni < c->nconns; ni++) {
      char v[32];
      if (!arm_ran(b, ARM_LITHD, si, ni))
        continue;
      printf("| %s | %d | %.0f |", sync_name(c->sync[si]), c->conns[ni],
             aggregate(b, ARM_LITHD, si, ni, M_CMDS_S).med);
      for (int k = 0; k < NTHREAD; k++) {
        fmt_pct(v, sizeof v, aggregate(b, ARM_LITHD, si, ni, M_CPU_T0 + k).med);
        printf(" %s |", v);
      }
      fmt_pct(v, sizeof v, aggregate(b, ARM_LITHD, si, ni, M_CPU_SRV).med);
      printf(" %s |", v);
      fmt_pct(v, sizeof v, aggregate(b, ARM_LITHD, si, ni, M_CPU_CLI).med);
      printf(" %s | %.1f | %.1f |\n", v, aggregate(b, ARM_LITHD, si, ni, M_US_SRV).med,
             aggregate(b, ARM_LITHD, si, ni, M_US_CLI).med);
    }
  printf("\nFrom /proc/PID/task/*/stat (10 ms ticks) at the window's edges. µs/cmd: CPU time over commands\n"
         "answered in the window.\n");
}

/* ---- targets ----------------------------------------------------------------------------- */

static int find_idx(const int *list, int n, int v) {
  for (int i = 0; i < n; i++)
    if (list[i] == v)
      return i;
  return -1;
}

static void print_target(const char *what, int have, int pass, const char *detail) {
  printf("- %s %s — %s\n", !have ? "n/a " : pass ? "PASS" : "MISS", what, have ? detail : "not run");
}

static void print_targets(bench *b) {
  const config *c = &b->cfg;
  char d[128], what[128];
  int ni = find_idx(c->conns, c->nconns, 64);
  int siN = find_idx(c->sync, c->nsync, SYNC_NORMAL), siF = find_idx(c->sync, c->nsync, SYNC_FULL);
  printf("\n### targets\n\n");
  {
    int have = ni >= 0 && siN >= 0 && arm_ran(b, ARM_LITHD, siN, ni);
    double v = have ? aggregate(b, ARM_LITHD, siN, ni, M_CMDS_S).med : NAN;
    snprintf(d, sizeof d, "%.0f commands/s", v);
    print_target("64 connections NORMAL: lithd ≥ 40000 commands/s", have, v >= 40000, d);
  }
  struct {
    int si;
    double min;
    const char *name;
  } x[2] = {{siN, 5, "NORMAL"}, {siF, 10, "FULL"}};
  for (int k = 0; k < 2; k++) {
    int have = ni >= 0 && x[k].si >= 0;
    double v = have ? ratio(b, x[k].si, ni) : NAN;
    snprintf(what, sizeof what, "64 clients %s: lithd ≥ %.0f × multiproc", x[k].name, x[k].min);
    snprintf(d, sizeof d, "%.2f×", v);
    print_target(what, have && !isnan(v), v >= x[k].min, d);
  }
  for (int k = 0; k < 2; k++) {
    int have = ni >= 0 && x[k].si >= 0 && arm_ran(b, ARM_LITHD, x[k].si, ni);
    double v = have ? aggregate(b, ARM_LITHD, x[k].si, ni, M_P99).med : NAN;
    snprintf(what, sizeof what, "64 connections %s: lithd p99 < 10 ms", x[k].name);
    snprintf(d, sizeof d, "%.3f ms (median of rounds)", v);
    print_target(what, have && !isnan(v), v < 10, d);
  }
  snprintf(d, sizeof d, "%lld", (long long)b->total_errors);
  print_target("errors, all arms: 0", 1, b->total_errors == 0, d);
}

/* ---- options ------------------------------------------------------------------------------ */

static void usage(FILE *f) {
  fprintf(f,
          "usage: bench/lithd [options]   (lithd over HTTP against N processes that write themselves)\n"
          "  --conns LIST       client counts (connections, processes), e.g. 1,16,64,256 (default)\n"
          "  --sync LIST        normal,full (default both)\n"
          "  --arms LIST        lithd,multiproc (default both)\n"
          "  --seconds S        measured window per arm (default 3)\n"
          "  --warmup S         warm-up before the window (default 0.5)\n"
          "  --rounds N         rounds, interleaved across arms and cells (default 3)\n"
          "  --db-dir DIR       where the databases go (default: a new directory under /tmp)\n"
          "  --lithd PATH       the lithd binary (default " LITHD_PATH ")\n"
          "  --csv PATH         CSV output (default bench/results/lithd-YYYYMMDD-HHMMSS.csv)\n"
          "  --quick            smoke run: 1 round, 1 s, warm-up 0.25 s, conns 1,64\n"
          "  --help\n");
}

static void die_usage(const char *fmt, const char *arg) {
  fprintf(stderr, "bench/lithd: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n");
  usage(stderr);
  exit(2);
}

/* Split a comma list; call fn on each item. */
static void parse_list(const char *s, const char *opt, void (*fn)(config *, const char *, size_t), config *c) {
  if (!*s)
    die_usage("empty list for %s", opt);
  while (*s) {
    size_t n = strcspn(s, ",");
    if (n == 0)
      die_usage("empty item in %s", opt);
    fn(c, s, n);
    s += n;
    if (*s == ',')
      s++;
  }
}

static int item_is(const char *s, size_t n, const char *word) { return strlen(word) == n && !strncmp(s, word, n); }

static void add_conns(config *c, const char *s, size_t n) {
  char buf[32];
  char *end;
  if (n >= sizeof buf)
    die_usage("bad client count in %s", s);
  memcpy(buf, s, n);
  buf[n] = '\0';
  long v = strtol(buf, &end, 10);
  if (*end || v < 1 || v > MAX_CONNS)
    die_usage("client counts are 1..4096, got %s", buf);
  if (c->nconns == MAX_LIST)
    die_usage("too many client counts: %s", buf);
  c->conns[c->nconns++] = (int)v;
}

static void add_sync(config *c, const char *s, size_t n) {
  int v = item_is(s, n, "full") ? SYNC_FULL : item_is(s, n, "normal") ? SYNC_NORMAL : -1;
  if (v < 0 || c->nsync == 2 || find_idx(c->sync, c->nsync, v) >= 0)
    die_usage("--sync takes normal,full: %s", s);
  c->sync[c->nsync++] = v;
}

static void add_arm(config *c, const char *s, size_t n) {
  for (int a = 0; a < NARMS; a++)
    if (item_is(s, n, ARM_NAME[a])) {
      c->arms[a] = 1;
      return;
    }
  die_usage("--arms takes lithd,multiproc: %s", s);
}

static double parse_seconds(const char *s, const char *opt, double min) {
  char *end;
  double v = strtod(s, &end);
  if (*end || !(v >= min) || v > 3600)
    die_usage("bad value for %s", opt);
  return v;
}

static void parse_args(int argc, char **argv, config *c) {
  int set_conns = 0, set_sec = 0, set_warm = 0, set_rounds = 0, set_arms = 0, quick = 0;
  memset(c, 0, sizeof *c);
  c->lithd = LITHD_PATH;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      exit(0);
    }
    if (!strcmp(a, "--quick")) {
      quick = 1;
      continue;
    }
    if (i + 1 >= argc)
      die_usage("unknown option or missing value: %s", a);
    const char *v = argv[++i];
    if (!strcmp(a, "--conns")) {
      c->nconns = 0;
      parse_list(v, a, add_conns, c);
      set_conns = 1;
    } else if (!strcmp(a, "--sync")) {
      c->nsync = 0;
      parse_list(v, a, add_sync, c);
    } else if (!strcmp(a, "--arms")) {
      memset(c->arms, 0, sizeof c->arms);
      parse_list(v, a, add_arm, c);
      set_arms = 1;
    } else if (!strcmp(a, "--seconds")) {
      c->seconds = parse_seconds(v, a, 0.05);
      set_sec = 1;
    } else if (!strcmp(a, "--warmup")) {
      c->warmup = parse_seconds(v, a, 0);
      set_warm = 1;
    } else if (!strcmp(a, "--rounds")) {
      char *end;
      long n = strtol(v, &end, 10);
      if (*end || n < 1 || n > 100)
        die_usage("--rounds takes 1..100, got %s", v);
      c->rounds = (int)n;
      set_rounds = 1;
    } else if (!strcmp(a, "--db-dir")) {
      c->db_dir = v;
    } else if (!strcmp(a, "--lithd")) {
      c->lithd = v;
    } else if (!strcmp(a, "--csv")) {
      c->csv = v;
    } else {
      die_usage("unknown option: %s", a);
    }
  }
  if (!set_conns) {
    static const int def[] = {1, 16, 64, 256}, q[] = {1, 64};
    c->nconns = quick ? 2 : 4;
    memcpy(c->conns, quick ? q : def, (size_t)c->nconns * sizeof *def);
  }
  if (!c->nsync) {
    c->sync[0] = SYNC_NORMAL;
    c->sync[1] = SYNC_FULL;
    c->nsync = 2;
  }
  if (!set_arms)
    for (int a = 0; a < NARMS; a++)
      c->arms[a] = 1;
  if (!set_sec)
    c->seconds = quick ? 1 : 3;
  if (!set_warm)
    c->warmup = quick ? 0.25 : 0.5;
  if (!set_rounds)
    c->rounds = quick ? 1 : 3;
}

/* ---- the header ------------------------------------------------------------------------------ */

static void cpu_model(char *buf, size_t n) {
  char line[512];
  FILE *f = fopen("/proc/cpuinfo", "r");
  snprintf(buf, n, "unknown");
  if (!f)
    return;
  while (fgets(line, sizeof line, f)) {
    char *p = strchr(line, ':');
    if (strncmp(line, "model name", 10) != 0 || !p)
      continue;
    p++;
    while (*p == ' ' || *p == '\t')
      p++;
    p[strcspn(p, "\n")] = '\0';
    snprintf(buf, n, "%s", p);
    break;
  }
  fclose(f);
}

static const char *fs_name(const char *dir) {
  struct statfs s;
  if (statfs(dir, &s) != 0)
    return "unknown";
  switch ((unsigned long)s.f_type) {
  case 0xEF53UL:
    return "ext2/3/4";
  case 0x58465342UL:
    return "xfs";
  case 0x9123683EUL:
    return "btrfs";
  case 0x01021994UL:
    return "tmpfs (fsync costs nothing here: FULL is not measured)";
  case 0x794C7630UL:
    return "overlayfs";
  default:
    return "other";
  }
}

static void print_command(int argc, char **argv) {
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    int plain = *a && strspn(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=.,/:+") ==
                          strlen(a);
    printf(i ? " " : "");
    if (plain) {
      printf("%s", a);
      continue;
    }
    putchar('\'');
    for (; *a; a++)
      if (*a == '\'')
        printf("'\\''");
      else
        putchar(*a);
    putchar('\'');
  }
  printf("\n");
}

static void print_header(const config *c, int argc, char **argv, const char *csv_path) {
  char model[256], when[64];
  struct utsname u;
  int have_u = uname(&u) == 0;
  time_t now = time(NULL);
  cpu_model(model, sizeof model);
  strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", gmtime(&now));
  printf("# lithd benchmark\n\ncommand: ");
  print_command(argc, argv);
  printf("date: %s\n", when);
  printf("machine: nproc %ld, CPU %s, kernel %s\n", sysconf(_SC_NPROCESSORS_ONLN), model, have_u ? u.release : "?");
  printf("SQLite %s (bench side), lithd %s (checkpoint WRITER)\n", sqlite3_libversion(), c->lithd);
  printf("databases: %s (%s)\n", c->db_dir, fs_name(c->db_dir));
  printf("plan: clients");
  for (int i = 0; i < c->nconns; i++)
    printf("%s%d", i ? "," : " ", c->conns[i]);
  printf("; synchronous");
  for (int i = 0; i < c->nsync; i++)
    printf("%s%s", i ? "," : " ", sync_name(c->sync[i]));
  printf("; arms");
  for (int a = 0, first = 1; a < NARMS; a++)
    if (c->arms[a]) {
      printf("%s%s", first ? " " : ",", ARM_NAME[a]);
      first = 0;
    }
  printf("; %g s window after %g s warm-up; %d round%s\n", c->seconds, c->warmup, c->rounds, c->rounds > 1 ? "s" : "");
  printf("csv: %s\n", csv_path ? csv_path : "(none: could not create it)");
  fflush(stdout);
}

static int mkdir_p(const char *path) {
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
      return -1;
    *p = '/';
  }
  return mkdir(buf, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

int main(int argc, char **argv) {
  bench b;
  config *c = &b.cfg;
  char tmpdir[] = "/tmp/lith-bench-lithd-XXXXXX", csv_path[4096], log[4200];
  int own_dir = 0;
  memset(&b, 0, sizeof b);
  parse_args(argc, argv, c);
  int64_t t_begin = now_ns();
  signal(SIGPIPE, SIG_IGN);

  if (access(c->lithd, X_OK) != 0) {
    fprintf(stderr, "bench/lithd: cannot run %s (%s); build it (make lithd) or pass --lithd PATH\n", c->lithd,
            strerror(errno));
    return 2;
  }
  if (!c->db_dir) {
    if (!mkdtemp(tmpdir)) {
      perror("bench/lithd: mkdtemp");
      return 1;
    }
    c->db_dir = tmpdir;
    own_dir = 1;
  } else if (mkdir_p(c->db_dir) != 0) {
    perror("bench/lithd: --db-dir");
    return 1;
  }

  if (c->csv) {
    snprintf(csv_path, sizeof csv_path, "%s", c->csv);
  } else {
    time_t now = time(NULL);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", localtime(&now));
    mkdir_p("bench/results");
    snprintf(csv_path, sizeof csv_path, "bench/results/lithd-%s.csv", stamp);
  }
  b.csv = fopen(csv_path, "w");
  if (!b.csv)
    fprintf(stderr, "bench/lithd: cannot write %s: %s\n", csv_path, strerror(errno));
  else
    csv_header(b.csv);

  print_header(c, argc, argv, b.csv ? csv_path : NULL);

  size_t nres = (size_t)NARMS * (size_t)c->nsync * (size_t)c->nconns * (size_t)c->rounds;
  b.res = calloc(nres, sizeof *b.res);
  if (!b.res) {
    fprintf(stderr, "bench/lithd: out of memory\n");
    return 1;
  }

  /* Round r runs every arm of every cell before round r+1; odd rounds run
   * the arms in the other order. */
  for (int r = 0; r < c->rounds; r++)
    for (int si = 0; si < c->nsync; si++)
      for (int ni = 0; ni < c->nconns; ni++)
        for (int k = 0; k < NARMS; k++) {
          int arm = r % 2 ? NARMS - 1 - k : k;
          if (c->arms[arm])
            run_one(&b, arm, si, ni, r);
        }

  print_tables(&b);
  print_cpu(&b);
  print_targets(&b);
  csv_summaries(&b);
  if (b.csv && fclose(b.csv) != 0)
    fprintf(stderr, "bench/lithd: writing %s failed\n", csv_path);
  snprintf(log, sizeof log, "%s/lithd-stderr.log", c->db_dir);
  unlink(log);
  if (own_dir)
    rmdir(c->db_dir);

  printf("\nerrors, all arms: %lld%s\n", (long long)b.total_errors, b.total_errors ? " (FAILED)" : "");
  printf("elapsed: %.1f s\n", (double)(now_ns() - t_begin) / 1e9);
  free(b.res);
  return b.total_errors ? 1 : 0;
}
