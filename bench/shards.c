/*
 * bench/shards — what a second (and a fourth) database file buys: the
 * transfer workload of bench/writer spread over 1, 2 and 4 files in one
 * process, each file its own lith handle and so its own writer, with the
 * same total number of producers.
 *
 * Why: one SQLite file has one writer, so lith's throughput on one file is
 * bounded by one thread's SQLite work and one file's fsyncs. The seed
 * figure to test (issue 13) is "a second file nearly doubles the ceiling".
 * Whether it does depends on what bounds the one file: under synchronous
 * FULL a commit waits for the WAL's fsync, which two files can overlap;
 * under NORMAL the writer is CPU-bound, and a second writer helps only if
 * there is a CPU for it. On a 2-core machine the producers, the waker and
 * the writers compete for the same two CPUs. This program measures it and
 * says where the time went.
 *
 * Sharding: owner p's accounts and topic live in file file_of(p, N), a hash
 * of p mod N; a transfer moves money between two accounts of one owner, so
 * it stays inside one file (a command touches one database: a transaction
 * across files would not be atomic in WAL mode). Every file is seeded with
 * every owner's accounts (a few rows each; the unused ones are never
 * touched), so that bench_transfer_check can check each file as a whole:
 * after the run, per file, quick_check, money conserved, ledger rows and
 * topic versions equal to what its owners were answered OK, and zero for
 * the owners of other files (a transfer in the wrong file is an error).
 *
 * A cell is (synchronous FULL|NORMAL, producers P, files N). Arms:
 *
 *   lib    N handles (lith_open per file, the writer's default options but
 *          readers 1), P producer threads, producer p calling lith_do on
 *          file_of(p, N) with one transfer at a time (bench/writer's writer
 *          arm, sharded).
 *   lithd  one lithd serving the N files (`--db sK=PATH` per file), P
 *          keep-alive HTTP connections (bench/transfer_http.h, the client of
 *          bench/lithd), connection p posting its owner's transfers to
 *          /v1/db/sK/do of its file. One more connection per file asks
 *          /v1/db/sK/stats at the window's edges (commands per batch).
 *   fsync  the disk alone, no SQLite: one thread per file overwriting 4 KiB
 *          pages of its own 1 MiB file with fdatasync after each, to see
 *          whether N files' syncs overlap. It depends on neither
 *          synchronous nor P, so it runs once per round.
 *
 * Timing, as in bench/writer: a window of --seconds after --warmup; a
 * command counts when its answer arrives inside the window. Rounds
 * interleave (bench/harness.h runs the loop): round r runs every cell
 * before round r+1, the dimensions in the order synchronous, P, files and
 * the arms innermost, so the machine's drift (large here: a shared virtual
 * machine) hits the arms of a cell alike. (Before the harness the arms ran
 * outermost and odd rounds ran the file counts in reverse; the harness's
 * one order was accepted for it.) The ratio to one file is taken within
 * each round (N files over the same round's one file, same arm,
 * synchronous and P; the file counts run in ascending order, so one file
 * has run when N files end), and the table gives its median and range over
 * rounds beside the median of commands/s. Every run is a line of the
 * results file (bench/results.md: rate = cmds_per_s, p50 and p99 = the
 * call's, cpu_us_op = us_cpu_per_cmd, the rest under m).
 *
 * Where the time goes, per cell: the writers' share of the window inside a
 * transaction and inside COMMIT (summed over the files: 2.0 means two
 * writers busy all the time; from lith_stats at the window's edges; under
 * FULL the COMMIT is mostly the WAL's fsync), and the CPU of each kind of
 * thread from /proc (writers, producers or lithd's loop thread, waker,
 * checkpointer, the HTTP client) against the machine's busy time.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
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
#include "transfer_http.h"
#include "transfer_lith.h"

/* ---- configuration ------------------------------------------------------------ */

enum { ARM_LIB, ARM_LITHD, ARM_FSYNC, NARMS };
static const char *const ARM_NAME[NARMS] = {"lib", "lithd", "fsync"};
#define ARM_LIST "lib,lithd,fsync"

#ifndef LITHD_PATH
#define LITHD_PATH "build/default/tools/lithd/lithd"
#endif

enum { MAX_LIST = 16, MAX_FILES = 16, MAX_PRODUCERS = 4096 };

typedef struct config {
  bench_cli cli; /* --seconds, --warmup, --rounds, --db-dir, --results, --quick */
  int files[MAX_LIST], nfiles;
  int producers[MAX_LIST], nproducers;
  int sync[2], nsync; /* LITH_SYNC_* */
  int arms[NARMS];    /* enabled */
  const char *lithd;
} config;

static const char *sync_name(int s) { return s == LITH_SYNC_FULL ? "FULL" : "NORMAL"; }

/* Owner p's file among n: a hash (splitmix64's finalizer), not p mod n, as
 * an application routing by key would; the split is printed with the plan. */
static int file_of(int owner, int n) {
  uint64_t z = (uint64_t)owner + UINT64_C(0x9e3779b97f4a7c15);
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  z ^= z >> 31;
  return (int)(z % (uint64_t)n);
}

