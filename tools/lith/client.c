/*
 * lith client — one HTTP/1.1 request per connection (see client.h).
 *
 * Design:
 *   - The socket is non-blocking from its creation; every wait (connect,
 *     send, receive) is a poll() bounded by what is left of the request's
 *     single deadline (CLOCK_MONOTONIC), so a stuck server costs at most the
 *     timeout, whatever stage it sticks in.
 *   - Received bytes go into one growing buffer (struct conn); the parser
 *     reads from it through need()/line(), which receive more only when the
 *     bytes asked for are not there yet. Consumed bytes are dropped when the
 *     buffer is refilled, so a large body is held about twice at most (the
 *     raw bytes being decoded and the decoded body).
 *   - The head is copied whole into the response and the header table points
 *     into that copy, so the response owns everything it shows.
 *   - Framing as RFC 9112 section 6.3 orders it: no body for 1xx/204/304,
 *     else Transfer-Encoding: chunked, else Content-Length, else up to the
 *     end of the connection. Anything else (another transfer coding, two
 *     different lengths, a bad chunk size) is a protocol error rather than a
 *     guess: the CLI must never print half an answer as if it were whole.
 *   - A send that fails because the server closed early (EPIPE, ECONNRESET)
 *     still reads: a server may answer a request it refuses (413) before
 *     reading all of it.
 */
#include "client.h"

#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "lith.h" /* LITH_VERSION */

#define RECV_CHUNK 16384

/* ---- Errors ------------------------------------------------------------- */

static int fail(char *err, size_t errsz, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errsz, int code, const char *fmt, ...) {
  if (err != NULL && errsz > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errsz, fmt, ap);
    va_end(ap);
  }
  return code;
}

/* ---- Endpoints ---------------------------------------------------------- */

int lithc_endpoint_url(lithc_endpoint *ep, const char *url, char *err, size_t errsz) {
  const char *p, *auth_end, *host, *host_end, *port_s = NULL;
  size_t hlen, plen;
  long port = 80;

  memset(ep, 0, sizeof *ep);
  if (strncasecmp(url, "https://", 8) == 0)
    return fail(err, errsz, LITHC_BAD_ARG,
                "%s: https is not supported (lithd speaks plain HTTP; for another machine put a "
                "TLS proxy in front of it)",
                url);
  if (strncasecmp(url, "http://", 7) != 0)
    return fail(err, errsz, LITHC_BAD_ARG, "%s: the URL must look like http://HOST:PORT", url);
  p = url + 7;
  auth_end = p + strcspn(p, "/?#");
  if (memchr(p, '@', (size_t)(auth_end - p)) != NULL)
    return fail(err, errsz, LITHC_BAD_ARG, "%s: user names in the URL are not supported", url);

  if (*p == '[') { /* [IPv6] */
    host = p + 1;
    host_end = memchr(host, ']', (size_t)(auth_end - host));
    if (host_end == NULL)
      return fail(err, errsz, LITHC_BAD_ARG, "%s: '[' without ']' in the host", url);
    if (host_end + 1 < auth_end) {
      if (host_end[1] != ':')
        return fail(err, errsz, LITHC_BAD_ARG, "%s: junk after the IPv6 address", url);
      port_s = host_end + 2;
    }
  } else {
    host = p;
    host_end = memchr(p, ':', (size_t)(auth_end - p));
    if (host_end != NULL)
      port_s = host_end + 1;
    else
      host_end = auth_end;
  }
  hlen = (size_t)(host_end - host);
  if (hlen == 0) return fail(err, errsz, LITHC_BAD_ARG, "%s: no host in the URL", url);
  if (hlen >= sizeof ep->host) return fail(err, errsz, LITHC_BAD_ARG, "%s: host too long", url);
  memcpy(ep->host, host, hlen);
  ep->host[hlen] = '\0';

  if (port_s != NULL) {
    const char *q;
    if (port_s == auth_end) return fail(err, errsz, LITHC_BAD_ARG, "%s: empty port", url);
    port = 0;
    for (q = port_s; q < auth_end; q++) {
      if (!isdigit((unsigned char)*q) || port > 65535)
        return fail(err, errsz, LITHC_BAD_ARG, "%s: the port must be a number 1-65535", url);
      port = port * 10 + (*q - '0');
    }
    if (port < 1 || port > 65535)
      return fail(err, errsz, LITHC_BAD_ARG, "%s: the port must be a number 1-65535", url);
  }
  ep->port = (int)port;

  /* An optional path prefix, for a lithd behind a reverse proxy. */
  if (strpbrk(auth_end, "?#") != NULL)
    return fail(err, errsz, LITHC_BAD_ARG, "%s: no query or fragment allowed in the URL", url);
  plen = strlen(auth_end);
  while (plen > 0 && auth_end[plen - 1] == '/') plen--;
  if (plen >= sizeof ep->base_path)
    return fail(err, errsz, LITHC_BAD_ARG, "%s: path prefix too long", url);
  memcpy(ep->base_path, auth_end, plen);
  ep->base_path[plen] = '\0';
  return LITHC_OK;
}

