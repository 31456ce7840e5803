/*
 * Tests of http/stream.c: server-sent events, and a stream to a client that
 * does not read, bounded by stream_buffer.
 *
 * The server runs on a loop thread of its own and the client writes raw
 * HTTP on plain sockets (helper.h).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "helper.h"

/* ---- server-sent events ------------------------------------------------------- */

static void test_sse(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  char v[64];
  int fd = tcp_connect(f->port);
  rbuf *b = malloc(sizeof *b);
  rbuf_init(b, fd);
  send_str(fd, "GET /events HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n\r\n");
  assert_true(read_head(b, r));
  assert_int_equal(r->status, 200);
  assert_string_equal(resp_header(r, "content-type", v, sizeof v), "text/event-stream");
  assert_string_equal(resp_header(r, "cache-control", v, sizeof v), "no-cache");
  assert_string_equal(resp_header(r, "transfer-encoding", v, sizeof v), "chunked");
  int events = 0;
  while (events < 3) {
    assert_true(read_chunk(b, r) > 0);
    events = 0;
    for (const char *p = r->body; (p = strstr(p, "\n\n")); p += 2)
      events++;
  }
  assert_string_equal(r->body, "event: tick\nid: 1\ndata: n=1\ndata: second line\n\n"
                               "event: tick\nid: 2\ndata: n=2\ndata: second line\n\n"
                               "event: tick\nid: 3\ndata: n=3\ndata: second line\n\n");
  assert_int_equal(atomic_load(&f->sse_gone), 0); /* still subscribed */
  lith_http_stats st;
  on_loop(f, job_stats, &st);
  assert_int_equal(st.streams_open, 1);
  close(fd); /* the server notices, with no write to fail */
  assert_true(wait_for(&f->sse_gone, 1, 2000));
  assert_int_equal(atomic_load(&f->sse_end_rc), LITH_HTTP_GONE);
  on_loop(f, job_stats, &st);
  assert_int_equal(st.streams_open, 0);
  assert_int_equal(st.pending, 0);
  free(b);
  free(r);
}

static void test_sse_slow_client_bounded(void **state) {
  fx *f = *state;
  /* a client that never reads, with a small receive buffer */
  int fd = tcp_connect_opt(f->port, 4096);
  assert_true(fd >= 0);
  send_str(fd, "GET /flood HTTP/1.1\r\nHost: t\r\n\r\n");
  assert_true(wait_for(&f->flood_full, 1, 5000));
  assert_true(wait_for(&f->flood_gone, 1, 2000));
  assert_int_equal(atomic_load(&f->flood_end_rc), LITH_HTTP_GONE);
  lith_http_stats st;
  on_loop(f, job_stats, &st);
  assert_int_equal(st.stream_overflows, 1);
  assert_true(closed_by_server(fd)); /* the connection was closed, not left stuck */
  close(fd);
}

/* ---- a body of known length, paced by lith_http_stream_queued ------------------ */

/* A download's pattern (backup_http.c): Content-Length instead of chunked,
 * and the next piece written only when what waits is below a piece, from
 * a uv_prepare handle (it runs before the loop waits, so after each write
 * completed; with a uv_check handle this test stalls after two pieces).
 * Whatever the client's pace, the stream never overflows. */
#define SIZED_TOTAL (4 * STREAM_BUFFER + 123)
#define SIZED_PIECE (16 * 1024)

static struct sized {
  uv_prepare_t pace;
  lith_http_req *req;
  size_t sent, max_queued;
} S;
static atomic_int sized_done, sized_failed, sized_max_queued;

static void sized_prepare(uv_prepare_t *h) {
  char piece[SIZED_PIECE];
  struct sized *s = h->data;
  if (s->req == NULL)
    return;
  size_t q = lith_http_stream_queued(s->req);
  if (q > s->max_queued)
    s->max_queued = q;
  if (q >= SIZED_PIECE)
    return;
  size_t n = SIZED_TOTAL - s->sent < SIZED_PIECE ? SIZED_TOTAL - s->sent : SIZED_PIECE;
  for (size_t i = 0; i < n; i++)
    piece[i] = (char)('a' + (s->sent + i) % 26);
  if (lith_http_stream_write(s->req, piece, n) != LITH_HTTP_OK)
    atomic_store(&sized_failed, 1);
  else
    s->sent += n;
  if (s->sent == SIZED_TOTAL || atomic_load(&sized_failed)) {
    lith_http_stream_end(s->req);
    s->req = NULL;
    uv_prepare_stop(h);
    uv_close((uv_handle_t *)h, NULL);
    atomic_store(&sized_max_queued, (int)s->max_queued);
    atomic_store(&sized_done, 1);
  }
}

