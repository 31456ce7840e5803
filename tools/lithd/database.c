/*
 * lithd database — one database's open and close (see database.h).
 *
 * Order of opening, each step undone by lithd_database_close whatever step
 * failed: the schema and commands files of every database (_load: a typo
 * stops lithd before any database is created), then per database the lock
 * (nothing touches a file another lithd serves), lith_open with the
 * schema's steps as migrations, the commands prepared against the result
 * (a misspelt table stops lithd, not the first request), the page size
 * (/metrics' WAL bytes), the bridge.
 */
#include "database.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

/* ---- One lithd per database ------------------------------------------- */

/* The database's real name into out[PATH_MAX]: the path with every link,
 * `.` and `..` resolved, so that every name of one file locks one lock
 * file, beside the file itself (where its -wal is). A file that does not
 * exist yet: its directory resolved and its name appended; a link to
 * nothing followed to the name it gives, as SQLite follows it (opening it
 * creates that file). 0, or -1 after a message. */
static int real_name(const char *db, char *out) {
  char cur[PATH_MAX], next[PATH_MAX], dir[PATH_MAX], target[PATH_MAX];
  struct stat st;
  ssize_t n;
  int hops;

  if (snprintf(cur, sizeof cur, "%s", db) >= (int)sizeof cur) {
    lithd_log(LITHD_LOG_ERROR, "%s: path too long", db);
    return -1;
  }
  for (hops = 0; hops < 40; hops++) {
    if (realpath(cur, out) != NULL)
      return 0;
    if (errno != ENOENT)
      break;
    const char *slash = strrchr(cur, '/');
    size_t dlen = slash == NULL ? 0 : slash == cur ? 1 : (size_t)(slash - cur);
    if (lstat(cur, &st) == 0 && S_ISLNK(st.st_mode)) {
      if ((n = readlink(cur, target, sizeof target - 1)) < 0)
        break;
      target[n] = '\0';
      if (target[0] == '/' || slash == NULL)
        n = snprintf(next, sizeof next, "%s", target);
      else
        n = snprintf(next, sizeof next, "%.*s/%s", (int)dlen, cur, target);
      if (n >= (ssize_t)sizeof next) {
        errno = ENAMETOOLONG;
        break;
      }
      memcpy(cur, next, (size_t)n + 1);
      continue;
    }
    /* No file by that name (yet): its directory must exist. */
    if (slash == NULL)
      snprintf(next, sizeof next, ".");
    else
      snprintf(next, sizeof next, "%.*s", (int)dlen, cur);
    if (realpath(next, dir) == NULL)
      break;
    if (snprintf(out, PATH_MAX, "%s/%s", strcmp(dir, "/") == 0 ? "" : dir, slash == NULL ? cur : slash + 1) >=
        PATH_MAX) {
      errno = ENAMETOOLONG;
      break;
    }
    return 0;
  }
  if (hops == 40)
    errno = ELOOP;
  lithd_log(LITHD_LOG_ERROR, "%s: cannot resolve its name (for the lock file): %s", db, strerror(errno));
  return -1;
}

/* REAL-lithd.lock for db into a new string (the caller frees it), or NULL
 * after a message. */
static char *lock_path(const char *db) {
  char real[PATH_MAX];
  char *path;

  if (real_name(db, real) != 0)
    return NULL;
  size_t n = strlen(real) + sizeof "-lithd.lock";
  if ((path = malloc(n)) == NULL) {
    lithd_log(LITHD_LOG_ERROR, "out of memory");
    return NULL;
  }
  snprintf(path, n, "%s-lithd.lock", real);
  return path;
}

