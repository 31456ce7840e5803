/*
 * srv_routes — the kanban server's requests (see srv_app.h).
 *
 * Design:
 *   - A request that needs the database becomes a `job`: one allocation that
 *     holds the HTTP handle, who is asking, the parsed input, the kb_action or
 *     query, and the continuation. A job moves between threads as a chain of
 *     steps, each ending in a callback on the loop thread:
 *        session lookup (cache, or kb_read_session on the pool)
 *          -> a read (lith_uv_read: lith_read on libuv's pool)
 *             or a command (lith_uv_submit; answered after the commit)
 *          -> the answer, then the job is freed.
 *     No SQLite call ever runs on the loop thread, and no answer to a write
 *     leaves before its batch committed.
 *   - A client that leaves mid-chain changes nothing: the step finishes, the
 *     answer returns LITH_HTTP_GONE and the job is freed just the same; a
 *     command that was submitted stays committed (and its op id makes the
 *     browser's retry harmless).
 *   - Everything is checked before anything is submitted: same origin for
 *     every POST (CSRF), the body's shape (400), ids in the path (404). The
 *     model checks what needs the database — membership (403), existence
 *     (404), limits (422), the card's move version (409) — inside the
 *     command, in the same transaction as the change.
 *   - Pages answer errors as HTML (a signed-out visitor is sent to /signin);
 *     the JSON API under /boards/ID/... answers {"error":{"code","message"}}
 *     with the status, like every error of the HTTP layer.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "board.h"
#include "srv_app.h"
#include "srv_util.h"
#include "web_page.h"

#define PRUNE_MS (60 * 60 * 1000)
#define OPS_KEEP_MS ((int64_t)7 * 24 * 60 * 60 * 1000)

enum { J_PAGE = 0, J_API = 1 };

typedef struct job job;
typedef void (*job_fn)(job *j);

struct job {
  lith_uv_req ureq;      /* first: the bridge callback gets &ureq */
  struct job *pend_next; /* app->pend_* while waiting to be submitted */
  lith_command pend_fn;
  void *pend_arg;
  lith_uv_read_req rreq; /* a read on the pool (lith_uv_read) */
  auth_task task;
  srv_app *app;
  lith_http_req *req;
  int mode; /* J_PAGE or J_API: how errors are answered */

  char token_hash[AUTH_HASH_LEN + 1];
  auth_who who;

  job_fn next; /* after the session is known */
  job_fn after_read;
  job_fn after_cmd;
  int rc;
  char errmsg[LITH_ERRMSG_MAX];

  json_t *body;  /* a JSON body; the action's strings point into it */
  srv_form form; /* a form body */
  kb_action act;
  const char *what; /* the action's name, for messages */

  kb_board_query bq;
  kb_boards_query lq;
  kb_board_version_query vq;
  kb_user_query uq;
  kb_session_query sq;
  kb_user_args ua;
  kb_session_args sa;
  char token[AUTH_TOKEN_LEN + 1];
  char pw_hash[AUTH_PW_HASH_MAX];
  char password[AUTH_PW_MAX + 1];
  char name[KB_NAME_MAX + 1];
  char op[KB_OP_ID_MAX + 1];
  int pw_ok;
};

/* ---- Jobs ------------------------------------------------------------------------ */

static job *job_new(srv_app *app, lith_http_req *req, int mode) {
  job *j = calloc(1, sizeof *j);
  if (j == NULL) {
    lith_http_respond_error(req, 500, "out of memory");
    return NULL;
  }
  j->app = app;
  j->req = req;
  j->mode = mode;
  return j;
}

static void job_free(job *j) {
  if (j == NULL)
    return;
  json_decref(j->body);
  srv_form_free(&j->form);
  kb_board_free(j->bq.board);
  kb_boards_free(j->lq.boards, j->lq.n_boards);
  sodium_memzero(j->password, sizeof j->password);
  free(j);
}

/* ---- Answers ----------------------------------------------------------------------- */

static void security_headers(lith_http_req *req) {
  lith_http_add_header(req, "x-content-type-options", "nosniff");
  lith_http_add_header(req, "referrer-policy", "same-origin");
}

static void respond_html(lith_http_req *req, int status, char *html /* freed */) {
  if (html == NULL) {
    lith_http_respond_error(req, 500, "out of memory");
    return;
  }
  security_headers(req);
  lith_http_add_header(req, "content-security-policy",
                       "default-src 'self'; style-src 'self' 'unsafe-inline'; "
                       "frame-ancestors 'none'; form-action 'self'; base-uri 'none'");
  lith_http_add_header(req, "cache-control", "no-store");
  lith_http_respond(req, status, "text/html; charset=utf-8", html, strlen(html));
  free(html);
}

