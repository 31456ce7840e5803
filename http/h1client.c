/*
 * h1client — read HTTP/1.1 answers (see h1client.h).
 *
 * Design:
 *   - Every wait is a poll() bounded by what is left of the connection's one
 *     deadline (CLOCK_MONOTONIC), so a stuck server costs at most the
 *     timeout, whatever stage it sticks in. A socket is read with
 *     MSG_DONTWAIT, so a blocking one is bounded too.
 *   - Received bytes go into one growing buffer (h1c_conn); the parser reads
 *     from it through need()/line(), which receive more only when the bytes
 *     asked for are not there yet. Consumed bytes are dropped when the
 *     buffer is refilled, so a large body is held about twice at most (the
 *     raw bytes being decoded and the decoded body). What follows an answer
 *     stays in the buffer: a keep-alive client reads its next answer there.
 *   - The head is parsed in place by h1c_parse_head (the benchmarks call it
 *     on their own buffers); the reader copies the head whole into the
 *     response and parses the copy, so the header table points into memory
 *     the response owns.
 *   - Framing as RFC 9112 section 6.3 orders it: no body for 1xx/204/304
 *     and for HEAD, else Transfer-Encoding: chunked, else Content-Length,
 *     else up to the end of the connection. Anything else (another transfer
 *     coding, two different lengths, a bad chunk size) is a protocol error
 *     rather than a guess: a caller must never take half an answer for a
 *     whole one.
 */
#include "h1client.h"

#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#define RECV_CHUNK 16384
#define CHUNK_LINE_MAX 4096 /* a chunk-size line, extensions included */
#define UNKNOWN_OUTCOME " (the request was sent: whether it ran is unknown)"

/* ---- The head ------------------------------------------------------------- */

/* Where the head in buf[0..len) ends (just past its empty line), or 0 when
 * its end is not there yet. Only LFs at `from` or later are looked at (the
 * bytes before were scanned already); the empty line is "\n" or "\r\n",
 * the head's first line or after an LF. */
static size_t head_end(const char *buf, size_t from, size_t len) {
  const char *lf;
  while (from < len && (lf = memchr(buf + from, '\n', len - from)) != NULL) {
    size_t i = (size_t)(lf - buf);
    if (i == 0 || buf[i - 1] == '\n' || (buf[i - 1] == '\r' && (i == 1 || buf[i - 2] == '\n')))
      return i + 1;
    from = i + 1;
  }
  return 0;
}

static int name_is(const char *p, size_t n, const char *name) {
  return n == strlen(name) && strncasecmp(p, name, n) == 0;
}

/* Does p[0..n) start with `word`, in any case? */
static int starts_with(const char *p, size_t n, const char *word) {
  size_t k = strlen(word);
  return n >= k && strncasecmp(p, word, k) == 0;
}

/* The framing headers of a head with a body: Transfer-Encoding (only
 * chunked) sets h->body; Content-Length sets h->length (SIZE_MAX: none
 * yet). */
static int parse_framing(const h1c_header *hv, h1c_head *h, const char **why) {
  if (name_is(hv->name, hv->name_len, "transfer-encoding")) {
    if (!name_is(hv->value, hv->value_len, "chunked")) {
      *why = "unsupported Transfer-Encoding";
      return H1C_PROTOCOL;
    }
    h->body = H1C_BODY_CHUNKED;
  } else if (name_is(hv->name, hv->name_len, "content-length")) {
    size_t v = 0, k;
    if (hv->value_len == 0) {
      *why = "empty Content-Length";
      return H1C_PROTOCOL;
    }
    for (k = 0; k < hv->value_len; k++) {
      if (!isdigit((unsigned char)hv->value[k]) || v > H1C_MAX_ANSWER) {
        *why = "bad Content-Length";
        return H1C_PROTOCOL;
      }
      v = v * 10 + (size_t)(hv->value[k] - '0');
    }
    if (v > H1C_MAX_ANSWER)
      return H1C_TOO_LARGE;
    if (h->length != SIZE_MAX && v != h->length) {
      *why = "two different Content-Length headers";
      return H1C_PROTOCOL;
    }
    h->length = v;
  }
  return H1C_OK;
}

