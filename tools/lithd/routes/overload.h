/*
 * lithd overload — where a command waits when lith's queue is full, and
 * how parsed commands reach the writer in chunks.
 *
 * Chunks: a command is not submitted the moment it is parsed but queued
 * here, and the queue is drained every LITHD_SUBMIT_CHUNK commands and at
 * the end of the loop iteration that parsed them (a uv_check_t). The writer
 * then finds several together and commits them as one batch, without
 * idling while the loop parses the rest of a busy iteration.
 *
 * Overload: when lith_uv_submit answers LITH_QUEUE_FULL, the command stays
 * here, in a FIFO on the loop, until the writer makes room (the owner calls
 * lithd_overload_drain from its done callbacks) or wait_ms passed (then it
 * is refused with LITH_QUEUE_FULL: the owner answers 503 with Retry-After).
 * While anything waits, new commands queue behind it, so the wait is first
 * come, first served. What waits is bounded in bytes (max_bytes of request
 * bodies): past that a command is refused at once.
 *
 * Threads: the loop thread only.
 *
 * Ownership: the queue holds lithd_park entries that live inside their
 * owner's request context; it never frees one. An entry is handed back
 * exactly once: through `done` (lith_uv's callback, after the writer ran
 * it) or through `refuse`.
 */
#ifndef LITHD_OVERLOAD_H
#define LITHD_OVERLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "http.h"
#include "lith.h"
#include "lith_uv.h"

/* Request bodies waiting, at most (lithd_overload.max_bytes). */
#define LITHD_PARK_MAX_BYTES ((size_t)256 << 20)
/* Commands parsed that are submitted without waiting for the iteration's end. */
#define LITHD_SUBMIT_CHUNK 16
/* The longest the timer sleeps while something waits: a backstop to the
 * drains the completions run. */
#define LITHD_PARK_POLL_MS 50

/* A command waiting to be submitted. The owner fills ureq, fn, arg, done,
 * req and refuse; the queue the rest. */
typedef struct lithd_park {
  struct lithd_park *next;
  int64_t deadline; /* lith_clock_ms */
  size_t bytes;
  lith_uv_req *ureq; /* the owner's; lith_uv_submit's arguments */
  lith_command fn;
  void *arg;
  lith_uv_cb done;
  int alone;          /* lith_uv_submit_alone: a transaction of its own */
  lith_http_req *req; /* the request; a command whose client left is not run.
                         NULL: no request to watch (Hrana over WebSocket,
                         whose connection ends its streams itself) */
  /* Answer the command with rc (LITH_QUEUE_FULL: waited too long or no
   * room; LITH_CLOSED: stopping, or the client left) as its done callback
   * would, and free it. */
  void (*refuse)(struct lithd_park *p, int rc);
} lithd_park;

typedef struct lithd_overload {
  uv_loop_t *loop;  /* caller's */
  lith_uv *bridge;  /* caller's; outlives the queue */
  int64_t wait_ms;  /* how long a command waits for room */
  size_t max_bytes; /* bytes waiting, at most: LITHD_PARK_MAX_BYTES */

  /* Internal. */
  lithd_park *head, *tail;
  size_t bytes;
  unsigned fresh; /* queued since the last chunk went */
  uv_timer_t timer;
  uv_check_t check; /* submits what the loop iteration parsed */
  int started, stopped;
} lithd_overload;

/* Set up q on loop (its handles are initialised here): commands go to
 * bridge and wait at most wait_ms for room; max_bytes is set to
 * LITHD_PARK_MAX_BYTES (a test may lower it afterwards). Returns 0, or -1
 * when libuv refused the timer. */
int lithd_overload_init(lithd_overload *q, uv_loop_t *loop, lith_uv *bridge, int64_t wait_ms);

/* Queue p (`bytes` of the owner's memory it stands for) to be submitted at
 * the end of this loop iteration, or sooner (chunks, see above), behind
 * whatever waits already. Returns LITH_OK (p->done or p->refuse will run),
 * or LITH_CLOSED (stopping) or LITH_QUEUE_FULL (max_bytes waiting) for the
 * caller to answer at once (p untouched). */
int lithd_overload_submit(lithd_overload *q, lithd_park *p, size_t bytes);

/* Submit what waits, in order, until the queue is full; refuse what waited
 * past its deadline, whose client left, or everything when stopping. The
 * owner calls it when the writer made room (a done callback) and anything
 * waits (q->head != NULL). */
void lithd_overload_drain(lithd_overload *q);

/* Refuse everything waiting with LITH_CLOSED and close the handles (run
 * the loop to let them close). Later submits get LITH_CLOSED. Does nothing
 * before init or a second time. */
void lithd_overload_stop(lithd_overload *q);

#endif /* LITHD_OVERLOAD_H */
