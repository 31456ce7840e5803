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
 *   noop     the writer arm's handle and threads, but each lith_do runs an
 *            empty command (returns LITH_OK, touches nothing): what waking P
 *            threads costs. Its transactions write nothing, so they are
 *            short and its batches small: a reference for the wake-ups, not
 *            a floor. The check after it: the database is as seeded (no
 *            ledger row, no topic bumped).
 *   async    the writer arm's handle, no producer threads: P lith_requests
 *            owned by the bench kept in flight with lith_submit. Each `done`
 *            callback (on the writer thread) records the latency since its
 *            submit and resubmits the same request with a new transfer,
 *            until the window ends; the arm then waits for every request in
 *            flight before lith_close. Request i counts as producer i (its
 *            accounts, its topic, its check). What an event-loop server gets.
 *            As `done` runs on the writer before it takes the next batch,
 *            every batch holds the P requests resubmitted meanwhile.
 *   ceiling100  the ceiling in transactions of a fixed 100 commands: a
 *            reference that does not move with the writer's batch size.
 *   perconn  P threads, each with its own connection (busy_timeout 30 s),
 *            one BEGIN IMMEDIATE ... COMMIT per command: what most apps do.
 *   mutex    one connection shared by P threads behind a pthread mutex; a
 *            command is lock, BEGIN IMMEDIATE, transfer, COMMIT, unlock.
 *
 * ceiling100, perconn and mutex do not depend on the checkpoint mode: they
 * run once per (synchronous, P) with SQLite's autocheckpoint. The baselines'
 * connections get the pragmas lith gives its writer (synchronous, cache_size
 * and mmap_size from lith_options_default, foreign_keys, temp_store=MEMORY,
 * WAL) and SQLite's default autocheckpoint of 1000 pages (lith's
 * checkpoint_pages default).
 *
 * Timing. Threads start, wait at a gate (perconn threads open their
 * connection first), then run for --warmup seconds before a measured window
 * of --seconds (async and the ceilings: the window starts --warmup seconds
 * after their first command). A call or transaction counts when it completes
 * inside the window. Rounds interleave (bench/harness.h runs the loop):
 * round r runs every arm of every cell before round r+1, the arms innermost
 * in the order above, so drift of the machine hits every arm alike and the
 * ceiling finds the writer's batch of its cell and round. Reported: median
 * over rounds, and the range min-max (commands/s in the table); every run
 * is a line of the results file (bench/results.md: rate = cmds_per_s, p50
 * and p99 = the call's, the rest under m).
 *
 * Transaction time is BEGIN IMMEDIATE to the end of COMMIT. For the writer
 * (and noop, async) it comes from lith's own histograms
 * (lith_lat_quantile_ns over the difference of two lith_stats snapshots
 * taken at the window's edges: a bucket's upper bound, at most 1/8 above the
 * true value); the ceilings and mutex time each transaction themselves.
 * perconn times from the return of its BEGIN IMMEDIATE, i.e. while it holds
 * the write lock: the wait for the lock (busy handler sleeps) is in its call
 * latency, not in its transaction time.
 * Call latency (lith_do; for async lith_submit to the start of its `done`;
 * or one command of perconn/mutex) is recorded by each producer (async: each
 * request) into its own preallocated buffer and merged after the run; the
 * percentiles are exact (sorted), the max always exact.
 *
 * Memory stays bounded: each buffer holds at most
 * clamp(2M / threads, 4096, seconds * 500k) values (bench_lat_cap). A thread that
 * completes more keeps a uniform reservoir sample, and the merge weights
 * each sample by (calls seen / samples kept), so percentiles stay unbiased;
 * the results line says when that happened ("sampled").
 *
 * The table's ÷ columns divide the writer's median cmd/s by each other arm's
 * (÷noop: over the wake-up reference) and async's by the ceilings', perconn's
 * and mutex's (async ÷ ceiling100: what an event loop keeps of SQLite's own
 * speed at a fixed batch of 100).
 *
 * A second table splits the writer's time over the window: inside
 * transactions, in checkpoints, and the rest (taking the queue, answering the
 * producers, being preempted or idle), with lith's queue-wait p99 — where the
 * writer loses to the ceiling. The results file has these too.
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

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "common.h"
#include "harness.h"
#include "lith.h"
#include "transfer.h"
#include "transfer_lith.h"

/* ---- the workload (bench/transfer_lith.h: the transfer as a lith command) ---- */

/* The noop arm's command: nothing to do, so its cost is lith's alone. */
static int noop_cmd(lith_tx *tx, void *arg) {
  (void)tx;
  (void)arg;
  return LITH_OK;
}

/* ---- configuration ------------------------------------------------------------ */

/* The arms up to ARM_ASYNC run once per checkpoint mode (they use lith's, or
 * follow the writer's batch); the rest once per (synchronous, P): they ignore
 * the checkpoint dimension. Within a cell they run in this order: the
 * ceiling needs the writer's mean batch. */
enum { ARM_WRITER, ARM_CEILING, ARM_NOOP, ARM_ASYNC, ARM_CEIL100, ARM_PERCONN, ARM_MUTEX, NARMS };
static const char *const ARM_NAME[NARMS] = {"writer",     "ceiling", "noop", "async",
                                            "ceiling100", "perconn", "mutex"};
#define ARM_LIST "writer,ceiling,noop,async,ceiling100,perconn,mutex"

enum { CEIL_FIXED_BATCH = 100 }; /* ceiling100's transaction size */

static int per_ckpt(int arm) { return arm <= ARM_ASYNC; }
static int on_lith(int arm) { return arm == ARM_WRITER || arm == ARM_NOOP || arm == ARM_ASYNC; }

enum { MAX_LIST = 16 };

typedef struct config {
  bench_cli cli; /* --seconds, --warmup, --rounds, --db-dir, --results, --quick */
  int producers[MAX_LIST], nproducers;
  int sync[2], nsync; /* LITH_SYNC_* */
  int ckpt[2], nckpt; /* LITH_CHECKPOINT_* */
  int arms[NARMS];    /* enabled */
  const char *pin;
} config;

static const char *sync_name(int s) { return s == LITH_SYNC_FULL ? "FULL" : "NORMAL"; }
static const char *ckpt_name(int c) {
  return c == LITH_CHECKPOINT_AUTO ? "AUTO" : c == LITH_CHECKPOINT_EXTERNAL ? "NONE" : "WRITER";
}

