/*
 * bench/dqlite — what lith's batching buys an application writing to a
 * dqlite cluster (issue 14): the transfer workload of bench/lithd against a
 * three-node cluster the bench starts on loopback, at 1, 16 and 64
 * connections, in one run.
 *
 * Why: dqlite serves one write transaction at a time per database, and each
 * transaction's COMMIT is one Raft entry that a majority of the nodes must
 * store (and sync) before it is answered. An application using dqlite
 * directly pays that per transaction; lith's writer (dqlite/writer.h) runs N
 * connections' commands as one transaction, one entry.
 *
 * Arms, each on a fresh database of the same cluster (dqlite serves many
 * databases by name; each cell OPENs its own, seeded through the client):
 *
 *   direct      N threads, each its own dqlite/client connection to the
 *               leader, one transaction per transfer: BEGIN, the four
 *               statements, COMMIT, each its own EXEC_SQL round trip (what an
 *               app using dqlite through a driver does). dqlite answers a
 *               write while another connection's transaction is open with
 *               SQLITE_BUSY at once (it has no busy timeout): the thread
 *               rolls back, sleeps as SQLite's own busy handler would (1, 2,
 *               5, 10, 15, 20, 25, 25, 25, 50, 50, 100 ms, then 100) and
 *               runs the transfer again; the retries are counted.
 *   writer      dqlite/writer in this process, N threads calling
 *               lith__dqw_do with the transfer as a command (four
 *               lith__dqw_exec): what lithd --dqlite does, without HTTP.
 *   lithd-dq    lithd --dqlite ADDRS --dqlite-db NAME over HTTP, N
 *               keep-alive connections (bench/transfer_http.h, the client of
 *               bench/lithd). Skipped, and said so, when the lithd given
 *               has no --dqlite.
 *   lithd-dq-base  lithd-dq with another lithd build (--lithd-base PATH;
 *               run only when given): a change's before and after in one
 *               run, against the same cluster, each round's lithd-dq over
 *               its lithd-dq-base printed (÷base).
 *   lithd-file  lithd --db FILE --synchronous full (--sync normal: normal)
 *               over HTTP, the same client: one machine, for reference
 *               (bench/lithd's lithd arm).
 *
 * Measured per cell: commands answered OK per second of the window, the
 * latency of each (p50, p99; direct: from the first attempt to COMMIT's OK,
 * retries and their sleeps included), transactions per command (= Raft
 * entries per command: dqlite replicates a transaction's pages as one entry
 * at COMMIT; direct commits one per transfer and a transaction refused busy
 * wrote nothing; writer and lithd-dq: the rows in the writer's
 * _lith_batches, one per committed batch, over the commands answered OK in
 * the whole arm; lithd-file: GET /v1/stats), busy retries per command, and
 * the three nodes' CPU per command (/proc, from the arm's first connection
 * to its last answer, per command answered OK in that time). Each arm's
 * figure is also divided by direct's in the same round and cell. Direct
 * also times its own requests (the mean of BEGIN and the four statements,
 * and the mean COMMIT): where a transaction's time goes, without a
 * profiler.
 *
 * After every arm the database is checked by bench/transfer.c's check:
 * dqlite arms first copy the cluster's three tables (read on the leader)
 * into a local SQLite file. Money conserved, one ledger row and one topic
 * bump per command answered OK, per connection. A mismatch, a failed
 * request or a writer failover is an error; exit status 1 if any.
 *
 * The cluster: three lith-node processes (dqlite/test/nodes.c, the tests'
 * launcher; Raft latency T_NODE_LATENCY_MS) with their data directories in
 * the run's directory, started once and stopped (SIGTERM) at the end. All
 * three share this machine's CPUs and disk: see
 * bench/notes/dqlite-2026-12-01-one-machine.md for what that means for the
 * figures.
 *
 * Rounds interleave as in the other programs: round r runs every cell of
 * every arm before round r+1, odd rounds in the reverse arm order.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "client.h"
#include "common.h"
#include "nodes.h"
#include "transfer.h"
#include "transfer_http.h"
#include "writer.h"

#ifndef LITHD_PATH
#define LITHD_PATH "build/default/tools/lithd/lithd"
#endif

/* ---- configuration ------------------------------------------------------------ */

enum { ARM_DIRECT, ARM_WRITER, ARM_LITHDQ, ARM_LITHDQ_BASE, ARM_LITHD, NARMS };
static const char *const ARM_NAME[NARMS] = {"direct", "writer", "lithd-dq", "lithd-dq-base", "lithd-file"};
#define ARM_LIST "direct,writer,lithd-dq,lithd-dq-base,lithd-file"

enum { MAX_LIST = 16, MAX_CONNS = 1024, SQLITE_BUSY_ = 5, SQLITE_LOCKED_ = 6 };

typedef struct config {
  bench_cli cli; /* --seconds, --warmup, --rounds, --db-dir, --csv, --quick */
  int conns[MAX_LIST], nconns;
  int arms[NARMS];
  const char *lithd;
  const char *lithd_base; /* --lithd-base: another lithd build, the lithd-dq-base arm; NULL: none */
  int lithd_dq;           /* the lithd given knows --dqlite */
  int file_normal;        /* lithd-file runs synchronous NORMAL (--sync normal), else FULL */
} config;

typedef struct cluster {
  t_node node[3];
  char all[256]; /* their addresses, comma-separated */
} cluster;

/* ---- metrics and results ------------------------------------------------------- */

