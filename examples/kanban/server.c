/*
 * kanban — a collaborative kanban board served by lith's single writer.
 *
 * Design:
 *   - One libuv loop on the main thread carries the HTTP server (http/, h2o),
 *     the lith_uv bridge (command completions), the live hub (srv_live: the
 *     on_commit hook's news) and the signal watchers. lith's writer thread
 *     does every write: each action is one lith command, and its HTTP answer
 *     leaves only after the batch committed. libuv's thread pool runs every
 *     read (lith_read) and every password hash (argon2id), so no SQLite call
 *     and no hash ever runs on the loop thread.
 *   - The pool gets readers + 2 threads (unless UV_THREADPOOL_SIZE says
 *     otherwise): each lith reader can be busy while at most two argon2id
 *     hashes run (auth_pw's gate).
 *   - Startup: options, libsodium, the hub, lith_open with the model's
 *     migrations and srv_live_hook as on_commit, the demo board (alice and
 *     bob, members of "Demo board") when the database has no alice yet, the
 *     bridge, the HTTP server and its routes (srv_routes.c), the listener;
 *     then one line on stdout with the URL (tests read the port from it) and
 *     the demo sign-ins. Any failure: a message, exit 1.
 *   - Shutdown on SIGTERM/SIGINT, a chain of callbacks so the loop runs until
 *     each stage is over: refuse waiting sign-ins, stop the HTTP server
 *     (event streams end, requests in flight are answered, grace 5 s) ->
 *     close the hub and the bridge (every accepted command's callback ran)
 *     -> the loop has nothing left and uv_run returns. Then the HTTP server
 *     is destroyed, lith_close drains and checkpoints, exit 0.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>
#include <uv.h>

#include "auth_pw.h"
#include "auth_session.h"
#include "board.h"
#include "http.h"
#include "lith.h"
#include "lith_uv.h"
#include "srv_app.h"
#include "srv_live.h"

#define STOP_GRACE_MS 5000

struct opts {
  const char *db;
  const char *host;
  int port;
  int synchronous;
  int demo;
};

struct server {
  srv_app app;
  uv_loop_t loop;
  uv_signal_t sigterm, sigint;
  int signals_open;
  lith_uv *bridge; /* ours until closed (app.bridge is cleared first) */
};

/* The demo's people: name, password. Printed at startup. */
static const char *const demo_users[][2] = {{"alice", "alice-kanban"}, {"bob", "bob-kanban"}};
#define N_DEMO (int)(sizeof demo_users / sizeof demo_users[0])

static void usage(FILE *f) {
  fprintf(f, "usage: kanban [--port N] [--host ADDR] [--db FILE] [--synchronous normal|full] [--no-demo]\n"
             "  --port N          TCP port (default 8080; 0 picks a free one)\n"
             "  --host ADDR       address to listen on (default 127.0.0.1)\n"
             "  --db FILE         the database (default kanban.db; created if missing)\n"
             "  --synchronous M   normal (default): an answered change survives a crash of the\n"
             "                    process; full: also a power loss\n"
             "  --no-demo         do not create the demo board and its users\n");
}

/* 0: run; 1: exit 0 (help); 2: bad usage. */
static int parse_opts(int argc, char **argv, struct opts *o) {
  static const struct option longopts[] = {{"port", required_argument, NULL, 'p'},
                                           {"host", required_argument, NULL, 'H'},
                                           {"db", required_argument, NULL, 'd'},
                                           {"synchronous", required_argument, NULL, 's'},
                                           {"no-demo", no_argument, NULL, 'n'},
                                           {"help", no_argument, NULL, 'h'},
                                           {NULL, 0, NULL, 0}};
  int c;
  o->db = "kanban.db";
  o->host = "127.0.0.1";
  o->port = 8080;
  o->synchronous = LITH_SYNC_NORMAL;
  o->demo = 1;
  while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
    char *end;
    long v;
    switch (c) {
    case 'p':
      errno = 0;
      v = strtol(optarg, &end, 10);
      if (errno != 0 || *end != '\0' || end == optarg || v < 0 || v > 65535) {
        fprintf(stderr, "kanban: --port %s: a port is 0..65535\n", optarg);
        return 2;
      }
      o->port = (int)v;
      break;
    case 'H': o->host = optarg; break;
    case 'd': o->db = optarg; break;
    case 's':
      if (strcmp(optarg, "normal") == 0)
        o->synchronous = LITH_SYNC_NORMAL;
      else if (strcmp(optarg, "full") == 0)
        o->synchronous = LITH_SYNC_FULL;
      else {
        fprintf(stderr, "kanban: --synchronous %s: normal or full\n", optarg);
        return 2;
      }
      break;
    case 'n': o->demo = 0; break;
    case 'h': usage(stdout); return 1;
    default: usage(stderr); return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "kanban: unexpected argument %s\n", argv[optind]);
    usage(stderr);
    return 2;
  }
  return 0;
}

/* ---- The demo board ----------------------------------------------------------- */

