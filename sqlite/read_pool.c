/*
 * Read pool: a free list under a mutex. A read is short next to the cost of
 * the mutex, and borrowers that find the pool empty sleep on a condition
 * variable (on the monotonic clock: a borrower with a deadline waits with
 * it) rather than spin. The figures are kept under the same mutex; only a
 * borrower that has to wait reads the clock.
 *
 * A hold (lith__pool_hold) keeps new reads from beginning for a bounded
 * time. Held borrowers sleep on a condition variable of their own: on the
 * pool's, a connection given back would signal one of them, which would
 * sleep again and leave a borrower waiting for a connection unwoken. A
 * backup (lith__pool_backup_begin) waits behind a hold the same way, and a
 * hold is not begun while one runs.
 */
#include "read_pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "../lib/clock.h"
#include "../lib/latency.h"
#include "bind.h"
#include "conn.h"
#include "errcode.h"
#include "stmt_cache.h"

struct lith_rx {
  sqlite3 *conn;
  lith__stmt_cache *cache;
  sqlite3_stmt *begin, *commit;
  struct lith_rx *next_free;
  int borrowed;        /* under the pool's mu: lith__pool_interrupt reaches it */
  int64_t since_ms;    /* under the pool's mu: lith_clock_ms when borrowed */
  _Atomic int too_old; /* lith_rx_too_old: set by the writer's hold, cleared when borrowed */
  struct lith__pool *pool;
  int cut_too_old; /* under the pool's mu: lith_rx_cut_when_too_old, cleared when borrowed */
};

struct lith__pool {
  pthread_mutex_t mu;
  pthread_cond_t cv;      /* a connection came back, or the pool closes */
  pthread_cond_t hold_cv; /* the hold ended, or the pool closes */
  int64_t hold_until;     /* lith_clock_ms; 0: no hold */
  struct lith_rx *free;
  int total;
  int borrowed;
  int backups; /* lith__pool_backup_begin without its end yet */
  int closing;
  struct lith_rx *all;
  lith__read_stats *stats; /* the caller's */
};

/* stats field += n: only ever written under p->mu */
#define STAT_ADD(p, field, n)                                                                           \
  atomic_store_explicit(&(p)->stats->field,                                                             \
                        atomic_load_explicit(&(p)->stats->field, memory_order_relaxed) + (uint64_t)(n), \
                        memory_order_relaxed)

static void rx_close(struct lith_rx *rx) {
  sqlite3_finalize(rx->begin);
  sqlite3_finalize(rx->commit);
  lith__stmt_cache_destroy(rx->cache);
  sqlite3_close_v2(rx->conn); /* a callback's own unfinalized statement keeps it until finalized */
}

static int rx_open(struct lith_rx *rx, const char *path, const lith_options *opt) {
  int rc = lith__conn_open_reader(path, opt, &rx->conn);
  if (rc != LITH_OK)
    goto err;
  if ((rc = lith__stmt_cache_create(rx->conn, opt->stmt_cache_size, &rx->cache)) != LITH_OK)
    goto err_close;
  int src = sqlite3_prepare_v2(rx->conn, "BEGIN", -1, &rx->begin, NULL);
  if (src == SQLITE_OK)
    src = sqlite3_prepare_v2(rx->conn, "COMMIT", -1, &rx->commit, NULL);
  if (src != SQLITE_OK) {
    rc = lith__fail_sqlite(src, rx->conn, "reader: prepare");
    goto err_close;
  }
  /* The application's authorizer sees what reads prepare too: a server
   * runs its clients' queries here. */
  if (opt->authorizer)
    sqlite3_set_authorizer(rx->conn, opt->authorizer, opt->authorizer_ctx);
  return LITH_OK;

err_close:
  rx_close(rx);
err:
  return rc;
}

int lith__pool_open(const char *path, const lith_options *opt, lith__read_stats *stats, lith__pool **out) {
  int rc;
  *out = NULL;
  lith__pool *p = calloc(1, sizeof *p);
  if (!p)
    return lith__fail(LITH_NOMEM, "read pool: out of memory");
  p->stats = stats;
  p->all = calloc((size_t)opt->readers, sizeof *p->all);
  if (!p->all) {
    rc = lith__fail(LITH_NOMEM, "read pool: out of memory");
    goto err_free_pool;
  }
  for (int i = 0; i < opt->readers; i++) {
    if ((rc = rx_open(&p->all[i], path, opt)) != LITH_OK)
      goto err_close_readers;
    p->all[i].pool = p;
    p->all[i].next_free = p->free;
    p->free = &p->all[i];
    p->total++;
  }
  pthread_mutex_init(&p->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* lith_clock_ms's clock */
  pthread_cond_init(&p->cv, &ca);
  pthread_cond_init(&p->hold_cv, &ca);
  pthread_condattr_destroy(&ca);
  *out = p;
  return LITH_OK;

err_close_readers:
  for (int i = 0; i < p->total; i++)
    rx_close(&p->all[i]);
  free(p->all);
err_free_pool:
  free(p);
  return rc;
}

void lith__pool_close(lith__pool *p) {
  if (!p)
    return;
  pthread_mutex_lock(&p->mu);
  p->closing = 1;
  pthread_cond_broadcast(&p->cv); /* borrowers waiting for a connection give up */
  pthread_cond_broadcast(&p->hold_cv);
  while (p->borrowed > 0)
    pthread_cond_wait(&p->cv, &p->mu);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->total; i++)
    rx_close(&p->all[i]);
  pthread_cond_destroy(&p->cv);
  pthread_cond_destroy(&p->hold_cv);
  pthread_mutex_destroy(&p->mu);
  free(p->all);
  free(p);
}

