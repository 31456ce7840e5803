/*
 * bench/common.c — the mechanism the benchmark programs share (common.h
 * says what, and why it is shared).
 *
 * Design: plain functions over the callers' own data, so each program keeps
 * its own result layout. The one piece of global state is the program's
 * name and usage function for command-line errors, set by bench_cli_parse
 * before any thread or child exists and only read after. The pieces that
 * only support the public functions (the comma-list walker, the weighted
 * sort, the thread classification of /proc/PID/task, mkdir -p, the shell
 * quoting of the command line) are static here. The network client is in
 * net.c, the transfer workload in transfer.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/utsname.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- clock ------------------------------------------------------------------ */

int64_t bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void bench_sleep_until(int64_t t) {
  struct timespec ts = {(time_t)(t / 1000000000), (long)(t % 1000000000)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
    ;
}

void bench_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

/* ---- the start gate ---------------------------------------------------------- */

void bench_gate_init(bench_gate *g) {
  memset(g, 0, sizeof *g);
  pthread_mutex_init(&g->mu, NULL);
  pthread_cond_init(&g->cv, NULL);
}

void bench_gate_destroy(bench_gate *g) {
  pthread_cond_destroy(&g->cv);
  pthread_mutex_destroy(&g->mu);
}

void bench_gate_wait(bench_gate *g, int64_t *ws, int64_t *we) {
  pthread_mutex_lock(&g->mu);
  g->ready++;
  pthread_cond_broadcast(&g->cv);
  while (!g->go)
    pthread_cond_wait(&g->cv, &g->mu);
  *ws = g->ws;
  *we = g->we;
  pthread_mutex_unlock(&g->mu);
}

void bench_gate_open(bench_gate *g, int n, double warmup_s, double seconds_s) {
  pthread_mutex_lock(&g->mu);
  while (g->ready < n)
    pthread_cond_wait(&g->cv, &g->mu);
  g->ws = bench_now_ns() + (int64_t)(warmup_s * 1e9);
  g->we = g->ws + (int64_t)(seconds_s * 1e9);
  g->go = 1;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
}

/* ---- randomness ---------------------------------------------------------------- */

uint64_t bench_rng_next(uint64_t *s) {
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * UINT64_C(2685821657736338717);
}

uint64_t bench_rng_seed(uint64_t a, uint64_t b) {
  uint64_t s = (a + 1) * UINT64_C(0x9E3779B97F4A7C15) ^ (b + 7) * UINT64_C(0xBF58476D1CE4E5B9);
  return s ? s : 1;
}

/* ---- latency recording ------------------------------------------------------------ */

enum { LAT_BUDGET = 2000000, LAT_MIN_CAP = 4096, LAT_FIRST_GROWTH = 65536 };

int bench_lat_init(bench_lat *b, size_t cap, size_t limit, uint64_t seed) {
  memset(b, 0, sizeof *b);
  b->limit = limit > cap ? limit : cap;
  b->rng = seed ? seed : 1;
  b->owned = 1;
  if (cap == 0)
    return 0;
  b->v = malloc(cap * sizeof *b->v);
  b->cap = b->v ? cap : 0;
  return b->v ? 0 : -1;
}

void bench_lat_wrap(bench_lat *b, uint64_t *storage, size_t cap, uint64_t seed) {
  memset(b, 0, sizeof *b);
  b->v = storage;
  b->cap = b->limit = cap;
  b->rng = seed ? seed : 1;
}

void bench_lat_free(bench_lat *b) {
  if (b->owned)
    free(b->v);
  b->v = NULL;
  b->cap = b->n = 0;
}

void bench_lat_add(bench_lat *b, uint64_t ns) {
  b->seen++;
  b->sum += ns;
  if (ns > b->max)
    b->max = ns;
  if (b->n == b->cap && b->cap < b->limit && b->owned) {
    size_t cap = b->cap ? b->cap * 2 : LAT_FIRST_GROWTH;
    if (cap > b->limit)
      cap = b->limit;
    uint64_t *p = realloc(b->v, cap * sizeof *p);
    if (p) {
      b->v = p;
      b->cap = cap;
    }
  }
  if (b->n < b->cap) {
    b->v[b->n++] = ns;
    return;
  }
  if (b->cap == 0)
    return;
  uint64_t j = bench_rng_next(&b->rng) % b->seen; /* keep with probability cap/seen */
  if (j < b->cap)
    b->v[j] = ns;
}

size_t bench_lat_cap(int holders, double seconds) {
  double bound = seconds * 500000.0 + 1024; /* no holder completes 500k calls/s */
  double share = (double)LAT_BUDGET / (holders > 0 ? holders : 1);
  double cap = share < bound ? share : bound;
  return cap < LAT_MIN_CAP ? LAT_MIN_CAP : (size_t)cap;
}

typedef struct weighted {
  uint64_t v;
  double w;
} weighted;

static int cmp_weighted(const void *a, const void *b) {
  uint64_t x = ((const weighted *)a)->v, y = ((const weighted *)b)->v;
  return (x > y) - (x < y);
}

double bench_lat_max_ms(bench_lat *const *bufs, int nb) {
  uint64_t seen = 0, max = 0;
  for (int i = 0; i < nb; i++) {
    seen += bufs[i]->seen;
    if (bufs[i]->max > max)
      max = bufs[i]->max;
  }
  return seen ? (double)max / 1e6 : NAN;
}

int bench_lat_merge(bench_lat *const *bufs, int nb, const double *qs, int nq, bench_lat_sum *out) {
  memset(out, 0, sizeof *out);
  for (int k = 0; k < BENCH_LAT_MAXQ; k++)
    out->q[k] = NAN;
  if (nq > BENCH_LAT_MAXQ)
    nq = BENCH_LAT_MAXQ;
  size_t n = 0;
  for (int i = 0; i < nb; i++) {
    n += bufs[i]->n;
    out->count += bufs[i]->seen;
    out->sum += bufs[i]->sum;
    if (bufs[i]->max > out->max)
      out->max = bufs[i]->max;
    if (bufs[i]->seen > bufs[i]->n)
      out->sampled = 1;
  }
  if (n == 0)
    return 0;
  weighted *all = malloc(n * sizeof *all);
  if (!all)
    return -1;
  size_t m = 0;
  double total = 0;
  for (int i = 0; i < nb; i++) {
    double w = bufs[i]->n ? (double)bufs[i]->seen / (double)bufs[i]->n : 0;
    for (size_t j = 0; j < bufs[i]->n; j++) {
      all[m].v = bufs[i]->v[j];
      all[m].w = w;
      m++;
    }
    total += w * (double)bufs[i]->n;
  }
  qsort(all, m, sizeof *all, cmp_weighted);
  for (int k = 0; k < nq; k++) { /* nearest rank, weighted */
    double want = qs[k] * total * (1 - 1e-12), cum = 0;
    size_t j = 0;
    for (; j < m; j++) {
      cum += all[j].w;
      if (cum >= want)
        break;
    }
    out->q[k] = (double)all[j < m ? j : m - 1].v;
  }
  free(all);
  return 0;
}

/* ---- over rounds -------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

bench_agg bench_agg_of(double *v, int n) {
  bench_agg a = {0, NAN, NAN, NAN};
  for (int i = 0; i < n; i++)
    if (!isnan(v[i]))
      v[a.n++] = v[i];
  if (a.n == 0)
    return a;
  qsort(v, (size_t)a.n, sizeof *v, cmp_double);
  a.lo = v[0];
  a.hi = v[a.n - 1];
  a.med = a.n % 2 ? v[a.n / 2] : (v[a.n / 2 - 1] + v[a.n / 2]) / 2;
  return a;
}

const char *const BENCH_SUMMARY[3] = {"median", "min", "max"};

double bench_agg_pick(bench_agg a, int which) { return which == 0 ? a.med : which == 1 ? a.lo : a.hi; }

/* ---- formatting ------------------------------------------------------------------------- */

static const char DASH[] = "–";

void bench_fmt_ms(char *buf, size_t n, double ms, double fine_below) {
  if (isnan(ms))
    snprintf(buf, n, "%s", DASH);
  else if (ms < fine_below)
    snprintf(buf, n, "%.3f", ms);
  else if (ms < 100)
    snprintf(buf, n, "%.2f", ms);
  else
    snprintf(buf, n, "%.0f", ms);
}

void bench_fmt(char *buf, size_t n, const char *fmt, double v) {
  if (isnan(v) || isinf(v))
    snprintf(buf, n, "%s", DASH);
  else
    snprintf(buf, n, fmt, v);
}

const char *bench_num(char *buf, size_t n, const char *fmt, double v) {
  bench_fmt(buf, n, fmt, v);
  return buf;
}

void bench_fmt_ratio(char *buf, size_t n, bench_agg g) {
  if (g.n == 0 || isnan(g.med))
    snprintf(buf, n, "–");
  else
    snprintf(buf, n, "%.2f× (%.2f–%.2f)", g.med, g.lo, g.hi);
}

void bench_target(const char *what, int have, int pass, const char *detail) {
  printf("- %s %s — %s\n", !have ? "n/a " : pass ? "PASS" : "MISS", what, have ? detail : "not run");
}

int bench_find_int(const int *list, int n, int v) {
  for (int i = 0; i < n; i++)
    if (list[i] == v)
      return i;
  return -1;
}

/* ---- the command line --------------------------------------------------------------------- */

/* For bench_die_usage and the run's frame: set by bench_cli_parse. */
static const char *g_prog = "bench";
static void (*g_usage)(FILE *f);

void bench_die_usage(const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "%s: ", g_prog);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n");
  if (g_usage)
    g_usage(stderr);
  exit(2);
}

