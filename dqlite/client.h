/*
 * A blocking client for one dqlite node over TCP (dqlite/wire.h for the
 * protocol). One request at a time on a connection, each call sends its
 * request and reads the whole answer before it returns; a handle is for one
 * thread at a time.
 *
 * Deadlines: each call has ONE deadline for everything it sends and reads
 * (the connect and the handshake; a request and its whole answer, every
 * ROWS part of a result together): the handle's timeout from the call's
 * start, or lith__dq_query_each's deadline_ms. A node that drips parts
 * is cut there, not given a fresh timeout per frame.
 *
 * Every call returns a lith__dq_rc code:
 *   LITH_DQ_OK       the expected answer;
 *   LITH_DQ_FAILURE  the node answered FAILURE: lith__dq_errcode is its code
 *                    (SQLite's extended code, e.g. SQLITE_CONSTRAINT_UNIQUE,
 *                    SQLITE_IOERR_NOT_LEADER, or a raft code for ADD/ASSIGN/
 *                    REMOVE) and lith__dq_errmsg its message; the connection
 *                    stays usable;
 *   LITH_DQ_IO, LITH_DQ_TIMEOUT, LITH_DQ_PROTO
 *                    the connection is closed (a frame the client could not
 *                    trust, a lost connection, no whole answer by the
 *                    deadline): for a write the outcome is unknown;
 *                    reconnect with lith__dq_connect;
 *   LITH_DQ_TOOBIG   the answer was too large, which says nothing about the
 *                    node's health: one frame over LITH_DQ_MAX_BODY (refused
 *                    from its header, before allocating: the connection is
 *                    closed), or a result gathered whole by lith__dq_query /
 *                    _query_sql past LITH_DQ_MAX_ANSWER (the query is ended
 *                    as a stop is, below: the connection is kept when that
 *                    works; lith__dq_connected says);
 *   LITH_DQ_STOPPED  lith__dq_query_each: on_rows asked to stop; any call:
 *                    the cancel flag was set (lith__dq_set_cancel);
 *   LITH_DQ_NOMEM, LITH_DQ_MISUSE  nothing was sent (MISUSE also for any
 *                    call on the handle from inside on_rows).
 * lith__dq_errmsg describes every error, not only FAILURE.
 *
 * A writer's batch on one connection (what lithd --dqlite will send): each
 * step is a lith__dq_exec_sql with its own outcome,
 *   BEGIN; then per command SAVEPOINT c; its statements with bound
 *   parameters; RELEASE c, or ROLLBACK TO c + RELEASE c if a statement
 *   failed (FAILURE, the connection still open); finally COMMIT.
 * COMMIT answering OK means a majority of the nodes stored the transaction;
 * LITH_DQ_IO/TIMEOUT on COMMIT means the outcome is unknown.
 */
#ifndef LITH_DQLITE_CLIENT_H
#define LITH_DQLITE_CLIENT_H

#include <stdatomic.h>
#include <stdint.h>

#include "wire.h"

typedef struct lith__dq_conn lith__dq_conn;

/* Limits of a handle. */
#define LITH_DQ_DEFAULT_TIMEOUT_MS 5000
/* lithd's bound on one request to a node: the batching writer's default
 * (dqlite/writer.h), the store's read connections, a restore's leader
 * search. A node that does not answer (stopped, its machine gone without
 * a reset) costs that much, then the next address is asked. */
#define LITH_DQ_REQUEST_MS 2000
#define LITH_DQ_MAX_BODY (64u << 20) /* a larger frame is refused: LITH_DQ_TOOBIG */
#define LITH_DQ_MAX_ANSWER \
  (64u << 20) /* lith__dq_query/_query_sql: a larger result
                                        * (its frames' bytes summed) is refused:
                                        * LITH_DQ_TOOBIG */
#define LITH_DQ_DRAIN_MAX \
  (4u << 20) /* ending a query early: what is read and
                                        * thrown away at most before the
                                        * connection is closed instead */
/* lith__dq_connect_leader's wait between rounds of the addresses: the
 * first round at once, then 10 ms doubling to 1 s. */
#define LITH_DQ_BACKOFF_MIN_MS 10
#define LITH_DQ_BACKOFF_MAX_MS 1000

/* A new handle, not connected; the caller's, freed with lith__dq_close.
 * timeout_ms bounds each call: the connect, and a request with its whole
 * answer (<= 0: the default).
 * NULL if out of memory. */
lith__dq_conn *lith__dq_new(int timeout_ms);
/* The handle's timeout for the calls that follow (<= 0: the default);
 * returns the one it replaces. */
int lith__dq_set_timeout(lith__dq_conn *c, int timeout_ms);
/* Close the connection (if any) and free the handle; NULL is fine. */
void lith__dq_close(lith__dq_conn *c);

/* Connect to "HOST:PORT" (an IPv4/IPv6 address or a name; "[v6]:PORT"
 * too), closing any previous connection, and send the handshake (protocol
 * version 1). */
