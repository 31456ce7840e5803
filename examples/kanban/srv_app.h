/*
 * srv_app — the kanban server's shared state and its routes.
 *
 * server.c owns startup and shutdown; srv_routes.c the requests. The state
 * is the loop's: every field is read and written on the loop thread only,
 * except `db` (thread-safe by lith's contract) and `live` (whose hook is
 * made for the writer thread).
 */
#ifndef KANBAN_SRV_APP_H
#define KANBAN_SRV_APP_H

#include <stdint.h>

#include <uv.h>

#include "auth_pw.h"
#include "auth_session.h"
#include "auth_throttle.h"
#include "http.h"
#include "lith.h"
#include "lith_uv.h"
#include "srv_live.h"

#define SRV_MAX_BODY (64u << 10) /* a card description is at most 10000 bytes */

struct job; /* srv_routes.c */

typedef struct srv_app {
  uv_loop_t *loop;
  lith *db;
  lith_uv *bridge; /* NULL once closing: nothing more is submitted */
  lith_http_server *http;
  srv_live *live;
  auth_gate *gate; /* password hashes */
  auth_cache *sessions;
  auth_throttle *throttle; /* failed sign-ins, by name and by address */
  uv_timer_t prune;        /* hourly housekeeping (expired sessions, old op ids) */
  /* Commands parsed but not yet submitted (srv_routes.c, submit): they go
   * to the writer 16 at a time or at the end of the loop iteration. */
  struct job *pend_head, *pend_tail;
  unsigned pend_n;
  uv_check_t pend_check;
  int pend_open;
  int prune_open;
  int stopping;
} srv_app;

/* Register every route on app->http. LITH_HTTP_OK or the layer's error. */
int srv_routes_add(srv_app *app);

/* Submit what waits (see pend_head) and close the check handle; before the
 * bridge closes. Safe to call twice, and when srv_routes_add never ran. */
void srv_routes_close(srv_app *app);

/* Start the hourly kb_prune timer (unreferenced: it never keeps the loop
 * alive). */
void srv_prune_start(srv_app *app);

#endif
