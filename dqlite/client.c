/*
 * The blocking dqlite client: see client.h. The socket is non-blocking and
 * every wait is a poll() against the call's deadline, so no call blocks
 * longer than the handle's timeout whatever the node does (a node that
 * stops mid-frame gives LITH_DQ_TIMEOUT, not a hung writer).
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

/* Wait until fd is ready for `events` or the deadline passes. */
static int wait_fd(lith__dq_conn *c, short events, int64_t deadline) {
  for (;;) {
    int64_t left = deadline - now_ms();
    if (left <= 0)
      return fail(c, LITH_DQ_TIMEOUT, "%s: no answer within %d ms", c->address, c->timeout_ms);
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
  if (n > LITH_DQ_MAX_BODY)
    return fail(c, LITH_DQ_PROTO, "%s: an answer of %zu bytes (limit %u)", c->address, n, LITH_DQ_MAX_BODY);
  free(c->body);
  c->body = malloc(n ? n : 1);
  c->nbody = n;
  if (c->body == NULL)
    return fail(c, LITH_DQ_IO, "%s: out of memory for an answer of %zu bytes", c->address, n);
  return recv_all(c, c->body, n, deadline);
}

/* The answer is FAILURE: keep its code and message. */
static int take_failure(lith__dq_conn *c) {
  uint64_t code;
  const char *msg;
  if (lith__dq_decode_failure(c->body, c->nbody, &code, &msg) != LITH_DQ_OK)
    return fail(c, LITH_DQ_PROTO, "%s: a malformed FAILURE", c->address);
  c->code = code;
  snprintf(c->msg, sizeof c->msg, "%s", msg);
  return LITH_DQ_FAILURE;
}

/* Send the request built in c->out and read the answer, which must be of
 * type `expect` or FAILURE. */
static int roundtrip(lith__dq_conn *c, int build_rc, int expect) {
  if (build_rc != LITH_DQ_OK)
    return fail(c, build_rc, build_rc == LITH_DQ_NOMEM ? "out of memory" : "bad request arguments");
  if (c->fd < 0)
    return fail(c, LITH_DQ_IO, "not connected");
  int64_t deadline = now_ms() + c->timeout_ms;
  int rc = send_all(c, c->out.data, c->out.len, deadline);
  if (rc == LITH_DQ_OK)
    rc = read_message(c, deadline);
  if (rc != LITH_DQ_OK)
    return rc;
  if (c->hdr.type == LITH_DQ_RES_FAILURE)
    return take_failure(c);
  if (c->hdr.type != expect)
    return fail(c, LITH_DQ_PROTO, "%s: answer type %d to a request expecting %d", c->address, c->hdr.type,
                expect);
  c->code = 0;
  c->msg[0] = '\0';
  return LITH_DQ_OK;
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

/* The first ROWS answer has been read by roundtrip; read the parts that
 * follow until DONE. A FAILURE may come instead of a later part. */
static int rows(lith__dq_conn *c, int rc, lith__dq_rows *out) {
  int done = 0;
  lith__dq_rows_free(out);
  while (rc == LITH_DQ_OK) {
    uint8_t *body = c->body;
    c->body = NULL;
    rc = lith__dq_rows_decode(out, body, c->nbody, &done);
    if (rc != LITH_DQ_OK) {
      rc = decoded(c, rc);
      break;
    }
    if (done)
      return LITH_DQ_OK;
    rc = read_message(c, now_ms() + c->timeout_ms);
    if (rc == LITH_DQ_OK && c->hdr.type == LITH_DQ_RES_FAILURE)
      rc = take_failure(c);
    else if (rc == LITH_DQ_OK && c->hdr.type != LITH_DQ_RES_ROWS)
      rc = fail(c, LITH_DQ_PROTO, "%s: answer type %d within rows", c->address, c->hdr.type);
  }
  lith__dq_rows_free(out);
  return rc;
}

int lith__dq_query(lith__dq_conn *c, uint32_t db, uint32_t stmt, const lith__dq_value *params, unsigned n,
                   lith__dq_rows *out) {
  int rc = roundtrip(c, BUILD(lith__dq_req_exec(&c->out, LITH_DQ_REQ_QUERY, db, stmt, params, n)),
                     LITH_DQ_RES_ROWS);
  return rows(c, rc, out);
}

int lith__dq_query_sql(lith__dq_conn *c, uint32_t db, const char *sql, const lith__dq_value *params,
                       unsigned n, lith__dq_rows *out) {
  int rc = roundtrip(c, BUILD(lith__dq_req_sql(&c->out, LITH_DQ_REQ_QUERY_SQL, db, sql, params, n)),
                     LITH_DQ_RES_ROWS);
  return rows(c, rc, out);
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
    if (now_ms() >= deadline)
      return rc;
    snprintf(list, sizeof list, "%s", addresses); /* strtok_r wrote into it */
    struct timespec ts = {0, 50 * 1000000};
    nanosleep(&ts, NULL);
  }
}
