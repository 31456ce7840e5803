/*
 * http/test/helper.h — what the HTTP layer's tests (http/test/test_*.c)
 * share: a server on a loop thread with every test route, and a raw
 * HTTP/1.1 client on plain sockets.
 *
 * The fixture. setup() makes a fresh loop and server (max_body MAX_BODY,
 * stream_buffer STREAM_BUFFER) with the routes of helper.c's handlers, on
 * 127.0.0.1 port 0, and hands the loop to the one loop thread that
 * ht_run() started; teardown() stops it, waits until the loop thread's
 * uv_run returned, and asserts that no handle was left and no loop-thread
 * check failed. The test thread never touches the server while the loop
 * runs: on_loop() runs a job there and waits for it. Handlers report
 * through the atomics of struct fx.
 *
 * The client writes raw bytes and parses what comes back itself (rbuf,
 * read_head, read_chunk, read_response): the point is to see the bytes,
 * HTTP/2 frames and single chunks included, which a client library
 * (http/h1client.h included) would not show. Its functions assert (test
 * thread only).
 */
#ifndef LITH_HTTP_TEST_HELPER_H
#define LITH_HTTP_TEST_HELPER_H

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "http.h"

#define TOKEN "s3cret-token"
#define MAX_BODY 1024
#define STREAM_BUFFER (64 * 1024)

/* ---- the fixture ------------------------------------------------------------ */

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
  atomic_int late_done, late_rc, sse_sent, sse_gone, sse_end_rc, flood_full, flood_gone, flood_end_rc,
      forever_runs, forever_rc, stopwait_runs, stopped, stop_rc;
  atomic_int slow_body_ok, loop_errors;
  /* loop thread only */
  lith_http_req *sse, *flood, *forever;
  int sse_count;
};

extern fx *F; /* the current test's fixture */

/* cmocka's asserts must not run on the loop thread (they longjmp): checks
 * there count failures, and teardown asserts there were none. */
#define LOOP_CHECK(cond)                                                                   \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      fprintf(stderr, "%s:%d: loop-thread check failed: %s\n", __FILE__, __LINE__, #cond); \
      atomic_fetch_add(&F->loop_errors, 1);                                                \
    }                                                                                      \
  } while (0)

/* The next setup()'s lith_http_options.write_timeout_ms; -1 (the value
 * setup() leaves): the layer's default. */
extern int ht_write_timeout_ms;
/* Every setup()'s lith_http_options.tls_cert_file, tls_key_file and
 * request_timeout_ms (NULL, NULL, 0: none, none, the default). */
extern const char *ht_tls_cert, *ht_tls_key;
extern unsigned ht_request_timeout_ms;

int setup(void **state);
int teardown(void **state);
/* Run job(f, arg) on the loop thread and wait for it. */
void on_loop(fx *f, job_fn job, void *arg);
int64_t now_ms(void);
/* Wait until *v == want (or timeout_ms passed); returns 1 if it did. */
int wait_for(atomic_int *v, int want, int timeout_ms);
/* A one-shot uv timer calling fn(data) after ms (loop thread). */
void run_later(uv_loop_t *loop, unsigned ms, void (*fn)(void *), void *data);

typedef struct stop_args {
  unsigned grace_ms;
} stop_args;
/* on_loop job: lith_http_server_stop with arg's grace (a stop_args). */
void job_stop(fx *f, void *arg);
/* on_loop job: lith_http_stats_get into arg (a lith_http_stats). */
void job_stats(fx *f, void *arg);
/* How many answers of `status` the server counted. */
uint64_t count_of(fx *f, int status);

/* Start the loop thread and run the tests (TEST_FILTER='test_sse*' picks
 * some); the loop thread is left running (see helper.c). */
int ht_run(const char *name, const struct CMUnitTest *tests, size_t n);
#define HT_RUN(tests) ht_run(__FILE__, tests, sizeof tests / sizeof tests[0])

/* ---- a raw HTTP/1.1 client ---------------------------------------------------- */

/* SO_RCVTIMEO and SO_SNDTIMEO of 5 s. */
void set_timeouts(int fd);
/* A TCP connection to 127.0.0.1:port (rcvbuf: SO_RCVBUF, 0 to leave it), or -1. */
int tcp_connect_opt(int port, int rcvbuf);
int tcp_connect(int port);          /* asserts */
int unix_connect(const char *path); /* asserts */
void send_all(int fd, const void *p, size_t n);
void send_str(int fd, const char *s);

/* Bytes received on fd and not consumed yet. */
typedef struct rbuf {
  int fd;
  char data[1 << 17];
  size_t len;
  int eof;
} rbuf;

void rbuf_init(rbuf *b, int fd);
/* Read more into b; 0 on end of file, error or timeout. */
int rbuf_fill(rbuf *b);
void rbuf_consume(rbuf *b, size_t n);
/* Index of `pat` in b (reading more as needed), or -1 at end of input. */
long rbuf_find(rbuf *b, const char *pat);
/* At least n bytes in b (reading more as needed); 0 at end of input. */
int rbuf_need(rbuf *b, size_t n);

typedef struct resp {
  int status;
  char head[8192]; /* status line and headers */
  char body[1 << 16];
  size_t body_len;
} resp;

/* The value of header `name` in r (first one) copied into out, or NULL;
 * `nth` picks later ones. */
const char *resp_header_nth(const resp *r, const char *name, int nth, char *out, size_t cap);
const char *resp_header(const resp *r, const char *name, char *out, size_t cap);
/* Read the headers of one response into r (not the body). */
int read_head(rbuf *b, resp *r);
/* One chunk of a chunked body: its size (0: the last), data appended to r. */
long read_chunk(rbuf *b, resp *r);
/* Read one whole response (Content-Length, chunked, or none for 1xx/204/304). */
int read_response(rbuf *b, resp *r);
/* One request on a new connection; the response in *r. */
void exchange(int port, const char *request, resp *r);
/* 1 if the server closes fd (EOF or reset) within 3 s. */
int closed_by_server(int fd);
resp *new_resp(void); /* zeroed; free() it */

#endif
