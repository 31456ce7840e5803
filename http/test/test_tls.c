/*
 * TLS (http/tls.c): a server with a certificate answers HTTP/1.1 and HTTP/2
 * (by ALPN) over TLS 1.2+, refuses to be created with a missing, broken or
 * mismatched certificate or key, and closes, without harm to the others, a
 * connection that sends garbage or plain HTTP or stalls in its handshake.
 * The certificates come from tlsgen.c; the client is OpenSSL's, verifying
 * the server against the test CA as a real client does.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "helper.h"
#include "tlsgen.h"

static char dir[64], dir2[96];
static char ca[128], cert[128], key[128], other_key[128];
static char ca2[128], cert2[128], key2[128]; /* another CA's (the reload test) */

#define TIMEOUT_MS 400 /* the request timeout of the stall test's server */

static int tls_setup(void **state) {
  ht_tls_cert = cert;
  ht_tls_key = key;
  return setup(state);
}

static int tls_setup_short(void **state) {
  ht_request_timeout_ms = TIMEOUT_MS;
  int rc = tls_setup(state);
  ht_request_timeout_ms = 0;
  return rc;
}

/* A client context trusting the CA in ca_file only. */
static SSL_CTX *client_ctx_ca(const char *ca_file) {
  SSL_CTX *c = SSL_CTX_new(TLS_client_method());
  assert_non_null(c);
  assert_int_equal(SSL_CTX_load_verify_locations(c, ca_file, NULL), 1);
  SSL_CTX_set_verify(c, SSL_VERIFY_PEER, NULL);
  return c;
}

/* A client context trusting the test CA only; `alpn` a wire-format list
 * (NULL: none offered). */
static SSL_CTX *client_ctx(const char *alpn, size_t alpn_len) {
  SSL_CTX *c = SSL_CTX_new(TLS_client_method());
  assert_non_null(c);
  assert_int_equal(SSL_CTX_load_verify_locations(c, ca, NULL), 1);
  SSL_CTX_set_verify(c, SSL_VERIFY_PEER, NULL);
  if (alpn)
    assert_int_equal(SSL_CTX_set_alpn_protos(c, (const unsigned char *)alpn, (unsigned)alpn_len), 0);
  return c;
}

/* A verified TLS connection to the fixture's port, or NULL if the
 * handshake failed. */
static SSL *tls_connect(SSL_CTX *c, int port, int *fdp) {
  int fd = tcp_connect(port);
  SSL *s = SSL_new(c);
  assert_non_null(s);
  SSL_set_fd(s, fd);
  SSL_set1_host(s, "localhost");
  SSL_set_tlsext_host_name(s, "localhost");
  *fdp = fd;
  if (SSL_connect(s) != 1) {
    ERR_clear_error();
    SSL_free(s);
    close(fd);
    return NULL;
  }
  return s;
}

static void ssl_send(SSL *s, const void *p, size_t n) { assert_int_equal(SSL_write(s, p, (int)n), (int)n); }

/* Read until the peer closes or `want` appears; returns what came. */
static size_t ssl_read_until(SSL *s, char *buf, size_t cap, const char *want) {
  size_t n = 0;
  while (n < cap - 1) {
    int r = SSL_read(s, buf + n, (int)(cap - 1 - n));
    if (r <= 0)
      break;
    n += (size_t)r;
    buf[n] = '\0';
    if (want && strstr(buf, want))
      break;
  }
  buf[n] = '\0';
  return n;
}

