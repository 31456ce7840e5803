/*
 * lithd hrana_http — Hrana's routes and streams (see hrana_http.h).
 *
 * Design (the stream's life and its transaction's: store/tx_life.h):
 *   - A pipeline is a small state machine on the loop (struct hr_pipe):
 *     request k runs, its callback writes its entry into the answer and
 *     starts request k + 1; only the requests that run SQL wait for a store.
 *   - A request that only reads (hrana.h's plan) goes to the database's
 *     read FIFO (server.h); if a reader finds a statement that writes
 *     after all (sqlite3_stmt_readonly), nothing ran that changed anything,
 *     and the same batch goes to the writer as one command. A batch with a
 *     BEGIN TRANSACTION READONLY step never becomes a command.
 *   - Streams live in a fixed table; a baton is "slot.generation.secret"
 *     in hex. A stream is busy while one of its pipelines runs: a second
 *     pipeline with the same baton is refused (the baton changes with
 *     every answer, so only a client racing itself can send one).
 *   - Refusals at the HTTP level (the gate, a bad body, a bad baton) are
 *     Hrana's {"message", "code"} with Content-Type application/json, which
 *     the client reads back as its error.
 */
#include "hrana_http.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "buf.h"
#include "hrana.h"
#include "hrana_int.h"
#include "log.h"
#include "pieces.h"
#include "sqljson_int.h"
#include "tx_life.h"

/* How often the FIFO of pipelines waiting for a reader looks for readers
 * that idle streams' ended transactions hold (reclaim_readers). */
#define WAIT_POLL_MS 10

/* What an open stream holds of the answer budget (its slot is in the
 * table; its stored SQL is charged as stored, its answers as built). */
#define STREAM_COST ((size_t)16 << 10)
/* What a transaction on a snapshot holds of it: its thread's stack as it
 * touches it, and what its reader reads into its cache. */
#define SNAPSHOT_COST ((size_t)1 << 20)

/* A stream's open transaction and whether it holds one of its database's
 * readers (lithd_read_slot_take: a transaction on a snapshot). */
typedef struct hr_tx {
  lithd_store_tx *h; /* NULL: autocommit */
  int slot;
  int charged; /* a snapshot's: SNAPSHOT_COST held of the answer budget */
} hr_tx;

typedef struct hr_pipe_ws hr_pipe_ws;
typedef struct hr_stream {
  int used;
  int busy;     /* a pipeline of it runs */
  uint32_t gen; /* changes with every answer */
  unsigned char secret[16];
  lithd_dbsrv *d; /* the database it belongs to */
  lithd_hrana_sqls *sqls;
  hr_tx tx;        /* its open transaction */
  int64_t last_ms; /* lith_clock_ms of its last answer */
  char peer[48];   /* the client's address, without its port: its share */
  hr_pipe_ws *ws;  /* a WebSocket connection's (hrana_int.h): no baton, no idle sweep */
} hr_stream;

typedef struct hr_pipe hr_pipe;
typedef struct lithd_hrana_srv lithd_hrana_srv;
struct lithd_hrana_srv {
  lithd_server *s;
  uv_timer_t sweep;
  int timer_open, stopping;
  int open; /* streams in use */
  /* Pipelines whose read or deferred transaction waits for a reader of its
   * database (first in, first out; every wait has the same bound, so the
   * head's deadline is the nearest) and the timer of that bound. */
  hr_pipe *wait_head, *wait_tail;
  uv_timer_t wait_timer;
  int wait_timer_open;
  int handing, hand_again; /* slot_give runs; a reader came back meanwhile */
  hr_stream streams[LITHD_HRANA_STREAMS];
};

/* ---- Refusals ---------------------------------------------------------------- */

static void respond_hrana_error(lith_http_req *req, int status, const char *code, const char *msg) {
  lithd_hrana_error e;
  e.code = code;
  snprintf(e.message, sizeof e.message, "%s", msg);
  char *json = lithd_hrana_error_json(&e);
  if (json == NULL) {
    lith_http_respond_error(req, 500, "out of memory");
    return;
  }
  lith_http_respond(req, status, "application/json", json, strlen(json));
  free(json);
}

static void refuse_hrana(lith_http_req *req, int status, const char *msg) {
  respond_hrana_error(req, status,
                      status == 401   ? "AUTH_FAILED"
                      : status == 403 ? "FORBIDDEN"
                      : status == 415 ? "HTTP_UNSUPPORTED_MEDIA_TYPE"
                                      : "HTTP_ERROR",
                      msg);
}

/* ---- Streams ------------------------------------------------------------------ */

static void slot_give(lithd_hrana_srv *h, lithd_dbsrv *d);

/* Let go of x (rolling back what is open) and of its reader. */
/* Give back x's reader and its share of the budget (the handle stays). */
static void tx_reader_back(lithd_hrana_srv *h, lithd_dbsrv *d, hr_tx *x) {
  if (x->charged) {
    x->charged = 0;
    lithd_answer_budget_release(SNAPSHOT_COST);
  }
  if (x->slot) {
    x->slot = 0;
    slot_give(h, d);
  }
}

static void tx_end(lithd_hrana_srv *h, lithd_dbsrv *d, hr_tx *x) {
  lithd_store_tx_close(x->h);
  x->h = NULL;
  tx_reader_back(h, d, x);
}

static void ws_stream_gone(hr_stream *st);

static void stream_release(lithd_hrana_srv *h, hr_stream *st) {
  ws_stream_gone(st);
  lithd_hrana_sqls_free(st->sqls);
  tx_end(h, st->d, &st->tx); /* rolls back what it left open */
  memset(st, 0, sizeof *st);
  h->open--;
  lithd_answer_budget_release(STREAM_COST);
}

/* Give back the readers of idle streams whose transaction ended by itself
 * (store.h: an idle one is rolled back while others wait for a reader; its
 * stream would learn it only at its next pipeline): to whoever waits. */
static void reclaim_readers(lithd_hrana_srv *h) {
  for (int i = 0; i < LITHD_HRANA_STREAMS; i++) {
    hr_stream *st = &h->streams[i];
    if (st->used && !st->busy && st->tx.slot && lithd_store_tx_ended(st->tx.h))
      tx_reader_back(h, st->d, &st->tx);
  }
}

static void sweep(uv_timer_t *t) {
  lithd_hrana_srv *h = t->data;
  reclaim_readers(h); /* (a query waiting in the read FIFO too) */
  int64_t now = lith_clock_ms();
  int64_t idle = h->s->stream_idle_ms > 0 ? h->s->stream_idle_ms : LITHD_HRANA_IDLE_MS;
  for (int i = 0; i < LITHD_HRANA_STREAMS; i++) {
    hr_stream *st = &h->streams[i];
    if (st->used && !st->busy && st->ws == NULL && now - st->last_ms > idle)
      stream_release(h, st);
  }
}

