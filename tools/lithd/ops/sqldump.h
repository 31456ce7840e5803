/*
 * lithd SQL dump — a database as an SQL script (GET /v1/backup?format=sql),
 * for people who move their data out of lithd.
 *
 * The script is what the sqlite3 shell's .dump writes, so `sqlite3 new.db <
 * dump.sql` loads it back into an equal database:
 *
 *   PRAGMA foreign_keys=OFF;
 *   BEGIN TRANSACTION;
 *   PRAGMA user_version=N;               (and application_id, when not 0:
 *                                          lithd's --schema counts its
 *                                          steps in user_version)
 *   CREATE TABLE ...;  INSERT INTO "t"(rowid,"a","b") VALUES(...);  ...
 *                                        (tables in creation order, each
 *                                          followed by its rows)
 *   CREATE INDEX / TRIGGER / VIEW ...;   (after the data, creation order)
 *   DELETE FROM sqlite_sequence; INSERT INTO sqlite_sequence ...;
 *   COMMIT;
 *
 * Values: integers as written; reals with 17 significant digits (every
 * double reads back to itself; infinities as 1e999 and -1e999); text
 * between single quotes, quotes doubled (text holding a NUL byte as
 * CAST(X'..' AS TEXT)); blobs as X'..'; NULL. Columns are named in every
 * INSERT, generated and hidden columns left out (SQLite computes them).
 * A virtual table is written as .dump does (its row in sqlite_schema under
 * PRAGMA writable_schema, its data in its shadow tables).
 *
 * Rowids are kept: a rowid table without an INTEGER PRIMARY KEY has its
 * rowid written first, INSERT INTO "t"(rowid,"a",...) VALUES(7,...), as
 * .dump --preserve-rowids does (plain .dump renumbers the rows, and an
 * FTS5 external-content index, which maps rowids, then answers with the
 * wrong rows). The name is the first of rowid, _rowid_, oid that no column
 * takes; a table whose columns take all three has rowids that no SQL
 * statement can read or set, and its rows get new ones (so do SQLite's own
 * tables, sqlite_sequence and sqlite_stat*, which nothing refers to by
 * rowid). An INTEGER PRIMARY KEY is the rowid, dumped as its column;
 * WITHOUT ROWID tables have none.
 *
 * Memory: one row at a time; the caller's FILE buffers the output.
 */
#ifndef LITHD_SQLDUMP_H
#define LITHD_SQLDUMP_H

#include <stddef.h>
#include <stdio.h>

#include <sqlite3.h>

/* The order a copy of a database is made in, the one rule for the dump and
 * for lithd --dqlite --restore (dqlite_restore.h). Tables (name, sql):
 * creation order, sqlite_sequence last (after the tables whose
 * AUTOINCREMENT created it). Then indexes, triggers and views (type, sql):
 * creation order, so a view on a view comes after it, a trigger after the
 * view it is on. */
#define LITHD_DUMP_TABLES_SQL                                                  \
  "SELECT name, sql FROM sqlite_schema WHERE sql NOT NULL AND type = 'table' " \
  "ORDER BY name = 'sqlite_sequence', rowid"
#define LITHD_DUMP_LATER_SQL                                                                         \
  "SELECT type, sql FROM sqlite_schema WHERE sql NOT NULL AND type IN ('index', 'trigger', 'view') " \
  "ORDER BY rowid"

/* The columns a copy of `table`'s rows carries, in order: its rowid first
 * when no column holds it (the rule above: rowid, _rowid_ or oid; none for
 * WITHOUT ROWID, SQLite's own tables, or a table whose columns take all
 * three names), then every column that is neither hidden nor generated.
 * *select: "SELECT rowid,\"a\",... FROM \"t\"", *columns: "rowid,\"a\",..."
 * (sqlite3_malloc'd: the caller sqlite3_free's them), *n: how many (0: none,
 * both NULL). Returns SQLITE_OK, or a code with a message in err. */
int lithd_dump_columns(sqlite3 *db, const char *table, char **select, char **columns, int *n, char *err,
                       size_t errsz);

/* Write the script of db's main schema to `out`. Run it inside one read
 * transaction (lith_read's), so that the script is one snapshot. Both are
 * the caller's. Returns SQLITE_OK, or an SQLite code with a message in
 * err[errsz] (SQLITE_IOERR when writing `out` failed). */
int lithd_sql_dump(sqlite3 *db, FILE *out, char *err, size_t errsz);

#endif /* LITHD_SQLDUMP_H */
