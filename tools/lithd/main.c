/*
 * lithd — an HTTP/JSON daemon around lith's single SQLite writer.
 *
 * Design:
 *   - One libuv loop on the main thread carries the HTTP server (http/), the
 *     lith_uv bridge (command completions) and the signal watchers; lith's
 *     writer thread does the SQLite writes; libuv's thread pool runs the
 *     reads of /v1/query and backups (sized to the read pool, see below).
 *     Routes live in server.c, options in options.c.
 *   - Startup: options (config file, then command line), log, token, lock,
 *     lith_open with the --schema steps as migrations, the named commands
 *     checked against the opened database, bridge, HTTP server, routes,
 *     listeners; then one line on stdout with the URL and a curl example
 *     (tests read the bound port from it). Any failure: a message, exit 1.
 *   - One lithd per database: before opening it, lithd takes an exclusive
 *     advisory lock (flock LOCK_EX|LOCK_NB) on PATH-lithd.lock and keeps the
 *     descriptor (O_CLOEXEC) for its whole life; the lock file holds the
 *     holder's pid. A second lithd on the same file says which pid and which
 *     lock file hold it and exits 1. The kernel drops the lock when the
 *     process ends, however it ends, so a stale file never blocks a restart.
 *   - A non-loopback --listen needs --token-file: the database must never be
 *     open to the network without a token.
 *   - Shutdown on SIGTERM/SIGINT, as a chain of callbacks so the loop keeps
 *     running until each stage ended: refuse the commands still waiting for
 *     queue room (503), stop the HTTP server (new requests are refused,
 *     in-flight ones answered, up to --stop-grace-ms; then 503) -> on_stopped:
 *     reads and backups still running are interrupted (guard.h,
 *     lith_interrupt), lith_uv_close (every accepted command's callback has run) -> on_closed:
 *     nothing left on the loop, uv_run returns. Then, after uv_run (h2o's
 *     context disposal runs the loop itself), the HTTP server is destroyed,
 *     lith_close drains the writer and checkpoints (TRUNCATE; not with
 *     --checkpoint external), exit 0.
 *   - SIGHUP reopens the --log file (for logrotate).
 *   - --checkpoint external: lithd never checkpoints (a replicator such as
 *     Litestream owns the WAL). --litestream is that plus a busy timeout of
 *     at least LITHD_LITESTREAM_BUSY_MS (Litestream's write locks delay a
 *     batch, never fail it); the startup line says so. If nothing does, the WAL grows without end,
 *     so a timer looks at its size once a second and warns when it passes
 *     WAL_WARN_FACTOR x checkpoint_pages (what WRITER mode bounds it at):
 *     once per crossing (it must fall below again, a checkpoint, to warn
 *     again), and at most once per WAL_WARN_EVERY_MS.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>
#include <uv.h>

#include "commands.h"
#include "guard.h"
#include "heap.h"
#include "http.h"
#include "lith.h"
#include "lith_uv.h"
#include "log.h"
#include "options.h"
#include "restore.h"
#include "schema.h"
#include "server.h"
#include "sqljson.h"
#include "token.h"

/* The EXTERNAL-mode watch of the WAL (see the design note above). */
#define WAL_WATCH_MS 1000
#define WAL_WARN_FACTOR 4
#define WAL_WARN_EVERY_MS (60 * 1000)

struct wal_watch {
  uv_timer_t timer;
  lith *db;
  uint64_t threshold; /* pages */
  int64_t page_size;
  int above;            /* the WAL was past the threshold at the last look */
  int64_t last_warn_ms; /* lith_clock_ms of the last warning; 0: none yet */
  int open;
};

struct daemon {
  uv_loop_t loop;
  uv_signal_t sigterm, sigint, sighup;
  int signals_open;
  struct wal_watch wal;
  int64_t stop_grace_ms; /* SIGTERM: how long requests may still run */
  lith *db;
  lith_uv *bridge;
  lith_http_server *http;
  lithd_server srv;
  int stopping;
};

/* ---- Shutdown chain ---------------------------------------------------- */

static void on_bridge_closed(void *ctx) {
  struct daemon *d = ctx;
  d->bridge = NULL; /* nothing of ours is left on the loop: uv_run returns */
}