static int h_sized(lith_http_req *req, void *arg) {
  fx *f = arg;
  LOOP_CHECK(lith_http_stream_queued(req) == 0); /* not a stream yet */
  LOOP_CHECK(lith_http_stream_start_length(req, 200, "application/octet-stream", SIZED_TOTAL) ==
             LITH_HTTP_OK);
  memset(&S, 0, sizeof S);
  S.req = req;
  uv_prepare_init(&f->loop, &S.pace);
  S.pace.data = &S;
  uv_prepare_start(&S.pace, sized_prepare);
  return LITH_HTTP_PENDING;
}

static void job_route_sized(fx *f, void *arg) {
  (void)arg;
  LOOP_CHECK(lith_http_route(f->srv, "GET", "/sized", LITH_HTTP_EXACT, h_sized, f) == LITH_HTTP_OK);
}

static void test_known_length_paced(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  char v[64];
  size_t got = 0;
  int bad = 0;
  atomic_store(&sized_done, 0);
  atomic_store(&sized_failed, 0);
  on_loop(f, job_route_sized, NULL);
  int fd = tcp_connect_opt(f->port, 4096); /* a slow reader: small window, pauses */
  assert_true(fd >= 0);
  rbuf *b = malloc(sizeof *b);
  rbuf_init(b, fd);
  send_str(fd, "GET /sized HTTP/1.1\r\nHost: t\r\n\r\n");
  assert_true(read_head(b, r));
  assert_int_equal(r->status, 200);
  assert_null(resp_header(r, "transfer-encoding", v, sizeof v));
  assert_non_null(resp_header(r, "content-length", v, sizeof v));
  assert_int_equal(atol(v), SIZED_TOTAL);
  while (got < SIZED_TOTAL) {
    if (b->len == 0) {
      struct timespec ts = {0, 2000000};
      nanosleep(&ts, NULL);
      if (!rbuf_fill(b))
        fail_msg("the body ended after %zu of %d bytes (server sent %zu, done %d, failed %d)", got,
                 SIZED_TOTAL, S.sent, atomic_load(&sized_done), atomic_load(&sized_failed));
    }
    for (size_t i = 0; i < b->len; i++)
      bad += b->data[i] != (char)('a' + (got + i) % 26);
    got += b->len;
    rbuf_consume(b, b->len);
  }
  assert_int_equal(got, SIZED_TOTAL);
  assert_int_equal(bad, 0);
  assert_true(wait_for(&sized_done, 1, 5000));
  assert_int_equal(atomic_load(&sized_failed), 0);
  assert_true(atomic_load(&sized_max_queued) < SIZED_PIECE); /* bounded by the pacing */
  lith_http_stats st;
  on_loop(f, job_stats, &st);
  assert_int_equal(st.stream_overflows, 0);
  close(fd);
  free(b);
  free(r);
}

/* ---- streams and the stop: LITH_HTTP_STOP_FINISH ------------------------------ */

/* A download's stand-in: a paced body of `total` pattern bytes with a
 * Content-Length, marked LITH_HTTP_STOP_FINISH (or not: END), started by
 * the handler or later, from the test (start_later). */
#define DL_PIECE (16 * 1024)

static struct dl {
  uv_prepare_t pace;
  lith_http_req *req;
  size_t total, sent;
  int mode;        /* LITH_HTTP_STOP_ */
  int start_later; /* the handler only holds it: job_dl_start starts it */
  int pace_open;
  atomic_int done, gone, end_rc, start_rc;
} D;

static void dl_end(struct dl *d) {
  atomic_store(&d->end_rc, lith_http_stream_end(d->req));
  d->req = NULL;
  uv_prepare_stop(&d->pace);
  uv_close((uv_handle_t *)&d->pace, NULL);
  atomic_store(&d->done, 1);
}

/* The body's bytes [at, at + n): 'a' + offset % 26. */
static void dl_pattern(char *out, size_t at, size_t n) {
  for (size_t i = 0; i < n; i++)
    out[i] = (char)('a' + (at + i) % 26);
}

