/*
 * bench/soak/faults.c — the nemesis: the faults the soak injects, each
 * followed by its recovery and its checks; and the small filesystem the
 * database lives on, so that the disk can be filled without filling the
 * real one. main.c's table runs the faults in turn, with a gap between:
 *
 *   vanish     clients that send half a request, a whole one, pipelined
 *              ones, a large query, and close or reset before the answer;
 *              lithd must release their connections (its fd count comes
 *              back) and keep serving the others.
 *   slowloris  --slow-conns connections dribbling a byte a second (half of
 *              them headers, half a body) for --slow-seconds; lithd must
 *              keep answering the others: a probe's /v1/query latency stays
 *              within --latency-ms. Reported: how many lithd closed, when.
 *   sigstop    SIGSTOP for 3 s, SIGCONT: clients time out and reconnect;
 *              the same lithd must recover by itself.
 *   diskfull   a filler file until ENOSPC, held 4 s while load continues:
 *              every transfer must be answered 200, 409 or 507; then the
 *              file is deleted and lithd must recover without a restart.
 *   sigkill    SIGKILL, restart on the same file and port.
 *   readers    not a fault: the read-heavy phase (issue 23). For
 *              --read-seconds, --read-conns connections each always have a
 *              /v1/query running (load.c's readers) beside the usual
 *              writers and attacks, so SQLite never finds the moment to
 *              start its WAL over by chance; lithd must make it (its WAL
 *              hold, --wal-hold-ms). The -wal file, sampled every 20 ms,
 *              must never pass --wal-bound-mib (64 MiB: 16 x lithd's
 *              default --checkpoint-pages of 4 KiB pages, four times the
 *              size at which lithd starts to hold new reads); every read
 *              must be right; the writers meanwhile must all be answered
 *              200 or 409 (nothing lost while reads are held), and the
 *              common checks then find every transfer answered OK in the
 *              file. lithd's /v1/stats before and after say how often it
 *              held reads.
 *
 * After each: a transfer answered OK after the fault (the recovery time),
 * then checks.c's common checks.
 *
 * The filesystem: a tmpfs mounted under the run's directory (size from the
 * planned load), or failing that an ext4 image on a loop device; when
 * neither can be mounted (not root, no CAP_SYS_ADMIN) the database stays
 * where it is and the disk-full fault is skipped, said in the table.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include "soak.h"

extern char **environ;

/* ---- the nemesis ---------------------------------------------------------------------------- */

/* Wait (30 s at most) for a transfer answered OK after `since_ok` were; the time since t_fault. */
static int64_t wait_recovery(int64_t since_ok, int64_t t_fault) {
  int64_t until = bench_now_ns() + 30000000000;
  while (atomic_load(&soak.ok_total) <= since_ok && bench_now_ns() < until)
    bench_sleep_ms(1);
  return atomic_load(&soak.ok_total) > since_ok ? bench_now_ns() - t_fault : -1;
}

/* Other clients during a fault that should not hurt them: answered, and
 * some OK. An outside stop of lithd meanwhile excuses what it cost. */
static void served(int ph, const int64_t d[NT], int64_t ext0) {
  if (soak.external != ext0) {
    fprintf(stderr, "[%7.1f s] %s #%lld: others-served check skipped (lithd was stopped from outside)\n",
            soak_since_s(soak.t_begin), PH_NAME[ph], (long long)soak.row[ph].injected);
    return;
  }
  soak_check(
      ph, C_SERVED,
      (d[T_SENT] == 0 || d[T_OK] > 0) && d[T_LOST] + d[T_OTHER] + d[T_STOPPING] + d[T_FULL] == 0,
      "others' transfers: %lld sent, %lld OK, %lld no answer, %lld other answers, %lld 503 stopping, %lld "
      "507",
      (long long)d[T_SENT], (long long)d[T_OK], (long long)d[T_LOST], (long long)d[T_OTHER],
      (long long)d[T_STOPPING], (long long)d[T_FULL]);
}

static void begin_fault(int ph, int pause) {
  soak.row[ph].injected++;
  if (pause)
    atomic_store(&soak.pause_attacks, 1);
  atomic_store(&soak.phase, ph);
}

