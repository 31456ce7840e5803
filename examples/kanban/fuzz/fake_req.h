/*
 * fake_req — a stand-in for the HTTP layer's request, for the kanban
 * fuzzers: srv_util.c and auth_session.c read requests only through
 * http.h's accessors, which this file implements over a plain struct, so
 * they are fuzzed unchanged without h2o or a socket. Strings are
 * NUL-terminated and header names lower case, as the real layer hands them.
 */
#ifndef KANBAN_FUZZ_FAKE_REQ_H
#define KANBAN_FUZZ_FAKE_REQ_H

#include <stddef.h>

#include "http.h"

#define FAKE_HEADERS_MAX 16

struct lith_http_req {
  const char *method, *path, *query, *peer;
  const char *body;
  size_t body_len;
  size_t n_headers;
  const char *name[FAKE_HEADERS_MAX];
  const char *value[FAKE_HEADERS_MAX];
};

#endif