/* ---- metrics and results ------------------------------------------------------- */

enum {
  M_CMDS_S,      /* commands answered OK per second of the window, all files */
  M_RATIO,       /* M_CMDS_S over the same round's one-file M_CMDS_S */
  M_CMDS_TX,     /* commands per transaction, all files */
  M_TX_MS,       /* mean BEGIN IMMEDIATE to end of COMMIT */
  M_COMMIT_MS,   /* mean COMMIT statement */
  M_IN_TX,       /* writers inside a transaction, summed over files (0..N) */
  M_IN_COMMIT,   /* of it, inside COMMIT */
  M_P50,         /* call latency, ms */
  M_P99,         /* */
  M_CPU_ALL,     /* CPUs: lib, the process; lithd, lithd and the client */
  M_CPU_WRITERS, /* the lith-writer threads */
  M_CPU_CALLERS, /* lib: the producer threads; lithd: its loop thread */
  M_CPU_WAKER,   /* the lith-waker threads */
  M_CPU_CKPT,    /* the lith-checkpoint threads */
  M_CPU_CLIENT,  /* lithd: the HTTP client (this process) */
  M_CPU_ELSE,    /* the machine's busy time not in M_CPU_ALL */
  M_US_CMD,      /* M_CPU_ALL's CPU µs per command */
  M_COMMANDS,    /* answered OK inside the window */
  NMETRIC
};
static const bench_metric METRICS[NMETRIC] = {
    {"cmds_per_s", BENCH_ROLE_RATE},        {"ratio_to_1_file", BENCH_ROLE_NONE},
    {"cmds_per_tx", BENCH_ROLE_NONE},       {"tx_ms_mean", BENCH_ROLE_NONE},
    {"commit_ms_mean", BENCH_ROLE_NONE},    {"writers_in_tx", BENCH_ROLE_NONE},
    {"writers_in_commit", BENCH_ROLE_NONE}, {"call_p50_ms", BENCH_ROLE_P50},
    {"call_p99_ms", BENCH_ROLE_P99},        {"cpu_all", BENCH_ROLE_NONE},
    {"cpu_writers", BENCH_ROLE_NONE},       {"cpu_callers", BENCH_ROLE_NONE},
    {"cpu_waker", BENCH_ROLE_NONE},         {"cpu_ckpt", BENCH_ROLE_NONE},
    {"cpu_client", BENCH_ROLE_NONE},        {"cpu_else", BENCH_ROLE_NONE},
    {"us_cpu_per_cmd", BENCH_ROLE_CPU_US},  {"commands", BENCH_ROLE_NONE},
};

/* The cell's dimensions. The fsync arm depends on neither synchronous nor
 * P: it runs at their first values only. */
enum { D_SYNC, D_PRODUCERS, D_FILES, NDIM };
static unsigned ignores(int arm) { return arm == ARM_FSYNC ? 1u << D_SYNC | 1u << D_PRODUCERS : 0; }

/* ---- one arm run ------------------------------------------------------------------ */

typedef struct run run;

typedef struct producer {
  run *r;
  int id, file;
  pthread_t th;
  uint64_t rng;
  int64_t seq;
  bench_calls n; /* calls answered, failed, in the window, their latency */
} producer;

struct run {
  const config *cfg;
  int arm, sync, P, N, round;
  char path[MAX_FILES][1024];
  lith *db[MAX_FILES];
  int64_t ws, we; /* the window; set before any producer starts */
  producer *prod;
  bench_cell *cell; /* the harness's run: its m[], errors */
};

#define report_error(r, ...) bench_cell_error((r)->cell, __VA_ARGS__)

static void say_error(void *ctx, const char *msg) { report_error((run *)ctx, "%s", msg); }

/* After the run, each file on its own: ok[p] (answered OK to owner p) for
 * the owners of that file, 0 for the others. The number of mismatches. */
static int64_t check_files(run *r, const int64_t *ok) {
  bench_pragmas p = bench_lith_pragmas(LITH_SYNC_NORMAL);
  int64_t bad = 0, *mine = bench_xcalloc((size_t)r->P, sizeof *mine);
  for (int f = 0; f < r->N; f++) {
    for (int o = 0; o < r->P; o++)
      mine[o] = file_of(o, r->N) == f ? ok[o] : 0;
    bad += bench_transfer_check(r->path[f], r->P, mine, &p, "producer", say_error, r);
  }
  free(mine);
  return bad;
}

/* CPU per kind of thread of process `pid` between the two snapshots;
 * `client` adds this process's own CPU (lithd arm: the client). */
