/*
 * lithd store — where one database's data live: the one seam between what
 * a request meets and the engine that keeps the data.
 *
 *             routes/ (HTTP)      request/ (JSON, named commands, ...)
 *                  \                 /
 *                   sql/ (the policy: which SQL runs where, parameters,
 *                         limits, the result and its memory)
 *                            |
 *              ------------- store.h -------------
 *                |                             |
 *        store/local.c                  store/dqlite.c
 *        a file: lith's writer,         a dqlite cluster: the batching
 *        its read pool, lith_uv         writer (dqlite/writer.h), leader
 *                                       connections for reads
 *
 * Everything a request meets before and after — parsing, the SQL policy
 * (first keyword after comments, the authorizer, refused pragmas and
 * functions), parameter numbering (SQLite's own: a store that cannot
 * prepare where it runs has sql/ prepare on a local connection holding the
 * database's schema, under the same authorizer, before sending), limits,
 * encoding the answer — is above this line, once; a store only
 *
 *   - runs a batch (lithd_batch) as ONE command: committed with everything
 *     else it was batched with, or failed alone (lithd_store_write);
 *   - runs a batch of queries on ONE snapshot (lithd_store_read);
 *   - reports its counters (lithd_store_stats);
 *   - hands out its local file, if it has one (lithd_store_lith);
 *   - writes one consistent copy for every backup (lithd_store_snapshot);
 *   - stops (answering everything it accepted) and closes.
 * A third request format lands above the seam and reaches both stores
 * through these calls, without touching either.
 *
 * Outcomes (rc in the callback) mean the same on every store:
 *   LITH_OK                the batch committed (a read: it ran); *result holds
 *                          every statement's result
 *   a statement's code     (result->err says which statement) the command
 *                          failed alone, nothing of it committed
 *   LITH_QUEUE_FULL        refused before it ran: nothing committed; retry
 *                          after a while (503 + Retry-After)
 *   LITH_BUSY, LITH_CLOSED, LITH_INTERRUPTED, LITH_ABORTED
 *                          not committed (503): safe to send again
 *   LITHD_OUTCOME_UNKNOWN  the store lost the commit's answer (dqlite: the
 *                          leader went away after COMMIT was sent): it may or
 *                          may not have committed (504): read before sending
 *                          again
 *   another lith code      the transaction around it failed (500, 507, ...)
 * errmsg says why whenever rc is not LITH_OK and no statement is named.
 *
 * Threads: every call on the loop thread; callbacks on the loop thread.
 * Ownership: a store is lithd_store_open_*'s, freed by lithd_store_close;
 * a request is the caller's, lent to the store from a LITH_OK
 * lithd_store_write/read until its callback returns.
 */
#ifndef LITHD_STORE_H
#define LITHD_STORE_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "http.h"
#include "lith.h"
#include "sqljson.h"

typedef struct lithd_store lithd_store;

/* A node's address as the stores give it ("HOST:PORT"), at most, NUL
 * included. */
#define LITHD_STORE_ADDR_MAX 256
typedef struct lithd_store_req lithd_store_req;

/* One write or read on its way. The caller fills the first block. */
struct lithd_store_req {
  lithd_batch *batch;             /* what to run; the caller's, outlives the request */
  lithd_result *result;           /* out: the run's (NULL if memory ran out or it never
                                      ran); the caller frees it with lithd_result_free */
  void (*cb)(lithd_store_req *r); /* once, on the loop, after a LITH_OK submit */
  void *data;                     /* the caller's */
  lith_http_req *http;            /* the client, or NULL: a write whose client left
                                      while it waited for room is not run */
  size_t bytes;                   /* the caller's memory it stands for, while it waits */
  int may_write;                  /* 1: the client's credentials grant writes (server.h,
                                     LITHD_ACCESS_FULL). 0, the default: a write or a
                                     transaction's run fails every statement that writes
                                     (LITHD_FORBIDDEN, "Authorization forbidden: ...") and
                                     the rest runs: a read-only client cannot write, on
                                     every road, whatever its batch holds */
  /* The outcome, in cb. */
  int rc;                       /* see "Outcomes" above */
  char errmsg[LITH_ERRMSG_MAX]; /* why, when no statement is named */
  int64_t t_start_ns, t_end_ns; /* a read: when it ran (CLOCK_MONOTONIC); 0: never */
  int tx_open;                  /* lithd_store_tx_run: the transaction is still open */
  /* Private to the store. */
  void *priv;
};

