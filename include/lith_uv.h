/*
 * lith_uv — deliver lith command completions on a libuv loop thread.
 *
 * An event-loop server must not block in lith_do(). It submits through a
 * bridge instead: the command runs on the writer thread, and when its batch
 * has committed the completion is handed back to the loop through one
 * uv_async_t. One wake-up delivers every completion pending at that moment,
 * in the order the writer answered them, each exactly once.
 *
 * All functions here are called on the loop's thread.
 */
#ifndef LITH_UV_H
#define LITH_UV_H

#include <uv.h>

#include "lith.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lith_uv lith_uv;
typedef struct lith_uv_req lith_uv_req;

/* Called on the loop thread once per accepted request, after its batch
 * committed (or failed). req->req.rc and req->req.errmsg hold the outcome.
 * The callback may free or reuse `req`. */
typedef void (*lith_uv_cb)(lith_uv_req *req);

/* A caller-owned request: keep it alive until its callback ran. */
struct lith_uv_req {
  lith_request req; /* req.rc / req.errmsg: the outcome; req.data: free for the caller */
  lith_uv_cb cb;
  lith_uv *bridge;  /* set by lith_uv_submit */
  lith_uv_req *next; /* private */
};

/* Create a bridge from `db` to `loop`; both stay the caller's and must
 * outlive the bridge. *out is released with lith_uv_close(). */
int lith_uv_open(lith *db, uv_loop_t *loop, lith_uv **out);

/* Queue fn(tx, arg) as a command; cb runs on the loop thread after the batch
 * committed. Never blocks: returns LITH_OK, or LITH_QUEUE_FULL, LITH_CLOSED,
 * LITH_MISUSE, in which case cb will not run. */
int lith_uv_submit(lith_uv *bridge, lith_uv_req *req, lith_command fn, void *arg,
                   lith_uv_cb cb);

/* Refuse further submissions, wait (while the loop runs) until every
 * accepted request's callback has run, then close the async handle, free the
 * bridge and call on_closed(ctx) (may be NULL). The loop must keep running
 * until then. */
void lith_uv_close(lith_uv *bridge, void (*on_closed)(void *ctx), void *ctx);

/* Requests accepted whose callback has not run yet. */
size_t lith_uv_pending(const lith_uv *bridge);

#ifdef __cplusplus
}
#endif

#endif /* LITH_UV_H */
