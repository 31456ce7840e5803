/*
 * lithd jwt — sqld's EdDSA tokens (see jwt.h).
 *
 * Design:
 *   - The token is cut at its two dots and each part decoded with a strict
 *     URL-safe base64 (no padding, no other alphabet, the unused low bits
 *     zero: one text per byte string), into buffers bounded by
 *     LITHD_JWT_MAX. The header is read with json.c and must say
 *     "alg":"EdDSA": the algorithm is the key's, never the token's choice,
 *     so no token can make lithd verify it another way.
 *   - Ed25519 is OpenSSL's (EVP_DigestVerify over "header.payload" as
 *     sent). Only a payload whose signature verified is parsed.
 *   - A check costs a signature verification (tens of microseconds on the
 *     loop thread), for every request of a client that sends its token
 *     each time. So the verified tokens are remembered in a small table,
 *     by their SHA-256 (compared whole: a lookup's time tells nothing of a
 *     token), with their payload; a hit judges the claims again (exp, the
 *     database), it only skips the signature.
 */
#include "jwt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "json.h"
#include "textfile.h"

#define SIG_LEN 64
#define RAW_KEY_LEN 32
/* The remembered tokens: CACHE_SETS sets of CACHE_WAYS, a token's set
 * chosen by its hash, the least recently used of the set replaced: many
 * clients' tokens at once do not push each other out. */
#define CACHE_WAYS 4
#define CACHE_SETS 64
#define CACHE_SLOTS (CACHE_WAYS * CACHE_SETS)

typedef struct cached {
  unsigned char hash[32]; /* SHA-256 of the token */
  char *payload;          /* malloc'd, NUL after len bytes; NULL: empty */
  size_t len;
  uint64_t used; /* the set's clock when last used */
} cached;

struct lithd_jwt_keys {
  EVP_PKEY *keys[LITHD_JWT_KEYS_MAX];
  int n;
  cached cache[CACHE_SLOTS];
  uint64_t clock;
};

/* ---- Keys ------------------------------------------------------------------ */

void lithd_jwt_keys_free(lithd_jwt_keys *k) {
  if (k == NULL)
    return;
  for (int i = 0; i < k->n; i++)
    EVP_PKEY_free(k->keys[i]);
  for (int i = 0; i < CACHE_SLOTS; i++)
    free(k->cache[i].payload);
  free(k);
}

int lithd_jwt_keys_count(const lithd_jwt_keys *k) { return k != NULL ? k->n : 0; }

/* The value of URL-safe base64 character c, or -1. */
static int b64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  if (c == '-')
    return 62;
  if (c == '_')
    return 63;
  return -1;
}

/* Strict URL-safe base64 without padding: in[0..n) into out (cap bytes).
 * The byte count, or -1 (a character outside the alphabet, a length no
 * encoding has, low bits left over, no room). */
static long b64url_decode(const char *in, size_t n, unsigned char *out, size_t cap) {
  size_t o = 0;
  uint32_t acc = 0;
  int bits = 0;
  if (n % 4 == 1)
    return -1;
  if (n / 4 * 3 + (n % 4 ? n % 4 - 1 : 0) > cap)
    return -1;
  for (size_t i = 0; i < n; i++) {
    int v = b64_value((unsigned char)in[i]);
    if (v < 0)
      return -1;
    acc = (acc << 6) | (uint32_t)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (unsigned char)(acc >> bits);
      acc &= (1u << bits) - 1;
    }
  }
  if (acc != 0) /* the bits past the last byte: zero in the one encoding */
    return -1;
  return (long)o;
}

static int add_key(lithd_jwt_keys *k, EVP_PKEY *p, char *err, size_t errsz) {
  if (EVP_PKEY_id(p) != EVP_PKEY_ED25519) {
    EVP_PKEY_free(p);
    snprintf(err, errsz, "the key is not an Ed25519 key (sqld's tokens are signed with EdDSA)");
    return -1;
  }
  if (k->n == LITHD_JWT_KEYS_MAX) {
    EVP_PKEY_free(p);
    snprintf(err, errsz, "more than %d keys", LITHD_JWT_KEYS_MAX);
    return -1;
  }
  k->keys[k->n++] = p;
  return 0;
}