int h1c_parse_head(const char *buf, size_t len, const char *method, h1c_head *h, h1c_header *hdrs,
                   size_t max_hdrs, const char **why) {
  size_t hlen = head_end(buf, 0, len), i;
  const char *p, *end;
  int has_body;

  *why = NULL;
  memset(h, 0, sizeof *h);
  if (hlen > H1C_MAX_HEADERS || (hlen == 0 && len > H1C_MAX_HEADERS)) {
    *why = "the headers are too large";
    return H1C_PROTOCOL;
  }
  if (hlen == 0)
    return H1C_MORE;
  h->head_len = hlen;
  for (p = buf; p < buf + hlen; p = end + 1) {
    end = memchr(p, '\n', hlen - (size_t)(p - buf));
    h->n_lines++;
  }
  if (memchr(buf, '\0', hlen) != NULL) {
    *why = "a NUL byte in the headers";
    return H1C_PROTOCOL;
  }

  /* The status line: HTTP/1.x SSS[ reason] (a head shorter than 13 bytes
   * cannot hold one). */
  p = buf;
  if (hlen < 13 || strncmp(p, "HTTP/1.", 7) != 0 || !isdigit((unsigned char)p[7]) || p[8] != ' ' ||
      !isdigit((unsigned char)p[9]) || !isdigit((unsigned char)p[10]) || !isdigit((unsigned char)p[11]) ||
      (p[12] != ' ' && p[12] != '\r' && p[12] != '\n')) {
    *why = "no status line";
    return H1C_PROTOCOL;
  }
  h->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
  if (h->status < 100) {
    *why = "status below 100";
    return H1C_PROTOCOL;
  }
  has_body = h->status >= 200 && h->status != 204 && h->status != 304 &&
             (method == NULL || strcmp(method, "HEAD") != 0);
  h->body = has_body ? H1C_BODY_EOF : H1C_BODY_NONE;
  h->length = SIZE_MAX;

  /* Header lines: name ":" OWS value OWS, up to the empty line */
  end = memchr(p, '\n', hlen);
  for (i = 0, p = end + 1;; p = end + 1) {
    const char *colon, *v, *ve;
    h1c_header hv;
    end = memchr(p, '\n', hlen - (size_t)(p - buf)); /* found: the head ends in one */
    ve = end;
    if (ve > p && ve[-1] == '\r')
      ve--;
    if (ve == p)
      break;
    if (*p == ' ' || *p == '\t') {
      *why = "folded header line";
      return H1C_PROTOCOL;
    }
    colon = memchr(p, ':', (size_t)(ve - p));
    if (colon == NULL || colon == p) {
      *why = "header line without a name";
      return H1C_PROTOCOL;
    }
    for (v = colon + 1; v < ve && (*v == ' ' || *v == '\t'); v++) {
    }
    while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
      ve--;
    hv.name = p;
    hv.name_len = (size_t)(colon - p);
    hv.value = v;
    hv.value_len = (size_t)(ve - v);
    if (hdrs != NULL && i < max_hdrs)
      hdrs[i] = hv;
    i++;
    if (name_is(hv.name, hv.name_len, "connection") && starts_with(hv.value, hv.value_len, "close"))
      h->closes = 1;
    if (has_body) {
      int rc = parse_framing(&hv, h, why);
      if (rc != H1C_OK)
        return rc;
    }
  }
  h->n_headers = i;
  if (h->body == H1C_BODY_EOF && h->length != SIZE_MAX)
    h->body = H1C_BODY_LENGTH;
  if (h->body != H1C_BODY_LENGTH)
    h->length = 0;
  return H1C_OK;
}

/* ---- Responses ------------------------------------------------------------ */

const char *h1c_response_header(const h1c_response *resp, const char *name, size_t *len) {
  size_t i;
  for (i = 0; i < resp->n_headers; i++) {
    const h1c_header *h = &resp->headers[i];
    if (name_is(h->name, h->name_len, name)) {
      if (len != NULL)
        *len = h->value_len;
      return h->value;
    }
  }
  return NULL;
}

void h1c_response_free(h1c_response *resp) {
  if (resp == NULL)
    return;
  free(resp->head);
  free(resp->headers);
  free(resp->body);
  memset(resp, 0, sizeof *resp);
}

/* ---- The connection ------------------------------------------------------- */

static int fail(const h1c_conn *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(const h1c_conn *c, int code, const char *fmt, ...) {
  if (c->err != NULL && c->errsz > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, c->errsz, fmt, ap);
    va_end(ap);
  }
  return code;
}

static const char *unknown(const h1c_conn *c) { return c->sent ? UNKNOWN_OUTCOME : ""; }

