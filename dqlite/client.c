/*
 * The blocking dqlite client: see client.h. The socket is non-blocking and
 * every wait is a poll() against the call's one deadline, set when the
 * call starts and shared by every frame of its answer, so no call blocks
 * longer than its deadline whatever the node does (a node that stops
 * mid-frame, or drips a ROWS part just within each timeout, gives
 * LITH_DQ_TIMEOUT, not a hung writer).
 *
 * What the node sends is checked before it is used: the body size against
 * LITH_DQ_MAX_BODY before allocating, the type against what the request
 * expects (or FAILURE), the body by wire.c's decoders. Any doubt drops the
 * connection: after a frame we could not parse we no longer know where the
 * next one starts.
 */
#include "client.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../lib/clock.h"

struct lith__dq_conn {
  int fd;
  int timeout_ms;
  lith__dq_buf out;
  uint8_t *body; /* the last answer's body, malloc'd */
  size_t nbody;
  lith__dq_header hdr;
  uint64_t code;
  char msg[512];
  char address[256];
  int64_t call_ms;          /* the running call's budget, for the timeout message */
  int in_cb;                /* inside lith__dq_query_each's on_rows */
  const atomic_int *cancel; /* lith__dq_set_cancel's, or NULL */
};

static int64_t now_ms(void) { return lith__now_ns() / 1000000; }

/* Record a client-side error (code 0) and return rc; IO, TIMEOUT and PROTO
 * drop the connection. */
static int fail(lith__dq_conn *c, int rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->msg, sizeof c->msg, fmt, ap);
  va_end(ap);
  c->code = 0;
  if (rc == LITH_DQ_IO || rc == LITH_DQ_TIMEOUT || rc == LITH_DQ_PROTO)
    lith__dq_disconnect(c);
  return rc;
}

lith__dq_conn *lith__dq_new(int timeout_ms) {
  lith__dq_conn *c = calloc(1, sizeof *c);
  if (c == NULL)
    return NULL;
  c->fd = -1;
  c->timeout_ms = timeout_ms > 0 ? timeout_ms : LITH_DQ_DEFAULT_TIMEOUT_MS;
  lith__dq_buf_init(&c->out);
  return c;
}

int lith__dq_set_timeout(lith__dq_conn *c, int timeout_ms) {
  int old = c->timeout_ms;
  c->timeout_ms = timeout_ms > 0 ? timeout_ms : LITH_DQ_DEFAULT_TIMEOUT_MS;
  return old;
}

void lith__dq_disconnect(lith__dq_conn *c) {
  if (c->fd >= 0)
    close(c->fd);
  c->fd = -1;
}

void lith__dq_close(lith__dq_conn *c) {
  if (c == NULL)
    return;
  lith__dq_disconnect(c);
  lith__dq_buf_free(&c->out);
  free(c->body);
  free(c);
}

int lith__dq_connected(const lith__dq_conn *c) { return c->fd >= 0; }
const char *lith__dq_address(const lith__dq_conn *c) { return c->address; }
uint64_t lith__dq_errcode(const lith__dq_conn *c) { return c->code; }
const char *lith__dq_errmsg(const lith__dq_conn *c) { return c->msg; }

void lith__dq_set_cancel(lith__dq_conn *c, const atomic_int *flag) { c->cancel = flag; }

static int cancelled(lith__dq_conn *c) {
  if (c->cancel == NULL || atomic_load(c->cancel) == 0)
    return 0;
  fail(c, LITH_DQ_STOPPED, "%s: cancelled", c->address);
  lith__dq_disconnect(c);
  return 1;
}

/* Wait until fd is ready for `events` or the deadline passes (or the
 * cancel flag is set: looked at every LITH_DQ_CANCEL_MS). */
static int wait_fd(lith__dq_conn *c, short events, int64_t deadline) {
  for (;;) {
    int64_t left = deadline - now_ms();
    if (cancelled(c))
      return LITH_DQ_STOPPED;
    if (left <= 0)
      return fail(c, LITH_DQ_TIMEOUT, "%s: no whole answer within %lld ms", c->address,
                  (long long)c->call_ms);
    if (c->cancel != NULL && left > LITH_DQ_CANCEL_MS)
      left = LITH_DQ_CANCEL_MS;
    struct pollfd p = {.fd = c->fd, .events = events};
    int n = poll(&p, 1, (int)left);
    if (n > 0)
      return LITH_DQ_OK;
    if (n < 0 && errno != EINTR)
      return fail(c, LITH_DQ_IO, "%s: poll: %s", c->address, strerror(errno));
  }
}