/* ---- metrics and results ------------------------------------------------------- */

enum {
  M_CMDS_S,  /* commands answered OK per second of the window */
  M_CMDS_TX, /* commands per transaction */
  M_TX_MS,   /* mean transaction time */
  M_TX_P99,
  M_TX_P999,
  M_CALL_P50, /* lith_do / per-command call latency */
  M_CALL_P99,
  M_CALL_MAX,
  M_TX_BUSY,     /* writer: share of the window inside BEGIN..COMMIT */
  M_CKPT_BUSY,   /* writer: share of the window in checkpoints, on any thread */
  M_CKPT_WRITER, /* writer: share of the window in checkpoints on the writer thread */
  M_WAIT_P99,    /* writer: queue wait before the batch began, p99 (lith's histogram) */
  M_COMMANDS,    /* commands answered OK inside the window */
  M_TXS,         /* transactions inside the window */
  M_BATCH,       /* the ceilings: the transaction size they used */
  M_COMMIT_MS,   /* the lith arms: mean COMMIT statement time */
  M_CKPTS,       /* the lith arms: checkpoints inside the window */
  NMETRIC
};
static const bench_metric METRICS[NMETRIC] = {
    {"cmds_per_s", BENCH_ROLE_RATE},
    {"cmds_per_tx", BENCH_ROLE_NONE},
    {"tx_ms_mean", BENCH_ROLE_NONE},
    {"tx_p99_ms", BENCH_ROLE_NONE},
    {"tx_p999_ms", BENCH_ROLE_NONE},
    {"call_p50_ms", BENCH_ROLE_P50},
    {"call_p99_ms", BENCH_ROLE_P99},
    {"call_max_ms", BENCH_ROLE_NONE},
    {"writer_tx_share", BENCH_ROLE_NONE},
    {"writer_ckpt_share", BENCH_ROLE_NONE},
    {"writer_ckpt_writer_share", BENCH_ROLE_NONE},
    {"writer_wait_p99_ms", BENCH_ROLE_NONE},
    {"commands", BENCH_ROLE_NONE},
    {"transactions", BENCH_ROLE_NONE},
    {"ceiling_batch", BENCH_ROLE_NONE},
    {"commit_ms_mean", BENCH_ROLE_NONE},
    {"checkpoints", BENCH_ROLE_NONE},
};

/* The cell's dimensions; ceiling100, perconn and mutex ignore the checkpoint. */
enum { D_SYNC, D_PRODUCERS, D_CKPT, NDIM };
static unsigned ignores(int arm) { return per_ckpt(arm) ? 0 : 1u << D_CKPT; }

/* ---- one arm run ------------------------------------------------------------------ */

typedef struct run run;

typedef struct producer {
  run *r;
  int id;
  pthread_t th;
  int started;
  uint64_t rng;
  int64_t seq;
  bench_calls n; /* calls answered, failed, in the window, their latency */
  bench_lat tx;
  sqlite3 *conn;    /* perconn */
  bench_stmts st;   /* perconn */
  lith_request req; /* async: this slot's request, resubmitted from its done */
  bench_transfer t; /* async: the request's argument */
  int64_t t0;       /* async: when the request was submitted */
} producer;

struct run {
  const config *cfg;
  int arm, sync, ckpt, P, round, batch;
  char path[4096];
  bench_gate gate;    /* the start gate and the window */
  pthread_mutex_t mu; /* async: inflight */
  pthread_cond_t cv;
  /* the arm's shared handles */
  lith *db;
  sqlite3 *shared;
  bench_stmts shared_st;
  pthread_mutex_t conn_mu;
  producer *prod;
  int inflight;     /* async: requests submitted and not yet done (under mu) */
  bench_cell *cell; /* the harness's run: its m[], errors, sampled */
  uint64_t topics_reported;
};

#define report_error(r, ...) bench_cell_error((r)->cell, __VA_ARGS__)

static int open_plain(const char *path, int sync, int busy_ms, sqlite3 **out) {
  bench_pragmas p = bench_lith_pragmas(sync);
  return bench_open_plain(path, &p, busy_ms, out);
}

/* A fresh database for P producers (bench_transfer_create). */
static int create_db(const char *path, int P) {
  bench_pragmas p = bench_lith_pragmas(LITH_SYNC_NORMAL);
  return bench_transfer_create(path, P, &p);
}

static void say_error(void *ctx, const char *msg) { report_error((run *)ctx, "%s", msg); }

/* Check the database after an arm; returns the number of mismatches. `ok` has
 * P entries: commands answered OK per producer. */
static int64_t verify_db(run *r, const int64_t *ok) {
  bench_pragmas p = bench_lith_pragmas(LITH_SYNC_NORMAL);
  return bench_transfer_check(r->path, r->P, ok, &p, "producer", say_error, r);
}

/* ---- producer threads ------------------------------------------------------------- */

/* The writer and noop arms' threads: the same loop, only the command differs. */
static void *writer_producer(void *arg) {
  producer *pr = arg;
  run *r = pr->r;
  lith_command fn = r->arm == ARM_NOOP ? noop_cmd : bench_transfer_cmd;
  int64_t ws, we;
  bench_gate_wait(&r->gate, &ws, &we);
  for (;;) {
    bench_transfer t = bench_transfer_make(pr->id, ++pr->seq, &pr->rng);
    if (bench_now_ns() >= we)
      break;
    int rc = bench_lith_do(r->db, fn, &t, ws, we, &pr->n);
    if (rc != LITH_OK)
      report_error(r, "lith_do: %s: %s", lith_errstr(rc), lith_errmsg(r->db));
  }
  return NULL;
}

static void note_tx_failure(run *r, producer *pr, sqlite3 *conn, int rc) {
  pr->n.errors++;
  if (rc == BENCH_REFUSED)
    report_error(r, "transfer refused: insufficient funds");
  else
    report_error(r, "transaction: %s (%d)", sqlite3_errmsg(conn), rc);
}

