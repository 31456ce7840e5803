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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_sse, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sse_slow_client_bounded, setup, teardown),
      cmocka_unit_test_setup_teardown(test_known_length_paced, setup, teardown),
  };
  return HT_RUN(tests);
}
