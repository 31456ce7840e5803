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

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "overload.h"
#include "sqljson_int.h"
#include "store_int.h"
#include "tx_life.h"

typedef struct local_store {
  lithd_store base; /* first */
  lith *db;
  lith_uv *bridge;
  uv_loop_t *loop;
  lithd_overload park;
  int stopping;
  int snaps;    /* transactions on a snapshot whose thread is not joined yet */
  int draining; /* local_drain ran: on_drained once the bridge and snaps are gone */
  /* Commands handed to the writer's queue and not answered yet (the loop
   * counts, a transaction's thread reads): past the one that holds the
   * writer, they wait for it (store.h's idle rule). */
  _Atomic int writes_in;
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

/* Why a command was not taken (the queue's refusal). */
static const char *refused_why(int rc) {
  return rc == LITH_QUEUE_FULL ? "the write queue is full; retry later"
         : rc == LITH_CLOSED   ? "lithd is shutting down"
                               : lith_errstr(rc);
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
  atomic_fetch_sub(&ls->writes_in, 1);
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
  write_answer(w, rc, refused_why(rc));
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
  /* a VACUUM alone (lith_tx_vacuum): its transaction its own */
  w->park.alone = lithd__batch_vacuums(r->batch);
  atomic_fetch_add(&ls->writes_in, 1); /* before: the queue may answer it inside the call */
  rc = lithd_overload_submit(&ls->park, &w->park, r->bytes + sizeof *w);
  if (rc != LITH_OK) {
    atomic_fetch_sub(&ls->writes_in, 1);
    free(w);
  }
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

/* ---- Interactive transactions (store.h; their states: tx_life.h) -------------
 *
 * One command, submitted alone, is the transaction: its function runs on
 * the writer thread and waits there (a condition variable, bounded by the
 * idle and total deadlines) for the runs the loop hands it, one at a time.
 * A run that leaves the transaction open goes back to the loop through
 * the transaction's uv_async_t; one that ends it (its COMMIT or ROLLBACK
 * step, or a failure of the whole batch) ends the function, so lith
 * commits or rolls back, and is answered from the command's callback with
 * the commit's outcome. A close (or the stop) makes the function return a
 * rollback. The handle is freed when both the command's callback ran and
 * the caller closed it (and the async handle closed).
 *
 * A transaction on a snapshot (LITHD_TX_SNAPSHOT) runs the same loop on a
 * thread of its own inside one lith_read: the reader's read transaction is
 * its snapshot, and it does not hold the writer. It notes lith's commit
 * count before its first read pins the snapshot, so any commit the
 * snapshot misses counts after it. A run that wants to write (a reader's
 * LITHD_NOT_A_QUERY: nothing of it changed anything) is handed, unanswered,
 * to the command above (submitted by the loop), while the thread keeps its
 * snapshot and waits for the command's verdict: the count unchanged, the
 * snapshot is still the database, the run goes on on the writer (which
 * sees the same rows) and the thread ends its read; changed (or changed
 * already when the run came back), the snapshot is stale, and the run is
 * made again on it with every write failing LITH_BUSY, as SQLite's
 * SQLITE_BUSY_SNAPSHOT: the transaction stays open on its snapshot, its
 * reads still work, and COMMIT or ROLLBACK end it. The thread is joined
 * on the loop when it ends (the same uv_async_t), and the handle is freed
 * only after that. */

/* The function's private answers to lith: roll back; (the snapshot's)
 * go on on the writer. */
#define TX_ROLLBACK_ASKED (LITH_USER + 200)
#define TX_TO_WRITER (LITH_USER + 201)
#define TX_STALE (LITH_USER + 202) /* the command's verdict: it does nothing */

/* A snapshot's move to the writer. */
enum { MOVE_NONE, MOVE_ASKED, MOVE_OK, MOVE_STALE, MOVE_REFUSED };

typedef struct local_tx {
  lithd_store_tx base; /* first */
  lith_uv_req ureq;
  lithd_park park;
  local_store *ls;
  unsigned flags;
  int64_t idle_ms, max_ms;
  int64_t opened_ms; /* mono_ms at the open: max_ms counts from it */
  uv_async_t async;
  /* Under mu: between the loop and the writer thread (or its own). */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  lithd_store_req *work;    /* handed to the writer, not taken yet */
  lithd_store_req *running; /* taken by the writer */
  lithd_store_req *back;    /* run, the transaction open: for the loop */
  lithd_store_req *final;   /* the run that ended it: answered with the command */
  int ending;               /* closed: roll back */
  /* The snapshot's: its thread, and how it ended (under mu). */
  pthread_t thread;
  int snap_live;    /* the thread runs (or is not joined yet) */
  int snap_ended;   /* it returned: snap_rc, snap_msg */
  int snap_rc;      /* what lith_read returned */
  uint64_t snap_c0; /* lith_commit_count before the snapshot began */
  int stale;        /* the thread's: a commit came after snap_c0 */
  int move;         /* MOVE_*: asked by the thread, answered by the command (or the loop) */
  int move_rc;      /* MOVE_REFUSED: why */
  int move_sent;    /* the loop's: the command for MOVE_ASKED was submitted */
  int bound;        /* LITHD_TX_IDLE or LITHD_TX_OPEN_TOO_LONG: the bound that ended it */
  char snap_msg[LITH_ERRMSG_MAX];
  lith_rx *rx; /* the snapshot's thread's: its read (lith_rx_too_old) */
  /* The loop's. flying: the command is with lith's queue or writer (from a
   * LITH_OK tx_submit to tx_cmd_done or tx_refused); the writer writes
   * into ureq until then, so the handle outlives it, whatever ended the
   * transaction meanwhile (a stale move's snapshot goes on, and may end,
   * while the writer still finishes the command that gave the verdict). */
  int cmd_done, closed, async_closed, flying;
  int end_rc; /* what ended it (LITH_OK: committed) */
  char end_msg[LITH_ERRMSG_MAX];
} local_tx;

static void tx_maybe_free(local_tx *t) {
  if (t->cmd_done && t->closed && t->async_closed && !t->snap_live && !t->flying) {
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t);
  }
}

static void tx_async_closed(uv_handle_t *h) {
  local_tx *t = h->data;
  t->async_closed = 1;
  tx_maybe_free(t);
}

/* The loop: once the command ended, the caller closed it and its thread (a
 * snapshot's) is joined, nothing can wake the handle: close it, then free. */
static void tx_settle(local_tx *t) {
  if (!t->cmd_done || !t->closed || t->snap_live || t->flying)
    return;
  if (!t->async_closed && !uv_is_closing((uv_handle_t *)&t->async))
    uv_close((uv_handle_t *)&t->async, tx_async_closed);
  tx_maybe_free(t);
}

static int64_t mono_ms(void) { return now_ns() / 1000000; }

/* How often a snapshot's thread, waiting for its next run, asks whether
 * its snapshot is too old (lith_rx_too_old): the WAL's hold waits for it. */
#define SNAP_POLL_MS 5

/* Whether another waits for what t holds (store.h's idle rule): the
 * writer (on_writer: a command queued behind t's own), or the reader its
 * stream took for it (a snapshot's, also once it moved to the writer). */
static int others_wait(local_tx *t, int on_writer) {
  if (on_writer && atomic_load(&t->ls->writes_in) > 1)
    return 1;
  return (t->flags & LITHD_TX_SNAPSHOT) && lithd__readers_wanted(&t->ls->base);
}

/* Under t->mu: wait for the next run and take it; NULL when the transaction
 * is closed (*timed_out 0), past a bound (1: t->bound says which), or (a
 * snapshot's, on_writer 0) its snapshot keeps the WAL from starting over
 * (2). last: when its last run ended. */
static lithd_store_req *tx_next(local_tx *t, int64_t last, int on_writer, int *timed_out) {
  *timed_out = 0;
  while (t->work == NULL && !t->ending) {
    int64_t now = mono_ms(), wait = 0;
    int why =
        lithd__tx_bound(now, last, t->opened_ms, t->idle_ms, t->max_ms, others_wait(t, on_writer), &wait);
    if (why != 0) {
      t->bound = why;
      *timed_out = 1;
      return NULL;
    }
    if (!on_writer && lith_rx_too_old(t->rx)) {
      *timed_out = 2;
      return NULL;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (!on_writer && wait > SNAP_POLL_MS)
      wait = SNAP_POLL_MS;
    ts.tv_sec += (time_t)(wait / 1000);
    ts.tv_nsec += (long)(wait % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&t->cv, &t->mu, &ts);
  }
  if (t->ending)
    return NULL;
  lithd_store_req *r = t->running = t->work;
  t->work = NULL;
  return r;
}

#define TX_TOO_OLD_MSG \
  "snapshot too old: it kept the WAL from starting over past --wal-hold-ms, so the transaction was ended"

/* Under t->mu, after run r: 1 if it left the transaction open (r is for
 * the loop, which the caller wakes), else 0 (r ends it). */
static int tx_ran(local_tx *t, lithd_store_req *r, int rc) {
  t->running = NULL;
  if (rc != LITH_OK || r->result == NULL || !r->result->in_tx) {
    t->final = r; /* in autocommit again, or failed: the transaction ends */
    return 0;
  }
  t->back = r;
  return 1;
}

static int tx_cmd(lith_tx *tx, void *arg) { /* the writer thread */
  local_tx *t = arg;
  int64_t last = mono_ms();
  pthread_mutex_lock(&t->mu);
  if (t->move == MOVE_ASKED) { /* a snapshot's first write: the verdict */
    int stale = lith_commit_count(t->ls->db) != t->snap_c0;
    t->move = stale ? MOVE_STALE : MOVE_OK;
    pthread_cond_broadcast(&t->cv);
    if (stale) {
      pthread_mutex_unlock(&t->mu);
      return TX_STALE;
    }
  }
  for (;;) {
    int timed_out;
    lithd_store_req *r = tx_next(t, last, 1, &timed_out);
    int why = t->bound;
    pthread_mutex_unlock(&t->mu);
    if (r == NULL && timed_out) { /* (never 2: the writer's transaction has no snapshot) */
      char msg[LITH_ERRMSG_MAX];
      lithd__tx_bound_msg(why, t->idle_ms, t->max_ms, msg, sizeof msg);
      return lith_tx_error(tx, LITHD_TX_TIMEOUT, "%s", msg);
    }
    if (r == NULL)
      return TX_ROLLBACK_ASKED;
    if (mono_ms() > t->opened_ms + t->max_ms) { /* it waited for the writer that long */
      pthread_mutex_lock(&t->mu);
      t->running = NULL;
      t->work = r; /* answered with the timeout */
      pthread_mutex_unlock(&t->mu);
      char msg[LITH_ERRMSG_MAX];
      lithd__tx_bound_msg(LITHD_TX_OPEN_TOO_LONG, t->idle_ms, t->max_ms, msg, sizeof msg);
      return lith_tx_error(tx, LITHD_TX_TIMEOUT, "%s", msg);
    }
    lith_tx_restart_clock(tx); /* each run gets max_run_ms afresh */
    r->batch->readonly_tx = (t->flags & LITHD_TX_READONLY) != 0;
    int rc = lithd_batch_run(tx, r->batch, &r->result);

    pthread_mutex_lock(&t->mu);
    if (!tx_ran(t, r, rc)) {
      pthread_mutex_unlock(&t->mu);
      if (rc != LITH_OK)
        return rc;
      if (r->result == NULL)
        return lith_tx_error(tx, LITH_NOMEM, "out of memory");
      return LITH_OK; /* lith commits what ran after the transaction */
    }
    pthread_mutex_unlock(&t->mu);
    uv_async_send(&t->async);
    last = mono_ms();
    pthread_mutex_lock(&t->mu);
  }
}

/* Whether a reader's run met a statement that writes (nothing it ran
 * changed anything). */
static int wants_writer(const lithd_store_req *r) {
  const lithd_result *res = r->result;
  lithd_error e;
  if (res == NULL)
    return 0;
  if (lithd_result_error(res, &e) == LITHD_NOT_A_QUERY)
    return 1;
  for (int i = 0; i < res->nouts; i++)
    if (res->outs[i].state == STEP_FAILED && res->outs[i].error->code == LITHD_NOT_A_QUERY)
      return 1;
  return 0;
}

static int snap_fn(lith_rx *rx, void *arg) { /* the snapshot's thread, on a reader */
  local_tx *t = arg;
  int64_t last = mono_ms(), n;
  t->rx = rx;
  t->snap_c0 = lith_commit_count(t->ls->db); /* before the snapshot: what it misses counts after */
  int rc = lith_rx_int64(rx, &n, "SELECT count(*) FROM sqlite_schema", "");
  if (rc != LITH_OK) {
    snprintf(t->snap_msg, sizeof t->snap_msg, "beginning the snapshot: %s", lith_errmsg(NULL));
    return rc;
  }
  /* A statement running when the hold marks the snapshot is interrupted,
   * even inside one long step (count(*) of a table: the progress handler
   * never runs there, and the WAL grew for the whole scan); a mark before
   * this is seen by tx_next. */
  lith_rx_cut_when_too_old(rx);
  pthread_mutex_lock(&t->mu);
  for (;;) {
    int timed_out;
    lithd_store_req *r = tx_next(t, last, 0, &timed_out);
    if (r == NULL) {
      if (timed_out == 1)
        lithd__tx_bound_msg(t->bound, t->idle_ms, t->max_ms, t->snap_msg, sizeof t->snap_msg);
      else if (timed_out == 2)
        snprintf(t->snap_msg, sizeof t->snap_msg, TX_TOO_OLD_MSG);
      pthread_mutex_unlock(&t->mu);
      return timed_out == 1 ? LITHD_TX_TIMEOUT : timed_out == 2 ? LITHD_TX_TOO_OLD : TX_ROLLBACK_ASKED;
    }
    pthread_mutex_unlock(&t->mu);
    r->batch->readonly_tx = (t->flags & LITHD_TX_READONLY) != 0;
    r->batch->stale_tx = t->stale;
    r->batch->too_old_cuts = 1;
    rc = lithd_batch_read(rx, r->batch, &r->result);

    if (!(t->flags & LITHD_TX_READONLY) && !t->stale && wants_writer(r)) {
      lithd_result_free(r->result); /* it runs again: on the writer, or stale */
      r->result = NULL;
      pthread_mutex_lock(&t->mu);
      if (lith_commit_count(t->ls->db) == t->snap_c0) {
        t->running = NULL;
        t->work = r;
        t->move = MOVE_ASKED;
        pthread_mutex_unlock(&t->mu);
        uv_async_send(&t->async); /* the loop submits the command */
        pthread_mutex_lock(&t->mu);
        while (t->move == MOVE_ASKED)
          pthread_cond_wait(&t->cv, &t->mu);
        if (t->move == MOVE_OK) { /* the writer has r: the read ends */
          pthread_mutex_unlock(&t->mu);
          return TX_TO_WRITER;
        }
        r = t->running = t->work;
        t->work = NULL;
        if (t->move == MOVE_REFUSED) {
          t->running = NULL;
          t->final = r;
          rc = t->move_rc;
          snprintf(t->snap_msg, sizeof t->snap_msg, "%s", refused_why(rc));
          pthread_mutex_unlock(&t->mu);
          return rc;
        }
      }
      t->stale = 1;
      pthread_mutex_unlock(&t->mu);
      r->batch->stale_tx = 1;
      rc = lithd_batch_read(rx, r->batch, &r->result);
    }
    if (rc == LITH_OK && r->result != NULL && r->result->in_tx && lith_rx_too_old(rx)) {
      /* cut by it (too_old_cuts), or done just as the hold marked it: the
       * snapshot goes now, and the run is answered with why */
      pthread_mutex_lock(&t->mu);
      t->running = NULL;
      t->final = r;
      snprintf(t->snap_msg, sizeof t->snap_msg, TX_TOO_OLD_MSG);
      pthread_mutex_unlock(&t->mu);
      return LITHD_TX_TOO_OLD;
    }
    pthread_mutex_lock(&t->mu);
    if (!tx_ran(t, r, rc)) {
      if (rc != LITH_OK)
        snprintf(t->snap_msg, sizeof t->snap_msg, "%s", lith_errmsg(NULL));
      pthread_mutex_unlock(&t->mu);
      return rc != LITH_OK ? rc : (r->result == NULL ? LITH_NOMEM : LITH_OK);
    }
    pthread_mutex_unlock(&t->mu);
    uv_async_send(&t->async);
    last = mono_ms();
    pthread_mutex_lock(&t->mu);
  }
}

static void *snap_main(void *arg) {
  local_tx *t = arg;
  pthread_setname_np(pthread_self(), "lithd-snapshot");
  int rc = lith_read(t->ls->db, snap_fn, t);
  pthread_mutex_lock(&t->mu);
  if (rc != LITH_OK && rc != TX_ROLLBACK_ASKED && rc != TX_TO_WRITER && t->snap_msg[0] == '\0')
    snprintf(t->snap_msg, sizeof t->snap_msg, "%s", lith_errmsg(NULL)); /* lith_read's own refusal */
  t->snap_rc = rc;
  t->snap_ended = 1;
  pthread_mutex_unlock(&t->mu);
  uv_async_send(&t->async);
  return NULL;
}

static void tx_ended(local_tx *t, int rc, const char *msg);
static int tx_submit(local_tx *t);
static void local_maybe_drained(local_store *ls);

/* The loop: the snapshot's thread returned. Join it; unless it went on on
 * the writer (the command answers), the transaction ended. */
static void snap_joined(local_tx *t) {
  local_store *ls = t->ls;
  pthread_join(t->thread, NULL);
  t->snap_live = 0;
  ls->snaps--;
  if (t->snap_rc != TX_TO_WRITER)
    tx_ended(t, t->snap_rc, t->snap_msg);
  tx_settle(t);
  local_maybe_drained(ls);
}

/* The loop: the snapshot asks for the writer. */
static void snap_move(local_tx *t) {
  t->park.req = t->work->http; /* the client that waits now (the open's has been answered) */
  int rc = tx_submit(t);
  if (rc == LITH_OK)
    return;
  pthread_mutex_lock(&t->mu);
  t->move = MOVE_REFUSED;
  t->move_rc = rc;
  pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
}

/* The loop: a run that left the transaction open, to its caller. */
static void hand_back(lithd_store_req *r) {
  if (r == NULL)
    return;
  r->rc = LITH_OK;
  r->errmsg[0] = '\0';
  r->tx_open = 1;
  r->cb(r);
}

static void tx_back(uv_async_t *h) { /* the loop: a run that left it open, a move, the snapshot's end */
  local_tx *t = h->data;
  pthread_mutex_lock(&t->mu);
  lithd_store_req *r = t->back;
  t->back = NULL;
  int move = t->move == MOVE_ASKED && !t->move_sent;
  int joined = t->snap_live && t->snap_ended;
  pthread_mutex_unlock(&t->mu);
  t->move_sent |= move;
  hand_back(r);
  if (move)
    snap_move(t);
  if (joined)
    snap_joined(t);
}

/* The command ended (rc from lith: LITH_OK committed, else rolled back or
 * never run): answer what it held. */
static void tx_ended(local_tx *t, int rc, const char *msg) {
  t->cmd_done = 1;
  t->end_rc = rc == TX_ROLLBACK_ASKED ? LITH_OK : rc;
  snprintf(t->end_msg, sizeof t->end_msg, "%s", msg != NULL ? msg : "");
  pthread_mutex_lock(&t->mu);
  lithd_store_req *b = t->back; /* a run handed back just before the end */
  t->back = NULL;
  lithd_store_req *r = t->final != NULL ? t->final : t->work;
  t->final = t->work = NULL;
  pthread_mutex_unlock(&t->mu);
  hand_back(b);
  if (r != NULL) {
    if (rc == LITH_OK || rc == TX_ROLLBACK_ASKED) {
      r->rc = LITH_OK; /* the result stands: committed, or the ROLLBACK asked for */
      r->errmsg[0] = '\0';
    } else {
      r->rc = rc; /* the COMMIT failed, or the run failed as a whole, or never ran */
      snprintf(r->errmsg, sizeof r->errmsg, "%s", t->end_msg);
    }
    r->tx_open = 0;
    r->cb(r);
  }
  tx_settle(t);
}

/* A snapshot's move that never got its verdict (the command was refused,
 * or never ran): the thread is told, and it ends the transaction. 1 if it
 * was that. */
static int move_refused(local_tx *t, int rc) {
  pthread_mutex_lock(&t->mu);
  int asked = t->move == MOVE_ASKED;
  if (asked) {
    t->move = MOVE_REFUSED;
    t->move_rc = rc != LITH_OK ? rc : LITH_ERROR;
    pthread_cond_broadcast(&t->cv);
  }
  pthread_mutex_unlock(&t->mu);
  return asked;
}

static void tx_cmd_done(lith_uv_req *u) {
  local_tx *t = (local_tx *)((char *)u - offsetof(local_tx, ureq));
  local_store *ls = t->ls;
  int rc = u->req.rc;
  t->flying = 0;
  atomic_fetch_sub(&ls->writes_in, 1);
  /* TX_STALE: the command did nothing, the transaction goes on on its
   * snapshot (or has ended there already: then this frees it) */
  if (rc != TX_STALE && !move_refused(t, rc))
    tx_ended(t, rc, u->req.errmsg);
  else
    tx_settle(t);
  if (ls->park.head != NULL)
    lithd_overload_drain(&ls->park);
}

static void tx_refused(lithd_park *p, int rc) {
  local_tx *t = p->arg;
  t->flying = 0;
  atomic_fetch_sub(&t->ls->writes_in, 1);
  if (!move_refused(t, rc))
    tx_ended(t, rc, refused_why(rc));
  else
    tx_settle(t);
}

/* The command, alone, through the queue. */
static int tx_submit(local_tx *t) {
  t->flying = 1; /* before: the queue may refuse it (tx_refused) inside the call */
  atomic_fetch_add(&t->ls->writes_in, 1);
  int rc = lithd_overload_submit(&t->ls->park, &t->park, sizeof *t);
  if (rc != LITH_OK) {
    t->flying = 0;
    atomic_fetch_sub(&t->ls->writes_in, 1);
  }
  return rc;
}

static int tx_run(lithd_store_tx *base, lithd_store_req *r) {
  local_tx *t = (local_tx *)base;
  if (t->cmd_done)
    return lithd__tx_ended_rc(t->end_rc, t->end_msg, r->errmsg, sizeof r->errmsg);
  r->rc = LITH_OK;
  r->tx_open = 0;
  pthread_mutex_lock(&t->mu);
  t->work = r;
  pthread_cond_signal(&t->cv);
  pthread_mutex_unlock(&t->mu);
  return LITH_OK;
}

static void tx_close(lithd_store_tx *base) {
  local_tx *t = (local_tx *)base;
  t->closed = 1;
  pthread_mutex_lock(&t->mu);
  t->ending = 1;
  pthread_cond_signal(&t->cv);
  pthread_mutex_unlock(&t->mu);
  tx_settle(t);
}

static int tx_is_ended(const lithd_store_tx *base) { return ((const local_tx *)base)->cmd_done; }

static const lithd_store_tx_ops local_tx_ops = {.run = tx_run, .close = tx_close, .ended = tx_is_ended};

static int local_tx_open(lithd_store *s, unsigned flags, int64_t idle_ms, int64_t max_ms, lith_http_req *http,
                         lithd_store_tx **out, char *errmsg, size_t cap) {
  local_store *ls = (local_store *)s;
  local_tx *t = calloc(1, sizeof *t);
  int rc;
  *out = NULL;
  if (t == NULL) {
    snprintf(errmsg, cap, "out of memory");
    return LITH_NOMEM;
  }
  t->base.ops = &local_tx_ops;
  t->ls = ls;
  t->flags = flags;
  t->idle_ms = idle_ms;
  t->max_ms = max_ms;
  t->opened_ms = mono_ms();
  pthread_mutex_init(&t->mu, NULL);
  pthread_cond_init(&t->cv, NULL);
  if (uv_async_init(ls->loop, &t->async, tx_back) != 0) {
    snprintf(errmsg, cap, "cannot make the transaction's wake-up");
    goto err_free;
  }
  t->async.data = t;
  t->park.ureq = &t->ureq;
  t->park.fn = tx_cmd;
  t->park.arg = t;
  t->park.done = tx_cmd_done;
  t->park.alone = 1;
  t->park.req = http;
  t->park.refuse = tx_refused;
  if (flags & LITHD_TX_SNAPSHOT) {
    if (ls->stopping) {
      rc = LITH_CLOSED;
      goto err_refused;
    }
    t->snap_live = 1;
    if (pthread_create(&t->thread, NULL, snap_main, t) != 0) {
      snprintf(errmsg, cap, "cannot start the transaction's thread");
      t->cmd_done = t->closed = 1;
      uv_close((uv_handle_t *)&t->async, tx_async_closed);
      return LITH_NOMEM;
    }
    ls->snaps++;
  } else if ((rc = tx_submit(t)) != LITH_OK) {
    goto err_refused;
  }
  *out = &t->base;
  return LITH_OK;

err_refused:
  t->cmd_done = t->closed = 1;
  uv_close((uv_handle_t *)&t->async, tx_async_closed);
  snprintf(errmsg, cap, "%s", refused_why(rc));
  return rc;
err_free:
  pthread_mutex_destroy(&t->mu);
  pthread_cond_destroy(&t->cv);
  free(t);
  return LITH_NOMEM;
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

/* lith_backup_new: a new file, never one replaced; lith_interrupt (the
 * drain's) stops it. */
static int local_snapshot(lithd_store *s, const char *path, char *errmsg, size_t cap) {
  local_store *ls = (local_store *)s;
  int rc = lith_backup_new(ls->db, path);
  if (rc != LITH_OK)
    snprintf(errmsg, cap, "%s", lith_errmsg(ls->db));
  return rc;
}

static void local_stop(lithd_store *s) {
  local_store *ls = (local_store *)s;
  ls->stopping = 1;
  lithd_overload_stop(&ls->park);
}

/* Drained: the bridge closed and every snapshot's thread joined (lith_close
 * must not find a reader still borrowed). */
static void local_maybe_drained(local_store *ls) {
  if (!ls->draining || ls->bridge != NULL || ls->snaps > 0)
    return;
  ls->draining = 0;
  if (ls->on_drained != NULL)
    ls->on_drained(ls->on_drained_arg);
}

static void bridge_closed(void *arg) {
  local_store *ls = arg;
  ls->bridge = NULL;
  local_maybe_drained(ls);
}

static void local_drain(lithd_store *s, void (*on_drained)(void *arg), void *arg) {
  local_store *ls = (local_store *)s;
  ls->stopping = 1;
  lithd_overload_stop(&ls->park); /* (a second time does nothing) */
  lith_interrupt(ls->db);         /* a backup's copy and a snapshot's read stop between steps */
  ls->on_drained = on_drained;
  ls->on_drained_arg = arg;
  ls->draining = 1;
  if (ls->bridge == NULL) {
    local_maybe_drained(ls);
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
    .snapshot = local_snapshot,
    .stop = local_stop,
    .drain = local_drain,
    .close = local_close,
    .tx_open = local_tx_open,
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
