/*
 * test_lithd — lithd end to end: the built daemon (LITHD_PATH, compiled in)
 * is spawned on a scratch database with --listen 127.0.0.1:0, the bound port
 * is read from the line it prints on stdout, and the tests speak HTTP/1.1 to
 * it over raw sockets (one request per connection, Connection: close). The
 * spawning, HTTP and checking helpers (tl_*) live in child.c, shared with the
 * other test_lithd*.c.
 *
 * Design: each test owns one child (struct tl_child); the teardown kills it
 * with SIGKILL if it still runs, so a failed assertion never leaks a daemon.
 * Outcomes are checked through the API (a later /v1/query) and, after a
 * SIGTERM, by opening the file with SQLite directly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "child.h"

#ifndef LITHD_PATH
#error "LITHD_PATH must name the lithd binary"
#endif

extern char **environ;

#define TOKEN "s3cret-token"

#define CREATE "{\"statements\":[{\"sql\":\"CREATE TABLE t(id INTEGER PRIMARY KEY, v)\"}]}"
#define COUNT "{\"statements\":[{\"sql\":\"SELECT count(*) FROM t\"}]}"

/* ---- Tests --------------------------------------------------------------- */

static void test_healthz(void **state) {
  struct tl_child *c = *state;
  tl_start(c, "healthz", 0, NULL);
  tl_expect(c, "GET", "/healthz", NULL, NULL, 200, "{\"ok\":true}");
  tl_expect(c, "GET", "/nope", NULL, NULL, 404, "error");
  tl_expect(c, "GET", "/v1/stats", NULL, NULL, 200, "\"commands\":0");
}

static void test_do_then_query_exact_int64(void **state) {
  struct tl_child *c = *state;
  tl_start(c, "do_query", 0, NULL);
  tl_expect(c, "POST", "/v1/do", NULL, CREATE, 200, "\"results\"");
  tl_expect(c, "POST", "/v1/do", NULL,
            "{\"statements\":[{\"sql\":\"INSERT INTO t VALUES(?, ?)\","
            "\"params\":[7, 9223372036854775807]},"
            "{\"sql\":\"INSERT INTO t VALUES(:id, :v) RETURNING v\","
            "\"params\":{\":id\": 8, \":v\": -9223372036854775808}}]}",
            200,
            "{\"changes\":1,\"last_insert_rowid\":7,\"columns\":[],\"rows\":[]},"
            "{\"changes\":1,\"last_insert_rowid\":8,\"columns\":[\"v\"],"
            "\"rows\":[[-9223372036854775808]]}");
  tl_expect(c, "POST", "/v1/query", NULL,
            "{\"statements\":[{\"sql\":\"SELECT id, v FROM t WHERE id = ?\",\"params\":[7]}]}", 200,
            "\"columns\":[\"id\",\"v\"],\"rows\":[[7,9223372036854775807]]");
  tl_expect(c, "GET", "/v1/stats", NULL, NULL, 200, "\"commands\":2");
}

static void test_failing_statement_409_nothing_kept(void **state) {
  struct tl_child *c = *state;
  tl_start(c, "conflict", 0, NULL);
  tl_expect(c, "POST", "/v1/do", NULL, CREATE, 200, NULL);
  tl_expect(c, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"INSERT INTO t VALUES(1, 1)\"}]}", 200,
            NULL);
  tl_expect(c, "POST", "/v1/do", NULL,
            "{\"statements\":[{\"sql\":\"INSERT INTO t VALUES(2, 2)\"},"
            "{\"sql\":\"INSERT INTO t VALUES(1, 3)\"}]}",
            409, "\"code\":\"constraint\"");
  tl_expect(c, "POST", "/v1/do", NULL,
            "{\"statements\":[{\"sql\":\"INSERT INTO t VALUES(3, 3)\"},{\"sql\":\"SELEC nope\"}]}", 400,
            "\"statement\":1");
  tl_expect(c, "POST", "/v1/query", NULL, COUNT, 200, "\"rows\":[[1]]");
}

