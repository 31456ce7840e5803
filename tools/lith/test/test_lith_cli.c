/*
 * test_lith_cli — the `lith` command line end to end.
 *
 * The built client (LITH_CLI_PATH) runs as a child process with arguments
 * and an explicit environment (so the caller's LITHD_* variables never
 * leak in); its stdout, stderr and exit status are what is checked. Most
 * tests speak to a real lithd (LITHD_PATH) spawned on a scratch database
 * with --listen 127.0.0.1:0 (and --unix where it matters); its port comes
 * from the first line it prints. Outcomes are checked through the CLI
 * itself and, for backups, by opening the file with SQLite.
 *
 * A few tests need a server that misbehaves on purpose (chunked answers,
 * garbage, a connection cut short, never answering): a forked child serves
 * canned answers on a socket of its own and records the request it got, so
 * the request the CLI sends (path, token, JSON body) is checked too. The
 * URL parser of client.c is tested directly (the test links client.c).
 *
 * Design: each test owns a struct fixture; the teardown kills whatever
 * child still runs (SIGKILL), so a failed assertion never leaks a daemon.
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
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <sqlite3.h>

#include "client.h"
#include "lith.h"
#include "tlsgen.h"

#ifndef LITHD_PATH
#error "LITHD_PATH must name the lithd binary"
#endif
#ifndef LITH_CLI_PATH
#error "LITH_CLI_PATH must name the lith binary"
#endif

extern char **environ;

#define TOKEN "t0ken-for-the-cli"

/* What one run of the CLI gave. */
struct run {
  int status; /* exit status; 128 + signal if killed */
  char *out;
  char *err;
};

struct fixture {
  pid_t lithd;
  int lithd_out; /* its stdout, kept open */
  char db[64];
  char url[64];
  pid_t fake; /* a canned-answer server, or 0 */
  struct run r;
};

/* ---- Children ------------------------------------------------------------ */

static void remove_db(const char *db) {
  char p[96];
  unlink(db);
  snprintf(p, sizeof p, "%s-wal", db);
  unlink(p);
  snprintf(p, sizeof p, "%s-shm", db);
  unlink(p);
  snprintf(p, sizeof p, "%s-lithd.lock", db);
  unlink(p);
}

/* Spawn lithd --db NAME.db --listen 127.0.0.1:0 [extra..., NULL] (name
 * NULL: no --db, extra names the databases) and learn its URL from the
 * first line it prints. */
