/* lithd --dqlite --restore: see dqlite_restore.h. */
#include "dqlite_restore.h"

#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "client.h"
#include "lith.h"
#include "log.h"
#include "restore.h"
#include "sqldump.h"

/* Rows per INSERT at most (and LITH_DQ_MAX_PARAMS values): one request
 * each; beyond ~64 a request saves nothing more worth its size. */
#define RESTORE_ROWS_PER_STMT 64
/* The values of one INSERT's rows: past this many bytes the rows held so
 * far go (alone, one by one), so one request stays small next to
 * LITH_DQ_MAX_BODY whatever the rows hold. */
#define RESTORE_CHUNK_BYTES (1u << 20)
/* The client's timeout for one request, at least: a COMMIT of a full
 * transaction waits for a majority of the nodes to store it. */
#define RESTORE_CALL_MS 30000
/* The leader search asks each node with LITH_DQ_REQUEST_MS (client.h),
 * not RESTORE_CALL_MS: a node that does not answer cost lithd's start
 * 30 s. */

/* A table copied: its name and its rows, for the final count. */
typedef struct copied {
  char *name;
  int64_t rows;
} copied;

typedef struct loader {
  const char *from, *database;
  sqlite3 *src;
  lith__dq_conn *c;
  uint32_t db;
  int last_tx;       /* in the last transaction: it is never cut */
  size_t tx_bytes;   /* what the open transaction writes, as estimated (flush) */
  size_t row_pages;  /* the table being copied: bytes of index pages one row may write */
  int64_t page_size; /* the cluster's database's */
  int64_t rows, bytes;
  int txs;
  copied *tables;
  int ntables, cap;
  /* The rows held for one INSERT: LITH_DQ_MAX_PARAMS values, their copies
   * (malloc'd: the source's are valid until its next step only). */
  lith__dq_value v[LITH_DQ_MAX_PARAMS];
  void *own[LITH_DQ_MAX_PARAMS];
  unsigned char nul[LITH_DQ_MAX_PARAMS]; /* a text with U+0000, sent as a blob */
  int nv, nrows, ncols;
  size_t chunk_bytes;
} loader;

static void drop_values(loader *L) {
  for (int i = 0; i < L->nv; i++) {
    free(L->own[i]);
    L->own[i] = NULL;
  }
  L->nv = L->nrows = 0;
  L->chunk_bytes = 0;
}

/* A failed request, logged; -1. */
static int dq_fail(loader *L, const char *what) {
  lithd_log(LITHD_LOG_ERROR, "restore: %s: %s (code %" PRIu64 ")", what, lith__dq_errmsg(L->c),
            lith__dq_errcode(L->c));
  return -1;
}

static int exec(loader *L, const char *sql) {
  return lith__dq_exec_sql(L->c, L->db, sql, NULL, 0, NULL) == LITH_DQ_OK ? 0 : dq_fail(L, sql);
}

/* sql's one integer (first row, first column) on the cluster into *out. */
static int query_int(lith__dq_conn *c, uint32_t db, const char *sql, int64_t *out) {
  lith__dq_rows rows;
  int rc;
  lith__dq_rows_init(&rows);
  rc = lith__dq_query_sql(c, db, sql, NULL, 0, &rows);
  if (rc == LITH_DQ_OK) {
    const lith__dq_value *v = rows.nrows > 0 && rows.ncols > 0 ? lith__dq_rows_at(&rows, 0, 0) : NULL;
    if (v != NULL && v->type == LITH_DQ_INTEGER)
      *out = v->i;
    else
      rc = LITH_DQ_PROTO;
  }
  lith__dq_rows_free(&rows);
  return rc;
}

/* A connection to the leader with the database open; NULL after a
 * message. */
