/*
 * bench/common.h — what the benchmark programs (bench/writer, bench/lithd,
 * bench/kanban, bench/kanban_http, bench/soak) share. Two parts that only
 * some of them use have files of their own: the HTTP client and the server
 * under test (net.h), and the transfer workload (transfer.h).
 *
 * Why: the four were written one after another, each starting from a copy
 * of the one before, so each carried its own clock, latency buffers,
 * median-over-rounds, option parsing, machine line, CSV writer, /proc
 * readers and server launcher — copies that had begun to drift apart in
 * small ways (one list parser refused an empty item where another skipped
 * it; one HTTP parser checked all three digits of a status, another only
 * the first). With one copy, a fix reaches every table, and what still
 * differs between the programs is what they measure, not how they count.
 *
 * What stays in each program: its workload, its arms, its result struct and
 * metrics, its tables' columns and wording, its targets. What is here is
 * mechanism. It prints to stdout only where a function says so (the intro,
 * the plan's end, targets, the closing lines), in the words the programs
 * used before; differences the programs made on purpose are parameters
 * (fmt_ms's three-decimal range, UTC or local dates, the drain time).
 *
 * The rules: C11 plus POSIX/Linux (_GNU_SOURCE), SQLite only — no lith.h,
 * since bench/lithd and bench/kanban_http link SQLite and not liblith (what
 * lith knows, such as lith_options_default, the caller passes in). Names
 * start with bench_ / BENCH_; internals are static in their .c file. Functions
 * that fail return -1 (or NAN) and leave the report to the caller, in its
 * own words (a message in a caller's buffer where there is one to give),
 * except the command-line helpers and bench_xcalloc, which end the process
 * the way every program did: usage on stderr and exit 2, or exit 1.
 */
#ifndef LITH_BENCH_COMMON_H
#define LITH_BENCH_COMMON_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <sqlite3.h>

/* ---- clock ------------------------------------------------------------------ */

int64_t bench_now_ns(void);        /* CLOCK_MONOTONIC, ns */
void bench_sleep_until(int64_t t); /* until bench_now_ns() >= t */
void bench_sleep_ms(int ms);

/* ---- the start gate ---------------------------------------------------------------
 *
 * A run's threads wait at the gate; once n of them are there, the main
 * thread fixes the window (the warm-up from now, then the measured
 * seconds) and lets them all go at once, so every thread sees the same
 * window. Zero-initialised by bench_gate_init, one per run. */

typedef struct bench_gate {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int ready, go;
  int64_t ws, we; /* the window (bench_now_ns), set by bench_gate_open */
} bench_gate;

void bench_gate_init(bench_gate *g);
void bench_gate_destroy(bench_gate *g);
/* A thread is ready: wait for the gate to open, then the window. */
void bench_gate_wait(bench_gate *g, int64_t *ws, int64_t *we);
/* Wait until n threads wait, set the window, open the gate. */
void bench_gate_open(bench_gate *g, int n, double warmup_s, double seconds_s);

/* ---- randomness: xorshift64*, one state per thread or connection --------------- */

uint64_t bench_rng_next(uint64_t *s);
uint64_t bench_rng_seed(uint64_t a, uint64_t b); /* a nonzero state from two numbers */

/* ---- latency recording ------------------------------------------------------------
 *
 * A holder (a thread, a process, a client) records into its own buffer, no
 * locks. Every value counts in seen/sum/max; the first `cap` are kept, and
 * beyond that a uniform reservoir sample (a value replaces a kept one with
 * probability cap/seen). A buffer may start small and grow (doubling) up to
 * `limit`. Merging weights each kept value by its buffer's seen/kept, so
 * the percentiles of sampled buffers stay unbiased; with nothing sampled
 * they are exact (nearest rank). */

typedef struct bench_lat {
  uint64_t *v;
  size_t cap, limit, n; /* n <= cap kept; cap grows up to limit */
  uint64_t seen;        /* values offered */
  uint64_t sum, max;    /* over every value offered */
  uint64_t rng;         /* the reservoir's */
  int owned;            /* v is ours to realloc and free */
} bench_lat;

