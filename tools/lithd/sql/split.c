/*
 * sql/split.c — where a text's statements end (split.h), in one pass.
 *
 * Design. The rule is SQLite's: a statement ends at a ';' where
 * sqlite3_complete(text since the statement began) is true. Asking that at
 * each ';' rescans the statement's text every time, which is quadratic: a
 * `sequence` of SELECT ' + 200,000 ';' + ' held lithd's loop thread 26.6 s.
 * But sqlite3_complete is itself one left-to-right pass of a small machine
 * over tokens, and its run over a prefix that ends at a ';' is the same run
 * as over the whole text, up to that ';'. So one pass of the same machine
 * over the whole text, started afresh just past each ';' that ends a
 * statement, answers every ';' at once, and reads each byte once (the
 * blanks and comments after the last statement twice: are they all?).
 *
 * The tokens, as sqlite3_complete reads them:
 *   ';'; a blank (space, \t, \n, \f, \r: not \v, which is "other"); a
 *   comment, which counts as a blank ("--" through the end of its line,
 *   slash-star through the next star-slash); a quoted run ('...', "...",
 *   `...`, [...]; a doubled quote is two runs back to back, which reads the
 *   same); a word (letters, digits, '_', '$', bytes >= 0x80), of which
 *   CREATE, TEMP, TEMPORARY, TRIGGER, EXPLAIN and END (ASCII case ignored,
 *   whole words only) are keywords; any other byte alone. BEGIN and CASE
 *   are plain words: the machine finds a trigger's end only as "; END ;".
 *
 * The machine's states (enum below) and their moves are sqlite3_complete's
 * (SQLite's complete.c, built with triggers and EXPLAIN, as every shipped
 * SQLite is); a blank never changes the state.
 *
 * Where a prefix cut at a ';' could read otherwise than the whole text:
 *   - a token still open at that ';' (a quote, a bracket, a comment):
 *     sqlite3_complete answers "not complete", and the pass sees the ';'
 *     inside the token, where it ends nothing either. The one exception is
 *     a "--" comment open at the end, where sqlite3_complete answers
 *     "complete" if a ';' had already ended the statement before the
 *     comment; the pass cuts at such a ';', so that never happens inside a
 *     statement.
 *   - a NUL byte: sqlite3_complete reads a C string, so it sees the text
 *     only up to the first NUL, and that text was not complete (else the
 *     pass would have cut there). From a NUL on, no ';' ends a statement.
 * test_split checks these answers against sqlite3_complete's on a table of
 * cases and on random texts; fuzz_split does the same with libFuzzer.
 */
#include "split.h"

#include <stdint.h>
#include <string.h>

/* The tokens that move the machine. */
enum { K_SEMI, K_BLANK, K_OTHER, K_EXPLAIN, K_CREATE, K_TEMP, K_TRIGGER, K_END };

/* The machine's states: what the tokens since the statement began were. */
enum {
  S_START,        /* blanks only */
  S_PLAIN,        /* a statement its next ';' ends */
  S_EXPLAIN,      /* EXPLAIN, then anything but keywords: CREATE may follow */
  S_CREATE,       /* [EXPLAIN ...] CREATE [TEMP]: TRIGGER may follow */
  S_TRIGGER,      /* inside CREATE TRIGGER: a ';' ends nothing */
  S_TRIGGER_SEMI, /* ... ';' (blanks, more ';'): END may follow */
  S_TRIGGER_END,  /* ... ';' END: a ';' now ends the trigger */
  S_ENDS          /* the ';' just read ends the statement */
};

static int after(int state, int tok) {
  if (tok == K_BLANK)
    return state;
  switch (state) {
  case S_START:
    return tok == K_SEMI ? S_ENDS : tok == K_EXPLAIN ? S_EXPLAIN : tok == K_CREATE ? S_CREATE : S_PLAIN;
  case S_EXPLAIN:
    return tok == K_SEMI ? S_ENDS : tok == K_OTHER ? S_EXPLAIN : tok == K_CREATE ? S_CREATE : S_PLAIN;
  case S_CREATE:
    return tok == K_SEMI ? S_ENDS : tok == K_TEMP ? S_CREATE : tok == K_TRIGGER ? S_TRIGGER : S_PLAIN;
  case S_TRIGGER: return tok == K_SEMI ? S_TRIGGER_SEMI : S_TRIGGER;
  case S_TRIGGER_SEMI: return tok == K_SEMI ? S_TRIGGER_SEMI : tok == K_END ? S_TRIGGER_END : S_TRIGGER;
  case S_TRIGGER_END: return tok == K_SEMI ? S_ENDS : S_TRIGGER;
  default: return tok == K_SEMI ? S_ENDS : S_PLAIN; /* S_PLAIN */
  }
}

