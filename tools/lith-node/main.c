/*
 * lith-node: one dqlite node (libdqlite's dqlite_node_* API), for lithd's
 * dqlite mode and its tests.
 *
 *   lith-node --id N --address HOST:PORT --dir DIR [--join ADDR[,ADDR...]]
 *             [--latency-ms MS] [--wait-ms MS] [--max-run-ms MS]
 *             [--max-value-bytes N] [--max-like-pattern N] [--max-program-ops N]
 *             [--snapshot-threshold N] [--snapshot-trailing N]
 *   lith-node --status ADDR[,ADDR...] [--json]
 *   lith-node --help
 *
 * Node 1 bootstraps a cluster of itself when DIR holds no Raft state
 * (libdqlite does that for id 1). Any other node starts empty and, given
 * --join, asks the cluster's leader (found through the listed nodes with
 * the client of dqlite/client.h) to ADD it and ASSIGN it the voter role;
 * a node restarted with its DIR is already a member and does neither.
 * --latency-ms sets the network latency Raft's timeouts derive from
 * (election 15x, heartbeat 1.5x); tests use a small one.
 *
 * Statements are bounded on the node itself: libdqlite 1.11 runs every
 * statement on its one loop thread, so a long one stops the node from
 * answering anything else, Raft's heartbeats included (a long recursive CTE
 * moved leadership and held a concurrent write 12.6 s, issue 20). Before
 * dqlite_node_create, sqlite3_auto_extension() registers guard_init, which
 * SQLite runs in every sqlite3_open_v2 of this process, so on every
 * connection libdqlite opens (leader and follower, before its own PRAGMAs;
 * lith-node and libdqlite share the system libsqlite3, `ldd` shows one).
 * It sets, before any statement:
 *   - a progress handler (every 1000 VM steps) that interrupts a statement
 *     running longer than --max-run-ms (default 5000; 0: none): the client
 *     gets FAILURE SQLITE_INTERRUPT "interrupted". A statement's start is
 *     seen with sqlite3_trace_v2: SQLITE_TRACE_STMT fires at its first
 *     step (OP_Init; again for each trigger program, with the same
 *     statement, which keeps the start) and SQLITE_TRACE_PROFILE when it
 *     ends (DONE, an error, a reset or its finalize), which clears it; with
 *     libdqlite 1.11.1 a query's parts are stepped after each write, so its
 *     time counts from its first row to its last. libdqlite sets neither
 *     hook itself. A step that never reaches the progress handler (a big
 *     sort, count(*) of a table, one slow function call) is not cut
 *     midway.
 *   - lith_max_run_ms(MS), a SQL function: lowers that connection's bound
 *     to MS (never raises it) and returns the bound in force. lithd
 *     --dqlite calls it on each connection it opens, so its own
 *     --max-run-ms cuts statements on the node as it would locally, and
 *     it learns how long an answer may take; lithd's clients cannot call
 *     it (lithd vets their SQL on a connection without it).
 *   - SQLite's limits: SQLITE_LIMIT_LENGTH --max-value-bytes (default
 *     1048576: the largest string or blob a statement makes or reads),
 *     SQLITE_LIMIT_LIKE_PATTERN_LENGTH --max-like-pattern (50),
 *     SQLITE_LIMIT_VDBE_OP --max-program-ops (250000) and
 *     SQLITE_LIMIT_ATTACHED 0 (no ATTACH): lithd's own defaults. libdqlite's
 *     setup statements (PRAGMA page_size, synchronous, journal_mode,
 *     wal_autocheckpoint, foreign_keys) run under them (tested).
 * Keep --max-run-ms below Raft's election timeout (15 x --latency-ms; 3000
 * ms with libdqlite's default latency) or a statement that long still
 * moves leadership, and below the writer's request timeout (dqlite/writer.h).
 * Every node of a cluster should get the same options: any may lead.
 *
 * Raft's log: a node snapshots its databases every --snapshot-threshold
 * transactions and keeps the last --snapshot-trailing beside the snapshot
 * (so a follower that fell behind by fewer catches up from the log, not a
 * whole snapshot), each in memory and in DIR. So a node holds about
 * (threshold + trailing) x a transaction's size, however small the
 * database: libdqlite's 1024 + 8192 kept 206 MB of DIR and of RSS for 20 kB
 * transactions on a 20 kB database, and would keep 18 GB for a --restore's
 * 2 MiB transactions. lith-node's defaults, 1024 + 1024, hold a fifth.
 *
 * When it serves, it prints one line to stdout,
 *   lith-node: id N serving on ADDR (leader LADDR)
 * once the node knows a leader (LADDR "none" if --wait-ms passed first).
 * After it, a line each time the node becomes or stops being the leader
 * (libdqlite 1.11 tells no such event: the main thread asks its own node,
 * LEADER on one loopback connection, every LEAD_POLL_MS between signals):
 *   lith-node: id N leads
 *   lith-node: id N no longer leads (leader LADDR)
 * SIGTERM or SIGINT stops it: dqlite_node_stop, dqlite_node_destroy, exit
 * 0. Errors go to stderr, exit 1.
 *
 * --status (issue 34) asks running nodes instead of starting one: each
 * listed node for the leader it knows (LEADER) and one of them for the
 * members (CLUSTER, the leader's when it answers), and prints, as lines
 *   node ADDR: id N, ROLE, leader|follower|knows no leader
 *                                               (or: node ADDR: no answer (WHY))
 *   leader: LADDR (id N)                        (or: leader: none)
 *   member: id N ADDR ROLE                      (ROLE voter, standby, spare)
 * or as one JSON object (--json; status_json says its fields). A node's
 * id is the member whose address is the one asked. The leader: a node
 * that names itself; else the one most of the answers name, unless it
 * was asked too and did not name itself (a follower's word lags an
 * election: a leader just killed is still named). Exit status 0 when a
 * node answered and a leader is known, 2 when nodes answered but none
 * knows a leader (an election, or no majority), 1 when no node answered
 * (each is given STATUS_TIMEOUT_MS) or the arguments are wrong. What the
 * nodes send is printed only after escaping (JSON) or with any byte that
 * is not printable ASCII as '?'.
 *
 * The signals are blocked before dqlite_node_start so that libdqlite's
 * thread inherits the mask and the main thread alone takes them, in
 * sigtimedwait: no handler, nothing async-signal-unsafe. SIGPIPE is ignored:
 * libdqlite writes to Raft peers that may have died, and the default
 * action would kill the node (seen: a follower's SIGTERM killed the other
 * two with SIGPIPE).
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <dqlite.h>
#include <sqlite3.h>

#include "../../lib/clock.h"
#include "client.h"

/* --status: each node's answers within this; the main loop's question to
 * its own node, every this often. */
