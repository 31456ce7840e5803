/*
 * liblith_uv (include/lith_uv.h): the bridge and reads on the pool.
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
 *   - lith_uv_read: reads queued from the loop run on pool threads (never
 *     the loop's), each callback exactly once on the loop thread with the
 *     reader's result and "" as message; a failing read brings its rc and
 *     lith's message (written on the pool thread) to the loop; missing
 *     arguments are LITH_MISUSE with a message and no callback; a read
 *     cancelled before it ran (uv_cancel) gets LITH_CLOSED; after
 *     lith_shutdown a read gets LITH_CLOSED.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common.h"
#include "lith_uv.h"

#define DB "uv.db"

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
  size_t pending_at_half;  /* lith_uv_pending when half had completed */
  size_t pending_at_close; /* when lith_uv_close was called */
  int submit_after_close_rc;
  int wrong_thread, twice, wrong_rc;
  uint64_t iter, last_iter;
  int wakes; /* iterations that delivered at least one */
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
  if (req->req.rc != t_indexed_rc(r->index))
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
  return lith_uv_submit(t->bridge, &r->u, t_indexed_cmd, (void *)(intptr_t)i, uv_cb);
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
        lith_uv_submit(t->bridge, &t->refused.u, t_indexed_cmd, (void *)(intptr_t)0, never_uv_cb);
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
  t->db = t_open_indexed(DB, 65536);
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
  assert_int_equal(lith_uv_submit(t->bridge, &t->refused.u, t_indexed_cmd, NULL, NULL), LITH_MISUSE);
  assert_int_equal(lith_uv_submit(t->bridge, NULL, t_indexed_cmd, NULL, never_uv_cb), LITH_MISUSE);
  assert_int_equal(lith_uv_submit(NULL, &t->refused.u, t_indexed_cmd, NULL, never_uv_cb), LITH_MISUSE);
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
  fprintf(stderr, "%d requests in %lld ms: %d wakes, at most %d per wake, %llu batches\n", t->n,
          (long long)ms, t->wakes, t->max_per_wake, (unsigned long long)(after.batches - before.batches));
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
  assert_int_equal(t->completed_at_closed, t->n);  /* on_closed after the last callback */
  assert_true(after.batches - before.batches > 1); /* several batches */
  assert_true(t->wakes < t->n);                    /* some wake delivered several */
  assert_true(t->max_per_wake > 1);

  assert_int_equal(lith_close(t->db), LITH_OK);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM kv WHERE k GLOB 'k*'"), t_indexed_ok(t->n));
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
  w->db = t_open_indexed(DB, M + 1);
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

/* ---- lith_uv_read ------------------------------------------------------ */

enum { READS = 16 };

typedef struct rd {
  lith_uv_read_req r;
  int index;
  int calls;
  int64_t value; /* what the reader read */
  pthread_t ran_on;
  int loop_calls; /* callbacks that ran on the loop thread */
} rd;

typedef struct rdtest {
  pthread_t loop_thread;
  _Atomic int hold;    /* readers wait while set */
  _Atomic int holding; /* readers waiting */
  int completed;
} rdtest;

static rdtest g_rd;

static int read_kv_count(lith_rx *rx, void *arg) {
  rd *x = arg;
  x->ran_on = pthread_self();
  while (atomic_load(&g_rd.hold)) {
    atomic_fetch_add(&g_rd.holding, 1);
    while (atomic_load(&g_rd.hold))
      usleep(200);
    atomic_fetch_sub(&g_rd.holding, 1);
  }
  return lith_rx_int64(rx, &x->value, "SELECT count(*) + ? FROM kv", "i", x->index);
}

static int read_missing_table(lith_rx *rx, void *arg) {
  rd *x = arg;
  return lith_rx_int64(rx, &x->value, "SELECT count(*) FROM no_such_table", NULL);
}

static void rd_cb(lith_uv_read_req *req) {
  rd *x = req->data;
  x->calls++;
  if (pthread_equal(pthread_self(), g_rd.loop_thread))
    x->loop_calls++;
  g_rd.completed++;
}

static lith *open_rd(void) {
  lith_options opt;
  t_bank_options(&opt);
  opt.readers = 2;
  lith *db = t_open_fresh(DB, &opt);
  assert_int_equal(lith_do(db, t_put_cmd, "a"), LITH_OK);
  assert_int_equal(lith_do(db, t_put_cmd, "b"), LITH_OK);
  return db;
}

