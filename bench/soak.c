/*
 * bench/soak — lithd for SOAK_MINUTES under transfer load, a nemesis and an
 * attacker; after every fault the database is checked. `make soak
 * SOAK_MINUTES=N`. Prints a summary table; exits 1 when a check failed.
 *
 * The database lives on a filesystem of its own that the nemesis can fill:
 * a tmpfs mounted under the run's directory (size from the planned load), or
 * failing that an ext4 image on a loop device; when neither can be mounted
 * (not root, no CAP_SYS_ADMIN) the database stays where it is and the
 * disk-full fault is skipped, said in the table. The real disk is never
 * filled. lithd runs with --schema (100 accounts of 1000, CHECK balance >=
 * 0; a transfers log; a marks table), --commands (one named command,
 * `transfer`: debit, credit, log the transfer under the id the client chose),
 * --backup-dir, --readers 4 (a heavy attack may hold one reader for a minute
 * while issue 10's fix is pending) and --max-run-ms 1000.
 *
 * Load: K client threads, each a keep-alive HTTP/1.1 connection calling
 * POST /v1/commands/transfer at --rate/K per second, between random
 * accounts. Client c's transfer number s has log id (c+1)<<32 | s, so the
 * log shows which transfers ran. Each answer is recorded per transfer:
 * 200 (must be in the log), 409 "CHECK constraint failed" (refused: must
 * not be), 507 (disk full: the batch rolled back, must not be), anything
 * else or no answer within 2 s (either). Outcomes are also counted by the
 * phase the request met (between faults, or during which fault): between
 * faults anything but 200 or a CHECK refusal is an innocent failing.
 *
 * Nemesis, in turn, with a gap between faults:
 *   vanish     clients that send half a request, a whole one, pipelined
 *              ones, a large query, and close or reset before the answer;
 *              lithd must release their connections (its fd count comes
 *              back) and keep serving the others.
 *   slowloris  --slow-conns connections dribbling a byte a second (half of
 *              them headers, half a body) for --slow-seconds; lithd must
 *              keep answering the others: a probe's /v1/query latency stays
 *              within --latency-ms. Reported: how many lithd closed, when.
 *   sigstop    SIGSTOP for 3 s, SIGCONT: clients time out and reconnect;
 *              the same lithd must recover by itself.
 *   diskfull   a filler file until ENOSPC, held 4 s while load continues:
 *              every transfer must be answered 200, 409 or 507; then the
 *              file is deleted and lithd must recover without a restart.
 *   sigkill    SIGKILL, restart on the same file and port.
 * After each: a transfer answered OK after the fault (the recovery time),
 * then through a read-only SQLite connection of our own, in one snapshot:
 * every transfer answered OK present, none refused or 507 present, no log
 * row the clients never sent, money conserved (sum of balances), every
 * balance equal to 1000 plus what the log says came in minus went out (each
 * transfer atomic), no row from a refused attack in marks; then PRAGMA
 * integrity_check; lithd's RSS within --rss-mib.
 *
 * Attacker threads send issue 10's requests and check the answer: the
 * quick ones (one every 250 ms, round robin, paused while lithd is killed
 * or stopped) and the heavy ones (instr over 10 MB on /v1/query and on the
 * writer's /v1/do, printf of 999999999 characters: one at a time, waited
 * for up to 60 s, and while lithd does not answer one, not sent again to
 * the same lithd). A heavy one must be answered within --max-run-ms + 1 s,
 * with an error or a value (SQLite's built-ins give NULL for a string over
 * the length limit). The heavy ones and the two-Content-Length smuggling
 * were open issues when this was written: a wrong answer to them is a
 * finding, not a failure, unless --strict. RSS is sampled every 100 ms;
 * samples taken while a heavy request may be running in lithd are reported
 * apart, so a known peak does not hide a leak.
 *
 * The RSS bound, 256 MiB: lithd idles at ~7 MiB; each of its six SQLite
 * connections (writer, 4 readers, checkpointer) may cache up to the
 * database's size (16 MiB cache_size each, ~96 MiB at most), plus the
 * slowloris connections' buffers (~200 x 16 KiB) and answers in flight
 * (1 MiB for the largest query here): ~110 MiB. Twice that leaves room for
 * allocator slack and still catches a leak that grows with requests.
 *
 * The end: the threads stop, the last check runs against the live lithd,
 * then SIGTERM (exit 0 within 60 s; a heavy read still running makes this a
 * finding, not a failure, and SIGKILL) and the check once more on the file.
 *
 * This machine may be shared: when lithd stops on a SIGTERM/SIGINT the
 * soak did not send (its log says so), that is a disturbance, reported
 * apart; lithd is restarted and the checks it would skew are skipped. Any
 * other end of lithd is a failure.
 *
 * Links SQLite and bench/common.c only: lithd is the thing under test.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include "common.h"
#include "net.h"

#ifndef LITHD_PATH
#define LITHD_PATH "build/default/tools/lithd/lithd"
#endif

extern char **environ;

/* ---- the workload ------------------------------------------------------------- */

enum { NACC = 100, START = 1000, MAXAMT = 50, MAX_CLIENTS = 256 };
#define MONEY ((int64_t)NACC * START)
#define SMUGGLE_BASE (INT64_C(1) << 40) /* marks ids the smuggled INSERT uses */

/* What the request met: between faults, or a fault. */
enum { PH_NONE, PH_VANISH, PH_SLOW, PH_STOP, PH_FULL, PH_KILL, NPH };
static const char *const PH_NAME[NPH] = {"between faults",   "clients that vanish", "slowloris",
                                         "SIGSTOP, SIGCONT", "disk full, freed",    "SIGKILL, restart"};
enum { ROW_END = NPH, NROW }; /* the faults table's rows: PH_VANISH.. and the end */

/* A transfer's recorded outcome. */
enum { O_NONE, O_OK, O_REFUSED, O_FULL, O_OTHER, O_LOST };
/* Counted per phase. */
enum {
  T_SENT,
  T_OK,
  T_REFUSED,
  T_FULL,
  T_STOPPING,
  T_OTHER,
  T_LOST,
  NT
}; /* T_STOPPING: 503 "server stopping" */

enum { CHUNK_BITS = 16, CHUNK = 1 << CHUNK_BITS, MAX_CHUNKS = 16384 };

typedef struct client {
  int idx;
  pthread_t th;
  uint64_t rng;
  uint8_t *chunk[MAX_CHUNKS]; /* outcome of transfer s at chunk[s >> 16][s & 0xffff] */
  _Atomic int64_t sent;       /* transfers sent: 1..sent may be in the log */
  _Atomic int64_t answered;   /* outcomes recorded for 1..answered */
  bench_lat lat;              /* OK answers between faults */
} client;

/* ---- checks --------------------------------------------------------------------- */

enum {
  C_RECOVER,  /* a transfer answered OK after the fault */
  C_PRESENT,  /* every transfer answered OK is in the log */
  C_ABSENT,   /* no transfer refused or answered 507 is */
  C_PHANTOM,  /* no log row the clients did not send */
  C_MONEY,    /* sum of balances */
  C_BALANCES, /* each balance = start + the log's moves */
  C_INTEGRITY,
  C_MARKS, /* refused attacks wrote nothing */
  C_RSS,
  C_SAMEPID,  /* sigstop, diskfull: the same lithd lives on (no restart) */
  C_FULLANS,  /* diskfull: every transfer answered 200/409/507 */
  C_FDS,      /* vanish: connections released */
  C_SERVED,   /* vanish, slowloris: others served, none lost */
  C_LATENCY,  /* slowloris: probe latency bounded */
  C_EXIT,     /* end: SIGTERM, exit 0 */
  C_INNOCENT, /* end: no transfer failed between faults */
  C_ATTACKS,  /* end: every attack got its answer */
  C_PROBE,    /* end: lithd's own read of the sum always right */
  C_ALIVE,    /* lithd never died unasked */
  NCHECK
};
static const char *const CHECK_NAME[NCHECK] = {
    "recovers: a transfer OK after the fault",
    "answered-OK transfers present",
    "refused / 507 transfers absent",
    "no log row never sent",
    "money conserved",
    "balances match the log",
    "PRAGMA integrity_check ok",
    "refused attacks wrote nothing",
    "RSS within the bound",
    "sigstop, disk full: same lithd lives on",
    "disk full: answered 200/409/507",
    "vanish: connections released",
    "others served, none lost",
    "slowloris: probe latency bounded",
    "SIGTERM: exit 0",
    "no innocent transfer failed",
    "attacks answered as expected",
    "probe: lithd's sum always right",
    "lithd never died unasked",
};

/* ---- attacks ------------------------------------------------------------------------ */

typedef struct attack {
  const char *name;
  const char *path;
  const char *headers; /* NULL: Content-Type: application/json */
  const char *body;    /* "@M@": a fresh marks id; "@E@": a path outside --backup-dir; NULL: the smuggling */
  int expect;          /* the status; 0: any 4xx */
  const char *must, *must_not;
  int write;        /* reaches the writer: 507 is right while the disk is full */
  int known;        /* an open issue: a wrong answer is a finding (--strict: a failure) */
  const char *want; /* the expected answer, as the table says it */
} attack;

#define SOAK_CT_JSON "Content-Type: application/json\r\n"
static const attack QUICK[] = {
    {"fts3_tokenizer(?) on /v1/query", "/v1/query", NULL,
     "{\"statements\":[{\"sql\":\"SELECT hex(fts3_tokenizer(?))\",\"params\":[\"simple\"]}]}", 403,
     "not authorized", "\"rows\"", 0, 0, "403, no pointer"},
    {"fts3_tokenizer(?, ?) on /v1/do", "/v1/do", NULL,
     "{\"statements\":[{\"sql\":\"SELECT fts3_tokenizer(?, "
     "?)\",\"params\":[\"simple\",{\"base64\":\"QUFBQUFBQUE=\"}]}]}",
     403, "not authorized", NULL, 1, 0, "403"},
    {"FTS3 TEMP table, tokenize=simple", "/v1/do", NULL,
     "{\"statements\":[{\"sql\":\"CREATE VIRTUAL TABLE temp.f USING fts3(body, tokenize=simple)\"},"
     "{\"sql\":\"INSERT INTO temp.f VALUES ('hello soak')\"},"
     "{\"sql\":\"SELECT count(*) FROM temp.f WHERE f MATCH 'soak'\"}]}",
     200, "\"rows\":[[1]]", NULL, 1, 0, "200, FTS works"},
    {"CREATE TEMP TABLE accounts (shadow)", "/v1/do", NULL,
     "{\"statements\":[{\"sql\":\"CREATE TEMP TABLE accounts(id INTEGER PRIMARY KEY, balance INTEGER)\"},"
     "{\"sql\":\"INSERT INTO temp.accounts SELECT id, 0 FROM main.accounts\"}]}",
     200, NULL, NULL, 1, 0, "200, gone after"},
    {"CREATE TEMP TRIGGER RAISE on accounts", "/v1/do", NULL,
     "{\"statements\":[{\"sql\":\"CREATE TEMP TRIGGER soak_block BEFORE UPDATE ON main.accounts "
     "BEGIN SELECT RAISE(ABORT, 'hijacked'); END\"}]}",
     200, NULL, NULL, 1, 0, "200, gone after"},
    {"CREATE TEMP TRIGGER skimming transfers", "/v1/do", NULL,
     "{\"statements\":[{\"sql\":\"CREATE TEMP TRIGGER soak_skim AFTER INSERT ON main.transfers "
     "BEGIN UPDATE accounts SET balance = balance + 1 WHERE id = 0; END\"}]}",
     200, NULL, NULL, 1, 0, "200, gone after"},
    {"TEMP schema empty at the next command", "/v1/do", NULL,
     "{\"statements\":[{\"sql\":\"SELECT count(*) FROM sqlite_temp_master\"}]}", 200, "\"rows\":[[0]]", NULL,
     1, 0, "200, 0 objects"},
    {"backup to an absolute path", "/v1/backup", NULL, "{\"dest\":\"@E@\"}", 400, "bad_request", NULL, 0, 0,
     "400"},
    {"backup to ../", "/v1/backup", NULL, "{\"dest\":\"../lith-soak-evil.db\"}", 400, "bad_request", NULL, 0,
     0, "400"},
    {"POST text/plain", "/v1/do", "Content-Type: text/plain\r\n",
     "{\"statements\":[{\"sql\":\"INSERT INTO marks VALUES (@M@)\"}]}", 415, NULL, NULL, 0, 0,
     "415, no write"},
    {"foreign Origin", "/v1/do", SOAK_CT_JSON "Origin: http://evil.example\r\n",
     "{\"statements\":[{\"sql\":\"INSERT INTO marks VALUES (@M@)\"}]}", 403, "allow-origin", NULL, 0, 0,
     "403, no write"},
    {"two Content-Length (smuggled INSERT)", "/v1/do", NULL, NULL, 400, NULL, NULL, 0, 1,
     "400, no 2nd request"},
    {"INSERT OR ROLLBACK conflict", "/v1/do", NULL,
     "{\"statements\":[{\"sql\":\"INSERT OR ROLLBACK INTO marks VALUES (0)\"}]}", 409, "UNIQUE", NULL, 1, 0,
     "409, fails alone"},
    {"RELEASE LITH_C", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"RELEASE LITH_C\"}]}", 403, NULL, NULL, 1,
     0, "403, fails alone"},
};
enum { NQUICK = sizeof QUICK / sizeof *QUICK };

