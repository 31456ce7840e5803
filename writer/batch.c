/*
 * The writer thread: take, run, commit, answer, checkpoint — in that order,
 * forever.
 *
 * Take: everything queued, up to max_batch; no timer ever waits for a batch
 * to fill. If nothing is queued the writer sleeps on a futex until a
 * producer (exactly one) wakes it.
 *
 * Run: BEGIN IMMEDIATE, then per command SAVEPOINT / fn / RELEASE, or
 * ROLLBACK TO + RELEASE when fn fails, so a failing command leaves no trace
 * and the others still commit. Commands cannot end the transaction
 * themselves (the authorizer refuses BEGIN, COMMIT, ROLLBACK and lith's
 * savepoint names in any case; a commit hook refuses every commit but
 * lith's), but SQLite may: an I/O error, a full disk, or an ON CONFLICT
 * ROLLBACK constraint rolls back the whole transaction (the rollback hook
 * sees it). Then the command at fault gets its error, and the others either
 * go on (when the cause was the command: the batch splits there, the
 * commands before it run again and commit alone, the rest follow in the
 * next transaction; none runs more than twice) or all get the cause's error
 * (when the disk or memory failed: running again would fail the same way).
 * After each command the writer also checks what a command may leave behind
 * — a deferred foreign-key violation, a statement mid-step, a flag pragma,
 * TEMP objects — so that it fails alone and the next command finds the
 * connection as lith left it. Never a false success, never half a command.
 *
 * Commit, then answer: a producer learns its outcome only after COMMIT
 * returned. The on_commit hook sees the topics first, so a server can push
 * the change out before (or as) its producer hears back.
 *
 * Checkpoint: in WRITER mode, after the answers, outside every wait.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/clock.h"
#include "../sqlite/errcode.h"
#include "futex.h"
#include "waker.h"
#include "writer.h"

static int prep(lith *db, const char *sql, sqlite3_stmt **st) {
  int rc = sqlite3_prepare_v3(db->conn, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL);
  if (rc != SQLITE_OK)
    return lith__fail_sqlite(rc, db->conn, sql);
  return LITH_OK;
}

int lith__writer_prepare(lith *db) {
  int rc;
  if ((rc = prep(db, "BEGIN IMMEDIATE", &db->st_begin)) || (rc = prep(db, "COMMIT", &db->st_commit)) ||
      (rc = prep(db, "ROLLBACK", &db->st_rollback)) || (rc = prep(db, "SAVEPOINT lith_c", &db->st_sp)) ||
      (rc = prep(db, "RELEASE lith_c", &db->st_sp_release)) ||
      (rc = prep(db, "ROLLBACK TO lith_c", &db->st_sp_rollback)) ||
      (rc = prep(db, "SAVEPOINT lith_n", &db->st_nsp)) ||
      (rc = prep(db, "RELEASE lith_n", &db->st_nsp_release)) ||
      (rc = prep(db, "ROLLBACK TO lith_n", &db->st_nsp_rollback)))
    return rc;
  /* The value a command's recursive_triggers is put back to. */
  sqlite3_stmt *st = NULL;
  rc = sqlite3_prepare_v2(db->conn, "PRAGMA recursive_triggers", -1, &st, NULL);
  if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW)
    rc = SQLITE_OK;
  db->recursive_base = rc == SQLITE_OK ? sqlite3_column_int(st, 0) : 0;
  sqlite3_finalize(st);
  if (rc != SQLITE_OK)
    return lith__fail_sqlite(rc, db->conn, "PRAGMA recursive_triggers");
  sqlite3_commit_hook(db->conn, lith__commit_hook, db);
  sqlite3_rollback_hook(db->conn, lith__rollback_hook, db);
  return LITH_OK;
}

void lith__writer_finalize(lith *db) {
  sqlite3_stmt **stmts[] = {&db->st_begin, &db->st_commit,      &db->st_rollback,
                            &db->st_sp,    &db->st_sp_release,  &db->st_sp_rollback,
                            &db->st_nsp,   &db->st_nsp_release, &db->st_nsp_rollback};
  for (size_t i = 0; i < sizeof stmts / sizeof *stmts; i++) {
    sqlite3_stmt **slot = stmts[i];
    sqlite3_finalize(*slot);
    *slot = NULL;
  }
}

/* PRAGMAs a command may give an argument to: the argument names what to
 * read, or the pragma writes the database file inside the transaction (so a
 * failed command's change is undone with it). */
static const char *const PRAGMA_ARG_OK[] = {
    "application_id", "foreign_key_check", "foreign_key_list", "incremental_vacuum", "index_info",
    "index_list",     "index_xinfo",       "integrity_check",  "optimize",           "quick_check",
    "table_info",     "table_list",        "table_xinfo",      "user_version"};
/* Of them, the ones that write a header field: on the TEMP schema that
 * field outlives the command (lith drops TEMP objects, not the schema),
 * and the next command would read it. */
static const char *const PRAGMA_HEADER[] = {"application_id", "user_version"};

static int refuse(char *why, size_t cap, const char *fmt, const char *what) {
  if (cap > 0)
    snprintf(why, cap, fmt, what);
  return SQLITE_DENY;
}

/* A command's PRAGMA: reading is fine; of the settings, only the two flags
 * that matter inside one command may change (and are put back when it ends:
 * the next command must find the connection as lith left it: *dirty says
 * which). Flag pragmas act while the statement is prepared, right after this
 * check, so marking them here is exact. */
static int rule_pragma(const char *name, const char *arg, const char *schema, char *why, size_t cap,
                       int *dirty) {
  if (!name)
    return SQLITE_OK;
  if (strcasecmp(name, "wal_checkpoint") == 0)
    return refuse(why, cap, "PRAGMA %s: lith checkpoints the WAL itself", name);
  if (!arg)
    return SQLITE_OK;
  if (schema && strcasecmp(schema, "temp") == 0)
    for (size_t i = 0; i < sizeof PRAGMA_HEADER / sizeof *PRAGMA_HEADER; i++)
      if (strcasecmp(name, PRAGMA_HEADER[i]) == 0)
        return refuse(why, cap, "PRAGMA temp.%s = ...: the TEMP schema outlives the command", name);
  for (size_t i = 0; i < sizeof PRAGMA_ARG_OK / sizeof *PRAGMA_ARG_OK; i++)
    if (strcasecmp(name, PRAGMA_ARG_OK[i]) == 0)
      return SQLITE_OK;
  if (strcasecmp(name, "defer_foreign_keys") == 0) {
    *dirty |= LITH__DIRTY_DEFER_FK;
    return SQLITE_OK;
  }
  if (strcasecmp(name, "recursive_triggers") == 0) {
    *dirty |= LITH__DIRTY_RECURSIVE;
    return SQLITE_OK;
  }
  if (strcasecmp(name, "foreign_keys") == 0)
    return refuse(why, cap,
                  "PRAGMA %s cannot change inside lith's transaction (lith_options.foreign_keys sets it)",
                  name);
  return refuse(why, cap,
                "PRAGMA %s = ...: a command may not change the write connection's settings (lith.h)", name);
}

