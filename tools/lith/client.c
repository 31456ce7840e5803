/*
 * lith client — one HTTP/1.1 request per connection (see client.h).
 *
 * Design:
 *   - The socket is non-blocking from its creation; every wait (connect,
 *     send, receive) is a poll() bounded by what is left of the request's
 *     single deadline, kept by the h1c_conn that later reads the answer, so
 *     a stuck server costs at most the timeout, whatever stage it sticks in.
 *   - Reading the answer (framing, limits, 1xx, the messages) is
 *     http/h1client.c's, shared with lithd's tests, the benchmarks and the
 *     kanban example's test; this file adds the endpoints, connecting and
 *     sending, and maps h1client's codes to LITHC_*.
 *   - A send that fails because the server closed early (EPIPE, ECONNRESET)
 *     still reads: a server may answer a request it refuses (413) before
 *     reading all of it.
 *   - https: OpenSSL over the same non-blocking socket, each of its waits
 *     the same poll() under the same deadline (conn_io below). The
 *     certificate is verified, always: against --cacert's file when given
 *     (it replaces the system's CAs, as curl's does), else OpenSSL's
 *     default paths, which SSL_CERT_FILE and SSL_CERT_DIR override; and the
 *     URL's host must be one of its names (or, for an address, one of its
 *     addresses). No way to turn that off: a CLI that sends a token must
 *     know whom it sends it to. TLS 1.2 at least.
 */
#include "client.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "lith.h" /* LITH_VERSION */

/* ---- Errors ------------------------------------------------------------- */

static int fail(char *err, size_t errsz, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errsz, int code, const char *fmt, ...) {
  if (err != NULL && errsz > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errsz, fmt, ap);
    va_end(ap);
  }
  return code;
}

/* ---- Endpoints ---------------------------------------------------------- */

int lithc_endpoint_url(lithc_endpoint *ep, const char *url, char *err, size_t errsz) {
  const char *p, *auth_end, *host, *host_end, *port_s = NULL;
  size_t hlen, plen;
  long port = 80;

  memset(ep, 0, sizeof *ep);
  if (strncasecmp(url, "https://", 8) == 0) {
    ep->tls = 1;
    port = 443;
    p = url + 8;
  } else if (strncasecmp(url, "http://", 7) == 0) {
    p = url + 7;
  } else {
    return fail(err, errsz, LITHC_BAD_ARG, "%s: the URL must look like http://HOST:PORT or https://HOST:PORT",
                url);
  }
  auth_end = p + strcspn(p, "/?#");
  if (memchr(p, '@', (size_t)(auth_end - p)) != NULL)
    return fail(err, errsz, LITHC_BAD_ARG, "%s: user names in the URL are not supported", url);

  if (*p == '[') { /* [IPv6] */
    host = p + 1;
    host_end = memchr(host, ']', (size_t)(auth_end - host));
    if (host_end == NULL)
      return fail(err, errsz, LITHC_BAD_ARG, "%s: '[' without ']' in the host", url);
    if (host_end + 1 < auth_end) {
      if (host_end[1] != ':')
        return fail(err, errsz, LITHC_BAD_ARG, "%s: junk after the IPv6 address", url);
      port_s = host_end + 2;
    }
  } else {
    host = p;
    host_end = memchr(p, ':', (size_t)(auth_end - p));
    if (host_end != NULL)
      port_s = host_end + 1;
    else
      host_end = auth_end;
  }
  hlen = (size_t)(host_end - host);
  if (hlen == 0)
    return fail(err, errsz, LITHC_BAD_ARG, "%s: no host in the URL", url);
  if (hlen >= sizeof ep->host)
    return fail(err, errsz, LITHC_BAD_ARG, "%s: host too long", url);
  memcpy(ep->host, host, hlen);
  ep->host[hlen] = '\0';

  if (port_s != NULL) {
    const char *q;
    if (port_s == auth_end)
      return fail(err, errsz, LITHC_BAD_ARG, "%s: empty port", url);
    port = 0;
    for (q = port_s; q < auth_end; q++) {
      if (!isdigit((unsigned char)*q) || port > 65535)
        return fail(err, errsz, LITHC_BAD_ARG, "%s: the port must be a number 1-65535", url);
      port = port * 10 + (*q - '0');
    }
    if (port < 1 || port > 65535)
      return fail(err, errsz, LITHC_BAD_ARG, "%s: the port must be a number 1-65535", url);
  }
  ep->port = (int)port;

  /* An optional path prefix, for a lithd behind a reverse proxy. */
  if (strpbrk(auth_end, "?#") != NULL)
    return fail(err, errsz, LITHC_BAD_ARG, "%s: no query or fragment allowed in the URL", url);
  plen = strlen(auth_end);
  while (plen > 0 && auth_end[plen - 1] == '/')
    plen--;
  if (plen >= sizeof ep->base_path)
    return fail(err, errsz, LITHC_BAD_ARG, "%s: path prefix too long", url);
  memcpy(ep->base_path, auth_end, plen);
  ep->base_path[plen] = '\0';
  return LITHC_OK;
}

