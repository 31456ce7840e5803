/*
 * srv_util — small pieces the kanban server's handlers share: a growable
 * string, HTML escaping, application/x-www-form-urlencoded bodies, the
 * sign-in form, board actions' paths and JSON bodies, cookies, ids in
 * paths, and the same-origin check that guards every POST. The parsers of
 * bodies and paths take bytes, not the request, so that the fuzzers
 * (examples/kanban/fuzz) reach them without a server.
 *
 * Why our own: each is a few dozen lines, and the HTTP layer deliberately
 * stops at requests and responses. None of them allocates behind the
 * caller's back except srv_str (which the caller frees), srv_form (freed
 * with srv_form_free) and srv_action_json's body (json_decref).
 */
#ifndef KANBAN_SRV_UTIL_H
#define KANBAN_SRV_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "board.h"
#include "http.h"

/* ---- A growable string --------------------------------------------------- */

typedef struct srv_str {
  char *p; /* NUL-terminated once anything was added; NULL before */
  size_t len;
  size_t cap;
  int failed; /* an allocation failed: the string is incomplete */
} srv_str;

void srv_str_add(srv_str *s, const char *data, size_t n);
void srv_str_cat(srv_str *s, const char *text);
void srv_str_printf(srv_str *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* `text` with & < > " ' escaped for HTML text and quoted attributes. */
void srv_str_html(srv_str *s, const char *text);
void srv_str_free(srv_str *s);

/* ---- Forms ---------------------------------------------------------------- */

#define SRV_FORM_MAX 32 /* fields kept; more is a malformed form */

typedef struct srv_form {
  int n;
  char *name[SRV_FORM_MAX];
  char *value[SRV_FORM_MAX];
} srv_form;

/* Parse an application/x-www-form-urlencoded body ('+' and %XX decoded).
 * 0 on success; -1 on a malformed body (bad %-escape, a NUL byte, too many
 * fields) or no memory. `f` is freed with srv_form_free either way. */
int srv_form_parse(srv_form *f, const char *body, size_t len);
/* The first value of `name`, or NULL. Owned by f. */
const char *srv_form_get(const srv_form *f, const char *name);
void srv_form_free(srv_form *f);

/* The sign-in and sign-up form (name, password) parsed into f (the
 * caller's srv_form_free, whatever the result) and checked. 0 with *name and
 * *password pointing into f; 400 when the form is malformed or lacks a
 * field; 422 when the name or the password is not acceptable (*why says
 * which, for the page). */
int srv_auth_form(srv_form *f, const char *body, size_t len, int signup, const char **name,
                  const char **password, const char **why);

/* ---- Board actions ---------------------------------------------------------- */

/* The action a path under a board names ("/rename", "/members", "/lists",
 * "/cards", "/lists/ID/rename", "/lists/ID/archive", "/cards/ID/edit",
 * "/cards/ID/archive", "/cards/ID/move": what follows "/boards/ID"): *what
 * becomes its name (the kb_ command's, without "kb_"), and a->list_id or
 * a->card_id the id in the path. 0, or -1 if no action has that path. */
int srv_action_path(const char *p, const char **what, kb_action *a);

/* The JSON body of action `what` (srv_action_path's names, or
 * "create_board"): an object with "op" (1..KB_OP_ID_MAX bytes of printable
 * ASCII) and the action's members, read into *a. *root receives the parsed
 * body (NULL if none), which the caller json_decref's whatever the result:
 * a's strings point into it. 0, or -1 with the 400 answer's message in msg.
 * The Content-Type is the caller's to check. */
int srv_action_json(const char *body, size_t len, const char *what, json_t **root, kb_action *a, char *msg,
                    size_t msgsz);

/* ---- Requests -------------------------------------------------------------- */

/* The value of cookie `name` in the request's Cookie header(s) copied into
 * out[0..cap) (NUL-terminated). 1 if found and it fit, else 0. */
int srv_cookie(const lith_http_req *req, const char *name, char *out, size_t cap);

/* Parse a positive decimal id (1..2^53) at *p, advancing *p past it.
 * 1 on success. */
int srv_parse_id(const char **p, int64_t *out);

/* 1 if the POST comes from a page of this server: its Origin header (or, if
 * none, its Referer) names the same scheme-less host:port as its Host
 * header. Browsers send Origin with every POST from a form or fetch, so a
 * request from another site (CSRF) is refused; together with the SameSite=Lax
 * cookie that is two independent guards. */
int srv_same_origin(const lith_http_req *req);

/* 1 if the request's Content-Type names `type` (parameters ignored). */
int srv_content_type_is(const lith_http_req *req, const char *type);

#endif
