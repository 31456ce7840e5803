/*
 * The batching writer onto a dqlite cluster: see writer.h for what it
 * promises. How it keeps those promises:
 *
 * One thread, one connection, one batch at a time. Producers append to a
 * mutex-guarded list; the writer takes up to max_batch and runs them. A
 * network round trip costs far more than the lock, so nothing cleverer.
 *
 * Control statements (BEGIN, the batch row, SAVEPOINT, RELEASE, ROLLBACK
 * TO, COMMIT) are not sent on their own: they accumulate in `ctl` and go
 * out with the next statement's request (flushed just before it) or at the
 * end with COMMIT. EXEC_SQL runs a text's statements in order and stops at
 * the first failure, which is what the batch wants.
 *
 * Every attempt at a batch ends one of five ways (enum attempt):
 *   COMMITTED  COMMIT answered OK: answer everyone with this run's results;
 *   BROKEN     the connection or leadership was lost before COMMIT was sent
 *              (or BEGIN was refused, e.g. the old connection's transaction
 *              still holds the lock): nothing can commit; run again;
 *   UNKNOWN    COMMIT was sent and not answered OK in a way that proves it
 *              failed: fence the batch id (writer.h) and run again only if
 *              the fence says it was lost;
 *   BLAME      a control statement after command i failed: the command
 *              ended the transaction (ON CONFLICT ROLLBACK, ...). Command i
 *              fails alone with its error, the others run again without it;
 *   SPLIT      COMMIT found a constraint violated (a deferred foreign key)
 *              that any command may have left: each command runs again in
 *              a transaction of its own, so the one at fault fails alone;
 *   FAILALL    COMMIT failed definitely and no command ran statements to
 *              blame: every command gets that error (nothing was kept);
 *   SETTLED    (an alone command) its own lith__dqw_tx_end lost the leader
 *              and settled the outcome itself: answered as it is.
 * An alone command is never run again (its callback hands out answers as
 * it goes: lithd's interactive transactions): where a batch would run
 * again, it fails LITH_DQW_UNAVAILABLE. lith__dqw_tx_end commits in the
 * middle of it: RELEASE lith_c; COMMIT, then the next BEGIN (a fresh
 * batch id, for the fence) staged for its next statement; a COMMIT lost
 * there is fenced right away, inside the call.
 * A failed statement fails its command at once (later tx calls of that run
 * refuse): after a failure the transaction may be gone, and a statement
 * then would run in autocommit outside the batch.
 *
 * Who leads (writer.h): the writer thread keeps it (lead, lost_at) and
 * tells each change once, from the few places where it changes: lose()
 * (a loss, counted), leader_ready() (a connection to a leader), settle()
 * (a pending failover's end: the first batch answered, or the watch
 * finding the writer idle and ready). Other threads read a copy under mu
 * (publish). The watch runs between batches, on the writer thread and
 * its connection, in the idle wait of writer_main.
 */
#include "writer.h"

#include <limits.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "../lib/clock.h"

#define SQLITE_ERROR_ 1
#define SQLITE_BUSY_ 5
#define SQLITE_IOERR_ 10
#define SQLITE_CONSTRAINT_ 19

enum { REQ_QUEUED, REQ_RUN, REQ_EXCLUDED };
enum attempt { A_COMMITTED, A_BROKEN, A_UNKNOWN, A_BLAME, A_SPLIT, A_FAILALL, A_SETTLED };
enum fence { F_COMMITTED, F_LOST, F_BROKEN };

struct lith__dqw {
  char *addresses, *database;
  int failover_ms, timeout_ms, max_batch, keep_s;
  int max_run_ms;      /* asked of the nodes (writer.h) */
  int stmt_timeout_ms; /* a command's statement's answer: the nodes' bound + timeout_ms */
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  lith__dqw_req *head, *tail; /* guarded by mu */
  int stopping;               /* guarded by mu */
  /* The writer thread's own. */
  lith__dq_conn *c;
  uint32_t db;
  int ready;          /* connected to a leader, database open */
  int tables;         /* lith's tables seen committed (a batch of this writer
                         committed with them): no need to make them again */
  int64_t down_since; /* ms when the leader was lost; 0 while connected */
  int backoff_ms;     /* the wait before the next reconnection (writer.h) */
  char *ctl;          /* control statements not yet sent */
  size_t nctl, capctl;
  uint64_t nflush;  /* ctl texts sent: a savepoint whose SAVEPOINT was never
                      sent costs nothing (lith__dqw_savepoint) */
  int ctl_err;      /* out of memory growing ctl */
  int last_ran;     /* the batch's last command that ran statements; -1 none */
  int64_t batch_id; /* the open transaction's id in _lith_batches (the fence's) */
  uint64_t nbatch;
  int fault, fault_every;
  uint64_t nattempt;
  /* (alone) A connection setting a command changed between two of its
   * transactions (lith__dqw_tx_setting), put back once its batch ended,
   * before any other command; "" none. A lost connection takes it along
   * (a new one starts at libdqlite's settings). */
  char undo[64];
  /* Every lith__dqw_tx_after statement of the batch running: sent again
   * before each new attempt of it and after it ended (put_back), since the
   * one after a command's savepoint does not run when the request it rides
   * in fails first (a transaction ended under it, a lost COMMIT). */
  char batch_after[256];
  _Atomic uint64_t st_batches, st_commands, st_failovers, st_fenced, st_reruns;
  /* Who leads (writer.h, "Who leads"). The writer thread's: */
  int watch_ms;
  void (*on_leader)(void *arg, const lith__dqw_leader_event *e);
  void *on_leader_arg;
  char lead[LITH_DQW_ADDR_MAX]; /* the leader last connected to ("" none yet) */
  uint64_t lead_id;
  char lost[LITH_DQW_ADDR_MAX]; /* the leader whose loss is pending */
  uint64_t lost_id;
  int64_t lost_at;    /* ms when that loss was noticed; 0: no failover pending */
  int none_told;      /* NONE told since the leader was last connected */
  int64_t next_watch; /* ms of the next watch */
  /* ...and a copy for other threads (mu): */
  int pub_known;
  char pub_lead[LITH_DQW_ADDR_MAX];
  uint64_t pub_id;
  int64_t pub_wait_ms;
};

struct lith__dqw_tx {
  lith__dqw *w;
  lith__dqw_req *req;
  int broken;      /* the run is abandoned (RETRY) */
  int blame;       /* ...because a flush failed: blame w->last_ran */
  int failed;      /* a statement failed: the command fails */
  int fail_rc;     /* ...with this code (SQL, MISUSE, NOMEM, USER, TOOBIG) */
  int lost_own;    /* ...and took the connection with it (TOOBIG, a stop that
                 * could not be drained): the batch runs again without it */
  int ran;         /* a statement was sent */
  int dqrc;        /* the client's code when broken, for the message */
  int in_query;    /* inside lith__dqw_query_each's on_rows */
  int ended;       /* a nested savepoint could not be undone: SQLite ended the
                      transaction with the failure (the command is to blame) */
  unsigned nerror; /* lith__dqw_error calls */
  int depth;       /* lith__dqw_savepoint's nesting */
  int over;        /* (alone) lith__dqw_tx_end lost the leader: the outcome is
                      settled (fail_rc); nothing more runs */
  uint64_t mark;   /* w->nflush when its transaction began: none sent since */
  char after[128]; /* lith__dqw_tx_after's: sent when its savepoint ends; "" none */
};

