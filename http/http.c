/*
 * The server: h2o's configuration and context on the caller's uv loop,
 * listeners, accepted connections, the graceful stop, and the counters.
 *
 * h2o setup. One host, one path "/" whose single handler is our dispatcher
 * (request.c), so every request with a path reaches our router. The errors
 * h2o answers itself once it has parsed a request (413 for a body over
 * max_body, 400 for a broken Content-Length or chunked body, 417, 404 for a
 * request-target that is not a path) are bound to the host's fallback path;
 * a filter there rewrites them into our JSON error shape, so that a client
 * sees one shape whoever answered. (A request h2o cannot parse at all gets
 * its fixed plain-text 400, written straight to the socket.) A logger on
 * both paths counts every finished request by status (h2o calls loggers
 * when it frees a request, including its own errors). Before either, on
 * both paths, the framing guard (guard.c) refuses HTTP/1 requests whose body
 * length is ambiguous.
 *
 * The loop. h2o's context creates a uv_async_t (its inter-thread queue, for
 * features we do not use) that would keep the caller's loop alive forever,
 * and uv timers for its timeouts that it leaves running after their last
 * entry went (an HTTP/1 request timeout held the loop 10 s after the stop).
 * We find them by walking the loop's handles before and after
 * h2o_context_init and unreference them: while h2o has work, a connection's
 * own handle keeps the loop alive; once the server stopped, uv_run returns
 * as soon as the application closed its own handles. Then destroy, outside
 * uv_run, lets h2o_context_dispose run the loop once to free its timers
 * (h2o 2.2.5 does that itself, which is why destroy may not be called from
 * a callback).
 *
 * Connections. We allocate each uv handle, hand it to h2o with
 * h2o_uv_socket_create, and learn when h2o closes it (its uv close
 * callback). To find our record from a request we put it in the h2o socket's
 * on_close hook, which libh2o leaves to the application. With TLS (tls.c) a
 * TCP connection goes to h2o_accept with the accept context that carries
 * the SSL_CTX: h2o runs the handshake (bounded by handshake_timeout, which
 * create sets to the request timeout) before HTTP/1 or HTTP/2 begins; until
 * then the connection has no request (live 0), so the stop closes it at once.
 *
 * Stop. h2o 2.2.5's h2o_context_request_shutdown sends GOAWAY on HTTP/2 and
 * makes later HTTP/1 responses "Connection: close", but leaves idle HTTP/1
 * keep-alive connections open until their timeout, and has no deadline. We
 * count the requests of each connection that are dispatched and not yet freed
 * by h2o (`live`); a connection with none is shut for reading
 * (shutdown(SHUT_RD)), which h2o sees as the client closing: idle ones close
 * at once, busy ones right after their last response. Streams end when
 * the stop begins, but those marked LITH_HTTP_STOP_FINISH (downloads),
 * which run on like the requests held. At the deadline every remaining
 * connection is shut both ways, which fails whatever h2o is doing on it and
 * so closes it.
 *
 * Write timeout. h2o 2.2.5 has none: a client that stops reading keeps its
 * connection, its request and what the application holds for it forever.
 * A repeating timer (unreferenced) looks at every connection's libuv write
 * queue; one that had bytes waiting and took none of them for
 * write_timeout_ms is reset (see write_timed_out).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/sockios.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "internal.h"

typedef struct lh_logger {
  h2o_logger_t super;
  lith_http_server *srv;
} lh_logger;

typedef struct lh_json_ostream {
  h2o_ostream_t super;
  h2o_iovec_t json;
} lh_json_ostream;

void lith_http_options_default(lith_http_options *opt) {
  memset(opt, 0, sizeof *opt);
  opt->max_body = LH_DEFAULT_MAX_BODY;
  opt->stream_buffer = LH_DEFAULT_STREAM_BUFFER;
  opt->http2 = 1;
  opt->request_timeout_ms = LH_DEFAULT_TIMEOUT_MS;
  opt->write_timeout_ms = LH_DEFAULT_WRITE_TIMEOUT_MS;
  opt->server_name = "lith";
}

/* ---- h2o hooks ------------------------------------------------------------ */

static void count_status(lith_http_server *srv, int status) {
  srv->stats.responses++;
  int counted = status >= LITH_HTTP_STATUS_MIN && status <= LITH_HTTP_STATUS_MAX;
  srv->stats.by_class[counted ? status / 100 : 0]++;
  if (counted)
    srv->by_status[status]++;
}

