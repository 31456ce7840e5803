/*
 * TLS: the OpenSSL context of a server whose options name a certificate and
 * a key (lith_http_options.tls_cert_file, tls_key_file).
 *
 * h2o 2.2.5 does the TLS work itself once its accept context carries an
 * SSL_CTX (h2o_accept runs the handshake, then picks HTTP/2 or HTTP/1.1 by
 * the ALPN protocol the handshake chose). What is ours is the context:
 *   - loaded once, at create: a certificate or key that is missing,
 *     unreadable, not PEM, or a key that is not the certificate's, fails
 *     lith_http_server_create with a message naming the file, so a server
 *     never starts to refuse every handshake later;
 *   - TLS 1.2 at least (1.0 and 1.1 are broken: RFC 8996); OpenSSL's
 *     default ciphers, which at 1.2 are the AEAD and forward-secret ones;
 *     the server's order of preference; no compression (CRIME); no
 *     renegotiation (a client asking for one handshake after another costs
 *     us a handshake each time, and h2o 2.2.5 does not expect one);
 *   - no session cache on the server (its memory would grow with the
 *     clients); resumption still works by TLS 1.3 tickets, which the
 *     client keeps;
 *   - ALPN: "h2" then "http/1.1" when HTTP/2 is on, "http/1.1" alone when
 *     it is off. A client offering none gets HTTP/1.1.
 * lith_http_tls_reload swaps in a new context for the connections accepted
 * next: each open connection's SSL holds a reference to the context it was
 * made from, so freeing ours leaves theirs alive until they close.
 * The handshake is bounded by h2o's handshake timeout, which create sets to
 * request_timeout_ms: a client that stops mid-handshake (or never starts
 * one) is closed then, like one that never sends its request. Garbage, or
 * plain HTTP, is a failed handshake: h2o closes the connection at once.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "internal.h"

static const h2o_iovec_t alpn_h2[] = {{H2O_STRLIT("h2")}, {H2O_STRLIT("http/1.1")}, {NULL, 0}};
static const h2o_iovec_t alpn_h1[] = {{H2O_STRLIT("http/1.1")}, {NULL, 0}};

/* OpenSSL's reason for the last error, and its queue emptied: the
 * message must be this call's only. */
static const char *ssl_reason(char *buf, size_t cap) {
  unsigned long e = ERR_peek_last_error();
  const char *r = e ? ERR_reason_error_string(e) : NULL;
  if (r != NULL)
    snprintf(buf, cap, "%s", r);
  else if (e)
    snprintf(buf, cap, "OpenSSL error %lx", e);
  else
    snprintf(buf, cap, "unknown error");
  ERR_clear_error();
  return buf;
}

/* A readable file, or a message with errno's reason (clearer than
 * OpenSSL's "system library" for the common mistake). */
static int readable(const char *what, const char *path) {
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return lh_fail(LITH_HTTP_ERROR, "TLS %s %s: %s", what, path, strerror(errno));
  fclose(f);
  return LITH_HTTP_OK;
}

int lh_tls_create(const char *cert_file, const char *key_file, int h2, SSL_CTX **out) {
  char why[256];
  int rc;
  *out = NULL;
  if (cert_file == NULL || key_file == NULL || !*cert_file || !*key_file)
    return lh_fail(LITH_HTTP_MISUSE, "TLS needs both a certificate file and a key file");
  if ((rc = readable("certificate", cert_file)) != LITH_HTTP_OK ||
      (rc = readable("key", key_file)) != LITH_HTTP_OK)
    return rc;
  ERR_clear_error();
  SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == NULL)
    return lh_fail(LITH_HTTP_NOMEM, "TLS: %s", ssl_reason(why, sizeof why));
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
    rc = lh_fail(LITH_HTTP_ERROR, "TLS: setting version 1.2 as the least: %s", ssl_reason(why, sizeof why));
    goto fail;
  }
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS); /* an idle connection holds no record buffers */
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  /* No close_notify: h2o 2.2.5 closes a TLS socket by writing one first,
   * and on libuv a write to a connection whose read already failed (a
   * client that reset it: one that closes without reading the session
   * tickets sent after its handshake) fails at once, without the callback
   * h2o waits for; the socket was then never freed (a leak of its fd, and
   * a stop that never ends). Every answer of ours carries its length, so
   * no client needs the alert to tell a whole answer from a cut one. */
  SSL_CTX_set_quiet_shutdown(ctx, 1);
  if (SSL_CTX_use_certificate_chain_file(ctx, cert_file) != 1) {
    rc = lh_fail(LITH_HTTP_ERROR, "TLS certificate %s: not a PEM certificate (%s)", cert_file,
                 ssl_reason(why, sizeof why));
    goto fail;
  }
  /* also refuses a key that is not the certificate's ("key values mismatch") */
  if (SSL_CTX_use_PrivateKey_file(ctx, key_file, SSL_FILETYPE_PEM) != 1) {
    rc = lh_fail(LITH_HTTP_ERROR, "TLS key %s: not a PEM private key for the certificate %s (%s)", key_file,
                 cert_file, ssl_reason(why, sizeof why));
    goto fail;
  }
  h2o_ssl_register_alpn_protocols(ctx, h2 ? alpn_h2 : alpn_h1);
  *out = ctx;
  return LITH_HTTP_OK;

fail:
  SSL_CTX_free(ctx);
  return rc;
}

int lith_http_tls_reload(lith_http_server *srv, const char *cert_file, const char *key_file) {
  SSL_CTX *ctx;
  if (!srv || !srv->tls)
    return lh_fail(LITH_HTTP_MISUSE, "lith_http_tls_reload: the server was created without TLS");
  /* A context replaced twice the handshake's bound ago serves no
   * connection that has not made its SSL (holding its own reference): it
   * goes now. The one being replaced waits as long (a connection
   * accepted under it may not have sent a byte yet). */
  uint64_t now = uv_now(srv->loop);
  int room = -1;
  for (int i = 0; i < LH_TLS_OLD; i++) {
    if (srv->tls_old[i].ctx != NULL && srv->tls_old[i].until <= now) {
      SSL_CTX_free(srv->tls_old[i].ctx);
      srv->tls_old[i].ctx = NULL;
    }
    if (srv->tls_old[i].ctx == NULL && room < 0)
      room = i;
  }
  if (room < 0)
    return lh_fail(LITH_HTTP_ERROR,
                   "TLS reload: %d reloads within %" PRIu64 " ms, the most kept at once; the certificate "
                   "loaded before serves on, retry later",
                   LH_TLS_OLD, 2 * (uint64_t)srv->config.handshake_timeout + 1000);
  int rc = lh_tls_create(cert_file, key_file, srv->tls_h2, &ctx);
  if (rc != LITH_HTTP_OK)
    return rc; /* the old context serves on */
  srv->tls_old[room].ctx = srv->tls;
  srv->tls_old[room].until = now + 2 * (uint64_t)srv->config.handshake_timeout + 1000;
  srv->tls = ctx;
  srv->tls_accept_ctx.ssl_ctx = ctx;
  return LITH_HTTP_OK;
}