/* PEM blocks: each one "PUBLIC KEY". */
static int parse_pem(lithd_jwt_keys *k, const char *text, size_t len, char *err, size_t errsz) {
  static const char begin[] = "-----BEGIN ", end_mark[] = "-----END ";
  const char *p = text, *stop = text + len;
  while (p < stop) {
    const char *b = NULL;
    for (const char *q = p; q + sizeof begin - 1 <= stop; q++)
      if (memcmp(q, begin, sizeof begin - 1) == 0) {
        b = q;
        break;
      }
    if (b == NULL)
      break;
    const char *tag = b + sizeof begin - 1, *tag_end = tag;
    while (tag_end < stop && *tag_end != '-' && *tag_end != '\n')
      tag_end++;
    size_t tag_len = (size_t)(tag_end - tag);
    if (!(tag_len == 10 && memcmp(tag, "PUBLIC KEY", 10) == 0)) {
      if ((tag_len == 11 && memcmp(tag, "PRIVATE KEY", 11) == 0) ||
          (tag_len > 11 && memcmp(tag_end - 11, "PRIVATE KEY", 11) == 0))
        snprintf(err, errsz, "it holds a private key; a public key is expected (openssl pkey -pubout)");
      else
        snprintf(err, errsz, "a PEM block of a kind not supported (\"%.*s\"): a \"PUBLIC KEY\" is expected",
                 (int)(tag_len > 40 ? 40 : tag_len), tag);
      return -1;
    }
    const char *e = NULL;
    for (const char *q = tag_end; q + sizeof end_mark - 1 <= stop; q++)
      if (memcmp(q, end_mark, sizeof end_mark - 1) == 0) {
        e = q;
        break;
      }
    if (e == NULL) {
      snprintf(err, errsz, "a PEM block without its END line");
      return -1;
    }
    const char *after = e;
    while (after < stop && *after != '\n')
      after++;
    BIO *bio = BIO_new_mem_buf(b, (int)(after - b));
    EVP_PKEY *key = bio != NULL ? PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL) : NULL;
    BIO_free(bio);
    if (key == NULL) {
      snprintf(err, errsz, "a PUBLIC KEY block OpenSSL cannot read");
      return -1;
    }
    if (add_key(k, key, err, errsz) != 0)
      return -1;
    p = after;
  }
  if (k->n == 0) {
    snprintf(err, errsz, "no key in it");
    return -1;
  }
  return 0;
}

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

int lithd_jwt_keys_parse(const char *text, size_t len, lithd_jwt_keys **out, char *err, size_t errsz) {
  lithd_jwt_keys *k = calloc(1, sizeof *k);
  *out = NULL;
  if (k == NULL) {
    snprintf(err, errsz, "out of memory");
    return -1;
  }
  while (len > 0 && is_blank(*text)) /* blanks around the key: an editor's newline */
    text++, len--;
  while (len > 0 && is_blank(text[len - 1]))
    len--;
  if (len >= 5 && memcmp(text, "-----", 5) == 0) {
    if (parse_pem(k, text, len, err, errsz) != 0)
      goto fail;
  } else { /* the key's 32 bytes in URL-safe base64 (sqld: from_ed_components) */
    unsigned char raw[RAW_KEY_LEN + 3];
    size_t n = len;
    while (n > 0 && text[n - 1] == '=') /* padding, if a tool added it */
      n--;
    long got = n <= 44 ? b64url_decode(text, n, raw, sizeof raw) : -1;
    if (got != RAW_KEY_LEN) {
      snprintf(err, errsz, "neither a PEM \"PUBLIC KEY\" nor an Ed25519 key's 32 bytes in URL-safe base64");
      goto fail;
    }
    EVP_PKEY *key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, raw, RAW_KEY_LEN);
    if (key == NULL) {
      snprintf(err, errsz, "OpenSSL refused the key's 32 bytes");
      goto fail;
    }
    if (add_key(k, key, err, errsz) != 0)
      goto fail;
  }
  *out = k;
  return 0;
