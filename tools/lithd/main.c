/*
 * lithd — an HTTP/JSON daemon around lith's single SQLite writer.
 *
 * Design:
 *   - One libuv loop on the main thread carries the HTTP server (http/), the
 *     lith_uv bridge (command completions) and the signal watchers; lith's
 *     writer thread does the SQLite writes. Routes live in server.c.
 *   - Startup: parse options, read the token file, lith_open, bridge, HTTP
 *     server, routes, listeners; then print one line with the URL and a curl
 *     example (tests read the bound port from it).
 *   - One lithd per database: before opening it, lithd takes an exclusive
 *     advisory lock (flock LOCK_EX|LOCK_NB) on PATH-lithd.lock and keeps the
 *     descriptor (O_CLOEXEC) for its whole life; the lock file holds the
 *     holder's pid. A second lithd on the same file says which pid and which
 *     lock file hold it and exits 1. The kernel drops the lock when the
 *     process ends, however it ends, so a stale file never blocks a restart.
 *   - A non-loopback --listen needs --token-file: the database must never be
 *     open to the network without a token.
 *   - Shutdown on SIGTERM/SIGINT, as a chain of callbacks so the loop keeps
 *     running until each stage ended: stop the HTTP server (new requests are
 *     refused, in-flight ones answered, up to a grace period) -> on_stopped:
 *     lith_uv_close (every accepted command's callback has run) -> on_closed:
 *     nothing left on the loop, uv_run returns. Then, after uv_run (h2o's
 *     context disposal runs the loop itself), the HTTP server is destroyed,
 *     lith_close drains the writer and checkpoints (TRUNCATE), exit 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <uv.h>

#include "http.h"
#include "lith.h"
#include "lith_uv.h"
#include "server.h"
#include "sqljson.h"

#define DEFAULT_HOST "127.0.0.1"
#define DEFAULT_PORT 8765
#define STOP_GRACE_MS 10000
#define TOKEN_MAX 4096

struct opts {
  const char *db;
  char host[256];
  int port;
  int listen_given;
  const char *unix_path;
  int synchronous;
  int checkpoint;
  size_t max_body;
  const char *token_file;
};

struct daemon {
  uv_loop_t loop;
  uv_signal_t sigterm, sigint;
  int signals_open;
  lith *db;
  lith_uv *bridge;
  lith_http_server *http;
  lithd_server srv;
  int stopping;
};

static void usage(FILE *f) {
  fprintf(f,
          "usage: lithd --db PATH [options]\n"
          "  --db PATH               the database file (created if missing)\n"
          "  --listen HOST:PORT      TCP address (default " DEFAULT_HOST ":%d; port 0: any free)\n"
          "  --unix PATH             also listen on a Unix socket (mode 0600)\n"
          "  --synchronous normal|full   (default normal)\n"
          "  --checkpoint writer|auto|external   (default writer)\n"
          "  --max-body BYTES        largest request body (default 8 MiB)\n"
          "  --token-file FILE       require \"Authorization: Bearer <token>\"\n"
          "                          (needed for a non-loopback --listen)\n"
          "  --help, --version\n",
          DEFAULT_PORT);
}

/* "HOST:PORT", "[V6]:PORT" or ":PORT". Returns 0 or -1. */
static int parse_listen(const char *s, char *host, size_t hostsz, int *port) {
  const char *colon;
  const char *h = s;
  size_t hlen;
  char *end;
  long p;

  if (s[0] == '[') {
    const char *close = strchr(s, ']');
    if (close == NULL || close[1] != ':') return -1;
    h = s + 1;
    hlen = (size_t)(close - h);
    colon = close + 1;
  } else {
    colon = strrchr(s, ':');
    if (colon == NULL) return -1;
    hlen = (size_t)(colon - s);
  }
  if (hlen >= hostsz) return -1;
  if (hlen == 0) {
    snprintf(host, hostsz, "%s", DEFAULT_HOST);
  } else {
    memcpy(host, h, hlen);
    host[hlen] = '\0';
  }
  errno = 0;
  p = strtol(colon + 1, &end, 10);
  if (errno != 0 || end == colon + 1 || *end != '\0' || p < 0 || p > 65535) return -1;
  *port = (int)p;
  return 0;
}

static int is_loopback_host(const char *h) {
  return strncmp(h, "127.", 4) == 0 || strcmp(h, "::1") == 0;
}