#define STATUS_TIMEOUT_MS 2000
#define LEAD_POLL_MS 250

typedef struct opts {
  unsigned long long id;
  const char *address, *dir, *join;
  const char *status; /* --status ADDR[,ADDR...] */
  int json;           /* --json */
  unsigned latency_ms;
  int wait_ms;
  int max_run_ms, max_value_bytes, max_like_pattern, max_program_ops;
  int snapshot_threshold, snapshot_trailing;
} opts;

static const char usage_text[] =
    "usage: lith-node --id N --address HOST:PORT --dir DIR [--join ADDR[,ADDR...]]\n"
    "                 [--latency-ms MS] [--wait-ms MS] [--max-run-ms MS]\n"
    "                 [--max-value-bytes N] [--max-like-pattern N] [--max-program-ops N]\n"
    "                 [--snapshot-threshold N] [--snapshot-trailing N]\n"
    "       lith-node --status ADDR[,ADDR...] [--json]\n"
    "       lith-node --help\n";

static const char help_text[] =
    "\n"
    "Runs one dqlite node for lithd --dqlite; prints \"lith-node: id N serving on ADDR (leader\n"
    "LADDR)\" once it serves, then \"lith-node: id N leads\" or \"lith-node: id N no longer\n"
    "leads (leader LADDR)\" when its role changes. SIGTERM or SIGINT stops it.\n"
    "\n"
    "  --id N                 this node's id (1 bootstraps a new cluster)\n"
    "  --address HOST:PORT    where it listens, as the other nodes reach it\n"
    "  --dir DIR              its Raft log and snapshots\n"
    "  --join ADDR[,ADDR...]  nodes of the cluster to join through (a new node)\n"
    "  --latency-ms MS        the network's latency: Raft's timeouts (election 15x)\n"
    "  --wait-ms MS           how long to wait for a leader before serving (30000)\n"
    "  --max-run-ms MS        a statement is interrupted past it (5000; 0: none)\n"
    "  --max-value-bytes N    the largest string or blob (1048576)\n"
    "  --max-like-pattern N   the longest LIKE pattern (50)\n"
    "  --max-program-ops N    the largest statement program (250000)\n"
    "  --snapshot-threshold N a snapshot every N transactions (1024)\n"
    "  --snapshot-trailing N  transactions of Raft log kept past a snapshot (1024); a\n"
    "                         node holds (threshold + trailing) x a transaction's size\n"
    "                         in memory and in DIR\n"
    "\n"
    "  --status ADDR[,ADDR...]  ask running nodes who leads: for each, its id and role,\n"
    "                         then the leader and the members with their roles:\n"
    "                           node ADDR: id N, voter, leader|follower|knows no leader\n"
    "                           node ADDR: no answer (WHY)\n"
    "                           leader: ADDR (id N)   or   leader: none\n"
    "                           member: id N ADDR voter|standby|spare\n"
    "  --json                 with --status: one JSON object instead\n"
    "                         {\"nodes\":[{\"address\",\"answered\",\"id\",\"role\",\"leader\",\"error\"}],\n"
    "                          "
    "\"leader\":{\"address\",\"id\"}|null,\"members\":[{\"id\",\"address\",\"role\"}]}\n"
    "                         exit 0: a leader is known; 2: nodes answered, none knows a\n"
    "                         leader; 1: no node answered (2 s each)\n";