static void *perconn_producer(void *arg) {
  producer *pr = arg;
  run *r = pr->r;
  int64_t ws, we;
  int ready = open_plain(r->path, r->sync, 30000, &pr->conn) == SQLITE_OK &&
              bench_stmts_prepare(pr->conn, &pr->st) == SQLITE_OK;
  if (!ready) {
    pr->n.errors++;
    report_error(r, "producer %d: cannot open its connection", pr->id);
  }
  bench_gate_wait(&r->gate, &ws, &we);
  while (ready) {
    bench_transfer t = bench_transfer_make(pr->id, ++pr->seq, &pr->rng);
    int64_t t0 = bench_now_ns(), tl;
    if (t0 >= we)
      break;
    int rc = bench_transfer_tx(pr->conn, &pr->st, &t, 1, &tl);
    int64_t t1 = bench_now_ns();
    if (rc == SQLITE_OK) {
      pr->n.ok++;
      if (t1 >= ws && t1 < we) {
        pr->n.win_ok++;
        bench_lat_add(&pr->n.lat, (uint64_t)(t1 - t0));
        bench_lat_add(&pr->tx, (uint64_t)(t1 - tl));
      }
    } else {
      note_tx_failure(r, pr, pr->conn, rc);
    }
  }
  bench_stmts_finalize(&pr->st);
  if (pr->conn)
    sqlite3_close(pr->conn);
  pr->conn = NULL;
  return NULL;
}

static void *mutex_producer(void *arg) {
  producer *pr = arg;
  run *r = pr->r;
  int64_t ws, we;
  bench_gate_wait(&r->gate, &ws, &we);
  for (;;) {
    bench_transfer t = bench_transfer_make(pr->id, ++pr->seq, &pr->rng);
    int64_t t0 = bench_now_ns(), tl;
    if (t0 >= we)
      break;
    pthread_mutex_lock(&r->conn_mu);
    int64_t tb = bench_now_ns();
    int rc = bench_transfer_tx(r->shared, &r->shared_st, &t, 1, &tl);
    int64_t te = bench_now_ns();
    if (rc != SQLITE_OK)
      note_tx_failure(r, pr, r->shared, rc);
    pthread_mutex_unlock(&r->conn_mu);
    int64_t t1 = bench_now_ns();
    if (rc == SQLITE_OK) {
      pr->n.ok++;
      if (t1 >= ws && t1 < we) {
        pr->n.win_ok++;
        bench_lat_add(&pr->n.lat, (uint64_t)(t1 - t0));
        bench_lat_add(&pr->tx, (uint64_t)(te - tb));
      }
    }
  }
  return NULL;
}

/* ---- async requests (on the writer thread once submitted) -------------------------- */

static void async_done(lith_request *req);

/* Submit slot pr's request with a new transfer; LITH_OK or the error (then
 * its done will not run). */
static int async_submit(producer *pr) {
  run *r = pr->r;
  pr->t = bench_transfer_make(pr->id, ++pr->seq, &pr->rng);
  pr->req.fn = bench_transfer_cmd;
  pr->req.arg = &pr->t;
  pr->req.done = async_done;
  pr->req.data = pr;
  pr->t0 = bench_now_ns();
  int rc = lith_submit(r->db, &pr->req);
  if (rc != LITH_OK) {
    pr->n.errors++;
    report_error(r, "lith_submit: %s: %s", lith_errstr(rc), lith_errmsg(r->db));
  }
  return rc;
}

/* A slot leaves the loop: one request fewer in flight. */
static void async_finished(run *r) {
  pthread_mutex_lock(&r->mu);
  if (--r->inflight == 0)
    pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
}

/* Runs on the writer thread after the request's batch committed: record it,
 * and resubmit it until the window has ended. */
static void async_done(lith_request *req) {
  producer *pr = req->data;
  run *r = pr->r;
  int64_t t1 = bench_now_ns();
  if (req->rc == LITH_OK) {
    pr->n.ok++;
    if (t1 >= r->gate.ws && t1 < r->gate.we) {
      pr->n.win_ok++;
      bench_lat_add(&pr->n.lat, (uint64_t)(t1 - pr->t0));
    }
  } else {
    pr->n.errors++;
    report_error(r, "request: %s: %s", lith_errstr(req->rc), req->errmsg);
  }
  if (t1 < r->gate.we && async_submit(pr) == LITH_OK)
    return;
  async_finished(r);
}

static void on_commit(void *ctx, const int64_t *topics, int n) {
  run *r = ctx;
  (void)topics;
  r->topics_reported += (uint64_t)n; /* writer thread only */
}

/* ---- the arms ---------------------------------------------------------------------- */

static void fill_call(bench_cell *res, producer *prod, int P) {
  bench_lat **bufs = malloc((size_t)P * sizeof *bufs);
  if (!bufs)
    return;
  for (int i = 0; i < P; i++)
    bufs[i] = &prod[i].n.lat;
  bench_cell_latency(res, bufs, P, M_CALL_P50, M_CALL_P99, -1);
  res->m[M_CALL_MAX] = bench_lat_max_ms(bufs, P);
  free(bufs);
}

static void fill_tx(bench_cell *res, bench_lat *const *bufs, int nb) {
  static const double QS[3] = {0.50, 0.99, 0.999};
  bench_lat_sum s;
  if (bench_lat_merge(bufs, nb, QS, 3, &s) != 0)
    fprintf(stderr, "writer: out of memory merging latencies\n");
  res->m[M_TXS] = (double)s.count;
  res->m[M_TX_MS] = s.count ? (double)s.sum / (double)s.count / 1e6 : NAN;
  res->m[M_TX_P99] = s.q[1] / 1e6;
  res->m[M_TX_P999] = s.q[2] / 1e6;
  res->sampled |= s.sampled;
}

/* P producers (async: P request slots), each with its latency buffers. */
static void producers_init(run *r) {
  int P = r->P;
  size_t cap = bench_lat_cap(P, r->cfg->cli.seconds);
  r->prod = bench_xcalloc((size_t)P, sizeof *r->prod);
  for (int i = 0; i < P; i++) {
    producer *pr = &r->prod[i];
    pr->r = r;
    pr->id = i;
    pr->rng = bench_rng_seed((uint64_t)i, (uint64_t)r->round * 1000 + (uint64_t)r->arm);
    if (bench_lat_init(&pr->n.lat, cap, cap, pr->rng ^ 1) ||
        (!on_lith(r->arm) && bench_lat_init(&pr->tx, cap, cap, pr->rng ^ 2))) {
      fprintf(stderr, "writer: out of memory for latency buffers\n");
      exit(1);
    }
  }
}

/* lith's counters at the window's edges, and when they were taken. */
typedef struct snaps {
  lith_stats s0, s1;
  int64_t at0, at1;
} snaps;

