/*
 * bench/harness.h's promises, on a plan whose run callback measures
 * nothing: it writes a value made of the arm, the cell and the round, so
 * every stored figure, ratio and results line can be checked exactly.
 *   - the order: rounds outermost, the dimensions in their order, the arms
 *     innermost, reversed on odd rounds with BENCH_ALTERNATE; an arm that
 *     ignores a dimension runs at its first value only; arms not asked for
 *     never run;
 *   - storage: each run's metrics, medians and ranges over rounds, errors
 *     summed, ratios of medians and of paired rounds, an ignoring arm read
 *     at any value of the dimension it ignores;
 *   - the results file: one line per run with the keys of bench/results.md,
 *     the roles' common names, null for NAN, no key for an ignored
 *     dimension, n and sync from their dimensions; a results file that
 *     cannot be written stops the run before it starts.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../harness.h"

enum { ARM_A, ARM_B, ARM_OFF, NARMS };
static const char *const ARMS[NARMS] = {"a", "b", "off"};
static const int ON[NARMS] = {1, 1, 0};

enum { D_SYNC, D_N, D_MODE, NDIM };
enum { M_RATE, M_P99, M_OTHER, NMETRIC };
static const bench_metric METRICS[NMETRIC] = {
    {"ops_per_s", BENCH_ROLE_RATE}, {"lat_p99_ms", BENCH_ROLE_P99}, {"other", BENCH_ROLE_NONE}};

static const char *sync_label(int v) { return v ? "FULL" : "NORMAL"; }
static const char *mode_label(int v) { return v ? "Y" : "X"; }

/* arm b ignores the mode */
static unsigned ignores(int arm) { return arm == ARM_B ? 1u << D_MODE : 0; }

typedef struct visit {
  int arm, round, idx[NDIM];
} visit;

static visit g_visits[256];
static int g_nvisits;

/* a: 100 × (n + mode + 1) × (round + 1); b: 10 × n × (round + 1); errors on a's round 2 */
static void run(bench_cell *c) {
  visit *v = &g_visits[g_nvisits++];
  v->arm = c->arm;
  v->round = c->round;
  memcpy(v->idx, c->idx, sizeof v->idx);
  double r = c->round + 1, n = c->val[D_N];
  c->m[M_RATE] = c->arm == ARM_A ? 100 * (n + c->val[D_MODE] + 1) * r : 10 * n * r;
  c->m[M_P99] = c->arm == ARM_A ? 2.5 : NAN;
  c->m[M_OTHER] = c->round;
  if (c->arm == ARM_A && c->round == 1)
    c->errors = 3;
}

static bench_cli g_cli;
static char g_path[64];

static bench_plan plan(int flags) {
  static const int syncs[1] = {1}, ns[2] = {1, 8}, modes[2] = {0, 1};
  bench_plan p = {.program = "t",
                  .workload = "w",
                  BENCH_PLAN_ARMS(ARMS),
                  .arm_on = ON,
                  .ndims = NDIM,
                  .dim_n = D_N,
                  .dim_sync = D_SYNC,
                  BENCH_PLAN_METRICS(METRICS),
                  .flags = flags,
                  .ignores = ignores,
                  .run = run,
                  .cli = &g_cli};
  bench_plan_dim(&p, D_SYNC, "sync", sync_label, syncs, 1);
  bench_plan_dim(&p, D_N, "producers", NULL, ns, 2);
  bench_plan_dim(&p, D_MODE, "mode", mode_label, modes, 2);
  return p;
}

static bench_harness *run_all(int flags) {
  g_cli = (bench_cli){.rounds = 3, .seconds = 1, .warmup = 0.25};
  snprintf(g_path, sizeof g_path, "/tmp/lith-test-harness-%d.jsonl", (int)getpid());
  g_cli.results = g_path;
  g_nvisits = 0;
  bench_plan p = plan(flags);
  bench_harness *h = bench_harness_create(&p);
  assert_non_null(h);
  assert_string_equal(bench_harness_path(h), g_path);
  bench_harness_run_all(h);
  return h;
}

static void test_order(void **state) {
  (void)state;
  bench_harness *h = run_all(BENCH_ALTERNATE);
  /* per round: n=1 mode X (a, b), n=1 mode Y (a), n=8 mode X (a, b), n=8 mode Y (a): 6 runs */
  assert_int_equal(g_nvisits, 18);
  static const int want[6][3] = {{ARM_A, 0, 0}, {ARM_B, 0, 0}, {ARM_A, 0, 1},
                                 {ARM_A, 1, 0}, {ARM_B, 1, 0}, {ARM_A, 1, 1}};
  for (int r = 0; r < 3; r++)
    for (int k = 0; k < 6; k++) {
      const visit *v = &g_visits[r * 6 + k];
      /* odd rounds: a cell's arms the other way round */
      int j = k;
      if (r % 2 && (k == 0 || k == 3))
        j = k + 1;
      else if (r % 2 && (k == 1 || k == 4))
        j = k - 1;
      assert_int_equal(v->round, r);
      assert_int_equal(v->arm, want[j][0]);
      assert_int_equal(v->idx[D_N], want[j][1]);
      assert_int_equal(v->idx[D_MODE], want[j][2]);
      assert_int_equal(v->idx[D_SYNC], 0);
    }
  bench_harness_destroy(h);
  unlink(g_path);
}