static void dl_prepare(uv_prepare_t *h) {
  char piece[DL_PIECE];
  struct dl *d = h->data;
  if (d->req == NULL)
    return;
  if (lith_http_is_gone(d->req)) {
    dl_end(d);
    return;
  }
  if (lith_http_stream_queued(d->req) >= DL_PIECE)
    return;
  size_t left = d->total - d->sent, n = left < DL_PIECE ? left : DL_PIECE;
  dl_pattern(piece, d->sent, n);
  if (lith_http_stream_write(d->req, piece, n) == LITH_HTTP_OK)
    d->sent += n;
  if (d->sent == d->total || lith_http_is_gone(d->req))
    dl_end(d);
}

static void dl_gone(lith_http_req *req, void *arg) {
  (void)req;
  struct dl *d = arg;
  atomic_store(&d->gone, 1); /* dl_prepare ends it */
}

static void dl_start(fx *f, struct dl *d) {
  int rc = lith_http_stream_start_length(d->req, 200, "application/octet-stream", d->total);
  atomic_store(&d->start_rc, rc);
  if (rc != LITH_HTTP_OK) {
    atomic_store(&d->end_rc, lith_http_respond_error(d->req, 503, "not started"));
    d->req = NULL;
    atomic_store(&d->done, 1);
    return;
  }
  uv_prepare_init(&f->loop, &d->pace);
  d->pace.data = d;
  uv_prepare_start(&d->pace, dl_prepare);
}

static int h_dl(lith_http_req *req, void *arg) {
  fx *f = arg;
  D.req = req;
  LOOP_CHECK(lith_http_stream_at_stop(req, D.mode) == LITH_HTTP_OK);
  lith_http_on_gone(req, dl_gone, &D);
  if (!D.start_later)
    dl_start(f, &D);
  return LITH_HTTP_PENDING;
}

static void job_dl_start(fx *f, void *arg) {
  (void)arg;
  dl_start(f, &D);
}

static void job_route_dl(fx *f, void *arg) {
  (void)arg;
  LOOP_CHECK(lith_http_route(f->srv, "GET", "/dl", LITH_HTTP_EXACT, h_dl, f) == LITH_HTTP_OK);
}

static void dl_setup(fx *f, size_t total, int mode, int start_later) {
  memset(&D, 0, sizeof D);
  D.total = total;
  D.mode = mode;
  D.start_later = start_later;
  atomic_store(&D.end_rc, -1);
  atomic_store(&D.start_rc, -1);
  on_loop(f, job_route_dl, NULL);
}

/* Read the body of a Content-Length answer already headed in r/b to its
 * end or the connection's: the bytes read, pattern-checked. `pause_ms`
 * before each read but the first. */
static size_t dl_read(rbuf *b, size_t total, int pause_ms, int *bad) {
  size_t got = 0;
  *bad = 0;
  for (;;) {
    for (size_t i = 0; i < b->len; i++)
      *bad += b->data[i] != (char)('a' + (got + i) % 26);
    got += b->len;
    rbuf_consume(b, b->len);
    if (got >= total)
      return got;
    if (pause_ms) {
      struct timespec ts = {0, (long)pause_ms * 1000000L};
      nanosleep(&ts, NULL);
    }
    if (!rbuf_fill(b))
      return got;
  }
}

/* An event stream and a FINISH download are open when the stop begins:
 * the event stream ends at once, the download is sent whole, and the
 * server stops right after it, long before the grace ends. */
