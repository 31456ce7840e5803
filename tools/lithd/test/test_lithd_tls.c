/*
 * lithd with --tls-cert/--tls-key: /v1/do and /healthz over https (HTTP/1.1
 * and HTTP/2 by ALPN) with a client that verifies the certificate; a plain
 * HTTP request, garbage, and a client that stalls mid-handshake each get
 * their connection closed (the last after --request-timeout-ms) while lithd
 * goes on serving; bad certificate or key files, or one without the other,
 * stop lithd before it serves; a non-loopback listener still needs a token.
 * Certificates: http/test/tlsgen.c.
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "child.h"
#include "tlsgen.h"

#define CA "tls-certs/ca.pem"
#define CERT "tls-certs/cert.pem"
#define KEY "tls-certs/key.pem"
#define OTHER_KEY "tls-certs/other-key.pem"
#define TIMEOUT_MS 500 /* --request-timeout-ms of the stall test */
#define STR_TIMEOUT "500"

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static SSL_CTX *client_ctx(const char *alpn, unsigned alpn_len) {
  SSL_CTX *c = SSL_CTX_new(TLS_client_method());
  assert_non_null(c);
  assert_int_equal(SSL_CTX_load_verify_locations(c, CA, NULL), 1);
  SSL_CTX_set_verify(c, SSL_VERIFY_PEER, NULL);
  if (alpn)
    assert_int_equal(SSL_CTX_set_alpn_protos(c, (const unsigned char *)alpn, alpn_len), 0);
  return c;
}

/* A verified TLS connection to lithd (asserts). */
static SSL *tls_open(const struct tl_child *c, SSL_CTX *ctx, int *fdp) {
  int fd = tl_connect(c);
  assert_true(fd >= 0);
  SSL *s = SSL_new(ctx);
  SSL_set_fd(s, fd);
  SSL_set1_host(s, "localhost");
  SSL_set_tlsext_host_name(s, "localhost");
  if (SSL_connect(s) != 1) {
    ERR_print_errors_fp(stderr);
    fail_msg("TLS handshake with lithd failed");
  }
  *fdp = fd;
  return s;
}

static void https_request_with(const struct tl_child *c, SSL_CTX *ctx, const char *method, const char *path,
                               const char *body, char *out, size_t cap);

/* One HTTP/1.1 request over TLS ("Connection: close"); the whole answer,
 * head and body, into out. */
static void https_request(const struct tl_child *c, const char *method, const char *path, const char *body,
                          char *out, size_t cap) {
  https_request_with(c, client_ctx("\x08http/1.1", 9), method, path, body, out, cap);
}

/* https_request (no body) trusting ca_file. */
static void https_request_ca(const struct tl_child *c, const char *ca_file, const char *method,
                             const char *path, char *out, size_t cap) {
  SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
  assert_non_null(ctx);
  assert_int_equal(SSL_CTX_load_verify_locations(ctx, ca_file, NULL), 1);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
  https_request_with(c, ctx, method, path, NULL, out, cap);
}

