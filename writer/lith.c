/*
 * The lith handle: open and close, and the producer side of the queue
 * (lith_do, lith_do_deadline, lith_submit).
 *
 * Admission and close are two atomics read in a fixed order (all seq_cst):
 * a producer first reserves a slot in `depth`, then looks at `closed`; the
 * closer sets `closed`, then the writer looks at `depth`. So either the
 * producer sees the close and backs out, or the writer sees its slot and
 * waits for the push: no command is accepted and then dropped.
 */
#include "writer.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../lib/clock.h"
#include "../lib/error.h"
#include "../lib/thread.h"
#include "../sqlite/backup.h"
#include "../sqlite/conn.h"
#include "futex.h"

static _Thread_local const lith *lith__writer_of;

/* The lith_read calls this thread is inside, innermost first: a chain of
 * marks on their stacks, so that the thread-local cost is one pointer. */
typedef struct lith__reading {
  const lith *db;
  const struct lith__reading *up;
} lith__reading;
static _Thread_local const lith__reading *lith__reads;

/* Every public call that touches the handle holds a user reference for its
 * duration, so that lith_close can wait for the last one before freeing.
 * Taking one fails once the handle is closing. The reference is dropped as
 * the call's last touch of the handle: a lith_do drops it right after the
 * push, and waits for its answer on its own stack. */
int lith__enter(lith *db) {
  atomic_fetch_add(&db->users, 1);
  if (atomic_load(&db->closed)) {
    atomic_fetch_sub(&db->users, 1);
    return lith__fail(LITH_CLOSED, "lith is closing: not accepting calls");
  }
  return LITH_OK;
}

void lith__leave(lith *db) { atomic_fetch_sub(&db->users, 1); }

int lith__on_writer(const lith *db) { return db != NULL && lith__writer_of == db; }

static void wake_writer(lith *db) {
  if (atomic_load(&db->sleeping) && atomic_exchange(&db->sleeping, 0))
    lith__futex_wake(&db->sleeping, 1);
}

/*
 * Waiting for room (wait_for_space) and making it (unreserve here, take in
 * batch.c). Every decrement of `depth` that leaves room wakes at most as
 * many waiters as it freed slots: take wakes n, unreserve one and only if
 * depth is below capacity after it (a slot given back by a producer that
 * overshot a full queue is no room). Waking all of them made each take
 * stampede the queue: 2,000 threads at queue_capacity 1 took minutes.
 *
 * No wake-up is lost, because (all seq_cst):
 * - a waiter counts itself in space_waiters, then reads space_seq, then
 *   depth, and sleeps only while space_seq still holds what it read; a
 *   freer lowers depth, then reads space_waiters, then bumps space_seq, then
 *   wakes. So either the freer sees the waiter counted, or the waiter sees
 *   the lowered depth; and a waiter that read depth before the bump does
 *   not sleep through it (the futex compares space_seq).
 * - a wake-up goes to a thread asleep in the kernel; waiters not asleep are
 *   about to read depth again, or their sleep returns at once (space_seq
 *   moved), so waking fewer than n sleepers never strands room.
 * - a woken waiter reads depth before anything else: it takes a slot, or
 *   finds the room already taken (by a producer or another waiter: used,
 *   nothing owed), or hidden by a producer's passing overshoot (whose
 *   unreserve wakes again once depth is below capacity).
 * - a waiter leaves without a slot only after it saw no room, so a wake-up
 *   it absorbed was owed to no one; still, if room showed up since and
 *   others wait, it bumps space_seq and wakes one on its way out, so that
 *   the rule "no waiter sleeps while there is room" does not rest on the
 *   order of the checks in its loop (or on how the kernel reports a sleep
 *   woken as it timed out).
 * lith_shutdown still wakes them all: each leaves with LITH_CLOSED.
 */
void lith__wake_space_waiters(lith *db, int n) {
  if (atomic_load(&db->space_waiters)) {
    atomic_fetch_add(&db->space_seq, 1);
    lith__futex_wake(&db->space_seq, n);
  }
}

