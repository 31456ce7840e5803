/*
 * bench/kanban_http — the kanban example's MoveCard end to end: HTTP/1.1
 * keep-alive clients against the real server binary, on a fresh database.
 *
 * bench/kanban measures kb_move_card through lith_do, without HTTP. What a
 * user of the app gets also pays for h2o, the request's JSON, the session
 * cookie, the same-origin check, the libuv bridge and the JSON answer; this
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
 * move counts when its answer arrives inside the window. Latency is from
 * just before sendmsg to the whole answer, every value kept (exact
 * percentiles). At the window's edges the bench reads the CPU time of each
 * server thread (/proc/PID/task/TID/stat: the loop thread that runs h2o,
 * jansson and the bridge; lith-writer; lith-waker; lith-checkpoint; the
 * libuv pool), its own, and the machine's (/proc/stat), so the tables say
 * where the two CPUs went. The server has no stats endpoint, so moves per
 * transaction are not reported here (bench/kanban has them).
 *
 * Rounds interleave the cells (round r runs every cell before round r+1);
 * tables give the median over rounds and the range. A CSV of every run and
 * the medians goes to bench/results/. The exit status is 0 only when no run
 * had an error (a missed target is reported, not an error).
 *
 * This program links SQLite only (for the check): the server is the thing
 * measured, as a separate process.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#ifndef KANBAN_PATH
#define KANBAN_PATH "build/default/examples/kanban/kanban"
#endif

extern char **environ;

enum {
  CARDS = 8,           /* cards per user, as bench/kanban */
  OP_LEN = 25,         /* "%016llx-%08llx" */
  NUM_W = 20,          /* a number's slot in the move body */
  IN_CAP = 8192,       /* one answer must fit */
  SETUP_CONNS = 16,    /* setup requests in flight */
  MAX_CONNS = 2000,
  MAX_CELLS = 16,
  MAX_ROUNDS = 50,
  KIND_MOVE_CARD = 10, /* ops.kind of a move (examples/kanban/board.c) */
  MSG_MAX = 8          /* error messages printed per run */
};

#define RUN_SEQ0 UINT64_C(0x80000000) /* run-phase op sequence numbers start here */
#define LAT_MAX ((size_t)1 << 24)     /* latencies kept per run before sampling */

/* ---- clocks and randomness ---------------------------------------------------- */

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t wall_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void nap_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
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
  int conns[MAX_CELLS], nconns;
  int sync[2], nsync;
  double seconds, warmup;
  int rounds;
  const char *db_dir, *csv, *kanban;
} opts;

/* ---- what a run measures ---------------------------------------------------------- */

/* Server threads, by name. */
enum { TH_LOOP, TH_WRITER, TH_WAKER, TH_CKPT, TH_OTHER, NTH };
static const char *const TH_HEAD[NTH] = {"loop thread (h2o, JSON, bridge)", "lith-writer", "lith-waker",
                                         "lith-checkpoint", "pool and other"};

enum {
  V_MOVES_S, /* moves answered 200 inside the window, per second */
  V_P50,     /* ms */
  V_P99,
  V_MAX,
  V_CPU_SRV, /* the server's CPU over the window, in CPUs */
  V_CPU_TH,  /* .. per thread class: V_CPU_TH + TH_* */
  V_CPU_CLI = V_CPU_TH + NTH, /* this process */
  V_CPU_ELSE, /* the machine's busy time minus the two above */
  V_US_SRV,   /* server CPU µs per move */
  V_US_CLI,   /* client CPU µs per move */
  V_SETUP_S,  /* seconds from spawn to the first move */
  NV
};
static const char *const V_CSV[NV] = {"moves_per_s", "p50_ms", "p99_ms", "max_ms", "server_cpu", "cpu_loop",
                                      "cpu_writer", "cpu_waker", "cpu_ckpt", "cpu_other", "client_cpu",
                                      "else_cpu", "server_us_per_move", "client_us_per_move", "setup_s"};

typedef struct outcome {
  int ran;
  double v[NV]; /* NAN: not measured */
  int64_t window_moves, answered_ok, errors;
  int sampled;
} outcome;

/* ---- one connection of the run phase: a user and their cards ------------------------- */

typedef struct mover {
  int fd;
  int user;                /* index: the user "u<user>" */
  char cookie[128];        /* "kanban_session=..." */
  int64_t lists[2];
  int64_t cards[CARDS];    /* by slot */
  int64_t version[CARDS];  /* by slot: the move version last answered */
  int order[2][CARDS];     /* slots, in list order */
  int n[2];
  /* the prepared requests */
  char *head[CARDS];       /* "POST /boards/B/cards/C/move ..." through the blank line */
  size_t head_len[CARDS];
  char *body;
  size_t body_len;
  /* the move in flight */
  int busy, want_out, slot, from, at;
  int64_t to_index;
  size_t sent;
  int64_t t0;
  uint64_t seq, rng;
  int64_t ok;              /* answered 200 (the database must have them all) */
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
  int64_t errors;
  int msgs;
  /* the run phase */
  int ep, inflight;
  int64_t ws, we;
  uint64_t *lat;
  size_t lat_n, lat_cap;
  uint64_t lat_seen, lat_max, lat_rng;
  int64_t window_moves;
} run;

static void run_error(run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void run_error(run *r, const char *fmt, ...) {
  r->errors++;
  if (r->msgs++ >= MSG_MAX)
    return;
  char msg[700];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "  error [%s N=%d round %d]: %s\n", sync_upper(r->sync), r->N, r->round + 1, msg);
}

static void lat_keep(run *r, uint64_t ns) {
  r->lat_seen++;
  if (ns > r->lat_max)
    r->lat_max = ns;
  if (r->lat_n == r->lat_cap && r->lat_cap < LAT_MAX) {
    size_t cap = r->lat_cap ? r->lat_cap * 2 : 65536;
    uint64_t *p = realloc(r->lat, cap * sizeof *p);
    if (p) {
      r->lat = p;
      r->lat_cap = cap;
    }
  }
  if (r->lat_n < r->lat_cap) {
    r->lat[r->lat_n++] = ns;
  } else if (r->lat_cap) { /* full: keep a uniform sample */
    uint64_t j = rnd(&r->lat_rng) % r->lat_seen;
    if (j < r->lat_cap)
      r->lat[j] = ns;
  }
}

