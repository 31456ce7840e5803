/*
 * bench/harness.h — the loop every benchmark program runs, written once:
 * arms × cells × rounds, each run timed and stored, its result written as
 * one line of the results format (bench/results.md), the progress line,
 * the medians and ranges over rounds, the ratios between arms.
 *
 * Why: each program had its own copy of this frame (the result array and
 * its index arithmetic, run_one's setup and progress line, aggregate,
 * errors_of, arm_ran, ratio, csv_row and csv_summaries) and its own CSV
 * columns; the report (bench/report.py) needs every program's cells in one
 * format, with the commit and the CPU model beside them. What stays in a
 * program: its workload, its arms (the run callback), its metrics' names,
 * its tables and options.
 *
 * A plan has up to BENCH_MAXDIMS dimensions (synchronous, producers,
 * checkpoint mode, files...), each a list of ints with a key and, where the
 * value is a name, a label function. A cell is one index per dimension.
 * Metrics are doubles, NAN where not measured; the first few may carry a
 * role (rate, p50, p99, p99.9, CPU µs per operation) that the results line
 * repeats under the report's common names.
 *
 * Order (bench_harness_run_all): round r runs every arm of every cell before
 * round r+1, the dimensions in their order, the arms innermost (odd rounds
 * in reverse with BENCH_ALTERNATE), so every arm of a cell runs under the
 * same conditions. A program with an order of its own (bench/growth grows
 * its database between cells) calls bench_harness_run_one itself.
 *
 * Ownership: the harness copies nothing it is given but the dimension
 * lists; names and labels must outlive it (string literals). It owns the
 * results file and the result storage; bench_harness_destroy frees both.
 */
#ifndef LITH_BENCH_HARNESS_H
#define LITH_BENCH_HARNESS_H

#include <stdint.h>
#include <stdio.h>

#include "common.h"

enum { BENCH_MAXDIMS = 6, BENCH_MAXVALS = 32, BENCH_MAXARMS = 16 };

/* What the results line repeats under a common name (bench/results.md). */
typedef enum bench_role {
  BENCH_ROLE_NONE,
  BENCH_ROLE_RATE,   /* operations per second: "rate" */
  BENCH_ROLE_P50,    /* ms: "p50_ms" */
  BENCH_ROLE_P99,    /* ms: "p99_ms" */
  BENCH_ROLE_P999,   /* ms: "p999_ms" */
  BENCH_ROLE_CPU_US, /* CPU µs per operation (the server's, or the process's): "cpu_us_op" */
  BENCH_NROLE
} bench_role;

typedef struct bench_metric {
  const char *key; /* the results line's name: [a-z0-9_], "cmds_per_s" */
  bench_role role;
} bench_metric;

typedef struct bench_dim {
  const char *key; /* "sync", "producers", "conns", "checkpoint": [a-z0-9_] */
  int n, v[BENCH_MAXVALS];
  const char *(*label)(int v); /* NULL: the value is a number */
} bench_dim;

/* The dimension that counts clients: the results line's "n". */
enum { BENCH_NONE = -1 };

enum {
  BENCH_ALTERNATE = 1 << 0, /* odd rounds run a cell's arms in reverse */
};

typedef struct bench_harness bench_harness;

/* One run: an arm at a cell in a round. The harness fills the first block;
 * the run callback fills m[] (NAN beforehand), errors and sampled. */
typedef struct bench_cell {
  bench_harness *h;
  int arm, round;         /* round from 0 */
  int idx[BENCH_MAXDIMS]; /* index into each dimension's list */
  int val[BENCH_MAXDIMS]; /* the values themselves */
  double *m;              /* nmetrics doubles */
  int64_t errors;         /* failed operations, setup failures */
  int sampled;            /* a latency buffer kept fewer values than it saw */
  int msgs;               /* error messages printed (bench_cell_error) */
  void *ctx;              /* the plan's ctx */
} bench_cell;

typedef struct bench_plan {
  const char *program;  /* "writer": the results' "program" and file name */
  const char *workload; /* "transfer", "movecard": the results' "workload" */
  const char *const *arms;
  int narms;
  const int *arm_on; /* narms flags: the arms asked for */
  bench_dim dims[BENCH_MAXDIMS];
  int ndims;
  int dim_n;    /* the dimension that counts producers/connections, or BENCH_NONE */
  int dim_sync; /* the dimension whose labels are FULL/NORMAL, or BENCH_NONE */
  const bench_metric *metrics;
  int nmetrics;
  int flags; /* BENCH_ALTERNATE */
  /* Which dimensions an arm does not vary in (a bit per dimension): it runs
   * at their first value only, and its results line leaves them out. NULL:
   * every arm varies in every dimension. */
  unsigned (*ignores)(int arm);
  /* Run one arm at one cell: the program's workload. */
  void (*run)(bench_cell *cell);
  void *ctx;
  const bench_cli *cli; /* rounds, seconds, warmup, quick, --results */
} bench_plan;

