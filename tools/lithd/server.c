/*
 * lithd server — routes to lith (see server.h).
 *
 * Design:
 *   - /v1/do: the body is parsed on the loop thread (bad requests never reach
 *     the writer), then ONE command is submitted through the lith_uv bridge.
 *     Its context (struct do_ctx) holds the bridge request, the HTTP handle,
 *     the batch and the result; the command may run more than once, and
 *     lithd_batch_run frees the previous run's result each time. The handler
 *     returns LITH_HTTP_PENDING; the bridge callback answers after the batch
 *     committed and frees the context. If the client left meanwhile, the
 *     answer returns LITH_HTTP_GONE and everything is freed just the same:
 *     the command's outcome stands.
 *   - Answers follow the recipe of sqljson.h: a committed result, a
 *     statement's own error (the command was undone alone), or an error of
 *     the transaction around it (the result must not be sent).
 *   - /v1/query: KNOWN LIMITATION — lith_read runs synchronously on the loop
 *     thread. Reads never wait for the writer, but a long query stalls every
 *     other connection meanwhile; the next step is uv_queue_work on a pool.
 *   - The bearer token, when configured, is checked before anything is read
 *     or run: a refused request changes nothing.
 */
#include "server.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Helpers ----------------------------------------------------------- */

static int authorized(lithd_server *s, lith_http_req *req) {
  if (s->token == NULL) return 1;
  return lith_http_check_bearer(req, s->token);
}

/* Answer a lithd_error; on no memory a fixed 500. */
static void respond_lithd_error(lith_http_req *req, const lithd_error *e) {
  char *json = lithd_error_json(e);
  if (json == NULL) {
    lith_http_respond_error(req, 500, "out of memory");
    return;
  }
  lith_http_respond_json(req, lithd_http_status(e->code), json);
  free(json);
}

/* The sqljson.h recipe, after lith_do / lith_read returned rc with `result`
 * and `errmsg` (the command's or read's message). Completes req. */
static void respond_outcome(lith_http_req *req, int rc, const lithd_result *result,
                            const char *errmsg) {
  lithd_error e;
  char *json = NULL;
  int status;

  if (rc == LITH_OK && result != NULL) {
    status = 200;
  } else if (rc != LITH_OK && result != NULL && lithd_result_error(result, &e) == rc) {
    status = lithd_http_status(rc);
  } else {
    if (rc == LITH_OK) rc = LITH_NOMEM; /* OK without a result: memory ran out */
    lithd_error_set(&e, rc, -1, "%s", errmsg != NULL && errmsg[0] ? errmsg : lith_errstr(rc));
    respond_lithd_error(req, &e);
    return;
  }
  json = lithd_result_json(result);
  if (json == NULL) {
    lith_http_respond_error(req, 500, "out of memory");
    return;
  }
  lith_http_respond_json(req, status, json);
  free(json);
}

/* Parse the request body into a batch, or answer the error (returns NULL). */
static lithd_batch *parse_body(lithd_server *s, lith_http_req *req) {
  size_t len = 0;
  const char *body = lith_http_req_body(req, &len);
  lithd_batch *b = NULL;
  lithd_error e;
  int rc = lithd_batch_parse(body, len, &s->limits, &b, &e);
  if (rc != LITH_OK) {
    respond_lithd_error(req, &e);
    return NULL;
  }
  return b;
}

/* ---- POST /v1/do ------------------------------------------------------- */

struct do_ctx {
  lith_uv_req ureq;     /* first: the bridge callback gets &ureq */
  lith_http_req *req;
  lithd_batch *batch;
  lithd_result *result; /* written on the writer thread, read after the callback */
};

static void do_ctx_free(struct do_ctx *c) {
  if (c == NULL) return;
  lithd_result_free(c->result);
  lithd_batch_free(c->batch);
  free(c);
}

static int do_cmd(lith_tx *tx, void *arg) {
  struct do_ctx *c = arg;
  return lithd_batch_run(tx, c->batch, &c->result);
}

static void do_done(lith_uv_req *u) {
  struct do_ctx *c = (struct do_ctx *)u;
  /* GONE (the client left) releases the handle just the same. */
  respond_outcome(c->req, u->req.rc, c->result, u->req.errmsg);
  do_ctx_free(c);
}

