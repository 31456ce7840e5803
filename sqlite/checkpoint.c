/* WAL checkpoint policy and the background checkpointer: see checkpoint.h. */
#include "checkpoint.h"

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "../lib/clock.h"
#include "../lib/latency.h"
#include "../lib/thread.h"
#include "conn.h"
#include "errcode.h"

enum { BG_IDLE, BG_ASKED, BG_RUNNING, BG_DONE };

/* A hold's copy, once the reads are done, keeps new ones out at most this
 * long (a safety bound: the copy of 4 x checkpoint_pages takes ms). */
#define HOLD_COPY_MAX_MS 10000

/* Holds that give up in a row lengthen the next one's bound, up to this
 * many times wal_hold_ms (checkpoint.h). */
#define HOLD_GROW 4

static int run(lith__ckpt *ck, sqlite3 *conn, const char *schema, int how) {
  int log = 0, done = 0;
  int64_t t0 = lith__now_ns();
  int rc = sqlite3_wal_checkpoint_v2(conn, schema, how, &log, &done);
  /* A PASSIVE pass never waits (SQLite calls no busy handler for it), so a
   * lock held for an instant (the writer's commit updating the WAL index)
   * can make it SQLITE_BUSY. The background thread may wait: it tries a
   * few more times before it counts a failure. */
  for (int i = 0; (rc & 0xff) == SQLITE_BUSY && conn == ck->bg_conn && i < 5; i++) {
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
    rc = sqlite3_wal_checkpoint_v2(conn, schema, how, &log, &done);
  }
  uint64_t ns = (uint64_t)(lith__now_ns() - t0);
  atomic_fetch_add(&ck->ns_total, ns);
  if (conn != ck->bg_conn)
    atomic_fetch_add(&ck->ns_writer, ns);
  atomic_fetch_add(&ck->lat[lith__lat_bucket(ns)], 1);
  atomic_fetch_add(&ck->count, 1);
  if ((rc & 0xff) == SQLITE_INTERRUPT && conn == ck->bg_conn)
    return LITH_OK; /* stopped for a hold (bg_yield): no error, the hold's copy makes it */
  if (rc != SQLITE_OK) {
    atomic_fetch_add(&ck->errors, 1);
    return lith__fail_sqlite(rc, conn, "checkpoint");
  }
  /* Frames not yet copied (a reader still needs them, or the writer added
   * them meanwhile) stay in the WAL. */
  atomic_store(&ck->backfilled, done < 0 ? 0 : done);
  atomic_store(&ck->wal_pages, log < 0 ? 0 : log - done);
  return LITH_OK;
}

static int wal_hook(void *ctx, sqlite3 *conn, const char *schema, int pages) {
  lith__ckpt *ck = ctx;
  if (ck->restart_due) { /* the first commit since a hold copied the WAL whole */
    ck->restart_due = 0;
    if (pages > ck->frames_copied) { /* it went on at the end: someone else reads the WAL */
      atomic_fetch_add(&ck->restart_blocked, 1);
      ck->next_hold_at = pages + 4 * (int64_t)ck->pages;
    }
  }
  if (pages < atomic_load(&ck->frames)) { /* the WAL started over */
    atomic_store(&ck->backfilled, 0);
    ck->next_hold_at = 0; /* counted in the old WAL's frames */
  }
  atomic_store(&ck->frames, pages);
  int left = pages - atomic_load(&ck->backfilled);
  atomic_store(&ck->wal_pages, left < 0 ? pages : left);
  if (ck->mode == LITH_CHECKPOINT_AUTO && pages >= ck->pages)
    run(ck, conn, schema, SQLITE_CHECKPOINT_PASSIVE);
  return SQLITE_OK; /* a checkpoint failure must not fail the commit */
}

static void *bg_main(void *arg) {
  lith__ckpt *ck = arg;
  pthread_setname_np(pthread_self(), "lith-checkpoint");
  pthread_mutex_lock(&ck->mu);
  for (;;) {
    while (ck->bg_state != BG_ASKED && !ck->bg_stop)
      pthread_cond_wait(&ck->cv, &ck->mu);
    if (ck->bg_stop)
      break;
    ck->bg_state = BG_RUNNING;
    pthread_mutex_unlock(&ck->mu);
    run(ck, ck->bg_conn, NULL, SQLITE_CHECKPOINT_PASSIVE);
    pthread_mutex_lock(&ck->mu);
    ck->bg_state = BG_DONE;
    pthread_cond_broadcast(&ck->cv); /* a closer may wait for the pass to end */
  }
  pthread_mutex_unlock(&ck->mu);
  return NULL;
}

