/*
 * test_json — json.c, the strict reader of request bodies: what it accepts
 * comes back exactly (values, escapes, exact 64-bit integers), and what RFC
 * 8259 or lithd's rules refuse is refused with a position (bad UTF-8,
 * control characters, unpaired surrogates, duplicate keys also in objects
 * large enough to be checked by sorting, too deep nesting, trailing bytes,
 * numbers out of range). Every case runs on a body that is not
 * NUL-terminated, as a request body is not.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

/* Parse text (copied into an exact-size buffer: no NUL after it). */
static lj_value *parse(lithd_arena *a, const char *text, size_t len, lj_error *err) {
  char *copy = malloc(len ? len : 1);
  lj_value *v = NULL;
  assert_non_null(copy);
  memcpy(copy, text, len);
  memset(err, 0, sizeof *err);
  int rc = lj_parse(a, copy, len, &v, err);
  free(copy);
  if (rc != 0)
    assert_null(v);
  return v;
}

static lj_value *ok(lithd_arena *a, const char *text) {
  lj_error err;
  lj_value *v = parse(a, text, strlen(text), &err);
  if (!v) {
    print_error("refused %s: line %d column %d: %s\n", text, err.line, err.column, err.text);
    fail();
  }
  return v;
}

static void refused(const char *text, size_t len, const char *why, int line, int column) {
  lithd_arena a = {0};
  lj_error err;
  lj_value *v = parse(&a, text, len, &err);
  if (v || strstr(err.text, why) == NULL || (line && err.line != line) || (column && err.column != column)) {
    print_error("%.*s: %s at %d:%d (want \"%s\" at %d:%d)\n", (int)len, text, v ? "accepted" : err.text,
                err.line, err.column, why, line, column);
    fail();
  }
  lithd_arena_free(&a);
}

#define REFUSED(lit, why, line, col) refused(lit, sizeof lit - 1, why, line, col)

static void test_values(void **state) {
  (void)state;
  lithd_arena a = {0};
  lj_value *v = ok(&a, " {\"i\": -9223372036854775808, \"j\": 9223372036854775807, \"z\": -0,"
                       " \"r\": 0.1, \"e\": -2.5E-3, \"t\": true, \"f\": false, \"n\": null,"
                       " \"s\": \"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\", \"u\": \"\\u00e9\\u20ac\\ud83d\\ude00\","
                       " \"nul\": \"x\\u0000y\", \"raw\": \"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\","
                       " \"a\": [1, [], {}, [[2]]], \"o\": {}}\r\n\t ");
  assert_int_equal(v->type, LJ_OBJECT);
  assert_int_equal(v->n, 14);
  assert_true(lj_get(v, "i")->u.i == INT64_MIN);
  assert_true(lj_get(v, "j")->u.i == INT64_MAX);
  assert_int_equal(lj_get(v, "z")->type, LJ_INT);
  assert_true(lj_get(v, "z")->u.i == 0);
  assert_int_equal(lj_get(v, "r")->type, LJ_REAL);
  assert_true(lj_get(v, "r")->u.d == 0.1);
  assert_true(lj_get(v, "e")->u.d == -2.5e-3);
  assert_int_equal(lj_get(v, "t")->type, LJ_TRUE);
  assert_int_equal(lj_get(v, "f")->type, LJ_FALSE);
  assert_int_equal(lj_get(v, "n")->type, LJ_NULL);
  assert_int_equal(lj_get(v, "s")->n, 12);
  assert_memory_equal(lj_get(v, "s")->u.s, "a\"b\\c/d\b\f\n\r\t", 13); /* with its NUL */
  /* escapes and raw UTF-8 decode to the same bytes */
  assert_int_equal(lj_get(v, "u")->n, 9);
  assert_memory_equal(lj_get(v, "u")->u.s, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9);
  assert_memory_equal(lj_get(v, "raw")->u.s, lj_get(v, "u")->u.s, 10);
  assert_int_equal(lj_get(v, "nul")->n, 3);
  assert_memory_equal(lj_get(v, "nul")->u.s, "x\0y", 3);
  lj_value *arr = lj_get(v, "a");
  assert_int_equal(arr->type, LJ_ARRAY);
  assert_int_equal(arr->n, 4);
  assert_true(arr->u.items[0]->u.i == 1);
  assert_int_equal(arr->u.items[1]->n, 0);
  assert_int_equal(arr->u.items[2]->type, LJ_OBJECT);
  assert_true(arr->u.items[3]->u.items[0]->u.items[0]->u.i == 2);
  assert_null(lj_get(v, "missing"));
  assert_null(lj_get(arr, "a")); /* not an object */
  /* a bare scalar is a value too */
  assert_true(ok(&a, "42")->u.i == 42);
  assert_int_equal(ok(&a, " \"\" ")->n, 0);
  lithd_arena_free(&a);
}