fail:
  lithd_jwt_keys_free(k);
  return -1;
}

int lithd_jwt_keys_load(const char *path, lithd_jwt_keys **out, char *err, size_t errsz) {
  char *text = NULL, why[256];
  size_t len = 0;
  *out = NULL;
  if (lithd_text_load(path, LITHD_JWT_KEYFILE_MAX, NULL, &text, &len, err, errsz) != 0)
    return -1;
  int rc = lithd_jwt_keys_parse(text, len, out, why, sizeof why);
  free(text);
  if (rc != 0)
    snprintf(err, errsz, "%s: %s", path, why);
  return rc;
}

/* ---- Claims ---------------------------------------------------------------- */

/* Whether scope (p's "rw", "ro", ...: null or {"ns": [names], "tags": ...})
 * lists db. -1: not of that shape. */
static int scope_lists(const lj_value *scope, const char *db) {
  if (scope == NULL || scope->type == LJ_NULL)
    return 0;
  if (scope->type != LJ_OBJECT)
    return -1;
  const lj_value *ns = lj_get(scope, "ns");
  if (ns == NULL || ns->type == LJ_NULL)
    return 0;
  if (ns->type != LJ_ARRAY)
    return -1;
  int found = 0;
  for (size_t i = 0; i < ns->n; i++) {
    const lj_value *v = ns->u.items[i];
    if (v->type != LJ_STRING)
      return -1;
    if (db != NULL && v->n == strlen(db) && memcmp(v->u.s, db, v->n) == 0)
      found = 1;
  }
  return found;
}

/* A time claim: absent or null (0), an integer (1, *t), else -1. */
static int time_claim(const lj_value *root, const char *name, int64_t *t) {
  const lj_value *v = lj_get(root, name);
  if (v == NULL || v->type == LJ_NULL)
    return 0;
  if (v->type != LJ_INT)
    return -1;
  *t = v->u.i;
  return 1;
}

static int judge(const lj_value *root, int64_t now, const char *db, int *grant, char *msg, size_t cap) {
  int64_t t = 0;
  int got;
  *grant = LITHD_JWT_NONE;
  if (root->type != LJ_OBJECT) {
    snprintf(msg, cap, "invalid token: its claims are not a JSON object");
    return LITHD_JWT_INVALID;
  }
  if ((got = time_claim(root, "exp", &t)) < 0) {
    snprintf(msg, cap, "invalid token: \"exp\" is not an integer");
    return LITHD_JWT_INVALID;
  }
  if (got && (t < INT64_MIN + LITHD_JWT_LEEWAY_S || t < now - LITHD_JWT_LEEWAY_S)) {
    snprintf(msg, cap, "the token has expired");
    return LITHD_JWT_EXPIRED;
  }
  if ((got = time_claim(root, "nbf", &t)) < 0) {
    snprintf(msg, cap, "invalid token: \"nbf\" is not an integer");
    return LITHD_JWT_INVALID;
  }
  if (got && t > now + LITHD_JWT_LEEWAY_S) {
    snprintf(msg, cap, "the token is not valid yet (nbf)");
    return LITHD_JWT_IMMATURE;
  }
  const lj_value *p = lj_get(root, "p");
  if (p != NULL && p->type != LJ_NULL) { /* per database: sqld's "Authorized" */
    static const char *const writes[] = {"rw", "rwa", "ddl"}, *const reads[] = {"ro", "roa"};
    int w = 0, r = 0;
    if (p->type != LJ_OBJECT) {
      snprintf(msg, cap, "invalid token: \"p\" is not an object");
      return LITHD_JWT_INVALID;
    }
    for (size_t i = 0; i < 3; i++) {
      int l = scope_lists(lj_get(p, writes[i]), db);
      if (l < 0)
        goto bad_scope;
      w |= l;
    }
    for (size_t i = 0; i < 2; i++) {
      int l = scope_lists(lj_get(p, reads[i]), db);
      if (l < 0)
        goto bad_scope;
      r |= l;
    }
    *grant = w ? LITHD_JWT_FULL : r ? LITHD_JWT_READ : LITHD_JWT_NONE;
    goto out;
  bad_scope:
    snprintf(msg, cap, "invalid token: a scope of \"p\" is not {\"ns\": [names]}");
    return LITHD_JWT_INVALID;
  }
  /* sqld's legacy claims: "a" on "id" (every database without it) */
  const lj_value *a = lj_get(root, "a"), *id = lj_get(root, "id");
  int level = LITHD_JWT_FULL;
  if (a != NULL && a->type != LJ_NULL) {
    if (a->type == LJ_STRING && strcmp(a->u.s, "rw") == 0 && a->n == 2)
      level = LITHD_JWT_FULL;
    else if (a->type == LJ_STRING &&
             ((a->n == 2 && strcmp(a->u.s, "ro") == 0) || (a->n == 3 && strcmp(a->u.s, "roa") == 0)))
      level = LITHD_JWT_READ;
    else {
      snprintf(msg, cap, "invalid token: \"a\" is not \"rw\", \"ro\" or \"roa\"");
      return LITHD_JWT_INVALID;
    }
  }
  if (id != NULL && id->type != LJ_NULL) {
    if (id->type != LJ_STRING) {
      snprintf(msg, cap, "invalid token: \"id\" is not a string");
      return LITHD_JWT_INVALID;
    }
    if (db == NULL || id->n != strlen(db) || memcmp(id->u.s, db, id->n) != 0)
      level = LITHD_JWT_NONE;
  }
  *grant = level;
out:
  if (*grant == LITHD_JWT_NONE) {
    if (db != NULL)
      snprintf(msg, cap, "the token grants no access to the database \"%.64s\"", db);
    else
      snprintf(msg, cap, "the token grants access to some databases only, and this route is of none");
  }
  return LITHD_JWT_OK;
}

