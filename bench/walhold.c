/*
 * bench/walhold — what lithd's WAL hold costs (issue 23): read and write
 * latency, throughput and the -wal file's size, with the hold and without,
 * under readers that never stop reading.
 *
 * Why: SQLite starts its WAL over only when a checkpoint has copied all of
 * it and no reader is still in it. With reads always running that moment
 * never comes and the -wal file grows without end. lithd makes the moment:
 * once the WAL holds 4 x --checkpoint-pages without having started over,
 * new read snapshots wait (at most --wal-hold-ms, default 100) while the
 * running ones end (sqlite/checkpoint.h). The price is that wait, on the
 * reads that arrive during it; this program measures it.
 *
 * The load (tools/lithd/test/test_lithd_ops.c's
 * test_wal_bounded_under_http_readers, on bench/lithd's transfer):
 *
 *   writers   W keep-alive connections (default 16), each posting its
 *             owner's transfers to /v1/do as fast as they are answered:
 *             bench/transfer_http.c's client, one thread, one epoll set.
 *   readers   R connections (default 8), each always with a /v1/query
 *             running: a read as an app's, the money (sum of balances,
 *             constant) and the ledger's length (a scan that grows with the
 *             run) on one snapshot. One thread per connection with a
 *             blocking socket: a reader's latency is the hold's cost, and
 *             a thread that does nothing but wait for its answer measures
 *             it without sharing a loop with the writers' 16. A wrong sum
 *             or a ledger that shrinks between two reads of one connection
 *             is an error.
 *   sampler   one thread stat()s the -wal file every 20 ms (its largest
 *             size; the hold's bound is on the file, not on the frames not
 *             yet checkpointed).
 *
 * Arms, each on a fresh database (bench_transfer_create, as bench/lithd)
 * with lithd spawned on it (`--db PATH --listen 127.0.0.1:0 --synchronous
 * MODE`, default options otherwise):
 *
 *   hold      lithd's default --wal-hold-ms;
 *   nohold    --wal-hold-ms 0: never hold, the behaviour before issue 23.
 *
 * Timing as bench/lithd: after --warmup a window of --seconds; a request
 * counts when its answer arrives inside the window; latency from just
 * before send() to the whole answer. At the window's end, before lithd is
 * stopped: the -wal file's size, GET /v1/stats (wal_holds,
 * wal_holds_gave_up, reads_held: lithd's counts over its life, which is
 * this arm) and GET /metrics (the seconds reads spent held). lithd's CPU
 * from /proc at the window's edges.
 *
 * Rounds interleave: round r runs both arms of every sync before round
 * r+1, odd rounds nohold first, so the machine's drift hits both alike.
 * Reported: medians over rounds (transfers/s with its range; max ms and the
 * -wal file's largest size: the worst round).
 *
 * After every arm lithd gets SIGTERM and must exit 0; then the file is
 * checked with plain SQLite (bench_transfer_check): quick_check, money
 * conserved, ledger rows == transfers answered OK, in total and per
 * connection. Each mismatch is an error; exit status 0 only with none.
 *
 * Links SQLite only, like bench/lithd: lithd is the thing measured.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "common.h"
#include "harness.h"
#include "net.h"
#include "transfer.h"
#include "transfer_http.h"

#ifndef LITHD_PATH
#define LITHD_PATH "build/default/tools/lithd/lithd"
#endif

/* ---- configuration ------------------------------------------------------------ */

enum { ARM_HOLD, ARM_NOHOLD, NARMS };
static const char *const ARM_NAME[NARMS] = {"hold", "nohold"};

enum { SYNC_NORMAL, SYNC_FULL };
static const char *sync_name(int s) { return s == SYNC_FULL ? "FULL" : "NORMAL"; }
static const char *sync_arg(int s) { return s == SYNC_FULL ? "full" : "normal"; }

enum { MAX_WRITERS = 1024, MAX_READERS = 256, SAMPLE_MS = 20 };

typedef struct config {
  bench_cli cli; /* --seconds, --warmup, --rounds, --db-dir, --results, --quick */
  int writers, readers;
  int sync[2], nsync;
  const char *lithd;
} config;

