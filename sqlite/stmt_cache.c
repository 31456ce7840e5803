/*
 * Statement cache: a chained hash table on the SQL text plus an LRU list.
 * Lookups hash the text (FNV-1a) and compare it in full: a pointer match
 * alone is not proof, since callers may reuse a buffer for other SQL.
 *
 * The same SQL asked for again while its statement is still mid-step (a
 * recursive walk: the parent iterates while the child queries) gets a second
 * statement, prepared beside the first and kept for next time: resetting the
 * first would silently cut the parent's walk short. At most MAX_EXTRA such
 * copies per text; past that the request fails loudly.
 */
#include "stmt_cache.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "errcode.h"

#define MAX_EXTRA 32

typedef struct entry {
  char *sql;
  size_t len;
  uint64_t hash;
  sqlite3_stmt *stmt;
  sqlite3_stmt **extra; /* further copies, for when stmt is mid-step */
  int nextra;
  uint64_t epoch;            /* last release period it was handed out in */
  struct entry *hnext;       /* hash chain */
  struct entry *prev, *next; /* LRU: head is most recent */
} entry;

struct lith__stmt_cache {
  sqlite3 *conn;
  int capacity;
  int count;
  unsigned long prepares;
  entry **buckets;
  size_t nbuckets; /* power of two */
  entry *lru_head, *lru_tail;
  uint64_t epoch;
  entry **used; /* handed out this epoch */
  int nused, capused;
};

static uint64_t fnv1a(const char *s, size_t *len) {
  uint64_t h = 1469598103934665603ULL;
  const unsigned char *p = (const unsigned char *)s;
  for (; *p; p++) {
    h ^= *p;
    h *= 1099511628211ULL;
  }
  *len = (size_t)(p - (const unsigned char *)s);
  return h;
}

int lith__stmt_cache_create(sqlite3 *conn, int capacity, lith__stmt_cache **out) {
  *out = NULL;
  if (capacity < 1)
    capacity = 1;
  lith__stmt_cache *c = calloc(1, sizeof *c);
  if (!c)
    goto err;
  c->conn = conn;
  c->capacity = capacity;
  c->nbuckets = 16;
  while (c->nbuckets < (size_t)capacity * 2)
    c->nbuckets <<= 1;
  c->buckets = calloc(c->nbuckets, sizeof *c->buckets);
  if (!c->buckets)
    goto err_free_cache;
  c->epoch = 1;
  *out = c;
  return LITH_OK;

err_free_cache:
  free(c);
err:
  return lith__fail(LITH_NOMEM, "statement cache: out of memory");
}

static void lru_unlink(lith__stmt_cache *c, entry *e) {
  if (e->prev)
    e->prev->next = e->next;
  else
    c->lru_head = e->next;
  if (e->next)
    e->next->prev = e->prev;
  else
    c->lru_tail = e->prev;
  e->prev = e->next = NULL;
}

static void lru_push_front(lith__stmt_cache *c, entry *e) {
  e->prev = NULL;
  e->next = c->lru_head;
  if (c->lru_head)
    c->lru_head->prev = e;
  c->lru_head = e;
  if (!c->lru_tail)
    c->lru_tail = e;
}

static void entry_free(entry *e) {
  for (int i = 0; i < e->nextra; i++)
    sqlite3_finalize(e->extra[i]);
  free(e->extra);
  sqlite3_finalize(e->stmt);
  free(e->sql);
  free(e);
}

static void evict(lith__stmt_cache *c, entry *e) {
  entry **pp = &c->buckets[e->hash & (c->nbuckets - 1)];
  while (*pp != e)
    pp = &(*pp)->hnext;
  *pp = e->hnext;
  lru_unlink(c, e);
  c->count--;
  entry_free(e);
}

static void make_room(lith__stmt_cache *c) {
  entry *e = c->lru_tail;
  while (c->count >= c->capacity && e) {
    entry *prev = e->prev;
    if (e->epoch != c->epoch) /* not in use by the running command */
      evict(c, e);
    e = prev;
  }
}

static int mark_used(lith__stmt_cache *c, entry *e) {
  if (e->epoch == c->epoch)
    return LITH_OK;
  if (c->nused == c->capused) {
    int ncap = c->capused ? c->capused * 2 : 16;
    entry **n = realloc(c->used, (size_t)ncap * sizeof *n);
    if (!n)
      return lith__fail(LITH_NOMEM, "statement cache: out of memory");
    c->used = n;
    c->capused = ncap;
  }
  c->used[c->nused++] = e;
  e->epoch = c->epoch;
  return LITH_OK;
}

/* Whether the text after a statement holds no other: blanks, ';' and SQL
 * comments, as SQLite's tokenizer reads them (a comment left open runs to
 * the end). A trailing comment is no second statement: sqlite3 runs
 * "SELECT 1; -- why" too. */
static int only_space(const char *s) {
  for (;;) {
    if (*s == ' ' || (*s >= '\t' && *s <= '\r') || *s == ';') {
      s++;
    } else if (s[0] == '-' && s[1] == '-') {
      if ((s = strchr(s, '\n')) == NULL)
        return 1;
    } else if (s[0] == '/' && s[1] == '*') {
      const char *end = strstr(s + 2, "*/");
      if (end == NULL)
        return 1;
      s = end + 2;
    } else {
      return *s == '\0';
    }
  }
}