static int64_t now_ms(void) { return lith__now_ns() / 1000000; }

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

const char *lith__dqw_rc_str(int rc) {
  switch (rc) {
  case LITH_DQW_OK: return "ok";
  case LITH_DQW_SQL: return "sql error";
  case LITH_DQW_USER: return "command failed";
  case LITH_DQW_RETRY: return "retry";
  case LITH_DQW_UNAVAILABLE: return "unavailable (not committed)";
  case LITH_DQW_UNKNOWN: return "unavailable (outcome unknown)";
  case LITH_DQW_CLOSED: return "closed";
  case LITH_DQW_NOMEM: return "out of memory";
  case LITH_DQW_MISUSE: return "misuse";
  case LITH_DQW_TOOBIG: return "answer too large";
  default: return "unknown code";
  }
}

static void set_err(lith__dqw_err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_err(lith__dqw_err *e, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  e->code = code;
  vsnprintf(e->errmsg, sizeof e->errmsg, fmt, ap);
  va_end(ap);
}

/* ---- Control statements ---- */

static void ctl_add(lith__dqw *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ctl_add(lith__dqw *w, const char *fmt, ...) {
  va_list ap;
  for (;;) {
    size_t room = w->capctl - w->nctl;
    va_start(ap, fmt);
    int n = w->ctl ? vsnprintf(w->ctl + w->nctl, room, fmt, ap) : -1;
    va_end(ap);
    if (n >= 0 && (size_t)n < room) {
      w->nctl += (size_t)n;
      return;
    }
    size_t cap = w->capctl ? w->capctl * 2 : 256;
    char *p = realloc(w->ctl, cap);
    if (p == NULL) {
      w->ctl_err = 1;
      return;
    }
    w->ctl = p;
    w->capctl = cap;
  }
}

static void ctl_reset(lith__dqw *w) {
  w->nctl = 0;
  w->ctl_err = 0;
  if (w->ctl)
    w->ctl[0] = '\0';
}

/* A FAILURE whose primary code is SQLITE_IOERR: dqlite's NOT_LEADER,
 * LEADERSHIP_LOST, or a replication failure. The leader is in doubt. */
static int leader_failure(uint64_t code) { return (code & 0xff) == SQLITE_IOERR_; }

/* Send ctl. LITH_DQ_OK, LITH_DQ_FAILURE (code on the connection), or a
 * connection-level code (the connection is gone). */
static int ctl_flush(lith__dqw *w) {
  if (w->ctl_err)
    return LITH_DQ_NOMEM;
  if (w->nctl == 0)
    return LITH_DQ_OK;
  int rc = lith__dq_exec_sql(w->c, w->db, w->ctl, NULL, 0, NULL);
  ctl_reset(w);
  w->nflush++;
  return rc;
}

/* ---- Connection ---- */

/* ---- Who leads ---- */

/* Tell on_leader of a change (writer.h). */
static void tell(lith__dqw *w, int kind, const char *addr, uint64_t id, const char *old, uint64_t old_id,
                 int64_t wait_ms, int waited, const char *why) {
  if (w->on_leader == NULL)
    return;
  lith__dqw_leader_event e = {.kind = kind,
                              .address = addr,
                              .id = id,
                              .old_address = old,
                              .old_id = old_id,
                              .wait_ms = wait_ms,
                              .writes_waited = waited,
                              .why = why != NULL ? why : ""};
  w->on_leader(w->on_leader_arg, &e);
}

/* The copy other threads read (lith__dqw_get_stats). */
static void publish(lith__dqw *w, int64_t wait_ms) {
  pthread_mutex_lock(&w->mu);
  w->pub_known = w->ready;
  memcpy(w->pub_lead, w->lead, sizeof w->pub_lead);
  w->pub_id = w->lead_id;
  if (wait_ms >= 0)
    w->pub_wait_ms = wait_ms;
  pthread_mutex_unlock(&w->mu);
}

/* The pending failover ends (writer.h: the first batch answered on the
 * new leader, or none waiting): its wait is known. */
static void settle(lith__dqw *w, int waited) {
  int64_t wait = now_ms() - w->lost_at;
  w->lost_at = 0;
  publish(w, wait);
  tell(w, LITH_DQW_LEADER_FAILOVER, w->lead, w->lead_id, w->lost, w->lost_id, wait, waited, NULL);
}

/* Connected to a leader that names itself `addr` (id: 0 unknown), the
 * database open: ready. A node's address is kept printable (it goes to
 * logs and metrics): any other byte becomes '?'. */
static void leader_ready(lith__dqw *w, uint64_t id, const char *addr) {
  char a[LITH_DQW_ADDR_MAX], old[LITH_DQW_ADDR_MAX];
  size_t i;
  for (i = 0; i < sizeof a - 1 && addr[i] != '\0'; i++)
    a[i] = addr[i] > ' ' && addr[i] < 127 ? addr[i] : '?';
  a[i] = '\0';
  int changed = id != w->lead_id || strcmp(a, w->lead) != 0;
  memcpy(old, w->lead, sizeof old);
  uint64_t old_id = w->lead_id;
  memcpy(w->lead, a, sizeof a);
  w->lead_id = id;
  w->ready = 1;
  w->down_since = 0;
  w->none_told = 0;
  publish(w, -1);
  if (w->lost_at == 0 && changed) /* no loss noticed: the first, or a change seen only now */
    tell(w, LITH_DQW_LEADER_FOUND, w->lead, id, old, old_id, 0, 0, NULL);
}

/* No leader for failover_ms: told once per absence. */
static void tell_none(lith__dqw *w) {
  if (w->none_told || w->down_since == 0)
    return;
  w->none_told = 1;
  tell(w, LITH_DQW_LEADER_NONE, "", 0, w->lost_at != 0 ? w->lost : "", w->lost_at != 0 ? w->lost_id : 0,
       now_ms() - w->down_since, 0, NULL);
}

/* The connection to the leader failed, or the leader no longer leads (why:
 * NULL, the client's message). A loss while ready counts as a failover
 * and is told once; a new leader lost before its failover settled settles
 * it first. */
static void lose_why(lith__dqw *w, const char *why) {
  char msg[256];
  snprintf(msg, sizeof msg, "%s", why != NULL ? why : lith__dq_errmsg(w->c));
  lith__dq_disconnect(w->c);
  w->undo[0] = '\0'; /* the setting went with the connection (batch_after
                      * stays: a rerun may set it again on the next) */
  if (w->ready) {
    atomic_fetch_add(&w->st_failovers, 1);
    if (w->lost_at != 0)
      settle(w, 0);
    memcpy(w->lost, w->lead, sizeof w->lost);
    w->lost_id = w->lead_id;
    w->lost_at = now_ms();
    w->ready = 0;
    publish(w, -1);
    tell(w, LITH_DQW_LEADER_LOST, "", 0, w->lost, w->lost_id, 0, 0, msg);
  }
  w->ready = 0;
  if (w->down_since == 0)
    w->down_since = now_ms();
}

static void lose(lith__dqw *w) { lose_why(w, NULL); }

/* The connection went with a command's own failure (an answer too large):
 * not a lost leader, so no failover is counted; the next batch connects
 * again. */
static void drop(lith__dqw *w) {
  lith__dq_disconnect(w->c);
  w->undo[0] = '\0';
  w->ready = 0;
}

/* Before a reconnection: wait the back-off, then double it (writer.h). The
 * wait stops at the deadline while one is ahead; past it (a batch's one
 * round while the writer has long been without a leader) it is whole, so
 * that producers retrying at once do not make the writer reconnect in a
 * tight loop. */
static void backoff(lith__dqw *w, int64_t deadline) {
  int ms = w->backoff_ms;
  int64_t left = deadline - now_ms();
  /* with the watch, a new leader is looked for at least every watch_ms */
  int cap = w->watch_ms > 0 && w->watch_ms < LITH_DQW_BACKOFF_MAX_MS ? w->watch_ms : LITH_DQW_BACKOFF_MAX_MS;
  if (left > 0 && left < ms)
    ms = (int)left;
  if (ms > 0)
    sleep_ms(ms);
  w->backoff_ms = w->backoff_ms == 0         ? LITH_DQW_BACKOFF_MIN_MS
                  : w->backoff_ms >= cap / 2 ? cap
                                             : w->backoff_ms * 2;
}

/* lith's tables: the fence's, and lithd's schema record, made even
 * without --schema: a name taken before any command runs, so no client can
 * rename a table of its own onto it (lith's rule cannot see a rename's new
 * name). Made by the first transaction that commits, not at connect: a
 * database nothing was written to stays empty, as a fresh file does, for
 * the tools that look before they write (Prisma's migrate deploy refuses
 * a database with tables of its own in it, P3005). */
#define LITH_TABLES_SQL                                                   \
  "CREATE TABLE IF NOT EXISTS _lith_batches(id INTEGER PRIMARY KEY, "     \
  "time INTEGER NOT NULL, lost INTEGER NOT NULL DEFAULT 0);"              \
  "CREATE INDEX IF NOT EXISTS _lith_batches_time ON _lith_batches(time);" \
  "CREATE TABLE IF NOT EXISTS _lith_schema(version INTEGER NOT NULL);"

/* Connect to the leader (lith__dq_connect_leader for up to timeout_ms;
 * 0: one round), ask it whether it leads itself (with the watch), open the
 * database: ready, 1. 0 otherwise (disconnected). */
static int connect_leader(lith__dqw *w, int timeout_ms) {
  uint64_t id = 0;
  const char *addr = NULL;
  int rc = lith__dq_connect_leader(w->c, w->addresses, timeout_ms);
  if (rc == LITH_DQ_OK && w->watch_ms > 0) {
    /* A follower's word may be stale (a leader since lost, or deposed):
     * the node itself says. */
    rc = lith__dq_leader(w->c, &id, &addr);
    if (rc == LITH_DQ_OK && (id == 0 || strcmp(addr, lith__dq_address(w->c)) != 0))
      rc = LITH_DQ_IO;
  }
  if (rc == LITH_DQ_OK) {
    addr = lith__dq_address(w->c);                        /* lives on in the handle past the requests below */
    rc = lith__dq_open_writer(w->c, w->database, &w->db); /* nothing spilled (client.h) */
  }
  if (rc == LITH_DQ_OK) {
    int bound = 0;
    int r2 = lith__dq_max_run(w->c, w->db, w->max_run_ms, &bound);
    if (r2 == LITH_DQ_FAILURE) /* not a lith-node: as asked */
      bound = w->max_run_ms;
    else if (r2 != LITH_DQ_OK)
      rc = r2;
    else if (bound == 0) /* the node has none: ours, or none */
      bound = w->max_run_ms;
    w->stmt_timeout_ms = bound > 0 && bound < INT_MAX - w->timeout_ms ? bound + w->timeout_ms : w->timeout_ms;
  }
  if (rc == LITH_DQ_OK) {
    leader_ready(w, id, addr);
    return 1;
  }
  lith__dq_disconnect(w->c);
  return 0;
}

/* Be connected to the leader with the database open and lith's tables made,
 * trying until the deadline (at least one round of the addresses). 1 when
 * ready. With the watch, one round a try (the back-off between them stops
 * at watch_ms); without, lith__dq_connect_leader's own rounds until the
 * deadline. */
static int ensure(lith__dqw *w, int64_t deadline) {
  if (w->ready)
    return 1;
  if (w->down_since == 0) {
    w->down_since = now_ms();
    deadline = w->down_since + w->failover_ms;
  }
  do {
    backoff(w, deadline);
    int64_t left = deadline - now_ms();
    if (connect_leader(w, w->watch_ms > 0 || left <= 0 ? 0 : (int)left))
      return 1;
  } while (now_ms() < deadline);
  return 0;
}

/* ---- Inside a command ---- */

/* Skip blanks and SQL comments. */
static const char *skip_space(const char *p) {
  for (;;) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\f' || *p == '\v')
      p++;
    if (p[0] == '-' && p[1] == '-') {
      while (*p && *p != '\n')
        p++;
    } else if (p[0] == '/' && p[1] == '*') {
      const char *e = strstr(p + 2, "*/");
      p = e ? e + 2 : p + strlen(p);
    } else {
      return p;
    }
  }
}

/* One statement, not transaction control: NULL, or why not. */
static const char *sql_refused(const char *sql) {
  static const char *const control[] = {"BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE"};
  const char *p = skip_space(sql);
  size_t n = 0;
  while ((p[n] >= 'a' && p[n] <= 'z') || (p[n] >= 'A' && p[n] <= 'Z'))
    n++;
  for (size_t i = 0; i < sizeof control / sizeof *control; i++)
    if (strlen(control[i]) == n && strncasecmp(p, control[i], n) == 0)
      return "transaction control belongs to the writer";
  /* Past the first ';' outside quotes and comments, only blanks may follow. */
  while (*p) {
    if (*p == '\'' || *p == '"' || *p == '`' || *p == '[') {
      char close = *p == '[' ? ']' : *p;
      p++;
      while (*p && *p != close)
        p++;
      if (*p)
        p++;
    } else if ((p[0] == '-' && p[1] == '-') || (p[0] == '/' && p[1] == '*')) {
      p = skip_space(p);
    } else if (*p == ';') {
      p = skip_space(p + 1);
      if (*p != '\0' && *p != ';')
        return "one statement per call";
    } else {
      p++;
    }
  }
  return NULL;
}

/* Checks before a statement, and the flush of the control statements
 * queued before it. LITH_DQW_OK to go on. */
static int tx_before(lith__dqw_tx *tx, const char *sql) {
  lith__dqw *w = tx->w;
  if (tx->broken)
    return LITH_DQW_RETRY;
  if (tx->in_query) {
    /* From inside on_rows: the connection is in the middle of an answer.
     * Nothing is sent; the command fails. */
    set_err(&tx->req->err, 0, "a statement from inside on_rows: %s", sql);
    tx->failed = 1;
    tx->fail_rc = LITH_DQW_MISUSE;
    return LITH_DQW_MISUSE;
  }
  if (tx->failed)
    return tx->fail_rc; /* err still holds the failure */
  const char *why = sql_refused(sql);
  if (why != NULL) {
    set_err(&tx->req->err, 0, "%s: %s", why, sql);
    tx->failed = 1;
    tx->fail_rc = LITH_DQW_MISUSE;
    return LITH_DQW_MISUSE;
  }
  int rc = ctl_flush(w);
  if (rc == LITH_DQ_OK)
    return LITH_DQW_OK;
  tx->broken = 1;
  tx->dqrc = rc;
  if (rc == LITH_DQ_FAILURE && !leader_failure(lith__dq_errcode(w->c)))
    tx->blame = 1;
  return LITH_DQW_RETRY;
}

/* The command fails with rc (its err set); 'own': through no fault of the
 * leader, so the connection, if it went, goes without a failover. */
static int tx_fail(lith__dqw_tx *tx, int rc) {
  tx->failed = 1;
  tx->fail_rc = rc;
  if (!lith__dq_connected(tx->w->c))
    tx->lost_own = 1;
  return rc;
}

/* Sort a statement's outcome into the tx's state. nerror0: the callback's
 * lith__dqw_error count before the statement (a stop keeps its message). */
static int tx_after(lith__dqw_tx *tx, int rc, unsigned nerror0) {
  lith__dq_conn *c = tx->w->c;
  tx->ran = 1;
  if (rc == LITH_DQ_OK)
    return LITH_DQW_OK;
  if (rc == LITH_DQ_NOMEM || rc == LITH_DQ_MISUSE) {
    set_err(&tx->req->err, 0, "%s", lith__dq_errmsg(c));
    return tx_fail(tx, rc == LITH_DQ_NOMEM ? LITH_DQW_NOMEM : LITH_DQW_MISUSE);
  }
  if (rc == LITH_DQ_FAILURE && !leader_failure(lith__dq_errcode(c))) {
    set_err(&tx->req->err, (int)lith__dq_errcode(c), "%s", lith__dq_errmsg(c));
    return tx_fail(tx, LITH_DQW_SQL);
  }
  if (rc == LITH_DQ_TOOBIG) {
    set_err(&tx->req->err, 0, "%s", lith__dq_errmsg(c));
    return tx_fail(tx, LITH_DQW_TOOBIG);
  }
  if (rc == LITH_DQ_STOPPED) {
    if (tx->nerror == nerror0)
      set_err(&tx->req->err, 0, "the query was stopped by its callback");
    return tx_fail(tx, LITH_DQW_USER);
  }
  tx->broken = 1;
  tx->dqrc = rc;
  return LITH_DQW_RETRY;
}

int lith__dqw_exec(lith__dqw_tx *tx, const char *sql, const lith__dq_value *params, unsigned n,
                   lith__dq_result *res) {
  int rc = tx_before(tx, sql);
  if (rc != LITH_DQW_OK)
    return rc;
  int t = lith__dq_set_timeout(tx->w->c, tx->w->stmt_timeout_ms);
  rc = lith__dq_exec_sql(tx->w->c, tx->w->db, sql, params, n, res);
  lith__dq_set_timeout(tx->w->c, t);
  return tx_after(tx, rc, tx->nerror);
}

int lith__dqw_query(lith__dqw_tx *tx, const char *sql, const lith__dq_value *params, unsigned n,
                    lith__dq_rows *rows) {
  int rc = tx_before(tx, sql);
  if (rc != LITH_DQW_OK)
    return rc;
  int t = lith__dq_set_timeout(tx->w->c, tx->w->stmt_timeout_ms);
  rc = lith__dq_query_sql(tx->w->c, tx->w->db, sql, params, n, rows);
  lith__dq_set_timeout(tx->w->c, t);
  return tx_after(tx, rc, tx->nerror);
}

int lith__dqw_query_each(lith__dqw_tx *tx, const char *sql, const lith__dq_value *params, unsigned n,
                         lith__dq_rows_cb on_rows, void *arg) {
  int rc = tx_before(tx, sql);
  if (rc != LITH_DQW_OK)
    return rc;
  unsigned nerror0 = tx->nerror;
  tx->in_query = 1;
  int t = lith__dq_set_timeout(tx->w->c, tx->w->stmt_timeout_ms);
  rc = lith__dq_query_each(tx->w->c, tx->w->db, sql, params, n, on_rows, arg, 0);
  lith__dq_set_timeout(tx->w->c, t);
  tx->in_query = 0;
  return tx_after(tx, rc, nerror0);
}

int lith__dqw_query_int(lith__dqw_tx *tx, int64_t *out, const char *sql, const lith__dq_value *params,
                        unsigned n) {
  lith__dq_rows r;
  lith__dq_rows_init(&r);
  int rc = lith__dqw_query(tx, sql, params, n, &r);
  if (rc == LITH_DQW_OK && (r.nrows == 0 || r.ncols == 0))
    rc = lith__dqw_error(tx, "no row: %s", sql);
  else if (rc == LITH_DQW_OK)
    *out = lith__dq_rows_at(&r, 0, 0)->i;
  lith__dq_rows_free(&r);
  return rc;
}

int lith__dqw_savepoint(lith__dqw_tx *tx, lith__dqw_fn fn, void *arg) {
  lith__dqw *w = tx->w;
  if (tx->broken)
    return LITH_DQW_RETRY;
  if (tx->failed || tx->in_query)
    return tx->failed ? tx->fail_rc : LITH_DQW_MISUSE;
  size_t mark = w->nctl;
  uint64_t sent0 = w->nflush;
  ctl_add(w, "SAVEPOINT lith_s;");
  tx->depth++;
  int rc = fn(tx, arg);
  tx->depth--;
  if (tx->broken)
    return LITH_DQW_RETRY;
  if (tx->lost_own) /* its answer took the connection: the command's to blame */
    return tx->fail_rc;
  if (rc == LITH_DQW_OK && tx->failed)
    rc = tx->fail_rc;
  if (w->nflush == sent0 && !w->ctl_err) { /* nothing reached the node: nothing to keep or undo */
    w->nctl = mark;
    w->ctl[mark] = '\0';
  } else if (rc == LITH_DQW_OK) {
    ctl_add(w, "RELEASE lith_s;");
  } else {
    ctl_add(w, "ROLLBACK TO lith_s; RELEASE lith_s;");
    int frc = ctl_flush(w);
    if (frc == LITH_DQ_FAILURE && !leader_failure(lith__dq_errcode(w->c))) {
      tx->ended = 1;     /* "no such savepoint": the failure ended the transaction */
      if (!tx->failed) { /* fn's own failure (lith__dqw_error), not a statement's */
        tx->failed = 1;
        tx->fail_rc = LITH_DQW_USER;
      }
      return tx->fail_rc;
    }
    if (frc != LITH_DQ_OK) {
      tx->broken = 1;
      tx->dqrc = frc;
      return LITH_DQW_RETRY;
    }
  }
  tx->failed = 0; /* undone: the command goes on */
  tx->fail_rc = 0;
  return rc;
}

static enum fence fence(lith__dqw *w, int64_t batch_id);
static int fault_now(lith__dqw *w);
static int64_t new_batch_id(void);
static void begin_batch(lith__dqw *w, int64_t batch_id, int64_t t);

/* (alone) The COMMIT of lith__dqw_tx_end went unanswered: fence its batch
 * id now, on the leader found within failover_ms. */
static int commit_lost(lith__dqw_tx *tx) {
  lith__dqw *w = tx->w;
  int64_t deadline = now_ms() + w->failover_ms;
  enum fence f = F_BROKEN;
  lose(w);
  while (f == F_BROKEN && now_ms() < deadline)
    if (ensure(w, deadline))
      f = fence(w, w->batch_id);
  if (f == F_COMMITTED) {
    atomic_fetch_add(&w->st_fenced, 1);
    w->backoff_ms = 0;
    begin_batch(w, new_batch_id(), wall_ms()); /* on the new leader */
    ctl_add(w, "SAVEPOINT lith_c;");
    tx->mark = w->nflush;
    return LITH_DQW_OK;
  }
  tx->over = tx->failed = 1;
  if (f == F_LOST) {
    atomic_fetch_add(&w->st_fenced, 1);
    tx->fail_rc = LITH_DQW_UNAVAILABLE;
    set_err(&tx->req->err, 0,
            "the dqlite leader was lost after COMMIT was sent, and the fence proved it did not commit: "
            "nothing of it was kept");
  } else {
    tx->fail_rc = LITH_DQW_UNKNOWN;
    set_err(&tx->req->err, 0,
            "the dqlite leader was lost after COMMIT was sent and no leader answered within %d ms: the "
            "outcome is unknown (%.80s)",
            w->failover_ms, lith__dq_errmsg(w->c));
  }
  return tx->fail_rc;
}

int lith__dqw_tx_end(lith__dqw_tx *tx, int commit) {
  lith__dqw *w = tx->w;
  if (tx->broken)
    return LITH_DQW_RETRY;
  if (tx->failed)
    return tx->fail_rc;
  if (!tx->req->alone || tx->depth > 0 || tx->in_query) {
    set_err(&tx->req->err, 0, "lith__dqw_tx_end outside an alone command's own level");
    tx->failed = 1;
    return tx->fail_rc = LITH_DQW_MISUSE;
  }
  if (w->nflush == tx->mark)
    return LITH_DQW_OK; /* nothing reached the node: nothing to keep or undo */
  /* the whole transaction (its batch row too: a rollback leaves no Raft
   * entry); the command goes on in the next, staged for its next statement */
  ctl_add(w, commit ? "RELEASE lith_c; COMMIT" : "ROLLBACK");
  if (commit && fault_now(w))
    return commit_lost(tx);
  int rc = ctl_flush(w);
  if (rc == LITH_DQ_OK) {
    w->tables = w->tables || commit;
    begin_batch(w, new_batch_id(), wall_ms());
    ctl_add(w, "SAVEPOINT lith_c;");
    tx->mark = w->nflush;
    return LITH_DQW_OK;
  }
  if (rc == LITH_DQ_FAILURE && !leader_failure(lith__dq_errcode(w->c))) {
    uint64_t code = lith__dq_errcode(w->c);
    set_err(&tx->req->err, (int)code, "%s", lith__dq_errmsg(w->c));
    if (commit && (code & 0xff) == SQLITE_CONSTRAINT_) {
      /* a deferred foreign key: SQLite keeps the transaction open (the
       * caller may fix it); lith_c again around what follows */
      ctl_add(w, "SAVEPOINT lith_c;");
      return LITH_DQW_SQL;
    }
    tx->ended = tx->failed = 1; /* the transaction is gone with the failure */
    return tx->fail_rc = LITH_DQW_SQL;
  }
  if (!commit || rc == LITH_DQ_NOMEM) { /* nothing can have committed */
    tx->broken = 1;
    tx->dqrc = rc;
    return LITH_DQW_RETRY;
  }
  return commit_lost(tx);
}

int lith__dqw_tx_after(lith__dqw_tx *tx, const char *sql) {
  if (strlen(sql) >= sizeof tx->after) {
    set_err(&tx->req->err, 0, "lith__dqw_tx_after: statements of fewer than %zu bytes", sizeof tx->after);
    tx->failed = 1;
    return tx->fail_rc = LITH_DQW_MISUSE;
  }
  snprintf(tx->after, sizeof tx->after, "%s", sql);
  size_t n = strlen(tx->w->batch_after);
  if (strstr(tx->w->batch_after, sql) == NULL && n + strlen(sql) + 2 < sizeof tx->w->batch_after)
    snprintf(tx->w->batch_after + n, sizeof tx->w->batch_after - n, "%s;", sql);
  return LITH_DQW_OK;
}

int lith__dqw_tx_setting(lith__dqw_tx *tx, const char *set, const char *undo) {
  lith__dqw *w = tx->w;
  if (strlen(undo) >= sizeof w->undo || (w->undo[0] && strcmp(w->undo, undo) != 0)) {
    set_err(&tx->req->err, 0, "lith__dqw_tx_setting: one setting, put back by fewer than %zu bytes",
            sizeof w->undo);
    tx->failed = 1;
    return tx->fail_rc = LITH_DQW_MISUSE;
  }
  int rc = lith__dqw_tx_end(tx, 1); /* alone, its own level: checked there */
  if (rc != LITH_DQW_OK)
    return rc;
  /* In autocommit now (the next BEGIN is staged, unsent): SQLite changes
   * such a setting only here. The undo first: whatever happens next, the
   * batch's end puts it back. */
  snprintf(w->undo, sizeof w->undo, "%s", undo);
  rc = lith__dq_exec_sql(w->c, w->db, set, NULL, 0, NULL);
  tx->ran = 1;
  if (rc == LITH_DQ_FAILURE && !leader_failure(lith__dq_errcode(w->c))) {
    set_err(&tx->req->err, (int)lith__dq_errcode(w->c), "%s", lith__dq_errmsg(w->c));
    tx->failed = 1;
    return tx->fail_rc = LITH_DQW_SQL;
  }
  if (rc != LITH_DQ_OK) { /* what it committed stays: the rest fails UNAVAILABLE */
    tx->broken = 1;
    tx->dqrc = rc;
    return LITH_DQW_RETRY;
  }
  return LITH_DQW_OK;
}

int lith__dqw_waiting(lith__dqw *w) {
  pthread_mutex_lock(&w->mu);
  int waiting = w->head != NULL;
  pthread_mutex_unlock(&w->mu);
  return waiting;
}

int lith__dqw_tx_state(const lith__dqw_tx *tx) {
  if (tx->broken)
    return LITH_DQW_RETRY;
  return tx->ended || tx->lost_own ? tx->fail_rc : LITH_DQW_OK;
}

const lith__dqw_err *lith__dqw_tx_err(const lith__dqw_tx *tx) { return &tx->req->err; }

int lith__dqw_error(lith__dqw_tx *tx, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tx->req->err.code = 0;
  vsnprintf(tx->req->err.errmsg, sizeof tx->req->err.errmsg, fmt, ap);
  va_end(ap);
  tx->nerror++;
  return LITH_DQW_USER;
}

/* ---- The batch ---- */

static int64_t new_batch_id(void) {
  uint64_t v = 0;
  while (v == 0) {
    if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v)
      v = (uint64_t)lith__now_ns() ^ ((uint64_t)getpid() << 32);
    v &= INT64_MAX;
  }
  return (int64_t)v;
}

