/*
 * test_lithd_jwt — lithd with --auth-jwt-key-file: sqld's EdDSA tokens
 * (made here, test/jwtmint.h) on every road in. A full token writes, a
 * read-only one reads and its every write is refused with sqld's
 * "Authorization forbidden" (403 on /v1/do and /v1/batch, SQLITE_AUTH in
 * Hrana: an execute, a batch, a sequence, a BEGIN IMMEDIATE's
 * transaction, a deferred transaction's first write), and changes
 * nothing; forged, expired and other databases' tokens are refused (401);
 * the static --token-file token still grants everything beside them; a
 * key file lithd cannot use stops it at start. A WebSocket judges its
 * token with every request, as HTTP does: past its expiry it grants
 * nothing until a hello brings a new one.
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
#include <time.h>

#include "child.h"
#include "jwtmint.h"
#include "wsclient.h"

#define STATIC_TOKEN "static-s3cret"
#define CREATE "{\"statements\":[{\"sql\":\"CREATE TABLE t(x)\"}]}"
#define INSERT "{\"statements\":[{\"sql\":\"INSERT INTO t VALUES(1)\"}]}"
#define COUNT "{\"statements\":[{\"sql\":\"SELECT count(*) FROM t\"}]}"
#define FORBIDDEN "Authorization forbidden"

static EVP_PKEY *key;

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  assert_int_equal(fclose(f), 0);
}

/* "Bearer <token>" of payload signed with k (static buffer, one at a time). */
static const char *bearer(EVP_PKEY *k, const char *payload) {
  static char buf[16384];
  char *t = mint(k, payload);
  snprintf(buf, sizeof buf, "Bearer %s", t);
  free(t);
  return buf;
}

static int setup(void **state) {
  key = mint_key();
  if (key == NULL)
    return -1;
  char *pem = mint_pub_pem(key);
  write_file("jwt.pem", pem);
  free(pem);
  write_file("static.token", STATIC_TOKEN "\n");
  (void)state;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  EVP_PKEY_free(key);
  return 0;
}

/* One lithd with both credentials. */
static void start(struct tl_child *c, const char *name) {
  tl_start(c, name, 0, TL_ARGS("--auth-jwt-key-file", "jwt.pem", "--token-file", "static.token"));
}

