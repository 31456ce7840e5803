/* lithd heap: SQLite's allocator with a ceiling (see heap.h). */
#include "heap.h"

#include <malloc.h>
#include <stdatomic.h>
#include <stdlib.h>

#include <sqlite3.h>

static _Atomic int64_t g_used;
static int64_t g_limit;

/* Whether n more bytes stay under the ceiling. */
static int room_for(int64_t n) { return atomic_load_explicit(&g_used, memory_order_relaxed) + n <= g_limit; }

static void *heap_malloc(int n) {
  void *p;
  if (!room_for(n) || (p = malloc((size_t)n)) == NULL)
    return NULL;
  atomic_fetch_add_explicit(&g_used, (int64_t)malloc_usable_size(p), memory_order_relaxed);
  return p;
}

static void heap_free(void *p) {
  if (p == NULL)
    return;
  atomic_fetch_sub_explicit(&g_used, (int64_t)malloc_usable_size(p), memory_order_relaxed);
  free(p);
}

static void *heap_realloc(void *p, int n) {
  int64_t old = (int64_t)malloc_usable_size(p);
  void *q;
  if (n > old && !room_for(n - old))
    return NULL; /* SQLite keeps p */
  if ((q = realloc(p, (size_t)n)) == NULL)
    return NULL;
  atomic_fetch_add_explicit(&g_used, (int64_t)malloc_usable_size(q) - old, memory_order_relaxed);
  return q;
}

static int heap_size(void *p) { return p == NULL ? 0 : (int)malloc_usable_size(p); }

static int heap_roundup(int n) { return (n + 7) & ~7; }

static int heap_init(void *arg) {
  (void)arg;
  return SQLITE_OK;
}

static void heap_shutdown(void *arg) { (void)arg; }

int lithd_heap_install(int64_t limit_bytes) {
  static const sqlite3_mem_methods methods = {heap_malloc,  heap_free, heap_realloc,  heap_size,
                                              heap_roundup, heap_init, heap_shutdown, NULL};
  if (limit_bytes <= 0)
    return SQLITE_OK;
  g_limit = limit_bytes;
  return sqlite3_config(SQLITE_CONFIG_MALLOC, &methods);
}
