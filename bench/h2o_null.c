/*
 * bench/h2o_null — a bare h2o server answering bench/lithd's transfer POSTs
 * without doing anything: bench/lithd's arm h2o, the baseline of lithd's CPU
 * per request (issue 36: lithd's CPU per request against a bare h2o server
 * answering the same POSTs).
 *
 * Why: lithd's loop thread spends each request's CPU in h2o (the socket,
 * HTTP/1 parsing, the answer's head) and in lithd itself (its HTTP layer's
 * guard, logger and router, jansson, the bridge to the writer, the writer's
 * SQLite). This server is the first part alone, set up as lithd's HTTP layer
 * sets h2o up (http/http.c: libh2o on libuv, one host, a handler on "/",
 * h2o_uv_socket_create and h2o_accept per connection, TCP_NODELAY), so
 * lithd's CPU per request over this one's is what lithd adds to h2o.
 *
 *   usage: h2o_null [--listen HOST:PORT]   (default 127.0.0.1:0)
 *
 * One thread, one uv loop. POST /v1/do: h2o has read the whole body
 * (h2o 2.2 hands the handler req->entity, complete); the answer is 200 with
 * a fixed JSON body of the size and shape lithd gives the transfer (four
 * results, each changes 1), so the client reads the same bytes. Anything
 * else: 404 (h2o's). Prints "h2o_null: listening on http://HOST:PORT" on
 * stdout (bench/net.c's bench_server_start reads it) and nothing more
 * there; SIGTERM or SIGINT: exit 0 (the loop is left as it is: nothing to
 * flush, no database).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define H2O_USE_LIBUV 1 /* libh2o-dev is the libuv flavour */
#include <h2o.h>

/* lithd's answer to one transfer, byte for byte but for the ledger row's
 * last_insert_rowid, which grows over a run: here seven digits, a run's. */
static const char ANSWER[] =
    "{\"results\":[{\"changes\":1,\"last_insert_rowid\":0,\"columns\":[],\"rows\":[]},"
    "{\"changes\":1,\"last_insert_rowid\":0,\"columns\":[],\"rows\":[]},"
    "{\"changes\":1,\"last_insert_rowid\":1000000,\"columns\":[],\"rows\":[]},"
    "{\"changes\":1,\"last_insert_rowid\":0,\"columns\":[],\"rows\":[]}]}";

typedef union conn {
  uv_handle_t handle;
  uv_stream_t stream;
  uv_tcp_t tcp;
} conn;

static h2o_globalconf_t config;
static h2o_context_t ctx;
static h2o_accept_ctx_t accept_ctx;

static int on_req(h2o_handler_t *self, h2o_req_t *req) {
  (void)self;
  if (!h2o_memis(req->method.base, req->method.len, H2O_STRLIT("POST")) ||
      !h2o_memis(req->path_normalized.base, req->path_normalized.len, H2O_STRLIT("/v1/do")))
    return -1; /* h2o's 404 */
  req->res.status = 200;
  req->res.reason = "OK";
  h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, H2O_STRLIT("application/json"));
  req->res.content_length = sizeof ANSWER - 1;
  h2o_send_inline(req, ANSWER, sizeof ANSWER - 1);
  return 0;
}

static void on_conn_closed(uv_handle_t *h) { free(h); }

static void on_accept(uv_stream_t *ls, int status) {
  if (status != 0)
    return;
  conn *c = malloc(sizeof *c);
  if (!c || uv_tcp_init(ls->loop, &c->tcp) != 0) {
    free(c);
    return;
  }
  if (uv_accept(ls, &c->stream) != 0) {
    uv_close(&c->handle, on_conn_closed);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1); /* as lithd: small answers go out at once */
  h2o_accept(&accept_ctx, h2o_uv_socket_create(&c->stream, on_conn_closed));
}

static void on_signal(uv_signal_t *h, int signum) {
  (void)signum;
  uv_stop(h->loop);
}

static void usage(FILE *f) { fprintf(f, "usage: h2o_null [--listen HOST:PORT]   (default 127.0.0.1:0)\n"); }

int main(int argc, char **argv) {
  char host[256] = "127.0.0.1";
  int port = 0;
  for (int i = 1; i < argc; i++) {
    const char *colon = i + 1 < argc ? strrchr(argv[i + 1], ':') : NULL;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(argv[i], "--listen") && colon && (size_t)(colon - argv[i + 1]) < sizeof host) {
      memcpy(host, argv[i + 1], (size_t)(colon - argv[i + 1]));
      host[colon - argv[i + 1]] = '\0';
      port = atoi(colon + 1);
      i++;
    } else {
      fprintf(stderr, "h2o_null: bad argument %s\n", argv[i]);
      usage(stderr);
      return 2;
    }
  }
  signal(SIGPIPE, SIG_IGN);
  uv_loop_t *loop = uv_default_loop();

  h2o_config_init(&config);
  config.server_name = h2o_iovec_init(H2O_STRLIT("h2o"));
  h2o_hostconf_t *hostconf = h2o_config_register_host(&config, h2o_iovec_init(H2O_STRLIT("default")), 65535);
  h2o_pathconf_t *root = h2o_config_register_path(hostconf, "/", 0);
  h2o_create_handler(root, sizeof(h2o_handler_t))->on_req = on_req;
  h2o_context_init(&ctx, loop, &config);
  accept_ctx.ctx = &ctx;
  accept_ctx.hosts = config.hosts;

  struct sockaddr_in addr;
  struct sockaddr_storage bound;
  int len = sizeof bound, e;
  uv_tcp_t listener;
  if ((e = uv_ip4_addr(host, port, &addr)) != 0 || (e = uv_tcp_init(loop, &listener)) != 0 ||
      (e = uv_tcp_bind(&listener, (struct sockaddr *)&addr, 0)) != 0 ||
      (e = uv_listen((uv_stream_t *)&listener, SOMAXCONN, on_accept)) != 0 ||
      (e = uv_tcp_getsockname(&listener, (struct sockaddr *)&bound, &len)) != 0) {
    fprintf(stderr, "h2o_null: listen on %s:%d: %s\n", host, port, uv_strerror(e));
    return 1;
  }
  uv_signal_t sigterm, sigint;
  uv_signal_init(loop, &sigterm);
  uv_signal_init(loop, &sigint);
  uv_signal_start(&sigterm, on_signal, SIGTERM);
  uv_signal_start(&sigint, on_signal, SIGINT);
  printf("h2o_null: listening on http://%s:%d\n", host, ntohs(((struct sockaddr_in *)&bound)->sin_port));
  fflush(stdout);
  uv_run(loop, UV_RUN_DEFAULT);
  return 0;
}
