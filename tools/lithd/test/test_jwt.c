/*
 * test_jwt — request/jwt.c, sqld's EdDSA tokens: keys in both of sqld's
 * forms (PEM, raw URL-safe base64) and the files refused; tokens made here
 * with a fresh Ed25519 key: full and read-only access, per database (the
 * legacy "id"/"a" and the "p" claim), and every forgery refused: another
 * key, alg "none", HS256 keyed with the public key, an expired or
 * not-yet-valid token, a tampered payload or signature, bad base64, a huge
 * token, another database.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jwt.h"
#include "jwtmint.h"

static EVP_PKEY *key, *other;
static lithd_jwt_keys *keys; /* key's public half, PEM */
static int64_t now;

static int setup(void **state) {
  (void)state;
  char err[256];
  key = mint_key();
  other = mint_key();
  if (key == NULL || other == NULL)
    return -1;
  char *pem = mint_pub_pem(key);
  int rc = lithd_jwt_keys_parse(pem, strlen(pem), &keys, err, sizeof err);
  free(pem);
  now = (int64_t)time(NULL);
  return rc;
}

static int teardown(void **state) {
  (void)state;
  lithd_jwt_keys_free(keys);
  EVP_PKEY_free(key);
  EVP_PKEY_free(other);
  return 0;
}

/* The outcome of tok on db; *grant set. */
static int check_on(lithd_jwt_keys *k, const char *tok, const char *db, int *grant, char *msg) {
  return lithd_jwt_check(k, tok, strlen(tok), now, db, grant, msg, 256);
}

/* tok's outcome and grant on db with `keys`; the token freed. */
static void expect(char *tok, const char *db, int rc, int grant) {
  char msg[256] = "";
  int g = -1;
  int got = check_on(keys, tok, db, &g, msg);
  if (got != rc || g != grant)
    fail_msg("token on %s: rc %d grant %d (%s), want rc %d grant %d", db ? db : "(none)", got, g, msg, rc,
             grant);
  if (rc != LITHD_JWT_OK)
    assert_true(msg[0] != '\0');
  if (strlen(tok) > 8)
    assert_null(strstr(msg, tok)); /* never quoted */
  free(tok);
}

static void test_keys(void **state) {
  (void)state;
  char err[256];
  lithd_jwt_keys *k = NULL;
  int g;
  /* the raw form, with the newline an editor adds */
  char *raw = mint_pub_raw(key), *line = malloc(strlen(raw) + 2);
  sprintf(line, "%s\n", raw);
  assert_int_equal(lithd_jwt_keys_parse(line, strlen(line), &k, err, sizeof err), 0);
  assert_int_equal(lithd_jwt_keys_count(k), 1);
  char *tok = mint(key, "{}");
  assert_int_equal(lithd_jwt_check(k, tok, strlen(tok), now, "db", &g, err, sizeof err), LITHD_JWT_OK);
  assert_int_equal(g, LITHD_JWT_FULL);
  free(tok);
  lithd_jwt_keys_free(k);
  raw[5] = raw[5] == 'A' ? 'B' : 'A'; /* still 32 bytes: another key, or none */
  if (lithd_jwt_keys_parse(raw, strlen(raw), &k, err, sizeof err) == 0)
    lithd_jwt_keys_free(k);
  raw[10] = '\0'; /* not 32 bytes */
  assert_int_equal(lithd_jwt_keys_parse(raw, strlen(raw), &k, err, sizeof err), -1);
  assert_null(k);
  free(raw);
  free(line);

  /* two PEM keys: a token of either passes (sqld tries each) */
  char *a = mint_pub_pem(key), *b = mint_pub_pem(other), *both = malloc(strlen(a) + strlen(b) + 1);
  sprintf(both, "%s%s", a, b);
  assert_int_equal(lithd_jwt_keys_parse(both, strlen(both), &k, err, sizeof err), 0);
  assert_int_equal(lithd_jwt_keys_count(k), 2);
  tok = mint(other, "{\"a\":\"ro\"}");
  assert_int_equal(lithd_jwt_check(k, tok, strlen(tok), now, "db", &g, err, sizeof err), LITHD_JWT_OK);
  assert_int_equal(g, LITHD_JWT_READ);
  free(tok);
  lithd_jwt_keys_free(k);
  free(both);
  free(b);

  /* refused: a private key, another PEM kind, a non-Ed25519 key, nothing */
  char *priv = mint_priv_pem(key);
  assert_int_equal(lithd_jwt_keys_parse(priv, strlen(priv), &k, err, sizeof err), -1);
  assert_non_null(strstr(err, "private key"));
  free(priv);
  const char *cert = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  assert_int_equal(lithd_jwt_keys_parse(cert, strlen(cert), &k, err, sizeof err), -1);
  EVP_PKEY *ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
  assert_non_null(ec);
  char *ecpem = mint_pub_pem(ec);
  assert_int_equal(lithd_jwt_keys_parse(ecpem, strlen(ecpem), &k, err, sizeof err), -1);
  assert_non_null(strstr(err, "Ed25519"));
  free(ecpem);
  EVP_PKEY_free(ec);
  assert_int_equal(lithd_jwt_keys_parse("", 0, &k, err, sizeof err), -1);
  a[30] ^= 1; /* a PEM block OpenSSL cannot read */
  assert_int_equal(lithd_jwt_keys_parse(a, strlen(a), &k, err, sizeof err), -1);
  free(a);
  assert_int_equal(lithd_jwt_keys_load("/nonexistent/key.pem", &k, err, sizeof err), -1);
  assert_non_null(strstr(err, "/nonexistent/key.pem"));
}

