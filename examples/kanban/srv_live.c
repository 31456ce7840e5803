/*
 * srv_live — board change events for open pages (see srv_live.h).
 *
 * Design:
 *   - Subscribers live in a small hash table keyed by board id (buckets of
 *     doubly linked lists), so a change reaches its board's pages without
 *     walking every open stream of the server.
 *   - The writer thread's hook appends the touched ids to `pending` (a
 *     growing array, each id once) under `mu` and calls uv_async_send, which
 *     libuv coalesces: many commits before the loop wakes are one callback.
 *     The loop swaps `pending` for an empty array under the mutex and sends
 *     outside it, so the hook waits at most for that swap.
 *   - A stream whose client left (or that overflowed: a page that does not
 *     read) is taken out in its on_gone callback, which the HTTP layer never
 *     calls from inside one of its own calls, so the sending loop below never
 *     sees a subscriber vanish under it.
 *   - The hook may still run after the loop side closed (lith_close drains
 *     the queue after the HTTP server stopped): `closed`, under the mutex,
 *     makes it a no-op, and the struct is freed only by srv_live_free, after
 *     lith_close.
 */
#include "srv_live.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUCKETS 256
#define HEARTBEAT_MS 15000

struct sub {
  struct sub *prev, *next;
  srv_live *hub;
  lith_http_req *req;
  int64_t board;
};

struct srv_live {
  uv_loop_t *loop;
  uv_async_t async;
  uv_timer_t heartbeat;
  int handles_open; /* 2 while async and timer are open, down to 0 */
  int closing;
  struct sub *bucket[BUCKETS];
  size_t count;

  pthread_mutex_t mu; /* guards the three below */
  int64_t *pending;
  size_t n_pending, cap_pending;
  int closed;
};

static unsigned bucket_of(int64_t board) {
  uint64_t h = (uint64_t)board * UINT64_C(0x9E3779B97F4A7C15);
  return (unsigned)(h >> 56) % BUCKETS;
}

static void unlink_sub(srv_live *l, struct sub *s) {
  if (s->prev != NULL)
    s->prev->next = s->next;
  else
    l->bucket[bucket_of(s->board)] = s->next;
  if (s->next != NULL)
    s->next->prev = s->prev;
  l->count--;
}

/* The client left, the stream overflowed, or the server is stopping. */
static void on_gone(lith_http_req *req, void *arg) {
  struct sub *s = arg;
  unlink_sub(s->hub, s);
  lith_http_stream_end(req); /* releases the handle (GONE is expected) */
  free(s);
}

static void notify(srv_live *l, int64_t board) {
  char data[48];
  struct sub *s;
  snprintf(data, sizeof data, "{\"board\":%" PRId64 "}", board);
  for (s = l->bucket[bucket_of(board)]; s != NULL; s = s->next)
    if (s->board == board)
      lith_http_sse_event(s->req, "change", NULL, data);
  /* FULL or GONE: on_gone follows from the loop and frees the subscriber */
}

static void on_async(uv_async_t *a) {
  srv_live *l = a->data;
  int64_t *ids;
  size_t n, i;

  pthread_mutex_lock(&l->mu);
  ids = l->pending;
  n = l->n_pending;
  l->pending = NULL;
  l->n_pending = l->cap_pending = 0;
  pthread_mutex_unlock(&l->mu);
  for (i = 0; i < n; i++)
    notify(l, ids[i]);
  free(ids);
}

static void on_heartbeat(uv_timer_t *t) {
  srv_live *l = t->data;
  static const char ping[] = ":\n\n";
  unsigned b;
  for (b = 0; b < BUCKETS; b++) {
    struct sub *s;
    for (s = l->bucket[b]; s != NULL; s = s->next)
      lith_http_stream_write(s->req, ping, sizeof ping - 1);
  }
}

