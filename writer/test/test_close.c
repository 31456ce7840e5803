/*
 * lith_close while producers are submitting.
 *
 * Synchronous: 8 threads loop on lith_do (a transfer with a unique
 * (producer, seq) ledger row) until they get LITH_CLOSED, then call 4 more
 * times; lith_close runs in its own thread meanwhile. Asserted: no thread
 * hangs (bounded joins, and an alarm() watchdog for the whole binary); each
 * thread's answers are LITH_OK for a prefix and LITH_CLOSED from the first
 * LITH_CLOSED on (never anything else); after close the database holds
 * exactly the commands that returned LITH_OK (ledger seq 0..ok-1 per
 * producer, balances moved by exactly ok), and the command ran exactly ok
 * times: a command answered LITH_CLOSED never ran.
 *
 * Asynchronous: 4 threads loop on lith_submit (queue_capacity 64, so
 * LITH_QUEUE_FULL is retried too) until LITH_CLOSED; after lith_close
 * returned every accepted request's done ran exactly once with LITH_OK and
 * its row is in the database; no refused request's done ran, and no refused
 * command ran.
 *
 * Producers race lith_shutdown (run in its own thread), which drains and
 * closes the connections but keeps the handle valid, so a producer's call
 * after it still safely gets LITH_CLOSED; main joins every producer, then
 * the shutdown thread, and only then frees the handle with lith_close.
 *
 * After lith_shutdown every call returns LITH_CLOSED, a second shutdown
 * returns the first one's result, and the WAL has been truncated.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common.h"

#define DB "close.db"
#define BIG_BALANCE 1000000000LL
#define EXTRA_CALLS 4 /* calls after the first LITH_CLOSED */
#define WATCHDOG_S 120

static void watchdog(int sig) {
  (void)sig;
  static const char msg[] = "test_close: watchdog: a thread hung (no progress within the alarm)\n";
  ssize_t r = write(2, msg, sizeof msg - 1);
  (void)r;
  _exit(3);
}

static void join_within(pthread_t th, int seconds, const char *what) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += seconds;
  int rc = pthread_timedjoin_np(th, NULL, &ts);
  if (rc != 0)
    fail_msg("%s did not finish within %d s (pthread_timedjoin_np: %d)", what, seconds, rc);
}

/* ---- Shutting down in a thread of its own ------------------------------- */

static void close_options(lith_options *opt) { t_bank_options(opt); }

typedef struct closer {
  lith *db;
  int rc;
} closer;

static void *closer_main(void *arg) {
  closer *c = arg;
  c->rc = lith_shutdown(c->db);
  return NULL;
}

/* Call after every producer has seen LITH_CLOSED. */
static void finish_close(closer *c, pthread_t th) {
  join_within(th, 30, "lith_shutdown");
  assert_int_equal(c->rc, LITH_OK);
  assert_int_equal(lith_close(c->db), LITH_OK);
}

/* ---- A transfer that counts its runs ----------------------------------- */

typedef struct counted {
  t_transfer t;
  _Atomic int *runs;
  _Atomic int64_t *max_seq_run;
} counted;

static int counted_cmd(lith_tx *tx, void *arg) {
  counted *c = arg;
  atomic_fetch_add(c->runs, 1);
  int64_t m = atomic_load(c->max_seq_run);
  while (c->t.seq > m && !atomic_compare_exchange_weak(c->max_seq_run, &m, c->t.seq))
    ;
  return t_transfer_cmd(tx, &c->t);
}

static void set_transfer(t_transfer *t, int producer, int64_t seq) {
  memset(t, 0, sizeof *t);
  t->producer = producer;
  t->seq = seq;
  t->src = 2 * producer + 1;
  t->dst = 2 * producer + 2;
  t->amount = 1;
}

