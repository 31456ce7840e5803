/*
 * lithd server — the HTTP routes of lithd, mapped onto its databases'
 * stores.
 *
 * Design: main.c owns the loop and the HTTP server, database.c each
 * database's store; this module only registers routes on that server and
 * turns each request into work for one database's store. Each database NAME has every route below under /v1/db/NAME/
 * (/v1/db/NAME/do, ...); the routes without the prefix serve the default
 * database (the only one, or --default):
 *   POST /v1/do     one command (lithd_store_write), answered from its
 *                   callback after the commit;
 *   POST /v1/query  one read on one snapshot (lithd_store_read), off the
 *                   loop, answered from its callback;
 *   POST /v1/batch  {"commands": [...]}: each command its own command
 *                   (own savepoint), all submitted together, each with its
 *                   own outcome; answered once the last one is done;
 *   POST /v1/commands/NAME  a named command (commands.h), run as /v1/do;
 *   GET  /v1/commands       the named commands and their parameters;
 *   POST /v1/backup {"dest": "NAME"}: lith_backup_new into --backup-dir, on
 *                   the thread pool; GET /v1/backup[?format=sql]: a snapshot
 *                   downloaded (backup_http.h);
 *   GET  /v1/stats  the store's counters as JSON;
 *   GET  /metrics   the same, lithd's and the process's figures, in the
 *                   Prometheus text format 0.0.4 (metrics.h);
 *   GET  /healthz   {"ok":true}, never behind the token.
 * Everything runs on the loop thread, but the reads of /v1/query and the
 * backups. The routes know a database only through its store (store.h):
 * where its data live (a local file, a dqlite cluster) is the store's
 * business; a store without a local file answers /v1/backup 501.
 *
 * The pieces: the routes are one table in server.c; commands and reads go
 * to the database's store (store.h); /metrics is written by metrics.h;
 * the SQL clients may send is checked by sql/ (its authorizer,
 * lithd_authorizer, goes on every connection).
 */
#ifndef LITHD_SERVER_H
#define LITHD_SERVER_H

#include "commands.h"
#include "http.h"
#include "lith.h"
#include "metrics.h"
#include "sqljson.h"
#include "store.h"

typedef struct lithd_server lithd_server;
typedef struct lithd_dbsrv lithd_dbsrv;

/* A read of one database on libuv's pool (lithd_read_submit). The pool is
 * the process's, every database's (main.c sizes it (readers + 1) x
 * databases). A read whose database has every reader busy would block a
 * pool thread inside lith_read until one is free, and enough of them would
 * hold every thread, so that another database's reads waited behind them.
 * So each database sends at most its readers' worth of reads to the pool
 * (reads_max); the rest wait on the loop in its own FIFO, and the end of
 * one of its reads starts the next: one database's slow reads never take
 * another's threads. Every route that reads (/v1/query, Hrana's) goes
 * through it. */
typedef struct lithd_read lithd_read;
struct lithd_read {
  lithd_store_req sr;           /* the caller fills sr.batch and sr.http (a read
                                   whose client left while it waited is not run) */
  void (*done)(lithd_read *rd); /* once, on the loop, sr.rc and sr.result set (a read
                                   that never ran: sr.t_start_ns 0, sr.errmsg says
                                   why); it may free rd */
  /* Internal. */
  lithd_read *next;
  lithd_dbsrv *d;
  int64_t t_submit; /* CLOCK_MONOTONIC ns */
};

/* One database as the routes serve it: the argument of its routes. main.c
 * (database.h) fills the public fields; everything a request of this
 * database needs is here or in its server, so a request costs no lookup by
 * name (each route is registered with its database's lithd_dbsrv). */