/* One GET /hello over HTTP/1.1 on a new verified connection. */
static void get_hello(int port) {
  SSL_CTX *c = client_ctx("\x08http/1.1", 9);
  int fd;
  SSL *s = tls_connect(c, port, &fd);
  assert_non_null(s);
  assert_true(SSL_version(s) >= TLS1_2_VERSION);
  const unsigned char *proto;
  unsigned len;
  SSL_get0_alpn_selected(s, &proto, &len);
  assert_int_equal(len, 8);
  assert_memory_equal(proto, "http/1.1", 8);
  const char *req = "GET /hello HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
  ssl_send(s, req, strlen(req));
  char buf[4096];
  ssl_read_until(s, buf, sizeof buf, NULL);
  assert_true(strncmp(buf, "HTTP/1.1 200", 12) == 0);
  assert_non_null(strstr(buf, "\r\n\r\nhello"));
  SSL_free(s);
  close(fd);
  SSL_CTX_free(c);
}

static void test_tls_http1(void **state) {
  fx *f = *state;
  get_hello(f->port);
  assert_int_equal(atomic_load(&f->hello_runs), 1);
  /* no ALPN offered: HTTP/1.1 */
  SSL_CTX *c = client_ctx(NULL, 0);
  int fd;
  SSL *s = tls_connect(c, f->port, &fd);
  assert_non_null(s);
  const char *req = "GET /hello HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
  ssl_send(s, req, strlen(req));
  char buf[4096];
  ssl_read_until(s, buf, sizeof buf, NULL);
  assert_true(strncmp(buf, "HTTP/1.1 200", 12) == 0);
  SSL_free(s);
  close(fd);
  SSL_CTX_free(c);
}

/* An HTTP/2 frame over TLS. */
static void h2_frame(SSL *s, int type, int flags, unsigned stream, const void *p, size_t n) {
  unsigned char h[9] = {
      (unsigned char)(n >> 16),      (unsigned char)(n >> 8),      (unsigned char)n,
      (unsigned char)type,           (unsigned char)flags,         (unsigned char)(stream >> 24),
      (unsigned char)(stream >> 16), (unsigned char)(stream >> 8), (unsigned char)stream};
  ssl_send(s, h, 9);
  if (n)
    ssl_send(s, p, n);
}

static int ssl_read_full(SSL *s, unsigned char *p, size_t n) {
  size_t got = 0;
  while (got < n) {
    int r = SSL_read(s, p + got, (int)(n - got));
    if (r <= 0)
      return -1;
    got += (size_t)r;
  }
  return 0;
}

static void test_tls_http2_alpn(void **state) {
  fx *f = *state;
  SSL_CTX *c = client_ctx("\x02h2\x08http/1.1", 12);
  int fd;
  SSL *s = tls_connect(c, f->port, &fd);
  assert_non_null(s);
  const unsigned char *proto;
  unsigned len;
  SSL_get0_alpn_selected(s, &proto, &len);
  assert_int_equal(len, 2);
  assert_memory_equal(proto, "h2", 2);
  ssl_send(s, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);
  h2_frame(s, 4, 0, 0, NULL, 0); /* SETTINGS */
  /* HEADERS, END_STREAM|END_HEADERS: :method GET, :scheme https, :path
   * /hello, :authority localhost (HPACK: two indexed, two literals) */
  static const unsigned char hdrs[] = {0x82, 0x87, 0x44, 6,   '/', 'h', 'e', 'l', 'l', 'o', 0x41,
                                       9,    'l',  'o',  'c', 'a', 'l', 'h', 'o', 's', 't'};
  h2_frame(s, 1, 5, 1, hdrs, sizeof hdrs);
  int status_200 = 0, body = 0;
  unsigned char h[9], p[16384];
  while (!body) {
    assert_int_equal(ssl_read_full(s, h, 9), 0);
    size_t n = (size_t)h[0] << 16 | (size_t)h[1] << 8 | h[2];
    assert_true(n <= sizeof p);
    assert_int_equal(ssl_read_full(s, p, n), 0);
    unsigned stream = (unsigned)(h[5] & 0x7f) << 24 | (unsigned)h[6] << 16 | (unsigned)h[7] << 8 | h[8];
    if (h[3] == 1 && stream == 1)
      status_200 = n > 0 && p[0] == 0x88; /* :status 200, indexed */
    if (h[3] == 0 && stream == 1 && n == 5 && memcmp(p, "hello", 5) == 0)
      body = 1;
    if (h[3] == 4 && !(h[4] & 1))
      h2_frame(s, 4, 1, 0, NULL, 0); /* SETTINGS ACK */
  }
  assert_true(status_200);
  SSL_free(s);
  close(fd);
  SSL_CTX_free(c);
}