int lithc_endpoint_unix(lithc_endpoint *ep, const char *path, char *err, size_t errsz) {
  size_t n = strlen(path);
  memset(ep, 0, sizeof *ep);
  if (n == 0) return fail(err, errsz, LITHC_BAD_ARG, "the Unix socket path is empty");
  if (n >= sizeof ep->unix_path)
    return fail(err, errsz, LITHC_BAD_ARG,
                "%s: a Unix socket path must be shorter than %zu bytes", path,
                sizeof ep->unix_path);
  memcpy(ep->unix_path, path, n + 1);
  ep->is_unix = 1;
  return LITHC_OK;
}

const char *lithc_endpoint_name(const lithc_endpoint *ep, char *buf, size_t bufsz) {
  if (ep->is_unix) {
    snprintf(buf, bufsz, "unix:%s", ep->unix_path);
  } else {
    int v6 = strchr(ep->host, ':') != NULL;
    snprintf(buf, bufsz, "http://%s%s%s:%d%s", v6 ? "[" : "", ep->host, v6 ? "]" : "", ep->port,
             ep->base_path);
  }
  return buf;
}

/* ---- The connection ----------------------------------------------------- */

struct conn {
  int fd;
  lithc_source src;         /* if set, bytes come from src(src_ctx, ...), not fd */
  void *src_ctx;
  struct timespec deadline; /* meaningful when has_deadline */
  int has_deadline;
  int timeout_ms;
  int sent;                 /* the whole request went out */
  char *buf;                /* received bytes; [pos, len) not consumed yet */
  size_t pos, len, cap;
  size_t total;             /* bytes received in all */
  int eof;
  const char *peer;         /* for messages */
  char *err;
  size_t errsz;
};