/* A plan's arms and metrics from their arrays (sizeof: arrays, not pointers):
 * bench_plan plan = {BENCH_PLAN_ARMS(ARM_NAME), BENCH_PLAN_METRICS(METRICS), ...}. */
#define BENCH_PLAN_ARMS(names) .arms = (names), .narms = (int)(sizeof(names) / sizeof *(names))
#define BENCH_PLAN_METRICS(m) .metrics = (m), .nmetrics = (int)(sizeof(m) / sizeof *(m))

/* Dimension d of the plan: its key, its label (NULL: numbers) and its n values. */
void bench_plan_dim(bench_plan *p, int d, const char *key, const char *(*label)(int v), const int *v, int n);

/* main's frame, for a program that runs every cell in the standard order:
 * the harness made, header(ctx, results path or NULL) prints the run's
 * header, bench_harness_run_all, tables(h, ctx) prints the tables, the
 * harness destroyed. The errors of every run, or -1 when it could not be
 * made (said on stderr). */
int64_t bench_harness_main(const bench_plan *p, void (*header)(void *ctx, const char *results),
                           void (*tables)(const bench_harness *h, void *ctx));

/* Opens the results file (cli->results, or bench/results/PROGRAM-YYYYMMDD-HHMMSS.jsonl,
 * the directory made; its path in bench_harness_path) and the storage for
 * every run. NULL (said on stderr) when out of memory or when the results
 * file cannot be written: a run whose figures go nowhere is not started.
 * The plan is copied; what it points to must outlive the harness. */
bench_harness *bench_harness_create(const bench_plan *plan);
void bench_harness_destroy(bench_harness *h);           /* closes the results file; NULL is fine */
const char *bench_harness_path(const bench_harness *h); /* NULL when none */

/* Every round, cell and arm asked for, in the order above. */
void bench_harness_run_all(bench_harness *h);
/* One run: storage reset, the callback timed, the result stored, its
 * results line written and a progress line on stderr. idx: one index per
 * dimension. Returns the run's cell: valid until the next run, its m[]
 * (the stored metrics) until destroy. */
const bench_cell *bench_harness_run_one(bench_harness *h, int arm, const int *idx, int round);

/* "  error [ARM dim=v ... round R]: msg", at most five per run, on stderr;
 * counts nothing (errors is the caller's). Any thread of the run may call it. */
void bench_cell_error(bench_cell *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *bench_cell_label(const bench_cell *c, int dim); /* "FULL", "200" (a static buffer per dim) */
/* Merge bufs[0..nb) into the run's metrics m_p50, m_p99 and m_p999 (ms;
 * -1: not that one) and its sampled flag; out of memory is an error of the
 * run (counted and said). */
void bench_cell_latency(bench_cell *c, bench_lat *const *bufs, int nb, int m_p50, int m_p99, int m_p999);

/* ---- over rounds ---------------------------------------------------------------------- */

int bench_harness_ran(const bench_harness *h, int arm, const int *idx); /* round 0 ran */
/* The metric's median and range over the rounds that ran. */
bench_agg bench_harness_agg(const bench_harness *h, int arm, const int *idx, int metric);
int64_t bench_harness_errors(const bench_harness *h, int arm, const int *idx); /* summed over rounds */
int64_t bench_harness_total_errors(const bench_harness *h);
int bench_harness_sampled(const bench_harness *h, int arm, const int *idx); /* in any round */
/* median(arm's metric) / median(other's metric) at one cell; NAN when either is missing. */
double bench_harness_ratio(const bench_harness *h, int arm, int other, const int *idx, int metric);
/* The median and range over rounds of each round's arm metric ÷ other's
 * other_metric at the same cell: paired, as the report judges them. */
bench_agg bench_harness_paired(const bench_harness *h, const int *idx, int arm, int metric, int other,
                               int other_metric);
/* One round's stored value; NAN when it did not run. */
double bench_harness_value(const bench_harness *h, int arm, const int *idx, int round, int metric);

/* The index of value v in dimension d, or -1. */
int bench_harness_find(const bench_harness *h, int d, int v);

#endif