/* The peer closed fd (EOF or reset) within ms; bytes before (an alert)
 * are read and dropped. */
static int closed_within(int fd, int ms) {
  int64_t end = now_ms() + ms;
  char buf[4096];
  while (now_ms() < end) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, (int)(end - now_ms())) <= 0)
      continue;
    ssize_t r = recv(fd, buf, sizeof buf, 0);
    if (r == 0 || (r < 0 && errno == ECONNRESET))
      return 1;
  }
  return 0;
}

static void test_tls_refuses_garbage_and_plain_http(void **state) {
  fx *f = *state;
  /* plain HTTP on the TLS port */
  int fd = tcp_connect(f->port);
  send_str(fd, "GET /hello HTTP/1.1\r\nHost: localhost\r\n\r\n");
  assert_true(closed_within(fd, 2000));
  close(fd);
  /* bytes that are no TLS record */
  fd = tcp_connect(f->port);
  unsigned char junk[512];
  for (size_t i = 0; i < sizeof junk; i++)
    junk[i] = (unsigned char)(i * 7 + 3);
  send_all(fd, junk, sizeof junk);
  assert_true(closed_within(fd, 2000));
  close(fd);
  /* a record header announcing a handshake, then garbage */
  fd = tcp_connect(f->port);
  static const unsigned char bad_hello[] = {0x16, 0x03, 0x01, 0x00, 0x08, 0x01, 0x00,
                                            0x00, 0x04, 0xde, 0xad, 0xbe, 0xef};
  send_all(fd, bad_hello, sizeof bad_hello);
  assert_true(closed_within(fd, 2000));
  close(fd);
  assert_int_equal(atomic_load(&f->hello_runs), 0);
  /* and the server goes on serving */
  get_hello(f->port);
  lith_http_stats st;
  for (int i = 0; i < 100; i++) {
    on_loop(f, job_stats, &st);
    if (st.connections_open == 0)
      break;
    usleep(10000);
  }
  assert_int_equal(st.connections_open, 0);
  assert_int_equal(st.connections, 4);
}

static void test_tls_refuses_old_versions(void **state) {
  fx *f = *state;
  SSL_CTX *c = client_ctx(NULL, 0);
  SSL_CTX_set_security_level(c, 0); /* let this client offer TLS 1.1 at all */
  SSL_CTX_set_cipher_list(c, "DEFAULT:@SECLEVEL=0");
  SSL_CTX_set_min_proto_version(c, TLS1_VERSION);
  SSL_CTX_set_max_proto_version(c, TLS1_1_VERSION);
  int fd;
  assert_null(tls_connect(c, f->port, &fd));
  SSL_CTX_free(c);
  get_hello(f->port);
}

/* The first `n` bytes a client's handshake sends, then nothing more. */
static size_t client_hello(unsigned char *out, size_t cap) {
  SSL_CTX *c = client_ctx(NULL, 0);
  SSL *s = SSL_new(c);
  BIO *rb = BIO_new(BIO_s_mem()), *wb = BIO_new(BIO_s_mem());
  SSL_set_bio(s, rb, wb);
  assert_int_equal(SSL_connect(s), -1); /* wants to read the server's answer */
  size_t n = (size_t)BIO_read(wb, out, (int)cap);
  SSL_free(s);
  SSL_CTX_free(c);
  return n;
}