static void test_bad_requests(void **state) {
  struct tl_child *c = *state;
  tl_start(c, "bad", 0, NULL);
  tl_expect(c, "POST", "/v1/do", NULL, CREATE, 200, NULL);
  tl_expect(c, "POST", "/v1/do", NULL, "{\"statements\":[", 400, "\"code\":\"bad_request\"");
  tl_expect(c, "POST", "/v1/query", NULL, "not json", 400, "\"code\":\"bad_request\"");
  tl_expect(c, "POST", "/v1/do", NULL, "{\"statement\":[]}", 400, "\"code\":\"bad_request\"");
  tl_expect(c, "POST", "/v1/query", NULL, "{\"statements\":[{\"sql\":\"INSERT INTO t VALUES(5, 5)\"}]}", 403,
            "\"code\":\"not_a_query\"");
  /* a typo is an SQL error with SQLite's message, not a write */
  tl_expect(c, "POST", "/v1/query", NULL, "{\"statements\":[{\"sql\":\"SELEC v FROM t\"}]}", 400,
            "{\"error\":{\"code\":\"sql_error\",\"message\":\"prepare: near \\\"SELEC\\\": syntax error\"");
  tl_expect(c, "GET", "/v1/do", NULL, NULL, 405, NULL);
  tl_expect(c, "POST", "/v1/query", NULL, COUNT, 200, "\"rows\":[[0]]");
  /* a query is known by its first word past comments, as SQLite reads it */
  tl_expect(c, "POST", "/v1/query", NULL,
            "{\"statements\":[{\"sql\":\"-- how many\\n /* rows */ select count(*) FROM t\"}]}", 200,
            "\"rows\":[[0]]");
  tl_expect(c, "POST", "/v1/query", NULL, "{\"statements\":[{\"sql\":\"/* never closed SELECT 1\"}]}", 403,
            "\"code\":\"not_a_query\"");
}

static void test_token(void **state) {
  struct tl_child *c = *state;
  FILE *f = fopen("token.txt", "w");
  const char *good = "Bearer " TOKEN;
  const char *ins = "{\"statements\":[{\"sql\":\"INSERT INTO t VALUES(1, 1)\"}]}";

  assert_non_null(f);
  fputs(TOKEN "\n", f);
  fclose(f);
  tl_start(c, "token", 0, TL_ARGS("--token-file", "token.txt"));
  tl_expect(c, "POST", "/v1/do", good, CREATE, 200, NULL);
  tl_expect(c, "POST", "/v1/do", NULL, ins, 401, "error");
  tl_expect(c, "POST", "/v1/do", "Bearer wrong", ins, 401, "error");
  tl_expect(c, "POST", "/v1/do", "Bearer s3cret", ins, 401, NULL); /* a prefix */
  /* Same length, same first byte, only the last byte differs: a
   * comparison that stops early or looks at the length alone lets it in. */
  tl_expect(c, "POST", "/v1/do", "Bearer s3cret-tokeN", ins, 401, NULL);
  tl_expect(c, "POST", "/v1/do", "Bearer s3cret-token-", ins, 401, NULL); /* one byte longer */
  tl_expect(c, "POST", "/v1/do", "Basic " TOKEN, ins, 401, NULL);
  tl_expect(c, "POST", "/v1/query", NULL, COUNT, 401, NULL);
  tl_expect(c, "GET", "/v1/stats", "Bearer x", NULL, 401, NULL);
  tl_expect(c, "GET", "/metrics", NULL, NULL, 401, NULL);
  tl_expect(c, "POST", "/v1/batch", "Bearer wrong",
            "{\"commands\":[{\"statements\":[{\"sql\":\"INSERT INTO t VALUES(2, 2)\"}]}]}", 401, NULL);
  tl_expect(c, "GET", "/metrics", good, NULL, 200, "lith_commands_total{db=\"main\"} 1\n");
  tl_expect(c, "POST", "/v1/query", good, COUNT, 200, "\"rows\":[[0]]");
  tl_expect(c, "GET", "/healthz", NULL, NULL, 200, NULL);
  tl_expect(c, "POST", "/v1/do", good, ins, 200, NULL);
  tl_expect(c, "POST", "/v1/query", good, COUNT, 200, "\"rows\":[[1]]");
}

static void test_refuses_public_listen_without_token(void **state) {
  pid_t pid;
  int st;
  char *argv[] = {(char *)LITHD_PATH, (char *)"--db",      (char *)"public.db",
                  (char *)"--listen", (char *)"0.0.0.0:0", NULL};
  (void)state;
  assert_int_equal(posix_spawn(&pid, LITHD_PATH, NULL, NULL, argv, environ), 0);
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 2);
  assert_int_equal(access("public.db", F_OK), -1);
}

