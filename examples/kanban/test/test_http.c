/*
 * test_http — the kanban server end to end, over HTTP/1.1 on a real socket.
 *
 * Design: one server process (KANBAN_PATH, compiled in) is spawned for the
 * whole group on a fresh database in the scratch directory, on port 0; its
 * first stdout line names the port. Every test signs up users of its own
 * (so tests do not depend on each other's state) and talks to the server
 * the way a browser does: form posts for signing in, JSON posts with an op
 * id and an Origin header for actions, the session cookie on every request,
 * and a long-lived connection for the event stream. After each refusal the
 * test checks that the board's version did not move: "changes nothing".
 * Every wait has a deadline, so a stuck server fails a test instead of
 * hanging it. Answers are read by http/h1client.c. The group teardown stops the server with SIGTERM while an
 * event stream is open and expects exit status 0.
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
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "h1client.h"

#ifndef KANBAN_PATH
#error "KANBAN_PATH must name the kanban binary"
#endif

#define TIMEOUT_MS 15000

extern char **environ;

static pid_t server_pid = -1;
static int server_out = -1;
static int port;
static char origin[64];

/* ---- Time and sockets ------------------------------------------------------- */

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait until fd is readable or the deadline passed: 1 ready, 0 not. */
static int readable(int fd, int64_t deadline) {
  for (;;) {
    struct pollfd p = {fd, POLLIN, 0};
    int64_t left = deadline - now_ms();
    int n = poll(&p, 1, left < 0 ? 0 : (int)left);
    if (n < 0 && errno == EINTR)
      continue;
    return n > 0;
  }
}

static int connect_server(void) {
  struct sockaddr_in a;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  return fd;
}

static void send_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    assert_true(w > 0);
    p += w;
    n -= (size_t)w;
  }
}

/* ---- Requests ------------------------------------------------------------------- */

/* A header's value (first of that name) copied into out; 1 if found. */
static int header(const h1c_response *r, const char *name, char *out, size_t cap) {
  size_t n = 0;
  const char *v = h1c_response_header(r, name, &n);
  if (v == NULL || n + 1 > cap)
    return 0;
  memcpy(out, v, n);
  out[n] = '\0';
  return 1;
}

/* Read a whole answer (the server closes after it: Connection: close) and
 * then the end of the stream; a reset there is fine (a refused upload). */
static void read_resp(int fd, h1c_response *r) {
  h1c_conn k;
  char err[256] = "";
  int rc;
  h1c_init(&k, fd, "kanban", err, sizeof err);
  h1c_deadline(&k, TIMEOUT_MS);
  k.sent = 1;
  rc = h1c_read(&k, NULL, r);
  if (rc == H1C_OK) {
    rc = h1c_read_eof(&k);
    if (rc == H1C_IO)
      rc = H1C_OK;
    else if (rc != H1C_OK)
      h1c_response_free(r);
  }
  h1c_release(&k);
  close(fd);
  if (rc != H1C_OK)
    print_error("%s\n", err);
  assert_int_equal(rc, H1C_OK);
}

#define F_ORIGIN 1u /* send Origin: our server (a same-origin POST) */
#define F_JSON 2u   /* Content-Type: application/json (else a form) */

/* Send one request; returns the socket (the answer still to read). */
static int send_req(const char *method, const char *path, const char *cookie, unsigned flags,
                    const char *body, size_t body_len) {
  char head[1024];
  int fd = connect_server(), n;
  n = snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n%s%s%s%s%s%s",
               method, path, port, cookie != NULL ? "Cookie: kanban_session=" : "",
               cookie != NULL ? cookie : "", cookie != NULL ? "\r\n" : "", flags & F_ORIGIN ? "Origin: " : "",
               flags & F_ORIGIN ? origin : "", flags & F_ORIGIN ? "\r\n" : "");
  assert_true(n > 0 && (size_t)n < sizeof head);
  if (body != NULL)
    n += snprintf(head + n, sizeof head - (size_t)n, "Content-Type: %s\r\nContent-Length: %zu\r\n",
                  flags & F_JSON ? "application/json" : "application/x-www-form-urlencoded", body_len);
  n += snprintf(head + n, sizeof head - (size_t)n, "\r\n");
  assert_true((size_t)n < sizeof head);
  send_all(fd, head, (size_t)n);
  if (body != NULL)
    send_all(fd, body, body_len);
  return fd;
}

static void req(const char *method, const char *path, const char *cookie, unsigned flags, const char *body,
                h1c_response *r) {
  read_resp(send_req(method, path, cookie, flags, body, body ? strlen(body) : 0), r);
}

