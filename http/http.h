/*
 * lith_http — the HTTP layer shared by lithd and examples/kanban.
 *
 * Why a layer of our own over h2o: both programs need the same few things
 * (routes by method and path, a JSON error shape, bounded request bodies,
 * answers that come later from a libuv callback, server-sent events with a
 * bound on what a slow client can make us queue, bearer tokens, a graceful
 * stop, counters for /metrics; for lithd, WebSockets), and h2o's request
 * lifetime rules are easy to get wrong: its h2o_req_t vanishes when the
 * client leaves (and after a WebSocket upgrade). This layer hands
 * the application a handle whose lifetime the application controls instead.
 *
 * h2o 2.2.5 (libuv flavour) does the protocol work: HTTP/1.1 keep-alive and
 * pipelining, chunked bodies, HTTP/2 over cleartext both by "Upgrade: h2c" and
 * by prior knowledge, and TLS (1.2 and 1.3, HTTP/2 chosen by ALPN; tls.c)
 * when the options name a certificate and a key. An HTTP/1 request whose body length two readers could
 * take differently (more than one Content-Length, Content-Length with
 * Transfer-Encoding, a Transfer-Encoding other than chunked, a header line
 * folded or ended by a bare LF) is refused with a JSON 400 and its connection
 * closed before any handler runs, so no part of it is read as a request of
 * its own (request smuggling). An h2c upgrade is carried out by h2o before
 * that check: behind a proxy that passes "Upgrade" on, set http2 to 0.
 *
 * Conventions, as in lith.h:
 *   - every call returns an int result code (LITH_HTTP_OK is 0);
 *     lith_http_errstr() describes it in a short phrase, as lith_errstr()
 *     does, and lith_http_errmsg() says what went wrong this time;
 *   - handles are opaque; the server comes in a create/destroy pair, a
 *     request handle is released by the call that completes it;
 *   - each function says who owns every pointer it takes or returns.
 *
 * Threads: everything here runs on the thread of the server's uv loop (from
 * the loop's callbacks, or before/after uv_run on that thread). Nothing is
 * locked.
 *
 * A request's life:
 *   1. A handler registered with lith_http_route() is called with a
 *      lith_http_req. The request (method, path, query, headers, body, peer)
 *      has been copied into the handle: every pointer the accessors return
 *      stays valid until the handle is completed, even after the client left.
 *   2. The handler answers at once (lith_http_respond*, then returns
 *      LITH_HTTP_DONE), or returns LITH_HTTP_PENDING and keeps the handle: the
 *      application now owns it and must complete it exactly once, later, from
 *      any loop callback — with lith_http_respond* (or lith_http_stream_end
 *      for a stream). Completing releases the handle: do not touch it after.
 *   3. If the client goes away (or the server stops) while the application
 *      holds the handle, completing still works: it sends nothing and returns
 *      LITH_HTTP_GONE. lith_http_on_gone() asks to be told at once instead.
 */
#ifndef LITH_HTTP_H
#define LITH_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Result codes ------------------------------------------------------ */

enum {
  LITH_HTTP_OK = 0,
  LITH_HTTP_ERROR = 1,     /* a system call failed; lith_http_errmsg() says which */
  LITH_HTTP_MISUSE = 2,    /* a bad argument, or a call in the wrong state */
  LITH_HTTP_NOMEM = 3,     /* out of memory */
  LITH_HTTP_ADDRINUSE = 4, /* the address, port or socket path is already served */
  LITH_HTTP_GONE = 5,      /* the client went away (or the server ended the
                              exchange) before this call: nothing was sent */
  LITH_HTTP_FULL = 6,      /* the stream's buffer would have passed its bound:
                              the stream was closed (see lith_http_stream_write) */
  LITH_HTTP_STOPPING = 7   /* the server is stopping or stopped */
};

/* A short human phrase for a result code ("client gone", "stream buffer
 * full"), worded like lith_errstr()'s, for messages such as "listen: %s:
 * %s", errstr then errmsg; "unknown error" for a code not listed above. A
 * static string, never NULL. Not an identifier: the "code" of the JSON
 * errors sent to clients comes from the HTTP status (lith_http_respond_error). */
const char *lith_http_errstr(int rc);

/* This thread's last error message from a lith_http call. Owned by the
 * layer, valid until this thread's next lith_http call that fails. */
const char *lith_http_errmsg(void);

