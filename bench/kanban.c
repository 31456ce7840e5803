/*
 * bench/kanban — the kanban example's MoveCard through lith's writer, as
 * the HTTP server runs it but without HTTP, against the same move done the
 * usual way (a connection per person, one BEGIN IMMEDIATE ... COMMIT per
 * move). The "real command" figure beside bench/writer's synthetic one.
 *
 * The board (seeded afresh for every arm run, one lith command): people
 * p0..p{P-1}, all members of one board; person p owns two lists ("p: to
 * do", "p: done") and CARDS cards dealt into the first. Every person moves
 * only their own cards: a random card of theirs to their other list at a
 * random index 0..n (n = cards already there), carrying the move version
 * they last saw and a fresh op id. So no move is ever stale and the indexes
 * are always in range; every non-OK answer is an error. All moves bump the
 * same board's version: the hot row a real shared board has.
 *
 * The command is examples/kanban's kb_move_card, the code the server runs
 * (op-id lookup, card + membership + target list, neighbours, card update,
 * board version bump, op record; a renumber when a gap runs out: six
 * statements, plus the writer's SAVEPOINT/RELEASE).
 *
 * Arms, synchronous FULL unless --sync says otherwise:
 *   writer   lith_open (defaults: WRITER checkpoints, an on_commit hook that
 *            counts touched boards, as the server has), P threads calling
 *            lith_do(kb_move_card).
 *   perconn  P threads, a connection each (lith's pragmas, busy_timeout
 *            30 s, SQLite's autocheckpoint), BEGIN IMMEDIATE, the same
 *            kb_move_card body through kb_plain_run (the same statements),
 *            COMMIT; what an app without a writer does.
 *
 * Timing as bench/writer: threads wait at a gate, run --warmup seconds,
 * then a window of --seconds; a move counts when it completes inside the
 * window. Rounds interleave the arms (odd rounds run perconn first). Reported
 * per (P, arm): median moves/s over rounds (min–max), moves per transaction,
 * mean and p99 transaction time (writer: lith's histogram over the window,
 * a bucket's upper bound; perconn: from BEGIN IMMEDIATE returned to COMMIT
 * done, i.e. while holding the lock), and each move's call latency p50 / p99
 * / max (lith_do, or BEGIN..COMMIT including the wait for the lock), exact
 * from per-thread buffers (reservoir-sampled beyond LAT_CAP per thread).
 *
 * After every arm run the database is checked with plain SQLite:
 * quick_check; no two non-archived cards of a list share a position; every
 * list holds exactly the cards, in exactly the order, its owner's model
 * says (each person tracks the order its moves produced); every card's move
 * version equals the model's; the moves recorded (sum of version bumps, op
 * rows, board version growth) equal the moves answered OK. Any mismatch is
 * an error; the exit status is 0 only without errors.
 *
 * Results (bench/harness.h, bench/results.md): a line per arm run, n the
 * people, sync the synchronous, the cell the writer arm's checkpoint mode
 * (perconn has none: SQLite's autocheckpoint). The controls kanban-perconn
 * and kanban-rate (bench/controls.csv) judge them.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "board.h"
#include "common.h"
#include "harness.h"
#include "lith.h"

enum { CARDS = 8, MAX_P = 4096, LAT_CAP = 1 << 14 };

/* ---- configuration and metrics ------------------------------------------------- */

enum { ARM_WRITER, ARM_PERCONN, NARMS };
static const char *const ARM_NAME[NARMS] = {"writer", "perconn"};

typedef struct config {
  bench_cli cli; /* --seconds, --warmup, --rounds, --db-dir, --results, --quick */
  int people[16];
  int npeople;
  int sync;
  int checkpoint; /* the writer arm's lith_options.checkpoint */
  int arms[NARMS];
} config;

