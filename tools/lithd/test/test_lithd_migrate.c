/*
 * test_lithd_migrate — what migration tools send, with SQLite's meaning,
 * on every road in (/v1/do, /v1/batch, Hrana's execute, batch, sequence
 * and interactive transactions), on a local file and on --dqlite:
 *   - PRAGMA defer_foreign_keys = ON lasts until its command's transaction
 *     ends (SQLite's COMMIT ends it): the next command, batched into the
 *     same transaction or not, reads it off; Prisma's redefinition of a
 *     parent table (ON, copy, DROP, RENAME, foreign_key_check, OFF)
 *     commits; the same without the OFF fails at its end as SQLite's
 *     COMMIT fails, and an OFF that would forget a violation still left is
 *     refused (lith's foreign_key_check); inside an interactive
 *     transaction it lasts to its COMMIT;
 *   - PRAGMA user_version = N is kept and read back, everywhere;
 *   - VACUUM alone runs (between two transactions of a command submitted
 *     alone): the file's page count drops after rows are deleted, what a
 *     reader reads is unchanged; with other statements, or inside a
 *     stream's transaction, it fails as SQLite fails it there, and the
 *     transaction goes on;
 *   - on --dqlite: the same (each setting put back before any other
 *     command: the commands of a writer batch share the leader connection;
 *     recursive_triggers too), but for a stale count of deferred
 *     violations (foreign_key_check decides there) and VACUUM, refused
 *     with a message saying what to do (dqlite's nodes allow no attached
 *     database, which VACUUM needs), as SAVEPOINT's there;
 *   - a --schema step's own COMMIT refuses the start on both stores, before
 *     either applies a step.
 * What must stay refused around them is in the attack table
 * (test_lithd_attacks).
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

#include <jansson.h>

#include "child.h"
#include "nodes.h"

#define DO "/v1/do"
#define Q "/v1/query"
#define ONE(sql) "{\"statements\":[{\"sql\":\"" sql "\"}]}"

static const char *schema_sql =
    "CREATE TABLE p(id INTEGER PRIMARY KEY);\n"
    "CREATE TABLE ch(id INTEGER PRIMARY KEY, pid INTEGER NOT NULL REFERENCES p(id));\n"
    "CREATE TABLE big(x);\n"
    "CREATE TABLE r(n INTEGER);\n" /* recursive_triggers: 1 makes 5 rows, or 2 */
    "CREATE TRIGGER r_up AFTER INSERT ON r WHEN new.n < 5 BEGIN INSERT INTO r VALUES (new.n + 1); END;\n";

static t_node node;
static struct tl_child local, dq;

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  assert_true(fputs(text, f) >= 0);
  assert_int_equal(fclose(f), 0);
}

/* statements (SQL texts, NULL-terminated) as one /v1 request body, malloc'd */
static char *v1_body(const char *const *sqls) {
  json_t *list = json_array();
  for (int i = 0; sqls[i] != NULL; i++)
    json_array_append_new(list, json_pack("{s:s}", "sql", sqls[i]));
  json_t *b = json_pack("{s:o}", "statements", list);
  char *text = json_dumps(b, JSON_COMPACT);
  json_decref(b);
  return text;
}

static void expect_sqls(const struct tl_child *c, const char *const *sqls, int status, const char *want) {
  char *body = v1_body(sqls);
  tl_expect(c, "POST", DO, NULL, body, status, want);
  free(body);
}

/* The one integer /v1/do answers to sql (a read through the writer, where
 * a PRAGMA may be read). */
static int64_t do_int(const struct tl_child *c, const char *sql) {
  const char *sqls[] = {sql, NULL};
  char *body = v1_body(sqls);
  struct tl_resp r;
  tl_http(c, "POST", DO, NULL, body, &r);
  free(body);
  json_t *j = r.status == 200 ? json_loads(r.body, 0, NULL) : NULL;
  json_t *v = json_array_get(
      json_array_get(json_object_get(json_array_get(json_object_get(j, "results"), 0), "rows"), 0), 0);
  if (!json_is_integer(v))
    fail_msg("%s: %d %s", sql, r.status, r.body ? r.body : "");
  int64_t n = json_integer_value(v);
  json_decref(j);
  tl_resp_free(&r);
  return n;
}

/* ---- Hrana over HTTP: one stream, its baton carried ------------------------ */

