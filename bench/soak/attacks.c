/*
 * bench/soak/attacks.c — the attacker: issue 10's hostile requests, what
 * each must be answered, the two threads that send them and judge the
 * answers, their counts and their table.
 *
 * The quick ones go one every 250 ms, round robin, paused while lithd is
 * killed or stopped; the heavy ones (instr over 10 MB on /v1/query and on
 * the writer's /v1/do, printf of 999999999 characters) one at a time,
 * waited for up to 60 s, and while lithd does not answer one, not sent
 * again to the same lithd. A heavy one must be answered within --max-run-ms
 * + 1 s, with an error or a value (SQLite's built-ins give NULL for a
 * string over the length limit). The heavy ones and the two-Content-Length
 * smuggling were open issues when this was written: a wrong answer to them
 * is a finding, not a failure, unless --strict. What a refused attack would
 * have written lands in marks, which checks.c looks at.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "soak.h"

/* ---- attacks ------------------------------------------------------------------------ */

typedef struct attack {
  const char *name;
  const char *path;
  const char *headers; /* NULL: Content-Type: application/json */
  const char *body;    /* "@M@": a fresh marks id; "@E@": a path outside --backup-dir; NULL: the smuggling */
  int expect;          /* the status; 0: any 4xx */
  const char *must, *must_not;
  int write;        /* reaches the writer: 507 is right while the disk is full */
  int known;        /* an open issue: a wrong answer is a finding (--strict: a failure) */
  const char *want; /* the expected answer, as the table says it */
} attack;

#define SOAK_CT_JSON "Content-Type: application/json\r\n"
static const attack QUICK[] = {
    {"fts3_tokenizer(?) on /v1/query", "/v1/query", NULL,
     "{\"statements\":[{\"sql\":\"SELECT hex(fts3_tokenizer(?))\",\"params\":[\"simple\"]}]}", 403,
     "not authorized", "\"rows\"", 0, 0, "403, no pointer"},
    {"fts3_tokenizer(?, ?) on /v1/do", "/v1/do", NULL,
     "{\"statements\":[{\"sql\":\"SELECT fts3_tokenizer(?, "
     "?)\",\"params\":[\"simple\",{\"base64\":\"QUFBQUFBQUE=\"}]}]}",
     403, "not authorized", NULL, 1, 0, "403"},
    {"FTS3 TEMP table, tokenize=simple", "/v1/do", NULL,
     "{\"statements\":[{\"sql\":\"CREATE VIRTUAL TABLE temp.f USING fts3(body, tokenize=simple)\"},"
     "{\"sql\":\"INSERT INTO temp.f VALUES ('hello soak')\"},"
     "{\"sql\":\"SELECT count(*) FROM temp.f WHERE f MATCH 'soak'\"}]}",
     200, "\"rows\":[[1]]", NULL, 1, 0, "200, FTS works"},
    {"CREATE TEMP TABLE accounts (shadow)", "/v1/do", NULL,
     "{\"statements\":[{\"sql\":\"CREATE TEMP TABLE accounts(id INTEGER PRIMARY KEY, balance INTEGER)\"},"
     "{\"sql\":\"INSERT INTO temp.accounts SELECT id, 0 FROM main.accounts\"}]}",
     200, NULL, NULL, 1, 0, "200, gone after"},
    {"CREATE TEMP TRIGGER RAISE on accounts", "/v1/do", NULL,
     "{\"statements\":[{\"sql\":\"CREATE TEMP TRIGGER soak_block BEFORE UPDATE ON main.accounts "
     "BEGIN SELECT RAISE(ABORT, 'hijacked'); END\"}]}",
     200, NULL, NULL, 1, 0, "200, gone after"},
    {"CREATE TEMP TRIGGER skimming transfers", "/v1/do", NULL,
     "{\"statements\":[{\"sql\":\"CREATE TEMP TRIGGER soak_skim AFTER INSERT ON main.transfers "
     "BEGIN UPDATE accounts SET balance = balance + 1 WHERE id = 0; END\"}]}",
     200, NULL, NULL, 1, 0, "200, gone after"},
    {"TEMP schema empty at the next command", "/v1/do", NULL,
     "{\"statements\":[{\"sql\":\"SELECT count(*) FROM sqlite_temp_master\"}]}", 200, "\"rows\":[[0]]", NULL,
     1, 0, "200, 0 objects"},
    {"backup to an absolute path", "/v1/backup", NULL, "{\"dest\":\"@E@\"}", 400, "bad_request", NULL, 0, 0,
     "400"},
    {"backup to ../", "/v1/backup", NULL, "{\"dest\":\"../lith-soak-evil.db\"}", 400, "bad_request", NULL, 0,
     0, "400"},
    {"POST text/plain", "/v1/do", "Content-Type: text/plain\r\n",
     "{\"statements\":[{\"sql\":\"INSERT INTO marks VALUES (@M@)\"}]}", 415, NULL, NULL, 0, 0,
     "415, no write"},
    {"foreign Origin", "/v1/do", SOAK_CT_JSON "Origin: http://evil.example\r\n",
     "{\"statements\":[{\"sql\":\"INSERT INTO marks VALUES (@M@)\"}]}", 403, "allow-origin", NULL, 0, 0,
     "403, no write"},
    {"two Content-Length (smuggled INSERT)", "/v1/do", NULL, NULL, 400, NULL, NULL, 0, 1,
     "400, no 2nd request"},
    {"INSERT OR ROLLBACK conflict", "/v1/do", NULL,
     "{\"statements\":[{\"sql\":\"INSERT OR ROLLBACK INTO marks VALUES (0)\"}]}", 409, "UNIQUE", NULL, 1, 0,
     "409, fails alone"},
    {"RELEASE LITH_C", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"RELEASE LITH_C\"}]}", 403, NULL, NULL, 1,
     0, "403, fails alone"},
};
enum { NQUICK = sizeof QUICK / sizeof *QUICK };

