/*
 * bench/soak/soak.h — what the soak's files share (internal; bench/soak/
 * only): the workload's constants, the phases a request can meet, the
 * checks by name, the run's state, and the functions each file offers.
 *
 * The run's state is one object, `soak`, defined in main.c and zeroed at
 * start. main.c fills cfg and the paths before any thread starts; the
 * threads then share it: what they change while running is _Atomic or under
 * mu. Pointers: main.c allocates soak.cl and frees it at the end, with each
 * client's lat and chunk[] (which load.c's client thread allocates as it
 * goes); cfg.lithd and cfg.cli.db_dir are not owned (argv, a literal, or
 * main's directory template). Names: what a file offers the others is
 * soak_<file>_*, what stays in a file is static.
 */
#ifndef LITH_BENCH_SOAK_H
#define LITH_BENCH_SOAK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common.h"
#include "../net.h"

/* A POST's headers when it names none. */
#define SOAK_CT_JSON "Content-Type: application/json\r\n"

/* ---- the workload ------------------------------------------------------------- */

enum { NACC = 100, START = 1000, MAXAMT = 50, MAX_CLIENTS = 256 };
#define MONEY ((int64_t)NACC * START)
#define SMUGGLE_BASE (INT64_C(1) << 40) /* marks ids the smuggled INSERT uses */

/* What the request met: between faults, or a fault (PH_READ: the
 * read-heavy phase, readers always reading; not a fault, but run and
 * checked as one). */
enum { PH_NONE, PH_VANISH, PH_SLOW, PH_STOP, PH_FULL, PH_KILL, PH_READ, NPH };
extern const char *const PH_NAME[NPH]; /* main.c */
enum { ROW_END = NPH, NROW };          /* the faults table's rows: PH_VANISH.. and the end */

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

/* ---- the checks (checks.c) --------------------------------------------------------------------- */

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
  C_WALBOUND, /* readers: the -wal file never passed --wal-bound-mib */
  C_READS,    /* readers: every read answered 200, the right sum, a ledger that never shrank */
  NCHECK
};
extern const char *const CHECK_NAME[NCHECK]; /* checks.c */

/* ---- configuration and the run's state ----------------------------------------------- */

typedef struct config {
  bench_cli cli;
  double minutes;
  int clients, rate, fs_mib, rss_mib, slow_conns, slow_seconds, latency_ms, run_ms, timeout_ms, strict;
  int read_conns, read_seconds, wal_bound_mib,
      wal_hold_ms; /* the read-heavy phase; wal_hold_ms -1: lithd's */
  const char *lithd;
} config;

enum { FS_NONE, FS_TMPFS, FS_LOOP };

typedef struct row_stat {
  int64_t injected, pass, fail, max_recovery_ns, probe_max_ns;
} row_stat;

enum { MAX_MSGS = 40, MAX_READ_CONNS = 64 };

/* The read-heavy phase's readers: each thread's own while it runs; main.c
 * allocates them (cfg.read_conns) and frees them with their lat. */
typedef struct read_conn {
  int idx;
  pthread_t th;
  bench_lat lat; /* reads answered 200 and right, every phase */
} read_conn;

typedef struct soak_state {
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

  client *cl; /* cfg.clients of them, then the vanishing clients' (no thread); main.c's */
  _Atomic int64_t cnt[NPH][NT];
  _Atomic int64_t tmax_ns[NPH];

  /* the monitor */
  _Atomic int64_t rss_kib, rss_max_kib, rss_heavy_max_kib, fds_max, wal_max;
  /* the probe */
  _Atomic int64_t probe_n[NPH], probe_fail[NPH], probe_max_ns[NPH], probe_money_bad;
  /* the read-heavy phase (faults.c runs it, load.c's readers read) */
  read_conn *rc;                    /* cfg.read_conns; main.c's */
  _Atomic int read_stop;            /* the readers end */
  _Atomic int64_t read_n, read_bad; /* reads answered right, and not */
  int64_t read_wal_max;             /* the -wal file's largest size during any read phase */
  int64_t read_holds, read_gave_up,
      read_held;         /* lithd's /v1/stats, summed over the phases that had both ends */
  int read_phases_stats; /* how many phases those sums cover */

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
  char read_msg[240]; /* the first wrong read */
} soak_state;

extern soak_state soak; /* main.c */

static inline double soak_since_s(int64_t t) { return (double)(bench_now_ns() - t) / 1e9; }