/* lith_http_on_access's report of req: copies bounded on the stack. */
static void report_access(lith_http_server *srv, h2o_req_t *req) {
  char method[32], path[1024], peer[INET6_ADDRSTRLEN + 16], allow[64];
  lith_http_access a;
  struct timeval now;
  size_t n;

  n = req->method.len < sizeof method - 1 ? req->method.len : sizeof method - 1;
  memcpy(method, req->method.base, n);
  method[n] = '\0';
  h2o_iovec_t p = req->path_normalized.base != NULL ? req->path_normalized : req->path;
  n = p.base != NULL && p.len < sizeof path - 1 ? p.len : p.base != NULL ? sizeof path - 1 : 0;
  memcpy(path, p.base != NULL ? p.base : "", n);
  path[n] = '\0';
  const lh_route *r = p.base != NULL && lh_route_bad_escape(req->path.base, req->path.len) == NULL
                          ? lh_route_find(srv, method, p.base, p.len, allow, sizeof allow)
                          : NULL;
  lh_peer(req, lh_conn_of(req), peer, sizeof peer);
  gettimeofday(&now, NULL);
  int64_t us = h2o_timeval_is_null(&req->timestamps.request_begin_at)
                   ? 0
                   : h2o_timeval_subtract(&req->timestamps.request_begin_at, &now);
  a.method = method;
  a.path = path;
  a.route = r != NULL ? r->path : NULL;
  a.peer = peer;
  a.status = req->res.status;
  a.bytes = req->bytes_sent;
  a.duration_us = us > 0 ? (uint64_t)us : 0;
  srv->on_access(&a, srv->access_arg);
}

static void on_log_access(h2o_logger_t *self, h2o_req_t *req) {
  lith_http_server *srv = ((lh_logger *)self)->srv;
  count_status(srv, req->res.status);
  if (srv->on_access != NULL)
    report_access(srv, req);
}

void lith_http_on_access(lith_http_server *srv, lith_http_access_cb cb, void *arg) {
  srv->on_access = cb;
  srv->access_arg = arg;
}

/* The JSON body replaces h2o's text one; HEAD keeps no body. */
static void json_do_send(h2o_ostream_t *self, h2o_req_t *req, h2o_iovec_t *bufs, size_t bufcnt,
                         h2o_send_state_t state) {
  (void)bufs;
  (void)bufcnt;
  lh_json_ostream *o = (lh_json_ostream *)self;
  int head = h2o_memis(req->input.method.base, req->input.method.len, H2O_STRLIT("HEAD"));
  if (h2o_send_state_is_in_progress(state) || head)
    h2o_ostream_send_next(self, req, NULL, 0, state);
  else
    h2o_ostream_send_next(self, req, &o->json, 1, state);
}

/* Already our JSON (the guard's 400): h2o's own errors are text/plain. */
static int is_json(const h2o_req_t *req) {
  ssize_t i = h2o_find_header(&req->res.headers, H2O_TOKEN_CONTENT_TYPE, -1);
  return i != -1 && h2o_memis(req->res.headers.entries[i].value.base, req->res.headers.entries[i].value.len,
                              H2O_STRLIT("application/json"));
}

static void json_errors_setup(h2o_filter_t *self, h2o_req_t *req, h2o_ostream_t **slot) {
  (void)self;
  if (req->res.status >= 400 && !is_json(req)) {
    char msg[64];
    size_t i = 0;
    const char *reason = req->res.reason ? req->res.reason : lith_http_reason(req->res.status);
    for (; i < sizeof msg - 1 && reason[i]; i++)
      msg[i] = (char)(reason[i] >= 'A' && reason[i] <= 'Z' ? reason[i] + 32 : reason[i]);
    msg[i] = '\0';
    size_t len;
    char *json = lh_error_json(req->res.status, msg, &len);
    if (json) {
      lh_json_ostream *o = (lh_json_ostream *)h2o_add_ostream(req, sizeof *o, slot);
      o->super.do_send = json_do_send;
      o->json = h2o_strdup(&req->pool, json, len);
      free(json);
      h2o_set_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, H2O_STRLIT("application/json"),
                     1);
      req->res.content_length = len;
      slot = &o->super.next;
    }
  }
  h2o_setup_next_ostream(req, slot);
}

