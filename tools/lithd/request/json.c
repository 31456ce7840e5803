/*
 * lithd json — see json.h.
 *
 * Design: recursive descent over the bytes, depth-limited. Arrays and
 * objects collect their children on one scratch stack (malloc'd, reused
 * through the whole parse) and are copied into the arena, at their exact
 * size, when they close; so the arena only ever holds finished nodes and a
 * parse makes a handful of mallocs whatever the body holds. A body of up
 * to LJ_IN_PLACE_MAX is first copied into the arena, and a string without
 * escapes is validated and left in that copy, its closing quote turned
 * into its NUL; a larger body's strings are copied out one by one. With
 * escapes, a string is decoded into a buffer of the raw length (decoding
 * never grows a string). UTF-8 is
 * checked and \u escapes encoded by utf8.h, the check sqljson applies to
 * what goes out: lithd accepts and answers the same set. Duplicate
 * keys: pairwise for small objects, by sorting for large ones, so a hostile
 * body of a million keys costs n log n, not n squared.
 */
#include "json.h"
#include "utf8.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Up to this size a body is copied once into the arena and its strings
 * end in place (their closing quote made a NUL), instead of one
 * allocation and copy each; past it (rare, and big) strings are copied,
 * so a body is never held twice whole. */
#define LJ_IN_PLACE_MAX (1024 * 1024)

typedef struct parser {
  lithd_arena *a;
  const char *start, *p, *end;
  char *own;   /* start's bytes, writable (the parse's copy), or NULL */
  int escaped; /* the last string had escapes (only then can it hold a NUL) */
  lj_error *err;
  int failed;
  /* the scratch stack: values (arrays) and members (objects) */
  lj_member *stack;
  size_t top, cap;
} parser;

static int fail_at(parser *ps, const char *where, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail_at(parser *ps, const char *where, const char *fmt, ...) {
  if (ps->failed)
    return -1;
  ps->failed = 1;
  if (ps->err) {
    int line = 1;
    const char *ls = ps->start;
    for (const char *q = ps->start; q < where; q++)
      if (*q == '\n') {
        line++;
        ls = q + 1;
      }
    ps->err->line = line;
    ps->err->column = (int)(where - ls) + 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ps->err->text, sizeof ps->err->text, fmt, ap);
    va_end(ap);
  }
  return -1;
}

/* Bytes by class: JSON's four blanks; what ends a string's plain run (the
 * quote, the backslash, a control byte, the first byte of a multi-byte
 * UTF-8 sequence). NUL is in neither blank nor plain, so the NUL after the
 * parse's own copy (LJ_IN_PLACE_MAX) stops a scan without a bound check. */
enum { CLASS_BLANK = 1, CLASS_STRING_STOP = 2 };
static unsigned char byte_class[256];
static pthread_once_t byte_class_once = PTHREAD_ONCE_INIT;

static void byte_class_init(void) {
  byte_class[' '] = byte_class['\t'] = byte_class['\n'] = byte_class['\r'] = CLASS_BLANK;
  for (int c = 0; c < 256; c++)
    if (c < 0x20 || c >= 0x80 || c == '"' || c == '\\')
      byte_class[c] |= CLASS_STRING_STOP;
}

static inline void skip_ws(parser *ps) {
  const char *p = ps->p, *e = ps->end;
  if (p < e && !(byte_class[(unsigned char)*p] & CLASS_BLANK))
    return;              /* the usual case: a client's JSON has no blanks */
  if (ps->own != NULL) { /* the copy ends in a NUL, which is no blank */
    while (byte_class[(unsigned char)*p] & CLASS_BLANK)
      p++;
  } else {
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
      p++;
  }
  ps->p = p;
}

static lj_value *new_value(parser *ps, int type) {
  lj_value *v = lithd_arena_alloc(ps->a, sizeof *v, _Alignof(lj_value));
  if (!v) {
    fail_at(ps, ps->p, "out of memory");
    return NULL;
  }
  memset(v, 0, sizeof *v);
  v->type = type;
  return v;
}

