/*
 * Asynchronous submission: lith_submit and the libuv bridge (lith_uv.h).
 *   - lith_submit: 10k requests (fewer under LITH_TEST_SCALE) from four
 *     threads through a small queue (refusals with LITH_QUEUE_FULL are
 *     submitted again: a refused request's done must never run): every
 *     accepted request's done runs exactly once, on the writer thread, with
 *     the command's own rc and message (some commands fail on purpose, some
 *     hit a constraint), and exactly the successful ones are in the file;
 *   - lith_submit refuses a missing fn or done (or request, or handle) with
 *     LITH_MISUSE and never runs it; at capacity it returns LITH_QUEUE_FULL;
 *     once lith_close has begun it returns LITH_CLOSED, and everything
 *     accepted before still runs and is answered once;
 *   - the bridge, on a uv_loop_t in the test thread: thousands of requests
 *     submitted in chunks from uv_idle callbacks; each callback runs exactly
 *     once, on the loop thread, with the right outcome; lith_uv_pending
 *     drops to 0; completions come from several batches, and at least one
 *     wake (loop iteration) delivers more than one; lith_uv_close, called
 *     while requests are pending, refuses submissions at once (LITH_CLOSED,
 *     in the same iteration), calls on_closed only after the last callback,
 *     and uv_run then returns with every handle closed;
 *   - one wake delivers a whole batch: with the writer held at a gate, a
 *     batch of bridge requests is answered while the loop thread is busy;
 *     the next iteration delivers all of them at once, in answer order;
 *     QUEUE_FULL through the bridge leaves pending unchanged; argument
 *     errors are LITH_MISUSE.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common.h"
#include "lith_uv.h"

#define DB "async.db"

/* Outcome of request i: fail on purpose, hit a UNIQUE constraint, or OK. */
static int expected_rc(int i) {
  if (i % 7 == 3)
    return LITH_USER + i % 5;
  if (i % 11 == 5)
    return LITH_CONSTRAINT;
  return LITH_OK;
}

static int indexed_cmd(lith_tx *tx, void *arg) {
  int i = (int)(intptr_t)arg;
  int want = expected_rc(i);
  if (want >= LITH_USER)
    return lith_tx_error(tx, want, "fail %d", i);
  if (want == LITH_CONSTRAINT)
    return lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES ('dup', 2)", NULL);
  char k[32];
  snprintf(k, sizeof k, "k%d", i);
  return lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES (?, 1)", "s", k);
}

static int count_ok(int n) {
  int ok = 0;
  for (int i = 0; i < n; i++)
    ok += expected_rc(i) == LITH_OK;
  return ok;
}

static lith *open_db(int queue_capacity) {
  lith_options opt;
  t_bank_options(&opt);
  opt.queue_capacity = queue_capacity;
  lith *db = t_open_fresh(DB, &opt);
  assert_int_equal(lith_do(db, t_put_cmd, "dup"), LITH_OK);
  return db;
}

/* ---- lith_submit from threads ----------------------------------------- */

typedef struct rec {
  lith_request req;
  int index;
  _Atomic int calls;
} rec;

typedef struct many {
  lith *db;
  rec *recs;
  int n, nthreads;
  _Atomic int done, twice, refused;
  pthread_mutex_t mu;
  int have_writer;
  pthread_t writer;
  int other_thread; /* a done ran on another thread than the first one */
  pthread_t producers[8];
} many;

static void many_done(lith_request *req) {
  rec *r = (rec *)req; /* req is the first member */
  many *m = req->data;
  if (atomic_fetch_add(&r->calls, 1) != 0)
    atomic_fetch_add(&m->twice, 1);
  pthread_mutex_lock(&m->mu);
  if (!m->have_writer) {
    m->writer = pthread_self();
    m->have_writer = 1;
  } else if (!pthread_equal(m->writer, pthread_self())) {
    m->other_thread = 1;
  }
  pthread_mutex_unlock(&m->mu);
  atomic_fetch_add(&m->done, 1);
}

typedef struct producer {
  many *m;
  int first, last;
} producer;

