/*
 * libFuzzer harness: request/jwt.c, sqld's tokens, on arbitrary bytes. The
 * first byte picks the road: 0, the bytes as a bearer token; 1, as the
 * claims of a verified token (lithd_jwt_claims); 2, "HEADER\nPAYLOAD"
 * signed here with the harness's key (so the header check and the claims
 * behind a good signature are reached, which random signatures never
 * reach); 3, as a key file. Every outcome must be one of jwt.h's, a grant
 * only with LITHD_JWT_OK, a message always; nothing may crash, read past
 * the input or leak (ASan + UBSan). `make fuzz` runs it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "jwt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static EVP_PKEY *key;
static lithd_jwt_keys *keys;

static void init(void) {
  static const unsigned char seed[32] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16,
                                         17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};
  unsigned char pub[32];
  size_t n = sizeof pub;
  char err[256], text[64];
  static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  key = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed, sizeof seed);
  if (key == NULL || EVP_PKEY_get_raw_public_key(key, pub, &n) != 1)
    abort();
  size_t o = 0; /* the raw form: 32 bytes in URL-safe base64 */
  for (size_t i = 0; i < 32; i += 3) {
    unsigned v =
        (unsigned)pub[i] << 16 | (i + 1 < 32 ? (unsigned)pub[i + 1] << 8 : 0) | (i + 2 < 32 ? pub[i + 2] : 0);
    text[o++] = al[v >> 18];
    text[o++] = al[(v >> 12) & 63];
    if (i + 1 < 32)
      text[o++] = al[(v >> 6) & 63];
    if (i + 2 < 32)
      text[o++] = al[v & 63];
  }
  if (lithd_jwt_keys_parse(text, o, &keys, err, sizeof err) != 0)
    abort();
}

static void b64(const unsigned char *p, size_t n, char *out, size_t *o) {
  static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  for (size_t i = 0; i < n; i += 3) {
    unsigned v =
        (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
    out[(*o)++] = al[v >> 18];
    out[(*o)++] = al[(v >> 12) & 63];
    if (i + 1 < n)
      out[(*o)++] = al[(v >> 6) & 63];
    if (i + 2 < n)
      out[(*o)++] = al[v & 63];
  }
}

static void check(int rc, int grant, const char *msg) {
  if (rc < LITHD_JWT_OK || rc > LITHD_JWT_IMMATURE || grant < LITHD_JWT_NONE || grant > LITHD_JWT_FULL)
    abort();
  if (rc != LITHD_JWT_OK && grant != LITHD_JWT_NONE)
    abort();
  if ((rc != LITHD_JWT_OK || grant == LITHD_JWT_NONE) && (msg[0] == '\0' || strlen(msg) >= 256))
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char msg[256];
  int grant = -1, rc;
  if (keys == NULL)
    init();
  if (size == 0)
    return 0;
  const char *p = (const char *)data + 1;
  size_t n = size - 1;
  msg[0] = '\0';
  switch (data[0] % 4) {
  case 0:
    rc = lithd_jwt_check(keys, p, n, 1700000000, "db", &grant, msg, sizeof msg);
    check(rc, grant, msg);
    break;
  case 1:
    rc = lithd_jwt_claims(p, n, 1700000000, (data[0] & 4) ? NULL : "db", &grant, msg, sizeof msg);
    check(rc, grant, msg);
    break;
  case 2: {
    const char *nl = memchr(p, '\n', n);
    size_t hn = nl != NULL ? (size_t)(nl - p) : n, pn = nl != NULL ? n - hn - 1 : 0;
    char *tok = malloc(2 * n + 200);
    size_t o = 0;
    unsigned char sig[64];
    size_t sn = sizeof sig;
    b64((const unsigned char *)p, hn, tok, &o);
    tok[o++] = '.';
    b64((const unsigned char *)(nl != NULL ? nl + 1 : p + n), pn, tok, &o);
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    if (c == NULL || EVP_DigestSignInit(c, NULL, NULL, NULL, key) != 1 ||
        EVP_DigestSign(c, sig, &sn, (const unsigned char *)tok, o) != 1)
      abort();
    EVP_MD_CTX_free(c);
    tok[o++] = '.';
    b64(sig, sn, tok, &o);
    rc = lithd_jwt_check(keys, tok, o, 1700000000, "db", &grant, msg, sizeof msg);
    check(rc, grant, msg);
    free(tok);
    break;
  }
  default: {
    lithd_jwt_keys *k = NULL;
    if (lithd_jwt_keys_parse(p, n, &k, msg, sizeof msg) == 0) {
      if (k == NULL || lithd_jwt_keys_count(k) < 1 || lithd_jwt_keys_count(k) > LITHD_JWT_KEYS_MAX)
        abort();
      lithd_jwt_keys_free(k);
    } else if (k != NULL || msg[0] == '\0') {
      abort();
    }
  }
  }
  return 0;
}