/* The reason phrase of an HTTP status ("Not Found"): a static string. */
const char *lith_http_reason(int status);

/* ---- Server ------------------------------------------------------------- */

typedef struct lith_http_server lith_http_server;
typedef struct lith_http_req lith_http_req;

typedef struct lith_http_options {
  size_t max_body;             /* largest request body accepted, bytes. A larger one
                           is refused before any handler runs: HTTP/1 gets 413
                           with a JSON error as soon as Content-Length says so
                           (or when a chunked body passes it); HTTP/2 gets its
                           stream reset (REFUSED_STREAM, h2o 2.2.5's way).
                           Default 1 MiB */
  size_t stream_buffer;        /* per stream, the most bytes waiting for a slow client
                           beyond the one write in flight; default 256 KiB */
  int http2;                   /* LITH_HTTP_H2_ON: HTTP/2 over cleartext ("Upgrade:
                           h2c" and prior knowledge) and over TLS (ALPN "h2");
                           LITH_HTTP_H2_TLS: over TLS only (cleartext is
                           HTTP/1.1); LITH_HTTP_H2_OFF: HTTP/1.1 only.
                           Default LITH_HTTP_H2_ON */
  unsigned request_timeout_ms; /* HTTP/1: time to receive a request and
                           idle keep-alive time; HTTP/2: idle time; TLS: time
                           to complete the handshake. Default 10000 */
  unsigned write_timeout_ms;   /* a connection with bytes waiting to be written
                           that takes none of them for this long (its client
                           stopped reading, the kernel's buffers are full) is
                           closed: reset on TCP, so the kernel drops what it
                           held too. What it carried ends as if the client had
                           left (held requests and streams get on_gone, a
                           stream is cut short). h2o 2.2.5 has no write
                           timeout of its own: without one such a client holds
                           its request, its stream and what waits for it
                           forever. A connection with nothing to write (an idle
                           event stream, a request being answered later) is
                           never closed by it. Looked at every quarter of it (at
                           most every second), so the close comes between
                           write_timeout_ms and write_timeout_ms + 2 x that
                           period after the last byte was taken. 0: never.
                           Default 30000 */
  const char *server_name;     /* the Server header; default "lith". Copied. */
  const char *tls_cert_file;   /* TLS: a PEM file with the certificate, then the
                           chain up to (not including) the CA. With
                           tls_key_file, every TCP listener speaks TLS 1.2 or
                           1.3 only (a Unix socket stays cleartext: it never
                           leaves the machine). Both are loaded by
                           lith_http_server_create, which fails (naming the
                           file) if either is missing or unreadable, not PEM,
                           or if they do not match. A failed handshake
                           (garbage, plain HTTP) closes the connection; one not
                           done within request_timeout_ms too. NULL: none.
                           Read during create only */
  const char *tls_key_file;    /* TLS: a PEM file with the certificate's private key */
} lith_http_options;

enum { LITH_HTTP_H2_OFF = 0, LITH_HTTP_H2_ON = 1, LITH_HTTP_H2_TLS = 2 };

/* Fill *opt with the defaults above. */
void lith_http_options_default(lith_http_options *opt);

/* Create a server on `loop` (the caller's; it must outlive the server). `opt`
 * is read during the call only (NULL: defaults). On LITH_HTTP_OK *out is a
 * server released by lith_http_server_destroy(). The server listens nowhere
 * until lith_http_listen_*. Call it on the loop's thread, outside loop
 * callbacks (as destroy: a failure after h2o's context exists disposes of
 * it, which runs the loop once). Sets SIGPIPE to SIG_IGN if it was SIG_DFL:
 * a write to a client that left must not kill the process. */
int lith_http_server_create(uv_loop_t *loop, const lith_http_options *opt, lith_http_server **out);

/* Listen on TCP `host` ("127.0.0.1", "::1", "0.0.0.0"; a numeric address)
 * and `port` (0: the kernel picks a free one, see lith_http_port). May be
 * called more than once; not after lith_http_server_stop. `host` is read
 * during the call only. */
int lith_http_listen_tcp(lith_http_server *srv, const char *host, int port);

/* Load a new certificate and key (a renewed certificate) as
 * lith_http_server_create loads tls_cert_file and tls_key_file, for the
 * connections accepted from now on; those already open keep what they
 * negotiated. On any error (the same as create's) nothing changes: the
 * old ones go on serving, and lith_http_errmsg() says why.
 * LITH_HTTP_MISUSE for a server created without TLS. The paths are read
 * during the call only. */
