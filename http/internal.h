/*
 * What the files of http/ share, and nobody else sees: the server and
 * request structures, and the few functions one file calls in another.
 *
 * Files: http.c (the server: h2o setup, listeners, connections, stop,
 * counters), guard.c (refusing requests whose body length is ambiguous),
 * request.c (dispatch, the request handle and its lifetime, answers),
 * watch.c (noticing that an HTTP/1 client left), stream.c (streams and
 * server-sent events), router.c (routes), auth.c (bearer tokens), error.c
 * (result codes, messages, JSON errors), tls.c (the TLS context),
 * websocket.c (WebSocket connections after their upgrade).
 *
 * Lifetimes, the heart of the matter. h2o owns its h2o_req_t and frees it
 * (clears its memory pool) when the response is done or the client leaves,
 * whenever that is. The application owns a lith_http_req until it completes
 * it, whenever that is. A handle is therefore reference counted, with one
 * reference per holder:
 *   - the application (`app`), from dispatch until it completes the handle;
 *   - h2o, from dispatch until h2o clears the request's pool: a small
 *     "sentinel" allocated in that pool tells us (its dispose callback), and
 *     from then on `h2o` is NULL and nothing is ever sent on the handle;
 *   - the dispatcher, while the handler runs;
 *   - the deferred-work queue, while the handle is queued on it.
 * Stream buffers live in the handle, so they outlive every write h2o has
 * in flight.
 *
 * Nothing the application supplies is called from inside h2o (a request's
 * pool is cleared in the middle of h2o tearing a connection down): the
 * on_gone callbacks and the teardowns we start ourselves go through a queue
 * that a zero-delay uv timer drains.
 */
#ifndef LITH_HTTP_INTERNAL_H
#define LITH_HTTP_INTERNAL_H

#include <netinet/in.h>
#include <sys/stat.h>

#define H2O_USE_LIBUV 1 /* libh2o-dev is the libuv flavour */
#include <h2o.h>

#include "http.h"

#define LH_DEFAULT_MAX_BODY (1u << 20)
#define LH_DEFAULT_STREAM_BUFFER (256u << 10)
#define LH_DEFAULT_TIMEOUT_MS 10000u
#define LH_DEFAULT_WRITE_TIMEOUT_MS 30000u

typedef union lh_uvsock {
  uv_handle_t handle;
  uv_stream_t stream;
  uv_tcp_t tcp;
  uv_pipe_t pipe;
} lh_uvsock;

/* One accepted connection. */
typedef struct lh_conn {
  lh_uvsock io;
  lith_http_server *srv;
  h2o_socket_t *sock; /* NULL once h2o closed it */
  struct lh_conn *prev, *next;
  lith_http_req *watcher;   /* HTTP/1: the held request whose client we watch */
  struct lith_http_ws *ws;  /* after a WebSocket upgrade (websocket.c) */
  unsigned watch_added : 1; /* the socket is in watch_ep (watch.c) */
  unsigned live;            /* dispatched requests h2o has not freed yet */
  unsigned is_unix : 1;
  unsigned closed : 1; /* the uv handle is closed: free once live is 0 */
  unsigned shut_rd : 1;
  unsigned shut_rdwr : 1;
  unsigned peer_known : 1; /* peer and peer_loopback are lh_peer's answer (a connection's peer is fixed) */
  unsigned peer_loopback : 1;
  char peer[INET6_ADDRSTRLEN + 16];
  size_t wq_seen;    /* write timeout (http.c): bytes not yet taken by the client at the last look */
  uint64_t wq_since; /* ... and uv_now when they last changed (or were none) */
} lh_conn;

typedef struct lh_listener {
  lh_uvsock io;
  lith_http_server *srv;
  struct lh_listener *next;
  char *path; /* Unix socket: the file to remove at close */
  dev_t dev;  /* ... if it still is the one we bound */
  ino_t ino;
  int port; /* TCP: the bound port */
  int is_unix;
} lh_listener;

typedef struct lh_route {
  char *method;
  char *path;
  size_t method_len, path_len;
  int prefix;
  lith_http_handler fn;
  void *arg;
} lh_route;

/* The h2o handler on path "/": every request with a path comes here. */
typedef struct lh_handler {
  h2o_handler_t super;
  lith_http_server *srv;
} lh_handler;

