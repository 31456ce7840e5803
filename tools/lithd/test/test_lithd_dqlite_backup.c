/*
 * test_lithd_dqlite_backup — backups of a dqlite cluster through lithd
 * --dqlite (issue 34), on three lith-node processes under write load:
 * NWRITER clients each send INSERTs of (writer, seq) one after the other,
 * recording every seq answered 200 and when the answer came. While they
 * write:
 *   - GET /v1/backup: an SQLite file (no -wal beside it needed: journal
 *     mode DELETE) whose PRAGMA integrity_check is "ok" and that holds
 *     every row answered before the request was sent (and only rows the
 *     writers sent);
 *   - GET /v1/backup?format=sql: the same, the script loaded into an
 *     empty database;
 *   - POST /v1/backup into --backup-dir: the same, the file 0600; the
 *     same name again is refused (409) and the first file is untouched, a
 *     name with a path is refused (400);
 *   - a write answered just before a backup is asked for is in it (8
 *     rounds, no load: a follower's copy, or the leader's without the
 *     barrier of a query first, lags by one message of the leader's);
 *   - the leader SIGKILLed under the writers and a backup asked for at
 *     once: it comes from the next leader, with every write answered
 *     before the kill;
 *   - SIGTERM cuts a snapshot still being made (a cluster out of reach:
 *     the leader search would last 3 s) and leaves nothing behind;
 *   - a lithd without --backup-dir makes a download's snapshot in $TMPDIR
 *     and leaves nothing there.
 * The writers must have had writes answered while each backup was made
 * (the backup is taken while writes go on).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "child.h"
#include "nodes.h"

#define NWRITER 6
#define MAXSEQ 20000

static t_node nodes[3];
static char all[256];
static struct tl_child lithd;

/* ---- The writers ---- */

typedef struct writer {
  int id;
  int nseq;
  int64_t answered[MAXSEQ]; /* t_ms_now of a 200; 0: none */
  pthread_t thread;
} writer;

static writer writers[NWRITER];
static atomic_int stop_flag;

static void *writer_main(void *arg) {
  writer *w = arg;
  struct tl_conn conn;
  tl_conn_init(&conn, &lithd);
  while (!atomic_load(&stop_flag) && w->nseq < MAXSEQ) {
    int s = w->nseq++;
    char body[256];
    struct tl_resp r;
    snprintf(
        body, sizeof body,
        "{\"statements\":[{\"sql\":\"INSERT INTO w(writer, seq, pad) VALUES (?, ?, hex(randomblob(100)))\","
        "\"params\":[%d,%d]}]}",
        w->id, s);
    if (tl_conn_request(&conn, "POST", "/v1/do", NULL, body, &r, 30000) != TL_OK) {
      t_sleep_ms(20);
      continue;
    }
    if (r.status == 200)
      w->answered[s] = t_ms_now();
    tl_resp_free(&r);
  }
  tl_conn_close(&conn);
  return NULL;
}

static void writers_start(void) {
  atomic_store(&stop_flag, 0);
  for (int i = 0; i < NWRITER; i++) {
    memset(&writers[i], 0, sizeof writers[i]);
    writers[i].id = i;
    assert_int_equal(pthread_create(&writers[i].thread, NULL, writer_main, &writers[i]), 0);
  }
  t_sleep_ms(500); /* writes going on */
}

/* Writes answered 200 in [from, to). */
static int answered_between(int64_t from, int64_t to) {
  int n = 0;
  for (int i = 0; i < NWRITER; i++)
    for (int s = 0; s < writers[i].nseq && s < MAXSEQ; s++)
      n += writers[i].answered[s] >= from && writers[i].answered[s] < to;
  return n;
}

/* After a backup: the writers go on 200 ms more, and must have had writes
 * answered from t0 on (the backup held no write back for long). */
static void writers_stop(int64_t t0) {
  t_sleep_ms(200);
  atomic_store(&stop_flag, 1);
  for (int i = 0; i < NWRITER; i++)
    pthread_join(writers[i].thread, NULL);
  assert_true(answered_between(t0, INT64_MAX) > 0);
}

/* ---- What a backup must hold ---- */

/* PRAGMA integrity_check is "ok", the file needs no -wal (journal mode
 * DELETE), and every write answered before t0 is in table w (and nothing
 * but the writers' rows). */
