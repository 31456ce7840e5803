/*
 * lithd store on a local file (store.h): lith's writer thread and read
 * pool, their answers brought to the loop by lith_uv. database.c opens the
 * lith handle (the lock, the options, the schema steps); this store runs
 * what the routes send it.
 */
#ifndef LITHD_STORE_LOCAL_H
#define LITHD_STORE_LOCAL_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "lith.h"
#include "store.h"

/* A store on `db` (opened by the caller), answering on `loop`; a write
 * waits at most queue_wait_ms for room in lith's queue (then
 * LITH_QUEUE_FULL). On LITH_OK *out owns db: lithd_store_close closes it
 * (lith_close). On error db stays the caller's and *err says why. */
int lithd_store_local_open(lith *db, uv_loop_t *loop, int64_t queue_wait_ms, lithd_store **out, char *err,
                           size_t errsz);

#endif /* LITHD_STORE_LOCAL_H */