/* Names beginning _lith_ are lith's: its tables on a dqlite cluster (the
 * writer's _lith_batches, the store's _lith_schema) and any it adds. SQLite
 * compares names without regard to ASCII case. */
static int lith_name(const char *name) { return name != NULL && strncasecmp(name, "_lith_", 6) == 0; }

/* A command may read lith's tables, never create, change or drop anything
 * named _lith_ or on such a table: one such statement could make the fence
 * lie or stop every write (issue #32). For each action, the argument that
 * names the object and the one that names its table, as
 * sqlite3_set_authorizer passes them (ALTER TABLE: the schema, then the
 * table). A rename onto a _lith_ name is not seen here (SQLite gives the
 * authorizer the old name only): lith.h says what holds then. */
static int rule_lith_names(int action, const char *a, const char *b, char *why, size_t cap) {
  const char *verb = NULL, *name = a, *table = NULL;
  switch (action) {
  case SQLITE_CREATE_TABLE:
  case SQLITE_CREATE_TEMP_TABLE: verb = "CREATE TABLE"; break;
  case SQLITE_CREATE_VIEW:
  case SQLITE_CREATE_TEMP_VIEW: verb = "CREATE VIEW"; break;
  case SQLITE_CREATE_VTABLE: verb = "CREATE VIRTUAL TABLE"; break;
  case SQLITE_CREATE_INDEX:
  case SQLITE_CREATE_TEMP_INDEX: verb = "CREATE INDEX", table = b; break;
  case SQLITE_CREATE_TRIGGER:
  case SQLITE_CREATE_TEMP_TRIGGER: verb = "CREATE TRIGGER", table = b; break;
  case SQLITE_DROP_TABLE:
  case SQLITE_DROP_TEMP_TABLE: verb = "DROP TABLE"; break;
  case SQLITE_DROP_VIEW:
  case SQLITE_DROP_TEMP_VIEW: verb = "DROP VIEW"; break;
  case SQLITE_DROP_VTABLE: verb = "DROP TABLE"; break;
  case SQLITE_DROP_INDEX:
  case SQLITE_DROP_TEMP_INDEX: verb = "DROP INDEX", table = b; break;
  case SQLITE_DROP_TRIGGER:
  case SQLITE_DROP_TEMP_TRIGGER: verb = "DROP TRIGGER", table = b; break;
  case SQLITE_ALTER_TABLE: verb = "ALTER TABLE", name = b; break;
  case SQLITE_INSERT: verb = "INSERT INTO"; break;
  case SQLITE_UPDATE: verb = "UPDATE"; break;
  case SQLITE_DELETE: verb = "DELETE FROM"; break;
  default: return SQLITE_OK;
  }
  if (!lith_name(name) && !lith_name(table))
    return SQLITE_OK;
  if (cap > 0)
    snprintf(why, cap, "%s %s%s%s: names beginning _lith_ are lith's; a command may only read them", verb,
             name ? name : "", table ? " ON " : "", table ? table : "");
  return SQLITE_DENY;
}

/* The actions after which what a command's statement left must pass
 * fk_rule (lith_command_check): a table made (its REFERENCES clauses) or
 * altered (ADD COLUMN ... REFERENCES; RENAME TO, which rewrites the
 * foreign keys of every table that names the one renamed). A TEMP table's
 * foreign keys name TEMP tables only (SQLite's foreign keys stay inside
 * their schema), and no TEMP table is named _lith_: it cannot hold lith's
 * rows, so CREATE TEMP TABLE needs no check. */
static int needs_check(int action) { return action == SQLITE_CREATE_TABLE || action == SQLITE_ALTER_TABLE; }

/* lith's rule on the schema itself, which the authorizer cannot see: a
 * table's REFERENCES clause reaches the authorizer as nothing (#32). No
 * table of main may have a foreign key whose parent is named _lith_ (in any
 * case: SQLite compares names without regard to ASCII case, as lith_name).
 * Such a key makes lith's own writes there the client's to refuse: on
 * --dqlite the writer's clean-up of _lith_batches failed "FOREIGN KEY
 * constraint failed" and every write after it answered 503; a key onto a
 * column that is not unique ("foreign key mismatch") fails every batch at
 * once. SQLITE_OK; SQLITE_DENY, why naming the table and its parent; or
 * SQLite's code when the schema could not be read (why says so). Every
 * table is read, not only the one made, so that a rename that rewrote
 * another table's foreign key is seen too. */
static int fk_rule(sqlite3 *conn, char *why, size_t cap) {
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(conn,
                              "SELECT m.name, f.\"table\" FROM main.sqlite_schema AS m, "
                              "pragma_foreign_key_list(m.name, 'main') AS f WHERE m.type = 'table'",
                              -1, &st, NULL);
  if (rc == SQLITE_OK) {
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      const char *parent = (const char *)sqlite3_column_text(st, 1);
      if (!lith_name(parent))
        continue;
      if (cap > 0)
        snprintf(why, cap,
                 "%s REFERENCES %s: names beginning _lith_ are lith's; no foreign key may name one as its "
                 "parent",
                 (const char *)sqlite3_column_text(st, 0), parent);
      rc = SQLITE_DENY;
      break;
    }
  }
  if (rc == SQLITE_DONE)
    rc = SQLITE_OK;
  else if (rc != SQLITE_DENY && cap > 0)
    snprintf(why, cap, "reading the schema's foreign keys (lith's rule on _lith_ names): %s",
             sqlite3_errmsg(conn));
  sqlite3_finalize(st);
  return rc;
}

/* lith's own rules for what a command prepares, and what it leaves to undo
 * when it ends (*dirty). */
static int rules(int action, const char *a, const char *b, const char *c, char *why, size_t cap, int *dirty) {
  if (rule_lith_names(action, a, b, why, cap) != SQLITE_OK)
    return SQLITE_DENY;
  switch (action) {
  case SQLITE_TRANSACTION:
    return refuse(why, cap, "%s: the writer owns BEGIN, COMMIT and ROLLBACK", a ? a : "transaction");
  case SQLITE_SAVEPOINT:
    /* SQLite matches savepoint names without regard to case. */
    if (b && strncasecmp(b, "lith_", 5) == 0)
      return refuse(why, cap, "savepoint %s: names beginning lith_ are the writer's", b);
    break;
  case SQLITE_PRAGMA: return rule_pragma(a, b, c, why, cap, dirty);
  case SQLITE_CREATE_TEMP_INDEX:
  case SQLITE_CREATE_TEMP_TABLE:
  case SQLITE_CREATE_TEMP_TRIGGER:
  case SQLITE_CREATE_TEMP_VIEW:
    *dirty |= LITH__DIRTY_TEMP; /* dropped when the command ends */
    break;
  case SQLITE_CREATE_VTABLE:
    if (c && strcasecmp(c, "temp") == 0)
      *dirty |= LITH__DIRTY_TEMP;
    break;
  default: break;
  }
  if (needs_check(action))
    *dirty |= LITH__DIRTY_DDL | LITH__DIRTY_FK_CHECK;
  return SQLITE_OK;
}

