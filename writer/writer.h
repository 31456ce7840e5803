/*
 * The lith handle and the writer thread (internal).
 *
 * Producers reserve a slot in `depth` (bounded by queue_capacity), push
 * their request onto the MPSC queue and, if the writer sleeps, wake it; the
 * first producer to see it asleep clears the flag and is the only one to
 * make the wake-up system call. The writer takes up to max_batch requests,
 * runs them in one transaction (batch.c), answers them, and checkpoints.
 */
#ifndef LITH_WRITER_WRITER_H
#define LITH_WRITER_WRITER_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>

#include "../lib/latency.h"
#include "../sqlite/checkpoint.h"
#include "../sqlite/read_pool.h"
#include "../sqlite/stmt_cache.h"
#include "lith.h"
#include "queue.h"
#include "waker.h"

/* What lith keeps in lith_request.lith__priv while a request is queued. */
typedef struct lith__priv {
  lith__qnode node;       /* must be first */
  int64_t queued_ns;      /* when it was queued, for queue-wait stats */
  _Atomic uint32_t state; /* lith_do: PENDING, SLEEPING, DONE */
  uint32_t flags;         /* LITH__REQ_* */
  int32_t done;           /* writer only: its outcome is final in this batch */
  int32_t ran;            /* writer only: ran OK in the current attempt */
} lith__priv;

_Static_assert(sizeof(lith__priv) <= sizeof(((lith_request *)0)->lith__priv),
               "lith__priv must fit in lith_request.lith__priv");

enum { LITH__PENDING = 0, LITH__SLEEPING = 1, LITH__DONE = 2 };
/* Connection state a command may change for itself, put back when it ends
 * (batch.c): the flag pragmas it may set, and TEMP objects. FK_FORGOT: it
 * set defer_foreign_keys while a deferred violation was counted (SQLite's
 * defer_foreign_keys = OFF forgets the count): PRAGMA foreign_key_check
 * decides before it may commit. And the schema
 * rule (lith_command_check): a statement that creates or alters a table was
 * prepared in this command (DDL: its schema is checked when it ends, and
 * every statement is expired after it), and not yet followed by a check
 * (FK_CHECK: lith_tx_check checks and clears it). */
enum {
  LITH__DIRTY_DEFER_FK = 1,
  LITH__DIRTY_RECURSIVE = 2,
  LITH__DIRTY_TEMP = 4,
  LITH__DIRTY_DDL = 8,
  LITH__DIRTY_FK_CHECK = 16,
  LITH__DIRTY_FK_FORGOT = 32
};
enum { LITH__REQ_SYNC = 1, LITH__REQ_ALONE = 2 };

static inline lith__priv *lith__priv_of(lith_request *r) { return (lith__priv *)(void *)&r->lith__priv; }

struct lith_tx {
  lith *db;
  sqlite3 *conn;
  lith__stmt_cache *cache;
  int err;                      /* last error of a lith_tx_* call */
  char errmsg[LITH_ERRMSG_MAX]; /* this command's message */
  int depth;                    /* nested savepoints open */
  int keep;                     /* err/errmsg hold the error that lost the
                                    transaction: later errors do not replace it */
  int64_t changes_base;         /* sqlite3_total_changes64 when the run began */
  int64_t deadline_ns;          /* command_timeout_ms: when this run must end */
  int timed_out;                /* the run went past it and was interrupted */
};

typedef struct lith__batch_stats {
  uint64_t commands, batches, failed, retried, busy;
  uint64_t batch_hist[LITH_HIST_BUCKETS];
  uint64_t tx_ns_total, commit_ns_total, wait_ns_total, wait_ns_max;
  uint64_t tx_lat[LITH_LAT_BUCKETS];
  uint64_t wait_lat[LITH_LAT_BUCKETS];
#define LITH__RECENT 4096
  uint32_t recent_tx_us[LITH__RECENT]; /* ring of recent transaction times */
  uint64_t nrecent;
} lith__batch_stats;

struct lith {
  /* shared with producers */
  lith__queue q;
  alignas(64) _Atomic uint32_t sleeping;  /* futex word: writer asleep */
  alignas(64) _Atomic int64_t depth;      /* reserved + queued requests */
  _Atomic uint32_t users;                 /* threads inside a lith_* call on this
                                                handle; lith_close frees it only at 0 */
  alignas(64) _Atomic uint32_t space_seq; /* futex word: space freed */
  _Atomic uint32_t space_waiters;
  _Atomic uint32_t closed;
  _Atomic uint32_t interrupts; /* lith_interrupt calls: a backup stops when it moves */
  _Atomic int last_batch;      /* size of the previous batch (relaxed): both sides spin
                             only while batches are tiny, i.e. few producers */
  _Atomic int64_t last_tx_ns;  /* the previous transaction's time (relaxed): how long
                                 a lone producer may spin for its answer */
  int spin_credit;             /* writer thread only: whether its wait-spin pays (batch.c) */
  unsigned spin_skipped;       /* writer thread only: sleeps without a spin since */

  /* read-only after open */
  alignas(64) char *path;
  char *vfs; /* copy of opt.vfs (opt.vfs points here) */
  lith_options opt;
  pthread_t thread;
  lith__waker *waker;
  lith__pool *pool;

