/*
 * sqljson: JSON statement lists through a real lith database and back.
 *
 * Every round trip goes parse -> lith_do (a command calling
 * lithd_batch_run) or lith_read (lithd_batch_read) -> lithd_result_json,
 * and the JSON that comes out is read back with jansson, so the assertions
 * hold for what a client would see. Request bodies are written with ` for
 * the JSON quote (req() swaps them) so that SQL can keep its ' quotes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include <cmocka.h>

#include "sqljson.h"

#define DB "sqljson.db"

static const char *const migrations[] = {
    "CREATE TABLE t(id INTEGER PRIMARY KEY, v);"
    "CREATE TABLE kv(k TEXT PRIMARY KEY, v INTEGER NOT NULL);",
};

static void remove_db(void) {
  static const char *const files[] = {DB, DB "-wal", DB "-shm", DB "-journal"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++)
    unlink(files[i]);
}

static lith *open_db_limited(int command_timeout_ms) {
  lith_options opt;
  lith *db = NULL;
  lith_options_default(&opt);
  opt.command_timeout_ms = command_timeout_ms;
  opt.migrations = migrations;
  opt.n_migrations = 1;
  opt.readers = 2;
  opt.cache_size_kib = 2048;
  remove_db();
  int rc = lith_open(DB, &opt, &db);
  if (rc != LITH_OK)
    fail_msg("lith_open: %s: %s", lith_errstr(rc), lith_errmsg(NULL));
  return db;
}

static lith *open_db(void) { return open_db_limited(0); }

/* The body with every ` turned into ". The caller frees it. */
static char *req(const char *text) {
  char *s = strdup(text);
  assert_non_null(s);
  for (char *p = s; *p; p++)
    if (*p == '`')
      *p = '"';
  return s;
}

typedef struct job {
  lithd_batch *b;
  lithd_result *res;
  int runs;
} job;

static int run_cmd(lith_tx *tx, void *arg) {
  job *j = arg;
  j->runs++;
  return lithd_batch_run(tx, j->b, &j->res);
}

static int read_fn(lith_rx *rx, void *arg) {
  job *j = arg;
  j->runs++;
  return lithd_batch_read(rx, j->b, &j->res);
}

static void job_parse(job *j, const char *text, const lithd_limits *lim) {
  lithd_error err;
  char *body = req(text);
  memset(j, 0, sizeof *j);
  int rc = lithd_batch_parse(body, strlen(body), lim, &j->b, &err);
  if (rc != LITH_OK)
    fail_msg("parse %s: %s (statement %d): %s", body, lithd_code_name(rc), err.statement, err.message);
  assert_int_equal(err.code, LITH_OK);
  free(body);
}

static void job_free(job *j) {
  lithd_batch_free(j->b);
  lithd_result_free(j->res);
  memset(j, 0, sizeof *j);
}

/* Parse and run through lith_do; returns lith_do's result. */
static int do_json(lith *db, job *j, const char *text) {
  job_parse(j, text, NULL);
  return lith_do(db, run_cmd, j);
}

static int read_json(lith *db, job *j, const char *text) {
  job_parse(j, text, NULL);
  return lith_read(db, read_fn, j);
}

/* The result's JSON, parsed back. */
static json_t *res_json(const lithd_result *r, char **text) {
  json_error_t e;
  char *s = lithd_result_json(r);
  assert_non_null(s);
  json_t *root = json_loads(s, JSON_ALLOW_NUL, &e);
  if (!root)
    fail_msg("result is not JSON (%s): %s", e.text, s);
  if (text)
    *text = s;
  else
    free(s);
  return root;
}

static json_t *stmt_of(json_t *root, int st) {
  json_t *v = json_array_get(json_object_get(root, "results"), (size_t)st);
  assert_non_null(v);
  return v;
}

static json_t *cell(json_t *root, int st, int row, int col) {
  json_t *v =
      json_array_get(json_array_get(json_object_get(stmt_of(root, st), "rows"), (size_t)row), (size_t)col);
  assert_non_null(v);
  return v;
}

static int64_t int_at(json_t *root, int st, int row, int col) {
  json_t *v = cell(root, st, row, col);
  assert_true(json_is_integer(v));
  return (int64_t)json_integer_value(v);
}

static int64_t field(json_t *root, int st, const char *key) {
  json_t *v = json_object_get(stmt_of(root, st), key);
  assert_true(json_is_integer(v));
  return (int64_t)json_integer_value(v);
}

/* Expect parse to fail with `code`, at `statement`, with `needle` in the message. */
static void parse_fails(const char *text, const lithd_limits *lim, int code, int statement,
                        const char *needle) {
  lithd_error err;
  lithd_batch *b = (lithd_batch *)&err; /* must be reset to NULL */
  char *body = req(text);
  int rc = lithd_batch_parse(body, strlen(body), lim, &b, &err);
  if (rc != code || err.statement != statement || !strstr(err.message, needle))
    fail_msg("parse %s: got %s statement %d \"%s\", want %s statement %d \"%s\"", body, lithd_code_name(rc),
             err.statement, err.message, lithd_code_name(code), statement, needle);
  assert_int_equal(err.code, code);
  assert_null(b);
  free(body);
}

/* The error a result carries, checked, and its JSON checked too. */
static void result_fails(const lithd_result *r, int code, int statement, const char *needle) {
  lithd_error err;
  assert_non_null(r);
  int rc = lithd_result_error(r, &err);
  if (rc != code || err.statement != statement || !strstr(err.message, needle))
    fail_msg("got %s statement %d \"%s\", want %s statement %d \"%s\"", lithd_code_name(rc), err.statement,
             err.message, lithd_code_name(code), statement, needle);
  json_t *root = res_json(r, NULL);
  json_t *e = json_object_get(root, "error");
  assert_non_null(e);
  assert_null(json_object_get(root, "results"));
  assert_string_equal(json_string_value(json_object_get(e, "code")), lithd_code_name(code));
  assert_non_null(strstr(json_string_value(json_object_get(e, "message")), needle));
  assert_int_equal(json_integer_value(json_object_get(e, "statement")), statement);
  json_decref(root);
}

static int64_t count_rows(lith *db, const char *sql) {
  job j;
  char text[512];
  snprintf(text, sizeof text, "{`statements`: [{`sql`: `%s`}]}", sql);
  assert_int_equal(read_json(db, &j, text), LITH_OK);
  json_t *root = res_json(j.res, NULL);
  int64_t n = int_at(root, 0, 0, 0);
  json_decref(root);
  job_free(&j);
  return n;
}

/* ---- Values ------------------------------------------------------------------ */

static void test_integers_exact_at_the_bounds(void **state) {
  (void)state;
  lith *db = open_db();
  job j;
  char *text;
  assert_int_equal(
      do_json(db, &j,
              "{`statements`: [{`sql`: `INSERT INTO t(id, v) VALUES (1, ?), (2, ?), (3, ?), (4, ?), (5, ?)`,"
              " `params`: [9223372036854775807, -9223372036854775808, 9007199254740993,"
              " -9007199254740993, 0]}]}"),
      LITH_OK);
  job_free(&j);
  /* in SQL itself, not just in our JSON */
  assert_int_equal(count_rows(db, "SELECT count(*) FROM t WHERE typeof(v) = 'integer'"), 5);
  assert_int_equal(count_rows(db, "SELECT v = 9007199254740993 FROM t WHERE id = 3"), 1);
  assert_int_equal(count_rows(db, "SELECT v = 9223372036854775807 FROM t WHERE id = 1"), 1);

  assert_int_equal(read_json(db, &j, "{`statements`: [{`sql`: `SELECT v FROM t ORDER BY id`}]}"), LITH_OK);
  json_t *root = res_json(j.res, &text);
  assert_int_equal(int_at(root, 0, 0, 0), INT64_MAX);
  assert_int_equal(int_at(root, 0, 1, 0), INT64_MIN);
  assert_int_equal(int_at(root, 0, 2, 0), 9007199254740993LL);
  assert_int_equal(int_at(root, 0, 3, 0), -9007199254740993LL);
  assert_int_equal(int_at(root, 0, 4, 0), 0);
  /* the digits themselves, as a client in any language reads them */
  assert_non_null(strstr(text, "[[9223372036854775807],[-9223372036854775808],[9007199254740993],"
                               "[-9007199254740993],[0]]"));
  free(text);
  json_decref(root);
  job_free(&j);

  /* one past either bound is refused, never rounded to a real */
  parse_fails("{`statements`: [{`sql`: `SELECT ?`, `params`: [9223372036854775808]}]}", NULL,
              LITHD_BAD_REQUEST, -1, "too big integer");
  parse_fails("{`statements`: [{`sql`: `SELECT ?`, `params`: [-9223372036854775809]}]}", NULL,
              LITHD_BAD_REQUEST, -1, "too big negative integer");
  parse_fails("{`statements`: [{`sql`: `SELECT ?`, `params`: [1e400]}]}", NULL, LITHD_BAD_REQUEST, -1,
              "overflow");
  assert_int_equal(lith_close(db), LITH_OK);
}

