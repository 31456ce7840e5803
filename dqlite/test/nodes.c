/*
 * Test helpers: see nodes.h. A node's stdout is a pipe the helper reads its
 * one line from; its stderr is the test's (in the test's output file).
 */
#include "nodes.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
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
  n->out_fd = -1;
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
  snprintf(lat, sizeof lat, "%d", n->latency_ms > 0 ? n->latency_ms : T_NODE_LATENCY_MS);
  n->line[0] = '\0';
  const char *argv[40] = {"lith-node", "--id",         id, "--address", n->address, "--dir",
                          n->dir,      "--latency-ms", lat};
  int argc = 9;
  if (join != NULL) {
    argv[argc++] = "--join";
    argv[argc++] = join;
  }
  for (int i = 0; n->extra != NULL && n->extra[i] != NULL && argc < 39; i++)
    argv[argc++] = n->extra[i];
  argv[argc] = NULL;
  n->pid = fork();
  if (n->pid == 0) {
    /* A test that fails part-way never leaves a node running. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(p[1], 1);
    close(p[0]);
    close(p[1]);
    execv(LITH_NODE_PATH, (char *const *)argv);
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
  if (ok && n->keep_out) {
    n->out_fd = p[0]; /* what came after the serving line stays in n->line */
    fcntl(p[0], F_SETFL, O_NONBLOCK);
  } else {
    close(p[0]);
  }
  if (!ok) {
    int status = t_node_stop(n, SIGKILL, 2000);
    fprintf(stderr, "node %d: no serving line within %d ms (got \"%s\"; exit status %d)\n", n->id, timeout_ms,
            n->line, status);
    return -1;
  }
  return 0;
}

char *t_node_read_out(t_node *n, char *buf, size_t cap) {
  size_t len = strlen(buf);
  while (n->keep_out && n->out_fd >= 0 && len + 1 < cap) {
    ssize_t r = read(n->out_fd, buf + len, cap - 1 - len);
    if (r <= 0)
      break;
    len += (size_t)r;
  }
  buf[len] = '\0';
  return buf;
}

