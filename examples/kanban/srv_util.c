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
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- srv_str -------------------------------------------------------------- */

static int grow(srv_str *s, size_t more) {
  size_t cap;
  char *p;
  if (s->failed) return -1;
  if (s->len + more + 1 <= s->cap) return 0;
  cap = s->cap ? s->cap : 256;
  while (cap < s->len + more + 1) cap *= 2;
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
  if (grow(s, n) != 0) return;
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
  if (n < 0 || grow(s, (size_t)n) != 0) return;
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
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Decode src[0..n) into a new string; NULL if malformed or no memory. */
static char *form_decode(const char *src, size_t n) {
  char *out = malloc(n + 1), *o = out;
  size_t i;
  if (out == NULL) return NULL;
  for (i = 0; i < n; i++) {
    int c = (unsigned char)src[i];
    if (c == '+') {
      c = ' ';
    } else if (c == '%') {
      int hi, lo;
      if (i + 2 >= n) goto bad; /* fewer than two digits left */
      hi = hexval((unsigned char)src[i + 1]);
      lo = hexval((unsigned char)src[i + 2]);
      if (hi < 0 || lo < 0) goto bad;
      c = hi * 16 + lo;
      i += 2;
    }
    if (c == 0) goto bad;
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
    while (end < len && body[end] != '&') end++;
    if (end > i) {
      size_t eq;
      if (f->n == SRV_FORM_MAX) return -1;
      for (eq = i; eq < end && body[eq] != '='; eq++) {
      }
      f->name[f->n] = form_decode(body + i, eq - i);
      f->value[f->n] = form_decode(body + (eq < end ? eq + 1 : end), eq < end ? end - eq - 1 : 0);
      f->n++;
      if (f->name[f->n - 1] == NULL || f->value[f->n - 1] == NULL) return -1;
    }
    i = end + 1;
  }
  return 0;
}

const char *srv_form_get(const srv_form *f, const char *name) {
  int i;
  for (i = 0; i < f->n; i++)
    if (f->name[i] != NULL && strcmp(f->name[i], name) == 0) return f->value[i];
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

/* ---- Requests --------------------------------------------------------------- */

/* Look for `name`=value in one Cookie header value ("a=1; b=2"). */
static int cookie_in(const char *h, const char *name, char *out, size_t cap) {
  size_t nlen = strlen(name);
  const char *p = h;
  while (*p != '\0') {
    const char *end;
    while (*p == ' ' || *p == ';') p++;
    end = strchr(p, ';');
    if (end == NULL) end = p + strlen(p);
    if ((size_t)(end - p) > nlen && strncmp(p, name, nlen) == 0 && p[nlen] == '=') {
      const char *v = p + nlen + 1;
      size_t vlen = (size_t)(end - v);
      while (vlen > 0 && v[vlen - 1] == ' ') vlen--;
      if (vlen + 1 > cap) return 0;
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
    if (lith_http_req_header_at(req, i, &hn, &hv) != LITH_HTTP_OK) continue;
    if (strcmp(hn, "cookie") == 0 && cookie_in(hv, name, out, cap)) return 1;
  }
  return 0;
}

int srv_parse_id(const char **p, int64_t *out) {
  const char *s = *p;
  int64_t v = 0;
  if (*s < '1' || *s > '9') return 0;
  while (*s >= '0' && *s <= '9') {
    v = v * 10 + (*s - '0');
    if (v > ((int64_t)1 << 53)) return 0;
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
  if (p == NULL) return 0;
  p += 3;
  n = strcspn(p, "/?#");
  if (n == 0 || n + 1 > cap) return 0;
  memcpy(out, p, n);
  out[n] = '\0';
  return 1;
}

int srv_same_origin(const lith_http_req *req) {
  const char *host = lith_http_req_header(req, "host");
  const char *origin = lith_http_req_header(req, "origin");
  const char *from = origin != NULL ? origin : lith_http_req_header(req, "referer");
  char auth[300];
  if (host == NULL || from == NULL) return 0;
  if (origin != NULL && strcmp(origin, "null") == 0) return 0; /* sandboxed or opaque */
  if (!url_authority(from, auth, sizeof auth)) return 0;
  return strcasecmp(auth, host) == 0;
}

int srv_content_type_is(const lith_http_req *req, const char *type) {
  const char *ct = lith_http_req_header(req, "content-type");
  size_t n = strlen(type);
  if (ct == NULL) return 0;
  while (*ct == ' ') ct++;
  return strncasecmp(ct, type, n) == 0 && (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}