static int h_do(lith_http_req *req, void *arg) {
  lithd_server *s = arg;
  struct do_ctx *c = NULL;
  lithd_error e;
  int rc;

  if (!authorized(s, req)) return LITH_HTTP_DONE;
  c = calloc(1, sizeof *c);
  if (c == NULL) {
    lith_http_respond_error(req, 500, "out of memory");
    goto done;
  }
  c->req = req;
  c->batch = parse_body(s, req);
  if (c->batch == NULL) goto done;

  rc = lith_uv_submit(s->bridge, &c->ureq, do_cmd, c, do_done);
  if (rc == LITH_OK) return LITH_HTTP_PENDING; /* c now belongs to do_done */
  if (rc == LITH_QUEUE_FULL) {
    lith_http_add_header(req, "retry-after", "1");
    lithd_error_set(&e, rc, -1, "the write queue is full; retry later");
  } else {
    lithd_error_set(&e, rc, -1, "%s", rc == LITH_CLOSED ? "lithd is shutting down" : lith_errstr(rc));
  }
  respond_lithd_error(req, &e);
done:
  do_ctx_free(c);
  return LITH_HTTP_DONE;
}

/* ---- POST /v1/query ---------------------------------------------------- */

struct query_ctx {
  lithd_batch *batch;
  lithd_result *result;
};

static int query_fn(lith_rx *rx, void *arg) {
  struct query_ctx *q = arg;
  return lithd_batch_read(rx, q->batch, &q->result);
}

static int h_query(lith_http_req *req, void *arg) {
  lithd_server *s = arg;
  struct query_ctx q = {NULL, NULL};
  int rc;

  if (!authorized(s, req)) return LITH_HTTP_DONE;
  q.batch = parse_body(s, req);
  if (q.batch == NULL) goto done;
  /* Known limitation: synchronous on the loop thread (see the top). */
  rc = lith_read(s->db, query_fn, &q);
  respond_outcome(req, rc, q.result, lith_errmsg(s->db));
done:
  lithd_result_free(q.result);
  lithd_batch_free(q.batch);
  return LITH_HTTP_DONE;
}

/* ---- GET /v1/stats, GET /healthz --------------------------------------- */

static int h_stats(lith_http_req *req, void *arg) {
  lithd_server *s = arg;
  lith_stats *st = NULL;
  char buf[1024];

  if (!authorized(s, req)) return LITH_HTTP_DONE;
  st = malloc(sizeof *st); /* ~3.5 KiB of histograms: not on the stack */
  if (st == NULL) {
    lith_http_respond_error(req, 500, "out of memory");
    return LITH_HTTP_DONE;
  }
  lith_stats_get(s->db, st);
  snprintf(buf, sizeof buf,
           "{\"commands\":%" PRIu64 ",\"batches\":%" PRIu64 ",\"failed\":%" PRIu64
           ",\"retried\":%" PRIu64 ",\"busy\":%" PRIu64 ",\"queue_depth\":%" PRIu64
           ",\"wal_pages\":%" PRIu64 ",\"checkpoints\":%" PRIu64
           ",\"checkpoint_errors\":%" PRIu64 ",\"tx_p50_ns\":%" PRIu64
           ",\"tx_p99_ns\":%" PRIu64 ",\"wait_p50_ns\":%" PRIu64 ",\"wait_p99_ns\":%" PRIu64
           ",\"tx_max_ns\":%" PRIu64 "}",
           st->commands, st->batches, st->failed, st->retried, st->busy, st->queue_depth,
           st->wal_pages, st->checkpoints, st->checkpoint_errors,
           lith_lat_quantile_ns(st->tx_lat, NULL, 0.5), lith_lat_quantile_ns(st->tx_lat, NULL, 0.99),
           lith_lat_quantile_ns(st->wait_lat, NULL, 0.5),
           lith_lat_quantile_ns(st->wait_lat, NULL, 0.99), st->tx_ns_max);
  free(st);
  lith_http_respond_json(req, 200, buf);
  return LITH_HTTP_DONE;
}

static int h_healthz(lith_http_req *req, void *arg) {
  lith_http_respond_json(req, 200, "{\"ok\":true}");
  return LITH_HTTP_DONE;
}

/* ---- Routes ------------------------------------------------------------ */

int lithd_server_routes(lithd_server *s) {
  int rc;
  if ((rc = lith_http_route(s->http, "POST", "/v1/do", LITH_HTTP_EXACT, h_do, s)) != LITH_HTTP_OK)
    return rc;
  if ((rc = lith_http_route(s->http, "POST", "/v1/query", LITH_HTTP_EXACT, h_query, s)) !=
      LITH_HTTP_OK)
    return rc;
  if ((rc = lith_http_route(s->http, "GET", "/v1/stats", LITH_HTTP_EXACT, h_stats, s)) !=
      LITH_HTTP_OK)
    return rc;
  return lith_http_route(s->http, "GET", "/healthz", LITH_HTTP_EXACT, h_healthz, s);
}
