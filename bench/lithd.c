/*
 * bench/lithd — what lithd, one writer behind HTTP/JSON, buys the processes
 * that today each open the database and write to it themselves; and what it
 * costs beside its peers: a Node.js + better-sqlite3 server with lithd's API,
 * and a bare h2o server answering the same POSTs.
 *
 * The workload is bench/writer's transfer, as four statements on the same
 * schema: client c owns accounts 10c..10c+9 and topic c; a transfer debits
 * one of its accounts, credits another, appends (client, seq, src, dst,
 * amount) to the ledger and bumps topic c's version. Balances are seeded so
 * high that the CHECK (balance >= 0) never refuses. (bench/writer's command
 * also reads the balance first; over HTTP that read would be a fifth
 * statement that adds nothing the CHECK does not, so both arms here leave it
 * out.)
 *
 * A cell is (synchronous NORMAL|FULL, clients N). Arms, each on a fresh
 * database seeded with plain SQLite (WAL, then closed so the WAL is empty),
 * removed afterwards:
 *
 *   lithd      the bench spawns `lithd --db PATH --listen 127.0.0.1:0
 *              --synchronous MODE` (default checkpointing: WRITER), reads the
 *              port from the line it prints, and holds N keep-alive HTTP/1.1
 *              connections to it. Each connection is a closed loop: POST
 *              /v1/do with one transfer, wait for the answer, send the next.
 *              SIGTERM at the end; lithd must exit 0.
 *   hrana      the same lithd and client, each transfer as libSQL's client
 *              sends client.batch([...], "write") to POST /v2/pipeline (a
 *              batch with BEGIN IMMEDIATE, the four on conditions, COMMIT,
 *              ROLLBACK unless it committed; then close): what Hrana costs
 *              lithd over its own format, the client kept cheap.
 *   hrana-ws   the same lithd, the same transfer as the same Hrana batch,
 *              over WebSocket: N connections to GET / upgraded (hrana3),
 *              each a hello and one stream, then a closed loop of `batch`
 *              requests on it, one in flight per connection as over HTTP
 *              (bench/transfer_http.c frames them, masked): what the
 *              WebSocket transport costs lithd beside POST /v2/pipeline.
 *              (@libsql/client's batch() over ws:// is a cursor on a stream
 *              of its own; bench/hrana.js's arm W measures that client.)
 *   hrana+tx   the hrana arm, and beside it one more client in a process of
 *              its own holding an interactive write transaction every 10 ms
 *              (see "the interactive-transaction client" below): what a
 *              held writer costs everyone else's batches.
 *   multiproc  N processes (fork), each with its own sqlite3 connection to
 *              the file (busy_timeout 30 s, lithd's pragmas), one BEGIN
 *              IMMEDIATE ... COMMIT per transfer: what multi-process apps do.
 *   node       bench/node/server.js: Node.js and better-sqlite3 serving
 *              lithd's POST /v1/do and GET /v1/stats, one transaction per
 *              request (`node
 *              server.js --db PATH --listen 127.0.0.1:0 --synchronous MODE
 *              [--modules DIR]`), driven and checked exactly as lithd: what
 *              an application server written the usual way does. Left out,
 *              saying why, when there is no node or its modules are missing
 *              (`make deps-bench`): the script exits 2 then, which a trial
 *              start before the runs finds.
 *   h2o        bench/h2o_null: a bare h2o server on libuv, set up as lithd's
 *              HTTP layer sets h2o up, answering every POST /v1/do with a
 *              fixed 200 of lithd's answer's shape; no database, so no sync
 *              (it runs once per N, its results line's sync is null) and no
 *              checks of a file. lithd's CPU per command over its is what
 *              lithd adds to h2o.
 *
 * The client must stay cheap: it shares the machine's CPUs with the server,
 * and every cycle it burns is one the server does not get. So it is one
 * thread and one epoll set over nonblocking sockets (TCP_NODELAY). Each
 * connection's request is built once: every number sits in a fixed-width
 * slot padded with spaces (JSON allows whitespace after a value), so
 * Content-Length never changes and sending a transfer is ten
 * integer-to-text copies and one send(). Answers are read with one recv()
 * per readiness event and parsed only as far as the status line and
 * Content-Length; the body is skipped. An answer that is not 200, a broken
 * connection or a malformed answer is an error. The whole answer must fit
 * in 16 KiB (a transfer's is about 250 bytes).
 *
 * The client is bench/transfer_http.c (shared with bench/shards).
 *
 * A third, idle connection asks GET /v1/stats at the window's two edges:
 * commands/batches between them is the server's mean commands per
 * transaction (lithd's batching; node's is 1 by construction; h2o has no
 * stats). At
 * the same edges the bench reads the CPU time of each of the server's
 * threads (/proc/PID/task/TID/stat: for lithd the loop thread that runs h2o
 * and jansson, lith-writer, lith-waker, lith-checkpoint; for node and h2o
 * their main thread is the loop, the rest "other") and its own, so the
 * tables say where two shared CPUs went. For multiproc it reads the N
 * processes' CPU time the same way.
 *
 * Timing, as in bench/writer: after --warmup seconds a window of --seconds;
 * a command counts when its answer arrives inside the window. Latency is
 * from just before send() (or BEGIN IMMEDIATE) to the complete answer (or the
 * end of COMMIT), so for multiproc it includes the wait for the write lock,
 * and for lithd the time the client thread took to notice the answer.
 * Percentiles are exact over every value unless more were recorded than the
 * buffers hold (then a weighted uniform sample; the results say "sampled").
 * Rounds interleave (bench/harness.h): round r runs every arm of every cell
 * before round r+1, and odd rounds run the arms in reverse, so the machine's
 * drift hits every arm alike. Reported: median over rounds and the range;
 * every run is a line of the results file (bench/results.md).
 *
 * After every arm but h2o the database is checked with plain SQLite:
 * quick_check, money conserved, ledger rows == commands answered OK (in
 * total and per client), topic versions == commands answered OK. Each
 * mismatch is an error; the exit status is 0 only when no arm had an error
 * (a missed target is reported, not an error).
 *
 * This program links SQLite only, not liblith: lithd is the thing measured,
 * as a separate process.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include "common.h"
#include "harness.h"
#include "net.h"
#include "transfer.h"
#include "transfer_http.h"

#ifndef LITHD_PATH
#define LITHD_PATH "build/default/tools/lithd/lithd"
#endif
#ifndef H2O_NULL_PATH
#define H2O_NULL_PATH "build/default/bench/h2o_null"
#endif
#ifndef NODE_SERVER_PATH
#define NODE_SERVER_PATH "bench/node/server.js"
#endif

extern char **environ;

/* ---- the workload (bench/common.h: the transfer, without its balance read) ---- */

enum { BUSY_MS_MULTI = 30000 };

/* ---- configuration ------------------------------------------------------------ */

enum { ARM_LITHD, ARM_MULTI, ARM_HRANA, ARM_HRANA_WS, ARM_HRANA_TX, ARM_NODE, ARM_H2O, NARMS };
static const char *const ARM_NAME[NARMS] = {"lithd",    "multiproc", "hrana", "hrana-ws",
                                            "hrana+tx", "node",      "h2o"};
#define ARM_LIST "lithd,multiproc,hrana,hrana-ws,hrana+tx,node,h2o"