int lithd_jwt_claims(const char *json, size_t len, int64_t now, const char *db, int *grant, char *msg,
                     size_t cap) {
  lithd_arena mem = {0};
  lj_value *root = NULL;
  int rc;
  *grant = LITHD_JWT_NONE;
  if (lj_parse(&mem, json, len, &root, NULL) != 0) {
    snprintf(msg, cap, "invalid token: its claims are not JSON");
    rc = LITHD_JWT_INVALID;
  } else {
    rc = judge(root, now, db, grant, msg, cap);
  }
  lithd_arena_free(&mem);
  return rc;
}

/* ---- Tokens ---------------------------------------------------------------- */

/* The header h[0..n) (decoded): {"alg": "EdDSA", ...} without "crit". */
static int header_ok(const char *h, size_t n, char *msg, size_t cap) {
  lithd_arena mem = {0};
  lj_value *root = NULL;
  int ok = 0;
  if (lj_parse(&mem, h, n, &root, NULL) != 0 || root->type != LJ_OBJECT) {
    snprintf(msg, cap, "invalid token: its header is not a JSON object");
  } else {
    const lj_value *alg = lj_get(root, "alg");
    if (alg == NULL || alg->type != LJ_STRING || alg->n != 5 || memcmp(alg->u.s, "EdDSA", 5) != 0)
      snprintf(msg, cap, "invalid token: its \"alg\" is not \"EdDSA\" (the only one lithd accepts)");
    else if (lj_get(root, "crit") != NULL)
      snprintf(msg, cap, "invalid token: its header has \"crit\" extensions lithd does not know");
    else
      ok = 1;
  }
  lithd_arena_free(&mem);
  return ok;
}

static int verified_by_a_key(const lithd_jwt_keys *k, const unsigned char *sig, const char *signed_part,
                             size_t n) {
  int ok = 0;
  for (int i = 0; i < k->n && !ok; i++) {
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx == NULL)
      return 0;
    if (EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, k->keys[i]) == 1 &&
        EVP_DigestVerify(ctx, sig, SIG_LEN, (const unsigned char *)signed_part, n) == 1)
      ok = 1;
    EVP_MD_CTX_free(ctx);
  }
  return ok;
}

