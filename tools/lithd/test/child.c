/*
 * child.c — helpers shared by lithd's end-to-end tests (see child.h).
 *
 * Design: the daemon is spawned with posix_spawn, its stdout on a pipe (the
 * first line names the port), stderr inherited (it lands in the test's log).
 * Descriptors of ours are opened O_CLOEXEC / SOCK_CLOEXEC, so a daemon spawned
 * later never inherits a client socket or an earlier daemon's pipe. Every
 * wait goes through poll with a deadline. Answers are read by
 * http/h1client.c (Content-Length, chunked, or closed by EOF), so the tests
 * do not depend on how the HTTP layer frames a body; the keep-alive client
 * keeps the bytes read past one answer for the next one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "child.h"
#include "h1client.h"

#ifndef LITHD_PATH
#error "LITHD_PATH must name the lithd binary"
#endif

extern char **environ;

/* ---- Time ---------------------------------------------------------------- */

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* poll one fd for `events` until deadline (ms, monotonic): 1 ready, 0 timed
 * out, -1 error. */
static int wait_fd(int fd, short events, int64_t deadline) {
  for (;;) {
    struct pollfd p = {fd, events, 0};
    int64_t left = deadline - now_ms();
    int n;
    if (left < 0)
      left = 0;
    n = poll(&p, 1, (int)left);
    if (n < 0 && errno == EINTR)
      continue;
    return n < 0 ? -1 : n;
  }
}

/* ---- The child ------------------------------------------------------------ */

int tl_setup(void **state) {
  struct tl_child *c = calloc(1, sizeof *c);
  if (c == NULL)
    return -1;
  c->pid = -1;
  c->out_fd = -1;
  *state = c;
  return 0;
}

int tl_teardown(void **state) {
  struct tl_child *c = *state;
  if (c != NULL) {
    tl_stop(c, SIGKILL, TL_TIMEOUT_MS);
    free(c);
  }
  *state = NULL;
  return 0;
}

void tl_remove_db(const char *db) {
  static const char *const suffix[] = {"", "-wal", "-shm", "-lithd.lock"};
  char p[128];
  size_t i;
  for (i = 0; i < sizeof suffix / sizeof suffix[0]; i++) {
    snprintf(p, sizeof p, "%s%s", db, suffix[i]);
    unlink(p);
  }
}

/* Every lithd a test spawned and has not stopped: a test that fails
 * part-way (cmocka jumps out of it) leaves its children here, and the
 * process's exit kills them, so none outlives the test binary. */
#define TL_SPAWNED_MAX 64
static pid_t spawned[TL_SPAWNED_MAX];

static void kill_spawned(void) {
  for (int i = 0; i < TL_SPAWNED_MAX; i++)
    if (spawned[i] > 0) {
      kill(spawned[i], SIGKILL);
      waitpid(spawned[i], NULL, 0);
      spawned[i] = 0;
    }
}

static void remember(pid_t pid, pid_t forget) {
  static int registered;
  if (!registered) {
    atexit(kill_spawned);
    registered = 1;
  }
  for (int i = 0; i < TL_SPAWNED_MAX; i++)
    if (spawned[i] == forget) {
      spawned[i] = pid;
      return;
    }
}

void tl_start(struct tl_child *c, const char *name, unsigned flags, const char *const *extra) {
  int pfd[2];
  posix_spawn_file_actions_t fa;
  const char **argv;
  size_t n = 0, nextra = 0;
  char line[1024] = "";
  size_t len = 0;
  int64_t deadline;

  memset(c, 0, sizeof *c);
  c->pid = -1;
  c->out_fd = -1;
  snprintf(c->db, sizeof c->db, "%s.db", name);
  if (!(flags & TL_KEEP_DB))
    tl_remove_db(c->db);
  if (flags & TL_UNIX) {
    snprintf(c->unix_path, sizeof c->unix_path, "%s.sock", name);
    unlink(c->unix_path);
  }

  while (extra != NULL && extra[nextra] != NULL)
    nextra++;
  argv = calloc(nextra + 6, sizeof *argv);
  assert_non_null(argv);
  argv[n++] = LITHD_PATH;
  if (!(flags & TL_NO_DB)) {
    argv[n++] = "--db";
    argv[n++] = c->db;
  }
  if (flags & TL_UNIX) {
    argv[n++] = "--unix";
    argv[n++] = c->unix_path;
  } else {
    argv[n++] = "--listen";
    argv[n++] = "127.0.0.1:0";
  }
  if (nextra > 0)
    memcpy(argv + n, extra, nextra * sizeof *argv);
  argv[n + nextra] = NULL;

  assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
  assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
  assert_int_equal(posix_spawn_file_actions_adddup2(&fa, pfd[1], 1), 0);
  assert_int_equal(posix_spawn(&c->pid, LITHD_PATH, &fa, NULL, (char *const *)argv, environ), 0);
  remember(c->pid, 0);
  posix_spawn_file_actions_destroy(&fa);
  free(argv);
  close(pfd[1]);
  c->out_fd = pfd[0];

  /* The first line on stdout names the URL (TL_TIMEOUT_MS at most). */
  deadline = now_ms() + TL_TIMEOUT_MS;
  while (memchr(line, '\n', len) == NULL) {
    ssize_t got;
    assert_true(len < sizeof line - 1);
    assert_int_equal(wait_fd(c->out_fd, POLLIN, deadline), 1);
    got = read(c->out_fd, line + len, sizeof line - 1 - len);
    assert_true(got > 0); /* EOF: lithd refused to start (see its stderr) */
    len += (size_t)got;
    line[len] = '\0';
  }
  if (flags & TL_UNIX) {
    char want[96];
    snprintf(want, sizeof want, "listening on unix:%s ", c->unix_path);
    assert_non_null(strstr(line, want));
  } else {
    const char *url = strstr(line, "://127.0.0.1:"); /* http or https */
    assert_non_null(url);
    c->port = atoi(url + strlen("://127.0.0.1:"));
    assert_true(c->port > 0 && c->port < 65536);
  }
  assert_non_null(strstr(line, "curl"));
  snprintf(c->line, sizeof c->line, "%s", line);
}