int t_node_stop(t_node *n, int sig, int timeout_ms) {
  int status;
  if (n->keep_out && n->out_fd >= 0) {
    close(n->out_fd);
    n->out_fd = -1;
  }
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
  int quit[2];  /* a pipe: closing the write end ends the thread */
  int scripted; /* made by t_fake_script (a struct t_fake_x) */
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

/* ---- The scripted fake ---- */

typedef struct t_script {
  t_fake_respond respond;
  void *arg;
  int many;
} t_script;

struct t_fake_x {
  t_fake f; /* first: a t_fake * is a t_fake_x * when scripted */
  t_script s;
  atomic_int conns;
  _Atomic uint64_t written;
};

/* Wait for fd to be readable (or writable) unless quit is closed first:
 * 1 ready, 0 quit, -1 timeout (ms < 0: none). */
static int wait_or_quit(int fd, short events, int quit, int ms) {
  struct pollfd pf[2] = {{.fd = fd, .events = events}, {.fd = quit, .events = POLLIN}};
  for (;;) {
    int n = poll(pf, 2, ms);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    if (pf[1].revents)
      return 0;
    return 1;
  }
}

static int read_q(int fd, int quit, void *buf, size_t n) {
  uint8_t *p = buf;
  while (n > 0) {
    if (wait_or_quit(fd, POLLIN, quit, -1) != 1)
      return -1;
    ssize_t r = recv(fd, p, n, 0);
    if (r <= 0)
      return -1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

static int write_q(struct t_fake_x *x, int fd, const uint8_t *p, size_t n) {
  while (n > 0) {
    if (wait_or_quit(fd, POLLOUT, x->f.quit[0], -1) != 1)
      return -1;
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0 && (errno == EAGAIN || errno == EINTR))
      continue;
    if (w <= 0)
      return -1;
    atomic_fetch_add(&x->written, (uint64_t)w);
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* One connection: 0 to accept the next, -1 to end. */
static int script_conn(struct t_fake_x *x, int fd, int conn) {
  int quit = x->f.quit[0];
  uint8_t h[8];
  lith__dq_buf out;
  lith__dq_buf_init(&out);
  int rc = read_q(fd, quit, h, 8); /* the handshake */
  for (int index = 0; rc == 0; index++) {
    if (read_q(fd, quit, h, 8) != 0)
      break;
    size_t n = (size_t)(h[0] | h[1] << 8 | h[2] << 16 | (uint32_t)h[3] << 24) * 8;
    uint8_t *body = malloc(n ? n : 1);
    if (body == NULL || read_q(fd, quit, body, n) != 0) {
      free(body);
      break;
    }
    t_fake_call call = {
        .conn = conn, .index = index, .type = h[4], .body = body, .n = n, .address = x->f.address};
    int next;
    for (;; call.repeat++) {
      lith__dq_buf_reset(&out);
      next = x->s.respond(x->s.arg, &call, &out);
      if (out.len > 0 && write_q(x, fd, out.data, out.len) != 0) {
        next = T_FAKE_CLOSE;
        break;
      }
      if (next < 0)
        break;
      if (next > 0 && wait_or_quit(quit, POLLIN, quit, next) == 0) {
        next = T_FAKE_CLOSE;
        break;
      }
      struct pollfd pq = {.fd = quit, .events = POLLIN};
      if (poll(&pq, 1, 0) > 0) {
        next = T_FAKE_CLOSE;
        break;
      }
    }
    free(body);
    if (next == T_FAKE_CLOSE)
      break;
  }
  lith__dq_buf_free(&out);
  close(fd);
  struct pollfd pq = {.fd = quit, .events = POLLIN};
  return poll(&pq, 1, 0) > 0 ? -1 : 0;
}

static void *script_main(void *arg) {
  struct t_fake_x *x = arg;
  for (int conn = 0;; conn++) {
    if (wait_or_quit(x->f.lfd, POLLIN, x->f.quit[0], -1) != 1)
      break;
    int fd = accept(x->f.lfd, NULL, NULL);
    if (fd < 0)
      break;
    atomic_fetch_add(&x->conns, 1);
    if (script_conn(x, fd, conn) != 0 || !x->s.many)
      break;
  }
  return NULL;
}

t_fake *t_fake_script(t_fake_respond respond, void *arg, int many) {
  struct t_fake_x *x = calloc(1, sizeof *x);
  int port = 0;
  if (x == NULL)
    return NULL;
  x->f.lfd = listen_loopback(0, &port);
  x->f.reply = malloc(1);
  if (x->f.lfd < 0 || x->f.reply == NULL || pipe(x->f.quit) != 0) {
    free(x->f.reply);
    free(x);
    return NULL;
  }
  x->s = (t_script){.respond = respond, .arg = arg, .many = many};
  x->f.scripted = 1;
  snprintf(x->f.address, sizeof x->f.address, "127.0.0.1:%d", port);
  pthread_create(&x->f.thread, NULL, script_main, x);
  return &x->f;
}

int t_fake_connections(const t_fake *f) {
  return f->scripted ? atomic_load(&((struct t_fake_x *)f)->conns) : 0;
}

uint64_t t_fake_written(const t_fake *f) {
  return f->scripted ? atomic_load(&((struct t_fake_x *)f)->written) : 0;
}

void t_rows_frame(lith__dq_buf *out, int nrows, size_t pad, int done) {
  char *text = NULL;
  if (pad > 0) {
    text = malloc(pad + 1);
    memset(text, 'x', pad);
    text[pad] = '\0';
  }
  lith__dq_req_begin(out, LITH_DQ_RES_ROWS);
  lith__dq_put_u64(out, pad > 0 ? 2 : 1);
  lith__dq_put_text(out, "n");
  if (pad > 0)
    lith__dq_put_text(out, "pad");
  for (int i = 1; i <= nrows; i++) {
    lith__dq_put_u64(out, pad > 0 ? (LITH_DQ_INTEGER | LITH_DQ_TEXT << 4) : LITH_DQ_INTEGER);
    lith__dq_put_u64(out, (uint64_t)i);
    if (pad > 0)
      lith__dq_put_text(out, text);
  }
  lith__dq_put_u64(out, done ? LITH_DQ_ROWS_DONE : LITH_DQ_ROWS_PART);
  lith__dq_req_end(out);
  free(text);
}

long t_rss_kib(void) {
  long pages = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f == NULL)
    return -1;
  if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
    resident = -1;
  fclose(f);
  return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
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
