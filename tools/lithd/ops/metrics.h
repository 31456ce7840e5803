/*
 * lithd metrics — GET /metrics: lith's statistics, lithd's own counts and
 * the process's figures in the Prometheus text format 0.0.4.
 *
 * Conventions (https://prometheus.io/docs/practices/naming/): base units in
 * the names (_seconds, _bytes), _total on every counter, a HELP and a TYPE
 * line before every metric, label sets bounded: responses are counted by
 * route (the paths of lithd's route table, and "other" for whatever no
 * route took: 404, 405, a request refused before routing) and status code.
 * docs/operations.md lists every metric (an example there checks it).
 *
 * What comes from where:
 *   - lith_stats (lith.h): commands, batches, failures, retries, the write
 *     lock found busy, queue depth, the WAL, checkpoints, the time spent in
 *     COMMIT and in checkpoints, histograms of batch size, transaction time
 *     and queue wait. lith keeps fine latency buckets; a coarse Prometheus
 *     bucket only sums the fine ones that lie wholly below its bound, so
 *     every bound is exact, never an estimate.
 *   - lithd itself, on the loop thread: responses by route and code
 *     (lithd_metrics_response, from the HTTP layer's access hook) and the
 *     reads of /v1/query (lithd_metrics_read: how long each waited for a
 *     thread and a reader, and how long it ran).
 *   - the HTTP layer (http.h): connections, requests pending.
 *   - the process (/proc/self, getrusage): resident memory, open
 *     descriptors, CPU time, start time.
 *   - a database on a dqlite cluster (lithd --dqlite): who leads and the
 *     failovers (lithd_metrics_cluster, filled by the caller from the
 *     store before each write), as lith_dqlite_* series with its db label:
 *     lith_dqlite_leader_known (0/1), lith_dqlite_leader_info{address,id}
 *     1 (only while a leader is known: an info series, the labels say
 *     who), lith_dqlite_failovers_total, lith_dqlite_reruns_total,
 *     lith_dqlite_last_failover_wait_seconds. A database on a local file
 *     has none of them.
 *
 * Several databases: every series of one database (lith_stats, its
 * reads) carries the label db="NAME", one database's series after the
 * other's under one HELP and TYPE (the format wants a metric's series
 * together); the HTTP and process figures are the process's, unlabelled.
 * A lithd of one database labels its series db="main" (or its name), so
 * that a dashboard works unchanged when a second database comes.
 *
 * Threads: everything here runs on the loop thread (lith_stats_get is the
 * one call that reads other threads' figures, and it may).
 */
#ifndef LITHD_METRICS_H
#define LITHD_METRICS_H

#include <stdint.h>

#include "buf.h"
#include "http.h"
#include "lith.h"

#define LITHD_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* The statuses counted per route: LITH_HTTP_STATUS_MIN..MAX; anything
 * else (0: nothing sent) counts as code "0". */
#define LITHD_METRICS_CODES (LITH_HTTP_STATUS_MAX - LITH_HTTP_STATUS_MIN + 2)
/* Bounds of lithd's own latency histograms (seconds), +Inf aside. */
#define LITHD_METRICS_LE 16

/* A latency histogram: count[k] holds the observations in
 * (le[k-1], le[k]] (k == LITHD_METRICS_LE: above the last bound). */
typedef struct lithd_hist {
  uint64_t count[LITHD_METRICS_LE + 1];
  uint64_t sum_ns;
} lithd_hist;

/* A database on a dqlite cluster: what the store says of it (store.h's
 * lithd_store_stats), copied in by the caller before each write. */
typedef struct lithd_metrics_cluster {
  int on;           /* 1: the database is on a cluster (its lith_dqlite_* series are written) */
  char leader[256]; /* the leader's address, "" none known (the store's, printable) */
  uint64_t leader_id;
  uint64_t failovers, reruns;
  int64_t failover_wait_ms; /* the last failover's wait; 0 none yet */
} lithd_metrics_cluster;

/* One database's part. */
typedef struct lithd_metrics_db {
  /* Set by the caller before lithd_metrics_write (read only here). */
  const char *name;              /* the value of its db label; caller's */
  lith *db;                      /* caller's */
  int queue_capacity;            /* lith_options.queue_capacity in use */
  int readers;                   /* lith_options.readers in use */
  int64_t page_size;             /* the database's page size (the WAL in bytes); 0: unknown */
  lithd_metrics_cluster cluster; /* (lithd --dqlite) filled before each write */

  /* Kept by lithd_metrics_read (zero it before the first). */
  lithd_hist read_wait;  /* /v1/query: arrival to a reader running it */
  lithd_hist read_run;   /* /v1/query: the read itself */
  uint64_t reads_failed; /* reads answered with an error */
} lithd_metrics_db;

typedef struct lithd_metrics {
  /* Set by the caller before lithd_metrics_write (read only here). */
  const lithd_metrics_db *const *dbs; /* n_dbs databases; caller's */
  size_t n_dbs;
  const lith_http_server *http; /* caller's; NULL: the HTTP figures read 0 */
  double start_time;            /* Unix time lithd started, if /proc/self/stat cannot say */

  /* Kept by lithd_metrics_init / _response. */
  size_t n_routes;     /* labels in route[], sorted, "other" among them */
  const char **route;  /* the caller's strings and "other" (a literal); malloc'd array */
  uint64_t *responses; /* n_routes x LITHD_METRICS_CODES, malloc'd */
  size_t other;        /* the index of "other" in route[] */
} lithd_metrics;

/* Zero what *m counts (the caller's settings stay), then take the route
 * labels: the distinct strings of paths[0..n) (the caller's, kept by
 * pointer: they must outlive m) and "other", sorted, so that counting a
 * response is a binary search however many databases have routes.
 * Returns 0, or -1 (out of memory). */
int lithd_metrics_init(lithd_metrics *m, const char *const *paths, size_t n);

/* Count one response: `route` (NULL or a path not among the labels:
 * "other") and `status`. */
void lithd_metrics_response(lithd_metrics *m, const char *route, int status);

/* Count one read of /v1/query on database d: wait_ns from its arrival to
 * a reader running it, run_ns the read itself; failed: answered with an
 * error. */
void lithd_metrics_read(lithd_metrics_db *d, int64_t wait_ns, int64_t run_ns, int failed);

/* Append every metric to b. A failure (out of memory) sticks in
 * b->failed, as every write to a lithd_buf. */
void lithd_metrics_write(lithd_buf *b, const lithd_metrics *m);

/* Free what lithd_metrics_init took (m may be zeroed and never
 * initialised). */
void lithd_metrics_free(lithd_metrics *m);

#endif /* LITHD_METRICS_H */