/* cap values now (0: none yet), growing up to limit. -1 when out of memory. */
int bench_lat_init(bench_lat *b, size_t cap, size_t limit, uint64_t seed);
/* cap values in storage the caller owns (shared memory, say); never grows. */
void bench_lat_wrap(bench_lat *b, uint64_t *storage, size_t cap, uint64_t seed);
void bench_lat_free(bench_lat *b);
void bench_lat_add(bench_lat *b, uint64_t ns);
/* What one of `holders` may keep: a share of 2,000,000 values, never fewer
 * than 4096, never more than 500k per second of a window of `seconds`. */
size_t bench_lat_cap(int holders, double seconds);

enum { BENCH_LAT_MAXQ = 4 };

typedef struct bench_lat_sum {
  uint64_t count, sum, max; /* over every value offered */
  int sampled;              /* some buffer kept fewer than it saw */
  double q[BENCH_LAT_MAXQ]; /* ns at the quantiles asked; NAN when nothing was kept */
} bench_lat_sum;

/* Merge bufs[0..nb) and take the quantiles qs[0..nq) (nq <= BENCH_LAT_MAXQ).
 * 0, or -1 when out of memory (then q[] is NAN, the counts are right). */
int bench_lat_merge(bench_lat *const *bufs, int nb, const double *qs, int nq, bench_lat_sum *out);
/* The largest value bufs[0..nb) saw, in ms; NAN when they saw none. */
double bench_lat_max_ms(bench_lat *const *bufs, int nb);

/* ---- over rounds ---------------------------------------------------------------- */

typedef struct bench_agg {
  int n;              /* values that were not NAN */
  double med, lo, hi; /* NAN when n == 0 */
} bench_agg;

/* Median and range of v[0..n), NAN entries left out. Reorders v. */
bench_agg bench_agg_of(double *v, int n);

/* The CSV's summary rows, in this order: med, lo, hi. */
extern const char *const BENCH_SUMMARY[3];
double bench_agg_pick(bench_agg a, int which);

/* ---- formatting table cells -------------------------------------------------------- */

/* ms with three decimals below `fine_below`, two below 100, none above; "–" for NAN. */
void bench_fmt_ms(char *buf, size_t n, double ms, double fine_below);
/* v through fmt (one double conversion), or "–" when v is NAN or infinite. */
void bench_fmt(char *buf, size_t n, const char *fmt, double v);
/* bench_fmt into buf, returned: for a printf argument, e.g.
 * printf("p99 %s", BENCH_NUM("%.3f", x)) prints "p99 –" for NaN. */
const char *bench_num(char *buf, size_t n, const char *fmt, double v);
#define BENCH_NUM(fmt, v) bench_num((char[32]){0}, 32, (fmt), (v))

/* "2.31× (2.10–2.52)" from a ratio's median and range, "–" with none. */
void bench_fmt_ratio(char *buf, size_t n, bench_agg g);

/* "- PASS what — detail", MISS, or "- n/a  what — not run" when !have. */
void bench_target(const char *what, int have, int pass, const char *detail);
int bench_find_int(const int *list, int n, int v); /* its index, or -1 */

/* ---- CSV ------------------------------------------------------------------------------ */

/* Open `given`, or bench/results/NAME-YYYYMMDD-HHMMSS.csv (the directory made);
 * the path into path. NULL (said on stderr) when it cannot be written. */
FILE *bench_csv_open(const char *given, const char *name, char *path, size_t n);
void bench_csv_close(FILE *f, const char *path); /* says so when the write failed */
/* The header line: lead (the key columns), ",name" for each metric, tail (with its "\n"). */
void bench_csv_header(FILE *f, const char *lead, const char *const *names, int n, const char *tail);
void bench_csv_num(FILE *f, double v); /* ",%.6g", or "," for NAN */

/* ---- the command line ----------------------------------------------------------------
 *
 * The options every program takes: --help/-h, --quick, --seconds S,
 * --warmup S, --rounds N, --db-dir DIR and --results PATH (the results
 * file, bench/harness.h).
 * The program fills the first block, calls bench_cli_parse with a function
 * for its own options, then reads the second block. Every option but --help
 * and --quick takes a value. A bad one ends the process: "PROG: why",
 * the usage on stderr, exit 2. */