static int read_user(lith_rx *rx, void *arg) { return kb_read_user(rx, arg); }

/* Create alice and bob and their board, once per database. Runs before the
 * loop starts (lith_do blocks; nothing else is served yet). */
static int seed_demo(lith *db) {
  kb_user_query q;
  kb_user_args u;
  kb_seed_args s;
  int64_t ids[N_DEMO];
  char hash[AUTH_PW_HASH_MAX];
  int i, rc;

  memset(&q, 0, sizeof q);
  q.name = demo_users[0][0];
  rc = lith_read(db, read_user, &q);
  if (rc == LITH_OK)
    return 0; /* seeded before */
  if (rc != KB_NOT_FOUND) {
    fprintf(stderr, "kanban: cannot read the users: %s\n", lith_errmsg(db));
    return -1;
  }
  for (i = 0; i < N_DEMO; i++) {
    memset(&u, 0, sizeof u);
    if (auth_pw_hash(demo_users[i][1], hash) != 0) {
      fprintf(stderr, "kanban: cannot hash a password: out of memory\n");
      return -1;
    }
    u.name = demo_users[i][0];
    u.pw_hash = hash;
    if ((rc = lith_do(db, kb_create_user, &u)) != LITH_OK) {
      if (rc != KB_EXISTS) {
        fprintf(stderr, "kanban: cannot create user %s: %s\n", u.name, lith_errmsg(db));
        return -1;
      }
      /* bob exists (someone signed up as bob): look him up and use him */
      memset(&q, 0, sizeof q);
      q.name = demo_users[i][0];
      if (lith_read(db, read_user, &q) != LITH_OK)
        return -1;
      u.user_id = q.user_id;
    }
    ids[i] = u.user_id;
  }
  memset(&s, 0, sizeof s);
  s.user_ids = ids;
  s.n_users = N_DEMO;
  s.title = "Demo board";
  if (lith_do(db, kb_seed_demo, &s) != LITH_OK) {
    fprintf(stderr, "kanban: cannot create the demo board: %s\n", lith_errmsg(db));
    return -1;
  }
  return 0;
}

/* ---- Shutdown chain ------------------------------------------------------------- */

static void on_bridge_closed(void *ctx) {
  struct server *s = ctx;
  s->bridge = NULL; /* nothing of ours is left on the loop: uv_run returns */
}

static void close_bridge(struct server *s) {
  srv_routes_close(&s->app); /* what waits to be submitted goes first */
  s->app.bridge = NULL;      /* the routes submit nothing from now on */
  if (s->bridge != NULL)
    lith_uv_close(s->bridge, on_bridge_closed, s);
}

static void on_http_stopped(lith_http_server *srv, void *arg) {
  struct server *s = arg;
  (void)srv;
  srv_live_close(s->app.live);
  close_bridge(s);
}

static void close_signals(struct server *s) {
  if (!s->signals_open)
    return;
  uv_close((uv_handle_t *)&s->sigterm, NULL);
  uv_close((uv_handle_t *)&s->sigint, NULL);
  s->signals_open = 0;
}

static void close_prune(srv_app *app) {
  if (!app->prune_open)
    return;
  uv_close((uv_handle_t *)&app->prune, NULL);
  app->prune_open = 0;
}

static void begin_stop(struct server *s) {
  if (s->app.stopping)
    return;
  s->app.stopping = 1;
  close_signals(s);
  close_prune(&s->app);
  if (s->app.gate != NULL)
    auth_gate_stop(s->app.gate);
  if (lith_http_server_stop(s->app.http, STOP_GRACE_MS, on_http_stopped, s) != LITH_HTTP_OK)
    on_http_stopped(s->app.http, s);
}

static void on_signal(uv_signal_t *h, int signum) {
  struct server *s = h->data;
  fprintf(stderr, "kanban: %s, stopping\n", signum == SIGTERM ? "SIGTERM" : "SIGINT");
  begin_stop(s);
}

/* libuv's pool: a thread per lith reader plus two for password hashes. Must
 * be set before the pool's first use. */
static void size_thread_pool(int readers) {
  char buf[16];
  if (getenv("UV_THREADPOOL_SIZE") != NULL)
    return;
  snprintf(buf, sizeof buf, "%d", readers + 2);
  setenv("UV_THREADPOOL_SIZE", buf, 1);
}

/* ---- main ------------------------------------------------------------------------ */

