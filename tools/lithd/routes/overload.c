/*
 * lithd overload — see overload.h.
 *
 * The FIFO is a singly linked list through the entries themselves (head,
 * tail), so queueing allocates nothing. Two handles drive it: the check
 * handle drains at the end of every loop iteration that queued something,
 * and the timer wakes for the head's deadline (at most every
 * LITHD_PARK_POLL_MS) while anything waits; both stop when the list is
 * empty, so an idle lithd does not wake.
 */
#include "overload.h"

static void timer_cb(uv_timer_t *t);

void lithd_overload_drain(lithd_overload *q) {
  int64_t now = lith_clock_ms();
  lithd_park *p;

  while ((p = q->head) != NULL) {
    int rc;
    if (q->stopped)
      rc = LITH_CLOSED;
    else if (p->req != NULL && lith_http_is_gone(p->req))
      rc = LITH_CLOSED; /* nobody to answer: do not run it */
    else if ((rc = p->alone
                       ? lith_uv_submit_alone(q->bridge, p->ureq, p->fn, p->arg, p->done)
                       : lith_uv_submit(q->bridge, p->ureq, p->fn, p->arg, p->done)) == LITH_QUEUE_FULL &&
             now < p->deadline)
      break; /* still no room: keep the order */
    q->head = p->next;
    if (q->head == NULL)
      q->tail = NULL;
    q->bytes -= p->bytes;
    if (rc != LITH_OK)
      p->refuse(p, rc); /* frees p */
  }
  if (!q->started || q->stopped)
    return;
  if (q->head != NULL) {
    int64_t wait = q->head->deadline - now;
    /* Completions drain the list as room appears; the timer is there for
     * the deadline, and as a backstop. */
    if (wait < 0)
      wait = 0;
    if (wait > LITHD_PARK_POLL_MS)
      wait = LITHD_PARK_POLL_MS;
    uv_timer_start(&q->timer, timer_cb, (uint64_t)wait, 0);
  } else {
    uv_timer_stop(&q->timer);
    uv_check_stop(&q->check);
  }
}

static void timer_cb(uv_timer_t *t) { lithd_overload_drain(t->data); }

static void check_cb(uv_check_t *c) {
  lithd_overload *q = c->data;
  q->fresh = 0;
  lithd_overload_drain(q);
}

int lithd_overload_init(lithd_overload *q, uv_loop_t *loop, lith_uv *bridge, int64_t wait_ms) {
  q->loop = loop;
  q->bridge = bridge;
  q->wait_ms = wait_ms;
  q->max_bytes = LITHD_PARK_MAX_BYTES;
  q->head = q->tail = NULL;
  q->bytes = 0;
  q->fresh = 0;
  q->stopped = 0;
  if (uv_timer_init(loop, &q->timer) != 0)
    return -1;
  q->timer.data = q;
  uv_check_init(loop, &q->check);
  q->check.data = q;
  q->started = 1;
  return 0;
}

int lithd_overload_submit(lithd_overload *q, lithd_park *p, size_t bytes) {
  if (q->stopped)
    return LITH_CLOSED;
  if (q->bytes + bytes > q->max_bytes)
    return LITH_QUEUE_FULL;
  p->next = NULL;
  p->bytes = bytes;
  p->deadline = lith_clock_ms() + q->wait_ms;
  if (q->tail != NULL)
    q->tail->next = p;
  else
    q->head = p;
  q->tail = p;
  q->bytes += bytes;
  /* Every LITHD_SUBMIT_CHUNK commands go at once, not only at the
   * iteration's end: with many clients a single iteration reads dozens of
   * requests, and the writer should start on the first ones while the loop
   * parses the rest, rather than the two taking turns. */
  if (++q->fresh >= LITHD_SUBMIT_CHUNK) {
    q->fresh = 0;
    lithd_overload_drain(q);
  }
  uv_check_start(&q->check, check_cb);
  return LITH_OK;
}

void lithd_overload_stop(lithd_overload *q) {
  if (!q->started || q->stopped)
    return;
  q->stopped = 1;
  lithd_overload_drain(q); /* refuses everything waiting: stopping */
  uv_close((uv_handle_t *)&q->timer, NULL);
  uv_close((uv_handle_t *)&q->check, NULL);
}
