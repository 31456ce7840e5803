/*
 * guard: the bounded functions give SQLite's own answers, and what bounds a
 * run (a function's deadline, the watchdog, stopping) cuts it in time.
 *
 * The functions are checked differentially: the same call on a plain
 * connection (SQLite's built-ins) and on a guarded one, over random
 * arguments built from the bytes that make these functions hard (UTF-8 lead
 * and continuation bytes alone and in characters, NUL, both as text and as
 * blobs, numbers, NULL), with the same SQLITE_LIMIT_LENGTH on both. Set
 * LITH_GUARD_SEED to repeat a run.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "guard.h"
#include "lith.h"

#define LIMIT 4096 /* small, so that "too big" answers come up too */

static uint64_t rng_state;

static uint64_t rnd(void) {
  uint64_t x = rng_state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return rng_state = x;
}

static sqlite3 *open_conn(int guarded) {
  sqlite3 *c = NULL;
  assert_int_equal(sqlite3_open(":memory:", &c), SQLITE_OK);
  if (guarded) {
    lithd_guard_limits lim;
    lithd_guard_limits_default(&lim);
    lim.max_value_bytes = LIMIT;
    assert_int_equal(lithd_guard_connect(&lim, c), SQLITE_OK);
  } else {
    sqlite3_limit(c, SQLITE_LIMIT_LENGTH, LIMIT);
  }
  return c;
}

/* Pieces that make up the random strings. */
static const char *const pieces[] = {
    "a",    "b",        "ab", "aab", " ", "%", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\x80", "\xa9",
    "\xc3", "\xe2\x82", "x",  "\0",  "1", "-", "é",        "\xc3\xa9\x80"};
static const size_t piece_len[] = {1, 1, 2, 3, 1, 1, 2, 3, 4, 1, 1, 1, 2, 1, 1, 1, 1, 2, 3};

static size_t rand_bytes(char *buf, size_t cap) {
  size_t n = 0, k = rnd() % 8;
  if (rnd() % 16 == 0)
    k = rnd() % 200; /* sometimes long */
  for (size_t i = 0; i < k; i++) {
    size_t p = rnd() % (sizeof pieces / sizeof *pieces);
    if (n + piece_len[p] > cap)
      break;
    memcpy(buf + n, pieces[p], piece_len[p]);
    n += piece_len[p];
  }
  return n;
}

/* Bind a random value: mostly text, then blobs, numbers, NULL. */
static void bind_random(sqlite3_stmt *a, sqlite3_stmt *b, int i) {
  char buf[1024];
  size_t n = rand_bytes(buf, sizeof buf);
  switch (rnd() % 10) {
  case 0:
  case 1:
    sqlite3_bind_blob(a, i, buf, (int)n, SQLITE_TRANSIENT);
    sqlite3_bind_blob(b, i, buf, (int)n, SQLITE_TRANSIENT);
    break;
  case 2: {
    int64_t v = (int64_t)(rnd() % 2000) - 1000;
    sqlite3_bind_int64(a, i, v);
    sqlite3_bind_int64(b, i, v);
    break;
  }
  case 3: {
    double v = (double)((int64_t)(rnd() % 20000) - 10000) / 7.0;
    sqlite3_bind_double(a, i, v);
    sqlite3_bind_double(b, i, v);
    break;
  }
  case 4:
    if (rnd() % 3 == 0) {
      sqlite3_bind_null(a, i);
      sqlite3_bind_null(b, i);
      break;
    }
    /* fall through */
  default:
    sqlite3_bind_text(a, i, buf, (int)n, SQLITE_TRANSIENT);
    sqlite3_bind_text(b, i, buf, (int)n, SQLITE_TRANSIENT);
  }
}

