/*
 * The batching writer onto a dqlite cluster (issue 14): what lithd
 * --dqlite runs instead of the local writer.
 *
 * One writer thread owns one client connection (dqlite/client.h) to the
 * cluster's leader, found from an address list. Producers on any thread
 * submit commands; a command is a callback that runs statements through a
 * lith__dqw_tx. The writer takes everything queued (up to max_batch) and
 * runs it as ONE dqlite transaction, i.e. one Raft entry:
 *
 *   BEGIN; INSERT INTO _lith_batches (a fresh random batch id)
 *   per command: SAVEPOINT lith_c; the callback's statements;
 *                RELEASE lith_c, or ROLLBACK TO lith_c + RELEASE lith_c
 *                when the callback failed (that command alone fails)
 *   COMMIT
 *
 * Control statements ride in the same request as their neighbours (one
 * EXEC_SQL of "RELEASE lith_c; SAVEPOINT lith_c"), so a command costs its
 * statements plus one round trip, a batch two more. Every producer is
 * answered only after the COMMIT's OK, i.e. after a majority of the nodes
 * stored the transaction.
 *
 * Failover with true outcomes. A lost connection, a timeout, or FAILURE
 * SQLITE_IOERR_NOT_LEADER / _LEADERSHIP_LOST (or any SQLITE_IOERR) ends the
 * attempt; the writer finds the leader again (lith__dq_connect_leader over
 * the address list) and:
 *   - before COMMIT was sent, nothing of the batch can commit (dqlite
 *     replicates a transaction only at its COMMIT; the old connection's
 *     open transaction dies with it): the batch runs again;
 *   - after COMMIT was sent without an OK, the outcome is unknown. The
 *     writer FENCES the batch id on the leader: INSERT OR IGNORE a row
 *     (id, lost = 1) in autocommit, then reads the row back. lost = 0: the
 *     batch's own row is there, it committed: its producers get success
 *     with the results of that run. lost = 1: the tombstone is committed,
 *     so the batch can never commit later (its own INSERT of the same id
 *     would come after the tombstone in the log, or it is not in the new
 *     leader's log at all): it runs again with a new batch id. A bare
 *     read could miss a COMMIT still queued on a live leader and then
 *     apply the batch twice; the tombstone closes that window. The fence is
 *     idempotent, so a fence whose own answer is lost is simply repeated.
 * _lith_batches(id INTEGER PRIMARY KEY, time INTEGER, lost INTEGER) is
 * created by the writer; rows older than keep_s seconds are pruned (by the
 * writer's wall clock, every 64 batches, inside a batch). It also creates
 * lithd's schema record _lith_schema(version) (empty until a --schema
 * fills it), so that both names are taken before any command runs.
 *
 * What a producer may see (lith__dqw_do's result, or req->rc):
 *   LITH_DQW_OK           committed (a majority stored it).
 *   LITH_DQW_SQL, LITH_DQW_USER, LITH_DQW_TOOBIG, or whatever else the
 *                         callback returned
 *                         the command failed and left nothing (its
 *                         savepoint was rolled back); the rest of its batch
 *                         is unaffected. code/errmsg say why (SQL: SQLite's
 *                         extended code and message; TOOBIG: an answer too
 *                         large, see lith__dqw_query_each).
 *   LITH_DQW_UNAVAILABLE  no leader could be reached within failover_ms;
 *                         the command is certainly NOT committed (COMMIT
 *                         was never sent for it, or its batch was fenced).
 *   LITH_DQW_UNKNOWN      no leader within failover_ms while the batch's
 *                         COMMIT was unanswered: it may or may not have
 *                         committed (the only non-definite outcome; an HTTP
 *                         server answers it 503 like UNAVAILABLE, saying so).
 *   LITH_DQW_CLOSED       the writer is stopping; the command never ran.
 *   LITH_DQW_NOMEM, LITH_DQW_MISUSE  not run (or, MISUSE from the tx: a
 *                         statement the writer refuses, see below).
 * Never success for a batch that was lost, never failure for one that was
 * kept. How long a command may wait when there is no leader: noticing the
 * loss takes up to request_timeout_ms (a COMMIT left without a majority is
 * answered by neither OK nor FAILURE), then the writer looks for a leader
 * for failover_ms (a node that thinks it leads may hold each try up to
 * request_timeout_ms more), then fails its batch and everything queued
 * meanwhile. While it has been without a leader longer than that, each new
 * batch gets one round of the addresses. So: at most failover_ms + 2 x
 * request_timeout_ms after the later of the leader's loss and the command's
 * submission (test_writer checks failover + 2 x timeout + 1 s); a batch
 * that meets a writer long without a leader may wait the back-off (below,
 * at most LITH_DQW_BACKOFF_MAX_MS) before its round.
 *
 * Back-off: every reconnection after a failed one waits first, 10 ms the
 * first time (the first reconnection after a success goes at once),
 * doubling up to 1 s (LITH_DQW_BACKOFF_*), and starts over when a leader
 * gives a definite answer (a batch committed or failed for its own reasons,
 * a fence settled). Within failover_ms the waits stop at its deadline. So a
 * node answering garbage, or producers resubmitting at once what failed
 * UNAVAILABLE, cost about one connection a second, not a tight loop (a
 * malformed frame made the writer reconnect ~1,450 times a second before,
 * issue 20). lith__dq_connect_leader backs off between its own rounds too.
 *
 * Who leads (the watch, issue 34). The writer keeps who leads as it last
 * learned it, and counts and times each failover: lith__dqw_get_stats,
 * and the on_leader callback for each change (lithd logs them). With
 * watch_ms > 0:
 *   - on each new connection it asks the node it connected to (LEADER,
 *     one request) whether it leads itself; a node that names another (a
 *     follower's stale word) is not used, the search goes on;
 *   - while idle (no command queued or running), every watch_ms it asks
 *     that leader again on its own connection, and without a leader it
 *     makes one round of the addresses: a leader lost with no write
 *     going is noticed, and the new one found and connected to, within
 *     about watch_ms (plus request_timeout_ms when the old one hangs
 *     rather than dies), and the next write finds the writer ready;
 *   - its back-off (above) stops growing at watch_ms, not 1 s, so a new
 *     leader is found within about watch_ms of its election under load
 *     too (a node answering garbage then costs a round every watch_ms).
 * One connection for everything (the writer's), no thread of its own; an
 * alone command holding the writer (an interactive transaction) holds the
 * watch too: a loss is then noticed at its next statement. Without the
 * watch the writer connects when the first batch comes and learns who
 * leads only from its batches.
 * A failover is a lost leader (the connection or its leadership) found
 * again: it counts once in failovers, however many rounds the search
 * took. Its wait runs from the moment the loss was noticed to the first
 * batch answered on the new leader; with no write waiting, to the new
 * leader's connection being ready (what a write would have waited).
 *
 * Statement bounds: a statement the node interrupts (lith-node
 * --max-run-ms, lowered to max_run_ms on the writer's connection) fails
 * its command alone with SQLITE_INTERRUPT. The writer waits for the answer
 * to one of a command's statements that bound plus request_timeout_ms (the
 * bound the node reports; a node without lith_max_run_ms: max_run_ms),
 * not request_timeout_ms alone: a slow statement taken for a lost leader
 * would run its batch again until failover_ms (seen: a 3 s INSERT
 * answered 503 "no leader" after 12 s, holding every write meanwhile).
 * BEGIN, SAVEPOINT and COMMIT keep request_timeout_ms, so a lost leader is
 * still noticed that soon at COMMIT.
 *
 * A CALLBACK MAY RUN MORE THAN ONCE (again after a failover, or when
 * another command of its batch ended the transaction). So: it must act only
 * through its tx (no side effects elsewhere: no I/O, no globals, no
 * counters), set every output in arg on every run, and its outputs are
 * those of the run that committed. After a tx call returns LITH_DQW_RETRY
 * the run is abandoned: return at once (any value; it is ignored). It runs
 * on the writer thread and must not call lith__dqw_do / _stop.
 *
 * A failed statement fails its command: later tx calls of that run return
 * the same failure without running (after some failures SQLite has ended
 * the transaction, and a statement then would commit on its own).
 *
 * Statements: one per call (a text with a second statement after ';' is
 * refused with LITH_DQW_MISUSE, as is one starting with BEGIN, COMMIT, END,
 * ROLLBACK, SAVEPOINT or RELEASE): the batch's transaction is the writer's.
 * A trigger body (CREATE TRIGGER ... BEGIN ...; END) is therefore refused
 * too: create such schema outside the writer. Parameters are
 * lith__dq_value's (wire.h), at most 255.
 *
 * Reads in a command go to the leader inside the write transaction, so they
 * see the batch so far. A COMMIT refused for a constraint (a deferred
 * foreign key left by some command) makes every command of the batch run
 * again in a transaction of its own, so only the one at fault fails.
 */