/* Wait on cv (p->mu held) until deadline_ms; non-zero once it passed. */
static int wait_until(lith__pool *p, pthread_cond_t *cv, int64_t deadline_ms) {
  if (deadline_ms < 0) {
    pthread_cond_wait(cv, &p->mu);
    return 0;
  }
  struct timespec ts = {.tv_sec = deadline_ms / 1000, .tv_nsec = (long)(deadline_ms % 1000) * 1000000L};
  return pthread_cond_timedwait(cv, &p->mu, &ts) == ETIMEDOUT;
}

/* When a read held now may go on (p->mu held): the hold's end, or the
 * read's own deadline if sooner; 0 if there is no hold to wait for. */
static int64_t held_until(const lith__pool *p, int64_t deadline_ms) {
  if (p->hold_until == 0 || p->closing)
    return 0;
  int64_t until = p->hold_until;
  if (deadline_ms >= 0 && deadline_ms < until)
    until = deadline_ms;
  return lith_clock_ms() < until ? until : 0;
}

int lith__pool_hold(lith__pool *p, int64_t until_ms) {
  pthread_mutex_lock(&p->mu);
  int held = p->backups == 0;
  if (held)
    p->hold_until = until_ms > 0 ? until_ms : 1;
  pthread_mutex_unlock(&p->mu);
  return held;
}

void lith__pool_release(lith__pool *p) {
  pthread_mutex_lock(&p->mu);
  p->hold_until = 0;
  pthread_cond_broadcast(&p->hold_cv);
  pthread_mutex_unlock(&p->mu);
}

int lith__pool_hold_drained(lith__pool *p, int64_t until_ms) {
  pthread_mutex_lock(&p->mu);
  int drained = p->borrowed == 0;
  if (drained)
    p->hold_until = until_ms > 0 ? until_ms : 1;
  pthread_mutex_unlock(&p->mu);
  return drained;
}

int lith__pool_running(lith__pool *p) {
  pthread_mutex_lock(&p->mu);
  int n = p->borrowed;
  pthread_mutex_unlock(&p->mu);
  return n;
}

int lith__pool_read(lith__pool *p, lith_reader fn, void *arg, int64_t deadline_ms) {
  if (!fn)
    return lith__fail(LITH_MISUSE, "lith_read: no function");
  int64_t t_wait = 0, t_held = 0;
  int timed_out = 0;
  pthread_mutex_lock(&p->mu);
  /* A hold first (a connection taken and then held would keep the reader
   * it is meant to drain), then a free connection; a hold may begin while
   * this waits for one, so both are looked at again after each wake-up. A
   * free connection is taken even when the wait timed out meanwhile: the
   * wake-up that came with it is not lost on a borrower leaving. */
  while (!p->closing) {
    int64_t until = held_until(p, deadline_ms);
    if (until > 0) {
      if (!t_held) {
        t_held = lith__now_ns();
        STAT_ADD(p, held, 1);
      }
      wait_until(p, &p->hold_cv, until);
      continue;
    }
    if (t_held) {
      STAT_ADD(p, held_ns_total, lith__now_ns() - t_held);
      t_held = 0;
    }
    if (p->free || timed_out)
      break;
    if (!t_wait) {
      t_wait = lith__now_ns();
      STAT_ADD(p, waits, 1);
      timed_out = deadline_ms >= 0 && lith_clock_ms() >= deadline_ms;
      if (timed_out)
        continue;
    }
    timed_out = wait_until(p, &p->cv, deadline_ms);
  }
  if (t_held)
    STAT_ADD(p, held_ns_total, lith__now_ns() - t_held);
  if (p->closing) {
    pthread_mutex_unlock(&p->mu);
    return lith__fail(LITH_CLOSED, "lith_read: the handle is closing");
  }
  uint64_t waited = t_wait ? (uint64_t)(lith__now_ns() - t_wait) : 0;
  STAT_ADD(p, wait_ns_total, waited);
  STAT_ADD(p, wait_lat[lith__lat_bucket(waited)], 1);
  if (!p->free) {
    STAT_ADD(p, timeouts, 1);
    int total = p->total;
    pthread_mutex_unlock(&p->mu);
    return lith__fail(LITH_QUEUE_FULL, "lith_read_deadline: all %d readers stayed in use until the deadline",
                      total);
  }
  struct lith_rx *rx = p->free;
  p->free = rx->next_free;
  p->borrowed++;
  rx->borrowed = 1;
  rx->since_ms = lith_clock_ms();
  atomic_store(&rx->too_old, 0);
  rx->cut_too_old = 0;
  STAT_ADD(p, reads, 1);
  STAT_ADD(p, in_use, 1);
  pthread_mutex_unlock(&p->mu);

  int rc;
  int src = sqlite3_step(rx->begin);
  sqlite3_reset(rx->begin);
  if (src != SQLITE_DONE) {
    rc = lith__fail_sqlite(src, rx->conn, "lith_read: BEGIN");
  } else {
    lith__clear_error();
    rc = fn(rx, arg);
    lith__stmt_cache_release(rx->cache);
    src = sqlite3_step(rx->commit);
    sqlite3_reset(rx->commit);
    if (src != SQLITE_DONE && !sqlite3_get_autocommit(rx->conn))
      sqlite3_exec(rx->conn, "ROLLBACK", NULL, NULL, NULL);
    /* A statement fn left mid-step (one of its own; the cache's are reset)
     * keeps the read transaction open past COMMIT: this connection's next
     * reads would see that old snapshot, and the WAL could not be
     * checkpointed past it. Reset what is left; one cheap check finds it. */
    if (sqlite3_txn_state(rx->conn, NULL) != SQLITE_TXN_NONE)
      for (sqlite3_stmt *st = sqlite3_next_stmt(rx->conn, NULL); st; st = sqlite3_next_stmt(rx->conn, st))
        if (sqlite3_stmt_busy(st))
          sqlite3_reset(st);
  }

  pthread_mutex_lock(&p->mu);
  rx->borrowed = 0;
  rx->next_free = p->free;
  p->free = rx;
  p->borrowed--;
  STAT_ADD(p, in_use, -1);
  if (p->closing)
    pthread_cond_broadcast(&p->cv); /* the closer waits for the last one */
  else
    pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
  return rc;
}

