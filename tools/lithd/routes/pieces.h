/*
 * lithd pieces — a large answer sent in pieces from the loop.
 *
 * Handing h2o a 96 MB JSON body in one call copies it whole on the loop
 * (h2o_send_inline) and writes it from there: about half a second in
 * which no other request of any database is served (seen: /healthz took
 * 1.3-2.1 s while three such answers went out). Sent in pieces instead,
 * the loop copies 64 KiB at a time, only when the client's connection has
 * taken the previous piece, between the other requests.
 *
 * Threads: the loop thread.
 */
#ifndef LITHD_PIECES_H
#define LITHD_PIECES_H

#include <stddef.h>

#include <uv.h>

#include "http.h"

/* Answers at least this long go in pieces. */
#define LITHD_PIECES_MIN ((size_t)1 << 20)

/* Answer req with status and body[off..len) (JSON; body malloc'd: taken,
 * freed when sent or when the client left; what is before off is not
 * sent), and give `budget` bytes back to the answer budget then
 * (lithd_answer_budget_release; 0: none). Completes req in every case. */
void lithd_send_pieces(uv_loop_t *loop, lith_http_req *req, int status, char *body, size_t off, size_t len,
                       size_t budget);

/* What lithd_send_pieces_cut calls, once, if the client left before the
 * whole body was handed to the connection (tag: the caller's, copied). */
typedef void (*lithd_pieces_cut)(void *arg, const char *tag);

/* lithd_send_pieces, and cut(arg, tag) if the answer is cut short (from a
 * loop callback, or from this call; never once the last piece was
 * written). arg must outlive the loop's run. */
void lithd_send_pieces_cut(uv_loop_t *loop, lith_http_req *req, int status, char *body, size_t off,
                           size_t len, size_t budget, lithd_pieces_cut cut, void *arg, const char *tag);

#endif /* LITHD_PIECES_H */