struct lithd_dbsrv {
  lithd_server *srv;              /* the server it belongs to; set by lithd_server_start */
  const char *name;               /* the NAME of /v1/db/NAME/...; caller's */
  lithd_store *store;             /* where its data live; caller's, outlives the server */
  lith *db;                       /* the store's local file (lithd_store_lith): backups and
                                     downloads; NULL: none, /v1/backup answers 501 */
  const lithd_commands *commands; /* NULL: none; caller's, outlives the server */
  const char *db_path;            /* the database file (downloads are made beside it); caller's */
  /* /metrics: set metrics.queue_capacity, .readers, .page_size (metrics.h);
   * lithd_server_start sets the rest. */
  lithd_metrics_db metrics;

  /* Internal: this database's reads on libuv's pool (at most reads_max,
   * its readers) and those waiting for room, first in first out (server.c,
   * POST /v1/query). */
  int reads_running, reads_max;
  lithd_read *reads_head, *reads_tail;
};

struct lithd_server {
  uv_loop_t *loop;                 /* caller's; the loop of http (for uv_queue_work) */
  lith_http_server *http;          /* caller's */
  lithd_dbsrv **dbs;               /* n_dbs >= 1 databases; caller's, outlive the server */
  size_t n_dbs;                    /* */
  lithd_dbsrv *dflt;               /* the database of /v1/do, /v1/query, ...: the only one, or
                                --default; NULL: those routes answer 404 naming the databases */
  const char *token;               /* NULL: no bearer token required; caller's */
  struct lithd_jwt_keys *jwt_keys; /* --auth-jwt-key-file's (jwt.h); NULL: no JWTs; caller's */
  lithd_limits limits;             /* copied into every batch */
  int only_named;                  /* refuse /v1/do and /v1/batch */
  const char *allow_origins;       /* comma list of Origin values allowed ("*": any); NULL: none; caller's */
  const char *allow_hosts;         /* comma list of further Host names on token-less loopback; caller's */
  const char *backup_dir;          /* where /v1/backup writes (a directory); NULL: off; caller's */
  int64_t tx_idle_ms, tx_max_ms;   /* interactive transactions' bounds (store.h); 0: defaults */
  int64_t stream_idle_ms;          /* a Hrana stream idle longer is closed; 0: default */
  /* /metrics: set metrics.start_time (metrics.h); lithd_server_start sets
   * the rest. */
  lithd_metrics metrics;

  /* Internal: the route paths lithd_server_start made (the metrics labels
   * point at them). */
  char **paths;
  size_t n_paths;
  int downloads;                 /* GET /v1/backup running, of every database (backup_http.c) */
  int posts;                     /* POST /v1/backup running, of every database (backup_http.c) */
  struct lithd_hrana_srv *hrana; /* Hrana's streams (hrana_http.c) */
};

/* Register every route of lithd on s->http: each database's under
 * /v1/db/NAME/ with its lithd_dbsrv as their argument, the unprefixed ones
 * (/v1/do, ...) with s->dflt's, /metrics and /healthz with s (everything
 * must outlive the HTTP server), and hook the HTTP layer's access report (a log line per request at debug, the
 * responses of /metrics by route and code). The public fields must be set.
 * Returns a LITH_HTTP_ code. */
int lithd_server_start(lithd_server *s);

/* Run rd->sr.batch on d's store as a read, through d's FIFO. 0: rd->done
 * will run; else the store's refusal (LITH_CLOSED, ...), and done will not. */
int lithd_read_submit(lithd_dbsrv *d, lithd_read *rd);

/* A reader of d for a transaction on a snapshot (store.h,
 * LITHD_TX_SNAPSHOT) that holds it for its whole life: 1 if taken (d's
 * reads then go to one reader fewer, so none of them waits inside the pool
 * for the one held), 0 if d would keep none for its other reads (with a
 * single reader, it is taken while free: d's reads wait for it). Given
 * back with lithd_read_slot_give, which starts what waits. */
int lithd_read_slot_take(lithd_dbsrv *d);
void lithd_read_slot_give(lithd_dbsrv *d);

