/*
 * bench/transfer_http.h — the transfer workload over HTTP: the closed-loop
 * client of bench/lithd and bench/shards. N keep-alive connections to a
 * lithd on 127.0.0.1, connection i posting owner i's transfers (transfer.h,
 * without the balance read: four statements as one /v1/do command) to its
 * own route, one at a time; and a few idle connections that GET a stats
 * route at the window's two edges (commands and batches: lithd's commands
 * per transaction).
 *
 * Moved out of bench/lithd.c when bench/shards needed the same client with
 * one route per database (/v1/db/NAME/do): one copy, so both measure the
 * same client. Why it is built as it is (one thread, one epoll set, each
 * request built once with fixed-width number slots, only the status line
 * and Content-Length parsed) is in bench/lithd.c's opening comment and
 * bench/notes/lithd-2026-12-07-method.md.
 *
 * Ownership: the client owns its connections, their requests and buffers
 * (bench_th_free releases them); the paths given are copied into the
 * requests. Errors are counted in `errors` and said through `say` (the
 * caller's, with its own prefix), at most a few per run.
 */
#ifndef LITH_BENCH_TRANSFER_HTTP_H
#define LITH_BENCH_TRANSFER_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common.h"
#include "transfer.h"

enum { BENCH_TH_IN_CAP = 16384, BENCH_TH_NSLOT = 11 };

typedef struct bench_th_conn {
  int fd;
  int id;    /* the owner: its accounts and topic; -1 for a stats connection */
  char *req; /* the request bytes (transfer: built once, numbers rewritten) */
  size_t req_len, sent;
  size_t slot[BENCH_TH_NSLOT]; /* offsets in req (ws: in plain) */
  int kind[BENCH_TH_NSLOT];
  int nslot;
  int ws;          /* Hrana over WebSocket: req is one masked frame of plain */
  char *plain;     /* ws: the message's text, numbers rewritten, then masked into req */
  size_t hdr_len;  /* ws: the frame's header in req, its mask key last */
  uint32_t mask;   /* ws: the last mask key (xorshift32) */
  char *path;      /* ws: the upgrade's path */
  int busy;        /* a request is outstanding */
  int want_out;    /* EPOLLOUT registered */
  int64_t t0;      /* when its request was sent */
  int64_t seq, ok; /* transfers sent, answered 200 */
  uint64_t rng;
  int got;                      /* stats: answers received, 0..2 */
  uint64_t cmds[2], batches[2]; /* stats: at the window's edges */
  size_t in_len;
  char in[BENCH_TH_IN_CAP + 1];
} bench_th_conn;

typedef struct bench_th_client {
  int N, nstats;
  bench_th_conn *c;     /* N transfer connections */
  bench_th_conn *stats; /* nstats stats connections */
  bench_say_fn say;
  void *say_ctx;
  int ep, port;
  int64_t ws, we;
  int inflight;      /* transfers outstanding */
  int stats_pending; /* stats requests outstanding */
  bench_lat lat;     /* every transfer answered 200 inside the window */
  uint64_t win_ok;
  int64_t errors;
  pid_t pid;          /* the server, for the CPU snapshots */
  bench_cpu_snap *sn; /* [2]: at the window's edges */
  /* NULL, or called once the connections are open and the window is set,
   * before the first transfer: another client to start beside (bench/lithd's
   * interactive transactions); on_window_end (may be NULL) once every
   * answer is in, before the server is stopped. The caller's. */
  void (*on_window)(void *ctx, int port, int64_t ws, int64_t we);
  void (*on_window_end)(void *ctx);
  void *window_ctx;
} bench_th_client;

/* Room for n transfer and nstats stats connections (none open yet), the
 * latency buffer (lat_cap values, seed). 0, or -1 out of memory (then
 * bench_th_free). */
int bench_th_init(bench_th_client *cl, int n, int nstats, size_t lat_cap, uint64_t seed, bench_say_fn say,
                  void *ctx);
/* Connection i posts owner i's transfers to `path` ("/v1/do"); rng its seed.
 * 0, or -1 out of memory. */
int bench_th_build(bench_th_client *cl, int i, const char *path, uint64_t rng);
/* The same in a format: BENCH_TH_V1 (/v1/do's body) or BENCH_TH_HRANA (a
 * Hrana pipeline as @libsql/client's client.batch(..., "write") sends it,
 * for /v2/pipeline), or BENCH_TH_HRANA_WS: Hrana 3 over a WebSocket to
 * `path` ("/"), opened before the window (handshake offering hrana3, hello,
 * open_stream 1: blocking, http/test/wsclient.c), then each transfer the
 * same batch as a `batch` request on stream 1, one masked text frame with
 * a fresh mask key, its request_id the transfer's seq; an answer is one
 * text frame, `response_ok` with that id, else an error. One request in
 * flight per connection, as over HTTP. */
enum { BENCH_TH_V1, BENCH_TH_HRANA, BENCH_TH_HRANA_WS };
int bench_th_build_as(bench_th_client *cl, int i, const char *path, uint64_t rng, int format);
/* Stats connection k asks GET `path` ("/v1/stats"). 0, or -1. */
int bench_th_build_stats(bench_th_client *cl, int k, const char *path);
/* Open every connection to 127.0.0.1:port and run the closed loops for
 * warmup + seconds, until every answer after the window is back (at most
 * 60 s); the CPU of server `pid` and of the machine into sn[0], sn[1] at
 * the window's edges. 0, or -1 when the client could not run at all. */
int bench_th_run(bench_th_client *cl, int port, pid_t pid, bench_cpu_snap sn[2], double warmup,
                 double seconds);
/* The whole session with a lithd: start it (argv, argv[0] the binary; its
 * stderr to log; 10 s at most for its URL line), bench_th_run against it,
 * bench_th_close, stop it (SIGTERM, which it must answer with exit 0 within
 * 60 s, else SIGKILL); ok[i]: connection i's transfers answered 200. Every
 * failure counts in cl->errors, said through say. */
void bench_th_serve(bench_th_client *cl, char *const argv[], const char *log, bench_cpu_snap sn[2],
                    double warmup, double seconds, int64_t *ok);
/* Close the connections (before stopping the server: it then exits at once). */
void bench_th_close(bench_th_client *cl);
/* bench_th_close, and free everything. */
void bench_th_free(bench_th_client *cl);
/* Commands per transaction between the window's edges over every stats
 * connection; NAN when an edge's answer is missing. */
double bench_th_cmds_per_tx(const bench_th_client *cl);

#endif
