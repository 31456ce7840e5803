/*
 * lithd store on a dqlite cluster (store.h; lithd --dqlite).
 *
 *   writes  each command is one lith__dqw command (dqlite/writer.h): the
 *           writer batches them into one dqlite transaction and answers
 *           after COMMIT's OK (a majority stored it). Its `done` runs on the
 *           writer thread; the outcome goes onto a list under a mutex and a
 *           uv_async wakes the loop, which answers.
 *   reads   on libuv's pool, on a connection of lithd's own to the leader
 *           (dqlite 1.11 serves reads only there), inside BEGIN ... ROLLBACK.
 *   schema  --schema steps applied at start in one transaction that also
 *           records how many steps are applied (_lith_schema).
 *
 * The SQL policy is lithd's (sql/), not a copy: dqlite cannot prepare a
 * statement here, so before a statement's text is sent it is prepared on a
 * local in-memory SQLite connection that holds the cluster's schema (read
 * from sqlite_master, read again when a prepare fails and the cluster's
 * schema_version moved), under lithd's authorizer and lith's own command
 * rules (lith_command_rule) and the connection hook lithd gives every
 * connection (the guard's limits). Whatever that prepare refuses is
 * refused; its parameter numbering, read-only test, column count and
 * declared types are SQLite's own; only the text then goes to the node.
 * After a command's statement that made or altered a table ran there, the
 * schema is read again and lith_command_check run on it (no foreign key
 * onto _lith_*): a refusal fails the statement before anything commits.
 */
#ifndef LITHD_STORE_DQLITE_H
#define LITHD_STORE_DQLITE_H

#include <stddef.h>

#include <sqlite3.h>
#include <uv.h>

#include "schema.h"
#include "store.h"

/* Reads running on the leader at once (each its own connection). */
#define LITHD_DQ_READERS 4
/* How long to look for a leader, unless --dqlite-failover-ms says. */
#define LITHD_DQ_FAILOVER_MS 10000
/* The writer's watch of who leads (dqlite/writer.h, "Who leads"): a new
 * leader is in /metrics, /v1/stats and the log within about this, with or
 * without writes. */
#define LITHD_DQ_WATCH_MS 250

typedef struct lithd_dq_options {
  const char *addresses; /* --dqlite: "host:port,..." (copied) */
  const char *database;  /* --dqlite-db (copied) */
  int failover_ms;       /* how long to look for a leader; <= 0: LITHD_DQ_FAILOVER_MS */
  int max_batch;         /* <= 0: the writer's default */
  int max_queue;         /* commands in the writer at once; <= 0: 10000 */
  /* --max-run-ms, asked of the nodes on every connection the store opens
   * (lith__dq_max_run: a lith-node cuts a statement there, reads and
   * writes alike, as SQLite would locally); <= 0: the nodes' own. */
  int max_run_ms;
  /* lithd's SQL authorizer (sqljson.h: lithd_authorizer) and connection
   * hook (guard.h: lithd_guard_connect), put on every vetting connection
   * as lith puts them on its own; the contexts are the caller's and
   * outlive the store. */
  int (*authorizer)(void *ctx, int action, const char *a, const char *b, const char *c, const char *d);
  void *authorizer_ctx;
  int (*on_connect)(void *ctx, sqlite3 *conn);
  void *on_connect_ctx;
} lithd_dq_options;

/* Apply schema (may be NULL or empty) through the cluster, then start the
 * writer and the loop's wake-up. LITH_OK, or an error with err. */
int lithd_store_dqlite_open(const lithd_dq_options *o, const lithd_schema *schema, uv_loop_t *loop,
                            lithd_store **out, char *err, size_t errsz);

#endif /* LITHD_STORE_DQLITE_H */
