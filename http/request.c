/*
 * Requests: dispatch from h2o to a route's handler, the request handle and
 * its lifetime (see internal.h), reading a request, whole responses, and
 * knowing when the client has gone.
 *
 * Copy, don't point. The handle copies the request (method, path, query,
 * headers, body) into one allocation when it is made, because an
 * application keeps pointers from a request it answers later (lithd passes
 * the body to a command that runs on the writer thread) and h2o frees its
 * own copy the moment the client leaves. One memcpy of at most max_body
 * bytes is cheap next to a use-after-free.
 *
 * While the application holds an HTTP/1 request, watch.c watches for its
 * client leaving; the watch ends before the final h2o_send.
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

/* ---- lifetime --------------------------------------------------------------- */

static void req_free(lith_http_req *h) {
  lith_http_server *srv = h->srv;
  if (h->prev)
    h->prev->next = h->next;
  else
    srv->reqs = h->next;
  if (h->next)
    h->next->prev = h->prev;
  free(h->out);
  free(h->wait);
  free(h);
}

void lh_req_unref(lith_http_req *h) {
  if (--h->refs == 0)
    req_free(h);
}

void lh_req_complete(lith_http_req *h) {
  if (!h->app)
    return;
  h->app = 0;
  h->notify = 0;
  h->on_gone = NULL;
  h->srv->stats.pending--;
  lh_req_unref(h);
}

static void queue_push(lith_http_req *h) {
  lith_http_server *srv = h->srv;
  if (h->queued)
    return;
  if (srv->state == LH_CLOSING || srv->state == LH_STOPPED) {
    h->notify = 0; /* the defer timer is closed: nothing more is delivered */
    h->abort = 0;
    return;
  }
  h->queued = 1;
  h->refs++;
  h->q_next = NULL;
  if (srv->q_tail)
    srv->q_tail->q_next = h;
  else
    srv->q_head = h;
  srv->q_tail = h;
  uv_timer_start(&srv->defer_timer, lh_defer_cb, 0, 0);
}

void lh_mark_gone(lith_http_req *h) {
  if (h->gone)
    return;
  h->gone = 1;
  if (!h->app)
    return;
  h->srv->stats.gone++;
  if (h->on_gone) {
    h->notify = 1;
    queue_push(h);
  }
}

void lh_queue_abort(lith_http_req *h, int status) {
  h->abort = 1;
  h->abort_status = status;
  queue_push(h);
}

void lh_defer_cb(uv_timer_t *t) {
  lith_http_server *srv = t->data;
  lith_http_req *h;
  while ((h = srv->q_head) != NULL) {
    srv->q_head = h->q_next;
    if (!srv->q_head)
      srv->q_tail = NULL;
    h->queued = 0;
    if (h->abort) {
      h->abort = 0;
      if (h->h2o)
        lh_abort_now(h, h->abort_status);
    }
    if (h->notify) {
      h->notify = 0;
      if (h->app && h->on_gone)
        h->on_gone(h, h->gone_arg); /* may complete h: our queue reference keeps it */
    }
    lh_req_unref(h);
  }
  lh_maybe_finish(srv);
}

/* h2o cleared the request's pool: it will never look at the request again. */
static void on_sentinel_dispose(void *p) {
  lith_http_req *h = *(lith_http_req **)p;
  lith_http_server *srv = h->srv;
  lh_conn *c = h->conn;
  lh_watch_stop(h); /* also takes it out of the later list */
  if (h->state == LH_REQ_STREAM)
    srv->stats.streams_open--;
  h->h2o = NULL;
  h->conn = NULL;
  h->sending = 0;
  lh_mark_gone(h); /* only matters if the application still holds it */
  if (c && --c->live == 0)
    lh_conn_released(c);
  lh_req_unref(h);
}

/* ---- answering ------------------------------------------------------------------ */

void lh_set_status(lith_http_req *h, int status) {
  h2o_req_t *req = h->h2o;
  req->res.status = status;
  req->res.reason = lith_http_reason(status);
  if (h->srv->state != LH_RUNNING)
    req->http1_is_persistent = 0;
}

static void add_header(h2o_req_t *req, const char *name, size_t nlen, const char *value) {
  h2o_iovec_t v = h2o_strdup(&req->pool, value, strlen(value));
  const h2o_token_t *tok = h2o_lookup_token(name, nlen);
  if (tok) {
    h2o_add_header(&req->pool, &req->res.headers, tok, NULL, v.base, v.len);
  } else {
    h2o_iovec_t n = h2o_strdup(&req->pool, name, nlen);
    h2o_add_header_by_str(&req->pool, &req->res.headers, n.base, n.len, 0, NULL, v.base, v.len);
  }
}