static void redirect(lith_http_req *req, const char *to) {
  lith_http_add_header(req, "location", to);
  lith_http_add_header(req, "cache-control", "no-store");
  lith_http_respond(req, 303, NULL, NULL, 0);
}

/* {"error":{"code","message"}} plus, for a stale move, the card's version. */
static void api_error(lith_http_req *req, int status, const char *code, const char *message,
                      int64_t version) {
  json_t *o = json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", message);
  char *s;
  if (o != NULL && version > 0)
    json_object_set_new(o, "version", json_integer(version));
  s = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  if (s == NULL) {
    lith_http_respond_error(req, 500, "out of memory");
    return;
  }
  security_headers(req);
  lith_http_respond_json(req, status, s);
  free(s);
}

static void api_json(lith_http_req *req, int status, json_t *o /* stolen */) {
  char *s = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  if (s == NULL) {
    lith_http_respond_error(req, 500, "out of memory");
    return;
  }
  security_headers(req);
  lith_http_add_header(req, "cache-control", "no-store");
  lith_http_respond_json(req, status, s);
  free(s);
}

/* An error page or a JSON error, as the job asks. */
static void fail(job *j, int status, const char *code, const char *message) {
  if (j->mode == J_API) {
    api_error(j->req, status, code, message, 0);
  } else {
    web_viewer v = {j->who.user_id, j->who.name};
    respond_html(j->req, status, web_page_error(j->who.user_id > 0 ? &v : NULL, status, message));
  }
}

/* A lith or model result code as status, code and message. */
static int status_of(int rc, const char **code) {
  switch (rc) {
  case KB_NOT_FOUND: *code = "not_found"; return 404;
  case KB_NO_USER: *code = "no_user"; return 404;
  case KB_FORBIDDEN: *code = "forbidden"; return 403;
  case KB_STALE: *code = "stale"; return 409;
  case KB_BAD_INPUT: *code = "bad_input"; return 422;
  case KB_EXISTS: *code = "exists"; return 409;
  case KB_OP_CONFLICT: *code = "op_conflict"; return 409;
  case LITH_QUEUE_FULL: *code = "busy"; return 503;
  case LITH_CLOSED: *code = "stopping"; return 503;
  case LITH_BUSY: *code = "busy"; return 503;
  default: *code = "internal"; return 500;
  }
}

static const char *message_of(int rc, const char *errmsg) {
  switch (rc) {
  case KB_NOT_FOUND: return "No such board, list or card (or it is not on this board).";
  case KB_FORBIDDEN: return "You are not a member of this board.";
  case KB_STALE: return "Someone else moved this card meanwhile: the board now shows where it is.";
  case LITH_QUEUE_FULL:
  case LITH_BUSY: return "The server is busy; try again in a moment.";
  case LITH_CLOSED: return "The server is stopping.";
  default: break;
  }
  /* the model's message names what was wrong ("no user named carol") */
  if (rc == KB_BAD_INPUT || rc == KB_EXISTS || rc == KB_OP_CONFLICT || rc == KB_NO_USER)
    return errmsg[0] != '\0' ? errmsg : kb_errstr(rc);
  return "Something went wrong on the server.";
}

/* Answer a failed step's rc; 503s carry Retry-After. */
static void fail_rc(job *j, int rc, int64_t version) {
  const char *code;
  int status = status_of(rc, &code);
  const char *msg = message_of(rc, j->errmsg);
  if (j->mode == J_PAGE && rc == KB_NOT_FOUND)
    msg = "There is no such board.";
  if (j->mode == J_PAGE && rc == KB_FORBIDDEN)
    msg = "This board belongs to others: ask one of its members to add you (by your user name).";
  if (status >= 500 && status != 503 && j->errmsg[0] != '\0')
    fprintf(stderr, "kanban: %s %s: %s: %s\n", lith_http_req_method(j->req), lith_http_req_path(j->req),
            kb_errstr(rc), j->errmsg);
  if (status == 503)
    lith_http_add_header(j->req, "retry-after", "1");
  if (j->mode == J_API)
    api_error(j->req, status, code, msg, version);
  else
    fail(j, status, code, msg);
}

/* ---- Steps: reads on the pool, commands through the bridge ----------------------- */

static void read_done(lith_uv_read_req *r) { /* the loop, after the read */
  job *j = r->data;
  j->rc = r->rc;
  snprintf(j->errmsg, sizeof j->errmsg, "%s", r->errmsg);
  j->after_read(j);
}

