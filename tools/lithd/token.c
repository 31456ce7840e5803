/*
 * lithd token — see token.h.
 */
#include "token.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *lithd_token_read(const char *path, char *err, size_t errsz) {
  FILE *f = fopen(path, "rb");
  char *tok = NULL;
  size_t n;

  if (f == NULL) {
    snprintf(err, errsz, "%s: %s", path, strerror(errno));
    return NULL;
  }
  tok = malloc(LITHD_TOKEN_MAX + 2);
  if (tok == NULL) {
    snprintf(err, errsz, "%s: out of memory", path);
    goto fail;
  }
  n = fread(tok, 1, LITHD_TOKEN_MAX + 1, f);
  if (ferror(f)) {
    snprintf(err, errsz, "%s: %s", path, strerror(errno));
    goto fail;
  }
  if (n > LITHD_TOKEN_MAX) {
    snprintf(err, errsz, "%s: longer than %d bytes", path, LITHD_TOKEN_MAX);
    goto fail;
  }
  tok[n] = '\0';
  while (n > 0 && (tok[n - 1] == '\n' || tok[n - 1] == '\r')) tok[--n] = '\0';
  if (n == 0 || strlen(tok) != n || strpbrk(tok, "\r\n") != NULL) {
    snprintf(err, errsz, "%s: empty, or holds a NUL byte or a line break", path);
    goto fail;
  }
  fclose(f);
  return tok;
fail:
  free(tok);
  fclose(f);
  return NULL;
}
