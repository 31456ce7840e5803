/*
 * sqljson_dq — lithd's statements (sqljson.h) run on a dqlite cluster
 * instead of a local file: what lithd --dqlite runs (dq.h).
 *
 * The same lithd_batch in, the same lithd_result out (so the same JSON
 * answers, lithd_result_json), with these differences, all from dqlite's
 * protocol (dqlite/wire.h):
 *   - Parameters travel by position only. Their positions are found by
 *     scanning the SQL text (strings, quoted names and comments skipped):
 *     ?, ?NNN, :name, @name, $name, numbered as SQLite numbers them. The
 *     rules of sqljson.h hold: an array must hold exactly as many values as
 *     the statement has parameters, an object must name every one of them
 *     and nothing else; at most LITH_DQ_MAX_PARAMS (255).
 *   - TEXT travels NUL-terminated: a string parameter holding U+0000 is
 *     refused (400); send it as a blob.
 *   - A statement that returns rows (first keyword SELECT, VALUES, WITH,
 *     EXPLAIN or PRAGMA, or a RETURNING clause) runs as a query: its
 *     "changes" is the number of rows a RETURNING statement gave (each
 *     returned row is a row it changed), else 0, and "last_insert_rowid"
 *     is 0. Anything else runs as an exec with dqlite's changes and last
 *     insert id.
 *   - "types": dqlite does not send declared types: every type is null.
 *   - A DATETIME / BOOLEAN column comes back as dqlite sends it: integer or
 *     text, as stored.
 *   - No SQLite authorizer runs on the node: a statement whose first
 *     keyword is ATTACH, DETACH or PRAGMA is refused (403; a PRAGMA reads
 *     through its function: SELECT * FROM pragma_table_info('t')), and the
 *     writer refuses transaction control (dqlite/writer.h).
 *   - max_run_ms is not enforced on the node (dqlite's protocol has no
 *     deadline); the writer's request timeout bounds each statement.
 *
 * Threads: the batch and the result are used by one thread at a time, as
 * in sqljson.h (the writer thread or a pool thread runs, the loop answers).
 */
#ifndef LITHD_SQLJSON_DQ_H
#define LITHD_SQLJSON_DQ_H

#include "client.h"
#include "sqljson.h"
#include "writer.h"

/* Run every statement of b inside a lith__dqw command (call it from the
 * command's callback and return its result). *out as in lithd_batch_run:
 * each run frees the previous run's result and stores a fresh one. On a
 * statement's failure the result's error names the statement; its code
 * and message are completed by lithd_dq_result_failed once the writer
 * answered (the tx gives only the outcome). Returns a LITH_DQW_ code. */
int lithd_batch_run_dq(lith__dqw_tx *tx, lithd_batch *b, lithd_result **out);

/* After the writer answered rc with err for a command run by
 * lithd_batch_run_dq: the lith code the HTTP answer carries, with r's error
 * completed (code, message) when a statement failed. errmsg (LITH_ERRMSG_MAX
 * bytes) receives the message for an error around the command. */
int lithd_dq_result_failed(lithd_result *r, int rc, const lith__dqw_err *err, char *errmsg, size_t cap);

/* Run every statement of b as a read on connection c (connected to the
 * leader, database db open), inside BEGIN ... ROLLBACK so that the list
 * sees one snapshot and nothing it might write stays. Only queries (first
 * keyword SELECT, WITH, VALUES, EXPLAIN; else LITHD_NOT_A_QUERY). Returns
 * a lith code (LITH_OK, the statement's, or LITH_IOERR when the connection
 * failed: *conn_lost is then 1 and the caller may try another leader). */
int lithd_batch_read_dq(lith__dq_conn *c, uint32_t db, lithd_batch *b, lithd_result **out, int *conn_lost);

#endif /* LITHD_SQLJSON_DQ_H */
