/*
 * Tests of the HTTP layer, end to end: a real server on 127.0.0.1 port 0 (or
 * a Unix socket) whose loop runs in a thread of its own, and a client in the
 * test thread that writes raw HTTP/1.1 (and HTTP/2 frames) on plain sockets
 * and parses what comes back. No HTTP client library: the point is to see
 * the bytes.
 *
 * The test thread never touches the server directly while the loop runs: it
 * posts a job (on_loop) through a uv_async_t and waits for it. Handlers run
 * on the loop thread and report through atomics. Each test gets a fresh
 * loop and server; teardown stops the server and waits until the loop
 * thread's uv_run returned, destroyed the server there (the documented
 * place) and found no handle left in uv_loop_close.
 *
 * One loop thread serves every test in turn and lives until the process
 * exits: h2o 2.2.5 keeps per-thread caches of freed memory (pool chunks,
 * socket buffers; bounded, and with no call to empty them in this version),
 * which LeakSanitizer reports as leaks once their thread has exited, but
 * rightly not while the thread lives. A thread per test would turn each
 * cache into a report; a real leak is still reported either way.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "http.h"

#define TOKEN "s3cret-token"
#define MAX_BODY 1024
#define STREAM_BUFFER (64 * 1024)

/* ---- fixture: a loop thread and a server ---------------------------------- */

typedef struct fx fx;
typedef void (*job_fn)(fx *f, void *arg);

struct fx {
  uv_loop_t loop;
  uv_async_t async;
  atomic_int loop_done;
  int loop_close_rc;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  job_fn job;
  void *job_arg;
  int job_done;
  lith_http_server *srv;
  int port;
  /* what the handlers saw (loop thread writes, test thread reads) */
  atomic_int hello_runs, echo_runs, async_runs, slow_runs, gone_calls, gone_before_late;
  atomic_int late_done, late_rc, sse_sent, sse_gone, sse_end_rc, flood_full, flood_gone,
      flood_end_rc, forever_runs, forever_rc, stopwait_runs, stopped, stop_rc;
  atomic_int slow_body_ok, loop_errors;
  /* loop thread only */
  lith_http_req *sse, *flood, *forever;
  int sse_count;
};

static fx *F; /* the current test's fixture */

/* cmocka's asserts must not run on the loop thread (they longjmp): checks
 * there count failures, and teardown asserts there were none. */
#define LOOP_CHECK(cond)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: loop-thread check failed: %s\n", __FILE__, __LINE__, #cond);         \
      atomic_fetch_add(&F->loop_errors, 1);                                                        \
    }                                                                                              \
  } while (0)

static void on_async(uv_async_t *a) {
  fx *f = a->data;
  pthread_mutex_lock(&f->mu);
  job_fn job = f->job;
  void *arg = f->job_arg;
  pthread_mutex_unlock(&f->mu);
  if (!job)
    return;
  job(f, arg);
  pthread_mutex_lock(&f->mu);
  f->job = NULL;
  f->job_done = 1;
  pthread_cond_broadcast(&f->cv);
  pthread_mutex_unlock(&f->mu);
}

/* Run job(f, arg) on the loop thread and wait for it. */
static void on_loop(fx *f, job_fn job, void *arg) {
  pthread_mutex_lock(&f->mu);
  f->job = job;
  f->job_arg = arg;
  f->job_done = 0;
  uv_async_send(&f->async);
  while (!f->job_done)
    pthread_cond_wait(&f->cv, &f->mu);
  pthread_mutex_unlock(&f->mu);
}

/* The loop thread: runs each test's loop in turn, then destroys its server. */
static pthread_mutex_t host_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t host_cv = PTHREAD_COND_INITIALIZER;
static fx *host_next;

static void *host_main(void *arg) {
  (void)arg;
  for (;;) { /* never returns: see the top of this file */
    pthread_mutex_lock(&host_mu);
    while (!host_next)
      pthread_cond_wait(&host_cv, &host_mu);
    fx *f = host_next;
    host_next = NULL;
    pthread_mutex_unlock(&host_mu);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    lith_http_server_destroy(f->srv); /* after uv_run, on the loop's thread */
    f->loop_close_rc = uv_loop_close(&f->loop);
    atomic_store(&f->loop_done, 1);
  }
  return NULL;
}