enum { SYNC_NORMAL, SYNC_FULL };
static const char *sync_name(int s) { return s == SYNC_FULL ? "FULL" : "NORMAL"; }
static const char *sync_arg(int s) { return s == SYNC_FULL ? "full" : "normal"; }

enum { MAX_LIST = 16, MAX_CONNS = 4096 };

typedef struct config {
  bench_cli cli; /* --seconds, --warmup, --rounds, --db-dir, --results, --quick */
  int conns[MAX_LIST], nconns;
  int sync[2], nsync;
  int arms[NARMS]; /* enabled */
  const char *lithd, *h2o;
  const char *node_script, *node_modules; /* modules NULL: the script's default */
  char node[4096];                        /* the node binary, found on PATH */
  char node_skip[512];                    /* why the node arm was left out, or "" */
} config;

/* ---- metrics ------------------------------------------------------------------- */

enum {
  M_CMDS_S, /* commands answered OK per second of the window */
  M_P50,    /* call latency, ms */
  M_P99,
  M_MAX,
  M_CMDS_TX, /* commands per transaction over the window (/v1/stats; multiproc: 1) */
  M_CPU_SRV, /* the server's CPU time over the window, in CPUs (1.0 = one CPU busy) */
  M_CPU_T0,  /* ...per thread kind, BENCH_T_LOOP .. BENCH_T_OTHER */
  M_CPU_CLI =
      M_CPU_T0 + BENCH_NTHREAD, /* the client thread (servers) or the N processes (multiproc), in CPUs */
  M_US_SRV,                     /* the server's CPU microseconds per command */
  M_US_CLI,                     /* client CPU microseconds per command */
  M_CPU_ELSE, /* the machine's busy CPU time not accounted above: other processes, interrupts (in CPUs) */
  M_TX_N,     /* hrana+tx: interactive transactions committed inside the window */
  M_TX_P50,   /* ...from BEGIN's request to COMMIT's answer, ms */
  M_TX_P99,
  M_CMDS,    /* commands answered OK inside the window */
  M_US_LOOP, /* the server's loop thread's CPU microseconds per command (h2o: its one thread) */
  NMETRIC
};
static const bench_cpu_slots CPU_SLOTS = {M_CPU_SRV, M_CPU_T0, M_CPU_CLI, M_CPU_ELSE, M_US_SRV, M_US_CLI};

/* The results' names; lithd_* is the server's (node's, h2o's in those arms). */
static const bench_metric METRICS[NMETRIC] = {
    {"cmds_per_s", BENCH_ROLE_RATE},
    {"p50_ms", BENCH_ROLE_P50},
    {"p99_ms", BENCH_ROLE_P99},
    {"max_ms", BENCH_ROLE_NONE},
    {"cmds_per_tx", BENCH_ROLE_NONE},
    BENCH_CPU_METRIC_NAMES("lithd_"),
    {"lithd_us_per_cmd", BENCH_ROLE_CPU_US},
    {"client_us_per_cmd", BENCH_ROLE_NONE},
    {"else_cpu", BENCH_ROLE_NONE},
    {"tx_done", BENCH_ROLE_NONE},
    {"tx_p50_ms", BENCH_ROLE_NONE},
    {"tx_p99_ms", BENCH_ROLE_NONE},
    {"commands", BENCH_ROLE_NONE},
    {"lithd_loop_us_per_cmd", BENCH_ROLE_NONE},
};

/* The cell's dimensions. */
enum { D_SYNC, D_CONNS, NDIM };

/* h2o has no database: no synchronous mode to vary. */
static unsigned arm_ignores(int arm) { return arm == ARM_H2O ? 1u << D_SYNC : 0; }

/* ---- one arm run ------------------------------------------------------------------ */

typedef struct run {
  const config *cfg;
  int arm, sync, N, round;
  char path[4096];
  char log[4200];   /* the server's stderr */
  bench_cell *cell; /* its m[] and errors: the result */
} run;

#define report_error(r, ...) bench_cell_error((r)->cell, __VA_ARGS__)

/* ---- the database ------------------------------------------------------------------ */

/* lithd's connection settings (lith_options_default): the baseline gets the same. */
static bench_pragmas pragmas(int sync) {
  bench_pragmas p = {sync == SYNC_FULL, 16384, 0, 1};
  return p;
}

static void say_error(void *ctx, const char *msg) { report_error((run *)ctx, "%s", msg); }

/* A fresh database for N clients (bench_transfer_create). */
static int create_db(const char *path, int N) {
  bench_pragmas p = pragmas(SYNC_NORMAL);
  return bench_transfer_create(path, N, &p);
}

/* Check the database after an arm; `ok` has N entries, the commands answered
 * OK per client. Returns the number of mismatches. */
static int64_t verify_db(run *r, const int64_t *ok) {
  bench_pragmas p = pragmas(SYNC_NORMAL);
  return bench_transfer_check(r->path, r->N, ok, &p, "client", say_error, r);
}

static void fill_latency(bench_cell *res, bench_lat *const *bufs, int nb) {
  bench_cell_latency(res, bufs, nb, M_P50, M_P99, -1);
  res->m[M_MAX] = bench_lat_max_ms(bufs, nb);
}

/* ---- the interactive-transaction client (arm hrana+tx) --------------------------------- */

/* What the issue asks of Hrana's interactive transactions: one more client,
 * in a process of its own (so its cost is not the batch client's), begins
 * a write transaction every TX_EVERY_MS and holds it across two pipelines
 * as @libsql/client's transaction("write") does: BEGIN IMMEDIATE and a read
 * in the first (the answer carries the stream's baton), a write, COMMIT and
 * close in the second. Its write changes nothing (balance = balance on
 * account 0), so the database's checks stay those of the batches. The
 * batches' p99 beside it against the hrana arm's without it is the cost. */
enum { TX_EVERY_MS = 10, TX_LAT_CAP = 65536 };

typedef struct tx_shared {
  int64_t ws; /* the window */
  int64_t done, win_done, errors;
  char msg[256];
  bench_lat lat; /* inside the window; its values follow the struct */
} tx_shared;

typedef struct tx_client {
  tx_shared *sh; /* MAP_SHARED */
  pid_t pid;     /* the process, 0 before it starts */
} tx_client;

/* One POST of body to /v2/pipeline on blocking fd; the answer's body
 * (NUL-terminated) in in[], its offset in *body. 0, or -1 with why in msg. */
static int tx_post(int fd, const char *body, char *in, size_t cap, size_t *off, char *msg, size_t msgsz) {
  char head[160];
  int hn = snprintf(head, sizeof head,
                    "POST /v2/pipeline HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    "Content-Length: %zu\r\n\r\n",
                    strlen(body));
  if (write(fd, head, (size_t)hn) != hn || write(fd, body, strlen(body)) != (ssize_t)strlen(body)) {
    snprintf(msg, msgsz, "send: %s", strerror(errno));
    return -1;
  }
  size_t len = 0;
  bench_answer a;
  int rc;
  while ((rc = bench_http_recv(fd, in, &len, cap, &a)) == 0)
    ;
  if (rc < 0) {
    snprintf(msg, msgsz, "the answer: %s", rc == -2 ? "not HTTP" : errno ? strerror(errno) : "closed");
    return -1;
  }
  in[a.total] = '\0';
  *off = a.head_len;
  if (a.status != 200 || strstr(in + a.head_len, "\"type\":\"error\"") != NULL) {
    snprintf(msg, msgsz, "%d %.200s", a.status, in + a.head_len);
    return -1;
  }
  return 0;
}