/* req's address without its port ("127.0.0.1", "[::1]", "unix"). */
static void peer_of(lith_http_req *req, char *out, size_t cap) {
  const char *p = lith_http_req_peer(req);
  const char *colon = p != NULL ? strrchr(p, ':') : NULL;
  size_t n = p == NULL ? 0 : colon != NULL && p[0] != 'u' ? (size_t)(colon - p) : strlen(p);
  if (n >= cap)
    n = cap - 1;
  memcpy(out, p != NULL ? p : "", n);
  out[n] = '\0';
}

/* A slot for a new stream of d from peer: NULL with *why when the table is
 * full of streams that are busy or hold a transaction, or when peer holds
 * its share (LITHD_HRANA_PEER_STREAMS) and each of them is busy or holds a
 * transaction, or the budget is full. An idle stream (not busy, no
 * transaction), a baton's or a WebSocket's alike, never keeps a newcomer
 * out: the one idle the longest is closed for it (its next request:
 * STREAM_EXPIRED), peer's own when peer holds its share (a client that
 * opens a stream per request and never closes one goes on, losing only
 * its oldest; never another address's: one address cannot close the
 * others' streams), any address's when the table is full. */
static hr_stream *stream_take(lithd_hrana_srv *h, lithd_dbsrv *d, const char *peer, const char **why) {
  int mine = 0;
  hr_stream *lru = NULL, *mine_lru = NULL, *free_st = NULL;
  if (h->open == LITHD_HRANA_STREAMS)
    sweep(&h->sweep);
  for (int i = 0; i < LITHD_HRANA_STREAMS; i++) {
    hr_stream *st = &h->streams[i];
    if (!st->used) {
      if (free_st == NULL)
        free_st = st;
      continue;
    }
    int idle = !st->busy && st->tx.h == NULL;
    if (strcmp(st->peer, peer) == 0) {
      mine++;
      if (idle && (mine_lru == NULL || st->last_ms < mine_lru->last_ms))
        mine_lru = st;
    }
    if (idle && (lru == NULL || st->last_ms < lru->last_ms))
      lru = st;
  }
  if (mine >= LITHD_HRANA_PEER_STREAMS) {
    if (mine_lru == NULL) {
      *why = "peer";
      return NULL;
    }
    free_st = NULL; /* at its share: its own stream's slot, not a free one */
    lru = mine_lru;
  }
  if (free_st == NULL && lru == NULL) {
    *why = "full";
    return NULL;
  }
  if (lithd_answer_budget_charge(STREAM_COST) != 0) { /* before closing anyone's stream for it */
    *why = "budget";
    return NULL;
  }
  if (free_st == NULL) {
    stream_release(h, lru);
    free_st = lru;
  }
  memset(free_st, 0, sizeof *free_st);
  free_st->used = 1;
  free_st->d = d;
  free_st->last_ms = lith_clock_ms();
  snprintf(free_st->peer, sizeof free_st->peer, "%s", peer);
  h->open++;
  return free_st;
}

/* The stream a baton names, or NULL with *code and msg saying why (d
 * NULL: of any database). */
static hr_stream *stream_find(lithd_hrana_srv *h, lithd_dbsrv *d, const char *baton, const char **code,
                              char *msg, size_t cap) {
  unsigned slot = 0, gen = 0;
  char hex[33];
  int used = 0;
  if (strlen(baton) != 4 + 1 + 8 + 1 + 32 ||
      sscanf(baton, "%4x.%8x.%32[0-9a-f]%n", &slot, &gen, hex, &used) != 3 || used != (int)strlen(baton) ||
      slot >= LITHD_HRANA_STREAMS) {
    *code = "STREAM_INVALID";
    snprintf(msg, cap, "the baton is not one this lithd gave out");
    return NULL;
  }
  hr_stream *st = &h->streams[slot];
  unsigned char secret[16];
  for (int i = 0; i < 16; i++) {
    unsigned v;
    sscanf(hex + 2 * i, "%2x", &v);
    secret[i] = (unsigned char)v;
  }
  /* constant time in the secret; an unused slot compares against zeros */
  int same = lith_http_equal_ct(secret, sizeof secret, st->secret, sizeof st->secret);
  if (!st->used || st->gen != gen || !same || st->ws != NULL) {
    *code = "STREAM_EXPIRED";
    snprintf(msg, cap,
             "the stream is closed or expired (a stream idle for %" PRId64 " ms is closed), or the baton "
             "was already answered",
             h->s->stream_idle_ms > 0 ? h->s->stream_idle_ms : LITHD_HRANA_IDLE_MS);
    return NULL;
  }
  if (d != NULL && st->d != d) {
    *code = "STREAM_INVALID";
    snprintf(msg, cap, "the baton belongs to the database \"%s\", not \"%s\"", st->d->name, d->name);
    return NULL;
  }
  if (st->busy) {
    *code = "STREAM_BUSY";
    snprintf(msg, cap, "a pipeline of this stream is still running: send the next one after its answer");
    return NULL;
  }
  return st;
}

/* ---- A pipeline ------------------------------------------------------------------ */

struct hr_pipe {
  lithd_read rd; /* rd.sr: the running request's batch and result (read or write) */
  lith_http_req *req;
  lithd_dbsrv *d;
  lithd_hrana_srv *h;
  lithd_hrana_pipeline *p;
  hr_stream *st;          /* NULL: a stream that ends in this pipeline, never in the table */
  lithd_hrana_sqls *sqls; /* the stream's stored SQL */
  hr_tx tx;               /* the stream's open transaction */
  int closed;             /* a close request ran */
  int k, kind, version;
  lithd_hrana_plan plan;
  lithd_buf out;
  int in_handler; /* its handler is still on the stack: it frees pp */
  int answered;   /* finish() ran */
  /* Waiting for a reader (open_tx): the next in the FIFO, and until when. */
  hr_pipe *wait_next;
  int64_t wait_until, wait_start;
  size_t charged;    /* what out holds of the answer budget: its results' shares */
  size_t held;       /* what its body and parsed requests hold of it (PIPE_COST) */
  int64_t wait_left; /* ms it may still wait for readers, all its BEGINs together */
  int access;        /* what its credentials grant (server.h, lithd_access): only
                        LITHD_ACCESS_FULL writes; 0 (calloc's) writes nothing */
  hr_pipe_ws *ws;    /* a WebSocket request's (hrana_int.h): answered through it, req NULL */
  size_t ws_len;     /* ... and its message's length */
};