/* Tests (options.fault): whether this COMMIT (ctl's) is made an unknown
 * outcome: sent with its answer dropped, or dropped unsent; 1 then, the
 * connection gone. */
static int fault_now(lith__dqw *w) {
  if (w->fault == LITH_DQW_FAULT_NONE || ++w->nattempt % (uint64_t)w->fault_every != 0)
    return 0;
  int frc = w->fault == LITH_DQW_FAULT_ANSWER_LOST ? ctl_flush(w) : LITH_DQ_OK;
  ctl_reset(w);
  lith__dq_disconnect(w->c);
  (void)frc; /* whatever it was, the writer must not know */
  return 1;
}

/* Stage the batch's BEGIN and its row (sent with the next statement). */
static void begin_batch(lith__dqw *w, int64_t batch_id, int64_t t) {
  w->batch_id = batch_id;
  ctl_add(w, "BEGIN; %sINSERT INTO _lith_batches(id, time, lost) VALUES (%lld, %lld, 0);",
          w->tables ? "" : LITH_TABLES_SQL, (long long)batch_id, (long long)t);
}

/* One attempt; *blame is the command to blame for A_BLAME. */
static enum attempt attempt(lith__dqw *w, lith__dqw_req **reqs, int n, int64_t batch_id, int *blame) {
  int64_t t = wall_ms();
  ctl_reset(w);
  if (w->batch_after[0]) /* a run before this one set them: back first */
    ctl_add(w, "%s", w->batch_after);
  begin_batch(w, batch_id, t);
  if (w->nbatch % 64 == 0)
    ctl_add(w, "DELETE FROM _lith_batches WHERE time < %lld;", (long long)(t - (int64_t)w->keep_s * 1000));
  w->last_ran = -1;
  for (int i = 0; i < n; i++) {
    lith__dqw_req *r = reqs[i];
    if (r->state == REQ_EXCLUDED)
      continue;
    ctl_add(w, "SAVEPOINT lith_c;");
    lith__dqw_tx tx = {.w = w, .req = r, .mark = w->nflush};
    r->err.code = 0;
    r->err.errmsg[0] = '\0';
    int rc = r->fn(&tx, r->arg);
    if (tx.over) { /* its lith__dqw_tx_end settled it (no connection, or a new one) */
      r->rc = tx.fail_rc;
      ctl_reset(w);
      return A_SETTLED;
    }
    if (tx.broken) {
      if (tx.blame && w->last_ran >= 0) {
        *blame = w->last_ran;
        return A_BLAME;
      }
      if (tx.blame)
        sleep_ms(20); /* BEGIN refused (e.g. busy): a pause, then again */
      return A_BROKEN;
    }
    if (r->alone && w->nflush == tx.mark) {
      /* nothing reached the node since its last commit (or at all):
       * nothing to keep or undo, no Raft entry for it */
      r->rc = rc != LITH_DQW_OK ? rc : tx.failed ? tx.fail_rc : LITH_DQW_OK;
      if (r->rc != LITH_DQW_OK && r->err.errmsg[0] == '\0')
        set_err(&r->err, 0, "the command returned %d (%s)", r->rc, lith__dqw_rc_str(r->rc));
      ctl_reset(w);
      return A_COMMITTED;
    }
    if (tx.ran)
      w->last_ran = i;
    if (tx.failed && rc == LITH_DQW_OK)
      rc = tx.fail_rc; /* a failed statement fails the command */
    r->rc = rc;
    if (rc != LITH_DQW_OK && r->err.errmsg[0] == '\0')
      set_err(&r->err, 0, "the command returned %d (%s)", rc, lith__dqw_rc_str(rc));
    if (tx.ended) {
      /* A nested savepoint's failure ended the transaction: this command
       * fails alone with it, the others run again. */
      *blame = i;
      return A_BLAME;
    }
    if (tx.lost_own) {
      /* Its answer took the connection, and the batch's transaction with
       * it: this command fails alone, the others run again on a new
       * connection. Not a lost leader. */
      drop(w);
      *blame = i;
      return A_BLAME;
    }
    if (rc == LITH_DQW_OK)
      ctl_add(w, "RELEASE lith_c;");
    else
      ctl_add(w, "ROLLBACK TO lith_c; RELEASE lith_c;");
    if (tx.after[0]) /* its setting back before the next command's SAVEPOINT */
      ctl_add(w, "%s;", tx.after);
  }
  ctl_add(w, "COMMIT");
  if (fault_now(w))
    return A_UNKNOWN;
  int rc = ctl_flush(w);
  if (rc == LITH_DQ_OK) {
    w->tables = 1;
    return A_COMMITTED;
  }
  if (rc == LITH_DQ_FAILURE) {
    uint64_t code = lith__dq_errcode(w->c);
    /* ERROR (no such savepoint: a command ended the transaction) and
     * CONSTRAINT (a deferred foreign key at COMMIT) prove nothing
     * committed; anything else may have reached Raft. */
    if ((code & 0xff) == SQLITE_ERROR_ || (code & 0xff) == SQLITE_CONSTRAINT_) {
      char msg[256];
      snprintf(msg, sizeof msg, "%s", lith__dq_errmsg(w->c));
      int r2 = lith__dq_exec_sql(w->c, w->db, "ROLLBACK", NULL, 0, NULL);
      if (r2 != LITH_DQ_OK && r2 != LITH_DQ_FAILURE)
        lose(w);
      int live = 0;
      for (int i = 0; i < n; i++)
        live += reqs[i]->state != REQ_EXCLUDED;
      /* A violation COMMIT finds (a deferred foreign key) may be any
       * command's: each runs again in a transaction of its own. */
      if ((code & 0xff) == SQLITE_CONSTRAINT_ && live > 1)
        return A_SPLIT;
      if (w->last_ran >= 0) {
        *blame = w->last_ran;
        if (reqs[*blame]->rc == LITH_DQW_OK)
          set_err(&reqs[*blame]->err, (int)code, "%s", msg);
        return A_BLAME;
      }
      for (int i = 0; i < n; i++)
        if (reqs[i]->state != REQ_EXCLUDED)
          set_err(&reqs[i]->err, (int)code, "%s", msg);
      return A_FAILALL;
    }
  }
  return A_UNKNOWN;
}

