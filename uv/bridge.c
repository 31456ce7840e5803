/*
 * The libuv bridge (liblith_uv: lith's public API and libuv only). The
 * writer thread finishes a request by appending it to the bridge's
 * completion list and poking one uv_async_t; libuv coalesces pokes, and the
 * loop thread, when it wakes, takes the whole list at once and runs every
 * callback in it, in answer order.
 *
 * The list is guarded by a mutex held only for a pointer swap (loop side)
 * or an append plus uv_async_send (writer side). Holding it across
 * uv_async_send is what makes close safe: once the loop has seen every
 * accepted request delivered, one lock/unlock pair proves the writer has
 * left uv_async_send for the last time, and the handle may be closed.
 */
#include <pthread.h>
#include <stdlib.h>

#include "lith_uv.h"

struct lith_uv {
  lith *db;
  uv_loop_t *loop;
  uv_async_t async;
  pthread_mutex_t mu;
  lith_uv_req *head, *tail; /* completions not yet delivered (under mu) */
  size_t pending;           /* accepted, not yet delivered (loop thread) */
  int closing;
  void (*on_closed)(void *);
  void *closed_ctx;
};

static void free_bridge(uv_handle_t *h) {
  lith_uv *b = h->data;
  void (*cb)(void *) = b->on_closed;
  void *ctx = b->closed_ctx;
  pthread_mutex_destroy(&b->mu);
  free(b);
  if (cb)
    cb(ctx);
}

static void maybe_finish_close(lith_uv *b) {
  if (!b->closing || b->pending > 0 || uv_is_closing((uv_handle_t *)&b->async))
    return;
  /* Wait out a writer still inside uv_async_send for the last request. */
  pthread_mutex_lock(&b->mu);
  pthread_mutex_unlock(&b->mu);
  uv_close((uv_handle_t *)&b->async, free_bridge);
}

static void on_async(uv_async_t *h) {
  lith_uv *b = h->data;
  pthread_mutex_lock(&b->mu);
  lith_uv_req *r = b->head;
  b->head = b->tail = NULL;
  pthread_mutex_unlock(&b->mu);
  while (r) {
    lith_uv_req *next = r->next;
    b->pending--;
    r->next = NULL;
    r->cb(r); /* may free r */
    r = next;
  }
  maybe_finish_close(b);
}

/* Writer thread: the request's batch is done. */
static void on_done(lith_request *req) {
  lith_uv_req *r = (lith_uv_req *)req; /* req is the first member */
  lith_uv *b = r->bridge;
  r->next = NULL;
  pthread_mutex_lock(&b->mu);
  if (b->tail)
    b->tail->next = r;
  else
    b->head = r;
  b->tail = r;
  uv_async_send(&b->async);
  pthread_mutex_unlock(&b->mu);
}

int lith_uv_open(lith *db, uv_loop_t *loop, lith_uv **out) {
  if (!out)
    return lith_set_error(LITH_MISUSE, "lith_uv_open: out is NULL");
  *out = NULL;
  if (!db || !loop)
    return lith_set_error(LITH_MISUSE, "lith_uv_open: no handle or no loop");
  lith_uv *b = calloc(1, sizeof *b);
  if (!b)
    return lith_set_error(LITH_NOMEM, "lith_uv_open: out of memory");
  b->db = db;
  b->loop = loop;
  int rc = uv_async_init(loop, &b->async, on_async);
  if (rc != 0) {
    free(b);
    return lith_set_error(LITH_ERROR, "lith_uv_open: uv_async_init: %s", uv_strerror(rc));
  }
  b->async.data = b;
  pthread_mutex_init(&b->mu, NULL);
  *out = b;
  return LITH_OK;
}

static int submit(lith_uv *b, lith_uv_req *req, lith_command fn, void *arg, lith_uv_cb cb, int alone) {
  if (!b || !req || !fn || !cb)
    return lith_set_error(LITH_MISUSE, "lith_uv_submit: bridge, request, fn and cb are required");
  if (b->closing)
    return lith_set_error(LITH_CLOSED, "lith_uv_submit: the bridge is closing");
  req->cb = cb;
  req->bridge = b;
  req->next = NULL;
  req->req.fn = fn;
  req->req.arg = arg;
  req->req.done = on_done;
  b->pending++; /* before submit: the writer may answer at once */
  int rc = alone ? lith_submit_alone(b->db, &req->req) : lith_submit(b->db, &req->req);
  if (rc != LITH_OK)
    b->pending--;
  return rc;
}

int lith_uv_submit(lith_uv *b, lith_uv_req *req, lith_command fn, void *arg, lith_uv_cb cb) {
  return submit(b, req, fn, arg, cb, 0);
}

int lith_uv_submit_alone(lith_uv *b, lith_uv_req *req, lith_command fn, void *arg, lith_uv_cb cb) {
  return submit(b, req, fn, arg, cb, 1);
}

void lith_uv_close(lith_uv *b, void (*on_closed)(void *ctx), void *ctx) {
  if (!b || b->closing)
    return;
  b->closing = 1;
  b->on_closed = on_closed;
  b->closed_ctx = ctx;
  maybe_finish_close(b);
}

size_t lith_uv_pending(const lith_uv *b) { return b ? b->pending : 0; }