int lith_command_rule(int action, const char *a, const char *b, const char *c, char *why, size_t cap) {
  int dirty = 0;
  if (cap > 0)
    why[0] = '\0';
  return rules(action, a, b, c, why, cap, &dirty);
}

int lith_command_needs_check(int action) { return needs_check(action); }

int lith_command_sets_flag(int action, const char *a, const char *b) {
  int dirty = 0;
  if (action != SQLITE_PRAGMA || rule_pragma(a, b, NULL, NULL, 0, &dirty) != SQLITE_OK)
    return 0;
  return (dirty & (LITH__DIRTY_DEFER_FK | LITH__DIRTY_RECURSIVE)) != 0;
}

int lith_command_check(sqlite3 *conn, char *why, size_t cap) {
  if (cap > 0)
    why[0] = '\0';
  if (!conn)
    return SQLITE_MISUSE;
  return fk_rule(conn, why, cap);
}

int lith__schema_rule(lith *db, char *why, size_t cap) {
  int in = db->in_command; /* lith's own statement: the command rules let it pass */
  db->in_command = 0;
  int src = fk_rule(db->conn, why, cap);
  db->in_command = in;
  return src;
}

void lith__expire_statements(lith *db) {
  /* SQLite expires every prepared statement of the connection when its
   * authorizer is set: each is prepared again (authorized again) when next
   * stepped; one running goes on to its end. */
  sqlite3_set_authorizer(db->conn, lith__authorize, db);
}

/* The schema rule as a command's outcome: LITH_OK, or its error. */
static int schema_rule(lith *db, lith_tx *tx) {
  char why[256];
  int src = lith__schema_rule(db, why, sizeof why);
  if (src == SQLITE_OK)
    return LITH_OK;
  if (src == SQLITE_DENY)
    return lith_tx_error(tx, LITH_ERROR, "not authorized (%s)", why);
  return lith_tx_error(tx, lith__code_of(src, db->conn), "%s", why);
}

/* After a command: one that prepared a statement creating or altering a
 * table has every statement expired, so that one it prepared and never
 * ran (kept in the statement cache) is prepared again, and so marked, by
 * the command that runs it. */
static void schema_done(lith *db) {
  if (db->dirty & LITH__DIRTY_DDL)
    lith__expire_statements(db);
  db->dirty &= ~(unsigned)(LITH__DIRTY_DDL | LITH__DIRTY_FK_CHECK);
}

/* Deferred FOREIGN KEY violations SQLite counts now (this transaction's). A
 * flag pragma acts while its statement is prepared, right after the
 * authorizer: so this is the count the pragma finds. SQLite's
 * defer_foreign_keys = OFF sets the count of those it deferred to 0, and
 * COMMIT then keeps them: a command that does so is checked whole. */
static int deferred_fks(lith *db) {
  int cur = 0, hi = 0;
  sqlite3_db_status(db->conn, SQLITE_DBSTATUS_DEFERRED_FKS, &cur, &hi, 0);
  return cur;
}

int lith__authorize(void *ctx, int action, const char *a, const char *b, const char *c, const char *d) {
  lith *db = ctx;
  int dirty = 0;
  if (!db->in_command)
    return SQLITE_OK;
  if (rules(action, a, b, c, db->auth_why, sizeof db->auth_why, &dirty) != SQLITE_OK)
    return SQLITE_DENY;
  if ((dirty & LITH__DIRTY_DEFER_FK) && deferred_fks(db) != 0)
    dirty |= LITH__DIRTY_FK_FORGOT; /* its OFF would forget them: foreign_key_check decides */
  db->dirty |= dirty;
  if (db->opt.authorizer)
    return db->opt.authorizer(db->opt.authorizer_ctx, action, a, b, c, d);
  return SQLITE_OK;
}

int lith__commit_hook(void *ctx) {
  const lith *db = ctx;
  /* Anything but lith's COMMIT — a statement that ran in autocommit after
   * SQLite rolled the batch back, or a RELEASE of a savepoint a command
   * opened then — would commit on its own: turn it into a rollback. */
  return db->committing ? 0 : 1;
}

void lith__rollback_hook(void *ctx) {
  lith *db = ctx;
  db->tx_lost = 1;
}

/* Step one of the writer's own statements; SQLITE_OK or the error. */
static int step(sqlite3_stmt *st) {
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
}

/* The transaction ended under the command: SQLite rolled it back (the
 * rollback hook saw it), possibly followed by a new one the command began. */
int lith__tx_lost(const lith *db) { return db->tx_lost || sqlite3_get_autocommit(db->conn); }

/* Reset every statement left running on the write connection (lith's own
 * are always reset after their step, so these are a command's), or only
 * those that read. Returns how many were running; the SQL of the first that
 * writes goes to `what`. */
static int reset_running(lith *db, int reads_only, char *what, size_t n) {
  int count = 0;
  if (what && n)
    what[0] = '\0';
  for (sqlite3_stmt *st = sqlite3_next_stmt(db->conn, NULL); st; st = sqlite3_next_stmt(db->conn, st)) {
    if (!sqlite3_stmt_busy(st) || (reads_only && !sqlite3_stmt_readonly(st)))
      continue;
    if (what && n && !what[0] && !sqlite3_stmt_readonly(st)) {
      const char *sql = sqlite3_sql(st);
      snprintf(what, n, "%.100s%s", sql ? sql : "?", sql && strlen(sql) > 100 ? "..." : "");
    }
    sqlite3_reset(st);
    count++;
  }
  return count;
}

/* Put back what the command changed on the connection (see LITH__DIRTY_*).
 * The flag pragmas are not transactional, so this runs whatever the outcome
 * (back to what they were when lith opened the connection);
 * the TEMP objects of a failed command went with its savepoint. Returns an
 * SQLite code. */
static int restore_flags_now(lith *db) {
  int rc = SQLITE_OK;
  if (db->dirty & LITH__DIRTY_DEFER_FK)
    rc = sqlite3_exec(db->conn, "PRAGMA defer_foreign_keys = OFF", NULL, NULL, NULL);
  if (rc == SQLITE_OK && (db->dirty & LITH__DIRTY_RECURSIVE))
    rc = sqlite3_exec(
        db->conn, db->recursive_base ? "PRAGMA recursive_triggers = ON" : "PRAGMA recursive_triggers = OFF",
        NULL, NULL, NULL);
  db->dirty &= ~(unsigned)(LITH__DIRTY_DEFER_FK | LITH__DIRTY_RECURSIVE | LITH__DIRTY_FK_FORGOT);
  return rc;
}

static inline int restore_flags(lith *db) { /* most commands set none: one test */
  return (db->dirty & (LITH__DIRTY_DEFER_FK | LITH__DIRTY_RECURSIVE)) ? restore_flags_now(db) : SQLITE_OK;
}