#ifndef LITH_DQLITE_WRITER_H
#define LITH_DQLITE_WRITER_H

#include <stdint.h>

#include "client.h"

/* The one result code of the dqlite writer. */
enum lith__dqw_rc {
  LITH_DQW_OK = 0,
  LITH_DQW_SQL,         /* a statement failed: code/errmsg are SQLite's */
  LITH_DQW_USER,        /* the callback failed on its own (lith__dqw_error) */
  LITH_DQW_RETRY,       /* tx only: the run is abandoned, return at once */
  LITH_DQW_UNAVAILABLE, /* no leader within failover_ms: not committed */
  LITH_DQW_UNKNOWN,     /* no leader within failover_ms, COMMIT unanswered */
  LITH_DQW_CLOSED,      /* the writer is stopping: not run */
  LITH_DQW_NOMEM,
  LITH_DQW_MISUSE,
  LITH_DQW_TOOBIG, /* an answer too large for the client (LITH_DQ_TOOBIG):
                    * the command fails alone, never a lost leader */
};

/* The reconnection back-off (above): 10 ms doubling to 1 s. */
#define LITH_DQW_BACKOFF_MIN_MS 10
#define LITH_DQW_BACKOFF_MAX_MS 1000

/* "ok", "sql error", ... */
const char *lith__dqw_rc_str(int rc);

