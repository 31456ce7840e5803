/*
 * Statistics. The writer adds one batch's figures under a mutex that only
 * lith_stats_get() ever contends for; percentiles are computed on demand
 * from a ring of the most recent transaction times.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../lib/latency.h"
#include "writer.h"

static int bucket(int n) {
  int b = 0;
  while (n > 1 && b < LITH_HIST_BUCKETS - 1) {
    n >>= 1;
    b++;
  }
  return b;
}

void lith__stats_batch(lith *db, int n, int failed, int retried, int busy, uint64_t tx_ns, uint64_t commit_ns,
                       uint64_t wait_ns_sum, uint64_t wait_ns_max) {
  lith__batch_stats *s = &db->stats;
  pthread_mutex_lock(&db->stats_mu);
  s->commands += (uint64_t)n;
  s->batches++;
  s->failed += (uint64_t)failed;
  s->retried += (uint64_t)retried;
  s->busy += (uint64_t)busy;
  s->batch_hist[bucket(n)]++;
  s->tx_ns_total += tx_ns;
  s->commit_ns_total += commit_ns;
  s->wait_ns_total += wait_ns_sum;
  if (wait_ns_max > s->wait_ns_max)
    s->wait_ns_max = wait_ns_max;
  uint64_t us = tx_ns / 1000;
  s->tx_lat[lith__lat_bucket(tx_ns)]++;
  for (int i = 0; i < LITH_LAT_BUCKETS; i++) /* this batch's waits, gathered by the writer */
    if (db->wait_lat[i]) {
      s->wait_lat[i] += db->wait_lat[i];
      db->wait_lat[i] = 0;
    }
  s->recent_tx_us[s->nrecent++ % LITH__RECENT] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
  pthread_mutex_unlock(&db->stats_mu);
}

/* lith_stats_get reads the percentiles from a sorted copy of the ring of
 * recent transaction times (16 KB). The copy is made here, once per
 * process, under a mutex of its own: not _Thread_local (every thread of the
 * host program, lith's or not, paid 16 KB of memory for it), not on the
 * caller's stack (which may be small), and sorted outside stats_mu, which
 * the writer takes after every batch: the writer waits for the copy at
 * most, never for the sort. Stats calls, on any handle, take turns for the
 * sort (about 0.3 ms for a full ring); a monitoring call can afford that. */
static uint32_t lith__stats_scratch[LITH__RECENT];
static pthread_mutex_t lith__stats_scratch_mu = PTHREAD_MUTEX_INITIALIZER;

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

void lith_stats_get(lith *db, lith_stats *out) {
  uint32_t *ring = lith__stats_scratch;
  memset(out, 0, sizeof *out);
  /* No user reference needed: the mutex lives until lith_close, which is
   * called only when no other thread uses the handle; so the final figures
   * can still be read after lith_shutdown. */
  if (!db)
    return;
  pthread_mutex_lock(&lith__stats_scratch_mu); /* always before stats_mu */
  pthread_mutex_lock(&db->stats_mu);
  const lith__batch_stats *s = &db->stats;
  out->commands = s->commands;
  out->batches = s->batches;
  out->failed = s->failed;
  out->retried = s->retried;
  out->busy = s->busy;
  memcpy(out->batch_hist, s->batch_hist, sizeof out->batch_hist);
  out->tx_ns_total = s->tx_ns_total;
  out->commit_ns_total = s->commit_ns_total;
  out->wait_ns_total = s->wait_ns_total;
  out->wait_ns_max = s->wait_ns_max;
  /* The checkpointer thread updates its own counters (atomics) whenever a
   * pass ends: read them there, not as of the last batch. */
  out->wal_pages = (uint64_t)atomic_load(&db->ckpt.wal_pages);
  out->checkpoints = atomic_load(&db->ckpt.count);
  out->checkpoint_errors = atomic_load(&db->ckpt.errors);
  out->checkpoint_ns_total = atomic_load(&db->ckpt.ns_total);
  out->checkpoint_ns_writer = atomic_load(&db->ckpt.ns_writer);
  for (int i = 0; i < LITH_LAT_BUCKETS; i++)
    out->checkpoint_lat[i] = atomic_load(&db->ckpt.lat[i]);
  out->wal_holds = atomic_load(&db->ckpt.holds);
  out->wal_holds_gave_up = atomic_load(&db->ckpt.holds_gave_up);
  out->wal_hold_ns_total = atomic_load(&db->ckpt.hold_ns_total);
  out->wal_restart_blocked = atomic_load(&db->ckpt.restart_blocked);
  memcpy(out->tx_lat, s->tx_lat, sizeof out->tx_lat);
  memcpy(out->wait_lat, s->wait_lat, sizeof out->wait_lat);
  size_t n = s->nrecent < LITH__RECENT ? (size_t)s->nrecent : LITH__RECENT;
  memcpy(ring, s->recent_tx_us, n * sizeof *ring);
  pthread_mutex_unlock(&db->stats_mu);

  /* The read pool's figures: its own, kept in the handle (so also after
   * lith_shutdown closed the pool). */
  const lith__read_stats *r = &db->rstats;
  out->reads = atomic_load_explicit(&r->reads, memory_order_relaxed);
  out->read_waits = atomic_load_explicit(&r->waits, memory_order_relaxed);
  out->read_timeouts = atomic_load_explicit(&r->timeouts, memory_order_relaxed);
  out->read_wait_ns_total = atomic_load_explicit(&r->wait_ns_total, memory_order_relaxed);
  out->readers_in_use = atomic_load_explicit(&r->in_use, memory_order_relaxed);
  out->readers = (uint64_t)db->opt.readers;
  out->reads_held = atomic_load_explicit(&r->held, memory_order_relaxed);
  out->reads_held_ns_total = atomic_load_explicit(&r->held_ns_total, memory_order_relaxed);
  out->reads_too_old = atomic_load_explicit(&r->too_old, memory_order_relaxed);
  for (int i = 0; i < LITH_LAT_BUCKETS; i++)
    out->read_wait_lat[i] = atomic_load_explicit(&r->wait_lat[i], memory_order_relaxed);

  /* The file, not the frames: a WAL that never starts over keeps growing
   * however much of it checkpoints copy (wal_pages). A VFS of another kind
   * may keep it elsewhere: then 0. */
  char wal[4096];
  struct stat sb;
  if ((size_t)snprintf(wal, sizeof wal, "%s-wal", db->path) < sizeof wal && stat(wal, &sb) == 0)
    out->wal_file_bytes = (uint64_t)sb.st_size;

  int64_t depth = atomic_load(&db->depth);
  out->queue_depth = depth > 0 ? (uint64_t)depth : 0;
  if (n > 0) {
    qsort(ring, n, sizeof *ring, cmp_u32);
    out->tx_ns_p50 = (uint64_t)ring[(n - 1) * 50 / 100] * 1000;
    out->tx_ns_p99 = (uint64_t)ring[(n - 1) * 99 / 100] * 1000;
    out->tx_ns_p999 = (uint64_t)ring[(n - 1) * 999 / 1000] * 1000;
    out->tx_ns_max = (uint64_t)ring[n - 1] * 1000;
  }
  pthread_mutex_unlock(&lith__stats_scratch_mu);
}