/* Drop every TEMP object: they live for the command that made them, so no
 * command finds another's TEMP trigger firing or TEMP table shadowing a
 * table of main. Runs inside the command's savepoint. Returns an SQLite
 * code. */
static int drop_temp(lith *db) {
  db->dirty &= ~(unsigned)LITH__DIRTY_TEMP;
  for (;;) { /* one object a round: each DROP removes it (and what hangs on it) */
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(
        db->conn,
        "SELECT type, name FROM temp.sqlite_schema"
        " WHERE type IN ('trigger', 'view', 'table') AND name NOT LIKE 'sqlite^_%' ESCAPE '^'"
        " ORDER BY CASE WHEN type <> 'table' THEN 0 WHEN sql LIKE 'CREATE VIRTUAL%' THEN 1"
        " ELSE 2 END LIMIT 1", /* a virtual table before its shadow tables */
        -1, &st, NULL);
    if (rc != SQLITE_OK)
      return rc;
    char *drop = NULL;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
      drop = sqlite3_mprintf("DROP %s temp.\"%w\"", (const char *)sqlite3_column_text(st, 0),
                             (const char *)sqlite3_column_text(st, 1));
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE)
      return SQLITE_OK;
    if (rc != SQLITE_ROW)
      return rc;
    if (!drop)
      return SQLITE_NOMEM;
    rc = sqlite3_exec(db->conn, drop, NULL, NULL, NULL);
    sqlite3_free(drop);
    if (rc != SQLITE_OK)
      return rc;
  }
}

/* ---- command_timeout_ms --------------------------------------------------
 * The limit is a deadline for the run of the command's function: SQLite's
 * progress handler, installed for that run only (a command that replaced
 * it has it put back for the next one), compares it with the clock every
 * PROGRESS_OPS VM instructions; the lith_tx_* calls compare it on entry
 * (lith__tx_past_limit), so a command that loops in C over short statements
 * is stopped at its next call. Once past, the run stays timed out: every
 * statement it steps afterwards fails at once. lith's own statements inside
 * a command (the nested savepoint's) run with in_command clear and pass. */
#define PROGRESS_OPS 1000

int lith__tx_past_limit(lith_tx *tx) {
  if (tx->db->opt.command_timeout_ms <= 0)
    return 0;
  if (!tx->timed_out && lith__now_ns() <= tx->deadline_ns)
    return 0;
  tx->timed_out = 1;
  return 1;
}

static int on_progress(void *ctx) {
  lith *db = ctx;
  return (db->in_command || db->vacuuming) && lith__tx_past_limit(&db->tx);
}

static void limit_arm(lith *db) {
  db->tx.timed_out = 0;
  db->tx.deadline_ns = lith__now_ns() + (int64_t)db->opt.command_timeout_ms * 1000000;
  sqlite3_progress_handler(db->conn, PROGRESS_OPS, on_progress, db);
}

/* After the run: the handler goes, and a run that was interrupted fails
 * with LITH_INTERRUPTED unless it answered with a code of its own. */
static int limit_disarm(lith *db, int rc) {
  sqlite3_progress_handler(db->conn, 0, NULL, NULL);
  if (db->tx.timed_out && (rc == LITH_OK || rc == LITH_INTERRUPTED))
    rc = lith_tx_error(&db->tx, LITH_INTERRUPTED,
                       "the command ran longer than command_timeout_ms (%d ms) and was interrupted",
                       db->opt.command_timeout_ms);
  return rc;
}

/* Whether rc is one of lith's result codes (or a command's own). */
static int known_rc(int rc) { return (rc > LITH_OK && rc <= LITH_INTERRUPTED) || rc >= LITH_USER; }

/* The request's message after fn returned rc != OK. */
static void capture_msg(lith *db, lith_request *req, int rc) {
  const char *mine = lith_errmsg(NULL); /* a lith call inside the command failed */
  int ec = sqlite3_errcode(db->conn);
  if (db->tx.errmsg[0])
    lith__strlcpy(req->errmsg, db->tx.errmsg, sizeof req->errmsg);
  else if (mine[0])
    lith__strlcpy(req->errmsg, mine, sizeof req->errmsg);
  else if (ec != SQLITE_OK && ec != SQLITE_ROW && ec != SQLITE_DONE)
    lith__strlcpy(req->errmsg, sqlite3_errmsg(db->conn), sizeof req->errmsg);
  else if (!known_rc(rc))
    snprintf(req->errmsg, sizeof req->errmsg,
             "the command returned %d, not a lith result code (an SQLite code? a command returns "
             "LITH_OK on success); its changes were undone",
             rc);
  else
    snprintf(req->errmsg, sizeof req->errmsg, "command failed: %s (%d)", lith_errstr(rc), rc);
  /* SQLite says only "not authorized": add which of lith's rules refused. */
  if (db->auth_why[0] && strstr(req->errmsg, "not authorized") && !strstr(req->errmsg, db->auth_why)) {
    size_t len = strlen(req->errmsg);
    snprintf(req->errmsg + len, sizeof req->errmsg - len, " (%s)", db->auth_why);
  }
}

/* Non-zero when PRAGMA foreign_key_check finds a violation (or fails). */
static int fk_check_finds(lith *db) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db->conn, "PRAGMA foreign_key_check", -1, &st, NULL) != SQLITE_OK)
    return 1;
  int found = sqlite3_step(st) != SQLITE_DONE; /* a row, or an error: refuse */
  sqlite3_finalize(st);
  return found;
}

/* Non-zero when an alone command turned foreign keys off (lith_tx_foreign_keys)
 * and the database now holds a violation: what ran unchecked is checked
 * whole before it commits (SQLite's advice for a table rebuilt with them
 * off), so no violation is ever committed. */
static int fk_violated(lith *db) { return db->fk_changed && db->opt.foreign_keys && fk_check_finds(db); }

/* Non-zero when the command set defer_foreign_keys while SQLite counted a
 * deferred violation (LITH__DIRTY_FK_FORGOT) and the database holds one:
 * SQLite's COMMIT would keep what its OFF forgot. */
static int fk_forgotten(lith *db) { return (db->dirty & LITH__DIRTY_FK_FORGOT) && fk_check_finds(db); }
#define FK_FORGOTTEN_MSG                                                                        \
  "FOREIGN KEY constraint failed (PRAGMA foreign_key_check: PRAGMA defer_foreign_keys was set " \
  "while a deferred violation was counted, and SQLite would commit it)"

/* Non-zero when the command left a deferred FOREIGN KEY violation: SQLite
 * would find it only at COMMIT and fail the whole batch with it. Every
 * command ends with none, so one seen now is this command's. */
static int deferred_fk_left(lith *db) {
  if (!db->opt.foreign_keys && !db->fk_changed) /* SQLite counts no violations then */
    return 0;
  int cur = 0, hi = 0;
  sqlite3_db_status(db->conn, SQLITE_DBSTATUS_DEFERRED_FKS, &cur, &hi, 0);
  return cur != 0;
}

/* The command's outcome when it left a write statement running (reset by
 * now): LITH_MISUSE, naming the statement. */
