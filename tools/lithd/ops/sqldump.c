/* The SQL dump: see sqldump.h. */
#include "sqldump.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* An error message into err; returns rc. */
static int fail(char *err, size_t errsz, int rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errsz, int rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (errsz > 0)
    vsnprintf(err, errsz, fmt, ap);
  va_end(ap);
  return rc;
}

/* `s` between single quotes, quotes doubled: a string literal. */
static void put_string(FILE *out, const char *s, size_t n) {
  fputc('\'', out);
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '\'')
      fputc('\'', out);
    fputc(s[i], out);
  }
  fputc('\'', out);
}

static void put_hex(FILE *out, const unsigned char *p, size_t n) {
  static const char digits[] = "0123456789ABCDEF";
  fputs("X'", out);
  for (size_t i = 0; i < n; i++) {
    fputc(digits[p[i] >> 4], out);
    fputc(digits[p[i] & 15], out);
  }
  fputc('\'', out);
}

/* Column i of the current row of st, as an SQL literal. */
static void put_value(FILE *out, sqlite3_stmt *st, int i) {
  switch (sqlite3_column_type(st, i)) {
  case SQLITE_INTEGER: fprintf(out, "%lld", (long long)sqlite3_column_int64(st, i)); break;
  case SQLITE_FLOAT: {
    double r = sqlite3_column_double(st, i);
    char buf[64];
    if (isinf(r)) {
      fputs(r > 0 ? "1e999" : "-1e999", out);
      break;
    }
    /* 15 significant digits when they read back to the same double (0.1
     * stays 0.1), else 17, which always do. lithd never calls setlocale:
     * the decimal point is '.'. */
    snprintf(buf, sizeof buf, "%.15g", r);
    if (strtod(buf, NULL) != r)
      snprintf(buf, sizeof buf, "%.17g", r);
    fputs(buf, out);
    if (strpbrk(buf, ".eEn") == NULL)
      fputs(".0", out); /* stays a REAL, not an INTEGER */
    break;
  }
  case SQLITE_TEXT: {
    const char *t = (const char *)sqlite3_column_text(st, i);
    size_t n = (size_t)sqlite3_column_bytes(st, i);
    if (t != NULL && strlen(t) != n) { /* a NUL inside: the bytes as they are */
      fputs("CAST(", out);
      put_hex(out, (const unsigned char *)t, n);
      fputs(" AS TEXT)", out);
    } else {
      put_string(out, t != NULL ? t : "", n);
    }
    break;
  }
  case SQLITE_BLOB: put_hex(out, sqlite3_column_blob(st, i), (size_t)sqlite3_column_bytes(st, i)); break;
  default: fputs("NULL", out); break;
  }
}

/* A prepared statement or an error. */
static int prepare(sqlite3 *db, const char *sql, sqlite3_stmt **st, char *err, size_t errsz) {
  int rc = sqlite3_prepare_v2(db, sql, -1, st, NULL);
  if (rc != SQLITE_OK)
    return fail(err, errsz, rc, "dump: %s: %s", sql, sqlite3_errmsg(db));
  return SQLITE_OK;
}

/* The name `table`'s rowid is dumped under, in *name (NULL: none). A rowid
 * table keeps its rowids through its INTEGER PRIMARY KEY, when it has one
 * (the one table_info primary key column with no index of origin 'pk': any
 * other primary key of a rowid table has its own, INTEGER PRIMARY KEY DESC
 * included); else the first of rowid, _rowid_, oid that no column (hidden
 * and generated ones included) takes, as the sqlite3 shell's .dump
 * --preserve-rowids picks it, provided sqlite3_table_column_metadata finds
 * it (it does not for a WITHOUT ROWID table). A table whose columns take
 * all three names has rowids no SQL can read or set: none. */
