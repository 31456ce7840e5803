/*
 * lith — one writer for a SQLite database, many producers.
 *
 * Producers (threads, event-loop callbacks, remote clients) submit
 * *commands*: C functions that run against the write connection. One writer
 * thread owns that connection. It takes everything queued (up to max_batch)
 * into one BEGIN IMMEDIATE transaction, runs each command inside its own
 * SAVEPOINT (a failing command is rolled back alone), commits the batch once,
 * answers every producer only after the COMMIT returned, and then
 * checkpoints the WAL while the next batch queues.
 *
 * Conventions, as in sqlite3.h and uv.h:
 *   - every call returns an int result code (LITH_OK is 0); lith_errstr()
 *     describes a code in a short phrase and lith_errmsg() gives this
 *     thread's last message;
 *   - handles are opaque and come in create/destroy pairs;
 *   - each function says who owns every pointer it takes or returns.
 *
 * Thread safety: lith_do, lith_do_deadline, lith_submit, lith_read,
 * lith_read_deadline, lith_backup, lith_stats_get and lith_interrupt may be
 * called from any thread at once.
 * lith_open and lith_close are called once each. Functions taking a lith_tx
 * run only on the writer thread, inside a command; functions taking a
 * lith_rx only inside a lith_read callback.
 */
#ifndef LITH_H
#define LITH_H

#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version; the build reads it from here (the Makefile, the soname). */
#define LITH_VERSION "0.1.0"

/* Marks the functions of the API: liblith.so and liblith_uv.so are built
 * with -fvisibility=hidden and export these alone. */
#ifndef LITH_API
#define LITH_API __attribute__((visibility("default")))
#endif

/* ---- Result codes ------------------------------------------------------ */

enum {
  LITH_OK = 0,
  LITH_ERROR = 1,        /* an SQL error (syntax, missing table, ...) */
  LITH_MISUSE = 2,       /* the API was called wrongly (bad argument, wrong thread) */
  LITH_NOMEM = 3,        /* out of memory */
  LITH_CLOSED = 4,       /* the handle is closing: the command was not accepted */
  LITH_QUEUE_FULL = 5,   /* the queue (lith_read_deadline: every reader) stayed full
                          until the deadline: not accepted, nothing ran */
  LITH_BUSY = 6,         /* another connection held the write lock past busy_timeout */
  LITH_CONSTRAINT = 7,   /* a UNIQUE, CHECK, FOREIGN KEY or NOT NULL constraint failed */
  LITH_IOERR = 8,        /* the disk reported an I/O error */
  LITH_DISKFULL = 9,     /* the disk (or quota) is full */
  LITH_ABORTED = 10,     /* the command ran, but its transaction was rolled back
                          for a reason outside it; nothing of it was kept */
  LITH_CANTOPEN = 11,    /* the database file could not be opened */
  LITH_CORRUPT = 12,     /* the database file is damaged or not a database */
  LITH_READONLY = 13,    /* a write was attempted where only reads are allowed */
  LITH_SCHEMA = 14,      /* the database's schema version is newer than the migrations given */
  LITH_INTERRUPTED = 15, /* stopped by lith_interrupt (or sqlite3_interrupt) before it ended,
                          or a command past lith_options.command_timeout_ms */
  LITH_USER = 1000       /* commands may return LITH_USER and above for their own errors */
};

/* A result code described in a short human phrase ("disk full"; "command
 * error" for LITH_USER and above, "unknown error" for a code not listed): a
 * static string, never NULL. */
LITH_API const char *lith_errstr(int rc);

/* Map an SQLite result code (primary or extended) to a lith result code. */
LITH_API int lith_from_sqlite(int sqlite_rc);

/* ---- Options ------------------------------------------------------------ */

/* synchronous: what an answered command survives.
 *   FULL    every COMMIT is synced to disk before producers are answered:
 *           an answered command survives a crash of the process and a
 *           power loss (as far as the disk keeps its promise on fsync).
 *   NORMAL  the WAL is synced only at checkpoints: an answered command
 *           survives a crash of the process, not a power loss — after one,
 *           a suffix of whole batches may be missing (never part of a batch,
 *           never a later batch without an earlier one). Much faster.
 *           "Never part of a batch" needs a disk that does not garble the
 *           bytes of a sector it was not writing when the power went
 *           (SQLite's "powersafe overwrite", which its unix VFS assumes):
 *           on one that does, SQLite's NORMAL can itself lose half a
 *           transaction or corrupt the file (writer/test/test_powerloss.c
 *           shows it); FULL holds on both. */
enum { LITH_SYNC_NORMAL = 1, LITH_SYNC_FULL = 2 };