/* Settle a batch whose COMMIT went unanswered (writer.h, "fences"). */
static enum fence fence(lith__dqw *w, int64_t batch_id) {
  lith__dq_value p[2] = {lith__dq_int(batch_id), lith__dq_int(wall_ms())};
  /* the batch lost may have been the first, carrying lith's tables */
  int rc = w->tables ? LITH_DQ_OK : lith__dq_exec_sql(w->c, w->db, LITH_TABLES_SQL, NULL, 0, NULL);
  if (rc == LITH_DQ_OK)
    rc = lith__dq_exec_sql(
        w->c, w->db, "INSERT OR IGNORE INTO _lith_batches(id, time, lost) VALUES (?, ?, 1)", p, 2, NULL);
  lith__dq_rows rows;
  lith__dq_rows_init(&rows);
  if (rc == LITH_DQ_OK)
    rc = lith__dq_query_sql(w->c, w->db, "SELECT lost FROM _lith_batches WHERE id = ?", p, 1, &rows);
  enum fence f = F_BROKEN;
  if (rc == LITH_DQ_OK && rows.nrows == 1 && rows.ncols == 1)
    f = lith__dq_rows_at(&rows, 0, 0)->i == 0 ? F_COMMITTED : F_LOST;
  lith__dq_rows_free(&rows);
  if (f == F_BROKEN) {
    if (rc == LITH_DQ_FAILURE && !leader_failure(lith__dq_errcode(w->c)))
      sleep_ms(20); /* busy: the old connection's transaction, about to go */
    else
      lose(w);
  }
  return f;
}