/* Read the token file, strip trailing CR/LF. Returns a malloc'd string or NULL. */
static char *read_token(const char *path) {
  FILE *f = fopen(path, "r");
  char *tok = NULL;
  size_t n;

  if (f == NULL) {
    fprintf(stderr, "lithd: --token-file %s: %s\n", path, strerror(errno));
    return NULL;
  }
  tok = malloc(TOKEN_MAX + 1);
  if (tok == NULL) goto fail;
  n = fread(tok, 1, TOKEN_MAX + 1, f);
  if (n > TOKEN_MAX) {
    fprintf(stderr, "lithd: --token-file %s: longer than %d bytes\n", path, TOKEN_MAX);
    goto fail;
  }
  tok[n] = '\0';
  while (n > 0 && (tok[n - 1] == '\n' || tok[n - 1] == '\r')) tok[--n] = '\0';
  if (n == 0 || strlen(tok) != n) {
    fprintf(stderr, "lithd: --token-file %s: empty or holds a NUL byte\n", path);
    goto fail;
  }
  fclose(f);
  return tok;
fail:
  free(tok);
  fclose(f);
  return NULL;
}

/* Returns 0 to run, 1 to exit 0 (help/version), 2 on a usage error. */
static int parse_args(int argc, char **argv, struct opts *o) {
  enum { OPT_DB = 256, OPT_LISTEN, OPT_UNIX, OPT_SYNC, OPT_CKPT, OPT_MAXBODY, OPT_TOKEN, OPT_HELP, OPT_VERSION };
  static const struct option longs[] = {
      {"db", required_argument, NULL, OPT_DB},
      {"listen", required_argument, NULL, OPT_LISTEN},
      {"unix", required_argument, NULL, OPT_UNIX},
      {"synchronous", required_argument, NULL, OPT_SYNC},
      {"checkpoint", required_argument, NULL, OPT_CKPT},
      {"max-body", required_argument, NULL, OPT_MAXBODY},
      {"token-file", required_argument, NULL, OPT_TOKEN},
      {"help", no_argument, NULL, OPT_HELP},
      {"version", no_argument, NULL, OPT_VERSION},
      {NULL, 0, NULL, 0}};
  int c;

  memset(o, 0, sizeof *o);
  snprintf(o->host, sizeof o->host, "%s", DEFAULT_HOST);
  o->port = DEFAULT_PORT;
  o->synchronous = LITH_SYNC_NORMAL;
  o->checkpoint = LITH_CHECKPOINT_WRITER;
  while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
    switch (c) {
    case OPT_DB: o->db = optarg; break;
    case OPT_LISTEN:
      if (parse_listen(optarg, o->host, sizeof o->host, &o->port) != 0) {
        fprintf(stderr, "lithd: --listen wants HOST:PORT, got \"%s\"\n", optarg);
        return 2;
      }
      o->listen_given = 1;
      break;
    case OPT_UNIX: o->unix_path = optarg; break;
    case OPT_SYNC:
      if (strcmp(optarg, "normal") == 0) o->synchronous = LITH_SYNC_NORMAL;
      else if (strcmp(optarg, "full") == 0) o->synchronous = LITH_SYNC_FULL;
      else {
        fprintf(stderr, "lithd: --synchronous wants normal or full\n");
        return 2;
      }
      break;
    case OPT_CKPT:
      if (strcmp(optarg, "writer") == 0) o->checkpoint = LITH_CHECKPOINT_WRITER;
      else if (strcmp(optarg, "auto") == 0) o->checkpoint = LITH_CHECKPOINT_AUTO;
      else if (strcmp(optarg, "external") == 0) o->checkpoint = LITH_CHECKPOINT_EXTERNAL;
      else {
        fprintf(stderr, "lithd: --checkpoint wants writer, auto or external\n");
        return 2;
      }
      break;
    case OPT_MAXBODY: {
      char *end;
      unsigned long long v;
      errno = 0;
      v = strtoull(optarg, &end, 10);
      if (errno != 0 || end == optarg || *end != '\0' || v == 0 || optarg[0] == '-') {
        fprintf(stderr, "lithd: --max-body wants a positive number of bytes\n");
        return 2;
      }
      o->max_body = (size_t)v;
      break;
    }
    case OPT_TOKEN: o->token_file = optarg; break;
    case OPT_HELP: usage(stdout); return 1;
    case OPT_VERSION: printf("lithd %s\n", LITH_VERSION); return 1;
    default: usage(stderr); return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "lithd: unexpected argument \"%s\"\n", argv[optind]);
    return 2;
  }
  if (o->db == NULL) {
    fprintf(stderr, "lithd: --db PATH is required\n");
    usage(stderr);
    return 2;
  }
  if (!is_loopback_host(o->host) && o->token_file == NULL) {
    fprintf(stderr, "lithd: refusing to listen on %s (not loopback) without --token-file\n",
            o->host);
    return 2;
  }
  return 0;
}

