/*
 * lithd server — routes to lith (see server.h).
 *
 * Design:
 *   - /v1/do: the body is parsed on the loop thread (bad requests never reach
 *     the writer), then ONE command is submitted through the lith_uv bridge.
 *     Its context (struct do_ctx) holds the bridge request, the HTTP handle,
 *     the batch and the result; the command may run more than once, and
 *     lithd_batch_run frees the previous run's result each time. The handler
 *     returns LITH_HTTP_PENDING; the bridge callback answers after the batch
 *     committed and frees the context. If the client left meanwhile, the
 *     answer returns LITH_HTTP_GONE and everything is freed just the same:
 *     the command's outcome stands.
 *   - Answers follow the recipe of sqljson.h: a committed result, a
 *     statement's own error (the command was undone alone), or an error of
 *     the transaction around it (the result must not be sent).
 *   - /v1/query: lith_read runs on libuv's thread pool (lith_uv_read), so a
 *     long query never stalls the loop (and so no other connection); the
 *     after-work callback on the loop thread answers and frees.
 *   - The bearer token, when configured, is checked before anything is read
 *     or run: a refused request changes nothing.
 *   - Every body is read with json.c (/v1/backup's too), every answer
 *     written by hand into a lithd_buf: lithd links no JSON library.
 *   - The routes are one table (routes[], at the end of this file) that
 *     lithd_server_start walks. What serves them lives beside: overload.c
 *     (commands on their way to the writer), metrics.c (the /metrics text),
 *     sqljson (statements in, results out, and the SQL authorizer).
 */
#include "server.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "buf.h"
#include "json.h"
#include "log.h"
#include "metrics.h"

/* What a refusal quotes of a header the client sent, at most: the
 * message must fit REFUSAL_MAX with its words around. */
#define ECHO_MAX 200
#define REFUSAL_MAX (ECHO_MAX + 120)
/* The one Content-Type a POST may carry (parameters such as charset aside). */
#define JSON_TYPE "application/json"
/* A backup's file name, at most (backup_name_ok). */
#define BACKUP_NAME_MAX 200

/* ---- Helpers ----------------------------------------------------------- */

static int authorized(lithd_server *s, lith_http_req *req) {
  if (s->token == NULL)
    return 1;
  return lith_http_check_bearer(req, s->token);
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
 * preflight lithd never answers. Answers the request when it refuses;
 * returns 1 when the request may go on. */
static int admit(lithd_server *s, lith_http_req *req) {
  char msg[REFUSAL_MAX];
  if (!authorized(s, req))
    return 0;
  const char *origin = lith_http_req_header(req, "origin");
  if (origin != NULL && !in_list(s->allow_origins, "*", 1) &&
      !in_list(s->allow_origins, origin, strlen(origin))) {
    snprintf(msg, sizeof msg, "requests from web pages are refused: Origin %.*s is not in --allow-origin",
             ECHO_MAX, origin);
    lith_http_respond_error(req, 403, msg);
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
      lith_http_respond_error(req, 403, msg);
      return 0;
    }
  }
  if (strcmp(lith_http_req_method(req), "POST") == 0) {
    const char *ct = lith_http_req_header(req, "content-type");
    size_t n = ct ? strcspn(ct, ";") : 0;
    while (n > 0 && ct[n - 1] == ' ')
      n--;
    if (ct == NULL || n != strlen(JSON_TYPE) || strncasecmp(ct, JSON_TYPE, n) != 0) {
      snprintf(msg, sizeof msg, "Content-Type must be " JSON_TYPE ", got %.*s", ECHO_MAX, ct ? ct : "none");
      lith_http_respond_error(req, 415, msg);
      return 0;
    }
  }
  return 1;
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

/* outcome_json, answered. Completes req. */
static void respond_outcome(lith_http_req *req, int rc, const lithd_result *result, const char *errmsg) {
  int status = 500;
  char *json = outcome_json(rc, result, errmsg, &status);
  if (json == NULL) {
    lith_http_respond_error(req, 500, "out of memory");
    return;
  }
  lith_http_respond_json(req, status, json);
  free(json);
}

/* The error of a command that could not be queued (lith_uv_submit's rc). */
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
  lith_uv_req ureq; /* first: the bridge callback gets &ureq */
  lithd_park park;
  lithd_server *s;
  lith_http_req *req;
  lithd_batch *batch;
  lithd_result *result; /* written on the writer thread, read after the callback */
  int64_t t0;           /* lith_clock_ms at arrival, for the log */
};