void bench_need_exec(const char *path, const char *fmt, ...) {
  if (access(path, X_OK) == 0)
    return;
  int e = errno;
  va_list ap;
  fprintf(stderr, "%s: cannot run %s (%s); ", g_prog, path, strerror(e));
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n");
  exit(2);
}

static double parse_seconds(const char *s, const char *opt, double min) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || *end || !(v >= min) || v > 3600)
    bench_die_usage("bad value for %s", opt);
  return v;
}

void bench_cli_parse(bench_cli *c, int argc, char **argv, bench_take_fn take, void *ctx) {
  int set_sec = 0, set_warm = 0, set_rounds = 0;
  g_prog = c->prog;
  g_usage = c->usage;
  c->argc = argc;
  c->argv = argv;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      c->usage(stdout);
      exit(0);
    }
    if (!strcmp(a, "--quick")) {
      c->quick = 1;
      continue;
    }
    if (i + 1 >= argc)
      bench_die_usage("unknown option or missing value: %s", a);
    const char *v = argv[++i];
    if (!strcmp(a, "--seconds")) {
      c->seconds = parse_seconds(v, a, c->min_seconds);
      set_sec = 1;
    } else if (!strcmp(a, "--warmup")) {
      c->warmup = parse_seconds(v, a, 0);
      set_warm = 1;
    } else if (!strcmp(a, "--rounds")) {
      char *end;
      long n = strtol(v, &end, 10);
      if (end == v || *end || n < 1 || n > c->max_rounds)
        bench_die_usage("--rounds takes 1..%d, got %s", c->max_rounds, v);
      c->rounds = (int)n;
      set_rounds = 1;
    } else if (!strcmp(a, "--db-dir")) {
      c->db_dir = v;
    } else if (!strcmp(a, "--results")) {
      c->results = v;
    } else if (!take(ctx, a, v)) {
      bench_die_usage("unknown option: %s", a);
    }
  }
  if (!set_sec)
    c->seconds = c->quick ? 1 : 3;
  if (!set_warm)
    c->warmup = c->quick ? 0.25 : 0.5;
  if (!set_rounds)
    c->rounds = c->quick ? 1 : 3;
}

