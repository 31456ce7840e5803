/*
 * bench/writer — what lith's single writer buys over the usual ways of
 * writing to SQLite from many threads, and how close it gets to the disk's
 * own limit.
 *
 * The workload is one command, a transfer: producer p owns accounts
 * 10p..10p+9 and topic p. A transfer reads one account's balance, debits it,
 * credits another of p's accounts, appends (producer, seq, src, dst, amount)
 * to the ledger and bumps topic p's version (lith_tx_touch(p) on the writer).
 * Balances are seeded so high that the balance check never refuses; a refusal
 * is counted as an error. Every producer submits one command and waits for
 * its answer, as a request handler does.
 *
 * A cell is (synchronous FULL|NORMAL, producers P, checkpoint AUTO|WRITER).
 * Arms, each on a fresh copy of the same seeded database (created with plain
 * SQLite, WAL, then closed so the WAL is empty), removed afterwards:
 *
 *   writer   lith_open with the cell's options (readers 1, an on_commit hook
 *            that counts topics, as a server would have), P threads calling
 *            lith_do(transfer).
 *   ceiling  one thread, no queue, no producers: the same statements on a
 *            plain connection, BEGIN IMMEDIATE, per command SAVEPOINT /
 *            transfer / RELEASE, COMMIT, in transactions of the mean size the
 *            writer reached in the same cell and round (rounded, at least 1;
 *            P when the writer arm is not run). The physical limit for that
 *            batch size.
 *   perconn  P threads, each with its own connection (busy_timeout 30 s),
 *            one BEGIN IMMEDIATE ... COMMIT per command: what most apps do.
 *   mutex    one connection shared by P threads behind a pthread mutex; a
 *            command is lock, BEGIN IMMEDIATE, transfer, COMMIT, unlock.
 *
 * perconn and mutex do not depend on the checkpoint mode: they run once per
 * (synchronous, P) with SQLite's autocheckpoint. The baselines' connections
 * get the pragmas lith gives its writer (synchronous, cache_size and mmap_size
 * from lith_options_default, foreign_keys, temp_store=MEMORY, WAL) and SQLite's
 * default autocheckpoint of 1000 pages (lith's checkpoint_pages default).
 *
 * Timing. Threads start, wait at a gate (perconn threads open their
 * connection first), then run for --warmup seconds before a measured window
 * of --seconds. A call or transaction counts when it completes inside the
 * window. Rounds interleave: round r runs every arm of every cell before
 * round r+1, so drift of the machine hits every arm alike. Reported: median
 * over rounds, and the range min-max (commands/s in the table, everything in
 * the CSV).
 *
 * Transaction time is BEGIN IMMEDIATE to the end of COMMIT. For the writer
 * it comes from lith's own histograms (lith_lat_quantile_ns over the
 * difference of two lith_stats snapshots taken at the window's edges: a
 * bucket's upper bound, at most 1/8 above the true value); ceiling and mutex
 * time each transaction themselves. perconn times from the return of its
 * BEGIN IMMEDIATE, i.e. while it holds the write lock: the wait for the lock
 * (busy handler sleeps) is in its call latency, not in its transaction time.
 * Call latency (lith_do, or one command of perconn/mutex) is recorded by each
 * producer into its own preallocated buffer and merged after the run; the
 * percentiles are exact (sorted), the max always exact.
 *
 * Memory stays bounded: each buffer holds at most
 * clamp(LAT_BUDGET / threads, 4096, seconds * 500k) values. A thread that
 * completes more keeps a uniform reservoir sample, and the merge weights
 * each sample by (calls seen / samples kept), so percentiles stay unbiased;
 * the CSV says when that happened ("sampled").
 *
 * A second table splits the writer's time over the window: inside
 * transactions, in checkpoints, and the rest (taking the queue, answering the
 * producers, being preempted or idle), with lith's queue-wait p99 — where the
 * writer loses to the ceiling. The CSV has these too.
 *
 * After every arm the database is checked with plain SQLite: quick_check,
 * money conserved, ledger rows == commands answered OK (in total and per
 * producer), topic versions == commands answered OK (in total and per
 * producer). Every mismatch or failed call is an error; the exit status is 0
 * only when every arm had none (a missed target is reported, not an error).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "lith.h"

/* ---- the workload -------------------------------------------------------- */

enum { ACCOUNTS_PER_PRODUCER = 10, MAX_AMOUNT = 50 };
#define START_BALANCE INT64_C(1000000000000) /* 10^12: never refused */

#define SQL_BALANCE "SELECT balance FROM accounts WHERE id = ?"
#define SQL_DEBIT "UPDATE accounts SET balance = balance - ? WHERE id = ?"
#define SQL_CREDIT "UPDATE accounts SET balance = balance + ? WHERE id = ?"
#define SQL_LEDGER "INSERT INTO ledger(producer, seq, src, dst, amount) VALUES (?, ?, ?, ?, ?)"
#define SQL_TOPIC "UPDATE topics SET version = version + 1 WHERE id = ?"

static const char SCHEMA[] =
    "CREATE TABLE accounts(id INTEGER PRIMARY KEY, balance INTEGER NOT NULL CHECK (balance >= 0));"
    "CREATE TABLE ledger(id INTEGER PRIMARY KEY, producer INTEGER NOT NULL, seq INTEGER NOT NULL,"
    " src INTEGER NOT NULL, dst INTEGER NOT NULL, amount INTEGER NOT NULL);"
    "CREATE TABLE topics(id INTEGER PRIMARY KEY, version INTEGER NOT NULL);";

typedef struct transfer {
  int64_t producer, seq, src, dst, amount;
} transfer;

/* xorshift64*: a per-thread generator, no shared state. */
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

static transfer make_transfer(int64_t producer, int64_t seq, uint64_t *rng) {
  transfer t;
  int64_t base = producer * ACCOUNTS_PER_PRODUCER;
  int64_t a = (int64_t)(rng_next(rng) % ACCOUNTS_PER_PRODUCER);
  int64_t b = (a + 1 + (int64_t)(rng_next(rng) % (ACCOUNTS_PER_PRODUCER - 1))) % ACCOUNTS_PER_PRODUCER;
  t.producer = producer;
  t.seq = seq;
  t.src = base + a;
  t.dst = base + b;
  t.amount = 1 + (int64_t)(rng_next(rng) % MAX_AMOUNT);
  return t;
}

/* The transfer as a lith command. */
static int transfer_cmd(lith_tx *tx, void *arg) {
  const transfer *t = arg;
  int64_t bal;
  int rc = lith_tx_int64(tx, &bal, SQL_BALANCE, "I", t->src);
  if (rc != LITH_OK)
    return rc;
  if (bal < t->amount)
    return lith_tx_error(tx, LITH_USER, "insufficient funds");
  if ((rc = lith_tx_exec(tx, SQL_DEBIT, "II", t->amount, t->src)) != LITH_OK ||
      (rc = lith_tx_exec(tx, SQL_CREDIT, "II", t->amount, t->dst)) != LITH_OK ||
      (rc = lith_tx_exec(tx, SQL_LEDGER, "IIIII", t->producer, t->seq, t->src, t->dst, t->amount)) != LITH_OK ||
      (rc = lith_tx_exec(tx, SQL_TOPIC, "I", t->producer)) != LITH_OK)
    return rc;
  lith_tx_touch(tx, t->producer);
  return LITH_OK;
}

/* The same statements, prepared on a plain connection. */
typedef struct stmts {
  sqlite3_stmt *balance, *debit, *credit, *ledger, *topic;
  sqlite3_stmt *begin, *commit, *rollback, *sp, *sp_release, *sp_rollback;
} stmts;

enum { TR_REFUSED = -1 };

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

/* SQLITE_OK, TR_REFUSED, or an SQLite error. */
static int transfer_sql(const stmts *s, const transfer *t) {
  sqlite3_bind_int64(s->balance, 1, t->src);
  int rc = sqlite3_step(s->balance);
  if (rc != SQLITE_ROW) {
    sqlite3_reset(s->balance);
    return rc == SQLITE_DONE ? SQLITE_NOTFOUND : rc;
  }
  int64_t bal = sqlite3_column_int64(s->balance, 0);
  sqlite3_reset(s->balance);
  if (bal < t->amount)
    return TR_REFUSED;
  if ((rc = step2(s->debit, t->amount, t->src)) != SQLITE_OK ||
      (rc = step2(s->credit, t->amount, t->dst)) != SQLITE_OK)
    return rc;
  sqlite3_bind_int64(s->ledger, 1, t->producer);
  sqlite3_bind_int64(s->ledger, 2, t->seq);
  sqlite3_bind_int64(s->ledger, 3, t->src);
  sqlite3_bind_int64(s->ledger, 4, t->dst);
  sqlite3_bind_int64(s->ledger, 5, t->amount);
  if ((rc = step_done(s->ledger)) != SQLITE_OK)
    return rc;
  sqlite3_bind_int64(s->topic, 1, t->producer);
  return step_done(s->topic);
}