int lith_http_tls_reload(lith_http_server *srv, const char *cert_file, const char *key_file);

/* The port the first TCP listener is bound to, or -1 if there is none. */
int lith_http_port(const lith_http_server *srv);

/* Listen on the Unix socket `path`, created with mode 0600 (chmod happens
 * between bind and listen, so no connection is possible before). An existing
 * socket file nobody answers on (a stale one) is replaced; an existing socket
 * someone answers on gives LITH_HTTP_ADDRINUSE; any other kind of file at
 * `path` is left alone and gives LITH_HTTP_ADDRINUSE. The file is removed when
 * the server stops. `path` is copied. */
int lith_http_listen_unix(lith_http_server *srv, const char *path);

/* A handler: runs on the loop thread for each request its route matches.
 * Return LITH_HTTP_DONE once it has completed `req` (a handler that returns
 * DONE without having answered gets a 500 sent for it, and a stream it
 * started is ended), or LITH_HTTP_PENDING to keep `req` and complete it
 * later. */
typedef int (*lith_http_handler)(lith_http_req *req, void *arg);
enum { LITH_HTTP_DONE = 0, LITH_HTTP_PENDING = 1 };

enum { LITH_HTTP_EXACT = 0, LITH_HTTP_PREFIX = 1 };

/* Route requests for `method` ("GET", "POST", ...; compared exactly) and
 * `path`: with LITH_HTTP_EXACT the request path (without the query) must
 * equal `path`; with LITH_HTTP_PREFIX it must begin with it ("/v1/commands/").
 * The most specific matching route for the request's method wins: an exact
 * route over any prefix, a longer prefix over a shorter. A path no route
 * matches gets 404; a path some route matches, but none for this method,
 * gets 405 with an Allow header naming the methods that would be accepted.
 * HEAD goes to the GET route unless a HEAD route exists (the body is never
 * sent; Content-Length stays that of the GET answer). `method` and `path`
 * are copied; `arg` is the caller's, passed to fn. A second route with the
 * same method, path and match is LITH_HTTP_MISUSE. */
int lith_http_route(lith_http_server *srv, const char *method, const char *path, int match,
                    lith_http_handler fn, void *arg);

/* Called once the server has stopped: listeners and connections closed, every
 * on_gone callback delivered. The server may then be destroyed (after uv_run
 * returns, see lith_http_server_destroy). */
typedef void (*lith_http_stopped_cb)(lith_http_server *srv, void *arg);

/* Stop gracefully:
 *   - close the listeners (the Unix socket file is removed) and refuse new
 *     requests on open connections with 503 (HTTP/2: GOAWAY);
 *   - end every stream (server-sent events never end by themselves); their
 *     holders get on_gone. But a stream marked LITH_HTTP_STOP_FINISH
 *     (lith_http_stream_at_stop: a download) goes on, as a request held
 *     does, and is cut at the deadline below;
 *   - close idle connections; requests not yet fully received are dropped;
 *   - let the requests the application holds finish: each connection closes
 *     after its last response;
 *   - after `grace_ms` (0: at once), answer what is still pending with 503
 *     (its holder gets on_gone and LITH_HTTP_GONE when completing), cut the
 *     streams still running (HTTP/1: the connection closes before the body's
 *     end, so a client of a Content-Length body sees it short) and shut
 *     every remaining connection.
 * Then on_stopped(srv, arg) (may be NULL) runs, from the loop, never from
 * within this call. The loop must keep running until then. Returns
 * LITH_HTTP_STOPPING if already called. */
int lith_http_server_stop(lith_http_server *srv, unsigned grace_ms, lith_http_stopped_cb on_stopped,
                          void *arg);

/* Free the server. Call it from the loop's thread but not from inside a loop
 * callback (after uv_run returned): h2o's context teardown runs the loop once
 * itself to free its timers. If the server was not stopped, this stops it
 * with no grace and runs the loop until it has. Request handles the
 * application still held are freed too: complete them before, or never touch
 * them again. The server's own handles never keep the loop alive once it
 * stopped. */
void lith_http_server_destroy(lith_http_server *srv);

/* ---- Counters (for /metrics) -------------------------------------------- */

