/*
 * The internal MPSC queue (writer/queue.h), alone: a fresh queue is idle and
 * pops NULL; one thread's pushes pop in FIFO order, also when pushes and
 * pops interleave (the stub node is re-inserted behind the last node); a
 * push stopped between its exchange and its link store makes pop return
 * NULL while the queue is not idle, and the node comes out once the link
 * lands; and 8 producer threads pushing 100k nodes each while one consumer
 * pops concurrently: every node is popped exactly once, the stub never
 * escapes, and each producer's nodes come out in the order it pushed them.
 *
 * Admission to a full queue (lith.c): with queue_capacity 1, 2,000 threads
 * (fewer under LITH_TEST_SCALE) x 20 lith_do each all complete and every
 * row is in the database; a take wakes as many waiters as it freed slots,
 * not all of them, so this takes seconds, not minutes (the time is printed,
 * not asserted). Waiters whose deadline passes (lith_do_deadline of 1-40 ms)
 * while others wait without one (lith_do) leave with LITH_QUEUE_FULL and
 * strand nobody: every lith_do completes, and the rows are exactly the
 * accepted commands.
 *
 * lith_submit from inside a command is refused (LITH_MISUSE, its done never
 * runs, nothing of it is written), also when the command then fails; from a
 * done callback it is how an async producer resubmits, and works.
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
#include <unistd.h>

#include <cmocka.h>

#include "../queue.h"
#include "common.h"

typedef struct item {
  lith__qnode node; /* first: a node pointer is an item pointer */
  int producer;
  int seq;
  _Atomic int popped;
} item;

static item *item_of(lith__qnode *n) { return (item *)(void *)((char *)n - offsetof(item, node)); }

static void test_empty_queue_is_idle(void **state) {
  (void)state;
  lith__queue q;
  lith__queue_init(&q);
  assert_true(lith__queue_idle(&q));
  assert_null(lith__queue_pop(&q));
  assert_null(lith__queue_pop(&q));
  assert_true(lith__queue_idle(&q));

  /* one node in, one out, empty again (the stub went back in behind it) */
  item a = {.producer = 0, .seq = 1};
  lith__queue_push(&q, &a.node);
  assert_false(lith__queue_idle(&q));
  lith__qnode *n = lith__queue_pop(&q);
  assert_ptr_equal(n, &a.node);
  assert_true(lith__queue_idle(&q));
  assert_null(lith__queue_pop(&q));
  assert_true(lith__queue_idle(&q));
}

static void test_single_thread_fifo(void **state) {
  (void)state;
  enum { N = 1000 };
  static item it[N];
  lith__queue q;
  lith__queue_init(&q);
  for (int i = 0; i < N; i++) {
    it[i].seq = i;
    lith__queue_push(&q, &it[i].node);
  }
  assert_false(lith__queue_idle(&q));
  for (int i = 0; i < N; i++) {
    lith__qnode *n = lith__queue_pop(&q);
    assert_non_null(n);
    assert_ptr_not_equal(n, &q.stub);
    assert_int_equal(item_of(n)->seq, i);
  }
  assert_null(lith__queue_pop(&q));
  assert_true(lith__queue_idle(&q));

  /* interleaved: push 3, pop 2, push 3, pop 2, ... then drain; order kept
   * across every stub re-insertion */
  int pushed = 0, popped = 0;
  while (pushed < N) {
    for (int k = 0; k < 3 && pushed < N; k++)
      lith__queue_push(&q, &it[pushed++].node);
    for (int k = 0; k < 2 && popped < pushed; k++) {
      lith__qnode *n = lith__queue_pop(&q);
      assert_non_null(n);
      assert_int_equal(item_of(n)->seq, popped++);
    }
  }
  while (popped < N) {
    lith__qnode *n = lith__queue_pop(&q);
    assert_non_null(n);
    assert_int_equal(item_of(n)->seq, popped++);
  }
  assert_null(lith__queue_pop(&q));
  assert_true(lith__queue_idle(&q));

  /* one at a time: every pop empties the queue and re-inserts the stub */
  for (int i = 0; i < 10; i++) {
    lith__queue_push(&q, &it[i].node);
    lith__qnode *n = lith__queue_pop(&q);
    assert_ptr_equal(n, &it[i].node);
    assert_null(lith__queue_pop(&q));
    assert_true(lith__queue_idle(&q));
  }
}