/* ---- create / destroy ------------------------------------------------------ */

typedef struct handle_set {
  uv_handle_t **v;
  size_t n, cap;
  int oom;
} handle_set;

static void collect_handle(uv_handle_t *h, void *arg) {
  handle_set *s = arg;
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 32;
    uv_handle_t **v = realloc(s->v, cap * sizeof *v);
    if (!v) {
      s->oom = 1;
      return;
    }
    s->v = v;
    s->cap = cap;
  }
  s->v[s->n++] = h;
}

typedef struct unref_ctx {
  const handle_set *before;
} unref_ctx;

static void unref_new(uv_handle_t *h, void *arg) {
  const handle_set *before = ((unref_ctx *)arg)->before;
  for (size_t i = 0; i < before->n; i++)
    if (before->v[i] == h)
      return;
  uv_unref(h);
}

static void ignore_sigpipe(void) {
  struct sigaction sa;
  if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL) {
    sa.sa_handler = SIG_IGN;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;
    sigaction(SIGPIPE, &sa, NULL);
  }
}

static void on_write_timer(uv_timer_t *t);

int lith_http_server_create(uv_loop_t *loop, const lith_http_options *opt, lith_http_server **out) {
  lith_http_options o;
  int rc = LITH_HTTP_NOMEM;
  if (!out)
    return lh_fail(LITH_HTTP_MISUSE, "lith_http_server_create: out is NULL");
  *out = NULL;
  if (!loop)
    return lh_fail(LITH_HTTP_MISUSE, "lith_http_server_create: no loop");
  lith_http_options_default(&o);
  if (opt) {
    if (opt->max_body)
      o.max_body = opt->max_body;
    if (opt->stream_buffer)
      o.stream_buffer = opt->stream_buffer;
    if (opt->http2 < LITH_HTTP_H2_OFF || opt->http2 > LITH_HTTP_H2_TLS)
      return lh_fail(LITH_HTTP_MISUSE, "lith_http_server_create: http2 is 0, 1 or 2");
    o.http2 = opt->http2;
    if (opt->request_timeout_ms)
      o.request_timeout_ms = opt->request_timeout_ms;
    if (opt->server_name)
      o.server_name = opt->server_name;
    o.write_timeout_ms = opt->write_timeout_ms; /* 0: never */
    o.tls_cert_file = opt->tls_cert_file;
    o.tls_key_file = opt->tls_key_file;
  }
  SSL_CTX *tls = NULL;
  if (o.tls_cert_file != NULL || o.tls_key_file != NULL) {
    rc = lh_tls_create(o.tls_cert_file, o.tls_key_file, o.http2 != LITH_HTTP_H2_OFF, &tls);
    if (rc != LITH_HTTP_OK)
      return rc;
    rc = LITH_HTTP_NOMEM;
  }

  lith_http_server *srv = calloc(1, sizeof *srv);
  if (!srv)
    goto fail;
  srv->loop = loop;
  srv->tls = tls;
  srv->tls_h2 = o.http2 != LITH_HTTP_H2_OFF;
  srv->max_body = o.max_body;
  srv->stream_buffer = o.stream_buffer;
  srv->write_timeout_ms = o.write_timeout_ms;
  srv->server_name = strdup(o.server_name);
  if (!srv->server_name)
    goto fail_srv;

  h2o_config_init(&srv->config);
  srv->config.server_name = h2o_iovec_init(srv->server_name, strlen(srv->server_name));
  srv->config.max_request_entity_size = o.max_body;
  srv->config.http1.upgrade_to_http2 = o.http2 == LITH_HTTP_H2_ON;
  srv->config.http1.req_timeout = o.request_timeout_ms;
  srv->config.handshake_timeout = o.request_timeout_ms; /* TLS: the handshake is part of the request */
  srv->config.http2.idle_timeout = o.request_timeout_ms;
  h2o_hostconf_t *host = h2o_config_register_host(&srv->config, h2o_iovec_init(H2O_STRLIT("default")), 65535);
  h2o_pathconf_t *root = h2o_config_register_path(host, "/", 0);
  lh_guard_add(root); /* first: before our dispatcher on "/", before h2o's 404 elsewhere */
  lh_guard_add(&host->fallback_path);
  lh_handler *handler = (lh_handler *)h2o_create_handler(root, sizeof *handler);
  handler->super.on_req = lh_on_req;
  handler->srv = srv;
  h2o_pathconf_t *paths[2] = {root, &host->fallback_path};
  for (int i = 0; i < 2; i++) {
    lh_logger *logger = (lh_logger *)h2o_create_logger(paths[i], sizeof *logger);
    logger->super.log_access = on_log_access;
    logger->srv = srv;
  }
  h2o_filter_t *filter = h2o_create_filter(&host->fallback_path, sizeof *filter);
  filter->on_setup_ostream = json_errors_setup;

  handle_set before = {0};
  uv_walk(loop, collect_handle, &before);
  if (before.oom) {
    free(before.v);
    goto fail_config;
  }
  h2o_context_init(&srv->ctx, loop, &srv->config);
  unref_ctx uc = {&before};
  uv_walk(loop, unref_new, &uc);
  free(before.v);
  srv->accept_ctx.ctx = &srv->ctx;
  srv->accept_ctx.hosts = srv->config.hosts;
  srv->tls_accept_ctx = srv->accept_ctx;
  srv->tls_accept_ctx.ssl_ctx = tls;

  if (lh_watch_init(srv) != 0) {
    rc = lh_fail(LITH_HTTP_ERROR, "lith_http_server_create: epoll: %s", strerror(errno));
    goto fail_context;
  }
  uv_timer_init(loop, &srv->defer_timer);
  uv_timer_init(loop, &srv->deadline_timer);
  uv_timer_init(loop, &srv->write_timer);
  srv->defer_timer.data = srv->deadline_timer.data = srv->write_timer.data = srv;
  srv->timers_open = 5; /* defer, deadline, write, watch poll, watch timer */
  if (srv->write_timeout_ms) {
    unsigned period = srv->write_timeout_ms / 4;
    period = period > 1000 ? 1000 : period ? period : 1;
    uv_timer_start(&srv->write_timer, on_write_timer, period, period);
    uv_unref((uv_handle_t *)&srv->write_timer); /* never what keeps the loop alive */
  }
  srv->state = LH_RUNNING;
  ignore_sigpipe();
  *out = srv;
  return LITH_HTTP_OK;

fail_context:
  h2o_context_dispose(&srv->ctx); /* runs the loop once (NOWAIT) */
fail_config:
  h2o_config_dispose(&srv->config);
fail_srv:
  free(srv->server_name);
  free(srv);
fail:
  SSL_CTX_free(tls);
  return rc == LITH_HTTP_NOMEM ? lh_fail(rc, "lith_http_server_create: out of memory") : rc;
}