typedef struct lith_http_stats {
  uint64_t responses;        /* requests finished, with or without a response */
  uint64_t by_class[6];      /* [1]..[5]: 1xx..5xx sent, including the
                                   layer's and h2o's own errors; [0]: none sent
                                   (the client left, or a stream was reset) */
  uint64_t connections;      /* accepted, total */
  uint64_t connections_open; /* open now */
  uint64_t pending;          /* request handles the application holds now */
  uint64_t streams_open;     /* streams open now */
  uint64_t stream_overflows; /* streams closed because a client was too slow */
  uint64_t gone;             /* handles whose client left before completion */
  uint64_t write_timeouts;   /* connections closed by write_timeout_ms */
} lith_http_stats;

void lith_http_stats_get(const lith_http_server *srv, lith_http_stats *out);

/* The statuses counted one by one (lith_http_status_count). */
#define LITH_HTTP_STATUS_MIN 100
#define LITH_HTTP_STATUS_MAX 599

/* Requests finished with exactly `status` (LITH_HTTP_STATUS_MIN..
 * LITH_HTTP_STATUS_MAX); 0 for anything else.
 * A client that leaves while the application holds its request is counted
 * as 499 on HTTP/1 (the nginx convention, never sent) and under class 0 on
 * HTTP/2. */
uint64_t lith_http_status_count(const lith_http_server *srv, int status);

/* ---- Access log ---------------------------------------------------------- */

/* One finished request, as lith_http_on_access reports it. Every string is
 * the layer's, valid during the callback only. */
typedef struct lith_http_access {
  const char *method;   /* as the client sent it (at most 31 bytes kept) */
  const char *path;     /* the normalized path without the query (at most 1023 bytes kept) */
  const char *route;    /* the path of the route for its method and path, as given to
                           lith_http_route ("/v1/commands/" for a prefix route), also when
                           the layer refused it before the handler (413); NULL when no
                           route matches (404, 405) */
  const char *peer;     /* as lith_http_req_peer: "127.0.0.1:53122", "[::1]:53122", "unix" */
  int status;           /* as lith_http_status_count counts it: 499 for a client that left
                         on HTTP/1; 0 when nothing was sent on HTTP/2 */
  uint64_t bytes;       /* body bytes sent */
  uint64_t duration_us; /* from the request's first byte (h2o's clock, which the loop
                           refreshes at most once a millisecond) to now */
} lith_http_access;

typedef void (*lith_http_access_cb)(const lith_http_access *a, void *arg);

/* Call cb(a, arg) once for every request that finishes (the one place each
 * is counted for lith_http_status_count), from the loop, while h2o disposes
 * of the request: cb must not call any lith_http function. cb NULL: none.
 * `arg` is the caller's. */
void lith_http_on_access(lith_http_server *srv, lith_http_access_cb cb, void *arg);

/* ---- Reading a request -------------------------------------------------- */
/* All strings are NUL-terminated and owned by the handle: valid until it is
 * completed, whether or not the client is still there. */

const char *lith_http_req_method(const lith_http_req *req);
/* The normalized path ("." and ".." resolved), without the query. */
const char *lith_http_req_path(const lith_http_req *req);
/* The query string after '?', undecoded; "" if none. */
const char *lith_http_req_query(const lith_http_req *req);
/* The first header named `name` (case-insensitive), or NULL. The request's
 * authority is there as "host", for HTTP/1 (Host) and HTTP/2 (:authority). */
const char *lith_http_req_header(const lith_http_req *req, const char *name);
/* Every header, in order (names in lower case): i < lith_http_req_header_count.
 * Returns LITH_HTTP_MISUSE if i is out of range. */
size_t lith_http_req_header_count(const lith_http_req *req);
int lith_http_req_header_at(const lith_http_req *req, size_t i, const char **name, const char **value);
/* The body (NUL-terminated after *len bytes; "" with *len 0 if none). `len`
 * may be NULL. */
const char *lith_http_req_body(const lith_http_req *req, size_t *len);
/* The peer: "127.0.0.1:53122", "[::1]:53122", or "unix". */
const char *lith_http_req_peer(const lith_http_req *req);
/* 1 if the peer is on this machine: a Unix socket, 127.0.0.0/8, ::1 or
 * ::ffff:127.0.0.0/104; else 0. */
int lith_http_req_is_loopback(const lith_http_req *req);
/* The protocol version: 0x100, 0x101 or 0x200. */
int lith_http_req_version(const lith_http_req *req);
/* The server the request came to. */
lith_http_server *lith_http_req_server(const lith_http_req *req);