int lith__ckpt_init(lith__ckpt *ck, sqlite3 *conn, const char *path, const lith_options *opt) {
  ck->mode = opt->checkpoint;
  ck->pages = opt->checkpoint_pages;
  atomic_init(&ck->wal_pages, 0);
  atomic_init(&ck->frames, 0);
  atomic_init(&ck->backfilled, 0);
  atomic_init(&ck->count, 0);
  atomic_init(&ck->errors, 0);
  atomic_init(&ck->ns_total, 0);
  atomic_init(&ck->ns_writer, 0);
  for (int i = 0; i < LITH_LAT_BUCKETS; i++)
    atomic_init(&ck->lat[i], 0);
  ck->bg_conn = NULL;
  ck->bg_state = BG_IDLE;
  ck->bg_stop = 0;
  ck->pool = NULL;
  ck->hold_ms = opt->wal_hold_ms;
  ck->holding = 0;
  ck->hold_until = ck->hold_t0 = 0;
  ck->next_hold_at = 0;
  ck->hold_at = 4 * (int64_t)ck->pages;
  ck->hold_from = 0;
  ck->gave_up = 0;
  ck->restart_due = 0;
  ck->frames_copied = 0;
  atomic_init(&ck->holds, 0);
  atomic_init(&ck->holds_gave_up, 0);
  atomic_init(&ck->hold_ns_total, 0);
  atomic_init(&ck->restart_blocked, 0);
  if (ck->mode == LITH_CHECKPOINT_WRITER) {
    /* A write-capable connection: checkpointing writes the database file.
     * It never writes a transaction, so it never takes the write lock. */
    int rc = lith__conn_open_checkpointer(path, opt, &ck->bg_conn);
    if (rc != LITH_OK)
      return rc;
    pthread_mutex_init(&ck->mu, NULL);
    pthread_cond_init(&ck->cv, NULL);
    if (lith__thread_start(&ck->bg_thread, bg_main, ck) != 0) {
      pthread_cond_destroy(&ck->cv);
      pthread_mutex_destroy(&ck->mu);
      sqlite3_close(ck->bg_conn);
      ck->bg_conn = NULL;
      return lith__fail(LITH_NOMEM, "checkpointer: cannot start its thread");
    }
  }
  sqlite3_wal_hook(conn, wal_hook, ck);
  return LITH_OK;
}

/* Whether the writer's copy under a hold would be small: the frames not
 * yet copied are at most 4 x checkpoint_pages (a long backup can leave
 * many more: those are the background thread's to copy). */
static int hold_copies(const lith__ckpt *ck) { return atomic_load(&ck->wal_pages) <= 4 * (int64_t)ck->pages; }

/* WRITER mode after a batch: ask for a background pass, or finish one. */
static int writer_pass(lith__ckpt *ck, sqlite3 *conn) {
  pthread_mutex_lock(&ck->mu);
  int state = ck->bg_state;
  /* not while a hold waits for the writer to copy the rest itself, nor
   * when one is near (the last checkpoint_pages before it) and its copy
   * small: the hold makes it, rather than wait for a pass begun just
   * before (hold_copies) */
  int64_t frames = atomic_load(&ck->frames);
  int near = ck->pool != NULL && ck->hold_ms > 0 && frames + ck->pages >= ck->hold_at && hold_copies(ck);
  if (state == BG_IDLE && !ck->holding && !near && atomic_load(&ck->wal_pages) >= ck->pages) {
    ck->bg_state = BG_ASKED;
    pthread_cond_signal(&ck->cv);
  }
  pthread_mutex_unlock(&ck->mu);
  if (state != BG_DONE)
    return 0;
  pthread_mutex_lock(&ck->mu);
  ck->bg_state = BG_IDLE;
  pthread_mutex_unlock(&ck->mu);
  if (frames < 4 * (int64_t)ck->pages || ck->holding)
    return 1;
  /* A background pass is over and the WAL is long: copy what was committed
   * since, so that the WAL is wholly copied and the next transaction
   * starts it over (a hold on copies it all once its reads are done). */
  run(ck, conn, NULL, SQLITE_CHECKPOINT_PASSIVE);
  return 1;
}

