/*
 * Inside a command (writer/tx.c), the lith_tx_* calls:
 *   - nested savepoints undo alone, two deep, and what they touched with
 *     them; on_commit sees exactly the touched topics of the committed
 *     commands, each once, in first-touched order;
 *   - lith_tx_stmt hands out the cached statement (the same one again once
 *     reset), NULL for bad SQL with lith_tx_rc and the message set;
 *   - lith_tx_exec binds each type letter ('i', 'I', 'd', 's', 's' NULL,
 *     'n'); lith_tx_int64 reads the first column, or LITH_ERROR "no row";
 *   - 't' binds text of the length given (embedded NULs kept, nothing past
 *     it), 'b' a blob (a zero-length one with a non-NULL pointer), both
 *     NULL for a NULL pointer with the arguments after them still in line;
 *     an unknown letter is LITH_MISUSE; lith_rx_int64 binds them too;
 *   - lith_tx_changes and lith_tx_last_insert_rowid: this command's own
 *     (0 at its start, also right after another command of its batch
 *     inserted), through lith_tx_exec, lith_cmd_sql or its own statement;
 *   - lith_tx_rc is LITH_OK until a call fails, then that call's code;
 *     lith_tx_error's message (printf-style) reaches lith_do's caller;
 *   - lith_tx_db is the write connection, inside the writer's transaction;
 *   - lith_cmd_sql runs several statements, refuses NULL (LITH_MISUSE) and
 *     names itself in an SQL error's message;
 *   - lith_tx_savepoint without a function is LITH_MISUSE; a failed nested
 *     savepoint keeps its function's message, not the undo's.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common.h"

#define DB "tx.db"

static int64_t count_kv(const char *k) {
  char sql[256];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM kv WHERE k = '%s'", k);
  return t_query_int(DB, sql);
}

static lith *open_db(void) {
  lith_options opt;
  t_bank_options(&opt);
  return t_open_fresh(DB, &opt);
}

static int inner_fail(lith_tx *tx, void *arg) {
  (void)arg;
  lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES ('y', 1)", NULL);
  lith_tx_touch(tx, 98);
  return lith_tx_error(tx, LITH_USER, "inner refused");
}

static int inner_ok(lith_tx *tx, void *arg) {
  (void)arg;
  int rc = lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES ('w', 1)", NULL);
  if (rc != LITH_OK)
    return rc;
  /* a failing savepoint nested two deep */
  assert_int_equal(lith_tx_savepoint(tx, inner_fail, NULL), LITH_USER);
  return LITH_OK;
}

static int outer(lith_tx *tx, void *arg) {
  (void)arg;
  int rc = lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES ('x', 1)", NULL);
  if (rc != LITH_OK)
    return rc;
  lith_tx_touch(tx, 1);
  rc = lith_tx_savepoint(tx, inner_fail, NULL);
  assert_int_equal(rc, LITH_USER);
  assert_int_equal(lith_tx_savepoint(tx, inner_ok, NULL), LITH_OK);
  lith_tx_touch(tx, 2);
  return lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES ('z', 1)", NULL);
}

typedef struct hook_log {
  int64_t topics[64];
  int n;
  int calls;
} hook_log;

static void on_commit(void *ctx, const int64_t *topics, int n) {
  hook_log *h = ctx;
  h->calls++;
  for (int i = 0; i < n && h->n < 64; i++)
    h->topics[h->n++] = topics[i];
}

static void test_nested_savepoints(void **state) {
  (void)state;
  lith_options opt;
  hook_log log = {0};
  t_bank_options(&opt);
  opt.on_commit = on_commit;
  opt.on_commit_ctx = &log;
  lith *db = t_open_fresh(DB, &opt);
  assert_int_equal(lith_do(db, outer, NULL), LITH_OK);
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(count_kv("x"), 1);
  assert_int_equal(count_kv("y"), 0);
  assert_int_equal(count_kv("w"), 1);
  assert_int_equal(count_kv("z"), 1);
  /* topic 98 was touched only inside failed savepoints */
  assert_int_equal(log.n, 2);
  assert_int_equal(log.topics[0], 1);
  assert_int_equal(log.topics[1], 2);
}

