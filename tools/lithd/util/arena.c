/*
 * lithd arena — see arena.h. Chunks double from 4 KiB to 1 MiB; a block
 * larger than a quarter of the next chunk gets a chunk of its own, put
 * behind the head, so the head's free space stays in use.
 */
#include "arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_MIN 4096
#define ARENA_MAX (1024 * 1024)

/* The head chunk had no room (lithd_arena_alloc, arena.h): a new one. */
void *lithd__arena_grow(lithd_arena *a, size_t n) {
  size_t cap = a->next_cap ? a->next_cap : ARENA_MIN;
  if (n > SIZE_MAX - sizeof(lithd_arena_chunk))
    return NULL;
  int big = n > cap / 4;
  if (n > cap)
    cap = n;
  lithd_arena_chunk *nc = malloc(sizeof(lithd_arena_chunk) + cap);
  if (!nc)
    return NULL;
  nc->cap = cap;
  nc->used = n;
  if (big && a->head) {
    nc->next = a->head->next;
    a->head->next = nc;
  } else {
    nc->next = a->head;
    a->head = nc;
    if (a->next_cap < ARENA_MAX)
      a->next_cap = a->next_cap ? a->next_cap * 2 : ARENA_MIN * 2;
  }
  return nc + 1;
}

void *lithd_arena_copy(lithd_arena *a, const void *p, size_t n) {
  if (n == SIZE_MAX)
    return NULL;
  void *q = lithd_arena_alloc(a, n + 1, 1);
  if (q) {
    if (n)
      memcpy(q, p, n);
    ((char *)q)[n] = '\0'; /* text stays usable as a C string */
  }
  return q;
}

void lithd_arena_free(lithd_arena *a) {
  lithd_arena_chunk *c = a->head;
  while (c) {
    lithd_arena_chunk *next = c->next;
    free(c);
    c = next;
  }
  a->head = NULL;
  a->next_cap = 0;
}
