/*
 * srv_util — strings, forms, cookies, ids, same-origin (see srv_util.h).
 *
 * Design: every parser here works on bytes the HTTP layer already bounded
 * (max_body, header sizes), refuses rather than guesses (a bad %-escape is a
 * malformed form, not a literal '%'), and never reads past the length it is
 * given.
 */
#include "srv_util.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "auth_pw.h"

/* ---- srv_str -------------------------------------------------------------- */

static int grow(srv_str *s, size_t more) {
  size_t cap;
  char *p;
  if (s->failed)
    return -1;
  if (s->len + more + 1 <= s->cap)
    return 0;
  cap = s->cap ? s->cap : 256;
  while (cap < s->len + more + 1)
    cap *= 2;
  p = realloc(s->p, cap);
  if (p == NULL) {
    s->failed = 1;
    return -1;
  }
  s->p = p;
  s->cap = cap;
  return 0;
}

void srv_str_add(srv_str *s, const char *data, size_t n) {
  if (grow(s, n) != 0)
    return;
  memcpy(s->p + s->len, data, n);
  s->len += n;
  s->p[s->len] = '\0';
}

void srv_str_cat(srv_str *s, const char *text) { srv_str_add(s, text, strlen(text)); }

void srv_str_printf(srv_str *s, const char *fmt, ...) {
  va_list ap;
  int n;
  va_start(ap, fmt);
  n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || grow(s, (size_t)n) != 0)
    return;
  va_start(ap, fmt);
  vsnprintf(s->p + s->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  s->len += (size_t)n;
}

void srv_str_html(srv_str *s, const char *text) {
  const char *run = text, *p;
  for (p = text; *p != '\0'; p++) {
    const char *rep;
    switch (*p) {
    case '&': rep = "&amp;"; break;
    case '<': rep = "&lt;"; break;
    case '>': rep = "&gt;"; break;
    case '"': rep = "&quot;"; break;
    case '\'': rep = "&#39;"; break;
    default: continue;
    }
    srv_str_add(s, run, (size_t)(p - run));
    srv_str_cat(s, rep);
    run = p + 1;
  }
  srv_str_add(s, run, (size_t)(p - run));
}

void srv_str_free(srv_str *s) {
  free(s->p);
  memset(s, 0, sizeof *s);
}

/* ---- Forms ----------------------------------------------------------------- */

static int hexval(int c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* Decode src[0..n) into a new string; NULL if malformed or no memory. */
static char *form_decode(const char *src, size_t n) {
  char *out = malloc(n + 1), *o = out;
  size_t i;
  if (out == NULL)
    return NULL;
  for (i = 0; i < n; i++) {
    int c = (unsigned char)src[i];
    if (c == '+') {
      c = ' ';
    } else if (c == '%') {
      int hi, lo;
      if (i + 2 >= n)
        goto bad; /* fewer than two digits left */
      hi = hexval((unsigned char)src[i + 1]);
      lo = hexval((unsigned char)src[i + 2]);
      if (hi < 0 || lo < 0)
        goto bad;
      c = hi * 16 + lo;
      i += 2;
    }
    if (c == 0)
      goto bad;
    *o++ = (char)c;
  }
  *o = '\0';
  return out;
bad:
  free(out);
  return NULL;
}

int srv_form_parse(srv_form *f, const char *body, size_t len) {
  size_t i = 0;
  memset(f, 0, sizeof *f);
  while (i < len) {
    size_t end = i;
    while (end < len && body[end] != '&')
      end++;
    if (end > i) {
      size_t eq;
      if (f->n == SRV_FORM_MAX)
        return -1;
      for (eq = i; eq < end && body[eq] != '='; eq++) {
      }
      f->name[f->n] = form_decode(body + i, eq - i);
      f->value[f->n] = form_decode(body + (eq < end ? eq + 1 : end), eq < end ? end - eq - 1 : 0);
      f->n++;
      if (f->name[f->n - 1] == NULL || f->value[f->n - 1] == NULL)
        return -1;
    }
    i = end + 1;
  }
  return 0;
}

const char *srv_form_get(const srv_form *f, const char *name) {
  int i;
  for (i = 0; i < f->n; i++)
    if (f->name[i] != NULL && strcmp(f->name[i], name) == 0)
      return f->value[i];
  return NULL;
}

void srv_form_free(srv_form *f) {
  int i;
  for (i = 0; i < f->n; i++) {
    free(f->name[i]);
    free(f->value[i]);
  }
  memset(f, 0, sizeof *f);
}

static int valid_name(const char *s) {
  size_t n = strlen(s), i;
  if (n == 0 || n > KB_NAME_MAX)
    return 0;
  for (i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '.' || c == '-'))
      return 0;
  }
  return 1;
}