int lithc_endpoint_unix(lithc_endpoint *ep, const char *path, char *err, size_t errsz) {
  size_t n = strlen(path);
  memset(ep, 0, sizeof *ep);
  if (n == 0)
    return fail(err, errsz, LITHC_BAD_ARG, "the Unix socket path is empty");
  if (n >= sizeof ep->unix_path)
    return fail(err, errsz, LITHC_BAD_ARG, "%s: a Unix socket path must be shorter than %zu bytes", path,
                sizeof ep->unix_path);
  memcpy(ep->unix_path, path, n + 1);
  ep->is_unix = 1;
  return LITHC_OK;
}

const char *lithc_endpoint_name(const lithc_endpoint *ep, char *buf, size_t bufsz) {
  if (ep->is_unix) {
    snprintf(buf, bufsz, "unix:%s", ep->unix_path);
  } else {
    int v6 = strchr(ep->host, ':') != NULL;
    snprintf(buf, bufsz, "%s://%s%s%s:%d%s", ep->tls ? "https" : "http", v6 ? "[" : "", ep->host,
             v6 ? "]" : "", ep->port, ep->base_path);
  }
  return buf;
}

/* ---- The connection ----------------------------------------------------- */

/* h1client's codes as ours. */
static int from_h1c(int rc) {
  switch (rc) {
  case H1C_OK: return LITHC_OK;
  case H1C_TIMEOUT: return LITHC_TIMEOUT;
  case H1C_IO: return LITHC_IO;
  case H1C_NOMEM: return LITHC_NOMEM;
  default: return LITHC_PROTOCOL;
  }
}

/* Wait until c->fd is ready for `events`. LITHC_OK, or LITHC_TIMEOUT/LITHC_IO. */
static int wait_for(h1c_conn *c, short events, const char *what) {
  return from_h1c(h1c_wait(c, events, what));
}

/* Connect c->fd (created here) to one address; LITHC_OK or an error. */
static int connect_addr(h1c_conn *c, int family, const struct sockaddr *sa, socklen_t salen) {
  int e = 0;
  socklen_t elen = sizeof e;
  int rc;

  c->fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c->fd < 0)
    return fail(c->err, c->errsz, LITHC_CONNECT, "socket: %s", strerror(errno));
  if (family != AF_UNIX) {
    int one = 1; /* the head and the body go as two writes: no Nagle delay */
    (void)setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  if (connect(c->fd, sa, salen) == 0)
    return LITHC_OK;
  if (errno != EINPROGRESS && errno != EINTR) {
    e = errno;
    goto refused;
  }
  rc = wait_for(c, POLLOUT, "connecting to");
  if (rc != LITHC_OK)
    goto out;
  if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &elen) != 0)
    e = errno;
  if (e == 0)
    return LITHC_OK;
refused:
  if (e == EAGAIN && family == AF_UNIX) /* a Unix socket's backlog is full */
    rc = fail(c->err, c->errsz, LITHC_CONNECT, "cannot connect to %s: the server is overloaded", c->peer);
  else
    rc = fail(c->err, c->errsz, LITHC_CONNECT, "cannot connect to %s: %s", c->peer, strerror(e));
out:
  close(c->fd);
  c->fd = -1;
  return rc;
}

