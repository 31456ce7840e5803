/*
 * lithd server — routes to the databases' stores (see server.h).
 *
 * Design:
 *   - /v1/do: the body is parsed on the loop thread (bad requests never reach
 *     a store), then ONE command goes to the database's store
 *     (lithd_store_write). Its context (struct do_ctx) holds the store's
 *     request (batch, result), the HTTP handle; the handler returns
 *     LITH_HTTP_PENDING and the store's callback answers after the commit
 *     and frees the context. If the client left meanwhile, the answer
 *     returns LITH_HTTP_GONE and everything is freed just the same: the
 *     command's outcome stands.
 *   - Answers follow the recipe of sqljson.h: a committed result, a
 *     statement's own error (the command was undone alone), or an error of
 *     the transaction around it (the result must not be sent).
 *   - /v1/query: the store runs the read off the loop (lithd_store_read), so
 *     a long query never stalls the loop (and so no other connection); its
 *     callback on the loop thread answers and frees.
 *   - The bearer token, when configured, is checked before anything is read
 *     or run: a refused request changes nothing.
 *   - Every body is read with json.c (/v1/backup's too), every answer
 *     written by hand into a lithd_buf: lithd links no JSON library.
 *   - Several databases: a database's routes are one table (db_routes[],
 *     near the end of this file) that lithd_server_start registers once per
 *     database under /v1/db/NAME/ and once unprefixed for the default, each
 *     with that database's lithd_dbsrv as its argument: a handler finds its
 *     database, writer and queues in its argument, never by name. A prefix
 *     route /v1/db/ answers what none took (an unknown name: 404 naming
 *     the databases). What serves the routes lives beside: overload.c
 *     (commands on their way to a writer), metrics.c (the /metrics text),
 *     backup_http.c (/v1/backup: backups and downloads), sqljson
 *     (statements in, results out, and the SQL authorizer).
 */
#include "server.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "backup_http.h"
#include "buf.h"
#include "hrana_http.h"
#include "hrana_ws.h"
#include "json.h"
#include "jwt.h"
#include "log.h"
#include "metrics.h"
#include "pieces.h"

/* What a refusal quotes of a header the client sent, at most: the
 * message must fit REFUSAL_MAX with its words around. */
#define ECHO_MAX 200
#define REFUSAL_MAX (ECHO_MAX + 120)
/* The one Content-Type a POST may carry (parameters such as charset aside). */
#define JSON_TYPE "application/json"

/* ---- Helpers ----------------------------------------------------------- */

/* CLOCK_MONOTONIC in nanoseconds (the read timings of /metrics). */
static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Whether the `len` bytes at `item` are one of the comma-separated entries
 * of `list` (NULL: none), spaces around entries ignored, case ignored. */
static int in_list(const char *list, const char *item, size_t len) {
  while (list != NULL && *list) {
    while (*list == ' ' || *list == ',')
      list++;
    const char *end = list;
    while (*end && *end != ',')
      end++;
    const char *e = end;
    while (e > list && e[-1] == ' ')
      e--;
    if ((size_t)(e - list) == len && len > 0 && strncasecmp(list, item, len) == 0)
      return 1;
    list = end;
  }
  return 0;
}

/* A Host a token-less lithd on loopback answers: this machine by name or an
 * address (a DNS-rebinding page has a name of its own), or a name the
 * operator allowed. The port, if any, is not compared. */
static int host_ok(const lithd_server *s, const char *host) {
  char buf[256];
  size_t len;
  if (host == NULL || !*host)
    return 0;
  if (host[0] == '[') { /* [v6]:port */
    const char *close = strchr(host, ']');
    if (close == NULL)
      return 0;
    len = (size_t)(close - host - 1);
    if (len >= sizeof buf)
      return 0;
    memcpy(buf, host + 1, len);
    buf[len] = '\0';
    struct in6_addr a6;
    return inet_pton(AF_INET6, buf, &a6) == 1;
  }
  const char *colon = strchr(host, ':');
  len = colon ? (size_t)(colon - host) : strlen(host);
  if (len == 0 || len >= sizeof buf)
    return 0;
  memcpy(buf, host, len);
  buf[len] = '\0';
  struct in_addr a4;
  if (inet_pton(AF_INET, buf, &a4) == 1 || strcasecmp(buf, "localhost") == 0)
    return 1;
  return in_list(s->allow_hosts, buf, len);
}

/* Every route's gate: the token, then what a web page could make a browser
 * send. A page the operator opens may fetch() a token-less loopback lithd:
 * a request carrying an Origin not allowed is refused (403); a Host that
 * names another site is refused on a token-less loopback lithd (403: a
 * DNS-rebinding page is same-origin to the browser); and a POST must say
 * application/json (415), which a page cannot send cross-origin without a
 * preflight lithd never answers (on Hrana's routes, a POST that carries
 * Origin: lithd_admit_by_content). Answers the request when it refuses;
 * returns 1 when the request may go on. */
static void refuse_plain(lith_http_req *req, int status, const char *msg) {
  lith_http_respond_error(req, status, msg);
}

int lithd_access(const lithd_server *s, const lithd_dbsrv *d, const char *token, char *msg, size_t cap) {
  if (s->token == NULL && s->jwt_keys == NULL)
    return LITHD_ACCESS_FULL;
  if (token == NULL || token[0] == '\0') {
    snprintf(msg, cap, "a bearer token is required");
    return LITHD_ACCESS_NONE;
  }
  size_t n = strnlen(token, LITHD_JWT_MAX + 1);
  if (s->token != NULL && lith_http_equal_ct(token, n, s->token, strlen(s->token)))
    return LITHD_ACCESS_FULL;
  if (s->jwt_keys == NULL) {
    snprintf(msg, cap, "invalid token");
    return LITHD_ACCESS_NONE;
  }
  int grant = LITHD_JWT_NONE;
  if (lithd_jwt_check(s->jwt_keys, token, n, (int64_t)time(NULL), d != NULL ? d->name : NULL, &grant, msg,
                      cap) != LITHD_JWT_OK)
    return LITHD_ACCESS_NONE;
  return grant == LITHD_JWT_FULL   ? LITHD_ACCESS_FULL
         : grant == LITHD_JWT_READ ? LITHD_ACCESS_READ
                                   : LITHD_ACCESS_NONE;
}

/* The token of req's "Authorization: Bearer <token>" (blanks around it
 * dropped) into buf (cap bytes): buf, or NULL when it carries none (no
 * header, another scheme, nothing after "Bearer"). One too long for buf is
 * cut to cap - 1 bytes, which no check accepts. */