static lith__dq_conn *leader(const char *addresses, const char *database, int timeout_ms, uint32_t *db,
                             int level) {
  lith__dq_conn *c = lith__dq_new(LITH_DQ_REQUEST_MS);
  int rc;
  if (c == NULL) {
    lithd_log(LITHD_LOG_ERROR, "restore: out of memory");
    return NULL;
  }
  rc = lith__dq_connect_leader(c, addresses, timeout_ms);
  lith__dq_set_timeout(c, timeout_ms > RESTORE_CALL_MS ? timeout_ms : RESTORE_CALL_MS);
  if (rc == LITH_DQ_OK)
    rc = lith__dq_open_writer(c, database, db); /* its transactions spill nothing (client.h) */
  if (rc != LITH_DQ_OK) {
    lithd_log(level, "dqlite %s: no leader answered within %d ms: %s", addresses, timeout_ms,
              lith__dq_errmsg(c));
    lith__dq_close(c);
    return NULL;
  }
  return c;
}

/* The marker's row, when the database holds one: *present 1, its source
 * and start time into source[cap], started[cap]. 0, or -1 (asked nothing
 * could be learnt). */
static int read_marker(lith__dq_conn *c, uint32_t db, int *present, char *source, char *started, size_t cap) {
  lith__dq_rows rows;
  int64_t n = 0;
  *present = 0;
  source[0] = started[0] = '\0';
  if (query_int(c, db,
                "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = '" LITHD_DQ_RESTORE_MARK
                "'",
                &n) != LITH_DQ_OK)
    return -1;
  if (n == 0)
    return 0;
  *present = 1;
  lith__dq_rows_init(&rows);
  if (lith__dq_query_sql(c, db, "SELECT source, started FROM " LITHD_DQ_RESTORE_MARK " LIMIT 1", NULL, 0,
                         &rows) == LITH_DQ_OK &&
      rows.nrows == 1 && rows.ncols == 2) {
    const lith__dq_value *s = lith__dq_rows_at(&rows, 0, 0), *t = lith__dq_rows_at(&rows, 0, 1);
    if (s->type == LITH_DQ_TEXT)
      snprintf(source, cap, "%s", (const char *)s->p);
    if (t->type == LITH_DQ_TEXT || t->type == LITH_DQ_ISO8601)
      snprintf(started, cap, "%s", (const char *)t->p);
  }
  lith__dq_rows_free(&rows);
  return 0;
}

static void say_partial(int level, const char *database, const char *source, const char *started) {
  lithd_log(level,
            "the cluster's database %s holds a partial load: lithd --restore of %s begun %s did not end (the "
            "table " LITHD_DQ_RESTORE_MARK " says so); start a new cluster (lith-node with new --dir's) or "
            "name another --dqlite-db, and --restore again",
            database, source[0] ? source : "(unknown)", started[0] ? started : "at an unknown time");
}

int lithd_dq_restore_partial(const char *addresses, const char *database, int timeout_ms) {
  char source[PATH_MAX], started[64];
  uint32_t db;
  int present = 0, rc;
  lith__dq_conn *c = leader(addresses, database, timeout_ms, &db, LITHD_LOG_WARN);
  if (c == NULL) {
    lithd_log(LITHD_LOG_WARN, "could not check the cluster's database %s for a partial --restore", database);
    return -1;
  }
  rc = read_marker(c, db, &present, source, started, sizeof source);
  lith__dq_close(c);
  if (rc != 0) {
    lithd_log(LITHD_LOG_WARN, "could not check the cluster's database %s for a partial --restore", database);
    return -1;
  }
  if (present)
    say_partial(LITHD_LOG_ERROR, database, source, started);
  return present;
}

/* ---- FROM ---------------------------------------------------------------- */

/* What the copy cannot carry, refused before the cluster is touched; the
 * source's foreign key violations counted into *fk. 0, or -1 after a
 * message. */