/* The items of a comma list, one call each: fn(ctx, item, length). */
static void each_item(const char *s, const char *opt, void (*fn)(void *ctx, const char *item, size_t n),
                      void *ctx) {
  if (!*s)
    bench_die_usage("empty list for %s", opt);
  while (*s) {
    size_t n = strcspn(s, ",");
    if (n == 0)
      bench_die_usage("empty item in %s", opt);
    fn(ctx, s, n);
    s += n;
    if (*s == ',')
      s++;
  }
}

typedef struct counts {
  const char *what;
  long lo, hi;
  int *out, max, n;
} counts;

static void add_count(void *ctx, const char *s, size_t n) {
  counts *c = ctx;
  char buf[32], *end;
  if (n >= sizeof buf)
    bench_die_usage("bad %s count in %s", c->what, s);
  memcpy(buf, s, n);
  buf[n] = '\0';
  long v = strtol(buf, &end, 10);
  if (end == buf || *end || v < c->lo || v > c->hi)
    bench_die_usage("%s counts are %ld..%ld, got %s", c->what, c->lo, c->hi, buf);
  if (c->n == c->max)
    bench_die_usage("too many %s counts: %s", c->what, buf);
  c->out[c->n++] = (int)v;
}

int bench_parse_counts(const char *list, const char *opt, const char *what, long lo, long hi, int *out,
                       int max) {
  counts c = {what, lo, hi, out, max, 0};
  each_item(list, opt, add_count, &c);
  return c.n;
}