typedef struct lith__dqw lith__dqw;
typedef struct lith__dqw_tx lith__dqw_tx;
typedef int (*lith__dqw_fn)(lith__dqw_tx *tx, void *arg);
struct lith__dqw_leader_event;

typedef struct lith__dqw_options {
  const char *addresses;  /* "host:port,host:port,..." (copied) */
  const char *database;   /* the dqlite database name to OPEN (copied) */
  int failover_ms;        /* <= 0: 10000 */
  int request_timeout_ms; /* each request's answer; <= 0: LITH_DQ_REQUEST_MS (client.h) */
  /* The bound asked of the nodes on a command's own statements
   * (lith__dqw_exec, _query, _query_each): lith__dq_max_run on each
   * connection; <= 0: the nodes' own --max-run-ms. See "Statement bounds". */
  int max_run_ms;
  int max_batch; /* commands per transaction; <= 0: 256 */
  int keep_s;    /* _lith_batches rows kept this long; <= 0: 600 */
  /* Tests only: in every fault_every-th batch, at COMMIT, either send
   * COMMIT, read its OK and then drop the connection as if the answer were
   * lost (LITH_DQW_FAULT_ANSWER_LOST), or drop the connection instead of
   * sending COMMIT (LITH_DQW_FAULT_COMMIT_LOST); both leave the writer
   * with an unknown outcome to fence. */
  int fault, fault_every;
  /* The watch (above, "Who leads"): its period; 0: none. */
  int watch_ms;
  /* Called on the writer thread at each change of who leads (below);
   * NULL: none. It must not call the writer. */
  void (*on_leader)(void *arg, const struct lith__dqw_leader_event *e);
  void *on_leader_arg;
} lith__dqw_options;

/* A node's address as the writer keeps it, NUL included (longer ones are
 * not taken for a leader). */
