/*
 * Streamed responses (server-sent events for kanban's live board).
 *
 * h2o's generator contract: after h2o_send(..., IN_PROGRESS) the buffers
 * must stay untouched until h2o calls the generator's proceed(); only then
 * may the next h2o_send be made. proceed comes when the write reached the
 * socket (HTTP/1) or the HTTP/2 stream's window let it through. So a stream
 * has two buffers: `out`, the one write in flight, and `wait`, where writes
 * made meanwhile gather; proceed swaps them and sends what gathered in one
 * write.
 *
 * Flow control: `wait` holds at most stream_buffer bytes. A client that
 * reads slower than the application writes sees its stream closed as failed
 * rather than the server queueing without bound (or silently dropping
 * events, which would leave an SSE client showing a wrong board). h2o 2.2.5
 * adds no buffer of its own beyond the write in flight: on HTTP/1 proceed
 * comes only when uv_write completed, on HTTP/2 only when the stream's flow
 * control window accepted the data.
 *
 * The stop ends a stream at once (an event stream has no end to wait for)
 * unless it is marked LITH_HTTP_STOP_FINISH: then it runs while the grace
 * lasts, and the deadline fails it (http.c) like any request still held.
 *
 * Both buffers belong to the handle, which h2o's reference keeps alive until
 * h2o frees the request: a write in flight never points at freed memory,
 * even if the application ended the stream or the client left meanwhile.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "internal.h"

/* Hand `wait` to h2o as the next write (state: IN_PROGRESS, FINAL or ERROR). */
static void flush(lith_http_req *h, h2o_send_state_t state) {
  char *t = h->out;
  size_t cap = h->out_cap;
  h2o_iovec_t buf = h2o_iovec_init(h->wait, h->head ? 0 : h->wait_len);
  h->out = h->wait;
  h->out_cap = h->wait_cap;
  h->wait = t;
  h->wait_cap = cap;
  h->wait_len = 0;
  if (h2o_send_state_is_in_progress(state)) {
    h->sending = 1;
  } else {
    lh_watch_stop(h); /* h2o takes the socket back after a final send */
    h->ended = 1;
    h->sending = 0;
  }
  h2o_send(h->h2o, buf.len ? &buf : NULL, buf.len ? 1 : 0, state);
}

static void on_proceed(h2o_generator_t *gen, h2o_req_t *req) {
  (void)req;
  lith_http_req *h = H2O_STRUCT_FROM_MEMBER(lith_http_req, gen, gen);
  h->sending = 0;
  if (!h->h2o || h->ended)
    return;
  if (h->fail_after) {
    h->wait_len = 0;
    flush(h, H2O_SEND_STATE_ERROR);
  } else if (h->end_after) {
    flush(h, H2O_SEND_STATE_FINAL);
  } else if (h->wait_len) {
    flush(h, H2O_SEND_STATE_IN_PROGRESS);
  }
}

/* h2o abandons the response (the client left): the request is freed next. */
static void on_stop(h2o_generator_t *gen, h2o_req_t *req) {
  (void)req;
  lith_http_req *h = H2O_STRUCT_FROM_MEMBER(lith_http_req, gen, gen);
  h->sending = 0;
  h->ended = 1;
}

void lh_stream_finish(lith_http_req *h) {
  if (!h->h2o || h->ended)
    return;
  if (h->sending)
    h->end_after = 1;
  else
    flush(h, H2O_SEND_STATE_FINAL);
}

void lh_stream_fail(lith_http_req *h) {
  if (!h->h2o || h->ended)
    return;
  h->wait_len = 0;
  if (!h->sending) {
    flush(h, H2O_SEND_STATE_ERROR);
    return;
  }
  /* A write is in flight, maybe stuck behind a client that stopped reading:
   * h2o allows no other send before it completes. On HTTP/1 shut the
   * connection, which fails that write, and h2o closes it. On HTTP/2 the
   * stream is reset when h2o next asks for data; until then nothing more is
   * queued on it. */
  h->fail_after = 1;
  lh_watch_stop(h);
  if (h->version < 0x200 && h->conn)
    lh_conn_shut(h->conn, SHUT_RDWR);
}

/* A stream of `length` bytes (SIZE_MAX: unknown, chunked on HTTP/1). */
static int stream_start(lith_http_req *h, int status, const char *content_type, size_t length) {
  if (!h || !h->app || h->state == LH_REQ_ANSWERED || h->state == LH_REQ_STREAM || status < 200 ||
      status > 599 || !content_type)
    return lh_fail(LITH_HTTP_MISUSE, "lith_http_stream_start: a held request not yet "
                                     "answered, a status 200..599 and a content type");
  if (h->gone || !h->h2o)
    return lh_fail(LITH_HTTP_GONE, "lith_http_stream_start: the client has gone");
  /* An END stream started now would be ended at once; a FINISH one (a
   * download accepted before the stop) runs out the grace as it would have
   * had it started before. */
  if (h->srv->state != LH_RUNNING && !(h->finish && h->srv->state == LH_STOPPING))
    return lh_fail(LITH_HTTP_STOPPING, "lith_http_stream_start: the server is stopping");
  int rc = lith_http_add_header(h, "content-type", content_type);
  if (rc != LITH_HTTP_OK)
    return rc;
  h2o_req_t *req = h->h2o;
  lh_set_status(h, status);
  req->res.content_length = length;
  h->state = LH_REQ_STREAM;
  h->gen.proceed = on_proceed;
  h->gen.stop = on_stop;
  h->srv->stats.streams_open++;
  h2o_start_response(req, &h->gen);
  flush(h, H2O_SEND_STATE_IN_PROGRESS); /* the headers go out now */
  return LITH_HTTP_OK;
}