static int push(parser *ps, const char *key, size_t keylen, lj_value *value) {
  if (ps->top == ps->cap) {
    size_t cap = ps->cap ? ps->cap * 2 : 64;
    lj_member *ns = realloc(ps->stack, cap * sizeof *ns);
    if (!ns)
      return fail_at(ps, ps->p, "out of memory");
    ps->stack = ns;
    ps->cap = cap;
  }
  ps->stack[ps->top].key = key;
  ps->stack[ps->top].keylen = keylen;
  ps->stack[ps->top].value = value;
  ps->top++;
  return 0;
}

/* ---- Escapes --------------------------------------------------------------- */

static int hex4(const char *p, unsigned *out) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f')
      v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      v |= (unsigned)(c - 'A' + 10);
    else
      return -1;
  }
  *out = v;
  return 0;
}

/* ---- Strings ------------------------------------------------------------------ */

/* At the opening quote: the decoded string into the arena. */
static int parse_string(parser *ps, const char **out, size_t *outlen) {
  const char *q = ++ps->p; /* past the quote */
  int escapes = 0;
  /* First pass: find the end, validate UTF-8 and control characters. */
  const char *end = ps->end;
  while (q < end && *q != '"') {
    if (ps->own != NULL) { /* a plain run at a time: the NUL after the copy stops it */
      while (!(byte_class[(unsigned char)*q] & CLASS_STRING_STOP))
        q++;
      if (q >= end || *q == '"')
        break;
    }
    unsigned char c = (unsigned char)*q;
    if (c >= 0x20 && c < 0x80 && c != '\\') { /* the common byte first */
      q++;
      continue;
    }
    if (c == '\\') {
      escapes = 1;
      if (q + 1 >= ps->end)
        return fail_at(ps, ps->p - 1, "unterminated string");
      q += 2;
    } else if (c < 0x20) {
      return fail_at(ps, q, "control character 0x%02x in string", c);
    } else if (c < 0x80) {
      q++;
    } else {
      size_t n = lithd_utf8_len((const unsigned char *)q, (size_t)(ps->end - q));
      if (!n)
        return fail_at(ps, q, "invalid UTF-8 in string");
      q += n;
    }
  }
  if (q >= ps->end)
    return fail_at(ps, ps->p - 1, "unterminated string");
  ps->escaped = escapes;
  size_t raw = (size_t)(q - ps->p);
  if (!escapes && ps->own != NULL) { /* in place: its closing quote becomes its NUL */
    char *in = ps->own + (ps->p - ps->start);
    in[raw] = '\0';
    *out = in;
    *outlen = raw;
    ps->p = q + 1;
    return 0;
  }
  char *buf = lithd_arena_alloc(ps->a, raw + 1, 1);
  if (!buf)
    return fail_at(ps, ps->p, "out of memory");
  if (!escapes) {
    memcpy(buf, ps->p, raw);
    buf[raw] = '\0';
    *out = buf;
    *outlen = raw;
    ps->p = q + 1;
    return 0;
  }
  size_t n = 0;
  for (const char *r = ps->p; r < q;) {
    if (*r != '\\') {
      buf[n++] = *r++;
      continue;
    }
    const char *esc = r;
    r++;
    switch (*r++) {
    case '"': buf[n++] = '"'; break;
    case '\\': buf[n++] = '\\'; break;
    case '/': buf[n++] = '/'; break;
    case 'b': buf[n++] = '\b'; break;
    case 'f': buf[n++] = '\f'; break;
    case 'n': buf[n++] = '\n'; break;
    case 'r': buf[n++] = '\r'; break;
    case 't': buf[n++] = '\t'; break;
    case 'u': {
      unsigned cp, lo;
      if (q - r < 4 || hex4(r, &cp) != 0)
        return fail_at(ps, esc, "invalid \\u escape");
      r += 4;
      if (cp >= 0xD800 && cp <= 0xDBFF) {
        if (q - r < 6 || r[0] != '\\' || r[1] != 'u' || hex4(r + 2, &lo) != 0 || lo < 0xDC00 || lo > 0xDFFF)
          return fail_at(ps, esc, "invalid Unicode: an unpaired surrogate");
        r += 6;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
      } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
        return fail_at(ps, esc, "invalid Unicode: an unpaired surrogate");
      }
      n += lithd_utf8_put(buf + n, cp);
      break;
    }
    default: return fail_at(ps, esc, "invalid escape");
    }
  }
  buf[n] = '\0';
  *out = buf;
  *outlen = n;
  ps->p = q + 1;
  return 0;
}

