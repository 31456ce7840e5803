/*
 * bench/harness.c — the benchmark programs' loop and results (harness.h
 * says what and why).
 *
 * Storage is one array of runs, [arm][cell][round], a cell numbered
 * row-major over the dimensions; each run's metrics are a slice of one
 * array of doubles. The results line is written as each run ends and
 * flushed, so a run cut short still leaves every finished cell on disk.
 * The run's identity (commit, CPU model, date) is read once at create.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "harness.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#ifndef BENCH_SRCDIR
#define BENCH_SRCDIR "."
#endif

typedef struct slot {
  int ran, sampled;
  int64_t errors;
  double wall_s;
} slot;

struct bench_harness {
  bench_plan p;
  size_t ncells;
  slot *slots; /* [arm][cell][round] */
  double *m;   /* [arm][cell][round][metric] */
  bench_cell cell;
  FILE *out;
  char path[4096];
  char commit[128], date[32];
  bench_machine mach;
  int64_t total_errors;
  char labels[BENCH_MAXDIMS][32];
};

/* ---- storage ---------------------------------------------------------------------- */

static size_t cell_of(const bench_harness *h, const int *idx) {
  size_t c = 0;
  for (int d = 0; d < h->p.ndims; d++)
    c = c * (size_t)h->p.dims[d].n + (size_t)idx[d];
  return c;
}

static size_t run_of(const bench_harness *h, int arm, const int *idx, int round) {
  return ((size_t)arm * h->ncells + cell_of(h, idx)) * (size_t)h->p.cli->rounds + (size_t)round;
}

static int ignored(const bench_harness *h, int arm, int d) {
  return h->p.ignores && (h->p.ignores(arm) >> d & 1u);
}

/* ---- the run's identity ------------------------------------------------------------- */

/* `git describe --always --dirty` of the source tree, or LITH_BENCH_COMMIT;
 * "unknown" outside a checkout. */
static void read_commit(char *buf, size_t n) {
  const char *env = getenv("LITH_BENCH_COMMIT");
  snprintf(buf, n, "unknown");
  if (env && *env) {
    snprintf(buf, n, "%s", env);
    return;
  }
  FILE *f = popen("git -C '" BENCH_SRCDIR "' describe --always --dirty --abbrev=10 2>/dev/null", "r");
  if (!f)
    return;
  char line[100];
  if (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    if (*line)
      snprintf(buf, n, "%s", line);
  }
  pclose(f);
}

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p < 0x20)
      fprintf(f, "\\u%04x", *p);
    else
      fputc(*p, f);
  }
  fputc('"', f);
}

/* A finite number in JSON, or null. */
static void json_num(FILE *f, double v) {
  if (isnan(v) || isinf(v))
    fputs("null", f);
  else
    fprintf(f, "%.6g", v);
}