static void test_reals_text_null_booleans(void **state) {
  (void)state;
  lith *db = open_db();
  job j;
  char *text;
  assert_int_equal(
      read_json(
          db, &j,
          "{`statements`: [{`sql`: `SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, typeof(?), typeof(?), ?`,"
          " `params`: [0.1, -2.5e-300, 1.0, 3.141592653589793, -0.0, `h\\u00e9llo \\u2713 \\ud834\\udd1e`,"
          " `q\\\"b\\\\s\\n\\t\\u0001 z\\u0000end`, null, true, false, 1.5, 1e300]}]}"),
      LITH_OK);
  json_t *root = res_json(j.res, &text);
  json_t *v;
  v = cell(root, 0, 0, 0);
  assert_true(json_is_real(v));
  assert_true(json_real_value(v) == 0.1);
  assert_true(json_real_value(cell(root, 0, 0, 1)) == -2.5e-300);
  v = cell(root, 0, 0, 2);
  assert_true(json_is_real(v)); /* 1.0 stays a real: "1.0", not "1" */
  assert_true(json_real_value(v) == 1.0);
  assert_true(json_real_value(cell(root, 0, 0, 3)) == 3.141592653589793);
  assert_true(json_is_real(cell(root, 0, 0, 4)));
  /* shortest exact form, not %.17g noise */
  assert_non_null(strstr(text, "[[0.1,-2.5e-300,1.0,3.141592653589793,-0.0,"));
  assert_string_equal(json_string_value(cell(root, 0, 0, 5)), "h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9d\x84\x9e");
  v = cell(root, 0, 0, 6);
  assert_int_equal(json_string_length(v), 14);
  assert_memory_equal(json_string_value(v), "q\"b\\s\n\t\x01 z\0end", 14);
  assert_true(json_is_null(cell(root, 0, 0, 7)));
  assert_int_equal(int_at(root, 0, 0, 8), 1);
  assert_string_equal(json_string_value(cell(root, 0, 0, 9)), "integer"); /* false -> 0 */
  assert_string_equal(json_string_value(cell(root, 0, 0, 10)), "real");
  assert_true(json_real_value(cell(root, 0, 0, 11)) == 1e300);
  json_decref(root);
  free(text);
  job_free(&j);

  /* Infinity (SQLite holds it) comes back as null; TEXT with U+0000 survives
     a round trip through a table */
  assert_int_equal(
      do_json(db, &j,
              "{`statements`: [{`sql`: `INSERT INTO t(id, v) VALUES (1, ?)`, `params`: [`a\\u0000b`]},"
              " {`sql`: `SELECT 1e999, -1e999, length(CAST(v AS BLOB)), v FROM t`}]}"),
      LITH_OK);
  root = res_json(j.res, NULL);
  assert_true(json_is_null(cell(root, 1, 0, 0)));
  assert_true(json_is_null(cell(root, 1, 0, 1)));
  assert_int_equal(int_at(root, 1, 0, 2), 3);
  assert_int_equal(json_string_length(cell(root, 1, 0, 3)), 3);
  assert_memory_equal(json_string_value(cell(root, 1, 0, 3)), "a\0b", 3);
  json_decref(root);
  job_free(&j);
  assert_int_equal(lith_close(db), LITH_OK);
}

static void test_blobs_round_trip(void **state) {
  (void)state;
  lith *db = open_db();
  job j;
  /* every byte value, and lengths 0..4 for each padding case */
  unsigned char all[256];
  for (int i = 0; i < 256; i++)
    all[i] = (unsigned char)i;
  static const char *const b64[] = {
      "",     /* empty */
      "AA==", /* one zero byte */
      "AAA=", /* two */
      "AAAA", /* three */
      "/+7dzA==",
  };
  char *body = malloc(4096);
  assert_non_null(body);
  int n = snprintf(
      body, 4096, "{`statements`: [{`sql`: `INSERT INTO t(id, v) VALUES (?, ?)`, `params`: [0, {`base64`: `");
  /* base64 of 0..255, encoded here by hand to check the decoder against */
  static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (int i = 0; i < 256; i += 3) {
    unsigned w = (unsigned)all[i] << 16 | (i + 1 < 256 ? (unsigned)all[i + 1] << 8 : 0) |
                 (i + 2 < 256 ? all[i + 2] : 0);
    body[n++] = abc[w >> 18 & 63];
    body[n++] = abc[w >> 12 & 63];
    body[n++] = i + 1 < 256 ? abc[w >> 6 & 63] : '=';
    body[n++] = i + 2 < 256 ? abc[w & 63] : '=';
  }
  n += snprintf(body + n, 4096 - (size_t)n, "`}]}");
  for (int i = 0; i < 5; i++)
    n += snprintf(body + n, 4096 - (size_t)n,
                  ", {`sql`: `INSERT INTO t(id, v) VALUES (?, ?)`, `params`: [%d, {`base64`: `%s`}]}", i + 1,
                  b64[i]);
  snprintf(body + n, 4096 - (size_t)n,
           ", {`sql`: `SELECT id, typeof(v), length(v), hex(v), v FROM t ORDER BY id`}]}");
  char *sent = req(body);
  assert_int_equal(do_json(db, &j, body), LITH_OK);
  json_t *root = res_json(j.res, NULL);
  static const char *const hex[] = {"", "00", "0000", "000000", "FFEEDDCC"};
  static const int len[] = {0, 1, 2, 3, 4};
  for (int i = 0; i < 6; i++) {
    assert_int_equal(int_at(root, 6, i, 0), i);
    assert_string_equal(json_string_value(cell(root, 6, i, 1)), "blob"); /* even the empty one */
    assert_int_equal(int_at(root, 6, i, 2), i == 0 ? 256 : len[i - 1]);
    if (i > 0)
      assert_string_equal(json_string_value(cell(root, 6, i, 3)), hex[i - 1]);
    json_t *v = cell(root, 6, i, 4);
    assert_true(json_is_object(v));
    assert_int_equal(json_object_size(v), 1);
    const char *got = json_string_value(json_object_get(v, "base64"));
    assert_non_null(got);
    if (i > 0)
      assert_string_equal(got, b64[i - 1]);
    else
      assert_non_null(strstr(sent, got)); /* the same 344 characters came back */
  }
  char allhex[513];
  for (int i = 0; i < 256; i++)
    snprintf(allhex + 2 * i, 3, "%02X", i);
  assert_string_equal(json_string_value(cell(root, 6, 0, 3)), allhex);
  json_decref(root);
  job_free(&j);
  free(sent);
  free(body);

  /* strict decoding */
  static const struct {
    const char *s, *why;
  } bad[] = {
      {"AAA", "not a multiple of 4"}, {"AA=A", "bad character"},
      {"A===", "bad character"},      {"AA==AA==", "bad character"}, /* padding in the middle */
      {"AB==", "stray bits"},                                        /* 'B' leaves bits the padding drops */
      {"AAB=", "stray bits"},         {"AA AA", "not a multiple of 4"},
      {"AA\\nA", "bad character"},    {"AA-_", "bad character"}, /* base64url is not accepted */
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char text[256];
    snprintf(text, sizeof text,
             "{`statements`: [{`sql`: `SELECT 1`}, {`sql`: `SELECT ?`, `params`: [{`base64`: `%s`}]}]}",
             bad[i].s);
    parse_fails(text, NULL, LITHD_BAD_REQUEST, 1, bad[i].why);
  }
  parse_fails("{`statements`: [{`sql`: `SELECT ?`, `params`: [{`base64`: 12}]}]}", NULL, LITHD_BAD_REQUEST, 0,
              "must be a string");
  parse_fails("{`statements`: [{`sql`: `SELECT ?`, `params`: [{`base64`: ``, `x`: 1}]}]}", NULL,
              LITHD_BAD_REQUEST, 0, "(a blob)");
  parse_fails("{`statements`: [{`sql`: `SELECT ?`, `params`: [{}]}]}", NULL, LITHD_BAD_REQUEST, 0,
              "(a blob)");
  parse_fails("{`statements`: [{`sql`: `SELECT ?`, `params`: [[1]]}]}", NULL, LITHD_BAD_REQUEST, 0,
              "parameter 1: an array is not a value");
  assert_int_equal(lith_close(db), LITH_OK);
}

/* ---- Parameters, rows, counters --------------------------------------------- */

