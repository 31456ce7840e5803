/*
 * test_split — sql/split.c, the one splitter of a text into statements
 * (Hrana's sequence, named commands), against sqlite3_complete's answers
 * (split_ref.h): a table of cases that each rule of that answer decides
 * (quotes of the four kinds, both comments, CREATE [TEMP] TRIGGER ... ;
 * END;, EXPLAIN, words that only look like keywords, NUL bytes); then
 * many thousands of random texts made of those pieces; the count that
 * stops past a limit; blanks and comments skipped; and the time, which
 * must grow linearly with the text whatever it holds (the old splitter's
 * was quadratic: 200,000 ';' in one string held lithd's loop 26.6 s).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "split.h"
#include "split_ref.h"

static void same(const char *s, size_t n) {
  char why[256];
  if (!split_ref_same(s, n, why, sizeof why)) {
    fprintf(stderr, "text (%zu bytes): \"", n);
    for (size_t i = 0; i < n; i++)
      fprintf(stderr, (unsigned char)s[i] < 0x20 || s[i] == '"' ? "\\x%02x" : "%c", (unsigned char)s[i]);
    fprintf(stderr, "\"\n%s\n", why);
    fail();
  }
}

#define SAME(lit) same(lit, sizeof(lit) - 1)

/* The statements of a text, as strings, "|"-separated, for the cases
 * whose answer is worth reading here (the rest only agree with SQLite). */
static char *pieces(const char *s) {
  static char out[512];
  lithd_split sp;
  const char *p;
  size_t len, at = 0;
  out[0] = '\0';
  lithd_split_init(&sp, s, strlen(s));
  while (lithd_split_next(&sp, &p, &len))
    at += (size_t)snprintf(out + at, sizeof out - at, "%s%.*s", at ? "|" : "", (int)len, p);
  return out;
}

