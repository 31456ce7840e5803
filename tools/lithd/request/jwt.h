/*
 * lithd jwt — bearer tokens as sqld (libSQL's server) issues them: JSON
 * Web Tokens signed with Ed25519 (alg "EdDSA"), checked against the public
 * keys of --auth-jwt-key-file.
 *
 * The key file holds what sqld's --auth-jwt-key-file holds: one or more
 * PEM "PUBLIC KEY" blocks (SubjectPublicKeyInfo, as `openssl pkey -pubout`
 * writes them), or the 32 bytes of one key in URL-safe base64. A token is
 * accepted when one of the keys verifies it (sqld tries each key too).
 *
 * A token is header.payload.signature, each in URL-safe base64 without
 * padding. Refused (LITHD_JWT_INVALID): anything but three such parts, a
 * header whose "alg" is not exactly "EdDSA" (so "none", HS256 with the
 * public key as its secret, RS256, ... never reach a verifier) or that
 * carries "crit", a signature no key verifies, a payload that is not a
 * JSON object or whose claims have the wrong types. The payload is read
 * only after its signature was verified.
 *
 * The claims, sqld's (libsql-server/src/auth): "exp" (seconds since the
 * epoch; past it, with LITHD_JWT_LEEWAY_S of leeway as sqld's
 * jsonwebtoken: LITHD_JWT_EXPIRED) and "nbf" (before it, with the same
 * leeway: LITHD_JWT_IMMATURE; sqld does not check nbf, lithd does). What
 * the token grants on a database NAME:
 *   - with "p" (an object): {"rw": {"ns": [NAME, ...]}, "ro": {...},
 *     "rwa": {...}, "roa": {...}, "ddl": {...}}: full access to the
 *     databases listed under rw, rwa or ddl; reads only on those listed
 *     under ro or roa; nothing elsewhere ("id" and "a" are then ignored,
 *     as sqld ignores them);
 *   - else "a" ("rw", the default; "ro" and "roa": reads only) on the
 *     database named by "id", or on every database without "id".
 * Other claims (iat, iss, sub, aud, ...) are not read.
 *
 * Bounds: a token of at most LITHD_JWT_MAX bytes, a header of at most
 * LITHD_JWT_HEADER_MAX, at most LITHD_JWT_KEYS_MAX keys, a key file of at
 * most LITHD_JWT_KEYFILE_MAX bytes.
 *
 * Threads: a key set is read-only once loaded, but for its cache of
 * verified tokens (lithd_jwt_check): one thread at a time (lithd: the
 * loop's).
 */
#ifndef LITHD_JWT_H
#define LITHD_JWT_H

#include <stddef.h>
#include <stdint.h>

#define LITHD_JWT_MAX 8192          /* a token's bytes */
#define LITHD_JWT_HEADER_MAX 1024   /* the header's base64 */
#define LITHD_JWT_KEYS_MAX 16       /* keys in a key file */
#define LITHD_JWT_KEYFILE_MAX 65536 /* a key file's bytes */
#define LITHD_JWT_LEEWAY_S 60       /* clock skew allowed on exp and nbf */

/* lithd_jwt_check's outcomes. */
enum { LITHD_JWT_OK = 0, LITHD_JWT_INVALID, LITHD_JWT_EXPIRED, LITHD_JWT_IMMATURE };

/* What a token grants on one database. */
enum { LITHD_JWT_NONE = 0, LITHD_JWT_READ = 1, LITHD_JWT_FULL = 2 };

typedef struct lithd_jwt_keys lithd_jwt_keys;

/* The keys in text[0..len) (a key file's bytes). 0 with *out (the caller
 * frees it with lithd_jwt_keys_free), or -1 with err (errsz bytes) saying
 * why: a private key, a PEM block of another kind, a key that is not
 * Ed25519, base64 that does not hold 32 bytes, no key, too many keys. */
int lithd_jwt_keys_parse(const char *text, size_t len, lithd_jwt_keys **out, char *err, size_t errsz);

/* lithd_jwt_keys_parse of the file at path (at most
 * LITHD_JWT_KEYFILE_MAX bytes); err begins with the path. */
int lithd_jwt_keys_load(const char *path, lithd_jwt_keys **out, char *err, size_t errsz);

/* How many keys k holds. */
int lithd_jwt_keys_count(const lithd_jwt_keys *k);

void lithd_jwt_keys_free(lithd_jwt_keys *k);

/* Check token[0..len) (the bearer token's text) at time now (seconds
 * since the epoch) for database db (NUL-terminated; NULL: no database, a
 * server-wide route: only a token for every database grants anything).
 * LITHD_JWT_OK with *grant (LITHD_JWT_NONE when it holds nothing for db,
 * with msg saying so), or another outcome with msg saying why (never
 * quoting the token). msg: cap bytes. A verified token is remembered (by
 * its SHA-256) so that its next use costs no signature check; its claims
 * are judged again every time. */
int lithd_jwt_check(lithd_jwt_keys *k, const char *token, size_t len, int64_t now, const char *db, int *grant,
                    char *msg, size_t cap);

/* The claims' judge alone: what the verified payload json[0..len) grants
 * on db at now, as lithd_jwt_check (exposed for tests and the fuzzer). */
int lithd_jwt_claims(const char *json, size_t len, int64_t now, const char *db, int *grant, char *msg,
                     size_t cap);

#endif /* LITHD_JWT_H */