/* Per producer: ledger seq 0..ok-1 exactly, and balances moved by ok. */
static void check_producer_rows(int producer, int64_t ok) {
  char sql[256];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM ledger WHERE producer = %d", producer);
  assert_int_equal(t_query_int(DB, sql), ok);
  if (ok > 0) {
    snprintf(sql, sizeof sql, "SELECT min(seq) FROM ledger WHERE producer = %d", producer);
    assert_int_equal(t_query_int(DB, sql), 0);
    snprintf(sql, sizeof sql, "SELECT max(seq) FROM ledger WHERE producer = %d", producer);
    assert_int_equal(t_query_int(DB, sql), ok - 1);
  }
  snprintf(sql, sizeof sql, "SELECT balance FROM accounts WHERE id = %d", 2 * producer + 1);
  assert_int_equal(t_query_int(DB, sql), BIG_BALANCE - ok);
  snprintf(sql, sizeof sql, "SELECT balance FROM accounts WHERE id = %d", 2 * producer + 2);
  assert_int_equal(t_query_int(DB, sql), BIG_BALANCE + ok);
}

/* ---- Synchronous producers ------------------------------------------------ */

enum { NSYNC = 8 };

typedef struct sync_prod {
  lith *db;
  int id;
  pthread_barrier_t *start;
  _Atomic int64_t ok; /* LITH_OK answers (read by main while running) */
  int64_t closed;     /* LITH_CLOSED answers */
  int64_t ok_after_closed;
  int64_t other; /* any other answer */
  int other_rc;
  char other_msg[LITH_ERRMSG_MAX];
  _Atomic int runs; /* written by the command, on the writer thread */
  _Atomic int64_t max_seq_run;
} sync_prod;

static void *sync_main(void *arg) {
  sync_prod *p = arg;
  int64_t seq = 0;
  pthread_barrier_wait(p->start);
  while (p->closed < 1 + EXTRA_CALLS) {
    counted c;
    set_transfer(&c.t, p->id, seq++);
    c.runs = &p->runs;
    c.max_seq_run = &p->max_seq_run;
    int rc = lith_do(p->db, counted_cmd, &c);
    if (rc == LITH_OK) {
      if (p->closed)
        p->ok_after_closed++;
      else
        atomic_fetch_add(&p->ok, 1);
    } else if (rc == LITH_CLOSED) {
      p->closed++;
    } else {
      if (p->other++ == 0) {
        p->other_rc = rc;
        snprintf(p->other_msg, sizeof p->other_msg, "%s", lith_errmsg(p->db));
      }
      if (p->other > 100)
        break;
    }
  }
  return NULL;
}

static void test_close_while_lith_do(void **state) {
  (void)state;
  lith_options opt;
  close_options(&opt);
  lith *db = t_open_fresh(DB, &opt);
  t_seed_accounts(db, 2 * NSYNC, BIG_BALANCE);

  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, NSYNC + 1);
  sync_prod *ps = calloc(NSYNC, sizeof *ps);
  assert_non_null(ps);
  pthread_t th[NSYNC];
  for (int i = 0; i < NSYNC; i++) {
    ps[i].db = db;
    ps[i].id = i;
    ps[i].start = &start;
    atomic_init(&ps[i].max_seq_run, -1);
    assert_int_equal(pthread_create(&th[i], NULL, sync_main, &ps[i]), 0);
  }
  pthread_barrier_wait(&start);
  /* close only once every producer is well under way */
  for (int i = 0; i < NSYNC; i++)
    for (int k = 0; k < 20000 && atomic_load(&ps[i].ok) < 20; k++)
      usleep(500);
  for (int i = 0; i < NSYNC; i++)
    assert_true(atomic_load(&ps[i].ok) >= 20);
  usleep(20 * 1000);

  closer cl = {db, -1};
  pthread_t cth;
  assert_int_equal(pthread_create(&cth, NULL, closer_main, &cl), 0);
  for (int i = 0; i < NSYNC; i++)
    join_within(th[i], 30, "a producer");
  finish_close(&cl, cth);

  int64_t total = 0;
  for (int i = 0; i < NSYNC; i++) {
    sync_prod *p = &ps[i];
    if (p->other)
      fail_msg("producer %d: %lld answers neither OK nor CLOSED, first %s: %s", i, (long long)p->other,
               lith_errstr(p->other_rc), p->other_msg);
    assert_int_equal(p->ok_after_closed, 0);
    assert_int_equal(p->closed, 1 + EXTRA_CALLS);
    int64_t ok = atomic_load(&p->ok);
    /* the command ran once per LITH_OK, never for a LITH_CLOSED */
    assert_int_equal(atomic_load(&p->runs), ok);
    assert_int_equal(atomic_load(&p->max_seq_run), ok - 1);
    check_producer_rows(i, ok);
    total += ok;
  }
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM ledger"), total);
  assert_int_equal(t_query_int(DB, "SELECT sum(balance) FROM accounts"), 2 * NSYNC * BIG_BALANCE);
  t_assert_integrity(DB);
  printf("close: %d producers, %lld commands answered OK before the close\n", NSYNC, (long long)total);
  pthread_barrier_destroy(&start);
  free(ps);
}

