/*
 * Many producers at once. 200 threads x 500 transfers (the per-thread count
 * divided by LITH_TEST_SCALE), each thread owning 10 accounts and moving
 * money only among them with lith_do: every call returns LITH_OK; the
 * writer batches (batches < commands, mean batch size > 1, no failures,
 * stats.commands == commands answered); after lith_close every account
 * holds exactly the balance its producer computed (so the total is
 * unchanged), and the ledger holds exactly the answered commands: per
 * producer the count answered, seq 0..n-1, all present. Then fewer
 * producers mixing lith_do with windows of lith_submit on the same
 * accounts: all answered OK, each producer's commands ran in its order (its
 * balances come out exact), every done callback ran once.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "common.h"

#define DB "stress.db"
#define ACCOUNTS_PER 10
#define START_BALANCE 1000

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A producer's view of its own accounts, ids base+1 .. base+ACCOUNTS_PER. */
typedef struct producer {
  lith *db;
  pthread_barrier_t *start;
  int id;
  int n;           /* transfers to make */
  int async_every; /* 0: all lith_do; k: every k-th through lith_submit */
  int64_t bal[ACCOUNTS_PER];
  unsigned rng;
  /* results, read by main after join */
  int answered; /* lith_do returned or done ran */
  int not_ok;   /* answers other than LITH_OK */
  int first_bad_rc;
  char first_bad_msg[LITH_ERRMSG_MAX];
} producer;

static unsigned next_rand(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return *s >> 8;
}

/* Pick a transfer between two of p's accounts that cannot run short,
 * given that every earlier transfer of p ran first (p's commands run in p's
 * order), and apply it to p's own view. */
static void plan(producer *p, int seq, t_transfer *t) {
  int base = p->id * ACCOUNTS_PER;
  int s, d;
  int64_t amount;
  do {
    s = (int)(next_rand(&p->rng) % ACCOUNTS_PER);
  } while (p->bal[s] == 0);
  do {
    d = (int)(next_rand(&p->rng) % ACCOUNTS_PER);
  } while (d == s);
  amount = 1 + (int64_t)(next_rand(&p->rng) % (unsigned)p->bal[s]);
  if (amount > 50)
    amount = 1 + amount % 50;
  p->bal[s] -= amount;
  p->bal[d] += amount;
  memset(t, 0, sizeof *t);
  t->producer = p->id;
  t->seq = seq;
  t->src = base + s + 1;
  t->dst = base + d + 1;
  t->amount = amount;
}

static void note(producer *p, int rc, const char *msg) {
  p->answered++;
  if (rc != LITH_OK) {
    if (p->not_ok++ == 0) {
      p->first_bad_rc = rc;
      snprintf(p->first_bad_msg, sizeof p->first_bad_msg, "%s", msg);
    }
  }
}

/* ---- Asynchronous slots: a window of requests in flight per producer. */
#define WINDOW 8

typedef struct slot {
  lith_request req;
  t_transfer t;
  _Atomic int busy; /* set before submit, cleared by done */
  int rc;
  char msg[LITH_ERRMSG_MAX];
  _Atomic int done_calls;
} slot;

typedef struct async_producer {
  producer p;
  slot slots[WINDOW];
  int done_seen; /* done calls harvested */
} async_producer;

static void slot_done(lith_request *req) {
  slot *s = req->data;
  s->rc = req->rc;
  snprintf(s->msg, sizeof s->msg, "%s", req->errmsg);
  atomic_fetch_add(&s->done_calls, 1);
  atomic_store_explicit(&s->busy, 0, memory_order_release);
}

/* Wait until slot s is free and account for the answer it held. */
static void harvest(async_producer *ap, slot *s, int *pending) {
  while (atomic_load_explicit(&s->busy, memory_order_acquire))
    sched_yield();
  if (*pending) {
    note(&ap->p, s->rc, s->msg);
    *pending = 0;
  }
}