typedef struct touch_arg {
  const char *key;
  int64_t topics[3];
  int fail;
} touch_arg;

static int touch_cmd(lith_tx *tx, void *arg) {
  touch_arg *a = arg;
  for (int i = 0; i < 3; i++)
    if (a->topics[i])
      lith_tx_touch(tx, a->topics[i]);
  int rc = lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES (?, 1)", "s", a->key);
  return rc != LITH_OK ? rc : a->fail ? LITH_USER : LITH_OK;
}

static void test_touch_reports_exactly_committed_topics(void **state) {
  (void)state;
  lith_options opt;
  hook_log log = {0};
  t_bank_options(&opt);
  opt.on_commit = on_commit;
  opt.on_commit_ctx = &log;
  lith *db = t_open_fresh(DB, &opt);
  t_gate gate;
  t_async done = {0};
  lith_request r[4];
  touch_arg a[4] = {
      {"t1", {7, 3, 7}, 0},
      {"t2", {99, 0, 0}, 1}, /* fails: 99 must not be reported */
      {"t3", {3, 11, 0}, 0},
      {"t1", {55, 0, 0}, 0}, /* duplicate key: constraint error, 55 not reported */
  };
  t_gate_close(db, &gate);
  int calls_before = log.calls; /* on_commit runs on the writer: log.calls moves below */
  for (int i = 0; i < 4; i++)
    t_submit(db, &r[i], touch_cmd, &a[i], &done);
  t_gate_open(&gate);
  t_async_wait(&done, 4);
  assert_int_equal(r[0].rc, LITH_OK);
  assert_int_equal(r[1].rc, LITH_USER);
  assert_int_equal(r[2].rc, LITH_OK);
  assert_int_equal(r[3].rc, LITH_CONSTRAINT);
  // cppcheck-suppress duplicateExpression
  assert_int_equal(log.calls - calls_before, 1);
  /* each once, in first-touched order */
  assert_int_equal(log.n, 3);
  assert_int_equal(log.topics[0], 7);
  assert_int_equal(log.topics[1], 3);
  assert_int_equal(log.topics[2], 11);
  assert_int_equal(lith_close(db), LITH_OK);
}

/* ---- statements and values --------------------------------------------- */

typedef struct stmt_seen {
  sqlite3_stmt *first, *again, *bad;
  int rc_before, rc_after;
  char msg[LITH_ERRMSG_MAX];
} stmt_seen;

static int stmt_cmd(lith_tx *tx, void *arg) {
  stmt_seen *s = arg;
  s->rc_before = lith_tx_rc(tx);
  s->first = lith_tx_stmt(tx, "SELECT count(*) FROM kv");
  assert_non_null(s->first);
  assert_int_equal(sqlite3_step(s->first), SQLITE_ROW);
  sqlite3_reset(s->first);
  s->again = lith_tx_stmt(tx, "SELECT count(*) FROM kv");
  s->bad = lith_tx_stmt(tx, "SELECT x FROM no_such_table");
  s->rc_after = lith_tx_rc(tx);
  snprintf(s->msg, sizeof s->msg, "%s", lith_errmsg(NULL));
  return LITH_OK;
}

static void test_stmt_cached_and_errors_noted(void **state) {
  (void)state;
  lith *db = open_db();
  stmt_seen s;
  memset(&s, 0, sizeof s);
  assert_int_equal(lith_do(db, stmt_cmd, &s), LITH_OK);
  assert_int_equal(s.rc_before, LITH_OK);
  assert_ptr_equal(s.first, s.again); /* cached, handed out again once reset */
  assert_null(s.bad);
  assert_int_equal(s.rc_after, LITH_ERROR);
  assert_non_null(strstr(s.msg, "no_such_table"));
  assert_int_equal(lith_close(db), LITH_OK);
}

