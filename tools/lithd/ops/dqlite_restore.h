/*
 * lithd --dqlite ADDR,... [--dqlite-db NAME] --restore FROM: load an SQLite
 * file (a lithd backup, or any database) into a cluster's database, then
 * exit (0: loaded whole; 1: refused or failed). The way to seed a new
 * cluster, to move from --db to --dqlite, and to put a backup back.
 *
 * dqlite has no request that loads a file, so the copy goes through SQL on
 * a connection to the leader (dqlite/client.h), in the order of sqldump.h
 * (the one rule of the dump and of this copy):
 *
 *   1. FROM is checked as lithd --restore checks it (restore.h): a regular
 *      SQLite file, opened read-only (never changed), no hot journal,
 *      PRAGMA integrity_check "ok"; then read in ONE read transaction, so a
 *      live database is copied in one committed state. Refused before the
 *      cluster is touched: a virtual table (its shadow tables cannot be
 *      written through SQL as it wrote them), a table of more columns than
 *      a dqlite request binds (LITH_DQ_MAX_PARAMS), a FROM that holds the
 *      marker below (a copy of a partial load).
 *   2. The cluster's database must be empty (no row in sqlite_schema):
 *      nothing can empty a cluster's database from outside (no --force:
 *      there is no file to replace), so a database that holds anything is
 *      refused, saying to start a new cluster or name another --dqlite-db.
 *   3. Transaction 1: the marker table LITHD_DQ_RESTORE_MARK, one row
 *      ('loading', FROM, start time), then every table (creation order;
 *      AUTOINCREMENT makes sqlite_sequence itself) and every index. Indexes
 *      come before the rows so that each later transaction carries its own
 *      index pages: a CREATE INDEX after the data would be one transaction
 *      (one Raft entry, held whole in the nodes' memory) the size of the
 *      index.
 *   4. The rows, table by table, each with its rowid (sqldump.h's rule:
 *      lithd_dump_columns), bound as parameters, several rows per INSERT
 *      (as many as LITH_DQ_MAX_PARAMS takes, at most RESTORE_ROWS_PER_STMT),
 *      in transactions of about LITHD_DQ_RESTORE_TX_BYTES each (a row
 *      larger than that goes alone), counted as what a transaction writes
 *      at worst: the rows' bytes, and a page per row for each index of the
 *      table (a random key writes another page each time). A dqlite
 *      transaction is one Raft entry, held whole by every node, and on a
 *      connection opened with lith__dq_open_writer (cache_spill off:
 *      libdqlite 1.11.1 failed a transaction that spilled, "disk I/O
 *      error", canonical/dqlite#432; client.h) its pages stay in the
 *      leader's page cache until COMMIT. Measured: 600,000 rows of 150
 *      bytes under two indexes of random keys (a 100 MB file) loaded in
 *      140 s (2,382 transactions; each writes the index pages again, so
 *      random indexes are slow), the same rows with no index in seconds.
 *      Foreign keys are off on the connection meanwhile (rows come in
 *      table order, not in the order their references need). A text
 *      parameter is NUL-terminated on the wire: a text holding U+0000 goes
 *      as a blob in CAST(? AS TEXT), which keeps its bytes and its type.
 *   5. The last transaction: views and triggers (after the rows, so no
 *      trigger fires on the copy), sqlite_sequence's and sqlite_stat*'s
 *      rows as FROM has them, user_version and application_id; then the
 *      checks, each of which rolls it back: every table's row count equals
 *      what was copied, and PRAGMA foreign_key_check finds no more rows
 *      than it found in FROM (FROM's own violations are copied as they are,
 *      and said); then DROP TABLE LITHD_DQ_RESTORE_MARK; COMMIT. A load
 *      that ends before this COMMIT (killed, a leader lost, a node's limit
 *      hit) leaves the marker: the database is visibly partial.
 *
 * A partial load: a second --restore into it is refused (it is not empty,
 * and the message says it holds a partial load of FROM begun at T), and
 * lithd --dqlite refuses to serve it (lithd_dq_restore_partial, at start):
 * a half-loaded database must not pass for a whole one. The way out is the
 * same as for any failed load: a new cluster (or another --dqlite-db),
 * --restore again.
 *
 * Not copied: nothing else exists in an SQLite file's SQL view of itself
 * but the page size, auto_vacuum and the text encoding, which are the
 * nodes' (libdqlite sets the page size; text comes back UTF-8).
 *
 * The nodes' own limits hold for the copy: a value longer than a node's
 * --max-value-bytes (SQLITE_LIMIT_LENGTH) fails the load with a message
 * naming the table and the option; a statement longer than its
 * --max-run-ms (the final foreign_key_check of a large database) too.
 */
#ifndef LITHD_DQLITE_RESTORE_H
#define LITHD_DQLITE_RESTORE_H

/* The marker of a load not ended; its one row: state, source, started. */
#define LITHD_DQ_RESTORE_MARK "_lith_restore"
/* A transaction of the load writes about this many bytes at most. */
#define LITHD_DQ_RESTORE_TX_BYTES (2u << 20)

/* Load `from` into the database `database` of the cluster at `addresses`
 * ("host:port,..."), finding its leader within timeout_ms. Messages go to
 * the log (stderr); the success line to stdout. Returns the exit code, 0
 * or 1. */
int lithd_dq_restore(const char *from, const char *addresses, const char *database, int timeout_ms);

/* Does the cluster's database hold a load not ended (the marker)? 1 yes
 * (a message was logged: what and what to do), 0 no, -1 it could not be
 * asked (no leader within timeout_ms: a warning was logged). */
int lithd_dq_restore_partial(const char *addresses, const char *database, int timeout_ms);

#endif /* LITHD_DQLITE_RESTORE_H */