/* Run fn(rx, j) in lith_read on the pool, then after(j) on the loop. */
static void pool_read(job *j, lith_reader fn, job_fn after) {
  j->after_read = after;
  j->rreq.data = j;
  if (lith_uv_read(j->app->db, j->app->loop, &j->rreq, fn, j, read_done) != LITH_OK) {
    fail_rc(j, LITH_CLOSED, 0);
    job_free(j);
  }
}

static void cmd_done(lith_uv_req *u) { /* the loop, after the commit */
  job *j = (job *)u;
  j->rc = u->req.rc;
  snprintf(j->errmsg, sizeof j->errmsg, "%s", u->req.errmsg);
  j->after_cmd(j);
}

/* Submit fn(tx, arg) as one lith command; after(j) runs once it committed
 * (or failed). */
#define SUBMIT_CHUNK 16

/* Submit every waiting command, in order. */
static void flush_pending(srv_app *app) {
  job *j;
  while ((j = app->pend_head) != NULL) {
    int rc = LITH_CLOSED;
    app->pend_head = j->pend_next;
    if (app->pend_head == NULL)
      app->pend_tail = NULL;
    app->pend_n--;
    if (app->bridge != NULL)
      rc = lith_uv_submit(app->bridge, &j->ureq, j->pend_fn, j->pend_arg, cmd_done);
    if (rc != LITH_OK) {
      fail_rc(j, rc, 0);
      job_free(j);
    }
  }
  if (app->pend_open)
    uv_check_stop(&app->pend_check);
}

static void on_pend_check(uv_check_t *c) { flush_pending(c->data); }

/* Commands go to the writer SUBMIT_CHUNK at a time, and what is left at the
 * end of the loop iteration that parsed them (a uv_check_t): with many
 * clients one iteration reads dozens of requests, and the writer then finds
 * them together and commits them as one batch while the loop parses the
 * rest, instead of being woken for each. */
static void submit(job *j, lith_command fn, void *arg, job_fn after) {
  srv_app *app = j->app;
  if (app->bridge == NULL || !app->pend_open) {
    fail_rc(j, LITH_CLOSED, 0);
    job_free(j);
    return;
  }
  j->after_cmd = after;
  j->pend_fn = fn;
  j->pend_arg = arg;
  j->pend_next = NULL;
  if (app->pend_tail != NULL)
    app->pend_tail->pend_next = j;
  else
    app->pend_head = j;
  app->pend_tail = j;
  if (++app->pend_n >= SUBMIT_CHUNK)
    flush_pending(app);
  else
    uv_check_start(&app->pend_check, on_pend_check);
}

void srv_routes_close(srv_app *app) {
  if (!app->pend_open)
    return;
  flush_pending(app);
  uv_close((uv_handle_t *)&app->pend_check, NULL);
  app->pend_open = 0;
}

/* ---- Sessions ------------------------------------------------------------------------ */

static void not_signed_in(job *j) {
  if (j->mode == J_API) {
    api_error(j->req, 401, "unauthorized", "Sign in first.", 0);
  } else {
    if (j->token_hash[0] != '\0')
      auth_cookie_set(j->req, NULL); /* a stale cookie */
    redirect(j->req, "/signin");
  }
  job_free(j);
}

static int read_session(lith_rx *rx, void *arg) {
  job *j = arg;
  j->sq.token_hash = j->token_hash;
  return kb_read_session(rx, &j->sq);
}

static void session_read(job *j) {
  if (j->rc == KB_NOT_FOUND) {
    not_signed_in(j);
    return;
  }
  if (j->rc != LITH_OK) {
    fail_rc(j, j->rc, 0);
    job_free(j);
    return;
  }
  j->who.user_id = j->sq.user_id;
  j->who.expires_ms = j->sq.expires_ms;
  snprintf(j->who.name, sizeof j->who.name, "%s", j->sq.name);
  auth_cache_put(j->app->sessions, j->token_hash, &j->who);
  j->next(j);
}

/* Find who is asking, then next(j); a visitor without a valid session is
 * answered (401 or a redirect to /signin) instead. */
static void with_session(job *j, job_fn next) {
  if (!auth_request_hash(j->req, j->token_hash)) {
    j->token_hash[0] = '\0';
    not_signed_in(j);
    return;
  }
  if (auth_cache_get(j->app->sessions, j->token_hash, &j->who)) {
    next(j);
    return;
  }
  j->next = next;
  pool_read(j, read_session, session_read);
}