/* Milliseconds left before the deadline (rounded up), -1 without one. */
static int remaining_ms(const struct conn *c) {
  struct timespec now;
  int64_t ms;
  if (!c->has_deadline) return -1;
  clock_gettime(CLOCK_MONOTONIC, &now);
  ms = ((int64_t)c->deadline.tv_sec - now.tv_sec) * 1000 +
       ((int64_t)c->deadline.tv_nsec - now.tv_nsec + 999999) / 1000000;
  if (ms < 0) ms = 0;
  return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

static int timed_out(const struct conn *c, const char *what) {
  double s = c->timeout_ms / 1000.0;
  if (c->sent)
    return fail(c->err, c->errsz, LITHC_TIMEOUT,
                "no answer from %s within %g s (the request was sent: whether it ran is unknown)",
                c->peer, s);
  return fail(c->err, c->errsz, LITHC_TIMEOUT, "timed out after %g s %s %s", s, what, c->peer);
}

/* Wait until fd is ready for `events`. LITHC_OK, or LITHC_TIMEOUT/LITHC_IO. */
static int wait_for(struct conn *c, short events, const char *what) {
  for (;;) {
    struct pollfd p = {c->fd, events, 0};
    int ms = remaining_ms(c);
    int n;
    if (ms == 0) return timed_out(c, what);
    n = poll(&p, 1, ms);
    if (n > 0) return LITHC_OK; /* errors and hang-ups show in the next call */
    if (n == 0) return timed_out(c, what);
    if (errno != EINTR)
      return fail(c->err, c->errsz, LITHC_IO, "poll: %s", strerror(errno));
  }
}

/* Connect c->fd (created here) to one address; LITHC_OK or an error. */
static int connect_addr(struct conn *c, int family, const struct sockaddr *sa, socklen_t salen) {
  int e = 0;
  socklen_t elen = sizeof e;
  int rc;

  c->fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c->fd < 0)
    return fail(c->err, c->errsz, LITHC_CONNECT, "socket: %s", strerror(errno));
  if (family != AF_UNIX) {
    int one = 1; /* the head and the body go as two writes: no Nagle delay */
    (void)setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  if (connect(c->fd, sa, salen) == 0) return LITHC_OK;
  if (errno != EINPROGRESS && errno != EINTR) {
    e = errno;
    goto refused;
  }
  rc = wait_for(c, POLLOUT, "connecting to");
  if (rc != LITHC_OK) goto out;
  if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &elen) != 0) e = errno;
  if (e == 0) return LITHC_OK;
refused:
  if (e == EAGAIN && family == AF_UNIX) /* a Unix socket's backlog is full */
    rc = fail(c->err, c->errsz, LITHC_CONNECT, "cannot connect to %s: the server is overloaded",
              c->peer);
  else
    rc = fail(c->err, c->errsz, LITHC_CONNECT, "cannot connect to %s: %s", c->peer, strerror(e));
out:
  close(c->fd);
  c->fd = -1;
  return rc;
}

static int connect_unix(struct conn *c, const lithc_endpoint *ep) {
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  memcpy(a.sun_path, ep->unix_path, strlen(ep->unix_path) + 1); /* fits: lithc_endpoint_unix */
  return connect_addr(c, AF_UNIX, (const struct sockaddr *)&a, sizeof a);
}

/* Try every address the name resolves to, in order; the last error wins. */
static int connect_tcp(struct conn *c, const lithc_endpoint *ep) {
  struct addrinfo hints, *res = NULL, *ai;
  char port[16];
  int rc, g;

  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  snprintf(port, sizeof port, "%d", ep->port);
  g = getaddrinfo(ep->host, port, &hints, &res);
  if (g != 0)
    return fail(c->err, c->errsz, LITHC_CONNECT, "cannot resolve %s: %s", ep->host,
                g == EAI_SYSTEM ? strerror(errno) : gai_strerror(g));
  rc = fail(c->err, c->errsz, LITHC_CONNECT, "cannot connect to %s: no address", c->peer);
  for (ai = res; ai != NULL; ai = ai->ai_next) {
    rc = connect_addr(c, ai->ai_family, ai->ai_addr, ai->ai_addrlen);
    if (rc == LITHC_OK || rc == LITHC_TIMEOUT) break;
  }
  freeaddrinfo(res);
  return rc;
}

/* Send len bytes. On EPIPE/ECONNRESET returns LITHC_IO with *closed set. */
static int send_all(struct conn *c, const char *p, size_t len, int *closed) {
  while (len > 0) {
    ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int rc = wait_for(c, POLLOUT, "sending the request to");
      if (rc != LITHC_OK) return rc;
      continue;
    }
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) *closed = 1;
    return fail(c->err, c->errsz, LITHC_IO, "%s closed the connection while the request was sent",
                c->peer);
  }
  return LITHC_OK;
}