/* ---- Numbers ------------------------------------------------------------------ */

static int digit(char c) { return c >= '0' && c <= '9'; }

/* s[0..q) (a valid JSON number) as a double when that is exact without
 * strtod: no exponent, at most 15 digits, so the digits are an exact
 * integer and 10^fraction digits an exact power; one IEEE division of two
 * exact doubles is correctly rounded, which is strtod's answer (the
 * classic fast path). 1 then; 0 for strtod. */
static int exact_real(const char *s, const char *q, double *out) {
  static const double pow10[] = {1e0, 1e1, 1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};
  int neg = *s == '-', digits = 0, frac = -1;
  int64_t m = 0;
  for (const char *d = s + neg; d < q; d++) {
    if (*d == '.') {
      frac = 0;
      continue;
    }
    if (*d == 'e' || *d == 'E' || ++digits > 15)
      return 0;
    m = m * 10 + (*d - '0');
    if (frac >= 0)
      frac++;
  }
  double v = (double)m / pow10[frac > 0 ? frac : 0];
  *out = neg ? -v : v;
  return 1;
}

static lj_value *parse_number(parser *ps) {
  const char *s = ps->p, *q = s;
  int neg = 0, real = 0;
  if (q < ps->end && *q == '-') {
    neg = 1;
    q++;
  }
  if (q >= ps->end || !digit(*q)) {
    fail_at(ps, s, "invalid number");
    return NULL;
  }
  if (*q == '0') {
    q++;
  } else {
    while (q < ps->end && digit(*q))
      q++;
  }
  if (q < ps->end && *q == '.') {
    real = 1;
    q++;
    if (q >= ps->end || !digit(*q)) {
      fail_at(ps, s, "invalid number");
      return NULL;
    }
    while (q < ps->end && digit(*q))
      q++;
  }
  if (q < ps->end && (*q == 'e' || *q == 'E')) {
    real = 1;
    q++;
    if (q < ps->end && (*q == '+' || *q == '-'))
      q++;
    if (q >= ps->end || !digit(*q)) {
      fail_at(ps, s, "invalid number");
      return NULL;
    }
    while (q < ps->end && digit(*q))
      q++;
  }
  lj_value *v = new_value(ps, real ? LJ_REAL : LJ_INT);
  if (!v)
    return NULL;
  if (!real) {
    /* Accumulate negatively: INT64_MIN has no positive twin. */
    int64_t acc = 0;
    for (const char *d = s + neg; d < q; d++) {
      int k = *d - '0';
      if (acc < (INT64_MIN + k) / 10) {
        fail_at(ps, s, neg ? "too big negative integer" : "too big integer");
        return NULL;
      }
      acc = acc * 10 - k;
    }
    if (!neg) {
      if (acc == INT64_MIN) {
        fail_at(ps, s, "too big integer");
        return NULL;
      }
      acc = -acc;
    }
    v->u.i = acc;
  } else if (exact_real(s, q, &v->u.d)) {
    /* done: a short decimal is exact without strtod */
  } else {
    char small[64];
    size_t len = (size_t)(q - s);
    const char *text = small;
    if (len < sizeof small) {
      memcpy(small, s, len);
      /* cppcheck-suppress unreadVariable ; strtod reads it through text */
      small[len] = '\0';
    } else if (!(text = lithd_arena_copy(ps->a, s, len))) {
      fail_at(ps, s, "out of memory");
      return NULL;
    }
    errno = 0;
    v->u.d = strtod(text, NULL);
    if (!isfinite(v->u.d)) {
      fail_at(ps, s, "real number overflow");
      return NULL;
    }
  }
  ps->p = q;
  return v;
}

/* ---- Containers --------------------------------------------------------------- */

static int key_cmp(const void *x, const void *y) {
  const lj_member *a = x, *b = y;
  if (a->keylen != b->keylen)
    return a->keylen < b->keylen ? -1 : 1;
  return memcmp(a->key, b->key, a->keylen);
}