static const char *bearer_of(lith_http_req *req, char *buf, size_t cap) {
  const char *v = lith_http_req_header(req, "authorization");
  if (v == NULL)
    return NULL;
  while (*v == ' ' || *v == '\t')
    v++;
  if (strncasecmp(v, "bearer", 6) != 0 || (v[6] != ' ' && v[6] != '\t'))
    return NULL;
  v += 6;
  while (*v == ' ' || *v == '\t')
    v++;
  size_t n = strlen(v);
  while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
    n--;
  if (n == 0)
    return NULL;
  if (n >= cap)
    n = cap - 1;
  memcpy(buf, v, n);
  buf[n] = '\0';
  return buf;
}

char *lithd_bearer_dup(lith_http_req *req) {
  char buf[LITHD_JWT_MAX + 2]; /* as the gate's: one too long stays one no check accepts */
  const char *token = bearer_of(req, buf, sizeof buf);
  return token != NULL ? strdup(token) : NULL;
}

/* The gate; by_content: the route reads its body as JSON whatever its
 * Content-Type says (Hrana's, as sqld), so the type is judged only on a
 * browser's request (docs/security.md, "Web pages"). */
static int gate(lithd_server *s, const lithd_dbsrv *d, lith_http_req *req, lithd_refuse_fn refuse,
                int by_content) {
  char msg[REFUSAL_MAX];
  int access = LITHD_ACCESS_FULL;
  /* by_content 2: a WebSocket handshake, whose token may come in its first message instead */
  if ((s->token != NULL || s->jwt_keys != NULL) &&
      (by_content != 2 || lith_http_req_header(req, "authorization") != NULL)) {
    char buf[LITHD_JWT_MAX + 2]; /* one byte past the longest accepted: a longer one is refused */
    const char *token = bearer_of(req, buf, sizeof buf);
    access = lithd_access(s, d, token, msg, sizeof msg);
    if (access == LITHD_ACCESS_NONE) {
      lith_http_add_header(req, "www-authenticate",
                           token != NULL ? "Bearer realm=\"lith\", error=\"invalid_token\""
                                         : "Bearer realm=\"lith\"");
      refuse(req, 401, msg);
      return 0;
    }
  }
  const char *origin = lith_http_req_header(req, "origin");
  if (origin != NULL && !in_list(s->allow_origins, "*", 1) &&
      !in_list(s->allow_origins, origin, strlen(origin))) {
    snprintf(msg, sizeof msg, "requests from web pages are refused: Origin %.*s is not in --allow-origin",
             ECHO_MAX, origin);
    refuse(req, 403, msg);
    return 0;
  }
  /* A browser reaches TCP only: a Unix socket's client names any Host. */
  if (s->token == NULL && lith_http_req_is_loopback(req) && strcmp(lith_http_req_peer(req), "unix") != 0) {
    const char *host = lith_http_req_header(req, "host");
    if (!host_ok(s, host)) {
      snprintf(msg, sizeof msg,
               "Host %.*s is not this machine (a DNS-rebinding page?): lithd answers localhost and "
               "IP addresses, and names in --allow-host",
               ECHO_MAX, host ? host : "(none)");
      refuse(req, 403, msg);
      return 0;
    }
  }
  /* Only a browser's request can be a page's cross-site "simple" POST
   * (text/plain needs no preflight), and a browser sends Origin on every
   * POST: without one, a body is judged by its content. */
  if (strcmp(lith_http_req_method(req), "POST") == 0 && (!by_content || origin != NULL)) {
    const char *ct = lith_http_req_header(req, "content-type");
    size_t n = ct ? strcspn(ct, ";") : 0;
    while (n > 0 && ct[n - 1] == ' ')
      n--;
    if (ct == NULL || n != strlen(JSON_TYPE) || strncasecmp(ct, JSON_TYPE, n) != 0) {
      snprintf(msg, sizeof msg, "Content-Type must be " JSON_TYPE ", got %.*s", ECHO_MAX, ct ? ct : "none");
      refuse(req, 415, msg);
      return 0;
    }
  }
  return access;
}

int lithd_admit_as(lithd_server *s, const lithd_dbsrv *d, lith_http_req *req, lithd_refuse_fn refuse) {
  return gate(s, d, req, refuse, 0);
}

int lithd_admit_by_content(lithd_server *s, const lithd_dbsrv *d, lith_http_req *req,
                           lithd_refuse_fn refuse) {
  return gate(s, d, req, refuse, 1);
}

int lithd_admit_handshake(lithd_server *s, const lithd_dbsrv *d, lith_http_req *req, lithd_refuse_fn refuse) {
  return gate(s, d, req, refuse, 2);
}

static int admit(lithd_server *s, const lithd_dbsrv *d, lith_http_req *req) {
  return lithd_admit_as(s, d, req, refuse_plain);
}

/* Answer a lithd_error; on no memory a fixed 500. */
static void respond_lithd_error(lith_http_req *req, const lithd_error *e) {
  char *json = lithd_error_json(e);
  if (json == NULL) {
    lith_http_respond_error(req, 500, "out of memory");
    return;
  }
  lith_http_respond_json(req, lithd_http_status(e->code), json);
  free(json);
}

int lithd_admit(lithd_server *s, const lithd_dbsrv *d, lith_http_req *req) { return admit(s, d, req); }

void lithd_respond_error(lith_http_req *req, const lithd_error *e) { respond_lithd_error(req, e); }

/* The sqljson.h recipe, after lith_do / lith_read returned rc with `result`
 * and `errmsg` (the command's or read's message): the answer's JSON
 * (malloc'd; NULL when out of memory) and its HTTP status. */
static char *outcome_json(int rc, const lithd_result *result, const char *errmsg, int *status) {
  lithd_error e;

  if (rc == LITH_OK && result != NULL) {
    *status = 200;
  } else if (rc != LITH_OK && result != NULL && lithd_result_error(result, &e) == rc) {
    *status = lithd_http_status(rc);
  } else {
    if (rc == LITH_OK)
      rc = LITH_NOMEM; /* OK without a result: memory ran out */
    lithd_error_set(&e, rc, -1, "%s", errmsg != NULL && errmsg[0] ? errmsg : lith_errstr(rc));
    *status = lithd_http_status(rc);
    return lithd_error_json(&e);
  }
  return lithd_result_json(result);
}

/* Answers past ENCODE_ON_POOL (what their JSON will take, about) are
 * encoded on libuv's pool, not on the loop: a 384 MB JSON took the loop
 * 6 s, and every other request of every database waited. */
#define ENCODE_ON_POOL ((size_t)1 << 20)

/* budget: the answer budget json holds (lithd_result_take_budget), given
 * back by whoever frees json. */
typedef void (*answer_fn)(lithd_store_req *r, char *json, int status, size_t budget);