/* A byte of a word, as SQLite's IdChar(). */
static int word_byte(unsigned char c) {
  return (unsigned char)((c | 0x20) - 'a') < 26 || (unsigned char)(c - '0') < 10 || c == '_' || c == '$' ||
         c >= 0x80;
}

/* Whether w[0..n) is kw (lower case), ASCII case ignored. */
static int word_is(const char *w, size_t n, const char *kw) {
  size_t k = 0;
  for (; k < n && kw[k] != '\0'; k++)
    if ((w[k] | 0x20) != kw[k])
      return 0;
  return k == n && kw[k] == '\0';
}

static int keyword(const char *w, size_t n) {
  switch (w[0] | 0x20) {
  case 'c': return word_is(w, n, "create") ? K_CREATE : K_OTHER;
  case 't':
    return word_is(w, n, "trigger")                              ? K_TRIGGER
           : word_is(w, n, "temp") || word_is(w, n, "temporary") ? K_TEMP
                                                                 : K_OTHER;
  case 'e': return word_is(w, n, "end") ? K_END : word_is(w, n, "explain") ? K_EXPLAIN : K_OTHER;
  default: return K_OTHER;
  }
}

#define NONE SIZE_MAX

/* The index of the first c in s[from..n), or NONE if a NUL or the end
 * comes first. */
static size_t find(const char *s, size_t n, size_t from, char c) {
  for (size_t i = from; i < n && s[i] != '\0'; i++)
    if (s[i] == c)
      return i;
  return NONE;
}

/* The index just past the ';' that ends the statement begun at s[at], or
 * NONE if none does (the rest of the text is the last statement). */
static size_t statement_end(const char *s, size_t n, size_t at) {
  int state = S_START;
  size_t i = at;
  while (i < n) {
    size_t j = i + 1, k; /* j: past the token */
    int tok = K_OTHER;
    switch (s[i]) {
    case '\0': return NONE;
    case ';': tok = K_SEMI; break;
    case ' ':
    case '\t':
    case '\n':
    case '\f':
    case '\r': tok = K_BLANK; break;
    case '-':
      if (j < n && s[j] == '-') {
        if ((k = find(s, n, j + 1, '\n')) == NONE)
          return NONE;
        j = k + 1, tok = K_BLANK;
      }
      break;
    case '/':
      if (j < n && s[j] == '*') {
        for (k = j + 1;; k++) {
          if ((k = find(s, n, k, '*')) == NONE)
            return NONE;
          if (k + 1 < n && s[k + 1] == '/')
            break;
        }
        j = k + 2, tok = K_BLANK;
      }
      break;
    case '\'':
    case '"':
    case '`':
    case '[':
      if ((k = find(s, n, j, s[i] == '[' ? ']' : s[i])) == NONE)
        return NONE;
      j = k + 1;
      break;
    default:
      if (word_byte((unsigned char)s[i])) {
        while (j < n && word_byte((unsigned char)s[j]))
          j++;
        tok = keyword(s + i, j - i);
      }
      break;
    }
    state = after(state, tok);
    if (state == S_ENDS)
      return j;
    i = j;
  }
  return NONE;
}

void lithd_split_init(lithd_split *sp, const char *s, size_t n) {
  memset(sp, 0, sizeof *sp);
  sp->s = s;
  sp->n = n;
}

int lithd_split_next(lithd_split *sp, const char **p, size_t *len) {
  size_t start = sp->at, end;
  if (start >= sp->n)
    return 0;
  end = statement_end(sp->s, sp->n, start);
  sp->cut = end != NONE;
  if (end == NONE) {
    end = sp->n;
    if (lithd_sql_skip_blank(sp->s + start, sp->s + end) == sp->s + end) {
      sp->at = end;
      return 0; /* only blanks and comments are left: no statement */
    }
  }
  sp->at = end;
  *p = sp->s + start;
  *len = end - start;
  return 1;
}

size_t lithd_split_count(const char *s, size_t n, size_t max) {
  lithd_split sp;
  const char *p;
  size_t len, k = 0;
  lithd_split_init(&sp, s, n);
  while (k <= max && lithd_split_next(&sp, &p, &len))
    k++;
  return k;
}

const char *lithd_sql_skip_blank(const char *s, const char *end) {
  while (s < end) {
    if (*s == ' ' || (*s >= '\t' && *s <= '\r')) {
      s++;
    } else if (end - s >= 2 && s[0] == '-' && s[1] == '-') {
      while (s < end && *s != '\n' && *s != '\0')
        s++;
    } else if (end - s >= 2 && s[0] == '/' && s[1] == '*') {
      const char *c = s + 2;
      while (end - c >= 2 && c[0] != '\0' && !(c[0] == '*' && c[1] == '/'))
        c++;
      s = end - c >= 2 && c[0] != '\0' ? c + 2 : end;
    } else {
      break;
    }
  }
  return s < end && *s == '\0' ? end : s;
}
