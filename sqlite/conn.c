/* Connection opening, pragmas, migrations. */
#include "conn.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errcode.h"

void lith_options_default(lith_options *opt) {
  memset(opt, 0, sizeof *opt);
  opt->synchronous = LITH_SYNC_NORMAL;
  opt->checkpoint = LITH_CHECKPOINT_WRITER;
  opt->checkpoint_pages = 1000;
  opt->wal_hold_ms = 100;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  opt->readers = cpus < 1 ? 2 : cpus > 64 ? 64 : (int)cpus;
  opt->max_batch = 1024;
  opt->queue_capacity = 65536;
  opt->busy_timeout_ms = 5000;
  opt->cache_size_kib = 16384;
  opt->mmap_size = 0;
  opt->foreign_keys = 1;
  opt->file_mode = 0600;
  opt->stmt_cache_size = 256;
}

int lith__options_check(const lith_options *o) {
  if (o->synchronous != LITH_SYNC_NORMAL && o->synchronous != LITH_SYNC_FULL)
    return lith__fail(LITH_MISUSE, "options: synchronous must be LITH_SYNC_NORMAL or LITH_SYNC_FULL");
  if (o->checkpoint < LITH_CHECKPOINT_WRITER || o->checkpoint > LITH_CHECKPOINT_EXTERNAL)
    return lith__fail(LITH_MISUSE, "options: checkpoint must be WRITER, AUTO or EXTERNAL");
  if (o->checkpoint_pages < 1)
    return lith__fail(LITH_MISUSE, "options: checkpoint_pages must be at least 1");
  if (o->wal_hold_ms < 0 || o->wal_hold_ms > 60000)
    return lith__fail(LITH_MISUSE, "options: wal_hold_ms must be between 0 (never hold) and 60000");
  if (o->readers < 1 || o->readers > 1024)
    return lith__fail(LITH_MISUSE, "options: readers must be between 1 and 1024");
  if (o->max_batch < 1)
    return lith__fail(LITH_MISUSE, "options: max_batch must be at least 1");
  if (o->queue_capacity < 1)
    return lith__fail(LITH_MISUSE, "options: queue_capacity must be at least 1");
  if (o->busy_timeout_ms < 0)
    return lith__fail(LITH_MISUSE, "options: busy_timeout_ms must not be negative");
  if (o->command_timeout_ms < 0)
    return lith__fail(LITH_MISUSE, "options: command_timeout_ms must not be negative (0: no limit)");
  if (o->cache_size_kib < 0 || o->mmap_size < 0 || o->stmt_cache_size < 1)
    return lith__fail(LITH_MISUSE, "options: cache_size_kib, mmap_size must be >= 0, stmt_cache_size >= 1");
  if ((o->file_mode & ~0777) != 0 || (o->file_mode & 0600) != 0600)
    return lith__fail(LITH_MISUSE, "options: file_mode must be permission bits including 0600, got %04o",
                      (unsigned)o->file_mode);
  if (o->vfs && !sqlite3_vfs_find(o->vfs))
    return lith__fail(LITH_MISUSE, "options: no SQLite VFS named \"%s\" is registered", o->vfs);
  if (o->n_migrations < 0 || (o->n_migrations > 0 && !o->migrations))
    return lith__fail(LITH_MISUSE, "options: n_migrations without migrations");
  return LITH_OK;
}

static int exec(sqlite3 *conn, const char *sql) {
  int rc = sqlite3_exec(conn, sql, NULL, NULL, NULL);
  if (rc != SQLITE_OK)
    return lith__fail_sqlite(rc, conn, sql);
  return LITH_OK;
}

enum { CONN_READER, CONN_WRITER, CONN_CHECKPOINTER };