/* Receive more bytes (or the end of the stream: c->eof). */
static int fill(struct conn *c) {
  ssize_t n;
  if (c->eof) return LITHC_OK;
  if (c->pos > 0) { /* drop what was consumed */
    memmove(c->buf, c->buf + c->pos, c->len - c->pos);
    c->len -= c->pos;
    c->pos = 0;
  }
  if (c->cap - c->len < RECV_CHUNK) {
    size_t cap = c->cap < RECV_CHUNK ? 4 * RECV_CHUNK : c->cap * 2;
    char *nb = realloc(c->buf, cap);
    if (nb == NULL) return fail(c->err, c->errsz, LITHC_NOMEM, "out of memory");
    c->buf = nb;
    c->cap = cap;
  }
  for (;;) {
    n = c->src != NULL ? c->src(c->src_ctx, c->buf + c->len, c->cap - c->len)
                       : recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
    if (n > 0) break;
    if (n == 0) {
      c->eof = 1;
      return LITHC_OK;
    }
    if (errno == EINTR) continue;
    if (c->src == NULL && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int rc = wait_for(c, POLLIN, "waiting for");
      if (rc != LITHC_OK) return rc;
      continue;
    }
    return fail(c->err, c->errsz, LITHC_IO, "reading the answer of %s: %s%s", c->peer,
                strerror(errno),
                c->sent ? " (the request was sent: whether it ran is unknown)" : "");
  }
  c->len += (size_t)n;
  c->total += (size_t)n;
  if (c->total > LITHC_MAX_ANSWER)
    return fail(c->err, c->errsz, LITHC_PROTOCOL, "the answer of %s is larger than %zu bytes",
                c->peer, LITHC_MAX_ANSWER);
  return LITHC_OK;
}

static int cut_short(struct conn *c) {
  return fail(c->err, c->errsz, LITHC_IO,
              "%s closed the connection before the whole answer arrived%s", c->peer,
              c->sent ? " (the request was sent: whether it ran is unknown)" : "");
}

/* Make n unconsumed bytes available at c->buf + c->pos. */
static int need(struct conn *c, size_t n) {
  while (c->len - c->pos < n) {
    int rc;
    if (c->eof) return cut_short(c);
    if ((rc = fill(c)) != LITHC_OK) return rc;
  }
  return LITHC_OK;
}

/* The next line (up to LF, not consumed): *len bytes from c->buf + c->pos,
 * the LF included. At most `max` bytes. */
static int line(struct conn *c, size_t max, size_t *len) {
  size_t scanned = 0;
  for (;;) {
    const char *lf = c->len - c->pos > scanned
                         ? memchr(c->buf + c->pos + scanned, '\n', c->len - c->pos - scanned)
                         : NULL;
    int rc;
    if (lf != NULL) {
      *len = (size_t)(lf - (c->buf + c->pos)) + 1;
      if (*len > max) break;
      return LITHC_OK;
    }
    scanned = c->len - c->pos;
    if (scanned > max) break;
    if (c->eof) return cut_short(c);
    if ((rc = fill(c)) != LITHC_OK) return rc;
  }
  return fail(c->err, c->errsz, LITHC_PROTOCOL, "%s sent a line longer than %zu bytes", c->peer,
              max);
}

/* ---- Parsing the answer ------------------------------------------------- */

static int bad_answer(struct conn *c, const char *what) {
  return fail(c->err, c->errsz, LITHC_PROTOCOL, "%s did not answer in HTTP/1.x: %s", c->peer,
              what);
}

/* Find the end of the head that starts at c->pos (the empty line),
 * receiving more as needed; consumes nothing. *hlen: its bytes, the empty
 * line included; *n_lines: its lines. */