static void tx_main(tx_shared *sh, int port, int64_t we) {
  char in[16384], body[512], msg[256], baton[128];
  int fd = bench_dial(port, 0);
  if (fd < 0) {
    snprintf(sh->msg, sizeof sh->msg, "connect: %s", strerror(errno));
    sh->errors++;
    return;
  }
  int64_t next = bench_now_ns();
  while (bench_now_ns() < we) {
    bench_sleep_until(next);
    int64_t t0 = bench_now_ns();
    next = t0 + (int64_t)TX_EVERY_MS * 1000000;
    size_t off = 0;
    int rc = tx_post(fd,
                     "{\"baton\":null,\"requests\":[{\"type\":\"execute\",\"stmt\":{\"sql\":\"BEGIN "
                     "IMMEDIATE\"}},{\"type\":\"execute\",\"stmt\":{\"sql\":\"SELECT balance FROM accounts "
                     "WHERE id = 0\"}}]}",
                     in, sizeof in - 1, &off, msg, sizeof msg);
    const char *b = rc == 0 ? strstr(in + off, "\"baton\":\"") : NULL;
    const char *e = b ? strchr(b + 9, '"') : NULL;
    if (rc == 0 && (e == NULL || (size_t)(e - b - 9) >= sizeof baton)) {
      snprintf(msg, sizeof msg, "no baton in %.200s", in + off);
      rc = -1;
    }
    if (rc == 0) {
      memcpy(baton, b + 9, (size_t)(e - b - 9));
      baton[e - b - 9] = '\0';
      snprintf(body, sizeof body,
               "{\"baton\":\"%s\",\"requests\":[{\"type\":\"execute\",\"stmt\":{\"sql\":\"UPDATE "
               "accounts SET balance = balance WHERE id = 0\"}},{\"type\":\"execute\",\"stmt\":{\"sql\":"
               "\"COMMIT\"}},{\"type\":\"close\"}]}",
               baton);
      rc = tx_post(fd, body, in, sizeof in - 1, &off, msg, sizeof msg);
    }
    int64_t t1 = bench_now_ns();
    if (rc != 0) {
      if (sh->errors++ == 0)
        snprintf(sh->msg, sizeof sh->msg, "%s", msg);
      close(fd); /* a fresh connection, as a client would after a failure */
      if ((fd = bench_dial(port, 0)) < 0)
        return;
      continue;
    }
    sh->done++;
    if (t0 >= sh->ws && t1 <= we) {
      sh->win_done++;
      bench_lat_add(&sh->lat, (uint64_t)(t1 - t0));
    }
  }
  close(fd);
}

/* bench_th_client's on_window: fork the client, which runs to the window's end. */
static void tx_start(void *ctx, int port, int64_t ws, int64_t we) {
  tx_client *tc = ctx;
  tc->sh->ws = ws;
  pid_t pid = fork();
  if (pid == 0) {
    tx_main(tc->sh, port, we);
    _exit(0);
  }
  tc->pid = pid > 0 ? pid : 0;
  if (pid < 0) {
    tc->sh->errors++;
    snprintf(tc->sh->msg, sizeof tc->sh->msg, "fork: %s", strerror(errno));
  }
}

static void tx_wait(void *ctx) {
  tx_client *tc = ctx;
  if (tc->pid > 0)
    waitpid(tc->pid, NULL, 0);
  tc->pid = 0;
}

/* ---- the server arms ---------------------------------------------------------------- */

/* The command line of the arm's server into argv (room for 12). */
static void server_argv(const run *r, char **argv) {
  const config *c = r->cfg;
  int k = 0;
  if (r->arm == ARM_H2O) {
    argv[k++] = (char *)c->h2o;
  } else {
    if (r->arm == ARM_NODE) {
      argv[k++] = (char *)c->node;
      argv[k++] = (char *)c->node_script;
    } else {
      argv[k++] = (char *)c->lithd;
    }
    argv[k++] = "--db";
    argv[k++] = (char *)r->path;
    argv[k++] = "--synchronous";
    argv[k++] = (char *)sync_arg(r->sync);
  }
  argv[k++] = "--listen";
  argv[k++] = "127.0.0.1:0";
  if (r->arm == ARM_NODE && c->node_modules) {
    argv[k++] = "--modules";
    argv[k++] = (char *)c->node_modules;
  }
  argv[k] = NULL;
}

/* The arms with a server: lithd over /v1/do (format BENCH_TH_V1),
 * /v2/pipeline (BENCH_TH_HRANA) or a WebSocket (BENCH_TH_HRANA_WS); node and
 * h2o over /v1/do. h2o has no /v1/stats (node's says one transaction per
 * request, as it is built). */
static void arm_server(run *r, bench_cell *res, int format, int with_tx) {
  const config *cfg = r->cfg;
  int stats = r->arm != ARM_H2O;
  bench_th_client cl;
  bench_cpu_snap sn[2];
  int64_t *ok = calloc((size_t)r->N, sizeof *ok);
  memset(sn, 0, sizeof sn);
  size_t cap = bench_lat_cap(1, cfg->cli.seconds);
  int ready =
      bench_th_init(&cl, r->N, stats, cap, bench_rng_seed((uint64_t)r->round, 77), say_error, r) == 0 && ok &&
      (!stats || bench_th_build_stats(&cl, 0, "/v1/stats") == 0);
  for (int i = 0; ready && i < r->N; i++)
    ready = bench_th_build_as(&cl, i,
                              format == BENCH_TH_HRANA      ? "/v2/pipeline"
                              : format == BENCH_TH_HRANA_WS ? "/"
                                                            : "/v1/do",
                              bench_rng_seed((uint64_t)i, (uint64_t)r->round * 1000 + 17), format) == 0;
  tx_client tc = {0};
  size_t tx_bytes = sizeof(tx_shared) + (size_t)TX_LAT_CAP * sizeof(uint64_t);
  if (ready && with_tx) {
    void *m = mmap(NULL, tx_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
      ready = 0;
    } else {
      tc.sh = m;
      bench_lat_wrap(&tc.sh->lat, (uint64_t *)(void *)((char *)m + sizeof(tx_shared)), TX_LAT_CAP,
                     bench_rng_seed((uint64_t)r->round, 99));
      cl.on_window = tx_start;
      cl.on_window_end = tx_wait;
      cl.window_ctx = &tc;
    }
  }
  if (!ready) {
    report_error(r, "out of memory");
    res->errors++;
  } else {
    char *argv[12];
    server_argv(r, argv);
    bench_th_serve(&cl, argv, r->log, sn, cfg->cli.warmup, cfg->cli.seconds, ok);
    if (tc.sh != NULL) {
      static const double QS[2] = {0.50, 0.99};
      bench_lat *lb[1] = {&tc.sh->lat};
      bench_lat_sum ts;
      res->m[M_TX_N] = (double)tc.sh->win_done;
      if (bench_lat_merge(lb, 1, QS, 2, &ts) == 0) {
        res->m[M_TX_P50] = ts.q[0] / 1e6;
        res->m[M_TX_P99] = ts.q[1] / 1e6;
      }
      if (tc.sh->errors) {
        report_error(r, "interactive transactions: %lld failed, the first: %s", (long long)tc.sh->errors,
                     tc.sh->msg);
        res->errors += tc.sh->errors;
      }
    }
    res->errors += cl.errors;
    res->m[M_CMDS] = (double)cl.win_ok;
    res->m[M_CMDS_S] = (double)cl.win_ok / cfg->cli.seconds;
    bench_lat *bufs[1] = {&cl.lat};
    fill_latency(res, bufs, 1);
    res->m[M_CMDS_TX] = stats ? bench_th_cmds_per_tx(&cl) : NAN;
    bench_cpu_fill(sn, cfg->cli.seconds, cl.win_ok, &CPU_SLOTS, res->m);
    if (cl.win_ok) /* the HTTP side alone: what a bare h2o does all of */
      res->m[M_US_LOOP] = res->m[M_CPU_T0 + BENCH_T_LOOP] * cfg->cli.seconds / (double)cl.win_ok * 1e6;
    if (r->arm != ARM_H2O) /* the server has exited (0 on SIGTERM, else an error above): its file */
      res->errors += verify_db(r, ok);
  }
  bench_th_free(&cl);
  free(ok);
  if (tc.sh != NULL)
    munmap(tc.sh, tx_bytes);
}