static int connect_unix(h1c_conn *c, const lithc_endpoint *ep) {
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  memcpy(a.sun_path, ep->unix_path, strlen(ep->unix_path) + 1); /* fits: lithc_endpoint_unix */
  return connect_addr(c, AF_UNIX, (const struct sockaddr *)&a, sizeof a);
}

/* Try every address the name resolves to, in order; the last error wins. */
static int connect_tcp(h1c_conn *c, const lithc_endpoint *ep) {
  struct addrinfo hints, *res = NULL, *ai;
  char port[16];
  int rc, g;

  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  snprintf(port, sizeof port, "%d", ep->port);
  g = getaddrinfo(ep->host, port, &hints, &res);
  if (g != 0)
    return fail(c->err, c->errsz, LITHC_CONNECT, "cannot resolve %s: %s", ep->host,
                g == EAI_SYSTEM ? strerror(errno) : gai_strerror(g));
  rc = fail(c->err, c->errsz, LITHC_CONNECT, "cannot connect to %s: no address", c->peer);
  for (ai = res; ai != NULL; ai = ai->ai_next) {
    rc = connect_addr(c, ai->ai_family, ai->ai_addr, ai->ai_addrlen);
    if (rc == LITHC_OK || rc == LITHC_TIMEOUT)
      break;
  }
  freeaddrinfo(res);
  return rc;
}

/* ---- TLS ------------------------------------------------------------------ */

/* A connection's transport: c's socket (and c's deadline), with TLS over
 * it for https (ssl not NULL). */
typedef struct conn_io {
  h1c_conn *c;
  SSL_CTX *ctx;
  SSL *ssl;
} conn_io;

static void io_free(conn_io *io) {
  SSL_free(io->ssl);
  SSL_CTX_free(io->ctx);
  io->ssl = NULL;
  io->ctx = NULL;
}

/* OpenSSL's reason for the last error (its queue emptied). */
static const char *ssl_why(char *buf, size_t cap) {
  unsigned long e = ERR_peek_last_error();
  const char *r = e ? ERR_reason_error_string(e) : NULL;
  snprintf(buf, cap, "%s", r != NULL ? r : e ? "OpenSSL error" : "the connection closed");
  ERR_clear_error();
  return buf;
}

/* After an SSL call returned r: wait for what it wants (LITHC_OK to retry,
 * or the wait's error), or -1 when it wants nothing: a real failure. */
static int tls_wait(conn_io *io, int r, const char *what) {
  int e = SSL_get_error(io->ssl, r);
  if (e == SSL_ERROR_WANT_READ)
    return wait_for(io->c, POLLIN, what);
  if (e == SSL_ERROR_WANT_WRITE)
    return wait_for(io->c, POLLOUT, what);
  return -1;
}

/* The TLS handshake on c's connected socket, verifying the server as the
 * design comment says. LITHC_OK, or LITHC_CONNECT (nothing was sent),
 * LITHC_BAD_ARG (ca_file unusable), LITHC_TIMEOUT. */
