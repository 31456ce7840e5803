/*
 * lithd buf — see buf.h.
 *
 * Growth doubles from 1 KiB (most answers fit the first allocation), so a
 * long answer costs log2 of its size in reallocs.
 */
#include "buf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF_FIRST_CAP 1024

int lithd_buf_reserve(lithd_buf *b, size_t n) {
  size_t ncap;
  char *np;

  if (b->failed)
    return -1;
  if (n < b->cap - b->len) /* room for n and the NUL */
    return 0;
  ncap = b->cap ? b->cap : BUF_FIRST_CAP;
  while (n >= ncap - b->len) {
    if (ncap > SIZE_MAX / 2)
      goto fail;
    ncap *= 2;
  }
  np = realloc(b->p, ncap);
  if (np == NULL)
    goto fail;
  b->p = np;
  b->cap = ncap;
  return 0;
fail:
  b->failed = 1;
  return -1;
}

void lithd_buf_put(lithd_buf *b, const void *s, size_t n) {
  if (lithd_buf_reserve(b, n) != 0)
    return;
  if (n > 0)
    memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}

void lithd_buf_put_i64(lithd_buf *b, int64_t v) {
  char tmp[24], *e = tmp + sizeof tmp, *p = e;
  /* the magnitude as unsigned: INT64_MIN has no positive int64 */
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  do {
    *--p = (char)('0' + u % 10);
    u /= 10;
  } while (u != 0);
  if (v < 0)
    *--p = '-';
  lithd_buf_put(b, p, (size_t)(e - p));
}

void lithd_buf_printf(lithd_buf *b, const char *fmt, ...) {
  va_list ap;

  if (b->failed)
    return;
  /* Format into the room left; if it did not fit, grow to the size
   * vsnprintf reported and format again. */
  for (int pass = 0; pass < 2; pass++) {
    size_t room = b->cap - b->len;
    va_start(ap, fmt);
    int n = vsnprintf(room > 0 ? b->p + b->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n < 0) {
      b->failed = 1;
      return;
    }
    if ((size_t)n < room) {
      b->len += (size_t)n;
      return;
    }
    if (lithd_buf_reserve(b, (size_t)n) != 0)
      return;
  }
  b->failed = 1; /* unreachable: the second pass had the room */
}

char *lithd_buf_finish(lithd_buf *b) {
  char *p;

  lithd_buf_put(b, "", 0); /* "" rather than NULL when nothing was written */
  p = b->failed ? NULL : b->p;
  if (p == NULL)
    free(b->p);
  b->p = NULL;
  b->len = b->cap = 0;
  b->failed = 0;
  return p;
}
