/*
 * test_textfile — textfile.c, the one bounded reader of the files the
 * operator gives lithd (--schema, --commands, --config, token files), and
 * token.c, the smallest of its callers: a file comes back whole and
 * NUL-terminated, also past the first buffer; exactly the maximum is
 * read, one byte more refused; a NUL byte, a missing file are refused with
 * a message that begins with the caller's name and the path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "textfile.h"
#include "token.h"

static char dir[] = "/tmp/test_textfile.XXXXXX";

/* dir/name holding data[0..n); returns the path (static). */
static const char *file(const char *name, const void *data, size_t n) {
  static char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
  return path;
}

static void test_reads_whole(void **state) {
  (void)state;
  char *text = NULL, err[256];
  size_t len = 1;
  const char *p = file("a.sql", "SELECT 1;\n", 10);
  assert_int_equal(lithd_text_load(p, 100, "--schema", &text, &len, err, sizeof err), 0);
  assert_int_equal(len, 10);
  assert_string_equal(text, "SELECT 1;\n");
  free(text);
  p = file("empty", "", 0);
  assert_int_equal(lithd_text_load(p, 100, NULL, &text, &len, err, sizeof err), 0);
  assert_int_equal(len, 0);
  assert_string_equal(text, "");
  free(text);
}

/* Past the first buffer (64 KiB) the buffer grows; max is inclusive. */
static void test_bounds(void **state) {
  (void)state;
  size_t n = 200000;
  char *big = malloc(n), *text = NULL, err[256];
  size_t len = 0;
  assert_non_null(big);
  for (size_t i = 0; i < n; i++)
    big[i] = (char)('a' + i % 26);
  const char *p = file("big", big, n);
  assert_int_equal(lithd_text_load(p, n, NULL, &text, &len, err, sizeof err), 0);
  assert_int_equal(len, n);
  assert_memory_equal(text, big, n);
  assert_int_equal(text[n], '\0');
  free(text);
  assert_int_equal(lithd_text_load(p, n - 1, "--config", &text, &len, err, sizeof err), -1);
  assert_null(text);
  char want[512];
  snprintf(want, sizeof want, "--config %s: larger than %zu bytes", p, n - 1);
  assert_string_equal(err, want);
  free(big);
}

static void test_refusals(void **state) {
  (void)state;
  char *text = (char *)"x", err[256], want[512];
  size_t len = 0;
  const char *p = file("nul", "a\0b", 3);
  assert_int_equal(lithd_text_load(p, 100, "--commands", &text, &len, err, sizeof err), -1);
  assert_null(text);
  snprintf(want, sizeof want, "--commands %s: holds a NUL byte", p);
  assert_string_equal(err, want);
  snprintf(want, sizeof want, "%s/missing", dir);
  assert_int_equal(lithd_text_load(want, 100, NULL, &text, &len, err, sizeof err), -1);
  assert_non_null(strstr(err, want));
  assert_non_null(strstr(err, "No such file"));
  /* a directory opens but cannot be read */
  assert_int_equal(lithd_text_load(dir, 100, NULL, &text, &len, err, sizeof err), -1);
  assert_non_null(strstr(err, dir));
  /* lithd_text_read on its own */
  FILE *f = fopen(file("nul2", "\0", 1), "rb");
  assert_int_equal(lithd_text_read(f, 10, &text, &len), LITHD_TEXT_NUL);
  fclose(f);
}

static void test_token(void **state) {
  (void)state;
  char err[256];
  char *tok = lithd_token_read(file("t1", "s3cret\r\n\n", 9), err, sizeof err);
  assert_non_null(tok);
  assert_string_equal(tok, "s3cret");
  free(tok);
  assert_null(lithd_token_read(file("t2", "\n", 1), err, sizeof err));
  assert_non_null(strstr(err, "empty"));
  assert_null(lithd_token_read(file("t3", "a\nb", 3), err, sizeof err));
  assert_non_null(strstr(err, "line break"));
  assert_null(lithd_token_read(file("t4", "a\0b", 3), err, sizeof err));
  assert_non_null(strstr(err, "NUL byte"));
  char *big = malloc(LITHD_TOKEN_MAX + 1);
  memset(big, 'k', LITHD_TOKEN_MAX + 1);
  tok = lithd_token_read(file("t5", big, LITHD_TOKEN_MAX), err, sizeof err);
  assert_non_null(tok);
  assert_int_equal(strlen(tok), LITHD_TOKEN_MAX);
  free(tok);
  assert_null(lithd_token_read(file("t6", big, LITHD_TOKEN_MAX + 1), err, sizeof err));
  assert_non_null(strstr(err, "larger than"));
  free(big);
}

static int cleanup(void **state) {
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reads_whole),
      cmocka_unit_test(test_bounds),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_token),
  };
  if (mkdtemp(dir) == NULL)
    return 1;
  return cmocka_run_group_tests(tests, NULL, cleanup);
}