/* ---- Asynchronous producers ----------------------------------------------- */

enum { NASYNC = 4 };

typedef struct areq {
  lith_request req;
  counted c;
  _Atomic int done_calls;
  int rc;
  char msg[LITH_ERRMSG_MAX];
} areq;

static void areq_done(lith_request *req) {
  areq *a = req->data;
  a->rc = req->rc;
  snprintf(a->msg, sizeof a->msg, "%s", req->errmsg);
  atomic_fetch_add(&a->done_calls, 1);
}

typedef struct async_prod {
  lith *db;
  int id;
  pthread_barrier_t *start;
  areq **reqs; /* every request made, accepted or not, in seq order */
  int64_t nreqs, cap;
  _Atomic int64_t accepted;
  int64_t closed, accepted_after_closed, full_after_closed, full, other;
  int other_rc;
  _Atomic int runs;
  _Atomic int64_t max_seq_run;
} async_prod;

static void *async_main(void *arg) {
  async_prod *p = arg;
  pthread_barrier_wait(p->start);
  while (p->closed < 1 + EXTRA_CALLS) {
    if (p->nreqs == p->cap) {
      p->cap = p->cap ? 2 * p->cap : 1024;
      areq **n = realloc(p->reqs, (size_t)p->cap * sizeof *n);
      if (!n)
        break;
      p->reqs = n;
    }
    areq *a = calloc(1, sizeof *a);
    if (!a)
      break;
    p->reqs[p->nreqs] = a;
    set_transfer(&a->c.t, p->id, p->nreqs);
    p->nreqs++;
    a->c.runs = &p->runs;
    a->c.max_seq_run = &p->max_seq_run;
    a->rc = -1;
    for (;;) {
      a->req.fn = counted_cmd;
      a->req.arg = &a->c;
      a->req.done = areq_done;
      a->req.data = a;
      int rc = lith_submit(p->db, &a->req);
      if (rc == LITH_QUEUE_FULL) {
        if (p->closed)
          p->full_after_closed++;
        p->full++;
        sched_yield();
        continue; /* the same request, the same seq */
      }
      if (rc == LITH_OK) {
        if (p->closed)
          p->accepted_after_closed++;
        atomic_fetch_add(&p->accepted, 1);
      } else if (rc == LITH_CLOSED) {
        p->closed++;
      } else {
        if (p->other++ == 0)
          p->other_rc = rc;
      }
      break;
    }
    if (p->other > 100)
      break;
  }
  return NULL;
}