static void *run_producer(void *arg) {
  producer *p = arg;
  async_producer *ap = (async_producer *)arg; /* valid only if async_every */
  int pending[WINDOW] = {0};
  int next_slot = 0;
  pthread_barrier_wait(p->start);
  for (int i = 0; i < p->n; i++) {
    if (p->async_every && i % p->async_every == 0) {
      slot *s = &ap->slots[next_slot];
      harvest(ap, s, &pending[next_slot]);
      plan(p, i, &s->t);
      memset(&s->req, 0, sizeof s->req);
      s->req.fn = t_transfer_cmd;
      s->req.arg = &s->t;
      s->req.done = slot_done;
      s->req.data = s;
      atomic_store(&s->busy, 1);
      int rc = lith_submit(p->db, &s->req);
      if (rc != LITH_OK) {
        atomic_store(&s->busy, 0);
        note(p, rc, lith_errmsg(p->db));
      } else {
        pending[next_slot] = 1;
      }
      next_slot = (next_slot + 1) % WINDOW;
    } else {
      t_transfer t;
      plan(p, i, &t);
      int rc = lith_do(p->db, t_transfer_cmd, &t);
      note(p, rc, lith_errmsg(p->db));
    }
  }
  if (p->async_every)
    for (int k = 0; k < WINDOW; k++)
      harvest(ap, &ap->slots[k], &pending[k]);
  return NULL;
}

/* Compare every account's balance with its producer's view. */
static void check_balances(producer **ps, int nprod) {
  sqlite3 *c = NULL;
  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_open_v2(DB, &c, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_prepare_v2(c, "SELECT id, balance FROM accounts ORDER BY id", -1, &st, NULL),
                   SQLITE_OK);
  int rows = 0, wrong = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    int64_t id = sqlite3_column_int64(st, 0), bal = sqlite3_column_int64(st, 1);
    int p = (int)((id - 1) / ACCOUNTS_PER), k = (int)((id - 1) % ACCOUNTS_PER);
    rows++;
    if (p >= nprod || ps[p]->bal[k] != bal) {
      if (wrong++ < 5)
        fprintf(stderr, "account %lld: balance %lld, producer expected %lld\n", (long long)id, (long long)bal,
                p < nprod ? (long long)ps[p]->bal[k] : -1LL);
    }
  }
  sqlite3_finalize(st);
  sqlite3_close(c);
  assert_int_equal(rows, nprod * ACCOUNTS_PER);
  assert_int_equal(wrong, 0);
}

/* The ledger holds, per producer, exactly seq 0..n-1. */
static void check_ledger(int nprod, int n) {
  char sql[512];
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM ledger"), (int64_t)nprod * n);
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM (SELECT producer, count(*) c, min(seq) lo, max(seq) hi FROM ledger"
           " GROUP BY producer) WHERE c = %d AND lo = 0 AND hi = %d AND producer BETWEEN 0 AND %d",
           n, n - 1, nprod - 1);
  assert_int_equal(t_query_int(DB, sql), nprod);
}

static int hist_max_bucket(const lith_stats *s) {
  int k = -1;
  for (int i = 0; i < LITH_HIST_BUCKETS; i++)
    if (s->batch_hist[i])
      k = i;
  return k;
}