/* Entries h2o left linked to its context's timeouts once every connection
 * closed (h2o_context_request_shutdown links a one-second HTTP/2 GOAWAY
 * resend): h2o_context_dispose asserts there are none, and the loop, which
 * these timers no longer keep alive, may have ended before they fired. */
static void unlink_context_timeouts(h2o_context_t *ctx) {
  h2o_timeout_t *all[] = {&ctx->zero_timeout,
                          &ctx->one_sec_timeout,
                          &ctx->hundred_ms_timeout,
                          &ctx->handshake_timeout,
                          &ctx->http1.req_timeout,
                          &ctx->http2.idle_timeout,
                          &ctx->http2.graceful_shutdown_timeout,
                          &ctx->proxy.io_timeout};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    while (!h2o_linklist_is_empty(&all[i]->_entries))
      h2o_timeout_unlink(H2O_STRUCT_FROM_MEMBER(h2o_timeout_entry_t, _link, all[i]->_entries.next));
}

void lith_http_server_destroy(lith_http_server *srv) {
  if (!srv)
    return;
  if (srv->state == LH_RUNNING)
    lith_http_server_stop(srv, 0, NULL, NULL);
  while (srv->state != LH_STOPPED)
    uv_run(srv->loop, UV_RUN_ONCE);
  /* Handles the application never completed: no h2o reference is left
   * (every connection is closed), only theirs and ours. */
  while (srv->reqs) {
    lith_http_req *h = srv->reqs;
    srv->reqs = h->next;
    free(h->out);
    free(h->wait);
    free(h);
  }
  close(srv->watch_ep); /* its uv_poll_t is closed */
  unlink_context_timeouts(&srv->ctx);
  h2o_context_dispose(&srv->ctx); /* runs the loop once (NOWAIT) */
  h2o_config_dispose(&srv->config);
  lh_routes_free(srv);
  SSL_CTX_free(srv->tls); /* h2o's sockets, each holding a reference, are closed */
  for (int i = 0; i < LH_TLS_OLD; i++)
    SSL_CTX_free(srv->tls_old[i].ctx);
  free(srv->server_name);
  free(srv);
}