  /* writer thread only */
  sqlite3 *conn;
  lith__stmt_cache *cache;
  lith__ckpt ckpt;
  sqlite3_stmt *st_begin, *st_commit, *st_rollback, *st_sp, *st_sp_release, *st_sp_rollback, *st_nsp,
      *st_nsp_release, *st_nsp_rollback;
  int in_command;           /* the authorizer applies the command rules while set */
  int in_fn;                /* a command's function is running (lith_submit refuses) */
  int committing;           /* lith's own COMMIT runs: the commit hook lets it pass */
  int vacuuming;            /* lith_tx_vacuum's VACUUM runs: command_timeout_ms bounds it */
  int tx_lost;              /* the rollback hook saw the batch's transaction end */
  unsigned dirty;           /* LITH__DIRTY_*: what the running command changed on the
                            connection that lith must put back when it ends */
  char auth_why[160];       /* why lith's authorizer last refused, for the message */
  int recursive_base;       /* recursive_triggers as lith opened the connection (SQLite's
                            build decides: Debian's defaults to on) */
  lith_request **batch;     /* max_batch slots: what take() took */
  lith_request **run;       /* the part of batch one transaction runs (run_batch): all of it,
                           or the commands before, or one alone (lith_submit_alone) */
  _Atomic uint64_t commits; /* transactions committed (lith_commit_count) */
  int alone;                /* the transaction running is one command's alone */
  int fk_changed;           /* an alone command set foreign_keys (lith_tx_foreign_keys): put
                               opt.foreign_keys back after its transaction */
  int64_t *topics;          /* touched in this batch (with repeats) */
  int ntopics, captopics;
  int64_t *uniq;                       /* on_commit's deduplicated copy */
  int32_t *seen;                       /* open-addressing set for deduplication: index + 1 into uniq */
  uint64_t wait_lat[LITH_LAT_BUCKETS]; /* the current batch's queue waits */
  int capseen;
  lith_tx tx;

  /* lith_shutdown: done once, under close_mu */
  pthread_mutex_t close_mu;
  int shut, shut_rc;

  /* stats: written by the writer once per batch */
  pthread_mutex_t stats_mu;
  lith__batch_stats stats;
  /* the read pool's, written by readers under the pool's mutex */
  alignas(64) lith__read_stats rstats;
};

/* Spinning instead of sleeping, while it pays (futex.h has the times):
 * a producer waiting for its answer (lith.c) and the writer waiting for
 * the next command (batch.c) spin only while batches hold at most
 * LITH__SPIN_MAX_BATCH commands, i.e. there are few producers; both read
 * the clock once every LITH__SPIN_CLOCK_MASK + 1 rounds. The writer's spin
 * runs on credit (batch.c, take): it starts with, and never holds more
 * than, LITH__SPIN_CREDIT_MAX; without any it still spins once in
 * LITH__SPIN_RETRY_EVERY sleeps (a power of two). */
#define LITH__SPIN_MAX_BATCH 2
#define LITH__SPIN_CLOCK_MASK 63
#define LITH__SPIN_CREDIT_MAX 8
#define LITH__SPIN_RETRY_EVERY 64

/* Wake at most n threads waiting for room in the queue, if any wait
 * (lith.c: a slot given back, a waiter leaving; batch.c: a take freed n). */
void lith__wake_space_waiters(lith *db, int n);

/* Writer thread entry (batch.c). */
void *lith__writer_main(void *arg);

/* The authorizer that keeps commands from ending the transaction or
 * changing the connection for the commands after them (batch.c). */
int lith__authorize(void *ctx, int action, const char *a, const char *b, const char *c, const char *d);
/* lith_command_check on the write connection, as lith's own statement (the
 * command rules let it pass): an SQLite code, why saying why. */
int lith__schema_rule(lith *db, char *why, size_t cap);
/* Expire every statement prepared on the write connection (batch.c). */
void lith__expire_statements(lith *db);

/* The commit and rollback hooks of the write connection (batch.c): only
 * lith's own COMMIT may commit, and a rollback marks the transaction lost. */
int lith__commit_hook(void *ctx);
void lith__rollback_hook(void *ctx);

/* Non-zero, and the run marked timed out, once the running command is past
 * lith_options.command_timeout_ms (batch.c; always 0 without a limit). */
int lith__tx_past_limit(lith_tx *tx);

/* Non-zero when the batch's transaction is gone (batch.c). */
int lith__tx_lost(const lith *db);

/* Prepare the writer's own statements (batch.c). */
int lith__writer_prepare(lith *db);
void lith__writer_finalize(lith *db);

/* Record one finished batch's figures (stats.c); wait_lat holds this batch's
 * commands by queue wait, and is cleared. */
void lith__stats_batch(lith *db, int n, int failed, int retried, int busy, uint64_t tx_ns, uint64_t commit_ns,
                       uint64_t wait_ns_sum, uint64_t wait_ns_max);

/* Take a user reference (LITH_CLOSED once closing) and drop it (lith.c). */
int lith__enter(lith *db);
void lith__leave(lith *db);

/* Non-zero on the writer thread of `db` (a command or done callback). */
int lith__on_writer(const lith *db);

/* Queue `req` (lith.c); the caller holds a user reference (lith__enter).
 * deadline_ms: -1 none, 0 do not wait. *ahead (if not NULL) is set to the
 * number of requests queued before this one. */
int lith__enqueue(lith *db, lith_request *req, int64_t deadline_ms, int64_t *ahead);

#endif