/* Send status + body now, h2o side only (the caller handles the handle). */
static void send_whole(lith_http_req *h, int status, const char *ctype, const void *body, size_t len) {
  h2o_req_t *req = h->h2o;
  lh_watch_stop(h);
  lh_set_status(h, status);
  if (ctype)
    add_header(req, "content-type", 12, ctype);
  req->res.content_length = len;
  h->state = LH_REQ_ANSWERED;
  h2o_send_inline(req, len ? body : "", len);
}

static void send_error(lith_http_req *h, int status, const char *msg) {
  size_t len;
  char *json = lh_error_json(status, msg, &len);
  if (json)
    send_whole(h, status, "application/json", json, len);
  else
    send_whole(h, status, NULL, NULL, 0);
  free(json);
}

/* End the h2o side of a request the application still holds, from our side:
 * 499 (the client left: nobody reads it, h2o then closes the connection) or
 * 503 (the stop deadline), or a failed stream. */
void lh_abort_now(lith_http_req *h, int status) {
  if (!h->h2o)
    return;
  lh_watch_stop(h);
  if (h->state == LH_REQ_STREAM) {
    lh_stream_fail(h);
    return;
  }
  if (h->state == LH_REQ_ANSWERED)
    return;
  h->h2o->http1_is_persistent = 0;
  memset(&h->h2o->res.headers, 0, sizeof h->h2o->res.headers); /* not the app's headers */
  if (status == 503)
    add_header(h->h2o, "retry-after", 11, "1");
  send_error(h, status, status == 503 ? "server stopping" : "client closed request");
}

