/*
 * bench/growth — how the writer's cost grows as the database grows, beside
 * what people do without a writer, at the same sizes in the same run.
 *
 * Why: bench/writer measures on a fresh database of a few pages, where every
 * page is in the cache and a checkpoint copies little. Real databases grow
 * to gigabytes: B-trees get deeper, an index on random keys puts each new
 * entry on a page anywhere in it, checkpoints write pages scattered over the
 * file. This asks whether batching still pays there, how commit and
 * checkpoint times move, and what cache_size and mmap_size change.
 *
 * Workloads (--workloads), each on a database of its own, one after the
 * other (the first is removed before the second is created, so the disk
 * holds one at a time):
 *   transfer  bench/transfer.h's transfer, as bench/writer runs it: producer
 *             p owns accounts 10p..10p+9 and topic p. The fill adds owners
 *             after the producers, each with 10 accounts, a topic and
 *             FILL_LEDGER_PER ledger rows: more accounts, a longer ledger.
 *             The measured commands still touch the producers' accounts and
 *             append at the ledger's end: a workload whose hot pages do not
 *             grow with the file.
 *   insert    items(id INTEGER PRIMARY KEY, k INTEGER, payload BLOB), an
 *             index on k; a command inserts one row with a random 64-bit k
 *             and PAYLOAD random bytes. The rows append, but each index entry
 *             lands on a random leaf: the hot pages are the whole index.
 *
 * Arms, on the same file at the same size, one after the other (their order
 * alternating by round, so neither always gets the warmer OS cache):
 *   lith     lith_open with lith's defaults but synchronous, cache_size_kib
 *            and mmap_size (checkpoint WRITER; readers 1), P threads calling
 *            lith_do: bench/writer's writer arm.
 *   perconn  P threads, each with its own connection (busy_timeout 30 s as
 *            its busy handler), BEGIN IMMEDIATE, the command, COMMIT:
 *            bench/writer's perconn arm, with the same pragmas (synchronous,
 *            cache_size, mmap_size). Its autocheckpoint is a wal hook doing
 *            what SQLite's own does (a PASSIVE checkpoint once the WAL holds
 *            1000 pages, lith's checkpoint_pages), so that it can be timed.
 *
 * Growth. Steps are sizes of the main file in MB (2^20 bytes): 0 (the schema
 * and the producers' rows), then 64 doubling up to --target-mb (default
 * 4096, --quick 256), or --steps. The target is capped at 40% of the free
 * space of the databases' filesystem. Between steps the file is grown by bulk
 * inserts of the workload's shape on one connection with synchronous=OFF, in
 * transactions of at most FILL_CHUNK_MB, then a TRUNCATE checkpoint (so the
 * main file's size says what it holds). The insert workload's fill sorts the
 * keys of a transaction first: the index is then walked once per
 * transaction, not once per row. The fill is not measured. At each step
 * every round runs each synchronous and each arm (round r before r+1, as in
 * bench/writer): --warmup, then a window of --seconds.
 *
 * At the largest size, every (cache, mmap) of --cache-kib x --mmap-mb, for
 * both arms and every synchronous: what the two settings change. The growth
 * tables use the first of each list (by default lith's: 16 MiB, 0); the
 * settings table's first row is the largest step's, measured once.
 *
 * Per arm run: db MB (the main file before the arm), cmd/s (answered OK in
 * the window), cmd/tx (lith: lith_stats commands / batches over the window;
 * perconn 1), tx p50/p99 (lith: its histogram of BEGIN..end of COMMIT, a
 * bucket's upper bound; perconn: from BEGIN IMMEDIATE's return, as in
 * bench/writer), commit ms (the COMMIT statement alone, mean; perconn's
 * includes the checkpoints its wal hook runs, which SQLite runs inside
 * COMMIT), checkpoints that ended in the window, their mean, and the share
 * of the window spent checkpointing (lith: lith_stats, which adds a
 * checkpoint's time when it ends; perconn: the hook, the checkpoints that
 * ran, clipped to the window), the -wal file's size at the window's end
 * (stat), and call p50/p99/max (lith_do, or one command with its wait for
 * the lock). ÷conn: lith's median cmd/s over perconn's in the same step and
 * synchronous.
 *
 * Checks after each arm, by counts (a quick_check would read gigabytes each
 * time; bench/writer runs one): the rows with ids above the largest before
 * the arm are the commands answered OK, per producer for the transfer, whose
 * topic versions grew by the same and whose producers' money is conserved.
 * A mismatch or a failed call is an error; the exit status is 1 after one.
 *
 * Results (bench/harness.h, bench/results.md): a line per arm run. Its cell
 * is the workload, step_mb, cache_kib, mmap_mb and producers (one value),
 * its sync the synchronous: every measured place is one cell, the settings
 * at the largest step among them. The results' one "workload" string is
 * "growth"; which of the two ran is the cell's "workload". n is null: the
 * producer count is fixed, and the report's charts are against n, where
 * this program's axis is the size. The database grows between cells, so
 * the order is this program's own (bench_harness_run_one), not
 * bench_harness_run_all's.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <sqlite3.h>

#include "common.h"
#include "harness.h"
#include "lith.h"
#include "transfer.h"
#include "transfer_lith.h"

#define MIB 1048576.0

/* ---- the workloads --------------------------------------------------------------- */

enum { WL_TRANSFER, WL_INSERT, NWL };
static const char *const WL_NAME[NWL] = {"transfer", "insert"};

enum { PAYLOAD = 100 };
static const char ITEMS_SCHEMA[] =
    "CREATE TABLE items(id INTEGER PRIMARY KEY, k INTEGER NOT NULL, payload BLOB NOT NULL);"
    "CREATE INDEX items_k ON items(k);";
#define SQL_ITEM "INSERT INTO items(k, payload) VALUES (?, ?)"

typedef struct item {
  int64_t k;
  unsigned char payload[PAYLOAD];
} item;

static void item_make(item *it, uint64_t *rng) {
  uint64_t k = bench_rng_next(rng);
  memcpy(&it->k, &k, sizeof k); /* all 64 bits, negative keys too */
  for (int i = 0; i < PAYLOAD; i += 8) {
    uint64_t x = bench_rng_next(rng);
    memcpy(it->payload + i, &x, PAYLOAD - i < 8 ? (size_t)(PAYLOAD - i) : sizeof x);
  }
}

/* The insert workload's lith command: arg is a const item *. */
static int item_cmd(lith_tx *tx, void *arg) {
  const item *it = arg;
  return lith_tx_exec(tx, SQL_ITEM, "Ib", it->k, (const void *)it->payload, (size_t)PAYLOAD);
}

/* ---- configuration ---------------------------------------------------------------- */

enum { ARM_LITH, ARM_CONN, NARMS };
static const char *const ARM_NAME[NARMS] = {"lith", "perconn"};

enum {
  MAX_STEPS = BENCH_MAXVALS, /* a dimension's values */
  MAX_LIST = 8,
  CKPT_PAGES = 1000,    /* SQLite's autocheckpoint and lith's checkpoint_pages */
  FILL_LEDGER_PER = 40, /* ledger rows of each owner the fill adds */
  FILL_CACHE_KIB = 262144,
  FILL_CHUNK_MB = 512, /* the fill's largest transaction: bounds its WAL */
  FIRST_STEP_MB = 64,
  DEFAULT_TARGET_MB = 4096,
  QUICK_TARGET_MB = 256
};

