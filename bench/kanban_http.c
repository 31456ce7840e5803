/*
 * bench/kanban_http — the kanban example's MoveCard end to end: HTTP/1.1
 * keep-alive clients against the real server binary, on a fresh database.
 *
 * bench/kanban measures kb_move_card through lith_do, without HTTP. What a
 * user of the app gets also pays for h2o, the request's JSON, the session
 * cookie, the same-origin check, the libuv bridge and the JSON bench_answer; this
 * program measures all of that together, from outside, the way a browser
 * reaches it, so nothing in the server is bypassed or special-cased.
 *
 * One run = (synchronous FULL|NORMAL, N connections, round):
 *   1. spawn `kanban --db DIR/x.db --port 0 --synchronous MODE --no-demo`
 *      (path compiled in as KANBAN_PATH, --kanban overrides) and read the
 *      port from the line it prints;
 *   2. set up through the server's own API, on a few blocking connections
 *      with several requests in flight (sign-up hashes a password with
 *      argon2id, about 0.1 s of CPU each, two at a time: it dominates the
 *      setup): N users sign up (POST /signup, a form; the 303 carries the
 *      session cookie); user 0 creates one board (POST /boards, JSON) and
 *      adds the others as members (POST /boards/B/members); each user
 *      creates two lists of their own (POST /boards/B/lists) and CARDS cards
 *      in the first (POST /boards/B/cards, index -1). Every POST carries
 *      Origin: http://HOST (the server's CSRF rule: Origin must name the
 *      Host) and an op id "TTTTTTTTTTTTTTTT-SSSSSSSS": wall-clock ns in 16
 *      hex digits, then a sequence number, so ids are time-ordered and land
 *      at the right edge of the ops index as board.h asks.
 *      ONE SHARED BOARD, as bench/kanban: every move bumps the same board
 *      version row and wakes the same on_commit topic, which is what a team
 *      on one board does; a board per user would measure a friendlier case.
 *   3. open N fresh keep-alive connections (the setup's may have idled; the
 *      server drops idle ones after 10 s), connection i acting as user i;
 *      each is a closed loop: POST /boards/B/cards/C/move with
 *      {"op","list","index","version"}, wait for the whole answer, send the
 *      next. A move takes a random card of the user's from a random
 *      non-empty list of theirs to the other list at a random index 0..n,
 *      carrying the move version the previous answer returned, so no move is
 *      ever stale. An answer other than 200, a stale (409) one, a replayed
 *      one, one whose version is not seen+1 or whose index is not the one
 *      asked, a malformed one or a broken connection is an error.
 *   4. SIGTERM; the server must exit 0 (it drains and checkpoints); then the
 *      file is checked with plain SQLite: quick_check; no two live cards of
 *      a list share a position; move op records (in total and per user),
 *      card version bumps and board version growth all equal the moves
 *      answered 200; every list holds exactly its owner's cards in the order
 *      and at the versions the client's model says.
 *
 * The client must stay cheap, since it shares the two CPUs with the server:
 * one thread, one epoll set, nonblocking sockets with TCP_NODELAY. Requests
 * are built before the clock starts: per connection a header per card (the
 * card id is in the path) and one body whose values sit in fixed-width
 * slots (the op id has a fixed width; numbers are padded with spaces, which
 * JSON allows), so Content-Length never changes and a move is four slot
 * rewrites and one sendmsg of two iovecs. Answers: one recv per readiness
 * event; the status line, Content-Length and Connection headers, then three
 * fields of the body (version, index, replayed) by substring search.
 *
 * Timing as bench/lithd: --warmup seconds, then a window of --seconds; a
 * move counts when its bench_answer arrives inside the window. Latency is from
 * just before sendmsg to the whole answer, every value kept (exact
 * percentiles). At the window's edges the bench reads the CPU time of each
 * server thread (/proc/PID/task/TID/stat: the loop thread that runs h2o,
 * jansson and the bridge; lith-writer; lith-waker; lith-checkpoint; the
 * libuv pool), its own, and the machine's (/proc/stat), so the tables say
 * where the two CPUs went. The server has no stats endpoint, so moves per
 * transaction are not reported here (bench/kanban has them).
 *
 * The loop, the storage and the results are bench/harness.h's: one arm,
 * `server`, over the cells sync (FULL, NORMAL) x conns (the results' n);
 * rounds interleave the cells (round r runs every cell before round r+1),
 * each run's line written to the results file as it ends (bench/results.md:
 * rate = moves/s, p50/p99, cpu_us_op = the server's CPU µs per move); the
 * tables give the median over rounds and the range. The exit status is 0
 * only when no run had an error (a missed target is reported, not an
 * error).
 *
 * This program links SQLite only (for the check): the server is the thing
 * measured, as a separate process.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "common.h"
#include "harness.h"
#include "net.h"

#ifndef KANBAN_PATH
#define KANBAN_PATH "build/default/examples/kanban/kanban"
#endif

enum {
  CARDS = 8,        /* cards per user, as bench/kanban */
  OP_LEN = 25,      /* "%016llx-%08llx" */
  NUM_W = 20,       /* a number's slot in the move body */
  IN_CAP = 8192,    /* one answer must fit */
  SETUP_CONNS = 16, /* setup requests in flight */
  MAX_CONNS = 2000,
  MAX_CELLS = 16,
  MAX_ROUNDS = 50,
  KIND_MOVE_CARD = 10, /* ops.kind of a move (examples/kanban/board.c) */
  MSG_MAX = 5          /* error messages printed per run: bench_cell_error's */
};

#define RUN_SEQ0 UINT64_C(0x80000000) /* run-phase op sequence numbers start here */
#define LAT_MAX ((size_t)1 << 24)     /* latencies kept per run before sampling */

/* ---- clocks and randomness ---------------------------------------------------- */

