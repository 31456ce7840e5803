/*
 * Inside a command: the calls a command makes on its lith_tx. They run on
 * the writer thread only. Every error they meet is remembered on the tx
 * (code and message), so the producer gets a useful message even when the
 * command just returns the code.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/clock.h"
#include "../lib/error.h"
#include "../sqlite/bind.h"
#include "../sqlite/errcode.h"
#include "writer.h"

/* SQLite says only "not authorized": add which of lith's rules refused,
 * so that the caller's lith_errmsg says it too (lithd answers with it). */
static void add_why(const lith *db) {
  const char *msg = lith_errmsg(NULL);
  if (!db->auth_why[0] || !strstr(msg, "not authorized") || strstr(msg, db->auth_why))
    return;
  char buf[LITH_ERRMSG_MAX];
  lith__strlcpy(buf, msg, sizeof buf);
  size_t len = strlen(buf);
  snprintf(buf + len, sizeof buf - len, " (%s)", db->auth_why);
  lith__set_errmsg(buf);
}

/* Before a call that prepares: a reason left by an earlier refusal is not
 * this statement's. */
static void fresh_why(lith_tx *tx) { tx->db->auth_why[0] = '\0'; }

static int note(lith_tx *tx, int rc) {
  if (rc != LITH_OK)
    add_why(tx->db);
  if (rc != LITH_OK && !tx->keep) {
    tx->err = rc;
    lith__strlcpy(tx->errmsg, lith_errmsg(NULL), sizeof tx->errmsg);
    /* The error that made SQLite roll the batch back says why the command
     * failed; what a command that ignores it runs afterwards only fails. */
    tx->keep = lith__tx_lost(tx->db);
  }
  return rc;
}

/* Past command_timeout_ms every call fails at once (see batch.c). */
static int past_limit(lith_tx *tx, const char *what) {
  if (!lith__tx_past_limit(tx))
    return 0;
  note(tx,
       lith__fail(LITH_INTERRUPTED, "%s: interrupted: the command ran longer than command_timeout_ms", what));
  return 1;
}

sqlite3_stmt *lith_tx_stmt(lith_tx *tx, const char *sql) {
  sqlite3_stmt *st = NULL;
  if (past_limit(tx, "lith_tx_stmt"))
    return NULL;
  fresh_why(tx);
  note(tx, lith__stmt_cache_get(tx->cache, sql, &st));
  return st;
}

int lith_tx_exec(lith_tx *tx, const char *sql, const char *types, ...) {
  if (past_limit(tx, "lith_tx_exec"))
    return LITH_INTERRUPTED;
  fresh_why(tx);
  va_list ap;
  va_start(ap, types);
  int rc = lith__run_va(tx->cache, sql, types, ap, NULL);
  va_end(ap);
  return note(tx, rc);
}

int lith_tx_int64(lith_tx *tx, int64_t *out, const char *sql, const char *types, ...) {
  if (past_limit(tx, "lith_tx_int64"))
    return LITH_INTERRUPTED;
  fresh_why(tx);
  va_list ap;
  va_start(ap, types);
  int rc = lith__run_va(tx->cache, sql, types, ap, out);
  va_end(ap);
  return note(tx, rc);
}

int64_t lith_tx_changes(lith_tx *tx) {
  /* Unchanged total: no statement of this run changed a row, so its most
   * recent one (if any) changed none; sqlite3_changes64 would still hold
   * the previous command's count. */
  if (sqlite3_total_changes64(tx->conn) == tx->changes_base)
    return 0;
  return sqlite3_changes64(tx->conn);
}

int64_t lith_tx_last_insert_rowid(lith_tx *tx) { return sqlite3_last_insert_rowid(tx->conn); }

static int nested_step(lith_tx *tx, sqlite3_stmt *st) {
  /* lith's own savepoint statements: let the authorizer pass them. */
  tx->db->in_command = 0;
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  tx->db->in_command = 1;
  if (rc != SQLITE_DONE)
    return note(tx, lith__fail_sqlite(rc, tx->conn, "nested savepoint"));
  return LITH_OK;
}