/* req, then the status must be `status` (the answer is printed if not). */
static void expect(const char *method, const char *path, const char *cookie, unsigned flags, const char *body,
                   int status, h1c_response *out) {
  h1c_response r;
  req(method, path, cookie, flags, body, &r);
  if (r.status != status) {
    print_error("%s %s: want %d, got:\n%s\n%s\n", method, path, status, r.head, r.body);
    fail();
  }
  if (out != NULL)
    *out = r;
  else
    h1c_response_free(&r);
}

/* ---- The server ------------------------------------------------------------------- */

static int start_server(void **state) {
  int pfd[2];
  posix_spawn_file_actions_t fa;
  char line[512] = "";
  size_t len = 0;
  const char *url;
  int64_t deadline = now_ms() + TIMEOUT_MS;
  char *argv[] = {KANBAN_PATH, "--port", "0", "--db", "http.db", NULL};

  (void)state;
  unlink("http.db");
  unlink("http.db-wal");
  unlink("http.db-shm");
  if (pipe2(pfd, O_CLOEXEC) != 0)
    return -1;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
  if (posix_spawn(&server_pid, KANBAN_PATH, &fa, NULL, argv, environ) != 0)
    return -1;
  posix_spawn_file_actions_destroy(&fa);
  close(pfd[1]);
  server_out = pfd[0];
  while (memchr(line, '\n', len) == NULL) {
    ssize_t got;
    if (len + 1 >= sizeof line || !readable(server_out, deadline))
      return -1;
    got = read(server_out, line + len, sizeof line - 1 - len);
    if (got <= 0)
      return -1; /* it refused to start: see its stderr */
    len += (size_t)got;
    line[len] = '\0';
  }
  url = strstr(line, "http://127.0.0.1:");
  if (url == NULL)
    return -1;
  port = atoi(url + strlen("http://127.0.0.1:"));
  snprintf(origin, sizeof origin, "http://127.0.0.1:%d", port);
  return port > 0 ? 0 : -1;
}

/* SIGTERM and wait; the exit status (128 + signal if killed), -1 if it hung. */
static int stop_server(int timeout_ms) {
  int st = 0, code = -1;
  int64_t deadline = now_ms() + timeout_ms;
  pid_t got = 0;
  if (server_pid <= 0)
    return -1;
  kill(server_pid, SIGTERM);
  while ((got = waitpid(server_pid, &st, WNOHANG)) == 0 && now_ms() < deadline)
    usleep(5000);
  if (got == 0) {
    kill(server_pid, SIGKILL);
    waitpid(server_pid, &st, 0);
  } else if (WIFEXITED(st)) {
    code = WEXITSTATUS(st);
  } else if (WIFSIGNALED(st)) {
    code = 128 + WTERMSIG(st);
  }
  server_pid = -1;
  close(server_out);
  server_out = -1;
  return code;
}

static int teardown_server(void **state) {
  (void)state;
  if (server_pid > 0)
    stop_server(TIMEOUT_MS);
  return 0;
}

/* ---- Sessions and boards ------------------------------------------------------------ */

/* The session token from a Set-Cookie header into out (AUTH token, 43). */
static int session_cookie(const h1c_response *r, char *out, size_t cap) {
  char v[256];
  const char *p;
  size_t n;
  if (!header(r, "set-cookie", v, sizeof v) || strncmp(v, "kanban_session=", 15) != 0)
    return 0;
  p = v + 15;
  n = strcspn(p, ";");
  if (n == 0 || n + 1 > cap)
    return 0;
  memcpy(out, p, n);
  out[n] = '\0';
  return 1;
}

static void sign_up(const char *name, const char *password, char *cookie, size_t cap) {
  char body[256];
  h1c_response r;
  char loc[64];
  snprintf(body, sizeof body, "name=%s&password=%s", name, password);
  expect("POST", "/signup", NULL, F_ORIGIN, body, 303, &r);
  assert_true(header(&r, "location", loc, sizeof loc));
  assert_string_equal(loc, "/boards");
  assert_true(session_cookie(&r, cookie, cap));
  assert_non_null(strstr(r.head, "HttpOnly"));
  assert_non_null(strstr(r.head, "SameSite=Lax"));
  h1c_response_free(&r);
}

static void sign_in(const char *name, const char *password, char *cookie, size_t cap) {
  char body[256];
  h1c_response r;
  snprintf(body, sizeof body, "name=%s&password=%s", name, password);
  expect("POST", "/signin", NULL, F_ORIGIN, body, 303, &r);
  assert_true(session_cookie(&r, cookie, cap));
  h1c_response_free(&r);
}