static void test_named_and_positional_params(void **state) {
  (void)state;
  lith *db = open_db();
  job j;
  assert_int_equal(
      do_json(db, &j,
              "{`statements`: ["
              "{`sql`: `INSERT INTO t(id, v) VALUES (:id, :v)`, `params`: {`:v`: `colon`, `:id`: 1}},"
              "{`sql`: `INSERT INTO t(id, v) VALUES (@id, @v)`, `params`: {`@id`: 2, `@v`: `at`}},"
              "{`sql`: `INSERT INTO t(id, v) VALUES ($id, $v)`, `params`: {`$id`: 3, `$v`: `dollar`}},"
              "{`sql`: `INSERT INTO t(id, v) VALUES (?, ?)`, `params`: [4, `question`]},"
              "{`sql`: `INSERT INTO t(id, v) VALUES (?2, ?1)`, `params`: [`numbered`, 5]},"
              "{`sql`: `INSERT INTO t(id, v) VALUES (:a, :a || :b)`, `params`: {`:a`: 6, `:b`: `x`}},"
              "{`sql`: `INSERT INTO t(id, v) VALUES (?1, 'by number')`, `params`: {`?1`: 7}},"
              "{`sql`: `SELECT id, v FROM t ORDER BY id`}]}"),
      LITH_OK);
  json_t *root = res_json(j.res, NULL);
  static const char *const want[] = {"colon", "at", "dollar", "question", "numbered", "6x", "by number"};
  assert_int_equal(json_array_size(json_object_get(stmt_of(root, 7), "rows")), 7);
  for (int i = 0; i < 7; i++) {
    assert_int_equal(int_at(root, 7, i, 0), i + 1);
    assert_string_equal(json_string_value(cell(root, 7, i, 1)), want[i]);
  }
  json_decref(root);
  job_free(&j);

  /* binding mistakes are the request's, found on the writer: the whole
     command is undone and says which statement */
  static const struct {
    const char *body, *needle;
    int statement;
  } bad[] = {
      {"{`statements`: [{`sql`: `INSERT INTO t(id) VALUES (100)`}, {`sql`: `SELECT :id`, `params`: {`:nope`: "
       "1}}]}",
       "no parameter \""
       ":nope\"",
       1},
      {"{`statements`: [{`sql`: `SELECT :id, :other`, `params`: {`:id`: 1}}]}", "\":other\" is not given", 0},
      {"{`statements`: [{`sql`: `SELECT ?, :id`, `params`: {`:id`: 1}}]}", "parameter 1 has no name", 0},
      {"{`statements`: [{`sql`: `SELECT ?, ?`, `params`: [1]}]}", "2 parameters, 1 given", 0},
      {"{`statements`: [{`sql`: `SELECT ?`, `params`: [1, 2]}]}", "1 parameter, 2 given", 0},
      {"{`statements`: [{`sql`: `SELECT ?`}]}", "1 parameter, 0 given", 0},
      /* ?1 is :a's index, but only :a names it */
      {"{`statements`: [{`sql`: `SELECT :a, ?1`, `params`: {`:a`: 1, `?1`: 2}}]}", "no parameter \"?1\"", 0},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    assert_int_equal(do_json(db, &j, bad[i].body), LITHD_BAD_REQUEST);
    result_fails(j.res, LITHD_BAD_REQUEST, bad[i].statement, bad[i].needle);
    assert_int_equal(lithd_http_status(LITHD_BAD_REQUEST), 400);
    job_free(&j);
  }
  assert_int_equal(count_rows(db, "SELECT count(*) FROM t WHERE id = 100"), 0);

  parse_fails("{`statements`: [{`sql`: `SELECT :id`, `params`: {`id`: 1}}]}", NULL, LITHD_BAD_REQUEST, 0,
              "beginning with ':', '@', '$' or '?'");
  parse_fails("{`statements`: [{`sql`: `SELECT :id`, `params`: {`:id`: 1, `:id`: 2}}]}", NULL,
              LITHD_BAD_REQUEST, -1, "duplicate");
  parse_fails("{`statements`: [{`sql`: `SELECT 1`, `params`: 5}]}", NULL, LITHD_BAD_REQUEST, 0,
              "\"params\" must be an array");
  parse_fails("{`statements`: [{`sql`: `SELECT 1`, `params`: `x`}]}", NULL, LITHD_BAD_REQUEST, 0,
              "\"params\" must be an array");
  assert_int_equal(lith_close(db), LITH_OK);
}

static void test_rows_columns_changes_rowids(void **state) {
  (void)state;
  lith *db = open_db();
  job j;
  char *text;
  assert_int_equal(do_json(db, &j,
                           "{`statements`: ["
                           "{`sql`: `INSERT INTO t(id, v) VALUES (41, 'a')`},"
                           "{`sql`: `INSERT INTO t(v) VALUES ('b'), ('c') RETURNING id, v AS value`},"
                           "{`sql`: `UPDATE t SET v = v || '!' WHERE id > 41`},"
                           "{`sql`: `SELECT id AS ident, v, NULL AS empty FROM t ORDER BY id`},"
                           "{`sql`: `DELETE FROM t WHERE id = 43 RETURNING *`},"
                           "{`sql`: `CREATE TABLE other(x)`},"
                           "{`sql`: `UPDATE t SET v = 0 WHERE id = 999`}]}"),
                   LITH_OK);
  json_t *root = res_json(j.res, &text);
  assert_int_equal(json_array_size(json_object_get(root, "results")), 7);
  /* a plain INSERT: counters, no columns, no rows; the exact text */
  assert_non_null(
      strstr(text, "{\"results\":[{\"changes\":1,\"last_insert_rowid\":41,\"columns\":[],\"rows\":[]},"));
  /* RETURNING */
  assert_int_equal(field(root, 1, "changes"), 2);
  assert_int_equal(field(root, 1, "last_insert_rowid"), 43);
  json_t *cols = json_object_get(stmt_of(root, 1), "columns");
  assert_int_equal(json_array_size(cols), 2);
  assert_string_equal(json_string_value(json_array_get(cols, 0)), "id");
  assert_string_equal(json_string_value(json_array_get(cols, 1)), "value");
  assert_int_equal(int_at(root, 1, 0, 0), 42);
  assert_string_equal(json_string_value(cell(root, 1, 1, 1)), "c");
  /* UPDATE: its own count; no insert of its own, so rowid 0 */
  assert_int_equal(field(root, 2, "changes"), 2);
  assert_int_equal(field(root, 2, "last_insert_rowid"), 0);
  /* SELECT: rows and names, and no changes although the UPDATE before had */
  assert_int_equal(field(root, 3, "changes"), 0);
  cols = json_object_get(stmt_of(root, 3), "columns");
  assert_int_equal(json_array_size(cols), 3);
  assert_string_equal(json_string_value(json_array_get(cols, 0)), "ident");
  assert_string_equal(json_string_value(json_array_get(cols, 2)), "empty");
  assert_int_equal(json_array_size(json_object_get(stmt_of(root, 3), "rows")), 3);
  assert_string_equal(json_string_value(cell(root, 3, 2, 1)), "c!");
  assert_true(json_is_null(cell(root, 3, 2, 2)));
  /* DELETE ... RETURNING * */
  assert_int_equal(field(root, 4, "changes"), 1);
  assert_int_equal(int_at(root, 4, 0, 0), 43);
  /* DDL and an UPDATE of nothing: 0 */
  assert_int_equal(field(root, 5, "changes"), 0);
  assert_int_equal(field(root, 6, "changes"), 0);
  json_decref(root);
  free(text);
  job_free(&j);

  /* an empty list is an empty answer */
  assert_int_equal(do_json(db, &j, "{`statements`: []}"), LITH_OK);
  text = lithd_result_json(j.res);
  assert_string_equal(text, "{\"results\":[]}");
  free(text);
  job_free(&j);

  /* reads: the same shape, counters 0 */
  assert_int_equal(read_json(db, &j,
                             "{`statements`: [{`sql`: `SELECT count(*) AS n FROM t`},"
                             " {`sql`: `WITH x(a) AS (VALUES (1), (2)) SELECT a FROM x`},"
                             " {`sql`: ` /* lead */ -- line\\n VALUES (7)`}]}"),
                   LITH_OK);
  root = res_json(j.res, &text);
  assert_int_equal(int_at(root, 0, 0, 0), 2);
  assert_int_equal(int_at(root, 1, 1, 0), 2);
  assert_int_equal(int_at(root, 2, 0, 0), 7);
  assert_string_equal(
      text, "{\"results\":[{\"changes\":0,\"last_insert_rowid\":0,\"columns\":[\"n\"],\"rows\":[[2]]},"
            "{\"changes\":0,\"last_insert_rowid\":0,\"columns\":[\"a\"],\"rows\":[[1],[2]]},"
            "{\"changes\":0,\"last_insert_rowid\":0,\"columns\":[\"column1\"],\"rows\":[[7]]}]}");
  json_decref(root);
  free(text);
  job_free(&j);
  assert_int_equal(lith_close(db), LITH_OK);
}

/* ---- Failures ---------------------------------------------------------------- */