int lith_http_stream_start(lith_http_req *h, int status, const char *content_type) {
  return stream_start(h, status, content_type, SIZE_MAX);
}

int lith_http_stream_start_length(lith_http_req *h, int status, const char *content_type, uint64_t length) {
  if (length >= SIZE_MAX)
    return lh_fail(LITH_HTTP_MISUSE, "lith_http_stream_start_length: length too large");
  return stream_start(h, status, content_type, (size_t)length);
}

int lith_http_stream_at_stop(lith_http_req *h, int mode) {
  if (!h || !h->app || (mode != LITH_HTTP_STOP_END && mode != LITH_HTTP_STOP_FINISH))
    return lh_fail(LITH_HTTP_MISUSE, "lith_http_stream_at_stop: a held request and "
                                     "LITH_HTTP_STOP_END or LITH_HTTP_STOP_FINISH");
  h->finish = mode == LITH_HTTP_STOP_FINISH;
  return LITH_HTTP_OK;
}

size_t lith_http_stream_queued(const lith_http_req *h) {
  return h != NULL && h->state == LH_REQ_STREAM ? h->wait_len : 0;
}

int lith_http_sse_start(lith_http_req *h) {
  int rc;
  if ((rc = lith_http_add_header(h, "cache-control", "no-cache")) != LITH_HTTP_OK ||
      (rc = lith_http_add_header(h, "x-accel-buffering", "no")) != LITH_HTTP_OK)
    return rc;
  return lith_http_stream_start(h, 200, "text/event-stream");
}

int lith_http_stream_write(lith_http_req *h, const void *data, size_t len) {
  if (!h || !h->app || h->state != LH_REQ_STREAM || (!data && len))
    return lh_fail(LITH_HTTP_MISUSE, "lith_http_stream_write: a held, started stream");
  if (h->gone || !h->h2o || h->ended || h->end_after || h->fail_after)
    return lh_fail(LITH_HTTP_GONE, "lith_http_stream_write: the client has gone");
  if (!len)
    return LITH_HTTP_OK;
  lith_http_server *srv = h->srv;
  if (len > srv->stream_buffer - h->wait_len) {
    srv->stats.stream_overflows++;
    lh_mark_gone(h);
    lh_stream_fail(h);
    return lh_fail(LITH_HTTP_FULL,
                   "lith_http_stream_write: the client reads too slowly "
                   "(%zu bytes waiting): stream closed",
                   h->wait_len);
  }
  if (h->wait_len + len > h->wait_cap) {
    size_t cap = h->wait_cap ? h->wait_cap : 1024;
    while (cap < h->wait_len + len)
      cap *= 2;
    if (cap > srv->stream_buffer)
      cap = srv->stream_buffer;
    char *p = realloc(h->wait, cap);
    if (!p)
      return lh_fail(LITH_HTTP_NOMEM, "lith_http_stream_write: out of memory");
    h->wait = p;
    h->wait_cap = cap;
  }
  memcpy(h->wait + h->wait_len, data, len);
  h->wait_len += len;
  if (!h->sending)
    flush(h, H2O_SEND_STATE_IN_PROGRESS);
  return LITH_HTTP_OK;
}

int lith_http_sse_event(lith_http_req *h, const char *event, const char *id, const char *data) {
  if ((event && strpbrk(event, "\r\n")) || (id && strpbrk(id, "\r\n")))
    return lh_fail(LITH_HTTP_MISUSE, "lith_http_sse_event: event and id are one line each");
  if (!data)
    data = "";
  size_t dlen = strlen(data), lines = 1;
  for (const char *p = data; *p; p++)
    lines += *p == '\n';
  size_t cap = (event ? 8 + strlen(event) : 0) + (id ? 5 + strlen(id) : 0) + 7 * lines + dlen + 2;
  char *buf = malloc(cap), *p = buf;
  if (!buf)
    return lh_fail(LITH_HTTP_NOMEM, "lith_http_sse_event: out of memory");
  if (event)
    p += sprintf(p, "event: %s\n", event);
  if (id)
    p += sprintf(p, "id: %s\n", id);
  for (const char *line = data;;) {
    const char *nl = strchr(line, '\n');
    size_t n = nl ? (size_t)(nl - line) : strlen(line);
    size_t keep = n && line[n - 1] == '\r' ? n - 1 : n; /* CRLF data: one line break */
    memcpy(p, "data: ", 6);
    memcpy(p + 6, line, keep);
    p += 6 + keep;
    *p++ = '\n';
    if (!nl)
      break;
    line = nl + 1;
  }
  *p++ = '\n';
  int rc = lith_http_stream_write(h, buf, (size_t)(p - buf));
  free(buf);
  return rc;
}

int lith_http_stream_end(lith_http_req *h) {
  if (!h || !h->app)
    return lh_fail(LITH_HTTP_MISUSE, "lith_http_stream_end: the request is not held");
  if (h->gone || !h->h2o) {
    lh_req_complete(h);
    return lh_fail(LITH_HTTP_GONE, "lith_http_stream_end: the client has gone");
  }
  if (h->state != LH_REQ_STREAM)
    return lh_fail(LITH_HTTP_MISUSE, "lith_http_stream_end: not a stream (use lith_http_respond)");
  int rc = LITH_HTTP_OK;
  if (h->ended || h->fail_after)
    rc = lh_fail(LITH_HTTP_GONE, "lith_http_stream_end: the stream was closed");
  else
    lh_stream_finish(h);
  lh_req_complete(h);
  return rc;
}
