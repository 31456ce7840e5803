/* textfile: see textfile.h. */
#include "textfile.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int lithd_text_read(FILE *f, size_t max, char **out, size_t *len) {
  size_t cap = 64 * 1024, n = 0;
  char *buf = NULL;
  *out = NULL;
  *len = 0;
  for (;;) {
    if (cap > max + 1)
      cap = max + 1;
    char *nb = realloc(buf, cap);
    if (nb == NULL) {
      free(buf);
      return LITHD_TEXT_NOMEM;
    }
    buf = nb;
    n += fread(buf + n, 1, cap - n, f);
    if (ferror(f)) {
      free(buf);
      return LITHD_TEXT_IOERR;
    }
    if (n > max) {
      free(buf);
      return LITHD_TEXT_TOO_LARGE;
    }
    if (n < cap) /* end of file: room is left for the NUL */
      break;
    cap *= 2;
  }
  if (memchr(buf, '\0', n) != NULL) {
    free(buf);
    return LITHD_TEXT_NUL;
  }
  buf[n] = '\0';
  *out = buf;
  *len = n;
  return LITHD_TEXT_OK;
}

int lithd_text_load(const char *path, size_t max, const char *what, char **out, size_t *len, char *err,
                    size_t errsz) {
  const char *sep = what != NULL && what[0] ? " " : "";
  FILE *f;
  int rc, saved;

  *out = NULL;
  *len = 0;
  if (what == NULL)
    what = "";
  f = fopen(path, "rb");
  if (f == NULL) {
    snprintf(err, errsz, "%s%s%s: %s", what, sep, path, strerror(errno));
    return -1;
  }
  rc = lithd_text_read(f, max, out, len);
  saved = errno;
  fclose(f);
  switch (rc) {
  case LITHD_TEXT_OK: return 0;
  case LITHD_TEXT_TOO_LARGE:
    snprintf(err, errsz, "%s%s%s: larger than %zu bytes", what, sep, path, max);
    break;
  case LITHD_TEXT_NUL: snprintf(err, errsz, "%s%s%s: holds a NUL byte", what, sep, path); break;
  case LITHD_TEXT_NOMEM: snprintf(err, errsz, "%s%s%s: out of memory", what, sep, path); break;
  default: snprintf(err, errsz, "%s%s%s: %s", what, sep, path, strerror(saved)); break;
  }
  return -1;
}