/* Answer json (malloc'd; taken) and the budget it holds: a large one in
 * pieces (pieces.h), holding it until sent; a small one is copied whole. */
static void respond_json_taken(lithd_server *s, lith_http_req *req, int status, char *json, size_t budget) {
  size_t len = strlen(json);
  if (len >= LITHD_PIECES_MIN) {
    lithd_send_pieces(s->loop, req, status, json, 0, len, budget);
    return;
  }
  lith_http_respond(req, status, "application/json", json, len);
  free(json);
  lithd_answer_budget_release(budget);
}

struct encode_job {
  uv_work_t work;
  lithd_store_req *r;
  answer_fn answer;
  char *json;
  int status;
};

static void encode_work(uv_work_t *w) { /* a pool thread */
  struct encode_job *j = w->data;
  j->json = outcome_json(j->r->rc, j->r->result, j->r->errmsg, &j->status);
}

static void encode_after(uv_work_t *w, int status) { /* the loop */
  struct encode_job *j = w->data;
  lithd_store_req *r = j->r;
  answer_fn answer = j->answer;
  char *json = j->json;
  int st = j->status;
  (void)status; /* cancelled only at a stop: json NULL, a 500 */
  free(j);
  answer(r, json, st, lithd_result_take_budget(r->result));
}

/* r's answer as JSON, then answer(r, json (malloc'd, NULL when out of
 * memory: the callee frees it), status): at once for a small one, after
 * the pool encoded it for a large one. */
static void encode_then(lithd_server *s, lithd_store_req *r, answer_fn answer) {
  int status = 500;
  if (lithd_result_size(r->result) > ENCODE_ON_POOL) {
    struct encode_job *j = calloc(1, sizeof *j);
    if (j != NULL) {
      j->r = r;
      j->answer = answer;
      j->status = 500;
      j->work.data = j;
      if (uv_queue_work(s->loop, &j->work, encode_work, encode_after) == 0)
        return;
      free(j);
    }
  }
  char *json = outcome_json(r->rc, r->result, r->errmsg, &status);
  answer(r, json, status, lithd_result_take_budget(r->result));
}

/* The error of a command the store would not take (lithd_store_write's rc). */
static void submit_error(lithd_error *e, int rc) {
  if (rc == LITH_QUEUE_FULL)
    lithd_error_set(e, rc, -1, "the write queue is full; retry later");
  else
    lithd_error_set(e, rc, -1, "%s", rc == LITH_CLOSED ? "lithd is shutting down" : lith_errstr(rc));
}

/* The answer format's query parameters (?rows=objects, sqljson.h) onto a
 * parsed batch; returns 0 when they are refused (answered). */
static int apply_query(lith_http_req *req, lithd_batch *b) {
  lithd_error e;
  if (lithd_batch_apply_query(b, lith_http_req_query(req), &e) == LITH_OK)
    return 1;
  respond_lithd_error(req, &e);
  return 0;
}

/* Parse the request body into a batch, or answer the error (returns NULL). */
static lithd_batch *parse_body(lithd_server *s, lith_http_req *req) {
  size_t len = 0;
  const char *body = lith_http_req_body(req, &len);
  lithd_batch *b = NULL;
  lithd_error e;
  int rc = lithd_batch_parse(body, len, &s->limits, &b, &e);
  if (rc != LITH_OK) {
    respond_lithd_error(req, &e);
    return NULL;
  }
  if (!apply_query(req, b)) {
    lithd_batch_free(b);
    return NULL;
  }
  return b;
}

/* ---- POST /v1/do ------------------------------------------------------- */

struct do_ctx {
  lithd_store_req sr; /* sr.batch, sr.result: the command and its result */
  lithd_dbsrv *d;
  lith_http_req *req;
  int64_t t0; /* lith_clock_ms at arrival, for the log */
};

static void do_ctx_free(struct do_ctx *c) {
  if (c == NULL)
    return;
  lithd_result_free(c->sr.result);
  lithd_batch_free(c->sr.batch);
  free(c);
}

/* Why a command failed: 5xx at warn, 4xx at debug, with the message (every
 * request also gets its access line at debug: on_access). */
static void log_answer(lith_http_req *req, int status, int64_t t0, const char *errmsg) {
  int level = status >= 500 ? LITHD_LOG_WARN : LITHD_LOG_DEBUG;
  if (status < 400 || !lithd_log_enabled(level))
    return;
  lithd_log(level, "%s %s %d %" PRId64 " ms%s%s", lith_http_req_method(req), lith_http_req_path(req), status,
            lith_clock_ms() - t0, status >= 400 && errmsg != NULL && errmsg[0] ? ": " : "",
            status >= 400 && errmsg != NULL ? errmsg : "");
}

static void do_answer(lithd_store_req *r, char *json, int status, size_t budget) {
  struct do_ctx *c = r->data;
  /* GONE (the client left) releases the handle just the same. */
  if (json == NULL) {
    lith_http_respond_error(c->req, 500, "out of memory");
    lithd_answer_budget_release(budget);
  } else {
    log_answer(c->req, status, c->t0, r->rc != LITH_OK ? r->errmsg : NULL);
    if (r->rc == LITH_QUEUE_FULL)
      lith_http_add_header(c->req, "retry-after", "1");
    respond_json_taken(c->d->srv, c->req, status, json, budget);
    json = NULL;
  }
  free(json);
  do_ctx_free(c);
}

static void do_done(lithd_store_req *r) {
  struct do_ctx *c = r->data;
  encode_then(c->d->srv, r, do_answer);
}

/* Answer a command the store would not take (rc from lithd_store_write)
 * and free c. */
static void do_refuse(struct do_ctx *c, int rc) {
  lithd_error e;
  submit_error(&e, rc);
  if (rc == LITH_QUEUE_FULL)
    lith_http_add_header(c->req, "retry-after", "1");
  log_answer(c->req, lithd_http_status(rc), c->t0, e.message);
  respond_lithd_error(c->req, &e);
  do_ctx_free(c);
}

/* Send c (its batch parsed) to the store, or answer why not. Returns the
 * handler's return value. */
static int do_submit(lithd_dbsrv *d, struct do_ctx *c) {
  size_t len = 0;
  int rc;
  lith_http_req_body(c->req, &len);
  c->sr.cb = do_done;
  c->sr.data = c;
  c->sr.http = c->req;
  c->sr.bytes = len + sizeof *c;
  rc = lithd_store_write(d->store, &c->sr);
  if (rc == LITH_OK)
    return LITH_HTTP_PENDING; /* c now belongs to do_done */
  do_refuse(c, rc);
  return LITH_HTTP_DONE;
}