static int left_running(lith_tx *tx, const char *what) {
  return lith_tx_error(tx, LITH_MISUSE,
                       "the command left a write statement running (stepped, never reset): %s; lith "
                       "reset it and undid the command",
                       what[0] ? what : "?");
}

/* Run one command in its savepoint. Returns 1 if the transaction is gone. */
static int run_command(lith *db, lith_request *req) {
  lith__priv *p = lith__priv_of(req);
  lith_tx *tx = &db->tx;
  int mark = db->ntopics;
  int reran = 0;
  req->errmsg[0] = '\0';

  int src = step(db->st_sp);
  if (src != SQLITE_OK) {
    req->rc = lith__code_of(src, db->conn);
    snprintf(req->errmsg, sizeof req->errmsg, "SAVEPOINT: %s", sqlite3_errmsg(db->conn));
    p->done = 1;
    return lith__tx_lost(db);
  }
run:
  tx->err = LITH_OK;
  tx->errmsg[0] = '\0';
  tx->depth = 0;
  tx->keep = 0;
  db->auth_why[0] = '\0';
  lith__clear_error();
  /* lith_tx_changes and lith_tx_last_insert_rowid report this run's own */
  tx->changes_base = sqlite3_total_changes64(db->conn);
  sqlite3_set_last_insert_rowid(db->conn, 0);
  if (db->opt.command_timeout_ms > 0)
    limit_arm(db);
  db->in_command = 1;
  db->in_fn = 1;
  int rc = req->fn(tx, req->arg);
  db->in_fn = 0;
  db->in_command = 0;
  if (db->opt.command_timeout_ms > 0)
    rc = limit_disarm(db, rc);
  /* before the cache's resets overwrite it; only a failure needs it */
  int ec = rc != LITH_OK ? sqlite3_errcode(db->conn) : SQLITE_OK;
  lith__stmt_cache_release(db->cache);

  if (lith__tx_lost(db))
    goto lost;
  if (rc != LITH_OK && (ec & 0xff) == SQLITE_LOCKED && !reran && !tx->timed_out && !db->alone &&
      reset_running(db, 1, NULL, 0) > 0) {
    /* "database table is locked": a read left mid-step (by an earlier
     * command of the batch, say) held a table this one drops or alters.
     * Those reads are over: reset them, undo this run, run it once more,
     * so that it does not fail for another's leftover. */
    db->ntopics = mark;
    db->dirty &= ~(unsigned)LITH__DIRTY_TEMP;
    if (step(db->st_sp_rollback) == SQLITE_OK && restore_flags(db) == SQLITE_OK && !lith__tx_lost(db)) {
      reran = 1;
      goto run;
    }
  }
  if (rc == LITH_OK && deferred_fk_left(db))
    rc = lith_tx_error(tx, LITH_CONSTRAINT,
                       "FOREIGN KEY constraint failed (a deferred violation the command left)");
  if (rc == LITH_OK && fk_violated(db))
    rc = lith_tx_error(
        tx, LITH_CONSTRAINT,
        "FOREIGN KEY constraint failed (PRAGMA foreign_key_check, after foreign keys were off)");
  if (rc == LITH_OK && fk_forgotten(db))
    rc = lith_tx_error(tx, LITH_CONSTRAINT, FK_FORGOTTEN_MSG);
  /* A command that prepared DDL: its schema, whatever lith_tx_check saw
   * (a nested savepoint undone may have brought back what a check passed) */
  if (rc == LITH_OK && (db->dirty & LITH__DIRTY_DDL))
    rc = schema_rule(db, tx);
  if (rc == LITH_OK && (db->dirty & LITH__DIRTY_TEMP)) {
    /* A statement the command left mid-step on its TEMP table would lock
     * the table against the DROP. The command is over: reset its reads;
     * a write left running fails it, as at RELEASE below. */
    char what[128];
    reset_running(db, 1, NULL, 0);
    if (reset_running(db, 0, what, sizeof what) > 0) {
      rc = left_running(tx, what);
    } else {
      src = drop_temp(db);
      if (src != SQLITE_OK)
        rc = lith_tx_error(tx, lith__code_of(src, db->conn), "dropping the command's TEMP objects: %s",
                           sqlite3_errmsg(db->conn));
    }
    if (lith__tx_lost(db))
      goto lost;
  }
  if (rc == LITH_OK) {
    src = step(db->st_sp_release);
    if (src == SQLITE_OK) {
      if (restore_flags(db) != SQLITE_OK) {
        /* Cannot put the connection back: the commands after this one must
         * not run with its settings, so the transaction goes. */
        rc = lith_tx_error(tx, LITH_ERROR, "restoring the connection's settings after the command: %s",
                           sqlite3_errmsg(db->conn));
        goto lost;
      }
      req->rc = LITH_OK;
      p->ran = 1;
      return 0;
    }
    if ((src & 0xff) == SQLITE_BUSY) {
      /* "cannot release savepoint - SQL statements in progress": the
       * command left a write statement mid-step. Left so, it would refuse
       * every later SAVEPOINT and wedge the writer. */
      char what[128];
      reset_running(db, 0, what, sizeof what);
      rc = left_running(tx, what);
    } else {
      rc = lith_tx_error(tx, lith__code_of(src, db->conn), "RELEASE: %s", sqlite3_errmsg(db->conn));
    }
    if (lith__tx_lost(db))
      goto lost;
  }
  /* Undo this command alone. */
  req->rc = rc;
  capture_msg(db, req, rc);
  p->done = 1;
  db->ntopics = mark;
  db->dirty &= ~(unsigned)LITH__DIRTY_TEMP; /* its TEMP objects go with the savepoint */
  if (step(db->st_sp_rollback) != SQLITE_OK) {
    restore_flags(db);
    return 1; /* cannot undo it: the whole transaction must go */
  }
  src = step(db->st_sp_release);
  if ((src & 0xff) == SQLITE_BUSY) { /* a write statement the failed command left running */
    reset_running(db, 0, NULL, 0);
    src = step(db->st_sp_release);
  }
  if (restore_flags(db) != SQLITE_OK || src != SQLITE_OK)
    return 1;
  return lith__tx_lost(db);

lost:
  /* SQLite rolled back everything: this command is at fault. Reset what it
   * left running, or the ROLLBACK and the next BEGIN would be refused. */
  reset_running(db, 0, NULL, 0);
  if (rc == LITH_OK)
    rc = tx->err != LITH_OK ? tx->err : LITH_ABORTED;
  req->rc = rc;
  capture_msg(db, req, rc);
  p->done = 1;
  db->ntopics = 0;
  db->dirty &= ~(unsigned)LITH__DIRTY_TEMP; /* whatever it made is being rolled back */
  restore_flags(db);
  return 1;
}

static int environmental(int rc) {
  return rc == LITH_IOERR || rc == LITH_DISKFULL || rc == LITH_NOMEM || rc == LITH_CORRUPT ||
         rc == LITH_BUSY || rc == LITH_READONLY || rc == LITH_CANTOPEN;
}