int lith__ckpt_after_batch(lith__ckpt *ck, sqlite3 *conn) {
  /* The hold first: one due takes back a background pass asked for (it
   * would be asked again below otherwise) and begins without it. */
  int ran = lith__ckpt_hold_step(ck, conn);
  if (ck->mode == LITH_CHECKPOINT_WRITER)
    ran |= writer_pass(ck, conn);
  return ran;
}

int lith__ckpt_holding(const lith__ckpt *ck) { return ck->holding; }

/* A background pass asked for or running (it holds SQLite's checkpoint
 * lock: the writer's own pass would fail SQLITE_BUSY). */
static int bg_busy(lith__ckpt *ck) {
  if (ck->bg_conn == NULL)
    return 0;
  pthread_mutex_lock(&ck->mu);
  int busy = ck->bg_state == BG_ASKED || ck->bg_state == BG_RUNNING;
  pthread_mutex_unlock(&ck->mu);
  return busy;
}

/* A hold is due: a background pass asked for is taken back, one running
 * is stopped (sqlite3_interrupt: what it copied so far is copied again by
 * the hold), if the hold's copy is small (hold_copies); else it is waited
 * for. It holds SQLite's checkpoint lock, so the hold's copy would wait for
 * it, and under load a pass can last hundreds of ms while the WAL grows.
 * Returns non-zero while one is asked for or still runs. */
static int bg_yield(lith__ckpt *ck) {
  if (ck->bg_conn == NULL)
    return 0;
  int yield = hold_copies(ck);
  pthread_mutex_lock(&ck->mu);
  if (yield && ck->bg_state == BG_ASKED)
    ck->bg_state = BG_IDLE;
  int busy = ck->bg_state == BG_ASKED || ck->bg_state == BG_RUNNING;
  if (yield && busy) /* a stale one (the pass just ended) fails the next pass at once: no harm */
    sqlite3_interrupt(ck->bg_conn);
  pthread_mutex_unlock(&ck->mu);
  return busy;
}

/* Release the reads; `frames`: the WAL's as the hold ends. The writer
 * went on committing while it lasted: the next hold (in a WAL started
 * over) begins that much before 8 x checkpoint_pages, between 1 and 4 x
 * checkpoint_pages. */
static void hold_end(lith__ckpt *ck, int64_t frames) {
  lith__pool_release(ck->pool);
  ck->holding = 0;
  atomic_fetch_add(&ck->hold_ns_total, (uint64_t)(lith__now_ns() - ck->hold_t0));
  int64_t p = ck->pages, at = 8 * p - (frames - ck->hold_from);
  ck->hold_at = at < p ? p : at > 4 * p ? 4 * p : at;
}

void lith__ckpt_hold_cancel(lith__ckpt *ck) {
  if (ck->holding)
    hold_end(ck, ck->hold_from);
}

/* The bound of the hold about to begin: wal_hold_ms, doubled for each hold
 * given up in a row, at most HOLD_GROW times. */
static int64_t hold_bound(const lith__ckpt *ck) {
  int64_t ms = ck->hold_ms, max = (int64_t)HOLD_GROW * ck->hold_ms;
  for (int i = 0; i < ck->gave_up && ms < max; i++)
    ms *= 2;
  return ms < max ? ms : max;
}