static int rowid_name(sqlite3 *db, const char *table, const char **name, char *err, size_t errsz) {
  static const char *const names[] = {"rowid", "_rowid_", "oid"};
  sqlite3_stmt *st = NULL;
  int rc, taken = 0;

  *name = NULL;
  if ((rc = prepare(db,
                    "SELECT (SELECT count(*) FROM pragma_table_xinfo(?1) WHERE pk > 0) = 1 AND NOT EXISTS "
                    "(SELECT 1 FROM pragma_index_list(?1) WHERE origin = 'pk'), "
                    "EXISTS (SELECT 1 FROM pragma_table_xinfo(?1) WHERE name = ?2 COLLATE NOCASE)",
                    &st, err, errsz)) != SQLITE_OK)
    return rc;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, names[i], -1, SQLITE_STATIC);
    if ((rc = sqlite3_step(st)) != SQLITE_ROW) {
      rc = fail(err, errsz, rc, "dump: the primary key of %s: %s", table, sqlite3_errmsg(db));
      goto out;
    }
    if (sqlite3_column_int(st, 0))
      break; /* an INTEGER PRIMARY KEY: the column holds the rowid */
    taken = sqlite3_column_int(st, 1);
    sqlite3_reset(st);
    if (taken)
      continue;
    if (sqlite3_table_column_metadata(db, "main", table, names[i], NULL, NULL, NULL, NULL, NULL) == SQLITE_OK)
      *name = names[i];
    break; /* not found: WITHOUT ROWID */
  }
  rc = SQLITE_OK;
out:
  sqlite3_finalize(st);
  return rc;
}

int lithd_dump_columns(sqlite3 *db, const char *table, char **select, char **columns, int *n, char *err,
                       size_t errsz) {
  sqlite3_stmt *cols = NULL;
  sqlite3_str *sel = sqlite3_str_new(db), *ins = sqlite3_str_new(db);
  const char *rowid = NULL;
  int rc;

  *select = *columns = NULL;
  *n = 0;
  /* Nothing refers to the rows of SQLite's own tables (sqlite_sequence,
   * sqlite_stat*) by rowid. */
  if (strncmp(table, "sqlite_", 7) != 0 && (rc = rowid_name(db, table, &rowid, err, errsz)) != SQLITE_OK)
    goto out;
  if ((rc = prepare(db, "SELECT name FROM pragma_table_xinfo(?1) WHERE hidden = 0 ORDER BY cid", &cols, err,
                    errsz)) != SQLITE_OK)
    goto out;
  sqlite3_bind_text(cols, 1, table, -1, SQLITE_STATIC);
  sqlite3_str_appendall(sel, "SELECT ");
  if (rowid != NULL) {
    /* The three names are no keywords: bare, as SQLite resolves them. */
    sqlite3_str_appendall(sel, rowid);
    sqlite3_str_appendall(ins, rowid);
    (*n)++;
  }
  while ((rc = sqlite3_step(cols)) == SQLITE_ROW) {
    const char *c = (const char *)sqlite3_column_text(cols, 0);
    sqlite3_str_appendf(sel, "%s\"%w\"", *n > 0 ? "," : "", c);
    sqlite3_str_appendf(ins, "%s\"%w\"", *n > 0 ? "," : "", c);
    (*n)++;
  }
  if (rc != SQLITE_DONE) {
    rc = fail(err, errsz, rc, "dump: columns of %s: %s", table, sqlite3_errmsg(db));
    goto out;
  }
  sqlite3_str_appendf(sel, " FROM \"%w\"", table);
  if (*n == 0) {
    rc = SQLITE_OK;
    goto out;
  }
  *select = sqlite3_str_finish(sel);
  *columns = sqlite3_str_finish(ins);
  sel = ins = NULL;
  if (*select == NULL || *columns == NULL) {
    rc = fail(err, errsz, SQLITE_NOMEM, "dump: out of memory");
    goto out;
  }
  rc = SQLITE_OK;
out:
  sqlite3_free(sqlite3_str_finish(sel));
  sqlite3_free(sqlite3_str_finish(ins));
  sqlite3_finalize(cols);
  if (rc != SQLITE_OK) {
    sqlite3_free(*select);
    sqlite3_free(*columns);
    *select = *columns = NULL;
    *n = 0;
  }
  return rc;
}

/* The INSERT statements of `table`'s rows (lithd_dump_columns). */
static int dump_rows(sqlite3 *db, FILE *out, const char *table, char *err, size_t errsz) {
  sqlite3_stmt *rows = NULL;
  char *sel_sql = NULL, *cols = NULL;
  int n = 0, rc;

  if ((rc = lithd_dump_columns(db, table, &sel_sql, &cols, &n, err, errsz)) != SQLITE_OK || n == 0)
    goto out;
  if ((rc = prepare(db, sel_sql, &rows, err, errsz)) != SQLITE_OK)
    goto out;
  while ((rc = sqlite3_step(rows)) == SQLITE_ROW) {
    fprintf(out, "INSERT INTO \"");
    for (const char *t = table; *t != '\0'; t++) { /* the name, quotes doubled */
      if (*t == '"')
        fputc('"', out);
      fputc(*t, out);
    }
    fprintf(out, "\"(%s) VALUES(", cols);
    for (int i = 0; i < n; i++) {
      if (i > 0)
        fputc(',', out);
      put_value(out, rows, i);
    }
    fputs(");\n", out);
  }
  rc =
      rc == SQLITE_DONE ? SQLITE_OK : fail(err, errsz, rc, "dump: rows of %s: %s", table, sqlite3_errmsg(db));
out:
  sqlite3_free(sel_sql);
  sqlite3_free(cols);
  sqlite3_finalize(rows);
  return rc;
}