/* ---- listeners -------------------------------------------------------------- */

static void on_accept(uv_stream_t *ls, int status);

static void on_listener_closed(uv_handle_t *handle) {
  lh_listener *l = (lh_listener *)handle;
  lith_http_server *srv = l->srv;
  if (l->path) {
    struct stat st;
    if (lstat(l->path, &st) == 0 && st.st_dev == l->dev && st.st_ino == l->ino)
      unlink(l->path);
    free(l->path);
  }
  free(l);
  srv->listeners_open--;
  lh_maybe_finish(srv);
}

static void close_listener(lh_listener *l) { uv_close(&l->io.handle, on_listener_closed); }

static int listen_error(lith_http_server *srv, lh_listener *l, int uverr, const char *what,
                        const char *where) {
  int rc = uverr == UV_EADDRINUSE ? LITH_HTTP_ADDRINUSE : LITH_HTTP_ERROR;
  if (l)
    close_listener(l); /* freed by its close callback */
  (void)srv;
  return lh_fail(rc, "%s %s: %s", what, where, uv_strerror(uverr));
}

int lith_http_listen_tcp(lith_http_server *srv, const char *host, int port) {
  struct sockaddr_storage ss;
  char where[INET6_ADDRSTRLEN + 16];
  if (!srv || !host || port < 0 || port > 65535)
    return lh_fail(LITH_HTTP_MISUSE, "lith_http_listen_tcp: a server, a host and a port 0..65535");
  if (srv->state != LH_RUNNING)
    return lh_fail(LITH_HTTP_STOPPING, "lith_http_listen_tcp: the server is stopping");
  if (uv_ip4_addr(host, port, (struct sockaddr_in *)&ss) != 0 &&
      uv_ip6_addr(host, port, (struct sockaddr_in6 *)&ss) != 0)
    return lh_fail(LITH_HTTP_MISUSE, "lith_http_listen_tcp: %s is not a numeric address", host);
  snprintf(where, sizeof where, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
  lh_listener *l = calloc(1, sizeof *l);
  if (!l)
    return lh_fail(LITH_HTTP_NOMEM, "listen %s: out of memory", where);
  l->srv = srv;
  int e = uv_tcp_init(srv->loop, &l->io.tcp);
  if (e) {
    free(l);
    return listen_error(srv, NULL, e, "listen", where);
  }
  l->io.handle.data = l;
  srv->listeners_open++;
  if ((e = uv_tcp_bind(&l->io.tcp, (struct sockaddr *)&ss, 0)) != 0 ||
      (e = uv_listen(&l->io.stream, SOMAXCONN, on_accept)) != 0)
    return listen_error(srv, l, e, "listen", where);
  struct sockaddr_storage bound;
  int len = sizeof bound;
  if ((e = uv_tcp_getsockname(&l->io.tcp, (struct sockaddr *)&bound, &len)) != 0)
    return listen_error(srv, l, e, "getsockname", where);
  l->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                              : ((struct sockaddr_in *)&bound)->sin_port);
  /* append: lith_http_port names the first TCP listener */
  lh_listener **tail = &srv->listeners;
  while (*tail)
    tail = &(*tail)->next;
  *tail = l;
  return LITH_HTTP_OK;
}

int lith_http_port(const lith_http_server *srv) {
  for (const lh_listener *l = srv ? srv->listeners : NULL; l; l = l->next)
    if (!l->is_unix)
      return l->port;
  return -1;
}

/* An existing file at path: a stale socket is removed (0), a live socket or
 * anything else is refused (an error code). */
