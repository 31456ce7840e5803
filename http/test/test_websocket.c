/*
 * Tests of http/websocket.c: the upgrade (subprotocol echoed, accept key),
 * messages both ways (fragments, a frame torn across writes, pings), and
 * every bound and end: a message past max_body or in too many fragments
 * (1009), an unmasked frame (1002), a fast reader never cut, on_sent, a
 * client whose pongs wait, the write timeout, the idle bound (pings no
 * activity, busy), a close from either side, a client that vanishes, and
 * the server's stop.
 *
 * The server runs on a loop thread (helper.h); the route /ws is added
 * here: its handler accepts with the subprotocol "chat" when offered and
 * echoes every text message; "close" makes it close (1000), "flood" makes
 * it send 400 messages of 8 KiB at once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "helper.h"
#include "wsclient.h"

static atomic_int ws_opened, ws_closed, ws_msgs, flood_rc, accept_rc, sent_ok, sent_dropped, sent_order;
static unsigned idle_ms;   /* the next accept's idle bound */
static lith_http_ws *held; /* "hold" made it busy */

static void on_message(lith_http_ws *ws, const char *data, size_t len, int binary, void *arg) {
  (void)arg;
  atomic_fetch_add(&ws_msgs, 1);
  if (binary) {
    lith_http_ws_close(ws, 1003, "text only");
  } else if (len == 5 && memcmp(data, "close", 5) == 0) {
    LOOP_CHECK(lith_http_ws_send_text(ws, "last words", 10) == LITH_HTTP_OK); /* before the close frame */
    LOOP_CHECK(lith_http_ws_close(ws, 1000, "bye") == LITH_HTTP_OK);
    LOOP_CHECK(lith_http_ws_send_text(ws, "late", 4) == LITH_HTTP_GONE);
  } else if (len == 6 && memcmp(data, "tagged", 6) == 0) {
    static char big[65536]; /* 19.7 MB: more than the kernel's buffers hold */
    memset(big, 't', sizeof big);
    for (uintptr_t i = 1; i <= 300; i++)
      LOOP_CHECK(lith_http_ws_send_tagged(ws, big, sizeof big, i) == LITH_HTTP_OK);
  } else if (len == 4 && memcmp(data, "hold", 4) == 0) {
    lith_http_ws_set_busy(ws, 1); /* an answer is owed: never idle */
    held = ws;
  } else if (len >= 5 && memcmp(data, "flood", 5) == 0) {
    static char big[8192];
    char num[16] = ""; /* data is not NUL-terminated */
    memcpy(num, data + 5, len - 5 < sizeof num - 1 ? len - 5 : sizeof num - 1);
    int rc = LITH_HTTP_OK, n = len > 5 ? atoi(num) : 400; /* "flood7": 56 KiB */
    memset(big, 'x', sizeof big);
    for (int i = 0; i < n && rc == LITH_HTTP_OK; i++)
      rc = lith_http_ws_send_text(ws, big, sizeof big);
    atomic_store(&flood_rc, rc);
  } else {
    LOOP_CHECK(lith_http_ws_send_text(ws, data, len) == LITH_HTTP_OK);
  }
}

static uintptr_t last_tag;

static void on_sent(lith_http_ws *ws, uintptr_t tag, int sent, void *arg) {
  (void)ws;
  (void)arg;
  if (tag != (last_tag % 300) + 1) /* in the order sent, each once */
    atomic_fetch_add(&sent_order, 1);
  last_tag = tag;
  atomic_fetch_add(sent ? &sent_ok : &sent_dropped, 1);
}

static void on_close(lith_http_ws *ws, void *arg) {
  (void)ws;
  (void)arg;
  atomic_fetch_add(&ws_closed, 1);
}

