/*
 * test_buf — buf.c, the growing text buffer of lithd's answers: writes
 * append in order and keep the text NUL-terminated, a buffer grows past
 * any first size, printf formats long text across a reallocation, an
 * empty buffer finishes as "", and a failure sticks and makes finish
 * return NULL.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

static void test_appends(void **state) {
  (void)state;
  lithd_buf b = {0};
  lithd_buf_puts(&b, "{\"a\":");
  assert_string_equal(b.p, "{\"a\":");
  lithd_buf_printf(&b, "%d,\"b\":%s", 42, "null");
  lithd_buf_put(&b, "}xyz", 1);
  assert_int_equal(b.len, strlen("{\"a\":42,\"b\":null}"));
  char *s = lithd_buf_finish(&b);
  assert_string_equal(s, "{\"a\":42,\"b\":null}");
  free(s);
  assert_null(b.p);
  assert_int_equal(b.len, 0);
}

static void test_embedded_nul(void **state) {
  (void)state;
  lithd_buf b = {0};
  lithd_buf_put(&b, "a\0b", 3);
  assert_int_equal(b.len, 3);
  assert_memory_equal(b.p, "a\0b", 4); /* and the NUL after */
  free(lithd_buf_finish(&b));
}

static void test_grows(void **state) {
  (void)state;
  lithd_buf b = {0};
  char chunk[100];
  memset(chunk, 'x', sizeof chunk);
  for (int i = 0; i < 1000; i++) /* 100 kB, well past the first allocation */
    lithd_buf_put(&b, chunk, sizeof chunk);
  assert_int_equal(b.len, 100000);
  assert_true(b.cap > b.len);
  assert_int_equal(b.p[b.len], '\0');
  /* a printf longer than the room left */
  lithd_buf_printf(&b, "%5000s|", "y");
  assert_int_equal(b.len, 100000 + 5001);
  assert_int_equal(b.p[b.len - 1], '|');
  assert_int_equal(b.p[b.len - 2], 'y');
  assert_int_equal(b.p[b.len], '\0');
  assert_int_equal(b.failed, 0);
  char *s = lithd_buf_finish(&b);
  assert_non_null(s);
  assert_int_equal(strlen(s), 105001);
  free(s);
}

static void test_printf_first(void **state) {
  (void)state;
  lithd_buf b = {0};
  lithd_buf_printf(&b, "%s %d", "first", 1); /* into no buffer at all */
  assert_string_equal(b.p, "first 1");
  free(lithd_buf_finish(&b));
}

/* lithd_buf_put_i64 writes what printf's PRId64 does, at the edges too. */
static void test_put_i64(void **state) {
  (void)state;
  static const int64_t v[] = {0, 1, -1, 9, 10, -10, 1234567890123, INT64_MAX, INT64_MIN, INT64_MIN + 1};
  for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
    lithd_buf b = {0};
    char want[32];
    snprintf(want, sizeof want, "%" PRId64, v[i]);
    lithd_buf_puts(&b, "<");
    lithd_buf_put_i64(&b, v[i]);
    lithd_buf_puts(&b, ">");
    char *got = lithd_buf_finish(&b), expect[40];
    snprintf(expect, sizeof expect, "<%s>", want);
    assert_string_equal(got, expect);
    free(got);
  }
}

static void test_reserve(void **state) {
  (void)state;
  lithd_buf b = {0};
  assert_int_equal(lithd_buf_reserve(&b, 8192), 0);
  assert_true(b.cap > 8192);
  char *p = b.p;
  for (int i = 0; i < 8192; i++)
    lithd_buf_put(&b, "z", 1);
  assert_ptr_equal(b.p, p); /* no reallocation */
  free(lithd_buf_finish(&b));
}

static void test_empty_is_empty_string(void **state) {
  (void)state;
  lithd_buf b = {0};
  char *s = lithd_buf_finish(&b);
  assert_non_null(s);
  assert_string_equal(s, "");
  free(s);
}

static void test_failure_sticks(void **state) {
  (void)state;
  lithd_buf b = {0};
  lithd_buf_puts(&b, "part");
  assert_int_equal(lithd_buf_reserve(&b, SIZE_MAX - 8), -1); /* cannot be had */
  assert_int_equal(b.failed, 1);
  lithd_buf_puts(&b, "more"); /* ignored */
  lithd_buf_printf(&b, "%d", 7);
  assert_int_equal(b.len, 4);
  assert_null(lithd_buf_finish(&b)); /* and freed */
  assert_null(b.p);
  assert_int_equal(b.failed, 0); /* ready for reuse */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_appends),
      cmocka_unit_test(test_embedded_nul),
      cmocka_unit_test(test_grows),
      cmocka_unit_test(test_printf_first),
      cmocka_unit_test(test_reserve),
      cmocka_unit_test(test_put_i64),
      cmocka_unit_test(test_empty_is_empty_string),
      cmocka_unit_test(test_failure_sticks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
