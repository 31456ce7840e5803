/*
 * bench/net.c — the benchmarks' network client (net.h says what).
 *
 * Design: plain functions over the callers' buffers and descriptors, as in
 * common.c. The server is spawned with posix_spawn, its stdout on a pipe
 * (its first line names the port) and its stderr in a log whose end is
 * shown when it fails. An answer's head is parsed in place by h1client
 * (http/h1client.c) each time more bytes arrive; nothing is copied.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "h1client.h"

/* ---- a server under test ----------------------------------------------------------------------------- */

void bench_log_tail(const char *log, const char *who) {
  char buf[2048];
  int fd = open(log, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return;
  off_t size = lseek(fd, 0, SEEK_END);
  off_t from = size > (off_t)sizeof buf - 1 ? size - (off_t)sizeof buf + 1 : 0;
  ssize_t n = pread(fd, buf, sizeof buf - 1, from);
  close(fd);
  if (n > 0) {
    buf[n] = '\0';
    fprintf(stderr, "  %s's stderr (%s), its end:\n%s%s", who, log, buf, buf[n - 1] == '\n' ? "" : "\n");
  }
}

int bench_server_start(char *const argv[], const char *log, const char *who, int timeout_s, pid_t *pid,
                       char *err, size_t errsz) {
  static const char URL[] = "http://127.0.0.1:";
  int pfd[2] = {-1, -1}, port = -1;
  posix_spawn_file_actions_t fa;
  char line[1024] = "";
  size_t len = 0;
  *pid = -1;
  if (pipe2(pfd, O_CLOEXEC) != 0) {
    snprintf(err, errsz, "pipe: %s", strerror(errno));
    return -1;
  }
  int rc = posix_spawn_file_actions_init(&fa);
  if (rc == 0) {
    rc = posix_spawn_file_actions_adddup2(&fa, pfd[1], STDOUT_FILENO);
    if (rc == 0)
      rc = posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (rc == 0)
      rc = posix_spawn(pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
  }
  close(pfd[1]);
  if (rc != 0) {
    snprintf(err, errsz, "cannot start %s: %s", argv[0], strerror(rc));
    close(pfd[0]);
    *pid = -1;
    return -1;
  }
  /* The first line on stdout names the URL. */
  while (!memchr(line, '\n', len) && len < sizeof line - 1) {
    struct pollfd p = {pfd[0], POLLIN, 0};
    if (poll(&p, 1, timeout_s * 1000) != 1)
      break;
    ssize_t got = read(pfd[0], line + len, sizeof line - 1 - len);
    if (got <= 0)
      break;
    len += (size_t)got;
    line[len] = '\0';
  }
  close(pfd[0]); /* it prints nothing more we read */
  const char *url = strstr(line, URL);
  if (url)
    port = atoi(url + strlen(URL));
  if (port <= 0 || port > 65535) {
    snprintf(err, errsz, "%s printed no URL line within %d s (got \"%.200s\")", who, timeout_s, line);
    kill(*pid, SIGKILL);
    waitpid(*pid, NULL, 0);
    *pid = -1;
    bench_log_tail(log, who);
    return -1;
  }
  return port;
}

int bench_server_stop(pid_t pid, const char *log, const char *who, char *err, size_t errsz) {
  int st = 0;
  pid_t got = 0;
  if (kill(pid, SIGTERM) != 0) {
    snprintf(err, errsz, "kill(SIGTERM): %s", strerror(errno));
    return -1;
  }
  int64_t deadline = bench_now_ns() + INT64_C(60000000000);
  while ((got = waitpid(pid, &st, WNOHANG)) == 0 && bench_now_ns() < deadline)
    bench_sleep_ms(2);
  if (got == 0) {
    snprintf(err, errsz, "%s did not stop within 60 s of SIGTERM; killed", who);
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    bench_log_tail(log, who);
    return -1;
  }
  if (got < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    snprintf(err, errsz, "%s ended with %s %d", who,
             got < 0         ? "waitpid error"
             : WIFEXITED(st) ? "status"
                             : "signal",
             got < 0         ? errno
             : WIFEXITED(st) ? WEXITSTATUS(st)
                             : WTERMSIG(st));
    bench_log_tail(log, who);
    return -1;
  }
  return 0;
}

int bench_dial(int port, int nonblocking) {
  struct sockaddr_in sa;
  int one = 1;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  if (connect(fd, (const struct sockaddr *)&sa, sizeof sa) != 0 ||
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
    goto fail;
  if (nonblocking) {
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0)
      goto fail;
  } else {
    struct timeval tv = {60, 0}; /* no call of a benchmark's setup takes that long */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }
  return fd;
fail:;
  int e = errno;
  close(fd);
  errno = e;
  return -1;
}

int bench_epoll_out(int ep, int fd, void *ptr, int out) {
  struct epoll_event ev = {.events = EPOLLIN | (out ? EPOLLOUT : 0), .data.ptr = ptr};
  return epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
}

int bench_loop_run(const bench_loop *l) {
  enum { MAXEV = 256 };
  struct epoll_event ev[MAXEV];
  int edge = 0; /* edges passed */
  for (;;) {
    int64_t now = bench_now_ns();
    if (edge < 2 && now >= (edge == 0 ? l->ws : l->we)) {
      l->edge(l->ctx, edge++);
      continue;
    }
    if (edge == 2 && l->outstanding(l->ctx) == 0)
      return 0;
    if (now >= l->we + l->drain_ns)
      return 1;
    int64_t until = edge == 0 ? l->ws : edge == 1 ? l->we : now + 100000000;
    int n = epoll_wait(l->ep, ev, MAXEV, (int)((until - now + 999999) / 1000000));
    if (n < 0 && errno != EINTR)
      return -1;
    for (int i = 0; i < n; i++)
      l->event(l->ctx, ev[i].data.ptr, ev[i].events);
  }
}

int bench_header_is(const char *p, const char *end, const char *name) {
  size_t n = strlen(name);
  return (size_t)(end - p) >= n && strncasecmp(p, name, n) == 0;
}

int bench_http_parse(const char *in, size_t len, size_t cap, bench_answer *a) {
  h1c_head h;
  const char *why;
  int rc = h1c_parse_head(in, len, NULL, &h, NULL, 0, &why);
  memset(a, 0, sizeof *a);
  if (rc == H1C_MORE)
    return len >= cap ? -1 : 0;
  if (rc != H1C_OK)
    return -1;
  a->status = h.status;
  a->head_len = h.head_len;
  a->closes = h.closes;
  /* Chunked, or up to the end: the servers measured send a length. */
  if (h.body != H1C_BODY_LENGTH || h.length > cap - a->head_len)
    return -1;
  if (len < a->head_len + h.length)
    return 0;
  a->total = a->head_len + h.length;
  return 1;
}

int bench_http_recv(int fd, char *in, size_t *len, size_t cap, bench_answer *a) {
  ssize_t n = recv(fd, in + *len, cap - *len, 0);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    return 0;
  if (n <= 0) {
    if (n == 0)
      errno = 0;
    return -1;
  }
  *len += (size_t)n;
  in[*len] = '\0';
  int rc = bench_http_parse(in, *len, cap, a);
  return rc < 0 ? -2 : rc;
}

int bench_body_int(const char *body, size_t n, const char *key, int64_t *out) {
  const char *p = memmem(body, n, key, strlen(key));
  if (!p)
    return 0;
  p += strlen(key);
  char *e;
  long long v = strtoll(p, &e, 10);
  if (e == p || e > body + n)
    return 0;
  *out = v;
  return 1;
}

void bench_put_num(char *slot, int64_t v, int width) {
  char digits[24];
  int n = snprintf(digits, sizeof digits, "%lld", (long long)v);
  memset(slot, ' ', (size_t)width);
  memcpy(slot, digits, (size_t)(n < width ? n : width));
}