static void *producer_main(void *arg) {
  producer *p = arg;
  many *m = p->m;
  for (int i = p->first; i < p->last; i++) {
    rec *r = &m->recs[i];
    memset(&r->req, 0, sizeof r->req);
    r->index = i;
    atomic_init(&r->calls, 0);
    r->req.fn = indexed_cmd;
    r->req.arg = (void *)(intptr_t)i;
    r->req.done = many_done;
    r->req.data = m;
    int rc;
    while ((rc = lith_submit(m->db, &r->req)) == LITH_QUEUE_FULL) {
      atomic_fetch_add(&m->refused, 1);
      sched_yield();
    }
    if (rc != LITH_OK)
      atomic_fetch_add(&m->twice, 1000000); /* flagged below */
  }
  return NULL;
}

static void test_submit_many_each_done_once(void **state) {
  (void)state;
  many *m = calloc(1, sizeof *m);
  assert_non_null(m);
  m->n = t_scaled(10000);
  m->nthreads = 4;
  m->recs = calloc((size_t)m->n, sizeof *m->recs);
  assert_non_null(m->recs);
  pthread_mutex_init(&m->mu, NULL);
  m->db = open_db(256);
  lith_stats before;
  lith_stats_get(m->db, &before);

  producer p[8];
  for (int t = 0; t < m->nthreads; t++) {
    p[t] = (producer){m, m->n * t / m->nthreads, m->n * (t + 1) / m->nthreads};
    assert_int_equal(pthread_create(&m->producers[t], NULL, producer_main, &p[t]), 0);
  }
  for (int t = 0; t < m->nthreads; t++)
    pthread_join(m->producers[t], NULL);
  for (int i = 0; i < 30000 && atomic_load(&m->done) < m->n; i++)
    usleep(1000);
  usleep(20000); /* nothing arrives late */
  assert_int_equal(atomic_load(&m->done), m->n);
  assert_int_equal(atomic_load(&m->twice), 0);

  int ok = 0;
  for (int i = 0; i < m->n; i++) {
    rec *r = &m->recs[i];
    assert_int_equal(atomic_load(&r->calls), 1);
    if (r->req.rc != expected_rc(i))
      fprintf(stderr, "request %d: rc %d, want %d (%s)\n", i, r->req.rc, expected_rc(i), r->req.errmsg);
    assert_int_equal(r->req.rc, expected_rc(i));
    if (r->req.rc == LITH_OK) {
      assert_string_equal(r->req.errmsg, "");
      ok++;
    } else if (r->req.rc >= LITH_USER) {
      char want[32];
      snprintf(want, sizeof want, "fail %d", i);
      assert_string_equal(r->req.errmsg, want);
    } else {
      assert_non_null(strstr(r->req.errmsg, "UNIQUE"));
    }
  }
  assert_int_equal(ok, count_ok(m->n));
  /* every done ran on one thread: the writer, none of the producers */
  assert_true(m->have_writer);
  assert_false(m->other_thread);
  for (int t = 0; t < m->nthreads; t++)
    assert_false(pthread_equal(m->writer, m->producers[t]));
  assert_false(pthread_equal(m->writer, pthread_self()));

  lith_stats after;
  lith_stats_get(m->db, &after);
  assert_int_equal(after.commands - before.commands, (uint64_t)m->n);
  assert_int_equal(after.failed - before.failed, (uint64_t)(m->n - ok));
  assert_true(after.batches - before.batches < (uint64_t)m->n); /* batched */
  fprintf(stderr, "%d requests, %llu batches, %d refused while full\n", m->n,
          (unsigned long long)(after.batches - before.batches), atomic_load(&m->refused));
  assert_int_equal(lith_close(m->db), LITH_OK);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM kv WHERE k GLOB 'k*'"), ok);
  assert_int_equal(t_query_int(DB, "SELECT v FROM kv WHERE k = 'dup'"), 1);
  pthread_mutex_destroy(&m->mu);
  free(m->recs);
  free(m);
}

/* ---- refusals ------------------------------------------------------------ */