typedef struct typed {
  int64_t i, big, no_row_rc, no_row_value;
  double d;
  int64_t text_is_null, n_is_null;
  char no_row_msg[LITH_ERRMSG_MAX];
} typed;

static int typed_cmd(lith_tx *tx, void *arg) {
  typed *t = arg;
  int rc = lith_tx_exec(tx, "CREATE TABLE t(a INTEGER, b INTEGER, c REAL, d TEXT, e TEXT, f)", NULL);
  if (rc == LITH_OK)
    rc = lith_tx_exec(tx, "INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)", "iIdssn", 42, (int64_t)1 << 40, 2.5,
                      "text", (const char *)NULL);
  if (rc != LITH_OK)
    return rc;
  if ((rc = lith_tx_int64(tx, &t->i, "SELECT a FROM t", NULL)) != LITH_OK ||
      (rc = lith_tx_int64(tx, &t->big, "SELECT b FROM t WHERE d = ?", "s", "text")) != LITH_OK ||
      (rc = lith_tx_int64(tx, &t->text_is_null, "SELECT e IS NULL FROM t", NULL)) != LITH_OK ||
      (rc = lith_tx_int64(tx, &t->n_is_null, "SELECT f IS NULL FROM t", NULL)) != LITH_OK)
    return rc;
  sqlite3_stmt *st = lith_tx_stmt(tx, "SELECT c FROM t");
  assert_non_null(st);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  t->d = sqlite3_column_double(st, 0);
  sqlite3_reset(st);
  t->no_row_value = -7;
  t->no_row_rc = lith_tx_int64(tx, &t->no_row_value, "SELECT a FROM t WHERE a = ?", "i", 0);
  snprintf(t->no_row_msg, sizeof t->no_row_msg, "%s", lith_errmsg(NULL));
  return LITH_OK;
}

static void test_exec_binds_each_type_int64_reads(void **state) {
  (void)state;
  lith *db = open_db();
  typed t;
  memset(&t, 0, sizeof t);
  assert_int_equal(lith_do(db, typed_cmd, &t), LITH_OK);
  assert_int_equal(t.i, 42);
  assert_int_equal(t.big, (int64_t)1 << 40);
  assert_true(t.d == 2.5);
  assert_int_equal(t.text_is_null, 1);
  assert_int_equal(t.n_is_null, 1);
  assert_int_equal(t.no_row_rc, LITH_ERROR);
  assert_non_null(strstr(t.no_row_msg, "no row"));
  assert_int_equal(t.no_row_value, -7); /* untouched */
  assert_int_equal(lith_close(db), LITH_OK);
}

/* ---- 't' (text + length) and 'b' (blob + length) ------------------------- */

typedef struct cell {
  char type[8];
  char hex[64];
  int64_t bytes;
} cell;

/* What column v of blobs' row k holds: its type, hex and size in bytes. */
static void read_cell(lith_tx *tx, const char *k, cell *c) {
  sqlite3_stmt *st =
      lith_tx_stmt(tx, "SELECT typeof(v), hex(v), length(CAST(v AS BLOB)) FROM blobs WHERE k = ?");
  assert_non_null(st);
  assert_int_equal(sqlite3_bind_text(st, 1, k, -1, SQLITE_STATIC), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  snprintf(c->type, sizeof c->type, "%s", (const char *)sqlite3_column_text(st, 0));
  snprintf(c->hex, sizeof c->hex, "%s", (const char *)sqlite3_column_text(st, 1));
  c->bytes = sqlite3_column_type(st, 2) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 2);
  sqlite3_reset(st);
}

typedef struct lengths {
  cell nul_text, short_text, null_text, bin, empty, null_blob, after;
  int64_t after_int, rx_text_bytes, rx_blob_bytes;
  int bad_letter_rc;
  char bad_letter_msg[LITH_ERRMSG_MAX];
} lengths;

