/*
 * lithd server — the HTTP routes of lithd, mapped onto one lith handle.
 *
 * Design: main.c owns the loop, the lith handle, the lith_uv bridge and the
 * HTTP server; this module only registers routes on that server and turns
 * each request into lith work:
 *   POST /v1/do     one lith command (lithd_batch_run) through lith_uv_submit,
 *                   answered from the bridge callback after the commit;
 *   POST /v1/query  lithd_batch_read inside lith_read, on libuv's thread
 *                   pool (uv_queue_work), answered from the after-work
 *                   callback;
 *   POST /v1/batch  {"commands": [...]}: each command its own lith command
 *                   (own savepoint), all submitted together, each with its
 *                   own outcome; answered once the last one is done;
 *   POST /v1/commands/NAME  a named command (commands.h), run as /v1/do;
 *   GET  /v1/commands       the named commands and their parameters;
 *   POST /v1/backup {"dest": "/abs/path"}: lith_backup on the thread pool;
 *   GET  /v1/stats  lith_stats_get as JSON;
 *   GET  /metrics   the same and the HTTP layer's counters, in Prometheus
 *                   text format 0.0.4 (counters, gauges, histograms of batch
 *                   size, transaction time and queue wait);
 *   GET  /healthz   {"ok":true}, never behind the token.
 * Everything runs on the loop thread, but the reads of /v1/query and the
 * backups.
 *
 * Commands are submitted in chunks: every 16 parsed, and what is left at
 * the end of the loop iteration that parsed it (a uv_check_t). The writer
 * then finds several together and commits them as one batch, without
 * idling while the loop parses the rest of a busy iteration.
 *
 * Overload: when lith's queue is full, a command waits here, in a FIFO on
 * the loop, until the writer makes room or queue_wait_ms passed (then 503
 * with Retry-After). While anything waits, new commands queue behind it, so
 * the wait is first come, first served. What waits is bounded in bytes
 * (PARK_MAX_BYTES of request bodies): past that a request gets 503 at once.
 */
#ifndef LITHD_SERVER_H
#define LITHD_SERVER_H

#include "http.h"
#include "lith.h"
#include "lith_uv.h"
#include "commands.h"
#include "sqljson.h"

typedef struct lithd_server {
  uv_loop_t *loop;          /* caller's; the loop of http (for uv_queue_work) */
  lith *db;                 /* caller's; outlives the server */
  lith_uv *bridge;          /* caller's; closed only after the HTTP server stopped */
  lith_http_server *http;   /* caller's */
  const char *token;        /* NULL: no bearer token required; caller's */
  lithd_limits limits;      /* copied into every batch */
  const lithd_commands *commands; /* NULL: none; caller's, outlives the server */
  int only_named;           /* refuse /v1/do and /v1/batch */
  const char *allow_origins; /* comma list of Origin values allowed ("*": any); NULL: none; caller's */
  const char *allow_hosts;   /* comma list of further Host names on token-less loopback; caller's */
  const char *backup_dir;    /* where /v1/backup writes (a directory); NULL: off; caller's */
  int64_t queue_wait_ms;    /* how long a command waits for room in the queue */

  /* Internal: the commands waiting for room (see above). */
  struct lithd_park *park_head, *park_tail;
  size_t park_bytes;
  unsigned park_new;        /* parked since the last chunk went */
  uv_timer_t park_timer;
  uv_check_t park_check;    /* submits what the loop iteration parsed */
  int started, stopped;
} lithd_server;

/* The SQLite authorizer lithd puts on the write connection
 * (lith_options.authorizer; ctx unused): clients' SQL may not ATTACH or
 * DETACH files, assign a PRAGMA (synchronous, journal_mode, writable_schema,
 * foreign_keys: settings every other client depends on) or call
 * load_extension. PRAGMAs that only read, with or without an argument
 * (table_info(t), integrity_check), stay allowed. */
int lithd_authorizer(void *ctx, int action, const char *a, const char *b, const char *c,
                     const char *d);

/* Register every route of lithd on s->http, with `s` as their argument (it
 * must outlive the HTTP server), and start the server's timer on s->loop.
 * The public fields must be set. Returns a LITH_HTTP_ code. */
int lithd_server_start(lithd_server *s);

/* Answer every waiting command with 503 (shutting down) and close the
 * timer; call it when the stop begins, before the bridge is closed. Later
 * commands are refused at once. */
void lithd_server_stop(lithd_server *s);

#endif /* LITHD_SERVER_H */