static int stmts_prepare(sqlite3 *conn, stmts *s) {
  memset(s, 0, sizeof *s);
  struct {
    sqlite3_stmt **st;
    const char *sql;
  } all[] = {{&s->balance, SQL_BALANCE},
             {&s->debit, SQL_DEBIT},
             {&s->credit, SQL_CREDIT},
             {&s->ledger, SQL_LEDGER},
             {&s->topic, SQL_TOPIC},
             {&s->begin, "BEGIN IMMEDIATE"},
             {&s->commit, "COMMIT"},
             {&s->rollback, "ROLLBACK"},
             {&s->sp, "SAVEPOINT c"},
             {&s->sp_release, "RELEASE c"},
             {&s->sp_rollback, "ROLLBACK TO c"}};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
    int rc = sqlite3_prepare_v3(conn, all[i].sql, -1, SQLITE_PREPARE_PERSISTENT, all[i].st, NULL);
    if (rc != SQLITE_OK)
      return rc;
  }
  return SQLITE_OK;
}

static void stmts_finalize(stmts *s) {
  sqlite3_stmt *all[] = {s->balance, s->debit,    s->credit,     s->ledger,     s->topic,      s->begin,
                         s->commit,  s->rollback, s->sp,         s->sp_release, s->sp_rollback};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++)
    sqlite3_finalize(all[i]);
  memset(s, 0, sizeof *s);
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

/* ---- latency recording ------------------------------------------------------ */

#define LAT_BUDGET 2000000 /* values per kind (call, transaction) per arm run */

typedef struct lat_buf {
  uint64_t *v;
  size_t cap, n;      /* n <= cap values kept */
  uint64_t seen;      /* values offered */
  uint64_t sum, max;  /* over every value offered */
  uint64_t rng;
} lat_buf;

static int lat_init(lat_buf *b, size_t cap, uint64_t seed) {
  memset(b, 0, sizeof *b);
  b->v = malloc(cap * sizeof *b->v);
  b->cap = cap;
  b->rng = seed;
  return b->v ? 0 : -1;
}

static void lat_free(lat_buf *b) {
  free(b->v);
  b->v = NULL;
}

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

static size_t lat_cap(int threads, double seconds) {
  double bound = seconds * 500000.0 + 1024; /* no thread completes 500k calls/s */
  double share = (double)LAT_BUDGET / (threads > 0 ? threads : 1);
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
  uint64_t count, sum, max;
  int sampled;
  double q[3]; /* ns at the quantiles asked for; NAN when empty */
} lat_summary;

/* Merge buffers and take quantiles qs[0..nq) (nearest rank, weighted). */
static void lat_merge(lat_buf *const *bufs, int nb, const double *qs, int nq, lat_summary *out) {
  memset(out, 0, sizeof *out);
  size_t n = 0;
  for (int i = 0; i < nb; i++) {
    n += bufs[i]->n;
    out->count += bufs[i]->seen;
    out->sum += bufs[i]->sum;
    if (bufs[i]->max > out->max)
      out->max = bufs[i]->max;
    if (bufs[i]->seen > bufs[i]->n)
      out->sampled = 1;
  }
  for (int k = 0; k < nq; k++)
    out->q[k] = NAN;
  if (n == 0)
    return;
  weighted *all = malloc(n * sizeof *all);
  if (!all) {
    fprintf(stderr, "writer: out of memory merging latencies\n");
    return;
  }
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
  for (int k = 0; k < nq; k++) {
    double want = qs[k] * total * (1 - 1e-12), cum = 0;
    size_t j = 0;
    for (; j < m; j++) {
      cum += all[j].w;
      if (cum >= want)
        break;
    }
    out->q[k] = (double)all[j < m ? j : m - 1].v;
  }
  free(all);
}

/* ---- configuration ------------------------------------------------------------ */

enum { ARM_WRITER, ARM_CEILING, ARM_PERCONN, ARM_MUTEX, NARMS };
static const char *const ARM_NAME[NARMS] = {"writer", "ceiling", "perconn", "mutex"};

enum { MAX_LIST = 16 };

typedef struct config {
  int producers[MAX_LIST], nproducers;
  int sync[2], nsync;   /* LITH_SYNC_* */
  int ckpt[2], nckpt;   /* LITH_CHECKPOINT_* */
  int arms[NARMS];      /* enabled */
  double seconds, warmup;
  int rounds;
  const char *db_dir;
  const char *pin;
  const char *csv;
} config;

static const char *sync_name(int s) { return s == LITH_SYNC_FULL ? "FULL" : "NORMAL"; }
static const char *ckpt_name(int c) {
  return c == LITH_CHECKPOINT_AUTO ? "AUTO" : c == LITH_CHECKPOINT_EXTERNAL ? "NONE" : "WRITER";
}

/* ---- metrics and results ------------------------------------------------------- */

enum {
  M_CMDS_S,   /* commands answered OK per second of the window */
  M_CMDS_TX,  /* commands per transaction */
  M_TX_MS,    /* mean transaction time */
  M_TX_P99,
  M_TX_P999,
  M_CALL_P50, /* lith_do / per-command call latency */
  M_CALL_P99,
  M_CALL_MAX,
  M_TX_BUSY,   /* writer: share of the window inside BEGIN..COMMIT */
  M_CKPT_BUSY, /* writer: share of the window in checkpoints, on any thread */
  M_CKPT_WRITER, /* writer: share of the window in checkpoints on the writer thread */
  M_WAIT_P99,  /* writer: queue wait before the batch began, p99 (lith's histogram) */
  NMETRIC
};
static const char *const METRIC_CSV[NMETRIC] = {"cmds_per_s",   "cmds_per_tx", "tx_ms_mean",  "tx_p99_ms",
                                                "tx_p999_ms",   "call_p50_ms", "call_p99_ms", "call_max_ms",
                                                "writer_tx_share", "writer_ckpt_share", "writer_ckpt_writer_share",
                                                "writer_wait_p99_ms"};

typedef struct result {
  int ran;
  double m[NMETRIC]; /* NAN: not applicable */
  uint64_t commands, txs;
  int64_t errors;
  int sampled;
  int batch;          /* ceiling: the transaction size it used */
  double commit_ms;   /* writer: mean COMMIT statement time */
  uint64_t ckpts;     /* writer: checkpoints inside the window */
  double wall_s;      /* the whole arm, setup and check included */
} result;

/* ---- one arm run ------------------------------------------------------------------ */

typedef struct run run;

typedef struct producer {
  run *r;
  int id;
  pthread_t th;
  int started;
  uint64_t rng;
  int64_t seq;
  int64_t ok, errors;
  int64_t win_ok; /* OK commands completed inside the window */
  lat_buf call, tx;
  sqlite3 *conn; /* perconn */
  stmts st;      /* perconn */
} producer;

struct run {
  const config *cfg;
  int arm, sync, ckpt, P, round, batch;
  char path[4096];
  /* the start gate and the window */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int ready, go;
  int64_t ws, we;
  /* the arm's shared handles */
  lith *db;
  sqlite3 *shared;
  stmts shared_st;
  pthread_mutex_t conn_mu;
  producer *prod;
  _Atomic int msgs; /* error messages printed */
  uint64_t topics_reported;
};

