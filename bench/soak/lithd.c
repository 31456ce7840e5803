/*
 * bench/soak/lithd.c — lithd, the thing under test: starting it with the
 * run's files, noticing when it ended unasked (and restarting it), reading
 * its RSS, descriptors and log; the monitor thread that samples them; and
 * the HTTP the other files speak to it (dial, send, read an answer, frame a
 * POST).
 *
 * lithd runs with --schema (100 accounts of 1000, CHECK balance >= 0; a
 * transfers log; a marks table), --commands (one named command,
 * `transfer`: debit, credit, log the transfer under the id the client
 * chose), --backup-dir, --readers 4 (a heavy attack may hold one reader for
 * a minute while issue 10's fix is pending), --max-run-ms (--run-ms) and,
 * when the soak's --wal-hold-ms is given, that.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "soak.h"

/* ---- lithd ----------------------------------------------------------------------------- */

int soak_lithd_start(int port) {
  char listen[64], runms[32], holdms[32], err[400];
  pid_t pid;
  snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
  snprintf(runms, sizeof runms, "%d", soak.cfg.run_ms);
  snprintf(holdms, sizeof holdms, "%d", soak.cfg.wal_hold_ms);
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
                  soak.cfg.wal_hold_ms >= 0 ? "--wal-hold-ms" : NULL, /* else the list ends here */
                  holdms,
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
void soak_lithd_watch(void) {
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

long soak_lithd_rss_kib(pid_t pid) {
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

int soak_lithd_fds(pid_t pid) {
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

int soak_lithd_log_errors(void) {
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

/* ---- the monitor: RSS and descriptors every 100 ms ----------------------------------------- */

void *soak_lithd_monitor_main(void *arg) {
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

/* ---- HTTP ------------------------------------------------------------------------------ */

int soak_lithd_send(int fd, const char *p, size_t n) {
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

int soak_lithd_read(int fd, char *in, size_t cap, size_t *len, int64_t deadline, bench_answer *a) {
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

size_t soak_lithd_post(char *out, size_t cap, const char *path, const char *headers, const char *body) {
  int n = snprintf(out, cap, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%sContent-Length: %zu\r\n\r\n%s", path,
                   headers ? headers : SOAK_CT_JSON, strlen(body), body);
  return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

int soak_lithd_dial(void) { return bench_dial(atomic_load(&soak.port), 0); }