/* What a pipeline's body holds while it runs: the HTTP layer's copy and
 * the parsed requests. */
#define PIPE_COST(len) (2 * (len) + sizeof(hr_pipe) + 4096)

/* The answer's head, {"baton":...,"results":[, is written last, into room
 * kept at the front of out: at most this long (a baton is 46 characters). */
#define HEAD_MAX 96

static void pipe_free(hr_pipe *pp) {
  lithd_answer_budget_release(pp->charged);
  lithd_answer_budget_release(pp->held);
  tx_end(pp->h, pp->d, &pp->tx);
  lithd_result_free(pp->rd.sr.result);
  lithd_batch_free(pp->rd.sr.batch);
  lithd_hrana_pipeline_free(pp->p);
  free(pp->out.p);
  free(pp);
}

static void run_next(hr_pipe *pp);

/* The request's entry, after its run; then the next request. */
static void request_done(hr_pipe *pp) {
  lithd_store_req *sr = &pp->rd.sr;
  if (pp->p->cursor)
    lithd_hrana_put_cursor(&pp->out, sr->rc, sr->result, sr->errmsg);
  else
    lithd_hrana_put_outcome(&pp->out, pp->kind, pp->version, sr->rc, sr->result, sr->errmsg);
  /* its JSON stays in the answer until sent: so does its share of the budget */
  pp->charged += lithd_result_take_budget(sr->result);
  lithd_result_free(sr->result);
  lithd_batch_free(sr->batch);
  memset(sr, 0, sizeof *sr);
  pp->k++;
  run_next(pp);
}

static void write_done(lithd_store_req *sr) { request_done(sr->data); }

/* Send the request's batch to the writer as one command. */
static void submit_write(hr_pipe *pp) {
  lithd_store_req *sr = &pp->rd.sr;
  size_t len = 0;
  int rc;
  if (pp->d->srv->only_named) {
    sr->rc = LITHD_FORBIDDEN;
    snprintf(sr->errmsg, sizeof sr->errmsg,
             "this lithd runs only named commands (--only-named): Hrana runs SQL text, so it may only read");
    request_done(pp);
    return;
  }
  if (pp->req != NULL)
    lith_http_req_body(pp->req, &len);
  else
    len = pp->ws_len;
  sr->cb = write_done;
  sr->data = pp;
  sr->http = pp->req;
  sr->bytes = len + sizeof *pp;
  sr->may_write = pp->access == LITHD_ACCESS_FULL;
  if ((rc = lithd_store_write(pp->d->store, sr)) == LITH_OK)
    return;
  sr->rc = rc;
  snprintf(sr->errmsg, sizeof sr->errmsg, "%s",
           rc == LITH_QUEUE_FULL ? "the write queue is full; retry later"
           : rc == LITH_CLOSED   ? "lithd is shutting down"
                                 : lith_errstr(rc));
  request_done(pp);
}

static void tx_done(lithd_store_req *sr) {
  hr_pipe *pp = sr->data;
  if (!sr->tx_open) /* committed, rolled back, failed or timed out */
    tx_end(pp->h, pp->d, &pp->tx);
  request_done(pp);
}

/* Run the request's batch inside the stream's transaction. */
static void submit_tx(hr_pipe *pp) {
  lithd_store_req *sr = &pp->rd.sr;
  sr->batch->steps = 1; /* a failing statement is undone alone: the transaction goes on */
  sr->batch->held = 1;
  sr->may_write = pp->access == LITHD_ACCESS_FULL;
  sr->cb = tx_done;
  sr->data = pp;
  sr->http = pp->req;
  int rc = lithd_store_tx_run(pp->tx.h, sr);
  if (rc == LITH_OK)
    return;
  sr->rc = rc;
  sr->tx_open = 0;
  tx_done(sr);
}

static void read_done(lithd_read *rd) {
  hr_pipe *pp = (hr_pipe *)rd;
  lithd_store_req *sr = &rd->sr;
  lithd_error e;
  int wrote = 0;
  /* A statement that writes after all: nothing of the read changed
   * anything, so the same batch runs as a command. */
  if (!pp->plan.readonly && pp->kind != LITHD_HR_DESCRIBE && sr->result != NULL) {
    if (lithd_result_error(sr->result, &e) == LITHD_NOT_A_QUERY)
      wrote = 1;
    for (int i = 0; !wrote && i < sr->result->nouts; i++)
      if (sr->result->outs[i].state == STEP_FAILED && sr->result->outs[i].error->code == LITHD_NOT_A_QUERY)
        wrote = 1;
  }
  if (wrote) {
    lithd_result_free(sr->result);
    sr->result = NULL;
    sr->rc = LITH_OK;
    sr->errmsg[0] = '\0';
    submit_write(pp);
    return;
  }
  request_done(pp);
}

static void submit_read(hr_pipe *pp) {
  int rc;
  pp->rd.sr.http = pp->req;
  pp->rd.done = read_done;
  if ((rc = lithd_read_submit(pp->d, &pp->rd)) == 0)
    return;
  pp->rd.sr.rc = rc;
  snprintf(pp->rd.sr.errmsg, sizeof pp->rd.sr.errmsg, "%s",
           rc == LITH_CLOSED ? "lithd is shutting down" : "cannot queue the read");
  request_done(pp);
}

/* The answer, the stream kept or let go. */
static void tx_let_go_of_reader(hr_pipe *pp);

/* An answer sent in pieces was cut short (the client left): its baton,
 * in the part sent or not, is no one's now (as finish's gone). Unless the
 * stream ran a pipeline since, which only the baton's holder can send. */
static void answer_cut(void *arg, const char *baton) {
  lithd_hrana_srv *h = arg;
  const char *code;
  char msg[256];
  hr_stream *st = stream_find(h, NULL, baton, &code, msg, sizeof msg);
  if (st != NULL)
    stream_release(h, st);
}

static void ws_finish(hr_pipe *pp);