static int vet_source(loader *L, int64_t *fk) {
  sqlite3_stmt *st = NULL;
  char err[512];
  int rc, out = -1;

  *fk = 0;
  if (sqlite3_prepare_v2(L->src, LITHD_DUMP_TABLES_SQL, -1, &st, NULL) != SQLITE_OK)
    goto sqlerr;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const char *name = (const char *)sqlite3_column_text(st, 0);
    const char *sql = (const char *)sqlite3_column_text(st, 1);
    char *sel = NULL, *cols = NULL;
    int n = 0;
    if (strcmp(name, LITHD_DQ_RESTORE_MARK) == 0) {
      lithd_log(LITHD_LOG_ERROR,
                "restore: %s holds the table " LITHD_DQ_RESTORE_MARK
                ": it is a copy of a partial load, not a whole database",
                L->from);
      goto out;
    }
    if (sqlite3_strnicmp(sql, "CREATE VIRTUAL TABLE", 20) == 0) {
      lithd_log(LITHD_LOG_ERROR,
                "restore: %s has the virtual table %s: a virtual table's data cannot be loaded into a "
                "cluster through SQL (its shadow tables are written by its module); drop it from a copy of "
                "%s, restore that, and create it again through lithd",
                L->from, name, L->from);
      goto out;
    }
    if (lithd_dump_columns(L->src, name, &sel, &cols, &n, err, sizeof err) != SQLITE_OK) {
      lithd_log(LITHD_LOG_ERROR, "restore: %s: %s", L->from, err);
      goto out;
    }
    sqlite3_free(sel);
    sqlite3_free(cols);
    if (n > LITH_DQ_MAX_PARAMS) {
      lithd_log(LITHD_LOG_ERROR,
                "restore: %s: table %s has %d columns (with its rowid); a dqlite request binds at most %d",
                L->from, name, n, LITH_DQ_MAX_PARAMS);
      goto out;
    }
  }
  if (rc != SQLITE_DONE)
    goto sqlerr;
  sqlite3_finalize(st);
  if (sqlite3_prepare_v2(L->src, "SELECT count(*) FROM pragma_foreign_key_check", -1, &st, NULL) !=
          SQLITE_OK ||
      sqlite3_step(st) != SQLITE_ROW)
    goto sqlerr;
  *fk = sqlite3_column_int64(st, 0);
  out = 0;
  goto out;
sqlerr:
  lithd_log(LITHD_LOG_ERROR, "restore: cannot read %s: %s", L->from, sqlite3_errmsg(L->src));
out:
  sqlite3_finalize(st);
  return out;
}

/* ---- Rows ------------------------------------------------------------------ */

static int begin(loader *L) {
  if (exec(L, "BEGIN") != 0)
    return -1;
  L->tx_bytes = 0;
  return 0;
}

static int commit(loader *L) {
  if (exec(L, "COMMIT") != 0)
    return -1;
  L->txs++;
  return 0;
}

/* "INSERT INTO "t"(cols) VALUES(?,..),..." for nrows rows, column i of a
 * row a CAST(? AS TEXT) when nul (one row only) says so; sqlite3_free. */
static char *insert_sql(const char *table, const char *cols, int ncols, int nrows, const unsigned char *nul) {
  sqlite3_str *s = sqlite3_str_new(NULL);
  sqlite3_str_appendf(s, "INSERT INTO \"%w\"(%s) VALUES", table, cols);
  for (int r = 0; r < nrows; r++) {
    sqlite3_str_appendall(s, r > 0 ? ",(" : "(");
    for (int i = 0; i < ncols; i++)
      sqlite3_str_appendall(s, nul != NULL && nul[i] ? (i > 0 ? ",CAST(? AS TEXT)" : "CAST(? AS TEXT)")
                               : i > 0               ? ",?"
                                                     : "?");
    sqlite3_str_appendall(s, ")");
  }
  return sqlite3_str_finish(s);
}

/* One table's INSERTs on the cluster: `many` for RESTORE_ROWS_PER_STMT
 * rows (per) at once, `one` for a row; prepared once per table. */
typedef struct inserts {
  const char *table, *cols;
  uint32_t many, one;
  int per, has_many, has_one;
} inserts;

/* The rows held (L->nrows) go: as one INSERT when they fill `many`, else
 * one by one; a row with a NUL in a text alone, through its own SQL. The
 * transaction is cut after them when it is full (not the last one). */
