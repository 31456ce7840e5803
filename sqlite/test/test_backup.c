/*
 * Online backup (sqlite/backup.c through lith_backup):
 *   - while writer threads keep committing numbered inserts (each command
 *     inserts the next number, max + 1, and records it as the total), every
 *     backup passes PRAGMA integrity_check and holds a prefix of the commit
 *     order: rows 1..k without gaps, each with its expected value, the
 *     recorded total equal to k, and k between the commands answered when
 *     the backup started and the commands submitted when it returned (a
 *     command committed but not yet answered may be in the copy); the
 *     writers went on committing while backups ran; two backups at once,
 *     to two files, are both such prefixes;
 *   - the backup does not wait for the writer and does not see a batch in
 *     progress: with the writer held inside a command that has written, it
 *     completes and lacks that command's rows;
 *   - a backup over an existing destination replaces it atomically: a
 *     thread reading the destination throughout sees only the old file or
 *     the complete new one, a descriptor open on the old file still reads
 *     the old bytes, a stale -wal beside the old file is not replayed onto
 *     the copy, and no temporary file is left;
 *   - a bad destination (missing directory, an existing directory, "",
 *     NULL) is an error with a message and leaves nothing behind;
 *   - the backup is a normal, self-contained database: no -wal beside it,
 *     a plain connection reads and writes it, user_version is kept, and
 *     lith_open opens it without running the migrations again;
 *   - a backup whose destination is the live database itself (same name or
 *     "./name") loses nothing: every command answered afterwards is in the
 *     file for a new connection and after close;
 *   - backups are lith's own readers (issue #32, hole 10): backups taken
 *     one after another for 3 s while writers keep the WAL long enough for
 *     holds are never counted as a reader outside lith
 *     (wal_restart_blocked 0), and once they are over holds go on.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../lib/clock.h"
#include "common.h"

#define DB "backup_src.db"
#define DEST "backup_copy.db"
#define DEST2 "backup_other.db"
#define VALUE(n) (((n)*7919) % 1000003)

static const char *const migrations[] = {
    "CREATE TABLE seq(n INTEGER PRIMARY KEY, v INTEGER NOT NULL, pad BLOB);"
    "CREATE TABLE meta(k INTEGER PRIMARY KEY, total INTEGER NOT NULL);"
    "INSERT INTO meta VALUES (1, 0);",
    "CREATE TABLE bulk(id INTEGER PRIMARY KEY, b BLOB NOT NULL);",
};

static int exists(const char *path) {
  struct stat sb;
  return lstat(path, &sb) == 0;
}

/* Entries of the current directory whose name starts with prefix. */
static int count_entries(const char *prefix) {
  DIR *d = opendir(".");
  assert_non_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (strncmp(e->d_name, prefix, strlen(prefix)) == 0)
      n++;
  closedir(d);
  return n;
}

static int bulk_cmd(lith_tx *tx, void *arg) {
  int rows = *(const int *)arg;
  for (int i = 0; i < rows; i++) {
    int rc = lith_tx_exec(tx, "INSERT INTO bulk(b) VALUES (randomblob(4000))", NULL);
    if (rc != LITH_OK)
      return rc;
  }
  return LITH_OK;
}

/* ~4 MB of pages so that a copy takes a while. */
static lith *open_source(void) {
  lith_options opt;
  lith_options_default(&opt);
  opt.readers = 2;
  opt.migrations = migrations;
  opt.n_migrations = 2;
  opt.checkpoint_pages = 200;
  lith *db = t_open_fresh(DB, &opt);
  int rows = 1000;
  assert_int_equal(lith_do(db, bulk_cmd, &rows), LITH_OK);
  return db;
}