/* ---- Shutdown chain ---------------------------------------------------- */

static void on_bridge_closed(void *ctx) {
  struct daemon *d = ctx;
  d->bridge = NULL; /* nothing of ours is left on the loop: uv_run returns */
}

static void on_http_stopped(lith_http_server *srv, void *arg) {
  struct daemon *d = arg;
  lith_uv_close(d->bridge, on_bridge_closed, d);
}

static void begin_stop(struct daemon *d) {
  if (d->stopping) return;
  d->stopping = 1;
  if (d->signals_open) {
    uv_close((uv_handle_t *)&d->sigterm, NULL);
    uv_close((uv_handle_t *)&d->sigint, NULL);
    d->signals_open = 0;
  }
  if (lith_http_server_stop(d->http, STOP_GRACE_MS, on_http_stopped, d) != LITH_HTTP_OK)
    lith_uv_close(d->bridge, on_bridge_closed, d);
}

static void on_signal(uv_signal_t *h, int signum) {
  struct daemon *d = h->data;
  fprintf(stderr, "lithd: %s, stopping\n", signum == SIGTERM ? "SIGTERM" : "SIGINT");
  begin_stop(d);
}

/* ---- One lithd per database ------------------------------------------- */

/* Lock PATH-lithd.lock; returns the descriptor to keep open, or -1 after a
 * message on stderr. */
static int lock_database(const char *db) {
  size_t n = strlen(db) + sizeof "-lithd.lock";
  char *path = malloc(n);
  char buf[32];
  int fd;

  if (path == NULL) {
    fprintf(stderr, "lithd: out of memory\n");
    return -1;
  }
  snprintf(path, n, "%s-lithd.lock", db);
  fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    fprintf(stderr, "lithd: cannot open the lock file %s: %s\n", path, strerror(errno));
    free(path);
    return -1;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    if (e == EWOULDBLOCK) {
      ssize_t got = pread(fd, buf, sizeof buf - 1, 0);
      long pid = 0;
      if (got > 0) {
        buf[got] = '\0';
        pid = strtol(buf, NULL, 10);
      }
      if (pid > 0)
        fprintf(stderr,
                "lithd: %s is already served by another lithd (pid %ld holds the lock file %s)\n",
                db, pid, path);
      else
        fprintf(stderr, "lithd: %s is already served by another lithd (the lock file %s is held)\n",
                db, path);
    } else {
      fprintf(stderr, "lithd: cannot lock %s: %s\n", path, strerror(e));
    }
    close(fd);
    free(path);
    return -1;
  }
  /* Ours: record the pid for the message above (best effort). */
  snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, strlen(buf), 0) < 0) {
    /* the lock holds regardless; only the message would lack the pid */
  }
  free(path);
  return fd;
}

/* ---- main -------------------------------------------------------------- */