int main(int argc, char **argv) {
  struct opts o;
  struct server s;
  lith_options lopt;
  lith_http_options hopt;
  int loop_open = 0;
  int exit_code = 1;
  int rc;

  /* No global memory statistics: SQLite's allocator then takes no
   * process-wide mutex per malloc (about a tenth of the writer thread).
   * Before SQLite initialises. */
  sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
  memset(&s, 0, sizeof s);
  rc = parse_opts(argc, argv, &o);
  if (rc != 0)
    return rc == 1 ? 0 : 2;
  if (auth_pw_init() != 0) {
    fprintf(stderr, "kanban: libsodium failed to initialise\n");
    return 1;
  }

  lith_options_default(&lopt);
  kb_options_schema(&lopt);
  lopt.synchronous = o.synchronous;
  size_thread_pool(lopt.readers > 0 ? lopt.readers : 2);

  if (uv_loop_init(&s.loop) != 0) {
    fprintf(stderr, "kanban: uv_loop_init failed\n");
    return 1;
  }
  loop_open = 1;
  s.app.loop = &s.loop;
  if (srv_live_open(&s.loop, &s.app.live) != 0) {
    fprintf(stderr, "kanban: out of memory\n");
    goto out;
  }
  lopt.on_commit = srv_live_hook;
  lopt.on_commit_ctx = s.app.live;
  if (lith_open(o.db, &lopt, &s.app.db) != LITH_OK) {
    fprintf(stderr, "kanban: cannot open %s: %s\n", o.db, lith_errmsg(NULL));
    goto out;
  }
  if (o.demo && seed_demo(s.app.db) != 0)
    goto out;
  if (lith_uv_open(s.app.db, &s.loop, &s.bridge) != LITH_OK) {
    fprintf(stderr, "kanban: lith_uv_open: %s\n", lith_errmsg(s.app.db));
    goto out;
  }
  s.app.bridge = s.bridge;
  s.app.gate = auth_gate_new(&s.loop, 2, 64);
  s.app.sessions = auth_cache_new();
  s.app.throttle = auth_throttle_new(4096);
  if (s.app.gate == NULL || s.app.sessions == NULL || s.app.throttle == NULL) {
    fprintf(stderr, "kanban: out of memory\n");
    goto out;
  }

  lith_http_options_default(&hopt);
  hopt.http2 =
      0; /* browsers never speak cleartext HTTP/2; an h2c upgrade would skip the framing guard (http.h) */
  hopt.server_name = "kanban";
  hopt.max_body = SRV_MAX_BODY;
  hopt.stream_buffer = 64u << 10; /* a page that reads nothing for that long reconnects */
  if (lith_http_server_create(&s.loop, &hopt, &s.app.http) != LITH_HTTP_OK) {
    fprintf(stderr, "kanban: http server: %s\n", lith_http_errmsg());
    goto out;
  }
  if (srv_routes_add(&s.app) != LITH_HTTP_OK) {
    fprintf(stderr, "kanban: routes: %s\n", lith_http_errmsg());
    goto out;
  }
  if (lith_http_listen_tcp(s.app.http, o.host, o.port) != LITH_HTTP_OK) {
    fprintf(stderr, "kanban: cannot listen on %s:%d: %s\n", o.host, o.port, lith_http_errmsg());
    goto out;
  }
  srv_prune_start(&s.app);

  uv_signal_init(&s.loop, &s.sigterm);
  uv_signal_init(&s.loop, &s.sigint);
  s.sigterm.data = s.sigint.data = &s;
  s.signals_open = 1;
  uv_signal_start(&s.sigterm, on_signal, SIGTERM);
  uv_signal_start(&s.sigint, on_signal, SIGINT);

  {
    int v6 = strchr(o.host, ':') != NULL;
    printf("kanban %s: listening on http://%s%s%s:%d/ (db %s, synchronous %s)\n", LITH_VERSION, v6 ? "[" : "",
           o.host, v6 ? "]" : "", lith_http_port(s.app.http), o.db,
           o.synchronous == LITH_SYNC_FULL ? "full" : "normal");
    if (o.demo) {
      printf("  demo sign-ins (members of \"Demo board\"):");
      for (int i = 0; i < N_DEMO; i++)
        printf("%s %s / %s", i ? "," : "", demo_users[i][0], demo_users[i][1]);
      printf("\n  open the URL in two browsers (or a private window), sign in as each, and move cards\n");
    }
    fflush(stdout);
  }

  uv_run(&s.loop, UV_RUN_DEFAULT);
  exit_code = 0;

out:
  if (s.app.http != NULL)
    lith_http_server_destroy(s.app.http); /* after uv_run: disposes h2o */
  s.app.http = NULL;
  close_signals(&s);
  close_prune(&s.app);
  if (s.app.gate != NULL)
    auth_gate_stop(s.app.gate);
  srv_live_close(s.app.live);
  close_bridge(&s);
  if (loop_open) {
    uv_run(&s.loop, UV_RUN_DEFAULT); /* close callbacks, a startup failure's bridge */
    if (uv_loop_close(&s.loop) != 0)
      fprintf(stderr, "kanban: handles left on the loop\n");
  }
  if (s.app.db != NULL && lith_close(s.app.db) != LITH_OK) {
    fprintf(stderr, "kanban: close: %s\n", lith_errmsg(NULL));
    exit_code = 1;
  }
  srv_live_free(s.app.live); /* after lith_close: the hook ran until then */
  auth_gate_free(s.app.gate);
  auth_throttle_free(s.app.throttle);
  auth_cache_free(s.app.sessions);
  if (exit_code == 0)
    fprintf(stderr, "kanban: stopped\n");
  return exit_code;
}