static void snap_window(run *r, snaps *sn) {
  bench_sleep_until(r->gate.ws);
  lith_stats_get(r->db, &sn->s0);
  sn->at0 = bench_now_ns();
  bench_sleep_until(r->gate.we);
  lith_stats_get(r->db, &sn->s1);
  sn->at1 = bench_now_ns();
}

/* Once every producer has stopped (async: every request is done): the
 * results, lith_close or the shared connection's close, the check. `sn`:
 * the lith arms' snapshots. */
static void producers_finish(run *r, bench_cell *res, const snaps *sn) {
  int P = r->P;
  int64_t *ok = bench_xcalloc((size_t)P, sizeof *ok);
  double window_s = (double)(r->gate.we - r->gate.ws) / 1e9;
  uint64_t commands = 0;
  for (int i = 0; i < P; i++) {
    producer *pr = &r->prod[i];
    /* noop writes nothing: the check then wants the database as seeded */
    ok[i] = r->arm == ARM_NOOP ? 0 : pr->n.ok;
    res->errors += pr->n.errors;
    commands += (uint64_t)pr->n.win_ok;
  }
  res->m[M_COMMANDS] = (double)commands;
  res->m[M_CMDS_S] = (double)commands / window_s;
  fill_call(res, r->prod, P);

  if (on_lith(r->arm)) {
    const lith_stats *s0 = &sn->s0, *s1 = &sn->s1;
    uint64_t cmds = s1->commands - s0->commands, batches = s1->batches - s0->batches;
    res->m[M_TXS] = (double)batches;
    res->m[M_CMDS_TX] = batches ? (double)cmds / (double)batches : NAN;
    res->m[M_TX_MS] = batches ? (double)(s1->tx_ns_total - s0->tx_ns_total) / (double)batches / 1e6 : NAN;
    res->m[M_TX_P99] = batches ? (double)lith_lat_quantile_ns(s1->tx_lat, s0->tx_lat, 0.99) / 1e6 : NAN;
    res->m[M_TX_P999] = batches ? (double)lith_lat_quantile_ns(s1->tx_lat, s0->tx_lat, 0.999) / 1e6 : NAN;
    res->m[M_COMMIT_MS] =
        batches ? (double)(s1->commit_ns_total - s0->commit_ns_total) / (double)batches / 1e6 : NAN;
    res->m[M_CKPTS] = (double)(s1->checkpoints - s0->checkpoints);
    double window_ns = (double)(sn->at1 - sn->at0); /* the snapshots' own interval */
    res->m[M_TX_BUSY] = (double)(s1->tx_ns_total - s0->tx_ns_total) / window_ns;
    res->m[M_CKPT_BUSY] = (double)(s1->checkpoint_ns_total - s0->checkpoint_ns_total) / window_ns;
    res->m[M_CKPT_WRITER] = (double)(s1->checkpoint_ns_writer - s0->checkpoint_ns_writer) / window_ns;
    res->m[M_WAIT_P99] = cmds ? (double)lith_lat_quantile_ns(s1->wait_lat, s0->wait_lat, 0.99) / 1e6 : NAN;
    int rc = lith_close(r->db);
    r->db = NULL;
    if (rc != LITH_OK) {
      report_error(r, "lith_close: %s: %s", lith_errstr(rc), lith_errmsg(NULL));
      res->errors++;
    }
  } else {
    bench_lat **bufs = malloc((size_t)P * sizeof *bufs);
    if (bufs) {
      for (int i = 0; i < P; i++)
        bufs[i] = &r->prod[i].tx;
      fill_tx(res, bufs, P);
      free(bufs);
    }
    res->m[M_CMDS_TX] = res->m[M_TXS] > 0 ? (double)commands / res->m[M_TXS] : NAN;
  }
  if (r->arm == ARM_MUTEX) {
    bench_stmts_finalize(&r->shared_st);
    if (sqlite3_close(r->shared) != SQLITE_OK) {
      report_error(r, "close: %s", sqlite3_errmsg(r->shared));
      res->errors++;
    }
    r->shared = NULL;
  }
  res->errors += verify_db(r, ok);
  for (int i = 0; i < P; i++) {
    bench_lat_free(&r->prod[i].n.lat);
    bench_lat_free(&r->prod[i].tx);
  }
  free(r->prod);
  r->prod = NULL;
  free(ok);
}

/* Threads of the writer, noop, perconn and mutex arms: start, window, join, check. */
static void run_threads(run *r, bench_cell *res, void *(*fn)(void *)) {
  int P = r->P;
  producers_init(r);
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
  bench_gate_open(&r->gate, started, r->cfg->cli.warmup, r->cfg->cli.seconds);

  snaps sn;
  memset(&sn, 0, sizeof sn);
  if (on_lith(r->arm))
    snap_window(r, &sn);
  for (int i = 0; i < P; i++)
    if (r->prod[i].started)
      pthread_join(r->prod[i].th, NULL);
  producers_finish(r, res, &sn);
}

/* The lith handle of the writer, noop and async arms: the cell's options,
 * readers 1, an on_commit hook that counts topics. 0, or -1 (an error). */
static int open_lith(run *r, bench_cell *res) {
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
    return -1;
  }
  return 0;
}

/* writer and noop: P threads calling lith_do. */
static void arm_writer(run *r, bench_cell *res) {
  if (open_lith(r, res) == 0)
    run_threads(r, res, writer_producer);
}

/* P requests in flight, each resubmitted from its done until the window
 * ends; then wait until the last one is done. */
static void arm_async(run *r, bench_cell *res) {
  if (open_lith(r, res) != 0)
    return;
  producers_init(r);
  r->gate.ws = bench_now_ns() + (int64_t)(r->cfg->cli.warmup * 1e9);
  r->gate.we = r->gate.ws + (int64_t)(r->cfg->cli.seconds * 1e9);
  pthread_mutex_lock(&r->mu);
  r->inflight = r->P;
  pthread_mutex_unlock(&r->mu);
  for (int i = 0; i < r->P; i++)
    if (async_submit(&r->prod[i]) != LITH_OK)
      async_finished(r);

  snaps sn;
  snap_window(r, &sn);
  pthread_mutex_lock(&r->mu);
  while (r->inflight > 0)
    pthread_cond_wait(&r->cv, &r->mu);
  pthread_mutex_unlock(&r->mu);
  producers_finish(r, res, &sn);
}