/* The documented caveat, produced by hand: a push that has done its
 * exchange but not yet its link store. */
static void test_half_done_push(void **state) {
  (void)state;
  lith__queue q;
  item a = {.seq = 0}, b = {.seq = 1}, c = {.seq = 2};
  lith__queue_init(&q);
  lith__queue_push(&q, &a.node);

  /* half a push of b: exchange only */
  atomic_store(&b.node.next, NULL);
  lith__qnode *prev = atomic_exchange(&q.head, &b.node);
  assert_ptr_equal(prev, &a.node);

  /* a is not handed out: its successor is unknown yet, so it cannot be
   * told apart from the last node */
  assert_null(lith__queue_pop(&q));
  assert_false(lith__queue_idle(&q));

  /* another producer pushes c completely behind the half-done b */
  lith__queue_push(&q, &c.node);
  assert_false(lith__queue_idle(&q));
  /* still nothing: a's successor (b) is not linked yet */
  assert_null(lith__queue_pop(&q));

  /* the link lands: everything comes out, in order */
  atomic_store(&prev->next, &b.node);
  lith__qnode *n = lith__queue_pop(&q);
  assert_ptr_equal(n, &a.node);
  n = lith__queue_pop(&q);
  assert_ptr_equal(n, &b.node);
  n = lith__queue_pop(&q);
  assert_ptr_equal(n, &c.node);
  assert_null(lith__queue_pop(&q));
  assert_true(lith__queue_idle(&q));
}

/* ---- Many producers, one consumer ---------------------------------------- */

enum { NPROD = 8 };

typedef struct mpsc {
  lith__queue q;
  item *items[NPROD];
  int per;
  pthread_barrier_t start;
  /* consumer's findings */
  long popped, dup, stub, bad_order, bad_producer, null_not_idle;
} mpsc;

typedef struct prod_arg {
  mpsc *m;
  int id;
} prod_arg;

static void *producer(void *arg) {
  prod_arg *a = arg;
  mpsc *m = a->m;
  item *it = m->items[a->id];
  pthread_barrier_wait(&m->start);
  for (int i = 0; i < m->per; i++) {
    lith__queue_push(&m->q, &it[i].node);
    if ((i & 1023) == 0)
      sched_yield(); /* let the consumer catch up and empty the queue now and then */
  }
  return NULL;
}

static void *consumer(void *arg) {
  mpsc *m = arg;
  long total = (long)NPROD * m->per;
  int next[NPROD] = {0};
  pthread_barrier_wait(&m->start);
  while (m->popped < total) {
    lith__qnode *n = lith__queue_pop(&m->q);
    if (n == NULL) {
      if (!lith__queue_idle(&m->q))
        m->null_not_idle++; /* a push half done: look again */
      sched_yield();
      continue;
    }
    if (n == &m->q.stub) {
      m->stub++;
      continue;
    }
    item *it = item_of(n);
    if (atomic_fetch_add(&it->popped, 1) != 0)
      m->dup++;
    if (it->producer < 0 || it->producer >= NPROD) {
      m->bad_producer++;
    } else {
      if (it->seq != next[it->producer])
        m->bad_order++;
      next[it->producer] = it->seq + 1;
    }
    m->popped++;
  }
  return NULL;
}

