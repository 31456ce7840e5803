/*
 * WebSocket connections (http.h, "WebSocket"): the upgrade, messages both
 * ways, bounds, close and the stop, on h2o 2.2.5's websocket.c and wslay.
 *
 * Lifetimes. The handshake is an ordinary request until lith_http_ws_accept:
 * the gate runs on it in the application's handler, then h2o_upgrade_to_websocket
 * sends the 101 and h2o frees its h2o_req_t (the request handle is completed
 * at once: nothing of it is needed after). h2o's h2o_websocket_conn_t (the
 * wslay context and the socket) lives from the accept until we call
 * h2o_websocket_close, which we do from its callback with arg NULL (the
 * connection ended: close frame exchanged, an error, a bound) and never
 * elsewhere, so it is never freed under wslay's feet. Our lith_http_ws
 * outlives it: the application's on_close is delivered from the close
 * callback of the connection's own uv timer (never from inside h2o or
 * wslay), and the handle is freed right after, so a call the application
 * makes meanwhile finds `conn` NULL and returns LITH_HTTP_GONE.
 *
 * Re-entry. wslay calls on_message from inside h2o_websocket_proceed; the
 * application may send or close from there. Those queue into wslay and leave
 * the sending to the proceed loop that is running (it writes whatever wslay
 * wants to write before it returns); outside a callback they call proceed
 * themselves.
 *
 * Writing. h2o's send callback is replaced by ours (on_send): one write per
 * frame, so the write's completion says which frame the kernel took, and
 * a tagged message's on_sent comes then (the application holds its memory
 * budget until that). No bound on what is queued is the layer's: the
 * application's budget, and the write timeout (http.c) for a client that
 * takes nothing; pongs waiting, which wslay queues one per ping, are
 * bounded here.
 *
 * Cutting a connection (a slow reader past its bound, a client that does not
 * answer our close) is a shutdown(2) of both directions, as the write
 * timeout does (http.c): the read or write h2o waits on fails, and the
 * connection ends through the one path above.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "internal.h"

#include <h2o/websocket.h>

#define WS_CLOSE_WAIT_MS 1000u /* a client that does not answer our close */

/* wslay keeps each fragment of a message in progress as a chunk of its own
 * (about 100 bytes besides its payload): a message of 1-byte fragments cost
 * ~93 bytes per byte, max_body bounding only the payload. A client has no
 * need of more fragments than this for a message. */
#define WS_MAX_FRAGMENTS 1024u

/* wslay queues a pong for every ping, however many wait unsent: a client
 * that pings and never reads is a slow reader past this many. */
#define WS_MAX_PONGS 64u

/* A message given with a tag, until it has left (or was dropped). */
typedef struct ws_tag {
  struct ws_tag *next;
  uint64_t seq; /* its number among the text messages sent */
  uintptr_t tag;
} ws_tag;

struct lith_http_ws {
  lith_http_server *srv;
  h2o_websocket_conn_t *conn; /* NULL once closed */
  lh_conn *c;                 /* the connection's record (valid while conn is) */
  lith_http_ws *prev, *next;  /* srv->ws_list */
  uv_timer_t timer;           /* idle bound, close wait; its close delivers on_close */
  lith_http_ws_options opt;
  uint64_t last_ms;  /* uv_now at the last message either way */
  unsigned busy : 1; /* the application owes an answer: never idle */
  unsigned frags;    /* fragments of the message in progress */
  /* Writing (our send callback, h2o's rewritten to know when a frame has
   * left): the frame being written, one at a time. */
  char *wbuf;
  size_t wlen, wcap;
  unsigned wop;             /* its opcode */
  unsigned pongs;           /* pongs queued by wslay, not yet written */
  uint64_t texts, written;  /* text messages queued, and written whole */
  ws_tag *tags, *tags_tail; /* the tagged ones not yet written, in order */
  unsigned in_cb : 1;
  unsigned closing : 1;     /* we close: no more sends */
  unsigned close_later : 1; /* ... its frame waits for the messages queued before it */
  uint16_t close_code;
  uint8_t close_len;
  char close_reason[123];
  uint64_t close_by;  /* uv_now: cut if the close is not done by then */
  unsigned cut : 1;   /* shut down: ends without a close frame */
  unsigned ended : 1; /* conn closed; on_close pending */
  char peer[INET6_ADDRSTRLEN + 16];
};