static int sha256(const char *p, size_t n, unsigned char out[32]) {
  unsigned int len = 0;
  return EVP_Digest(p, n, out, &len, EVP_sha256(), NULL) == 1 && len == 32;
}

int lithd_jwt_check(lithd_jwt_keys *k, const char *token, size_t len, int64_t now, const char *db, int *grant,
                    char *msg, size_t cap) {
  unsigned char hash[32] = {0}, sig[SIG_LEN + 2];
  char *buf = NULL;
  int rc = LITHD_JWT_INVALID;
  *grant = LITHD_JWT_NONE;
  if (len > LITHD_JWT_MAX) {
    snprintf(msg, cap, "invalid token: longer than %d bytes", LITHD_JWT_MAX);
    return LITHD_JWT_INVALID;
  }
  const char *d1 = memchr(token, '.', len);
  const char *d2 = d1 != NULL ? memchr(d1 + 1, '.', len - (size_t)(d1 + 1 - token)) : NULL;
  if (d1 == NULL || d2 == NULL || memchr(d2 + 1, '.', len - (size_t)(d2 + 1 - token)) != NULL) {
    snprintf(msg, cap, "invalid token: not a JWT (header.payload.signature)");
    return LITHD_JWT_INVALID;
  }
  int have_hash = sha256(token, len, hash);
  cached *set = &k->cache[(hash[0] % CACHE_SETS) * CACHE_WAYS], *slot = set;
  for (int w = 0; have_hash && w < CACHE_WAYS; w++) {
    if (set[w].payload != NULL && memcmp(set[w].hash, hash, 32) == 0) {
      set[w].used = ++k->clock;
      return lithd_jwt_claims(set[w].payload, set[w].len, now, db, grant, msg, cap);
    }
    if (set[w].payload == NULL || (slot->payload != NULL && set[w].used < slot->used))
      slot = &set[w]; /* the one to replace: an empty one, else the least recently used */
  }

  size_t hlen = (size_t)(d1 - token), plen = (size_t)(d2 - d1 - 1), slen = len - (size_t)(d2 + 1 - token);
  if (hlen > LITHD_JWT_HEADER_MAX) {
    snprintf(msg, cap, "invalid token: its header is longer than %d bytes", LITHD_JWT_HEADER_MAX);
    return LITHD_JWT_INVALID;
  }
  if ((buf = malloc(hlen + plen + 2)) == NULL) {
    snprintf(msg, cap, "out of memory");
    return LITHD_JWT_INVALID;
  }
  long hn = b64url_decode(token, hlen, (unsigned char *)buf, hlen);
  long pn = hn >= 0 ? b64url_decode(d1 + 1, plen, (unsigned char *)buf + hn + 1, plen) : -1;
  long sn = pn >= 0 ? b64url_decode(d2 + 1, slen, sig, sizeof sig) : -1;
  if (hn < 0 || pn < 0 || sn < 0) {
    snprintf(msg, cap, "invalid token: a part is not URL-safe base64 without padding");
    goto out;
  }
  if (!header_ok(buf, (size_t)hn, msg, cap))
    goto out;
  if (sn != SIG_LEN || !verified_by_a_key(k, sig, token, (size_t)(d2 - token))) {
    snprintf(msg, cap, "invalid token: its signature is not of a key of --auth-jwt-key-file");
    goto out;
  }
  char *payload = buf + hn + 1;
  payload[pn] = '\0';
  rc = lithd_jwt_claims(payload, (size_t)pn, now, db, grant, msg, cap);
  if (rc == LITHD_JWT_OK && have_hash) { /* remembered: its signature holds for good */
    char *copy = malloc((size_t)pn + 1);
    if (copy != NULL) {
      memcpy(copy, payload, (size_t)pn + 1);
      free(slot->payload);
      memcpy(slot->hash, hash, 32);
      slot->payload = copy;
      slot->len = (size_t)pn;
      slot->used = ++k->clock;
    }
  }
out:
  free(buf);
  return rc;
}
