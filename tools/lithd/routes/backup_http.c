/*
 * lithd backups over HTTP: POST /v1/backup (a file in --backup-dir) and
 * GET /v1/backup (a snapshot downloaded). The design is in backup_http.h.
 */
#include "backup_http.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "json.h"
#include "log.h"
#include "server.h"
#include "sqldump.h"

/* A backup's file name, at most (backup_name_ok). */
#define BACKUP_NAME_MAX 200

/* ---- POST /v1/backup --------------------------------------------------- */

/* {"dest": "NAME"}: lith_backup_new into --backup-dir on libuv's thread
 * pool (it copies the whole file; the loop must keep serving), answered
 * with the path, size and time. A client names a new file in the
 * operator's directory, nothing else: no path, no file replaced, no link
 * followed, no FIFO or device opened (lith_backup_new). Without
 * --backup-dir the endpoint is off. */
struct backup_ctx {
  uv_work_t work;
  lithd_dbsrv *s; /* the database backed up */
  lith_http_req *req;
  char *dest;
  int rc;
  int64_t bytes;
  int64_t ms;
  char errmsg[LITH_ERRMSG_MAX];
};

/* A backup's name: 1 to BACKUP_NAME_MAX of [A-Za-z0-9._-], not beginning
 * with '.'; `len` bytes (a NUL among them is refused). */
static int backup_name_ok(const char *n, size_t len) {
  if (len == 0 || len > BACKUP_NAME_MAX || n[0] == '.')
    return 0;
  for (size_t i = 0; i < len; i++) {
    char ch = n[i];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
          ch == '_' || ch == '-'))
      return 0;
  }
  return 1;
}

static void backup_work(uv_work_t *w) { /* a pool thread */
  struct backup_ctx *k = w->data;
  int64_t t0 = lith_clock_ms();
  struct stat st;

  k->rc = lithd_store_snapshot(k->s->store, k->dest, k->errmsg, sizeof k->errmsg);
  k->ms = lith_clock_ms() - t0;
  if (k->rc == LITH_OK && stat(k->dest, &st) == 0)
    k->bytes = (int64_t)st.st_size;
}

static void backup_after(uv_work_t *w, int status) { /* the loop thread */
  struct backup_ctx *k = w->data;
  lithd_error e;

  if (status == UV_ECANCELED) {
    lith_http_respond_error(k->req, 503, "lithd is shutting down");
  } else if (k->rc == LITH_OK) {
    lithd_buf b = {0};
    char *txt;
    lithd_buf_puts(&b, "{\"dest\":");
    lithd_json_put_string(&b, k->dest, strlen(k->dest));
    lithd_buf_puts(&b, ",\"bytes\":");
    lithd_json_put_int(&b, k->bytes);
    lithd_buf_puts(&b, ",\"ms\":");
    lithd_json_put_int(&b, k->ms);
    lithd_buf_puts(&b, "}");
    txt = lithd_buf_finish(&b);
    if (txt == NULL)
      lith_http_respond_error(k->req, 500, "out of memory");
    else
      lith_http_respond_json(k->req, 200, txt);
    free(txt);
    lithd_log(LITHD_LOG_INFO, "backup to %s: %" PRId64 " bytes in %" PRId64 " ms", k->dest, k->bytes, k->ms);
  } else {
    /* The name was checked here first, so the snapshot's only misuse
     * left is a destination that exists: a conflict. */
    lithd_error_set(&e, k->rc == LITH_MISUSE ? LITHD_CONFLICT : k->rc, -1, "%s",
                    k->errmsg[0] ? k->errmsg : lith_errstr(k->rc));
    lithd_respond_error(k->req, &e);
    lithd_log(LITHD_LOG_WARN, "backup to %s failed: %s", k->dest, e.message);
  }
  k->s->srv->posts--;
  free(k->dest);
  free(k);
}