static void fill_cpu(bench_cell *res, const bench_cpu_snap sn[2], int client) {
  double dt = (double)(sn[1].t - sn[0].t) / 1e9, d[BENCH_NTHREAD], all = 0;
  if (!sn[0].t || !sn[1].t || !(dt > 0) || !sn[0].have_threads || !sn[1].have_threads)
    return;
  for (int k = 0; k < BENCH_NTHREAD; k++) {
    d[k] = (sn[1].thread[k] - sn[0].thread[k]) / dt;
    all += d[k];
  }
  res->m[M_CPU_WRITERS] = d[BENCH_T_WRITER];
  res->m[M_CPU_WAKER] = d[BENCH_T_WAKER];
  res->m[M_CPU_CKPT] = d[BENCH_T_CKPT];
  /* lib: the producers are the unnamed threads (the main thread only sleeps);
   * lithd: the loop thread is the process's first */
  res->m[M_CPU_CALLERS] = client ? d[BENCH_T_LOOP] : d[BENCH_T_OTHER] + d[BENCH_T_LOOP];
  if (client) {
    res->m[M_CPU_CLIENT] = (sn[1].self - sn[0].self) / dt;
    all += res->m[M_CPU_CLIENT];
  }
  res->m[M_CPU_ALL] = all;
  if (sn[0].machine >= 0 && sn[1].machine >= 0)
    res->m[M_CPU_ELSE] = (sn[1].machine - sn[0].machine) / dt - all;
  if (res->m[M_COMMANDS] > 0) /* the window's commands over the CPU of the snapshots' interval */
    res->m[M_US_CMD] = all * dt / res->m[M_COMMANDS] * 1e6;
}

/* ---- the lib arm: N handles, P threads --------------------------------------------- */

static void *producer_main(void *arg) {
  producer *pr = arg;
  run *r = pr->r;
  lith *db = r->db[pr->file];
  for (;;) {
    bench_transfer t = bench_transfer_make(pr->id, ++pr->seq, &pr->rng);
    if (bench_now_ns() >= r->we)
      break;
    int rc = bench_lith_do(db, bench_transfer_cmd, &t, r->ws, r->we, &pr->n);
    if (rc != LITH_OK)
      report_error(r, "lith_do (file %d): %s: %s", pr->file, lith_errstr(rc), lith_errmsg(db));
  }
  return NULL;
}

/* lith_stats summed over the files between two snapshots, into the
 * transaction metrics; window_ns: the snapshots' own interval. */
static void fill_writers(bench_cell *res, const lith_stats *s0, const lith_stats *s1, int n,
                         double window_ns) {
  uint64_t cmds = 0, batches = 0, tx_ns = 0, commit_ns = 0;
  for (int f = 0; f < n; f++) {
    cmds += s1[f].commands - s0[f].commands;
    batches += s1[f].batches - s0[f].batches;
    tx_ns += s1[f].tx_ns_total - s0[f].tx_ns_total;
    commit_ns += s1[f].commit_ns_total - s0[f].commit_ns_total;
  }
  if (batches) {
    res->m[M_CMDS_TX] = (double)cmds / (double)batches;
    res->m[M_TX_MS] = (double)tx_ns / (double)batches / 1e6;
    res->m[M_COMMIT_MS] = (double)commit_ns / (double)batches / 1e6;
  }
  if (window_ns > 0) {
    res->m[M_IN_TX] = (double)tx_ns / window_ns;
    res->m[M_IN_COMMIT] = (double)commit_ns / window_ns;
  }
}

static void arm_lib(run *r, bench_cell *res) {
  const config *cfg = r->cfg;
  int P = r->P, started = 0;
  lith_options opt;
  lith_stats s0[MAX_FILES], s1[MAX_FILES];
  bench_cpu_snap sn[2];
  int64_t *ok = bench_xcalloc((size_t)P, sizeof *ok);
  bench_lat **bufs = bench_xcalloc((size_t)P, sizeof *bufs);
  memset(sn, 0, sizeof sn);
  lith_options_default(&opt);
  opt.synchronous = r->sync;
  opt.readers = 1;
  for (int f = 0; f < r->N; f++)
    if (lith_open(r->path[f], &opt, &r->db[f]) != LITH_OK) {
      report_error(r, "lith_open %s: %s", r->path[f], lith_errmsg(NULL));
      res->errors++;
      goto out;
    }
  r->prod = bench_xcalloc((size_t)P, sizeof *r->prod);
  size_t cap = bench_lat_cap(P, cfg->cli.seconds);
  for (int i = 0; i < P; i++) {
    producer *pr = &r->prod[i];
    pr->r = r;
    pr->id = i;
    pr->file = file_of(i, r->N);
    pr->rng = bench_rng_seed((uint64_t)i, (uint64_t)r->round * 1000 + (uint64_t)r->N);
    bufs[i] = &pr->n.lat;
    if (bench_lat_init(&pr->n.lat, cap, cap, pr->rng ^ 1) != 0) {
      fprintf(stderr, "shards: out of memory for latency buffers\n");
      exit(1);
    }
  }
  /* The window is fixed before the first thread starts: the warm-up covers
   * the threads' start. */
  r->ws = bench_now_ns() + (int64_t)(cfg->cli.warmup * 1e9);
  r->we = r->ws + (int64_t)(cfg->cli.seconds * 1e9);
  for (; started < P; started++)
    if (pthread_create(&r->prod[started].th, NULL, producer_main, &r->prod[started]) != 0) {
      report_error(r, "pthread_create failed for producer %d", started);
      res->errors++;
      break;
    }
  bench_sleep_until(r->ws);
  for (int f = 0; f < r->N; f++)
    lith_stats_get(r->db[f], &s0[f]);
  bench_cpu_snap_take(getpid(), &sn[0]);
  bench_sleep_until(r->we);
  for (int f = 0; f < r->N; f++)
    lith_stats_get(r->db[f], &s1[f]);
  bench_cpu_snap_take(getpid(), &sn[1]);
  for (int i = 0; i < started; i++)
    pthread_join(r->prod[i].th, NULL);

  uint64_t commands = 0;
  for (int i = 0; i < P; i++) {
    ok[i] = r->prod[i].n.ok;
    res->errors += r->prod[i].n.errors;
    commands += (uint64_t)r->prod[i].n.win_ok;
  }
  res->m[M_COMMANDS] = (double)commands;
  res->m[M_CMDS_S] = (double)commands / cfg->cli.seconds;
  fill_writers(res, s0, s1, r->N, (double)(sn[1].t - sn[0].t));
  bench_cell_latency(res, bufs, P, M_P50, M_P99, -1);
  fill_cpu(res, sn, 0);
out:
  for (int f = 0; f < r->N; f++) {
    if (r->db[f] && lith_close(r->db[f]) != LITH_OK) {
      report_error(r, "lith_close: %s", lith_errmsg(NULL));
      res->errors++;
    }
    r->db[f] = NULL;
  }
  if (r->prod) /* whatever ran must add up, an error or not */
    res->errors += check_files(r, ok);
  if (r->prod)
    for (int i = 0; i < P; i++)
      bench_lat_free(&r->prod[i].n.lat);
  free(r->prod);
  r->prod = NULL;
  free(bufs);
  free(ok);
}