/* ---- Answering ---------------------------------------------------------- */

/* Add a response header (several of one name are kept: Set-Cookie), before
 * lith_http_respond* or lith_http_stream_start. `name` (lower-cased) and
 * `value` are copied. LITH_HTTP_GONE if the client left (nothing to do). */
int lith_http_add_header(lith_http_req *req, const char *name, const char *value);

/* Send a whole response and complete `req`: status (200..599), Content-Type
 * (NULL: none), body[0..len) (copied; may be NULL when len is 0), with a
 * Content-Length. Returns LITH_HTTP_OK, or LITH_HTTP_GONE if the client left
 * (nothing sent) — in both cases `req` is released — or LITH_HTTP_MISUSE
 * (bad arguments, a stream, already answered), in which case it is not. */
int lith_http_respond(lith_http_req *req, int status, const char *content_type, const void *body, size_t len);

/* lith_http_respond with Content-Type application/json and `json` (a
 * NUL-terminated string, copied). */
int lith_http_respond_json(lith_http_req *req, int status, const char *json);

/* lith_http_respond_json with the layer's error shape
 * {"error":{"code":"<reason phrase as an identifier, e.g. not_found>","message":"<message>"}},
 * `message` escaped. Every error the layer sends has this shape, and so has
 * every error h2o answers for itself once it parsed a request (413, 404 for
 * a request-target that is not a path); only a request h2o cannot parse at
 * all gets h2o's fixed plain-text "400 Bad Request". */
int lith_http_respond_error(lith_http_req *req, int status, const char *message);

/* A handle's client has left (or the server ended the exchange: stop, stream
 * overflow) while the application holds it. Called once, from the loop,
 * never from inside a lith_http call; the callback may complete `req`. */
typedef void (*lith_http_gone_cb)(lith_http_req *req, void *arg);

/* Ask for cb(req, arg) if the client goes away before `req` is completed
 * (replaces an earlier request; cb NULL cancels). On HTTP/1 the layer watches
 * the connection once the application has held the request for 50 ms (most
 * requests are answered sooner, and watching costs a system call), so a
 * closed connection is noticed within about 50 ms; a client that only
 * half-closes (shuts down its sending side and waits) counts as gone. */
void lith_http_on_gone(lith_http_req *req, lith_http_gone_cb cb, void *arg);

/* 1 if `req`'s client has gone (completing it would return LITH_HTTP_GONE). */
int lith_http_is_gone(const lith_http_req *req);

/* ---- Streaming (server-sent events) ------------------------------------- */

/* Send status and headers now (Content-Type `content_type`, body of unknown
 * length: chunked on HTTP/1) and keep the response open for
 * lith_http_stream_write. The handler then returns LITH_HTTP_PENDING to keep
 * `req` (or LITH_HTTP_DONE, which ends the stream). Never releases `req`:
 * after LITH_HTTP_GONE (or _STOPPING: the server is stopping, and the
 * request is not LITH_HTTP_STOP_FINISH) complete it as usual. */
int lith_http_stream_start(lith_http_req *req, int status, const char *content_type);

/* lith_http_stream_start for a body whose length is known (a file
 * download): sent with Content-Length `length` instead of chunked. The
 * writes must add up to exactly `length` bytes before lith_http_stream_end
 * (fewer: the client sees the connection close early). */
int lith_http_stream_start_length(lith_http_req *req, int status, const char *content_type, uint64_t length);

/* What the stop (lith_http_server_stop) does with a stream. */
enum {
  LITH_HTTP_STOP_END = 0,   /* the default: ended when the stop begins (what is
                               queued is still sent), on_gone follows: an event
                               stream has no end of its own to wait for */
  LITH_HTTP_STOP_FINISH = 1 /* a body with an end (a download): let run while
                               the stop's grace lasts, like any request held,
                               and cut only at its deadline. Such a request may
                               also start its stream after the stop began (it
                               was accepted before): lith_http_stream_start*
                               then succeeds instead of LITH_HTTP_STOPPING */
};

/* Say what the stop does with req's stream: `mode` LITH_HTTP_STOP_END or
 * LITH_HTTP_STOP_FINISH. On a held request not yet completed, before or
 * after its stream started; the stop reads it when it begins (and
 * lith_http_stream_start* during the stop), so set it by then: from the
 * handler, for a download whose stream starts later. LITH_HTTP_MISUSE for
 * a request not held or another mode. */