static uint64_t wall_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* splitmix64: a counter through a mixer; one state per connection. */
static uint64_t rnd(uint64_t *state) {
  uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

/* An op id: 16 hex digits of wall-clock ns, '-', 8 of seq; OP_LEN chars + NUL. */
static void make_op(char out[OP_LEN + 1], uint64_t seq) {
  snprintf(out, OP_LEN + 1, "%016llx-%08llx", (unsigned long long)wall_ns(),
           (unsigned long long)(seq & 0xffffffffu));
}

/* ---- options ------------------------------------------------------------------- */

enum { SYNC_FULL, SYNC_NORMAL };
static const char *sync_upper(int s) { return s == SYNC_FULL ? "FULL" : "NORMAL"; }
static const char *sync_lower(int s) { return s == SYNC_FULL ? "full" : "normal"; }

typedef struct opts {
  bench_cli cli; /* --seconds, --warmup, --rounds, --db-dir, --results, --quick */
  int conns[MAX_CELLS], nconns;
  int sync[2], nsync;
  const char *kanban;
} opts;

/* ---- what a run measures ---------------------------------------------------------- */

/* Server threads, by name (BENCH_T_*). */
static const char *const TH_HEAD[BENCH_NTHREAD] = {"loop thread (h2o, JSON, bridge)", "lith-writer",
                                                   "lith-waker", "lith-checkpoint", "pool and other"};

enum {
  V_MOVES_S, /* moves answered 200 inside the window, per second */
  V_P50,     /* ms */
  V_P99,
  V_MAX,
  V_CPU_SRV,                            /* the server's CPU over the window, in CPUs */
  V_CPU_TH,                             /* .. per thread class: V_CPU_TH + TH_* */
  V_CPU_CLI = V_CPU_TH + BENCH_NTHREAD, /* this process */
  V_CPU_ELSE,                           /* the machine's busy time minus the two above */
  V_US_SRV,                             /* server CPU µs per move */
  V_US_CLI,                             /* client CPU µs per move */
  V_SETUP_S,                            /* seconds from spawn to the first move */
  V_MOVES,                              /* moves answered 200 inside the window */
  V_OK,                                 /* ...in the whole run (the database must have them all) */
  NV
};
static const bench_metric METRICS[NV] = {
    {"moves_per_s", BENCH_ROLE_RATE},
    {"p50_ms", BENCH_ROLE_P50},
    {"p99_ms", BENCH_ROLE_P99},
    {"max_ms", BENCH_ROLE_NONE},
    {"server_cpu", BENCH_ROLE_NONE},
    {"cpu_loop", BENCH_ROLE_NONE},
    {"cpu_writer", BENCH_ROLE_NONE},
    {"cpu_waker", BENCH_ROLE_NONE},
    {"cpu_ckpt", BENCH_ROLE_NONE},
    {"cpu_other", BENCH_ROLE_NONE},
    {"client_cpu", BENCH_ROLE_NONE},
    {"else_cpu", BENCH_ROLE_NONE},
    {"server_us_per_move", BENCH_ROLE_CPU_US},
    {"client_us_per_move", BENCH_ROLE_NONE},
    {"setup_s", BENCH_ROLE_NONE},
    {"moves", BENCH_ROLE_NONE},
    {"moves_ok", BENCH_ROLE_NONE},
};
static const bench_cpu_slots CPU_SLOTS = {V_CPU_SRV, V_CPU_TH, V_CPU_CLI, V_CPU_ELSE, V_US_SRV, V_US_CLI};

/* The one arm, and the cell's dimensions. */
static const char *const ARM_NAME[1] = {"server"};
enum { D_SYNC, D_CONNS, NDIM };

/* ---- one connection of the run phase: a user and their cards ------------------------- */

typedef struct mover {
  int fd;
  int user;         /* index: the user "u<user>" */
  char cookie[128]; /* "kanban_session=..." */
  int64_t lists[2];
  int64_t cards[CARDS];   /* by slot */
  int64_t version[CARDS]; /* by slot: the move version last answered */
  int order[2][CARDS];    /* slots, in list order */
  int n[2];
  /* the prepared requests */
  char *head[CARDS]; /* "POST /boards/B/cards/C/move ..." through the blank line */
  size_t head_len[CARDS];
  char *body;
  size_t body_len;
  /* the move in flight */
  int busy, want_out, slot, from, at;
  int64_t to_index;
  size_t sent;
  int64_t t0;
  uint64_t seq, rng;
  int64_t ok; /* answered 200 (the database must have them all) */
  int dead;
  size_t in_len;
  char in[IN_CAP + 1];
} mover;

/* The move body and where its slots are. */
#define BODY_A "{\"op\":\""
#define BODY_B "\",\"list\":"
#define BODY_C ",\"index\":"
#define BODY_D ",\"version\":"
#define BODY_E "}"
enum {
  OFF_OP = sizeof BODY_A - 1,
  OFF_LIST = OFF_OP + OP_LEN + sizeof BODY_B - 1,
  OFF_INDEX = OFF_LIST + NUM_W + sizeof BODY_C - 1,
  OFF_VERSION = OFF_INDEX + NUM_W + sizeof BODY_D - 1,
  BODY_LEN = OFF_VERSION + NUM_W + sizeof BODY_E - 1
};

typedef struct run {
  const opts *o;
  int sync, N, round;
  char db[4096], log[4200];
  pid_t pid;
  int port;
  char host[32]; /* "127.0.0.1:PORT", the Host and the Origin's authority */
  int64_t board, board_v0;
  mover *m;
  bench_cell *cell; /* its m[], errors and msgs: the result */
  /* the run phase */
  int ep, inflight;
  int64_t ws, we;
  bench_lat lat;
  int64_t window_moves;
  bench_cpu_snap *sn; /* [2]: at the window's edges */
} run;

static void run_error(run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void run_error(run *r, const char *fmt, ...) {
  char msg[700];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  r->cell->errors++;
  bench_cell_error(r->cell, "%s", msg);
}

static int send_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Read one whole answer into buf (NUL-terminated). 0, or -1. */
static int recv_answer(int fd, char *buf, bench_answer *a) {
  size_t len = 0;
  for (;;) {
    ssize_t got = recv(fd, buf + len, IN_CAP - len, 0);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      return -1;
    len += (size_t)got;
    buf[len] = '\0';
    int rc = bench_http_parse(buf, len, IN_CAP, a);
    if (rc < 0 || (rc == 1 && a->total != len))
      return -1;
    if (rc == 1)
      return 0;
  }
}

/* ---- the server process ------------------------------------------------------------------ */

/* ---- the server process ------------------------------------------------------------------ */

/* Spawn the server on r->db and read its port. 0, or -1 (nothing left running). */
static int server_start(run *r) {
  char err[400];
  char *argv[] = {(char *)r->o->kanban,        "--db",      r->db, "--port", "0", "--synchronous",
                  (char *)sync_lower(r->sync), "--no-demo", NULL};
  /* "kanban VERSION: listening on http://127.0.0.1:PORT/ (...)" */
  r->port = bench_server_start(argv, r->log, "the server", 20, &r->pid, err, sizeof err);
  if (r->port < 0) {
    run_error(r, "%s", err);
    return -1;
  }
  snprintf(r->host, sizeof r->host, "127.0.0.1:%d", r->port);
  return 0;
}

/* SIGTERM and wait; it must exit 0 within 60 s. */
static void server_stop(run *r) {
  char err[400];
  if (r->pid > 0 && bench_server_stop(r->pid, r->log, "the server", err, sizeof err) != 0)
    run_error(r, "%s", err);
  r->pid = -1;
}

/* ---- setup through the API ------------------------------------------------------------------ */

typedef struct setup {
  run *r;
  int k; /* connections */
  int fd[SETUP_CONNS];
  char req[SETUP_CONNS][2048];
  char in[SETUP_CONNS][IN_CAP + 1];
  uint64_t seq; /* op ids */
} setup;

/* A POST with the headers the server wants. Its length, or -1. */
static int post(const run *r, char *buf, size_t cap, const char *path, const char *cookie, int json,
                const char *body) {
  int n =
      snprintf(buf, cap,
               "POST %s HTTP/1.1\r\nHost: %s\r\nOrigin: http://%s\r\n%s%s%s"
               "Content-Type: %s\r\nContent-Length: %zu\r\n\r\n%s",
               path, r->host, r->host, cookie ? "Cookie: " : "", cookie ? cookie : "", cookie ? "\r\n" : "",
               json ? "application/json" : "application/x-www-form-urlencoded", strlen(body), body);
  return n > 0 && (size_t)n < cap ? n : -1;
}

typedef int (*make_fn)(setup *s, int i, char *buf, size_t cap);
typedef int (*take_fn)(setup *s, int i, const bench_answer *a, const char *in);

/* Requests 0..count-1: up to k in flight, one per connection. 0, or -1. */
static int setup_calls(setup *s, const char *what, int count, make_fn mk, take_fn take) {
  for (int base = 0; base < count; base += s->k) {
    int m = count - base < s->k ? count - base : s->k;
    for (int j = 0; j < m; j++) {
      int len = mk(s, base + j, s->req[j], sizeof s->req[j]);
      if (len < 0 || send_all(s->fd[j], s->req[j], (size_t)len) != 0) {
        run_error(s->r, "setup (%s): cannot send request %d: %s", what, base + j, strerror(errno));
        return -1;
      }
    }
    for (int j = 0; j < m; j++) {
      bench_answer a;
      if (recv_answer(s->fd[j], s->in[j], &a) != 0) {
        run_error(s->r, "setup (%s): no whole answer to request %d", what, base + j);
        return -1;
      }
      if (take(s, base + j, &a, s->in[j]) != 0) {
        run_error(s->r, "setup (%s): request %d: HTTP %d: %.300s", what, base + j, a.status,
                  s->in[j] + a.head_len);
        return -1;
      }
    }
  }
  return 0;
}

static int mk_signup(setup *s, int i, char *buf, size_t cap) {
  char body[128];
  snprintf(body, sizeof body, "name=u%d&password=bench-password-%06d", i, i);
  return post(s->r, buf, cap, "/signup", NULL, 0, body);
}

/* 303 with Set-Cookie: kanban_session=TOKEN; ... */
static int take_signup(setup *s, int i, const bench_answer *a, const char *in) {
  if (a->status != 303)
    return -1;
  const char *eoh = in + a->head_len - 2, *line = in;
  while ((line = memchr(line, '\n', (size_t)(eoh - line))) != NULL) {
    line++;
    if (!bench_header_is(line, eoh, "set-cookie:"))
      continue;
    const char *v = line + 11;
    v += strspn(v, " ");
    size_t n = strcspn(v, ";\r");
    if (strncmp(v, "kanban_session=", 15) != 0 || n <= 15 || n >= sizeof s->r->m[i].cookie)
      return -1;
    memcpy(s->r->m[i].cookie, v, n);
    s->r->m[i].cookie[n] = '\0';
    return 0;
  }
  return -1;
}

static int json_post(setup *s, char *buf, size_t cap, const char *path, int user, const char *fields) {
  char op[OP_LEN + 1], body[512];
  make_op(op, s->seq++);
  snprintf(body, sizeof body, "{\"op\":\"%s\",%s}", op, fields);
  return post(s->r, buf, cap, path, s->r->m[user].cookie, 1, body);
}

/* A 200 action answer: its board version joins board_v0; *id when asked. */
static int take_action(setup *s, const bench_answer *a, const char *in, int64_t *id) {
  const char *body = in + a->head_len;
  size_t n = a->total - a->head_len;
  int64_t bv = 0;
  if (a->status != 200 || !memmem(body, n, "\"replayed\":false", 16))
    return -1;
  if (bench_body_int(body, n, "\"board_version\":", &bv) && bv > s->r->board_v0)
    s->r->board_v0 = bv;
  return id && !bench_body_int(body, n, "\"id\":", id) ? -1 : 0;
}

static int mk_board(setup *s, int i, char *buf, size_t cap) {
  (void)i;
  return json_post(s, buf, cap, "/boards", 0, "\"title\":\"MoveCard over HTTP\"");
}

static int take_board(setup *s, int i, const bench_answer *a, const char *in) {
  (void)i;
  s->r->board_v0 = 1;
  return take_action(s, a, in, &s->r->board);
}

static int mk_member(setup *s, int i, char *buf, size_t cap) {
  char path[64], fields[64];
  snprintf(path, sizeof path, "/boards/%lld/members", (long long)s->r->board);
  snprintf(fields, sizeof fields, "\"name\":\"u%d\"", i + 1);
  return json_post(s, buf, cap, path, 0, fields);
}

static int take_member(setup *s, int i, const bench_answer *a, const char *in) {
  (void)i;
  return take_action(s, a, in, NULL);
}

static int mk_list(setup *s, int i, char *buf, size_t cap) {
  char path[64], fields[64];
  snprintf(path, sizeof path, "/boards/%lld/lists", (long long)s->r->board);
  snprintf(fields, sizeof fields, "\"title\":\"u%d: %s\"", i / 2, i % 2 ? "done" : "to do");
  return json_post(s, buf, cap, path, i / 2, fields);
}

static int take_list(setup *s, int i, const bench_answer *a, const char *in) {
  return take_action(s, a, in, &s->r->m[i / 2].lists[i % 2]);
}

/* Card i is card i / N of user i % N: the requests in flight together
 * belong to different users. */
static int mk_card(setup *s, int i, char *buf, size_t cap) {
  char path[64], fields[160];
  int user = i % s->r->N, k = i / s->r->N;
  snprintf(path, sizeof path, "/boards/%lld/cards", (long long)s->r->board);
  snprintf(fields, sizeof fields, "\"list\":%lld,\"title\":\"card %d of u%d\",\"index\":-1",
           (long long)s->r->m[user].lists[0], k, user);
  return json_post(s, buf, cap, path, user, fields);
}

static int take_card(setup *s, int i, const bench_answer *a, const char *in) {
  mover *m = &s->r->m[i % s->r->N];
  int k = i / s->r->N;
  int64_t version = 0, index = -1;
  const char *body = in + a->head_len;
  size_t n = a->total - a->head_len;
  if (take_action(s, a, in, &m->cards[k]) != 0 || !bench_body_int(body, n, "\"version\":", &version) ||
      !bench_body_int(body, n, "\"index\":", &index) || version != 1 || index < 0 || index >= CARDS ||
      m->order[0][index] >= 0)
    return -1;
  m->version[k] = version;
  m->order[0][index] = k; /* appended: its landing index is its place */
  m->n[0]++;
  return 0;
}

/* Users, the board, members, lists, cards. 0, or -1 (reported). */
static int setup_board(run *r) {
  setup *s = calloc(1, sizeof *s);
  int rc = -1;
  if (!s) {
    run_error(r, "out of memory");
    return -1;
  }
  s->r = r;
  s->k = r->N < SETUP_CONNS ? r->N : SETUP_CONNS;
  for (int j = 0; j < SETUP_CONNS; j++)
    s->fd[j] = -1;
  for (int j = 0; j < s->k; j++)
    if ((s->fd[j] = bench_dial(r->port, 0)) < 0) {
      run_error(r, "setup: cannot connect: %s", strerror(errno));
      goto out;
    }
  for (int p = 0; p < r->N; p++)
    for (int l = 0; l < 2; l++)
      for (int k = 0; k < CARDS; k++)
        r->m[p].order[l][k] = -1;
  if (setup_calls(s, "sign-up", r->N, mk_signup, take_signup) != 0 ||
      setup_calls(s, "board", 1, mk_board, take_board) != 0 ||
      setup_calls(s, "members", r->N - 1, mk_member, take_member) != 0 ||
      setup_calls(s, "lists", 2 * r->N, mk_list, take_list) != 0 ||
      setup_calls(s, "cards", CARDS * r->N, mk_card, take_card) != 0)
    goto out;
  for (int p = 0; p < r->N; p++)
    if (r->m[p].n[0] != CARDS) {
      run_error(r, "setup: user %d has %d cards in order", p, r->m[p].n[0]);
      goto out;
    }
  rc = 0;
out:
  for (int j = 0; j < s->k; j++)
    if (s->fd[j] >= 0)
      close(s->fd[j]);
  free(s);
  return rc;
}

/* ---- the run phase ----------------------------------------------------------------------------- */

/* The per-card headers and the body, before the clock starts. 0, or -1. */
static int mover_prepare(run *r, mover *m) {
  char head[1024];
  m->body = malloc(BODY_LEN + 1);
  if (!m->body)
    return -1;
  snprintf(m->body, BODY_LEN + 1, "%s%*s%s%*s%s%*s%s%*s%s", BODY_A, OP_LEN, "", BODY_B, NUM_W, "", BODY_C,
           NUM_W, "", BODY_D, NUM_W, "", BODY_E);
  m->body_len = BODY_LEN;
  if (strlen(m->body) != BODY_LEN)
    return -1;
  for (int k = 0; k < CARDS; k++) {
    int n = snprintf(head, sizeof head,
                     "POST /boards/%lld/cards/%lld/move HTTP/1.1\r\nHost: %s\r\nOrigin: http://%s\r\n"
                     "Cookie: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
                     (long long)r->board, (long long)m->cards[k], r->host, r->host, m->cookie, (int)BODY_LEN);
    if (n < 0 || (size_t)n >= sizeof head || !(m->head[k] = malloc((size_t)n + 1)))
      return -1;
    memcpy(m->head[k], head, (size_t)n + 1);
    m->head_len[k] = (size_t)n;
  }
  return 0;
}

static int watch_out(run *r, mover *m, int on) {
  if (bench_epoll_out(r->ep, m->fd, m, on) != 0)
    return -1;
  m->want_out = on;
  return 0;
}

static void mover_fail(run *r, mover *m, const char *what) {
  run_error(r, "connection of u%d: %s", m->user, what);
  if (m->busy) {
    m->busy = 0;
    r->inflight--;
  }
  m->dead = 1; /* the fate of its last move is unknown: the check will say */
  if (m->fd >= 0)
    close(m->fd);
  m->fd = -1;
}

/* Send what is left of the request in flight. */
static void mover_flush(run *r, mover *m) {
  size_t hl = m->head_len[m->slot], total = hl + m->body_len;
  while (m->sent < total) {
    struct iovec iov[2];
    int n = 0;
    if (m->sent < hl) {
      iov[n].iov_base = m->head[m->slot] + m->sent;
      iov[n++].iov_len = hl - m->sent;
      iov[n].iov_base = m->body;
      iov[n++].iov_len = m->body_len;
    } else {
      iov[n].iov_base = m->body + (m->sent - hl);
      iov[n++].iov_len = total - m->sent;
    }
    struct msghdr mh;
    memset(&mh, 0, sizeof mh);
    mh.msg_iov = iov;
    mh.msg_iovlen = (size_t)n;
    ssize_t w = sendmsg(m->fd, &mh, MSG_NOSIGNAL);
    if (w > 0) {
      m->sent += (size_t)w;
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!m->want_out && watch_out(r, m, 1) != 0)
        mover_fail(r, m, "epoll_ctl");
      return;
    } else {
      mover_fail(r, m, strerror(errno));
      return;
    }
  }
  if (m->want_out && watch_out(r, m, 0) != 0)
    mover_fail(r, m, "epoll_ctl");
}

/* Pick the next move, fill the body's slots, send. */
static void mover_send(run *r, mover *m) {
  char op[OP_LEN + 1];
  int from = (int)(rnd(&m->rng) & 1);
  if (m->n[from] == 0)
    from = 1 - from;
  int at = (int)(rnd(&m->rng) % (uint64_t)m->n[from]);
  m->from = from;
  m->at = at;
  m->slot = m->order[from][at];
  m->to_index = (int64_t)(rnd(&m->rng) % (uint64_t)(m->n[1 - from] + 1));
  make_op(op, m->seq++);
  memcpy(m->body + OFF_OP, op, OP_LEN);
  bench_put_num(m->body + OFF_LIST, m->lists[1 - from], NUM_W);
  bench_put_num(m->body + OFF_INDEX, m->to_index, NUM_W);
  bench_put_num(m->body + OFF_VERSION, m->version[m->slot], NUM_W);
  m->busy = 1;
  m->sent = 0;
  r->inflight++;
  m->t0 = bench_now_ns();
  mover_flush(r, m);
}

/* The move in flight was answered 200 with this version: the model follows. */
static void mover_apply(mover *m, int64_t version) {
  int from = m->from, to = 1 - from, i = (int)m->to_index;
  memmove(&m->order[from][m->at], &m->order[from][m->at + 1], (size_t)(m->n[from] - m->at - 1) * sizeof(int));
  m->n[from]--;
  memmove(&m->order[to][i + 1], &m->order[to][i], (size_t)(m->n[to] - i) * sizeof(int));
  m->order[to][i] = m->slot;
  m->n[to]++;
  m->version[m->slot] = version;
}

static void mover_answered(run *r, mover *m, const bench_answer *a) {
  int64_t t1 = bench_now_ns(), version = 0, index = -1;
  const char *body = m->in + a->head_len;
  size_t n = a->total - a->head_len;
  m->busy = 0;
  r->inflight--;
  if (a->status != 200) {
    /* A refused move changed nothing; a stale one says the card's version. */
    if (a->status == 409 && bench_body_int(body, n, "\"version\":", &version))
      m->version[m->slot] = version;
    run_error(r, "u%d: move answered HTTP %d: %.200s", m->user, a->status, body);
  } else {
    int have_v = bench_body_int(body, n, "\"version\":", &version);
    int have_i = bench_body_int(body, n, "\"index\":", &index);
    int fresh = memmem(body, n, "\"replayed\":false", 16) != NULL;
    m->ok++; /* a 200 is a recorded move, whatever else is wrong with it */
    if (have_v && have_i && fresh && version == m->version[m->slot] + 1 && index == m->to_index) {
      mover_apply(m, version);
      if (t1 >= r->ws && t1 < r->we) {
        r->window_moves++;
        bench_lat_add(&r->lat, (uint64_t)(t1 - m->t0));
      }
    } else {
      run_error(
          r, "u%d: move answered 200 but not as sent (version %lld, seen %lld, index %lld of %lld): %.200s",
          m->user, (long long)version, (long long)m->version[m->slot], (long long)index,
          (long long)m->to_index, body);
      if (have_v && have_i && index == m->to_index)
        mover_apply(m, version);
      else
        m->dead = 1; /* its model is lost */
    }
  }
  if (a->closes) {
    mover_fail(r, m, "the server closed the keep-alive connection");
    return;
  }
  if (!m->dead && t1 < r->we)
    mover_send(r, m);
}

static void mover_readable(run *r, mover *m) {
  bench_answer a;
  int rc = bench_http_recv(m->fd, m->in, &m->in_len, IN_CAP, &a);
  if (rc == 0)
    return;
  if (rc == -1) {
    mover_fail(r, m, errno ? strerror(errno) : "closed by the server");
    return;
  }
  if (rc < 0 || !m->busy || a.total != m->in_len) {
    mover_fail(r, m, rc < 0 ? "an answer it cannot parse" : "an answer it did not ask for");
    return;
  }
  m->in_len = 0;
  mover_answered(r, m, &a);
}

/* Open the N connections, run the closed loops through the window, drain. */
static void on_edge(void *ctx, int which) {
  run *r = ctx;
  bench_cpu_snap_take(r->pid, &r->sn[which]);
}

static void on_event(void *ctx, void *ptr, uint32_t events) {
  mover *m = ptr;
  if (m->fd >= 0 && (events & EPOLLOUT) && m->busy)
    mover_flush(ctx, m);
  if (m->fd >= 0 && (events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
    mover_readable(ctx, m);
}

static int outstanding(void *ctx) { return ((const run *)ctx)->inflight; }

static void run_moves(run *r, bench_cpu_snap sn[2]) {
  if ((r->ep = epoll_create1(EPOLL_CLOEXEC)) < 0) {
    run_error(r, "epoll_create1: %s", strerror(errno));
    return;
  }
  for (int i = 0; i < r->N; i++) {
    mover *m = &r->m[i];
    m->fd = bench_dial(r->port, 1);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = m};
    if (m->fd < 0 || epoll_ctl(r->ep, EPOLL_CTL_ADD, m->fd, &ev) != 0) {
      run_error(r, "connection %d: %s", i, strerror(errno));
      return;
    }
  }
  r->sn = sn;
  r->ws = bench_now_ns() + (int64_t)(r->o->cli.warmup * 1e9);
  r->we = r->ws + (int64_t)(r->o->cli.seconds * 1e9);
  for (int i = 0; i < r->N; i++)
    mover_send(r, &r->m[i]);
  bench_loop l = {r->ep, r->ws, r->we, INT64_C(30000000000), r, on_edge, on_event, outstanding};
  int rc = bench_loop_run(&l);
  if (rc > 0)
    run_error(r, "%d moves unanswered 30 s after the window", r->inflight);
  else if (rc < 0)
    run_error(r, "epoll_wait: %s", strerror(errno));
}

/* ---- the check ------------------------------------------------------------------------------------ */

/* What the database must hold after the server stopped. */
static void check_db(run *r) {
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  int64_t total = 0;
  int failed = 0;
  for (int p = 0; p < r->N; p++)
    total += r->m[p].ok;
  if (sqlite3_open_v2(r->db, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
    run_error(r, "check: cannot open %s", r->db);
    sqlite3_close(db);
    return;
  }
  sqlite3_busy_timeout(db, 5000);
  if (sqlite3_prepare_v2(db, "PRAGMA quick_check", -1, &st, NULL) != SQLITE_OK ||
      sqlite3_step(st) != SQLITE_ROW || strcmp((const char *)sqlite3_column_text(st, 0), "ok") != 0)
    run_error(r, "check: quick_check failed");
  sqlite3_finalize(st);
  st = NULL;
  int64_t dup = bench_query_int(db,
                                "SELECT count(*) FROM (SELECT 1 FROM cards WHERE archived = 0"
                                " GROUP BY list_id, pos HAVING count(*) > 1)",
                                0, &failed);
  if (dup != 0)
    run_error(r, "check: %lld positions held by two live cards of a list", (long long)dup);
  int64_t ops = bench_query_int(db, "SELECT count(*) FROM ops WHERE kind = ?", KIND_MOVE_CARD, &failed);
  int64_t bumps = bench_query_int(db, "SELECT sum(version - 1) FROM cards", 0, &failed);
  int64_t bv = bench_query_int(db, "SELECT version FROM boards WHERE id = ?", r->board, &failed);
  if (ops != total || bumps != total || bv - r->board_v0 != total)
    run_error(r,
              "check: %lld moves answered 200, but %lld move op records, %lld card version bumps, board "
              "version +%lld",
              (long long)total, (long long)ops, (long long)bumps, (long long)(bv - r->board_v0));
  /* per user */
  int64_t *per = calloc((size_t)r->N, sizeof *per);
  if (per && sqlite3_prepare_v2(db,
                                "SELECT u.name, count(*) FROM ops o JOIN users u ON u.id = o.user_id"
                                " WHERE o.kind = ? GROUP BY u.name",
                                -1, &st, NULL) == SQLITE_OK) {
    sqlite3_bind_int64(st, 1, KIND_MOVE_CARD);
    while (sqlite3_step(st) == SQLITE_ROW) {
      const char *name = (const char *)sqlite3_column_text(st, 0);
      int p = name && name[0] == 'u' ? atoi(name + 1) : -1;
      if (p >= 0 && p < r->N)
        per[p] = sqlite3_column_int64(st, 1);
    }
    int bad = 0;
    for (int p = 0; p < r->N; p++)
      bad += per[p] != r->m[p].ok;
    if (bad)
      run_error(r, "check: %d users with move op records != their moves answered 200", bad);
  } else {
    run_error(r, "check: cannot count ops per user");
  }
  sqlite3_finalize(st);
  st = NULL;
  free(per);
  /* every list: the model's cards, in the model's order, at its versions */
  if (sqlite3_prepare_v2(db,
                         "SELECT id, version FROM cards WHERE list_id = ? AND archived = 0 ORDER BY pos, id",
                         -1, &st, NULL) != SQLITE_OK) {
    run_error(r, "check: %s", sqlite3_errmsg(db));
  } else {
    int bad = 0;
    for (int p = 0; p < r->N; p++) {
      const mover *m = &r->m[p];
      for (int l = 0; l < 2; l++) {
        int i = 0, wrong = 0;
        sqlite3_bind_int64(st, 1, m->lists[l]);
        while (sqlite3_step(st) == SQLITE_ROW) {
          if (i >= m->n[l] || sqlite3_column_int64(st, 0) != m->cards[m->order[l][i]] ||
              sqlite3_column_int64(st, 1) != m->version[m->order[l][i]])
            wrong = 1;
          i++;
        }
        sqlite3_reset(st);
        bad += wrong || i != m->n[l];
      }
    }
    if (bad)
      run_error(r, "check: %d lists differ from their user's model", bad);
  }
  sqlite3_finalize(st);
  if (failed)
    run_error(r, "check: a query failed: %s", sqlite3_errmsg(db));
  sqlite3_close(db);
}

/* ---- one run --------------------------------------------------------------------------------------- */

static void run_cell(bench_cell *cell) {
  const opts *o = cell->ctx;
  int sync = cell->val[D_SYNC], N = cell->val[D_CONNS], round = cell->round;
  run *r = calloc(1, sizeof *r);
  bench_cpu_snap sn[2];
  memset(sn, 0, sizeof sn);
  if (!r || !(r->m = calloc((size_t)N, sizeof *r->m))) {
    bench_cell_error(cell, "out of memory");
    cell->errors++;
    free(r);
    return;
  }
  int64_t t_begin = bench_now_ns();
  r->o = o;
  r->cell = cell;
  r->sync = sync;
  r->N = N;
  r->round = round;
  r->ep = -1;
  bench_lat_init(&r->lat, 0, LAT_MAX, (uint64_t)round * 7 + 3); /* grows as moves come */
  snprintf(r->db, sizeof r->db, "%s/kanban-%s-n%d-r%d.db", o->cli.db_dir, sync_upper(sync), N, round + 1);
  snprintf(r->log, sizeof r->log, "%s/kanban-stderr.log", o->cli.db_dir);
  bench_remove_db(r->db);
  for (int p = 0; p < N; p++) {
    r->m[p].fd = -1;
    r->m[p].user = p;
    r->m[p].seq = RUN_SEQ0;
    r->m[p].rng = (uint64_t)(p + 1) * UINT64_C(1000003) + (uint64_t)round * UINT64_C(7919) + (uint64_t)sync;
  }
  if (server_start(r) == 0) {
    if (setup_board(r) == 0) {
      int ready = 1;
      for (int p = 0; p < N && ready; p++)
        if (mover_prepare(r, &r->m[p]) != 0) {
          run_error(r, "out of memory");
          ready = 0;
        }
      if (ready) {
        cell->m[V_SETUP_S] = (double)(bench_now_ns() - t_begin) / 1e9;
        run_moves(r, sn);
      }
    }
    for (int p = 0; p < N; p++)
      if (r->m[p].fd >= 0) {
        close(r->m[p].fd);
        r->m[p].fd = -1;
      }
    int64_t before = cell->errors;
    server_stop(r);
    if (cell->msgs > MSG_MAX)
      fprintf(stderr, "  (%d more errors of this run not shown)\n", cell->msgs - MSG_MAX);
    cell->msgs = 0; /* the check's findings are always shown */
    if (cell->errors == before && r->board > 0)
      check_db(r);
  }

  /* the figures */
  int64_t answered_ok = 0;
  for (int p = 0; p < N; p++)
    answered_ok += r->m[p].ok;
  cell->m[V_MOVES] = (double)r->window_moves;
  cell->m[V_OK] = (double)answered_ok;
  cell->m[V_MOVES_S] = (double)r->window_moves / o->cli.seconds;
  static const double QS[2] = {0.50, 0.99};
  bench_lat_sum ls;
  bench_lat *bufs[1] = {&r->lat};
  if (bench_lat_merge(bufs, 1, QS, 2, &ls) == 0 && !isnan(ls.q[0])) {
    cell->m[V_P50] = ls.q[0] / 1e6;
    cell->m[V_P99] = ls.q[1] / 1e6;
    cell->m[V_MAX] = (double)ls.max / 1e6;
    cell->sampled = ls.sampled;
  }
  bench_cpu_fill(sn, o->cli.seconds, (uint64_t)r->window_moves, &CPU_SLOTS, cell->m);

  if (r->pid > 0) {
    kill(r->pid, SIGKILL);
    waitpid(r->pid, NULL, 0);
  }
  if (r->ep >= 0)
    close(r->ep);
  for (int p = 0; p < N; p++) {
    for (int k = 0; k < CARDS; k++)
      free(r->m[p].head[k]);
    free(r->m[p].body);
  }
  bench_remove_db(r->db);
  bench_lat_free(&r->lat);
  free(r->m);
  free(r);
}

/* ---- tables ------------------------------------------------------------------------------------------ */

/* The server's metric v at (sync si, conns ci) over the rounds. */
static bench_agg over_rounds(const bench_harness *h, int si, int ci, int v) {
  int idx[NDIM] = {si, ci};
  return bench_harness_agg(h, 0, idx, v);
}

static int64_t cell_errors(const bench_harness *h, int si, int ci) {
  int idx[NDIM] = {si, ci};
  return bench_harness_errors(h, 0, idx);
}

static void fmt_ms(char *buf, size_t cap, double ms) { bench_fmt_ms(buf, cap, ms, 10); }
static void fmt_cpu(char *buf, size_t cap, double cpus) { bench_fmt(buf, cap, "%.0f%%", cpus * 100); }
static void fmt_us(char *buf, size_t cap, double us) { bench_fmt(buf, cap, "%.1f", us); }

static void print_tables(const bench_harness *h, const opts *o) {
  for (int si = 0; si < o->nsync; si++) {
    printf("\n### synchronous=%s\n\n", sync_upper(o->sync[si]));
    printf("| conns | moves/s median (min–max) | p50 ms | p99 ms | max ms | err | server CPU | client CPU | "
           "else CPU "
           "| server µs/move | client µs/move | setup s |\n");
    printf("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for (int ci = 0; ci < o->nconns; ci++) {
      char p50[24], p99[24], mx[24], srv[24], cli[24], els[24], us1[24], us2[24];
      bench_agg mv = over_rounds(h, si, ci, V_MOVES_S);
      fmt_ms(p50, sizeof p50, over_rounds(h, si, ci, V_P50).med);
      fmt_ms(p99, sizeof p99, over_rounds(h, si, ci, V_P99).med);
      fmt_ms(mx, sizeof mx, over_rounds(h, si, ci, V_MAX).hi);
      fmt_cpu(srv, sizeof srv, over_rounds(h, si, ci, V_CPU_SRV).med);
      fmt_cpu(cli, sizeof cli, over_rounds(h, si, ci, V_CPU_CLI).med);
      fmt_cpu(els, sizeof els, over_rounds(h, si, ci, V_CPU_ELSE).hi);
      fmt_us(us1, sizeof us1, over_rounds(h, si, ci, V_US_SRV).med);
      fmt_us(us2, sizeof us2, over_rounds(h, si, ci, V_US_CLI).med);
      printf("| %d | %.0f (%.0f–%.0f) | %s | %s | %s | %lld | %s | %s | %s | %s | %s | %.1f |\n",
             o->conns[ci], mv.med, mv.lo, mv.hi, p50, p99, mx, (long long)cell_errors(h, si, ci), srv, cli,
             els, us1, us2, over_rounds(h, si, ci, V_SETUP_S).med);
    }
  }
  printf(
      "\nMedians over rounds (moves/s also min–max; max ms and else CPU: the worst round). moves/s: moves\n"
      "answered 200 inside the window. Latency: from sending the request to the whole answer. CPU in %% of\n"
      "one CPU over the window (the machine has %ld): the server process; this client; else: the rest of "
      "the\n"
      "machine's busy time (other processes, interrupts: noise when much above 0). µs/move: CPU time over\n"
      "the moves answered in the window. setup: spawn, sign-ups (argon2id), board, lists, cards.\n",
      sysconf(_SC_NPROCESSORS_ONLN));

  printf("\n### where the server's CPU goes (medians, %% of one CPU)\n\n| sync | conns | moves/s |");
  for (int k = 0; k < BENCH_NTHREAD; k++)
    printf(" %s |", TH_HEAD[k]);
  printf(" server total | client |\n|---|--:|--:|");
  for (int k = 0; k < BENCH_NTHREAD; k++)
    printf("--:|");
  printf("--:|--:|\n");
  for (int si = 0; si < o->nsync; si++)
    for (int ci = 0; ci < o->nconns; ci++) {
      char c[24];
      printf("| %s | %d | %.0f |", sync_upper(o->sync[si]), o->conns[ci],
             over_rounds(h, si, ci, V_MOVES_S).med);
      for (int k = 0; k < BENCH_NTHREAD; k++) {
        fmt_cpu(c, sizeof c, over_rounds(h, si, ci, V_CPU_TH + k).med);
        printf(" %s |", c);
      }
      fmt_cpu(c, sizeof c, over_rounds(h, si, ci, V_CPU_SRV).med);
      printf(" %s |", c);
      fmt_cpu(c, sizeof c, over_rounds(h, si, ci, V_CPU_CLI).med);
      printf(" %s |\n", c);
    }
  printf("\nFrom /proc/PID/task/*/stat (10 ms ticks) at the window's edges.\n");
}

static void print_targets(const bench_harness *h, const opts *o) {
  int64_t errors = bench_harness_total_errors(h);
  int ci = bench_find_int(o->conns, o->nconns, 64);
  char what[128], d[128];
  printf("\n### target\n\n");
  for (int si = 0; si < o->nsync && ci >= 0; si++) {
    double v = over_rounds(h, si, ci, V_MOVES_S).med;
    snprintf(what, sizeof what, "64 connections %s: ≥ 15000 moves/s end to end", sync_upper(o->sync[si]));
    snprintf(d, sizeof d, "%.0f moves/s (median of rounds)%s", v,
             o->sync[si] == SYNC_FULL ? " (the issue's target)" : "");
    bench_target(what, 1, v >= 15000, d);
  }
  if (ci < 0)
    printf("- n/a  64 connections: not run\n");
  printf("- %s errors, every run: 0 — %lld\n", errors ? "FAIL" : "PASS", (long long)errors);
}

/* ---- options ----------------------------------------------------------------------------------------- */

static void usage(FILE *f) {
  fprintf(f, "usage: bench/kanban_http [options]   (MoveCard over HTTP against the kanban server)\n"
             "  --conns LIST     keep-alive connections, one user each (default 1,16,64)\n"
             "  --sync LIST      full,normal (default both; full is the issue's target)\n"
             "  --seconds S      measured window (default 3)\n"
             "  --warmup S       before the window (default 0.5)\n"
             "  --rounds N       rounds, cells interleaved (default 3)\n"
             "  --db-dir DIR     where the databases go (default a new /tmp/lith-kanban-http-XXXXXX)\n"
             "  --kanban PATH    the server binary (default " KANBAN_PATH ")\n"
             "  --results PATH   the results file (default bench/results/kanban_http-YYYYMMDD-HHMMSS.jsonl)\n"
             "  --quick          smoke run: 1 round, 1 s, warm-up 0.25 s, conns 1,64\n"
             "  --help\n");
}

static int take_option(void *ctx, const char *a, const char *v) {
  static const char *const SYNC_WORD[] = {"full", "normal"}; /* = SYNC_FULL, SYNC_NORMAL */
  opts *o = ctx;
  if (!strcmp(a, "--conns"))
    o->nconns = bench_parse_counts(v, a, "connection", 1, MAX_CONNS, o->conns, MAX_CELLS);
  else if (!strcmp(a, "--sync"))
    o->nsync = bench_parse_words(v, a, SYNC_WORD, NULL, 2, o->sync, 2, "full, normal or both");
  else if (!strcmp(a, "--kanban"))
    o->kanban = v;
  else
    return 0;
  return 1;
}

static void parse_opts(int argc, char **argv, opts *o) {
  memset(o, 0, sizeof *o);
  o->cli = (bench_cli){.prog = "kanban_http", .usage = usage, .min_seconds = 0.1, .max_rounds = MAX_ROUNDS};
  o->kanban = KANBAN_PATH;
  o->sync[0] = SYNC_FULL; /* the default, which --sync replaces */
  o->sync[1] = SYNC_NORMAL;
  o->nsync = 2;
  bench_cli_parse(&o->cli, argc, argv, take_option, o);
  if (!o->nconns) {
    static const int full[] = {1, 16, 64}, smoke[] = {1, 64};
    o->nconns = bench_list_default(o->conns, full, 3, smoke, 2, o->cli.quick);
  }
}

/* ---- main ---------------------------------------------------------------------------------------------- */

static void print_header(void *ctx, const char *path) {
  const opts *o = ctx;
  static const int ON[1] = {1};
  bench_machine m;
  bench_machine_get(&m);
  bench_print_intro("kanban MoveCard over HTTP", o->cli.argc, o->cli.argv, 1);
  printf("machine: nproc %ld, CPU %s, kernel %s; SQLite %s (for the check)\n", m.nproc,
         m.have_cpu ? m.cpu : "?", m.kernel, sqlite3_libversion());
  printf("server: %s --port 0 --synchronous MODE --no-demo; databases in %s\n", o->kanban, o->cli.db_dir);
  printf("plan: connections");
  bench_print_ints(o->conns, o->nconns);
  printf("; synchronous");
  bench_print_named(o->sync, o->nsync, sync_upper);
  printf("; one shared board, %d cards and two lists per user", CARDS);
  bench_print_arms_results(ARM_NAME, ON, 1, &o->cli, path);
}

static void print_all(const bench_harness *h, void *ctx) {
  print_tables(h, ctx);
  print_targets(h, ctx);
}

int main(int argc, char **argv) {
  static opts oo;
  opts *o = &oo;
  char tmp[] = "/tmp/lith-kanban-http-XXXXXX", log[4200];
  parse_opts(argc, argv, o);
  int64_t t_begin = bench_now_ns();
  signal(SIGPIPE, SIG_IGN);
  bench_need_exec(o->kanban, "build it (make %s) or pass --kanban PATH", o->kanban);
  int own_dir = bench_db_dir(&o->cli.db_dir, tmp);
  bench_plan plan = {.program = "kanban_http",
                     .workload = "movecard",
                     BENCH_PLAN_ARMS(ARM_NAME),
                     .ndims = NDIM,
                     .dim_n = D_CONNS,
                     .dim_sync = D_SYNC,
                     BENCH_PLAN_METRICS(METRICS),
                     .run = run_cell,
                     .ctx = o,
                     .cli = &o->cli};
  bench_plan_dim(&plan, D_SYNC, "sync", sync_upper, o->sync, o->nsync);
  bench_plan_dim(&plan, D_CONNS, "conns", NULL, o->conns, o->nconns);
  /* Round r runs every cell, sync outer, before round r+1. */
  int64_t errors = bench_harness_main(&plan, print_header, print_all);
  snprintf(log, sizeof log, "%s/kanban-stderr.log", o->cli.db_dir);
  unlink(log);
  return bench_finish("every run", errors, t_begin, own_dir, o->cli.db_dir);
}