/* What a store reports for /v1/stats and /metrics. `lith` is the local
 * writer's full figures (lith_stats); the other fields are every store's. */
typedef struct lithd_store_stats {
  uint64_t commands, batches, failed; /* commands answered, transactions, commands failed */
  uint64_t failovers, reruns;         /* dqlite: leader changes seen, batches run again */
  int64_t inflight;                   /* commands accepted, not answered yet */
  int has_lith;                       /* 1: `lith` is filled (a local file) */
  lith_stats lith;
  /* dqlite (issue 34): who leads, as the store last learned it (a write,
   * or its watch asking the nodes while no write goes: "" and 0 when no
   * leader is known); the last failover's wait: from the moment the old
   * leader was found lost to the first commit on the new one (0: none
   * yet). A local file leaves them zero. */
  char leader[LITHD_STORE_ADDR_MAX];
  uint64_t leader_id;
  int64_t failover_wait_ms;
} lithd_store_stats;

/* Run r->batch as one command (write). Returns LITH_OK: r->cb will run
 * exactly once with the outcome; or LITH_QUEUE_FULL / LITH_CLOSED /
 * LITH_NOMEM for the caller to answer at once (cb will not run). */
int lithd_store_write(lithd_store *s, lithd_store_req *r);

/* Run r->batch (queries only: sql/'s rules) on one snapshot, off the loop.
 * Returns as lithd_store_write. */
int lithd_store_read(lithd_store *s, lithd_store_req *r);

/* Fill *st (all zero where a store has nothing to say). */
void lithd_store_stats_get(lithd_store *s, lithd_store_stats *st);

/* /v1/stats' body, malloc'd JSON (NULL: out of memory). */
char *lithd_store_stats_json(lithd_store *s);

/* The local lith handle (the WAL watch, a local SQL dump's read), or NULL
 * when the data are not in a local file (dqlite: every node holds a copy;
 * backups go through lithd_store_snapshot on every store). */
lith *lithd_store_lith(lithd_store *s);

/* ---- Interactive transactions ---------------------------------------------
 * A stream's transaction that lasts across requests (Hrana's
 * client.transaction(), the ORMs' db.transaction). lithd_store_tx_open
 * starts one: a command alone in its transaction (lith_submit_alone) that
 * holds the writer while it lasts, so the commands before it commit first
 * and every other command waits until it ends (its bounds: below; the
 * defaults of idle_ms and max_ms are LITHD_TX_IDLE_MS, LITHD_TX_MAX_MS). With LITHD_TX_SNAPSHOT it starts on a read snapshot instead
 * (SQLite's BEGIN DEFERRED, and READONLY): its own thread holds one reader
 * in one read transaction, and the writer is not held while it only
 * reads. Its first run that writes moves it to the writer, as a command
 * alone, only if nothing committed since its snapshot began (else that
 * run fails with LITH_BUSY and the transaction ends, rolled back:
 * SQLite's SQLITE_BUSY_SNAPSHOT, so its reads and writes never disagree);
 * with LITHD_TX_READONLY a write is refused (LITH_READONLY) and the
 * transaction goes on. Each lithd_store_tx_run runs
 * a batch with steps in it (the batch's `held` set: sqljson_int.h); a
 * batch whose COMMIT or ROLLBACK step ends the transaction is answered
 * after the commit (a COMMIT that fails is that batch's error) or the
 * rollback, with tx_open 0. A batch that fails as a whole ends it too
 * (rolled back).
 *
 * Its bounds, one rule for every store (lithd__tx_bound, store_int.h):
 * open longer than max_ms (from the open, waiting for the writer
 * included), or idle longer than idle_ms between two runs WHILE ANOTHER
 * WAITS for what it holds, it is rolled back by itself. "Another waits":
 * for the writer, a command queued behind it (a write, a named command,
 * another stream's BEGIN IMMEDIATE, a snapshot's first write moving to
 * the writer); for its reader (a transaction on a snapshot), a request
 * waiting for a reader of the database (lithd_store_readers_wanted). Idle
 * with nobody waiting, it stays open until max_ms: sqld's rule, which
 * steals the write lock from an idle holder only for another writer. (A
 * snapshot that keeps the WAL from starting over is ended apart from
 * these: LITHD_TX_TOO_OLD.) Once a bound ended it, lithd_store_tx_ended
 * says 1 and the next run is refused with LITHD_TX_TIMEOUT (errmsg: which
 * bound) once: the caller lets go of it then, and the stream's next
 * statements run in autocommit, as on sqld.
 * lithd_store_tx_close lets go (rolling back what is open) and frees the
 * handle once the command ended. A store that cannot hold one refuses the
 * open with LITHD_FORBIDDEN and says why in errmsg. */