static void test_tls_stalled_handshake_is_cut(void **state) {
  fx *f = *state;
  unsigned char hello[4096];
  size_t n = client_hello(hello, sizeof hello);
  assert_true(n > 50);
  /* silent after connecting; half a ClientHello; a whole one and never the
   * rest: each is closed once the request timeout passed, not before */
  size_t sends[3] = {0, n / 2, n};
  for (int i = 0; i < 3; i++) {
    int fd = tcp_connect(f->port);
    int64_t t0 = now_ms();
    if (sends[i])
      send_all(fd, hello, sends[i]);
    assert_true(closed_within(fd, TIMEOUT_MS * 5));
    int64_t took = now_ms() - t0;
    assert_true(took >= TIMEOUT_MS - 50);
    close(fd);
  }
  get_hello(f->port);
}

/* The stop does not wait for handshakes: connections mid-handshake (none
 * of them a request) close at once, and the server stops long before the
 * request timeout (the default 10 s here) or the grace. */
static void test_tls_stop_closes_handshakes(void **state) {
  fx *f = *state;
  unsigned char hello[4096];
  size_t n = client_hello(hello, sizeof hello);
  int silent = tcp_connect(f->port), half = tcp_connect(f->port);
  send_all(half, hello, n / 2);
  usleep(100 * 1000); /* both accepted */
  int64_t t0 = now_ms();
  stop_args sa = {5000};
  on_loop(f, job_stop, &sa);
  assert_true(wait_for(&f->stopped, 1, 2000));
  assert_true(now_ms() - t0 < 2000);
  assert_true(closed_within(silent, 1000));
  assert_true(closed_within(half, 1000));
  close(silent);
  close(half);
}

/* Clients that complete the handshake and go at once, without reading what
 * the server sent after it (TLS 1.3's session tickets: the kernel then
 * resets the connection), or resetting it themselves: each connection is
 * freed, not left waiting for a write that cannot happen. */
static void test_tls_reset_after_handshake_is_freed(void **state) {
  fx *f = *state;
  SSL_CTX *c = client_ctx(NULL, 0);
  for (int i = 0; i < 20; i++) {
    int fd;
    SSL *s = tls_connect(c, f->port, &fd);
    assert_non_null(s);
    if (i % 2) {
      struct linger lg = {1, 0}; /* close resets */
      setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    }
    SSL_free(s);
    close(fd);
  }
  SSL_CTX_free(c);
  /* and clients that send a request (HTTP/1.1, HTTP/2) and reset at once */
  static const unsigned char hdrs[] = {0x82, 0x87, 0x44, 6,   '/', 'h', 'e', 'l', 'l', 'o', 0x41,
                                       9,    'l',  'o',  'c', 'a', 'l', 'h', 'o', 's', 't'};
  SSL_CTX *h1 = client_ctx("\x08http/1.1", 9), *h2 = client_ctx("\x02h2", 3);
  for (int i = 0; i < 20; i++) {
    int fd;
    SSL *s = tls_connect(i % 2 ? h2 : h1, f->port, &fd);
    assert_non_null(s);
    if (i % 2) {
      ssl_send(s, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);
      h2_frame(s, 4, 0, 0, NULL, 0);
      h2_frame(s, 1, 5, 1, hdrs, sizeof hdrs);
    } else {
      const char *req = "GET /hello HTTP/1.1\r\nHost: localhost\r\n\r\n";
      ssl_send(s, req, strlen(req));
    }
    if (i % 4 >= 2)
      usleep(2000); /* let some be answered first */
    struct linger lg = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    SSL_free(s);
    close(fd);
  }
  SSL_CTX_free(h1);
  SSL_CTX_free(h2);
  lith_http_stats st;
  for (int i = 0; i < 200; i++) {
    on_loop(f, job_stats, &st);
    if (st.connections_open == 0)
      break;
    usleep(10000);
  }
  assert_int_equal(st.connections_open, 0);
  assert_int_equal(st.connections, 40);
  get_hello(f->port);
}

/* A client that leaves while its request is held is noticed over TLS as
 * in cleartext (the layer watches the socket, not the bytes): on_gone,
 * and completing gives LITH_HTTP_GONE. */
