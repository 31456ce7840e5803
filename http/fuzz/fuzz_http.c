/*
 * libFuzzer harness: the HTTP layer's request path, end to end. Each input
 * is what one client sends on one connection: the harness connects to a
 * server listening on a Unix socket (lith_http_listen_unix, so the accept
 * path is the server's own), writes the input, shuts its sending side, and
 * runs the loop until the server has closed the connection, reading (and
 * dropping) whatever it answers. h2o frames and parses it; the framing guard
 * (guard.c), the router and the handlers below see what it lets through.
 *
 * The server lives for the whole process (h2o keeps caches of freed memory
 * that LeakSanitizer rightly reports only once they are unreachable), and
 * each input ends with its connection closed on both sides, so an input
 * leaves nothing allocated behind it and -detect_leaks stays quiet.
 *
 * Routes: GET /hello, POST /echo (the body back, every reading call
 * exercised), POST /json (the body walked as JSON-ish: bracket depth), GET
 * /later (held, answered from a zero-delay timer; an HTTP/2 client that
 * resets the stream first makes it gone), GET /events (a stream of one
 * server-sent event), GET /flood (a stream that overflows its buffer), GET
 * /secret (a bearer token), GET /v1/ (a prefix). HTTP/2 (prior knowledge,
 * h2c upgrade) is on, as in lithd.
 *
 * Checks besides the sanitizers: a handler never runs for an HTTP/1 request
 * after a 400, 413 or 417 was sent on the same connection (those close it:
 * anything after would be a smuggled request), every string the layer hands
 * out is NUL-terminated where it says, and the connection always closes.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_BODY 4096
#define STREAM_BUFFER 1024
#define DEADLINE_MS 5000 /* no input may keep its connection open this long */

typedef struct client {
  uv_pipe_t pipe;
  uv_write_t wr;
  uv_shutdown_t sd;
  uv_buf_t out;
  char in[16384];
  int closed;
} client;

static uv_loop_t loop;
static lith_http_server *srv;
static char sock_path[64];
static uint64_t closing_before; /* 400 + 413 + 417 sent before this input */

static void fail(const char *what) {
  fprintf(stderr, "fuzz_http: %s\n", what);
  abort();
}

static uint64_t closing_errors(void) {
  return lith_http_status_count(srv, 400) + lith_http_status_count(srv, 413) +
         lith_http_status_count(srv, 417);
}

/* Every handler first: what the layer hands out is consistent, and no
 * HTTP/1 request runs after its connection was refused. */
static void check_req(lith_http_req *req) {
  size_t len, n = lith_http_req_header_count(req);
  const char *body = lith_http_req_body(req, &len);
  if (lith_http_req_version(req) < 0x200 && closing_errors() != closing_before)
    fail("a request ran after a 400/413/417 on its connection");
  if (!body || body[len] != '\0' || len > MAX_BODY)
    fail("body");
  if (!lith_http_req_method(req) || lith_http_req_path(req)[0] != '/' || !lith_http_req_query(req))
    fail("request line");
  for (size_t i = 0; i < n; i++) {
    const char *name, *value;
    if (lith_http_req_header_at(req, i, &name, &value) != LITH_HTTP_OK || !name || !value)
      fail("header_at");
    if (lith_http_req_header(req, name) == NULL)
      fail("a listed header is not found by its name");
  }
  if (lith_http_req_header_at(req, n, &(const char *){0}, &(const char *){0}) != LITH_HTTP_MISUSE)
    fail("header_at out of range");
  if (!lith_http_req_peer(req) || !lith_http_req_is_loopback(req) || lith_http_is_gone(req) ||
      lith_http_req_server(req) != srv)
    fail("peer, loopback, gone or server");
}

static int h_hello(lith_http_req *req, void *arg) {
  (void)arg;
  check_req(req);
  lith_http_respond(req, 200, "text/plain", "hello", 5);
  return LITH_HTTP_DONE;
}

static int h_echo(lith_http_req *req, void *arg) {
  size_t len;
  (void)arg;
  check_req(req);
  const char *body = lith_http_req_body(req, &len);
  const char *ct = lith_http_req_header(req, "content-type");
  lith_http_add_header(req, "x-query", lith_http_req_query(req));
  if (ct && lith_http_add_header(req, "x-content-type", ct) == LITH_HTTP_MISUSE && !strpbrk(ct, "\r\n"))
    fail("a header value the layer parsed cannot be sent back");
  lith_http_respond(req, 200, "application/octet-stream", body, len);
  return LITH_HTTP_DONE;
}

