/*
 * test_lithd_multidb — several databases in one lithd (issue 13, first
 * part), end to end:
 *   - the routes /v1/db/NAME/... of each database, and a write through
 *     /v1/db/a/do lands in file a, never in b;
 *   - an unknown NAME is a JSON 404 naming the databases; the unprefixed
 *     routes refuse (404, naming the databases) without --default and serve
 *     the default with it; one database keeps them, whatever its name;
 *   - /metrics carries each database's series under db="NAME"; the WAL
 *     watch of --checkpoint external warns for the database whose WAL grows;
 *   - --schema and --commands per database (NAME=FILE) and for all (FILE);
 *   - isolation: while database a's writer is held by a 3 s command, its
 *     queue flooded past --max-queue, and then its write lock taken by
 *     another process, database b's writes answer within their usual time
 *     (their p99 alone measured first); while a's slow reads fill a's
 *     readers, b's reads do too (libuv's pool is shared: each database may
 *     use only its readers' share);
 *   - SIGTERM drains every database's writer (every answered command is in
 *     its file), and a database that cannot be opened stops lithd with a
 *     message naming it.
 *
 * Timing bounds are wide (a loaded 2-core machine, the sanitizers): b's p99
 * while a is held must beat max(10 x its p99 alone, 250 ms), and each b
 * request a third of a's 3 s hold (what waiting for a would cost is the
 * whole hold; a's command takes one of the two cores, and other work on the
 * machine preempts a request now and then: 100-400 ms seen once per run
 * under a load average of 12, which a per-request bound of 250 ms failed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "child.h"

#define Q(sql) "{\"statements\":[{\"sql\":\"" sql "\"}]}"
#define CREATE Q("CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, v TEXT)")
/* Never ends by itself: --max-run-ms ends it (422). */
#define FOREVER Q("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c")
#define HOLD_MS 3000

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  assert_int_equal(fclose(f), 0);
}

static void start_two(struct tl_child *c, const char *name, const char *const *more) {
  const char *args[32];
  size_t n = 0;
  char a[64], b[64];
  snprintf(a, sizeof a, "a=%s-a.db", name);
  snprintf(b, sizeof b, "b=%s-b.db", name);
  tl_remove_db(a + 2);
  tl_remove_db(b + 2);
  args[n++] = "--db";
  args[n++] = a;
  args[n++] = "--db";
  args[n++] = b;
  while (more != NULL && *more != NULL && n < 30)
    args[n++] = *more++;
  args[n] = NULL;
  tl_start(c, name, TL_NO_DB, args);
}

/* ---- Routes ------------------------------------------------------------- */

