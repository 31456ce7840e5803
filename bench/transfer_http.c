/*
 * bench/transfer_http.c — the transfer workload's HTTP client
 * (transfer_http.h says what, and why it is shared). Moved from
 * bench/lithd.c; what changed on the way: the route is the caller's, per
 * connection, and there may be several stats connections (one per
 * database of a lithd serving several). Then Hrana over WebSocket
 * (BENCH_TH_HRANA_WS): the same closed loops, each connection a WebSocket
 * set up blocking before the window (http/test/wsclient.c, lithd's tests'
 * client: one handshake, checked) and then framed here, without blocking:
 * a request is one masked text frame (a fresh key each, as RFC 6455 asks
 * of a client; masking a 1.4 KB message is part of what a client costs),
 * an answer one unmasked text frame. The frame's length never changes (the
 * fixed-width slots), so its header is written once.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "transfer_http.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net.h"
#include "test/wsclient.h"

enum { NUM_W = 20 };
enum { F_AMT, F_SRC, F_DST, F_CLIENT, F_SEQ, F_REQ };

/* The request body, piece by piece: each text is followed by the number slot
 * `kind` (-1: the end). */
typedef struct piece {
  const char *text;
  int kind;
} piece;

static const piece BODY[] = {{"{\"statements\":[{\"sql\":\"" BENCH_SQL_DEBIT "\",\"params\":[", F_AMT},
                             {",", F_SRC},
                             {"]},{\"sql\":\"" BENCH_SQL_CREDIT "\",\"params\":[", F_AMT},
                             {",", F_DST},
                             {"]},{\"sql\":\"" BENCH_SQL_LEDGER "\",\"params\":[", F_CLIENT},
                             {",", F_SEQ},
                             {",", F_SRC},
                             {",", F_DST},
                             {",", F_AMT},
                             {"]},{\"sql\":\"" BENCH_SQL_TOPIC "\",\"params\":[", F_CLIENT},
                             {"]}]}", -1}};

/* The same transfer as @libsql/client's client.batch([...], "write") sends it
 * (a pipeline of one batch and a close; BEGIN IMMEDIATE, each statement on
 * the one before's success, COMMIT, ROLLBACK unless the COMMIT succeeded),
 * numbers as Hrana floats as the client sends JavaScript numbers: the same
 * slots in the same order. STEPS is the batch; over HTTP it sits in a
 * pipeline (HTTP_HEAD, HTTP_TAIL), over WebSocket in a request message
 * (WS_HEAD, WS_TAIL). */
#define HF "{\"type\":\"float\",\"value\":"
static const piece STEPS[] = {{"{\"steps\":["
                               "{\"stmt\":{\"sql\":\"BEGIN IMMEDIATE\"}},"
                               "{\"stmt\":{\"sql\":\"" BENCH_SQL_DEBIT "\",\"args\":[" HF,
                               F_AMT},
                              {"}," HF, F_SRC},
                              {"}]},\"condition\":{\"type\":\"ok\",\"step\":0}},"
                               "{\"stmt\":{\"sql\":\"" BENCH_SQL_CREDIT "\",\"args\":[" HF,
                               F_AMT},
                              {"}," HF, F_DST},
                              {"}]},\"condition\":{\"type\":\"ok\",\"step\":1}},"
                               "{\"stmt\":{\"sql\":\"" BENCH_SQL_LEDGER "\",\"args\":[" HF,
                               F_CLIENT},
                              {"}," HF, F_SEQ},
                              {"}," HF, F_SRC},
                              {"}," HF, F_DST},
                              {"}," HF, F_AMT},
                              {"}]},\"condition\":{\"type\":\"ok\",\"step\":2}},"
                               "{\"stmt\":{\"sql\":\"" BENCH_SQL_TOPIC "\",\"args\":[" HF,
                               F_CLIENT},
                              {"}]},\"condition\":{\"type\":\"ok\",\"step\":3}},"
                               "{\"stmt\":{\"sql\":\"COMMIT\"},\"condition\":{\"type\":\"ok\",\"step\":4}},"
                               "{\"stmt\":{\"sql\":\"ROLLBACK\"},\"condition\":{\"type\":\"not\",\"cond\":"
                               "{\"type\":\"ok\",\"step\":5}}}]}",
                               -1}};