typedef struct stream {
  const struct tl_child *c;
  char baton[256];
} stream;

/* One pipeline of requests (a JSON array's text) on s; its results,
 * owned by the caller. */
static json_t *pipeline(stream *s, const char *requests) {
  json_error_t err;
  json_t *reqs = json_loads(requests, 0, &err);
  if (reqs == NULL)
    fail_msg("test's requests: %s: %s", err.text, requests);
  json_t *b =
      json_pack("{s:o,s:o}", "baton", s->baton[0] ? json_string(s->baton) : json_null(), "requests", reqs);
  char *text = json_dumps(b, JSON_COMPACT);
  json_decref(b);
  struct tl_resp r;
  tl_http(s->c, "POST", "/v3/pipeline", NULL, text, &r);
  free(text);
  if (r.status != 200)
    fail_msg("pipeline: %d %s", r.status, r.body ? r.body : "");
  json_t *j = json_loads(r.body, 0, NULL);
  assert_non_null(j);
  const char *baton = json_string_value(json_object_get(j, "baton"));
  snprintf(s->baton, sizeof s->baton, "%s", baton ? baton : "");
  json_t *results = json_incref(json_object_get(j, "results"));
  json_decref(j);
  tl_resp_free(&r);
  return results;
}

/* An execute of sql as a request's JSON, into buf. */
static const char *exec_req(char *buf, size_t cap, const char *sql) {
  json_t *r = json_pack("{s:s,s:{s:s}}", "type", "execute", "stmt", "sql", sql);
  char *t = json_dumps(r, JSON_COMPACT);
  snprintf(buf, cap, "%s", t);
  free(t);
  json_decref(r);
  return buf;
}

/* One execute on s: NULL and *out the first value of its first row (if
 * out), or its error's message (the results are kept in *keep until the
 * next call). */
static const char *execute(stream *s, const char *sql, int64_t *out) {
  static json_t *keep;
  char req[4096], text[4200];
  snprintf(text, sizeof text, "[%s]", exec_req(req, sizeof req, sql));
  json_decref(keep);
  keep = pipeline(s, text);
  json_t *res = json_array_get(keep, 0);
  const char *type = json_string_value(json_object_get(res, "type"));
  if (type == NULL || strcmp(type, "ok") != 0) {
    const char *msg = json_string_value(json_object_get(json_object_get(res, "error"), "message"));
    return msg != NULL ? msg : "no message";
  }
  if (out != NULL) {
    json_t *v = json_array_get(
        json_array_get(json_object_get(json_object_get(json_object_get(res, "response"), "result"), "rows"),
                       0),
        0);
    const char *n = json_string_value(json_object_get(v, "value"));
    if (n == NULL)
      fail_msg("%s: no integer in its first row", sql);
    *out = strtoll(n, NULL, 10);
  }
  return NULL;
}

static void ok(stream *s, const char *sql) {
  const char *e = execute(s, sql, NULL);
  if (e != NULL)
    fail_msg("%s: %s", sql, e);
}

static int64_t one_int(stream *s, const char *sql) {
  int64_t n = -1;
  const char *e = execute(s, sql, &n);
  if (e != NULL)
    fail_msg("%s: %s", sql, e);
  return n;
}

static void close_stream(stream *s) {
  if (s->baton[0])
    json_decref(pipeline(s, "[{\"type\":\"close\"}]"));
  s->baton[0] = '\0';
}

/* ---- The tests ------------------------------------------------------------------ */

/* p(1), p(2) and a child of each, on c: what a redefinition of p keeps. */
static void seed(const struct tl_child *c) {
  tl_expect(c, "POST", DO, NULL, ONE("DELETE FROM ch"), 200, NULL);
  tl_expect(c, "POST", DO, NULL, ONE("DELETE FROM p"), 200, NULL);
  tl_expect(c, "POST", DO, NULL, ONE("INSERT INTO p(id) VALUES (1), (2)"), 200, NULL);
  tl_expect(c, "POST", DO, NULL, ONE("INSERT INTO ch(id, pid) VALUES (10, 1), (20, 2)"), 200, NULL);
}

/* Prisma's redefinition of a parent table, p: a new table, the rows
 * copied, the old one dropped (its children's keys then deferred
 * violations), the new one renamed onto it. */