static int send_all(lith__dq_conn *c, const uint8_t *p, size_t n, int64_t deadline) {
  while (n > 0) {
    ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
    if (w > 0) {
      p += w;
      n -= (size_t)w;
      continue;
    }
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int rc = wait_fd(c, POLLOUT, deadline);
      if (rc != LITH_DQ_OK)
        return rc;
      continue;
    }
    return fail(c, LITH_DQ_IO, "%s: send: %s", c->address, strerror(errno));
  }
  return LITH_DQ_OK;
}

static int recv_all(lith__dq_conn *c, uint8_t *p, size_t n, int64_t deadline) {
  while (n > 0) {
    ssize_t r = recv(c->fd, p, n, 0);
    if (r > 0) {
      p += r;
      n -= (size_t)r;
      continue;
    }
    if (r == 0)
      return fail(c, LITH_DQ_IO, "%s: connection closed by the node", c->address);
    if (errno == EINTR)
      continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      int rc = wait_fd(c, POLLIN, deadline);
      if (rc != LITH_DQ_OK)
        return rc;
      continue;
    }
    return fail(c, LITH_DQ_IO, "%s: recv: %s", c->address, strerror(errno));
  }
  return LITH_DQ_OK;
}

/* Split "host:port" / "[v6]:port" into host and port. */
static int split_address(const char *address, char *host, size_t hostlen, char *port, size_t portlen) {
  const char *colon = strrchr(address, ':');
  if (colon == NULL || colon[1] == '\0' || strlen(colon + 1) >= portlen)
    return -1;
  const char *h = address;
  size_t hn = (size_t)(colon - address);
  if (hn >= 2 && h[0] == '[' && h[hn - 1] == ']') {
    h++;
    hn -= 2;
  }
  if (hn == 0 || hn >= hostlen)
    return -1;
  memcpy(host, h, hn);
  host[hn] = '\0';
  strcpy(port, colon + 1);
  return 0;
}

/* A non-blocking connect to one resolved address, bounded by the deadline. */
static int connect_one(lith__dq_conn *c, const struct addrinfo *ai, int64_t deadline) {
  c->fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
  if (c->fd < 0)
    return fail(c, LITH_DQ_IO, "%s: socket: %s", c->address, strerror(errno));
  if (connect(c->fd, ai->ai_addr, ai->ai_addrlen) != 0) {
    if (errno != EINPROGRESS)
      return fail(c, LITH_DQ_IO, "%s: connect: %s", c->address, strerror(errno));
    int rc = wait_fd(c, POLLOUT, deadline);
    if (rc != LITH_DQ_OK)
      return rc;
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0)
      return fail(c, LITH_DQ_IO, "%s: connect: %s", c->address, strerror(err ? err : errno));
  }
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return LITH_DQ_OK;
}

int lith__dq_connect(lith__dq_conn *c, const char *address) {
  char host[256], port[16];
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
  int64_t deadline = now_ms() + c->timeout_ms;
  int rc;
  if (c->in_cb)
    return fail(c, LITH_DQ_MISUSE, "a call on the connection from inside on_rows");
  c->call_ms = c->timeout_ms;
  lith__dq_disconnect(c);
  snprintf(c->address, sizeof c->address, "%s", address);
  if (split_address(address, host, sizeof host, port, sizeof port) != 0)
    return fail(c, LITH_DQ_MISUSE, "%s: not HOST:PORT", address);
  int gai = getaddrinfo(host, port, &hints, &res);
  if (gai != 0)
    return fail(c, LITH_DQ_IO, "%s: %s", address, gai_strerror(gai));
  rc = LITH_DQ_IO;
  for (const struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
    rc = connect_one(c, ai, deadline);
    if (rc == LITH_DQ_OK || rc == LITH_DQ_TIMEOUT)
      break;
  }
  freeaddrinfo(res);
  if (rc != LITH_DQ_OK)
    return rc;
  lith__dq_buf_reset(&c->out);
  lith__dq_put_handshake(&c->out);
  if (c->out.err)
    return fail(c, c->out.err, "out of memory");
  return send_all(c, c->out.data, c->out.len, deadline);
}