/* Every request is answered, or the grace is over and those still running
 * got 503: what still reads (a query on the thread pool, a backup) is
 * stopped now, so that the loop, which waits for the pool's work, and
 * lith_close, which waits for lith_read, end soon. Writes are not touched:
 * every accepted command is still run, committed and answered. */
static void on_http_stopped(lith_http_server *srv, void *arg) {
  struct daemon *d = arg;
  lithd_guard_stop_reads();
  lith_interrupt(d->db);
  lith_uv_close(d->bridge, on_bridge_closed, d);
}

static void close_signals(struct daemon *d) {
  if (!d->signals_open)
    return;
  uv_close((uv_handle_t *)&d->sigterm, NULL);
  uv_close((uv_handle_t *)&d->sigint, NULL);
  uv_close((uv_handle_t *)&d->sighup, NULL);
  d->signals_open = 0;
}

static void close_wal_watch(struct daemon *d) {
  if (!d->wal.open)
    return;
  uv_close((uv_handle_t *)&d->wal.timer, NULL);
  d->wal.open = 0;
}

static void begin_stop(struct daemon *d) {
  if (d->stopping)
    return;
  d->stopping = 1;
  close_signals(d);
  close_wal_watch(d);
  lithd_server_stop(&d->srv);
  if (lith_http_server_stop(d->http, (unsigned)d->stop_grace_ms, on_http_stopped, d) != LITH_HTTP_OK)
    lith_uv_close(d->bridge, on_bridge_closed, d);
}

static void on_signal(uv_signal_t *h, int signum) {
  struct daemon *d = h->data;
  if (signum == SIGHUP) {
    if (lithd_log_reopen() != 0)
      lithd_log(LITHD_LOG_ERROR, "SIGHUP: cannot reopen the log: %s", strerror(errno));
    else
      lithd_log(LITHD_LOG_INFO, "SIGHUP: log reopened");
    return;
  }
  lithd_log(LITHD_LOG_INFO, "%s, stopping", signum == SIGTERM ? "SIGTERM" : "SIGINT");
  begin_stop(d);
}

/* ---- The WAL nobody checkpoints ---------------------------------------- */

static void on_wal_watch(uv_timer_t *t) {
  struct wal_watch *w = t->data;
  lith_stats *st = malloc(sizeof *st); /* ~3.5 KiB of histograms: not on the stack */
  int64_t now;

  if (st == NULL)
    return;
  lith_stats_get(w->db, st);
  if (st->wal_pages < w->threshold) {
    w->above = 0; /* something checkpointed: the next crossing warns again */
  } else if (!w->above) {
    w->above = 1;
    now = lith_clock_ms();
    if (w->last_warn_ms == 0 || now - w->last_warn_ms >= WAL_WARN_EVERY_MS) {
      w->last_warn_ms = now;
      lithd_log(LITHD_LOG_WARN,
                "the WAL holds %" PRIu64 " pages (%.1f MiB), past %d x --checkpoint-pages = %" PRIu64
                " pages, and --checkpoint external means lithd never checkpoints it: is the replicator "
                "(Litestream, ...) running? It grows until something checkpoints",
                st->wal_pages, (double)st->wal_pages * (double)w->page_size / (1024.0 * 1024.0),
                WAL_WARN_FACTOR, w->threshold);
    }
  }
  free(st);
}

/* ---- The startup line --------------------------------------------------- */

/* s as one shell word in single quotes ('\'' for a quote inside), into
 * out[0..cap) (cut if it does not fit). */
static void shell_quote(char *out, size_t cap, const char *s) {
  size_t n = 0;
  if (cap < 3) {
    if (cap > 0)
      out[0] = '\0';
    return;
  }
  out[n++] = '\'';
  for (; *s && n + 5 < cap; s++) {
    if (*s == '\'') {
      memcpy(out + n, "'\\''", 4);
      n += 4;
    } else {
      out[n++] = *s;
    }
  }
  out[n++] = '\'';
  out[n] = '\0';
}