static int tls_start(conn_io *io, const lithc_endpoint *ep, const char *ca_file) {
  h1c_conn *c = io->c;
  char why[256];
  unsigned char addr[16];
  ERR_clear_error();
  if ((io->ctx = SSL_CTX_new(TLS_client_method())) == NULL)
    return fail(c->err, c->errsz, LITHC_NOMEM, "TLS: %s", ssl_why(why, sizeof why));
  SSL_CTX_set_min_proto_version(io->ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(io->ctx, SSL_VERIFY_PEER, NULL);
  /* lithd's answers carry their length: a close without close_notify
   * cannot pass a cut body off as whole (h1client sees it short) */
  SSL_CTX_set_options(io->ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
  if (ca_file != NULL) {
    FILE *f = fopen(ca_file, "r"); /* errno's words, clearer than OpenSSL's */
    if (f == NULL)
      return fail(c->err, c->errsz, LITHC_BAD_ARG, "--cacert %s: %s", ca_file, strerror(errno));
    fclose(f);
    if (SSL_CTX_load_verify_locations(io->ctx, ca_file, NULL) != 1)
      return fail(c->err, c->errsz, LITHC_BAD_ARG,
                  "--cacert %s: not a readable file of PEM certificates (%s)", ca_file,
                  ssl_why(why, sizeof why));
  } else if (SSL_CTX_set_default_verify_paths(io->ctx) != 1) {
    return fail(c->err, c->errsz, LITHC_CONNECT, "TLS: cannot load the system's CA certificates (%s)",
                ssl_why(why, sizeof why));
  }
  if ((io->ssl = SSL_new(io->ctx)) == NULL || SSL_set_fd(io->ssl, c->fd) != 1)
    return fail(c->err, c->errsz, LITHC_NOMEM, "TLS: %s", ssl_why(why, sizeof why));
  if (inet_pton(AF_INET, ep->host, addr) == 1 || inet_pton(AF_INET6, ep->host, addr) == 1) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(io->ssl), ep->host); /* an address: no SNI */
  } else {
    SSL_set_tlsext_host_name(io->ssl, ep->host);
    SSL_set1_host(io->ssl, ep->host);
  }
  for (;;) {
    int r = SSL_connect(io->ssl), w;
    if (r == 1)
      return LITHC_OK;
    if ((w = tls_wait(io, r, "the TLS handshake with")) == -1)
      break;
    if (w != LITHC_OK)
      return w;
  }
  long v = SSL_get_verify_result(io->ssl);
  if (v != X509_V_OK) {
    ERR_clear_error();
    return fail(c->err, c->errsz, LITHC_CONNECT,
                "cannot verify the certificate of %s: %s (name the CA that signed it with --cacert FILE or "
                "SSL_CERT_FILE)",
                c->peer, X509_verify_cert_error_string(v));
  }
  return fail(c->err, c->errsz, LITHC_CONNECT, "TLS handshake with %s failed: %s (does it serve https?)",
              c->peer, ssl_why(why, sizeof why));
}

/* Receive into buf[0..n): > 0 bytes, 0 at the end, or -1 with errno set
 * (ETIMEDOUT once c's deadline passed; the message is then in c->err). */
static ssize_t io_recv(conn_io *io, char *buf, size_t n) {
  for (;;) {
    if (io->ssl == NULL) {
      ssize_t k = recv(io->c->fd, buf, n, MSG_DONTWAIT);
      if (k >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
        return k;
      if (errno == EINTR)
        continue;
      if (wait_for(io->c, POLLIN, "reading the answer from") != LITHC_OK) {
        errno = ETIMEDOUT;
        return -1;
      }
      continue;
    }
    /* TLS: read first, OpenSSL may hold decrypted bytes the socket no
     * longer shows */
    ERR_clear_error();
    int k = SSL_read(io->ssl, buf, n > INT_MAX ? INT_MAX : (int)n);
    if (k > 0)
      return k;
    int e = SSL_get_error(io->ssl, k);
    if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && errno == 0) ||
        (e == SSL_ERROR_SSL && ERR_GET_REASON(ERR_peek_last_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING)) {
      ERR_clear_error();
      return 0;
    }
    int w = tls_wait(io, k, "reading the answer from");
    if (w == -1) {
      ERR_clear_error();
      errno = e == SSL_ERROR_SYSCALL && errno != 0 ? errno : EPROTO;
      return -1;
    }
    if (w != LITHC_OK) {
      errno = ETIMEDOUT;
      return -1;
    }
  }
}

/* h1client's source for an https answer. */
static ssize_t tls_src(void *ctx, char *buf, size_t n) { return io_recv(ctx, buf, n); }

/* Send len bytes. On EPIPE/ECONNRESET returns LITHC_IO with *closed set. */
static int send_all(conn_io *io, const char *p, size_t len, int *closed) {
  h1c_conn *c = io->c;
  while (len > 0 && io->ssl != NULL) {
    ERR_clear_error();
    int n = SSL_write(io->ssl, p, len > INT_MAX ? INT_MAX : (int)len);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
      continue;
    }
    int w = tls_wait(io, n, "sending the request to");
    if (w == -1) {
      ERR_clear_error();
      *closed = 1;
      return fail(c->err, c->errsz, LITHC_IO, "%s closed the connection while the request was sent", c->peer);
    }
    if (w != LITHC_OK)
      return w;
  }
  while (len > 0) {
    ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int rc = wait_for(c, POLLOUT, "sending the request to");
      if (rc != LITHC_OK)
        return rc;
      continue;
    }
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
      *closed = 1;
    return fail(c->err, c->errsz, LITHC_IO, "%s closed the connection while the request was sent", c->peer);
  }
  return LITHC_OK;
}