static void start_lithd(struct fixture *f, const char *name, ...) {
  int pfd[2];
  posix_spawn_file_actions_t fa;
  char *argv[16];
  int n = 0;
  char line[1024];
  size_t len = 0;
  const char *url;
  va_list ap;
  const char *a;

  argv[n++] = (char *)LITHD_PATH;
  if (name != NULL) {
    snprintf(f->db, sizeof f->db, "%s.db", name);
    remove_db(f->db);
    argv[n++] = (char *)"--db";
    argv[n++] = f->db;
  }
  argv[n++] = (char *)"--listen";
  argv[n++] = (char *)"127.0.0.1:0";
  va_start(ap, name);
  while ((a = va_arg(ap, const char *)) != NULL && n < 15)
    argv[n++] = (char *)a;
  va_end(ap);
  argv[n] = NULL;

  assert_int_equal(pipe(pfd), 0);
  assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
  assert_int_equal(posix_spawn_file_actions_adddup2(&fa, pfd[1], 1), 0);
  assert_int_equal(posix_spawn_file_actions_addclose(&fa, pfd[0]), 0);
  assert_int_equal(posix_spawn_file_actions_addclose(&fa, pfd[1]), 0);
  assert_int_equal(posix_spawn(&f->lithd, LITHD_PATH, &fa, NULL, argv, environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  close(pfd[1]);
  f->lithd_out = pfd[0];

  while (memchr(line, '\n', len) == NULL) { /* 10 s at most */
    struct pollfd p = {f->lithd_out, POLLIN, 0};
    ssize_t got;
    assert_true(len < sizeof line - 1);
    assert_int_equal(poll(&p, 1, 10000), 1);
    got = read(f->lithd_out, line + len, sizeof line - 1 - len);
    assert_true(got > 0);
    len += (size_t)got;
    line[len] = '\0';
  }
  /* "listening on http://127.0.0.1:PORT " (https with --tls-cert; another
   * address with a second --listen) */
  url = strstr(line, "listening on ");
  assert_non_null(url);
  url += strlen("listening on ");
  assert_true(strncmp(url, "http", 4) == 0);
  snprintf(f->url, sizeof f->url, "%.*s", (int)strcspn(url, " "), url);
}

static void kill_child(pid_t *pid) {
  if (*pid > 0) {
    int st;
    kill(*pid, SIGKILL);
    waitpid(*pid, &st, 0);
  }
  *pid = 0;
}

static void run_free(struct run *r) {
  free(r->out);
  free(r->err);
  r->out = r->err = NULL;
}

static int setup(void **state) {
  struct fixture *f = calloc(1, sizeof *f);
  if (f == NULL)
    return -1;
  f->lithd_out = -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fixture *f = *state;
  kill_child(&f->lithd);
  kill_child(&f->fake);
  if (f->lithd_out >= 0)
    close(f->lithd_out);
  run_free(&f->r);
  free(f);
  return 0;
}

/* Append what fd has to *buf (grown as needed); returns 0 at EOF. */
static int drain(int fd, char **buf, size_t *len, size_t *cap) {
  ssize_t got;
  if (*cap - *len < 4096) {
    *cap = *cap * 2 + 4096;
    *buf = realloc(*buf, *cap);
    assert_non_null(*buf);
  }
  got = read(fd, *buf + *len, *cap - *len - 1);
  assert_true(got >= 0);
  *len += (size_t)got;
  (*buf)[*len] = '\0';
  return got > 0;
}

/* Run the CLI with `args` (NULL-terminated, without argv[0]) and the
 * environment `envp`, stdin from `in` (NULL: /dev/null). Returns the exit
 * status; r holds everything (its previous contents freed). */
static int run_cli(struct run *r, char *const envp[], const char *in, const char *const *args) {
  posix_spawn_file_actions_t fa;
  int ofd[2], efd[2];
  char *argv[32];
  size_t olen = 0, ocap = 0, elen = 0, ecap = 0;
  int n = 0, open_fds = 2, st;
  pid_t pid;
  struct timespec t0, t1;

  run_free(r);
  argv[n++] = (char *)LITH_CLI_PATH;
  while (*args != NULL && n < 31)
    argv[n++] = (char *)*args++;
  argv[n] = NULL;
  assert_int_equal(pipe(ofd), 0);
  assert_int_equal(pipe(efd), 0);
  assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
  assert_int_equal(posix_spawn_file_actions_addopen(&fa, 0, in != NULL ? in : "/dev/null", O_RDONLY, 0), 0);
  assert_int_equal(posix_spawn_file_actions_adddup2(&fa, ofd[1], 1), 0);
  assert_int_equal(posix_spawn_file_actions_adddup2(&fa, efd[1], 2), 0);
  assert_int_equal(posix_spawn_file_actions_addclose(&fa, ofd[0]), 0);
  assert_int_equal(posix_spawn_file_actions_addclose(&fa, efd[0]), 0);
  assert_int_equal(posix_spawn_file_actions_addclose(&fa, ofd[1]), 0);
  assert_int_equal(posix_spawn_file_actions_addclose(&fa, efd[1]), 0);
  assert_int_equal(posix_spawn(&pid, LITH_CLI_PATH, &fa, NULL, argv, envp), 0);
  posix_spawn_file_actions_destroy(&fa);
  close(ofd[1]);
  close(efd[1]);

  clock_gettime(CLOCK_MONOTONIC, &t0);
  r->out = malloc(1);
  r->err = malloc(1);
  assert_non_null(r->out);
  assert_non_null(r->err);
  r->out[0] = r->err[0] = '\0';
  ocap = ecap = 1;
  while (open_fds > 0) {
    struct pollfd p[2] = {{ofd[0], POLLIN, 0}, {efd[0], POLLIN, 0}};
    int k;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (t1.tv_sec - t0.tv_sec > 30) {
      kill(pid, SIGKILL);
      fail_msg("lith did not finish within 30 s");
    }
    k = poll(p, 2, 1000);
    assert_true(k >= 0);
    if (p[0].fd >= 0 && p[0].revents != 0 && !drain(ofd[0], &r->out, &olen, &ocap)) {
      close(ofd[0]);
      ofd[0] = -1;
      open_fds--;
    }
    if (p[1].fd >= 0 && p[1].revents != 0 && !drain(efd[0], &r->err, &elen, &ecap)) {
      close(efd[0]);
      efd[0] = -1;
      open_fds--;
    }
  }
  assert_int_equal(waitpid(pid, &st, 0), pid);
  r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r->status;
}

/* No environment at all. */
static char *const no_env[] = {NULL};

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
/* lith --url <f->url> ARGS... with no environment */
#define LITH(f, ...) run_cli(&(f)->r, no_env, NULL, ARGS("--url", (f)->url, __VA_ARGS__))

/* The last run ended with `status`, printed exactly `out` (unless NULL) and
 * something containing `err` on stderr (unless NULL; "" = nothing). */
static void check(const struct run *r, int status, const char *out, const char *err) {
  int ok = r->status == status && (out == NULL || strcmp(r->out, out) == 0) &&
           (err == NULL || (err[0] == '\0' ? r->err[0] == '\0' : strstr(r->err, err) != NULL));
  if (!ok) {
    print_error("exit %d (want %d)\n--- stdout:\n%s--- want:\n%s\n--- stderr:\n%s--- want:\n%s\n", r->status,
                status, r->out, out != NULL ? out : "(any)", r->err, err != NULL ? err : "(any)");
    fail();
  }
}

/* The last run printed `want` somewhere on stdout. */
static void check_out_has(const struct run *r, const char *want) {
  if (strstr(r->out, want) == NULL) {
    print_error("stdout lacks \"%s\":\n%s\nstderr:\n%s\n", want, r->out, r->err);
    fail();
  }
}

/* ---- A server with canned answers ---------------------------------------- */

/* Listen on 127.0.0.1:0 (backlog only: nobody accepts); returns the fd and
 * the port in *port. */
static int listen_any(int *port) {
  struct sockaddr_in a;
  socklen_t alen = sizeof a;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(fd, 8), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
  *port = ntohs(a.sin_port);
  return fd;
}

/* In the forked child: read one request (head, then Content-Length bytes)
 * into request.txt, answer `answer` (with a pause of `pause_ms` in the
 * middle of it), close. */
static void fake_serve_one(int lfd, const char *answer, int pause_ms) {
  char req[65536];
  size_t len = 0;
  int fd = accept(lfd, NULL, NULL);
  char *end = NULL;
  FILE *out;

  if (fd < 0)
    _exit(1);
  while (len < sizeof req - 1) {
    ssize_t got = read(fd, req + len, sizeof req - 1 - len);
    if (got <= 0)
      break;
    len += (size_t)got;
    req[len] = '\0';
    end = strstr(req, "\r\n\r\n");
    if (end != NULL) {
      const char *cl = strcasestr(req, "\r\nContent-Length: ");
      size_t want = cl != NULL ? strtoul(cl + 18, NULL, 10) : 0;
      if (len >= (size_t)(end + 4 - req) + want)
        break;
    }
  }
  out = fopen("request.txt", "w");
  if (out != NULL) {
    fwrite(req, 1, len, out);
    fclose(out);
  }
  if (pause_ms > 0) {
    size_t half = strlen(answer) / 2;
    struct timespec ts = {pause_ms / 1000, (long)(pause_ms % 1000) * 1000000L};
    if (write(fd, answer, half) < 0)
      _exit(1);
    nanosleep(&ts, NULL);
    if (write(fd, answer + half, strlen(answer) - half) < 0)
      _exit(1);
  } else if (write(fd, answer, strlen(answer)) < 0) {
    _exit(1);
  }
  close(fd);
}

/* Fork a server that answers one request with `answer`; sets f->url. */
static void start_fake(struct fixture *f, const char *answer, int pause_ms) {
  int port;
  int lfd = listen_any(&port);
  unlink("request.txt");
  fflush(NULL);
  f->fake = fork();
  assert_true(f->fake >= 0);
  if (f->fake == 0) {
    fake_serve_one(lfd, answer, pause_ms);
    _exit(0);
  }
  close(lfd);
  snprintf(f->url, sizeof f->url, "http://127.0.0.1:%d", port);
}

/* Wait for the fake server to end; returns what it recorded (static). */
static const char *fake_request(struct fixture *f) {
  static char buf[65536];
  int st;
  FILE *in;
  size_t n;

  assert_int_equal(waitpid(f->fake, &st, 0), f->fake);
  f->fake = 0;
  in = fopen("request.txt", "r");
  assert_non_null(in);
  n = fread(buf, 1, sizeof buf - 1, in);
  fclose(in);
  buf[n] = '\0';
  return buf;
}

/* An answer with its Content-Length (in a static buffer, for start_fake). */
static const char *answer(const char *head, const char *body) {
  static char buf[8192];
  snprintf(buf, sizeof buf, "%sContent-Length: %zu\r\n\r\n%s", head, strlen(body), body);
  return buf;
}

static void write_file(const char *name, const char *text) {
  FILE *out = fopen(name, "w");
  assert_non_null(out);
  fputs(text, out);
  fclose(out);
}

/* ---- Tests: against lithd ----------------------------------------------- */

static void test_do_query_round_trip(void **state) {
  struct fixture *f = *state;
  start_lithd(f, "roundtrip", NULL);

  LITH(f, "do", "CREATE TABLE t(id INTEGER PRIMARY KEY, v)");
  check(&f->r, 0, "changes 0, last_insert_rowid 0\n", "");
  /* 2^53 + 1: a double would make it ...992 */
  LITH(f, "do", "INSERT INTO t VALUES (?, ?)", "1", "9007199254740993");
  check(&f->r, 0, "changes 1, last_insert_rowid 1\n", "");
  LITH(f, "do", "INSERT INTO t VALUES (?, ?)", "2", "hello");
  check(&f->r, 0, "changes 1, last_insert_rowid 2\n", "");
  LITH(f, "do", "INSERT INTO t VALUES (?, ?)", "3", "\"42\"");
  check(&f->r, 0, NULL, "");
  LITH(f, "do", "INSERT INTO t VALUES (?, ?)", "4", "42");
  check(&f->r, 0, NULL, "");
  LITH(f, "do", "INSERT INTO t VALUES (?, ?)", "5", "null");
  check(&f->r, 0, NULL, "");
  LITH(f, "do", "INSERT INTO t VALUES (?, ?)", "6", "1.5");
  check(&f->r, 0, NULL, "");
  LITH(f, "do", "INSERT INTO t VALUES (?, ?)", "7", "{\"base64\":\"AP8=\"}");
  check(&f->r, 0, NULL, "");
  LITH(f, "do", "INSERT INTO t VALUES (?, ?)", "8", "-9223372036854775808");
  check(&f->r, 0, NULL, "");
  LITH(f, "do", "INSERT INTO t VALUES (?, ?)", "9", "007"); /* not JSON: text */
  check(&f->r, 0, NULL, "");
  LITH(f, "do", "INSERT INTO t VALUES (?, ?)", "10", "{\"a\": 1}"); /* JSON text: text */
  check(&f->r, 0, NULL, "");
  LITH(f, "do", "INSERT INTO t VALUES (?, ?)", "11", "true");
  check(&f->r, 0, NULL, "");
  LITH(f, "do", "INSERT INTO t VALUES (?, ?)", "12", "2.0");
  check(&f->r, 0, NULL, "");

  LITH(f, "query", "SELECT id, v, typeof(v) FROM t ORDER BY id");
  check(&f->r, 0,
        "id\tv\ttypeof(v)\n"
        "1\t9007199254740993\tinteger\n"
        "2\thello\ttext\n"
        "3\t42\ttext\n"
        "4\t42\tinteger\n"
        "5\tNULL\tnull\n"
        "6\t1.5\treal\n"
        "7\tbase64:AP8=\tblob\n"
        "8\t-9223372036854775808\tinteger\n"
        "9\t007\ttext\n"
        "10\t{\"a\": 1}\ttext\n"
        "11\t1\tinteger\n"
        "12\t2.0\treal\n",
        "");

  /* Exact on the way in as well: ...993 finds the row, ...992 does not. */
  LITH(f, "query", "SELECT id FROM t WHERE v = ?", "9007199254740993");
  check(&f->r, 0, "id\n1\n", "");
  LITH(f, "query", "SELECT id FROM t WHERE v = ?", "9007199254740992");
  check(&f->r, 0, "id\n", "");
  /* Text vs number: '"42"' matches only the text, 42 only the integer
   * (a TEXT column value compared with no affinity). */
  LITH(f, "query", "SELECT id FROM t WHERE v = ? ORDER BY id", "\"42\"");
  check(&f->r, 0, "id\n3\n", "");
  LITH(f, "query", "SELECT id FROM t WHERE v = ? ORDER BY id", "42");
  check(&f->r, 0, "id\n4\n", "");

  /* An argument starting with '-' after the command is a value. */
  LITH(f, "do", "INSERT INTO t VALUES (?, ?) RETURNING id, v", "13", "-5");
  check(&f->r, 0, "id\tv\n13\t-5\n", "");
  /* A statement without parameters and a query without rows. */
  LITH(f, "query", "SELECT count(*) AS n FROM t");
  check(&f->r, 0, "n\n13\n", "");
  LITH(f, "query", "SELECT id FROM t WHERE id > 100");
  check(&f->r, 0, "id\n", "");
}

static void test_errors_exit_1_nothing_changed(void **state) {
  struct fixture *f = *state;
  start_lithd(f, "errors", NULL);

  LITH(f, "do", "CREATE TABLE t(id INTEGER PRIMARY KEY, v)");
  check(&f->r, 0, NULL, "");
  LITH(f, "do", "INSERT INTO t VALUES (1, 'one')");
  check(&f->r, 0, NULL, "");
  LITH(f, "do", "INSERT INTO t VALUES (?, ?)", "1", "again");
  check(&f->r, 1, "", "lith: constraint: UNIQUE constraint failed: t.id (statement 0)\n");

  /* Two statements, the second fails: the first is undone too. */
  write_file("two.json", "{\"statements\": [{\"sql\": \"INSERT INTO t VALUES (2, 'two')\"},"
                         " {\"sql\": \"INSERT INTO t VALUES (?, 'dup')\", \"params\": [1]}]}");
  LITH(f, "do", "-f", "two.json");
  check(&f->r, 1, "", "lith: constraint: UNIQUE constraint failed: t.id (statement 1)\n");

  LITH(f, "do", "SELEC nonsense");
  check(&f->r, 1, "", "lith: sql_error: ");
  LITH(f, "query", "DELETE FROM t");
  check(&f->r, 1, "", "lith: not_a_query: ");
  /* Wrong number of arguments: lithd refuses before running anything. */
  LITH(f, "do", "INSERT INTO t VALUES (?, ?)", "5");
  check(&f->r, 1, "", "lith: bad_request: ");
  /* A body that is not JSON. */
  write_file("bad.json", "{\"statements\": [");
  LITH(f, "do", "-f", "bad.json");
  check(&f->r, 1, "", "lith: bad_request: invalid JSON");

  LITH(f, "query", "SELECT id, v FROM t ORDER BY id");
  check(&f->r, 0, "id\tv\n1\tone\n", "");
}

/* do -f FILE|-: one command's {"statements": [...]} as is to /v1/do. */
static void test_do_file_and_stdin(void **state) {
  struct fixture *f = *state;
  start_lithd(f, "dofile", NULL);

  write_file("create.json", "{\"statements\": [{\"sql\": \"CREATE TABLE kv(k TEXT PRIMARY KEY, v)\"},\n"
                            " {\"sql\": \"INSERT INTO kv VALUES (:k, :v) RETURNING rowid\","
                            "  \"params\": {\":k\": \"a\", \":v\": 9223372036854775807}}]}\n");
  LITH(f, "do", "-f", "create.json");
  check(&f->r, 0, "changes 0, last_insert_rowid 0\n\nrowid\n1\n", "");
  write_file("more.json", "{\"statements\": [{\"sql\": \"INSERT INTO kv VALUES ('b', 2)\"}]}");
  run_cli(&f->r, no_env, "more.json", ARGS("--url", f->url, "do", "-f", "-"));
  check(&f->r, 0, "changes 1, last_insert_rowid 2\n", "");
  LITH(f, "query", "SELECT k, v FROM kv ORDER BY k");
  check(&f->r, 0, "k\tv\na\t9223372036854775807\nb\t2\n", "");

  LITH(f, "do", "-f", "missing.json");
  check(&f->r, 2, "", "missing.json");
  write_file("empty.json", " \n");
  LITH(f, "do", "-f", "empty.json");
  check(&f->r, 2, "", "empty");
  LITH(f, "batch", "empty.json");
  check(&f->r, 2, "", "batch: empty.json is empty");
}

/* batch FILE|-: {"commands": [...]} to /v1/batch, each command its own
 * outcome: the ones that succeeded print, a failed one says so on stderr
 * and makes the exit status 1; the others are kept. */
static void test_batch_posts_to_v1_batch(void **state) {
  struct fixture *f = *state;
  start_lithd(f, "batch", NULL);
  LITH(f, "do", "CREATE TABLE kv(k TEXT PRIMARY KEY, v)");
  check(&f->r, 0, NULL, "");
  LITH(f, "do", "INSERT INTO kv VALUES ('a', 1)");
  check(&f->r, 0, NULL, "");

  write_file("cmds.json",
             "{\"commands\": ["
             " {\"statements\": [{\"sql\": \"INSERT INTO kv VALUES ('c', 3)\"}]},"
             " {\"statements\": [{\"sql\": \"INSERT INTO kv VALUES ('d', 4)\"},"
             "                   {\"sql\": \"INSERT INTO kv VALUES ('a', 0)\"}]},"
             " {\"statements\": [{\"sql\": \"SELECT k FROM kv WHERE k = ?\", \"params\": [\"c\"]}]}]}");
  LITH(f, "batch", "cmds.json");
  check(&f->r, 1, "command 0\nchanges 1, last_insert_rowid 2\n\ncommand 2\nk\nc\n",
        "lith: command 1: constraint: UNIQUE constraint failed: kv.k (statement 1)\n");
  /* command 1 was undone alone: 'd' is not there, 'c' is */
  LITH(f, "query", "SELECT group_concat(k, ',') FROM (SELECT k FROM kv ORDER BY k)");
  check(&f->r, 0, "group_concat(k, ',')\na,c\n", "");

  write_file("ok.json", "{\"commands\": [{\"statements\": [{\"sql\": \"INSERT INTO kv VALUES ('e', 5)\"}]},"
                        " {\"statements\": [{\"sql\": \"INSERT INTO kv VALUES ('f', 6)\"}]}]}");
  run_cli(&f->r, no_env, "ok.json", ARGS("--url", f->url, "batch", "-"));
  check(&f->r, 0, "command 0\nchanges 1, last_insert_rowid 3\n\ncommand 1\nchanges 1, last_insert_rowid 4\n",
        "");
  /* --json: lithd's answer as is, exit 0 as the request was answered 200 */
  LITH(f, "--json", "batch", "ok.json");
  check(&f->r, 0, NULL, "");
  check_out_has(&f->r, "{\"results\":[{\"error\":{\"code\":\"constraint\"");

  /* one command's file: lith says to send it with do -f; nothing is sent */
  write_file("one.json", "{\"statements\": [{\"sql\": \"INSERT INTO kv VALUES ('g', 7)\"}]}");
  LITH(f, "batch", "one.json");
  check(&f->r, 2, "", "lith do -f one.json");
  LITH(f, "query", "SELECT count(*) FROM kv WHERE k = 'g'");
  check(&f->r, 0, "count(*)\n0\n", "");
  /* a body lithd refuses whole: nothing runs */
  write_file("bad.json", "{\"commands\": []}");
  LITH(f, "batch", "bad.json");
  check(&f->r, 1, "", "lith: bad_request: \"commands\" is empty");
}

static void test_json_output_parses(void **state) {
  struct fixture *f = *state;
  json_t *root, *v, *e;
  json_error_t jerr;

  start_lithd(f, "json", NULL);
  LITH(f, "--json", "do", "CREATE TABLE t(id INTEGER PRIMARY KEY, v)");
  check(&f->r, 0, NULL, "");
  LITH(f, "--json", "do", "INSERT INTO t VALUES (?, ?)", "1", "9007199254740993");
  check(&f->r, 0, NULL, "");
  root = json_loads(f->r.out, 0, &jerr);
  assert_non_null(root);
  v = json_object_get(json_array_get(json_object_get(root, "results"), 0), "changes");
  assert_int_equal(json_integer_value(v), 1);
  json_decref(root);

  LITH(f, "--json", "query", "SELECT v, 'x' AS s FROM t");
  check(&f->r, 0, NULL, "");
  root = json_loads(f->r.out, 0, &jerr);
  if (root == NULL)
    print_error("not JSON (%s): %s\n", jerr.text, f->r.out);
  assert_non_null(root);
  v = json_array_get(
      json_array_get(json_object_get(json_array_get(json_object_get(root, "results"), 0), "rows"), 0), 0);
  assert_true(json_is_integer(v));
  assert_true(json_integer_value(v) == 9007199254740993LL);
  json_decref(root);

  /* An error with --json: the error object on stdout, the line on stderr. */
  LITH(f, "--json", "do", "INSERT INTO t VALUES (1, 1)");
  check(&f->r, 1, NULL, "lith: constraint: ");
  root = json_loads(f->r.out, 0, &jerr);
  assert_non_null(root);
  e = json_object_get(root, "error");
  assert_string_equal(json_string_value(json_object_get(e, "code")), "constraint");
  assert_int_equal(json_integer_value(json_object_get(e, "statement")), 0);
  json_decref(root);

  LITH(f, "--json", "stats");
  check(&f->r, 0, NULL, "");
  root = json_loads(f->r.out, 0, &jerr);
  assert_non_null(root);
  assert_true(json_is_integer(json_object_get(root, "commands")));
  json_decref(root);
}

static void test_stats_and_health(void **state) {
  struct fixture *f = *state;
  start_lithd(f, "stats", NULL);

  LITH(f, "health");
  check(&f->r, 0, "ok\n", "");
  LITH(f, "do", "CREATE TABLE t(x)");
  check(&f->r, 0, NULL, "");
  LITH(f, "do", "INSERT INTO t VALUES (1)");
  check(&f->r, 0, NULL, "");
  LITH(f, "stats");
  check(&f->r, 0, NULL, "");
  assert_true(strncmp(f->r.out, "commands 2\n", 11) == 0);
  check_out_has(&f->r, "\nbatches ");
  check_out_has(&f->r, "\nfailed 0\n");
  check_out_has(&f->r, "\nqueue_depth 0\n");
  /* Options after stats are not options: a hint, exit 2. */
  LITH(f, "stats", "--json");
  check(&f->r, 2, "", "options go before the command");
}

static void test_unix_socket(void **state) {
  struct fixture *f = *state;
  char *const env_unix[] = {(char *)"LITHD_UNIX=lithd.sock", (char *)"LITHD_URL=http://127.0.0.1:1", NULL};
  char url_env[96];
  char *const env_url[] = {url_env, NULL};

  start_lithd(f, "unix", "--unix", "lithd.sock", NULL);
  run_cli(&f->r, no_env, NULL, ARGS("--unix", "lithd.sock", "do", "CREATE TABLE t(x)"));
  check(&f->r, 0, "changes 0, last_insert_rowid 0\n", "");
  run_cli(&f->r, no_env, NULL, ARGS("--unix", "lithd.sock", "do", "INSERT INTO t VALUES (?)", "7"));
  check(&f->r, 0, NULL, "");
  /* From the environment; the socket wins over LITHD_URL. */
  run_cli(&f->r, env_unix, NULL, ARGS("query", "SELECT x FROM t"));
  check(&f->r, 0, "x\n7\n", "");
  run_cli(&f->r, env_unix, NULL, ARGS("health"));
  check(&f->r, 0, "ok\n", "");
  /* --url on the command line wins over LITHD_UNIX. */
  run_cli(&f->r, env_unix, NULL, ARGS("--url", f->url, "query", "SELECT x FROM t"));
  check(&f->r, 0, "x\n7\n", "");
  /* LITHD_URL alone. */
  snprintf(url_env, sizeof url_env, "LITHD_URL=%s", f->url);
  run_cli(&f->r, env_url, NULL, ARGS("query", "SELECT count(*) FROM t"));
  check(&f->r, 0, "count(*)\n1\n", "");
}

static void test_token(void **state) {
  struct fixture *f = *state;
  char *const env_tok[] = {(char *)"LITHD_TOKEN=" TOKEN, NULL};
  char *const env_tok_file[] = {(char *)"LITHD_TOKEN_FILE=token.txt", NULL};
  char *const env_wrong[] = {(char *)"LITHD_TOKEN=wrong", NULL};
  char url_env[96];
  char *const env_url_tok[] = {url_env, (char *)"LITHD_TOKEN=" TOKEN, NULL};

  write_file("token.txt", TOKEN "\r\n");
  start_lithd(f, "token", "--token-file", "token.txt", NULL);
  snprintf(url_env, sizeof url_env, "LITHD_URL=%s", f->url);

  LITH(f, "do", "CREATE TABLE t(x)");
  check(&f->r, 1, "", "lith: unauthorized: a bearer token is required (give --token-file FILE");
  LITH(f, "--token-file", "token.txt", "do", "CREATE TABLE t(x)");
  check(&f->r, 0, "changes 0, last_insert_rowid 0\n", "");
  run_cli(&f->r, env_url_tok, NULL, ARGS("do", "INSERT INTO t VALUES (1)"));
  check(&f->r, 0, "changes 1, last_insert_rowid 1\n", "");
  run_cli(&f->r, env_tok_file, NULL, ARGS("--url", f->url, "query", "SELECT x FROM t"));
  check(&f->r, 0, "x\n1\n", "");
  run_cli(&f->r, env_tok, NULL, ARGS("--url", f->url, "stats"));
  check(&f->r, 0, NULL, "");
  run_cli(&f->r, env_wrong, NULL, ARGS("--url", f->url, "do", "INSERT INTO t VALUES (2)"));
  check(&f->r, 1, "", "(the token was refused)");
  /* --token-file wins over LITHD_TOKEN. */
  run_cli(&f->r, env_wrong, NULL,
          ARGS("--url", f->url, "--token-file", "token.txt", "query", "SELECT count(*) FROM t"));
  check(&f->r, 0, "count(*)\n1\n", "");
  /* /healthz needs no token. */
  LITH(f, "health");
  check(&f->r, 0, "ok\n", "");
  /* A token file that cannot be read: nothing sent. */
  LITH(f, "--token-file", "missing.txt", "health");
  check(&f->r, 2, "", "missing.txt");
  write_file("empty.txt", "\n");
  LITH(f, "--token-file", "empty.txt", "health");
  check(&f->r, 2, "", "empty");
}

static void test_cannot_connect_exit_3(void **state) {
  struct fixture *f = *state;
  int port;
  int fd = listen_any(&port); /* a port surely free once closed */
  char url[64];

  close(fd);
  snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
  run_cli(&f->r, no_env, NULL, ARGS("--url", url, "do", "SELECT 1"));
  check(&f->r, 3, "", "cannot connect to http://127.0.0.1:");
  check(&f->r, 3, "", "Connection refused");
  run_cli(&f->r, no_env, NULL, ARGS("--unix", "no-such.sock", "health"));
  check(&f->r, 3, "", "cannot connect to unix:no-such.sock");
}

static void test_usage_errors_exit_2_nothing_sent(void **state) {
  struct fixture *f = *state;
  static const char *const cases[][6] = {
      {"frobnicate", NULL},
      {"do", NULL},
      {"query", NULL},
      {"run", NULL},
      {"run", "cmd", "novalue", NULL},
      {"run", "cmd", "=1", NULL},
      {"run", "cmd", "a=1", "a=2", NULL},
      {"do", "INSERT INTO t VALUES (?)", "99999999999999999999", NULL},
      {"do", "INSERT INTO t VALUES (?)", "1e999", NULL},
      {"stats", "extra", NULL},
      {"batch", NULL},
      {"do", "-f", NULL},
      {"do", "-f", "a.json", "b.json", NULL},
      {"backup", NULL},
      {"backup", "", NULL},
      {"--bogus", "stats", NULL},
      {"--timeout", "soon", "stats", NULL},
      {"--timeout", "-1", "stats", NULL},
      {"--timeout", "1e7", "stats", NULL},
      {"--unix", "x.sock", "stats", NULL},
      {"--timeout", NULL},
  };
  size_t i;

  start_lithd(f, "usage", NULL);
  LITH(f, "do", "CREATE TABLE t(x)");
  check(&f->r, 0, NULL, "");
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *args[10] = {"--url", f->url};
    size_t k;
    for (k = 0; cases[i][k] != NULL; k++)
      args[2 + k] = cases[i][k];
    args[2 + k] = NULL;
    run_cli(&f->r, no_env, NULL, args);
    if (f->r.status != 2)
      print_error("case %zu (%s ...)\n", i, cases[i][0]);
    check(&f->r, 2, "", "lith: ");
  }
  run_cli(&f->r, no_env, NULL, ARGS("--url", "ftp://x", "stats"));
  check(&f->r, 2, "", "http://HOST:PORT");
  run_cli(&f->r, no_env, NULL, ARGS("--url", "https//x", "stats"));
  check(&f->r, 2, "", "https://HOST:PORT");
  run_cli(&f->r, no_env, NULL, ARGS("--url", "http://127.0.0.1:99999", "stats"));
  check(&f->r, 2, "", "port");
  run_cli(&f->r, no_env, NULL, ARGS("--json"));
  check(&f->r, 2, "", "no command");
  LITH(f, "do", "INSERT INTO t VALUES (?)", "1e999");
  check(&f->r, 2, "", "quote it");

  /* Nothing of the above reached lithd: only the CREATE ran. */
  LITH(f, "stats");
  check(&f->r, 0, NULL, "");
  assert_true(strncmp(f->r.out, "commands 1\n", 11) == 0);
}

static void test_help_and_version(void **state) {
  struct fixture *f = *state;
  run_cli(&f->r, no_env, NULL, ARGS("--help"));
  check(&f->r, 0, NULL, "");
  check_out_has(&f->r, "do SQL [ARG...]");
  check_out_has(&f->r, "Exit status:");
  check_out_has(&f->r, "  3  ");
  check_out_has(&f->r, "LITHD_TOKEN_FILE");
  run_cli(&f->r, no_env, NULL, ARGS("--version"));
  check(&f->r, 0, "lith " LITH_VERSION "\n", "");
  run_cli(&f->r, no_env, NULL, ARGS("-h"));
  check(&f->r, 0, NULL, "");
}

static void test_backup(void **state) {
  struct fixture *f = *state;
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  char *cwd = getcwd(NULL, 0);
  char want[4200];
  struct stat sb;

  assert_non_null(cwd);
  mkdir("bk", 0700);
  start_lithd(f, "live", "--backup-dir", "bk", NULL);
  LITH(f, "do", "CREATE TABLE t(id INTEGER PRIMARY KEY, v)");
  check(&f->r, 0, NULL, "");
  write_file("rows.json", "{\"statements\": ["
                          "{\"sql\": \"INSERT INTO t VALUES (1, 'a')\"},"
                          "{\"sql\": \"INSERT INTO t VALUES (2, 9007199254740993)\"}]}");
  LITH(f, "do", "-f", "rows.json");
  check(&f->r, 0, NULL, "");

  unlink("bk/copy.db");
  LITH(f, "backup", "copy.db"); /* a name in lithd's --backup-dir */
  snprintf(want, sizeof want, "backup bk/copy.db: ");
  check(&f->r, 0, NULL, "");
  if (strncmp(f->r.out, want, strlen(want)) != 0)
    print_error("%s", f->r.out);
  assert_true(strncmp(f->r.out, want, strlen(want)) == 0);
  assert_int_equal(stat("bk/copy.db", &sb), 0);
  assert_non_null(strstr(f->r.out, " bytes in "));
  assert_true(strtoll(f->r.out + strlen(want), NULL, 10) == (long long)sb.st_size);

  assert_int_equal(sqlite3_open_v2("bk/copy.db", &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_string_equal((const char *)sqlite3_column_text(st, 0), "ok");
  sqlite3_finalize(st);
  assert_int_equal(sqlite3_prepare_v2(db, "SELECT id, v FROM t ORDER BY id", -1, &st, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_string_equal((const char *)sqlite3_column_text(st, 1), "a");
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_true(sqlite3_column_int64(st, 1) == 9007199254740993LL);
  assert_int_equal(sqlite3_step(st), SQLITE_DONE);
  sqlite3_finalize(st);
  sqlite3_close(db);

  /* With --json: lithd's answer as is. */
  unlink("bk/copy2.db");
  LITH(f, "--json", "backup", "copy2.db");
  check(&f->r, 0, NULL, "");
  check_out_has(&f->r, "\"dest\":");
  check_out_has(&f->r, "/copy2.db\"");
  assert_int_equal(access("bk/copy2.db", F_OK), 0);

  /* The same name again: refused (409, never replaced), exit 1, data intact. */
  LITH(f, "backup", "copy.db");
  check(&f->r, 1, "", "lith: ");
  LITH(f, "query", "SELECT count(*) FROM t");
  check(&f->r, 0, "count(*)\n2\n", "");
  /* A path instead of a name: refused (400), exit 1. */
  LITH(f, "backup", "../live.db");
  check(&f->r, 1, "", "lith: ");
  free(cwd);
}

/* backup --out FILE: GET /v1/backup downloaded to FILE (FILE.tmp, then
 * renamed), never over a FILE unless --force; --sql; the token; a download
 * cut short leaves neither FILE nor FILE.tmp. */
static void test_backup_out(void **state) {
  struct fixture *f = *state;
  struct stat sb;
  sqlite3 *db = NULL;
  long long bytes;

  unlink("dl-copy.db");
  unlink("dl-copy.sql");
  remove_db("dl-loaded.db");
  write_file("dl-token.txt", TOKEN "\n");
  start_lithd(f, "dl", "--token-file", "dl-token.txt", NULL);
  LITH(f, "--token-file", "dl-token.txt", "do", "CREATE TABLE t(id INTEGER PRIMARY KEY, v)");
  check(&f->r, 0, NULL, "");
  LITH(f, "--token-file", "dl-token.txt", "do",
       "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000) "
       "INSERT INTO t(v) SELECT randomblob(1000) FROM n");
  check(&f->r, 0, NULL, "");

  LITH(f, "--token-file", "dl-token.txt", "backup", "--out", "dl-copy.db");
  check(&f->r, 0, NULL, "");
  assert_true(strncmp(f->r.out, "backup dl-copy.db: ", 19) == 0);
  assert_non_null(strstr(f->r.out, " bytes in "));
  assert_non_null(strstr(f->r.out, " MB/s)\n"));
  bytes = strtoll(f->r.out + 19, NULL, 10);
  assert_int_equal(stat("dl-copy.db", &sb), 0);
  assert_true(bytes == (long long)sb.st_size && bytes > 3000 * 1000);
  assert_int_equal(sb.st_mode & 0777, 0600);
  assert_int_equal(access("dl-copy.db.tmp", F_OK), -1);
  assert_int_equal(sqlite3_open_v2("dl-copy.db", &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  sqlite3_stmt *st;
  assert_int_equal(sqlite3_prepare_v2(db,
                                      "SELECT (SELECT count(*) FROM t), (SELECT integrity_check FROM "
                                      "pragma_integrity_check)",
                                      -1, &st, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_int_equal(sqlite3_column_int(st, 0), 3000);
  assert_string_equal((const char *)sqlite3_column_text(st, 1), "ok");
  sqlite3_finalize(st);
  sqlite3_close(db);

  /* FILE exists: refused before anything is sent; --force replaces it. */
  LITH(f, "--token-file", "dl-token.txt", "do", "DELETE FROM t WHERE id > 10");
  check(&f->r, 0, NULL, "");
  LITH(f, "--token-file", "dl-token.txt", "backup", "--out", "dl-copy.db");
  check(&f->r, 2, "", "lith: backup: dl-copy.db exists; --force replaces it");
  assert_int_equal(stat("dl-copy.db", &sb), 0);
  assert_true((long long)sb.st_size == bytes);
  LITH(f, "--token-file", "dl-token.txt", "backup", "--out", "dl-copy.db", "--force");
  check(&f->r, 0, NULL, "");
  assert_int_equal(sqlite3_open_v2("dl-copy.db", &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_prepare_v2(db, "SELECT count(*) FROM t", -1, &st, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_int_equal(sqlite3_column_int(st, 0), 10);
  sqlite3_finalize(st);
  sqlite3_close(db);

  /* --sql: a script that loads. */
  LITH(f, "--token-file", "dl-token.txt", "backup", "--out", "dl-copy.sql", "--sql");
  check(&f->r, 0, NULL, "");
  {
    FILE *in = fopen("dl-copy.sql", "r");
    static char sql[1 << 16];
    assert_non_null(in);
    size_t n = fread(sql, 1, sizeof sql - 1, in);
    fclose(in);
    sql[n] = '\0';
    assert_int_equal(sqlite3_open("dl-loaded.db", &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT count(*) FROM t", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 10);
    sqlite3_finalize(st);
    sqlite3_close(db);
  }

  /* Without the token: lithd's 401, exit 1, no file. */
  unlink("dl-none.db");
  LITH(f, "backup", "--out", "dl-none.db");
  check(&f->r, 1, "", "lith: unauthorized");
  assert_int_equal(access("dl-none.db", F_OK), -1);
  assert_int_equal(access("dl-none.db.tmp", F_OK), -1);
  /* Usage. */
  LITH(f, "backup", "--out");
  check(&f->r, 2, "", "backup: --out needs a FILE");
  LITH(f, "backup", "--out", "x.db", "--bogus");
  check(&f->r, 2, "", "backup: unexpected \"--bogus\"");

  /* Cut short: 100000 bytes promised, a few sent, then the end. */
  start_fake(f,
             "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.sqlite3\r\nContent-Length: 100000\r\n\r\n"
             "SQLite format 3",
             0);
  LITH(f, "backup", "--out", "dl-none.db");
  check(&f->r, 3, "", "closed the connection after 15 of 100000 bytes");
  fake_request(f);
  assert_int_equal(access("dl-none.db", F_OK), -1);
  assert_int_equal(access("dl-none.db.tmp", F_OK), -1);
}

static void test_run_named_commands(void **state) {
  struct fixture *f = *state;

  write_file("schema.sql", "CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT UNIQUE, qty INT);\n");
  write_file("commands.sql", "-- name: add_item\n"
                             "INSERT INTO items(name, qty) VALUES (:name, :qty) RETURNING id;\n"
                             "\n"
                             "-- name: set_qty\n"
                             "UPDATE items SET qty = :qty WHERE name = :name;\n");
  start_lithd(f, "named", "--schema", "schema.sql", "--commands", "commands.sql", NULL);

  LITH(f, "run", "add_item", "name=apple", "qty=9007199254740993");
  check(&f->r, 0, "id\n1\n", "");
  LITH(f, "run", "add_item", "name=\"42\"", "qty=1");
  check(&f->r, 0, "id\n2\n", "");
  LITH(f, "run", "set_qty", "qty=-3", "name=apple");
  check(&f->r, 0, "changes 1, last_insert_rowid 0\n", "");
  LITH(f, "query", "SELECT name, qty, typeof(name) FROM items ORDER BY id");
  check(&f->r, 0, "name\tqty\ttypeof(name)\napple\t-3\ttext\n42\t1\ttext\n", "");

  /* Errors: a constraint, an unknown name, a missing parameter. */
  LITH(f, "run", "add_item", "name=apple", "qty=1");
  check(&f->r, 1, "", "lith: constraint: UNIQUE constraint failed: items.name");
  LITH(f, "run", "no_such", "x=1");
  check(&f->r, 1, "", "lith: not_found: ");
  LITH(f, "run", "add_item", "name=pear");
  check(&f->r, 1, "", "lith: bad_request: ");
  LITH(f, "query", "SELECT count(*) FROM items");
  check(&f->r, 0, "count(*)\n2\n", "");
}

/* The text of the first column of the first row of sql in the file db
 * (opened read-only, beside lithd). Returns a static buffer. */
static const char *sql_text(const char *db, const char *sql) {
  static char buf[256];
  sqlite3 *h = NULL;
  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  snprintf(buf, sizeof buf, "%s", (const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(h);
  return buf;
}

/* lith --db NAME against a lithd serving two databases (--db a=a.db --db
 * b=b.db): each command's data lands in the named file and only there. */
static void test_db_two_databases(void **state) {
  struct fixture *f = *state;
  remove_db("a.db");
  remove_db("b.db");
  mkdir("bk2", 0700);
  unlink("bk2/snap-a.db");
  unlink("b-copy.db");
  write_file("kv.sql", "CREATE TABLE kv(k TEXT PRIMARY KEY, v);\n");
  write_file("kv-cmds.sql", "-- name: put\nINSERT INTO kv(k, v) VALUES (:k, :v);\n");
  write_file("kv-batch.json", "{\"commands\": [{\"statements\": [{\"sql\": "
                              "\"INSERT INTO kv VALUES ('batch', 'b-batch')\"}]}]}");
  start_lithd(f, NULL, "--db", "a=a.db", "--db", "b=b.db", "--schema", "kv.sql", "--commands", "kv-cmds.sql",
              "--backup-dir", "bk2", NULL);

  LITH(f, "--db", "a", "do", "INSERT INTO kv VALUES (?, ?)", "k", "in-a");
  check(&f->r, 0, "changes 1, last_insert_rowid 1\n", "");
  LITH(f, "--db", "b", "run", "put", "k=k", "v=in-b");
  check(&f->r, 0, "changes 1, last_insert_rowid 1\n", "");
  LITH(f, "--db", "b", "batch", "kv-batch.json");
  check(&f->r, 0, NULL, "");
  LITH(f, "--db", "a", "query", "SELECT k, v FROM kv ORDER BY k");
  check(&f->r, 0, "k\tv\nk\tin-a\n", "");
  LITH(f, "--db", "b", "query", "SELECT k, v FROM kv ORDER BY k");
  check(&f->r, 0, "k\tv\nbatch\tb-batch\nk\tin-b\n", "");
  /* in the files themselves */
  assert_string_equal(sql_text("a.db", "SELECT group_concat(v) FROM kv"), "in-a");
  assert_string_equal(sql_text("b.db", "SELECT group_concat(v, ',') FROM (SELECT v FROM kv ORDER BY k)"),
                      "b-batch,in-b");

  LITH(f, "--db", "b", "stats");
  check(&f->r, 0, NULL, "");
  assert_non_null(strstr(f->r.out, "commands "));
  LITH(f, "--db", "a", "backup", "snap-a.db");
  check(&f->r, 0, NULL, "");
  assert_string_equal(sql_text("bk2/snap-a.db", "SELECT group_concat(v) FROM kv"), "in-a");
  LITH(f, "--db", "b", "backup", "--out", "b-copy.db");
  check(&f->r, 0, NULL, "");
  assert_string_equal(sql_text("b-copy.db", "SELECT count(*) FROM kv"), "2");

  /* a database lithd does not serve; none named while there are two */
  LITH(f, "--db", "c", "do", "INSERT INTO kv VALUES ('x', 1)");
  check(&f->r, 1, "", "no database \"c\" here");
  LITH(f, "do", "INSERT INTO kv VALUES ('x', 1)");
  check(&f->r, 1, "", "none is the default");
  LITH(f, "health");
  check(&f->r, 0, "ok\n", "");
}

/* ---- Tests: against canned answers --------------------------------------- */

#define RESULTS_JSON                                                                \
  "{\"results\":[{\"changes\":0,\"last_insert_rowid\":0,\"columns\":[\"a\",\"b\"]," \
  "\"rows\":[[1,\"x\"],[9223372036854775807,null]]}]}"

static void test_chunked_answer(void **state) {
  struct fixture *f = *state;
  const char *req;
  char ans[2048];
  const char *b = RESULTS_JSON;
  size_t n = strlen(b);

  /* Three chunks (an extension on one, the last size in upper case), a
   * trailer, and a pause in the middle. */
  snprintf(ans, sizeof ans,
           "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
           "Transfer-Encoding: chunked\r\n\r\n"
           "%zx\r\n%.15s\r\n%zx;ext=1\r\n%.5s\r\n%zX\r\n%s\r\n0\r\nX-Trailer: yes\r\n\r\n",
           (size_t)15, b, (size_t)5, b + 15, n - 20, b + 20);
  start_fake(f, ans, 50);
  LITH(f, "query", "SELECT a, b FROM t");
  check(&f->r, 0, "a\tb\n1\tx\n9223372036854775807\tNULL\n", "");
  req = fake_request(f);
  assert_true(strncmp(req, "POST /v1/query HTTP/1.1\r\n", 25) == 0);
  assert_non_null(strstr(req, "\r\nContent-Type: application/json\r\n"));
  assert_non_null(strstr(req, "\r\n\r\n{\"statements\":[{\"sql\":\"SELECT a, b FROM t\",\"params\":[]}]}"));
  assert_null(strstr(req, "Authorization"));
}

static void test_request_of_run_and_token(void **state) {
  struct fixture *f = *state;
  char *const env_tok[] = {(char *)"LITHD_TOKEN=" TOKEN, NULL};
  const char *req;

  start_fake(
      f,
      answer("HTTP/1.1 200 OK\r\n", "{\"results\":[{\"changes\":1,\"last_insert_rowid\":5,\"columns\":[]}]}"),
      0);
  run_cli(&f->r, env_tok, NULL,
          ARGS("--url", f->url, "run", "my cmd", "a=1", "b=x", "c=\"2\"", "d=null", "e={\"base64\":\"AA==\"}",
               "f=-9223372036854775808"));
  check(&f->r, 0, "changes 1, last_insert_rowid 5\n", "");
  req = fake_request(f);
  assert_true(strncmp(req, "POST /v1/commands/my%20cmd HTTP/1.1\r\n", 37) == 0);
  assert_non_null(strstr(req, "\r\nAuthorization: Bearer " TOKEN "\r\n"));
  if (strstr(req, "\r\n\r\n{\"params\":{\"a\":1,\"b\":\"x\",\"c\":\"2\",\"d\":null,"
                  "\"e\":{\"base64\":\"AA==\"},\"f\":-9223372036854775808}}") == NULL)
    print_error("request:\n%s\n", req);
  assert_non_null(strstr(req, "\r\n\r\n{\"params\":{\"a\":1,\"b\":\"x\",\"c\":\"2\",\"d\":null,"
                              "\"e\":{\"base64\":\"AA==\"},\"f\":-9223372036854775808}}"));
}

/* --db NAME (or $LITHD_DB): every request goes to /v1/db/NAME/...; /healthz
 * is lithd's own and stays. */
static void test_db_routes_every_request(void **state) {
  struct fixture *f = *state;
  char *const env_db[] = {(char *)"LITHD_DB=from_env", NULL};
  const char *ok = answer("HTTP/1.1 200 OK\r\n", "{\"results\":[]}");
  const struct {
    const char *const *args;
    const char *line;
  } cases[] = {
      {ARGS("do", "SELECT 1"), "POST /v1/db/a_B-9/do HTTP/1.1\r\n"},
      {ARGS("query", "SELECT 1"), "POST /v1/db/a_B-9/query HTTP/1.1\r\n"},
      {ARGS("run", "my cmd"), "POST /v1/db/a_B-9/commands/my%20cmd HTTP/1.1\r\n"},
      {ARGS("batch", "b.json"), "POST /v1/db/a_B-9/batch HTTP/1.1\r\n"},
      {ARGS("stats"), "GET /v1/db/a_B-9/stats HTTP/1.1\r\n"},
      {ARGS("backup", "snap.db"), "POST /v1/db/a_B-9/backup HTTP/1.1\r\n"},
      {ARGS("backup", "--out", "copy.db"), "GET /v1/db/a_B-9/backup HTTP/1.1\r\n"},
      {ARGS("backup", "--out", "copy.sql", "--sql"), "GET /v1/db/a_B-9/backup?format=sql HTTP/1.1\r\n"},
      {ARGS("health"), "GET /healthz HTTP/1.1\r\n"},
  };
  write_file("b.json", "{\"commands\":[]}");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *args[16] = {"--url", NULL, "--db", "a_B-9"}, *req;
    size_t n = 4;
    start_fake(f, ok, 0);
    args[1] = f->url;
    for (const char *const *a = cases[i].args; *a != NULL; a++)
      args[n++] = *a;
    args[n] = NULL;
    run_cli(&f->r, no_env, NULL, args);
    req = fake_request(f);
    if (strncmp(req, cases[i].line, strlen(cases[i].line)) != 0)
      print_error("case %zu: want %s got:\n%s\n", i, cases[i].line, req);
    assert_true(strncmp(req, cases[i].line, strlen(cases[i].line)) == 0);
  }
  /* $LITHD_DB, and --db wins over it */
  start_fake(f, ok, 0);
  run_cli(&f->r, env_db, NULL, ARGS("--url", f->url, "stats"));
  assert_true(strncmp(fake_request(f), "GET /v1/db/from_env/stats HTTP/1.1\r\n", 36) == 0);
  start_fake(f, ok, 0);
  run_cli(&f->r, env_db, NULL, ARGS("--url", f->url, "--db", "x", "stats"));
  assert_true(strncmp(fake_request(f), "GET /v1/db/x/stats HTTP/1.1\r\n", 29) == 0);
}

/* A --db NAME that could add a piece to the path, or is not lithd's kind
 * of name, is refused before anything is sent (exit 2): lithd at
 * 127.0.0.1:1 would be exit 3. */
static void test_db_name_checked(void **state) {
  struct fixture *f = *state;
  char *const env_bad[] = {(char *)"LITHD_DB=../x", NULL};
  static const char *const bad[] = {"",    "..",  "../do", "a/b", "a%2Fb", "a?x=1",
                                    "a#b", "a b", "a.b",   "é",   "a\nb",  "x\r\nHost: evil"};
  char long_name[80];
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    run_cli(&f->r, no_env, NULL, ARGS("--url", "http://127.0.0.1:1", "--db", bad[i], "stats"));
    check(&f->r, 2, "", "is not a database name");
  }
  memset(long_name, 'a', 65);
  long_name[65] = '\0';
  run_cli(&f->r, no_env, NULL, ARGS("--url", "http://127.0.0.1:1", "--db", long_name, "stats"));
  check(&f->r, 2, "", "is not a database name");
  long_name[64] = '\0'; /* 64: fine, so the connection is what fails */
  run_cli(&f->r, no_env, NULL, ARGS("--url", "http://127.0.0.1:1", "--db", long_name, "stats"));
  check(&f->r, 3, "", "cannot connect");
  run_cli(&f->r, env_bad, NULL, ARGS("--url", "http://127.0.0.1:1", "stats"));
  check(&f->r, 2, "", "is not a database name");
}

static void test_bad_answers_exit_3(void **state) {
  struct fixture *f = *state;

  start_fake(f, "HELLO THERE\r\n\r\n", 0);
  LITH(f, "health");
  check(&f->r, 3, "", "did not answer in HTTP/1.x");
  fake_request(f);

  start_fake(f, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"ok\":", 0);
  LITH(f, "do", "INSERT INTO t VALUES (1)");
  check(&f->r, 3, "", "before the whole answer arrived (the request was sent: whether it ran is unknown)");
  fake_request(f);

  start_fake(f, "", 0); /* closes without a word */
  LITH(f, "stats");
  check(&f->r, 3, "", "closed the connection without answering");
  fake_request(f);

  start_fake(f, answer("HTTP/1.1 200 OK\r\n", "not json!"), 0);
  LITH(f, "stats");
  check(&f->r, 3, "", "not JSON");
  fake_request(f);

  start_fake(f, "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nxx", 0);
  LITH(f, "stats");
  check(&f->r, 3, "", "Transfer-Encoding");
  fake_request(f);

  /* An error answer that is not JSON: status and first line. */
  start_fake(f, answer("HTTP/1.1 502 Bad Gateway\r\n", "upstream :(\n"), 0);
  LITH(f, "stats");
  check(&f->r, 1, "", "lith: GET /v1/stats: HTTP 502: upstream :(\n");
  fake_request(f);

  /* 503 with Retry-After, in lithd's error shape. */
  start_fake(f,
             answer("HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n",
                    "{\"error\":{\"code\":\"queue_full\",\"message\":\"the write queue is full\","
                    "\"statement\":null}}"),
             0);
  LITH(f, "do", "INSERT INTO t VALUES (1)");
  check(&f->r, 1, "", "lith: queue_full: the write queue is full (retry after 1 s)\n");
  fake_request(f);
}

static void test_timeout_exit_3(void **state) {
  struct fixture *f = *state;
  int port;
  int fd = listen_any(&port); /* accepts into the backlog, never answers */
  struct timespec t0, t1;
  double s;

  snprintf(f->url, sizeof f->url, "http://127.0.0.1:%d", port);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  LITH(f, "--timeout", "0.3", "do", "INSERT INTO t VALUES (1)");
  clock_gettime(CLOCK_MONOTONIC, &t1);
  close(fd);
  check(&f->r, 3, "", "no answer from http://127.0.0.1:");
  check(&f->r, 3, "", "within 0.3 s (the request was sent: whether it ran is unknown)");
  s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  assert_true(s >= 0.3 && s < 10);
}

/* ---- Tests: client.c directly -------------------------------------------- */

/* ---- https ---------------------------------------------------------------- */

#define CERTS "cli-certs"

/* A lithd with --tls-cert on `listen` ("127.0.0.1:0"). */
static void start_tls_lithd(struct fixture *f, const char *name, const char *listen) {
  start_lithd(f, name, "--listen", listen, "--tls-cert", CERTS "/cert.pem", "--tls-key", CERTS "/key.pem",
              NULL);
  assert_true(strncmp(f->url, "https://", 8) == 0);
}

static void test_https(void **state) {
  struct fixture *f = *state;
  char *const ca_env[] = {(char *)"SSL_CERT_FILE=" CERTS "/ca.pem", NULL};
  char *const wrong_env[] = {(char *)"SSL_CERT_FILE=" CERTS "/cert.pem", NULL}; /* not the CA */
  char url[96];
  start_tls_lithd(f, "https", "127.0.0.1:0");
  /* --cacert: verified, answered */
  run_cli(&f->r, no_env, NULL, ARGS("--url", f->url, "--cacert", CERTS "/ca.pem", "do", "CREATE TABLE t(x)"));
  check(&f->r, 0, NULL, "");
  run_cli(&f->r, no_env, NULL,
          ARGS("--url", f->url, "--cacert", CERTS "/ca.pem", "do", "INSERT INTO t VALUES (7)"));
  check(&f->r, 0, NULL, "");
  /* SSL_CERT_FILE, and the name localhost the certificate carries too */
  snprintf(url, sizeof url, "https://localhost:%s", strrchr(f->url, ':') + 1);
  run_cli(&f->r, ca_env, NULL, ARGS("--url", url, "query", "SELECT x FROM t"));
  check(&f->r, 0, "x\n7\n", "");
  /* a backup download over https */
  run_cli(&f->r, ca_env, NULL, ARGS("--url", f->url, "backup", "--out", "https-copy.db"));
  check(&f->r, 0, NULL, "");
  {
    sqlite3 *db;
    assert_int_equal(sqlite3_open_v2("https-copy.db", &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_close(db);
    unlink("https-copy.db");
  }
  /* no CA that signed it (the system's, or a wrong one): refused before
   * anything is sent, exit 3, and a message that says what to do */
  run_cli(&f->r, no_env, NULL, ARGS("--url", f->url, "do", "INSERT INTO t VALUES (8)"));
  check(&f->r, 3, "", "cannot verify the certificate of https://127.0.0.1:");
  check(&f->r, 3, "", "--cacert");
  run_cli(&f->r, wrong_env, NULL, ARGS("--url", f->url, "do", "INSERT INTO t VALUES (8)"));
  check(&f->r, 3, "", "cannot verify the certificate");
  run_cli(&f->r, ca_env, NULL, ARGS("--url", f->url, "query", "SELECT count(*) FROM t"));
  check(&f->r, 0, "count(*)\n1\n", "");
  /* --cacert that cannot be read: a usage error */
  run_cli(&f->r, no_env, NULL, ARGS("--url", f->url, "--cacert", "no-such-ca.pem", "health"));
  check(&f->r, 2, "", "no-such-ca.pem: No such file");
  /* http:// to the https port: no answer */
  snprintf(url, sizeof url, "http://%s", f->url + strlen("https://"));
  run_cli(&f->r, ca_env, NULL, ARGS("--url", url, "health"));
  check(&f->r, 3, "", "closed the connection without answering");
}

static void test_https_name_must_match(void **state) {
  struct fixture *f = *state;
  char *const ca_env[] = {(char *)"SSL_CERT_FILE=" CERTS "/ca.pem", NULL};
  /* the certificate names localhost, 127.0.0.1 and ::1, not 127.0.0.2 */
  start_tls_lithd(f, "https_name", "127.0.0.2:0");
  assert_non_null(strstr(f->url, "127.0.0.2"));
  run_cli(&f->r, ca_env, NULL, ARGS("--url", f->url, "health"));
  check(&f->r, 3, "", "cannot verify the certificate of https://127.0.0.2:");
  check(&f->r, 3, "", "mismatch");
}

static void test_url_parsing(void **state) {
  lithc_endpoint ep;
  char err[256], name[512];
  static const char *const bad[] = {
      "https:/h:1",  "ftp://h",        "h:1",         "http://",      "http://:80",
      "http://h:0",  "http://h:65536", "http://h:",   "http://u@h:1", "http://h:1?x",
      "http://[::1", "http://[::1]x",  "http://h:1x",
  };
  size_t i;
  char longp[200];
  (void)state;

  assert_int_equal(lithc_endpoint_url(&ep, "http://127.0.0.1:8765", err, sizeof err), LITHC_OK);
  assert_string_equal(ep.host, "127.0.0.1");
  assert_int_equal(ep.port, 8765);
  assert_string_equal(ep.base_path, "");
  assert_false(ep.is_unix);
  assert_int_equal(lithc_endpoint_url(&ep, "HTTP://Example.org", err, sizeof err), LITHC_OK);
  assert_string_equal(ep.host, "Example.org");
  assert_int_equal(ep.port, 80);
  assert_int_equal(lithc_endpoint_url(&ep, "http://[::1]:9/db/lith/", err, sizeof err), LITHC_OK);
  assert_string_equal(ep.host, "::1");
  assert_int_equal(ep.port, 9);
  assert_string_equal(ep.base_path, "/db/lith");
  assert_string_equal(lithc_endpoint_name(&ep, name, sizeof name), "http://[::1]:9/db/lith");
  assert_false(ep.tls);
  assert_int_equal(lithc_endpoint_url(&ep, "https://db.example", err, sizeof err), LITHC_OK);
  assert_true(ep.tls);
  assert_int_equal(ep.port, 443);
  assert_string_equal(lithc_endpoint_name(&ep, name, sizeof name), "https://db.example:443");
  assert_int_equal(lithc_endpoint_url(&ep, "HTTPS://[::1]:8443/x", err, sizeof err), LITHC_OK);
  assert_true(ep.tls);
  assert_int_equal(ep.port, 8443);
  assert_string_equal(ep.base_path, "/x");
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    err[0] = '\0';
    if (lithc_endpoint_url(&ep, bad[i], err, sizeof err) != LITHC_BAD_ARG)
      fail_msg("accepted %s", bad[i]);
    assert_true(err[0] != '\0');
  }

  assert_int_equal(lithc_endpoint_unix(&ep, "/run/lithd.sock", err, sizeof err), LITHC_OK);
  assert_true(ep.is_unix);
  assert_string_equal(lithc_endpoint_name(&ep, name, sizeof name), "unix:/run/lithd.sock");
  memset(longp, 'x', sizeof longp - 1);
  longp[sizeof longp - 1] = '\0';
  assert_int_equal(lithc_endpoint_unix(&ep, longp, err, sizeof err), LITHC_BAD_ARG);
  assert_int_equal(lithc_endpoint_unix(&ep, "", err, sizeof err), LITHC_BAD_ARG);
}

/* Feed `answer` to lithc_response_read through a SOCK_SEQPACKET pair, in
 * records of `piece` bytes (each one recv for the reader; 0: one record). */
static int read_canned(const char *answer, size_t piece, const char *method, lithc_response *r, char *err,
                       size_t errsz) {
  int sv[2], rc;
  size_t off = 0, n = strlen(answer);
  assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
  while (off < n) {
    size_t k = piece > 0 && n - off > piece ? piece : n - off;
    assert_int_equal(send(sv[1], answer + off, k, MSG_NOSIGNAL), (ssize_t)k);
    off += k;
  }
  close(sv[1]);
  rc = lithc_response_read(sv[0], method, NULL, 5000, r, err, errsz);
  close(sv[0]);
  return rc;
}

/* A source for lithc_response_read_from: `text` in reads of 3 bytes, then
 * a reset connection. */
struct canned {
  const char *text;
  size_t off;
};

static ssize_t canned_read(void *ctx, char *buf, size_t n) {
  struct canned *c = ctx;
  size_t k = strlen(c->text) - c->off;
  if (k == 0) {
    errno = ECONNRESET;
    return -1;
  }
  if (k > 3)
    k = 3;
  if (k > n)
    k = n;
  memcpy(buf, c->text + c->off, k);
  c->off += k;
  return (ssize_t)k;
}

static void test_response_read(void **state) {
  static const char chunked[] = "HTTP/1.1 100 Continue\r\n\r\n"
                                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A:  v \r\n\r\n"
                                "5;x=1\r\nhello\r\nA\r\n, world!!!\r\n0\r\nT: 1\r\n\r\n";
  lithc_response r;
  char err[256];
  size_t piece, len = 0;
  const char *v;
  (void)state;

  /* Whatever the reads are cut into, the same answer. */
  for (piece = 0; piece <= 7; piece++) {
    assert_int_equal(read_canned(chunked, piece, "GET", &r, err, sizeof err), LITHC_OK);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, 15);
    assert_string_equal(r.body, "hello, world!!!");
    v = lithc_response_header(&r, "x-a", &len);
    assert_non_null(v);
    assert_int_equal(len, 1);
    assert_true(v[0] == 'v');
    lithc_response_free(&r);
  }
  /* HEAD: no body whatever the length says; a failure leaves r empty. */
  assert_int_equal(
      read_canned("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", 3, "HEAD", &r, err, sizeof err), LITHC_OK);
  assert_int_equal(r.body_len, 0);
  lithc_response_free(&r);
  assert_int_equal(
      read_canned("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort", 2, "GET", &r, err, sizeof err),
      LITHC_IO);
  assert_non_null(strstr(err, "the server closed the connection before the whole answer arrived"));
  assert_null(r.head);
  assert_null(r.body);

  /* From a source: a complete answer needs nothing past its end... */
  {
    struct canned c = {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA", 0};
    assert_int_equal(lithc_response_read_from(canned_read, &c, "GET", "src", &r, err, sizeof err), LITHC_OK);
    assert_int_equal(r.body_len, 2);
    assert_string_equal(r.body, "ok");
    lithc_response_free(&r);
  }
  /* ...and a source's error ends an incomplete one. */
  {
    struct canned c = {"HTTP/1.1 200 OK\r\n\r\nto the end", 0};
    assert_int_equal(lithc_response_read_from(canned_read, &c, "GET", "src", &r, err, sizeof err), LITHC_IO);
    assert_non_null(strstr(err, "reading the answer of src: "));
    assert_null(r.body);
  }
}

int main(void) {
  mkdir(CERTS, 0700);
  if (tlsgen_write(CERTS) != 0)
    return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_url_parsing),
      cmocka_unit_test(test_response_read),
      cmocka_unit_test_setup_teardown(test_help_and_version, setup, teardown),
      cmocka_unit_test_setup_teardown(test_do_query_round_trip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_errors_exit_1_nothing_changed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_do_file_and_stdin, setup, teardown),
      cmocka_unit_test_setup_teardown(test_batch_posts_to_v1_batch, setup, teardown),
      cmocka_unit_test_setup_teardown(test_json_output_parses, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stats_and_health, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unix_socket, setup, teardown),
      cmocka_unit_test_setup_teardown(test_token, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cannot_connect_exit_3, setup, teardown),
      cmocka_unit_test_setup_teardown(test_usage_errors_exit_2_nothing_sent, setup, teardown),
      cmocka_unit_test_setup_teardown(test_backup, setup, teardown),
      cmocka_unit_test_setup_teardown(test_backup_out, setup, teardown),
      cmocka_unit_test_setup_teardown(test_run_named_commands, setup, teardown),
      cmocka_unit_test_setup_teardown(test_chunked_answer, setup, teardown),
      cmocka_unit_test_setup_teardown(test_request_of_run_and_token, setup, teardown),
      cmocka_unit_test_setup_teardown(test_db_two_databases, setup, teardown),
      cmocka_unit_test_setup_teardown(test_db_routes_every_request, setup, teardown),
      cmocka_unit_test_setup_teardown(test_db_name_checked, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_answers_exit_3, setup, teardown),
      cmocka_unit_test_setup_teardown(test_timeout_exit_3, setup, teardown),
      cmocka_unit_test_setup_teardown(test_https, setup, teardown),
      cmocka_unit_test_setup_teardown(test_https_name_must_match, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
