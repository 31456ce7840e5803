/* The waker thread: see waker.h. */
#include "waker.h"

#include <pthread.h>
#include <stdalign.h>
#include <stdlib.h>

#include "../lib/error.h"
#include "../lib/thread.h"
#include "futex.h"

struct lith__waker {
  alignas(64) _Atomic uint64_t head; /* writer: next slot to fill */
  alignas(64) _Atomic uint64_t tail; /* waker: next slot to wake */
  alignas(64) _Atomic uint32_t sleeping;
  _Atomic uint32_t stop;
  pthread_t thread;
  _Atomic uint32_t *ring[LITH__WAKER_RING];
};

static void *waker_main(void *arg) {
  lith__waker *w = arg;
  pthread_setname_np(pthread_self(), "lith-waker");
  uint64_t t = atomic_load(&w->tail);
  for (;;) {
    uint64_t h = atomic_load(&w->head);
    while (t < h) {
      lith__futex_wake(w->ring[t & (LITH__WAKER_RING - 1)], 1);
      atomic_store_explicit(&w->tail, ++t, memory_order_release);
    }
    if (atomic_load(&w->stop) && atomic_load(&w->head) == t)
      return NULL;
    /* Same handshake as the writer's: announce sleep, look again, sleep. */
    atomic_store(&w->sleeping, 1);
    if (atomic_load(&w->head) != t || atomic_load(&w->stop)) {
      atomic_store(&w->sleeping, 0);
      continue;
    }
    lith__futex_wait(&w->sleeping, 1, -1);
    atomic_store(&w->sleeping, 0);
  }
}

int lith__waker_start(lith__waker **out) {
  *out = NULL;
  lith__waker *w = aligned_alloc(64, (sizeof *w + 63) / 64 * 64);
  if (!w)
    return lith__fail(LITH_NOMEM, "waker: out of memory");
  atomic_init(&w->head, 0);
  atomic_init(&w->tail, 0);
  atomic_init(&w->sleeping, 0);
  atomic_init(&w->stop, 0);
  if (lith__thread_start(&w->thread, waker_main, w) != 0) {
    free(w);
    return lith__fail(LITH_NOMEM, "waker: cannot start its thread");
  }
  *out = w;
  return LITH_OK;
}

void lith__waker_push(lith__waker *w, _Atomic uint32_t *word) {
  uint64_t h = atomic_load_explicit(&w->head, memory_order_relaxed); /* ours */
  if (h - atomic_load_explicit(&w->tail, memory_order_acquire) >= LITH__WAKER_RING) {
    lith__futex_wake(word, 1);
    return;
  }
  w->ring[h & (LITH__WAKER_RING - 1)] = word;
  atomic_store(&w->head, h + 1); /* seq_cst: ordered before the kick's look */
}

void lith__waker_kick(lith__waker *w) {
  if (atomic_load(&w->sleeping) && atomic_exchange(&w->sleeping, 0))
    lith__futex_wake(&w->sleeping, 1);
}

void lith__waker_stop(lith__waker *w) {
  if (!w)
    return;
  atomic_store(&w->stop, 1);
  atomic_store(&w->sleeping, 0);
  lith__futex_wake(&w->sleeping, 1);
  pthread_join(w->thread, NULL);
  free(w);
}
