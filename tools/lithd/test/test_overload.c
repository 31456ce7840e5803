/*
 * test_overload — overload.c, the queue between lithd's parser and
 * lith's: commands go in chunks (at the loop iteration's end, or every
 * LITHD_SUBMIT_CHUNK), wait in order while lith's queue is full, are
 * refused past their deadline (QUEUE_FULL), when their client left or when
 * lithd stops (CLOSED), and never more than max_bytes wait.
 *
 * Link seams: this file defines lith_uv_submit (a writer with `room`
 * places), lith_clock_ms (a clock the test moves) and lith_http_is_gone
 * (the request GONE left), so overload.c runs on a real libuv loop with
 * neither a database nor an HTTP server.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "overload.h"

/* ---- Fakes ---------------------------------------------------------------- */

static int64_t now_ms; /* lith_clock_ms */
static int room;       /* places left in the fake writer's queue */
static void *ran[64];  /* what was submitted, in order (the entries' arg) */
static int nran;

static struct {
  lithd_park *p;
  int rc;
} refused[64];
static int nrefused;

/* A request pointer the fake HTTP layer says has left. */
static char gone_req;
#define GONE ((lith_http_req *)&gone_req)

int64_t lith_clock_ms(void) { return now_ms; }

int lith_http_is_gone(const lith_http_req *req) { return req == GONE; }

int lith_uv_submit(lith_uv *bridge, lith_uv_req *req, lith_command fn, void *arg, lith_uv_cb done) {
  (void)bridge, (void)req, (void)fn, (void)done;
  if (room == 0)
    return LITH_QUEUE_FULL;
  room--;
  ran[nran++] = arg;
  return LITH_OK;
}

/* An alone command waits for room as any other. */
static int nalone;
int lith_uv_submit_alone(lith_uv *bridge, lith_uv_req *req, lith_command fn, void *arg, lith_uv_cb done) {
  int rc = lith_uv_submit(bridge, req, fn, arg, done);
  nalone += rc == LITH_OK;
  return rc;
}

static void on_refuse(lithd_park *p, int rc) {
  refused[nrefused].p = p;
  refused[nrefused].rc = rc;
  nrefused++;
}

/* ---- Helpers -------------------------------------------------------------- */

typedef struct fixture {
  uv_loop_t loop;
  lithd_overload q;
  lithd_park parks[40];
  lith_uv_req ureqs[40];
} fixture;

static int setup(void **state) {
  static fixture f;
  memset(&f, 0, sizeof f);
  now_ms = 1000;
  room = 1000;
  nran = nrefused = 0;
  assert_int_equal(uv_loop_init(&f.loop), 0);
  assert_int_equal(lithd_overload_init(&f.q, &f.loop, NULL, 100), 0);
  *state = &f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  lithd_overload_stop(&f->q);
  uv_run(&f->loop, UV_RUN_DEFAULT); /* the handles close */
  assert_int_equal(uv_loop_close(&f->loop), 0);
  return 0;
}

/* Entry i of f, its arg pointing at itself, for request req. */
static lithd_park *park(fixture *f, int i, lith_http_req *req) {
  lithd_park *p = &f->parks[i];
  p->ureq = &f->ureqs[i];
  p->fn = NULL;
  p->arg = p;
  p->done = NULL;
  p->req = req;
  p->refuse = on_refuse;
  p->alone = 0;
  return p;
}

/* One loop iteration, without blocking: the check handle runs. */
static void iterate(fixture *f) { uv_run(&f->loop, UV_RUN_NOWAIT); }

/* ---- Tests ---------------------------------------------------------------- */

/* Queued commands go together at the iteration's end, in order. */
static void test_submitted_at_iteration_end(void **state) {
  fixture *f = *state;
  for (int i = 0; i < 3; i++)
    assert_int_equal(lithd_overload_submit(&f->q, park(f, i, NULL), 10), LITH_OK);
  assert_int_equal(nran, 0);
  assert_int_equal(f->q.bytes, 30);
  iterate(f);
  assert_int_equal(nran, 3);
  for (int i = 0; i < 3; i++)
    assert_ptr_equal(ran[i], &f->parks[i]);
  assert_null(f->q.head);
  assert_int_equal(f->q.bytes, 0);
  assert_int_equal(nrefused, 0);
}

