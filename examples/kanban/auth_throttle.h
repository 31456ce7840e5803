/*
 * auth_throttle — a backoff for failed sign-ins, by user name and by client
 * address, so that guessing passwords is slow for one account and for one
 * machine, while a person who mistypes a few times notices nothing.
 *
 * A key ("n:alice", "a:192.0.2.7") may fail `free_tries` times; after that
 * each failure makes it wait, 1 s doubling up to 5 minutes. A key that has
 * not failed for 15 minutes starts over. The table is bounded (the oldest
 * key gives way), so a flood of made-up names cannot grow the server's
 * memory. Loop thread only: no locking.
 */
#ifndef KANBAN_AUTH_THROTTLE_H
#define KANBAN_AUTH_THROTTLE_H

#include <stdint.h>

typedef struct auth_throttle auth_throttle;

/* A throttle of at most `max_keys` keys; NULL when out of memory. Free it
 * with auth_throttle_free (NULL allowed). */
auth_throttle *auth_throttle_new(int max_keys);
void auth_throttle_free(auth_throttle *t);

/* Milliseconds `key` must still wait before its next try; 0: it may try. */
int64_t auth_throttle_wait(const auth_throttle *t, const char *key, int64_t now_ms);

/* A failed try by `key` (see above for free_tries). */
void auth_throttle_fail(auth_throttle *t, const char *key, int free_tries, int64_t now_ms);

/* `key` succeeded: forget its failures. */
void auth_throttle_forget(auth_throttle *t, const char *key);

#endif