static void finish(hr_pipe *pp) {
  lithd_hrana_srv *h = pp->h;
  if (pp->ws != NULL) {
    ws_finish(pp);
    return;
  }
  hr_stream *st = pp->st;
  char baton[64] = "";

  tx_let_go_of_reader(pp); /* an idle stream holds no reader for an ended transaction */
  /* The client left before its answer (a timeout, a closed connection):
   * the new baton would be in an answer nobody reads, and the old one is
   * spent, so nobody can reach the stream again, yet its transaction
   * would hold the writer or a reader until a bound ended it. It ends
   * here, after the pipeline's last request: nothing runs on it now. */
  int gone = lith_http_is_gone(pp->req);
  if (pp->closed || h->stopping || gone) {
    if (st != NULL) {
      st->sqls = pp->sqls;
      st->tx = pp->tx; /* rolled back now (stream_release), not after the answer */
      pp->tx = (hr_tx){0};
      stream_release(h, st);
    } else {
      lithd_hrana_sqls_free(pp->sqls);
    }
    pp->sqls = NULL;
  } else {
    st->sqls = pp->sqls;
    pp->sqls = NULL;
    st->tx = pp->tx;
    pp->tx = (hr_tx){0};
    st->gen++;
    if (getrandom(st->secret, sizeof st->secret, 0) != (ssize_t)sizeof st->secret) {
      /* no randomness: the stream cannot be named safely, so it ends */
      stream_release(h, st);
      st = NULL;
    } else {
      int n = snprintf(baton, sizeof baton, "%04x.%08" PRIx32 ".", (unsigned)(st - h->streams), st->gen);
      for (int i = 0; i < 16; i++)
        n += snprintf(baton + n, sizeof baton - (size_t)n, "%02x", st->secret[i]);
      st->busy = 0;
      st->last_ms = lith_clock_ms();
    }
  }
  /* the head into the room kept for it, right before the results, so the
   * results are never copied (what is before it is never sent) */
  char head[HEAD_MAX + 1];
  int hl =
      snprintf(head, sizeof head, "{\"baton\":%s%s%s,\"base_url\":null%s", baton[0] ? "\"" : "",
               baton[0] ? baton : "null", baton[0] ? "\"" : "", pp->p->cursor ? "}\n" : ",\"results\":[");
  if (!pp->p->cursor)
    lithd_buf_puts(&pp->out, "]}");
  else if (pp->out.len > HEAD_MAX && pp->out.p[pp->out.len - 1] != '\n')
    lithd_buf_puts(&pp->out, "\n"); /* a cursor's error entry: a line too */
  if (gone) {
    lith_http_respond(pp->req, 200, "application/json", "", 0); /* LITH_HTTP_GONE: only completes req */
  } else if (pp->out.failed || pp->out.len < HEAD_MAX || hl <= 0 || hl > HEAD_MAX) {
    lith_http_respond_error(pp->req, 500, "out of memory");
  } else {
    size_t off = HEAD_MAX - (size_t)hl, len = pp->out.len;
    memcpy(pp->out.p + off, head, (size_t)hl);
    if (len - off < LITHD_PIECES_MIN) {
      lith_http_respond(pp->req, 200, "application/json", pp->out.p + off, len - off);
    } else { /* sent a piece at a time; the budget is given back once it is */
      lithd_send_pieces_cut(h->s->loop, pp->req, 200, lithd_buf_finish(&pp->out), off, len, pp->charged,
                            baton[0] ? answer_cut : NULL, h, baton);
      pp->charged = 0;
    }
  }
  pp->answered = 1;
  if (!pp->in_handler)
    pipe_free(pp);
}

/* Open the stream's transaction with flags: 1, or 0 with *e. */
static int tx_open_with(hr_pipe *pp, unsigned flags, lithd_hrana_error *e) {
  char msg[LITH_ERRMSG_MAX];
  if (flags & LITHD_TX_SNAPSHOT) {
    if (lithd_answer_budget_charge(SNAPSHOT_COST) != 0) {
      tx_end(pp->h, pp->d, &pp->tx);
      lithd_hrana_fail(e, "SQLITE_BUSY",
                       "lithd holds %zu MiB of answers, stored SQL, streams and transactions at most "
                       "(--max-answer-mib) and has no room for a read transaction now: retry later",
                       lithd_answer_budget_cap() >> 20);
      return 0;
    }
    pp->tx.charged = 1;
  }
  int rc = lithd_store_tx_open(pp->d->store, flags, pp->d->srv->tx_idle_ms, pp->d->srv->tx_max_ms, pp->req,
                               &pp->tx.h, msg, sizeof msg);
  if (rc == LITH_OK)
    return 1;
  tx_end(pp->h, pp->d, &pp->tx);
  if (pp->plan.fk && rc == LITHD_FORBIDDEN) /* what the client sent was no transaction */
    lithd_hrana_fail(e, lithd_hrana_code(rc, msg),
                     "PRAGMA foreign_keys in a request (migrate()) runs the request alone on the writer, "
                     "as on the client's own connection: %s",
                     msg);
  else
    lithd_hrana_fail(e, lithd_hrana_code(rc, msg), "%s", msg);
  return 0;
}

/* The flags of a snapshot's transaction (the plan's). */
static unsigned snapshot_flags(const hr_pipe *pp) {
  int ro =
      pp->plan.readonly || pp->access != LITHD_ACCESS_FULL; /* a read-only client's: never the writer's */
  return LITHD_TX_SNAPSHOT | (ro ? LITHD_TX_READONLY : 0);
}

/* The request that waited ends with e; the pipeline goes on. */
static void request_failed(hr_pipe *pp, lithd_hrana_error *e) {
  lithd_hrana_put_error(&pp->out, e);
  lithd_batch_free(pp->rd.sr.batch);
  pp->rd.sr.batch = NULL;
  pp->k++;
  run_next(pp);
}

/* The wait's bound: the transactions' idle bound (a reader comes back when
 * one of them ends, at the latest by then). */
static int64_t slot_wait_ms(const lithd_server *s) {
  return s->tx_idle_ms > 0 ? s->tx_idle_ms : LITHD_TX_IDLE_MS;
}

static void wait_expired(uv_timer_t *t);

/* The timer at the head's deadline (stopped with no one waiting). */
static void wait_timer_arm(lithd_hrana_srv *h) {
  if (!h->wait_timer_open)
    return;
  if (h->wait_head == NULL) {
    uv_timer_stop(&h->wait_timer);
    return;
  }
  int64_t left = h->wait_head->wait_until - lith_clock_ms();
  if (left > WAIT_POLL_MS) /* meanwhile an idle holder may be ended for them: reclaim_readers */
    left = WAIT_POLL_MS;
  uv_timer_start(&h->wait_timer, wait_expired, left > 0 ? (uint64_t)left : 0, 0);
}

/* Whether a pipeline waits for a reader of d (a newcomer goes behind it). */
static int waiting_for(const lithd_hrana_srv *h, const lithd_dbsrv *d) {
  for (const hr_pipe *pp = h->wait_head; pp != NULL; pp = pp->wait_next)
    if (pp->d == d)
      return 1;
  return 0;
}