static void end_fault(int ph) {
  atomic_store(&soak.phase, PH_NONE);
  atomic_store(&soak.pause_attacks, 0);
  if (soak.row[ph].probe_max_ns < atomic_load(&soak.probe_max_ns[ph]))
    soak.row[ph].probe_max_ns = atomic_load(&soak.probe_max_ns[ph]);
}

/* The database's filesystem: what holds its space. */
static void say_fs(void) {
  struct stat db, wal, shm;
  struct statvfs vf;
  if (stat(soak.db, &db) != 0)
    db.st_size = -1;
  if (stat(soak.wal, &wal) != 0)
    wal.st_size = -1;
  if (stat(soak.shm, &shm) != 0)
    shm.st_size = -1;
  double avail = statvfs(soak.db, &vf) == 0 ? (double)vf.f_bavail * (double)vf.f_frsize / 1048576 : -1;
  fprintf(stderr,
          "[%7.1f s]   the filesystem: soak.db %.1f MiB, -wal %.1f MiB, -shm %lld KiB, %.1f MiB free\n",
          soak_since_s(soak.t_begin), (double)db.st_size / 1048576, (double)wal.st_size / 1048576,
          (long long)shm.st_size / 1024, avail);
}

static void note_recovery(int ph, int64_t rec) {
  if (soak_check(ph, C_RECOVER, rec >= 0, "no transfer answered OK within 30 s") &&
      rec > soak.row[ph].max_recovery_ns)
    soak.row[ph].max_recovery_ns = rec;
  else if (rec < 0 && soak.fs_kind != FS_NONE)
    say_fs();
}

void soak_fault_sigkill(void) {
  begin_fault(PH_KILL, 1);
  atomic_store(&soak.last_outage, PH_KILL);
  atomic_fetch_add(&soak.outages, 1);
  atomic_fetch_add(&soak.kills, 1);
  pid_t pid = atomic_load(&soak.pid);
  int64_t t0 = bench_now_ns();
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  int port = -1;
  for (int i = 0; i < 5 && port < 0; i++) {
    port = soak_lithd_start(atomic_load(&soak.port));
    if (port < 0)
      bench_sleep_ms(500);
  }
  if (port < 0) {
    soak_check(PH_KILL, C_RECOVER, 0, "lithd did not restart on %s", soak.db);
    atomic_store(&soak.quit, 1);
    end_fault(PH_KILL);
    return;
  }
  soak.restarts++;
  note_recovery(PH_KILL, wait_recovery(atomic_load(&soak.ok_total), t0));
  end_fault(PH_KILL);
  soak_check_common(PH_KILL);
}

void soak_fault_sigstop(void) {
  begin_fault(PH_STOP, 1);
  atomic_store(&soak.last_outage, PH_STOP);
  atomic_fetch_add(&soak.outages, 1);
  pid_t pid = atomic_load(&soak.pid);
  int64_t t0 = bench_now_ns();
  kill(pid, SIGSTOP);
  bench_sleep_ms(3000);
  kill(pid, SIGCONT);
  int64_t t1 = bench_now_ns();
  atomic_fetch_add(&soak.stopped_ns, t1 - t0);
  note_recovery(PH_STOP, wait_recovery(atomic_load(&soak.ok_total), t1));
  soak_check(PH_STOP, C_SAMEPID,
             waitpid(pid, NULL, WNOHANG) == 0 && kill(pid, 0) == 0 && atomic_load(&soak.pid) == pid,
             "lithd (pid %d) is gone", (int)pid);
  end_fault(PH_STOP);
  soak_check_common(PH_STOP);
}

/* Write the filler until ENOSPC: big pieces, then pages. Bytes written, or -1. */
static int64_t fill_disk(int fd) {
  static char buf[1 << 20];
  int64_t total = 0;
  for (size_t piece = sizeof buf; piece >= 4096; piece /= 16) {
    for (;;) {
      ssize_t k = write(fd, buf, piece);
      if (k > 0) {
        total += k;
        continue;
      }
      if (k < 0 && errno == EINTR)
        continue;
      if (k < 0 && errno != ENOSPC)
        return -1;
      break;
    }
  }
  return total;
}