/* Every LITHD_SUBMIT_CHUNK commands go at once, without the iteration's end. */
static void test_chunks(void **state) {
  fixture *f = *state;
  for (int i = 0; i < LITHD_SUBMIT_CHUNK - 1; i++)
    lithd_overload_submit(&f->q, park(f, i, NULL), 1);
  assert_int_equal(nran, 0);
  lithd_overload_submit(&f->q, park(f, LITHD_SUBMIT_CHUNK - 1, NULL), 1);
  assert_int_equal(nran, LITHD_SUBMIT_CHUNK);
  lithd_overload_submit(&f->q, park(f, LITHD_SUBMIT_CHUNK, NULL), 1);
  assert_int_equal(nran, LITHD_SUBMIT_CHUNK); /* the count starts again */
  iterate(f);
  assert_int_equal(nran, LITHD_SUBMIT_CHUNK + 1);
}

/* A full queue keeps them waiting, first come first served; room lets
 * them go in order, and what comes later queues behind. */
static void test_waits_in_order(void **state) {
  fixture *f = *state;
  room = 0;
  for (int i = 0; i < 3; i++)
    lithd_overload_submit(&f->q, park(f, i, NULL), 10);
  iterate(f);
  assert_int_equal(nran, 0);
  assert_int_equal(nrefused, 0);
  assert_ptr_equal(f->q.head, &f->parks[0]);
  room = 1; /* the writer made room for one */
  lithd_overload_drain(&f->q);
  assert_int_equal(nran, 1);
  assert_ptr_equal(ran[0], &f->parks[0]);
  assert_int_equal(f->q.bytes, 20);
  /* a newcomer does not overtake */
  lithd_overload_submit(&f->q, park(f, 3, NULL), 10);
  room = 2;
  lithd_overload_drain(&f->q);
  assert_int_equal(nran, 3);
  assert_ptr_equal(ran[1], &f->parks[1]);
  assert_ptr_equal(ran[2], &f->parks[2]);
  assert_ptr_equal(f->q.head, &f->parks[3]);
  room = 1;
  iterate(f);
  assert_int_equal(nran, 4);
  assert_ptr_equal(ran[3], &f->parks[3]);
  assert_null(f->q.head);
  assert_null(f->q.tail);
  assert_int_equal(nrefused, 0);
}

/* Past its deadline (wait_ms after it was queued) a command is refused
 * with QUEUE_FULL; those queued later still wait. */
static void test_deadline(void **state) {
  fixture *f = *state;
  room = 0;
  lithd_overload_submit(&f->q, park(f, 0, NULL), 1);
  now_ms += 60;
  lithd_overload_submit(&f->q, park(f, 1, NULL), 1);
  iterate(f);
  now_ms += 50; /* 110 ms for the first, 50 for the second */
  lithd_overload_drain(&f->q);
  assert_int_equal(nrefused, 1);
  assert_ptr_equal(refused[0].p, &f->parks[0]);
  assert_int_equal(refused[0].rc, LITH_QUEUE_FULL);
  assert_ptr_equal(f->q.head, &f->parks[1]);
  assert_int_equal(f->q.bytes, 1);
  assert_int_equal(nran, 0);
}

/* With wait_ms 0 a full queue refuses at once. */
static void test_no_wait(void **state) {
  fixture *f = *state;
  f->q.wait_ms = 0;
  room = 0;
  lithd_overload_submit(&f->q, park(f, 0, NULL), 1);
  iterate(f);
  assert_int_equal(nrefused, 1);
  assert_int_equal(refused[0].rc, LITH_QUEUE_FULL);
  assert_null(f->q.head);
}

/* The timer refuses what waited too long with no completion to drain,
 * then everything stops: the loop runs dry. */
static void test_timer_backstop(void **state) {
  fixture *f = *state;
  room = 0;
  lithd_overload_submit(&f->q, park(f, 0, NULL), 1);
  iterate(f);
  assert_int_equal(nrefused, 0);
  now_ms += 1000;                   /* the deadline passed; nothing calls drain */
  uv_run(&f->loop, UV_RUN_DEFAULT); /* returns once no handle is active */
  assert_int_equal(nrefused, 1);
  assert_int_equal(refused[0].rc, LITH_QUEUE_FULL);
  assert_false(uv_is_active((uv_handle_t *)&f->q.timer));
  assert_false(uv_is_active((uv_handle_t *)&f->q.check));
}