static int clear_stale_socket(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0)
    return errno == ENOENT ? LITH_HTTP_OK : lh_fail(LITH_HTTP_ERROR, "stat %s: %s", path, strerror(errno));
  if (!S_ISSOCK(st.st_mode))
    return lh_fail(LITH_HTTP_ADDRINUSE, "listen %s: the file exists and is not a socket", path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return lh_fail(LITH_HTTP_ERROR, "socket: %s", strerror(errno));
  struct sockaddr_un sun = {.sun_family = AF_UNIX};
  memcpy(sun.sun_path, path, strlen(path) + 1);
  int r = connect(fd, (struct sockaddr *)&sun, sizeof sun);
  int err = errno;
  close(fd);
  if (r == 0)
    return lh_fail(LITH_HTTP_ADDRINUSE, "listen %s: another server answers there", path);
  if (err != ECONNREFUSED)
    return lh_fail(LITH_HTTP_ERROR, "listen %s: probing the existing socket: %s", path, strerror(err));
  if (unlink(path) != 0 && errno != ENOENT)
    return lh_fail(LITH_HTTP_ERROR, "listen %s: removing the stale socket: %s", path, strerror(errno));
  return LITH_HTTP_OK;
}

int lith_http_listen_unix(lith_http_server *srv, const char *path) {
  struct sockaddr_un sun;
  if (!srv || !path || !*path || strlen(path) >= sizeof sun.sun_path)
    return lh_fail(LITH_HTTP_MISUSE, "lith_http_listen_unix: a server and a path shorter than %zu",
                   sizeof sun.sun_path);
  if (srv->state != LH_RUNNING)
    return lh_fail(LITH_HTTP_STOPPING, "lith_http_listen_unix: the server is stopping");
  int rc = clear_stale_socket(path);
  if (rc != LITH_HTTP_OK)
    return rc;
  lh_listener *l = calloc(1, sizeof *l);
  if (!l)
    return lh_fail(LITH_HTTP_NOMEM, "listen %s: out of memory", path);
  l->srv = srv;
  l->is_unix = 1;
  l->port = -1;
  int e = uv_pipe_init(srv->loop, &l->io.pipe, 0);
  if (e) {
    free(l);
    return listen_error(srv, NULL, e, "listen", path);
  }
  l->io.handle.data = l;
  srv->listeners_open++;
  if ((e = uv_pipe_bind(&l->io.pipe, path)) != 0)
    return listen_error(srv, l, e, "bind", path);
  /* From here the file is ours: remove it on every way out. */
  struct stat st;
  if (!(l->path = strdup(path))) {
    unlink(path);
    close_listener(l);
    return lh_fail(LITH_HTTP_NOMEM, "listen %s: out of memory", path);
  }
  if (chmod(path, 0600) != 0 || lstat(path, &st) != 0) {
    int err = errno;
    unlink(path);
    close_listener(l);
    return lh_fail(LITH_HTTP_ERROR, "chmod %s: %s", path, strerror(err));
  }
  l->dev = st.st_dev;
  l->ino = st.st_ino;
  if ((e = uv_listen(&l->io.stream, SOMAXCONN, on_accept)) != 0)
    return listen_error(srv, l, e, "listen", path);
  l->next = NULL;
  lh_listener **tail = &srv->listeners;
  while (*tail)
    tail = &(*tail)->next;
  *tail = l;
  return LITH_HTTP_OK;
}

/* ---- connections -------------------------------------------------------------- */

static void free_conn_if_done(lh_conn *c) {
  if (c->closed && c->live == 0)
    free(c);
}

static void on_conn_closed(uv_handle_t *handle) {
  lh_conn *c = (lh_conn *)handle;
  lith_http_server *srv = c->srv;
  if (c->prev)
    c->prev->next = c->next;
  else
    srv->conns = c->next;
  if (c->next)
    c->next->prev = c->prev;
  c->prev = c->next = NULL;
  c->closed = 1;
  c->sock = NULL;
  srv->conns_open--;
  srv->stats.connections_open--;
  free_conn_if_done(c);
  lh_maybe_finish(srv);
}

/* h2o_socket_t's on_close hook: h2o is closing the socket. */
static void on_sock_close(void *data) {
  lh_conn *c = data;
  c->sock = NULL;
  c->watcher = NULL;
}

lh_conn *lh_conn_of(h2o_req_t *req) {
  if (!req->conn->callbacks->get_socket)
    return NULL;
  h2o_socket_t *sock = req->conn->callbacks->get_socket(req->conn);
  if (!sock || sock->on_close.cb != on_sock_close)
    return NULL;
  return sock->on_close.data;
}

static void on_discard_closed(uv_handle_t *handle) { free(handle); }