static void usage(void) {
  fputs(usage_text, stderr);
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

/* A number up to INT_MAX (min: the least allowed). */
static int int_opt(const char *opt, const char *s, int min) {
  unsigned long long v = number(opt, s);
  if (v > 2147483647ULL || (long long)v < min) {
    fprintf(stderr, "lith-node: %s: out of range: %s\n", opt, s);
    exit(1);
  }
  return (int)v;
}

static void parse(int argc, char **argv, opts *o) {
  memset(o, 0, sizeof *o);
  o->wait_ms = 30000;
  o->max_run_ms = 5000;
  o->max_value_bytes = 1 << 20;
  o->max_like_pattern = 50;
  o->max_program_ops = 250000;
  o->snapshot_threshold = 1024;
  o->snapshot_trailing = 1024;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0) {
      printf("%s%s", usage_text, help_text);
      exit(0);
    }
    if (strcmp(a, "--json") == 0) {
      o->json = 1;
      continue;
    }
    if (i + 1 >= argc)
      usage();
    const char *v = argv[++i];
    if (strcmp(a, "--status") == 0)
      o->status = v;
    else if (strcmp(a, "--id") == 0)
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
      o->wait_ms = int_opt(a, v, 0);
    else if (strcmp(a, "--max-run-ms") == 0)
      o->max_run_ms = int_opt(a, v, 0);
    else if (strcmp(a, "--max-value-bytes") == 0)
      o->max_value_bytes = int_opt(a, v, 1);
    else if (strcmp(a, "--max-like-pattern") == 0)
      o->max_like_pattern = int_opt(a, v, 1);
    else if (strcmp(a, "--max-program-ops") == 0)
      o->max_program_ops = int_opt(a, v, 1);
    else if (strcmp(a, "--snapshot-threshold") == 0)
      o->snapshot_threshold = int_opt(a, v, 1);
    else if (strcmp(a, "--snapshot-trailing") == 0)
      o->snapshot_trailing = int_opt(a, v, 1);
    else
      usage();
  }
  if (o->status != NULL ? o->id != 0 || o->address != NULL || o->dir != NULL || o->join != NULL
                        : o->json || o->id == 0 || o->address == NULL || o->dir == NULL)
    usage();
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