static void do_ctx_free(struct do_ctx *c) {
  if (c == NULL)
    return;
  lithd_result_free(c->result);
  lithd_batch_free(c->batch);
  free(c);
}

/* A debug line per answered command; 5xx at warn, with the message. */
static void log_answer(lith_http_req *req, int status, int64_t t0, const char *errmsg) {
  int level = status >= 500 ? LITHD_LOG_WARN : LITHD_LOG_DEBUG;
  if (!lithd_log_enabled(level))
    return;
  lithd_log(level, "%s %s %d %" PRId64 " ms%s%s", lith_http_req_method(req), lith_http_req_path(req), status,
            lith_clock_ms() - t0, status >= 400 && errmsg != NULL && errmsg[0] ? ": " : "",
            status >= 400 && errmsg != NULL ? errmsg : "");
}

static int do_cmd(lith_tx *tx, void *arg) {
  struct do_ctx *c = arg;
  return lithd_batch_run(tx, c->batch, &c->result);
}

static void do_done(lith_uv_req *u) {
  struct do_ctx *c = (struct do_ctx *)u;
  lithd_server *s = c->s;
  int status = 500;
  char *json = outcome_json(u->req.rc, c->result, u->req.errmsg, &status);
  /* GONE (the client left) releases the handle just the same. */
  if (json == NULL) {
    status = 500;
    lith_http_respond_error(c->req, 500, "out of memory");
  } else {
    log_answer(c->req, status, c->t0, u->req.rc != LITH_OK ? u->req.errmsg : NULL);
    lith_http_respond_json(c->req, status, json);
  }
  free(json);
  do_ctx_free(c);
  if (s->park.head != NULL)
    lithd_overload_drain(&s->park); /* the writer made room */
}

/* Answer a command that could not be queued (rc from lith_uv_submit, or
 * the parking's refusal) and free c. */
static void do_refuse(struct do_ctx *c, int rc) {
  lithd_error e;
  submit_error(&e, rc);
  if (rc == LITH_QUEUE_FULL)
    lith_http_add_header(c->req, "retry-after", "1");
  log_answer(c->req, lithd_http_status(rc), c->t0, e.message);
  respond_lithd_error(c->req, &e);
  do_ctx_free(c);
}

static void do_park_refuse(lithd_park *p, int rc) { do_refuse((struct do_ctx *)p->arg, rc); }

/* Submit c (its batch parsed), or answer why not. Returns the handler's
 * return value. */
static int do_submit(lithd_server *s, struct do_ctx *c) {
  size_t len = 0;
  int rc;
  lith_http_req_body(c->req, &len);
  c->park.ureq = &c->ureq;
  c->park.fn = do_cmd;
  c->park.arg = c;
  c->park.done = do_done;
  c->park.req = c->req;
  c->park.refuse = do_park_refuse;
  rc = lithd_overload_submit(&s->park, &c->park, len + sizeof *c);
  if (rc == LITH_OK)
    return LITH_HTTP_PENDING; /* c now belongs to do_done / refuse */
  do_refuse(c, rc);
  return LITH_HTTP_DONE;
}

static struct do_ctx *do_ctx_new(lithd_server *s, lith_http_req *req) {
  struct do_ctx *c = calloc(1, sizeof *c);
  if (c == NULL) {
    lith_http_respond_error(req, 500, "out of memory");
    return NULL;
  }
  c->s = s;
  c->req = req;
  c->t0 = lith_clock_ms();
  return c;
}