static struct do_ctx *do_ctx_new(lithd_dbsrv *d, lith_http_req *req) {
  struct do_ctx *c = calloc(1, sizeof *c);
  if (c == NULL) {
    lith_http_respond_error(req, 500, "out of memory");
    return NULL;
  }
  c->d = d;
  c->req = req;
  c->t0 = lith_clock_ms();
  return c;
}

/* Refuse raw SQL under --only-named; returns 1 if refused (answered). */
static int refuse_raw(lithd_dbsrv *d, lith_http_req *req) {
  lithd_error e;
  if (!d->srv->only_named)
    return 0;
  if (strncmp(lith_http_req_path(req), "/v1/db/", 7) == 0)
    lithd_error_set(&e, LITHD_FORBIDDEN, -1,
                    "this lithd runs only named commands (--only-named): POST /v1/db/%s/commands/NAME",
                    d->name);
  else
    lithd_error_set(&e, LITHD_FORBIDDEN, -1,
                    "this lithd runs only named commands (--only-named): POST /v1/commands/NAME");
  respond_lithd_error(req, &e);
  return 1;
}

static int h_do(lith_http_req *req, void *arg) {
  lithd_dbsrv *d = arg;
  lithd_server *s = d->srv;
  struct do_ctx *c;
  int access = admit(s, d, req);

  if (!access)
    return LITH_HTTP_DONE;
  if (refuse_raw(d, req))
    return LITH_HTTP_DONE;
  if ((c = do_ctx_new(d, req)) == NULL)
    return LITH_HTTP_DONE;
  c->sr.may_write = access == LITHD_ACCESS_FULL;
  c->sr.batch = parse_body(s, req);
  if (c->sr.batch == NULL) {
    do_ctx_free(c);
    return LITH_HTTP_DONE;
  }
  return do_submit(d, c);
}

/* ---- POST /v1/commands/NAME, GET /v1/commands --------------------------- */

#define COMMANDS_PREFIX "/v1/commands/"
/* What every database's routes begin with: DB_PREFIX NAME "/". */
#define DB_PREFIX "/v1/db/"

/* The command's name in the path: after /v1/commands/ or after
 * /v1/db/NAME/commands/ (the route took the request, so the path has
 * that shape; names hold no '/'). */
static const char *command_name(const lithd_dbsrv *d, const char *path) {
  if (strncmp(path, DB_PREFIX, strlen(DB_PREFIX)) == 0)
    return path + strlen(DB_PREFIX) + strlen(d->name) + strlen("/commands/");
  return path + strlen(COMMANDS_PREFIX);
}

static int h_command(lith_http_req *req, void *arg) {
  lithd_dbsrv *d = arg;
  lithd_server *s = d->srv;
  const char *name = command_name(d, lith_http_req_path(req));
  size_t len = 0;
  const char *body = lith_http_req_body(req, &len);
  struct do_ctx *c;
  lithd_error e;
  int access = admit(s, d, req);

  if (!access)
    return LITH_HTTP_DONE;
  if ((c = do_ctx_new(d, req)) == NULL)
    return LITH_HTTP_DONE;
  c->sr.may_write = access == LITHD_ACCESS_FULL;
  if (lithd_commands_batch(d->commands, name, body, len, &s->limits, &c->sr.batch, &e) != LITH_OK) {
    respond_lithd_error(req, &e);
    do_ctx_free(c);
    return LITH_HTTP_DONE;
  }
  if (!apply_query(req, c->sr.batch)) {
    do_ctx_free(c);
    return LITH_HTTP_DONE;
  }
  return do_submit(d, c);
}

static int h_commands(lith_http_req *req, void *arg) {
  lithd_dbsrv *d = arg;
  char *json;
  if (!admit(d->srv, d, req))
    return LITH_HTTP_DONE;
  json = lithd_commands_json(d->commands);
  if (json == NULL) {
    lith_http_respond_error(req, 500, "out of memory");
    return LITH_HTTP_DONE;
  }
  lith_http_respond_json(req, 200, json);
  free(json);
  return LITH_HTTP_DONE;
}

/* ---- POST /v1/query ---------------------------------------------------- */

/* The store runs the read on libuv's thread pool (lithd_store_read): it
 * may take as long as the query does, and the loop thread must keep
 * serving other connections meanwhile. The context is the store's from
 * lithd_store_read until query_after, which answers (or, if the client left,
 * gets LITH_HTTP_GONE and releases the handle just the same) and frees it.
 *
 * The pool is the process's, every database's (main.c sizes it (readers +
 * 1) x databases). A read whose database has every reader busy would block
 * a pool thread inside lith_read until one is free, and enough of them
 * would hold every thread, so that another database's reads waited behind
 * them. So each database sends at most its readers' worth of reads to the
 * pool (reads_max); the rest wait on the loop in its own FIFO (reads_head),
 * and the end of one of its reads starts the next. One database's slow
 * reads then never take another's threads. */
struct lithd_query {
  lithd_read rd; /* rd.sr.batch, rd.sr.result */
  lith_http_req *req;
};

static void query_ctx_free(struct lithd_query *q) {
  if (q == NULL)
    return;
  lithd_result_free(q->rd.sr.result);
  lithd_batch_free(q->rd.sr.batch);
  free(q);
}

static void read_after(lithd_store_req *r);

/* Send rd to the store: 0, or the store's refusal (rd untouched). */
static int read_start(lithd_read *rd) {
  lithd_dbsrv *d = rd->d;
  int rc;
  d->reads_running++;
  rd->sr.cb = read_after;
  rd->sr.data = rd;
  if ((rc = lithd_store_read(d->store, &rd->sr)) == LITH_OK)
    return 0; /* rd now belongs to read_after */
  d->reads_running--;
  return rc;
}

/* rd failed before it ran: its done callback with rc. */
static void read_refused(lithd_read *rd, int rc, const char *why) {
  rd->sr.rc = rc;
  snprintf(rd->sr.errmsg, sizeof rd->sr.errmsg, "%s", why);
  rd->done(rd);
}

/* Start what waits in d's FIFO while d has readers to spare; a read whose
 * client left is not run. */
static void read_next(lithd_dbsrv *d) {
  while (d->reads_head != NULL && d->reads_running < d->reads_max) {
    lithd_read *rd = d->reads_head;
    d->reads_head = rd->next;
    if (d->reads_head == NULL)
      d->reads_tail = NULL;
    lithd_store_readers_wanted(d->store, -1);
    if (rd->sr.http != NULL && lith_http_is_gone(rd->sr.http)) {
      read_refused(rd, LITH_CLOSED, "the client left");
      continue;
    }
    int rc = read_start(rd);
    if (rc != 0)
      read_refused(rd, rc, rc == LITH_CLOSED ? "lithd is shutting down" : "cannot queue the read");
  }
}