/* A new board of `cookie`'s user (JSON API); its id. */
static int64_t new_board(const char *cookie, const char *title) {
  char body[256];
  h1c_response r;
  json_t *j;
  int64_t id;
  snprintf(body, sizeof body, "{\"op\":\"nb-%s-%lld\",\"title\":\"%s\"}", title, (long long)now_ms(), title);
  expect("POST", "/boards", cookie, F_ORIGIN | F_JSON, body, 200, &r);
  j = json_loads(r.body, 0, NULL);
  assert_non_null(j);
  id = json_integer_value(json_object_get(j, "id"));
  assert_true(id > 0);
  json_decref(j);
  h1c_response_free(&r);
  return id;
}

/* GET /boards/ID/data as JSON (the caller decrefs). */
static json_t *board_data(const char *cookie, int64_t board) {
  char path[64];
  h1c_response r;
  json_t *j;
  snprintf(path, sizeof path, "/boards/%lld/data", (long long)board);
  expect("GET", path, cookie, 0, NULL, 200, &r);
  j = json_loads(r.body, 0, NULL);
  assert_non_null(j);
  h1c_response_free(&r);
  return j;
}

static int64_t board_version(const char *cookie, int64_t board) {
  json_t *j = board_data(cookie, board);
  int64_t v = json_integer_value(json_object_get(j, "version"));
  json_decref(j);
  return v;
}

/* POST /boards/B<suffix> with a JSON body; the answer in *r (status checked). */
static void action(const char *cookie, int64_t board, const char *suffix, const char *json, int status,
                   h1c_response *r) {
  char path[128];
  snprintf(path, sizeof path, "/boards/%lld%s", (long long)board, suffix);
  expect("POST", path, cookie, F_ORIGIN | F_JSON, json, status, r);
}

static int64_t json_id(const h1c_response *r, const char *key) {
  json_t *j = json_loads(r->body, 0, NULL);
  int64_t v;
  assert_non_null(j);
  v = json_integer_value(json_object_get(j, key));
  json_decref(j);
  return v;
}

/* Where card `card` is in the board JSON: list id and index; 0 if absent. */
static int64_t card_place(json_t *b, int64_t card, int *index, int64_t *version) {
  size_t i, k;
  json_t *l, *c;
  json_array_foreach(json_object_get(b, "lists"), i, l) {
    json_array_foreach(json_object_get(l, "cards"), k, c) {
      if (json_integer_value(json_object_get(c, "id")) == card) {
        if (index != NULL)
          *index = (int)k;
        if (version != NULL)
          *version = json_integer_value(json_object_get(c, "version"));
        return json_integer_value(json_object_get(l, "id"));
      }
    }
  }
  return 0;
}

/* ---- Tests ------------------------------------------------------------------------------ */