int srv_live_open(uv_loop_t *loop, srv_live **out) {
  srv_live *l = calloc(1, sizeof *l);
  int rc;

  *out = NULL;
  if (l == NULL)
    return UV_ENOMEM;
  l->loop = loop;
  if (pthread_mutex_init(&l->mu, NULL) != 0) {
    free(l);
    return UV_ENOMEM;
  }
  if ((rc = uv_async_init(loop, &l->async, on_async)) != 0) { /* cannot fail on Linux */
    pthread_mutex_destroy(&l->mu);
    free(l);
    return rc;
  }
  l->async.data = l;
  uv_timer_init(loop, &l->heartbeat); /* never fails */
  l->heartbeat.data = l;
  l->handles_open = 2;
  uv_timer_start(&l->heartbeat, on_heartbeat, HEARTBEAT_MS, HEARTBEAT_MS);
  /* neither handle keeps the loop alive: the HTTP server and the bridge do */
  uv_unref((uv_handle_t *)&l->async);
  uv_unref((uv_handle_t *)&l->heartbeat);
  *out = l;
  return 0;
}

void srv_live_hook(void *ctx, const int64_t *topics, int n) {
  srv_live *l = ctx;
  int i, wake = 0;

  if (n <= 0)
    return;
  pthread_mutex_lock(&l->mu);
  if (l->closed)
    goto out;
  for (i = 0; i < n; i++) {
    size_t j;
    for (j = 0; j < l->n_pending && l->pending[j] != topics[i]; j++) {
    }
    if (j < l->n_pending)
      continue; /* already waiting for the loop */
    if (l->n_pending == l->cap_pending) {
      size_t cap = l->cap_pending ? l->cap_pending * 2 : 16;
      int64_t *p = realloc(l->pending, cap * sizeof *p);
      if (p == NULL)
        break; /* pages miss this one; they refetch on their next event */
      l->pending = p;
      l->cap_pending = cap;
    }
    l->pending[l->n_pending++] = topics[i];
    wake = 1;
  }
  /* under the mutex: srv_live_close sets `closed` before closing the handle */
  if (wake)
    uv_async_send(&l->async);
out:
  pthread_mutex_unlock(&l->mu);
}

int srv_live_subscribe(srv_live *l, lith_http_req *req, int64_t board) {
  static const char hello[] = "retry: 2000\n\nevent: hello\ndata: {}\n\n";
  struct sub *s;
  unsigned b;
  int rc;

  if (l->closing) {
    lith_http_add_header(req, "retry-after", "2");
    lith_http_respond_error(req, 503, "the server is stopping");
    return -1;
  }
  s = calloc(1, sizeof *s);
  if (s == NULL) {
    lith_http_respond_error(req, 500, "out of memory");
    return -1;
  }
  rc = lith_http_sse_start(req);
  if (rc != LITH_HTTP_OK) {
    free(s);
    /* not started (the client left, or the server is stopping): an answer
     * completes the handle, sent or not */
    lith_http_respond_error(req, 503, "the server is stopping");
    return -1;
  }
  if (lith_http_stream_write(req, hello, sizeof hello - 1) != LITH_HTTP_OK) {
    free(s);
    lith_http_stream_end(req); /* completes the handle whatever happened */
    return -1;
  }
  s->hub = l;
  s->req = req;
  s->board = board;
  b = bucket_of(board);
  s->next = l->bucket[b];
  if (s->next != NULL)
    s->next->prev = s;
  l->bucket[b] = s;
  l->count++;
  lith_http_on_gone(req, on_gone, s);
  return 0;
}

size_t srv_live_count(const srv_live *l) { return l->count; }

static void on_handle_closed(uv_handle_t *h) {
  srv_live *l = h->data;
  l->handles_open--;
}

void srv_live_close(srv_live *l) {
  unsigned b;
  if (l == NULL || l->closing)
    return;
  l->closing = 1;
  pthread_mutex_lock(&l->mu);
  l->closed = 1;
  pthread_mutex_unlock(&l->mu);
  for (b = 0; b < BUCKETS; b++) {
    struct sub *s;
    while ((s = l->bucket[b]) != NULL) {
      unlink_sub(l, s);
      lith_http_on_gone(s->req, NULL, NULL);
      lith_http_stream_end(s->req);
      free(s);
    }
  }
  uv_close((uv_handle_t *)&l->async, on_handle_closed);
  uv_close((uv_handle_t *)&l->heartbeat, on_handle_closed);
}

void srv_live_free(srv_live *l) {
  if (l == NULL)
    return;
  free(l->pending);
  pthread_mutex_destroy(&l->mu);
  free(l);
}