/* sqld's legacy claims: "a" on "id" (or every database). */
static void test_grants(void **state) {
  (void)state;
  expect(mint(key, "{}"), "db", LITHD_JWT_OK, LITHD_JWT_FULL);
  expect(mint(key, "{}"), NULL, LITHD_JWT_OK, LITHD_JWT_FULL);
  expect(mint(key, "{\"a\":\"rw\"}"), "db", LITHD_JWT_OK, LITHD_JWT_FULL);
  expect(mint(key, "{\"a\":\"ro\"}"), "db", LITHD_JWT_OK, LITHD_JWT_READ);
  expect(mint(key, "{\"a\":\"roa\",\"iat\":1}"), "db", LITHD_JWT_OK, LITHD_JWT_READ);
  expect(mint(key, "{\"a\":null,\"id\":null}"), "db", LITHD_JWT_OK, LITHD_JWT_FULL);
  expect(mint(key, "{\"a\":\"ro\",\"id\":\"db\"}"), "db", LITHD_JWT_OK, LITHD_JWT_READ);
  /* another database: nothing */
  expect(mint(key, "{\"a\":\"rw\",\"id\":\"other\"}"), "db", LITHD_JWT_OK, LITHD_JWT_NONE);
  expect(mint(key, "{\"id\":\"db\"}"), NULL, LITHD_JWT_OK, LITHD_JWT_NONE);
  expect(mint(key, "{\"id\":\"db\\u0000x\"}"), "db", LITHD_JWT_OK, LITHD_JWT_NONE);
  /* claims of the wrong type or value: refused whole */
  expect(mint(key, "{\"a\":\"admin\"}"), "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  expect(mint(key, "{\"a\":\"rwa\"}"), "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  expect(mint(key, "{\"a\":1}"), "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  expect(mint(key, "{\"id\":7}"), "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  expect(mint(key, "[1]"), "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  expect(mint(key, "not json"), "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
}

/* "p": per database, "id" and "a" ignored beside it. */
static void test_p_claim(void **state) {
  (void)state;
  const char *p = "{\"a\":\"rw\",\"p\":{\"rw\":{\"ns\":[\"w\"]},\"ro\":{\"ns\":[\"r\",\"x\"]},"
                  "\"roa\":{\"ns\":[\"ra\"]},\"rwa\":{\"ns\":[\"wa\"]},\"ddl\":{\"ns\":[\"d\"]}}}";
  expect(mint(key, p), "w", LITHD_JWT_OK, LITHD_JWT_FULL);
  expect(mint(key, p), "wa", LITHD_JWT_OK, LITHD_JWT_FULL);
  expect(mint(key, p), "d", LITHD_JWT_OK, LITHD_JWT_FULL);
  expect(mint(key, p), "r", LITHD_JWT_OK, LITHD_JWT_READ);
  expect(mint(key, p), "x", LITHD_JWT_OK, LITHD_JWT_READ);
  expect(mint(key, p), "ra", LITHD_JWT_OK, LITHD_JWT_READ);
  expect(mint(key, p), "db", LITHD_JWT_OK, LITHD_JWT_NONE);
  expect(mint(key, p), NULL, LITHD_JWT_OK, LITHD_JWT_NONE);
  /* both: the higher */
  expect(mint(key, "{\"p\":{\"ro\":{\"ns\":[\"db\"]},\"rw\":{\"ns\":[\"db\"]}}}"), "db", LITHD_JWT_OK,
         LITHD_JWT_FULL);
  /* an empty p grants nothing (not the legacy default of everything) */
  expect(mint(key, "{\"p\":{}}"), "db", LITHD_JWT_OK, LITHD_JWT_NONE);
  expect(mint(key, "{\"p\":{\"ro\":{\"tags\":[\"g\"]}}}"), "db", LITHD_JWT_OK, LITHD_JWT_NONE);
  expect(mint(key, "{\"p\":null,\"a\":\"ro\"}"), "db", LITHD_JWT_OK, LITHD_JWT_READ);
  expect(mint(key, "{\"p\":[]}"), "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  expect(mint(key, "{\"p\":{\"rw\":{\"ns\":\"db\"}}}"), "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  expect(mint(key, "{\"p\":{\"rw\":{\"ns\":[1]}}}"), "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  expect(mint(key, "{\"p\":{\"rw\":[\"db\"]}}"), "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
}

static void test_times(void **state) {
  (void)state;
  char payload[128];
  snprintf(payload, sizeof payload, "{\"exp\":%lld}", (long long)(now + 3600));
  expect(mint(key, payload), "db", LITHD_JWT_OK, LITHD_JWT_FULL);
  snprintf(payload, sizeof payload, "{\"exp\":%lld}", (long long)(now - 3600));
  expect(mint(key, payload), "db", LITHD_JWT_EXPIRED, LITHD_JWT_NONE);
  /* within the leeway: still good, as sqld's */
  snprintf(payload, sizeof payload, "{\"exp\":%lld}", (long long)(now - 30));
  expect(mint(key, payload), "db", LITHD_JWT_OK, LITHD_JWT_FULL);
  snprintf(payload, sizeof payload, "{\"exp\":%lld,\"a\":\"ro\"}", (long long)(now - LITHD_JWT_LEEWAY_S - 2));
  expect(mint(key, payload), "db", LITHD_JWT_EXPIRED, LITHD_JWT_NONE);
  expect(mint(key, "{\"exp\":-9223372036854775807}"), "db", LITHD_JWT_EXPIRED, LITHD_JWT_NONE);
  expect(mint(key, "{\"exp\":\"tomorrow\"}"), "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  expect(mint(key, "{\"exp\":1e20}"), "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  snprintf(payload, sizeof payload, "{\"nbf\":%lld}", (long long)(now + 3600));
  expect(mint(key, payload), "db", LITHD_JWT_IMMATURE, LITHD_JWT_NONE);
  snprintf(payload, sizeof payload, "{\"nbf\":%lld}", (long long)(now - 10));
  expect(mint(key, payload), "db", LITHD_JWT_OK, LITHD_JWT_FULL);

  /* a remembered token is judged again: past its exp, refused */
  char msg[256];
  int g;
  snprintf(payload, sizeof payload, "{\"exp\":%lld}", (long long)(now + 100));
  char *tok = mint(key, payload);
  assert_int_equal(check_on(keys, tok, "db", &g, msg), LITHD_JWT_OK);
  assert_int_equal(lithd_jwt_check(keys, tok, strlen(tok), now + 1000, "db", &g, msg, sizeof msg),
                   LITHD_JWT_EXPIRED);
  free(tok);
}

/* Every forgery: refused, whatever its claims say. */
static void test_forgeries(void **state) {
  (void)state;
  const char *claims = "{\"a\":\"rw\"}";
  char *pem = mint_pub_pem(key);
  expect(mint(other, claims), "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  expect(mint_none(claims), "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  expect(mint_hs256(pem, claims), "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  expect(mint_with_header(key, "{\"alg\":\"HS256\"}", claims), "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  expect(mint_with_header(key, "{\"alg\":\"eddsa\"}", claims), "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  expect(mint_with_header(key, "{\"typ\":\"JWT\"}", claims), "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  expect(mint_with_header(key, "{\"alg\":\"EdDSA\",\"crit\":[\"b64\"]}", claims), "db", LITHD_JWT_INVALID,
         LITHD_JWT_NONE);
  expect(mint_with_header(key, "{\"alg\":\"EdDSA\",\"alg\":\"none\"}", claims), "db", LITHD_JWT_INVALID,
         LITHD_JWT_NONE);
  expect(mint_with_header(key, "[]", claims), "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  expect(mint_with_header(key, "{\"alg\":\"EdDSA\"}", claims), "db", LITHD_JWT_OK, LITHD_JWT_FULL);
  free(pem);

  /* a read-only token with its payload swapped for a full one */
  char *ro = mint(key, "{\"a\":\"ro\"}"), *rw = mint(key, "{\"a\":\"rw\"}");
  char *d1 = strchr(ro, '.'), *d2 = strrchr(ro, '.'), *r1 = strchr(rw, '.'), *r2 = strrchr(rw, '.');
  char *swapped = malloc(strlen(ro) + strlen(rw));
  sprintf(swapped, "%.*s%.*s%s", (int)(d1 - ro), ro, (int)(r2 - r1), r1, d2);
  expect(swapped, "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  /* one character of the payload changed */
  char *t = strdup(ro);
  t[d1 - ro + 3] = t[d1 - ro + 3] == 'A' ? 'B' : 'A';
  expect(t, "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  /* of the signature */
  t = strdup(ro);
  t[d2 - ro + 5] = t[d2 - ro + 5] == 'A' ? 'B' : 'A';
  expect(t, "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  /* the signature cut, lengthened, gone */
  t = strdup(ro);
  t[strlen(t) - 4] = '\0';
  expect(t, "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  t = malloc(strlen(ro) + 8);
  sprintf(t, "%sAAAA", ro);
  expect(t, "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  t = strdup(ro);
  t[d2 - ro + 1] = '\0';
  expect(t, "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  /* the signature's last character with its unused low bits set: the same
   * bytes to a lax decoder, another text to a strict one */
  t = strdup(ro);
  {
    static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    char *last = t + strlen(t) - 1;
    *last = al[(strchr(al, *last) - al) ^ 1];
  }
  expect(t, "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  /* bad base64: padding, the other alphabet, a stray character, a dot more */
  t = malloc(strlen(ro) + 4);
  sprintf(t, "%s==", ro);
  expect(t, "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  t = strdup(ro);
  for (char *c = t; *c; c++)
    if (*c == '-' || *c == '_')
      *c = *c == '-' ? '+' : '/';
  if (strcmp(t, ro) == 0)
    t[1] = '+';
  expect(t, "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  t = strdup(ro);
  t[2] = '*';
  expect(t, "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  t = malloc(strlen(ro) + 3);
  sprintf(t, "%s.x", ro);
  expect(t, "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  expect(strdup(""), "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  expect(strdup("abc"), "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  expect(strdup(".."), "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  free(ro);
  free(rw);

  /* huge: a token past LITHD_JWT_MAX, a header past its bound, both signed */
  size_t n = LITHD_JWT_MAX;
  char *big = malloc(n + 64);
  int k = snprintf(big, n + 64, "{\"a\":\"rw\",\"pad\":\"");
  memset(big + k, 'x', n - (size_t)k);
  strcpy(big + n, "\"}");
  expect(mint(key, big), "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  k = snprintf(big, n + 64, "{\"alg\":\"EdDSA\",\"kid\":\"");
  memset(big + k, 'k', LITHD_JWT_HEADER_MAX - (size_t)k);
  strcpy(big + LITHD_JWT_HEADER_MAX, "\"}");
  expect(mint_with_header(key, big, claims), "db", LITHD_JWT_INVALID, LITHD_JWT_NONE);
  free(big);
}

/* A remembered token keeps its verdict per database, and a token refused
 * is not remembered as good. */
static void test_cache(void **state) {
  (void)state;
  char msg[256];
  int g;
  char *tok = mint(key, "{\"a\":\"ro\",\"id\":\"db\"}");
  for (int i = 0; i < 3; i++) {
    assert_int_equal(check_on(keys, tok, "db", &g, msg), LITHD_JWT_OK);
    assert_int_equal(g, LITHD_JWT_READ);
    assert_int_equal(check_on(keys, tok, "other", &g, msg), LITHD_JWT_OK);
    assert_int_equal(g, LITHD_JWT_NONE);
  }
  free(tok);
  tok = mint(other, "{}");
  for (int i = 0; i < 2; i++)
    assert_int_equal(check_on(keys, tok, "db", &g, msg), LITHD_JWT_INVALID);
  free(tok);
  /* more tokens than the table holds: each still judged right, twice */
  char *many[300];
  for (int i = 0; i < 300; i++) {
    char payload[64];
    snprintf(payload, sizeof payload, "{\"a\":\"%s\",\"n\":%d}", i % 2 ? "ro" : "rw", i);
    many[i] = mint(key, payload);
  }
  for (int round = 0; round < 2; round++)
    for (int i = 0; i < 300; i++) {
      assert_int_equal(check_on(keys, many[i], "db", &g, msg), LITHD_JWT_OK);
      assert_int_equal(g, i % 2 ? LITHD_JWT_READ : LITHD_JWT_FULL);
    }
  for (int i = 0; i < 300; i++)
    free(many[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_keys),  cmocka_unit_test(test_grants),    cmocka_unit_test(test_p_claim),
      cmocka_unit_test(test_times), cmocka_unit_test(test_forgeries), cmocka_unit_test(test_cache),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