/* Refuse raw SQL under --only-named; returns 1 if refused (answered). */
static int refuse_raw(lithd_server *s, lith_http_req *req) {
  lithd_error e;
  if (!s->only_named)
    return 0;
  lithd_error_set(&e, LITHD_FORBIDDEN, -1,
                  "this lithd runs only named commands (--only-named): POST /v1/commands/NAME");
  respond_lithd_error(req, &e);
  return 1;
}

static int h_do(lith_http_req *req, void *arg) {
  lithd_server *s = arg;
  struct do_ctx *c;

  if (!admit(s, req))
    return LITH_HTTP_DONE;
  if (refuse_raw(s, req))
    return LITH_HTTP_DONE;
  if ((c = do_ctx_new(s, req)) == NULL)
    return LITH_HTTP_DONE;
  c->batch = parse_body(s, req);
  if (c->batch == NULL) {
    do_ctx_free(c);
    return LITH_HTTP_DONE;
  }
  return do_submit(s, c);
}

/* ---- POST /v1/commands/NAME, GET /v1/commands --------------------------- */

#define COMMANDS_PREFIX "/v1/commands/"

static int h_command(lith_http_req *req, void *arg) {
  lithd_server *s = arg;
  const char *name = lith_http_req_path(req) + strlen(COMMANDS_PREFIX);
  size_t len = 0;
  const char *body = lith_http_req_body(req, &len);
  struct do_ctx *c;
  lithd_error e;

  if (!admit(s, req))
    return LITH_HTTP_DONE;
  if ((c = do_ctx_new(s, req)) == NULL)
    return LITH_HTTP_DONE;
  if (lithd_commands_batch(s->commands, name, body, len, &s->limits, &c->batch, &e) != LITH_OK) {
    respond_lithd_error(req, &e);
    do_ctx_free(c);
    return LITH_HTTP_DONE;
  }
  if (!apply_query(req, c->batch)) {
    do_ctx_free(c);
    return LITH_HTTP_DONE;
  }
  return do_submit(s, c);
}

static int h_commands(lith_http_req *req, void *arg) {
  lithd_server *s = arg;
  char *json;
  if (!admit(s, req))
    return LITH_HTTP_DONE;
  json = lithd_commands_json(s->commands);
  if (json == NULL) {
    lith_http_respond_error(req, 500, "out of memory");
    return LITH_HTTP_DONE;
  }
  lith_http_respond_json(req, 200, json);
  free(json);
  return LITH_HTTP_DONE;
}

/* ---- POST /v1/query ---------------------------------------------------- */

/* The read runs on libuv's thread pool (lith_uv_read): lith_read may take
 * as long as the query does, and the loop thread must keep serving other
 * connections meanwhile. The context is owned by the read request from
 * lith_uv_read until query_after, which answers (or, if the client left,
 * gets LITH_HTTP_GONE and releases the handle just the same) and frees it. */
struct query_ctx {
  lith_uv_read_req read; /* read.rc, read.errmsg: the outcome */
  lith_http_req *req;
  lithd_batch *batch;
  lithd_result *result; /* written on the pool thread, read in query_after */
};

static void query_ctx_free(struct query_ctx *q) {
  if (q == NULL)
    return;
  lithd_result_free(q->result);
  lithd_batch_free(q->batch);
  free(q);
}

static int query_fn(lith_rx *rx, void *arg) { /* a pool thread */
  struct query_ctx *q = arg;
  return lithd_batch_read(rx, q->batch, &q->result);
}

static void query_after(lith_uv_read_req *r) { /* the loop thread */
  struct query_ctx *q = r->data;
  respond_outcome(q->req, r->rc, q->result, r->errmsg);
  query_ctx_free(q);
}

