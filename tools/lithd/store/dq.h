/*
 * lithd dq — lithd --dqlite: the database is a dqlite cluster instead of a
 * local file (issue 14). The routes stay server.c's; what they submit goes
 * here instead of to lith:
 *
 *   writes  each HTTP command is one lith__dqw command (dqlite/writer.h)
 *           whose callback runs the client's statements
 *           (lithd_batch_run_dq). The writer batches them into one dqlite
 *           transaction and answers after COMMIT's OK (a majority stored
 *           it). Its `done` runs on the writer thread: the outcome is put
 *           on a list under a mutex and a uv_async wakes the loop, which
 *           answers (the pattern of lith_uv).
 *   reads   POST /v1/query runs on libuv's thread pool on a connection of
 *           lithd's own to the LEADER (QUERY_SQL; a small pool of such
 *           connections, found with LEADER over the address list). dqlite
 *           1.11 refuses a read on a follower (SQLITE_IOERR_NOT_LEADER):
 *           reads see every committed command. A read whose connection
 *           fails is tried once more on the leader found again.
 *   schema  --schema steps are applied at start through one connection to
 *           the leader, in ONE transaction (BEGIN IMMEDIATE) that also
 *           records how many steps are applied in _lith_schema(version):
 *           a second lithd, or a restart, reads the record inside its own
 *           transaction and applies only the steps above it (BEGIN
 *           IMMEDIATE serialises two lithds starting together; the loser
 *           sees the winner's record). A cluster whose record is above the
 *           file's steps refuses to start, as the local --schema does.
 *
 * The outcomes the routes answer (lithd_dq_result_failed): committed 200;
 * a statement's failure as the local path answers it; no leader 503 "not
 * committed"; leader lost after COMMIT 503 "outcome unknown"; never 200
 * unless COMMIT answered OK.
 *
 * Threads: everything here on the loop thread but the callbacks (writer
 * thread) and the reads (pool threads). Ownership: a lithd_dq is
 * lithd_dq_start's, freed by lithd_dq_free; requests are the caller's until
 * their callback ran.
 */
#ifndef LITHD_DQ_H
#define LITHD_DQ_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "lith.h"
#include "schema.h"
#include "sqljson.h"
#include "writer.h"

/* Reads running on the leader at once (each its own connection). */
#define LITHD_DQ_READERS 4

/* Result codes. */
enum { LITHD_DQ_OK = 0, LITHD_DQ_ERROR = 1, LITHD_DQ_FULL = 2 };

typedef struct lithd_dq lithd_dq;

typedef struct lithd_dq_options {
  const char *addresses; /* --dqlite: "host:port,..." (copied) */
  const char *database;  /* --dqlite-db (copied) */
  int failover_ms;       /* how long to look for a leader; <= 0: 10000 */
  int max_batch;         /* <= 0: the writer's default */
  int max_queue;         /* commands in the writer at once; <= 0: 10000 */
} lithd_dq_options;

/* One command (or read) on its way; the caller's, filled by the caller:
 * batch, result (where the run's result goes: the caller frees it), cb,
 * data. rc (a lith code) and errmsg are the outcome in cb, on the loop. */
typedef struct lithd_dq_req lithd_dq_req;
struct lithd_dq_req {
  lithd_batch *batch;
  lithd_result **result;
  void (*cb)(lithd_dq_req *r);
  void *data;
  int rc;
  char errmsg[LITH_ERRMSG_MAX];
  /* private */
  lith__dqw_req w;
  uv_work_t work;
  lithd_dq *dq;
  lithd_dq_req *next;
};

/* Apply schema (may be NULL or empty) through the cluster, then start the
 * writer and the loop's wake-up. LITHD_DQ_OK, or _ERROR with err. */
int lithd_dq_start(const lithd_dq_options *o, const lithd_schema *schema, uv_loop_t *loop, lithd_dq **out,
                   char *err, size_t errsz);

/* Submit a write (LITHD_DQ_OK: cb will run), or LITHD_DQ_FULL when
 * max_queue commands are in the writer (cb will not run). */
int lithd_dq_submit(lithd_dq *dq, lithd_dq_req *r);

/* Run a read on the thread pool (cb runs on the loop). LITHD_DQ_OK, or
 * _ERROR (cb will not run). */
int lithd_dq_read(lithd_dq *dq, lithd_dq_req *r);

/* {"commands":..,"batches":..,...} of the writer (malloc'd). */
char *lithd_dq_stats_json(lithd_dq *dq);

/* Stop: the writer runs what is queued and answers it (every accepted
 * command's cb runs, on this thread, before the call returns), then the
 * wake-up closes on the loop's next turn. */
void lithd_dq_stop(lithd_dq *dq);

/* After the loop ended: free (NULL is fine). */
void lithd_dq_free(lithd_dq *dq);

#endif /* LITHD_DQ_H */