static void test_routes(void **state) {
  struct tl_child *c = *state;
  struct tl_resp r = {0, NULL, NULL};

  mkdir("routes-backups", 0700);
  start_two(c, "routes", TL_ARGS("--backup-dir", "routes-backups"));
  assert_non_null(strstr(c->line, "(dbs a=routes-a.db b=routes-b.db, default none, synchronous normal"));
  assert_non_null(strstr(c->line, "/v1/db/a/do --json"));

  /* a's table and row in file a; b untouched */
  tl_expect(c, "POST", "/v1/db/a/do", NULL, CREATE, 200, NULL);
  tl_expect(c, "POST", "/v1/db/a/do", NULL, Q("INSERT INTO t(id, v) VALUES (1, 'in a')"), 200,
            "\"changes\":1");
  tl_expect(c, "POST", "/v1/db/a/batch", NULL,
            "{\"commands\":[{\"statements\":[{\"sql\":\"INSERT INTO t(id, v) VALUES (2, 'in a')\"}]}]}", 200,
            "\"changes\":1");
  tl_expect(c, "POST", "/v1/db/a/query", NULL, Q("SELECT count(*) FROM t"), 200, "[[2]]");
  tl_expect(c, "POST", "/v1/db/b/query", NULL, Q("SELECT count(*) FROM t"), 400, "no such table");
  assert_int_equal(tl_sql_int("routes-a.db", "SELECT count(*) FROM t WHERE v = 'in a'"), 2);
  assert_int_equal(tl_sql_int("routes-b.db", "SELECT count(*) FROM sqlite_master"), 0);
  /* b's own table, its own rows */
  tl_expect(c, "POST", "/v1/db/b/do", NULL, CREATE, 200, NULL);
  tl_expect(c, "POST", "/v1/db/b/do", NULL, Q("INSERT INTO t(id, v) VALUES (7, 'in b')"), 200, NULL);
  assert_int_equal(tl_sql_int("routes-b.db", "SELECT count(*) FROM t WHERE v = 'in b'"), 1);
  assert_int_equal(tl_sql_int("routes-a.db", "SELECT count(*) FROM t WHERE v = 'in b'"), 0);
  /* stats, commands, backups: each its database's */
  tl_http(c, "GET", "/v1/db/a/stats", NULL, NULL, &r);
  assert_int_equal(r.status, 200);
  assert_int_equal(tl_json_u64(r.body, "commands"), 3);
  tl_resp_free(&r);
  tl_http(c, "GET", "/v1/db/b/stats", NULL, NULL, &r);
  assert_int_equal(tl_json_u64(r.body, "commands"), 2);
  tl_resp_free(&r);
  tl_expect(c, "GET", "/v1/db/b/commands", NULL, NULL, 200, "{\"commands\":[]}");
  tl_expect(c, "POST", "/v1/db/b/backup", NULL, "{\"dest\":\"b.bak\"}", 200, NULL);
  assert_int_equal(tl_sql_int("routes-backups/b.bak", "SELECT count(*) FROM t WHERE v = 'in b'"), 1);
  tl_http(c, "GET", "/v1/db/a/backup?format=sql", NULL, NULL, &r);
  assert_int_equal(r.status, 200);
  assert_non_null(strstr(r.body, "'in a'"));
  assert_null(strstr(r.body, "'in b'"));
  tl_resp_free(&r);

  /* names and routes nobody has */
  tl_expect(c, "POST", "/v1/db/c/do", NULL, CREATE, 404,
            "no database \\\"c\\\" here; this lithd serves: a, b");
  tl_expect(c, "GET", "/v1/db/nope/stats", NULL, NULL, 404, "\"code\":\"not_found\"");
  tl_expect(c, "GET", "/v1/db/a/nothing", NULL, NULL, 404, "a database's routes");
  tl_http(c, "GET", "/v1/db/a/do", NULL, NULL, &r);
  assert_int_equal(r.status, 405);
  assert_non_null(strstr(r.head, "allow: POST"));
  tl_resp_free(&r);
  /* an encoded slash never splits a segment into two (http/router.c):
   * decoded, the first would be a's /do */
  tl_expect(c, "POST", "/v1/db/a%2Fdo", NULL, Q("INSERT INTO t(id, v) VALUES (3, 'in a')"), 404,
            "encoded slash (%2F)");
  tl_expect(c, "POST", "/v1/db/a%2Fb/do", NULL, CREATE, 404, "encoded slash (%2F)");
  tl_expect(c, "POST", "/v1/db/a/commands/x%2Fy", NULL, "{}", 404, "encoded slash (%2F)");
  assert_int_equal(tl_sql_int("routes-a.db", "SELECT count(*) FROM t"), 2);
  /* the unprefixed routes: no default among two */
  tl_expect(c, "POST", "/v1/do", NULL, CREATE, 404, "several databases (a, b) and none is the default");
  tl_expect(c, "GET", "/v1/stats", NULL, NULL, 404, "/v1/db/NAME/stats");
  tl_expect(c, "GET", "/healthz", NULL, NULL, 200, "{\"ok\":true}");

  /* /metrics: each database's series under its name */
  tl_http(c, "GET", "/metrics", NULL, NULL, &r);
  assert_int_equal(r.status, 200);
  assert_int_equal(tl_metric(r.body, "lith_commands_total{db=\"a\"}"), 3);
  assert_int_equal(tl_metric(r.body, "lith_commands_total{db=\"b\"}"), 2);
  assert_int_equal(tl_metric(r.body, "lithd_read_seconds_count{db=\"a\"}"), 1);
  assert_int_equal(tl_metric(r.body, "lithd_read_seconds_count{db=\"b\"}"), 1);
  assert_int_equal(tl_metric(r.body, "lithd_http_responses_total{route=\"/v1/db/a/do\",code=\"200\"}"), 2);
  assert_int_equal(tl_metric(r.body, "lithd_http_responses_total{route=\"/v1/db/\",code=\"404\"}"), 3);
  {
    /* one HELP line per metric, however many databases */
    const char *h = strstr(r.body, "# HELP lith_commands_total ");
    assert_non_null(h);
    assert_null(strstr(h + 1, "# HELP lith_commands_total "));
  }
  tl_resp_free(&r);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

static void test_default(void **state) {
  struct tl_child *c = *state;
  start_two(c, "dflt", TL_ARGS("--default", "b"));
  assert_non_null(strstr(c->line, "(dbs a=dflt-a.db b=dflt-b.db, default b, synchronous"));
  assert_non_null(strstr(c->line, "/v1/do --json"));
  tl_expect(c, "POST", "/v1/do", NULL, CREATE, 200, NULL);
  tl_expect(c, "POST", "/v1/do", NULL, Q("INSERT INTO t(v) VALUES ('default')"), 200, NULL);
  tl_expect(c, "POST", "/v1/db/b/query", NULL, Q("SELECT v FROM t"), 200, "[[\"default\"]]");
  assert_int_equal(tl_sql_int("dflt-b.db", "SELECT count(*) FROM t"), 1);
  assert_int_equal(tl_sql_int("dflt-a.db", "SELECT count(*) FROM sqlite_master"), 0);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* One database keeps the unprefixed routes, whatever its name, and has its
 * prefixed ones too; a plain --db PATH is "main". */
static void test_one_database(void **state) {
  struct tl_child *c = *state;
  struct tl_resp r = {0, NULL, NULL};

  tl_remove_db("solo.db");
  tl_start(c, "solo", TL_NO_DB, TL_ARGS("--db", "only=solo.db"));
  assert_non_null(strstr(c->line, "(db solo.db, synchronous"));
  tl_expect(c, "POST", "/v1/db/only/do", NULL, CREATE, 200, NULL);
  tl_expect(c, "POST", "/v1/do", NULL, Q("INSERT INTO t(v) VALUES ('x')"), 200, NULL);
  tl_expect(c, "POST", "/v1/db/only/query", NULL, Q("SELECT count(*) FROM t"), 200, "[[1]]");
  tl_http(c, "GET", "/metrics", NULL, NULL, &r);
  assert_int_equal(tl_metric(r.body, "lith_commands_total{db=\"only\"}"), 2);
  tl_resp_free(&r);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);

  tl_start(c, "plain", 0, NULL);
  tl_expect(c, "POST", "/v1/db/main/do", NULL, CREATE, 200, NULL);
  tl_expect(c, "POST", "/v1/query", NULL, Q("SELECT count(*) FROM t"), 200, "[[0]]");
  tl_expect(c, "POST", "/v1/db/other/do", NULL, CREATE, 404, "this lithd serves: main");
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* --schema FILE for every database, --schema b=FILE instead for b,
 * --commands a=FILE for a only. */
static void test_schema_and_commands_per_database(void **state) {
  struct tl_child *c = *state;
  write_file("shared.sql", "CREATE TABLE shared(id INTEGER PRIMARY KEY, v TEXT);\n");
  write_file("own-b.sql",
             "CREATE TABLE own_b(id INTEGER PRIMARY KEY);\n-- step 2\nINSERT INTO own_b VALUES (42);\n");
  write_file("cmds-a.sql", "-- name: put\nINSERT INTO shared(v) VALUES (:v) RETURNING id;\n");

  start_two(c, "perdb",
            TL_ARGS("--schema", "shared.sql", "--schema", "b=own-b.sql", "--commands", "a=cmds-a.sql"));
  assert_int_equal(tl_sql_int("perdb-a.db", "SELECT count(*) FROM sqlite_master WHERE name = 'shared'"), 1);
  assert_int_equal(tl_sql_int("perdb-a.db", "PRAGMA user_version"), 1);
  assert_int_equal(tl_sql_int("perdb-b.db", "SELECT count(*) FROM sqlite_master WHERE name = 'shared'"), 0);
  assert_int_equal(tl_sql_int("perdb-b.db", "SELECT id FROM own_b"), 42);
  assert_int_equal(tl_sql_int("perdb-b.db", "PRAGMA user_version"), 2);
  tl_expect(c, "GET", "/v1/db/a/commands", NULL, NULL, 200, "\"name\":\"put\"");
  tl_expect(c, "GET", "/v1/db/b/commands", NULL, NULL, 200, "{\"commands\":[]}");
  tl_expect(c, "POST", "/v1/db/a/commands/put", NULL, "{\"params\":{\"v\":\"named\"}}", 200, "[[1]]");
  tl_expect(c, "POST", "/v1/db/b/commands/put", NULL, "{\"params\":{\"v\":\"named\"}}", 404, NULL);
  assert_int_equal(tl_sql_int("perdb-a.db", "SELECT count(*) FROM shared WHERE v = 'named'"), 1);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);

  /* --only-named needs commands for every database: b has none */
  {
    char out[4096];
    int rc = tl_run(TL_ARGS("--db", "a=perdb-a.db", "--db", "b=perdb-b.db", "--commands", "a=cmds-a.sql",
                            "--only-named", "--listen", "127.0.0.1:0"),
                    out, sizeof out);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "nothing could write database b"));
  }
  /* the same commands for both (a plain --commands FILE): each runs them
   * on its own file, and --only-named points at its own route */
  start_two(c, "named", TL_ARGS("--schema", "shared.sql", "--commands", "cmds-a.sql", "--only-named"));
  tl_expect(c, "POST", "/v1/db/b/do", NULL, Q("INSERT INTO shared(v) VALUES ('raw')"), 403,
            "POST /v1/db/b/commands/NAME");
  tl_expect(c, "POST", "/v1/db/b/commands/put", NULL, "{\"params\":{\"v\":\"in b\"}}", 200, "[[1]]");
  tl_expect(c, "POST", "/v1/db/a/commands/put", NULL, "{\"params\":{\"v\":\"in a\"}}", 200, "[[1]]");
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  assert_int_equal(tl_sql_int("named-b.db", "SELECT count(*) FROM shared WHERE v = 'in b'"), 1);
  assert_int_equal(tl_sql_int("named-a.db", "SELECT count(*) FROM shared WHERE v = 'in b'"), 0);
}

