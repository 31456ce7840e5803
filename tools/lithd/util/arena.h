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

/* Zero-initialise ({0}) to start; lithd_arena_free to release everything. */
typedef struct lithd_arena {
  lithd_arena_chunk *head;
  size_t next_cap;
} lithd_arena;

/* n bytes aligned to align (a power of two, at most _Alignof(max_align_t));
 * NULL when out of memory. Valid until lithd_arena_free. */
void *lithd_arena_alloc(lithd_arena *a, size_t n, size_t align);

/* A copy of p[0..n) with a NUL after it; NULL when out of memory. */
void *lithd_arena_copy(lithd_arena *a, const void *p, size_t n);

void lithd_arena_free(lithd_arena *a);

#endif /* LITHD_ARENA_H */
