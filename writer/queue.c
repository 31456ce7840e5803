/* The MPSC queue: see queue.h. */
#include "queue.h"

#include <stddef.h>

void lith__queue_init(lith__queue *q) {
  atomic_init(&q->stub.next, NULL);
  atomic_init(&q->head, &q->stub);
  q->tail = &q->stub;
}

void lith__queue_push(lith__queue *q, lith__qnode *n) {
  atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
  /* seq_cst: the writer's "sleeping" handshake relies on this exchange being
   * ordered before the producer's later look at the sleeping flag. */
  lith__qnode *prev = atomic_exchange(&q->head, n);
  atomic_store_explicit(&prev->next, n, memory_order_release);
}

lith__qnode *lith__queue_pop(lith__queue *q) {
  lith__qnode *tail = q->tail;
  lith__qnode *next = atomic_load_explicit(&tail->next, memory_order_acquire);
  if (tail == &q->stub) {
    if (next == NULL)
      return NULL;
    q->tail = next;
    tail = next;
    next = atomic_load_explicit(&next->next, memory_order_acquire);
  }
  if (next != NULL) {
    q->tail = next;
    return tail;
  }
  if (tail != atomic_load(&q->head))
    return NULL; /* a push is half done */
  lith__queue_push(q, &q->stub);
  next = atomic_load_explicit(&tail->next, memory_order_acquire);
  if (next != NULL) {
    q->tail = next;
    return tail;
  }
  return NULL;
}

bool lith__queue_idle(lith__queue *q) {
  /* The tail is a real node not yet handed out, or the stub with someone
   * after it (head moved): either way there is work. */
  return q->tail == &q->stub && atomic_load(&q->head) == &q->stub;
}