static int h_json(lith_http_req *req, void *arg) {
  size_t len;
  int depth = 0, max = 0, in_str = 0;
  (void)arg;
  check_req(req);
  const char *b = lith_http_req_body(req, &len);
  for (size_t i = 0; i < len; i++) {
    char c = b[i];
    if (in_str) {
      if (c == '\\' && i + 1 < len)
        i++;
      else if (c == '"')
        in_str = 0;
    } else if (c == '"') {
      in_str = 1;
    } else if (c == '{' || c == '[') {
      max = ++depth > max ? depth : max;
    } else if (c == '}' || c == ']') {
      depth--;
    }
  }
  if (depth != 0 || in_str)
    lith_http_respond_error(req, 422, "unbalanced JSON");
  else {
    char out[64];
    snprintf(out, sizeof out, "{\"depth\":%d}", max);
    lith_http_respond_json(req, 200, out);
  }
  return LITH_HTTP_DONE;
}

typedef struct later {
  uv_timer_t timer; /* first: the close callback frees the whole */
  int gone;         /* on_gone came */
} later;

static void on_later(uv_timer_t *t) {
  later *l = (later *)t;
  lith_http_req *req = t->data;
  int was_gone = lith_http_is_gone(req);
  if (l->gone && !was_gone)
    fail("on_gone came for a request that is not gone");
  int rc = lith_http_respond(req, 200, "text/plain", "later", 5); /* releases req */
  if ((rc == LITH_HTTP_GONE) != was_gone)
    fail("lith_http_is_gone and LITH_HTTP_GONE disagree");
  uv_close((uv_handle_t *)t, (uv_close_cb)free); /* on_gone after this: a use after free */
}

/* An HTTP/2 client that reset the stream. */
static void later_gone(lith_http_req *req, void *arg) {
  later *l = arg;
  if (!lith_http_is_gone(req) || l->gone)
    fail("on_gone");
  l->gone = 1;
}

static int h_later(lith_http_req *req, void *arg) {
  (void)arg;
  check_req(req);
  later *l = calloc(1, sizeof *l);
  if (!l)
    fail("malloc");
  uv_timer_init(&loop, &l->timer);
  l->timer.data = req;
  lith_http_on_gone(req, later_gone, l);
  uv_timer_start(&l->timer, on_later, 0, 0);
  return LITH_HTTP_PENDING;
}

/* More than the stream buffer while the first write is in flight: the
 * stream is closed as failed (LITH_HTTP_FULL). */
static int h_flood(lith_http_req *req, void *arg) {
  char chunk[STREAM_BUFFER / 2];
  (void)arg;
  check_req(req);
  memset(chunk, 'x', sizeof chunk);
  if (lith_http_stream_start(req, 200, "application/octet-stream") == LITH_HTTP_OK)
    for (int i = 0; i < 4 && lith_http_stream_write(req, chunk, sizeof chunk) == LITH_HTTP_OK; i++)
      ;
  lith_http_stream_end(req);
  return LITH_HTTP_DONE;
}

static int h_events(lith_http_req *req, void *arg) {
  (void)arg;
  check_req(req);
  if (lith_http_sse_start(req) == LITH_HTTP_OK)
    lith_http_sse_event(req, "tick", "1", "one\ntwo");
  lith_http_stream_end(req);
  return LITH_HTTP_DONE;
}

static int h_secret(lith_http_req *req, void *arg) {
  (void)arg;
  check_req(req);
  if (lith_http_check_bearer(req, "s3cret"))
    lith_http_respond(req, 200, "text/plain", "secret", 6);
  return LITH_HTTP_DONE;
}

static int h_prefix(lith_http_req *req, void *arg) {
  (void)arg;
  check_req(req);
  lith_http_respond_json(req, 200, "{\"prefix\":true}");
  return LITH_HTTP_DONE;
}

static void cleanup(void) { unlink(sock_path); }

