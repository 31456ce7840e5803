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
 *   - /v1/query: lith_read runs on libuv's thread pool (uv_queue_work), so a
 *     long query never stalls the loop (and so no other connection); the
 *     after-work callback on the loop thread answers and frees.
 *   - The bearer token, when configured, is checked before anything is read
 *     or run: a refused request changes nothing.
 */
#include "server.h"
#include "log.h"

#include <inttypes.h>
#include <stdarg.h>

#include <jansson.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sqlite3.h>

/* ---- Helpers ----------------------------------------------------------- */

static int authorized(lithd_server *s, lith_http_req *req) {
  if (s->token == NULL) return 1;
  return lith_http_check_bearer(req, s->token);
}

/* Whether the `len` bytes at `item` are one of the comma-separated entries
 * of `list` (NULL: none), spaces around entries ignored, case ignored. */
static int in_list(const char *list, const char *item, size_t len) {
  while (list != NULL && *list) {
    while (*list == ' ' || *list == ',') list++;
    const char *end = list;
    while (*end && *end != ',') end++;
    const char *e = end;
    while (e > list && e[-1] == ' ') e--;
    if ((size_t)(e - list) == len && len > 0 && strncasecmp(list, item, len) == 0) return 1;
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
  if (host == NULL || !*host) return 0;
  if (host[0] == '[') { /* [v6]:port */
    const char *close = strchr(host, ']');
    if (close == NULL) return 0;
    len = (size_t)(close - host - 1);
    if (len >= sizeof buf) return 0;
    memcpy(buf, host + 1, len);
    buf[len] = '\0';
    struct in6_addr a6;
    return inet_pton(AF_INET6, buf, &a6) == 1;
  }
  const char *colon = strchr(host, ':');
  len = colon ? (size_t)(colon - host) : strlen(host);
  if (len == 0 || len >= sizeof buf) return 0;
  memcpy(buf, host, len);
  buf[len] = '\0';
  struct in_addr a4;
  if (inet_pton(AF_INET, buf, &a4) == 1 || strcasecmp(buf, "localhost") == 0) return 1;
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
  char msg[320];
  if (!authorized(s, req)) return 0;
  const char *origin = lith_http_req_header(req, "origin");
  if (origin != NULL && !in_list(s->allow_origins, "*", 1) &&
      !in_list(s->allow_origins, origin, strlen(origin))) {
    snprintf(msg, sizeof msg, "requests from web pages are refused: Origin %.200s is not in --allow-origin",
             origin);
    lith_http_respond_error(req, 403, msg);
    return 0;
  }
  /* A browser reaches TCP only: a Unix socket's client names any Host. */
  if (s->token == NULL && lith_http_req_is_loopback(req) && strcmp(lith_http_req_peer(req), "unix") != 0) {
    const char *host = lith_http_req_header(req, "host");
    if (!host_ok(s, host)) {
      snprintf(msg, sizeof msg,
               "Host %.200s is not this machine (a DNS-rebinding page?): lithd answers localhost and "
               "IP addresses, and names in --allow-host",
               host ? host : "(none)");
      lith_http_respond_error(req, 403, msg);
      return 0;
    }
  }
  if (strcmp(lith_http_req_method(req), "POST") == 0) {
    const char *ct = lith_http_req_header(req, "content-type");
    size_t n = ct ? strcspn(ct, ";") : 0;
    while (n > 0 && ct[n - 1] == ' ') n--;
    if (ct == NULL || n != 16 || strncasecmp(ct, "application/json", 16) != 0) {
      snprintf(msg, sizeof msg, "Content-Type must be application/json, got %.200s", ct ? ct : "none");
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
    if (rc == LITH_OK) rc = LITH_NOMEM; /* OK without a result: memory ran out */
    lithd_error_set(&e, rc, -1, "%s", errmsg != NULL && errmsg[0] ? errmsg : lith_errstr(rc));
    *status = lithd_http_status(rc);
    return lithd_error_json(&e);
  }
  return lithd_result_json(result);
}

/* outcome_json, answered. Completes req. */
static void respond_outcome(lith_http_req *req, int rc, const lithd_result *result,
                            const char *errmsg) {
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
  return b;
}

/* ---- Waiting for room in the queue ------------------------------------- */

#define PARK_MAX_BYTES ((size_t)256 << 20) /* request bodies waiting, at most */
#define SUBMIT_CHUNK 16 /* commands parsed that are submitted without waiting for the iteration's end */

/* A command lith's queue had no room for yet (server.h, "Overload"). It
 * lives inside its request's context (do_ctx or batch_item). */
struct lithd_park {
  struct lithd_park *next;
  int64_t deadline;     /* lith_clock_ms */
  size_t bytes;
  lith_uv_req *ureq;
  lith_command fn;
  void *arg;
  lith_uv_cb done;
  lith_http_req *req;
  /* Answer the command with rc (LITH_QUEUE_FULL: waited too long;
   * LITH_CLOSED: stopping) as its done callback would, and free it. */
  void (*refuse)(struct lithd_park *p, int rc);
};

static void park_timer_cb(uv_timer_t *t);

/* Submit what waits, in order, until the queue is full; refuse what waited
 * past its deadline (at once with queue_wait_ms 0), whose client left, or
 * everything when stopping. Then aim the timer at the next deadline. */
static void park_drain(lithd_server *s) {
  int64_t now = lith_clock_ms();
  struct lithd_park *p;

  while ((p = s->park_head) != NULL) {
    int rc;
    if (s->stopped)
      rc = LITH_CLOSED;
    else if (lith_http_is_gone(p->req))
      rc = LITH_CLOSED; /* nobody to answer: do not run it */
    else if ((rc = lith_uv_submit(s->bridge, p->ureq, p->fn, p->arg, p->done)) == LITH_QUEUE_FULL &&
             now < p->deadline)
      break; /* still no room: keep the order */
    s->park_head = p->next;
    if (s->park_head == NULL) s->park_tail = NULL;
    s->park_bytes -= p->bytes;
    if (rc != LITH_OK) p->refuse(p, rc); /* frees p */
  }
  if (!s->started || s->stopped) return;
  if (s->park_head != NULL) {
    int64_t wait = s->park_head->deadline - now;
    /* Completions drain the list as room appears; the timer is there for
     * the deadline, and as a backstop every 50 ms. */
    uv_timer_start(&s->park_timer, park_timer_cb, (uint64_t)(wait < 0 ? 0 : wait < 50 ? wait : 50), 0);
  } else {
    uv_timer_stop(&s->park_timer);
    uv_check_stop(&s->park_check);
  }
}

static void park_timer_cb(uv_timer_t *t) { park_drain(t->data); }
static void park_check_cb(uv_check_t *c) {
  lithd_server *s = c->data;
  s->park_new = 0;
  park_drain(s);
}

/* Queue p to be submitted at the end of this loop iteration (after every
 * request read in it was parsed: the writer then finds them together and
 * commits them as one batch, instead of being woken for the first and
 * committing it alone), behind whatever waits for room already. Returns
 * LITH_OK (p->done or p->refuse will run) or a code for the caller to
 * answer at once (p untouched). */
static int submit_or_park(lithd_server *s, struct lithd_park *p, size_t bytes) {
  if (s->stopped) return LITH_CLOSED;
  if (s->park_bytes + bytes > PARK_MAX_BYTES) return LITH_QUEUE_FULL;
  p->next = NULL;
  p->bytes = bytes;
  p->deadline = lith_clock_ms() + s->queue_wait_ms;
  if (s->park_tail != NULL) s->park_tail->next = p;
  else s->park_head = p;
  s->park_tail = p;
  s->park_bytes += bytes;
  /* Every SUBMIT_CHUNK commands go at once, not only at the iteration's
   * end: with many clients a single iteration reads dozens of requests, and
   * the writer should start on the first ones while the loop parses the
   * rest, rather than the two taking turns. */
  if (++s->park_new >= SUBMIT_CHUNK) {
    s->park_new = 0;
    park_drain(s);
  }
  uv_check_start(&s->park_check, park_check_cb);
  return LITH_OK;
}

/* ---- POST /v1/do ------------------------------------------------------- */

struct do_ctx {
  lith_uv_req ureq;     /* first: the bridge callback gets &ureq */
  struct lithd_park park;
  lithd_server *s;
  lith_http_req *req;
  lithd_batch *batch;
  lithd_result *result; /* written on the writer thread, read after the callback */
  int64_t t0;           /* lith_clock_ms at arrival, for the log */
};

static void do_ctx_free(struct do_ctx *c) {
  if (c == NULL) return;
  lithd_result_free(c->result);
  lithd_batch_free(c->batch);
  free(c);
}

/* A debug line per answered command; 5xx at warn, with the message. */
static void log_answer(lith_http_req *req, int status, int64_t t0, const char *errmsg) {
  int level = status >= 500 ? LITHD_LOG_WARN : LITHD_LOG_DEBUG;
  if (!lithd_log_enabled(level)) return;
  lithd_log(level, "%s %s %d %" PRId64 " ms%s%s", lith_http_req_method(req),
            lith_http_req_path(req), status, lith_clock_ms() - t0,
            status >= 400 && errmsg != NULL && errmsg[0] ? ": " : "",
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
  if (s->park_head != NULL) park_drain(s); /* the writer made room */
}

/* Answer a command that could not be queued (rc from lith_uv_submit, or
 * the parking's refusal) and free c. */
static void do_refuse(struct do_ctx *c, int rc) {
  lithd_error e;
  submit_error(&e, rc);
  if (rc == LITH_QUEUE_FULL) lith_http_add_header(c->req, "retry-after", "1");
  log_answer(c->req, lithd_http_status(rc), c->t0, e.message);
  respond_lithd_error(c->req, &e);
  do_ctx_free(c);
}

static void do_park_refuse(struct lithd_park *p, int rc) {
  do_refuse((struct do_ctx *)p->arg, rc);
}

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
  rc = submit_or_park(s, &c->park, len + sizeof *c);
  if (rc == LITH_OK) return LITH_HTTP_PENDING; /* c now belongs to do_done / refuse */
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
  if (!s->only_named) return 0;
  lithd_error_set(&e, LITHD_FORBIDDEN, -1,
                  "this lithd runs only named commands (--only-named): POST /v1/commands/NAME");
  respond_lithd_error(req, &e);
  return 1;
}

static int h_do(lith_http_req *req, void *arg) {
  lithd_server *s = arg;
  struct do_ctx *c;

  if (!admit(s, req)) return LITH_HTTP_DONE;
  if (refuse_raw(s, req)) return LITH_HTTP_DONE;
  if ((c = do_ctx_new(s, req)) == NULL) return LITH_HTTP_DONE;
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

  if (!admit(s, req)) return LITH_HTTP_DONE;
  if ((c = do_ctx_new(s, req)) == NULL) return LITH_HTTP_DONE;
  if (lithd_commands_batch(s->commands, name, body, len, &s->limits, &c->batch, &e) != LITH_OK) {
    respond_lithd_error(req, &e);
    do_ctx_free(c);
    return LITH_HTTP_DONE;
  }
  return do_submit(s, c);
}

static int h_commands(lith_http_req *req, void *arg) {
  lithd_server *s = arg;
  char *json;
  if (!admit(s, req)) return LITH_HTTP_DONE;
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

/* The read runs on libuv's thread pool (uv_queue_work): lith_read may take
 * as long as the query does, and the loop thread must keep serving other
 * connections meanwhile. The context is owned by the work request from
 * uv_queue_work until query_after, which answers (or, if the client left,
 * gets LITH_HTTP_GONE and releases the handle just the same) and frees it. */
struct query_ctx {
  uv_work_t work;
  lithd_server *s;
  lith_http_req *req;
  lithd_batch *batch;
  lithd_result *result; /* written on the pool thread, read in query_after */
  int rc;
  char errmsg[LITH_ERRMSG_MAX]; /* lith_errmsg is per thread: copied there */
};

static void query_ctx_free(struct query_ctx *q) {
  if (q == NULL) return;
  lithd_result_free(q->result);
  lithd_batch_free(q->batch);
  free(q);
}

static int query_fn(lith_rx *rx, void *arg) {
  struct query_ctx *q = arg;
  return lithd_batch_read(rx, q->batch, &q->result);
}

static void query_work(uv_work_t *w) { /* a pool thread */
  struct query_ctx *q = w->data;
  const char *m;
  q->rc = lith_read(q->s->db, query_fn, q);
  m = lith_errmsg(q->s->db);
  snprintf(q->errmsg, sizeof q->errmsg, "%s", m != NULL ? m : "");
}

static void query_after(uv_work_t *w, int status) { /* the loop thread */
  struct query_ctx *q = w->data;
  if (status == UV_ECANCELED) {
    lith_http_respond_error(q->req, 503, "lithd is shutting down");
  } else {
    respond_outcome(q->req, q->rc, q->result, q->errmsg);
  }
  query_ctx_free(q);
}

static int h_query(lith_http_req *req, void *arg) {
  lithd_server *s = arg;
  struct query_ctx *q = NULL;

  if (!admit(s, req)) return LITH_HTTP_DONE;
  q = calloc(1, sizeof *q);
  if (q == NULL) {
    lith_http_respond_error(req, 500, "out of memory");
    return LITH_HTTP_DONE;
  }
  q->s = s;
  q->req = req;
  q->work.data = q;
  q->batch = parse_body(s, req);
  if (q->batch == NULL) goto done;
  if (uv_queue_work(s->loop, &q->work, query_work, query_after) == 0)
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
  struct lithd_park park;
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
  if (b == NULL) return;
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
  for (i = 0; i < b->n; i++) p += sprintf(p, "%s%s", i > 0 ? "," : "", b->items[i].json);
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
  if (s->park_head != NULL) park_drain(s);
}

static void batch_done(lith_uv_req *u) {
  struct batch_item *it = (struct batch_item *)u;
  int status;
  batch_item_done(it, outcome_json(u->req.rc, it->result, u->req.errmsg, &status));
}

static void batch_park_refuse(struct lithd_park *p, int rc) {
  lithd_error e;
  submit_error(&e, rc);
  batch_item_done(p->arg, lithd_error_json(&e));
}

/* Split the body into commands and parse each; returns LITH_OK or an error
 * in *e (nothing submitted). */
static int batch_parse(lithd_server *s, const char *body, size_t len, struct batch_ctx *b,
                       lithd_error *e) {
  lithd_arena tmp = {0};
  lj_value *root = NULL;
  const lj_value *cmds;
  lj_error jerr = {0, 0, ""};
  size_t i;
  int total = 0;
  int rc = LITH_OK;

  if (lj_parse(&tmp, body, len, &root, &jerr) != 0) {
    rc = lithd_error_set(e, LITHD_BAD_REQUEST, -1, "invalid JSON at line %d column %d: %s",
                         jerr.line, jerr.column, jerr.text);
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
    rc = lithd_error_set(e, LITHD_TOO_LARGE, -1, "%zu commands; at most %d", b->n,
                         s->limits.max_statements);
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

  if (!admit(s, req)) return LITH_HTTP_DONE;
  if (refuse_raw(s, req)) return LITH_HTTP_DONE;
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
    rc = submit_or_park(s, &it->park, len / b->n + sizeof *it);
    if (rc != LITH_OK) {
      submit_error(&e, rc);
      it->json = lithd_error_json(&e);
      b->outstanding--;
    }
  }
  if (--b->outstanding > 0) return LITH_HTTP_PENDING; /* b belongs to the callbacks */
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

/* A backup's name: 1 to 200 of [A-Za-z0-9._-], not beginning with '.'. */
static int backup_name_ok(const char *n) {
  size_t len = strlen(n);
  if (len == 0 || len > 200 || n[0] == '.') return 0;
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
  if (k->rc == LITH_OK && stat(k->dest, &st) == 0) k->bytes = (int64_t)st.st_size;
}

static void backup_after(uv_work_t *w, int status) { /* the loop thread */
  struct backup_ctx *k = w->data;
  lithd_error e;

  if (status == UV_ECANCELED) {
    lith_http_respond_error(k->req, 503, "lithd is shutting down");
  } else if (k->rc == LITH_OK) {
    json_t *o = json_pack("{s:s, s:I, s:I}", "dest", k->dest, "bytes", (json_int_t)k->bytes,
                          "ms", (json_int_t)k->ms);
    char *txt = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (txt == NULL)
      lith_http_respond_error(k->req, 500, "out of memory");
    else
      lith_http_respond_json(k->req, 200, txt);
    free(txt);
    lithd_log(LITHD_LOG_INFO, "backup to %s: %" PRId64 " bytes in %" PRId64 " ms", k->dest,
              k->bytes, k->ms);
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
  json_error_t jerr;
  json_t *root = NULL, *dest;
  lithd_error e;

  if (!admit(s, req)) return LITH_HTTP_DONE;
  if (s->backup_dir == NULL) {
    lithd_error_set(&e, LITHD_FORBIDDEN, -1, "backups are off: lithd was started without --backup-dir");
    goto refuse;
  }
  root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
  dest = json_object_get(root, "dest");
  if (root == NULL || !json_is_object(root) || json_object_size(root) != 1 ||
      !json_is_string(dest)) {
    lithd_error_set(&e, LITHD_BAD_REQUEST, -1, "the body must be {\"dest\": \"NAME\"}");
    goto refuse;
  }
  if (!backup_name_ok(json_string_value(dest))) {
    lithd_error_set(&e, LITHD_BAD_REQUEST, -1,
                    "\"dest\" must be a file name in lithd's --backup-dir: 1 to 200 letters, digits, "
                    "'.', '_' or '-', not beginning with '.'");
    goto refuse;
  }
  k = calloc(1, sizeof *k);
  if (k == NULL || (k->dest = malloc(strlen(s->backup_dir) + strlen(json_string_value(dest)) + 2)) == NULL) {
    lithd_error_set(&e, LITH_NOMEM, -1, "out of memory");
    goto refuse;
  }
  sprintf(k->dest, "%s/%s", s->backup_dir, json_string_value(dest));
  k->s = s;
  k->req = req;
  k->work.data = k;
  json_decref(root);
  if (uv_queue_work(s->loop, &k->work, backup_work, backup_after) == 0) return LITH_HTTP_PENDING;
  free(k->dest);
  free(k);
  lith_http_respond_error(req, 500, "cannot queue the backup");
  return LITH_HTTP_DONE;
refuse:
  if (k != NULL) free(k->dest);
  free(k);
  json_decref(root);
  respond_lithd_error(req, &e);
  return LITH_HTTP_DONE;
}

/* ---- GET /v1/stats, GET /healthz --------------------------------------- */

static int h_stats(lith_http_req *req, void *arg) {
  lithd_server *s = arg;
  lith_stats *st = NULL;
  char buf[1024];

  if (!admit(s, req)) return LITH_HTTP_DONE;
  st = malloc(sizeof *st); /* ~3.5 KiB of histograms: not on the stack */
  if (st == NULL) {
    lith_http_respond_error(req, 500, "out of memory");
    return LITH_HTTP_DONE;
  }
  lith_stats_get(s->db, st);
  snprintf(buf, sizeof buf,
           "{\"commands\":%" PRIu64 ",\"batches\":%" PRIu64 ",\"failed\":%" PRIu64
           ",\"retried\":%" PRIu64 ",\"busy\":%" PRIu64 ",\"queue_depth\":%" PRIu64
           ",\"wal_pages\":%" PRIu64 ",\"checkpoints\":%" PRIu64
           ",\"checkpoint_errors\":%" PRIu64 ",\"tx_p50_ns\":%" PRIu64
           ",\"tx_p99_ns\":%" PRIu64 ",\"wait_p50_ns\":%" PRIu64 ",\"wait_p99_ns\":%" PRIu64
           ",\"tx_max_ns\":%" PRIu64 "}",
           st->commands, st->batches, st->failed, st->retried, st->busy, st->queue_depth,
           st->wal_pages, st->checkpoints, st->checkpoint_errors,
           lith_lat_quantile_ns(st->tx_lat, NULL, 0.5), lith_lat_quantile_ns(st->tx_lat, NULL, 0.99),
           lith_lat_quantile_ns(st->wait_lat, NULL, 0.5),
           lith_lat_quantile_ns(st->wait_lat, NULL, 0.99), st->tx_ns_max);
  free(st);
  lith_http_respond_json(req, 200, buf);
  return LITH_HTTP_DONE;
}

static int h_healthz(lith_http_req *req, void *arg) {
  lith_http_respond_json(req, 200, "{\"ok\":true}");
  return LITH_HTTP_DONE;
}

/* ---- GET /metrics (Prometheus text format 0.0.4) ------------------------ */

/* A growing text buffer; `failed` sticks once memory ran out. */
struct mbuf {
  char *p;
  size_t len, cap;
  int failed;
};

static void mb_printf(struct mbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void mb_printf(struct mbuf *b, const char *fmt, ...) {
  va_list ap;

  if (b->failed) return;
  for (;;) {
    size_t room = b->cap - b->len;
    va_start(ap, fmt);
    int n = vsnprintf(b->p + b->len, room, fmt, ap);
    va_end(ap);
    if (n < 0) {
      b->failed = 1;
      return;
    }
    if ((size_t)n < room) {
      b->len += (size_t)n;
      return;
    }
    {
      size_t cap = b->cap * 2 + (size_t)n + 1;
      char *np = realloc(b->p, cap);
      if (np == NULL) {
        b->failed = 1;
        return;
      }
      b->p = np;
      b->cap = cap;
    }
  }
}

static void mb_head(struct mbuf *b, const char *name, const char *type, const char *help) {
  mb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void mb_metric(struct mbuf *b, const char *name, const char *type, const char *help,
                      uint64_t v) {
  mb_head(b, name, type, help);
  mb_printf(b, "%s %" PRIu64 "\n", name, v);
}

/* A latency histogram in seconds from lith's fine buckets (lith.h), coarsened
 * to the bounds below: a fine bucket counts under `le` when all it holds is
 * shorter than `le` (its exclusive upper bound is <= le), so every bound is
 * exact, never an estimate. */
static void mb_latency(struct mbuf *b, const char *name, const char *help, const uint64_t *lat,
                       uint64_t sum_ns) {
  static const double le_s[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                0.025,  0.05,    0.1,    0.25,  0.5,    1,     2.5, 5, 10};
  size_t k;
  int i = 0;
  uint64_t cum = 0, total = 0;

  for (i = 0; i < LITH_LAT_BUCKETS; i++) total += lat[i];
  mb_head(b, name, "histogram", help);
  i = 0;
  for (k = 0; k < sizeof le_s / sizeof le_s[0]; k++) {
    uint64_t le_ns = (uint64_t)(le_s[k] * 1e9 + 0.5);
    while (i < LITH_LAT_BUCKETS - 1 && lith_lat_bucket_upper_ns(i) <= le_ns) cum += lat[i++];
    mb_printf(b, "%s_bucket{le=\"%g\"} %" PRIu64 "\n", name, le_s[k], cum);
  }
  mb_printf(b, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n", name, total);
  mb_printf(b, "%s_sum %.9f\n", name, (double)sum_ns / 1e9);
  mb_printf(b, "%s_count %" PRIu64 "\n", name, total);
}

static int h_metrics(lith_http_req *req, void *arg) {
  lithd_server *s = arg;
  struct mbuf b = {NULL, 0, 0, 0};
  lith_stats *st = NULL;
  lith_http_stats hs;
  uint64_t cum = 0, total = 0;
  int k, code;

  if (!admit(s, req)) return LITH_HTTP_DONE;
  st = malloc(sizeof *st);
  b.cap = 8192;
  b.p = malloc(b.cap);
  if (st == NULL || b.p == NULL) {
    free(st);
    free(b.p);
    lith_http_respond_error(req, 500, "out of memory");
    return LITH_HTTP_DONE;
  }
  lith_stats_get(s->db, st);
  lith_http_stats_get(s->http, &hs);

  mb_metric(&b, "lith_commands_total", "counter", "Commands answered.", st->commands);
  mb_metric(&b, "lith_batches_total", "counter", "Write transactions (batches) run.", st->batches);
  mb_metric(&b, "lith_failed_total", "counter", "Commands answered with an error.", st->failed);
  mb_metric(&b, "lith_retried_total", "counter",
            "Command runs repeated after a transaction abort.", st->retried);
  mb_metric(&b, "lith_busy_total", "counter", "Batches refused at BEGIN by another writer.",
            st->busy);
  mb_metric(&b, "lith_queue_depth", "gauge", "Commands queued now.", st->queue_depth);
  mb_metric(&b, "lith_wal_pages", "gauge", "Pages in the WAL after the last commit or checkpoint.",
            st->wal_pages);
  mb_metric(&b, "lith_checkpoints_total", "counter", "Checkpoints run.", st->checkpoints);
  mb_metric(&b, "lith_checkpoint_errors_total", "counter", "Checkpoints that failed.",
            st->checkpoint_errors);

  /* Batch sizes: bucket k holds [2^k, 2^(k+1)), so le = 2^(k+1) - 1; the
   * last one (2048 and more) only under +Inf. */
  for (k = 0; k < LITH_HIST_BUCKETS; k++) total += st->batch_hist[k];
  mb_head(&b, "lith_batch_size", "histogram", "Commands per batch (_sum: commands answered).");
  for (k = 0; k < LITH_HIST_BUCKETS - 1; k++) {
    cum += st->batch_hist[k];
    mb_printf(&b, "lith_batch_size_bucket{le=\"%llu\"} %" PRIu64 "\n",
              (1ULL << (k + 1)) - 1, cum);
  }
  mb_printf(&b, "lith_batch_size_bucket{le=\"+Inf\"} %" PRIu64 "\n", total);
  mb_printf(&b, "lith_batch_size_sum %" PRIu64 "\n", st->commands);
  mb_printf(&b, "lith_batch_size_count %" PRIu64 "\n", total);

  mb_latency(&b, "lith_transaction_seconds", "Write transactions, BEGIN IMMEDIATE to end of COMMIT.",
             st->tx_lat, st->tx_ns_total);
  mb_latency(&b, "lith_queue_wait_seconds", "Time commands waited queued before their batch began.",
             st->wait_lat, st->wait_ns_total);

  mb_metric(&b, "lithd_http_connections_total", "counter", "HTTP connections accepted.",
            hs.connections);
  mb_metric(&b, "lithd_http_connections_open", "gauge", "HTTP connections open now.",
            hs.connections_open);
  mb_metric(&b, "lithd_http_pending", "gauge", "Requests waiting for their answer now.",
            hs.pending);
  mb_head(&b, "lithd_http_responses_total", "counter",
          "HTTP requests finished, by status (499: the client left first).");
  for (code = 100; code <= 599; code++) {
    uint64_t n = lith_http_status_count(s->http, code);
    if (n > 0) mb_printf(&b, "lithd_http_responses_total{code=\"%d\"} %" PRIu64 "\n", code, n);
  }
  free(st);
  if (b.failed) {
    free(b.p);
    lith_http_respond_error(req, 500, "out of memory");
    return LITH_HTTP_DONE;
  }
  lith_http_respond(req, 200, "text/plain; version=0.0.4; charset=utf-8", b.p, b.len);
  free(b.p);
  return LITH_HTTP_DONE;
}

/* ---- The write connection's authorizer ----------------------------------- */

int lithd_authorizer(void *ctx, int action, const char *a, const char *b, const char *c,
                     const char *d) {
  /* PRAGMAs whose argument names what to read, not a value to set. */
  static const char *const reading[] = {"table_info",   "table_xinfo",       "table_list",
                                        "index_list",   "index_info",        "index_xinfo",
                                        "foreign_key_list", "foreign_key_check",
                                        "integrity_check",  "quick_check"};
  size_t i;
  (void)ctx, (void)c, (void)d;
  switch (action) {
  case SQLITE_ATTACH:
  case SQLITE_DETACH: return SQLITE_DENY;
  case SQLITE_FUNCTION:
    /* load_extension loads code; fts3_tokenizer hands out (one argument)
     * and takes (two, when bound) a pointer to C functions. */
    return b != NULL && (strcasecmp(b, "load_extension") == 0 || strcasecmp(b, "fts3_tokenizer") == 0)
               ? SQLITE_DENY
               : SQLITE_OK;
  case SQLITE_PRAGMA:
    if (b == NULL) return SQLITE_OK; /* "PRAGMA x": reads x */
    for (i = 0; i < sizeof reading / sizeof reading[0]; i++)
      if (a != NULL && strcmp(a, reading[i]) == 0) return SQLITE_OK;
    return SQLITE_DENY;
  default: return SQLITE_OK;
  }
}

/* ---- Routes ------------------------------------------------------------ */

int lithd_server_start(lithd_server *s) {
  int rc;
  if ((rc = lith_http_route(s->http, "POST", "/v1/do", LITH_HTTP_EXACT, h_do, s)) != LITH_HTTP_OK)
    return rc;
  if ((rc = lith_http_route(s->http, "POST", "/v1/batch", LITH_HTTP_EXACT, h_batch, s)) !=
      LITH_HTTP_OK)
    return rc;
  if ((rc = lith_http_route(s->http, "POST", "/v1/query", LITH_HTTP_EXACT, h_query, s)) !=
      LITH_HTTP_OK)
    return rc;
  if ((rc = lith_http_route(s->http, "POST", COMMANDS_PREFIX, LITH_HTTP_PREFIX, h_command, s)) !=
      LITH_HTTP_OK)
    return rc;
  if ((rc = lith_http_route(s->http, "GET", "/v1/commands", LITH_HTTP_EXACT, h_commands, s)) !=
      LITH_HTTP_OK)
    return rc;
  if ((rc = lith_http_route(s->http, "POST", "/v1/backup", LITH_HTTP_EXACT, h_backup, s)) !=
      LITH_HTTP_OK)
    return rc;
  if ((rc = lith_http_route(s->http, "GET", "/v1/stats", LITH_HTTP_EXACT, h_stats, s)) !=
      LITH_HTTP_OK)
    return rc;
  if ((rc = lith_http_route(s->http, "GET", "/metrics", LITH_HTTP_EXACT, h_metrics, s)) !=
      LITH_HTTP_OK)
    return rc;
  if ((rc = lith_http_route(s->http, "GET", "/healthz", LITH_HTTP_EXACT, h_healthz, s)) !=
      LITH_HTTP_OK)
    return rc;
  if (uv_timer_init(s->loop, &s->park_timer) != 0) return LITH_HTTP_ERROR;
  s->park_timer.data = s;
  uv_check_init(s->loop, &s->park_check);
  s->park_check.data = s;
  s->started = 1;
  return LITH_HTTP_OK;
}

void lithd_server_stop(lithd_server *s) {
  if (!s->started || s->stopped) return;
  s->stopped = 1;
  park_drain(s); /* refuses everything waiting: stopping */
  uv_close((uv_handle_t *)&s->park_timer, NULL);
  uv_close((uv_handle_t *)&s->park_check, NULL);
}