static int lengths_cmd(lith_tx *tx, void *arg) {
  lengths *l = arg;
  static const char nul_text[] = {'a', 'b', 0, 'c', 'd'}; /* no terminator */
  static const unsigned char bin[] = {0, 1, 2, 0, 255};
  char *scratch = strdup("hello world"); /* freed at once: the bytes were copied */
  int rc = lith_tx_exec(tx, "CREATE TABLE blobs(k TEXT PRIMARY KEY, v, w)", NULL);
  const char *ins = "INSERT INTO blobs(k, v) VALUES (?, ?)";
  if (rc == LITH_OK)
    rc = lith_tx_exec(tx, ins, "st", "nul_text", nul_text, sizeof nul_text);
  if (rc == LITH_OK)
    rc = lith_tx_exec(tx, ins, "st", "short_text", scratch, (size_t)5);
  free(scratch);
  if (rc == LITH_OK)
    rc = lith_tx_exec(tx, ins, "st", "null_text", (const char *)NULL, (size_t)3);
  if (rc == LITH_OK)
    rc = lith_tx_exec(tx, ins, "sb", "bin", bin, sizeof bin);
  if (rc == LITH_OK)
    rc = lith_tx_exec(tx, ins, "sb", "empty", "", (size_t)0);
  if (rc == LITH_OK) /* NULL pointer: NULL; its length is still taken, so 'I' reads the right argument */
    rc = lith_tx_exec(tx, "INSERT INTO blobs(k, v, w) VALUES (?, ?, ?)", "sbI", "null_blob",
                      (const void *)NULL, (size_t)7, (int64_t)1 << 40);
  if (rc == LITH_OK)
    rc = lith_tx_exec(tx, "INSERT INTO blobs(k, v, w) VALUES (?, ?, ?)", "tbt", "after", (size_t)5, bin,
                      (size_t)2, "xyz", (size_t)3);
  if (rc != LITH_OK)
    return rc;
  read_cell(tx, "nul_text", &l->nul_text);
  read_cell(tx, "short_text", &l->short_text);
  read_cell(tx, "null_text", &l->null_text);
  read_cell(tx, "bin", &l->bin);
  read_cell(tx, "empty", &l->empty);
  read_cell(tx, "null_blob", &l->null_blob);
  read_cell(tx, "after", &l->after);
  if ((rc = lith_tx_int64(tx, &l->after_int, "SELECT w FROM blobs WHERE k = ?", "t", "null_blobXXX",
                          (size_t)9)) != LITH_OK)
    return rc;
  l->bad_letter_rc = lith_tx_exec(tx, ins, "sx", "bad", 1);
  snprintf(l->bad_letter_msg, sizeof l->bad_letter_msg, "%s", lith_errmsg(NULL));
  return LITH_OK;
}

static int lengths_read(lith_rx *rx, void *arg) {
  lengths *l = arg;
  static const char nul_text[] = {'a', 'b', 0, 'c', 'd'};
  int rc =
      lith_rx_int64(rx, &l->rx_text_bytes, "SELECT length(CAST(? AS BLOB))", "t", nul_text, sizeof nul_text);
  if (rc == LITH_OK)
    rc = lith_rx_int64(rx, &l->rx_blob_bytes, "SELECT count(*) FROM blobs WHERE v = ?", "b", "\0\1\2\0\377",
                       (size_t)5);
  return rc;
}

