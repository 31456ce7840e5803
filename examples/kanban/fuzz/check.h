/*
 * check.h — oracles the kanban fuzzers share (static inline: each harness
 * takes what it needs).
 *
 * The HTML oracle: a page rendered with the fuzzed texts and the same page
 * rendered with each text replaced by "x" must hold as many '<' characters.
 * Every text goes through srv_str_html (HTML) or script_json (the board's
 * JSON inside <script>), which never emit a '<'; a text that reached the
 * page unescaped would add its own, so any difference is an injection.
 */
#ifndef KANBAN_FUZZ_CHECK_H
#define KANBAN_FUZZ_CHECK_H

#include <stdlib.h>
#include <string.h>

#include "srv_util.h"

static inline size_t count_lt(const char *s) {
  size_t n = 0;
  for (; *s != '\0'; s++)
    n += *s == '<';
  return n;
}

/* srv_str_html's output for `text`: no < > " ', every & starts one of the
 * five entities, and decoding them gives `text` back. */
static inline void check_html_escape(const char *text) {
  static const char *const ent[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&#39;"};
  static const char dec[] = {'&', '<', '>', '"', '\''};
  srv_str s = {0};
  const char *p, *t = text;
  srv_str_html(&s, text);
  if (s.failed)
    abort();
  for (p = s.p != NULL ? s.p : ""; *p != '\0';) {
    char c = *p;
    if (c == '<' || c == '>' || c == '"' || c == '\'')
      abort();
    if (c == '&') {
      size_t k;
      for (k = 0; k < 5 && strncmp(p, ent[k], strlen(ent[k])) != 0; k++) {
      }
      if (k == 5)
        abort();
      c = dec[k];
      p += strlen(ent[k]);
    } else {
      p++;
    }
    if (*t++ != c)
      abort();
  }
  if (*t != '\0')
    abort();
  srv_str_free(&s);
}

#endif