int lith__dq_connect(lith__dq_conn *c, const char *address);
/* Drop the connection (the handle stays). */
void lith__dq_disconnect(lith__dq_conn *c);
int lith__dq_connected(const lith__dq_conn *c);
/* The address last connected to ("" if none); the handle's. */
const char *lith__dq_address(const lith__dq_conn *c);

/* The last error: FAILURE's code (0 for the client's own errors) and a
 * message (FAILURE's, or the client's); valid until the next call. */
uint64_t lith__dq_errcode(const lith__dq_conn *c);
const char *lith__dq_errmsg(const lith__dq_conn *c);

/* LEADER: the leader this node knows of; *id 0 and *address "" if none.
 * *address points into the handle, valid until the next call on it. */
int lith__dq_leader(lith__dq_conn *c, uint64_t *id, const char **address);
/* CLIENT: register; *heartbeat_timeout may be NULL. */
int lith__dq_client(lith__dq_conn *c, uint64_t id, uint64_t *heartbeat_timeout);
/* OPEN a database by name (one per connection). */
int lith__dq_open(lith__dq_conn *c, const char *name, uint32_t *db);
/* OPEN for a connection that writes, on the leader: OPEN, then "PRAGMA
 * cache_spill = OFF" (an EXEC: a follower answers not leader). Why:
 * libdqlite 1.11.1's VFS fails a transaction's read of a page it wrote
 * and SQLite spilled before COMMIT, when the transaction began on an empty
 * WAL (just after the node's checkpoint): SQLITE_IOERR_SHORT_READ, "disk
 * I/O error", the transaction rolled back (canonical/dqlite#432, fixed
 * after 1.11.1). Any transaction larger than the page cache (2 MB) spills:
 * a large command, a --restore or migration transaction. Unspilled, its
 * dirty pages stay in the connection's cache until COMMIT (the node holds
 * a transaction's frames in memory at COMMIT anyway). */
int lith__dq_open_writer(lith__dq_conn *c, const char *name, uint32_t *db);

/* Statements. result may be NULL; rows must be lith__dq_rows_init'ed and is
 * the caller's to free with lith__dq_rows_free (on error it holds no rows).
 * lith__dq_query and _query_sql gather the whole result, at most
 * LITH_DQ_MAX_ANSWER bytes of frames (else LITH_DQ_TOOBIG), within the
 * handle's timeout for the whole answer: use lith__dq_query_each to see
 * rows as they come and stop early. */
typedef struct lith__dq_result {
  uint64_t last_insert_id, rows_affected;
} lith__dq_result;
int lith__dq_prepare(lith__dq_conn *c, uint32_t db, const char *sql, uint32_t *stmt, uint64_t *nparams);
int lith__dq_exec(lith__dq_conn *c, uint32_t db, uint32_t stmt, const lith__dq_value *params, unsigned n,
                  lith__dq_result *result);
int lith__dq_query(lith__dq_conn *c, uint32_t db, uint32_t stmt, const lith__dq_value *params, unsigned n,
                   lith__dq_rows *rows);
/* Never use a statement id after its FINALIZE: libdqlite 1.11.1 looks the
 * id up in a slot it has freed and the node dies of SIGSEGV (seen in
 * dqlite/test/test_client, 2026-12-01). Ids never prepared are safe
 * (FAILURE SQLITE_NOTFOUND). */
int lith__dq_finalize(lith__dq_conn *c, uint32_t db, uint32_t stmt);
/* The parameters bind the first statement of sql (dqlite's rule). */
int lith__dq_exec_sql(lith__dq_conn *c, uint32_t db, const char *sql, const lith__dq_value *params,
                      unsigned n, lith__dq_result *result);
int lith__dq_query_sql(lith__dq_conn *c, uint32_t db, const char *sql, const lith__dq_value *params,
                       unsigned n, lith__dq_rows *rows);

/* Ask the node to cut this connection's statements on db at want_ms
 * (lith-node's lith_max_run_ms(): only ever lower than its own
 * --max-run-ms; want_ms <= 0 asks nothing) and learn the bound in force,
 * into *bound_ms (0: none). LITH_DQ_FAILURE: the node has no such
 * function (not a lith-node); its bound is unknown. */
int lith__dq_max_run(lith__dq_conn *c, uint32_t db, int want_ms, int *bound_ms);