static void on_accept(uv_stream_t *ls, int status) {
  lh_listener *l = ls->data;
  lith_http_server *srv = l->srv;
  if (status != 0)
    return;
  lh_conn *c = calloc(1, sizeof *c);
  if (!c) {
    /* Take the connection off the backlog and drop it: libuv would
     * otherwise stop accepting on this listener. */
    lh_uvsock *tmp = malloc(sizeof *tmp);
    if (tmp &&
        (l->is_unix ? uv_pipe_init(srv->loop, &tmp->pipe, 0) : uv_tcp_init(srv->loop, &tmp->tcp)) == 0) {
      uv_accept(ls, &tmp->stream);
      uv_close(&tmp->handle, on_discard_closed);
    } else {
      free(tmp);
    }
    return;
  }
  c->srv = srv;
  c->is_unix = (unsigned)l->is_unix;
  int e = l->is_unix ? uv_pipe_init(srv->loop, &c->io.pipe, 0) : uv_tcp_init(srv->loop, &c->io.tcp);
  if (e) {
    free(c);
    return;
  }
  srv->conns_open++;
  srv->stats.connections_open++;
  c->next = srv->conns;
  if (srv->conns)
    srv->conns->prev = c;
  srv->conns = c;
  if (uv_accept(ls, &c->io.stream) != 0 || srv->state != LH_RUNNING) {
    uv_close(&c->io.handle, on_conn_closed);
    return;
  }
  srv->stats.connections++;
  if (!l->is_unix)
    uv_tcp_nodelay(&c->io.tcp, 1); /* small responses and SSE events go out at once */
  c->sock = h2o_uv_socket_create(&c->io.stream, on_conn_closed);
  c->sock->on_close.cb = on_sock_close;
  c->sock->on_close.data = c;
  h2o_accept(srv->tls != NULL && !l->is_unix ? &srv->tls_accept_ctx : &srv->accept_ctx, c->sock);
}

void lh_conn_shut(lh_conn *c, int how) {
  uv_os_fd_t fd;
  if (!c->sock || c->shut_rdwr || (how == SHUT_RD && c->shut_rd))
    return;
  if (uv_fileno(&c->io.handle, &fd) != 0)
    return;
  shutdown(fd, how);
  c->shut_rd = 1;
  if (how == SHUT_RDWR)
    c->shut_rdwr = 1;
}

void lh_conn_released(lh_conn *c) {
  if (c->closed) {
    free_conn_if_done(c);
    return;
  }
  if (c->srv->state != LH_RUNNING && c->ws == NULL)
    lh_conn_shut(c, SHUT_RD);
}

/* ---- write timeout ---------------------------------------------------------------- */

/* The bytes written to c and not yet taken by its client: libuv's write
 * queue (h2o 2.2.5 hands each write to uv_write as it is, one in flight
 * per connection, and libuv counts the queue down as the kernel takes
 * bytes) plus the kernel's send queue (SIOCOUTQ: on TCP the bytes not yet
 * acknowledged, on a Unix socket those the peer has not read). libuv's
 * queue alone moves too coarsely: the kernel wakes a writer only once a
 * third of its send buffer (megabytes, autotuned) is free, so a client
 * reading steadily at 400 KB/s left it unchanged for more than 300 ms. */
static size_t unsent(lh_conn *c) {
  size_t q = uv_stream_get_write_queue_size(&c->io.stream);
  uv_os_fd_t fd;
  int k = 0;
  if (uv_fileno(&c->io.handle, &fd) == 0 && ioctl(fd, SIOCOUTQ, &k) == 0 && k > 0)
    q += (size_t)k;
  return q;
}

/* A connection whose client took none of the bytes waiting for it for
 * write_timeout_ms. What waits is unsent(c), which changes whenever the
 * client takes bytes (and grows only when a write completed, which is
 * progress too: what the application writes meanwhile waits in the
 * stream's buffer, not there). So none waiting, or a different count
 * since the last look, is progress; the same count, not zero, for the
 * whole timeout is a client that does not read. It is closed:
 * SO_LINGER 0 first, so that the close resets it and the kernel drops the
 * megabytes it holds for a client that will not read them, then shut both
 * ways, which fails the write h2o waits on (the same way a stream that
 * overflowed is closed), and h2o closes the connection and frees its
 * requests: their holders get on_gone. A connection with nothing to write
 * is never touched, however long it is idle (an event stream with nothing
 * to say; a request the application holds). */
