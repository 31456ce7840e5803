/*
 * lithd hrana_ws — Hrana over WebSocket (see hrana_ws.h).
 *
 * Design:
 *   - The gate runs on the handshake, before the upgrade (the request is
 *     gone after it): Origin and Host, and the Authorization header's token
 *     when there is one. Hrana's own place for the token is the hello's
 *     jwt, judged by lithd_access (the one place credentials are judged)
 *     before any request runs; a failed hello closes the connection. The
 *     token that granted access is kept and judged again with every
 *     request, as HTTP judges each request's (a JWT expires).
 *   - A message is parsed (request/hrana.c, lithd_hrana_ws_parse) and
 *     either answered at once (open_stream, store_sql, close_sql, a
 *     refusal) or queued on its stream. Each stream runs its queue one
 *     request at a time (pump), each as a pipeline of one request on that
 *     stream (hrana_int.h); the answer's entry becomes the response message.
 *     close_stream and the cursor requests are queued too, so that they
 *     take effect after the requests sent before them; a closing stream
 *     gives its id up at once (clients reuse ids as soon as they close).
 *   - What a queued request holds (its parsed tree) is charged to the
 *     answer budget until it runs (then the pipeline's charge takes over),
 *     and the requests a connection has received and not yet answered are
 *     bounded: a client that sends faster than it reads its answers meets
 *     that bound. An answer holds its pipeline's share of the budget until
 *     the layer says it has left (lith_http_ws_send_tagged, on_sent), as
 *     an HTTP answer does; a client that reads nothing meets the layer's
 *     write timeout.
 *   - A cursor (hrana3) runs its batch when its open_cursor's turn comes;
 *     the entries are kept (charged to the budget) and handed out by
 *     fetch_cursor.
 *   - The connection ends (either side, a bound, the stop): queued requests
 *     are dropped, each stream is closed (a running request finishes and
 *     its answer is dropped; what it left open is rolled back).
 */
#include "hrana_ws.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "hrana.h"
#include "hrana_int.h"
#include "log.h"

/* What a queued request holds of the budget: its message's tree. */
#define QUEUED_COST(len) (2 * (len) + 1024)

typedef struct ws_conn ws_conn;

typedef struct ws_item { /* a request waiting for its stream */
  struct ws_item *next;
  lithd_hrana_wsmsg m;
  size_t len, charged;
} ws_item;

typedef struct ws_stream {
  int used;
  int closing; /* its close_stream is queued: its id is free */
  int pumping;
  int32_t id;
  lithd_hrana_wsstream *h;
  ws_item *head, *tail;
  ws_item *running;
  ws_conn *c;
} ws_stream;

typedef struct ws_cursor {
  int used;
  int32_t id;
  ws_stream *st;
  char *entries; /* '\n'-separated JSON objects, once its batch ran */
  size_t len, off, charged;
} ws_cursor;

struct ws_conn {
  lithd_server *s;
  lithd_dbsrv *d;
  lith_http_ws *ws;
  int version; /* 1, 2, 3 */
  int hello;   /* a hello was accepted */
  int access;  /* what its credentials grant */
  char *token; /* the token that granted it (the hello's, or the handshake's): judged again per request */
  int dead;    /* sending failed: the connection ends */
  int pending; /* requests received, not yet answered */
  char peer[48];
  lithd_hrana_sqls *sqls;
  ws_stream streams[LITHD_HRANA_WS_STREAMS];
  ws_cursor cursors[LITHD_HRANA_WS_CURSORS];
};

/* ---- Sending ------------------------------------------------------------------ */

/* Send b (freed), holding `charge` bytes of the answer budget (0: none)
 * until the message has left (on_sent): an answer waiting for a client
 * that reads slowly is bounded by the budget (new requests are refused
 * while it is full) and by the layer's write timeout. */
static void send_charged(ws_conn *c, lithd_buf *b, size_t charge) {
  if (c->dead || c->ws == NULL ||
      (b->failed || lith_http_ws_send_tagged(c->ws, b->p, b->len, (uintptr_t)charge) != LITH_HTTP_OK)) {
    if (b->failed && !c->dead && c->ws != NULL)
      lith_http_ws_close(c->ws, 1011, "out of memory");
    c->dead = 1; /* NOMEM: the layer cuts it; GONE: it is closing */
    lithd_answer_budget_release(charge);
  }
  free(b->p);
  memset(b, 0, sizeof *b);
}

static void send_buf(ws_conn *c, lithd_buf *b) { send_charged(c, b, 0); }

