/*
 * lithd token — see token.h.
 */
#include "token.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "textfile.h"

char *lithd_token_read(const char *path, char *err, size_t errsz) {
  char *tok = NULL;
  size_t n;

  if (lithd_text_load(path, LITHD_TOKEN_MAX, NULL, &tok, &n, err, errsz) != 0)
    return NULL;
  while (n > 0 && (tok[n - 1] == '\n' || tok[n - 1] == '\r'))
    tok[--n] = '\0';
  if (n == 0 || strpbrk(tok, "\r\n") != NULL) {
    snprintf(err, errsz, "%s: empty, or holds a line break", path);
    free(tok);
    return NULL;
  }
  return tok;
}