enum {
  /* PASSIVE checkpoints on a background thread with its own connection,
   * started once the WAL holds checkpoint_pages: the copying and the fsyncs
   * never sit inside a commit, nor between a producer and its answer, and
   * readers are never blocked. Once the WAL reaches 4 x checkpoint_pages the
   * writer, between two batches, copies the few frames committed since the
   * last pass so that the WAL can start over. */
  LITH_CHECKPOINT_WRITER = 0,
  /* SQLite's own: a PASSIVE checkpoint inside the COMMIT that crosses
   * checkpoint_pages (the commit, and so the producers, wait for it). */
  LITH_CHECKPOINT_AUTO = 1,
  /* never, not even at close: a replicator such as Litestream owns the WAL.
   * No connection lith opens (writer, readers, a backup's source) runs
   * SQLite's autocheckpoint (wal_autocheckpoint=0) or checkpoints when it
   * closes (SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE): lith never copies the WAL
   * into the database, truncates or deletes it (it starts over only after
   * the replicator's own checkpoint copied all of it). The replicator's own
   * checkpoints hold the write lock briefly: the writer's BEGIN IMMEDIATE
   * waits for it up to busy_timeout_ms, whose default (5000) is what this
   * mode relies on — a lower value can fail batches with LITH_BUSY. */
  LITH_CHECKPOINT_EXTERNAL = 2
};

typedef struct lith_tx lith_tx;
typedef struct lith_rx lith_rx;
typedef struct lith lith;

/* Called on the writer thread after each batch that touched topics has
 * committed and before its producers are answered. `topics` (owned by lith,
 * valid only during the call) holds each topic touched by a committed command
 * of the batch once, in the order first touched. Keep it short: the writer
 * waits for it. */
typedef void (*lith_commit_hook)(void *ctx, const int64_t *topics, int n);

typedef struct lith_options {
  int synchronous;      /* LITH_SYNC_NORMAL (default) or LITH_SYNC_FULL */
  int checkpoint;       /* LITH_CHECKPOINT_WRITER (default), _AUTO, _EXTERNAL */
  int checkpoint_pages; /* WAL pages that start a checkpoint; default 1000 */
  /* WRITER and AUTO: SQLite starts the WAL over only once a checkpoint has
   * copied all of it while no reader uses it, a moment endless readers
   * never leave (checkpoint starvation: the -wal file grows without end).
   * Once the WAL holds 4 x checkpoint_pages without having started over,
   * lith holds new lith_read snapshots while the reads already running
   * finish, for at most this many ms (past it the hold gives up), then
   * keeps them out while it copies the rest (milliseconds), and lets them
   * go: the next write starts the WAL over. Reads that last are asked to
   * end (lith_rx_too_old); after holds that gave up the bound doubles, up
   * to 4 x this. Default 100; 0: never hold (the -wal file then grows while
   * reads never pause). */
  int wal_hold_ms;
  int readers;         /* read-only connections in the read pool; default: CPUs */
  int max_batch;       /* most commands in one transaction; default 1024 */
  int queue_capacity;  /* most commands waiting; default 65536 */
  int busy_timeout_ms; /* how long BEGIN IMMEDIATE waits for another
                               process's write lock; default 5000 */
  int cache_size_kib;  /* page cache per connection, KiB; default 16384 */
  int64_t mmap_size;   /* bytes of the file to mmap; default 0 (off: an I/O
                               error stays an error instead of a SIGBUS) */
  int foreign_keys;    /* enforce FOREIGN KEY constraints; default 1 */
  int file_mode;       /* permission bits of a database file (and of a backup)
                               lith creates, before the umask; the -wal and -shm
                               files follow the database file's. Default 0600:
                               the data is the owner's alone. Must include 0600. */
  int stmt_cache_size; /* prepared statements kept per connection; default 256 */
  const char *vfs;     /* name of a registered SQLite VFS for every connection;
                               default NULL: SQLite's default. Read only during
                               lith_open; the name is kept (copied) for lith_backup. */
  /* Schema migrations, run once at open in one transaction: migration i
   * (counting from 1) runs when PRAGMA user_version < i, then user_version
   * is set to n_migrations. A migration may not BEGIN, COMMIT or ROLLBACK
   * itself; with foreign_keys on, what they leave must pass PRAGMA
   * foreign_key_check (else LITH_CONSTRAINT and nothing of them stays).
   * Owned by the caller; read only during lith_open. */
  const char *const *migrations;
  int n_migrations;
  lith_commit_hook on_commit; /* optional; see lith_commit_hook */
  void *on_commit_ctx;
  /* Optional: a further SQLite authorizer (sqlite3_set_authorizer's
   * callback) for what commands prepare on the write connection, consulted
   * after lith's own rules, and for what lith_read callbacks prepare on the
   * read connections; a server that runs its clients' SQL can refuse
   * ATTACH, PRAGMA assignments or functions with it. Called with
   * authorizer_ctx (the caller's; it must outlive the handle) on the writer
   * thread and on the threads calling lith_read, at once: it must be
   * thread-safe. A denied statement fails to prepare (SQLite's "not
   * authorized"). Whatever it says, every connection runs with SQLite's
   * defensive settings: SQLITE_DBCONFIG_DEFENSIVE on, TRUSTED_SCHEMA off,
   * the two-argument fts3_tokenizer() off for SQL text, extensions off. */
  int (*authorizer)(void *ctx, int action, const char *a, const char *b, const char *c, const char *d);
  void *authorizer_ctx;
  /* Optional: called once for every connection lith opens (the writer's,
   * each reader's, the checkpointer's, a backup's source), after lith's own
   * settings and before the connection's first statement, on the thread
   * opening it, with on_connect_ctx (the caller's; it must outlive the
   * handle). It may set limits (sqlite3_limit) or register functions
   * (sqlite3_create_function), nothing that runs a statement. A return other
   * than SQLITE_OK fails the open with that SQLite code. */
  int (*on_connect)(void *ctx, sqlite3 *conn);
  void *on_connect_ctx;
  /* A limit on one run of a command's function, in ms; default 0: none.
   * Measured from when the function starts (a command run again after a
   * rollback gets the limit afresh). Past it:
   *   - the SQL statement the command is stepping is interrupted (SQLite's
   *     progress handler, checked every 1000 VM instructions, installed
   *     on the write connection for the command's run only): it fails with
   *     LITH_INTERRUPTED, and so does every statement the command steps
   *     afterwards;
   *   - every lith_tx_* call (lith_tx_exec, lith_tx_int64, lith_tx_stmt,
   *     lith_tx_savepoint, lith_cmd_sql) fails at once with LITH_INTERRUPTED;
   *   - the command fails with LITH_INTERRUPTED ("... ran longer than
   *     command_timeout_ms") if it returns LITH_OK or LITH_INTERRUPTED (a
   *     code of its own, LITH_USER and above, stays its answer), and
   *     nothing of it is kept. It fails alone: the other commands of the
   *     batch commit. An interrupted statement that writes makes SQLite roll
   *     back the whole transaction (its rule for an interrupt); then the
   *     others run again in a new transaction, as for any command that loses
   *     the transaction (see lith_command).
   * Not covered: C code between two statements (lith cannot stop it; its
   * next lith_tx_* call fails), one step of a statement that does not
   * return to SQLite's VM (a long function call: sqlite3_interrupt from
   * another thread reaches it), and lith's own work after the function
   * returns (RELEASE, COMMIT). A command must not install a progress
   * handler of its own while this is set (it would replace lith's). */
  int command_timeout_ms;
} lith_options;

