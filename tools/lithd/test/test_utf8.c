/*
 * test_utf8 — utf8.c, lithd's one UTF-8 check (json.c reads requests with
 * it, sqljson writes answers with it): every boundary of RFC 3629 — the
 * shortest and longest of each length, overlong forms, surrogates, past
 * U+10FFFF, cut-short and stray continuation bytes — and the encoder
 * against the decoder over every code point.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "utf8.h"

/* lithd_utf8_len of a string literal's bytes (without its NUL). */
#define LEN(lit) lithd_utf8_len((const unsigned char *)(lit), sizeof(lit) - 1)
#define VALID(lit) lithd_utf8_valid((const unsigned char *)(lit), sizeof(lit) - 1)

static void test_lengths(void **state) {
  (void)state;
  assert_int_equal(LEN("A"), 1);
  assert_int_equal(LEN("\x7f"), 1);
  assert_int_equal(LEN("\xc2\x80"), 2);         /* U+0080 */
  assert_int_equal(LEN("\xdf\xbf"), 2);         /* U+07FF */
  assert_int_equal(LEN("\xe0\xa0\x80"), 3);     /* U+0800 */
  assert_int_equal(LEN("\xed\x9f\xbf"), 3);     /* U+D7FF, below the surrogates */
  assert_int_equal(LEN("\xee\x80\x80"), 3);     /* U+E000, above them */
  assert_int_equal(LEN("\xef\xbf\xbf"), 3);     /* U+FFFF */
  assert_int_equal(LEN("\xf0\x90\x80\x80"), 4); /* U+10000 */
  assert_int_equal(LEN("\xf4\x8f\xbf\xbf"), 4); /* U+10FFFF */
  /* only the first sequence counts */
  assert_int_equal(LEN("\xc3\xa9xyz"), 2);
}

static void test_refusals(void **state) {
  (void)state;
  assert_int_equal(LEN("\x80"), 0); /* a continuation byte first */
  assert_int_equal(LEN("\xbf"), 0);
  assert_int_equal(LEN("\xc0\xaf"), 0);     /* overlong '/' */
  assert_int_equal(LEN("\xc1\xbf"), 0);     /* overlong */
  assert_int_equal(LEN("\xe0\x80\xaf"), 0); /* overlong, 3 bytes */
  assert_int_equal(LEN("\xe0\x9f\xbf"), 0);
  assert_int_equal(LEN("\xed\xa0\x80"), 0);     /* U+D800, a surrogate */
  assert_int_equal(LEN("\xed\xbf\xbf"), 0);     /* U+DFFF */
  assert_int_equal(LEN("\xf0\x80\x80\xaf"), 0); /* overlong, 4 bytes */
  assert_int_equal(LEN("\xf0\x8f\xbf\xbf"), 0);
  assert_int_equal(LEN("\xf4\x90\x80\x80"), 0); /* U+110000 */
  assert_int_equal(LEN("\xf5\x80\x80\x80"), 0);
  assert_int_equal(LEN("\xff"), 0);
  assert_int_equal(LEN("\xe2\x82"), 0); /* cut short */
  assert_int_equal(LEN("\xf0\x9d\x84"), 0);
  assert_int_equal(LEN("\xe2\x28\xa1"), 0); /* not a continuation byte */
  assert_int_equal(LEN("\xf0\x9d\x84\x28"), 0);
  /* n counts: the bytes are there, but may not be read */
  assert_int_equal(lithd_utf8_len((const unsigned char *)"\xc3\xa9", 1), 0);
}

static void test_valid(void **state) {
  (void)state;
  assert_true(lithd_utf8_valid((const unsigned char *)"", 0));
  assert_true(VALID("h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9d\x84\x9e"));
  assert_true(VALID("a\0b")); /* U+0000 is UTF-8 */
  assert_false(VALID("abc\xff"));
  assert_false(VALID("\xc3\xa9\xc3")); /* cut short at the end */
  assert_false(VALID("\xed\xa0\x80"));
}

/* Every code point but the surrogates encodes to a sequence the checker
 * takes whole, of the length RFC 3629 gives. */
static void test_put_round_trip(void **state) {
  (void)state;
  for (unsigned cp = 0; cp <= 0x10FFFF; cp++) {
    char out[4];
    size_t n, want = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    if (cp >= 0xD800 && cp <= 0xDFFF)
      continue;
    n = lithd_utf8_put(out, cp);
    if (n != want || lithd_utf8_len((const unsigned char *)out, n) != n)
      fail_msg("U+%04X: %zu bytes, read back as %zu", cp, n, lithd_utf8_len((const unsigned char *)out, n));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lengths),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_valid),
      cmocka_unit_test(test_put_round_trip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
