/*
 * srv_live — the live part of the kanban server: which open pages watch
 * which board, and telling them when it changed.
 *
 * Why a module: the news comes from the writer thread (lith's on_commit
 * hook, after every batch that touched boards), the pages are server-sent
 * event streams that only the loop thread may touch. This module is the one
 * place where the two meet: the hook puts board ids into a mutex-protected
 * set and wakes the loop (uv_async_send); the loop takes the whole set and
 * writes one event to every stream of each board in it. A burst of commits
 * becomes one event per page, and the hook never waits for a page.
 *
 * An event carries no board state: it says "board N changed", and the page
 * refetches the board (one read on the pool, a consistent snapshot). So an
 * event that arrives late or twice does no harm, and a page that reconnects
 * after a lost connection refetches once and is right again.
 *
 * Threads: srv_live_hook on the writer thread; everything else on the loop
 * thread.
 */
#ifndef KANBAN_SRV_LIVE_H
#define KANBAN_SRV_LIVE_H

#include <stdint.h>

#include <uv.h>

#include "http.h"

typedef struct srv_live srv_live;

/* Create the hub on `loop` (the caller's). 0 on success, else a libuv error
 * code (negative). Must be called before lith_open, whose on_commit hook
 * (srv_live_hook) receives it as context. */
int srv_live_open(uv_loop_t *loop, srv_live **out);

/* lith's on_commit hook (lith_commit_hook): `ctx` is the srv_live, topics are
 * board ids. Writer thread; takes a mutex for the length of a copy. */
void srv_live_hook(void *ctx, const int64_t *topics, int n);

/* Start a server-sent-event stream on `req` (a held request: call it from a
 * loop callback, not from inside a handler) for `board` and keep it until the
 * client leaves or the server stops. The first event ("hello") goes out at
 * once; then "change" (data: {"board": ID}) after every commit that touched
 * the board, and a comment line every 15 s so that proxies and the browser
 * know the stream is alive. Takes `req` in every case: 0 if it is now a
 * stream, -1 if it was completed instead (503 when stopping, 500 when out of
 * memory, or nothing when the client had left). */
int srv_live_subscribe(srv_live *l, lith_http_req *req, int64_t board);

/* Streams open now (for tests and the log). */
size_t srv_live_count(const srv_live *l);

/* End every stream left (the HTTP server's stop ends them all first, so
 * usually none), make the hook a no-op, and close the async handle and the
 * timer (the loop must run once more for their close callbacks). */
void srv_live_close(srv_live *l);

/* Free `l`: after srv_live_close, after the loop ran, and after lith_close
 * (the hook may run until then). NULL is allowed. */
void srv_live_free(srv_live *l);

#endif