enum {
  M_MOVES_S, /* moves answered OK per second of the window */
  M_MOVES_TX,
  M_TX_MS, /* BEGIN IMMEDIATE to end of COMMIT, mean */
  M_COMMIT_MS,
  M_TX_P99,
  M_CALL_P50,
  M_CALL_P99,
  M_CALL_MAX,
  M_MOVES, /* moves answered OK inside the window */
  NMETRIC
};
static const bench_metric METRICS[NMETRIC] = {
    {"moves_per_s", BENCH_ROLE_RATE},    {"moves_per_tx", BENCH_ROLE_NONE}, {"tx_ms_mean", BENCH_ROLE_NONE},
    {"commit_ms_mean", BENCH_ROLE_NONE}, {"tx_p99_ms", BENCH_ROLE_NONE},    {"call_p50_ms", BENCH_ROLE_P50},
    {"call_p99_ms", BENCH_ROLE_P99},     {"call_max_ms", BENCH_ROLE_NONE},  {"moves", BENCH_ROLE_NONE},
};

/* The cell's dimensions: one synchronous and one checkpoint mode a run (the
 * options take one), the people. */
enum { D_SYNC, D_CKPT, D_PEOPLE, NDIM };

static const char *sync_name(int s) { return s == LITH_SYNC_FULL ? "FULL" : "NORMAL"; }
static const char *ckpt_name(int m) { return m == LITH_CHECKPOINT_AUTO ? "AUTO" : "WRITER"; }

/* perconn has no checkpoint mode of its own: it runs once, its line without one. */
static unsigned ignores(int arm) { return arm == ARM_PERCONN ? 1u << D_CKPT : 0; }

/* One person: their two lists, their cards, the order they expect. */
typedef struct person {
  struct run *r;
  int idx;
  int64_t user;
  int64_t lists[2];
  int64_t order[2][CARDS]; /* card ids in list order */
  int n[2];
  int64_t version[CARDS]; /* by card slot */
  int64_t cards[CARDS];
  uint64_t rng;
  /* results */
  int64_t ok, in_window, errors;
  char first_error[LITH_ERRMSG_MAX + 64];
  bench_lat call, tx;
} person;

typedef struct run {
  const config *cfg;
  bench_cell *cell; /* its m[] and errors: the result */
  int arm, P, sync, checkpoint;
  char path[4096];
  lith *db; /* writer arm */
  int64_t board;
  int64_t board_version0;
  _Atomic int stop;
  _Atomic int64_t window_start, window_end;
  pthread_barrier_t gate;
  person *people;
  _Atomic uint64_t touched; /* boards reported to on_commit */
} run;

/* ---- seeding --------------------------------------------------------------------- */

typedef struct seed {
  run *r;
  char names[MAX_P][16];
  char titles[2 * MAX_P][24];
} seed;

/* One lith command: every user, the board, the members, 2 lists and CARDS
 * cards per person, through the model's own commands. */
static int seed_cmd(lith_tx *tx, void *arg) {
  seed *s = arg;
  run *r = s->r;
  int rc;
  for (int p = 0; p < r->P; p++) {
    snprintf(s->names[p], sizeof s->names[p], "p%d", p);
    kb_user_args u = {.name = s->names[p], .pw_hash = "$bench$not-a-real-hash"};
    if ((rc = kb_create_user(tx, &u)) != LITH_OK)
      return rc;
    r->people[p].user = u.user_id;
  }
  kb_action b = {.user_id = r->people[0].user, .title = "MoveCard benchmark"};
  if ((rc = kb_create_board(tx, &b)) != LITH_OK)
    return rc;
  r->board = b.out.board_id;
  for (int p = 1; p < r->P; p++) {
    kb_action m = {.user_id = r->people[0].user, .board_id = r->board, .name = s->names[p]};
    if ((rc = kb_add_member(tx, &m)) != LITH_OK)
      return rc;
  }
  for (int p = 0; p < r->P; p++) {
    person *pe = &r->people[p];
    for (int l = 0; l < 2; l++) {
      char *t = s->titles[2 * p + l];
      snprintf(t, sizeof s->titles[0], "p%d: %s", p, l ? "done" : "to do");
      kb_action a = {.user_id = pe->user, .board_id = r->board, .title = t};
      if ((rc = kb_create_list(tx, &a)) != LITH_OK)
        return rc;
      pe->lists[l] = a.out.id;
      r->board_version0 = a.out.board_version;
    }
    pe->n[0] = pe->n[1] = 0;
    for (int k = 0; k < CARDS; k++) {
      kb_action a = {
          .user_id = pe->user, .list_id = pe->lists[0], .title = "a card to move", .index = KB_END};
      if ((rc = kb_create_card(tx, &a)) != LITH_OK)
        return rc;
      pe->cards[k] = a.out.id;
      pe->version[k] = a.out.version;
      pe->order[0][pe->n[0]++] = a.out.id;
      r->board_version0 = a.out.board_version;
    }
  }
  return LITH_OK;
}