static void test_sigterm_exit_0_data_in_file(void **state) {
  struct tl_child *c = *state;
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  int status;

  tl_start(c, "sigterm", 0, NULL);
  tl_expect(c, "POST", "/v1/do", NULL, CREATE, 200, NULL);
  tl_expect(c, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"INSERT INTO t VALUES(42, 'kept')\"}]}",
            200, NULL);
  assert_int_equal(kill(c->pid, SIGTERM), 0);
  assert_int_equal(waitpid(c->pid, &status, 0), c->pid);
  c->pid = -1;
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);

  assert_int_equal(sqlite3_open_v2(c->db, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_prepare_v2(db, "SELECT id, v FROM t", -1, &st, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_int_equal(sqlite3_column_int64(st, 0), 42);
  assert_string_equal((const char *)sqlite3_column_text(st, 1), "kept");
  assert_int_equal(sqlite3_step(st), SQLITE_DONE);
  sqlite3_finalize(st);
  sqlite3_close(db);
}

/* A command that takes a while on the writer (a few hundred ms). */
#define SLOW_N 400000
#define SLOW                                                                \
  "{\"statements\":[{\"sql\":\"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL " \
  "SELECT x + 1 FROM c WHERE x < 400000) INSERT INTO t SELECT x, x FROM c\"}]}"

static void test_client_gone_command_stands(void **state) {
  struct tl_child *c = *state;
  struct timespec ts = {0, 20 * 1000 * 1000};
  int i, fd;

  tl_start(c, "gone", 0, TL_ARGS("--max-run-ms", "120000")); /* SLOW: past 5 s under TSan on a busy machine */
  tl_expect(c, "POST", "/v1/do", NULL, CREATE, 200, NULL);
  fd = tl_send(c, "POST", "/v1/do", NULL, SLOW);
  nanosleep(&ts, NULL);
  close(fd);                   /* leave before the answer */
  for (i = 0; i < 3000; i++) { /* up to 60 s for the command to commit */
    struct tl_resp r = {0, NULL, NULL};
    tl_http(c, "POST", "/v1/query", NULL, COUNT, &r);
    assert_int_equal(r.status, 200);
    if (strstr(r.body, "\"rows\":[[400000]]") != NULL) {
      tl_resp_free(&r);
      break;
    }
    assert_non_null(strstr(r.body, "\"rows\":[[0]]")); /* all or nothing */
    tl_resp_free(&r);
    nanosleep(&ts, NULL);
  }
  assert_true(i < 3000);
  tl_expect(c, "GET", "/healthz", NULL, NULL, 200, NULL);
  tl_expect(c, "GET", "/v1/stats", NULL, NULL, 200, "\"commands\":2");
}

static void test_sigterm_answers_in_flight(void **state) {
  struct tl_child *c = *state;
  struct timespec ts = {0, 100 * 1000 * 1000};
  struct tl_resp r = {0, NULL, NULL};
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  int fd, status;

  tl_start(c, "inflight", 0, TL_ARGS("--max-run-ms", "120000")); /* SLOW, as above */
  tl_expect(c, "POST", "/v1/do", NULL, CREATE, 200, NULL);
  fd = tl_send(c, "POST", "/v1/do", NULL, SLOW);
  nanosleep(&ts, NULL); /* the command is on the writer by now */
  assert_int_equal(kill(c->pid, SIGTERM), 0);
  tl_read(fd, &r);
  assert_int_equal(r.status, 200);
  assert_non_null(strstr(r.body, "\"changes\":400000"));
  tl_resp_free(&r);
  assert_int_equal(waitpid(c->pid, &status, 0), c->pid);
  c->pid = -1;
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);

  assert_int_equal(sqlite3_open_v2(c->db, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_prepare_v2(db, "SELECT count(*) FROM t", -1, &st, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_int_equal(sqlite3_column_int64(st, 0), SLOW_N);
  sqlite3_finalize(st);
  sqlite3_close(db);
}

static void test_max_body_413(void **state) {
  struct tl_child *c = *state;
  char big[400];
  memset(big, ' ', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  memcpy(big, CREATE, strlen(CREATE));
  tl_start(c, "maxbody", 0, TL_ARGS("--max-body", "200"));
  tl_expect(c, "POST", "/v1/do", NULL, big, 413, NULL);
  tl_expect(c, "POST", "/v1/do", NULL, CREATE, 200, NULL);
}

/* A query that takes a while on a reader (several hundred ms). */
#define SLOW_QUERY                                                          \
  "{\"statements\":[{\"sql\":\"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL " \
  "SELECT x + 1 FROM c WHERE x < 4000000) SELECT count(*) FROM c\"}]}"

static void test_slow_query_does_not_block_loop(void **state) {
  struct tl_child *c = *state;
  struct timespec ts = {0, 50 * 1000 * 1000};
  struct tl_resp r = {0, NULL, NULL};
  struct pollfd p;
  int fd;

  tl_start(c, "slowquery", 0, TL_ARGS("--max-run-ms", "120000")); /* slow under TSan */
  fd = tl_send(c, "POST", "/v1/query", NULL, SLOW_QUERY);
  nanosleep(&ts, NULL); /* the query is on a pool thread by now */
  /* Another connection is served while the query runs ... */
  tl_expect(c, "GET", "/healthz", NULL, NULL, 200, "{\"ok\":true}");
  tl_expect(c, "GET", "/v1/stats", NULL, NULL, 200, "\"commands\":0");
  /* ... which it still does: no answer on its connection yet. */
  p.fd = fd;
  p.events = POLLIN;
  p.revents = 0;
  assert_int_equal(poll(&p, 1, 0), 0);
  /* The query's own time (a few seconds, several times that under a
   * sanitizer on a busy machine) bounds this wait, not lithd's promptness. */
  tl_read_within(fd, &r, 6 * TL_TIMEOUT_MS);
  if (r.status != 200)
    print_error("slow query -> %d %s\n", r.status, r.body);
  assert_int_equal(r.status, 200);
  assert_non_null(strstr(r.body, "\"rows\":[[4000000]]"));
  tl_resp_free(&r);
}

static void test_second_lithd_same_db_refused(void **state) {
  struct tl_child *c = *state;
  posix_spawn_file_actions_t fa;
  int efd[2], st;
  pid_t pid;
  char err[2048], want[128];
  char *argv[] = {(char *)LITHD_PATH, (char *)"--db",        (char *)"twice.db",
                  (char *)"--listen", (char *)"127.0.0.1:0", NULL};

  tl_start(c, "twice", 0, NULL);
  tl_expect(c, "POST", "/v1/do", NULL, CREATE, 200, NULL);

  assert_int_equal(pipe(efd), 0);
  assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
  assert_int_equal(posix_spawn_file_actions_adddup2(&fa, efd[1], 2), 0);
  assert_int_equal(posix_spawn_file_actions_addclose(&fa, efd[0]), 0);
  assert_int_equal(posix_spawn_file_actions_addclose(&fa, efd[1]), 0);
  assert_int_equal(posix_spawn(&pid, LITHD_PATH, &fa, NULL, argv, environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  close(efd[1]);
  tl_read_all(efd[0], err, sizeof err);
  close(efd[0]);
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 1);
  if (strstr(err, "already served by another lithd") == NULL)
    print_error("stderr: %s\n", err);
  assert_non_null(strstr(err, "already served by another lithd"));
  snprintf(want, sizeof want, "pid %ld", (long)c->pid);
  assert_non_null(strstr(err, want));
  assert_non_null(strstr(err, "twice.db-lithd.lock"));

  /* The first one still serves, and its data is intact. */
  tl_expect(c, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"INSERT INTO t VALUES(1, 1)\"}]}", 200,
            NULL);
  tl_expect(c, "POST", "/v1/query", NULL, COUNT, 200, "\"rows\":[[1]]");
}

/* Run lithd with args, which should refuse to start: its exit status, its
 * stdout and stderr in out. -1 when it started instead (it printed its
 * URL, or still ran after TL_TIMEOUT_MS): then it is killed. */
static int run_refused(const char *const *args, char *out, size_t cap) {
  posix_spawn_file_actions_t fa;
  char *argv[32];
  int n = 0, pfd[2], st, started = 0;
  size_t len = 0;
  pid_t pid;
  struct timespec t0, t;

  argv[n++] = (char *)LITHD_PATH;
  for (; *args != NULL && n < 31; args++)
    argv[n++] = (char *)*args;
  argv[n] = NULL;
  assert_int_equal(pipe(pfd), 0);
  assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
  assert_int_equal(posix_spawn_file_actions_adddup2(&fa, pfd[1], 1), 0);
  assert_int_equal(posix_spawn_file_actions_adddup2(&fa, pfd[1], 2), 0);
  assert_int_equal(posix_spawn_file_actions_addclose(&fa, pfd[0]), 0);
  assert_int_equal(posix_spawn_file_actions_addclose(&fa, pfd[1]), 0);
  assert_int_equal(posix_spawn(&pid, LITHD_PATH, &fa, NULL, argv, environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  close(pfd[1]);
  out[0] = '\0';
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    clock_gettime(CLOCK_MONOTONIC, &t);
    long left = TL_TIMEOUT_MS - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
    struct pollfd p = {pfd[0], POLLIN, 0};
    if (left <= 0 || poll(&p, 1, (int)left) != 1) {
      started = 1;
      break;
    }
    char scratch[512]; /* out is full: read on to the end all the same */
    int full = len == cap - 1;
    ssize_t got = read(pfd[0], full ? scratch : out + len, full ? sizeof scratch : cap - 1 - len);
    if (got <= 0)
      break; /* EOF: it exited */
    if (!full) {
      len += (size_t)got;
      out[len] = '\0';
    }
    if (strstr(out, "http://") != NULL) {
      started = 1;
      break;
    }
  }
  close(pfd[0]);
  if (started)
    kill(pid, SIGKILL);
  assert_int_equal(waitpid(pid, &st, 0), pid);
  return started ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The lock goes by the file, not by the name given: a link to the file, a
 * path through `..`, a link in another directory, and a link to a file not
 * made yet (SQLite creates the file the link names) all find the holder. */
static void test_second_lithd_other_name_refused(void **state) {
  struct tl_child *c = *state;
  char out[4096], want[64];

  mkdir("alias-dir", 0700);
  unlink("alias-link.db");
  unlink("alias-dir/link.db");
  tl_start(c, "alias", 0, NULL);
  tl_expect(c, "POST", "/v1/do", NULL, CREATE, 200, NULL);
  assert_int_equal(symlink("alias.db", "alias-link.db"), 0);
  assert_int_equal(symlink("../alias.db", "alias-dir/link.db"), 0);
  snprintf(want, sizeof want, "pid %ld", (long)c->pid);
  const char *const names[] = {"alias-link.db", "alias-dir/../alias.db", "./alias.db", "alias-dir/link.db"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    int rc = run_refused(TL_ARGS("--db", names[i], "--listen", "127.0.0.1:0"), out, sizeof out);
    if (rc != 1 || strstr(out, "already served by another lithd") == NULL || strstr(out, want) == NULL ||
        strstr(out, "/alias.db-lithd.lock") == NULL)
      print_error("--db %s: exit %d (want 1, naming %s), output: %s\n", names[i], rc, want, out);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "already served by another lithd"));
    assert_non_null(strstr(out, want));
    assert_non_null(strstr(out, "/alias.db-lithd.lock"));
  }
  /* Two names for one file in one lithd: given twice. */
  int rc = run_refused(
      TL_ARGS("--db", "a=alias-x.db", "--db", "b=alias-dir/../alias-x.db", "--listen", "127.0.0.1:0"), out,
      sizeof out);
  if (rc != 1 || strstr(out, "is given twice") == NULL)
    print_error("two names for alias-x.db: exit %d, output: %s\n", rc, out);
  assert_int_equal(rc, 1);
  assert_non_null(strstr(out, "is given twice"));
  tl_expect(c, "POST", "/v1/query", NULL, COUNT, 200, "\"rows\":[[0]]");
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);

  /* A link to a database not made yet: the first lithd locks by the name
   * the link gives, which is the name the second one uses. */
  tl_remove_db("alias-new.db");
  unlink("alias-new-link.db");
  assert_int_equal(symlink("alias-new.db", "alias-new-link.db"), 0);
  tl_start(c, "alias-unused", TL_NO_DB, TL_ARGS("--db", "alias-new-link.db"));
  tl_expect(c, "POST", "/v1/do", NULL, CREATE, 200, NULL);
  snprintf(want, sizeof want, "pid %ld", (long)c->pid);
  rc = run_refused(TL_ARGS("--db", "alias-new.db", "--listen", "127.0.0.1:0"), out, sizeof out);
  if (rc != 1 || strstr(out, want) == NULL)
    print_error("--db alias-new.db: exit %d (want 1, naming %s), output: %s\n", rc, want, out);
  assert_int_equal(rc, 1);
  assert_non_null(strstr(out, want));
  assert_non_null(strstr(out, "/alias-new.db-lithd.lock"));
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  assert_int_equal(tl_sql_int("alias-new.db", "SELECT count(*) FROM t"), 0);
}

static void test_batch_each_command_own_outcome(void **state) {
  struct tl_child *c = *state;
  struct tl_resp r = {0, NULL, NULL};
  const char *first, *second, *third;

  tl_start(c, "batch", 0, NULL);
  tl_expect(c, "POST", "/v1/do", NULL, CREATE, 200, NULL);
  tl_expect(c, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"INSERT INTO t VALUES(1, 'old')\"}]}", 200,
            NULL);
  tl_http(c, "POST", "/v1/batch", NULL,
          "{\"commands\":["
          "{\"statements\":[{\"sql\":\"INSERT INTO t VALUES(?, ?)\",\"params\":[10, \"a\"]},"
          "{\"sql\":\"INSERT INTO t VALUES(11, 'b') RETURNING id\"}]},"
          "{\"statements\":[{\"sql\":\"INSERT INTO t VALUES(20, 'c')\"},"
          "{\"sql\":\"INSERT INTO t VALUES(1, 'dup')\"}]},"
          "{\"statements\":[{\"sql\":\"UPDATE t SET v = 'new' WHERE id = 1\"}]}]}",
          &r);
  if (r.status != 200)
    print_error("batch -> %d %s\n", r.status, r.body);
  assert_int_equal(r.status, 200);
  /* Three entries, in the request's order. */
  first = strstr(r.body, "{\"results\":[{\"results\":[{\"changes\":1,\"last_insert_rowid\":10,");
  assert_ptr_equal(first, r.body);
  assert_non_null(strstr(r.body, "\"columns\":[\"id\"],\"rows\":[[11]]}]}"));
  second = strstr(r.body, "},{\"error\":{\"code\":\"constraint\"");
  assert_non_null(second);
  assert_non_null(strstr(second, "\"statement\":1"));
  third = strstr(second, "},{\"results\":[{\"changes\":1,");
  assert_non_null(third);
  assert_non_null(strstr(third, "]}]}"));
  assert_null(strstr(third + 1, "\"error\""));
  tl_resp_free(&r);

  /* First and third kept, nothing of the second (not even its statement 0). */
  tl_expect(c, "POST", "/v1/query", NULL, "{\"statements\":[{\"sql\":\"SELECT id, v FROM t ORDER BY id\"}]}",
            200, "\"rows\":[[1,\"new\"],[10,\"a\"],[11,\"b\"]]}");
  tl_expect(c, "GET", "/v1/stats", NULL, NULL, 200, "\"failed\":1");

  /* A bad command refuses the whole request: nothing runs. */
  tl_expect(c, "POST", "/v1/batch", NULL,
            "{\"commands\":[{\"statements\":[{\"sql\":\"INSERT INTO t VALUES(30, 'x')\"}]},"
            "{\"statement\":[]}]}",
            400, "command 1");
  tl_expect(c, "POST", "/v1/batch", NULL, "{\"commands\":[]}", 400, "\"code\":\"bad_request\"");
  tl_expect(c, "POST", "/v1/batch", NULL, "{\"commands\":{}}", 400, "\"code\":\"bad_request\"");
  tl_expect(c, "POST", "/v1/batch", NULL, "[", 400, "\"code\":\"bad_request\"");
  tl_expect(c, "POST", "/v1/query", NULL, COUNT, 200, "\"rows\":[[3]]");
}

/* Check histogram `name`: HELP and TYPE lines, buckets cumulative (never
 * decreasing), the last one le="+Inf" and equal to _count. Returns _count. */
static uint64_t check_histogram(const char *body, const char *name) {
  char want[128];
  const char *p = body;
  uint64_t prev = 0, count;
  int buckets = 0, inf = 0;

  snprintf(want, sizeof want, "# HELP %s ", name);
  assert_non_null(strstr(body, want));
  snprintf(want, sizeof want, "\n# TYPE %s histogram\n", name);
  assert_non_null(strstr(body, want));
  snprintf(want, sizeof want, "\n%s_bucket{db=\"main\",le=\"", name);
  while ((p = strstr(p, want)) != NULL) {
    const char *le = p + strlen(want);
    const char *sp = strstr(le, "} ");
    uint64_t v;
    assert_non_null(sp);
    assert_false(inf); /* +Inf is the last bucket */
    v = strtoull(sp + 2, NULL, 10);
    assert_true(v >= prev);
    prev = v;
    buckets++;
    if (strncmp(le, "+Inf\"", 5) == 0)
      inf = 1;
    p = sp;
  }
  assert_true(buckets >= 2);
  assert_true(inf);
  snprintf(want, sizeof want, "%s_count{db=\"main\"}", name);
  count = tl_metric(body, want);
  assert_int_equal(count, prev);
  snprintf(want, sizeof want, "\n%s_sum{db=\"main\"} ", name);
  assert_non_null(strstr(body, want));
  return count;
}

static void test_metrics_prometheus(void **state) {
  struct tl_child *c = *state;
  struct tl_resp st = {0, NULL, NULL}, m = {0, NULL, NULL};
  uint64_t commands;

  tl_start(c, "metrics", 0, NULL);
  tl_expect(c, "POST", "/v1/do", NULL, CREATE, 200, NULL);
  tl_expect(c, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"INSERT INTO t VALUES(1, 1)\"}]}", 200,
            NULL);
  tl_expect(c, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"INSERT INTO t VALUES(1, 2)\"}]}", 409,
            NULL);
  tl_expect(c, "POST", "/v1/batch", NULL,
            "{\"commands\":[{\"statements\":[{\"sql\":\"INSERT INTO t VALUES(2, 2)\"}]},"
            "{\"statements\":[{\"sql\":\"INSERT INTO t VALUES(3, 3)\"}]}]}",
            200, NULL);
  tl_http(c, "GET", "/v1/stats", NULL, NULL, &st);
  assert_int_equal(st.status, 200);
  tl_http(c, "GET", "/metrics", NULL, NULL, &m);
  assert_int_equal(m.status, 200);
  assert_non_null(strstr(m.head, "text/plain; version=0.0.4"));

  commands = tl_json_u64(st.body, "commands");
  assert_int_equal(commands, 5);
  assert_int_equal(tl_metric(m.body, "lith_commands_total{db=\"main\"}"), commands);
  assert_int_equal(tl_metric(m.body, "lith_batches_total{db=\"main\"}"), tl_json_u64(st.body, "batches"));
  assert_int_equal(tl_metric(m.body, "lith_commands_failed_total{db=\"main\"}"),
                   tl_json_u64(st.body, "failed"));
  assert_int_equal(tl_metric(m.body, "lith_commands_failed_total{db=\"main\"}"), 1);
  assert_int_equal(tl_metric(m.body, "lith_queue_depth{db=\"main\"}"), tl_json_u64(st.body, "queue_depth"));
  assert_int_equal(tl_metric(m.body, "lith_wal_pages{db=\"main\"}"), tl_json_u64(st.body, "wal_pages"));
  assert_int_equal(tl_metric(m.body, "lith_checkpoints_total{db=\"main\"}"),
                   tl_json_u64(st.body, "checkpoints"));
  assert_non_null(strstr(m.body, "# HELP lith_commands_total "));
  assert_non_null(strstr(m.body, "\n# TYPE lith_commands_total counter\n"));
  assert_non_null(strstr(m.body, "\n# TYPE lith_queue_depth gauge\n"));
  assert_non_null(strstr(m.body, "\n# TYPE lithd_http_responses_total counter\n"));

  /* Histograms: one batch-size count per batch; the smallest bounds. */
  assert_int_equal(check_histogram(m.body, "lith_batch_size"), tl_json_u64(st.body, "batches"));
  assert_true(tl_metric(m.body, "lith_batch_size_bucket{db=\"main\",le=\"1\"}") >= 1);
  assert_int_equal(tl_metric(m.body, "lith_batch_size_bucket{db=\"main\",le=\"3\"}"),
                   tl_json_u64(st.body, "batches")); /* no batch above 3 commands here */
  assert_true(check_histogram(m.body, "lith_transaction_seconds") >= 1);
  assert_true(check_histogram(m.body, "lith_queue_wait_seconds") >= commands);

  /* HTTP statuses by route: four 200s (create, insert, batch, stats) and
   * one 409 so far (the /metrics request itself is not finished while it is
   * answered). */
  assert_int_equal(tl_metric(m.body, "lithd_http_responses_total{route=\"/v1/do\",code=\"409\"}"), 1);
  assert_int_equal(tl_metric(m.body, "lithd_http_responses_total{route=\"/v1/do\",code=\"200\"}"), 2);
  assert_int_equal(tl_metric(m.body, "lithd_http_responses_total{route=\"/v1/batch\",code=\"200\"}"), 1);
  assert_int_equal(tl_metric(m.body, "lithd_http_responses_total{route=\"/v1/stats\",code=\"200\"}"), 1);
  tl_resp_free(&st);
  tl_resp_free(&m);

  tl_expect(c, "GET", "/metrics", NULL, NULL, 200,
            "lithd_http_responses_total{route=\"/v1/do\",code=\"409\"} 1\n");
}

/* Issue 10 item 6: a request whose body length two readers could take
 * differently (two Content-Length, or one with Transfer-Encoding) is refused
 * and its connection closed, so the rest of its body (here an INSERT, what a
 * proxy in front may have taken for part of it) never runs as a request. */
#define SMUGGLED_SQL "{\"statements\":[{\"sql\":\"INSERT INTO t(v) VALUES('smuggled')\"}]}"

/* Send s whole and read until the server closes (EOF or reset) into buf. */
static void raw_exchange(const struct tl_child *c, const char *s, char *buf, size_t cap) {
  int fd = tl_connect(c);
  size_t len = strlen(s), got = 0;
  assert_true(fd >= 0);
  assert_int_equal(send(fd, s, len, MSG_NOSIGNAL), (ssize_t)len);
  for (;;) {
    struct pollfd p = {fd, POLLIN, 0};
    ssize_t n;
    assert_int_equal(poll(&p, 1, TL_TIMEOUT_MS), 1);
    assert_true(got < cap - 1);
    n = recv(fd, buf + got, cap - 1 - got, 0);
    if (n <= 0)
      break; /* closed; a reset comes after what was sent */
    got += (size_t)n;
  }
  buf[got] = '\0';
  close(fd);
}

static void test_smuggled_insert_refused(void **state) {
  struct tl_child *c = *state;
  char inner[512], req[1024], got[8192];
  size_t ilen;
  const char *const fmts[] = {
      "POST /v1/do HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}%s",
      "POST /v1/do HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: 2\r\nContent-Length: %zu\r\n\r\n{}%s",
      "POST /v1/do HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: %zu\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n%s",
      /* with an h2c upgrade asked: lithd takes none (h2o would upgrade before the check) */
      "POST /v1/do HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
      "HTTP2-Settings: AAMAAABkAAQAAP__\r\nContent-Type: application/json\r\n"
      "Content-Length: 2\r\nContent-Length: %zu\r\n\r\n{}%s",
  };
  const char *const why[] = {"more than one Content-Length", "more than one Content-Length",
                             "Content-Length together with Transfer-Encoding",
                             "more than one Content-Length"};

  tl_start(c, "smuggle", 0, NULL);
  tl_expect(c, "POST", "/v1/do", NULL, CREATE, 200, NULL);
  ilen = (size_t)snprintf(inner, sizeof inner,
                          "POST /v1/do HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                          strlen(SMUGGLED_SQL), SMUGGLED_SQL);
  for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
    if (i == 0)
      snprintf(req, sizeof req, fmts[i], inner);
    else
      snprintf(req, sizeof req, fmts[i], (i == 2 ? 12 : 2) + ilen, inner); /* what a proxy reads */
    raw_exchange(c, req, got, sizeof got);
    if (strncmp(got, "HTTP/1.1 400 ", 13) != 0 || strstr(got, why[i]) == NULL)
      print_error("case %zu: %s\n", i, got);
    assert_int_equal(strncmp(got, "HTTP/1.1 400 ", 13), 0);
    assert_non_null(strstr(got, why[i]));
    assert_null(strstr(got + 1, "HTTP/1.1 ")); /* one answer only */
  }
  tl_expect(c, "POST", "/v1/query", NULL, COUNT, 200, "\"rows\":[[0]]");

  /* the same INSERT pipelined behind a well-framed one does run: twice */
  snprintf(req, sizeof req,
           "%sPOST /v1/do HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
           inner, strlen(SMUGGLED_SQL), SMUGGLED_SQL);
  raw_exchange(c, req, got, sizeof got);
  assert_int_equal(strncmp(got, "HTTP/1.1 200 ", 13), 0);
  assert_non_null(strstr(got + 1, "HTTP/1.1 200 "));
  tl_expect(c, "POST", "/v1/query", NULL, COUNT, 200, "\"rows\":[[2]]");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_healthz, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_do_then_query_exact_int64, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_failing_statement_409_nothing_kept, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_bad_requests, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_token, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_refuses_public_listen_without_token, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_sigterm_exit_0_data_in_file, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_client_gone_command_stands, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_sigterm_answers_in_flight, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_max_body_413, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_slow_query_does_not_block_loop, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_second_lithd_same_db_refused, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_second_lithd_other_name_refused, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_batch_each_command_own_outcome, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_metrics_prometheus, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_smuggled_insert_refused, tl_setup, tl_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