/* ---- the lithd arm: one lithd, N databases, P connections ---------------------------- */

/* One lithd serving the N files as s0..sN-1, connection p posting to its
 * owner's file, a stats connection per file. */
static void arm_lithd(run *r, bench_cell *res) {
  const config *cfg = r->cfg;
  bench_th_client cl;
  bench_cpu_snap sn[2];
  char log[1100], route[64], dbs[MAX_FILES][1100];
  char *argv[2 * MAX_FILES + 8];
  int a = 0;
  int64_t *ok = bench_xcalloc((size_t)r->P, sizeof *ok);
  argv[a++] = (char *)cfg->lithd;
  for (int f = 0; f < r->N; f++) {
    snprintf(dbs[f], sizeof dbs[f], "s%d=%s", f, r->path[f]);
    argv[a++] = "--db";
    argv[a++] = dbs[f];
  }
  argv[a++] = "--listen";
  argv[a++] = "127.0.0.1:0";
  argv[a++] = "--synchronous";
  argv[a++] = r->sync == LITH_SYNC_FULL ? "full" : "normal";
  argv[a] = NULL;
  memset(sn, 0, sizeof sn);
  snprintf(log, sizeof log, "%s/lithd-stderr.log", cfg->cli.db_dir);
  size_t cap = bench_lat_cap(1, cfg->cli.seconds);
  int ready = bench_th_init(&cl, r->P, r->N, cap, bench_rng_seed((uint64_t)r->round, 77), say_error, r) == 0;
  for (int i = 0; ready && i < r->P; i++) {
    snprintf(route, sizeof route, "/v1/db/s%d/do", file_of(i, r->N));
    ready = bench_th_build(&cl, i, route, bench_rng_seed((uint64_t)i, (uint64_t)r->round * 1000 + 17)) == 0;
  }
  for (int f = 0; ready && f < r->N; f++) {
    snprintf(route, sizeof route, "/v1/db/s%d/stats", f);
    ready = bench_th_build_stats(&cl, f, route) == 0;
  }
  if (!ready) {
    report_error(r, "out of memory");
    res->errors++;
  } else {
    bench_th_serve(&cl, argv, log, sn, cfg->cli.warmup, cfg->cli.seconds, ok);
    res->errors += cl.errors;
    res->m[M_COMMANDS] = (double)cl.win_ok;
    res->m[M_CMDS_S] = (double)cl.win_ok / cfg->cli.seconds;
    res->m[M_CMDS_TX] = bench_th_cmds_per_tx(&cl);
    bench_lat *bufs[1] = {&cl.lat};
    bench_cell_latency(res, bufs, 1, M_P50, M_P99, -1);
    fill_cpu(res, sn, 1);
    res->errors += check_files(r, ok);
  }
  bench_th_free(&cl);
  unlink(log);
  free(ok);
}

/* ---- the fsync arm: the disk alone --------------------------------------------------- */

/* Without SQLite: one thread per file, each overwriting 4 KiB pages of its
 * own preallocated 1 MiB file in turn, fdatasync after each — what a FULL
 * commit of a small batch asks of the disk once the WAL has wrapped. Do the
 * syncs of N files overlap (N times the syncs per second) or queue? */
enum { FS_PAGE = 4096, FS_PAGES = 256 };

typedef struct fs_thread {
  run *r;
  int fd;
  pthread_t th;
  int64_t syncs, win_syncs, errors;
  bench_lat lat;
} fs_thread;