static void person_error(person *pe, const char *fmt, const char *what, const char *msg) {
  if (pe->errors++ == 0)
    snprintf(pe->first_error, sizeof pe->first_error, fmt, what, msg);
}

/* ---- the move a person makes ------------------------------------------------------ */

typedef struct plan {
  kb_action a;
  int slot, from, to, at;
  char op[32];
} plan;

static int slot_of(const person *pe, int64_t card) {
  for (int k = 0; k < CARDS; k++)
    if (pe->cards[k] == card)
      return k;
  return -1;
}

static void plan_move(person *pe, plan *m) {
  int from, at;
  do {
    from = (int)(bench_rng_next(&pe->rng) % 2);
  } while (pe->n[from] == 0);
  at = (int)(bench_rng_next(&pe->rng) % (uint64_t)pe->n[from]);
  int64_t card = pe->order[from][at];
  m->slot = slot_of(pe, card);
  m->from = from;
  m->to = 1 - from;
  m->at = at;
  snprintf(m->op, sizeof m->op, "%016llx-p%d", (unsigned long long)bench_now_ns(), pe->idx);
  memset(&m->a, 0, sizeof m->a);
  m->a.user_id = pe->user;
  m->a.op_id = m->op;
  m->a.card_id = card;
  m->a.list_id = pe->lists[m->to];
  m->a.index = (int64_t)(bench_rng_next(&pe->rng) % (uint64_t)(pe->n[m->to] + 1));
  m->a.seen_version = pe->version[m->slot];
}

/* The move was answered OK: apply it to the model. */
static void apply_move(person *pe, const plan *m) {
  int64_t card = pe->cards[m->slot];
  memmove(&pe->order[m->from][m->at], &pe->order[m->from][m->at + 1],
          (size_t)(pe->n[m->from] - m->at - 1) * sizeof(int64_t));
  pe->n[m->from]--;
  int to = m->to, i = (int)m->a.index;
  memmove(&pe->order[to][i + 1], &pe->order[to][i], (size_t)(pe->n[to] - i) * sizeof(int64_t));
  pe->order[to][i] = card;
  pe->n[to]++;
  pe->version[m->slot] = m->a.out.version;
  pe->ok++;
}

static void gate(person *pe, int64_t *ws, int64_t *we) {
  pthread_barrier_wait(&pe->r->gate);
  *ws = atomic_load(&pe->r->window_start);
  *we = atomic_load(&pe->r->window_end);
}

/* ---- arm: writer ------------------------------------------------------------------ */

static void *writer_person(void *arg) {
  person *pe = arg;
  run *r = pe->r;
  int64_t ws, we;
  gate(pe, &ws, &we);
  plan m;
  while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
    plan_move(pe, &m);
    int64_t t0 = bench_now_ns();
    int rc = lith_do(r->db, kb_move_card, &m.a);
    int64_t t1 = bench_now_ns();
    if (rc != LITH_OK) {
      person_error(pe, "lith_do(kb_move_card): %s: %s", kb_errstr(rc), lith_errmsg(r->db));
      continue;
    }
    if (m.a.out.version != m.a.seen_version + 1 || m.a.out.replayed) {
      person_error(pe, "%s%s", "move answered with the wrong version or as a replay", "");
      continue;
    }
    apply_move(pe, &m);
    if (t1 >= ws && t1 <= we) {
      pe->in_window++;
      bench_lat_add(&pe->call, (uint64_t)(t1 - t0));
    }
  }
  return NULL;
}

static void on_commit(void *ctx, const int64_t *topics, int n) {
  run *r = ctx;
  (void)topics;
  atomic_fetch_add_explicit(&r->touched, (uint64_t)n, memory_order_relaxed);
}

/* ---- arm: a connection per person --------------------------------------------------- */

