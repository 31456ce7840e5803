/* fake_req — http.h's request accessors over struct lith_http_req (see
 * fake_req.h); answering is a no-op: the fuzzers look at what the parsers
 * return, not at responses. */
#include "fake_req.h"

#include <strings.h>

const char *lith_http_req_method(const lith_http_req *req) { return req->method; }
const char *lith_http_req_path(const lith_http_req *req) { return req->path; }
const char *lith_http_req_query(const lith_http_req *req) { return req->query; }
const char *lith_http_req_peer(const lith_http_req *req) { return req->peer; }

const char *lith_http_req_header(const lith_http_req *req, const char *name) {
  size_t i;
  for (i = 0; i < req->n_headers; i++)
    if (strcasecmp(req->name[i], name) == 0)
      return req->value[i];
  return NULL;
}

size_t lith_http_req_header_count(const lith_http_req *req) { return req->n_headers; }

int lith_http_req_header_at(const lith_http_req *req, size_t i, const char **name, const char **value) {
  if (i >= req->n_headers)
    return LITH_HTTP_MISUSE;
  if (name != NULL)
    *name = req->name[i];
  if (value != NULL)
    *value = req->value[i];
  return LITH_HTTP_OK;
}

const char *lith_http_req_body(const lith_http_req *req, size_t *len) {
  if (len != NULL)
    *len = req->body_len;
  return req->body;
}

int lith_http_add_header(lith_http_req *req, const char *name, const char *value) {
  (void)req;
  (void)name;
  (void)value;
  return LITH_HTTP_OK;
}