static void *fs_main(void *arg) {
  fs_thread *t = arg;
  run *r = t->r;
  char page[FS_PAGE];
  memset(page, 'x', sizeof page);
  for (int64_t i = 0;; i++) {
    int64_t t0 = bench_now_ns();
    if (t0 >= r->we)
      break;
    if (pwrite(t->fd, page, sizeof page, (off_t)(i % FS_PAGES) * FS_PAGE) != (ssize_t)sizeof page ||
        fdatasync(t->fd) != 0) {
      t->errors++;
      report_error(r, "pwrite/fdatasync: %s", strerror(errno));
      break;
    }
    int64_t t1 = bench_now_ns();
    t->syncs++;
    if (t1 >= r->ws && t1 < r->we) {
      t->win_syncs++;
      bench_lat_add(&t->lat, (uint64_t)(t1 - t0));
    }
  }
  return NULL;
}

static void arm_fsync(run *r, bench_cell *res) {
  const config *cfg = r->cfg;
  fs_thread t[MAX_FILES];
  bench_lat *bufs[MAX_FILES];
  char page[FS_PAGE], path[1100];
  int n = 0, started = 0;
  memset(t, 0, sizeof t);
  memset(page, 'x', sizeof page);
  size_t cap = bench_lat_cap(r->N, cfg->cli.seconds);
  for (; n < r->N; n++) {
    snprintf(path, sizeof path, "%s.sync", r->path[n]);
    t[n].r = r;
    t[n].fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    unlink(path); /* gone when closed */
    bufs[n] = &t[n].lat;
    int ok = t[n].fd >= 0 && bench_lat_init(&t[n].lat, cap, cap, (uint64_t)n + 5) == 0;
    for (int k = 0; ok && k < FS_PAGES; k++)
      ok = pwrite(t[n].fd, page, sizeof page, (off_t)k * FS_PAGE) == (ssize_t)sizeof page;
    if (!ok || fsync(t[n].fd) != 0) {
      report_error(r, "preparing %s: %s", path, strerror(errno));
      res->errors++;
      n++;
      goto out;
    }
  }
  r->ws = bench_now_ns() + (int64_t)(cfg->cli.warmup * 1e9);
  r->we = r->ws + (int64_t)(cfg->cli.seconds * 1e9);
  for (; started < n; started++)
    if (pthread_create(&t[started].th, NULL, fs_main, &t[started]) != 0) {
      report_error(r, "pthread_create failed");
      res->errors++;
      break;
    }
  for (int i = 0; i < started; i++)
    pthread_join(t[i].th, NULL);
  double sync_ns = 0;
  uint64_t syncs = 0;
  for (int i = 0; i < n; i++) {
    syncs += (uint64_t)t[i].win_syncs;
    res->errors += t[i].errors;
    sync_ns += (double)t[i].lat.sum;
  }
  res->m[M_COMMANDS] = (double)syncs;
  res->m[M_CMDS_S] = (double)syncs / cfg->cli.seconds;
  if (syncs) {
    res->m[M_COMMIT_MS] = sync_ns / (double)syncs / 1e6;
    res->m[M_IN_COMMIT] = sync_ns / (cfg->cli.seconds * 1e9);
  }
  bench_cell_latency(res, bufs, n, M_P50, M_P99, -1);
out:
  for (int i = 0; i < n; i++) {
    if (t[i].fd >= 0)
      close(t[i].fd);
    bench_lat_free(&t[i].lat);
  }
}

/* ---- one cell: the harness's callback ------------------------------------------------ */

static void run_cell(bench_cell *cell) {
  const config *c = cell->ctx;
  int arm = cell->arm;
  run r = {.cfg = c,
           .arm = arm,
           .sync = cell->val[D_SYNC],
           .P = cell->val[D_PRODUCERS],
           .N = cell->val[D_FILES],
           .round = cell->round,
           .cell = cell};
  bench_pragmas p = bench_lith_pragmas(LITH_SYNC_NORMAL);
  int seeded = 1;
  for (int f = 0; f < r.N; f++) {
    snprintf(r.path[f], sizeof r.path[f], "%s/%s-%s-p%d-n%d-r%d-s%d.db", c->cli.db_dir, ARM_NAME[arm],
             sync_name(r.sync), r.P, r.N, r.round + 1, f);
    if (seeded && arm != ARM_FSYNC && bench_transfer_create(r.path[f], r.P, &p) != 0)
      seeded = 0;
  }
  if (!seeded)
    cell->errors++;
  else if (arm == ARM_FSYNC)
    arm_fsync(&r, cell);
  else if (arm == ARM_LITHD)
    arm_lithd(&r, cell);
  else
    arm_lib(&r, cell);
  for (int f = 0; f < r.N; f++)
    bench_remove_db(r.path[f]);

  /* N files over the same arm's one file in this round: the file counts run
   * in ascending order, so one file has run (one file over itself: 1) */
  double x = cell->m[M_CMDS_S], one = x;
  if (r.N != 1) {
    int idx1[BENCH_MAXDIMS];
    memcpy(idx1, cell->idx, sizeof idx1);
    idx1[D_FILES] = bench_harness_find(cell->h, D_FILES, 1);
    one = idx1[D_FILES] < 0 ? NAN : bench_harness_value(cell->h, arm, idx1, cell->round, M_CMDS_S);
  }
  if (one > 0)
    cell->m[M_RATIO] = x / one;
}