#define LITH_DQW_ADDR_MAX 256

/* What on_leader is told, once per change (never per retry):
 *   FOUND     the first leader, or one after a change nothing noticed as a
 *             loss (the connection had been dropped for another reason);
 *   LOST      the leader (old_*) was found lost: its connection failed,
 *             or it no longer leads; why says how;
 *   FAILOVER  a leader (address, id) after the loss of old_*: wait_ms
 *             from the loss (writes_waited: to the first batch answered
 *             on it; otherwise to its connection being ready);
 *   NONE      no leader for failover_ms (wait_ms) after old_* was lost, or
 *             since the writer first looked (old_* ""): writes are failed
 *             until one is found. Once per loss.
 * The strings are valid during the call. */
enum { LITH_DQW_LEADER_FOUND, LITH_DQW_LEADER_LOST, LITH_DQW_LEADER_FAILOVER, LITH_DQW_LEADER_NONE };
typedef struct lith__dqw_leader_event {
  int kind;
  const char *address; /* the new leader ("" for LOST, NONE) */
  uint64_t id;
  const char *old_address; /* the leader lost ("" none) */
  uint64_t old_id;
  int64_t wait_ms;
  int writes_waited;
  const char *why; /* LOST: the client's message */
} lith__dqw_leader_event;
enum { LITH_DQW_FAULT_NONE, LITH_DQW_FAULT_ANSWER_LOST, LITH_DQW_FAULT_COMMIT_LOST };

/* Start the writer thread. It needs no leader yet (it connects when the
 * first batch comes). *out is the caller's, freed by lith__dqw_stop. */
int lith__dqw_start(const lith__dqw_options *o, lith__dqw **out);
/* Run what is queued, answer it, stop the thread, free w. Commands
 * submitted during or after the call get LITH_DQW_CLOSED. */
void lith__dqw_stop(lith__dqw *w);

/* A command's failure: code is SQLite's extended code for LITH_DQW_SQL
 * (0 otherwise), errmsg a description of any failure ("" on success). */
typedef struct lith__dqw_err {
  int code;
  char errmsg[256];
} lith__dqw_err;

/* Submit and wait for the outcome (above). err may be NULL. Any thread but
 * the writer's. */
int lith__dqw_do(lith__dqw *w, lith__dqw_fn fn, void *arg, lith__dqw_err *err);

/* The asynchronous form: fill fn, arg, done (and anything around the
 * struct the callback needs); done(req) runs on the writer thread once
 * req->rc and req->err are set, and may free req. The request is the
 * caller's, and must stay valid until done.
 *
 * alone: the command runs in a transaction of its own (the commands queued
 * before it commit first, those after it wait until it returns), and its
 * callback may hold the writer while it waits for more work (lithd's
 * interactive transactions), end transactions in the middle of itself
 * (lith__dqw_tx_end), and hand out answers as it goes: so it is NEVER RUN
 * AGAIN. Where a batch would run again it fails instead:
 * LITH_DQW_UNAVAILABLE (the leader was lost before COMMIT, or the fence
 * proved the COMMIT lost: nothing of it since its last commit was kept),
 * or LITH_DQW_UNKNOWN (no leader to fence with within failover_ms). */
typedef struct lith__dqw_req lith__dqw_req;
struct lith__dqw_req {
  lith__dqw_fn fn;
  void *arg;
  void (*done)(lith__dqw_req *req);
  int alone;
  int rc;
  lith__dqw_err err;
  /* private */
  lith__dqw_req *next;
  int state;
};
void lith__dqw_submit(lith__dqw *w, lith__dqw_req *req);

/* ---- Inside a command ---- */

/* Run one statement with bound parameters; res may be NULL. A statement
 * that returns rows fails here (libdqlite 1.11.1: "another row
 * available", seen in test_writer): use lith__dqw_query. */
int lith__dqw_exec(lith__dqw_tx *tx, const char *sql, const lith__dq_value *params, unsigned n,
                   lith__dq_result *res);