/* ---- metrics and results ------------------------------------------------------- */

enum {
  M_TPS,  /* transfers answered OK per second of the window */
  M_WP50, /* a transfer's latency, ms */
  M_WP99,
  M_RPS,  /* reads answered per second of the window */
  M_RP50, /* a read's latency, ms */
  M_RP99,
  M_RP999,
  M_RMAX,
  M_WAL_MAX, /* the -wal file's largest size, MiB (every 20 ms, from the load's start to the window's end) */
  M_WAL_END, /* ...its size at the window's end */
  M_HOLDS,   /* /v1/stats at the window's end */
  M_GAVEUP,
  M_HELD,
  M_HELD_MS,                            /* /metrics: lith_reads_held_seconds_total, in ms */
  M_CPU_SRV,                            /* lithd's CPU over the window, in CPUs (1.0 = one CPU busy) */
  M_CPU_T0,                             /* per thread kind, BENCH_T_LOOP .. BENCH_T_OTHER */
  M_CPU_CLI = M_CPU_T0 + BENCH_NTHREAD, /* this process: the writers' loop, the readers, the sampler */
  M_US_SRV,                             /* lithd CPU µs per transfer */
  M_US_CLI,
  M_CPU_ELSE,  /* the machine's busy time not accounted above, in CPUs */
  M_TRANSFERS, /* transfers answered OK inside the window */
  M_READS,     /* reads answered inside the window */
  NMETRIC
};
static const bench_cpu_slots CPU_SLOTS = {M_CPU_SRV, M_CPU_T0, M_CPU_CLI, M_CPU_ELSE, M_US_SRV, M_US_CLI};

static const bench_metric METRICS[NMETRIC] = {
    {"transfers_per_s", BENCH_ROLE_RATE},
    {"write_p50_ms", BENCH_ROLE_P50},
    {"write_p99_ms", BENCH_ROLE_P99},
    {"reads_per_s", BENCH_ROLE_NONE},
    {"read_p50_ms", BENCH_ROLE_NONE},
    {"read_p99_ms", BENCH_ROLE_NONE},
    {"read_p999_ms", BENCH_ROLE_NONE},
    {"read_max_ms", BENCH_ROLE_NONE},
    {"wal_max_mib", BENCH_ROLE_NONE},
    {"wal_end_mib", BENCH_ROLE_NONE},
    {"wal_holds", BENCH_ROLE_NONE},
    {"wal_holds_gave_up", BENCH_ROLE_NONE},
    {"reads_held", BENCH_ROLE_NONE},
    {"reads_held_ms", BENCH_ROLE_NONE},
    BENCH_CPU_METRIC_NAMES("lithd_"),
    {"lithd_us_per_transfer", BENCH_ROLE_CPU_US},
    {"client_us_per_transfer", BENCH_ROLE_NONE},
    {"else_cpu", BENCH_ROLE_NONE},
    {"transfers", BENCH_ROLE_NONE},
    {"reads", BENCH_ROLE_NONE},
};

/* The cell's dimensions. */
enum { D_SYNC, D_WRITERS, D_READERS, NDIM };

/* ---- one arm run ------------------------------------------------------------------ */

typedef struct run run;

/* One reader connection: its thread's own, read by the main thread after the join. */
typedef struct reader {
  run *r;
  int id;
  pthread_t th;
  int started;
  bench_lat lat; /* reads answered inside the window */
  uint64_t win_reads;
  int64_t errors;
  char msg[300]; /* the first error */
} reader;

struct run {
  const config *cfg;
  int arm, sync, round;
  char path[4096], wal[4200];
  char log[4200];   /* lithd's stderr */
  bench_cell *cell; /* its m[] and errors: the result */
  /* the window, from the writers' client (on_window) */
  int port;
  int64_t ws, we;
  reader *rd;
  pthread_t sampler;
  int sampler_on;
  _Atomic int64_t wal_max; /* bytes */
  int64_t wal_end;
  int64_t holds, gave_up, held;
  double held_s;
};

