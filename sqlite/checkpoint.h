/*
 * WAL checkpoints. lith installs its own wal_hook on the write connection
 * (it replaces SQLite's autocheckpoint hook) so that it always knows the WAL
 * size, and then checkpoints by mode:
 *
 *   WRITER:   once the WAL holds checkpoint_pages, the writer asks a
 *             background thread to run a PASSIVE checkpoint on a connection
 *             of its own. The copying and the fsyncs happen there, while the
 *             writer goes on committing. When it is done, the writer, between
 *             two batches, runs one more PASSIVE checkpoint itself: it copies
 *             only the frames committed meanwhile, and leaves the WAL fully
 *             copied, so that the next transaction starts it over from the
 *             beginning (a WAL that is never fully copied would only grow).
 *   AUTO:     the hook runs a PASSIVE checkpoint inside COMMIT, as SQLite's
 *             default does.
 *   EXTERNAL: never.
 *
 * The WAL starts over only when a checkpoint copied all of it and no
 * reader uses it. Endless readers never leave that moment (each takes its
 * snapshot in the WAL before the last one ends), and the -wal file grows
 * for ever. So in WRITER and AUTO, once the WAL holds 4 x checkpoint_pages
 * and the last checkpoint could not copy it all, lith makes the moment: it
 * holds new lith_read snapshots (read_pool.h) for a bounded time, and as
 * soon as the reads already running are done the writer, between two
 * batches, copies the rest and releases the readers. Readers that begin
 * after the WAL was wholly copied read the database file alone (SQLite's
 * read mark 0), so they do not stand in the way: the next write starts the
 * WAL over, and journal_size_limit cuts the file back.
 *
 * The hold's rules:
 *
 *   - It begins once the WAL holds 4 x checkpoint_pages (or fewer: the
 *     last rule) without having started over, no lith_backup runs (its snapshot keeps the WAL from
 *     starting over and it cannot be asked to end; backups wait behind a
 *     hold as reads do), and no read marked too old runs (below: the hold
 *     would give up). A background pass gives way to it: none is asked in
 *     the last checkpoint_pages before it, and when it is due one asked
 *     for is taken back and one running is stopped (sqlite3_interrupt; the
 *     hold's copy makes what it had not finished); the hold begins once it
 *     has stopped. Its checkpoint lock would make the writer's copy wait,
 *     with the reads held, and a pass can last hundreds of ms on a busy
 *     machine. Only while the frames left to copy are at most
 *     4 x checkpoint_pages, so that the writer's copy stays short: a larger
 *     backlog (a long backup's) is the background thread's, and the hold
 *     waits for its pass.
 *   - Its bound is wal_hold_ms, doubled for each hold given up in a row, at
 *     most HOLD_GROW (4) times: 100, 200, 400 ms by default; a hold that
 *     copies the WAL brings it back to wal_hold_ms.
 *   - While it waits, a read that has lasted wal_hold_ms is marked too old
 *     (lith_rx_too_old says 1), and from wal_hold_ms / 2 into the hold on
 *     every read still running is (each began before the hold). A read
 *     that lasts between its statements (a transaction kept open on a
 *     snapshot) checks the mark and ends, and the same hold goes on to
 *     copy: so a snapshot kept open costs a hold wal_hold_ms / 2 at most
 *     (a longer bound is more time for slow reads to end, not a later
 *     mark: the WAL grows fastest while reads are held). A short read is
 *     marked only when something (a busy machine) kept it running that
 *     long, and may ignore it.
 *   - At its bound, with reads still running, it gives up; they are all
 *     marked by then. The next hold begins as soon as they have ended, and
 *     not before (one that ignores the mark would make it give up again,
 *     holding new reads for nothing); if none still runs, once the WAL has
 *     grown by checkpoint_pages.
 *   - The writer goes on committing while a hold lasts, faster with the
 *     readers held: on a busy machine, where the reads waited for are slow,
 *     a hold alone can add more than 4 x checkpoint_pages. So the first
 *     hold of a WAL begins at 8 x checkpoint_pages less what the last hold
 *     added, within 1 to 4 x checkpoint_pages.
 *
 * So reads that honour the mark keep the WAL near 8 x checkpoint_pages
 * (a hold's growth is what a busy machine varies); a read that ignores it
 * keeps the WAL growing until it ends (lith cannot end a read;
 * lith_read_deadline and a statement's own deadline can), but holds no
 * other read meanwhile. A WAL wholly copied under a hold that still does
 * not start over is read by a connection lith does not own (another
 * process): counted (wal_restart_blocked), and not held for again until
 * the WAL has grown by 4 x checkpoint_pages more.
 *
 * At close, lith__ckpt_close() stops the background thread and runs a
 * TRUNCATE checkpoint (not in EXTERNAL). A failed checkpoint loses nothing:
 * the frames stay in the WAL and the next one copies them.
 */