/* ---- Small handlers --------------------------------------------------------------------- */

static int h_root(lith_http_req *req, void *arg) {
  char hash[AUTH_HASH_LEN + 1];
  (void)arg;
  redirect(req, auth_request_hash(req, hash) ? "/boards" : "/signin");
  return LITH_HTTP_DONE;
}

static int h_healthz(lith_http_req *req, void *arg) {
  srv_app *app = arg;
  lith_http_respond(req, app->stopping ? 503 : 200, "text/plain; charset=utf-8",
                    app->stopping ? "stopping\n" : "ok\n", app->stopping ? 9 : 3);
  return LITH_HTTP_DONE;
}

static int h_static(lith_http_req *req, void *arg) {
  const char *name = lith_http_req_path(req) + strlen("/static/");
  const web_asset *a = web_asset_find(name);
  char want[64];
  (void)arg;
  if (a == NULL || strstr(name, ".html") != NULL) {
    lith_http_respond_error(req, 404, "no such file");
    return LITH_HTTP_DONE;
  }
  snprintf(want, sizeof want, "v=%s", web_assets_version);
  /* a URL with the current version never changes: cache it for good */
  lith_http_add_header(req, "cache-control",
                       strcmp(lith_http_req_query(req), want) == 0 ? "public, max-age=31536000, immutable"
                                                                   : "no-cache");
  security_headers(req);
  lith_http_respond(req, 200, web_asset_type(name), a->data, a->len);
  return LITH_HTTP_DONE;
}

static int h_signin_page(lith_http_req *req, void *arg) {
  (void)arg;
  respond_html(req, 200, web_page_signin(NULL, NULL));
  return LITH_HTTP_DONE;
}

/* Refuse a POST from another site (403). 1 if refused (answered). */
static int cross_site(lith_http_req *req, int mode) {
  if (srv_same_origin(req))
    return 0;
  if (mode == J_API)
    api_error(req, 403, "cross_site", "This request did not come from a page of this server.", 0);
  else
    lith_http_respond_error(req, 403, "This request did not come from a page of this server.");
  return 1;
}

/* ---- Sign-up, sign-in, sign-out ---------------------------------------------------------- */

/* Parse the name/password form into j; answers and returns -1 when bad. */
static int auth_form(job *j, int signup) {
  size_t len;
  const char *body = lith_http_req_body(j->req, &len);
  const char *name = NULL, *pw = NULL, *why;

  switch (srv_auth_form(&j->form, body, len, signup, &name, &pw, &why)) {
  case 0: break;
  case 400: respond_html(j->req, 400, web_page_signin("The form was malformed.", NULL)); return -1;
  default: respond_html(j->req, 422, web_page_signin(why, signup ? NULL : name)); return -1;
  }
  snprintf(j->name, sizeof j->name, "%s", name);
  snprintf(j->password, sizeof j->password, "%s", pw);
  return 0;
}

static void signed_in(job *j) {
  auth_who who;
  memset(&who, 0, sizeof who);
  who.user_id = j->sa.user_id;
  who.expires_ms = j->sa.expires_ms;
  snprintf(who.name, sizeof who.name, "%s", j->name);
  auth_cache_put(j->app->sessions, j->token_hash, &who);
  auth_cookie_set(j->req, j->token);
  redirect(j->req, "/boards");
}

/* The gate is full, or stopping: 503 with the form refilled. */
static void auth_busy(job *j) {
  lith_http_add_header(j->req, "retry-after", "2");
  respond_html(j->req, 503, web_page_signin("Too many sign-ins at once; try again in a moment.", j->name));
  job_free(j);
}

static void new_session(job *j, int64_t user_id) {
  auth_token_new(j->token, j->token_hash);
  j->sa.user_id = user_id;
  j->sa.token_hash = j->token_hash;
  j->sa.expires_ms = kb_now_ms() + (int64_t)AUTH_SESSION_DAYS * 86400 * 1000;
}

/* Sign-up: one command creates the user and the first session. */
static int signup_cmd(lith_tx *tx, void *arg) {
  job *j = arg;
  int rc = kb_create_user(tx, &j->ua);
  if (rc != LITH_OK)
    return rc;
  j->sa.user_id = j->ua.user_id;
  return kb_create_session(tx, &j->sa);
}

static void signup_done(job *j) {
  if (j->rc == KB_EXISTS) {
    respond_html(j->req, 409, web_page_signin("That name is taken; choose another.", NULL));
  } else if (j->rc != LITH_OK) {
    fail_rc(j, j->rc, 0);
  } else {
    signed_in(j);
  }
  job_free(j);
}