enum { LH_RUNNING, LH_STOPPING, LH_CLOSING, LH_STOPPED };

/* The most replaced TLS contexts kept at once: reloads closer together
 * than twice the handshake's bound past that are refused. */
#define LH_TLS_OLD 8

struct lith_http_server {
  uv_loop_t *loop;
  h2o_globalconf_t config;
  h2o_context_t ctx;
  h2o_accept_ctx_t accept_ctx;     /* cleartext: Unix sockets, TCP without TLS */
  h2o_accept_ctx_t tls_accept_ctx; /* TCP listeners when tls is set (tls.c) */
  SSL_CTX *tls;                    /* NULL: no TLS */
  /* Contexts a reload replaced (tls.c): h2o keeps an accepted
   * connection's SSL_CTX unreferenced until the connection's first bytes
   * make its SSL (SSL_new then holds one), so a replaced context must
   * outlive the swap by the handshake's bound. Freed by a later reload
   * once past `until` (uv_now, ms), or at destroy. */
  struct {
    SSL_CTX *ctx;
    uint64_t until;
  } tls_old[LH_TLS_OLD];
  int tls_h2; /* ALPN offers h2 (lh_tls_create's h2) */
  size_t max_body, stream_buffer;
  char *server_name;
  lh_route *routes;
  size_t n_routes, cap_routes;
  lh_listener *listeners;
  unsigned listeners_open; /* listener handles not yet closed (incl. failed ones) */
  lh_conn *conns;
  unsigned conns_open;            /* connection handles not yet closed */
  lith_http_req *reqs;            /* every live handle */
  lith_http_req *q_head, *q_tail; /* deferred work */
  uv_timer_t defer_timer, deadline_timer;
  uv_timer_t write_timer;    /* the write timeout's look at every connection (http.c) */
  unsigned write_timeout_ms; /* 0: none */
  uv_poll_t watch_poll;      /* on watch_ep (watch.c) */
  int watch_ep;
  unsigned n_watched;
  unsigned watch_polling : 1;             /* watch_poll started (and unreferenced) */
  uv_timer_t watch_timer;                 /* arms the watch of requests held long enough */
  lith_http_req *later_head, *later_tail; /* held, not yet watched (watch.c) */
  int timers_open;                        /* our own uv handles not yet closed */
  int state;
  lith_http_stopped_cb on_stopped;
  void *stopped_arg;
  lith_http_stats stats;
  uint64_t by_status[LITH_HTTP_STATUS_MAX + 1]; /* [0, LITH_HTTP_STATUS_MIN) unused */
  struct lith_http_ws *ws_list;                 /* WebSockets not yet freed (websocket.c) */
  unsigned ws_open;
  lith_http_access_cb on_access; /* lith_http_on_access */
  void *access_arg;
};

enum { LH_REQ_NEW, LH_REQ_HELD, LH_REQ_ANSWERED, LH_REQ_STREAM };

typedef struct lh_header {
  const char *name, *value;
} lh_header;

struct lith_http_req {
  lith_http_server *srv;
  h2o_req_t *h2o;             /* NULL once h2o freed the request */
  lh_conn *conn;              /* NULL once h2o freed the request (or unknown) */
  h2o_generator_t gen;        /* streams */
  lith_http_req *prev, *next; /* srv->reqs */
  lith_http_req *q_next;
  lith_http_req *later_prev, *later_next; /* srv->later_* */
  uint64_t held_ms;                       /* uv_now when the application began to hold it */
  unsigned refs;
  int state;
  int abort_status; /* queued teardown: 499 client left, 503 stop deadline */
  unsigned app : 1; /* the application holds it */
  unsigned queued : 1;
  unsigned gone : 1;   /* the client left or the server ended the exchange */
  unsigned notify : 1; /* on_gone to call from the queue */
  unsigned abort : 1;  /* h2o side to tear down from the queue */
  unsigned watching : 1;
  unsigned later : 1;      /* in srv's later list (watch.c) */
  unsigned sending : 1;    /* stream: a write is in flight */
  unsigned end_after : 1;  /* stream: end when the write in flight is done */
  unsigned fail_after : 1; /* stream: fail when the write in flight is done */
  unsigned ended : 1;      /* stream: the last h2o_send (final or error) is made */
  unsigned head : 1;       /* a HEAD request: no body is ever sent */
  unsigned finish : 1;     /* LITH_HTTP_STOP_FINISH: a stream the stop lets run until its deadline */
  lith_http_gone_cb on_gone;
  void *gone_arg;
  char *out, *wait; /* stream: the write in flight, what waits */
  size_t out_cap, wait_len, wait_cap;
  int version;
  int loopback;
  const char *method, *path, *query, *body;
  size_t body_len;
  size_t n_headers;
  lh_header *headers;
  char peer[INET6_ADDRSTRLEN + 16];
  /* the copied strings follow */
};