static const piece HTTP_HEAD[] = {{"{\"baton\":null,\"requests\":[{\"type\":\"batch\",\"batch\":", -1}};
static const piece HTTP_TAIL[] = {{"},{\"type\":\"close\"}]}", -1}};
static const piece WS_HEAD[] = {{"{\"type\":\"request\",\"request_id\":", F_REQ},
                                {",\"request\":{\"type\":\"batch\",\"stream_id\":1,\"batch\":", -1}};
static const piece WS_TAIL[] = {{"}}", -1}};
#undef HF

static void say(bench_th_client *cl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(bench_th_client *cl, const char *fmt, ...) {
  char buf[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  cl->say(cl->say_ctx, buf);
}

int bench_th_init(bench_th_client *cl, int n, int nstats, size_t lat_cap, uint64_t seed, bench_say_fn fn,
                  void *ctx) {
  memset(cl, 0, sizeof *cl);
  cl->ep = -1;
  cl->say = fn;
  cl->say_ctx = ctx;
  if (bench_lat_init(&cl->lat, lat_cap, lat_cap, seed) != 0)
    return -1;
  cl->c = calloc((size_t)n, sizeof *cl->c);
  cl->stats = calloc((size_t)(nstats > 0 ? nstats : 1), sizeof *cl->stats);
  if (!cl->c || !cl->stats)
    return -1;
  cl->N = n;
  cl->nstats = nstats;
  for (int i = 0; i < n; i++)
    cl->c[i].fd = -1;
  for (int k = 0; k < nstats; k++) {
    cl->stats[k].fd = -1;
    cl->stats[k].id = -1;
  }
  return 0;
}

/* Connection i's transfer request, with empty slots. */
int bench_th_build(bench_th_client *cl, int i, const char *path, uint64_t rng) {
  return bench_th_build_as(cl, i, path, rng, BENCH_TH_V1);
}

typedef struct segment {
  const piece *p;
  size_t n;
} segment;
#define SEG(a) \
  { a, sizeof a / sizeof *a }

/* Writes the pieces of seg[0..nseg) at out (NULL: only measures), an empty
 * slot of NUM_W spaces where a number goes (recorded in c, at its offset
 * from base); returns the length. */
static size_t lay_out(bench_th_conn *c, const segment *seg, size_t nseg, char *out, const char *base) {
  size_t len = 0;
  for (size_t s = 0; s < nseg; s++)
    for (size_t k = 0; k < seg[s].n; k++) {
      const piece *pc = &seg[s].p[k];
      size_t tl = strlen(pc->text);
      if (out != NULL)
        memcpy(out + len, pc->text, tl);
      len += tl;
      if (pc->kind < 0)
        continue;
      if (out != NULL) {
        if (c->nslot >= BENCH_TH_NSLOT)
          return 0;
        c->slot[c->nslot] = (size_t)(out + len - base);
        c->kind[c->nslot++] = pc->kind;
        memset(out + len, ' ', NUM_W);
      }
      len += NUM_W;
    }
  return len;
}

int bench_th_build_as(bench_th_client *cl, int i, const char *path, uint64_t rng, int format) {
  bench_th_conn *c = &cl->c[i];
  const segment v1[] = {SEG(BODY)}, http[] = {SEG(HTTP_HEAD), SEG(STEPS), SEG(HTTP_TAIL)},
                ws[] = {SEG(WS_HEAD), SEG(STEPS), SEG(WS_TAIL)};
  const segment *seg = format == BENCH_TH_HRANA ? http : format == BENCH_TH_HRANA_WS ? ws : v1;
  size_t nseg = format == BENCH_TH_HRANA || format == BENCH_TH_HRANA_WS ? 3 : 1;
  c->id = i;
  c->rng = rng;
  c->nslot = 0;
  size_t body = lay_out(c, seg, nseg, NULL, NULL);
  if (format == BENCH_TH_HRANA_WS) {
    /* The frame: FIN and text, the mask bit and the length (16 bits past
     * 125), the mask key; then the masked message (ws_mask). */
    size_t hl = body < 126 ? 2 : body < 65536 ? 4 : 10;
    c->ws = 1;
    c->hdr_len = hl + 4;
    c->mask = (uint32_t)(rng >> 32) | 1;
    c->plain = malloc(body + 1);
    c->req = malloc(c->hdr_len + body);
    c->path = strdup(path);
    if (!c->plain || !c->req || !c->path)
      return -1;
    unsigned char *h = (unsigned char *)c->req;
    h[0] = 0x81;
    h[1] = (unsigned char)(0x80 | (hl == 2 ? body : hl == 4 ? 126 : 127));
    for (size_t k = 2; k < hl; k++)
      h[k] = (unsigned char)((uint64_t)body >> (8 * (hl - 1 - k)));
    if (lay_out(c, seg, nseg, c->plain, c->plain) != body)
      return -1;
    c->plain[body] = '\0';
    c->req_len = c->hdr_len + body;
    return c->nslot == BENCH_TH_NSLOT ? 0 : -1;
  }
  char head[400];
  int hl = snprintf(head, sizeof head,
                    "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    "Content-Length: %zu\r\n\r\n",
                    path, body);
  if (hl < 0 || (size_t)hl >= sizeof head)
    return -1;
  c->req = malloc((size_t)hl + body + 1);
  if (!c->req)
    return -1;
  memcpy(c->req, head, (size_t)hl);
  if (lay_out(c, seg, nseg, c->req + hl, c->req) != body)
    return -1;
  c->req[(size_t)hl + body] = '\0';
  c->req_len = (size_t)hl + body;
  return c->nslot == BENCH_TH_NSLOT - 1 ? 0 : -1;
}

int bench_th_build_stats(bench_th_client *cl, int k, const char *path) {
  bench_th_conn *c = &cl->stats[k];
  size_t n = strlen(path) + 64;
  if (!(c->req = malloc(n)))
    return -1;
  int len = snprintf(c->req, n, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path);
  c->req_len = (size_t)len;
  return 0;
}

/* A WebSocket request: a fresh mask key (xorshift32: unpredictable enough
 * for loopback, and the server cannot tell), the message masked into the
 * frame. */
static void ws_mask(bench_th_conn *c) {
  unsigned char *key = (unsigned char *)c->req + c->hdr_len - 4, *out = key + 4;
  const unsigned char *in = (const unsigned char *)c->plain;
  c->mask ^= c->mask << 13;
  c->mask ^= c->mask >> 17;
  c->mask ^= c->mask << 5;
  memcpy(key, &c->mask, 4);
  for (size_t i = 0, n = c->req_len - c->hdr_len; i < n; i++)
    out[i] = in[i] ^ key[i & 3];
}

static void fill_request(bench_th_conn *c, const bench_transfer *t) {
  char *base = c->ws ? c->plain : c->req;
  for (int i = 0; i < c->nslot; i++) {
    int64_t v = c->kind[i] == F_AMT      ? t->amount
                : c->kind[i] == F_SRC    ? t->src
                : c->kind[i] == F_DST    ? t->dst
                : c->kind[i] == F_CLIENT ? t->owner
                                         : t->seq; /* F_SEQ, F_REQ (the request_id) */
    bench_put_num(base + c->slot[i], v, NUM_W);
  }
  if (c->ws)
    ws_mask(c);
}

/* A WebSocket connection's setup, blocking (wsclient.c): the handshake
 * offering hrana3 (its Sec-WebSocket-Accept checked), the hello and
 * open_stream 1, both answered OK; then the socket is made nonblocking.
 * The fd, or -1 (said). */
static int ws_setup(bench_th_client *cl, bench_th_conn *c) {
  char head[2048], proto[32], msg[600];
  int fd = bench_dial(cl->port, 0), code = 0;
  if (fd < 0) {
    say(cl, "connection %d: %s", c->id, strerror(errno));
    return -1;
  }
  int st = wsc_handshake(fd, c->path, "hrana3", NULL, head, sizeof head);
  if (st != 101) {
    say(cl, "connection %d: the WebSocket handshake: %s %d", c->id,
        st == -2 ? "a wrong Sec-WebSocket-Accept" : "status", st);
    goto fail;
  }
  if (!wsc_header(head, "sec-websocket-protocol", proto, sizeof proto) || strcmp(proto, "hrana3") != 0) {
    say(cl, "connection %d: the server chose no hrana3", c->id);
    goto fail;
  }
  if (wsc_send_text(fd, "{\"type\":\"hello\",\"jwt\":null}") != 0 ||
      wsc_send_text(fd, "{\"type\":\"request\",\"request_id\":0,\"request\":{\"type\":\"open_stream\","
                        "\"stream_id\":1}}") != 0) {
    say(cl, "connection %d: sending the hello: %s", c->id, strerror(errno));
    goto fail;
  }
  static const char *const want[2] = {"\"type\":\"hello_ok\"", "\"type\":\"response_ok\""};
  for (int k = 0; k < 2; k++) {
    long n = wsc_read_text(fd, msg, sizeof msg, &code);
    if (n < 0 || strstr(msg, want[k]) == NULL) {
      say(cl, "connection %d: %s: %s", c->id, k ? "open_stream" : "hello",
          n == -2 ? "closed"
          : n < 0 ? "no answer"
                  : msg);
      goto fail;
    }
  }
  if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) {
    say(cl, "connection %d: O_NONBLOCK: %s", c->id, strerror(errno));
    goto fail;
  }
  return fd;
fail:
  close(fd);
  return -1;
}

static int conn_open(bench_th_client *cl, bench_th_conn *c) {
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
  c->fd = c->ws ? ws_setup(cl, c) : bench_dial(cl->port, 1);
  if (c->ws && c->fd < 0)
    return -1; /* said */
  if (c->fd < 0 || epoll_ctl(cl->ep, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
    say(cl, "connection %d: %s", c->id, strerror(errno));
    if (c->fd >= 0)
      close(c->fd);
    c->fd = -1;
    return -1;
  }
  c->in_len = 0;
  c->busy = c->want_out = 0;
  return 0;
}

static void conn_close(bench_th_conn *c) {
  if (c->fd >= 0)
    close(c->fd); /* leaves the epoll set with it */
  c->fd = -1;
}

static int set_out(bench_th_client *cl, bench_th_conn *c, int on) {
  if (bench_epoll_out(cl->ep, c->fd, c, on) != 0)
    return -1;
  c->want_out = on;
  return 0;
}

/* Send what is left of c's request. 0, or -1 on a broken connection. */
static int conn_flush(bench_th_client *cl, bench_th_conn *c) {
  while (c->sent < c->req_len) {
    ssize_t n = send(c->fd, c->req + c->sent, c->req_len - c->sent, MSG_NOSIGNAL);
    if (n > 0) {
      c->sent += (size_t)n;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return c->want_out ? 0 : set_out(cl, c, 1);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return -1;
    }
  }
  return c->want_out ? set_out(cl, c, 0) : 0;
}

static void conn_failed(bench_th_client *cl, bench_th_conn *c, const char *what);

/* Start c's next request (a transfer, or the stats). */
static void conn_send(bench_th_client *cl, bench_th_conn *c) {
  if (c->fd < 0)
    return;
  if (c->id >= 0) {
    bench_transfer t = bench_transfer_make(c->id, ++c->seq, &c->rng);
    fill_request(c, &t);
    cl->inflight++;
  } else {
    cl->stats_pending++;
  }
  c->busy = 1;
  c->sent = 0;
  c->t0 = bench_now_ns();
  if (conn_flush(cl, c) != 0)
    conn_failed(cl, c, "send");
}

/* A broken connection: an error; the outstanding request's fate is unknown
 * (the database check will tell). Transfer connections reconnect while the
 * window is open. */
static void conn_failed(bench_th_client *cl, bench_th_conn *c, const char *what) {
  cl->errors++;
  say(cl, "connection %d: %s failed%s%s", c->id, what, errno ? ": " : "", errno ? strerror(errno) : "");
  if (c->busy) {
    if (c->id >= 0)
      cl->inflight--;
    else
      cl->stats_pending--;
    c->busy = 0;
  }
  conn_close(c);
  if (c->id >= 0 && bench_now_ns() < cl->we && conn_open(cl, c) == 0)
    conn_send(cl, c);
}

/* A transfer's answer arrived at t1 (ok: a success; else said already). */
static void transfer_done(bench_th_client *cl, bench_th_conn *c, int ok, int64_t t1) {
  c->busy = 0;
  cl->inflight--;
  if (ok) {
    c->ok++;
    if (t1 >= cl->ws && t1 < cl->we) {
      cl->win_ok++;
      bench_lat_add(&cl->lat, (uint64_t)(t1 - c->t0));
    }
  } else {
    cl->errors++;
  }
  if (t1 < cl->we)
    conn_send(cl, c);
}

static void on_answer(bench_th_client *cl, bench_th_conn *c, const bench_answer *a) {
  int64_t t1 = bench_now_ns(), v;
  const char *body = c->in + a->head_len;
  size_t body_len = a->total - a->head_len;
  c->busy = 0;
  if (c->id < 0) { /* stats */
    cl->stats_pending--;
    if (a->status != 200 || c->got >= 2) {
      cl->errors++;
      say(cl, "GET stats: HTTP %d", a->status);
      return;
    }
    c->cmds[c->got] = bench_body_int(body, body_len, "\"commands\":", &v) ? (uint64_t)v : 0;
    c->batches[c->got] = bench_body_int(body, body_len, "\"batches\":", &v) ? (uint64_t)v : 0;
    c->got++;
    return;
  }
  if (a->status != 200)
    say(cl, "POST: HTTP %d: %.*s", a->status, (int)(body_len < 300 ? body_len : 300), body);
  transfer_done(cl, c, a->status == 200, t1);
}

static void conn_readable(bench_th_client *cl, bench_th_conn *c) {
  bench_answer a;
  int rc = bench_http_recv(c->fd, c->in, &c->in_len, BENCH_TH_IN_CAP, &a);
  if (rc == 0)
    return;
  if (rc == -1) {
    conn_failed(cl, c, errno ? "read" : "read (closed by the server)");
    return;
  }
  if (rc < 0 || !c->busy || a.total != c->in_len) {
    errno = 0;
    conn_failed(cl, c, rc < 0 ? "parsing the answer" : "an answer nobody asked for");
    return;
  }
  c->in_len = 0;
  on_answer(cl, c, &a);
  if (a.closes && c->fd >= 0) {
    errno = 0;
    conn_failed(cl, c, "keep-alive (the server closed the connection)");
  }
}

/* One frame of a server at in[0..len) (never masked): 1 when it is whole
 * (its header's length in *hl, its payload's in *pl, its first byte in
 * *b0), 0 when more must come, -1 when it cannot fit in cap or is masked. */
static int ws_frame(const unsigned char *in, size_t len, size_t cap, size_t *hl, size_t *pl, int *b0) {
  if (len < 2)
    return 0;
  if (in[1] & 0x80)
    return -1;
  size_t h = 2;
  uint64_t n = in[1] & 0x7f;
  if (n >= 126) {
    h = n == 126 ? 4 : 10;
    if (len < h)
      return 0;
    n = 0;
    for (size_t k = 2; k < h; k++)
      n = n << 8 | in[k];
  }
  if (n > cap - h)
    return -1;
  if (len < h + n)
    return 0;
  *hl = h;
  *pl = (size_t)n;
  *b0 = in[0];
  return 1;
}

/* A WebSocket connection's bytes: its answers, each one whole text frame,
 * response_ok for the request in flight. */
static void ws_readable(bench_th_client *cl, bench_th_conn *c) {
  ssize_t n = recv(c->fd, c->in + c->in_len, BENCH_TH_IN_CAP - c->in_len, 0);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    if (n == 0)
      errno = 0;
    conn_failed(cl, c, n == 0 ? "read (closed by the server)" : "read");
    return;
  }
  if (n < 0)
    return;
  c->in_len += (size_t)n;
  size_t hl, pl;
  int b0, rc;
  while (c->fd >= 0 &&
         (rc = ws_frame((const unsigned char *)c->in, c->in_len, BENCH_TH_IN_CAP, &hl, &pl, &b0)) != 0) {
    errno = 0;
    if (rc < 0) {
      conn_failed(cl, c, "reading a frame (masked, or past 16 KiB)");
      return;
    }
    if (b0 != 0x81 || !c->busy) {
      const unsigned char *p = (const unsigned char *)c->in + hl;
      say(cl, "connection %d: a frame 0x%02x%s (close code %d) %s", c->id, (unsigned)b0,
          (b0 & 0x0f) == 8 ? ", a close" : "", (b0 & 0x0f) == 8 && pl >= 2 ? p[0] << 8 | p[1] : 0,
          c->busy ? "where one whole text frame was expected" : "nobody asked for");
      conn_failed(cl, c, "the answer");
      return;
    }
    const char *m = c->in + hl;
    char id[48];
    int idl = snprintf(id, sizeof id, "\"request_id\":%lld,", (long long)c->seq);
    static const char resp_ok[] = "\"type\":\"response_ok\"";
    int ok = memmem(m, pl, resp_ok, sizeof resp_ok - 1) != NULL && memmem(m, pl, id, (size_t)idl) != NULL;
    if (!ok)
      say(cl, "connection %d: request %lld: %.*s", c->id, (long long)c->seq, (int)(pl < 300 ? pl : 300), m);
    c->in_len -= hl + pl;
    memmove(c->in, c->in + hl + pl, c->in_len);
    transfer_done(cl, c, ok, bench_now_ns());
  }
}

/* At a window's edge: everyone's CPU time, and the server's stats. */
static void on_edge(void *ctx, int which) {
  bench_th_client *cl = ctx;
  bench_cpu_snap_take(cl->pid, &cl->sn[which]);
  for (int k = 0; k < cl->nstats; k++)
    if (cl->stats[k].fd >= 0 && !cl->stats[k].busy)
      conn_send(cl, &cl->stats[k]);
}

static void on_event(void *ctx, void *ptr, uint32_t events) {
  bench_th_client *cl = ctx;
  bench_th_conn *c = ptr;
  if (c->fd < 0)
    return; /* closed by an earlier event of this round */
  if ((events & EPOLLOUT) && c->busy && c->sent < c->req_len && conn_flush(cl, c) != 0) {
    conn_failed(cl, c, "send");
    return;
  }
  if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
    if (c->ws)
      ws_readable(cl, c);
    else
      conn_readable(cl, c);
  }
}