void soak_fault_diskfull(void) {
  begin_fault(PH_FULL, 0);
  int64_t ext0 = soak.external;
  pid_t pid = atomic_load(&soak.pid);
  int64_t before[NT];
  for (int t = 0; t < NT; t++)
    before[t] = soak_load_count(PH_FULL, t);
  int fd = open(soak.filler, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  int64_t bytes = fd >= 0 ? fill_disk(fd) : -1;
  if (fd >= 0)
    close(fd);
  if (bytes < 0)
    soak_check_failure("disk full: cannot write the filler %s: %s", soak.filler, strerror(errno));
  soak.full_bytes = bytes;
  for (int i = 0; i < 40; i++) { /* held 4 s while the load goes on */
    bench_sleep_ms(100);
    soak_lithd_watch();
  }
  int64_t since = atomic_load(&soak.ok_total), t0 = bench_now_ns();
  unlink(soak.filler);
  note_recovery(PH_FULL, wait_recovery(since, t0));
  end_fault(PH_FULL);
  int64_t d[NT];
  for (int t = 0; t < NT; t++)
    d[t] = soak_load_count(PH_FULL, t) - before[t];
  soak.full_507 += d[T_FULL];
  soak.full_ok += d[T_OK];
  if (soak.external == ext0)
    soak_check(PH_FULL, C_SAMEPID, waitpid(pid, NULL, WNOHANG) == 0 && atomic_load(&soak.pid) == pid,
               "lithd (pid %d) did not live through the full disk", (int)pid);
  if (soak.external == ext0)
    soak_check(PH_FULL, C_FULLANS, d[T_OTHER] == 0 && d[T_LOST] == 0 && d[T_STOPPING] == 0,
               "of %lld transfers while full: %lld got another answer, %lld none (%lld OK, %lld 507)",
               (long long)d[T_SENT], (long long)(d[T_OTHER] + d[T_STOPPING]), (long long)d[T_LOST],
               (long long)d[T_OK], (long long)d[T_FULL]);
  soak_check_common(PH_FULL);
}

/* Clients that go away at every step of a request. */
void soak_fault_vanish(void) {
  enum { EACH = 8 };
  char req[2048], big[512];
  begin_fault(PH_VANISH, 0);
  int64_t ext0 = soak.external;
  pid_t pid = atomic_load(&soak.pid);
  int64_t before[NT];
  for (int t = 0; t < NT; t++)
    before[t] = soak_load_count(PH_VANISH, t);
  int fds0 = soak_lithd_fds(pid);
  client *v = &soak.cl[soak.cfg.clients];
  uint64_t rng = bench_rng_seed(7, (uint64_t)soak.row[PH_VANISH].injected);
  soak_lithd_post(
      big, sizeof big, "/v1/query", NULL,
      "{\"statements\":[{\"sql\":\"WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c "
      "WHERE i < 9000) "
      "SELECT i, printf('%0100d', i) FROM c\"}]}");
  size_t biglen = strlen(big);
  for (int kind = 0; kind < 8; kind++)
    for (int i = 0; i < EACH; i++) {
      int fd = soak_lithd_dial();
      if (fd < 0)
        continue;
      int src, dst, amount, npipe = kind == 5 ? 10 : 1;
      size_t n = 0;
      for (int p = 0; p < npipe; p++) { /* the vanishing clients' transfers: outcome unknown */
        soak_load_random_transfer(&rng, &src, &dst, &amount);
        int64_t s = atomic_fetch_add(&v->sent, 1) + 1;
        n += soak_load_transfer_request(req + n, sizeof req - n, ((int64_t)(soak.cfg.clients + 1) << 32) | s,
                                        src, dst, amount);
      }
      switch (kind) {
      case 0: /* half the headers */ soak_lithd_send(fd, req, n / 4); break;
      case 1: /* the headers, half the body */ soak_lithd_send(fd, req, n - 20); break;
      case 2: /* all of it, gone before the answer */
      case 5: /* ten pipelined */ soak_lithd_send(fd, req, n); break;
      case 3: { /* all of it, then a reset */
        struct linger lg = {1, 0};
        soak_lithd_send(fd, req, n);
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        break;
      }
      case 4: /* a 1 MB answer nobody reads */ soak_lithd_send(fd, big, biglen); break;
      case 6: /* nothing at all */ break;
      default: /* all of it, half-closed */
        soak_lithd_send(fd, req, n);
        shutdown(fd, SHUT_WR);
        break;
      }
      close(fd);
    }
  /* lithd lets go of them: its descriptors come back (the others' reconnects: a few of slack) */
  int64_t t0 = bench_now_ns();
  int fds = soak_lithd_fds(pid);
  while (fds > fds0 + 4 && bench_now_ns() - t0 < 5000000000) {
    bench_sleep_ms(20);
    fds = soak_lithd_fds(pid);
  }
  soak_check(PH_VANISH, C_FDS, fds <= fds0 + 4, "lithd holds %d descriptors 5 s after the burst, %d before",
             fds, fds0);
  bench_sleep_ms(300);
  end_fault(PH_VANISH);
  int64_t d[NT];
  for (int t = 0; t < NT; t++)
    d[t] = soak_load_count(PH_VANISH, t) - before[t];
  soak_lithd_watch();
  served(PH_VANISH, d, ext0);
  soak_check_common(PH_VANISH);
}

/* Connections that send a byte a second, never finishing their request. */
void soak_fault_slowloris(void) {
  int n = soak.cfg.slow_conns;
  int *fd = bench_xcalloc((size_t)n, sizeof *fd);
  double *closed = bench_xcalloc((size_t)n, sizeof *closed);
  char head[256];
  begin_fault(PH_SLOW, 0);
  int64_t ext0 = soak.external;
  atomic_store(&soak.probe_max_ns[PH_SLOW], 0);
  int64_t before[NT];
  for (int t = 0; t < NT; t++)
    before[t] = soak_load_count(PH_SLOW, t);
  int64_t t0 = bench_now_ns();
  for (int i = 0; i < n; i++) {
    fd[i] = bench_dial(atomic_load(&soak.port), 1);
    if (fd[i] < 0)
      continue;
    /* even: headers a byte at a time; odd: whole headers, then the body a byte at a time */
    int hl = i % 2 ? snprintf(head, sizeof head,
                              "POST /v1/do HTTP/1.1\r\nHost: 127.0.0.1\r\n" SOAK_CT_JSON
                              "Content-Length: 100000\r\n\r\n")
                   : snprintf(head, sizeof head, "POST /v1/do HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ");
    send(fd[i], head, (size_t)hl, MSG_NOSIGNAL);
  }
  soak.slow_injected += n;
  for (int sec = 0; sec < soak.cfg.slow_seconds && !atomic_load(&soak.quit); sec++) {
    bench_sleep_ms(1000);
    soak_lithd_watch();
    for (int i = 0; i < n; i++) {
      if (fd[i] < 0 || closed[i] > 0)
        continue;
      char junk[512];
      /* lithd closed it, or answered (a 408, say): done; else one more byte */
      ssize_t k = recv(fd[i], junk, sizeof junk, MSG_DONTWAIT);
      if (k >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK) ||
          send(fd[i], i % 2 ? " " : "a", 1, MSG_NOSIGNAL) != 1)
        closed[i] = soak_since_s(t0);
    }
  }
  int nh = 0, nb = 0, open_end = 0;
  for (int i = 0; i < n; i++) {
    if (fd[i] < 0)
      continue;
    if (closed[i] > 0) {
      i % 2 ? nb++ : nh++;
      if (soak.slow_first_close_s == 0 || closed[i] < soak.slow_first_close_s)
        soak.slow_first_close_s = closed[i];
      if (closed[i] > soak.slow_last_close_s)
        soak.slow_last_close_s = closed[i];
    } else {
      open_end++;
    }
    close(fd[i]);
  }
  soak.slow_closed_hdr += nh;
  soak.slow_closed_body += nb;
  soak.slow_open_end += open_end;
  int64_t pmax = atomic_load(&soak.probe_max_ns[PH_SLOW]);
  end_fault(PH_SLOW);
  int64_t d[NT];
  for (int t = 0; t < NT; t++)
    d[t] = soak_load_count(PH_SLOW, t) - before[t];
  soak_check(PH_SLOW, C_LATENCY, pmax <= (int64_t)soak.cfg.latency_ms * 1000000 || soak.external != ext0,
             "a probe took %.0f ms while %d connections dribbled (bound %d ms)", (double)pmax / 1e6, n,
             soak.cfg.latency_ms);
  soak_lithd_watch();
  served(PH_SLOW, d, ext0);
  free(fd);
  free(closed);
  soak_check_common(PH_SLOW);
}