void bench_parse_flags(const char *list, const char *opt, const char *const *names, int n, int *on,
                       const char *takes) {
  int idx[64];
  int k = bench_parse_words(list, opt, names, NULL, n, idx, n < 64 ? n : 64, takes);
  memset(on, 0, (size_t)n * sizeof *on);
  for (int i = 0; i < k; i++)
    on[idx[i]] = 1;
}

int bench_list_default(int *dst, const int *full, int nfull, const int *quick, int nquick, int is_quick) {
  int n = is_quick ? nquick : nfull;
  memcpy(dst, is_quick ? quick : full, (size_t)n * sizeof *dst);
  return n;
}

typedef struct words {
  const char *opt, *takes;
  const char *const *words;
  const int *values;
  int nwords, *out, max, n;
} words;

static void add_word(void *ctx, const char *s, size_t n) {
  words *w = ctx;
  for (int i = 0; i < w->nwords; i++) {
    if (strlen(w->words[i]) != n || strncmp(s, w->words[i], n) != 0)
      continue;
    int v = w->values ? w->values[i] : i;
    if (w->n == w->max || bench_find_int(w->out, w->n, v) >= 0)
      break;
    w->out[w->n++] = v;
    return;
  }
  bench_die_usage("%s takes %s: %s", w->opt, w->takes, s);
}

int bench_parse_words(const char *list, const char *opt, const char *const *wordv, const int *values,
                      int nwords, int *out, int max, const char *takes) {
  words w = {opt, takes, wordv, values, nwords, out, max, 0};
  each_item(list, opt, add_word, &w);
  return w.n;
}

/* ---- the run's frame ------------------------------------------------------------------------ */