/* Unlink pp from the FIFO (it is in it). */
static void wait_unlink(lithd_hrana_srv *h, hr_pipe *pp) {
  hr_pipe **at = &h->wait_head, *prev = NULL;
  while (*at != pp) {
    prev = *at;
    at = &(*at)->wait_next;
  }
  *at = pp->wait_next;
  if (h->wait_tail == pp)
    h->wait_tail = prev;
  pp->wait_next = NULL;
  lithd_store_readers_wanted(pp->d->store, -1);
}

/* The head waited its bound (or lithd stops): its request fails, nothing
 * begun; the pipeline goes on. */
static void wait_fail(lithd_hrana_srv *h, hr_pipe *pp) {
  lithd_hrana_error e;
  wait_unlink(h, pp);
  pp->wait_left = 0;
  if (h->stopping)
    lithd_hrana_fail(&e, "SERVER_SHUTTING_DOWN", "lithd is shutting down");
  else
    lithd_hrana_fail(&e, "SQLITE_BUSY",
                     "no reader of this database is free for a read transaction (--readers %d: every one "
                     "lithd can spare holds an open BEGIN / BEGIN TRANSACTION READONLY) after %" PRId64
                     " ms; retry, and keep read transactions short",
                     pp->d->metrics.readers, slot_wait_ms(pp->d->srv));
  request_failed(pp, &e);
}

static void wait_expired(uv_timer_t *t) {
  lithd_hrana_srv *h = t->data;
  reclaim_readers(h); /* may hand readers to the waiters */
  int64_t now = lith_clock_ms();
  while (h->wait_head != NULL && h->wait_head->wait_until <= now)
    wait_fail(h, h->wait_head);
  wait_timer_arm(h);
}

/* A reader of d came back: the first pipeline waiting for one of d's takes
 * it and opens its transaction; else d's reads get it. */
static void slot_give(lithd_hrana_srv *h, lithd_dbsrv *d) {
  lithd_read_slot_give(d);
  /* Opening a waiter's transaction can end its pipeline, which can give a
   * reader back again: that turn goes to the loop below, not a nested call
   * (thousands of waiters would each add a frame). */
  if (h->handing) {
    h->hand_again = 1;
    return;
  }
  h->handing = 1;
  do {
    h->hand_again = 0;
    for (hr_pipe *pp = h->wait_head; pp != NULL; pp = pp->wait_next) {
      /* first come first served: the first waiter of a database tries first */
      if (!lithd_read_slot_take(pp->d))
        continue;
      wait_unlink(h, pp);
      pp->wait_left -= lith_clock_ms() - pp->wait_start;
      lithd_hrana_error e;
      pp->tx.slot = 1;
      if (tx_open_with(pp, snapshot_flags(pp), &e))
        submit_tx(pp);
      else
        request_failed(pp, &e);
      h->hand_again = 1; /* the FIFO may have changed under it: from its head again */
      break;
    }
  } while (h->hand_again);
  h->handing = 0;
  wait_timer_arm(h);
}

/* Begin the stream's transaction (a batch that leaves its BEGIN open): 1
 * (run it), 0 with *e, or 2: it waits for a reader (slot_give or the
 * wait's bound goes on with the pipeline). */
static int open_tx(hr_pipe *pp, lithd_hrana_error *e) {
  lithd_hrana_srv *h = pp->h;
  if (pp->d->srv->only_named) {
    lithd_hrana_fail(e, "SQLITE_AUTH",
                     "this lithd runs only named commands (--only-named): a transaction runs SQL text");
    return 0;
  }
  /* IMMEDIATE (and a request with PRAGMA foreign_keys: migrate()) holds
   * the writer. DEFERRED and READONLY begin on a snapshot: they hold one
   * of the database's readers, never the writer (a deferred one takes it
   * at its first write, by store.h's rule); with none to spare they wait
   * for one, first come first served, for a bounded time. */
  if (pp->access != LITHD_ACCESS_FULL && pp->plan.fk) {
    lithd_hrana_fail(
        e, "SQLITE_AUTH",
        "Authorization forbidden: the token grants read-only access, and PRAGMA foreign_keys in a "
        "request runs it alone on the writer (a migration)");
    return 0;
  }
  /* A read-only client's BEGIN, IMMEDIATE too, begins on a snapshot whose
   * writes are refused: it never holds the writer it may not use. */
  if (!(pp->plan.readonly || pp->plan.deferred || pp->access != LITHD_ACCESS_FULL) || pp->plan.fk)
    return tx_open_with(pp, 0, e);
  if (!waiting_for(h, pp->d) && lithd_read_slot_take(pp->d)) {
    pp->tx.slot = 1;
    return tx_open_with(pp, snapshot_flags(pp), e);
  }
  /* every BEGIN of the pipeline waits from one allowance: its requests
   * cannot add up to hours of a stream held busy */
  if (pp->wait_left <= 0) {
    lithd_hrana_fail(e, "SQLITE_BUSY",
                     "no reader of this database is free for a read transaction (--readers %d), and this "
                     "pipeline waited %" PRId64 " ms for readers already: retry",
                     pp->d->metrics.readers, slot_wait_ms(pp->d->srv));
    return 0;
  }
  pp->wait_start = lith_clock_ms();
  pp->wait_until = pp->wait_start + pp->wait_left;
  pp->wait_next = NULL;
  if (h->wait_tail != NULL)
    h->wait_tail->wait_next = pp;
  else
    h->wait_head = pp;
  h->wait_tail = pp;
  lithd_store_readers_wanted(pp->d->store, 1); /* an idle read transaction gives its reader up now */
  wait_timer_arm(h);
  return 2;
}

/* A transaction a bound or its end ended keeps its handle (its next run is
 * refused with the reason) but needs its reader no more: give it back now,
 * or a describe of the same pipeline would wait for it behind itself. */
static void tx_let_go_of_reader(hr_pipe *pp) {
  if (pp->tx.slot && lithd_store_tx_ended(pp->tx.h))
    tx_reader_back(pp->h, pp->d, &pp->tx);
}

/* Whether every request after the running one is a close. */
static int only_close_after(const hr_pipe *pp) {
  if (pp->k + 1 >= pp->p->n)
    return 0; /* none: the stream goes on */
  for (int j = pp->k + 1; j < pp->p->n; j++)
    if (lithd_hrana_kind(pp->p->requests[j]) != LITHD_HR_CLOSE)
      return 0;
  return 1;
}

/* The limits of the next request: max_result_bytes bounds the pipeline's
 * whole answer (what the requests before it wrote counts), as sqld bounds
 * a response. 0, or -1 with *e (RESPONSE_TOO_LARGE) when none is left. */