static int outstanding(void *ctx) {
  const bench_th_client *cl = ctx;
  return cl->inflight + cl->stats_pending;
}

int bench_th_run(bench_th_client *cl, int port, pid_t pid, bench_cpu_snap sn[2], double warmup,
                 double seconds) {
  cl->port = port;
  if ((cl->ep = epoll_create1(EPOLL_CLOEXEC)) < 0) {
    say(cl, "epoll_create1: %s", strerror(errno));
    cl->errors++;
    return -1;
  }
  for (int i = 0; i < cl->N; i++)
    if (conn_open(cl, &cl->c[i]) != 0)
      return -1;
  for (int k = 0; k < cl->nstats; k++)
    if (conn_open(cl, &cl->stats[k]) != 0)
      return -1;
  cl->pid = pid;
  cl->sn = sn;
  cl->ws = bench_now_ns() + (int64_t)(warmup * 1e9);
  cl->we = cl->ws + (int64_t)(seconds * 1e9);
  if (cl->on_window != NULL)
    cl->on_window(cl->window_ctx, port, cl->ws, cl->we);
  for (int i = 0; i < cl->N; i++)
    conn_send(cl, &cl->c[i]);
  bench_loop l = {cl->ep, cl->ws, cl->we, INT64_C(60000000000), cl, on_edge, on_event, outstanding};
  int rc = bench_loop_run(&l);
  if (cl->on_window_end != NULL && cl->on_window != NULL)
    cl->on_window_end(cl->window_ctx);
  if (rc > 0) {
    say(cl, "%d requests still unanswered 60 s after the window", cl->inflight);
    cl->errors += cl->inflight;
  } else if (rc < 0) {
    say(cl, "epoll_wait: %s", strerror(errno));
    cl->errors++;
    return -1;
  }
  return 0;
}