static int64_t now_ms(void) { return lith__now_ns() / 1000000; }

/* ---- The statement guard (see the top) ---- */

static opts g_opts; /* set before the first connection, read-only after */

typedef struct guard {
  sqlite3_stmt *stmt; /* the statement running, NULL between statements */
  int64_t start_ms;   /* when it began */
  int limit_ms;       /* this connection's bound: --max-run-ms, or lower (lith_max_run_ms); 0: none */
} guard;

static int guard_trace(unsigned type, void *ctx, void *p, void *x) {
  guard *g = ctx;
  (void)x;
  if (type == SQLITE_TRACE_STMT && g->stmt != p) {
    g->stmt = p; /* its first step (a trigger program of it keeps the start) */
    g->start_ms = now_ms();
  } else if (type == SQLITE_TRACE_PROFILE && g->stmt == p) {
    g->stmt = NULL; /* it ended */
  } else if (type == SQLITE_TRACE_CLOSE) {
    free(g);
  }
  return 0;
}

static int guard_progress(void *ctx) {
  const guard *g = ctx;
  return g->stmt != NULL && g->limit_ms > 0 && now_ms() - g->start_ms >= g->limit_ms;
}

/* lith_max_run_ms(MS): this connection's statements are cut at MS if that
 * is below the node's --max-run-ms (never above: a client can only lower
 * its own bound); MS <= 0 or NULL changes nothing. Returns the bound in
 * force (0: none). lithd --dqlite calls it on each connection it opens, so
 * its --max-run-ms holds on the node, and learns what to wait for. */
static void guard_max_run(sqlite3_context *cx, int argc, sqlite3_value **argv) {
  guard *g = sqlite3_user_data(cx);
  (void)argc;
  sqlite3_int64 ms = sqlite3_value_int64(argv[0]);
  if (sqlite3_value_type(argv[0]) == SQLITE_INTEGER && ms > 0 && ms <= 2147483647 &&
      (g->limit_ms == 0 || ms < g->limit_ms))
    g->limit_ms = (int)ms;
  sqlite3_result_int(cx, g->limit_ms);
}

/* sqlite3_auto_extension's entry: every connection of the process. */
static int guard_init(sqlite3 *db, char **err, const sqlite3_api_routines *api) {
  (void)api;
  sqlite3_limit(db, SQLITE_LIMIT_LENGTH, g_opts.max_value_bytes);
  sqlite3_limit(db, SQLITE_LIMIT_LIKE_PATTERN_LENGTH, g_opts.max_like_pattern);
  sqlite3_limit(db, SQLITE_LIMIT_VDBE_OP, g_opts.max_program_ops);
  sqlite3_limit(db, SQLITE_LIMIT_ATTACHED, 0);
  guard *g = calloc(1, sizeof *g); /* installed even at --max-run-ms 0: lith_max_run_ms may set one */
  if (g == NULL) {
    *err = sqlite3_mprintf("lith-node: out of memory for the statement guard");
    return SQLITE_NOMEM;
  }
  g->limit_ms = g_opts.max_run_ms;
  if (sqlite3_trace_v2(db, SQLITE_TRACE_STMT | SQLITE_TRACE_PROFILE | SQLITE_TRACE_CLOSE, guard_trace, g) !=
      SQLITE_OK) {
    free(g);
    *err = sqlite3_mprintf("lith-node: sqlite3_trace_v2 refused");
    return SQLITE_ERROR;
  }
  sqlite3_progress_handler(db, 1000, guard_progress, g);
  /* g is freed at SQLITE_TRACE_CLOSE, after the function is gone */
  if (sqlite3_create_function_v2(db, "lith_max_run_ms", 1, SQLITE_UTF8 | SQLITE_DIRECTONLY, g, guard_max_run,
                                 NULL, NULL, NULL) != SQLITE_OK) {
    *err = sqlite3_mprintf("lith-node: cannot define lith_max_run_ms");
    return SQLITE_ERROR;
  }
  return SQLITE_OK;
}

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