/* ---- the multi-process baseline ------------------------------------------------------ */

/* Shared (MAP_SHARED) between the bench and its N processes: the window, and
 * one slot per process that only that process writes until it exits. */
typedef struct mp_slot {
  int64_t ok, win_ok, errors;
  bench_lat lat; /* its values live in the shared mapping too */
  char msg[256]; /* the first error */
} mp_slot;

typedef struct mp_shared {
  int64_t ws, we;
  mp_slot slot[];
} mp_shared;

static void slot_error(mp_slot *s, const char *what, sqlite3 *conn, int rc) {
  s->errors++;
  if (!s->msg[0])
    snprintf(s->msg, sizeof s->msg, "%s: %s (%d)", what, conn ? sqlite3_errmsg(conn) : sqlite3_errstr(rc),
             rc);
}

/* One process of the multiproc arm: open, say ready, wait for the gate (EOF
 * on go_fd), run until the window's end. Never returns. */
static void mp_child(run *r, mp_shared *sh, int id, int ready_fd, int go_fd) {
  mp_slot *s = &sh->slot[id];
  sqlite3 *conn = NULL;
  bench_stmts st;
  char b;
  uint64_t rng = bench_rng_seed((uint64_t)id, (uint64_t)r->round * 1000 + 29);
  int64_t seq = 0;
  memset(&st, 0, sizeof st);
  bench_pragmas p = pragmas(r->sync);
  int ready = bench_open_plain(r->path, &p, BUSY_MS_MULTI, &conn) == SQLITE_OK &&
              bench_stmts_prepare(conn, &st) == SQLITE_OK;
  if (!ready)
    slot_error(s, "opening its connection", conn, SQLITE_ERROR);
  b = ready ? '1' : '0';
  if (write(ready_fd, &b, 1) != 1)
    _exit(3);
  while (read(go_fd, &b, 1) < 0 && errno == EINTR)
    ; /* EOF: the gate is open */
  int64_t ws = sh->ws, we = sh->we;
  while (ready) {
    bench_transfer t = bench_transfer_make(id, ++seq, &rng);
    int64_t t0 = bench_now_ns();
    if (t0 >= we)
      break;
    int rc = bench_transfer_tx(conn, &st, &t, 0, NULL); /* no balance read: see the top */
    int64_t t1 = bench_now_ns();
    if (rc != SQLITE_OK) {
      slot_error(s, "transfer", conn, rc);
      continue;
    }
    s->ok++;
    if (t1 >= ws && t1 < we) {
      s->win_ok++;
      bench_lat_add(&s->lat, (uint64_t)(t1 - t0));
    }
  }
  bench_stmts_finalize(&st);
  if (conn && sqlite3_close(conn) != SQLITE_OK)
    slot_error(s, "close", conn, SQLITE_ERROR);
  _exit(0);
}

/* The N processes' CPU seconds; -1 when /proc fails. */
static double children_cpu(const pid_t *pids, int n) {
  char path[64];
  double total = 0;
  for (int i = 0; i < n; i++) {
    if (pids[i] <= 0)
      continue;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pids[i]);
    double s = bench_stat_cpu_s(path, NULL, 0);
    if (s < 0)
      return -1;
    total += s;
  }
  return total;
}