static void host_run(fx *f) {
  pthread_mutex_lock(&host_mu);
  host_next = f;
  pthread_cond_signal(&host_cv);
  pthread_mutex_unlock(&host_mu);
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait until *v == want (or timeout_ms passed); returns 1 if it did. */
static int wait_for(atomic_int *v, int want, int timeout_ms) {
  int64_t end = now_ms() + timeout_ms;
  while (atomic_load(v) != want) {
    if (now_ms() > end)
      return 0;
    usleep(1000);
  }
  return 1;
}

/* A one-shot uv timer calling fn(data) after ms. */
typedef struct later {
  uv_timer_t t;
  void (*fn)(void *);
  void *data;
} later;

static void later_closed(uv_handle_t *h) { free(h); }
static void later_fire(uv_timer_t *t) {
  later *l = (later *)t;
  l->fn(l->data);
  uv_close((uv_handle_t *)t, later_closed);
}
static void run_later(uv_loop_t *loop, unsigned ms, void (*fn)(void *), void *data) {
  later *l = malloc(sizeof *l);
  l->fn = fn;
  l->data = data;
  uv_timer_init(loop, &l->t);
  uv_timer_start(&l->t, later_fire, ms, 0);
}

/* ---- handlers (loop thread) ---------------------------------------------- */

static int h_hello(lith_http_req *req, void *arg) {
  fx *f = arg;
  atomic_fetch_add(&f->hello_runs, 1);
  LOOP_CHECK(lith_http_respond(req, 200, "text/plain", "hello", 5) == LITH_HTTP_OK);
  return LITH_HTTP_DONE;
}

static int h_thing(lith_http_req *req, void *arg) {
  (void)arg;
  lith_http_respond(req, 200, "text/plain", "thing", 5);
  return LITH_HTTP_DONE;
}

static int h_text(lith_http_req *req, void *arg) {
  const char *s = arg;
  lith_http_respond(req, 200, "text/plain", s, strlen(s));
  return LITH_HTTP_DONE;
}

/* Echo the body; report query, a header, the peer and the method in headers. */
static int h_echo(lith_http_req *req, void *arg) {
  fx *f = arg;
  size_t len;
  const char *body = lith_http_req_body(req, &len);
  const char *x = lith_http_req_header(req, "X-Test");
  atomic_fetch_add(&f->echo_runs, 1);
  lith_http_add_header(req, "x-query", lith_http_req_query(req));
  lith_http_add_header(req, "x-test-was", x ? x : "(none)");
  lith_http_add_header(req, "x-peer", lith_http_req_peer(req));
  lith_http_add_header(req, "x-loopback", lith_http_req_is_loopback(req) ? "1" : "0");
  lith_http_add_header(req, "Set-Cookie", "a=1");
  lith_http_add_header(req, "Set-Cookie", "b=2");
  lith_http_respond(req, 200, "application/octet-stream", body, len);
  return LITH_HTTP_DONE;
}

static void async_answer(void *data) {
  LOOP_CHECK(lith_http_respond(data, 200, "text/plain", "async", 5) == LITH_HTTP_OK);
}

static int h_async(lith_http_req *req, void *arg) {
  fx *f = arg;
  atomic_fetch_add(&f->async_runs, 1);
  run_later(&f->loop, 50, async_answer, req);
  return LITH_HTTP_PENDING;
}

static void slow_gone(lith_http_req *req, void *arg) {
  fx *f = arg;
  (void)req;
  if (!atomic_load(&f->late_done))
    atomic_store(&f->gone_before_late, 1);
  atomic_fetch_add(&f->gone_calls, 1);
  LOOP_CHECK(lith_http_is_gone(req));
}

static void slow_answer(void *data) {
  lith_http_req *req = data;
  fx *f = F;
  /* the copies outlive the client: ASan checks these reads */
  size_t len;
  const char *body = lith_http_req_body(req, &len);
  int ok = !strcmp(lith_http_req_path(req), "/slow") &&
           !strcmp(lith_http_req_method(req), "POST") && len == 4 && !memcmp(body, "data", 4) &&
           lith_http_req_header(req, "host") != NULL;
  atomic_store(&f->slow_body_ok, ok);
  /* late_rc before late_done: the test thread reads it once late_done is
   * set. (on_gone never runs inside lith_http_respond, so gone_before_late
   * still tells whether the client's leaving was noticed before this.) */
  atomic_store(&f->late_rc, lith_http_respond(req, 200, "text/plain", "late", 4));
  atomic_store(&f->late_done, 1);
}

static int h_slow(lith_http_req *req, void *arg) {
  fx *f = arg;
  lith_http_on_gone(req, slow_gone, f);
  atomic_fetch_add(&f->slow_runs, 1);
  run_later(&f->loop, 300, slow_answer, req);
  return LITH_HTTP_PENDING;
}

static void sse_gone(lith_http_req *req, void *arg) {
  fx *f = arg;
  atomic_store(&f->sse_end_rc, lith_http_stream_end(req));
  f->sse = NULL;
  atomic_fetch_add(&f->sse_gone, 1);
}

static void sse_tick(void *data) {
  fx *f = data;
  if (!f->sse)
    return;
  char id[16], msg[64];
  f->sse_count++;
  snprintf(id, sizeof id, "%d", f->sse_count);
  snprintf(msg, sizeof msg, "n=%d\nsecond line", f->sse_count);
  LOOP_CHECK(lith_http_sse_event(f->sse, "tick", id, msg) == LITH_HTTP_OK);
  atomic_fetch_add(&f->sse_sent, 1);
  if (f->sse_count < 3)
    run_later(&f->loop, 20, sse_tick, f);
}

static int h_events(lith_http_req *req, void *arg) {
  fx *f = arg;
  LOOP_CHECK(lith_http_sse_start(req) == LITH_HTTP_OK);
  f->sse = req;
  f->sse_count = 0;
  lith_http_on_gone(req, sse_gone, f);
  run_later(&f->loop, 20, sse_tick, f);
  return LITH_HTTP_PENDING;
}

static void flood_gone(lith_http_req *req, void *arg) {
  fx *f = arg;
  atomic_store(&f->flood_end_rc, lith_http_stream_end(req));
  f->flood = NULL;
  atomic_fetch_add(&f->flood_gone, 1);
}

static void flood_tick(void *data) {
  fx *f = data;
  static char chunk[4096];
  if (!f->flood)
    return;
  memset(chunk, 'x', sizeof chunk);
  for (int i = 0; i < 16; i++) {
    int rc = lith_http_stream_write(f->flood, chunk, sizeof chunk);
    if (rc == LITH_HTTP_FULL) {
      atomic_store(&f->flood_full, 1);
      return;
    }
    LOOP_CHECK(rc == LITH_HTTP_OK);
  }
  run_later(&f->loop, 1, flood_tick, f);
}

static int h_flood(lith_http_req *req, void *arg) {
  fx *f = arg;
  LOOP_CHECK(lith_http_stream_start(req, 200, "application/octet-stream") == LITH_HTTP_OK);
  f->flood = req;
  lith_http_on_gone(req, flood_gone, f);
  run_later(&f->loop, 1, flood_tick, f);
  return LITH_HTTP_PENDING;
}

static int h_secret(lith_http_req *req, void *arg) {
  (void)arg;
  if (!lith_http_check_bearer(req, TOKEN))
    return LITH_HTTP_DONE;
  lith_http_respond_json(req, 200, "{\"ok\":true}");
  return LITH_HTTP_DONE;
}

static void forever_gone(lith_http_req *req, void *arg) {
  fx *f = arg;
  atomic_store(&f->forever_rc, lith_http_respond(req, 200, "text/plain", "too late", 8));
}

static int h_forever(lith_http_req *req, void *arg) {
  fx *f = arg;
  lith_http_on_gone(req, forever_gone, f);
  f->forever = req;
  atomic_fetch_add(&f->forever_runs, 1);
  return LITH_HTTP_PENDING;
}

static void stopwait_answer(void *data) {
  lith_http_respond(data, 200, "text/plain", "finished", 8);
}

static int h_stopwait(lith_http_req *req, void *arg) {
  fx *f = arg;
  atomic_fetch_add(&f->stopwait_runs, 1);
  run_later(&f->loop, 150, stopwait_answer, req);
  return LITH_HTTP_PENDING;
}

static int h_noanswer(lith_http_req *req, void *arg) {
  (void)req;
  (void)arg;
  return LITH_HTTP_DONE; /* forgot to answer: the layer sends 500 */
}

/* ---- setup / teardown ------------------------------------------------------ */

static int setup(void **state) {
  fx *f = calloc(1, sizeof *f);
  F = f;
  assert_int_equal(uv_loop_init(&f->loop), 0);
  assert_int_equal(uv_async_init(&f->loop, &f->async, on_async), 0);
  f->async.data = f;
  pthread_mutex_init(&f->mu, NULL);
  pthread_cond_init(&f->cv, NULL);
  atomic_store(&f->late_rc, -1);
  atomic_store(&f->sse_end_rc, -1);
  atomic_store(&f->flood_end_rc, -1);
  atomic_store(&f->forever_rc, -1);

  lith_http_options opt;
  lith_http_options_default(&opt);
  opt.max_body = MAX_BODY;
  opt.stream_buffer = STREAM_BUFFER;
  assert_int_equal(lith_http_server_create(&f->loop, &opt, &f->srv), LITH_HTTP_OK);
  lith_http_server *s = f->srv;
  assert_int_equal(lith_http_route(s, "GET", "/hello", LITH_HTTP_EXACT, h_hello, f), 0);
  assert_int_equal(lith_http_route(s, "GET", "/thing", LITH_HTTP_EXACT, h_thing, f), 0);
  assert_int_equal(lith_http_route(s, "PUT", "/thing", LITH_HTTP_EXACT, h_thing, f), 0);
  assert_int_equal(lith_http_route(s, "POST", "/echo", LITH_HTTP_EXACT, h_echo, f), 0);
  assert_int_equal(lith_http_route(s, "GET", "/async", LITH_HTTP_EXACT, h_async, f), 0);
  assert_int_equal(lith_http_route(s, "POST", "/slow", LITH_HTTP_EXACT, h_slow, f), 0);
  assert_int_equal(lith_http_route(s, "GET", "/events", LITH_HTTP_EXACT, h_events, f), 0);
  assert_int_equal(lith_http_route(s, "GET", "/flood", LITH_HTTP_EXACT, h_flood, f), 0);
  assert_int_equal(lith_http_route(s, "GET", "/secret", LITH_HTTP_EXACT, h_secret, f), 0);
  assert_int_equal(lith_http_route(s, "GET", "/forever", LITH_HTTP_EXACT, h_forever, f), 0);
  assert_int_equal(lith_http_route(s, "GET", "/stopwait", LITH_HTTP_EXACT, h_stopwait, f), 0);
  assert_int_equal(lith_http_route(s, "GET", "/noanswer", LITH_HTTP_EXACT, h_noanswer, f), 0);
  assert_int_equal(lith_http_route(s, "GET", "/v1/", LITH_HTTP_PREFIX, h_text, "prefix"), 0);
  assert_int_equal(lith_http_route(s, "GET", "/v1/exact", LITH_HTTP_EXACT, h_text, "exact"), 0);
  assert_int_equal(lith_http_route(s, "GET", "/v1/deeper/", LITH_HTTP_PREFIX, h_text, "deeper"), 0);
  /* misuse is refused */
  assert_int_equal(lith_http_route(s, "GET", "/hello", LITH_HTTP_EXACT, h_hello, f),
                   LITH_HTTP_MISUSE);
  assert_int_equal(lith_http_route(s, "GET", "nope", LITH_HTTP_EXACT, h_hello, f),
                   LITH_HTTP_MISUSE);
  assert_int_equal(lith_http_route(s, "G T", "/x", LITH_HTTP_EXACT, h_hello, f), LITH_HTTP_MISUSE);

  assert_int_equal(lith_http_port(s), -1);
  assert_int_equal(lith_http_listen_tcp(s, "127.0.0.1", 0), LITH_HTTP_OK);
  f->port = lith_http_port(s);
  assert_true(f->port > 0);
  host_run(f);
  *state = f;
  return 0;
}

// cppcheck-suppress constParameter ; the callback type is the API's
static void on_stopped(lith_http_server *srv, void *arg) {
  fx *f = arg;
  LOOP_CHECK(srv == f->srv);
  atomic_store(&f->stopped, 1);
}

typedef struct stop_args {
  unsigned grace_ms;
} stop_args;

static void job_stop(fx *f, void *arg) {
  stop_args *a = arg;
  atomic_store(&f->stop_rc, lith_http_server_stop(f->srv, a->grace_ms, on_stopped, f));
}

static void job_close_async(fx *f, void *arg) {
  (void)arg;
  uv_close((uv_handle_t *)&f->async, NULL);
}

static int teardown(void **state) {
  fx *f = *state;
  if (!atomic_load(&f->stopped)) {
    stop_args a = {1000};
    on_loop(f, job_stop, &a);
    assert_true(wait_for(&f->stopped, 1, 5000));
  }
  on_loop(f, job_close_async, NULL);
  assert_true(wait_for(&f->loop_done, 1, 5000));
  assert_int_equal(f->loop_close_rc, 0); /* no handle left behind */
  assert_int_equal(atomic_load(&f->loop_errors), 0);
  pthread_mutex_destroy(&f->mu);
  pthread_cond_destroy(&f->cv);
  free(f);
  F = NULL;
  return 0;
}

/* ---- a raw HTTP/1.1 client --------------------------------------------------- */

static void set_timeouts(int fd) {
  struct timeval tv = {5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

static int tcp_connect_opt(int port, int rcvbuf) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  if (rcvbuf)
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  set_timeouts(fd);
  return fd;
}

static int tcp_connect(int port) {
  int fd = tcp_connect_opt(port, 0);
  assert_true(fd >= 0);
  return fd;
}

static int unix_connect(const char *path) {
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  set_timeouts(fd);
  return fd;
}

static void send_all(int fd, const void *p, size_t n) {
  const char *s = p;
  while (n) {
    ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
    assert_true(w > 0);
    s += w;
    n -= (size_t)w;
  }
}

static void send_str(int fd, const char *s) { send_all(fd, s, strlen(s)); }

typedef struct rbuf {
  int fd;
  char data[1 << 17];
  size_t len;
  int eof;
} rbuf;

static void rbuf_init(rbuf *b, int fd) {
  b->fd = fd;
  b->len = 0;
  b->eof = 0;
}

/* Read more into b; 0 on end of file, error or timeout. */
static int rbuf_fill(rbuf *b) {
  if (b->len == sizeof b->data)
    return 0;
  ssize_t n = recv(b->fd, b->data + b->len, sizeof b->data - b->len, 0);
  if (n <= 0) {
    b->eof = 1;
    return 0;
  }
  b->len += (size_t)n;
  return 1;
}

static void rbuf_consume(rbuf *b, size_t n) {
  memmove(b->data, b->data + n, b->len - n);
  b->len -= n;
}

/* Index of `pat` in b (reading more as needed), or -1 at end of input. */
static long rbuf_find(rbuf *b, const char *pat) {
  size_t pl = strlen(pat);
  for (;;) {
    if (b->len >= pl)
      for (size_t i = 0; i + pl <= b->len; i++)
        if (!memcmp(b->data + i, pat, pl))
          return (long)i;
    if (!rbuf_fill(b))
      return -1;
  }
}

static int rbuf_need(rbuf *b, size_t n) {
  while (b->len < n)
    if (!rbuf_fill(b))
      return 0;
  return 1;
}

typedef struct resp {
  int status;
  char head[8192]; /* status line and headers */
  char body[1 << 16];
  size_t body_len;
} resp;

/* The value of header `name` in r (first one), or NULL; `nth` picks later ones. */
static const char *resp_header_nth(const resp *r, const char *name, int nth, char *out,
                                   size_t cap) {
  size_t nl = strlen(name);
  for (const char *line = strstr(r->head, "\r\n"); line && line[2];
       line = strstr(line + 2, "\r\n")) {
    const char *l = line + 2;
    if (!strncasecmp(l, name, nl) && l[nl] == ':' && nth-- == 0) {
      const char *v = l + nl + 1;
      while (*v == ' ')
        v++;
      const char *end = strstr(v, "\r\n");
      size_t n = (size_t)(end - v) < cap - 1 ? (size_t)(end - v) : cap - 1;
      memcpy(out, v, n);
      out[n] = '\0';
      return out;
    }
  }
  return NULL;
}

static const char *resp_header(const resp *r, const char *name, char *out, size_t cap) {
  return resp_header_nth(r, name, 0, out, cap);
}

/* Read the headers of one response into r (not the body). */
static int read_head(rbuf *b, resp *r) {
  long end = rbuf_find(b, "\r\n\r\n");
  if (end < 0)
    return 0;
  size_t n = (size_t)end + 4;
  assert_true(n < sizeof r->head);
  memcpy(r->head, b->data, n);
  r->head[n] = '\0';
  rbuf_consume(b, n);
  assert_int_equal(sscanf(r->head, "HTTP/1.%*d %d", &r->status), 1);
  r->body_len = 0;
  return 1;
}

/* One chunk of a chunked body: its size (0: the last), data appended to r. */
static long read_chunk(rbuf *b, resp *r) {
  long eol = rbuf_find(b, "\r\n");
  if (eol < 0)
    return -1;
  size_t size = strtoul(b->data, NULL, 16);
  rbuf_consume(b, (size_t)eol + 2);
  if (!rbuf_need(b, size + 2))
    return -1;
  assert_true(r->body_len + size < sizeof r->body);
  memcpy(r->body + r->body_len, b->data, size);
  r->body_len += size;
  r->body[r->body_len] = '\0';
  assert_memory_equal(b->data + size, "\r\n", 2);
  rbuf_consume(b, size + 2);
  return (long)size;
}

/* Read one whole response (Content-Length, chunked, or none for 1xx/204/304). */
static int read_response(rbuf *b, resp *r) {
  char v[64];
  if (!read_head(b, r))
    return 0;
  if (resp_header(r, "content-length", v, sizeof v)) {
    size_t n = strtoul(v, NULL, 10);
    assert_true(n < sizeof r->body);
    if (!rbuf_need(b, n))
      return 0;
    memcpy(r->body, b->data, n);
    r->body[n] = '\0';
    r->body_len = n;
    rbuf_consume(b, n);
  } else if (resp_header(r, "transfer-encoding", v, sizeof v)) {
    long n;
    while ((n = read_chunk(b, r)) > 0)
      ;
    if (n < 0)
      return 0;
    if (!rbuf_need(b, 2))
      return 0;
    rbuf_consume(b, 2); /* the empty trailer */
  } else {
    r->body[0] = '\0';
  }
  return 1;
}

/* One request on a new connection; the response in *r. */
static void exchange(int port, const char *request, resp *r) {
  rbuf *b = malloc(sizeof *b);
  int fd = tcp_connect(port);
  rbuf_init(b, fd);
  send_str(fd, request);
  assert_true(read_response(b, r));
  close(fd);
  free(b);
}

/* 1 if the server closes fd (EOF or reset) within 3 s. */
static int closed_by_server(int fd) {
  char buf[4096];
  struct pollfd p = {.fd = fd, .events = POLLIN};
  int64_t end = now_ms() + 3000;
  while (now_ms() < end) {
    if (poll(&p, 1, 100) <= 0)
      continue;
    ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN))
      return 1;
  }
  return 0;
}

