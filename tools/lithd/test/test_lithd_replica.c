/*
 * test_lithd_replica — lithd --litestream with the real Litestream binary
 * (issue 13). Skipped, with the reason printed, when there is none: it is
 * looked for in $LITESTREAM, then where `make deps-litestream` puts it
 * (build/litestream/ under the source tree, from the npm package
 * @flydotio/litestream-linux-x64, Litestream v0.3.13 inside).
 *
 *   - replicate and restore: lithd under load from CLIENTS keep-alive
 *     clients, `litestream replicate` to a file:// replica; the load stops,
 *     a few sync intervals pass, `litestream restore` into a new file:
 *     integrity_check ok and every answered command is there;
 *   - SIGKILL: the same load, paced so that Litestream keeps up (PACE_US),
 *     then lithd and Litestream are both SIGKILLed mid-load. The restore holds, for each client, a prefix of its
 *     commands (never a later one without an earlier one), each command
 *     whole (its two rows, written by one /v1/do: never a part of it), and
 *     what is missing of the answered ones was answered in the last moments
 *     before the kill (LOSS_BOUND_MS; the age of the oldest lost answer is
 *     printed: the measured loss window);
 *   - lithd restarted (SIGTERM, start) while Litestream replicates: one
 *     generation throughout, and the restore holds both runs' writes;
 *   - with LITH_BENCH_LITESTREAM=1 only, a measurement (no check): the
 *     commands/s of the same load without and with Litestream running.
 *
 * Each command is one /v1/do of two INSERTs (client, seq, part 1 and 2);
 * a client sends seq 1, 2, 3, ... one at a time and notes when each was
 * answered 200.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "child.h"

extern char **environ;

#define CLIENTS 6
#define MAX_SEQ 200000
#define SYNC_MS 200
#define LOAD_MS 4000
/* The SIGKILL test paces its clients (a pause of PACE_US after each answer:
 * at most ~1,200 commands/s from six) so that Litestream keeps up: at full
 * speed on two cores it falls behind lithd more and more (0.3 to 2.3 s by
 * the kill, in runs of the unpaced load), and the window would measure
 * that lag, not Litestream's intervals. A lost answered command must then
 * have been answered within LOSS_BOUND_MS before the kill: the monitor
 * (reads the WAL) and sync (copies it to the replica) intervals, SYNC_MS
 * each, and room for a loaded machine. */
#define PACE_US 5000
#define LOSS_BOUND_MS 1500

static char litestream[4096];

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Litestream's path into `litestream`, or 0 with the reason in why. */
static int find_litestream(char *why, size_t cap) {
  const char *env = getenv("LITESTREAM");
  if (env != NULL && *env != '\0') {
    snprintf(litestream, sizeof litestream, "%s", env);
    if (access(litestream, X_OK) == 0)
      return 1;
    snprintf(why, cap, "$LITESTREAM (%s) is not an executable", env);
    return 0;
  }
  /* LITHD_PATH is SRC/build/VARIANT/tools/lithd/lithd */
  const char *b = strstr(LITHD_PATH, "/build/");
  if (b != NULL) {
    snprintf(litestream, sizeof litestream,
             "%.*s/build/litestream/node_modules/@flydotio/litestream-linux-x64/litestream",
             (int)(b - LITHD_PATH), LITHD_PATH);
    if (access(litestream, X_OK) == 0)
      return 1;
  }
  snprintf(why, cap, "no Litestream binary: set LITESTREAM or run `make deps-litestream` (npm: %s)",
           "@flydotio/litestream-linux-x64");
  return 0;
}

static int setup(void **state) {
  char why[512];
  if (!find_litestream(why, sizeof why)) {
    print_message("[  SKIP    ] %s\n", why);
    *state = NULL;
    return 0;
  }
  return tl_setup(state);
}

static int teardown(void **state) { return *state == NULL ? 0 : tl_teardown(state); }

/* Run Litestream with args (NULL-terminated) and its output appended to
 * log; returns its pid. */
