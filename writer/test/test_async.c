/*
 * Asynchronous submission: lith_submit (the libuv bridge on it: uv/test).
 *   - lith_submit: 10k requests (fewer under LITH_TEST_SCALE) from four
 *     threads through a small queue (refusals with LITH_QUEUE_FULL are
 *     submitted again: a refused request's done must never run): every
 *     accepted request's done runs exactly once, on the writer thread, with
 *     the command's own rc and message (some commands fail on purpose, some
 *     hit a constraint), and exactly the successful ones are in the file;
 *   - lith_submit refuses a missing fn or done (or request, or handle) with
 *     LITH_MISUSE and never runs it; at capacity it returns LITH_QUEUE_FULL;
 *     once lith_close has begun it returns LITH_CLOSED, and everything
 *     accepted before still runs and is answered once.
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

#define DB "async.db"

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
    r->req.fn = t_indexed_cmd;
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
  m->db = t_open_indexed(DB, 256);
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
    if (r->req.rc != t_indexed_rc(i))
      fprintf(stderr, "request %d: rc %d, want %d (%s)\n", i, r->req.rc, t_indexed_rc(i), r->req.errmsg);
    assert_int_equal(r->req.rc, t_indexed_rc(i));
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
  assert_int_equal(ok, t_indexed_ok(m->n));
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
  lith *db = t_open_indexed(DB, 4);
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
    r[i].req.fn = t_indexed_cmd;
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
    assert_int_equal(r[i].req.rc, t_indexed_rc(100 + i));
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
  lith *db = t_open_indexed(DB, 65536);
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
    r[i].req.fn = t_indexed_cmd;
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
    assert_int_equal(r[i].req.rc, t_indexed_rc(1000 + i));
    ok += r[i].req.rc == LITH_OK;
  }
  assert_int_equal(atomic_load(&r[accepted].calls), 0);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM kv WHERE k GLOB 'k*'"), ok);
  free(r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_submit_many_each_done_once),
      cmocka_unit_test(test_submit_refusals),
      cmocka_unit_test(test_submit_after_close_begins),
  };
  return cmocka_run_group_tests_name("writer/async", tests, NULL, NULL);
}