/* Give back a reserved slot that will not be used. */
static void unreserve(lith *db) {
  int64_t left = atomic_fetch_sub(&db->depth, 1) - 1;
  wake_writer(db); /* a closing writer may be waiting for depth 0 */
  if (left < db->opt.queue_capacity)
    lith__wake_space_waiters(db, 1); /* our slot is room someone may be waiting for */
}

static int wait_for_space(lith *db, int64_t deadline_ms) {
  int rc = LITH_QUEUE_FULL;
  const int64_t cap = db->opt.queue_capacity;
  atomic_fetch_add(&db->space_waiters, 1);
  for (;;) {
    uint32_t seq = atomic_load(&db->space_seq);
    int64_t d = atomic_load(&db->depth);
    while (d < cap) {
      if (atomic_compare_exchange_weak(&db->depth, &d, d + 1)) {
        rc = LITH_OK;
        goto out;
      }
    }
    if (atomic_load(&db->closed)) {
      rc = LITH_CLOSED;
      goto out;
    }
    if (deadline_ms == 0 || (deadline_ms > 0 && lith_clock_ms() >= deadline_ms))
      goto out;
    lith__futex_wait(&db->space_seq, seq, deadline_ms);
  }
out:
  atomic_fetch_sub(&db->space_waiters, 1);
  if (rc != LITH_OK && atomic_load(&db->depth) < cap)
    lith__wake_space_waiters(db, 1); /* leaving without a slot: pass a wake-up on */
  return rc;
}

int lith__enqueue(lith *db, lith_request *req, int64_t deadline_ms, int64_t *ahead) {
  int64_t before = atomic_fetch_add(&db->depth, 1);
  if (ahead)
    *ahead = before;
  if (before >= db->opt.queue_capacity) {
    unreserve(db);
    int rc = wait_for_space(db, deadline_ms);
    if (rc == LITH_CLOSED)
      return lith__fail(LITH_CLOSED, "lith is closing: command not accepted");
    if (rc != LITH_OK)
      return lith__fail(rc, "queue full (%d commands): command not accepted", db->opt.queue_capacity);
  }
  if (atomic_load(&db->closed)) {
    unreserve(db);
    return lith__fail(LITH_CLOSED, "lith is closing: command not accepted");
  }
  lith__priv *p = lith__priv_of(req);
  p->queued_ns = lith__now_ns();
  lith__queue_push(&db->q, &p->node);
  wake_writer(db);
  return LITH_OK;
}

static void init_request(lith_request *req, lith_command fn, void *arg, uint32_t flags) {
  req->fn = fn;
  req->arg = arg;
  req->rc = LITH_OK;
  req->errmsg[0] = '\0';
  lith__priv *p = lith__priv_of(req);
  memset(p, 0, sizeof *p);
  atomic_init(&p->state, LITH__PENDING);
  p->flags = flags;
}

/* Queue one command and sleep until the writer answers it. */
static int do_and_wait(lith *db, lith_command fn, void *arg, int64_t deadline_ms) {
  if (!db || !fn)
    return lith__fail(LITH_MISUSE, "lith_do: no handle or no command");
  if (lith__on_writer(db))
    return lith__fail(LITH_MISUSE, "lith_do called on the writer thread (from a command or callback)");
  lith_request req;
  req.done = NULL;
  req.data = NULL;
  init_request(&req, fn, arg, LITH__REQ_SYNC);
  int rc = lith__enter(db);
  if (rc != LITH_OK)
    return rc;
  int64_t ahead = 0;
  rc = lith__enqueue(db, &req, deadline_ms, &ahead);
  /* Alone in the queue, and batches are tiny (few producers): the answer is
   * likely one short transaction away, so spin a while below and let the
   * writer answer without a wake-up. */
  int64_t spin_ns = 0;
  if (ahead == 0 && atomic_load_explicit(&db->last_batch, memory_order_relaxed) <= LITH__SPIN_MAX_BATCH) {
    spin_ns = 2 * atomic_load_explicit(&db->last_tx_ns, memory_order_relaxed);
    spin_ns = spin_ns < LITH__SPIN_NS       ? LITH__SPIN_NS
              : spin_ns > LITH__SPIN_MAX_NS ? LITH__SPIN_MAX_NS
                                            : spin_ns;
  }
  lith__leave(db); /* from here on only `req`, on this stack, is touched */
  if (rc != LITH_OK)
    return rc;
  lith__priv *p = lith__priv_of(&req);
  if (spin_ns) {
    int64_t until = lith__now_ns() + spin_ns;
    for (unsigned i = 1; atomic_load_explicit(&p->state, memory_order_acquire) != LITH__DONE; i++) {
      lith__cpu_relax();
      if ((i & LITH__SPIN_CLOCK_MASK) == 0 && lith__now_ns() > until)
        break;
    }
  }
  for (;;) {
    uint32_t s = atomic_load_explicit(&p->state, memory_order_acquire);
    if (s == LITH__DONE)
      break;
    if (s == LITH__PENDING && !atomic_compare_exchange_strong(&p->state, &s, LITH__SLEEPING))
      continue; /* answered meanwhile */
    lith__futex_wait(&p->state, LITH__SLEEPING, -1);
  }
  if (req.rc != LITH_OK)
    lith__set_errmsg(req.errmsg);
  else
    lith__clear_error();
  return req.rc;
}