static void signup_hash(auth_task *t) { /* pool */
  job *j = (job *)((char *)t - offsetof(job, task));
  j->rc = auth_pw_hash(j->password, j->pw_hash) == 0 ? LITH_OK : LITH_NOMEM;
}

static void signup_hashed(auth_task *t, int status) { /* loop */
  job *j = (job *)((char *)t - offsetof(job, task));
  if (status != 0) {
    auth_busy(j);
    return;
  }
  if (j->rc != LITH_OK) {
    fail_rc(j, j->rc, 0);
    job_free(j);
    return;
  }
  j->ua.name = j->name;
  j->ua.pw_hash = j->pw_hash;
  new_session(j, 0);
  submit(j, signup_cmd, j, signup_done);
}

static int h_signup(lith_http_req *req, void *arg) {
  srv_app *app = arg;
  job *j;
  if (cross_site(req, J_PAGE))
    return LITH_HTTP_DONE;
  if ((j = job_new(app, req, J_PAGE)) == NULL)
    return LITH_HTTP_DONE;
  if (auth_form(j, 1) != 0) {
    job_free(j);
    return LITH_HTTP_DONE;
  }
  j->task.run = signup_hash;
  j->task.done = signup_hashed;
  if (auth_gate_submit(app->gate, &j->task) != 0)
    auth_busy(j);
  return LITH_HTTP_PENDING;
}

static void signin_done(job *j) {
  if (j->rc != LITH_OK)
    fail_rc(j, j->rc, 0);
  else
    signed_in(j);
  job_free(j);
}

static int read_user(lith_rx *rx, void *arg) {
  job *j = arg;
  j->uq.name = j->name;
  return kb_read_user(rx, &j->uq);
}

static void signin_check(auth_task *t) { /* pool: look the user up, verify */
  job *j = (job *)((char *)t - offsetof(job, task));
  j->rc = lith_read(j->app->db, read_user, j);
  if (j->rc == LITH_OK) {
    j->pw_ok = auth_pw_verify(j->uq.pw_hash, j->password);
  } else {
    const char *m = lith_errmsg(j->app->db);
    snprintf(j->errmsg, sizeof j->errmsg, "%s", m != NULL ? m : "");
    (void)auth_pw_verify(NULL, j->password); /* as long as a wrong password */
    j->pw_ok = 0;
  }
}

/* The throttle's keys of a sign-in: its name, and its client's address
 * (without the port). */
#define FREE_TRIES_NAME 5
#define FREE_TRIES_ADDR 20

static void throttle_keys(const job *j, char *name_key, char *addr_key, size_t n) {
  const char *peer = lith_http_req_peer(j->req);
  const char *end = NULL;
  if (peer == NULL)
    peer = "unknown";
  if (peer[0] == '[') { /* [v6]:port */
    peer++;
    end = strchr(peer, ']');
  } else {
    end = strrchr(peer, ':');
  }
  snprintf(name_key, n, "n:%s", j->name);
  snprintf(addr_key, n, "a:%.*s", end ? (int)(end - peer) : (int)strlen(peer), peer);
}

static void signin_checked(auth_task *t, int status) { /* loop */
  job *j = (job *)((char *)t - offsetof(job, task));
  char name_key[96], addr_key[96];
  if (status != 0) {
    auth_busy(j);
    return;
  }
  if (j->rc != LITH_OK && j->rc != KB_NOT_FOUND) {
    fail_rc(j, j->rc, 0);
    job_free(j);
    return;
  }
  throttle_keys(j, name_key, addr_key, sizeof name_key);
  if (!j->pw_ok) {
    int64_t now = kb_now_ms();
    auth_throttle_fail(j->app->throttle, name_key, FREE_TRIES_NAME, now);
    auth_throttle_fail(j->app->throttle, addr_key, FREE_TRIES_ADDR, now);
    respond_html(j->req, 401, web_page_signin("Wrong name or password.", j->name));
    job_free(j);
    return;
  }
  auth_throttle_forget(j->app->throttle, name_key);
  new_session(j, j->uq.user_id);
  submit(j, kb_create_session, &j->sa, signin_done);
}