/* Run one query; rows must be lith__dq_rows_init'ed and is the caller's to
 * free (lith__dq_rows_free) whatever the result. A result over
 * LITH_DQ_MAX_ANSWER (or one frame over LITH_DQ_MAX_BODY) fails the command
 * with LITH_DQW_TOOBIG, as below. The whole answer comes within
 * request_timeout_ms. */
int lith__dqw_query(lith__dqw_tx *tx, const char *sql, const lith__dq_value *params, unsigned n,
                    lith__dq_rows *rows);
/* As lith__dq_query_each inside a command. A stop by on_rows or a
 * LITH_DQ_TOOBIG frame fails the command on its own (LITH_DQW_USER after the
 * callback's own lith__dqw_error, or a new LITH_DQW_TOOBIG — say which), never
 * a lost leader: the batch's other commands still commit, the connection is
 * kept when it can be (re-running the batch elsewhere only if it was lost).
 *
 * In detail:
 *   - A stop: this returns LITH_DQW_USER, with the message on_rows gave
 *     through lith__dqw_error(tx, ...) (on_rows gets its tx through arg),
 *     or "the query was stopped by its callback" if it gave none. Later tx
 *     calls of the run refuse, as after any failure; the command fails
 *     whatever the callback returns.
 *   - An answer too large (one frame over LITH_DQ_MAX_BODY): this returns
 *     LITH_DQW_TOOBIG with the client's message; the command fails so.
 *   - The connection: kept when the client could end the query in step
 *     (client.h, "The stop": at most LITH_DQ_DRAIN_MAX bytes more), and the
 *     batch goes on. Otherwise (a TOOBIG frame always closes it) the
 *     batch's transaction went with it: the command fails alone and the
 *     batch's other commands run again on a new connection (counted in
 *     reruns, not in failovers).
 *   - The whole query is bounded by request_timeout_ms; past it, as any
 *     timeout, the leader is in doubt (failover).
 *   - on_rows runs on the writer thread during the call; a tx call from
 *     inside it fails LITH_DQW_MISUSE (nothing is sent) and fails the
 *     command. */
int lith__dqw_query_each(lith__dqw_tx *tx, const char *sql, const lith__dq_value *params, unsigned n,
                         lith__dq_rows_cb on_rows, void *arg);
/* The first column of the first row as an integer: LITH_DQW_OK, or
 * LITH_DQW_USER with "no row" when the query gave none. */
int lith__dqw_query_int(lith__dqw_tx *tx, int64_t *out, const char *sql, const lith__dq_value *params,
                        unsigned n);
/* Run fn(tx, arg) in a savepoint nested in the command's (Hrana's steps:
 * each one's failure is undone alone and the command goes on). fn's
 * statements kept when it returns LITH_DQW_OK with none failed; otherwise
 * undone (ROLLBACK TO), and the failure no longer fails the command: it
 * returns fn's code (a failed statement's: its code and message stay in
 * lith__dqw_tx_err until the next statement). When the undo is refused
 * (SQLite ended the transaction with the failure: ON CONFLICT ROLLBACK, a
 * full disk, an interrupted write) it returns that failure's code (SQL,
 * ...), which stays the command's: the command
 * fails alone while its batch's other commands run again; when the
 * connection is lost, LITH_DQW_RETRY as any tx call. Either way
 * lith__dqw_tx_state is not LITH_DQW_OK after. Nests. Costs no round trip of its own
 * but when fn failed after sending a statement (the undo is sent at once,
 * so its outcome is known). */
int lith__dqw_savepoint(lith__dqw_tx *tx, lith__dqw_fn fn, void *arg);