static int open_plain(const char *path, int sync, sqlite3 **out) {
  lith_options d;
  lith_options_default(&d);
  bench_pragmas p = {sync == LITH_SYNC_FULL, d.cache_size_kib, (long long)d.mmap_size, d.foreign_keys};
  return bench_open_plain(path, &p, 30000, out);
}

static void *perconn_person(void *arg) {
  person *pe = arg;
  run *r = pe->r;
  sqlite3 *conn = NULL;
  kb_plain *kp = NULL;
  sqlite3_stmt *begin = NULL, *commit = NULL, *rollback = NULL;
  int ready = open_plain(r->path, r->sync, &conn) == SQLITE_OK && kb_plain_open(conn, &kp) == LITH_OK &&
              sqlite3_prepare_v2(conn, "BEGIN IMMEDIATE", -1, &begin, NULL) == SQLITE_OK &&
              sqlite3_prepare_v2(conn, "COMMIT", -1, &commit, NULL) == SQLITE_OK &&
              sqlite3_prepare_v2(conn, "ROLLBACK", -1, &rollback, NULL) == SQLITE_OK;
  if (!ready)
    person_error(pe, "%s: %s", "opening a connection", conn ? sqlite3_errmsg(conn) : "failed");
  int64_t ws, we;
  gate(pe, &ws, &we);
  plan m;
  while (ready && !atomic_load_explicit(&r->stop, memory_order_relaxed)) {
    plan_move(pe, &m);
    int64_t t0 = bench_now_ns();
    int src = sqlite3_step(begin);
    sqlite3_reset(begin);
    if (src != SQLITE_DONE) {
      person_error(pe, "%s: %s", "BEGIN IMMEDIATE", sqlite3_errmsg(conn));
      continue;
    }
    int64_t locked = bench_now_ns();
    int rc = kb_plain_run(kp, kb_move_card, &m.a);
    if (rc != LITH_OK) {
      person_error(pe, "kb_move_card: %s: %s", kb_errstr(rc), kb_plain_errmsg(kp));
      sqlite3_step(rollback);
      sqlite3_reset(rollback);
      continue;
    }
    src = sqlite3_step(commit);
    sqlite3_reset(commit);
    int64_t t1 = bench_now_ns();
    if (src != SQLITE_DONE) {
      person_error(pe, "%s: %s", "COMMIT", sqlite3_errmsg(conn));
      if (!sqlite3_get_autocommit(conn)) {
        sqlite3_step(rollback);
        sqlite3_reset(rollback);
      }
      continue;
    }
    apply_move(pe, &m);
    if (t1 >= ws && t1 <= we) {
      pe->in_window++;
      bench_lat_add(&pe->call, (uint64_t)(t1 - t0));
      bench_lat_add(&pe->tx, (uint64_t)(t1 - locked));
    }
  }
  sqlite3_finalize(begin);
  sqlite3_finalize(commit);
  sqlite3_finalize(rollback);
  kb_plain_close(kp);
  sqlite3_close(conn);
  return NULL;
}

/* ---- checks ------------------------------------------------------------------------- */