/* A statement for e's text that is not mid-step: stmt, one of the extra
 * copies, or a new copy. Called when e was handed out earlier in this
 * period, so every copy in use is reset by the next release. */
static int free_copy(lith__stmt_cache *c, entry *e, sqlite3_stmt **out) {
  if (!sqlite3_stmt_busy(e->stmt)) {
    *out = e->stmt;
    return LITH_OK;
  }
  for (int i = 0; i < e->nextra; i++)
    if (!sqlite3_stmt_busy(e->extra[i])) {
      *out = e->extra[i];
      return LITH_OK;
    }
  if (e->nextra == MAX_EXTRA)
    return lith__fail(LITH_MISUSE,
                      "statement cache: \"%.60s\" is already mid-step %d times (stepped, not reset): "
                      "reset a statement you are done with before asking for its SQL again",
                      e->sql, MAX_EXTRA + 1);
  sqlite3_stmt **grown = realloc(e->extra, (size_t)(e->nextra + 1) * sizeof *grown);
  if (!grown)
    return lith__fail(LITH_NOMEM, "statement cache: out of memory");
  e->extra = grown;
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v3(c->conn, e->sql, (int)e->len + 1, SQLITE_PREPARE_PERSISTENT, &st, NULL);
  if (rc != SQLITE_OK)
    return lith__fail_sqlite(rc, c->conn, "prepare");
  c->prepares++;
  e->extra[e->nextra++] = st;
  *out = st;
  return LITH_OK;
}

int lith__stmt_cache_get(lith__stmt_cache *c, const char *sql, sqlite3_stmt **out) {
  *out = NULL;
  if (!sql)
    return lith__fail(LITH_MISUSE, "statement SQL is NULL");
  size_t len;
  uint64_t h = fnv1a(sql, &len);
  entry **bucket = &c->buckets[h & (c->nbuckets - 1)];
  for (entry *e = *bucket; e; e = e->hnext) {
    if (e->hash == h && e->len == len && memcmp(e->sql, sql, len) == 0) {
      sqlite3_stmt *st = e->stmt;
      if (e->epoch == c->epoch) { /* handed out earlier in this command */
        int rc = free_copy(c, e, &st);
        if (rc != LITH_OK)
          return rc;
        sqlite3_reset(st); /* it may have run to its end */
      } else if (mark_used(c, e) != LITH_OK) {
        return LITH_NOMEM;
      }
      sqlite3_clear_bindings(st);
      if (c->lru_head != e) {
        lru_unlink(c, e);
        lru_push_front(c, e);
      }
      *out = st;
      return LITH_OK;
    }
  }

  sqlite3_stmt *stmt = NULL;
  const char *tail = NULL;
  int rc = sqlite3_prepare_v3(c->conn, sql, (int)len + 1, SQLITE_PREPARE_PERSISTENT, &stmt, &tail);
  if (rc != SQLITE_OK)
    return lith__fail_sqlite(rc, c->conn, "prepare");
  if (stmt == NULL)
    return lith__fail(LITH_MISUSE, "prepare: empty statement");
  if (tail && !only_space(tail)) {
    sqlite3_finalize(stmt);
    return lith__fail(LITH_MISUSE, "prepare: more than one statement in \"%.60s\"", sql);
  }
  c->prepares++;
  make_room(c);
  entry *e = calloc(1, sizeof *e);
  if (!e)
    goto err_finalize;
  e->sql = malloc(len + 1);
  if (!e->sql)
    goto err_free_entry;
  memcpy(e->sql, sql, len + 1);
  e->len = len;
  e->hash = h;
  e->stmt = stmt;
  if (mark_used(c, e) != LITH_OK)
    goto err_free_sql;
  e->hnext = *bucket;
  *bucket = e;
  lru_push_front(c, e);
  c->count++;
  *out = stmt;
  return LITH_OK;

err_free_sql:
  free(e->sql);
err_free_entry:
  free(e);
err_finalize:
  sqlite3_finalize(stmt);
  return lith__fail(LITH_NOMEM, "statement cache: out of memory");
}

void lith__stmt_cache_release(lith__stmt_cache *c) {
  for (int i = 0; i < c->nused; i++) {
    entry *e = c->used[i];
    sqlite3_reset(e->stmt);
    for (int k = 0; k < e->nextra; k++)
      sqlite3_reset(e->extra[k]);
  }
  c->nused = 0;
  c->epoch++;
}

void lith__stmt_cache_destroy(lith__stmt_cache *c) {
  if (!c)
    return;
  entry *e = c->lru_head;
  while (e) {
    entry *next = e->next;
    entry_free(e);
    e = next;
  }
  free(c->used);
  free(c->buckets);
  free(c);
}

int lith__stmt_cache_count(const lith__stmt_cache *c) { return c->count; }

unsigned long lith__stmt_cache_prepares(const lith__stmt_cache *c) { return c->prepares; }
