/*
 * test_lithd_crash — lithd under load, killed (SIGKILL) or stopped (SIGTERM)
 * at a random moment: what it answered must be in the file, and nothing of a
 * command may be half there.
 *
 * The workload is a bank: NACCOUNTS accounts with a CHECK (balance >= 0) and
 * a ledger with UNIQUE (client, seq). NCLIENTS threads, each with its own
 * keep-alive connection (tl_conn), send transfer commands through /v1/do:
 * debit, credit, ledger row (client, seq, src, dst, amount), one command per
 * request, seq counting up per client across the whole test. Each client
 * records what became of every seq it used: answered 200, answered with an
 * error (409 when the debit would overdraw; 503 while stopping), or unknown
 * (the connection closed or failed before the whole answer).
 *
 * Checks, on the file (SQLite directly, with lithd running again after the
 * crash: its restart must not be blocked by the dead one's lock file) and
 * through /v1/query:
 *   - every command answered 200 has its ledger row; no command answered
 *     with an error has one; no ledger row belongs to a seq never used;
 *   - each account's balance is START_BALANCE minus what the ledger says it
 *     sent plus what it received: a ledger row is there exactly when its
 *     debit and credit are (no partial command), and money is conserved;
 *   - PRAGMA integrity_check is ok.
 * Crash: several rounds of load + SIGKILL on the same file, with
 * --synchronous normal and full (a process crash loses nothing the kernel
 * got, so both must keep every answered commit). SIGTERM: lithd must exit 0
 * while the clients are busy, and no client may wait for ever (every request
 * has a deadline; a timeout fails the test); its rounds alternate between
 * TCP and --unix.
 *
 * The load starts from a random seed (printed; LITH_TEST_SEED replays one).
 * Client threads never assert (cmocka's assertions belong to the test's
 * thread): they record, the test's thread checks after joining them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "child.h"

#define NCLIENTS 8
#define NACCOUNTS 16
#define START_BALANCE 1000
#define REQUEST_TIMEOUT_MS 20000 /* a client's longest wait for one answer */
#define STOP_TIMEOUT_MS 30000    /* SIGTERM to exit */

#define STR_(x) #x
#define STR(x) STR_(x)

#define SCHEMA                                                                    \
  "{\"statements\":["                                                             \
  "{\"sql\":\"CREATE TABLE accounts(id INTEGER PRIMARY KEY,"                      \
  " balance INTEGER NOT NULL CHECK (balance >= 0))\"},"                           \
  "{\"sql\":\"CREATE TABLE ledger(client INTEGER NOT NULL, seq INTEGER NOT NULL," \
  " src INTEGER NOT NULL, dst INTEGER NOT NULL, amount INTEGER NOT NULL,"         \
  " UNIQUE (client, seq))\"},"                                                    \
  "{\"sql\":\"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n"     \
  " WHERE i < " STR(NACCOUNTS) ") INSERT INTO accounts SELECT i, " STR(START_BALANCE) " FROM n\"}]}"

/* Accounts whose balance disagrees with the ledger. */
#define DISAGREE                                                                         \
  "SELECT count(*) FROM accounts a WHERE balance <> " STR(                               \
      START_BALANCE) " - (SELECT coalesce(sum(amount), 0) FROM ledger WHERE src = a.id)" \
                     " + (SELECT coalesce(sum(amount), 0) FROM ledger WHERE dst = a.id)"

/* What became of one seq. */
enum { SEQ_UNUSED = 0, SEQ_UNKNOWN, SEQ_OK, SEQ_REFUSED, SEQ_NOT_SENT };

/* One load phase, shared by its clients. */
struct run {
  const struct tl_child *c;
  atomic_int stop;
  atomic_long answered; /* 200s in this phase */
};

struct client {
  int id;
  pthread_t thread;
  struct run *run;
  uint64_t rng;
  int64_t next_seq;       /* seqs 1 .. next_seq - 1 were used */
  unsigned char *outcome; /* by seq */
  size_t cap;
  /* this phase */
  long ok, refused, unknown, not_sent, timeouts, bad;
  int odd_status; /* an answer other than 200, 409, 503 (0: none) */
  char odd_body[160];
};

struct bank {
  struct client cl[NCLIENTS];
  uint64_t seed;
};