/* Pages and files need no session; the app's pages send a visitor to /signin. */
static void test_pages(void **state) {
  h1c_response r;
  char v[128];
  (void)state;
  expect("GET", "/", NULL, 0, NULL, 303, &r);
  assert_true(header(&r, "location", v, sizeof v));
  assert_string_equal(v, "/signin");
  h1c_response_free(&r);
  expect("GET", "/signin", NULL, 0, NULL, 200, &r);
  assert_true(header(&r, "content-type", v, sizeof v));
  assert_string_equal(v, "text/html; charset=utf-8");
  assert_non_null(strstr(r.body, "<form"));
  assert_true(header(&r, "content-security-policy", v, sizeof v));
  h1c_response_free(&r);
  expect("GET", "/static/app.css", NULL, 0, NULL, 200, &r);
  assert_true(header(&r, "content-type", v, sizeof v));
  assert_string_equal(v, "text/css; charset=utf-8");
  h1c_response_free(&r);
  expect("GET", "/static/board.js", NULL, 0, NULL, 200, &r);
  assert_non_null(strstr(r.body, "EventSource"));
  h1c_response_free(&r);
  expect("GET", "/static/layout.html", NULL, 0, NULL, 404, NULL); /* templates are not files */
  expect("GET", "/static/nothing.js", NULL, 0, NULL, 404, NULL);
  expect("GET", "/boards", NULL, 0, NULL, 303, NULL);
  expect("GET", "/boards/1", NULL, 0, NULL, 303, NULL);
  expect("GET", "/boards/1/data", NULL, 0, NULL, 401, NULL);
  expect("GET", "/boards/1/data", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", 0, NULL, 401, NULL);
  expect("GET", "/boards/1/data", "not-a-token", 0, NULL, 401, NULL);
  expect("GET", "/healthz", NULL, 0, NULL, 200, NULL);
  expect("DELETE", "/boards", NULL, 0, NULL, 405, NULL);
}

static void test_sign_up_in_out(void **state) {
  char cookie[64], again[64];
  h1c_response r;
  (void)state;
  sign_up("dora", "dora-password", cookie, sizeof cookie);
  expect("GET", "/boards", cookie, 0, NULL, 200, &r);
  assert_non_null(strstr(r.body, "dora"));
  h1c_response_free(&r);

  /* refusals: each answers with the sign-in page and its message */
  expect("POST", "/signup", NULL, F_ORIGIN, "name=dora&password=another-pw", 409, NULL);
  expect("POST", "/signup", NULL, F_ORIGIN, "name=no%20spaces&password=long-enough", 422, NULL);
  expect("POST", "/signup", NULL, F_ORIGIN, "name=eve&password=short", 422, NULL);
  expect("POST", "/signup", NULL, F_ORIGIN, "name=eve&password=%zz", 400, NULL);
  expect("POST", "/signup", NULL, F_ORIGIN, "name=eve", 400, NULL);
  expect("POST", "/signin", NULL, F_ORIGIN, "name=dora&password=wrong-password", 401, NULL);
  expect("POST", "/signin", NULL, F_ORIGIN, "name=nobody&password=whatever1", 401, NULL);
  /* no Origin (or another site's): refused before anything is read */
  expect("POST", "/signin", NULL, 0, "name=dora&password=dora-password", 403, NULL);

  sign_in("dora", "dora-password", again, sizeof again);
  assert_string_not_equal(cookie, again);
  expect("GET", "/boards", again, 0, NULL, 200, NULL);

  /* sign-out ends that session only */
  expect("POST", "/signout", again, F_ORIGIN, "", 303, &r);
  assert_non_null(strstr(r.head, "Max-Age=0"));
  h1c_response_free(&r);
  expect("GET", "/boards/1/data", again, 0, NULL, 401, NULL);
  expect("GET", "/boards", again, 0, NULL, 303, NULL);
  expect("GET", "/boards", cookie, 0, NULL, 200, NULL);
}

static void test_actions(void **state) {
  char cookie[64], body[256];
  h1c_response r;
  int64_t board, todo, done, card, v0, card_v;
  int index = -1;
  json_t *b;
  (void)state;
  sign_up("fred", "fred-password", cookie, sizeof cookie);
  board = new_board(cookie, "Fred");
  expect("GET", "/boards", cookie, 0, NULL, 200, &r);
  assert_non_null(strstr(r.body, "Fred"));
  h1c_response_free(&r);

  action(cookie, board, "/lists", "{\"op\":\"l1\",\"title\":\"To do\"}", 200, &r);
  todo = json_id(&r, "id");
  h1c_response_free(&r);
  action(cookie, board, "/lists", "{\"op\":\"l2\",\"title\":\"Done\"}", 200, &r);
  done = json_id(&r, "id");
  h1c_response_free(&r);
  snprintf(body, sizeof body, "{\"op\":\"c1\",\"list\":%lld,\"title\":\"A card\"}", (long long)todo);
  action(cookie, board, "/cards", body, 200, &r);
  card = json_id(&r, "id");
  card_v = json_id(&r, "version");
  h1c_response_free(&r);
  snprintf(body, sizeof body, "{\"op\":\"c2\",\"list\":%lld,\"title\":\"Second\",\"index\":0}",
           (long long)todo);
  action(cookie, board, "/cards", body, 200, NULL);

  /* the page renders the board, escaped */
  action(cookie, board, "/rename", "{\"op\":\"r1\",\"title\":\"Fred <b>&</b>\"}", 200, NULL);
  {
    char path[64];
    snprintf(path, sizeof path, "/boards/%lld", (long long)board);
    expect("GET", path, cookie, 0, NULL, 200, &r);
    assert_non_null(strstr(r.body, "Fred &lt;b&gt;&amp;&lt;/b&gt;"));
    assert_null(strstr(r.body, "<b>&</b>"));
    assert_non_null(strstr(r.body, "A card"));
    h1c_response_free(&r);
  }

  /* move to Done */
  snprintf(body, sizeof body, "{\"op\":\"m1\",\"list\":%lld,\"index\":0,\"version\":%lld}", (long long)done,
           (long long)card_v);
  action(cookie, board, "/cards/0/move", body, 404, NULL); /* not an id */
  {
    char suffix[64];
    snprintf(suffix, sizeof suffix, "/cards/%lld/move", (long long)card);
    action(cookie, board, suffix, body, 200, &r);
    assert_int_equal(json_id(&r, "version"), card_v + 1);
    h1c_response_free(&r);
    b = board_data(cookie, board);
    assert_int_equal(card_place(b, card, &index, NULL), done);
    assert_int_equal(index, 0);
    v0 = json_integer_value(json_object_get(b, "version"));
    json_decref(b);

    /* the same op again (a browser's retry): applied once */
    action(cookie, board, suffix, body, 200, &r);
    assert_non_null(strstr(r.body, "\"replayed\":true"));
    h1c_response_free(&r);
    assert_int_equal(board_version(cookie, board), v0);

    /* a stale move: another op with the version seen before the first move */
    snprintf(body, sizeof body, "{\"op\":\"m2\",\"list\":%lld,\"index\":0,\"version\":%lld}", (long long)todo,
             (long long)card_v);
    action(cookie, board, suffix, body, 409, &r);
    assert_non_null(strstr(r.body, "\"code\":\"stale\""));
    assert_int_equal(json_id(&r, "version"), card_v + 1);
    h1c_response_free(&r);
    b = board_data(cookie, board);
    assert_int_equal(card_place(b, card, NULL, NULL), done);
    assert_int_equal(json_integer_value(json_object_get(b, "version")), v0);
    json_decref(b);

    /* edit, then archive: it leaves the board's JSON */
    snprintf(suffix, sizeof suffix, "/cards/%lld/edit", (long long)card);
    action(cookie, board, suffix, "{\"op\":\"e1\",\"description\":\"line 1\\nline 2\"}", 200, NULL);
    {
      char path[64];
      snprintf(path, sizeof path, "/boards/%lld/data", (long long)board);
      expect("GET", path, cookie, 0, NULL, 200, &r);
      assert_non_null(strstr(r.body, "\"description\":\"line 1\\nline 2\""));
      assert_non_null(strstr(r.body, "\"title\":\"A card\"")); /* a NULL title kept it */
      h1c_response_free(&r);
    }
    snprintf(suffix, sizeof suffix, "/cards/%lld/archive", (long long)card);
    action(cookie, board, suffix, "{\"op\":\"a1\"}", 200, NULL);
    b = board_data(cookie, board);
    assert_int_equal(card_place(b, card, NULL, NULL), 0);
    json_decref(b);

    /* a list: rename, archive */
    snprintf(suffix, sizeof suffix, "/lists/%lld/rename", (long long)done);
    action(cookie, board, suffix, "{\"op\":\"lr\",\"title\":\"Shipped\"}", 200, NULL);
    snprintf(suffix, sizeof suffix, "/lists/%lld/archive", (long long)done);
    action(cookie, board, suffix, "{\"op\":\"la\",\"archived\":true}", 200, NULL);
    b = board_data(cookie, board);
    assert_int_equal(json_array_size(json_object_get(b, "lists")), 1);
    json_decref(b);
  }
}

/* Someone else's board: 403 for its members-only things, 404 for what is
 * not there; nothing changes. */
static void test_membership(void **state) {
  char gina[64], hank[64], body[256], suffix[64], path[64];
  int64_t gboard, hboard, glist, gcard, hlist, v0, hv0;
  h1c_response r;
  (void)state;
  sign_up("gina", "gina-password", gina, sizeof gina);
  sign_up("hank", "hank-password", hank, sizeof hank);
  gboard = new_board(gina, "Gina");
  hboard = new_board(hank, "Hank");
  action(gina, gboard, "/lists", "{\"op\":\"g1\",\"title\":\"Mine\"}", 200, &r);
  glist = json_id(&r, "id");
  h1c_response_free(&r);
  snprintf(body, sizeof body, "{\"op\":\"g2\",\"list\":%lld,\"title\":\"Secret\"}", (long long)glist);
  action(gina, gboard, "/cards", body, 200, &r);
  gcard = json_id(&r, "id");
  h1c_response_free(&r);
  action(hank, hboard, "/lists", "{\"op\":\"h1\",\"title\":\"His\"}", 200, &r);
  hlist = json_id(&r, "id");
  h1c_response_free(&r);
  v0 = board_version(gina, gboard);
  hv0 = board_version(hank, hboard);

  snprintf(path, sizeof path, "/boards/%lld", (long long)gboard);
  expect("GET", path, hank, 0, NULL, 403, &r);
  assert_null(strstr(r.body, "Secret"));
  h1c_response_free(&r);
  snprintf(path, sizeof path, "/boards/%lld/data", (long long)gboard);
  expect("GET", path, hank, 0, NULL, 403, NULL);
  snprintf(path, sizeof path, "/boards/%lld/events", (long long)gboard);
  expect("GET", path, hank, 0, NULL, 403, NULL);
  expect("GET", "/boards/999999", hank, 0, NULL, 404, NULL);
  expect("GET", "/boards/999999/data", hank, 0, NULL, 404, NULL);
  expect("GET", "/boards/x/data", hank, 0, NULL, 404, NULL);

  /* hank acting on gina's board, directly */
  action(hank, gboard, "/rename", "{\"op\":\"x1\",\"title\":\"Mine now\"}", 403, NULL);
  action(hank, gboard, "/lists", "{\"op\":\"x2\",\"title\":\"Mine now\"}", 403, NULL);
  snprintf(suffix, sizeof suffix, "/cards/%lld/move", (long long)gcard);
  snprintf(body, sizeof body, "{\"op\":\"x3\",\"list\":%lld,\"index\":0,\"version\":1}", (long long)glist);
  action(hank, gboard, suffix, body, 403, NULL);
  /* ... and through his own board's URLs: gina's card is not on his board */
  action(hank, hboard, suffix, body, 404, NULL);
  snprintf(body, sizeof body, "{\"op\":\"x4\",\"list\":%lld,\"index\":0,\"version\":1}", (long long)hlist);
  action(hank, hboard, suffix, body, 404, NULL);
  snprintf(suffix, sizeof suffix, "/cards/%lld/edit", (long long)gcard);
  action(hank, hboard, suffix, "{\"op\":\"x5\",\"title\":\"pwned\"}", 404, NULL);
  snprintf(body, sizeof body, "{\"op\":\"x6\",\"list\":%lld,\"title\":\"planted\"}", (long long)glist);
  action(hank, hboard, "/cards", body, 404, NULL);
  action(hank, hboard, "/members", "{\"op\":\"x7\",\"name\":\"nobody-here\"}", 404, &r);
  /* a member who does not exist is named as such, not as a missing board */
  assert_non_null(strstr(r.body, "\"no_user\""));
  assert_non_null(strstr(r.body, "no user named nobody-here"));
  assert_null(strstr(r.body, "No such board"));
  h1c_response_free(&r);
  /* and a board that does not exist is still one */
  action(hank, 999999, "/members", "{\"op\":\"x9\",\"name\":\"gina\"}", 404, &r);
  assert_non_null(strstr(r.body, "\"not_found\""));
  h1c_response_free(&r);
  /* even gina cannot reach her card through hank's board's URL */
  snprintf(suffix, sizeof suffix, "/cards/%lld/edit", (long long)gcard);
  action(gina, hboard, suffix, "{\"op\":\"x8\",\"title\":\"moved?\"}", 404, NULL);

  assert_int_equal(board_version(gina, gboard), v0);
  assert_int_equal(board_version(hank, hboard), hv0);

  /* once gina adds hank, he sees and changes her board */
  action(gina, gboard, "/members", "{\"op\":\"g3\",\"name\":\"hank\"}", 200, NULL);
  action(gina, gboard, "/members", "{\"op\":\"g4\",\"name\":\"hank\"}", 409, NULL);
  snprintf(path, sizeof path, "/boards/%lld", (long long)gboard);
  expect("GET", path, hank, 0, NULL, 200, &r);
  assert_non_null(strstr(r.body, "Secret"));
  h1c_response_free(&r);
  snprintf(suffix, sizeof suffix, "/cards/%lld/edit", (long long)gcard);
  action(hank, gboard, suffix, "{\"op\":\"h2\",\"title\":\"Shared\"}", 200, NULL);
}

/* Malformed, oversize and out-of-range requests: the right 4xx, no change. */
static void test_bad_input(void **state) {
  char cookie[64], body[256], suffix[64];
  int64_t board, list, card, v0;
  h1c_response r;
  char *big;
  (void)state;
  sign_up("ivan", "ivan-password", cookie, sizeof cookie);
  board = new_board(cookie, "Ivan");
  action(cookie, board, "/lists", "{\"op\":\"i1\",\"title\":\"L\"}", 200, &r);
  list = json_id(&r, "id");
  h1c_response_free(&r);
  snprintf(body, sizeof body, "{\"op\":\"i2\",\"list\":%lld,\"title\":\"C\"}", (long long)list);
  action(cookie, board, "/cards", body, 200, &r);
  card = json_id(&r, "id");
  h1c_response_free(&r);
  v0 = board_version(cookie, board);
  snprintf(suffix, sizeof suffix, "/cards/%lld/move", (long long)card);

  action(cookie, board, "/lists", "{\"op\":\"b1\",\"title\":", 400, NULL);     /* broken JSON */
  action(cookie, board, "/lists", "[1,2]", 400, NULL);                         /* not an object */
  action(cookie, board, "/lists", "{\"title\":\"no op\"}", 400, NULL);         /* no op id */
  action(cookie, board, "/lists", "{\"op\":\"\",\"title\":\"x\"}", 400, NULL); /* empty op id */
  action(cookie, board, "/lists", "{\"op\":\"b2\",\"title\":7}", 400, NULL);   /* wrong type */
  action(cookie, board, "/lists", "{\"op\":\"b3\",\"op\":\"b4\",\"title\":\"x\"}", 400, NULL); /* dup key */
  action(cookie, board, "/lists", "{\"op\":\"b5\",\"title\":\"   \"}", 422, NULL); /* blank title */
  action(cookie, board, suffix, "{\"op\":\"b6\",\"list\":\"1\",\"version\":1}", 400, NULL);
  snprintf(body, sizeof body, "{\"op\":\"b7\",\"list\":%lld,\"index\":-5,\"version\":1}", (long long)list);
  action(cookie, board, suffix, body, 400, NULL);
  snprintf(body, sizeof body, "{\"op\":\"b8\",\"list\":%lld,\"index\":99,\"version\":1}", (long long)list);
  action(cookie, board, suffix, body, 422, NULL); /* index past the end */
  snprintf(body, sizeof body, "{\"op\":\"b9\",\"list\":%lld,\"index\":0}", (long long)list);
  action(cookie, board, suffix, body, 400, NULL); /* no version */
  action(cookie, board, "/nothing", "{\"op\":\"b10\"}", 404, NULL);
  action(cookie, board, "/cards/12/fly", "{\"op\":\"b11\"}", 404, NULL);
  {
    char big_title[400];
    static const char pre[] = "{\"op\":\"b12\",\"title\":\"";
    memcpy(big_title, pre, sizeof pre - 1);
    memset(big_title + sizeof pre - 1, 'x', 300); /* 300 bytes: over KB_TITLE_MAX */
    memcpy(big_title + sizeof pre - 1 + 300, "\"}", 3);
    action(cookie, board, "/lists", big_title, 422, NULL);
  }
  /* a form where JSON is expected */
  {
    char path[64];
    snprintf(path, sizeof path, "/boards/%lld/lists", (long long)board);
    expect("POST", path, cookie, F_ORIGIN, "op=b13&title=x", 415, NULL);
    /* another site's page posting (CSRF): refused */
    expect("POST", path, cookie, F_JSON, "{\"op\":\"b14\",\"title\":\"x\"}", 403, NULL);
  }
  /* a body over the server's limit (64 KiB): 413 before any handler */
  big = malloc(200000);
  assert_non_null(big);
  memset(big, ' ', 200000);
  memcpy(big, "{\"op\":\"b15\",\"title\":\"x\"", 23);
  big[199999] = '}';
  {
    char path[64];
    snprintf(path, sizeof path, "/boards/%lld/lists", (long long)board);
    read_resp(send_req("POST", path, cookie, F_ORIGIN | F_JSON, big, 200000), &r);
    assert_int_equal(r.status, 413);
    h1c_response_free(&r);
  }
  free(big);
  assert_int_equal(board_version(cookie, board), v0);
}

/* Reads one SSE event name from a stream socket into ev; 1 if one came
 * before the deadline. Comments (heartbeats) are skipped. */
struct stream {
  int fd;
  char buf[8192];
  size_t len;
};

static int next_event(struct stream *s, char *ev, size_t cap, int64_t deadline) {
  for (;;) {
    char *end = strstr(s->buf, "\n\n");
    if (end != NULL) {
      size_t n = (size_t)(end + 2 - s->buf);
      char *e = strstr(s->buf, "event: ");
      int found = e != NULL && e < end;
      if (found) {
        size_t k = strcspn(e + 7, "\r\n");
        if (k + 1 > cap)
          k = cap - 1;
        memcpy(ev, e + 7, k);
        ev[k] = '\0';
      }
      memmove(s->buf, s->buf + n, s->len - n + 1);
      s->len -= n;
      if (found)
        return 1;
      continue;
    }
    if (s->len + 1 >= sizeof s->buf || !readable(s->fd, deadline))
      return 0;
    {
      ssize_t got = recv(s->fd, s->buf + s->len, sizeof s->buf - 1 - s->len, 0);
      if (got <= 0)
        return 0;
      /* chunked framing: drop the chunk-size lines crudely (hex digits + CRLF) */
      s->len += (size_t)got;
      s->buf[s->len] = '\0';
    }
    {
      /* normalise CRLF to LF so "\n\n" finds event ends */
      char *p;
      while ((p = strstr(s->buf, "\r\n")) != NULL) {
        memmove(p, p + 1, strlen(p + 1) + 1);
        s->len--;
      }
    }
  }
}

static void open_stream(struct stream *s, const char *cookie, int64_t board) {
  char path[64], ev[32];
  int64_t deadline = now_ms() + TIMEOUT_MS;
  memset(s, 0, sizeof *s);
  snprintf(path, sizeof path, "/boards/%lld/events", (long long)board);
  s->fd = send_req("GET", path, cookie, 0, NULL, 0);
  assert_true(next_event(s, ev, sizeof ev, deadline));
  assert_string_equal(ev, "hello");
}

/* Another session's change reaches an open event stream within a second. */
static void test_events(void **state) {
  char alice[64], bob[64], ev[32], body[256], suffix[64];
  struct stream s;
  json_t *b, *lists;
  int64_t board, first_list, last_list, card, version = 0, t0;
  (void)state;
  sign_in("alice", "alice-kanban", alice, sizeof alice);
  sign_in("bob", "bob-kanban", bob, sizeof bob);
  {
    h1c_response r;
    const char *p;
    expect("GET", "/boards", alice, 0, NULL, 200, &r);
    p = strstr(r.body, "href=\"/boards/");
    assert_non_null(p);
    board = atoll(p + strlen("href=\"/boards/"));
    h1c_response_free(&r);
  }
  b = board_data(bob, board);
  lists = json_object_get(b, "lists");
  assert_true(json_array_size(lists) >= 2);
  first_list = json_integer_value(json_object_get(json_array_get(lists, 0), "id"));
  last_list = json_integer_value(json_object_get(json_array_get(lists, json_array_size(lists) - 1), "id"));
  card = json_integer_value(
      json_object_get(json_array_get(json_object_get(json_array_get(lists, 0), "cards"), 0), "id"));
  assert_int_equal(card_place(b, card, NULL, &version), first_list);
  json_decref(b);

  open_stream(&s, alice, board);
  t0 = now_ms();
  snprintf(suffix, sizeof suffix, "/cards/%lld/move", (long long)card);
  snprintf(body, sizeof body, "{\"op\":\"ev1\",\"list\":%lld,\"version\":%lld}", (long long)last_list,
           (long long)version);
  action(bob, board, suffix, body, 200, NULL);
  assert_true(next_event(&s, ev, sizeof ev, t0 + 1000));
  assert_string_equal(ev, "change");
  assert_true(now_ms() - t0 <= 1000);
  b = board_data(alice, board);
  assert_int_equal(card_place(b, card, NULL, NULL), last_list);
  json_decref(b);

  /* a refused action sends no event */
  action(bob, board, suffix, body, 200, NULL); /* replay: nothing new */
  assert_false(next_event(&s, ev, sizeof ev, now_ms() + 300));
  close(s.fd);
}

/* SIGTERM with an event stream open: the server ends it and exits 0. */
/* Guessing passwords is slow: after 5 failures a name waits (1 s, doubling),
 * answered 429 with Retry-After and no hash spent, even for the right
 * password; other names are not affected, and a success forgets the
 * failures. After 20 failures from one address, every name from it waits.
 * (Runs last but one: it leaves this address with failures on record.) */
static void test_sign_in_throttle(void **state) {
  char cookie[64];
  h1c_response r;
  (void)state;
  sign_up("frank", "frank-password", cookie, sizeof cookie);
  for (int i = 0; i < 6; i++)
    expect("POST", "/signin", NULL, F_ORIGIN, "name=frank&password=guess-no-1", 401, NULL);
  expect("POST", "/signin", NULL, F_ORIGIN, "name=frank&password=frank-password", 429, &r);
  assert_true(strstr(r.head, "retry-after: 1\r\n") != NULL || strstr(r.head, "Retry-After: 1\r\n") != NULL);
  assert_non_null(strstr(r.body, "Too many failed sign-ins"));
  h1c_response_free(&r);
  sign_in("dora", "dora-password", cookie, sizeof cookie); /* another name: fine */
  usleep(1100 * 1000);
  sign_in("frank", "frank-password", cookie, sizeof cookie);
  expect("POST", "/signin", NULL, F_ORIGIN, "name=frank&password=guess-no-2", 401, NULL); /* forgotten */

  /* one address trying many names: 20 free failures in all (7 made above,
   * 2 in test_sign_up_in_out); the 21st makes it wait */
  char body[128];
  for (int i = 0; i < 12; i++) {
    snprintf(body, sizeof body, "name=ghost%d&password=whatever-%d", i, i);
    expect("POST", "/signin", NULL, F_ORIGIN, body, 401, NULL);
  }
  expect("POST", "/signin", NULL, F_ORIGIN, "name=dora&password=dora-password", 429, NULL);
  usleep(1100 * 1000);
  sign_in("dora", "dora-password", cookie, sizeof cookie);
}

static void test_stop(void **state) {
  char alice[64];
  struct stream s;
  int64_t t0;
  (void)state;
  sign_in("alice", "alice-kanban", alice, sizeof alice);
  open_stream(&s, alice, 1);
  t0 = now_ms();
  assert_int_equal(stop_server(TIMEOUT_MS), 0);
  assert_true(now_ms() - t0 < 6000);
  close(s.fd);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pages),
      cmocka_unit_test(test_sign_up_in_out),
      cmocka_unit_test(test_actions),
      cmocka_unit_test(test_membership),
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_events),
      cmocka_unit_test(test_sign_in_throttle),
      cmocka_unit_test(test_stop),
  };
  return cmocka_run_group_tests(tests, start_server, teardown_server);
}