/* expect 0: answered within the run limit + 1 s, an error (4xx) or a value
 * (SQLite's built-ins give NULL for a string over the length limit) */
static const attack HEAVY[] = {
    {"instr(10 MB, 200 KB) on /v1/query", "/v1/query", NULL,
     "{\"statements\":[{\"sql\":\"SELECT instr(printf('%.*c',10000000,'a'), "
     "printf('%.*c',200000,'a')||'b')\"}]}",
     0, NULL, NULL, 0, 1, "4xx/200 in run limit + 1 s"},
    {"printf('%.*c', 999999999) on /v1/query", "/v1/query", NULL,
     "{\"statements\":[{\"sql\":\"SELECT printf('%.*c',999999999,'x')\"}]}", 0, NULL, NULL, 0, 1,
     "4xx/200 in run limit + 1 s"},
    {"instr(10 MB, 200 KB) on /v1/do (writer)", "/v1/do", NULL,
     "{\"statements\":[{\"sql\":\"SELECT instr(printf('%.*c',10000000,'a'), "
     "printf('%.*c',200000,'a')||'b')\"}]}",
     0, NULL, NULL, 1, 1, "4xx/200 in run limit + 1 s"},
};
enum { NHEAVY = sizeof HEAVY / sizeof *HEAVY, NATTACK = NQUICK + NHEAVY };

typedef struct attack_stat {
  int64_t sent, expected, unexpected, noanswer, cut, max_ns;
  char first[240]; /* the first unexpected answer */
} attack_stat;

static attack_stat stats[NATTACK];
static _Atomic int64_t marker;    /* the next marks id a refused attack would write */
static _Atomic int64_t smuggle_n; /* the next smuggled INSERT's, from SMUGGLE_BASE */

/* Attack k: QUICK's, then HEAVY's. */
static const attack *attack_at(int k) { return k < NQUICK ? &QUICK[k] : &HEAVY[k - NQUICK]; }

/* ---- the attackers ------------------------------------------------------------------------ */

/* tmpl with "@M@" replaced by m and "@E@" by the path outside --backup-dir. */
static void fill_body(char *out, size_t cap, const char *tmpl, int64_t m) {
  size_t n = 0;
  for (const char *p = tmpl; *p && n + 1 < cap;) {
    int k = 0;
    if (!strncmp(p, "@M@", 3))
      k = snprintf(out + n, cap - n, "%lld", (long long)m);
    else if (!strncmp(p, "@E@", 3))
      k = snprintf(out + n, cap - n, "%s", soak.evil_abs);
    else {
      out[n++] = *p++;
      continue;
    }
    p += 3;
    n += k > 0 ? ((size_t)k < cap - n ? (size_t)k : cap - n - 1) : 0;
  }
  out[n] = '\0';
}

/* A harmless request framed by its first Content-Length, a second request
 * (an INSERT into marks) inside the body its second one frames. */