static void arm_perconn(run *r, bench_cell *res) { run_threads(r, res, perconn_producer); }

static void arm_mutex(run *r, bench_cell *res) {
  if (open_plain(r->path, r->sync, 30000, &r->shared) != SQLITE_OK ||
      bench_stmts_prepare(r->shared, &r->shared_st) != SQLITE_OK) {
    report_error(r, "cannot open the shared connection");
    res->errors++;
    bench_stmts_finalize(&r->shared_st);
    sqlite3_close(r->shared);
    r->shared = NULL;
    return;
  }
  run_threads(r, res, mutex_producer);
}

/* One thread, transactions of r->batch commands, commands cycling through the
 * P producers' accounts. */
static void arm_ceiling(run *r, bench_cell *res) {
  const config *cfg = r->cfg;
  int P = r->P, k = r->batch;
  sqlite3 *conn;
  bench_stmts st;
  if (open_plain(r->path, r->sync, 5000, &conn) != SQLITE_OK) {
    res->errors++;
    return;
  }
  if (bench_stmts_prepare(conn, &st) != SQLITE_OK) {
    report_error(r, "prepare: %s", sqlite3_errmsg(conn));
    res->errors++;
    bench_stmts_finalize(&st);
    sqlite3_close(conn);
    return;
  }
  int64_t *ok = bench_xcalloc((size_t)P, sizeof *ok), *seq = bench_xcalloc((size_t)P, sizeof *seq);
  int64_t *tx_ok = bench_xcalloc((size_t)k, sizeof *tx_ok); /* producers of this transaction's OK commands */
  bench_lat txb;
  size_t cap = bench_lat_cap(1, cfg->cli.seconds);
  if (bench_lat_init(&txb, cap, cap, 99)) {
    fprintf(stderr, "writer: out of memory\n");
    exit(1);
  }
  uint64_t rng = bench_rng_seed((uint64_t)r->round, 4242), commands = 0;
  int next = 0;
  r->gate.ws = bench_now_ns() + (int64_t)(cfg->cli.warmup * 1e9);
  r->gate.we = r->gate.ws + (int64_t)(cfg->cli.seconds * 1e9);
  for (;;) {
    int64_t t0 = bench_now_ns();
    if (t0 >= r->gate.we)
      break;
    int rc = bench_step(st.begin), nok = 0;
    for (int i = 0; rc == SQLITE_OK && i < k; i++) {
      int p = next;
      next = (next + 1) % P;
      bench_transfer t = bench_transfer_make(p, ++seq[p], &rng);
      if ((rc = bench_step(st.sp)) != SQLITE_OK)
        break;
      int trc = bench_transfer_sql(&st, &t, 1);
      if (trc == SQLITE_OK) {
        rc = bench_step(st.sp_release);
        if (rc == SQLITE_OK)
          tx_ok[nok++] = p;
      } else {
        res->errors++;
        if (trc == BENCH_REFUSED)
          report_error(r, "transfer refused: insufficient funds");
        else
          report_error(r, "transfer: %s", sqlite3_errmsg(conn));
        if (sqlite3_get_autocommit(conn)) {
          rc = trc;
          break;
        }
        if ((rc = bench_step(st.sp_rollback)) == SQLITE_OK)
          rc = bench_step(st.sp_release);
      }
    }
    if (rc == SQLITE_OK)
      rc = bench_step(st.commit);
    int64_t t1 = bench_now_ns();
    if (rc != SQLITE_OK) {
      report_error(r, "transaction: %s", sqlite3_errmsg(conn));
      res->errors++;
      if (!sqlite3_get_autocommit(conn))
        bench_step(st.rollback);
      continue;
    }
    for (int i = 0; i < nok; i++)
      ok[tx_ok[i]]++;
    if (t1 >= r->gate.ws && t1 < r->gate.we) {
      commands += (uint64_t)nok;
      bench_lat_add(&txb, (uint64_t)(t1 - t0));
    }
  }
  bench_stmts_finalize(&st);
  if (sqlite3_close(conn) != SQLITE_OK) {
    report_error(r, "close failed");
    res->errors++;
  }
  bench_lat *bufs[1] = {&txb};
  fill_tx(res, bufs, 1);
  res->m[M_COMMANDS] = (double)commands;
  res->m[M_CMDS_S] = (double)commands / cfg->cli.seconds;
  res->m[M_CMDS_TX] = res->m[M_TXS] > 0 ? (double)commands / res->m[M_TXS] : NAN;
  res->m[M_BATCH] = k;
  res->errors += verify_db(r, ok);
  bench_lat_free(&txb);
  free(ok);
  free(seq);
  free(tx_ok);
}

/* ---- one cell: the harness's callback ------------------------------------------------ */

static void run_cell(bench_cell *cell) {
  const config *c = cell->ctx;
  int arm = cell->arm;
  run r = {.cfg = c,
           .arm = arm,
           .sync = cell->val[D_SYNC],
           .ckpt = cell->val[D_CKPT],
           .P = cell->val[D_PRODUCERS],
           .round = cell->round,
           .cell = cell};
  bench_gate_init(&r.gate);
  pthread_mutex_init(&r.mu, NULL);
  pthread_cond_init(&r.cv, NULL);
  pthread_mutex_init(&r.conn_mu, NULL);
  /* an arm that ignores the checkpoint runs with SQLite's autocheckpoint */
  snprintf(r.path, sizeof r.path, "%s/%s-%s-p%d-%s-r%d.db", c->cli.db_dir, ARM_NAME[arm], sync_name(r.sync),
           r.P, per_ckpt(arm) ? ckpt_name(r.ckpt) : "sqlite", r.round + 1);
  if (arm == ARM_CEILING) {
    /* the writer ran first in this cell and round (arms run innermost, in order) */
    double mean = bench_harness_value(cell->h, ARM_WRITER, cell->idx, cell->round, M_CMDS_TX);
    r.batch = (int)lround(isnan(mean) ? (double)r.P : mean);
    if (r.batch < 1)
      r.batch = 1;
  } else if (arm == ARM_CEIL100) {
    r.batch = CEIL_FIXED_BATCH;
  }
  if (create_db(r.path, r.P) != 0) {
    cell->errors++;
  } else {
    switch (arm) {
    case ARM_WRITER:
    case ARM_NOOP: arm_writer(&r, cell); break;
    case ARM_ASYNC: arm_async(&r, cell); break;
    case ARM_CEILING:
    case ARM_CEIL100: arm_ceiling(&r, cell); break;
    case ARM_PERCONN: arm_perconn(&r, cell); break;
    default: arm_mutex(&r, cell); break;
    }
  }
  bench_remove_db(r.path);
  bench_gate_destroy(&r.gate);
  pthread_mutex_destroy(&r.mu);
  pthread_cond_destroy(&r.cv);
  pthread_mutex_destroy(&r.conn_mu);
}