int lith_do(lith *db, lith_command fn, void *arg) { return do_and_wait(db, fn, arg, -1); }

int lith_do_deadline(lith *db, lith_command fn, void *arg, int64_t deadline_ms) {
  /* A deadline already past (or negative) means: only if there is room now. */
  return do_and_wait(db, fn, arg, deadline_ms < 0 ? 0 : deadline_ms);
}

static int submit(lith *db, lith_request *req, uint32_t flags) {
  if (!db || !req || !req->fn || !req->done)
    return lith__fail(LITH_MISUSE, "lith_submit: request needs fn and done");
  /* From a command, the request would outlive the command's own rollback
   * and be queued again by each re-run; from a done callback (in_fn 0) it is
   * how an async producer goes on, and is fine. in_fn is the writer's own
   * field: read only once we know we are on its thread. */
  if (lith__on_writer(db) && db->in_fn)
    return lith__fail(LITH_MISUSE, "lith_submit called from inside a command (commands run again "
                                   "after a rollback; submit from its producer or a done callback)");
  init_request(req, req->fn, req->arg, flags);
  int rc = lith__enter(db);
  if (rc != LITH_OK)
    return rc;
  rc = lith__enqueue(db, req, 0, NULL);
  lith__leave(db);
  return rc;
}

int lith_submit(lith *db, lith_request *req) { return submit(db, req, 0); }

int lith_submit_alone(lith *db, lith_request *req) { return submit(db, req, LITH__REQ_ALONE); }

uint64_t lith_commit_count(lith *db) {
  return db != NULL ? atomic_load_explicit(&db->commits, memory_order_acquire) : 0;
}

static int read_until(lith *db, lith_reader fn, void *arg, int64_t deadline_ms) {
  if (!db)
    return lith__fail(LITH_MISUSE, "lith_read: no handle");
  if (lith__on_writer(db))
    return lith__fail(LITH_MISUSE, "lith_read called on the writer thread; use the lith_tx_* calls");
  /* A read inside a read of the same handle would hold one reader while it
   * waits for another: with every reader borrowed (readers = 1, or as many
   * such threads as readers) it waits forever. Refused always, not only
   * when it would hang, so that the mistake shows in the first test run. */
  for (const lith__reading *r = lith__reads; r; r = r->up)
    if (r->db == db)
      return lith__fail(LITH_MISUSE, "lith_read called inside a lith_read callback on the same handle "
                                     "(it could wait for its own reader forever)");
  int rc = lith__enter(db);
  if (rc != LITH_OK)
    return rc;
  lith__reading mark = {db, lith__reads};
  lith__reads = &mark;
  rc = lith__pool_read(db->pool, fn, arg, deadline_ms);
  lith__reads = mark.up;
  lith__leave(db);
  return rc;
}

int lith_read(lith *db, lith_reader fn, void *arg) { return read_until(db, fn, arg, -1); }

int lith_read_deadline(lith *db, lith_reader fn, void *arg, int64_t deadline_ms) {
  /* lith__pool_read takes -1 for "no deadline": any past deadline is 0 */
  return read_until(db, fn, arg, deadline_ms < 0 ? 0 : deadline_ms);
}

