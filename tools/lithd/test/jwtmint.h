/*
 * jwtmint — tokens made in the tests, as sqld's issuers make them: an
 * Ed25519 key pair from libcrypto, JWTs signed with it (EdDSA), and the
 * forgeries a hostile client sends (alg "none", HS256 keyed with the
 * public key's PEM). Header-only: static functions for test_jwt and
 * test_lithd_jwt. Every string returned is malloc'd (the caller frees it).
 */
#ifndef LITHD_TEST_JWTMINT_H
#define LITHD_TEST_JWTMINT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>

/* URL-safe base64 without padding of p[0..n), malloc'd. */
static inline char *mint_b64(const void *p, size_t n) {
  static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  const unsigned char *s = p;
  char *out = malloc(n / 3 * 4 + 5), *o = out;
  size_t i = 0;
  for (; i + 2 < n; i += 3) {
    unsigned v = (unsigned)s[i] << 16 | (unsigned)s[i + 1] << 8 | s[i + 2];
    *o++ = al[v >> 18], *o++ = al[(v >> 12) & 63], *o++ = al[(v >> 6) & 63], *o++ = al[v & 63];
  }
  if (n - i == 1) {
    unsigned v = (unsigned)s[i] << 16;
    *o++ = al[v >> 18], *o++ = al[(v >> 12) & 63];
  } else if (n - i == 2) {
    unsigned v = (unsigned)s[i] << 16 | (unsigned)s[i + 1] << 8;
    *o++ = al[v >> 18], *o++ = al[(v >> 12) & 63], *o++ = al[(v >> 6) & 63];
  }
  *o = '\0';
  return out;
}

static inline EVP_PKEY *mint_key(void) {
  EVP_PKEY *k = NULL;
  EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, NULL);
  if (c == NULL || EVP_PKEY_keygen_init(c) != 1 || EVP_PKEY_keygen(c, &k) != 1)
    k = NULL;
  EVP_PKEY_CTX_free(c);
  return k;
}

/* The public key as a PEM "PUBLIC KEY" block. */
static inline char *mint_pub_pem(EVP_PKEY *k) {
  BIO *b = BIO_new(BIO_s_mem());
  char *p = NULL, *out;
  PEM_write_bio_PUBKEY(b, k);
  long n = BIO_get_mem_data(b, &p);
  out = malloc((size_t)n + 1);
  memcpy(out, p, (size_t)n);
  out[n] = '\0';
  BIO_free(b);
  return out;
}

/* The private key as PEM (what an operator must not give lithd). */
static inline char *mint_priv_pem(EVP_PKEY *k) {
  BIO *b = BIO_new(BIO_s_mem());
  char *p = NULL, *out;
  PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL);
  long n = BIO_get_mem_data(b, &p);
  out = malloc((size_t)n + 1);
  memcpy(out, p, (size_t)n);
  out[n] = '\0';
  BIO_free(b);
  return out;
}

/* The public key's 32 bytes in URL-safe base64 (sqld's other form). */
static inline char *mint_pub_raw(EVP_PKEY *k) {
  unsigned char raw[32];
  size_t n = sizeof raw;
  EVP_PKEY_get_raw_public_key(k, raw, &n);
  return mint_b64(raw, n);
}

/* header.payload with the given JSON texts. */
static inline char *mint_signing_input(const char *header, const char *payload) {
  char *h = mint_b64(header, strlen(header)), *p = mint_b64(payload, strlen(payload));
  char *out = malloc(strlen(h) + strlen(p) + 2);
  sprintf(out, "%s.%s", h, p);
  free(h);
  free(p);
  return out;
}

static inline char *mint_join(char *input, const unsigned char *sig, size_t n) {
  char *s = mint_b64(sig, n), *out = malloc(strlen(input) + strlen(s) + 2);
  sprintf(out, "%s.%s", input, s);
  free(input);
  free(s);
  return out;
}

/* A token with header `header` signed by k with Ed25519. */
static inline char *mint_with_header(EVP_PKEY *k, const char *header, const char *payload) {
  char *input = mint_signing_input(header, payload);
  unsigned char sig[64];
  size_t n = sizeof sig;
  EVP_MD_CTX *c = EVP_MD_CTX_new();
  EVP_DigestSignInit(c, NULL, NULL, NULL, k);
  EVP_DigestSign(c, sig, &n, (const unsigned char *)input, strlen(input));
  EVP_MD_CTX_free(c);
  return mint_join(input, sig, n);
}

/* A token as sqld's issuers make it: {"alg":"EdDSA","typ":"JWT"}. */
static inline char *mint(EVP_PKEY *k, const char *payload) {
  return mint_with_header(k, "{\"alg\":\"EdDSA\",\"typ\":\"JWT\"}", payload);
}

/* alg "none": no signature at all. */
static inline char *mint_none(const char *payload) {
  char *input = mint_signing_input("{\"alg\":\"none\",\"typ\":\"JWT\"}", payload);
  char *out = malloc(strlen(input) + 2);
  sprintf(out, "%s.", input);
  free(input);
  return out;
}

/* HS256 keyed with `secret` (the public key's PEM: the confusion attack). */
static inline char *mint_hs256(const char *secret, const char *payload) {
  char *input = mint_signing_input("{\"alg\":\"HS256\",\"typ\":\"JWT\"}", payload);
  unsigned char mac[32];
  unsigned n = sizeof mac;
  HMAC(EVP_sha256(), secret, (int)strlen(secret), (const unsigned char *)input, strlen(input), mac, &n);
  return mint_join(input, mac, n);
}

#endif /* LITHD_TEST_JWTMINT_H */
