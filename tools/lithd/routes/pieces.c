/*
 * lithd pieces (see pieces.h). A uv_prepare handle, which runs before the
 * loop waits, writes the next piece when less than a piece is queued
 * behind the write in flight (as backup_http.c paces a download).
 */
#include "pieces.h"
#include "sqljson.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define PIECE ((size_t)64 << 10)

struct pieces {
  uv_prepare_t pace;
  lith_http_req *req;
  char *body;
  size_t len, sent;
  size_t budget;        /* of the answer budget, held until the body is freed */
  lithd_pieces_cut cut; /* NULL: none */
  void *cut_arg;
  char tag[64];
};

static void pace_closed(uv_handle_t *h) {
  struct pieces *p = h->data;
  free(p->body);
  lithd_answer_budget_release(p->budget);
  free(p);
}

static void finish(struct pieces *p) {
  if (p->sent < p->len && p->cut != NULL)
    p->cut(p->cut_arg, p->tag);
  lith_http_stream_end(p->req); /* released, whatever it returns (short: the client sees it cut) */
  uv_prepare_stop(&p->pace);
  uv_close((uv_handle_t *)&p->pace, pace_closed);
}

static void on_pace(uv_prepare_t *h) {
  struct pieces *p = h->data;
  if (lith_http_is_gone(p->req)) {
    finish(p);
    return;
  }
  while (p->sent < p->len && lith_http_stream_queued(p->req) < PIECE) {
    size_t n = p->len - p->sent < PIECE ? p->len - p->sent : PIECE;
    if (lith_http_stream_write(p->req, p->body + p->sent, n) != LITH_HTTP_OK) {
      finish(p);
      return;
    }
    p->sent += n;
    break; /* one piece per turn of the loop: the others' requests between */
  }
  if (p->sent >= p->len)
    finish(p);
}

void lithd_send_pieces(uv_loop_t *loop, lith_http_req *req, int status, char *body, size_t off, size_t len,
                       size_t budget) {
  lithd_send_pieces_cut(loop, req, status, body, off, len, budget, NULL, NULL, "");
}

void lithd_send_pieces_cut(uv_loop_t *loop, lith_http_req *req, int status, char *body, size_t off,
                           size_t len, size_t budget, lithd_pieces_cut cut, void *arg, const char *tag) {
  struct pieces *p = calloc(1, sizeof *p);
  if (p == NULL || uv_prepare_init(loop, &p->pace) != 0) {
    free(p);
    if (lith_http_respond(req, status, "application/json", body + off, len - off) == LITH_HTTP_GONE &&
        cut != NULL) /* whole, then */
      cut(arg, tag);
    free(body);
    lithd_answer_budget_release(budget);
    return;
  }
  p->budget = budget;
  p->req = req;
  p->body = body;
  p->len = len;
  p->sent = off;
  p->pace.data = p;
  p->cut = cut;
  p->cut_arg = arg;
  snprintf(p->tag, sizeof p->tag, "%s", tag);
  /* An answer has an end: a stop lets it finish within the grace, as a
   * whole answer would be (an answered write must reach its client). */
  lith_http_stream_at_stop(req, LITH_HTTP_STOP_FINISH);
  if (lith_http_stream_start_length(req, status, "application/json", (uint64_t)(len - off)) != LITH_HTTP_OK) {
    /* completes it, gone or not */
    if (lith_http_respond(req, status, "application/json", body + off, len - off) == LITH_HTTP_GONE &&
        cut != NULL)
      cut(arg, tag);
    uv_close((uv_handle_t *)&p->pace, pace_closed); /* frees body */
    return;
  }
  uv_prepare_start(&p->pace, on_pace);
}