/* A child that did not stop after sig: what the kernel says of it (its
 * signal masks and pending sets, each thread's state and wait channel, its
 * descriptors) on stderr, so a rare hang on a loaded machine can be read
 * from the test's log. */
static void describe_stuck(pid_t pid, int sig) {
  char cmd[512];
  fprintf(stderr, "lithd %ld did not stop within the timeout after signal %d; its state:\n", (long)pid, sig);
  fflush(stderr);
  snprintf(cmd, sizeof cmd,
           "grep -E '^(State|Sig|Shd)' /proc/%ld/status; for t in /proc/%ld/task/*; do "
           "echo \"$t $(cat $t/comm) $(cut -d' ' -f3 $t/stat) $(cat $t/wchan)\"; done; ls -l /proc/%ld/fd",
           (long)pid, (long)pid, (long)pid);
  if (system(cmd) == -1)
    fprintf(stderr, "(cannot run the description)\n");
}

int tl_stop(struct tl_child *c, int sig, int timeout_ms) {
  int code = -1;
  if (c->pid > 0) {
    int64_t deadline = now_ms() + timeout_ms;
    int st = 0;
    pid_t got;
    if (sig != 0)
      kill(c->pid, sig);
    while ((got = waitpid(c->pid, &st, WNOHANG)) == 0 && now_ms() < deadline)
      sleep_ms(5);
    if (got == 0) { /* still running: it did not stop in time */
      if (sig != SIGKILL)
        describe_stuck(c->pid, sig);
      kill(c->pid, SIGKILL);
      waitpid(c->pid, &st, 0);
    } else if (got == c->pid) {
      if (WIFEXITED(st))
        code = WEXITSTATUS(st);
      else if (WIFSIGNALED(st))
        code = 128 + WTERMSIG(st);
    }
    remember(0, c->pid);
    c->pid = -1;
  }
  if (c->out_fd >= 0)
    close(c->out_fd);
  c->out_fd = -1;
  return code;
}

/* ---- One request per connection ------------------------------------------ */

int tl_connect(const struct tl_child *c) {
  int fd;
  if (c->port > 0) {
    struct sockaddr_in a;
    int one = 1;
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
      return -1;
    /* Head and body go out as they are written: no Nagle wait for an ACK
     * the server delays (40 ms a request). */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)c->port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
      return fd;
  } else {
    struct sockaddr_un a;
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
      return -1;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    snprintf(a.sun_path, sizeof a.sun_path, "%s", c->unix_path);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
      return fd;
  }
  close(fd);
  return -1;
}

/* The request's head; Connection: close unless keep_alive. */
static int format_head(char *hdr, size_t cap, const char *method, const char *path, const char *auth,
                       size_t blen, int keep_alive) {
  return snprintf(hdr, cap,
                  "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s%s%s%s"
                  "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                  method, path, keep_alive ? "" : "Connection: close\r\n",
                  auth != NULL ? "Authorization: " : "", auth != NULL ? auth : "", auth != NULL ? "\r\n" : "",
                  blen);
}

/* Send all of buf; 0 or -1. */
static int send_all(int fd, const char *buf, size_t len) {
  while (len > 0) {
    ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    buf += n;
    len -= (size_t)n;
  }
  return 0;
}