static void test_many_producers_one_consumer(void **state) {
  (void)state;
  mpsc *m = calloc(1, sizeof *m);
  assert_non_null(m);
  m->per = 100000;
  lith__queue_init(&m->q);
  for (int p = 0; p < NPROD; p++) {
    m->items[p] = calloc((size_t)m->per, sizeof(item));
    assert_non_null(m->items[p]);
    for (int i = 0; i < m->per; i++) {
      m->items[p][i].producer = p;
      m->items[p][i].seq = i;
    }
  }
  pthread_barrier_init(&m->start, NULL, NPROD + 1);
  pthread_t prod[NPROD], cons;
  prod_arg pa[NPROD];
  assert_int_equal(pthread_create(&cons, NULL, consumer, m), 0);
  for (int p = 0; p < NPROD; p++) {
    pa[p] = (prod_arg){m, p};
    assert_int_equal(pthread_create(&prod[p], NULL, producer, &pa[p]), 0);
  }
  for (int p = 0; p < NPROD; p++)
    assert_int_equal(pthread_join(prod[p], NULL), 0);
  assert_int_equal(pthread_join(cons, NULL), 0);

  assert_int_equal(m->popped, (long)NPROD * m->per);
  assert_int_equal(m->dup, 0);
  assert_int_equal(m->stub, 0);
  assert_int_equal(m->bad_producer, 0);
  assert_int_equal(m->bad_order, 0);
  for (int p = 0; p < NPROD; p++)
    for (int i = 0; i < m->per; i++)
      if (atomic_load(&m->items[p][i].popped) != 1)
        fail_msg("producer %d node %d popped %d times", p, i, atomic_load(&m->items[p][i].popped));
  /* everything out: the queue is empty and idle again */
  assert_null(lith__queue_pop(&m->q));
  assert_true(lith__queue_idle(&m->q));
  printf("queue: %d producers x %d nodes, pop saw a half-done push %ld times\n", NPROD, m->per,
         m->null_not_idle);

  pthread_barrier_destroy(&m->start);
  for (int p = 0; p < NPROD; p++)
    free(m->items[p]);
  free(m);
}

/* ---- Waiting for room in a full queue (lith.c) ---------------------------- */

#define DB "queue.db"
#define PER_THREAD 20

typedef struct crowd {
  lith *db;
  pthread_barrier_t start;
  int us;                             /* how long each lith_do command sleeps */
  _Atomic int ok, bad;                /* lith_do outcomes */
  _Atomic int dl_ok, dl_full, dl_bad; /* lith_do_deadline outcomes */
  _Atomic int finished;               /* threads done */
} crowd;

typedef struct member {
  crowd *c;
  int id;
  int deadline; /* 0: lith_do; else lith_do_deadline within 1-40 ms */
} member;

/* The command's argument: its crowd, and its key. */
typedef struct put_arg {
  const crowd *c;
  char key[40];
} put_arg;

