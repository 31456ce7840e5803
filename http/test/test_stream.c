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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_sse, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sse_slow_client_bounded, setup, teardown),
  };
  return HT_RUN(tests);
}