static int answer_room(const hr_pipe *pp, lithd_limits *lim, lithd_hrana_error *e) {
  lithd_limits dflt;
  *lim = pp->d->srv->limits;
  lithd_limits_default(&dflt);
  size_t max = lim->max_result_bytes > 0 ? lim->max_result_bytes : dflt.max_result_bytes;
  size_t used = pp->out.len > HEAD_MAX ? pp->out.len - HEAD_MAX : 0;
  if (used >= max) {
    lithd_hrana_fail(
        e, "RESPONSE_TOO_LARGE",
        "the pipeline's answer holds %zu bytes already, the most one answer may (--max-result-mib): "
        "send the rest in another pipeline",
        used);
    return -1;
  }
  lim->max_result_bytes = max - used;
  return 0;
}

static void run_next(hr_pipe *pp) {
  lithd_hrana_error e;
  lithd_limits lim;
  while (pp->k < pp->p->n) {
    const lj_value *rq = pp->p->requests[pp->k];
    pp->kind = lithd_hrana_kind(rq);
    if (pp->k > 0)
      lithd_buf_puts(&pp->out, ",");
    e.code = NULL;
    tx_let_go_of_reader(pp);
    if (pp->closed) {
      lithd_hrana_fail(&e, "STREAM_CLOSED", "the stream was closed by an earlier request of this pipeline");
    } else if (pp->h->stopping && pp->kind != LITHD_HR_CLOSE) {
      /* the stop waits for running pipelines: their other requests go at once */
      lithd_hrana_fail(&e, "SERVER_SHUTTING_DOWN", "lithd is shutting down");
    } else {
      switch (pp->kind) {
      case LITHD_HR_UNKNOWN: lithd_hrana_fail(&e, "PROTO_ERROR", "unknown request type"); break;
      case LITHD_HR_CLOSE:
        pp->closed = 1;
        tx_end(pp->h, pp->d, &pp->tx); /* rolls back what is open */
        break;
      case LITHD_HR_STORE_SQL: lithd_hrana_sqls_store(&pp->sqls, rq, &pp->d->srv->limits, &e); break;
      case LITHD_HR_CLOSE_SQL: lithd_hrana_sqls_close(pp->sqls, rq, &e); break;
      case LITHD_HR_GET_AUTOCOMMIT: break;
      default: /* runs SQL */
        if (answer_room(pp, &lim, &e) != 0 ||
            lithd_hrana_batch(rq, pp->kind, pp->sqls, &lim, &pp->rd.sr.batch, &pp->plan, &e) != 0)
          break;
        if (pp->plan.opens && !pp->plan.fk && pp->tx.h == NULL && only_close_after(pp)) {
          /* the stream ends right after it (executeMultiple's pipeline):
           * what it leaves open is rolled back, so it is one batch, and
           * no transaction holds the writer across requests */
          pp->plan.opens = 0;
          pp->rd.sr.batch->closing = 1;
        }
        if (pp->tx.h != NULL && (pp->kind != LITHD_HR_DESCRIBE || !lithd_store_tx_ended(pp->tx.h))) {
          /* a describe too, while the transaction is open: on its own
           * connection (a reader it holds may be the database's last) */
          pp->rd.sr.batch->start_in_tx = 1;
          submit_tx(pp);
        } else if (pp->plan.opens && pp->kind != LITHD_HR_DESCRIBE) {
          int opened = open_tx(pp, &e);
          if (opened == 0)
            break;
          if (opened == 1)
            submit_tx(pp);
          /* else it waits for a reader: slot_give or wait_expired goes on */
        } else if (pp->plan.reads || pp->plan.readonly) {
          pp->rd.sr.batch->readonly_tx = pp->plan.readonly; /* its writes: SQLITE_READONLY, as SQLite's */
          submit_read(pp);
        } else {
          submit_write(pp);
        }
        return; /* request_done goes on */
      }
    }
    if (e.code != NULL)
      lithd_hrana_put_error(&pp->out, &e);
    else
      lithd_hrana_put_ok(&pp->out, pp->kind,
                         lithd_store_tx_ended(pp->tx.h)); /* a bound ended it: autocommit */
    lithd_batch_free(pp->rd.sr.batch);                    /* one built, then not run */
    pp->rd.sr.batch = NULL;
    pp->k++;
  }
  finish(pp);
}

/* ---- The routes ------------------------------------------------------------------ */

int lithd_hrana_get(lith_http_req *req, void *arg) {
  lithd_dbsrv *d = arg;
  if (!lithd_admit_as(d->srv, d, req, refuse_hrana))
    return LITH_HTTP_DONE;
  lith_http_respond(req, 200, "text/plain", "", 0);
  return LITH_HTTP_DONE;
}

/* Whether the pipeline's last request is a close: its stream needs no slot. */
static int ends_closed(const lithd_hrana_pipeline *p) {
  return p->n > 0 && lithd_hrana_kind(p->requests[p->n - 1]) == LITHD_HR_CLOSE;
}