/* ---- --status (see the top) ---- */

/* What one node said. */
typedef struct node_seen {
  char address[256]; /* as listed */
  int answered;
  char leader[256]; /* the leader it knows, "" none */
  uint64_t leader_id;
  char error[256];
} node_seen;

static const char *role_name(uint64_t role) {
  return role == LITH_DQ_VOTER     ? "voter"
         : role == LITH_DQ_STANDBY ? "standby"
         : role == LITH_DQ_SPARE   ? "spare"
                                   : "unknown";
}

/* s with every byte that is not printable ASCII as '?': a node's words on a
 * terminal. Into buf (n > 0). */
static const char *printable(const char *s, char *buf, size_t n) {
  size_t i;
  for (i = 0; i < n - 1 && s[i] != '\0'; i++)
    buf[i] = s[i] >= ' ' && s[i] < 127 ? s[i] : '?';
  buf[i] = '\0';
  return buf;
}

/* s as a JSON string. */
static void json_string(const char *s) {
  putchar('"');
  for (; *s != '\0'; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      printf("\\%c", ch);
    else if (ch < 0x20 || ch >= 0x7f)
      printf("\\u%04x", ch); /* a byte, not a character: nodes' addresses are ASCII */
    else
      putchar(ch);
  }
  putchar('"');
}

/* The member whose address is addr, or NULL. */
static const lith__dq_server *member_at(const lith__dq_servers *m, const char *addr) {
  for (size_t i = 0; i < m->n; i++)
    if (m->v[i].address != NULL && strcmp(m->v[i].address, addr) == 0)
      return &m->v[i];
  return NULL;
}

static void status_lines(const node_seen *seen, size_t n, const char *leader, uint64_t leader_id,
                         const lith__dq_servers *m) {
  char a[256], b[256];
  for (size_t i = 0; i < n; i++) {
    const lith__dq_server *me = member_at(m, seen[i].address);
    if (!seen[i].answered)
      printf("node %s: no answer (%s)\n", printable(seen[i].address, a, sizeof a),
             printable(seen[i].error, b, sizeof b));
    else if (me == NULL)
      printf("node %s: not a member as asked (the members name it otherwise)\n",
             printable(seen[i].address, a, sizeof a));
    else
      printf("node %s: id %" PRIu64 ", %s, %s\n", printable(seen[i].address, a, sizeof a), me->id,
             role_name(me->role),
             strcmp(seen[i].address, leader) == 0 ? "leader"
             : seen[i].leader[0] != '\0'          ? "follower"
                                                  : "knows no leader");
  }
  if (leader[0] != '\0')
    printf("leader: %s (id %" PRIu64 ")\n", printable(leader, a, sizeof a), leader_id);
  else
    printf("leader: none\n");
  for (size_t i = 0; i < m->n; i++)
    printf("member: id %" PRIu64 " %s %s\n", m->v[i].id,
           printable(m->v[i].address ? m->v[i].address : "", a, sizeof a), role_name(m->v[i].role));
}

/* {"nodes":[{"address","answered","id","role","leader","error"}...],
 *  "leader":{"address","id"}|null,"members":[{"id","address","role"}...]}
 * A node's id, role and leader (true/false) only when it answered and is
 * a member; its error only when it did not answer. */