static _Atomic int g_never_ran;
static _Atomic int g_never_done;

static int never_cmd(lith_tx *tx, void *arg) {
  (void)tx;
  (void)arg;
  atomic_fetch_add(&g_never_ran, 1);
  return LITH_OK;
}

static void never_done(lith_request *req) {
  (void)req;
  atomic_fetch_add(&g_never_done, 1);
}

static void once_done(lith_request *req) {
  rec *r = (rec *)req;
  atomic_fetch_add(&r->calls, 1);
}

static void test_submit_refusals(void **state) {
  (void)state;
  atomic_store(&g_never_ran, 0);
  atomic_store(&g_never_done, 0);
  lith *db = open_db(4);
  lith_request req;

  memset(&req, 0, sizeof req);
  req.done = never_done; /* no fn */
  assert_int_equal(lith_submit(db, &req), LITH_MISUSE);
  assert_true(strlen(lith_errmsg(db)) > 0);
  memset(&req, 0, sizeof req);
  req.fn = never_cmd; /* no done */
  assert_int_equal(lith_submit(db, &req), LITH_MISUSE);
  assert_true(strlen(lith_errmsg(db)) > 0);
  req.done = never_done;
  assert_int_equal(lith_submit(db, NULL), LITH_MISUSE);
  assert_int_equal(lith_submit(NULL, &req), LITH_MISUSE);
  assert_int_equal(lith_do(db, t_put_cmd, "barrier"), LITH_OK); /* anything queued has run */
  assert_int_equal(atomic_load(&g_never_ran), 0);
  assert_int_equal(atomic_load(&g_never_done), 0);

  /* at capacity (4), with the writer held: the fifth is refused */
  t_gate gate;
  rec r[5];
  t_gate_close(db, &gate);
  for (int i = 0; i < 5; i++) {
    memset(&r[i], 0, sizeof r[i]);
    r[i].req.fn = indexed_cmd;
    r[i].req.arg = (void *)(intptr_t)(100 + i);
    r[i].req.done = once_done;
  }
  for (int i = 0; i < 4; i++)
    assert_int_equal(lith_submit(db, &r[i].req), LITH_OK);
  assert_int_equal(lith_submit(db, &r[4].req), LITH_QUEUE_FULL);
  assert_true(strlen(lith_errmsg(db)) > 0);
  lith_stats st;
  lith_stats_get(db, &st);
  assert_int_equal(st.queue_depth, 4);
  t_gate_open(&gate);
  for (int i = 0; i < 5000; i++) {
    int all = 1;
    for (int j = 0; j < 4; j++)
      all &= atomic_load(&r[j].calls) == 1;
    if (all)
      break;
    usleep(1000);
  }
  for (int i = 0; i < 4; i++) {
    assert_int_equal(atomic_load(&r[i].calls), 1);
    assert_int_equal(r[i].req.rc, expected_rc(100 + i));
  }
  assert_int_equal(lith_do(db, t_put_cmd, "barrier2"), LITH_OK);
  assert_int_equal(atomic_load(&r[4].calls), 0); /* refused: never answered */
  /* room again: the same request is accepted now, and answered once */
  assert_int_equal(lith_submit(db, &r[4].req), LITH_OK);
  assert_int_equal(lith_do(db, t_put_cmd, "barrier3"), LITH_OK);
  assert_int_equal(atomic_load(&r[4].calls), 1);
  assert_int_equal(lith_close(db), LITH_OK);
}

/* lith_close begins while the writer is held: later submissions are
 * refused with LITH_CLOSED, earlier ones all run. */
typedef struct closer {
  lith *db;
  int rc;
  _Atomic int finished;
} closer;

static void *close_main(void *arg) {
  closer *c = arg;
  c->rc = lith_close(c->db);
  atomic_store(&c->finished, 1);
  return NULL;
}