int tl_send(const struct tl_child *c, const char *method, const char *path, const char *auth,
            const char *body) {
  int fd = tl_connect(c);
  char hdr[16384]; /* room for a JWT past lithd's 8 KiB bound (test_lithd_attacks) */
  size_t blen = body != NULL ? strlen(body) : 0;
  int n;

  assert_true(fd >= 0);
  n = format_head(hdr, sizeof hdr, method, path, auth, blen, 0);
  assert_true(n > 0 && (size_t)n < sizeof hdr);
  assert_int_equal(send_all(fd, hdr, (size_t)n), 0);
  if (blen > 0)
    assert_int_equal(send_all(fd, body, blen), 0);
  return fd;
}

/* hr's status, head and body into r (which takes them); hr's header table freed. */
static void take_answer(h1c_response *hr, struct tl_resp *r) {
  r->status = hr->status;
  r->head = hr->head;
  r->body = hr->body;
  free(hr->headers);
  memset(hr, 0, sizeof *hr);
}

void tl_read(int fd, struct tl_resp *r) { tl_read_within(fd, r, TL_TIMEOUT_MS); }

void tl_read_within(int fd, struct tl_resp *r, int timeout_ms) {
  h1c_conn k;
  h1c_response hr;
  char err[256] = "";
  int rc;

  h1c_init(&k, fd, "lithd", err, sizeof err);
  h1c_deadline(&k, timeout_ms);
  k.sent = 1;
  rc = h1c_read(&k, NULL, &hr);
  if (rc == H1C_OK)
    rc = h1c_read_eof(&k); /* Connection: close: one answer, then the end */
  h1c_release(&k);
  close(fd);
  if (rc != H1C_OK)
    print_error("%s\n", err);
  assert_int_equal(rc, H1C_OK);
  assert_int_equal(strncmp(hr.head, "HTTP/1.1 ", 9), 0);
  take_answer(&hr, r);
}

void tl_http(const struct tl_child *c, const char *method, const char *path, const char *auth,
             const char *body, struct tl_resp *r) {
  tl_read(tl_send(c, method, path, auth, body), r);
}

void tl_expect(const struct tl_child *c, const char *method, const char *path, const char *auth,
               const char *body, int status, const char *want) {
  struct tl_resp r = {0, NULL, NULL};
  tl_http(c, method, path, auth, body, &r);
  if (r.status != status || (want != NULL && strstr(r.body, want) == NULL))
    print_error("%s %s -> %d %s\n", method, path, r.status, r.body);
  assert_int_equal(r.status, status);
  if (want != NULL)
    assert_non_null(strstr(r.body, want));
  tl_resp_free(&r);
}

void tl_resp_free(struct tl_resp *r) {
  free(r->head);
  free(r->body);
  r->head = r->body = NULL;
}

void tl_read_all(int fd, char *buf, size_t cap) {
  size_t len = 0;
  int64_t deadline = now_ms() + TL_TIMEOUT_MS;
  for (;;) {
    ssize_t got;
    assert_true(len < cap - 1);
    assert_int_equal(wait_fd(fd, POLLIN, deadline), 1);
    got = read(fd, buf + len, cap - 1 - len);
    assert_true(got >= 0);
    if (got == 0)
      break;
    len += (size_t)got;
  }
  buf[len] = '\0';
}

/* ---- Small parsers and SQLite --------------------------------------------- */

uint64_t tl_json_u64(const char *body, const char *name) {
  char key[64];
  const char *hit;
  snprintf(key, sizeof key, "\"%s\":", name);
  hit = strstr(body, key);
  if (hit == NULL)
    print_error("no field %s in %s\n", key, body);
  assert_non_null(hit);
  return strtoull(hit + strlen(key), NULL, 10);
}

uint64_t tl_metric(const char *body, const char *name) {
  const char *p = body;
  size_t n = strlen(name);
  for (;;) {
    const char *hit = strstr(p, name);
    if (hit == NULL)
      break;
    if ((hit == body || hit[-1] == '\n') && hit[n] == ' ')
      return strtoull(hit + n + 1, NULL, 10);
    p = hit + 1;
  }
  print_error("no sample %s in:\n%s\n", name, body);
  fail();
  return 0;
}

int64_t tl_sql_int(const char *db, const char *sql) {
  sqlite3 *h = NULL;
  sqlite3_stmt *st = NULL;
  int64_t v;
  assert_int_equal(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  sqlite3_busy_timeout(h, TL_TIMEOUT_MS);
  if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK)
    print_error("%s: %s\n", sql, sqlite3_errmsg(h));
  assert_non_null(st);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(h);
  return v;
}

long tl_rss_kib(pid_t pid) {
  char path[64];
  long size = 0, res = 0;
  snprintf(path, sizeof path, "/proc/%d/statm", (int)pid);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  assert_int_equal(fscanf(f, "%ld %ld", &size, &res), 2);
  fclose(f);
  return res * (sysconf(_SC_PAGESIZE) / 1024);
}