static int h_ws(lith_http_req *req, void *arg) {
  (void)arg;
  if (!lith_http_ws_is_handshake(req)) {
    lith_http_respond_error(req, 426, "a WebSocket handshake is expected");
    return LITH_HTTP_DONE;
  }
  const char *offer = lith_http_req_header(req, "sec-websocket-protocol");
  lith_http_ws_options o = {0};
  o.protocol = offer != NULL && strstr(offer, "chat") != NULL ? "chat" : NULL;
  o.idle_ms = idle_ms;
  o.on_message = on_message;
  o.on_close = on_close;
  o.on_sent = on_sent;
  lith_http_ws *ws = NULL;
  int rc = lith_http_ws_accept(req, &o, &ws);
  atomic_store(&accept_rc, rc);
  if (rc == LITH_HTTP_OK) {
    LOOP_CHECK(ws != NULL && strncmp(lith_http_ws_peer(ws), "127.0.0.1:", 10) == 0);
    atomic_fetch_add(&ws_opened, 1);
  }
  return LITH_HTTP_DONE;
}

static void job_route(fx *f, void *arg) {
  (void)arg;
  LOOP_CHECK(lith_http_route(f->srv, "GET", "/ws", LITH_HTTP_EXACT, h_ws, f) == LITH_HTTP_OK);
}

static int ws_setup(void **state) {
  int rc = setup(state);
  atomic_store(&ws_opened, 0);
  atomic_store(&ws_closed, 0);
  atomic_store(&ws_msgs, 0);
  atomic_store(&flood_rc, -1);
  atomic_store(&accept_rc, -1);
  atomic_store(&sent_ok, 0);
  atomic_store(&sent_dropped, 0);
  atomic_store(&sent_order, 0);
  last_tag = 0;
  on_loop(*state, job_route, NULL);
  return rc;
}

static int ws_teardown(void **state) {
  int rc = teardown(state);
  idle_ms = 0;
  return rc;
}

/* ---- the upgrade and messages ------------------------------------------------ */

static void test_ws_echo(void **state) {
  fx *f = *state;
  char head[4096], v[64], buf[2048];
  int op = 0, code = 0;
  int fd = wsc_tcp(f->port, 0);
  assert_true(fd >= 0);
  assert_int_equal(wsc_handshake(fd, "/ws", "other, chat", NULL, head, sizeof head), 101);
  assert_string_equal(wsc_header(head, "sec-websocket-protocol", v, sizeof v), "chat");
  assert_int_equal(wsc_send_text(fd, "hello"), 0);
  assert_int_equal(wsc_read_text(fd, buf, sizeof buf, &code), 5);
  assert_string_equal(buf, "hello");
  /* a message in two fragments comes to the application whole */
  assert_int_equal(wsc_send_frame(fd, 0, WSC_TEXT, "hel", 3, 1), 0);
  assert_int_equal(wsc_send_frame(fd, 1, 0, "lo again", 8, 1), 0);
  assert_int_equal(wsc_read_text(fd, buf, sizeof buf, &code), 11);
  assert_string_equal(buf, "hello again");
  /* a frame torn across writes (and TCP segments) */
  unsigned char frame[64];
  size_t n = 0;
  frame[n++] = 0x81;
  frame[n++] = 0x80 | 4;
  memcpy(frame + n, "\1\2\3\4", 4);
  n += 4;
  for (int i = 0; i < 4; i++)
    frame[n++] = (unsigned char)("torn"[i] ^ (i + 1));
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(send(fd, frame + i, 1, 0), 1);
    usleep(2000);
  }
  assert_int_equal(wsc_read_text(fd, buf, sizeof buf, &code), 4);
  assert_string_equal(buf, "torn");
  /* a ping is answered with its payload; the application never sees it */
  assert_int_equal(wsc_send_frame(fd, 1, WSC_PING, "p1", 2, 1), 0);
  assert_int_equal(wsc_read_frame(fd, &op, buf, sizeof buf, NULL), 2);
  assert_int_equal(op, WSC_PONG);
  assert_string_equal(buf, "p1");
  assert_int_equal(atomic_load(&ws_msgs), 3);
  /* a close from the client: answered, and the application told */
  assert_int_equal(wsc_send_frame(fd, 1, WSC_CLOSE, "\x03\xe8", 2, 1), 0);
  assert_int_equal(wsc_read_frame(fd, &op, buf, sizeof buf, &code), 2);
  assert_int_equal(op, WSC_CLOSE);
  assert_int_equal(code, 1000);
  assert_true(closed_by_server(fd));
  assert_true(wait_for(&ws_closed, 1, 2000));
  close(fd);
  lith_http_stats st;
  on_loop(f, job_stats, &st);
  assert_int_equal(st.pending, 0);
  assert_int_equal(count_of(f, 101), 1);
}