#define LITHD_TX_IDLE_MS 5000
#define LITHD_TX_MAX_MS 10000

typedef struct lithd_store_tx lithd_store_tx;

/* lithd_store_tx_open's flags. */
enum {
  LITHD_TX_READONLY = 1, /* its statements may only read */
  LITHD_TX_SNAPSHOT = 2  /* it begins on a read snapshot, not on the writer (a store
                            without cheap snapshots, dqlite, holds the writer for it
                            as for any: LITHD_TX_READONLY still refuses writes) */
};

/* Open one (flags: LITHD_TX_*). http: the client (while it waits for room
 * a transaction whose client left is not begun). Returns LITH_OK with
 * *out, or a refusal (LITH_QUEUE_FULL, LITH_CLOSED, LITHD_FORBIDDEN,
 * LITH_NOMEM) with errmsg[0..cap) saying why. */
int lithd_store_tx_open(lithd_store *s, unsigned flags, int64_t idle_ms, int64_t max_ms, lith_http_req *http,
                        lithd_store_tx **out, char *errmsg, size_t cap);

/* Run r->batch in t; r->cb once, on the loop. Returns LITH_OK, or (cb will
 * not run) LITHD_TX_TIMEOUT, or the code that ended t before (then
 * r->errmsg says why). One run at a time. */
int lithd_store_tx_run(lithd_store_tx *t, lithd_store_req *r);

/* Let go of t (no run in flight): what is open is rolled back. */
void lithd_store_tx_close(lithd_store_tx *t);

/* 1 if t has ended (committed, rolled back, or past a bound: its next run
 * is refused), 0 while it is open. NULL: 1. */
int lithd_store_tx_ended(const lithd_store_tx *t);

/* The loop: one request more (delta 1) or fewer (-1) waits for a reader
 * of s's database (a read transaction waiting for a reader to spare, a
 * query in the database's read FIFO): while any waits, a transaction on a
 * snapshot idle past its idle_ms is rolled back (the rule above). */
void lithd_store_readers_wanted(lithd_store *s, int delta);

/* ---- Backups (issue 34: one call for every store) ------------------------
 * Write one consistent copy of the database into `path`, a new file (one
 * that exists is refused: LITH_MISUSE; made 0600), that SQLite opens alone
 * (no -wal beside it: journal_mode DELETE) and whose
 * PRAGMA integrity_check passes; it holds every command answered before
 * the call began, and nothing of a transaction that did not commit.
 * Writes go on meanwhile. A local file: lith_backup_new. dqlite: the
 * leader's DUMP (its main file and WAL, read into a private directory
 * beside `path` and folded into one file there); the leader, because a
 * follower's copy may lag what was answered.
 * Blocking: call it on libuv's thread pool, never on the loop; any
 * thread, several at once; lithd_store_drain interrupts one in progress
 * (LITH_INTERRUPTED, the partial file removed). On failure nothing is left
 * at `path` and errmsg[0..cap) says why. */
int lithd_store_snapshot(lithd_store *s, const char *path, char *errmsg, size_t cap);

/* The stop begins: what waits for room is refused (its cb runs with
 * LITH_CLOSED), later writes are refused at once (LITH_CLOSED); what was
 * accepted still runs, commits and is answered; reads still run. */
void lithd_store_stop(lithd_store *s);

/* After the HTTP server stopped: cut what still reads (a backup's copy),
 * let every accepted command be answered (each cb runs, on the loop),
 * then on_drained(arg) from the loop (may be NULL). */
void lithd_store_drain(lithd_store *s, void (*on_drained)(void *arg), void *arg);

/* After the loop ended: close and free (NULL is fine). Returns LITH_OK, or
 * the error of closing (lith_close's, the message in *err). */
int lithd_store_close(lithd_store *s, char *err, size_t errsz);

#endif /* LITHD_STORE_H */