static void test_failing_statement_undoes_the_command(void **state) {
  (void)state;
  lith *db = open_db();
  job j;
  assert_int_equal(do_json(db, &j, "{`statements`: [{`sql`: `INSERT INTO kv VALUES ('taken', 1)`}]}"),
                   LITH_OK);
  job_free(&j);

  int rc = do_json(db, &j,
                   "{`statements`: [{`sql`: `INSERT INTO kv VALUES ('fresh', 1)`},"
                   " {`sql`: `INSERT INTO kv VALUES (?, 2)`, `params`: [`taken`]},"
                   " {`sql`: `INSERT INTO kv VALUES ('never', 3)`}]}");
  assert_int_equal(rc, LITH_CONSTRAINT);
  result_fails(j.res, LITH_CONSTRAINT, 1, "UNIQUE constraint failed: kv.k");
  assert_int_equal(lithd_http_status(rc), 409);
  /* the producer's message names the statement too */
  assert_non_null(strstr(lith_errmsg(db), "statement 1: UNIQUE constraint failed"));
  job_free(&j);
  assert_int_equal(count_rows(db, "SELECT count(*) FROM kv WHERE k = 'fresh'"), 0);
  assert_int_equal(count_rows(db, "SELECT count(*) FROM kv WHERE k = 'never'"), 0);
  assert_int_equal(count_rows(db, "SELECT v FROM kv WHERE k = 'taken'"), 1);

  /* NOT NULL, and an SQL error (400) */
  assert_int_equal(do_json(db, &j, "{`statements`: [{`sql`: `INSERT INTO kv VALUES ('n', NULL)`}]}"),
                   LITH_CONSTRAINT);
  result_fails(j.res, LITH_CONSTRAINT, 0, "NOT NULL");
  job_free(&j);
  assert_int_equal(do_json(db, &j, "{`statements`: [{`sql`: `SELECT 1`}, {`sql`: `SELEC 2`}]}"), LITH_ERROR);
  result_fails(j.res, LITH_ERROR, 1, "syntax error");
  assert_int_equal(lithd_http_status(LITH_ERROR), 400);
  job_free(&j);
  assert_int_equal(do_json(db, &j, "{`statements`: [{`sql`: `SELECT * FROM missing`}]}"), LITH_ERROR);
  result_fails(j.res, LITH_ERROR, 0, "no such table: missing");
  job_free(&j);
  /* two statements in one "sql", and a comment alone, are refused by lith */
  assert_int_equal(do_json(db, &j, "{`statements`: [{`sql`: `SELECT 1; SELECT 2`}]}"), LITH_MISUSE);
  result_fails(j.res, LITH_MISUSE, 0, "more than one statement");
  job_free(&j);
  assert_int_equal(read_json(db, &j, "{`statements`: [{`sql`: `SELECT 1; DELETE FROM kv`}]}"), LITH_MISUSE);
  result_fails(j.res, LITH_MISUSE, 0, "more than one statement");
  job_free(&j);
  assert_int_equal(do_json(db, &j, "{`statements`: [{`sql`: `-- nothing`}]}"), LITH_MISUSE);
  result_fails(j.res, LITH_MISUSE, 0, "empty statement");
  job_free(&j);
  /* the writer's transaction control stays the writer's */
  assert_int_equal(do_json(db, &j, "{`statements`: [{`sql`: `COMMIT`}]}"), LITHD_FORBIDDEN);
  result_fails(j.res, LITHD_FORBIDDEN, 0, "not authorized");
  assert_int_equal(lithd_http_status(LITHD_FORBIDDEN), 403);
  job_free(&j);
  assert_int_equal(count_rows(db, "SELECT count(*) FROM kv"), 1);
  assert_int_equal(lith_close(db), LITH_OK);
}

/* lithd_authorizer (sqljson_run.c) on the write connection: what would
 * change the database's files or settings for every client is refused
 * with LITHD_FORBIDDEN, and the command undone; PRAGMAs that read stay. */
static void test_authorizer(void **state) {
  (void)state;
  static const char *const refused[] = {
      "ATTACH DATABASE 'elsewhere.db' AS e",
      "PRAGMA journal_mode = DELETE",
      "PRAGMA synchronous = OFF",
      "PRAGMA writable_schema = 1",
      "SELECT load_extension('x')",
      "SELECT fts3_tokenizer('simple')",
  };
  static const char *const allowed[] = {
      "PRAGMA user_version",
      "PRAGMA table_info(kv)",
      "PRAGMA integrity_check",
      "SELECT * FROM pragma_table_info('kv')",
  };
  lith_options opt;
  lith *db = NULL;
  job j;
  lith_options_default(&opt);
  opt.migrations = migrations;
  opt.n_migrations = 1;
  opt.authorizer = lithd_authorizer;
  remove_db();
  assert_int_equal(lith_open(DB, &opt, &db), LITH_OK);
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
    char text[256];
    snprintf(text, sizeof text,
             "{`statements`: [{`sql`: `INSERT INTO kv(k, v) VALUES ('a', 1)`}, {`sql`: `%s`}]}", refused[i]);
    int rc = do_json(db, &j, text);
    if (rc != LITHD_FORBIDDEN)
      fail_msg("%s: %s", refused[i], lithd_code_name(rc));
    result_fails(j.res, LITHD_FORBIDDEN, 1, "lithd refuses ATTACH");
    job_free(&j);
  }
  assert_int_equal(count_rows(db, "SELECT count(*) FROM kv"), 0);
  for (size_t i = 0; i < sizeof allowed / sizeof *allowed; i++) {
    char text[256];
    snprintf(text, sizeof text, "{`statements`: [{`sql`: `%s`}]}", allowed[i]);
    int rc = do_json(db, &j, text);
    if (rc != LITH_OK)
      fail_msg("%s: %s", allowed[i], lithd_code_name(rc));
    job_free(&j);
  }
  /* the callback itself */
  assert_int_equal(lithd_authorizer(NULL, SQLITE_DETACH, "e", NULL, NULL, NULL), SQLITE_DENY);
  assert_int_equal(lithd_authorizer(NULL, SQLITE_PRAGMA, "foreign_keys", "0", NULL, NULL), SQLITE_DENY);
  assert_int_equal(lithd_authorizer(NULL, SQLITE_PRAGMA, "foreign_key_check", "t", NULL, NULL), SQLITE_OK);
  assert_int_equal(lithd_authorizer(NULL, SQLITE_FUNCTION, NULL, "LOAD_EXTENSION", NULL, NULL), SQLITE_DENY);
  assert_int_equal(lithd_authorizer(NULL, SQLITE_FUNCTION, NULL, "lower", NULL, NULL), SQLITE_OK);
  assert_int_equal(lithd_authorizer(NULL, SQLITE_INSERT, "kv", NULL, "main", NULL), SQLITE_OK);
  assert_int_equal(lith_close(db), LITH_OK);
}

static void test_malformed_requests(void **state) {
  (void)state;
  parse_fails("{`statements`: [", NULL, LITHD_BAD_REQUEST, -1, "invalid JSON at line 1");
  parse_fails("", NULL, LITHD_BAD_REQUEST, -1, "invalid JSON");
  parse_fails("[]", NULL, LITHD_BAD_REQUEST, -1, "must be an object");
  parse_fails("{}", NULL, LITHD_BAD_REQUEST, -1, "\"statements\" must be an array and is missing");
  parse_fails("{`statements`: {}}", NULL, LITHD_BAD_REQUEST, -1, "\"statements\" must be an array");
  parse_fails("{`statements`: [], `extra`: 1}", NULL, LITHD_BAD_REQUEST, -1, "unknown key \"extra\"");
  parse_fails("{`statements`: [{`sql`: `SELECT 1`}, 5]}", NULL, LITHD_BAD_REQUEST, 1, "must be an object");
  parse_fails("{`statements`: [{`sql`: `SELECT 1`}, {`params`: []}]}", NULL, LITHD_BAD_REQUEST, 1,
              "\"sql\" is missing");
  parse_fails("{`statements`: [{`sql`: 5}]}", NULL, LITHD_BAD_REQUEST, 0, "\"sql\" must be a string");
  parse_fails("{`statements`: [{`sql`: null}]}", NULL, LITHD_BAD_REQUEST, 0, "\"sql\" must be a string");
  parse_fails("{`statements`: [{`sql`: ` \\n `}]}", NULL, LITHD_BAD_REQUEST, 0, "\"sql\" is empty");
  parse_fails("{`statements`: [{`sql`: `SELECT 1\\u0000; DROP TABLE t`}]}", NULL, LITHD_BAD_REQUEST, 0,
              "NUL character");
  parse_fails("{`statements`: [{`sql`: `SELECT ?`, `param`: [1]}]}", NULL, LITHD_BAD_REQUEST, 0,
              "unknown key \"param\"");
  parse_fails("{`statements`: [{`sql`: `SELECT ?`, `sql\\u0000x`: 1}]}", NULL, LITHD_BAD_REQUEST, -1,
              "NUL byte in object key");
  parse_fails("{`statements`: [{`sql`: `SELECT ?`, `params`: [1, 2, [3]]}]}", NULL, LITHD_BAD_REQUEST, 0,
              "parameter 3: an array");
  parse_fails("{`statements`: [{`sql`: `SELECT :a`, `params`: {`:a`: {`k`: 1}}}]}", NULL, LITHD_BAD_REQUEST,
              0, "parameter \":a\": an object must be");
  /* invalid UTF-8 in the body */
  lithd_error err;
  lithd_batch *b = NULL;
  const char bad_utf8[] = "{\"statements\": [{\"sql\": \"SELECT '\xff'\"}]}";
  assert_int_equal(lithd_batch_parse(bad_utf8, sizeof bad_utf8 - 1, NULL, &b, &err), LITHD_BAD_REQUEST);
  assert_null(b);
  assert_non_null(strstr(err.message, "invalid UTF-8 in string"));
  char *ej = lithd_error_json(&err); /* the raw byte never leaks into the JSON */
  json_error_t jerr;
  json_t *parsed = json_loads(ej, 0, &jerr);
  assert_non_null(parsed);
  json_decref(parsed);
  free(ej);
  /* a body need not be NUL-terminated: only len bytes are read */
  const char trailing[] = "{\"statements\": []}GARBAGE";
  assert_int_equal(lithd_batch_parse(trailing, sizeof trailing - 1 - 7, NULL, &b, &err), LITH_OK);
  assert_int_equal(lithd_batch_count(b), 0);
  lithd_batch_free(b);
  /* err may be NULL */
  assert_int_equal(lithd_batch_parse("{", 1, NULL, &b, NULL), LITHD_BAD_REQUEST);
  assert_null(b);
  assert_int_equal(lithd_http_status(LITHD_BAD_REQUEST), 400);
}