static void test_close_while_submitting(void **state) {
  (void)state;
  lith_options opt;
  close_options(&opt);
  opt.queue_capacity = 64;
  lith *db = t_open_fresh(DB, &opt);
  t_seed_accounts(db, 2 * NASYNC, BIG_BALANCE);

  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, NASYNC + 1);
  async_prod *ps = calloc(NASYNC, sizeof *ps);
  assert_non_null(ps);
  pthread_t th[NASYNC];
  for (int i = 0; i < NASYNC; i++) {
    ps[i].db = db;
    ps[i].id = i;
    ps[i].start = &start;
    atomic_init(&ps[i].max_seq_run, -1);
    assert_int_equal(pthread_create(&th[i], NULL, async_main, &ps[i]), 0);
  }
  pthread_barrier_wait(&start);
  for (int i = 0; i < NASYNC; i++)
    for (int k = 0; k < 20000 && atomic_load(&ps[i].accepted) < 200; k++)
      usleep(500);
  for (int i = 0; i < NASYNC; i++)
    assert_true(atomic_load(&ps[i].accepted) >= 200);

  closer cl = {db, -1};
  pthread_t cth;
  assert_int_equal(pthread_create(&cth, NULL, closer_main, &cl), 0);
  for (int i = 0; i < NASYNC; i++)
    join_within(th[i], 30, "a submitter");
  finish_close(&cl, cth);

  /* lith_shutdown has returned: every accepted request has been answered */
  int64_t total = 0, full = 0;
  for (int i = 0; i < NASYNC; i++) {
    async_prod *p = &ps[i];
    if (p->other)
      fail_msg("submitter %d: %lld results neither OK, QUEUE_FULL nor CLOSED, first %s", i,
               (long long)p->other, lith_errstr(p->other_rc));
    assert_int_equal(p->accepted_after_closed, 0);
    assert_int_equal(p->full_after_closed, 0);
    assert_int_equal(p->closed, 1 + EXTRA_CALLS);
    int64_t acc = atomic_load(&p->accepted);
    assert_int_equal(p->nreqs, acc + 1 + EXTRA_CALLS);
    for (int64_t k = 0; k < p->nreqs; k++) {
      areq *a = p->reqs[k];
      int calls = atomic_load(&a->done_calls);
      if (k < acc) {
        if (calls != 1 || a->rc != LITH_OK)
          fail_msg("submitter %d request %lld (accepted): done ran %d times, rc %s: %s", i, (long long)k,
                   calls, lith_errstr(a->rc), a->msg);
      } else if (calls != 0) {
        fail_msg("submitter %d request %lld (refused): done ran %d times", i, (long long)k, calls);
      }
    }
    assert_int_equal(atomic_load(&p->runs), acc);
    assert_int_equal(atomic_load(&p->max_seq_run), acc - 1);
    check_producer_rows(i, acc);
    total += acc;
    full += p->full;
  }
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM ledger"), total);
  t_assert_integrity(DB);
  printf("close: %d submitters, %lld requests accepted before the close, %lld QUEUE_FULL retries\n", NASYNC,
         (long long)total, (long long)full);
  for (int i = 0; i < NASYNC; i++) {
    for (int64_t k = 0; k < ps[i].nreqs; k++)
      free(ps[i].reqs[k]);
    free(ps[i].reqs);
  }
  pthread_barrier_destroy(&start);
  free(ps);
}

static int read_sum(lith_rx *rx, void *arg) {
  return lith_rx_int64(rx, (int64_t *)arg, "SELECT sum(balance) FROM accounts", NULL);
}

static void ignore_done(lith_request *req) { (void)req; }

/* After lith_shutdown the handle stays valid and refuses everything. */
static void test_calls_after_shutdown(void **state) {
  (void)state;
  lith_options opt;
  close_options(&opt);
  lith *db = t_open_fresh(DB, &opt);
  t_seed_accounts(db, 2, 5);
  assert_int_equal(lith_shutdown(db), LITH_OK);
  assert_int_equal(lith_do(db, t_put_cmd, "late"), LITH_CLOSED);
  assert_non_null(strstr(lith_errmsg(db), "closing"));
  assert_int_equal(lith_do_deadline(db, t_put_cmd, "late", lith_clock_ms() + 100), LITH_CLOSED);
  lith_request req;
  memset(&req, 0, sizeof req);
  req.fn = t_put_cmd;
  req.arg = "late";
  req.done = ignore_done;
  assert_int_equal(lith_submit(db, &req), LITH_CLOSED);
  int64_t sum = -1;
  assert_int_equal(lith_read(db, read_sum, &sum), LITH_CLOSED);
  assert_int_equal(lith_backup(db, "late-backup.db"), LITH_CLOSED);
  lith_stats st;
  lith_stats_get(db, &st);
  assert_int_equal(st.commands, 1); /* the final figures: the seeding command */
  assert_int_equal(st.queue_depth, 0);
  assert_int_equal(lith_shutdown(db), LITH_OK); /* again: the first one's result */
  /* the TRUNCATE checkpoint ran: no WAL left behind */
  struct stat sb;
  if (stat(DB "-wal", &sb) == 0)
    assert_int_equal(sb.st_size, 0);
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(t_query_int(DB, "SELECT sum(balance) FROM accounts"), 10);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM kv"), 0);
  assert_int_equal(access("late-backup.db", F_OK), -1);
}

int main(void) {
  signal(SIGALRM, watchdog);
  alarm(WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_calls_after_shutdown),
      cmocka_unit_test(test_close_while_lith_do),
      cmocka_unit_test(test_close_while_submitting),
  };
  return cmocka_run_group_tests_name("writer/close", tests, NULL, NULL);
}