/* No subprotocol offered: none echoed. A request that is no handshake is
 * the handler's to answer; HTTP/1.0 or a wrong version is no handshake. */
static void test_ws_not_handshake(void **state) {
  fx *f = *state;
  char head[4096], v[64];
  resp *r = new_resp();
  int fd = wsc_tcp(f->port, 0);
  assert_int_equal(wsc_handshake(fd, "/ws", NULL, NULL, head, sizeof head), 101);
  assert_null(wsc_header(head, "sec-websocket-protocol", v, sizeof v));
  close(fd);
  exchange(f->port, "GET /ws HTTP/1.1\r\nHost: t\r\n\r\n", r);
  assert_int_equal(r->status, 426);
  exchange(f->port,
           "GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n",
           r);
  assert_int_equal(r->status, 426);
  exchange(f->port,
           "GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: short\r\nSec-WebSocket-Version: 13\r\n\r\n",
           r);
  assert_int_equal(r->status, 426);
  assert_true(wait_for(&ws_closed, 1, 2000));
  free(r);
}

/* ---- bounds -------------------------------------------------------------------- */

/* A message past max_body (MAX_BODY, 1024), whole or in fragments: 1009. */
static void test_ws_too_large(void **state) {
  fx *f = *state;
  char buf[2048], big[MAX_BODY + 1];
  int code = 0;
  memset(big, 'a', sizeof big);
  int fd = wsc_open(f->port, "/ws", NULL, NULL);
  assert_true(fd >= 0);
  assert_int_equal(wsc_send_frame(fd, 1, WSC_TEXT, big, MAX_BODY, 1), 0); /* at the bound: fine */
  assert_int_equal(wsc_read_text(fd, buf, sizeof buf, &code), MAX_BODY);
  assert_int_equal(wsc_send_frame(fd, 1, WSC_TEXT, big, sizeof big, 1), 0);
  assert_int_equal(wsc_read_text(fd, buf, sizeof buf, &code), -2);
  assert_int_equal(code, 1009);
  close(fd);
  fd = wsc_open(f->port, "/ws", NULL, NULL);
  assert_int_equal(wsc_send_frame(fd, 0, WSC_TEXT, big, 600, 1), 0);
  assert_int_equal(wsc_send_frame(fd, 1, 0, big, 600, 1), 0);
  assert_int_equal(wsc_read_text(fd, buf, sizeof buf, &code), -2);
  assert_int_equal(code, 1009);
  close(fd);
  assert_true(wait_for(&ws_closed, 2, 2000));
  assert_int_equal(atomic_load(&ws_msgs), 1);
}

/* A message in more than 1024 fragments (wslay keeps each as a chunk of
 * its own: 1-byte fragments cost ~93 bytes a byte, under max_body): 1009,
 * and the client's frames after the 1025th are not read. */
static void test_ws_fragments(void **state) {
  fx *f = *state;
  char buf[2048];
  int code = 0;
  int fd = wsc_open(f->port, "/ws", NULL, NULL);
  assert_true(fd >= 0);
  assert_int_equal(wsc_send_frame(fd, 0, WSC_TEXT, "a", 1, 1), 0); /* 1024 fragments: fine */
  for (int i = 1; i < 1023; i++)
    assert_int_equal(wsc_send_frame(fd, 0, 0, "a", 1, 1), 0);
  assert_int_equal(wsc_send_frame(fd, 1, WSC_PING, "p", 1, 1), 0); /* control frames count for nothing */
  assert_int_equal(wsc_send_frame(fd, 1, 0, "a", 1, 1), 0);
  assert_int_equal(wsc_read_text(fd, buf, sizeof buf, &code), 1024);
  /* empty fragments: max_body never meets them */
  assert_int_equal(wsc_send_frame(fd, 0, WSC_TEXT, "b", 1, 1), 0);
  for (int i = 1; i < 2048 && wsc_send_frame(fd, i == 2047, 0, "", 0, 1) == 0; i++)
    ;
  assert_int_equal(wsc_read_text(fd, buf, sizeof buf, &code), -2);
  assert_int_equal(code, 1009);
  assert_true(closed_by_server(fd));
  close(fd);
  assert_true(wait_for(&ws_closed, 1, 2000));
  assert_int_equal(atomic_load(&ws_msgs), 1);
}