static int mkdir_p(const char *path) {
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
      return -1;
    *p = '/';
  }
  return mkdir(buf, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

int bench_db_dir(const char **dir, char *tmpl) {
  char what[128];
  if (*dir) {
    if (mkdir_p(*dir) == 0)
      return 0;
    snprintf(what, sizeof what, "%s: --db-dir", g_prog);
  } else {
    if (mkdtemp(tmpl)) {
      *dir = tmpl;
      return 1;
    }
    snprintf(what, sizeof what, "%s: mkdtemp", g_prog);
  }
  perror(what);
  exit(1);
}

FILE *bench_csv_open(const char *given, const char *name, char *path, size_t n) {
  if (given) {
    snprintf(path, n, "%s", given);
  } else {
    time_t now = time(NULL);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", localtime(&now));
    mkdir_p("bench/results");
    snprintf(path, n, "bench/results/%s-%s.csv", name, stamp);
  }
  FILE *f = fopen(path, "w");
  if (!f)
    fprintf(stderr, "%s: cannot write %s: %s\n", g_prog, path, strerror(errno));
  return f;
}

void bench_csv_close(FILE *f, const char *path) {
  if (f && fclose(f) != 0)
    fprintf(stderr, "%s: writing %s failed\n", g_prog, path);
}

void bench_csv_header(FILE *f, const char *lead, const char *const *names, int n, const char *tail) {
  fputs(lead, f);
  for (int i = 0; i < n; i++)
    fprintf(f, ",%s", names[i]);
  fputs(tail, f);
}

void bench_csv_num(FILE *f, double v) {
  if (isnan(v))
    fprintf(f, ",");
  else
    fprintf(f, ",%.6g", v);
}

/* argv as a shell would take it back: plain words as they are, others quoted. */
static void print_command(int argc, char **argv) {
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    int plain = *a && strspn(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=.,/:+") ==
                          strlen(a);
    printf(i ? " " : "");
    if (plain) {
      printf("%s", a);
      continue;
    }
    putchar('\'');
    for (; *a; a++)
      if (*a == '\'')
        printf("'\\''");
      else
        putchar(*a);
    putchar('\'');
  }
  printf("\n");
}

void bench_print_intro(const char *title, int argc, char **argv, int utc) {
  time_t now = time(NULL);
  char when[64];
  if (utc)
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", gmtime(&now));
  else
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S %z", localtime(&now));
  printf("# %s\n\ncommand: ", title);
  print_command(argc, argv);
  printf("date: %s\n", when);
}

void bench_machine_get(bench_machine *m) {
  struct utsname u;
  cpu_set_t set;
  char line[512];
  memset(m, 0, sizeof *m);
  m->nproc = sysconf(_SC_NPROCESSORS_ONLN);
  m->usable = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : -1;
  snprintf(m->kernel, sizeof m->kernel, "%s", uname(&u) == 0 ? u.release : "?");
  snprintf(m->cpu, sizeof m->cpu, "unknown");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f)
    return;
  while (fgets(line, sizeof line, f)) {
    char *p = strchr(line, ':');
    if (strncmp(line, "model name", 10) != 0 || !p)
      continue;
    p++;
    p += strspn(p, " \t");
    p[strcspn(p, "\n")] = '\0';
    snprintf(m->cpu, sizeof m->cpu, "%s", p);
    m->have_cpu = 1;
    break;
  }
  fclose(f);
}

const char *bench_fs_name(const char *dir) {
  struct statfs s;
  if (statfs(dir, &s) != 0)
    return "unknown";
  switch ((unsigned long)s.f_type) {
  case 0xEF53UL: return "ext2/3/4";
  case 0x58465342UL: return "xfs";
  case 0x9123683EUL: return "btrfs";
  case 0x01021994UL: return "tmpfs (fsync costs nothing here: FULL is not measured)";
  case 0x794C7630UL: return "overlayfs";
  default: return "other";
  }
}

void bench_print_ints(const int *v, int n) {
  for (int i = 0; i < n; i++)
    printf("%s%d", i ? "," : " ", v[i]);
}

void bench_print_named(const int *v, int n, const char *(*name)(int)) {
  for (int i = 0; i < n; i++)
    printf("%s%s", i ? "," : " ", name(v[i]));
}

void bench_print_flags(const char *const *names, const int *on, int n) {
  for (int i = 0, first = 1; i < n; i++)
    if (on[i]) {
      printf("%s%s", first ? " " : ",", names[i]);
      first = 0;
    }
}

void bench_print_window(const bench_cli *c) {
  printf("%g s window after %g s warm-up; %d round%s\n", c->seconds, c->warmup, c->rounds,
         c->rounds > 1 ? "s" : "");
}