static void test_submit_after_close_begins(void **state) {
  (void)state;
  lith *db = open_db(65536);
  t_gate gate;
  t_gate_close(db, &gate);
  enum { MAX = 100000 };
  rec *r = calloc(MAX, sizeof *r);
  assert_non_null(r);
  closer c = {db, -1, 0};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, close_main, &c), 0);
  int accepted = 0, rc = LITH_OK;
  for (int i = 0; i < MAX; i++) {
    r[i].req.fn = indexed_cmd;
    r[i].req.arg = (void *)(intptr_t)(1000 + i);
    r[i].req.done = once_done;
    rc = lith_submit(db, &r[i].req);
    if (rc != LITH_OK)
      break;
    accepted++;
    if (i % 64 == 0)
      usleep(100);
  }
  assert_int_equal(rc, LITH_CLOSED);
  assert_true(strlen(lith_errmsg(NULL)) > 0);
  assert_false(atomic_load(&c.finished)); /* still held at the gate */
  t_gate_open(&gate);
  pthread_join(th, NULL);
  assert_int_equal(c.rc, LITH_OK);
  int ok = 0;
  for (int i = 0; i < accepted; i++) {
    assert_int_equal(atomic_load(&r[i].calls), 1);
    assert_int_equal(r[i].req.rc, expected_rc(1000 + i));
    ok += r[i].req.rc == LITH_OK;
  }
  assert_int_equal(atomic_load(&r[accepted].calls), 0);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM kv WHERE k GLOB 'k*'"), ok);
  free(r);
}

/* ---- the libuv bridge ---------------------------------------------------- */

typedef struct uvrec {
  lith_uv_req u;
  int index;
  int calls;
  uint64_t iter; /* loop iteration it was delivered in */
} uvrec;

typedef struct uvtest {
  uv_loop_t loop;
  uv_idle_t idle;
  uv_prepare_t prepare;
  lith *db;
  lith_uv *bridge;
  pthread_t loop_thread;
  uv_thread_t loop_uv_thread;
  uvrec *recs;
  int n, submitted, completed;
  int half_reached;
  size_t pending_at_half;     /* lith_uv_pending when half had completed */
  size_t pending_at_close;    /* when lith_uv_close was called */
  int submit_after_close_rc;
  int wrong_thread, twice, wrong_rc;
  uint64_t iter, last_iter;
  int wakes;                  /* iterations that delivered at least one */
  int max_per_wake, cur_per_wake;
  int closed_calls;
  int completed_at_closed;
  int submit_errors;
  int refused_cb_ran;
  uvrec refused;
} uvtest;

static void on_prepare(uv_prepare_t *h) {
  uvtest *t = h->data;
  t->iter++;
}

static void uv_cb(lith_uv_req *req) {
  uvrec *r = (uvrec *)req;
  uvtest *t = req->req.data;
  if (!pthread_equal(pthread_self(), t->loop_thread))
    t->wrong_thread++;
  uv_thread_t self = uv_thread_self();
  if (!uv_thread_equal(&self, &t->loop_uv_thread))
    t->wrong_thread++;
  if (r->calls++ != 0)
    t->twice++;
  if (req->req.rc != expected_rc(r->index))
    t->wrong_rc++;
  if (req->bridge != t->bridge)
    t->wrong_rc++;
  r->iter = t->iter;
  if (t->iter != t->last_iter) {
    t->wakes++;
    t->last_iter = t->iter;
    t->cur_per_wake = 0;
  }
  if (++t->cur_per_wake > t->max_per_wake)
    t->max_per_wake = t->cur_per_wake;
  t->completed++;
}

static void never_uv_cb(lith_uv_req *req) {
  uvtest *t = req->req.data;
  t->refused_cb_ran++;
}

static void on_handle_closed(uv_handle_t *h) { (void)h; }

static void on_bridge_closed(void *ctx) {
  uvtest *t = ctx;
  t->closed_calls++;
  t->completed_at_closed = t->completed;
  t->bridge = NULL;
  uv_close((uv_handle_t *)&t->prepare, on_handle_closed);
}

static int submit_one(uvtest *t, int i) {
  uvrec *r = &t->recs[i];
  r->index = i;
  r->u.req.data = t;
  return lith_uv_submit(t->bridge, &r->u, indexed_cmd, (void *)(intptr_t)i, uv_cb);
}

