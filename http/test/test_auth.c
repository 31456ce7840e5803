/*
 * Tests of http/auth.c: bearer tokens and the constant-time comparison.
 *
 * The server runs on a loop thread of its own and the client writes raw
 * HTTP on plain sockets (helper.h).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "helper.h"

/* ---- bearer tokens --------------------------------------------------------------- */

static void test_bearer(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  char v[128];
  exchange(f->port, "GET /secret HTTP/1.1\r\nHost: t\r\n\r\n", r);
  assert_int_equal(r->status, 401);
  assert_string_equal(resp_header(r, "www-authenticate", v, sizeof v), "Bearer realm=\"lith\"");
  assert_string_equal(r->body,
                      "{\"error\":{\"code\":\"unauthorized\",\"message\":\"a bearer token is required\"}}");
  exchange(f->port, "GET /secret HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer wrong\r\n\r\n", r);
  assert_int_equal(r->status, 401);
  assert_string_equal(resp_header(r, "www-authenticate", v, sizeof v),
                      "Bearer realm=\"lith\", error=\"invalid_token\"");
  /* a prefix of the token, the token plus more, another scheme: all refused */
  exchange(f->port, "GET /secret HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer s3cret\r\n\r\n", r);
  assert_int_equal(r->status, 401);
  exchange(f->port, "GET /secret HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " TOKEN "x\r\n\r\n", r);
  assert_int_equal(r->status, 401);
  exchange(f->port, "GET /secret HTTP/1.1\r\nHost: t\r\nAuthorization: Basic " TOKEN "\r\n\r\n", r);
  assert_int_equal(r->status, 401);
  exchange(f->port, "GET /secret HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " TOKEN "\r\n\r\n", r);
  assert_int_equal(r->status, 200);
  assert_string_equal(r->body, "{\"ok\":true}");
  /* the scheme is case-insensitive (RFC 7235) */
  exchange(f->port, "GET /secret HTTP/1.1\r\nHost: t\r\nAuthorization: bearer  " TOKEN "\r\n\r\n", r);
  assert_int_equal(r->status, 200);
  free(r);
}

static void test_equal_ct(void **state) {
  (void)state;
  assert_true(lith_http_equal_ct("abc", 3, "abc", 3));
  assert_false(lith_http_equal_ct("abd", 3, "abc", 3));
  assert_false(lith_http_equal_ct("ab", 2, "abc", 3));
  assert_false(lith_http_equal_ct("abcd", 4, "abc", 3));
  assert_false(lith_http_equal_ct("", 0, "abc", 3));
  assert_true(lith_http_equal_ct("", 0, "", 0));
  assert_false(lith_http_equal_ct("a\0c", 3, "a\0d", 3));
  /* lengths differing by a multiple of 256 are still different */
  char big[257];
  memset(big, 'a', sizeof big);
  assert_false(lith_http_equal_ct(big, 257, big, 1));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_bearer, setup, teardown),
      cmocka_unit_test(test_equal_ct),
  };
  return HT_RUN(tests);
}
