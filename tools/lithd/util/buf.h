/*
 * lithd buf — a growing text buffer, for the answers lithd writes by hand
 * (sqljson's results and errors, /metrics, /v1/commands, /v1/backup).
 *
 * Writers never check each call: the first failure (out of memory, a size
 * past SIZE_MAX, a printf error) sticks in `failed`, later writes do
 * nothing, and lithd_buf_finish reports it once. The text is kept
 * NUL-terminated after every write.
 *
 * Ownership: the buffer owns p until lithd_buf_finish hands it over (or
 * frees it on failure); a buffer abandoned before that is released with
 * free(b->p).
 */
#ifndef LITHD_BUF_H
#define LITHD_BUF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Zero-initialise ({0}) to start. */
typedef struct lithd_buf {
  char *p;    /* the text, NUL-terminated once anything was written; NULL before */
  size_t len; /* bytes written, the NUL not counted */
  size_t cap; /* bytes allocated at p */
  int failed; /* sticky: a write failed, the text is incomplete */
} lithd_buf;

/* Make room for n more bytes (and the NUL) at once, so that a writer that
 * knows its size grows the buffer once. Returns 0, or -1 (and sets failed). */
int lithd_buf_reserve(lithd_buf *b, size_t n);

/* Append s[0..n) (may hold NULs). */
void lithd_buf_put(lithd_buf *b, const void *s, size_t n);

/* Append the C string s. Inline, with the copy inline while there is room:
 * answers are written in many short literal pieces, whose lengths the
 * compiler then knows. */
static inline void lithd_buf_puts(lithd_buf *b, const char *s) {
  size_t n = strlen(s);
  if (!b->failed && b->p != NULL && n < b->cap - b->len) { /* room for it and the NUL */
    memcpy(b->p + b->len, s, n + 1);
    b->len += n;
    return;
  }
  lithd_buf_put(b, s, n);
}

/* Append v in decimal (what "%" PRId64 prints, without printf's cost:
 * answers write several per statement). */
void lithd_buf_put_i64(lithd_buf *b, int64_t v);

/* Append printf-style text. */
void lithd_buf_printf(lithd_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The text, handed to the caller (free() it), "" when nothing was written;
 * NULL when a write failed (the buffer is freed then). The buffer is empty
 * afterwards. */
char *lithd_buf_finish(lithd_buf *b);

#endif /* LITHD_BUF_H */