/* A client's frame must be masked (RFC 6455 5.1): 1002. */
static void test_ws_unmasked(void **state) {
  fx *f = *state;
  char buf[256];
  int code = 0;
  int fd = wsc_open(f->port, "/ws", NULL, NULL);
  assert_int_equal(wsc_send_frame(fd, 1, WSC_TEXT, "plain", 5, 0), 0);
  assert_int_equal(wsc_read_text(fd, buf, sizeof buf, &code), -2);
  assert_int_equal(code, 1002);
  close(fd);
  assert_true(wait_for(&ws_closed, 1, 2000));
  assert_int_equal(atomic_load(&ws_msgs), 0);
}

/* A client that reads as fast as it can is never cut, however much one
 * loop turn queues for it (400 messages of 8 KiB at once: 3.2 MB; a fixed
 * bound of 256 KiB cut @libsql/client's Promise.all of 4 SELECTs). */
static void test_ws_fast_reader(void **state) {
  fx *f = *state;
  static char buf[16384];
  int code = 0;
  int fd = wsc_open(f->port, "/ws", NULL, NULL);
  assert_int_equal(wsc_send_text(fd, "flood"), 0);
  for (int i = 0; i < 400; i++)
    assert_int_equal(wsc_read_text(fd, buf, sizeof buf, &code), 8192);
  assert_true(wait_for(&flood_rc, LITH_HTTP_OK, 2000));
  lith_http_stats st;
  on_loop(f, job_stats, &st);
  assert_int_equal(st.stream_overflows, 0);
  close(fd);
  assert_true(wait_for(&ws_closed, 1, 2000));
}

/* on_sent: each tagged message once, in order, when written (a reader
 * takes all 300), or dropped when the connection ends first (one that
 * reads nothing and leaves). */
static void test_ws_sent(void **state) {
  fx *f = *state;
  static char buf[16384];
  int code = 0;
  int fd = wsc_open(f->port, "/ws", NULL, NULL);
  assert_int_equal(wsc_send_text(fd, "tagged"), 0);
  for (int i = 0; i < 300; i++)
    assert_int_equal(wsc_read_text(fd, buf, sizeof buf, &code), 65536);
  assert_true(wait_for(&sent_ok, 300, 2000));
  assert_int_equal(atomic_load(&sent_dropped), 0);
  close(fd);
  fd = wsc_tcp(f->port, 4096);
  char head[4096];
  assert_int_equal(wsc_handshake(fd, "/ws", NULL, NULL, head, sizeof head), 101);
  assert_int_equal(wsc_send_text(fd, "tagged"), 0);
  assert_true(wait_for(&ws_msgs, 2, 2000));
  usleep(100 * 1000);
  close(fd);
  assert_true(wait_for(&ws_closed, 2, 2000));
  assert_int_equal(atomic_load(&sent_ok) + atomic_load(&sent_dropped), 600);
  assert_true(atomic_load(&sent_dropped) > 0);
  assert_int_equal(atomic_load(&sent_order), 0);
}

/* A client that pings and never reads: its pongs wait (wslay queues one
 * per ping); past 64 it is cut as a slow reader, long before the write
 * timeout. */
