/*
 * bench/net.h — the network client of the benchmarks that drive a server
 * over HTTP on 127.0.0.1 (bench/lithd, bench/kanban_http, bench/soak): start
 * and stop the server, dial it, read its answers, run closed loops of
 * requests on one epoll set.
 *
 * Answers are parsed in the clients' own buffers, without copies, by
 * http/h1client.h's h1c_parse_head (the same framing rules as the lith CLI
 * and the tests); these clients read only answers with a Content-Length,
 * which is what the servers measured send. Same rules as common.h: C11,
 * POSIX/Linux, no liblith; failures return -1 and leave the report to the
 * caller.
 */
#ifndef LITH_BENCH_NET_H
#define LITH_BENCH_NET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- a server under test, over HTTP on 127.0.0.1 --------------------------------------------------- */

/* Spawn argv (argv[0] the binary) with stdout through a pipe and stderr to
 * `log`; wait up to timeout_s for a line naming http://127.0.0.1:PORT.
 * The port, or -1 with why in err (then nothing is left running: *pid -1). */
int bench_server_start(char *const argv[], const char *log, const char *who, int timeout_s, pid_t *pid,
                       char *err, size_t errsz);
/* SIGTERM, and wait up to 60 s (else SIGKILL). 0 when it exited 0; else -1
 * with why in err and the end of its log on stderr. */
int bench_server_stop(pid_t pid, const char *log, const char *who, char *err, size_t errsz);
void bench_log_tail(const char *log, const char *who); /* the end of its stderr, on ours */

/* A TCP connection to 127.0.0.1:port with TCP_NODELAY; nonblocking, or
 * blocking with 60 s timeouts. The fd, or -1 (errno says why). */
int bench_dial(int port, int nonblocking);
/* EPOLLIN, and EPOLLOUT too when `out`, for fd (registered with ptr). */
int bench_epoll_out(int ep, int fd, void *ptr, int out);

typedef struct bench_answer {
  int status;
  size_t head_len; /* through the blank line */
  size_t total;    /* head and body */
  int closes;      /* Connection: close */
} bench_answer;

/* One recv() into in[*len..cap) (NUL-terminated), then bench_http_parse:
 * 1 a whole answer, 0 not yet (or nothing to read now), -1 the connection
 * closed (errno 0) or failed (errno), -2 not an answer this client reads. */
int bench_http_recv(int fd, char *in, size_t *len, size_t cap, bench_answer *a);
/* 1: in[0..len) holds a whole answer (of at most cap bytes, with a
 * Content-Length); 0: not yet; -1: not an answer this client reads. */
int bench_http_parse(const char *in, size_t len, size_t cap, bench_answer *a);
/* The closed loops of a client (one thread, one epoll set) over a window:
 * at ws and at we edge(ctx, 0|1) (the moment to take a snapshot), every
 * event to event(ctx, its data.ptr, its events), until after the window
 * outstanding(ctx) is 0. 0 then; 1 when answers were still outstanding
 * drain_ns after the window; -1 when epoll_wait failed (errno says why). */
typedef struct bench_loop {
  int ep;
  int64_t ws, we, drain_ns;
  void *ctx;
  void (*edge)(void *ctx, int which);
  void (*event)(void *ctx, void *ptr, uint32_t events);
  int (*outstanding)(void *ctx);
} bench_loop;
int bench_loop_run(const bench_loop *l);

/* Does the header line at p (ending before `end`) start with `name`, colon
 * included ("content-length:"), in any case? */
int bench_header_is(const char *p, const char *end, const char *name);
/* The integer after `key` in body[0..n). 1 when found. */
int bench_body_int(const char *body, size_t n, const char *key, int64_t *out);
/* v (>= 0) in decimal at the start of a slot of `width` bytes, the rest
 * spaces (JSON allows them after a value, so lengths never change). */
void bench_put_num(char *slot, int64_t v, int width);

#endif