/* Give every command without a final outcome this one. */
static int fail_open(lith *db, int n, int rc, const char *msg) {
  int failed = 0;
  for (int i = 0; i < n; i++) {
    lith_request *req = db->run[i];
    lith__priv *p = lith__priv_of(req);
    if (p->done)
      continue;
    req->rc = rc;
    lith__strlcpy(req->errmsg, msg, sizeof req->errmsg);
    p->done = 1;
    failed++;
  }
  return failed;
}

static void report_topics(lith *db) {
  if (!db->opt.on_commit || db->ntopics == 0)
    return;
  int n = db->ntopics;
  int cap = 16;
  while (cap < 2 * n)
    cap <<= 1;
  if (cap > db->capseen) {
    int32_t *s = realloc(db->seen, (size_t)cap * sizeof *s);
    int64_t *u = realloc(db->uniq, (size_t)cap * sizeof *u);
    if (s)
      db->seen = s;
    if (u)
      db->uniq = u;
    if (!s || !u) { /* out of memory: report with repeats rather than not at all */
      db->opt.on_commit(db->opt.on_commit_ctx, db->topics, n);
      return;
    }
    db->capseen = cap;
  }
  memset(db->seen, 0, (size_t)cap * sizeof *db->seen);
  int nu = 0;
  for (int i = 0; i < n; i++) {
    int64_t t = db->topics[i];
    uint64_t h = (uint64_t)t * 0x9E3779B97F4A7C15ULL;
    size_t k = (size_t)(h >> 32) & (size_t)(cap - 1);
    for (;;) {
      int32_t s = db->seen[k];
      if (s == 0) {
        db->uniq[nu] = t;
        db->seen[k] = ++nu;
        break;
      }
      if (db->uniq[s - 1] == t)
        break;
      k = (k + 1) & (size_t)(cap - 1);
    }
  }
  db->opt.on_commit(db->opt.on_commit_ctx, db->uniq, nu);
}

/* What the other commands of a batch the disk or memory failed are told,
 * before the culprit's message. */
#define ROLLED_BACK_BY "transaction rolled back by another command's error: "

/* Batches at least this large hand their wake-ups to the waker thread;
 * smaller ones are answered directly, which is quicker for each producer. */
#define WAKER_MIN_BATCH 8

static void answer(lith *db, lith_request *req, int via_waker) {
  lith__priv *p = lith__priv_of(req);
  if (p->flags & LITH__REQ_SYNC) {
    /* After this exchange the request (on the producer's stack) may be gone:
     * only its address is used, for the wake-up. */
    _Atomic uint32_t *state = &p->state;
    if (atomic_exchange_explicit(state, LITH__DONE, memory_order_acq_rel) == LITH__SLEEPING) {
      if (via_waker)
        lith__waker_push(db->waker, state);
      else
        lith__futex_wake(state, 1);
    }
  } else {
    req->done(req);
  }
}

static void run_batch(lith *db, int n) {
  int retried = 0, busy = 0, failed = 0;
  uint64_t commit_ns = 0;
  int64_t t_start = lith__now_ns();
  uint64_t wait_sum = 0, wait_max = 0;
  for (int i = 0; i < n; i++) {
    lith__priv *p = lith__priv_of(db->run[i]);
    uint64_t w = t_start > p->queued_ns ? (uint64_t)(t_start - p->queued_ns) : 0;
    wait_sum += w;
    db->wait_lat[lith__lat_bucket(w)]++;
    if (w > wait_max)
      wait_max = w;
    p->done = 0;
    p->ran = 0;
  }

  /* Commands [0, limit) run in the current transaction. When one makes
   * SQLite roll it back, it alone is at fault: the commands before it that
   * had run are run again and committed by themselves (limit = its index),
   * then the rest in a transaction of their own. So each command runs at
   * most twice however many culprits a batch holds, and one client cannot
   * make others fail by sending many. */
  int limit = n;
again:;
  int pending = 0;
  for (int i = 0; i < limit; i++)
    pending += !lith__priv_of(db->run[i])->done;
  if (pending == 0)
    goto next;
  db->ntopics = 0;
  int src = step(db->st_begin);
  if (src != SQLITE_OK) {
    char msg[LITH_ERRMSG_MAX];
    int rc = lith__code_of(src, db->conn);
    busy = rc == LITH_BUSY;
    snprintf(msg, sizeof msg, "BEGIN IMMEDIATE: %s", sqlite3_errmsg(db->conn));
    fail_open(db, n, rc, msg);
    goto answer;
  }
  db->tx_lost = 0;
  for (int i = 0; i < limit; i++) {
    lith_request *req = db->run[i];
    lith__priv *p = lith__priv_of(req);
    if (p->done)
      continue;
    p->ran = 0;
    int gone = run_command(db, req);
    schema_done(db);
    if (!gone)
      continue;
    /* The transaction is gone (or must go); req is at fault and has its
     * outcome. Roll back whatever is still open, including a transaction
     * the command began after SQLite rolled back the batch. */
    if (!sqlite3_get_autocommit(db->conn))
      step(db->st_rollback);
    if (environmental(req->rc)) { /* the disk or memory: the others would fail alike */
      char msg[LITH_ERRMSG_MAX];
      /* the culprit's message, cut to the room the prefix leaves */
      snprintf(msg, sizeof msg, ROLLED_BACK_BY "%.*s", (int)(sizeof msg - sizeof ROLLED_BACK_BY),
               req->errmsg);
      fail_open(db, n, req->rc, msg);
      goto answer;
    }
    for (int j = 0; j < i; j++) { /* ran in this transaction: will run again */
      const lith__priv *q = lith__priv_of(db->run[j]);
      if (q->ran && !q->done)
        retried++;
    }
    limit = i;
    goto again;
  }

  int64_t t_commit = lith__now_ns();
  db->committing = 1;
  src = step(db->st_commit);
  db->committing = 0;
  commit_ns += (uint64_t)(lith__now_ns() - t_commit);
  if (src != SQLITE_OK) {
    char msg[LITH_ERRMSG_MAX];
    int rc = lith__code_of(src, db->conn);
    snprintf(msg, sizeof msg, "COMMIT failed: %s", sqlite3_errmsg(db->conn));
    if (!sqlite3_get_autocommit(db->conn))
      step(db->st_rollback);
    for (int i = 0; i < limit; i++) {
      lith_request *req = db->run[i];
      if (lith__priv_of(req)->ran) {
        req->rc = rc;
        lith__strlcpy(req->errmsg, msg, sizeof req->errmsg);
      }
    }
    fail_open(db, n, rc, msg); /* and the rest of a split batch: the disk said no */
    goto answer;
  }
  atomic_fetch_add_explicit(&db->commits, 1, memory_order_release);
  for (int i = 0; i < limit; i++) { /* committed: final */
    lith__priv *p = lith__priv_of(db->run[i]);
    if (p->ran)
      p->done = 1;
  }
  /* A read statement a command left mid-step survives COMMIT and keeps a
   * read transaction open on the write connection, which pins the WAL:
   * reset it (one cheap check per batch finds it). */
  if (sqlite3_txn_state(db->conn, NULL) != SQLITE_TXN_NONE)
    reset_running(db, 0, NULL, 0);
  report_topics(db);
next:
  if (limit < n) { /* a split batch: now the commands after the culprit */
    limit = n;
    goto again;
  }

answer:;
  uint64_t tx_ns = (uint64_t)(lith__now_ns() - t_start);
  atomic_store_explicit(&db->last_tx_ns, (int64_t)tx_ns, memory_order_relaxed);
  for (int i = 0; i < n; i++)
    if (db->run[i]->rc != LITH_OK)
      failed++;
  lith__stats_batch(db, n, failed, retried, busy, tx_ns, commit_ns, wait_sum, wait_max);
  int via_waker = n >= WAKER_MIN_BATCH;
  for (int i = 0; i < n; i++)
    answer(db, db->run[i], via_waker);
  if (via_waker)
    lith__waker_kick(db->waker);
}