static void test_ws_pongs(void **state) {
  fx *f = *state;
  char head[4096];
  int fd = wsc_tcp(f->port, 4096);
  assert_int_equal(wsc_handshake(fd, "/ws", NULL, NULL, head, sizeof head), 101);
  assert_int_equal(wsc_send_text(fd, "flood"), 0); /* the socket's buffers fill */
  assert_true(wait_for(&flood_rc, LITH_HTTP_OK, 2000));
  usleep(200 * 1000);
  for (int i = 0; i < 100; i++)
    if (wsc_send_frame(fd, 1, WSC_PING, "p", 1, 1) != 0)
      break;
  assert_true(wait_for(&ws_closed, 1, 2000));
  lith_http_stats st;
  on_loop(f, job_stats, &st);
  assert_int_equal(st.stream_overflows, 1);
  close(fd);
}

/* A client that takes nothing of what waits for it (within the bound)
 * for write_timeout_ms: cut, as any connection of the layer. */
static void test_ws_write_timeout(void **state) {
  fx *f = *state;
  char head[4096];
  int fd = wsc_tcp(f->port, 4096);
  assert_int_equal(wsc_handshake(fd, "/ws", NULL, NULL, head, sizeof head), 101);
  assert_int_equal(wsc_send_text(fd, "flood7"), 0);
  assert_true(wait_for(&flood_rc, LITH_HTTP_OK, 2000));
  assert_true(wait_for(&ws_closed, 1, 4000));
  lith_http_stats st;
  on_loop(f, job_stats, &st);
  assert_int_equal(st.write_timeouts, 1);
  assert_int_equal(st.stream_overflows, 0);
  close(fd);
}

static int ws_setup_write_timeout(void **state) {
  ht_write_timeout_ms = 300;
  return ws_setup(state);
}

/* No frame either way for idle_ms: closed with 1001. */
static void test_ws_idle(void **state) {
  fx *f = *state;
  char buf[256];
  int code = 0;
  idle_ms = 300;
  int fd = wsc_open(f->port, "/ws", NULL, NULL);
  usleep(150 * 1000);
  assert_int_equal(wsc_send_text(fd, "still here"), 0); /* resets it */
  assert_int_equal(wsc_read_text(fd, buf, sizeof buf, &code), 10);
  int64_t t0 = now_ms();
  assert_int_equal(wsc_read_text(fd, buf, sizeof buf, &code), -2);
  assert_int_equal(code, 1001);
  int64_t took = now_ms() - t0;
  assert_true(took >= 250 && took < 2000);
  /* not answering our close: cut a second later */
  assert_true(closed_by_server(fd));
  assert_true(wait_for(&ws_closed, 1, 3000));
  close(fd);
}

/* Pings are no activity: a client that only pings is closed at idle_ms
 * all the same (it never says what it came for). */
static void test_ws_idle_pings(void **state) {
  fx *f = *state;
  char buf[256];
  int code = 0;
  idle_ms = 300;
  int fd = wsc_open(f->port, "/ws", NULL, NULL);
  for (int i = 0; i < 18; i++) { /* 900 ms */
    wsc_send_frame(fd, 1, WSC_PING, "p", 1, 1);
    usleep(50 * 1000);
  }
  int64_t t0 = now_ms();
  assert_int_equal(wsc_read_text(fd, buf, sizeof buf, &code), -2); /* sent at 300 ms: here already */
  assert_int_equal(code, 1001);
  assert_true(now_ms() - t0 < 150);
  close(fd);
  assert_true(wait_for(&ws_closed, 1, 3000));
}

static void job_release(fx *f, void *arg) {
  (void)f;
  (void)arg;
  LOOP_CHECK(lith_http_ws_send_text(held, "done", 4) == LITH_HTTP_OK);
  lith_http_ws_set_busy(held, 0);
}

/* While the application owes an answer (lith_http_ws_set_busy) the idle
 * bound does not run; once it is given, idle_ms counts again. */