/* Read one message into c->body / c->hdr. */
static int read_message(lith__dq_conn *c, int64_t deadline) {
  uint8_t h[8];
  int rc = recv_all(c, h, 8, deadline);
  if (rc != LITH_DQ_OK)
    return rc;
  lith__dq_header_decode(h, &c->hdr);
  size_t n = (size_t)c->hdr.words * 8;
  if (n > LITH_DQ_MAX_BODY) {
    lith__dq_disconnect(c); /* the body is not read: out of step */
    return fail(c, LITH_DQ_TOOBIG, "%s: an answer frame of %zu bytes (limit %u)", c->address, n,
                LITH_DQ_MAX_BODY);
  }
  free(c->body);
  c->body = malloc(n ? n : 1);
  c->nbody = n;
  if (c->body == NULL)
    return fail(c, LITH_DQ_IO, "%s: out of memory for an answer of %zu bytes", c->address, n);
  return recv_all(c, c->body, n, deadline);
}

/* The answer is FAILURE: keep its code and message. A query's FAILURE is
 * read from its end (wire.h: libdqlite 1.11.1 puts the rows of the part it
 * was filling before them). */
static int take_failure(lith__dq_conn *c, int query) {
  uint64_t code;
  const char *msg;
  int rc = query ? lith__dq_decode_failure_tail(c->body, c->nbody, &code, &msg)
                 : lith__dq_decode_failure(c->body, c->nbody, &code, &msg);
  if (rc != LITH_DQ_OK)
    return fail(c, LITH_DQ_PROTO, "%s: a malformed FAILURE", c->address);
  c->code = code;
  snprintf(c->msg, sizeof c->msg, "%s", msg);
  return LITH_DQ_FAILURE;
}

/* Send the request built in c->out and read the answer, which must be of
 * type `expect` or FAILURE, by `deadline`. */
static int roundtrip_until(lith__dq_conn *c, int build_rc, int expect, int64_t deadline) {
  if (c->in_cb)
    return fail(c, LITH_DQ_MISUSE, "a call on the connection from inside on_rows");
  if (build_rc != LITH_DQ_OK)
    return fail(c, build_rc, build_rc == LITH_DQ_NOMEM ? "out of memory" : "bad request arguments");
  if (c->fd < 0)
    return fail(c, LITH_DQ_IO, "not connected");
  int64_t now = now_ms();
  c->call_ms = deadline - now;
  if (deadline <= now)
    return fail(c, LITH_DQ_TIMEOUT, "%s: the deadline had passed before the request", c->address);
  int rc = send_all(c, c->out.data, c->out.len, deadline);
  if (rc == LITH_DQ_OK)
    rc = read_message(c, deadline);
  if (rc != LITH_DQ_OK)
    return rc;
  if (c->hdr.type == LITH_DQ_RES_FAILURE)
    return take_failure(c, expect == LITH_DQ_RES_ROWS);
  if (c->hdr.type != expect)
    return fail(c, LITH_DQ_PROTO, "%s: answer type %d to a request expecting %d", c->address, c->hdr.type,
                expect);
  c->code = 0;
  c->msg[0] = '\0';
  return LITH_DQ_OK;
}

/* The same with the handle's timeout from now. */
static int roundtrip(lith__dq_conn *c, int build_rc, int expect) {
  return roundtrip_until(c, build_rc, expect, now_ms() + c->timeout_ms);
}

/* A decoder's verdict on c->body. */
static int decoded(lith__dq_conn *c, int rc) {
  if (rc == LITH_DQ_OK)
    return rc;
  if (rc == LITH_DQ_NOMEM)
    return fail(c, LITH_DQ_IO, "%s: out of memory decoding an answer", c->address);
  return fail(c, LITH_DQ_PROTO, "%s: a malformed answer of type %d", c->address, c->hdr.type);
}

#define BUILD(call) (lith__dq_buf_reset(&c->out), (call))

int lith__dq_leader(lith__dq_conn *c, uint64_t *id, const char **address) {
  int rc = roundtrip(c, BUILD(lith__dq_req_leader(&c->out)), LITH_DQ_RES_SERVER);
  if (rc != LITH_DQ_OK)
    return rc;
  return decoded(c, lith__dq_decode_server(c->body, c->nbody, id, address));
}

int lith__dq_client(lith__dq_conn *c, uint64_t id, uint64_t *heartbeat_timeout) {
  uint64_t hb;
  int rc = roundtrip(c, BUILD(lith__dq_req_client(&c->out, id)), LITH_DQ_RES_WELCOME);
  if (rc != LITH_DQ_OK)
    return rc;
  rc = decoded(c, lith__dq_decode_welcome(c->body, c->nbody, &hb));
  if (rc == LITH_DQ_OK && heartbeat_timeout != NULL)
    *heartbeat_timeout = hb;
  return rc;
}