/* Everything the run must have left; returns the number of mismatches. */
static int64_t verify(run *r, int64_t ok_total) {
  sqlite3 *db;
  int err = 0;
  if (sqlite3_open_v2(r->path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
    bench_cell_error(r->cell, "check: cannot open %s", r->path);
    sqlite3_close(db);
    return 1;
  }
  sqlite3_stmt *st = NULL;
  if (!bench_quick_check_ok(db)) {
    bench_cell_error(r->cell, "check: quick_check failed");
    err++;
  }
  int64_t dup = bench_query_int(db,
                                "SELECT count(*) FROM (SELECT 1 FROM cards WHERE archived = 0"
                                " GROUP BY list_id, pos HAVING count(*) > 1)",
                                0, &err);
  if (dup != 0) {
    bench_cell_error(r->cell, "check: %lld positions shared by two cards of a list", (long long)dup);
    err++;
  }
  int64_t bumps = bench_query_int(db, "SELECT sum(version - 1) FROM cards", 0, &err);
  int64_t ops = bench_query_int(db, "SELECT count(*) FROM ops", 0, &err);
  int64_t bv = bench_query_int(db, "SELECT version FROM boards WHERE id = ?", r->board, &err);
  if (bumps != ok_total || ops != ok_total || bv - r->board_version0 != ok_total) {
    bench_cell_error(r->cell,
                     "check: %lld moves answered OK, but %lld card version bumps, %lld op records,"
                     " board version +%lld",
                     (long long)ok_total, (long long)bumps, (long long)ops,
                     (long long)(bv - r->board_version0));
    err++;
  }
  if (sqlite3_prepare_v2(db,
                         "SELECT id, version FROM cards WHERE list_id = ? AND archived = 0"
                         " ORDER BY pos, id",
                         -1, &st, NULL) != SQLITE_OK) {
    sqlite3_close(db);
    return err + 1;
  }
  int bad_lists = 0;
  for (int p = 0; p < r->P; p++) {
    person *pe = &r->people[p];
    for (int l = 0; l < 2; l++) {
      sqlite3_bind_int64(st, 1, pe->lists[l]);
      int i = 0, bad = 0;
      while (sqlite3_step(st) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0);
        int slot = slot_of(pe, id);
        if (i >= pe->n[l] || pe->order[l][i] != id || slot < 0 ||
            pe->version[slot] != sqlite3_column_int64(st, 1))
          bad = 1;
        i++;
      }
      sqlite3_reset(st);
      if (bad || i != pe->n[l])
        bad_lists++;
    }
  }
  sqlite3_finalize(st);
  if (bad_lists) {
    bench_cell_error(r->cell, "check: %d lists differ from their owner's model", bad_lists);
    err++;
  }
  sqlite3_close(db);
  return err;
}

/* ---- one arm run ----------------------------------------------------------------------- */

static const double QS[2] = {0.50, 0.99};