static int find_head(struct conn *c, size_t *hlen, size_t *n_lines) {
  size_t off = 0, lines = 0;
  int rc;

  if (c->buf == NULL && (rc = fill(c)) != LITHC_OK) return rc; /* nothing received yet */
  for (;;) {
    const char *base = c->buf + c->pos;
    size_t avail = c->len - c->pos;
    const char *lf;

    while (avail > off && (lf = memchr(base + off, '\n', avail - off)) != NULL) {
      size_t llen = (size_t)(lf - (base + off)) + 1;
      off += llen;
      lines++;
      if (off > LITHC_MAX_HEADERS) return bad_answer(c, "the headers are too large");
      if (llen == 1 || (llen == 2 && base[off - 2] == '\r')) {
        *hlen = off;
        *n_lines = lines;
        return LITHC_OK;
      }
    }
    if (avail > LITHC_MAX_HEADERS) return bad_answer(c, "the headers are too large");
    if (c->eof) {
      if (avail == 0)
        return fail(c->err, c->errsz, LITHC_IO, "%s closed the connection without answering%s",
                    c->peer, c->sent ? " (the request was sent: whether it ran is unknown)" : "");
      return cut_short(c);
    }
    if ((rc = fill(c)) != LITHC_OK) return rc; /* keeps [pos, len): off stays right */
  }
}

/* Read one head (status line, headers, empty line) into resp. */
static int read_head(struct conn *c, lithc_response *resp) {
  size_t hlen = 0, n_lines = 0, i;
  char *p, *end;
  int rc;

  if ((rc = find_head(c, &hlen, &n_lines)) != LITHC_OK) return rc;
  resp->head = malloc(hlen + 1);
  resp->headers = calloc(n_lines, sizeof *resp->headers);
  if (resp->head == NULL || resp->headers == NULL)
    return fail(c->err, c->errsz, LITHC_NOMEM, "out of memory");
  memcpy(resp->head, c->buf + c->pos, hlen);
  resp->head[hlen] = '\0';
  c->pos += hlen;
  if (memchr(resp->head, '\0', hlen) != NULL) return bad_answer(c, "a NUL byte in the headers");

  /* The status line: HTTP/1.x SSS[ reason] */
  p = resp->head;
  end = strchr(p, '\n');
  if (strncmp(p, "HTTP/1.", 7) != 0 || !isdigit((unsigned char)p[7]) || p[8] != ' ' ||
      !isdigit((unsigned char)p[9]) || !isdigit((unsigned char)p[10]) ||
      !isdigit((unsigned char)p[11]) || (p[12] != ' ' && p[12] != '\r' && p[12] != '\n'))
    return bad_answer(c, "no status line");
  resp->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
  if (resp->status < 100) return bad_answer(c, "status below 100");

  /* Header lines: name ":" OWS value OWS */
  for (i = 0, p = end + 1; *p != '\0'; p = end + 1) {
    char *colon, *v, *ve;
    end = strchr(p, '\n');
    ve = end;
    if (ve > p && ve[-1] == '\r') ve--;
    if (ve == p) break; /* the empty line */
    if (*p == ' ' || *p == '\t') return bad_answer(c, "folded header line");
    colon = memchr(p, ':', (size_t)(ve - p));
    if (colon == NULL || colon == p) return bad_answer(c, "header line without a name");
    for (v = colon + 1; v < ve && (*v == ' ' || *v == '\t'); v++) {
    }
    while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) ve--;
    resp->headers[i].name = p;
    resp->headers[i].name_len = (size_t)(colon - p);
    resp->headers[i].value = v;
    resp->headers[i].value_len = (size_t)(ve - v);
    i++;
  }
  resp->n_headers = i;
  return LITHC_OK;
}

/* Append n bytes to the body. */
static int body_add(struct conn *c, lithc_response *resp, size_t *cap, const char *p, size_t n) {
  if (resp->body_len + n + 1 > *cap) {
    size_t ncap = *cap < 4096 ? 4096 : *cap;
    char *nb;
    while (ncap < resp->body_len + n + 1) ncap *= 2;
    nb = realloc(resp->body, ncap);
    if (nb == NULL) return fail(c->err, c->errsz, LITHC_NOMEM, "out of memory");
    resp->body = nb;
    *cap = ncap;
  }
  memcpy(resp->body + resp->body_len, p, n);
  resp->body_len += n;
  resp->body[resp->body_len] = '\0';
  return LITHC_OK;
}