void bench_print_arms_results(const char *const *arms, const int *on, int n, const bench_cli *c,
                              const char *csv_path) {
  printf("; arms");
  bench_print_flags(arms, on, n);
  printf("; ");
  bench_print_window(c);
  printf("results: %s\n", csv_path ? csv_path : "(none: could not create it)");
  fflush(stdout);
}

void *bench_xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size ? size : 1);
  if (!p) {
    fprintf(stderr, "%s: out of memory\n", g_prog);
    exit(1);
  }
  return p;
}

void bench_print_end(const char *what, int64_t errors, int64_t t_begin) {
  printf("\nerrors, %s: %lld%s\n", what, (long long)errors, errors ? " (FAILED)" : "");
  printf("elapsed: %.1f s\n", (double)(bench_now_ns() - t_begin) / 1e9);
}

int bench_finish(const char *what, int64_t errors, int64_t t_begin, int own_dir, const char *db_dir) {
  if (own_dir)
    rmdir(db_dir);
  if (errors < 0)
    return 1;
  bench_print_end(what, errors, t_begin);
  return errors ? 1 : 0;
}

/* ---- SQLite ------------------------------------------------------------------------------------ */

int bench_open_plain(const char *path, const bench_pragmas *p, int busy_ms, sqlite3 **out) {
  sqlite3 *conn = NULL;
  char sql[300];
  int rc =
      sqlite3_open_v2(path, &conn, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
  if (rc != SQLITE_OK)
    goto fail;
  sqlite3_extended_result_codes(conn, 1);
  sqlite3_busy_timeout(conn, busy_ms);
  snprintf(sql, sizeof sql,
           "PRAGMA journal_mode=WAL; PRAGMA synchronous=%s; PRAGMA cache_size=-%d; PRAGMA mmap_size=%lld;"
           " PRAGMA foreign_keys=%s; PRAGMA temp_store=MEMORY;",
           p->full ? "FULL" : "NORMAL", p->cache_size_kib, p->mmap_size, p->foreign_keys ? "ON" : "OFF");
  rc = sqlite3_exec(conn, sql, NULL, NULL, NULL);
  if (rc != SQLITE_OK)
    goto fail;
  sqlite3_wal_autocheckpoint(conn, 1000); /* SQLite's default, said out loud */
  *out = conn;
  return SQLITE_OK;
fail:
  fprintf(stderr, "open %s: %s\n", path, conn ? sqlite3_errmsg(conn) : sqlite3_errstr(rc));
  sqlite3_close(conn);
  *out = NULL;
  return rc ? rc : SQLITE_ERROR;
}

int bench_step(sqlite3_stmt *st) {
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
}

int bench_step2(sqlite3_stmt *st, int64_t a, int64_t b) {
  sqlite3_bind_int64(st, 1, a);
  sqlite3_bind_int64(st, 2, b);
  return bench_step(st);
}

int64_t bench_query_int(sqlite3 *db, const char *sql, int64_t arg, int *failed) {
  sqlite3_stmt *st = NULL;
  int64_t v = -1;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
    if (sqlite3_bind_parameter_count(st) > 0)
      sqlite3_bind_int64(st, 1, arg);
    if (sqlite3_step(st) == SQLITE_ROW)
      v = sqlite3_column_int64(st, 0);
    else
      (*failed)++;
  } else {
    (*failed)++;
  }
  sqlite3_finalize(st);
  return v;
}

int bench_quick_check_ok(sqlite3 *db) {
  sqlite3_stmt *st = NULL;
  int ok = sqlite3_prepare_v2(db, "PRAGMA quick_check", -1, &st, NULL) == SQLITE_OK &&
           sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0) &&
           strcmp((const char *)sqlite3_column_text(st, 0), "ok") == 0;
  sqlite3_finalize(st);
  return ok;
}