#define report_error(r, ...) bench_cell_error((r)->cell, __VA_ARGS__)

static void say_error(void *ctx, const char *msg) { report_error((run *)ctx, "%s", msg); }

/* lithd's connection settings (lith_options_default), for creating and checking. */
static bench_pragmas pragmas(void) {
  bench_pragmas p = {0, 16384, 0, 1};
  return p;
}

static int64_t money_of(const config *c) {
  return (int64_t)c->writers * BENCH_ACCOUNTS_PER * BENCH_START_BALANCE;
}

/* ---- the readers --------------------------------------------------------------------- */

static const char READ_BODY[] = "{\"statements\":[{\"sql\":\"SELECT sum(balance) FROM accounts\"},"
                                "{\"sql\":\"SELECT count(*) FROM ledger\"}]}";

static void reader_fail(reader *rd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void reader_fail(reader *rd, const char *fmt, ...) {
  if (rd->errors++ == 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rd->msg, sizeof rd->msg, fmt, ap);
    va_end(ap);
  }
}

/* One answer on blocking fd (60 s receive timeout: bench_dial's) into
 * in[0..cap]: bench_http_recv's 1, -1 or -2; -1 with ETIMEDOUT after 60 s. */
static int recv_answer(int fd, char *in, size_t cap, bench_answer *a) {
  size_t len = 0;
  int64_t deadline = bench_now_ns() + INT64_C(60000000000);
  int rc;
  while ((rc = bench_http_recv(fd, in, &len, cap, a)) == 0)
    if (bench_now_ns() > deadline) {
      errno = ETIMEDOUT;
      return -1;
    }
  return rc;
}

/* The integer after the k-th (0-based) "rows":[[ in body; 1 when found. */
static int nth_row_int(const char *body, int k, int64_t *out) {
  const char *p = body;
  for (int i = 0; i <= k; i++) {
    p = strstr(p, "\"rows\":[[");
    if (p == NULL)
      return 0;
    p += 9;
  }
  char *e;
  long long v = strtoll(p, &e, 10);
  if (e == p)
    return 0;
  *out = v;
  return 1;
}

/* A reader connection: a closed loop of reads until the window's end. A
 * broken connection is an error; it dials again while the window is open. */
static void *reader_main(void *arg) {
  reader *rd = arg;
  run *r = rd->r;
  char req[512], in[16385];
  int n = snprintf(req, sizeof req,
                   "POST /v1/query HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   "Content-Length: %zu\r\n\r\n%s",
                   strlen(READ_BODY), READ_BODY);
  int64_t money = money_of(r->cfg), last_count = 0;
  int fd = -1;
  while (bench_now_ns() < r->we) {
    if (fd < 0 && (fd = bench_dial(r->port, 0)) < 0) {
      reader_fail(rd, "connect: %s", strerror(errno));
      bench_sleep_ms(10);
      continue;
    }
    int64_t t0 = bench_now_ns();
    if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
      reader_fail(rd, "send: %s", strerror(errno));
      close(fd);
      fd = -1;
      continue;
    }
    bench_answer a;
    int rc = recv_answer(fd, in, sizeof in - 1, &a);
    int64_t t1 = bench_now_ns(), sum = -1, count = -1;
    if (rc < 0) {
      reader_fail(rd, "the answer: %s",
                  rc == -2 ? "not one this client reads"
                  : errno  ? strerror(errno)
                           : "closed");
      close(fd);
      fd = -1;
      continue;
    }
    in[a.total] = '\0';
    const char *body = in + a.head_len;
    if (a.status != 200 || !nth_row_int(body, 0, &sum) || !nth_row_int(body, 1, &count)) {
      reader_fail(rd, "HTTP %d: %.200s", a.status, body);
    } else if (sum != money) {
      reader_fail(rd, "the balances sum to %lld, not %lld", (long long)sum, (long long)money);
    } else if (count < last_count) {
      /* each read begins after the one before ended: it sees at least as much */
      reader_fail(rd, "the ledger shrank from %lld to %lld rows", (long long)last_count, (long long)count);
    } else {
      last_count = count;
      if (t1 >= r->ws && t1 < r->we) {
        rd->win_reads++;
        bench_lat_add(&rd->lat, (uint64_t)(t1 - t0));
      }
    }
    if (a.closes) {
      close(fd);
      fd = -1;
    }
  }
  if (fd >= 0)
    close(fd);
  return NULL;
}

