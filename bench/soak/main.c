/*
 * bench/soak — lithd for SOAK_MINUTES under transfer load, a nemesis and an
 * attacker; after every fault the database is checked. `make soak
 * SOAK_MINUTES=N`. Prints a summary table; exits 1 when a check failed.
 *
 * bench/soak/main.c is the driver: the options, the run's directory and
 * files (the schema, the commands), the threads, the loop that runs the
 * faults in turn from its table, and the end. The rest, one thing a file
 * (soak.h states what they share):
 *
 *   lithd.c    lithd under test: start, restart, RSS, descriptors, log; the
 *              monitor thread; the HTTP spoken to it
 *   load.c     the transfer clients and the probe, each outcome recorded
 *   faults.c   the nemesis (vanish, slowloris, SIGSTOP, disk full, SIGKILL),
 *              the read-heavy phase (readers always reading: the -wal
 *              file's bound) and the filesystem the database lives on
 *   attacks.c  issue 10's hostile requests and the threads that send them
 *   checks.c   the checks: the database after each fault, the end of the
 *              run; failures and findings
 *   report.c   the tables printed at the end
 *
 * The database lives on a filesystem of its own that the nemesis can fill
 * (faults.c); the real disk is never filled. The end: the threads stop,
 * the last check runs against the live lithd, then SIGTERM and the check
 * once more on the file (checks.c).
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

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "soak.h"

#ifndef LITHD_PATH
#define LITHD_PATH "build/default/tools/lithd/lithd"
#endif

const char *const PH_NAME[NPH] = {"between faults",        "clients that vanish", "slowloris",
                                  "SIGSTOP, SIGCONT",      "disk full, freed",    "SIGKILL, restart",
                                  "readers always reading"};

soak_state soak;

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
         "  --read-conns N     the read-heavy phase's readers, each always with a /v1/query running\n"
         "                     (default 8; 0: no such phase)\n"
         "  --read-seconds S   how long each read-heavy phase lasts (default 20; --quick: 5)\n"
         "  --wal-bound-mib N  the -wal file's bound meanwhile (default 64)\n"
         "  --wal-hold-ms MS   passed to lithd (default: lithd's own; 0 shows what the bound catches)\n"
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
  } else if (!strcmp(a, "--read-conns")) {
    c->read_conns = take_int(v, a, 0, MAX_READ_CONNS);
  } else if (!strcmp(a, "--read-seconds")) {
    c->read_seconds = take_int(v, a, 1, 3600);
  } else if (!strcmp(a, "--wal-bound-mib")) {
    c->wal_bound_mib = take_int(v, a, 1, 1 << 20);
  } else if (!strcmp(a, "--wal-hold-ms")) {
    c->wal_hold_ms = take_int(v, a, 0, 600000);
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
  c->read_conns = 8;
  c->wal_bound_mib = 64;
  c->wal_hold_ms = -1;
  c->lithd = LITHD_PATH;
  bench_cli_parse(&c->cli, n, av, take_option, c);
  free(av);
  if (!c->minutes)
    c->minutes = c->cli.quick ? 0.5 : 1;
  /* 20 s: with --wal-hold-ms 0 (no hold) a 20 s phase filled the 97 MiB filesystem with the -wal
   * file, while a 5 s one left it at 19 MiB (2 shared CPUs): a short phase would pass without the
   * hold. --quick keeps 5 s, a smoke run's: its 30 s then still reach the disk-full fault. */
  if (!c->read_seconds)
    c->read_seconds = c->cli.quick ? 5 : 20;
  /* a log row takes ~18 bytes (measured): 48 each, and 32 MiB for the WAL and the rest. With the
   * read-heavy phase: room for the WAL at its bound (else a full disk would hide a WAL past it),
   * and for its transfers, unthrottled (a phase in every ~55 s, at most 10,000/s) */
  if (!c->fs_mib) {
    double phases = c->read_conns ? 1 + c->minutes * 60 / 55 : 0;
    c->fs_mib =
        c->rate ? 32 + (c->read_conns ? c->wal_bound_mib : 0) +
                      (int)((c->rate * c->minutes * 60 + phases * c->read_seconds * 10000) * 48 / (1 << 20))
                : 1024;
  }
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
  printf("plan: %g min; %d clients, %d transfers/s; in turn: ", c->minutes, c->clients, c->rate);
  if (c->read_conns)
    printf("readers always reading (%d conns, %d s; -wal bound %d MiB%s), ", c->read_conns, c->read_seconds,
           c->wal_bound_mib, c->wal_hold_ms >= 0 ? "; lithd --wal-hold-ms given" : "");
  printf("vanish, slowloris (%d conns, %d s), SIGSTOP, disk full%s, SIGKILL; RSS bound %d MiB\n",
         c->slow_conns, c->slow_seconds, soak.fs_kind == FS_NONE ? " (skipped)" : "", c->rss_mib);
  fflush(stdout);

  soak.cl = bench_xcalloc((size_t)c->clients + 1, sizeof *soak.cl);
  soak.rc = bench_xcalloc((size_t)c->read_conns, sizeof *soak.rc);
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
  size_t readcap = bench_lat_cap(c->read_conns ? c->read_conns : 1, c->minutes * 60);
  for (int i = 0; i < c->read_conns; i++) {
    soak.rc[i].idx = i;
    if (bench_lat_init(&soak.rc[i].lat, 0, readcap, (uint64_t)i + 1000) != 0) {
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

  /* The read-heavy phase first: a run of a minute or less (make soak's default, --quick) has it too. */
  static void (*const FAULT[])(void) = {soak_fault_readers, soak_fault_vanish,   soak_fault_slowloris,
                                        soak_fault_sigstop, soak_fault_diskfull, soak_fault_sigkill};
  static const int FAULT_PH[] = {PH_READ, PH_VANISH, PH_SLOW, PH_STOP, PH_FULL, PH_KILL};
  enum { NFAULT = sizeof FAULT_PH / sizeof *FAULT_PH };
  int64_t deadline = soak.t_begin + (int64_t)(c->minutes * 60e9);
  for (int i = 0; !atomic_load(&soak.quit) && bench_now_ns() < deadline; i++) {
    for (int w = 0; w < 15 && !atomic_load(&soak.quit); w++) { /* a gap of 1.5 s: load and attacks only */
      bench_sleep_ms(100);
      soak_lithd_watch();
    }
    int f = i % NFAULT;
    if ((FAULT_PH[f] == PH_FULL && soak.fs_kind == FS_NONE) || (FAULT_PH[f] == PH_READ && !c->read_conns))
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
  for (int i = 0; i < c->read_conns; i++)
    bench_lat_free(&soak.rc[i].lat);
  free(soak.rc);
  bench_print_end("failed checks", soak.failed, soak.t_begin);
  return soak.failed ? 1 : 0;
}