static void test_exec_binds_text_and_blob_with_lengths(void **state) {
  (void)state;
  lith *db = open_db();
  lengths l;
  memset(&l, 0, sizeof l);
  assert_int_equal(lith_do(db, lengths_cmd, &l), LITH_OK);
  /* 't': the bytes given, NULs included, nothing past the length */
  assert_string_equal(l.nul_text.type, "text");
  assert_string_equal(l.nul_text.hex, "6162006364");
  assert_int_equal(l.nul_text.bytes, 5);
  assert_string_equal(l.short_text.type, "text");
  assert_string_equal(l.short_text.hex, "68656C6C6F"); /* "hello" */
  assert_string_equal(l.null_text.type, "null");
  /* 'b': the bytes given; a non-NULL pointer of length 0 is the empty blob */
  assert_string_equal(l.bin.type, "blob");
  assert_string_equal(l.bin.hex, "00010200FF");
  assert_int_equal(l.bin.bytes, 5);
  assert_string_equal(l.empty.type, "blob");
  assert_string_equal(l.empty.hex, "");
  assert_int_equal(l.empty.bytes, 0);
  assert_string_equal(l.null_blob.type, "null");
  assert_int_equal(l.after_int, (int64_t)1 << 40); /* the arguments after a NULL blob line up */
  assert_string_equal(l.after.type, "blob");
  assert_string_equal(l.after.hex, "0001");
  assert_int_equal(l.bad_letter_rc, LITH_MISUSE);
  assert_non_null(strstr(l.bad_letter_msg, "unknown type 'x'"));
  /* the readers bind the same letters */
  assert_int_equal(lith_read(db, lengths_read, &l), LITH_OK);
  assert_int_equal(l.rx_text_bytes, 5);
  assert_int_equal(l.rx_blob_bytes, 1);
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM blobs WHERE w = 'xyz'"), 1);
}

/* ---- lith_tx_changes, lith_tx_last_insert_rowid -------------------------- */

typedef struct changes_seen {
  int64_t at_start, rowid_at_start, insert, rowid, update_all, update_none, rowid_after_update, exec_delete,
      own_stmt;
  int rc;
} changes_seen;

/* Two commands in one batch and one alone: each starts at 0, never with the
 * command before it's figures. */
static int changes_cmd(lith_tx *tx, void *arg) {
  changes_seen *c = arg;
  c->at_start = lith_tx_changes(tx);
  c->rowid_at_start = lith_tx_last_insert_rowid(tx);
  int rc = lith_tx_exec(tx, "INSERT INTO accounts(id, balance) VALUES (?, 0)", "I", (int64_t)c->rc);
  if (rc != LITH_OK)
    return rc;
  c->insert = lith_tx_changes(tx);
  c->rowid = lith_tx_last_insert_rowid(tx);
  if ((rc = lith_tx_exec(tx, "UPDATE accounts SET balance = balance + 1", NULL)) != LITH_OK)
    return rc;
  c->update_all = lith_tx_changes(tx);
  if ((rc = lith_tx_exec(tx, "UPDATE accounts SET balance = 0 WHERE id < 0", NULL)) != LITH_OK)
    return rc;
  c->update_none = lith_tx_changes(tx);
  c->rowid_after_update = lith_tx_last_insert_rowid(tx);
  if ((rc = lith_cmd_sql(tx, "DELETE FROM kv WHERE k LIKE 'del%'")) != LITH_OK)
    return rc;
  c->exec_delete = lith_tx_changes(tx);
  sqlite3_stmt *st = NULL; /* a statement of its own, outside the cache */
  if (sqlite3_prepare_v2(lith_tx_db(tx), "UPDATE kv SET v = v + 1", -1, &st, NULL) != SQLITE_OK)
    return LITH_ERROR;
  rc = sqlite3_step(st) == SQLITE_DONE ? LITH_OK : LITH_ERROR;
  sqlite3_finalize(st);
  c->own_stmt = lith_tx_changes(tx);
  return rc;
}

/* Changes a row and does nothing after it: the next command must not see it. */
static int noisy_cmd(lith_tx *tx, void *arg) {
  (void)arg;
  return lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES ('noise', 1)", NULL);
}

static int quiet_cmd(lith_tx *tx, void *arg) {
  changes_seen *c = arg;
  c->at_start = lith_tx_changes(tx);
  c->rowid_at_start = lith_tx_last_insert_rowid(tx);
  return LITH_OK;
}