int lithd_hrana_post(lith_http_req *req, void *arg) {
  lithd_dbsrv *d = arg;
  lithd_server *s = d->srv;
  lithd_hrana_srv *h = s->hrana;
  lithd_hrana_error e;
  size_t len = 0;
  const char *body;
  hr_pipe *pp;
  int access = lithd_admit_by_content(s, d, req, refuse_hrana);

  if (!access)
    return LITH_HTTP_DONE;
  if (h == NULL || h->stopping) {
    respond_hrana_error(req, 503, "SERVER_SHUTTING_DOWN", "lithd is shutting down");
    return LITH_HTTP_DONE;
  }
  body = lith_http_req_body(req, &len);
  if (len > s->limits.max_body_bytes && s->limits.max_body_bytes > 0) {
    char msg[128];
    snprintf(msg, sizeof msg, "the body is %zu bytes, over the limit of %zu", len, s->limits.max_body_bytes);
    respond_hrana_error(req, 413, "REQUEST_TOO_LARGE", msg);
    return LITH_HTTP_DONE;
  }
  if ((pp = calloc(1, sizeof *pp)) == NULL) {
    respond_hrana_error(req, 500, "SQLITE_NOMEM", "out of memory");
    return LITH_HTTP_DONE;
  }
  pp->req = req;
  pp->d = d;
  pp->h = h;
  pp->access = access;
  pp->wait_left = slot_wait_ms(s);
  if (lithd_answer_budget_charge(PIPE_COST(len)) != 0) {
    char msg[256];
    snprintf(
        msg, sizeof msg,
        "lithd holds %zu MiB of requests and answers at most (--max-answer-mib) and has no room for this "
        "pipeline's %zu bytes now: retry later",
        lithd_answer_budget_cap() >> 20, len);
    lith_http_add_header(req, "retry-after", "1");
    respond_hrana_error(req, 503, "SQLITE_BUSY", msg);
    pipe_free(pp);
    return LITH_HTTP_DONE;
  }
  pp->held = PIPE_COST(len);
  {
    char blanks[HEAD_MAX];
    memset(blanks, ' ', sizeof blanks);
    lithd_buf_put(&pp->out, blanks, sizeof blanks); /* the head's room (finish) */
  }
  /* the route's last path segments: v2/pipeline, v3/pipeline or v3/cursor
   * (a cursor is a pipeline of one batch request, its outcome written as
   * the cursor's entries) */
  const char *path = lith_http_req_path(req);
  size_t pn = strlen(path);
  int cursor = pn >= strlen("v3/cursor") && strcmp(path + pn - strlen("v3/cursor"), "v3/cursor") == 0;
  pp->version =
      cursor || (pn >= strlen("v3/pipeline") && strcmp(path + pn - strlen("v3/pipeline"), "v3/pipeline") == 0)
          ? 3
          : 2;
  int max = s->limits.max_statements > 0 ? s->limits.max_statements : 1000;
  if ((cursor ? lithd_hrana_cursor_parse(body, len, &pp->p, &e)
              : lithd_hrana_pipeline_parse(body, len, max, &pp->p, &e)) != 0) {
    respond_hrana_error(req, 400, e.code, e.message);
    pipe_free(pp);
    return LITH_HTTP_DONE;
  }
  if (pp->p->baton != NULL) {
    const char *code = NULL;
    char msg[256];
    if ((pp->st = stream_find(h, d, pp->p->baton, &code, msg, sizeof msg)) == NULL) {
      respond_hrana_error(req, 400, code, msg);
      pipe_free(pp);
      return LITH_HTTP_DONE;
    }
  } else if (!ends_closed(pp->p)) {
    char peer[48], msg[320];
    const char *why = "";
    peer_of(req, peer, sizeof peer);
    if ((pp->st = stream_take(h, d, peer, &why)) != NULL)
      goto taken;
    if (strcmp(why, "peer") == 0)
      snprintf(
          msg, sizeof msg,
          "this client (%s) holds %d streams, each running or in a transaction, the most one address may of "
          "the %d this lithd keeps: close streams when done (client.close()), idle ones close after %" PRId64
          " ms",
          peer, LITHD_HRANA_PEER_STREAMS, LITHD_HRANA_STREAMS,
          s->stream_idle_ms > 0 ? s->stream_idle_ms : LITHD_HRANA_IDLE_MS);
    else if (strcmp(why, "budget") == 0)
      snprintf(msg, sizeof msg,
               "lithd holds %zu MiB of answers, stored SQL and streams at most (--max-answer-mib) and has no "
               "room for another stream now: retry later",
               lithd_answer_budget_cap() >> 20);
    else
      snprintf(msg, sizeof msg,
               "%d streams are open, each running or in a transaction, the most this lithd keeps: close "
               "streams when done (client.close()), idle ones close after %" PRId64 " ms",
               LITHD_HRANA_STREAMS, s->stream_idle_ms > 0 ? s->stream_idle_ms : LITHD_HRANA_IDLE_MS);
    lith_http_add_header(req, "retry-after", "1");
    respond_hrana_error(req, 503, "STREAMS_EXHAUSTED", msg);
    pipe_free(pp);
    return LITH_HTTP_DONE;
  }
taken:
  if (pp->st != NULL) {
    pp->st->busy = 1;
    pp->sqls = pp->st->sqls; /* the pipeline's until it answers */
    pp->st->sqls = NULL;
    pp->tx = pp->st->tx;
    pp->st->tx = (hr_tx){0};
  }
  pp->in_handler = 1;
  run_next(pp); /* answers at once when no request waits for a store */
  pp->in_handler = 0;
  if (pp->answered) {
    pipe_free(pp);
    return LITH_HTTP_DONE;
  }
  return LITH_HTTP_PENDING;
}

int lithd_hrana_start(lithd_server *s) {
  lithd_hrana_srv *h = calloc(1, sizeof *h);
  if (h == NULL)
    return LITH_HTTP_NOMEM;
  h->s = s;
  if (uv_timer_init(s->loop, &h->sweep) != 0) {
    free(h);
    return LITH_HTTP_NOMEM;
  }
  h->sweep.data = h;
  h->timer_open = 1;
  if (uv_timer_init(s->loop, &h->wait_timer) == 0) {
    h->wait_timer.data = h;
    h->wait_timer_open = 1;
    uv_unref((uv_handle_t *)&h->wait_timer);
  }
  /* a tenth of the idle bound (at most a second): a stream outlives it by
   * that much at most */
  uint64_t every =
      s->stream_idle_ms > 0 && s->stream_idle_ms < 10000 ? (uint64_t)s->stream_idle_ms / 10 + 1 : 1000;
  uv_timer_start(&h->sweep, sweep, every, every);
  uv_unref((uv_handle_t *)&h->sweep);
  s->hrana = h;
  return LITH_HTTP_OK;
}

void lithd_hrana_stop(lithd_server *s) {
  lithd_hrana_srv *h = s->hrana;
  if (h == NULL || h->stopping)
    return;
  h->stopping = 1;
  /* What waits for a reader is refused; open transactions hold the
   * writer: let them go now (rolled back). */
  while (h->wait_head != NULL)
    wait_fail(h, h->wait_head);
  if (h->wait_timer_open) {
    uv_close((uv_handle_t *)&h->wait_timer, NULL);
    h->wait_timer_open = 0;
  }
  for (int i = 0; i < LITHD_HRANA_STREAMS; i++)
    if (h->streams[i].used && !h->streams[i].busy)
      stream_release(h, &h->streams[i]);
  if (h->timer_open) {
    uv_close((uv_handle_t *)&h->sweep, NULL);
    h->timer_open = 0;
  }
}

void lithd_hrana_free(lithd_server *s) {
  lithd_hrana_srv *h = s->hrana;
  if (h == NULL)
    return;
  for (int i = 0; i < LITHD_HRANA_STREAMS; i++)
    if (h->streams[i].used)
      lithd_hrana_sqls_free(h->streams[i].sqls);
  free(h);
  s->hrana = NULL;
}

/* ---- Streams of WebSocket connections (hrana_int.h) ----------------------------- */

struct hr_pipe_ws {
  lithd_hrana_srv *h;
  hr_stream *st;    /* NULL once the stop released it */
  hr_pipe *running; /* its request that runs, or NULL */
  lithd_hrana_ws_done cb;
  void *arg;
  int closing; /* lithd_hrana_ws_close came while a request ran */
};