int srv_auth_form(srv_form *f, const char *body, size_t len, int signup, const char **name,
                  const char **password, const char **why) {
  *why = NULL;
  if (srv_form_parse(f, body, len) != 0 || (*name = srv_form_get(f, "name")) == NULL ||
      (*password = srv_form_get(f, "password")) == NULL)
    return 400;
  if (!valid_name(*name))
    *why = "A name is 1 to 32 letters, digits, '_', '.' or '-'.";
  else if (strlen(*password) > AUTH_PW_MAX)
    *why = "That password is too long (at most 1024 bytes).";
  else if (signup && strlen(*password) < AUTH_PW_MIN)
    *why = "Choose a password of at least 8 characters.";
  return *why != NULL ? 422 : 0;
}

/* ---- Board actions ------------------------------------------------------------ */

#define ID_MAX ((int64_t)1 << 53)

int srv_action_path(const char *p, const char **what, kb_action *a) {
  int64_t id;
  if (strcmp(p, "/rename") == 0)
    *what = "rename_board";
  else if (strcmp(p, "/members") == 0)
    *what = "add_member";
  else if (strcmp(p, "/lists") == 0)
    *what = "create_list";
  else if (strcmp(p, "/cards") == 0)
    *what = "create_card";
  else if (strncmp(p, "/lists/", 7) == 0) {
    p += 7;
    if (!srv_parse_id(&p, &id))
      return -1;
    a->list_id = id;
    if (strcmp(p, "/rename") == 0)
      *what = "rename_list";
    else if (strcmp(p, "/archive") == 0)
      *what = "archive_list";
    else
      return -1;
  } else if (strncmp(p, "/cards/", 7) == 0) {
    p += 7;
    if (!srv_parse_id(&p, &id))
      return -1;
    a->card_id = id;
    if (strcmp(p, "/edit") == 0)
      *what = "edit_card";
    else if (strcmp(p, "/archive") == 0)
      *what = "archive_card";
    else if (strcmp(p, "/move") == 0)
      *what = "move_card";
    else
      return -1;
  } else {
    return -1;
  }
  return 0;
}

/* A string member: *out points into the body. NULL allowed unless required.
 * 0, or -1 with the message. */
static int json_text(json_t *o, const char *key, int required, const char **out, char *msg, size_t msgsz) {
  json_t *v = json_object_get(o, key);
  if (v == NULL || json_is_null(v)) {
    if (!required)
      return 0;
    snprintf(msg, msgsz, "\"%s\" is missing.", key);
    return -1;
  }
  if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
    snprintf(msg, msgsz, "\"%s\" must be a string (without NUL characters).", key);
    return -1;
  }
  *out = json_string_value(v);
  return 0;
}

/* An integer member within [min, max]; `dflt` when absent and not required. */
static int json_int(json_t *o, const char *key, int required, int64_t min, int64_t max, int64_t dflt,
                    int64_t *out, char *msg, size_t msgsz) {
  json_t *v = json_object_get(o, key);
  if (v == NULL || json_is_null(v)) {
    if (required) {
      snprintf(msg, msgsz, "\"%s\" is missing.", key);
      return -1;
    }
    *out = dflt;
    return 0;
  }
  if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
    snprintf(msg, msgsz, "\"%s\" must be an integer from %" PRId64 " to %" PRId64 ".", key, min, max);
    return -1;
  }
  *out = json_integer_value(v);
  return 0;
}

static int json_flag(json_t *o, const char *key, int dflt, int *out, char *msg, size_t msgsz) {
  json_t *v = json_object_get(o, key);
  if (v == NULL || json_is_null(v)) {
    *out = dflt;
    return 0;
  }
  if (!json_is_boolean(v)) {
    snprintf(msg, msgsz, "\"%s\" must be true or false.", key);
    return -1;
  }
  *out = json_is_true(v);
  return 0;
}

/* The members action `w` reads. 0, or -1 with the message. */
static int action_fields(json_t *o, const char *w, kb_action *a, char *msg, size_t msgsz) {
  if (strcmp(w, "create_board") == 0 || strcmp(w, "rename_board") == 0 || strcmp(w, "create_list") == 0 ||
      strcmp(w, "rename_list") == 0)
    return json_text(o, "title", 1, &a->title, msg, msgsz);
  if (strcmp(w, "add_member") == 0)
    return json_text(o, "name", 1, &a->name, msg, msgsz);
  if (strcmp(w, "archive_list") == 0 || strcmp(w, "archive_card") == 0)
    return json_flag(o, "archived", 1, &a->archived, msg, msgsz);
  if (strcmp(w, "create_card") == 0)
    return json_int(o, "list", 1, 1, ID_MAX, 0, &a->list_id, msg, msgsz) ||
                   json_text(o, "title", 1, &a->title, msg, msgsz) ||
                   json_text(o, "description", 0, &a->description, msg, msgsz) ||
                   json_int(o, "index", 0, KB_END, INT32_MAX, KB_END, &a->index, msg, msgsz)
               ? -1
               : 0;
  if (strcmp(w, "edit_card") == 0) {
    if (json_text(o, "title", 0, &a->title, msg, msgsz) ||
        json_text(o, "description", 0, &a->description, msg, msgsz))
      return -1;
    if (a->title == NULL && a->description == NULL) {
      snprintf(msg, msgsz, "Send \"title\", \"description\" or both.");
      return -1;
    }
    return 0;
  }
  /* move_card */
  return json_int(o, "list", 1, 1, ID_MAX, 0, &a->list_id, msg, msgsz) ||
                 json_int(o, "index", 0, KB_END, INT32_MAX, KB_END, &a->index, msg, msgsz) ||
                 json_int(o, "version", 1, 0, INT64_MAX, 0, &a->seen_version, msg, msgsz)
             ? -1
             : 0;
}

