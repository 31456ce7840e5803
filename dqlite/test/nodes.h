/*
 * Test helpers: lith-node processes on loopback (LITH_NODE_PATH, compiled
 * in), a fake node that answers whatever bytes a test gives it, and reads
 * of the cluster through the client (for the tests and bench/dqlite: no
 * cmocka here; errors are returned, the caller asserts).
 */
#ifndef LITH_DQLITE_TEST_NODES_H
#define LITH_DQLITE_TEST_NODES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "client.h"

/* Raft's latency for test nodes: elections within ~0.3-0.6 s. */
#define T_NODE_LATENCY_MS 20

typedef struct t_node {
  int id;
  pid_t pid; /* 0 when not running */
  char address[64];
  char dir[64];
  char line[256];           /* the node's "serving" line */
  int latency_ms;           /* 0: T_NODE_LATENCY_MS */
  const char *const *extra; /* more options, NULL-terminated; the caller's */
  /* keep_out: t_node_start keeps the node's stdout, past its serving line,
   * in out_fd (the read end of its pipe, non-blocking; closed by
   * t_node_stop), for what it prints later; else out_fd is -1. */
  int keep_out;
  int out_fd;
} t_node;

/* A free TCP port on 127.0.0.1 (bound and released: the usual small race). */
int t_free_port(void);

/* Node `id` on a free port, data in ./node<id> (the scratch directory).
 * (Zeroes it: set latency_ms, extra, keep_out after.) */
void t_node_init(t_node *n, int id);

/* Spawn it (join: NULL, or the --join list) and wait up to timeout_ms for its
 * serving line; 0 then, -1 if it exited or said nothing in time (it is
 * killed). The node gets --latency-ms latency_ms (T_NODE_LATENCY_MS when
 * 0) and then the options in extra (NULL-terminated; NULL: none). */
int t_node_start(t_node *n, const char *join, int timeout_ms);

/* Send sig and reap it: its exit status, 128 + signal if a signal ended
 * it, -1 if it did not end within timeout_ms (then SIGKILLed). */
int t_node_stop(t_node *n, int sig, int timeout_ms);

/* With keep_out: append what the node printed since (without waiting) to
 * buf[0..cap), NUL-terminated; returns buf. */
char *t_node_read_out(t_node *n, char *buf, size_t cap);

/* A fake node on 127.0.0.1: accepts one connection, reads the 8-byte
 * handshake and one request, writes `reply` (n bytes), then closes the
 * connection if `close_after`, else keeps it open (silent) until freed. */
typedef struct t_fake t_fake;
t_fake *t_fake_start(const void *reply, size_t n, int close_after);
const char *t_fake_address(const t_fake *f);
void t_fake_free(t_fake *f);

/* A scripted fake node on 127.0.0.1, for what a real node will not do
 * (answer garbage, drip, send forever). It accepts connections one after
 * the other (all of them if `many`, else only the first), reads each one's
 * handshake, then for every request calls respond(arg, call, out): out is
 * an empty buffer for the bytes to write (whole frames or not; the fake
 * writes them as they are), and the return value says what follows:
 *   T_FAKE_NEXT   read the next request;
 *   T_FAKE_CLOSE  close the connection (and accept the next, if many);
 *   d >= 0        call respond again for the same request after d ms,
 *                 with call->repeat one more, writing its bytes too: a
 *                 stream (d 0: as fast as the socket takes them). The
 *                 stream ends when respond returns NEXT or CLOSE, the
 *                 peer goes away, or the fake is freed.
 * respond runs on the fake's thread. */
enum { T_FAKE_NEXT = -1, T_FAKE_CLOSE = -2 };
typedef struct t_fake_call {
  int conn;   /* connections accepted before this one */
  int index;  /* requests before this one on its connection */
  int repeat; /* calls before this one for the same request */
  int type;   /* the request's type (LITH_DQ_REQ_*) */
  const uint8_t *body;
  size_t n;
  const char *address; /* the fake's own "127.0.0.1:PORT" */
} t_fake_call;
typedef int (*t_fake_respond)(void *arg, const t_fake_call *call, lith__dq_buf *out);
t_fake *t_fake_script(t_fake_respond respond, void *arg, int many);
/* Connections accepted so far, and bytes written (any thread). */
int t_fake_connections(const t_fake *f);
uint64_t t_fake_written(const t_fake *f);

/* Frames for a fake to send: a ROWS frame of one INTEGER column "n" with
 * rows 1..nrows (pad bytes of text in a second column "pad" if pad > 0),
 * closed by PART or DONE. */
void t_rows_frame(lith__dq_buf *out, int nrows, size_t pad, int done);

/* The process's resident memory now, in KiB (/proc/self/statm). */
long t_rss_kib(void);

/* The monotonic clock in ms; a sleep. */
int64_t t_ms_now(void);
void t_sleep_ms(int ms);

/* sql's single row's first column as an integer into *out: 0, or -1 with
 * the reason in err[0..errlen). */
int t_query_int(lith__dq_conn *c, uint32_t db, const char *sql, int64_t *out, char *err, size_t errlen);

/* A connection to the leader (asked of `addresses`, "a,b,c") with database
 * `name` open that has answered the read `probe`: after a kill or a
 * restart the first leader found may still lose its election, so it tries
 * again every 50 ms for timeout_ms. The caller's (lith__dq_close); NULL
 * then, the last error in err[0..errlen). */
lith__dq_conn *t_leader_conn(const char *addresses, const char *name, const char *probe, int timeout_ms,
                             uint32_t *db, char *err, size_t errlen);

/* The index in nodes[0..n) of the node the cluster names leader; -1. */
int t_leader_index(const t_node *nodes, int n, const char *addresses);

/* Start each of nodes[0..n) that is not running (pid 0), joining `join`:
 * 0, or -1 at the first that did not start. */
int t_nodes_start_missing(t_node *nodes, int n, const char *join, int timeout_ms);

#endif