/* Insert the next number: max + 1, so numbers follow the commit order. */
static int next_cmd(lith_tx *tx, void *arg) {
  (void)arg;
  int64_t total = 0;
  int rc = lith_tx_int64(tx, &total, "SELECT total FROM meta WHERE k = 1", NULL);
  if (rc != LITH_OK)
    return rc;
  int64_t n = total + 1;
  if ((rc = lith_tx_exec(tx, "INSERT INTO seq(n, v, pad) VALUES (?, ?, randomblob(200))", "II", n,
                         (int64_t)VALUE(n))) != LITH_OK)
    return rc;
  return lith_tx_exec(tx, "UPDATE meta SET total = ? WHERE k = 1", "I", n);
}

typedef struct writers {
  lith *db;
  _Atomic int stop;
  _Atomic long submitted, answered, errors;
} writers;

static void *writer_main(void *arg) {
  writers *w = arg;
  while (!atomic_load(&w->stop)) {
    atomic_fetch_add(&w->submitted, 1);
    if (lith_do(w->db, next_cmd, NULL) == LITH_OK)
      atomic_fetch_add(&w->answered, 1);
    else
      atomic_fetch_add(&w->errors, 1);
  }
  return NULL;
}

/* The copy at path holds numbers 1..k, each with its value, and total k.
 * Returns k. */
static int64_t check_prefix(const char *path) {
  t_assert_integrity(path);
  int64_t k = t_query_int(path, "SELECT coalesce(max(n), 0) FROM seq");
  assert_int_equal(t_query_int(path, "SELECT count(*) FROM seq"), k);
  assert_int_equal(t_query_int(path, "SELECT coalesce(min(n), 1) FROM seq"), 1);
  assert_int_equal(t_query_int(path, "SELECT count(*) FROM seq WHERE v != (n * 7919) % 1000003"), 0);
  assert_int_equal(t_query_int(path, "SELECT total FROM meta WHERE k = 1"), k);
  assert_int_equal(t_query_int(path, "SELECT count(*) FROM bulk"), 1000);
  return k;
}

typedef struct side_backup {
  lith *db;
  long answered_before; /* in: */
  writers *w;
  int rc; /* out: */
  long submitted_after;
} side_backup;

static void *side_backup_main(void *arg) {
  side_backup *b = arg;
  b->answered_before = atomic_load(&b->w->answered);
  b->rc = lith_backup(b->db, DEST2);
  b->submitted_after = atomic_load(&b->w->submitted);
  return NULL;
}

static void test_backup_while_committing(void **state) {
  (void)state;
  enum { NW = 2 };
  writers w;
  memset(&w, 0, sizeof w);
  w.db = open_source();
  pthread_t th[NW];
  for (int i = 0; i < NW; i++)
    assert_int_equal(pthread_create(&th[i], NULL, writer_main, &w), 0);
  while (atomic_load(&w.answered) < 50)
    usleep(1000);

  int progressed = 0;
  int64_t last_k = 0;
  for (int round = 0; round < 4; round++) {
    /* another backup at the same time, to another file, in rounds 1 and 3 */
    side_backup side = {w.db, 0, &w, -1, 0};
    pthread_t sth;
    if (round % 2)
      assert_int_equal(pthread_create(&sth, NULL, side_backup_main, &side), 0);
    long answered_before = atomic_load(&w.answered);
    int rc = lith_backup(w.db, DEST);
    long submitted_after = atomic_load(&w.submitted);
    long answered_after = atomic_load(&w.answered);
    if (round % 2) {
      pthread_join(sth, NULL);
      assert_int_equal(side.rc, LITH_OK);
      int64_t k2 = check_prefix(DEST2);
      assert_true(k2 >= side.answered_before);
      assert_true(k2 <= side.submitted_after);
    }
    if (rc != LITH_OK)
      fprintf(stderr, "lith_backup: %s: %s\n", lith_errstr(rc), lith_errmsg(NULL));
    assert_int_equal(rc, LITH_OK);
    assert_false(exists(DEST "-wal"));
    int64_t k = check_prefix(DEST);
    if (k < answered_before || k > submitted_after)
      fprintf(stderr, "round %d: k %lld, answered before %ld, submitted after %ld\n", round, (long long)k,
              answered_before, submitted_after);
    assert_true(k >= answered_before);
    assert_true(k <= submitted_after);
    assert_true(k >= last_k); /* later copies hold more */
    last_k = k;
    if (answered_after > answered_before)
      progressed++;
  }
  atomic_store(&w.stop, 1);
  for (int i = 0; i < NW; i++)
    pthread_join(th[i], NULL);
  assert_int_equal(atomic_load(&w.errors), 0);
  assert_true(progressed > 0); /* the writer was not stopped by the copies */
  assert_int_equal(count_entries(DEST ".tmp"), 0);
  assert_int_equal(count_entries(DEST2 ".tmp"), 0);
  assert_int_equal(lith_close(w.db), LITH_OK);
  assert_int_equal(t_query_int(DB, "SELECT total FROM meta"), atomic_load(&w.answered));
  t_remove_db(DB);
  t_remove_db(DEST);
  t_remove_db(DEST2);
}