static void read_after(lithd_store_req *r) { /* the loop thread */
  lithd_read *rd = r->data;
  lithd_dbsrv *d = rd->d;
  if (r->t_start_ns != 0) /* it ran (not cancelled at a stop) */
    lithd_metrics_read(&d->metrics, r->t_start_ns - rd->t_submit, r->t_end_ns - r->t_start_ns,
                       r->rc != LITH_OK);
  d->reads_running--;
  rd->done(rd); /* rd may be gone after this */
  if (d->reads_head != NULL)
    read_next(d);
}

int lithd_read_submit(lithd_dbsrv *d, lithd_read *rd) {
  rd->d = d;
  rd->next = NULL;
  rd->t_submit = now_ns();
  if (d->reads_running >= d->reads_max || d->reads_head != NULL) {
    /* d's readers are all busy: wait in line, on the loop */
    if (d->reads_tail != NULL)
      d->reads_tail->next = rd;
    else
      d->reads_head = rd;
    d->reads_tail = rd;
    lithd_store_readers_wanted(d->store, 1); /* an idle read transaction gives its reader up now */
    return 0;
  }
  return read_start(rd);
}

int lithd_read_slot_take(lithd_dbsrv *d) {
  /* one reader kept for the other reads, unless there is only one: a read
   * transaction then takes it (queries wait; the writer never does) */
  if (d->reads_max <= (d->metrics.readers > 1 ? 1 : 0))
    return 0;
  d->reads_max--;
  return 1;
}

void lithd_read_slot_give(lithd_dbsrv *d) {
  d->reads_max++;
  read_next(d);
}

static void query_answer(lithd_store_req *r, char *json, int status, size_t budget) {
  struct lithd_query *q = r->data;
  if (json == NULL) {
    lith_http_respond_error(q->req, 500, "out of memory");
    lithd_answer_budget_release(budget);
  } else {
    respond_json_taken(q->rd.d->srv, q->req, status, json, budget);
  }
  query_ctx_free(q);
}

static void query_done(lithd_read *rd) {
  struct lithd_query *q = (struct lithd_query *)rd;
  if (rd->sr.result == NULL && rd->sr.t_start_ns == 0 && rd->sr.rc != LITH_OK) { /* never ran */
    lith_http_respond_error(q->req, rd->sr.rc == LITH_CLOSED ? 503 : 500, rd->sr.errmsg);
    query_ctx_free(q);
    return;
  }
  rd->sr.data = q; /* what query_answer finds */
  encode_then(rd->d->srv, &rd->sr, query_answer);
}

static int h_query(lith_http_req *req, void *arg) {
  lithd_dbsrv *d = arg;
  lithd_server *s = d->srv;
  struct lithd_query *q = NULL;
  int rc;

  if (!admit(s, d, req))
    return LITH_HTTP_DONE;
  q = calloc(1, sizeof *q);
  if (q == NULL) {
    lith_http_respond_error(req, 500, "out of memory");
    return LITH_HTTP_DONE;
  }
  q->req = req;
  q->rd.sr.batch = parse_body(s, req);
  if (q->rd.sr.batch == NULL)
    goto done;
  q->rd.sr.http = req;
  q->rd.done = query_done;
  if ((rc = lithd_read_submit(d, &q->rd)) == 0)
    return LITH_HTTP_PENDING;
  lith_http_respond_error(req, rc == LITH_CLOSED ? 503 : 500,
                          rc == LITH_CLOSED ? "lithd is shutting down" : "cannot queue the query");
done:
  query_ctx_free(q);
  return LITH_HTTP_DONE;
}

/* ---- POST /v1/batch ---------------------------------------------------- */

/* {"commands": [{"statements": [...]}, ...]}: every command is checked first
 * (one bad command refuses the whole request, 4xx, and nothing runs), then
 * each is submitted as its own lith command (its own savepoint), all at
 * once, so they usually share one transaction. Each callback turns its
 * command's outcome into that command's entry; the last one answers
 *   {"results": [{"results": [...]} | {"error": {...}}, ...]}
 * with 200, in the order of the request. A command the queue refused gets
 * its error entry at once; the others still run. */
struct batch_ctx;

struct batch_item {
  lithd_store_req sr; /* sr.batch, sr.result: the command and its result */
  struct batch_ctx *owner;
  char *json;    /* this command's entry, once known */
  size_t budget; /* of the answer budget, json holds */
};

struct batch_ctx {
  lithd_dbsrv *d;
  lith_http_req *req;
  int64_t t0;
  _Atomic size_t result_bytes; /* every command's together: max_result_bytes bounds the request */
  size_t n;
  size_t outstanding; /* submitted, callback not run yet */
  struct batch_item *items;
};

static void batch_ctx_free(struct batch_ctx *b) {
  size_t i;
  if (b == NULL)
    return;
  for (i = 0; b->items != NULL && i < b->n; i++) {
    lithd_result_free(b->items[i].sr.result);
    lithd_batch_free(b->items[i].sr.batch);
    free(b->items[i].json);
    lithd_answer_budget_release(b->items[i].budget);
  }
  free(b->items);
  free(b);
}

/* Answer with every entry, then free b. */
static void batch_finish(struct batch_ctx *b) {
  size_t i, len = sizeof "{\"results\":[]}", budget = 0;
  char *out, *p;

  for (i = 0; i < b->n; i++) {
    if (b->items[i].json == NULL) {
      lith_http_respond_error(b->req, 500, "out of memory");
      batch_ctx_free(b);
      return;
    }
    len += strlen(b->items[i].json) + 1;
  }
  out = malloc(len);
  if (out == NULL) {
    lith_http_respond_error(b->req, 500, "out of memory");
    batch_ctx_free(b);
    return;
  }
  p = out;
  p += sprintf(p, "{\"results\":[");
  for (i = 0; i < b->n; i++) {
    p += sprintf(p, "%s%s", i > 0 ? "," : "", b->items[i].json);
    budget += b->items[i].budget; /* out holds it now */
    b->items[i].budget = 0;
  }
  sprintf(p, "]}");
  respond_json_taken(b->d->srv, b->req, 200, out, budget); /* GONE releases it just the same */
  batch_ctx_free(b);
}

static void batch_item_done(struct batch_item *it, char *json, size_t budget) {
  struct batch_ctx *b = it->owner;
  it->json = json;
  it->budget = budget;
  lithd_result_free(it->sr.result);
  it->sr.result = NULL;
  lithd_batch_free(it->sr.batch);
  it->sr.batch = NULL;
  if (--b->outstanding == 0) {
    log_answer(b->req, 200, b->t0, NULL);
    batch_finish(b);
  }
}

