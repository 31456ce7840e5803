/*
 * lithd — an HTTP/JSON daemon around lith's single SQLite writer.
 *
 * Design:
 *   - One libuv loop on the main thread carries the HTTP server (http/), the
 *     lith_uv bridges (command completions) and the signal watchers; each
 *     database's writer thread does its SQLite writes; libuv's thread pool
 *     runs the reads of /v1/query and backups (sized to the read pools, see
 *     below). Routes live in server.c, options in options.c, the open and
 *     close of one database (lock, schema, commands, lith handle, bridge,
 *     WAL watch) in database.c.
 *   - Several databases (--db NAME=PATH, again and again): each its own
 *     lithd_database, opened in the order given; routes /v1/db/NAME/... go
 *     to it, the unprefixed ones to the default (server.h). A database that
 *     fails to open stops lithd with a message naming it, and everything
 *     opened before it is closed again: nothing half-started stays.
 *   - Startup: options (config file, then command line), log, token and
 *     JWT keys (a key file lithd cannot use stops it here), the
 *     databases (database.h: lock, --schema as migrations, named commands
 *     checked, bridge), HTTP server, routes, listeners; then one line on
 *     stdout with the URL, the databases and a curl example (tests read the
 *     bound port from it). Any failure: a message, exit 1.
 *   - A non-loopback --listen needs --token-file or --auth-jwt-key-file:
 *     the database must never be open to the network without a token.
 *   - Shutdown on SIGTERM/SIGINT, as a chain of callbacks so the loop keeps
 *     running until each stage ended: refuse the commands still waiting for
 *     queue room (503), stop the HTTP server (new requests are refused,
 *     in-flight ones answered, up to --stop-grace-ms; then 503) -> on_stopped:
 *     reads and backups still running are interrupted (guard.h,
 *     lith_interrupt), every database's lith_uv_close (every accepted
 *     command's callback has run) -> the last bridge closed: nothing left on
 *     the loop, uv_run returns. Then, after uv_run (h2o's context disposal
 *     runs the loop itself), the HTTP server is destroyed, each database's
 *     lith_close drains its writer and checkpoints (TRUNCATE; not with
 *     --checkpoint external), exit 0.
 *   - SIGHUP reopens the --log file (for logrotate) and reloads the TLS
 *     certificate and key (a renewed certificate: new connections get it;
 *     a bad file is logged and the old pair serves on).
 *   - --checkpoint external: lithd never checkpoints (a replicator such as
 *     Litestream owns the WAL). --litestream is that plus a busy timeout of
 *     at least LITHD_LITESTREAM_BUSY_MS (Litestream's write locks delay a
 *     batch, never fail it); the startup line says so. If nothing does, the
 *     WAL grows without end, so each database's WAL is watched (database.h).
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>
#include <uv.h>

#include "backup_http.h"
#include "commands.h"
#include "database.h"
#include "dqlite_restore.h"
#include "guard.h"
#include "heap.h"
#include "hrana_http.h"
#include "http.h"
#include "jwt.h"
#include "lith.h"
#include "lith_uv.h"
#include "log.h"
#include "options.h"
#include "restore.h"
#include "server.h"
#include "sqljson.h"
#include "token.h"

struct daemon {
  uv_loop_t loop;
  uv_signal_t sigterm, sigint, sighup;
  int signals_open;
  int64_t stop_grace_ms; /* SIGTERM: how long requests may still run */
  lithd_database *dbs;   /* n_dbs, in the order given */
  int n_dbs;
  lith_http_server *http;
  lithd_server srv;
  int stopping;
  const char *tls_cert, *tls_key; /* --tls-cert, --tls-key (the options'); NULL: no TLS */
};

/* ---- Shutdown chain ---------------------------------------------------- */

/* Every request is answered, or the grace is over and those still running
 * got 503: what still reads (a query on the thread pool, a backup) is
 * stopped now, so that the loop, which waits for the pool's work, and
 * lith_close, which waits for lith_read, end soon. Writes are not touched:
 * every accepted command is still run, committed and answered. Once the
 * last bridge closed, nothing of ours is left on the loop: uv_run
 * returns. */
static void on_http_stopped(lith_http_server *srv, void *arg) {
  struct daemon *d = arg;
  (void)srv;
  lithd_guard_stop_reads();
  for (int i = 0; i < d->n_dbs; i++)
    lithd_database_drain(&d->dbs[i], NULL, NULL);
}

static void close_signals(struct daemon *d) {
  if (!d->signals_open)
    return;
  uv_close((uv_handle_t *)&d->sigterm, NULL);
  uv_close((uv_handle_t *)&d->sigint, NULL);
  uv_close((uv_handle_t *)&d->sighup, NULL);
  d->signals_open = 0;
}