int lith__dq_open(lith__dq_conn *c, const char *name, uint32_t *db) {
  int rc = roundtrip(c, BUILD(lith__dq_req_open(&c->out, name, 0, "")), LITH_DQ_RES_DB);
  if (rc != LITH_DQ_OK)
    return rc;
  return decoded(c, lith__dq_decode_db(c->body, c->nbody, db));
}

int lith__dq_open_writer(lith__dq_conn *c, const char *name, uint32_t *db) {
  int rc = lith__dq_open(c, name, db);
  if (rc == LITH_DQ_OK)
    rc = lith__dq_exec_sql(c, *db, "PRAGMA cache_spill = OFF", NULL, 0, NULL);
  return rc;
}

int lith__dq_prepare(lith__dq_conn *c, uint32_t db, const char *sql, uint32_t *stmt, uint64_t *nparams) {
  uint32_t dbid;
  uint64_t np;
  int rc = roundtrip(c, BUILD(lith__dq_req_prepare(&c->out, db, sql)), LITH_DQ_RES_STMT);
  if (rc != LITH_DQ_OK)
    return rc;
  rc = decoded(c, lith__dq_decode_stmt(c->body, c->nbody, &dbid, stmt, &np));
  if (rc == LITH_DQ_OK && nparams != NULL)
    *nparams = np;
  return rc;
}

static int result(lith__dq_conn *c, int rc, lith__dq_result *out) {
  lith__dq_result r;
  if (rc != LITH_DQ_OK)
    return rc;
  rc = decoded(c, lith__dq_decode_result(c->body, c->nbody, &r.last_insert_id, &r.rows_affected));
  if (rc == LITH_DQ_OK && out != NULL)
    *out = r;
  return rc;
}

int lith__dq_exec(lith__dq_conn *c, uint32_t db, uint32_t stmt, const lith__dq_value *params, unsigned n,
                  lith__dq_result *out) {
  int rc = roundtrip(c, BUILD(lith__dq_req_exec(&c->out, LITH_DQ_REQ_EXEC, db, stmt, params, n)),
                     LITH_DQ_RES_RESULT);
  return result(c, rc, out);
}

int lith__dq_exec_sql(lith__dq_conn *c, uint32_t db, const char *sql, const lith__dq_value *params,
                      unsigned n, lith__dq_result *out) {
  int rc = roundtrip(c, BUILD(lith__dq_req_sql(&c->out, LITH_DQ_REQ_EXEC_SQL, db, sql, params, n)),
                     LITH_DQ_RES_RESULT);
  return result(c, rc, out);
}

/* ---- Results ---- */

static uint64_t le64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

/* Read and throw away n bytes of the current frame's body; the last 8 go
 * to last[] (zeros if the body is shorter). */
static int skip_body(lith__dq_conn *c, size_t n, uint8_t last[8], int64_t deadline) {
  uint8_t buf[16384];
  memset(last, 0, 8);
  while (n > 0) {
    size_t k = sizeof buf;
    if (n < k)
      k = n;
    int rc = recv_all(c, buf, k, deadline);
    if (rc != LITH_DQ_OK)
      return rc;
    n -= k;
    if (k >= 8) {
      memcpy(last, buf + k - 8, 8);
    } else {
      memmove(last, last + k, 8 - k);
      memcpy(last + 8 - k, buf, k);
    }
  }
  return LITH_DQ_OK;
}

/* End a query whose last frame was a PART (client.h, "The stop"): send
 * INTERRUPT, then read and discard the rest of the result (ROWS parts up to
 * a DONE, or a FAILURE) and the answer to INTERRUPT (EMPTY, or FAILURE),
 * within LITH_DQ_DRAIN_MAX bytes and the deadline. 1: the connection is in
 * step again; 0: it is closed. c->msg is left to the caller. */