/* ---- the -wal file's size ---------------------------------------------------------------- */

static int64_t wal_size(const run *r) {
  struct stat st;
  return stat(r->wal, &st) == 0 ? (int64_t)st.st_size : 0;
}

static void *sampler_main(void *arg) {
  run *r = arg;
  while (bench_now_ns() < r->we) {
    int64_t s = wal_size(r), cur = atomic_load(&r->wal_max);
    if (s > cur)
      atomic_store(&r->wal_max, s); /* this thread alone writes it */
    bench_sleep_ms(SAMPLE_MS);
  }
  return NULL;
}

/* ---- lithd's own figures at the window's end ---------------------------------------------- */

/* GET path on a fresh blocking connection; the body into out[0..cap) (NUL-terminated). 0 or -1. */
static int http_get(int port, const char *path, char *out, size_t cap) {
  char req[200], *in = malloc(cap + 1);
  int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path);
  int fd = bench_dial(port, 0), rc = -1;
  if (in && fd >= 0 && send(fd, req, (size_t)n, MSG_NOSIGNAL) == n) {
    bench_answer a;
    rc = recv_answer(fd, in, cap, &a);
    if (rc == 1 && a.status == 200) {
      size_t body = a.total - a.head_len;
      memcpy(out, in + a.head_len, body);
      out[body] = '\0';
      rc = 0;
    } else {
      rc = -1;
    }
  }
  if (fd >= 0)
    close(fd);
  free(in);
  return rc;
}

/* The value of the Prometheus sample whose line starts with `name` ("x{" or "x "). */
static double metric_value(const char *text, const char *name) {
  size_t n = strlen(name);
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    if (strncmp(p, name, n) != 0 || (p[n] != '{' && p[n] != ' '))
      continue;
    const char *v = p + n;
    if (*v == '{' && (v = strchr(v, '}')) != NULL)
      v++;
    return v ? strtod(v, NULL) : NAN;
  }
  return NAN;
}

/* ---- the arm ----------------------------------------------------------------------------------- */

/* The writers' client's on_window: the readers and the sampler start with the writers. */
static void on_window(void *ctx, int port, int64_t ws, int64_t we) {
  run *r = ctx;
  const config *c = r->cfg;
  r->port = port;
  r->ws = ws;
  r->we = we;
  for (int i = 0; i < c->readers; i++) {
    reader *rd = &r->rd[i];
    if (pthread_create(&rd->th, NULL, reader_main, rd) != 0) {
      report_error(r, "pthread_create: reader %d", i);
      r->cell->errors++;
    } else {
      rd->started = 1;
    }
  }
  r->sampler_on = pthread_create(&r->sampler, NULL, sampler_main, r) == 0;
}

/* Every answer is in; lithd still runs: the readers end, lithd's figures. */
static void on_window_end(void *ctx) {
  run *r = ctx;
  const config *c = r->cfg;
  for (int i = 0; i < c->readers; i++)
    if (r->rd[i].started)
      pthread_join(r->rd[i].th, NULL);
  if (r->sampler_on)
    pthread_join(r->sampler, NULL);
  r->wal_end = wal_size(r);
  if (r->wal_end > atomic_load(&r->wal_max))
    atomic_store(&r->wal_max, r->wal_end);
  enum { STATS_CAP = 16384, METRICS_CAP = 1 << 20 };
  char *buf = malloc(METRICS_CAP + 1);
  int64_t v;
  if (buf && http_get(r->port, "/v1/stats", buf, STATS_CAP) == 0) {
    size_t n = strlen(buf);
    r->holds = bench_body_int(buf, n, "\"wal_holds\":", &v) ? v : -1;
    r->gave_up = bench_body_int(buf, n, "\"wal_holds_gave_up\":", &v) ? v : -1;
    r->held = bench_body_int(buf, n, "\"reads_held\":", &v) ? v : -1;
  } else {
    report_error(r, "GET /v1/stats failed");
    r->cell->errors++;
  }
  if (buf && http_get(r->port, "/metrics", buf, METRICS_CAP) == 0) {
    r->held_s = metric_value(buf, "lith_reads_held_seconds_total");
  } else {
    report_error(r, "GET /metrics failed");
    r->cell->errors++;
  }
  free(buf);
}

