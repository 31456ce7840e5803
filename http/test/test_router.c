/*
 * Tests of http/router.c: a method and an exact path or a prefix to a
 * handler, the most specific route winning, 404 and 405 with Allow; an
 * encoded slash (or NUL) in the path matches no route.
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

/* ---- tests: routing, bodies --------------------------------------------------- */

static void test_get_route(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  char v[128];
  exchange(f->port, "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n", r);
  assert_int_equal(r->status, 200);
  assert_string_equal(r->body, "hello");
  assert_string_equal(resp_header(r, "content-type", v, sizeof v), "text/plain");
  assert_string_equal(resp_header(r, "content-length", v, sizeof v), "5");
  assert_string_equal(resp_header(r, "server", v, sizeof v), "lith");
  assert_int_equal(atomic_load(&f->hello_runs), 1);
  free(r);
}

static void test_unknown_path_404(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  char v[128];
  exchange(f->port, "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n", r);
  assert_int_equal(r->status, 404);
  assert_string_equal(r->body, "{\"error\":{\"code\":\"not_found\",\"message\":\"not found\"}}");
  assert_string_equal(resp_header(r, "content-type", v, sizeof v), "application/json");
  /* a prefix route does not match its own path without the slash */
  exchange(f->port, "GET /v1 HTTP/1.1\r\nHost: t\r\n\r\n", r);
  assert_int_equal(r->status, 404);
  /* a request-target that is no path: h2o answers, in our JSON shape */
  exchange(f->port, "OPTIONS * HTTP/1.1\r\nHost: t\r\n\r\n", r);
  assert_int_equal(r->status, 404);
  assert_string_equal(resp_header(r, "content-type", v, sizeof v), "application/json");
  assert_non_null(strstr(r->body, "\"error\":"));
  free(r);
}

static void test_wrong_method_405(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  char v[128];
  exchange(f->port, "DELETE /hello HTTP/1.1\r\nHost: t\r\n\r\n", r);
  assert_int_equal(r->status, 405);
  assert_string_equal(resp_header(r, "allow", v, sizeof v), "GET, HEAD");
  assert_string_equal(r->body,
                      "{\"error\":{\"code\":\"method_not_allowed\",\"message\":\"method not allowed\"}}");
  exchange(f->port, "POST /thing HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n", r);
  assert_int_equal(r->status, 405);
  assert_string_equal(resp_header(r, "allow", v, sizeof v), "GET, HEAD, PUT");
  exchange(f->port, "PUT /thing HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n", r);
  assert_int_equal(r->status, 200);
  /* exact and prefix routes: POST under /v1/ is allowed nowhere, once */
  exchange(f->port, "POST /v1/exact HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n", r);
  assert_int_equal(r->status, 405);
  assert_string_equal(resp_header(r, "allow", v, sizeof v), "GET, HEAD");
  assert_int_equal(atomic_load(&f->hello_runs), 0);
  free(r);
}

static void test_route_specificity(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  exchange(f->port, "GET /v1/exact HTTP/1.1\r\nHost: t\r\n\r\n", r);
  assert_string_equal(r->body, "exact");
  exchange(f->port, "GET /v1/exact/more HTTP/1.1\r\nHost: t\r\n\r\n", r);
  assert_string_equal(r->body, "prefix");
  exchange(f->port, "GET /v1/deeper/x?q=1 HTTP/1.1\r\nHost: t\r\n\r\n", r);
  assert_string_equal(r->body, "deeper");
  exchange(f->port, "GET /v1/ HTTP/1.1\r\nHost: t\r\n\r\n", r);
  assert_string_equal(r->body, "prefix");
  /* the path is normalized before routing */
  exchange(f->port, "GET /v1/x/../exact HTTP/1.1\r\nHost: t\r\n\r\n", r);
  assert_string_equal(r->body, "exact");
  free(r);
}

/* h2o decodes %2F into the path the routes see: an encoded slash (or NUL)
 * matches no route, exact or prefix; in the query it is only data. */
static void test_encoded_slash_matches_no_route(void **state) {
  fx *f = *state;
  resp *r = new_resp();
  static const char *const paths[] = {
      "/v1%2Fexact",        /* decoded: /v1/exact, an exact route */
      "/v1%2fexact",        /* either case */
      "/v1/deeper%2Fx",     /* decoded: under /v1/deeper/ */
      "/v1/a%2Fb",          /* under the /v1/ prefix, decoded or not */
      "/hello%2F",          /* decoded: /hello/, no route anyway */
      "/v1/exact%00",       /* a NUL: the handler's C string would be /v1/exact */
      "/v1/x%2F..%2Fexact", /* dot segments made of escapes */
      "/v1/a%2Fb?q=%2F",    /* the query does not excuse the path */
  };
  char req[256];
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", paths[i]);
    exchange(f->port, req, r);
    if (r->status != 404)
      print_error("GET %s: %d %s\n", paths[i], r->status, r->body);
    assert_int_equal(r->status, 404);
    assert_non_null(strstr(r->body, "\"code\":\"not_found\""));
    assert_non_null(strstr(r->body, strstr(paths[i], "%00") ? "encoded NUL (%00)" : "encoded slash (%2F)"));
  }
  /* Other escapes decode as before; %2F in the query reaches the route. */
  exchange(f->port, "GET /v1/%65xact HTTP/1.1\r\nHost: t\r\n\r\n", r);
  assert_int_equal(r->status, 200);
  assert_string_equal(r->body, "exact");
  exchange(f->port, "GET /v1/exact?path=a%2Fb HTTP/1.1\r\nHost: t\r\n\r\n", r);
  assert_int_equal(r->status, 200);
  assert_string_equal(r->body, "exact");
  exchange(f->port, "GET /v1/a%2 HTTP/1.1\r\nHost: t\r\n\r\n", r);
  assert_int_equal(r->status, 200); /* not an escape at all: h2o keeps it */
  assert_string_equal(r->body, "prefix");
  free(r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_get_route, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unknown_path_404, setup, teardown),
      cmocka_unit_test_setup_teardown(test_wrong_method_405, setup, teardown),
      cmocka_unit_test_setup_teardown(test_route_specificity, setup, teardown),
      cmocka_unit_test_setup_teardown(test_encoded_slash_matches_no_route, setup, teardown),
  };
  return HT_RUN(tests);
}
