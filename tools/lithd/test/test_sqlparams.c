/*
 * sqlparams.c against SQLite: for each statement, the count and the name of
 * every number lithd_sql_params finds must be what SQLite's own
 * sqlite3_bind_parameter_count / _name say after preparing it (lithd
 * --dqlite binds by these numbers; a difference would put a client's value
 * into another parameter). The statements are the tricky ones: parameters
 * inside strings, quoted names and comments, ?NNN before and after names,
 * names repeated, '$' inside words, adjacent operators.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <sqlite3.h>

#include "sqlparams.h"

static const char *const cases[] = {
    "SELECT 1",
    "SELECT ?",
    "SELECT ?, ?, ?",
    "SELECT ?2, ?1",
    "SELECT ?3, ?",
    "SELECT :a, :b, :a",
    "SELECT @a, $b, :c, @a",
    "SELECT ?1, :a, ?, :a",
    "SELECT :a, ?5, :b, ?",
    "SELECT '?', ?2, ?1 -- ?\n",
    "SELECT :a, '@b', :a /* :c */",
    "SELECT \"?x\", ? AS `:y`, ? AS [@z]",
    "SELECT 'it''s ?', :q",
    "SELECT x'00ff', ?",
    "SELECT 1+?2*:c3",
    "SELECT a$b FROM (SELECT 1 AS a$b) WHERE a$b = :v",
    "SELECT 1=:a, 2<>?, 3<=@b||$c",
    "SELECT :a_1, :a_2, :_x, :a_1",
    "SELECT ?10",
    "SELECT -- :hidden\n :shown",
    "SELECT /* ?, :x */ ?, /**/ :y",
    "SELECT ?, ?2, ?",
    "SELECT :Ab, :ab",
    "SELECT 1; -- ? after the statement",
};

static void check(const char *sql) {
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  const char *names[LITHD_SQL_MAX_PARAMS];
  size_t lens[LITHD_SQL_MAX_PARAMS];
  int count = -1;
  assert_int_equal(sqlite3_open(":memory:", &db), SQLITE_OK);
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
    fail_msg("SQLite refuses the case %s: %s", sql, sqlite3_errmsg(db));
  assert_int_equal(lithd_sql_params(sql, names, lens, &count), 0);
  if (count != sqlite3_bind_parameter_count(st))
    fail_msg("%s: %d parameters, SQLite says %d", sql, count, sqlite3_bind_parameter_count(st));
  for (int k = 0; k < count; k++) {
    const char *want = sqlite3_bind_parameter_name(st, k + 1);
    if (want == NULL) {
      if (names[k] != NULL)
        fail_msg("%s: number %d is %.*s, SQLite has no name", sql, k + 1, (int)lens[k], names[k]);
    } else if (want[0] == '?') {
      if (names[k] != NULL) /* ?NNN: SQLite names it "?NNN", ours has no name */
        fail_msg("%s: number %d is %.*s, SQLite says %s", sql, k + 1, (int)lens[k], names[k], want);
    } else if (names[k] == NULL || strlen(want) != lens[k] || memcmp(want, names[k], lens[k]) != 0) {
      fail_msg("%s: number %d is %.*s, SQLite says %s", sql, k + 1, names[k] ? (int)lens[k] : 6,
               names[k] ? names[k] : "(none)", want);
    }
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
}

static void test_numbers_as_sqlite(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    check(cases[i]);
}

/* More than dqlite binds: refused, not cut. */
static void test_too_many(void **state) {
  (void)state;
  const char *names[LITHD_SQL_MAX_PARAMS];
  size_t lens[LITHD_SQL_MAX_PARAMS];
  int count = 0;
  char sql[64];
  snprintf(sql, sizeof sql, "SELECT ?%d", LITHD_SQL_MAX_PARAMS);
  assert_int_equal(lithd_sql_params(sql, names, lens, &count), 0);
  assert_int_equal(count, LITHD_SQL_MAX_PARAMS);
  snprintf(sql, sizeof sql, "SELECT ?%d", LITHD_SQL_MAX_PARAMS + 1);
  assert_int_equal(lithd_sql_params(sql, names, lens, &count), -2);
  assert_int_equal(lithd_sql_params("SELECT ?0", names, lens, &count), -2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_numbers_as_sqlite),
      cmocka_unit_test(test_too_many),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