#ifndef LITH_SQLITE_CHECKPOINT_H
#define LITH_SQLITE_CHECKPOINT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "lith.h"
#include "read_pool.h"

typedef struct lith__ckpt {
  int mode;
  int pages;
  _Atomic int wal_pages;                  /* WAL frames not yet copied, as last seen */
  _Atomic int frames;                     /* frames in the WAL after the last commit */
  _Atomic int backfilled;                 /* of them, copied by the last checkpoint */
  _Atomic uint64_t count;                 /* checkpoints run */
  _Atomic uint64_t errors;                /* of them, failed */
  _Atomic uint64_t ns_total;              /* time in them */
  _Atomic uint64_t ns_writer;             /* of it, on the write connection */
  _Atomic uint64_t lat[LITH_LAT_BUCKETS]; /* checkpoints by time taken (lith_stats.checkpoint_lat) */
  /* WRITER mode's background checkpointer */
  sqlite3 *bg_conn;
  pthread_t bg_thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int bg_state; /* under mu: IDLE, ASKED, RUNNING, DONE */
  int bg_stop;  /* under mu */
  /* The hold (WRITER and AUTO; the writer thread's alone but the counters) */
  lith__pool *pool;     /* whose reads are held; NULL: none (not open yet) */
  int hold_ms;          /* lith_options.wal_hold_ms; 0: never */
  int holding;          /* a hold is on */
  int64_t hold_until;   /* lith_clock_ms */
  int64_t hold_mark_at; /* lith_clock_ms: from then on every read still running is marked too old */
  int64_t hold_t0;      /* lith__now_ns when it began */
  int64_t next_hold_at; /* frames before the next hold (after one that failed); 64-bit:
                           checkpoint_pages may be up to INT_MAX; 0 once the WAL starts over */
  int gave_up;          /* holds given up in a row: the next one's bound doubles per each */
  int64_t hold_at;      /* frames at which a hold begins: 4 x checkpoint_pages, or sooner
                           after one during which the WAL grew much (hold_end) */
  int64_t hold_from;    /* frames when the hold began */
  int restart_due;      /* the WAL was wholly copied under a hold: the next commit starts it over */
  int frames_copied;    /* ... at that many frames */
  _Atomic uint64_t holds, holds_gave_up, hold_ns_total, restart_blocked;
} lith__ckpt;

/* Install the hook on the writer connection `conn` and, in WRITER mode,
 * open the background connection to `path` and start its thread. `ck` must
 * outlive both. Returns a lith code. */
int lith__ckpt_init(lith__ckpt *ck, sqlite3 *conn, const char *path, const lith_options *opt);

/* Writer thread, after a batch has been answered: start, or finish, a
 * checkpoint as the mode says. Returns non-zero if a checkpoint ran or
 * finished (the stats may have changed). */
int lith__ckpt_after_batch(lith__ckpt *ck, sqlite3 *conn);

/* Writer thread, idle between batches: is a hold on, to be looked after
 * (lith__ckpt_hold_step) within a millisecond? */
int lith__ckpt_holding(const lith__ckpt *ck);

/* Writer thread, between batches: begin, go on with or end a hold. Also
 * called by lith__ckpt_after_batch. Returns non-zero if a checkpoint ran. */
int lith__ckpt_hold_step(lith__ckpt *ck, sqlite3 *conn);

/* Writer thread, as it stops: end a hold now rather than at its bound. */
void lith__ckpt_hold_cancel(lith__ckpt *ck);

/* At close, once the writer is idle: stop the background thread, close its
 * connection, then TRUNCATE (not in EXTERNAL). Returns a lith code; a
 * TRUNCATE held off by another connection's reader (SQLITE_BUSY past
 * busy_timeout) is LITH_OK: nothing is lost, the WAL keeps the rest. */
int lith__ckpt_close(lith__ckpt *ck, sqlite3 *conn);

#endif