/* Transfer-Encoding: chunked. */
static int read_chunked(struct conn *c, lithc_response *resp, size_t *cap) {
  for (;;) {
    size_t len, size = 0, k;
    int rc, digits = 0;

    if ((rc = line(c, 4096, &len)) != LITHC_OK) return rc;
    for (k = 0; k < len; k++) {
      int ch = (unsigned char)c->buf[c->pos + k];
      int v = isdigit(ch) ? ch - '0' : (ch >= 'a' && ch <= 'f') ? ch - 'a' + 10
                                       : (ch >= 'A' && ch <= 'F') ? ch - 'A' + 10 : -1;
      if (v < 0) break;
      if (size > (LITHC_MAX_ANSWER >> 4)) return bad_answer(c, "chunk too large");
      size = size * 16 + (size_t)v;
      digits++;
    }
    if (digits == 0) return bad_answer(c, "bad chunk size");
    c->pos += len; /* chunk extensions, if any, are ignored */
    if (size == 0) break;
    if ((rc = need(c, size)) != LITHC_OK) return rc;
    if ((rc = body_add(c, resp, cap, c->buf + c->pos, size)) != LITHC_OK) return rc;
    c->pos += size;
    /* CRLF (or a bare LF) after the data */
    if ((rc = line(c, 2, &len)) != LITHC_OK)
      return rc == LITHC_PROTOCOL ? bad_answer(c, "no line end after a chunk") : rc;
    if (len == 2 && c->buf[c->pos] != '\r') return bad_answer(c, "no line end after a chunk");
    c->pos += len;
  }
  /* Trailers, up to an empty line: read and dropped. */
  for (;;) {
    size_t len;
    int rc = line(c, LITHC_MAX_HEADERS, &len);
    if (rc != LITHC_OK) return rc;
    c->pos += len;
    if (len == 1 || (len == 2 && c->buf[c->pos - 2] == '\r')) return LITHC_OK;
  }
}

static int header_is(const lithc_header *h, const char *name) {
  return h->name_len == strlen(name) && strncasecmp(h->name, name, h->name_len) == 0;
}

/* Read the body as the head says. */
static int read_body(struct conn *c, const char *method, lithc_response *resp) {
  size_t cap = 0, i;
  int chunked = 0, has_len = 0, rc;
  size_t clen = 0;

  resp->body = malloc(1);
  if (resp->body == NULL) return fail(c->err, c->errsz, LITHC_NOMEM, "out of memory");
  resp->body[0] = '\0';
  cap = 1;
  if (strcmp(method, "HEAD") == 0 || resp->status == 204 || resp->status == 304) return LITHC_OK;

  for (i = 0; i < resp->n_headers; i++) {
    const lithc_header *h = &resp->headers[i];
    if (header_is(h, "transfer-encoding")) {
      if (h->value_len != 7 || strncasecmp(h->value, "chunked", 7) != 0)
        return bad_answer(c, "unsupported Transfer-Encoding");
      chunked = 1;
    } else if (header_is(h, "content-length")) {
      size_t v = 0, k;
      if (h->value_len == 0) return bad_answer(c, "empty Content-Length");
      for (k = 0; k < h->value_len; k++) {
        if (!isdigit((unsigned char)h->value[k]) || v > LITHC_MAX_ANSWER)
          return bad_answer(c, "bad Content-Length");
        v = v * 10 + (size_t)(h->value[k] - '0');
      }
      if (v > LITHC_MAX_ANSWER)
        return fail(c->err, c->errsz, LITHC_PROTOCOL, "the answer of %s is larger than %zu bytes",
                    c->peer, LITHC_MAX_ANSWER);
      if (has_len && v != clen) return bad_answer(c, "two different Content-Length headers");
      has_len = 1;
      clen = v;
    }
  }
  if (chunked) return read_chunked(c, resp, &cap);
  if (has_len) {
    if ((rc = need(c, clen)) != LITHC_OK) return rc;
    rc = body_add(c, resp, &cap, c->buf + c->pos, clen);
    c->pos += clen;
    return rc;
  }
  /* Up to the end of the connection. */
  for (;;) {
    if (c->len > c->pos) {
      rc = body_add(c, resp, &cap, c->buf + c->pos, c->len - c->pos);
      if (rc != LITHC_OK) return rc;
      c->pos = c->len;
    }
    if (c->eof) return LITHC_OK;
    if ((rc = fill(c)) != LITHC_OK) return rc;
  }
}