/* "PRAGMA name" read as an integer; 0 when it cannot be read. */
static int pragma_int(sqlite3 *db, const char *sql) {
  sqlite3_stmt *st = NULL;
  int v = 0;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  return v;
}

int lithd_sql_dump(sqlite3 *db, FILE *out, char *err, size_t errsz) {
  sqlite3_stmt *st = NULL;
  int rc, writable = 0, analyzed = 0, v;

  fputs("PRAGMA foreign_keys=OFF;\nBEGIN TRANSACTION;\n", out);
  if ((v = pragma_int(db, "PRAGMA user_version")) != 0)
    fprintf(out, "PRAGMA user_version=%d;\n", v);
  if ((v = pragma_int(db, "PRAGMA application_id")) != 0)
    fprintf(out, "PRAGMA application_id=%d;\n", v);

  /* Tables, each with its rows; sqlite_sequence last (after the tables
   * whose AUTOINCREMENT created it). */
  if ((rc = prepare(db, LITHD_DUMP_TABLES_SQL, &st, err, errsz)) != SQLITE_OK)
    return rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const char *name = (const char *)sqlite3_column_text(st, 0);
    const char *sql = (const char *)sqlite3_column_text(st, 1);
    if (strcmp(name, "sqlite_sequence") == 0) {
      fputs("DELETE FROM sqlite_sequence;\n", out);
    } else if (sqlite3_strglob("sqlite_stat?", name) == 0) {
      if (!analyzed)
        fputs("ANALYZE sqlite_schema;\n", out); /* creates the statistics tables */
      analyzed = 1;
    } else if (strncmp(name, "sqlite_", 7) == 0) {
      continue; /* SQLite's own */
    } else if (sqlite3_strnicmp(sql, "CREATE VIRTUAL TABLE", 20) == 0) {
      /* CREATE VIRTUAL TABLE would create the shadow tables, which come
       * with their data of their own: the schema row only, as .dump does. */
      if (!writable)
        fputs("PRAGMA writable_schema=ON;\n", out);
      writable = 1;
      fputs("INSERT INTO sqlite_schema(type,name,tbl_name,rootpage,sql) VALUES('table',", out);
      put_string(out, name, strlen(name));
      fputc(',', out);
      put_string(out, name, strlen(name));
      fputs(",0,", out);
      put_string(out, sql, strlen(sql));
      fputs(");\n", out);
      continue;
    } else {
      fprintf(out, "%s;\n", sql);
    }
    if ((rc = dump_rows(db, out, name, err, errsz)) != SQLITE_OK)
      goto out;
  }
  if (rc != SQLITE_DONE) {
    rc = fail(err, errsz, rc, "dump: tables: %s", sqlite3_errmsg(db));
    goto out;
  }
  sqlite3_finalize(st);
  st = NULL;

  /* Indexes, triggers and views once the data is in: creation order, so a
   * view on a view comes after it. */
  if ((rc = prepare(db, LITHD_DUMP_LATER_SQL, &st, err, errsz)) != SQLITE_OK)
    goto out;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW)
    fprintf(out, "%s;\n", (const char *)sqlite3_column_text(st, 1));
  if (rc != SQLITE_DONE) {
    rc = fail(err, errsz, rc, "dump: schema: %s", sqlite3_errmsg(db));
    goto out;
  }
  if (writable)
    fputs("PRAGMA writable_schema=OFF;\n", out);
  fputs("COMMIT;\n", out);
  rc = SQLITE_OK;
  if (fflush(out) != 0 || ferror(out))
    rc = fail(err, errsz, SQLITE_IOERR, "dump: cannot write the script (disk full?)");
out:
  sqlite3_finalize(st);
  return rc;
}
