/*
 * lithd arena — bump allocation in chunks, freed all at once.
 *
 * A request's parsed body, its statements and their values live and die
 * together: one arena per batch makes that a handful of mallocs instead of
 * one per value, and one free.
 */
#ifndef LITHD_ARENA_H
#define LITHD_ARENA_H

#include <stddef.h>

typedef struct lithd_arena_chunk lithd_arena_chunk;

/* A chunk's bookkeeping, followed by its cap bytes (arena.c); here so
 * that the fast path below is inline. Max-aligned, so the bytes after it
 * are too. */
struct lithd_arena_chunk {
  _Alignas(max_align_t) lithd_arena_chunk *next;
  size_t used, cap;
};

/* Zero-initialise ({0}) to start; lithd_arena_free to release everything. */
typedef struct lithd_arena {
  lithd_arena_chunk *head;
  size_t next_cap;
} lithd_arena;

/* n bytes aligned to align (a power of two, at most _Alignof(max_align_t));
 * NULL when out of memory. Valid until lithd_arena_free. */
void *lithd__arena_grow(lithd_arena *a, size_t n);
static inline void *lithd_arena_alloc(lithd_arena *a, size_t n, size_t align) {
  lithd_arena_chunk *c = a->head;
  if (c) { /* the head chunk has room: a bump, inline (a request makes ~100) */
    size_t off = (c->used + align - 1) & ~(align - 1);
    if (off <= c->cap && n <= c->cap - off) {
      c->used = off + n;
      return (unsigned char *)(c + 1) + off;
    }
  }
  return lithd__arena_grow(a, n);
}

/* A copy of p[0..n) with a NUL after it; NULL when out of memory. */
void *lithd_arena_copy(lithd_arena *a, const void *p, size_t n);

void lithd_arena_free(lithd_arena *a);

#endif /* LITHD_ARENA_H */