/* tls.c: the server's SSL_CTX from PEM files (*out freed with
 * SSL_CTX_free), with ALPN h2 offered when h2 is 1. */
int lh_tls_create(const char *cert_file, const char *key_file, int h2, SSL_CTX **out);

/* error.c */
int lh_fail(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* {"error":{"code":"<reason as identifier>","message":"<msg escaped>"}} into a malloc'd string (NULL if out of memory);
 * *len its length. */
char *lh_error_json(int status, const char *msg, size_t *len);

/* router.c */
int lh_route_add(lith_http_server *srv, const char *method, const char *path, int match, lith_http_handler fn,
                 void *arg);
/* The route for (method, path), or NULL; then *allow (NUL-terminated, at
 * most allow_cap bytes) lists the methods of the routes matching the path:
 * empty means 404, else 405. */
const lh_route *lh_route_find(const lith_http_server *srv, const char *method, const char *path,
                              size_t path_len, char *allow, size_t allow_cap);
void lh_routes_free(lith_http_server *srv);
/* NULL, or why the request-target `target` (as the client sent it, path
 * and query) matches no route whatever the table: its path (before any
 * '?') holds an encoded slash or NUL (%2F, %00, either case), which h2o
 * decodes into the path the routes see (router.c). */
const char *lh_route_bad_escape(const char *target, size_t len);

/* request.c */
int lh_on_req(h2o_handler_t *self, h2o_req_t *req);
void lh_req_unref(lith_http_req *h);
void lh_req_complete(lith_http_req *h); /* drop the application's reference */
void lh_mark_gone(lith_http_req *h);    /* and queue on_gone */
void lh_queue_abort(lith_http_req *h, int status);
void lh_abort_now(lith_http_req *h, int status);
void lh_defer_cb(uv_timer_t *t);
void lh_set_status(lith_http_req *h, int status);
/* The peer of req (c: its connection, or NULL) as lith_http_req_peer
 * gives it, into out[0..cap); returns 1 if it is on this machine. Asked
 * of the socket once per connection (kept in c). */
int lh_peer(h2o_req_t *req, lh_conn *c, char *out, size_t cap);

/* guard.c */
/* Why the HTTP/1 request head at the start of buf[0..len) must be refused
 * (a message), or NULL. method: h2o's parse of that head (checked against
 * it); http10: an HTTP/1.0 request. */
const char *lh_guard_check(const char *buf, size_t len, const char *method, size_t method_len, int http10);
/* Put the guard on `path`, before any handler added later. */
void lh_guard_add(h2o_pathconf_t *path);

/* watch.c */
int lh_watch_init(lith_http_server *srv); /* 0, or -1 with errno */
void lh_watch_start(lith_http_req *h);
void lh_watch_later(lith_http_req *h); /* watch it once held LH_WATCH_DELAY_MS */
void lh_watch_stop(lith_http_req *h);

/* stream.c */
void lh_stream_finish(lith_http_req *h); /* end after what is queued */
void lh_stream_fail(lith_http_req *h);   /* end as failed, now or after the write in flight */

/* websocket.c */
void lh_ws_stop(lith_http_server *srv); /* the stop: a close frame to each */

/* http.c */
lh_conn *lh_conn_of(h2o_req_t *req);
void lh_conn_released(lh_conn *c);      /* live dropped to 0 */
void lh_conn_shut(lh_conn *c, int how); /* shutdown(2) the connection's socket */
void lh_maybe_finish(lith_http_server *srv);

#endif /* LITH_HTTP_INTERNAL_H */