/* lithd's /v1/stats: its WAL holds, those that gave up, the reads held.
 * 0, or -1 when it did not answer. */
static int wal_stats(int64_t v[3]) {
  static const char *const KEY[3] = {"\"wal_holds\":", "\"wal_holds_gave_up\":", "\"reads_held\":"};
  static const char req[] = "GET /v1/stats HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  char in[4097];
  size_t len;
  bench_answer a;
  int fd = soak_lithd_dial(), ok = 0;
  if (fd >= 0 && soak_lithd_send(fd, req, sizeof req - 1) == 0 &&
      soak_lithd_read(fd, in, sizeof in - 1, &len, bench_now_ns() + 5000000000, &a) == 1 && a.status == 200) {
    ok = 1;
    for (int k = 0; k < 3; k++)
      ok &= bench_body_int(in + a.head_len, a.total - a.head_len, KEY[k], &v[k]);
  }
  if (fd >= 0)
    close(fd);
  return ok ? 0 : -1;
}

void soak_fault_readers(void) {
  const config *c = &soak.cfg;
  int64_t bound = (int64_t)c->wal_bound_mib << 20, wal_max = 0, s0[3], s1[3];
  begin_fault(PH_READ, 0);
  int64_t ext0 = soak.external, bad0 = atomic_load(&soak.read_bad), n0 = atomic_load(&soak.read_n);
  pid_t pid = atomic_load(&soak.pid);
  int have0 = wal_stats(s0) == 0;
  int64_t before[NT];
  for (int t = 0; t < NT; t++)
    before[t] = soak_load_count(PH_READ, t);
  atomic_store(&soak.read_stop, 0);
  int started = 0;
  for (; started < c->read_conns; started++)
    if (pthread_create(&soak.rc[started].th, NULL, soak_load_reader_main, &soak.rc[started]) != 0)
      break;
  /* The file, not lith_wal_bytes (frames not yet copied): the disk is what fills. */
  int64_t until = bench_now_ns() + (int64_t)c->read_seconds * 1000000000;
  for (int i = 0; bench_now_ns() < until && !atomic_load(&soak.quit); i++) {
    struct stat st;
    if (stat(soak.wal, &st) == 0 && st.st_size > wal_max)
      wal_max = st.st_size;
    bench_sleep_ms(20);
    if (i % 5 == 4)
      soak_lithd_watch();
  }
  atomic_store(&soak.read_stop, 1);
  for (int i = 0; i < started; i++)
    pthread_join(soak.rc[i].th, NULL);
  int have1 = wal_stats(s1) == 0 && atomic_load(&soak.pid) == pid;
  end_fault(PH_READ);
  if (wal_max > soak.read_wal_max)
    soak.read_wal_max = wal_max;
  soak_atomic_max(&soak.wal_max, wal_max);
  if (have0 && have1) { /* the same lithd at both ends: its counts' difference is this phase's */
    soak.read_holds += s1[0] - s0[0];
    soak.read_gave_up += s1[1] - s0[1];
    soak.read_held += s1[2] - s0[2];
    soak.read_phases_stats++;
  }
  int64_t d[NT];
  for (int t = 0; t < NT; t++)
    d[t] = soak_load_count(PH_READ, t) - before[t];
  int64_t bad = atomic_load(&soak.read_bad) - bad0, good = atomic_load(&soak.read_n) - n0;
  fprintf(stderr,
          "[%7.1f s]   %d readers for %d s: %lld reads right, %lld wrong; -wal at most %.1f MiB (bound %d); "
          "holds %lld, reads held %lld\n",
          soak_since_s(soak.t_begin), started, c->read_seconds, (long long)good, (long long)bad,
          (double)wal_max / 1048576, c->wal_bound_mib, have0 && have1 ? (long long)(s1[0] - s0[0]) : -1LL,
          have0 && have1 ? (long long)(s1[2] - s0[2]) : -1LL);
  soak_check(PH_READ, C_WALBOUND, wal_max <= bound,
             "the -wal file reached %.1f MiB with %d readers always reading (bound %d MiB)",
             (double)wal_max / 1048576, started, c->wal_bound_mib);
  if (soak.external == ext0) {
    char first[240];
    pthread_mutex_lock(&soak.mu);
    snprintf(first, sizeof first, "%s", soak.read_msg);
    pthread_mutex_unlock(&soak.mu);
    soak_check(PH_READ, C_READS, started == c->read_conns && bad == 0 && good > 0,
               "%d of %d readers ran; %lld reads right, %lld wrong (the run's first: %s)", started,
               c->read_conns, (long long)good, (long long)bad, first[0] ? first : "none");
  }
  soak_lithd_watch();
  served(PH_READ, d, ext0);
  soak_check_common(PH_READ);
}