static resp *new_resp(void) { return calloc(1, sizeof(resp)); }

/* ---- tests: routing, bodies --------------------------------------------------- */

static void test_get_route(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  char v[128];
  exchange(f->port, "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n", r);
  assert_int_equal(r->status, 200);
  assert_string_equal(r->body, "hello");
  assert_string_equal(resp_header(r, "content-type", v, sizeof v), "text/plain");
  assert_string_equal(resp_header(r, "content-length", v, sizeof v), "5");
  assert_string_equal(resp_header(r, "server", v, sizeof v), "lith");
  assert_int_equal(atomic_load(&f->hello_runs), 1);
  free(r);
}

static void test_unknown_path_404(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  char v[128];
  exchange(f->port, "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n", r);
  assert_int_equal(r->status, 404);
  assert_string_equal(r->body, "{\"error\":{\"code\":\"not_found\",\"message\":\"not found\"}}");
  assert_string_equal(resp_header(r, "content-type", v, sizeof v), "application/json");
  /* a prefix route does not match its own path without the slash */
  exchange(f->port, "GET /v1 HTTP/1.1\r\nHost: t\r\n\r\n", r);
  assert_int_equal(r->status, 404);
  /* a request-target that is no path: h2o answers, in our JSON shape */
  exchange(f->port, "OPTIONS * HTTP/1.1\r\nHost: t\r\n\r\n", r);
  assert_int_equal(r->status, 404);
  assert_string_equal(resp_header(r, "content-type", v, sizeof v), "application/json");
  assert_non_null(strstr(r->body, "\"error\":"));
  free(r);
}

