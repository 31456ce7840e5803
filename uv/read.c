/*
 * lith_uv_read: lith_read on the loop's thread pool, the callback on the
 * loop (liblith_uv: lith's public API and libuv only).
 *
 * lith_read may wait for a free reader and always runs SQLite, so it must
 * not run on the loop: uv_queue_work runs it on a pool thread, then hands
 * the request back to the loop. The outcome crosses threads in the request
 * itself: the pool thread writes rc and errmsg (its own lith_errmsg, which
 * is per thread), and the loop reads them after libuv's hand-back, which
 * orders the two.
 */
#include <string.h>

#include "lith_uv.h"

static void set_msg(lith_uv_read_req *r, const char *msg) {
  size_t n = msg ? strlen(msg) : 0;
  if (n >= sizeof r->errmsg)
    n = sizeof r->errmsg - 1;
  if (n)
    memcpy(r->errmsg, msg, n);
  r->errmsg[n] = '\0';
}

static void read_work(uv_work_t *w) { /* a pool thread */
  lith_uv_read_req *r = w->data;
  r->rc = lith_read(r->db, r->fn, r->arg);
  set_msg(r, r->rc != LITH_OK ? lith_errmsg(r->db) : "");
}

static void read_after(uv_work_t *w, int status) { /* the loop */
  lith_uv_read_req *r = w->data;
  if (status == UV_ECANCELED) {
    r->rc = LITH_CLOSED;
    set_msg(r, "lith_uv_read: cancelled before it ran");
  }
  r->cb(r); /* may free r */
}

int lith_uv_read(lith *db, uv_loop_t *loop, lith_uv_read_req *req, lith_reader fn, void *arg,
                 lith_uv_read_cb cb) {
  if (!db || !loop || !req || !fn || !cb)
    return lith_set_error(LITH_MISUSE, "lith_uv_read: handle, loop, request, fn and cb are required");
  req->db = db;
  req->fn = fn;
  req->arg = arg;
  req->cb = cb;
  req->rc = LITH_OK;
  req->errmsg[0] = '\0';
  req->work.data = req;
  int rc = uv_queue_work(loop, &req->work, read_work, read_after);
  if (rc != 0)
    return lith_set_error(LITH_ERROR, "lith_uv_read: uv_queue_work: %s", uv_strerror(rc));
  return LITH_OK;
}