static void report_error(run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report_error(run *r, const char *fmt, ...) {
  if (atomic_fetch_add(&r->msgs, 1) >= 5)
    return;
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  fprintf(stderr, "  error [%s %s P=%d %s round %d]: %s\n", ARM_NAME[r->arm], sync_name(r->sync), r->P,
          ckpt_name(r->ckpt), r->round + 1, buf);
}

static void gate_wait(run *r, int64_t *ws, int64_t *we) {
  pthread_mutex_lock(&r->mu);
  r->ready++;
  pthread_cond_broadcast(&r->cv);
  while (!r->go)
    pthread_cond_wait(&r->cv, &r->mu);
  *ws = r->ws;
  *we = r->we;
  pthread_mutex_unlock(&r->mu);
}

/* Wait until n threads are at the gate, fix the window, open the gate. */
static void gate_open(run *r, int n) {
  pthread_mutex_lock(&r->mu);
  while (r->ready < n)
    pthread_cond_wait(&r->cv, &r->mu);
  r->ws = now_ns() + (int64_t)(r->cfg->warmup * 1e9);
  r->we = r->ws + (int64_t)(r->cfg->seconds * 1e9);
  r->go = 1;
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
}

static void remove_db(const char *path) {
  static const char *const suffix[] = {"", "-wal", "-shm", "-journal"};
  char p[4200];
  for (size_t i = 0; i < sizeof suffix / sizeof *suffix; i++) {
    snprintf(p, sizeof p, "%s%s", path, suffix[i]);
    unlink(p);
  }
}

/* Open a plain connection with the pragmas lith gives its writer. */
static int open_plain(const char *path, int sync, int busy_ms, sqlite3 **out) {
  lith_options d;
  lith_options_default(&d);
  sqlite3 *conn = NULL;
  int rc = sqlite3_open_v2(path, &conn, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
  if (rc != SQLITE_OK) {
    fprintf(stderr, "open %s: %s\n", path, conn ? sqlite3_errmsg(conn) : sqlite3_errstr(rc));
    sqlite3_close(conn);
    *out = NULL;
    return rc;
  }
  sqlite3_extended_result_codes(conn, 1);
  sqlite3_busy_timeout(conn, busy_ms);
  char sql[300];
  snprintf(sql, sizeof sql,
           "PRAGMA journal_mode=WAL; PRAGMA synchronous=%s; PRAGMA cache_size=-%d; PRAGMA mmap_size=%lld;"
           " PRAGMA foreign_keys=%s; PRAGMA temp_store=MEMORY;",
           sync == LITH_SYNC_FULL ? "FULL" : "NORMAL", d.cache_size_kib, (long long)d.mmap_size,
           d.foreign_keys ? "ON" : "OFF");
  rc = sqlite3_exec(conn, sql, NULL, NULL, NULL);
  if (rc != SQLITE_OK) {
    fprintf(stderr, "pragmas on %s: %s\n", path, sqlite3_errmsg(conn));
    sqlite3_close(conn);
    *out = NULL;
    return rc;
  }
  sqlite3_wal_autocheckpoint(conn, 1000); /* SQLite's default, said out loud */
  *out = conn;
  return SQLITE_OK;
}

/* A fresh database: schema, P*10 accounts, P topics; closed, so the WAL is
 * checkpointed and gone. */
static int create_db(const char *path, int P) {
  remove_db(path);
  sqlite3 *conn;
  if (open_plain(path, LITH_SYNC_NORMAL, 5000, &conn) != SQLITE_OK)
    return -1;
  int rc = sqlite3_exec(conn, SCHEMA, NULL, NULL, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_exec(conn, "BEGIN", NULL, NULL, NULL);
  sqlite3_stmt *acc = NULL, *top = NULL;
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(conn, "INSERT INTO accounts(id, balance) VALUES (?, ?)", -1, &acc, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(conn, "INSERT INTO topics(id, version) VALUES (?, 0)", -1, &top, NULL);
  for (int64_t p = 0; rc == SQLITE_OK && p < P; p++) {
    for (int64_t k = 0; rc == SQLITE_OK && k < ACCOUNTS_PER_PRODUCER; k++)
      rc = step2(acc, p * ACCOUNTS_PER_PRODUCER + k, START_BALANCE);
    if (rc == SQLITE_OK) {
      sqlite3_bind_int64(top, 1, p);
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

/* Check the database after an arm; returns the number of mismatches. `ok` has
 * P entries: commands answered OK per producer. */
static int64_t verify_db(run *r, const int64_t *ok) {
  int64_t bad = 0, total = 0, v = 0;
  for (int p = 0; p < r->P; p++)
    total += ok[p];
  sqlite3 *conn;
  if (open_plain(r->path, LITH_SYNC_NORMAL, 5000, &conn) != SQLITE_OK) {
    report_error(r, "check: cannot open the database");
    return 1;
  }
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(conn, "PRAGMA quick_check", -1, &st, NULL) != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW ||
      strcmp((const char *)sqlite3_column_text(st, 0), "ok") != 0) {
    report_error(r, "check: quick_check failed");
    bad++;
  }
  sqlite3_finalize(st);
  int64_t money = (int64_t)r->P * ACCOUNTS_PER_PRODUCER * START_BALANCE;
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
  /* Per producer: its topic's version and its ledger rows. */
  int64_t *rows = calloc((size_t)r->P, sizeof *rows), *vers = calloc((size_t)r->P, sizeof *vers);
  if (!rows || !vers) {
    free(rows);
    free(vers);
    sqlite3_close(conn);
    report_error(r, "check: out of memory");
    return bad + 1;
  }
  if (sqlite3_prepare_v2(conn, "SELECT producer, count(*) FROM ledger GROUP BY producer", -1, &st, NULL) ==
      SQLITE_OK) {
    while (sqlite3_step(st) == SQLITE_ROW) {
      int64_t p = sqlite3_column_int64(st, 0);
      if (p >= 0 && p < r->P)
        rows[p] = sqlite3_column_int64(st, 1);
      else
        bad++;
    }
  }
  sqlite3_finalize(st);
  if (sqlite3_prepare_v2(conn, "SELECT id, version FROM topics", -1, &st, NULL) == SQLITE_OK) {
    while (sqlite3_step(st) == SQLITE_ROW) {
      int64_t p = sqlite3_column_int64(st, 0);
      if (p >= 0 && p < r->P)
        vers[p] = sqlite3_column_int64(st, 1);
    }
  }
  sqlite3_finalize(st);
  for (int p = 0; p < r->P; p++)
    if (rows[p] != ok[p] || vers[p] != ok[p]) {
      report_error(r, "check: producer %d: %lld answered OK, %lld ledger rows, topic version %lld", p,
                   (long long)ok[p], (long long)rows[p], (long long)vers[p]);
      bad++;
    }
  free(rows);
  free(vers);
  sqlite3_close(conn);
  return bad;
}

/* ---- producer threads ------------------------------------------------------------- */

static void *writer_producer(void *arg) {
  producer *pr = arg;
  run *r = pr->r;
  int64_t ws, we;
  gate_wait(r, &ws, &we);
  for (;;) {
    transfer t = make_transfer(pr->id, ++pr->seq, &pr->rng);
    int64_t t0 = now_ns();
    if (t0 >= we)
      break;
    int rc = lith_do(r->db, transfer_cmd, &t);
    int64_t t1 = now_ns();
    if (rc == LITH_OK) {
      pr->ok++;
      if (t1 >= ws && t1 < we) {
        pr->win_ok++;
        lat_add(&pr->call, (uint64_t)(t1 - t0));
      }
    } else {
      pr->errors++;
      report_error(r, "lith_do: %s: %s", lith_errstr(rc), lith_errmsg(r->db));
    }
  }
  return NULL;
}

/* BEGIN IMMEDIATE, transfer, COMMIT on `conn`; rolls back on failure.
 * *locked_at is when BEGIN returned. SQLITE_OK, TR_REFUSED or an error. */
static int one_tx(sqlite3 *conn, const stmts *st, const transfer *t, int64_t *locked_at) {
  int rc = step_done(st->begin);
  *locked_at = now_ns();
  if (rc != SQLITE_OK)
    return rc;
  rc = transfer_sql(st, t);
  if (rc == SQLITE_OK)
    rc = step_done(st->commit);
  if (rc != SQLITE_OK && !sqlite3_get_autocommit(conn))
    step_done(st->rollback);
  return rc;
}

static void note_tx_failure(run *r, producer *pr, sqlite3 *conn, int rc) {
  pr->errors++;
  if (rc == TR_REFUSED)
    report_error(r, "transfer refused: insufficient funds");
  else
    report_error(r, "transaction: %s (%d)", sqlite3_errmsg(conn), rc);
}

static void *perconn_producer(void *arg) {
  producer *pr = arg;
  run *r = pr->r;
  int64_t ws, we;
  int ready = open_plain(r->path, r->sync, 30000, &pr->conn) == SQLITE_OK &&
              stmts_prepare(pr->conn, &pr->st) == SQLITE_OK;
  if (!ready) {
    pr->errors++;
    report_error(r, "producer %d: cannot open its connection", pr->id);
  }
  gate_wait(r, &ws, &we);
  while (ready) {
    transfer t = make_transfer(pr->id, ++pr->seq, &pr->rng);
    int64_t t0 = now_ns(), tl;
    if (t0 >= we)
      break;
    int rc = one_tx(pr->conn, &pr->st, &t, &tl);
    int64_t t1 = now_ns();
    if (rc == SQLITE_OK) {
      pr->ok++;
      if (t1 >= ws && t1 < we) {
        pr->win_ok++;
        lat_add(&pr->call, (uint64_t)(t1 - t0));
        lat_add(&pr->tx, (uint64_t)(t1 - tl));
      }
    } else {
      note_tx_failure(r, pr, pr->conn, rc);
    }
  }
  stmts_finalize(&pr->st);
  if (pr->conn)
    sqlite3_close(pr->conn);
  pr->conn = NULL;
  return NULL;
}

static void *mutex_producer(void *arg) {
  producer *pr = arg;
  run *r = pr->r;
  int64_t ws, we;
  gate_wait(r, &ws, &we);
  for (;;) {
    transfer t = make_transfer(pr->id, ++pr->seq, &pr->rng);
    int64_t t0 = now_ns(), tl;
    if (t0 >= we)
      break;
    pthread_mutex_lock(&r->conn_mu);
    int64_t tb = now_ns();
    int rc = one_tx(r->shared, &r->shared_st, &t, &tl);
    int64_t te = now_ns();
    if (rc != SQLITE_OK)
      note_tx_failure(r, pr, r->shared, rc);
    pthread_mutex_unlock(&r->conn_mu);
    int64_t t1 = now_ns();
    if (rc == SQLITE_OK) {
      pr->ok++;
      if (t1 >= ws && t1 < we) {
        pr->win_ok++;
        lat_add(&pr->call, (uint64_t)(t1 - t0));
        lat_add(&pr->tx, (uint64_t)(te - tb));
      }
    }
  }
  return NULL;
}

static void on_commit(void *ctx, const int64_t *topics, int n) {
  run *r = ctx;
  (void)topics;
  r->topics_reported += (uint64_t)n; /* writer thread only */
}

/* ---- the arms ---------------------------------------------------------------------- */

static const double QS[3] = {0.50, 0.99, 0.999};

static void fill_call(result *res, producer *prod, int P) {
  lat_buf **bufs = malloc((size_t)P * sizeof *bufs);
  if (!bufs)
    return;
  for (int i = 0; i < P; i++)
    bufs[i] = &prod[i].call;
  lat_summary s;
  lat_merge(bufs, P, QS, 3, &s);
  res->m[M_CALL_P50] = s.q[0] / 1e6;
  res->m[M_CALL_P99] = s.q[1] / 1e6;
  res->m[M_CALL_MAX] = s.count ? (double)s.max / 1e6 : NAN;
  res->sampled |= s.sampled;
  free(bufs);
}

static void fill_tx(result *res, lat_buf *const *bufs, int nb) {
  lat_summary s;
  lat_merge(bufs, nb, QS, 3, &s);
  res->txs = s.count;
  res->m[M_TX_MS] = s.count ? (double)s.sum / (double)s.count / 1e6 : NAN;
  res->m[M_TX_P99] = s.q[1] / 1e6;
  res->m[M_TX_P999] = s.q[2] / 1e6;
  res->sampled |= s.sampled;
}

/* Threads of the writer, perconn and mutex arms: start, window, join, check. */
static void run_threads(run *r, result *res, void *(*fn)(void *)) {
  const config *cfg = r->cfg;
  int P = r->P;
  size_t cap = lat_cap(P, cfg->seconds);
  r->prod = calloc((size_t)P, sizeof *r->prod);
  int64_t *ok = calloc((size_t)P, sizeof *ok);
  if (!r->prod || !ok) {
    fprintf(stderr, "writer: out of memory\n");
    exit(1);
  }
  for (int i = 0; i < P; i++) {
    producer *pr = &r->prod[i];
    pr->r = r;
    pr->id = i;
    pr->rng = rng_seed((uint64_t)i, (uint64_t)r->round * 1000 + (uint64_t)r->arm);
    if (lat_init(&pr->call, cap, pr->rng ^ 1) || (r->arm != ARM_WRITER && lat_init(&pr->tx, cap, pr->rng ^ 2))) {
      fprintf(stderr, "writer: out of memory for latency buffers\n");
      exit(1);
    }
  }
  int started = 0;
  for (int i = 0; i < P; i++) {
    if (pthread_create(&r->prod[i].th, NULL, fn, &r->prod[i]) != 0) {
      report_error(r, "pthread_create failed for producer %d", i);
      res->errors++;
      continue;
    }
    r->prod[i].started = 1;
    started++;
  }
  gate_open(r, started);

  lith_stats s0, s1;
  int64_t snap0 = 0, snap1 = 1;
  if (r->arm == ARM_WRITER) {
    sleep_until(r->ws);
    lith_stats_get(r->db, &s0);
    snap0 = now_ns();
    sleep_until(r->we);
    lith_stats_get(r->db, &s1);
    snap1 = now_ns();
  }
  for (int i = 0; i < P; i++)
    if (r->prod[i].started)
      pthread_join(r->prod[i].th, NULL);

  double window_s = (double)(r->we - r->ws) / 1e9;
  for (int i = 0; i < P; i++) {
    producer *pr = &r->prod[i];
    ok[i] = pr->ok;
    res->errors += pr->errors;
    res->commands += (uint64_t)pr->win_ok;
  }
  res->m[M_CMDS_S] = (double)res->commands / window_s;
  fill_call(res, r->prod, P);

  if (r->arm == ARM_WRITER) {
    uint64_t cmds = s1.commands - s0.commands, batches = s1.batches - s0.batches;
    res->txs = batches;
    res->m[M_CMDS_TX] = batches ? (double)cmds / (double)batches : NAN;
    res->m[M_TX_MS] = batches ? (double)(s1.tx_ns_total - s0.tx_ns_total) / (double)batches / 1e6 : NAN;
    res->m[M_TX_P99] = batches ? (double)lith_lat_quantile_ns(s1.tx_lat, s0.tx_lat, 0.99) / 1e6 : NAN;
    res->m[M_TX_P999] = batches ? (double)lith_lat_quantile_ns(s1.tx_lat, s0.tx_lat, 0.999) / 1e6 : NAN;
    res->commit_ms = batches ? (double)(s1.commit_ns_total - s0.commit_ns_total) / (double)batches / 1e6 : NAN;
    res->ckpts = s1.checkpoints - s0.checkpoints;
    double window_ns = (double)(snap1 - snap0); /* the snapshots' own interval */
    res->m[M_TX_BUSY] = (double)(s1.tx_ns_total - s0.tx_ns_total) / window_ns;
    res->m[M_CKPT_BUSY] = (double)(s1.checkpoint_ns_total - s0.checkpoint_ns_total) / window_ns;
    res->m[M_CKPT_WRITER] = (double)(s1.checkpoint_ns_writer - s0.checkpoint_ns_writer) / window_ns;
    res->m[M_WAIT_P99] = cmds ? (double)lith_lat_quantile_ns(s1.wait_lat, s0.wait_lat, 0.99) / 1e6 : NAN;
    int rc = lith_close(r->db);
    r->db = NULL;
    if (rc != LITH_OK) {
      report_error(r, "lith_close: %s: %s", lith_errstr(rc), lith_errmsg(NULL));
      res->errors++;
    }
  } else {
    lat_buf **bufs = malloc((size_t)P * sizeof *bufs);
    if (bufs) {
      for (int i = 0; i < P; i++)
        bufs[i] = &r->prod[i].tx;
      fill_tx(res, bufs, P);
      free(bufs);
    }
    res->m[M_CMDS_TX] = res->txs ? (double)res->commands / (double)res->txs : NAN;
  }
  if (r->arm == ARM_MUTEX) {
    stmts_finalize(&r->shared_st);
    if (sqlite3_close(r->shared) != SQLITE_OK) {
      report_error(r, "close: %s", sqlite3_errmsg(r->shared));
      res->errors++;
    }
    r->shared = NULL;
  }
  res->errors += verify_db(r, ok);
  for (int i = 0; i < P; i++) {
    lat_free(&r->prod[i].call);
    lat_free(&r->prod[i].tx);
  }
  free(r->prod);
  r->prod = NULL;
  free(ok);
}

static void arm_writer(run *r, result *res) {
  lith_options opt;
  lith_options_default(&opt);
  opt.synchronous = r->sync;
  opt.checkpoint = r->ckpt;
  opt.readers = 1;
  opt.on_commit = on_commit;
  opt.on_commit_ctx = r;
  int rc = lith_open(r->path, &opt, &r->db);
  if (rc != LITH_OK) {
    report_error(r, "lith_open: %s", lith_errmsg(NULL));
    res->errors++;
    return;
  }
  run_threads(r, res, writer_producer);
}

static void arm_perconn(run *r, result *res) { run_threads(r, res, perconn_producer); }

static void arm_mutex(run *r, result *res) {
  if (open_plain(r->path, r->sync, 30000, &r->shared) != SQLITE_OK ||
      stmts_prepare(r->shared, &r->shared_st) != SQLITE_OK) {
    report_error(r, "cannot open the shared connection");
    res->errors++;
    stmts_finalize(&r->shared_st);
    sqlite3_close(r->shared);
    r->shared = NULL;
    return;
  }
  run_threads(r, res, mutex_producer);
}

/* One thread, transactions of r->batch commands, commands cycling through the
 * P producers' accounts. */
static void arm_ceiling(run *r, result *res) {
  const config *cfg = r->cfg;
  int P = r->P, k = r->batch;
  sqlite3 *conn;
  stmts st;
  if (open_plain(r->path, r->sync, 5000, &conn) != SQLITE_OK) {
    res->errors++;
    return;
  }
  if (stmts_prepare(conn, &st) != SQLITE_OK) {
    report_error(r, "prepare: %s", sqlite3_errmsg(conn));
    res->errors++;
    stmts_finalize(&st);
    sqlite3_close(conn);
    return;
  }
  int64_t *ok = calloc((size_t)P, sizeof *ok), *seq = calloc((size_t)P, sizeof *seq);
  lat_buf txb;
  if (!ok || !seq || lat_init(&txb, lat_cap(1, cfg->seconds), 99)) {
    fprintf(stderr, "writer: out of memory\n");
    exit(1);
  }
  int64_t *tx_ok = calloc((size_t)k, sizeof *tx_ok); /* producers of this transaction's OK commands */
  if (!tx_ok) {
    fprintf(stderr, "writer: out of memory\n");
    exit(1);
  }
  uint64_t rng = rng_seed((uint64_t)r->round, 4242);
  int next = 0;
  r->ws = now_ns() + (int64_t)(cfg->warmup * 1e9);
  r->we = r->ws + (int64_t)(cfg->seconds * 1e9);
  for (;;) {
    int64_t t0 = now_ns();
    if (t0 >= r->we)
      break;
    int rc = step_done(st.begin), nok = 0;
    for (int i = 0; rc == SQLITE_OK && i < k; i++) {
      int p = next;
      next = (next + 1) % P;
      transfer t = make_transfer(p, ++seq[p], &rng);
      if ((rc = step_done(st.sp)) != SQLITE_OK)
        break;
      int trc = transfer_sql(&st, &t);
      if (trc == SQLITE_OK) {
        rc = step_done(st.sp_release);
        if (rc == SQLITE_OK)
          tx_ok[nok++] = p;
      } else {
        res->errors++;
        if (trc == TR_REFUSED)
          report_error(r, "transfer refused: insufficient funds");
        else
          report_error(r, "transfer: %s", sqlite3_errmsg(conn));
        if (sqlite3_get_autocommit(conn)) {
          rc = trc;
          break;
        }
        if ((rc = step_done(st.sp_rollback)) == SQLITE_OK)
          rc = step_done(st.sp_release);
      }
    }
    if (rc == SQLITE_OK)
      rc = step_done(st.commit);
    int64_t t1 = now_ns();
    if (rc != SQLITE_OK) {
      report_error(r, "transaction: %s", sqlite3_errmsg(conn));
      res->errors++;
      if (!sqlite3_get_autocommit(conn))
        step_done(st.rollback);
      continue;
    }
    for (int i = 0; i < nok; i++)
      ok[tx_ok[i]]++;
    if (t1 >= r->ws && t1 < r->we) {
      res->commands += (uint64_t)nok;
      lat_add(&txb, (uint64_t)(t1 - t0));
    }
  }
  stmts_finalize(&st);
  if (sqlite3_close(conn) != SQLITE_OK) {
    report_error(r, "close failed");
    res->errors++;
  }
  lat_buf *bufs[1] = {&txb};
  fill_tx(res, bufs, 1);
  res->m[M_CMDS_S] = (double)res->commands / cfg->seconds;
  res->m[M_CMDS_TX] = res->txs ? (double)res->commands / (double)res->txs : NAN;
  res->batch = k;
  res->errors += verify_db(r, ok);
  lat_free(&txb);
  free(ok);
  free(seq);
  free(tx_ok);
}

/* ---- the plan ----------------------------------------------------------------------- */

typedef struct bench {
  config cfg;
  result *res; /* [arm][sync][producers][ckpt][round] */
  FILE *csv;
  int64_t total_errors;
} bench;

static result *res_at(bench *b, int arm, int si, int pi, int ci, int r) {
  const config *c = &b->cfg;
  size_t i = ((((size_t)arm * (size_t)c->nsync + (size_t)si) * (size_t)c->nproducers + (size_t)pi) *
                  (size_t)c->nckpt +
              (size_t)ci) *
                 (size_t)c->rounds +
             (size_t)r;
  return &b->res[i];
}

static void csv_header(FILE *f) {
  fprintf(f, "sync,producers,checkpoint,arm,round");
  for (int m = 0; m < NMETRIC; m++)
    fprintf(f, ",%s", METRIC_CSV[m]);
  fprintf(f, ",commands,transactions,errors,sampled,ceiling_batch,commit_ms_mean,checkpoints,arm_wall_s\n");
}

static void csv_num(FILE *f, double v) {
  if (isnan(v))
    fprintf(f, ",");
  else
    fprintf(f, ",%.6g", v);
}

static void csv_row(bench *b, int arm, int si, int pi, int ci, const char *round, const result *x) {
  const config *c = &b->cfg;
  if (!b->csv)
    return;
  fprintf(b->csv, "%s,%d,%s,%s,%s", sync_name(c->sync[si]), c->producers[pi],
          arm == ARM_WRITER || arm == ARM_CEILING ? ckpt_name(c->ckpt[ci]) : "sqlite-auto", ARM_NAME[arm], round);
  for (int m = 0; m < NMETRIC; m++)
    csv_num(b->csv, x->m[m]);
  if (x->ran)
    fprintf(b->csv, ",%llu,%llu", (unsigned long long)x->commands, (unsigned long long)x->txs);
  else /* a summary row: counts are per round */
    fprintf(b->csv, ",,");
  fprintf(b->csv, ",%lld,%d", (long long)x->errors, x->sampled);
  if (arm == ARM_CEILING && x->ran)
    fprintf(b->csv, ",%d", x->batch);
  else
    fprintf(b->csv, ",");
  if (arm == ARM_WRITER) {
    csv_num(b->csv, x->commit_ms);
    fprintf(b->csv, ",%llu", (unsigned long long)x->ckpts);
  } else {
    fprintf(b->csv, ",,");
  }
  csv_num(b->csv, x->wall_s);
  fprintf(b->csv, "\n");
  fflush(b->csv);
}

static void run_one(bench *b, int arm, int si, int pi, int ci, int round) {
  const config *c = &b->cfg;
  run r;
  memset(&r, 0, sizeof r);
  r.cfg = c;
  r.arm = arm;
  r.sync = c->sync[si];
  r.ckpt = c->ckpt[ci];
  r.P = c->producers[pi];
  r.round = round;
  pthread_mutex_init(&r.mu, NULL);
  pthread_cond_init(&r.cv, NULL);
  pthread_mutex_init(&r.conn_mu, NULL);
  snprintf(r.path, sizeof r.path, "%s/%s-%s-p%d-%s-r%d.db", c->db_dir, ARM_NAME[arm], sync_name(r.sync), r.P,
           ckpt_name(r.ckpt), round + 1);
  result *res = res_at(b, arm, si, pi, ci, round);
  memset(res, 0, sizeof *res);
  for (int m = 0; m < NMETRIC; m++)
    res->m[m] = NAN;
  res->commit_ms = NAN;
  if (arm == ARM_CEILING) {
    const result *w = res_at(b, ARM_WRITER, si, pi, ci, round);
    double mean = w->ran && !isnan(w->m[M_CMDS_TX]) ? w->m[M_CMDS_TX] : (double)r.P;
    r.batch = (int)lround(mean);
    if (r.batch < 1)
      r.batch = 1;
  }
  int64_t t0 = now_ns();
  if (create_db(r.path, r.P) != 0) {
    res->errors++;
  } else {
    switch (arm) {
    case ARM_WRITER:
      arm_writer(&r, res);
      break;
    case ARM_CEILING:
      arm_ceiling(&r, res);
      break;
    case ARM_PERCONN:
      arm_perconn(&r, res);
      break;
    default:
      arm_mutex(&r, res);
      break;
    }
  }
  remove_db(r.path);
  res->wall_s = (double)(now_ns() - t0) / 1e9;
  res->ran = 1;
  b->total_errors += res->errors;
  pthread_mutex_destroy(&r.mu);
  pthread_cond_destroy(&r.cv);
  pthread_mutex_destroy(&r.conn_mu);

  char rbuf[16];
  snprintf(rbuf, sizeof rbuf, "%d", round + 1);
  csv_row(b, arm, si, pi, ci, rbuf, res);
  fprintf(stderr,
          "[round %d/%d] %-6s P=%-4d %-6s %-7s %9.0f cmd/s %7.1f cmd/tx  tx %.3f ms p99 %.3f  call p99 %.3f max %.3f"
          "  errors %lld  (%.1f s)\n",
          round + 1, c->rounds, sync_name(r.sync), r.P,
          arm == ARM_WRITER || arm == ARM_CEILING ? ckpt_name(r.ckpt) : "-", ARM_NAME[arm], res->m[M_CMDS_S],
          res->m[M_CMDS_TX], res->m[M_TX_MS], res->m[M_TX_P99], res->m[M_CALL_P99], res->m[M_CALL_MAX],
          (long long)res->errors, res->wall_s);
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

static agg aggregate(bench *b, int arm, int si, int pi, int ci, int metric) {
  double v[256];
  agg a = {0, NAN, NAN, NAN};
  for (int r = 0; r < b->cfg.rounds && a.n < 256; r++) {
    const result *x = res_at(b, arm, si, pi, ci, r);
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

static int64_t errors_of(bench *b, int arm, int si, int pi, int ci) {
  int64_t e = 0;
  for (int r = 0; r < b->cfg.rounds; r++)
    e += res_at(b, arm, si, pi, ci, r)->errors;
  return e;
}

static int arm_ran(bench *b, int arm, int si, int pi, int ci) { return res_at(b, arm, si, pi, ci, 0)->ran; }

static void csv_summaries(bench *b) {
  const config *c = &b->cfg;
  if (!b->csv)
    return;
  static const char *const what[3] = {"median", "min", "max"};
  for (int arm = 0; arm < NARMS; arm++)
    for (int si = 0; si < c->nsync; si++)
      for (int pi = 0; pi < c->nproducers; pi++)
        for (int ci = 0; ci < c->nckpt; ci++) {
          if ((arm == ARM_PERCONN || arm == ARM_MUTEX) && ci > 0)
            continue;
          if (!arm_ran(b, arm, si, pi, ci))
            continue;
          for (int w = 0; w < 3; w++) {
            result x;
            memset(&x, 0, sizeof x);
            for (int m = 0; m < NMETRIC; m++) {
              agg a = aggregate(b, arm, si, pi, ci, m);
              x.m[m] = w == 0 ? a.med : w == 1 ? a.lo : a.hi;
            }
            x.commit_ms = NAN;
            x.wall_s = NAN;
            x.errors = errors_of(b, arm, si, pi, ci);
            for (int r = 0; r < c->rounds; r++)
              x.sampled |= res_at(b, arm, si, pi, ci, r)->sampled;
            csv_row(b, arm, si, pi, ci, what[w], &x);
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

static void fmt_ratio(char *buf, size_t n, double x) {
  if (isnan(x) || isinf(x))
    snprintf(buf, n, "–");
  else
    snprintf(buf, n, "%.2f×", x);
}

static double ratio(bench *b, int si, int pi, int ci, int other) {
  int oci = other == ARM_CEILING ? ci : 0;
  if (!arm_ran(b, ARM_WRITER, si, pi, ci) || !arm_ran(b, other, si, pi, oci))
    return NAN;
  double w = aggregate(b, ARM_WRITER, si, pi, ci, M_CMDS_S).med;
  double o = aggregate(b, other, si, pi, oci, M_CMDS_S).med;
  return o > 0 ? w / o : NAN;
}

static void table_row(bench *b, int arm, int si, int pi, int ci) {
  const config *c = &b->cfg;
  char ms[8][32], rt[3][32];
  agg cs = aggregate(b, arm, si, pi, ci, M_CMDS_S);
  for (int m = M_TX_MS; m <= M_CALL_MAX; m++)
    fmt_ms(ms[m], sizeof ms[m], aggregate(b, arm, si, pi, ci, m).med);
  agg tx = aggregate(b, arm, si, pi, ci, M_CMDS_TX);
  for (int k = 0; k < 3; k++)
    snprintf(rt[k], sizeof rt[k], " ");
  if (arm == ARM_WRITER) {
    fmt_ratio(rt[0], sizeof rt[0], ratio(b, si, pi, ci, ARM_CEILING));
    fmt_ratio(rt[1], sizeof rt[1], ratio(b, si, pi, ci, ARM_PERCONN));
    fmt_ratio(rt[2], sizeof rt[2], ratio(b, si, pi, ci, ARM_MUTEX));
  }
  const char *ck = arm == ARM_WRITER || arm == ARM_CEILING ? ckpt_name(c->ckpt[ci]) : "(sqlite)";
  char txs[32];
  if (isnan(tx.med))
    snprintf(txs, sizeof txs, "–");
  else
    snprintf(txs, sizeof txs, "%.1f", tx.med);
  printf("| %d | %s | %s | %.0f (%.0f–%.0f) | %s | %s | %s | %s | %s | %s | %s | %lld | %s | %s | %s |\n",
         c->producers[pi], ck, ARM_NAME[arm], cs.med, cs.lo, cs.hi, txs, ms[M_TX_MS], ms[M_TX_P99], ms[M_TX_P999],
         ms[M_CALL_P50], ms[M_CALL_P99], ms[M_CALL_MAX], (long long)errors_of(b, arm, si, pi, ci), rt[0], rt[1],
         rt[2]);
}

static void print_tables(bench *b) {
  const config *c = &b->cfg;
  for (int si = 0; si < c->nsync; si++) {
    printf("\n### synchronous=%s\n\n", sync_name(c->sync[si]));
    printf("| P | ckpt | arm | cmd/s median (min–max) | cmd/tx | tx ms | tx p99 | tx p99.9 | call p50 | call p99 "
           "| call max | err | ÷ceil | ÷conn | ÷mutex |\n");
    printf("|--:|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for (int pi = 0; pi < c->nproducers; pi++) {
      for (int ci = 0; ci < c->nckpt; ci++)
        for (int arm = ARM_WRITER; arm <= ARM_CEILING; arm++)
          if (arm_ran(b, arm, si, pi, ci))
            table_row(b, arm, si, pi, ci);
      for (int arm = ARM_PERCONN; arm <= ARM_MUTEX; arm++)
        if (arm_ran(b, arm, si, pi, 0))
          table_row(b, arm, si, pi, 0);
    }
  }
  printf("\nColumns: median over rounds (cmd/s also min–max). Times in ms. tx = BEGIN IMMEDIATE to end of COMMIT\n"
         "(writer: lith's histogram, bucket upper bound; perconn: from lock acquired). call = one lith_do, or one\n"
         "command including its wait for the lock (ceiling has no callers). cmd/tx of ceiling: the batch size it\n"
         "ran (the writer's mean in that cell and round). ÷: writer's median cmd/s over the baseline's.\n");
}

/* Where the writer's time goes: it is one thread, so every part of its cycle
 * that is not the transaction is throughput the ceiling does not lose. */
static void print_writer_cycle(bench *b) {
  const config *c = &b->cfg;
  if (!c->arms[ARM_WRITER])
    return;
  printf("\n### writer: where its time goes (medians)\n\n");
  printf("| sync | P | ckpt | cmd/tx | in tx | checkpointing (any thread) | checkpoints on the writer "
         "| rest (take, answer, idle) | queue wait p99 ms | lith_do p99 ms |\n");
  printf("|---|--:|---|--:|--:|--:|--:|--:|--:|--:|\n");
  for (int si = 0; si < c->nsync; si++)
    for (int pi = 0; pi < c->nproducers; pi++)
      for (int ci = 0; ci < c->nckpt; ci++) {
        if (!arm_ran(b, ARM_WRITER, si, pi, ci))
          continue;
        double tx = aggregate(b, ARM_WRITER, si, pi, ci, M_TX_BUSY).med;
        double ck = aggregate(b, ARM_WRITER, si, pi, ci, M_CKPT_BUSY).med;
        double ckw = aggregate(b, ARM_WRITER, si, pi, ci, M_CKPT_WRITER).med;
        char w[32], d[32];
        fmt_ms(w, sizeof w, aggregate(b, ARM_WRITER, si, pi, ci, M_WAIT_P99).med);
        fmt_ms(d, sizeof d, aggregate(b, ARM_WRITER, si, pi, ci, M_CALL_P99).med);
        printf("| %s | %d | %s | %.1f | %.0f%% | %.1f%% | %.1f%% | %.0f%% | %s | %s |\n", sync_name(c->sync[si]),
               c->producers[pi], ckpt_name(c->ckpt[ci]), aggregate(b, ARM_WRITER, si, pi, ci, M_CMDS_TX).med,
               100 * tx, 100 * ck, 100 * ckw, 100 * (1 - tx - (c->ckpt[ci] == LITH_CHECKPOINT_AUTO ? 0 : ckw)),
               w, d);
      }
  printf("\nShares of the measured window. In AUTO mode checkpoints run inside COMMIT: \"in tx\" includes them.\n"
         "In WRITER mode most checkpointing runs on the checkpointer thread, beside the writer.\n");
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
  char d[256];
  int pi200 = find_idx(c->producers, c->nproducers, 200), pi1 = find_idx(c->producers, c->nproducers, 1);
  int siN = find_idx(c->sync, c->nsync, LITH_SYNC_NORMAL), siF = find_idx(c->sync, c->nsync, LITH_SYNC_FULL);
  int ciW = find_idx(c->ckpt, c->nckpt, LITH_CHECKPOINT_WRITER);
  int ciA = find_idx(c->ckpt, c->nckpt, LITH_CHECKPOINT_AUTO);
  printf("\n### targets\n\n");

  struct {
    int si;
    double ceil, conn;
    const char *name;
  } big[2] = {{siN, 0.75, 5, "NORMAL"}, {siF, 0.70, 15, "FULL"}};
  for (int k = 0; k < 2; k++) {
    int si = big[k].si, have = si >= 0 && pi200 >= 0 && ciW >= 0;
    double rc = have ? ratio(b, si, pi200, ciW, ARM_CEILING) : NAN;
    double rp = have ? ratio(b, si, pi200, ciW, ARM_PERCONN) : NAN;
    char what[128];
    snprintf(what, sizeof what, "200 producers %s WRITER: writer ≥ %.2f × ceiling", big[k].name, big[k].ceil);
    snprintf(d, sizeof d, "%.2f×", rc);
    print_target(what, have && !isnan(rc), rc >= big[k].ceil, d);
    snprintf(what, sizeof what, "200 producers %s WRITER: writer ≥ %.0f × per-connection", big[k].name,
             big[k].conn);
    snprintf(d, sizeof d, "%.2f×", rp);
    print_target(what, have && !isnan(rp), rp >= big[k].conn, d);
  }
  struct {
    int si;
    double min;
    const char *name;
  } one[2] = {{siN, 0.8, "NORMAL"}, {siF, 0.9, "FULL"}};
  for (int k = 0; k < 2; k++) {
    int have = one[k].si >= 0 && pi1 >= 0 && ciW >= 0;
    double rp = have ? ratio(b, one[k].si, pi1, ciW, ARM_PERCONN) : NAN;
    char what[128];
    snprintf(what, sizeof what, "1 producer %s WRITER: writer ≥ %.1f × per-connection", one[k].name, one[k].min);
    snprintf(d, sizeof d, "%.2f×", rp);
    print_target(what, have && !isnan(rp), rp >= one[k].min, d);
  }
  for (int k = 0; k < 2; k++) {
    int si = k == 0 ? siN : siF;
    int have = si >= 0 && pi200 >= 0 && ciW >= 0 && ciA >= 0 && arm_ran(b, ARM_WRITER, si, pi200, ciW) &&
               arm_ran(b, ARM_WRITER, si, pi200, ciA);
    for (int m = M_TX_P99; m <= M_TX_P999; m++) {
      double w = have ? aggregate(b, ARM_WRITER, si, pi200, ciW, m).med : NAN;
      double a = have ? aggregate(b, ARM_WRITER, si, pi200, ciA, m).med : NAN;
      char what[128];
      snprintf(what, sizeof what, "200 producers %s: writer tx %s with WRITER checkpoints < AUTO",
               k == 0 ? "NORMAL" : "FULL", m == M_TX_P99 ? "p99" : "p99.9");
      snprintf(d, sizeof d, "WRITER %.3f ms, AUTO %.3f ms", w, a);
      print_target(what, have && !isnan(w) && !isnan(a), w < a, d);
    }
  }
  {
    int have = siN >= 0 && pi200 >= 0 && ciW >= 0 && arm_ran(b, ARM_WRITER, siN, pi200, ciW);
    double p99 = have ? aggregate(b, ARM_WRITER, siN, pi200, ciW, M_CALL_P99).med : NAN;
    double mx = have ? aggregate(b, ARM_WRITER, siN, pi200, ciW, M_CALL_MAX).hi : NAN;
    snprintf(d, sizeof d, "%.3f ms (median of rounds)", p99);
    print_target("200 producers NORMAL WRITER: lith_do p99 < 5 ms", have && !isnan(p99), p99 < 5, d);
    snprintf(d, sizeof d, "%.3f ms (worst round)", mx);
    print_target("200 producers NORMAL WRITER: lith_do max < 100 ms", have && !isnan(mx), mx < 100, d);
  }
}

/* ---- options ------------------------------------------------------------------------------ */

static void usage(FILE *f) {
  fprintf(f,
          "usage: writer [options]\n"
          "  --producers LIST   producer counts, e.g. 1,50,200 (default)\n"
          "  --sync LIST        full,normal (default both)\n"
          "  --checkpoint LIST  auto,writer (default both); none (never) for comparison\n"
          "  --arms LIST        writer,ceiling,perconn,mutex (default all)\n"
          "  --seconds S        measured window per arm (default 3)\n"
          "  --warmup S         warm-up before the window (default 0.5)\n"
          "  --rounds N         rounds, interleaved across arms and cells (default 3)\n"
          "  --db-dir DIR       where the databases go (default: a new directory under /tmp)\n"
          "  --pin CPUS         run the whole process on these CPUs, e.g. 0-1 or 0,2\n"
          "  --csv PATH         CSV output (default bench/results/writer-YYYYMMDD-HHMMSS.csv)\n"
          "  --quick            smoke run: 1 round, 1 s, warm-up 0.25 s, producers 1,50\n"
          "  --help\n");
}

static void die_usage(const char *fmt, const char *arg) {
  fprintf(stderr, "writer: ");
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

static void add_producers(config *c, const char *s, size_t n) {
  char buf[32];
  if (n >= sizeof buf)
    die_usage("bad producer count in %s", s);
  memcpy(buf, s, n);
  buf[n] = '\0';
  char *end;
  long v = strtol(buf, &end, 10);
  if (*end || v < 1 || v > 10000)
    die_usage("producer counts are 1..10000, got %s", buf);
  if (c->nproducers == MAX_LIST)
    die_usage("too many producer counts: %s", buf);
  c->producers[c->nproducers++] = (int)v;
}

static void add_sync(config *c, const char *s, size_t n) {
  int v = item_is(s, n, "full") ? LITH_SYNC_FULL : item_is(s, n, "normal") ? LITH_SYNC_NORMAL : 0;
  if (!v || c->nsync == 2 || find_idx(c->sync, c->nsync, v) >= 0)
    die_usage("--sync takes full,normal: %s", s);
  c->sync[c->nsync++] = v;
}

static void add_ckpt(config *c, const char *s, size_t n) {
  /* "none" (EXTERNAL: never checkpoint) is not in the standard set: it shows
   * what the writer does with checkpoints out of the picture. */
  int v = item_is(s, n, "auto")     ? LITH_CHECKPOINT_AUTO
          : item_is(s, n, "writer") ? LITH_CHECKPOINT_WRITER
          : item_is(s, n, "none")   ? LITH_CHECKPOINT_EXTERNAL
                                    : -1;
  if (v < 0 || c->nckpt == 2 || find_idx(c->ckpt, c->nckpt, v) >= 0)
    die_usage("--checkpoint takes auto,writer: %s", s);
  c->ckpt[c->nckpt++] = v;
}

static void add_arm(config *c, const char *s, size_t n) {
  for (int a = 0; a < NARMS; a++)
    if (item_is(s, n, ARM_NAME[a])) {
      c->arms[a] = 1;
      return;
    }
  die_usage("--arms takes writer,ceiling,perconn,mutex: %s", s);
}

static double parse_seconds(const char *s, const char *opt, double min) {
  char *end;
  double v = strtod(s, &end);
  if (*end || !(v >= min) || v > 3600)
    die_usage("bad value for %s", opt);
  return v;
}

static int parse_cpus(const char *s, cpu_set_t *set) {
  CPU_ZERO(set);
  while (*s) {
    char *end;
    long a = strtol(s, &end, 10), b = a;
    if (end == s || a < 0 || a >= CPU_SETSIZE)
      return -1;
    s = end;
    if (*s == '-') {
      b = strtol(s + 1, &end, 10);
      if (end == s + 1 || b < a || b >= CPU_SETSIZE)
        return -1;
      s = end;
    }
    for (long i = a; i <= b; i++)
      CPU_SET((int)i, set);
    if (*s == ',')
      s++;
    else if (*s)
      return -1;
  }
  return CPU_COUNT(set) > 0 ? 0 : -1;
}

static void parse_args(int argc, char **argv, config *c) {
  int set_prod = 0, set_sec = 0, set_warm = 0, set_rounds = 0, set_arms = 0, quick = 0;
  memset(c, 0, sizeof *c);
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
    if (!strcmp(a, "--producers")) {
      c->nproducers = 0;
      parse_list(v, a, add_producers, c);
      set_prod = 1;
    } else if (!strcmp(a, "--sync")) {
      c->nsync = 0;
      parse_list(v, a, add_sync, c);
    } else if (!strcmp(a, "--checkpoint")) {
      c->nckpt = 0;
      parse_list(v, a, add_ckpt, c);
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
    } else if (!strcmp(a, "--pin")) {
      c->pin = v;
    } else if (!strcmp(a, "--csv")) {
      c->csv = v;
    } else {
      die_usage("unknown option: %s", a);
    }
  }
  if (!set_prod) {
    static const int def[] = {1, 50, 200}, q[] = {1, 50};
    const int *src = quick ? q : def;
    c->nproducers = quick ? 2 : 3;
    memcpy(c->producers, src, (size_t)c->nproducers * sizeof *src);
  }
  if (!c->nsync) {
    c->sync[0] = LITH_SYNC_FULL;
    c->sync[1] = LITH_SYNC_NORMAL;
    c->nsync = 2;
  }
  if (!c->nckpt) {
    c->ckpt[0] = LITH_CHECKPOINT_AUTO;
    c->ckpt[1] = LITH_CHECKPOINT_WRITER;
    c->nckpt = 2;
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
  snprintf(buf, n, "unknown");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f)
    return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) != 0)
      continue;
    char *p = strchr(line, ':');
    if (!p)
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

static void print_header(const config *c, int argc, char **argv, const char *csv_path) {
  char model[256];
  cpu_model(model, sizeof model);
  struct utsname u;
  int have_u = uname(&u) == 0;
  cpu_set_t set;
  int usable = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : -1;
  printf("# lith writer benchmark\n\n");
  printf("command: ");
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    int plain = *a && strspn(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=.,/:+") ==
                          strlen(a);
    printf(i ? " " : "");
    if (plain) {
      printf("%s", a);
    } else {
      putchar('\'');
      for (; *a; a++)
        if (*a == '\'')
          printf("'\\''");
        else
          putchar(*a);
      putchar('\'');
    }
  }
  printf("\n");
  time_t now = time(NULL);
  char when[64];
  strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S %z", localtime(&now));
  printf("date: %s\n", when);
  printf("machine: nproc %ld (usable %d%s%s), CPU %s, kernel %s\n", sysconf(_SC_NPROCESSORS_ONLN), usable,
         c->pin ? ", pinned to " : "", c->pin ? c->pin : "", model, have_u ? u.release : "?");
  printf("SQLite %s (%s), lith %s\n", sqlite3_libversion(), sqlite3_sourceid(), LITH_VERSION);
  printf("databases: %s (%s)\n", c->db_dir, fs_name(c->db_dir));
  printf("plan: producers");
  for (int i = 0; i < c->nproducers; i++)
    printf("%s%d", i ? "," : " ", c->producers[i]);
  printf("; synchronous");
  for (int i = 0; i < c->nsync; i++)
    printf("%s%s", i ? "," : " ", sync_name(c->sync[i]));
  printf("; checkpoint");
  for (int i = 0; i < c->nckpt; i++)
    printf("%s%s", i ? "," : " ", ckpt_name(c->ckpt[i]));
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
  memset(&b, 0, sizeof b);
  config *c = &b.cfg;
  parse_args(argc, argv, c);
  int64_t t_begin = now_ns();

  if (c->pin) {
    cpu_set_t set;
    if (parse_cpus(c->pin, &set) != 0)
      die_usage("--pin takes a CPU list such as 0-1 or 0,2: %s", c->pin);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
      perror("writer: sched_setaffinity");
      return 2;
    }
  }

  char tmpdir[] = "/tmp/lith-bench-XXXXXX";
  int own_dir = 0;
  if (!c->db_dir) {
    if (!mkdtemp(tmpdir)) {
      perror("writer: mkdtemp");
      return 1;
    }
    c->db_dir = tmpdir;
    own_dir = 1;
  } else if (mkdir_p(c->db_dir) != 0) {
    perror("writer: --db-dir");
    return 1;
  }

  char csv_path[4096];
  if (c->csv) {
    snprintf(csv_path, sizeof csv_path, "%s", c->csv);
  } else {
    time_t now = time(NULL);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", localtime(&now));
    mkdir_p("bench/results");
    snprintf(csv_path, sizeof csv_path, "bench/results/writer-%s.csv", stamp);
  }
  b.csv = fopen(csv_path, "w");
  if (!b.csv)
    fprintf(stderr, "writer: cannot write %s: %s\n", csv_path, strerror(errno));
  else
    csv_header(b.csv);

  print_header(c, argc, argv, b.csv ? csv_path : NULL);

  size_t nres = (size_t)NARMS * (size_t)c->nsync * (size_t)c->nproducers * (size_t)c->nckpt * (size_t)c->rounds;
  b.res = calloc(nres, sizeof *b.res);
  if (!b.res) {
    fprintf(stderr, "writer: out of memory\n");
    return 1;
  }

  /* Round r runs every arm of every cell before round r+1. */
  for (int r = 0; r < c->rounds; r++)
    for (int si = 0; si < c->nsync; si++)
      for (int pi = 0; pi < c->nproducers; pi++) {
        for (int ci = 0; ci < c->nckpt; ci++)
          for (int arm = ARM_WRITER; arm <= ARM_CEILING; arm++)
            if (c->arms[arm])
              run_one(&b, arm, si, pi, ci, r);
        for (int arm = ARM_PERCONN; arm <= ARM_MUTEX; arm++)
          if (c->arms[arm])
            run_one(&b, arm, si, pi, 0, r);
      }

  print_tables(&b);
  print_writer_cycle(&b);
  print_targets(&b);
  csv_summaries(&b);
  if (b.csv && fclose(b.csv) != 0)
    fprintf(stderr, "writer: writing %s failed\n", csv_path);
  if (own_dir)
    rmdir(c->db_dir);

  printf("\nerrors, all arms: %lld%s\n", (long long)b.total_errors, b.total_errors ? " (FAILED)" : "");
  printf("elapsed: %.1f s\n", (double)(now_ns() - t_begin) / 1e9);
  free(b.res);
  return b.total_errors ? 1 : 0;
}