static void test_refusals(void **state) {
  (void)state;
  REFUSED("", "unexpected end of input", 1, 1);
  REFUSED("   ", "unexpected end of input", 1, 4);
  REFUSED("{\"a\": 1,\n \"a\": 2}", "duplicate object key", 1, 1);
  REFUSED("{\"a\": 1} x", "end of input expected", 1, 10);
  REFUSED("{\"a\": 1}{}", "end of input expected", 1, 9);
  REFUSED("[1, 2", "',' or ']' expected", 1, 6);
  REFUSED("[1 2]", "',' or ']' expected", 1, 4);
  REFUSED("[1,]", "invalid token", 1, 4);
  REFUSED("{\"a\" 1}", "':' expected", 1, 6);
  REFUSED("{a: 1}", "string or '}' expected", 1, 2);
  REFUSED("{\"a\": 1,}", "string or '}' expected", 1, 9);
  REFUSED("\"abc", "unterminated string", 1, 1);
  REFUSED("\"abc\\", "unterminated string", 1, 1);
  REFUSED("\"a\tb\"", "control character 0x09", 1, 3);
  REFUSED("\"a\nb\"", "control character 0x0a", 1, 3);
  REFUSED("\"\\x\"", "invalid escape", 1, 2);
  REFUSED("\"\\u12G4\"", "invalid \\u escape", 1, 2);
  REFUSED("\"\\ud800\"", "unpaired surrogate", 1, 2);
  REFUSED("\"\\ud800\\u0041\"", "unpaired surrogate", 1, 2);
  REFUSED("\"\\udc00\"", "unpaired surrogate", 1, 2);
  REFUSED("\"\xff\"", "invalid UTF-8", 1, 2);
  REFUSED("\"\xc0\xaf\"", "invalid UTF-8", 1, 2);         /* overlong '/' */
  REFUSED("\"\xe0\x80\xaf\"", "invalid UTF-8", 1, 2);     /* overlong */
  REFUSED("\"\xed\xa0\x80\"", "invalid UTF-8", 1, 2);     /* a surrogate in UTF-8 */
  REFUSED("\"\xf4\x90\x80\x80\"", "invalid UTF-8", 1, 2); /* past U+10FFFF */
  REFUSED("\"\xe2\x82\"", "invalid UTF-8", 1, 2);         /* cut short */
  REFUSED("{\"a\\u0000b\": 1}", "NUL byte in object key", 1, 2);
  REFUSED("9223372036854775808", "too big integer", 1, 1);
  REFUSED("-9223372036854775809", "too big negative integer", 1, 1);
  REFUSED("99999999999999999999999", "too big integer", 1, 1);
  REFUSED("1e400", "real number overflow", 1, 1);
  REFUSED("-1e400", "real number overflow", 1, 1);
  REFUSED("01", "end of input expected", 1, 2);
  REFUSED("1.", "invalid number", 1, 1);
  REFUSED(".5", "invalid token", 1, 1);
  REFUSED("1e", "invalid number", 1, 1);
  REFUSED("-", "invalid number", 1, 1);
  REFUSED("+1", "invalid token", 1, 1);
  REFUSED("tru", "invalid token", 1, 1);
  REFUSED("nul", "invalid token", 1, 1);
  REFUSED("NaN", "invalid token", 1, 1);
  REFUSED("\n\n  [x]", "invalid token", 3, 4);
  /* found by make fuzz (fuzz_json): an empty object before any member was
   * pushed meant NULL + 0 (UB; UBSan stops here under SANITIZE=address) */
  REFUSED("{\"c\": {}\"p", "',' or '}' expected", 1, 9);
}

/* Duplicates in an object too big for the pairwise check, and nesting. */
/* A real reads as strtod reads it, bit for bit, on the short decimals the
 * parser reads without strtod and on those it hands to strtod. */