static int h_query(lith_http_req *req, void *arg) {
  lithd_server *s = arg;
  struct query_ctx *q = NULL;

  if (!admit(s, req))
    return LITH_HTTP_DONE;
  q = calloc(1, sizeof *q);
  if (q == NULL) {
    lith_http_respond_error(req, 500, "out of memory");
    return LITH_HTTP_DONE;
  }
  q->req = req;
  q->read.data = q;
  q->batch = parse_body(s, req);
  if (q->batch == NULL)
    goto done;
  if (lith_uv_read(s->db, s->loop, &q->read, query_fn, q, query_after) == LITH_OK)
    return LITH_HTTP_PENDING; /* q now belongs to query_after */
  lith_http_respond_error(req, 500, "cannot queue the query");
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
  lith_uv_req ureq; /* first: the bridge callback gets &ureq */
  lithd_park park;
  struct batch_ctx *owner;
  lithd_batch *batch;
  lithd_result *result; /* written on the writer thread */
  char *json;           /* this command's entry, once known */
};

struct batch_ctx {
  lithd_server *s;
  lith_http_req *req;
  int64_t t0;
  size_t n;
  size_t outstanding; /* submitted, callback not run yet */
  struct batch_item *items;
};

static void batch_ctx_free(struct batch_ctx *b) {
  size_t i;
  if (b == NULL)
    return;
  for (i = 0; b->items != NULL && i < b->n; i++) {
    lithd_result_free(b->items[i].result);
    lithd_batch_free(b->items[i].batch);
    free(b->items[i].json);
  }
  free(b->items);
  free(b);
}

/* Answer with every entry, then free b. */
static void batch_finish(struct batch_ctx *b) {
  size_t i, len = sizeof "{\"results\":[]}";
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
  for (i = 0; i < b->n; i++)
    p += sprintf(p, "%s%s", i > 0 ? "," : "", b->items[i].json);
  sprintf(p, "]}");
  lith_http_respond_json(b->req, 200, out); /* GONE releases it just the same */
  free(out);
  batch_ctx_free(b);
}

static int batch_cmd(lith_tx *tx, void *arg) {
  struct batch_item *it = arg;
  return lithd_batch_run(tx, it->batch, &it->result);
}

static void batch_item_done(struct batch_item *it, char *json) {
  struct batch_ctx *b = it->owner;
  lithd_server *s = b->s;
  it->json = json;
  lithd_result_free(it->result);
  it->result = NULL;
  lithd_batch_free(it->batch);
  it->batch = NULL;
  if (--b->outstanding == 0) {
    log_answer(b->req, 200, b->t0, NULL);
    batch_finish(b);
  }
  if (s->park.head != NULL)
    lithd_overload_drain(&s->park);
}

static void batch_done(lith_uv_req *u) {
  struct batch_item *it = (struct batch_item *)u;
  int status;
  batch_item_done(it, outcome_json(u->req.rc, it->result, u->req.errmsg, &status));
}

