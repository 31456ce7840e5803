/*
 * The parameters of an SQL text, numbered as SQLite numbers them, without
 * SQLite: see sqlparams.h. test_sqlparams holds it against SQLite's own
 * sqlite3_bind_parameter_count/_name.
 */
#include "sqlparams.h"

#include <ctype.h>
#include <string.h>

const char *lithd_sql_skip_literal(const char *s) {
  char ch = *s;
  if (ch == '\'' || ch == '"' || ch == '`' || ch == '[') {
    char end = ch == '[' ? ']' : ch;
    for (s++; *s && *s != end; s++)
      ;
    return *s ? s + 1 : s;
  }
  if (ch == '-' && s[1] == '-') {
    while (*s && *s != '\n')
      s++;
    return s;
  }
  if (ch == '/' && s[1] == '*') {
    const char *e = strstr(s + 2, "*/");
    return e ? e + 2 : s + strlen(s);
  }
  return NULL;
}

int lithd_sql_params(const char *sql, const char **names, size_t *lens, int *count) {
  const char *s = sql;
  int max = 0;
  for (int k = 0; k < LITHD_SQL_MAX_PARAMS; k++)
    names[k] = NULL;
  while (*s) {
    char ch = *s;
    const char *past = lithd_sql_skip_literal(s);
    if (past != NULL) {
      s = past;
    } else if (ch == '?') {
      int n = 0;
      s++;
      if (isdigit((unsigned char)*s)) {
        while (isdigit((unsigned char)*s) && n <= LITHD_SQL_MAX_PARAMS)
          n = n * 10 + (*s++ - '0');
      } else {
        n = max + 1;
      }
      if (n < 1 || n > LITHD_SQL_MAX_PARAMS)
        return -2;
      if (n > max)
        max = n;
    } else if ((ch == ':' || ch == '@' || ch == '$') && (isalnum((unsigned char)s[1]) || s[1] == '_')) {
      const char *start = s++;
      while (isalnum((unsigned char)*s) || *s == '_')
        s++;
      size_t len = (size_t)(s - start);
      int k;
      for (k = 0; k < max; k++)
        if (names[k] && lens[k] == len && memcmp(names[k], start, len) == 0)
          break;
      if (k == max) {
        if (max >= LITHD_SQL_MAX_PARAMS)
          return -2;
        names[max] = start;
        lens[max] = len;
        max++;
      }
    } else if (isalnum((unsigned char)ch) || ch == '_') {
      while (isalnum((unsigned char)*s) || *s == '_' || *s == '$')
        s++; /* a word: a '$' inside it is not a parameter */
    } else {
      s++;
    }
  }
  *count = max;
  return 0;
}