static void test_uv_read_on_the_pool_answered_on_the_loop(void **state) {
  (void)state;
  lith *db = open_rd();
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  memset(&g_rd, 0, sizeof g_rd);
  g_rd.loop_thread = pthread_self();
  rd x[READS];
  memset(x, 0, sizeof x);
  for (int i = 0; i < READS; i++) {
    x[i].index = i;
    x[i].r.data = &x[i];
    assert_int_equal(lith_uv_read(db, &loop, &x[i].r, read_kv_count, &x[i], rd_cb), LITH_OK);
  }
  assert_int_equal(g_rd.completed, 0); /* never on the caller's stack */
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(g_rd.completed, READS);
  for (int i = 0; i < READS; i++) {
    assert_int_equal(x[i].calls, 1);
    assert_int_equal(x[i].loop_calls, 1);
    assert_false(pthread_equal(x[i].ran_on, g_rd.loop_thread));
    assert_int_equal(x[i].r.rc, LITH_OK);
    assert_string_equal(x[i].r.errmsg, "");
    assert_int_equal(x[i].value, 2 + i);
  }

  /* A failing read: its rc and the pool thread's message reach the loop. */
  rd bad;
  memset(&bad, 0, sizeof bad);
  bad.r.data = &bad;
  assert_int_equal(lith_uv_read(db, &loop, &bad.r, read_missing_table, &bad, rd_cb), LITH_OK);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(bad.calls, 1);
  assert_int_equal(bad.loop_calls, 1);
  assert_int_equal(bad.r.rc, LITH_ERROR);
  assert_non_null(strstr(bad.r.errmsg, "no_such_table"));

  /* Missing arguments: refused at once, no callback. */
  rd none;
  memset(&none, 0, sizeof none);
  none.r.data = &none;
  assert_int_equal(lith_uv_read(db, &loop, &none.r, NULL, &none, rd_cb), LITH_MISUSE);
  assert_non_null(strstr(lith_errmsg(db), "lith_uv_read"));
  assert_int_equal(lith_uv_read(db, &loop, &none.r, read_kv_count, &none, NULL), LITH_MISUSE);
  assert_int_equal(lith_uv_read(NULL, &loop, &none.r, read_kv_count, &none, rd_cb), LITH_MISUSE);
  assert_int_equal(lith_uv_read(db, NULL, &none.r, read_kv_count, &none, rd_cb), LITH_MISUSE);
  assert_int_equal(lith_uv_read(db, &loop, NULL, read_kv_count, &none, rd_cb), LITH_MISUSE);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(none.calls, 0);

  /* After lith_shutdown: LITH_CLOSED, through the callback. */
  assert_int_equal(lith_shutdown(db), LITH_OK);
  rd late;
  memset(&late, 0, sizeof late);
  late.r.data = &late;
  assert_int_equal(lith_uv_read(db, &loop, &late.r, read_kv_count, &late, rd_cb), LITH_OK);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(late.calls, 1);
  assert_int_equal(late.r.rc, LITH_CLOSED);
  assert_string_not_equal(late.r.errmsg, "");
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* Every pool thread busy (main sets UV_THREADPOOL_SIZE to POOL): the next
 * read waits in libuv's queue, where uv_cancel takes it. */
enum { POOL = 4 };

static void on_hold_timer(uv_timer_t *h) {
  rd *queued = h->data;
  if (atomic_load(&g_rd.holding) < 2) /* both readers inside fn; the other pool threads wait for one */
    return;
  uv_timer_stop(h);
  assert_int_equal(uv_cancel((uv_req_t *)&queued->r.work), 0);
  atomic_store(&g_rd.hold, 0);
  uv_close((uv_handle_t *)h, NULL);
}

static void test_uv_read_cancelled_before_it_ran(void **state) {
  (void)state;
  lith *db = open_rd(); /* 2 readers */
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  memset(&g_rd, 0, sizeof g_rd);
  g_rd.loop_thread = pthread_self();
  atomic_store(&g_rd.hold, 1);
  rd x[POOL + 1];
  memset(x, 0, sizeof x);
  for (int i = 0; i < POOL + 1; i++) {
    x[i].index = i;
    x[i].r.data = &x[i];
    assert_int_equal(lith_uv_read(db, &loop, &x[i].r, read_kv_count, &x[i], rd_cb), LITH_OK);
  }
  uv_timer_t timer;
  uv_timer_init(&loop, &timer);
  timer.data = &x[POOL];
  uv_timer_start(&timer, on_hold_timer, 1, 1);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(g_rd.completed, POOL + 1);
  for (int i = 0; i < POOL; i++) {
    assert_int_equal(x[i].calls, 1);
    assert_int_equal(x[i].r.rc, LITH_OK);
    assert_int_equal(x[i].value, 2 + i);
  }
  assert_int_equal(x[POOL].calls, 1);
  assert_int_equal(x[POOL].loop_calls, 1);
  assert_int_equal(x[POOL].r.rc, LITH_CLOSED);
  assert_non_null(strstr(x[POOL].r.errmsg, "cancelled"));
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void) {
  /* libuv sizes its pool at its first use: the cancel test needs POOL. */
  setenv("UV_THREADPOOL_SIZE", "4", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_uv_bridge_many),
      cmocka_unit_test(test_uv_one_wake_delivers_a_batch),
      cmocka_unit_test(test_uv_read_on_the_pool_answered_on_the_loop),
      cmocka_unit_test(test_uv_read_cancelled_before_it_ran),
  };
  return cmocka_run_group_tests_name("uv", tests, NULL, NULL);
}
