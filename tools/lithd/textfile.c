/* textfile: see textfile.h. */
#include "textfile.h"

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