static void ws_proceed(lith_http_ws *ws) {
  if (ws->conn != NULL && ws->conn->sock != NULL && !ws->in_cb)
    h2o_websocket_proceed(ws->conn); /* may end the connection (on_ws_event, NULL) */
}

/* Shut both directions: whatever h2o waits on fails. */
static void ws_cut(lith_http_ws *ws) {
  if (ws->cut || ws->conn == NULL)
    return;
  ws->cut = 1;
  if (ws->c != NULL && ws->conn->sock != NULL)
    lh_conn_shut(ws->c, SHUT_RDWR);
}

static void on_timer_closed(uv_handle_t *h) {
  lith_http_ws *ws = h->data;
  lith_http_server *srv = ws->srv;
  while (ws->tags != NULL) { /* never written */
    ws_tag *t = ws->tags;
    ws->tags = t->next;
    if (ws->opt.on_sent != NULL)
      ws->opt.on_sent(ws, t->tag, 0, ws->opt.arg);
    free(t);
  }
  free(ws->wbuf);
  if (ws->opt.on_close != NULL)
    ws->opt.on_close(ws, ws->opt.arg);
  if (ws->prev)
    ws->prev->next = ws->next;
  else
    srv->ws_list = ws->next;
  if (ws->next)
    ws->next->prev = ws->prev;
  free((char *)ws->opt.protocol);
  free(ws);
  srv->ws_open--;
  lh_maybe_finish(srv);
}

static void on_timer(uv_timer_t *t);
static void queue_close(lith_http_ws *ws);

static void arm(lith_http_ws *ws, uint64_t ms) {
  if (ms > 0)
    uv_timer_start(&ws->timer, on_timer, ms, 0);
  else
    uv_timer_stop(&ws->timer);
}

/* The idle bound: a close when idle_ms passed without a message either
 * way while the application owed none (control frames are no activity: a
 * client that only pings, never saying what it came for, ends there too);
 * then the close wait: cut. */
static void on_timer(uv_timer_t *t) {
  lith_http_ws *ws = t->data;
  uint64_t now = uv_now(ws->srv->loop);
  if (ws->conn == NULL)
    return;
  if (ws->close_later && now < ws->close_by) {
    queue_close(ws); /* when the messages before it are out */
    return;
  }
  if (ws->closing) {
    ws_cut(ws);
    return;
  }
  if (ws->busy || now - ws->last_ms < ws->opt.idle_ms) {
    if (ws->busy)
      ws->last_ms = now;
    arm(ws, ws->opt.idle_ms - (now - ws->last_ms));
    return;
  }
  lith_http_ws_close(ws, 1001, "idle");
}

/* wslay's, at the head of each frame received, before it keeps anything
 * of it: a message in too many fragments ends the connection (1009), its
 * reading stopped at once. */
static void on_frame_start(wslay_event_context_ptr ctx, const struct wslay_event_on_frame_recv_start_arg *arg,
                           void *user_data) {
  h2o_websocket_conn_t *conn = user_data;
  lith_http_ws *ws = conn->data;
  if (arg->opcode & 0x8u)
    return; /* a control frame: never fragmented */
  ws->frags = arg->opcode == WSLAY_CONTINUATION_FRAME ? ws->frags + 1 : 1;
  if (ws->frags <= WS_MAX_FRAGMENTS)
    return;
  wslay_event_shutdown_read(ctx);
  if (ws->closing)
    return;
  unsigned in_cb = ws->in_cb;
  ws->in_cb = 1; /* inside h2o's proceed: it sends the close */
  lith_http_ws_close(ws, 1009, "a message in more than 1024 fragments");
  ws->in_cb = in_cb;
}