int lith_tx_savepoint(lith_tx *tx, lith_command fn, void *arg) {
  lith *db = tx->db;
  if (!fn)
    return note(tx, lith__fail(LITH_MISUSE, "lith_tx_savepoint: no function"));
  if (past_limit(tx, "lith_tx_savepoint"))
    return LITH_INTERRUPTED;
  if (lith__tx_lost(db)) /* SAVEPOINT would begin a transaction of its own */
    return note(tx, lith__fail(LITH_ABORTED, "lith_tx_savepoint: the transaction was rolled back"));
  int rc = nested_step(tx, db->st_nsp);
  if (rc != LITH_OK)
    return rc;
  int mark = db->ntopics;
  tx->depth++;
  rc = fn(tx, arg);
  tx->depth--;
  if (lith__tx_lost(db))
    return rc != LITH_OK ? rc : note(tx, lith__fail(LITH_ABORTED, "the transaction was rolled back"));
  if (rc == LITH_OK)
    return nested_step(tx, db->st_nsp_release);
  db->ntopics = mark;
  /* Keep fn's message: it says why, the undo does not. */
  char keep[LITH_ERRMSG_MAX];
  int kept_err = tx->err;
  lith__strlcpy(keep, tx->errmsg, sizeof keep);
  if (nested_step(tx, db->st_nsp_rollback) == LITH_OK)
    nested_step(tx, db->st_nsp_release);
  tx->err = kept_err;
  lith__strlcpy(tx->errmsg, keep, sizeof tx->errmsg);
  return rc;
}

void lith_tx_touch(lith_tx *tx, int64_t topic) {
  lith *db = tx->db;
  if (db->ntopics == db->captopics) {
    int ncap = db->captopics ? db->captopics * 2 : 256;
    int64_t *t = realloc(db->topics, (size_t)ncap * sizeof *t);
    if (!t)
      return; /* out of memory: a missed notification, never a lost write */
    db->topics = t;
    db->captopics = ncap;
  }
  db->topics[db->ntopics++] = topic;
}

int lith_tx_error(lith_tx *tx, int rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tx->errmsg, sizeof tx->errmsg, fmt, ap);
  va_end(ap);
  tx->err = rc;
  return rc;
}

int lith_cmd_sql(lith_tx *tx, void *arg) {
  if (!arg)
    return note(tx, lith__fail(LITH_MISUSE, "lith_cmd_sql: no SQL"));
  if (past_limit(tx, "lith_cmd_sql"))
    return LITH_INTERRUPTED;
  fresh_why(tx);
  int rc = sqlite3_exec(tx->conn, (const char *)arg, NULL, NULL, NULL);
  if (rc != SQLITE_OK)
    return note(tx, lith__fail_sqlite(rc, tx->conn, "lith_cmd_sql"));
  return LITH_OK;
}

int lith_tx_check(lith_tx *tx) {
  if (!tx)
    return LITH_MISUSE;
  lith *db = tx->db;
  if (!(db->dirty & LITH__DIRTY_FK_CHECK)) /* no table made or altered since the last check */
    return LITH_OK;
  char why[256];
  int src = lith__schema_rule(db, why, sizeof why);
  if (src == SQLITE_DENY)
    return note(tx, lith__fail(LITH_ERROR, "not authorized (%s)", why));
  if (src != SQLITE_OK)
    return note(tx, lith__fail(lith__code_of(src, db->conn), "lith_tx_check: %s", why));
  /* Checked. A statement prepared before and not yet run is prepared
   * again (and so marked again) before it runs. */
  db->dirty &= ~(unsigned)LITH__DIRTY_FK_CHECK;
  lith__expire_statements(db);
  return LITH_OK;
}

int lith_tx_rc(lith_tx *tx) { return tx->err; }

void lith_tx_restart_clock(lith_tx *tx) {
  if (tx->db->opt.command_timeout_ms <= 0 || tx->timed_out)
    return;
  tx->deadline_ns = lith__now_ns() + (int64_t)tx->db->opt.command_timeout_ms * 1000000;
}

sqlite3 *lith_tx_db(lith_tx *tx) { return tx->conn; }