static void hexdump(const char *what, sqlite3_stmt *st) {
  int n = sqlite3_column_bytes(st, 0);
  const unsigned char *p = sqlite3_column_blob(st, 0);
  fprintf(stderr, "%s: type %d, %d bytes:", what, sqlite3_column_type(st, 0), n);
  for (int i = 0; i < n && i < 64; i++)
    fprintf(stderr, " %02x", p[i]);
  fprintf(stderr, "\n");
}

/* The same statement stepped on both: the same outcome, type and bytes. */
static void compare(sqlite3 *plain, sqlite3 *guarded, sqlite3_stmt *a, sqlite3_stmt *b) {
  int ra = sqlite3_step(a), rb = sqlite3_step(b);
  if (ra != rb) {
    fprintf(stderr, "%s: plain %d (%s), guarded %d (%s)\n", sqlite3_sql(a), ra, sqlite3_errmsg(plain), rb,
            sqlite3_errmsg(guarded));
    fail();
  }
  if (ra == SQLITE_ROW) {
    int ta = sqlite3_column_type(a, 0), tb = sqlite3_column_type(b, 0);
    int na = sqlite3_column_bytes(a, 0), nb = sqlite3_column_bytes(b, 0);
    const void *pa = sqlite3_column_blob(a, 0), *pb = sqlite3_column_blob(b, 0);
    if (ta != tb || na != nb || (na > 0 && memcmp(pa, pb, (size_t)na) != 0)) {
      fprintf(stderr, "%s: the answers differ\n", sqlite3_sql(a));
      hexdump("plain", a);
      hexdump("guarded", b);
      fail();
    }
  } else {
    assert_int_equal(sqlite3_extended_errcode(plain), sqlite3_extended_errcode(guarded));
  }
  sqlite3_reset(a);
  sqlite3_reset(b);
  sqlite3_clear_bindings(a);
  sqlite3_clear_bindings(b);
}