typedef struct bench_cli {
  /* set by the program */
  const char *prog; /* the messages' prefix: "writer", "bench/lithd" */
  void (*usage)(FILE *f);
  double min_seconds; /* --seconds' least value */
  int max_rounds;
  /* the options */
  int quick; /* defaults: 1 round of 1 s after 0.25 s, else 3 of 3 s after 0.5 s */
  double seconds, warmup;
  int rounds;
  const char *db_dir, *results; /* NULL when not given */
  int argc;                     /* the command line, for the header (bench_print_intro) */
  char **argv;
} bench_cli;

/* take(ctx, option, value): 1 when it is the program's, 0 when unknown. */
typedef int (*bench_take_fn)(void *ctx, const char *opt, const char *value);
void bench_cli_parse(bench_cli *c, int argc, char **argv, bench_take_fn take, void *ctx);

/* "PROG: " fmt, the usage, exit 2. */
void bench_die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* A program the run starts (the server under test): when path cannot be
 * executed, "PROG: cannot run PATH (why); " fmt (how to get it) and exit 2. */
void bench_need_exec(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A comma list of whole numbers lo..hi into out[0..max); how many (>= 1).
 * `what` names one in the messages: "producer" -> "producer counts are
 * 1..10000, got 0". */
int bench_parse_counts(const char *list, const char *opt, const char *what, long lo, long hi, int *out,
                       int max);
/* A comma list of names[0..n) (arms, say): on[i] = 1 for those named, 0
 * for the others. "OPT takes TAKES: REST" for anything else. */
void bench_parse_flags(const char *list, const char *opt, const char *const *names, int n, int *on,
                       const char *takes);
/* The default of a list option not given: quick[0..nquick) under --quick,
 * else full[0..nfull), into dst; how many. */
int bench_list_default(int *dst, const int *full, int nfull, const int *quick, int nquick, int is_quick);
/* A comma list of words[0..nwords), each at most once, at most max: their
 * values (values[i], or i when values is NULL) into out; how many (>= 1).
 * Anything else: "OPT takes TAKES: REST OF THE LIST". */
int bench_parse_words(const char *list, const char *opt, const char *const *words, const int *values,
                      int nwords, int *out, int max, const char *takes);

/* ---- the run's frame -------------------------------------------------------------------- */

/* --db-dir (made with its parents) or a fresh directory from tmpl
 * ("/tmp/lith-bench-XXXXXX", changed in place) into *dir. 1 when it made a
 * temporary one (rmdir it at the end), 0 otherwise; exits 1 when it cannot. */
int bench_db_dir(const char **dir, char *tmpl);

/* "# TITLE\n\ncommand: ARGV (shell-quoted)\ndate: ..." in UTC or in local
 * time with its offset. */
void bench_print_intro(const char *title, int argc, char **argv, int utc);

typedef struct bench_machine {
  long nproc;      /* online CPUs */
  int usable;      /* CPUs in this process's affinity mask; -1 unknown */
  int have_cpu;    /* cpu is /proc/cpuinfo's model name */
  char cpu[256];   /* else "unknown" */
  char kernel[80]; /* uname's release, or "?" */
} bench_machine;
void bench_machine_get(bench_machine *m);
const char *bench_fs_name(const char *dir); /* "ext2/3/4", "tmpfs (...)", "other" */

void bench_print_ints(const int *v, int n);                             /* " 1,50,200" */
void bench_print_named(const int *v, int n, const char *(*name)(int));  /* " FULL,NORMAL" */
void bench_print_flags(const char *const *names, const int *on, int n); /* the names whose on[i] */
/* "%g s window after %g s warm-up; %d round(s)\n" */
void bench_print_window(const bench_cli *c);
/* The plan line's end and the results file's line: "; arms A,B; <window>\nresults: PATH\n"
 * (NULL: "(none: could not create it)"), then stdout flushed. */
void bench_print_arms_results(const char *const *arms, const int *on, int n, const bench_cli *c,
                              const char *csv_path);
/* calloc, or "PROG: out of memory" and exit 1. */
void *bench_xcalloc(size_t n, size_t size);
/* "\nerrors, WHAT: N[ (FAILED)]\nelapsed: S s\n" */
void bench_print_end(const char *what, int64_t errors, int64_t t_begin);
/* main's last lines: the temporary --db-dir removed (own_dir: bench_db_dir
 * made it), then bench_print_end unless errors < 0 (the harness could not
 * start: bench_harness_main said so). The exit status: 1 when any error. */
int bench_finish(const char *what, int64_t errors, int64_t t_begin, int own_dir, const char *db_dir);

/* ---- SQLite ---------------------------------------------------------------------------------- */

/* The pragmas lith gives its writer (the caller passes lith_options_default's). */
typedef struct bench_pragmas {
  int full; /* synchronous FULL, else NORMAL */
  int cache_size_kib;
  long long mmap_size;
  int foreign_keys;
} bench_pragmas;

/* Open (creating) path with those pragmas, WAL, busy_timeout busy_ms and
 * SQLite's default autocheckpoint (1000 pages, lith's checkpoint_pages).
 * SQLITE_OK, or an error (said on stderr) and *out NULL. */
int bench_open_plain(const char *path, const bench_pragmas *p, int busy_ms, sqlite3 **out);
int bench_step(sqlite3_stmt *st);                        /* step, reset: SQLITE_OK for DONE/ROW */
int bench_step2(sqlite3_stmt *st, int64_t a, int64_t b); /* bind ?1 ?2, bench_step */
/* The first column of sql's first row (?1 bound to arg when it has one);
 * -1 and (*failed)++ when it fails. */
int64_t bench_query_int(sqlite3 *db, const char *sql, int64_t arg, int *failed);
int bench_quick_check_ok(sqlite3 *db);  /* PRAGMA quick_check said "ok" */
void bench_remove_db(const char *path); /* the file, -wal, -shm, -journal, -lithd.lock */

/* ---- CPU time from /proc ------------------------------------------------------------------------ */

/* utime + stime of one /proc/.../stat file, in seconds; its comm (between
 * the parentheses) into comm when not NULL. -1 when it cannot be read. */
double bench_stat_cpu_s(const char *path, char *comm, size_t commsz);
double bench_machine_busy_s(void); /* every CPU's busy seconds (/proc/stat); -1 on failure */
double bench_self_cpu_s(void);     /* this process's CPU seconds */

/* A server's threads (lithd, the kanban server), by name; the loop thread
 * is the process's first. */
enum { BENCH_T_LOOP, BENCH_T_WRITER, BENCH_T_WAKER, BENCH_T_CKPT, BENCH_T_OTHER, BENCH_NTHREAD };

/* Everyone's CPU time at one moment. */
typedef struct bench_cpu_snap {
  int64_t t;
  int have_threads; /* /proc/PID/task could be read */
  double thread[BENCH_NTHREAD];
  double self, machine; /* machine -1: unknown */
} bench_cpu_snap;

void bench_cpu_snap_take(pid_t server, bench_cpu_snap *s);

/* Where a program's metrics go: indexes into its array of doubles. */
typedef struct bench_cpu_slots {
  int server;    /* the server process, in CPUs (1.0 = one CPU busy) */
  int thread0;   /* thread0 + BENCH_T_*: per thread kind */
  int client;    /* this process */
  int other;     /* the machine's busy time not in the two above */
  int us_server; /* CPU µs per command answered in the window */
  int us_client;
} bench_cpu_slots;

/* The results' names (bench/harness.h's bench_metric, no role) of the
 * metrics at slots server, thread0 .. thread0 + BENCH_T_OTHER and client, in
 * that order: PREFIX "cpu", PREFIX "cpu_loop" .. PREFIX "cpu_other",
 * "client_cpu". For a METRICS[] whose slots stand in that order. */
#define BENCH_CPU_METRIC_NAMES(prefix)                                                        \
  {.key = prefix "cpu"}, {.key = prefix "cpu_loop"}, {.key = prefix "cpu_writer"},            \
      {.key = prefix "cpu_waker"}, {.key = prefix "cpu_ckpt"}, {.key = prefix "cpu_other"}, { \
    .key = "client_cpu"                                                                       \
  }

/* The CPU between two snapshots, with `commands` answered in a window of
 * `seconds`; slots without data stay as they are. */
void bench_cpu_fill(const bench_cpu_snap sn[2], double seconds, uint64_t commands, const bench_cpu_slots *at,
                    double *m);

#endif