static void test_tls_client_gone_while_held(void **state) {
  fx *f = *state;
  SSL_CTX *c = client_ctx("\x08http/1.1", 9);
  int fd;
  SSL *s = tls_connect(c, f->port, &fd);
  assert_non_null(s);
  const char *req = "POST /slow HTTP/1.1\r\nHost: localhost\r\nContent-Length: 4\r\n\r\ndata";
  ssl_send(s, req, strlen(req));
  assert_true(wait_for(&f->slow_runs, 1, 2000));
  SSL_free(s);
  close(fd);
  assert_true(wait_for(&f->gone_calls, 1, 2000));
  assert_true(wait_for(&f->late_done, 1, 2000));
  assert_int_equal(atomic_load(&f->late_rc), LITH_HTTP_GONE);
  assert_int_equal(atomic_load(&f->slow_body_ok), 1);
  SSL_CTX_free(c);
}

typedef struct reload_args {
  const char *cert, *key;
  int rc;
  char msg[512];
} reload_args;

static void job_reload(fx *f, void *arg) {
  reload_args *a = arg;
  a->rc = lith_http_tls_reload(f->srv, a->cert, a->key);
  snprintf(a->msg, sizeof a->msg, "%s", lith_http_errmsg());
}

/* One keep-alive GET /hello on s: 200 "hello". */
static void hello_on(SSL *s) {
  const char *req = "GET /hello HTTP/1.1\r\nHost: localhost\r\n\r\n";
  ssl_send(s, req, strlen(req));
  char buf[4096];
  ssl_read_until(s, buf, sizeof buf, "\r\n\r\nhello");
  assert_true(strncmp(buf, "HTTP/1.1 200", 12) == 0);
}

/* A renewed certificate: new connections get it, open ones keep theirs,
 * and a bad one changes nothing. */
static void test_tls_reload(void **state) {
  fx *f = *state;
  SSL_CTX *old_ca = client_ctx_ca(ca), *new_ca = client_ctx_ca(ca2);
  int fd_a, fd;
  SSL *a = tls_connect(old_ca, f->port, &fd_a);
  assert_non_null(a);
  hello_on(a);
  /* a bad pair: refused, the old certificate serves on */
  reload_args bad = {cert2, key, -1, ""};
  on_loop(f, job_reload, &bad);
  assert_int_equal(bad.rc, LITH_HTTP_ERROR);
  assert_non_null(strstr(bad.msg, key));
  reload_args missing = {"/nonexistent/cert.pem", key2, -1, ""};
  on_loop(f, job_reload, &missing);
  assert_int_equal(missing.rc, LITH_HTTP_ERROR);
  get_hello(f->port);
  /* the renewed one, another CA's: new connections get it */
  reload_args good = {cert2, key2, -1, ""};
  on_loop(f, job_reload, &good);
  assert_int_equal(good.rc, LITH_HTTP_OK);
  assert_null(tls_connect(old_ca, f->port, &fd));
  SSL *b = tls_connect(new_ca, f->port, &fd);
  assert_non_null(b);
  hello_on(b);
  SSL_free(b);
  close(fd);
  /* the connection opened before goes on with what it negotiated */
  hello_on(a);
  SSL_free(a);
  close(fd_a);
  SSL_CTX_free(old_ca);
  SSL_CTX_free(new_ca);
  assert_int_equal(atomic_load(&f->hello_runs), 4);
}

/* A connection accepted before a reload that sends its first byte after
 * it: h2o made its SSL from the context of the accept only then, so that
 * context must outlive the reload (freed at once, it crashed lithd on a
 * SIGHUP: a heap use-after-free in SSL_new). It gets the old certificate;
 * the ones after, the new one; and reloads close together past what is
 * kept are refused, the certificate before serving on. */