/* ---- the tables ------------------------------------------------------------------------ */

/* The tables read the harness's medians over rounds at a cell's indexes
 * (idx[D_SYNC], idx[D_PRODUCERS], idx[D_CKPT]); an arm that ignores the
 * checkpoint is read at its one run of that (sync, P). */

static void fmt_ms(char *buf, size_t n, double ms) { bench_fmt_ms(buf, n, ms, 1); }

static void table_row(const bench_harness *h, const config *c, int arm, const int *idx) {
  /* the ÷ columns; noop's is the writer's alone (async has no threads to wake) */
  static const int BASE[5] = {ARM_CEILING, ARM_CEIL100, ARM_NOOP, ARM_PERCONN, ARM_MUTEX};
  char ms[8][32], rt[5][32];
  bench_agg cs = bench_harness_agg(h, arm, idx, M_CMDS_S);
  for (int m = M_TX_MS; m <= M_CALL_MAX; m++)
    fmt_ms(ms[m], sizeof ms[m], bench_harness_agg(h, arm, idx, m).med);
  bench_agg tx = bench_harness_agg(h, arm, idx, M_CMDS_TX);
  for (int k = 0; k < 5; k++) {
    snprintf(rt[k], sizeof rt[k], " ");
    if (arm == ARM_WRITER || (arm == ARM_ASYNC && BASE[k] != ARM_NOOP))
      bench_fmt(rt[k], sizeof rt[k], "%.2f×", bench_harness_ratio(h, arm, BASE[k], idx, M_CMDS_S));
  }
  const char *ck = per_ckpt(arm) ? ckpt_name(c->ckpt[idx[D_CKPT]]) : "(sqlite)";
  char txs[32];
  bench_fmt(txs, sizeof txs, "%.1f", tx.med);
  printf("| %d | %s | %s | %.0f (%.0f–%.0f) | %s | %s | %s | %s | %s | %s | %s | %lld | %s | %s | %s | %s | "
         "%s |\n",
         c->producers[idx[D_PRODUCERS]], ck, ARM_NAME[arm], cs.med, cs.lo, cs.hi, txs, ms[M_TX_MS],
         ms[M_TX_P99], ms[M_TX_P999], ms[M_CALL_P50], ms[M_CALL_P99], ms[M_CALL_MAX],
         (long long)bench_harness_errors(h, arm, idx), rt[0], rt[1], rt[2], rt[3], rt[4]);
}

static void print_tables(const bench_harness *h, const config *c) {
  for (int si = 0; si < c->nsync; si++) {
    printf("\n### synchronous=%s\n\n", sync_name(c->sync[si]));
    printf("| P | ckpt | arm | cmd/s median (min–max) | cmd/tx | tx ms | tx p99 | tx p99.9 | call p50 | call "
           "p99 "
           "| call max | err | ÷ceil | ÷ceil100 | ÷noop | ÷conn | ÷mutex |\n");
    printf("|--:|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for (int pi = 0; pi < c->nproducers; pi++) {
      for (int ci = 0; ci < c->nckpt; ci++) {
        int idx[NDIM] = {si, pi, ci};
        for (int arm = 0; arm < NARMS; arm++)
          if (per_ckpt(arm) && bench_harness_ran(h, arm, idx))
            table_row(h, c, arm, idx);
      }
      int idx[NDIM] = {si, pi, 0};
      for (int arm = 0; arm < NARMS; arm++)
        if (!per_ckpt(arm) && bench_harness_ran(h, arm, idx))
          table_row(h, c, arm, idx);
    }
  }
  printf(
      "\nColumns: median over rounds (cmd/s also min–max). Times in ms. tx = BEGIN IMMEDIATE to end of "
      "COMMIT\n"
      "(writer, noop, async: lith's histogram, bucket upper bound; perconn: from lock acquired). call = one\n"
      "lith_do, one async request from lith_submit to its done, or one command including its wait for the "
      "lock\n"
      "(the ceilings have no callers). cmd/tx of ceiling: the batch size it ran (the writer's mean in that "
      "cell\n"
      "and round); ceiling100 runs batches of 100. noop: the writer's threads running an empty command.\n"
      "÷: the writer's (and async's) median cmd/s over the baseline's.\n");
}

/* Where the writer's time goes: it is one thread, so every part of its cycle
 * that is not the transaction is throughput the ceiling does not lose. */
static void print_writer_cycle(const bench_harness *h, const config *c) {
  if (!c->arms[ARM_WRITER])
    return;
  printf("\n### writer: where its time goes (medians)\n\n");
  printf("| sync | P | ckpt | cmd/tx | in tx | checkpointing (any thread) | checkpoints on the writer "
         "| rest (take, answer, idle) | queue wait p99 ms | lith_do p99 ms |\n");
  printf("|---|--:|---|--:|--:|--:|--:|--:|--:|--:|\n");
  for (int si = 0; si < c->nsync; si++)
    for (int pi = 0; pi < c->nproducers; pi++)
      for (int ci = 0; ci < c->nckpt; ci++) {
        int idx[NDIM] = {si, pi, ci};
        if (!bench_harness_ran(h, ARM_WRITER, idx))
          continue;
        double tx = bench_harness_agg(h, ARM_WRITER, idx, M_TX_BUSY).med;
        double ck = bench_harness_agg(h, ARM_WRITER, idx, M_CKPT_BUSY).med;
        double ckw = bench_harness_agg(h, ARM_WRITER, idx, M_CKPT_WRITER).med;
        char w[32], d[32];
        fmt_ms(w, sizeof w, bench_harness_agg(h, ARM_WRITER, idx, M_WAIT_P99).med);
        fmt_ms(d, sizeof d, bench_harness_agg(h, ARM_WRITER, idx, M_CALL_P99).med);
        printf("| %s | %d | %s | %.1f | %.0f%% | %.1f%% | %.1f%% | %.0f%% | %s | %s |\n",
               sync_name(c->sync[si]), c->producers[pi], ckpt_name(c->ckpt[ci]),
               bench_harness_agg(h, ARM_WRITER, idx, M_CMDS_TX).med, 100 * tx, 100 * ck, 100 * ckw,
               100 * (1 - tx - (c->ckpt[ci] == LITH_CHECKPOINT_AUTO ? 0 : ckw)), w, d);
      }
  printf("\nShares of the measured window. In AUTO mode checkpoints run inside COMMIT: \"in tx\" includes "
         "them.\n"
         "In WRITER mode most checkpointing runs on the checkpointer thread, beside the writer.\n");
}

