/*
 * Bearer tokens (RFC 6750): "Authorization: Bearer <token>".
 *
 * The comparison must not tell an attacker, through its timing, how many
 * leading bytes of a guess were right. lith_http_equal_ct therefore looks at
 * every byte of the secret whatever the guess holds: differences are OR-ed
 * into one accumulator (volatile, so the compiler can neither stop the loop
 * at the first difference nor skip the rest), the two lengths' difference
 * goes into the same accumulator, and the only branch inside the loop is on
 * the index against the guess's length, which the attacker already knows.
 * Its time depends on the secret's length alone.
 */
#include <string.h>
#include <strings.h>

#include "internal.h"

int lith_http_equal_ct(const void *a, size_t alen, const void *b, size_t blen) {
  const unsigned char *x = a, *y = b;
  volatile unsigned char acc = 0;
  size_t d = alen ^ blen;
  for (size_t i = 0; i < sizeof d; i++)
    acc |= (unsigned char)(d >> (8 * i));
  for (size_t i = 0; i < blen; i++) {
    unsigned char xi = i < alen ? x[i] : 0;
    acc |= (unsigned char)(xi ^ y[i]);
  }
  return acc == 0;
}

int lith_http_bearer(lith_http_req *req, const char *token) {
  if (!req || !token) {
    lh_fail(LITH_HTTP_MISUSE, "lith_http_bearer: a request and a token");
    return 0;
  }
  const char *v = lith_http_req_header(req, "authorization");
  const char *given = NULL;
  size_t glen = 0;
  if (v) {
    while (*v == ' ' || *v == '\t')
      v++;
    if (!strncasecmp(v, "bearer", 6) && (v[6] == ' ' || v[6] == '\t')) {
      given = v + 6;
      while (*given == ' ' || *given == '\t')
        given++;
      glen = strlen(given);
      while (glen && (given[glen - 1] == ' ' || given[glen - 1] == '\t'))
        glen--;
    }
  }
  size_t tlen = strlen(token);
  if (given && glen && tlen && lith_http_equal_ct(given, glen, token, tlen))
    return 1;
  return given && glen ? -1 : 0;
}

int lith_http_check_bearer(lith_http_req *req, const char *token) {
  int got = lith_http_bearer(req, token);
  if (got == 1)
    return 1;
  if (!req || !token)
    return 0;
  int bad = got == -1;
  lith_http_add_header(req, "www-authenticate",
                       bad ? "Bearer realm=\"lith\", error=\"invalid_token\"" : "Bearer realm=\"lith\"");
  lith_http_respond_error(req, 401, bad ? "invalid token" : "a bearer token is required");
  return 0;
}