/* expect 0: answered within the run limit + 1 s, an error (4xx) or a value
 * (SQLite's built-ins give NULL for a string over the length limit) */
static const attack HEAVY[] = {
    {"instr(10 MB, 200 KB) on /v1/query", "/v1/query", NULL,
     "{\"statements\":[{\"sql\":\"SELECT instr(printf('%.*c',10000000,'a'), "
     "printf('%.*c',200000,'a')||'b')\"}]}",
     0, NULL, NULL, 0, 1, "4xx/200 in run limit + 1 s"},
    {"printf('%.*c', 999999999) on /v1/query", "/v1/query", NULL,
     "{\"statements\":[{\"sql\":\"SELECT printf('%.*c',999999999,'x')\"}]}", 0, NULL, NULL, 0, 1,
     "4xx/200 in run limit + 1 s"},
    {"instr(10 MB, 200 KB) on /v1/do (writer)", "/v1/do", NULL,
     "{\"statements\":[{\"sql\":\"SELECT instr(printf('%.*c',10000000,'a'), "
     "printf('%.*c',200000,'a')||'b')\"}]}",
     0, NULL, NULL, 1, 1, "4xx/200 in run limit + 1 s"},
};
enum { NHEAVY = sizeof HEAVY / sizeof *HEAVY, NATTACK = NQUICK + NHEAVY };

typedef struct attack_stat {
  int64_t sent, expected, unexpected, noanswer, cut, max_ns;
  char first[240]; /* the first unexpected answer */
} attack_stat;

/* ---- configuration and the run's state ----------------------------------------------- */

typedef struct config {
  bench_cli cli;
  double minutes;
  int clients, rate, fs_mib, rss_mib, slow_conns, slow_seconds, latency_ms, run_ms, timeout_ms, strict;
  const char *lithd;
} config;

enum { FS_NONE, FS_TMPFS, FS_LOOP };

typedef struct row_stat {
  int64_t injected, pass, fail, max_recovery_ns, probe_max_ns;
} row_stat;

enum { MAX_MSGS = 40 };

static struct {
  config cfg;
  char dir[4096], fsdir[4200], fsimg[4200], db[4300], log[4200], errlog[4200], schema[4200], cmds[4200],
      backups[4200], evil_abs[256], evil_rel[4200], filler[4300], wal[4310], shm[4310];
  int fs_kind;
  char fs_why[300];
  int64_t t_begin;

  _Atomic int port;
  _Atomic pid_t pid;
  _Atomic int phase, quit, stop, pause_attacks;
  _Atomic uint64_t outages;   /* SIGKILL and SIGSTOP injected so far */
  _Atomic int last_outage;    /* the latest's phase */
  _Atomic uint64_t kills;     /* lithd ended (SIGKILL, or stopped from outside): its connections died */
  _Atomic int64_t stopped_ns; /* total time lithd spent stopped */
  _Atomic int64_t ok_total;
  _Atomic pid_t heavy_pid; /* the lithd that may be running a heavy request */
  _Atomic int64_t marker;
  _Atomic int64_t smuggle_n;

  client *cl; /* cfg.clients of them, then the vanishing clients' (no thread) */
  _Atomic int64_t cnt[NPH][NT];
  _Atomic int64_t tmax_ns[NPH];

  /* the monitor */
  _Atomic int64_t rss_kib, rss_max_kib, rss_heavy_max_kib, fds_max, wal_max;
  /* the probe */
  _Atomic int64_t probe_n[NPH], probe_fail[NPH], probe_max_ns[NPH], probe_money_bad;

  attack_stat att[NATTACK];

  row_stat row[NROW];
  int64_t chk_pass[NCHECK], chk_fail[NCHECK];
  int64_t restarts, deaths, external, slow_closed_hdr, slow_closed_body, slow_open_end, slow_injected;
  double slow_first_close_s, slow_last_close_s;
  int64_t full_507, full_ok, full_bytes;

  pthread_mutex_t mu; /* the messages below, and `other` */
  int failed;
  char fails[MAX_MSGS][300];
  int nfails;
  struct {
    char key[64];
    int64_t count;
    char msg[300];
  } finds[MAX_MSGS];
  int nfinds;
  char disturb[8][200]; /* lithd stopped from outside */
  int ndisturb;
  char other[4][240]; /* the first transfer answers that were neither 200 nor a CHECK refusal */
  int nother;
} soak;

static double soak_since_s(int64_t t) { return (double)(bench_now_ns() - t) / 1e9; }

static void soak_atomic_max(_Atomic int64_t *a, int64_t v) {
  int64_t cur = atomic_load(a);
  while (v > cur && !atomic_compare_exchange_weak(a, &cur, v))
    ;
}

/* ---- messages ------------------------------------------------------------------------- */