static void batch_answer(lithd_store_req *r, char *json, int status, size_t budget) {
  (void)status; /* each command's entry; the request answers 200 */
  batch_item_done(r->data, json, budget);
}

static void batch_done(lithd_store_req *r) {
  struct batch_item *it = r->data;
  encode_then(it->owner->d->srv, r, batch_answer);
}

/* Split the body into commands and parse each; returns LITH_OK or an error
 * in *e (nothing submitted). */
static int batch_parse(lithd_server *s, const char *body, size_t len, struct batch_ctx *b, lithd_error *e) {
  lithd_arena tmp = {0};
  lj_value *root = NULL;
  const lj_value *cmds;
  lj_error jerr = {0, 0, ""};
  size_t i;
  int total = 0;
  int rc = LITH_OK;

  if (lj_parse(&tmp, body, len, &root, &jerr) != 0) {
    rc = lithd_error_set(e, LITHD_BAD_REQUEST, -1, "invalid JSON at line %d column %d: %s", jerr.line,
                         jerr.column, jerr.text);
    goto out;
  }
  cmds = lj_get(root, "commands");
  if (root->type != LJ_OBJECT || root->n != 1 || cmds == NULL || cmds->type != LJ_ARRAY) {
    rc = lithd_error_set(e, LITHD_BAD_REQUEST, -1,
                         "the body must be {\"commands\": [{\"statements\": [...]}, ...]}");
    goto out;
  }
  b->n = cmds->n;
  if (b->n == 0) {
    rc = lithd_error_set(e, LITHD_BAD_REQUEST, -1, "\"commands\" is empty");
    goto out;
  }
  if (b->n > (size_t)s->limits.max_statements) {
    rc = lithd_error_set(e, LITHD_TOO_LARGE, -1, "%zu commands; at most %d", b->n, s->limits.max_statements);
    goto out;
  }
  b->items = calloc(b->n, sizeof *b->items);
  if (b->items == NULL) {
    rc = lithd_error_set(e, LITH_NOMEM, -1, "out of memory");
    goto out;
  }
  for (i = 0; i < b->n; i++) {
    const lj_value *c = cmds->u.items[i];
    lithd_error ce;

    b->items[i].owner = b;
    if (c->type != LJ_OBJECT) {
      rc = lithd_error_set(e, LITHD_BAD_REQUEST, -1, "command %zu: not an object", i);
      goto out;
    }
    rc = lithd_batch_from_value(c, &s->limits, &b->items[i].sr.batch, &ce);
    if (rc != LITH_OK) {
      lithd_error_set(e, rc, ce.statement, "command %zu: %s", i, ce.message);
      goto out;
    }
    total += lithd_batch_count(b->items[i].sr.batch);
    if (total > s->limits.max_statements) {
      rc = lithd_error_set(e, LITHD_TOO_LARGE, -1, "more than %d statements in the batch",
                           s->limits.max_statements);
      goto out;
    }
  }
out:
  lithd_arena_free(&tmp);
  return rc;
}

static int h_batch(lith_http_req *req, void *arg) {
  lithd_dbsrv *d = arg;
  lithd_server *s = d->srv;
  struct batch_ctx *b;
  size_t len = 0, i;
  const char *body;
  lithd_error e;
  int access = admit(s, d, req);

  if (!access)
    return LITH_HTTP_DONE;
  if (refuse_raw(d, req))
    return LITH_HTTP_DONE;
  b = calloc(1, sizeof *b);
  if (b == NULL) {
    lith_http_respond_error(req, 500, "out of memory");
    return LITH_HTTP_DONE;
  }
  b->d = d;
  b->req = req;
  b->t0 = lith_clock_ms();
  body = lith_http_req_body(req, &len);
  if (batch_parse(s, body, len, b, &e) != LITH_OK) {
    respond_lithd_error(req, &e);
    batch_ctx_free(b);
    return LITH_HTTP_DONE;
  }
  for (i = 0; i < b->n; i++)
    if (!apply_query(req, b->items[i].sr.batch)) {
      batch_ctx_free(b);
      return LITH_HTTP_DONE;
    }
  for (i = 0; i < b->n; i++) /* one answer: one bound on its bytes, not one per command */
    lithd_batch_share_result_bytes(b->items[i].sr.batch, &b->result_bytes);
  /* Every item counts as outstanding until its callback or refusal ran;
   * one extra count held here keeps b alive through this loop. */
  b->outstanding = b->n + 1;
  for (i = 0; i < b->n; i++) {
    struct batch_item *it = &b->items[i];
    int rc;
    it->sr.cb = batch_done;
    it->sr.data = it;
    it->sr.http = req;
    it->sr.bytes = len / b->n + sizeof *it;
    it->sr.may_write = access == LITHD_ACCESS_FULL;
    rc = lithd_store_write(d->store, &it->sr);
    if (rc != LITH_OK) {
      submit_error(&e, rc);
      it->json = lithd_error_json(&e);
      b->outstanding--;
    }
  }
  if (--b->outstanding > 0)
    return LITH_HTTP_PENDING; /* b belongs to the callbacks */
  batch_finish(b);
  return LITH_HTTP_DONE;
}

/* ---- GET /v1/stats, GET /healthz --------------------------------------- */

static int h_stats(lith_http_req *req, void *arg) {
  lithd_dbsrv *d = arg;
  char *json;
  if (!admit(d->srv, d, req))
    return LITH_HTTP_DONE;
  json = lithd_store_stats_json(d->store);
  if (json == NULL)
    lith_http_respond_error(req, 500, "out of memory");
  else
    lith_http_respond_json(req, 200, json);
  free(json);
  return LITH_HTTP_DONE;
}

static int h_healthz(lith_http_req *req, void *arg) {
  lith_http_respond_json(req, 200, "{\"ok\":true}");
  return LITH_HTTP_DONE;
}

/* GET /health and GET /version as sqld answers them (a load balancer's
 * or a client's probe ported from sqld): 200 with no body; 200 with the
 * name and version as text. Ungated, as /healthz: they tell nothing of
 * the data. */
static int h_health(lith_http_req *req, void *arg) {
  (void)arg;
  lith_http_respond(req, 200, "text/plain", "", 0);
  return LITH_HTTP_DONE;
}

static int h_version(lith_http_req *req, void *arg) {
  (void)arg;
  static const char v[] = "lithd " LITH_VERSION;
  lith_http_respond(req, 200, "text/plain", v, sizeof v - 1);
  return LITH_HTTP_DONE;
}

/* ---- GET /metrics (metrics.h) -------------------------------------------- */