static void differential(const char *sql, int nargs, int rounds) {
  sqlite3 *plain = open_conn(0), *guarded = open_conn(1);
  sqlite3_stmt *a = NULL, *b = NULL;
  assert_int_equal(sqlite3_prepare_v2(plain, sql, -1, &a, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_prepare_v2(guarded, sql, -1, &b, NULL), SQLITE_OK);
  for (int r = 0; r < rounds; r++) {
    for (int i = 1; i <= nargs; i++)
      bind_random(a, b, i);
    compare(plain, guarded, a, b);
  }
  sqlite3_finalize(a);
  sqlite3_finalize(b);
  sqlite3_close(plain);
  sqlite3_close(guarded);
}

static void test_instr_same_answers(void **state) {
  (void)state;
  differential("SELECT instr(?1, ?2)", 2, 40000);
  differential("SELECT instr(?1 || ?2 || ?1, ?2)", 2, 20000);
}

static void test_replace_same_answers(void **state) {
  (void)state;
  differential("SELECT replace(?1, ?2, ?3)", 3, 40000);
  differential("SELECT replace(?1 || ?2 || ?1 || ?2, ?2, ?3)", 3, 20000);
  /* Long enough to pass LIMIT: "string or blob too big" on both. */
  differential("SELECT replace(printf('%.*c', 2000, 'a'), 'a', ?1)", 1, 2000);
}

static void test_trims_same_answers(void **state) {
  (void)state;
  differential("SELECT trim(?1, ?2)", 2, 30000);
  differential("SELECT ltrim(?1, ?2)", 2, 30000);
  differential("SELECT rtrim(?1, ?2)", 2, 30000);
  differential("SELECT trim(?2 || ?1 || ?2, ?2)", 2, 20000);
  differential("SELECT trim(?1), ltrim(?1), rtrim(?1)", 1, 5000); /* one argument: built-ins */
}

/* A random printf format: literal text, conversions with flags, widths and
 * precisions (numbers or *), length modifiers, and stray bytes. */
static void rand_format(char *buf, size_t cap) {
  static const char *const bits[] = {"%", "-",  "+", " ",  "#",   "!",          "0", ",", "l", "ll",      "*",
                                     ".", ".*", "5", "12", "300", "4294967297", "d", "s", "g", "z",       "q",
                                     "Q", "w",  "c", "o",  "u",   "x",          "X", "f", "e", "E",       "G",
                                     "i", "p",  "r", "n",  "%%",  "T",          "S", "k", "a", "\xc3\xa9"};
  size_t n = 0, k = 1 + rnd() % 12;
  for (size_t i = 0; i < k; i++) {
    const char *b = rnd() % 3 == 0 ? "%" : bits[rnd() % (sizeof bits / sizeof *bits)];
    size_t len = strlen(b);
    if (n + len + 1 > cap)
      break;
    memcpy(buf + n, b, len);
    n += len;
  }
  buf[n] = 0;
}

static void test_printf_same_answers(void **state) {
  (void)state;
  sqlite3 *plain = open_conn(0), *guarded = open_conn(1);
  const char *sql = "SELECT printf(?1, ?2, ?3, ?4, ?5)";
  const char *sql2 = "SELECT format(?1, ?2, ?3, ?4, ?5)";
  sqlite3_stmt *a = NULL, *b = NULL, *a2 = NULL, *b2 = NULL;
  assert_int_equal(sqlite3_prepare_v2(plain, sql, -1, &a, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_prepare_v2(guarded, sql, -1, &b, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_prepare_v2(plain, sql2, -1, &a2, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_prepare_v2(guarded, sql2, -1, &b2, NULL), SQLITE_OK);
  for (int r = 0; r < 40000; r++) {
    char fmt[128];
    rand_format(fmt, sizeof fmt);
    sqlite3_stmt *x = r % 2 ? a : a2, *y = r % 2 ? b : b2;
    sqlite3_bind_text(x, 1, fmt, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(y, 1, fmt, -1, SQLITE_TRANSIENT);
    for (int i = 2; i <= 5; i++) {
      if (rnd() % 3 == 0) { /* counts for '*': small, large, negative, past 32 bits */
        static const int64_t counts[] = {0, 1, 3, 2000, 5000, -7, -3000, 4294967299LL, -2147483648LL};
        int64_t v = counts[rnd() % (sizeof counts / sizeof *counts)];
        sqlite3_bind_int64(x, i, v);
        sqlite3_bind_int64(y, i, v);
      } else {
        bind_random(x, y, i);
      }
    }
    compare(plain, guarded, x, y);
  }
  sqlite3_finalize(a);
  sqlite3_finalize(b);
  sqlite3_finalize(a2);
  sqlite3_finalize(b2);
  sqlite3_close(plain);
  sqlite3_close(guarded);
}

/* What the built-in spends 16 s on: NULL at once. */
static void test_printf_repeat_past_the_limit_is_null_at_once(void **state) {
  (void)state;
  sqlite3 *c = open_conn(1);
  sqlite3_stmt *st = NULL;
  int64_t t0 = lith_clock_ms();
  assert_int_equal(sqlite3_prepare_v2(c,
                                      "SELECT printf('%.*c', 999999999, 'x'),"
                                      " printf('%.4000c%.4000c', 'a', 'b'), length(printf('%.4000c', 'y'))",
                                      -1, &st, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_int_equal(sqlite3_column_type(st, 0), SQLITE_NULL);
  assert_int_equal(sqlite3_column_type(st, 1), SQLITE_NULL); /* 8000 > LIMIT */
  assert_int_equal(sqlite3_column_int(st, 2), 4000);
  assert_true(lith_clock_ms() - t0 < 500);
  sqlite3_finalize(st);
  sqlite3_close(c);
}

static void test_limits_are_set(void **state) {
  (void)state;
  sqlite3 *c = NULL;
  assert_int_equal(sqlite3_open(":memory:", &c), SQLITE_OK);
  assert_int_equal(lithd_guard_connect(NULL, c), SQLITE_OK);
  assert_int_equal(sqlite3_limit(c, SQLITE_LIMIT_LENGTH, -1), 1 << 20);
  assert_int_equal(sqlite3_limit(c, SQLITE_LIMIT_LIKE_PATTERN_LENGTH, -1), 50);
  assert_int_equal(sqlite3_limit(c, SQLITE_LIMIT_VDBE_OP, -1), 250000);
  assert_int_equal(sqlite3_limit(c, SQLITE_LIMIT_ATTACHED, -1), 0);
  /* A value past the limit: "too big", not a megabyte more of memory. */
  assert_int_equal(sqlite3_exec(c, "SELECT zeroblob(2000000)", NULL, NULL, NULL), SQLITE_TOOBIG);
  assert_int_equal(sqlite3_exec(c, "SELECT 'aaa' LIKE printf('%.60c', '%')", NULL, NULL, NULL), SQLITE_ERROR);
  assert_non_null(strstr(sqlite3_errmsg(c), "LIKE or GLOB pattern too complex"));
  sqlite3_close(c);
}

/* trim's walk (|X| x characters of Y) stops at the run's deadline. */
static void test_trim_stops_at_the_deadline(void **state) {
  (void)state;
  sqlite3 *c = NULL;
  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_open(":memory:", &c), SQLITE_OK);
  assert_int_equal(lithd_guard_connect(NULL, c), SQLITE_OK);
  /* Every character of X is the last of 500000 in Y. */
  assert_int_equal(sqlite3_prepare_v2(
                       c,
                       "SELECT length(trim(printf('%.*c', 500000, 'c'), printf('%.*c', 500000, 'd') || 'c'))",
                       -1, &st, NULL),
                   SQLITE_OK);
  int64_t t0 = lith_clock_ms();
  lithd_guard_slot *s = lithd_guard_begin(c, t0 + 100, 0);
  assert_non_null(s);
  int rc = sqlite3_step(st);
  int64_t took = lith_clock_ms() - t0;
  lithd_guard_end(s);
  assert_int_equal(rc, SQLITE_INTERRUPT);
  print_message("trim cut after %lld ms (deadline 100 ms)\n", (long long)took);
  assert_true(took < 1500); /* what it guards against: ~10^11 comparisons */
  sqlite3_reset(st);
  /* With no run on the connection, nothing is cut: the deadline is a run's. */
  sqlite3_finalize(st);
  assert_int_equal(sqlite3_prepare_v2(
                       c, "SELECT length(trim(printf('%.*c', 2000, 'c'), printf('%.*c', 2000, 'd') || 'c'))",
                       -1, &st, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_int_equal(sqlite3_column_int(st, 0), 0);
  sqlite3_finalize(st);
  sqlite3_close(c);
}

/* A statement that never returns to the progress handler (none is set
 * here) is interrupted by the watchdog at its deadline. */
static void test_watchdog_interrupts_past_the_deadline(void **state) {
  (void)state;
  sqlite3 *c = NULL, *plain = NULL;
  assert_int_equal(lithd_guard_start(), 0);
  assert_int_equal(sqlite3_open(":memory:", &c), SQLITE_OK);
  assert_int_equal(lithd_guard_connect(NULL, c), SQLITE_OK);
  const char *forever =
      "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n";
  int64_t t0 = lith_clock_ms();
  lithd_guard_slot *s = lithd_guard_begin(c, t0 + 150, 0);
  int rc = sqlite3_exec(c, forever, NULL, NULL, NULL);
  int64_t took = lith_clock_ms() - t0;
  assert_int_equal(lithd_guard_cut(s), LITHD_GUARD_DEADLINE);
  lithd_guard_end(s);
  assert_int_equal(rc, SQLITE_INTERRUPT);
  print_message("watchdog cut after %lld ms (deadline 150 ms)\n", (long long)took);
  assert_true(took >= 150 && took < 1500); /* without it: for ever */
  /* The run ended: the next statement is not hit by a late interrupt. */
  assert_int_equal(lithd_guard_cut(s), LITHD_GUARD_NONE);
  usleep(50 * 1000);
  assert_int_equal(sqlite3_exec(c, "SELECT 1", NULL, NULL, NULL), SQLITE_OK);
  /* A connection without the guard has no slot; begin and end are no-ops. */
  assert_int_equal(sqlite3_open(":memory:", &plain), SQLITE_OK);
  assert_null(lithd_guard_begin(plain, 0, 1));
  lithd_guard_end(NULL);
  assert_int_equal(lithd_guard_cut(NULL), LITHD_GUARD_NONE);
  sqlite3_close(plain);
  sqlite3_close(c);
  lithd_guard_stop();
}

struct stopper {
  int64_t after_ms;
};

static void *stop_later(void *arg) {
  struct stopper *k = arg;
  usleep((useconds_t)(k->after_ms * 1000));
  lithd_guard_stop_reads();
  return NULL;
}

/* Stopping cuts reads (running, and those that begin after), not writes.
 * Last: lithd_guard_stop_reads lasts for the process. */
static void test_stop_reads_cuts_reads_only(void **state) {
  (void)state;
  sqlite3 *c = NULL;
  pthread_t t;
  struct stopper k = {100};
  assert_int_equal(lithd_guard_start(), 0);
  assert_int_equal(sqlite3_open(":memory:", &c), SQLITE_OK);
  assert_int_equal(lithd_guard_connect(NULL, c), SQLITE_OK);
  const char *forever =
      "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n";
  int64_t t0 = lith_clock_ms();
  lithd_guard_slot *s = lithd_guard_begin(c, INT64_MAX, 1); /* no deadline: only the stop ends it */
  assert_int_equal(pthread_create(&t, NULL, stop_later, &k), 0);
  int rc = sqlite3_exec(c, forever, NULL, NULL, NULL);
  int64_t took = lith_clock_ms() - t0;
  assert_int_equal(lithd_guard_cut(s), LITHD_GUARD_STOPPING);
  lithd_guard_end(s);
  pthread_join(t, NULL);
  assert_int_equal(rc, SQLITE_INTERRUPT);
  print_message("stop cut the read after %lld ms (stop at 100 ms)\n", (long long)took);
  assert_true(took >= 100 && took < 1500);
  /* A write run is not a read: not cut by the stop. */
  s = lithd_guard_begin(c, lith_clock_ms() + 60000, 0);
  assert_int_equal(lithd_guard_cut(s), LITHD_GUARD_NONE);
  assert_int_equal(
      sqlite3_exec(c,
                   "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 300000)"
                   " SELECT count(*) FROM n",
                   NULL, NULL, NULL),
      SQLITE_OK);
  lithd_guard_end(s);
  /* A read that begins now is cut at once. */
  s = lithd_guard_begin(c, INT64_MAX, 1);
  assert_int_equal(lithd_guard_cut(s), LITHD_GUARD_STOPPING);
  lithd_guard_end(s);
  sqlite3_close(c);
  lithd_guard_stop();
}

int main(void) {
  const char *seed = getenv("LITH_GUARD_SEED");
  rng_state = seed != NULL ? strtoull(seed, NULL, 10) : (uint64_t)time(NULL) * 2654435761u;
  if (rng_state == 0)
    rng_state = 1;
  print_message("guard: LITH_GUARD_SEED=%llu\n", (unsigned long long)rng_state);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_instr_same_answers),
      cmocka_unit_test(test_replace_same_answers),
      cmocka_unit_test(test_trims_same_answers),
      cmocka_unit_test(test_printf_same_answers),
      cmocka_unit_test(test_printf_repeat_past_the_limit_is_null_at_once),
      cmocka_unit_test(test_limits_are_set),
      cmocka_unit_test(test_trim_stops_at_the_deadline),
      cmocka_unit_test(test_watchdog_interrupts_past_the_deadline),
      cmocka_unit_test(test_stop_reads_cuts_reads_only),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
