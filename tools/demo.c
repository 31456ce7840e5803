/*
 * lith-demo: what `make run` starts until lithd exists. It opens (or
 * creates) a bank database, lets N producer threads move money between
 * their own accounts through lith_do for a few seconds, prints the writer's
 * figures every second, and at the end checks that no money was created or
 * lost and that the ledger holds exactly the answered transfers.
 *
 *   lith-demo [--db PATH] [--producers N] [--seconds S] [--sync normal|full]
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lith.h"

static const char *const migrations[] = {
    "CREATE TABLE IF NOT EXISTS accounts(id INTEGER PRIMARY KEY, balance INTEGER NOT NULL CHECK (balance >= "
    "0));"
    "CREATE TABLE IF NOT EXISTS ledger(id INTEGER PRIMARY KEY, src INTEGER NOT NULL, dst INTEGER NOT NULL,"
    " amount INTEGER NOT NULL);",
};

enum { ACCOUNTS_PER_PRODUCER = 10, START_BALANCE = 1000 };

typedef struct transfer {
  int64_t src, dst, amount;
} transfer;

static int transfer_cmd(lith_tx *tx, void *arg) {
  transfer *t = arg;
  int64_t bal;
  int rc = lith_tx_int64(tx, &bal, "SELECT balance FROM accounts WHERE id = ?", "I", t->src);
  if (rc != LITH_OK)
    return rc;
  if (bal < t->amount)
    return lith_tx_error(tx, LITH_USER, "insufficient funds");
  if ((rc = lith_tx_exec(tx, "UPDATE accounts SET balance = balance - ? WHERE id = ?", "II", t->amount,
                         t->src)) ||
      (rc = lith_tx_exec(tx, "UPDATE accounts SET balance = balance + ? WHERE id = ?", "II", t->amount,
                         t->dst)) ||
      (rc = lith_tx_exec(tx, "INSERT INTO ledger(src, dst, amount) VALUES (?, ?, ?)", "III", t->src, t->dst,
                         t->amount)))
    return rc;
  lith_tx_touch(tx, t->src / ACCOUNTS_PER_PRODUCER);
  return LITH_OK;
}

typedef struct seed {
  int64_t first, n;
} seed;

static int seed_cmd(lith_tx *tx, void *arg) {
  seed *s = arg;
  for (int64_t id = s->first; id < s->first + s->n; id++) {
    int rc = lith_tx_exec(tx, "INSERT OR IGNORE INTO accounts(id, balance) VALUES (?, ?)", "II", id,
                          (int64_t)START_BALANCE);
    if (rc != LITH_OK)
      return rc;
  }
  return LITH_OK;
}

typedef struct totals {
  int64_t money, ledger;
} totals;

static int read_totals(lith_rx *rx, void *arg) {
  totals *t = arg;
  int rc = lith_rx_int64(rx, &t->money, "SELECT coalesce(sum(balance), 0) FROM accounts", NULL);
  if (rc == LITH_OK)
    rc = lith_rx_int64(rx, &t->ledger, "SELECT count(*) FROM ledger", NULL);
  return rc;
}

static lith *g_db;
static _Atomic int g_stop;
static _Atomic long g_ok, g_refused, g_errors;

static void *producer(void *arg) {
  int64_t base = (int64_t)(intptr_t)arg * ACCOUNTS_PER_PRODUCER;
  unsigned seedv = (unsigned)(uintptr_t)arg * 2654435761u + 1;
  while (!atomic_load(&g_stop)) {
    transfer t;
    t.src = base + rand_r(&seedv) % ACCOUNTS_PER_PRODUCER;
    t.dst = base + (t.src - base + 1 + rand_r(&seedv) % (ACCOUNTS_PER_PRODUCER - 1)) % ACCOUNTS_PER_PRODUCER;
    t.amount = 1 + rand_r(&seedv) % 50;
    int rc = lith_do(g_db, transfer_cmd, &t);
    if (rc == LITH_OK)
      atomic_fetch_add(&g_ok, 1);
    else if (rc == LITH_USER)
      atomic_fetch_add(&g_refused, 1);
    else {
      atomic_fetch_add(&g_errors, 1);
      fprintf(stderr, "transfer: %s: %s\n", lith_errstr(rc), lith_errmsg(g_db));
    }
  }
  return NULL;
}

static void usage(void) {
  fprintf(stderr, "usage: lith-demo [--db PATH] [--producers N] [--seconds S] [--sync normal|full]\n");
  exit(2);
}

int main(int argc, char **argv) {
  const char *path = "lith-demo.db";
  int producers = 64, seconds = 5;
  lith_options opt;
  lith_options_default(&opt);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--db") && i + 1 < argc)
      path = argv[++i];
    else if (!strcmp(argv[i], "--producers") && i + 1 < argc)
      producers = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
      seconds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--sync") && i + 1 < argc) {
      const char *s = argv[++i];
      opt.synchronous = !strcmp(s, "full") ? LITH_SYNC_FULL : !strcmp(s, "normal") ? LITH_SYNC_NORMAL : -1;
      if (opt.synchronous < 0)
        usage();
    } else
      usage();
  }
  if (producers < 1 || producers > 10000 || seconds < 1)
    usage();
  opt.migrations = migrations;
  opt.n_migrations = 1;

  int rc = lith_open(path, &opt, &g_db);
  if (rc != LITH_OK) {
    fprintf(stderr, "lith-demo: %s\n", lith_errmsg(NULL));
    return 1;
  }
  seed s = {0, (int64_t)producers * ACCOUNTS_PER_PRODUCER};
  if ((rc = lith_do(g_db, seed_cmd, &s)) != LITH_OK) {
    fprintf(stderr, "lith-demo: seeding: %s\n", lith_errmsg(g_db));
    lith_close(g_db);
    return 1;
  }
  totals before = {0, 0};
  lith_read(g_db, read_totals, &before);

  printf("lith %s demo: %s, %d producers, synchronous %s, %d s\n", LITH_VERSION, path, producers,
         opt.synchronous == LITH_SYNC_FULL ? "FULL" : "NORMAL", seconds);
  printf("%4s %12s %10s %10s %10s %8s %8s\n", "sec", "commands/s", "per tx", "tx p99 ms", "queue", "WAL pg",
         "ckpts");
  pthread_t *th = calloc((size_t)producers, sizeof *th);
  if (!th)
    return 1;
  for (int i = 0; i < producers; i++)
    pthread_create(&th[i], NULL, producer, (void *)(intptr_t)i);
  lith_stats prev, cur;
  lith_stats_get(g_db, &prev);
  for (int sec = 1; sec <= seconds; sec++) {
    sleep(1);
    lith_stats_get(g_db, &cur);
    uint64_t cmds = cur.commands - prev.commands, batches = cur.batches - prev.batches;
    printf("%4d %12llu %10.1f %10.2f %10llu %8llu %8llu\n", sec, (unsigned long long)cmds,
           batches ? (double)cmds / (double)batches : 0.0, cur.tx_ns_p99 / 1e6,
           (unsigned long long)cur.queue_depth, (unsigned long long)cur.wal_pages,
           (unsigned long long)cur.checkpoints);
    fflush(stdout);
    prev = cur;
  }
  atomic_store(&g_stop, 1);
  for (int i = 0; i < producers; i++)
    pthread_join(th[i], NULL);
  free(th);

  totals after = {0, 0};
  lith_read(g_db, read_totals, &after);
  lith_stats_get(g_db, &cur);
  rc = lith_close(g_db);
  long ok = atomic_load(&g_ok);
  int good = after.money == before.money && after.ledger - before.ledger == ok && atomic_load(&g_errors) == 0;
  printf("transfers answered ok: %ld, refused (insufficient funds): %ld, errors: %ld\n", ok,
         atomic_load(&g_refused), atomic_load(&g_errors));
  printf("batches: %llu, mean commands per transaction: %.1f\n", (unsigned long long)cur.batches,
         cur.batches ? (double)cur.commands / (double)cur.batches : 0.0);
  printf("money before %lld, after %lld; ledger rows added %lld: %s\n", (long long)before.money,
         (long long)after.money, (long long)(after.ledger - before.ledger),
         good ? "consistent" : "INCONSISTENT");
  return good && rc == LITH_OK ? 0 : 1;
}