static void unwatch_wals(struct daemon *d) {
  for (int i = 0; i < d->n_dbs; i++)
    lithd_database_unwatch_wal(&d->dbs[i]);
}

static void begin_stop(struct daemon *d) {
  if (d->stopping)
    return;
  d->stopping = 1;
  close_signals(d);
  unwatch_wals(d);
  lithd_server_stop(&d->srv);
  if (lith_http_server_stop(d->http, (unsigned)d->stop_grace_ms, on_http_stopped, d) != LITH_HTTP_OK)
    on_http_stopped(d->http, d);
}

static void on_signal(uv_signal_t *h, int signum) {
  struct daemon *d = h->data;
  if (signum == SIGHUP) {
    if (lithd_log_reopen() != 0)
      lithd_log(LITHD_LOG_ERROR, "SIGHUP: cannot reopen the log: %s", strerror(errno));
    else
      lithd_log(LITHD_LOG_INFO, "SIGHUP: log reopened");
    if (d->tls_cert != NULL && d->http != NULL) {
      if (lith_http_tls_reload(d->http, d->tls_cert, d->tls_key) != LITH_HTTP_OK)
        lithd_log(LITHD_LOG_ERROR, "SIGHUP: the TLS certificate was not reloaded, the old one serves on: %s",
                  lith_http_errmsg());
      else
        lithd_log(LITHD_LOG_INFO, "SIGHUP: TLS certificate reloaded from %s", d->tls_cert);
    }
    return;
  }
  lithd_log(LITHD_LOG_INFO, "%s, stopping", signum == SIGTERM ? "SIGTERM" : "SIGINT");
  begin_stop(d);
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

/* libuv's pool runs /v1/query and backups: for each database as many
 * threads as readers (so every reader can be busy), and one for each
 * backup the process runs at once (a download's or a POST's, each copying
 * the whole database: backup_http.h), unless the environment already
 * says. It must be set before the pool's first use. */
static void size_thread_pool(int readers, int n_dbs) {
  char buf[16];
  long n;
  if (getenv("UV_THREADPOOL_SIZE") != NULL)
    return;
  if (readers < 1) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    readers = cpus < 1 ? 2 : cpus > 64 ? 64 : (int)cpus;
  }
  n = (long)readers * n_dbs + LITHD_MAX_DOWNLOADS + LITHD_MAX_POSTS;
  snprintf(buf, sizeof buf, "%d", (int)(n > 1024 ? 1024 : n));
  setenv("UV_THREADPOOL_SIZE", buf, 1);
}

/* The databases for the startup line: "db PATH" for one (as lithd always
 * said), "dbs NAME=PATH NAME=PATH, default NAME" for several. */
static void describe_dbs(const lithd_opts *o, char *buf, size_t cap) {
  size_t n = 0;
  int w;
  if (o->n_dbs == 1) {
    snprintf(buf, cap, "db %s", o->dbs[0].path);
    return;
  }
  w = snprintf(buf, cap, "dbs");
  for (int i = 0; w >= 0 && i < o->n_dbs; i++) {
    n += (size_t)w;
    if (n >= cap)
      return;
    w = snprintf(buf + n, cap - n, " %s=%s", o->dbs[i].name, o->dbs[i].path);
  }
  if (w >= 0 && (n += (size_t)w) < cap)
    snprintf(buf + n, cap - n, ", default %s", o->default_db != NULL ? o->default_db : "none");
}

/* ---- main -------------------------------------------------------------- */

/* --backup-dir DIR, ready before lithd serves: made when missing (mode
 * 0700: every backup is the whole database; the last part only, so a
 * misspelt parent is an error, not a new tree), and writable, else a
 * message and -1. Checked here rather than at the first POST /v1/backup,
 * which would fail each time (under systemd, ProtectSystem=strict makes a
 * DIR outside ReadWritePaths= read-only: EROFS). */
static int backup_dir_ready(const char *dir) {
  struct stat st;

  if (mkdir(dir, 0700) == 0) {
    lithd_log(LITHD_LOG_INFO, "--backup-dir %s: made it (mode 0700)", dir);
  } else if (errno != EEXIST) {
    lithd_log(LITHD_LOG_ERROR, "--backup-dir %s: cannot make it: %s%s", dir, strerror(errno),
              errno == ENOENT ? " (lithd makes the directory, not its parents)" : "");
    return -1;
  }
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    lithd_log(LITHD_LOG_ERROR, "--backup-dir %s: not a directory", dir);
    return -1;
  }
  if (access(dir, W_OK | X_OK) != 0) {
    lithd_log(LITHD_LOG_ERROR, "--backup-dir %s: not writable by lithd: %s%s", dir, strerror(errno),
              errno == EROFS ? " (under systemd: add it to the unit's ReadWritePaths=)" : "");
    return -1;
  }
  return 0;
}