/* The answer to a request made with `method`: interim 1xx answers come
 * before the real one. On an error resp may be half filled (the caller
 * frees it). */
static int read_answer(struct conn *c, const char *method, lithc_response *resp) {
  for (;;) {
    int rc = read_head(c, resp);
    if (rc != LITHC_OK) return rc;
    if (resp->status >= 200) return read_body(c, method, resp);
    if (resp->status == 101) return bad_answer(c, "101 Switching Protocols");
    lithc_response_free(resp);
  }
}

/* ---- The request -------------------------------------------------------- */

/* Start the exchange's one deadline, timeout_ms from now (<= 0: none). */
static void set_deadline(struct conn *c, int timeout_ms) {
  c->timeout_ms = timeout_ms;
  if (timeout_ms <= 0) return;
  clock_gettime(CLOCK_MONOTONIC, &c->deadline);
  c->deadline.tv_sec += timeout_ms / 1000;
  c->deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (c->deadline.tv_nsec >= 1000000000L) {
    c->deadline.tv_sec++;
    c->deadline.tv_nsec -= 1000000000L;
  }
  c->has_deadline = 1;
}

/* The request's head, malloc'd, or NULL (message in err). */
static char *build_head(const lithc_endpoint *ep, const lithc_request *req, size_t *len, char *err,
                        size_t errsz) {
  char host[300];
  char clen[64] = "";
  const char *tok = req->token;
  int n;
  char *head;
  size_t size;

  if (ep->is_unix) {
    snprintf(host, sizeof host, "localhost");
  } else {
    int v6 = strchr(ep->host, ':') != NULL;
    if (ep->port == 80)
      snprintf(host, sizeof host, "%s%s%s", v6 ? "[" : "", ep->host, v6 ? "]" : "");
    else
      snprintf(host, sizeof host, "%s%s%s:%d", v6 ? "[" : "", ep->host, v6 ? "]" : "", ep->port);
  }
  if (req->body != NULL || strcmp(req->method, "POST") == 0 || strcmp(req->method, "PUT") == 0)
    snprintf(clen, sizeof clen, "Content-Type: application/json\r\nContent-Length: %zu\r\n",
             req->body != NULL ? req->body_len : 0);
  n = snprintf(NULL, 0,
               "%s %s%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: lith/%s\r\n"
               "Accept: application/json\r\nConnection: close\r\n%s%s%s%s\r\n",
               req->method, ep->base_path, req->path, host, LITH_VERSION,
               tok != NULL ? "Authorization: Bearer " : "", tok != NULL ? tok : "",
               tok != NULL ? "\r\n" : "", clen);
  if (n < 0) {
    fail(err, errsz, LITHC_NOMEM, "cannot format the request");
    return NULL;
  }
  size = (size_t)n + 1;
  head = malloc(size);
  if (head == NULL) {
    fail(err, errsz, LITHC_NOMEM, "out of memory");
    return NULL;
  }
  snprintf(head, size,
           "%s %s%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: lith/%s\r\n"
           "Accept: application/json\r\nConnection: close\r\n%s%s%s%s\r\n",
           req->method, ep->base_path, req->path, host, LITH_VERSION,
           tok != NULL ? "Authorization: Bearer " : "", tok != NULL ? tok : "",
           tok != NULL ? "\r\n" : "", clen);
  *len = (size_t)n;
  return head;
}