int lithd_backup_post(lith_http_req *req, void *arg) {
  lithd_dbsrv *s = arg;
  struct backup_ctx *k = NULL;
  size_t len = 0;
  const char *body = lith_http_req_body(req, &len);
  lithd_arena tmp = {0};
  lj_value *root = NULL;
  const lj_value *dest;
  lithd_error e;
  int access = lithd_admit(s->srv, s, req);

  if (!access)
    return LITH_HTTP_DONE;
  if (access != LITHD_ACCESS_FULL) { /* a backup writes a file on the server */
    lithd_error_set(&e, LITHD_FORBIDDEN, -1,
                    "Authorization forbidden: the token grants read-only access, and a backup writes a file");
    goto refuse;
  }
  if (s->srv->backup_dir == NULL) {
    lithd_error_set(&e, LITHD_FORBIDDEN, -1, "backups are off: lithd was started without --backup-dir");
    goto refuse;
  }
  if (s->srv->posts >= LITHD_MAX_POSTS) {
    lith_http_add_header(req, "retry-after", "5");
    lithd_error_set(&e, LITH_BUSY, -1, "a backup is being made already (in this lithd); retry later");
    goto refuse;
  }
  if (lj_parse(&tmp, body, len, &root, NULL) != 0)
    root = NULL;
  dest = lj_get(root, "dest");
  if (root == NULL || root->type != LJ_OBJECT || root->n != 1 || dest == NULL || dest->type != LJ_STRING) {
    lithd_error_set(&e, LITHD_BAD_REQUEST, -1, "the body must be {\"dest\": \"NAME\"}");
    goto refuse;
  }
  if (!backup_name_ok(dest->u.s, dest->n)) {
    lithd_error_set(&e, LITHD_BAD_REQUEST, -1,
                    "\"dest\" must be a file name in lithd's --backup-dir: 1 to %d letters, digits, "
                    "'.', '_' or '-', not beginning with '.'",
                    BACKUP_NAME_MAX);
    goto refuse;
  }
  k = calloc(1, sizeof *k);
  if (k == NULL || (k->dest = malloc(strlen(s->srv->backup_dir) + dest->n + 2)) == NULL) {
    lithd_error_set(&e, LITH_NOMEM, -1, "out of memory");
    goto refuse;
  }
  sprintf(k->dest, "%s/%s", s->srv->backup_dir, dest->u.s);
  k->s = s;
  k->req = req;
  k->work.data = k;
  lithd_arena_free(&tmp);
  if (uv_queue_work(s->srv->loop, &k->work, backup_work, backup_after) == 0) {
    s->srv->posts++;
    return LITH_HTTP_PENDING; /* k now belongs to backup_after */
  }
  free(k->dest);
  free(k);
  lith_http_respond_error(req, 500, "cannot queue the backup");
  return LITH_HTTP_DONE;
refuse:
  if (k != NULL)
    free(k->dest);
  free(k);
  lithd_arena_free(&tmp);
  lithd_respond_error(req, &e);
  return LITH_HTTP_DONE;
}

/* ---- GET /v1/backup ---------------------------------------------------- */

/* Bytes read from the snapshot per piece, and the most the stream may hold
 * waiting before the next piece is read. */
#define PIECE (64 * 1024)

enum { FORMAT_SQLITE, FORMAT_SQL };

/* One download. Owned by the handler's chain: the pool work (make), then
 * the loop (send), freed by download_finish once its prepare handle closed. */
struct download {
  uv_work_t work;
  uv_prepare_t pace; /* before the loop waits: room for the next piece? */
  uv_fs_t fs;
  lithd_dbsrv *s;     /* the database backed up */
  lith_http_req *req; /* NULL once completed */
  int format;
  int fd;             /* the snapshot, unlinked; -1 when none */
  int64_t size, sent; /* bytes */
  int64_t t0, ms;     /* lith_clock_ms at arrival; time to make the snapshot */
  int rc;             /* LITH_ code of make */
  unsigned reading : 1;
  unsigned pace_open : 1;
  unsigned finished : 1;
  unsigned started : 1; /* the stream's head was sent */
  char errmsg[LITH_ERRMSG_MAX];
  char buf[PIECE];
};

static void pace_closed(uv_handle_t *h) { free(h->data); }

/* The end of a download, whatever it was: the snapshot closed, the request
 * completed (an unfinished stream is cut), the slot freed. Not while a
 * read is in flight (its callback comes back here). */
static void download_finish(struct download *d) {
  if (d->finished || d->reading)
    return;
  d->finished = 1;
  if (d->fd >= 0)
    close(d->fd);
  d->fd = -1;
  if (d->req != NULL) {
    const char *why = lith_http_is_gone(d->req) ? "the client left (or lithd stopped)" : "a read failed";
    if (!d->started)
      lithd_log(LITHD_LOG_INFO, "backup download (%s) not sent: %s",
                d->format == FORMAT_SQL ? "sql" : "sqlite", why);
    else if (d->sent < d->size)
      lithd_log(LITHD_LOG_INFO, "backup download stopped after %" PRId64 " of %" PRId64 " bytes: %s", d->sent,
                d->size, why);
    else
      lithd_log(LITHD_LOG_INFO,
                "backup download (%s): %" PRId64 " bytes, snapshot %" PRId64 " ms, %" PRId64 " ms in all",
                d->format == FORMAT_SQL ? "sql" : "sqlite", d->size, d->ms, lith_clock_ms() - d->t0);
    if (d->started)
      lith_http_stream_end(d->req); /* released, whatever it returns */
    else
      lith_http_respond_error(d->req, 503, "lithd is stopping"); /* or the client left: released */
    d->req = NULL;
  }
  d->s->srv->downloads--;
  if (d->pace_open) {
    uv_prepare_stop(&d->pace);
    uv_close((uv_handle_t *)&d->pace, pace_closed); /* frees d */
  } else {
    free(d);
  }
}