/* Each database on a dqlite cluster: who leads, from its store (store.h),
 * into its metrics (metrics.h: lithd_metrics_cluster). 0, or -1 out of
 * memory. */
static int cluster_stats(lithd_server *s) {
  lithd_store_stats *st = NULL;
  for (size_t i = 0; i < s->n_dbs; i++) {
    lithd_dbsrv *d = s->dbs[i];
    lithd_metrics_cluster *c = &d->metrics.cluster;
    if (d->db != NULL || d->store == NULL)
      continue;                                          /* a local file: lith's own figures */
    if (st == NULL && (st = malloc(sizeof *st)) == NULL) /* ~3.5 KiB: not on the stack */
      return -1;
    lithd_store_stats_get(d->store, st);
    c->on = 1;
    snprintf(c->leader, sizeof c->leader, "%s", st->leader);
    c->leader_id = st->leader_id;
    c->failovers = st->failovers;
    c->reruns = st->reruns;
    c->failover_wait_ms = st->failover_wait_ms;
  }
  free(st);
  return 0;
}

static int h_metrics(lith_http_req *req, void *arg) {
  lithd_server *s = arg;
  lithd_buf b = {0};
  size_t len;
  char *text;

  if (!admit(s, NULL, req))
    return LITH_HTTP_DONE;
  if (cluster_stats(s) != 0) {
    lith_http_respond_error(req, 500, "out of memory");
    return LITH_HTTP_DONE;
  }
  lithd_metrics_write(&b, &s->metrics);
  len = b.len;
  text = lithd_buf_finish(&b);
  if (text == NULL) {
    lith_http_respond_error(req, 500, "out of memory");
    return LITH_HTTP_DONE;
  }
  lith_http_respond(req, 200, LITHD_METRICS_CONTENT_TYPE, text, len);
  free(text);
  return LITH_HTTP_DONE;
}

/* ---- Several databases: names the routes do not know ------------------- */

/* The routes of one database, after "/v1/" (the default's) or after
 * "/v1/db/NAME/"; server.h says what each does. */
static const struct route {
  const char *method;
  const char *path;
  int match; /* LITH_HTTP_EXACT, or LITH_HTTP_PREFIX: the path begins with it */
  lith_http_handler handler;
} db_routes[] = {
    {"POST", "do", LITH_HTTP_EXACT, h_do},
    {"POST", "batch", LITH_HTTP_EXACT, h_batch},
    {"POST", "query", LITH_HTTP_EXACT, h_query},
    {"POST", "commands/", LITH_HTTP_PREFIX, h_command},
    {"GET", "commands", LITH_HTTP_EXACT, h_commands},
    {"POST", "backup", LITH_HTTP_EXACT, lithd_backup_post},
    {"GET", "backup", LITH_HTTP_EXACT, lithd_backup_get},
    {"GET", "stats", LITH_HTTP_EXACT, h_stats},
};
#define N_DB_ROUTES (sizeof db_routes / sizeof db_routes[0])

/* Hrana's (hrana_http.h): under /v1/db/NAME/ and, for the default, at the
 * root, where libSQL's clients look. */
static const struct route hrana_routes[] = {
    {"GET", "v2", LITH_HTTP_EXACT, lithd_hrana_get},
    {"GET", "v3", LITH_HTTP_EXACT, lithd_hrana_get},
    {"POST", "v2/pipeline", LITH_HTTP_EXACT, lithd_hrana_post},
    {"POST", "v3/pipeline", LITH_HTTP_EXACT, lithd_hrana_post},
    {"POST", "v3/cursor", LITH_HTTP_EXACT, lithd_hrana_post},
    {"GET", "", LITH_HTTP_EXACT, lithd_hrana_ws}, /* ws:// (hrana_ws.h) */
};
#define N_HRANA_ROUTES (sizeof hrana_routes / sizeof hrana_routes[0])

/* The databases' names, ", "-separated, into buf (cut if too long). */
static void db_names(const lithd_server *s, char *buf, size_t cap) {
  size_t n = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < s->n_dbs && n + 1 < cap; i++) {
    int w = snprintf(buf + n, cap - n, "%s%s", i > 0 ? ", " : "", s->dbs[i]->name);
    if (w < 0)
      break;
    n += (size_t)w;
  }
}

/* GET or POST /v1/db/... that no database's route took: an unknown NAME
 * (404, naming the databases), or a known one with a path none of its
 * routes has (404) or has for another method (405 with Allow, as the
 * router answers for the unprefixed routes). Behind the gate: the names
 * are not told to whoever lacks the token. */
static int h_db_unknown(lith_http_req *req, void *arg) {
  lithd_server *s = arg;
  const char *path = lith_http_req_path(req), *name = path + strlen(DB_PREFIX);
  size_t len = strcspn(name, "/");
  char names[512], msg[REFUSAL_MAX + 512], allow[64] = "";
  const lithd_dbsrv *d = NULL;

  if (!admit(s, NULL, req))
    return LITH_HTTP_DONE;
  for (size_t i = 0; i < s->n_dbs && d == NULL; i++)
    if (strlen(s->dbs[i]->name) == len && strncmp(s->dbs[i]->name, name, len) == 0)
      d = s->dbs[i];
  db_names(s, names, sizeof names);
  if (d == NULL) {
    snprintf(msg, sizeof msg, "no database \"%.*s\" here; this lithd serves: %s (/v1/db/NAME/do, ...)",
             len > ECHO_MAX ? ECHO_MAX : (int)len, name, names);
    lith_http_respond_error(req, 404, msg);
    return LITH_HTTP_DONE;
  }
  if (name[len] == '/') {
    const char *rest = name + len + 1;
    for (size_t i = 0; i < N_DB_ROUTES; i++) {
      const struct route *r = &db_routes[i];
      int hit = r->match == LITH_HTTP_PREFIX ? strncmp(rest, r->path, strlen(r->path)) == 0
                                             : strcmp(rest, r->path) == 0;
      if (hit && strstr(allow, r->method) == NULL)
        snprintf(allow + strlen(allow), sizeof allow - strlen(allow), "%s%s", allow[0] ? ", " : "",
                 r->method);
    }
  }
  if (allow[0] != '\0') {
    if (strstr(allow, "GET") != NULL)
      snprintf(allow + strlen(allow), sizeof allow - strlen(allow), ", HEAD");
    lith_http_add_header(req, "allow", allow);
    snprintf(msg, sizeof msg, "%s is not allowed on %.*s", lith_http_req_method(req), ECHO_MAX, path);
    lith_http_respond_error(req, 405, msg);
  } else {
    snprintf(msg, sizeof msg,
             "no route %.*s; a database's routes: do, query, batch, commands, commands/NAME, backup, "
             "stats under /v1/db/%s/",
             ECHO_MAX, path, d->name);
    lith_http_respond_error(req, 404, msg);
  }
  return LITH_HTTP_DONE;
}