/* 1 if two of m[0..n) share a key. Sorts a copy when n is large. */
static int has_duplicate(parser *ps, const lj_member *m, size_t n) {
  if (n <= 16) {
    for (size_t i = 1; i < n; i++)
      for (size_t j = 0; j < i; j++)
        if (m[i].keylen == m[j].keylen && memcmp(m[i].key, m[j].key, m[i].keylen) == 0)
          return 1;
    return 0;
  }
  lj_member *copy = malloc(n * sizeof *copy);
  if (!copy) {
    fail_at(ps, ps->p, "out of memory");
    return 1;
  }
  memcpy(copy, m, n * sizeof *copy);
  qsort(copy, n, sizeof *copy, key_cmp);
  int dup = 0;
  for (size_t i = 1; i < n && !dup; i++)
    dup = key_cmp(&copy[i - 1], &copy[i]) == 0;
  free(copy);
  return dup;
}

static lj_value *parse_value(parser *ps, int depth);

/* Past the opening bracket and blanks: 1 if `close` follows at once (the
 * empty container, consumed), else 0. */
static int opens_empty(parser *ps, char close) {
  ps->p++;
  skip_ws(ps);
  if (ps->p < ps->end && *ps->p == close) {
    ps->p++;
    return 1;
  }
  return 0;
}

/* After an item or member: 1 at ',' (another follows), 0 at `close` (the
 * container ends), -1 (failed) at anything else. */
static int after_item(parser *ps, char close) {
  skip_ws(ps);
  if (ps->p < ps->end && *ps->p == ',') {
    ps->p++;
    return 1;
  }
  if (ps->p < ps->end && *ps->p == close) {
    ps->p++;
    return 0;
  }
  return fail_at(ps, ps->p, "',' or '%c' expected", close);
}

static lj_value *parse_array(parser *ps, int depth) {
  size_t base = ps->top;
  int more = !opens_empty(ps, ']');
  while (more) {
    lj_value *item = parse_value(ps, depth + 1);
    if (!item || push(ps, NULL, 0, item) != 0 || (more = after_item(ps, ']')) < 0)
      return NULL;
  }
  size_t n = ps->top - base;
  lj_value *v = lj_make(ps->a, LJ_ARRAY, n);
  if (!v) {
    fail_at(ps, ps->p, "out of memory");
    return NULL;
  }
  for (size_t i = 0; i < n; i++)
    v->u.items[i] = ps->stack[base + i].value;
  ps->top = base;
  return v;
}

static lj_value *parse_object(parser *ps, int depth) {
  size_t base = ps->top;
  const char *open = ps->p;
  int more = !opens_empty(ps, '}');
  while (more) {
    const char *key;
    size_t keylen;
    skip_ws(ps);
    if (ps->p >= ps->end || *ps->p != '"') {
      fail_at(ps, ps->p, "string or '}' expected");
      return NULL;
    }
    const char *at = ps->p;
    if (parse_string(ps, &key, &keylen) != 0)
      return NULL;
    if (ps->escaped && memchr(key, '\0', keylen) != NULL) {
      fail_at(ps, at, "NUL byte in object key");
      return NULL;
    }
    skip_ws(ps);
    if (ps->p >= ps->end || *ps->p != ':') {
      fail_at(ps, ps->p, "':' expected");
      return NULL;
    }
    ps->p++;
    lj_value *val = parse_value(ps, depth + 1);
    if (!val || push(ps, key, keylen, val) != 0 || (more = after_item(ps, '}')) < 0)
      return NULL;
  }
  size_t n = ps->top - base;
  if (n > 1 && has_duplicate(ps, ps->stack + base, n)) { /* n > 0: the stack exists (NULL + 0 is UB) */
    fail_at(ps, open, "duplicate object key");
    return NULL;
  }
  lj_value *v = lj_make(ps->a, LJ_OBJECT, n);
  if (!v) {
    fail_at(ps, ps->p, "out of memory");
    return NULL;
  }
  if (n)
    memcpy(v->u.members, ps->stack + base, n * sizeof *v->u.members);
  ps->top = base;
  return v;
}