/* Submit in chunks: the first half; once all of it has completed, the
 * rest; then close at once, with requests still pending. */
static void on_idle(uv_idle_t *h) {
  uvtest *t = h->data;
  enum { CHUNK = 100 };
  int goal = t->n / 2;
  if (t->submitted == t->n / 2) {
    if (!t->half_reached) {
      if (t->completed < t->n / 2)
        return; /* the first half is on its way */
      t->half_reached = 1;
      t->pending_at_half = lith_uv_pending(t->bridge);
    }
  }
  if (t->half_reached)
    goal = t->n;
  for (int k = 0; k < CHUNK && t->submitted < goal; k++) {
    int rc = submit_one(t, t->submitted);
    if (rc != LITH_OK) {
      t->submit_errors++;
      return; /* try again next iteration */
    }
    t->submitted++;
  }
  if (t->submitted == t->n) {
    uv_idle_stop(&t->idle);
    uv_close((uv_handle_t *)&t->idle, on_handle_closed);
    t->pending_at_close = lith_uv_pending(t->bridge);
    lith_uv_close(t->bridge, on_bridge_closed, t);
    /* same iteration, before the close completes: refused */
    t->refused.u.req.data = t;
    t->submit_after_close_rc =
        lith_uv_submit(t->bridge, &t->refused.u, indexed_cmd, (void *)(intptr_t)0, never_uv_cb);
  }
}

static void test_uv_bridge_many(void **state) {
  (void)state;
  uvtest *t = calloc(1, sizeof *t);
  assert_non_null(t);
  t->n = t_scaled(6000);
  if (t->n < 400)
    t->n = 400;
  t->recs = calloc((size_t)t->n, sizeof *t->recs);
  assert_non_null(t->recs);
  t->db = open_db(65536);
  t->loop_thread = pthread_self();
  t->loop_uv_thread = uv_thread_self();
  t->last_iter = UINT64_MAX;
  assert_int_equal(uv_loop_init(&t->loop), 0);

  /* argument errors */
  lith_uv *b = (lith_uv *)t;
  assert_int_equal(lith_uv_open(NULL, &t->loop, &b), LITH_MISUSE);
  assert_null(b);
  assert_int_equal(lith_uv_open(t->db, NULL, &b), LITH_MISUSE);
  assert_int_equal(lith_uv_open(t->db, &t->loop, NULL), LITH_MISUSE);
  assert_int_equal(lith_uv_pending(NULL), 0);

  assert_int_equal(lith_uv_open(t->db, &t->loop, &t->bridge), LITH_OK);
  assert_non_null(t->bridge);
  assert_int_equal(lith_uv_pending(t->bridge), 0);
  assert_int_equal(lith_uv_submit(t->bridge, &t->refused.u, NULL, NULL, never_uv_cb), LITH_MISUSE);
  assert_int_equal(lith_uv_submit(t->bridge, &t->refused.u, indexed_cmd, NULL, NULL), LITH_MISUSE);
  assert_int_equal(lith_uv_submit(t->bridge, NULL, indexed_cmd, NULL, never_uv_cb), LITH_MISUSE);
  assert_int_equal(lith_uv_submit(NULL, &t->refused.u, indexed_cmd, NULL, never_uv_cb), LITH_MISUSE);
  assert_int_equal(lith_uv_pending(t->bridge), 0);

  lith_stats before;
  lith_stats_get(t->db, &before);
  uv_prepare_init(&t->loop, &t->prepare);
  t->prepare.data = t;
  uv_prepare_start(&t->prepare, on_prepare);
  uv_unref((uv_handle_t *)&t->prepare);
  uv_idle_init(&t->loop, &t->idle);
  t->idle.data = t;
  uv_idle_start(&t->idle, on_idle);

  int64_t t0 = lith_clock_ms();
  assert_int_equal(uv_run(&t->loop, UV_RUN_DEFAULT), 0);
  int64_t ms = lith_clock_ms() - t0;
  assert_int_equal(uv_loop_close(&t->loop), 0); /* every handle closed */

  lith_stats after;
  lith_stats_get(t->db, &after);
  fprintf(stderr, "%d requests in %lld ms: %d wakes, at most %d per wake, %llu batches\n", t->n, (long long)ms,
          t->wakes, t->max_per_wake, (unsigned long long)(after.batches - before.batches));
  assert_int_equal(t->submit_errors, 0);
  assert_int_equal(t->submitted, t->n);
  assert_int_equal(t->completed, t->n);
  assert_int_equal(t->wrong_thread, 0);
  assert_int_equal(t->twice, 0);
  assert_int_equal(t->wrong_rc, 0);
  for (int i = 0; i < t->n; i++)
    assert_int_equal(t->recs[i].calls, 1);
  assert_true(t->half_reached);
  assert_int_equal(t->pending_at_half, 0);
  assert_true(t->pending_at_close > 0); /* closed with requests in flight */
  assert_int_equal(t->submit_after_close_rc, LITH_CLOSED);
  assert_int_equal(t->refused_cb_ran, 0);
  assert_int_equal(t->closed_calls, 1);
  assert_int_equal(t->completed_at_closed, t->n); /* on_closed after the last callback */
  assert_true(after.batches - before.batches > 1);  /* several batches */
  assert_true(t->wakes < t->n);                     /* some wake delivered several */
  assert_true(t->max_per_wake > 1);

  assert_int_equal(lith_close(t->db), LITH_OK);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM kv WHERE k GLOB 'k*'"), count_ok(t->n));
  free(t->recs);
  free(t);
}