static int put_slowly(lith_tx *tx, void *arg) {
  const put_arg *pa = arg;
  if (pa->c->us)
    usleep((useconds_t)pa->c->us);
  return t_put_cmd(tx, (void *)pa->key);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *crowd_thread(void *arg) {
  member *m = arg;
  crowd *c = m->c;
  pthread_barrier_wait(&c->start);
  for (int i = 0; i < PER_THREAD; i++) {
    put_arg pa = {.c = c};
    snprintf(pa.key, sizeof pa.key, "%s%d-%d", m->deadline ? "dl" : "do", m->id, i);
    if (m->deadline) {
      int rc = lith_do_deadline(c->db, put_slowly, &pa, lith_clock_ms() + 1 + (m->id * 7 + i * 13) % 40);
      if (rc == LITH_OK)
        atomic_fetch_add(&c->dl_ok, 1);
      else if (rc == LITH_QUEUE_FULL)
        atomic_fetch_add(&c->dl_full, 1);
      else
        atomic_fetch_add(&c->dl_bad, 1);
    } else {
      if (lith_do(c->db, put_slowly, &pa) == LITH_OK)
        atomic_fetch_add(&c->ok, 1);
      else
        atomic_fetch_add(&c->bad, 1);
    }
  }
  atomic_fetch_add(&c->finished, 1);
  return NULL;
}

/* Run n_do lith_do threads and n_dl lith_do_deadline threads, PER_THREAD
 * calls each, against a handle with queue_capacity 1; fail (rather than
 * hang) if they have not all finished within `limit_s`. Returns the seconds
 * it took. */
static double run_crowd(crowd *c, int n_do, int n_dl, int limit_s) {
  int n = n_do + n_dl;
  member *m = calloc((size_t)n, sizeof *m);
  pthread_t *th = calloc((size_t)n, sizeof *th);
  assert_non_null(m);
  assert_non_null(th);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024); /* thousands of threads: small stacks */
  pthread_barrier_init(&c->start, NULL, (unsigned)n + 1);
  for (int i = 0; i < n; i++) {
    m[i] = (member){c, i, i >= n_do};
    int err = pthread_create(&th[i], &attr, crowd_thread, &m[i]);
    if (err)
      fail_msg("pthread_create %d of %d: %s", i, n, strerror(err));
  }
  pthread_attr_destroy(&attr);
  double t0 = now_s();
  pthread_barrier_wait(&c->start);
  while (atomic_load(&c->finished) < n) {
    if (now_s() - t0 >= limit_s)
      fail_msg("%d of %d threads still waiting after %d s: stranded while the queue had room",
               n - atomic_load(&c->finished), n, limit_s);
    usleep(10000);
  }
  double secs = now_s() - t0;
  for (int i = 0; i < n; i++)
    pthread_join(th[i], NULL);
  pthread_barrier_destroy(&c->start);
  free(th);
  free(m);
  return secs;
}

static void test_capacity_one_many_threads(void **state) {
  (void)state;
  lith_options opt;
  t_bank_options(&opt);
  opt.queue_capacity = 1;
  crowd c = {.us = 0};
  c.db = t_open_fresh(DB, &opt);
  int n = t_scaled(2000);
  double secs = run_crowd(&c, n, 0, 300);
  printf("queue_capacity 1: %d threads x %d lith_do in %.2f s\n", n, PER_THREAD, secs);
  assert_int_equal(atomic_load(&c.bad), 0);
  assert_int_equal(atomic_load(&c.ok), n * PER_THREAD);
  assert_int_equal(lith_close(c.db), LITH_OK);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM kv WHERE k LIKE 'do%'"), n * PER_THREAD);
}

static void test_expired_deadlines_strand_nobody(void **state) {
  (void)state;
  lith_options opt;
  t_bank_options(&opt);
  opt.queue_capacity = 1;
  crowd c = {.us = 100}; /* slow enough that many 1-40 ms deadlines pass */
  c.db = t_open_fresh(DB, &opt);
  int n_do = t_scaled(200), n_dl = t_scaled(200);
  double secs = run_crowd(&c, n_do, n_dl, 300);
  printf("queue_capacity 1: %d lith_do + %d lith_do_deadline threads x %d in %.2f s: "
         "deadline calls %d accepted, %d expired\n",
         n_do, n_dl, PER_THREAD, secs, atomic_load(&c.dl_ok), atomic_load(&c.dl_full));
  assert_int_equal(atomic_load(&c.bad), 0);
  assert_int_equal(atomic_load(&c.dl_bad), 0);
  assert_int_equal(atomic_load(&c.ok), n_do * PER_THREAD);
  assert_int_equal(atomic_load(&c.dl_ok) + atomic_load(&c.dl_full), n_dl * PER_THREAD);
  assert_true(atomic_load(&c.dl_full) > 0); /* waiters did leave on their deadline */
  assert_int_equal(lith_close(c.db), LITH_OK);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM kv WHERE k LIKE 'do%'"), n_do * PER_THREAD);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM kv WHERE k LIKE 'dl%'"), atomic_load(&c.dl_ok));
}

/* ---- lith_submit from the writer thread ----------------------------------- */

typedef struct inner {
  lith *db;
  lith_request req;
  int rc;
  char msg[256];
  int fail; /* the command fails after its lith_submit */
  _Atomic int done_ran;
} inner;

static void inner_done(lith_request *r) { atomic_fetch_add(&((inner *)r->data)->done_ran, 1); }