static int flush(loader *L, inserts *ins) {
  int rc = 0;
  if (L->nrows == 0)
    return 0;
  if (L->nrows == ins->per && ins->has_many) {
    if (lith__dq_exec(L->c, L->db, ins->many, L->v, (unsigned)L->nv, NULL) != LITH_DQ_OK)
      rc = -1;
  } else {
    for (int r = 0; rc == 0 && r < L->nrows; r++) {
      const lith__dq_value *row = &L->v[r * L->ncols];
      const unsigned char *nul = &L->nul[r * L->ncols];
      if (memchr(nul, 1, (size_t)L->ncols) != NULL) {
        char *sql = insert_sql(ins->table, ins->cols, L->ncols, 1, nul);
        if (sql == NULL || lith__dq_exec_sql(L->c, L->db, sql, row, (unsigned)L->ncols, NULL) != LITH_DQ_OK)
          rc = -1;
        sqlite3_free(sql);
      } else if (lith__dq_exec(L->c, L->db, ins->one, row, (unsigned)L->ncols, NULL) != LITH_DQ_OK) {
        rc = -1;
      }
    }
  }
  if (rc != 0) {
    char what[256];
    snprintf(what, sizeof what, "rows of %s", ins->table);
    if ((lith__dq_errcode(L->c) & 0xff) == SQLITE_TOOBIG)
      lithd_log(LITHD_LOG_ERROR,
                "restore: a value of table %s is longer than the nodes take: start them with a larger "
                "--max-value-bytes (SQLITE_LIMIT_LENGTH)",
                ins->table);
    drop_values(L);
    return dq_fail(L, what);
  }
  L->rows += L->nrows;
  L->bytes += (int64_t)L->chunk_bytes;
  /* What the rows write: their bytes in the table's pages (appended in
   * rowid order), and for each index one page per row at worst (a random
   * key lands on another page each time): dqlite_restore.h. */
  L->tx_bytes += L->chunk_bytes + (size_t)L->nrows * L->row_pages;
  drop_values(L);
  if (!L->last_tx && L->tx_bytes >= LITHD_DQ_RESTORE_TX_BYTES && (commit(L) != 0 || begin(L) != 0))
    return -1;
  return 0;
}

/* The current row of `rows` (ncols columns) held as parameters (copies).
 * 0, or -1 out of memory. */
static int hold_row(loader *L, sqlite3_stmt *rows) {
  for (int i = 0; i < L->ncols; i++) {
    int k = L->nv++;
    lith__dq_value *v = &L->v[k];
    L->nul[k] = 0;
    L->own[k] = NULL;
    switch (sqlite3_column_type(rows, i)) {
    case SQLITE_INTEGER: *v = lith__dq_int(sqlite3_column_int64(rows, i)); break;
    case SQLITE_FLOAT: *v = lith__dq_float(sqlite3_column_double(rows, i)); break;
    case SQLITE_TEXT:
    case SQLITE_BLOB: {
      int text = sqlite3_column_type(rows, i) == SQLITE_TEXT;
      const void *p = text ? (const void *)sqlite3_column_text(rows, i) : sqlite3_column_blob(rows, i);
      size_t n = (size_t)sqlite3_column_bytes(rows, i);
      char *copy = malloc(n + 1);
      if (copy == NULL || (p == NULL && n > 0)) {
        free(copy);
        return -1;
      }
      if (n > 0)
        memcpy(copy, p, n);
      copy[n] = '\0';
      L->own[k] = copy;
      if (text && strlen(copy) == n) {
        *v = lith__dq_text(copy);
      } else {
        *v = lith__dq_blob(copy, n);
        L->nul[k] = (unsigned char)text; /* the wire's text ends at its first NUL */
      }
      L->chunk_bytes += n;
      break;
    }
    default: *v = lith__dq_null(); break;
    }
    L->chunk_bytes += 8;
  }
  L->nrows++;
  return 0;
}

/* The bytes of index pages one row of `table` may write: a page per
 * index (its UNIQUE and PRIMARY KEY ones too), into L->row_pages. */