/* h2o's callback: a message (arg), or the end of the connection (NULL). */
static void on_ws_event(h2o_websocket_conn_t *conn, const struct wslay_event_on_msg_recv_arg *arg) {
  lith_http_ws *ws = conn->data;
  if (arg == NULL) {
    if (ws->c != NULL)
      ws->c->ws = NULL;
    h2o_websocket_close(conn); /* closes the socket; from here h2o knows nothing of ws */
    ws->conn = NULL;
    ws->c = NULL;
    ws->ended = 1;
    uv_timer_stop(&ws->timer);
    uv_close((uv_handle_t *)&ws->timer, on_timer_closed);
    return;
  }
  if (arg->opcode == WSLAY_PING && ++ws->pongs > WS_MAX_PONGS && !ws->cut) {
    ws->srv->stats.stream_overflows++; /* its pongs wait: it does not read */
    ws_cut(ws);
  }
  if (arg->opcode != WSLAY_TEXT_FRAME && arg->opcode != WSLAY_BINARY_FRAME)
    return; /* ping (answered by wslay), pong, close (answered by wslay) */
  ws->last_ms = uv_now(ws->srv->loop);
  if (ws->closing || ws->opt.on_message == NULL)
    return;
  ws->in_cb = 1;
  ws->opt.on_message(ws, (const char *)arg->msg, arg->msg_length, arg->opcode == WSLAY_BINARY_FRAME,
                     ws->opt.arg);
  ws->in_cb = 0;
}

/* A frame has been taken by the kernel whole (h2o's write completed):
 * a pong off the count, a text message's tag handed back. */
static void on_written(h2o_socket_t *sock, const char *err) {
  h2o_websocket_conn_t *conn = sock->data;
  lith_http_ws *ws = conn->data;
  unsigned op = ws->wop;
  ws->wlen = 0;
  if (ws->wcap > 65536) { /* an answer's: not kept for an idle connection */
    free(ws->wbuf);
    ws->wbuf = NULL;
    ws->wcap = 0;
  }
  if (err != NULL) {
    on_ws_event(conn, NULL); /* as h2o's own write callback */
    return;
  }
  if (op == WSLAY_PONG && ws->pongs > 0)
    ws->pongs--;
  if (op == WSLAY_TEXT_FRAME) {
    ws->written++;
    while (ws->tags != NULL && ws->tags->seq <= ws->written) {
      ws_tag *t = ws->tags;
      ws->tags = t->next;
      if (ws->tags == NULL)
        ws->tags_tail = NULL;
      ws->in_cb = 1; /* a send from there leaves the writing to the proceed below */
      if (ws->opt.on_sent != NULL)
        ws->opt.on_sent(ws, t->tag, 1, ws->opt.arg);
      ws->in_cb = 0;
      free(t);
    }
  }
  h2o_websocket_proceed(conn);
}

/* wslay's send callback (h2o's, rewritten): wslay hands a frame's head
 * alone (WSLAY_MSG_MORE when its payload follows, at once and whole: a
 * server's frames are unmasked), then the payload; both go in one write,
 * so each write is one frame and its completion says which has left. */
static ssize_t on_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
                       void *user_data) {
  h2o_websocket_conn_t *conn = user_data;
  lith_http_ws *ws = conn->data;
  if (h2o_socket_is_writing(conn->sock)) {
    wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
    return -1;
  }
  if (ws->wlen + len > ws->wcap) {
    size_t cap = ws->wlen + len < 256 ? 256 : ws->wlen + len;
    char *p = realloc(ws->wbuf, cap);
    if (p == NULL) {
      wslay_event_set_error(ctx, WSLAY_ERR_NOMEM);
      return -1; /* wslay stops writing; h2o closes */
    }
    ws->wbuf = p;
    ws->wcap = cap;
  }
  if (ws->wlen == 0)
    ws->wop = len > 0 ? data[0] & 0x0fu : 0;
  memcpy(ws->wbuf + ws->wlen, data, len);
  ws->wlen += len;
  if (flags & WSLAY_MSG_MORE)
    return (ssize_t)len;
  h2o_iovec_t b = h2o_iovec_init(ws->wbuf, ws->wlen);
  h2o_socket_write(conn->sock, &b, 1, on_written);
  return (ssize_t)len;
}