/* The soft limit on open files raised to the hard one: every client is a
 * descriptor, and with the usual soft 1024 a thousand connections that
 * never finish their handshake keep every other client out until they
 * time out (lithd.service sets 65536; a lithd started by hand got 1024).
 * The hard limit is the administrator's. libuv polls with epoll, so a
 * descriptor past FD_SETSIZE is fine. */
static void raise_open_files(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
      lithd_log(LITHD_LOG_WARN, "cannot raise the open files limit to %llu: %s",
                (unsigned long long)rl.rlim_max, strerror(errno));
  }
}

int main(int argc, char **argv) {
  lithd_opts o;
  struct daemon d;
  lith_options lopt;
  lithd_guard_limits glim;
  lith_http_options hopt;
  lithd_dbsrv **served = NULL;
  char err[1024];
  char *token = NULL;
  lithd_jwt_keys *jwt_keys = NULL;
  int loop_open = 0;
  int lock_fd = -1;
  int exit_code = 1;
  double start_time;
  int rc, i;

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
  raise_open_files();
  size_thread_pool(o.dqlite != NULL ? LITHD_DQ_READERS : o.readers, o.n_dbs);
  if (o.restore != NULL && o.dqlite != NULL) {
    /* Into a cluster's database (dqlite_restore.h): no file, no lock; an
     * empty database is the rule there. */
    exit_code = lithd_dq_restore(o.restore, o.dqlite, o.dbs[0].name,
                                 o.dqlite_failover_ms > 0 ? o.dqlite_failover_ms : LITHD_DQ_FAILOVER_MS);
    goto out;
  }
  if (o.restore != NULL) {
    /* The lock for the whole restore: a lithd serving --db refuses it, one
     * starting meanwhile refuses to start (restore.h). One database only
     * (options.c). */
    if ((lock_fd = lithd_database_lock(o.dbs[0].path)) >= 0)
      exit_code = lithd_restore(o.restore, o.dbs[0].path, o.force, o.file_mode > 0 ? o.file_mode : 0600);
    goto out;
  }

  if (o.token_file != NULL && (token = lithd_token_read(o.token_file, err, sizeof err)) == NULL) {
    lithd_log(LITHD_LOG_ERROR, "--token-file %s", err);
    goto out;
  }
  if (o.auth_jwt_key_file != NULL &&
      lithd_jwt_keys_load(o.auth_jwt_key_file, &jwt_keys, err, sizeof err) != 0) {
    lithd_log(LITHD_LOG_ERROR, "--auth-jwt-key-file %s", err);
    goto out;
  }
  if (o.backup_dir != NULL && backup_dir_ready(o.backup_dir) != 0)
    goto out;
  for (i = 0; o.only_named && i < o.n_dbs; i++)
    if (o.dbs[i].commands == NULL) {
      if (o.n_dbs == 1)
        lithd_log(LITHD_LOG_ERROR, "--only-named needs --commands FILE: nothing could write");
      else
        lithd_log(LITHD_LOG_ERROR,
                  "--only-named needs --commands for every database: nothing could write database %s "
                  "(--commands FILE for all, or --commands %s=FILE)",
                  o.dbs[i].name, o.dbs[i].name);
      goto out;
    }

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
  lithd_answer_budget_set((size_t)o.max_answer_mib << 20);

  /* What every database is opened with (database.c adds its schema). */
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
  lopt.wal_hold_ms = o.wal_hold_ms;
  if (o.cache_kib > 0)
    lopt.cache_size_kib = o.cache_kib;
  lopt.mmap_size = o.mmap_mib << 20;
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

  if (uv_loop_init(&d.loop) != 0) {
    lithd_log(LITHD_LOG_ERROR, "uv_loop_init failed");
    goto out;
  }
  loop_open = 1;
  d.dbs = calloc((size_t)o.n_dbs, sizeof *d.dbs);
  served = calloc((size_t)o.n_dbs, sizeof *served);
  if (d.dbs == NULL || served == NULL) {
    lithd_log(LITHD_LOG_ERROR, "out of memory");
    goto out;
  }
  d.n_dbs = o.n_dbs;
  for (i = 0; i < o.n_dbs; i++)
    lithd_database_init(&d.dbs[i], &o.dbs[i], o.n_dbs > 1);
  for (i = 0; i < o.n_dbs; i++)
    if (lithd_database_load(&d.dbs[i]) != LITHD_DATABASE_OK)
      goto out;
  if (o.dqlite != NULL) { /* options.c made it the one database */
    lithd_dq_options dqo = {.addresses = o.dqlite,
                            .database = o.dbs[0].name,
                            .failover_ms = o.dqlite_failover_ms,
                            .max_batch = o.max_batch,
                            .max_queue = o.max_queue,
                            .max_run_ms = lopt.command_timeout_ms,
                            .authorizer = lithd_authorizer,
                            .on_connect = lithd_guard_connect,
                            .on_connect_ctx = &glim};
    /* A load that did not end is not served (dqlite_restore.h). */
    if (lithd_dq_restore_partial(o.dqlite, o.dbs[0].name,
                                 o.dqlite_failover_ms > 0 ? o.dqlite_failover_ms : LITHD_DQ_FAILOVER_MS) == 1)
      goto out;
    if (lithd_database_open_dqlite(&d.dbs[0], &dqo, &d.loop) != LITHD_DATABASE_OK)
      goto out;
    served[0] = d.srv.dflt = &d.dbs[0].srv;
  }
  for (i = 0; o.dqlite == NULL && i < o.n_dbs; i++) {
    if (lithd_database_open(&d.dbs[i], &lopt, o.queue_wait_ms, &d.loop) != LITHD_DATABASE_OK) {
      if (o.n_dbs > 1)
        lithd_log(LITHD_LOG_ERROR, "database %s (%s) did not open: lithd does not start", o.dbs[i].name,
                  o.dbs[i].path);
      goto out;
    }
    served[i] = &d.dbs[i].srv;
    if (o.n_dbs == 1 || (o.default_db != NULL && strcmp(o.default_db, o.dbs[i].name) == 0))
      d.srv.dflt = served[i];
  }

  lith_http_options_default(&hopt);
  /* Cleartext is HTTP/1.1 only: h2o carries out an "Upgrade: h2c" before
   * the framing guard can look at the request (http.h), so an upgraded
   * request with two Content-Length would run; and h2o 2.2.5 turns
   * prior-knowledge HTTP/2 off together with the upgrade. No lithd client
   * needs cleartext h2. Over TLS, HTTP/2 is chosen by ALPN before any
   * request: no upgrade to smuggle through. */
  hopt.http2 = LITH_HTTP_H2_TLS;
  hopt.tls_cert_file = o.tls_cert; /* loaded by create: a bad file stops lithd there */
  hopt.tls_key_file = o.tls_key;
  hopt.server_name = "lithd";
  if (o.max_body != 0)
    d.srv.limits.max_body_bytes = o.max_body;
  if (o.max_statements != 0)
    d.srv.limits.max_statements = o.max_statements;
  if (o.max_sql != 0)
    d.srv.limits.max_sql_bytes = o.max_sql;
  if (o.max_rows != 0)
    d.srv.limits.max_rows = o.max_rows;
  if (o.max_result_mib != 0)
    d.srv.limits.max_result_bytes = (size_t)o.max_result_mib << 20;
  if (o.max_run_ms != 0)
    d.srv.limits.max_run_ms = o.max_run_ms;
  d.srv.tx_idle_ms = o.tx_idle_ms != 0 ? o.tx_idle_ms : LITHD_TX_IDLE_MS;
  d.srv.tx_max_ms = o.tx_max_ms != 0 ? o.tx_max_ms : LITHD_TX_MAX_MS;
  d.srv.stream_idle_ms = o.stream_idle_ms != 0 ? o.stream_idle_ms : LITHD_HRANA_IDLE_MS;
  hopt.max_body = d.srv.limits.max_body_bytes;
  hopt.write_timeout_ms = (unsigned)o.write_timeout_ms; /* 0: never */
  hopt.request_timeout_ms = (unsigned)o.request_timeout_ms;
  if (lith_http_server_create(&d.loop, &hopt, &d.http) != LITH_HTTP_OK) {
    lithd_log(LITHD_LOG_ERROR, "http server: %s", lith_http_errmsg());
    goto out;
  }
  d.srv.loop = &d.loop;
  d.srv.http = d.http;
  d.tls_cert = o.tls_cert;
  d.tls_key = o.tls_key;
  d.srv.dbs = served;
  d.srv.n_dbs = (size_t)o.n_dbs;
  d.srv.token = token;
  d.srv.jwt_keys = jwt_keys;
  d.srv.only_named = o.only_named;
  d.srv.allow_origins = o.allow_origins;
  d.srv.allow_hosts = o.allow_hosts;
  d.srv.backup_dir = o.backup_dir;
  d.srv.metrics.start_time = start_time;
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
  if (o.dqlite == NULL)
    for (i = 0; i < d.n_dbs; i++)
      lithd_database_watch_wal(&d.dbs[i], &d.loop, lopt.checkpoint_pages,
                               o.checkpoint == LITH_CHECKPOINT_EXTERNAL);

  {
    /* The curl example names the real token file (absolute, quoted for
     * the shell), so it runs as printed; with several databases and no
     * default, it names the first database's route. */
    char auth[PATH_MAX * 4 + 64] = "", ckpt[96], dbs[2048], route[LITHD_DB_NAME_MAX + 16];
    const char *sync = o.dqlite != NULL                  ? "by the nodes"
                       : o.synchronous == LITH_SYNC_FULL ? "full"
                                                         : "normal";
    int port = lith_http_port(d.http), named = 0;
    for (i = 0; i < d.n_dbs; i++)
      named += lithd_commands_count(d.dbs[i].commands);
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
    describe_dbs(&o, dbs, sizeof dbs);
    if (o.dqlite != NULL) {
      snprintf(dbs, sizeof dbs, "dqlite %s, database %s", o.dqlite, o.dbs[0].name);
      snprintf(ckpt, sizeof ckpt, "by the nodes");
    }
    if (d.srv.dflt != NULL)
      snprintf(route, sizeof route, "/v1/do");
    else
      snprintf(route, sizeof route, "/v1/db/%s/do", o.dbs[0].name);
    if (port >= 0) {
      int v6 = strchr(o.host, ':') != NULL;
      const char *scheme = o.tls_cert != NULL ? "https" : "http";
      printf("lithd %s: listening on %s://%s%s%s:%d (%s, synchronous %s, checkpoint %s); try: curl -s%s "
             "%s://%s%s%s:%d%s --json '{\"statements\":[{\"sql\":\"SELECT 1\"}]}'\n",
             LITH_VERSION, scheme, v6 ? "[" : "", o.host, v6 ? "]" : "", port, dbs, sync, ckpt, auth, scheme,
             v6 ? "[" : "", o.host, v6 ? "]" : "", port, route);
    } else {
      printf("lithd %s: listening on unix:%s (%s, synchronous %s, checkpoint %s); try: curl -s%s "
             "--unix-socket %s http://lithd%s --json '{\"statements\":[{\"sql\":\"SELECT 1\"}]}'\n",
             LITH_VERSION, o.unix_path, dbs, sync, ckpt, auth, o.unix_path, route);
    }
    fflush(stdout);
    lithd_log(LITHD_LOG_INFO, "started: %s, synchronous %s, checkpoint %s, %d named command%s%s", dbs, sync,
              ckpt, named, named == 1 ? "" : "s", o.only_named ? " (only named)" : "");
  }

  uv_run(&d.loop, UV_RUN_DEFAULT);
  exit_code = 0;

out:
  unwatch_wals(&d); /* a startup failure after they began */
  if (d.http != NULL)
    lith_http_server_destroy(d.http); /* after uv_run: disposes h2o */
  if (loop_open) {
    /* a startup failure: close what is on the loop (the queues after the
     * routes, the bridges, the signals), then run it until they closed;
     * after a stop all this is closed already */
    if (!d.stopping)
      lithd_server_stop(&d.srv);
    for (i = 0; i < d.n_dbs; i++)
      lithd_database_drain(&d.dbs[i], NULL, NULL);
    close_signals(&d);
    uv_run(&d.loop, UV_RUN_DEFAULT);
  }
  lithd_server_free(&d.srv); /* after the HTTP server: it reported into it */
  if (loop_open && uv_loop_close(&d.loop) != 0)
    lithd_log(LITHD_LOG_ERROR, "handles left on the loop");
  for (i = 0; i < d.n_dbs; i++)
    if (lithd_database_close(&d.dbs[i]) != LITHD_DATABASE_OK)
      exit_code = 1;
  free(d.dbs);
  free(served);
  free(token);
  lithd_jwt_keys_free(jwt_keys);
  lithd_guard_stop();
  if (lock_fd >= 0)
    lithd_database_unlock(o.dbs[0].path, lock_fd); /* after the restore: its lock file goes too */
  if (exit_code == 0 && o.restore == NULL)
    lithd_log(LITHD_LOG_INFO, "stopped");
  lithd_opts_free(&o);
  lithd_log_close();
  return exit_code;
}