void bench_th_serve(bench_th_client *cl, char *const argv[], const char *log, bench_cpu_snap sn[2],
                    double warmup, double seconds, int64_t *ok) {
  char err[400];
  pid_t pid;
  int port = bench_server_start(argv, log, "lithd", 10, &pid, err, sizeof err);
  if (port < 0) {
    say(cl, "%s", err);
    cl->errors++;
    return;
  }
  if (bench_th_run(cl, port, pid, sn, warmup, seconds) != 0)
    cl->errors++;
  bench_th_close(cl);
  for (int i = 0; i < cl->N; i++)
    ok[i] = cl->c[i].ok;
  if (bench_server_stop(pid, log, "lithd", err, sizeof err) != 0) {
    say(cl, "%s", err);
    cl->errors++;
  }
}

void bench_th_close(bench_th_client *cl) {
  for (int i = 0; cl->c && i < cl->N; i++)
    conn_close(&cl->c[i]);
  for (int k = 0; cl->stats && k < cl->nstats; k++)
    conn_close(&cl->stats[k]);
}

double bench_th_cmds_per_tx(const bench_th_client *cl) {
  uint64_t cmds = 0, batches = 0;
  for (int k = 0; k < cl->nstats; k++) {
    const bench_th_conn *c = &cl->stats[k];
    if (c->got != 2)
      return NAN;
    cmds += c->cmds[1] - c->cmds[0];
    batches += c->batches[1] - c->batches[0];
  }
  return batches ? (double)cmds / (double)batches : NAN;
}

void bench_th_free(bench_th_client *cl) {
  bench_th_close(cl);
  for (int i = 0; cl->c && i < cl->N; i++) {
    free(cl->c[i].req);
    free(cl->c[i].plain);
    free(cl->c[i].path);
  }
  for (int k = 0; cl->stats && k < cl->nstats; k++)
    free(cl->stats[k].req);
  if (cl->ep >= 0)
    close(cl->ep);
  cl->ep = -1;
  free(cl->c);
  free(cl->stats);
  cl->c = cl->stats = NULL;
  bench_lat_free(&cl->lat);
}
