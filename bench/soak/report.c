/*
 * bench/soak/report.c — the tables the soak prints at the end: the faults,
 * the checks, the transfers by phase, the read-heavy phase, the attacks
 * (attacks.c's), lithd's figures, the findings, disturbances and failures.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <math.h>
#include <stdio.h>

#include "soak.h"

void soak_report_fmt_ms(char *b, size_t n, int64_t ns) {
  bench_fmt_ms(b, n, ns < 0 ? NAN : (double)ns / 1e6, 1);
}

/* The read-heavy phase: the -wal file against its bound, the holds, the reads. */
static void print_readers(void) {
  const config *c = &soak.cfg;
  if (!c->read_conns || !soak.row[PH_READ].injected)
    return;
  printf("\n### readers always reading (the read-heavy phase)\n\n");
  printf(
      "- %lld phase(s) of %d s: %d connections each always with a /v1/query running (the balances' "
      "sum\n  and a report over the log's last 50,000 rows, one snapshot) beside the %d transfer clients,\n"
      "  unthrottled; lithd --wal-hold-ms %s\n",
      (long long)soak.row[PH_READ].injected, c->read_seconds, c->read_conns, c->clients,
      c->wal_hold_ms >= 0 ? BENCH_NUM("%.0f", c->wal_hold_ms) : "(its default)");
  printf("- the -wal file: at most %.1f MiB (sampled every 20 ms; bound %d MiB): %s\n",
         (double)soak.read_wal_max / 1048576, c->wal_bound_mib,
         soak.read_wal_max <= ((int64_t)c->wal_bound_mib << 20) ? "within" : "PASSED THE BOUND");
  bench_lat *bufs[MAX_READ_CONNS];
  for (int i = 0; i < c->read_conns; i++)
    bufs[i] = &soak.rc[i].lat;
  static const double qs[2] = {0.5, 0.99};
  bench_lat_sum s;
  char r50[32] = "–", r99[32] = "–", rmx[32] = "–";
  if (bench_lat_merge(bufs, c->read_conns, qs, 2, &s) == 0 && s.count) {
    bench_fmt_ms(r50, sizeof r50, s.q[0] / 1e6, 1);
    bench_fmt_ms(r99, sizeof r99, s.q[1] / 1e6, 1);
    bench_fmt_ms(rmx, sizeof rmx, (double)s.max / 1e6, 1);
  }
  printf("- reads: %lld right, %lld wrong; p50 %s ms, p99 %s ms, max %s ms (from send to the whole answer)\n",
         (long long)atomic_load(&soak.read_n), (long long)atomic_load(&soak.read_bad), r50, r99, rmx);
  if (soak.read_phases_stats)
    printf("- lithd's /v1/stats over %d of the phases: %lld WAL holds (%lld gave up), %lld reads held\n",
           soak.read_phases_stats, (long long)soak.read_holds, (long long)soak.read_gave_up,
           (long long)soak.read_held);
  else
    printf("- lithd's /v1/stats: not read at both ends of any phase\n");
  printf("- the writers meanwhile: the transfers table's row \"%s\"\n", PH_NAME[PH_READ]);
}

void soak_report_print(void) {
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
    if (r == PH_READ && !soak.cfg.read_conns) {
      printf("| %s | skipped: --read-conns 0 | | | | |\n", name);
      continue;
    }
    soak_report_fmt_ms(a, sizeof a,
                       x->injected && r != PH_VANISH && r != PH_SLOW && r != PH_READ && r != ROW_END
                           ? x->max_recovery_ns
                           : -1);
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

  print_readers();

  soak_attack_print();

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