static void on_read(uv_fs_t *fs) {
  struct download *d = fs->data;
  ssize_t n = fs->result;
  uv_fs_req_cleanup(fs);
  d->reading = 0;
  if (n <= 0 || lith_http_stream_write(d->req, d->buf, (size_t)n) != LITH_HTTP_OK) {
    download_finish(d); /* a short file (cannot be: it is ours), or the client left */
    return;
  }
  d->sent += n;
  if (d->sent >= d->size)
    download_finish(d);
}

/* Before the loop waits (so after the write in flight completed, whichever
 * phase that came in: a uv_check handle would run only after the next wait,
 * and a write completed in the pending phase would leave the download
 * stuck): read the next piece if the stream has room for it. */
static void on_pace(uv_prepare_t *h) {
  struct download *d = h->data;
  if (d->reading || d->finished)
    return;
  if (lith_http_is_gone(d->req)) {
    download_finish(d);
    return;
  }
  if (lith_http_stream_queued(d->req) >= PIECE)
    return;
  int64_t left = d->size - d->sent;
  uv_buf_t b = uv_buf_init(d->buf, (unsigned)(left < PIECE ? left : PIECE));
  d->fs.data = d;
  if (uv_fs_read(d->s->srv->loop, &d->fs, d->fd, &b, 1, d->sent, on_read) != 0) {
    download_finish(d);
    return;
  }
  d->reading = 1;
}

static void on_gone(lith_http_req *req, void *arg) {
  (void)req, (void)arg; /* on_pace sees it before the loop waits again */
}

struct dump_ctx {
  FILE *out;
  char err[LITH_ERRMSG_MAX];
  int rc; /* SQLite's */
};

static int dump_read(lith_rx *rx, void *arg) { /* a pool thread, one snapshot */
  struct dump_ctx *k = arg;
  k->rc = lithd_sql_dump(lith_rx_db(rx), k->out, k->err, sizeof k->err);
  return k->rc == SQLITE_OK ? LITH_OK : LITH_ERROR;
}

/* The SQL script of a snapshot file (a store without a local file: its
 * snapshot is the one copy there is to read), on a read-only connection
 * of its own, in one read transaction. */
static int dump_file(const char *file, struct dump_ctx *k) {
  sqlite3 *db = NULL;
  int rc = sqlite3_open_v2(file, &db, SQLITE_OPEN_READONLY, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
  if (rc == SQLITE_OK)
    rc = lithd_sql_dump(db, k->out, k->err, sizeof k->err);
  else
    snprintf(k->err, sizeof k->err, "reading the snapshot: %s", db != NULL ? sqlite3_errmsg(db) : "");
  k->rc = rc;
  sqlite3_close(db); /* the read transaction ends with it */
  return rc == SQLITE_OK ? LITH_OK : LITH_ERROR;
}

/* Write the snapshot at `path` (a new file in a private directory). */
static int make_snapshot(struct download *d, const char *path) {
  char file[PATH_MAX + 32];
  if (d->format == FORMAT_SQLITE)
    return lithd_store_snapshot(d->s->store, path, d->errmsg, sizeof d->errmsg);
  /* Without a local file, the script is read off a snapshot beside it. */
  snprintf(file, sizeof file, "%s.db", path);
  if (d->s->db == NULL) {
    int rc = lithd_store_snapshot(d->s->store, file, d->errmsg, sizeof d->errmsg);
    if (rc != LITH_OK)
      return rc;
  }
  struct dump_ctx k = {NULL, "", SQLITE_OK};
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 || (k.out = fdopen(fd, "w")) == NULL) {
    snprintf(d->errmsg, sizeof d->errmsg, "cannot create the dump beside the database: %s", strerror(errno));
    if (fd >= 0)
      close(fd);
    unlink(file);
    return errno == ENOSPC ? LITH_DISKFULL : LITH_IOERR;
  }
  int rc = d->s->db != NULL ? lith_read(d->s->db, dump_read, &k) : dump_file(file, &k);
  if (d->s->db == NULL)
    unlink(file);
  if (fclose(k.out) != 0 && rc == LITH_OK && k.rc == SQLITE_OK) {
    snprintf(d->errmsg, sizeof d->errmsg, "cannot write the dump: %s", strerror(errno));
    return LITH_IOERR;
  }
  if (k.rc != SQLITE_OK) {
    snprintf(d->errmsg, sizeof d->errmsg, "%s", k.err);
    return k.rc == SQLITE_INTERRUPT ? LITH_INTERRUPTED : k.rc == SQLITE_FULL ? LITH_DISKFULL : LITH_IOERR;
  }
  if (rc != LITH_OK)
    snprintf(d->errmsg, sizeof d->errmsg, "%s", d->s->db != NULL ? lith_errmsg(d->s->db) : k.err);
  return rc;
}