static void status_json(const node_seen *seen, size_t n, const char *leader, uint64_t leader_id,
                        const lith__dq_servers *m) {
  printf("{\"nodes\":[");
  for (size_t i = 0; i < n; i++) {
    const lith__dq_server *me = member_at(m, seen[i].address);
    printf("%s{\"address\":", i > 0 ? "," : "");
    json_string(seen[i].address);
    printf(",\"answered\":%s", seen[i].answered ? "true" : "false");
    if (seen[i].answered && me != NULL)
      printf(",\"id\":%" PRIu64 ",\"role\":\"%s\",\"leader\":%s", me->id, role_name(me->role),
             strcmp(seen[i].address, leader) == 0 ? "true" : "false");
    if (!seen[i].answered) {
      printf(",\"error\":");
      json_string(seen[i].error);
    }
    putchar('}');
  }
  printf("],\"leader\":");
  if (leader[0] != '\0') {
    printf("{\"address\":");
    json_string(leader);
    printf(",\"id\":%" PRIu64 "}", leader_id);
  } else {
    printf("null");
  }
  printf(",\"members\":[");
  for (size_t i = 0; i < m->n; i++) {
    printf("%s{\"id\":%" PRIu64 ",\"address\":", i > 0 ? "," : "", m->v[i].id);
    json_string(m->v[i].address ? m->v[i].address : "");
    printf(",\"role\":\"%s\"}", role_name(m->v[i].role));
  }
  printf("]}\n");
}

/* Ask each node of o->status; print; the exit status (the top). */
static int status_main(const opts *o) {
  enum { MAX_NODES = 64 };
  static node_seen seen[MAX_NODES];
  char list[4096], leader[256] = "";
  uint64_t leader_id = 0;
  size_t n = 0;
  int answered = 0;
  lith__dq_servers m = {0, NULL};
  lith__dq_conn *c = lith__dq_new(STATUS_TIMEOUT_MS);
  if (c == NULL) {
    fprintf(stderr, "lith-node: out of memory\n");
    return 1;
  }
  if (snprintf(list, sizeof list, "%s", o->status) >= (int)sizeof list) {
    fprintf(stderr, "lith-node: --status: the address list is too long\n");
    lith__dq_close(c);
    return 1;
  }
  char *save = NULL;
  char *a;
  for (a = strtok_r(list, ",", &save); a != NULL && n < MAX_NODES; a = strtok_r(NULL, ",", &save)) {
    node_seen *s = &seen[n++];
    uint64_t id = 0;
    const char *addr = "";
    snprintf(s->address, sizeof s->address, "%s", a);
    int rc = lith__dq_connect(c, a);
    if (rc == LITH_DQ_OK)
      rc = lith__dq_leader(c, &id, &addr);
    if (rc != LITH_DQ_OK) {
      snprintf(s->error, sizeof s->error, "%s", lith__dq_errmsg(c));
      continue;
    }
    s->answered = 1;
    answered++;
    snprintf(s->leader, sizeof s->leader, "%s", addr);
    s->leader_id = id;
    /* The members: the first node's answer, replaced by the leader's own
     * when the leader is among those asked. */
    if (m.v == NULL || (addr[0] != '\0' && strcmp(addr, a) == 0)) {
      lith__dq_servers got;
      if (lith__dq_cluster(c, &got) == LITH_DQ_OK) {
        free(m.v);
        m = got;
      }
    }
  }
  lith__dq_close(c);
  if (a != NULL) /* one left unasked */
    fprintf(stderr, "lith-node: --status: only the first %d addresses were asked\n", MAX_NODES);
  /* The leader: the one a node names itself, else the one most of those
   * that answered name (a follower's word may lag an election). */
  for (size_t i = 0; i < n; i++)
    if (seen[i].answered && seen[i].leader[0] != '\0' && strcmp(seen[i].leader, seen[i].address) == 0) {
      snprintf(leader, sizeof leader, "%s", seen[i].leader);
      leader_id = seen[i].leader_id;
    }
  for (size_t i = 0, best = 0; leader[0] == '\0' && i < n; i++) {
    size_t k = 0, asked = 0;
    for (size_t j = 0; j < n; j++) {
      k += seen[i].leader[0] != '\0' && strcmp(seen[j].leader, seen[i].leader) == 0;
      asked += strcmp(seen[j].address, seen[i].leader) == 0; /* ...and it did not name itself */
    }
    if (k > best && !asked) {
      best = k;
      snprintf(leader, sizeof leader, "%s", seen[i].leader);
      leader_id = seen[i].leader_id;
    }
  }
  if (o->json)
    status_json(seen, n, leader, leader_id, &m);
  else
    status_lines(seen, n, leader, leader_id, &m);
  free(m.v);
  return answered == 0 ? 1 : leader[0] == '\0' ? 2 : 0;
}