static void test_tls_reload_before_first_bytes(void **state) {
  fx *f = *state;
  SSL_CTX *old_ca = client_ctx_ca(ca), *new_ca = client_ctx_ca(ca2);
  int silent[3];
  for (int i = 0; i < 3; i++)
    silent[i] = tcp_connect(f->port);
  usleep(200 * 1000); /* accepted by the loop */
  reload_args good = {cert2, key2, -1, ""};
  on_loop(f, job_reload, &good);
  assert_int_equal(good.rc, LITH_HTTP_OK);
  for (int i = 0; i < 3; i++) {
    SSL *s = SSL_new(old_ca);
    assert_non_null(s);
    SSL_set_fd(s, silent[i]);
    SSL_set1_host(s, "localhost");
    SSL_set_tlsext_host_name(s, "localhost");
    assert_int_equal(SSL_connect(s), 1);
    hello_on(s);
    SSL_free(s);
    close(silent[i]);
  }
  int fd;
  SSL *b = tls_connect(new_ca, f->port, &fd);
  assert_non_null(b);
  hello_on(b);
  SSL_free(b);
  close(fd);
  /* LH_TLS_OLD more reloads at once: one is refused, nothing changes */
  int refused = 0;
  for (int i = 0; i < 9; i++) {
    reload_args again = {cert2, key2, -1, ""};
    on_loop(f, job_reload, &again);
    if (again.rc != LITH_HTTP_OK) {
      assert_non_null(strstr(again.msg, "reloads within"));
      refused++;
    }
  }
  assert_true(refused >= 1);
  b = tls_connect(new_ca, f->port, &fd); /* the last one loaded serves */
  assert_non_null(b);
  hello_on(b);
  SSL_free(b);
  close(fd);
  SSL_CTX_free(old_ca);
  SSL_CTX_free(new_ca);
}

/* lith_http_server_create with these files: its result, and the message. */
static int create_with(const char *c, const char *k, char *msg, size_t cap) {
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  lith_http_options o;
  lith_http_options_default(&o);
  o.tls_cert_file = c;
  o.tls_key_file = k;
  lith_http_server *srv = NULL;
  int rc = lith_http_server_create(&loop, &o, &srv);
  snprintf(msg, cap, "%s", lith_http_errmsg());
  if (rc == LITH_HTTP_OK)
    lith_http_server_destroy(srv);
  else
    assert_null(srv);
  uv_run(&loop, UV_RUN_NOWAIT);
  assert_int_equal(uv_loop_close(&loop), 0);
  return rc;
}

static void test_tls_bad_files_refuse_to_start(void **state) {
  (void)state;
  char msg[512], missing[160], junk[160];
  snprintf(missing, sizeof missing, "%s/missing.pem", dir);
  snprintf(junk, sizeof junk, "%s/junk.pem", dir);
  FILE *j = fopen(junk, "w");
  assert_non_null(j);
  fputs("-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n", j);
  fclose(j);

  assert_int_equal(create_with(cert, key, msg, sizeof msg), LITH_HTTP_OK);
  assert_int_equal(create_with(missing, key, msg, sizeof msg), LITH_HTTP_ERROR);
  assert_non_null(strstr(msg, missing));
  assert_non_null(strstr(msg, "No such file"));
  assert_int_equal(create_with(cert, missing, msg, sizeof msg), LITH_HTTP_ERROR);
  assert_non_null(strstr(msg, missing));
  assert_int_equal(create_with(junk, key, msg, sizeof msg), LITH_HTTP_ERROR);
  assert_non_null(strstr(msg, "not a PEM certificate"));
  assert_int_equal(create_with(cert, junk, msg, sizeof msg), LITH_HTTP_ERROR);
  assert_non_null(strstr(msg, junk));
  assert_int_equal(create_with(key, key, msg, sizeof msg), LITH_HTTP_ERROR); /* a key as the certificate */
  assert_int_equal(create_with(cert, other_key, msg, sizeof msg), LITH_HTTP_ERROR);
  assert_non_null(strstr(msg, other_key));
  assert_int_equal(create_with(cert, NULL, msg, sizeof msg), LITH_HTTP_MISUSE);
  assert_int_equal(create_with(NULL, key, msg, sizeof msg), LITH_HTTP_MISUSE);
  /* no reload for a server without TLS */
  {
    uv_loop_t loop;
    lith_http_server *srv;
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(lith_http_server_create(&loop, NULL, &srv), LITH_HTTP_OK);
    assert_int_equal(lith_http_tls_reload(srv, cert, key), LITH_HTTP_MISUSE);
    lith_http_server_destroy(srv);
    uv_run(&loop, UV_RUN_NOWAIT);
    assert_int_equal(uv_loop_close(&loop), 0);
  }
  assert_int_equal(ERR_peek_error(), 0); /* the layer left no error queued */
}

