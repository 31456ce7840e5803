/*
 * bench/soak/checks.c — the checks and what they found: failures,
 * findings (known open issues) and each check's count by fault; the
 * database check every fault ends with; the end of the run's checks.
 *
 * The database check, through a read-only SQLite connection of our own, in
 * one snapshot: every transfer answered OK present, none refused or 507
 * present, no log row the clients never sent, money conserved (sum of
 * balances), every balance equal to 1000 plus what the log says came in
 * minus went out (each transfer atomic), no row from a refused attack in
 * marks; then PRAGMA integrity_check; lithd's RSS within --rss-mib.
 * RSS samples taken while a heavy request may be running in lithd are
 * reported apart, so a known peak does not hide a leak.
 *
 * The RSS bound, 256 MiB: lithd idles at ~7 MiB; each of its six SQLite
 * connections (writer, 4 readers, checkpointer) may cache up to the
 * database's size (16 MiB cache_size each, ~96 MiB at most), plus the
 * slowloris connections' buffers (~200 x 16 KiB) and answers in flight
 * (1 MiB for the largest query here): ~110 MiB. Twice that leaves room for
 * allocator slack and still catches a leak that grows with requests.
 *
 * The end: the threads have stopped; the check runs against the live
 * lithd, then SIGTERM (exit 0 within 60 s; a heavy read still running
 * makes this a finding, not a failure, and SIGKILL) and the check once more
 * on the file; then the run's totals (innocent transfers, attacks, probe,
 * lithd's deaths, RSS peak).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include "soak.h"

const char *const CHECK_NAME[NCHECK] = {
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
    "readers: -wal within its bound",
    "readers: every read right",
};

/* ---- messages ------------------------------------------------------------------------- */

void soak_check_failure(const char *fmt, ...) {
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

void soak_check_finding(const char *key, const char *fmt, ...) {
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

int soak_check(int row, int which, int ok, const char *fmt, ...) {
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
void soak_check_common(int row) {
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

/* ---- the end --------------------------------------------------------------------------------- */

void soak_check_end(void) {
  soak.row[ROW_END].injected = 1;
  soak_lithd_watch();
  soak_check_common(ROW_END); /* live, every answer in */
  pid_t pid = atomic_load(&soak.pid);
  int heavy = atomic_load(&soak.heavy_pid) == pid;
  if (heavy) {
    /* SIGTERM waits for a read that runs past --max-run-ms (--stop-grace-ms, then the read is interrupted) */
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
  int64_t bad = soak_attack_wrong();
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