static void arm_multi(run *r, bench_cell *res) {
  const config *cfg = r->cfg;
  uint64_t commands = 0; /* answered OK inside the window */
  int N = r->N, ready_p[2] = {-1, -1}, go_p[2] = {-1, -1}, started = 0;
  size_t cap = bench_lat_cap(N, cfg->cli.seconds);
  size_t bytes = sizeof(mp_shared) + (size_t)N * sizeof(mp_slot) + (size_t)N * cap * sizeof(uint64_t);
  pid_t *pids = calloc((size_t)N, sizeof *pids);
  int64_t *ok = calloc((size_t)N, sizeof *ok);
  bench_lat **bufs = calloc((size_t)N, sizeof *bufs);
  mp_shared *sh = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED)
    sh = NULL;
  if (!pids || !ok || !bufs || !sh) {
    report_error(r, "out of memory");
    res->errors++;
    goto out;
  }
  uint64_t *vals = (uint64_t *)(void *)((char *)sh + sizeof(mp_shared) + (size_t)N * sizeof(mp_slot));
  for (int i = 0; i < N; i++) {
    bufs[i] = &sh->slot[i].lat;
    bench_lat_wrap(bufs[i], vals + (size_t)i * cap, cap, bench_rng_seed((uint64_t)i, 4242));
  }
  if (pipe2(ready_p, O_CLOEXEC) != 0 || pipe2(go_p, O_CLOEXEC) != 0) {
    report_error(r, "pipe: %s", strerror(errno));
    res->errors++;
    goto out;
  }
  fflush(stdout);
  fflush(stderr);
  for (int i = 0; i < N; i++) {
    pid_t p = fork();
    if (p == 0) {
      close(ready_p[0]);
      close(go_p[1]);
      mp_child(r, sh, i, ready_p[1], go_p[0]);
    }
    if (p < 0) {
      report_error(r, "fork: %s", strerror(errno));
      res->errors++;
      break;
    }
    pids[i] = p;
    started++;
  }
  close(ready_p[1]);
  ready_p[1] = -1;
  for (int got = 0; got < started;) {
    char buf[256];
    ssize_t n = read(ready_p[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break; /* a process died before it said ready: waitpid reports it */
    got += (int)n;
  }
  sh->ws = bench_now_ns() + (int64_t)(cfg->cli.warmup * 1e9);
  sh->we = sh->ws + (int64_t)(cfg->cli.seconds * 1e9);
  close(go_p[1]); /* opens the gate: every read() returns 0 */
  go_p[1] = -1;

  bench_sleep_until(sh->ws);
  int64_t t0 = bench_now_ns();
  double c0 = children_cpu(pids, started), m0 = bench_machine_busy_s();
  bench_sleep_until(sh->we);
  int64_t t1 = bench_now_ns();
  double c1 = children_cpu(pids, started), m1 = bench_machine_busy_s();
  if (c0 >= 0 && c1 >= 0 && t1 > t0) {
    double dt = (double)(t1 - t0) / 1e9;
    res->m[M_CPU_CLI] = (c1 - c0) / dt;
    if (m0 >= 0 && m1 >= 0)
      res->m[M_CPU_ELSE] = (m1 - m0) / dt - res->m[M_CPU_CLI];
  }

  for (int i = 0; i < started; i++) {
    int st = 0;
    if (waitpid(pids[i], &st, 0) != pids[i] || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      report_error(r, "process %d ended badly (status 0x%x)", i, st);
      res->errors++;
    }
  }
  for (int i = 0; i < N; i++) {
    mp_slot *s = &sh->slot[i];
    ok[i] = s->ok;
    commands += (uint64_t)s->win_ok;
    res->errors += s->errors;
    if (s->msg[0])
      report_error(r, "process %d: %s", i, s->msg);
  }
  res->m[M_CMDS] = (double)commands;
  res->m[M_CMDS_S] = (double)commands / cfg->cli.seconds;
  if (commands)
    res->m[M_US_CLI] = res->m[M_CPU_CLI] * cfg->cli.seconds / (double)commands * 1e6;
  res->m[M_CMDS_TX] = 1;
  fill_latency(res, bufs, N);
  res->errors += verify_db(r, ok);
out:
  for (int k = 0; k < 2; k++) {
    if (ready_p[k] >= 0)
      close(ready_p[k]);
    if (go_p[k] >= 0)
      close(go_p[k]);
  }
  if (sh)
    munmap(sh, bytes);
  free(pids);
  free(ok);
  free(bufs);
}

/* ---- one cell: the harness's callback ------------------------------------------------ */

static void run_cell(bench_cell *cell) {
  const config *c = cell->ctx;
  run r = {.cfg = c,
           .arm = cell->arm,
           .sync = cell->val[D_SYNC],
           .N = cell->val[D_CONNS],
           .round = cell->round,
           .cell = cell};
  snprintf(r.path, sizeof r.path, "%s/%s-%s-n%d-r%d.db", c->cli.db_dir, ARM_NAME[r.arm], sync_name(r.sync),
           r.N, r.round + 1);
  snprintf(r.log, sizeof r.log, "%s/server-stderr.log", c->cli.db_dir);
  if (r.arm == ARM_H2O) { /* no database */
    arm_server(&r, cell, BENCH_TH_V1, 0);
    return;
  }
  if (create_db(r.path, r.N) != 0) {
    report_error(&r, "cannot create %s", r.path);
    cell->errors++;
  } else if (r.arm == ARM_MULTI) {
    arm_multi(&r, cell);
  } else {
    int format = r.arm == ARM_HRANA || r.arm == ARM_HRANA_TX ? BENCH_TH_HRANA
                 : r.arm == ARM_HRANA_WS                     ? BENCH_TH_HRANA_WS
                                                             : BENCH_TH_V1;
    arm_server(&r, cell, format, r.arm == ARM_HRANA_TX);
  }
  bench_remove_db(r.path);
}

/* ---- the node arm: can it run? ------------------------------------------------------------- */

/* The first executable `name` on PATH into out (posix_spawn does not search
 * PATH). 1 when found. */
static int find_on_path(const char *name, char *out, size_t n) {
  const char *p = getenv("PATH");
  for (p = p ? p : "/usr/local/bin:/usr/bin:/bin"; *p;) {
    size_t len = strcspn(p, ":");
    snprintf(out, n, "%.*s/%s", len ? (int)len : 1, len ? p : ".", name);
    if (access(out, X_OK) == 0)
      return 1;
    p += len + (p[len] == ':');
  }
  return 0;
}

/* A trial start of the node server on a scratch file, before the runs:
 * whether its modules are there is known only to the script, which exits 2
 * with a line saying why when they are not. 1 when that happened (its
 * stderr's last line into c->node_skip), else 0 (it listened and was stopped, or it failed
 * otherwise: the runs then say why, as errors). */
static int node_missing_modules(config *c, const char *log) {
  run r = {.cfg = c, .arm = ARM_NODE, .sync = SYNC_NORMAL};
  char *argv[12], out[1024] = "";
  int pfd[2], st = 0;
  size_t len = 0;
  pid_t pid;
  posix_spawn_file_actions_t fa;
  snprintf(r.path, sizeof r.path, "%s/node-trial.db", c->cli.db_dir);
  server_argv(&r, argv);
  if (pipe2(pfd, O_CLOEXEC) != 0)
    return 0;
  int rc = posix_spawn_file_actions_init(&fa);
  if (rc == 0 && (rc = posix_spawn_file_actions_adddup2(&fa, pfd[1], STDOUT_FILENO)) == 0 &&
      (rc = posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, log, O_WRONLY | O_CREAT | O_TRUNC, 0644)) ==
          0)
    rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(pfd[1]);
  if (rc != 0) {
    close(pfd[0]);
    return 0;
  }
  /* its first line (the URL), or EOF when it exits; 30 s at most */
  struct pollfd p = {pfd[0], POLLIN, 0};
  ssize_t got;
  while (!memchr(out, '\n', len) && len < sizeof out - 1 && poll(&p, 1, 30000) == 1 &&
         (got = read(pfd[0], out + len, sizeof out - 1 - len)) > 0)
    len += (size_t)got;
  close(pfd[0]);
  kill(pid, strstr(out, "http://127.0.0.1:") ? SIGTERM : SIGKILL); /* no effect once it has exited */
  waitpid(pid, &st, 0);
  bench_remove_db(r.path);
  FILE *f = WIFEXITED(st) && WEXITSTATUS(st) == 2 ? fopen(log, "r") : NULL;
  if (!f)
    return 0;
  char line[sizeof c->node_skip];
  snprintf(c->node_skip, sizeof c->node_skip, "%s exited 2", c->node_script);
  while (fgets(line, sizeof line, f)) /* its last line says why */
    if ((line[strcspn(line, "\n")] = '\0', line[0]))
      memcpy(c->node_skip, line, sizeof line);
  fclose(f);
  return 1;
}

/* Leave the node arm out, saying why in c->node_skip, when node, the
 * script or its modules are missing. */
static void node_check(config *c, const char *log) {
  if (!c->arms[ARM_NODE])
    return;
  if (access(c->node_script, R_OK) != 0)
    snprintf(c->node_skip, sizeof c->node_skip, "no %s (%s)", c->node_script, strerror(errno));
  else if (!find_on_path("node", c->node, sizeof c->node))
    snprintf(c->node_skip, sizeof c->node_skip, "no node on PATH");
  else
    node_missing_modules(c, log);
  if (c->node_skip[0])
    c->arms[ARM_NODE] = 0;
}

/* ---- the tables ------------------------------------------------------------------------ */

static void fmt_ms(char *buf, size_t n, double ms) { bench_fmt_ms(buf, n, ms, 1); }
static void fmt_pct(char *buf, size_t n, double cpus) { bench_fmt(buf, n, "%.0f%%", cpus * 100); }