static int index_pages(loader *L, const char *table) {
  sqlite3_stmt *st = NULL;
  int rc = -1;
  if (sqlite3_prepare_v2(L->src, "SELECT count(*) FROM pragma_index_list(?1)", -1, &st, NULL) == SQLITE_OK &&
      sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
    L->row_pages = (size_t)sqlite3_column_int64(st, 0) * (size_t)L->page_size;
    rc = 0;
  } else {
    lithd_log(LITHD_LOG_ERROR, "restore: cannot read the indexes of %s in %s: %s", table, L->from,
              sqlite3_errmsg(L->src));
  }
  sqlite3_finalize(st);
  return rc;
}

/* Every row of `table` from FROM into the cluster. */
static int copy_rows(loader *L, const char *table) {
  sqlite3_stmt *rows = NULL;
  char *sel = NULL, *cols = NULL, *many = NULL, *one = NULL, err[512];
  inserts ins = {table, NULL, 0, 0, 1, 0, 0};
  int64_t before = L->rows;
  int rc, out = -1;

  if (lithd_dump_columns(L->src, table, &sel, &cols, &L->ncols, err, sizeof err) != SQLITE_OK) {
    lithd_log(LITHD_LOG_ERROR, "restore: %s: %s", L->from, err);
    goto out;
  }
  if (L->ncols == 0) {
    out = 0;
    goto out;
  }
  if (index_pages(L, table) != 0)
    goto out;
  ins.cols = cols;
  ins.per = LITH_DQ_MAX_PARAMS / L->ncols;
  if (ins.per > RESTORE_ROWS_PER_STMT)
    ins.per = RESTORE_ROWS_PER_STMT;
  one = insert_sql(table, cols, L->ncols, 1, NULL);
  many = ins.per > 1 ? insert_sql(table, cols, L->ncols, ins.per, NULL) : NULL;
  if (one == NULL || (ins.per > 1 && many == NULL)) {
    lithd_log(LITHD_LOG_ERROR, "restore: out of memory");
    goto out;
  }
  if (lith__dq_prepare(L->c, L->db, one, &ins.one, NULL) != LITH_DQ_OK) {
    dq_fail(L, one);
    goto out;
  }
  ins.has_one = 1;
  if (many != NULL) {
    if (lith__dq_prepare(L->c, L->db, many, &ins.many, NULL) != LITH_DQ_OK) {
      dq_fail(L, "INSERT of several rows");
      goto out;
    }
    ins.has_many = 1;
  }
  if (sqlite3_prepare_v2(L->src, sel, -1, &rows, NULL) != SQLITE_OK)
    goto sqlerr;
  while ((rc = sqlite3_step(rows)) == SQLITE_ROW) {
    if (hold_row(L, rows) != 0) {
      lithd_log(LITHD_LOG_ERROR, "restore: out of memory");
      goto out;
    }
    if ((L->nrows == ins.per || L->chunk_bytes >= RESTORE_CHUNK_BYTES) && flush(L, &ins) != 0)
      goto out;
  }
  if (rc != SQLITE_DONE)
    goto sqlerr;
  if (flush(L, &ins) != 0)
    goto out;
  if (L->ntables == L->cap) {
    int cap = L->cap > 0 ? L->cap * 2 : 16;
    copied *t = realloc(L->tables, (size_t)cap * sizeof *t);
    if (t == NULL) {
      lithd_log(LITHD_LOG_ERROR, "restore: out of memory");
      goto out;
    }
    L->tables = t;
    L->cap = cap;
  }
  if ((L->tables[L->ntables].name = strdup(table)) == NULL) {
    lithd_log(LITHD_LOG_ERROR, "restore: out of memory");
    goto out;
  }
  L->tables[L->ntables++].rows = L->rows - before;
  out = 0;
  goto out;
sqlerr:
  lithd_log(LITHD_LOG_ERROR, "restore: cannot read the rows of %s from %s: %s", table, L->from,
            sqlite3_errmsg(L->src));
out:
  drop_values(L);
  /* Finalized once each (never used after: client.h), when the connection
   * still stands. */
  if (ins.has_many && lith__dq_connected(L->c))
    lith__dq_finalize(L->c, L->db, ins.many);
  if (ins.has_one && lith__dq_connected(L->c))
    lith__dq_finalize(L->c, L->db, ins.one);
  sqlite3_finalize(rows);
  sqlite3_free(sel);
  sqlite3_free(cols);
  sqlite3_free(many);
  sqlite3_free(one);
  return out;
}

