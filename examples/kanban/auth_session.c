/*
 * auth_session — tokens, cookies and the session cache (see auth_session.h).
 *
 * Design: the cache is a chained hash table keyed by the token hash (already
 * uniformly random, so its first bytes pick the bucket). It holds at most
 * CACHE_MAX entries; when full it is emptied rather than aged entry by
 * entry: a cache miss costs one read, so simplicity wins over hit rate.
 * Freshness is checked on the monotonic clock (lith_clock_ms), expiry on the
 * wall clock the database records.
 */
#include "auth_session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "lith.h"
#include "srv_util.h"

#define BUCKETS 1024
#define CACHE_MAX 8192

static void to_hex(const unsigned char *bin, size_t n, char *out) {
  static const char digits[] = "0123456789abcdef";
  size_t i;
  for (i = 0; i < n; i++) {
    out[2 * i] = digits[bin[i] >> 4];
    out[2 * i + 1] = digits[bin[i] & 15];
  }
  out[2 * n] = '\0';
}

static void hash_bytes(const char *token, char hash[AUTH_HASH_LEN + 1]) {
  unsigned char h[32];
  crypto_generichash(h, sizeof h, (const unsigned char *)token, strlen(token), NULL, 0);
  to_hex(h, sizeof h, hash);
}

void auth_token_new(char token[AUTH_TOKEN_LEN + 1], char hash[AUTH_HASH_LEN + 1]) {
  unsigned char raw[32];
  randombytes_buf(raw, sizeof raw);
  sodium_bin2base64(token, AUTH_TOKEN_LEN + 1, raw, sizeof raw, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
  sodium_memzero(raw, sizeof raw);
  hash_bytes(token, hash);
}

int auth_token_hash(const char *token, char hash[AUTH_HASH_LEN + 1]) {
  size_t i;
  if (strlen(token) != AUTH_TOKEN_LEN)
    return -1;
  for (i = 0; i < AUTH_TOKEN_LEN; i++) {
    char c = token[i];
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
      return -1;
  }
  hash_bytes(token, hash);
  return 0;
}

int auth_request_hash(const lith_http_req *req, char hash[AUTH_HASH_LEN + 1]) {
  char token[AUTH_TOKEN_LEN + 2];
  if (!srv_cookie(req, AUTH_COOKIE, token, sizeof token))
    return 0;
  return auth_token_hash(token, hash) == 0;
}

int auth_cookie_set(lith_http_req *req, const char *token) {
  char v[256];
  if (token != NULL)
    snprintf(v, sizeof v, "%s=%s; Max-Age=%d; Path=/; HttpOnly; SameSite=Lax", AUTH_COOKIE, token,
             AUTH_SESSION_DAYS * 86400);
  else
    snprintf(v, sizeof v, "%s=; Max-Age=0; Path=/; HttpOnly; SameSite=Lax", AUTH_COOKIE);
  return lith_http_add_header(req, "set-cookie", v);
}

/* ---- The cache ---------------------------------------------------------------- */

struct entry {
  struct entry *next;
  char hash[AUTH_HASH_LEN + 1];
  auth_who who;
  int64_t fresh_until; /* lith_clock_ms */
};

struct auth_cache {
  struct entry *bucket[BUCKETS];
  size_t n;
};

static unsigned bucket_of(const char *hash) {
  unsigned v = 0;
  int i;
  for (i = 0; i < 4; i++)
    v = v * 16 + (unsigned)(hash[i] <= '9' ? hash[i] - '0' : hash[i] - 'a' + 10);
  return v % BUCKETS;
}

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

auth_cache *auth_cache_new(void) { return calloc(1, sizeof(auth_cache)); }

static void clear(auth_cache *c) {
  unsigned b;
  for (b = 0; b < BUCKETS; b++) {
    struct entry *e = c->bucket[b];
    while (e != NULL) {
      struct entry *next = e->next;
      free(e);
      e = next;
    }
    c->bucket[b] = NULL;
  }
  c->n = 0;
}

int auth_cache_get(auth_cache *c, const char *hash, auth_who *who) {
  struct entry **pe = &c->bucket[bucket_of(hash)], *e;
  for (; (e = *pe) != NULL; pe = &e->next) {
    if (strcmp(e->hash, hash) != 0)
      continue;
    if (e->fresh_until < lith_clock_ms() || e->who.expires_ms <= wall_ms()) {
      *pe = e->next;
      free(e);
      c->n--;
      return 0;
    }
    *who = e->who;
    return 1;
  }
  return 0;
}

void auth_cache_put(auth_cache *c, const char *hash, const auth_who *who) {
  struct entry *e;
  unsigned b;
  auth_cache_drop(c, hash);
  if (c->n >= CACHE_MAX)
    clear(c);
  e = calloc(1, sizeof *e);
  if (e == NULL)
    return; /* only a cache */
  snprintf(e->hash, sizeof e->hash, "%s", hash);
  e->who = *who;
  e->fresh_until = lith_clock_ms() + AUTH_CACHE_TTL_MS;
  b = bucket_of(hash);
  e->next = c->bucket[b];
  c->bucket[b] = e;
  c->n++;
}

void auth_cache_drop(auth_cache *c, const char *hash) {
  struct entry **pe = &c->bucket[bucket_of(hash)], *e;
  for (; (e = *pe) != NULL; pe = &e->next) {
    if (strcmp(e->hash, hash) == 0) {
      *pe = e->next;
      free(e);
      c->n--;
      return;
    }
  }
}

void auth_cache_free(auth_cache *c) {
  if (c == NULL)
    return;
  clear(c);
  free(c);
}
