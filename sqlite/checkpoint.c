/* WAL checkpoint policy: see checkpoint.h. */
#include "checkpoint.h"

#include <time.h>

#include "error.h"

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int run(lith__ckpt *ck, sqlite3 *conn, const char *schema, int how) {
  int log = 0, done = 0;
  uint64_t t0 = now_ns();
  int rc = sqlite3_wal_checkpoint_v2(conn, schema, how, &log, &done);
  ck->ns_total += now_ns() - t0;
  ck->count++;
  if (rc != SQLITE_OK) {
    ck->errors++;
    return lith__fail_sqlite(rc, conn, "checkpoint");
  }
  /* Frames not yet copied (a reader still needs them) stay in the WAL. */
  ck->wal_pages = log < 0 ? 0 : log - done;
  return LITH_OK;
}

static int wal_hook(void *ctx, sqlite3 *conn, const char *schema, int pages) {
  lith__ckpt *ck = ctx;
  ck->wal_pages = pages;
  if (ck->mode == LITH_CHECKPOINT_AUTO && pages >= ck->pages)
    run(ck, conn, schema, SQLITE_CHECKPOINT_PASSIVE);
  return SQLITE_OK; /* a checkpoint failure must not fail the commit */
}

void lith__ckpt_init(lith__ckpt *ck, sqlite3 *conn, int mode, int pages) {
  ck->mode = mode;
  ck->pages = pages;
  ck->wal_pages = 0;
  ck->count = 0;
  ck->errors = 0;
  ck->ns_total = 0;
  sqlite3_wal_hook(conn, wal_hook, ck);
}

int lith__ckpt_after_batch(lith__ckpt *ck, sqlite3 *conn) {
  if (ck->mode != LITH_CHECKPOINT_WRITER || ck->wal_pages < ck->pages)
    return LITH_OK;
  return run(ck, conn, NULL, SQLITE_CHECKPOINT_PASSIVE);
}

int lith__ckpt_close(lith__ckpt *ck, sqlite3 *conn) {
  if (ck->mode == LITH_CHECKPOINT_EXTERNAL)
    return LITH_OK;
  return run(ck, conn, NULL, SQLITE_CHECKPOINT_TRUNCATE);
}