/* Where a download's snapshot is made (the header says why): beside the
 * database; without a local file (dqlite), in --backup-dir if given (the
 * place the operator sized for backups), else in $TMPDIR or /tmp. */
static const char *scratch_dir(const lithd_dbsrv *s, char *buf, size_t cap) {
  const char *t;
  if (s->db != NULL) {
    snprintf(buf, cap, "%s", s->db_path);
    return dirname(buf);
  }
  if (s->srv->backup_dir != NULL)
    return s->srv->backup_dir;
  t = getenv("TMPDIR");
  return t != NULL && t[0] == '/' ? t : "/tmp";
}

static void download_work(uv_work_t *w) { /* a pool thread */
  struct download *d = w->data;
  char dir[PATH_MAX], path[PATH_MAX + 16], base[PATH_MAX];
  int64_t t0 = lith_clock_ms();
  struct stat st;

  const char *where = scratch_dir(d->s, base, sizeof base);
  if (snprintf(dir, sizeof dir, "%s/.lithd-backup-XXXXXX", where) >= (int)sizeof dir ||
      mkdtemp(dir) == NULL) {
    d->rc = errno == ENOSPC ? LITH_DISKFULL : LITH_IOERR;
    snprintf(d->errmsg, sizeof d->errmsg, "cannot make a directory in %s: %s", where, strerror(errno));
    return;
  }
  snprintf(path, sizeof path, "%s/snapshot", dir);
  d->rc = make_snapshot(d, path);
  d->ms = lith_clock_ms() - t0;
  if (d->rc == LITH_OK) {
    d->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (d->fd < 0 || fstat(d->fd, &st) != 0) {
      d->rc = LITH_IOERR;
      snprintf(d->errmsg, sizeof d->errmsg, "cannot open the snapshot: %s", strerror(errno));
    } else {
      d->size = (int64_t)st.st_size;
    }
  }
  /* The descriptor holds the file from now on: gone from the directory
   * whatever happens to the download or to lithd. */
  unlink(path);
  rmdir(dir);
}

/* "attachment; filename=NAME-YYYYMMDDTHHMMSSZ.EXT", NAME the database's
 * file name (db_path's) without its extension, kept to [A-Za-z0-9._-]. */
static void disposition(const char *db_path, int format, char *out, size_t cap) {
  char base[PATH_MAX], name[64], when[32];
  const char *b;
  size_t n = 0;
  time_t now = time(NULL);
  struct tm tm;

  snprintf(base, sizeof base, "%s", db_path);
  b = basename(base);
  for (; *b && *b != '.' && n < sizeof name - 1; b++)
    name[n++] = (*b >= 'a' && *b <= 'z') || (*b >= 'A' && *b <= 'Z') || (*b >= '0' && *b <= '9') ||
                        *b == '_' || *b == '-'
                    ? *b
                    : '_';
  name[n] = '\0';
  gmtime_r(&now, &tm);
  strftime(when, sizeof when, "%Y%m%dT%H%M%SZ", &tm);
  snprintf(out, cap, "attachment; filename=\"%s-%s.%s\"", n ? name : "lith", when,
           format == FORMAT_SQL ? "sql" : "sqlite3");
}

static const char *content_type(int format) {
  return format == FORMAT_SQL ? "application/sql" : "application/vnd.sqlite3";
}

/* HEAD /v1/backup: the head a GET would get, without a snapshot (which
 * is the only way to know the length: a download's Content-Length is its
 * snapshot's size). So no Content-Length: RFC 9110 (8.6) lets a HEAD
 * answer leave out what only making the content would tell, and forbids a
 * Content-Length other than the GET's exact one, so no estimate either.
 * Costs nothing: no download slot, no file, no read. */
