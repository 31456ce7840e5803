/*
 * Tests of http/watch.c: a client that leaves while its request is held is
 * noticed at once (on_gone), not when the late answer is written.
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

/* ---- a client gone ----------------------------------------------------------- */

static void test_async_client_gone(void **state) {
  fx *f = *state;
  int fd = tcp_connect(f->port);
  send_str(fd, "POST /slow HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\ndata");
  assert_true(wait_for(&f->slow_runs, 1, 2000));
  close(fd); /* before the answer, 300 ms later */
  assert_true(wait_for(&f->gone_calls, 1, 2000));
  assert_true(wait_for(&f->late_done, 1, 2000));
  assert_int_equal(atomic_load(&f->gone_before_late), 1); /* noticed at once, not at the write */
  assert_int_equal(atomic_load(&f->late_rc), LITH_HTTP_GONE);
  assert_int_equal(atomic_load(&f->slow_body_ok), 1);
  assert_int_equal(atomic_load(&f->gone_calls), 1);
  lith_http_stats st;
  on_loop(f, job_stats, &st);
  assert_int_equal(st.gone, 1);
  assert_int_equal(st.pending, 0);
  assert_int_equal(count_of(f, 499), 1); /* logged as nginx's "client closed request" */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_async_client_gone, setup, teardown),
  };
  return HT_RUN(tests);
}