/* Fill *opt with the defaults above. */
LITH_API void lith_options_default(lith_options *opt);

/* ---- Open and close ----------------------------------------------------- */

/* Open (creating if needed) the database file at `path`, run the migrations,
 * open the read pool and start the writer thread. `path` and `opt` are read
 * only during the call (opt may be NULL for the defaults). On LITH_OK, *out
 * is a handle the caller releases with lith_close(); on error *out is NULL and
 * lith_errmsg(NULL) says why. `path` must name a file: WAL mode needs one. */
LITH_API int lith_open(const char *path, const lith_options *opt, lith **out);

/* Stop accepting (from now on every call on `db` returns LITH_CLOSED), run
 * and answer every command already accepted, checkpoint with TRUNCATE (not
 * in EXTERNAL mode) and close every connection — but keep the handle itself
 * valid, so that producers racing the shutdown safely get LITH_CLOSED. Call
 * lith_close() once they have stopped. Any thread but the writer; a second
 * call waits for the first and returns its result. */
LITH_API int lith_shutdown(lith *db);

/* lith_shutdown() if not done yet, then free `db`. Call it once, when no
 * other thread will use `db` again, from a thread that is not the writer and
 * not inside lith_read. Returns the first error met while shutting down (the
 * handle is freed whatever it returns). A closing checkpoint that another
 * process's read transaction holds off past busy_timeout (Litestream, a
 * backup, the sqlite3 shell) is no error: the WAL cannot start over, but
 * every committed transaction is in it and the next open reads it. */
LITH_API int lith_close(lith *db);

/* This thread's last error message from a lith call (on any handle; `db` may
 * be NULL). Owned by lith, valid until this thread's next lith call. */
LITH_API const char *lith_errmsg(lith *db);

/* Set this thread's lith_errmsg() message (printf-style) and return rc:
 * for code built on lith's API (liblith_uv, a wrapper) whose calls report
 * their errors as lith's own do. `fmt` and its arguments are read only
 * during the call. Inside a command, lith_tx_error sets the command's
 * message instead. */
