/*
 * lithd hrana_int — what Hrana over WebSocket (hrana_ws.c) uses of the
 * streams of hrana_http.c, so that both roads share one table of streams,
 * one per-address share, one answer budget and one way to run a request
 * (the pipeline's), and no rule is written twice.
 *
 * A WebSocket stream is a stream of the table that a connection holds:
 * it carries no baton (no pipeline can name it), the idle sweep leaves it
 * alone (the connection's own idle bound does not), and it ends with the
 * connection (lithd_hrana_ws_close: what it left open is rolled back), or
 * before, as any stream, when the table is full and it is the one idle
 * the longest with no transaction: closed for a newcomer. A
 * request on it runs as a pipeline of one request on that stream, its
 * transaction kept between requests as a baton's stream keeps it.
 *
 * Threads: the loop thread. Ownership: as each function says.
 */
#ifndef LITHD_HRANA_INT_H
#define LITHD_HRANA_INT_H

#include "hrana.h"
#include "server.h"

typedef struct hr_pipe_ws lithd_hrana_wsstream;

/* The answer to a request run with lithd_hrana_ws_run: entry[0..len) is
 * the pipeline's entry for it (lithd_hrana_ws_response makes the
 * WebSocket's message of it), valid during the call; *charge is what it
 * holds of the answer budget (its results' shares): the callback may take
 * it (set it to 0) and give it back (lithd_answer_budget_release) once
 * the message made of it has left, as an HTTP answer holds its share
 * until sent; what it leaves is given back after the call. The callback
 * may run the stream's next request, or close the stream. */
typedef void (*lithd_hrana_ws_done)(void *arg, const char *entry, size_t len, size_t *charge);

/* A stream of d for a connection from `peer` (its address without the
 * port: the share it counts against). 0 with *out (the caller's until
 * lithd_hrana_ws_close), or -1 with *e: STREAMS_EXHAUSTED (the table, the
 * address's share, the budget) or SERVER_SHUTTING_DOWN. */
int lithd_hrana_ws_open(lithd_server *s, lithd_dbsrv *d, const char *peer, lithd_hrana_wsstream **out,
                        lithd_hrana_error *e);

/* Run p->requests[0] (an execute, batch, sequence, describe or
 * get_autocommit: lithd_hrana_kind) on w, its body len bytes, Hrana
 * version 2 or 3 (the outcome's shape), access what the connection's
 * credentials grant (lithd_access), `sqls` stored SQL its sql_ids name
 * (read while the request's batch is made, at the start; NULL: none,
 * hrana_ws.c resolves them on arrival, lithd_hrana_ws_resolve). Takes p in
 * every case. 0: cb(arg, ...) comes once, maybe before this returns; -1
 * with *e: nothing ran and cb never comes (the stream is closed by the
 * stop, or for a newcomer: STREAM_EXPIRED; the budget has no room, a
 * request of w still runs). */
int lithd_hrana_ws_run(lithd_hrana_wsstream *w, lithd_hrana_pipeline *p, size_t len, int version, int access,
                       lithd_hrana_sqls *sqls, lithd_hrana_ws_done cb, void *arg, lithd_hrana_error *e);

/* 1 while a request of w runs. */
int lithd_hrana_ws_busy(const lithd_hrana_wsstream *w);

/* Close w: its transaction rolled back, its slot free. A request still
 * running ends first, and its answer is dropped (cb never comes). Frees
 * w: do not touch it after. */
void lithd_hrana_ws_close(lithd_hrana_wsstream *w);

#endif /* LITHD_HRANA_INT_H */