/* ---- parsing answers ------------------------------------------------------------------- */

typedef struct answer {
  int status;
  size_t head_len; /* through the blank line */
  size_t total;    /* head and body */
  int closes;
} answer;

/* Does the header line at p (ending before `end`) start with `name` (with the colon)? */
static int header_is(const char *p, const char *end, const char *name) {
  size_t n = strlen(name);
  return (size_t)(end - p) >= n && strncasecmp(p, name, n) == 0;
}

/* 1: in[0..len) holds a whole answer; 0: not yet; -1: not one this client reads. */
static int parse_answer(const char *in, size_t len, answer *a) {
  const char *eoh = memmem(in, len, "\r\n\r\n", 4);
  long long clen = -1;
  memset(a, 0, sizeof *a);
  if (!eoh)
    return len >= IN_CAP ? -1 : 0;
  if (eoh - in < 12 || strncmp(in, "HTTP/1.", 7) != 0 || in[8] != ' ')
    return -1;
  for (int i = 9; i < 12; i++) {
    if (in[i] < '0' || in[i] > '9')
      return -1;
    a->status = a->status * 10 + (in[i] - '0');
  }
  const char *line = in;
  while ((line = memchr(line, '\n', (size_t)(eoh - line))) != NULL) {
    line++;
    if (header_is(line, eoh, "content-length:")) {
      char *e;
      clen = strtoll(line + 15, &e, 10);
      if (e == line + 15)
        return -1;
    } else if (header_is(line, eoh, "transfer-encoding:")) {
      return -1; /* the server sends a length */
    } else if (header_is(line, eoh, "connection:")) {
      const char *v = line + 11;
      v += strspn(v, " \t");
      a->closes = strncasecmp(v, "close", 5) == 0;
    }
  }
  a->head_len = (size_t)(eoh - in) + 4;
  if (clen < 0 || (size_t)clen > IN_CAP - a->head_len)
    return -1;
  if (len < a->head_len + (size_t)clen)
    return 0;
  a->total = a->head_len + (size_t)clen;
  return 1;
}

/* The integer after "key": in body[0..n). 1 if found. */
static int body_int(const char *body, size_t n, const char *key, int64_t *out) {
  const char *p = memmem(body, n, key, strlen(key));
  if (!p)
    return 0;
  p += strlen(key);
  char *e;
  long long v = strtoll(p, &e, 10);
  if (e == p || e > body + n)
    return 0;
  *out = v;
  return 1;
}

/* ---- sockets --------------------------------------------------------------------------- */

static int dial(const run *r, int nonblocking) {
  struct sockaddr_in sa;
  int one = 1;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)r->port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  if (connect(fd, (const struct sockaddr *)&sa, sizeof sa) != 0 ||
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
    close(fd);
    return -1;
  }
  if (nonblocking) {
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) {
      close(fd);
      return -1;
    }
  } else {
    struct timeval tv = {60, 0}; /* a setup call never takes that long */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }
  return fd;
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
static int recv_answer(int fd, char *buf, answer *a) {
  size_t len = 0;
  for (;;) {
    ssize_t got = recv(fd, buf + len, IN_CAP - len, 0);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      return -1;
    len += (size_t)got;
    buf[len] = '\0';
    int rc = parse_answer(buf, len, a);
    if (rc < 0 || (rc == 1 && a->total != len))
      return -1;
    if (rc == 1)
      return 0;
  }
}

/* ---- the server process ------------------------------------------------------------------ */