static int end_query(lith__dq_conn *c, uint32_t db, int64_t deadline) {
  size_t budget = LITH_DQ_DRAIN_MAX;
  int open = 1; /* the result still has frames to come */
  lith__dq_buf_reset(&c->out);
  int rc = lith__dq_req_interrupt(&c->out, db);
  if (rc == LITH_DQ_OK)
    rc = send_all(c, c->out.data, c->out.len, deadline);
  while (rc == LITH_DQ_OK) {
    uint8_t h[8], last[8];
    lith__dq_header hdr;
    if ((rc = recv_all(c, h, 8, deadline)) != LITH_DQ_OK)
      break;
    lith__dq_header_decode(h, &hdr);
    size_t n = (size_t)hdr.words * 8;
    if (n > budget)
      break;
    budget -= n;
    if ((rc = skip_body(c, n, last, deadline)) != LITH_DQ_OK)
      break;
    if (open && hdr.type == LITH_DQ_RES_ROWS && n >= 8 && le64(last) == LITH_DQ_ROWS_PART)
      continue;
    if (open && ((hdr.type == LITH_DQ_RES_ROWS && n >= 8 && le64(last) == LITH_DQ_ROWS_DONE) ||
                 hdr.type == LITH_DQ_RES_FAILURE)) {
      open = 0;
      continue;
    }
    if (!open && (hdr.type == LITH_DQ_RES_EMPTY || hdr.type == LITH_DQ_RES_FAILURE))
      return 1;
    break; /* a frame that fits nothing: out of step */
  }
  lith__dq_disconnect(c);
  return 0;
}

/* Where a query's parts go: gathered into `all` (lith__dq_query,
 * _query_sql), or handed to on_rows one by one (lith__dq_query_each). */
typedef struct sink {
  lith__dq_rows *all;
  size_t bytes; /* frames gathered so far, headers included */
  lith__dq_rows_cb cb;
  void *arg;
} sink;

/* Send the query built in c->out and take its parts until DONE, a
 * FAILURE, a stop, or the deadline. */
static int run_query(lith__dq_conn *c, int build_rc, uint32_t db, int64_t deadline, sink *s) {
  int done = 0;
  if (s->all != NULL)
    lith__dq_rows_free(s->all);
  int rc = roundtrip_until(c, build_rc, LITH_DQ_RES_ROWS, deadline);
  while (rc == LITH_DQ_OK) {
    uint8_t *body = c->body;
    size_t n = c->nbody;
    c->body = NULL;
    if (s->all != NULL) {
      rc = lith__dq_rows_decode(s->all, body, n, &done);
      if (rc != LITH_DQ_OK) {
        rc = decoded(c, rc);
        break;
      }
      s->bytes += n + 8;
      if (s->bytes > LITH_DQ_MAX_ANSWER) {
        int kept = done || end_query(c, db, deadline);
        rc = fail(c, LITH_DQ_TOOBIG, "%s: a result of more than %u bytes (LITH_DQ_MAX_ANSWER)%s", c->address,
                  LITH_DQ_MAX_ANSWER, kept ? "" : "; the connection was closed");
        break;
      }
    } else {
      lith__dq_rows part;
      lith__dq_rows_init(&part);
      rc = lith__dq_rows_decode(&part, body, n, &done);
      if (rc != LITH_DQ_OK) {
        rc = decoded(c, rc);
        break;
      }
      c->in_cb = 1;
      int stop = s->cb(&part, s->arg);
      c->in_cb = 0;
      lith__dq_rows_free(&part);
      if (stop) {
        int kept = done || end_query(c, db, deadline);
        rc = fail(c, LITH_DQ_STOPPED, "the query was stopped by its callback%s",
                  kept ? "" : "; the connection was closed (the node kept sending)");
        break;
      }
    }
    if (done)
      return LITH_DQ_OK;
    rc = read_message(c, deadline);
    if (rc == LITH_DQ_OK && c->hdr.type == LITH_DQ_RES_FAILURE)
      rc = take_failure(c, 1);
    else if (rc == LITH_DQ_OK && c->hdr.type != LITH_DQ_RES_ROWS)
      rc = fail(c, LITH_DQ_PROTO, "%s: answer type %d within rows", c->address, c->hdr.type);
  }
  if (s->all != NULL)
    lith__dq_rows_free(s->all);
  return rc;
}

int lith__dq_query(lith__dq_conn *c, uint32_t db, uint32_t stmt, const lith__dq_value *params, unsigned n,
                   lith__dq_rows *out) {
  sink s = {.all = out};
  return run_query(c, BUILD(lith__dq_req_exec(&c->out, LITH_DQ_REQ_QUERY, db, stmt, params, n)), db,
                   now_ms() + c->timeout_ms, &s);
}

int lith__dq_query_sql(lith__dq_conn *c, uint32_t db, const char *sql, const lith__dq_value *params,
                       unsigned n, lith__dq_rows *out) {
  sink s = {.all = out};
  return run_query(c, BUILD(lith__dq_req_sql(&c->out, LITH_DQ_REQ_QUERY_SQL, db, sql, params, n)), db,
                   now_ms() + c->timeout_ms, &s);
}