int lith__pool_mark_too_old(lith__pool *p, int64_t began_by_ms) {
  int n = 0;
  pthread_mutex_lock(&p->mu);
  for (int i = 0; i < p->total; i++)
    if (p->all[i].borrowed && p->all[i].since_ms <= began_by_ms && !atomic_exchange(&p->all[i].too_old, 1)) {
      n++;
      if (p->all[i].cut_too_old) /* under mu: the connection stays open while borrowed */
        sqlite3_interrupt(p->all[i].conn);
    }
  STAT_ADD(p, too_old, n);
  pthread_mutex_unlock(&p->mu);
  return n;
}

int lith__pool_too_old_running(lith__pool *p) {
  int n = 0;
  pthread_mutex_lock(&p->mu);
  for (int i = 0; i < p->total; i++)
    n += p->all[i].borrowed && atomic_load(&p->all[i].too_old);
  pthread_mutex_unlock(&p->mu);
  return n;
}

void lith__pool_backup_begin(lith__pool *p) {
  if (!p)
    return;
  pthread_mutex_lock(&p->mu);
  for (int64_t until; (until = held_until(p, -1)) > 0;)
    wait_until(p, &p->hold_cv, until);
  p->backups++;
  pthread_mutex_unlock(&p->mu);
}

void lith__pool_backup_end(lith__pool *p) {
  if (!p)
    return;
  pthread_mutex_lock(&p->mu);
  p->backups--;
  pthread_mutex_unlock(&p->mu);
}

int lith__pool_backups(lith__pool *p) {
  pthread_mutex_lock(&p->mu);
  int n = p->backups;
  pthread_mutex_unlock(&p->mu);
  return n;
}

void lith__pool_interrupt(lith__pool *p) {
  /* Under mu: a borrowed connection stays open until it is given back,
   * and it is given back under mu. */
  pthread_mutex_lock(&p->mu);
  for (int i = 0; i < p->total; i++)
    if (p->all[i].borrowed)
      sqlite3_interrupt(p->all[i].conn);
  pthread_mutex_unlock(&p->mu);
}

sqlite3_stmt *lith_rx_stmt(lith_rx *rx, const char *sql) {
  sqlite3_stmt *st = NULL;
  lith__stmt_cache_get(rx->cache, sql, &st);
  return st;
}

int lith_rx_int64(lith_rx *rx, int64_t *out, const char *sql, const char *types, ...) {
  va_list ap;
  va_start(ap, types);
  int rc = lith__run_va(rx->cache, sql, types, ap, out);
  va_end(ap);
  return rc;
}

sqlite3 *lith_rx_db(lith_rx *rx) { return rx->conn; }

int lith_rx_too_old(lith_rx *rx) { return atomic_load(&rx->too_old); }

int lith_rx_cut_when_too_old(lith_rx *rx) {
  pthread_mutex_lock(&rx->pool->mu); /* the mark's: it interrupts, or it came before */
  rx->cut_too_old = 1;
  int marked = atomic_load(&rx->too_old);
  pthread_mutex_unlock(&rx->pool->mu);
  return marked;
}
