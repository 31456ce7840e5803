/*
 * lithd hrana_ws — Hrana over WebSocket (what @libsql/client speaks for
 * ws:// URLs, and libsql-client-go, Python's libsql-client): the
 * subprotocols hrana1, hrana2 and hrana3 in their JSON encoding (Protobuf's
 * hrana3-protobuf is never chosen: a client offering it offers JSON too),
 * on GET / (the default database) and GET /v1/db/NAME/.
 *
 *   client                            server
 *   hello {jwt}                   ->  hello_ok | hello_error (then close)
 *   request {request_id, request} ->  response_ok {request_id, response}
 *                                     | response_error {request_id, error}
 *
 * The requests: open_stream, close_stream, execute, batch; since hrana2
 * sequence, describe, store_sql, close_sql (stored SQL is the
 * connection's, a request's sql_ids resolved when it arrives); since hrana3 get_autocommit, open_cursor, fetch_cursor,
 * close_cursor. A stream is a stream of hrana_http.c's table held by the
 * connection (hrana_int.h): the same transactions, per-address share and
 * answer budget as over HTTP; the requests of one stream run in order, one
 * at a time, those of different streams side by side. The connection's
 * bounds: its streams (LITHD_HRANA_WS_STREAMS), its cursors, its stored SQL
 * (hrana.h's), requests received and not yet answered
 * (LITHD_HRANA_WS_PENDING: past it a request is refused at once), a
 * message (--max-body), what waits for a slow reader (the HTTP layer's
 * stream buffer), and no message for --stream-idle-ms (120 s by default
 * here). A connection that ends rolls back what its streams left open.
 *
 * Threads: the loop thread. Ownership: a connection's state is its own,
 * freed when it closes.
 */
#ifndef LITHD_HRANA_WS_H
#define LITHD_HRANA_WS_H

#include "http.h"
#include "server.h"

#define LITHD_HRANA_WS_STREAMS 64
#define LITHD_HRANA_WS_CURSORS 16
#define LITHD_HRANA_WS_PENDING 128
#define LITHD_HRANA_WS_IDLE_MS 120000

/* The handler of GET / and GET /v1/db/NAME/ (arg: the lithd_dbsrv): a
 * WebSocket handshake is gated (lithd_admit_handshake) and upgraded; any
 * other request is answered 426. */
int lithd_hrana_ws(lith_http_req *req, void *arg);

#endif /* LITHD_HRANA_WS_H */