static void answer(lith__dqw *w, lith__dqw_req **reqs, int n, int committed) {
  if (committed) {
    atomic_fetch_add(&w->st_batches, 1);
    atomic_fetch_add(&w->st_commands, (uint64_t)n);
    w->nbatch++;
  }
  if (w->lost_at != 0 && w->ready) /* the first batch answered on the new leader */
    settle(w, 1);
  for (int i = 0; i < n; i++)
    if (reqs[i]->done != NULL)
      reqs[i]->done(reqs[i]);
}

/* Every command not yet decided gets rc (UNAVAILABLE, UNKNOWN, or with
 * FAILALL the COMMIT's error already in err), then all are answered. */
static void fail_rest(lith__dqw *w, lith__dqw_req **reqs, int n, int rc, const char *why) {
  for (int i = 0; i < n; i++) {
    lith__dqw_req *r = reqs[i];
    if (r->state == REQ_EXCLUDED)
      continue;
    if (rc == LITH_DQW_UNKNOWN && r->rc != LITH_DQW_OK)
      continue; /* rolled back to its savepoint: failed whatever the COMMIT did */
    r->rc = rc;
    if (why != NULL)
      set_err(&r->err, 0, "%s", why);
  }
  answer(w, reqs, n, 0);
}

/* The writer gave up on a leader: commands queued meanwhile never ran and
 * would each wait a round of the addresses more; they fail now too. */
