/*
 * Test helpers: see nodes.h. A node's stdout is a pipe the helper reads its
 * one line from; its stderr is the test's (in the test's output file).
 */
#include "nodes.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef LITH_NODE_PATH
#error "LITH_NODE_PATH must be defined (the lith-node binary)"
#endif

static int listen_loopback(int port, int *bound) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  socklen_t len = sizeof a;
  int one = 1;
  if (fd < 0)
    return -1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 4) != 0 ||
      getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
    close(fd);
    return -1;
  }
  *bound = ntohs(a.sin_port);
  return fd;
}

int t_free_port(void) {
  int port = 0;
  int fd = listen_loopback(0, &port);
  if (fd >= 0)
    close(fd);
  return port;
}

void t_node_init(t_node *n, int id) {
  memset(n, 0, sizeof *n);
  n->id = id;
  snprintf(n->address, sizeof n->address, "127.0.0.1:%d", t_free_port());
  snprintf(n->dir, sizeof n->dir, "node%d", id);
}

int64_t t_ms_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void t_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

int t_node_start(t_node *n, const char *join, int timeout_ms) {
  int p[2];
  char id[16], lat[16];
  if (pipe(p) != 0)
    return -1;
  snprintf(id, sizeof id, "%d", n->id);
  snprintf(lat, sizeof lat, "%d", T_NODE_LATENCY_MS);
  n->line[0] = '\0';
  n->pid = fork();
  if (n->pid == 0) {
    /* A test that fails part-way never leaves a node running. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(p[1], 1);
    close(p[0]);
    close(p[1]);
    if (join != NULL)
      execl(LITH_NODE_PATH, "lith-node", "--id", id, "--address", n->address, "--dir", n->dir, "--latency-ms",
            lat, "--join", join, (char *)NULL);
    else
      execl(LITH_NODE_PATH, "lith-node", "--id", id, "--address", n->address, "--dir", n->dir, "--latency-ms",
            lat, (char *)NULL);
    _exit(127);
  }
  close(p[1]);
  if (n->pid < 0) {
    close(p[0]);
    n->pid = 0;
    return -1;
  }
  /* Read up to the newline; EOF (it exited) or the deadline is failure. */
  size_t len = 0;
  int64_t deadline = t_ms_now() + timeout_ms;
  int ok = 0;
  while (!ok) {
    int64_t left = deadline - t_ms_now();
    struct pollfd pf = {.fd = p[0], .events = POLLIN};
    if (left <= 0 || poll(&pf, 1, (int)left) <= 0)
      break;
    ssize_t r = read(p[0], n->line + len, sizeof n->line - 1 - len);
    if (r <= 0)
      break;
    len += (size_t)r;
    n->line[len] = '\0';
    ok = strchr(n->line, '\n') != NULL;
    if (len == sizeof n->line - 1)
      break;
  }
  close(p[0]);
  if (!ok) {
    int status = t_node_stop(n, SIGKILL, 2000);
    fprintf(stderr, "node %d: no serving line within %d ms (got \"%s\"; exit status %d)\n", n->id, timeout_ms,
            n->line, status);
    return -1;
  }
  return 0;
}

int t_node_stop(t_node *n, int sig, int timeout_ms) {
  int status;
  if (n->pid <= 0)
    return -1;
  kill(n->pid, sig);
  int64_t deadline = t_ms_now() + timeout_ms;
  for (;;) {
    pid_t r = waitpid(n->pid, &status, WNOHANG);
    if (r == n->pid)
      break;
    if (t_ms_now() >= deadline) {
      kill(n->pid, SIGKILL);
      waitpid(n->pid, &status, 0);
      n->pid = 0;
      return -1;
    }
    struct timespec ts = {0, 10 * 1000000};
    nanosleep(&ts, NULL);
  }
  n->pid = 0;
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

struct t_fake {
  int lfd;
  pthread_t thread;
  char address[64];
  void *reply;
  size_t n;
  int close_after;
  int quit[2]; /* a pipe: closing the write end ends the thread */
};

static int read_full(int fd, void *buf, size_t n) {
  uint8_t *p = buf;
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r <= 0)
      return -1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

static void *fake_main(void *arg) {
  t_fake *f = arg;
  int fd = accept(f->lfd, NULL, NULL);
  uint8_t h[8];
  if (fd < 0)
    return NULL;
  /* The handshake, then one request: its header says how long it is. */
  if (read_full(fd, h, 8) == 0 && read_full(fd, h, 8) == 0) {
    size_t body = (size_t)(h[0] | h[1] << 8 | h[2] << 16 | (uint32_t)h[3] << 24) * 8;
    uint8_t *b = malloc(body ? body : 1);
    if (b != NULL && read_full(fd, b, body) == 0 && f->n > 0) {
      ssize_t w = write(fd, f->reply, f->n);
      (void)w;
    }
    free(b);
  }
  if (!f->close_after) {
    struct pollfd pf = {.fd = f->quit[0], .events = POLLIN};
    poll(&pf, 1, -1);
  }
  close(fd);
  return NULL;
}

t_fake *t_fake_start(const void *reply, size_t n, int close_after) {
  t_fake *f = calloc(1, sizeof *f);
  int port = 0;
  if (f == NULL)
    return NULL;
  f->lfd = listen_loopback(0, &port);
  f->reply = malloc(n ? n : 1);
  if (f->lfd < 0 || f->reply == NULL || pipe(f->quit) != 0) {
    free(f->reply);
    free(f);
    return NULL;
  }
  memcpy(f->reply, reply, n);
  f->n = n;
  f->close_after = close_after;
  snprintf(f->address, sizeof f->address, "127.0.0.1:%d", port);
  pthread_create(&f->thread, NULL, fake_main, f);
  return f;
}

const char *t_fake_address(const t_fake *f) { return f->address; }

void t_fake_free(t_fake *f) {
  if (f == NULL)
    return;
  close(f->quit[1]);
  shutdown(f->lfd, SHUT_RDWR); /* wakes an accept no client came to */
  pthread_join(f->thread, NULL);
  close(f->quit[0]);
  close(f->lfd);
  free(f->reply);
  free(f);
}

/* ---- The cluster, read directly ---- */

int t_query_int(lith__dq_conn *c, uint32_t db, const char *sql, int64_t *out, char *err, size_t errlen) {
  lith__dq_rows r;
  int rc;
  lith__dq_rows_init(&r);
  rc = lith__dq_query_sql(c, db, sql, NULL, 0, &r);
  if (rc != LITH_DQ_OK) {
    snprintf(err, errlen, "%s: %s: %s", sql, lith__dq_rc_str(rc), lith__dq_errmsg(c));
    return -1;
  }
  if (r.nrows != 1 || r.ncols < 1) {
    snprintf(err, errlen, "%s: %zu rows, not one", sql, (size_t)r.nrows);
    lith__dq_rows_free(&r);
    return -1;
  }
  *out = lith__dq_rows_at(&r, 0, 0)->i;
  lith__dq_rows_free(&r);
  return 0;
}

lith__dq_conn *t_leader_conn(const char *addresses, const char *name, const char *probe, int timeout_ms,
                             uint32_t *db, char *err, size_t errlen) {
  lith__dq_conn *c = lith__dq_new(3000);
  int64_t deadline = t_ms_now() + timeout_ms;
  if (c == NULL) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  for (;;) {
    lith__dq_rows r;
    lith__dq_rows_init(&r);
    int rc = lith__dq_connect_leader(c, addresses, 8000);
    if (rc == LITH_DQ_OK)
      rc = lith__dq_open(c, name, db);
    if (rc == LITH_DQ_OK)
      rc = lith__dq_query_sql(c, *db, probe, NULL, 0, &r);
    lith__dq_rows_free(&r);
    if (rc == LITH_DQ_OK)
      return c;
    if (t_ms_now() > deadline) {
      snprintf(err, errlen, "%s", lith__dq_errmsg(c));
      lith__dq_close(c);
      return NULL;
    }
    t_sleep_ms(50);
  }
}

int t_leader_index(const t_node *nodes, int n, const char *addresses) {
  lith__dq_conn *c = lith__dq_new(3000);
  int found = -1;
  if (c == NULL)
    return -1;
  if (lith__dq_connect_leader(c, addresses, 8000) == LITH_DQ_OK)
    for (int i = 0; i < n; i++)
      if (strcmp(nodes[i].address, lith__dq_address(c)) == 0)
        found = i;
  lith__dq_close(c);
  return found;
}

int t_nodes_start_missing(t_node *nodes, int n, const char *join, int timeout_ms) {
  for (int i = 0; i < n; i++)
    if (nodes[i].pid == 0 && t_node_start(&nodes[i], join, timeout_ms) != 0)
      return -1;
  return 0;
}
