/*
 * lithd utf8 — see utf8.h.
 */
#include "utf8.h"

size_t lithd_utf8_len(const unsigned char *p, size_t n) {
  unsigned c = p[0];
  size_t len;
  unsigned lo = 0x80, hi = 0xBF; /* bounds of the second byte */

  if (c < 0x80)
    return 1;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) /* overlong below */
      lo = 0xA0;
    else if (c == 0xED) /* a surrogate above */
      hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) /* overlong below */
      lo = 0x90;
    else if (c == 0xF4) /* past U+10FFFF above */
      hi = 0x8F;
  } else {
    return 0; /* a continuation byte, C0/C1 (always overlong), F5..FF */
  }
  if (n < len || p[1] < lo || p[1] > hi)
    return 0;
  for (size_t i = 2; i < len; i++)
    if ((p[i] & 0xC0) != 0x80)
      return 0;
  return len;
}

int lithd_utf8_valid(const unsigned char *p, size_t n) {
  size_t i = 0;
  while (i < n) {
    size_t k = lithd_utf8_len(p + i, n - i);
    if (k == 0)
      return 0;
    i += k;
  }
  return 1;
}

size_t lithd_utf8_put(char *out, unsigned cp) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}
