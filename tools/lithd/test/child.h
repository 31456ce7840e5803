/*
 * child.h — helpers shared by lithd's end-to-end tests (test_lithd*.c).
 *
 * Each test binary spawns the built daemon (LITHD_PATH, an absolute path
 * compiled into child.c and the tests) on a scratch database in the
 * current directory, reads the bound port (or notes the Unix socket) from the
 * line lithd prints on stdout, and speaks HTTP/1.1 to it over raw sockets.
 *
 * Two kinds of helpers:
 *   - asserting ones (tl_start, tl_send, tl_http, tl_expect, tl_sql_int,
 *     ...) for a cmocka test's own thread: any surprise fails the test;
 *   - returning ones (tl_connect, tl_stop, tl_conn_*), which never assert:
 *     they are safe from a client thread (cmocka's assertions longjmp, which
 *     only the test's thread may do) and let a test decide what an error
 *     means (after a SIGKILL a closed connection is expected).
 * Every wait is bounded (TL_TIMEOUT_MS unless given), so a stuck daemon fails
 * a test rather than hanging it.
 */
#ifndef LITHD_TEST_CHILD_H
#define LITHD_TEST_CHILD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TL_TIMEOUT_MS 10000

/* One lithd process. */
struct tl_child {
  pid_t pid;          /* -1 when not running */
  int out_fd;         /* its stdout (read end), -1 when closed */
  int port;           /* TCP port; 0 for a --unix only run */
  char db[64];        /* "<name>.db" */
  char unix_path[64]; /* "<name>.sock" for a --unix run, else "" */
  char line[1024];    /* the line lithd printed on stdout at start */
};

/* One answer. head: the status line and headers; body: NUL-terminated. */
struct tl_resp {
  int status;
  char *head;
  char *body;
};

/* tl_start flags. */
#define TL_KEEP_DB 1u /* keep the database files (a restart); default: remove them first */
#define TL_UNIX 2u    /* listen on the Unix socket <name>.sock only (no TCP) */
#define TL_NO_DB 4u   /* no --db <name>.db: extra names the databases (--db NAME=PATH ...) */

/* A NULL-terminated list of extra options: TL_ARGS("--max-body", "200"). */
#define TL_ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* cmocka setup/teardown owning one struct tl_child in *state; the teardown
 * SIGKILLs the daemon if it still runs, so a failed test never leaks it. */
int tl_setup(void **state);
int tl_teardown(void **state);

/* Remove a database and its -wal, -shm and -lithd.lock files. */
void tl_remove_db(const char *db);

/* Spawn `lithd --db <name>.db --listen 127.0.0.1:0 [extra...]` (with TL_NO_DB
 * no --db, with TL_UNIX
 * `--unix <name>.sock` instead of --listen) and wait for its first line on
 * stdout (the port). extra may be NULL. Asserts. */
void tl_start(struct tl_child *c, const char *name, unsigned flags, const char *const *extra);

/* Send sig (0: none) and wait up to timeout_ms for the process to end. Returns
 * its exit code, 128 + the signal if a signal ended it, or -1 if it did not
 * end in time (it is then SIGKILLed). Closes its stdout; c->pid becomes -1. */
int tl_stop(struct tl_child *c, int sig, int timeout_ms);

/* A connected socket to the child (TCP or Unix), or -1. Does not assert. */
int tl_connect(const struct tl_child *c);

/* Open a connection and send one request with "Connection: close"; returns
 * the socket. auth: the Authorization value, or NULL. Asserts. */
int tl_send(const struct tl_child *c, const char *method, const char *path, const char *auth,
            const char *body);

/* Read a whole answer, then the end of the stream (TL_TIMEOUT_MS in all),
 * and close fd. The body is decoded (chunked or not). */
void tl_read(int fd, struct tl_resp *r);

/* tl_read with timeout_ms in all: for an answer that waits on purpose
 * behind a command whose run time the test sets (and a sanitizer slows). */
void tl_read_within(int fd, struct tl_resp *r, int timeout_ms);

/* tl_send + tl_read. */
void tl_http(const struct tl_child *c, const char *method, const char *path, const char *auth,
             const char *body, struct tl_resp *r);

/* One request: its status must be `status` and its body contain `want`
 * (unless NULL); prints the answer when not. */
void tl_expect(const struct tl_child *c, const char *method, const char *path, const char *auth,
               const char *body, int status, const char *want);

void tl_resp_free(struct tl_resp *r);

/* Read everything fd gives until EOF (TL_TIMEOUT_MS per wait) into buf. */
void tl_read_all(int fd, char *buf, size_t cap);

/* Run lithd with args (after the program name; NULL-terminated, TL_ARGS)
 * expecting it to exit by itself (--restore, a refused start); returns its
 * exit status, its stdout and stderr together in out. Asserts. */
int tl_run(const char *const *args, char *out, size_t cap);

/* The number after "name": in a flat JSON object. Asserts it is there. */
uint64_t tl_json_u64(const char *body, const char *name);

/* The value of the Prometheus sample line "<name> <value>" (name with its
 * labels). Asserts it is there. */
uint64_t tl_metric(const char *body, const char *name);

/* SQLite directly, read-only: the first column of the first row of sql (an
 * integer). Asserts. */
int64_t tl_sql_int(const char *db, const char *sql);

/* The resident set of process pid, KiB (/proc/PID/statm). Asserts. */
long tl_rss_kib(pid_t pid);

/* PRAGMA integrity_check on db says "ok". Asserts. */
void tl_assert_integrity(const char *db);

/* n divided by env LITH_TEST_SCALE (a divisor, default 1; at least 1). */
int tl_scaled(int n);

/* ---- Keep-alive client --------------------------------------------------
 * One connection, many requests, one at a time; for client threads (nothing
 * asserts). The connection is opened on the first request and again after
 * the server closed it ("Connection: close" or EOF between requests). */

struct h1c_conn;

struct tl_conn {
  const struct tl_child *c;
  int fd;              /* -1 when not connected */
  struct h1c_conn *rd; /* reads the answers (http/h1client.h); owned, NULL at first */
};

/* tl_conn_request results. */
#define TL_OK 0
#define TL_CLOSED (-1)  /* no connection, or it closed before the whole answer */
#define TL_TIMEOUT (-2) /* no whole answer within timeout_ms */
#define TL_BAD (-3)     /* an answer that is not HTTP/1.1, or no memory */
#define TL_NOCONN (-4)  /* no connection could be opened: the request was not sent */

void tl_conn_init(struct tl_conn *k, const struct tl_child *c);

/* Send one request (keep-alive) and read its answer into *r (to free with
 * tl_resp_free, only on TL_OK). On anything but TL_OK the connection is
 * closed; but for TL_NOCONN, whether the server got the request is unknown. */
int tl_conn_request(struct tl_conn *k, const char *method, const char *path, const char *auth,
                    const char *body, struct tl_resp *r, int timeout_ms);

/* Close the connection and free the buffer. */
void tl_conn_close(struct tl_conn *k);

#endif