int srv_action_json(const char *body, size_t len, const char *what, json_t **root, kb_action *a, char *msg,
                    size_t msgsz) {
  json_error_t err;
  json_t *op;
  size_t i, n;

  *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &err);
  if (*root == NULL || !json_is_object(*root)) {
    snprintf(msg, msgsz, "The body is not a JSON object.");
    return -1;
  }
  op = json_object_get(*root, "op");
  if (!json_is_string(op)) {
    snprintf(msg, msgsz, "\"op\" (an operation id string) is missing.");
    return -1;
  }
  n = json_string_length(op);
  if (n == 0 || n > KB_OP_ID_MAX) {
    snprintf(msg, msgsz, "\"op\" must be 1 to 64 characters.");
    return -1;
  }
  for (i = 0; i < n; i++) {
    char c = json_string_value(op)[i];
    if (c < 0x21 || c > 0x7e) {
      snprintf(msg, msgsz, "\"op\" must be printable ASCII.");
      return -1;
    }
  }
  a->op_id = json_string_value(op);
  return action_fields(*root, what, a, msg, msgsz);
}

/* ---- Requests --------------------------------------------------------------- */

/* Look for `name`=value in one Cookie header value ("a=1; b=2"). */
static int cookie_in(const char *h, const char *name, char *out, size_t cap) {
  size_t nlen = strlen(name);
  const char *p = h;
  while (*p != '\0') {
    const char *end;
    while (*p == ' ' || *p == ';')
      p++;
    end = strchr(p, ';');
    if (end == NULL)
      end = p + strlen(p);
    if ((size_t)(end - p) > nlen && strncmp(p, name, nlen) == 0 && p[nlen] == '=') {
      const char *v = p + nlen + 1;
      size_t vlen = (size_t)(end - v);
      while (vlen > 0 && v[vlen - 1] == ' ')
        vlen--;
      if (vlen + 1 > cap)
        return 0;
      memcpy(out, v, vlen);
      out[vlen] = '\0';
      return 1;
    }
    p = end;
  }
  return 0;
}

int srv_cookie(const lith_http_req *req, const char *name, char *out, size_t cap) {
  size_t i, n = lith_http_req_header_count(req);
  /* HTTP/2 may split cookies over several headers: look at each */
  for (i = 0; i < n; i++) {
    const char *hn, *hv;
    if (lith_http_req_header_at(req, i, &hn, &hv) != LITH_HTTP_OK)
      continue;
    if (strcmp(hn, "cookie") == 0 && cookie_in(hv, name, out, cap))
      return 1;
  }
  return 0;
}

int srv_parse_id(const char **p, int64_t *out) {
  const char *s = *p;
  int64_t v = 0;
  if (*s < '1' || *s > '9')
    return 0;
  while (*s >= '0' && *s <= '9') {
    v = v * 10 + (*s - '0');
    if (v > ((int64_t)1 << 53))
      return 0;
    s++;
  }
  *out = v;
  *p = s;
  return 1;
}

/* The authority of an absolute URL ("http://host:port/..." -> host:port),
 * copied into out. 1 on success. */
static int url_authority(const char *url, char *out, size_t cap) {
  const char *p = strstr(url, "://");
  size_t n;
  if (p == NULL)
    return 0;
  p += 3;
  n = strcspn(p, "/?#");
  if (n == 0 || n + 1 > cap)
    return 0;
  memcpy(out, p, n);
  out[n] = '\0';
  return 1;
}

int srv_same_origin(const lith_http_req *req) {
  const char *host = lith_http_req_header(req, "host");
  const char *origin = lith_http_req_header(req, "origin");
  const char *from = origin != NULL ? origin : lith_http_req_header(req, "referer");
  char auth[300];
  if (host == NULL || from == NULL)
    return 0;
  if (origin != NULL && strcmp(origin, "null") == 0)
    return 0; /* sandboxed or opaque */
  if (!url_authority(from, auth, sizeof auth))
    return 0;
  return strcasecmp(auth, host) == 0;
}

int srv_content_type_is(const lith_http_req *req, const char *type) {
  const char *ct = lith_http_req_header(req, "content-type");
  size_t n = strlen(type);
  if (ct == NULL)
    return 0;
  while (*ct == ' ')
    ct++;
  return strncasecmp(ct, type, n) == 0 && (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}