/* ---- The load ---------------------------------------------------------------- */

/* Each row of FROM's `query` (name, sql) or (type, sql) whose first
 * column `keep` accepts: its sql run on the cluster. */
static int run_schema(loader *L, const char *query, int (*keep)(const char *first)) {
  sqlite3_stmt *st = NULL;
  int rc, out = -1;
  if (sqlite3_prepare_v2(L->src, query, -1, &st, NULL) != SQLITE_OK) {
    lithd_log(LITHD_LOG_ERROR, "restore: cannot read %s: %s", L->from, sqlite3_errmsg(L->src));
    return -1;
  }
  while ((rc = sqlite3_step(st)) == SQLITE_ROW)
    if (keep((const char *)sqlite3_column_text(st, 0)) &&
        exec(L, (const char *)sqlite3_column_text(st, 1)) != 0)
      goto out;
  if (rc != SQLITE_DONE) {
    lithd_log(LITHD_LOG_ERROR, "restore: cannot read %s: %s", L->from, sqlite3_errmsg(L->src));
    goto out;
  }
  out = 0;
out:
  sqlite3_finalize(st);
  return out;
}

/* A user table (not SQLite's own: sqlite_sequence is made by AUTOINCREMENT,
 * the statistics tables by ANALYZE). */
static int user_table(const char *name) { return strncmp(name, "sqlite_", 7) != 0; }
static int is_index(const char *type) { return strcmp(type, "index") == 0; }
static int not_index(const char *type) { return !is_index(type); }

/* Each user table's rows, in creation order. */
static int copy_tables(loader *L) {
  sqlite3_stmt *st = NULL;
  int rc, out = -1;
  if (sqlite3_prepare_v2(L->src, LITHD_DUMP_TABLES_SQL, -1, &st, NULL) != SQLITE_OK) {
    lithd_log(LITHD_LOG_ERROR, "restore: cannot read %s: %s", L->from, sqlite3_errmsg(L->src));
    return -1;
  }
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const char *name = (const char *)sqlite3_column_text(st, 0);
    if (user_table(name) && copy_rows(L, name) != 0)
      goto out;
  }
  if (rc != SQLITE_DONE) {
    lithd_log(LITHD_LOG_ERROR, "restore: cannot read %s: %s", L->from, sqlite3_errmsg(L->src));
    goto out;
  }
  out = 0;
out:
  sqlite3_finalize(st);
  return out;
}

/* SQLite's own tables as FROM has them: sqlite_sequence (the cluster's
 * holds the largest rowids copied; FROM's may be larger), the statistics
 * (ANALYZE sqlite_schema makes the tables, as the dump does). */
static int copy_internal(loader *L) {
  sqlite3_stmt *st = NULL;
  int rc, out = -1, analyzed = 0;
  char sql[128];
  if (sqlite3_prepare_v2(
          L->src,
          "SELECT name FROM sqlite_schema WHERE type = 'table' AND (name = 'sqlite_sequence' OR "
          "name GLOB 'sqlite_stat[0-9]') ORDER BY rowid",
          -1, &st, NULL) != SQLITE_OK) {
    lithd_log(LITHD_LOG_ERROR, "restore: cannot read %s: %s", L->from, sqlite3_errmsg(L->src));
    return -1;
  }
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const char *name = (const char *)sqlite3_column_text(st, 0);
    if (strcmp(name, "sqlite_sequence") != 0 && !analyzed) {
      if (exec(L, "ANALYZE sqlite_schema") != 0)
        goto out;
      analyzed = 1;
    }
    snprintf(sql, sizeof sql, "DELETE FROM %s", name);
    if (exec(L, sql) != 0 || copy_rows(L, name) != 0)
      goto out;
  }
  out = rc == SQLITE_DONE ? 0 : -1;
out:
  sqlite3_finalize(st);
  return out;
}

/* The checks of the last transaction: every table's rows, and no foreign
 * key violation FROM did not have. */