/* One arm at one cell: the harness's callback. */
static void run_cell(bench_cell *cell) {
  const config *c = cell->ctx;
  int arm = cell->arm, P = cell->val[D_PEOPLE], round = cell->round;
  run *r = calloc(1, sizeof *r);
  person *people = calloc((size_t)P, sizeof *people);
  seed *s = calloc(1, sizeof *s);
  pthread_t *th = calloc((size_t)P, sizeof *th);
  bench_lat **calls = calloc((size_t)P, sizeof *calls);
  bench_lat **txs = calloc((size_t)P, sizeof *txs);
  if (!r || !people || !s || !th || !calls || !txs) {
    bench_cell_error(cell, "out of memory");
    cell->errors++;
    goto done;
  }
  r->cfg = c;
  r->cell = cell;
  r->arm = arm;
  r->P = P;
  r->sync = cell->val[D_SYNC];
  r->checkpoint = cell->val[D_CKPT];
  r->people = people;
  snprintf(r->path, sizeof r->path, "%s/kanban-%s-p%d-r%d.db", c->cli.db_dir, ARM_NAME[arm], P, round + 1);
  bench_remove_db(r->path);
  for (int p = 0; p < P; p++) {
    people[p].r = r;
    people[p].idx = p;
    people[p].rng = 0x9E3779B97F4A7C15ULL * (uint64_t)(p + 1) + (uint64_t)round * 7919u + 1;
    calls[p] = &people[p].call;
    txs[p] = &people[p].tx;
    if (bench_lat_init(calls[p], LAT_CAP, LAT_CAP, people[p].rng ^ 1) != 0 ||
        bench_lat_init(txs[p], LAT_CAP, LAT_CAP, people[p].rng ^ 2) != 0) {
      bench_cell_error(cell, "out of memory");
      cell->errors++;
      goto done;
    }
  }

  /* Seed with lith (in one command) and close: both arms start from a
   * checkpointed file without WAL; the writer arm opens it again. */
  lith_options opt;
  lith_options_default(&opt);
  kb_options_schema(&opt);
  opt.synchronous = r->sync;
  opt.checkpoint = r->checkpoint;
  opt.readers = 1;
  opt.on_commit = on_commit;
  opt.on_commit_ctx = r;
  int rc = lith_open(r->path, &opt, &r->db);
  if (rc == LITH_OK) {
    s->r = r;
    rc = lith_do(r->db, seed_cmd, s);
  }
  if (rc != LITH_OK) {
    bench_cell_error(cell, "seeding %s: %s: %s", r->path, kb_errstr(rc), lith_errmsg(r->db));
    cell->errors++;
    if (r->db)
      lith_close(r->db);
    goto cleanup;
  }
  rc = lith_close(r->db);
  r->db = NULL;
  if (rc == LITH_OK && arm == ARM_WRITER)
    rc = lith_open(r->path, &opt, &r->db);
  if (rc != LITH_OK) {
    bench_cell_error(cell, "reopening %s: %s: %s", r->path, kb_errstr(rc), lith_errmsg(NULL));
    cell->errors++;
    goto cleanup;
  }

  pthread_barrier_init(&r->gate, NULL, (unsigned)P + 1);
  for (int p = 0; p < P; p++)
    pthread_create(&th[p], NULL, arm == ARM_WRITER ? writer_person : perconn_person, &people[p]);
  int64_t t0 = bench_now_ns() + 50 * 1000000LL; /* perconn threads open their connection first */
  int64_t ws = t0 + (int64_t)(c->cli.warmup * 1e9), we = ws + (int64_t)(c->cli.seconds * 1e9);
  atomic_store(&r->window_start, ws);
  atomic_store(&r->window_end, we);
  pthread_barrier_wait(&r->gate);
  lith_stats s0, s1;
  bench_sleep_until(ws);
  if (r->db)
    lith_stats_get(r->db, &s0);
  bench_sleep_until(we);
  if (r->db)
    lith_stats_get(r->db, &s1);
  atomic_store(&r->stop, 1);
  int64_t ok_total = 0, in_window = 0;
  for (int p = 0; p < P; p++) {
    pthread_join(th[p], NULL);
    ok_total += people[p].ok;
    in_window += people[p].in_window;
    if (people[p].errors) {
      bench_cell_error(cell, "person %d: %lld errors, the first: %s", p, (long long)people[p].errors,
                       people[p].first_error);
      cell->errors += people[p].errors;
    }
  }
  pthread_barrier_destroy(&r->gate);
  if (r->db) {
    rc = lith_close(r->db);
    r->db = NULL;
    if (rc != LITH_OK) {
      bench_cell_error(cell, "lith_close: %s", kb_errstr(rc));
      cell->errors++;
    }
  }

  cell->m[M_MOVES] = (double)in_window;
  cell->m[M_MOVES_S] = (double)in_window / c->cli.seconds;
  bench_cell_latency(cell, calls, P, M_CALL_P50, M_CALL_P99, -1);
  cell->m[M_CALL_MAX] = bench_lat_max_ms(calls, P);
  if (arm == ARM_WRITER) {
    uint64_t batches = s1.batches - s0.batches;
    uint64_t cmds = s1.commands - s0.commands;
    if (batches) {
      cell->m[M_MOVES_TX] = (double)cmds / (double)batches;
      cell->m[M_TX_MS] = (double)(s1.tx_ns_total - s0.tx_ns_total) / (double)batches / 1e6;
      cell->m[M_COMMIT_MS] = (double)(s1.commit_ns_total - s0.commit_ns_total) / (double)batches / 1e6;
      cell->m[M_TX_P99] = (double)lith_lat_quantile_ns(s1.tx_lat, s0.tx_lat, 0.99) / 1e6;
    }
    if (atomic_load(&r->touched) == 0) {
      bench_cell_error(cell, "on_commit never heard of the board");
      cell->errors++;
    }
  } else {
    bench_lat_sum ls;
    bench_lat_merge(txs, P, QS, 2, &ls);
    cell->m[M_MOVES_TX] = in_window ? 1.0 : NAN;
    cell->m[M_TX_MS] = ls.count ? (double)ls.sum / (double)ls.count / 1e6 : NAN;
    cell->m[M_TX_P99] = ls.q[1] / 1e6;
    cell->sampled |= ls.sampled;
  }
  cell->errors += verify(r, ok_total);

cleanup:
  bench_remove_db(r->path);
done:
  for (int p = 0; people && p < P; p++) {
    bench_lat_free(&people[p].call);
    bench_lat_free(&people[p].tx);
  }
  free(txs);
  free(calls);
  free(th);
  free(s);
  free(people);
  free(r);
}