static void test_storage(void **state) {
  (void)state;
  bench_harness *h = run_all(0);
  int n8y[NDIM] = {0, 1, 1}, n8x[NDIM] = {0, 1, 0};
  /* a at n=8 mode Y: 1000, 2000, 3000 */
  bench_agg a = bench_harness_agg(h, ARM_A, n8y, M_RATE);
  assert_int_equal(a.n, 3);
  assert_true(a.med == 2000 && a.lo == 1000 && a.hi == 3000);
  assert_true(bench_harness_value(h, ARM_A, n8y, 2, M_RATE) == 3000);
  /* b ignores the mode: read at mode Y it is its mode X run, 80, 160, 240 */
  assert_true(bench_harness_ran(h, ARM_B, n8y));
  assert_true(bench_harness_agg(h, ARM_B, n8y, M_RATE).med == 160);
  assert_true(bench_harness_ratio(h, ARM_A, ARM_B, n8y, M_RATE) == 2000.0 / 160);
  bench_agg pr = bench_harness_paired(h, n8x, ARM_A, M_RATE, ARM_B, M_RATE);
  assert_true(pr.n == 3 && fabs(pr.med - 900.0 / 80) < 1e-9 && fabs(pr.hi - pr.lo) < 1e-9);
  /* NAN stays NAN: b has no p99 */
  assert_true(isnan(bench_harness_agg(h, ARM_B, n8x, M_P99).med));
  assert_int_equal(bench_harness_errors(h, ARM_A, n8x), 3);
  assert_int_equal(bench_harness_errors(h, ARM_B, n8x), 0);
  assert_int_equal(bench_harness_total_errors(h), 3 * 4); /* a's four cells, round 2 */
  /* the arm not asked for never ran */
  assert_false(bench_harness_ran(h, ARM_OFF, n8x));
  assert_int_equal(bench_harness_find(h, D_N, 8), 1);
  assert_int_equal(bench_harness_find(h, D_N, 3), -1);
  bench_harness_destroy(h);
  unlink(g_path);
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
    n++;
  return n;
}

static void test_results_file(void **state) {
  (void)state;
  bench_harness *h = run_all(0);
  bench_harness_destroy(h); /* closes the file */
  FILE *f = fopen(g_path, "r");
  assert_non_null(f);
  char line[4096];
  int lines = 0, a_lines = 0, b_lines = 0;
  while (fgets(line, sizeof line, f)) {
    lines++;
    assert_non_null(strstr(line, "{\"v\":1,\"program\":\"t\",\"workload\":\"w\",\"arm\":\""));
    assert_non_null(strstr(line, ",\"n_of\":\"producers\",\"sync\":\"FULL\","));
    assert_non_null(strstr(line, ",\"rounds\":3,"));
    assert_non_null(strstr(line, ",\"p50_ms\":null,"));
    assert_non_null(strstr(line, ",\"seconds\":1,\"warmup\":0.25,\"quick\":false,\"commit\":\""));
    assert_non_null(strstr(line, ",\"cpu\":\""));
    assert_non_null(strstr(line, ",\"date\":\""));
    assert_int_equal(line[strlen(line) - 1], '\n');
    assert_int_equal(line[strlen(line) - 2], '}');
    if (strstr(line, "\"arm\":\"a\"")) {
      a_lines++;
      assert_non_null(strstr(line, "\"cell\":{\"mode\":\""));
      assert_non_null(strstr(line, ",\"p99_ms\":2.5,"));
      assert_non_null(strstr(line, "\"lat_p99_ms\":2.5"));
    } else {
      b_lines++;
      assert_non_null(strstr(line, "\"arm\":\"b\""));
      assert_non_null(strstr(line, "\"cell\":{}")); /* the mode it ignores is left out */
      assert_non_null(strstr(line, ",\"p99_ms\":null,"));
    }
  }
  fclose(f);
  assert_int_equal(lines, 18);
  assert_int_equal(a_lines, 12);
  assert_int_equal(b_lines, 6);
  /* the rate under its common name and its own; the errors of a's second round */
  FILE *g = fopen(g_path, "r");
  char all[65536];
  size_t len = fread(all, 1, sizeof all - 1, g);
  fclose(g);
  all[len] = '\0';
  assert_int_equal(
      count(all, "\"n\":8,\"n_of\":\"producers\",\"sync\":\"FULL\",\"cell\":{\"mode\":\"Y\"},\"round\":3,"
                 "\"rounds\":3,\"rate\":3000,"),
      1);
  assert_int_equal(count(all, "\"ops_per_s\":3000,"), 1);
  assert_int_equal(count(all, "\"errors\":3,"), 4);
  assert_int_equal(count(all, "\"arm\":\"off\""), 0);
  unlink(g_path);
}

/* A results file that cannot be written: the run is not started. */
static void test_no_results_file(void **state) {
  (void)state;
  g_cli = (bench_cli){.rounds = 1, .seconds = 1, .results = "/nonexistent-dir/t.jsonl"};
  bench_plan p = plan(0);
  assert_null(bench_harness_create(&p));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_order),
      cmocka_unit_test(test_storage),
      cmocka_unit_test(test_results_file),
      cmocka_unit_test(test_no_results_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