static int check_load(loader *L, int64_t fk_src) {
  int64_t n = 0;
  for (int i = 0; i < L->ntables; i++) {
    char *sql = sqlite3_mprintf("SELECT count(*) FROM \"%w\"", L->tables[i].name);
    int rc = sql != NULL ? query_int(L->c, L->db, sql, &n) : LITH_DQ_NOMEM;
    sqlite3_free(sql);
    if (rc != LITH_DQ_OK)
      return dq_fail(L, "counting the rows copied");
    if (n != L->tables[i].rows) {
      lithd_log(LITHD_LOG_ERROR,
                "restore: table %s holds %" PRId64 " rows on the cluster, %" PRId64 " were copied",
                L->tables[i].name, n, L->tables[i].rows);
      return -1;
    }
  }
  if (query_int(L->c, L->db, "SELECT count(*) FROM pragma_foreign_key_check", &n) != LITH_DQ_OK)
    return dq_fail(L, "PRAGMA foreign_key_check");
  if (n > fk_src) {
    lithd_log(LITHD_LOG_ERROR,
              "restore: PRAGMA foreign_key_check finds %" PRId64 " rows on the cluster, %" PRId64 " in %s", n,
              fk_src, L->from);
    return -1;
  }
  if (n > 0)
    lithd_log(LITHD_LOG_WARN,
              "restore: %s has %" PRId64
              " foreign key violations (PRAGMA foreign_key_check), copied as they are",
              L->from, n);
  return 0;
}

static int pragma_int(sqlite3 *db, const char *sql, int64_t *v) {
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW ? 0 : -1;
  *v = rc == 0 ? sqlite3_column_int64(st, 0) : 0;
  sqlite3_finalize(st);
  return rc;
}