static void fill_reads(run *r, bench_cell *res) {
  const config *c = r->cfg;
  bench_lat *bufs[MAX_READERS];
  uint64_t reads = 0;
  for (int i = 0; i < c->readers; i++) {
    reader *rd = &r->rd[i];
    bufs[i] = &rd->lat;
    reads += rd->win_reads;
    if (rd->errors) {
      report_error(r, "reader %d: %lld errors, the first: %s", i, (long long)rd->errors, rd->msg);
      res->errors += rd->errors;
    }
  }
  res->m[M_READS] = (double)reads;
  res->m[M_RPS] = (double)reads / c->cli.seconds;
  bench_cell_latency(res, bufs, c->readers, M_RP50, M_RP99, M_RP999);
  res->m[M_RMAX] = bench_lat_max_ms(bufs, c->readers);
}

static void arm_run(run *r, bench_cell *res) {
  const config *c = r->cfg;
  bench_th_client cl;
  bench_cpu_snap sn[2];
  int64_t *ok = calloc((size_t)c->writers, sizeof *ok);
  memset(sn, 0, sizeof sn);
  r->rd = calloc((size_t)c->readers, sizeof *r->rd);
  size_t wcap = bench_lat_cap(1, c->cli.seconds), rcap = bench_lat_cap(c->readers, c->cli.seconds);
  int ready =
      bench_th_init(&cl, c->writers, 0, wcap, bench_rng_seed((uint64_t)r->round, 91), say_error, r) == 0 &&
      ok && r->rd;
  for (int i = 0; ready && i < c->readers; i++) {
    r->rd[i].r = r;
    r->rd[i].id = i;
    ready = bench_lat_init(&r->rd[i].lat, 0, rcap, bench_rng_seed((uint64_t)i, (uint64_t)r->round + 53)) == 0;
  }
  for (int i = 0; ready && i < c->writers; i++)
    ready =
        bench_th_build(&cl, i, "/v1/do", bench_rng_seed((uint64_t)i, (uint64_t)r->round * 1000 + 31)) == 0;
  if (!ready) {
    report_error(r, "out of memory");
    res->errors++;
  } else {
    cl.on_window = on_window;
    cl.on_window_end = on_window_end;
    cl.window_ctx = r;
    /* hold: lithd's default; nohold: --wal-hold-ms 0 (for hold the list ends at its NULL) */
    char *argv[] = {(char *)c->lithd,
                    "--db",
                    r->path,
                    "--listen",
                    "127.0.0.1:0",
                    "--synchronous",
                    (char *)sync_arg(r->sync),
                    r->arm == ARM_NOHOLD ? "--wal-hold-ms" : NULL,
                    "0",
                    NULL};
    r->holds = r->gave_up = r->held = -1;
    r->held_s = NAN;
    bench_th_serve(&cl, argv, r->log, sn, c->cli.warmup, c->cli.seconds, ok);
    res->errors += cl.errors;
    res->m[M_TRANSFERS] = (double)cl.win_ok;
    res->m[M_TPS] = (double)cl.win_ok / c->cli.seconds;
    bench_lat *wb[1] = {&cl.lat};
    bench_cell_latency(res, wb, 1, M_WP50, M_WP99, -1);
    if (r->port > 0) { /* the window ran */
      fill_reads(r, res);
      res->m[M_WAL_MAX] = (double)atomic_load(&r->wal_max) / 1048576;
      res->m[M_WAL_END] = (double)r->wal_end / 1048576;
      res->m[M_HOLDS] = r->holds >= 0 ? (double)r->holds : NAN;
      res->m[M_GAVEUP] = r->gave_up >= 0 ? (double)r->gave_up : NAN;
      res->m[M_HELD] = r->held >= 0 ? (double)r->held : NAN;
      res->m[M_HELD_MS] = r->held_s * 1000;
    }
    bench_cpu_fill(sn, c->cli.seconds, cl.win_ok, &CPU_SLOTS, res->m);
    /* lithd has exited (0 on SIGTERM, else an error above): the file as it left it */
    bench_pragmas p = pragmas();
    res->errors += bench_transfer_check(r->path, c->writers, ok, &p, "connection", say_error, r);
  }
  bench_th_free(&cl);
  for (int i = 0; r->rd && i < c->readers; i++)
    bench_lat_free(&r->rd[i].lat);
  free(r->rd);
  r->rd = NULL;
  free(ok);
}