static pid_t spawn_litestream(const char *const *args, const char *log) {
  char *argv[16];
  int n = 0;
  argv[n++] = litestream;
  for (const char *const *a = args; *a != NULL && n < 15; a++)
    argv[n++] = (char *)*a;
  argv[n] = NULL;
  posix_spawn_file_actions_t fa;
  pid_t pid;
  assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
  assert_int_equal(posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0600), 0);
  assert_int_equal(posix_spawn_file_actions_adddup2(&fa, 1, 2), 0);
  assert_int_equal(posix_spawn(&pid, litestream, &fa, NULL, argv, environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

static int wait_exit(pid_t pid) {
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void print_log(const char *log) {
  char buf[8192];
  FILE *f = fopen(log, "r");
  if (f == NULL)
    return;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  print_error("%s:\n%s\n", log, buf);
}

/* The config file for db (relative to the current directory), replica in
 * the directory `replica`, Litestream's monitor and sync intervals
 * interval_ms. */
static void write_config(const char *conf, const char *db, const char *replica, int interval_ms) {
  char cwd[2048];
  assert_non_null(getcwd(cwd, sizeof cwd));
  FILE *f = fopen(conf, "w");
  assert_non_null(f);
  fprintf(f,
          "dbs:\n"
          "  - path: %s/%s\n"
          "    monitor-interval: %dms\n"
          "    replicas:\n"
          "      - type: file\n"
          "        path: %s/%s\n"
          "        sync-interval: %dms\n",
          cwd, db, interval_ms, cwd, replica, interval_ms);
  assert_int_equal(fclose(f), 0);
}

/* ---- the load ------------------------------------------------------------ */

struct client {
  const struct tl_child *c;
  int id;
  _Atomic int *stop;
  int answered;       /* seq 1..answered were answered 200 */
  int64_t *answer_ms; /* [seq]: when */
  int errors;         /* answers that were not 200 (before the kill) */
  int pace_us;        /* pause between two commands (0: none) */
};

static void *client_main(void *arg) {
  struct client *k = arg;
  struct tl_conn conn;
  char body[256];
  tl_conn_init(&conn, k->c);
  for (int seq = 1; seq < MAX_SEQ && !atomic_load(k->stop); seq++) {
    struct tl_resp r;
    snprintf(body, sizeof body,
             "{\"statements\":[{\"sql\":\"INSERT INTO ledger VALUES (%d, %d, 1)\"},"
             "{\"sql\":\"INSERT INTO ledger VALUES (%d, %d, 2)\"}]}",
             k->id, seq, k->id, seq);
    int rc = tl_conn_request(&conn, "POST", "/v1/do", NULL, body, &r, TL_TIMEOUT_MS);
    if (rc != TL_OK)
      break; /* lithd killed */
    int ok = r.status == 200;
    tl_resp_free(&r);
    if (!ok) {
      k->errors++;
      break;
    }
    k->answer_ms[seq] = now_ms();
    k->answered = seq;
    if (k->pace_us > 0)
      usleep((useconds_t)k->pace_us);
  }
  tl_conn_close(&conn);
  return NULL;
}

struct load {
  pthread_t th[CLIENTS];
  struct client k[CLIENTS];
  _Atomic int stop;
};

static void load_start(struct load *l, const struct tl_child *c, int pace_us) {
  atomic_init(&l->stop, 0);
  for (int i = 0; i < CLIENTS; i++) {
    l->k[i] = (struct client){.c = c, .id = i + 1, .stop = &l->stop, .pace_us = pace_us};
    l->k[i].answer_ms = calloc(MAX_SEQ, sizeof(int64_t));
    assert_non_null(l->k[i].answer_ms);
    assert_int_equal(pthread_create(&l->th[i], NULL, client_main, &l->k[i]), 0);
  }
}

static void load_join(struct load *l) {
  atomic_store(&l->stop, 1);
  for (int i = 0; i < CLIENTS; i++)
    pthread_join(l->th[i], NULL);
}

static void load_free(struct load *l) {
  for (int i = 0; i < CLIENTS; i++)
    free(l->k[i].answer_ms);
}

static const char *const SCHEMA = "CREATE TABLE ledger(client INTEGER, seq INTEGER, part INTEGER,"
                                  " PRIMARY KEY (client, seq, part)) WITHOUT ROWID;\n";

/* Start lithd --litestream on NAME.db with the ledger, and Litestream. */
static pid_t start_both(struct tl_child *c, const char *name, const char *conf, const char *log,
                        int interval_ms) {
  char db[64], replica[64];
  FILE *f = fopen("ledger.sql", "w");
  assert_non_null(f);
  fputs(SCHEMA, f);
  assert_int_equal(fclose(f), 0);
  snprintf(db, sizeof db, "%s.db", name);
  snprintf(replica, sizeof replica, "%s-replica", name);
  write_config(conf, db, replica, interval_ms);
  tl_start(c, name, 0, TL_ARGS("--litestream", "--schema", "ledger.sql"));
  return spawn_litestream(TL_ARGS("replicate", "-config", conf), log);
}

static void restore(const char *conf, const char *name, const char *out, const char *log) {
  char cwd[2048], db[2200];
  assert_non_null(getcwd(cwd, sizeof cwd));
  snprintf(db, sizeof db, "%s/%s.db", cwd, name);
  unlink(out);
  int rc = wait_exit(spawn_litestream(TL_ARGS("restore", "-config", conf, "-o", out, db), log));
  if (rc != 0)
    print_log(log);
  assert_int_equal(rc, 0);
}

static void test_replicate_and_restore(void **state) {
  struct tl_child *c = *state;
  if (c == NULL) {
    skip();
    return;
  }
  pid_t ls = start_both(c, "rep", "rep.yml", "rep-litestream.log", SYNC_MS);
  struct load l;
  load_start(&l, c, 0);
  usleep(LOAD_MS * 1000);
  load_join(&l);
  usleep(5 * SYNC_MS * 1000 + 1000 * 1000); /* a few syncs */
  restore("rep.yml", "rep", "rep-restored.db", "rep-restore.log");
  tl_assert_integrity("rep-restored.db");
  int64_t total = 0;
  for (int i = 0; i < CLIENTS; i++) {
    char sql[160];
    assert_int_equal(l.k[i].errors, 0);
    assert_true(l.k[i].answered > 0);
    total += l.k[i].answered;
    snprintf(sql, sizeof sql, "SELECT count(*) FROM ledger WHERE client = %d AND seq <= %d", i + 1,
             l.k[i].answered);
    assert_int_equal(tl_sql_int("rep-restored.db", sql), 2 * (int64_t)l.k[i].answered);
  }
  print_message("replicated %lld answered commands, all restored\n", (long long)total);
  load_free(&l);
  kill(ls, SIGTERM);
  assert_int_equal(wait_exit(ls), 0);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
}

static void test_sigkill_loses_only_the_last_moments(void **state) {
  struct tl_child *c = *state;
  if (c == NULL) {
    skip();
    return;
  }
  pid_t ls = start_both(c, "kil", "kil.yml", "kil-litestream.log", SYNC_MS);
  struct load l;
  load_start(&l, c, PACE_US);
  usleep(LOAD_MS * 1000);
  int64_t kill_ms = now_ms();
  kill(ls, SIGKILL);
  assert_int_equal(tl_stop(c, SIGKILL, TL_TIMEOUT_MS), 128 + SIGKILL);
  assert_int_equal(wait_exit(ls), 128 + SIGKILL);
  load_join(&l);
  restore("kil.yml", "kil", "kil-restored.db", "kil-restore.log");
  tl_assert_integrity("kil-restored.db");
  /* no command in part */
  assert_int_equal(tl_sql_int("kil-restored.db", "SELECT count(*) FROM (SELECT client, seq FROM ledger "
                                                 "GROUP BY client, seq HAVING count(*) != 2)"),
                   0);
  int64_t oldest_lost = 0, lost = 0, answered = 0;
  for (int i = 0; i < CLIENTS; i++) {
    char sql[160];
    struct client *k = &l.k[i];
    assert_int_equal(k->errors, 0);
    snprintf(sql, sizeof sql, "SELECT count(DISTINCT seq) FROM ledger WHERE client = %d", i + 1);
    int64_t n = tl_sql_int("kil-restored.db", sql);
    snprintf(sql, sizeof sql, "SELECT coalesce(max(seq), 0) FROM ledger WHERE client = %d", i + 1);
    assert_int_equal(tl_sql_int("kil-restored.db", sql), n); /* a prefix: 1..n, no gap */
    answered += k->answered;
    for (int64_t s = n + 1; s <= k->answered; s++) {
      lost++;
      if (kill_ms - k->answer_ms[s] > oldest_lost)
        oldest_lost = kill_ms - k->answer_ms[s];
    }
  }
  print_message("SIGKILL: %lld of %lld answered commands lost; the oldest answered %lld ms before the "
                "kill (sync and monitor interval %d ms)\n",
                (long long)lost, (long long)answered, (long long)oldest_lost, SYNC_MS);
  if (oldest_lost > LOSS_BOUND_MS)
    print_log("kil-litestream.log");
  assert_true(oldest_lost <= LOSS_BOUND_MS);
  assert_true(lost < answered);
  load_free(&l);
}

/* "sync: new generation" lines in Litestream's log. */
static int generations(const char *log) {
  static char buf[1 << 16];
  FILE *f = fopen(log, "r");
  assert_non_null(f);
  buf[fread(buf, 1, sizeof buf - 1, f)] = '\0';
  fclose(f);
  int n = 0;
  for (const char *p = buf; (p = strstr(p, "sync: new generation")) != NULL; p++)
    n++;
  return n;
}

/* lithd restarts (a deploy) while Litestream replicates: under
 * --litestream lithd leaves the WAL whole at exit and at start, so
 * Litestream goes on with its generation (no new snapshot), and a restore
 * holds the writes of both lithd runs. */
static void test_lithd_restart_keeps_the_generation(void **state) {
  struct tl_child *c = *state;
  if (c == NULL) {
    skip();
    return;
  }
  const char *insert = "{\"statements\":[{\"sql\":\"INSERT INTO t VALUES (randomblob(6000))\"}]}";
  write_config("gen.yml", "gen.db", "gen-replica", SYNC_MS);
  unlink("gen-litestream.log");
  tl_start(c, "gen", 0, TL_ARGS("--litestream"));
  tl_expect(c, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"CREATE TABLE t(v)\"}]}", 200, NULL);
  pid_t ls = spawn_litestream(TL_ARGS("replicate", "-config", "gen.yml"), "gen-litestream.log");
  usleep(1000 * 1000);
  for (int i = 0; i < 100; i++)
    tl_expect(c, "POST", "/v1/do", NULL, insert, 200, NULL);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  tl_start(c, "gen", TL_KEEP_DB, TL_ARGS("--litestream"));
  for (int i = 0; i < 100; i++)
    tl_expect(c, "POST", "/v1/do", NULL, insert, 200, NULL);
  usleep(5 * SYNC_MS * 1000 + 1000 * 1000);
  kill(ls, SIGTERM);
  assert_int_equal(wait_exit(ls), 0);
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  int n = generations("gen-litestream.log");
  if (n != 1)
    print_log("gen-litestream.log");
  assert_int_equal(n, 1);
  restore("gen.yml", "gen", "gen-restored.db", "gen-restore.log");
  tl_assert_integrity("gen-restored.db");
  assert_int_equal(tl_sql_int("gen-restored.db", "SELECT count(*) FROM t"), 200);
}

/* Not a check: commands/s of the same load on lithd --litestream alone and
 * with Litestream replicating (monitor and sync intervals 1 s: the
 * README's sync-interval, Litestream's default monitor interval), interleaved, ROUNDS rounds of LOAD_MS each.
 * Runs only with LITH_BENCH_LITESTREAM=1 (it takes half a minute). */
#define ROUNDS 3

static double run_load(struct tl_child *c, int with_litestream, int round) {
  char name[32], conf[48], log[48];
  snprintf(name, sizeof name, "tp%d%c", round, with_litestream ? 'l' : 'n');
  snprintf(conf, sizeof conf, "%s.yml", name);
  snprintf(log, sizeof log, "%s-litestream.log", name);
  pid_t ls = -1;
  if (with_litestream) {
    ls = start_both(c, name, conf, log, 1000);
  } else {
    FILE *f = fopen("ledger.sql", "w");
    assert_non_null(f);
    fputs(SCHEMA, f);
    assert_int_equal(fclose(f), 0);
    tl_start(c, name, 0, TL_ARGS("--litestream", "--schema", "ledger.sql"));
  }
  usleep(1000 * 1000); /* Litestream's first snapshot */
  struct load l;
  load_start(&l, c, 0);
  usleep(LOAD_MS * 1000);
  load_join(&l);
  int64_t n = 0;
  for (int i = 0; i < CLIENTS; i++)
    n += l.k[i].answered;
  load_free(&l);
  if (ls > 0) {
    kill(ls, SIGTERM);
    wait_exit(ls);
  }
  assert_int_equal(tl_stop(c, SIGTERM, TL_TIMEOUT_MS), 0);
  tl_remove_db(name);
  return (double)n * 1000.0 / LOAD_MS;
}

static void test_throughput_with_and_without(void **state) {
  struct tl_child *c = *state;
  const char *on = getenv("LITH_BENCH_LITESTREAM");
  if (c == NULL || on == NULL || strcmp(on, "1") != 0) {
    if (c != NULL)
      print_message("[  SKIP    ] a measurement, not a check: LITH_BENCH_LITESTREAM=1 runs it\n");
    skip();
    return;
  }
  for (int r = 0; r < ROUNDS; r++) {
    double alone = run_load(c, 0, r), with = run_load(c, 1, r);
    print_message("round %d: %d clients, %.0f commands/s alone, %.0f with Litestream replicating (%.2fx)\n",
                  r + 1, CLIENTS, alone, with, with / alone);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_replicate_and_restore, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sigkill_loses_only_the_last_moments, setup, teardown),
      cmocka_unit_test_setup_teardown(test_lithd_restart_keeps_the_generation, setup, teardown),
      cmocka_unit_test_setup_teardown(test_throughput_with_and_without, setup, teardown),
  };
  return cmocka_run_group_tests_name("lithd/replica", tests, NULL, NULL);
}
