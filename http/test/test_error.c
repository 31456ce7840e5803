/*
 * Tests of http/error.c: result code names, reason phrases and the thread's
 * last message.
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

static void test_names(void **state) {
  (void)state;
  /* short phrases, like lith_errstr's; every code has its own */
  assert_string_equal(lith_http_errstr(LITH_HTTP_GONE), "client gone");
  assert_string_equal(lith_http_errstr(LITH_HTTP_FULL), "stream buffer full");
  assert_string_equal(lith_http_errstr(12345), "unknown error");
  for (int a = LITH_HTTP_OK; a <= LITH_HTTP_STOPPING; a++) {
    assert_string_not_equal(lith_http_errstr(a), "unknown error");
    for (int b = a + 1; b <= LITH_HTTP_STOPPING; b++)
      assert_string_not_equal(lith_http_errstr(a), lith_http_errstr(b));
  }
  assert_string_equal(lith_http_reason(404), "Not Found");
  assert_string_equal(lith_http_reason(418), "Client Error");
  lith_http_server *srv = NULL;
  assert_int_equal(lith_http_server_create(NULL, NULL, &srv), LITH_HTTP_MISUSE);
  assert_null(srv);
  assert_non_null(strstr(lith_http_errmsg(), "loop"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names),
  };
  return HT_RUN(tests);
}