/* ---- one cell: the harness's callback ------------------------------------------------ */

static void run_cell(bench_cell *cell) {
  const config *c = cell->ctx;
  run *r = bench_xcalloc(1, sizeof *r);
  *r = (run){.cfg = c, .arm = cell->arm, .sync = cell->val[D_SYNC], .round = cell->round, .cell = cell};
  snprintf(r->path, sizeof r->path, "%s/walhold-%s-%s-r%d.db", c->cli.db_dir, ARM_NAME[r->arm],
           sync_name(r->sync), r->round + 1);
  snprintf(r->wal, sizeof r->wal, "%s-wal", r->path);
  snprintf(r->log, sizeof r->log, "%s/lithd-stderr.log", c->cli.db_dir);
  bench_pragmas p = pragmas();
  if (bench_transfer_create(r->path, c->writers, &p) != 0) {
    report_error(r, "cannot create %s", r->path);
    cell->errors++;
  } else {
    arm_run(r, cell);
  }
  bench_remove_db(r->path);
  free(r);
}

/* ---- the tables ------------------------------------------------------------------------ */

static void fmt_ms(char *buf, size_t n, double ms) { bench_fmt_ms(buf, n, ms, 1); }

static bench_agg agg(const bench_harness *h, int arm, int si, int metric) {
  int idx[NDIM] = {si, 0, 0};
  return bench_harness_agg(h, arm, idx, metric);
}
static double med(const bench_harness *h, int arm, int si, int metric) { return agg(h, arm, si, metric).med; }