int main(int argc, char **argv) {
  struct opts o;
  struct daemon d;
  lith_options lopt;
  lith_http_options hopt;
  char *token = NULL;
  int loop_open = 0;
  int lock_fd = -1;
  int exit_code = 1;
  int rc;

  memset(&d, 0, sizeof d);
  rc = parse_args(argc, argv, &o);
  if (rc == 1) return 0;
  if (rc != 0) return 2;

  if (o.token_file != NULL && (token = read_token(o.token_file)) == NULL) goto out;

  if ((lock_fd = lock_database(o.db)) < 0) goto out;

  lith_options_default(&lopt);
  lopt.synchronous = o.synchronous;
  lopt.checkpoint = o.checkpoint;
  rc = lith_open(o.db, &lopt, &d.db);
  if (rc != LITH_OK) {
    fprintf(stderr, "lithd: cannot open %s: %s\n", o.db, lith_errmsg(NULL));
    goto out;
  }
  if (uv_loop_init(&d.loop) != 0) {
    fprintf(stderr, "lithd: uv_loop_init failed\n");
    goto out;
  }
  loop_open = 1;
  if (lith_uv_open(d.db, &d.loop, &d.bridge) != LITH_OK) {
    fprintf(stderr, "lithd: lith_uv_open: %s\n", lith_errmsg(d.db));
    goto out;
  }

  lith_http_options_default(&hopt);
  hopt.server_name = "lithd";
  lithd_limits_default(&d.srv.limits);
  if (o.max_body != 0) d.srv.limits.max_body_bytes = o.max_body;
  hopt.max_body = d.srv.limits.max_body_bytes;
  if (lith_http_server_create(&d.loop, &hopt, &d.http) != LITH_HTTP_OK) {
    fprintf(stderr, "lithd: http server: %s\n", lith_http_errmsg());
    goto out;
  }
  d.srv.loop = &d.loop;
  d.srv.db = d.db;
  d.srv.bridge = d.bridge;
  d.srv.http = d.http;
  d.srv.token = token;
  if (lithd_server_routes(&d.srv) != LITH_HTTP_OK) {
    fprintf(stderr, "lithd: routes: %s\n", lith_http_errmsg());
    goto out;
  }
  if (o.unix_path == NULL || o.listen_given) {
    rc = lith_http_listen_tcp(d.http, o.host, o.port);
    if (rc != LITH_HTTP_OK) {
      fprintf(stderr, "lithd: cannot listen on %s:%d: %s\n", o.host, o.port, lith_http_errmsg());
      goto out;
    }
  }
  if (o.unix_path != NULL && lith_http_listen_unix(d.http, o.unix_path) != LITH_HTTP_OK) {
    fprintf(stderr, "lithd: cannot listen on %s: %s\n", o.unix_path, lith_http_errmsg());
    goto out;
  }

  uv_signal_init(&d.loop, &d.sigterm);
  uv_signal_init(&d.loop, &d.sigint);
  d.sigterm.data = d.sigint.data = &d;
  d.signals_open = 1;
  uv_signal_start(&d.sigterm, on_signal, SIGTERM);
  uv_signal_start(&d.sigint, on_signal, SIGINT);

  {
    const char *auth = token != NULL ? " -H \"Authorization: Bearer $(cat TOKENFILE)\"" : "";
    int port = lith_http_port(d.http);
    if (port >= 0) {
      int v6 = strchr(o.host, ':') != NULL;
      printf("lithd %s: listening on http://%s%s%s:%d (db %s); try: curl -s%s "
             "http://%s%s%s:%d/v1/do -d '{\"statements\":[{\"sql\":\"SELECT 1\"}]}'\n",
             LITH_VERSION, v6 ? "[" : "", o.host, v6 ? "]" : "", port, o.db, auth,
             v6 ? "[" : "", o.host, v6 ? "]" : "", port);
    } else {
      printf("lithd %s: listening on unix:%s (db %s); try: curl -s%s --unix-socket %s "
             "http://lithd/v1/do -d '{\"statements\":[{\"sql\":\"SELECT 1\"}]}'\n",
             LITH_VERSION, o.unix_path, o.db, auth, o.unix_path);
    }
    fflush(stdout);
  }

  uv_run(&d.loop, UV_RUN_DEFAULT);
  exit_code = 0;

out:
  if (d.http != NULL) lith_http_server_destroy(d.http); /* after uv_run: disposes h2o */
  if (d.bridge != NULL) {
    /* a startup failure: close the bridge, running the loop until done */
    lith_uv_close(d.bridge, on_bridge_closed, &d);
    uv_run(&d.loop, UV_RUN_DEFAULT);
  }
  if (d.signals_open) {
    uv_close((uv_handle_t *)&d.sigterm, NULL);
    uv_close((uv_handle_t *)&d.sigint, NULL);
    uv_run(&d.loop, UV_RUN_DEFAULT);
  }
  if (loop_open && uv_loop_close(&d.loop) != 0) fprintf(stderr, "lithd: handles left on the loop\n");
  if (d.db != NULL && lith_close(d.db) != LITH_OK) {
    fprintf(stderr, "lithd: close: %s\n", lith_errmsg(NULL));
    exit_code = 1;
  }
  free(token);
  if (lock_fd >= 0) close(lock_fd); /* after lith_close: the file is released */
  if (exit_code == 0) fprintf(stderr, "lithd: stopped\n");
  return exit_code;
}
