/*
 * bench/soak/load.c — the load and the probe: the threads that keep lithd
 * busy and watch its answers, and the record of every transfer's outcome.
 *
 * Load: K client threads, each a keep-alive HTTP/1.1 connection calling
 * POST /v1/commands/transfer at --rate/K per second (during the read-heavy
 * phase as fast as answered), between random accounts. Client c's transfer number s has log id (c+1)<<32 | s, so the
 * log shows which transfers ran. Each answer is recorded per transfer:
 * 200 (must be in the log), 409 "CHECK constraint failed" (refused: must
 * not be), 507 (disk full: the batch rolled back, must not be), anything
 * else or no answer within 2 s (either). Outcomes are also counted by the
 * phase the request met (between faults, or during which fault): between
 * faults anything but 200 or a CHECK refusal is an innocent failing.
 *
 * The probe: lithd's own /v1/query of the balances' sum every 100 ms; the
 * sum must always be right, its latency is counted by phase.
 *
 * The readers (the read-heavy phase, faults.c's soak_fault_readers): each a
 * keep-alive connection that always has a /v1/query running, a read as an
 * app's: the balances' sum and a report over the log's last READ_ROWS rows
 * (by id) on one snapshot. The sum must be right and the report's row
 * count never fall on one connection (each read begins after the one
 * before it ended, and the log only grows); anything else, a failed
 * request included, is a wrong read. Latency from send to the whole answer.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "soak.h"

/* ---- the transfer clients --------------------------------------------------------------- */

static void set_outcome(client *c, int64_t s, int o) {
  c->chunk[s >> CHUNK_BITS][s & (CHUNK - 1)] = (uint8_t)o;
}
int soak_load_outcome(const client *c, int64_t s) { return c->chunk[s >> CHUNK_BITS][s & (CHUNK - 1)]; }

int64_t soak_load_count(int ph, int t) { return atomic_load(&soak.cnt[ph][t]); }

size_t soak_load_transfer_request(char *out, size_t cap, int64_t id, int src, int dst, int amount) {
  char body[200];
  snprintf(body, sizeof body, "{\"params\":{\"id\":%lld,\"src\":%d,\"dst\":%d,\"amount\":%d}}", (long long)id,
           src, dst, amount);
  return soak_lithd_post(out, cap, "/v1/commands/transfer", NULL, body);
}

void soak_load_random_transfer(uint64_t *rng, int *src, int *dst, int *amount) {
  *src = (int)(bench_rng_next(rng) % NACC);
  *dst = (*src + 1 + (int)(bench_rng_next(rng) % (NACC - 1))) % NACC;
  *amount = 1 + (int)(bench_rng_next(rng) % MAXAMT);
}

/* The phase a request is counted under: the fault it met, if any. A request
 * that failed on a keep-alive connection older than lithd's last end met
 * that end (it found the connection dead), whenever it was sent. */
static int phase_of(int ph0, uint64_t out0, int failed, uint64_t conn_kills) {
  int ph1 = atomic_load(&soak.phase);
  if (ph0 != PH_NONE)
    return ph0;
  if (ph1 != PH_NONE)
    return ph1;
  if (failed && atomic_load(&soak.kills) != conn_kills)
    return PH_KILL;
  return atomic_load(&soak.outages) != out0 ? atomic_load(&soak.last_outage) : PH_NONE;
}