/* ---- the writer held --------------------------------------------------- */

typedef struct hold {
  _Atomic int entered, open;
} hold;

static int hold_cmd(lith_tx *tx, void *arg) {
  hold *h = arg;
  int rc = next_cmd(tx, NULL);
  if (rc != LITH_OK)
    return rc;
  atomic_store(&h->entered, 1);
  for (int i = 0; i < 30000 && !atomic_load(&h->open); i++)
    usleep(1000);
  return LITH_OK;
}

static void hold_done(lith_request *req) { atomic_store((_Atomic int *)req->data, 1); }

typedef struct bg_backup {
  lith *db;
  int rc;
  _Atomic int finished;
} bg_backup;

static void *backup_main(void *arg) {
  bg_backup *b = arg;
  b->rc = lith_backup(b->db, DEST);
  atomic_store(&b->finished, 1);
  return NULL;
}

static void test_backup_does_not_wait_for_the_writer(void **state) {
  (void)state;
  lith *db = open_source();
  for (int i = 0; i < 10; i++)
    assert_int_equal(lith_do(db, next_cmd, NULL), LITH_OK);

  hold h = {0, 0};
  _Atomic int hdone = 0;
  lith_request req;
  memset(&req, 0, sizeof req);
  req.fn = hold_cmd;
  req.arg = &h;
  req.done = hold_done;
  req.data = (void *)&hdone;
  assert_int_equal(lith_submit(db, &req), LITH_OK);
  while (!atomic_load(&h.entered))
    usleep(100);

  bg_backup b = {db, -1, 0};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, backup_main, &b), 0);
  for (int i = 0; i < 10000 && !atomic_load(&b.finished); i++)
    usleep(1000);
  int finished_while_held = atomic_load(&b.finished);
  atomic_store(&h.open, 1);
  pthread_join(th, NULL);
  for (int i = 0; i < 5000 && !atomic_load(&hdone); i++)
    usleep(1000);
  assert_true(atomic_load(&hdone));
  assert_int_equal(req.rc, LITH_OK);
  assert_true(finished_while_held);
  assert_int_equal(b.rc, LITH_OK);
  assert_int_equal(check_prefix(DEST), 10); /* not the 11th, uncommitted then */
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(t_query_int(DB, "SELECT total FROM meta"), 11);
  t_remove_db(DB);
  t_remove_db(DEST);
}

/* ---- replacing an existing destination ---------------------------------- */

static uint64_t fnv(const unsigned char *p, size_t n) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 1099511628211ULL;
  }
  return h;
}

/* Hash of the whole file read through fd (from offset 0). */
static uint64_t hash_fd(int fd, long long *size) {
  static _Thread_local unsigned char buf[1 << 16];
  uint64_t h = 1469598103934665603ULL;
  long long total = 0;
  off_t off = 0;
  for (;;) {
    ssize_t r = pread(fd, buf, sizeof buf, off);
    if (r <= 0)
      break;
    /* chain the chunks: same bytes give the same hash */
    h ^= fnv(buf, (size_t)r);
    h *= 1099511628211ULL;
    off += r;
    total += r;
  }
  *size = total;
  return h;
}