static const char *checkpoint_name(int mode) {
  return mode == LITH_CHECKPOINT_AUTO ? "auto" : mode == LITH_CHECKPOINT_EXTERNAL ? "external" : "writer";
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
    lithd_log(LITHD_LOG_ERROR, "out of memory");
    return -1;
  }
  snprintf(path, n, "%s-lithd.lock", db);
  fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    lithd_log(LITHD_LOG_ERROR, "cannot open the lock file %s: %s", path, strerror(errno));
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
        lithd_log(LITHD_LOG_ERROR, "%s is already served by another lithd (pid %ld holds the lock file %s)",
                  db, pid, path);
      else
        lithd_log(LITHD_LOG_ERROR, "%s is already served by another lithd (the lock file %s is held)", db,
                  path);
    } else {
      lithd_log(LITHD_LOG_ERROR, "cannot lock %s: %s", path, strerror(e));
    }
    close(fd);
    free(path);
    return -1;
  }
  /* Ours: record the pid for the message above (best effort). */
  snprintf(buf, sizeof buf, "%ld", (long)getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, strlen(buf), 0) < 0) {
    /* the lock holds regardless; only the message would lack the pid */
  }
  free(path);
  return fd;
}

/* ---- Named commands ----------------------------------------------------- */

struct check_ctx {
  lithd_commands *commands;
  char err[1024];
  int failed;
};

static int check_commands(lith_rx *rx, void *arg) {
  struct check_ctx *k = arg;
  k->failed = lithd_commands_check(k->commands, lith_rx_db(rx), k->err, sizeof k->err) != 0;
  return LITH_OK;
}

static int read_page_size(lith_rx *rx, void *arg) {
  return lith_rx_int64(rx, (int64_t *)arg, "PRAGMA page_size", "");
}

/* libuv's pool runs /v1/query and backups: as many threads as readers (so
 * every reader can be busy) and one for a backup, unless the environment
 * already says. It must be set before the pool's first use. */
static void size_thread_pool(int readers) {
  char buf[16];
  if (getenv("UV_THREADPOOL_SIZE") != NULL)
    return;
  if (readers < 1) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    readers = cpus < 1 ? 2 : cpus > 64 ? 64 : (int)cpus;
  }
  snprintf(buf, sizeof buf, "%d", readers + 1 > 1024 ? 1024 : readers + 1);
  setenv("UV_THREADPOOL_SIZE", buf, 1);
}

/* ---- main -------------------------------------------------------------- */