/* A key file lithd cannot use: it does not start, and says why. */
static void test_bad_key_files(void **state) {
  (void)state;
  char out[4096];
  char *priv = mint_priv_pem(key);
  write_file("priv.pem", priv);
  free(priv);
  write_file("junk.pem", "not a key\n");
  write_file("cert.pem", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
  struct {
    const char *file, *want;
  } bad[] = {{"priv.pem", "private key"},
             {"junk.pem", "URL-safe base64"},
             {"cert.pem", "PUBLIC KEY"},
             {"missing.pem", "missing.pem"}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    int rc =
        tl_run(TL_ARGS("--db", "badkey.db", "--listen", "127.0.0.1:0", "--auth-jwt-key-file", bad[i].file),
               out, sizeof out);
    if (rc == 0 || strstr(out, bad[i].want) == NULL || strstr(out, "--auth-jwt-key-file") == NULL)
      fail_msg("%s: exit %d: %s", bad[i].file, rc, out);
  }
  tl_remove_db("badkey.db");
  /* the raw form starts */
  char *raw = mint_pub_raw(key);
  write_file("raw.key", raw);
  free(raw);
  struct tl_child c = {.pid = -1, .out_fd = -1};
  tl_start(&c, "rawkey", 0, TL_ARGS("--auth-jwt-key-file", "raw.key"));
  tl_expect(&c, "POST", "/v1/do", bearer(key, "{}"), CREATE, 200, NULL);
  tl_expect(&c, "POST", "/v1/do", NULL, INSERT, 401, NULL);
  assert_int_equal(tl_stop(&c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* /v1/do, /v1/batch, /v1/query, named routes: who gets what. */
static void test_http_roads(void **state) {
  struct tl_child *c = *state;
  char payload[128];
  start(c, "jwthttp");
  tl_expect(c, "POST", "/v1/do", bearer(key, "{\"a\":\"rw\"}"), CREATE, 200, NULL);
  tl_expect(c, "POST", "/v1/do", bearer(key, "{}"), INSERT, 200, NULL);
  tl_expect(c, "POST", "/v1/do", "Bearer " STATIC_TOKEN, INSERT, 200, NULL);
  snprintf(payload, sizeof payload, "{\"a\":\"rw\",\"id\":\"main\",\"exp\":%lld}",
           (long long)time(NULL) + 600);
  tl_expect(c, "POST", "/v1/do", bearer(key, payload), INSERT, 200, NULL);

  /* read-only: reads on every road, no write on any */
  const char *ro = bearer(key, "{\"a\":\"ro\"}");
  char ro_copy[16384];
  snprintf(ro_copy, sizeof ro_copy, "%s", ro);
  tl_expect(c, "POST", "/v1/query", ro_copy, COUNT, 200, "\"rows\":[[3]]");
  tl_expect(c, "POST", "/v1/do", ro_copy, COUNT, 200, "\"rows\":[[3]]");
  tl_expect(c, "POST", "/v1/do", ro_copy, INSERT, 403, FORBIDDEN);
  tl_expect(c, "POST", "/v1/do", ro_copy,
            "{\"statements\":[{\"sql\":\"SELECT 1\"},{\"sql\":\"DELETE FROM t\"}]}", 403, FORBIDDEN);
  tl_expect(c, "POST", "/v1/do", ro_copy, "{\"statements\":[{\"sql\":\"CREATE TABLE u(y)\"}]}", 403,
            FORBIDDEN);
  tl_expect(c, "POST", "/v1/do", ro_copy, "{\"statements\":[{\"sql\":\"PRAGMA user_version = 7\"}]}", 403,
            NULL);
  tl_expect(c, "POST", "/v1/do", ro_copy, "{\"statements\":[{\"sql\":\"VACUUM\"}]}", 403, FORBIDDEN);
  tl_expect(
      c, "POST", "/v1/batch", ro_copy,
      "{\"commands\":[{\"statements\":[{\"sql\":\"SELECT 1\"}]},{\"statements\":[{\"sql\":\"INSERT INTO t "
      "VALUES(9)\"}]}]}",
      200, FORBIDDEN);
  tl_expect(c, "POST", "/v1/db/main/do", ro_copy, INSERT, 403, FORBIDDEN);
  tl_expect(c, "GET", "/v1/stats", ro_copy, NULL, 200, NULL);
  tl_expect(c, "POST", "/v1/backup", ro_copy, "{\"dest\":\"x.db\"}", 403, "read-only");

  /* refused at the gate: 401, whatever the request */
  const char *refused[] = {"{\"a\":\"rw\",\"id\":\"other\"}", "{\"a\":\"admin\"}",
                           "{\"p\":{\"rw\":{\"ns\":[\"x\"]}}}"};
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
    tl_expect(c, "POST", "/v1/do", bearer(key, refused[i]), INSERT, 401, NULL);
  snprintf(payload, sizeof payload, "{\"exp\":%lld}", (long long)time(NULL) - 3600);
  tl_expect(c, "POST", "/v1/do", bearer(key, payload), INSERT, 401, "expired");
  snprintf(payload, sizeof payload, "{\"nbf\":%lld}", (long long)time(NULL) + 3600);
  tl_expect(c, "POST", "/v1/do", bearer(key, payload), INSERT, 401, "not valid yet");
  EVP_PKEY *other = mint_key();
  tl_expect(c, "POST", "/v1/do", bearer(other, "{}"), INSERT, 401, "signature");
  EVP_PKEY_free(other);
  char *none = mint_none("{}"), *pem = mint_pub_pem(key), *hs = mint_hs256(pem, "{}"), auth[16384];
  snprintf(auth, sizeof auth, "Bearer %s", none);
  tl_expect(c, "POST", "/v1/do", auth, INSERT, 401, "EdDSA");
  snprintf(auth, sizeof auth, "Bearer %s", hs);
  tl_expect(c, "POST", "/v1/do", auth, INSERT, 401, "EdDSA");
  free(none);
  free(pem);
  free(hs);
  tl_expect(c, "POST", "/v1/do", "Bearer not.a.jwt", INSERT, 401, NULL);
  tl_expect(c, "POST", "/v1/do", NULL, INSERT, 401, "required");
  /* nothing refused changed anything */
  tl_expect(c, "POST", "/v1/query", "Bearer " STATIC_TOKEN, COUNT, 200, "\"rows\":[[3]]");
  assert_int_equal(tl_sql_int("jwthttp.db", "SELECT count(*) FROM sqlite_schema WHERE name = 'u'"), 0);
}

/* results[k] of a pipeline's answer holds want (a substring of its JSON). */
static void pipe_expect(const struct tl_child *c, const char *auth, const char *requests, int status,
                        const char *const *wants) {
  char body[4096];
  struct tl_resp r;
  snprintf(body, sizeof body, "{\"baton\":null,\"requests\":%s}", requests);
  tl_http(c, "POST", "/v2/pipeline", auth, body, &r);
  if (r.status != status)
    fail_msg("status %d: %s", r.status, r.body);
  /* each want in order */
  const char *at = r.body;
  for (; wants != NULL && *wants != NULL; wants++) {
    const char *hit = strstr(at, *wants);
    if (hit == NULL)
      fail_msg("no %s after %.200s in %s", *wants, at, r.body);
    at = hit + strlen(*wants);
  }
  tl_resp_free(&r);
}

#define EXEC(sql) "{\"type\":\"execute\",\"stmt\":{\"sql\":\"" sql "\"}}"
#define OK_EXEC "{\"type\":\"ok\",\"response\":{\"type\":\"execute\""
#define AUTH_ERR "\"code\":\"SQLITE_AUTH\""

/* Hrana: a read-only token's reads pass, its writes fail on every road. */
static void test_hrana_roads(void **state) {
  struct tl_child *c = *state;
  start(c, "jwthrana");
  char full[16384], ro[16384];
  snprintf(full, sizeof full, "%s", bearer(key, "{}"));
  snprintf(ro, sizeof ro, "%s", bearer(key, "{\"a\":\"ro\",\"id\":\"main\"}"));
  pipe_expect(c, full, "[" EXEC("CREATE TABLE t(x)") "," EXEC("INSERT INTO t VALUES(1)") "]", 200,
              TL_ARGS(OK_EXEC, OK_EXEC));
  /* a plain write; a read beside it */
  pipe_expect(c, ro, "[" EXEC("INSERT INTO t VALUES(2)") "," EXEC("SELECT count(*) FROM t") "]", 200,
              TL_ARGS(FORBIDDEN, AUTH_ERR, OK_EXEC, "\"value\":\"1\""));
  /* a batch: the write step fails, the read step runs */
  pipe_expect(c, ro,
              "[{\"type\":\"batch\",\"batch\":{\"steps\":[{\"stmt\":{\"sql\":\"UPDATE t SET x = 5\"}},"
              "{\"stmt\":{\"sql\":\"SELECT x FROM t\"}}]}}]",
              200, TL_ARGS("\"value\":\"1\"", FORBIDDEN));
  /* a sequence */
  pipe_expect(c, ro, "[{\"type\":\"sequence\",\"sql\":\"SELECT 1; DELETE FROM t;\"}]", 200,
              TL_ARGS(FORBIDDEN, AUTH_ERR));
  /* BEGIN IMMEDIATE: the transaction opens (on a snapshot), its write fails,
   * its read runs, COMMIT ends it */
  pipe_expect(c, ro,
              "[" EXEC("BEGIN IMMEDIATE") "," EXEC("INSERT INTO t VALUES(3)") "," EXEC(
                  "SELECT count(*) FROM t") "," EXEC("COMMIT") ",{\"type\":\"close\"}]",
              200, TL_ARGS(OK_EXEC, FORBIDDEN, AUTH_ERR, OK_EXEC, "\"value\":\"1\"", OK_EXEC));
  /* a deferred transaction's first write, across pipelines */
  {
    char body[1024];
    struct tl_resp r;
    snprintf(body, sizeof body, "{\"baton\":null,\"requests\":[" EXEC("BEGIN") "," EXEC("SELECT 1") "]}");
    tl_http(c, "POST", "/v2/pipeline", ro, body, &r);
    assert_int_equal(r.status, 200);
    const char *b = strstr(r.body, "\"baton\":\"");
    assert_non_null(b);
    char baton[64];
    assert_int_equal(sscanf(b + 9, "%63[^\"]", baton), 1);
    tl_resp_free(&r);
    snprintf(body, sizeof body,
             "{\"baton\":\"%s\",\"requests\":[" EXEC("INSERT INTO t VALUES(4)") "," EXEC(
                 "SELECT count(*) FROM t") "," EXEC("ROLLBACK") ",{\"type\":\"close\"}]}",
             baton);
    tl_http(c, "POST", "/v2/pipeline", ro, body, &r);
    assert_int_equal(r.status, 200);
    if (strstr(r.body, FORBIDDEN) == NULL || strstr(r.body, "\"value\":\"1\"") == NULL)
      fail_msg("%s", r.body);
    tl_resp_free(&r);
  }
  /* a migration's PRAGMA foreign_keys: refused before it takes the writer */
  pipe_expect(c, ro, "[" EXEC("PRAGMA foreign_keys = OFF") "]", 200, TL_ARGS(FORBIDDEN, AUTH_ERR));
  /* a stream opened with a full token, continued with a read-only one */
  {
    char body[1024];
    struct tl_resp r;
    snprintf(body, sizeof body, "{\"baton\":null,\"requests\":[" EXEC("BEGIN IMMEDIATE") "]}");
    tl_http(c, "POST", "/v2/pipeline", full, body, &r);
    assert_int_equal(r.status, 200);
    const char *b = strstr(r.body, "\"baton\":\"");
    assert_non_null(b);
    char baton[64];
    assert_int_equal(sscanf(b + 9, "%63[^\"]", baton), 1);
    tl_resp_free(&r);
    snprintf(body, sizeof body,
             "{\"baton\":\"%s\",\"requests\":[" EXEC("INSERT INTO t VALUES(5)") "," EXEC(
                 "COMMIT") ",{\"type\":\"close\"}]}",
             baton);
    tl_http(c, "POST", "/v2/pipeline", ro, body, &r);
    assert_int_equal(r.status, 200);
    if (strstr(r.body, FORBIDDEN) == NULL)
      fail_msg("%s", r.body);
    tl_resp_free(&r);
  }
  /* a read-only BEGIN IMMEDIATE left open holds no writer: a full token's
   * write runs at once beside it */
  {
    char body[512];
    struct tl_resp r;
    snprintf(body, sizeof body, "{\"baton\":null,\"requests\":[" EXEC("BEGIN IMMEDIATE") "]}");
    tl_http(c, "POST", "/v2/pipeline", ro, body, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, OK_EXEC));
    tl_resp_free(&r);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    tl_expect(c, "POST", "/v1/do", full, "{\"statements\":[{\"sql\":\"INSERT INTO t VALUES(7)\"}]}", 200,
              NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    print_message("a write beside a read-only BEGIN IMMEDIATE: %ld ms\n", ms);
    assert_true(ms < 1500); /* the writer held: --tx-idle-ms (5000) at least */
    tl_expect(c, "POST", "/v1/do", full, "{\"statements\":[{\"sql\":\"DELETE FROM t WHERE x = 7\"}]}", 200,
              NULL);
  }
  /* the gate in Hrana's shape */
  char payload[64];
  snprintf(payload, sizeof payload, "{\"exp\":%lld}", (long long)time(NULL) - 3600);
  pipe_expect(c, bearer(key, payload), "[" EXEC("SELECT 1") "]", 401, TL_ARGS("expired", "AUTH_FAILED"));
  pipe_expect(c, NULL, "[" EXEC("SELECT 1") "]", 401, TL_ARGS("required"));
  /* nothing the read-only token sent changed anything; the full one writes */
  assert_int_equal(tl_sql_int("jwthrana.db", "SELECT count(*) FROM t"), 1);
  assert_int_equal(tl_sql_int("jwthrana.db", "SELECT sum(x) FROM t"), 1);
  pipe_expect(c, "Bearer " STATIC_TOKEN, "[" EXEC("INSERT INTO t VALUES(6)") "]", 200, TL_ARGS(OK_EXEC));
  assert_int_equal(tl_sql_int("jwthrana.db", "SELECT count(*) FROM t"), 2);
}

/* Per database: "p" and "id" scope a token to the databases they name. */
static void test_per_database(void **state) {
  struct tl_child *c = *state;
  tl_remove_db("jwta.db");
  tl_remove_db("jwtb.db");
  tl_start(c, "jwtdbs", TL_NO_DB,
           TL_ARGS("--db", "a=jwta.db", "--db", "b=jwtb.db", "--auth-jwt-key-file", "jwt.pem"));
  char p[16384];
  snprintf(p, sizeof p, "%s", bearer(key, "{\"p\":{\"rw\":{\"ns\":[\"a\"]},\"ro\":{\"ns\":[\"b\"]}}}"));
  tl_expect(c, "POST", "/v1/db/a/do", p, CREATE, 200, NULL);
  tl_expect(c, "POST", "/v1/db/a/do", p, INSERT, 200, NULL);
  tl_expect(c, "POST", "/v1/db/b/do", bearer(key, "{}"), CREATE, 200, NULL);
  tl_expect(c, "POST", "/v1/db/b/do", p, INSERT, 403, FORBIDDEN);
  tl_expect(c, "POST", "/v1/db/b/query", p, COUNT, 200, "\"rows\":[[0]]");
  tl_expect(c, "GET", "/metrics", p, NULL, 401, NULL); /* a route of no database */
  tl_expect(c, "POST", "/v1/db/b/query", bearer(key, "{\"id\":\"a\"}"), COUNT, 401, "\\\"b\\\"");
  tl_expect(c, "POST", "/v1/db/a/query", bearer(key, "{\"id\":\"a\"}"), COUNT, 200, "\"rows\":[[1]]");
  assert_int_equal(tl_sql_int("jwtb.db", "SELECT count(*) FROM t"), 0);
}

/* A WebSocket's next message (a hello's answer or a request's), which must
 * hold `want`; the connection goes on. */
static void ws_expect(int fd, const char *send, const char *want) {
  static char msg[65536];
  int code = 0;
  if (send != NULL)
    assert_int_equal(wsc_send_text(fd, send), 0);
  long n = wsc_read_text(fd, msg, sizeof msg, &code);
  if (n < 0 || strstr(msg, want) == NULL)
    fprintf(stderr, "got %ld (close %d): %s, want %s\n", n, code, n >= 0 ? msg : "", want);
  assert_true(n >= 0);
  assert_non_null(strstr(msg, want));
}

#define WS_EXEC(id, sql)                                                                            \
  "{\"type\":\"request\",\"request_id\":" #id ",\"request\":{\"type\":\"execute\",\"stream_id\":1," \
  "\"stmt\":{\"sql\":\"" sql "\"}}}"

/* A token that expires while its WebSocket lives grants nothing after
 * (exp, with sqld's 60 s of leeway), as over HTTP (401): its hello's and
 * its handshake's alike; a hello with a new token goes on. (sqld keeps a
 * hello's grant for the connection's life: lithd is stricter.) */
static void test_ws_token_expires(void **state) {
  struct tl_child *c = *state;
  char payload[128], msg[16384], extra[16500];
  start(c, "wsexp");
  snprintf(payload, sizeof payload, "{\"a\":\"rw\",\"exp\":%lld}", (long long)time(NULL) - 60 + 2);
  char *tok = mint(key, payload);
  int a = wsc_open(c->port, "/", "hrana3", NULL);
  assert_true(a >= 0);
  snprintf(msg, sizeof msg, "{\"type\":\"hello\",\"jwt\":\"%s\"}", tok);
  ws_expect(a, msg, "hello_ok");
  snprintf(extra, sizeof extra, "Authorization: Bearer %s\r\n", tok);
  int b = wsc_open(c->port, "/", "hrana3", extra);
  assert_true(b >= 0);
  ws_expect(b, "{\"type\":\"hello\",\"jwt\":null}", "hello_ok");
  for (int fd = a; fd >= 0; fd = fd == a ? b : -1) {
    ws_expect(
        fd, "{\"type\":\"request\",\"request_id\":1,\"request\":{\"type\":\"open_stream\",\"stream_id\":1}}",
        "response_ok");
    ws_expect(fd, WS_EXEC(2, "SELECT 1"), "response_ok");
  }
  sleep(3); /* past exp + leeway */
  tl_expect(c, "POST", "/v1/do", bearer(key, payload), COUNT, 401, "expired");
  ws_expect(a, WS_EXEC(3, "CREATE TABLE after_expiry(x)"), "AUTH_FAILED");
  ws_expect(b, WS_EXEC(3, "CREATE TABLE after_expiry(x)"), "AUTH_FAILED");
  /* a new token in a hello: on again */
  free(tok);
  tok = mint(key, "{\"a\":\"rw\"}");
  snprintf(msg, sizeof msg, "{\"type\":\"hello\",\"jwt\":\"%s\"}", tok);
  ws_expect(a, msg, "hello_ok");
  ws_expect(a, WS_EXEC(4, "SELECT count(*) FROM sqlite_schema WHERE name = 'after_expiry'"),
            "\"value\":\"0\"");
  free(tok);
  close(a);
  close(b);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_bad_key_files, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_http_roads, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_hrana_roads, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_per_database, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_ws_token_expires, tl_setup, tl_teardown),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