/* The layer's: a message sent with a charge has left, or never will. */
static void on_sent(lith_http_ws *ws, uintptr_t tag, int sent, void *arg) {
  (void)ws;
  (void)sent;
  (void)arg;
  lithd_answer_budget_release((size_t)tag);
}

static void send_error(ws_conn *c, int32_t id, const lithd_hrana_error *e) {
  lithd_buf b = {0};
  lithd_hrana_ws_error(&b, id, e);
  send_buf(c, &b);
}

static void send_ok(ws_conn *c, int32_t id, const char *type) {
  lithd_buf b = {0};
  lithd_hrana_ws_ok(&b, id, type);
  send_buf(c, &b);
}

/* A protocol error: the connection ends (1002, the reason cut to fit). */
static void protocol_error(ws_conn *c, const char *why) {
  lithd_log(LITHD_LOG_INFO, "hrana ws %s: protocol error: %s", c->peer, why);
  lith_http_ws_close(c->ws, 1002, why);
  c->dead = 1;
}

/* ---- Streams, cursors, the queue ----------------------------------------------- */

static ws_stream *stream_of(ws_conn *c, int32_t id) {
  for (int i = 0; i < LITHD_HRANA_WS_STREAMS; i++)
    if (c->streams[i].used && !c->streams[i].closing && c->streams[i].id == id)
      return &c->streams[i];
  return NULL;
}

static ws_cursor *cursor_of(ws_conn *c, int32_t id) {
  for (int i = 0; i < LITHD_HRANA_WS_CURSORS; i++)
    if (c->cursors[i].used && c->cursors[i].id == id)
      return &c->cursors[i];
  return NULL;
}

static void cursor_free(ws_cursor *cu) {
  lithd_answer_budget_release(cu->charged);
  free(cu->entries);
  memset(cu, 0, sizeof *cu);
}

static void item_free(ws_conn *c, ws_item *it) {
  lithd_answer_budget_release(it->charged);
  lithd_hrana_pipeline_free(it->m.p);
  free(it);
  if (--c->pending == 0 && c->ws != NULL)
    lith_http_ws_set_busy(c->ws, 0); /* idle from now */
}

static void pump(ws_stream *st);

/* The answer of the stream's running request (hrana_int.h's callback). */
static void on_answer(void *arg, const char *entry, size_t len, size_t *charge) {
  ws_stream *st = arg;
  ws_conn *c = st->c;
  ws_item *it = st->running;
  lithd_buf b = {0};
  st->running = NULL;
  if (it->m.kind == LITHD_HRWS_OPEN_CURSOR) {
    /* Its batch ran: the entries are kept whatever the budget holds now,
     * the pipeline's share of them handed to the cursor (never charged
     * twice), since an error here would tell the client that what ran,
     * a write committed, did not. */
    ws_cursor *cu = cursor_of(c, it->m.cursor_id);
    if (cu != NULL && (cu->entries = malloc(len + 1)) != NULL) {
      memcpy(cu->entries, entry, len);
      cu->entries[len] = '\0';
      cu->len = len;
      cu->charged = *charge;
      *charge = 0;
      send_ok(c, it->m.request_id, "open_cursor");
    } else {
      lithd_hrana_error e;
      lithd_hrana_fail(&e, "SQLITE_NOMEM",
                       "out of memory keeping this cursor's entries: its batch ran (what it wrote "
                       "outside a transaction is committed), its outcome is lost");
      if (cu != NULL)
        cursor_free(cu);
      send_error(c, it->m.request_id, &e);
    }
  } else {
    lithd_hrana_ws_response(&b, it->m.request_id, entry, len);
    send_charged(c, &b, *charge); /* its share stays held until it left */
    *charge = 0;
  }
  item_free(c, it);
  pump(st);
}