/* ---- the tables ------------------------------------------------------------------------ */

/* The tables read the harness's medians over rounds at a cell's indexes
 * (idx[D_SYNC], idx[D_PRODUCERS], idx[D_FILES]). */

static void fmt_ms(char *buf, size_t n, double ms) { bench_fmt_ms(buf, n, ms, 1); }
static void fmt_pct(char *buf, size_t n, double cpus) { bench_fmt(buf, n, "%.0f%%", cpus * 100); }
static void fmt_2(char *buf, size_t n, double v) { bench_fmt(buf, n, "%.2f", v); }

static void table_row(const bench_harness *h, const config *c, int arm, const int *idx) {
  bench_agg cs = bench_harness_agg(h, arm, idx, M_CMDS_S);
  char ratio[64], v[6][32];
  bench_fmt_ratio(ratio, sizeof ratio, bench_harness_agg(h, arm, idx, M_RATIO));
  bench_fmt(v[0], sizeof v[0], "%.1f", bench_harness_agg(h, arm, idx, M_CMDS_TX).med);
  fmt_ms(v[1], sizeof v[1], bench_harness_agg(h, arm, idx, M_TX_MS).med);
  fmt_ms(v[2], sizeof v[2], bench_harness_agg(h, arm, idx, M_COMMIT_MS).med);
  fmt_2(v[3], sizeof v[3], bench_harness_agg(h, arm, idx, M_IN_TX).med);
  fmt_2(v[4], sizeof v[4], bench_harness_agg(h, arm, idx, M_IN_COMMIT).med);
  fmt_ms(v[5], sizeof v[5], bench_harness_agg(h, arm, idx, M_P99).med);
  printf("| %s | %d | %d | %.0f (%.0f–%.0f) | %s | %s | %s | %s | %s | %s | %s | %lld |\n", ARM_NAME[arm],
         c->producers[idx[D_PRODUCERS]], c->files[idx[D_FILES]], cs.med, cs.lo, cs.hi, ratio, v[0], v[1],
         v[2], v[3], v[4], v[5], (long long)bench_harness_errors(h, arm, idx));
}

static void cpu_row(const bench_harness *h, const config *c, int arm, const int *idx) {
  static const int COL[] = {M_CPU_ALL, M_CPU_WRITERS, M_CPU_CALLERS, M_CPU_WAKER, M_CPU_CKPT, M_CPU_CLIENT};
  printf("| %s | %s | %d | %d | %.0f |", ARM_NAME[arm], sync_name(c->sync[idx[D_SYNC]]),
         c->producers[idx[D_PRODUCERS]], c->files[idx[D_FILES]],
         bench_harness_agg(h, arm, idx, M_CMDS_S).med);
  for (size_t k = 0; k < sizeof COL / sizeof *COL; k++) {
    char v[32];
    fmt_pct(v, sizeof v, bench_harness_agg(h, arm, idx, COL[k]).med);
    printf(" %s |", v);
  }
  char e[32], u[32];
  fmt_pct(e, sizeof e, bench_harness_agg(h, arm, idx, M_CPU_ELSE).hi);
  bench_fmt(u, sizeof u, "%.1f", bench_harness_agg(h, arm, idx, M_US_CMD).med);
  printf(" %s | %s |\n", e, u);
}

/* The fsync arm: the disk's own answer to N files' syncs at once. */
static void print_disk(const bench_harness *h, const config *c) {
  int idx0[NDIM] = {0, 0, 0};
  if (!bench_harness_ran(h, ARM_FSYNC, idx0))
    return;
  printf("\n### the disk alone: one thread per file, 4 KiB overwrite + fdatasync in a loop\n\n");
  printf(
      "| files | fdatasyncs/s median (min–max) | ÷1 file median (min–max) | ms per sync | p50 ms | p99 ms | "
      "threads in fdatasync | err |\n");
  printf("|--:|--:|--:|--:|--:|--:|--:|--:|\n");
  for (int fi = 0; fi < c->nfiles; fi++) {
    int idx[NDIM] = {0, 0, fi};
    bench_agg cs = bench_harness_agg(h, ARM_FSYNC, idx, M_CMDS_S);
    char v[4][32], ratio[64];
    bench_fmt_ratio(ratio, sizeof ratio, bench_harness_agg(h, ARM_FSYNC, idx, M_RATIO));
    fmt_ms(v[0], sizeof v[0], bench_harness_agg(h, ARM_FSYNC, idx, M_COMMIT_MS).med);
    fmt_ms(v[1], sizeof v[1], bench_harness_agg(h, ARM_FSYNC, idx, M_P50).med);
    fmt_ms(v[2], sizeof v[2], bench_harness_agg(h, ARM_FSYNC, idx, M_P99).med);
    fmt_2(v[3], sizeof v[3], bench_harness_agg(h, ARM_FSYNC, idx, M_IN_COMMIT).med);
    printf("| %d | %.0f (%.0f–%.0f) | %s | %s | %s | %s | %s | %lld |\n", c->files[fi], cs.med, cs.lo, cs.hi,
           ratio, v[0], v[1], v[2], v[3], (long long)bench_harness_errors(h, ARM_FSYNC, idx));
  }
  printf(
      "\nEach thread its own preallocated 1 MiB file in the databases' directory: what a FULL commit asks\n"
      "of the disk once the WAL has wrapped, N files at once.\n");
}