/* st is released (by its connection, the stop, a failed answer): w forgets it. */
static void ws_stream_gone(hr_stream *st) {
  if (st->ws != NULL)
    st->ws->st = NULL;
  st->ws = NULL;
}

int lithd_hrana_ws_open(lithd_server *s, lithd_dbsrv *d, const char *peer, lithd_hrana_wsstream **out,
                        lithd_hrana_error *e) {
  lithd_hrana_srv *h = s->hrana;
  const char *why = "";
  *out = NULL;
  if (h == NULL || h->stopping)
    return lithd_hrana_fail(e, "SERVER_SHUTTING_DOWN", "lithd is shutting down");
  lithd_hrana_wsstream *w = calloc(1, sizeof *w);
  if (w == NULL)
    return lithd_hrana_fail(e, "SQLITE_NOMEM", "out of memory");
  hr_stream *st = stream_take(h, d, peer, &why);
  if (st == NULL) {
    free(w);
    if (strcmp(why, "peer") == 0)
      return lithd_hrana_fail(e, "STREAMS_EXHAUSTED",
                              "this client (%s) holds %d streams, each running or in a transaction, the most "
                              "one address may of the %d this lithd keeps: close streams when done",
                              peer, LITHD_HRANA_PEER_STREAMS, LITHD_HRANA_STREAMS);
    if (strcmp(why, "budget") == 0)
      return lithd_hrana_fail(e, "STREAMS_EXHAUSTED",
                              "lithd holds %zu MiB of answers, stored SQL and streams at most "
                              "(--max-answer-mib) and has no room for another stream now: retry later",
                              lithd_answer_budget_cap() >> 20);
    return lithd_hrana_fail(
        e, "STREAMS_EXHAUSTED",
        "%d streams are open, each running or in a transaction, the most this lithd keeps",
        LITHD_HRANA_STREAMS);
  }
  w->h = h;
  w->st = st;
  st->ws = w;
  *out = w;
  return 0;
}

int lithd_hrana_ws_busy(const lithd_hrana_wsstream *w) { return w->running != NULL; }

/* A WebSocket request's end (finish's): the stream keeps its transaction,
 * the connection its stored SQL, and the entry goes to the callback. */
static void ws_finish(hr_pipe *pp) {
  lithd_hrana_wsstream *w = pp->ws;
  hr_stream *st = w->st;
  lithd_hrana_srv *h = pp->h;
  lithd_hrana_error e;
  tx_let_go_of_reader(pp);
  pp->sqls = NULL; /* the connection's */
  pp->answered = 1;
  w->running = NULL;
  if (st != NULL) {
    st->tx = pp->tx;
    pp->tx = (hr_tx){0};
    st->busy = 0;
    st->last_ms = lith_clock_ms();
    if (w->closing || h->stopping)
      stream_release(h, st); /* rolls back what it left open */
  }
  if (w->closing) {
    free(w);
  } else {
    const char *entry = pp->out.p + HEAD_MAX;
    size_t len = pp->out.len - HEAD_MAX;
    lithd_buf b = {0};
    if (pp->out.failed || pp->out.len <= HEAD_MAX) {
      lithd_hrana_fail(&e, "SQLITE_NOMEM", "out of memory");
      lithd_hrana_put_error(&b, &e);
      entry = b.p != NULL ? b.p : "";
      len = b.len;
    }
    size_t charge = pp->charged; /* the callback may take it over */
    pp->charged = 0;
    w->cb(w->arg, entry, len, &charge); /* may run the next request, or close w */
    lithd_answer_budget_release(charge);
    free(b.p);
  }
  if (!pp->in_handler)
    pipe_free(pp);
}

int lithd_hrana_ws_run(lithd_hrana_wsstream *w, lithd_hrana_pipeline *p, size_t len, int version, int access,
                       lithd_hrana_sqls *sqls, lithd_hrana_ws_done cb, void *arg, lithd_hrana_error *e) {
  lithd_hrana_srv *h = w->h;
  hr_pipe *pp = NULL;
  if (h->stopping) {
    lithd_hrana_fail(e, "SERVER_SHUTTING_DOWN", "lithd is shutting down");
    goto fail;
  }
  if (w->st == NULL) { /* closed for a newcomer (stream_take) */
    lithd_hrana_fail(e, "STREAM_EXPIRED",
                     "the stream was closed: all %d of lithd's streams were open and another client needed "
                     "one, and this one, holding no transaction, was idle the longest; open another",
                     LITHD_HRANA_STREAMS);
    goto fail;
  }
  if (w->running != NULL || w->closing) {
    lithd_hrana_fail(e, "STREAM_BUSY", "a request of this stream still runs");
    goto fail;
  }
  if ((pp = calloc(1, sizeof *pp)) == NULL) {
    lithd_hrana_fail(e, "SQLITE_NOMEM", "out of memory");
    goto fail;
  }
  if (lithd_answer_budget_charge(PIPE_COST(len)) != 0) {
    lithd_hrana_fail(
        e, "SQLITE_BUSY",
        "lithd holds %zu MiB of requests and answers at most (--max-answer-mib) and has no room for "
        "this request's %zu bytes now: retry later",
        lithd_answer_budget_cap() >> 20, len);
    goto fail;
  }
  pp->held = PIPE_COST(len);
  pp->p = p;
  pp->d = w->st->d;
  pp->h = h;
  pp->ws = w;
  pp->ws_len = len;
  pp->version = version;
  pp->access = access;
  pp->wait_left = slot_wait_ms(h->s);
  {
    char blanks[HEAD_MAX];
    memset(blanks, ' ', sizeof blanks);
    lithd_buf_put(&pp->out, blanks, sizeof blanks); /* as a pipeline's: the entry follows */
  }
  pp->st = w->st;
  pp->st->busy = 1;
  pp->sqls = sqls;
  pp->tx = pp->st->tx;
  pp->st->tx = (hr_tx){0};
  w->running = pp;
  w->cb = cb;
  w->arg = arg;
  pp->in_handler = 1;
  run_next(pp); /* answers at once when it waits for no store */
  pp->in_handler = 0;
  if (pp->answered)
    pipe_free(pp);
  return 0;
fail:
  if (pp != NULL)
    free(pp);
  lithd_hrana_pipeline_free(p);
  return -1;
}

void lithd_hrana_ws_close(lithd_hrana_wsstream *w) {
  if (w == NULL)
    return;
  if (w->running != NULL) {
    w->closing = 1; /* ws_finish releases it */
    return;
  }
  if (w->st != NULL)
    stream_release(w->h, w->st);
  free(w);
}