static bench_agg agg(const bench_harness *h, int arm, int si, int ni, int metric) {
  int idx[NDIM] = {si, ni};
  return bench_harness_agg(h, arm, idx, metric);
}
static double med(const bench_harness *h, int arm, int si, int ni, int metric) {
  return agg(h, arm, si, ni, metric).med;
}
static int ran(const bench_harness *h, int arm, int si, int ni) {
  int idx[NDIM] = {si, ni};
  return bench_harness_ran(h, arm, idx);
}
/* arm's median of metric over base's. */
static double ratio(const bench_harness *h, int arm, int base, int si, int ni, int metric) {
  int idx[NDIM] = {si, ni};
  return bench_harness_ratio(h, arm, base, idx, metric);
}

static void table_row(const bench_harness *h, const config *c, int arm, int si, int ni) {
  char p50[32], p99[32], mx[32], tx[32], srv[32], cli[32], oth[32], rt[32], rl[32], rh[32];
  int idx[NDIM] = {si, ni};
  bench_agg cs = agg(h, arm, si, ni, M_CMDS_S);
  fmt_ms(p50, sizeof p50, med(h, arm, si, ni, M_P50));
  fmt_ms(p99, sizeof p99, med(h, arm, si, ni, M_P99));
  fmt_ms(mx, sizeof mx, agg(h, arm, si, ni, M_MAX).hi);
  fmt_pct(srv, sizeof srv, med(h, arm, si, ni, M_CPU_SRV));
  fmt_pct(cli, sizeof cli, med(h, arm, si, ni, M_CPU_CLI));
  fmt_pct(oth, sizeof oth, agg(h, arm, si, ni, M_CPU_ELSE).hi);
  bench_fmt(tx, sizeof tx, "%.1f", med(h, arm, si, ni, M_CMDS_TX));
  snprintf(rt, sizeof rt, " ");
  snprintf(rl, sizeof rl, " ");
  snprintf(rh, sizeof rh, " ");
  if (arm != ARM_MULTI && arm != ARM_H2O)
    bench_fmt(rt, sizeof rt, "%.2f×", ratio(h, arm, ARM_MULTI, si, ni, M_CMDS_S));
  if (arm == ARM_HRANA || arm == ARM_HRANA_TX || arm == ARM_HRANA_WS)
    bench_fmt(rl, sizeof rl, "%.2f×", ratio(h, arm, ARM_LITHD, si, ni, M_CMDS_S));
  if (arm == ARM_HRANA_WS)
    bench_fmt(rh, sizeof rh, "%.2f×", ratio(h, arm, ARM_HRANA, si, ni, M_CMDS_S));
  printf("| %d | %s | %s (%s–%s) | %s | %s | %s | %s | %lld | %s | %s | %s | %s | %s | %s |\n", c->conns[ni],
         ARM_NAME[arm], BENCH_NUM("%.0f", cs.med), BENCH_NUM("%.0f", cs.lo), BENCH_NUM("%.0f", cs.hi), tx,
         p50, p99, mx, (long long)bench_harness_errors(h, arm, idx), srv, cli, oth, rt, rl, rh);
}