typedef struct config {
  bench_cli cli; /* --seconds, --warmup, --rounds, --db-dir, --results, --quick */
  int producers;
  int sync[2], nsync; /* LITH_SYNC_* */
  int wl[NWL], nwl;
  int steps[MAX_STEPS + 1], nsteps; /* MB */
  int steps_given;
  int target_mb, target_asked, capped;
  double free_mb;
  int cache[MAX_LIST], ncache; /* KiB */
  int mmap[MAX_LIST], nmmap;   /* MB */
} config;

static const char *sync_name(int s) { return s == LITH_SYNC_FULL ? "FULL" : "NORMAL"; }
static const char *wl_name(int w) { return WL_NAME[w]; }

/* The settings table's combinations: cache-major. */
static int nsettings(const config *c) { return c->ncache * c->nmmap; }
static int setting_cache(const config *c, int s) { return c->cache[s / c->nmmap]; }
static int setting_mmap(const config *c, int s) { return c->mmap[s % c->nmmap]; }

/* ---- metrics and cells ------------------------------------------------------------ */

enum {
  M_DB_MB,   /* the main file before the arm */
  M_CMDS_S,  /* commands answered OK per second of the window */
  M_CMDS_TX, /* commands per transaction */
  M_TX_P50,
  M_TX_P99,
  M_COMMIT_MS, /* the COMMIT statement, mean */
  M_CKPTS,     /* checkpoints in the window */
  M_CKPT_MS,   /* their mean */
  M_CKPT_SHARE,
  M_WAL_MB, /* the -wal file at the window's end */
  M_CALL_P50,
  M_CALL_P99,
  M_CALL_MAX,
  M_COMMANDS, /* commands answered OK inside the window */
  NMETRIC
};
static const bench_metric METRICS[NMETRIC] = {
    {"db_mb", BENCH_ROLE_NONE},
    {"cmds_per_s", BENCH_ROLE_RATE},
    {"cmds_per_tx", BENCH_ROLE_NONE},
    {"tx_p50_ms", BENCH_ROLE_NONE},
    {"tx_p99_ms", BENCH_ROLE_NONE},
    {"commit_ms_mean", BENCH_ROLE_NONE},
    {"checkpoints", BENCH_ROLE_NONE},
    {"checkpoint_ms_mean", BENCH_ROLE_NONE},
    {"checkpoint_share", BENCH_ROLE_NONE},
    {"wal_mb", BENCH_ROLE_NONE},
    {"call_p50_ms", BENCH_ROLE_P50},
    {"call_p99_ms", BENCH_ROLE_P99},
    {"call_max_ms", BENCH_ROLE_NONE},
    {"commands", BENCH_ROLE_NONE},
};

/* The cell's dimensions (the top says why these). A growth step is (step,
 * the first cache, the first mmap); a setting is (the largest step, cache,
 * mmap). */
enum { D_WL, D_STEP, D_CACHE, D_MMAP, D_PRODUCERS, D_SYNC, NDIM };

/* ---- one arm run ---------------------------------------------------------------------- */

typedef struct run run;

typedef struct producer {
  run *r;
  int id;
  pthread_t th;
  int started;
  uint64_t rng;
  int64_t seq;
  bench_calls n;  /* calls answered, failed, in the window, their latency */
  int64_t ws, we; /* the window, for the wal hook */
  bench_lat tx;
  uint64_t commits, commit_ns; /* perconn: COMMIT statements in the window */
  uint64_t ckpts, ckpt_ns;     /* perconn: checkpoints that ended in the window */
  uint64_t ckpt_in_ns;         /* perconn: checkpointing inside the window */
  sqlite3 *conn;               /* perconn */
  bench_stmts st;              /* perconn: the transfer's, or begin/commit/rollback */
  sqlite3_stmt *ins;           /* perconn, insert workload */
} producer;

struct run {
  const config *cfg;
  int wl, arm, sync, P, round, cache_kib, mmap_mb;
  const char *path;
  bench_gate gate; /* the start gate and the window */
  lith *db;
  producer *prod;
  bench_cell *cell; /* its m[] and errors: the result */
};

#define report_error(r, ...) bench_cell_error((r)->cell, __VA_ARGS__)

/* What lith gives its writer, with this run's synchronous, cache and mmap. */
static bench_pragmas pragmas(int sync, int cache_kib, int mmap_mb) {
  lith_options d;
  lith_options_default(&d);
  bench_pragmas p = {sync == LITH_SYNC_FULL, cache_kib, (long long)mmap_mb * 1048576, d.foreign_keys};
  return p;
}

/* The checks' connection: lith's defaults. */
static int open_check(const char *path, sqlite3 **conn) {
  lith_options d;
  lith_options_default(&d);
  bench_pragmas p = pragmas(LITH_SYNC_NORMAL, d.cache_size_kib, 0);
  return bench_open_plain(path, &p, 30000, conn);
}

static double file_mb(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (double)st.st_size / MIB : 0;
}

static double wal_mb(const char *path) {
  char p[4200];
  snprintf(p, sizeof p, "%s-wal", path);
  return file_mb(p);
}

/* ---- producer threads ------------------------------------------------------------------- */

static void *lith_producer(void *arg) {
  producer *pr = arg;
  run *r = pr->r;
  int64_t ws, we;
  bench_gate_wait(&r->gate, &ws, &we);
  for (;;) {
    bench_transfer t;
    item it;
    lith_command fn = bench_transfer_cmd;
    void *a = &t;
    if (r->wl == WL_TRANSFER) {
      t = bench_transfer_make(pr->id, ++pr->seq, &pr->rng);
    } else {
      item_make(&it, &pr->rng);
      fn = item_cmd;
      a = &it;
    }
    if (bench_now_ns() >= we)
      break;
    int rc = bench_lith_do(r->db, fn, a, ws, we, &pr->n);
    if (rc != LITH_OK)
      report_error(r, "lith_do: %s: %s", lith_errstr(rc), lith_errmsg(r->db));
  }
  return NULL;
}

/* SQLite's default wal hook (sqlite3_wal_autocheckpoint), timed: a PASSIVE
 * checkpoint once the WAL holds CKPT_PAGES. Only those that ran count: a
 * PASSIVE one finding another connection's under way returns SQLITE_BUSY at
 * once, having done nothing. */
static int conn_wal_hook(void *ctx, sqlite3 *db, const char *name, int pages) {
  producer *pr = ctx;
  if (pages < CKPT_PAGES)
    return SQLITE_OK;
  int64_t t0 = bench_now_ns();
  int rc = sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
  int64_t t1 = bench_now_ns();
  if (rc != SQLITE_OK)
    return SQLITE_OK;
  if (t1 >= pr->ws && t1 < pr->we) {
    pr->ckpts++;
    pr->ckpt_ns += (uint64_t)(t1 - t0);
  }
  /* the share: only the part inside the window (one begun in the warm-up
   * would otherwise count whole) */
  int64_t a = t0 > pr->ws ? t0 : pr->ws, z = t1 < pr->we ? t1 : pr->we;
  if (z > a)
    pr->ckpt_in_ns += (uint64_t)(z - a);
  return SQLITE_OK;
}