static void fail_queued(lith__dqw *w, const char *why) {
  pthread_mutex_lock(&w->mu);
  lith__dqw_req *r = w->head;
  w->head = w->tail = NULL;
  pthread_mutex_unlock(&w->mu);
  while (r != NULL) {
    lith__dqw_req *next = r->next;
    r->rc = LITH_DQW_UNAVAILABLE;
    set_err(&r->err, 0, "%s", why);
    if (r->done != NULL)
      r->done(r);
    r = next;
  }
}

static void run_batch(lith__dqw *w, lith__dqw_req **reqs, int n) {
  int unknown = 0;
  int64_t unknown_id = 0;
  int64_t deadline = 0; /* failover_ms after this batch's first failure */
  char why[300];
  for (;;) {
    /* Give up when no leader is found in time, or when one is found but the
     * batch keeps failing in a way worth retrying (busy, leadership lost
     * again) past the same deadline. A batch that meets a writer already
     * without a leader for failover_ms gets one round of the addresses. */
    int expired = deadline != 0 && now_ms() >= deadline;
    if (expired || !ensure(w, deadline != 0 ? deadline : w->down_since + w->failover_ms)) {
      snprintf(why, sizeof why, "no dqlite leader within %d ms (%s)", w->failover_ms, lith__dq_errmsg(w->c));
      tell_none(w);
      fail_rest(w, reqs, n, unknown ? LITH_DQW_UNKNOWN : LITH_DQW_UNAVAILABLE, why);
      fail_queued(w, why);
      return;
    }
    if (unknown) {
      enum fence f = fence(w, unknown_id);
      if (f == F_BROKEN) {
        if (deadline == 0)
          deadline = now_ms() + w->failover_ms;
        continue;
      }
      atomic_fetch_add(&w->st_fenced, 1);
      w->backoff_ms = 0; /* a leader answered: the back-off starts over */
      if (f == F_COMMITTED) {
        answer(w, reqs, n, 1);
        return;
      }
      if (reqs[0]->alone) { /* never run again */
        fail_rest(w, reqs, n, LITH_DQW_UNAVAILABLE,
                  "the dqlite leader was lost after COMMIT was sent, and the fence proved it did not commit: "
                  "nothing of it since its last commit was kept");
        return;
      }
      unknown = 0;
      atomic_fetch_add(&w->st_reruns, 1);
    }
    int64_t id = new_batch_id();
    int blame = -1;
    enum attempt a = attempt(w, reqs, n, id, &blame);
    if (a != A_BROKEN && a != A_UNKNOWN)
      w->backoff_ms = 0; /* a definite answer: the back-off starts over */
    switch (a) {
    case A_COMMITTED: answer(w, reqs, n, 1); return;
    case A_BROKEN:
      lose(w);
      if (reqs[0]->alone) { /* never run again: its transaction died with the connection */
        snprintf(why, sizeof why,
                 "the dqlite leader was lost during the command (%s): nothing of it since its last commit "
                 "was kept",
                 lith__dq_errmsg(w->c));
        fail_rest(w, reqs, n, LITH_DQW_UNAVAILABLE, why);
        return;
      }
      atomic_fetch_add(&w->st_reruns, 1);
      if (deadline == 0)
        deadline = now_ms() + w->failover_ms;
      break;
    case A_UNKNOWN:
      lose(w);
      unknown = 1;
      unknown_id = w->batch_id; /* id, or an alone command's after its lith__dqw_tx_end */
      if (deadline == 0)
        deadline = now_ms() + w->failover_ms;
      break;
    case A_BLAME: {
      lith__dqw_req *r = reqs[blame];
      r->state = REQ_EXCLUDED;
      if (r->rc == LITH_DQW_OK)
        r->rc = LITH_DQW_SQL;
      if (r->err.errmsg[0] == '\0')
        set_err(&r->err, 0, "the command ended the transaction");
      if (lith__dq_connected(w->c))
        lith__dq_exec_sql(w->c, w->db, "ROLLBACK", NULL, 0, NULL); /* if still open; errors don't matter */
      if (!lith__dq_connected(w->c))
        lose(w);
      int live = 0;
      for (int i = 0; i < n; i++)
        live += reqs[i]->state != REQ_EXCLUDED;
      if (live == 0) { /* nothing left to run */
        answer(w, reqs, n, 0);
        return;
      }
      atomic_fetch_add(&w->st_reruns, 1);
      break;
    }
    case A_SPLIT:
      atomic_fetch_add(&w->st_reruns, 1);
      for (int i = 0; i < n; i++) {
        if (reqs[i]->state != REQ_EXCLUDED)
          run_batch(w, &reqs[i], 1); /* answers it; a batch of one never splits */
        else if (reqs[i]->done != NULL)
          reqs[i]->done(reqs[i]);
      }
      return;
    case A_FAILALL: fail_rest(w, reqs, n, LITH_DQW_SQL, NULL); return;
    case A_SETTLED: answer(w, reqs, n, 0); return;
    }
  }
}

