/*
 * The framing guard: an HTTP/1 request whose head leaves the length of its
 * body open to interpretation is answered 400 and its connection closed,
 * before anything acts on it (issue 10, item 6).
 *
 * Why. h2o 2.2.5 frames a body by the first Content-Length, or by the last
 * Transfer-Encoding when there is one, and ignores the other such headers.
 * A proxy in front that picks another one forwards what it takes for one
 * request, and we read the rest of its body as a next request on the same
 * connection: a smuggled INSERT ran. h2o also takes Content-Length and
 * Transfer-Encoding out of req->headers, so the duplicates are invisible
 * there; we read the raw head again instead.
 *
 * Where. This is the first handler on both of the host's paths ("/" and the
 * fallback), so every HTTP/1 request that h2o has framed passes here before
 * a route's handler, or h2o's own 404, runs. The head is still at the start
 * of the socket's input buffer: h2o consumes a request's bytes only once its
 * response is sent, and decodes a chunked body in place behind the head.
 * For the same reason nothing after the head has been parsed yet: h2o reads
 * the next request only after this one's response, so a 400 with keep-alive
 * off closes the connection with the rest unread. A pre-scan in the socket's
 * read callback would see the bytes earlier but not reliably: h2o re-arms
 * its own callback after every response and parses pipelined requests
 * straight from its buffer, with no callback of ours in between. Cost: one
 * pass over the head's lines (memchr), next to h2o's full parse of it.
 *
 * Refused (400, our JSON error shape, Connection: close): more than one
 * Content-Length, even with equal values (RFC 9112 lets a recipient merge
 * equal ones; no client sends two, and which one a proxy used is exactly
 * what cannot be known); more than one Transfer-Encoding; Content-Length
 * with Transfer-Encoding; a Transfer-Encoding other than exactly "chunked"
 * (h2o refuses others itself; "Chunked" too here, a proxy comparing
 * case-sensitively would not decode it); Transfer-Encoding on HTTP/1.0
 * (RFC 9112 6.1: faulty framing); a Content-Length that is not all digits;
 * obs-fold (a header line continued on the next, which a proxy may join to
 * the line before); and a line ending in a bare LF (h2o accepts one as a
 * line end, a proxy may keep it inside a value). Whitespace before a colon
 * never gets here: h2o's parser refuses it with its own 400 and closes.
 *
 * Not covered: a request with "Upgrade: h2c". h2o upgrades the connection
 * before any handler runs and the request comes back as HTTP/2 stream 1,
 * its HTTP/1 head kept in a private field of h2o's connection (whose header,
 * http2_internal.h, cannot even be included: khash.h is not installed). What
 * follows that head is read as HTTP/2 frames, never as an HTTP/1 request; a
 * proxy that passes Upgrade on relays raw bytes after the 101 anyway, and
 * lith_http_options.http2 = 0 turns upgrades off. Other HTTP/2 requests
 * carry their length in frames.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

static int name_is(const char *p, size_t len, const char *name, size_t name_len) {
  return len == name_len && strncasecmp(p, name, len) == 0;
}

static int all_digits(const char *p, size_t len) {
  if (len == 0)
    return 0;
  for (size_t i = 0; i < len; i++)
    if (p[i] < '0' || p[i] > '9')
      return 0;
  return 1;
}

const char *lh_guard_check(const char *buf, size_t len, const char *method, size_t method_len, int http10) {
  if (!buf)
    return "the request head could not be read again";
  const char *p = buf, *end = buf + len;
  unsigned n_cl = 0, n_te = 0;
  int cl_bad = 0, te_other = 0;

  /* h2o skips one empty line before a request (clients that end a body with
   * CRLF), so we do too */
  if (end - p >= 2 && p[0] == '\r' && p[1] == '\n')
    p += 2;
  /* buf must hold this request's head: a check of our reading of h2o */
  if ((size_t)(end - p) <= method_len || memcmp(p, method, method_len) != 0 || p[method_len] != ' ')
    return "the request head could not be read again";
  for (int first = 1;; first = 0) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl) /* h2o found the end of this head, so we must */
      return "the request head could not be read again";
    if (nl == buf || nl[-1] != '\r')
      return "a line of the request head ends in a bare LF";
    const char *eol = nl - 1;
    if (!first) {
      if (eol == p)
        break; /* the empty line: the end of the head */
      if (*p == ' ' || *p == '\t')
        return "a header line is continued on the next (obs-fold)";
      const char *colon = memchr(p, ':', (size_t)(eol - p));
      if (!colon)
        return "a header line has no colon";
      size_t nlen = (size_t)(colon - p);
      const char *v = colon + 1;
      while (v < eol && (*v == ' ' || *v == '\t'))
        v++;
      size_t vlen = (size_t)(eol - v);
      if (name_is(p, nlen, "content-length", 14)) {
        n_cl++;
        cl_bad |= !all_digits(v, vlen);
      } else if (name_is(p, nlen, "transfer-encoding", 17)) {
        n_te++;
        te_other |= !(vlen == 7 && memcmp(v, "chunked", 7) == 0);
      }
    }
    p = nl + 1;
  }
  if (n_cl > 1)
    return "more than one Content-Length";
  if (n_te > 1)
    return "more than one Transfer-Encoding";
  if (n_cl && n_te)
    return "Content-Length together with Transfer-Encoding";
  if (te_other)
    return "a Transfer-Encoding other than chunked";
  if (n_te && http10)
    return "Transfer-Encoding in an HTTP/1.0 request";
  if (cl_bad)
    return "a Content-Length that is not a number";
  return NULL;
}

/* 400 with the reason and keep-alive off: h2o closes the connection once it
 * is sent, and never parses what followed the head. */
static void refuse(h2o_req_t *req, const char *why) {
  size_t len = 0;
  char *json = lh_error_json(400, why, &len);
  req->http1_is_persistent = 0;
  req->res.status = 400;
  req->res.reason = lith_http_reason(400);
  if (json)
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL,
                   H2O_STRLIT("application/json"));
  req->res.content_length = json ? len : 0;
  h2o_send_inline(req, json ? json : "", json ? len : 0); /* copies */
  free(json);
}

static int guard_on_req(h2o_handler_t *self, h2o_req_t *req) {
  (void)self;
  if (req->version >= 0x200)
    return -1;
  h2o_socket_t *sock = req->conn->callbacks->get_socket ? req->conn->callbacks->get_socket(req->conn) : NULL;
  const char *why = sock ? lh_guard_check(sock->input->bytes, sock->input->size, req->input.method.base,
                                          req->input.method.len, req->version == 0x100)
                         : "the request head could not be read again";
  if (!why)
    return -1; /* on to the next handler */
  refuse(req, why);
  return 0;
}

void lh_guard_add(h2o_pathconf_t *path) {
  h2o_handler_t *h = h2o_create_handler(path, sizeof *h);
  h->on_req = guard_on_req;
}