static int prepare(sqlite3 *conn, const char *sql, sqlite3_stmt **st) {
  return sqlite3_prepare_v3(conn, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL);
}

/* The producer's connection and statements: 0, or -1. */
static int conn_open(producer *pr) {
  run *r = pr->r;
  bench_pragmas p = pragmas(r->sync, r->cache_kib, r->mmap_mb);
  memset(&pr->st, 0, sizeof pr->st);
  if (bench_open_plain(r->path, &p, 30000, &pr->conn) != SQLITE_OK)
    return -1;
  /* replaces bench_open_plain's sqlite3_wal_autocheckpoint, itself a wal hook */
  sqlite3_wal_hook(pr->conn, conn_wal_hook, pr);
  if (r->wl == WL_TRANSFER)
    return bench_stmts_prepare(pr->conn, &pr->st) == SQLITE_OK ? 0 : -1;
  if (prepare(pr->conn, "BEGIN IMMEDIATE", &pr->st.begin) != SQLITE_OK ||
      prepare(pr->conn, "COMMIT", &pr->st.commit) != SQLITE_OK ||
      prepare(pr->conn, "ROLLBACK", &pr->st.rollback) != SQLITE_OK ||
      prepare(pr->conn, SQL_ITEM, &pr->ins) != SQLITE_OK)
    return -1;
  return 0;
}

/* The command's statements, inside the transaction: SQLITE_OK, BENCH_REFUSED
 * or the error. */
static int conn_command(producer *pr) {
  if (pr->r->wl == WL_TRANSFER) {
    bench_transfer t = bench_transfer_make(pr->id, ++pr->seq, &pr->rng);
    return bench_transfer_sql(&pr->st, &t, 1);
  }
  item it;
  item_make(&it, &pr->rng);
  sqlite3_bind_int64(pr->ins, 1, it.k);
  sqlite3_bind_blob(pr->ins, 2, it.payload, PAYLOAD, SQLITE_TRANSIENT);
  return bench_step(pr->ins);
}

static void *conn_producer(void *arg) {
  producer *pr = arg;
  run *r = pr->r;
  int64_t ws, we;
  int ready = conn_open(pr) == 0;
  if (!ready) {
    pr->n.errors++;
    report_error(r, "producer %d: cannot open its connection: %s", pr->id,
                 pr->conn ? sqlite3_errmsg(pr->conn) : "open failed");
  }
  bench_gate_wait(&r->gate, &ws, &we);
  pr->ws = ws;
  pr->we = we;
  while (ready) {
    int64_t t0 = bench_now_ns();
    if (t0 >= we)
      break;
    int rc = bench_step(pr->st.begin);
    int64_t tl = bench_now_ns(), tc = tl;
    if (rc == SQLITE_OK)
      rc = conn_command(pr);
    if (rc == SQLITE_OK) {
      tc = bench_now_ns();
      rc = bench_step(pr->st.commit);
    }
    int64_t t1 = bench_now_ns();
    if (rc != SQLITE_OK && !sqlite3_get_autocommit(pr->conn))
      bench_step(pr->st.rollback);
    if (rc == SQLITE_OK) {
      pr->n.ok++;
      if (t1 >= ws && t1 < we) {
        pr->n.win_ok++;
        bench_lat_add(&pr->n.lat, (uint64_t)(t1 - t0));
        bench_lat_add(&pr->tx, (uint64_t)(t1 - tl));
        pr->commits++;
        pr->commit_ns += (uint64_t)(t1 - tc);
      }
    } else {
      pr->n.errors++;
      if (rc == BENCH_REFUSED)
        report_error(r, "transfer refused: insufficient funds");
      else
        report_error(r, "transaction: %s (%d)", sqlite3_errmsg(pr->conn), rc);
    }
  }
  bench_stmts_finalize(&pr->st);
  sqlite3_finalize(pr->ins);
  pr->ins = NULL;
  if (pr->conn)
    sqlite3_close(pr->conn);
  pr->conn = NULL;
  return NULL;
}

/* ---- the checks ---------------------------------------------------------------------------- */

/* What the database held before the arm. */
typedef struct before {
  int64_t max_id;   /* the ledger's or the items' */
  int64_t *version; /* transfer: the producers' topic versions */
} before;

/* Rows (key, n) of sql (?1 bound to arg) into out[key] for keys in [0, n);
 * how many rows had another key, or -1 when the query failed. */
static int64_t per_key(sqlite3 *conn, const char *sql, int64_t arg, int n, int64_t *out) {
  sqlite3_stmt *st = NULL;
  int64_t other = 0;
  if (sqlite3_prepare_v2(conn, sql, -1, &st, NULL) != SQLITE_OK)
    return -1;
  sqlite3_bind_int64(st, 1, arg);
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    int64_t k = sqlite3_column_int64(st, 0);
    if (k >= 0 && k < n)
      out[k] = sqlite3_column_int64(st, 1);
    else
      other++;
  }
  sqlite3_finalize(st);
  return rc == SQLITE_DONE ? other : -1;
}

#define SQL_VERSIONS "SELECT id, version FROM topics WHERE id < ?1"

static int take_before(run *r, before *b) {
  sqlite3 *conn;
  int failed = 0;
  b->version = bench_xcalloc((size_t)r->P, sizeof *b->version);
  if (open_check(r->path, &conn) != SQLITE_OK)
    return -1;
  if (r->wl == WL_TRANSFER) {
    b->max_id = bench_query_int(conn, "SELECT coalesce(max(id), 0) FROM ledger", 0, &failed);
    if (per_key(conn, SQL_VERSIONS, r->P, r->P, b->version) != 0)
      failed++;
  } else {
    b->max_id = bench_query_int(conn, "SELECT coalesce(max(id), 0) FROM items", 0, &failed);
  }
  sqlite3_close(conn);
  return failed ? -1 : 0;
}

/* The rows the arm added against the commands answered OK (ok[0..P)); how
 * many findings. */