/* fetch_cursor: up to max_count entries, and whether they are the last. */
static void fetch(ws_conn *c, const lithd_hrana_wsmsg *m) {
  ws_cursor *cu = cursor_of(c, m->cursor_id);
  lithd_buf b = {0};
  lithd_hrana_error e;
  if (cu == NULL || cu->entries == NULL) {
    lithd_hrana_fail(&e, "CURSOR_NOT_FOUND", "no open cursor %" PRId32 " on this connection", m->cursor_id);
    send_error(c, m->request_id, &e);
    return;
  }
  size_t off = cu->off;
  lithd_buf_printf(&b,
                   "{\"type\":\"response_ok\",\"request_id\":%" PRId32
                   ",\"response\":{\"type\":\"fetch_cursor\",\"entries\":[",
                   m->request_id);
  for (int32_t n = 0; n < m->max_count && cu->off < cu->len; n++) {
    const char *line = cu->entries + cu->off, *nl = memchr(line, '\n', cu->len - cu->off);
    size_t k = nl != NULL ? (size_t)(nl - line) : cu->len - cu->off;
    if (n > 0)
      lithd_buf_puts(&b, ",");
    lithd_buf_put(&b, line, k);
    cu->off += k + (nl != NULL);
  }
  lithd_buf_printf(&b, "],\"done\":%s}}", cu->off >= cu->len ? "true" : "false");
  if (lithd_answer_budget_charge(b.len) != 0) { /* the copy, until it left: as nothing was fetched */
    cu->off = off;
    free(b.p);
    lithd_hrana_fail(&e, "SQLITE_BUSY",
                     "lithd has no room to send these entries now (--max-answer-mib): fetch again later");
    send_error(c, m->request_id, &e);
    return;
  }
  send_charged(c, &b, b.len);
}

/* Run what waits on st, in order, while nothing of it runs. Not
 * re-entered: an answer that comes at once continues this loop. */
static void pump(ws_stream *st) {
  ws_conn *c = st->c;
  lithd_hrana_error e;
  if (st->pumping)
    return;
  st->pumping = 1;
  while (st->used && st->running == NULL && st->head != NULL && !c->dead) {
    ws_item *it = st->head;
    st->head = it->next;
    if (st->head == NULL)
      st->tail = NULL;
    switch (it->m.kind) {
    case LITHD_HRWS_CLOSE_STREAM:  /* what may follow: its cursors' requests */
      lithd_hrana_ws_close(st->h); /* rolls back what it left open */
      st->h = NULL;
      send_ok(c, it->m.request_id, "close_stream");
      item_free(c, it);
      break;
    case LITHD_HRWS_FETCH_CURSOR:
      fetch(c, &it->m);
      item_free(c, it);
      break;
    case LITHD_HRWS_CLOSE_CURSOR: {
      ws_cursor *cu = cursor_of(c, it->m.cursor_id);
      if (cu != NULL)
        cursor_free(cu);
      send_ok(c, it->m.request_id, "close_cursor");
      item_free(c, it);
      break;
    }
    default:               /* runs on the stream; its pipeline's charge replaces the queue's */
      if (st->h == NULL) { /* never queued behind a close_stream (stream_of), but never run without one */
        lithd_hrana_fail(&e, "STREAM_NOT_FOUND", "the stream is closed");
        send_error(c, it->m.request_id, &e);
        item_free(c, it);
        break;
      }
      lithd_answer_budget_release(it->charged);
      it->charged = 0;
      st->running = it;
      lithd_hrana_pipeline *p = it->m.p;
      it->m.p = NULL;
      if (lithd_hrana_ws_run(st->h, p, it->len, c->version >= 3 ? 3 : 2, c->access, NULL, on_answer, st,
                             &e) != 0) {
        st->running = NULL;
        if (it->m.kind == LITHD_HRWS_OPEN_CURSOR && cursor_of(c, it->m.cursor_id) != NULL)
          cursor_free(cursor_of(c, it->m.cursor_id));
        send_error(c, it->m.request_id, &e);
        item_free(c, it);
      }
      break;
    }
  }
  if (st->used && st->h == NULL && st->head == NULL)
    st->used = 0; /* closed, and nothing of it waits */
  st->pumping = 0;
}

/* Queue the request of m on st (m's tree passes to the queue). Its
 * stored SQL is resolved now (lithd_hrana_ws_resolve): a close_sql or
 * store_sql that comes after it never changes what it runs. */
static void enqueue(ws_conn *c, ws_stream *st, lithd_hrana_wsmsg *m, size_t len) {
  lithd_hrana_error e;
  size_t max = c->s->limits.max_body_bytes > 0 ? c->s->limits.max_body_bytes : ((size_t)8 << 20);
  long added = lithd_hrana_ws_resolve(m->p, c->sqls, max, &e);
  if (added < 0) {
    send_error(c, m->request_id, &e);
    return;
  }
  len += (size_t)added;
  ws_item *it = calloc(1, sizeof *it);
  if (it == NULL || lithd_answer_budget_charge(QUEUED_COST(len)) != 0) {
    free(it);
    lithd_hrana_fail(
        &e, "SQLITE_BUSY",
        "lithd holds %zu MiB of requests and answers at most (--max-answer-mib) and has no room for "
        "this request now: retry later",
        lithd_answer_budget_cap() >> 20);
    send_error(c, m->request_id, &e);
    return;
  }
  it->m = *m;
  m->p = NULL;
  it->len = len;
  it->charged = QUEUED_COST(len);
  if (c->pending++ == 0)
    lith_http_ws_set_busy(c->ws, 1); /* however long it waits (a BEGIN behind a writer) */
  if (st->tail != NULL)
    st->tail->next = it;
  else
    st->head = it;
  st->tail = it;
  pump(st);
}