static int backup(lith *db, const char *dest_path, int new_only) {
  if (!db)
    return lith__fail(LITH_MISUSE, "lith_backup: no handle");
  int rc = lith__enter(db);
  if (rc != LITH_OK)
    return rc;
  rc = lith__backup_run(db->path, &db->opt, dest_path, new_only, &db->interrupts, db->pool);
  lith__leave(db);
  return rc;
}

int lith_backup(lith *db, const char *dest_path) { return backup(db, dest_path, 0); }

int lith_interrupt(lith *db) {
  if (!db)
    return lith__fail(LITH_MISUSE, "lith_interrupt: no handle");
  int rc = lith__enter(db);
  if (rc != LITH_OK)
    return rc;
  atomic_fetch_add(&db->interrupts, 1); /* before the reads: a backup checks it between steps */
  lith__pool_interrupt(db->pool);
  lith__leave(db);
  return LITH_OK;
}

int lith_backup_new(lith *db, const char *dest_path) { return backup(db, dest_path, 1); }

static void *writer_thread(void *arg) {
  lith *db = arg;
  lith__writer_of = db;
  pthread_setname_np(pthread_self(), "lith-writer"); /* shows in top -H, perf, gdb */
  return lith__writer_main(db);
}

int lith_open(const char *path, const lith_options *opt_in, lith **out) {
  int rc;
  lith_options defaults;
  if (!out)
    return lith__fail(LITH_MISUSE, "lith_open: out is NULL");
  *out = NULL;
  if (!opt_in) {
    lith_options_default(&defaults);
    opt_in = &defaults;
  }
  if ((rc = lith__options_check(opt_in)) != LITH_OK)
    return rc;

  lith *db = aligned_alloc(64, (sizeof(lith) + 63) / 64 * 64);
  if (!db)
    return lith__fail(LITH_NOMEM, "lith_open: out of memory");
  memset(db, 0, sizeof *db);
  pthread_mutex_init(&db->stats_mu, NULL);
  pthread_mutex_init(&db->close_mu, NULL);
  db->opt = *opt_in;
  db->opt.migrations = NULL; /* the caller's, read only during open */
  db->opt.vfs = NULL;
  if (opt_in->vfs && !(db->vfs = strdup(opt_in->vfs))) {
    rc = lith__fail(LITH_NOMEM, "lith_open: out of memory");
    goto err_free_db;
  }
  db->opt.vfs = db->vfs;
  lith__queue_init(&db->q);
  atomic_init(&db->sleeping, 0);
  atomic_init(&db->depth, 0);
  atomic_init(&db->users, 0);
  atomic_init(&db->space_seq, 0);
  atomic_init(&db->space_waiters, 0);
  atomic_init(&db->closed, 0);
  db->spin_credit = LITH__SPIN_CREDIT_MAX; /* the writer's wait-spin starts trusted (batch.c, take) */
  if (!(db->path = strdup(path ? path : ""))) {
    rc = lith__fail(LITH_NOMEM, "lith_open: out of memory");
    goto err_free_db;
  }
  db->batch = calloc((size_t)db->opt.max_batch, sizeof *db->batch);
  if (!db->batch) {
    rc = lith__fail(LITH_NOMEM, "lith_open: out of memory");
    goto err_free_path;
  }
  if ((rc = lith__conn_open_writer(path, &db->opt, &db->conn)) != LITH_OK)
    goto err_free_batch;
  if ((rc = lith__conn_migrate(db->conn, opt_in)) != LITH_OK)
    goto err_close_conn;
  if ((rc = lith__stmt_cache_create(db->conn, db->opt.stmt_cache_size, &db->cache)) != LITH_OK)
    goto err_close_conn;
  if ((rc = lith__writer_prepare(db)) != LITH_OK)
    goto err_destroy_cache;
  sqlite3_set_authorizer(db->conn, lith__authorize, db);
  if ((rc = lith__ckpt_init(&db->ckpt, db->conn, path, &db->opt)) != LITH_OK)
    goto err_finalize;
  if ((rc = lith__pool_open(path, &db->opt, &db->rstats, &db->pool)) != LITH_OK)
    goto err_close_ckpt;
  db->ckpt.pool = db->pool; /* the writer thread, its only user, starts below */
  db->tx.db = db;
  db->tx.conn = db->conn;
  db->tx.cache = db->cache;
  if ((rc = lith__waker_start(&db->waker)) != LITH_OK)
    goto err_close_pool;
  if ((errno = lith__thread_start(&db->thread, writer_thread, db)) != 0) {
    rc = lith__fail(LITH_NOMEM, "lith_open: cannot start the writer thread: %s", strerror(errno));
    goto err_stop_waker;
  }
  lith__clear_error();
  *out = db;
  return LITH_OK;

err_stop_waker:
  lith__waker_stop(db->waker);
err_close_pool:
  lith__pool_close(db->pool);
err_close_ckpt:
  db->ckpt.mode = LITH_CHECKPOINT_EXTERNAL; /* stop its thread, no TRUNCATE */
  lith__ckpt_close(&db->ckpt, db->conn);
err_finalize:
  lith__writer_finalize(db);
err_destroy_cache:
  lith__stmt_cache_destroy(db->cache);
err_close_conn:
  sqlite3_close(db->conn);
err_free_batch:
  free(db->batch);
err_free_path:
  free(db->path);
err_free_db: /* the handle: its mutexes, its copy of vfs, itself */
  pthread_mutex_destroy(&db->close_mu);
  pthread_mutex_destroy(&db->stats_mu);
  free(db->vfs);
  free(db);
  return rc;
}