int lith_http_stream_at_stop(lith_http_req *req, int mode);

/* The bytes written on the stream that wait behind the write in flight (0
 * for a request that is not a stream). A producer with more to send than
 * stream_buffer (a file) writes its next piece when this is low, so what it
 * queues stays bounded and lith_http_stream_write never overflows; the
 * write in flight completes in a loop callback, so a uv_prepare handle
 * (which runs before the loop next waits) sees the room it made; a uv_check
 * handle may not until some other event wakes the loop. */
size_t lith_http_stream_queued(const lith_http_req *req);

/* lith_http_stream_start(req, 200, "text/event-stream") with
 * Cache-Control: no-cache and X-Accel-Buffering: no. */
int lith_http_sse_start(lith_http_req *req);

/* Queue data[0..len) (copied) on the stream. One write is in flight at a
 * time; what comes meanwhile waits in the stream's buffer, at most
 * stream_buffer bytes (lith_http_options). Data that would pass that bound is
 * not queued: the stream is closed as failed instead (HTTP/1: the connection
 * is closed without the final chunk; HTTP/2: the stream is reset), and the
 * call returns LITH_HTTP_FULL; on_gone follows. Closing, not dropping, is
 * deliberate: an SSE client reconnects and refetches, whereas silently lost
 * events would leave it wrong. A single write larger than stream_buffer
 * always overflows. On HTTP/2 a write stuck behind the client's flow-control
 * window cannot be cancelled in h2o 2.2.5: the reset comes when h2o next
 * asks for data, and nothing more is queued meanwhile. Returns
 * LITH_HTTP_GONE once the client left (and after FULL). No heartbeat is sent
 * for you: the layer does not need one to notice a client leaving, but a
 * proxy with an idle timeout may; write an SSE comment (":

") from a
 * timer. */
int lith_http_stream_write(lith_http_req *req, const void *data, size_t len);

/* Write one server-sent event: "event: <event>\n" (if event != NULL),
 * "id: <id>\n" (if id != NULL), one "data: <line>\n" per line of `data`, then
 * a blank line. `event` and `id` must not hold a line break (MISUSE). */
int lith_http_sse_event(lith_http_req *req, const char *event, const char *id, const char *data);

/* End the stream (what is queued is still sent) and complete `req` (released
 * whatever the result). LITH_HTTP_GONE if the client had left. */
int lith_http_stream_end(lith_http_req *req);

/* ---- WebSocket (websocket.c) --------------------------------------------- */

/* A WebSocket connection (RFC 6455, HTTP/1.1 only; h2o 2.2.5 and wslay do
 * the framing). A handler that takes a WebSocket handshake judges it as
 * any request (the gate: Origin, Host, a token), picks a subprotocol, and
 * calls lith_http_ws_accept: the request is answered 101 and released,
 * and a lith_http_ws stands for the connection from then on. Its bounds
 * are the server's: a message (after reassembling its fragments) of more
 * than max_body bytes, or in more than 1024 fragments, closes the
 * connection with 1009; what waits to be sent is the application's to
 * bound (lith_http_ws_send_tagged tells it when each message has left);
 * a client that takes nothing of what waits for it for write_timeout_ms
 * is cut, and so is one with more than 64 pongs waiting (it pings and
 * does not read); a connection with no message either way for idle_ms
 * (pings and pongs do not count: the time until a client's first message
 * is bounded too) while the application owes it no answer
 * (lith_http_ws_set_busy) is closed (1001). The stop
 * (lith_http_server_stop) sends every WebSocket a close (1001 "server
 * stopping") and, at its deadline, cuts those whose client did not answer
 * it. Pings are answered by the layer. Everything runs on the loop
 * thread. */
typedef struct lith_http_ws lith_http_ws;

typedef struct lith_http_ws_options {
  const char *protocol; /* echoed in Sec-WebSocket-Protocol (a client that
                           offered subprotocols fails without it); NULL:
                           none. Copied */
  unsigned idle_ms;     /* 0: no idle bound */
  /* A whole message from the client: data[0..len) (the layer's, valid
   * during the call only), binary 1 for a binary
   * message. May call lith_http_ws_send_text and lith_http_ws_close. */
  void (*on_message)(lith_http_ws *ws, const char *data, size_t len, int binary, void *arg);
  /* The connection is closed (either side, an error, a bound, the stop).
   * Called once, from the loop (never from inside another lith_http
   * call); the handle is freed when it returns: forget it. */
  void (*on_close)(lith_http_ws *ws, void *arg);
  /* A message given to lith_http_ws_send_tagged with `tag` has been
   * taken by the kernel whole (sent 1), or never will be: the connection
   * ended first (sent 0, each before on_close). Once per such message, in
   * the order sent, from the loop. May call lith_http_ws_send_text and
   * lith_http_ws_close. NULL: none. */
  void (*on_sent)(lith_http_ws *ws, uintptr_t tag, int sent, void *arg);
  void *arg; /* the caller's, passed to each */
} lith_http_ws_options;

