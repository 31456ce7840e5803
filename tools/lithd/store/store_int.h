/*
 * What every store implements (store.h's calls, dispatched in store.c);
 * for the stores' own files, not for the rest of lithd.
 */
#ifndef LITHD_STORE_INT_H
#define LITHD_STORE_INT_H

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
};

#endif /* LITHD_STORE_INT_H */