/* Only in an alone command, outside lith__dqw_savepoint: end its
 * transaction now and go on in a new one (sent with its next statement),
 * as lith_tx_commit / lith_tx_rollback (lith.h). commit: RELEASE and
 * COMMIT what the command did so far (LITH_DQW_OK once a majority stored
 * it; LITH_DQW_SQL with a deferred FOREIGN KEY violated, the transaction
 * still open, as SQLite's COMMIT; a COMMIT left unanswered is fenced here
 * (writer.h, "fences"): committed, LITH_DQW_OK; lost, LITH_DQW_UNAVAILABLE;
 * no leader, LITH_DQW_UNKNOWN, and then nothing more runs in the command).
 * !commit: undo it (ROLLBACK). Either way nothing is left open on the
 * node, and the command goes on in a new transaction. Nothing sent
 * since the last end: nothing to do, LITH_DQW_OK. Elsewhere:
 * LITH_DQW_MISUSE. */
int lith__dqw_tx_end(lith__dqw_tx *tx, int commit);

/* Connection settings. A batch's commands share the leader connection, and
 * a setting is the connection's, not the transaction's (dqlite replicates
 * pages: a setting lives on the leader's connection alone, and a new
 * leader's starts at libdqlite's). So a command that changes one says how
 * to put it back, and the writer does so before any other command runs:
 *
 * lith__dqw_tx_after: sql (under 128 bytes; a later call replaces it) is
 * sent right after the command's savepoint is released or rolled back, in
 * the same request, whatever its outcome: for a setting
 * that holds inside a transaction (PRAGMA defer_foreign_keys; its OFF after
 * ROLLBACK TO forgets nothing, as the savepoint puts SQLite's deferred
 * counts back); and again, in autocommit, once the command's batch ended
 * and before any rerun of it (the request it rides in may fail before
 * it: a transaction ended under it, a COMMIT lost). LITH_DQW_OK, or
 * MISUSE.
 *
 * lith__dqw_tx_setting: only where lith__dqw_tx_end may be called: commit
 * what the command did so far (as lith__dqw_tx_end(tx, 1), its results the
 * same), run `set` in autocommit (a setting SQLite changes only between
 * transactions: PRAGMA foreign_keys), and go on in a new transaction;
 * `undo` (under 64 bytes, one per command) runs once the command's batch
 * ended, committed or not, before the next batch (a node that refuses it
 * loses the connection: a new one starts at libdqlite's settings). A
 * failure of `set` fails the command (LITH_DQW_SQL); a lost connection
 * LITH_DQW_RETRY, what was committed before it kept. */
int lith__dqw_tx_after(lith__dqw_tx *tx, const char *sql);
int lith__dqw_tx_setting(lith__dqw_tx *tx, const char *set, const char *undo);

/* 1 if a command waits in the queue (any thread): for an alone command
 * that holds the writer, whether another writer waits for it. */
int lith__dqw_waiting(lith__dqw *w);

/* Whether tx can still run statements: LITH_DQW_OK; LITH_DQW_RETRY when
 * the run is abandoned; or the failure that ended the command's
 * transaction or took the connection with it (the command fails alone). */
int lith__dqw_tx_state(const lith__dqw_tx *tx);

/* The last failure of a statement in tx (what the command fails with,
 * unless a savepoint undid it). */
const lith__dqw_err *lith__dqw_tx_err(const lith__dqw_tx *tx);

/* Fail the command on its own: returns LITH_DQW_USER, for
 * `return lith__dqw_error(tx, "...")`. */
int lith__dqw_error(lith__dqw_tx *tx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Counters (writer thread writes, any thread reads; approximate). */
typedef struct lith__dqw_stats {
  uint64_t batches;   /* committed transactions */
  uint64_t commands;  /* commands answered from committed batches */
  uint64_t failovers; /* reconnections after a lost leader */
  uint64_t fenced;    /* unknown outcomes resolved by the fence */
  uint64_t reruns;    /* batches run again */
  /* Who leads ("Who leads" above): known 1 while the writer holds a
   * connection to a leader; then its address as the leader names itself
   * and its id (0 without the watch, which does not ask). failover_wait_ms:
   * the last failover's wait (0: none yet). */
  int leader_known;
  char leader[LITH_DQW_ADDR_MAX];
  uint64_t leader_id;
  int64_t failover_wait_ms;
} lith__dqw_stats;
void lith__dqw_get_stats(lith__dqw *w, lith__dqw_stats *out);

#endif
