/*
 * lith-node: one dqlite node (libdqlite's dqlite_node_* API), for lithd's
 * dqlite mode and its tests.
 *
 *   lith-node --id N --address HOST:PORT --dir DIR [--join ADDR[,ADDR...]]
 *             [--latency-ms MS] [--wait-ms MS]
 *
 * Node 1 bootstraps a cluster of itself when DIR holds no Raft state
 * (libdqlite does that for id 1). Any other node starts empty and, given
 * --join, asks the cluster's leader (found through the listed nodes with
 * the client of dqlite/client.h) to ADD it and ASSIGN it the voter role;
 * a node restarted with its DIR is already a member and does neither.
 * --latency-ms sets the network latency Raft's timeouts derive from
 * (election 15x, heartbeat 1.5x); tests use a small one.
 *
 * When it serves, it prints one line to stdout,
 *   lith-node: id N serving on ADDR (leader LADDR)
 * once the node knows a leader (LADDR "none" if --wait-ms passed first).
 * SIGTERM or SIGINT stops it: dqlite_node_stop, dqlite_node_destroy, exit
 * 0. Errors go to stderr, exit 1.
 *
 * The signals are blocked before dqlite_node_start so that libdqlite's
 * thread inherits the mask and the main thread alone takes them, in
 * sigwait: no handler, nothing async-signal-unsafe. SIGPIPE is ignored:
 * libdqlite writes to Raft peers that may have died, and the default
 * action would kill the node (seen: a follower's SIGTERM killed the other
 * two with SIGPIPE).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <dqlite.h>

#include "../../lib/clock.h"
#include "client.h"

typedef struct opts {
  unsigned long long id;
  const char *address, *dir, *join;
  unsigned latency_ms;
  int wait_ms;
} opts;

static void usage(void) {
  fprintf(stderr, "usage: lith-node --id N --address HOST:PORT --dir DIR [--join ADDR[,ADDR...]]\n"
                  "                 [--latency-ms MS] [--wait-ms MS]\n");
  exit(1);
}

static unsigned long long number(const char *opt, const char *s) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || s[0] == '-') {
    fprintf(stderr, "lith-node: %s: not a number: %s\n", opt, s);
    exit(1);
  }
  return v;
}

static void parse(int argc, char **argv, opts *o) {
  memset(o, 0, sizeof *o);
  o->wait_ms = 30000;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (i + 1 >= argc)
      usage();
    const char *v = argv[++i];
    if (strcmp(a, "--id") == 0)
      o->id = number(a, v);
    else if (strcmp(a, "--address") == 0)
      o->address = v;
    else if (strcmp(a, "--dir") == 0)
      o->dir = v;
    else if (strcmp(a, "--join") == 0)
      o->join = v;
    else if (strcmp(a, "--latency-ms") == 0)
      o->latency_ms = (unsigned)number(a, v);
    else if (strcmp(a, "--wait-ms") == 0)
      o->wait_ms = (int)number(a, v);
    else
      usage();
  }
  if (o->id == 0 || o->address == NULL || o->dir == NULL)
    usage();
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

static int64_t now_ms(void) { return lith__now_ns() / 1000000; }

/* One attempt at joining through the leader: a member already (a restart)
 * does nothing; else ADD (as a spare), then ASSIGN voter. */
static int join_once(lith__dq_conn *c, const opts *o) {
  lith__dq_servers s;
  int rc = lith__dq_connect_leader(c, o->join, 2000);
  if (rc != LITH_DQ_OK)
    return rc;
  if ((rc = lith__dq_cluster(c, &s)) != LITH_DQ_OK)
    return rc;
  int member = 0, voter = 0;
  for (size_t i = 0; i < s.n; i++) {
    if (s.v[i].id == o->id) {
      member = 1;
      voter = s.v[i].role == LITH_DQ_VOTER;
    }
  }
  free(s.v);
  if (!member && (rc = lith__dq_add(c, o->id, o->address)) != LITH_DQ_OK)
    return rc;
  if (!voter && (rc = lith__dq_assign(c, o->id, LITH_DQ_VOTER)) != LITH_DQ_OK)
    return rc;
  return LITH_DQ_OK;
}