/* ---- one wake, one whole batch -------------------------------------------- */

enum { M = 20, ROUNDS = 2 };

typedef struct wake {
  uv_loop_t loop;
  uv_timer_t timer;
  uv_prepare_t prepare;
  lith *db;
  lith_uv *bridge;
  pthread_t loop_thread;
  uvrec recs[ROUNDS][M];
  uvrec full;
  int round;
  uint64_t iter;
  uint64_t submit_iter[ROUNDS];
  int delivered[ROUNDS];
  int order_ok;
  int wrong_thread;
  size_t pending_after_submit[ROUNDS];
  size_t pending_after_full[ROUNDS];
  int full_rc[ROUNDS];
  int full_cb_ran;
  lith_request marker;
  t_gate gate;
  _Atomic int marker_done;
  int marker_timeout;
  int closed;
} wake;

static void wake_prepare(uv_prepare_t *h) {
  wake *w = h->data;
  w->iter++;
}

static void wake_cb(lith_uv_req *req) {
  uvrec *r = (uvrec *)req;
  wake *w = req->req.data;
  int round = r->index / M, k = r->index % M;
  if (!pthread_equal(pthread_self(), w->loop_thread))
    w->wrong_thread++;
  r->calls++;
  r->iter = w->iter;
  if (k != w->delivered[round])
    w->order_ok = 0; /* answer order is submission order here */
  w->delivered[round]++;
}

static void full_cb(lith_uv_req *req) {
  wake *w = req->req.data;
  w->full_cb_ran++;
}

static void marker_done(lith_request *req) {
  wake *w = req->data;
  atomic_store(&w->marker_done, 1);
}

static int wake_cmd(lith_tx *tx, void *arg) {
  char k[32];
  snprintf(k, sizeof k, "w%d", (int)(intptr_t)arg);
  return lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES (?, 1)", "s", k);
}

static void wake_closed(void *ctx) {
  wake *w = ctx;
  w->closed++;
  uv_close((uv_handle_t *)&w->prepare, on_handle_closed);
}

