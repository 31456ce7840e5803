/*
 * Tests of http/http.c: the server itself: listening on a Unix socket, the
 * graceful stop (in-flight requests finished, a deadline for the rest),
 * HTTP/2 over cleartext, the counters, and destroying a server that was never
 * stopped.
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

/* ---- Unix socket -------------------------------------------------------------------- */

typedef struct listen_args {
  const char *path;
  int rc;
} listen_args;

static void job_listen_unix(fx *f, void *arg) {
  listen_args *a = arg;
  a->rc = lith_http_listen_unix(f->srv, a->path);
}

static void test_unix_socket(void **state) {
  fx *f = *state;
  const char *path = "lith-http-test.sock";
  /* a stale socket file: bound, never listened on, left behind */
  unlink(path);
  int stale = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
  assert_int_equal(bind(stale, (struct sockaddr *)&a, sizeof a), 0);
  close(stale);
  listen_args la = {path, -1};
  on_loop(f, job_listen_unix, &la);
  assert_int_equal(la.rc, LITH_HTTP_OK);
  struct stat st;
  assert_int_equal(lstat(path, &st), 0);
  assert_true(S_ISSOCK(st.st_mode));
  assert_int_equal(st.st_mode & 0777, 0600);

  resp *r = new_resp();
  char v[64];
  rbuf *b = malloc(sizeof *b);
  int fd = unix_connect(path);
  rbuf_init(b, fd);
  send_str(fd, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nunix");
  assert_true(read_response(b, r));
  assert_int_equal(r->status, 200);
  assert_string_equal(r->body, "unix");
  assert_string_equal(resp_header(r, "x-peer", v, sizeof v), "unix");
  assert_string_equal(resp_header(r, "x-loopback", v, sizeof v), "1");
  close(fd);

  /* a live socket is not taken over, nor is a file that is not a socket */
  on_loop(f, job_listen_unix, &la);
  assert_int_equal(la.rc, LITH_HTTP_ADDRINUSE);
  FILE *fp = fopen("plain-file", "w");
  fputs("keep me", fp);
  fclose(fp);
  listen_args lb = {"plain-file", -1};
  on_loop(f, job_listen_unix, &lb);
  assert_int_equal(lb.rc, LITH_HTTP_ADDRINUSE);
  assert_int_equal(lstat("plain-file", &st), 0);
  assert_int_equal(st.st_size, 7);
  unlink("plain-file");

  /* stopping removes the socket file */
  stop_args sa = {1000};
  on_loop(f, job_stop, &sa);
  assert_true(wait_for(&f->stopped, 1, 3000));
  assert_int_equal(lstat(path, &st), -1);
  free(b);
  free(r);
}

/* ---- graceful stop ------------------------------------------------------------------ */

static void test_stop_completes_inflight(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  char v[64];
  /* an idle keep-alive connection must not hold the stop up */
  int idle = tcp_connect(f->port);
  rbuf *bi = malloc(sizeof *bi);
  rbuf_init(bi, idle);
  send_str(idle, "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n");
  assert_true(read_response(bi, r));

  int fd = tcp_connect(f->port);
  rbuf *b = malloc(sizeof *b);
  rbuf_init(b, fd);
  send_str(fd, "GET /stopwait HTTP/1.1\r\nHost: t\r\n\r\n");
  assert_true(wait_for(&f->stopwait_runs, 1, 2000));
  stop_args sa = {3000};
  int64_t t0 = now_ms();
  on_loop(f, job_stop, &sa);
  assert_int_equal(atomic_load(&f->stop_rc), LITH_HTTP_OK);
  assert_true(closed_by_server(idle));
  assert_true(read_response(b, r)); /* the request in flight is answered */
  assert_int_equal(r->status, 200);
  assert_string_equal(r->body, "finished");
  assert_string_equal(resp_header(r, "connection", v, sizeof v), "close");
  assert_true(closed_by_server(fd));
  assert_true(wait_for(&f->stopped, 1, 3000));
  assert_true(now_ms() - t0 < 2000);                 /* well before the grace period ran out */
  assert_int_equal(tcp_connect_opt(f->port, 0), -1); /* no longer listening */
  on_loop(f, job_stop, &sa);
  assert_int_equal(atomic_load(&f->stop_rc), LITH_HTTP_STOPPING);
  close(idle);
  close(fd);
  free(bi);
  free(b);
  free(r);
}

static void test_stop_deadline(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  char v[64];
  int fd = tcp_connect(f->port);
  rbuf *b = malloc(sizeof *b);
  rbuf_init(b, fd);
  send_str(fd, "GET /forever HTTP/1.1\r\nHost: t\r\n\r\n");
  assert_true(wait_for(&f->forever_runs, 1, 2000));
  /* and an open event stream, which stop ends at once */
  int es = tcp_connect(f->port);
  rbuf *be = malloc(sizeof *be);
  rbuf_init(be, es);
  send_str(es, "GET /events HTTP/1.1\r\nHost: t\r\n\r\n");
  assert_true(read_head(be, r));
  stop_args sa = {100};
  on_loop(f, job_stop, &sa);
  assert_true(wait_for(&f->sse_gone, 1, 2000));
  assert_int_equal(atomic_load(&f->sse_end_rc), LITH_HTTP_GONE);
  long n;
  while ((n = read_chunk(be, r)) > 0)
    ;
  assert_int_equal(n, 0); /* the stream ended properly, with its last chunk */
  assert_true(closed_by_server(es));
  assert_true(read_response(b, r));
  assert_int_equal(r->status, 503);
  assert_string_equal(r->body,
                      "{\"error\":{\"code\":\"service_unavailable\",\"message\":\"server stopping\"}}");
  assert_string_equal(resp_header(r, "retry-after", v, sizeof v), "1");
  assert_true(wait_for(&f->stopped, 1, 3000));
  assert_int_equal(atomic_load(&f->forever_rc), LITH_HTTP_GONE);
  close(fd);
  close(es);
  free(b);
  free(be);
  free(r);
}

/* ---- HTTP/2 over cleartext ------------------------------------------------------------ */

static void h2_frame(int fd, int type, int flags, uint32_t stream, const void *payload, size_t len) {
  unsigned char h[9] = {
      (unsigned char)(len >> 16),    (unsigned char)(len >> 8),    (unsigned char)len,
      (unsigned char)type,           (unsigned char)flags,         (unsigned char)(stream >> 24),
      (unsigned char)(stream >> 16), (unsigned char)(stream >> 8), (unsigned char)stream};
  send_all(fd, h, 9);
  if (len)
    send_all(fd, payload, len);
}

static void h2_preface(int fd) {
  send_str(fd, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
  h2_frame(fd, 4, 0, 0, NULL, 0); /* SETTINGS, empty */
}

/* HEADERS for GET/POST `path` on `stream` (HPACK literals, no Huffman). */
static void h2_request(int fd, uint32_t stream, const char *method, const char *path, int end) {
  unsigned char p[256];
  size_t n = 0, pl = strlen(path);
  p[n++] = !strcmp(method, "GET") ? 0x82 : 0x83; /* :method GET / POST */
  p[n++] = 0x86;                                 /* :scheme http */
  p[n++] = 0x44;                                 /* :path, literal */
  p[n++] = (unsigned char)pl;
  memcpy(p + n, path, pl);
  n += pl;
  p[n++] = 0x41; /* :authority, literal */
  p[n++] = 1;
  p[n++] = 't';
  h2_frame(fd, 1, 0x4 | (end ? 0x1 : 0), stream, p, n); /* END_HEADERS (| END_STREAM) */
}

/* Read frames until stream 1 ends; its :status and DATA into *status, r. */
static void h2_read_response_opt(rbuf *b, int *status, resp *r, int goaway_ok) {
  *status = 0;
  r->body_len = 0;
  r->body[0] = '\0';
  for (;;) {
    assert_true(rbuf_need(b, 9));
    const unsigned char *h = (const unsigned char *)b->data;
    size_t len = (size_t)h[0] << 16 | (size_t)h[1] << 8 | h[2];
    int type = h[3], flags = h[4];
    uint32_t stream = ((uint32_t)h[5] << 24 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 8 | h[8]) & 0x7fffffff;
    assert_true(rbuf_need(b, 9 + len));
    const unsigned char *p = (const unsigned char *)b->data + 9;
    if (type == 4 && !(flags & 1))
      h2_frame(b->fd, 4, 1, 0, NULL, 0);                /* ACK the server's SETTINGS */
    assert_true(type != 3 && (goaway_ok || type != 7)); /* no RST_STREAM, no GOAWAY */
    if (stream == 1 && type == 1) {                     /* HEADERS: :status 200 is static entry 8 */
      assert_true(len > 0);
      *status = p[0] == 0x88 ? 200 : p[0] == 0x8d ? 404 : -1;
    }
    if (stream == 1 && type == 0) {
      memcpy(r->body + r->body_len, p, len);
      r->body_len += len;
      r->body[r->body_len] = '\0';
    }
    rbuf_consume(b, 9 + len);
    if (stream == 1 && (type == 0 || type == 1) && (flags & 1))
      return;
  }
}

static void h2_read_response(rbuf *b, int *status, resp *r) { h2_read_response_opt(b, status, r, 0); }

static void test_http2_cleartext(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  rbuf *b = malloc(sizeof *b);
  int status;
  /* prior knowledge */
  int fd = tcp_connect(f->port);
  rbuf_init(b, fd);
  h2_preface(fd);
  h2_request(fd, 1, "GET", "/hello", 1);
  h2_read_response(b, &status, r);
  assert_int_equal(status, 200);
  assert_string_equal(r->body, "hello");
  close(fd);
  /* Upgrade: h2c; the answer to the upgraded request comes on stream 1 */
  fd = tcp_connect(f->port);
  rbuf_init(b, fd);
  send_str(fd, "GET /hello HTTP/1.1\r\nHost: t\r\nConnection: Upgrade, HTTP2-Settings\r\n"
               "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n");
  assert_true(read_head(b, r));
  assert_int_equal(r->status, 101);
  h2_preface(fd);
  h2_read_response(b, &status, r);
  assert_int_equal(status, 200);
  assert_string_equal(r->body, "hello");
  close(fd);
  /* an HTTP/2 client that leaves while its request is held */
  fd = tcp_connect(f->port);
  rbuf_init(b, fd);
  h2_preface(fd);
  h2_request(fd, 1, "POST", "/slow", 0);
  h2_frame(fd, 0, 1, 1, "data", 4); /* DATA, END_STREAM */
  assert_true(wait_for(&f->slow_runs, 1, 2000));
  close(fd);
  assert_true(wait_for(&f->gone_calls, 1, 2000));
  assert_true(wait_for(&f->late_done, 1, 2000));
  assert_int_equal(atomic_load(&f->late_rc), LITH_HTTP_GONE);
  assert_int_equal(atomic_load(&f->slow_body_ok), 1);
  lith_http_stats st;
  on_loop(f, job_stats, &st);
  assert_int_equal(st.by_class[0], 1); /* the reset stream: no response sent */
  free(b);
  free(r);
}

static void test_http2_stop_completes_inflight(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  rbuf *b = malloc(sizeof *b);
  int status;
  int fd = tcp_connect(f->port);
  rbuf_init(b, fd);
  h2_preface(fd);
  h2_request(fd, 1, "GET", "/stopwait", 1);
  assert_true(wait_for(&f->stopwait_runs, 1, 2000));
  stop_args sa = {3000};
  on_loop(f, job_stop, &sa);
  h2_read_response_opt(b, &status, r, 1); /* after a GOAWAY, the answer still comes */
  assert_int_equal(status, 200);
  assert_string_equal(r->body, "finished");
  assert_true(closed_by_server(fd));
  assert_true(wait_for(&f->stopped, 1, 3000));
  close(fd);
  free(b);
  free(r);
}

/* ---- counters, names ------------------------------------------------------------------- */

static void test_stats(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  exchange(f->port, "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n", r);
  exchange(f->port, "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n", r);
  exchange(f->port, "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n", r);
  exchange(f->port, "GET /secret HTTP/1.1\r\nHost: t\r\n\r\n", r);
  exchange(f->port, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 99999\r\n\r\n", r);
  assert_int_equal(r->status, 413);
  /* the logger runs when h2o frees the request, just after the response */
  lith_http_stats st;
  int64_t end = now_ms() + 2000;
  do {
    on_loop(f, job_stats, &st);
  } while (st.responses < 5 && now_ms() < end);
  assert_int_equal(st.responses, 5);
  assert_int_equal(st.by_class[2], 2);
  assert_int_equal(st.by_class[4], 3);
  assert_int_equal(st.by_class[5], 0);
  assert_int_equal(count_of(f, 200), 2);
  assert_int_equal(count_of(f, 404), 1);
  assert_int_equal(count_of(f, 401), 1);
  assert_int_equal(count_of(f, 413), 1);
  assert_int_equal(count_of(f, 42), 0);
  assert_int_equal(st.connections, 5);
  assert_int_equal(st.pending, 0);
  free(r);
}

/* What lith_http_on_access reported (loop thread writes, test reads after
 * an on_loop: the job's lock orders them). */
#define ACCESS_MAX 16
struct access_log {
  int n;
  struct {
    char method[16], path[64], route[32], peer[64];
    int status;
    uint64_t bytes, us;
  } a[ACCESS_MAX];
};

static void on_access(const lith_http_access *a, void *arg) {
  struct access_log *log = arg;
  if (log->n == ACCESS_MAX)
    return;
  snprintf(log->a[log->n].method, sizeof log->a[0].method, "%s", a->method);
  snprintf(log->a[log->n].path, sizeof log->a[0].path, "%s", a->path);
  snprintf(log->a[log->n].route, sizeof log->a[0].route, "%s", a->route != NULL ? a->route : "(none)");
  snprintf(log->a[log->n].peer, sizeof log->a[0].peer, "%s", a->peer);
  log->a[log->n].status = a->status;
  log->a[log->n].bytes = a->bytes;
  log->a[log->n].us = a->duration_us;
  log->n++;
}

static void job_access_on(fx *f, void *arg) { lith_http_on_access(f->srv, on_access, arg); }
static void job_access_off(fx *f, void *arg) { lith_http_on_access(f->srv, NULL, arg); }
static void job_nothing(fx *f, void *arg) {}

/* lith_http_on_access: one report per finished request, with the route
 * its method and path match (a prefix route by its prefix, also for a 413
 * the layer answered itself; none for 404 and 405, nor for a path with an
 * encoded slash, though decoded it names a route), the status counted,
 * the body bytes, a duration and the peer. */
static void test_access_reports(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  static struct access_log log;
  memset(&log, 0, sizeof log);
  on_loop(f, job_access_on, &log);
  exchange(f->port, "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n", r);
  exchange(f->port, "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n", r);
  exchange(f->port, "GET /v1/a/b?x=1 HTTP/1.1\r\nHost: t\r\n\r\n", r);
  exchange(f->port, "DELETE /hello HTTP/1.1\r\nHost: t\r\n\r\n", r);
  exchange(f->port, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 99999\r\n\r\n", r);
  exchange(f->port, "GET /v1%2Fexact HTTP/1.1\r\nHost: t\r\n\r\n", r);
  int64_t end = now_ms() + 2000;
  do
    on_loop(f, job_nothing, NULL);
  while (log.n < 6 && now_ms() < end);
  assert_int_equal(log.n, 6);
  static const struct {
    const char *method, *path, *route;
    int status;
  } want[] = {{"GET", "/hello", "/hello", 200},
              {"GET", "/nope", "(none)", 404},
              {"GET", "/v1/a/b", "/v1/", 200},
              {"DELETE", "/hello", "(none)", 405},
              {"POST", "/echo", "/echo", 413},
              {"GET", "/v1/exact", "(none)", 404}}; /* decoded, but no route takes it */
  for (int i = 0; i < 6; i++) {
    assert_string_equal(log.a[i].method, want[i].method);
    assert_string_equal(log.a[i].path, want[i].path);
    assert_string_equal(log.a[i].route, want[i].route);
    assert_int_equal(log.a[i].status, want[i].status);
    assert_true(log.a[i].bytes > 0);
    assert_true(log.a[i].us < 10 * 1000 * 1000);
    assert_true(strncmp(log.a[i].peer, "127.0.0.1:", 10) == 0);
  }
  /* off again: nothing more reported */
  on_loop(f, job_access_off, NULL);
  exchange(f->port, "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n", r);
  on_loop(f, job_nothing, NULL);
  assert_int_equal(log.n, 6);
  free(r);
}

static int h_hold(lith_http_req *req, void *arg) {
  *(lith_http_req **)arg = req;
  return LITH_HTTP_PENDING;
}

/* No fixture: loop, server and client all on the test thread; destroy is
 * called with a request held and an idle connection open, never stopped. */
static void test_destroy_without_stop(void **state) {
  (void)state;
  uv_loop_t loop;
  lith_http_server *srv;
  lith_http_req *held = NULL;
  resp *r = new_resp();
  rbuf *b = malloc(sizeof *b);
  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(lith_http_server_create(&loop, NULL, &srv), LITH_HTTP_OK);
  assert_int_equal(lith_http_route(srv, "GET", "/hold", LITH_HTTP_EXACT, h_hold, &held), 0);
  assert_int_equal(lith_http_listen_tcp(srv, "127.0.0.1", 0), LITH_HTTP_OK);
  int idle = tcp_connect(lith_http_port(srv)); /* the kernel accepts it for us */
  int fd = tcp_connect(lith_http_port(srv));
  rbuf_init(b, fd);
  send_str(fd, "GET /hold HTTP/1.1\r\nHost: t\r\n\r\n");
  for (int i = 0; i < 2000 && !held; i++) {
    uv_run(&loop, UV_RUN_NOWAIT);
    usleep(1000);
  }
  assert_non_null(held);
  lith_http_server_destroy(srv); /* stops with no grace, runs the loop until done */
  assert_int_equal(uv_loop_close(&loop), 0);
  assert_true(read_response(b, r));
  assert_int_equal(r->status, 503);
  assert_true(closed_by_server(fd));
  assert_true(closed_by_server(idle));
  close(fd);
  close(idle);
  free(b);
  free(r);
}

/* ---- write timeout ------------------------------------------------------------------- */

/* A whole answer far larger than what the kernel buffers of both ends hold
 * (a client that stops reading leaves most of it in libuv's write queue). */
#define BIG_LEN (24u << 20)
#define WT_MS 300

static char *big_body;

static int h_big(lith_http_req *req, void *arg) {
  (void)arg;
  LOOP_CHECK(lith_http_respond(req, 200, "application/octet-stream", big_body, BIG_LEN) == LITH_HTTP_OK);
  return LITH_HTTP_DONE;
}

static void job_route_big(fx *f, void *arg) {
  (void)arg;
  LOOP_CHECK(lith_http_route(f->srv, "GET", "/big", LITH_HTTP_EXACT, h_big, f) == LITH_HTTP_OK);
}

/* setup with write_timeout_ms `ms` and the route /big. */
static int setup_write_timeout(void **state, int ms) {
  if (!big_body) {
    big_body = malloc(BIG_LEN);
    assert_non_null(big_body);
    for (size_t i = 0; i < BIG_LEN; i++)
      big_body[i] = (char)('a' + i % 26);
  }
  ht_write_timeout_ms = ms;
  int rc = setup(state);
  on_loop(*state, job_route_big, NULL);
  return rc;
}

static int setup_wt(void **state) { return setup_write_timeout(state, WT_MS); }
/* For the slow reader: its own pauses are the test thread's, and a busy
 * machine kept it off the CPU past 300 ms (the answer cut after 317 KB). */
#define WT_SLOW_MS 1000
static int setup_wt_slow(void **state) { return setup_write_timeout(state, WT_SLOW_MS); }
static int setup_wt_off(void **state) { return setup_write_timeout(state, 0); }

/* A client that reads the head of a large answer, then nothing: its
 * connection is reset once the write made no progress for WT_MS (not
 * before), and the server holds nothing more for it. */
static void test_write_timeout_cuts_stuck_reader(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  rbuf *b = malloc(sizeof *b);
  int fd = tcp_connect_opt(f->port, 4096);
  assert_true(fd >= 0);
  rbuf_init(b, fd);
  int64_t t0 = now_ms();
  send_str(fd, "GET /big HTTP/1.1\r\nHost: t\r\n\r\n");
  assert_true(read_head(b, r));
  assert_int_equal(r->status, 200);
  lith_http_stats st;
  usleep(WT_MS / 2 * 1000);
  on_loop(f, job_stats, &st);
  assert_int_equal(st.write_timeouts, 0); /* not yet */
  assert_int_equal(st.connections_open, 1);
  /* Stalled from about t0: closed after WT_MS, within two periods more
   * (plus slack for a loaded machine and the sanitizers). */
  int64_t end = t0 + WT_MS + 2 * (WT_MS / 4) + 3000;
  for (;;) {
    on_loop(f, job_stats, &st);
    if (st.write_timeouts == 1 && st.connections_open == 0)
      break;
    assert_true(now_ms() < end);
    usleep(5000);
  }
  int64_t took = now_ms() - t0;
  print_message("stuck reader closed after %lld ms (write timeout %d ms)\n", (long long)took, WT_MS);
  assert_true(took >= WT_MS);
  assert_true(closed_by_server(fd));
  assert_int_equal(st.pending, 0);
  close(fd);
  free(b);
  free(r);
}

/* A client that reads slowly but steadily keeps its connection, however
 * long the answer takes: a write that makes progress never times out,
 * though one write (the whole answer) stays in flight all along (three
 * write timeouts of slow reading, WT_SLOW_MS each). */
static void test_write_timeout_spares_slow_reader(void **state) {
  fx *f = *state;
  char buf[16384];
  size_t got = 0;
  int bad = 0;
  resp *r = new_resp();
  rbuf *b = malloc(sizeof *b);
  int fd = tcp_connect_opt(f->port, 65536); /* a fixed window: no autotuning */
  assert_true(fd >= 0);
  rbuf_init(b, fd);
  send_str(fd, "GET /big HTTP/1.1\r\nHost: t\r\n\r\n");
  assert_true(read_head(b, r));
  assert_int_equal(r->status, 200);
  got = b->len;
  for (size_t i = 0; i < b->len; i++)
    bad += b->data[i] != (char)('a' + i % 26);
  int64_t slow_end = now_ms() + 3 * WT_SLOW_MS;
  while (got < BIG_LEN) {
    int slow = now_ms() < slow_end;
    ssize_t n = recv(fd, buf, slow ? 8192 : sizeof buf, 0);
    if (n <= 0)
      fail_msg("the answer ended after %zu of %u bytes", got, BIG_LEN);
    for (ssize_t i = 0; i < n; i++)
      bad += buf[i] != (char)('a' + (got + (size_t)i) % 26);
    got += (size_t)n;
    if (slow)
      usleep(20000); /* about 400 KB/s: far slower than the server writes */
  }
  assert_int_equal(got, BIG_LEN);
  assert_int_equal(bad, 0);
  lith_http_stats st;
  on_loop(f, job_stats, &st);
  assert_int_equal(st.write_timeouts, 0);
  close(fd);
  free(b);
  free(r);
}

/* write_timeout_ms 0: never, not "at once". */
static void test_write_timeout_off(void **state) {
  fx *f = *state;
  int fd = tcp_connect_opt(f->port, 4096);
  assert_true(fd >= 0);
  send_str(fd, "GET /big HTTP/1.1\r\nHost: t\r\n\r\n");
  usleep(3 * WT_MS * 1000);
  lith_http_stats st;
  on_loop(f, job_stats, &st);
  assert_int_equal(st.write_timeouts, 0);
  assert_int_equal(st.connections_open, 1);
  close(fd);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_unix_socket, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stop_completes_inflight, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stop_deadline, setup, teardown),
      cmocka_unit_test_setup_teardown(test_http2_cleartext, setup, teardown),
      cmocka_unit_test_setup_teardown(test_http2_stop_completes_inflight, setup, teardown),
      cmocka_unit_test(test_destroy_without_stop),
      cmocka_unit_test_setup_teardown(test_stats, setup, teardown),
      cmocka_unit_test_setup_teardown(test_access_reports, setup, teardown),
      cmocka_unit_test_setup_teardown(test_write_timeout_cuts_stuck_reader, setup_wt, teardown),
      cmocka_unit_test_setup_teardown(test_write_timeout_spares_slow_reader, setup_wt_slow, teardown),
      cmocka_unit_test_setup_teardown(test_write_timeout_off, setup_wt_off, teardown),
  };
  return HT_RUN(tests);
}