int lith__dq_max_run(lith__dq_conn *c, uint32_t db, int want_ms, int *bound_ms) {
  lith__dq_rows rows;
  lith__dq_value v = lith__dq_int(want_ms);
  lith__dq_rows_init(&rows);
  int rc = lith__dq_query_sql(c, db, "SELECT lith_max_run_ms(?)", &v, 1, &rows);
  if (rc == LITH_DQ_OK &&
      (rows.nrows != 1 || rows.ncols != 1 || lith__dq_rows_at(&rows, 0, 0)->type != LITH_DQ_INTEGER))
    rc = LITH_DQ_PROTO;
  if (rc == LITH_DQ_OK)
    *bound_ms = (int)lith__dq_rows_at(&rows, 0, 0)->i;
  lith__dq_rows_free(&rows);
  return rc;
}

int lith__dq_query_each(lith__dq_conn *c, uint32_t db, const char *sql, const lith__dq_value *params,
                        unsigned n, lith__dq_rows_cb on_rows, void *arg, int64_t deadline_ms) {
  sink s = {.cb = on_rows, .arg = arg};
  if (on_rows == NULL)
    return fail(c, LITH_DQ_MISUSE, "lith__dq_query_each without on_rows");
  if (deadline_ms == 0)
    deadline_ms = now_ms() + c->timeout_ms;
  return run_query(c, BUILD(lith__dq_req_sql(&c->out, LITH_DQ_REQ_QUERY_SQL, db, sql, params, n)), db,
                   deadline_ms, &s);
}

static int empty(lith__dq_conn *c, int rc) {
  if (rc != LITH_DQ_OK)
    return rc;
  return decoded(c, lith__dq_decode_empty(c->body, c->nbody));
}

int lith__dq_finalize(lith__dq_conn *c, uint32_t db, uint32_t stmt) {
  return empty(c, roundtrip(c, BUILD(lith__dq_req_finalize(&c->out, db, stmt)), LITH_DQ_RES_EMPTY));
}

int lith__dq_add(lith__dq_conn *c, uint64_t id, const char *address) {
  return empty(c, roundtrip(c, BUILD(lith__dq_req_add(&c->out, id, address)), LITH_DQ_RES_EMPTY));
}

int lith__dq_assign(lith__dq_conn *c, uint64_t id, uint64_t role) {
  return empty(c, roundtrip(c, BUILD(lith__dq_req_assign(&c->out, id, role)), LITH_DQ_RES_EMPTY));
}

int lith__dq_remove(lith__dq_conn *c, uint64_t id) {
  return empty(c, roundtrip(c, BUILD(lith__dq_req_remove(&c->out, id)), LITH_DQ_RES_EMPTY));
}

int lith__dq_cluster(lith__dq_conn *c, lith__dq_servers *out) {
  out->n = 0;
  out->v = NULL;
  int rc = roundtrip(c, BUILD(lith__dq_req_cluster(&c->out, 1)), LITH_DQ_RES_SERVERS);
  if (rc != LITH_DQ_OK)
    return rc;
  return decoded(c, lith__dq_decode_servers(c->body, c->nbody, 1, out));
}

int lith__dq_connect_leader(lith__dq_conn *c, const char *addresses, int timeout_ms) {
  int64_t deadline = now_ms() + timeout_ms;
  char list[1024], leader[256];
  int rc = LITH_DQ_MISUSE;
  int backoff = LITH_DQ_BACKOFF_MIN_MS;
  if (c->in_cb)
    return fail(c, LITH_DQ_MISUSE, "a call on the connection from inside on_rows");
  if (snprintf(list, sizeof list, "%s", addresses) >= (int)sizeof list)
    return fail(c, LITH_DQ_MISUSE, "address list too long");
  for (;;) {
    char *save = NULL;
    for (char *a = strtok_r(list, ",", &save); a != NULL; a = strtok_r(NULL, ",", &save)) {
      uint64_t id;
      const char *addr;
      rc = lith__dq_connect(c, a);
      if (rc == LITH_DQ_OK)
        rc = lith__dq_leader(c, &id, &addr);
      if (rc != LITH_DQ_OK)
        continue;
      if (addr[0] == '\0') {
        rc = fail(c, LITH_DQ_IO, "%s knows no leader", a);
        continue;
      }
      if (strcmp(addr, a) == 0)
        return LITH_DQ_OK;
      snprintf(leader, sizeof leader, "%s", addr);
      rc = lith__dq_connect(c, leader);
      if (rc == LITH_DQ_OK)
        return rc;
    }
    int64_t left = deadline - now_ms();
    if (left <= 0)
      return rc;
    if (cancelled(c))
      return LITH_DQ_STOPPED;
    snprintf(list, sizeof list, "%s", addresses); /* strtok_r wrote into it */
    /* Back off: a node answering garbage, or none knowing a leader, is not
     * asked again in a tight loop (client.h). */
    int wait = backoff < left ? backoff : (int)left;
    if (c->cancel != NULL && wait > LITH_DQ_CANCEL_MS)
      wait = LITH_DQ_CANCEL_MS; /* the flag is looked at again on the next round */
    struct timespec ts = {wait / 1000, (long)(wait % 1000) * 1000000};
    nanosleep(&ts, NULL);
    backoff = backoff >= LITH_DQ_BACKOFF_MAX_MS / 2 ? LITH_DQ_BACKOFF_MAX_MS : backoff * 2;
  }
}