/* Take up to max_batch requests; 0 when closed and drained. */
static int take(lith *db) {
  int n = 0, spun = 0;
  const int max = db->opt.max_batch;
  for (;;) {
    lith__qnode *node;
    while (n < max && (node = lith__queue_pop(&db->q)) != NULL)
      db->batch[n++] = (lith_request *)(void *)((char *)node - offsetof(lith_request, lith__priv));
    if (n > 0)
      break;
    if (!lith__queue_idle(&db->q)) {
      sched_yield(); /* a producer is between its two stores */
      continue;
    }
    if (atomic_load(&db->closed) && atomic_load(&db->depth) == 0)
      return 0;
    if (!spun && atomic_load_explicit(&db->last_batch, memory_order_relaxed) <= LITH__SPIN_MAX_BATCH &&
        (db->spin_credit > 0 || (++db->spin_skipped & (LITH__SPIN_RETRY_EVERY - 1)) == 0)) {
      /* Few producers: the next command is likely a few microseconds
       * away; catch it without a sleep and a wake-up. But only while that
       * works: when commands come from far (a server answering over the
       * network), the spin only burns the CPU their producer needs, so
       * each spin that catches nothing costs a credit and each that catches
       * a command earns one back (at most LITH__SPIN_CREDIT_MAX): the spin
       * goes on while at least half of them pay. Without credit the writer
       * spins once in LITH__SPIN_RETRY_EVERY sleeps, to notice when it
       * pays again. */
      spun = 1;
      int64_t until = lith__now_ns() + LITH__SPIN_NS;
      for (unsigned i = 1; lith__queue_idle(&db->q); i++) {
        lith__cpu_relax();
        if ((i & LITH__SPIN_CLOCK_MASK) == 0 && (lith__now_ns() > until || atomic_load(&db->closed)))
          break;
      }
      if (lith__queue_idle(&db->q)) {
        db->spin_credit--;
      } else if (db->spin_credit < LITH__SPIN_CREDIT_MAX) {
        db->spin_credit++;
      }
      db->spin_skipped = 0;
      continue;
    }
    atomic_store(&db->sleeping, 1);
    if (!lith__queue_idle(&db->q) || (atomic_load(&db->closed) && atomic_load(&db->depth) == 0)) {
      atomic_store(&db->sleeping, 0);
      continue;
    }
    /* A hold on the readers (checkpoint.h) is looked after between
     * batches: with none coming, within a millisecond, not at its bound. */
    int holding = lith__ckpt_holding(&db->ckpt);
    lith__futex_wait(&db->sleeping, 1, holding ? lith_clock_ms() + 1 : -1);
    atomic_store(&db->sleeping, 0);
    if (holding)
      lith__ckpt_hold_step(&db->ckpt, db->conn);
  }
  atomic_store_explicit(&db->last_batch, n, memory_order_relaxed);
  atomic_fetch_sub(&db->depth, n);
  /* n slots freed: wake n waiters, not all of them (lith.c passes a
   * wake-up on when a woken waiter leaves without a slot). */
  lith__wake_space_waiters(db, n);
  return n;
}

static int is_alone(lith_request *req) { return (lith__priv_of(req)->flags & LITH__REQ_ALONE) != 0; }

/* Run what take() took: in one transaction, but a command submitted alone
 * (lith_submit_alone) runs in a transaction of its own, after the ones
 * taken before it committed and were answered, before the ones after it.
 * Alone, it is the only command of its transaction: if that is rolled
 * back the command is at fault, so it never runs twice. */
static void run_taken(lith *db, int n) {
  int start = 0;
  while (start < n) {
    int end = start;
    if (is_alone(db->batch[start]))
      end = start + 1;
    else
      while (end < n && !is_alone(db->batch[end]))
        end++;
    db->run = db->batch + start;
    db->alone = is_alone(db->batch[start]);
    run_batch(db, end - start);
    if (db->fk_changed) { /* between transactions: the commands after it get lith's setting */
      if (!sqlite3_get_autocommit(db->conn))
        step(db->st_rollback);
      sqlite3_exec(db->conn, db->opt.foreign_keys ? "PRAGMA foreign_keys = ON" : "PRAGMA foreign_keys = OFF",
                   NULL, NULL, NULL);
      db->fk_changed = 0;
    }
    start = end;
  }
  db->run = db->batch;
  db->alone = 0;
}

/* Both need an alone command's own function, outside any nested savepoint,
 * with nothing it stepped left running. */
static int alone_check(lith_tx *tx, const char *what) {
  lith *db = tx->db;
  if (!db->alone || !db->in_fn || tx->depth != 0)
    return lith_tx_error(tx, LITH_MISUSE, "%s: only a command submitted alone, outside lith_tx_savepoint",
                         what);
  if (lith__tx_lost(db))
    return lith_tx_error(tx, LITH_ABORTED, "%s: the transaction was rolled back", what);
  return LITH_OK;
}

/* Commit what the alone command did so far; the connection is then in
 * autocommit (begin_again ends that). */
static int commit_now(lith_tx *tx) {
  lith *db = tx->db;
  char what[128];
  int rc = LITH_OK;
  if (deferred_fk_left(db))
    return lith_tx_error(tx, LITH_CONSTRAINT, "FOREIGN KEY constraint failed (a deferred violation)");
  if (fk_violated(db))
    return lith_tx_error(
        tx, LITH_CONSTRAINT,
        "FOREIGN KEY constraint failed (PRAGMA foreign_key_check, after foreign keys were off)");
  if (fk_forgotten(db))
    return lith_tx_error(tx, LITH_CONSTRAINT, FK_FORGOTTEN_MSG);
  if ((db->dirty & LITH__DIRTY_DDL) && (rc = schema_rule(db, tx)) != LITH_OK)
    return rc;
  reset_running(db, 1, NULL, 0);
  if (reset_running(db, 0, what, sizeof what) > 0)
    return left_running(tx, what);
  int src = step(db->st_sp_release);
  if (src == SQLITE_OK) {
    db->committing = 1;
    src = step(db->st_commit);
    db->committing = 0;
  }
  if (src != SQLITE_OK) {
    rc = lith_tx_error(tx, lith__code_of(src, db->conn), "COMMIT failed: %s", sqlite3_errmsg(db->conn));
    if (!sqlite3_get_autocommit(db->conn))
      step(db->st_rollback);
  } else {
    atomic_fetch_add_explicit(&db->commits, 1, memory_order_release);
    report_topics(db);
    db->dirty &= ~(unsigned)LITH__DIRTY_FK_FORGOT; /* checked, and committed: SQLite's count starts over */
  }
  db->ntopics = 0;
  return rc;
}