static void test_limits(void **state) {
  (void)state;
  lithd_limits lim = {0};
  lim.max_statements = 2;
  lim.max_sql_bytes = 20;
  lim.max_params = 3;
  lim.max_body_bytes = 200;
  parse_fails("{`statements`: [{`sql`: `SELECT 1`}, {`sql`: `SELECT 2`}, {`sql`: `SELECT 3`}]}", &lim,
              LITHD_TOO_LARGE, -1, "3 statements, over the limit of 2");
  parse_fails("{`statements`: [{`sql`: `SELECT 1`}, {`sql`: `SELECT 'abcdefghijklmn'`}]}", &lim,
              LITHD_TOO_LARGE, 1, "the SQL is 23 bytes, over the limit of 20");
  parse_fails("{`statements`: [{`sql`: `SELECT ?, ?, ?, ?`, `params`: [1, 2, 3, 4]}]}", &lim, LITHD_TOO_LARGE,
              0, "4 parameters, over the limit of 3");
  parse_fails("{`statements`: [{`sql`: `SELECT :a`, `params`: {`:a`: 1, `:b`: 2, `:c`: 3, `:d`: 4}}]}", &lim,
              LITHD_TOO_LARGE, 0, "4 parameters");
  char big[400];
  memset(big, ' ', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  memcpy(big, "{`statements`: []}", 18);
  parse_fails(big, &lim, LITHD_TOO_LARGE, -1, "the body is 399 bytes, over the limit of 200");
  /* exactly at the limits is fine */
  job j;
  job_parse(
      &j, "{`statements`: [{`sql`: `SELECT ?, ?, ?`, `params`: [1, 2, 3]}, {`sql`: `SELECT 'abcdefghijk'`}]}",
      &lim);
  assert_int_equal(lithd_batch_count(j.b), 2);
  job_free(&j);
  assert_int_equal(lithd_http_status(LITHD_TOO_LARGE), 413);

  lithd_limits def;
  lithd_limits_default(&def);
  assert_true(def.max_rows > 0 && def.max_statements > 0 && def.max_sql_bytes > 0 && def.max_params > 0 &&
              def.max_body_bytes > 0 && def.max_result_bytes > 0);
}

static void test_too_many_rows_is_an_error(void **state) {
  (void)state;
  lith *db = open_db();
  lithd_limits lim = {0};
  lim.max_rows = 5;
  job j;
  char *body;

  /* 5 rows over two statements: fine */
  body = req(
      "{`statements`: [{`sql`: `WITH RECURSIVE c(x) AS (VALUES (1) UNION ALL SELECT x + 1 FROM c WHERE x < 3)"
      " SELECT x FROM c`}, {`sql`: `VALUES (1), (2)`}]}");
  memset(&j, 0, sizeof j);
  assert_int_equal(lithd_batch_parse(body, strlen(body), &lim, &j.b, NULL), LITH_OK);
  assert_int_equal(lith_read(db, read_fn, &j), LITH_OK);
  job_free(&j);
  free(body);

  /* the sixth row, in the second statement: an error, not a cut answer */
  body = req("{`statements`: [{`sql`: `VALUES (1), (2), (3)`}, {`sql`: `VALUES (1), (2), (3)`}]}");
  assert_int_equal(lithd_batch_parse(body, strlen(body), &lim, &j.b, NULL), LITH_OK);
  assert_int_equal(lith_read(db, read_fn, &j), LITHD_RESULT_TOO_LARGE);
  result_fails(j.res, LITHD_RESULT_TOO_LARGE, 1, "more than 5 rows");
  assert_int_equal(lithd_http_status(LITHD_RESULT_TOO_LARGE), 422);
  job_free(&j);
  free(body);

  /* on the writer, RETURNING rows count, and the command is undone */
  body = req("{`statements`: [{`sql`: `INSERT INTO t(v) SELECT value FROM json_each('[1,2,3,4,5,6]') "
             "RETURNING id`}]}");
  assert_int_equal(lithd_batch_parse(body, strlen(body), &lim, &j.b, NULL), LITH_OK);
  assert_int_equal(lith_do(db, run_cmd, &j), LITHD_RESULT_TOO_LARGE);
  result_fails(j.res, LITHD_RESULT_TOO_LARGE, 0, "more than 5 rows");
  job_free(&j);
  free(body);
  assert_int_equal(count_rows(db, "SELECT count(*) FROM t"), 0);

  /* bytes of text and blobs, and of column names (they are sent too):
   * 2 + 10 in the first statement, 1 + 1 in the second, one over 13 */
  lim.max_rows = 0;
  lim.max_result_bytes = 13;
  body =
      req("{`statements`: [{`sql`: `SELECT 'hello' AS a, x'0102030405' AS b`}, {`sql`: `SELECT 'x' AS c`}]}");
  assert_int_equal(lithd_batch_parse(body, strlen(body), &lim, &j.b, NULL), LITH_OK);
  assert_int_equal(lith_read(db, read_fn, &j), LITHD_RESULT_TOO_LARGE);
  result_fails(j.res, LITHD_RESULT_TOO_LARGE, 1, "more than 13 bytes");
  job_free(&j);
  free(body);
  assert_int_equal(lith_close(db), LITH_OK);
}

static void test_invalid_utf8_text_is_an_error(void **state) {
  (void)state;
  lith *db = open_db();
  job j;
  /* the same bytes as a blob come back fine */
  assert_int_equal(read_json(db, &j, "{`statements`: [{`sql`: `SELECT 1, CAST(x'41ff' AS BLOB)`}]}"),
                   LITH_OK);
  json_t *root = res_json(j.res, NULL);
  assert_string_equal(json_string_value(json_object_get(cell(root, 0, 0, 1), "base64")), "Qf8=");
  json_decref(root);
  job_free(&j);
  assert_int_equal(read_json(db, &j, "{`statements`: [{`sql`: `SELECT 1, CAST(x'41ff' AS TEXT)`}]}"),
                   LITHD_UNENCODABLE);
  result_fails(j.res, LITHD_UNENCODABLE, 0, "not valid UTF-8 in row 0 column 1");
  assert_int_equal(lithd_http_status(LITHD_UNENCODABLE), 422);
  job_free(&j);
  /* surrogates and overlong forms are not UTF-8 either */
  assert_int_equal(read_json(db, &j, "{`statements`: [{`sql`: `SELECT CAST(x'eda080' AS TEXT)`}]}"),
                   LITHD_UNENCODABLE);
  job_free(&j);
  assert_int_equal(read_json(db, &j, "{`statements`: [{`sql`: `SELECT CAST(x'c0af' AS TEXT)`}]}"),
                   LITHD_UNENCODABLE);
  job_free(&j);
  /* on the writer the command is undone: no success without its answer */
  assert_int_equal(
      do_json(db, &j,
              "{`statements`: [{`sql`: `INSERT INTO t(v) VALUES (CAST(x'ff' AS TEXT)) RETURNING v`}]}"),
      LITHD_UNENCODABLE);
  job_free(&j);
  assert_int_equal(count_rows(db, "SELECT count(*) FROM t"), 0);
  assert_int_equal(lith_close(db), LITH_OK);
}

static void test_writes_refused_on_the_read_path(void **state) {
  (void)state;
  lith *db = open_db();
  job j;
  static const char *const writes[] = {
      "INSERT INTO t(v) VALUES (1)",
      "UPDATE t SET v = 1",
      "DELETE FROM t",
      "CREATE TABLE x(a)",
      "WITH a(x) AS (VALUES (1)) INSERT INTO t(v) SELECT x FROM a", /* starts as a query */
      "BEGIN",
      "COMMIT",
      "ATTACH 'other.db' AS o",
      "PRAGMA query_only = 0",
      "VACUUM INTO 'copy.db'",
  };
  for (size_t i = 0; i < sizeof writes / sizeof *writes; i++) {
    char text[256];
    snprintf(text, sizeof text, "{`statements`: [{`sql`: `SELECT 1`}, {`sql`: `%s`}]}", writes[i]);
    int rc = read_json(db, &j, text);
    if (rc != LITHD_NOT_A_QUERY)
      fail_msg("%s: %s", writes[i], lithd_code_name(rc));
    result_fails(j.res, LITHD_NOT_A_QUERY, 1, "write statement on /v1/query");
    job_free(&j);
  }
  assert_int_equal(lithd_http_status(LITHD_NOT_A_QUERY), 403);
  assert_int_equal(access("copy.db", F_OK), -1);
  assert_int_equal(count_rows(db, "SELECT count(*) FROM t"), 0);
  /* EXPLAIN is a query; a pragma's table-valued function is the way to read one */
  assert_int_equal(read_json(db, &j,
                             "{`statements`: [{`sql`: `EXPLAIN QUERY PLAN SELECT * FROM t`},"
                             " {`sql`: `SELECT name FROM pragma_table_info('t') ORDER BY cid`}]}"),
                   LITH_OK);
  json_t *root = res_json(j.res, NULL);
  assert_string_equal(json_string_value(cell(root, 1, 0, 0)), "id");
  assert_string_equal(json_string_value(cell(root, 1, 1, 0)), "v");
  json_decref(root);
  job_free(&j);
  assert_int_equal(lith_close(db), LITH_OK);
}

/* A typo on /v1/query is an SQL error (400, SQLite's message), not a write
 * (403): only a statement whose first keyword opens a write is refused
 * unprepared, the others are prepared and SQLite says what is wrong. */
static void test_read_path_syntax_error(void **state) {
  (void)state;
  lith *db = open_db();
  job j;
  static const struct {
    const char *sql, *needle;
  } typos[] = {
      {"SELEC 1", "near \"SELEC\": syntax error"},
      {"  /* c */ SLECT v FROM t", "near \"SLECT\": syntax error"},
      {"SELECT v FROM", "incomplete input"},
      {"SELECT nope FROM t", "no such column: nope"},
      {"SELECT * FROM missing", "no such table: missing"},
  };
  for (size_t i = 0; i < sizeof typos / sizeof *typos; i++) {
    char text[256];
    snprintf(text, sizeof text, "{`statements`: [{`sql`: `SELECT 1`}, {`sql`: `%s`}]}", typos[i].sql);
    int rc = read_json(db, &j, text);
    if (rc != LITH_ERROR)
      fail_msg("%s: %s", typos[i].sql, lithd_code_name(rc));
    result_fails(j.res, LITH_ERROR, 1, typos[i].needle);
    job_free(&j);
  }
  assert_int_equal(lithd_http_status(LITH_ERROR), 400);
  assert_string_equal(lithd_code_name(LITH_ERROR), "sql_error");
  /* a write with a typo further on is still refused as a write, unprepared */
  assert_int_equal(read_json(db, &j, "{`statements`: [{`sql`: `INSERT INTO t VALUS (1)`}]}"),
                   LITHD_NOT_A_QUERY);
  job_free(&j);
  /* a reading PRAGMA on the read path: refused, and told how to read it */
  assert_int_equal(read_json(db, &j, "{`statements`: [{`sql`: `PRAGMA table_info(t)`}]}"), LITHD_NOT_A_QUERY);
  result_fails(j.res, LITHD_NOT_A_QUERY, 0, "pragma_table_info('t')");
  job_free(&j);
  assert_int_equal(lith_close(db), LITH_OK);
}

static void test_run_time_limit(void **state) {
  (void)state;
  lith *db = open_db_limited(50); /* on the writer the limit is lith's, as lithd sets it */
  lithd_limits lim = {0};
  lim.max_run_ms = 50;
  job j;
  char *body;
  static const char endless[] =
      "WITH RECURSIVE c(x) AS (VALUES (1) UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";

  /* a read that never ends is interrupted */
  char text[512];
  snprintf(text, sizeof text, "{`statements`: [{`sql`: `SELECT 1`}, {`sql`: `%s`}]}", endless);
  body = req(text);
  memset(&j, 0, sizeof j);
  assert_int_equal(lithd_batch_parse(body, strlen(body), &lim, &j.b, NULL), LITH_OK);
  int64_t t0 = lith_clock_ms();
  assert_int_equal(lith_read(db, read_fn, &j), LITHD_TIMEOUT);
  assert_true(lith_clock_ms() - t0 < 5000);
  result_fails(j.res, LITHD_TIMEOUT, 1, "longer than 50 ms");
  assert_int_equal(lithd_http_status(LITHD_TIMEOUT), 422);
  job_free(&j);
  free(body);

  /* on the writer: a read-only statement and a write statement (SQLite
     rolls back the whole transaction for that one; lith fails the command) */
  static const char *const writes[] = {
      "{`statements`: [{`sql`: `INSERT INTO t(v) VALUES (1)`}, {`sql`: `%s`}]}",
      "{`statements`: [{`sql`: `INSERT INTO t(v) VALUES (1)`}, {`sql`: `INSERT INTO t(v) %s`}]}",
  };
  for (int k = 0; k < 2; k++) {
    snprintf(text, sizeof text, writes[k], endless);
    body = req(text);
    assert_int_equal(lithd_batch_parse(body, strlen(body), &lim, &j.b, NULL), LITH_OK);
    assert_int_equal(lith_do(db, run_cmd, &j), LITHD_TIMEOUT);
    result_fails(j.res, LITHD_TIMEOUT, 1, "max_run_ms");
    job_free(&j);
    free(body);
    assert_int_equal(count_rows(db, "SELECT count(*) FROM t"), 0);
  }

  /* lithd_batch_run leaves no handler of its own on the writer: without
   * lith's limit a plain command's long statement runs */
  assert_int_equal(lith_close(db), LITH_OK);
  db = open_db();
  assert_int_equal(lith_do(db, lith_cmd_sql,
                           "INSERT INTO t(v) WITH RECURSIVE c(x) AS (VALUES (1)"
                           " UNION ALL SELECT x + 1 FROM c WHERE x < 200000) SELECT x FROM c"),
                   LITH_OK);
  assert_int_equal(count_rows(db, "SELECT count(*) FROM t"), 200000);
  assert_int_equal(lith_close(db), LITH_OK);
}

/* ---- Running more than once --------------------------------------------------- */

static int twice_cmd(lith_tx *tx, void *arg) {
  job *j = arg;
  int rc = lithd_batch_run(tx, j->b, &j->res);
  if (rc != LITH_OK)
    return rc;
  return lithd_batch_run(tx, j->b, &j->res);
}

static void test_rerun_gives_one_fresh_result(void **state) {
  (void)state;
  lith *db = open_db();
  job j;
  job_parse(&j, "{`statements`: [{`sql`: `INSERT INTO t(v) VALUES (?) RETURNING id, v`, `params`: [`r`]}]}",
            NULL);
  assert_int_equal(lith_do(db, twice_cmd, &j), LITH_OK);
  json_t *root = res_json(j.res, NULL);
  assert_int_equal(json_array_size(json_object_get(root, "results")), 1);
  assert_int_equal(json_array_size(json_object_get(stmt_of(root, 0), "rows")), 1);
  assert_int_equal(int_at(root, 0, 0, 0), 2); /* the second run's row */
  assert_int_equal(field(root, 0, "last_insert_rowid"), 2);
  json_decref(root);
  job_free(&j);
  assert_int_equal(count_rows(db, "SELECT count(*) FROM t"),
                   2); /* both runs' rows: nothing undid the first here */
  assert_int_equal(lith_close(db), LITH_OK);
}

/* A real re-run: lith re-runs the innocent commands of a batch that another
 * command made SQLite roll back. A gate holds the writer so that both land
 * in one batch. */
typedef struct gate {
  _Atomic int entered, open;
} gate;

static int gate_cmd(lith_tx *tx, void *arg) {
  (void)tx;
  gate *g = arg;
  atomic_store(&g->entered, 1);
  while (!atomic_load(&g->open))
    usleep(100);
  return LITH_OK;
}

static void count_done(lith_request *r) { atomic_fetch_add((_Atomic int *)r->data, 1); }

static void submit(lith *db, lith_request *r, lith_command fn, void *arg, _Atomic int *done) {
  memset(r, 0, sizeof *r);
  r->fn = fn;
  r->arg = arg;
  r->done = count_done;
  r->data = (void *)done;
  assert_int_equal(lith_submit(db, r), LITH_OK);
}

static void test_rerun_after_transaction_abort(void **state) {
  (void)state;
  lith *db = open_db();
  gate g = {0};
  _Atomic int done = 0;
  lith_request rg, ra, rb;
  job a, b;
  job_parse(&a,
            "{`statements`: [{`sql`: `INSERT INTO kv(k, v) VALUES ('p1', 1) RETURNING k, v`},"
            " {`sql`: `SELECT count(*) FROM kv`}]}",
            NULL);
  job_parse(&b, "{`statements`: [{`sql`: `INSERT OR ROLLBACK INTO kv(k, v) VALUES ('p1', 2)`}]}", NULL);
  submit(db, &rg, gate_cmd, &g, &done);
  while (!atomic_load(&g.entered))
    usleep(100);
  submit(db, &ra, run_cmd, &a, &done);
  submit(db, &rb, run_cmd, &b, &done);
  atomic_store(&g.open, 1);
  for (int i = 0; i < 30000 && atomic_load(&done) < 3; i++)
    usleep(1000);
  assert_int_equal(atomic_load(&done), 3);
  assert_int_equal(ra.rc, LITH_OK);
  assert_int_equal(a.runs, 2); /* ran, was rolled back with the transaction, ran again */
  assert_int_equal(rb.rc, LITH_CONSTRAINT);
  result_fails(b.res, LITH_CONSTRAINT, 0, "UNIQUE");
  json_t *root = res_json(a.res, NULL);
  assert_int_equal(json_array_size(json_object_get(root, "results")), 2);
  assert_int_equal(json_array_size(json_object_get(stmt_of(root, 0), "rows")), 1);
  assert_string_equal(json_string_value(cell(root, 0, 0, 0)), "p1");
  assert_int_equal(int_at(root, 0, 0, 1), 1);
  assert_int_equal(int_at(root, 1, 0, 0), 1);
  json_decref(root);
  job_free(&a);
  job_free(&b);
  assert_int_equal(count_rows(db, "SELECT v FROM kv WHERE k = 'p1'"), 1);
  assert_int_equal(lith_close(db), LITH_OK);
}

/* ---- Error JSON and status codes --------------------------------------------- */

/* ---- Answer format (sqljson.h) ------------------------------------------------ */

/* The result's JSON text for a read of `text` (the caller frees it). */
static char *read_text(lith *db, const char *text) {
  job j;
  lithd_error e = {0, -1, ""};
  int rc = read_json(db, &j, text);
  if (rc != LITH_OK) {
    lithd_result_error(j.res, &e);
    fail_msg("read %s: %s: %s", text, lithd_code_name(rc), e.message);
  }
  char *s = lithd_result_json(j.res);
  assert_non_null(s);
  job_free(&j);
  return s;
}

static void test_rows_as_objects_and_types(void **state) {
  (void)state;
  lith *db = open_db();
  job j;
  char *text;
  assert_int_equal(
      do_json(db, &j,
              "{`statements`: [{`sql`: `CREATE TABLE w(id INTEGER PRIMARY KEY, name VARCHAR(20), "
              "b BLOB, loose)`}, {`sql`: `INSERT INTO w VALUES (1, 'a', x'00ff', 2.5), "
              "(2, NULL, NULL, 'x') RETURNING id`}], `rows`: `objects`, `types`: true}"),
      LITH_OK);
  text = lithd_result_json(j.res);
  /* the writer's answer in the asked format, RETURNING rows as objects too */
  assert_string_equal(text,
                      "{\"results\":[{\"changes\":0,\"last_insert_rowid\":0,\"columns\":[],\"types\":[],"
                      "\"rows\":[]},{\"changes\":2,\"last_insert_rowid\":2,\"columns\":[\"id\"],"
                      "\"types\":[\"INTEGER\"],\"rows\":[{\"id\":1},{\"id\":2}]}]}");
  free(text);
  job_free(&j);

  /* declared types as written, null for expressions; objects keep the
   * column order and every value type */
  text = read_text(
      db, "{`statements`: [{`sql`: `SELECT id, name, b, loose, id * 2 AS twice FROM w ORDER BY id`}],"
          " `rows`: `objects`, `types`: true}");
  assert_string_equal(
      text, "{\"results\":[{\"changes\":0,\"last_insert_rowid\":0,"
            "\"columns\":[\"id\",\"name\",\"b\",\"loose\",\"twice\"],"
            "\"types\":[\"INTEGER\",\"VARCHAR(20)\",\"BLOB\",null,null],"
            "\"rows\":[{\"id\":1,\"name\":\"a\",\"b\":{\"base64\":\"AP8=\"},\"loose\":2.5,\"twice\":2},"
            "{\"id\":2,\"name\":null,\"b\":null,\"loose\":\"x\",\"twice\":4}]}]}");
  free(text);
  /* each alone: objects without types, types with arrays */
  text = read_text(db, "{`statements`: [{`sql`: `SELECT id FROM w WHERE id = 1`}], `rows`: `objects`}");
  assert_non_null(strstr(text, "\"columns\":[\"id\"],\"rows\":[{\"id\":1}]"));
  free(text);
  text = read_text(db, "{`statements`: [{`sql`: `SELECT id FROM w WHERE id = 1`}], `types`: true}");
  assert_non_null(strstr(text, "\"columns\":[\"id\"],\"types\":[\"INTEGER\"],\"rows\":[[1]]"));
  free(text);
  /* the defaults spelt out are the answer without them, byte for byte */
  char *plain = read_text(db, "{`statements`: [{`sql`: `SELECT * FROM w`}]}");
  text = read_text(db, "{`statements`: [{`sql`: `SELECT * FROM w`}], `rows`: `arrays`, `types`: false,"
                       " `int64`: `number`}");
  assert_string_equal(text, plain);
  free(text);
  free(plain);
  /* a key of an object is escaped as a JSON string */
  text = read_text(db, "{`statements`: [{`sql`: `SELECT 1 AS \\\"a\\\"\\\"b\\\"`}], `rows`: `objects`}");
  assert_non_null(strstr(text, "\"rows\":[{\"a\\\"b\":1}]"));
  free(text);
  assert_int_equal(lith_close(db), LITH_OK);
}

static void test_duplicate_names_refused_as_objects(void **state) {
  (void)state;
  lith *db = open_db();
  job j;
  /* on the writer: the command fails before the statement is stepped, and
   * the statements before it are undone with it */
  assert_int_equal(
      do_json(db, &j,
              "{`statements`: [{`sql`: `INSERT INTO t(id, v) VALUES (1, 1)`},"
              " {`sql`: `INSERT INTO t(id, v) VALUES (2, 2) RETURNING id, v, id`}], `rows`: `objects`}"),
      LITHD_BAD_REQUEST);
  result_fails(j.res, LITHD_BAD_REQUEST, 1, "columns 0 and 2 are both named \"id\"");
  job_free(&j);
  assert_int_equal(count_rows(db, "SELECT count(*) FROM t"), 0);
  assert_int_equal(lithd_http_status(LITHD_BAD_REQUEST), 400);
  /* on a reader */
  assert_int_equal(read_json(db, &j,
                             "{`statements`: [{`sql`: `SELECT 1 AS a, 2 AS b, 3 AS c, 4 AS b`}],"
                             " `rows`: `objects`, `types`: true}"),
                   LITHD_BAD_REQUEST);
  result_fails(j.res, LITHD_BAD_REQUEST, 0, "columns 1 and 3 are both named \"b\"");
  job_free(&j);
  /* names that differ only in case are two keys; arrays hold duplicates */
  char *text = read_text(db, "{`statements`: [{`sql`: `SELECT 1 AS a, 2 AS A`}], `rows`: `objects`}");
  assert_non_null(strstr(text, "\"rows\":[{\"a\":1,\"A\":2}]"));
  free(text);
  text = read_text(db, "{`statements`: [{`sql`: `SELECT 1 AS a, 2 AS a`}]}");
  assert_non_null(strstr(text, "\"columns\":[\"a\",\"a\"],\"rows\":[[1,2]]"));
  free(text);
  assert_int_equal(lith_close(db), LITH_OK);
}

static void test_int64_as_strings(void **state) {
  (void)state;
  lith *db = open_db();
  job j;
  char *text;
  /* the bounds of what JSON.parse reads exactly stay numbers; one past
   * them, and the 64-bit ends, become strings (changes and rowids too) */
  assert_int_equal(do_json(db, &j,
                           "{`statements`: [{`sql`: `INSERT INTO t(id, v) VALUES (9223372036854775807, 1)`},"
                           " {`sql`: `SELECT 9007199254740991, -9007199254740991, 9007199254740992,"
                           " -9007199254740992, -9223372036854775808, 0.5, '12345678901234567890'`}],"
                           " `int64`: `string`}"),
                   LITH_OK);
  text = lithd_result_json(j.res);
  assert_non_null(strstr(text, "{\"changes\":1,\"last_insert_rowid\":\"9223372036854775807\","));
  assert_non_null(strstr(text,
                         "\"rows\":[[9007199254740991,-9007199254740991,\"9007199254740992\","
                         "\"-9007199254740992\",\"-9223372036854775808\",0.5,\"12345678901234567890\"]]"));
  free(text);
  job_free(&j);
  /* with objects: the same values */
  text =
      read_text(db, "{`statements`: [{`sql`: `SELECT id, v FROM t`}], `int64`: `string`, `rows`: `objects`}");
  assert_non_null(strstr(text, "\"rows\":[{\"id\":\"9223372036854775807\",\"v\":1}]"));
  free(text);
  /* and without: numbers, every digit */
  text = read_text(db, "{`statements`: [{`sql`: `SELECT id FROM t`}]}");
  assert_non_null(strstr(text, "\"rows\":[[9223372036854775807]]"));
  free(text);
  assert_int_equal(lith_close(db), LITH_OK);
}

static void test_format_from_query_and_bad_values(void **state) {
  (void)state;
  lithd_error err;
  lithd_batch *b = NULL;
  lith *db = open_db();
  job j;
  const char *body = "{\"statements\": [{\"sql\": \"SELECT 9007199254740993 AS n\"}], \"rows\": \"objects\"}";
  /* the query wins over the body; parameters it does not name stay as the body said */
  assert_int_equal(lithd_batch_parse(body, strlen(body), NULL, &b, &err), LITH_OK);
  assert_int_equal(lithd_batch_apply_query(b, "types=true&&int64=string", &err), LITH_OK);
  memset(&j, 0, sizeof j);
  j.b = b;
  assert_int_equal(lith_read(db, read_fn, &j), LITH_OK);
  char *text = lithd_result_json(j.res);
  assert_non_null(strstr(text, "\"types\":[null],\"rows\":[{\"n\":\"9007199254740993\"}]"));
  free(text);
  lithd_result_free(j.res);
  j.res = NULL;
  assert_int_equal(lithd_batch_apply_query(b, "rows=arrays&types=false", &err), LITH_OK);
  assert_int_equal(lith_read(db, read_fn, &j), LITH_OK);
  text = lithd_result_json(j.res);
  assert_non_null(strstr(text, "\"columns\":[\"n\"],\"rows\":[[\"9007199254740993\"]]"));
  free(text);
  lithd_result_free(j.res);
  j.res = NULL;
  /* nothing to apply: NULL or "" */
  assert_int_equal(lithd_batch_apply_query(b, NULL, &err), LITH_OK);
  assert_int_equal(lithd_batch_apply_query(b, "", &err), LITH_OK);
  /* refused, all or nothing: a good parameter before a bad one is not applied */
  static const struct {
    const char *query, *needle;
  } bad[] = {
      {"rows=object", "rows must be rows=arrays or rows=objects"},
      {"rows", "rows must be rows=arrays or rows=objects"},
      {"int64=bigint", "int64 must be int64=number or int64=string"},
      {"types=1", "types must be types=false or types=true"},
      {"int64=string&row=objects", "unknown query parameter \"row\""},
      {"rows=objects%20", "rows must be"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    assert_int_equal(lithd_batch_apply_query(b, bad[i].query, &err), LITHD_BAD_REQUEST);
    if (!strstr(err.message, bad[i].needle))
      fail_msg("%s: \"%s\", want \"%s\"", bad[i].query, err.message, bad[i].needle);
  }
  assert_int_equal(lith_read(db, read_fn, &j), LITH_OK);
  text = lithd_result_json(j.res);
  assert_non_null(strstr(text, "\"rows\":[[\"9007199254740993\"]]"));
  free(text);
  job_free(&j);
  /* in the body: each key's own type and spellings */
  parse_fails("{`statements`: [], `rows`: `object`}", NULL, LITHD_BAD_REQUEST, -1,
              "\"rows\" must be \"arrays\" or \"objects\"");
  parse_fails("{`statements`: [], `rows`: true}", NULL, LITHD_BAD_REQUEST, -1, "\"rows\" must be");
  parse_fails("{`statements`: [], `types`: `true`}", NULL, LITHD_BAD_REQUEST, -1,
              "\"types\" must be false or true");
  parse_fails("{`statements`: [], `int64`: 1}", NULL, LITHD_BAD_REQUEST, -1,
              "\"int64\" must be \"number\" or \"string\"");
  parse_fails("{`statements`: [], `Rows`: `objects`}", NULL, LITHD_BAD_REQUEST, -1, "unknown key \"Rows\"");
  /* a statement takes no format keys: the request's are for the whole answer */
  parse_fails("{`statements`: [{`sql`: `SELECT 1`, `rows`: `objects`}]}", NULL, LITHD_BAD_REQUEST, 0,
              "unknown key \"rows\"");
  assert_int_equal(lith_close(db), LITH_OK);
}

static void test_error_json_and_statuses(void **state) {
  (void)state;
  lithd_error e;
  json_error_t je;
  assert_int_equal(lithd_error_set(&e, LITH_CONSTRAINT, 1, "UNIQUE constraint failed: %s \"q\"", "kv.k"),
                   LITH_CONSTRAINT);
  char *s = lithd_error_json(&e);
  assert_string_equal(s, "{\"error\":{\"code\":\"constraint\",\"message\":\"UNIQUE constraint failed: kv.k "
                         "\\\"q\\\"\",\"statement\":1}}");
  free(s);
  /* no statement: null; invalid UTF-8 in a message becomes U+FFFD */
  lithd_error_set(&e, LITH_BUSY, -1, "locked \xff\xc3");
  s = lithd_error_json(&e);
  json_t *root = json_loads(s, 0, &je);
  assert_non_null(root);
  json_t *err = json_object_get(root, "error");
  assert_true(json_is_null(json_object_get(err, "statement")));
  assert_string_equal(json_string_value(json_object_get(err, "code")), "busy");
  assert_string_equal(json_string_value(json_object_get(err, "message")), "locked \xef\xbf\xbd\xef\xbf\xbd");
  json_decref(root);
  free(s);

  static const struct {
    int code, status;
    const char *name;
  } map[] = {
      {LITH_OK, 200, "ok"},
      {LITH_ERROR, 400, "sql_error"},
      {LITH_MISUSE, 400, "misuse"},
      {LITHD_BAD_REQUEST, 400, "bad_request"},
      {LITHD_NOT_A_QUERY, 403, "not_a_query"},
      {LITH_CONSTRAINT, 409, "constraint"},
      {LITHD_TOO_LARGE, 413, "too_large"},
      {LITHD_RESULT_TOO_LARGE, 422, "result_too_large"},
      {LITHD_UNENCODABLE, 422, "unencodable"},
      {LITHD_TIMEOUT, 422, "timeout"},
      {LITH_BUSY, 503, "busy"},
      {LITH_QUEUE_FULL, 503, "queue_full"},
      {LITH_CLOSED, 503, "closed"},
      {LITH_ABORTED, 503, "aborted"},
      {LITH_DISKFULL, 507, "disk_full"},
      {LITH_IOERR, 500, "ioerr"},
      {LITH_NOMEM, 500, "nomem"},
      {LITH_CORRUPT, 500, "corrupt"},
      {LITH_READONLY, 500, "readonly"},
      {LITH_USER, 500, "command_error"},
  };
  for (size_t i = 0; i < sizeof map / sizeof *map; i++) {
    assert_int_equal(lithd_http_status(map[i].code), map[i].status);
    assert_string_equal(lithd_code_name(map[i].code), map[i].name);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_integers_exact_at_the_bounds),
      cmocka_unit_test(test_reals_text_null_booleans),
      cmocka_unit_test(test_blobs_round_trip),
      cmocka_unit_test(test_named_and_positional_params),
      cmocka_unit_test(test_rows_columns_changes_rowids),
      cmocka_unit_test(test_failing_statement_undoes_the_command),
      cmocka_unit_test(test_malformed_requests),
      cmocka_unit_test(test_limits),
      cmocka_unit_test(test_too_many_rows_is_an_error),
      cmocka_unit_test(test_invalid_utf8_text_is_an_error),
      cmocka_unit_test(test_writes_refused_on_the_read_path),
      cmocka_unit_test(test_read_path_syntax_error),
      cmocka_unit_test(test_run_time_limit),
      cmocka_unit_test(test_rerun_gives_one_fresh_result),
      cmocka_unit_test(test_rerun_after_transaction_abort),
      cmocka_unit_test(test_error_json_and_statuses),
      cmocka_unit_test(test_authorizer),
      cmocka_unit_test(test_rows_as_objects_and_types),
      cmocka_unit_test(test_duplicate_names_refused_as_objects),
      cmocka_unit_test(test_int64_as_strings),
      cmocka_unit_test(test_format_from_query_and_bad_values),
  };
  return cmocka_run_group_tests_name("tools/lithd/sqljson", tests, NULL, NULL);
}