/* ---- Dump ---- */

/* Read what is there, at least one byte and at most n, by the deadline. */
static int recv_some(lith__dq_conn *c, uint8_t *p, size_t n, size_t *got, int64_t deadline) {
  for (;;) {
    ssize_t r = recv(c->fd, p, n, 0);
    if (r > 0) {
      *got = (size_t)r;
      return LITH_DQ_OK;
    }
    if (r == 0)
      return fail(c, LITH_DQ_IO, "%s: connection closed by the node", c->address);
    if (errno == EINTR)
      continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return fail(c, LITH_DQ_IO, "%s: recv: %s", c->address, strerror(errno));
    int rc = wait_fd(c, POLLIN, deadline);
    if (rc != LITH_DQ_OK)
      return rc;
  }
}

static int write_out(lith__dq_conn *c, int fd, const uint8_t *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      int err = w < 0 ? errno : EIO;
      fail(c, LITH_DQ_IO, "writing the dump of %s: %s", c->address, strerror(err));
      c->code = (uint64_t)err; /* client.h: the one LITH_DQ_IO with a code */
      return LITH_DQ_IO;
    }
    p += w;
    n -= (size_t)w;
  }
  return LITH_DQ_OK;
}

/* The end of one wait of a dump: the call's deadline, or the handle's
 * timeout from now if sooner (client.h: a node that sends nothing for that
 * long is gone, however long the whole may take). */
static int64_t dump_wait(const lith__dq_conn *c, int64_t deadline) {
  int64_t gap = now_ms() + c->timeout_ms;
  return gap < deadline ? gap : deadline;
}

/* rc of a dump's wait: a TIMEOUT before the deadline said as a silence. */
static int dump_silence(lith__dq_conn *c, int rc, int64_t deadline) {
  if (rc == LITH_DQ_TIMEOUT && now_ms() < deadline)
    return fail(c, LITH_DQ_TIMEOUT, "%s: nothing from the node for %d ms in the middle of its dump",
                c->address, c->timeout_ms);
  return rc;
}

/* One event of the FILES decoder: the files must be NAME and NAME-wal. */
static int dump_event(lith__dq_conn *c, const lith__dq_files *f, int ev, const char *name, const int fds[2],
                      uint64_t sizes[2], const uint8_t *data, size_t len) {
  if (ev == LITH_DQ_FILES_BEGIN) {
    size_t n = strlen(name);
    int ok = f->count == 2 && strncmp(f->name, name, n) == 0 &&
             strcmp(f->name + n, f->index == 0 ? "" : "-wal") == 0;
    if (!ok)
      return fail(c, LITH_DQ_PROTO, "%s: a dump of %llu files, file %llu named \"%.64s\" (not %s, %s-wal)",
                  c->address, (unsigned long long)f->count, (unsigned long long)f->index, f->name, name,
                  name);
    return LITH_DQ_OK;
  }
  if (ev == LITH_DQ_FILES_DATA)
    return write_out(c, fds[f->index], data, len);
  if (ev == LITH_DQ_FILES_END && sizes != NULL)
    sizes[f->index] = f->size;
  return LITH_DQ_OK;
}