typedef struct listen_args {
  const char *path;
  int rc;
} listen_args;

static void job_listen_unix(fx *f, void *arg) {
  listen_args *a = arg;
  a->rc = lith_http_listen_unix(f->srv, a->path);
}

static void test_tls_unix_socket_stays_cleartext(void **state) {
  fx *f = *state;
  char path[128];
  snprintf(path, sizeof path, "%s/s.sock", dir);
  listen_args a = {path, -1};
  on_loop(f, job_listen_unix, &a);
  assert_int_equal(a.rc, LITH_HTTP_OK);
  int fd = unix_connect(path);
  rbuf *b = malloc(sizeof *b);
  resp *r = new_resp();
  rbuf_init(b, fd);
  send_str(fd, "GET /hello HTTP/1.1\r\nHost: localhost\r\n\r\n");
  assert_true(read_response(b, r));
  assert_int_equal(r->status, 200);
  close(fd);
  free(r);
  free(b);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/lith-tls-XXXXXX");
  if (mkdtemp(dir) == NULL)
    return 1;
  snprintf(ca, sizeof ca, "%s/ca.pem", dir);
  snprintf(cert, sizeof cert, "%s/cert.pem", dir);
  snprintf(key, sizeof key, "%s/key.pem", dir);
  snprintf(other_key, sizeof other_key, "%s/other-key.pem", dir);
  snprintf(dir2, sizeof dir2, "%s/renewed", dir);
  snprintf(ca2, sizeof ca2, "%s/ca.pem", dir2);
  snprintf(cert2, sizeof cert2, "%s/cert.pem", dir2);
  snprintf(key2, sizeof key2, "%s/key.pem", dir2);
  if (tlsgen_write(dir) != 0 || mkdir(dir2, 0700) != 0 || tlsgen_write(dir2) != 0)
    return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_tls_http1, tls_setup, teardown),
      cmocka_unit_test_setup_teardown(test_tls_http2_alpn, tls_setup, teardown),
      cmocka_unit_test_setup_teardown(test_tls_refuses_garbage_and_plain_http, tls_setup, teardown),
      cmocka_unit_test_setup_teardown(test_tls_refuses_old_versions, tls_setup, teardown),
      cmocka_unit_test_setup_teardown(test_tls_stalled_handshake_is_cut, tls_setup_short, teardown),
      cmocka_unit_test_setup_teardown(test_tls_stop_closes_handshakes, tls_setup, teardown),
      cmocka_unit_test_setup_teardown(test_tls_client_gone_while_held, tls_setup, teardown),
      cmocka_unit_test_setup_teardown(test_tls_reload, tls_setup, teardown),
      cmocka_unit_test_setup_teardown(test_tls_reload_before_first_bytes, tls_setup, teardown),
      cmocka_unit_test_setup_teardown(test_tls_reset_after_handshake_is_freed, tls_setup, teardown),
      cmocka_unit_test_setup_teardown(test_tls_unix_socket_stays_cleartext, tls_setup, teardown),
      cmocka_unit_test(test_tls_bad_files_refuse_to_start),
  };
  int rc = HT_RUN(tests);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0)
    rc = rc ? rc : 1;
  return rc;
}