static void test_cases(void **state) {
  (void)state;
  /* what the answers say, spelled out */
  assert_string_equal(pieces("SELECT 1; SELECT 2"), "SELECT 1;| SELECT 2");
  assert_string_equal(pieces("SELECT 1;  -- done\n /* end */ "), "SELECT 1;");
  assert_string_equal(pieces("SELECT ';'; SELECT \"a;b\"; SELECT `c;`; SELECT [d;]"),
                      "SELECT ';';| SELECT \"a;b\";| SELECT `c;`;| SELECT [d;]");
  assert_string_equal(pieces("SELECT 1 -- a;b\n; SELECT /* ; */ 2;"),
                      "SELECT 1 -- a;b\n;| SELECT /* ; */ 2;");
  assert_string_equal(pieces("CREATE TRIGGER t AFTER INSERT ON x BEGIN SELECT 1; SELECT 2; END; SELECT 3;"),
                      "CREATE TRIGGER t AFTER INSERT ON x BEGIN SELECT 1; SELECT 2; END;| SELECT 3;");
  assert_string_equal(pieces(";;SELECT 1;"), ";|;|SELECT 1;");
  assert_string_equal(pieces(""), "");
  assert_string_equal(pieces("   \n\t"), "");
  assert_string_equal(pieces("SELECT 'open; still;"), "SELECT 'open; still;");

  /* and against sqlite3_complete, rule by rule */
  SAME("SELECT 1; SELECT 2;");
  SAME("SELECT 'a;''b;'; SELECT 1");
  SAME("SELECT \"a;\"\"b\"; SELECT `x;``y`; SELECT [a;b];");
  SAME("SELECT [a;[b;]; SELECT 2;");
  SAME("SELECT 'never closed; SELECT 2;");
  SAME("SELECT \"never closed; SELECT 2;");
  SAME("SELECT `never closed; SELECT 2;");
  SAME("SELECT [never closed; SELECT 2;");
  SAME("SELECT 1 -- comment; here\n; SELECT 2;");
  SAME("SELECT 1; -- comment; at the end;");
  SAME("SELECT 1; -- comment; at the end;\n");
  SAME("-- only; a comment;");
  SAME("/* only; a comment; */");
  SAME("/* never closed; SELECT 1;");
  SAME("SELECT 1 /*/ still; in it */; SELECT 2;");
  SAME("SELECT 1 /**/; SELECT 2 /***/;");
  SAME("SELECT 1 - 2; SELECT 3 / 4;-");
  SAME("SELECT 1 -");
  SAME("SELECT 1 /");
  SAME("SELECT 1;/");
  SAME("SELECT 1;-");
  SAME("SELECT 1;--");
  SAME("SELECT 1;/*");
  SAME("SELECT 1;\v");
  SAME("SELECT 1;\v;");
  SAME("CREATE\vTRIGGER t BEGIN SELECT 1; END; SELECT 2;"); /* \v is no blank to SQLite */
  SAME("SELECT 1;\f\r\n\t ");
  SAME(";");
  SAME(";;;");
  SAME(" ; ; ");
  /* triggers: only "; END ;" ends one; BEGIN and CASE are plain words */
  SAME("CREATE TRIGGER t AFTER INSERT ON x BEGIN SELECT 1; END; SELECT 2;");
  SAME("CREATE TEMP TRIGGER t AFTER INSERT ON x BEGIN SELECT 1; END; SELECT 2;");
  SAME("create temporary trigger t after insert on x begin select 1; end ; select 2;");
  SAME("CREATE TEMP TEMP TRIGGER t BEGIN SELECT 1; END; SELECT 2;");
  SAME("CREATE TRIGGER t BEGIN SELECT CASE WHEN 1 THEN 2 END; END; SELECT 2;");
  SAME("CREATE TRIGGER t BEGIN SELECT CASE WHEN 1 THEN 2 END END; SELECT 3; END; SELECT 4;");
  SAME("CREATE TRIGGER t BEGIN SELECT 1;; ; END ; ; SELECT 2;");
  SAME("CREATE TRIGGER t BEGIN SELECT 1; /* c */ END /* c */ ; SELECT 2;");
  SAME("CREATE TRIGGER t BEGIN SELECT 1; -- c\n END -- c\n ; SELECT 2;");
  SAME("CREATE TRIGGER t BEGIN SELECT 1; END x; END; SELECT 2;");
  SAME("CREATE TRIGGER t BEGIN SELECT 1; 'END'; END; SELECT 2;");
  SAME("CREATE TRIGGER t BEGIN SELECT 1; [END]; \"END\"; END; SELECT 2;");
  SAME("CREATE TRIGGER t BEGIN SELECT 1; ENDS; END_; END$; END1; END; SELECT 2;");
  SAME("CREATE TRIGGER t BEGIN SELECT 1; eNd; SELECT 2;");
  SAME("CREATE TRIGGER never ended; SELECT 1;");
  SAME("CREATE TABLE t(x); CREATE TRIGGER; END; SELECT 1;");
  SAME("CREATE; TRIGGER t; END; SELECT 1;");
  SAME("CREATE VIEW v AS SELECT 1; CREATE TEMP VIEW w AS SELECT 2;");
  SAME("CREATE TEMP; SELECT 1;");
  SAME("CREATETRIGGER x; SELECT 1;");
  SAME("CREATE\nTRIGGER\tt\fBEGIN\rSELECT 1;\nEND\n;SELECT 2;");
  SAME("CREATE/**/TRIGGER t BEGIN SELECT 1; END; SELECT 2;");
  SAME("CREATE--x\nTRIGGER t BEGIN SELECT 1; END; SELECT 2;");
  SAME("CREATE 'x' TRIGGER t BEGIN SELECT 1; END; SELECT 2;");
  SAME("x CREATE TRIGGER t BEGIN SELECT 1; END; SELECT 2;");
  SAME("CREATE x TRIGGER t BEGIN SELECT 1; END; SELECT 2;");
  SAME("EXPLAIN CREATE TRIGGER t BEGIN SELECT 1; END; SELECT 2;");
  SAME("EXPLAIN QUERY PLAN CREATE TRIGGER t BEGIN SELECT 1; END; SELECT 2;");
  SAME("EXPLAIN 'x' CREATE TRIGGER t BEGIN SELECT 1; END; SELECT 2;");
  SAME("EXPLAIN EXPLAIN CREATE TRIGGER t BEGIN SELECT 1; END; SELECT 2;");
  SAME("EXPLAIN TEMP CREATE TRIGGER t BEGIN SELECT 1; END; SELECT 2;");
  SAME("EXPLAIN ( CREATE TRIGGER t BEGIN SELECT 1; END; SELECT 2;");
  SAME("EXPLAIN; CREATE TRIGGER t BEGIN SELECT 1; END; SELECT 2;");
  SAME("EXPLAIN CREATE TEMP TRIGGER t BEGIN SELECT 1; END; SELECT 2;");
  SAME("EXPLAIN SELECT 1; SELECT 2;");
  SAME("explainer CREATE TRIGGER t BEGIN SELECT 1; END; SELECT 2;");
  SAME("CREATE TRIGGER t BEGIN SELECT 'a;b'; END; SELECT 2;");
  SAME("CREATE TRIGGER t BEGIN SELECT 1; END");
  SAME("CREATE TRIGGER t BEGIN SELECT 1; END;");
  SAME("CREATE TRIGGER t BEGIN SELECT 1; END; ");
  SAME("CREATE TRIGGER t BEGIN SELECT 1; END -- x;");
  /* words: letters, digits, '_', '$', bytes >= 0x80 */
  SAME("CREATE \xc3\xa9 TRIGGER t BEGIN SELECT 1; END; SELECT 2;");
  SAME("CREATE TRIGGER\xc3\xa9 t BEGIN SELECT 1; END; SELECT 2;");
  SAME("CREATE TRIGGER t BEGIN SELECT 1; \xc3\xa9"
       "END; END\xc3\xa9; END; SELECT 2;");
  SAME("CREATE$ TRIGGER t BEGIN SELECT 1; END; SELECT 2;");
  SAME("CREATE TRIGGER t BEGIN SELECT 1; END\x7f; SELECT 2;");
  SAME("CREATE @x TRIGGER t BEGIN SELECT 1; END; SELECT 2;");
  SAME("1CREATE TRIGGER t BEGIN SELECT 1; END; SELECT 2;");
  SAME("_CREATE TRIGGER t BEGIN SELECT 1; END; SELECT 2;");
  SAME("CREATE TEMPORARY TRIGGER t BEGIN SELECT 1; END; SELECT 2;");
  SAME("CREATE TEMPORARYX TRIGGER t BEGIN SELECT 1; END; SELECT 2;");
  SAME("CREATE TEMPO TRIGGER t BEGIN SELECT 1; END; SELECT 2;");
  SAME("CREATE TRIGGERS t BEGIN SELECT 1; END; SELECT 2;");
  /* NUL: SQLite reads to it */
  SAME("SELECT 1;\0SELECT 2;");
  SAME("SELECT 1;\0");
  SAME("SELECT 1; \0 ;");
  SAME("SELECT 1\0; SELECT 2;");
  SAME("SELECT '\0'; SELECT 2;");
  SAME("\0");
  SAME(";\0;");
  SAME("SELECT 1; -- x\0\nSELECT 2;");
  SAME("SELECT 1; /* x\0 */ SELECT 2;");
  SAME("SELECT 1; /* x */\0 SELECT 2;");
  SAME("CREATE TRIGGER t BEGIN SELECT 1; END\0; SELECT 2;");
}