/* ---- Messages ------------------------------------------------------------------- */

/* The version each request needs. */
static int needs(int kind) {
  switch (kind) {
  case LITHD_HRWS_OPEN_STREAM:
  case LITHD_HRWS_CLOSE_STREAM:
  case LITHD_HR_EXECUTE:
  case LITHD_HR_BATCH: return 1;
  case LITHD_HR_SEQUENCE:
  case LITHD_HR_DESCRIBE:
  case LITHD_HR_STORE_SQL:
  case LITHD_HR_CLOSE_SQL: return 2;
  default: return 3;
  }
}

static void on_hello(ws_conn *c, const lithd_hrana_wsmsg *m) {
  lithd_buf b = {0};
  if (c->hello && c->version < 2) {
    protocol_error(c, "hrana1 takes one hello");
    return;
  }
  if (m->jwt != NULL || !c->hello) {
    char msg[256];
    /* a hello without a jwt keeps what the handshake's Authorization granted */
    int access =
        m->jwt != NULL || c->access == 0 ? lithd_access(c->s, c->d, m->jwt, msg, sizeof msg) : c->access;
    if (access != LITHD_ACCESS_NONE && m->jwt != NULL) {
      free(c->token);
      if ((c->token = strdup(m->jwt)) == NULL)
        access = LITHD_ACCESS_NONE, snprintf(msg, sizeof msg, "out of memory");
    }
    if (access == LITHD_ACCESS_NONE) {
      lithd_buf_puts(&b, "{\"type\":\"hello_error\",\"error\":{\"message\":");
      lithd_json_put_string(&b, msg, strlen(msg));
      lithd_buf_puts(&b, ",\"code\":\"AUTH_FAILED\"}}");
      send_buf(c, &b);
      lith_http_ws_close(c->ws, 1008, "authentication failed");
      c->dead = 1;
      return;
    }
    c->access = access;
  }
  c->hello = 1;
  lithd_buf_puts(&b, "{\"type\":\"hello_ok\"}");
  send_buf(c, &b);
}