static void print_tables(const bench_harness *h, void *ctx) {
  const config *c = ctx;
  for (int si = 0; si < c->nsync; si++) {
    int idx[NDIM] = {si, 0, 0};
    printf("\n### synchronous=%s, %d writers, %d readers\n\n", sync_name(c->sync[si]), c->writers,
           c->readers);
    printf("| arm | transfers/s median (min–max) | write p50 ms | write p99 ms | reads/s | read p50 ms | "
           "read p99 ms | read p99.9 ms | read max ms | -wal max MiB | -wal end MiB | holds | gave up | "
           "reads held | held ms | lithd CPU | err |\n");
    printf("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for (int arm = 0; arm < NARMS; arm++) {
      char w50[32], w99[32], r50[32], r99[32], r999[32], rmx[32];
      bench_agg t = agg(h, arm, si, M_TPS);
      fmt_ms(w50, sizeof w50, med(h, arm, si, M_WP50));
      fmt_ms(w99, sizeof w99, med(h, arm, si, M_WP99));
      fmt_ms(r50, sizeof r50, med(h, arm, si, M_RP50));
      fmt_ms(r99, sizeof r99, med(h, arm, si, M_RP99));
      fmt_ms(r999, sizeof r999, med(h, arm, si, M_RP999));
      fmt_ms(rmx, sizeof rmx, agg(h, arm, si, M_RMAX).hi);
      printf("| %s | %s (%s–%s) | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %lld "
             "|\n",
             ARM_NAME[arm], BENCH_NUM("%.0f", t.med), BENCH_NUM("%.0f", t.lo), BENCH_NUM("%.0f", t.hi), w50,
             w99, BENCH_NUM("%.0f", med(h, arm, si, M_RPS)), r50, r99, r999, rmx,
             BENCH_NUM("%.1f", agg(h, arm, si, M_WAL_MAX).hi), BENCH_NUM("%.1f", med(h, arm, si, M_WAL_END)),
             BENCH_NUM("%.0f", med(h, arm, si, M_HOLDS)), BENCH_NUM("%.0f", med(h, arm, si, M_GAVEUP)),
             BENCH_NUM("%.0f", med(h, arm, si, M_HELD)), BENCH_NUM("%.0f", med(h, arm, si, M_HELD_MS)),
             BENCH_NUM("%.0f%%", med(h, arm, si, M_CPU_SRV) * 100),
             (long long)bench_harness_errors(h, arm, idx));
    }
  }
  printf(
      "\nColumns: medians over rounds (transfers/s also min–max; read max and -wal max: the worst round).\n"
      "Latency from sending the request to the whole answer. -wal: the file's size, sampled every %d ms\n"
      "from the load's start to the window's end, and at the window's end. holds, gave up, reads held: "
      "lithd's\n"
      "/v1/stats at the window's end (the arm's whole life, warm-up included); held ms: the time reads\n"
      "spent held, in all (/metrics lith_reads_held_seconds_total). lithd CPU in %% of one CPU over the\n"
      "window (the machine has %ld).\n",
      SAMPLE_MS, sysconf(_SC_NPROCESSORS_ONLN));
  printf("\n### the hold's cost (hold ÷ nohold, medians)\n\n");
  printf(
      "| sync | read p50 | read p99 | read p99.9 | transfers/s | write p99 | -wal max MiB hold | nohold |\n");
  printf("|---|--:|--:|--:|--:|--:|--:|--:|\n");
  for (int si = 0; si < c->nsync; si++) {
    static const int M[5] = {M_RP50, M_RP99, M_RP999, M_TPS, M_WP99};
    int idx[NDIM] = {si, 0, 0};
    printf("| %s |", sync_name(c->sync[si]));
    for (int k = 0; k < 5; k++)
      printf(" %s |", BENCH_NUM("%.2f×", bench_harness_ratio(h, ARM_HOLD, ARM_NOHOLD, idx, M[k])));
    printf(" %s | %s |\n", BENCH_NUM("%.1f", agg(h, ARM_HOLD, si, M_WAL_MAX).hi),
           BENCH_NUM("%.1f", agg(h, ARM_NOHOLD, si, M_WAL_MAX).hi));
  }
}

/* ---- options ------------------------------------------------------------------------------ */

static void usage(FILE *f) {
  fprintf(f, "usage: bench/walhold [options]   (lithd's WAL hold: its cost under readers always reading)\n"
             "  --writers W        keep-alive connections writing transfers to /v1/do (default 16)\n"
             "  --readers R        connections each always with a /v1/query running (default 8)\n"
             "  --sync LIST        normal,full (default both)\n"
             "  --seconds S        measured window per arm (default 20)\n"
             "  --warmup S         warm-up before the window (default 1)\n"
             "  --rounds N         rounds, both arms interleaved (default 3)\n"
             "  --db-dir DIR       where the databases go (default: a new directory under /tmp)\n"
             "  --lithd PATH       the lithd binary (default " LITHD_PATH ")\n"
             "  --results PATH     the results file (default bench/results/walhold-YYYYMMDD-HHMMSS.jsonl)\n"
             "  --quick            smoke run: 1 round of 5 s after 0.5 s, normal only\n"
             "  --help\n");
}

static int take_option(void *ctx, const char *a, const char *v) {
  static const char *const SYNC_WORD[] = {"normal", "full"}; /* = SYNC_NORMAL, SYNC_FULL */
  config *c = ctx;
  int dummy[1];
  if (!strcmp(a, "--writers")) {
    bench_parse_counts(v, a, "writer", 1, MAX_WRITERS, dummy, 1);
    c->writers = dummy[0];
  } else if (!strcmp(a, "--readers")) {
    bench_parse_counts(v, a, "reader", 1, MAX_READERS, dummy, 1);
    c->readers = dummy[0];
  } else if (!strcmp(a, "--sync")) {
    c->nsync = bench_parse_words(v, a, SYNC_WORD, NULL, 2, c->sync, 2, "normal,full");
  } else if (!strcmp(a, "--lithd")) {
    c->lithd = v;
  } else {
    return 0;
  }
  return 1;
}