static uint64_t hash_path(const char *path, long long *size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *size = -1;
    return 0;
  }
  uint64_t h = hash_fd(fd, size);
  close(fd);
  return h;
}

#define MAX_SEEN 64

typedef struct watcher {
  _Atomic int stop;
  uint64_t seen[MAX_SEEN];
  int nseen;
  long missing; /* the destination did not exist */
  _Atomic long looks;
} watcher;

static void *watch_main(void *arg) {
  watcher *w = arg;
  while (!atomic_load(&w->stop)) {
    long long size;
    uint64_t h = hash_path(DEST, &size);
    atomic_fetch_add(&w->looks, 1);
    if (size < 0) {
      w->missing++;
      continue;
    }
    int known = 0;
    for (int i = 0; i < w->nseen; i++)
      if (w->seen[i] == h)
        known = 1;
    if (!known && w->nseen < MAX_SEEN)
      w->seen[w->nseen++] = h;
  }
  return NULL;
}

/* An old destination: a WAL-mode database whose newest content (a table
 * old_marker) is only in its -wal file, left there by a close without
 * checkpoint. */
static void make_old_destination(void) {
  t_remove_db(DEST);
  sqlite3 *c = NULL;
  assert_int_equal(sqlite3_open_v2(DEST, &c, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL), SQLITE_OK);
  assert_int_equal(
      sqlite3_exec(c,
                   "PRAGMA journal_mode=WAL; CREATE TABLE old_marker(x); INSERT INTO old_marker VALUES (1)",
                   NULL, NULL, NULL),
      SQLITE_OK);
  assert_int_equal(sqlite3_db_config(c, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)NULL), SQLITE_OK);
  assert_int_equal(sqlite3_exec(c, "INSERT INTO old_marker VALUES (2)", NULL, NULL, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_close(c), SQLITE_OK);
  assert_true(t_file_size(DEST "-wal") > 0);
}

static void test_backup_replaces_atomically(void **state) {
  (void)state;
  lith *db = open_source();
  for (int i = 0; i < 25; i++)
    assert_int_equal(lith_do(db, next_cmd, NULL), LITH_OK);

  make_old_destination();
  long long old_size;
  uint64_t old_hash = hash_path(DEST, &old_size);
  assert_true(old_size > 0);
  int old_fd = open(DEST, O_RDONLY | O_CLOEXEC);
  assert_true(old_fd >= 0);
  struct stat old_st;
  assert_int_equal(fstat(old_fd, &old_st), 0);

  watcher w;
  memset(&w, 0, sizeof w);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, watch_main, &w), 0);
  while (atomic_load(&w.looks) < 3)
    usleep(1000);
  int rc = lith_backup(db, DEST);
  usleep(5000);
  atomic_store(&w.stop, 1);
  pthread_join(th, NULL);
  assert_int_equal(rc, LITH_OK);

  long long new_size;
  uint64_t new_hash = hash_path(DEST, &new_size);
  assert_true(new_hash != old_hash);
  assert_true(new_size > 4000000);
  /* the destination was always there, and always the old or the new file */
  assert_int_equal(w.missing, 0);
  for (int i = 0; i < w.nseen; i++) {
    if (w.seen[i] != old_hash && w.seen[i] != new_hash)
      fprintf(stderr, "watcher saw a state that is neither the old nor the new file\n");
    assert_true(w.seen[i] == old_hash || w.seen[i] == new_hash);
  }
  /* a new file took the name; the old one is intact behind its descriptor */
  struct stat new_st;
  assert_int_equal(stat(DEST, &new_st), 0);
  assert_true(new_st.st_ino != old_st.st_ino);
  long long still_size;
  assert_true(hash_fd(old_fd, &still_size) == old_hash);
  assert_int_equal(still_size, old_size);
  close(old_fd);

  /* the old -wal and -shm went with the old file */
  assert_false(exists(DEST "-wal"));
  assert_false(exists(DEST "-shm"));
  assert_int_equal(count_entries(DEST ".tmp"), 0);
  assert_int_equal(check_prefix(DEST), 25);
  assert_int_equal(t_query_int(DEST, "SELECT count(*) FROM sqlite_master WHERE name = 'old_marker'"), 0);

  /* and once more over the copy itself */
  assert_int_equal(lith_do(db, next_cmd, NULL), LITH_OK);
  assert_int_equal(lith_backup(db, DEST), LITH_OK);
  assert_int_equal(check_prefix(DEST), 26);
  assert_int_equal(lith_close(db), LITH_OK);
  t_remove_db(DB);
  t_remove_db(DEST);
}

