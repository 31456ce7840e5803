/*
 * The waker: a helper thread that makes the futex wake-up calls for the
 * producers of a large batch, so the writer can begin the next transaction
 * instead of spending a system call (and, on a virtual machine, an
 * inter-processor interrupt) per producer.
 *
 * The writer marks every answer done itself (producers that are spinning
 * or not yet asleep see it at once); only the addresses of producers found
 * asleep are handed over, through a single-producer single-consumer ring.
 * A wake-up that arrives late is harmless: a futex wake on a word nobody
 * waits on does nothing, and every waiter re-checks its state in a loop.
 */
#ifndef LITH_WRITER_WAKER_H
#define LITH_WRITER_WAKER_H

#include <stdatomic.h>
#include <stdint.h>

/* Wake-ups the ring holds: a power of two, larger than any batch. */
#define LITH__WAKER_RING 8192

typedef struct lith__waker lith__waker;

/* Start the thread. Returns a lith code. */
int lith__waker_start(lith__waker **out);

/* Writer thread: wake the thread sleeping on `word` (soon). If the ring is
 * full the writer makes the call itself. */
void lith__waker_push(lith__waker *w, _Atomic uint32_t *word);

/* Writer thread: after a batch's pushes, make sure the waker is running. */
void lith__waker_kick(lith__waker *w);

/* Make every pending wake-up, stop the thread and free it. NULL is fine. */
void lith__waker_stop(lith__waker *w);

#endif