/* ---- The request -------------------------------------------------------- */

/* The request's head, malloc'd, or NULL (message in err). */
static char *build_head(const lithc_endpoint *ep, const lithc_request *req, size_t *len, char *err,
                        size_t errsz) {
  char host[300];
  char clen[64] = "";
  const char *tok = req->token;
  int n;
  char *head;
  size_t size;

  if (ep->is_unix) {
    snprintf(host, sizeof host, "localhost");
  } else {
    int v6 = strchr(ep->host, ':') != NULL;
    if (ep->port == (ep->tls ? 443 : 80))
      snprintf(host, sizeof host, "%s%s%s", v6 ? "[" : "", ep->host, v6 ? "]" : "");
    else
      snprintf(host, sizeof host, "%s%s%s:%d", v6 ? "[" : "", ep->host, v6 ? "]" : "", ep->port);
  }
  if (req->body != NULL || strcmp(req->method, "POST") == 0 || strcmp(req->method, "PUT") == 0)
    snprintf(clen, sizeof clen, "Content-Type: application/json\r\nContent-Length: %zu\r\n",
             req->body != NULL ? req->body_len : 0);
  n = snprintf(NULL, 0,
               "%s %s%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: lith/%s\r\n"
               "Accept: application/json\r\nConnection: close\r\n%s%s%s%s\r\n",
               req->method, ep->base_path, req->path, host, LITH_VERSION,
               tok != NULL ? "Authorization: Bearer " : "", tok != NULL ? tok : "", tok != NULL ? "\r\n" : "",
               clen);
  if (n < 0) {
    fail(err, errsz, LITHC_NOMEM, "cannot format the request");
    return NULL;
  }
  size = (size_t)n + 1;
  head = malloc(size);
  if (head == NULL) {
    fail(err, errsz, LITHC_NOMEM, "out of memory");
    return NULL;
  }
  snprintf(head, size,
           "%s %s%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: lith/%s\r\n"
           "Accept: application/json\r\nConnection: close\r\n%s%s%s%s\r\n",
           req->method, ep->base_path, req->path, host, LITH_VERSION,
           tok != NULL ? "Authorization: Bearer " : "", tok != NULL ? tok : "", tok != NULL ? "\r\n" : "",
           clen);
  *len = (size_t)n;
  return head;
}

int lithc_request_send(const lithc_endpoint *ep, const lithc_request *req, lithc_response *resp, char *err,
                       size_t errsz) {
  h1c_conn c;
  char peer[512];
  char *head = NULL;
  size_t head_len = 0;
  int closed = 0;
  int rc, send_rc = LITHC_OK;
  char send_err[256] = "";

  conn_io io = {&c, NULL, NULL};

  memset(resp, 0, sizeof *resp);
  h1c_init(&c, -1, lithc_endpoint_name(ep, peer, sizeof peer), err, errsz);

  if (req->path == NULL || req->path[0] != '/' || strpbrk(req->path, " \r\n") != NULL)
    return fail(err, errsz, LITHC_BAD_ARG, "bad request path");
  if (req->token != NULL && (req->token[0] == '\0' || strpbrk(req->token, "\r\n") != NULL))
    return fail(err, errsz, LITHC_BAD_ARG, "the token is empty or holds a line break");
  head = build_head(ep, req, &head_len, err, errsz);
  if (head == NULL)
    return LITHC_NOMEM;

  h1c_deadline(&c, req->timeout_ms);

  rc = ep->is_unix ? connect_unix(&c, ep) : connect_tcp(&c, ep);
  if (rc == LITHC_OK && ep->tls)
    rc = tls_start(&io, ep, req->ca_file);
  if (rc != LITHC_OK)
    goto out;

  rc = send_all(&io, head, head_len, &closed);
  if (rc == LITHC_OK && req->body != NULL && req->body_len > 0)
    rc = send_all(&io, req->body, req->body_len, &closed);
  if (rc == LITHC_OK) {
    c.sent = 1;
  } else if (closed) {
    /* The server may have answered before reading everything: try. */
    send_rc = rc;
    snprintf(send_err, sizeof send_err, "%s", err != NULL ? err : "");
    c.sent = 1; /* part of it went out */
  } else {
    goto out;
  }

  if (io.ssl != NULL) {
    h1c_conn tc;
    h1c_init_source(&tc, tls_src, &io, peer, err, errsz);
    tc.sent = 1;
    rc = from_h1c(h1c_read(&tc, req->method, resp));
    h1c_release(&tc);
  } else {
    rc = from_h1c(h1c_read(&c, req->method, resp));
  }
  if (rc != LITHC_OK && send_rc != LITHC_OK) {
    rc = send_rc; /* no answer after all: the send's error says more */
    if (err != NULL && errsz > 0)
      snprintf(err, errsz, "%s", send_err);
  }

out:
  if (rc != LITHC_OK)
    lithc_response_free(resp);
  io_free(&io);
  if (c.fd >= 0)
    close(c.fd);
  h1c_release(&c);
  free(head);
  return rc;
}