/* A command whose client left is not run: refused with CLOSED. */
static void test_client_gone(void **state) {
  fixture *f = *state;
  lithd_overload_submit(&f->q, park(f, 0, NULL), 1);
  lithd_overload_submit(&f->q, park(f, 1, GONE), 1);
  lithd_overload_submit(&f->q, park(f, 2, NULL), 1);
  iterate(f);
  assert_int_equal(nran, 2);
  assert_ptr_equal(ran[0], &f->parks[0]);
  assert_ptr_equal(ran[1], &f->parks[2]);
  assert_int_equal(nrefused, 1);
  assert_ptr_equal(refused[0].p, &f->parks[1]);
  assert_int_equal(refused[0].rc, LITH_CLOSED);
}

/* No more than max_bytes wait: past it the caller answers at once, and
 * the entry is left untouched. */
static void test_bytes_bound(void **state) {
  fixture *f = *state;
  assert_int_equal(f->q.max_bytes, LITHD_PARK_MAX_BYTES);
  f->q.max_bytes = 100;
  room = 0;
  assert_int_equal(lithd_overload_submit(&f->q, park(f, 0, NULL), 60), LITH_OK);
  assert_int_equal(lithd_overload_submit(&f->q, park(f, 1, NULL), 40), LITH_OK);
  lithd_park *p = park(f, 2, NULL);
  p->next = p; /* a mark: untouched */
  assert_int_equal(lithd_overload_submit(&f->q, p, 1), LITH_QUEUE_FULL);
  assert_ptr_equal(p->next, p);
  assert_ptr_equal(f->q.tail, &f->parks[1]);
  room = 1;
  lithd_overload_drain(&f->q);
  assert_int_equal(f->q.bytes, 40);
  assert_int_equal(lithd_overload_submit(&f->q, park(f, 3, NULL), 60), LITH_OK);
}

/* Stopping refuses everything waiting with CLOSED, and what comes after. */
static void test_stop(void **state) {
  fixture *f = *state;
  room = 0;
  for (int i = 0; i < 3; i++)
    lithd_overload_submit(&f->q, park(f, i, NULL), 1);
  lithd_overload_stop(&f->q);
  assert_int_equal(nrefused, 3);
  for (int i = 0; i < 3; i++) {
    assert_ptr_equal(refused[i].p, &f->parks[i]);
    assert_int_equal(refused[i].rc, LITH_CLOSED);
  }
  assert_int_equal(f->q.bytes, 0);
  assert_int_equal(lithd_overload_submit(&f->q, park(f, 3, NULL), 1), LITH_CLOSED);
  lithd_overload_stop(&f->q); /* a second stop does nothing */
  assert_int_equal(nrefused, 3);
}

/* An alone command (an interactive transaction's) takes its turn in the
 * same line and goes through lith_uv_submit_alone. */
static void test_alone(void **state) {
  fixture *f = *state;
  room = 0;
  nalone = 0;
  lithd_overload_submit(&f->q, park(f, 0, NULL), 1);
  lithd_park *p = park(f, 1, NULL);
  p->alone = 1;
  lithd_overload_submit(&f->q, p, 1);
  room = 2;
  lithd_overload_drain(&f->q);
  assert_int_equal(nran, 2);
  assert_ptr_equal(ran[1], &f->parks[1]);
  assert_int_equal(nalone, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_submitted_at_iteration_end, setup, teardown),
      cmocka_unit_test_setup_teardown(test_chunks, setup, teardown),
      cmocka_unit_test_setup_teardown(test_waits_in_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_deadline, setup, teardown),
      cmocka_unit_test_setup_teardown(test_no_wait, setup, teardown),
      cmocka_unit_test_setup_teardown(test_timer_backstop, setup, teardown),
      cmocka_unit_test_setup_teardown(test_client_gone, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bytes_bound, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stop, setup, teardown),
      cmocka_unit_test_setup_teardown(test_alone, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