static int64_t page_size(sqlite3 *conn) {
  sqlite3_stmt *st = NULL;
  int64_t n = 4096;
  if (sqlite3_prepare_v2(conn, "PRAGMA page_size", -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    n = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return n;
}

static int tune(sqlite3 *conn, const lith_options *opt, int kind) {
  char sql[256];
  int rc;
  sqlite3_extended_result_codes(conn, 1);
  sqlite3_busy_timeout(conn, opt->busy_timeout_ms);
  /* SQLite's advice for SQL from elsewhere (sqlite.org/security.html), on
   * every connection, readers too (lithd runs its clients' SQL on both):
   * no writes that can corrupt (writable_schema, shadow tables), no
   * functions with side effects reached through the schema, no
   * fts3_tokenizer() pointer from SQL text, no extensions. */
  static const int off_on[][2] = {{SQLITE_DBCONFIG_DEFENSIVE, 1},
                                  {SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0},
                                  {SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER, 0},
                                  {SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0}};
  for (size_t i = 0; i < sizeof off_on / sizeof *off_on; i++) {
    int src = sqlite3_db_config(conn, off_on[i][0], off_on[i][1], (int *)NULL);
    if (src != SQLITE_OK)
      return lith__fail_sqlite(src, conn, "sqlite3_db_config");
  }
  snprintf(sql, sizeof sql,
           "PRAGMA synchronous=%s; PRAGMA cache_size=-%d; PRAGMA mmap_size=%lld;"
           " PRAGMA foreign_keys=%s; PRAGMA temp_store=MEMORY;",
           opt->synchronous == LITH_SYNC_FULL ? "FULL" : "NORMAL", opt->cache_size_kib,
           (long long)opt->mmap_size, opt->foreign_keys ? "ON" : "OFF");
  if ((rc = exec(conn, sql)) != LITH_OK)
    return rc;
  if (kind == CONN_WRITER) {
    /* journal_mode=WAL is persistent in the file; only the writer sets it. */
    sqlite3_stmt *st = NULL;
    int src = sqlite3_prepare_v2(conn, "PRAGMA journal_mode=WAL", -1, &st, NULL);
    if (src == SQLITE_OK)
      src = sqlite3_step(st);
    if (src != SQLITE_ROW) {
      rc = lith__fail_sqlite(src, conn, "PRAGMA journal_mode=WAL");
      sqlite3_finalize(st);
      return rc;
    }
    int wal = strcmp((const char *)sqlite3_column_text(st, 0), "wal") == 0;
    sqlite3_finalize(st);
    if (!wal)
      return lith__fail(LITH_ERROR,
                        "the database refused WAL mode (is it on a network or read-only file system?)");
    /* lith decides when to checkpoint (sqlite/checkpoint.c). */
    sqlite3_wal_autocheckpoint(conn, 0);
    /* When the WAL starts over, SQLite cuts the file back to this (it would
     * otherwise keep the size of its largest burst for ever: on a full disk
     * the room a checkpoint needs). Four checkpoints' worth: the most the
     * WAL holds in steady use (checkpoint.c). */
    snprintf(sql, sizeof sql, "PRAGMA journal_size_limit=%lld",
             (long long)opt->checkpoint_pages * 4 * page_size(conn));
    if ((rc = exec(conn, sql)) != LITH_OK)
      return rc;
    if (opt->checkpoint == LITH_CHECKPOINT_EXTERNAL) {
      /* Closing the last connection would otherwise checkpoint and delete
       * the WAL under the replicator's feet. */
      sqlite3_db_config(conn, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)NULL);
    }
  } else {
    sqlite3_wal_autocheckpoint(conn, 0);
    sqlite3_db_config(conn, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)NULL);
  }
  return LITH_OK;
}

void lith__create_file(const char *path, int mode) {
  /* An empty file is a new SQLite database. Created here rather than by
   * SQLite (which uses 0644 less the umask) so that its mode, which SQLite
   * gives the -wal and -shm files too, is the one asked for. A file that
   * exists is left as it is; any other failure is SQLite's to report. */
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, (mode_t)mode);
  if (fd >= 0)
    close(fd);
}

static int open_conn(const char *path, const lith_options *opt, int kind, sqlite3 **out) {
  *out = NULL;
  if (!path || !*path || strcmp(path, ":memory:") == 0 || strncmp(path, "file:", 5) == 0)
    return lith__fail(LITH_MISUSE, "lith needs a database file path (WAL mode needs a file), got \"%s\"",
                      path ? path : "(null)");
  if (kind == CONN_WRITER)
    lith__create_file(path, opt->file_mode);
  sqlite3 *conn = NULL;
  int flags = SQLITE_OPEN_NOMUTEX | (kind == CONN_WRITER         ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
                                     : kind == CONN_CHECKPOINTER ? SQLITE_OPEN_READWRITE
                                                                 : SQLITE_OPEN_READONLY);
  int rc = sqlite3_open_v2(path, &conn, flags, opt->vfs);
  if (rc != SQLITE_OK) {
    rc = lith__fail(lith_from_sqlite(rc), "open %s: %s", path,
                    conn ? sqlite3_errmsg(conn) : sqlite3_errstr(rc));
    goto err_close;
  }
  if ((rc = tune(conn, opt, kind)) != LITH_OK)
    goto err_close;
  if (opt->on_connect) {
    int src = opt->on_connect(opt->on_connect_ctx, conn);
    if (src != SQLITE_OK) {
      rc = lith__fail(lith_from_sqlite(src), "open %s: on_connect: %s", path, sqlite3_errstr(src));
      goto err_close;
    }
  }
  *out = conn;
  return LITH_OK;

err_close:
  sqlite3_close(conn);
  return rc;
}

