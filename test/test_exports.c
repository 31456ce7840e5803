/*
 * Only the API is exported: the dynamic symbols liblith.so and
 * liblith_uv.so define (nm -D --defined-only) are exactly the functions
 * their headers mark LITH_API (include/lith.h, include/lith_uv.h). So:
 *   - every exported symbol begins with lith_, never lith__ (the internal
 *     prefix; -fvisibility=hidden keeps them in), and none is missing from
 *     the header;
 *   - every LITH_API function of the header is exported by its library
 *     (a function marked but not built, or built without the mark, fails).
 * Names beginning with an underscore are the toolchain's (a sanitizer's
 * runtime hooks), never lith's: they are left out.
 *
 * The build compiles in where the libraries and the headers are
 * (LITH_BUILD_DIR, LITH_SRC_DIR): tests run in a scratch directory.
 */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#ifndef LITH_BUILD_DIR
#error "LITH_BUILD_DIR must name the build directory (where liblith.so is)"
#endif
#ifndef LITH_SRC_DIR
#error "LITH_SRC_DIR must name the source tree (where include/ is)"
#endif

enum { MAX_NAMES = 256, NAME_LEN = 128 };

typedef struct names {
  int n;
  char v[MAX_NAMES][NAME_LEN];
} names;

static void add(names *ns, const char *s, size_t len) {
  assert_true(ns->n < MAX_NAMES);
  assert_true(len > 0 && len < NAME_LEN);
  memcpy(ns->v[ns->n], s, len);
  ns->v[ns->n][len] = '\0';
  ns->n++;
}

static int has(const names *ns, const char *s) {
  for (int i = 0; i < ns->n; i++)
    if (strcmp(ns->v[i], s) == 0)
      return 1;
  return 0;
}

/* The dynamic symbols `lib` defines, but the toolchain's. */
static void exported(const char *lib, names *out) {
  char cmd[1024], line[512];
  snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s/%s'", LITH_BUILD_DIR, lib);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  out->n = 0;
  while (fgets(line, sizeof line, p)) {
    /* "<address> <type> <name>" */
    char *name = strrchr(line, ' ');
    assert_non_null(name);
    name++;
    size_t len = strcspn(name, "\n@");
    if (name[0] == '_')
      continue;
    add(out, name, len);
  }
  assert_int_equal(pclose(p), 0);
  assert_true(out->n > 0);
}

/* The functions `header` marks LITH_API: the identifier right before the
 * first '(' after each mark (the macro's own definition aside). */
static void declared(const char *header, names *out) {
  char path[1024];
  snprintf(path, sizeof path, "%s/include/%s", LITH_SRC_DIR, header);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  static char text[1 << 16];
  size_t n = fread(text, 1, sizeof text - 1, f);
  assert_true(n < sizeof text - 1);
  text[n] = '\0';
  fclose(f);
  out->n = 0;
  for (const char *m = strstr(text, "LITH_API"); m; m = strstr(m + 1, "LITH_API")) {
    const char *bol = m;
    while (bol > text && bol[-1] != '\n')
      bol--;
    if (*bol == '#')
      continue; /* #ifndef / #define LITH_API */
    const char *paren = strchr(m, '(');
    assert_non_null(paren);
    const char *end = paren;
    while (end > m && isspace((unsigned char)end[-1]))
      end--;
    const char *start = end;
    while (start > m && (isalnum((unsigned char)start[-1]) || start[-1] == '_'))
      start--;
    add(out, start, (size_t)(end - start));
  }
  assert_true(out->n > 0);
}

static void check(const char *lib, const char *header, int *count) {
  static names exp, dec;
  exported(lib, &exp);
  declared(header, &dec);
  for (int i = 0; i < exp.n; i++) {
    if (strncmp(exp.v[i], "lith_", 5) != 0 || strncmp(exp.v[i], "lith__", 6) == 0 || !has(&dec, exp.v[i]))
      fail_msg("%s exports %s, which %s does not declare LITH_API", lib, exp.v[i], header);
  }
  for (int i = 0; i < dec.n; i++) {
    if (!has(&exp, dec.v[i]))
      fail_msg("%s declares %s LITH_API, but %s does not export it", header, dec.v[i], lib);
  }
  assert_int_equal(exp.n, dec.n);
  *count = exp.n;
}

static void test_liblith_exports_its_api_only(void **state) {
  (void)state;
  int n = 0;
  check("liblith.so", "lith.h", &n);
  printf("liblith.so: %d symbols, lith.h's API\n", n);
}

static void test_liblith_uv_exports_its_api_only(void **state) {
  (void)state;
  int n = 0;
  check("liblith_uv.so", "lith_uv.h", &n);
  printf("liblith_uv.so: %d symbols, lith_uv.h's API\n", n);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_liblith_exports_its_api_only),
      cmocka_unit_test(test_liblith_uv_exports_its_api_only),
  };
  return cmocka_run_group_tests_name("exports", tests, NULL, NULL);
}