/* ---- The thread and the queue ---- */

/* After a batch (outside any transaction): the setting an alone command
 * changed (lith__dqw_tx_setting), and every lith__dqw_tx_after statement
 * of the batch again, back before any other command runs. If the node
 * refuses, the connection goes: a new one starts at libdqlite's
 * settings. */
static void put_back(lith__dqw *w) {
  if (w->undo[0] != '\0' &&
      (!lith__dq_connected(w->c) || lith__dq_exec_sql(w->c, w->db, w->undo, NULL, 0, NULL) != LITH_DQ_OK))
    drop(w);
  if (w->batch_after[0] != '\0' && lith__dq_connected(w->c) &&
      lith__dq_exec_sql(w->c, w->db, w->batch_after, NULL, 0, NULL) != LITH_DQ_OK)
    drop(w);
  w->undo[0] = w->batch_after[0] = '\0';
}

/* The watch (writer.h, "Who leads"), between batches: is the leader of
 * the connection still the leader? Without one, a round of the
 * addresses. */
static void watch(lith__dqw *w) {
  if (w->ready) {
    uint64_t id = 0;
    const char *addr = "";
    char why[300];
    int rc = lith__dq_leader(w->c, &id, &addr);
    if (rc == LITH_DQ_OK && id == w->lead_id && strcmp(addr, lith__dq_address(w->c)) == 0) {
      if (w->lost_at != 0) /* ready since a failover, no write came */
        settle(w, 0);
      return;
    }
    if (rc == LITH_DQ_OK)
      snprintf(why, sizeof why, "it no longer leads (it names %.*s)", 200, addr[0] != '\0' ? addr : "none");
    else
      snprintf(why, sizeof why, "%s", lith__dq_errmsg(w->c));
    lose_why(w, why);
  }
  if (w->down_since == 0)
    w->down_since = now_ms();
  if (connect_leader(w, 0)) {
    if (w->lost_at != 0)
      settle(w, 0);
    return;
  }
  if (now_ms() - w->down_since >= w->failover_ms)
    tell_none(w);
}