static int h_signin(lith_http_req *req, void *arg) {
  srv_app *app = arg;
  job *j;
  if (cross_site(req, J_PAGE))
    return LITH_HTTP_DONE;
  if ((j = job_new(app, req, J_PAGE)) == NULL)
    return LITH_HTTP_DONE;
  if (auth_form(j, 0) != 0) {
    job_free(j);
    return LITH_HTTP_DONE;
  }
  /* Too many failures for this name or from this address: wait, without
   * spending a hash on it. */
  char name_key[96], addr_key[96];
  throttle_keys(j, name_key, addr_key, sizeof name_key);
  int64_t now = kb_now_ms();
  int64_t wait = auth_throttle_wait(app->throttle, name_key, now);
  int64_t wait_addr = auth_throttle_wait(app->throttle, addr_key, now);
  if (wait_addr > wait)
    wait = wait_addr;
  if (wait > 0) {
    char msg[160], secs[24];
    long long s = (long long)((wait + 999) / 1000);
    snprintf(secs, sizeof secs, "%lld", s);
    snprintf(msg, sizeof msg, "Too many failed sign-ins; try again in %lld second%s.", s, s == 1 ? "" : "s");
    lith_http_add_header(req, "retry-after", secs);
    respond_html(req, 429, web_page_signin(msg, j->name));
    job_free(j);
    return LITH_HTTP_DONE;
  }
  j->task.run = signin_check;
  j->task.done = signin_checked;
  if (auth_gate_submit(app->gate, &j->task) != 0)
    auth_busy(j);
  return LITH_HTTP_PENDING;
}

static void signout_done(job *j) {
  auth_cookie_set(j->req, NULL);
  redirect(j->req, "/signin");
  job_free(j);
}

static int h_signout(lith_http_req *req, void *arg) {
  srv_app *app = arg;
  job *j;
  if (cross_site(req, J_PAGE))
    return LITH_HTTP_DONE;
  if ((j = job_new(app, req, J_PAGE)) == NULL)
    return LITH_HTTP_DONE;
  if (!auth_request_hash(req, j->token_hash)) {
    signout_done(j);
    return LITH_HTTP_DONE;
  }
  auth_cache_drop(app->sessions, j->token_hash);
  j->sa.token_hash = j->token_hash;
  submit(j, kb_delete_session, &j->sa, signout_done);
  return LITH_HTTP_PENDING;
}

/* ---- Boards: the list, a new board ------------------------------------------------------ */

static int read_boards(lith_rx *rx, void *arg) {
  job *j = arg;
  j->lq.user_id = j->who.user_id;
  return kb_read_boards(rx, &j->lq);
}

static void boards_read(job *j) {
  web_viewer v = {j->who.user_id, j->who.name};
  if (j->rc != LITH_OK) {
    fail_rc(j, j->rc, 0);
  } else {
    char op[AUTH_TOKEN_LEN + 1], unused[AUTH_HASH_LEN + 1];
    auth_token_new(op, unused); /* a fresh op id for the new-board form */
    respond_html(j->req, 200, web_page_boards(&v, j->lq.boards, j->lq.n_boards, NULL, op));
  }
  job_free(j);
}

static void boards_page(job *j) { pool_read(j, read_boards, boards_read); }

static int h_boards(lith_http_req *req, void *arg) {
  job *j = job_new(arg, req, J_PAGE);
  if (j == NULL)
    return LITH_HTTP_DONE;
  with_session(j, boards_page);
  return LITH_HTTP_PENDING;
}

static void board_created(job *j) {
  char to[64];
  if (j->rc != LITH_OK) {
    fail_rc(j, j->rc, 0);
  } else if (j->mode == J_API) {
    api_json(j->req, 200,
             json_pack("{s:I, s:b}", "id", (json_int_t)j->act.out.id, "replayed", j->act.out.replayed));
  } else {
    snprintf(to, sizeof to, "/boards/%" PRId64, j->act.out.id);
    redirect(j->req, to);
  }
  job_free(j);
}

static void create_board(job *j) {
  j->act.user_id = j->who.user_id;
  submit(j, kb_create_board, &j->act, board_created);
}

/* ---- JSON bodies --------------------------------------------------------------------------- */

/* Answer 400 with `message` and return -1. */
static int bad_request(job *j, const char *message) {
  api_error(j->req, 400, "bad_request", message, 0);
  return -1;
}

/* The action's JSON body (j->what) into j->body and j->act. 0, or -1
 * answered. */
static int action_body(job *j) {
  size_t len;
  const char *body = lith_http_req_body(j->req, &len);
  char msg[128];

  if (!srv_content_type_is(j->req, "application/json")) {
    api_error(j->req, 415, "unsupported_media_type", "Send application/json.", 0);
    return -1;
  }
  if (srv_action_json(body, len, j->what, &j->body, &j->act, msg, sizeof msg) != 0)
    return bad_request(j, msg);
  return 0;
}

