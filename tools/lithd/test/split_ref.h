/*
 * split_ref.h — the oracle for sql/split.c, shared by test_split and
 * fuzz_split: the rule the splitter replaced, asked of SQLite itself. A
 * statement ends at each ';' where sqlite3_complete(the text since the
 * statement began, as a C string) is true; the rest is the last statement
 * unless, read as a C string, it is only blanks and comments. That costs a
 * scan of the statement per ';' (quadratic): small texts only.
 *
 * split_ref_same(s, n, why, cap) splits s both ways and compares the
 * statements, whether each ended at its own ';' (lithd_split.cut), and
 * lithd_split_count at the limits around their number; 1 if all agree,
 * else 0 with the first difference in why.
 */
#ifndef LITHD_TEST_SPLIT_REF_H
#define LITHD_TEST_SPLIT_REF_H

#include <ctype.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "split.h"

typedef struct split_piece {
  size_t off, len;
  int cut; /* ended at its own ';' */
} split_piece;

/* The pieces random texts are made of (test_split's, and fuzz_split's
 * when its first byte is odd): what moves sqlite3_complete's machine, some
 * words that only look like its keywords, and bytes it treats apart. */
static const struct split_token {
  const char *s;
  size_t n;
} split_alphabet[] = {
#define T(lit) \
  { lit, sizeof(lit) - 1 }
    T(";"),       T(";"),
    T(";"),       T("'"),
    T("\""),      T("`"),
    T("["),       T("]"),
    T("--"),      T("/*"),
    T("*/"),      T("*"),
    T("/"),       T("-"),
    T("\n"),      T("\n"),
    T(" "),       T(" "),
    T("\t"),      T("\r"),
    T("\f"),      T("\v"),
    T("CREATE"),  T("create"),
    T("TEMP"),    T("Temporary"),
    T("TRIGGER"), T("trigger"),
    T("BEGIN"),   T("END"),
    T("end"),     T("EXPLAIN"),
    T("CASE"),    T("WHEN"),
    T("x"),       T("SELECT"),
    T("1"),       T("END1"),
    T("ends"),    T("$"),
    T("_"),       T("\xc3\xa9"),
    T("("),       T(")"),
    T("\0"),      T("CREATE TRIGGER t BEGIN"),
    T("; END;"),
#undef T
};
#define SPLIT_ALPHABET_N (sizeof split_alphabet / sizeof split_alphabet[0])

/* The statements of s[0..n) by sqlite3_complete into out (room for n + 1);
 * their number. */
static size_t split_ref(const char *s, size_t n, split_piece *out) {
  char *buf = malloc(n + 1);
  size_t start = 0, k = 0;
  if (buf == NULL)
    abort();
  for (size_t i = 0; i < n; i++) {
    if (s[i] != ';')
      continue;
    memcpy(buf, s + start, i + 1 - start);
    buf[i + 1 - start] = '\0';
    if (sqlite3_complete(buf)) {
      out[k++] = (split_piece){start, i + 1 - start, 1};
      start = i + 1;
    }
  }
  if (start < n) {
    const char *p = buf;
    memcpy(buf, s + start, n - start);
    buf[n - start] = '\0';
    for (;;) { /* blanks and comments, to the first NUL */
      while (isspace((unsigned char)*p))
        p++;
      if (p[0] == '-' && p[1] == '-') {
        const char *nl = strchr(p, '\n');
        p = nl != NULL ? nl : "";
      } else if (p[0] == '/' && p[1] == '*') {
        const char *e = strstr(p + 2, "*/");
        p = e != NULL ? e + 2 : "";
      } else {
        break;
      }
    }
    if (*p != '\0')
      out[k++] = (split_piece){start, n - start, 0};
  }
  free(buf);
  return k;
}

/* The same by lithd_split. */
static size_t split_new(const char *s, size_t n, split_piece *out) {
  lithd_split sp;
  const char *p;
  size_t len, k = 0;
  lithd_split_init(&sp, s, n);
  while (lithd_split_next(&sp, &p, &len))
    out[k++] = (split_piece){(size_t)(p - s), len, sp.cut};
  return k;
}

static int split_ref_same(const char *s, size_t n, char *why, size_t cap) {
  split_piece *a = malloc((n + 1) * sizeof *a), *b = malloc((n + 1) * sizeof *b);
  size_t na, nb, limits[5];
  int agree = 1;
  if (a == NULL || b == NULL)
    abort();
  na = split_ref(s, n, a);
  nb = split_new(s, n, b);
  for (size_t i = 0; agree && i < na && i < nb; i++)
    if (a[i].off != b[i].off || a[i].len != b[i].len || a[i].cut != b[i].cut) {
      snprintf(why, cap, "statement %zu: sqlite3_complete [%zu, +%zu) cut %d, lithd_split [%zu, +%zu) cut %d",
               i, a[i].off, a[i].len, a[i].cut, b[i].off, b[i].len, b[i].cut);
      agree = 0;
    }
  if (agree && na != nb) {
    snprintf(why, cap, "sqlite3_complete: %zu statements, lithd_split: %zu", na, nb);
    agree = 0;
  }
  /* counted no further than a limit: the limit + 1 at most */
  limits[0] = 0, limits[1] = 1, limits[2] = na > 0 ? na - 1 : 0, limits[3] = na, limits[4] = na + 1;
  for (int i = 0; agree && i < 5; i++) {
    size_t want = na < limits[i] + 1 ? na : limits[i] + 1, got = lithd_split_count(s, n, limits[i]);
    if (got != want) {
      snprintf(why, cap, "lithd_split_count(max %zu) is %zu, not %zu", limits[i], got, want);
      agree = 0;
    }
  }
  free(a);
  free(b);
  return agree;
}

#endif
