/*
 * The internal MPSC queue (writer/queue.h), alone: a fresh queue is idle and
 * pops NULL; one thread's pushes pop in FIFO order, also when pushes and
 * pops interleave (the stub node is re-inserted behind the last node); a
 * push stopped between its exchange and its link store makes pop return
 * NULL while the queue is not idle, and the node comes out once the link
 * lands; and 8 producer threads pushing 100k nodes each while one consumer
 * pops concurrently: every node is popped exactly once, the stub never
 * escapes, and each producer's nodes come out in the order it pushed them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sched.h>

#include <cmocka.h>

#include "../queue.h"

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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_empty_queue_is_idle),
      cmocka_unit_test(test_single_thread_fifo),
      cmocka_unit_test(test_half_done_push),
      cmocka_unit_test(test_many_producers_one_consumer),
  };
  return cmocka_run_group_tests_name("writer/queue", tests, NULL, NULL);
}