static void run_case(const char *name, int nprod, int per, int async_every, size_t each_size) {
  lith_options opt;
  t_bank_options(&opt);
  lith *db = t_open_fresh(DB, &opt);
  t_seed_accounts(db, nprod * ACCOUNTS_PER, START_BALANCE);

  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, (unsigned)nprod + 1);
  producer **ps = calloc((size_t)nprod, sizeof *ps);
  pthread_t *th = calloc((size_t)nprod, sizeof *th);
  assert_non_null(ps);
  assert_non_null(th);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  for (int i = 0; i < nprod; i++) {
    ps[i] = calloc(1, each_size);
    assert_non_null(ps[i]);
    producer *p = ps[i];
    p->db = db;
    p->start = &start;
    p->id = i;
    p->n = per;
    p->async_every = async_every;
    p->rng = 0x9e3779b9u ^ (unsigned)i * 2654435761u;
    for (int k = 0; k < ACCOUNTS_PER; k++)
      p->bal[k] = START_BALANCE;
    assert_int_equal(pthread_create(&th[i], &attr, run_producer, p), 0);
  }
  pthread_attr_destroy(&attr);

  lith_stats before, after;
  lith_stats_get(db, &before);
  double t0 = now_s();
  pthread_barrier_wait(&start);
  for (int i = 0; i < nprod; i++)
    assert_int_equal(pthread_join(th[i], NULL), 0);
  double elapsed = now_s() - t0;
  lith_stats_get(db, &after);

  long answered = 0;
  int not_ok = 0;
  for (int i = 0; i < nprod; i++) {
    answered += ps[i]->answered;
    if (ps[i]->not_ok) {
      if (not_ok == 0)
        fprintf(stderr, "producer %d: %d answers not OK, first %s: %s\n", i, ps[i]->not_ok,
                lith_errstr(ps[i]->first_bad_rc), ps[i]->first_bad_msg);
      not_ok += ps[i]->not_ok;
    }
    assert_int_equal(ps[i]->answered, per);
  }
  assert_int_equal(not_ok, 0);
  assert_int_equal(answered, (long)nprod * per);

  uint64_t commands = after.commands - before.commands;
  uint64_t batches = after.batches - before.batches;
  assert_int_equal(before.commands, 1); /* the seeding */
  assert_int_equal(commands, (uint64_t)answered);
  assert_int_equal(after.failed, 0);
  assert_int_equal(after.busy, 0);
  assert_true(batches >= 1);
  assert_true(batches < commands);
  double mean = (double)commands / (double)batches;
  assert_true(mean > 1.0);
  /* some batch held more than one command */
  int maxb = hist_max_bucket(&after);
  assert_true(maxb >= 1);
  assert_int_equal(after.queue_depth, 0);
  printf("%s: %d producers, %llu commands in %llu batches, mean batch %.1f, max batch in [%d, %d), "
         "%.2f s, %.0f commands/s\n",
         name, nprod, (unsigned long long)commands, (unsigned long long)batches, mean, 1 << maxb,
         1 << (maxb + 1), elapsed, (double)commands / elapsed);
  fflush(stdout);

  assert_int_equal(lith_close(db), LITH_OK);

  /* after close, on a fresh connection */
  t_assert_integrity(DB);
  assert_int_equal(t_query_int(DB, "SELECT sum(balance) FROM accounts"),
                   (int64_t)nprod * ACCOUNTS_PER * START_BALANCE);
  check_balances(ps, nprod);
  check_ledger(nprod, per);
  if (async_every) {
    /* each slot's done ran exactly once per use */
    long calls = 0;
    for (int i = 0; i < nprod; i++)
      for (int k = 0; k < WINDOW; k++)
        calls += atomic_load(&((async_producer *)ps[i])->slots[k].done_calls);
    long expected = 0;
    for (int i = 0; i < per; i++)
      if (i % async_every == 0)
        expected++;
    assert_int_equal(calls, expected * nprod);
  }

  pthread_barrier_destroy(&start);
  for (int i = 0; i < nprod; i++)
    free(ps[i]);
  free(ps);
  free(th);
}

static void test_200_producers_lith_do(void **state) {
  (void)state;
  run_case("stress", 200, t_scaled(500), 0, sizeof(producer));
}

static void test_producers_mix_do_and_submit(void **state) {
  (void)state;
  /* every other command asynchronous, up to WINDOW in flight per producer */
  run_case("stress-mixed", 16, t_scaled(4000), 2, sizeof(async_producer));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_200_producers_lith_do),
      cmocka_unit_test(test_producers_mix_do_and_submit),
  };
  return cmocka_run_group_tests_name("writer/stress", tests, NULL, NULL);
}