static void soak_check_failure(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void soak_check_failure(const char *fmt, ...) {
  char m[300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m, sizeof m, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&soak.mu);
  soak.failed++;
  if (soak.nfails < MAX_MSGS)
    snprintf(soak.fails[soak.nfails++], sizeof soak.fails[0], "%s", m);
  pthread_mutex_unlock(&soak.mu);
  fprintf(stderr, "[%7.1f s] FAIL: %s\n", soak_since_s(soak.t_begin), m);
}

/* A known open lithd issue: counted under `key`, its first message kept.
 * --strict makes it a failure. */
static void soak_check_finding(const char *key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void soak_check_finding(const char *key, const char *fmt, ...) {
  char m[300];
  int i, first = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m, sizeof m, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&soak.mu);
  for (i = 0; i < soak.nfinds && strcmp(soak.finds[i].key, key); i++)
    ;
  if (i == soak.nfinds && soak.nfinds < MAX_MSGS) {
    soak.nfinds++;
    snprintf(soak.finds[i].key, sizeof soak.finds[i].key, "%s", key);
    snprintf(soak.finds[i].msg, sizeof soak.finds[i].msg, "%s", m);
    first = 1;
  }
  if (i < soak.nfinds)
    soak.finds[i].count++;
  if (soak.cfg.strict)
    soak.failed++;
  pthread_mutex_unlock(&soak.mu);
  if (first)
    fprintf(stderr, "[%7.1f s] finding: %s\n", soak_since_s(soak.t_begin), m);
}

/* One check of one fault injection (row): counted, and said when it fails. */
static int soak_check(int row, int which, int ok, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int soak_check(int row, int which, int ok, const char *fmt, ...) {
  if (ok) {
    soak.row[row].pass++;
    soak.chk_pass[which]++;
    return 1;
  }
  char m[240];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m, sizeof m, fmt, ap);
  va_end(ap);
  soak.row[row].fail++;
  soak.chk_fail[which]++;
  soak_check_failure("%s #%lld: %s: %s", row == ROW_END ? "end of run" : PH_NAME[row],
                     (long long)soak.row[row].injected, CHECK_NAME[which], m);
  return 0;
}

/* ---- HTTP ------------------------------------------------------------------------------ */

static int soak_lithd_send(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return -1;
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

/* One answer on fd into in[0..cap] before `deadline`: 1, 0 (time up), -1
 * (closed or failed), -2 (not an answer we read). *len: bytes held. */
static int soak_lithd_read(int fd, char *in, size_t cap, size_t *len, int64_t deadline, bench_answer *a) {
  *len = 0;
  for (;;) {
    int64_t left = deadline - bench_now_ns();
    if (left <= 0)
      return 0;
    struct pollfd p = {fd, POLLIN, 0};
    int n = poll(&p, 1, (int)((left + 999999) / 1000000));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return n == 0 ? 0 : -1;
    int rc = bench_http_recv(fd, in, len, cap, a);
    if (rc != 0)
      return rc;
  }
}

static size_t soak_lithd_post(char *out, size_t cap, const char *path, const char *headers,
                              const char *body) {
  int n = snprintf(out, cap, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%sContent-Length: %zu\r\n\r\n%s", path,
                   headers ? headers : SOAK_CT_JSON, strlen(body), body);
  return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

static int soak_lithd_dial(void) { return bench_dial(atomic_load(&soak.port), 0); }

/* ---- lithd ----------------------------------------------------------------------------- */

static int soak_lithd_start(int port) {
  char listen[64], runms[32], err[400];
  pid_t pid;
  snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
  snprintf(runms, sizeof runms, "%d", soak.cfg.run_ms);
  char *argv[] = {(char *)soak.cfg.lithd,
                  "--db",
                  soak.db,
                  "--listen",
                  listen,
                  "--schema",
                  soak.schema,
                  "--commands",
                  soak.cmds,
                  "--backup-dir",
                  soak.backups,
                  "--readers",
                  "4",
                  "--max-run-ms",
                  runms,
                  "--log",
                  soak.log,
                  NULL};
  int got = bench_server_start(argv, soak.errlog, "lithd", 20, &pid, err, sizeof err);
  if (got < 0) {
    fprintf(stderr, "soak: %s\n", err);
    return -1;
  }
  atomic_store(&soak.pid, pid);
  atomic_store(&soak.port, got);
  return got;
}

/* Does lithd's log say that lithd[pid] stopped on SIGTERM or SIGINT? */
static int log_says_stopped(pid_t pid) {
  char line[1024], a[64], b[64];
  int found = 0;
  snprintf(a, sizeof a, "lithd[%d] info: SIGTERM", (int)pid);
  snprintf(b, sizeof b, "lithd[%d] info: SIGINT", (int)pid);
  FILE *f = fopen(soak.log, "r");
  if (!f)
    return 0;
  while (!found && fgets(line, sizeof line, f))
    found = strstr(line, a) || strstr(line, b);
  fclose(f);
  return found;
}

/* Did lithd end when the soak did not ask? Reaps it, says how, restarts it.
 * An exit its log puts down to SIGTERM/SIGINT came from another process on
 * the machine: a disturbance of the run, reported, not lithd's failure (with
 * the disk full its last checkpoint fails, and it exits 1, as it should). */
static void soak_lithd_watch(void) {
  int st;
  pid_t pid = atomic_load(&soak.pid);
  if (pid <= 0 || waitpid(pid, &st, WNOHANG) != pid)
    return;
  atomic_store(&soak.last_outage, PH_KILL); /* requests in flight met an outage */
  atomic_fetch_add(&soak.outages, 1);
  atomic_fetch_add(&soak.kills, 1);
  if (WIFEXITED(st) && log_says_stopped(pid)) {
    soak.external++;
    fprintf(stderr,
            "[%7.1f s] disturbance: lithd (pid %d) stopped on a SIGTERM/SIGINT the soak did not send "
            "(exit status %d); restarting it\n",
            soak_since_s(soak.t_begin), (int)pid, WEXITSTATUS(st));
    pthread_mutex_lock(&soak.mu);
    if (soak.ndisturb < 8)
      snprintf(
          soak.disturb[soak.ndisturb++], sizeof soak.disturb[0],
          "at %.1f s (%s) lithd (pid %d) stopped on a SIGTERM/SIGINT from another process, exit status %d",
          soak_since_s(soak.t_begin), PH_NAME[atomic_load(&soak.phase)], (int)pid, WEXITSTATUS(st));
    pthread_mutex_unlock(&soak.mu);
  } else {
    soak.deaths++;
    soak_check_failure("lithd (pid %d) ended by itself: %s %d; restarting it", (int)pid,
                       WIFEXITED(st) ? "status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    bench_log_tail(soak.errlog, "lithd");
  }
  if (soak_lithd_start(atomic_load(&soak.port)) < 0)
    atomic_store(&soak.quit, 1);
}

static long soak_lithd_rss_kib(pid_t pid) {
  char path[64], line[256];
  long v = -1;
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return -1;
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "VmRSS:", 6)) {
      v = atol(line + 6);
      break;
    }
  fclose(f);
  return v;
}

static int soak_lithd_fds(pid_t pid) {
  char path[64];
  int n = 0;
  snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
  DIR *d = opendir(path);
  if (!d)
    return -1;
  const struct dirent *e;
  while ((e = readdir(d)) != NULL)
    n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

/* ---- the transfer clients --------------------------------------------------------------- */

static void set_outcome(client *c, int64_t s, int o) {
  c->chunk[s >> CHUNK_BITS][s & (CHUNK - 1)] = (uint8_t)o;
}
static int soak_load_outcome(const client *c, int64_t s) {
  return c->chunk[s >> CHUNK_BITS][s & (CHUNK - 1)];
}

static size_t soak_load_transfer_request(char *out, size_t cap, int64_t id, int src, int dst, int amount) {
  char body[200];
  snprintf(body, sizeof body, "{\"params\":{\"id\":%lld,\"src\":%d,\"dst\":%d,\"amount\":%d}}", (long long)id,
           src, dst, amount);
  return soak_lithd_post(out, cap, "/v1/commands/transfer", NULL, body);
}

static void soak_load_random_transfer(uint64_t *rng, int *src, int *dst, int *amount) {
  *src = (int)(bench_rng_next(rng) % NACC);
  *dst = (*src + 1 + (int)(bench_rng_next(rng) % (NACC - 1))) % NACC;
  *amount = 1 + (int)(bench_rng_next(rng) % MAXAMT);
}

/* The phase a request is counted under: the fault it met, if any. A request
 * that failed on a keep-alive connection older than lithd's last end met
 * that end (it found the connection dead), whenever it was sent. */
static int phase_of(int ph0, uint64_t out0, int failed, uint64_t conn_kills) {
  int ph1 = atomic_load(&soak.phase);
  if (ph0 != PH_NONE)
    return ph0;
  if (ph1 != PH_NONE)
    return ph1;
  if (failed && atomic_load(&soak.kills) != conn_kills)
    return PH_KILL;
  return atomic_load(&soak.outages) != out0 ? atomic_load(&soak.last_outage) : PH_NONE;
}

static void *soak_load_client_main(void *arg) {
  client *c = arg;
  int fd = -1;
  char req[512], in[4097];
  uint64_t conn_kills = 0; /* lithd's ends when fd was opened */
  int64_t interval = soak.cfg.rate > 0 ? (int64_t)(1e9 * soak.cfg.clients / soak.cfg.rate) : 0;
  int64_t next = bench_now_ns();
  while (!atomic_load(&soak.stop)) {
    if (interval) {
      next += interval;
      if (next < bench_now_ns() - 1000000000) /* after an outage: no burst to catch up */
        next = bench_now_ns();
      bench_sleep_until(next);
    }
    if (fd < 0) {
      conn_kills = atomic_load(&soak.kills);
      if ((fd = soak_lithd_dial()) < 0) {
        bench_sleep_ms(20); /* lithd restarting */
        continue;
      }
    }
    int64_t s = atomic_load(&c->sent) + 1;
    if ((s >> CHUNK_BITS) >= MAX_CHUNKS)
      break;
    if (!c->chunk[s >> CHUNK_BITS] && !(c->chunk[s >> CHUNK_BITS] = calloc(CHUNK, 1))) {
      soak_check_failure("client %d: out of memory", c->idx);
      break;
    }
    int src, dst, amount;
    soak_load_random_transfer(&c->rng, &src, &dst, &amount);
    size_t n =
        soak_load_transfer_request(req, sizeof req, ((int64_t)(c->idx + 1) << 32) | s, src, dst, amount);
    int ph0 = atomic_load(&soak.phase);
    uint64_t out0 = atomic_load(&soak.outages);
    atomic_store(&c->sent, s); /* before the bytes leave: the log may hold s from now on */
    int64_t t0 = bench_now_ns();
    bench_answer a;
    size_t len = 0;
    int rc =
        soak_lithd_send(fd, req, n) == 0
            ? soak_lithd_read(fd, in, sizeof in - 1, &len, t0 + (int64_t)soak.cfg.timeout_ms * 1000000, &a)
            : -1;
    int64_t dt = bench_now_ns() - t0;
    int ph = phase_of(ph0, out0, rc != 1, conn_kills), o, t;
    if (rc != 1) {
      o = O_LOST;
      t = T_LOST;
    } else if (a.status == 200) {
      o = O_OK;
      t = T_OK;
      atomic_fetch_add(&soak.ok_total, 1);
      if (ph == PH_NONE)
        bench_lat_add(&c->lat, (uint64_t)dt);
    } else if (a.status == 409 && strstr(in + a.head_len, "CHECK constraint failed")) {
      o = O_REFUSED;
      t = T_REFUSED;
    } else if (a.status == 507) {
      o = O_FULL;
      t = T_FULL;
    } else if (a.status == 503 && strstr(in + a.head_len, "stopping")) {
      o = O_OTHER;
      t = T_STOPPING;
    } else {
      o = O_OTHER;
      t = T_OTHER;
      pthread_mutex_lock(&soak.mu);
      if (soak.nother < 4)
        snprintf(soak.other[soak.nother++], sizeof soak.other[0], "%s: HTTP %d %.180s", PH_NAME[ph], a.status,
                 in + a.head_len);
      pthread_mutex_unlock(&soak.mu);
    }
    set_outcome(c, s, o);
    atomic_store(&c->answered, s);
    atomic_fetch_add(&soak.cnt[ph][T_SENT], 1);
    atomic_fetch_add(&soak.cnt[ph][t], 1);
    soak_atomic_max(&soak.tmax_ns[ph], dt);
    if (rc != 1 || a.closes) {
      close(fd);
      fd = -1;
    }
  }
  if (fd >= 0)
    close(fd);
  return NULL;
}

/* ---- the probe: lithd's own read of the money, and its latency ----------------------------- */

static void *soak_load_probe_main(void *arg) {
  static const char body[] = "{\"statements\":[{\"sql\":\"SELECT sum(balance), count(*) FROM accounts\"}]}";
  char req[512], in[4097];
  size_t n = soak_lithd_post(req, sizeof req, "/v1/query", NULL, body);
  int fd = -1;
  uint64_t conn_kills = 0;
  while (!atomic_load(&soak.stop)) {
    bench_sleep_ms(100);
    if (fd < 0) {
      conn_kills = atomic_load(&soak.kills);
      if ((fd = soak_lithd_dial()) < 0)
        continue;
    }
    int ph0 = atomic_load(&soak.phase);
    uint64_t out0 = atomic_load(&soak.outages);
    int64_t t0 = bench_now_ns();
    bench_answer a;
    size_t len;
    int rc = soak_lithd_send(fd, req, n) == 0
                 ? soak_lithd_read(fd, in, sizeof in - 1, &len, t0 + 5000000000, &a)
                 : -1;
    int64_t dt = bench_now_ns() - t0;
    int ph = phase_of(ph0, out0, rc != 1 || a.status != 200, conn_kills);
    atomic_fetch_add(&soak.probe_n[ph], 1);
    soak_atomic_max(&soak.probe_max_ns[ph], dt);
    int64_t sum;
    const char *rows = rc == 1 ? strstr(in + a.head_len, "\"rows\":[[") : NULL;
    if (rc != 1 || a.status != 200 || !rows) {
      atomic_fetch_add(&soak.probe_fail[ph], 1);
    } else if ((sum = strtoll(rows + 9, NULL, 10)) != MONEY &&
               atomic_fetch_add(&soak.probe_money_bad, 1) < 3) {
      soak_check_failure("probe: lithd's /v1/query says the balances sum to %lld, not %lld", (long long)sum,
                         (long long)MONEY);
    }
    if (rc != 1 || a.closes) {
      close(fd);
      fd = -1;
    }
  }
  if (fd >= 0)
    close(fd);
  return NULL;
}

/* ---- the monitor: RSS and descriptors every 100 ms ----------------------------------------- */

static void *soak_lithd_monitor_main(void *arg) {
  while (!atomic_load(&soak.stop)) {
    pid_t pid = atomic_load(&soak.pid);
    long kib = soak_lithd_rss_kib(pid);
    int fds = soak_lithd_fds(pid);
    if (kib > 0) {
      atomic_store(&soak.rss_kib, kib);
      /* a heavy request may be running in this lithd: its known peak apart */
      soak_atomic_max(atomic_load(&soak.heavy_pid) == pid ? &soak.rss_heavy_max_kib : &soak.rss_max_kib, kib);
    }
    if (fds > 0)
      soak_atomic_max(&soak.fds_max, fds);
    struct stat st;
    if (stat(soak.wal, &st) == 0) /* its peak: lith truncates it to journal_size_limit at a reset */
      soak_atomic_max(&soak.wal_max, (int64_t)st.st_size);
    bench_sleep_ms(100);
  }
  return NULL;
}

/* ---- the attackers ------------------------------------------------------------------------ */

/* tmpl with "@M@" replaced by m and "@E@" by the path outside --backup-dir. */
static void fill_body(char *out, size_t cap, const char *tmpl, int64_t m) {
  size_t n = 0;
  for (const char *p = tmpl; *p && n + 1 < cap;) {
    int k = 0;
    if (!strncmp(p, "@M@", 3))
      k = snprintf(out + n, cap - n, "%lld", (long long)m);
    else if (!strncmp(p, "@E@", 3))
      k = snprintf(out + n, cap - n, "%s", soak.evil_abs);
    else {
      out[n++] = *p++;
      continue;
    }
    p += 3;
    n += k > 0 ? ((size_t)k < cap - n ? (size_t)k : cap - n - 1) : 0;
  }
  out[n] = '\0';
}

/* A harmless request framed by its first Content-Length, a second request
 * (an INSERT into marks) inside the body its second one frames. */
static size_t smuggle_request(char *out, size_t cap, int64_t mark) {
  static const char b1[] = "{\"statements\":[{\"sql\":\"SELECT 1\"}]}";
  char b2[160], inner[512];
  snprintf(b2, sizeof b2, "{\"statements\":[{\"sql\":\"INSERT INTO marks VALUES (%lld)\"}]}",
           (long long)mark);
  soak_lithd_post(inner, sizeof inner, "/v1/do", NULL, b2);
  int n = snprintf(out, cap,
                   "POST /v1/do HTTP/1.1\r\nHost: 127.0.0.1\r\n" SOAK_CT_JSON
                   "Content-Length: %zu\r\nContent-Length: %zu\r\n\r\n"
                   "%s%s",
                   strlen(b1), strlen(b1) + strlen(inner), b1, inner);
  return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

/* Attack k's answer: as expected, or not (then `column` is counted, the
 * first message kept, and it is a failure, or a finding for an open issue). */
static void judge(int k, int ok, int64_t *column, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void judge(int k, int ok, int64_t *column, const char *fmt, ...) {
  const attack *a = k < NQUICK ? &QUICK[k] : &HEAVY[k - NQUICK];
  attack_stat *st = &soak.att[k];
  char m[240];
  if (ok) {
    st->expected++;
    return;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m, sizeof m, fmt, ap);
  va_end(ap);
  (*column)++;
  if (!st->first[0])
    snprintf(st->first, sizeof st->first, "%s", m);
  if (a->known)
    soak_check_finding(a->name, "%s: %s", a->name, m);
  else
    soak_check_failure("attack %s: %s", a->name, m);
}

/* Send attack k on a fresh connection and judge the answer. */
static void attack_once(int k) {
  const attack *a = &QUICK[k];
  attack_stat *st = &soak.att[k];
  char req[2048], in[16385];
  size_t n, len = 0;
  if (!a->body) {
    n = smuggle_request(req, sizeof req, SMUGGLE_BASE + atomic_fetch_add(&soak.smuggle_n, 1));
  } else {
    char body[1024];
    fill_body(body, sizeof body, a->body, atomic_fetch_add(&soak.marker, 1));
    n = soak_lithd_post(req, sizeof req, a->path, a->headers, body);
  }
  int fd = soak_lithd_dial();
  if (fd < 0)
    return; /* lithd not listening (a restart): not sent */
  st->sent++;
  int ph0 = atomic_load(&soak.phase);
  uint64_t out0 = atomic_load(&soak.outages);
  int64_t t0 = bench_now_ns();
  bench_answer ans;
  int rc = soak_lithd_send(fd, req, n) == 0
               ? soak_lithd_read(fd, in, sizeof in - 1, &len, t0 + 5000000000, &ans)
               : -1;
  int64_t dt = bench_now_ns() - t0;
  if (dt > st->max_ns)
    st->max_ns = dt;
  int full = ph0 == PH_FULL || atomic_load(&soak.phase) == PH_FULL;
  if (rc != 1) {
    if (atomic_load(&soak.outages) != out0 || ph0 == PH_KILL || ph0 == PH_STOP) {
      st->cut++;
    } else {
      judge(k, 0, &st->noanswer, "no answer within 5 s (%s)", rc == 0 ? "timed out" : "connection closed");
    }
    close(fd);
    return;
  }
  const char *b = in + ans.head_len;
  int ok = a->expect ? ans.status == a->expect : ans.status >= 400 && ans.status < 500;
  if (!ok && a->write && full && ans.status == 507)
    ok = 1;
  else if (ok && a->must && !strstr(b, a->must))
    ok = 0;
  else if (ok && a->must_not && strstr(b, a->must_not))
    ok = 0;
  judge(k, ok, &st->unexpected, "HTTP %d after %.0f ms: %.150s", ans.status, (double)dt / 1e6, b);
  if (!a->body) {
    /* Framed by the first length, the rest is a second request: its answer follows. */
    size_t off = ans.total, more = len - off;
    memmove(in, in + off, more);
    in[more] = '\0';
    bench_answer a2;
    int rc2 = bench_http_parse(in, more, sizeof in - 1, &a2);
    int64_t until = bench_now_ns() + 500000000;
    while (rc2 == 0 && bench_now_ns() < until) {
      struct pollfd p = {fd, POLLIN, 0};
      if (poll(&p, 1, 50) == 1)
        rc2 = bench_http_recv(fd, in, &more, sizeof in - 1, &a2);
    }
    if (rc2 == 1)
      soak_check_finding("smuggled-answered",
                         "two Content-Length: the smuggled second request was answered HTTP %d: %.120s",
                         a2.status, in + a2.head_len);
  }
  close(fd);
}

static void *soak_attack_quick_main(void *arg) {
  int k = 0;
  while (!atomic_load(&soak.stop)) {
    bench_sleep_ms(250);
    if (atomic_load(&soak.pause_attacks))
      continue;
    attack_once(k);
    k = (k + 1) % NQUICK;
  }
  return NULL;
}

/* The heavy requests, one at a time; while a lithd has not answered one,
 * it gets no other (it may still be running it). */
static void *soak_attack_heavy_main(void *arg) {
  int k = 0;
  pid_t skip = 0;
  char req[1024], in[4097];
  bench_sleep_ms(1500);
  while (!atomic_load(&soak.stop)) {
    pid_t pid = atomic_load(&soak.pid);
    if (atomic_load(&soak.pause_attacks) || pid == skip) {
      bench_sleep_ms(200);
      continue;
    }
    const attack *a = &HEAVY[k];
    attack_stat *st = &soak.att[NQUICK + k];
    size_t n = soak_lithd_post(req, sizeof req, a->path, a->headers, a->body), len = 0;
    int fd = soak_lithd_dial();
    if (fd < 0) {
      bench_sleep_ms(200);
      continue;
    }
    st->sent++;
    uint64_t out0 = atomic_load(&soak.outages);
    int full = atomic_load(&soak.phase) == PH_FULL;
    int64_t stop0 = atomic_load(&soak.stopped_ns), t0 = bench_now_ns(), cap = t0 + 60000000000;
    atomic_store(&soak.heavy_pid, pid);
    bench_answer ans;
    int rc = soak_lithd_send(fd, req, n) == 0 ? 0 : -1;
    while (rc == 0 && !atomic_load(&soak.stop) && bench_now_ns() < cap)
      rc = soak_lithd_read(fd, in, sizeof in - 1, &len, bench_now_ns() + 200000000, &ans);
    /* the time lithd was stopped does not count against it */
    int64_t dt = bench_now_ns() - t0 - (atomic_load(&soak.stopped_ns) - stop0);
    int64_t limit = (int64_t)(soak.cfg.run_ms + 1000) * 1000000;
    if (dt > st->max_ns)
      st->max_ns = dt;
    if (rc == 1) {
      atomic_store(&soak.heavy_pid, 0);
      const char *b = in + ans.head_len, *rows = strstr(b, "\"rows\":");
      full |= atomic_load(&soak.phase) == PH_FULL;
      int ok = ans.status == 200 || (ans.status >= 400 && ans.status < 500) ||
               (a->write && full && ans.status == 507);
      judge(NQUICK + k, ok && dt <= limit, &st->unexpected, "HTTP %d after %.2f s (limit %.1f s): %.120s",
            ans.status, (double)dt / 1e9, (double)limit / 1e9, rows ? rows : b);
    } else if (rc == -2) {
      atomic_store(&soak.heavy_pid, 0);
      judge(NQUICK + k, 0, &st->unexpected, "after %.1f s an answer over %zu bytes (the string itself?)",
            (double)dt / 1e9, sizeof in - 1);
    } else if (atomic_load(&soak.outages) != out0 && pid != atomic_load(&soak.pid)) {
      st->cut++; /* lithd was killed under it */
    } else if (atomic_load(&soak.stop)) {
      st->sent--; /* the run ended first: not judged */
    } else {
      skip = pid;
      judge(
          NQUICK + k, 0, &st->noanswer,
          "no answer after %.1f s (%s); not sent again to this lithd (pid %d), which may still be running it",
          (double)dt / 1e9, rc == 0 ? "gave up" : "connection closed", (int)pid);
    }
    close(fd);
    k = (k + 1) % NHEAVY;
    for (int i = 0; i < 15 && !atomic_load(&soak.stop); i++)
      bench_sleep_ms(200);
  }
  return NULL;
}

/* ---- the database check ------------------------------------------------------------------- */

typedef struct dbcheck {
  int opened;
  char err[200];
  int64_t missing, wrongly, phantom, money, naccounts, bad_balances, marks_bad, marks_smuggled, rows;
  char first_missing[120], first_wrong[120], first_phantom[120];
  int integrity_ok;
  char integrity[200];
  double seconds;
} dbcheck;

static int64_t col_int(sqlite3 *db, const char *sql, int64_t arg, int col, int *failed) {
  sqlite3_stmt *st = NULL;
  int64_t v = -1;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
    (*failed)++;
    return -1;
  }
  if (sqlite3_bind_parameter_count(st) >= 1)
    sqlite3_bind_int64(st, 1, arg);
  if (sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int64(st, col);
  else
    (*failed)++;
  sqlite3_finalize(st);
  return v;
}

/* Walk client c's log rows against its recorded outcomes: 1..W judged, up to S allowed. */
static void merge_client(sqlite3_stmt *st, int c, int64_t W, int64_t S, dbcheck *d) {
  const client *cl = &soak.cl[c];
  int64_t lo = (int64_t)(c + 1) << 32, next = 1;
  sqlite3_bind_int64(st, 1, lo);
  sqlite3_bind_int64(st, 2, lo + (INT64_C(1) << 32));
  for (;;) {
    int64_t seq = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) - lo : INT64_MAX;
    /* the transfers before this row are absent */
    for (; next < seq && next <= W; next++)
      if (soak_load_outcome(cl, next) == O_OK && d->missing++ == 0)
        snprintf(d->first_missing, sizeof d->first_missing, "client %d transfer %lld", c, (long long)next);
    if (seq == INT64_MAX)
      break;
    d->rows++;
    if (seq < 1 || seq > S) {
      if (d->phantom++ == 0)
        snprintf(d->first_phantom, sizeof d->first_phantom, "client %d transfer %lld (sent %lld)", c,
                 (long long)seq, (long long)S);
    } else if (seq <= W) {
      int o = soak_load_outcome(cl, seq);
      if ((o == O_REFUSED || o == O_FULL) && d->wrongly++ == 0)
        snprintf(d->first_wrong, sizeof d->first_wrong, "client %d transfer %lld answered %s", c,
                 (long long)seq, o == O_REFUSED ? "409 CHECK" : "507");
    }
    next = seq + 1;
  }
  sqlite3_reset(st);
}

static void db_check(dbcheck *d) {
  int nc = soak.cfg.clients + 1, failed = 0;
  int64_t W[MAX_CLIENTS + 1], S[MAX_CLIENTS + 1];
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  int64_t t0 = bench_now_ns();
  memset(d, 0, sizeof *d);
  /* What was answered before the snapshot must be in it. */
  for (int c = 0; c < nc; c++)
    W[c] = atomic_load(&soak.cl[c].answered);
  if (sqlite3_open_v2(soak.db, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
    snprintf(d->err, sizeof d->err, "open: %s", db ? sqlite3_errmsg(db) : "out of memory");
    sqlite3_close(db);
    return;
  }
  sqlite3_busy_timeout(db, 10000);
  if (sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
    snprintf(d->err, sizeof d->err, "BEGIN: %s", sqlite3_errmsg(db));
    sqlite3_close(db);
    return;
  }
  d->opened = 1;
  d->money = col_int(db, "SELECT sum(balance) FROM accounts", 0, 0, &failed); /* the snapshot starts here */
  d->naccounts = col_int(db, "SELECT count(*) FROM accounts", 0, 0, &failed);
  /* Sent before the snapshot's end, so no row may be beyond. */
  for (int c = 0; c < nc; c++)
    S[c] = atomic_load(&soak.cl[c].sent);
  if (sqlite3_prepare_v2(db, "SELECT id FROM transfers WHERE id >= ?1 AND id < ?2 ORDER BY id", -1, &st,
                         NULL) == SQLITE_OK) {
    for (int c = 0; c < nc; c++)
      merge_client(st, c, W[c], S[c], d);
  } else {
    failed++;
  }
  sqlite3_finalize(st);
  /* Every transfer all or nothing: each balance is its start plus its moves. */
  d->bad_balances =
      col_int(db,
              "WITH moves(id, v) AS (SELECT dst, amount FROM transfers UNION ALL "
              "SELECT src, -amount FROM transfers), net(id, v) AS (SELECT id, sum(v) FROM moves GROUP BY id) "
              "SELECT count(*) FROM accounts a LEFT JOIN net n ON n.id = a.id "
              "WHERE a.balance != ?1 + coalesce(n.v, 0)",
              START, 0, &failed);
  d->marks_bad = col_int(db, "SELECT count(*) FROM marks WHERE id > 0 AND id < ?1", SMUGGLE_BASE, 0, &failed);
  d->marks_smuggled = col_int(db, "SELECT count(*) FROM marks WHERE id >= ?1", SMUGGLE_BASE, 0, &failed);
  sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
  if (failed)
    snprintf(d->err, sizeof d->err, "%d queries failed: %s", failed, sqlite3_errmsg(db));
  if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    const char *t = (const char *)sqlite3_column_text(st, 0);
    snprintf(d->integrity, sizeof d->integrity, "%s", t ? t : "(null)");
    d->integrity_ok = t && !strcmp(t, "ok");
  } else {
    snprintf(d->integrity, sizeof d->integrity, "cannot run: %s", sqlite3_errmsg(db));
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  d->seconds = soak_since_s(t0);
}

/* The checks every fault ends with. */
static void soak_check_common(int row) {
  dbcheck d;
  db_check(&d);
  if (!d.opened) {
    soak_check(row, C_PRESENT, 0, "cannot check the database: %s", d.err);
    return;
  }
  if (d.err[0])
    soak_check_failure("database check: %s", d.err);
  soak_check(row, C_PRESENT, d.missing == 0, "%lld transfers answered OK are missing, the first %s",
             (long long)d.missing, d.first_missing);
  soak_check(row, C_ABSENT, d.wrongly == 0,
             "%lld transfers refused or answered 507 are in the log, the first %s", (long long)d.wrongly,
             d.first_wrong);
  soak_check(row, C_PHANTOM, d.phantom == 0, "%lld log rows were never sent, the first %s",
             (long long)d.phantom, d.first_phantom);
  soak_check(row, C_MONEY, d.money == MONEY && d.naccounts == NACC,
             "balances sum to %lld over %lld accounts, not %lld", (long long)d.money, (long long)d.naccounts,
             (long long)MONEY);
  soak_check(row, C_BALANCES, d.bad_balances == 0, "%lld balances differ from what the log moved",
             (long long)d.bad_balances);
  soak_check(row, C_INTEGRITY, d.integrity_ok, "integrity_check: %s", d.integrity);
  soak_check(row, C_MARKS, d.marks_bad == 0, "%lld rows of refused requests in marks",
             (long long)d.marks_bad);
  if (d.marks_smuggled)
    soak_check_finding("smuggled-ran", "two Content-Length: %lld smuggled INSERTs ran (rows in marks)",
                       (long long)d.marks_smuggled);
  if (atomic_load(&soak.pid) <= 0)
    return; /* the file alone: no RSS */
  long kib = soak_lithd_rss_kib(atomic_load(&soak.pid));
  if (kib > (long)soak.cfg.rss_mib * 1024 && atomic_load(&soak.heavy_pid) == atomic_load(&soak.pid))
    soak_check_finding("rss-heavy", "RSS %ld MiB at a check while a heavy request may be running",
                       kib / 1024);
  else
    soak_check(row, C_RSS, kib <= (long)soak.cfg.rss_mib * 1024, "RSS %ld KiB, over %d MiB", kib,
               soak.cfg.rss_mib);
}

/* ---- the nemesis ---------------------------------------------------------------------------- */

static int64_t soak_load_count(int ph, int t) { return atomic_load(&soak.cnt[ph][t]); }

/* Wait (30 s at most) for a transfer answered OK after `since_ok` were; the time since t_fault. */
static int64_t wait_recovery(int64_t since_ok, int64_t t_fault) {
  int64_t until = bench_now_ns() + 30000000000;
  while (atomic_load(&soak.ok_total) <= since_ok && bench_now_ns() < until)
    bench_sleep_ms(1);
  return atomic_load(&soak.ok_total) > since_ok ? bench_now_ns() - t_fault : -1;
}

/* Other clients during a fault that should not hurt them: answered, and
 * some OK. An outside stop of lithd meanwhile excuses what it cost. */
static void served(int ph, const int64_t d[NT], int64_t ext0) {
  if (soak.external != ext0) {
    fprintf(stderr, "[%7.1f s] %s #%lld: others-served check skipped (lithd was stopped from outside)\n",
            soak_since_s(soak.t_begin), PH_NAME[ph], (long long)soak.row[ph].injected);
    return;
  }
  soak_check(
      ph, C_SERVED,
      (d[T_SENT] == 0 || d[T_OK] > 0) && d[T_LOST] + d[T_OTHER] + d[T_STOPPING] + d[T_FULL] == 0,
      "others' transfers: %lld sent, %lld OK, %lld no answer, %lld other answers, %lld 503 stopping, %lld "
      "507",
      (long long)d[T_SENT], (long long)d[T_OK], (long long)d[T_LOST], (long long)d[T_OTHER],
      (long long)d[T_STOPPING], (long long)d[T_FULL]);
}

static void begin_fault(int ph, int pause) {
  soak.row[ph].injected++;
  if (pause)
    atomic_store(&soak.pause_attacks, 1);
  atomic_store(&soak.phase, ph);
}

static void end_fault(int ph) {
  atomic_store(&soak.phase, PH_NONE);
  atomic_store(&soak.pause_attacks, 0);
  if (soak.row[ph].probe_max_ns < atomic_load(&soak.probe_max_ns[ph]))
    soak.row[ph].probe_max_ns = atomic_load(&soak.probe_max_ns[ph]);
}

/* The database's filesystem: what holds its space. */
static void say_fs(void) {
  struct stat db, wal, shm;
  struct statvfs vf;
  if (stat(soak.db, &db) != 0)
    db.st_size = -1;
  if (stat(soak.wal, &wal) != 0)
    wal.st_size = -1;
  if (stat(soak.shm, &shm) != 0)
    shm.st_size = -1;
  double avail = statvfs(soak.db, &vf) == 0 ? (double)vf.f_bavail * (double)vf.f_frsize / 1048576 : -1;
  fprintf(stderr,
          "[%7.1f s]   the filesystem: soak.db %.1f MiB, -wal %.1f MiB, -shm %lld KiB, %.1f MiB free\n",
          soak_since_s(soak.t_begin), (double)db.st_size / 1048576, (double)wal.st_size / 1048576,
          (long long)shm.st_size / 1024, avail);
}

static void note_recovery(int ph, int64_t rec) {
  if (soak_check(ph, C_RECOVER, rec >= 0, "no transfer answered OK within 30 s") &&
      rec > soak.row[ph].max_recovery_ns)
    soak.row[ph].max_recovery_ns = rec;
  else if (rec < 0 && soak.fs_kind != FS_NONE)
    say_fs();
}

static void soak_fault_sigkill(void) {
  begin_fault(PH_KILL, 1);
  atomic_store(&soak.last_outage, PH_KILL);
  atomic_fetch_add(&soak.outages, 1);
  atomic_fetch_add(&soak.kills, 1);
  pid_t pid = atomic_load(&soak.pid);
  int64_t t0 = bench_now_ns();
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  int port = -1;
  for (int i = 0; i < 5 && port < 0; i++) {
    port = soak_lithd_start(atomic_load(&soak.port));
    if (port < 0)
      bench_sleep_ms(500);
  }
  if (port < 0) {
    soak_check(PH_KILL, C_RECOVER, 0, "lithd did not restart on %s", soak.db);
    atomic_store(&soak.quit, 1);
    end_fault(PH_KILL);
    return;
  }
  soak.restarts++;
  note_recovery(PH_KILL, wait_recovery(atomic_load(&soak.ok_total), t0));
  end_fault(PH_KILL);
  soak_check_common(PH_KILL);
}

static void soak_fault_sigstop(void) {
  begin_fault(PH_STOP, 1);
  atomic_store(&soak.last_outage, PH_STOP);
  atomic_fetch_add(&soak.outages, 1);
  pid_t pid = atomic_load(&soak.pid);
  int64_t t0 = bench_now_ns();
  kill(pid, SIGSTOP);
  bench_sleep_ms(3000);
  kill(pid, SIGCONT);
  int64_t t1 = bench_now_ns();
  atomic_fetch_add(&soak.stopped_ns, t1 - t0);
  note_recovery(PH_STOP, wait_recovery(atomic_load(&soak.ok_total), t1));
  soak_check(PH_STOP, C_SAMEPID,
             waitpid(pid, NULL, WNOHANG) == 0 && kill(pid, 0) == 0 && atomic_load(&soak.pid) == pid,
             "lithd (pid %d) is gone", (int)pid);
  end_fault(PH_STOP);
  soak_check_common(PH_STOP);
}

/* Write the filler until ENOSPC: big pieces, then pages. Bytes written, or -1. */
static int64_t fill_disk(int fd) {
  static char buf[1 << 20];
  int64_t total = 0;
  for (size_t piece = sizeof buf; piece >= 4096; piece /= 16) {
    for (;;) {
      ssize_t k = write(fd, buf, piece);
      if (k > 0) {
        total += k;
        continue;
      }
      if (k < 0 && errno == EINTR)
        continue;
      if (k < 0 && errno != ENOSPC)
        return -1;
      break;
    }
  }
  return total;
}

static void soak_fault_diskfull(void) {
  begin_fault(PH_FULL, 0);
  int64_t ext0 = soak.external;
  pid_t pid = atomic_load(&soak.pid);
  int64_t before[NT];
  for (int t = 0; t < NT; t++)
    before[t] = soak_load_count(PH_FULL, t);
  int fd = open(soak.filler, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  int64_t bytes = fd >= 0 ? fill_disk(fd) : -1;
  if (fd >= 0)
    close(fd);
  if (bytes < 0)
    soak_check_failure("disk full: cannot write the filler %s: %s", soak.filler, strerror(errno));
  soak.full_bytes = bytes;
  for (int i = 0; i < 40; i++) { /* held 4 s while the load goes on */
    bench_sleep_ms(100);
    soak_lithd_watch();
  }
  int64_t since = atomic_load(&soak.ok_total), t0 = bench_now_ns();
  unlink(soak.filler);
  note_recovery(PH_FULL, wait_recovery(since, t0));
  end_fault(PH_FULL);
  int64_t d[NT];
  for (int t = 0; t < NT; t++)
    d[t] = soak_load_count(PH_FULL, t) - before[t];
  soak.full_507 += d[T_FULL];
  soak.full_ok += d[T_OK];
  if (soak.external == ext0)
    soak_check(PH_FULL, C_SAMEPID, waitpid(pid, NULL, WNOHANG) == 0 && atomic_load(&soak.pid) == pid,
               "lithd (pid %d) did not live through the full disk", (int)pid);
  if (soak.external == ext0)
    soak_check(PH_FULL, C_FULLANS, d[T_OTHER] == 0 && d[T_LOST] == 0 && d[T_STOPPING] == 0,
               "of %lld transfers while full: %lld got another answer, %lld none (%lld OK, %lld 507)",
               (long long)d[T_SENT], (long long)(d[T_OTHER] + d[T_STOPPING]), (long long)d[T_LOST],
               (long long)d[T_OK], (long long)d[T_FULL]);
  soak_check_common(PH_FULL);
}

/* Clients that go away at every step of a request. */
static void soak_fault_vanish(void) {
  enum { EACH = 8 };
  char req[2048], big[512];
  begin_fault(PH_VANISH, 0);
  int64_t ext0 = soak.external;
  pid_t pid = atomic_load(&soak.pid);
  int64_t before[NT];
  for (int t = 0; t < NT; t++)
    before[t] = soak_load_count(PH_VANISH, t);
  int fds0 = soak_lithd_fds(pid);
  client *v = &soak.cl[soak.cfg.clients];
  uint64_t rng = bench_rng_seed(7, (uint64_t)soak.row[PH_VANISH].injected);
  soak_lithd_post(
      big, sizeof big, "/v1/query", NULL,
      "{\"statements\":[{\"sql\":\"WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c "
      "WHERE i < 9000) "
      "SELECT i, printf('%0100d', i) FROM c\"}]}");
  size_t biglen = strlen(big);
  for (int kind = 0; kind < 8; kind++)
    for (int i = 0; i < EACH; i++) {
      int fd = soak_lithd_dial();
      if (fd < 0)
        continue;
      int src, dst, amount, npipe = kind == 5 ? 10 : 1;
      size_t n = 0;
      for (int p = 0; p < npipe; p++) { /* the vanishing clients' transfers: outcome unknown */
        soak_load_random_transfer(&rng, &src, &dst, &amount);
        int64_t s = atomic_fetch_add(&v->sent, 1) + 1;
        n += soak_load_transfer_request(req + n, sizeof req - n, ((int64_t)(soak.cfg.clients + 1) << 32) | s,
                                        src, dst, amount);
      }
      switch (kind) {
      case 0: /* half the headers */ soak_lithd_send(fd, req, n / 4); break;
      case 1: /* the headers, half the body */ soak_lithd_send(fd, req, n - 20); break;
      case 2: /* all of it, gone before the answer */
      case 5: /* ten pipelined */ soak_lithd_send(fd, req, n); break;
      case 3: { /* all of it, then a reset */
        struct linger lg = {1, 0};
        soak_lithd_send(fd, req, n);
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        break;
      }
      case 4: /* a 1 MB answer nobody reads */ soak_lithd_send(fd, big, biglen); break;
      case 6: /* nothing at all */ break;
      default: /* all of it, half-closed */
        soak_lithd_send(fd, req, n);
        shutdown(fd, SHUT_WR);
        break;
      }
      close(fd);
    }
  /* lithd lets go of them: its descriptors come back (the others' reconnects: a few of slack) */
  int64_t t0 = bench_now_ns();
  int fds = soak_lithd_fds(pid);
  while (fds > fds0 + 4 && bench_now_ns() - t0 < 5000000000) {
    bench_sleep_ms(20);
    fds = soak_lithd_fds(pid);
  }
  soak_check(PH_VANISH, C_FDS, fds <= fds0 + 4, "lithd holds %d descriptors 5 s after the burst, %d before",
             fds, fds0);
  bench_sleep_ms(300);
  end_fault(PH_VANISH);
  int64_t d[NT];
  for (int t = 0; t < NT; t++)
    d[t] = soak_load_count(PH_VANISH, t) - before[t];
  soak_lithd_watch();
  served(PH_VANISH, d, ext0);
  soak_check_common(PH_VANISH);
}

/* Connections that send a byte a second, never finishing their request. */
static void soak_fault_slowloris(void) {
  int n = soak.cfg.slow_conns;
  int *fd = bench_xcalloc((size_t)n, sizeof *fd);
  double *closed = bench_xcalloc((size_t)n, sizeof *closed);
  char head[256];
  begin_fault(PH_SLOW, 0);
  int64_t ext0 = soak.external;
  atomic_store(&soak.probe_max_ns[PH_SLOW], 0);
  int64_t before[NT];
  for (int t = 0; t < NT; t++)
    before[t] = soak_load_count(PH_SLOW, t);
  int64_t t0 = bench_now_ns();
  for (int i = 0; i < n; i++) {
    fd[i] = bench_dial(atomic_load(&soak.port), 1);
    if (fd[i] < 0)
      continue;
    /* even: headers a byte at a time; odd: whole headers, then the body a byte at a time */
    int hl = i % 2 ? snprintf(head, sizeof head,
                              "POST /v1/do HTTP/1.1\r\nHost: 127.0.0.1\r\n" SOAK_CT_JSON
                              "Content-Length: 100000\r\n\r\n")
                   : snprintf(head, sizeof head, "POST /v1/do HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ");
    send(fd[i], head, (size_t)hl, MSG_NOSIGNAL);
  }
  soak.slow_injected += n;
  for (int sec = 0; sec < soak.cfg.slow_seconds && !atomic_load(&soak.quit); sec++) {
    bench_sleep_ms(1000);
    soak_lithd_watch();
    for (int i = 0; i < n; i++) {
      if (fd[i] < 0 || closed[i] > 0)
        continue;
      char junk[512];
      /* lithd closed it, or answered (a 408, say): done; else one more byte */
      ssize_t k = recv(fd[i], junk, sizeof junk, MSG_DONTWAIT);
      if (k >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK) ||
          send(fd[i], i % 2 ? " " : "a", 1, MSG_NOSIGNAL) != 1)
        closed[i] = soak_since_s(t0);
    }
  }
  int nh = 0, nb = 0, open_end = 0;
  for (int i = 0; i < n; i++) {
    if (fd[i] < 0)
      continue;
    if (closed[i] > 0) {
      i % 2 ? nb++ : nh++;
      if (soak.slow_first_close_s == 0 || closed[i] < soak.slow_first_close_s)
        soak.slow_first_close_s = closed[i];
      if (closed[i] > soak.slow_last_close_s)
        soak.slow_last_close_s = closed[i];
    } else {
      open_end++;
    }
    close(fd[i]);
  }
  soak.slow_closed_hdr += nh;
  soak.slow_closed_body += nb;
  soak.slow_open_end += open_end;
  int64_t pmax = atomic_load(&soak.probe_max_ns[PH_SLOW]);
  end_fault(PH_SLOW);
  int64_t d[NT];
  for (int t = 0; t < NT; t++)
    d[t] = soak_load_count(PH_SLOW, t) - before[t];
  soak_check(PH_SLOW, C_LATENCY, pmax <= (int64_t)soak.cfg.latency_ms * 1000000 || soak.external != ext0,
             "a probe took %.0f ms while %d connections dribbled (bound %d ms)", (double)pmax / 1e6, n,
             soak.cfg.latency_ms);
  soak_lithd_watch();
  served(PH_SLOW, d, ext0);
  free(fd);
  free(closed);
  soak_check_common(PH_SLOW);
}

/* ---- the filesystem ----------------------------------------------------------------------- */

static int run_quiet(char *const argv[]) {
  pid_t pid;
  int st;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0 || waitpid(pid, &st, 0) != pid)
    return -1;
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* A small filesystem for the database: tmpfs, else an ext4 image on a loop
 * device, else none (the disk-full fault is then skipped). */
static void soak_fault_fs_setup(void) {
  char opt[64];
  int e1;
  mkdir(soak.fsdir, 0700);
  snprintf(opt, sizeof opt, "size=%dm,mode=0700", soak.cfg.fs_mib);
  if (mount("tmpfs", soak.fsdir, "tmpfs", MS_NOSUID | MS_NODEV, opt) == 0) {
    soak.fs_kind = FS_TMPFS;
    snprintf(soak.fs_why, sizeof soak.fs_why, "tmpfs of %d MiB at %.200s", soak.cfg.fs_mib, soak.fsdir);
    return;
  }
  e1 = errno;
  int fd = open(soak.fsimg, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd >= 0 && ftruncate(fd, (off_t)soak.cfg.fs_mib << 20) == 0) {
    close(fd);
    char *mkfs[] = {"mkfs.ext4", "-q", "-F", "-m", "0", soak.fsimg, NULL};
    char *mnt[] = {"mount", "-o", "loop", soak.fsimg, soak.fsdir, NULL};
    if (run_quiet(mkfs) == 0 && run_quiet(mnt) == 0) {
      soak.fs_kind = FS_LOOP;
      snprintf(soak.fs_why, sizeof soak.fs_why, "ext4 of %d MiB on a loop device at %.200s (tmpfs: %s)",
               soak.cfg.fs_mib, soak.fsdir, strerror(e1));
      return;
    }
  } else if (fd >= 0) {
    close(fd);
  }
  unlink(soak.fsimg);
  soak.fs_kind = FS_NONE;
  snprintf(soak.fs_why, sizeof soak.fs_why,
           "the run's directory (%s): mount tmpfs refused (%s), loop mount failed", bench_fs_name(soak.dir),
           strerror(e1));
}

/* A failed run's database, copied out of the filesystem about to go. */
static void soak_fault_keep_db(void) {
  char dest[4400];
  sqlite3 *from = NULL, *to = NULL;
  snprintf(dest, sizeof dest, "%s/soak-kept.db", soak.dir);
  if (sqlite3_open_v2(soak.db, &from, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
      sqlite3_open(dest, &to) == SQLITE_OK) {
    sqlite3_backup *b = sqlite3_backup_init(to, "main", from, "main");
    if (b) {
      sqlite3_backup_step(b, -1);
      sqlite3_backup_finish(b);
    }
  }
  sqlite3_close(from);
  sqlite3_close(to);
}

static void soak_fault_fs_teardown(void) {
  if (soak.fs_kind != FS_NONE && umount2(soak.fsdir, 0) != 0 && umount2(soak.fsdir, MNT_DETACH) != 0)
    fprintf(stderr, "soak: umount %s: %s\n", soak.fsdir, strerror(errno));
  if (soak.fs_kind == FS_LOOP)
    unlink(soak.fsimg);
  rmdir(soak.fsdir);
}

/* ---- the end --------------------------------------------------------------------------------- */

static void soak_check_end(void) {
  soak.row[ROW_END].injected = 1;
  soak_lithd_watch();
  soak_check_common(ROW_END); /* live, every answer in */
  pid_t pid = atomic_load(&soak.pid);
  int heavy = atomic_load(&soak.heavy_pid) == pid;
  if (heavy) {
    /* SIGTERM waits for a read that runs past --max-run-ms (README: not yet) */
    int st;
    kill(pid, SIGTERM);
    int64_t until = bench_now_ns() + 15000000000;
    while (waitpid(pid, &st, WNOHANG) == 0 && bench_now_ns() < until)
      bench_sleep_ms(10);
    if (kill(pid, 0) == 0) {
      soak_check_finding("sigterm-heavy",
                         "SIGTERM: lithd still running 15 s later with a heavy read in flight; SIGKILL");
      kill(pid, SIGKILL);
      waitpid(pid, NULL, 0);
    } else {
      soak_check(ROW_END, C_EXIT, WIFEXITED(st) && WEXITSTATUS(st) == 0, "lithd ended with %s %d",
                 WIFEXITED(st) ? "status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    }
  } else {
    char err[400];
    soak_check(ROW_END, C_EXIT, bench_server_stop(pid, soak.errlog, "lithd", err, sizeof err) == 0, "%s",
               err);
  }
  atomic_store(&soak.pid, 0);
  soak_check_common(ROW_END); /* the file as lithd left it */
  /* 507 between faults: the disk is full without the filler. No answer, or
   * 503 stopping: excused only by an outside stop. */
  int64_t other = soak_load_count(PH_NONE, T_OTHER) + soak_load_count(PH_NONE, T_FULL),
          gone = soak.external ? 0 : soak_load_count(PH_NONE, T_LOST) + soak_load_count(PH_NONE, T_STOPPING);
  soak_check(
      ROW_END, C_INNOCENT, other + gone == 0,
      "%lld transfers between faults failed (%lld 507, %lld other answers, %lld none, %lld 503 stopping)",
      (long long)(other + gone), (long long)soak_load_count(PH_NONE, T_FULL),
      (long long)soak_load_count(PH_NONE, T_OTHER), (long long)soak_load_count(PH_NONE, T_LOST),
      (long long)soak_load_count(PH_NONE, T_STOPPING));
  int64_t bad = 0;
  for (int k = 0; k < NATTACK; k++)
    if (!(k < NQUICK ? QUICK[k] : HEAVY[k - NQUICK]).known || soak.cfg.strict)
      bad += soak.att[k].unexpected + soak.att[k].noanswer;
  soak_check(ROW_END, C_ATTACKS, bad == 0, "%lld attacks got a wrong answer or none", (long long)bad);
  soak_check(ROW_END, C_PROBE, atomic_load(&soak.probe_money_bad) == 0, "%lld probes read a wrong sum",
             (long long)atomic_load(&soak.probe_money_bad));
  soak_check(ROW_END, C_ALIVE, soak.deaths == 0, "lithd ended by itself %lld times", (long long)soak.deaths);
  soak_check(ROW_END, C_RSS, atomic_load(&soak.rss_max_kib) <= (int64_t)soak.cfg.rss_mib * 1024,
             "RSS reached %lld KiB outside heavy requests, over %d MiB",
             (long long)atomic_load(&soak.rss_max_kib), soak.cfg.rss_mib);
  if (atomic_load(&soak.rss_heavy_max_kib) > (int64_t)soak.cfg.rss_mib * 1024)
    soak_check_finding("rss-heavy-peak", "RSS peaked at %lld MiB while a heavy request ran (bound %d MiB)",
                       (long long)atomic_load(&soak.rss_heavy_max_kib) / 1024, soak.cfg.rss_mib);
}

static int soak_lithd_log_errors(void) {
  char line[1024];
  int n = 0;
  FILE *f = fopen(soak.log, "r");
  if (!f)
    return -1;
  while (fgets(line, sizeof line, f))
    n += strstr(line, " error: ") != NULL;
  fclose(f);
  return n;
}

static void soak_report_fmt_ms(char *b, size_t n, int64_t ns) {
  bench_fmt_ms(b, n, ns < 0 ? NAN : (double)ns / 1e6, 1);
}

static void soak_report_print(void) {
  char a[32], b[32];
  printf("\n### faults\n\n| fault | injected | checks passed | checks failed | max recovery ms | max probe "
         "ms |\n"
         "|---|--:|--:|--:|--:|--:|\n");
  for (int r = PH_VANISH; r <= ROW_END; r++) {
    const row_stat *x = &soak.row[r];
    const char *name = r == ROW_END ? "end: live check, SIGTERM, file check" : PH_NAME[r];
    if (r == PH_FULL && soak.fs_kind == FS_NONE) {
      printf("| %s | skipped: %s | | | | |\n", name, soak.fs_why);
      continue;
    }
    soak_report_fmt_ms(
        a, sizeof a, x->injected && r != PH_VANISH && r != PH_SLOW && r != ROW_END ? x->max_recovery_ns : -1);
    soak_report_fmt_ms(b, sizeof b, r == ROW_END ? -1 : x->probe_max_ns ? x->probe_max_ns : -1);
    printf("| %s | %lld | %lld | %lld | %s | %s |\n", name, (long long)x->injected, (long long)x->pass,
           (long long)x->fail, a, b);
  }
  printf("\nRecovery: from SIGKILL, SIGCONT or the filler's deletion to the next transfer answered OK. "
         "Probe: lithd's\n"
         "/v1/query of the balances' sum every 100 ms, its slowest answer during the fault.\n");

  printf("\n### checks\n\n| check | passed | failed |\n|---|--:|--:|\n");
  for (int c = 0; c < NCHECK; c++)
    if (soak.chk_pass[c] + soak.chk_fail[c])
      printf("| %s | %lld | %lld |\n", CHECK_NAME[c], (long long)soak.chk_pass[c],
             (long long)soak.chk_fail[c]);

  printf(
      "\n### transfers (POST /v1/commands/transfer, %d clients, %d/s)\n\n"
      "| phase met | sent | OK | refused (CHECK) | 507 | 503 stopping | other answer | no answer | max ms |\n"
      "|---|--:|--:|--:|--:|--:|--:|--:|--:|\n",
      soak.cfg.clients, soak.cfg.rate);
  for (int p = 0; p < NPH; p++) {
    if (!soak_load_count(p, T_SENT))
      continue;
    soak_report_fmt_ms(a, sizeof a, atomic_load(&soak.tmax_ns[p]));
    printf("| %s | %lld | %lld | %lld | %lld | %lld | %lld | %lld | %s |\n", PH_NAME[p],
           (long long)soak_load_count(p, T_SENT), (long long)soak_load_count(p, T_OK),
           (long long)soak_load_count(p, T_REFUSED), (long long)soak_load_count(p, T_FULL),
           (long long)soak_load_count(p, T_STOPPING), (long long)soak_load_count(p, T_OTHER),
           (long long)soak_load_count(p, T_LOST), a);
  }
  bench_lat *bufs[MAX_CLIENTS];
  for (int c = 0; c < soak.cfg.clients; c++)
    bufs[c] = &soak.cl[c].lat;
  static const double qs[2] = {0.5, 0.99};
  bench_lat_sum s;
  if (bench_lat_merge(bufs, soak.cfg.clients, qs, 2, &s) == 0 && s.count) {
    char c50[32], c99[32], cmx[32];
    bench_fmt_ms(c50, sizeof c50, s.q[0] / 1e6, 1);
    bench_fmt_ms(c99, sizeof c99, s.q[1] / 1e6, 1);
    bench_fmt_ms(cmx, sizeof cmx, (double)s.max / 1e6, 1);
    printf("\nOK between faults: p50 %s ms, p99 %s ms, max %s ms%s. The vanishing clients sent %lld more "
           "(outcome "
           "unknown).\n",
           c50, c99, cmx, s.sampled ? " (sampled)" : "",
           (long long)atomic_load(&soak.cl[soak.cfg.clients].sent));
  }
  for (int i = 0; i < soak.nother; i++)
    printf("%s other answer: %s\n", i ? "" : "\n", soak.other[i]);

  printf("\n### attacks\n\n| request | sent | as expected | unexpected | no answer | cut by a fault | max ms "
         "| expected |\n"
         "|---|--:|--:|--:|--:|--:|--:|---|\n");
  for (int k = 0; k < NATTACK; k++) {
    const attack *x = k < NQUICK ? &QUICK[k] : &HEAVY[k - NQUICK];
    const attack_stat *st = &soak.att[k];
    soak_report_fmt_ms(a, sizeof a, st->sent ? st->max_ns : -1);
    printf("| %s%s | %lld | %lld | %lld | %lld | %lld | %s | %s |\n", x->name, x->known ? " †" : "",
           (long long)st->sent, (long long)st->expected, (long long)st->unexpected, (long long)st->noanswer,
           (long long)st->cut, a, x->want);
  }
  printf("\n† issue 10 items, fixed since and still asked: a wrong answer is a finding, not a failure,\n"
         "unless --strict. Cut by a fault: no answer because lithd was killed or stopped meanwhile.\n");
  for (int k = 0; k < NATTACK; k++)
    if (soak.att[k].first[0])
      printf("- %s, first wrong answer: %s\n", (k < NQUICK ? QUICK[k] : HEAVY[k - NQUICK]).name,
             soak.att[k].first);

  printf("\n### lithd\n\n");
  printf("- RSS max %lld MiB outside heavy requests (bound %d MiB), %lld MiB while one may run\n",
         (long long)atomic_load(&soak.rss_max_kib) / 1024, soak.cfg.rss_mib,
         (long long)atomic_load(&soak.rss_heavy_max_kib) / 1024);
  printf("- descriptors: at most %lld; restarts after SIGKILL: %lld; ended by itself: %lld; stopped from "
         "outside: "
         "%lld; error lines in its log: %d\n",
         (long long)atomic_load(&soak.fds_max), (long long)soak.restarts, (long long)soak.deaths,
         (long long)soak.external, soak_lithd_log_errors());
  printf("- the WAL file: at most %.1f MiB (its peak; a checkpoint that resets it truncates it to "
         "journal_size_limit)\n",
         (double)atomic_load(&soak.wal_max) / 1048576);
  if (soak.row[PH_FULL].injected)
    printf("- disk full: filler %lld MiB the last time; while full %lld transfers answered 507, %lld OK\n",
           (long long)(soak.full_bytes >> 20), (long long)soak.full_507, (long long)soak.full_ok);
  if (soak.slow_injected)
    printf("- slowloris: of %lld connections lithd closed %lld dribbling headers and %lld dribbling a body "
           "(between "
           "%.0f and %.0f s); %lld were open at the end of their %d s\n",
           (long long)soak.slow_injected, (long long)soak.slow_closed_hdr, (long long)soak.slow_closed_body,
           soak.slow_first_close_s, soak.slow_last_close_s, (long long)soak.slow_open_end,
           soak.cfg.slow_seconds);
  printf("- probes (/v1/query): ");
  for (int p = 0; p < NPH; p++) {
    soak_report_fmt_ms(a, sizeof a, p ? soak.row[p].probe_max_ns : atomic_load(&soak.probe_max_ns[p]));
    if (atomic_load(&soak.probe_n[p]))
      printf("%s%s %lld, %lld failed, max %s ms", p ? "; " : "", PH_NAME[p],
             (long long)atomic_load(&soak.probe_n[p]), (long long)atomic_load(&soak.probe_fail[p]), a);
  }
  printf("\n");

  printf("\n### findings (the † items: not failures%s)\n\n", soak.cfg.strict ? "; --strict: failures" : "");
  if (!soak.nfinds)
    printf("none\n");
  for (int i = 0; i < soak.nfinds; i++)
    printf("- %s (x%lld)\n", soak.finds[i].msg, (long long)soak.finds[i].count);
  if (soak.ndisturb) {
    printf("\n### disturbances (from outside the soak: the checks they would skew were skipped)\n\n");
    for (int i = 0; i < soak.ndisturb; i++)
      printf("- %s\n", soak.disturb[i]);
  }
  printf("\n### failures\n\n");
  if (!soak.failed)
    printf("none\n");
  for (int i = 0; i < soak.nfails; i++)
    printf("- %s\n", soak.fails[i]);
  if (soak.failed > soak.nfails)
    printf("- ... %d more\n", soak.failed - soak.nfails);
}

/* ---- options ------------------------------------------------------------------------------ */

static void usage(FILE *f) {
  fprintf(
      f, "usage: bench/soak [options]   (lithd under load, faults and attacks; make soak SOAK_MINUTES=N)\n"
         "  --minutes M        how long (default 1; --quick: 0.5)\n"
         "  --clients K        transfer clients (default 8)\n"
         "  --rate R           transfers per second, all clients (default 1000; 0: as fast as answered)\n"
         "  --fs-mib N         the database's filesystem (default: room for the planned transfers)\n"
         "  --rss-mib N        lithd's RSS bound (default 256)\n"
         "  --slow-conns N     slowloris connections (default 200)\n"
         "  --slow-seconds S   how long they dribble (default 12: past lithd's 10 s request timeout)\n"
         "  --latency-ms MS    a probe's bound while they do (default 1000)\n"
         "  --run-ms MS        lithd's --max-run-ms (default 1000)\n"
         "  --timeout-ms MS    a transfer's wait for its answer (default 2000)\n"
         "  --strict           open issues' findings (heavy requests, smuggling) fail the run\n"
         "  --db-dir DIR       the run's directory (default: a new one under /tmp, removed when all passed)\n"
         "  --lithd PATH       the lithd binary (default " LITHD_PATH ")\n"
         "  --help\n");
}

static int take_int(const char *v, const char *opt, long lo, long hi) {
  char *e;
  long n = strtol(v, &e, 10);
  if (e == v || *e || n < lo || n > hi)
    bench_die_usage("%s takes %ld..%ld, got %s", opt, lo, hi, v);
  return (int)n;
}

static int take_option(void *ctx, const char *a, const char *v) {
  config *c = ctx;
  if (!strcmp(a, "--minutes")) {
    char *e;
    c->minutes = strtod(v, &e);
    if (e == v || *e || !(c->minutes > 0) || c->minutes > 100000)
      bench_die_usage("--minutes takes a positive number, got %s", v);
  } else if (!strcmp(a, "--clients")) {
    c->clients = take_int(v, a, 1, MAX_CLIENTS - 1);
  } else if (!strcmp(a, "--rate")) {
    c->rate = take_int(v, a, 0, 1000000);
  } else if (!strcmp(a, "--fs-mib")) {
    c->fs_mib = take_int(v, a, 8, 1 << 20);
  } else if (!strcmp(a, "--rss-mib")) {
    c->rss_mib = take_int(v, a, 8, 1 << 20);
  } else if (!strcmp(a, "--slow-conns")) {
    c->slow_conns = take_int(v, a, 0, 10000);
  } else if (!strcmp(a, "--slow-seconds")) {
    c->slow_seconds = take_int(v, a, 1, 3600);
  } else if (!strcmp(a, "--latency-ms")) {
    c->latency_ms = take_int(v, a, 1, 600000);
  } else if (!strcmp(a, "--timeout-ms")) {
    c->timeout_ms = take_int(v, a, 10, 600000);
  } else if (!strcmp(a, "--run-ms")) {
    c->run_ms = take_int(v, a, 1, 600000);
  } else if (!strcmp(a, "--strict")) {
    c->strict = take_int(v, a, 0, 1);
  } else if (!strcmp(a, "--lithd")) {
    c->lithd = v;
  } else {
    return 0;
  }
  return 1;
}

static void parse_args(int argc, char **argv, config *c) {
  /* --strict takes no value; bench_cli_parse wants one for every option but --quick */
  char **av = bench_xcalloc((size_t)argc * 2 + 1, sizeof *av);
  int n = 0;
  for (int i = 0; i < argc; i++) {
    av[n++] = argv[i];
    if (!strcmp(argv[i], "--strict"))
      av[n++] = "1";
  }
  memset(c, 0, sizeof *c);
  c->cli = (bench_cli){.prog = "bench/soak", .usage = usage, .min_seconds = 0.05, .max_rounds = 1};
  c->clients = 8;
  c->rate = 1000;
  c->rss_mib = 256;
  c->slow_conns = 200;
  c->slow_seconds = 12;
  c->latency_ms = 1000;
  c->run_ms = 1000;
  c->timeout_ms = 2000;
  c->lithd = LITHD_PATH;
  bench_cli_parse(&c->cli, n, av, take_option, c);
  free(av);
  if (!c->minutes)
    c->minutes = c->cli.quick ? 0.5 : 1;
  if (!c->fs_mib) /* a log row takes ~18 bytes (measured): 48 each, and 32 MiB for the WAL and the rest */
    c->fs_mib = c->rate ? 32 + (int)(c->rate * c->minutes * 60 * 48 / (1 << 20)) : 1024;
}

/* ---- main -------------------------------------------------------------------------------------- */

static void on_signal(int sig) { atomic_store(&soak.quit, 1); }

static int write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f)
    return -1;
  fputs(text, f);
  return fclose(f);
}

static int setup_files(void) {
  char schema[1024];
  snprintf(schema, sizeof schema,
           "CREATE TABLE accounts(id INTEGER PRIMARY KEY, balance INTEGER NOT NULL CHECK (balance >= 0));\n"
           "CREATE TABLE transfers(id INTEGER PRIMARY KEY, src INTEGER NOT NULL, dst INTEGER NOT NULL,\n"
           "                       amount INTEGER NOT NULL);\n"
           "CREATE TABLE marks(id INTEGER PRIMARY KEY); -- what refused attacks would write\n"
           "INSERT INTO marks VALUES (0); -- for INSERT OR ROLLBACK to conflict with\n"
           "WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < %d)\n"
           "  INSERT INTO accounts SELECT i, %d FROM c;\n",
           NACC - 1, START);
  snprintf(soak.schema, sizeof soak.schema, "%s/schema.sql", soak.dir);
  snprintf(soak.cmds, sizeof soak.cmds, "%s/commands.sql", soak.dir);
  snprintf(soak.backups, sizeof soak.backups, "%s/backups", soak.dir);
  snprintf(soak.log, sizeof soak.log, "%s/lithd.log", soak.dir);
  snprintf(soak.errlog, sizeof soak.errlog, "%s/lithd-stderr.log", soak.dir);
  snprintf(soak.fsdir, sizeof soak.fsdir, "%s/fs", soak.dir);
  snprintf(soak.fsimg, sizeof soak.fsimg, "%s/fs.img", soak.dir);
  snprintf(soak.evil_abs, sizeof soak.evil_abs, "/tmp/lith-soak-evil-%d.db", (int)getpid());
  snprintf(soak.evil_rel, sizeof soak.evil_rel, "%s/lith-soak-evil.db", soak.dir);
  mkdir(soak.backups, 0700);
  return write_text(soak.schema, schema) ||
         write_text(soak.cmds,
                    "-- name: transfer\n"
                    "-- Move :amount from :src to :dst, logged under the client's own :id.\n"
                    "UPDATE accounts SET balance = balance - :amount WHERE id = :src;\n"
                    "UPDATE accounts SET balance = balance + :amount WHERE id = :dst;\n"
                    "INSERT INTO transfers(id, src, dst, amount) VALUES (:id, :src, :dst, :amount);\n");
}

static void remove_run_files(void) {
  static const char *const suffix[] = {"", "-wal", "-shm", "-journal", "-lithd.lock"};
  char p[4400];
  for (size_t i = 0; i < sizeof suffix / sizeof *suffix; i++) {
    snprintf(p, sizeof p, "%s%s", soak.db, suffix[i]);
    unlink(p);
  }
  unlink(soak.filler);
  unlink(soak.schema);
  unlink(soak.cmds);
  unlink(soak.log);
  unlink(soak.errlog);
  rmdir(soak.backups);
}

int main(int argc, char **argv) {
  config *c = &soak.cfg;
  char tmpl[] = "/tmp/lith-soak-XXXXXX";
  pthread_t th_probe, th_mon, th_att, th_heavy;
  parse_args(argc, argv, c);
  pthread_mutex_init(&soak.mu, NULL);
  signal(SIGPIPE, SIG_IGN);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  if (access(c->lithd, X_OK) != 0) {
    fprintf(stderr, "bench/soak: cannot run %s (%s); build it (make lithd) or pass --lithd PATH\n", c->lithd,
            strerror(errno));
    return 2;
  }
  int own_dir = bench_db_dir(&c->cli.db_dir, tmpl);
  if (!realpath(c->cli.db_dir, soak.dir)) {
    perror("bench/soak: realpath");
    return 1;
  }
  if (setup_files() != 0) {
    perror("bench/soak: writing the schema and commands");
    return 1;
  }
  soak_fault_fs_setup();
  const char *dbdir = soak.fs_kind == FS_NONE ? soak.dir : soak.fsdir;
  snprintf(soak.db, sizeof soak.db, "%s/soak.db", dbdir);
  snprintf(soak.filler, sizeof soak.filler, "%s/filler", dbdir);
  snprintf(soak.wal, sizeof soak.wal, "%s-wal", soak.db);
  snprintf(soak.shm, sizeof soak.shm, "%s-shm", soak.db);

  bench_machine m;
  bench_machine_get(&m);
  bench_print_intro("lithd soak", argc, argv, 1);
  printf("machine: nproc %ld, CPU %s, kernel %s\n", m.nproc, m.cpu, m.kernel);
  printf("lithd: %s (--readers 4 --max-run-ms %d); SQLite %s (checks)\n", c->lithd, c->run_ms,
         sqlite3_libversion());
  printf("database: %s, on %s\n", soak.db, soak.fs_why);
  printf("plan: %g min; %d clients, %d transfers/s; faults in turn: vanish, slowloris (%d conns, %d s), "
         "SIGSTOP, "
         "disk full%s, SIGKILL; RSS bound %d MiB\n",
         c->minutes, c->clients, c->rate, c->slow_conns, c->slow_seconds,
         soak.fs_kind == FS_NONE ? " (skipped)" : "", c->rss_mib);
  fflush(stdout);

  soak.cl = bench_xcalloc((size_t)c->clients + 1, sizeof *soak.cl);
  soak.t_begin = bench_now_ns();
  if (soak_lithd_start(0) < 0) {
    soak_fault_fs_teardown();
    return 1;
  }
  size_t latcap = bench_lat_cap(c->clients, c->minutes * 60);
  for (int i = 0; i <= c->clients; i++) {
    soak.cl[i].idx = i;
    soak.cl[i].rng = bench_rng_seed(0x50a4, (uint64_t)i);
    if (bench_lat_init(&soak.cl[i].lat, 0, latcap, (uint64_t)i + 1) != 0) {
      fprintf(stderr, "bench/soak: out of memory\n");
      return 1;
    }
  }
  for (int i = 0; i < c->clients; i++)
    pthread_create(&soak.cl[i].th, NULL, soak_load_client_main, &soak.cl[i]);
  pthread_create(&th_probe, NULL, soak_load_probe_main, NULL);
  pthread_create(&th_mon, NULL, soak_lithd_monitor_main, NULL);
  pthread_create(&th_att, NULL, soak_attack_quick_main, NULL);
  pthread_create(&th_heavy, NULL, soak_attack_heavy_main, NULL);

  static void (*const FAULT[])(void) = {soak_fault_vanish, soak_fault_slowloris, soak_fault_sigstop,
                                        soak_fault_diskfull, soak_fault_sigkill};
  static const int FAULT_PH[] = {PH_VANISH, PH_SLOW, PH_STOP, PH_FULL, PH_KILL};
  int64_t deadline = soak.t_begin + (int64_t)(c->minutes * 60e9);
  for (int i = 0; !atomic_load(&soak.quit) && bench_now_ns() < deadline; i++) {
    for (int w = 0; w < 15 && !atomic_load(&soak.quit); w++) { /* a gap of 1.5 s: load and attacks only */
      bench_sleep_ms(100);
      soak_lithd_watch();
    }
    int f = i % 5;
    if (FAULT_PH[f] == PH_FULL && soak.fs_kind == FS_NONE)
      continue;
    if (atomic_load(&soak.quit) || bench_now_ns() >= deadline)
      break;
    int64_t fail0 = soak.row[FAULT_PH[f]].fail;
    FAULT[f]();
    fprintf(stderr, "[%7.1f s] %s #%lld: %s; %lld transfers OK so far, RSS %lld MiB\n",
            soak_since_s(soak.t_begin), PH_NAME[FAULT_PH[f]], (long long)soak.row[FAULT_PH[f]].injected,
            soak.row[FAULT_PH[f]].fail > fail0 ? "CHECKS FAILED" : "checks passed",
            (long long)atomic_load(&soak.ok_total), (long long)atomic_load(&soak.rss_kib) / 1024);
  }

  atomic_store(&soak.stop, 1);
  for (int i = 0; i < c->clients; i++)
    pthread_join(soak.cl[i].th, NULL);
  pthread_join(th_probe, NULL);
  pthread_join(th_mon, NULL);
  pthread_join(th_att, NULL);
  pthread_join(th_heavy, NULL);
  soak_check_end();
  soak_check(ROW_END, C_MARKS, access(soak.evil_abs, F_OK) != 0 && access(soak.evil_rel, F_OK) != 0,
             "a backup was written outside --backup-dir (%s or %s)", soak.evil_abs, soak.evil_rel);
  if (soak.failed && soak.fs_kind != FS_NONE)
    soak_fault_keep_db();
  soak_fault_fs_teardown();
  soak_report_print();
  if (!soak.failed && own_dir) {
    remove_run_files();
    rmdir(soak.dir);
  } else if (soak.failed) {
    printf("\nkept for a look: %s (lithd.log%s)\n", soak.dir,
           soak.fs_kind != FS_NONE ? ", soak-kept.db" : "");
  }
  for (int i = 0; i <= c->clients; i++) {
    for (int k = 0; k < MAX_CHUNKS && soak.cl[i].chunk[k]; k++)
      free(soak.cl[i].chunk[k]);
    bench_lat_free(&soak.cl[i].lat);
  }
  free(soak.cl);
  bench_print_end("failed checks", soak.failed, soak.t_begin);
  return soak.failed ? 1 : 0;
}