static void on_request(ws_conn *c, lithd_hrana_wsmsg *m, size_t len) {
  lithd_hrana_error e;
  ws_stream *st;
  if (!c->hello) {
    protocol_error(c, "a request before the hello");
    return;
  }
  if (c->token != NULL) { /* judged again, as HTTP judges each request's: a JWT expires */
    char msg[256];
    if ((c->access = lithd_access(c->s, c->d, c->token, msg, sizeof msg)) == LITHD_ACCESS_NONE) {
      lithd_hrana_fail(&e, "AUTH_FAILED", "%s (a hello with a new token goes on)", msg);
      send_error(c, m->request_id, &e);
      return;
    }
  }
  if (m->kind == LITHD_HR_UNKNOWN || needs(m->kind) > c->version) {
    lithd_hrana_fail(&e, "PROTO_ERROR", "%s request on hrana%d",
                     m->kind == LITHD_HR_UNKNOWN ? "an unknown" : "a later", c->version);
    send_error(c, m->request_id, &e);
    return;
  }
  if (c->pending >= LITHD_HRANA_WS_PENDING) {
    lithd_hrana_fail(
        &e, "TOO_MANY_REQUESTS",
        "%d requests of this connection wait for their answers, the most one may: read the answers "
        "before sending more",
        LITHD_HRANA_WS_PENDING);
    send_error(c, m->request_id, &e);
    return;
  }
  switch (m->kind) {
  case LITHD_HRWS_OPEN_STREAM: {
    ws_stream *free_st = NULL;
    if (stream_of(c, m->stream_id) != NULL) {
      protocol_error(c, "open_stream: the stream id is in use");
      return;
    }
    for (int i = 0; i < LITHD_HRANA_WS_STREAMS && free_st == NULL; i++)
      if (!c->streams[i].used)
        free_st = &c->streams[i];
    if (free_st == NULL) {
      lithd_hrana_fail(&e, "STREAMS_EXHAUSTED",
                       "this connection holds %d streams, the most one may: close some",
                       LITHD_HRANA_WS_STREAMS);
      send_error(c, m->request_id, &e);
      return;
    }
    if (lithd_hrana_ws_open(c->s, c->d, c->peer, &free_st->h, &e) != 0) {
      send_error(c, m->request_id, &e);
      return;
    }
    free_st->used = 1;
    free_st->closing = 0;
    free_st->id = m->stream_id;
    free_st->c = c;
    send_ok(c, m->request_id, "open_stream");
    return;
  }
  case LITHD_HR_STORE_SQL:
  case LITHD_HR_CLOSE_SQL:
    if ((m->kind == LITHD_HR_STORE_SQL
             ? lithd_hrana_sqls_store(&c->sqls, m->p->requests[0], &c->s->limits, &e)
             : lithd_hrana_sqls_close(c->sqls, m->p->requests[0], &e)) != 0)
      send_error(c, m->request_id, &e);
    else
      send_ok(c, m->request_id, m->kind == LITHD_HR_STORE_SQL ? "store_sql" : "close_sql");
    return;
  case LITHD_HRWS_FETCH_CURSOR:
  case LITHD_HRWS_CLOSE_CURSOR: {
    ws_cursor *cu = cursor_of(c, m->cursor_id);
    if (cu == NULL) {
      if (m->kind == LITHD_HRWS_CLOSE_CURSOR) {
        send_ok(c, m->request_id, "close_cursor");
      } else {
        lithd_hrana_fail(&e, "CURSOR_NOT_FOUND", "no open cursor %" PRId32 " on this connection",
                         m->cursor_id);
        send_error(c, m->request_id, &e);
      }
      return;
    }
    if (cu->st->used) { /* after its batch, in its stream's order */
      enqueue(c, cu->st, m, len);
      return;
    }
    if (m->kind == LITHD_HRWS_FETCH_CURSOR)
      fetch(c, m);
    else
      cursor_free(cu);
    if (m->kind == LITHD_HRWS_CLOSE_CURSOR)
      send_ok(c, m->request_id, "close_cursor");
    return;
  }
  default: break;
  }
  /* close_stream, open_cursor and what runs SQL: on the stream, in order */
  if ((st = stream_of(c, m->stream_id)) == NULL) {
    if (m->kind == LITHD_HRWS_CLOSE_STREAM) { /* closing one not open is no error */
      send_ok(c, m->request_id, "close_stream");
      return;
    }
    lithd_hrana_fail(&e, "STREAM_NOT_FOUND", "no open stream %" PRId32 " on this connection", m->stream_id);
    send_error(c, m->request_id, &e);
    return;
  }
  if (m->kind == LITHD_HRWS_OPEN_CURSOR) {
    ws_cursor *cu = NULL;
    if (cursor_of(c, m->cursor_id) != NULL) {
      protocol_error(c, "open_cursor: the cursor id is in use");
      return;
    }
    for (int i = 0; i < LITHD_HRANA_WS_CURSORS && cu == NULL; i++)
      if (!c->cursors[i].used)
        cu = &c->cursors[i];
    if (cu == NULL) {
      lithd_hrana_fail(&e, "CURSORS_EXHAUSTED",
                       "this connection holds %d cursors, the most one may: close some",
                       LITHD_HRANA_WS_CURSORS);
      send_error(c, m->request_id, &e);
      return;
    }
    cu->used = 1;
    cu->id = m->cursor_id;
    cu->st = st;
  }
  if (m->kind == LITHD_HRWS_CLOSE_STREAM)
    st->closing = 1; /* its id is free now */
  enqueue(c, st, m, len);
}

static void on_message(lith_http_ws *ws, const char *data, size_t len, int binary, void *arg) {
  ws_conn *c = arg;
  lithd_hrana_wsmsg m;
  lithd_hrana_error e;
  (void)ws;
  if (c->dead)
    return;
  if (binary) {
    lith_http_ws_close(c->ws, 1003, "lithd speaks Hrana's JSON encoding: text messages only");
    c->dead = 1;
    return;
  }
  if (lithd_hrana_ws_parse(data, len, &m, &e) != 0) {
    protocol_error(c, e.message);
    return;
  }
  if (m.type == LITHD_HRWS_HELLO)
    on_hello(c, &m);
  else
    on_request(c, &m, len);
  lithd_hrana_pipeline_free(m.p); /* NULL when a queue took it */
}