static int64_t check_after(run *r, const before *b, const int64_t *ok) {
  sqlite3 *conn;
  int64_t bad = 0, total = 0, v;
  int failed = 0;
  for (int i = 0; i < r->P; i++)
    total += ok[i];
  if (open_check(r->path, &conn) != SQLITE_OK) {
    report_error(r, "check: cannot open the database");
    return 1;
  }
  if (r->wl == WL_INSERT) {
    v = bench_query_int(conn, "SELECT count(*) FROM items WHERE id > ?1", b->max_id, &failed);
    if (failed || v != total) {
      report_error(r, "check: %lld rows added, %lld commands answered OK", (long long)v, (long long)total);
      bad++;
    }
    sqlite3_close(conn);
    return bad;
  }
  int64_t money = (int64_t)r->P * BENCH_ACCOUNTS_PER * BENCH_START_BALANCE;
  v = bench_query_int(conn, "SELECT sum(balance) FROM accounts WHERE id < ?1",
                      (int64_t)r->P * BENCH_ACCOUNTS_PER, &failed);
  if (failed || v != money) {
    report_error(r, "check: the producers' money is %lld, expected %lld", (long long)v, (long long)money);
    bad++;
  }
  int64_t *rows = bench_xcalloc((size_t)r->P, sizeof *rows),
          *vers = bench_xcalloc((size_t)r->P, sizeof *vers);
  if (per_key(conn, "SELECT producer, count(*) FROM ledger WHERE id > ?1 GROUP BY producer", b->max_id, r->P,
              rows) != 0 ||
      per_key(conn, SQL_VERSIONS, r->P, r->P, vers) != 0) {
    report_error(r, "check: the new ledger rows or the topics could not be read, or name another owner");
    bad++;
  }
  for (int i = 0; i < r->P; i++)
    if (rows[i] != ok[i] || vers[i] - b->version[i] != ok[i]) {
      report_error(r, "check: producer %d: %lld answered OK, %lld ledger rows added, topic version +%lld", i,
                   (long long)ok[i], (long long)rows[i], (long long)(vers[i] - b->version[i]));
      bad++;
    }
  free(rows);
  free(vers);
  sqlite3_close(conn);
  return bad;
}

/* ---- the arms ------------------------------------------------------------------------------ */

/* The producers' buffers of one kind (call, tx), in an array to free. */
static bench_lat **prod_bufs(run *r, int tx) {
  bench_lat **bufs = bench_xcalloc((size_t)r->P, sizeof *bufs);
  for (int i = 0; i < r->P; i++)
    bufs[i] = tx ? &r->prod[i].tx : &r->prod[i].n.lat;
  return bufs;
}

static void producers_init(run *r) {
  size_t cap = bench_lat_cap(r->P, r->cfg->cli.seconds);
  r->prod = bench_xcalloc((size_t)r->P, sizeof *r->prod);
  for (int i = 0; i < r->P; i++) {
    producer *pr = &r->prod[i];
    pr->r = r;
    pr->id = i;
    pr->rng =
        bench_rng_seed((uint64_t)i, (uint64_t)r->round * 1000 + (uint64_t)r->arm * 10 + (uint64_t)r->wl);
    if (bench_lat_init(&pr->n.lat, cap, cap, pr->rng ^ 1) ||
        (r->arm == ARM_CONN && bench_lat_init(&pr->tx, cap, cap, pr->rng ^ 2))) {
      fprintf(stderr, "growth: out of memory for latency buffers\n");
      exit(1);
    }
  }
}

/* Start the producers, measure the window, join them, fill res (the lith
 * arm's figures from lith_stats at the window's edges). */
static void run_arm(run *r, bench_cell *res) {
  lith_stats s0, s1;
  memset(&s0, 0, sizeof s0);
  memset(&s1, 0, sizeof s1);
  if (r->arm == ARM_LITH) {
    lith_options opt;
    lith_options_default(&opt);
    opt.synchronous = r->sync;
    opt.cache_size_kib = r->cache_kib;
    opt.mmap_size = (int64_t)r->mmap_mb * 1048576;
    opt.readers = 1;
    if (lith_open(r->path, &opt, &r->db) != LITH_OK) {
      report_error(r, "lith_open: %s", lith_errmsg(NULL));
      res->errors++;
      return;
    }
  }
  producers_init(r);
  int started = 0;
  for (int i = 0; i < r->P; i++) {
    if (pthread_create(&r->prod[i].th, NULL, r->arm == ARM_LITH ? lith_producer : conn_producer,
                       &r->prod[i]) != 0) {
      report_error(r, "pthread_create failed for producer %d", i);
      res->errors++;
      continue;
    }
    r->prod[i].started = 1;
    started++;
  }
  bench_gate_open(&r->gate, started, r->cfg->cli.warmup, r->cfg->cli.seconds);
  bench_sleep_until(r->gate.ws);
  if (r->db)
    lith_stats_get(r->db, &s0);
  int64_t at0 = bench_now_ns();
  bench_sleep_until(r->gate.we);
  if (r->db)
    lith_stats_get(r->db, &s1);
  int64_t at1 = bench_now_ns();
  res->m[M_WAL_MB] = wal_mb(r->path);
  for (int i = 0; i < r->P; i++)
    if (r->prod[i].started)
      pthread_join(r->prod[i].th, NULL);

  double window_s = (double)(r->gate.we - r->gate.ws) / 1e9;
  uint64_t commands = 0, commits = 0, commit_ns = 0, ckpts = 0, ckpt_ns = 0, ckpt_in_ns = 0;
  for (int i = 0; i < r->P; i++) {
    const producer *pr = &r->prod[i];
    res->errors += pr->n.errors;
    commands += (uint64_t)pr->n.win_ok;
    commits += pr->commits;
    commit_ns += pr->commit_ns;
    ckpts += pr->ckpts;
    ckpt_ns += pr->ckpt_ns;
    ckpt_in_ns += pr->ckpt_in_ns;
  }
  res->m[M_COMMANDS] = (double)commands;
  res->m[M_CMDS_S] = (double)commands / window_s;
  bench_lat **bufs = prod_bufs(r, 0);
  bench_cell_latency(res, bufs, r->P, M_CALL_P50, M_CALL_P99, -1);
  res->m[M_CALL_MAX] = bench_lat_max_ms(bufs, r->P);
  free(bufs);
  if (r->db) {
    uint64_t cmds = s1.commands - s0.commands, batches = s1.batches - s0.batches;
    ckpts = s1.checkpoints - s0.checkpoints;
    ckpt_ns = ckpt_in_ns = s1.checkpoint_ns_total - s0.checkpoint_ns_total;
    res->m[M_CMDS_TX] = batches ? (double)cmds / (double)batches : NAN;
    res->m[M_TX_P50] = batches ? (double)lith_lat_quantile_ns(s1.tx_lat, s0.tx_lat, 0.50) / 1e6 : NAN;
    res->m[M_TX_P99] = batches ? (double)lith_lat_quantile_ns(s1.tx_lat, s0.tx_lat, 0.99) / 1e6 : NAN;
    res->m[M_COMMIT_MS] =
        batches ? (double)(s1.commit_ns_total - s0.commit_ns_total) / (double)batches / 1e6 : NAN;
    window_s = (double)(at1 - at0) / 1e9; /* the snapshots' own interval */
    int rc = lith_close(r->db);
    r->db = NULL;
    if (rc != LITH_OK) {
      report_error(r, "lith_close: %s: %s", lith_errstr(rc), lith_errmsg(NULL));
      res->errors++;
    }
  } else {
    static const double QS[2] = {0.50, 0.99};
    bench_lat_sum ts;
    bufs = prod_bufs(r, 1);
    if (bench_lat_merge(bufs, r->P, QS, 2, &ts) != 0)
      fprintf(stderr, "growth: out of memory merging latencies\n");
    free(bufs);
    res->m[M_CMDS_TX] = ts.count ? (double)commands / (double)ts.count : NAN;
    res->m[M_TX_P50] = ts.q[0] / 1e6;
    res->m[M_TX_P99] = ts.q[1] / 1e6;
    res->m[M_COMMIT_MS] = commits ? (double)commit_ns / (double)commits / 1e6 : NAN;
    res->sampled |= ts.sampled;
  }
  res->m[M_CKPTS] = (double)ckpts;
  res->m[M_CKPT_MS] = ckpts ? (double)ckpt_ns / (double)ckpts / 1e6 : NAN;
  res->m[M_CKPT_SHARE] = (double)ckpt_in_ns / 1e9 / window_s;
}