static void print_tables(const bench_harness *h, const config *c) {
  for (int si = 0; si < c->nsync; si++) {
    printf("\n### synchronous=%s\n\n", sync_name(c->sync[si]));
    printf("| N | arm | cmd/s median (min–max) | cmd/tx | p50 ms | p99 ms | max ms | err | server CPU | "
           "client CPU "
           "| else CPU | ÷multiproc | ÷lithd | ÷hrana |\n");
    printf("|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for (int ni = 0; ni < c->nconns; ni++)
      for (int arm = 0; arm < NARMS; arm++)
        if (ran(h, arm, si, ni))
          table_row(h, c, arm, si, ni);
  }
  printf(
      "\nColumns: median over rounds (cmd/s also min–max; max ms: the worst round). Latency from sending "
      "the\n"
      "request (multiproc: BEGIN IMMEDIATE) to the whole answer (end of COMMIT). cmd/tx: lithd's commands "
      "per\n"
      "transaction over the window (GET /v1/stats: node's is 1). CPU in %% of one CPU over the\n"
      "window (the machine has %ld): the server's process (lithd, node or h2o_null); the client thread or\n"
      "the N processes (multiproc); else: the rest of the machine's busy time in the worst round (other\n"
      "processes, interrupts: noise if much above 0).\n"
      "÷multiproc: the arm's median cmd/s over multiproc's; ÷lithd: hrana's over lithd's (/v1/do);\n"
      "÷hrana: hrana-ws's over hrana's (the same batch over a WebSocket against POST /v2/pipeline).\n"
      "hrana+tx: the hrana arm with one more client, a process of its own, that holds an interactive write\n"
      "transaction (two pipelines, as transaction(\"write\")) every %d ms. node: Node.js + better-sqlite3\n"
      "with lithd's /v1/do. h2o: a bare h2o server answering the POSTs without a database (no sync: the\n"
      "same run in both tables).\n",
      sysconf(_SC_NPROCESSORS_ONLN), TX_EVERY_MS);
  if (!c->arms[ARM_HRANA_TX])
    return;
  printf("\n### the interactive transactions' cost to the batches (hrana without, hrana+tx with)\n\n");
  printf("| sync | N | batch p99 ms without | with | batch cmd/s without | with | tx done | tx p50 ms | tx "
         "p99 ms |\n");
  printf("|---|--:|--:|--:|--:|--:|--:|--:|--:|\n");
  for (int si = 0; si < c->nsync; si++)
    for (int ni = 0; ni < c->nconns; ni++) {
      if (!ran(h, ARM_HRANA_TX, si, ni))
        continue;
      char p0[32], p1[32], t50[32], t99[32];
      fmt_ms(p0, sizeof p0, med(h, ARM_HRANA, si, ni, M_P99));
      fmt_ms(p1, sizeof p1, med(h, ARM_HRANA_TX, si, ni, M_P99));
      fmt_ms(t50, sizeof t50, med(h, ARM_HRANA_TX, si, ni, M_TX_P50));
      fmt_ms(t99, sizeof t99, med(h, ARM_HRANA_TX, si, ni, M_TX_P99));
      printf("| %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", sync_name(c->sync[si]), c->conns[ni], p0, p1,
             BENCH_NUM("%.0f", med(h, ARM_HRANA, si, ni, M_CMDS_S)),
             BENCH_NUM("%.0f", med(h, ARM_HRANA_TX, si, ni, M_CMDS_S)),
             BENCH_NUM("%.0f", med(h, ARM_HRANA_TX, si, ni, M_TX_N)), t50, t99);
    }
  printf("\ntx done: interactive transactions committed inside the window (median of rounds; a %d ms period\n"
         "asks for %.0f); tx ms: from BEGIN's request to COMMIT's answer.\n",
         TX_EVERY_MS, c->cli.seconds * 1000 / TX_EVERY_MS);
}

/* Where the CPU went in the lithd arm: lithd's threads, the client. */
static void print_cpu(const bench_harness *h, const config *c) {
  static const char *const head[BENCH_NTHREAD] = {"loop thread (h2o, JSON, bridge)", "lith-writer",
                                                  "lith-waker", "lith-checkpoint", "other"};
  if (!c->arms[ARM_LITHD])
    return;
  printf("\n### lithd: where the CPU goes (medians, %% of one CPU)\n\n");
  printf("| sync | N | cmd/s |");
  for (int k = 0; k < BENCH_NTHREAD; k++)
    printf(" %s |", head[k]);
  printf(" lithd total | client | lithd µs/cmd | client µs/cmd |\n|---|--:|--:|");
  for (int k = 0; k < BENCH_NTHREAD; k++)
    printf("--:|");
  printf("--:|--:|--:|--:|\n");
  for (int si = 0; si < c->nsync; si++)
    for (int ni = 0; ni < c->nconns; ni++) {
      char v[32];
      if (!ran(h, ARM_LITHD, si, ni))
        continue;
      printf("| %s | %d | %s |", sync_name(c->sync[si]), c->conns[ni],
             BENCH_NUM("%.0f", med(h, ARM_LITHD, si, ni, M_CMDS_S)));
      for (int k = 0; k < BENCH_NTHREAD; k++) {
        fmt_pct(v, sizeof v, med(h, ARM_LITHD, si, ni, M_CPU_T0 + k));
        printf(" %s |", v);
      }
      fmt_pct(v, sizeof v, med(h, ARM_LITHD, si, ni, M_CPU_SRV));
      printf(" %s |", v);
      fmt_pct(v, sizeof v, med(h, ARM_LITHD, si, ni, M_CPU_CLI));
      printf(" %s | %s | %s |\n", v, BENCH_NUM("%.1f", med(h, ARM_LITHD, si, ni, M_US_SRV)),
             BENCH_NUM("%.1f", med(h, ARM_LITHD, si, ni, M_US_CLI)));
    }
  printf("\nFrom /proc/PID/task/*/stat (10 ms ticks) at the window's edges. µs/cmd: CPU time over commands\n"
         "answered in the window.\n");
}

/* lithd beside the node server (throughput) and the bare h2o server (CPU per command). */
static void print_peers(const bench_harness *h, const config *c) {
  if (!c->arms[ARM_LITHD] || (!c->arms[ARM_NODE] && !c->arms[ARM_H2O]))
    return;
  printf("\n### lithd against its peers: Node.js + better-sqlite3, a bare h2o (medians)\n\n");
  printf("| sync | N | lithd cmd/s | node cmd/s | lithd ÷ node | h2o cmd/s | lithd µs/cmd | node µs/cmd | "
         "h2o µs/cmd | lithd ÷ h2o | lithd loop µs/cmd | loop ÷ h2o |\n");
  printf("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
  for (int si = 0; si < c->nsync; si++)
    for (int ni = 0; ni < c->nconns; ni++)
      if (ran(h, ARM_LITHD, si, ni))
        printf("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", sync_name(c->sync[si]),
               c->conns[ni], BENCH_NUM("%.0f", med(h, ARM_LITHD, si, ni, M_CMDS_S)),
               BENCH_NUM("%.0f", med(h, ARM_NODE, si, ni, M_CMDS_S)),
               BENCH_NUM("%.2f×", ratio(h, ARM_LITHD, ARM_NODE, si, ni, M_CMDS_S)),
               BENCH_NUM("%.0f", med(h, ARM_H2O, si, ni, M_CMDS_S)),
               BENCH_NUM("%.1f", med(h, ARM_LITHD, si, ni, M_US_SRV)),
               BENCH_NUM("%.1f", med(h, ARM_NODE, si, ni, M_US_SRV)),
               BENCH_NUM("%.1f", med(h, ARM_H2O, si, ni, M_US_SRV)),
               BENCH_NUM("%.2f×", ratio(h, ARM_LITHD, ARM_H2O, si, ni, M_US_SRV)),
               BENCH_NUM("%.1f", med(h, ARM_LITHD, si, ni, M_US_LOOP)),
               BENCH_NUM("%.2f×", ratio(h, ARM_LITHD, ARM_H2O, si, ni, M_US_LOOP)));
  printf("\nµs/cmd: the server process's CPU time over the window's commands (lithd: every thread; node:\n"
         "its loop and its helper threads; h2o: its one thread). h2o has no database, so the same h2o runs\n"
         "stand beside both synchronous modes. lithd ÷ h2o: what lithd adds to h2o per request, SQLite\n"
         "included; loop: lithd's loop thread alone (h2o, JSON, the bridge), its HTTP side.\n");
}

/* ---- targets ----------------------------------------------------------------------------- */

/* "- PASS|MISS|n/a what — detail" for v against limit (>= when ge, else <=); n/a when v is NAN. */
static void target(const char *what, double v, int ge, double limit, const char *fmt) {
  char d[128];
  bench_fmt(d, sizeof d, fmt, v);
  bench_target(what, !isnan(v), ge ? v >= limit : v <= limit, d);
}

static void print_targets(const bench_harness *h, const config *c) {
  char what[160];
  int ni = bench_find_int(c->conns, c->nconns, 64);
  int si_of[2] = {bench_find_int(c->sync, c->nsync, SYNC_NORMAL),
                  bench_find_int(c->sync, c->nsync, SYNC_FULL)};
  static const char *const SN[2] = {"NORMAL", "FULL"};
  static const double MULTI_MIN[2] = {5, 10}, NODE_MIN[2] = {4, 10};
  printf("\n### targets\n\n");
#define AT(si, expr) (ni >= 0 && (si) >= 0 ? (expr) : NAN)
  target("64 connections NORMAL: lithd ≥ 40000 commands/s",
         AT(si_of[0], med(h, ARM_LITHD, si_of[0], ni, M_CMDS_S)), 1, 40000, "%.0f commands/s");
  for (int k = 0; k < 2; k++) {
    snprintf(what, sizeof what, "64 clients %s: lithd ≥ %.0f × multiproc", SN[k], MULTI_MIN[k]);
    target(what, AT(si_of[k], ratio(h, ARM_LITHD, ARM_MULTI, si_of[k], ni, M_CMDS_S)), 1, MULTI_MIN[k],
           "%.2f×");
  }
  for (int k = 0; k < 2; k++) {
    snprintf(what, sizeof what, "64 connections %s: lithd ≥ %.0f × node (Node.js + better-sqlite3)", SN[k],
             NODE_MIN[k]);
    target(what, AT(si_of[k], ratio(h, ARM_LITHD, ARM_NODE, si_of[k], ni, M_CMDS_S)), 1, NODE_MIN[k],
           "%.2f×");
  }
  for (int k = 0; k < 2; k++) {
    snprintf(what, sizeof what, "64 connections %s: lithd p99 ≤ 10 ms", SN[k]);
    target(what, AT(si_of[k], med(h, ARM_LITHD, si_of[k], ni, M_P99)), 0, 10, "%.3f ms (median of rounds)");
  }
  target("64 connections NORMAL: lithd's CPU per command ≤ 2.0 × a bare h2o's",
         AT(si_of[0], ratio(h, ARM_LITHD, ARM_H2O, si_of[0], ni, M_US_SRV)), 0, 2.0, "%.2f×");
  for (int k = 0; k < 2; k++) {
    snprintf(what, sizeof what, "64 connections %s: hrana ≥ 0.8 × lithd (/v1/do)", SN[k]);
    target(what, AT(si_of[k], ratio(h, ARM_HRANA, ARM_LITHD, si_of[k], ni, M_CMDS_S)), 1, 0.8, "%.2f×");
  }
  for (int k = 0; k < 2; k++) {
    snprintf(what, sizeof what,
             "64 connections %s: hrana p99 ≤ 10 ms with an interactive transaction every %d ms", SN[k],
             TX_EVERY_MS);
    target(what, AT(si_of[k], med(h, ARM_HRANA_TX, si_of[k], ni, M_P99)), 0, 10,
           "%.3f ms (median of rounds)");
  }
#undef AT
  int64_t errors = bench_harness_total_errors(h);
  bench_target("errors, all arms: 0", 1, errors == 0, BENCH_NUM("%.0f", (double)errors));
}

/* ---- options ------------------------------------------------------------------------------ */

static void usage(FILE *f) {
  fprintf(f, "usage: bench/lithd [options]   (lithd over HTTP against N processes that write themselves,\n"
             "                               a Node.js + better-sqlite3 server and a bare h2o)\n"
             "  --conns LIST       client counts (connections, processes), e.g. 1,16,64,256 (default)\n"
             "  --sync LIST        normal,full (default both)\n"
             "  --arms LIST        " ARM_LIST " (default all)\n"
             "  --seconds S        measured window per arm (default 3)\n"
             "  --warmup S         warm-up before the window (default 0.5)\n"
             "  --rounds N         rounds, interleaved across arms and cells (default 3)\n"
             "  --db-dir DIR       where the databases go (default: a new directory under /tmp)\n"
             "  --lithd PATH       the lithd binary (default " LITHD_PATH ")\n"
             "  --h2o PATH         the bare h2o server, arm h2o (default " H2O_NULL_PATH ")\n"
             "  --node PATH        the Node.js server, arm node (default " NODE_SERVER_PATH ")\n"
             "  --node-modules DIR where its node_modules are (default: the script's own)\n"
             "  --results PATH     the results file (default bench/results/lithd-YYYYMMDD-HHMMSS.jsonl)\n"
             "  --quick            smoke run: 1 round, 1 s, warm-up 0.25 s, conns 1,64\n"
             "  --help\n");
}

static int take_option(void *ctx, const char *a, const char *v) {
  static const char *const SYNC_WORD[] = {"normal", "full"}; /* = SYNC_NORMAL, SYNC_FULL */
  config *c = ctx;
  if (!strcmp(a, "--conns")) {
    c->nconns = bench_parse_counts(v, a, "client", 1, MAX_CONNS, c->conns, MAX_LIST);
  } else if (!strcmp(a, "--sync")) {
    c->nsync = bench_parse_words(v, a, SYNC_WORD, NULL, 2, c->sync, 2, "normal,full");
  } else if (!strcmp(a, "--arms")) {
    bench_parse_flags(v, a, ARM_NAME, NARMS, c->arms, ARM_LIST);
  } else if (!strcmp(a, "--lithd")) {
    c->lithd = v;
  } else if (!strcmp(a, "--h2o")) {
    c->h2o = v;
  } else if (!strcmp(a, "--node")) {
    c->node_script = v;
  } else if (!strcmp(a, "--node-modules")) {
    c->node_modules = v;
  } else {
    return 0;
  }
  return 1;
}

static void parse_args(int argc, char **argv, config *c) {
  memset(c, 0, sizeof *c);
  c->cli = (bench_cli){.prog = "bench/lithd", .usage = usage, .min_seconds = 0.05, .max_rounds = 100};
  c->lithd = LITHD_PATH;
  c->h2o = H2O_NULL_PATH;
  c->node_script = NODE_SERVER_PATH;
  c->sync[0] = SYNC_NORMAL; /* the defaults, which the options replace */
  c->sync[1] = SYNC_FULL;
  c->nsync = 2;
  for (int a = 0; a < NARMS; a++)
    c->arms[a] = 1;
  bench_cli_parse(&c->cli, argc, argv, take_option, c);
  if (!c->nconns) {
    static const int def[] = {1, 16, 64, 256}, q[] = {1, 64};
    c->nconns = bench_list_default(c->conns, def, 4, q, 2, c->cli.quick);
  }
}

/* ---- the header ------------------------------------------------------------------------------ */

static void print_header(void *ctx, const char *results) {
  const config *c = ctx;
  bench_machine m;
  bench_machine_get(&m);
  bench_print_intro("lithd benchmark", c->cli.argc, c->cli.argv, 1);
  printf("machine: nproc %ld, CPU %s, kernel %s\n", m.nproc, m.cpu, m.kernel);
  printf("SQLite %s (bench side), lithd %s (checkpoint WRITER)\n", sqlite3_libversion(), c->lithd);
  if (c->arms[ARM_NODE])
    printf("node: %s %s%s%s\n", c->node, c->node_script, c->node_modules ? " --modules " : "",
           c->node_modules ? c->node_modules : "");
  else if (c->node_skip[0])
    printf("node: skipped: %s\n", c->node_skip);
  if (c->arms[ARM_H2O])
    printf("h2o: %s\n", c->h2o);
  printf("databases: %s (%s)\n", c->cli.db_dir, bench_fs_name(c->cli.db_dir));
  printf("plan: clients");
  bench_print_ints(c->conns, c->nconns);
  printf("; synchronous");
  bench_print_named(c->sync, c->nsync, sync_name);
  bench_print_arms_results(ARM_NAME, c->arms, NARMS, &c->cli, results);
}

static void print_all(const bench_harness *h, void *ctx) {
  print_tables(h, ctx);
  print_cpu(h, ctx);
  print_peers(h, ctx);
  print_targets(h, ctx);
}

int main(int argc, char **argv) {
  config cfg, *c = &cfg;
  char tmpdir[] = "/tmp/lith-bench-lithd-XXXXXX", log[4200];
  parse_args(argc, argv, c);
  int64_t t_begin = bench_now_ns();
  signal(SIGPIPE, SIG_IGN);

  bench_need_exec(c->lithd, "build it (make lithd) or pass --lithd PATH");
  if (c->arms[ARM_H2O])
    bench_need_exec(c->h2o, "build it (make %s), pass --h2o PATH or leave arm h2o out", c->h2o);
  int own_dir = bench_db_dir(&c->cli.db_dir, tmpdir);
  snprintf(log, sizeof log, "%s/server-stderr.log", c->cli.db_dir);
  node_check(c, log);
  bench_plan plan = {.program = "lithd",
                     .workload = "transfer",
                     BENCH_PLAN_ARMS(ARM_NAME),
                     .arm_on = c->arms,
                     .ndims = NDIM,
                     .dim_n = D_CONNS,
                     .dim_sync = D_SYNC,
                     BENCH_PLAN_METRICS(METRICS),
                     .flags = BENCH_ALTERNATE,
                     .ignores = arm_ignores,
                     .run = run_cell,
                     .ctx = c,
                     .cli = &c->cli};
  bench_plan_dim(&plan, D_SYNC, "sync", sync_name, c->sync, c->nsync);
  bench_plan_dim(&plan, D_CONNS, "conns", NULL, c->conns, c->nconns);
  /* Round r runs every arm of every cell before round r+1; odd rounds run
   * the arms in the other order. */
  int64_t errors = bench_harness_main(&plan, print_header, print_all);
  unlink(log);
  return bench_finish("all arms", errors, t_begin, own_dir, c->cli.db_dir);
}