/* 1 if req is a WebSocket handshake this layer can take: HTTP/1.1 GET with
 * Upgrade: websocket, Connection: upgrade, a 24-character
 * Sec-WebSocket-Key and Sec-WebSocket-Version 13; else 0. */
int lith_http_ws_is_handshake(const lith_http_req *req);

/* Answer the handshake req (101, with opt->protocol echoed) and complete
 * req (released whatever the result). On LITH_HTTP_OK *out is the
 * connection, the layer's: valid until on_close returns. LITH_HTTP_MISUSE:
 * not a handshake (lith_http_ws_is_handshake) or a request already
 * answered; LITH_HTTP_STOPPING: the server is stopping (503 sent);
 * LITH_HTTP_GONE: the client left. opt is read during the call. */
int lith_http_ws_accept(lith_http_req *req, const lith_http_ws_options *opt, lith_http_ws **out);

/* Queue a text message data[0..len) (copied). LITH_HTTP_OK;
 * LITH_HTTP_NOMEM: it could not be queued, and the connection is being
 * cut (on_close follows); LITH_HTTP_GONE: the connection is closing or
 * closed. */
int lith_http_ws_send_text(lith_http_ws *ws, const void *data, size_t len);

/* The same, and on_sent(ws, tag, ...) once the message has left or was
 * dropped (tag not 0: what the application holds for it until then, e.g.
 * its share of a memory budget). Only on LITH_HTTP_OK does on_sent come. */
int lith_http_ws_send_tagged(lith_http_ws *ws, const void *data, size_t len, uintptr_t tag);

/* Close: a close frame with `code` (1000 normal, 1002 protocol error, 1003
 * unacceptable data, 1008 policy, 1011 server error) and `reason` (NULL:
 * none; at most 123 bytes kept) after what is queued; the client answers
 * and the connection ends (on_close). One that does not answer is cut
 * after a second. LITH_HTTP_GONE if already closing. */
int lith_http_ws_close(lith_http_ws *ws, unsigned code, const char *reason);

/* busy 1: the application owes the client an answer (a request of it
 * waits or runs), and the idle bound does not run however long that takes;
 * 0: idle_ms counts again from now. */
void lith_http_ws_set_busy(lith_http_ws *ws, int busy);

/* Bytes queued on ws and not yet handed to the socket. */
size_t lith_http_ws_queued(const lith_http_ws *ws);

/* The peer, as lith_http_req_peer gave it at the handshake. */
const char *lith_http_ws_peer(const lith_http_ws *ws);

/* ---- Bearer tokens ------------------------------------------------------ */

/* 1 if `req` carries "Authorization: Bearer <token>" with exactly `token`.
 * Otherwise answers 401 with WWW-Authenticate: Bearer realm="lith" (plus
 * error="invalid_token" when a token was given) and a JSON error, completes
 * `req`, and returns 0: the handler must return LITH_HTTP_DONE and not touch
 * `req` again. The comparison takes the same time whatever the two tokens
 * hold (lith_http_equal_ct). `token` is the caller's. */
int lith_http_check_bearer(lith_http_req *req, const char *token);

/* The same test without an answer: 1 the right token, 0 none given, -1 a
 * wrong one (for a server that answers refusals in a format of its own,
 * with the same WWW-Authenticate values). */
int lith_http_bearer(lith_http_req *req, const char *token);

/* 1 if a[0..alen) equals b[0..blen), else 0, in a time that depends on
 * `blen` only (pass the secret as b): every byte of b is always compared, a
 * mismatch never stops the loop, the length difference is folded into the
 * same accumulator, and no branch depends on a byte's value. */
int lith_http_equal_ct(const void *a, size_t alen, const void *b, size_t blen);

#ifdef __cplusplus
}
#endif

#endif /* LITH_HTTP_H */
