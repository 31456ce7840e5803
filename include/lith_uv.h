/*
 * lith_uv — lith on a libuv loop: command completions and reads delivered
 * on the loop thread. A library of its own (liblith_uv, lith_uv.pc) on
 * lith's public API, so that liblith itself needs no libuv.
 *
 * An event-loop server must not block in lith_do(). It submits through a
 * bridge instead: the command runs on the writer thread, and when its batch
 * has committed the completion is handed back to the loop through one
 * uv_async_t. One wake-up delivers every completion pending at that moment,
 * in the order the writer answered them, each exactly once.
 *
 * Nor may it wait in lith_read(): lith_uv_read runs the read on libuv's
 * thread pool and its callback on the loop.
 *
 * All functions here are called on the loop's thread. Errors leave a
 * message in lith_errmsg(), as lith's own calls do.
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
  lith_uv *bridge;   /* set by lith_uv_submit */
  lith_uv_req *next; /* private */
};

/* Create a bridge from `db` to `loop`; both stay the caller's and must
 * outlive the bridge. *out is released with lith_uv_close(). */
LITH_API int lith_uv_open(lith *db, uv_loop_t *loop, lith_uv **out);

/* Queue fn(tx, arg) as a command; cb runs on the loop thread after the batch
 * committed. Never blocks: returns LITH_OK, or LITH_QUEUE_FULL, LITH_CLOSED,
 * LITH_MISUSE, in which case cb will not run. */
LITH_API int lith_uv_submit(lith_uv *bridge, lith_uv_req *req, lith_command fn, void *arg, lith_uv_cb cb);

/* As lith_uv_submit, the command alone in its transaction (lith_submit_alone). */
LITH_API int lith_uv_submit_alone(lith_uv *bridge, lith_uv_req *req, lith_command fn, void *arg,
                                  lith_uv_cb cb);

/* Refuse further submissions, wait (while the loop runs) until every
 * accepted request's callback has run, then close the async handle, free the
 * bridge and call on_closed(ctx) (may be NULL). The loop must keep running
 * until then. */
LITH_API void lith_uv_close(lith_uv *bridge, void (*on_closed)(void *ctx), void *ctx);

/* Requests accepted whose callback has not run yet. */
LITH_API size_t lith_uv_pending(const lith_uv *bridge);

/* ---- Reads on the thread pool ------------------------------------------ */

typedef struct lith_uv_read_req lith_uv_read_req;

/* Called on the loop thread once per accepted read, after it ended;
 * req->rc and req->errmsg hold the outcome. The callback may free or reuse
 * `req`. */
typedef void (*lith_uv_read_cb)(lith_uv_read_req *req);

/* A caller-owned read request: keep it alive and untouched (but for `data`)
 * until its callback ran. */
struct lith_uv_read_req {
  void *data;                   /* free for the caller */
  int rc;                       /* outcome, valid in cb: lith_read's result, or
                                   LITH_CLOSED if the read was cancelled
                                   (uv_cancel on &work) before it ran */
  char errmsg[LITH_ERRMSG_MAX]; /* "" on success; valid in cb */
  /* private: set by lith_uv_read */
  uv_work_t work;
  lith *db;
  lith_reader fn;
  void *arg;
  lith_uv_read_cb cb;
};

/* Run lith_read(db, fn, arg) on one of the loop's thread pool threads
 * (uv_queue_work: it may wait for a free reader, and the loop never does),
 * then cb(req) on the loop thread. fn runs on the pool thread, so what it
 * writes into `arg` (the caller's) is the loop's to read in cb, not before.
 * `db` and `loop` stay the caller's and must outlive the read. Returns
 * LITH_OK (cb will run exactly once), or LITH_MISUSE (an argument missing)
 * or LITH_ERROR (uv_queue_work refused), in which case cb will not run. */
LITH_API int lith_uv_read(lith *db, uv_loop_t *loop, lith_uv_read_req *req, lith_reader fn, void *arg,
                          lith_uv_read_cb cb);

#ifdef __cplusplus
}
#endif

#endif /* LITH_UV_H */