int lith__dq_dump(lith__dq_conn *c, const char *name, const int fds[2], uint64_t sizes[2], uint64_t max_bytes,
                  int64_t deadline_ms) {
  enum { PIECE = 64 * 1024 };
  uint8_t h[8], *buf = NULL;
  lith__dq_files f;
  int rc, done = 0;
  if (c->in_cb)
    return fail(c, LITH_DQ_MISUSE, "a call on the connection from inside on_rows");
  if (sizes != NULL)
    sizes[0] = sizes[1] = 0;
  if (deadline_ms == 0)
    deadline_ms = now_ms() + c->timeout_ms;
  rc = BUILD(lith__dq_req_dump(&c->out, name));
  if (rc != LITH_DQ_OK)
    return fail(c, rc, rc == LITH_DQ_NOMEM ? "out of memory" : "bad request arguments");
  if (c->fd < 0)
    return fail(c, LITH_DQ_IO, "not connected");
  c->call_ms = deadline_ms - now_ms();
  if (c->call_ms <= 0)
    return fail(c, LITH_DQ_TIMEOUT, "%s: the deadline had passed before the request", c->address);
  if ((rc = send_all(c, c->out.data, c->out.len, deadline_ms)) != LITH_DQ_OK)
    return rc;
  if ((rc = recv_all(c, h, 8, dump_wait(c, deadline_ms))) != LITH_DQ_OK)
    return dump_silence(c, rc, deadline_ms);
  lith__dq_header_decode(h, &c->hdr);
  uint64_t body = (uint64_t)c->hdr.words * 8;
  if (c->hdr.type == LITH_DQ_RES_FAILURE) { /* the count word comes first: read from its end */
    if (body > LITH_DQ_MAX_BODY) {
      lith__dq_disconnect(c); /* the body is not read: out of step */
      return fail(c, LITH_DQ_TOOBIG, "%s: a FAILURE of %llu bytes", c->address, (unsigned long long)body);
    }
    free(c->body);
    c->nbody = (size_t)body;
    if ((c->body = malloc(c->nbody ? c->nbody : 1)) == NULL)
      return fail(c, LITH_DQ_IO, "%s: out of memory for an answer of %zu bytes", c->address, c->nbody);
    if ((rc = recv_all(c, c->body, c->nbody, deadline_ms)) != LITH_DQ_OK)
      return rc;
    return take_failure(c, 1);
  }
  if (c->hdr.type != LITH_DQ_RES_FILES)
    return fail(c, LITH_DQ_PROTO, "%s: answer type %d to DUMP", c->address, c->hdr.type);
  if (body > max_bytes) {
    lith__dq_disconnect(c); /* the body is not read: out of step */
    return fail(c, LITH_DQ_TOOBIG, "%s: a dump of %llu bytes (the limit: %llu)", c->address,
                (unsigned long long)body, (unsigned long long)max_bytes);
  }
  if ((buf = malloc(PIECE)) == NULL) {
    lith__dq_disconnect(c);
    return fail(c, LITH_DQ_NOMEM, "%s: out of memory", c->address);
  }
  lith__dq_files_init(&f, body);
  uint64_t unread = body;
  while (!done) {
    size_t got = 0, off = 0;
    if (unread > 0) {
      rc = recv_some(c, buf, unread < PIECE ? (size_t)unread : PIECE, &got, dump_wait(c, deadline_ms));
      if (rc != LITH_DQ_OK) {
        rc = dump_silence(c, rc, deadline_ms);
        goto out;
      }
      unread -= got;
    }
    for (;;) {
      size_t used, len;
      const uint8_t *data;
      int ev;
      if (lith__dq_files_next(&f, buf + off, got - off, &used, &ev, &data, &len) != LITH_DQ_OK) {
        rc = fail(c, LITH_DQ_PROTO, "%s: a malformed FILES answer", c->address);
        goto out;
      }
      off += used;
      if (ev == LITH_DQ_FILES_NEED)
        break;
      if (ev == LITH_DQ_FILES_DONE) {
        done = 1;
        break;
      }
      if ((rc = dump_event(c, &f, ev, name, fds, sizes, data, len)) != LITH_DQ_OK)
        goto out;
    }
    if (!done && unread == 0) { /* cannot be: the decoder checks what the body holds */
      rc = fail(c, LITH_DQ_PROTO, "%s: a FILES answer ended early", c->address);
      goto out;
    }
  }
  if (f.count != 2) { /* an empty list */
    rc = fail(c, LITH_DQ_PROTO, "%s: a dump of %llu files", c->address, (unsigned long long)f.count);
    goto out;
  }
  /* What follows the files (a later schema's fields): read, not kept. */
  uint8_t last[8];
  if ((rc = skip_body(c, (size_t)unread, last, deadline_ms)) != LITH_DQ_OK)
    goto out;
  c->code = 0;
  c->msg[0] = '\0';
out:
  free(buf);
  return rc;
}
