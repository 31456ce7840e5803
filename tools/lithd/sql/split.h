/*
 * sql/split.h — a text of several SQL statements cut where SQLite ends them
 * (a Hrana `sequence`, a named command's body), in one pass (split.c says
 * how, and why it gives sqlite3_complete's answers).
 *
 * A statement ends at a ';' after which sqlite3_complete() calls the text
 * since the statement began complete; so a ';' inside a string, a quoted
 * name, a comment or a CREATE TRIGGER's body does not end one. What follows
 * the last such ';' is the last statement, unless it holds only blanks and
 * comments. A NUL byte ends the text as far as SQLite can tell: no ';'
 * after it ends a statement.
 *
 *   lithd_split sp;
 *   lithd_split_init(&sp, text, n);
 *   while (lithd_split_next(&sp, &p, &len)) ... one statement, [p, p + len)
 *
 * Each byte of the text is read a bounded number of times, whatever its
 * content: the whole split is linear in n.
 */
#ifndef LITHD_SQL_SPLIT_H
#define LITHD_SQL_SPLIT_H

#include <stddef.h>

typedef struct lithd_split {
  const char *s;
  size_t n;
  size_t at; /* where the next statement begins */
  int cut;   /* the last statement given ends with the ';' that ended it
                (0: it is the rest of the text) */
} lithd_split;

void lithd_split_init(lithd_split *sp, const char *s, size_t n);

/* The next statement into *p and *len (its ';' included, blanks and
 * comments before it too): 1, or 0 when no statement is left. */
int lithd_split_next(lithd_split *sp, const char **p, size_t *len);

/* How many statements s[0..n) holds, counting no further than max + 1: a
 * caller with a limit of max statements reads only what it would keep. */
size_t lithd_split_count(const char *s, size_t n, size_t max);

/* s past blanks (as isspace in the C locale) and comments ("--" to the end
 * of its line, slash-star to star-slash), up to end; end if nothing else is
 * left: an unclosed comment or a NUL byte ends the text. */
const char *lithd_sql_skip_blank(const char *s, const char *end);

#endif
