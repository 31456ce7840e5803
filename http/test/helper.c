/*
 * http/test/helper.c — the HTTP layer tests' fixture and raw client (see
 * helper.h).
 *
 * One loop thread serves every test of a binary in turn and lives until the
 * process exits: h2o 2.2.5 keeps per-thread caches of freed memory (pool
 * chunks, socket buffers; bounded, and with no call to empty them in this
 * version), which LeakSanitizer reports as leaks once their thread has
 * exited, but rightly not while the thread lives. A thread per test would
 * turn each cache into a report; a real leak is still reported either way.
 */
#include "helper.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* ---- fixture: a loop thread and a server ---------------------------------- */

fx *F;
int ht_write_timeout_ms = -1;
const char *ht_tls_cert, *ht_tls_key;
unsigned ht_request_timeout_ms;

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
void on_loop(fx *f, job_fn job, void *arg) {
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

int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait until *v == want (or timeout_ms passed); returns 1 if it did. */
int wait_for(atomic_int *v, int want, int timeout_ms) {
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
void run_later(uv_loop_t *loop, unsigned ms, void (*fn)(void *), void *data) {
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
  int ok = !strcmp(lith_http_req_path(req), "/slow") && !strcmp(lith_http_req_method(req), "POST") &&
           len == 4 && !memcmp(body, "data", 4) && lith_http_req_header(req, "host") != NULL;
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

static void stopwait_answer(void *data) { lith_http_respond(data, 200, "text/plain", "finished", 8); }

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

int setup(void **state) {
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
  if (ht_write_timeout_ms >= 0)
    opt.write_timeout_ms = (unsigned)ht_write_timeout_ms;
  ht_write_timeout_ms = -1;
  opt.tls_cert_file = ht_tls_cert;
  opt.tls_key_file = ht_tls_key;
  opt.request_timeout_ms = ht_request_timeout_ms; /* 0: the default */
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
  assert_int_equal(lith_http_route(s, "GET", "/hello", LITH_HTTP_EXACT, h_hello, f), LITH_HTTP_MISUSE);
  assert_int_equal(lith_http_route(s, "GET", "nope", LITH_HTTP_EXACT, h_hello, f), LITH_HTTP_MISUSE);
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

void job_stop(fx *f, void *arg) {
  stop_args *a = arg;
  atomic_store(&f->stop_rc, lith_http_server_stop(f->srv, a->grace_ms, on_stopped, f));
}

static void job_close_async(fx *f, void *arg) {
  (void)arg;
  uv_close((uv_handle_t *)&f->async, NULL);
}

int teardown(void **state) {
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

void set_timeouts(int fd) {
  struct timeval tv = {5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

int tcp_connect_opt(int port, int rcvbuf) {
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

int tcp_connect(int port) {
  int fd = tcp_connect_opt(port, 0);
  assert_true(fd >= 0);
  return fd;
}

int unix_connect(const char *path) {
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  set_timeouts(fd);
  return fd;
}

void send_all(int fd, const void *p, size_t n) {
  const char *s = p;
  while (n) {
    ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
    assert_true(w > 0);
    s += w;
    n -= (size_t)w;
  }
}

void send_str(int fd, const char *s) { send_all(fd, s, strlen(s)); }

void rbuf_init(rbuf *b, int fd) {
  b->fd = fd;
  b->len = 0;
  b->eof = 0;
}

/* Read more into b; 0 on end of file, error or timeout. */
int rbuf_fill(rbuf *b) {
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

void rbuf_consume(rbuf *b, size_t n) {
  memmove(b->data, b->data + n, b->len - n);
  b->len -= n;
}

/* Index of `pat` in b (reading more as needed), or -1 at end of input. */
long rbuf_find(rbuf *b, const char *pat) {
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

int rbuf_need(rbuf *b, size_t n) {
  while (b->len < n)
    if (!rbuf_fill(b))
      return 0;
  return 1;
}

/* The value of header `name` in r (first one), or NULL; `nth` picks later ones. */
const char *resp_header_nth(const resp *r, const char *name, int nth, char *out, size_t cap) {
  size_t nl = strlen(name);
  for (const char *line = strstr(r->head, "\r\n"); line && line[2]; line = strstr(line + 2, "\r\n")) {
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

const char *resp_header(const resp *r, const char *name, char *out, size_t cap) {
  return resp_header_nth(r, name, 0, out, cap);
}

/* Read the headers of one response into r (not the body). */
int read_head(rbuf *b, resp *r) {
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
long read_chunk(rbuf *b, resp *r) {
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
int read_response(rbuf *b, resp *r) {
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
void exchange(int port, const char *request, resp *r) {
  rbuf *b = malloc(sizeof *b);
  int fd = tcp_connect(port);
  rbuf_init(b, fd);
  send_str(fd, request);
  assert_true(read_response(b, r));
  close(fd);
  free(b);
}

/* 1 if the server closes fd (EOF or reset) within 3 s. */
int closed_by_server(int fd) {
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

resp *new_resp(void) { return calloc(1, sizeof(resp)); }

void job_stats(fx *f, void *arg) { lith_http_stats_get(f->srv, arg); }

typedef struct count_args {
  int status;
  uint64_t n;
} count_args;

static void job_count(fx *f, void *arg) {
  count_args *c = arg;
  c->n = lith_http_status_count(f->srv, c->status);
}

uint64_t count_of(fx *f, int status) {
  count_args c = {status, 0};
  on_loop(f, job_count, &c);
  return c.n;
}

int ht_run(const char *name, const struct CMUnitTest *tests, size_t n) {
  pthread_t host;
  if (pthread_create(&host, NULL, host_main, NULL) != 0)
    return 1;
  if (getenv("TEST_FILTER")) /* e.g. TEST_FILTER='test_sse*' */
    cmocka_set_test_filter(getenv("TEST_FILTER"));
  /* the loop thread is left running: see the top of this file */
  return _cmocka_run_group_tests(name, tests, n, NULL, NULL);
}
