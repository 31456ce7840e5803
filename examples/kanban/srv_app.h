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
#include "http.h"
#include "lith.h"
#include "lith_uv.h"
#include "srv_live.h"

#define SRV_MAX_BODY (64u << 10) /* a card description is at most 10000 bytes */

typedef struct srv_app {
  uv_loop_t *loop;
  lith *db;
  lith_uv *bridge;         /* NULL once closing: nothing more is submitted */
  lith_http_server *http;
  srv_live *live;
  auth_gate *gate;         /* password hashes */
  auth_cache *sessions;
  uv_timer_t prune;        /* hourly housekeeping (expired sessions, old op ids) */
  int prune_open;
  int stopping;
} srv_app;

/* Register every route on app->http. LITH_HTTP_OK or the layer's error. */
int srv_routes_add(srv_app *app);

/* Start the hourly kb_prune timer (unreferenced: it never keeps the loop
 * alive). */
void srv_prune_start(srv_app *app);

#endif