static int literal(parser *ps, const char *word) {
  size_t n = strlen(word);
  if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
    return 0;
  ps->p += n;
  return 1;
}

static lj_value *parse_value(parser *ps, int depth) {
  skip_ws(ps);
  if (depth > LJ_MAX_DEPTH) {
    fail_at(ps, ps->p, "nested deeper than %d", LJ_MAX_DEPTH);
    return NULL;
  }
  if (ps->p >= ps->end) {
    fail_at(ps, ps->p, "unexpected end of input");
    return NULL;
  }
  switch (*ps->p) {
  case '{': return parse_object(ps, depth);
  case '[': return parse_array(ps, depth);
  case '"': {
    lj_value *v = new_value(ps, LJ_STRING);
    if (!v || parse_string(ps, &v->u.s, &v->n) != 0)
      return NULL;
    return v;
  }
  case 't':
    if (literal(ps, "true"))
      return new_value(ps, LJ_TRUE);
    break;
  case 'f':
    if (literal(ps, "false"))
      return new_value(ps, LJ_FALSE);
    break;
  case 'n':
    if (literal(ps, "null"))
      return new_value(ps, LJ_NULL);
    break;
  default:
    if (*ps->p == '-' || digit(*ps->p))
      return parse_number(ps);
    break;
  }
  fail_at(ps, ps->p, "invalid token");
  return NULL;
}

int lj_parse(lithd_arena *a, const char *text, size_t len, lj_value **out, lj_error *err) {
  if (text == NULL) /* no body: the empty text */
    text = "", len = 0;
  parser ps = {.a = a, .start = text, .p = text, .end = text + len, .err = err};
  *out = NULL;
  pthread_once(&byte_class_once, byte_class_init);
  if (len > 0 && len <= LJ_IN_PLACE_MAX && (ps.own = lithd_arena_alloc(a, len + 1, 1)) != NULL) {
    /* the parse's own copy: strings without escapes stay where they are;
     * the NUL after it ends the scans */
    memcpy(ps.own, text, len);
    ps.own[len] = '\0';
    ps.start = ps.p = ps.own;
    ps.end = ps.own + len;
  }
  lj_value *v = parse_value(&ps, 0);
  if (v) {
    skip_ws(&ps);
    if (ps.p < ps.end) {
      fail_at(&ps, ps.p, "end of input expected after the value");
      v = NULL;
    }
  }
  free(ps.stack);
  if (!v)
    return -1;
  *out = v;
  return 0;
}

lj_value *lj_getn(const lj_value *obj, const char *key, size_t n) {
  if (!obj || obj->type != LJ_OBJECT)
    return NULL;
  for (size_t i = 0; i < obj->n; i++) {
    const lj_member *m = &obj->u.members[i];
    if (m->keylen != n)
      continue;
    size_t k = 0; /* keys are short: bytes compared here, not by a call */
    while (k < n && m->key[k] == key[k])
      k++;
    if (k == n)
      return m->value;
  }
  return NULL;
}

lj_value *lj_make(lithd_arena *a, int type, size_t n) {
  if (n > SIZE_MAX / sizeof(lj_member))
    return NULL;
  lj_value *v = lithd_arena_alloc(a, sizeof *v, _Alignof(lj_value));
  if (!v)
    return NULL;
  memset(v, 0, sizeof *v);
  v->type = type;
  v->n = n;
  if (type == LJ_ARRAY) {
    v->u.items = n ? lithd_arena_alloc(a, n * sizeof *v->u.items, _Alignof(lj_value *)) : NULL;
    if (n && !v->u.items)
      return NULL;
  } else if (type == LJ_OBJECT) {
    v->u.members = n ? lithd_arena_alloc(a, n * sizeof *v->u.members, _Alignof(lj_member)) : NULL;
    if (n && !v->u.members)
      return NULL;
  }
  return v;
}

lj_value *lj_make_string(lithd_arena *a, const char *s, size_t n) {
  lj_value *v = lj_make(a, LJ_STRING, 0);
  if (!v || !(v->u.s = lithd_arena_copy(a, s, n)))
    return NULL;
  v->n = n;
  return v;
}