/* ---- bad destinations ---------------------------------------------------- */

/* Entries of the current directory, not counting the source database's
 * own files. */
static int count_all_entries(void) { return count_entries("") - count_entries(DB); }

static void test_bad_destination(void **state) {
  (void)state;
  lith *db = open_source();
  assert_int_equal(lith_do(db, next_cmd, NULL), LITH_OK);
  int before = count_all_entries();

  /* a directory that does not exist */
  int rc = lith_backup(db, "no_such_dir/copy.db");
  assert_int_not_equal(rc, LITH_OK);
  assert_non_null(strstr(lith_errmsg(NULL), "no_such_dir"));
  assert_false(exists("no_such_dir"));
  assert_int_equal(count_all_entries(), before);

  /* the name of an existing directory: cannot be replaced by a file */
  assert_int_equal(mkdir("a_dir", 0755), 0);
  before = count_all_entries();
  rc = lith_backup(db, "a_dir");
  assert_int_not_equal(rc, LITH_OK);
  assert_true(strlen(lith_errmsg(NULL)) > 0);
  struct stat sb;
  assert_int_equal(stat("a_dir", &sb), 0);
  assert_true(S_ISDIR(sb.st_mode));
  assert_int_equal(count_all_entries(), before);
  assert_int_equal(count_entries("a_dir.tmp"), 0);
  DIR *d = opendir("a_dir");
  assert_non_null(d);
  int inside = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
      inside++;
  closedir(d);
  assert_int_equal(inside, 0);
  assert_int_equal(rmdir("a_dir"), 0);

  /* no name at all */
  assert_int_equal(lith_backup(db, ""), LITH_MISUSE);
  assert_true(strlen(lith_errmsg(NULL)) > 0);
  assert_int_equal(lith_backup(db, NULL), LITH_MISUSE);
  assert_int_equal(lith_backup(NULL, DEST), LITH_MISUSE);
  assert_false(exists(DEST));

  /* the handle is fine afterwards */
  assert_int_equal(lith_do(db, next_cmd, NULL), LITH_OK);
  assert_int_equal(lith_backup(db, DEST), LITH_OK);
  assert_int_equal(check_prefix(DEST), 2);
  assert_int_equal(lith_close(db), LITH_OK);
  t_remove_db(DB);
  t_remove_db(DEST);
}

/* ---- the live database as destination ----------------------------------- */

/* Backing up onto the database's own file (by its name or another spelling
 * of it) must not lose what is committed: lith_backup should refuse it (or
 * at least leave the live file alone). Every command answered afterwards
 * must be in the file, as seen by any new connection and after close. */
static void test_backup_onto_its_own_file_loses_nothing(void **state) {
  (void)state;
  static const char *const names[] = {DB, "./" DB};
  lith *db = open_source();
  int64_t committed = 0;
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    for (int j = 0; j < 5; j++, committed++)
      assert_int_equal(lith_do(db, next_cmd, NULL), LITH_OK);
    int rc = lith_backup(db, names[i]);
    if (rc != LITH_OK)
      assert_true(strlen(lith_errmsg(NULL)) > 0);
    for (int j = 0; j < 5; j++, committed++)
      assert_int_equal(lith_do(db, next_cmd, NULL), LITH_OK);
    /* a new connection opens the file by its name: it must see them all */
    int64_t seen = t_query_int(DB, "SELECT total FROM meta WHERE k = 1");
    if (seen != committed)
      fprintf(stderr, "after lith_backup(db, \"%s\") -> %s: %lld commands answered, %lld in the file\n",
              names[i], lith_errstr(rc), (long long)committed, (long long)seen);
    assert_int_equal(seen, committed);
  }
  assert_int_equal(lith_close(db), LITH_OK);
  t_assert_integrity(DB);
  assert_int_equal(check_prefix(DB), committed);
  t_remove_db(DB);
}

