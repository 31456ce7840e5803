/*
 * lithd json — a small, strict JSON reader for request bodies.
 *
 * Why not jansson here: a request is parsed once, read once and thrown away,
 * and jansson builds a tree of separately allocated, reference-counted
 * nodes with a hash table per object — about a sixth of lithd's loop thread
 * went to it (bench/notes/lithd-2026-11-30-profile-64-conns.md). This reader
 * puts the whole tree in an arena: a few allocations per request, one free.
 *
 * Strict RFC 8259: one value and whitespace; UTF-8 input only (overlong
 * forms, surrogates and code points past U+10FFFF are refused); no control
 * characters in strings; escapes decoded (\u0000 allowed: TEXT may hold it;
 * unpaired surrogates refused; but not in an object key, which is a C
 * string); duplicate keys in an object refused (a
 * mistake, never a choice); integers kept exact over the signed 64-bit range
 * (beyond it an error, never a rounded real); reals must be finite; nesting
 * at most LJ_MAX_DEPTH.
 *
 * Ownership: every node, key and string lives in the arena passed in and
 * is valid until that arena is freed. Strings are NUL-terminated after
 * their n bytes (and may hold NULs).
 */
#ifndef LITHD_JSON_H
#define LITHD_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "arena.h"

#define LJ_MAX_DEPTH 64

enum { LJ_NULL, LJ_FALSE, LJ_TRUE, LJ_INT, LJ_REAL, LJ_STRING, LJ_ARRAY, LJ_OBJECT };

typedef struct lj_value lj_value;

typedef struct lj_member {
  const char *key; /* NUL-terminated after keylen bytes */
  size_t keylen;
  lj_value *value;
} lj_member;

struct lj_value {
  int type;
  size_t n; /* LJ_STRING: bytes; LJ_ARRAY: items; LJ_OBJECT: members */
  union {
    int64_t i;
    double d;
    const char *s;
    lj_value **items;
    lj_member *members;
  } u;
};

typedef struct lj_error {
  int line, column; /* from 1; column in bytes */
  char text[128];
} lj_error;

/* Parse text[0..len) into a tree in `a`. Returns 0 with *out set, or -1
 * with *err (may be NULL) saying where and why; on -1 the arena may hold
 * partial nodes (freed with it). */
int lj_parse(lithd_arena *a, const char *text, size_t len, lj_value **out, lj_error *err);

/* The member of object `obj` named key[0..n) (compared with its length:
 * "a\u0000b" is not "a"), or NULL (also when obj is NULL or not an
 * object). lj_get takes a C string; inline, so a literal key's length is
 * the compiler's, not a strlen per call. */
lj_value *lj_getn(const lj_value *obj, const char *key, size_t n);
static inline lj_value *lj_get(const lj_value *obj, const char *key) {
  return lj_getn(obj, key, strlen(key));
}

/* Building trees by hand (named commands): a node of `type` with room for
 * n items or members (to fill in), or a string copied from s[0..n).
 * NULL when out of memory. */
lj_value *lj_make(lithd_arena *a, int type, size_t n);
lj_value *lj_make_string(lithd_arena *a, const char *s, size_t n);

#endif /* LITHD_JSON_H */