/* ---- the fill (not measured) ------------------------------------------------------------------ */

typedef struct fill_state {
  double unit_bytes;  /* what one owner (transfer) or one row (insert) takes; learnt as it goes */
  int64_t next_owner; /* transfer: the first owner not yet added */
  uint64_t rng;
} fill_state;

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* n owners after the last: their accounts, topic and ledger rows. */
static int fill_owners(sqlite3_stmt *const *st, int64_t n, fill_state *fs) {
  int rc = SQLITE_OK;
  for (int64_t u = 0; rc == SQLITE_OK && u < n; u++) {
    int64_t o = fs->next_owner++;
    for (int64_t k = 0; rc == SQLITE_OK && k < BENCH_ACCOUNTS_PER; k++)
      rc = bench_step2(st[0], o * BENCH_ACCOUNTS_PER + k, BENCH_START_BALANCE);
    if (rc == SQLITE_OK)
      rc = bench_step2(st[1], o, FILL_LEDGER_PER);
    for (int64_t s = 1; rc == SQLITE_OK && s <= FILL_LEDGER_PER; s++) {
      bench_transfer t = bench_transfer_make(o, s, &fs->rng);
      sqlite3_bind_int64(st[2], 1, t.owner);
      sqlite3_bind_int64(st[2], 2, t.seq);
      sqlite3_bind_int64(st[2], 3, t.src);
      sqlite3_bind_int64(st[2], 4, t.dst);
      sqlite3_bind_int64(st[2], 5, t.amount);
      rc = bench_step(st[2]);
    }
  }
  return rc;
}

/* n rows with random keys, in key order (see the top). */
static int fill_items(sqlite3_stmt *ins, int64_t n, fill_state *fs) {
  int64_t *keys = bench_xcalloc((size_t)n, sizeof *keys);
  item it;
  for (int64_t i = 0; i < n; i++) {
    item_make(&it, &fs->rng);
    keys[i] = it.k;
  }
  qsort(keys, (size_t)n, sizeof *keys, cmp_i64);
  int rc = SQLITE_OK;
  for (int64_t i = 0; rc == SQLITE_OK && i < n; i++) {
    item_make(&it, &fs->rng); /* for its payload */
    sqlite3_bind_int64(ins, 1, keys[i]);
    sqlite3_bind_blob(ins, 2, it.payload, PAYLOAD, SQLITE_TRANSIENT);
    rc = bench_step(ins);
  }
  free(keys);
  return rc;
}