int lithc_request_send(const lithc_endpoint *ep, const lithc_request *req, lithc_response *resp,
                       char *err, size_t errsz) {
  struct conn c;
  char peer[512];
  char *head = NULL;
  size_t head_len = 0;
  int closed = 0;
  int rc, send_rc = LITHC_OK;
  char send_err[256] = "";

  memset(resp, 0, sizeof *resp);
  memset(&c, 0, sizeof c);
  c.fd = -1;
  c.err = err;
  c.errsz = errsz;
  c.peer = lithc_endpoint_name(ep, peer, sizeof peer);

  if (req->path == NULL || req->path[0] != '/' || strpbrk(req->path, " \r\n") != NULL)
    return fail(err, errsz, LITHC_BAD_ARG, "bad request path");
  if (req->token != NULL && (req->token[0] == '\0' || strpbrk(req->token, "\r\n") != NULL))
    return fail(err, errsz, LITHC_BAD_ARG, "the token is empty or holds a line break");
  head = build_head(ep, req, &head_len, err, errsz);
  if (head == NULL) return LITHC_NOMEM;

  set_deadline(&c, req->timeout_ms);

  rc = ep->is_unix ? connect_unix(&c, ep) : connect_tcp(&c, ep);
  if (rc != LITHC_OK) goto out;

  rc = send_all(&c, head, head_len, &closed);
  if (rc == LITHC_OK && req->body != NULL && req->body_len > 0)
    rc = send_all(&c, req->body, req->body_len, &closed);
  if (rc == LITHC_OK) {
    c.sent = 1;
  } else if (closed) {
    /* The server may have answered before reading everything: try. */
    send_rc = rc;
    snprintf(send_err, sizeof send_err, "%s", err != NULL ? err : "");
    c.sent = 1; /* part of it went out */
  } else {
    goto out;
  }

  rc = read_answer(&c, req->method, resp);
  if (rc != LITHC_OK && send_rc != LITHC_OK) {
    rc = send_rc; /* no answer after all: the send's error says more */
    if (err != NULL && errsz > 0) snprintf(err, errsz, "%s", send_err);
  }

out:
  if (rc != LITHC_OK) lithc_response_free(resp);
  if (c.fd >= 0) close(c.fd);
  free(c.buf);
  free(head);
  return rc;
}

/* lithc_response_read and _from: read an answer from c, set up but for
 * its messages. */
static int read_alone(struct conn *c, const char *method, const char *peer,
                      lithc_response *resp, char *err, size_t errsz) {
  int rc;
  memset(resp, 0, sizeof *resp);
  c->err = err;
  c->errsz = errsz;
  c->peer = peer != NULL ? peer : "the server";
  c->sent = 1;
  rc = read_answer(c, method, resp);
  if (rc != LITHC_OK) lithc_response_free(resp);
  free(c->buf);
  return rc;
}

int lithc_response_read(int fd, const char *method, const char *peer, int timeout_ms,
                        lithc_response *resp, char *err, size_t errsz) {
  struct conn c;
  memset(&c, 0, sizeof c);
  c.fd = fd;
  set_deadline(&c, timeout_ms);
  return read_alone(&c, method, peer, resp, err, errsz);
}

int lithc_response_read_from(lithc_source src, void *ctx, const char *method, const char *peer,
                             lithc_response *resp, char *err, size_t errsz) {
  struct conn c;
  memset(&c, 0, sizeof c);
  c.fd = -1;
  c.src = src;
  c.src_ctx = ctx;
  return read_alone(&c, method, peer, resp, err, errsz);
}

const char *lithc_response_header(const lithc_response *resp, const char *name, size_t *len) {
  size_t i;
  for (i = 0; i < resp->n_headers; i++) {
    if (header_is(&resp->headers[i], name)) {
      if (len != NULL) *len = resp->headers[i].value_len;
      return resp->headers[i].value;
    }
  }
  return NULL;
}

void lithc_response_free(lithc_response *resp) {
  if (resp == NULL) return;
  free(resp->head);
  free(resp->headers);
  free(resp->body);
  memset(resp, 0, sizeof *resp);
}