static int h_boards_post(lith_http_req *req, void *arg) {
  srv_app *app = arg;
  int api = srv_content_type_is(req, "application/json");
  job *j;
  if (cross_site(req, api ? J_API : J_PAGE))
    return LITH_HTTP_DONE;
  if ((j = job_new(app, req, api ? J_API : J_PAGE)) == NULL)
    return LITH_HTTP_DONE;
  if (api) {
    j->what = "create_board";
    if (action_body(j) != 0)
      goto answered;
  } else {
    size_t len;
    const char *body = lith_http_req_body(req, &len);
    if (srv_form_parse(&j->form, body, len) != 0 ||
        (j->act.title = srv_form_get(&j->form, "title")) == NULL ||
        (j->act.op_id = srv_form_get(&j->form, "op")) == NULL) {
      lith_http_respond_error(req, 400, "The form was malformed.");
      goto answered;
    }
  }
  with_session(j, create_board);
  return LITH_HTTP_PENDING;
answered:
  job_free(j);
  return LITH_HTTP_DONE;
}

/* ---- One board: page, data, events --------------------------------------------------------- */

enum { VIEW_PAGE, VIEW_DATA, VIEW_EVENTS };

static int read_board(lith_rx *rx, void *arg) {
  job *j = arg;
  j->bq.user_id = j->who.user_id;
  return kb_read_board(rx, &j->bq);
}

static int read_board_version(lith_rx *rx, void *arg) {
  job *j = arg;
  j->vq.user_id = j->who.user_id;
  return kb_read_board_version(rx, &j->vq);
}

static void board_read(job *j) {
  web_viewer v = {j->who.user_id, j->who.name};
  if (j->rc != LITH_OK) {
    fail_rc(j, j->rc, 0);
  } else if (j->mode == J_API) {
    char *s = web_board_json(j->bq.board, j->who.user_id);
    if (s == NULL) {
      lith_http_respond_error(j->req, 500, "out of memory");
    } else {
      security_headers(j->req);
      lith_http_add_header(j->req, "cache-control", "no-store");
      lith_http_respond_json(j->req, 200, s);
      free(s);
    }
  } else {
    respond_html(j->req, 200, web_page_board(&v, j->bq.board));
  }
  job_free(j);
}

static void board_view(job *j) { pool_read(j, read_board, board_read); }

static void events_checked(job *j) {
  if (j->rc != LITH_OK) {
    fail_rc(j, j->rc, 0);
  } else {
    /* the stream holds the request from now on (or has answered it) */
    srv_live_subscribe(j->app->live, j->req, j->vq.board_id);
  }
  job_free(j);
}

static void events_view(job *j) { pool_read(j, read_board_version, events_checked); }

static int h_board_get(lith_http_req *req, void *arg) {
  srv_app *app = arg;
  const char *p = lith_http_req_path(req) + strlen("/boards/");
  int64_t id;
  int view;
  job *j;

  if (!srv_parse_id(&p, &id))
    goto not_found;
  if (*p == '\0')
    view = VIEW_PAGE;
  else if (strcmp(p, "/data") == 0)
    view = VIEW_DATA;
  else if (strcmp(p, "/events") == 0)
    view = VIEW_EVENTS;
  else
    goto not_found;
  if ((j = job_new(app, req, view == VIEW_PAGE ? J_PAGE : J_API)) == NULL)
    return LITH_HTTP_DONE;
  j->bq.board_id = j->vq.board_id = id;
  with_session(j, view == VIEW_EVENTS ? events_view : board_view);
  return LITH_HTTP_PENDING;
not_found:
  lith_http_respond_error(req, 404, "not found");
  return LITH_HTTP_DONE;
}

/* ---- One board: actions -------------------------------------------------------------------- */

static void action_done(job *j) {
  const kb_result *o = &j->act.out;
  if (j->rc != LITH_OK) {
    fail_rc(j, j->rc, j->rc == KB_STALE ? o->version : 0);
  } else {
    api_json(j->req, 200,
             json_pack("{s:b, s:s, s:I, s:I, s:I, s:I, s:b}", "ok", 1, "action", j->what, "id",
                       (json_int_t)o->id, "board_version", (json_int_t)o->board_version, "version",
                       (json_int_t)o->version, "index", (json_int_t)o->index, "replayed", o->replayed));
  }
  job_free(j);
}

