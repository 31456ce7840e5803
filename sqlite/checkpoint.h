/*
 * WAL checkpoints. lith installs its own wal_hook on the write connection
 * (which replaces SQLite's autocheckpoint hook) so that it always knows the
 * WAL size, and then checkpoints by mode:
 *   WRITER:   lith__ckpt_after_batch() runs a PASSIVE checkpoint once the WAL
 *             holds checkpoint_pages, called after the producers were
 *             answered, so no producer waits for it;
 *   AUTO:     the hook itself runs it inside COMMIT, as SQLite's default;
 *   EXTERNAL: never.
 * At close, lith__ckpt_close() runs a TRUNCATE checkpoint (not in EXTERNAL).
 */
#ifndef LITH_SQLITE_CHECKPOINT_H
#define LITH_SQLITE_CHECKPOINT_H

#include <stdint.h>

#include "lith.h"

typedef struct lith__ckpt {
  int mode;
  int pages;
  int wal_pages;          /* WAL frames after the last commit or checkpoint */
  uint64_t count;         /* checkpoints run */
  uint64_t errors;        /* of them, failed */
  uint64_t ns_total;      /* time in them */
} lith__ckpt;

/* Install the hook on the writer connection; `ck` must outlive it. */
void lith__ckpt_init(lith__ckpt *ck, sqlite3 *conn, int mode, int pages);

/* WRITER mode: checkpoint now if the WAL is at or past the threshold.
 * Returns a lith code (a failed checkpoint loses nothing; it is retried). */
int lith__ckpt_after_batch(lith__ckpt *ck, sqlite3 *conn);

/* At close: TRUNCATE, unless EXTERNAL. */
int lith__ckpt_close(lith__ckpt *ck, sqlite3 *conn);

#endif
