/*
 * lithd store — the seam's calls, each handed to the store's own (see
 * store.h; store_int.h for what a store implements).
 */
#include "sqljson_int.h"
#include "store_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* A client without write access: its batch's statements that write fail
 * (sql/'s lithd__write_refused), whatever road it came by. */
static void mark_access(lithd_store_req *r) {
  if (r->batch != NULL)
    r->batch->no_writes = !r->may_write;
}

int lithd_store_write(lithd_store *s, lithd_store_req *r) {
  mark_access(r);
  r->rc = LITH_OK;
  r->errmsg[0] = '\0';
  r->t_start_ns = r->t_end_ns = 0;
  return s->ops->write(s, r);
}

int lithd_store_read(lithd_store *s, lithd_store_req *r) {
  r->rc = LITH_OK;
  r->errmsg[0] = '\0';
  r->t_start_ns = r->t_end_ns = 0;
  return s->ops->read(s, r);
}

void lithd_store_stats_get(lithd_store *s, lithd_store_stats *st) {
  *st = (lithd_store_stats){0};
  s->ops->stats(s, st);
}

char *lithd_store_stats_json(lithd_store *s) {
  enum { CAP = 1024 };
  lithd_store_stats *st = malloc(sizeof *st); /* ~3.5 KiB of histograms: not on the stack */
  char *out = malloc(CAP);
  if (st == NULL || out == NULL) {
    free(st);
    free(out);
    return NULL;
  }
  lithd_store_stats_get(s, st);
  if (st->has_lith) {
    const lith_stats *l = &st->lith;
    snprintf(out, CAP,
             "{\"commands\":%" PRIu64 ",\"batches\":%" PRIu64 ",\"failed\":%" PRIu64 ",\"retried\":%" PRIu64
             ",\"busy\":%" PRIu64 ",\"queue_depth\":%" PRIu64 ",\"wal_pages\":%" PRIu64
             ",\"checkpoints\":%" PRIu64 ",\"checkpoint_errors\":%" PRIu64 ",\"tx_p50_ns\":%" PRIu64
             ",\"tx_p99_ns\":%" PRIu64 ",\"wait_p50_ns\":%" PRIu64 ",\"wait_p99_ns\":%" PRIu64
             ",\"tx_max_ns\":%" PRIu64 ",\"wal_file_bytes\":%" PRIu64 ",\"wal_holds\":%" PRIu64
             ",\"wal_holds_gave_up\":%" PRIu64 ",\"reads_held\":%" PRIu64 ",\"wal_restart_blocked\":%" PRIu64
             ",\"reads_too_old\":%" PRIu64 "}",
             l->commands, l->batches, l->failed, l->retried, l->busy, l->queue_depth, l->wal_pages,
             l->checkpoints, l->checkpoint_errors, lith_lat_quantile_ns(l->tx_lat, NULL, 0.5),
             lith_lat_quantile_ns(l->tx_lat, NULL, 0.99), lith_lat_quantile_ns(l->wait_lat, NULL, 0.5),
             lith_lat_quantile_ns(l->wait_lat, NULL, 0.99), l->tx_ns_max, l->wal_file_bytes, l->wal_holds,
             l->wal_holds_gave_up, l->reads_held, l->wal_restart_blocked, l->reads_too_old);
  } else {
    /* A cluster: who leads too (issue 34), its address a JSON string
     * (null while none is known). */
    lithd_buf b = {0};
    lithd_buf_printf(&b,
                     "{\"commands\":%" PRIu64 ",\"batches\":%" PRIu64 ",\"failed\":%" PRIu64
                     ",\"failovers\":%" PRIu64 ",\"reruns\":%" PRIu64 ",\"failover_wait_ms\":%" PRId64
                     ",\"leader\":",
                     st->commands, st->batches, st->failed, st->failovers, st->reruns, st->failover_wait_ms);
    if (st->leader[0] != '\0')
      lithd_json_put_string(&b, st->leader, strlen(st->leader));
    else
      lithd_buf_puts(&b, "null");
    lithd_buf_printf(&b, ",\"leader_id\":%" PRIu64 ",\"inflight\":%" PRId64 "}", st->leader_id, st->inflight);
    free(out);
    out = lithd_buf_finish(&b);
  }
  free(st);
  return out;
}

lith *lithd_store_lith(lithd_store *s) { return s->ops->lith(s); }

int lithd_store_snapshot(lithd_store *s, const char *path, char *errmsg, size_t cap) {
  if (cap > 0)
    errmsg[0] = '\0';
  return s->ops->snapshot(s, path, errmsg, cap);
}

void lithd_store_stop(lithd_store *s) { s->ops->stop(s); }

void lithd_store_drain(lithd_store *s, void (*on_drained)(void *arg), void *arg) {
  s->ops->drain(s, on_drained, arg);
}

int lithd_store_close(lithd_store *s, char *err, size_t errsz) {
  if (errsz > 0)
    err[0] = '\0';
  return s != NULL ? s->ops->close(s, err, errsz) : LITH_OK;
}

int lithd_store_tx_open(lithd_store *s, unsigned flags, int64_t idle_ms, int64_t max_ms, lith_http_req *http,
                        lithd_store_tx **out, char *errmsg, size_t cap) {
  *out = NULL;
  if (s->ops->tx_open == NULL) {
    snprintf(errmsg, cap,
             "interactive transactions (a BEGIN left open across requests) need the local store: the %s "
             "store runs each request as one transaction; send the transaction as one batch",
             s->ops->name);
    return LITHD_FORBIDDEN;
  }
  return s->ops->tx_open(s, flags, idle_ms > 0 ? idle_ms : LITHD_TX_IDLE_MS,
                         max_ms > 0 ? max_ms : LITHD_TX_MAX_MS, http, out, errmsg, cap);
}

int lithd_store_tx_run(lithd_store_tx *t, lithd_store_req *r) {
  mark_access(r);
  return t->ops->run(t, r);
}

int lithd_store_tx_ended(const lithd_store_tx *t) { return t == NULL || t->ops->ended(t); }

void lithd_store_tx_close(lithd_store_tx *t) {
  if (t != NULL)
    t->ops->close(t);
}

/* ---- The bounds of an interactive transaction (store.h, store_int.h) -------- */

/* How often a transaction idle past its idle bound asks whether another
 * came to wait for what it holds (nobody wakes it for that). */
#define TX_BOUND_POLL_MS 10

int lithd__tx_bound(int64_t now, int64_t last, int64_t opened, int64_t idle_ms, int64_t max_ms,
                    int others_wait, int64_t *wait_ms) {
  int64_t idle_end = last + idle_ms, max_end = opened + max_ms;
  if (now >= max_end)
    return LITHD_TX_OPEN_TOO_LONG;
  if (now >= idle_end && others_wait)
    return LITHD_TX_IDLE;
  int64_t until = now >= idle_end ? now + TX_BOUND_POLL_MS : idle_end;
  *wait_ms = (until < max_end ? until : max_end) - now;
  return 0;
}

void lithd__tx_bound_msg(int why, int64_t idle_ms, int64_t max_ms, char *msg, size_t cap) {
  if (why == LITHD_TX_IDLE)
    snprintf(msg, cap,
             "the transaction was idle for more than %" PRId64 " ms (--tx-idle-ms) while another client "
             "waited for the writer or a reader it held, and was rolled back",
             idle_ms);
  else
    snprintf(msg, cap,
             "the transaction was open for more than %" PRId64 " ms (--tx-max-ms) and was rolled back",
             max_ms);
}

int lithd__readers_wanted(lithd_store *s) { return atomic_load(&s->readers_wanted) > 0; }

void lithd_store_readers_wanted(lithd_store *s, int delta) {
  if (s != NULL)
    atomic_fetch_add(&s->readers_wanted, delta);
}

int lithd__tx_ended_rc(int end_rc, const char *end_msg, char *errmsg, size_t cap) {
  int bound = end_rc == LITHD_TX_TIMEOUT || end_rc == LITHD_TX_TOO_OLD;
  snprintf(errmsg, cap, "%s", bound ? end_msg : "the transaction has ended");
  return bound ? end_rc : (end_rc != LITH_OK ? end_rc : LITH_MISUSE);
}