static lith_command action_cmd(const char *what) {
  static const struct {
    const char *name;
    lith_command fn;
  } table[] = {
      {"rename_board", kb_rename_board}, {"add_member", kb_add_member},     {"create_list", kb_create_list},
      {"rename_list", kb_rename_list},   {"archive_list", kb_archive_list}, {"create_card", kb_create_card},
      {"edit_card", kb_edit_card},       {"archive_card", kb_archive_card}, {"move_card", kb_move_card}};
  size_t i;
  for (i = 0; i < sizeof table / sizeof table[0]; i++)
    if (strcmp(table[i].name, what) == 0)
      return table[i].fn;
  return NULL;
}

/* The URL names the board: kb_action.board_id makes the model refuse a
 * list or card of another board (KB_NOT_FOUND, nothing changes), so
 * /boards/7/cards/3/move never moves card 3 of board 9. */
static int board_cmd(lith_tx *tx, void *arg) {
  job *j = arg;
  return action_cmd(j->what)(tx, &j->act);
}

static void run_action(job *j) {
  j->act.user_id = j->who.user_id;
  submit(j, board_cmd, j, action_done);
}

static int h_board_post(lith_http_req *req, void *arg) {
  srv_app *app = arg;
  const char *p = lith_http_req_path(req) + strlen("/boards/");
  int64_t board;
  job *j;

  if (cross_site(req, J_API))
    return LITH_HTTP_DONE;
  if ((j = job_new(app, req, J_API)) == NULL)
    return LITH_HTTP_DONE;
  if (!srv_parse_id(&p, &board) || srv_action_path(p, &j->what, &j->act) != 0) {
    api_error(req, 404, "not_found", "No such action.", 0);
    goto answered;
  }
  j->act.board_id = board;
  if (action_body(j) != 0)
    goto answered;
  with_session(j, run_action);
  return LITH_HTTP_PENDING;
answered:
  job_free(j);
  return LITH_HTTP_DONE;
}

/* ---- Housekeeping --------------------------------------------------------------------------- */

static void pruned(lith_uv_req *u) {
  kb_prune_args *pa = u->req.data;
  if (u->req.rc == LITH_OK && (pa->sessions > 0 || pa->ops > 0))
    fprintf(stderr, "kanban: pruned %" PRId64 " expired sessions, %" PRId64 " old op ids\n", pa->sessions,
            pa->ops);
  free(u);
}

static void on_prune(uv_timer_t *t) {
  srv_app *app = t->data;
  struct {
    lith_uv_req u;
    kb_prune_args pa;
  } * p;
  if (app->bridge == NULL || (p = calloc(1, sizeof *p)) == NULL)
    return;
  p->pa.ops_before_ms = kb_now_ms() - OPS_KEEP_MS;
  p->u.req.data = &p->pa;
  if (lith_uv_submit(app->bridge, &p->u, kb_prune, &p->pa, pruned) != LITH_OK)
    free(p);
}

void srv_prune_start(srv_app *app) {
  uv_timer_init(app->loop, &app->prune);
  app->prune.data = app;
  app->prune_open = 1;
  uv_timer_start(&app->prune, on_prune, 1000, PRUNE_MS);
  uv_unref((uv_handle_t *)&app->prune);
}

/* ---- Routes ------------------------------------------------------------------------------------ */

int srv_routes_add(srv_app *app) {
  static const struct {
    const char *method, *path;
    int match;
    lith_http_handler fn;
  } routes[] = {
      {"GET", "/", LITH_HTTP_EXACT, h_root},
      {"GET", "/healthz", LITH_HTTP_EXACT, h_healthz},
      {"GET", "/static/", LITH_HTTP_PREFIX, h_static},
      {"GET", "/signin", LITH_HTTP_EXACT, h_signin_page},
      {"POST", "/signin", LITH_HTTP_EXACT, h_signin},
      {"POST", "/signup", LITH_HTTP_EXACT, h_signup},
      {"POST", "/signout", LITH_HTTP_EXACT, h_signout},
      {"GET", "/boards", LITH_HTTP_EXACT, h_boards},
      {"POST", "/boards", LITH_HTTP_EXACT, h_boards_post},
      {"GET", "/boards/", LITH_HTTP_PREFIX, h_board_get},
      {"POST", "/boards/", LITH_HTTP_PREFIX, h_board_post},
  };
  size_t i;
  for (i = 0; i < sizeof routes / sizeof routes[0]; i++) {
    int rc = lith_http_route(app->http, routes[i].method, routes[i].path, routes[i].match, routes[i].fn, app);
    if (rc != LITH_HTTP_OK)
      return rc;
  }
  uv_check_init(app->loop, &app->pend_check);
  app->pend_check.data = app;
  app->pend_open = 1;
  return LITH_HTTP_OK;
}