static void parse_args(int argc, char **argv, config *c) {
  int set_sec = 0, set_warm = 0;
  memset(c, 0, sizeof *c);
  c->cli = (bench_cli){.prog = "bench/walhold", .usage = usage, .min_seconds = 0.05, .max_rounds = 100};
  c->lithd = LITHD_PATH;
  c->writers = 16;
  c->readers = 8;
  /* bench_cli's defaults (3 s, 1 s quick) are too short for a WAL to grow past the hold's bound a few times */
  for (int i = 1; i < argc; i++) {
    set_sec |= !strcmp(argv[i], "--seconds");
    set_warm |= !strcmp(argv[i], "--warmup");
  }
  bench_cli_parse(&c->cli, argc, argv, take_option, c);
  if (!set_sec)
    c->cli.seconds = c->cli.quick ? 5 : 20;
  if (!set_warm)
    c->cli.warmup = c->cli.quick ? 0.5 : 1;
  if (!c->nsync) {
    c->sync[0] = SYNC_NORMAL;
    c->sync[1] = SYNC_FULL;
    c->nsync = c->cli.quick ? 1 : 2;
  }
}

/* ---- the header ------------------------------------------------------------------------------ */

static void print_header(void *ctx, const char *csv_path) {
  const config *c = ctx;
  static const int ON[NARMS] = {1, 1};
  bench_machine m;
  bench_machine_get(&m);
  bench_print_intro("lithd's WAL hold: its cost", c->cli.argc, c->cli.argv, 1);
  printf("machine: nproc %ld, CPU %s, kernel %s\n", m.nproc, m.cpu, m.kernel);
  printf("SQLite %s (bench side), lithd %s (default options; nohold: --wal-hold-ms 0)\n",
         sqlite3_libversion(), c->lithd);
  printf("databases: %s (%s)\n", c->cli.db_dir, bench_fs_name(c->cli.db_dir));
  printf("plan: %d writers, %d readers; synchronous", c->writers, c->readers);
  bench_print_named(c->sync, c->nsync, sync_name);
  bench_print_arms_results(ARM_NAME, ON, NARMS, &c->cli, csv_path);
}

int main(int argc, char **argv) {
  config cfg, *c = &cfg;
  char tmpdir[] = "/tmp/lith-bench-walhold-XXXXXX", log[4200];
  parse_args(argc, argv, c);
  int64_t t_begin = bench_now_ns();
  signal(SIGPIPE, SIG_IGN);

  bench_need_exec(c->lithd, "build it (make lithd) or pass --lithd PATH");
  int own_dir = bench_db_dir(&c->cli.db_dir, tmpdir);
  bench_plan plan = {.program = "walhold",
                     .workload = "transfer+reads",
                     BENCH_PLAN_ARMS(ARM_NAME),
                     .ndims = NDIM,
                     .dim_n = D_WRITERS,
                     .dim_sync = D_SYNC,
                     BENCH_PLAN_METRICS(METRICS),
                     .flags = BENCH_ALTERNATE,
                     .run = run_cell,
                     .ctx = c,
                     .cli = &c->cli};
  bench_plan_dim(&plan, D_SYNC, "sync", sync_name, c->sync, c->nsync);
  bench_plan_dim(&plan, D_WRITERS, "writers", NULL, &c->writers, 1);
  bench_plan_dim(&plan, D_READERS, "readers", NULL, &c->readers, 1);
  /* Round r runs both arms of every sync before round r+1; odd rounds nohold first. */
  int64_t errors = bench_harness_main(&plan, print_header, print_tables);
  snprintf(log, sizeof log, "%s/lithd-stderr.log", c->cli.db_dir);
  unlink(log);
  return bench_finish("all arms", errors, t_begin, own_dir, c->cli.db_dir);
}