int main(int argc, char **argv) {
  lithd_opts o;
  struct daemon d;
  lith_options lopt;
  lithd_guard_limits glim;
  lith_http_options hopt;
  lithd_schema schema = {NULL, 0};
  lithd_commands *commands = NULL;
  char err[1024];
  char *token = NULL;
  int loop_open = 0;
  int lock_fd = -1;
  int exit_code = 1;
  double start_time;
  int rc;

  memset(&d, 0, sizeof d);
  start_time = (double)time(NULL);
  rc = lithd_opts_parse(argc, argv, &o);
  if (rc == 1) {
    lithd_opts_free(&o);
    return 0;
  }
  if (rc != 0) {
    lithd_opts_free(&o);
    return 2;
  }
  /* No global memory statistics: SQLite's allocator then takes no
   * process-wide mutex per malloc (a tenth of the writer thread in
   * bench/kanban's profile). The memory ceiling comes from lithd's own
   * allocator instead (heap.h). Both before SQLite initialises. */
  sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
  if (lithd_heap_install(o.max_memory_mib * 1024 * 1024) != SQLITE_OK) {
    fprintf(stderr, "lithd: cannot install the memory ceiling (--max-memory-mib)\n");
    lithd_opts_free(&o);
    return 1;
  }
  lithd_log_set_format(o.log_format);
  if (lithd_log_open(o.log_file, o.log_level) != 0) {
    fprintf(stderr, "lithd: --log %s: %s\n", o.log_file, strerror(errno));
    goto out;
  }
  size_thread_pool(o.readers);
  if (o.restore != NULL) {
    /* The lock for the whole restore: a lithd serving --db refuses it, one
     * starting meanwhile refuses to start (restore.h). */
    if ((lock_fd = lock_database(o.db)) >= 0)
      exit_code = lithd_restore(o.restore, o.db, o.force, o.file_mode > 0 ? o.file_mode : 0600);
    goto out;
  }

  if (o.token_file != NULL && (token = lithd_token_read(o.token_file, err, sizeof err)) == NULL) {
    lithd_log(LITHD_LOG_ERROR, "--token-file %s", err);
    goto out;
  }
  if (o.schema != NULL && lithd_schema_load(o.schema, &schema, err, sizeof err) != 0) {
    lithd_log(LITHD_LOG_ERROR, "%s", err);
    goto out;
  }
  if (o.commands != NULL && lithd_commands_load(o.commands, &commands, err, sizeof err) != 0) {
    lithd_log(LITHD_LOG_ERROR, "--commands %s", err);
    goto out;
  }
  if (o.backup_dir != NULL) {
    struct stat st;
    if (stat(o.backup_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
      lithd_log(LITHD_LOG_ERROR, "--backup-dir %s: not a directory", o.backup_dir);
      goto out;
    }
  }
  if (o.only_named && commands == NULL) {
    lithd_log(LITHD_LOG_ERROR, "--only-named needs --commands FILE: nothing could write");
    goto out;
  }

  if ((lock_fd = lock_database(o.db)) < 0)
    goto out;

  /* Bounds on what one request costs (guard.h): SQLite's limits and the
   * bounded functions on every connection, the watchdog, and one ceiling
   * on SQLite's heap for the whole process. */
  lithd_guard_limits_default(&glim);
  if (o.max_value_bytes > 0)
    glim.max_value_bytes = o.max_value_bytes;
  if (o.max_like_pattern > 0)
    glim.max_like_pattern = o.max_like_pattern;
  if (lithd_guard_start() != 0) {
    lithd_log(LITHD_LOG_ERROR, "cannot start the watchdog thread");
    goto out;
  }
  d.stop_grace_ms = o.stop_grace_ms;

  lith_options_default(&lopt);
  lopt.on_connect = lithd_guard_connect;
  lopt.on_connect_ctx = &glim;
  lopt.synchronous = o.synchronous;
  lopt.checkpoint = o.checkpoint;
  if (o.litestream && lopt.busy_timeout_ms < LITHD_LITESTREAM_BUSY_MS)
    lopt.busy_timeout_ms = LITHD_LITESTREAM_BUSY_MS;
  if (o.checkpoint_pages > 0)
    lopt.checkpoint_pages = o.checkpoint_pages;
  if (o.readers > 0)
    lopt.readers = o.readers;
  if (o.max_batch > 0)
    lopt.max_batch = o.max_batch;
  if (o.max_queue > 0)
    lopt.queue_capacity = o.max_queue;
  if (o.file_mode > 0)
    lopt.file_mode = o.file_mode;
  lopt.authorizer = lithd_authorizer; /* clients' SQL: no ATTACH, no PRAGMA x = y */
  /* --max-run-ms bounds each command on the writer through lith (sqljson.h) */
  lithd_limits_default(&d.srv.limits);
  lopt.command_timeout_ms = (int)(o.max_run_ms != 0 ? o.max_run_ms : d.srv.limits.max_run_ms);
  lopt.migrations = (const char *const *)schema.steps;
  lopt.n_migrations = schema.n;
  rc = lith_open(o.db, &lopt, &d.db);
  if (rc != LITH_OK) {
    lithd_log(LITHD_LOG_ERROR, "cannot open %s: %s%s", o.db, lith_errmsg(NULL),
              o.schema != NULL && rc == LITH_SCHEMA
                  ? " (--schema has fewer steps than the database has applied)"
                  : "");
    goto out;
  }
  if (commands != NULL) {
    struct check_ctx k;
    memset(&k, 0, sizeof k);
    k.commands = commands;
    if (lith_read(d.db, check_commands, &k) != LITH_OK) {
      lithd_log(LITHD_LOG_ERROR, "--commands: cannot read the database: %s", lith_errmsg(d.db));
      goto out;
    }
    if (k.failed) {
      lithd_log(LITHD_LOG_ERROR, "--commands %s", k.err);
      goto out;
    }
  }
  {
    int64_t page_size = 0;
    if (lith_read(d.db, read_page_size, &page_size) != LITH_OK)
      page_size = 0; /* /metrics then says 0 bytes; nothing else needs it */
    d.srv.metrics.page_size = page_size;
    d.srv.metrics.queue_capacity = lopt.queue_capacity;
    d.srv.metrics.readers = lopt.readers;
    d.srv.metrics.start_time = start_time;
    d.wal.db = d.db;
    d.wal.page_size = page_size;
    d.wal.threshold = (uint64_t)WAL_WARN_FACTOR * (uint64_t)lopt.checkpoint_pages;
  }
  if (uv_loop_init(&d.loop) != 0) {
    lithd_log(LITHD_LOG_ERROR, "uv_loop_init failed");
    goto out;
  }
  loop_open = 1;
  if (lith_uv_open(d.db, &d.loop, &d.bridge) != LITH_OK) {
    lithd_log(LITHD_LOG_ERROR, "lith_uv_open: %s", lith_errmsg(d.db));
    goto out;
  }

  lith_http_options_default(&hopt);
  /* HTTP/1.1 only: h2o carries out an "Upgrade: h2c" before the framing
   * guard can look at the request (http.h), so an upgraded request with two
   * Content-Length would run; and h2o 2.2.5 turns prior-knowledge HTTP/2
   * off together with the upgrade. No lithd client needs cleartext h2. */
  hopt.http2 = 0;
  hopt.server_name = "lithd";
  lithd_limits_default(&d.srv.limits);
  if (o.max_body != 0)
    d.srv.limits.max_body_bytes = o.max_body;
  if (o.max_statements != 0)
    d.srv.limits.max_statements = o.max_statements;
  if (o.max_sql != 0)
    d.srv.limits.max_sql_bytes = o.max_sql;
  if (o.max_rows != 0)
    d.srv.limits.max_rows = o.max_rows;
  if (o.max_run_ms != 0)
    d.srv.limits.max_run_ms = o.max_run_ms;
  hopt.max_body = d.srv.limits.max_body_bytes;
  if (lith_http_server_create(&d.loop, &hopt, &d.http) != LITH_HTTP_OK) {
    lithd_log(LITHD_LOG_ERROR, "http server: %s", lith_http_errmsg());
    goto out;
  }
  d.srv.loop = &d.loop;
  d.srv.db = d.db;
  d.srv.bridge = d.bridge;
  d.srv.http = d.http;
  d.srv.token = token;
  d.srv.commands = commands;
  d.srv.only_named = o.only_named;
  d.srv.allow_origins = o.allow_origins;
  d.srv.allow_hosts = o.allow_hosts;
  d.srv.backup_dir = o.backup_dir;
  d.srv.db_path = o.db;
  d.srv.queue_wait_ms = o.queue_wait_ms;
  if (lithd_server_start(&d.srv) != LITH_HTTP_OK) {
    lithd_log(LITHD_LOG_ERROR, "routes: %s", lith_http_errmsg());
    goto out;
  }
  if (o.unix_path == NULL || o.listen_given) {
    rc = lith_http_listen_tcp(d.http, o.host, o.port);
    if (rc != LITH_HTTP_OK) {
      lithd_log(LITHD_LOG_ERROR, "cannot listen on %s:%d: %s", o.host, o.port, lith_http_errmsg());
      goto out;
    }
  }
  if (o.unix_path != NULL && lith_http_listen_unix(d.http, o.unix_path) != LITH_HTTP_OK) {
    lithd_log(LITHD_LOG_ERROR, "cannot listen on %s: %s", o.unix_path, lith_http_errmsg());
    goto out;
  }

  uv_signal_init(&d.loop, &d.sigterm);
  uv_signal_init(&d.loop, &d.sigint);
  uv_signal_init(&d.loop, &d.sighup);
  d.sigterm.data = d.sigint.data = d.sighup.data = &d;
  d.signals_open = 1;
  uv_signal_start(&d.sigterm, on_signal, SIGTERM);
  uv_signal_start(&d.sigint, on_signal, SIGINT);
  uv_signal_start(&d.sighup, on_signal, SIGHUP);
  if (o.checkpoint == LITH_CHECKPOINT_EXTERNAL) {
    uv_timer_init(&d.loop, &d.wal.timer);
    d.wal.timer.data = &d.wal;
    d.wal.open = 1;
    uv_timer_start(&d.wal.timer, on_wal_watch, WAL_WATCH_MS, WAL_WATCH_MS);
  }

  {
    /* The curl example names the real token file (absolute, quoted for
     * the shell), so it runs as printed. */
    char auth[PATH_MAX * 4 + 64] = "", ckpt[96];
    const char *sync = o.synchronous == LITH_SYNC_FULL ? "full" : "normal";
    int port = lith_http_port(d.http);
    if (token != NULL) {
      char quoted[PATH_MAX * 4 + 8];
      char *abs = realpath(o.token_file, NULL);
      shell_quote(quoted, sizeof quoted, abs != NULL ? abs : o.token_file);
      free(abs);
      snprintf(auth, sizeof auth, " -H \"Authorization: Bearer $(cat %s)\"", quoted);
    }
    if (o.checkpoint == LITH_CHECKPOINT_WRITER)
      snprintf(ckpt, sizeof ckpt, "writer every %d pages", lopt.checkpoint_pages);
    else if (o.litestream)
      snprintf(ckpt, sizeof ckpt, "external for litestream, busy timeout %d ms", lopt.busy_timeout_ms);
    else
      snprintf(ckpt, sizeof ckpt, "%s", checkpoint_name(o.checkpoint));
    if (port >= 0) {
      int v6 = strchr(o.host, ':') != NULL;
      printf("lithd %s: listening on http://%s%s%s:%d (db %s, synchronous %s, checkpoint %s); try: curl -s%s "
             "http://%s%s%s:%d/v1/do --json '{\"statements\":[{\"sql\":\"SELECT 1\"}]}'\n",
             LITH_VERSION, v6 ? "[" : "", o.host, v6 ? "]" : "", port, o.db, sync, ckpt, auth, v6 ? "[" : "",
             o.host, v6 ? "]" : "", port);
    } else {
      printf("lithd %s: listening on unix:%s (db %s, synchronous %s, checkpoint %s); try: curl -s%s "
             "--unix-socket %s http://lithd/v1/do --json '{\"statements\":[{\"sql\":\"SELECT 1\"}]}'\n",
             LITH_VERSION, o.unix_path, o.db, sync, ckpt, auth, o.unix_path);
    }
    fflush(stdout);
    lithd_log(LITHD_LOG_INFO, "started: db %s, synchronous %s, checkpoint %s, %d named command%s%s", o.db,
              sync, ckpt, lithd_commands_count(commands), lithd_commands_count(commands) == 1 ? "" : "s",
              o.only_named ? " (only named)" : "");
  }

  uv_run(&d.loop, UV_RUN_DEFAULT);
  exit_code = 0;

out:
  close_wal_watch(&d); /* a startup failure after it began */
  if (d.http != NULL)
    lith_http_server_destroy(d.http); /* after uv_run: disposes h2o */
  lithd_server_free(&d.srv);          /* after the HTTP server: it reported into it */
  if (d.srv.park.started && !d.srv.park.stopped) {
    lithd_server_stop(&d.srv); /* a startup failure after the routes */
    uv_run(&d.loop, UV_RUN_DEFAULT);
  }
  if (d.bridge != NULL) {
    /* a startup failure: close the bridge, running the loop until done */
    lith_uv_close(d.bridge, on_bridge_closed, &d);
    uv_run(&d.loop, UV_RUN_DEFAULT);
  }
  if (d.signals_open) {
    close_signals(&d);
    uv_run(&d.loop, UV_RUN_DEFAULT);
  }
  if (loop_open && uv_loop_close(&d.loop) != 0)
    lithd_log(LITHD_LOG_ERROR, "handles left on the loop");
  if (d.db != NULL && lith_close(d.db) != LITH_OK) {
    lithd_log(LITHD_LOG_ERROR, "close: %s", lith_errmsg(NULL));
    exit_code = 1;
  }
  free(token);
  lithd_commands_free(commands);
  lithd_schema_free(&schema);
  lithd_guard_stop();
  if (lock_fd >= 0)
    close(lock_fd); /* after lith_close: the file is released */
  if (exit_code == 0 && o.restore == NULL)
    lithd_log(LITHD_LOG_INFO, "stopped");
  lithd_opts_free(&o);
  lithd_log_close();
  return exit_code;
}