int lithc_response_read(int fd, const char *method, const char *peer, int timeout_ms, lithc_response *resp,
                        char *err, size_t errsz) {
  h1c_conn c;
  int rc;
  h1c_init(&c, fd, peer, err, errsz);
  h1c_deadline(&c, timeout_ms);
  c.sent = 1;
  rc = from_h1c(h1c_read(&c, method, resp));
  h1c_release(&c);
  return rc;
}

int lithc_response_read_from(lithc_source src, void *ctx, const char *method, const char *peer,
                             lithc_response *resp, char *err, size_t errsz) {
  h1c_conn c;
  int rc;
  h1c_init_source(&c, src, ctx, peer, err, errsz);
  c.sent = 1;
  rc = from_h1c(h1c_read(&c, method, resp));
  h1c_release(&c);
  return rc;
}

const char *lithc_response_header(const lithc_response *resp, const char *name, size_t *len) {
  return h1c_response_header(resp, name, len);
}

void lithc_response_free(lithc_response *resp) { h1c_response_free(resp); }

/* ---- Downloads ----------------------------------------------------------- */

/* What a download's error answer is read from: the bytes already received,
 * then the socket (each wait bounded by the connection's timeout). */
struct replay {
  conn_io *io;
  const char *buf;
  size_t len, pos;
};

static ssize_t replay_src(void *ctx, char *buf, size_t n) {
  struct replay *r = ctx;
  if (r->pos < r->len) {
    size_t k = r->len - r->pos < n ? r->len - r->pos : n;
    memcpy(buf, r->buf + r->pos, k);
    r->pos += k;
    return (ssize_t)k;
  }
  h1c_deadline(r->io->c, r->io->c->timeout_ms);
  return io_recv(r->io, buf, n);
}

/* Receive into buf[0..cap) after waiting at most the timeout: > 0 bytes, 0
 * at the end, or < 0 with a message. */
static ssize_t recv_some(conn_io *io, char *buf, size_t cap) {
  h1c_conn *c = io->c;
  h1c_deadline(c, c->timeout_ms);
  ssize_t n = io_recv(io, buf, cap);
  if (n < 0 && errno != ETIMEDOUT) /* a timeout's message is in c->err */
    fail(c->err, c->errsz, LITHC_IO, "reading from %s: %s", c->peer, strerror(errno));
  return n;
}

static int write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0)
      return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

#define DOWNLOAD_PIECE (64 * 1024)