LITH_API int lith_set_error(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Milliseconds on the monotonic clock: the clock of every deadline. */
LITH_API int64_t lith_clock_ms(void);

/* ---- Commands ----------------------------------------------------------- */

/* A command. It runs on the writer thread inside its own SAVEPOINT. Return
 * LITH_OK to keep its changes; any other value (an SQLite code returned by
 * mistake too) rolls back exactly this command and is what its producer
 * receives. A command may be run more than once: if another command in its
 * batch makes SQLite roll back the whole transaction, the commands that were
 * not at fault run again in a new transaction (only one run is ever
 * committed). So a command must write its outputs afresh on every run.
 *
 * What a command may not do, and what lith does about it — whatever the
 * command does, it fails alone and the other commands of its batch commit:
 *   - end the transaction: BEGIN, COMMIT, ROLLBACK and savepoints named
 *     lith_* (in any case) are refused ("not authorized"). If SQLite itself
 *     rolls the transaction back under it (RAISE(ROLLBACK), ON CONFLICT
 *     ROLLBACK, a full disk), the command fails with that error, nothing it
 *     runs afterwards is committed, and the others run again.
 *   - leave a deferred FOREIGN KEY violation: the command fails with
 *     LITH_CONSTRAINT (SQLite would otherwise fail the whole COMMIT).
 *   - change the write connection for the commands after it: a PRAGMA may be
 *     read, and given an argument only when the argument names what to read
 *     (table_info(t), ...) or it writes the file inside the transaction
 *     (user_version, application_id, incremental_vacuum, optimize);
 *     defer_foreign_keys and recursive_triggers may be set and are put back
 *     when the command ends (as SQLite's COMMIT ends defer_foreign_keys; a
 *     command that sets it while a deferred violation is counted, which
 *     SQLite's OFF would forget, must pass PRAGMA foreign_key_check before
 *     it commits, else LITH_CONSTRAINT); every other setting (journal_mode,
 *     synchronous, foreign_keys, query_only, ...) and wal_checkpoint are
 *     refused. TEMP tables, views, triggers and indexes live until the
 *     command ends: lith drops them.
 *   - leave a write statement mid-step (stepped, neither reset nor run to
 *     its end): lith resets it and fails the command with LITH_MISUSE. Read
 *     statements left mid-step are reset after the batch, or as soon as a
 *     later command finds a table locked by one (that command then runs
 *     again). What a command
 *     prepares itself it finalizes itself; one never finalized does not make
 *     lith_close fail (the connection is freed with the last of them).
 *   - call lith_do, lith_submit, lith_read, lith_shutdown or lith_close:
 *     refused with LITH_MISUSE. */
typedef int (*lith_command)(lith_tx *tx, void *arg);

/* Run fn(tx, arg) as one command and wait until its batch has committed
 * (under LITH_SYNC_NORMAL: survives a crash of the process, not a power
 * loss; see synchronous above).
 * Returns fn's own result if the batch committed (LITH_OK, or fn's error,
 * in which case nothing of fn is kept), or the transaction's error
 * (LITH_BUSY, LITH_DISKFULL, LITH_IOERR, ...: nothing of fn is visible), or
 * LITH_CLOSED if the handle is closing (fn did not run). Never a false
 * LITH_OK. One case is not definite, by SQLite's design: when COMMIT fails
 * with LITH_IOERR after writing (a failed fsync), the commit record may be in
 * the WAL; the batch stays invisible, and the next commit or a clean close
 * discards it, but a crash before either may bring it back. Waits for queue
 * space without limit. `arg` is the caller's; fn may write results into it,
 * read after lith_do returns. Must not be called from a command. */
LITH_API int lith_do(lith *db, lith_command fn, void *arg);

/* As lith_do, but gives up with LITH_QUEUE_FULL if the queue has no room by
 * `deadline_ms` (on lith_clock_ms()). The deadline bounds only that wait:
 * once queued, a command always runs and the caller learns its true outcome. */
LITH_API int lith_do_deadline(lith *db, lith_command fn, void *arg, int64_t deadline_ms);

/* ---- Asynchronous submission -------------------------------------------- */

typedef struct lith_request lith_request;

/* Called once per accepted request, on the writer thread, after the request's
 * batch committed (or failed); req->rc and req->errmsg hold the outcome. The
 * callback may free or reuse `req`; it must be quick and must not call
 * lith_do, lith_close or lith_read. */
typedef void (*lith_done_cb)(lith_request *req);

#define LITH_ERRMSG_MAX 200

/* A caller-owned request. Set fn, arg, done (and data) before lith_submit;
 * keep the memory alive and untouched until `done` runs. */
struct lith_request {
  lith_command fn;              /* the command */
  void *arg;                    /* its argument, the caller's */
  lith_done_cb done;            /* required */
  void *data;                   /* free for the caller */
  int rc;                       /* outcome, valid in `done` */
  char errmsg[LITH_ERRMSG_MAX]; /* "" on success; valid in `done` */
  /* private: lith's bookkeeping while the request is queued */
  union {
    void *p[4];
    int64_t i[4];
  } lith__priv;
};

/* Queue `req` without blocking. Returns LITH_OK (req->done will run exactly
 * once), LITH_QUEUE_FULL (the queue is at capacity), LITH_CLOSED or
 * LITH_MISUSE (fn or done missing, or called from inside a command: a
 * command may run more than once, and may be undone); on an error `done`
 * will not run. A done callback may call it (that is how an event loop keeps
 * requests in flight). */
LITH_API int lith_submit(lith *db, lith_request *req);

/* As lith_submit, for a command that must have a transaction of its own:
 * the commands taken before it commit first and are answered, nothing
 * joins its transaction, and the commands after it wait until it has
 * committed (or failed). Being alone it runs exactly once: a rollback of
 * its transaction is its own failure, never a reason to run it again. For
 * a command that holds the writer across several steps fed from elsewhere
 * (lithd's interactive transactions): while it runs, every other command
 * waits, so bound how long it may take. */
LITH_API int lith_submit_alone(lith *db, lith_request *req);

/* Transactions the writer has committed since lith_open (any thread). A
 * reader that takes it before its snapshot begins knows, if it is still
 * the same later on the writer, that nothing committed since: what the
 * snapshot read is what a write would see. */
LITH_API uint64_t lith_commit_count(lith *db);

/* ---- Inside a command (writer thread only) ------------------------------ */

/* The statement for `sql`, prepared once on the write connection and cached;
 * returned reset with its bindings cleared. Owned by lith: do not finalize
 * it; it stays valid until the command returns, and is reset then. Asked for
 * again while the one handed out before is still mid-step (a recursive walk:
 * the caller iterates it while querying the same SQL), lith hands out
 * another statement for the same SQL and never resets one in use; so reset
 * a statement you leave before its end. More than 32 at once for one SQL
 * text is refused (LITH_MISUSE). NULL on a prepare error (the command
 * should return lith_tx_rc(tx)). */
LITH_API sqlite3_stmt *lith_tx_stmt(lith_tx *tx, const char *sql);

/* Run `sql` (one statement, cached) to completion, binding the arguments
 * that follow, described by `types`: one letter per parameter (`types` may
 * be NULL or "" for none). Each letter takes exactly these C types, in this
 * order, from the variable arguments:
 *   'i'  int                         an integer
 *   'I'  int64_t                     a 64-bit integer
 *   'd'  double                      a real
 *   's'  const char *                NUL-terminated UTF-8 text; NULL binds NULL
 *   't'  const char *, size_t        UTF-8 text of that many bytes (NULs
 *                                    included, no terminator needed); a NULL
 *                                    pointer binds NULL
 *   'b'  const void *, size_t        a blob of that many bytes; a NULL
 *                                    pointer binds NULL, a non-NULL one with
 *                                    length 0 the empty blob (x'')
 *   'n'  (nothing)                   NULL
 * Variable arguments are not converted to these types, and the compiler
 * cannot check them: an argument of another size is undefined behaviour
 * that usually binds garbage. The common mistakes: an int (a literal 5, an
 * int variable) for 'I' — write (int64_t)5; an int for a length — write
 * (size_t)n, or pass sizeof / strlen, which are size_t; a float is promoted
 * to double and is fine for 'd', an int is not. The bytes of 's', 't' and
 * 'b' are copied: the caller's buffers are free once the call returns.
 * Rows are discarded. Returns a lith result code ('?' an unknown letter:
 * LITH_MISUSE). */
LITH_API int lith_tx_exec(lith_tx *tx, const char *sql, const char *types, ...);

/* Run `sql` (cached), its parameters bound as lith_tx_exec's (the same
 * letters and C types), and read the first column of its first row as an
 * integer into *out. Returns LITH_OK, LITH_ERROR with the message "no row"
 * when the query returned none, or the statement's error. */
LITH_API int lith_tx_int64(lith_tx *tx, int64_t *out, const char *sql, const char *types, ...);

/* The rows changed by the command's most recent INSERT, UPDATE or DELETE
 * (sqlite3_changes64: not counting what triggers and foreign-key actions
 * changed), through lith_tx_exec or a statement of its own; 0 before the
 * command's first one (never the previous command's). */
LITH_API int64_t lith_tx_changes(lith_tx *tx);

/* The rowid of the row the command's most recent successful INSERT added
 * (sqlite3_last_insert_rowid, with its rules for triggers and WITHOUT ROWID
 * tables); 0 before the command's first one (never the previous
 * command's). */
LITH_API int64_t lith_tx_last_insert_rowid(lith_tx *tx);

/* Run fn(tx, arg) inside a nested SAVEPOINT: a non-OK result undoes exactly
 * what fn did (and the topics it touched) and is returned. */
LITH_API int lith_tx_savepoint(lith_tx *tx, lith_command fn, void *arg);

/* Record that this command changed `topic`; reported to on_commit after the
 * batch commits, unless this command (or the enclosing savepoint) fails. */
LITH_API void lith_tx_touch(lith_tx *tx, int64_t topic);

/* Set this command's error message (printf-style) and return rc, so that a
 * command can end with `return lith_tx_error(tx, LITH_USER, "...", ...);`. */
LITH_API int lith_tx_error(lith_tx *tx, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A ready-made command: runs `arg`, a NUL-terminated SQL text of one or more
 * statements without parameters (sqlite3_exec), e.g.
 * lith_do(db, lith_cmd_sql, "CREATE TABLE ..."). Not cached; for schema
 * changes and one-off statements. */
LITH_API int lith_cmd_sql(lith_tx *tx, void *arg);

/* The last error met by a lith_tx_* call in this command (LITH_OK if none). */
LITH_API int lith_tx_rc(lith_tx *tx);

/* lith's rule on the schema (lith_command_check), now rather than when the
 * command ends: if a statement that creates or alters a table was prepared
 * since the last check, and a table now has a foreign key whose parent is
 * named _lith_*, LITH_ERROR with a message beginning "not authorized" and
 * naming the table (lith_errmsg; lith_tx_rc). Otherwise LITH_OK, at the cost
 * of a flag's test when no such statement was prepared. lith checks every
 * command that prepared one when it ends, and fails it then; a command that
 * runs a client's statements one by one calls this after each, so that the
 * statement fails rather than the whole command (what it made is still
 * there: undo it, e.g. inside lith_tx_savepoint, or fail the command). */
LITH_API int lith_tx_check(lith_tx *tx);

/* Only in a command submitted alone (lith_submit_alone), outside
 * lith_tx_savepoint: end its transaction now and go on in a new one.
 * lith_tx_commit commits what the command did so far (LITH_OK: durable as
 * any commit; a deferred FOREIGN KEY violation left is LITH_CONSTRAINT and
 * nothing changes; a failed COMMIT rolls it back and is returned);
 * lith_tx_rollback undoes it. Either way the command goes on in a fresh
 * transaction, which its return commits or undoes as usual. For a command
 * that runs a client's statements as the client sends them, autocommit and
 * transactions mixed (lithd's interactive transactions). Anywhere else:
 * LITH_MISUSE. */
LITH_API int lith_tx_commit(lith_tx *tx);
LITH_API int lith_tx_rollback(lith_tx *tx);

/* Only where lith_tx_commit may be called: commit what the command did so
 * far (as lith_tx_commit), turn FOREIGN KEY enforcement on or off (SQLite
 * changes it only between transactions) and go on in a new transaction.
 * lith_options.foreign_keys is put back when the command's transaction
 * ends, before any other command runs. With lith_options.foreign_keys
 * set, what the command committed after turning them off must pass
 * PRAGMA foreign_key_check: a violation fails that commit (or the command)
 * with LITH_CONSTRAINT, so none is ever committed. For a client's PRAGMA foreign_keys
 * in autocommit (libSQL's migrate() sends one around its migration). */
LITH_API int lith_tx_foreign_keys(lith_tx *tx, int on);

/* Only where lith_tx_commit may be called: commit what the command did so
 * far (as lith_tx_commit), run VACUUM on the main database (SQLite runs it
 * only outside a transaction: a client's VACUUM alone, as it sends it) and
 * go on in a new transaction. VACUUM is lith's own statement: no
 * authorizer sees it, and the temporary database it attaches is let past
 * an SQLITE_LIMIT_ATTACHED of 0 for it alone. command_timeout_ms bounds
 * it (LITH_INTERRUPTED, nothing of it kept). What it writes goes through
 * the WAL: the file shrinks once a checkpoint has copied all of it (lith's
 * own, after the batch, once the WAL holds checkpoint_pages). Counted as a
 * commit (lith_commit_count): rowids without INTEGER PRIMARY KEY may
 * change. */
LITH_API int lith_tx_vacuum(lith_tx *tx);

/* command_timeout_ms counts afresh from now (nothing if it is 0 or the run
 * is already past it): for a command that waits between its statements for
 * more work (lith_submit_alone), each piece gets the whole limit. */
LITH_API void lith_tx_restart_clock(lith_tx *tx);

/* The write connection, for what the helpers above do not cover. Owned by
 * lith; never close it, never run BEGIN/COMMIT/ROLLBACK on it (refused), and
 * never change its hooks, authorizer or settings through the C API (lith
 * checks what SQL can do, not what C can; see lith_command). */
LITH_API sqlite3 *lith_tx_db(lith_tx *tx);

/* ---- Reads --------------------------------------------------------------- */

typedef int (*lith_reader)(lith_rx *rx, void *arg);

/* Run fn(rx, arg) in one read transaction (one snapshot: it sees whole
 * batches only) on a pooled read-only connection. Never uses the write
 * connection and never waits for the writer; waits for a free reader if all
 * are busy. Returns fn's result, or an error beginning the read; LITH_MISUSE
 * from inside a lith_read callback or a command. Statements fn leaves
 * mid-step are reset when it returns (else the connection would keep
 * reading that old snapshot). */
LITH_API int lith_read(lith *db, lith_reader fn, void *arg);

/* Inside lith_read: the cached statement for `sql` (reset, bindings
 * cleared), owned by lith; another one while the previous is mid-step, as
 * lith_tx_stmt. NULL on error. */
LITH_API sqlite3_stmt *lith_rx_stmt(lith_rx *rx, const char *sql);

/* As lith_read, but gives up waiting for a free reader at `deadline_ms` (on
 * lith_clock_ms()): if every reader of the pool stays in use until then,
 * fn does not run and the call returns LITH_QUEUE_FULL (as lith_do_deadline
 * when the queue stays full: try again later). A deadline already past
 * takes a free reader if there is one and never waits. The deadline bounds
 * only that wait: once fn runs it runs to its end (lith_interrupt stops a
 * read). lith_stats counts the reads, the waits and the give-ups. */
LITH_API int lith_read_deadline(lith *db, lith_reader fn, void *arg, int64_t deadline_ms);

/* Inside lith_read: first column of the first row as an integer; as
 * lith_tx_int64 (the same type letters). */
LITH_API int lith_rx_int64(lith_rx *rx, int64_t *out, const char *sql, const char *types, ...);

/* The read-only connection, owned by lith. */
LITH_API sqlite3 *lith_rx_db(lith_rx *rx);

/* Inside lith_read: 1 if the writer asks this read to end because its
 * snapshot keeps the WAL from starting over: a hold (wal_hold_ms) found it
 * running for wal_hold_ms, or for half of it into the hold, so the WAL can
 * only grow until it ends. A read that lasts between statements (a
 * transaction kept open on a snapshot across requests) checks it every few
 * ms while it waits and, seeing 1, returns ("snapshot too old"); the same
 * hold then lets the WAL start over. A short read may ignore it (it is
 * marked only when something, a busy machine, kept it running that long).
 * 0 otherwise; once 1, it stays 1 for the rest of this lith_read. Any
 * thread that holds rx; lith_stats.reads_too_old counts the reads it said
 * 1 to. */
LITH_API int lith_rx_too_old(lith_rx *rx);

/* Inside lith_read, for a read that ends when told (lith_rx_too_old):
 * from now on the mark also interrupts the statement this read is running
 * (sqlite3_interrupt: it fails SQLITE_INTERRUPT). A progress handler that
 * asks lith_rx_too_old never runs inside one long VDBE step (count(*) of a
 * whole table is one: a second on a large table, the WAL growing all the
 * while). Returns lith_rx_too_old as it was when set (a mark before it
 * interrupts nothing: the caller ends the read). Until the read ends. */
LITH_API int lith_rx_cut_when_too_old(lith_rx *rx);

/* ---- Backup -------------------------------------------------------------- */

/* Write a consistent copy of the database (one snapshot) to `dest_path`
 * while commands keep committing. The copy is written beside dest_path,
 * synced, and renamed over it, so dest_path is either the old file or the
 * complete new copy. Runs on the calling thread; never blocks the writer. */
LITH_API int lith_backup(lith *db, const char *dest_path);

/* As lith_backup, but never replaces anything: if dest_path exists —
 * a file, a symbolic link, a FIFO, a device — LITH_MISUSE and nothing is
 * written; the copy is made in a new temporary file (O_EXCL, file_mode)
 * and linked into place, which fails rather than replace a file that
 * appeared meanwhile. For a server that writes where its clients name. */
LITH_API int lith_backup_new(lith *db, const char *dest_path);

/* Stop what reads the database now, for a program that must stop soon:
 * the statement each lith_read callback is running fails with
 * SQLITE_INTERRUPT (the callback sees it and decides what lith_read
 * returns; a statement it starts afterwards runs as usual), and each
 * lith_backup or lith_backup_new in progress stops at its next step
 * (within milliseconds), removes its partial copy and returns
 * LITH_INTERRUPTED. Commands are not touched. Any thread. */
LITH_API int lith_interrupt(lith *db);

/* lith's own rule for what a command may prepare on the write connection,
 * as SQLite's authorizer sees it (action and its arguments a, b, c, as
 * sqlite3_set_authorizer passes them): transaction control is the
 * writer's, savepoints named lith_* are its own, a PRAGMA may only read or
 * set what a command can undo, and names beginning _lith_ (in any case) are
 * lith's: a command may read such a table but not create, alter or drop a
 * table, view, index or trigger named _lith_*, nor an index or trigger on
 * one, nor INSERT, UPDATE or DELETE there (lithd --dqlite keeps its fence
 * and schema record in _lith_batches and _lith_schema). The authorizer
 * sees only the old name of ALTER TABLE ... RENAME TO, so a rename onto a
 * _lith_ name is not refused here: onto one lith already has it fails as
 * SQLite fails any rename onto a taken name; a table renamed onto a new
 * _lith_ name is the client's to read only. lith_open's migrations are not
 * commands: they may make _lith_ tables. A foreign key onto a _lith_
 * table is refused too, but not here (the authorizer never sees a
 * REFERENCES clause): by lith_command_check, after the statement. Returns
 * SQLITE_OK, or SQLITE_DENY with why[0..cap) saying why. Inside lith it is
 * the first part of every command's authorizer; a server that vets SQL on a
 * connection of its own before the SQL runs elsewhere (lithd --dqlite) calls
 * it so that the same rule holds there. Thread-safe; nothing is kept. */
LITH_API int lith_command_rule(int action, const char *a, const char *b, const char *c, char *why,
                               size_t cap);

/* The half of lith's rule that the authorizer cannot see, on the schema a
 * command's statement left on `conn`: no table of main may have a foreign
 * key whose parent is named _lith_ (in any case, as SQLite matches names).
 * Such a key makes lith's own writes there the client's to refuse: on
 * lithd --dqlite the writer's clean-up of old _lith_batches rows then
 * failed "FOREIGN KEY constraint failed" and every later write with it; a
 * key onto a column that is not unique ("foreign key mismatch") fails
 * lith's next write there at once. Every table is read (a RENAME TO
 * rewrites the foreign keys of the tables that name the one renamed); TEMP
 * tables are not: their foreign keys name TEMP tables only. Returns
 * SQLITE_OK; SQLITE_DENY with why naming the table and its parent; or
 * SQLite's code when the schema could not be read (why says so: fail the
 * statement all the same). The statements it prepares must pass conn's
 * authorizer. Inside lith, the write connection runs it when a command that
 * prepared such a statement ends, and at lith_tx_check; a server that vets
 * SQL elsewhere runs it on its copy of the schema as the statement left it,
 * after each statement for which lith_command_needs_check said so, before
 * the command may commit. */
LITH_API int lith_command_check(sqlite3 *conn, char *why, size_t cap);

/* Non-zero when a statement for which the authorizer saw `action` must be
 * followed by lith_command_check: CREATE TABLE and ALTER TABLE. */
LITH_API int lith_command_needs_check(int action);

/* Non-zero when a statement for which the authorizer saw action (a, b)
 * changes a setting of the connection that lith puts back when the
 * command ends (PRAGMA defer_foreign_keys, recursive_triggers: allowed by
 * lith_command_rule). A server that runs a command's statements on a
 * connection lith does not put back (lithd --dqlite) must put the setting
 * back itself or refuse the statement. */
LITH_API int lith_command_sets_flag(int action, const char *a, const char *b);

/* ---- Statistics ---------------------------------------------------------- */

#define LITH_HIST_BUCKETS 12 /* batch sizes 1, 2-3, 4-7, ..., 1024-2047, 2048+ */

/* Latency histograms count events by duration: bucket 0 holds durations
 * under 1024 ns; above that each doubling is split into 8 buckets (so a
 * bucket is at most 1/8 of its value wide); the last bucket also holds
 * everything longer (over about 68 s). Counts only grow: the difference of
 * two snapshots is the histogram of the time between them. */
#define LITH_LAT_BUCKETS 209

/* The upper bound, in ns, of latency bucket i (exclusive). */
LITH_API uint64_t lith_lat_bucket_upper_ns(int i);

/* The q-quantile (0 < q <= 1) in ns of the events counted in `later` but not
 * in `earlier` (NULL: all of `later`), as the upper bound of the bucket that
 * holds it; 0 if there are none. Both arrays have LITH_LAT_BUCKETS counts. */
LITH_API uint64_t lith_lat_quantile_ns(const uint64_t *later, const uint64_t *earlier, double q);

typedef struct lith_stats {
  uint64_t commands;                      /* commands answered */
  uint64_t batches;                       /* batches run (a batch retried after an abort counts once) */
  uint64_t failed;                        /* commands answered with an error */
  uint64_t retried;                       /* command runs repeated after a transaction abort */
  uint64_t busy;                          /* batches refused at BEGIN by another writer */
  uint64_t batch_hist[LITH_HIST_BUCKETS]; /* batches by size: bucket k holds
                                             sizes [2^k, 2^(k+1)) */
  uint64_t tx_ns_total;                   /* BEGIN IMMEDIATE to end of COMMIT, all batches */
  uint64_t commit_ns_total;               /* the COMMIT statement alone, all batches */
  uint64_t tx_ns_p50;                     /* over the most recent batches (up to 4096) */
  uint64_t tx_ns_p99;
  uint64_t tx_ns_p999;
  uint64_t tx_ns_max;
  uint64_t wait_ns_total; /* time commands spent queued before their batch began */
  uint64_t wait_ns_max;
  uint64_t queue_depth;                /* commands queued now */
  uint64_t wal_pages;                  /* pages in the WAL after the last commit or checkpoint */
  uint64_t checkpoints;                /* checkpoints run (by lith or SQLite's auto mode) */
  uint64_t checkpoint_errors;          /* of them, failed (nothing is lost; retried later) */
  uint64_t checkpoint_ns_total;        /* time in checkpoints, on any thread */
  uint64_t checkpoint_ns_writer;       /* of it, on the writer thread (inside COMMIT in
                                    AUTO mode; the WAL-restarting passes in WRITER) */
  uint64_t tx_lat[LITH_LAT_BUCKETS];   /* transactions by BEGIN-to-end-of-COMMIT time */
  uint64_t wait_lat[LITH_LAT_BUCKETS]; /* commands by time queued before their batch began */
  /* The read pool (lith_read, lith_read_deadline): */
  uint64_t reads;                            /* reads that got a reader (fn ran, or BEGIN failed) */
  uint64_t read_waits;                       /* calls that found every reader in use and waited
                                               (those that then gave up included) */
  uint64_t read_timeouts;                    /* lith_read_deadline calls that gave up (LITH_QUEUE_FULL) */
  uint64_t read_wait_ns_total;               /* time calls spent waiting for a reader */
  uint64_t readers;                          /* connections in the pool (lith_options.readers) */
  uint64_t readers_in_use;                   /* of them, running a read now */
  uint64_t read_wait_lat[LITH_LAT_BUCKETS];  /* calls by time waited for a reader, those that
                                               found one free at once in bucket 0 */
  uint64_t checkpoint_lat[LITH_LAT_BUCKETS]; /* checkpoints lith ran, by time taken (their
                                                total: checkpoint_ns_total) */
  /* The WAL under readers (lith_options.wal_hold_ms): */
  uint64_t wal_file_bytes;      /* the -wal file's size now (wal_pages counts frames not yet copied) */
  uint64_t wal_holds;           /* times new reads were held so that the WAL could start over */
  uint64_t wal_holds_gave_up;   /* of them, ended at their bound (wal_hold_ms, doubled after holds
                                  given up, up to 4 x) with reads still running: the WAL goes on
                                  growing until a later one */
  uint64_t wal_hold_ns_total;   /* time holds lasted */
  uint64_t reads_held;          /* lith_read calls that waited behind a hold */
  uint64_t reads_held_ns_total; /* time they waited */
  uint64_t wal_restart_blocked; /* the WAL was wholly copied with lith's reads held and still did
                                   not start over: a connection lith does not own (another process)
                                   reads it; lith cannot hold those (lith_backup's are lith's: no
                                   hold begins while one runs) */
  uint64_t reads_too_old;       /* lith_read calls told their snapshot is too old (lith_rx_too_old) */
} lith_stats;

/* A snapshot of the counters; `out` is the caller's. Also valid after
 * lith_shutdown (the final figures), until lith_close. */
LITH_API void lith_stats_get(lith *db, lith_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* LITH_H */