int lith_http_ws_is_handshake(const lith_http_req *h) {
  const char *key = NULL, *ver;
  if (h == NULL || !h->app || h->h2o == NULL || h->gone || h->version >= 0x200 ||
      (h->state != LH_REQ_NEW && h->state != LH_REQ_HELD))
    return 0;
  if (h2o_is_websocket_handshake(h->h2o, &key) != 0 || key == NULL)
    return 0;
  ver = lith_http_req_header(h, "sec-websocket-version");
  return ver != NULL && strcmp(ver, "13") == 0;
}

int lith_http_ws_accept(lith_http_req *h, const lith_http_ws_options *opt, lith_http_ws **out) {
  const char *key = NULL;
  lith_http_server *srv;
  if (out != NULL)
    *out = NULL;
  if (h == NULL || !h->app)
    return lh_fail(LITH_HTTP_MISUSE, "lith_http_ws_accept: the request is not held");
  if (h->gone || h->h2o == NULL) {
    lh_req_complete(h);
    return lh_fail(LITH_HTTP_GONE, "lith_http_ws_accept: the client has gone");
  }
  srv = h->srv;
  if (srv->state != LH_RUNNING) {
    lith_http_add_header(h, "retry-after", "1");
    lith_http_respond_error(h, 503, "server stopping");
    return lh_fail(LITH_HTTP_STOPPING, "lith_http_ws_accept: the server is stopping");
  }
  if (opt == NULL || out == NULL || !lith_http_ws_is_handshake(h) ||
      (opt->protocol != NULL && strpbrk(opt->protocol, "\r\n") != NULL))
    return lh_fail(LITH_HTTP_MISUSE, "lith_http_ws_accept: a WebSocket handshake, options and out");
  lith_http_ws *ws = calloc(1, sizeof *ws);
  if (ws == NULL || (opt->protocol != NULL && (ws->opt.protocol = strdup(opt->protocol)) == NULL)) {
    free(ws);
    lith_http_respond_error(h, 503, "out of memory");
    return lh_fail(LITH_HTTP_NOMEM, "lith_http_ws_accept: out of memory");
  }
  h2o_is_websocket_handshake(h->h2o, &key);
  const char *protocol = ws->opt.protocol;
  ws->opt = *opt;
  ws->opt.protocol = protocol;
  ws->srv = srv;
  ws->c = h->conn;
  memcpy(ws->peer, h->peer, sizeof ws->peer);
  uv_timer_init(srv->loop, &ws->timer);
  ws->timer.data = ws;
  ws->last_ms = uv_now(srv->loop);
  ws->next = srv->ws_list;
  if (srv->ws_list)
    srv->ws_list->prev = ws;
  srv->ws_list = ws;
  srv->ws_open++;
  if (ws->c != NULL)
    ws->c->ws = ws; /* the stop closes it with a close frame, not a shutdown */

  h2o_req_t *req = h->h2o;
  lh_watch_stop(h);
  if (protocol != NULL) {
    h2o_iovec_t v = h2o_strdup(&req->pool, protocol, strlen(protocol));
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("sec-websocket-protocol"), 0, NULL,
                          v.base, v.len);
  }
  h->state = LH_REQ_ANSWERED;
  ws->conn = h2o_upgrade_to_websocket(req, key, ws, on_ws_event); /* sends the 101; h2o frees req later */
  /* a message past max_body: wslay closes with 1009 */
  wslay_event_config_set_max_recv_msg_length(ws->conn->ws_ctx, srv->max_body);
  {
    struct wslay_event_callbacks cb = ws->conn->ws_callbacks; /* h2o's, and ours beside */
    cb.on_frame_recv_start_callback = on_frame_start;
    cb.send_callback = on_send;
    wslay_event_config_set_callbacks(ws->conn->ws_ctx, &cb);
  }
  lh_req_complete(h);
  arm(ws, ws->opt.idle_ms);
  *out = ws;
  return LITH_HTTP_OK;
}

int lith_http_ws_send_text(lith_http_ws *ws, const void *data, size_t len) {
  return lith_http_ws_send_tagged(ws, data, len, 0);
}