/* ---- Who leads, told as it changes (see the top) ---- */

/* Whether this node leads now: 1, 0, or -1 when it cannot tell (the
 * connection is made again next time). *leader: the one it names. */
static int leads_now(lith__dq_conn *c, const opts *o, char *leader, size_t n) {
  uint64_t id;
  const char *addr;
  if ((!lith__dq_connected(c) && lith__dq_connect(c, o->address) != LITH_DQ_OK) ||
      lith__dq_leader(c, &id, &addr) != LITH_DQ_OK) {
    lith__dq_disconnect(c);
    return -1;
  }
  snprintf(leader, n, "%s", addr[0] != '\0' ? addr : "none");
  return strcmp(addr, o->address) == 0;
}

/* Until SIGTERM or SIGINT: a line when this node becomes or stops being
 * the leader. led: whether it led at the serving line. */
static void serve(const opts *o, const sigset_t *set, int led) {
  lith__dq_conn *c = lith__dq_new(1000);
  struct timespec tick = {LEAD_POLL_MS / 1000, (long)(LEAD_POLL_MS % 1000) * 1000000};
  char leader[256], shown[256];
  for (;;) {
    int sig = c != NULL ? sigtimedwait(set, NULL, &tick) : sigwaitinfo(set, NULL);
    if (sig == SIGTERM || sig == SIGINT)
      break;
    if (sig >= 0 || errno != EAGAIN)
      continue;
    int now = leads_now(c, o, leader, sizeof leader);
    if (now < 0 || now == led)
      continue;
    led = now;
    if (led)
      printf("lith-node: id %llu leads\n", o->id);
    else
      printf("lith-node: id %llu no longer leads (leader %s)\n", o->id,
             printable(leader, shown, sizeof shown));
    fflush(stdout);
  }
  lith__dq_close(c);
}

int main(int argc, char **argv) {
  opts o;
  dqlite_node *node = NULL;
  sigset_t set;
  int status = 1;
  char leader[256];
  parse(argc, argv, &o);
  if (o.status != NULL)
    return status_main(&o);
  g_opts = o;
  /* Before libdqlite opens any connection: every one gets the guard. */
  if (sqlite3_auto_extension((void (*)(void))guard_init) != SQLITE_OK) {
    fprintf(stderr, "lith-node: sqlite3_auto_extension failed\n");
    return 1;
  }

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
  if ((rv = dqlite_node_set_snapshot_params(node, (unsigned)o.snapshot_threshold,
                                            (unsigned)o.snapshot_trailing)) != 0) {
    fprintf(stderr, "lith-node: --snapshot-threshold %d --snapshot-trailing %d refused (%d)\n",
            o.snapshot_threshold, o.snapshot_trailing, rv);
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

  serve(&o, &set, strcmp(leader, o.address) == 0);
  status = 0;

out_stop:
  dqlite_node_stop(node);
out_destroy:
  dqlite_node_destroy(node);
  return status;
}
