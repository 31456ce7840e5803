/*
 * A blocking client for one dqlite node over TCP (dqlite/wire.h for the
 * protocol). One request at a time on a connection, each call sends its
 * request and reads the whole answer before it returns; a handle is for one
 * thread at a time.
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
 *                    trust, a lost connection, no answer in time): for a
 *                    write the outcome is unknown; reconnect with
 *                    lith__dq_connect;
 *   LITH_DQ_NOMEM, LITH_DQ_MISUSE  nothing was sent.
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

#include <stdint.h>

#include "wire.h"

typedef struct lith__dq_conn lith__dq_conn;

/* Limits of a handle. */
#define LITH_DQ_DEFAULT_TIMEOUT_MS 5000
#define LITH_DQ_MAX_BODY (64u << 20) /* larger answers are refused: LITH_DQ_PROTO */

/* A new handle, not connected; the caller's, freed with lith__dq_close.
 * timeout_ms bounds the connect and each answer (<= 0: the default).
 * NULL if out of memory. */
lith__dq_conn *lith__dq_new(int timeout_ms);
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

/* Statements. result may be NULL; rows must be lith__dq_rows_init'ed and is
 * the caller's to free with lith__dq_rows_free (on error it holds no rows). */
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

/* Membership, sent to the leader. */
int lith__dq_add(lith__dq_conn *c, uint64_t id, const char *address);
int lith__dq_assign(lith__dq_conn *c, uint64_t id, uint64_t role);
int lith__dq_remove(lith__dq_conn *c, uint64_t id);
/* CLUSTER with roles (format 1); out->v is the caller's to free(). */
int lith__dq_cluster(lith__dq_conn *c, lith__dq_servers *out);

/* Connect to the leader: ask each of the comma-separated addresses in turn
 * for the leader and connect to it (the handle ends connected to the
 * leader), until timeout_ms passes. LITH_DQ_OK, or the last error. */
int lith__dq_connect_leader(lith__dq_conn *c, const char *addresses, int timeout_ms);

#endif