int lithc_download(const lithc_endpoint *ep, const lithc_request *req, int out_fd, lithc_response *resp,
                   long long *bytes, char *err, size_t errsz) {
  h1c_conn c;
  h1c_head h;
  char peer[512];
  char *head = NULL, *buf = NULL;
  size_t head_len = 0, len = 0;
  const char *why = NULL;
  int closed = 0, rc, prc;
  conn_io io = {&c, NULL, NULL};

  memset(resp, 0, sizeof *resp);
  *bytes = 0;
  h1c_init(&c, -1, lithc_endpoint_name(ep, peer, sizeof peer), err, errsz);
  if (req->path == NULL || req->path[0] != '/' || strpbrk(req->path, " \r\n") != NULL)
    return fail(err, errsz, LITHC_BAD_ARG, "bad request path");
  if (req->token != NULL && (req->token[0] == '\0' || strpbrk(req->token, "\r\n") != NULL))
    return fail(err, errsz, LITHC_BAD_ARG, "the token is empty or holds a line break");
  if ((head = build_head(ep, req, &head_len, err, errsz)) == NULL)
    return LITHC_NOMEM;
  if ((buf = malloc(DOWNLOAD_PIECE)) == NULL) {
    rc = fail(err, errsz, LITHC_NOMEM, "out of memory");
    goto out;
  }
  h1c_deadline(&c, req->timeout_ms);
  rc = ep->is_unix ? connect_unix(&c, ep) : connect_tcp(&c, ep);
  if (rc == LITHC_OK && ep->tls)
    rc = tls_start(&io, ep, req->ca_file);
  if (rc == LITHC_OK)
    rc = send_all(&io, head, head_len, &closed);
  if (rc != LITHC_OK)
    goto out;
  c.sent = 1;

  /* The head, by hand: a 200's body must not be gathered in memory. */
  do {
    ssize_t n;
    if (len == DOWNLOAD_PIECE) {
      rc = fail(err, errsz, LITHC_PROTOCOL, "%s sent an answer head larger than %d bytes", peer,
                DOWNLOAD_PIECE);
      goto out;
    }
    if ((n = recv_some(&io, buf + len, DOWNLOAD_PIECE - len)) <= 0) {
      rc = n == 0 ? fail(err, errsz, LITHC_IO, "%s closed the connection before answering", peer)
                  : LITHC_TIMEOUT;
      goto out;
    }
    len += (size_t)n;
  } while ((prc = h1c_parse_head(buf, len, req->method, &h, NULL, 0, &why)) == H1C_MORE);

  if (prc != H1C_OK || h.status != 200) {
    /* An error (or something unexpected): read whole, as any answer. */
    struct replay r = {&io, buf, len, 0};
    h1c_conn c2;
    h1c_init_source(&c2, replay_src, &r, peer, err, errsz);
    c2.sent = 1;
    rc = from_h1c(h1c_read(&c2, req->method, resp));
    h1c_release(&c2);
    goto out;
  }
  if (h.body != H1C_BODY_LENGTH) {
    rc = fail(err, errsz, LITHC_PROTOCOL, "%s sent a download without Content-Length", peer);
    goto out;
  }
  /* The head for the caller (status and headers), the body to out_fd. */
  resp->status = h.status;
  resp->head = malloc(h.head_len + 1);
  resp->headers = calloc(h.n_headers + 1, sizeof *resp->headers);
  resp->body = calloc(1, 1);
  if (resp->head == NULL || resp->headers == NULL || resp->body == NULL) {
    rc = fail(err, errsz, LITHC_NOMEM, "out of memory");
    goto out;
  }
  memcpy(resp->head, buf, h.head_len);
  resp->head[h.head_len] = '\0';
  h1c_parse_head(resp->head, h.head_len, req->method, &h, resp->headers, h.n_headers + 1, &why);
  resp->n_headers = h.n_headers;
  for (size_t have = len - h.head_len;;) {
    if (have > 0 && write_all(out_fd, buf + (len - have), have) != 0) {
      rc = fail(err, errsz, LITHC_IO, "writing the download: %s", strerror(errno));
      goto out;
    }
    *bytes += (long long)have;
    if ((size_t)*bytes >= h.length)
      break;
    size_t want = h.length - (size_t)*bytes < DOWNLOAD_PIECE ? h.length - (size_t)*bytes : DOWNLOAD_PIECE;
    ssize_t n = recv_some(&io, buf, want);
    if (n <= 0) {
      rc = n == 0 ? fail(err, errsz, LITHC_IO, "%s closed the connection after %lld of %zu bytes", peer,
                         *bytes, h.length)
                  : LITHC_TIMEOUT;
      goto out;
    }
    len = (size_t)n;
    have = len;
  }
  rc = (size_t)*bytes == h.length
           ? LITHC_OK
           : fail(err, errsz, LITHC_PROTOCOL, "%s sent more than its Content-Length", peer);
out:
  if (rc != LITHC_OK)
    lithc_response_free(resp);
  io_free(&io);
  if (c.fd >= 0)
    close(c.fd);
  h1c_release(&c);
  free(buf);
  free(head);
  return rc;
}