static uint64_t next_rand(uint64_t *s) { /* xorshift64* */
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 2685821657736338717ULL;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Room for seq in cl->outcome; -1 when out of memory. */
static int reserve(struct client *cl, int64_t seq) {
  if ((size_t)seq >= cl->cap) {
    size_t cap = cl->cap == 0 ? 1024 : cl->cap * 2;
    unsigned char *o = realloc(cl->outcome, cap);
    if (o == NULL)
      return -1;
    memset(o + cl->cap, SEQ_UNUSED, cap - cl->cap);
    cl->outcome = o;
    cl->cap = cap;
  }
  return 0;
}

/* A client thread: transfers on one keep-alive connection until told to
 * stop or the connection fails (lithd went away). */
static void *client_main(void *arg) {
  struct client *cl = arg;
  struct tl_conn k;
  char body[768];

  tl_conn_init(&k, cl->run->c);
  while (!atomic_load(&cl->run->stop)) {
    struct tl_resp r;
    int64_t seq = cl->next_seq;
    int src = 1 + (int)(next_rand(&cl->rng) % NACCOUNTS);
    int dst = 1 + (int)(next_rand(&cl->rng) % (NACCOUNTS - 1));
    int amount = 1 + (int)(next_rand(&cl->rng) % 200);
    int rc;

    if (dst >= src)
      dst++; /* never the same account */
    if (reserve(cl, seq) != 0) {
      cl->bad++;
      break;
    }
    cl->next_seq++;
    cl->outcome[seq] = SEQ_UNKNOWN;
    snprintf(body, sizeof body,
             "{\"statements\":["
             "{\"sql\":\"UPDATE accounts SET balance = balance - ? WHERE id = ?\","
             "\"params\":[%d, %d]},"
             "{\"sql\":\"UPDATE accounts SET balance = balance + ? WHERE id = ?\","
             "\"params\":[%d, %d]},"
             "{\"sql\":\"INSERT INTO ledger VALUES(?, ?, ?, ?, ?)\","
             "\"params\":[%d, %lld, %d, %d, %d]}]}",
             amount, src, amount, dst, cl->id, (long long)seq, src, dst, amount);
    rc = tl_conn_request(&k, "POST", "/v1/do", NULL, body, &r, REQUEST_TIMEOUT_MS);
    if (rc == TL_NOCONN) { /* lithd is gone: this one never left */
      cl->outcome[seq] = SEQ_NOT_SENT;
      cl->not_sent++;
      break;
    }
    if (rc != TL_OK) {
      cl->unknown++;
      if (rc == TL_TIMEOUT)
        cl->timeouts++;
      if (rc == TL_BAD)
        cl->bad++;
      break;
    }
    if (r.status == 200) {
      cl->outcome[seq] = SEQ_OK;
      cl->ok++;
      atomic_fetch_add(&cl->run->answered, 1);
    } else {
      cl->outcome[seq] = SEQ_REFUSED;
      cl->refused++;
      if (r.status != 409 && r.status != 503 && cl->odd_status == 0) {
        cl->odd_status = r.status;
        snprintf(cl->odd_body, sizeof cl->odd_body, "%s", r.body);
      }
    }
    tl_resp_free(&r);
  }
  tl_conn_close(&k);
  return NULL;
}

static struct bank *bank_new(void) {
  static uint64_t nth; /* tests started in the same second differ */
  struct bank *b = calloc(1, sizeof *b);
  const char *s = getenv("LITH_TEST_SEED");
  int i;

  assert_non_null(b);
  b->seed =
      s != NULL ? strtoull(s, NULL, 10) : ((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20)) + 7919 * ++nth;
  if (b->seed == 0)
    b->seed = 1;
  print_message("seed %llu (LITH_TEST_SEED replays it)\n", (unsigned long long)b->seed);
  for (i = 0; i < NCLIENTS; i++) {
    b->cl[i].id = i;
    b->cl[i].next_seq = 1;
    b->cl[i].rng = b->seed * 0x9E3779B97F4A7C15ULL + (uint64_t)i + 1;
  }
  return b;
}

static void bank_free(struct bank *b) {
  int i;
  for (i = 0; i < NCLIENTS; i++)
    free(b->cl[i].outcome);
  free(b);
}

/* Run the clients on c; once they had answers (or after a while), wait a
 * random 100-600 ms, send sig and wait for lithd to end. Returns tl_stop's
 * exit code. The clients are joined before it returns. */
static int load_then_signal(struct bank *b, struct tl_child *c, int sig) {
  struct run run;
  int i, started = 0, code;
  long delay;
  int64_t deadline = now_ms() + TL_TIMEOUT_MS;

  run.c = c;
  atomic_init(&run.stop, 0);
  atomic_init(&run.answered, 0);
  for (i = 0; i < NCLIENTS; i++) {
    struct client *cl = &b->cl[i];
    cl->run = &run;
    cl->ok = cl->refused = cl->unknown = cl->not_sent = cl->timeouts = cl->bad = 0;
    cl->odd_status = 0;
    if (pthread_create(&cl->thread, NULL, client_main, cl) != 0)
      break;
    started++;
  }
  /* Busy clients first (a slow start under a sanitizer), then the moment. */
  while (started == NCLIENTS && atomic_load(&run.answered) < NCLIENTS && now_ms() < deadline)
    sleep_ms(2);
  delay = 100 + (long)(next_rand(&b->seed) % 501);
  if (started == NCLIENTS)
    sleep_ms(delay);
  code = tl_stop(c, sig, STOP_TIMEOUT_MS);
  atomic_store(&run.stop, 1);
  for (i = 0; i < started; i++)
    pthread_join(b->cl[i].thread, NULL);
  assert_int_equal(started, NCLIENTS);
  if (code < 0)
    print_error("lithd did not end within %d ms of the signal\n", STOP_TIMEOUT_MS);
  print_message("%s after %ld ms: %ld answered 200\n", sig == SIGKILL ? "SIGKILL" : "SIGTERM", delay,
                atomic_load(&run.answered));
  return code;
}

/* What the clients saw in the last phase: no odd answer, no bad reply, no
 * timeout (a client waiting for ever is a failure). Returns the 200s. */
static long check_clients(const struct bank *b) {
  long ok = 0, refused = 0, unknown = 0, not_sent = 0;
  int i;
  for (i = 0; i < NCLIENTS; i++) {
    const struct client *cl = &b->cl[i];
    if (cl->odd_status != 0)
      print_error("client %d: answer %d %s\n", cl->id, cl->odd_status, cl->odd_body);
    assert_int_equal(cl->odd_status, 0);
    assert_int_equal(cl->bad, 0);
    if (cl->timeouts != 0)
      print_error("client %d: no answer within %d ms\n", cl->id, REQUEST_TIMEOUT_MS);
    assert_int_equal(cl->timeouts, 0);
    ok += cl->ok;
    refused += cl->refused;
    unknown += cl->unknown;
    not_sent += cl->not_sent;
  }
  print_message("clients: %ld answered 200, %ld refused, %ld unanswered, %ld not sent\n", ok, refused,
                unknown, not_sent);
  return ok;
}

/* A one-integer /v1/query (sql without double quotes). */
static int64_t query_int(const struct tl_child *c, const char *sql) {
  char body[512];
  struct tl_resp r = {0, NULL, NULL};
  const char *rows;
  int64_t v;

  snprintf(body, sizeof body, "{\"statements\":[{\"sql\":\"%s\"}]}", sql);
  tl_http(c, "POST", "/v1/query", NULL, body, &r);
  if (r.status != 200)
    print_error("%s -> %d %s\n", sql, r.status, r.body);
  assert_int_equal(r.status, 200);
  rows = strstr(r.body, "\"rows\":[[");
  assert_non_null(rows);
  v = strtoll(rows + strlen("\"rows\":[["), NULL, 10);
  tl_resp_free(&r);
  return v;
}

/* The file against the clients' records (see the top). db: the database
 * file, c: a lithd serving it (or NULL). */
static void check_bank(const struct bank *b, const char *db, const struct tl_child *c) {
  sqlite3 *h = NULL;
  sqlite3_stmt *st = NULL;
  unsigned char *seen[NCLIENTS] = {NULL};
  int64_t rows = 0, present_unknown = 0, ok = 0;
  int i, step, fail_client = -1;
  int64_t fail_seq = 0, money, disagree;
  const char *why = NULL;

  tl_assert_integrity(db);
  assert_int_equal(tl_sql_int(db, "SELECT count(*) FROM accounts"), NACCOUNTS);
  money = tl_sql_int(db, "SELECT sum(balance) FROM accounts");
  disagree = tl_sql_int(db, DISAGREE);
  if (money != (int64_t)NACCOUNTS * START_BALANCE || disagree != 0)
    print_error("money %lld (want %lld), %lld accounts disagree with the ledger\n", (long long)money,
                (long long)NACCOUNTS * START_BALANCE, (long long)disagree);
  assert_int_equal(money, (int64_t)NACCOUNTS * START_BALANCE);
  assert_int_equal(disagree, 0);
  assert_true(tl_sql_int(db, "SELECT min(balance) FROM accounts") >= 0);

  for (i = 0; i < NCLIENTS; i++) {
    seen[i] = calloc((size_t)b->cl[i].next_seq + 1, 1);
    assert_non_null(seen[i]);
  }
  assert_int_equal(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  sqlite3_busy_timeout(h, TL_TIMEOUT_MS);
  assert_int_equal(sqlite3_prepare_v2(h, "SELECT client, seq FROM ledger", -1, &st, NULL), SQLITE_OK);
  while ((step = sqlite3_step(st)) == SQLITE_ROW) {
    int64_t cid = sqlite3_column_int64(st, 0), seq = sqlite3_column_int64(st, 1);
    rows++;
    if (cid < 0 || cid >= NCLIENTS || seq < 1 || seq >= b->cl[cid].next_seq) {
      why = "a ledger row of a command never sent";
    } else if (b->cl[cid].outcome[seq] == SEQ_REFUSED) {
      why = "a ledger row of a command answered with an error";
    } else if (b->cl[cid].outcome[seq] == SEQ_NOT_SENT) {
      why = "a ledger row of a command never sent";
    } else {
      seen[cid][seq] = 1;
      if (b->cl[cid].outcome[seq] == SEQ_UNKNOWN)
        present_unknown++;
      continue;
    }
    fail_client = (int)cid;
    fail_seq = seq;
    break;
  }
  sqlite3_finalize(st);
  sqlite3_close(h);
  if (why == NULL && step != SQLITE_DONE)
    why = "reading the ledger failed";
  for (i = 0; i < NCLIENTS && why == NULL; i++) {
    const struct client *cl = &b->cl[i];
    int64_t s;
    for (s = 1; s < cl->next_seq; s++) {
      if (cl->outcome[s] != SEQ_OK)
        continue;
      ok++;
      if (!seen[i][s]) {
        why = "no ledger row for a command answered 200";
        fail_client = i;
        fail_seq = s;
        break;
      }
    }
  }
  for (i = 0; i < NCLIENTS; i++)
    free(seen[i]);
  if (why != NULL)
    print_error("%s: client %d seq %lld\n", why, fail_client, (long long)fail_seq);
  assert_null(why);
  assert_int_equal(rows, ok + present_unknown);
  print_message("file: %lld ledger rows (%lld answered 200, %lld unanswered but committed)\n",
                (long long)rows, (long long)ok, (long long)present_unknown);

  if (c != NULL) { /* lithd's view is the file's */
    assert_int_equal(query_int(c, "SELECT count(*) FROM ledger"), rows);
    assert_int_equal(query_int(c, "SELECT sum(balance) FROM accounts"), (int64_t)NACCOUNTS * START_BALANCE);
    assert_int_equal(query_int(c, DISAGREE), 0);
  }
}

/* Rounds of load + SIGKILL on one file, each checked after a restart. */
static void crash_rounds(void **state, const char *name, const char *sync) {
  struct tl_child *c = *state;
  struct bank *b = bank_new();
  int rounds = tl_scaled(5), i;
  long answered = 0;
  char lock[96];

  tl_start(c, name, 0, TL_ARGS("--synchronous", sync));
  tl_expect(c, "POST", "/v1/do", NULL, SCHEMA, 200, NULL);
  snprintf(lock, sizeof lock, "%s-lithd.lock", c->db);
  for (i = 0; i < rounds; i++) {
    print_message("round %d/%d (--synchronous %s)\n", i + 1, rounds, sync);
    assert_int_equal(load_then_signal(b, c, SIGKILL), 128 + SIGKILL);
    answered += check_clients(b);
    assert_int_equal(access(lock, F_OK), 0); /* the dead one's lock file is left */
    tl_start(c, name, TL_KEEP_DB, TL_ARGS("--synchronous", sync));
    check_bank(b, c->db, c);
  }
  assert_true(answered > 0); /* the rounds did something */
  bank_free(b);
}

static void test_sigkill_normal(void **state) { crash_rounds(state, "crash_normal", "normal"); }

static void test_sigkill_full(void **state) { crash_rounds(state, "crash_full", "full"); }

/* Load + SIGTERM: exit 0, every client ends (answered, 503 or closed).
 * Rounds alternate between TCP and the Unix socket (--unix). */
static void test_sigterm_under_load(void **state) {
  struct tl_child *c = *state;
  struct bank *b = bank_new();
  int rounds = tl_scaled(2), i;

  tl_start(c, "term", 0, NULL);
  tl_expect(c, "POST", "/v1/do", NULL, SCHEMA, 200, NULL);
  for (i = 0; i < rounds; i++) {
    print_message("round %d/%d over %s\n", i + 1, rounds, c->port > 0 ? "TCP" : "a Unix socket");
    assert_int_equal(load_then_signal(b, c, SIGTERM), 0);
    assert_true(check_clients(b) > 0);
    check_bank(b, c->db, NULL); /* the file as lithd left it */
    /* Again, the next round on the other kind of listener. */
    tl_start(c, "term", TL_KEEP_DB | (i % 2 == 0 ? TL_UNIX : 0), NULL);
    check_bank(b, c->db, c);
  }
  bank_free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_sigkill_normal, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_sigkill_full, tl_setup, tl_teardown),
      cmocka_unit_test_setup_teardown(test_sigterm_under_load, tl_setup, tl_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