static int mkdir_p(const char *dir) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s", dir);
  for (char *s = tmp + 1; *s; s++)
    if (*s == '/') {
      *s = '\0';
      if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
        return -1;
      *s = '/';
    }
  return mkdir(tmp, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

static void open_results(bench_harness *h) {
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(h->date, sizeof h->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
  if (h->p.cli->results) {
    snprintf(h->path, sizeof h->path, "%s", h->p.cli->results);
  } else {
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    if (mkdir_p("bench/results") != 0) {
      fprintf(stderr, "%s: cannot make bench/results: %s\n", h->p.program, strerror(errno));
      h->path[0] = '\0';
      return;
    }
    snprintf(h->path, sizeof h->path, "bench/results/%s-%s.jsonl", h->p.program, stamp);
  }
  if (!(h->out = fopen(h->path, "w"))) {
    fprintf(stderr, "%s: cannot write %s: %s\n", h->p.program, h->path, strerror(errno));
    h->path[0] = '\0';
  }
}

/* ---- create, destroy -------------------------------------------------------------------- */

bench_harness *bench_harness_create(const bench_plan *plan) {
  bench_harness *h = calloc(1, sizeof *h);
  if (!h)
    goto fail;
  h->p = *plan;
  h->ncells = 1;
  for (int d = 0; d < plan->ndims; d++)
    h->ncells *= (size_t)plan->dims[d].n;
  size_t nruns = (size_t)plan->narms * h->ncells * (size_t)plan->cli->rounds;
  if (!(h->slots = calloc(nruns, sizeof *h->slots)))
    goto fail_h;
  if (!(h->m = malloc(nruns * (size_t)plan->nmetrics * sizeof *h->m)))
    goto fail_slots;
  for (size_t i = 0; i < nruns * (size_t)plan->nmetrics; i++)
    h->m[i] = NAN;
  read_commit(h->commit, sizeof h->commit);
  bench_machine_get(&h->mach);
  open_results(h);
  if (!h->out) /* said on stderr: a run whose figures go nowhere is not started */
    goto fail_results;
  return h;

fail_results: /* open_results said why */
  free(h->m);
  free(h->slots);
  free(h);
  return NULL;
fail_slots:
  free(h->slots);
fail_h:
  free(h);
fail:
  fprintf(stderr, "%s: out of memory\n", plan->program);
  return NULL;
}

void bench_harness_destroy(bench_harness *h) {
  if (!h)
    return;
  if (h->out && fclose(h->out) != 0)
    fprintf(stderr, "%s: writing %s failed\n", h->p.program, h->path);
  free(h->m);
  free(h->slots);
  free(h);
}

const char *bench_harness_path(const bench_harness *h) { return h->out ? h->path : NULL; }

void bench_plan_dim(bench_plan *p, int d, const char *key, const char *(*label)(int v), const int *v, int n) {
  bench_dim *dim = &p->dims[d];
  dim->key = key;
  dim->label = label;
  dim->n = n < BENCH_MAXVALS ? n : BENCH_MAXVALS;
  memcpy(dim->v, v, (size_t)dim->n * sizeof *v);
}

int64_t bench_harness_main(const bench_plan *p, void (*header)(void *ctx, const char *results),
                           void (*tables)(const bench_harness *h, void *ctx)) {
  bench_harness *h = bench_harness_create(p);
  if (!h)
    return -1;
  if (header)
    header(p->ctx, bench_harness_path(h));
  bench_harness_run_all(h);
  if (tables)
    tables(h, p->ctx);
  int64_t errors = h->total_errors;
  bench_harness_destroy(h);
  return errors;
}

/* ---- one run -------------------------------------------------------------------------------- */

const char *bench_cell_label(const bench_cell *c, int d) {
  bench_harness *h = c->h;
  const bench_dim *dim = &h->p.dims[d];
  if (dim->label)
    return dim->label(c->val[d]);
  snprintf(h->labels[d], sizeof h->labels[d], "%d", c->val[d]);
  return h->labels[d];
}

/* "ARM key=label ... round R" into buf: the error and progress lines' name of a run. */
static void run_name(const bench_cell *c, char *buf, size_t n) {
  const bench_harness *h = c->h;
  size_t k = (size_t)snprintf(buf, n, "%s", h->p.arms[c->arm]);
  for (int d = 0; d < h->p.ndims && k < n; d++)
    if (!ignored(h, c->arm, d))
      k += (size_t)snprintf(buf + k, n - k, " %s=%s", h->p.dims[d].key, bench_cell_label(c, d));
  if (k < n)
    snprintf(buf + k, n - k, " round %d", c->round + 1);
}

/* A run's producer threads report their errors as they happen: the count
 * and the label buffers (bench_cell_label) are shared. */
static pthread_mutex_t g_error_mu = PTHREAD_MUTEX_INITIALIZER;

void bench_cell_error(bench_cell *c, const char *fmt, ...) {
  char name[256], msg[600];
  va_list ap;
  pthread_mutex_lock(&g_error_mu);
  if (c->msgs++ >= 5) {
    pthread_mutex_unlock(&g_error_mu);
    return;
  }
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  run_name(c, name, sizeof name);
  fprintf(stderr, "  error [%s]: %s\n", name, msg);
  pthread_mutex_unlock(&g_error_mu);
}

void bench_cell_latency(bench_cell *c, bench_lat *const *bufs, int nb, int m_p50, int m_p99, int m_p999) {
  static const double QS[3] = {0.50, 0.99, 0.999};
  bench_lat_sum s;
  if (bench_lat_merge(bufs, nb, QS, 3, &s) != 0) {
    c->errors++;
    bench_cell_error(c, "out of memory merging latencies");
    return;
  }
  const int at[3] = {m_p50, m_p99, m_p999};
  for (int k = 0; k < 3; k++)
    if (at[k] >= 0)
      c->m[at[k]] = s.q[k] / 1e6;
  c->sampled |= s.sampled;
}

static const char *const ROLE_KEY[BENCH_NROLE] = {NULL, "rate", "p50_ms", "p99_ms", "p999_ms", "cpu_us_op"};

static void write_line(bench_harness *h, const bench_cell *c, const slot *s) {
  FILE *f = h->out;
  const bench_plan *p = &h->p;
  if (!f)
    return;
  fputs("{\"v\":1,\"program\":", f);
  json_str(f, p->program);
  fputs(",\"workload\":", f);
  json_str(f, p->workload ? p->workload : "");
  fputs(",\"arm\":", f);
  json_str(f, p->arms[c->arm]);
  if (p->dim_n != BENCH_NONE && !ignored(h, c->arm, p->dim_n)) {
    fprintf(f, ",\"n\":%d,\"n_of\":", c->val[p->dim_n]);
    json_str(f, p->dims[p->dim_n].key);
  } else {
    fputs(",\"n\":null,\"n_of\":null", f);
  }
  fputs(",\"sync\":", f);
  if (p->dim_sync != BENCH_NONE && !ignored(h, c->arm, p->dim_sync))
    json_str(f, bench_cell_label(c, p->dim_sync));
  else
    fputs("null", f);
  fputs(",\"cell\":{", f);
  int first = 1;
  for (int d = 0; d < p->ndims; d++) {
    if (d == p->dim_n || d == p->dim_sync || ignored(h, c->arm, d))
      continue;
    fputs(first ? "" : ",", f);
    first = 0;
    json_str(f, p->dims[d].key);
    fputc(':', f);
    if (p->dims[d].label)
      json_str(f, bench_cell_label(c, d));
    else
      fprintf(f, "%d", c->val[d]);
  }
  fprintf(f, "},\"round\":%d,\"rounds\":%d", c->round + 1, p->cli->rounds);
  for (int r = 1; r < BENCH_NROLE; r++) {
    double v = NAN;
    for (int k = 0; k < p->nmetrics; k++)
      if ((int)p->metrics[k].role == r)
        v = c->m[k];
    fprintf(f, ",\"%s\":", ROLE_KEY[r]);
    json_num(f, v);
  }
  fprintf(f, ",\"errors\":%lld,\"sampled\":%s,\"wall_s\":", (long long)s->errors,
          s->sampled ? "true" : "false");
  json_num(f, s->wall_s);
  fputs(",\"m\":{", f);
  for (int k = 0; k < p->nmetrics; k++) {
    fprintf(f, "%s\"%s\":", k ? "," : "", p->metrics[k].key);
    json_num(f, c->m[k]);
  }
  fputs("},\"seconds\":", f);
  json_num(f, p->cli->seconds);
  fputs(",\"warmup\":", f);
  json_num(f, p->cli->warmup);
  fprintf(f, ",\"quick\":%s,\"commit\":", p->cli->quick ? "true" : "false");
  json_str(f, h->commit);
  fputs(",\"cpu\":", f);
  json_str(f, h->mach.cpu);
  fprintf(f, ",\"nproc\":%ld,\"date\":", h->mach.nproc);
  json_str(f, h->date);
  fputs("}\n", f);
  fflush(f);
}

static void progress(const bench_harness *h, const bench_cell *c, const slot *s) {
  char name[256], line[512];
  size_t k = 0;
  run_name(c, name, sizeof name);
  line[0] = '\0';
  for (int m = 0; m < h->p.nmetrics && k < sizeof line; m++) {
    bench_role r = h->p.metrics[m].role;
    if (r == BENCH_ROLE_NONE || isnan(c->m[m]))
      continue;
    k += (size_t)snprintf(line + k, sizeof line - k, r == BENCH_ROLE_RATE ? "  %s %.0f" : "  %s %.3f",
                          ROLE_KEY[r], c->m[m]);
  }
  fprintf(stderr, "[%s] %s:%s  errors %lld  (%.1f s)\n", h->p.program, name, line, (long long)s->errors,
          s->wall_s);
}

const bench_cell *bench_harness_run_one(bench_harness *h, int arm, const int *idx, int round) {
  size_t i = run_of(h, arm, idx, round);
  slot *s = &h->slots[i];
  bench_cell *c = &h->cell;
  memset(c, 0, sizeof *c);
  c->h = h;
  c->arm = arm;
  c->round = round;
  c->ctx = h->p.ctx;
  for (int d = 0; d < h->p.ndims; d++) {
    c->idx[d] = idx[d];
    c->val[d] = h->p.dims[d].v[idx[d]];
  }
  c->m = &h->m[i * (size_t)h->p.nmetrics];
  for (int k = 0; k < h->p.nmetrics; k++)
    c->m[k] = NAN;
  int64_t t0 = bench_now_ns();
  h->p.run(c);
  memset(s, 0, sizeof *s);
  s->wall_s = (double)(bench_now_ns() - t0) / 1e9;
  s->ran = 1;
  s->errors = c->errors;
  s->sampled = c->sampled;
  h->total_errors += c->errors;
  write_line(h, c, s);
  progress(h, c, s);
  return c;
}

/* Every cell, in row-major order, from idx all zero; 0 when past the last. */
static int next_cell(const bench_harness *h, int *idx) {
  for (int d = h->p.ndims - 1; d >= 0; d--) {
    if (++idx[d] < h->p.dims[d].n)
      return 1;
    idx[d] = 0;
  }
  return 0;
}

void bench_harness_run_all(bench_harness *h) {
  const bench_plan *p = &h->p;
  for (int r = 0; r < p->cli->rounds; r++) {
    int idx[BENCH_MAXDIMS] = {0};
    do {
      for (int k = 0; k < p->narms; k++) {
        int arm = (p->flags & BENCH_ALTERNATE) && r % 2 ? p->narms - 1 - k : k;
        if (p->arm_on && !p->arm_on[arm])
          continue;
        int skip = 0;
        for (int d = 0; d < p->ndims; d++)
          skip |= ignored(h, arm, d) && idx[d] != 0;
        if (!skip)
          bench_harness_run_one(h, arm, idx, r);
      }
    } while (next_cell(h, idx));
  }
}

/* ---- over rounds ------------------------------------------------------------------------------ */

/* An arm that ignores a dimension ran at its first value: read it there. */
static void arm_idx(const bench_harness *h, int arm, const int *idx, int *out) {
  for (int d = 0; d < h->p.ndims; d++)
    out[d] = ignored(h, arm, d) ? 0 : idx[d];
}

int bench_harness_ran(const bench_harness *h, int arm, const int *idx) {
  int a[BENCH_MAXDIMS];
  arm_idx(h, arm, idx, a);
  return h->slots[run_of(h, arm, a, 0)].ran;
}

double bench_harness_value(const bench_harness *h, int arm, const int *idx, int round, int metric) {
  int a[BENCH_MAXDIMS];
  arm_idx(h, arm, idx, a);
  size_t i = run_of(h, arm, a, round);
  return h->slots[i].ran ? h->m[i * (size_t)h->p.nmetrics + (size_t)metric] : NAN;
}

bench_agg bench_harness_agg(const bench_harness *h, int arm, const int *idx, int metric) {
  int n = h->p.cli->rounds;
  double *v = malloc((size_t)n * sizeof *v);
  bench_agg a = {0, NAN, NAN, NAN};
  if (!v)
    return a;
  for (int r = 0; r < n; r++)
    v[r] = bench_harness_value(h, arm, idx, r, metric);
  a = bench_agg_of(v, n);
  free(v);
  return a;
}

bench_agg bench_harness_paired(const bench_harness *h, const int *idx, int arm, int metric, int other,
                               int other_metric) {
  int n = h->p.cli->rounds;
  double *v = malloc((size_t)n * sizeof *v);
  bench_agg a = {0, NAN, NAN, NAN};
  if (!v)
    return a;
  for (int r = 0; r < n; r++) {
    double x = bench_harness_value(h, arm, idx, r, metric),
           y = bench_harness_value(h, other, idx, r, other_metric);
    v[r] = isnan(x) || isnan(y) || y == 0 ? NAN : x / y;
  }
  a = bench_agg_of(v, n);
  free(v);
  return a;
}

int64_t bench_harness_errors(const bench_harness *h, int arm, const int *idx) {
  int a[BENCH_MAXDIMS];
  int64_t e = 0;
  arm_idx(h, arm, idx, a);
  for (int r = 0; r < h->p.cli->rounds; r++)
    e += h->slots[run_of(h, arm, a, r)].errors;
  return e;
}

int64_t bench_harness_total_errors(const bench_harness *h) { return h->total_errors; }

int bench_harness_sampled(const bench_harness *h, int arm, const int *idx) {
  int a[BENCH_MAXDIMS], s = 0;
  arm_idx(h, arm, idx, a);
  for (int r = 0; r < h->p.cli->rounds; r++)
    s |= h->slots[run_of(h, arm, a, r)].sampled;
  return s;
}

double bench_harness_ratio(const bench_harness *h, int arm, int other, const int *idx, int metric) {
  double x = bench_harness_agg(h, arm, idx, metric).med, y = bench_harness_agg(h, other, idx, metric).med;
  return isnan(x) || isnan(y) || y == 0 ? NAN : x / y;
}

int bench_harness_find(const bench_harness *h, int d, int v) {
  if (d < 0 || d >= h->p.ndims)
    return -1;
  return bench_find_int(h->p.dims[d].v, h->p.dims[d].n, v);
}