void bench_remove_db(const char *path) {
  static const char *const suffix[] = {"", "-wal", "-shm", "-journal", "-lithd.lock"};
  char p[4200];
  for (size_t i = 0; i < sizeof suffix / sizeof *suffix; i++) {
    snprintf(p, sizeof p, "%s%s", path, suffix[i]);
    unlink(p);
  }
}

/* ---- CPU time from /proc --------------------------------------------------------------------------- */

double bench_stat_cpu_s(const char *path, char *comm, size_t commsz) {
  char buf[1024];
  unsigned long long ut = 0, st = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return -1;
  buf[n] = '\0';
  char *l = strchr(buf, '('), *r = strrchr(buf, ')');
  if (!l || !r || r < l)
    return -1;
  if (comm) {
    size_t len = (size_t)(r - l - 1) < commsz - 1 ? (size_t)(r - l - 1) : commsz - 1;
    memcpy(comm, l + 1, len);
    comm[len] = '\0';
  }
  /* after ")": state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime */
  if (sscanf(r + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
    return -1;
  return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

double bench_machine_busy_s(void) {
  unsigned long long v[8] = {0};
  FILE *f = fopen("/proc/stat", "r");
  if (!f)
    return -1;
  int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                 &v[6], &v[7]);
  fclose(f);
  if (n != 8)
    return -1;
  /* user nice system idle iowait irq softirq steal: busy is all but idle and iowait */
  return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)sysconf(_SC_CLK_TCK);
}

double bench_self_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The server's CPU seconds per thread kind; -1 when /proc fails. */
static int threads_cpu(pid_t pid, double out[BENCH_NTHREAD]) {
  char dir[64], path[128], comm[64];
  struct dirent *e;
  DIR *d;
  for (int k = 0; k < BENCH_NTHREAD; k++)
    out[k] = 0;
  snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
  if (!(d = opendir(dir)))
    return -1;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9')
      continue;
    snprintf(path, sizeof path, "%s/%.20s/stat", dir, e->d_name);
    double s = bench_stat_cpu_s(path, comm, sizeof comm);
    if (s < 0)
      continue; /* a thread that just ended */
    int k = atoi(e->d_name) == (int)pid        ? BENCH_T_LOOP
            : !strcmp(comm, "lith-writer")     ? BENCH_T_WRITER
            : !strcmp(comm, "lith-waker")      ? BENCH_T_WAKER
            : !strcmp(comm, "lith-checkpoint") ? BENCH_T_CKPT
                                               : BENCH_T_OTHER;
    out[k] += s;
  }
  closedir(d);
  return 0;
}

void bench_cpu_snap_take(pid_t server, bench_cpu_snap *s) {
  s->t = bench_now_ns();
  s->have_threads = threads_cpu(server, s->thread) == 0;
  s->self = bench_self_cpu_s();
  s->machine = bench_machine_busy_s();
}

void bench_cpu_fill(const bench_cpu_snap sn[2], double seconds, uint64_t commands, const bench_cpu_slots *at,
                    double *m) {
  double dt = (double)(sn[1].t - sn[0].t) / 1e9;
  if (!sn[0].t || !sn[1].t || !(dt > 0))
    return;
  if (sn[0].have_threads && sn[1].have_threads) {
    double total = 0;
    for (int k = 0; k < BENCH_NTHREAD; k++) {
      double d = sn[1].thread[k] - sn[0].thread[k];
      m[at->thread0 + k] = d / dt;
      total += d;
    }
    m[at->server] = total / dt;
    if (commands) /* the window's commands over the CPU of a window's length */
      m[at->us_server] = total / dt * seconds / (double)commands * 1e6;
  }
  m[at->client] = (sn[1].self - sn[0].self) / dt;
  if (sn[0].machine >= 0 && sn[1].machine >= 0 && !isnan(m[at->server]))
    m[at->other] = (sn[1].machine - sn[0].machine) / dt - m[at->server] - m[at->client];
  if (commands)
    m[at->us_client] = m[at->client] * seconds / (double)commands * 1e6;
}