static void start_server(void) {
  lith_http_options opt;
  if (uv_loop_init(&loop) != 0)
    fail("uv_loop_init");
  lith_http_options_default(&opt);
  opt.max_body = MAX_BODY;
  opt.stream_buffer = STREAM_BUFFER;
  opt.request_timeout_ms = 1000;
  if (lith_http_server_create(&loop, &opt, &srv) != LITH_HTTP_OK)
    fail(lith_http_errmsg());
  if (lith_http_route(srv, "GET", "/hello", LITH_HTTP_EXACT, h_hello, NULL) ||
      lith_http_route(srv, "POST", "/echo", LITH_HTTP_EXACT, h_echo, NULL) ||
      lith_http_route(srv, "POST", "/json", LITH_HTTP_EXACT, h_json, NULL) ||
      lith_http_route(srv, "GET", "/later", LITH_HTTP_EXACT, h_later, NULL) ||
      lith_http_route(srv, "GET", "/events", LITH_HTTP_EXACT, h_events, NULL) ||
      lith_http_route(srv, "GET", "/flood", LITH_HTTP_EXACT, h_flood, NULL) ||
      lith_http_route(srv, "GET", "/secret", LITH_HTTP_EXACT, h_secret, NULL) ||
      lith_http_route(srv, "GET", "/v1/", LITH_HTTP_PREFIX, h_prefix, NULL))
    fail(lith_http_errmsg());
  snprintf(sock_path, sizeof sock_path, "/tmp/fuzz_http.%d.sock", (int)getpid());
  if (lith_http_listen_unix(srv, sock_path) != LITH_HTTP_OK)
    fail(lith_http_errmsg());
  atexit(cleanup);
}

/* ---- the client side -------------------------------------------------------- */

static void on_client_closed(uv_handle_t *h) { ((client *)h->data)->closed = 1; }

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  client *c = h->data;
  (void)suggested;
  *buf = uv_buf_init(c->in, sizeof c->in);
}

/* Answers are read and dropped; the end of them is the server closing. */
static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  (void)buf;
  if (n < 0 && !uv_is_closing((uv_handle_t *)s))
    uv_close((uv_handle_t *)s, on_client_closed);
}

static void on_shutdown(uv_shutdown_t *sd, int status) { (void)sd, (void)status; }

static void on_written(uv_write_t *wr, int status) {
  client *c = wr->data;
  if (status == 0 && !uv_is_closing((uv_handle_t *)&c->pipe))
    uv_shutdown(&c->sd, (uv_stream_t *)&c->pipe, on_shutdown);
}

static void on_deadline(uv_timer_t *t) {
  (void)t;
  fail("the server kept the connection open past the deadline");
}

/* The server's side of the connection is closed and freed. */
static int server_idle(void) {
  lith_http_stats st;
  lith_http_stats_get(srv, &st);
  return st.connections_open == 0 && st.pending == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  client c;
  uv_timer_t deadline;
  struct sockaddr_un sun = {.sun_family = AF_UNIX};

  if (!srv)
    start_server();
  memset(&c, 0, sizeof c);
  closing_before = closing_errors();

  /* A blocking connect: the listener's backlog is empty between inputs. */
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    fail("socket");
  memcpy(sun.sun_path, sock_path, strlen(sock_path) + 1);
  if (connect(fd, (struct sockaddr *)&sun, sizeof sun) != 0)
    fail(strerror(errno));
  if (uv_pipe_init(&loop, &c.pipe, 0) != 0 || uv_pipe_open(&c.pipe, fd) != 0)
    fail("uv_pipe_open");
  c.pipe.data = c.wr.data = &c;
  uv_read_start((uv_stream_t *)&c.pipe, on_alloc, on_read);
  c.out = uv_buf_init((char *)data, (unsigned)size);
  if (size)
    uv_write(&c.wr, (uv_stream_t *)&c.pipe, &c.out, 1, on_written);
  else
    uv_shutdown(&c.sd, (uv_stream_t *)&c.pipe, on_shutdown);

  uv_timer_init(&loop, &deadline);
  uv_timer_start(&deadline, on_deadline, DEADLINE_MS, 0);
  while (!c.closed || !server_idle())
    uv_run(&loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&deadline, NULL);
  uv_run(&loop, UV_RUN_NOWAIT); /* the close callbacks of both */
  return 0;
}