int lith_http_add_header(lith_http_req *h, const char *name, const char *value) {
  char lower[256];
  size_t n = name ? strlen(name) : 0;
  if (!h || !h->app || !n || n >= sizeof lower || !value || strpbrk(value, "\r\n") ||
      h->state == LH_REQ_ANSWERED || h->state == LH_REQ_STREAM)
    return lh_fail(LITH_HTTP_MISUSE, "lith_http_add_header: a held request not yet answered, "
                                     "a name and a value without line breaks");
  for (size_t i = 0; i < n; i++) {
    char ch = name[i];
    if (ch <= ' ' || ch >= 0x7f || ch == ':')
      return lh_fail(LITH_HTTP_MISUSE, "lith_http_add_header: bad header name %s", name);
    lower[i] = (char)(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
  }
  lower[n] = '\0';
  if (h->gone || !h->h2o)
    return lh_fail(LITH_HTTP_GONE, "lith_http_add_header: the client has gone");
  add_header(h->h2o, lower, n, value);
  return LITH_HTTP_OK;
}

int lith_http_respond(lith_http_req *h, int status, const char *content_type, const void *body, size_t len) {
  if (!h || !h->app)
    return lh_fail(LITH_HTTP_MISUSE, "lith_http_respond: the request is not held");
  if (h->gone || !h->h2o) { /* whatever else is wrong: the handle is done */
    lh_req_complete(h);
    return lh_fail(LITH_HTTP_GONE, "lith_http_respond: the client has gone");
  }
  if (h->state == LH_REQ_ANSWERED || h->state == LH_REQ_STREAM || status < 200 || status > 599 ||
      (!body && len) || (content_type && strpbrk(content_type, "\r\n")))
    return lh_fail(LITH_HTTP_MISUSE, "lith_http_respond: a request not yet answered, "
                                     "a status 200..599, a one-line content type and a body");
  send_whole(h, status, content_type, body, len);
  lh_req_complete(h);
  return LITH_HTTP_OK;
}

int lith_http_respond_json(lith_http_req *h, int status, const char *json) {
  if (!json)
    return lh_fail(LITH_HTTP_MISUSE, "lith_http_respond_json: no JSON");
  return lith_http_respond(h, status, "application/json", json, strlen(json));
}

int lith_http_respond_error(lith_http_req *h, int status, const char *message) {
  size_t len;
  char *json = lh_error_json(status, message ? message : "", &len);
  if (!json) {
    /* still complete the request, with no body rather than none at all */
    int rc = lith_http_respond(h, status, NULL, NULL, 0);
    return rc == LITH_HTTP_OK ? lh_fail(LITH_HTTP_NOMEM, "lith_http_respond_error: out of memory") : rc;
  }
  int rc = lith_http_respond(h, status, "application/json", json, len);
  free(json);
  return rc;
}

void lith_http_on_gone(lith_http_req *h, lith_http_gone_cb cb, void *arg) {
  if (!h || !h->app)
    return;
  h->on_gone = cb;
  h->gone_arg = arg;
  if (cb && h->gone) {
    h->notify = 1;
    queue_push(h);
  } else if (!cb) {
    h->notify = 0;
  }
}

int lith_http_is_gone(const lith_http_req *h) { return !h || h->gone || !h->h2o; }

/* ---- dispatch -------------------------------------------------------------------- */

static size_t copy_str(char **dst, const char *src, size_t len) {
  if (len)
    memcpy(*dst, src, len);
  (*dst)[len] = '\0';
  *dst += len + 1;
  return len;
}

static int is_loopback(const struct sockaddr *sa) {
  if (sa->sa_family == AF_UNIX)
    return 1;
  if (sa->sa_family == AF_INET)
    return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
  if (sa->sa_family == AF_INET6) {
    const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
  }
  return 0;
}

/* What the socket says of req's peer, into out[0..cap); 1 if on this machine. */
static int ask_peer(h2o_req_t *req, const lh_conn *c, char *out, size_t cap) {
  struct sockaddr_storage ss;
  char addr[INET6_ADDRSTRLEN];
  memset(&ss, 0, sizeof ss);
  if (c && c->is_unix) {
    snprintf(out, cap, "unix");
    return 1;
  }
  socklen_t len = req->conn->callbacks->get_peername
                      ? req->conn->callbacks->get_peername(req->conn, (struct sockaddr *)&ss)
                      : 0;
  if (len == 0) {
    snprintf(out, cap, "unknown");
    return 0;
  }
  if (ss.ss_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
    inet_ntop(AF_INET, &in->sin_addr, addr, sizeof addr);
    snprintf(out, cap, "%s:%u", addr, ntohs(in->sin_port));
  } else if (ss.ss_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
    inet_ntop(AF_INET6, &in6->sin6_addr, addr, sizeof addr);
    snprintf(out, cap, "[%s]:%u", addr, ntohs(in6->sin6_port));
  } else {
    snprintf(out, cap, "%s", ss.ss_family == AF_UNIX ? "unix" : "unknown");
    return ss.ss_family == AF_UNIX;
  }
  return is_loopback((struct sockaddr *)&ss);
}

int lh_peer(h2o_req_t *req, lh_conn *c, char *out, size_t cap) {
  if (c == NULL)
    return ask_peer(req, c, out, cap);
  if (!c->peer_known) { /* inet_ntop and two printfs: once, not twice per request */
    c->peer_loopback = ask_peer(req, c, c->peer, sizeof c->peer) != 0;
    c->peer_known = 1;
  }
  size_t n = strlen(c->peer);
  if (cap > 0) {
    n = n < cap - 1 ? n : cap - 1;
    memcpy(out, c->peer, n);
    out[n] = '\0';
  }
  return c->peer_loopback;
}

static void fill_peer(lith_http_req *h, h2o_req_t *req, lh_conn *c) {
  h->loopback = lh_peer(req, c, h->peer, sizeof h->peer);
}

static void on_sentinel_dispose(void *p);

/* The handle for req, with the request copied in; NULL if out of memory. */
static lith_http_req *req_create(lith_http_server *srv, h2o_req_t *req, lh_conn *c) {
  const char *query = "";
  size_t qlen = 0;
  if (req->query_at != SIZE_MAX) {
    query = req->path.base + req->query_at + 1;
    qlen = req->path.len - req->query_at - 1;
  }
  size_t body_len = req->entity.base ? req->entity.len : 0;
  size_t n = req->headers.size;
  /* h2o moves Host (HTTP/1) and :authority (HTTP/2) out of the header list
   * into req->authority: put it back first, as "host", for both. */
  int host = req->authority.len != 0;
  size_t strings = req->method.len + 1 + req->path_normalized.len + 1 + qlen + 1 + body_len + 1;
  if (host)
    strings += sizeof "host" + req->authority.len + 1;
  for (size_t i = 0; i < n; i++)
    strings += req->headers.entries[i].name->len + 1 + req->headers.entries[i].value.len + 1;
  lith_http_req *h = calloc(1, sizeof *h + (n + 1) * sizeof(lh_header) + strings);
  if (!h)
    return NULL;
  h->headers = (lh_header *)(h + 1);
  char *p = (char *)(h->headers + n + 1);
  h->method = p;
  copy_str(&p, req->method.base, req->method.len);
  h->path = p;
  copy_str(&p, req->path_normalized.base, req->path_normalized.len);
  h->query = p;
  copy_str(&p, query, qlen);
  if (host) {
    h->headers[0].name = p;
    copy_str(&p, "host", 4);
    h->headers[0].value = p;
    copy_str(&p, req->authority.base, req->authority.len);
    h->n_headers = 1;
  }
  for (size_t i = 0; i < n; i++) {
    const h2o_header_t *hd = &req->headers.entries[i];
    lh_header *out = &h->headers[h->n_headers++];
    out->name = p;
    copy_str(&p, hd->name->base, hd->name->len);
    out->value = p;
    copy_str(&p, hd->value.base, hd->value.len);
  }
  h->body = p;
  h->body_len = copy_str(&p, req->entity.base, body_len);
  h->version = req->version;
  h->head = h2o_memis(req->method.base, req->method.len, H2O_STRLIT("HEAD"));
  fill_peer(h, req, c);

  lith_http_req **sentinel = h2o_mem_alloc_shared(&req->pool, sizeof *sentinel, on_sentinel_dispose);
  *sentinel = h;
  h->srv = srv;
  h->h2o = req;
  h->conn = c;
  h->app = 1;
  h->refs = 3; /* h2o (the sentinel), the application, the dispatcher */
  h->state = LH_REQ_NEW;
  h->next = srv->reqs;
  if (srv->reqs)
    srv->reqs->prev = h;
  srv->reqs = h;
  srv->stats.pending++;
  if (c)
    c->live++;
  return h;
}

static void refuse(lith_http_req *h, int status, const char *msg) {
  send_error(h, status, msg);
  lh_req_complete(h);
}

int lh_on_req(h2o_handler_t *self, h2o_req_t *req) {
  lith_http_server *srv = ((lh_handler *)self)->srv;
  lith_http_req *h = req_create(srv, req, lh_conn_of(req));
  if (!h) {
    static const char oom[] = "{\"error\":{\"code\":\"service_unavailable\",\"message\":\"out of memory\"}}";
    req->res.status = 503;
    req->res.reason = lith_http_reason(503);
    req->res.content_length = sizeof oom - 1;
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL,
                   H2O_STRLIT("application/json"));
    h2o_send_inline(req, oom, sizeof oom - 1);
    return 0;
  }
  char allow[256];
  const lh_route *r;
  const char *bad;
  if (srv->state != LH_RUNNING) {
    add_header(req, "retry-after", 11, "1");
    refuse(h, 503, "server stopping");
  } else if (h->body_len > srv->max_body) { /* h2o checks HTTP/1 itself; this is for HTTP/2 */
    refuse(h, 413, "payload too large");
  } else if ((bad = lh_route_bad_escape(req->path.base, req->path.len)) != NULL) {
    refuse(h, 404, bad); /* router.c: decoded, it would reach a route as two segments */
  } else if (!(r = lh_route_find(srv, h->method, h->path, req->path_normalized.len, allow, sizeof allow))) {
    if (allow[0]) {
      add_header(req, "allow", 5, allow);
      refuse(h, 405, "method not allowed");
    } else {
      refuse(h, 404, "not found");
    }
  } else {
    int rc = r->fn(h, r->arg);
    if (h->app) {
      if (rc == LITH_HTTP_PENDING) {
        if (h->state == LH_REQ_NEW)
          h->state = LH_REQ_HELD;
        lh_watch_later(h);
      } else if (h->state == LH_REQ_STREAM) {
        lith_http_stream_end(h);
      } else if (h->h2o && !h->gone) {
        refuse(h, 500, "the handler sent no response");
      } else {
        lh_req_complete(h);
      }
    }
  }
  lh_req_unref(h); /* the dispatcher's reference */
  return 0;
}

