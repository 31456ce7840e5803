/*
 * What every store implements (store.h's calls, dispatched in store.c);
 * for the stores' own files, not for the rest of lithd.
 */
#ifndef LITHD_STORE_INT_H
#define LITHD_STORE_INT_H

#include <stdatomic.h>

#include "store.h"

typedef struct lithd_store_ops {
  const char *name; /* "local", "dqlite": for messages */
  int (*write)(lithd_store *s, lithd_store_req *r);
  int (*read)(lithd_store *s, lithd_store_req *r);
  void (*stats)(lithd_store *s, lithd_store_stats *st);
  lith *(*lith)(lithd_store *s);
  void (*stop)(lithd_store *s);
  void (*drain)(lithd_store *s, void (*on_drained)(void *arg), void *arg);
  int (*close)(lithd_store *s, char *err, size_t errsz);
  /* lithd_store_snapshot (store.h): blocking, any thread. */
  int (*snapshot)(lithd_store *s, const char *path, char *errmsg, size_t cap);
  /* Interactive transactions (store.h); NULL: refused. */
  int (*tx_open)(lithd_store *s, unsigned flags, int64_t idle_ms, int64_t max_ms, lith_http_req *http,
                 lithd_store_tx **out, char *errmsg, size_t cap);
} lithd_store_ops;

/* Every interactive transaction's struct begins with this. */
typedef struct lithd_store_tx_ops {
  int (*run)(lithd_store_tx *t, lithd_store_req *r);
  void (*close)(lithd_store_tx *t);
  int (*ended)(const lithd_store_tx *t);
} lithd_store_tx_ops;

struct lithd_store_tx {
  const lithd_store_tx_ops *ops;
};

/* Every store's struct begins with this. */
struct lithd_store {
  const lithd_store_ops *ops;
  _Atomic int readers_wanted; /* lithd_store_readers_wanted's count: set on the loop,
                                 read by a transaction's thread (lithd__tx_bound) */
};

/* store.h's bounds of an interactive transaction, the one rule for every
 * store: called by the thread that waits for the transaction's next run,
 * at `now` (ms, one monotonic clock for all four times), with `last` the
 * end of its last run (or its start), `opened` its open, and
 * `others_wait` whether another waits for what it holds: a command for
 * the writer it holds (the store counts its own queue), or, while it
 * holds a reader (LITHD_TX_SNAPSHOT, also after its move to the writer),
 * lithd__readers_wanted. Returns 0: wait on, at most *wait_ms (then ask
 * again: others may have come); or LITHD_TX_IDLE / LITHD_TX_OPEN_TOO_LONG:
 * roll back now, and answer the next run with LITHD_TX_TIMEOUT and
 * lithd__tx_bound_msg's message. */
enum { LITHD_TX_IDLE = 1, LITHD_TX_OPEN_TOO_LONG = 2 };
int lithd__tx_bound(int64_t now, int64_t last, int64_t opened, int64_t idle_ms, int64_t max_ms,
                    int others_wait, int64_t *wait_ms);

/* Why bound `why` (LITHD_TX_*) ended it, into msg[0..cap). */
void lithd__tx_bound_msg(int why, int64_t idle_ms, int64_t max_ms, char *msg, size_t cap);

/* What a run of a transaction that already ended answers (store.h's
 * lithd_store_tx_run), the one rule for every store: a bound's end
 * (LITHD_TX_TIMEOUT, LITHD_TX_TOO_OLD) with its message end_msg, else
 * "the transaction has ended" with its code (LITH_MISUSE when it ended
 * well). errmsg: cap bytes. */
int lithd__tx_ended_rc(int end_rc, const char *end_msg, char *errmsg, size_t cap);

/* Whether a request waits for a reader of s's database now (any thread). */
int lithd__readers_wanted(lithd_store *s);

#endif /* LITHD_STORE_INT_H */