/* A query whose rows are handed over part by part as they arrive (dqlite
 * sends a large result in several ROWS frames). Each part goes to on_rows
 * (part valid during the call only; the callback copies what it keeps).
 * A non-zero return from on_rows stops the query: the client ends it on
 * the node (dqlite's INTERRUPT request, reading what the node still sends,
 * so the connection stays usable; if that cannot be done, the connection
 * is closed) and the call returns LITH_DQ_STOPPED. deadline_ms, on
 * lith_clock_ms() (lib/clock.h; 0: the handle's timeout from now), bounds the WHOLE
 * query, every frame together: past it LITH_DQ_TIMEOUT and the connection
 * is closed. A single frame larger than LITH_DQ_MAX_BODY is
 * LITH_DQ_TOOBIG (connection closed), told apart from a lost connection.
 *
 * More precisely:
 *   - part: ncols and names (each ROWS frame carries the names again),
 *     nrows rows of values; lith__dq_rows_at reads it. Every part of a
 *     result has the same columns. A result of no rows is one part with
 *     nrows 0. on_rows runs on the caller's thread and must not call the
 *     client on c (such calls fail LITH_DQ_MISUSE and send nothing).
 *   - Memory: one frame at a time (its body and its values), never the
 *     result: a node sending parts forever costs at most one frame.
 *   - The stop: a stop on the last part (DONE) sends nothing. Otherwise
 *     INTERRUPT goes out and the frames that follow are read and thrown
 *     away (without keeping them) until the node's answer to it. libdqlite
 *     1.11.1 reads no request while a query still has parts to send (its
 *     conn.c reads the next request only when the result is finished), so
 *     it sends the rest of the result, then its DONE (or a FAILURE), then
 *     EMPTY for the INTERRUPT. Past LITH_DQ_DRAIN_MAX bytes, or the
 *     deadline, or a frame that fits none of that, the connection is closed
 *     instead (closing also stops the node's work: its next write fails and
 *     it drops the statement). Either way the call returns LITH_DQ_STOPPED;
 *     lith__dq_connected tells which. The message says so too.
 *   - A FAILURE after some parts (the statement failed midway) returns
 *     LITH_DQ_FAILURE as usual, after on_rows saw the parts before it.
 *   - A deadline already past: LITH_DQ_TIMEOUT, nothing sent, closed. */
typedef int (*lith__dq_rows_cb)(const lith__dq_rows *part, void *arg);
int lith__dq_query_each(lith__dq_conn *c, uint32_t db, const char *sql, const lith__dq_value *params,
                        unsigned n, lith__dq_rows_cb on_rows, void *arg, int64_t deadline_ms);

/* Membership, sent to the leader. */
int lith__dq_add(lith__dq_conn *c, uint64_t id, const char *address);
int lith__dq_assign(lith__dq_conn *c, uint64_t id, uint64_t role);
int lith__dq_remove(lith__dq_conn *c, uint64_t id);
/* CLUSTER with roles (format 1); out->v is the caller's to free(). */
int lith__dq_cluster(lith__dq_conn *c, lith__dq_servers *out);

/* DUMP: database `name`'s files as the node holds them, streamed as they
 * arrive into fds[0] (its main file) and fds[1] (its WAL): libdqlite
 * 1.11.1 answers with those two, named NAME and NAME-wal (anything else
 * is LITH_DQ_PROTO), either possibly empty, both when the database does
 * not exist. sizes[] (may be NULL): the bytes written to each. The answer
 * is one frame as large as the database: it is never held in memory
 * (64 KiB at a time) nor bound by LITH_DQ_MAX_BODY; instead its body may
 * be max_bytes at most (else LITH_DQ_TOOBIG from its header, before a
 * byte is written; the connection closed). deadline_ms as
 * lith__dq_query_each's (0: the handle's timeout from now) bounds the
 * whole answer, and no wait for the node's next bytes (its header
 * included) lasts more than the handle's timeout: a node stopped or cut
 * off mid-dump is LITH_DQ_TIMEOUT then, not at the deadline. A write to an fd that fails: LITH_DQ_IO with
 * lith__dq_errcode its errno (every other LITH_DQ_IO has 0), the message
 * saying so, the connection closed (the rest of the frame was not read).
 * What was written before an error is the caller's to throw away. The node makes its copy in one turn of its loop (no write lands
 * in it halfway), but runs no barrier: a node that just became leader may
 * not have applied every committed write yet; a query (which does run
 * one) on the same connection first settles that. */
int lith__dq_dump(lith__dq_conn *c, const char *name, const int fds[2], uint64_t sizes[2], uint64_t max_bytes,
                  int64_t deadline_ms);

/* Cancel: once *flag is non-zero (any thread), every wait of a call on c
 * ends within LITH_DQ_CANCEL_MS: LITH_DQ_STOPPED, the connection closed
 * (so is lith__dq_connect_leader's back-off). NULL: none (the default).
 * The flag is the caller's and must outlive its use. */
#define LITH_DQ_CANCEL_MS 50
void lith__dq_set_cancel(lith__dq_conn *c, const atomic_int *flag);

/* Connect to the leader: ask each of the comma-separated addresses in turn
 * for the leader and connect to it (the handle ends connected to the
 * leader), until timeout_ms passes. Between rounds of the addresses it
 * waits, 10 ms after the first doubling up to 1 s (LITH_DQ_BACKOFF_*; the
 * wait never goes past timeout_ms), so that nodes answering garbage or
 * knowing no leader are not asked in a tight loop. At least one round.
 * LITH_DQ_OK, or the last error. */
int lith__dq_connect_leader(lith__dq_conn *c, const char *addresses, int timeout_ms);

#endif