int lith__ckpt_hold_step(lith__ckpt *ck, sqlite3 *conn) {
  if (ck->pool == NULL || ck->hold_ms <= 0 || ck->mode == LITH_CHECKPOINT_EXTERNAL)
    return 0;
  int frames = atomic_load(&ck->frames);
  if (!ck->holding) {
    /* the WAL has not started over for 4 checkpoints' worth, or fewer
     * after a hold that added much (hold_end); copied or not: a reader
     * still in it keeps it from starting over either way */
    if (frames < ck->hold_at || frames < ck->next_hold_at || ck->restart_due)
      return 0;
    /* Not yet while a read marked too old still runs (this hold would
     * give up too) or a backup runs (the WAL cannot start over before it
     * ends), nor while a background pass stops: the writer's copy would
     * wait for it with the reads held (the WAL grows fastest then). Looked
     * at again after the next batch. */
    if (lith__pool_too_old_running(ck->pool) > 0 || lith__pool_backups(ck->pool) > 0 || bg_yield(ck))
      return 0;
    int64_t now = lith_clock_ms(), bound = hold_bound(ck);
    if (!lith__pool_hold(ck->pool, now + bound))
      return 0; /* a backup began just now */
    ck->holding = 1;
    ck->hold_t0 = lith__now_ns();
    ck->hold_until = now + bound;
    ck->hold_mark_at = now + ck->hold_ms / 2; /* not the bound's half: a longer bound is time to end */
    ck->hold_from = frames;
    atomic_fetch_add(&ck->holds, 1);
  }
  /* Drained, the hold is kept past its bound until the copy is done: a
   * read the bound let in during the copy would take a snapshot in the WAL
   * and keep it from starting over. The copy's own time bounds that. */
  int64_t now = lith_clock_ms();
  if (bg_busy(ck) || !lith__pool_hold_drained(ck->pool, now + HOLD_COPY_MAX_MS)) {
    /* Reads that have lasted wal_hold_ms are asked to end, and from half
     * wal_hold_ms into the hold on every read still running (it began
     * before the hold). */
    lith__pool_mark_too_old(ck->pool, now < ck->hold_mark_at ? now - ck->hold_ms : INT64_MAX);
    if (now < ck->hold_until)
      return 0; /* look again after the next batch, or within 1 ms when idle */
    hold_end(ck, frames);
    atomic_fetch_add(&ck->holds_gave_up, 1);
    if (ck->gave_up < HOLD_GROW)
      ck->gave_up++;
    /* The next hold begins once the reads marked have ended (above); if
     * none still runs (one ended just now), once the WAL has grown by
     * checkpoint_pages. */
    ck->next_hold_at = lith__pool_too_old_running(ck->pool) > 0 ? 0 : (int64_t)frames + ck->pages;
    return 0;
  }
  /* No lith reader in the WAL and none can enter: this pass copies all of
   * it, and readers that begin from now on read the database file alone. */
  int rc = run(ck, conn, NULL, SQLITE_CHECKPOINT_PASSIVE);
  hold_end(ck, frames);
  ck->gave_up = 0;
  if (rc == LITH_OK && atomic_load(&ck->wal_pages) == 0) {
    ck->restart_due = 1; /* wal_hook sees whether the next commit starts it over */
    ck->frames_copied = frames;
  } else if (rc == LITH_OK) { /* a reader lith does not own kept frames from it */
    atomic_fetch_add(&ck->restart_blocked, 1);
    ck->next_hold_at = frames + 4 * (int64_t)ck->pages;
  } else {
    ck->next_hold_at = (int64_t)frames + ck->pages;
  }
  return 1;
}

int lith__ckpt_close(lith__ckpt *ck, sqlite3 *conn) {
  if (ck->bg_conn) {
    pthread_mutex_lock(&ck->mu);
    ck->bg_stop = 1;
    pthread_cond_broadcast(&ck->cv);
    pthread_mutex_unlock(&ck->mu);
    pthread_join(ck->bg_thread, NULL);
    pthread_cond_destroy(&ck->cv);
    pthread_mutex_destroy(&ck->mu);
    sqlite3_close(ck->bg_conn);
    ck->bg_conn = NULL;
  }
  if (ck->mode == LITH_CHECKPOINT_EXTERNAL)
    return LITH_OK;
  int rc = run(ck, conn, NULL, SQLITE_CHECKPOINT_TRUNCATE);
  if (rc != LITH_OK && (sqlite3_errcode(conn) & 0xff) == SQLITE_BUSY) {
    /* Another connection (a replicator, a backup, the sqlite3 shell) kept
     * a read transaction past busy_timeout: the WAL cannot start over, but
     * SQLite copied what that reader allowed and every committed
     * transaction is in the WAL, which the next open reads. A close is not
     * failed for an optimisation; stats counted the checkpoint's error. */
    return LITH_OK;
  }
  return rc;
}
