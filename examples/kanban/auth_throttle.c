/*
 * auth_throttle — see auth_throttle.h. A plain array scanned in full: a
 * sign-in already costs an argon2id hash (tens of milliseconds), next to
 * which comparing a few thousand short keys is nothing, and the array
 * needs no rehashing or deletion logic.
 */
#include "auth_throttle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_MAX 96
#define FORGET_MS (15 * 60 * 1000)
#define WAIT_MAX_MS (5 * 60 * 1000)

typedef struct entry {
  char key[KEY_MAX];
  int failures;
  int64_t last_ms;  /* the last failure */
  int64_t until_ms; /* no try before */
} entry;

struct auth_throttle {
  entry *e;
  int n, max;
};

auth_throttle *auth_throttle_new(int max_keys) {
  auth_throttle *t = calloc(1, sizeof *t);
  if (t == NULL)
    return NULL;
  t->max = max_keys < 1 ? 1 : max_keys;
  t->e = calloc((size_t)t->max, sizeof *t->e);
  if (t->e == NULL) {
    free(t);
    return NULL;
  }
  return t;
}

void auth_throttle_free(auth_throttle *t) {
  if (t == NULL)
    return;
  free(t->e);
  free(t);
}

static entry *find(const auth_throttle *t, const char *key) {
  for (int i = 0; i < t->n; i++)
    if (strncmp(t->e[i].key, key, KEY_MAX - 1) == 0)
      return &t->e[i];
  return NULL;
}

int64_t auth_throttle_wait(const auth_throttle *t, const char *key, int64_t now_ms) {
  const entry *e = find(t, key);
  if (e == NULL || now_ms - e->last_ms >= FORGET_MS || e->until_ms <= now_ms)
    return 0;
  return e->until_ms - now_ms;
}

void auth_throttle_fail(auth_throttle *t, const char *key, int free_tries, int64_t now_ms) {
  entry *e = find(t, key);
  if (e == NULL) {
    if (t->n < t->max) {
      e = &t->e[t->n++];
    } else { /* full: the key that failed longest ago gives way */
      e = &t->e[0];
      for (int i = 1; i < t->n; i++)
        if (t->e[i].last_ms < e->last_ms)
          e = &t->e[i];
    }
    memset(e, 0, sizeof *e);
    snprintf(e->key, sizeof e->key, "%s", key);
  } else if (now_ms - e->last_ms >= FORGET_MS) {
    e->failures = 0;
    e->until_ms = 0;
  }
  e->failures++;
  e->last_ms = now_ms;
  if (e->failures > free_tries) {
    int doublings = e->failures - free_tries - 1;
    int64_t wait = doublings >= 9 ? WAIT_MAX_MS : (int64_t)1000 << doublings;
    e->until_ms = now_ms + (wait > WAIT_MAX_MS ? WAIT_MAX_MS : wait);
  }
}

void auth_throttle_forget(auth_throttle *t, const char *key) {
  entry *e = find(t, key);
  if (e == NULL)
    return;
  *e = t->e[--t->n]; /* the last one takes its place */
}