/* /v1/do, /v1/query, ... when several databases are served and none is
 * the default: which one is meant cannot be guessed. */
static int h_no_default(lith_http_req *req, void *arg) {
  lithd_server *s = arg;
  char names[512], msg[REFUSAL_MAX + 512];
  const char *path = lith_http_req_path(req);

  if (!admit(s, NULL, req))
    return LITH_HTTP_DONE;
  db_names(s, names, sizeof names);
  snprintf(msg, sizeof msg,
           "this lithd serves several databases (%s) and none is the default: use /v1/db/NAME/%.*s, or "
           "start lithd with --default NAME",
           names, ECHO_MAX, path + strlen("/v1/"));
  lith_http_respond_error(req, 404, msg);
  return LITH_HTTP_DONE;
}

/* ---- Routes ------------------------------------------------------------ */

/* The HTTP layer's report of a finished request (from inside h2o: no
 * lith_http call here): its access line and its count for /metrics. */
static void on_access(const lith_http_access *a, void *arg) {
  lithd_server *s = arg;
  lithd_metrics_response(&s->metrics, a->route, a->status);
  lithd_log_request(a->method, a->path, a->status, a->duration_us, a->bytes, a->peer);
}

/* Route method, the path printed from fmt, to fn with arg; the path is
 * kept in s->paths (the metrics' labels). */
static int add_route(lithd_server *s, const char *method, int match, lith_http_handler fn, void *arg,
                     const char *fmt, const char *a, const char *b) {
  size_t n = strlen(fmt) + strlen(a) + strlen(b) + 1;
  char *path = malloc(n);
  if (path == NULL)
    return LITH_HTTP_NOMEM;
  snprintf(path, n, fmt, a, b);
  s->paths[s->n_paths++] = path;
  return lith_http_route(s->http, method, path, match, fn, arg);
}

int lithd_server_start(lithd_server *s) {
  lithd_metrics *m = &s->metrics;
  const lithd_metrics_db **mdbs;
  size_t i, k;
  int rc;

  /* every database's routes, the default's, 4 global (/metrics, /healthz,
   * /health, /version), 2 for /v1/db/ */
  s->paths = calloc((s->n_dbs + 1) * (N_DB_ROUTES + N_HRANA_ROUTES) + 6, sizeof *s->paths);
  mdbs = calloc(s->n_dbs, sizeof *mdbs);
  m->dbs = mdbs;
  m->n_dbs = s->n_dbs;
  if (s->paths == NULL || mdbs == NULL)
    return LITH_HTTP_NOMEM;
  for (i = 0; i < s->n_dbs; i++) {
    lithd_dbsrv *d = s->dbs[i];
    d->srv = s;
    d->metrics.name = d->name;
    d->metrics.db = d->db; /* NULL without a local file: those series read 0 */
    d->reads_max = d->metrics.readers > 0 ? d->metrics.readers : 1;
    mdbs[i] = &d->metrics;
    for (k = 0; k < N_DB_ROUTES; k++) {
      const struct route *r = &db_routes[k];
      rc = add_route(s, r->method, r->match, r->handler, d, DB_PREFIX "%s/%s", d->name, r->path);
      if (rc != LITH_HTTP_OK)
        return rc;
    }
    for (k = 0; k < N_HRANA_ROUTES; k++) {
      const struct route *r = &hrana_routes[k];
      if ((rc = add_route(s, r->method, r->match, r->handler, d, DB_PREFIX "%s/%s", d->name, r->path)) !=
          LITH_HTTP_OK)
        return rc;
    }
  }
  for (k = 0; k < N_HRANA_ROUTES; k++) {
    const struct route *r = &hrana_routes[k];
    if (s->dflt != NULL)
      rc = add_route(s, r->method, r->match, r->handler, s->dflt, "/%s%s", r->path, "");
    else
      rc = add_route(s, r->method, r->match, h_no_default, s, "/%s%s", r->path, "");
    if (rc != LITH_HTTP_OK)
      return rc;
  }
  if ((rc = lithd_hrana_start(s)) != LITH_HTTP_OK)
    return rc;
  for (k = 0; k < N_DB_ROUTES; k++) {
    const struct route *r = &db_routes[k];
    if (s->dflt != NULL)
      rc = add_route(s, r->method, r->match, r->handler, s->dflt, "/v1/%s%s", r->path, "");
    else
      rc = add_route(s, r->method, r->match, h_no_default, s, "/v1/%s%s", r->path, "");
    if (rc != LITH_HTTP_OK)
      return rc;
  }
  if ((rc = add_route(s, "GET", LITH_HTTP_PREFIX, h_db_unknown, s, DB_PREFIX "%s%s", "", "")) !=
          LITH_HTTP_OK ||
      (rc = add_route(s, "POST", LITH_HTTP_PREFIX, h_db_unknown, s, DB_PREFIX "%s%s", "", "")) !=
          LITH_HTTP_OK ||
      (rc = add_route(s, "GET", LITH_HTTP_EXACT, h_metrics, s, "/metrics%s%s", "", "")) != LITH_HTTP_OK ||
      (rc = add_route(s, "GET", LITH_HTTP_EXACT, h_healthz, s, "/healthz%s%s", "", "")) != LITH_HTTP_OK ||
      (rc = add_route(s, "GET", LITH_HTTP_EXACT, h_health, s, "/health%s%s", "", "")) != LITH_HTTP_OK ||
      (rc = add_route(s, "GET", LITH_HTTP_EXACT, h_version, s, "/version%s%s", "", "")) != LITH_HTTP_OK)
    return rc;
  if (lithd_metrics_init(m, (const char *const *)s->paths, s->n_paths) != 0)
    return LITH_HTTP_NOMEM;
  m->http = s->http;
  lith_http_on_access(s->http, on_access, s);
  return LITH_HTTP_OK;
}

void lithd_server_stop(lithd_server *s) {
  lithd_hrana_stop(s);
  for (size_t i = 0; i < s->n_dbs; i++)
    lithd_store_stop(s->dbs[i]->store);
}

void lithd_server_free(lithd_server *s) {
  lithd_hrana_free(s);
  lithd_metrics_free(&s->metrics);
  free((void *)s->metrics.dbs);
  s->metrics.dbs = NULL;
  for (size_t i = 0; i < s->n_paths; i++)
    free(s->paths[i]);
  free(s->paths);
  s->paths = NULL;
  s->n_paths = 0;
}