/* 1 if `path` names the file `fd` has open. */
static int same_file(int fd, const char *path) {
  struct stat a, b;
  return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int lithd_database_lock(const char *db) {
  char *path;
  char buf[32];
  int fd = -1, tries;

  if ((path = lock_path(db)) == NULL)
    return -1;
  /* A holder that ends with lithd_database_unlock removes the file: a lock
   * won on the file it removed locks nothing anyone else will open, so
   * after the lock, the name must still be that file (else again: a
   * restore ends once, so a few tries are plenty). */
  for (tries = 0; tries < 8; tries++) {
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
      lithd_log(LITHD_LOG_ERROR, "cannot open the lock file %s: %s", path, strerror(errno));
      free(path);
      return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0)
      break;
    if (same_file(fd, path))
      goto locked;
    close(fd);
    fd = -1;
  }
  if (fd < 0) {
    lithd_log(LITHD_LOG_ERROR, "cannot lock %s: it was removed under each of %d tries", path, tries);
    free(path);
    return -1;
  }
  {
    int e = errno;
    if (e == EWOULDBLOCK) {
      ssize_t got = pread(fd, buf, sizeof buf - 1, 0);
      long pid = 0;
      if (got > 0) {
        buf[got] = '\0';
        pid = strtol(buf, NULL, 10);
      }
      if (pid == (long)getpid())
        lithd_log(LITHD_LOG_ERROR, "%s is given twice (two --db names for one file; the lock file %s)", db,
                  path);
      else if (pid > 0)
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
locked:
  /* Ours: record the pid for the message above (best effort). */
  snprintf(buf, sizeof buf, "%ld", (long)getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, strlen(buf), 0) < 0) {
    /* the lock holds regardless; only the message would lack the pid */
  }
  free(path);
  return fd;
}

void lithd_database_unlock(const char *db, int fd) {
  char *path;

  if (fd < 0)
    return;
  /* Removed while still held: whoever opened it meanwhile finds, once it
   * has the lock, that the name no longer leads to it, and tries again
   * (lithd_database_lock). */
  if ((path = lock_path(db)) != NULL && same_file(fd, path))
    unlink(path);
  free(path);
  close(fd);
}

/* ---- Opening ------------------------------------------------------------ */

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

void lithd_database_init(lithd_database *d, const lithd_opts_db *opt, int named) {
  memset(d, 0, sizeof *d);
  d->opt = opt;
  d->named = named;
  d->lock_fd = -1;
  if (named)
    snprintf(d->label, sizeof d->label, "database %s: ", opt->name);
}

int lithd_database_load(lithd_database *d) {
  const lithd_opts_db *o = d->opt;
  char err[1024];

  if (o->schema != NULL && lithd_schema_load(o->schema, &d->schema, err, sizeof err) != 0) {
    lithd_log(LITHD_LOG_ERROR, "%s%s", d->label, err);
    return LITHD_DATABASE_ERROR;
  }
  if (o->commands != NULL && lithd_commands_load(o->commands, &d->commands, err, sizeof err) != 0) {
    lithd_log(LITHD_LOG_ERROR, "%s--commands %s", d->label, err);
    return LITHD_DATABASE_ERROR;
  }
  return LITHD_DATABASE_OK;
}

int lithd_database_open(lithd_database *d, const lith_options *base, int64_t queue_wait_ms, uv_loop_t *loop) {
  const lithd_opts_db *o = d->opt;
  lith_options lopt = *base;
  int rc;

  if ((d->lock_fd = lithd_database_lock(o->path)) < 0) {
    if (d->named)
      lithd_log(LITHD_LOG_ERROR, "%scannot lock it", d->label);
    return LITHD_DATABASE_ERROR;
  }
  lopt.migrations = (const char *const *)d->schema.steps;
  lopt.n_migrations = d->schema.n;
  rc = lith_open(o->path, &lopt, &d->db);
  if (rc != LITH_OK) {
    d->db = NULL;
    lithd_log(LITHD_LOG_ERROR, "%scannot open %s: %s%s", d->label, o->path, lith_errmsg(NULL),
              o->schema != NULL && rc == LITH_SCHEMA
                  ? " (--schema has fewer steps than the database has applied)"
                  : "");
    return LITHD_DATABASE_ERROR;
  }
  if (d->commands != NULL) {
    struct check_ctx k;
    memset(&k, 0, sizeof k);
    k.commands = d->commands;
    if (lith_read(d->db, check_commands, &k) != LITH_OK) {
      lithd_log(LITHD_LOG_ERROR, "%s--commands: cannot read the database: %s", d->label, lith_errmsg(d->db));
      return LITHD_DATABASE_ERROR;
    }
    if (k.failed) {
      lithd_log(LITHD_LOG_ERROR, "%s--commands %s", d->label, k.err);
      return LITHD_DATABASE_ERROR;
    }
  }
  if (lith_read(d->db, read_page_size, &d->page_size) != LITH_OK)
    d->page_size = 0; /* /metrics then says 0 bytes; nothing else needs it */
  {
    char err[LITH_ERRMSG_MAX + 64];
    if (lithd_store_local_open(d->db, loop, queue_wait_ms, &d->store, err, sizeof err) != LITH_OK) {
      lithd_log(LITHD_LOG_ERROR, "%s%s", d->label, err);
      return LITHD_DATABASE_ERROR;
    }
    d->db = NULL; /* the store's now (lithd_store_lith) */
  }
  d->srv.name = o->name;
  d->srv.store = d->store;
  d->srv.db = lithd_store_lith(d->store);
  d->srv.commands = d->commands;
  d->srv.db_path = o->path;
  d->srv.metrics.page_size = d->page_size;
  d->srv.metrics.queue_capacity = lopt.queue_capacity;
  d->srv.metrics.readers = lopt.readers;
  return LITHD_DATABASE_OK;
}

/* ---- lithd --dqlite ------------------------------------------------------ */

/* The named commands prepared on the schema run in memory. */
static int check_commands_mem(lithd_database *d, char *err, size_t errsz) {
  sqlite3 *mem = NULL;
  int rc = -1;
  if (sqlite3_open(":memory:", &mem) != SQLITE_OK) {
    snprintf(err, errsz, "cannot open an in-memory database to check --commands");
    goto out;
  }
  for (int i = 0; i < d->schema.n; i++)
    if (sqlite3_exec(mem, d->schema.steps[i], NULL, NULL, NULL) != SQLITE_OK) {
      snprintf(err, errsz, "--schema step %d (run in memory to check --commands): %s", i + 1,
               sqlite3_errmsg(mem));
      goto out;
    }
  if (lithd_commands_check(d->commands, mem, err, errsz) != 0)
    goto out;
  rc = 0;
out:
  sqlite3_close(mem);
  return rc;
}

int lithd_database_open_dqlite(lithd_database *d, const lithd_dq_options *o, uv_loop_t *loop) {
  char err[1024];
  if (d->commands != NULL && check_commands_mem(d, err, sizeof err) != 0) {
    lithd_log(LITHD_LOG_ERROR, "--commands %s", err);
    return LITHD_DATABASE_ERROR;
  }
  if (lithd_store_dqlite_open(o, &d->schema, loop, &d->store, err, sizeof err) != LITH_OK) {
    lithd_log(LITHD_LOG_ERROR, "--dqlite %s: %s", o->addresses, err);
    return LITHD_DATABASE_ERROR;
  }
  d->srv.name = d->opt->name;
  d->srv.store = d->store;
  d->srv.commands = d->commands;
  d->srv.db_path = d->opt->path;
  d->srv.metrics.readers = LITHD_DQ_READERS;
  return LITHD_DATABASE_OK;
}

/* ---- The WAL nobody checkpoints ---------------------------------------- */

static void on_wal_watch(uv_timer_t *t) {
  lithd_database *d = t->data;
  lith_stats *st = malloc(sizeof *st); /* ~3.5 KiB of histograms: not on the stack */
  int64_t now;

  if (st == NULL)
    return;
  lith_stats_get(d->srv.db, st);
  if (!d->wal_external) {
    if (st->wal_restart_blocked > 0 && !d->wal_blocked_said) {
      d->wal_blocked_said = 1;
      lithd_log(LITHD_LOG_WARN,
                "%sthe WAL was wholly checkpointed with lithd's reads held and still did not start over: a "
                "connection outside lithd (another process, the sqlite3 shell) keeps reading it, and lithd "
                "cannot hold those; the -wal file (now %.1f MiB) grows while they read "
                "(lith_wal_restart_blocked_total counts each time; said once)",
                d->label, (double)st->wal_file_bytes / (1024.0 * 1024.0));
    }
  } else if (st->wal_pages < d->wal_threshold) {
    d->wal_above = 0; /* something checkpointed: the next crossing warns again */
  } else if (!d->wal_above) {
    d->wal_above = 1;
    now = lith_clock_ms();
    if (d->wal_last_warn_ms == 0 || now - d->wal_last_warn_ms >= LITHD_WAL_WARN_EVERY_MS) {
      d->wal_last_warn_ms = now;
      lithd_log(LITHD_LOG_WARN,
                "%sthe WAL holds %" PRIu64 " pages (%.1f MiB), past %d x --checkpoint-pages = %" PRIu64
                " pages, and --checkpoint external means lithd never checkpoints it: is the replicator "
                "(Litestream, ...) running? It grows until something checkpoints",
                d->label, st->wal_pages, (double)st->wal_pages * (double)d->page_size / (1024.0 * 1024.0),
                LITHD_WAL_WARN_FACTOR, d->wal_threshold);
    }
  }
  free(st);
}

void lithd_database_watch_wal(lithd_database *d, uv_loop_t *loop, int checkpoint_pages, int external) {
  d->wal_external = external;
  d->wal_threshold = (uint64_t)LITHD_WAL_WARN_FACTOR * (uint64_t)checkpoint_pages;
  uv_timer_init(loop, &d->wal_timer);
  d->wal_timer.data = d;
  d->wal_open = 1;
  uv_timer_start(&d->wal_timer, on_wal_watch, LITHD_WAL_WATCH_MS, LITHD_WAL_WATCH_MS);
}

void lithd_database_unwatch_wal(lithd_database *d) {
  if (!d->wal_open)
    return;
  uv_close((uv_handle_t *)&d->wal_timer, NULL);
  d->wal_open = 0;
}

/* ---- Closing ------------------------------------------------------------ */

void lithd_database_drain(lithd_database *d, void (*on_drained)(void *arg), void *arg) {
  if (d->store != NULL)
    lithd_store_drain(d->store, on_drained, arg);
  else if (on_drained != NULL)
    on_drained(arg);
}

int lithd_database_close(lithd_database *d) {
  int rc = LITHD_DATABASE_OK;
  char err[LITH_ERRMSG_MAX];
  /* A store closes its own handle; d->db is set only while a half-open
   * database had no store yet. */
  if (d->store != NULL && lithd_store_close(d->store, err, sizeof err) != LITH_OK) {
    lithd_log(LITHD_LOG_ERROR, "%sclose: %s", d->label, err);
    rc = LITHD_DATABASE_ERROR;
  }
  d->store = NULL;
  if (d->db != NULL && lith_close(d->db) != LITH_OK) {
    lithd_log(LITHD_LOG_ERROR, "%sclose: %s", d->label, lith_errmsg(NULL));
    rc = LITHD_DATABASE_ERROR;
  }
  d->db = NULL;
  lithd_commands_free(d->commands);
  d->commands = NULL;
  lithd_schema_free(&d->schema);
  if (d->lock_fd >= 0)
    close(d->lock_fd); /* after lith_close: the file is released */
  d->lock_fd = -1;
  return rc;
}