static void write_timed_out(lh_conn *c) {
  c->srv->stats.write_timeouts++;
  if (!c->is_unix) {
    uv_os_fd_t fd;
    struct linger lg = {1, 0};
    if (uv_fileno(&c->io.handle, &fd) == 0)
      setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  }
  lh_conn_shut(c, SHUT_RDWR);
}

static void on_write_timer(uv_timer_t *t) {
  lith_http_server *srv = t->data;
  uint64_t now = uv_now(srv->loop);
  for (lh_conn *c = srv->conns; c; c = c->next) {
    if (!c->sock || c->closed || c->shut_rdwr)
      continue;
    size_t q = unsent(c);
    if (q == 0 || q != c->wq_seen) {
      c->wq_seen = q;
      c->wq_since = now;
    } else if (now - c->wq_since >= srv->write_timeout_ms) {
      write_timed_out(c);
    }
  }
}

/* ---- stop ----------------------------------------------------------------------- */

/* The close callback of our own handles (two timers, the watch poll). */
static void on_timer_closed(uv_handle_t *handle) {
  lith_http_server *srv = handle->data;
  if (--srv->timers_open > 0)
    return;
  srv->state = LH_STOPPED;
  if (srv->on_stopped)
    srv->on_stopped(srv, srv->stopped_arg);
}

void lh_maybe_finish(lith_http_server *srv) {
  if (srv->state != LH_STOPPING || srv->listeners_open || srv->conns_open || srv->q_head || srv->ws_open)
    return;
  srv->state = LH_CLOSING;
  uv_close((uv_handle_t *)&srv->defer_timer, on_timer_closed);
  uv_close((uv_handle_t *)&srv->deadline_timer, on_timer_closed);
  uv_close((uv_handle_t *)&srv->write_timer, on_timer_closed);
  uv_close((uv_handle_t *)&srv->watch_poll, on_timer_closed);
  uv_close((uv_handle_t *)&srv->watch_timer, on_timer_closed);
}

static void on_deadline(uv_timer_t *t) {
  lith_http_server *srv = t->data;
  for (lith_http_req *h = srv->reqs, *next; h; h = next) {
    next = h->next;
    if (h->h2o &&
        (h->state == LH_REQ_NEW || h->state == LH_REQ_HELD || (h->state == LH_REQ_STREAM && !h->ended))) {
      lh_mark_gone(h);
      lh_abort_now(h, 503);
    }
  }
  for (lh_conn *c = srv->conns; c; c = c->next)
    lh_conn_shut(c, SHUT_RDWR);
}

int lith_http_server_stop(lith_http_server *srv, unsigned grace_ms, lith_http_stopped_cb on_stopped,
                          void *arg) {
  if (!srv)
    return lh_fail(LITH_HTTP_MISUSE, "lith_http_server_stop: no server");
  if (srv->state != LH_RUNNING)
    return lh_fail(LITH_HTTP_STOPPING, "lith_http_server_stop: already stopping");
  srv->state = LH_STOPPING;
  srv->on_stopped = on_stopped;
  srv->stopped_arg = arg;
  while (srv->listeners) {
    lh_listener *l = srv->listeners;
    srv->listeners = l->next;
    close_listener(l);
  }
  h2o_context_request_shutdown(&srv->ctx);
  for (lith_http_req *h = srv->reqs; h; h = h->next)
    if (h->state == LH_REQ_STREAM && h->h2o && !h->ended && !h->finish) {
      lh_mark_gone(h);
      lh_stream_finish(h);
    }
  lh_ws_stop(srv); /* a close frame each: its client answers, then it ends */
  for (lh_conn *c = srv->conns; c; c = c->next)
    if (c->live == 0 && c->ws == NULL)
      lh_conn_shut(c, SHUT_RD);
  uv_timer_start(&srv->deadline_timer, on_deadline, grace_ms, 0);
  lh_maybe_finish(srv);
  return LITH_HTTP_OK;
}

/* ---- counters --------------------------------------------------------------------- */

void lith_http_stats_get(const lith_http_server *srv, lith_http_stats *out) {
  if (!out)
    return;
  if (!srv) {
    memset(out, 0, sizeof *out);
    return;
  }
  *out = srv->stats;
}

uint64_t lith_http_status_count(const lith_http_server *srv, int status) {
  return srv && status >= LITH_HTTP_STATUS_MIN && status <= LITH_HTTP_STATUS_MAX ? srv->by_status[status] : 0;
}