static void check_backup(const char *file, int64_t t0) {
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  static unsigned char seen[NWRITER][MAXSEQ];
  int before = 0, missing = 0, rows = 0;
  memset(seen, 0, sizeof seen);
  assert_int_equal(sqlite3_open_v2(file, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_string_equal((const char *)sqlite3_column_text(st, 0), "ok");
  sqlite3_finalize(st);
  assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_string_equal((const char *)sqlite3_column_text(st, 0), "delete");
  sqlite3_finalize(st);
  assert_int_equal(sqlite3_prepare_v2(db, "SELECT count(*) FROM fill", -1, &st, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_int_equal(sqlite3_column_int(st, 0), 4000);
  sqlite3_finalize(st);
  assert_int_equal(sqlite3_prepare_v2(db, "SELECT writer, seq FROM w", -1, &st, NULL), SQLITE_OK);
  while (sqlite3_step(st) == SQLITE_ROW) {
    int w = sqlite3_column_int(st, 0), s = sqlite3_column_int(st, 1);
    assert_true(w >= 0 && w < NWRITER && s >= 0 && s < MAXSEQ);
    seen[w][s] = 1;
    rows++;
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  for (int i = 0; i < NWRITER; i++)
    for (int s = 0; s < writers[i].nseq && s < MAXSEQ; s++)
      if (writers[i].answered[s] > 0 && writers[i].answered[s] < t0) {
        before++;
        if (!seen[i][s]) {
          if (missing++ < 5)
            print_message("writer %d seq %d answered %lld ms before the backup: not in it\n", i, s,
                          (long long)(t0 - writers[i].answered[s]));
        }
      }
  print_message("%s: %d rows, %d writes answered before the backup began, %d missing\n", file, rows, before,
                missing);
  assert_true(before > 0);
  assert_int_equal(missing, 0);
}

static void write_bytes(const char *path, const char *p, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(p, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

/* The body's length, from Content-Length (the body holds NUL bytes). */
static size_t content_length(const struct tl_resp *r) {
  const char *h = strcasestr(r->head, "content-length:");
  assert_non_null(h);
  return (size_t)strtoull(h + 15, NULL, 10);
}

static int dir_entries(const char *dir) {
  int n = 0;
  DIR *d = opendir(dir);
  assert_non_null(d);
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
  closedir(d);
  return n;
}

/* ---- The tests ---- */

static void test_download(void **state) {
  (void)state;
  struct tl_resp r;
  writers_start();
  int64_t t0 = t_ms_now();
  tl_http(&lithd, "GET", "/v1/backup", NULL, NULL, &r);
  int64_t t1 = t_ms_now();
  writers_stop(t0); /* before reading what they recorded */
  int during = answered_between(t0, t1);
  assert_int_equal(r.status, 200);
  assert_non_null(strstr(r.head, "application/vnd.sqlite3"));
  size_t n = content_length(&r);
  assert_true(n >= 4096 && memcmp(r.body, "SQLite format 3", 16) == 0);
  unlink("download.db");
  write_bytes("download.db", r.body, n);
  tl_resp_free(&r);
  print_message("GET /v1/backup: %zu bytes in %lld ms, %d writes answered meanwhile\n", n,
                (long long)(t1 - t0), during);
  check_backup("download.db", t0);
  assert_int_equal(access("download.db-wal", F_OK), -1); /* SQLite made none: DELETE mode */
  assert_int_equal(dir_entries("backups"), 0);           /* the download's scratch is gone */
}

static void test_download_sql(void **state) {
  (void)state;
  struct tl_resp r;
  sqlite3 *db = NULL;
  char *err = NULL;
  writers_start();
  int64_t t0 = t_ms_now();
  tl_http(&lithd, "GET", "/v1/backup?format=sql", NULL, NULL, &r);
  int64_t t1 = t_ms_now();
  writers_stop(t0); /* before reading what they recorded */
  int during = answered_between(t0, t1);
  assert_int_equal(r.status, 200);
  assert_non_null(strstr(r.head, "application/sql"));
  assert_non_null(strstr(r.body, "CREATE TABLE w("));
  print_message("GET /v1/backup?format=sql: %zu bytes in %lld ms, %d writes answered meanwhile\n",
                strlen(r.body), (long long)(t1 - t0), during);
  unlink("from-sql.db");
  assert_int_equal(sqlite3_open("from-sql.db", &db), SQLITE_OK);
  if (sqlite3_exec(db, r.body, NULL, NULL, &err) != SQLITE_OK)
    fail_msg("loading the script: %s", err);
  sqlite3_close(db);
  tl_resp_free(&r);
  check_backup("from-sql.db", t0);
  assert_int_equal(dir_entries("backups"), 0);
}

static void test_post(void **state) {
  (void)state;
  struct tl_resp r;
  struct stat st;
  writers_start();
  int64_t t0 = t_ms_now();
  tl_http(&lithd, "POST", "/v1/backup", NULL, "{\"dest\":\"b1.db\"}", &r);
  int64_t t1 = t_ms_now();
  writers_stop(t0); /* before reading what they recorded */
  int during = answered_between(t0, t1);
  if (r.status != 200)
    fail_msg("POST /v1/backup: %d %s", r.status, r.body);
  assert_non_null(strstr(r.body, "\"dest\":\"backups/b1.db\""));
  tl_resp_free(&r);
  print_message("POST /v1/backup: %lld ms, %d writes answered meanwhile\n", (long long)(t1 - t0), during);
  assert_int_equal(stat("backups/b1.db", &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  check_backup("backups/b1.db", t0);
  assert_int_equal(dir_entries("backups"), 1); /* the file alone: its scratch is gone */
  /* The same name: refused, the file as it was. */
  tl_expect(&lithd, "POST", "/v1/backup", NULL, "{\"dest\":\"b1.db\"}", 409, "exists");
  struct stat st2;
  assert_int_equal(stat("backups/b1.db", &st2), 0);
  assert_true(st2.st_ino == st.st_ino && st2.st_size == st.st_size && st2.st_mtime == st.st_mtime);
  tl_expect(&lithd, "POST", "/v1/backup", NULL, "{\"dest\":\"../b2.db\"}", 400, "file name");
  assert_int_equal(dir_entries("backups"), 1);
}

/* A write answered just before the backup is asked for is in it, round
 * after round: a follower learns that an entry committed only with the
 * leader's next message, so a follower's dump (or the leader's, without
 * the barrier) would miss it. */
static void test_last_write_in(void **state) {
  (void)state;
  struct tl_resp r;
  char body[160];
  for (int round = 0; round < 8; round++) {
    snprintf(body, sizeof body, "{\"statements\":[{\"sql\":\"INSERT INTO probe(n) VALUES (%d)\"}]}", round);
    tl_expect(&lithd, "POST", "/v1/do", NULL, body, 200, NULL);
    tl_http(&lithd, "GET", "/v1/backup", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    unlink("probe.db");
    write_bytes("probe.db", r.body, content_length(&r));
    tl_resp_free(&r);
    snprintf(body, sizeof body, "SELECT count(*) FROM probe WHERE n = %d", round);
    if (tl_sql_int("probe.db", body) != 1)
      fail_msg("round %d: the write answered just before the backup is not in it", round);
  }
}

/* Without --backup-dir a download's snapshot is made in $TMPDIR, and
 * nothing is left there. */
static void test_download_tmpdir(void **state) {
  (void)state;
  struct tl_child second;
  struct tl_resp r;
  const char *extra[] = {"--dqlite", all, NULL};
  char abs[512];
  mkdir("scratch", 0700);
  assert_non_null(getcwd(abs, sizeof abs - 16));
  strcat(abs, "/scratch");
  setenv("TMPDIR", abs, 1); /* lithd's, inherited */
  tl_start(&second, "second", TL_NO_DB, extra);
  unsetenv("TMPDIR");
  tl_http(&second, "GET", "/v1/backup", NULL, NULL, &r);
  assert_int_equal(r.status, 200);
  assert_true(memcmp(r.body, "SQLite format 3", 16) == 0);
  tl_resp_free(&r);
  tl_expect(&second, "POST", "/v1/backup", NULL, "{\"dest\":\"b.db\"}", 403, "--backup-dir");
  assert_int_equal(dir_entries("scratch"), 0);
  assert_int_equal(tl_stop(&second, SIGTERM, 10000), 0);
}

/* The leader SIGKILLed under the writers, and a backup asked for at once:
 * the snapshot looks for the next leader (within --dqlite-failover-ms)
 * and its file holds every write answered before the kill; the node is
 * started again after. */
static void test_backup_after_leader_kill(void **state) {
  (void)state;
  struct tl_resp r;
  writers_start();
  int li = t_leader_index(nodes, 3, all);
  assert_true(li >= 0);
  t_node_stop(&nodes[li], SIGKILL, 2000);
  int64_t t0 = t_ms_now();
  tl_http(&lithd, "GET", "/v1/backup", NULL, NULL, &r);
  int64_t t1 = t_ms_now();
  t_sleep_ms(500); /* the writers on the new leader */
  writers_stop(t0);
  if (r.status != 200)
    fail_msg("GET /v1/backup after the leader's kill: %d %s", r.status, r.body);
  print_message("GET /v1/backup right after the leader's kill: 200 in %lld ms\n", (long long)(t1 - t0));
  unlink("after-kill.db");
  write_bytes("after-kill.db", r.body, content_length(&r));
  tl_resp_free(&r);
  check_backup("after-kill.db", t0);
  assert_int_equal(t_nodes_start_missing(nodes, 3, all, 15000), 0);
}

/* The stop cuts a snapshot still being made (lithd_store_drain): a lithd
 * whose cluster is out of reach looks for a leader for
 * --dqlite-failover-ms (3 s) before a dump; SIGTERM with a 100 ms grace
 * ends it within a second, and nothing is left in --backup-dir. (Planted,
 * the drain not cancelling: the stop took 2.7 s.) */
static void test_stop_cuts_snapshot(void **state) {
  (void)state;
  struct tl_child cut;
  struct tl_resp r;
  char dead[64];
  snprintf(dead, sizeof dead, "127.0.0.1:%d", t_free_port());
  mkdir("cut", 0700);
  const char *extra[] = {
      "--dqlite", dead, "--dqlite-failover-ms", "3000", "--stop-grace-ms", "100", "--backup-dir",
      "cut",      NULL};
  tl_start(&cut, "cut", TL_NO_DB, extra);
  tl_http(&cut, "GET", "/healthz", NULL, NULL, &r); /* served: past the start */
  assert_int_equal(r.status, 200);
  tl_resp_free(&r);
  int fd = tl_send(&cut, "GET", "/v1/backup", NULL, NULL);
  t_sleep_ms(300); /* the snapshot looks for a leader */
  int64_t t0 = t_ms_now();
  assert_int_equal(tl_stop(&cut, SIGTERM, 10000), 0);
  int64_t took = t_ms_now() - t0;
  close(fd);
  print_message("SIGTERM during a snapshot: lithd stopped in %lld ms\n", (long long)took);
  assert_true(took < 1500);
  assert_int_equal(dir_entries("cut"), 0);
}

/* ---- Setup ---- */

static int group_setup(void **state) {
  (void)state;
  char join2[160];
  FILE *f;
  signal(SIGPIPE, SIG_IGN);
  f = fopen("schema.sql", "w");
  if (f == NULL)
    return -1;
  fputs("CREATE TABLE w(id INTEGER PRIMARY KEY, writer INTEGER NOT NULL, seq INTEGER NOT NULL, pad TEXT);\n"
        "CREATE TABLE fill(b BLOB);\n"
        "CREATE TABLE probe(n INTEGER PRIMARY KEY);\n",
        f);
  fclose(f);
  mkdir("backups", 0700);
  for (int i = 0; i < 3; i++)
    t_node_init(&nodes[i], i + 1);
  snprintf(all, sizeof all, "%s,%s,%s", nodes[0].address, nodes[1].address, nodes[2].address);
  snprintf(join2, sizeof join2, "%s,%s", nodes[0].address, nodes[1].address);
  if (t_node_start(&nodes[0], NULL, 10000) != 0 || t_node_start(&nodes[1], nodes[0].address, 15000) != 0 ||
      t_node_start(&nodes[2], join2, 15000) != 0)
    return -1;
  const char *extra[] = {"--dqlite", all, "--schema", "schema.sql", "--backup-dir", "backups", NULL};
  tl_start(&lithd, "lithd", TL_NO_DB, extra);
  /* 4 MB beside the writers' rows: a dump of many frames, most of it in
   * the main file once the nodes checkpointed. */
  for (int i = 0; i < 4; i++)
    tl_expect(&lithd, "POST", "/v1/do", NULL,
              "{\"statements\":[{\"sql\":\"WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM k "
              "WHERE n < 1000) INSERT INTO fill SELECT randomblob(1000) FROM k\"}]}",
              200, NULL);
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  int rc = 0;
  if (lithd.pid > 0 && tl_stop(&lithd, SIGTERM, 10000) != 0)
    rc = -1;
  for (int i = 0; i < 3; i++)
    if (nodes[i].pid > 0)
      t_node_stop(&nodes[i], SIGKILL, 2000);
  return rc;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_download),
      cmocka_unit_test(test_download_sql),
      cmocka_unit_test(test_post),
      cmocka_unit_test(test_last_write_in),
      cmocka_unit_test(test_download_tmpdir),
      cmocka_unit_test(test_backup_after_leader_kill),
      cmocka_unit_test(test_stop_cuts_snapshot),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