/* ---- Isolation ---------------------------------------------------------- */

/* A client thread: one request, its status and when it ended. */
struct one {
  const struct tl_child *c;
  const char *path, *body;
  int status;     /* -1: no answer */
  int64_t end_ms; /* 0 until it ended; atomic (the test's thread looks) */
};

static void *one_main(void *arg) {
  struct one *o = arg;
  struct tl_conn k;
  struct tl_resp r;
  tl_conn_init(&k, o->c);
  o->status = -1;
  if (tl_conn_request(&k, "POST", o->path, NULL, o->body, &r, 30000) == TL_OK) {
    o->status = r.status;
    tl_resp_free(&r);
  }
  tl_conn_close(&k);
  __atomic_store_n(&o->end_ms, now_ms(), __ATOMIC_SEQ_CST);
  return NULL;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* b's /v1/do, n times on one connection: the latencies (us), sorted. */
static void time_b(struct tl_conn *k, int n, int *id, int64_t *us) {
  char body[160];
  for (int i = 0; i < n; i++) {
    struct tl_resp r;
    snprintf(body, sizeof body, Q("INSERT INTO t(id, v) VALUES (%d, 'b')"), ++*id);
    int64_t t0 = now_us();
    assert_int_equal(tl_conn_request(k, "POST", "/v1/db/b/do", NULL, body, &r, TL_TIMEOUT_MS), TL_OK);
    us[i] = now_us() - t0;
    assert_int_equal(r.status, 200);
    tl_resp_free(&r);
  }
}

#define DURING_MAX 100000
/* No b request may take this long while a is held: a third of a's hold, so
 * a request that waited for a would show (the p99 bound is the tight one;
 * this one lets a loaded machine preempt a request now and then). */
#define EACH_MAX_US (HOLD_MS * 1000 / 3)

/* b's requests while `until_ms` has not come, one every millisecond or so:
 * their p99 within p99_bound_us, each within EACH_MAX_US; returns how many
 * ran, with their p99 and the slowest. */
static int b_during(struct tl_conn *k, int64_t until_ms, int *id, int64_t p99_bound_us, int64_t *p99,
                    int64_t *worst) {
  static int64_t us[DURING_MAX];
  char body[160];
  int n = 0;
  while (now_ms() < until_ms && n < DURING_MAX) {
    struct tl_resp r;
    snprintf(body, sizeof body, Q("INSERT INTO t(id, v) VALUES (%d, 'b')"), ++*id);
    int64_t t0 = now_us();
    assert_int_equal(tl_conn_request(k, "POST", "/v1/db/b/do", NULL, body, &r, TL_TIMEOUT_MS), TL_OK);
    us[n] = now_us() - t0;
    assert_int_equal(r.status, 200);
    tl_resp_free(&r);
    if (us[n] > EACH_MAX_US)
      fail_msg("a request to b took %lld us while a was held (at most %d us)", (long long)us[n], EACH_MAX_US);
    n++;
    usleep(1000); /* a steady client, not a flood: b's WAL stays small */
  }
  assert_true(n >= 20);
  qsort(us, (size_t)n, sizeof *us, cmp_i64);
  *p99 = us[n * 99 / 100];
  *worst = n > 0 ? us[n - 1] : 0;
  if (*p99 > p99_bound_us)
    fail_msg("b's p99 while a was held: %lld us (bound %lld us)", (long long)*p99, (long long)p99_bound_us);
  return n;
}

#define BASELINE 200
#define FLOOD 12

/* A large answer of a is encoded off the loop and sent in pieces: three
 * 96 MB answers (16 rows of a million NULs, six JSON bytes each) going out
 * at once used to hold the loop 1.3-4.3 s, every request of b waiting (and
 * encoded on the loop again, planted: a read of b waited past its 10 s);
 * now b's slowest read stays within ANSWER_EACH_MAX_MS (seen: 72-102 ms).
 * A busy machine can keep one read off the CPU longer (854 ms beside two
 * CPU hogs and other builds): the three answers go out again, up to
 * ANSWER_ROUNDS times, until a round's slowest read is within the bound. A
 * loop held by the answers holds it in every round. */
#define BIG_ANSWER                                                                               \
  "{\"statements\":[{\"sql\":\"WITH RECURSIVE c(x) AS (VALUES(1) UNION ALL SELECT x + 1 FROM c " \
  "WHERE x < %d) SELECT CAST(zeroblob(1000000) AS TEXT) FROM c\"}]}"
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ANSWER_EACH_MAX_MS 2000 /* seen under TSan: 664 ms */
#else
#define ANSWER_EACH_MAX_MS 600
#endif
#define ANSWER_ROUNDS 3

static void test_large_answers_do_not_hold_the_loop(void **state) {
  struct tl_child *c = *state;
  struct tl_conn k;
  struct one big[3];
  pthread_t th[3];
  int64_t best = INT64_MAX; /* the least of the rounds' slowest reads */
  char body[256];
  /* 16 rows; fewer under LITH_TEST_SCALE (a sanitizer encodes 96 MB for
   * seconds on a pool thread that b's reads share) */
  snprintf(body, sizeof body, BIG_ANSWER, tl_scaled(16));
  start_two(c, "big", NULL);
  tl_conn_init(&k, c);
  for (int round = 1; round <= ANSWER_ROUNDS && best >= ANSWER_EACH_MAX_MS; round++) {
    int64_t worst = 0;
    int n = 0;
    for (int i = 0; i < 3; i++) {
      big[i] = (struct one){.c = c, .path = "/v1/db/a/query", .body = body};
      assert_int_equal(pthread_create(&th[i], NULL, one_main, &big[i]), 0);
    }
    for (;;) {
      int done = 0;
      for (int i = 0; i < 3; i++)
        done += __atomic_load_n(&big[i].end_ms, __ATOMIC_SEQ_CST) != 0;
      if (done == 3 && n >= 20)
        break;
      struct tl_resp r;
      int64_t t0 = now_ms();
      assert_int_equal(tl_conn_request(&k, "POST", "/v1/db/b/query", NULL, Q("SELECT 1"), &r, TL_TIMEOUT_MS),
                       TL_OK);
      int64_t ms = now_ms() - t0;
      assert_int_equal(r.status, 200);
      tl_resp_free(&r);
      worst = ms > worst ? ms : worst;
      n++;
      usleep(10000);
    }
    for (int i = 0; i < 3; i++) {
      pthread_join(th[i], NULL);
      assert_int_equal(big[i].status, 200);
    }
    print_message(
        "round %d: three %d MB answers of a: b answered %d reads meanwhile, the slowest in %lld ms\n", round,
        6 * tl_scaled(16), n, (long long)worst);
    best = worst < best ? worst : best;
  }
  tl_conn_close(&k);
  assert_true(best < ANSWER_EACH_MAX_MS);
}

static void test_isolation(void **state) {
  struct tl_child *c = *state;
  struct tl_conn k;
  int64_t us[BASELINE], p99, bound, worst, held_p99, t0;
  struct one slow, flood[FLOOD];
  pthread_t slow_th, flood_th[FLOOD];
  char hold[16];
  int id = 0, n;

  snprintf(hold, sizeof hold, "%d", HOLD_MS);
  /* a's queue tiny and its wait short, so a flood of a is refused (503)
   * while its writer is held */
  /* no checkpoint during the test: its fsyncs are b's own tail (100-200 ms
   * seen on a loaded disk), not a's doing */
  start_two(c, "iso",
            TL_ARGS("--max-run-ms", hold, "--max-queue", "2", "--queue-wait-ms", "500", "--checkpoint-pages",
                    "1000000"));
  tl_expect(c, "POST", "/v1/db/a/do", NULL, CREATE, 200, NULL);
  tl_expect(c, "POST", "/v1/db/b/do", NULL, CREATE, 200, NULL);
  tl_conn_init(&k, c);

  /* b alone: its usual p99 */
  time_b(&k, 20, &id, us); /* warm */
  time_b(&k, BASELINE, &id, us);
  qsort(us, BASELINE, sizeof *us, cmp_i64);
  p99 = us[BASELINE * 99 / 100];
  bound = 10 * p99 > 250000 ? 10 * p99 : 250000;
  /* meaningful: far below a's hold, whatever b's p99 alone (89 ms beside
   * two CPU hogs and other builds, where 10 x p99 was past this and the
   * test gave up) */
  if (bound > HOLD_MS * 1000 / 4)
    bound = HOLD_MS * 1000 / 4;
  print_message("b alone: p50 %lld us, p99 %lld us; bound while a is held: %lld us\n",
                (long long)us[BASELINE / 2], (long long)p99, (long long)bound);

  /* 1. a's writer held by a command that runs until --max-run-ms ends it,
   * and a's queue flooded past --max-queue behind it */
  slow = (struct one){c, "/v1/db/a/do", FOREVER, -1, 0};
  t0 = now_ms();
  assert_int_equal(pthread_create(&slow_th, NULL, one_main, &slow), 0);
  usleep(200 * 1000); /* it has reached the writer */
  for (int i = 0; i < FLOOD; i++) {
    flood[i] = (struct one){c, "/v1/db/a/do", Q("INSERT INTO t(v) VALUES ('flood')"), -1, 0};
    assert_int_equal(pthread_create(&flood_th[i], NULL, one_main, &flood[i]), 0);
  }
  n = b_during(&k, t0 + HOLD_MS - 500, &id, bound, &held_p99, &worst);
  int64_t b_end = now_ms();
  assert_int_equal(pthread_join(slow_th, NULL), 0);
  for (int i = 0; i < FLOOD; i++)
    assert_int_equal(pthread_join(flood_th[i], NULL), 0);
  print_message("a held %lld ms (status %d); b meanwhile: %d requests, p99 %lld us, slowest %lld us\n",
                (long long)(slow.end_ms - t0), slow.status, n, (long long)held_p99, (long long)worst);
  assert_int_equal(slow.status, 422); /* --max-run-ms ended it */
  assert_true(slow.end_ms - t0 >= HOLD_MS - 100);
  assert_true(b_end <= slow.end_ms); /* every b request above ran while a was held */
  {
    int refused = 0;
    for (int i = 0; i < FLOOD; i++) {
      assert_true(flood[i].status == 200 || flood[i].status == 503);
      refused += flood[i].status == 503;
    }
    print_message("a's flood: %d of %d refused with 503 (queue full)\n", refused, FLOOD);
    assert_true(refused >= 1); /* a really was overloaded */
  }
  assert_int_equal(tl_sql_int("iso-b.db", "SELECT count(*) FROM t"), id);

  /* 2. a's write lock held by another process's transaction: a's commands
   * wait on busy_timeout, b's do not */
  {
    sqlite3 *other = NULL;
    assert_int_equal(sqlite3_open("iso-a.db", &other), SQLITE_OK);
    assert_int_equal(sqlite3_exec(other, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    slow = (struct one){c, "/v1/db/a/do", Q("INSERT INTO t(v) VALUES ('after the lock')"), -1, 0};
    t0 = now_ms();
    assert_int_equal(pthread_create(&slow_th, NULL, one_main, &slow), 0);
    n = b_during(&k, t0 + 1500, &id, bound, &held_p99, &worst);
    print_message("a's lock held by another process 1500 ms; b meanwhile: %d requests, p99 %lld us, slowest "
                  "%lld us\n",
                  n, (long long)held_p99, (long long)worst);
    assert_int_equal(__atomic_load_n(&slow.end_ms, __ATOMIC_SEQ_CST), 0); /* a still waits */
    assert_int_equal(sqlite3_exec(other, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(other);
    assert_int_equal(pthread_join(slow_th, NULL), 0);
    assert_int_equal(slow.status, 200); /* then a went on */
  }
  tl_conn_close(&k);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* Reads: libuv's thread pool is the process's. With --readers 1 it has
 * 1 x 2 + 3 = 5 threads; four reads of a that run 1 s each would take
 * four of them (one reading, three waiting for a's one reader) if nothing
 * held them back, and b's reads would wait a second behind them. Each database sends
 * at most its readers' worth of reads to the pool; the rest wait on the
 * loop, in its own line. */
#define SLOW_READS 4

static void test_read_isolation(void **state) {
  struct tl_child *c = *state;
  struct tl_conn k;
  struct one slow[SLOW_READS];
  pthread_t th[SLOW_READS];
  static int64_t during[DURING_MAX];
  int64_t us[BASELINE], p99, bound, t0, worst = 0;
  int n = 0;

  unsetenv("UV_THREADPOOL_SIZE");
  start_two(c, "reads", TL_ARGS("--readers", "1", "--max-run-ms", "1000"));
  tl_expect(c, "POST", "/v1/db/b/do", NULL, CREATE, 200, NULL);
  tl_conn_init(&k, c);
  for (int i = 0; i < BASELINE; i++) {
    struct tl_resp r;
    int64_t s0 = now_us();
    assert_int_equal(
        tl_conn_request(&k, "POST", "/v1/db/b/query", NULL, Q("SELECT count(*) FROM t"), &r, TL_TIMEOUT_MS),
        TL_OK);
    us[i] = now_us() - s0;
    assert_int_equal(r.status, 200);
    tl_resp_free(&r);
  }
  qsort(us, BASELINE, sizeof *us, cmp_i64);
  p99 = us[BASELINE * 99 / 100];
  bound = 10 * p99 > 250000 ? 10 * p99 : 250000;

  t0 = now_ms();
  for (int i = 0; i < SLOW_READS; i++) {
    slow[i] = (struct one){c, "/v1/db/a/query", FOREVER, -1, 0};
    assert_int_equal(pthread_create(&th[i], NULL, one_main, &slow[i]), 0);
  }
  usleep(200 * 1000);            /* they have reached lithd */
  while (now_ms() < t0 + 2500) { /* a's four reads run one after the other: 4 s */
    struct tl_resp r;
    int64_t s0 = now_us();
    assert_int_equal(
        tl_conn_request(&k, "POST", "/v1/db/b/query", NULL, Q("SELECT count(*) FROM t"), &r, TL_TIMEOUT_MS),
        TL_OK);
    int64_t took = now_us() - s0;
    assert_int_equal(r.status, 200);
    tl_resp_free(&r);
    if (took > worst)
      worst = took;
    if (n < DURING_MAX)
      during[n++] = took;
    usleep(1000);
  }
  qsort(during, (size_t)n, sizeof *during, cmp_i64);
  print_message(
      "b's reads alone: p99 %lld us; while a's %d reads run: %d reads, p99 %lld us, slowest %lld us "
      "(bound %lld)\n",
      (long long)p99, SLOW_READS, n, (long long)during[n * 99 / 100], (long long)worst, (long long)bound);
  /* without the limit b's read waited for a's first second to end (800 ms
   * seen); the slowest may be preempted on a loaded machine (281 ms seen
   * once), never made to wait for one of a's seconds */
  assert_true(n >= 10);
  assert_true(during[n * 99 / 100] < bound);
  assert_true(worst < 600 * 1000);
  for (int i = 0; i < SLOW_READS; i++) {
    assert_int_equal(pthread_join(th[i], NULL), 0);
    assert_int_equal(slow[i].status, 422); /* each ran its second, one after the other */
  }
  tl_conn_close(&k);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

/* --checkpoint external: each database's WAL is watched on its own, and
 * the warning names the database whose WAL grows. */
static void test_wal_watch_per_database(void **state) {
  struct tl_child *c = *state;
  char log[16384] = "";
  FILE *f;

  unlink("walwatch.log");
  start_two(c, "walwatch",
            TL_ARGS("--checkpoint", "external", "--checkpoint-pages", "1", "--log", "walwatch.log"));
  tl_expect(c, "POST", "/v1/db/a/do", NULL, CREATE, 200, NULL);
  for (int i = 0; i < 8; i++)
    tl_expect(c, "POST", "/v1/db/a/do", NULL, Q("INSERT INTO t(v) VALUES (randomblob(5000))"), 200, NULL);
  usleep(1600 * 1000); /* the watch looks once a second */
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  f = fopen("walwatch.log", "r");
  assert_non_null(f);
  log[fread(log, 1, sizeof log - 1, f)] = '\0';
  fclose(f);
  if (strstr(log, "database a: the WAL holds") == NULL)
    fail_msg("log: %s", log);
  assert_null(strstr(log, "database b: the WAL holds"));
}

/* ---- Stop and start ----------------------------------------------------- */

struct writer {
  const struct tl_child *c;
  const char *path;
  int answered; /* ids 1..answered were answered 200 */
};

static void *writer_main(void *arg) {
  struct writer *w = arg;
  struct tl_conn k;
  char body[160];
  tl_conn_init(&k, w->c);
  for (int i = 1;; i++) {
    struct tl_resp r;
    snprintf(body, sizeof body, Q("INSERT INTO t(id, v) VALUES (%d, 'w')"), i);
    if (tl_conn_request(&k, "POST", w->path, NULL, body, &r, TL_TIMEOUT_MS) != TL_OK)
      break;
    int ok = r.status == 200;
    tl_resp_free(&r);
    if (!ok)
      break;
    w->answered = i;
  }
  tl_conn_close(&k);
  return NULL;
}

static void test_sigterm_drains_every_database(void **state) {
  struct tl_child *c = *state;
  struct writer w[4];
  pthread_t th[4];

  start_two(c, "drain", NULL);
  tl_expect(c, "POST", "/v1/db/a/do", NULL, CREATE, 200, NULL);
  tl_expect(c, "POST", "/v1/db/b/do", NULL, CREATE, 200, NULL);
  for (int i = 0; i < 2; i++) {
    w[i] = (struct writer){c, i == 0 ? "/v1/db/a/do" : "/v1/db/b/do", 0};
    assert_int_equal(pthread_create(&th[i], NULL, writer_main, &w[i]), 0);
  }
  usleep(400 * 1000);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_join(th[i], NULL), 0);
  print_message("answered before the stop: a %d, b %d\n", w[0].answered, w[1].answered);
  assert_true(w[0].answered > 0 && w[1].answered > 0);
  /* every answered command is in its file (and only there) */
  char sql[96];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM t WHERE id <= %d", w[0].answered);
  assert_int_equal(tl_sql_int("drain-a.db", sql), w[0].answered);
  snprintf(sql, sizeof sql, "SELECT count(*) FROM t WHERE id <= %d", w[1].answered);
  assert_int_equal(tl_sql_int("drain-b.db", sql), w[1].answered);
  tl_assert_integrity("drain-a.db");
  tl_assert_integrity("drain-b.db");
}

static void test_a_database_that_cannot_open_stops_lithd(void **state) {
  char out[8192];
  int rc;
  (void)state;
  tl_remove_db("fine.db");
  rc = tl_run(TL_ARGS("--db", "fine=fine.db", "--db", "broken=no-such-dir/x.db", "--listen", "127.0.0.1:0"),
              out, sizeof out);
  assert_int_equal(rc, 1);
  if (strstr(out, "database broken") == NULL || strstr(out, "did not open: lithd does not start") == NULL)
    fail_msg("output: %s", out);
  assert_null(strstr(out, "listening")); /* it never served */
  /* its lock file is not held: the next start takes it */
  rc = tl_run(TL_ARGS("--db", "fine=fine.db", "--db", "fine=other.db"), out, sizeof out);
  assert_int_equal(rc, 2);
  assert_non_null(strstr(out, "the database \"fine\" is given twice"));
  rc = tl_run(TL_ARGS("--db", "x=one.db", "--db", "y=one.db", "--listen", "127.0.0.1:0"), out, sizeof out);
  assert_int_equal(rc, 1);
  assert_non_null(strstr(out, "two --db names for one file"));
  tl_remove_db("one.db");
  tl_remove_db("fine.db");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_routes, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_default, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_one_database, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_schema_and_commands_per_database, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_isolation, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_large_answers_do_not_hold_the_loop, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_read_isolation, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_wal_watch_per_database, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_sigterm_drains_every_database, tl_setup, tl_teardown),
      cmocka_unit_test(test_a_database_that_cannot_open_stops_lithd),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
