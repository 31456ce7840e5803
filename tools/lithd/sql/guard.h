/*
 * lithd guard — what bounds the cost of one request on a connection.
 *
 * lithd runs its clients' SQL. SQLite's progress handler (sqljson.c) stops a
 * statement between VM steps once the run is past max_run_ms, but one step
 * can take far longer: a single function call (instr() of a 1 MB haystack
 * and a 0.5 MB needle is 7 s inside one step), a sort, count(*) over a big
 * table, integrity_check. The guard closes those gaps, on every connection
 * lith opens for lithd (lith_options.on_connect = lithd_guard_connect):
 *
 *   - SQLite's limits (sqlite3_limit): the largest string or blob a
 *     statement may make (which also bounds printf('%.*c', 999999999, 'x')
 *     and zeroblob), the longest LIKE/GLOB pattern (a LIKE costs up to
 *     value length x pattern length), the largest program, no ATTACH.
 *   - instr(X,Y), replace(X,Y,Z) and trim/ltrim/rtrim(X,Y), whose built-ins
 *     cost up to |X| x |Y| inside one call, are replaced by versions that
 *     give the same answers (instr and replace search with glibc's linear
 *     memmem) and check the run's deadline as they go: past it they fail
 *     with SQLITE_INTERRUPT.
 *   - A watchdog thread calls sqlite3_interrupt() on a connection whose run
 *     is past its deadline, for the long steps that stop on an interrupt
 *     but never call the progress handler (count(*), sorting,
 *     integrity_check). On the writer an interrupt rolls back the
 *     transaction; lith fails that command alone and reruns the others.
 *   - lithd_guard_stop_reads(): when lithd stops, every read still running
 *     is cut the same way, so SIGTERM does not wait for a long query.
 *
 * A run is marked with lithd_guard_begin / lithd_guard_end (sqljson.c does
 * it for each request's statements); a connection without the guard (tests,
 * fuzzers) makes both no-ops.
 */
#ifndef LITHD_GUARD_H
#define LITHD_GUARD_H

#include <stdint.h>

#include <sqlite3.h>

/* The limits put on every connection. A field left 0 takes the default. */
typedef struct lithd_guard_limits {
  int max_value_bytes;  /* SQLITE_LIMIT_LENGTH: largest string or blob;
                             default 1 MiB (1048576) */
  int max_like_pattern; /* SQLITE_LIMIT_LIKE_PATTERN_LENGTH; default 50 */
  int max_program_ops;  /* SQLITE_LIMIT_VDBE_OP: largest compiled statement;
                             default 250000 */
} lithd_guard_limits;

void lithd_guard_limits_default(lithd_guard_limits *lim);

/* Start the watchdog thread (once per process; a second call is a no-op).
 * Returns 0, or an errno value. */
int lithd_guard_start(void);

/* Stop and join the watchdog (after every guarded connection is closed is
 * not required: it only stops interrupting). */
void lithd_guard_stop(void);

/* lith_options.on_connect: set the limits of *ctx (a lithd_guard_limits the
 * caller keeps alive; NULL: the defaults) on conn and register the bounded
 * functions. The guard's per-connection state is freed when conn closes. */
int lithd_guard_connect(void *ctx, sqlite3 *conn);

/* What ended a run early. */
enum { LITHD_GUARD_NONE = 0, LITHD_GUARD_DEADLINE = 1, LITHD_GUARD_STOPPING = 2 };

typedef struct lithd_guard_slot lithd_guard_slot;

/* A run of statements starts on conn, to end by `deadline` (lith_clock_ms);
 * is_read: a read (cut by lithd_guard_stop_reads). Returns the connection's
 * slot, or NULL if conn has no guard. Only the thread using conn calls it. */
lithd_guard_slot *lithd_guard_begin(const sqlite3 *conn, int64_t deadline, int is_read);

/* Whether the run should stop now, and why (LITHD_GUARD_*). s may be NULL. */
int lithd_guard_cut(const lithd_guard_slot *s);

/* The run ended; no interrupt reaches conn for it after this returns. s may
 * be NULL. */
void lithd_guard_end(lithd_guard_slot *s);

/* From now on every read (runs begun with is_read) is cut: those running
 * are interrupted, those beginning fail at once. Any thread. */
void lithd_guard_stop_reads(void);

#endif
