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
 * Measured per cell (the results line's m, bench/results.md): commands
 * answered OK per second of the window (cmds_per_s, the rate), the latency
 * of each (p50, p99; direct: from the first attempt to COMMIT's OK, retries
 * and their sleeps included), transactions per command (= Raft entries per
 * command: dqlite replicates a transaction's pages as one entry at COMMIT;
 * direct commits one per transfer and a transaction refused busy wrote
 * nothing; writer and lithd-dq: the rows in the writer's _lith_batches, one
 * per committed batch, over the commands answered OK in the whole arm;
 * lithd-file: GET /v1/stats), busy retries per command, and the three nodes'
 * CPU per command (/proc, from the arm's first connection to its last
 * answer, per command answered OK in that time). Direct also times its own
 * requests (the mean of BEGIN and the four statements, and the mean
 * COMMIT): where a transaction's time goes, without a profiler. The
 * batching arms (writer, lithd-dq, lithd-dq-base) also carry Little's law's
 * bound, connections over the Raft commit latency (little_bound, at
 * probe_commit: why that latency, there). The tables divide each round's
 * figure by direct's (and by the bound) in the same round and cell; the
 * results leave those ratios to the report, which pairs rounds itself.
 *
 * Dimensions: conns (the results' n), and lithd-file's synchronous (--sync,
 * one value: FULL unless normal alone is given), which the other arms,
 * with no synchronous of their own, leave out (their sync is null).
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
 * Rounds interleave (bench/harness.h, BENCH_ALTERNATE): round r runs every
 * arm of every cell before round r+1, odd rounds in the reverse arm order.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "client.h"
#include "common.h"
#include "harness.h"
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

enum {
  MAX_LIST = 16,
  MAX_CONNS = 1024,
  MAX_ROUNDS = 100,
  PROBE_TXS = 30, /* commits timed for the Raft commit latency */
  SQLITE_BUSY_ = 5,
  SQLITE_LOCKED_ = 6
};

enum { SYNC_FULL, SYNC_NORMAL };
static const char *sync_name(int s) { return s == SYNC_NORMAL ? "NORMAL" : "FULL"; }

typedef struct config {
  bench_cli cli; /* --seconds, --warmup, --rounds, --db-dir, --results, --quick */
  int conns[MAX_LIST], nconns;
  int arms[NARMS];   /* the arms asked for */
  int arm_on[NARMS]; /* ...and run: lithd-dq only with a lithd that knows --dqlite */
  const char *lithd;
  const char *lithd_base; /* --lithd-base: another lithd build, the lithd-dq-base arm; NULL: none */
  int lithd_dq;           /* the lithd given knows --dqlite */
  int file_sync;          /* lithd-file's synchronous: SYNC_NORMAL (--sync normal), else SYNC_FULL */
} config;

typedef struct cluster {
  t_node node[3];
  char all[256]; /* their addresses, comma-separated */
} cluster;

/* The plan's ctx. */
typedef struct dqbench {
  config cfg;
  cluster cl;
} dqbench;

/* ---- metrics and dimensions ----------------------------------------------------- */

enum {
  M_CMDS_S,    /* commands answered OK per second of the window */
  M_P50,       /* ms */
  M_P99,       /* ms */
  M_TX_CMD,    /* transactions (Raft entries) per command */
  M_RETRY_CMD, /* direct: busy retries per command answered OK */
  M_NODE_US,   /* the three nodes' CPU µs per command answered OK, whole arm */
  M_RT_MS,     /* direct: mean round trip of BEGIN and the four statements, ms */
  M_COMMIT_MS, /* direct: mean COMMIT (Raft: a majority stored the entry), ms */
  M_PROBE_MS,  /* batching arms: the Raft commit latency before the window (probe_commit), ms */
  M_LITTLE,    /* batching arms: Little's law's bound, conns / M_PROBE_MS, commands/s */
  M_COMMANDS,  /* commands answered OK inside the window */
  M_ALL_OK,    /* ...in the whole arm */
  M_TXS,       /* dqlite arms: transactions committed in the arm, seeding not counted */
  NMETRIC
};
static const bench_metric METRICS[NMETRIC] = {
    {"cmds_per_s", BENCH_ROLE_RATE},
    {"p50_ms", BENCH_ROLE_P50},
    {"p99_ms", BENCH_ROLE_P99},
    {"tx_per_cmd", BENCH_ROLE_NONE},
    {"retries_per_cmd", BENCH_ROLE_NONE},
    {"node_cpu_us_per_cmd", BENCH_ROLE_CPU_US},
    {"rt_ms", BENCH_ROLE_NONE},
    {"commit_ms", BENCH_ROLE_NONE},
    {"probe_commit_ms", BENCH_ROLE_NONE},
    {"little_bound", BENCH_ROLE_NONE},
    {"commands", BENCH_ROLE_NONE},
    {"commands_all", BENCH_ROLE_NONE},
    {"txs", BENCH_ROLE_NONE},
};

enum { D_CONNS, D_SYNC, NDIM };

/* Only lithd-file has a synchronous of its own. */
static unsigned arm_ignores(int arm) { return arm == ARM_LITHD ? 0u : 1u << D_SYNC; }

static int batching(int arm) { return arm == ARM_WRITER || arm == ARM_LITHDQ || arm == ARM_LITHDQ_BASE; }

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
  bench_cell *cell; /* its m[] and errors: the result */
};

#define report_error(r, ...) bench_cell_error((r)->cell, __VA_ARGS__)

static void say_error(void *ctx, const char *msg) { report_error((run *)ctx, "%s", msg); }

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

/* The Raft commit latency, for Little's law's bound (M_LITTLE): rate =
 * commands in flight / the time each takes. With N connections, each with
 * one command in flight, a batching arm answers at most N commands per
 * batch, and a batch takes at least its COMMIT: one request whose answer
 * waits for a majority to store the batch's entry. So N / COMMIT's latency
 * is the rate if every connection's command rode in a batch that cost one
 * Raft commit and nothing else. Which latency (the notes' "cost per command
 * and per batch", bench/notes/dqlite-2026-12-01-cost-per-command.md):
 *   - not rt_ms, a statement's round trip: that is what a batch spends
 *     besides Raft (5 per command, 5k + 1 for a batch of k), the cost the
 *     bound leaves out so that the ratio shows it;
 *   - COMMIT's, as direct's commit_ms times it (request to answer), but not
 *     direct's figure: at 16 and 64 connections it includes the refused
 *     connections' requests competing for the leader's one thread (3.5 ms
 *     at one connection, 3.9-5.4 at 16 and 64), which the writer's one
 *     connection does not meet; and direct runs after this arm in odd
 *     rounds, while the results line is written as the arm ends.
 * So each batching arm measures it on its freshly seeded database, just
 * before its window, with nothing else running: PROBE_TXS transactions of
 * one INSERT into a table of the probe's own (a page written: one Raft
 * entry; the check reads only the transfer's tables), each COMMIT timed.
 * Their mean, ms, as direct's commit_ms: Little's law is a law of means
 * (a stall of 40 ms is part of what the commits cost); NAN when a request
 * failed (reported). */
static double probe_commit_ms(run *r) {
  uint32_t db;
  double sum = 0;
  char sql[120];
  int n = 0, rc;
  lith__dq_conn *c = leader_open(r, &db);
  if (c == NULL)
    return NAN;
  rc = lith__dq_exec_sql(c, db, "CREATE TABLE bench_probe(k INTEGER PRIMARY KEY, v INTEGER)", NULL, 0, NULL);
  for (; rc == LITH_DQ_OK && n < PROBE_TXS; n++) {
    snprintf(sql, sizeof sql, "INSERT INTO bench_probe(v) VALUES (%d)", n);
    rc = lith__dq_exec_sql(c, db, "BEGIN", NULL, 0, NULL);
    if (rc == LITH_DQ_OK)
      rc = lith__dq_exec_sql(c, db, sql, NULL, 0, NULL);
    int64_t t0 = bench_now_ns();
    if (rc == LITH_DQ_OK)
      rc = lith__dq_exec_sql(c, db, "COMMIT", NULL, 0, NULL);
    sum += (double)(bench_now_ns() - t0) / 1e6;
  }
  if (rc != LITH_DQ_OK)
    report_error(r, "timing COMMIT: %s: %s", lith__dq_rc_str(rc), lith__dq_errmsg(c));
  lith__dq_close(c);
  return rc == LITH_DQ_OK ? sum / n : NAN;
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

/* N threads running fn until the window's end; ok[i] what thread i was
 * answered OK. */
static void arm_threads(run *r, bench_cell *res, void *(*fn)(void *), int64_t *ok) {
  const config *cfg = r->cfg;
  int started = 0;
  bench_lat **bufs = bench_xcalloc((size_t)r->N, sizeof *bufs);
  int64_t retries = 0, all_ok = 0, win_ok = 0, txs = 0, stmt_ns = 0, commit_ns = 0;
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
    win_ok += r->wk[i].win_ok;
    retries += r->wk[i].retries;
    txs += r->wk[i].txs;
    stmt_ns += r->wk[i].stmt_ns;
    commit_ns += r->wk[i].commit_ns;
  }
  if (txs) {
    res->m[M_RT_MS] = (double)stmt_ns / (double)txs / 5 / 1e6;
    res->m[M_COMMIT_MS] = (double)commit_ns / (double)txs / 1e6;
  }
  res->m[M_COMMANDS] = (double)win_ok;
  res->m[M_CMDS_S] = (double)win_ok / cfg->cli.seconds;
  if (all_ok && fn == direct_main)
    res->m[M_RETRY_CMD] = (double)retries / (double)all_ok;
  bench_cell_latency(r->cell, bufs, r->N, M_P50, M_P99, -1);
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

static void arm_writer(run *r, bench_cell *res, int64_t *ok) {
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

static void arm_http(run *r, bench_cell *res, int64_t *ok) {
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
    argv[a++] = cfg->file_sync == SYNC_NORMAL ? "normal" : "full";
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
    res->m[M_COMMANDS] = (double)cl.win_ok;
    res->m[M_CMDS_S] = (double)cl.win_ok / cfg->cli.seconds;
    if (nstats)
      res->m[M_TX_CMD] = 1.0 / bench_th_cmds_per_tx(&cl);
    bench_lat *bufs[1] = {&cl.lat};
    bench_cell_latency(r->cell, bufs, 1, M_P50, M_P99, -1);
  }
  bench_th_free(&cl);
  unlink(log);
}

/* ---- one cell: the harness's callback ------------------------------------------------ */

static void run_cell(bench_cell *cell) {
  dqbench *b = cell->ctx;
  const config *c = &b->cfg;
  run *r = bench_xcalloc(1, sizeof *r);
  r->cfg = c;
  r->cl = &b->cl;
  r->arm = cell->arm;
  r->N = cell->val[D_CONNS];
  r->round = cell->round;
  r->cell = cell;
  snprintf(r->name, sizeof r->name, "%s-n%d-r%d", ARM_NAME[r->arm], r->N, r->round + 1);
  int64_t *ok = bench_xcalloc((size_t)r->N, sizeof *ok);
  if (r->arm == ARM_LITHD) {
    bench_pragmas p = pragmas_full();
    p.full = c->file_sync == SYNC_FULL;
    snprintf(r->path, sizeof r->path, "%s/lithd-n%d-r%d.db", c->cli.db_dir, r->N, r->round + 1);
    if (bench_transfer_create(r->path, r->N, &p) != 0) {
      report_error(r, "cannot create %s", r->path);
      cell->errors++;
    } else {
      arm_http(r, cell, ok);
      cell->errors += bench_transfer_check(r->path, r->N, ok, &p, "connection", say_error, r);
    }
    bench_remove_db(r->path);
  } else if (dq_seed(r) != 0) {
    cell->errors++;
  } else {
    if (batching(r->arm)) {
      cell->m[M_PROBE_MS] = probe_commit_ms(r);
      cell->m[M_LITTLE] = r->N / cell->m[M_PROBE_MS] * 1e3;
      cell->errors += isnan(cell->m[M_PROBE_MS]);
    }
    double cpu0 = nodes_cpu_s(r->cl);
    if (r->arm == ARM_DIRECT)
      arm_threads(r, cell, direct_main, ok);
    else if (r->arm == ARM_WRITER)
      arm_writer(r, cell, ok);
    else
      arm_http(r, cell, ok);
    double cpu1 = nodes_cpu_s(r->cl);
    int64_t all_ok = sum_of(ok, r->N);
    if (all_ok > 0)
      cell->m[M_NODE_US] = (cpu1 - cpu0) / (double)all_ok * 1e6;
    /* direct: each OK its own transaction (one refused busy wrote nothing) */
    int64_t txs = r->arm == ARM_DIRECT ? all_ok : dq_batches(r);
    if (txs < 0) {
      cell->errors++;
    } else {
      cell->m[M_TXS] = (double)txs;
      if (all_ok > 0)
        cell->m[M_TX_CMD] = (double)txs / (double)all_ok;
    }
    cell->errors += dq_check(r, ok);
  }
  cell->m[M_ALL_OK] = (double)sum_of(ok, r->N);
  free(ok);
  free(r);
}

/* ---- the tables ------------------------------------------------------------------------ */

/* The ratios' column: bench_fmt_ratio into buf, returned (a printf argument). */
static const char *range_x(char *buf, size_t n, bench_agg g) {
  bench_fmt_ratio(buf, n, g);
  return buf;
}

static void print_tables(const bench_harness *h, const config *c) {
  printf("\n| arm | conns | cmd/s median (min–max) | ÷direct median (min–max) | p50 ms | p99 ms | tx (Raft "
         "entries) per cmd | busy retries per cmd | nodes' CPU µs per cmd | round trip ms | COMMIT ms | err "
         "|\n");
  printf("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
  for (int ni = 0; ni < c->nconns; ni++)
    for (int arm = 0; arm < NARMS; arm++) {
      int idx[NDIM] = {ni, 0};
      if (!bench_harness_ran(h, arm, idx))
        continue;
      bench_agg cs = bench_harness_agg(h, arm, idx, M_CMDS_S);
      char ratio[64], v[7][32];
      if (arm != ARM_DIRECT)
        range_x(ratio, sizeof ratio, bench_harness_paired(h, idx, arm, M_CMDS_S, ARM_DIRECT, M_CMDS_S));
      else
        snprintf(ratio, sizeof ratio, "–");
      bench_fmt_ms(v[0], sizeof v[0], bench_harness_agg(h, arm, idx, M_P50).med, 1);
      bench_fmt_ms(v[1], sizeof v[1], bench_harness_agg(h, arm, idx, M_P99).med, 1);
      bench_fmt(v[2], sizeof v[2], "%.3f", bench_harness_agg(h, arm, idx, M_TX_CMD).med);
      bench_fmt(v[3], sizeof v[3], "%.2f", bench_harness_agg(h, arm, idx, M_RETRY_CMD).med);
      bench_fmt(v[4], sizeof v[4], "%.0f", bench_harness_agg(h, arm, idx, M_NODE_US).med);
      bench_fmt_ms(v[5], sizeof v[5], bench_harness_agg(h, arm, idx, M_RT_MS).med, 1);
      bench_fmt_ms(v[6], sizeof v[6], bench_harness_agg(h, arm, idx, M_COMMIT_MS).med, 1);
      printf("| %s | %d | %.0f (%.0f–%.0f) | %s | %s | %s | %s | %s | %s | %s | %s | %lld |\n", ARM_NAME[arm],
             c->conns[ni], cs.med, cs.lo, cs.hi, ratio, v[0], v[1], v[2], v[3], v[4], v[5], v[6],
             (long long)bench_harness_errors(h, arm, idx));
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

  printf("\n### Little's law: the batching arms against connections ÷ the Raft commit latency\n\n");
  printf("| arm | conns | cmd/s | Raft commit ms | bound cmd/s | ÷bound median (min–max) |\n");
  printf("|---|--:|--:|--:|--:|--:|\n");
  for (int ni = 0; ni < c->nconns; ni++)
    for (int arm = 0; arm < NARMS; arm++) {
      int idx[NDIM] = {ni, 0};
      char ratio[64], ms[32];
      if (!batching(arm) || !bench_harness_ran(h, arm, idx))
        continue;
      bench_fmt_ms(ms, sizeof ms, bench_harness_agg(h, arm, idx, M_PROBE_MS).med, 1);
      printf("| %s | %d | %s | %s | %s | %s |\n", ARM_NAME[arm], c->conns[ni],
             BENCH_NUM("%.0f", bench_harness_agg(h, arm, idx, M_CMDS_S).med), ms,
             BENCH_NUM("%.0f", bench_harness_agg(h, arm, idx, M_LITTLE).med),
             range_x(ratio, sizeof ratio, bench_harness_paired(h, idx, arm, M_CMDS_S, arm, M_LITTLE)));
    }
  printf("\nRaft commit: the mean of %d COMMITs (request to answer) of one-row transactions on the\n"
         "arm's database just before its window, nothing else running; bound: conns over it, the rate if\n"
         "every connection's command rode in a batch that cost one Raft commit. ÷bound: each round's cmd/s\n"
         "over its own bound. What a batch spends besides: 5 round trips per command and 1 per batch.\n",
         PROBE_TXS);

  if (c->lithd_base == NULL)
    return;
  printf(
      "\nlithd-dq (%s) ÷ lithd-dq-base (%s), each round's cmd/s over the same round's, median (min–max):\n",
      c->lithd, c->lithd_base);
  for (int ni = 0; ni < c->nconns; ni++) {
    int idx[NDIM] = {ni, 0};
    bench_agg g = bench_harness_paired(h, idx, ARM_LITHDQ, M_CMDS_S, ARM_LITHDQ_BASE, M_CMDS_S);
    bench_agg p = bench_harness_agg(h, ARM_LITHDQ, idx, M_P99),
              q = bench_harness_agg(h, ARM_LITHDQ_BASE, idx, M_P99);
    if (g.n) {
      char ratio[64];
      printf("  %d conns: %s; p99 %.1f ms against %.1f ms\n", c->conns[ni], range_x(ratio, sizeof ratio, g),
             p.med, q.med);
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
          "  --results PATH     the results file (default bench/results/dqlite-YYYYMMDD-HHMMSS.jsonl)\n"
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
    c->file_sync = n == 1 && v2[0] == 1 ? SYNC_NORMAL : SYNC_FULL;
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

static void print_header(const config *c, const char *path) {
  bench_machine m;
  bench_machine_get(&m);
  bench_print_intro("lith dqlite benchmark", c->cli.argc, c->cli.argv, 1);
  printf("machine: nproc %ld (usable %d), CPU %s, kernel %s\n", m.nproc, m.usable, m.cpu, m.kernel);
  printf("nodes' data: %s (%s); lithd: %s%s\n", c->cli.db_dir, bench_fs_name(c->cli.db_dir), c->lithd,
         c->lithd_dq ? " (with --dqlite)" : " (no --dqlite: the lithd-dq arm is left out)");
  printf("lithd-file: synchronous %s\n", sync_name(c->file_sync));
  printf("plan: connections");
  bench_print_ints(c->conns, c->nconns);
  printf("\nplan");
  bench_print_arms_results(ARM_NAME, c->arms, NARMS, &c->cli, path);
}

/* The header, then the cluster the runs share: it starts once the plan is
 * printed. When it cannot start there is nothing to run: the process ends. */
static void start(void *ctx, const char *path) {
  dqbench *b = ctx;
  print_header(&b->cfg, path);
  int64_t t_cl = bench_now_ns();
  if (cluster_start(&b->cl, b->cfg.cli.db_dir) != 0) {
    fprintf(stderr, "dqlite: the cluster did not start\n");
    cluster_stop(&b->cl);
    exit(1);
  }
  printf("cluster: %s (3 lith-node, Raft latency %d ms), up in %.1f s; %s", b->cl.all, T_NODE_LATENCY_MS,
         (double)(bench_now_ns() - t_cl) / 1e9, b->cl.node[2].line);
  fflush(stdout);
}

/* Every run done: the cluster stopped, the tables. */
static void finish(const bench_harness *h, void *ctx) {
  dqbench *b = ctx;
  cluster_stop(&b->cl);
  print_tables(h, &b->cfg);
}

int main(int argc, char **argv) {
  static dqbench b;
  config *c = &b.cfg;
  char tmpdir[] = "/tmp/lith-bench-dqlite-XXXXXX";
  c->cli = (bench_cli){.prog = "dqlite", .usage = usage, .min_seconds = 0.05, .max_rounds = MAX_ROUNDS};
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
  if (c->arms[ARM_LITHD] || c->arms[ARM_LITHDQ])
    bench_need_exec(c->lithd, "build it (make) or pass --lithd PATH, or --arms direct,writer");
  c->lithd_dq = c->arms[ARM_LITHDQ] && lithd_knows_dqlite(c->lithd);
  if (c->lithd_base == NULL)
    c->arms[ARM_LITHDQ_BASE] = 0;
  else if (c->arms[ARM_LITHDQ_BASE] && !lithd_knows_dqlite(c->lithd_base)) {
    fprintf(stderr, "dqlite: %s (--lithd-base) has no --dqlite\n", c->lithd_base);
    return 2;
  }
  for (int a = 0; a < NARMS; a++)
    c->arm_on[a] = c->arms[a] && (a != ARM_LITHDQ || c->lithd_dq);

  int own_dir = bench_db_dir(&c->cli.db_dir, tmpdir);
  bench_plan plan = {.program = "dqlite",
                     .workload = "transfer",
                     BENCH_PLAN_ARMS(ARM_NAME),
                     .arm_on = c->arm_on,
                     .ndims = NDIM,
                     .dim_n = D_CONNS,
                     .dim_sync = D_SYNC,
                     BENCH_PLAN_METRICS(METRICS),
                     .flags = BENCH_ALTERNATE,
                     .ignores = arm_ignores,
                     .run = run_cell,
                     .ctx = &b,
                     .cli = &c->cli};
  bench_plan_dim(&plan, D_CONNS, "conns", NULL, c->conns, c->nconns);
  bench_plan_dim(&plan, D_SYNC, "sync", sync_name, &c->file_sync, 1);
  /* Round r runs every arm of every cell before round r+1; odd rounds in reverse arm order. */
  int64_t errors = bench_harness_main(&plan, start, finish);
  return bench_finish("all cells", errors, t_begin, own_dir, c->cli.db_dir);
}