static void test_wrong_method_405(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  char v[128];
  exchange(f->port, "DELETE /hello HTTP/1.1\r\nHost: t\r\n\r\n", r);
  assert_int_equal(r->status, 405);
  assert_string_equal(resp_header(r, "allow", v, sizeof v), "GET, HEAD");
  assert_string_equal(r->body, "{\"error\":{\"code\":\"method_not_allowed\",\"message\":\"method not allowed\"}}");
  exchange(f->port, "POST /thing HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n", r);
  assert_int_equal(r->status, 405);
  assert_string_equal(resp_header(r, "allow", v, sizeof v), "GET, HEAD, PUT");
  exchange(f->port, "PUT /thing HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n", r);
  assert_int_equal(r->status, 200);
  /* exact and prefix routes: POST under /v1/ is allowed nowhere, once */
  exchange(f->port, "POST /v1/exact HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n", r);
  assert_int_equal(r->status, 405);
  assert_string_equal(resp_header(r, "allow", v, sizeof v), "GET, HEAD");
  assert_int_equal(atomic_load(&f->hello_runs), 0);
  free(r);
}

static void test_route_specificity(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  exchange(f->port, "GET /v1/exact HTTP/1.1\r\nHost: t\r\n\r\n", r);
  assert_string_equal(r->body, "exact");
  exchange(f->port, "GET /v1/exact/more HTTP/1.1\r\nHost: t\r\n\r\n", r);
  assert_string_equal(r->body, "prefix");
  exchange(f->port, "GET /v1/deeper/x?q=1 HTTP/1.1\r\nHost: t\r\n\r\n", r);
  assert_string_equal(r->body, "deeper");
  exchange(f->port, "GET /v1/ HTTP/1.1\r\nHost: t\r\n\r\n", r);
  assert_string_equal(r->body, "prefix");
  /* the path is normalized before routing */
  exchange(f->port, "GET /v1/x/../exact HTTP/1.1\r\nHost: t\r\n\r\n", r);
  assert_string_equal(r->body, "exact");
  free(r);
}