/* Wait for work; with the watch, run it every watch_ms meanwhile. With
 * w->mu held (released while waiting and during the watch). */
static void wait_work(lith__dqw *w) {
  while (w->head == NULL && !w->stopping) {
    if (w->watch_ms <= 0) {
      pthread_cond_wait(&w->cv, &w->mu);
      continue;
    }
    int64_t now = now_ms();
    if (now >= w->next_watch) {
      pthread_mutex_unlock(&w->mu);
      watch(w);
      pthread_mutex_lock(&w->mu);
      w->next_watch = now_ms() + w->watch_ms;
      continue;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t ns = (int64_t)ts.tv_nsec + (w->next_watch - now) * 1000000;
    ts.tv_sec += (time_t)(ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    pthread_cond_timedwait(&w->cv, &w->mu, &ts);
  }
}

static void *writer_main(void *arg) {
  lith__dqw *w = arg;
  lith__dqw_req **batch = malloc(sizeof *batch * (size_t)w->max_batch);
  for (;;) {
    int n = 0;
    pthread_mutex_lock(&w->mu);
    wait_work(w);
    while (w->head != NULL && n < w->max_batch && batch != NULL) {
      lith__dqw_req *r = w->head;
      if (r->alone && n > 0)
        break; /* after these, in a batch of its own */
      w->head = r->next;
      if (w->head == NULL)
        w->tail = NULL;
      r->next = NULL;
      batch[n++] = r;
      if (r->alone)
        break;
    }
    int stop = w->stopping && w->head == NULL && n == 0;
    pthread_mutex_unlock(&w->mu);
    if (stop)
      break;
    if (batch == NULL) { /* no memory for the batch array: one at a time */
      sleep_ms(10);
      batch = malloc(sizeof *batch * (size_t)w->max_batch);
      continue;
    }
    for (int i = 0; i < n; i++) {
      batch[i]->state = REQ_RUN;
      batch[i]->rc = LITH_DQW_OK;
    }
    run_batch(w, batch, n);
    put_back(w);
  }
  free(batch);
  return NULL;
}

int lith__dqw_start(const lith__dqw_options *o, lith__dqw **out) {
  if (o == NULL || o->addresses == NULL || o->database == NULL || out == NULL)
    return LITH_DQW_MISUSE;
  lith__dqw *w = calloc(1, sizeof *w);
  if (w == NULL)
    return LITH_DQW_NOMEM;
  w->failover_ms = o->failover_ms > 0 ? o->failover_ms : 10000;
  w->timeout_ms = o->request_timeout_ms > 0 ? o->request_timeout_ms : LITH_DQ_REQUEST_MS;
  w->max_run_ms = o->max_run_ms > 0 ? o->max_run_ms : 0;
  w->max_batch = o->max_batch > 0 ? o->max_batch : 256;
  w->keep_s = o->keep_s > 0 ? o->keep_s : 600;
  w->fault = o->fault_every > 0 ? o->fault : LITH_DQW_FAULT_NONE;
  w->fault_every = o->fault_every;
  w->watch_ms = o->watch_ms > 0 ? o->watch_ms : 0;
  w->on_leader = o->on_leader;
  w->on_leader_arg = o->on_leader_arg;
  w->addresses = strdup(o->addresses);
  w->database = strdup(o->database);
  w->c = lith__dq_new(w->timeout_ms);
  if (w->addresses == NULL || w->database == NULL || w->c == NULL)
    goto nomem;
  if (pthread_mutex_init(&w->mu, NULL) != 0)
    goto nomem;
  pthread_condattr_t ca; /* the watch's timed waits: on the monotonic clock */
  if (pthread_condattr_init(&ca) != 0)
    goto no_cond;
  int crc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 || pthread_cond_init(&w->cv, &ca) != 0;
  pthread_condattr_destroy(&ca);
  if (crc)
    goto no_cond;
  if (pthread_create(&w->thread, NULL, writer_main, w) != 0)
    goto no_thread;
  *out = w;
  return LITH_DQW_OK;
no_thread:
  pthread_cond_destroy(&w->cv);
no_cond:
  pthread_mutex_destroy(&w->mu);
nomem:
  lith__dq_close(w->c);
  free(w->addresses);
  free(w->database);
  free(w);
  return LITH_DQW_NOMEM;
}

void lith__dqw_stop(lith__dqw *w) {
  if (w == NULL)
    return;
  pthread_mutex_lock(&w->mu);
  w->stopping = 1;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->thread, NULL);
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
  lith__dq_close(w->c);
  free(w->ctl);
  free(w->addresses);
  free(w->database);
  free(w);
}

void lith__dqw_submit(lith__dqw *w, lith__dqw_req *req) {
  req->next = NULL;
  req->state = REQ_QUEUED;
  req->rc = LITH_DQW_OK;
  req->err.code = 0;
  req->err.errmsg[0] = '\0';
  pthread_mutex_lock(&w->mu);
  if (w->stopping) {
    pthread_mutex_unlock(&w->mu);
    req->rc = LITH_DQW_CLOSED;
    set_err(&req->err, 0, "the writer is stopping");
    if (req->done != NULL)
      req->done(req);
    return;
  }
  if (w->tail)
    w->tail->next = req;
  else
    w->head = req;
  w->tail = req;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

typedef struct blocking {
  lith__dqw_req req; /* first: done() casts back */
  sem_t sem;
} blocking;

static void blocking_done(lith__dqw_req *req) { sem_post(&((blocking *)req)->sem); }

int lith__dqw_do(lith__dqw *w, lith__dqw_fn fn, void *arg, lith__dqw_err *err) {
  blocking b = {.req = {.fn = fn, .arg = arg, .done = blocking_done}};
  if (fn == NULL)
    return LITH_DQW_MISUSE;
  if (sem_init(&b.sem, 0, 0) != 0)
    return LITH_DQW_NOMEM;
  lith__dqw_submit(w, &b.req);
  while (sem_wait(&b.sem) != 0)
    ;
  sem_destroy(&b.sem);
  if (err != NULL)
    *err = b.req.err;
  return b.req.rc;
}

void lith__dqw_get_stats(lith__dqw *w, lith__dqw_stats *out) {
  out->batches = atomic_load(&w->st_batches);
  out->commands = atomic_load(&w->st_commands);
  out->failovers = atomic_load(&w->st_failovers);
  out->fenced = atomic_load(&w->st_fenced);
  out->reruns = atomic_load(&w->st_reruns);
  pthread_mutex_lock(&w->mu);
  out->leader_known = w->pub_known;
  memcpy(out->leader, w->pub_lead, sizeof out->leader);
  out->leader_id = w->pub_id;
  out->failover_wait_ms = w->pub_wait_ms;
  pthread_mutex_unlock(&w->mu);
}