/* ... on a context of the caller's (freed here). */
static void https_request_with(const struct tl_child *c, SSL_CTX *ctx, const char *method, const char *path,
                               const char *body, char *out, size_t cap) {
  int fd;
  SSL *s = tls_open(c, ctx, &fd);
  char req[1024];
  int n = snprintf(req, sizeof req,
                   "%s %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
                   "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                   method, path, body ? strlen(body) : 0, body ? body : "");
  assert_int_equal(SSL_write(s, req, n), n);
  size_t len = 0;
  for (int r; len < cap - 1 && (r = SSL_read(s, out + len, (int)(cap - 1 - len))) > 0;)
    len += (size_t)r;
  out[len] = '\0';
  SSL_free(s);
  close(fd);
  SSL_CTX_free(ctx);
}

static void start_tls(struct tl_child *c, const char *name, const char *timeout_ms) {
  tl_start(c, name, 0,
           TL_ARGS("--tls-cert", CERT, "--tls-key", KEY, "--request-timeout-ms",
                   timeout_ms ? timeout_ms : "10000"));
  assert_non_null(strstr(c->line, "listening on https://127.0.0.1:"));
}

static void test_https_do_and_healthz(void **state) {
  struct tl_child *c = *state;
  char out[8192];
  start_tls(c, "tls_do", NULL);
  https_request(c, "POST", "/v1/do", "{\"statements\":[{\"sql\":\"SELECT 40 + 2 AS x\"}]}", out, sizeof out);
  assert_true(strncmp(out, "HTTP/1.1 200", 12) == 0);
  assert_non_null(strstr(out, "42"));
  https_request(c, "GET", "/healthz", NULL, out, sizeof out);
  assert_true(strncmp(out, "HTTP/1.1 200", 12) == 0);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* HTTP/2 frames over TLS. */
static void h2_frame(SSL *s, int type, int flags, unsigned stream, const void *p, size_t n) {
  unsigned char h[9] = {
      (unsigned char)(n >> 16),      (unsigned char)(n >> 8),      (unsigned char)n,
      (unsigned char)type,           (unsigned char)flags,         (unsigned char)(stream >> 24),
      (unsigned char)(stream >> 16), (unsigned char)(stream >> 8), (unsigned char)stream};
  assert_int_equal(SSL_write(s, h, 9), 9);
  if (n)
    assert_int_equal(SSL_write(s, p, (int)n), (int)n);
}

static int read_full(SSL *s, unsigned char *p, size_t n) {
  for (size_t got = 0; got < n;) {
    int r = SSL_read(s, p + got, (int)(n - got));
    if (r <= 0)
      return -1;
    got += (size_t)r;
  }
  return 0;
}

static void test_https_http2(void **state) {
  struct tl_child *c = *state;
  start_tls(c, "tls_h2", NULL);
  SSL_CTX *ctx = client_ctx("\x02h2\x08http/1.1", 12);
  int fd;
  SSL *s = tls_open(c, ctx, &fd);
  const unsigned char *proto;
  unsigned len;
  SSL_get0_alpn_selected(s, &proto, &len);
  assert_int_equal(len, 2);
  assert_memory_equal(proto, "h2", 2);
  assert_int_equal(SSL_write(s, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24), 24);
  h2_frame(s, 4, 0, 0, NULL, 0);
  /* GET https://localhost/healthz: :method GET, :scheme https (indexed),
   * :path and :authority (literals) */
  static const unsigned char hdrs[] = {0x82, 0x87, 0x44, 8,   '/', 'h', 'e', 'a', 'l', 't', 'h', 'z',
                                       0x41, 9,    'l',  'o', 'c', 'a', 'l', 'h', 'o', 's', 't'};
  h2_frame(s, 1, 5, 1, hdrs, sizeof hdrs);
  /* POST /v1/do with a JSON body on stream 3: HEADERS (:method POST,
   * content-type by its static-table name), then DATA with END_STREAM */
  static const char body[] = "{\"statements\":[{\"sql\":\"SELECT 6 * 7 AS answer\"}]}";
  static const unsigned char post[] = {0x83, 0x87, 0x44, 6,   '/', 'v', '1', '/', 'd',  'o', 0x41, 9,   'l',
                                       'o',  'c',  'a',  'l', 'h', 'o', 's', 't', 0x5f, 16,  'a',  'p', 'p',
                                       'l',  'i',  'c',  'a', 't', 'i', 'o', 'n', '/',  'j', 's',  'o', 'n'};
  h2_frame(s, 1, 4, 3, post, sizeof post);
  h2_frame(s, 0, 1, 3, body, strlen(body));
  int status_1 = -1, status_3 = -1, body_3 = 0;
  unsigned char h[9], p[16384];
  while (status_1 < 0 || status_3 < 0 || !body_3) {
    assert_int_equal(read_full(s, h, 9), 0);
    size_t n = (size_t)h[0] << 16 | (size_t)h[1] << 8 | h[2];
    assert_true(n < sizeof p);
    assert_int_equal(read_full(s, p, n), 0);
    p[n] = '\0';
    if (h[3] == 1 && h[8] == 1)
      status_1 = n > 0 && p[0] == 0x88; /* :status 200, indexed */
    if (h[3] == 1 && h[8] == 3)
      status_3 = n > 0 && p[0] == 0x88;
    if (h[3] == 0 && h[8] == 3 && strstr((char *)p, "\"answer\"") && strstr((char *)p, "[[42]]"))
      body_3 = 1;
    if (h[3] == 4 && !(h[4] & 1))
      h2_frame(s, 4, 1, 0, NULL, 0); /* SETTINGS ACK */
  }
  assert_int_equal(status_1, 1);
  assert_int_equal(status_3, 1);
  SSL_free(s);
  close(fd);
  SSL_CTX_free(ctx);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* The server closed fd within ms (what came before, an alert, is dropped). */
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

/* The first bytes of a client's handshake (its ClientHello). */
static size_t client_hello(unsigned char *out, size_t cap) {
  SSL_CTX *ctx = client_ctx(NULL, 0);
  SSL *s = SSL_new(ctx);
  SSL_set_bio(s, BIO_new(BIO_s_mem()), BIO_new(BIO_s_mem()));
  assert_int_equal(SSL_connect(s), -1);
  size_t n = (size_t)BIO_read(SSL_get_wbio(s), out, (int)cap);
  SSL_free(s);
  SSL_CTX_free(ctx);
  return n;
}

static void test_https_refuses_plain_garbage_and_stalls(void **state) {
  struct tl_child *c = *state;
  char out[8192];
  start_tls(c, "tls_bad", STR_TIMEOUT);
  /* plain HTTP to the TLS port */
  int fd = tl_connect(c);
  const char *plain = "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n";
  assert_int_equal(send(fd, plain, strlen(plain), 0), (ssize_t)strlen(plain));
  assert_true(closed_within(fd, 2000));
  close(fd);
  /* garbage */
  fd = tl_connect(c);
  unsigned char junk[300];
  for (size_t i = 0; i < sizeof junk; i++)
    junk[i] = (unsigned char)(i * 13 + 5);
  assert_int_equal(send(fd, junk, sizeof junk, 0), (ssize_t)sizeof junk);
  assert_true(closed_within(fd, 2000));
  close(fd);
  /* a ClientHello, then silence: cut at the request timeout, not before */
  unsigned char hello[4096];
  size_t n = client_hello(hello, sizeof hello);
  fd = tl_connect(c);
  int64_t t0 = now_ms();
  assert_int_equal(send(fd, hello, n, 0), (ssize_t)n);
  assert_true(closed_within(fd, TIMEOUT_MS * 6));
  int64_t took = now_ms() - t0;
  assert_true(took >= TIMEOUT_MS - 50);
  close(fd);
  /* half a ClientHello */
  fd = tl_connect(c);
  t0 = now_ms();
  assert_int_equal(send(fd, hello, n / 2, 0), (ssize_t)(n / 2));
  assert_true(closed_within(fd, TIMEOUT_MS * 6));
  assert_true(now_ms() - t0 >= TIMEOUT_MS - 50);
  close(fd);
  /* lithd goes on serving */
  https_request(c, "GET", "/healthz", NULL, out, sizeof out);
  assert_true(strncmp(out, "HTTP/1.1 200", 12) == 0);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* 1 if a TLS handshake trusting ca_file alone succeeds with lithd. */
static int handshake_ok(const struct tl_child *c, const char *ca_file) {
  SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
  assert_non_null(ctx);
  assert_int_equal(SSL_CTX_load_verify_locations(ctx, ca_file, NULL), 1);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
  int fd = tl_connect(c);
  assert_true(fd >= 0);
  SSL *s = SSL_new(ctx);
  SSL_set_fd(s, fd);
  SSL_set1_host(s, "localhost");
  int ok = SSL_connect(s) == 1;
  ERR_clear_error();
  SSL_free(s);
  close(fd);
  SSL_CTX_free(ctx);
  return ok;
}

static void copy_file(const char *from, const char *to) {
  char buf[16384];
  FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
  assert_non_null(in);
  assert_non_null(out);
  size_t n = fread(buf, 1, sizeof buf, in);
  assert_int_equal(fwrite(buf, 1, n, out), n);
  fclose(in);
  assert_int_equal(fclose(out), 0);
}

/* SIGHUP reloads the files (a renewed certificate); a bad one leaves the
 * old pair serving. */
static void test_sighup_reloads_certificate(void **state) {
  struct tl_child *c = *state;
  copy_file(CERT, "live-cert.pem");
  copy_file(KEY, "live-key.pem");
  tl_start(c, "tls_hup", 0, TL_ARGS("--tls-cert", "live-cert.pem", "--tls-key", "live-key.pem"));
  assert_true(handshake_ok(c, CA));
  assert_false(handshake_ok(c, "tls-certs2/ca.pem"));
  copy_file("tls-certs2/cert.pem", "live-cert.pem");
  copy_file("tls-certs2/key.pem", "live-key.pem");
  assert_int_equal(kill(c->pid, SIGHUP), 0);
  int64_t end = now_ms() + 5000;
  while (!handshake_ok(c, "tls-certs2/ca.pem") && now_ms() < end)
    usleep(20 * 1000);
  assert_true(handshake_ok(c, "tls-certs2/ca.pem"));
  assert_false(handshake_ok(c, CA));
  /* a certificate without its key: refused, the renewed pair serves on */
  copy_file(CERT, "live-cert.pem");
  assert_int_equal(kill(c->pid, SIGHUP), 0);
  usleep(300 * 1000);
  assert_true(handshake_ok(c, "tls-certs2/ca.pem"));
  char out[8192];
  https_request_ca(c, "tls-certs2/ca.pem", "GET", "/healthz", out, sizeof out);
  assert_true(strncmp(out, "HTTP/1.1 200", 12) == 0);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  unlink("live-cert.pem");
  unlink("live-key.pem");
}

static void test_bad_tls_files_refuse_to_start(void **state) {
  (void)state;
  char out[4096];
  int rc = tl_run(TL_ARGS("--db", "tls_refuse.db", "--listen", "127.0.0.1:0", "--tls-cert",
                          "tls-certs/nope.pem", "--tls-key", KEY),
                  out, sizeof out);
  assert_int_not_equal(rc, 0);
  assert_non_null(strstr(out, "nope.pem"));
  assert_non_null(strstr(out, "No such file"));
  rc = tl_run(
      TL_ARGS("--db", "tls_refuse.db", "--listen", "127.0.0.1:0", "--tls-cert", CERT, "--tls-key", OTHER_KEY),
      out, sizeof out);
  assert_int_not_equal(rc, 0);
  assert_non_null(strstr(out, "other-key.pem"));
  assert_null(strstr(out, "listening on"));
  rc = tl_run(TL_ARGS("--db", "tls_refuse.db", "--listen", "127.0.0.1:0", "--tls-cert", CERT), out,
              sizeof out);
  assert_int_not_equal(rc, 0);
  assert_non_null(strstr(out, "TLS needs both a certificate file and a key file"));
  /* TLS hides what is sent; who may send is still the token's to say */
  rc = tl_run(TL_ARGS("--db", "tls_refuse.db", "--listen", "0.0.0.0:0", "--tls-cert", CERT, "--tls-key", KEY),
              out, sizeof out);
  assert_int_equal(rc, 2);
  assert_non_null(strstr(out, "without --token-file"));
  tl_remove_db("tls_refuse.db");
}

int main(void) {
  mkdir("tls-certs", 0700);
  mkdir("tls-certs2", 0700); /* another CA's: the renewed certificate of the SIGHUP test */
  if (tlsgen_write("tls-certs") != 0 || tlsgen_write("tls-certs2") != 0)
    return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_https_do_and_healthz, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_https_http2, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_https_refuses_plain_garbage_and_stalls, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_sighup_reloads_certificate, tl_setup, tl_teardown),
      cmocka_unit_test(test_bad_tls_files_refuse_to_start),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