static int submit_inside(lith_tx *tx, void *arg) {
  inner *s = arg;
  s->req.fn = t_put_cmd;
  s->req.arg = s->fail ? "inner-of-failing" : "inner";
  s->req.done = inner_done;
  s->req.data = s;
  s->rc = lith_submit(s->db, &s->req);
  snprintf(s->msg, sizeof s->msg, "%s", lith_errmsg(NULL));
  int rc = t_put_cmd(tx, s->fail ? "failing-outer" : "outer");
  if (rc == LITH_OK && s->fail)
    return lith_tx_error(tx, LITH_USER, "fails after its lith_submit");
  return rc;
}

static void test_submit_inside_a_command_is_refused(void **state) {
  (void)state;
  lith_options opt;
  t_bank_options(&opt);
  lith *db = t_open_fresh(DB, &opt);
  inner s = {.db = db};
  assert_int_equal(lith_do(db, submit_inside, &s), LITH_OK);
  assert_int_equal(s.rc, LITH_MISUSE);
  assert_non_null(strstr(s.msg, "lith_submit called from inside a command"));
  inner f = {.db = db, .fail = 1};
  assert_int_equal(lith_do(db, submit_inside, &f), LITH_USER);
  assert_int_equal(f.rc, LITH_MISUSE);
  assert_int_equal(lith_close(db), LITH_OK); /* runs whatever was queued */
  assert_int_equal(atomic_load(&s.done_ran), 0);
  assert_int_equal(atomic_load(&f.done_ran), 0);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM kv WHERE k = 'outer'"), 1);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM kv WHERE k LIKE '%inner%' OR k = 'failing-outer'"),
                   0);
}

typedef struct chain {
  lith *db;
  lith_request req;
  char key[32];
  int next, total;
  _Atomic int ok, refused, finished;
} chain;

/* On the writer thread, after the commit: resubmit the same request with
 * the next key until `total` ran. */
static void chain_done(lith_request *r) {
  chain *c = r->data;
  if (r->rc == LITH_OK)
    atomic_fetch_add(&c->ok, 1);
  if (c->next == c->total) {
    atomic_store(&c->finished, 1);
    return;
  }
  snprintf(c->key, sizeof c->key, "chain-%d", c->next++);
  if (lith_submit(c->db, r) != LITH_OK) {
    atomic_fetch_add(&c->refused, 1);
    atomic_store(&c->finished, 1);
  }
}

static void test_submit_from_a_done_callback_works(void **state) {
  (void)state;
  lith_options opt;
  t_bank_options(&opt);
  lith *db = t_open_fresh(DB, &opt);
  chain *c = calloc(1, sizeof *c);
  assert_non_null(c);
  c->db = db;
  c->total = 5;
  snprintf(c->key, sizeof c->key, "chain-%d", c->next++);
  c->req.fn = t_put_cmd;
  c->req.arg = c->key;
  c->req.done = chain_done;
  c->req.data = c;
  assert_int_equal(lith_submit(db, &c->req), LITH_OK);
  for (int i = 0; i < 30000 && !atomic_load(&c->finished); i++)
    usleep(1000);
  assert_true(atomic_load(&c->finished));
  assert_int_equal(atomic_load(&c->refused), 0);
  assert_int_equal(atomic_load(&c->ok), 5);
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM kv WHERE k LIKE 'chain-%'"), 5);
  free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_empty_queue_is_idle),
      cmocka_unit_test(test_single_thread_fifo),
      cmocka_unit_test(test_half_done_push),
      cmocka_unit_test(test_many_producers_one_consumer),
      cmocka_unit_test(test_capacity_one_many_threads),
      cmocka_unit_test(test_expired_deadlines_strand_nobody),
      cmocka_unit_test(test_submit_inside_a_command_is_refused),
      cmocka_unit_test(test_submit_from_a_done_callback_works),
  };
  return cmocka_run_group_tests_name("writer/queue", tests, NULL, NULL);
}