static void on_timer(uv_timer_t *h) {
  wake *w = h->data;
  int round = w->round;
  if (round > 0 && w->delivered[round - 1] < M)
    return; /* the previous round is still on its way */
  if (round == ROUNDS) {
    uv_close((uv_handle_t *)&w->timer, on_handle_closed);
    lith_uv_close(w->bridge, wake_closed, w);
    return;
  }
  w->round++;

  t_gate_close(w->db, &w->gate);
  for (int k = 0; k < M; k++) {
    uvrec *r = &w->recs[round][k];
    r->index = round * M + k;
    r->u.req.data = w;
    if (lith_uv_submit(w->bridge, &r->u, wake_cmd, (void *)(intptr_t)r->index, wake_cb) != LITH_OK)
      w->order_ok = 0;
  }
  /* behind them, in the same batch: a plain request that tells this thread
   * when the writer has answered everything before it */
  memset(&w->marker, 0, sizeof w->marker);
  w->marker.fn = t_put_cmd;
  w->marker.arg = round == 0 ? "marker0" : "marker1";
  w->marker.done = marker_done;
  w->marker.data = w;
  atomic_store(&w->marker_done, 0);
  if (lith_submit(w->db, &w->marker) != LITH_OK)
    w->order_ok = 0;
  w->pending_after_submit[round] = lith_uv_pending(w->bridge);
  /* the queue (capacity M + 1) is full now: refused, pending unchanged */
  w->full.u.req.data = w;
  w->full_rc[round] = lith_uv_submit(w->bridge, &w->full.u, wake_cmd, (void *)(intptr_t)-1, full_cb);
  w->pending_after_full[round] = lith_uv_pending(w->bridge);
  w->submit_iter[round] = w->iter;
  t_gate_open(&w->gate);
  /* keep the loop thread busy until the writer has answered the batch */
  for (int i = 0; i < 10000 && !atomic_load(&w->marker_done); i++)
    usleep(1000);
  if (!atomic_load(&w->marker_done))
    w->marker_timeout = 1;
}

static void test_uv_one_wake_delivers_a_batch(void **state) {
  (void)state;
  wake *w = calloc(1, sizeof *w);
  assert_non_null(w);
  w->order_ok = 1;
  w->db = open_db(M + 1);
  w->loop_thread = pthread_self();
  assert_int_equal(uv_loop_init(&w->loop), 0);
  assert_int_equal(lith_uv_open(w->db, &w->loop, &w->bridge), LITH_OK);
  uv_prepare_init(&w->loop, &w->prepare);
  w->prepare.data = w;
  uv_prepare_start(&w->prepare, wake_prepare);
  uv_unref((uv_handle_t *)&w->prepare);
  uv_timer_init(&w->loop, &w->timer);
  w->timer.data = w;
  uv_timer_start(&w->timer, on_timer, 1, 5);

  assert_int_equal(uv_run(&w->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&w->loop), 0);

  assert_false(w->marker_timeout);
  assert_true(w->order_ok);
  assert_int_equal(w->wrong_thread, 0);
  assert_int_equal(w->closed, 1);
  assert_int_equal(w->full_cb_ran, 0);
  for (int round = 0; round < ROUNDS; round++) {
    assert_int_equal(w->delivered[round], M);
    assert_int_equal(w->pending_after_submit[round], M);
    assert_int_equal(w->full_rc[round], LITH_QUEUE_FULL);
    assert_int_equal(w->pending_after_full[round], M);
    uint64_t it = w->recs[round][0].iter;
    assert_true(it > w->submit_iter[round]); /* a later iteration, not inside the timer */
    for (int k = 0; k < M; k++) {
      assert_int_equal(w->recs[round][k].calls, 1);
      assert_int_equal(w->recs[round][k].u.req.rc, LITH_OK);
      assert_int_equal(w->recs[round][k].iter, it); /* all M in one wake */
    }
  }
  assert_true(w->recs[1][0].iter > w->recs[0][0].iter);
  assert_int_equal(lith_close(w->db), LITH_OK);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM kv WHERE k GLOB 'w*'"), ROUNDS * M);
  free(w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_submit_many_each_done_once),
      cmocka_unit_test(test_submit_refusals),
      cmocka_unit_test(test_submit_after_close_begins),
      cmocka_unit_test(test_uv_bridge_many),
      cmocka_unit_test(test_uv_one_wake_delivers_a_batch),
  };
  return cmocka_run_group_tests_name("writer/async", tests, NULL, NULL);
}