void tl_assert_integrity(const char *db) {
  sqlite3 *h = NULL;
  sqlite3_stmt *st = NULL;
  const char *txt;
  assert_int_equal(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  sqlite3_busy_timeout(h, TL_TIMEOUT_MS);
  assert_int_equal(sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &st, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  txt = (const char *)sqlite3_column_text(st, 0);
  if (txt == NULL || strcmp(txt, "ok") != 0)
    print_error("integrity_check: %s\n", txt);
  assert_string_equal(txt, "ok");
  sqlite3_finalize(st);
  sqlite3_close(h);
}

int tl_scaled(int n) {
  const char *s = getenv("LITH_TEST_SCALE");
  int d = s != NULL ? atoi(s) : 1;
  int r;
  if (d < 1)
    d = 1;
  r = n / d;
  return r < 1 ? 1 : r;
}

/* ---- Keep-alive client ---------------------------------------------------- */

void tl_conn_init(struct tl_conn *k, const struct tl_child *c) {
  memset(k, 0, sizeof *k);
  k->c = c;
  k->fd = -1;
}

/* Close the socket (the next request reconnects) and drop what was read. */
static void conn_drop(struct tl_conn *k) {
  if (k->fd >= 0)
    close(k->fd);
  k->fd = -1;
  if (k->rd != NULL)
    h1c_release(k->rd);
}

void tl_conn_close(struct tl_conn *k) {
  conn_drop(k);
  free(k->rd);
  k->rd = NULL;
}

int tl_conn_request(struct tl_conn *k, const char *method, const char *path, const char *auth,
                    const char *body, struct tl_resp *r, int timeout_ms) {
  size_t blen = body != NULL ? strlen(body) : 0;
  h1c_response hr;
  char *msg = NULL;
  const char *conn;
  size_t conn_len = 0;
  int n, rc;

  r->status = 0;
  r->head = r->body = NULL;
  if (k->rd == NULL && (k->rd = calloc(1, sizeof *k->rd)) == NULL)
    return TL_BAD;
  if (k->fd < 0) {
    if ((k->fd = tl_connect(k->c)) < 0)
      return TL_NOCONN;
    h1c_init(k->rd, k->fd, "lithd", NULL, 0);
  }
  h1c_deadline(k->rd, timeout_ms);
  /* Head and body in one write: one segment for a small request. */
  msg = malloc(1024 + blen);
  if (msg == NULL) {
    rc = TL_BAD;
    goto fail;
  }
  n = format_head(msg, 1024, method, path, auth, blen, 1);
  if (n <= 0 || n >= 1024) {
    rc = TL_BAD;
    goto fail;
  }
  if (blen > 0)
    memcpy(msg + n, body, blen);
  rc = send_all(k->fd, msg, (size_t)n + blen);
  free(msg);
  msg = NULL;
  if (rc != 0) {
    rc = TL_CLOSED;
    goto fail;
  }
  k->rd->sent = 1;
  switch (h1c_read(k->rd, method, &hr)) {
  case H1C_OK: break;
  case H1C_IO: rc = TL_CLOSED; goto fail;
  case H1C_TIMEOUT: rc = TL_TIMEOUT; goto fail;
  default: rc = TL_BAD; goto fail;
  }
  if (strncmp(hr.head, "HTTP/1.1 ", 9) != 0) {
    h1c_response_free(&hr);
    rc = TL_BAD;
    goto fail;
  }
  conn = h1c_response_header(&hr, "connection", &conn_len);
  if (k->rd->eof || (conn != NULL && conn_len >= 5 && strncasecmp(conn, "close", 5) == 0))
    conn_drop(k); /* the server closes it: the next request reconnects */
  take_answer(&hr, r);
  return TL_OK;
fail:
  free(msg);
  conn_drop(k);
  return rc;
}

int tl_run(const char *const *args, char *out, size_t cap) {
  int pfd[2];
  posix_spawn_file_actions_t fa;
  char *argv[32];
  int n = 0, st;
  pid_t pid;

  argv[n++] = (char *)LITHD_PATH;
  for (; *args != NULL && n < 31; args++)
    argv[n++] = (char *)*args;
  argv[n] = NULL;
  assert_int_equal(pipe(pfd), 0);
  assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
  assert_int_equal(posix_spawn_file_actions_adddup2(&fa, pfd[1], 1), 0);
  assert_int_equal(posix_spawn_file_actions_adddup2(&fa, pfd[1], 2), 0);
  assert_int_equal(posix_spawn_file_actions_addclose(&fa, pfd[0]), 0);
  assert_int_equal(posix_spawn_file_actions_addclose(&fa, pfd[1]), 0);
  assert_int_equal(posix_spawn(&pid, LITHD_PATH, &fa, NULL, argv, environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  close(pfd[1]);
  tl_read_all(pfd[0], out, cap);
  close(pfd[0]);
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  return WEXITSTATUS(st);
}