enum {
  M_CMDS_S,    /* commands answered OK per second of the window */
  M_RATIO,     /* over direct's M_CMDS_S, same round and N */
  M_P50,       /* ms */
  M_P99,       /* ms */
  M_TX_CMD,    /* transactions (Raft entries) per command */
  M_RETRY_CMD, /* direct: busy retries per command answered OK */
  M_NODE_US,   /* the three nodes' CPU µs per command answered OK, whole arm */
  M_RT_MS,     /* direct: mean round trip of BEGIN and the four statements, ms */
  M_COMMIT_MS, /* direct: mean COMMIT (Raft: a majority stored the entry), ms */
  NMETRIC
};
static const char *const METRIC_CSV[NMETRIC] = {
    "cmds_per_s",      "ratio_to_direct",     "p50_ms", "p99_ms",   "tx_per_cmd",
    "retries_per_cmd", "node_cpu_us_per_cmd", "rt_ms",  "commit_ms"};

typedef struct result {
  int ran;
  double m[NMETRIC];
  uint64_t commands; /* answered OK inside the window */
  int64_t all_ok;    /* answered OK in the whole arm */
  int64_t txs;       /* dqlite arms: transactions committed in the arm, seeding not counted; -1 unknown */
  int64_t errors;
  double wall_s;
} result;

/* ---- one arm run ------------------------------------------------------------------ */

typedef struct run run;

typedef struct worker {
  run *r;
  int id;
  pthread_t th;
  uint64_t rng;
  int64_t seq, ok, win_ok, errors, retries;
  int64_t txs, stmt_ns, commit_ns; /* direct: committed transactions' round trips */
  bench_lat lat;
} worker;

struct run {
  const config *cfg;
  const cluster *cl;
  int arm, N, round;
  char name[64];    /* the dqlite database */
  char path[1100];  /* lithd-file's database; the check's copy */
  int64_t ws, we;   /* the window */
  worker *wk;       /* N */
  lith__dqw *w;     /* the writer arm's */
  _Atomic int msgs; /* error messages printed */
};