/* ---- reading a request ---------------------------------------------------------- */

const char *lith_http_req_method(const lith_http_req *h) { return h->method; }
const char *lith_http_req_path(const lith_http_req *h) { return h->path; }
const char *lith_http_req_query(const lith_http_req *h) { return h->query; }

const char *lith_http_req_header(const lith_http_req *h, const char *name) {
  for (size_t i = 0; i < h->n_headers; i++)
    if (!strcasecmp(h->headers[i].name, name))
      return h->headers[i].value;
  return NULL;
}

size_t lith_http_req_header_count(const lith_http_req *h) { return h->n_headers; }

int lith_http_req_header_at(const lith_http_req *h, size_t i, const char **name, const char **value) {
  if (i >= h->n_headers)
    return lh_fail(LITH_HTTP_MISUSE, "lith_http_req_header_at: %zu is past the last header", i);
  if (name)
    *name = h->headers[i].name;
  if (value)
    *value = h->headers[i].value;
  return LITH_HTTP_OK;
}

const char *lith_http_req_body(const lith_http_req *h, size_t *len) {
  if (len)
    *len = h->body_len;
  return h->body;
}

const char *lith_http_req_peer(const lith_http_req *h) { return h->peer; }
int lith_http_req_is_loopback(const lith_http_req *h) { return h->loopback; }
int lith_http_req_version(const lith_http_req *h) { return h->version; }
lith_http_server *lith_http_req_server(const lith_http_req *h) { return h->srv; }