/* What a client's credentials grant (lithd_access). */
enum {
  LITHD_ACCESS_NONE = 0, /* refused: no credentials where some are needed, or wrong ones */
  LITHD_ACCESS_READ = 1, /* reads only: every write is refused (a read-only JWT) */
  LITHD_ACCESS_FULL = 2  /* everything */
};

/* The one place credentials are judged, for every road in (HTTP routes,
 * Hrana over HTTP and over WebSocket, whose hello carries the token): what
 * `token` grants on database d. token: the bearer token's text as the
 * client sent it (without "Bearer "), NULL or "" when none was sent;
 * caller's. d: the database the request is for (NULL: a route of no
 * database, such as /metrics). With no --token and no JWT key configured,
 * LITHD_ACCESS_FULL. Else the static --token (compared in constant time)
 * grants FULL, a JWT verified with --auth-jwt-key-file grants what its
 * claims say (sqld's: full or read-only, per database); anything else is
 * LITHD_ACCESS_NONE with msg (cap bytes) saying why, in words a client may
 * be shown (never the token). */
int lithd_access(const lithd_server *s, const lithd_dbsrv *d, const char *token, char *msg, size_t cap);

/* How a gate answers a refusal (status, message): lithd's JSON error, or a
 * protocol's own (Hrana's). It completes req. */
typedef void (*lithd_refuse_fn)(lith_http_req *req, int status, const char *msg);

/* lithd_admit, refusals answered through refuse. */
int lithd_admit_as(lithd_server *s, const lithd_dbsrv *d, lith_http_req *req, lithd_refuse_fn refuse);

/* lithd_admit_as for a route that reads its body as JSON whatever its
 * Content-Type says, as sqld reads Hrana's (libSQL clients send
 * text/plain or none): a POST's Content-Type is judged only when it
 * carries Origin (a browser's; docs/security.md says why that is safe).
 * The token, Origin and Host are judged as on every route. */
int lithd_admit_by_content(lithd_server *s, const lithd_dbsrv *d, lith_http_req *req, lithd_refuse_fn refuse);

/* The gate of a WebSocket handshake (Hrana's, hrana_ws.c): Origin and Host
 * as on every route, and an Authorization header's token if it carries
 * one; without one it returns LITHD_ACCESS_FULL and the caller judges the
 * token of the protocol's first message (lithd_access) before anything
 * else. */
int lithd_admit_handshake(lithd_server *s, const lithd_dbsrv *d, lith_http_req *req, lithd_refuse_fn refuse);

/* A copy of the token of req's "Authorization: Bearer <token>" (malloc'd,
 * the caller's), or NULL when it carries none (or no memory): what a
 * WebSocket keeps to judge again (lithd_access) with every request, as
 * HTTP judges every request's. */
char *lithd_bearer_dup(lith_http_req *req);

/* The gate of every route (credentials, Origin, Host, a POST's
 * Content-Type) of database d (NULL: a route of none): what the request's
 * credentials grant on d (lithd_access: LITHD_ACCESS_READ or
 * LITHD_ACCESS_FULL) when it may go on, else 0 (LITHD_ACCESS_NONE) and it
 * was answered. A route that writes hands the grant on
 * (lithd_store_req.may_write: only LITHD_ACCESS_FULL writes). For the
 * handlers outside server.c (backup_http.c). */
int lithd_admit(lithd_server *s, const lithd_dbsrv *d, lith_http_req *req);

/* Answer *e as JSON with its HTTP status (a fixed 500 when out of memory);
 * completes req. */
void lithd_respond_error(lith_http_req *req, const lithd_error *e);

/* The stop begins: every database's store refuses what waits for room
 * and later writes (lithd_store_stop). */
void lithd_server_stop(lithd_server *s);

/* Free what lithd_server_start took, after the HTTP server was destroyed
 * (its access reports count into s). s may never have been started. */
void lithd_server_free(lithd_server *s);

#endif /* LITHD_SERVER_H */
