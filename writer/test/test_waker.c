/*
 * The waker thread (writer/waker.c), on its own: threads asleep on futex
 * words, as producers wait for their answers.
 *   - pushed words and a kick wake every sleeper (the words' values were
 *     set first, as the writer marks an answer done before handing over
 *     the wake-up); many rounds, the waker asleep in between;
 *   - with the waker asleep and never kicked, a push into a full ring
 *     makes the wake-up call itself: that sleeper wakes at once;
 *   - lith__waker_stop makes every wake-up still pending before it stops
 *     (pushed, never kicked); stopping NULL is fine.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../futex.h"
#include "../waker.h"
#include "lith.h"

enum { ASLEEP = 1, DONE = 0 };

typedef struct sleeper {
  _Atomic uint32_t word; /* ASLEEP until answered */
  _Atomic int waiting;   /* in its wait loop */
  pthread_t thread;
} sleeper;

static void *sleep_main(void *arg) {
  sleeper *s = arg;
  atomic_store(&s->waiting, 1);
  while (atomic_load(&s->word) == ASLEEP)
    lith__futex_wait(&s->word, ASLEEP, -1);
  return NULL;
}

static void start_sleepers(sleeper *s, int n) {
  for (int i = 0; i < n; i++) {
    atomic_init(&s[i].word, ASLEEP);
    atomic_init(&s[i].waiting, 0);
    assert_int_equal(pthread_create(&s[i].thread, NULL, sleep_main, &s[i]), 0);
  }
  for (int i = 0; i < n; i++)
    while (!atomic_load(&s[i].waiting))
      usleep(100);
  usleep(20000); /* into the kernel: only a futex wake gets them out now */
}

/* Join each sleeper, at most 10 s in all: a lost wake-up fails, not hangs. */
static void join_sleepers(sleeper *s, int n) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 10;
  for (int i = 0; i < n; i++)
    assert_int_equal(pthread_timedjoin_np(s[i].thread, NULL, &until), 0);
}

enum { SLEEPERS = 16, ROUNDS = 5 };

static void test_push_and_kick_wake_every_sleeper(void **state) {
  (void)state;
  lith__waker *w = NULL;
  assert_int_equal(lith__waker_start(&w), LITH_OK);
  assert_non_null(w);
  for (int round = 0; round < ROUNDS; round++) {
    sleeper s[SLEEPERS];
    start_sleepers(s, SLEEPERS);
    for (int i = 0; i < SLEEPERS; i++) {
      atomic_store(&s[i].word, DONE);
      lith__waker_push(w, &s[i].word);
    }
    lith__waker_kick(w);
    join_sleepers(s, SLEEPERS);
  }
  lith__waker_stop(w);
}

static void test_full_ring_wakes_directly(void **state) {
  (void)state;
  lith__waker *w = NULL;
  assert_int_equal(lith__waker_start(&w), LITH_OK);
  usleep(200000); /* the waker finds nothing to do and sleeps */
  /* Words nobody waits on fill the ring; never kicked, the waker sleeps on. */
  _Atomic uint32_t *idle = calloc(LITH__WAKER_RING, sizeof *idle);
  assert_non_null(idle);
  for (int i = 0; i < LITH__WAKER_RING; i++)
    lith__waker_push(w, &idle[i]);
  sleeper s;
  start_sleepers(&s, 1);
  atomic_store(&s.word, DONE);
  lith__waker_push(w, &s.word); /* the ring is full: woken here */
  join_sleepers(&s, 1);
  lith__waker_stop(w);
  free(idle);
}

static void test_stop_makes_the_pending_wakeups(void **state) {
  (void)state;
  lith__waker *w = NULL;
  assert_int_equal(lith__waker_start(&w), LITH_OK);
  usleep(50000);
  sleeper s[SLEEPERS];
  start_sleepers(s, SLEEPERS);
  for (int i = 0; i < SLEEPERS; i++) {
    atomic_store(&s[i].word, DONE);
    lith__waker_push(w, &s[i].word);
  }
  lith__waker_stop(w); /* no kick */
  join_sleepers(s, SLEEPERS);
  lith__waker_stop(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_push_and_kick_wake_every_sleeper),
      cmocka_unit_test(test_full_ring_wakes_directly),
      cmocka_unit_test(test_stop_makes_the_pending_wakeups),
  };
  return cmocka_run_group_tests_name("writer/waker", tests, NULL, NULL);
}