void *soak_load_client_main(void *arg) {
  client *c = arg;
  int fd = -1;
  char req[512], in[4097];
  uint64_t conn_kills = 0; /* lithd's ends when fd was opened */
  int64_t interval = soak.cfg.rate > 0 ? (int64_t)(1e9 * soak.cfg.clients / soak.cfg.rate) : 0;
  int64_t next = bench_now_ns();
  while (!atomic_load(&soak.stop)) {
    /* The read-heavy phase lifts --rate (as fast as answered): at 1000/s the WAL would take half a
     * minute to pass its bound without lithd's hold, and the check would catch nothing. */
    if (atomic_load(&soak.phase) == PH_READ) {
      next = bench_now_ns();
    } else if (interval) {
      next += interval;
      if (next < bench_now_ns() - 1000000000) /* after an outage: no burst to catch up */
        next = bench_now_ns();
      bench_sleep_until(next);
    }
    if (fd < 0) {
      conn_kills = atomic_load(&soak.kills);
      if ((fd = soak_lithd_dial()) < 0) {
        bench_sleep_ms(20); /* lithd restarting */
        continue;
      }
    }
    int64_t s = atomic_load(&c->sent) + 1;
    if ((s >> CHUNK_BITS) >= MAX_CHUNKS)
      break;
    if (!c->chunk[s >> CHUNK_BITS] && !(c->chunk[s >> CHUNK_BITS] = calloc(CHUNK, 1))) {
      soak_check_failure("client %d: out of memory", c->idx);
      break;
    }
    int src, dst, amount;
    soak_load_random_transfer(&c->rng, &src, &dst, &amount);
    size_t n =
        soak_load_transfer_request(req, sizeof req, ((int64_t)(c->idx + 1) << 32) | s, src, dst, amount);
    int ph0 = atomic_load(&soak.phase);
    uint64_t out0 = atomic_load(&soak.outages);
    atomic_store(&c->sent, s); /* before the bytes leave: the log may hold s from now on */
    int64_t t0 = bench_now_ns();
    bench_answer a;
    size_t len = 0;
    int rc =
        soak_lithd_send(fd, req, n) == 0
            ? soak_lithd_read(fd, in, sizeof in - 1, &len, t0 + (int64_t)soak.cfg.timeout_ms * 1000000, &a)
            : -1;
    int64_t dt = bench_now_ns() - t0;
    int ph = phase_of(ph0, out0, rc != 1, conn_kills), o, t;
    if (rc != 1) {
      o = O_LOST;
      t = T_LOST;
    } else if (a.status == 200) {
      o = O_OK;
      t = T_OK;
      atomic_fetch_add(&soak.ok_total, 1);
      if (ph == PH_NONE)
        bench_lat_add(&c->lat, (uint64_t)dt);
    } else if (a.status == 409 && strstr(in + a.head_len, "CHECK constraint failed")) {
      o = O_REFUSED;
      t = T_REFUSED;
    } else if (a.status == 507) {
      o = O_FULL;
      t = T_FULL;
    } else if (a.status == 503 && strstr(in + a.head_len, "stopping")) {
      o = O_OTHER;
      t = T_STOPPING;
    } else {
      o = O_OTHER;
      t = T_OTHER;
      pthread_mutex_lock(&soak.mu);
      if (soak.nother < 4)
        snprintf(soak.other[soak.nother++], sizeof soak.other[0], "%s: HTTP %d %.180s", PH_NAME[ph], a.status,
                 in + a.head_len);
      pthread_mutex_unlock(&soak.mu);
    }
    set_outcome(c, s, o);
    atomic_store(&c->answered, s);
    atomic_fetch_add(&soak.cnt[ph][T_SENT], 1);
    atomic_fetch_add(&soak.cnt[ph][t], 1);
    soak_atomic_max(&soak.tmax_ns[ph], dt);
    if (rc != 1 || a.closes) {
      close(fd);
      fd = -1;
    }
  }
  if (fd >= 0)
    close(fd);
  return NULL;
}

/* ---- the probe: lithd's own read of the money, and its latency ----------------------------- */

void *soak_load_probe_main(void *arg) {
  static const char body[] = "{\"statements\":[{\"sql\":\"SELECT sum(balance), count(*) FROM accounts\"}]}";
  char req[512], in[4097];
  size_t n = soak_lithd_post(req, sizeof req, "/v1/query", NULL, body);
  int fd = -1;
  uint64_t conn_kills = 0;
  while (!atomic_load(&soak.stop)) {
    bench_sleep_ms(100);
    if (fd < 0) {
      conn_kills = atomic_load(&soak.kills);
      if ((fd = soak_lithd_dial()) < 0)
        continue;
    }
    int ph0 = atomic_load(&soak.phase);
    uint64_t out0 = atomic_load(&soak.outages);
    int64_t t0 = bench_now_ns();
    bench_answer a;
    size_t len;
    int rc = soak_lithd_send(fd, req, n) == 0
                 ? soak_lithd_read(fd, in, sizeof in - 1, &len, t0 + 5000000000, &a)
                 : -1;
    int64_t dt = bench_now_ns() - t0;
    int ph = phase_of(ph0, out0, rc != 1 || a.status != 200, conn_kills);
    atomic_fetch_add(&soak.probe_n[ph], 1);
    soak_atomic_max(&soak.probe_max_ns[ph], dt);
    int64_t sum;
    const char *rows = rc == 1 ? strstr(in + a.head_len, "\"rows\":[[") : NULL;
    if (rc != 1 || a.status != 200 || !rows) {
      atomic_fetch_add(&soak.probe_fail[ph], 1);
    } else if ((sum = strtoll(rows + 9, NULL, 10)) != MONEY &&
               atomic_fetch_add(&soak.probe_money_bad, 1) < 3) {
      soak_check_failure("probe: lithd's /v1/query says the balances sum to %lld, not %lld", (long long)sum,
                         (long long)MONEY);
    }
    if (rc != 1 || a.closes) {
      close(fd);
      fd = -1;
    }
  }
  if (fd >= 0)
    close(fd);
  return NULL;
}