static size_t smuggle_request(char *out, size_t cap, int64_t mark) {
  static const char b1[] = "{\"statements\":[{\"sql\":\"SELECT 1\"}]}";
  char b2[160], inner[512];
  snprintf(b2, sizeof b2, "{\"statements\":[{\"sql\":\"INSERT INTO marks VALUES (%lld)\"}]}",
           (long long)mark);
  soak_lithd_post(inner, sizeof inner, "/v1/do", NULL, b2);
  int n = snprintf(out, cap,
                   "POST /v1/do HTTP/1.1\r\nHost: 127.0.0.1\r\n" SOAK_CT_JSON
                   "Content-Length: %zu\r\nContent-Length: %zu\r\n\r\n"
                   "%s%s",
                   strlen(b1), strlen(b1) + strlen(inner), b1, inner);
  return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

/* Attack k's answer: as expected, or not (then `column` is counted, the
 * first message kept, and it is a failure, or a finding for an open issue). */
static void judge(int k, int ok, int64_t *column, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void judge(int k, int ok, int64_t *column, const char *fmt, ...) {
  const attack *a = attack_at(k);
  attack_stat *st = &stats[k];
  char m[240];
  if (ok) {
    st->expected++;
    return;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m, sizeof m, fmt, ap);
  va_end(ap);
  (*column)++;
  if (!st->first[0])
    snprintf(st->first, sizeof st->first, "%s", m);
  if (a->known)
    soak_check_finding(a->name, "%s: %s", a->name, m);
  else
    soak_check_failure("attack %s: %s", a->name, m);
}

/* Send attack k on a fresh connection and judge the answer. */
static void attack_once(int k) {
  const attack *a = &QUICK[k];
  attack_stat *st = &stats[k];
  char req[2048], in[16385];
  size_t n, len = 0;
  if (!a->body) {
    n = smuggle_request(req, sizeof req, SMUGGLE_BASE + atomic_fetch_add(&smuggle_n, 1));
  } else {
    char body[1024];
    fill_body(body, sizeof body, a->body, atomic_fetch_add(&marker, 1));
    n = soak_lithd_post(req, sizeof req, a->path, a->headers, body);
  }
  int fd = soak_lithd_dial();
  if (fd < 0)
    return; /* lithd not listening (a restart): not sent */
  st->sent++;
  int ph0 = atomic_load(&soak.phase);
  uint64_t out0 = atomic_load(&soak.outages);
  int64_t t0 = bench_now_ns();
  bench_answer ans;
  int rc = soak_lithd_send(fd, req, n) == 0
               ? soak_lithd_read(fd, in, sizeof in - 1, &len, t0 + 5000000000, &ans)
               : -1;
  int64_t dt = bench_now_ns() - t0;
  if (dt > st->max_ns)
    st->max_ns = dt;
  int full = ph0 == PH_FULL || atomic_load(&soak.phase) == PH_FULL;
  if (rc != 1) {
    if (atomic_load(&soak.outages) != out0 || ph0 == PH_KILL || ph0 == PH_STOP) {
      st->cut++;
    } else {
      judge(k, 0, &st->noanswer, "no answer within 5 s (%s)", rc == 0 ? "timed out" : "connection closed");
    }
    close(fd);
    return;
  }
  const char *b = in + ans.head_len;
  int ok = a->expect ? ans.status == a->expect : ans.status >= 400 && ans.status < 500;
  if (!ok && a->write && full && ans.status == 507)
    ok = 1;
  else if (ok && a->must && !strstr(b, a->must))
    ok = 0;
  else if (ok && a->must_not && strstr(b, a->must_not))
    ok = 0;
  judge(k, ok, &st->unexpected, "HTTP %d after %.0f ms: %.150s", ans.status, (double)dt / 1e6, b);
  if (!a->body) {
    /* Framed by the first length, the rest is a second request: its answer follows. */
    size_t off = ans.total, more = len - off;
    memmove(in, in + off, more);
    in[more] = '\0';
    bench_answer a2;
    int rc2 = bench_http_parse(in, more, sizeof in - 1, &a2);
    int64_t until = bench_now_ns() + 500000000;
    while (rc2 == 0 && bench_now_ns() < until) {
      struct pollfd p = {fd, POLLIN, 0};
      if (poll(&p, 1, 50) == 1)
        rc2 = bench_http_recv(fd, in, &more, sizeof in - 1, &a2);
    }
    if (rc2 == 1)
      soak_check_finding("smuggled-answered",
                         "two Content-Length: the smuggled second request was answered HTTP %d: %.120s",
                         a2.status, in + a2.head_len);
  }
  close(fd);
}

void *soak_attack_quick_main(void *arg) {
  int k = 0;
  while (!atomic_load(&soak.stop)) {
    bench_sleep_ms(250);
    if (atomic_load(&soak.pause_attacks))
      continue;
    attack_once(k);
    k = (k + 1) % NQUICK;
  }
  return NULL;
}

/* The heavy requests, one at a time; while a lithd has not answered one,
 * it gets no other (it may still be running it). */
void *soak_attack_heavy_main(void *arg) {
  int k = 0;
  pid_t skip = 0;
  char req[1024], in[4097];
  bench_sleep_ms(1500);
  while (!atomic_load(&soak.stop)) {
    pid_t pid = atomic_load(&soak.pid);
    if (atomic_load(&soak.pause_attacks) || pid == skip) {
      bench_sleep_ms(200);
      continue;
    }
    const attack *a = &HEAVY[k];
    attack_stat *st = &stats[NQUICK + k];
    size_t n = soak_lithd_post(req, sizeof req, a->path, a->headers, a->body), len = 0;
    int fd = soak_lithd_dial();
    if (fd < 0) {
      bench_sleep_ms(200);
      continue;
    }
    st->sent++;
    uint64_t out0 = atomic_load(&soak.outages);
    int full = atomic_load(&soak.phase) == PH_FULL;
    int64_t stop0 = atomic_load(&soak.stopped_ns), t0 = bench_now_ns(), cap = t0 + 60000000000;
    atomic_store(&soak.heavy_pid, pid);
    bench_answer ans;
    int rc = soak_lithd_send(fd, req, n) == 0 ? 0 : -1;
    while (rc == 0 && !atomic_load(&soak.stop) && bench_now_ns() < cap)
      rc = soak_lithd_read(fd, in, sizeof in - 1, &len, bench_now_ns() + 200000000, &ans);
    /* the time lithd was stopped does not count against it */
    int64_t dt = bench_now_ns() - t0 - (atomic_load(&soak.stopped_ns) - stop0);
    int64_t limit = (int64_t)(soak.cfg.run_ms + 1000) * 1000000;
    if (dt > st->max_ns)
      st->max_ns = dt;
    if (rc == 1) {
      atomic_store(&soak.heavy_pid, 0);
      const char *b = in + ans.head_len, *rows = strstr(b, "\"rows\":");
      full |= atomic_load(&soak.phase) == PH_FULL;
      int ok = ans.status == 200 || (ans.status >= 400 && ans.status < 500) ||
               (a->write && full && ans.status == 507);
      judge(NQUICK + k, ok && dt <= limit, &st->unexpected, "HTTP %d after %.2f s (limit %.1f s): %.120s",
            ans.status, (double)dt / 1e9, (double)limit / 1e9, rows ? rows : b);
    } else if (rc == -2) {
      atomic_store(&soak.heavy_pid, 0);
      judge(NQUICK + k, 0, &st->unexpected, "after %.1f s an answer over %zu bytes (the string itself?)",
            (double)dt / 1e9, sizeof in - 1);
    } else if (atomic_load(&soak.outages) != out0 && pid != atomic_load(&soak.pid)) {
      st->cut++; /* lithd was killed under it */
    } else if (atomic_load(&soak.stop)) {
      st->sent--; /* the run ended first: not judged */
    } else {
      skip = pid;
      judge(
          NQUICK + k, 0, &st->noanswer,
          "no answer after %.1f s (%s); not sent again to this lithd (pid %d), which may still be running it",
          (double)dt / 1e9, rc == 0 ? "gave up" : "connection closed", (int)pid);
    }
    close(fd);
    k = (k + 1) % NHEAVY;
    for (int i = 0; i < 15 && !atomic_load(&soak.stop); i++)
      bench_sleep_ms(200);
  }
  return NULL;
}

int64_t soak_attack_wrong(void) {
  int64_t bad = 0;
  for (int k = 0; k < NATTACK; k++)
    if (!attack_at(k)->known || soak.cfg.strict)
      bad += stats[k].unexpected + stats[k].noanswer;
  return bad;
}

void soak_attack_print(void) {
  char a[32];
  printf("\n### attacks\n\n| request | sent | as expected | unexpected | no answer | cut by a fault | max ms "
         "| expected |\n"
         "|---|--:|--:|--:|--:|--:|--:|---|\n");
  for (int k = 0; k < NATTACK; k++) {
    const attack *x = attack_at(k);
    const attack_stat *st = &stats[k];
    soak_report_fmt_ms(a, sizeof a, st->sent ? st->max_ns : -1);
    printf("| %s%s | %lld | %lld | %lld | %lld | %lld | %s | %s |\n", x->name, x->known ? " †" : "",
           (long long)st->sent, (long long)st->expected, (long long)st->unexpected, (long long)st->noanswer,
           (long long)st->cut, a, x->want);
  }
  printf("\n† issue 10 items, fixed since and still asked: a wrong answer is a finding, not a failure,\n"
         "unless --strict. Cut by a fault: no answer because lithd was killed or stopped meanwhile.\n");
  for (int k = 0; k < NATTACK; k++)
    if (stats[k].first[0])
      printf("- %s, first wrong answer: %s\n", attack_at(k)->name, stats[k].first);
}