static void test_ws_idle_busy(void **state) {
  fx *f = *state;
  char buf[256];
  int code = 0;
  idle_ms = 300;
  int fd = wsc_open(f->port, "/ws", NULL, NULL);
  assert_int_equal(wsc_send_text(fd, "hold"), 0);
  assert_true(wait_for(&ws_msgs, 1, 2000));
  usleep(800 * 1000);
  on_loop(f, job_release, NULL);
  assert_int_equal(wsc_read_text(fd, buf, sizeof buf, &code), 4); /* not a close */
  assert_string_equal(buf, "done");
  int64_t t0 = now_ms();
  assert_int_equal(wsc_read_text(fd, buf, sizeof buf, &code), -2);
  assert_int_equal(code, 1001);
  assert_true(now_ms() - t0 >= 250);
  close(fd);
  assert_true(wait_for(&ws_closed, 1, 3000));
}

/* ---- ends -------------------------------------------------------------------------- */

static void test_ws_server_close(void **state) {
  fx *f = *state;
  char buf[256];
  int code = 0;
  int fd = wsc_open(f->port, "/ws", NULL, NULL);
  assert_int_equal(wsc_send_text(fd, "close"), 0);
  assert_int_equal(wsc_read_text(fd, buf, sizeof buf, &code), 10); /* wslay would send the close first */
  assert_string_equal(buf, "last words");
  assert_int_equal(wsc_read_text(fd, buf, sizeof buf, &code), -2);
  assert_int_equal(code, 1000);
  assert_int_equal(wsc_send_frame(fd, 1, WSC_CLOSE, "\x03\xe8", 2, 1), 0);
  assert_true(closed_by_server(fd));
  assert_true(wait_for(&ws_closed, 1, 2000));
  close(fd);
  /* binary: the handler's choice, 1003 */
  fd = wsc_open(f->port, "/ws", NULL, NULL);
  assert_int_equal(wsc_send_frame(fd, 1, WSC_BINARY, "\0\1", 2, 1), 0);
  assert_int_equal(wsc_read_text(fd, buf, sizeof buf, &code), -2);
  assert_int_equal(code, 1003);
  close(fd);
  assert_true(wait_for(&ws_closed, 2, 2000));
}

static void test_ws_client_vanishes(void **state) {
  fx *f = *state;
  int fd = wsc_open(f->port, "/ws", NULL, NULL);
  assert_true(wait_for(&ws_opened, 1, 2000));
  close(fd);
  assert_true(wait_for(&ws_closed, 1, 2000));
  lith_http_stats st;
  on_loop(f, job_stats, &st);
  assert_true(wait_for(&ws_closed, 1, 2000));
  assert_int_equal(st.pending, 0);
}

/* The stop: a close frame (1001) to each; one that answers ends at once,
 * one that does not is cut at the deadline; then the server has stopped. */
static void test_ws_stop(void **state) {
  fx *f = *state;
  char buf[256];
  int code = 0;
  int a = wsc_open(f->port, "/ws", NULL, NULL);
  int b = wsc_open(f->port, "/ws", NULL, NULL);
  assert_true(wait_for(&ws_opened, 2, 2000));
  stop_args s = {400};
  on_loop(f, job_stop, &s);
  assert_int_equal(wsc_read_text(a, buf, sizeof buf, &code), -2);
  assert_int_equal(code, 1001);
  assert_string_equal(buf + 2, "server stopping");
  assert_int_equal(wsc_send_frame(a, 1, WSC_CLOSE, "\x03\xe9", 2, 1), 0);
  assert_true(closed_by_server(a));
  assert_int_equal(wsc_read_text(b, buf, sizeof buf, &code), -2); /* and never answers */
  assert_true(wait_for(&f->stopped, 1, 3000));
  assert_int_equal(atomic_load(&ws_closed), 2);
  assert_true(closed_by_server(b));
  close(a);
  close(b);
  /* a handshake after the stop began is refused */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_ws_echo, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_ws_not_handshake, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_ws_too_large, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_ws_unmasked, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_ws_fragments, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_ws_fast_reader, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_ws_sent, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_ws_pongs, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_ws_write_timeout, ws_setup_write_timeout, ws_teardown),
      cmocka_unit_test_setup_teardown(test_ws_idle, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_ws_idle_pings, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_ws_idle_busy, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_ws_server_close, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_ws_client_vanishes, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_ws_stop, ws_setup, ws_teardown),
  };
  return HT_RUN(tests);
}