void h1c_init(h1c_conn *c, int fd, const char *peer, char *err, size_t errsz) {
  memset(c, 0, sizeof *c);
  c->fd = fd;
  c->peer = peer != NULL ? peer : "the server";
  c->err = err;
  c->errsz = errsz;
}

void h1c_init_source(h1c_conn *c, h1c_source src, void *ctx, const char *peer, char *err, size_t errsz) {
  h1c_init(c, -1, peer, err, errsz);
  c->src = src;
  c->src_ctx = ctx;
}

void h1c_deadline(h1c_conn *c, int timeout_ms) {
  c->timeout_ms = timeout_ms;
  c->has_deadline = 0;
  if (timeout_ms <= 0)
    return;
  clock_gettime(CLOCK_MONOTONIC, &c->deadline);
  c->deadline.tv_sec += timeout_ms / 1000;
  c->deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (c->deadline.tv_nsec >= 1000000000L) {
    c->deadline.tv_sec++;
    c->deadline.tv_nsec -= 1000000000L;
  }
  c->has_deadline = 1;
}

/* Milliseconds left before the deadline (rounded up), -1 without one. */
static int remaining_ms(const h1c_conn *c) {
  struct timespec now;
  int64_t ms;
  if (!c->has_deadline)
    return -1;
  clock_gettime(CLOCK_MONOTONIC, &now);
  ms = ((int64_t)c->deadline.tv_sec - now.tv_sec) * 1000 +
       ((int64_t)c->deadline.tv_nsec - now.tv_nsec + 999999) / 1000000;
  if (ms < 0)
    ms = 0;
  return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

static int timed_out(const h1c_conn *c, const char *what) {
  double s = c->timeout_ms / 1000.0;
  if (c->sent)
    return fail(c, H1C_TIMEOUT, "no answer from %s within %g s" UNKNOWN_OUTCOME, c->peer, s);
  return fail(c, H1C_TIMEOUT, "timed out after %g s %s %s", s, what, c->peer);
}

int h1c_wait(h1c_conn *c, short events, const char *what) {
  for (;;) {
    struct pollfd p = {c->fd, events, 0};
    int ms = remaining_ms(c);
    int n;
    if (ms == 0)
      return timed_out(c, what);
    n = poll(&p, 1, ms);
    if (n > 0)
      return H1C_OK; /* errors and hang-ups show in the next call */
    if (n == 0)
      return timed_out(c, what);
    if (errno != EINTR)
      return fail(c, H1C_IO, "poll: %s", strerror(errno));
  }
}

/* Receive more bytes (or the end of the stream: c->eof). */
static int fill(h1c_conn *c) {
  ssize_t n;
  if (c->eof)
    return H1C_OK;
  if (c->pos > 0) { /* drop what was consumed */
    memmove(c->buf, c->buf + c->pos, c->len - c->pos);
    c->len -= c->pos;
    c->pos = 0;
  }
  if (c->cap - c->len < RECV_CHUNK) {
    size_t cap = c->cap < RECV_CHUNK ? 4 * RECV_CHUNK : c->cap * 2;
    char *nb = realloc(c->buf, cap);
    if (nb == NULL)
      return fail(c, H1C_NOMEM, "out of memory");
    c->buf = nb;
    c->cap = cap;
  }
  for (;;) {
    n = c->src != NULL ? c->src(c->src_ctx, c->buf + c->len, c->cap - c->len)
                       : recv(c->fd, c->buf + c->len, c->cap - c->len, MSG_DONTWAIT);
    if (n > 0)
      break;
    if (n == 0) {
      c->eof = 1;
      return H1C_OK;
    }
    if (errno == EINTR)
      continue;
    if (c->src == NULL && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int rc = h1c_wait(c, POLLIN, "waiting for");
      if (rc != H1C_OK)
        return rc;
      continue;
    }
    return fail(c, H1C_IO, "reading the answer of %s: %s%s", c->peer, strerror(errno), unknown(c));
  }
  c->len += (size_t)n;
  c->total += (size_t)n;
  if (c->total > H1C_MAX_ANSWER)
    return fail(c, H1C_PROTOCOL, "the answer of %s is larger than %zu bytes", c->peer, H1C_MAX_ANSWER);
  return H1C_OK;
}

static int cut_short(const h1c_conn *c) {
  return fail(c, H1C_IO, "%s closed the connection before the whole answer arrived%s", c->peer, unknown(c));
}

/* Make n unconsumed bytes available at c->buf + c->pos. */
static int need(h1c_conn *c, size_t n) {
  while (c->len - c->pos < n) {
    int rc;
    if (c->eof)
      return cut_short(c);
    if ((rc = fill(c)) != H1C_OK)
      return rc;
  }
  return H1C_OK;
}

/* The next line (up to LF, not consumed): *len bytes from c->buf + c->pos,
 * the LF included. At most `max` bytes. */
static int line(h1c_conn *c, size_t max, size_t *len) {
  size_t scanned = 0;
  for (;;) {
    const char *lf =
        c->len - c->pos > scanned ? memchr(c->buf + c->pos + scanned, '\n', c->len - c->pos - scanned) : NULL;
    int rc;
    if (lf != NULL) {
      *len = (size_t)(lf - (c->buf + c->pos)) + 1;
      if (*len > max)
        break;
      return H1C_OK;
    }
    scanned = c->len - c->pos;
    if (scanned > max)
      break;
    if (c->eof)
      return cut_short(c);
    if ((rc = fill(c)) != H1C_OK)
      return rc;
  }
  return fail(c, H1C_PROTOCOL, "%s sent a line longer than %zu bytes", c->peer, max);
}

/* ---- Reading an answer ---------------------------------------------------- */

static int bad_answer(const h1c_conn *c, const char *what) {
  return fail(c, H1C_PROTOCOL, "%s did not answer in HTTP/1.x: %s", c->peer, what);
}

static int too_large(const h1c_conn *c) {
  return fail(c, H1C_PROTOCOL, "the answer of %s is larger than %zu bytes", c->peer, H1C_MAX_ANSWER);
}

/* Read one head (status line, headers, empty line) into resp; *h says how
 * its body is framed. */
static int read_head(h1c_conn *c, const char *method, h1c_response *resp, h1c_head *h) {
  const char *why = NULL;
  size_t scanned = 0, avail;
  int rc;

  if (c->buf == NULL && (rc = fill(c)) != H1C_OK)
    return rc; /* nothing received yet */
  /* Find the empty line first, looking only at new bytes after each receive
   * (a head trickling in byte by byte costs no more than one arriving
   * whole), then parse the head once. */
  for (;;) {
    avail = c->len - c->pos;
    if (head_end(c->buf + c->pos, scanned, avail) != 0)
      break;
    if (avail > H1C_MAX_HEADERS)
      return bad_answer(c, "the headers are too large");
    scanned = avail;
    if (c->eof) {
      if (avail == 0)
        return fail(c, H1C_IO, "%s closed the connection without answering%s", c->peer, unknown(c));
      return cut_short(c);
    }
    if ((rc = fill(c)) != H1C_OK)
      return rc; /* keeps [pos, len): scanned stays right */
  }
  rc = h1c_parse_head(c->buf + c->pos, avail, method, h, NULL, 0, &why);
  if (rc == H1C_TOO_LARGE)
    return too_large(c);
  if (rc != H1C_OK)
    return bad_answer(c, why);

  resp->head = malloc(h->head_len + 1);
  resp->headers = calloc(h->n_lines, sizeof *resp->headers);
  if (resp->head == NULL || resp->headers == NULL)
    return fail(c, H1C_NOMEM, "out of memory");
  memcpy(resp->head, c->buf + c->pos, h->head_len);
  resp->head[h->head_len] = '\0';
  c->pos += h->head_len;
  /* The same bytes again, now pointing into the copy: cannot fail. */
  (void)h1c_parse_head(resp->head, h->head_len, method, h, resp->headers, h->n_lines, &why);
  resp->status = h->status;
  resp->n_headers = h->n_headers;
  return H1C_OK;
}

/* Append n bytes to the body. */
static int body_add(const h1c_conn *c, h1c_response *resp, size_t *cap, const char *p, size_t n) {
  if (resp->body_len + n + 1 > *cap) {
    size_t ncap = *cap < 4096 ? 4096 : *cap;
    char *nb;
    while (ncap < resp->body_len + n + 1)
      ncap *= 2;
    nb = realloc(resp->body, ncap);
    if (nb == NULL)
      return fail(c, H1C_NOMEM, "out of memory");
    resp->body = nb;
    *cap = ncap;
  }
  memcpy(resp->body + resp->body_len, p, n);
  resp->body_len += n;
  resp->body[resp->body_len] = '\0';
  return H1C_OK;
}

/* Transfer-Encoding: chunked. */
static int read_chunked(h1c_conn *c, h1c_response *resp, size_t *cap) {
  for (;;) {
    size_t len, size = 0, k;
    int rc, digits = 0;

    if ((rc = line(c, CHUNK_LINE_MAX, &len)) != H1C_OK)
      return rc;
    for (k = 0; k < len; k++) {
      int ch = (unsigned char)c->buf[c->pos + k];
      int v = isdigit(ch)                ? ch - '0'
              : (ch >= 'a' && ch <= 'f') ? ch - 'a' + 10
              : (ch >= 'A' && ch <= 'F') ? ch - 'A' + 10
                                         : -1;
      if (v < 0)
        break;
      if (size > (H1C_MAX_ANSWER >> 4))
        return bad_answer(c, "chunk too large");
      size = size * 16 + (size_t)v;
      digits++;
    }
    if (digits == 0)
      return bad_answer(c, "bad chunk size");
    c->pos += len; /* chunk extensions, if any, are ignored */
    if (size == 0)
      break;
    if ((rc = need(c, size)) != H1C_OK)
      return rc;
    if ((rc = body_add(c, resp, cap, c->buf + c->pos, size)) != H1C_OK)
      return rc;
    c->pos += size;
    /* CRLF (or a bare LF) after the data */
    if ((rc = line(c, 2, &len)) != H1C_OK)
      return rc == H1C_PROTOCOL ? bad_answer(c, "no line end after a chunk") : rc;
    if (len == 2 && c->buf[c->pos] != '\r')
      return bad_answer(c, "no line end after a chunk");
    c->pos += len;
  }
  /* Trailers, up to an empty line: read and dropped. */
  for (;;) {
    size_t len;
    int rc = line(c, H1C_MAX_HEADERS, &len);
    if (rc != H1C_OK)
      return rc;
    c->pos += len;
    if (len == 1 || (len == 2 && c->buf[c->pos - 2] == '\r'))
      return H1C_OK;
  }
}

/* Read the body as the head says. */
static int read_body(h1c_conn *c, const h1c_head *h, h1c_response *resp) {
  size_t cap = 1;
  int rc;

  resp->body = malloc(1);
  if (resp->body == NULL)
    return fail(c, H1C_NOMEM, "out of memory");
  resp->body[0] = '\0';
  switch (h->body) {
  case H1C_BODY_NONE: return H1C_OK;
  case H1C_BODY_CHUNKED: return read_chunked(c, resp, &cap);
  case H1C_BODY_LENGTH:
    if ((rc = need(c, h->length)) != H1C_OK)
      return rc;
    rc = body_add(c, resp, &cap, c->buf + c->pos, h->length);
    c->pos += h->length;
    return rc;
  default: /* up to the end of the connection */
    for (;;) {
      if (c->len > c->pos) {
        rc = body_add(c, resp, &cap, c->buf + c->pos, c->len - c->pos);
        if (rc != H1C_OK)
          return rc;
        c->pos = c->len;
      }
      if (c->eof)
        return H1C_OK;
      if ((rc = fill(c)) != H1C_OK)
        return rc;
    }
  }
}

int h1c_read(h1c_conn *c, const char *method, h1c_response *resp) {
  int rc;
  memset(resp, 0, sizeof *resp);
  c->total = c->len - c->pos; /* what was received ahead belongs to this answer */
  for (;;) {
    h1c_head h;
    rc = read_head(c, method, resp, &h);
    if (rc != H1C_OK)
      break;
    if (resp->status >= 200) {
      rc = read_body(c, &h, resp);
      break;
    }
    if (resp->status == 101) {
      rc = bad_answer(c, "101 Switching Protocols");
      break;
    }
    h1c_response_free(resp); /* an interim 1xx: the answer follows */
  }
  if (rc != H1C_OK)
    h1c_response_free(resp);
  return rc;
}

int h1c_read_eof(h1c_conn *c) {
  while (!c->eof) {
    int rc = fill(c);
    if (rc != H1C_OK)
      return rc;
  }
  if (c->len > c->pos)
    return fail(c, H1C_PROTOCOL, "%s sent %zu bytes after its answer", c->peer, c->len - c->pos);
  return H1C_OK;
}

size_t h1c_pending(const h1c_conn *c) { return c->len - c->pos; }

void h1c_release(h1c_conn *c) {
  free(c->buf);
  c->buf = NULL;
  c->pos = c->len = c->cap = 0;
  c->eof = 0;
}
