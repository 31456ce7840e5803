/*
 * Result codes, this thread's last message, reason phrases, and the one JSON
 * error shape every error response has:
 * {"error":{"code":"<reason as an identifier>","message":"<message>"}} —
 * the shape lithd's own errors have too (they add "statement"), so a client
 * reads error.code and error.message whoever answered. Messages are
 * per thread, as in lith: the layer runs on a loop thread, but a program may
 * run several loops.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static _Thread_local char lh_errbuf[256];

int lh_fail(int rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(lh_errbuf, sizeof lh_errbuf, fmt, ap);
  va_end(ap);
  return rc;
}

const char *lith_http_errmsg(void) { return lh_errbuf; }

const char *lith_http_errstr(int rc) {
  switch (rc) {
  case LITH_HTTP_OK: return "ok";
  case LITH_HTTP_ERROR: return "system call failed";
  case LITH_HTTP_MISUSE: return "API misuse";
  case LITH_HTTP_NOMEM: return "out of memory";
  case LITH_HTTP_ADDRINUSE: return "address already in use";
  case LITH_HTTP_GONE: return "client gone";
  case LITH_HTTP_FULL: return "stream buffer full";
  case LITH_HTTP_STOPPING: return "server stopping";
  default: return "unknown error";
  }
}

const char *lith_http_reason(int status) {
  switch (status) {
  case 200: return "OK";
  case 201: return "Created";
  case 202: return "Accepted";
  case 204: return "No Content";
  case 301: return "Moved Permanently";
  case 302: return "Found";
  case 303: return "See Other";
  case 304: return "Not Modified";
  case 307: return "Temporary Redirect";
  case 308: return "Permanent Redirect";
  case 400: return "Bad Request";
  case 401: return "Unauthorized";
  case 403: return "Forbidden";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 408: return "Request Timeout";
  case 409: return "Conflict";
  case 410: return "Gone";
  case 411: return "Length Required";
  case 412: return "Precondition Failed";
  case 413: return "Payload Too Large";
  case 415: return "Unsupported Media Type";
  case 422: return "Unprocessable Content";
  case 429: return "Too Many Requests";
  case 499: return "Client Closed Request";
  case 500: return "Internal Server Error";
  case 501: return "Not Implemented";
  case 502: return "Bad Gateway";
  case 503: return "Service Unavailable";
  case 504: return "Gateway Timeout";
  default: break;
  }
  switch (status / 100) {
  case 1: return "Informational";
  case 2: return "Success";
  case 3: return "Redirection";
  case 4: return "Client Error";
  case 5: return "Server Error";
  default: return "Unknown";
  }
}

/* Append s JSON-escaped at p; returns the new end. p has 6 bytes per byte of s. */
static char *escape(char *p, const char *s) {
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c == '"' || *c == '\\') {
      *p++ = '\\';
      *p++ = (char)*c;
    } else if (*c < 0x20 || *c == 0x7f) {
      p += sprintf(p, "\\u%04x", *c);
    } else {
      *p++ = (char)*c;
    }
  }
  return p;
}

char *lh_error_json(int status, const char *msg, size_t *len) {
  static const char head[] = "{\"error\":{\"code\":\"", mid[] = "\",\"message\":\"", tail[] = "\"}}";
  const char *reason = lith_http_reason(status);
  char code[64];
  size_t i = 0;
  /* The code is the reason phrase as an identifier: "not_found". */
  for (; i < sizeof code - 1 && reason[i]; i++) {
    char c = reason[i];
    code[i] = c >= 'A' && c <= 'Z' ? (char)(c + 32) : c == ' ' || c == '-' ? '_' : c;
  }
  code[i] = '\0';
  size_t n = strlen(msg);
  char *out = malloc(sizeof head + sizeof code + sizeof mid + 6 * n + sizeof tail);
  if (!out)
    return NULL;
  char *p = out;
  memcpy(p, head, sizeof head - 1);
  p += sizeof head - 1;
  memcpy(p, code, i);
  p += i;
  memcpy(p, mid, sizeof mid - 1);
  p += sizeof mid - 1;
  p = escape(p, msg);
  memcpy(p, tail, sizeof tail); /* with its NUL */
  *len = (size_t)(p - out) + sizeof tail - 1;
  return out;
}