static void test_stop_lets_finish_stream_run(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  char v[64];
  int bad;
  dl_setup(f, 8u << 20, LITH_HTTP_STOP_FINISH, 0);
  int es = tcp_connect(f->port);
  rbuf *be = malloc(sizeof *be);
  rbuf_init(be, es);
  send_str(es, "GET /events HTTP/1.1\r\nHost: t\r\n\r\n");
  assert_true(read_head(be, r));
  int fd = tcp_connect_opt(f->port, 4096); /* small: the download is still running at the stop */
  rbuf *b = malloc(sizeof *b);
  rbuf_init(b, fd);
  send_str(fd, "GET /dl HTTP/1.1\r\nHost: t\r\n\r\n");
  assert_true(read_head(b, r));
  assert_int_equal(r->status, 200);
  assert_int_equal(atol(resp_header(r, "content-length", v, sizeof v)), 8u << 20);
  usleep(100000);
  assert_int_equal(atomic_load(&D.done), 0);
  stop_args sa = {5000};
  int64_t t0 = now_ms();
  on_loop(f, job_stop, &sa);
  assert_true(wait_for(&f->sse_gone, 1, 2000)); /* the event stream: at once */
  usleep(200000);
  assert_int_equal(atomic_load(&D.gone), 0); /* the download: not touched */
  size_t got = dl_read(b, 8u << 20, 0, &bad);
  assert_int_equal(got, 8u << 20);
  assert_int_equal(bad, 0);
  assert_true(wait_for(&D.done, 1, 2000));
  assert_int_equal(atomic_load(&D.end_rc), LITH_HTTP_OK);
  assert_true(closed_by_server(fd)); /* Connection: close after it */
  assert_true(wait_for(&f->stopped, 1, 2000));
  print_message("stopped %lld ms after the stop began (grace 5000 ms)\n", (long long)(now_ms() - t0));
  assert_true(now_ms() - t0 < 4000);
  close(fd);
  close(es);
  free(b);
  free(be);
  free(r);
}

/* A FINISH download the grace is too short for: cut at the deadline, the
 * connection closed before the body's end. */
static void test_stop_cuts_finish_stream_at_deadline(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  int bad;
  dl_setup(f, 64u << 20, LITH_HTTP_STOP_FINISH, 0);
  int fd = tcp_connect(f->port);
  rbuf *b = malloc(sizeof *b);
  rbuf_init(b, fd);
  send_str(fd, "GET /dl HTTP/1.1\r\nHost: t\r\n\r\n");
  assert_true(read_head(b, r));
  assert_int_equal(r->status, 200);
  stop_args sa = {300};
  int64_t t0 = now_ms();
  on_loop(f, job_stop, &sa);
  /* A slow reader: at most 128 KiB every 2 ms, 64 MiB/s, so 64 MiB
   * cannot pass in the grace. */
  size_t got = dl_read(b, 64u << 20, 2, &bad);
  int64_t took = now_ms() - t0;
  print_message("cut after %zu of %u bytes, %lld ms after the stop began (grace 300 ms)\n", got, 64u << 20,
                (long long)took);
  assert_true(got < (64u << 20));
  assert_int_equal(bad, 0);
  assert_true(took >= 300);
  assert_true(wait_for(&D.done, 1, 2000));
  assert_int_equal(atomic_load(&D.gone), 1);
  assert_int_equal(atomic_load(&D.end_rc), LITH_HTTP_GONE);
  assert_true(wait_for(&f->stopped, 1, 3000));
  close(fd);
  free(b);
  free(r);
}

/* A FINISH request held when the stop begins may start its stream during
 * the grace (a download whose snapshot was still being made); an END one
 * may not (its stream would be ended at once). */
static void test_finish_stream_starts_during_stop(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  int bad;
  for (int mode = LITH_HTTP_STOP_END; mode <= LITH_HTTP_STOP_FINISH; mode++) {
    if (mode == LITH_HTTP_STOP_FINISH) {
      teardown(state);
      setup(state);
      f = *state;
    }
    dl_setup(f, 1u << 20, mode, 1);
    int fd = tcp_connect(f->port);
    rbuf *b = malloc(sizeof *b);
    rbuf_init(b, fd);
    send_str(fd, "GET /dl HTTP/1.1\r\nHost: t\r\n\r\n");
    for (int i = 0; i < 2000; i++) {
      lith_http_stats st;
      on_loop(f, job_stats, &st);
      if (st.pending == 1)
        break;
      usleep(1000);
    }
    stop_args sa = {3000};
    on_loop(f, job_stop, &sa);
    on_loop(f, job_dl_start, NULL);
    assert_true(read_head(b, r));
    if (mode == LITH_HTTP_STOP_END) {
      assert_int_equal(atomic_load(&D.start_rc), LITH_HTTP_STOPPING);
      assert_int_equal(r->status, 503);
    } else {
      assert_int_equal(atomic_load(&D.start_rc), LITH_HTTP_OK);
      assert_int_equal(r->status, 200);
      assert_int_equal(dl_read(b, 1u << 20, 0, &bad), 1u << 20);
      assert_int_equal(bad, 0);
      assert_true(wait_for(&D.done, 1, 2000));
      assert_int_equal(atomic_load(&D.end_rc), LITH_HTTP_OK);
    }
    assert_true(wait_for(&f->stopped, 1, 2000));
    close(fd);
    free(b);
  }
  free(r);
}