static void on_close(lith_http_ws *ws, void *arg) {
  ws_conn *c = arg;
  (void)ws;
  c->ws = NULL;
  c->dead = 1;
  for (int i = 0; i < LITHD_HRANA_WS_CURSORS; i++)
    if (c->cursors[i].used)
      cursor_free(&c->cursors[i]);
  for (int i = 0; i < LITHD_HRANA_WS_STREAMS; i++) {
    ws_stream *st = &c->streams[i];
    if (!st->used)
      continue;
    while (st->head != NULL) {
      ws_item *it = st->head;
      st->head = it->next;
      item_free(c, it);
    }
    if (st->running != NULL) /* its answer never comes (lithd_hrana_ws_close) */
      item_free(c, st->running);
    lithd_hrana_ws_close(st->h);
  }
  lithd_hrana_sqls_free(c->sqls);
  free(c->token);
  free(c);
}

/* ---- The handshake ------------------------------------------------------------- */

static void refuse_ws(lith_http_req *req, int status, const char *msg) {
  lith_http_respond_error(req, status, msg);
}

/* The subprotocol to speak of what the client offered (a comma list):
 * the highest JSON one; "hrana1" when it offered none (Hrana 1's rule);
 * NULL when it offered only others. */
static const char *choose(const char *offer) {
  static const char *ours[] = {"hrana3", "hrana2", "hrana1"};
  if (offer == NULL)
    return "hrana1";
  for (size_t k = 0; k < sizeof ours / sizeof ours[0]; k++) {
    size_t n = strlen(ours[k]);
    for (const char *p = offer; *p != '\0';) {
      p += strspn(p, " \t,");
      size_t t = strcspn(p, " \t,");
      if (t == n && memcmp(p, ours[k], n) == 0)
        return ours[k];
      p += t;
    }
  }
  return NULL;
}

int lithd_hrana_ws(lith_http_req *req, void *arg) {
  lithd_dbsrv *d = arg;
  lithd_server *s = d->srv;
  if (!lith_http_ws_is_handshake(req)) {
    lith_http_add_header(req, "upgrade", "websocket");
    lith_http_respond_error(
        req, 426,
        "this is Hrana over WebSocket (ws://): a WebSocket handshake (HTTP/1.1, Upgrade: "
        "websocket, Sec-WebSocket-Version: 13) is expected; over HTTP, POST /v2/pipeline or "
        "/v3/pipeline");
    return LITH_HTTP_DONE;
  }
  int access = lithd_admit_handshake(s, d, req, refuse_ws);
  if (access == LITHD_ACCESS_NONE)
    return LITH_HTTP_DONE;
  const char *proto = choose(lith_http_req_header(req, "sec-websocket-protocol"));
  if (proto == NULL) {
    lith_http_respond_error(req, 400,
                            "no subprotocol lithd speaks was offered: hrana1, hrana2 or hrana3 (JSON; not "
                            "hrana3-protobuf)");
    return LITH_HTTP_DONE;
  }
  ws_conn *c = calloc(1, sizeof *c);
  if (c == NULL) {
    lith_http_respond_error(req, 503, "out of memory");
    return LITH_HTTP_DONE;
  }
  c->s = s;
  c->d = d;
  c->version = proto[5] - '0';
  /* a token in the handshake's Authorization was judged; none: the hello's is */
  c->access = lith_http_req_header(req, "authorization") != NULL ? access : 0;
  c->token = lithd_bearer_dup(req);
  {
    const char *p = lith_http_req_peer(req);
    const char *colon = strrchr(p, ':');
    size_t n = colon != NULL && p[0] != 'u' ? (size_t)(colon - p) : strlen(p);
    snprintf(c->peer, sizeof c->peer, "%.*s", (int)n, p);
  }
  lith_http_ws_options o = {0};
  /* none offered: hrana1, and no header (RFC 6455: only one the client offered) */
  o.protocol = lith_http_req_header(req, "sec-websocket-protocol") != NULL ? proto : NULL;
  o.idle_ms = s->stream_idle_ms > 0 ? (unsigned)s->stream_idle_ms : LITHD_HRANA_WS_IDLE_MS;
  o.on_message = on_message;
  o.on_close = on_close;
  o.on_sent = on_sent;
  o.arg = c;
  if (lith_http_ws_accept(req, &o, &c->ws) != LITH_HTTP_OK) {
    free(c->token);
    free(c);
    return LITH_HTTP_DONE;
  }
  return LITH_HTTP_DONE;
}