/* ---- targets ----------------------------------------------------------------------------- */

/* The goals as PASS/MISS lines, from the medians over rounds; bench/controls.csv's
 * writer-* lines judge the same ratios with a band (bench/report.py). */
static void print_targets(const bench_harness *h, const config *c) {
  char d[256];
  int pi200 = bench_find_int(c->producers, c->nproducers, 200);
  int pi1 = bench_find_int(c->producers, c->nproducers, 1);
  int siN = bench_find_int(c->sync, c->nsync, LITH_SYNC_NORMAL);
  int siF = bench_find_int(c->sync, c->nsync, LITH_SYNC_FULL);
  int ciW = bench_find_int(c->ckpt, c->nckpt, LITH_CHECKPOINT_WRITER);
  int ciA = bench_find_int(c->ckpt, c->nckpt, LITH_CHECKPOINT_AUTO);
  printf("\n### targets\n\n");

  struct {
    int si;
    double ceil, conn;
    const char *name;
  } big[2] = {{siN, 0.75, 5, "NORMAL"}, {siF, 0.70, 15, "FULL"}};
  for (int k = 0; k < 2; k++) {
    int si = big[k].si, have = si >= 0 && pi200 >= 0 && ciW >= 0, at[NDIM] = {si, pi200, ciW};
    double rc = have ? bench_harness_ratio(h, ARM_WRITER, ARM_CEILING, at, M_CMDS_S) : NAN;
    double rp = have ? bench_harness_ratio(h, ARM_WRITER, ARM_PERCONN, at, M_CMDS_S) : NAN;
    char what[128];
    snprintf(what, sizeof what, "200 producers %s WRITER: writer ≥ %.2f × ceiling", big[k].name, big[k].ceil);
    snprintf(d, sizeof d, "%.2f×", rc);
    bench_target(what, have && !isnan(rc), rc >= big[k].ceil, d);
    snprintf(what, sizeof what, "200 producers %s WRITER: writer ≥ %.0f × per-connection", big[k].name,
             big[k].conn);
    snprintf(d, sizeof d, "%.2f×", rp);
    bench_target(what, have && !isnan(rp), rp >= big[k].conn, d);
  }
  struct {
    int si;
    double min;
    const char *name;
  } one[2] = {{siN, 0.8, "NORMAL"}, {siF, 0.9, "FULL"}};
  for (int k = 0; k < 2; k++) {
    int have = one[k].si >= 0 && pi1 >= 0 && ciW >= 0, at[NDIM] = {one[k].si, pi1, ciW};
    double rp = have ? bench_harness_ratio(h, ARM_WRITER, ARM_PERCONN, at, M_CMDS_S) : NAN;
    char what[128];
    snprintf(what, sizeof what, "1 producer %s WRITER: writer ≥ %.1f × per-connection", one[k].name,
             one[k].min);
    snprintf(d, sizeof d, "%.2f×", rp);
    bench_target(what, have && !isnan(rp), rp >= one[k].min, d);
  }
  {
    int have = siN >= 0 && pi200 >= 0 && ciW >= 0, at[NDIM] = {siN, pi200, ciW};
    double ra = have ? bench_harness_ratio(h, ARM_ASYNC, ARM_CEIL100, at, M_CMDS_S) : NAN;
    snprintf(d, sizeof d, "%.2f×", ra);
    bench_target("200 in flight NORMAL WRITER: async ≥ 0.95 × ceiling (batch 100)", have && !isnan(ra),
                 ra >= 0.95, d);
  }
  for (int k = 0; k < 2; k++) {
    int si = k == 0 ? siN : siF, atW[NDIM] = {si, pi200, ciW}, atA[NDIM] = {si, pi200, ciA};
    int have = si >= 0 && pi200 >= 0 && ciW >= 0 && ciA >= 0 && bench_harness_ran(h, ARM_WRITER, atW) &&
               bench_harness_ran(h, ARM_WRITER, atA);
    for (int m = M_TX_P99; m <= M_TX_P999; m++) {
      double w = have ? bench_harness_agg(h, ARM_WRITER, atW, m).med : NAN;
      double a = have ? bench_harness_agg(h, ARM_WRITER, atA, m).med : NAN;
      char what[128];
      snprintf(what, sizeof what, "200 producers %s: writer tx %s with WRITER checkpoints < AUTO",
               k == 0 ? "NORMAL" : "FULL", m == M_TX_P99 ? "p99" : "p99.9");
      snprintf(d, sizeof d, "WRITER %.3f ms, AUTO %.3f ms", w, a);
      bench_target(what, have && !isnan(w) && !isnan(a), w < a, d);
    }
  }
  {
    int at[NDIM] = {siN, pi200, ciW};
    int have = siN >= 0 && pi200 >= 0 && ciW >= 0 && bench_harness_ran(h, ARM_WRITER, at);
    double p99 = have ? bench_harness_agg(h, ARM_WRITER, at, M_CALL_P99).med : NAN;
    double mx = have ? bench_harness_agg(h, ARM_WRITER, at, M_CALL_MAX).hi : NAN;
    snprintf(d, sizeof d, "%.3f ms (median of rounds)", p99);
    bench_target("200 producers NORMAL WRITER: lith_do p99 < 5 ms", have && !isnan(p99), p99 < 5, d);
    snprintf(d, sizeof d, "%.3f ms (worst round)", mx);
    bench_target("200 producers NORMAL WRITER: lith_do max < 100 ms", have && !isnan(mx), mx < 100, d);
  }
}

/* ---- options ------------------------------------------------------------------------------ */

