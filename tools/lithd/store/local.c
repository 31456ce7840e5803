/*
 * lithd store on a local file: lith's writer and read pool, answered on
 * the loop through lith_uv (see store.h, local.h).
 *
 * Design:
 *   - A write is one lith command (lithd_batch_run) that goes through the
 *     overflow queue (routes/overload.h: chunks, and a FIFO while lith's
 *     queue is full) to lith_uv_submit; its callback, on the loop, copies
 *     the outcome into the request and calls the caller's cb.
 *   - A read is lith_uv_read with lithd_batch_read: on libuv's pool, one
 *     snapshot.
 *   - The per-request state (the bridge's request, the queue's entry) is
 *     allocated here, so store.h names nothing of lith_uv.
 */
#include "local.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "overload.h"
#include "store_int.h"

typedef struct local_store {
  lithd_store base; /* first */
  lith *db;
  lith_uv *bridge;
  uv_loop_t *loop;
  lithd_overload park;
  void (*on_drained)(void *arg);
  void *on_drained_arg;
} local_store;

/* A write on its way; ureq first: the bridge's callback gets &ureq. */
typedef struct local_write {
  lith_uv_req ureq;
  lithd_park park;
  lithd_store_req *r;
  local_store *ls;
} local_write;

typedef struct local_read {
  lith_uv_read_req read;
  lithd_store_req *r;
} local_read;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- Writes ---------------------------------------------------------------- */

static int write_cmd(lith_tx *tx, void *arg) {
  local_write *w = arg;
  return lithd_batch_run(tx, w->r->batch, &w->r->result);
}

/* Hand the outcome over and free w; then the queue may move. */
static void write_answer(local_write *w, int rc, const char *errmsg) {
  lithd_store_req *r = w->r;
  local_store *ls = w->ls;
  r->rc = rc;
  snprintf(r->errmsg, sizeof r->errmsg, "%s", errmsg != NULL ? errmsg : "");
  free(w);
  r->cb(r);
  if (ls->park.head != NULL)
    lithd_overload_drain(&ls->park); /* the writer made room */
}

static void write_done(lith_uv_req *u) {
  local_write *w = (local_write *)u;
  write_answer(w, u->req.rc, u->req.errmsg);
}

static void write_refused(lithd_park *p, int rc) {
  local_write *w = p->arg;
  write_answer(w, rc,
               rc == LITH_QUEUE_FULL ? "the write queue is full; retry later"
               : rc == LITH_CLOSED   ? "lithd is shutting down"
                                     : lith_errstr(rc));
}

static int local_write_fn(lithd_store *s, lithd_store_req *r) {
  local_store *ls = (local_store *)s;
  local_write *w = calloc(1, sizeof *w);
  int rc;
  if (w == NULL)
    return LITH_NOMEM;
  w->r = r;
  w->ls = ls;
  w->park.ureq = &w->ureq;
  w->park.fn = write_cmd;
  w->park.arg = w;
  w->park.done = write_done;
  w->park.req = r->http;
  w->park.refuse = write_refused;
  rc = lithd_overload_submit(&ls->park, &w->park, r->bytes + sizeof *w);
  if (rc != LITH_OK)
    free(w);
  return rc;
}

/* ---- Reads ----------------------------------------------------------------- */

static int read_fn(lith_rx *rx, void *arg) { /* a pool thread */
  lithd_store_req *r = arg;
  r->t_start_ns = now_ns();
  int rc = lithd_batch_read(rx, r->batch, &r->result);
  r->t_end_ns = now_ns();
  return rc;
}

static void read_after(lith_uv_read_req *u) { /* the loop */
  local_read *lr = (local_read *)u;
  lithd_store_req *r = lr->r;
  r->rc = u->rc;
  snprintf(r->errmsg, sizeof r->errmsg, "%s", u->errmsg);
  free(lr);
  r->cb(r);
}

static int local_read_fn(lithd_store *s, lithd_store_req *r) {
  local_store *ls = (local_store *)s;
  local_read *lr = calloc(1, sizeof *lr);
  if (lr == NULL)
    return LITH_NOMEM;
  lr->r = r;
  if (lith_uv_read(ls->db, ls->loop, &lr->read, read_fn, r, read_after) != LITH_OK) {
    free(lr);
    return LITH_ERROR;
  }
  return LITH_OK;
}

/* ---- The rest -------------------------------------------------------------- */

static void local_stats(lithd_store *s, lithd_store_stats *st) {
  local_store *ls = (local_store *)s;
  lith_stats_get(ls->db, &st->lith);
  st->has_lith = 1;
  st->commands = st->lith.commands;
  st->batches = st->lith.batches;
  st->failed = st->lith.failed;
  st->inflight = ls->bridge != NULL ? (int64_t)lith_uv_pending(ls->bridge) : 0;
}

static lith *local_lith(lithd_store *s) { return ((local_store *)s)->db; }

static void local_stop(lithd_store *s) { lithd_overload_stop(&((local_store *)s)->park); }

static void bridge_closed(void *arg) {
  local_store *ls = arg;
  ls->bridge = NULL;
  if (ls->on_drained != NULL)
    ls->on_drained(ls->on_drained_arg);
}

static void local_drain(lithd_store *s, void (*on_drained)(void *arg), void *arg) {
  local_store *ls = (local_store *)s;
  lithd_overload_stop(&ls->park); /* (a second time does nothing) */
  lith_interrupt(ls->db);         /* a backup's copy stops between steps */
  ls->on_drained = on_drained;
  ls->on_drained_arg = arg;
  if (ls->bridge == NULL) {
    if (on_drained != NULL)
      on_drained(arg);
    return;
  }
  lith_uv_close(ls->bridge, bridge_closed, ls);
}

static int local_close(lithd_store *s, char *err, size_t errsz) {
  local_store *ls = (local_store *)s;
  int rc = LITH_OK;
  if (ls->db != NULL && (rc = lith_close(ls->db)) != LITH_OK)
    snprintf(err, errsz, "%s", lith_errmsg(NULL));
  free(ls);
  return rc;
}

static const lithd_store_ops local_ops = {
    .name = "local",
    .write = local_write_fn,
    .read = local_read_fn,
    .stats = local_stats,
    .lith = local_lith,
    .stop = local_stop,
    .drain = local_drain,
    .close = local_close,
};

int lithd_store_local_open(lith *db, uv_loop_t *loop, int64_t queue_wait_ms, lithd_store **out, char *err,
                           size_t errsz) {
  local_store *ls = calloc(1, sizeof *ls);
  *out = NULL;
  if (ls == NULL) {
    snprintf(err, errsz, "out of memory");
    return LITH_NOMEM;
  }
  ls->base.ops = &local_ops;
  ls->db = db;
  ls->loop = loop;
  if (lith_uv_open(db, loop, &ls->bridge) != LITH_OK) {
    snprintf(err, errsz, "lith_uv_open: %s", lith_errmsg(db));
    goto fail;
  }
  if (lithd_overload_init(&ls->park, loop, ls->bridge, queue_wait_ms) != 0) {
    snprintf(err, errsz, "cannot start the write queue's timer");
    goto fail_bridge;
  }
  *out = &ls->base;
  return LITH_OK;

fail_bridge:
  lith_uv_close(ls->bridge, NULL, NULL); /* closes on the loop's next turn */
fail:
  free(ls);
  return LITH_ERROR;
}