static void test_reals_as_strtod(void **state) {
  (void)state;
  static const char *const fixed[] = {"0.1",
                                      "-0.0",
                                      "1.5",
                                      "3.14159",
                                      "0.000001",
                                      "1e3",
                                      "12345678901234.5",
                                      "123456789012345.6",
                                      "-98.76",
                                      "0.3000",
                                      "2.2250738585072014e-308",
                                      "9007199254740993.0"};
  char text[64];
  uint64_t rng = 88172645463325252u;
  for (int i = 0; i < 20000; i++) {
    const char *lit = text;
    if (i < (int)(sizeof fixed / sizeof *fixed)) {
      lit = fixed[i];
    } else {
      rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
      /* 1..17 digits (15 or fewer: the fast path; more: strtod), the point
       * after the first `whole` of them, at least one digit after it */
      int digits = 2 + (int)(rng % 16), whole = 1 + (int)((rng >> 8) % (uint64_t)(digits - 1)), n = 0;
      uint64_t r = rng;
      if (rng >> 63)
        text[n++] = '-';
      for (int d = 0; d < digits; d++) {
        int dig = (int)(r % 10);
        r = r / 10 ? r / 10 : rng ^ (uint64_t)d * 0x9E3779B97F4A7C15u;
        if (d == 0 && whole > 1 && dig == 0)
          dig = 7; /* no leading zero (JSON refuses it) */
        text[n++] = (char)('0' + dig);
        if (d == whole - 1)
          text[n++] = '.';
      }
      text[n] = '\0';
    }
    lithd_arena a = {0};
    lj_value *v = ok(&a, lit);
    double want = strtod(lit, NULL);
    if (v->type != LJ_REAL || memcmp(&v->u.d, &want, sizeof want) != 0) {
      print_error("%s: %.17g, strtod %.17g\n", lit, v->u.d, want);
      fail();
    }
    lithd_arena_free(&a);
  }
}

static void test_large_and_deep(void **state) {
  (void)state;
  size_t n = 5000, cap = n * 24 + 16, len = 0;
  char *buf = malloc(cap);
  lithd_arena a = {0};
  lj_error err;
  assert_non_null(buf);
  buf[len++] = '{';
  for (size_t i = 0; i < n; i++)
    len += (size_t)snprintf(buf + len, cap - len, "%s\"k%zu\": %zu", i ? "," : "", i, i);
  buf[len++] = '}';
  lj_value *v = parse(&a, buf, len, &err);
  assert_non_null(v);
  assert_int_equal(v->n, n);
  assert_true(lj_get(v, "k4999")->u.i == 4999);
  /* the same with the last key repeating an early one */
  char *last = strstr(buf, "\"k4999\"");
  memcpy(last, "\"k17\"  ", 7);
  refused(buf, len, "duplicate object key", 1, 1);
  free(buf);

  char deep[2 * (LJ_MAX_DEPTH + 2) + 1];
  size_t d;
  for (d = 0; d < LJ_MAX_DEPTH + 1; d++)
    deep[d] = '[';
  for (size_t k = 0; k < LJ_MAX_DEPTH + 1; k++)
    deep[d + k] = ']';
  assert_non_null(parse(&a, deep, 2 * (LJ_MAX_DEPTH + 1), &err)); /* the limit itself */
  for (d = 0; d < LJ_MAX_DEPTH + 2; d++)
    deep[d] = '[';
  for (size_t k = 0; k < LJ_MAX_DEPTH + 2; k++)
    deep[d + k] = ']';
  refused(deep, 2 * (LJ_MAX_DEPTH + 2), "nested deeper than", 1, 0);
  lithd_arena_free(&a);
}

static void test_built_by_hand(void **state) {
  (void)state;
  lithd_arena a = {0};
  lj_value *o = lj_make(&a, LJ_OBJECT, 1);
  lj_value *s = lj_make_string(&a, "x\0y", 3);
  assert_non_null(o);
  assert_non_null(s);
  o->u.members[0].key = "k";
  o->u.members[0].keylen = 1;
  o->u.members[0].value = s;
  assert_ptr_equal(lj_get(o, "k"), s);
  assert_int_equal(s->n, 3);
  assert_memory_equal(s->u.s, "x\0y", 4);
  lj_value *arr = lj_make(&a, LJ_ARRAY, 0);
  assert_non_null(arr);
  assert_int_equal(arr->n, 0);
  lithd_arena_free(&a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_values),          cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_reals_as_strtod), cmocka_unit_test(test_large_and_deep),
      cmocka_unit_test(test_built_by_hand),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