/* ---- the copy is a normal database -------------------------------------- */

static int64_t one_int(sqlite3 *c, const char *sql) {
  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_prepare_v2(c, sql, -1, &st, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  int64_t v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

static void test_backup_opens_as_a_normal_database(void **state) {
  (void)state;
  lith *db = open_source();
  for (int i = 0; i < 7; i++)
    assert_int_equal(lith_do(db, next_cmd, NULL), LITH_OK);
  t_remove_db(DEST);
  assert_int_equal(lith_backup(db, DEST), LITH_OK);
  assert_int_equal(lith_close(db), LITH_OK);
  t_remove_db(DB); /* the copy stands alone */

  /* self-contained: nothing beside it */
  assert_true(exists(DEST));
  assert_false(exists(DEST "-wal"));
  assert_false(exists(DEST "-shm"));
  assert_false(exists(DEST "-journal"));

  sqlite3 *c = NULL;
  assert_int_equal(sqlite3_open_v2(DEST, &c, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
  assert_int_equal(one_int(c, "PRAGMA user_version"), 2);
  assert_int_equal(one_int(c, "SELECT count(*) FROM seq"), 7);
  assert_int_equal(one_int(c, "SELECT count(*) FROM bulk"), 1000);
  assert_int_equal(
      sqlite3_exec(c, "INSERT INTO seq(n, v) VALUES (8, 8 * 7919 % 1000003); UPDATE meta SET total = 8", NULL,
                   NULL, NULL),
      SQLITE_OK);
  assert_int_equal(one_int(c, "SELECT count(*) FROM seq"), 8);
  assert_int_equal(sqlite3_close(c), SQLITE_OK);
  assert_int_equal(check_prefix(DEST), 8);

  /* lith opens it: migrations are not run again (migration 1's INSERT would
   * fail on the existing meta row), and commands run */
  lith_options opt;
  lith_options_default(&opt);
  opt.readers = 1;
  opt.migrations = migrations;
  opt.n_migrations = 2;
  lith *copy = NULL;
  int rc = lith_open(DEST, &opt, &copy);
  if (rc != LITH_OK)
    fprintf(stderr, "lith_open(copy): %s\n", lith_errmsg(NULL));
  assert_int_equal(rc, LITH_OK);
  assert_int_equal(lith_do(copy, next_cmd, NULL), LITH_OK);
  assert_int_equal(lith_close(copy), LITH_OK);
  assert_int_equal(check_prefix(DEST), 9);
  t_remove_db(DEST);
}

/* lith_backup_new writes a new file or nothing: whatever stands at the
 * destination (a file, an empty file, a symbolic link to a file elsewhere, a
 * FIFO that would block a writer for ever) is refused at once and left as
 * it was, and no temporary file is left behind. */
static void test_backup_new_never_replaces(void **state) {
  (void)state;
  lith *db = open_source();
  for (int i = 0; i < 3; i++)
    assert_int_equal(lith_do(db, next_cmd, NULL), LITH_OK);
  t_remove_db(DEST);
  assert_int_equal(lith_backup_new(db, DEST), LITH_OK);
  assert_int_equal(check_prefix(DEST), 3);
  struct stat st;
  assert_int_equal(stat(DEST, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  /* a second time: it exists now */
  assert_int_equal(lith_backup_new(db, DEST), LITH_MISUSE);
  assert_non_null(strstr(lith_errmsg(db), "exists"));
  assert_int_equal(check_prefix(DEST), 3);

  /* an empty file, a file of someone else's, a link, a FIFO */
  FILE *f = fopen("victim.txt", "w");
  assert_non_null(f);
  fputs("ssh-ed25519 AAAA... keep me\n", f);
  fclose(f);
  f = fopen("empty.txt", "w");
  assert_non_null(f);
  fclose(f);
  unlink("link.db");
  assert_int_equal(symlink("victim.txt", "link.db"), 0);
  unlink("fifo.db");
  assert_int_equal(mkfifo("fifo.db", 0600), 0);
  static const char *const taken[] = {"victim.txt", "empty.txt", "link.db", "fifo.db"};
  for (size_t i = 0; i < sizeof taken / sizeof *taken; i++) {
    int64_t t0 = lith_clock_ms();
    assert_int_equal(lith_backup_new(db, taken[i]), LITH_MISUSE);
    assert_true(lith_clock_ms() - t0 < 5000);
  }
  char buf[64] = {0};
  f = fopen("victim.txt", "r");
  assert_non_null(f);
  assert_non_null(fgets(buf, sizeof buf, f));
  fclose(f);
  assert_string_equal(buf, "ssh-ed25519 AAAA... keep me\n");
  assert_int_equal(stat("empty.txt", &st), 0);
  assert_int_equal(st.st_size, 0);
  assert_int_equal(lstat("link.db", &st), 0);
  assert_true(S_ISLNK(st.st_mode));
  assert_int_equal(lstat("fifo.db", &st), 0);
  assert_true(S_ISFIFO(st.st_mode));
  /* nothing left behind */
  DIR *d = opendir(".");
  assert_non_null(d);
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    if (strstr(e->d_name, ".tmp-"))
      fail_msg("left behind: %s", e->d_name);
  closedir(d);
  assert_int_equal(lith_close(db), LITH_OK);
  unlink("victim.txt");
  unlink("empty.txt");
  unlink("link.db");
  unlink("fifo.db");
  t_remove_db(DEST);
}

/* ---- lith_interrupt ------------------------------------------------------ */

typedef struct interrupter {
  lith *db;
  _Atomic int stop;
  _Atomic long calls;
} interrupter;

static void *interrupt_main(void *arg) {
  interrupter *k = arg;
  while (!atomic_load(&k->stop)) {
    assert_int_equal(lith_interrupt(k->db), LITH_OK);
    atomic_fetch_add(&k->calls, 1);
    usleep(1000);
  }
  return NULL;
}

/* A backup in progress stops at its next step: LITH_INTERRUPTED, nothing
 * written, no temporary file left; the next backup is whole. */
static void test_interrupt_stops_a_backup(void **state) {
  (void)state;
  lith *db = open_source();
  int rows = 9000; /* ~40 MB with open_source's: ~40 steps, tens of ms */
  assert_int_equal(lith_do(db, bulk_cmd, &rows), LITH_OK);
  interrupter k = {db, 0, 0};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, interrupt_main, &k), 0);
  while (atomic_load(&k.calls) == 0)
    usleep(100);
  int64_t t0 = lith_clock_ms();
  int rc = lith_backup_new(db, DEST);
  int64_t took = lith_clock_ms() - t0;
  atomic_store(&k.stop, 1);
  pthread_join(th, NULL);
  print_message("backup interrupted after %lld ms: %s\n", (long long)took, lith_errmsg(NULL));
  assert_int_equal(rc, LITH_INTERRUPTED);
  assert_false(exists(DEST));
  assert_int_equal(count_entries(DEST ".tmp"), 0);
  /* Interrupts before a backup began do not touch it. */
  assert_int_equal(lith_interrupt(db), LITH_OK);
  t0 = lith_clock_ms();
  assert_int_equal(lith_backup_new(db, DEST), LITH_OK);
  print_message("a whole backup: %lld ms\n", (long long)(lith_clock_ms() - t0));
  assert_int_equal(t_query_int(DEST, "SELECT count(*) FROM bulk"), 10000);
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(lith_interrupt(NULL), LITH_MISUSE);
  t_remove_db(DB);
  t_remove_db(DEST);
}

/* ---- backups and the WAL hold ------------------------------------------ */

typedef struct backups {
  lith *db;
  _Atomic int stop, done, failed;
} backups;

static void *backups_main(void *arg) {
  backups *b = arg;
  while (!atomic_load(&b->stop)) {
    if (lith_backup(b->db, DEST) == LITH_OK)
      atomic_fetch_add(&b->done, 1);
    else
      atomic_fetch_add(&b->failed, 1);
    usleep(20 * 1000); /* room for a hold between two */
  }
  return NULL;
}

static void test_backups_are_not_outside_readers(void **state) {
  (void)state;
  enum { NW = 2 };
  writers w;
  memset(&w, 0, sizeof w);
  w.db = open_source(); /* checkpoint_pages 200: a hold once the WAL holds 800 */
  lith_stats st0;
  lith_stats_get(w.db, &st0);
  pthread_t th[NW], bth;
  backups b = {w.db, 0, 0, 0};
  for (int i = 0; i < NW; i++)
    assert_int_equal(pthread_create(&th[i], NULL, writer_main, &w), 0);
  assert_int_equal(pthread_create(&bth, NULL, backups_main, &b), 0);
  int64_t end = lith_clock_ms() + 3000;
  while (lith_clock_ms() < end)
    usleep(10 * 1000);
  atomic_store(&b.stop, 1);
  pthread_join(bth, NULL);
  /* the backups over, the holds go on (at most 10 s more) */
  lith_stats st;
  lith_stats_get(w.db, &st);
  uint64_t holds = st.wal_holds;
  for (int i = 0; i < 1000 && st.wal_holds == holds; i++) {
    usleep(10 * 1000);
    lith_stats_get(w.db, &st);
  }
  atomic_store(&w.stop, 1);
  for (int i = 0; i < NW; i++)
    pthread_join(th[i], NULL);
  lith_stats_get(w.db, &st);
  print_message(
      "%d backups; %ld commands; %llu holds (%llu gave up), %llu restarts blocked, -wal %llu bytes\n",
      atomic_load(&b.done), atomic_load(&w.answered), (unsigned long long)(st.wal_holds - st0.wal_holds),
      (unsigned long long)st.wal_holds_gave_up, (unsigned long long)st.wal_restart_blocked,
      (unsigned long long)st.wal_file_bytes);
  assert_int_equal(atomic_load(&b.failed), 0);
  assert_true(atomic_load(&b.done) >= 3);
  assert_int_equal(atomic_load(&w.errors), 0);
  assert_true(st.wal_holds > holds);
  assert_int_equal(st.wal_restart_blocked, 0); /* no reader outside lith */
  check_prefix(DEST);
  assert_int_equal(lith_close(w.db), LITH_OK);
  assert_int_equal(t_query_int(DB, "SELECT total FROM meta"), atomic_load(&w.answered));
  t_remove_db(DB);
  t_remove_db(DEST);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_backup_while_committing),
      cmocka_unit_test(test_backup_does_not_wait_for_the_writer),
      cmocka_unit_test(test_backup_replaces_atomically),
      cmocka_unit_test(test_bad_destination),
      cmocka_unit_test(test_backup_opens_as_a_normal_database),
      cmocka_unit_test(test_backup_new_never_replaces),
      cmocka_unit_test(test_backup_onto_its_own_file_loses_nothing),
      cmocka_unit_test(test_interrupt_stops_a_backup),
      cmocka_unit_test(test_backups_are_not_outside_readers),
  };
  if (getenv("TEST_FILTER")) /* one test by name */
    cmocka_set_test_filter(getenv("TEST_FILTER"));
  return cmocka_run_group_tests_name("sqlite/backup", tests, NULL, NULL);
}