/* A deterministic generator (xorshift64*): the same texts on every run. */
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next_rand(void) {
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return (uint32_t)((rng * 0x2545f4914f6cdd1dull) >> 32);
}

/* Whether a piece opens what may never close (or is a NUL). */
static int opens(const char *s, size_t n) {
  static const char *const openers[] = {"'", "\"", "`", "[", "--", "/*"};
  if (n == 1 && s[0] == '\0')
    return 1;
  for (size_t i = 0; i < sizeof openers / sizeof openers[0]; i++)
    if (strlen(openers[i]) == n && memcmp(openers[i], s, n) == 0)
      return 1;
  return 0;
}

static void test_random_texts(void **state) {
  (void)state;
  enum { TEXTS = 40000, MAX_TOKENS = 48 };
  char buf[MAX_TOKENS * 32];
  size_t na = SPLIT_ALPHABET_N;
  for (int t = 0; t < TEXTS; t++) {
    size_t n = 0, tokens = 1 + next_rand() % MAX_TOKENS;
    /* a third of the texts without NUL, quotes or comment openers in
     * their second half, so that more of them end whole */
    int tame = t % 3 == 0;
    for (size_t k = 0; k < tokens; k++) {
      size_t pick = next_rand() % na;
      if (tame && k > tokens / 2)
        while (opens(split_alphabet[pick].s, split_alphabet[pick].n))
          pick = next_rand() % na;
      memcpy(buf + n, split_alphabet[pick].s, split_alphabet[pick].n);
      n += split_alphabet[pick].n;
    }
    same(buf, n);
  }
}

static void test_count_stops(void **state) {
  (void)state;
  const char *s = "SELECT 1; SELECT 2; SELECT 3;  -- end";
  assert_int_equal(lithd_split_count(s, strlen(s), 0), 1);
  assert_int_equal(lithd_split_count(s, strlen(s), 1), 2);
  assert_int_equal(lithd_split_count(s, strlen(s), 2), 3);
  assert_int_equal(lithd_split_count(s, strlen(s), 3), 3);
  assert_int_equal(lithd_split_count(s, strlen(s), 100), 3);
  assert_int_equal(lithd_split_count("", 0, 5), 0);
  assert_int_equal(lithd_split_count(" /* */ ", 7, 5), 0);
}

/* How far lithd_sql_skip_blank goes into s[0..n). */
static long skip_of(const char *s, size_t n) { return (long)(lithd_sql_skip_blank(s, s + n) - s); }