int lithd_dq_restore(const char *from, const char *addresses, const char *database, int timeout_ms) {
  loader L;
  struct stat fs;
  char made[PATH_MAX], source[PATH_MAX], started[64], sql[PATH_MAX + 256];
  int64_t fk_src = 0, n = 0, uv = 0, app = 0;
  int present = 0, code = 1, loading = 0;
  int64_t t0 = lith_clock_ms();

  memset(&L, 0, sizeof L);
  L.from = from;
  L.database = database;
  made[0] = '\0';
  /* FROM: the checks of lithd --restore, then one read transaction. */
  if (lithd_restore_source(from, &fs) != 0 || lithd_restore_open(from, &L.src, made) != 0)
    goto out;
  if (sqlite3_exec(L.src, "BEGIN; SELECT count(*) FROM sqlite_schema", NULL, NULL, NULL) != SQLITE_OK) {
    lithd_log(LITHD_LOG_ERROR, "restore: cannot read %s: %s", from, sqlite3_errmsg(L.src));
    goto out;
  }
  if (lithd_restore_integrity(L.src, from) != 0 || vet_source(&L, &fk_src) != 0 ||
      pragma_int(L.src, "PRAGMA user_version", &uv) != 0 ||
      pragma_int(L.src, "PRAGMA application_id", &app) != 0)
    goto out;

  /* The cluster's database: empty, or refused. */
  if ((L.c = leader(addresses, database, timeout_ms, &L.db, LITHD_LOG_ERROR)) == NULL)
    goto out;
  if (read_marker(L.c, L.db, &present, source, started, sizeof source) != 0 ||
      query_int(L.c, L.db, "SELECT count(*) FROM sqlite_schema", &n) != LITH_DQ_OK) {
    dq_fail(&L, "reading the cluster's schema");
    goto out;
  }
  if (present) {
    say_partial(LITHD_LOG_ERROR, database, source, started);
    goto out;
  }
  if (query_int(L.c, L.db, "SELECT page_size FROM pragma_page_size", &L.page_size) != LITH_DQ_OK ||
      L.page_size <= 0) {
    dq_fail(&L, "reading the cluster's page size");
    goto out;
  }
  if (n > 0) {
    lithd_log(LITHD_LOG_ERROR,
              "restore: the cluster's database %s is not empty (%" PRId64
              " tables, indexes, views or triggers): "
              "a restore only loads an empty one; start a new cluster (lith-node with new --dir's) or name "
              "another --dqlite-db (no --force: nothing empties a cluster's database from outside)",
              database, n);
    goto out;
  }

  /* Transaction 1: the marker, the tables and the indexes. */
  if (exec(&L, "PRAGMA foreign_keys = OFF") != 0 || begin(&L) != 0)
    goto rollback;
  if (exec(&L, "CREATE TABLE " LITHD_DQ_RESTORE_MARK "(state TEXT NOT NULL, source TEXT, started TEXT)") != 0)
    goto rollback;
  {
    lith__dq_value p = lith__dq_text(from);
    if (lith__dq_exec_sql(L.c, L.db,
                          "INSERT INTO " LITHD_DQ_RESTORE_MARK
                          " VALUES ('loading', ?, strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))",
                          &p, 1, NULL) != LITH_DQ_OK) {
      dq_fail(&L, "the marker");
      goto rollback;
    }
  }
  if (run_schema(&L, LITHD_DUMP_TABLES_SQL, user_table) != 0 ||
      run_schema(&L, LITHD_DUMP_LATER_SQL, is_index) != 0 || commit(&L) != 0)
    goto rollback;
  loading = 1; /* the marker is on the cluster from here on */
  if (begin(&L) != 0)
    goto out;
  /* The rows, cut into transactions. */
  if (copy_tables(&L) != 0)
    goto out;
  /* The last transaction: views, triggers, SQLite's tables, the header's
   * numbers, the checks; the marker goes. */
  L.last_tx = 1;
  if (run_schema(&L, LITHD_DUMP_LATER_SQL, not_index) != 0 || copy_internal(&L) != 0)
    goto out;
  snprintf(sql, sizeof sql, "PRAGMA user_version = %" PRId64, uv);
  if (exec(&L, sql) != 0)
    goto out;
  snprintf(sql, sizeof sql, "PRAGMA application_id = %" PRId64, app);
  if (exec(&L, sql) != 0 || check_load(&L, fk_src) != 0 ||
      exec(&L, "DROP TABLE " LITHD_DQ_RESTORE_MARK) != 0 || commit(&L) != 0)
    goto out;
  loading = 0;
  printf("lithd: restored %s into the cluster's database %s (%s): %d tables, %" PRId64 " rows, %" PRId64
         " bytes of values in %d transactions, %lld ms; start lithd --dqlite %s%s%s to serve it\n",
         from, database, addresses, L.ntables, L.rows, L.bytes, L.txs, (long long)(lith_clock_ms() - t0),
         addresses, strcmp(database, "main") != 0 ? " --dqlite-db " : "",
         strcmp(database, "main") != 0 ? database : "");
  fflush(stdout);
  code = 0;
  goto out;
rollback:
  if (lith__dq_connected(L.c))
    lith__dq_exec_sql(L.c, L.db, "ROLLBACK", NULL, 0, NULL);
  lithd_log(LITHD_LOG_ERROR, "restore: nothing of %s was loaded; the cluster's database %s stays empty", from,
            database);
out:
  if (loading) {
    /* The open transaction is rolled back (when the connection stands);
     * what committed before it stays, under the marker. */
    if (L.c != NULL && lith__dq_connected(L.c))
      lith__dq_exec_sql(L.c, L.db, "ROLLBACK", NULL, 0, NULL);
    lithd_log(LITHD_LOG_ERROR,
              "restore: the load of %s did not end: the cluster's database %s now holds a partial load (the "
              "table " LITHD_DQ_RESTORE_MARK "), which lithd refuses to serve; start a new cluster (or name "
              "another --dqlite-db) and --restore again",
              from, database);
  }
  drop_values(&L);
  for (int i = 0; i < L.ntables; i++)
    free(L.tables[i].name);
  free(L.tables);
  lith__dq_close(L.c);
  if (L.src != NULL)
    sqlite3_exec(L.src, "COMMIT", NULL, NULL, NULL);
  sqlite3_close(L.src);
  lithd_restore_tidy(made);
  return code;
}