static void usage(FILE *f) {
  fprintf(f, "usage: writer [options]\n"
             "  --producers LIST   producer counts, e.g. 1,50,200 (default)\n"
             "  --sync LIST        full,normal (default both)\n"
             "  --checkpoint LIST  auto,writer (default both); none (never) for comparison\n"
             "  --arms LIST        " ARM_LIST " (default all)\n"
             "  --seconds S        measured window per arm (default 3)\n"
             "  --warmup S         warm-up before the window (default 0.5)\n"
             "  --rounds N         rounds, interleaved across arms and cells (default 3)\n"
             "  --db-dir DIR       where the databases go (default: a new directory under /tmp)\n"
             "  --pin CPUS         run the whole process on these CPUs, e.g. 0-1 or 0,2\n"
             "  --results PATH     the results file (default bench/results/writer-YYYYMMDD-HHMMSS.jsonl)\n"
             "  --quick            smoke run: 1 round, 1 s, warm-up 0.25 s (producers 1,50,200 as without)\n"
             "  --help\n");
}

static int take_option(void *ctx, const char *a, const char *v) {
  static const char *const SYNC_WORD[] = {"full", "normal"}, *const CKPT_WORD[] = {"auto", "writer", "none"};
  static const int SYNC_VAL[] = {LITH_SYNC_FULL, LITH_SYNC_NORMAL};
  /* "none" (EXTERNAL: never checkpoint) is not in the standard set: it shows
   * what the writer does with checkpoints out of the picture. */
  static const int CKPT_VAL[] = {LITH_CHECKPOINT_AUTO, LITH_CHECKPOINT_WRITER, LITH_CHECKPOINT_EXTERNAL};
  config *c = ctx;
  if (!strcmp(a, "--producers")) {
    c->nproducers = bench_parse_counts(v, a, "producer", 1, 10000, c->producers, MAX_LIST);
  } else if (!strcmp(a, "--sync")) {
    c->nsync = bench_parse_words(v, a, SYNC_WORD, SYNC_VAL, 2, c->sync, 2, "full,normal");
  } else if (!strcmp(a, "--checkpoint")) {
    c->nckpt = bench_parse_words(v, a, CKPT_WORD, CKPT_VAL, 3, c->ckpt, 2, "auto,writer");
  } else if (!strcmp(a, "--arms")) {
    bench_parse_flags(v, a, ARM_NAME, NARMS, c->arms, ARM_LIST);
  } else if (!strcmp(a, "--pin")) {
    c->pin = v;
  } else {
    return 0;
  }
  return 1;
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
  memset(c, 0, sizeof *c);
  c->cli = (bench_cli){.prog = "writer", .usage = usage, .min_seconds = 0.05, .max_rounds = 100};
  /* The defaults, which the options replace. */
  c->sync[0] = LITH_SYNC_FULL;
  c->sync[1] = LITH_SYNC_NORMAL;
  c->ckpt[0] = LITH_CHECKPOINT_AUTO;
  c->ckpt[1] = LITH_CHECKPOINT_WRITER;
  c->nsync = c->nckpt = 2;
  for (int a = 0; a < NARMS; a++)
    c->arms[a] = 1;
  bench_cli_parse(&c->cli, argc, argv, take_option, c);
  if (!c->nproducers) {
    /* --quick too: the report's controls are at 1, 50 and 200 */
    static const int def[] = {1, 50, 200};
    c->nproducers = bench_list_default(c->producers, def, 3, def, 3, c->cli.quick);
  }
}

/* ---- the header ------------------------------------------------------------------------------ */

static void print_header(void *ctx, const char *results) {
  const config *c = ctx;
  bench_machine m;
  bench_machine_get(&m);
  bench_print_intro("lith writer benchmark", c->cli.argc, c->cli.argv, 0);
  printf("machine: nproc %ld (usable %d%s%s), CPU %s, kernel %s\n", m.nproc, m.usable,
         c->pin ? ", pinned to " : "", c->pin ? c->pin : "", m.cpu, m.kernel);
  printf("SQLite %s (%s), lith %s\n", sqlite3_libversion(), sqlite3_sourceid(), LITH_VERSION);
  printf("databases: %s (%s)\n", c->cli.db_dir, bench_fs_name(c->cli.db_dir));
  printf("plan: producers");
  bench_print_ints(c->producers, c->nproducers);
  printf("; synchronous");
  bench_print_named(c->sync, c->nsync, sync_name);
  printf("; checkpoint");
  bench_print_named(c->ckpt, c->nckpt, ckpt_name);
  bench_print_arms_results(ARM_NAME, c->arms, NARMS, &c->cli, results);
}

/* The tables, the writer's cycle and the targets, read from the harness. */
static void print_all(const bench_harness *h, void *ctx) {
  print_tables(h, ctx);
  print_writer_cycle(h, ctx);
  print_targets(h, ctx);
}

int main(int argc, char **argv) {
  config cfg, *c = &cfg;
  parse_args(argc, argv, c);
  int64_t t_begin = bench_now_ns();

  if (c->pin) {
    cpu_set_t set;
    if (parse_cpus(c->pin, &set) != 0)
      bench_die_usage("--pin takes a CPU list such as 0-1 or 0,2: %s", c->pin);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
      perror("writer: sched_setaffinity");
      return 2;
    }
  }

  char tmpdir[] = "/tmp/lith-bench-XXXXXX";
  int own_dir = bench_db_dir(&c->cli.db_dir, tmpdir);

  bench_plan plan = {.program = "writer",
                     .workload = "transfer",
                     BENCH_PLAN_ARMS(ARM_NAME),
                     .arm_on = c->arms,
                     .ndims = NDIM,
                     .dim_n = D_PRODUCERS,
                     .dim_sync = D_SYNC,
                     BENCH_PLAN_METRICS(METRICS),
                     .ignores = ignores,
                     .run = run_cell,
                     .ctx = c,
                     .cli = &c->cli};
  bench_plan_dim(&plan, D_SYNC, "sync", sync_name, c->sync, c->nsync);
  bench_plan_dim(&plan, D_PRODUCERS, "producers", NULL, c->producers, c->nproducers);
  bench_plan_dim(&plan, D_CKPT, "checkpoint", ckpt_name, c->ckpt, c->nckpt);
  /* Round r runs every arm of every cell before round r+1; within a cell the
   * writer first, then the ceiling that takes its batch. */
  int64_t errors = bench_harness_main(&plan, print_header, print_all);
  return bench_finish("all arms", errors, t_begin, own_dir, c->cli.db_dir);
}