int lith_shutdown(lith *db) {
  if (!db)
    return lith__fail(LITH_MISUSE, "lith_shutdown: no handle");
  if (lith__on_writer(db))
    return lith__fail(LITH_MISUSE, "lith_shutdown called on the writer thread");
  pthread_mutex_lock(&db->close_mu);
  if (db->shut) { /* a second call waits for the first, then reports its result */
    int rc = db->shut_rc;
    pthread_mutex_unlock(&db->close_mu);
    return rc;
  }
  atomic_store(&db->closed, 1);
  atomic_store(&db->sleeping, 0);
  lith__futex_wake(&db->sleeping, 1);
  atomic_fetch_add(&db->space_seq, 1);
  lith__futex_wake(&db->space_seq, INT32_MAX);
  pthread_join(db->thread, NULL);
  lith__waker_stop(db->waker); /* its last wake-ups made */
  db->waker = NULL;
  /* Calls that entered before the close may still be leaving (a lith_do
   * between its push and its release, a lith_read finishing). Shutdown is
   * rare: poll rather than make every call pay for a wake-up. */
  while (atomic_load(&db->users) != 0)
    usleep(100);

  /* Readers first, so that the TRUNCATE checkpoint finds none holding the WAL. */
  lith__pool_close(db->pool);
  db->pool = NULL;
  int rc = lith__ckpt_close(&db->ckpt, db->conn);
  lith__writer_finalize(db);
  lith__stmt_cache_destroy(db->cache);
  db->cache = NULL;
  /* A statement a command prepared and never finalized is the
   * application's: close_v2 leaves the connection to be freed with the last
   * of them rather than fail. Nothing of the handle may be called then. */
  sqlite3_commit_hook(db->conn, NULL, NULL);
  sqlite3_rollback_hook(db->conn, NULL, NULL);
  sqlite3_set_authorizer(db->conn, NULL, NULL);
  sqlite3_wal_hook(db->conn, NULL, NULL);
  int src = sqlite3_close_v2(db->conn);
  db->conn = NULL;
  if (src != SQLITE_OK && rc == LITH_OK)
    rc = lith__fail(lith_from_sqlite(src), "lith_shutdown: %s", sqlite3_errstr(src));
  db->shut = 1;
  db->shut_rc = rc;
  pthread_mutex_unlock(&db->close_mu);
  return rc;
}

int lith_close(lith *db) {
  if (!db)
    return LITH_OK;
  if (lith__on_writer(db))
    return lith__fail(LITH_MISUSE, "lith_close called on the writer thread");
  int rc = lith_shutdown(db);
  pthread_mutex_destroy(&db->close_mu);
  pthread_mutex_destroy(&db->stats_mu);
  free(db->topics);
  free(db->uniq);
  free(db->seen);
  free(db->batch);
  free(db->path);
  free(db->vfs);
  free(db);
  return rc;
}