static void test_changes_and_last_insert_rowid(void **state) {
  (void)state;
  lith *db = open_db();
  t_seed_accounts(db, 5, 10);
  assert_int_equal(lith_do(db, lith_cmd_sql, "INSERT INTO kv VALUES ('del1', 1), ('del2', 1), ('keep', 1)"),
                   LITH_OK);
  changes_seen c;
  memset(&c, 0, sizeof c);
  c.rc = 77; /* the id to insert */
  assert_int_equal(lith_do(db, changes_cmd, &c), LITH_OK);
  assert_int_equal(c.at_start, 0);       /* not the seeding's 1 */
  assert_int_equal(c.rowid_at_start, 0); /* not the seeding's rowid */
  assert_int_equal(c.insert, 1);
  assert_int_equal(c.rowid, 77);
  assert_int_equal(c.update_all, 6);
  assert_int_equal(c.update_none, 0);
  assert_int_equal(c.rowid_after_update, 77);
  assert_int_equal(c.exec_delete, 2);
  assert_int_equal(c.own_stmt, 1);

  /* in one batch: after a command that inserted, the next one starts at 0 */
  t_gate gate;
  t_async done = {0};
  lith_request r[2];
  changes_seen q;
  memset(&q, 0, sizeof q);
  q.at_start = q.rowid_at_start = -1;
  t_gate_close(db, &gate);
  t_submit(db, &r[0], noisy_cmd, NULL, &done);
  t_submit(db, &r[1], quiet_cmd, &q, &done);
  t_gate_open(&gate);
  t_async_wait(&done, 2);
  assert_int_equal(r[0].rc, LITH_OK);
  assert_int_equal(r[1].rc, LITH_OK);
  assert_int_equal(q.at_start, 0);
  assert_int_equal(q.rowid_at_start, 0);
  assert_int_equal(lith_close(db), LITH_OK);
}

/* ---- the connection, lith_cmd_sql, misuse -------------------------------- */

typedef struct conn_seen {
  int readonly, autocommit;
} conn_seen;

static int conn_cmd(lith_tx *tx, void *arg) {
  conn_seen *c = arg;
  sqlite3 *conn = lith_tx_db(tx);
  assert_non_null(conn);
  c->readonly = sqlite3_db_readonly(conn, "main");
  c->autocommit = sqlite3_get_autocommit(conn);
  return LITH_OK;
}

static int savepoint_null(lith_tx *tx, void *arg) {
  (void)arg;
  int rc = lith_tx_savepoint(tx, NULL, NULL);
  assert_int_equal(lith_tx_rc(tx), LITH_MISUSE);
  return rc;
}

static int refuse_inner(lith_tx *tx, void *arg) {
  (void)arg;
  return lith_tx_error(tx, LITH_USER + 3, "inner says no (%d)", 3);
}

static int keep_inner_message(lith_tx *tx, void *arg) {
  (void)arg;
  return lith_tx_savepoint(tx, refuse_inner, NULL);
}

static void test_db_cmd_sql_and_misuse(void **state) {
  (void)state;
  lith *db = open_db();
  conn_seen c = {-1, -1};
  assert_int_equal(lith_do(db, conn_cmd, &c), LITH_OK);
  assert_int_equal(c.readonly, 0);
  assert_int_equal(c.autocommit, 0); /* inside the writer's transaction */

  assert_int_equal(lith_do(db, lith_cmd_sql,
                           "INSERT INTO kv(k, v) VALUES ('s1', 1); INSERT INTO kv(k, v) VALUES ('s2', 2);"),
                   LITH_OK);
  assert_int_equal(lith_do(db, lith_cmd_sql, NULL), LITH_MISUSE);
  assert_non_null(strstr(lith_errmsg(db), "lith_cmd_sql"));
  assert_int_equal(
      lith_do(db, lith_cmd_sql, "INSERT INTO kv(k, v) VALUES ('s3', 3); INSERT INTO nowhere VALUES (1);"),
      LITH_ERROR);
  assert_non_null(strstr(lith_errmsg(db), "lith_cmd_sql"));
  assert_non_null(strstr(lith_errmsg(db), "nowhere"));

  assert_int_equal(lith_do(db, savepoint_null, NULL), LITH_MISUSE);
  assert_non_null(strstr(lith_errmsg(db), "lith_tx_savepoint"));
  assert_int_equal(lith_do(db, keep_inner_message, NULL), LITH_USER + 3);
  assert_string_equal(lith_errmsg(db), "inner says no (3)");
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(count_kv("s1"), 1);
  assert_int_equal(count_kv("s2"), 1);
  assert_int_equal(count_kv("s3"), 0); /* the failed command left nothing */
}