static void job_at_stop_misuse(fx *f, void *arg) {
  (void)f;
  (void)arg;
  LOOP_CHECK(lith_http_stream_at_stop(NULL, LITH_HTTP_STOP_FINISH) == LITH_HTTP_MISUSE);
}

static int h_at_stop_bad_mode(lith_http_req *req, void *arg) {
  (void)arg;
  LOOP_CHECK(lith_http_stream_at_stop(req, 2) == LITH_HTTP_MISUSE);
  LOOP_CHECK(lith_http_stream_at_stop(req, -1) == LITH_HTTP_MISUSE);
  lith_http_respond(req, 204, NULL, NULL, 0);
  return LITH_HTTP_DONE;
}

static void job_route_bad_mode(fx *f, void *arg) {
  (void)arg;
  LOOP_CHECK(lith_http_route(f->srv, "GET", "/badmode", LITH_HTTP_EXACT, h_at_stop_bad_mode, f) ==
             LITH_HTTP_OK);
}

static void test_at_stop_misuse(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  on_loop(f, job_at_stop_misuse, NULL);
  on_loop(f, job_route_bad_mode, NULL);
  exchange(f->port, "GET /badmode HTTP/1.1\r\nHost: t\r\n\r\n", r);
  assert_int_equal(r->status, 204);
  free(r);
}

/* ---- streams and the write timeout ----------------------------------------------- */

static int setup_wt(void **state) {
  ht_write_timeout_ms = 200;
  return setup(state);
}

/* A download whose client stops reading: the write timeout closes the
 * connection and the holder is told (on_gone), so it frees what it held. */
static void test_write_timeout_frees_stream(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  dl_setup(f, 64u << 20, LITH_HTTP_STOP_FINISH, 0);
  int fd = tcp_connect_opt(f->port, 4096);
  rbuf *b = malloc(sizeof *b);
  rbuf_init(b, fd);
  send_str(fd, "GET /dl HTTP/1.1\r\nHost: t\r\n\r\n");
  assert_true(read_head(b, r));
  assert_int_equal(r->status, 200);
  assert_true(wait_for(&D.gone, 1, 5000));
  assert_true(wait_for(&D.done, 1, 2000));
  assert_int_equal(atomic_load(&D.end_rc), LITH_HTTP_GONE);
  lith_http_stats st;
  on_loop(f, job_stats, &st);
  assert_int_equal(st.write_timeouts, 1);
  assert_int_equal(st.pending, 0);
  assert_int_equal(st.streams_open, 0);
  assert_true(closed_by_server(fd));
  close(fd);
  free(b);
  free(r);
}

/* An event stream with nothing to say is never cut by the write timeout:
 * only bytes waiting for a client count. */
static void test_write_timeout_spares_idle_stream(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  int fd = tcp_connect(f->port);
  rbuf *b = malloc(sizeof *b);
  rbuf_init(b, fd);
  send_str(fd, "GET /events HTTP/1.1\r\nHost: t\r\n\r\n");
  assert_true(read_head(b, r));
  assert_true(wait_for(&f->sse_sent, 3, 2000));
  usleep(5 * 200 * 1000);
  lith_http_stats st;
  on_loop(f, job_stats, &st);
  assert_int_equal(st.write_timeouts, 0);
  assert_int_equal(st.streams_open, 1);
  assert_int_equal(atomic_load(&f->sse_gone), 0);
  close(fd);
  assert_true(wait_for(&f->sse_gone, 1, 2000));
  free(b);
  free(r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_sse, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sse_slow_client_bounded, setup, teardown),
      cmocka_unit_test_setup_teardown(test_known_length_paced, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stop_lets_finish_stream_run, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stop_cuts_finish_stream_at_deadline, setup, teardown),
      cmocka_unit_test_setup_teardown(test_finish_stream_starts_during_stop, setup, teardown),
      cmocka_unit_test_setup_teardown(test_at_stop_misuse, setup, teardown),
      cmocka_unit_test_setup_teardown(test_write_timeout_frees_stream, setup_wt, teardown),
      cmocka_unit_test_setup_teardown(test_write_timeout_spares_idle_stream, setup_wt, teardown),
  };
  return HT_RUN(tests);
}