/* ---- tables ------------------------------------------------------------------------------ */

static void fmt_ms(char *buf, size_t n, double ms) { bench_fmt_ms(buf, n, ms, 10); }

static void print_tables(const bench_harness *h, void *ctx) {
  const config *c = ctx;
  printf("\n| people | arm | moves/s median (min–max) | moves/tx | tx ms | of it COMMIT | tx p99 | call p50 "
         "| call p99 | call max | err | ÷conn |\n");
  printf("|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
  for (int pi = 0; pi < c->npeople; pi++)
    for (int arm = 0; arm < NARMS; arm++) {
      int idx[NDIM] = {0, 0, pi};
      if (!c->arms[arm])
        continue;
      bench_agg mv = bench_harness_agg(h, arm, idx, M_MOVES_S);
      char ms[NMETRIC][32], tx[32], ratio[32] = " ";
      for (int m = M_TX_MS; m <= M_CALL_MAX; m++)
        fmt_ms(ms[m], sizeof ms[m], bench_harness_agg(h, arm, idx, m).med);
      bench_fmt(tx, sizeof tx, "%.1f", bench_harness_agg(h, arm, idx, M_MOVES_TX).med);
      double q = bench_harness_ratio(h, ARM_WRITER, ARM_PERCONN, idx, M_MOVES_S);
      if (arm == ARM_WRITER && c->arms[ARM_PERCONN] && !isnan(q))
        snprintf(ratio, sizeof ratio, "%.2f×", q);
      printf("| %d | %s | %.0f (%.0f–%.0f) | %s | %s | %s | %s | %s | %s | %s | %lld | %s |\n", c->people[pi],
             ARM_NAME[arm], mv.med, mv.lo, mv.hi, tx, ms[M_TX_MS], ms[M_COMMIT_MS], ms[M_TX_P99],
             ms[M_CALL_P50], ms[M_CALL_P99], ms[M_CALL_MAX], (long long)bench_harness_errors(h, arm, idx),
             ratio);
    }
  printf("\nTimes in ms, medians over rounds. moves/s: moves answered OK inside the window. tx: BEGIN "
         "IMMEDIATE to end of COMMIT, mean (writer: from lith's stats; perconn: while holding the lock); "
         "of it COMMIT: the COMMIT statement alone (writer). tx p99: writer from lith's histogram (a "
         "bucket's upper bound). call: one lith_do, or BEGIN..COMMIT including the wait for the lock. "
         "÷conn: writer's median over perconn's.\n");
  /* the control kanban-rate (bench/controls.csv) judges the same cell */
  for (int pi = 0; pi < c->npeople; pi++)
    if (c->people[pi] == 200 && c->arms[ARM_WRITER] && c->sync == LITH_SYNC_FULL) {
      int idx[NDIM] = {0, 0, pi};
      double mv = bench_harness_agg(h, ARM_WRITER, idx, M_MOVES_S).med;
      printf("\ntarget: %s 200 people FULL writer ≥ 30,000 moves/s — %.0f\n", mv >= 30000 ? "PASS" : "MISS",
             mv);
    }
}

/* ---- options ------------------------------------------------------------------------------ */

static void usage(FILE *f) {
  fprintf(f, "usage: kanban [options]\n"
             "  --people LIST    people (threads), e.g. 1,50,200 (default)\n"
             "  --sync MODE      full (default) or normal\n"
             "  --checkpoint M   the writer arm's checkpoints: writer (default) or auto\n"
             "  --arms LIST      writer,perconn (default both)\n"
             "  --seconds S      measured window per run (default 3)\n"
             "  --warmup S       before the window (default 0.5)\n"
             "  --rounds N       rounds, arms interleaved (default 3)\n"
             "  --db-dir DIR     where the databases go (default a fresh /tmp/lith-kanban-XXXXXX)\n"
             "  --results PATH   the results file (default bench/results/kanban-YYYYMMDD-HHMMSS.jsonl)\n"
             "  --quick          smoke run: 1 round, 1 s, warm-up 0.25 s\n");
}

static int take_option(void *ctx, const char *a, const char *v) {
  static const char *const SYNC_WORD[] = {"full", "normal"}, *const CKPT_WORD[] = {"writer", "auto"};
  static const int SYNC_VAL[] = {LITH_SYNC_FULL, LITH_SYNC_NORMAL};
  static const int CKPT_VAL[] = {LITH_CHECKPOINT_WRITER, LITH_CHECKPOINT_AUTO};
  config *c = ctx;
  if (!strcmp(a, "--people")) {
    c->npeople = bench_parse_counts(v, a, "people", 1, MAX_P, c->people, 16);
  } else if (!strcmp(a, "--sync")) {
    bench_parse_words(v, a, SYNC_WORD, SYNC_VAL, 2, &c->sync, 1, "full or normal");
  } else if (!strcmp(a, "--checkpoint")) {
    bench_parse_words(v, a, CKPT_WORD, CKPT_VAL, 2, &c->checkpoint, 1, "writer or auto");
  } else if (!strcmp(a, "--arms")) {
    bench_parse_flags(v, a, ARM_NAME, NARMS, c->arms, "writer,perconn");
  } else {
    return 0;
  }
  return 1;
}

static void parse_args(int argc, char **argv, config *c) {
  c->cli = (bench_cli){.prog = "kanban", .usage = usage, .min_seconds = 0.1, .max_rounds = 64};
  c->sync = LITH_SYNC_FULL;
  c->checkpoint = LITH_CHECKPOINT_WRITER;
  c->arms[ARM_WRITER] = c->arms[ARM_PERCONN] = 1;
  bench_cli_parse(&c->cli, argc, argv, take_option, c);
  if (!c->npeople) {
    static const int def[] = {1, 50, 200};
    c->npeople = bench_list_default(c->people, def, 3, def, 3, c->cli.quick);
  }
}

static void print_header(void *ctx, const char *results_path) {
  const config *c = ctx;
  bench_machine m;
  bench_machine_get(&m);
  bench_print_intro("lith kanban MoveCard benchmark", c->cli.argc, c->cli.argv, 0);
  printf("machine: nproc %ld, kernel %s; SQLite %s, lith %s\n", m.nproc, m.kernel, sqlite3_libversion(),
         LITH_VERSION);
  printf("databases: %s\n", c->cli.db_dir);
  printf("plan: people");
  bench_print_ints(c->people, c->npeople);
  printf("; synchronous %s; writer checkpoints %s; %d cards per person", sync_name(c->sync),
         ckpt_name(c->checkpoint), CARDS);
  bench_print_arms_results(ARM_NAME, c->arms, NARMS, &c->cli, results_path);
}

int main(int argc, char **argv) {
  config c;
  /* As the kanban server does: no global memory statistics, so SQLite's
   * allocator takes no process-wide mutex on every malloc. Must come before
   * SQLite initialises. */
  sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
  memset(&c, 0, sizeof c);
  parse_args(argc, argv, &c);
  int64_t t_begin = bench_now_ns();
  char tmpdir[] = "/tmp/lith-kanban-XXXXXX";
  int own_dir = bench_db_dir(&c.cli.db_dir, tmpdir);

  bench_plan bp = {.program = "kanban",
                   .workload = "movecard",
                   BENCH_PLAN_ARMS(ARM_NAME),
                   .arm_on = c.arms,
                   .ndims = NDIM,
                   .dim_n = D_PEOPLE,
                   .dim_sync = D_SYNC,
                   BENCH_PLAN_METRICS(METRICS),
                   .flags = BENCH_ALTERNATE,
                   .ignores = ignores,
                   .run = run_cell,
                   .ctx = &c,
                   .cli = &c.cli};
  bench_plan_dim(&bp, D_SYNC, "sync", sync_name, &c.sync, 1);
  bench_plan_dim(&bp, D_CKPT, "checkpoint", ckpt_name, &c.checkpoint, 1);
  bench_plan_dim(&bp, D_PEOPLE, "people", NULL, c.people, c.npeople);
  /* Round r runs every people count before round r+1; odd rounds perconn first. */
  int64_t errors = bench_harness_main(&bp, print_header, print_tables);
  return bench_finish("all arms", errors, t_begin, own_dir, c.cli.db_dir);
}
