/*
 * Routes: method + exact path or path prefix -> handler.
 *
 * Our own table rather than h2o's pathconfs: h2o matches a path and then
 * runs its handlers in turn, which knows nothing of methods, so 405 + Allow
 * would have to be rebuilt on top anyway; and h2o's table is fixed once its
 * context exists, whereas routes here may be added at any time on the loop
 * thread. A linear scan: a daemon has tens of routes, not thousands.
 *
 * Choice: among the routes whose path matches, the most specific one for the
 * request's method (exact beats any prefix, a longer prefix beats a shorter
 * one). No route for the path: 404. Routes for the path, none for the
 * method: 405, and Allow names the methods of all of them. HEAD goes to the
 * GET route when there is no HEAD route (RFC 9110: a GET resource answers
 * HEAD; h2o sends the headers without the body), so Allow names HEAD
 * wherever it names GET.
 *
 * Routes see h2o's normalized path (req->path_normalized): percent-escapes
 * decoded, dot segments removed. An escape that decodes into a separator
 * would make one segment two: /v1/db/a%2Fb/do would reach the handlers as
 * /v1/db/a/b/do, /v1/db/main%2Fdo as /v1/db/main/do (a route, where a
 * proxy in front saw one segment), and %00 would cut the path a handler
 * reads as a C string. So a path holding %2F or %00 matches no route: 404
 * before any route is looked at (lh_route_bad_escape; its access report
 * names no route). Other escapes stay decoded: %2E and the unreserved
 * characters decode to what RFC 3986 calls the same path.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static int is_token(const char *s) {
  if (!*s)
    return 0;
  for (; *s; s++)
    if (*s <= ' ' || *s >= 0x7f || strchr("()<>@,;:\\\"/[]?={}", *s))
      return 0;
  return 1;
}

int lh_route_add(lith_http_server *srv, const char *method, const char *path, int match, lith_http_handler fn,
                 void *arg) {
  if (!method || !path || !fn || !is_token(method) || path[0] != '/' ||
      (match != LITH_HTTP_EXACT && match != LITH_HTTP_PREFIX))
    return lh_fail(LITH_HTTP_MISUSE, "lith_http_route: a method token, a path starting "
                                     "with '/', LITH_HTTP_EXACT or _PREFIX and a handler");
  int prefix = match == LITH_HTTP_PREFIX;
  for (size_t i = 0; i < srv->n_routes; i++) {
    const lh_route *r = &srv->routes[i];
    if (r->prefix == prefix && !strcmp(r->method, method) && !strcmp(r->path, path))
      return lh_fail(LITH_HTTP_MISUSE, "lith_http_route: %s %s is already routed", method, path);
  }
  if (srv->n_routes == srv->cap_routes) {
    size_t cap = srv->cap_routes ? 2 * srv->cap_routes : 16;
    lh_route *r = realloc(srv->routes, cap * sizeof *r);
    if (!r)
      return lh_fail(LITH_HTTP_NOMEM, "lith_http_route: out of memory");
    srv->routes = r;
    srv->cap_routes = cap;
  }
  lh_route *r = &srv->routes[srv->n_routes];
  r->method = strdup(method);
  r->path = strdup(path);
  if (!r->method || !r->path) {
    free(r->method);
    free(r->path);
    return lh_fail(LITH_HTTP_NOMEM, "lith_http_route: out of memory");
  }
  r->method_len = strlen(method);
  r->path_len = strlen(path);
  r->prefix = prefix;
  r->fn = fn;
  r->arg = arg;
  srv->n_routes++;
  return LITH_HTTP_OK;
}

/* How well r matches path: 0 not at all; exact routes outrank every prefix. */
static size_t specificity(const lh_route *r, const char *path, size_t len) {
  if (r->prefix)
    return len >= r->path_len && !memcmp(path, r->path, r->path_len) ? 1 + r->path_len : 0;
  return len == r->path_len && !memcmp(path, r->path, len) ? SIZE_MAX : 0;
}

/* Append method m to the comma-separated list in allow, once. */
static void allow_add(char *allow, size_t cap, const char *m, size_t mlen) {
  size_t used = strlen(allow);
  for (const char *p = allow; *p;) {
    const char *end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n == mlen && !memcmp(p, m, n))
      return;
    p += n;
    while (*p == ',' || *p == ' ')
      p++;
  }
  size_t need = (used ? 2 : 0) + mlen + 1;
  if (used + need > cap)
    return; /* a truncated Allow still names real methods */
  if (used) {
    memcpy(allow + used, ", ", 2);
    used += 2;
  }
  memcpy(allow + used, m, mlen);
  allow[used + mlen] = '\0';
  if (mlen == 3 && !memcmp(m, "GET", 3))
    allow_add(allow, cap, "HEAD", 4);
}

const lh_route *lh_route_find(const lith_http_server *srv, const char *method, const char *path,
                              size_t path_len, char *allow, size_t allow_cap) {
  const lh_route *best = NULL;
  size_t best_score = 0;
  size_t mlen = strlen(method);
  allow[0] = '\0';
  for (size_t i = 0; i < srv->n_routes; i++) {
    const lh_route *r = &srv->routes[i];
    size_t score = specificity(r, path, path_len);
    if (!score)
      continue;
    if (r->method_len == mlen && !memcmp(r->method, method, mlen)) {
      if (score > best_score) {
        best = r;
        best_score = score;
      }
    } else {
      allow_add(allow, allow_cap, r->method, r->method_len);
    }
  }
  if (!best && mlen == 4 && !memcmp(method, "HEAD", 4))
    return lh_route_find(srv, "GET", path, path_len, allow, allow_cap);
  return best;
}

const char *lh_route_bad_escape(const char *target, size_t len) {
  for (size_t i = 0; i < len && target[i] != '?'; i++) {
    if (target[i] != '%' || i + 2 >= len)
      continue;
    if (target[i + 1] == '2' && (target[i + 2] == 'F' || target[i + 2] == 'f'))
      return "not found: the path holds an encoded slash (%2F), which matches no route";
    if (target[i + 1] == '0' && target[i + 2] == '0')
      return "not found: the path holds an encoded NUL (%00), which matches no route";
  }
  return NULL;
}

void lh_routes_free(lith_http_server *srv) {
  for (size_t i = 0; i < srv->n_routes; i++) {
    free(srv->routes[i].method);
    free(srv->routes[i].path);
  }
  free(srv->routes);
  srv->routes = NULL;
  srv->n_routes = srv->cap_routes = 0;
}

int lith_http_route(lith_http_server *srv, const char *method, const char *path, int match,
                    lith_http_handler fn, void *arg) {
  if (!srv)
    return lh_fail(LITH_HTTP_MISUSE, "lith_http_route: no server");
  return lh_route_add(srv, method, path, match, fn, arg);
}