/* A transaction again, as lith's own steps after the function expect; rc:
 * what came before (the error returned first). */
static int begin_again(lith_tx *tx, int rc) {
  lith *db = tx->db;
  if (!sqlite3_get_autocommit(db->conn)) /* commit_now refused before its COMMIT: still in it */
    return rc;
  if (step(db->st_begin) != SQLITE_OK || step(db->st_sp) != SQLITE_OK) {
    db->tx_lost = 1;
    return rc != LITH_OK ? rc
                         : lith_tx_error(tx, lith__code_of(sqlite3_errcode(db->conn), db->conn),
                                         "BEGIN after COMMIT: %s", sqlite3_errmsg(db->conn));
  }
  return rc;
}

static int tx_commit(lith_tx *tx) {
  int rc = alone_check(tx, "lith_tx_commit");
  if (rc != LITH_OK)
    return rc;
  return begin_again(tx, commit_now(tx));
}

/* SQLite changes foreign_keys only outside a transaction: between the two. */
static int tx_foreign_keys(lith_tx *tx, int on) {
  lith *db = tx->db;
  int rc = alone_check(tx, "lith_tx_foreign_keys");
  if (rc != LITH_OK)
    return rc;
  if ((rc = commit_now(tx)) == LITH_OK) {
    int src = sqlite3_exec(db->conn, on ? "PRAGMA foreign_keys = ON" : "PRAGMA foreign_keys = OFF", NULL,
                           NULL, NULL);
    if (src != SQLITE_OK)
      rc = lith_tx_error(tx, lith__code_of(src, db->conn), "PRAGMA foreign_keys: %s",
                         sqlite3_errmsg(db->conn));
    else
      db->fk_changed = 1;
  }
  return begin_again(tx, rc);
}

/* SQLite runs VACUUM outside a transaction only: between the two, as
 * tx_foreign_keys. Its copy is a temporary database VACUUM attaches, so
 * an attach limit of 0 (a server's, against its clients' ATTACH) is lifted
 * for it; lith's own statement, it passes the authorizers (in_command is
 * clear), and command_timeout_ms bounds it as the command's own SQL. */
static int tx_vacuum(lith_tx *tx) {
  lith *db = tx->db;
  int rc = alone_check(tx, "lith_tx_vacuum");
  if (rc != LITH_OK)
    return rc;
  if ((rc = commit_now(tx)) == LITH_OK) {
    int attached = sqlite3_limit(db->conn, SQLITE_LIMIT_ATTACHED, -1);
    if (attached < 1)
      sqlite3_limit(db->conn, SQLITE_LIMIT_ATTACHED, 1);
    db->vacuuming = 1;
    int src = sqlite3_exec(db->conn, "VACUUM", NULL, NULL, NULL);
    db->vacuuming = 0;
    sqlite3_limit(db->conn, SQLITE_LIMIT_ATTACHED, attached);
    if (src == SQLITE_OK) /* a snapshot older than it reads the file as it was: count it */
      atomic_fetch_add_explicit(&db->commits, 1, memory_order_release);
    else if (tx->timed_out)
      rc = lith_tx_error(tx, LITH_INTERRUPTED, "VACUUM ran longer than command_timeout_ms (%d ms)",
                         db->opt.command_timeout_ms);
    else
      rc = lith_tx_error(tx, lith__code_of(src, db->conn), "VACUUM: %s", sqlite3_errmsg(db->conn));
  }
  return begin_again(tx, rc);
}

static int tx_rollback(lith_tx *tx) {
  lith *db = tx->db;
  int rc = alone_check(tx, "lith_tx_rollback");
  if (rc != LITH_OK)
    return rc;
  reset_running(db, 1, NULL, 0);
  reset_running(db, 0, NULL, 0);
  db->ntopics = 0;
  int src = step(db->st_sp_rollback);
  if (src != SQLITE_OK)
    return lith_tx_error(tx, lith__code_of(src, db->conn), "ROLLBACK: %s", sqlite3_errmsg(db->conn));
  return LITH_OK;
}

void *lith__writer_main(void *arg) {
  lith *db = arg;
  int n;
  while ((n = take(db)) > 0) {
    run_taken(db, n);
    lith__ckpt_after_batch(&db->ckpt, db->conn); /* its figures are read live by lith_stats_get */
  }
  lith__ckpt_hold_cancel(&db->ckpt); /* readers still coming need not wait out its bound */
  return NULL;
}

/* The message goes to the thread's lith_errmsg too, as every lith call's. */
int lith_tx_commit(lith_tx *tx) {
  /* lith's own statements: the authorizer's command rules must pass them
   * (a statement is authorized again when SQLite prepares it anew after a
   * schema change) */
  int rc = alone_check(tx, "lith_tx_commit");
  if (rc != LITH_OK)
    return lith_set_error(rc, "%s", tx->errmsg);
  tx->db->in_command = 0;
  rc = tx_commit(tx);
  tx->db->in_command = 1;
  return rc == LITH_OK ? rc : lith_set_error(rc, "%s", tx->errmsg);
}

int lith_tx_foreign_keys(lith_tx *tx, int on) {
  int rc = alone_check(tx, "lith_tx_foreign_keys");
  if (rc != LITH_OK)
    return lith_set_error(rc, "%s", tx->errmsg);
  tx->db->in_command = 0;
  rc = tx_foreign_keys(tx, on);
  tx->db->in_command = 1;
  return rc == LITH_OK ? rc : lith_set_error(rc, "%s", tx->errmsg);
}

int lith_tx_vacuum(lith_tx *tx) {
  int rc = alone_check(tx, "lith_tx_vacuum");
  if (rc != LITH_OK)
    return lith_set_error(rc, "%s", tx->errmsg);
  tx->db->in_command = 0;
  rc = tx_vacuum(tx);
  tx->db->in_command = 1;
  return rc == LITH_OK ? rc : lith_set_error(rc, "%s", tx->errmsg);
}

int lith_tx_rollback(lith_tx *tx) {
  int rc = alone_check(tx, "lith_tx_rollback");
  if (rc != LITH_OK)
    return lith_set_error(rc, "%s", tx->errmsg);
  tx->db->in_command = 0;
  rc = tx_rollback(tx);
  tx->db->in_command = 1;
  return rc == LITH_OK ? rc : lith_set_error(rc, "%s", tx->errmsg);
}