static int backup_head(lith_http_req *req, const lithd_dbsrv *s, int format) {
  char cd[256];
  disposition(s->db_path, format, cd, sizeof cd);
  lith_http_add_header(req, "content-disposition", cd);
  lith_http_add_header(req, "cache-control", "no-store");
  if (lith_http_stream_start(req, 200, content_type(format)) == LITH_HTTP_OK)
    lith_http_stream_end(req);
  else
    lith_http_respond_error(req, 503, "lithd is stopping");
  return LITH_HTTP_DONE;
}

static void download_after(uv_work_t *w, int status) { /* the loop thread */
  struct download *d = w->data;
  char cd[256];
  lithd_error e;

  if (status == UV_ECANCELED && d->rc == LITH_OK) {
    d->rc = LITH_CLOSED;
    snprintf(d->errmsg, sizeof d->errmsg, "lithd is shutting down");
  }
  if (lith_http_is_gone(d->req)) {
    download_finish(d);
    return;
  }
  if (d->rc != LITH_OK) {
    lithd_error_set(&e, d->rc, -1, "backup: %s", d->errmsg[0] ? d->errmsg : lith_errstr(d->rc));
    lithd_log(LITHD_LOG_WARN, "backup download failed: %s", e.message);
    lithd_respond_error(d->req, &e);
    d->req = NULL;
    download_finish(d);
    return;
  }
  disposition(d->s->db_path, d->format, cd, sizeof cd);
  lith_http_add_header(d->req, "content-disposition", cd);
  lith_http_add_header(d->req, "cache-control", "no-store");
  /* During the stop too: the download was accepted before it, and is
   * LITH_HTTP_STOP_FINISH (lithd_backup_get). */
  if (lith_http_stream_start_length(d->req, 200, content_type(d->format), (uint64_t)d->size) !=
      LITH_HTTP_OK) {
    download_finish(d);
    return;
  }
  d->started = 1;
  if (d->size == 0) {
    download_finish(d);
    return;
  }
  uv_prepare_init(d->s->srv->loop, &d->pace);
  d->pace.data = d;
  d->pace_open = 1;
  uv_prepare_start(&d->pace, on_pace);
  on_pace(&d->pace); /* the first piece now */
}

int lithd_backup_get(lith_http_req *req, void *arg) {
  lithd_dbsrv *s = arg;
  const char *q = lith_http_req_query(req);
  struct download *d;
  int format;

  if (!lithd_admit(s->srv, s, req))
    return LITH_HTTP_DONE;
  if (q[0] == '\0' || strcmp(q, "format=sqlite") == 0) {
    format = FORMAT_SQLITE;
  } else if (strcmp(q, "format=sql") == 0) {
    format = FORMAT_SQL;
  } else {
    lith_http_respond_error(req, 400,
                            "GET /v1/backup takes no query but format=sqlite (the default) or format=sql");
    return LITH_HTTP_DONE;
  }
  if (strcmp(lith_http_req_method(req), "HEAD") == 0)
    return backup_head(req, s, format);
  /* The slots are the process's, whatever the database: what they bound
   * (snapshots on the disk, pool threads, the disk's and the network's
   * bandwidth) is shared by every database. */
  if (s->srv->downloads >= LITHD_MAX_DOWNLOADS) {
    char msg[128];
    snprintf(msg, sizeof msg, "%d backup downloads are running already (in this lithd); retry later",
             LITHD_MAX_DOWNLOADS);
    lith_http_add_header(req, "retry-after", "5");
    lith_http_respond_error(req, 503, msg);
    return LITH_HTTP_DONE;
  }
  if ((d = calloc(1, sizeof *d)) == NULL) {
    lith_http_respond_error(req, 500, "out of memory");
    return LITH_HTTP_DONE;
  }
  d->s = s;
  d->req = req;
  d->format = format;
  d->fd = -1;
  d->t0 = lith_clock_ms();
  d->work.data = d;
  if (uv_queue_work(s->srv->loop, &d->work, download_work, download_after) != 0) {
    free(d);
    lith_http_respond_error(req, 500, "cannot queue the backup");
    return LITH_HTTP_DONE;
  }
  s->srv->downloads++;
  lith_http_on_gone(req, on_gone, d);
  /* SIGTERM lets it run out the grace (--stop-grace-ms) instead of ending
   * it at once as an event stream; its deadline cuts it. */
  lith_http_stream_at_stop(req, LITH_HTTP_STOP_FINISH);
  return LITH_HTTP_PENDING; /* d belongs to the chain: download_after */
}
