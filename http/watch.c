/*
 * Noticing that an HTTP/1 client left while the application holds its
 * request (an answer still to come from a lith commit, an idle event
 * stream).
 *
 * h2o 2.2.5 stops reading an HTTP/1 connection while it handles a request:
 * the request's method, path and headers point into the socket's input
 * buffer, which the next read may move. So h2o notices a closed connection
 * only when it writes the response — never, for an event stream with
 * nothing to say. We must not read the socket either (that is what would
 * move the buffer), so we ask the kernel instead: each watched socket is
 * registered, for EPOLLRDHUP only, in an epoll set of our own, and a
 * uv_poll_t on that set wakes us when a peer shuts down its side or resets
 * the connection. Bytes that arrive meanwhile (a pipelined request) raise no
 * event and stay in the kernel for h2o. A socket may sit in several epoll
 * sets at once, libuv's and ours, and closing it removes it from both.
 *
 * Then the exchange is ended from our side (499 for a request not yet
 * answered, nobody reads it; a failed stream), h2o closes the connection
 * and frees the request, and the holder's on_gone runs. A client that only
 * shuts down its sending side and waits for the answer counts as gone: h2o
 * itself closes such a connection between requests.
 *
 * Cost: a busy server holds every request for a commit, a few milliseconds,
 * and a system call per request would be a good part of its work. So a
 * held request is watched only once it has been held LH_WATCH_DELAY_MS (one
 * timer for all: the requests wait in a list in the order they were held);
 * most are answered before. A client that leaves is then noticed that much
 * later at most. A socket enters the set once, with EPOLLONESHOT; arming the
 * watch is one EPOLL_CTL_MOD (which also reports a hang-up that happened
 * meanwhile), releasing it costs nothing: a late event for a socket nobody
 * watches is dropped (and, being one-shot, not repeated). The uv_poll_t and
 * the timer are unreferenced: they never keep the loop alive.
 *
 * HTTP/2 needs none of this: h2o always reads an HTTP/2 connection, and a
 * reset stream or a closed connection frees the request at once.
 */
#include <sys/epoll.h>
#include <unistd.h>

#include "internal.h"

#define LH_WATCH_DELAY_MS 50

static void on_watch_events(uv_poll_t *poll, int status, int events) {
  (void)status;
  (void)events;
  lith_http_server *srv = poll->data;
  struct epoll_event ev[64];
  int n = epoll_wait(srv->watch_ep, ev, 64, 0);
  for (int i = 0; i < n; i++) {
    lh_conn *c = ev[i].data.ptr;
    lith_http_req *h = c->watcher;
    if (!h)
      continue;
    lh_watch_stop(h);
    lh_mark_gone(h);
    lh_queue_abort(h, 499);
  }
}

static void later_unlink(lith_http_req *h) {
  lith_http_server *srv = h->srv;
  if (!h->later)
    return;
  if (h->later_prev)
    h->later_prev->later_next = h->later_next;
  else
    srv->later_head = h->later_next;
  if (h->later_next)
    h->later_next->later_prev = h->later_prev;
  else
    srv->later_tail = h->later_prev;
  h->later_prev = h->later_next = NULL;
  h->later = 0;
}

static void on_watch_timer(uv_timer_t *t) {
  lith_http_server *srv = t->data;
  uint64_t now = uv_now(srv->loop);
  lith_http_req *h;
  while ((h = srv->later_head) != NULL && now - h->held_ms >= LH_WATCH_DELAY_MS) {
    later_unlink(h);
    lh_watch_start(h);
  }
  if (h != NULL)
    uv_timer_start(&srv->watch_timer, on_watch_timer, h->held_ms + LH_WATCH_DELAY_MS - now, 0);
}

void lh_watch_later(lith_http_req *h) {
  lith_http_server *srv = h->srv;
  if (h->later || h->watching || !h->h2o || h->version >= 0x200)
    return;
  h->held_ms = uv_now(srv->loop);
  h->later = 1;
  h->later_next = NULL;
  h->later_prev = srv->later_tail;
  if (srv->later_tail)
    srv->later_tail->later_next = h;
  else
    srv->later_head = h;
  srv->later_tail = h;
  if (!uv_is_active((uv_handle_t *)&srv->watch_timer))
    uv_timer_start(&srv->watch_timer, on_watch_timer, LH_WATCH_DELAY_MS, 0);
}

int lh_watch_init(lith_http_server *srv) {
  srv->watch_ep = epoll_create1(EPOLL_CLOEXEC);
  if (srv->watch_ep < 0)
    return -1;
  if (uv_poll_init(srv->loop, &srv->watch_poll, srv->watch_ep) != 0) {
    close(srv->watch_ep);
    srv->watch_ep = -1;
    return -1;
  }
  srv->watch_poll.data = srv;
  uv_timer_init(srv->loop, &srv->watch_timer);
  uv_unref((uv_handle_t *)&srv->watch_timer);
  srv->watch_timer.data = srv;
  return 0;
}

void lh_watch_start(lith_http_req *h) {
  lh_conn *c = h->conn;
  lith_http_server *srv = h->srv;
  uv_os_fd_t fd;
  if (h->watching || !h->h2o || h->version >= 0x200 || !c || !c->sock || c->watcher ||
      uv_fileno(&c->io.handle, &fd) != 0)
    return;
  struct epoll_event ev = {.events = EPOLLRDHUP | EPOLLONESHOT, .data.ptr = c};
  if (epoll_ctl(srv->watch_ep, c->watch_added ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev) != 0)
    return; /* unwatched: the client's leaving is noticed at the write */
  c->watch_added = 1;
  c->watcher = h;
  h->watching = 1;
  srv->n_watched++;
  if (!srv->watch_polling) {
    uv_poll_start(&srv->watch_poll, UV_READABLE, on_watch_events);
    uv_unref((uv_handle_t *)&srv->watch_poll); /* never what keeps the loop alive */
    srv->watch_polling = 1;
  }
}

void lh_watch_stop(lith_http_req *h) {
  later_unlink(h);
  if (!h->watching)
    return;
  lh_conn *c = h->conn;
  h->watching = 0;
  /* No system call: the socket stays in the set, its one-shot event armed
   * or spent; on_watch_events drops an event nobody waits for. Once h2o
   * closes the socket the kernel drops it from the set. */
  if (c && c->watcher == h)
    c->watcher = NULL;
  h->srv->n_watched--;
}