/* Grow path's main file to at least target_mb. 0, or -1 (said on stderr). */
static int fill_to(int wl, const char *path, double target_mb, fill_state *fs) {
  if (file_mb(path) >= target_mb)
    return 0;
  sqlite3 *conn;
  sqlite3_stmt *st[3] = {NULL, NULL, NULL};
  bench_pragmas p = pragmas(LITH_SYNC_NORMAL, FILL_CACHE_KIB, 0);
  if (bench_open_plain(path, &p, 30000, &conn) != SQLITE_OK)
    return -1;
  int rc = sqlite3_exec(conn, "PRAGMA synchronous=OFF", NULL, NULL, NULL);
  if (wl == WL_TRANSFER) {
    if (rc == SQLITE_OK)
      rc = prepare(conn, "INSERT INTO accounts(id, balance) VALUES (?, ?)", &st[0]);
    if (rc == SQLITE_OK)
      rc = prepare(conn, "INSERT INTO topics(id, version) VALUES (?, ?)", &st[1]);
    if (rc == SQLITE_OK)
      rc = prepare(conn, BENCH_SQL_LEDGER, &st[2]);
  } else if (rc == SQLITE_OK) {
    rc = prepare(conn, SQL_ITEM, &st[0]);
  }
  double size;
  while (rc == SQLITE_OK && (size = file_mb(path)) < target_mb) {
    double want = (target_mb - size) * MIB;
    if (want > FILL_CHUNK_MB * MIB)
      want = FILL_CHUNK_MB * MIB;
    int64_t n = (int64_t)(want / fs->unit_bytes) + 1;
    rc = sqlite3_exec(conn, "BEGIN", NULL, NULL, NULL);
    if (rc == SQLITE_OK)
      rc = wl == WL_TRANSFER ? fill_owners(st, n, fs) : fill_items(st[0], n, fs);
    if (rc == SQLITE_OK)
      rc = sqlite3_exec(conn, "COMMIT", NULL, NULL, NULL);
    /* the main file holds every row only after a checkpoint */
    if (rc == SQLITE_OK)
      rc = sqlite3_wal_checkpoint_v2(conn, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
    double grown = (file_mb(path) - size) * MIB;
    if (grown > 0)
      fs->unit_bytes = grown / (double)n;
    else
      fs->unit_bytes /= 2; /* free pages took them: ask for more next time */
  }
  if (rc != SQLITE_OK)
    fprintf(stderr, "growth: filling %s: %s\n", path, sqlite3_errmsg(conn));
  for (int i = 0; i < 3; i++)
    sqlite3_finalize(st[i]);
  if (sqlite3_close(conn) != SQLITE_OK && rc == SQLITE_OK)
    rc = SQLITE_ERROR;
  return rc == SQLITE_OK ? 0 : -1;
}

/* A fresh database for the workload: the transfer's producers' accounts and
 * topics, or the empty items table. 0 or -1. */
static int create_db(int wl, const char *path, int P) {
  lith_options d;
  lith_options_default(&d);
  bench_pragmas p = pragmas(LITH_SYNC_NORMAL, d.cache_size_kib, 0);
  if (wl == WL_TRANSFER)
    return bench_transfer_create(path, P, &p);
  sqlite3 *conn;
  bench_remove_db(path);
  if (bench_open_plain(path, &p, 5000, &conn) != SQLITE_OK)
    return -1;
  int rc = sqlite3_exec(conn, ITEMS_SCHEMA, NULL, NULL, NULL);
  if (rc != SQLITE_OK)
    fprintf(stderr, "growth: creating %s: %s\n", path, sqlite3_errmsg(conn));
  if (sqlite3_close(conn) != SQLITE_OK && rc == SQLITE_OK)
    rc = SQLITE_ERROR;
  return rc == SQLITE_OK ? 0 : -1;
}

/* ---- the plan --------------------------------------------------------------------------------- */

typedef struct bench {
  config cfg;
  bench_harness *h;
  const char *path;                  /* the database being grown */
  double fill_s[NWL][MAX_STEPS + 1]; /* [workload index][step]: the fill's time */
  int64_t errors;                    /* outside any cell: creating or filling a database */
} bench;

/* One arm at one cell: the harness's callback, on the database as it is. */
static void run_cell(bench_cell *cell) {
  bench *b = cell->ctx;
  const config *c = &b->cfg;
  run r;
  memset(&r, 0, sizeof r);
  r.cfg = c;
  r.wl = cell->val[D_WL];
  r.arm = cell->arm;
  r.sync = cell->val[D_SYNC];
  r.P = c->producers;
  r.round = cell->round;
  r.cache_kib = cell->val[D_CACHE];
  r.mmap_mb = cell->val[D_MMAP];
  r.path = b->path;
  r.cell = cell;
  bench_gate_init(&r.gate);
  cell->m[M_DB_MB] = file_mb(r.path);
  before bf = {0, NULL};
  if (take_before(&r, &bf) != 0) {
    report_error(&r, "check: cannot read the database before the arm");
    cell->errors++;
  } else {
    run_arm(&r, cell);
    if (r.prod) {
      int64_t *ok = bench_xcalloc((size_t)r.P, sizeof *ok);
      for (int i = 0; i < r.P; i++)
        ok[i] = r.prod[i].n.ok;
      cell->errors += check_after(&r, &bf, ok);
      free(ok);
      for (int i = 0; i < r.P; i++) {
        bench_lat_free(&r.prod[i].n.lat);
        bench_lat_free(&r.prod[i].tx);
      }
      free(r.prod);
    }
  }
  free(bf.version);
  bench_gate_destroy(&r.gate);
}

/* The cell of workload wi at step s with cache ci and mmap mi, synchronous si. */
static void cell_idx(int *idx, int wi, int s, int ci, int mi, int si) {
  idx[D_WL] = wi;
  idx[D_STEP] = s;
  idx[D_CACHE] = ci;
  idx[D_MMAP] = mi;
  idx[D_PRODUCERS] = 0;
  idx[D_SYNC] = si;
}

/* Every round of every synchronous and arm at one place; the arms' order
 * alternates by round (round r before r+1, as in bench/writer). */
static void measure(bench *b, int wi, int s, int ci, int mi) {
  const config *c = &b->cfg;
  for (int r = 0; r < c->cli.rounds; r++)
    for (int si = 0; si < c->nsync; si++)
      for (int k = 0; k < NARMS; k++) {
        int idx[NDIM];
        cell_idx(idx, wi, s, ci, mi, si);
        bench_harness_run_one(b->h, r % 2 ? NARMS - 1 - k : k, idx, r);
      }
}

/* One workload: create, grow step by step measuring each, the other
 * settings at the largest size (the first is the last step's), remove. */
static void run_workload(bench *b, int wi) {
  const config *c = &b->cfg;
  int wl = c->wl[wi];
  char path[4096];
  snprintf(path, sizeof path, "%s/growth-%s.db", c->cli.db_dir, WL_NAME[wl]);
  b->path = path;
  if (create_db(wl, path, c->producers) != 0) {
    fprintf(stderr, "growth: cannot create %s\n", path);
    b->errors++;
    bench_remove_db(path);
    return;
  }
  fill_state fs = {wl == WL_TRANSFER ? 1200.0 : 170.0, c->producers, bench_rng_seed(77, (uint64_t)wl)};
  int s;
  for (s = 0; s < c->nsteps; s++) {
    int64_t t0 = bench_now_ns();
    if (fill_to(wl, path, c->steps[s], &fs) != 0) {
      b->errors++;
      break;
    }
    b->fill_s[wi][s] = (double)(bench_now_ns() - t0) / 1e9;
    fprintf(stderr, "[fill] %s to %d MB: %.1f MB in %.1f s\n", WL_NAME[wl], c->steps[s], file_mb(path),
            b->fill_s[wi][s]);
    measure(b, wi, s, 0, 0);
  }
  if (s == c->nsteps)
    for (int k = 1; k < nsettings(c); k++)
      measure(b, wi, c->nsteps - 1, k / c->nmmap, k % c->nmmap);
  bench_remove_db(path);
  b->path = NULL;
}

/* ---- summaries -------------------------------------------------------------------------------- */

static void fmt_ms(char *buf, size_t n, double ms) { bench_fmt_ms(buf, n, ms, 1); }

static double med(const bench *b, const int *idx, int arm, int metric) {
  return bench_harness_agg(b->h, arm, idx, metric).med;
}

/* The median cmd/s of arm at idx over other's at io. */
static double ratio(const bench *b, const int *idx, int arm, const int *io, int other) {
  double a = med(b, idx, arm, M_CMDS_S), o = med(b, io, other, M_CMDS_S);
  return o > 0 ? a / o : NAN;
}

/* The cells every table shares, from "cmd/s" to "err". */
static void print_cells(const bench *b, const int *idx, int arm, int with_p50) {
  bench_agg cs = bench_harness_agg(b->h, arm, idx, M_CMDS_S);
  char ms[NMETRIC][32];
  for (int m = 0; m < NMETRIC; m++)
    fmt_ms(ms[m], sizeof ms[m], med(b, idx, arm, m));
  printf(" %.0f (%.0f–%.0f) | %s |", cs.med, cs.lo, cs.hi, BENCH_NUM("%.1f", med(b, idx, arm, M_CMDS_TX)));
  if (with_p50)
    printf(" %s |", ms[M_TX_P50]);
  printf(" %s | %s | %s | %s | %s | %s |", ms[M_TX_P99], ms[M_COMMIT_MS],
         BENCH_NUM("%.0f", med(b, idx, arm, M_CKPTS)), ms[M_CKPT_MS],
         BENCH_NUM("%.1f%%", 100 * med(b, idx, arm, M_CKPT_SHARE)),
         BENCH_NUM("%.1f", med(b, idx, arm, M_WAL_MB)));
  if (with_p50)
    printf(" %s |", ms[M_CALL_P50]);
  printf(" %s | %s | %lld |", ms[M_CALL_P99], ms[M_CALL_MAX],
         (long long)bench_harness_errors(b->h, arm, idx));
}

static void print_growth(const bench *b, int wi) {
  const config *c = &b->cfg;
  int wl = c->wl[wi];
  for (int si = 0; si < c->nsync; si++) {
    printf("\n### %s, synchronous=%s (cache %d KiB, mmap %d MB)\n\n", WL_NAME[wl], sync_name(c->sync[si]),
           c->cache[0], c->mmap[0]);
    printf(
        "| step MB | db MB | arm | cmd/s median (min–max) | cmd/tx | tx p50 | tx p99 | commit ms | ckpts | "
        "ckpt ms | ckpt %% | wal MB | call p50 | call p99 | call max | err | ÷conn |\n");
    printf("|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for (int s = 0; s < c->nsteps; s++)
      for (int arm = 0; arm < NARMS; arm++) {
        int idx[NDIM];
        cell_idx(idx, wi, s, 0, 0, si);
        if (!bench_harness_ran(b->h, arm, idx))
          continue;
        printf("| %d | %.1f | %s |", c->steps[s], med(b, idx, arm, M_DB_MB), ARM_NAME[arm]);
        print_cells(b, idx, arm, 1);
        printf(" %s |\n", arm == ARM_LITH ? BENCH_NUM("%.2f×", ratio(b, idx, ARM_LITH, idx, ARM_CONN)) : " ");
      }
  }
}

static void print_settings(const bench *b, int wi) {
  const config *c = &b->cfg;
  int wl = c->wl[wi], last = c->nsteps - 1, first[NDIM];
  cell_idx(first, wi, last, 0, 0, 0);
  if (!bench_harness_ran(b->h, ARM_LITH, first) && !bench_harness_ran(b->h, ARM_CONN, first))
    return;
  printf("\n### %s at the largest step (%d MB): cache_size and mmap_size\n\n", WL_NAME[wl], c->steps[last]);
  printf(
      "| sync | cache MiB | mmap MB | db MB | arm | cmd/s median (min–max) | cmd/tx | tx p99 | commit ms | "
      "ckpts | ckpt ms | ckpt %% | wal MB | call p99 | call max | err | ÷conn | ÷first |\n");
  printf("|---|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
  for (int si = 0; si < c->nsync; si++)
    for (int k = 0; k < nsettings(c); k++)
      for (int arm = 0; arm < NARMS; arm++) {
        int idx[NDIM], base[NDIM];
        cell_idx(idx, wi, last, k / c->nmmap, k % c->nmmap, si);
        cell_idx(base, wi, last, 0, 0, si);
        if (!bench_harness_ran(b->h, arm, idx))
          continue;
        printf("| %s | %g | %d | %.1f | %s |", sync_name(c->sync[si]), setting_cache(c, k) / 1024.0,
               setting_mmap(c, k), med(b, idx, arm, M_DB_MB), ARM_NAME[arm]);
        print_cells(b, idx, arm, 0);
        printf(" %s | %s |\n",
               arm == ARM_LITH ? BENCH_NUM("%.2f×", ratio(b, idx, ARM_LITH, idx, ARM_CONN)) : " ",
               k ? BENCH_NUM("%.2f×", ratio(b, idx, arm, base, arm)) : " ");
      }
}

/* Informational: each arm from the first step to the last. */
static void print_summary(const bench *b) {
  const config *c = &b->cfg;
  printf("\n### from the first step to the last (informational)\n\n");
  for (int wi = 0; wi < c->nwl; wi++) {
    int first[NDIM], last[NDIM], s = c->nsteps - 1;
    for (; s > 0; s--) {
      cell_idx(last, wi, s, 0, 0, 0);
      if (bench_harness_ran(b->h, ARM_LITH, last))
        break;
    }
    for (int si = 0; si < c->nsync; si++) {
      cell_idx(first, wi, 0, 0, 0, si);
      cell_idx(last, wi, s, 0, 0, si);
      if (!bench_harness_ran(b->h, ARM_LITH, first) || !bench_harness_ran(b->h, ARM_CONN, last))
        continue;
      printf("- %s %s, %.1f → %.1f MB:", WL_NAME[c->wl[wi]], sync_name(c->sync[si]),
             med(b, first, ARM_LITH, M_DB_MB), med(b, last, ARM_LITH, M_DB_MB));
      for (int arm = 0; arm < NARMS; arm++) {
        double a = med(b, first, arm, M_CMDS_S), z = med(b, last, arm, M_CMDS_S);
        printf(" %s %.0f → %.0f cmd/s (%s);", ARM_NAME[arm], a, z, BENCH_NUM("%+.0f%%", 100 * (z / a - 1)));
      }
      printf(" lith ÷ perconn %s → %s\n", BENCH_NUM("%.2f×", ratio(b, first, ARM_LITH, first, ARM_CONN)),
             BENCH_NUM("%.2f×", ratio(b, last, ARM_LITH, last, ARM_CONN)));
    }
  }
}

static void print_tables(const bench *b) {
  const config *c = &b->cfg;
  for (int wi = 0; wi < c->nwl; wi++) {
    print_growth(b, wi);
    print_settings(b, wi);
  }
  printf(
      "\nColumns: median over rounds (cmd/s also min–max). MB = 2^20 bytes. Times in ms. step: the size\n"
      "the fill grew the main file to (not measured); db: the main file before the arm. tx = BEGIN\n"
      "IMMEDIATE to end of COMMIT (lith: its histogram, bucket upper bound; perconn: from lock acquired).\n"
      "commit: the COMMIT statement, mean (perconn's includes the autocheckpoints SQLite runs inside it).\n"
      "ckpts, ckpt ms: checkpoints that ended in the window, their mean; ckpt %%: the window's share spent\n"
      "checkpointing (lith: lith_stats, on its checkpointer thread, a checkpoint counted whole when it\n"
      "ends; perconn: SQLite's autocheckpoint, timed, clipped to the window). wal: the -wal file at the\n"
      "window's end. call = one lith_do, or one command including its wait for the lock. ÷conn: lith's\n"
      "median cmd/s over perconn's; ÷first: over the same arm with the first cache and mmap (the\n"
      "settings table's first rows are the largest step's).\n");
  printf("\nfill (not measured), s per step:");
  for (int wi = 0; wi < c->nwl; wi++) {
    printf("%s %s", wi ? ";" : "", WL_NAME[c->wl[wi]]);
    for (int s = 0; s < c->nsteps; s++) {
      int idx[NDIM];
      cell_idx(idx, wi, s, 0, 0, 0);
      if (bench_harness_ran(b->h, ARM_LITH, idx) || bench_harness_ran(b->h, ARM_CONN, idx))
        printf(" %d MB %.1f", c->steps[s], b->fill_s[wi][s]);
    }
  }
  printf("\n");
  print_summary(b);
}

/* ---- options ---------------------------------------------------------------------------------- */

static void usage(FILE *f) {
  fprintf(f,
          "usage: growth [options]\n"
          "  --workloads LIST   transfer,insert (default both)\n"
          "  --producers N      producer threads (default 64)\n"
          "  --sync LIST        full,normal (default both)\n"
          "  --target-mb N      grow the database to N MB (default 4096; capped at 40%% of the free space)\n"
          "  --steps LIST       sizes in MB to measure at (default 0, 64, doubling, the target)\n"
          "  --cache-kib LIST   cache_size per connection, KiB (default 16384,262144; the first in the\n"
          "                     growth tables)\n"
          "  --mmap-mb LIST     mmap_size, MB (default 0,1024; the first in the growth tables)\n"
          "  --seconds S        measured window per arm (default 3)\n"
          "  --warmup S         warm-up before the window (default 0.5)\n"
          "  --rounds N         rounds at each step (default 3)\n"
          "  --db-dir DIR       where the databases go (default: a new directory under /tmp)\n"
          "  --results PATH     the results file (default bench/results/growth-YYYYMMDD-HHMMSS.jsonl)\n"
          "  --quick            smoke run: target 256 MB, 1 round, 1 s, warm-up 0.25 s\n"
          "  --help\n");
}

static int take_option(void *ctx, const char *a, const char *v) {
  static const char *const SYNC_WORD[] = {"full", "normal"};
  static const int SYNC_VAL[] = {LITH_SYNC_FULL, LITH_SYNC_NORMAL};
  config *c = ctx;
  if (!strcmp(a, "--producers")) {
    bench_parse_counts(v, a, "producer", 1, 10000, &c->producers, 1);
  } else if (!strcmp(a, "--sync")) {
    c->nsync = bench_parse_words(v, a, SYNC_WORD, SYNC_VAL, 2, c->sync, 2, "full,normal");
  } else if (!strcmp(a, "--workloads")) {
    c->nwl = bench_parse_words(v, a, WL_NAME, NULL, NWL, c->wl, NWL, "transfer,insert");
  } else if (!strcmp(a, "--target-mb")) {
    bench_parse_counts(v, a, "target", 1, 1 << 24, &c->target_asked, 1);
  } else if (!strcmp(a, "--steps")) {
    c->nsteps = bench_parse_counts(v, a, "step", 0, 1 << 24, c->steps, MAX_STEPS);
    c->steps_given = 1;
    for (int i = 1; i < c->nsteps; i++)
      if (c->steps[i] <= c->steps[i - 1])
        bench_die_usage("--steps must grow: %s", v);
  } else if (!strcmp(a, "--cache-kib")) {
    c->ncache = bench_parse_counts(v, a, "cache", 64, 1 << 24, c->cache, MAX_LIST);
  } else if (!strcmp(a, "--mmap-mb")) {
    c->nmmap = bench_parse_counts(v, a, "mmap", 0, 1 << 20, c->mmap, MAX_LIST);
  } else {
    return 0;
  }
  return 1;
}

static void parse_args(int argc, char **argv, config *c) {
  memset(c, 0, sizeof *c);
  c->cli = (bench_cli){.prog = "growth", .usage = usage, .min_seconds = 0.05, .max_rounds = 100};
  c->producers = 64;
  c->sync[0] = LITH_SYNC_FULL;
  c->sync[1] = LITH_SYNC_NORMAL;
  c->nsync = 2;
  c->wl[0] = WL_TRANSFER;
  c->wl[1] = WL_INSERT;
  c->nwl = 2;
  bench_cli_parse(&c->cli, argc, argv, take_option, c);
  if (!c->ncache) {
    lith_options d;
    lith_options_default(&d);
    c->cache[0] = d.cache_size_kib;
    c->cache[1] = 262144;
    c->ncache = 2;
  }
  if (!c->nmmap) {
    c->mmap[0] = 0;
    c->mmap[1] = 1024;
    c->nmmap = 2;
  }
}

/* The target and the steps, once the databases' directory is known: the
 * target capped at 40% of its free space; steps above the target dropped
 * (the target added when the cap dropped some). */
static void plan_steps(config *c) {
  struct statvfs v;
  if (!c->target_asked)
    c->target_asked = c->steps_given ? c->steps[c->nsteps - 1]
                      : c->cli.quick ? QUICK_TARGET_MB
                                     : DEFAULT_TARGET_MB;
  c->target_mb = c->target_asked;
  c->free_mb = statvfs(c->cli.db_dir, &v) == 0 ? (double)v.f_bavail * (double)v.f_frsize / MIB : NAN;
  if (!isnan(c->free_mb) && c->target_mb > 0.4 * c->free_mb) {
    c->target_mb = (int)(0.4 * c->free_mb);
    c->capped = 1;
  }
  if (!c->steps_given) {
    c->steps[c->nsteps++] = 0;
    for (int s = FIRST_STEP_MB; s < c->target_mb && c->nsteps < MAX_STEPS - 1; s *= 2)
      c->steps[c->nsteps++] = s;
    c->steps[c->nsteps++] = c->target_mb;
    return;
  }
  int n = 0;
  for (int i = 0; i < c->nsteps; i++)
    if (c->steps[i] <= c->target_mb)
      c->steps[n++] = c->steps[i];
  if (n < c->nsteps && (n == 0 || c->steps[n - 1] < c->target_mb))
    c->steps[n++] = c->target_mb;
  c->nsteps = n;
}

/* ---- the header ---------------------------------------------------------------------------------- */

static void print_header(const config *c, int argc, char **argv, const char *results_path) {
  static const int ON[NARMS] = {1, 1};
  bench_machine m;
  bench_machine_get(&m);
  bench_print_intro("lith growth benchmark", argc, argv, 0);
  printf("machine: nproc %ld (usable %d), CPU %s, kernel %s\n", m.nproc, m.usable, m.cpu, m.kernel);
  printf("SQLite %s (%s), lith %s\n", sqlite3_libversion(), sqlite3_sourceid(), LITH_VERSION);
  printf("databases: %s (%s), %.0f MB free\n", c->cli.db_dir, bench_fs_name(c->cli.db_dir), c->free_mb);
  if (c->capped)
    printf("target: %d MB asked, capped to %d MB (40%% of the free space)\n", c->target_asked, c->target_mb);
  printf("plan: workloads");
  bench_print_named(c->wl, c->nwl, wl_name);
  printf("; producers %d; synchronous", c->producers);
  bench_print_named(c->sync, c->nsync, sync_name);
  printf("; steps MB");
  bench_print_ints(c->steps, c->nsteps);
  printf("; cache KiB");
  bench_print_ints(c->cache, c->ncache);
  printf("; mmap MB");
  bench_print_ints(c->mmap, c->nmmap);
  bench_print_arms_results(ARM_NAME, ON, NARMS, &c->cli, results_path);
}

int main(int argc, char **argv) {
  bench b;
  memset(&b, 0, sizeof b);
  config *c = &b.cfg;
  parse_args(argc, argv, c);
  int64_t t_begin = bench_now_ns();

  char tmpdir[] = "/tmp/lith-bench-XXXXXX";
  int own_dir = bench_db_dir(&c->cli.db_dir, tmpdir);
  plan_steps(c);

  /* The results' "workload" is the program's; each line's cell says which
   * workload ran (the top says why). */
  bench_plan plan = {.program = "growth",
                     .workload = "growth",
                     BENCH_PLAN_ARMS(ARM_NAME),
                     .ndims = NDIM,
                     .dim_n = BENCH_NONE,
                     .dim_sync = D_SYNC,
                     BENCH_PLAN_METRICS(METRICS),
                     .run = run_cell,
                     .ctx = &b,
                     .cli = &c->cli};
  bench_plan_dim(&plan, D_WL, "workload", wl_name, c->wl, c->nwl);
  bench_plan_dim(&plan, D_STEP, "step_mb", NULL, c->steps, c->nsteps);
  bench_plan_dim(&plan, D_CACHE, "cache_kib", NULL, c->cache, c->ncache);
  bench_plan_dim(&plan, D_MMAP, "mmap_mb", NULL, c->mmap, c->nmmap);
  bench_plan_dim(&plan, D_PRODUCERS, "producers", NULL, &c->producers, 1);
  bench_plan_dim(&plan, D_SYNC, "sync", sync_name, c->sync, c->nsync);
  b.h = bench_harness_create(&plan);
  if (!b.h)
    return 1;
  print_header(c, argc, argv, bench_harness_path(b.h));

  for (int wi = 0; wi < c->nwl; wi++)
    run_workload(&b, wi);

  print_tables(&b);
  int64_t errors = b.errors + bench_harness_total_errors(b.h);
  bench_harness_destroy(b.h);
  return bench_finish("all arms", errors, t_begin, own_dir, c->cli.db_dir);
}