static void print_tables(const bench_harness *h, const config *c) {
  for (int si = 0; si < c->nsync; si++) {
    printf("\n### synchronous=%s\n\n", sync_name(c->sync[si]));
    printf(
        "| arm | P | files | cmd/s median (min–max) | ÷1 file median (min–max) | cmd/tx | tx ms | commit ms "
        "| writers in tx | writers in COMMIT | call p99 ms | err |\n");
    printf("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for (int arm = 0; arm < NARMS; arm++)
      for (int pi = 0; pi < c->nproducers; pi++)
        for (int fi = 0; fi < c->nfiles; fi++) {
          int idx[NDIM] = {si, pi, fi};
          if (arm != ARM_FSYNC && bench_harness_ran(h, arm, idx))
            table_row(h, c, arm, idx);
        }
  }
  printf(
      "\nColumns: medians over rounds. ÷1 file: each round's commands/s over the same round's one file\n"
      "(same arm, synchronous, P). cmd/tx, tx ms (BEGIN IMMEDIATE to end of COMMIT), commit ms (the COMMIT\n"
      "statement: under FULL, mostly the WAL's fsync): all files together. writers in tx / in COMMIT: the\n"
      "writers' time there over the window, summed over the files (2.00: two writers there all the time).\n"
      "call p99: lith_do (lithd: request to whole answer).\n");

  printf("\n### where the CPU goes (medians, %% of one CPU; the machine has %ld)\n\n",
         sysconf(_SC_NPROCESSORS_ONLN));
  printf("| arm | sync | P | files | cmd/s | all | writers | producers (lithd: loop thread) | waker | "
         "checkpointer | client | else (worst round) | CPU µs/cmd |\n");
  printf("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
  for (int arm = 0; arm < NARMS; arm++)
    for (int si = 0; si < c->nsync; si++)
      for (int pi = 0; pi < c->nproducers; pi++)
        for (int fi = 0; fi < c->nfiles; fi++) {
          int idx[NDIM] = {si, pi, fi};
          if (arm != ARM_FSYNC && bench_harness_ran(h, arm, idx))
            cpu_row(h, c, arm, idx);
        }
  printf("\nFrom /proc/self/task/*/stat (10 ms ticks) at the window's edges; all: the lib arm's process, or\n"
         "lithd and the client; else: the rest of the machine's busy time (other work: noise).\n");
  print_disk(h, c);
}

/* The seed figure: "a second file nearly doubles the ceiling" (≥ 1.8×), as
 * PASS/MISS lines from the medians; bench/controls.csv's shards-second-file
 * judges the lib arm's with a band (bench/report.py). */
static void print_claims(const bench_harness *h, const config *c) {
  printf(
      "\n### the seed figure: \"a second file nearly doubles the ceiling\" (taken as ≥ 1.80 × one file)\n\n");
  for (int arm = 0; arm < NARMS; arm++)
    for (int si = 0; si < c->nsync; si++)
      for (int pi = 0; pi < c->nproducers; pi++)
        for (int fi = 0; fi < c->nfiles; fi++) {
          int idx[NDIM] = {si, pi, fi};
          if (arm == ARM_FSYNC || c->files[fi] == 1 || !bench_harness_ran(h, arm, idx))
            continue;
          bench_agg rt = bench_harness_agg(h, arm, idx, M_RATIO);
          char what[160], d[96];
          snprintf(what, sizeof what, "%s %s P=%d: %d files ≥ 1.80 × 1 file", ARM_NAME[arm],
                   sync_name(c->sync[si]), c->producers[pi], c->files[fi]);
          snprintf(d, sizeof d, "%.3f× (rounds %.2f–%.2f)", rt.med, rt.lo, rt.hi);
          bench_target(what, rt.n > 0, rt.med >= 1.8, d);
        }
}

/* ---- options ------------------------------------------------------------------------------ */

static void usage(FILE *f) {
  fprintf(f, "usage: shards [options]   (the transfer over 1, 2 and 4 database files in one process)\n"
             "  --files LIST       database file counts, e.g. 1,2,4 (default; run in ascending order)\n"
             "  --producers LIST   producer counts (lithd: connections), e.g. 64,200 (default)\n"
             "  --sync LIST        full,normal (default both)\n"
             "  --arms LIST        " ARM_LIST " (default all)\n"
             "  --seconds S        measured window per cell (default 3)\n"
             "  --warmup S         warm-up before the window (default 0.5)\n"
             "  --rounds N         rounds, interleaved across cells (default 3)\n"
             "  --db-dir DIR       where the databases go (default: a new directory under /tmp)\n"
             "  --lithd PATH       the lithd binary of the lithd arm (default " LITHD_PATH ")\n"
             "  --results PATH     the results file (default bench/results/shards-YYYYMMDD-HHMMSS.jsonl)\n"
             "  --quick            smoke run: 1 round, 1 s, warm-up 0.25 s, producers 64\n"
             "  --help\n");
}

static int take_option(void *ctx, const char *a, const char *v) {
  static const char *const SYNC_WORD[] = {"full", "normal"};
  static const int SYNC_VAL[] = {LITH_SYNC_FULL, LITH_SYNC_NORMAL};
  config *c = ctx;
  if (!strcmp(a, "--files")) {
    c->nfiles = bench_parse_counts(v, a, "file", 1, MAX_FILES, c->files, MAX_LIST);
  } else if (!strcmp(a, "--producers")) {
    c->nproducers = bench_parse_counts(v, a, "producer", 1, MAX_PRODUCERS, c->producers, MAX_LIST);
  } else if (!strcmp(a, "--sync")) {
    c->nsync = bench_parse_words(v, a, SYNC_WORD, SYNC_VAL, 2, c->sync, 2, "full,normal");
  } else if (!strcmp(a, "--arms")) {
    bench_parse_flags(v, a, ARM_NAME, NARMS, c->arms, ARM_LIST);
  } else if (!strcmp(a, "--lithd")) {
    c->lithd = v;
  } else {
    return 0;
  }
  return 1;
}

static void parse_args(int argc, char **argv, config *c) {
  memset(c, 0, sizeof *c);
  c->cli = (bench_cli){.prog = "shards", .usage = usage, .min_seconds = 0.05, .max_rounds = 100};
  c->sync[0] = LITH_SYNC_FULL; /* the defaults, which the options replace */
  c->sync[1] = LITH_SYNC_NORMAL;
  c->nsync = 2;
  c->lithd = LITHD_PATH;
  for (int a = 0; a < NARMS; a++)
    c->arms[a] = 1;
  bench_cli_parse(&c->cli, argc, argv, take_option, c);
  if (!c->nfiles) {
    static const int def[] = {1, 2, 4};
    c->nfiles = bench_list_default(c->files, def, 3, def, 3, c->cli.quick);
  }
  /* ascending: a round's one file runs before its N files (the ratio) */
  for (int i = 1; i < c->nfiles; i++)
    for (int k = i; k > 0 && c->files[k - 1] > c->files[k]; k--) {
      int x = c->files[k];
      c->files[k] = c->files[k - 1];
      c->files[k - 1] = x;
    }
  if (!c->nproducers) {
    static const int def[] = {64, 200}, q[] = {64};
    c->nproducers = bench_list_default(c->producers, def, 2, q, 1, c->cli.quick);
  }
}

/* ---- the header ------------------------------------------------------------------------------ */

static void print_header(void *ctx, const char *results) {
  const config *c = ctx;
  bench_machine m;
  bench_machine_get(&m);
  bench_print_intro("lith shards benchmark", c->cli.argc, c->cli.argv, 1);
  printf("machine: nproc %ld (usable %d), CPU %s, kernel %s\n", m.nproc, m.usable, m.cpu, m.kernel);
  printf("SQLite %s, lith %s (checkpoint WRITER)\n", sqlite3_libversion(), LITH_VERSION);
  printf("databases: %s (%s)\n", c->cli.db_dir, bench_fs_name(c->cli.db_dir));
  printf("plan: producers");
  bench_print_ints(c->producers, c->nproducers);
  printf("; files");
  bench_print_ints(c->files, c->nfiles);
  printf("; synchronous");
  bench_print_named(c->sync, c->nsync, sync_name);
  printf("\nproducers per file (owner p in file hash(p) mod N):");
  for (int pi = 0; pi < c->nproducers; pi++)
    for (int fi = 0; fi < c->nfiles; fi++) {
      int per[MAX_FILES] = {0};
      for (int p = 0; p < c->producers[pi]; p++)
        per[file_of(p, c->files[fi])]++;
      printf(" P=%d N=%d:", c->producers[pi], c->files[fi]);
      for (int f = 0; f < c->files[fi]; f++)
        printf("%s%d", f ? "/" : "", per[f]);
      printf(";");
    }
  printf("\nplan");
  bench_print_arms_results(ARM_NAME, c->arms, NARMS, &c->cli, results);
}

static void print_all(const bench_harness *h, void *ctx) {
  print_tables(h, ctx);
  print_claims(h, ctx);
}

int main(int argc, char **argv) {
  config cfg, *c = &cfg;
  char tmpdir[] = "/tmp/lith-bench-shards-XXXXXX";
  parse_args(argc, argv, c);
  int64_t t_begin = bench_now_ns();
  signal(SIGPIPE, SIG_IGN);

  if (c->arms[ARM_LITHD])
    bench_need_exec(c->lithd, "build it (make) or pass --lithd PATH, or --arms lib,fsync");
  int own_dir = bench_db_dir(&c->cli.db_dir, tmpdir);
  bench_plan plan = {.program = "shards",
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
  bench_plan_dim(&plan, D_FILES, "files", NULL, c->files, c->nfiles);
  /* Round r runs every cell before round r+1, the arms innermost. */
  int64_t errors = bench_harness_main(&plan, print_header, print_all);
  return bench_finish("all cells", errors, t_begin, own_dir, c->cli.db_dir);
}