static void test_skip_blank(void **state) {
  (void)state;
#define SKIP(lit) skip_of(lit, sizeof(lit) - 1)
  assert_int_equal(SKIP(""), 0);
  assert_int_equal(SKIP(" \t\n\v\f\rx"), 6);
  assert_int_equal(SKIP("-- c\nx"), 5);
  assert_int_equal(SKIP("-- c"), 4);
  assert_int_equal(SKIP("/* c */x"), 7);
  assert_int_equal(SKIP("/* c *"), 6); /* unclosed: the end */
  assert_int_equal(SKIP("/*/x"), 4);
  assert_int_equal(SKIP("-x"), 0);
  assert_int_equal(SKIP("/x"), 0);
  assert_int_equal(SKIP("  \0x"), 4); /* a NUL ends the text */
  assert_int_equal(SKIP("-- \0\nx"), 6);
  assert_int_equal(SKIP("/* \0 */x"), 8);
  const char *s = "  x";
  assert_ptr_equal(lithd_sql_skip_blank(s, s + 1), s + 1); /* never past end */
#undef SKIP
}

/* This thread's CPU time: the splitter's work, whatever else the machine
 * runs (wall time on a loaded machine counts the waits for a core). */
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A text of about n bytes: head, then fill repeated, then tail. */
static char *text_of(const char *head, const char *fill, const char *tail, size_t n, size_t *len) {
  size_t h = strlen(head), f = strlen(fill), t = strlen(tail), k = 0;
  char *s = malloc(h + n + f + t + 1);
  assert_non_null(s);
  memcpy(s, head, h);
  for (k = h; k < h + n; k += f)
    memcpy(s + k, fill, f);
  memcpy(s + k, tail, t);
  *len = k + t;
  return s;
}

/* Seconds to split s and count its statements (the fastest of 5 runs);
 * one run over `bound` s fails at once, so a quadratic splitter fails
 * on the first text it is slow on rather than after minutes. */
static double split_time(const char *s, size_t n, size_t want, double bound) {
  double best = 1e9;
  for (int r = 0; r < 5; r++) {
    lithd_split sp;
    const char *p;
    size_t len, k = 0;
    double t0 = now_s();
    lithd_split_init(&sp, s, n);
    while (lithd_split_next(&sp, &p, &len))
      k++;
    double t = now_s() - t0;
    assert_int_equal(k, want);
    if (t > bound)
      fprintf(stderr, "%zu bytes took %.3f s (bound %.3f s)\n", n, t, bound);
    assert_true(t <= bound);
    best = t < best ? t : best;
  }
  return best;
}

static void test_linear_time(void **state) {
  (void)state;
  static const struct {
    const char *head, *fill, *tail;
    size_t per_fill; /* statements per fill (0: the text is one) */
  } shapes[] = {
      {"SELECT '", ";", "'", 0},                       /* the report's: ';' in one string */
      {"SELECT '", ";", "", 0},                        /* ... never closed */
      {"SELECT 1 /*", ";", "*/", 0},                   /* in a comment */
      {"SELECT [", ";", "]", 0},                       /* in a bracket */
      {"CREATE TRIGGER t BEGIN ", "SELECT 1;", "", 0}, /* a trigger's body, never ended */
      {"CREATE TRIGGER t BEGIN ", "; END x", "", 0},   /* almost ended, again and again */
      {"", "SELECT 1;", "", 1},                        /* many statements */
      {"", ";", "", 1},                                /* many empty ones */
      {"", "-- ;\n", "SELECT 1", 0},                   /* ';' in line comments */
      {"", "CREATE TRIGGER t BEGIN SELECT 1; END;", "", 1},
  };
  /* 250,000 ';' and the rest first, each within 1 s: the old splitter took
   * about 40 s at this size (sqlite3_complete once per ';'); then 1 and
   * 2 MB: twice the text, at most 3 times the time (+ 2 ms for the clock
   * on a busy machine) */
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    size_t n, f = strlen(shapes[i].fill);
    char *s = text_of(shapes[i].head, shapes[i].fill, shapes[i].tail, 250000, &n);
    split_time(s, n, shapes[i].per_fill ? (n + f - 1) / f : 1, 1.0);
    free(s);
  }
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    size_t n1, n2, f = strlen(shapes[i].fill);
    char *s1 = text_of(shapes[i].head, shapes[i].fill, shapes[i].tail, 1 << 20, &n1);
    char *s2 = text_of(shapes[i].head, shapes[i].fill, shapes[i].tail, 2 << 20, &n2);
    double t1 = split_time(s1, n1, shapes[i].per_fill ? (n1 + f - 1) / f : 1, 1.0);
    double t2 = split_time(s2, n2, shapes[i].per_fill ? (n2 + f - 1) / f : 1, 2.0);
    if (t2 > 3 * t1 + 0.002)
      fprintf(stderr, "shape %zu: 1 MB %.4f s, 2 MB %.4f s\n", i, t1, t2);
    assert_true(t2 <= 3 * t1 + 0.002);
    free(s1);
    free(s2);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cases),       cmocka_unit_test(test_random_texts),
      cmocka_unit_test(test_count_stops), cmocka_unit_test(test_skip_blank),
      cmocka_unit_test(test_linear_time),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