/* The hook runs after the commit and BEFORE the producers are answered
 * (lith.h, lith_commit_hook): a server that pushes "changed" events from
 * it must never be overtaken by the answer. Each producer's command
 * touches a topic of its own; when lith_do returns, the hook must already
 * have seen that topic. Many producers, so batches hold several. */
#define ORDER_THREADS 8
#define ORDER_EACH 150
static atomic_int order_seen[ORDER_THREADS * ORDER_EACH];
static atomic_int order_late;

static void order_hook(void *ctx, const int64_t *topics, int n) {
  (void)ctx;
  for (int i = 0; i < n; i++)
    if (topics[i] >= 0 && topics[i] < ORDER_THREADS * ORDER_EACH)
      atomic_store_explicit(&order_seen[topics[i]], 1, memory_order_release);
}

typedef struct order_arg {
  lith *db;
  int id;
} order_arg;

static int order_cmd(lith_tx *tx, void *arg) {
  int64_t topic = *(const int64_t *)arg;
  char key[32];
  snprintf(key, sizeof key, "order-%lld", (long long)topic);
  lith_tx_touch(tx, topic);
  return lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES (?, 1)", "s", key);
}

static void *order_producer(void *p) {
  order_arg *a = p;
  for (int k = 0; k < ORDER_EACH; k++) {
    int64_t topic = (int64_t)a->id * ORDER_EACH + k;
    if (lith_do(a->db, order_cmd, &topic) == LITH_OK &&
        !atomic_load_explicit(&order_seen[topic], memory_order_acquire))
      atomic_fetch_add(&order_late, 1);
  }
  return NULL;
}

static void test_hook_runs_before_answers(void **state) {
  (void)state;
  lith_options opt;
  pthread_t th[ORDER_THREADS];
  order_arg args[ORDER_THREADS];
  t_bank_options(&opt);
  opt.on_commit = order_hook;
  lith *db = t_open_fresh(DB, &opt);
  for (int i = 0; i < ORDER_THREADS; i++) {
    args[i] = (order_arg){db, i};
    assert_int_equal(pthread_create(&th[i], NULL, order_producer, &args[i]), 0);
  }
  for (int i = 0; i < ORDER_THREADS; i++)
    pthread_join(th[i], NULL);
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(atomic_load(&order_late), 0);
  for (int t = 0; t < ORDER_THREADS * ORDER_EACH; t++)
    assert_int_equal(atomic_load(&order_seen[t]), 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_nested_savepoints),
      cmocka_unit_test(test_touch_reports_exactly_committed_topics),
      cmocka_unit_test(test_hook_runs_before_answers),
      cmocka_unit_test(test_stmt_cached_and_errors_noted),
      cmocka_unit_test(test_exec_binds_each_type_int64_reads),
      cmocka_unit_test(test_exec_binds_text_and_blob_with_lengths),
      cmocka_unit_test(test_changes_and_last_insert_rowid),
      cmocka_unit_test(test_db_cmd_sql_and_misuse),
  };
  return cmocka_run_group_tests_name("writer/tx", tests, NULL, NULL);
}