int lith__conn_open_writer(const char *path, const lith_options *opt, sqlite3 **out) {
  return open_conn(path, opt, CONN_WRITER, out);
}

int lith__conn_open_checkpointer(const char *path, const lith_options *opt, sqlite3 **out) {
  return open_conn(path, opt, CONN_CHECKPOINTER, out);
}

int lith__conn_open_reader(const char *path, const lith_options *opt, sqlite3 **out) {
  return open_conn(path, opt, CONN_READER, out);
}

static int user_version(sqlite3 *conn, int *out) {
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(conn, "PRAGMA user_version", -1, &st, NULL);
  if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    *out = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return LITH_OK;
  }
  rc = lith__fail_sqlite(rc, conn, "PRAGMA user_version");
  sqlite3_finalize(st);
  return rc;
}

/* Migrations run in lith's transaction: refuse their own BEGIN, COMMIT or
 * ROLLBACK, which would commit half of them. */
static int deny_transactions(void *ctx, int action, const char *a, const char *b, const char *c,
                             const char *d) {
  (void)ctx, (void)a, (void)b, (void)c, (void)d;
  return action == SQLITE_TRANSACTION ? SQLITE_DENY : SQLITE_OK;
}

/* Non-zero when PRAGMA foreign_key_check finds a row without its parent
 * (or cannot be read). A migration commits none, as no command does
 * (batch.c): PRAGMA defer_foreign_keys = OFF forgets SQLite's count of
 * deferred violations, so a table redefined under the rows that reference
 * it (SQLite's advice) could otherwise commit one. */
static int fk_violated(sqlite3 *conn) {
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(conn, "SELECT 1 FROM pragma_foreign_key_check LIMIT 1", -1, &st, NULL);
  int found = rc != SQLITE_OK || sqlite3_step(st) != SQLITE_DONE;
  sqlite3_finalize(st);
  return found;
}

int lith__conn_migrate(sqlite3 *conn, const lith_options *opt) {
  int rc, version = 0;
  char sql[64];
  if (opt->n_migrations == 0)
    return LITH_OK;
  if ((rc = exec(conn, "BEGIN IMMEDIATE")) != LITH_OK)
    return rc;
  sqlite3_set_authorizer(conn, deny_transactions, NULL);
  if ((rc = user_version(conn, &version)) != LITH_OK)
    goto err_rollback;
  if (version > opt->n_migrations) {
    rc = lith__fail(LITH_SCHEMA, "database schema version %d is newer than the %d migrations given", version,
                    opt->n_migrations);
    goto err_rollback;
  }
  for (int i = version; i < opt->n_migrations; i++) {
    int src = sqlite3_exec(conn, opt->migrations[i] ? opt->migrations[i] : "", NULL, NULL, NULL);
    if (src != SQLITE_OK) {
      rc = lith__fail(lith_from_sqlite(src), "migration %d: %s", i + 1, sqlite3_errmsg(conn));
      goto err_rollback;
    }
    if (sqlite3_get_autocommit(conn)) { /* SQLite rolled the transaction back */
      rc = lith__fail(LITH_ABORTED, "migration %d: the transaction was rolled back", i + 1);
      goto err_rollback;
    }
  }
  if (opt->foreign_keys && version < opt->n_migrations && fk_violated(conn)) {
    rc = lith__fail(LITH_CONSTRAINT,
                    "migrations %d..%d: FOREIGN KEY constraint failed (PRAGMA foreign_key_check: a row "
                    "without its parent)",
                    version + 1, opt->n_migrations);
    goto err_rollback;
  }
  sqlite3_set_authorizer(conn, NULL, NULL);
  snprintf(sql, sizeof sql, "PRAGMA user_version=%d", opt->n_migrations);
  if ((rc = exec(conn, sql)) != LITH_OK)
    goto err_rollback;
  if ((rc = exec(conn, "COMMIT")) != LITH_OK)
    goto err_rollback;
  return LITH_OK;

err_rollback:
  sqlite3_set_authorizer(conn, NULL, NULL);
  if (!sqlite3_get_autocommit(conn))
    sqlite3_exec(conn, "ROLLBACK", NULL, NULL, NULL);
  return rc;
}