static void batch_park_refuse(lithd_park *p, int rc) {
  lithd_error e;
  submit_error(&e, rc);
  batch_item_done(p->arg, lithd_error_json(&e));
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
    rc = lithd_batch_from_value(c, &s->limits, &b->items[i].batch, &ce);
    if (rc != LITH_OK) {
      lithd_error_set(e, rc, ce.statement, "command %zu: %s", i, ce.message);
      goto out;
    }
    total += lithd_batch_count(b->items[i].batch);
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
  lithd_server *s = arg;
  struct batch_ctx *b;
  size_t len = 0, i;
  const char *body;
  lithd_error e;

  if (!admit(s, req))
    return LITH_HTTP_DONE;
  if (refuse_raw(s, req))
    return LITH_HTTP_DONE;
  b = calloc(1, sizeof *b);
  if (b == NULL) {
    lith_http_respond_error(req, 500, "out of memory");
    return LITH_HTTP_DONE;
  }
  b->s = s;
  b->req = req;
  b->t0 = lith_clock_ms();
  body = lith_http_req_body(req, &len);
  if (batch_parse(s, body, len, b, &e) != LITH_OK) {
    respond_lithd_error(req, &e);
    batch_ctx_free(b);
    return LITH_HTTP_DONE;
  }
  for (i = 0; i < b->n; i++)
    if (!apply_query(req, b->items[i].batch)) {
      batch_ctx_free(b);
      return LITH_HTTP_DONE;
    }
  /* Every item counts as outstanding until its callback or refusal ran;
   * one extra count held here keeps b alive through this loop. */
  b->outstanding = b->n + 1;
  for (i = 0; i < b->n; i++) {
    struct batch_item *it = &b->items[i];
    int rc;
    it->park.ureq = &it->ureq;
    it->park.fn = batch_cmd;
    it->park.arg = it;
    it->park.done = batch_done;
    it->park.req = req;
    it->park.refuse = batch_park_refuse;
    rc = lithd_overload_submit(&s->park, &it->park, len / b->n + sizeof *it);
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

/* ---- POST /v1/backup --------------------------------------------------- */

/* {"dest": "NAME"}: lith_backup_new into --backup-dir on libuv's thread
 * pool (it copies the whole file; the loop must keep serving), answered
 * with the path, size and time. A client names a new file in the
 * operator's directory, nothing else: no path, no file replaced, no link
 * followed, no FIFO or device opened (lith_backup_new). Without
 * --backup-dir the endpoint is off. */
struct backup_ctx {
  uv_work_t work;
  lithd_server *s;
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
  const char *m;
  struct stat st;

  k->rc = lith_backup_new(k->s->db, k->dest);
  k->ms = lith_clock_ms() - t0;
  m = lith_errmsg(k->s->db);
  snprintf(k->errmsg, sizeof k->errmsg, "%s", m != NULL ? m : "");
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
    /* The name was checked here first, so lith_backup_new's only misuse
     * left is a destination that exists: a conflict. */
    lithd_error_set(&e, k->rc == LITH_MISUSE ? LITHD_CONFLICT : k->rc, -1, "%s",
                    k->errmsg[0] ? k->errmsg : lith_errstr(k->rc));
    respond_lithd_error(k->req, &e);
    lithd_log(LITHD_LOG_WARN, "backup to %s failed: %s", k->dest, e.message);
  }
  free(k->dest);
  free(k);
}

static int h_backup(lith_http_req *req, void *arg) {
  lithd_server *s = arg;
  struct backup_ctx *k = NULL;
  size_t len = 0;
  const char *body = lith_http_req_body(req, &len);
  lithd_arena tmp = {0};
  lj_value *root = NULL;
  const lj_value *dest;
  lithd_error e;

  if (!admit(s, req))
    return LITH_HTTP_DONE;
  if (s->backup_dir == NULL) {
    lithd_error_set(&e, LITHD_FORBIDDEN, -1, "backups are off: lithd was started without --backup-dir");
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
  if (k == NULL || (k->dest = malloc(strlen(s->backup_dir) + dest->n + 2)) == NULL) {
    lithd_error_set(&e, LITH_NOMEM, -1, "out of memory");
    goto refuse;
  }
  sprintf(k->dest, "%s/%s", s->backup_dir, dest->u.s);
  k->s = s;
  k->req = req;
  k->work.data = k;
  lithd_arena_free(&tmp);
  if (uv_queue_work(s->loop, &k->work, backup_work, backup_after) == 0)
    return LITH_HTTP_PENDING; /* k now belongs to backup_after */
  free(k->dest);
  free(k);
  lith_http_respond_error(req, 500, "cannot queue the backup");
  return LITH_HTTP_DONE;
refuse:
  if (k != NULL)
    free(k->dest);
  free(k);
  lithd_arena_free(&tmp);
  respond_lithd_error(req, &e);
  return LITH_HTTP_DONE;
}

/* ---- GET /v1/stats, GET /healthz --------------------------------------- */

static int h_stats(lith_http_req *req, void *arg) {
  lithd_server *s = arg;
  lith_stats *st = NULL;
  char buf[1024];

  if (!admit(s, req))
    return LITH_HTTP_DONE;
  st = malloc(sizeof *st); /* ~3.5 KiB of histograms: not on the stack */
  if (st == NULL) {
    lith_http_respond_error(req, 500, "out of memory");
    return LITH_HTTP_DONE;
  }
  lith_stats_get(s->db, st);
  snprintf(buf, sizeof buf,
           "{\"commands\":%" PRIu64 ",\"batches\":%" PRIu64 ",\"failed\":%" PRIu64 ",\"retried\":%" PRIu64
           ",\"busy\":%" PRIu64 ",\"queue_depth\":%" PRIu64 ",\"wal_pages\":%" PRIu64
           ",\"checkpoints\":%" PRIu64 ",\"checkpoint_errors\":%" PRIu64 ",\"tx_p50_ns\":%" PRIu64
           ",\"tx_p99_ns\":%" PRIu64 ",\"wait_p50_ns\":%" PRIu64 ",\"wait_p99_ns\":%" PRIu64
           ",\"tx_max_ns\":%" PRIu64 "}",
           st->commands, st->batches, st->failed, st->retried, st->busy, st->queue_depth, st->wal_pages,
           st->checkpoints, st->checkpoint_errors, lith_lat_quantile_ns(st->tx_lat, NULL, 0.5),
           lith_lat_quantile_ns(st->tx_lat, NULL, 0.99), lith_lat_quantile_ns(st->wait_lat, NULL, 0.5),
           lith_lat_quantile_ns(st->wait_lat, NULL, 0.99), st->tx_ns_max);
  free(st);
  lith_http_respond_json(req, 200, buf);
  return LITH_HTTP_DONE;
}

static int h_healthz(lith_http_req *req, void *arg) {
  lith_http_respond_json(req, 200, "{\"ok\":true}");
  return LITH_HTTP_DONE;
}

/* ---- GET /metrics (metrics.h) -------------------------------------------- */

static int h_metrics(lith_http_req *req, void *arg) {
  lithd_server *s = arg;
  lithd_buf b = {0};
  size_t len;
  char *text;

  if (!admit(s, req))
    return LITH_HTTP_DONE;
  lithd_metrics_write(&b, s->db, s->http);
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

/* ---- Routes ------------------------------------------------------------ */

/* Every route of lithd (server.h says what each does), registered in this
 * order by lithd_server_start, each with the server as its argument. */
static const struct route {
  const char *method;
  const char *path;
  int match; /* LITH_HTTP_EXACT, or LITH_HTTP_PREFIX: the path begins with it */
  lith_http_handler handler;
} routes[] = {
    {"POST", "/v1/do", LITH_HTTP_EXACT, h_do},
    {"POST", "/v1/batch", LITH_HTTP_EXACT, h_batch},
    {"POST", "/v1/query", LITH_HTTP_EXACT, h_query},
    {"POST", COMMANDS_PREFIX, LITH_HTTP_PREFIX, h_command},
    {"GET", "/v1/commands", LITH_HTTP_EXACT, h_commands},
    {"POST", "/v1/backup", LITH_HTTP_EXACT, h_backup},
    {"GET", "/v1/stats", LITH_HTTP_EXACT, h_stats},
    {"GET", "/metrics", LITH_HTTP_EXACT, h_metrics},
    {"GET", "/healthz", LITH_HTTP_EXACT, h_healthz},
};

int lithd_server_start(lithd_server *s) {
  for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
    const struct route *r = &routes[i];
    int rc = lith_http_route(s->http, r->method, r->path, r->match, r->handler, s);
    if (rc != LITH_HTTP_OK)
      return rc;
  }
  if (lithd_overload_init(&s->park, s->loop, s->bridge, s->queue_wait_ms) != 0)
    return LITH_HTTP_ERROR;
  return LITH_HTTP_OK;
}

void lithd_server_stop(lithd_server *s) { lithd_overload_stop(&s->park); }