/* Join, retrying until the deadline: the leader may not be elected yet,
 * or busy with another node's configuration change. */
static int join(const opts *o, int64_t deadline) {
  lith__dq_conn *c = lith__dq_new(2000);
  int rc = LITH_DQ_NOMEM;
  if (c == NULL)
    return 1;
  while ((rc = join_once(c, o)) != LITH_DQ_OK && now_ms() < deadline)
    sleep_ms(100);
  if (rc != LITH_DQ_OK)
    fprintf(stderr, "lith-node: joining through %s: %s: %s\n", o->join, lith__dq_rc_str(rc),
            lith__dq_errmsg(c));
  lith__dq_close(c);
  return rc == LITH_DQ_OK ? 0 : 1;
}

/* Ask this node who leads until it knows, or the deadline passes. */
static void wait_leader(const opts *o, int64_t deadline, char *leader, size_t n) {
  lith__dq_conn *c = lith__dq_new(1000);
  snprintf(leader, n, "none");
  while (c != NULL) {
    uint64_t id;
    const char *addr;
    if ((lith__dq_connected(c) || lith__dq_connect(c, o->address) == LITH_DQ_OK) &&
        lith__dq_leader(c, &id, &addr) == LITH_DQ_OK && addr[0] != '\0') {
      snprintf(leader, n, "%s", addr);
      break;
    }
    if (now_ms() >= deadline)
      break;
    sleep_ms(20);
  }
  lith__dq_close(c);
}

int main(int argc, char **argv) {
  opts o;
  dqlite_node *node = NULL;
  sigset_t set;
  int sig, status = 1;
  char leader[256];
  parse(argc, argv, &o);

  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigprocmask(SIG_BLOCK, &set, NULL);
  /* libdqlite (libuv) writes to peers that may have gone: without this a
   * follower's exit kills the leader with SIGPIPE. */
  signal(SIGPIPE, SIG_IGN);

  if (mkdir(o.dir, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "lith-node: %s: %s\n", o.dir, strerror(errno));
    return 1;
  }
  int rv = dqlite_node_create(o.id, o.address, o.dir, &node);
  if (rv != 0) {
    /* libdqlite may leave a half-made node: only its message is used. */
    fprintf(stderr, "lith-node: dqlite_node_create: %s\n", node ? dqlite_node_errmsg(node) : "failed");
    return 1;
  }
  if ((rv = dqlite_node_set_bind_address(node, o.address)) != 0) {
    fprintf(stderr, "lith-node: bind %s: %s\n", o.address, dqlite_node_errmsg(node));
    goto out_destroy;
  }
  if (o.latency_ms > 0 && (rv = dqlite_node_set_network_latency_ms(node, o.latency_ms)) != 0) {
    fprintf(stderr, "lith-node: --latency-ms %u refused (%d)\n", o.latency_ms, rv);
    goto out_destroy;
  }
  if ((rv = dqlite_node_start(node)) != 0) {
    fprintf(stderr, "lith-node: dqlite_node_start: %s\n", dqlite_node_errmsg(node));
    goto out_destroy;
  }

  int64_t deadline = now_ms() + o.wait_ms;
  if (o.join != NULL && join(&o, deadline) != 0)
    goto out_stop;
  wait_leader(&o, deadline, leader, sizeof leader);
  printf("lith-node: id %llu serving on %s (leader %s)\n", o.id, o.address, leader);
  fflush(stdout);

  while (sigwait(&set, &sig) != 0)
    ;
  status = 0;

out_stop:
  dqlite_node_stop(node);
out_destroy:
  dqlite_node_destroy(node);
  return status;
}