/* ---- the filesystem ----------------------------------------------------------------------- */

static int run_quiet(char *const argv[]) {
  pid_t pid;
  int st;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0 || waitpid(pid, &st, 0) != pid)
    return -1;
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* A small filesystem for the database: tmpfs, else an ext4 image on a loop
 * device, else none (the disk-full fault is then skipped). */
void soak_fault_fs_setup(void) {
  char opt[64];
  int e1;
  mkdir(soak.fsdir, 0700);
  snprintf(opt, sizeof opt, "size=%dm,mode=0700", soak.cfg.fs_mib);
  if (mount("tmpfs", soak.fsdir, "tmpfs", MS_NOSUID | MS_NODEV, opt) == 0) {
    soak.fs_kind = FS_TMPFS;
    snprintf(soak.fs_why, sizeof soak.fs_why, "tmpfs of %d MiB at %.200s", soak.cfg.fs_mib, soak.fsdir);
    return;
  }
  e1 = errno;
  int fd = open(soak.fsimg, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd >= 0 && ftruncate(fd, (off_t)soak.cfg.fs_mib << 20) == 0) {
    close(fd);
    char *mkfs[] = {"mkfs.ext4", "-q", "-F", "-m", "0", soak.fsimg, NULL};
    char *mnt[] = {"mount", "-o", "loop", soak.fsimg, soak.fsdir, NULL};
    if (run_quiet(mkfs) == 0 && run_quiet(mnt) == 0) {
      soak.fs_kind = FS_LOOP;
      snprintf(soak.fs_why, sizeof soak.fs_why, "ext4 of %d MiB on a loop device at %.200s (tmpfs: %s)",
               soak.cfg.fs_mib, soak.fsdir, strerror(e1));
      return;
    }
  } else if (fd >= 0) {
    close(fd);
  }
  unlink(soak.fsimg);
  soak.fs_kind = FS_NONE;
  snprintf(soak.fs_why, sizeof soak.fs_why,
           "the run's directory (%s): mount tmpfs refused (%s), loop mount failed", bench_fs_name(soak.dir),
           strerror(e1));
}

/* A failed run's database, copied out of the filesystem about to go. */
void soak_fault_keep_db(void) {
  char dest[4400];
  sqlite3 *from = NULL, *to = NULL;
  snprintf(dest, sizeof dest, "%s/soak-kept.db", soak.dir);
  if (sqlite3_open_v2(soak.db, &from, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
      sqlite3_open(dest, &to) == SQLITE_OK) {
    sqlite3_backup *b = sqlite3_backup_init(to, "main", from, "main");
    if (b) {
      sqlite3_backup_step(b, -1);
      sqlite3_backup_finish(b);
    }
  }
  sqlite3_close(from);
  sqlite3_close(to);
}

void soak_fault_fs_teardown(void) {
  if (soak.fs_kind != FS_NONE && umount2(soak.fsdir, 0) != 0 && umount2(soak.fsdir, MNT_DETACH) != 0)
    fprintf(stderr, "soak: umount %s: %s\n", soak.fsdir, strerror(errno));
  if (soak.fs_kind == FS_LOOP)
    unlink(soak.fsimg);
  rmdir(soak.fsdir);
}