static inline void soak_atomic_max(_Atomic int64_t *a, int64_t v) {
  int64_t cur = atomic_load(a);
  while (v > cur && !atomic_compare_exchange_weak(a, &cur, v))
    ;
}

/* ---- lithd.c: lithd under test, and talking to it --------------------------------------------- */

/* Start lithd on `port` (0: any) with the run's files; sets soak.pid and
 * soak.port. The port it listens on, or -1 (said on stderr). */
int soak_lithd_start(int port);
/* Reap a lithd that ended unasked, say how (a failure, or a disturbance
 * when its log says another process stopped it), restart it. */
void soak_lithd_watch(void);
long soak_lithd_rss_kib(pid_t pid);       /* VmRSS, or -1 */
int soak_lithd_fds(pid_t pid);            /* open descriptors, or -1 */
int soak_lithd_log_errors(void);          /* error lines in lithd's log, or -1 */
void *soak_lithd_monitor_main(void *arg); /* thread: RSS, descriptors, WAL size every 100 ms */
/* A connection to the current lithd, or -1; the caller closes it. */
int soak_lithd_dial(void);
int soak_lithd_send(int fd, const char *p, size_t n); /* 0, or -1 */
/* One answer on fd into in[0..cap] before `deadline`: 1, 0 (time up), -1
 * (closed or failed), -2 (not an answer we read). *len: bytes held. */
int soak_lithd_read(int fd, char *in, size_t cap, size_t *len, int64_t deadline, bench_answer *a);
/* A POST of body to path into out[0..cap]; headers NULL: JSON. Its length. */
size_t soak_lithd_post(char *out, size_t cap, const char *path, const char *headers, const char *body);

/* ---- load.c: the transfer clients and the probe ----------------------------------------------- */

void *soak_load_client_main(void *arg); /* thread; arg: its client, in soak.cl */
void *soak_load_probe_main(void *arg);  /* thread: lithd's own read of the money */
void *soak_load_reader_main(void *arg); /* thread; arg: its read_conn, in soak.rc; until soak.read_stop */
/* A transfer request with log id `id` into out[0..cap]; its length. */
size_t soak_load_transfer_request(char *out, size_t cap, int64_t id, int src, int dst, int amount);
void soak_load_random_transfer(uint64_t *rng, int *src, int *dst, int *amount);
int soak_load_outcome(const client *c, int64_t s); /* O_*: transfer s of c, s <= c->answered */
int64_t soak_load_count(int ph, int t);            /* transfers counted T_* t in phase ph */

/* ---- faults.c: the nemesis and the filesystem it fills ---------------------------------------- */

/* Each injects its fault, waits for lithd to recover, runs its checks. */
void soak_fault_vanish(void);
void soak_fault_slowloris(void);
void soak_fault_sigstop(void);
void soak_fault_diskfull(void);
void soak_fault_sigkill(void);
void soak_fault_readers(void); /* the read-heavy phase */
/* The database's own filesystem (soak.fsdir): a tmpfs, an ext4 image on a
 * loop device, or none (soak.fs_kind, soak.fs_why say which). */
void soak_fault_fs_setup(void);
void soak_fault_fs_teardown(void);
void soak_fault_keep_db(void); /* a failed run's database, copied to soak.dir/soak-kept.db */

/* ---- attacks.c: the attacker threads ---------------------------------------------------------- */

void *soak_attack_quick_main(void *arg); /* thread: the quick attacks, round robin */
void *soak_attack_heavy_main(void *arg); /* thread: the heavy ones, one at a time */
int64_t soak_attack_wrong(void);         /* wrong answers and none, open issues aside unless --strict */
void soak_attack_print(void);            /* the attacks table */

/* ---- checks.c: the checks and what they found ------------------------------------------------- */

/* A failure: counted, kept (the first MAX_MSGS), said on stderr. */
void soak_check_failure(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A known open lithd issue: counted under `key`, its first message kept.
 * --strict makes it a failure. */
void soak_check_finding(const char *key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* One check of one fault injection (row): counted, and said when it fails.
 * Returns ok. */
int soak_check(int row, int which, int ok, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void soak_check_common(int row); /* the checks every fault ends with: the database, RSS */
void soak_check_end(void);       /* the end: live, SIGTERM, the file, the run's totals */

/* ---- report.c: the tables ----------------------------------------------------------------------- */

void soak_report_fmt_ms(char *b, size_t n, int64_t ns); /* ns < 0: a dash */
void soak_report_print(void);

#endif