static void test_post_echo(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  char v[128];
  exchange(f->port,
           "POST /echo?a=1&b=two HTTP/1.1\r\nHost: t\r\nX-Test: yes\r\nContent-Length: 11\r\n\r\n"
           "hello world",
           r);
  assert_int_equal(r->status, 200);
  assert_int_equal(r->body_len, 11);
  assert_string_equal(r->body, "hello world");
  assert_string_equal(resp_header(r, "x-query", v, sizeof v), "a=1&b=two");
  assert_string_equal(resp_header(r, "x-test-was", v, sizeof v), "yes");
  assert_string_equal(resp_header(r, "x-loopback", v, sizeof v), "1");
  assert_true(!strncmp(resp_header(r, "x-peer", v, sizeof v), "127.0.0.1:", 10));
  assert_string_equal(resp_header_nth(r, "set-cookie", 0, v, sizeof v), "a=1");
  assert_string_equal(resp_header_nth(r, "set-cookie", 1, v, sizeof v), "b=2");
  /* a chunked request body arrives whole */
  exchange(f->port,
           "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
           "5\r\nabcde\r\n3\r\nfgh\r\n0\r\n\r\n",
           r);
  assert_int_equal(r->status, 200);
  assert_string_equal(r->body, "abcdefgh");
  /* a body with NUL bytes is kept whole */
  int fd = tcp_connect(f->port);
  rbuf *b = malloc(sizeof *b);
  rbuf_init(b, fd);
  send_str(fd, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\n");
  send_all(fd, "a\0b", 3);
  assert_true(read_response(b, r));
  assert_int_equal(r->body_len, 3);
  assert_memory_equal(r->body, "a\0b", 3);
  close(fd);
  free(b);
  assert_int_equal(atomic_load(&f->echo_runs), 3);
  free(r);
}

static void test_handler_without_answer_500(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  exchange(f->port, "GET /noanswer HTTP/1.1\r\nHost: t\r\n\r\n", r);
  assert_int_equal(r->status, 500);
  assert_string_equal(r->body, "{\"error\":{\"code\":\"internal_server_error\",\"message\":\"the handler sent no response\"}}");
  free(r);
}

static void test_body_limit_413(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  char v[128], req[4096], body[MAX_BODY + 100];
  memset(body, 'b', sizeof body);
  /* Content-Length over the limit: refused from the headers alone */
  int n = snprintf(req, sizeof req, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: %zu\r\n\r\n",
                   sizeof body);
  int fd = tcp_connect(f->port);
  rbuf *b = malloc(sizeof *b);
  rbuf_init(b, fd);
  send_all(fd, req, (size_t)n);
  assert_true(read_response(b, r));
  assert_int_equal(r->status, 413);
  assert_string_equal(resp_header(r, "content-type", v, sizeof v), "application/json");
  assert_string_equal(r->body, "{\"error\":{\"code\":\"payload_too_large\",\"message\":\"request entity too large\"}}");
  assert_string_equal(resp_header(r, "connection", v, sizeof v), "close");
  close(fd);
  /* a chunked body that grows past the limit */
  fd = tcp_connect(f->port);
  rbuf_init(b, fd);
  send_str(fd, "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
  n = snprintf(req, sizeof req, "%zx\r\n", sizeof body);
  send_all(fd, req, (size_t)n);
  send_all(fd, body, sizeof body);
  send_str(fd, "\r\n0\r\n\r\n");
  assert_true(read_response(b, r));
  assert_int_equal(r->status, 413);
  assert_non_null(strstr(r->body, "\"error\""));
  close(fd);
  free(b);
  /* exactly the limit is fine */
  char *big = malloc(MAX_BODY + 256);
  n = snprintf(big, MAX_BODY + 256, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n",
               MAX_BODY);
  memset(big + n, 'c', MAX_BODY);
  big[n + MAX_BODY] = '\0';
  exchange(f->port, big, r);
  assert_int_equal(r->status, 200);
  assert_int_equal(r->body_len, MAX_BODY);
  free(big);
  assert_int_equal(atomic_load(&f->echo_runs), 1); /* the handler never saw the big ones */
  free(r);
}

/* ---- keep-alive and pipelining ------------------------------------------------ */

static void test_keepalive(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  char v[64];
  int fd = tcp_connect(f->port);
  rbuf *b = malloc(sizeof *b);
  rbuf_init(b, fd);
  send_str(fd, "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n");
  assert_true(read_response(b, r));
  assert_int_equal(r->status, 200);
  assert_string_equal(resp_header(r, "connection", v, sizeof v), "keep-alive");
  send_str(fd, "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n");
  assert_true(read_response(b, r));
  assert_int_equal(r->status, 200);
  assert_string_equal(r->body, "hello");
  close(fd);
  free(b);
  assert_int_equal(atomic_load(&f->hello_runs), 2);
  free(r);
}

static void test_head_is_get_without_body(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  char v[64];
  int fd = tcp_connect(f->port);
  rbuf *b = malloc(sizeof *b);
  rbuf_init(b, fd);
  /* HEAD then GET on one connection: no body bytes may sit between them */
  send_str(fd, "HEAD /hello HTTP/1.1\r\nHost: t\r\n\r\nGET /hello HTTP/1.1\r\nHost: t\r\n\r\n");
  assert_true(read_head(b, r));
  assert_int_equal(r->status, 200);
  assert_string_equal(resp_header(r, "content-length", v, sizeof v), "5");
  assert_true(read_response(b, r));
  assert_int_equal(r->status, 200);
  assert_string_equal(r->body, "hello");
  close(fd);
  free(b);
  free(r);
}

/* While a request is held, more input on its connection (here 60 KB of a
 * next request) must not disturb it: h2o parsed it in place, in the socket's
 * buffer, and the layer watches for a leaving client without reading
 * (watch.c), so those bytes wait in the kernel for h2o. */
static void test_held_request_then_more_input(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  int fd = tcp_connect(f->port);
  rbuf *b = malloc(sizeof *b);
  rbuf_init(b, fd);
  send_str(fd, "GET /async HTTP/1.1\r\nHost: t\r\nX-Pad: 0123456789\r\n\r\n");
  assert_true(wait_for(&f->async_runs, 1, 2000));
  char *more = malloc(60000);
  int n = snprintf(more, 60000, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n");
  memset(more + n, 'x', 60000 - (size_t)n); /* one enormous header line: h2o refuses it later */
  send_all(fd, more, 60000);
  assert_true(read_response(b, r));
  assert_int_equal(r->status, 200);
  assert_string_equal(r->body, "async");
  close(fd);
  free(more);
  free(b);
  free(r);
}

static void test_pipelining(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  int fd = tcp_connect(f->port);
  rbuf *b = malloc(sizeof *b);
  rbuf_init(b, fd);
  /* four requests in one write; the second is answered later from a timer */
  send_str(fd, "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n"
               "GET /async HTTP/1.1\r\nHost: t\r\n\r\n"
               "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nthird"
               "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n");
  assert_true(read_response(b, r));
  assert_string_equal(r->body, "hello");
  assert_true(read_response(b, r));
  assert_string_equal(r->body, "async");
  assert_true(read_response(b, r));
  assert_string_equal(r->body, "third");
  assert_true(read_response(b, r));
  assert_int_equal(r->status, 404);
  close(fd);
  free(b);
  free(r);
}

/* ---- ambiguous framing (issue 10, item 6) ------------------------------------- */

/* What a proxy in front might take for the rest of a body and we for a next
 * request: it must never run (hello_runs stays 0). */
#define SMUGGLED "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n"

static uint64_t count_of(fx *f, int status);

/* Read until the server closes fd (EOF or reset) within 3 s, keeping what
 * comes; 1 if it closed. */
static int read_to_close(rbuf *b) {
  struct pollfd p = {.fd = b->fd, .events = POLLIN};
  int64_t end = now_ms() + 3000;
  while (now_ms() < end) {
    if (poll(&p, 1, 100) <= 0)
      continue;
    if (b->len == sizeof b->data)
      return 0;
    ssize_t n = recv(b->fd, b->data + b->len, sizeof b->data - b->len, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN))
      return 1;
    if (n > 0)
      b->len += (size_t)n;
  }
  return 0;
}

/* `request` then SMUGGLED in one write: one 400 with Connection: close, its
 * JSON naming `why` (NULL: h2o's own 400, any body), then the connection
 * closes with nothing more sent, and no handler ran. */
static void expect_refused(fx *f, const char *request, const char *why) {
  resp *r = new_resp();
  rbuf *b = malloc(sizeof *b);
  char v[64];
  uint64_t before = count_of(f, 400);
  int fd = tcp_connect(f->port);
  rbuf_init(b, fd);
  send_str(fd, request);
  send_str(fd, SMUGGLED);
  assert_true(read_response(b, r));
  if (r->status != 400)
    fprintf(stderr, "not refused: %s\n-> %s%s\n", request, r->head, r->body);
  assert_int_equal(r->status, 400);
  assert_string_equal(resp_header(r, "connection", v, sizeof v), "close");
  if (why) {
    char want[256];
    snprintf(want, sizeof want, "{\"error\":{\"code\":\"bad_request\",\"message\":\"%s\"}}", why);
    assert_string_equal(r->body, want);
    assert_string_equal(resp_header(r, "content-type", v, sizeof v), "application/json");
  }
  assert_true(read_to_close(b));
  assert_int_equal(b->len, 0); /* no second answer */
  close(fd);
  free(b);
  free(r);
  /* h2o's plain-text 400 for a head it cannot parse is written without a
   * request, so nothing counts it */
  assert_true(count_of(f, 400) == before + 1 || (!why && count_of(f, 400) == before));
  assert_int_equal(atomic_load(&f->hello_runs), 0);
  assert_int_equal(atomic_load(&f->echo_runs), 0);
}

static void test_duplicate_content_length(void **state) {
  fx *f = *state;
  char req[512];
  /* equal values: RFC 9112 would let us merge them; refused all the same */
  expect_refused(f, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n"
                    "hello",
                 "more than one Content-Length");
  /* differing: h2o took the first, a proxy taking the last sees SMUGGLED as body */
  snprintf(req, sizeof req,
           "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\ncontent-length: %zu\r\n\r\nhello",
           5 + strlen(SMUGGLED));
  expect_refused(f, req, "more than one Content-Length");
  /* the other way round, and on a GET */
  expect_refused(f, "GET /hello HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nX-A: b\r\n"
                    "Content-Length: 0\r\n\r\n",
                 "more than one Content-Length");
  /* not a number: h2o's own 400 */
  expect_refused(f, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5, 5\r\n\r\nhello", NULL);
}

static void test_content_length_with_transfer_encoding(void **state) {
  fx *f = *state;
  char req[512];
  /* h2o decodes the chunked body; a proxy trusting Content-Length reads on */
  snprintf(req, sizeof req,
           "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: %zu\r\n"
           "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
           5 + strlen(SMUGGLED));
  expect_refused(f, req, "Content-Length together with Transfer-Encoding");
  expect_refused(f, "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
                    "Content-Length: 3\r\n\r\n0\r\n\r\n",
                 "Content-Length together with Transfer-Encoding");
}

static void test_transfer_encoding_variants(void **state) {
  fx *f = *state;
  /* codings h2o does not decode: its own 400 (our JSON shape) */
  expect_refused(f, "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n", NULL);
  expect_refused(f, "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                    "0\r\n\r\n",
                 NULL);
  expect_refused(f, "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"
                    "0\r\n\r\n",
                 NULL);
  expect_refused(f, "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked \r\n\r\n"
                    "0\r\n\r\n",
                 NULL);
  /* two: h2o took the last one (chunked), a proxy may take the first */
  expect_refused(f, "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n"
                    "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                 "more than one Transfer-Encoding");
  expect_refused(f, "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
                    "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                 "more than one Transfer-Encoding");
  /* h2o compares without case; a proxy may not, and not decode it */
  expect_refused(f, "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: Chunked\r\n\r\n"
                    "0\r\n\r\n",
                 "a Transfer-Encoding other than chunked");
  /* RFC 9112 6.1: faulty framing in HTTP/1.0 */
  expect_refused(f, "POST /echo HTTP/1.0\r\nHost: t\r\nConnection: keep-alive\r\n"
                    "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                 "Transfer-Encoding in an HTTP/1.0 request");
}

static void test_header_line_tricks(void **state) {
  fx *f = *state;
  char req[512];
  /* obs-fold: a proxy joining the lines reads another length */
  snprintf(req, sizeof req,
           "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n %zu\r\n\r\nhello",
           5 + strlen(SMUGGLED));
  expect_refused(f, req, "a header line is continued on the next (obs-fold)");
  expect_refused(f, "POST /echo HTTP/1.1\r\nHost: t\r\nX-A: b\r\n\tTransfer-Encoding: chunked\r\n"
                    "Content-Length: 5\r\n\r\nhello",
                 "a header line is continued on the next (obs-fold)");
  /* whitespace before the colon: h2o's parser refuses it (plain text) */
  expect_refused(f, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length : 5\r\n\r\nhello", NULL);
  expect_refused(f, "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding\t: chunked\r\n\r\n"
                    "0\r\n\r\n",
                 NULL);
  /* a bare LF ends a line for h2o, maybe not for a proxy */
  expect_refused(f, "POST /echo HTTP/1.1\r\nHost: t\nContent-Length: 5\r\n\r\nhello",
                 "a line of the request head ends in a bare LF");
  expect_refused(f, "GET /hello HTTP/1.1\nHost: t\r\n\r\n",
                 "a line of the request head ends in a bare LF");
  /* and where h2o itself would answer (a request-target that is not a path) */
  expect_refused(f, "OPTIONS * HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n",
                 "more than one Content-Length");
}

/* Well-framed requests back to back still work, on one connection that
 * stays open: Content-Length, chunked, a CRLF a client put after a body
 * (h2o skips one), and a GET. */
static void test_pipelined_pair_still_works(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  char v[64];
  int fd = tcp_connect(f->port);
  rbuf *b = malloc(sizeof *b);
  rbuf_init(b, fd);
  send_str(fd, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nfirst"
               "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
               "6\r\nsecond\r\n0\r\n\r\n\r\n" SMUGGLED);
  assert_true(read_response(b, r));
  assert_int_equal(r->status, 200);
  assert_string_equal(r->body, "first");
  assert_string_equal(resp_header(r, "connection", v, sizeof v), "keep-alive");
  assert_true(read_response(b, r));
  assert_int_equal(r->status, 200);
  assert_string_equal(r->body, "second");
  assert_true(read_response(b, r));
  assert_int_equal(r->status, 200);
  assert_string_equal(r->body, "hello");
  send_str(fd, "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n"); /* still open */
  assert_true(read_response(b, r));
  assert_string_equal(r->body, "hello");
  close(fd);
  free(b);
  free(r);
  assert_int_equal(atomic_load(&f->echo_runs), 2);
  assert_int_equal(atomic_load(&f->hello_runs), 2);
  assert_int_equal(count_of(f, 400), 0);
}

/* ---- asynchronous answers ----------------------------------------------------- */

static void test_async_response(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  int64_t t0 = now_ms();
  exchange(f->port, "GET /async HTTP/1.1\r\nHost: t\r\n\r\n", r);
  int64_t dt = now_ms() - t0;
  assert_int_equal(r->status, 200);
  assert_string_equal(r->body, "async");
  assert_true(dt >= 45);
  assert_int_equal(atomic_load(&f->async_runs), 1);
  free(r);
}

static void job_stats(fx *f, void *arg) { lith_http_stats_get(f->srv, arg); }

typedef struct count_args {
  int status;
  uint64_t n;
} count_args;

static void job_count(fx *f, void *arg) {
  count_args *c = arg;
  c->n = lith_http_status_count(f->srv, c->status);
}

static uint64_t count_of(fx *f, int status) {
  count_args c = {status, 0};
  on_loop(f, job_count, &c);
  return c.n;
}

static void test_async_client_gone(void **state) {
  fx *f = *state;
  int fd = tcp_connect(f->port);
  send_str(fd, "POST /slow HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\ndata");
  assert_true(wait_for(&f->slow_runs, 1, 2000));
  close(fd); /* before the answer, 300 ms later */
  assert_true(wait_for(&f->gone_calls, 1, 2000));
  assert_true(wait_for(&f->late_done, 1, 2000));
  assert_int_equal(atomic_load(&f->gone_before_late), 1); /* noticed at once, not at the write */
  assert_int_equal(atomic_load(&f->late_rc), LITH_HTTP_GONE);
  assert_int_equal(atomic_load(&f->slow_body_ok), 1);
  assert_int_equal(atomic_load(&f->gone_calls), 1);
  lith_http_stats st;
  on_loop(f, job_stats, &st);
  assert_int_equal(st.gone, 1);
  assert_int_equal(st.pending, 0);
  assert_int_equal(count_of(f, 499), 1); /* logged as nginx's "client closed request" */
}

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

/* ---- bearer tokens --------------------------------------------------------------- */

static void test_bearer(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  char v[128];
  exchange(f->port, "GET /secret HTTP/1.1\r\nHost: t\r\n\r\n", r);
  assert_int_equal(r->status, 401);
  assert_string_equal(resp_header(r, "www-authenticate", v, sizeof v), "Bearer realm=\"lith\"");
  assert_string_equal(r->body, "{\"error\":{\"code\":\"unauthorized\",\"message\":\"a bearer token is required\"}}");
  exchange(f->port, "GET /secret HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer wrong\r\n\r\n", r);
  assert_int_equal(r->status, 401);
  assert_string_equal(resp_header(r, "www-authenticate", v, sizeof v),
                      "Bearer realm=\"lith\", error=\"invalid_token\"");
  /* a prefix of the token, the token plus more, another scheme: all refused */
  exchange(f->port, "GET /secret HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer s3cret\r\n\r\n", r);
  assert_int_equal(r->status, 401);
  exchange(f->port, "GET /secret HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " TOKEN "x\r\n\r\n",
           r);
  assert_int_equal(r->status, 401);
  exchange(f->port, "GET /secret HTTP/1.1\r\nHost: t\r\nAuthorization: Basic " TOKEN "\r\n\r\n", r);
  assert_int_equal(r->status, 401);
  exchange(f->port, "GET /secret HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " TOKEN "\r\n\r\n",
           r);
  assert_int_equal(r->status, 200);
  assert_string_equal(r->body, "{\"ok\":true}");
  /* the scheme is case-insensitive (RFC 7235) */
  exchange(f->port, "GET /secret HTTP/1.1\r\nHost: t\r\nAuthorization: bearer  " TOKEN "\r\n\r\n",
           r);
  assert_int_equal(r->status, 200);
  free(r);
}

static void test_equal_ct(void **state) {
  (void)state;
  assert_true(lith_http_equal_ct("abc", 3, "abc", 3));
  assert_false(lith_http_equal_ct("abd", 3, "abc", 3));
  assert_false(lith_http_equal_ct("ab", 2, "abc", 3));
  assert_false(lith_http_equal_ct("abcd", 4, "abc", 3));
  assert_false(lith_http_equal_ct("", 0, "abc", 3));
  assert_true(lith_http_equal_ct("", 0, "", 0));
  assert_false(lith_http_equal_ct("a\0c", 3, "a\0d", 3));
  /* lengths differing by a multiple of 256 are still different */
  char big[257];
  memset(big, 'a', sizeof big);
  assert_false(lith_http_equal_ct(big, 257, big, 1));
}

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
  assert_string_equal(r->body, "{\"error\":{\"code\":\"service_unavailable\",\"message\":\"server stopping\"}}");
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

static void h2_frame(int fd, int type, int flags, uint32_t stream, const void *payload,
                     size_t len) {
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
    uint32_t stream =
        ((uint32_t)h[5] << 24 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 8 | h[8]) & 0x7fffffff;
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

static void h2_read_response(rbuf *b, int *status, resp *r) {
  h2_read_response_opt(b, status, r, 0);
}

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

static void test_names(void **state) {
  (void)state;
  assert_string_equal(lith_http_errstr(LITH_HTTP_GONE), "LITH_HTTP_GONE");
  assert_string_equal(lith_http_errstr(LITH_HTTP_FULL), "LITH_HTTP_FULL");
  assert_string_equal(lith_http_errstr(12345), "LITH_HTTP_UNKNOWN");
  assert_string_equal(lith_http_reason(404), "Not Found");
  assert_string_equal(lith_http_reason(418), "Client Error");
  lith_http_server *srv = NULL;
  assert_int_equal(lith_http_server_create(NULL, NULL, &srv), LITH_HTTP_MISUSE);
  assert_null(srv);
  assert_non_null(strstr(lith_http_errmsg(), "loop"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_get_route, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unknown_path_404, setup, teardown),
      cmocka_unit_test_setup_teardown(test_wrong_method_405, setup, teardown),
      cmocka_unit_test_setup_teardown(test_route_specificity, setup, teardown),
      cmocka_unit_test_setup_teardown(test_post_echo, setup, teardown),
      cmocka_unit_test_setup_teardown(test_handler_without_answer_500, setup, teardown),
      cmocka_unit_test_setup_teardown(test_body_limit_413, setup, teardown),
      cmocka_unit_test_setup_teardown(test_keepalive, setup, teardown),
      cmocka_unit_test_setup_teardown(test_head_is_get_without_body, setup, teardown),
      cmocka_unit_test_setup_teardown(test_held_request_then_more_input, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pipelining, setup, teardown),
      cmocka_unit_test_setup_teardown(test_duplicate_content_length, setup, teardown),
      cmocka_unit_test_setup_teardown(test_content_length_with_transfer_encoding, setup, teardown),
      cmocka_unit_test_setup_teardown(test_transfer_encoding_variants, setup, teardown),
      cmocka_unit_test_setup_teardown(test_header_line_tricks, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pipelined_pair_still_works, setup, teardown),
      cmocka_unit_test_setup_teardown(test_async_response, setup, teardown),
      cmocka_unit_test_setup_teardown(test_async_client_gone, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sse, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sse_slow_client_bounded, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bearer, setup, teardown),
      cmocka_unit_test(test_equal_ct),
      cmocka_unit_test_setup_teardown(test_unix_socket, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stop_completes_inflight, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stop_deadline, setup, teardown),
      cmocka_unit_test_setup_teardown(test_http2_cleartext, setup, teardown),
      cmocka_unit_test_setup_teardown(test_http2_stop_completes_inflight, setup, teardown),
      cmocka_unit_test(test_destroy_without_stop),
      cmocka_unit_test_setup_teardown(test_stats, setup, teardown),
      cmocka_unit_test(test_names),
  };
  pthread_t host;
  if (pthread_create(&host, NULL, host_main, NULL) != 0)
    return 1;
  if (getenv("TEST_FILTER")) /* e.g. TEST_FILTER='test_sse*' */
    cmocka_set_test_filter(getenv("TEST_FILTER"));
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  /* the loop thread is left running: see the top of this file */
  return failed;
}