static void report_error(run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report_error(run *r, const char *fmt, ...) {
  if (atomic_fetch_add(&r->msgs, 1) >= 5)
    return;
  char buf[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  fprintf(stderr, "  error [%s N=%d round %d]: %s\n", ARM_NAME[r->arm], r->N, r->round + 1, buf);
}

static void say_error(void *ctx, const char *msg) { report_error(ctx, "%s", msg); }

static bench_pragmas pragmas_full(void) {
  bench_pragmas p = {1, 16384, 0, 1};
  return p;
}

/* ---- the cluster ----------------------------------------------------------------- */

/* Three nodes with their data in dir/nodeK: node 1 bootstraps, 2 and 3 join. */
static int cluster_start(cluster *c, const char *dir) {
  memset(c, 0, sizeof *c);
  for (int i = 0; i < 3; i++) {
    t_node_init(&c->node[i], i + 1);
    int n = snprintf(c->node[i].dir, sizeof c->node[i].dir, "%s/node%d", dir, i + 1);
    if (n < 0 || (size_t)n >= sizeof c->node[i].dir) {
      fprintf(stderr, "bench/dqlite: --db-dir %s is too long for a node's directory\n", dir);
      return -1;
    }
  }
  snprintf(c->all, sizeof c->all, "%s,%s,%s", c->node[0].address, c->node[1].address, c->node[2].address);
  char two[160];
  snprintf(two, sizeof two, "%s,%s", c->node[0].address, c->node[1].address);
  if (t_node_start(&c->node[0], NULL, 15000) != 0 ||
      t_node_start(&c->node[1], c->node[0].address, 20000) != 0 || t_node_start(&c->node[2], two, 20000) != 0)
    return -1;
  return 0;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f) {
  (void)st;
  (void)flag;
  (void)f;
  return remove(p);
}

static void cluster_stop(cluster *c) {
  for (int i = 0; i < 3; i++) {
    if (c->node[i].pid > 0) {
      int st = t_node_stop(&c->node[i], SIGTERM, 10000);
      if (st != 0)
        fprintf(stderr, "bench/dqlite: node %d exited with status %d on SIGTERM\n", i + 1, st);
    }
    nftw(c->node[i].dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  }
}

/* The three nodes' CPU seconds (utime + stime). */
static double nodes_cpu_s(const cluster *c) {
  double s = 0;
  for (int i = 0; i < 3; i++) {
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/stat", (int)c->node[i].pid);
    double v = bench_stat_cpu_s(p, NULL, 0);
    if (v < 0)
      return NAN;
    s += v;
  }
  return s;
}

/* A connection to the leader with run r's database open; NULL (reported). */
static lith__dq_conn *leader_open(run *r, uint32_t *db) {
  lith__dq_conn *c = lith__dq_new(10000);
  if (c == NULL) {
    report_error(r, "out of memory");
    return NULL;
  }
  int rc = lith__dq_connect_leader(c, r->cl->all, 10000);
  if (rc == LITH_DQ_OK)
    rc = lith__dq_open(c, r->name, db);
  if (rc != LITH_DQ_OK) {
    report_error(r, "connecting to the leader: %s: %s", lith__dq_rc_str(rc), lith__dq_errmsg(c));
    lith__dq_close(c);
    return NULL;
  }
  return c;
}

/* r's database on the cluster: the schema, N owners' accounts and topics.
 * 0 or -1 (reported). */
static int dq_seed(run *r) {
  uint32_t db;
  char sql[400];
  lith__dq_conn *c = leader_open(r, &db);
  if (c == NULL)
    return -1;
  int rc = lith__dq_exec_sql(c, db, BENCH_TRANSFER_SCHEMA, NULL, 0, NULL);
  snprintf(sql, sizeof sql,
           "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < %d)"
           " INSERT INTO accounts(id, balance) SELECT i, %lld FROM n",
           r->N * BENCH_ACCOUNTS_PER - 1, (long long)BENCH_START_BALANCE);
  if (rc == LITH_DQ_OK)
    rc = lith__dq_exec_sql(c, db, sql, NULL, 0, NULL);
  snprintf(sql, sizeof sql,
           "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < %d)"
           " INSERT INTO topics(id, version) SELECT i, 0 FROM n",
           r->N - 1);
  if (rc == LITH_DQ_OK)
    rc = lith__dq_exec_sql(c, db, sql, NULL, 0, NULL);
  if (rc != LITH_DQ_OK)
    report_error(r, "seeding %s: %s: %s", r->name, lith__dq_rc_str(rc), lith__dq_errmsg(c));
  lith__dq_close(c);
  return rc == LITH_DQ_OK ? 0 : -1;
}

/* One query's rows into the local copy: `ins` bound with each row's columns. */
static int copy_rows(run *r, lith__dq_conn *c, uint32_t db, const char *sel, sqlite3 *to, const char *ins) {
  lith__dq_rows rows;
  sqlite3_stmt *st = NULL;
  lith__dq_rows_init(&rows);
  int rc = lith__dq_query_sql(c, db, sel, NULL, 0, &rows);
  if (rc != LITH_DQ_OK) {
    report_error(r, "check: %s: %s: %s", sel, lith__dq_rc_str(rc), lith__dq_errmsg(c));
    lith__dq_rows_free(&rows);
    return -1;
  }
  int src = sqlite3_prepare_v2(to, ins, -1, &st, NULL);
  for (size_t i = 0; src == SQLITE_OK && i < rows.nrows; i++) {
    for (unsigned j = 0; j < rows.ncols; j++)
      sqlite3_bind_int64(st, (int)j + 1, lith__dq_rows_at(&rows, i, j)->i);
    src = bench_step(st);
  }
  if (src != SQLITE_OK)
    report_error(r, "check: copying into %s: %s", r->path, sqlite3_errmsg(to));
  sqlite3_finalize(st);
  lith__dq_rows_free(&rows);
  return src == SQLITE_OK ? 0 : -1;
}

/* The cluster's tables, read on the leader, copied into a local file and
 * checked there (bench_transfer_check). The number of findings. */
static int64_t dq_check(run *r, const int64_t *ok) {
  uint32_t db;
  sqlite3 *to = NULL;
  bench_pragmas p = pragmas_full();
  p.full = 0;
  int64_t bad = 1;
  snprintf(r->path, sizeof r->path, "%s/check.db", r->cfg->cli.db_dir);
  lith__dq_conn *c = leader_open(r, &db);
  if (c == NULL)
    return 1;
  if (bench_transfer_create(r->path, 0, &p) == 0 && bench_open_plain(r->path, &p, 5000, &to) == SQLITE_OK &&
      sqlite3_exec(to, "BEGIN", NULL, NULL, NULL) == SQLITE_OK &&
      copy_rows(r, c, db, "SELECT id, balance FROM accounts", to,
                "INSERT INTO accounts(id, balance) VALUES (?, ?)") == 0 &&
      copy_rows(r, c, db, "SELECT producer, seq, src, dst, amount FROM ledger", to,
                "INSERT INTO ledger(producer, seq, src, dst, amount) VALUES (?, ?, ?, ?, ?)") == 0 &&
      copy_rows(r, c, db, "SELECT id, version FROM topics", to,
                "INSERT INTO topics(id, version) VALUES (?, ?)") == 0 &&
      sqlite3_exec(to, "COMMIT", NULL, NULL, NULL) == SQLITE_OK) {
    sqlite3_close(to);
    to = NULL;
    bad = bench_transfer_check(r->path, r->N, ok, &p, "connection", say_error, r);
  } else {
    report_error(r, "check: could not copy the cluster's tables");
  }
  if (to)
    sqlite3_close(to);
  bench_remove_db(r->path);
  lith__dq_close(c);
  return bad;
}

/* Batches the writer committed in r's database (its _lith_batches rows);
 * -1 when they cannot be read. */
static int64_t dq_batches(run *r) {
  uint32_t db;
  lith__dq_rows rows;
  int64_t n = -1;
  lith__dq_conn *c = leader_open(r, &db);
  if (c == NULL)
    return -1;
  lith__dq_rows_init(&rows);
  if (lith__dq_query_sql(c, db, "SELECT count(*) FROM _lith_batches WHERE lost = 0", NULL, 0, &rows) ==
          LITH_DQ_OK &&
      rows.nrows == 1)
    n = lith__dq_rows_at(&rows, 0, 0)->i;
  else
    report_error(r, "counting _lith_batches: %s", lith__dq_errmsg(c));
  lith__dq_rows_free(&rows);
  lith__dq_close(c);
  return n;
}

/* ---- the thread arms: direct and writer --------------------------------------------- */

/* The transfer's four statements' parameters, in order: debit (amount, src),
 * credit (amount, dst), ledger (owner, seq, src, dst, amount), topic (owner). */
typedef struct xfer_params {
  lith__dq_value debit[2], credit[2], ledger[5], topic[1];
} xfer_params;

static xfer_params params_of(const bench_transfer *t) {
  xfer_params p = {{lith__dq_int(t->amount), lith__dq_int(t->src)},
                   {lith__dq_int(t->amount), lith__dq_int(t->dst)},
                   {lith__dq_int(t->owner), lith__dq_int(t->seq), lith__dq_int(t->src), lith__dq_int(t->dst),
                    lith__dq_int(t->amount)},
                   {lith__dq_int(t->owner)}};
  return p;
}

/* The writer's command: the same four statements. */
static int cmd_transfer(lith__dqw_tx *tx, void *arg) {
  xfer_params p = params_of(arg);
  int rc = lith__dqw_exec(tx, BENCH_SQL_DEBIT, p.debit, 2, NULL);
  if (rc == LITH_DQW_OK)
    rc = lith__dqw_exec(tx, BENCH_SQL_CREDIT, p.credit, 2, NULL);
  if (rc == LITH_DQW_OK)
    rc = lith__dqw_exec(tx, BENCH_SQL_LEDGER, p.ledger, 5, NULL);
  if (rc == LITH_DQW_OK)
    rc = lith__dqw_exec(tx, BENCH_SQL_TOPIC, p.topic, 1, NULL);
  return rc;
}

/* One transaction on a plain connection: LITH_DQ_OK (committed), or the
 * failing step's code with the transaction rolled back when the connection
 * lives; -SQLITE_BUSY_ when refused busy. A committed one adds its five
 * other requests' and its COMMIT's round trips to wk's sums. */
static int direct_tx(worker *wk, lith__dq_conn *c, uint32_t db, const bench_transfer *t) {
  xfer_params p = params_of(t);
  const struct {
    const char *sql;
    const lith__dq_value *v;
    unsigned n;
  } step[6] = {{"BEGIN", NULL, 0},
               {BENCH_SQL_DEBIT, p.debit, 2},
               {BENCH_SQL_CREDIT, p.credit, 2},
               {BENCH_SQL_LEDGER, p.ledger, 5},
               {BENCH_SQL_TOPIC, p.topic, 1},
               {"COMMIT", NULL, 0}};
  int64_t t0 = bench_now_ns(), t_commit = 0;
  int rc = LITH_DQ_OK;
  for (int i = 0; i < 6 && rc == LITH_DQ_OK; i++) {
    if (i == 5)
      t_commit = bench_now_ns();
    rc = lith__dq_exec_sql(c, db, step[i].sql, step[i].v, step[i].n, NULL);
  }
  if (rc == LITH_DQ_OK) {
    int64_t t1 = bench_now_ns();
    wk->stmt_ns += t_commit - t0;
    wk->commit_ns += t1 - t_commit;
    wk->txs++;
  } else if (rc == LITH_DQ_FAILURE) {
    /* keep the failure's code across the ROLLBACK */
    uint64_t code = lith__dq_errcode(c);
    int rb = lith__dq_exec_sql(c, db, "ROLLBACK", NULL, 0, NULL);
    if (rb != LITH_DQ_OK && rb != LITH_DQ_FAILURE)
      return rb;
    return (code & 0xff) == SQLITE_BUSY_ || (code & 0xff) == SQLITE_LOCKED_ ? -SQLITE_BUSY_ : rc;
  }
  return rc;
}

/* SQLite's default busy handler's sleeps (sqliteDefaultBusyCallback), ms. */
static int busy_delay_ms(int attempt) {
  static const int D[] = {1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100};
  return attempt < (int)(sizeof D / sizeof *D) ? D[attempt] : 100;
}

static void record(worker *wk, int64_t t0) {
  run *r = wk->r;
  int64_t t1 = bench_now_ns();
  wk->ok++;
  if (t1 >= r->ws && t1 < r->we) {
    wk->win_ok++;
    bench_lat_add(&wk->lat, (uint64_t)(t1 - t0));
  }
}

static void *direct_main(void *arg) {
  worker *wk = arg;
  run *r = wk->r;
  uint32_t db;
  lith__dq_conn *c = leader_open(r, &db);
  if (c == NULL) {
    wk->errors++;
    return NULL;
  }
  for (;;) {
    int64_t t0 = bench_now_ns();
    if (t0 >= r->we)
      break;
    bench_transfer t = bench_transfer_make(wk->id, ++wk->seq, &wk->rng);
    int rc, attempt = 0;
    while ((rc = direct_tx(wk, c, db, &t)) == -SQLITE_BUSY_ &&
           bench_now_ns() < r->we + INT64_C(30000000000)) {
      wk->retries++;
      bench_sleep_ms(busy_delay_ms(attempt++));
    }
    if (rc == LITH_DQ_OK) {
      record(wk, t0);
      continue;
    }
    /* Anything else is an error; after a lost connection the transfer's
     * outcome is unknown and the check will say so. */
    wk->errors++;
    report_error(r, "connection %d: %s: %s", wk->id,
                 rc == -SQLITE_BUSY_ ? "busy for 30 s" : lith__dq_rc_str(rc), lith__dq_errmsg(c));
    if (!lith__dq_connected(c)) {
      lith__dq_close(c);
      if ((c = leader_open(r, &db)) == NULL)
        return NULL;
    }
  }
  lith__dq_close(c);
  return NULL;
}

static void *writer_main(void *arg) {
  worker *wk = arg;
  run *r = wk->r;
  for (;;) {
    int64_t t0 = bench_now_ns();
    if (t0 >= r->we)
      break;
    bench_transfer t = bench_transfer_make(wk->id, ++wk->seq, &wk->rng);
    lith__dqw_err err;
    int rc = lith__dqw_do(r->w, cmd_transfer, &t, &err);
    if (rc == LITH_DQW_OK) {
      record(wk, t0);
    } else {
      wk->errors++;
      report_error(r, "connection %d: %s: %s", wk->id, lith__dqw_rc_str(rc), err.errmsg);
    }
  }
  return NULL;
}

static void fill_latency(run *r, result *res, bench_lat *const *bufs, int nb) {
  static const double QS[2] = {0.50, 0.99};
  bench_lat_sum s;
  if (bench_lat_merge(bufs, nb, QS, 2, &s) != 0) {
    report_error(r, "out of memory merging latencies");
    res->errors++;
    return;
  }
  res->m[M_P50] = s.q[0] / 1e6;
  res->m[M_P99] = s.q[1] / 1e6;
}

/* N threads running fn until the window's end; ok[i] what thread i was
 * answered OK. */
static void arm_threads(run *r, result *res, void *(*fn)(void *), int64_t *ok) {
  const config *cfg = r->cfg;
  int started = 0;
  bench_lat **bufs = bench_xcalloc((size_t)r->N, sizeof *bufs);
  int64_t retries = 0, all_ok = 0, txs = 0, stmt_ns = 0, commit_ns = 0;
  r->wk = bench_xcalloc((size_t)r->N, sizeof *r->wk);
  size_t cap = bench_lat_cap(r->N, cfg->cli.seconds);
  for (int i = 0; i < r->N; i++) {
    worker *wk = &r->wk[i];
    wk->r = r;
    wk->id = i;
    wk->rng = bench_rng_seed((uint64_t)i, (uint64_t)r->round * 1000 + (uint64_t)r->arm);
    bufs[i] = &wk->lat;
    if (bench_lat_init(&wk->lat, cap, cap, wk->rng ^ 1) != 0) {
      fprintf(stderr, "bench/dqlite: out of memory for latency buffers\n");
      exit(1);
    }
  }
  r->ws = bench_now_ns() + (int64_t)(cfg->cli.warmup * 1e9);
  r->we = r->ws + (int64_t)(cfg->cli.seconds * 1e9);
  for (; started < r->N; started++)
    if (pthread_create(&r->wk[started].th, NULL, fn, &r->wk[started]) != 0) {
      report_error(r, "pthread_create failed for connection %d", started);
      res->errors++;
      break;
    }
  for (int i = 0; i < started; i++)
    pthread_join(r->wk[i].th, NULL);
  for (int i = 0; i < r->N; i++) {
    ok[i] = r->wk[i].ok;
    all_ok += r->wk[i].ok;
    res->errors += r->wk[i].errors;
    res->commands += (uint64_t)r->wk[i].win_ok;
    retries += r->wk[i].retries;
    txs += r->wk[i].txs;
    stmt_ns += r->wk[i].stmt_ns;
    commit_ns += r->wk[i].commit_ns;
  }
  if (txs) {
    res->m[M_RT_MS] = (double)stmt_ns / (double)txs / 5 / 1e6;
    res->m[M_COMMIT_MS] = (double)commit_ns / (double)txs / 1e6;
  }
  res->m[M_CMDS_S] = (double)res->commands / cfg->cli.seconds;
  if (all_ok && fn == direct_main)
    res->m[M_RETRY_CMD] = (double)retries / (double)all_ok;
  fill_latency(r, res, bufs, r->N);
  for (int i = 0; i < r->N; i++)
    bench_lat_free(&r->wk[i].lat);
  free(r->wk);
  r->wk = NULL;
  free(bufs);
}

static int64_t sum_of(const int64_t *v, int n) {
  int64_t s = 0;
  for (int i = 0; i < n; i++)
    s += v[i];
  return s;
}

static void arm_writer(run *r, result *res, int64_t *ok) {
  lith__dqw_options o = {.addresses = r->cl->all, .database = r->name};
  lith__dqw_stats st;
  if (lith__dqw_start(&o, &r->w) != LITH_DQW_OK) {
    report_error(r, "lith__dqw_start failed");
    res->errors++;
    return;
  }
  arm_threads(r, res, writer_main, ok);
  lith__dqw_get_stats(r->w, &st);
  lith__dqw_stop(r->w);
  r->w = NULL;
  if (st.failovers) {
    report_error(r, "the writer failed over %llu time(s)", (unsigned long long)st.failovers);
    res->errors++;
  }
}

/* ---- the HTTP arms: lithd --dqlite, lithd --db ---------------------------------------------- */

static void arm_http(run *r, result *res, int64_t *ok) {
  const config *cfg = r->cfg;
  bench_th_client cl;
  bench_cpu_snap sn[2];
  char log[1100];
  const char *argv[16];
  int a = 0, nstats = r->arm == ARM_LITHD; /* lithd --dqlite's /v1/stats has no batch counts */
  argv[a++] = r->arm == ARM_LITHDQ_BASE ? cfg->lithd_base : cfg->lithd;
  if (r->arm == ARM_LITHD) {
    argv[a++] = "--db";
    argv[a++] = r->path;
    argv[a++] = "--synchronous";
    argv[a++] = cfg->file_normal ? "normal" : "full";
  } else {
    argv[a++] = "--dqlite";
    argv[a++] = r->cl->all;
    argv[a++] = "--dqlite-db";
    argv[a++] = r->name;
  }
  argv[a++] = "--listen";
  argv[a++] = "127.0.0.1:0";
  argv[a] = NULL;
  memset(sn, 0, sizeof sn);
  snprintf(log, sizeof log, "%s/lithd-stderr.log", cfg->cli.db_dir);
  size_t cap = bench_lat_cap(1, cfg->cli.seconds);
  int ready =
      bench_th_init(&cl, r->N, nstats, cap, bench_rng_seed((uint64_t)r->round, 77), say_error, r) == 0;
  for (int i = 0; ready && i < r->N; i++)
    ready =
        bench_th_build(&cl, i, "/v1/do", bench_rng_seed((uint64_t)i, (uint64_t)r->round * 1000 + 17)) == 0;
  if (ready && nstats)
    ready = bench_th_build_stats(&cl, 0, "/v1/stats") == 0;
  if (!ready) {
    report_error(r, "out of memory");
    res->errors++;
  } else {
    bench_th_serve(&cl, (char *const *)argv, log, sn, cfg->cli.warmup, cfg->cli.seconds, ok);
    res->errors += cl.errors;
    res->commands = cl.win_ok;
    res->m[M_CMDS_S] = (double)cl.win_ok / cfg->cli.seconds;
    if (nstats)
      res->m[M_TX_CMD] = 1.0 / bench_th_cmds_per_tx(&cl);
    bench_lat *bufs[1] = {&cl.lat};
    fill_latency(r, res, bufs, 1);
  }
  bench_th_free(&cl);
  unlink(log);
}

/* ---- the plan ----------------------------------------------------------------------- */

typedef struct bench {
  config cfg;
  cluster cl;
  result *res; /* [arm][conns][round] */
  FILE *csv;
  int64_t total_errors;
} bench;

static result *res_at(bench *b, int arm, int ni, int r) {
  const config *c = &b->cfg;
  return &b->res[((size_t)arm * (size_t)c->nconns + (size_t)ni) * (size_t)c->cli.rounds + (size_t)r];
}

static void csv_row(bench *b, int arm, int ni, const char *round, const result *x) {
  if (!b->csv)
    return;
  fprintf(b->csv, "%s,%d,%s", ARM_NAME[arm], b->cfg.conns[ni], round);
  for (int m = 0; m < NMETRIC; m++)
    bench_csv_num(b->csv, x->m[m]);
  fprintf(b->csv, ",%llu,%lld", (unsigned long long)x->commands, (long long)x->errors);
  bench_csv_num(b->csv, x->wall_s);
  fprintf(b->csv, "\n");
  fflush(b->csv);
}

static void run_one(bench *b, int arm, int ni, int round) {
  const config *c = &b->cfg;
  run r;
  memset(&r, 0, sizeof r);
  r.cfg = c;
  r.cl = &b->cl;
  r.arm = arm;
  r.N = c->conns[ni];
  r.round = round;
  result *res = res_at(b, arm, ni, round);
  memset(res, 0, sizeof *res);
  res->txs = -1;
  for (int m = 0; m < NMETRIC; m++)
    res->m[m] = NAN;
  snprintf(r.name, sizeof r.name, "%s-n%d-r%d", ARM_NAME[arm], r.N, round + 1);
  int64_t *ok = bench_xcalloc((size_t)r.N, sizeof *ok);
  int64_t t0 = bench_now_ns();
  if (arm == ARM_LITHD) {
    bench_pragmas p = pragmas_full();
    p.full = !c->file_normal;
    snprintf(r.path, sizeof r.path, "%s/lithd-n%d-r%d.db", c->cli.db_dir, r.N, round + 1);
    if (bench_transfer_create(r.path, r.N, &p) != 0) {
      res->errors++;
    } else {
      arm_http(&r, res, ok);
      res->errors += bench_transfer_check(r.path, r.N, ok, &p, "connection", say_error, &r);
    }
    bench_remove_db(r.path);
  } else if (dq_seed(&r) != 0) {
    res->errors++;
  } else {
    double cpu0 = nodes_cpu_s(&b->cl);
    if (arm == ARM_DIRECT)
      arm_threads(&r, res, direct_main, ok);
    else if (arm == ARM_WRITER)
      arm_writer(&r, res, ok);
    else
      arm_http(&r, res, ok);
    double cpu1 = nodes_cpu_s(&b->cl);
    int64_t all_ok = sum_of(ok, r.N);
    if (all_ok > 0)
      res->m[M_NODE_US] = (cpu1 - cpu0) / (double)all_ok * 1e6;
    /* direct: each OK its own transaction (one refused busy wrote nothing) */
    res->txs = arm == ARM_DIRECT ? all_ok : dq_batches(&r);
    if (res->txs < 0)
      res->errors++;
    else if (all_ok > 0)
      res->m[M_TX_CMD] = (double)res->txs / (double)all_ok;
    res->errors += dq_check(&r, ok);
  }
  res->all_ok = sum_of(ok, r.N);
  free(ok);
  res->wall_s = (double)(bench_now_ns() - t0) / 1e9;
  res->ran = 1;
  b->total_errors += res->errors;

  char rbuf[16];
  snprintf(rbuf, sizeof rbuf, "%d", round + 1);
  csv_row(b, arm, ni, rbuf, res);
  fprintf(stderr,
          "[round %d/%d] %-10s N=%-4d %8.0f cmd/s  p99 %s ms  tx/cmd %s  retries/cmd %s  "
          "(arm: %lld OK in %lld tx)  errors %lld  (%.1f s)\n",
          round + 1, c->cli.rounds, ARM_NAME[arm], r.N, res->m[M_CMDS_S], BENCH_NUM("%.2f", res->m[M_P99]),
          BENCH_NUM("%.3f", res->m[M_TX_CMD]), BENCH_NUM("%.2f", res->m[M_RETRY_CMD]), (long long)res->all_ok,
          (long long)res->txs, (long long)res->errors, res->wall_s);
}

static void fill_ratios(bench *b) {
  const config *c = &b->cfg;
  for (int arm = 0; arm < NARMS; arm++)
    for (int ni = 0; ni < c->nconns; ni++)
      for (int r = 0; r < c->cli.rounds; r++) {
        result *x = res_at(b, arm, ni, r), *d = res_at(b, ARM_DIRECT, ni, r);
        if (x->ran && d->ran && d->m[M_CMDS_S] > 0)
          x->m[M_RATIO] = x->m[M_CMDS_S] / d->m[M_CMDS_S];
      }
}

/* ---- summaries ------------------------------------------------------------------------ */

static bench_agg aggregate(bench *b, int arm, int ni, int metric) {
  double v[128];
  for (int r = 0; r < b->cfg.cli.rounds; r++) {
    const result *x = res_at(b, arm, ni, r);
    v[r] = x->ran ? x->m[metric] : NAN;
  }
  return bench_agg_of(v, b->cfg.cli.rounds);
}

static int64_t errors_of(bench *b, int arm, int ni) {
  int64_t e = 0;
  for (int r = 0; r < b->cfg.cli.rounds; r++)
    e += res_at(b, arm, ni, r)->errors;
  return e;
}

static void print_tables(bench *b) {
  const config *c = &b->cfg;
  printf("\n| arm | conns | cmd/s median (min–max) | ÷direct median (min–max) | p50 ms | p99 ms | tx (Raft "
         "entries) per cmd | busy retries per cmd | nodes' CPU µs per cmd | round trip ms | COMMIT ms | err "
         "|\n");
  printf("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
  for (int ni = 0; ni < c->nconns; ni++)
    for (int arm = 0; arm < NARMS; arm++) {
      if (!res_at(b, arm, ni, 0)->ran)
        continue;
      bench_agg cs = aggregate(b, arm, ni, M_CMDS_S), rt = aggregate(b, arm, ni, M_RATIO);
      char ratio[64], v[7][32];
      if (rt.n && arm != ARM_DIRECT)
        snprintf(ratio, sizeof ratio, "%.2f× (%.2f–%.2f)", rt.med, rt.lo, rt.hi);
      else
        snprintf(ratio, sizeof ratio, "–");
      bench_fmt_ms(v[0], sizeof v[0], aggregate(b, arm, ni, M_P50).med, 1);
      bench_fmt_ms(v[1], sizeof v[1], aggregate(b, arm, ni, M_P99).med, 1);
      bench_fmt(v[2], sizeof v[2], "%.3f", aggregate(b, arm, ni, M_TX_CMD).med);
      bench_fmt(v[3], sizeof v[3], "%.2f", aggregate(b, arm, ni, M_RETRY_CMD).med);
      bench_fmt(v[4], sizeof v[4], "%.0f", aggregate(b, arm, ni, M_NODE_US).med);
      bench_fmt_ms(v[5], sizeof v[5], aggregate(b, arm, ni, M_RT_MS).med, 1);
      bench_fmt_ms(v[6], sizeof v[6], aggregate(b, arm, ni, M_COMMIT_MS).med, 1);
      printf("| %s | %d | %.0f (%.0f–%.0f) | %s | %s | %s | %s | %s | %s | %s | %s | %lld |\n", ARM_NAME[arm],
             c->conns[ni], cs.med, cs.lo, cs.hi, ratio, v[0], v[1], v[2], v[3], v[4], v[5], v[6],
             (long long)errors_of(b, arm, ni));
    }
  printf(
      "\nColumns: medians over rounds. ÷direct: each round's cmd/s over the same round's direct arm at the\n"
      "same connections. Latency: one command, request to answer (direct: first attempt to COMMIT's OK,\n"
      "busy retries and their sleeps included). tx per cmd: direct 1 by construction; writer, lithd-dq:\n"
      "_lith_batches rows over commands answered OK in the arm; lithd-file: /v1/stats. nodes' CPU: the\n"
      "three lith-node processes from the arm's first connection to its last answer (warm-up and drain\n"
      "included, seeding and checking not), per command answered OK in that time. round trip, COMMIT "
      "(direct):\n"
      "the mean request of BEGIN and the four statements, and the mean COMMIT (a majority stored the\n"
      "transaction's Raft entry), over the committed transactions.\n");
  if (!c->lithd_dq && c->arms[ARM_LITHDQ])
    printf("lithd-dq: not run: %s has no --dqlite.\n", c->lithd);
  if (c->lithd_base == NULL)
    return;
  printf(
      "\nlithd-dq (%s) ÷ lithd-dq-base (%s), each round's cmd/s over the same round's, median (min–max):\n",
      c->lithd, c->lithd_base);
  for (int ni = 0; ni < c->nconns; ni++) {
    double v[128];
    for (int r = 0; r < c->cli.rounds; r++) {
      const result *x = res_at(b, ARM_LITHDQ, ni, r), *y = res_at(b, ARM_LITHDQ_BASE, ni, r);
      v[r] = x->ran && y->ran && y->m[M_CMDS_S] > 0 ? x->m[M_CMDS_S] / y->m[M_CMDS_S] : NAN;
    }
    bench_agg g = bench_agg_of(v, c->cli.rounds);
    bench_agg p = aggregate(b, ARM_LITHDQ, ni, M_P99), q = aggregate(b, ARM_LITHDQ_BASE, ni, M_P99);
    if (g.n)
      printf("  %d conns: %.2f× (%.2f–%.2f); p99 %.1f ms against %.1f ms\n", c->conns[ni], g.med, g.lo, g.hi,
             p.med, q.med);
  }
}

static void csv_summaries(bench *b) {
  const config *c = &b->cfg;
  if (!b->csv)
    return;
  for (int arm = 0; arm < NARMS; arm++)
    for (int ni = 0; ni < c->nconns; ni++) {
      if (!res_at(b, arm, ni, 0)->ran)
        continue;
      for (int w = 0; w < 3; w++) {
        result x;
        memset(&x, 0, sizeof x);
        for (int m = 0; m < NMETRIC; m++)
          x.m[m] = bench_agg_pick(aggregate(b, arm, ni, m), w);
        x.wall_s = NAN;
        x.errors = errors_of(b, arm, ni);
        csv_row(b, arm, ni, BENCH_SUMMARY[w], &x);
      }
    }
}

/* ---- options ------------------------------------------------------------------------------ */

static void usage(FILE *f) {
  fprintf(f,
          "usage: dqlite [options]   (the transfer on a 3-node dqlite cluster: per transaction vs batched)\n"
          "  --conns LIST       connection counts (default 1,16,64)\n"
          "  --arms LIST        " ARM_LIST " (default all)\n"
          "  --seconds S        measured window per cell (default 3)\n"
          "  --warmup S         warm-up before the window (default 0.5)\n"
          "  --rounds N         rounds, interleaved across cells (default 3)\n"
          "  --db-dir DIR       the nodes' data and lithd-file's database (default: a new directory under "
          "/tmp)\n"
          "  --lithd PATH       the lithd binary (default " LITHD_PATH ")\n"
          "  --lithd-base PATH  another lithd build for the lithd-dq-base arm (before/after, one run)\n"
          "  --sync full|normal lithd-file's synchronous (default full; a list of both: full)\n"
          "  --csv PATH         CSV output (default bench/results/dqlite-YYYYMMDD-HHMMSS.csv)\n"
          "  --quick            smoke run: 1 round, 1 s, warm-up 0.25 s\n"
          "  --help\n");
}

static int take_option(void *ctx, const char *a, const char *v) {
  config *c = ctx;
  if (!strcmp(a, "--conns"))
    c->nconns = bench_parse_counts(v, a, "connection", 1, MAX_CONNS, c->conns, MAX_LIST);
  else if (!strcmp(a, "--arms"))
    bench_parse_flags(v, a, ARM_NAME, NARMS, c->arms, ARM_LIST);
  else if (!strcmp(a, "--lithd"))
    c->lithd = v;
  else if (!strcmp(a, "--lithd-base"))
    c->lithd_base = v;
  else if (!strcmp(a, "--sync")) {
    static const char *const SYNC_WORD[] = {"full", "normal"};
    int v2[2], n = bench_parse_words(v, a, SYNC_WORD, NULL, 2, v2, 2, "full,normal");
    c->file_normal = n == 1 && v2[0] == 1;
  } else
    return 0;
  return 1;
}

/* Does `lithd --help` mention --dqlite? */
static int lithd_knows_dqlite(const char *lithd) {
  char cmd[1200], line[512];
  int found = 0;
  snprintf(cmd, sizeof cmd, "'%s' --help 2>&1", lithd);
  FILE *p = strchr(lithd, '\'') ? NULL : popen(cmd, "r");
  if (p == NULL)
    return 0;
  while (fgets(line, sizeof line, p))
    found |= strstr(line, "--dqlite") != NULL;
  pclose(p);
  return found;
}

int main(int argc, char **argv) {
  bench b;
  config *c = &b.cfg;
  char tmpdir[] = "/tmp/lith-bench-dqlite-XXXXXX", csv_path[4096];
  memset(&b, 0, sizeof b);
  c->cli =
      (bench_cli){.prog = "dqlite", .usage = usage, .min_seconds = 0.05, .max_rounds = 100};
  c->lithd = LITHD_PATH;
  for (int a = 0; a < NARMS; a++)
    c->arms[a] = 1;
  bench_cli_parse(&c->cli, argc, argv, take_option, c);
  if (!c->nconns) {
    static const int def[] = {1, 16, 64};
    c->nconns = bench_list_default(c->conns, def, 3, def, 3, c->cli.quick);
  }
  int64_t t_begin = bench_now_ns();
  signal(SIGPIPE, SIG_IGN);
  if ((c->arms[ARM_LITHD] || c->arms[ARM_LITHDQ]) && access(c->lithd, X_OK) != 0) {
    fprintf(stderr,
            "dqlite: cannot run %s (%s); build it (make) or pass --lithd PATH, or --arms direct,writer\n",
            c->lithd, strerror(errno));
    return 2;
  }
  c->lithd_dq = c->arms[ARM_LITHDQ] && lithd_knows_dqlite(c->lithd);
  if (c->lithd_base == NULL)
    c->arms[ARM_LITHDQ_BASE] = 0;
  else if (c->arms[ARM_LITHDQ_BASE] && !lithd_knows_dqlite(c->lithd_base)) {
    fprintf(stderr, "dqlite: %s (--lithd-base) has no --dqlite\n", c->lithd_base);
    return 2;
  }

  int own_dir = bench_db_dir(&c->cli.db_dir, tmpdir);
  b.csv = bench_csv_open(c->cli.results, "dqlite", csv_path, sizeof csv_path);
  if (b.csv)
    bench_csv_header(b.csv, "arm,conns,round", METRIC_CSV, NMETRIC, ",commands,errors,arm_wall_s\n");
  bench_machine m;
  bench_machine_get(&m);
  bench_print_intro("lith dqlite benchmark", argc, argv, 1);
  printf("machine: nproc %ld (usable %d), CPU %s, kernel %s\n", m.nproc, m.usable, m.cpu, m.kernel);
  printf("nodes' data: %s (%s); lithd: %s%s\n", c->cli.db_dir, bench_fs_name(c->cli.db_dir), c->lithd,
         c->lithd_dq ? " (with --dqlite)" : " (no --dqlite: the lithd-dq arm is left out)");
  printf("lithd-file: synchronous %s\n", c->file_normal ? "NORMAL" : "FULL");
  printf("plan: connections");
  bench_print_ints(c->conns, c->nconns);
  printf("\nplan");
  bench_print_arms_results(ARM_NAME, c->arms, NARMS, &c->cli, b.csv ? csv_path : NULL);

  int64_t t_cl = bench_now_ns();
  if (cluster_start(&b.cl, c->cli.db_dir) != 0) {
    fprintf(stderr, "dqlite: the cluster did not start\n");
    cluster_stop(&b.cl);
    return 1;
  }
  printf("cluster: %s (3 lith-node, Raft latency %d ms), up in %.1f s; %s", b.cl.all, T_NODE_LATENCY_MS,
         (double)(bench_now_ns() - t_cl) / 1e9, b.cl.node[2].line);
  fflush(stdout);

  b.res = bench_xcalloc((size_t)NARMS * (size_t)c->nconns * (size_t)c->cli.rounds, sizeof *b.res);
  for (int r = 0; r < c->cli.rounds; r++)
    for (int ni = 0; ni < c->nconns; ni++)
      for (int k = 0; k < NARMS; k++) {
        int arm = r % 2 ? NARMS - 1 - k : k;
        if (c->arms[arm] && (arm != ARM_LITHDQ || c->lithd_dq))
          run_one(&b, arm, ni, r);
      }
  cluster_stop(&b.cl);

  fill_ratios(&b);
  print_tables(&b);
  csv_summaries(&b);
  bench_csv_close(b.csv, csv_path);
  if (own_dir)
    rmdir(c->cli.db_dir);
  bench_print_end("all cells", b.total_errors, t_begin);
  free(b.res);
  return b.total_errors ? 1 : 0;
}
