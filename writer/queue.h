/*
 * An intrusive lock-free multi-producer single-consumer queue (after Dmitry
 * Vyukov's design). A push is one atomic exchange and one store: wait-free,
 * no allocation, the node lives inside the caller's request. The consumer
 * (the writer thread) needs no read-modify-write except to re-insert the
 * stub node.
 *
 * One caveat of the design: between a producer's exchange and its link
 * store the queue looks empty past that point. lith__queue_pop() then
 * returns NULL although lith__queue_idle() is false; the consumer either
 * runs with what it already has or yields and looks again.
 */
#ifndef LITH_WRITER_QUEUE_H
#define LITH_WRITER_QUEUE_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>

typedef struct lith__qnode {
  _Atomic(struct lith__qnode *) next;
} lith__qnode;

typedef struct lith__queue {
  alignas(64) _Atomic(lith__qnode *) head; /* producers: most recent node */
  alignas(64) lith__qnode *tail;           /* consumer: oldest node */
  lith__qnode stub;
} lith__queue;

void lith__queue_init(lith__queue *q);

/* Any thread. `n` is owned by the queue until popped. */
void lith__queue_push(lith__queue *q, lith__qnode *n);

/* Consumer only. The oldest node, or NULL if none is ready. */
lith__qnode *lith__queue_pop(lith__queue *q);

/* Consumer only. True when nothing is queued and no push is under way. */
bool lith__queue_idle(lith__queue *q);

#endif