/* ---- the readers: the read-heavy phase ------------------------------------------------------ */

static void read_wrong(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void read_wrong(const char *fmt, ...) {
  if (atomic_fetch_add(&soak.read_bad, 1) != 0)
    return;
  va_list ap;
  va_start(ap, fmt);
  pthread_mutex_lock(&soak.mu);
  vsnprintf(soak.read_msg, sizeof soak.read_msg, fmt, ap);
  pthread_mutex_unlock(&soak.mu);
  va_end(ap);
}

/* The report's rows: a read of bounded cost (~12 ms here once the log is
 * that long), long enough that some read is always open, and never near
 * --wal-hold-ms however long the soak (a read past it makes a hold give up;
 * a count over the whole log would pass 100 ms in an hour's soak). */
#define READ_ROWS "50000"

/* The integer after the k-th (0-based) "rows":[[ in body: 1 when found. */
static int nth_row_int(const char *body, int k, int64_t *out) {
  const char *p = body;
  for (int i = 0; i <= k; i++) {
    if ((p = strstr(p, "\"rows\":[[")) == NULL)
      return 0;
    p += 9;
  }
  char *e;
  *out = strtoll(p, &e, 10);
  return e != p;
}

void *soak_load_reader_main(void *arg) {
  static const char body[] = "{\"statements\":[{\"sql\":\"SELECT sum(balance) FROM accounts\"},"
                             "{\"sql\":\"SELECT count(*), sum(amount) FROM (SELECT amount FROM transfers "
                             "ORDER BY id DESC LIMIT " READ_ROWS ")\"}]}";
  read_conn *rc = arg;
  char req[512], in[4097];
  size_t n = soak_lithd_post(req, sizeof req, "/v1/query", NULL, body);
  int64_t last = 0;
  int fd = -1;
  while (!atomic_load(&soak.read_stop) && !atomic_load(&soak.stop)) {
    if (fd < 0 && (fd = soak_lithd_dial()) < 0) {
      read_wrong("reader %d: connect failed", rc->idx);
      bench_sleep_ms(20);
      continue;
    }
    int64_t t0 = bench_now_ns(), sum = -1, count = -1;
    bench_answer a;
    size_t len;
    int r = soak_lithd_send(fd, req, n) == 0
                ? soak_lithd_read(fd, in, sizeof in - 1, &len, t0 + 5000000000, &a)
                : -1;
    int64_t dt = bench_now_ns() - t0;
    if (r != 1) {
      read_wrong("reader %d: %s", rc->idx, r == 0 ? "no answer within 5 s" : "the connection failed");
    } else if (a.status != 200 || !nth_row_int(in + a.head_len, 0, &sum) ||
               !nth_row_int(in + a.head_len, 1, &count)) {
      read_wrong("reader %d: HTTP %d %.160s", rc->idx, a.status, in + a.head_len);
    } else if (sum != MONEY) {
      read_wrong("reader %d: the balances sum to %lld, not %lld", rc->idx, (long long)sum, (long long)MONEY);
    } else if (count < last) {
      read_wrong("reader %d: the report saw %lld log rows after %lld", rc->idx, (long long)count,
                 (long long)last);
    } else {
      last = count;
      atomic_fetch_add(&soak.read_n, 1);
      bench_lat_add(&rc->lat, (uint64_t)dt);
    }
    if (r != 1 || a.closes) {
      close(fd);
      fd = -1;
    }
  }
  if (fd >= 0)
    close(fd);
  return NULL;
}
