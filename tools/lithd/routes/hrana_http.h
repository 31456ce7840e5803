/*
 * lithd hrana_http — the Hrana over HTTP routes and their streams
 * (request/hrana.h is the format):
 *
 *   GET  /v2, /v3                200: the version is spoken (JSON)
 *   POST /v2/pipeline, /v3/pipeline
 *                                {"baton", "requests"} -> {"baton",
 *                                "base_url": null, "results"}
 * and the same under /v1/db/NAME/ for each database (the client resolves
 * "v2/pipeline" against a base URL ending in '/'); the unprefixed ones
 * serve the default database.
 *
 * A stream is what a baton names: the database it belongs to, its stored
 * SQL, when it was last used. A pipeline that ends with close (what
 * client.execute() and client.batch() send) never takes a slot; one that
 * leaves its stream open takes one of LITHD_HRANA_STREAMS, and the answer
 * carries a baton: the slot, a generation and 128 random bits, all new on
 * every answer, compared in constant time. A stream idle for
 * LITHD_HRANA_IDLE_MS is closed (STREAM_EXPIRED afterwards). The requests
 * of a pipeline run one after another; each one that runs SQL is a write
 * (one command) or a read (the database's read FIFO, server.h) of its
 * database's store, so the token, limits, authorizer, guard, metrics and
 * logs are /v1/do's and /v1/query's.
 *
 * Threads: the loop thread. Ownership: the streams are the server's
 * (lithd_hrana_start .. lithd_hrana_free).
 */
#ifndef LITHD_HRANA_HTTP_H
#define LITHD_HRANA_HTTP_H

#include "http.h"
#include "server.h"

#define LITHD_HRANA_STREAMS 1024
/* Of them, what one client address may hold (its share). */
#define LITHD_HRANA_PEER_STREAMS (LITHD_HRANA_STREAMS / 4)
#define LITHD_HRANA_IDLE_MS 10000

/* Set up s's streams (their timer on s->loop). Returns LITH_HTTP_OK or
 * LITH_HTTP_NOMEM. */
int lithd_hrana_start(lithd_server *s);

/* The handlers, registered with a database's lithd_dbsrv as argument. */
int lithd_hrana_get(lith_http_req *req, void *arg);
int lithd_hrana_post(lith_http_req *req, void *arg);

/* The stop: close the timer; later pipelines are refused. */
void lithd_hrana_stop(lithd_server *s);

/* Free the streams (after the loop ended; a server never started: nothing). */
void lithd_hrana_free(lithd_server *s);

#endif /* LITHD_HRANA_HTTP_H */
