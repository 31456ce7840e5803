/*
 * test_lithd_format — the answer format (sqljson.h: rows, types, int64)
 * through lithd's routes: the query parameters every route that answers
 * rows takes, their precedence over the body's keys, and the refusals (400,
 * before anything runs). test_sqljson checks the encoding itself; this
 * checks that each route passes the request's choice on.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "child.h"

#define COMMANDS   \
  "-- name: put\n" \
  "INSERT INTO kv(k, v) VALUES (:k, :v) RETURNING k, v;\n"

#define SELECT_KV "{\"statements\":[{\"sql\":\"SELECT k, v FROM kv ORDER BY k\"}]}"

/* The commands file and the schema it needs. */
static void write_files(void) {
  FILE *f = fopen("format-cmds.sql", "w");
  assert_non_null(f);
  fputs(COMMANDS, f);
  assert_int_equal(fclose(f), 0);
  f = fopen("format-schema.sql", "w");
  assert_non_null(f);
  fputs("CREATE TABLE kv(k TEXT PRIMARY KEY, v INTEGER);\n", f);
  assert_int_equal(fclose(f), 0);
}

static void test_every_route_takes_the_format(void **state) {
  struct tl_child *c = *state;
  write_files();
  tl_start(c, "format", 0, TL_ARGS("--schema", "format-schema.sql", "--commands", "format-cmds.sql"));

  /* /v1/commands/NAME */
  tl_expect(c, "POST", "/v1/commands/put?rows=objects&int64=string", NULL,
            "{\"params\":{\"k\":\"max\",\"v\":9223372036854775807}}", 200,
            "\"last_insert_rowid\":1,\"columns\":[\"k\",\"v\"],"
            "\"rows\":[{\"k\":\"max\",\"v\":\"9223372036854775807\"}]}");
  /* /v1/do, the query's and the body's together */
  tl_expect(c, "POST", "/v1/do?types=true", NULL,
            "{\"statements\":[{\"sql\":\"INSERT INTO kv VALUES ('one', 1) RETURNING v, v + 1 AS w\"}],"
            "\"rows\":\"objects\"}",
            200, "\"columns\":[\"v\",\"w\"],\"types\":[\"INTEGER\",null],\"rows\":[{\"v\":1,\"w\":2}]");
  /* /v1/query: the query wins over the body */
  tl_expect(c, "POST", "/v1/query?rows=arrays", NULL,
            "{\"statements\":[{\"sql\":\"SELECT k, v FROM kv ORDER BY k\"}],\"rows\":\"objects\"}", 200,
            "\"rows\":[[\"max\",9223372036854775807],[\"one\",1]]");
  tl_expect(c, "POST", "/v1/query?int64=string&rows=objects", NULL, SELECT_KV, 200,
            "\"rows\":[{\"k\":\"max\",\"v\":\"9223372036854775807\"},{\"k\":\"one\",\"v\":1}]");
  /* /v1/batch: the query for every command, a command's own keys for it */
  tl_expect(c, "POST", "/v1/batch?types=true", NULL,
            "{\"commands\":[{\"statements\":[{\"sql\":\"SELECT v FROM kv WHERE k = 'one'\"}]},"
            "{\"statements\":[{\"sql\":\"SELECT v FROM kv WHERE k = 'one'\"}],\"rows\":\"objects\"}]}",
            200,
            "{\"results\":[{\"results\":[{\"changes\":0,\"last_insert_rowid\":0,\"columns\":[\"v\"],"
            "\"types\":[\"INTEGER\"],\"rows\":[[1]]}]},{\"results\":[{\"changes\":0,\"last_insert_rowid\":0,"
            "\"columns\":[\"v\"],\"types\":[\"INTEGER\"],\"rows\":[{\"v\":1}]}]}]}");
  /* without any: the answer as it always was */
  tl_expect(c, "POST", "/v1/query", NULL, SELECT_KV, 200,
            "{\"results\":[{\"changes\":0,\"last_insert_rowid\":0,\"columns\":[\"k\",\"v\"],"
            "\"rows\":[[\"max\",9223372036854775807],[\"one\",1]]}]}");
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

static void test_refusals_run_nothing(void **state) {
  struct tl_child *c = *state;
  static const char *const routes[] = {"/v1/do", "/v1/query", "/v1/batch", "/v1/commands/put"};
  static const char *const bodies[] = {
      "{\"statements\":[{\"sql\":\"INSERT INTO kv VALUES ('x', 1)\"}]}",
      SELECT_KV,
      "{\"commands\":[{\"statements\":[{\"sql\":\"INSERT INTO kv VALUES ('x', 1)\"}]}]}",
      "{\"params\":{\"k\":\"x\",\"v\":1}}",
  };
  write_files();
  tl_start(c, "refuse", 0, TL_ARGS("--schema", "format-schema.sql", "--commands", "format-cmds.sql"));
  for (size_t i = 0; i < sizeof routes / sizeof *routes; i++) {
    char path[128];
    snprintf(path, sizeof path, "%s?rows=object", routes[i]);
    tl_expect(
        c, "POST", path, NULL, bodies[i], 400,
        "{\"error\":{\"code\":\"bad_request\",\"message\":\"query parameter rows must be rows=arrays or "
        "rows=objects\",\"statement\":null}}");
    snprintf(path, sizeof path, "%s?int64=string&bigint=1", routes[i]);
    tl_expect(c, "POST", path, NULL, bodies[i], 400, "unknown query parameter \\\"bigint\\\"");
  }
  /* a statement whose columns share a name, as objects: 400, and the
   * command is undone whole */
  tl_expect(c, "POST", "/v1/do?rows=objects", NULL,
            "{\"statements\":[{\"sql\":\"INSERT INTO kv VALUES ('y', 2)\"},"
            "{\"sql\":\"INSERT INTO kv VALUES ('z', 3) RETURNING k, v AS k\"}]}",
            400, "columns 0 and 1 are both named \\\"k\\\"");
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  assert_int_equal(tl_sql_int("refuse.db", "SELECT count(*) FROM kv"), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_every_route_takes_the_format, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_refusals_run_nothing, tl_setup, tl_teardown),
  };
  return cmocka_run_group_tests_name("tools/lithd/format", tests, NULL, NULL);
}