int lith_http_ws_send_tagged(lith_http_ws *ws, const void *data, size_t len, uintptr_t tag) {
  ws_tag *t = NULL;
  if (ws == NULL || (data == NULL && len))
    return lh_fail(LITH_HTTP_MISUSE, "lith_http_ws_send_text: a connection and data");
  if (ws->conn == NULL || ws->closing || ws->cut)
    return lh_fail(LITH_HTTP_GONE, "lith_http_ws_send_text: the connection is closing");
  /* no bound on what is queued here: the application's (its budget, its
   * requests in flight) and the write timeout's (a client that takes
   * nothing) judge a slow reader, not the size of one loop turn's answers */
  struct wslay_event_msg m = {WSLAY_TEXT_FRAME, data, len};
  if ((tag != 0 && (t = calloc(1, sizeof *t)) == NULL) || wslay_event_queue_msg(ws->conn->ws_ctx, &m) != 0) {
    free(t);
    ws_cut(ws);
    return lh_fail(LITH_HTTP_NOMEM, "lith_http_ws_send_text: wslay could not queue the message");
  }
  ws->texts++;
  if (t != NULL) {
    t->seq = ws->texts;
    t->tag = tag;
    if (ws->tags_tail != NULL)
      ws->tags_tail->next = t;
    else
      ws->tags = t;
    ws->tags_tail = t;
  }
  ws->last_ms = uv_now(ws->srv->loop);
  ws_proceed(ws);
  return LITH_HTTP_OK;
}

int lith_http_ws_close(lith_http_ws *ws, unsigned code, const char *reason) {
  if (ws == NULL)
    return lh_fail(LITH_HTTP_MISUSE, "lith_http_ws_close: no connection");
  if (ws->conn == NULL || ws->closing || ws->cut)
    return lh_fail(LITH_HTTP_GONE, "lith_http_ws_close: already closing");
  size_t n = reason != NULL ? strlen(reason) : 0;
  ws->closing = 1;
  ws->close_code = (uint16_t)code;
  ws->close_len = (uint8_t)(n > sizeof ws->close_reason ? sizeof ws->close_reason : n);
  memcpy(ws->close_reason, reason != NULL ? reason : "", ws->close_len);
  ws->close_by = uv_now(ws->srv->loop) + WS_CLOSE_WAIT_MS;
  ws->close_later = 1;
  queue_close(ws);
  return LITH_HTTP_OK;
}

/* wslay sends a control frame before any message still queued: the close
 * is queued only once they are out (looked at every few ms meanwhile),
 * so an answer sent right before a close is not lost. */
static void queue_close(lith_http_ws *ws) {
  if (ws->conn == NULL || !ws->close_later)
    return;
  if (wslay_event_get_queued_msg_count(ws->conn->ws_ctx) > 0) {
    arm(ws, 5);
    return;
  }
  ws->close_later = 0;
  if (wslay_event_queue_close(ws->conn->ws_ctx, ws->close_code, (const uint8_t *)ws->close_reason,
                              ws->close_len) != 0) {
    ws_cut(ws);
    return;
  }
  uint64_t now = uv_now(ws->srv->loop);
  arm(ws, ws->close_by > now ? ws->close_by - now : 1);
  ws_proceed(ws);
}

void lith_http_ws_set_busy(lith_http_ws *ws, int busy) {
  if (ws == NULL || ws->conn == NULL || ws->busy == !!busy)
    return;
  ws->busy = !!busy;
  ws->last_ms = uv_now(ws->srv->loop); /* idle from now on */
}

size_t lith_http_ws_queued(const lith_http_ws *ws) {
  return ws != NULL && ws->conn != NULL ? wslay_event_get_queued_msg_length(ws->conn->ws_ctx) : 0;
}

const char *lith_http_ws_peer(const lith_http_ws *ws) { return ws->peer; }

void lh_ws_stop(lith_http_server *srv) {
  for (lith_http_ws *ws = srv->ws_list, *next; ws != NULL; ws = next) {
    next = ws->next; /* a close never frees ws here (on_close comes from the loop) */
    lith_http_ws_close(ws, 1001, "server stopping");
  }
}