static void show_log_tail(const run *r) {
  char buf[1500];
  int fd = open(r->log, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return;
  off_t end = lseek(fd, 0, SEEK_END);
  off_t from = end > (off_t)sizeof buf - 1 ? end - (off_t)sizeof buf + 1 : 0;
  ssize_t n = pread(fd, buf, sizeof buf - 1, from);
  close(fd);
  if (n > 0) {
    buf[n] = '\0';
    fprintf(stderr, "  the server's stderr (%s) ends:\n%s\n", r->log, buf);
  }
}

static void remove_db(const char *path) {
  static const char *const sfx[] = {"", "-wal", "-shm", "-journal"};
  char p[4200];
  for (size_t i = 0; i < sizeof sfx / sizeof *sfx; i++) {
    snprintf(p, sizeof p, "%s%s", path, sfx[i]);
    unlink(p);
  }
}

/* Spawn the server on r->db and read its port. 0, or -1 (nothing left running). */
static int server_start(run *r) {
  int out[2];
  char line[1024];
  size_t len = 0;
  posix_spawn_file_actions_t fa;
  r->pid = -1;
  if (pipe2(out, O_CLOEXEC) != 0) {
    run_error(r, "pipe: %s", strerror(errno));
    return -1;
  }
  int rc = posix_spawn_file_actions_init(&fa);
  if (rc == 0) {
    rc = posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
    if (rc == 0)
      rc = posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, r->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (rc == 0) {
      char *argv[] = {(char *)r->o->kanban, "--db", r->db, "--port", "0", "--synchronous",
                      (char *)sync_lower(r->sync), "--no-demo", NULL};
      rc = posix_spawn(&r->pid, r->o->kanban, &fa, NULL, argv, environ);
    }
    posix_spawn_file_actions_destroy(&fa);
  }
  close(out[1]);
  if (rc != 0) {
    run_error(r, "cannot start %s: %s", r->o->kanban, strerror(rc));
    r->pid = -1;
    close(out[0]);
    return -1;
  }
  /* "kanban VERSION: listening on http://127.0.0.1:PORT/ (...)" */
  line[0] = '\0';
  while (!memchr(line, '\n', len) && len < sizeof line - 1) {
    struct pollfd p = {out[0], POLLIN, 0};
    if (poll(&p, 1, 20000) != 1)
      break;
    ssize_t got = read(out[0], line + len, sizeof line - 1 - len);
    if (got <= 0)
      break;
    len += (size_t)got;
    line[len] = '\0';
  }
  close(out[0]); /* it prints nothing else with --no-demo */
  const char *u = strstr(line, "http://127.0.0.1:");
  r->port = u ? atoi(u + strlen("http://127.0.0.1:")) : 0;
  if (r->port <= 0 || r->port > 65535) {
    run_error(r, "the server printed no URL line (got \"%.200s\")", line);
    kill(r->pid, SIGKILL);
    waitpid(r->pid, NULL, 0);
    r->pid = -1;
    show_log_tail(r);
    return -1;
  }
  snprintf(r->host, sizeof r->host, "127.0.0.1:%d", r->port);
  return 0;
}

/* SIGTERM and wait; it must exit 0 within 60 s. */
static void server_stop(run *r) {
  int st = 0;
  pid_t got = 0;
  if (r->pid <= 0)
    return;
  kill(r->pid, SIGTERM);
  int64_t until = mono_ns() + INT64_C(60000000000);
  while ((got = waitpid(r->pid, &st, WNOHANG)) == 0 && mono_ns() < until)
    nap_ms(5);
  if (got == 0) {
    run_error(r, "the server did not stop within 60 s of SIGTERM; killed");
    kill(r->pid, SIGKILL);
    waitpid(r->pid, &st, 0);
    show_log_tail(r);
  } else if (got < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    run_error(r, "the server ended with %s %d", got < 0 ? "waitpid error" : WIFEXITED(st) ? "status" : "signal",
              got < 0 ? errno : WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    show_log_tail(r);
  }
  r->pid = -1;
}

/* ---- setup through the API ------------------------------------------------------------------ */

typedef struct setup {
  run *r;
  int k;                        /* connections */
  int fd[SETUP_CONNS];
  char req[SETUP_CONNS][2048];
  char in[SETUP_CONNS][IN_CAP + 1];
  uint64_t seq;                 /* op ids */
} setup;

/* A POST with the headers the server wants. Its length, or -1. */
static int post(const run *r, char *buf, size_t cap, const char *path, const char *cookie, int json,
                const char *body) {
  int n = snprintf(buf, cap,
                   "POST %s HTTP/1.1\r\nHost: %s\r\nOrigin: http://%s\r\n%s%s%s"
                   "Content-Type: %s\r\nContent-Length: %zu\r\n\r\n%s",
                   path, r->host, r->host, cookie ? "Cookie: " : "", cookie ? cookie : "", cookie ? "\r\n" : "",
                   json ? "application/json" : "application/x-www-form-urlencoded", strlen(body), body);
  return n > 0 && (size_t)n < cap ? n : -1;
}

typedef int (*make_fn)(setup *s, int i, char *buf, size_t cap);
typedef int (*take_fn)(setup *s, int i, const answer *a, const char *in);

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
      answer a;
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
static int take_signup(setup *s, int i, const answer *a, const char *in) {
  if (a->status != 303)
    return -1;
  const char *eoh = in + a->head_len - 2, *line = in;
  while ((line = memchr(line, '\n', (size_t)(eoh - line))) != NULL) {
    line++;
    if (!header_is(line, eoh, "set-cookie:"))
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
static int take_action(setup *s, const answer *a, const char *in, int64_t *id) {
  const char *body = in + a->head_len;
  size_t n = a->total - a->head_len;
  int64_t bv = 0;
  if (a->status != 200 || !memmem(body, n, "\"replayed\":false", 16))
    return -1;
  if (body_int(body, n, "\"board_version\":", &bv) && bv > s->r->board_v0)
    s->r->board_v0 = bv;
  return id && !body_int(body, n, "\"id\":", id) ? -1 : 0;
}

static int mk_board(setup *s, int i, char *buf, size_t cap) {
  (void)i;
  return json_post(s, buf, cap, "/boards", 0, "\"title\":\"MoveCard over HTTP\"");
}

static int take_board(setup *s, int i, const answer *a, const char *in) {
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

static int take_member(setup *s, int i, const answer *a, const char *in) {
  (void)i;
  return take_action(s, a, in, NULL);
}

static int mk_list(setup *s, int i, char *buf, size_t cap) {
  char path[64], fields[64];
  snprintf(path, sizeof path, "/boards/%lld/lists", (long long)s->r->board);
  snprintf(fields, sizeof fields, "\"title\":\"u%d: %s\"", i / 2, i % 2 ? "done" : "to do");
  return json_post(s, buf, cap, path, i / 2, fields);
}

static int take_list(setup *s, int i, const answer *a, const char *in) {
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

static int take_card(setup *s, int i, const answer *a, const char *in) {
  mover *m = &s->r->m[i % s->r->N];
  int k = i / s->r->N;
  int64_t version = 0, index = -1;
  const char *body = in + a->head_len;
  size_t n = a->total - a->head_len;
  if (take_action(s, a, in, &m->cards[k]) != 0 || !body_int(body, n, "\"version\":", &version) ||
      !body_int(body, n, "\"index\":", &index) || version != 1 || index < 0 || index >= CARDS ||
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
    if ((s->fd[j] = dial(r, 0)) < 0) {
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

/* v >= 0 in decimal at the start of a NUM_W slot, the rest spaces. */
static void put_num(char *slot, int64_t v) {
  char digits[24];
  int n = snprintf(digits, sizeof digits, "%lld", (long long)v);
  memset(slot, ' ', NUM_W);
  memcpy(slot, digits, (size_t)n);
}

/* The per-card headers and the body, before the clock starts. 0, or -1. */
static int mover_prepare(run *r, mover *m) {
  char head[1024];
  m->body = malloc(BODY_LEN + 1);
  if (!m->body)
    return -1;
  snprintf(m->body, BODY_LEN + 1, "%s%*s%s%*s%s%*s%s%*s%s", BODY_A, OP_LEN, "", BODY_B, NUM_W, "", BODY_C, NUM_W,
           "", BODY_D, NUM_W, "", BODY_E);
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
  struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = m};
  if (epoll_ctl(r->ep, EPOLL_CTL_MOD, m->fd, &ev) != 0)
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
  put_num(m->body + OFF_LIST, m->lists[1 - from]);
  put_num(m->body + OFF_INDEX, m->to_index);
  put_num(m->body + OFF_VERSION, m->version[m->slot]);
  m->busy = 1;
  m->sent = 0;
  r->inflight++;
  m->t0 = mono_ns();
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

static void mover_answered(run *r, mover *m, const answer *a) {
  int64_t t1 = mono_ns(), version = 0, index = -1;
  const char *body = m->in + a->head_len;
  size_t n = a->total - a->head_len;
  m->busy = 0;
  r->inflight--;
  if (a->status != 200) {
    /* A refused move changed nothing; a stale one says the card's version. */
    if (a->status == 409 && body_int(body, n, "\"version\":", &version))
      m->version[m->slot] = version;
    run_error(r, "u%d: move answered HTTP %d: %.200s", m->user, a->status, body);
  } else {
    int have_v = body_int(body, n, "\"version\":", &version);
    int have_i = body_int(body, n, "\"index\":", &index);
    int fresh = memmem(body, n, "\"replayed\":false", 16) != NULL;
    m->ok++; /* a 200 is a recorded move, whatever else is wrong with it */
    if (have_v && have_i && fresh && version == m->version[m->slot] + 1 && index == m->to_index) {
      mover_apply(m, version);
      if (t1 >= r->ws && t1 < r->we) {
        r->window_moves++;
        lat_keep(r, (uint64_t)(t1 - m->t0));
      }
    } else {
      run_error(r, "u%d: move answered 200 but not as sent (version %lld, seen %lld, index %lld of %lld): %.200s",
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
  answer a;
  ssize_t got = recv(m->fd, m->in + m->in_len, IN_CAP - m->in_len, 0);
  if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    return;
  if (got <= 0) {
    mover_fail(r, m, got == 0 ? "closed by the server" : strerror(errno));
    return;
  }
  m->in_len += (size_t)got;
  m->in[m->in_len] = '\0';
  int rc = parse_answer(m->in, m->in_len, &a);
  if (rc == 0)
    return;
  if (rc < 0 || !m->busy || a.total != m->in_len) {
    mover_fail(r, m, rc < 0 ? "an answer it cannot parse" : "an answer it did not ask for");
    return;
  }
  m->in_len = 0;
  mover_answered(r, m, &a);
}

/* ---- CPU time from /proc -------------------------------------------------------------------------- */

/* utime + stime in seconds of one stat file; its comm into comm. -1 on failure. */
static double proc_cpu(const char *path, char *comm, size_t cap) {
  char buf[1024];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return -1;
  buf[n] = '\0';
  char *open_p = strchr(buf, '('), *close_p = strrchr(buf, ')');
  if (!open_p || !close_p || close_p < open_p)
    return -1;
  if (comm) {
    size_t len = (size_t)(close_p - open_p - 1);
    if (len >= cap)
      len = cap - 1;
    memcpy(comm, open_p + 1, len);
    comm[len] = '\0';
  }
  /* fields after the comm, counting the state as field 3: utime is 14, stime 15 */
  char *p = close_p + 1;
  unsigned long long ticks[2] = {0, 0};
  for (int field = 3; field <= 15; field++) {
    while (*p == ' ')
      p++;
    if (!*p)
      return -1;
    if (field >= 14)
      ticks[field - 14] = strtoull(p, NULL, 10);
    p += strcspn(p, " ");
  }
  return (double)(ticks[0] + ticks[1]) / (double)sysconf(_SC_CLK_TCK);
}

typedef struct snap {
  int64_t t;
  int have;
  double th[NTH];
  double self, machine;
} snap;

static double machine_busy(void) {
  unsigned long long f[8] = {0};
  FILE *fp = fopen("/proc/stat", "r");
  if (!fp)
    return -1;
  int n = fscanf(fp, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &f[0], &f[1], &f[2], &f[3], &f[4], &f[5],
                 &f[6], &f[7]);
  fclose(fp);
  if (n != 8)
    return -1;
  /* user nice system idle iowait irq softirq steal: all but idle and iowait */
  return (double)(f[0] + f[1] + f[2] + f[5] + f[6] + f[7]) / (double)sysconf(_SC_CLK_TCK);
}

static void take_snap(const run *r, snap *s) {
  char dir[64];
  struct timespec ts;
  memset(s, 0, sizeof *s);
  s->t = mono_ns();
  snprintf(dir, sizeof dir, "/proc/%d/task", (int)r->pid);
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      char path[128], comm[64];
      if (e->d_name[0] < '0' || e->d_name[0] > '9')
        continue;
      snprintf(path, sizeof path, "%s/%.20s/stat", dir, e->d_name);
      double c = proc_cpu(path, comm, sizeof comm);
      if (c < 0)
        continue;
      int k = atoi(e->d_name) == (int)r->pid        ? TH_LOOP
              : strcmp(comm, "lith-writer") == 0     ? TH_WRITER
              : strcmp(comm, "lith-waker") == 0      ? TH_WAKER
              : strcmp(comm, "lith-checkpoint") == 0 ? TH_CKPT
                                                     : TH_OTHER;
      s->th[k] += c;
    }
    closedir(d);
    s->have = 1;
  }
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  s->self = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
  s->machine = machine_busy();
}

/* Open the N connections, run the closed loops through the window, drain. */
static void run_moves(run *r, snap sn[2]) {
  enum { EVS = 256 };
  struct epoll_event evs[EVS];
  int edge = 0;
  if ((r->ep = epoll_create1(EPOLL_CLOEXEC)) < 0) {
    run_error(r, "epoll_create1: %s", strerror(errno));
    return;
  }
  for (int i = 0; i < r->N; i++) {
    mover *m = &r->m[i];
    m->fd = dial(r, 1);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = m};
    if (m->fd < 0 || epoll_ctl(r->ep, EPOLL_CTL_ADD, m->fd, &ev) != 0) {
      run_error(r, "connection %d: %s", i, strerror(errno));
      return;
    }
  }
  r->ws = mono_ns() + (int64_t)(r->o->warmup * 1e9);
  r->we = r->ws + (int64_t)(r->o->seconds * 1e9);
  for (int i = 0; i < r->N; i++)
    mover_send(r, &r->m[i]);
  for (;;) {
    int64_t now = mono_ns();
    if (edge < 2 && now >= (edge ? r->we : r->ws)) {
      take_snap(r, &sn[edge++]);
      continue;
    }
    if (edge == 2 && r->inflight == 0)
      break;
    if (now > r->we + INT64_C(30000000000)) {
      run_error(r, "%d moves unanswered 30 s after the window", r->inflight);
      break;
    }
    int64_t wake = edge == 0 ? r->ws : edge == 1 ? r->we : now + 100000000;
    int n = epoll_wait(r->ep, evs, EVS, (int)((wake - now) / 1000000 + 1));
    if (n < 0 && errno != EINTR) {
      run_error(r, "epoll_wait: %s", strerror(errno));
      break;
    }
    for (int i = 0; i < n; i++) {
      mover *m = evs[i].data.ptr;
      if (m->fd < 0)
        continue;
      if ((evs[i].events & EPOLLOUT) && m->busy)
        mover_flush(r, m);
      if (m->fd >= 0 && (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
        mover_readable(r, m);
    }
  }
}

/* ---- the check ------------------------------------------------------------------------------------ */

static int64_t one_int(sqlite3 *db, const char *sql, int64_t arg, int *failed) {
  sqlite3_stmt *st = NULL;
  int64_t v = -1;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
    if (sqlite3_bind_parameter_count(st) > 0)
      sqlite3_bind_int64(st, 1, arg);
    if (sqlite3_step(st) == SQLITE_ROW)
      v = sqlite3_column_int64(st, 0);
    else
      (*failed)++;
  } else {
    (*failed)++;
  }
  sqlite3_finalize(st);
  return v;
}

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
  if (sqlite3_prepare_v2(db, "PRAGMA quick_check", -1, &st, NULL) != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW ||
      strcmp((const char *)sqlite3_column_text(st, 0), "ok") != 0)
    run_error(r, "check: quick_check failed");
  sqlite3_finalize(st);
  st = NULL;
  int64_t dup = one_int(db,
                        "SELECT count(*) FROM (SELECT 1 FROM cards WHERE archived = 0"
                        " GROUP BY list_id, pos HAVING count(*) > 1)",
                        0, &failed);
  if (dup != 0)
    run_error(r, "check: %lld positions held by two live cards of a list", (long long)dup);
  int64_t ops = one_int(db, "SELECT count(*) FROM ops WHERE kind = ?", KIND_MOVE_CARD, &failed);
  int64_t bumps = one_int(db, "SELECT sum(version - 1) FROM cards", 0, &failed);
  int64_t bv = one_int(db, "SELECT version FROM boards WHERE id = ?", r->board, &failed);
  if (ops != total || bumps != total || bv - r->board_v0 != total)
    run_error(r, "check: %lld moves answered 200, but %lld move op records, %lld card version bumps, board version +%lld",
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
  if (sqlite3_prepare_v2(db, "SELECT id, version FROM cards WHERE list_id = ? AND archived = 0 ORDER BY pos, id", -1,
                         &st, NULL) != SQLITE_OK) {
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

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

static void run_once(const opts *o, int sync, int N, int round, outcome *out) {
  run *r = calloc(1, sizeof *r);
  snap sn[2];
  memset(out, 0, sizeof *out);
  memset(sn, 0, sizeof sn);
  for (int v = 0; v < NV; v++)
    out->v[v] = NAN;
  out->ran = 1;
  if (!r || !(r->m = calloc((size_t)N, sizeof *r->m))) {
    fprintf(stderr, "kanban_http: out of memory\n");
    out->errors = 1;
    free(r);
    return;
  }
  int64_t t_begin = mono_ns();
  r->o = o;
  r->sync = sync;
  r->N = N;
  r->round = round;
  r->ep = -1;
  r->lat_rng = (uint64_t)round * 7 + 3;
  snprintf(r->db, sizeof r->db, "%s/kanban-%s-n%d-r%d.db", o->db_dir, sync_upper(sync), N, round + 1);
  snprintf(r->log, sizeof r->log, "%s/kanban-stderr.log", o->db_dir);
  remove_db(r->db);
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
        out->v[V_SETUP_S] = (double)(mono_ns() - t_begin) / 1e9;
        run_moves(r, sn);
      }
    }
    for (int p = 0; p < N; p++)
      if (r->m[p].fd >= 0) {
        close(r->m[p].fd);
        r->m[p].fd = -1;
      }
    int64_t before = r->errors;
    server_stop(r);
    if (r->msgs > MSG_MAX)
      fprintf(stderr, "  (%d more errors of this run not shown)\n", r->msgs - MSG_MAX);
    r->msgs = 0; /* the check's findings are always shown */
    if (r->errors == before && r->board > 0)
      check_db(r);
  }

  /* the figures */
  out->window_moves = r->window_moves;
  for (int p = 0; p < N; p++)
    out->answered_ok += r->m[p].ok;
  out->v[V_MOVES_S] = (double)r->window_moves / o->seconds;
  if (r->lat_n) {
    qsort(r->lat, r->lat_n, sizeof *r->lat, cmp_u64);
    size_t i50 = (size_t)ceil(0.50 * (double)r->lat_n) - 1, i99 = (size_t)ceil(0.99 * (double)r->lat_n) - 1;
    out->v[V_P50] = (double)r->lat[i50] / 1e6;
    out->v[V_P99] = (double)r->lat[i99] / 1e6;
    out->v[V_MAX] = (double)r->lat_max / 1e6;
    out->sampled = r->lat_seen > r->lat_n;
  }
  double dt = (double)(sn[1].t - sn[0].t) / 1e9;
  if (sn[0].t && sn[1].t && dt > 0) {
    if (sn[0].have && sn[1].have) {
      double all = 0;
      for (int k = 0; k < NTH; k++) {
        double d = sn[1].th[k] - sn[0].th[k];
        out->v[V_CPU_TH + k] = d / dt;
        all += d;
      }
      out->v[V_CPU_SRV] = all / dt;
      if (r->window_moves)
        out->v[V_US_SRV] = all / (double)r->window_moves * 1e6 * (o->seconds / dt);
    }
    out->v[V_CPU_CLI] = (sn[1].self - sn[0].self) / dt;
    if (r->window_moves)
      out->v[V_US_CLI] = (sn[1].self - sn[0].self) / (double)r->window_moves * 1e6 * (o->seconds / dt);
    if (sn[0].machine >= 0 && sn[1].machine >= 0 && !isnan(out->v[V_CPU_SRV]))
      out->v[V_CPU_ELSE] = (sn[1].machine - sn[0].machine) / dt - out->v[V_CPU_SRV] - out->v[V_CPU_CLI];
  }
  out->errors = r->errors;

  fprintf(stderr,
          "[round %d/%d] %-6s N=%-4d %8.0f moves/s  p50 %.3f p99 %.3f max %.3f ms  CPU server %.2f (loop %.2f writer "
          "%.2f) client %.2f else %.2f  errors %lld  (setup %.1f s, %.1f s)\n",
          round + 1, o->rounds, sync_upper(sync), N, out->v[V_MOVES_S], out->v[V_P50], out->v[V_P99], out->v[V_MAX],
          out->v[V_CPU_SRV], out->v[V_CPU_TH + TH_LOOP], out->v[V_CPU_TH + TH_WRITER], out->v[V_CPU_CLI],
          out->v[V_CPU_ELSE], (long long)out->errors, out->v[V_SETUP_S], (double)(mono_ns() - t_begin) / 1e9);

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
  remove_db(r->db);
  free(r->lat);
  free(r->m);
  free(r);
}

/* ---- tables ------------------------------------------------------------------------------------------ */

typedef struct bench {
  opts o;
  outcome *res; /* [sync][conns][round] */
  FILE *csv;
  int64_t errors;
} bench;

static outcome *cell_at(bench *b, int si, int ci, int round) {
  return &b->res[((size_t)si * (size_t)b->o.nconns + (size_t)ci) * (size_t)b->o.rounds + (size_t)round];
}

static int cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

typedef struct stat3 {
  double med, lo, hi;
} stat3;

static stat3 over_rounds(bench *b, int si, int ci, int v) {
  double vals[MAX_ROUNDS];
  int n = 0;
  stat3 s = {NAN, NAN, NAN};
  for (int k = 0; k < b->o.rounds; k++) {
    const outcome *x = cell_at(b, si, ci, k);
    if (x->ran && !isnan(x->v[v]))
      vals[n++] = x->v[v];
  }
  if (!n)
    return s;
  qsort(vals, (size_t)n, sizeof *vals, cmp_dbl);
  s.lo = vals[0];
  s.hi = vals[n - 1];
  s.med = n % 2 ? vals[n / 2] : (vals[n / 2 - 1] + vals[n / 2]) / 2;
  return s;
}

static int64_t cell_errors(bench *b, int si, int ci) {
  int64_t e = 0;
  for (int k = 0; k < b->o.rounds; k++)
    e += cell_at(b, si, ci, k)->errors;
  return e;
}

static void csv_value(FILE *f, double v) {
  if (isnan(v))
    fputs(",", f);
  else
    fprintf(f, ",%.6g", v);
}

static void csv_line(bench *b, int si, int ci, const char *round, const double *v, long long moves, long long errors,
                     int sampled) {
  if (!b->csv)
    return;
  fprintf(b->csv, "%s,%d,%s", sync_upper(b->o.sync[si]), b->o.conns[ci], round);
  for (int k = 0; k < NV; k++)
    csv_value(b->csv, v[k]);
  if (moves >= 0)
    fprintf(b->csv, ",%lld", moves);
  else
    fputs(",", b->csv);
  fprintf(b->csv, ",%lld,%d\n", errors, sampled);
  fflush(b->csv);
}

static void fmt_ms(char *buf, size_t cap, double ms) {
  if (isnan(ms))
    snprintf(buf, cap, "–");
  else if (ms < 10)
    snprintf(buf, cap, "%.3f", ms);
  else if (ms < 100)
    snprintf(buf, cap, "%.2f", ms);
  else
    snprintf(buf, cap, "%.0f", ms);
}

static void fmt_cpu(char *buf, size_t cap, double cpus) {
  if (isnan(cpus))
    snprintf(buf, cap, "–");
  else
    snprintf(buf, cap, "%.0f%%", cpus * 100);
}

static void fmt_us(char *buf, size_t cap, double us) {
  if (isnan(us))
    snprintf(buf, cap, "–");
  else
    snprintf(buf, cap, "%.1f", us);
}

static void print_tables(bench *b) {
  const opts *o = &b->o;
  for (int si = 0; si < o->nsync; si++) {
    printf("\n### synchronous=%s\n\n", sync_upper(o->sync[si]));
    printf("| conns | moves/s median (min–max) | p50 ms | p99 ms | max ms | err | server CPU | client CPU | else CPU "
           "| server µs/move | client µs/move | setup s |\n");
    printf("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for (int ci = 0; ci < o->nconns; ci++) {
      char p50[24], p99[24], mx[24], srv[24], cli[24], els[24], us1[24], us2[24];
      stat3 mv = over_rounds(b, si, ci, V_MOVES_S);
      fmt_ms(p50, sizeof p50, over_rounds(b, si, ci, V_P50).med);
      fmt_ms(p99, sizeof p99, over_rounds(b, si, ci, V_P99).med);
      fmt_ms(mx, sizeof mx, over_rounds(b, si, ci, V_MAX).hi);
      fmt_cpu(srv, sizeof srv, over_rounds(b, si, ci, V_CPU_SRV).med);
      fmt_cpu(cli, sizeof cli, over_rounds(b, si, ci, V_CPU_CLI).med);
      fmt_cpu(els, sizeof els, over_rounds(b, si, ci, V_CPU_ELSE).hi);
      fmt_us(us1, sizeof us1, over_rounds(b, si, ci, V_US_SRV).med);
      fmt_us(us2, sizeof us2, over_rounds(b, si, ci, V_US_CLI).med);
      printf("| %d | %.0f (%.0f–%.0f) | %s | %s | %s | %lld | %s | %s | %s | %s | %s | %.1f |\n", o->conns[ci],
             mv.med, mv.lo, mv.hi, p50, p99, mx, (long long)cell_errors(b, si, ci), srv, cli, els, us1, us2,
             over_rounds(b, si, ci, V_SETUP_S).med);
    }
  }
  printf("\nMedians over rounds (moves/s also min–max; max ms and else CPU: the worst round). moves/s: moves\n"
         "answered 200 inside the window. Latency: from sending the request to the whole answer. CPU in %% of\n"
         "one CPU over the window (the machine has %ld): the server process; this client; else: the rest of the\n"
         "machine's busy time (other processes, interrupts: noise when much above 0). µs/move: CPU time over\n"
         "the moves answered in the window. setup: spawn, sign-ups (argon2id), board, lists, cards.\n",
         sysconf(_SC_NPROCESSORS_ONLN));

  printf("\n### where the server's CPU goes (medians, %% of one CPU)\n\n| sync | conns | moves/s |");
  for (int k = 0; k < NTH; k++)
    printf(" %s |", TH_HEAD[k]);
  printf(" server total | client |\n|---|--:|--:|");
  for (int k = 0; k < NTH; k++)
    printf("--:|");
  printf("--:|--:|\n");
  for (int si = 0; si < o->nsync; si++)
    for (int ci = 0; ci < o->nconns; ci++) {
      char c[24];
      printf("| %s | %d | %.0f |", sync_upper(o->sync[si]), o->conns[ci], over_rounds(b, si, ci, V_MOVES_S).med);
      for (int k = 0; k < NTH; k++) {
        fmt_cpu(c, sizeof c, over_rounds(b, si, ci, V_CPU_TH + k).med);
        printf(" %s |", c);
      }
      fmt_cpu(c, sizeof c, over_rounds(b, si, ci, V_CPU_SRV).med);
      printf(" %s |", c);
      fmt_cpu(c, sizeof c, over_rounds(b, si, ci, V_CPU_CLI).med);
      printf(" %s |\n", c);
    }
  printf("\nFrom /proc/PID/task/*/stat (10 ms ticks) at the window's edges.\n");
}

static void print_targets(bench *b) {
  const opts *o = &b->o;
  printf("\n### target\n\n");
  int ci = -1;
  for (int i = 0; i < o->nconns; i++)
    if (o->conns[i] == 64)
      ci = i;
  for (int si = 0; si < o->nsync; si++) {
    if (ci < 0)
      break;
    double v = over_rounds(b, si, ci, V_MOVES_S).med;
    printf("- %s 64 connections %s: ≥ 15000 moves/s end to end — %.0f moves/s (median of rounds)%s\n",
           v >= 15000 ? "PASS" : "MISS", sync_upper(o->sync[si]), v,
           o->sync[si] == SYNC_FULL ? " (the issue's target)" : "");
  }
  if (ci < 0)
    printf("- n/a  64 connections: not run\n");
  printf("- %s errors, every run: 0 — %lld\n", b->errors ? "FAIL" : "PASS", (long long)b->errors);
}

/* ---- options ----------------------------------------------------------------------------------------- */

static void usage(FILE *f) {
  fprintf(f,
          "usage: bench/kanban_http [options]   (MoveCard over HTTP against the kanban server)\n"
          "  --conns LIST     keep-alive connections, one user each (default 1,16,64)\n"
          "  --sync LIST      full,normal (default both; full is the issue's target)\n"
          "  --seconds S      measured window (default 3)\n"
          "  --warmup S       before the window (default 0.5)\n"
          "  --rounds N       rounds, cells interleaved (default 3)\n"
          "  --db-dir DIR     where the databases go (default a new /tmp/lith-kanban-http-XXXXXX)\n"
          "  --kanban PATH    the server binary (default " KANBAN_PATH ")\n"
          "  --csv PATH       CSV output (default bench/results/kanban_http-YYYYMMDD-HHMMSS.csv)\n"
          "  --quick          smoke run: 1 round, 1 s, warm-up 0.25 s, conns 1,64\n"
          "  --help\n");
}

static void bad_usage(const char *what, const char *arg) {
  fprintf(stderr, "kanban_http: %s: %s\n", what, arg);
  usage(stderr);
  exit(2);
}

static double seconds_arg(const char *v, const char *opt, double min) {
  char *e;
  double x = strtod(v, &e);
  if (e == v || *e || !(x >= min) || x > 3600)
    bad_usage("bad value", opt);
  return x;
}

static void parse_opts(int argc, char **argv, opts *o) {
  int quick = 0, got_conns = 0, got_sec = 0, got_warm = 0, got_rounds = 0;
  memset(o, 0, sizeof *o);
  o->kanban = KANBAN_PATH;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      exit(0);
    }
    if (!strcmp(a, "--quick")) {
      quick = 1;
      continue;
    }
    if (i + 1 >= argc)
      bad_usage("unknown option or missing value", a);
    const char *v = argv[++i];
    if (!strcmp(a, "--conns")) {
      char buf[256], *save = NULL;
      snprintf(buf, sizeof buf, "%s", v);
      o->nconns = 0;
      for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *e;
        long n = strtol(t, &e, 10);
        if (*e || n < 1 || n > MAX_CONNS || o->nconns == MAX_CELLS)
          bad_usage("--conns takes up to 16 counts of 1..2000", v);
        o->conns[o->nconns++] = (int)n;
      }
      if (!o->nconns)
        bad_usage("--conns is empty", v);
      got_conns = 1;
    } else if (!strcmp(a, "--sync")) {
      char buf[64], *save = NULL;
      snprintf(buf, sizeof buf, "%s", v);
      o->nsync = 0;
      for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int s = !strcmp(t, "full") ? SYNC_FULL : !strcmp(t, "normal") ? SYNC_NORMAL : -1;
        if (s < 0 || o->nsync == 2 || (o->nsync == 1 && o->sync[0] == s))
          bad_usage("--sync takes full, normal or both", v);
        o->sync[o->nsync++] = s;
      }
      if (!o->nsync)
        bad_usage("--sync is empty", v);
    } else if (!strcmp(a, "--seconds")) {
      o->seconds = seconds_arg(v, a, 0.1);
      got_sec = 1;
    } else if (!strcmp(a, "--warmup")) {
      o->warmup = seconds_arg(v, a, 0);
      got_warm = 1;
    } else if (!strcmp(a, "--rounds")) {
      char *e;
      long n = strtol(v, &e, 10);
      if (*e || n < 1 || n > MAX_ROUNDS)
        bad_usage("--rounds takes 1..50", v);
      o->rounds = (int)n;
      got_rounds = 1;
    } else if (!strcmp(a, "--db-dir")) {
      o->db_dir = v;
    } else if (!strcmp(a, "--kanban")) {
      o->kanban = v;
    } else if (!strcmp(a, "--csv")) {
      o->csv = v;
    } else {
      bad_usage("unknown option", a);
    }
  }
  if (!got_conns) {
    static const int full[] = {1, 16, 64}, smoke[] = {1, 64};
    o->nconns = quick ? 2 : 3;
    memcpy(o->conns, quick ? smoke : full, (size_t)o->nconns * sizeof *full);
  }
  if (!o->nsync) {
    o->sync[0] = SYNC_FULL;
    o->sync[1] = SYNC_NORMAL;
    o->nsync = 2;
  }
  if (!got_sec)
    o->seconds = quick ? 1 : 3;
  if (!got_warm)
    o->warmup = quick ? 0.25 : 0.5;
  if (!got_rounds)
    o->rounds = quick ? 1 : 3;
}

/* ---- main ---------------------------------------------------------------------------------------------- */

static void cpu_name(char *buf, size_t cap) {
  char line[512];
  FILE *f = fopen("/proc/cpuinfo", "r");
  snprintf(buf, cap, "?");
  if (!f)
    return;
  while (fgets(line, sizeof line, f)) {
    const char *colon = strchr(line, ':');
    if (strncmp(line, "model name", 10) == 0 && colon) {
      colon += 1 + strspn(colon + 1, " \t");
      snprintf(buf, cap, "%.*s", (int)strcspn(colon, "\n"), colon);
      break;
    }
  }
  fclose(f);
}

static void print_header(const opts *o, int argc, char **argv, const char *csv) {
  char cpu[256], when[64];
  struct utsname u;
  time_t now = time(NULL);
  cpu_name(cpu, sizeof cpu);
  strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", gmtime(&now));
  printf("# kanban MoveCard over HTTP\n\ncommand:");
  for (int i = 0; i < argc; i++)
    printf(" %s", argv[i]);
  printf("\ndate: %s\n", when);
  printf("machine: nproc %ld, CPU %s, kernel %s; SQLite %s (for the check)\n", sysconf(_SC_NPROCESSORS_ONLN), cpu,
         uname(&u) == 0 ? u.release : "?", sqlite3_libversion());
  printf("server: %s --port 0 --synchronous MODE --no-demo; databases in %s\n", o->kanban, o->db_dir);
  printf("plan: connections");
  for (int i = 0; i < o->nconns; i++)
    printf("%s%d", i ? "," : " ", o->conns[i]);
  printf("; synchronous");
  for (int i = 0; i < o->nsync; i++)
    printf("%s%s", i ? "," : " ", sync_upper(o->sync[i]));
  printf("; one shared board, %d cards and two lists per user; %g s window after %g s warm-up; %d round%s\n", CARDS,
         o->seconds, o->warmup, o->rounds, o->rounds > 1 ? "s" : "");
  printf("csv: %s\n", csv ? csv : "(none)");
  fflush(stdout);
}

int main(int argc, char **argv) {
  bench b;
  char tmp[] = "/tmp/lith-kanban-http-XXXXXX", csv[4096], log[4200];
  int own_dir = 0;
  memset(&b, 0, sizeof b);
  parse_opts(argc, argv, &b.o);
  opts *o = &b.o;
  int64_t t_begin = mono_ns();
  signal(SIGPIPE, SIG_IGN);
  if (access(o->kanban, X_OK) != 0) {
    fprintf(stderr, "kanban_http: cannot run %s (%s): build it (make %s) or pass --kanban PATH\n", o->kanban,
            strerror(errno), o->kanban);
    return 2;
  }
  if (!o->db_dir) {
    if (!mkdtemp(tmp)) {
      perror("kanban_http: mkdtemp");
      return 1;
    }
    o->db_dir = tmp;
    own_dir = 1;
  } else if (mkdir(o->db_dir, 0777) != 0 && errno != EEXIST) {
    perror("kanban_http: --db-dir");
    return 1;
  }
  if (o->csv) {
    snprintf(csv, sizeof csv, "%s", o->csv);
  } else {
    char stamp[32];
    time_t now = time(NULL);
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", localtime(&now));
    mkdir("bench", 0777);
    mkdir("bench/results", 0777);
    snprintf(csv, sizeof csv, "bench/results/kanban_http-%s.csv", stamp);
  }
  if ((b.csv = fopen(csv, "w")) == NULL) {
    fprintf(stderr, "kanban_http: cannot write %s: %s\n", csv, strerror(errno));
  } else {
    fputs("sync,conns,round", b.csv);
    for (int k = 0; k < NV; k++)
      fprintf(b.csv, ",%s", V_CSV[k]);
    fputs(",window_moves,errors,sampled\n", b.csv);
  }
  print_header(o, argc, argv, b.csv ? csv : NULL);
  b.res = calloc((size_t)o->nsync * (size_t)o->nconns * (size_t)o->rounds, sizeof *b.res);
  if (!b.res) {
    fprintf(stderr, "kanban_http: out of memory\n");
    return 1;
  }

  for (int round = 0; round < o->rounds; round++)
    for (int si = 0; si < o->nsync; si++)
      for (int ci = 0; ci < o->nconns; ci++) {
        outcome *x = cell_at(&b, si, ci, round);
        char rname[16];
        run_once(o, o->sync[si], o->conns[ci], round, x);
        b.errors += x->errors;
        snprintf(rname, sizeof rname, "%d", round + 1);
        csv_line(&b, si, ci, rname, x->v, x->window_moves, x->errors, x->sampled);
      }

  for (int si = 0; si < o->nsync; si++)
    for (int ci = 0; ci < o->nconns; ci++) {
      static const char *const kind[3] = {"median", "min", "max"};
      int sampled = 0;
      for (int k = 0; k < o->rounds; k++)
        sampled |= cell_at(&b, si, ci, k)->sampled;
      for (int w = 0; w < 3; w++) {
        double v[NV];
        for (int k = 0; k < NV; k++) {
          stat3 s = over_rounds(&b, si, ci, k);
          v[k] = w == 0 ? s.med : w == 1 ? s.lo : s.hi;
        }
        csv_line(&b, si, ci, kind[w], v, -1, (long long)cell_errors(&b, si, ci), sampled);
      }
    }
  if (b.csv && fclose(b.csv) != 0)
    fprintf(stderr, "kanban_http: writing %s failed\n", csv);

  print_tables(&b);
  print_targets(&b);
  printf("\nerrors, every run: %lld%s\n", (long long)b.errors, b.errors ? " (FAILED)" : "");
  printf("elapsed: %.1f s\n", (double)(mono_ns() - t_begin) / 1e9);
  snprintf(log, sizeof log, "%s/kanban-stderr.log", o->db_dir);
  unlink(log);
  if (own_dir)
    rmdir(o->db_dir);
  free(b.res);
  return b.errors ? 1 : 0;
}