#define REDEFINE_P                                                             \
  "CREATE TABLE new_p(id INTEGER PRIMARY KEY, name TEXT NOT NULL DEFAULT '')", \
      "INSERT INTO new_p(id) SELECT id FROM p", "DROP TABLE p", "ALTER TABLE new_p RENAME TO p"

/* On c (a local file, --dqlite): the same answers, but where said. */
static void defer_foreign_keys_on(const struct tl_child *c) {
  /* the command's own: read back inside it, off in the next */
  const char *on_read[] = {"PRAGMA defer_foreign_keys = ON", "PRAGMA defer_foreign_keys", NULL};
  expect_sqls(c, on_read, 200, "[[1]]");
  assert_int_equal(do_int(c, "PRAGMA defer_foreign_keys"), 0);
  /* two commands of one /v1/batch (one transaction of the writer): the
   * second finds it off, and its violation fails its own statement */
  tl_expect(c, "POST", "/v1/batch", NULL,
            "{\"commands\":[{\"statements\":[{\"sql\":\"PRAGMA defer_foreign_keys = ON\"}]},"
            "{\"statements\":[{\"sql\":\"PRAGMA defer_foreign_keys\"}]},"
            "{\"statements\":[{\"sql\":\"INSERT INTO ch(id, pid) VALUES (99, 99)\"}]}]}",
            200, "[[0]]");
  assert_int_equal(do_int(c, "SELECT count(*) FROM ch WHERE id = 99"), 0);

  /* Prisma's redefinition, on /v1/do: commits with the OFF */
  seed(c);
  const char *prisma[] = {"PRAGMA defer_foreign_keys = ON", REDEFINE_P, "PRAGMA foreign_key_check",
                          "PRAGMA defer_foreign_keys = OFF", NULL};
  expect_sqls(c, prisma, 200, NULL);
  assert_int_equal(do_int(c, "SELECT count(*) FROM pragma_table_info('p') WHERE name = 'name'"), 1);
  assert_int_equal(do_int(c, "SELECT count(*) FROM ch JOIN p ON p.id = ch.pid"), 2);
  /* without the OFF SQLite's COMMIT fails (the DROP's violations are still
   * counted): so does the command, and nothing of it stays */
  const char *no_off[] = {"PRAGMA defer_foreign_keys = ON", REDEFINE_P, NULL};
  if (c == &local) {
    expect_sqls(c, no_off, 409, "FOREIGN KEY constraint failed");
  } else {
    /* --dqlite: SQLite's count of deferred violations is the leader
     * connection's, out of reach; the command's end reads the rows
     * instead (foreign_key_check), and none violates: it commits */
    expect_sqls(c, no_off, 200, NULL);
    assert_int_equal(do_int(c, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
  }
  assert_int_equal(do_int(c, "SELECT count(*) FROM pragma_table_info('p') WHERE name = 'name'"), 1);
  /* a violation left with it on fails the command, as SQLite's COMMIT */
  const char *left[] = {"PRAGMA defer_foreign_keys = ON", "INSERT INTO ch(id, pid) VALUES (31, 3)", NULL};
  expect_sqls(c, left, 409, "FOREIGN KEY constraint failed");
  assert_int_equal(do_int(c, "SELECT count(*) FROM ch WHERE id = 31"), 0);
  /* an OFF that would forget a violation still there: refused */
  const char *forget[] = {"PRAGMA defer_foreign_keys = ON", "INSERT INTO ch(id, pid) VALUES (30, 3)",
                          "PRAGMA defer_foreign_keys = OFF", NULL};
  expect_sqls(c, forget, 409, "defer_foreign_keys");
  assert_int_equal(do_int(c, "SELECT count(*) FROM ch WHERE id = 30"), 0);

  /* Hrana: one execute is a transaction of its own (SQLite's autocommit):
   * the next reads it off */
  stream s = {c, ""};
  ok(&s, "PRAGMA defer_foreign_keys = ON");
  assert_int_equal(one_int(&s, "PRAGMA defer_foreign_keys"), 0);
  /* in an interactive transaction: to its COMMIT */
  seed(c);
  ok(&s, "BEGIN");
  ok(&s, "PRAGMA defer_foreign_keys = ON");
  ok(&s, "CREATE TABLE new_p(id INTEGER PRIMARY KEY, name TEXT NOT NULL DEFAULT '', born INTEGER)");
  ok(&s, "INSERT INTO new_p(id) SELECT id FROM p");
  ok(&s, "DROP TABLE p"); /* deferred: its children's keys are checked at the end */
  ok(&s, "ALTER TABLE new_p RENAME TO p");
  assert_int_equal(one_int(&s, "PRAGMA defer_foreign_keys"), 1);
  assert_int_equal(one_int(&s, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
  ok(&s, "PRAGMA defer_foreign_keys = OFF");
  ok(&s, "COMMIT");
  assert_int_equal(one_int(&s, "PRAGMA defer_foreign_keys"), 0);
  close_stream(&s);
  assert_int_equal(do_int(c, "SELECT count(*) FROM pragma_table_info('p') WHERE name = 'born'"), 1);
  assert_int_equal(do_int(c, "SELECT count(*) FROM ch JOIN p ON p.id = ch.pid"), 2);
  /* an OFF that forgets a violation: its COMMIT refused, still open */
  ok(&s, "BEGIN");
  ok(&s, "PRAGMA defer_foreign_keys = ON");
  ok(&s, "INSERT INTO ch(id, pid) VALUES (32, 3)");
  ok(&s, "PRAGMA defer_foreign_keys = OFF");
  const char *e = execute(&s, "COMMIT", NULL);
  if (e == NULL || strstr(e, "FOREIGN KEY constraint failed") == NULL)
    fail_msg("COMMIT after an OFF that forgot a violation: %s", e ? e : "committed");
  ok(&s, "ROLLBACK");
  close_stream(&s);
  assert_int_equal(do_int(c, "SELECT count(*) FROM ch WHERE id = 32"), 0);
  /* and as Prisma's script arrives from executeMultiple: one sequence */
  seed(c);
  json_t *res = pipeline(&s, "[{\"type\":\"sequence\",\"sql\":\"PRAGMA defer_foreign_keys=ON; "
                             "PRAGMA foreign_keys=OFF; "
                             "CREATE TABLE new_p(id INTEGER PRIMARY KEY, tag TEXT); "
                             "INSERT INTO new_p(id) SELECT id FROM p; DROP TABLE p; "
                             "ALTER TABLE new_p RENAME TO p; PRAGMA foreign_keys=ON; "
                             "PRAGMA defer_foreign_keys=OFF\"},{\"type\":\"close\"}]");
  const char *type = json_string_value(json_object_get(json_array_get(res, 0), "type"));
  if (type == NULL || strcmp(type, "ok") != 0)
    fail_msg("Prisma's script as a sequence: %s", json_dumps(res, 0));
  json_decref(res);
  s.baton[0] = '\0';
  assert_int_equal(do_int(c, "SELECT count(*) FROM pragma_table_info('p') WHERE name = 'tag'"), 1);
  assert_int_equal(do_int(c, "SELECT count(*) FROM ch JOIN p ON p.id = ch.pid"), 2);
  /* foreign keys are on again for what comes after (the writer's
   * connection as lithd left it), and so is every setting */
  assert_int_equal(do_int(c, "PRAGMA foreign_keys"), 1);
  assert_int_equal(do_int(c, "PRAGMA defer_foreign_keys"), 0);
  tl_expect(c, "POST", DO, NULL, ONE("INSERT INTO ch(id, pid) VALUES (98, 98)"), 409, "FOREIGN KEY");
  /* a migration that leaves a violation with foreign keys off: the
   * transaction that would commit it fails (foreign_key_check), at the ON
   * or at the request's end; what it committed before stays, as SQLite's
   * autocommit would have it; foreign keys on after */
  const char *const leave[] = {
      "PRAGMA foreign_keys=OFF; INSERT INTO p(id) VALUES (77); PRAGMA foreign_keys=ON; "
      "PRAGMA foreign_keys=OFF; INSERT INTO ch(id, pid) VALUES (97, 97); "
      "PRAGMA foreign_keys=ON",
      "PRAGMA foreign_keys=OFF; INSERT INTO p(id) VALUES (78); PRAGMA foreign_keys=ON; "
      "PRAGMA foreign_keys=OFF; INSERT INTO ch(id, pid) VALUES (97, 97)"};
  for (int k = 0; k < 2; k++) {
    json_t *req = json_pack("[{s:s,s:s},{s:s}]", "type", "sequence", "sql", leave[k], "type", "close");
    char *reqs = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    res = pipeline(&s, reqs);
    free(reqs);
    type = json_string_value(json_object_get(json_array_get(res, 0), "type"));
    char *text = json_dumps(res, 0);
    if (type == NULL || strcmp(type, "error") != 0 ||
        strstr(text, "foreign_key_check, after foreign keys were off") == NULL)
      fail_msg("a violation left with foreign keys off (%s): %s", leave[k], text);
    free(text);
    json_decref(res);
    s.baton[0] = '\0';
    assert_int_equal(
        do_int(c, k == 0 ? "SELECT count(*) FROM p WHERE id = 77" : "SELECT count(*) FROM p WHERE id = 78"),
        1);
    assert_int_equal(do_int(c, "SELECT count(*) FROM ch WHERE id = 97"), 0);
    assert_int_equal(do_int(c, "PRAGMA foreign_keys"), 1);
  }
  tl_expect(c, "POST", DO, NULL, ONE("DELETE FROM p WHERE id >= 77"), 200, NULL);
}

static void test_defer_foreign_keys_local(void **state) {
  (void)state;
  defer_foreign_keys_on(&local);
}

static void test_user_version(void **state) {
  (void)state;
  const struct tl_child *both[] = {&local, &dq};
  for (int k = 0; k < 2; k++) {
    const struct tl_child *c = both[k];
    tl_expect(c, "POST", DO, NULL, ONE("PRAGMA user_version = 3"), 200, NULL);
    assert_int_equal(do_int(c, "PRAGMA user_version"), 3);
    /* a failed command's is undone with it */
    const char *failing[] = {"PRAGMA user_version = 4", "INSERT INTO ch(id, pid) VALUES (1, 999)", NULL};
    expect_sqls(c, failing, 409, "FOREIGN KEY");
    assert_int_equal(do_int(c, "PRAGMA main.user_version"), 3);
    tl_expect(c, "POST", "/v1/batch", NULL,
              "{\"commands\":[{\"statements\":[{\"sql\":\"PRAGMA user_version = 5\"}]},"
              "{\"statements\":[{\"sql\":\"PRAGMA user_version\"}]}]}",
              200, "[[5]]");
    stream s = {c, ""};
    ok(&s, "PRAGMA user_version = 6");
    assert_int_equal(one_int(&s, "PRAGMA user_version"), 6);
    close_stream(&s);
    assert_int_equal(do_int(c, "PRAGMA user_version"), 6);
  }
}

/* Fill big, delete most of it: pages to give back. */
static void fill_and_delete(const struct tl_child *c) {
  tl_expect(c, "POST", DO, NULL,
            ONE("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000) "
                "INSERT INTO big SELECT randomblob(200) FROM n"),
            200, NULL);
  tl_expect(c, "POST", DO, NULL, ONE("DELETE FROM big WHERE rowid % 4 <> 0"), 200, NULL);
}

static void test_vacuum_local(void **state) {
  (void)state;
  const char *how[] = {"/v1/do", "/v1/batch", "Hrana"};
  for (int k = 0; k < 3; k++) {
    fill_and_delete(&local);
    int64_t before = do_int(&local, "PRAGMA page_count"), rows = do_int(&local, "SELECT count(*) FROM big");
    if (k == 0) {
      tl_expect(&local, "POST", DO, NULL, ONE("VACUUM"), 200, "\"results\"");
    } else if (k == 1) {
      tl_expect(&local, "POST", "/v1/batch", NULL,
                "{\"commands\":[{\"statements\":[{\"sql\":\"INSERT INTO p(id) VALUES (500)\"}]},"
                "{\"statements\":[{\"sql\":\"VACUUM\"}]},"
                "{\"statements\":[{\"sql\":\"DELETE FROM p WHERE id = 500\"}]}]}",
                200, NULL);
    } else {
      stream s = {&local, ""};
      ok(&s, "VACUUM");
      close_stream(&s);
    }
    int64_t after = do_int(&local, "PRAGMA page_count");
    print_message("VACUUM on %s: %lld pages, then %lld\n", how[k], (long long)before, (long long)after);
    assert_true(after < before / 2);
    assert_int_equal(do_int(&local, "SELECT count(*) FROM big"), rows);
    tl_expect(&local, "POST", Q, NULL, ONE("SELECT count(*) FROM big"), 200, NULL);
    assert_int_equal(do_int(&local, "SELECT count(*) FROM p WHERE id = 500"), 0);
    tl_expect(&local, "POST", DO, NULL, ONE("DELETE FROM big"), 200, NULL);
  }
  tl_expect(&local, "POST", DO, NULL, ONE("PRAGMA integrity_check"), 200, "[[\"ok\"]]");

  /* inside a stream's transaction: SQLite's refusal, and the transaction
   * goes on (what it wrote commits) */
  stream s = {&local, ""};
  ok(&s, "BEGIN");
  ok(&s, "INSERT INTO p(id) VALUES (600)");
  const char *e = execute(&s, "VACUUM", NULL);
  if (e == NULL || strstr(e, "cannot VACUUM from within a transaction") == NULL)
    fail_msg("VACUUM in a transaction: %s", e ? e : "ran");
  ok(&s, "COMMIT");
  close_stream(&s);
  assert_int_equal(do_int(&local, "SELECT count(*) FROM p WHERE id = 600"), 1);
  /* in a batch's steps (one transaction): the same */
  json_t *res = pipeline(&s, "[{\"type\":\"batch\",\"batch\":{\"steps\":[{\"stmt\":{\"sql\":\"SELECT 1\"}},"
                             "{\"stmt\":{\"sql\":\"VACUUM\"}}]}},{\"type\":\"close\"}]");
  const char *msg = json_string_value(json_object_get(
      json_array_get(
          json_object_get(json_object_get(json_object_get(json_array_get(res, 0), "response"), "result"),
                          "step_errors"),
          1),
      "message"));
  if (msg == NULL || strstr(msg, "cannot VACUUM from within a transaction") == NULL)
    fail_msg("VACUUM in a batch: %s", json_dumps(res, 0));
  json_decref(res);
}

static void test_dqlite(void **state) {
  (void)state;
  /* as on a file: each setting lasts its command (the commands of a
   * writer's batch share the leader's connection), foreign keys one
   * migrate() request */
  defer_foreign_keys_on(&dq);
  const char *recursive[] = {"PRAGMA recursive_triggers = ON", "INSERT INTO r VALUES (1)", NULL};
  expect_sqls(&dq, recursive, 200, NULL);
  assert_int_equal(do_int(&dq, "SELECT count(*) FROM r"), 5);
  tl_expect(&dq, "POST", "/v1/batch", NULL,
            "{\"commands\":[{\"statements\":[{\"sql\":\"PRAGMA recursive_triggers = ON\"}]},"
            "{\"statements\":[{\"sql\":\"PRAGMA recursive_triggers\"}]}]}",
            200, "[[0]]");
  tl_expect(&dq, "POST", DO, NULL, ONE("DELETE FROM r"), 200, NULL);
  tl_expect(&dq, "POST", DO, NULL, ONE("INSERT INTO r VALUES (1)"), 200, NULL);
  assert_int_equal(do_int(&dq, "SELECT count(*) FROM r"), 2); /* not recursive again */
  /* a failed command's setting goes back too */
  const char *failing[] = {"PRAGMA recursive_triggers = ON", "INSERT INTO ch(id, pid) VALUES (1, 999)", NULL};
  expect_sqls(&dq, failing, 409, "FOREIGN KEY");
  assert_int_equal(do_int(&dq, "PRAGMA recursive_triggers"), 0);
  /* both in one command: both back */
  const char *both[] = {"PRAGMA defer_foreign_keys = ON", "PRAGMA recursive_triggers = ON",
                        "PRAGMA defer_foreign_keys", NULL};
  expect_sqls(&dq, both, 200, "[[1]]");
  tl_expect(&dq, "POST", DO, NULL,
            "{\"statements\":[{\"sql\":\"PRAGMA defer_foreign_keys\"},{\"sql\":\"PRAGMA "
            "recursive_triggers\"}]}",
            200, "[[0]]}]}");
  /* a read may not set one: EXPLAIN prepares it on a leader connection
   * that nothing puts back */
  tl_expect(&dq, "POST", Q, NULL, ONE("EXPLAIN PRAGMA defer_foreign_keys = ON"), 403,
            "not run in a read on --dqlite (nothing would put it back): send it in a write");
  /* foreign_keys inside a command: refused as on a file */
  tl_expect(&dq, "POST", DO, NULL, ONE("PRAGMA foreign_keys = OFF"), 403, "foreign_keys");
  fill_and_delete(&dq);
  /* each refusal says what to do, in one sentence */
  tl_expect(&dq, "POST", DO, NULL, ONE("VACUUM"), 400, "VACUUM is not run on --dqlite");
  stream s = {&dq, ""};
  const char *e = execute(&s, "VACUUM", NULL);
  if (e == NULL || strstr(e, "not run on --dqlite") == NULL || strstr(e, ": leave it out;") == NULL)
    fail_msg("VACUUM over Hrana on --dqlite: %s", e ? e : "ran");
  if ((e = execute(&s, "BEGIN IMMEDIATE", NULL)) != NULL)
    fail_msg("BEGIN IMMEDIATE: %s", e);
  e = execute(&s, "SAVEPOINT a", NULL);
  if (e == NULL || strstr(e, "not run on --dqlite") == NULL ||
      strstr(e, "send the statements without them") == NULL)
    fail_msg("SAVEPOINT in a transaction on --dqlite: %s", e ? e : "ran");
  if ((e = execute(&s, "ROLLBACK", NULL)) != NULL)
    fail_msg("ROLLBACK: %s", e);
  close_stream(&s);
  tl_expect(&dq, "POST", DO, NULL, ONE("DELETE FROM big"), 200, NULL);
}

/* A --schema step's own COMMIT (or BEGIN, ROLLBACK) refuses the start on
 * both stores, by one rule (sql/schema.c) before either sees a step: lithd
 * runs the pending steps in one transaction of its own. On a cluster that
 * COMMIT had committed step 2's first half, and the rest then failed. */
static void test_schema_own_transaction(void **state) {
  (void)state;
  char out[4096];
  write_file("own.sql", "CREATE TABLE o1(x);\n"
                        "-- step 2\n"
                        "CREATE TABLE half(x);\n  /* done */ Commit ;\nCREATE TABLE broken(;\n");
  const char *want = "own.sql: step 2 holds \"Commit ;\": remove it (lithd runs the pending steps in one "
                     "transaction of its own)";
  tl_remove_db("own.db");
  assert_int_equal(tl_run(TL_ARGS("--db", "own.db", "--schema", "own.sql"), out, sizeof out), 1);
  if (strstr(out, want) == NULL)
    fail_msg("on a file: %s", out);
  assert_int_equal(tl_run(TL_ARGS("--dqlite", node.address, "--schema", "own.sql"), out, sizeof out), 1);
  if (strstr(out, want) == NULL)
    fail_msg("on --dqlite: %s", out);
  assert_int_equal(do_int(&dq, "SELECT count(*) FROM sqlite_master WHERE name IN ('o1', 'half')"), 0);
  /* a savepoint inside a step stays inside lithd's transaction: it runs */
  write_file("own.sql", "SAVEPOINT a; CREATE TABLE o2(x); ROLLBACK TO a; RELEASE a; CREATE TABLE o3(x);\n");
  struct tl_child own;
  tl_start(&own, "own", 0, TL_ARGS("--schema", "own.sql"));
  assert_int_equal(do_int(&own, "SELECT count(*) FROM sqlite_master WHERE name IN ('o2', 'o3')"), 1);
  assert_int_equal(tl_stop(&own, SIGTERM, 10000), 0);
}

/* --schema's steps commit no row without its parent, on both stores (a
 * file: lith_open's migrations; a cluster: apply_schema): step 2 redefines
 * the parent table under defer_foreign_keys, which its OFF forgets; one
 * that drops a parent row still referenced refuses the start and leaves
 * the database as it was; the one that keeps every row applies. */
static void schema_fk_on(const char *store, unsigned flags, const char *const *args,
                         const char *const *run_args) {
  static const char *step1 =
      "CREATE TABLE fp(id INTEGER PRIMARY KEY, v TEXT);\n"
      "CREATE TABLE fc(id INTEGER PRIMARY KEY, pid INTEGER NOT NULL REFERENCES fp(id));\n"
      "INSERT INTO fp VALUES (1, '1'), (2, '2'); INSERT INTO fc(pid) VALUES (1), (2);\n";
  char text[1024], out[4096];
  struct tl_child c;
  write_file("fk.sql", step1);
  tl_start(&c, "fk", flags, args);
  assert_int_equal(tl_stop(&c, SIGTERM, 10000), 0);
  snprintf(
      text, sizeof text,
      "%s-- step 2\nPRAGMA defer_foreign_keys = ON; CREATE TABLE fp2(id INTEGER PRIMARY KEY, v INTEGER);\n"
      "INSERT INTO fp2 SELECT * FROM fp WHERE id <> 1; DROP TABLE fp; ALTER TABLE fp2 RENAME TO fp;\n"
      "PRAGMA defer_foreign_keys = OFF;\n",
      step1);
  write_file("fk.sql", text);
  assert_int_equal(tl_run(run_args, out, sizeof out), 1);
  if (strstr(out,
             "2..2: FOREIGN KEY constraint failed (PRAGMA foreign_key_check: a row without its parent)") ==
      NULL)
    fail_msg("on %s: %s", store, out);
  snprintf(
      text, sizeof text,
      "%s-- step 2\nPRAGMA defer_foreign_keys = ON; CREATE TABLE fp2(id INTEGER PRIMARY KEY, v INTEGER);\n"
      "INSERT INTO fp2 SELECT * FROM fp; DROP TABLE fp; ALTER TABLE fp2 RENAME TO fp;\n"
      "PRAGMA defer_foreign_keys = OFF;\n",
      step1);
  write_file("fk.sql", step1);
  tl_start(&c, "fk", flags | TL_KEEP_DB, args);
  /* the refused step left nothing: step 1's rows, v still text */
  assert_int_equal(do_int(&c, "SELECT count(*) FROM fp WHERE typeof(v) = 'text'"), 2);
  assert_int_equal(tl_stop(&c, SIGTERM, 10000), 0);
  write_file("fk.sql", text);
  tl_start(&c, "fk", flags | TL_KEEP_DB, args);
  assert_int_equal(do_int(&c, "SELECT count(*) FROM fp WHERE typeof(v) = 'integer'"), 2);
  assert_int_equal(do_int(&c, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
  assert_int_equal(tl_stop(&c, SIGTERM, 10000), 0);
}

static void test_schema_foreign_keys(void **state) {
  (void)state;
  tl_remove_db("fk.db");
  /* the refused starts --listen where the node listens: a lithd whose
   * check is missing fails there after its schema, never serves on */
  schema_fk_on("a file", 0, TL_ARGS("--schema", "fk.sql"),
               TL_ARGS("--db", "fk.db", "--schema", "fk.sql", "--listen", node.address));
  schema_fk_on(
      "--dqlite", TL_NO_DB, TL_ARGS("--dqlite", node.address, "--dqlite-db", "fk", "--schema", "fk.sql"),
      TL_ARGS("--dqlite", node.address, "--dqlite-db", "fk", "--schema", "fk.sql", "--listen", node.address));
}

static int group_setup(void **state) {
  (void)state;
  signal(SIGPIPE, SIG_IGN);
  write_file("schema.sql", schema_sql);
  t_node_init(&node, 1);
  if (t_node_start(&node, NULL, 10000) != 0)
    return -1;
  tl_start(&local, "local", 0, TL_ARGS("--schema", "schema.sql"));
  tl_start(&dq, "dq", TL_NO_DB, TL_ARGS("--dqlite", node.address, "--schema", "schema.sql"));
  return 0;
}

/* Each lithd must stop cleanly (exit 0: under a sanitizer, no leak). */
static int group_teardown(void **state) {
  (void)state;
  int rc = 0;
  if (local.pid > 0 && tl_stop(&local, SIGTERM, 10000) != 0)
    rc = -1;
  if (dq.pid > 0 && tl_stop(&dq, SIGTERM, 10000) != 0)
    rc = -1;
  if (node.pid > 0)
    t_node_stop(&node, SIGTERM, 5000);
  return rc;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_defer_foreign_keys_local),
      cmocka_unit_test(test_user_version),
      cmocka_unit_test(test_vacuum_local),
      cmocka_unit_test(test_dqlite),
      cmocka_unit_test(test_schema_own_transaction),
      cmocka_unit_test(test_schema_foreign_keys),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
