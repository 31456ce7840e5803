/*
 * auth_session — session tokens, their cookie, and a small cache of
 * sessions already looked up.
 *
 * A session token is 32 random bytes (libsodium's randombytes_buf), sent to
 * the browser once as a base64url cookie (HttpOnly; SameSite=Lax; Path=/).
 * The database keeps only its BLAKE2b-256 hash (crypto_generichash, in hex):
 * someone who reads the database file cannot sign in with what they read.
 * A token is 256 bits of randomness, so a fast hash is enough (a password
 * needs a slow one because people choose them).
 *
 * The cache: every request of a signed-in page carries the cookie, and a
 * board action would otherwise need a read on the pool before its command
 * could be submitted. The loop thread keeps the sessions it looked up for
 * AUTH_CACHE_TTL_MS (and never past their expiry); signing out removes the
 * entry at once. A session deleted by other means (pruning, another
 * process) is honoured for at most that long.
 *
 * Threads: the token functions anywhere; the cache on the loop thread only.
 */
#ifndef KANBAN_AUTH_SESSION_H
#define KANBAN_AUTH_SESSION_H

#include <stdint.h>

#include "http.h"

#define AUTH_COOKIE "kanban_session"
#define AUTH_TOKEN_LEN 43 /* base64url, no padding, of 32 bytes */
#define AUTH_HASH_LEN 64  /* hex of 32 bytes */
#define AUTH_SESSION_DAYS 30
#define AUTH_CACHE_TTL_MS 60000
#define AUTH_NAME_MAX 64

/* A new random token and its hash (both NUL-terminated). */
void auth_token_new(char token[AUTH_TOKEN_LEN + 1], char hash[AUTH_HASH_LEN + 1]);

/* The hash of a token presented by a client. 0 on success, -1 if `token` is
 * not of the shape auth_token_new makes (then nothing is looked up). */
int auth_token_hash(const char *token, char hash[AUTH_HASH_LEN + 1]);

/* The request's session cookie hashed: 1 if there is a well-formed one. */
int auth_request_hash(const lith_http_req *req, char hash[AUTH_HASH_LEN + 1]);

/* Add the Set-Cookie header for `token` (NULL: a cookie that clears it). */
int auth_cookie_set(lith_http_req *req, const char *token);

/* ---- The cache (loop thread) --------------------------------------------------- */

typedef struct auth_cache auth_cache;

typedef struct auth_who {
  int64_t user_id;
  int64_t expires_ms; /* wall clock */
  char name[AUTH_NAME_MAX + 1];
} auth_who;

auth_cache *auth_cache_new(void);
/* 1 and *who if `hash` is cached and fresh. */
int auth_cache_get(auth_cache *c, const char *hash, auth_who *who);
void auth_cache_put(auth_cache *c, const char *hash, const auth_who *who);
void auth_cache_drop(auth_cache *c, const char *hash);
void auth_cache_free(auth_cache *c);

#endif
