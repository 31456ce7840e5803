/*
 * libFuzzer harness: what the kanban server reads from a request's head —
 * the path (a board's id and view, a static file's name, its query), the
 * Cookie header(s) and the session token in them (srv_cookie,
 * auth_request_hash), Host against Origin/Referer (srv_same_origin, the
 * CSRF guard), and Content-Type (srv_content_type_is). These read the
 * request through http.h's accessors, served here by fake_req.c.
 *
 * Input: lines. The first is the path, "?query" included; each next one a
 * header "name: value" (the name lower-cased as the HTTP layer does; at
 * most FAKE_HEADERS_MAX). Headers cannot hold a line break on the wire, so
 * splitting at '\n' loses nothing real.
 *
 * Oracles: an accepted same-origin POST has a Host and an Origin (or
 * Referer) that names it; a cookie value found fits the buffer and comes
 * from a Cookie header; a session hash is only made from a well-formed
 * token (43 base64url characters) and is 64 hex digits.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "auth_session.h"
#include "fake_req.h"
#include "srv_util.h"
#include "web_page.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  if (sodium_init() < 0)
    abort();
  return 0;
}

/* GET /boards/ID[/data|/events] and GET /static/NAME, as the routes take
 * them apart. */
static void path_parts(const lith_http_req *req) {
  const char *path = lith_http_req_path(req);
  if (strncmp(path, "/boards/", 8) == 0) {
    const char *p = path + 8;
    int64_t id = 0;
    if (srv_parse_id(&p, &id)) {
      if (id < 1 || id > ((int64_t)1 << 53) || p <= path + 8)
        abort();
      (void)(strcmp(p, "/data") == 0 || strcmp(p, "/events") == 0);
    }
  } else if (strncmp(path, "/static/", 8) == 0) {
    const char *name = path + 8;
    const web_asset *a = web_asset_find(name);
    if (a != NULL && (strcmp(a->name, name) != 0 || a->data[a->len] != '\0'))
      abort();
    if (web_asset_type(name) == NULL)
      abort();
    (void)strcmp(lith_http_req_query(req), web_assets_version);
  }
}

/* The first Cookie header holding `value` (a check that srv_cookie copied
 * from one). */
static int in_cookie_header(const lith_http_req *req, const char *value) {
  size_t i;
  for (i = 0; i < req->n_headers; i++)
    if (strcmp(req->name[i], "cookie") == 0 && strstr(req->value[i], value) != NULL)
      return 1;
  return 0;
}

static void cookies(const lith_http_req *req) {
  static const char *const names[] = {AUTH_COOKIE, "a", "kanban", "kanban_session_x"};
  static const size_t caps[] = {1, 2, 8, AUTH_TOKEN_LEN + 2, 4096};
  char out[4096], hash[AUTH_HASH_LEN + 1];
  size_t i, k, n;

  for (i = 0; i < sizeof names / sizeof names[0]; i++)
    for (k = 0; k < sizeof caps / sizeof caps[0]; k++) {
      memset(out, 'Z', sizeof out);
      if (srv_cookie(req, names[i], out, caps[k])) {
        n = strlen(out);
        if (n >= caps[k] || !in_cookie_header(req, out))
          abort();
      } else if (caps[k] < sizeof out && out[caps[k]] != 'Z') {
        abort(); /* wrote past the cap */
      }
    }
  if (auth_request_hash(req, hash)) {
    char token[AUTH_TOKEN_LEN + 2];
    if (!srv_cookie(req, AUTH_COOKIE, token, sizeof token) || strlen(token) != AUTH_TOKEN_LEN)
      abort();
    for (i = 0; i < AUTH_TOKEN_LEN; i++)
      if (!isalnum((unsigned char)token[i]) && token[i] != '-' && token[i] != '_')
        abort();
    if (strlen(hash) != AUTH_HASH_LEN || strspn(hash, "0123456789abcdef") != AUTH_HASH_LEN)
      abort();
  }
}

static void origin(const lith_http_req *req) {
  const char *host = lith_http_req_header(req, "host");
  const char *o = lith_http_req_header(req, "origin");
  const char *from = o != NULL ? o : lith_http_req_header(req, "referer");
  if (srv_same_origin(req)) {
    if (host == NULL || from == NULL || strcmp(from, "null") == 0 || strcasestr(from, host) == NULL)
      abort();
  }
  (void)srv_content_type_is(req, "application/json");
  (void)srv_content_type_is(req, "application/x-www-form-urlencoded");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1), *line, *next, *q;
  lith_http_req req;
  size_t i;

  if (text == NULL)
    abort();
  memcpy(text, data, size);
  text[size] = '\0';
  memset(&req, 0, sizeof req);
  req.method = "GET";
  req.peer = "127.0.0.1:40000";
  req.body = "";

  /* The path and its query. */
  line = text;
  next = strchr(line, '\n');
  if (next != NULL)
    *next++ = '\0';
  q = strchr(line, '?');
  req.query = "";
  if (q != NULL) {
    *q = '\0';
    req.query = q + 1;
  }
  req.path = line;

  /* Headers. */
  while (next != NULL && req.n_headers < FAKE_HEADERS_MAX) {
    char *colon, *v;
    line = next;
    next = strchr(line, '\n');
    if (next != NULL)
      *next++ = '\0';
    colon = strchr(line, ':');
    v = colon != NULL ? colon + 1 : line + strlen(line);
    if (colon != NULL)
      *colon = '\0';
    while (*v == ' ' || *v == '\t')
      v++;
    for (q = line; *q != '\0'; q++)
      *q = (char)tolower((unsigned char)*q);
    req.name[req.n_headers] = line;
    req.value[req.n_headers] = v;
    req.n_headers++;
  }
  for (i = 0; i < req.n_headers; i++)
    (void)lith_http_req_header_at(&req, i, NULL, NULL);

  path_parts(&req);
  cookies(&req);
  origin(&req);
  free(text);
  return 0;
}
