/*
 * The read pool (sqlite/read_pool.c through lith_read):
 *   - reads run while writers commit and see whole batches only: writer
 *     threads move money between the two halves of the accounts
 *     (t_transfer_cmd, with a ledger row) and insert pairs of rows, while
 *     more reader threads than pooled connections check, with separate
 *     statements in one lith_read, that the two halves sum to the constant
 *     total, that the first half's balance matches the ledger, that the
 *     pairs are complete and that the ledger did not move during the read;
 *     reads overlap the writes (some see a state strictly between the first
 *     and the last commit);
 *   - reads never wait for the writer: while the writer is held inside a
 *     command that has written (an open BEGIN IMMEDIATE transaction) and
 *     with commands queued behind it, lith_read completes on every pooled
 *     connection and sees the state before that batch; afterwards it sees
 *     the batch;
 *   - read connections are read-only: INSERT, UPDATE and CREATE inside
 *     lith_read fail with SQLITE_READONLY (LITH_READONLY) and change
 *     nothing; a failed or aborted read leaves no transaction open (the
 *     next reads on every connection see new commits);
 *   - lith_rx_int64 and lith_rx_stmt: binding, "no row", errors, the cache
 *     (same statement, prepared once per connection, reset and unbound);
 *     lith_read refuses a NULL function and a call from a command;
 *   - more concurrent readers than opt.readers wait their turn: all
 *     complete, never more than opt.readers at once, never two on one
 *     connection;
 *   - lith_read_deadline: with every reader held it gives up at its
 *     deadline (LITH_QUEUE_FULL, fn not run), at once when the deadline is
 *     past, and reads when a reader comes back in time; under contention
 *     every call reads or gives up; lith_stats counts reads, waits, give-ups,
 *     wait time (total and histogram) and readers in use, also after
 *     lith_shutdown;
 *   - the hold (lith__pool_hold, checkpoint.c's): a read held waits,
 *     without a connection, until the release, or until the hold's bound,
 *     or until its own deadline if sooner (then it reads: a hold never
 *     fails a read); reads already running go on and are counted
 *     (lith__pool_running); lith__pool_hold_drained moves the hold's end
 *     only when no read runs; the held reads and their wait are counted;
 *   - too old (lith__pool_mark_too_old, the hold's word to reads that keep
 *     the WAL from starting over): the reads running that began by the
 *     time given are marked and see lith_rx_too_old 1 for the rest of
 *     their lith_read, those begun later 0; each read is counted once
 *     (stats too_old), lith__pool_too_old_running counts the marked ones
 *     still running, and the next read on the connection sees 0;
 *   - backups (lith__pool_backup_begin): while one runs a hold is refused;
 *     one begun during a hold waits until the release, or the hold's
 *     bound, and is not counted as a held read.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../lib/clock.h"
#include "../read_pool.h"
#include "common.h"

#define DB "read_pool.db"
#define NACC 16
#define HALF (NACC / 2)
#define BAL 1000

/* ---- reads during writes ------------------------------------------------ */

typedef struct shared {
  lith *db;
  _Atomic int writers_done;
  _Atomic long reads;
  _Atomic long reads_mid; /* saw some but not all of the ledger */
  _Atomic long violations;
  _Atomic long read_errors;
  _Atomic long transfers;
  _Atomic long pairs;
  _Atomic long write_errors;
  long min_reads; /* writers keep going until this many reads were done */
  long min_transfers;
  pthread_mutex_t mu;
  char first_violation[256];
} shared;

static void note_violation(shared *s, const char *what, long a, long b, long ledger) {
  pthread_mutex_lock(&s->mu);
  if (!s->first_violation[0])
    snprintf(s->first_violation, sizeof s->first_violation, "%s: %ld vs %ld (ledger %ld)", what, a, b,
             ledger);
  pthread_mutex_unlock(&s->mu);
  atomic_fetch_add(&s->violations, 1);
}

typedef struct observed {
  int64_t ledger1, ledger2, s1, s2, net1, a, b;
} observed;

static int check_snapshot(lith_rx *rx, void *arg) {
  observed *o = arg;
  int rc;
  /* separate statements, with yields between them so that commits land
   * while the read runs: only one snapshot keeps them consistent */
  if ((rc = lith_rx_int64(rx, &o->ledger1, "SELECT count(*) FROM ledger", NULL)) != LITH_OK)
    return rc;
  if ((rc = lith_rx_int64(rx, &o->s1, "SELECT coalesce(sum(balance), 0) FROM accounts WHERE id <= ?", "i",
                          HALF)) != LITH_OK)
    return rc;
  sched_yield();
  if ((rc = lith_rx_int64(rx, &o->a, "SELECT count(*) FROM kv WHERE k GLOB 'a*'", NULL)) != LITH_OK)
    return rc;
  sched_yield();
  if ((rc = lith_rx_int64(rx, &o->s2, "SELECT coalesce(sum(balance), 0) FROM accounts WHERE id > ?", "i",
                          HALF)) != LITH_OK)
    return rc;
  if ((rc = lith_rx_int64(
           rx, &o->net1,
           "SELECT coalesce(sum(CASE WHEN dst <= ?1 THEN amount ELSE -amount END), 0) FROM ledger", "i",
           HALF)) != LITH_OK)
    return rc;
  sched_yield();
  if ((rc = lith_rx_int64(rx, &o->b, "SELECT count(*) FROM kv WHERE k GLOB 'b*'", NULL)) != LITH_OK)
    return rc;
  return lith_rx_int64(rx, &o->ledger2, "SELECT count(*) FROM ledger", NULL);
}

static void *reader_main(void *arg) {
  shared *s = arg;
  int last = 0;
  while (!last) {
    last = atomic_load(&s->writers_done); /* one more read after the writers stop */
    observed o;
    memset(&o, 0, sizeof o);
    int rc = lith_read(s->db, check_snapshot, &o);
    if (rc != LITH_OK) {
      atomic_fetch_add(&s->read_errors, 1);
      continue;
    }
    atomic_fetch_add(&s->reads, 1);
    if (o.s1 + o.s2 != (int64_t)NACC * BAL)
      note_violation(s, "the halves' sums do not add up", (long)o.s1, (long)o.s2, (long)o.ledger1);
    if (o.s1 != (int64_t)HALF * BAL + o.net1)
      note_violation(s, "first half's sum vs the ledger's", (long)o.s1, (long)(HALF * BAL + o.net1),
                     (long)o.ledger1);
    if (o.a != o.b)
      note_violation(s, "a rows vs b rows", (long)o.a, (long)o.b, (long)o.ledger1);
    if (o.ledger1 != o.ledger2)
      note_violation(s, "ledger moved during one read", (long)o.ledger1, (long)o.ledger2, (long)o.ledger1);
    if (o.ledger1 > 0 && !atomic_load(&s->writers_done))
      atomic_fetch_add(&s->reads_mid, 1);
  }
  return NULL;
}

typedef struct writer_arg {
  shared *s;
  int id;
} writer_arg;

static int keep_writing(shared *s, long done) {
  if (done < s->min_transfers)
    return 1;
  /* go on until the readers had their share, within a bound */
  return atomic_load(&s->reads) < s->min_reads && done < 50 * s->min_transfers;
}

static void *transfer_main(void *arg) {
  writer_arg *w = arg;
  shared *s = w->s;
  unsigned x = 12345u + (unsigned)w->id * 7919u;
  for (long i = 0; keep_writing(s, i); i++) {
    x = x * 1103515245u + 12345u;
    int64_t lo = 1 + (int64_t)((x >> 8) % HALF);
    int64_t hi = HALF + 1 + (int64_t)((x >> 16) % HALF);
    int up = (x >> 24) & 1;
    t_transfer t = {.producer = w->id,
                    .seq = i,
                    .src = up ? lo : hi,
                    .dst = up ? hi : lo,
                    .amount = 1 + (int64_t)((x >> 4) % 5),
                    .topic = 0};
    int rc = lith_do(s->db, t_transfer_cmd, &t);
    if (rc != LITH_OK)
      atomic_fetch_add(&s->write_errors, 1);
    else
      atomic_fetch_add(&s->transfers, 1);
  }
  return NULL;
}

static int pair_cmd(lith_tx *tx, void *arg) {
  long n = (long)(intptr_t)arg;
  char k[32];
  snprintf(k, sizeof k, "a%ld", n);
  int rc = lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES (?, 1)", "s", k);
  if (rc != LITH_OK)
    return rc;
  snprintf(k, sizeof k, "b%ld", n);
  return lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES (?, 1)", "s", k);
}

static void pair_done(lith_request *req) {
  t_async *c = req->data;
  atomic_fetch_add(&c->done, 1);
}

/* Pairs submitted asynchronously in chunks, so that batches hold many. */
static void *pair_main(void *arg) {
  writer_arg *w = arg;
  shared *s = w->s;
  enum { CHUNK = 32 };
  lith_request req[CHUNK];
  long n = 0;
  while (keep_writing(s, n)) {
    t_async done = {0};
    int accepted = 0;
    for (int i = 0; i < CHUNK; i++, n++) {
      memset(&req[i], 0, sizeof req[i]);
      req[i].fn = pair_cmd;
      req[i].arg = (void *)(intptr_t)n;
      req[i].done = pair_done;
      req[i].data = &done;
      if (lith_submit(s->db, &req[i]) == LITH_OK)
        accepted++;
      else
        atomic_fetch_add(&s->write_errors, 1);
    }
    while (atomic_load(&done.done) < accepted)
      usleep(100);
    for (int i = 0; i < CHUNK; i++) {
      if (req[i].rc != LITH_OK)
        atomic_fetch_add(&s->write_errors, 1);
      else
        atomic_fetch_add(&s->pairs, 1);
    }
  }
  return NULL;
}

static lith *open_seeded(int readers) {
  lith_options opt;
  t_bank_options(&opt);
  opt.readers = readers;
  lith *db = t_open_fresh(DB, &opt);
  t_seed_accounts(db, NACC, BAL);
  return db;
}

static void test_reads_see_whole_batches(void **state) {
  (void)state;
  enum { NREADERS = 3, NTRANSFER = 2 };
  shared s;
  memset(&s, 0, sizeof s);
  pthread_mutex_init(&s.mu, NULL);
  s.db = open_seeded(2); /* fewer connections than reader threads */
  s.min_transfers = t_scaled(1500);
  s.min_reads = t_scaled(300);

  pthread_t readers[NREADERS], writers[NTRANSFER + 1];
  writer_arg wa[NTRANSFER + 1];
  for (int i = 0; i < NREADERS; i++)
    assert_int_equal(pthread_create(&readers[i], NULL, reader_main, &s), 0);
  for (int i = 0; i < NTRANSFER; i++) {
    wa[i] = (writer_arg){&s, i + 1};
    assert_int_equal(pthread_create(&writers[i], NULL, transfer_main, &wa[i]), 0);
  }
  wa[NTRANSFER] = (writer_arg){&s, 0};
  assert_int_equal(pthread_create(&writers[NTRANSFER], NULL, pair_main, &wa[NTRANSFER]), 0);
  for (int i = 0; i < NTRANSFER + 1; i++)
    pthread_join(writers[i], NULL);
  atomic_store(&s.writers_done, 1);
  for (int i = 0; i < NREADERS; i++)
    pthread_join(readers[i], NULL);

  if (s.first_violation[0])
    fprintf(stderr, "first violation: %s\n", s.first_violation);
  fprintf(stderr, "reads %ld (%ld mid-write), transfers %ld, pairs %ld\n", atomic_load(&s.reads),
          atomic_load(&s.reads_mid), atomic_load(&s.transfers), atomic_load(&s.pairs));
  assert_int_equal(atomic_load(&s.violations), 0);
  assert_int_equal(atomic_load(&s.read_errors), 0);
  assert_int_equal(atomic_load(&s.write_errors), 0);
  assert_true(atomic_load(&s.transfers) >= NTRANSFER * s.min_transfers);
  assert_true(atomic_load(&s.reads) >= s.min_reads);
  assert_true(atomic_load(&s.reads_mid) > 0);

  lith_stats st;
  lith_stats_get(s.db, &st);
  assert_true(st.batches < st.commands); /* some batches held several commands */
  assert_int_equal(lith_close(s.db), LITH_OK);
  assert_int_equal(t_query_int(DB, "SELECT sum(balance) FROM accounts"), NACC * BAL);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM ledger"), atomic_load(&s.transfers));
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM kv"), 2 * atomic_load(&s.pairs));
  pthread_mutex_destroy(&s.mu);
}

/* ---- reads while the writer is held ------------------------------------- */

typedef struct hold {
  _Atomic int entered;
  _Atomic int open;
  lith_request req;
} hold;

/* Writes (moves 100 from account 1 to 2, puts 'held'), then waits. */
static int hold_cmd(lith_tx *tx, void *arg) {
  hold *h = arg;
  int rc;
  if ((rc = lith_tx_exec(tx, "UPDATE accounts SET balance = balance - 100 WHERE id = 1", NULL)) != LITH_OK ||
      (rc = lith_tx_exec(tx, "UPDATE accounts SET balance = balance + 100 WHERE id = 2", NULL)) != LITH_OK ||
      (rc = lith_tx_exec(tx, "INSERT INTO kv(k, v) VALUES ('held', 1)", NULL)) != LITH_OK)
    return rc;
  atomic_store(&h->entered, 1);
  for (int i = 0; i < 30000 && !atomic_load(&h->open); i++)
    usleep(1000);
  return LITH_OK;
}

static void hold_done(lith_request *req) { atomic_fetch_add((_Atomic int *)req->data, 1); }

typedef struct seen {
  int64_t bal1, bal2, held, queued, before;
} seen;

static int read_state(lith_rx *rx, void *arg) {
  seen *v = arg;
  int rc;
  if ((rc = lith_rx_int64(rx, &v->bal1, "SELECT balance FROM accounts WHERE id = ?", "i", 1)) != LITH_OK ||
      (rc = lith_rx_int64(rx, &v->bal2, "SELECT balance FROM accounts WHERE id = ?", "i", 2)) != LITH_OK ||
      (rc = lith_rx_int64(rx, &v->held, "SELECT count(*) FROM kv WHERE k = ?", "s", "held")) != LITH_OK ||
      (rc = lith_rx_int64(rx, &v->queued, "SELECT count(*) FROM kv WHERE k = ?", "s", "queued")) != LITH_OK)
    return rc;
  return lith_rx_int64(rx, &v->before, "SELECT count(*) FROM kv WHERE k = ?", "s", "before");
}

typedef struct timed_read {
  lith *db;
  seen v[8];
  int rc[8];
  int n;
  _Atomic int finished;
} timed_read;

static void *timed_read_main(void *arg) {
  timed_read *t = arg;
  for (int i = 0; i < t->n; i++)
    t->rc[i] = lith_read(t->db, read_state, &t->v[i]);
  atomic_store(&t->finished, 1);
  return NULL;
}

static void test_reads_never_wait_for_the_writer(void **state) {
  (void)state;
  lith *db = open_seeded(2);
  assert_int_equal(lith_do(db, t_put_cmd, "before"), LITH_OK);

  /* 1: the writer inside t_gate's command, commands queued behind it */
  t_gate gate;
  t_async q = {0};
  lith_request rq;
  t_gate_close(db, &gate);
  t_submit(db, &rq, t_put_cmd, "queued", &q);
  timed_read t1 = {.db = db, .n = 4};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, timed_read_main, &t1), 0);
  for (int i = 0; i < 5000 && !atomic_load(&t1.finished); i++)
    usleep(1000);
  int finished_while_gated = atomic_load(&t1.finished);
  t_gate_open(&gate);
  pthread_join(th, NULL);
  t_async_wait(&q, 1);
  assert_true(finished_while_gated);
  for (int i = 0; i < t1.n; i++) {
    assert_int_equal(t1.rc[i], LITH_OK);
    assert_int_equal(t1.v[i].before, 1);
    assert_int_equal(t1.v[i].queued, 0);
  }
  assert_int_equal(rq.rc, LITH_OK);

  /* 2: the writer inside a command that has written: BEGIN IMMEDIATE open,
   * uncommitted changes, and another command queued behind */
  hold h;
  _Atomic int hdone = 0;
  memset(&h, 0, sizeof h);
  h.req.fn = hold_cmd;
  h.req.arg = &h;
  h.req.done = hold_done;
  h.req.data = (void *)&hdone;
  assert_int_equal(lith_submit(db, &h.req), LITH_OK);
  while (!atomic_load(&h.entered))
    usleep(100);
  t_async q2 = {0};
  lith_request rq2;
  t_submit(db, &rq2, t_put_cmd, "after-hold", &q2);

  timed_read t2 = {.db = db, .n = 8}; /* four times the pool */
  assert_int_equal(pthread_create(&th, NULL, timed_read_main, &t2), 0);
  for (int i = 0; i < 5000 && !atomic_load(&t2.finished); i++)
    usleep(1000);
  int finished_while_held = atomic_load(&t2.finished);
  int still_held = atomic_load(&h.entered) && atomic_load(&hdone) == 0;
  atomic_store(&h.open, 1);
  pthread_join(th, NULL);
  t_async_wait(&q2, 1);
  for (int i = 0; i < 3000 && atomic_load(&hdone) == 0; i++)
    usleep(1000);
  assert_int_equal(atomic_load(&hdone), 1);
  assert_true(finished_while_held);
  assert_true(still_held);
  for (int i = 0; i < t2.n; i++) {
    assert_int_equal(t2.rc[i], LITH_OK);
    assert_int_equal(t2.v[i].bal1, BAL); /* not the held command's -100 */
    assert_int_equal(t2.v[i].bal2, BAL);
    assert_int_equal(t2.v[i].held, 0);
    assert_int_equal(t2.v[i].queued, 1); /* committed before: visible */
  }
  assert_int_equal(h.req.rc, LITH_OK);
  assert_int_equal(rq2.rc, LITH_OK);

  /* after the batch: every connection sees it */
  for (int i = 0; i < 4; i++) {
    seen v;
    assert_int_equal(lith_read(db, read_state, &v), LITH_OK);
    assert_int_equal(v.bal1, BAL - 100);
    assert_int_equal(v.bal2, BAL + 100);
    assert_int_equal(v.held, 1);
  }
  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM kv WHERE k = 'after-hold'"), 1);
}

/* ---- read-only ------------------------------------------------------------ */

typedef struct write_try {
  int insert_rc, update_rc, create_rc, exec_rc;
  int readonly_flag;
} write_try;

static int try_writes(lith_rx *rx, void *arg) {
  write_try *w = arg;
  sqlite3 *conn = lith_rx_db(rx);
  w->readonly_flag = sqlite3_db_readonly(conn, "main");
  sqlite3_stmt *st = lith_rx_stmt(rx, "INSERT INTO kv(k, v) VALUES ('sneaky', 1)");
  w->insert_rc = st ? sqlite3_step(st) : -1;
  st = lith_rx_stmt(rx, "UPDATE accounts SET balance = 0");
  w->update_rc = st ? sqlite3_step(st) : -1;
  st = lith_rx_stmt(rx, "DELETE FROM accounts");
  int del = st ? sqlite3_step(st) : -1;
  (void)del;
  w->create_rc = sqlite3_exec(conn, "CREATE TABLE sneaky(x)", NULL, NULL, NULL);
  w->exec_rc = sqlite3_exec(conn, "INSERT INTO kv(k, v) VALUES ('sneaky2', 1)", NULL, NULL, NULL);
  return lith_from_sqlite(w->insert_rc);
}

static int count_sneaky(lith_rx *rx, void *arg) {
  int64_t *out = arg;
  int64_t a = 0, b = 0, c = 0;
  int rc;
  if ((rc = lith_rx_int64(rx, &a, "SELECT count(*) FROM kv WHERE k GLOB 'sneaky*'", NULL)) != LITH_OK ||
      (rc = lith_rx_int64(rx, &b, "SELECT sum(balance) FROM accounts", NULL)) != LITH_OK ||
      (rc = lith_rx_int64(rx, &c, "SELECT count(*) FROM sqlite_master WHERE name = 'sneaky'", NULL)) !=
          LITH_OK)
    return rc;
  out[0] = a;
  out[1] = b;
  out[2] = c;
  return LITH_OK;
}

static int count_key(lith_rx *rx, void *arg) {
  const char *k = *(const char **)arg;
  int64_t n = -1;
  int rc = lith_rx_int64(rx, &n, "SELECT count(*) FROM kv WHERE k = ?", "s", k);
  return rc != LITH_OK ? -1 : (int)n;
}

/* Leaves a statement mid-step and fails. */
static int abandon_mid_step(lith_rx *rx, void *arg) {
  (void)arg;
  sqlite3_stmt *st = lith_rx_stmt(rx, "SELECT id FROM accounts ORDER BY id");
  if (!st || sqlite3_step(st) != SQLITE_ROW)
    return LITH_ERROR;
  return LITH_USER + 3;
}

static void test_read_connections_are_read_only(void **state) {
  (void)state;
  lith *db = open_seeded(2);
  for (int i = 0; i < 3; i++) { /* both connections, and one again */
    write_try w;
    memset(&w, 0, sizeof w);
    int rc = lith_read(db, try_writes, &w);
    assert_int_equal(rc, LITH_READONLY);
    assert_int_equal(w.readonly_flag, 1);
    assert_int_equal(w.insert_rc & 0xff, SQLITE_READONLY);
    assert_int_equal(w.update_rc & 0xff, SQLITE_READONLY);
    assert_int_not_equal(w.create_rc, SQLITE_OK);
    assert_int_equal(w.exec_rc & 0xff, SQLITE_READONLY);
  }
  int64_t c[3];
  assert_int_equal(lith_read(db, count_sneaky, c), LITH_OK);
  assert_int_equal(c[0], 0);
  assert_int_equal(c[1], NACC * BAL);
  assert_int_equal(c[2], 0);

  /* a read that fails with a statement mid-step ends its transaction: the
   * next reads, on every connection, see the next commit */
  for (int i = 0; i < 2; i++)
    assert_int_equal(lith_read(db, abandon_mid_step, NULL), LITH_USER + 3);
  assert_int_equal(lith_do(db, t_put_cmd, "fresh"), LITH_OK);
  const char *k = "fresh";
  for (int i = 0; i < 4; i++)
    assert_int_equal(lith_read(db, count_key, &k), 1);

  assert_int_equal(lith_close(db), LITH_OK);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM kv WHERE k GLOB 'sneaky*'"), 0);
  assert_int_equal(t_query_int(DB, "SELECT sum(balance) FROM accounts"), NACC * BAL);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM accounts"), NACC);
  assert_int_equal(t_query_int(DB, "SELECT count(*) FROM sqlite_master WHERE name = 'sneaky'"), 0);
}

/* ---- lith_rx_* helpers -------------------------------------------------- */

typedef struct helpers {
  int rc_bind, rc_norow, rc_bad, rc_multi;
  int64_t v_bind, v_text, v_double;
  char msg_norow[128], msg_bad[128];
  sqlite3_stmt *st1, *st2, *bad_st;
  int st_busy_again;
  int null_bound;
  sqlite3 *conn;
} helpers;

static int use_helpers(lith_rx *rx, void *arg) {
  helpers *h = arg;
  h->conn = lith_rx_db(rx);
  h->rc_bind =
      lith_rx_int64(rx, &h->v_bind, "SELECT balance + ? FROM accounts WHERE id = ?", "iI", 5, (int64_t)3);
  lith_rx_int64(rx, &h->v_text, "SELECT length(?)", "s", "hello");
  lith_rx_int64(rx, &h->v_double, "SELECT CAST(? * 4 AS INTEGER)", "d", 2.5);
  int64_t dummy = 77;
  h->rc_norow = lith_rx_int64(rx, &dummy, "SELECT id FROM accounts WHERE id < 0", NULL);
  snprintf(h->msg_norow, sizeof h->msg_norow, "%s", lith_errmsg(NULL));
  h->rc_bad = lith_rx_int64(rx, &dummy, "SELECT nonsense FROM nowhere", NULL);
  snprintf(h->msg_bad, sizeof h->msg_bad, "%s", lith_errmsg(NULL));
  h->rc_multi = lith_rx_int64(rx, &dummy, "SELECT 1; SELECT 2", NULL);
  h->bad_st = lith_rx_stmt(rx, "SELEKT");

  h->st1 = lith_rx_stmt(rx, "SELECT id FROM accounts WHERE id >= ? ORDER BY id");
  if (!h->st1)
    return LITH_ERROR;
  sqlite3_bind_int(h->st1, 1, 4);
  if (sqlite3_step(h->st1) != SQLITE_ROW)
    return LITH_ERROR;
  h->st2 = lith_rx_stmt(rx, "SELECT id FROM accounts WHERE id >= ? ORDER BY id");
  h->st_busy_again = sqlite3_stmt_busy(h->st2);
  /* unbound: id >= NULL is no row */
  h->null_bound = sqlite3_step(h->st2) == SQLITE_DONE;
  return LITH_USER + 9;
}

static int same_stmt(lith_rx *rx, void *arg) {
  sqlite3_stmt **out = arg;
  *out = lith_rx_stmt(rx, "SELECT count(*) FROM accounts");
  return *out && sqlite3_step(*out) == SQLITE_ROW && sqlite3_column_int(*out, 0) == NACC ? LITH_OK
                                                                                         : LITH_ERROR;
}

static lith *g_db;

static int read_from_command(lith_tx *tx, void *arg) {
  (void)tx;
  int *rc = arg;
  *rc = lith_read(g_db, same_stmt, &(sqlite3_stmt *){NULL});
  return LITH_OK;
}

static void test_rx_helpers(void **state) {
  (void)state;
  lith *db = open_seeded(1);
  helpers h;
  memset(&h, 0, sizeof h);
  assert_int_equal(lith_read(db, use_helpers, &h), LITH_USER + 9); /* fn's result */
  assert_int_equal(h.rc_bind, LITH_OK);
  assert_int_equal(h.v_bind, BAL + 5);
  assert_int_equal(h.v_text, 5);
  assert_int_equal(h.v_double, 10);
  assert_int_equal(h.rc_norow, LITH_ERROR);
  assert_non_null(strstr(h.msg_norow, "no row"));
  assert_int_equal(h.rc_bad, LITH_ERROR);
  assert_non_null(strstr(h.msg_bad, "no such"));
  assert_int_equal(h.rc_multi, LITH_MISUSE);
  assert_null(h.bad_st);
  assert_ptr_not_equal(h.st1, h.st2); /* st1 was mid-step: a second statement */
  assert_false(h.st_busy_again);
  assert_true(h.null_bound);

  /* one connection: its cache keeps the statement across reads */
  sqlite3_stmt *a = NULL, *b = NULL;
  assert_int_equal(lith_read(db, same_stmt, &a), LITH_OK);
  assert_int_equal(lith_read(db, same_stmt, &b), LITH_OK);
  assert_non_null(a);
  assert_ptr_equal(a, b);
  assert_ptr_equal(sqlite3_db_handle(a), h.conn);

  /* refusals */
  assert_int_equal(lith_read(db, NULL, NULL), LITH_MISUSE);
  assert_true(strlen(lith_errmsg(NULL)) > 0);
  assert_int_equal(lith_read(NULL, same_stmt, &a), LITH_MISUSE);
  g_db = db;
  int inner = LITH_OK;
  assert_int_equal(lith_do(db, read_from_command, &inner), LITH_OK);
  assert_int_equal(inner, LITH_MISUSE);
  assert_int_equal(lith_close(db), LITH_OK);
}

/* ---- more readers than connections -------------------------------------- */

#define MAX_CONN 8

typedef struct crowd {
  lith *db;
  pthread_mutex_t mu;
  sqlite3 *active[MAX_CONN];
  int nactive, max_active;
  int shared_conn; /* two reads on one connection at once */
  _Atomic int ok, failed;
} crowd;

static int crowded_read(lith_rx *rx, void *arg) {
  crowd *c = arg;
  sqlite3 *conn = lith_rx_db(rx);
  pthread_mutex_lock(&c->mu);
  for (int i = 0; i < c->nactive; i++)
    if (c->active[i] == conn)
      c->shared_conn = 1;
  if (c->nactive < MAX_CONN)
    c->active[c->nactive++] = conn;
  if (c->nactive > c->max_active)
    c->max_active = c->nactive;
  pthread_mutex_unlock(&c->mu);

  int64_t n = 0;
  int rc = lith_rx_int64(rx, &n, "SELECT count(*) FROM accounts", NULL);
  usleep(3000);

  pthread_mutex_lock(&c->mu);
  for (int i = 0; i < c->nactive; i++)
    if (c->active[i] == conn) {
      c->active[i] = c->active[--c->nactive];
      break;
    }
  pthread_mutex_unlock(&c->mu);
  return rc == LITH_OK && n == NACC ? LITH_OK : LITH_ERROR;
}

static void *crowd_main(void *arg) {
  crowd *c = arg;
  for (int i = 0; i < 5; i++) {
    if (lith_read(c->db, crowded_read, c) == LITH_OK)
      atomic_fetch_add(&c->ok, 1);
    else
      atomic_fetch_add(&c->failed, 1);
  }
  return NULL;
}

static void test_more_readers_than_connections_wait(void **state) {
  (void)state;
  enum { THREADS = 8, READERS = 2 };
  crowd c;
  memset(&c, 0, sizeof c);
  pthread_mutex_init(&c.mu, NULL);
  c.db = open_seeded(READERS);
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++)
    assert_int_equal(pthread_create(&th[i], NULL, crowd_main, &c), 0);
  for (int i = 0; i < THREADS; i++)
    pthread_join(th[i], NULL);
  assert_int_equal(atomic_load(&c.ok), THREADS * 5);
  assert_int_equal(atomic_load(&c.failed), 0);
  assert_false(c.shared_conn);
  assert_true(c.max_active <= READERS);
  assert_int_equal(c.max_active, READERS); /* 8 threads, 3 ms each: the pool was full */
  assert_int_equal(lith_close(c.db), LITH_OK);
  pthread_mutex_destroy(&c.mu);
}

/* ---- lith_interrupt ------------------------------------------------------ */

typedef struct endless {
  _Atomic int started;
  int step_rc, after_rc;
} endless;

/* A query that never ends by itself, then (once interrupted) a short one:
 * the interrupt hits the statement running, not the read's next one. */
static int endless_read(lith_rx *rx, void *arg) {
  endless *e = arg;
  sqlite3_stmt *st = lith_rx_stmt(
      rx, "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n");
  if (!st)
    return LITH_ERROR;
  atomic_store(&e->started, 1);
  e->step_rc = sqlite3_step(st);
  int64_t n = 0;
  e->after_rc = lith_rx_int64(rx, &n, "SELECT count(*) FROM accounts", NULL);
  return lith_from_sqlite(e->step_rc);
}

static int balance1_read(lith_rx *rx, void *arg) {
  endless *e = arg;
  int64_t b = 0;
  int rc = lith_rx_int64(rx, &b, "SELECT balance FROM accounts WHERE id = 1", NULL);
  e->after_rc = (int)b;
  return rc;
}

typedef struct read_job {
  lith *db;
  endless e;
  int rc;
} read_job;

static void *endless_main(void *arg) {
  read_job *j = arg;
  j->rc = lith_read(j->db, endless_read, &j->e);
  return NULL;
}

static int add_one_cmd(lith_tx *tx, void *arg) {
  (void)arg;
  return lith_tx_exec(tx, "UPDATE accounts SET balance = balance + 1 WHERE id = 1", NULL);
}

/* lith_interrupt stops a read's running statement (LITH_INTERRUPTED through
 * the callback) and leaves commands and later reads alone. */
static void test_interrupt_stops_a_read(void **state) {
  (void)state;
  lith *db = open_seeded(2);
  read_job j;
  memset(&j, 0, sizeof j);
  j.db = db;
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, endless_main, &j), 0);
  while (!atomic_load(&j.e.started))
    usleep(1000);
  usleep(50 * 1000);
  assert_int_equal(lith_do(db, add_one_cmd, NULL), LITH_OK); /* the writer is not held */
  int64_t t0 = lith_clock_ms();
  assert_int_equal(lith_interrupt(db), LITH_OK);
  pthread_join(th, NULL);
  int64_t took = lith_clock_ms() - t0;
  print_message("the read ended %lld ms after lith_interrupt\n", (long long)took);
  assert_true(took < 1000);
  assert_int_equal(j.e.step_rc, SQLITE_INTERRUPT);
  assert_int_equal(j.e.after_rc, LITH_OK);
  assert_int_equal(j.rc, LITH_INTERRUPTED);
  assert_string_equal(lith_errstr(LITH_INTERRUPTED), "interrupted");
  /* Nothing reading: a no-op; reads and commands go on. */
  assert_int_equal(lith_interrupt(db), LITH_OK);
  assert_int_equal(lith_do(db, add_one_cmd, NULL), LITH_OK);
  assert_int_equal(lith_read(db, balance1_read, &j.e), LITH_OK);
  assert_int_equal(j.e.after_rc, BAL + 2);
  assert_int_equal(lith_close(db), LITH_OK);
}

/* ---- lith_read_deadline and the pool's figures ---------------------------- */

typedef struct holder {
  lith *db;
  _Atomic int holding, release;
  int rc;
} holder;

/* Keeps its reader until told to give it back. */
static int hold_read(lith_rx *rx, void *arg) {
  holder *h = arg;
  int64_t n = 0;
  int rc = lith_rx_int64(rx, &n, "SELECT count(*) FROM accounts", NULL);
  atomic_store(&h->holding, 1);
  while (!atomic_load(&h->release))
    usleep(1000);
  return rc;
}

static void *holder_main(void *arg) {
  holder *h = arg;
  h->rc = lith_read(h->db, hold_read, h);
  return NULL;
}

static int count_read(lith_rx *rx, void *arg) {
  int *ran = arg;
  int64_t n = 0;
  int rc = lith_rx_int64(rx, &n, "SELECT count(*) FROM accounts", NULL);
  *ran += rc == LITH_OK && n == NACC;
  return rc;
}

typedef struct waiter {
  lith *db;
  int64_t deadline;
  int ran, rc;
} waiter;

static void *waiter_main(void *arg) {
  waiter *w = arg;
  w->rc = lith_read_deadline(w->db, count_read, &w->ran, w->deadline);
  return NULL;
}

static uint64_t lat_sum(const uint64_t *lat) {
  uint64_t n = 0;
  for (int i = 0; i < LITH_LAT_BUCKETS; i++)
    n += lat[i];
  return n;
}

/* With the one reader held: lith_read_deadline gives up at its deadline
 * (LITH_QUEUE_FULL, fn not run), at once when the deadline is past, and
 * gets the reader when it comes back in time; lith_stats counts each. */
static void test_read_deadline_and_pool_figures(void **state) {
  (void)state;
  lith *db = open_seeded(1);
  lith_stats st;
  int ran = 0;

  lith_stats_get(db, &st);
  assert_int_equal(st.readers, 1);
  assert_int_equal(st.readers_in_use, 0);
  uint64_t reads0 = st.reads; /* what opening did, if anything */
  assert_int_equal(st.read_waits, 0);
  assert_int_equal(st.read_timeouts, 0);

  /* a free reader: a deadline already past does not matter */
  assert_int_equal(lith_read_deadline(db, count_read, &ran, 0), LITH_OK);
  assert_int_equal(ran, 1);
  lith_stats_get(db, &st);
  assert_int_equal(st.reads, reads0 + 1);
  assert_int_equal(st.read_waits, 0);
  assert_int_equal(st.readers_in_use, 0);

  holder h;
  memset(&h, 0, sizeof h);
  h.db = db;
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, holder_main, &h), 0);
  while (!atomic_load(&h.holding))
    usleep(1000);
  lith_stats_get(db, &st);
  assert_int_equal(st.readers_in_use, 1);

  /* past deadline, no free reader: at once (the fastest of five tries
   * under 50 ms: a busy machine can keep one try off the CPU that long,
   * a call that waits waits in every try) */
  int64_t fastest = INT64_MAX, t0 = 0;
  for (int i = 0; i < 5; i++) {
    t0 = lith_clock_ms();
    assert_int_equal(lith_read_deadline(db, count_read, &ran, t0 - 5), LITH_QUEUE_FULL);
    assert_non_null(strstr(lith_errmsg(NULL), "stayed in use until the deadline"));
    if (lith_clock_ms() - t0 < fastest)
      fastest = lith_clock_ms() - t0;
  }
  assert_true(fastest < 50);
  /* a deadline 150 ms away: waits it out */
  t0 = lith_clock_ms();
  assert_int_equal(lith_read_deadline(db, count_read, &ran, t0 + 150), LITH_QUEUE_FULL);
  int64_t took = lith_clock_ms() - t0;
  print_message("gave up after %lld ms (deadline 150 ms)\n", (long long)took);
  assert_true(took >= 149);
  assert_true(took < 3000);
  assert_int_equal(ran, 1); /* fn never ran */

  lith_stats_get(db, &st);
  assert_int_equal(st.read_waits, 6); /* five at once, one for 150 ms */
  assert_int_equal(st.read_timeouts, 6);
  assert_true(st.read_wait_ns_total >= 149 * 1000000ull);
  assert_int_equal(st.reads, reads0 + 2); /* the holder's counts */

  /* a waiter with time to spare gets the reader once it is given back */
  waiter w = {db, lith_clock_ms() + 10000, 0, -1};
  pthread_t tw;
  assert_int_equal(pthread_create(&tw, NULL, waiter_main, &w), 0);
  /* until it waits (50 ms alone were not always enough on a busy machine:
   * the reader came back before the waiter had looked, and no wait was
   * counted), then 50 ms more */
  for (int i = 0; i < 10000 && st.read_waits < 7; i++) {
    usleep(1000);
    lith_stats_get(db, &st);
  }
  usleep(50 * 1000);
  atomic_store(&h.release, 1);
  pthread_join(th, NULL);
  pthread_join(tw, NULL);
  assert_int_equal(h.rc, LITH_OK);
  assert_int_equal(w.rc, LITH_OK);
  assert_int_equal(w.ran, 1);

  lith_stats_get(db, &st);
  assert_int_equal(st.reads, reads0 + 3);
  assert_int_equal(st.read_waits, 7);
  assert_int_equal(st.read_timeouts, 6);
  assert_int_equal(st.readers_in_use, 0);
  /* every call that got a reader or gave up, once: the waits in buckets of
   * 1/8 of their size at most (the three waits: two of 50 ms and more, one
   * past deadline of a few µs at most) */
  assert_int_equal(lat_sum(st.read_wait_lat), st.reads + st.read_timeouts);
  uint64_t long_waits = 0;
  for (int i = 0; i < LITH_LAT_BUCKETS; i++)
    if (lith_lat_bucket_upper_ns(i) > 40 * 1000000ull)
      long_waits += st.read_wait_lat[i];
  assert_true(long_waits >= 2); /* a past-deadline try a busy machine held up may count too */
  assert_true(lith_lat_quantile_ns(st.read_wait_lat, NULL, 1.0) >= 149 * 1000000ull);

  /* the final figures outlive the pool (lith_shutdown closes it) */
  assert_int_equal(lith_shutdown(db), LITH_OK);
  lith_stats st2;
  lith_stats_get(db, &st2);
  assert_int_equal(st2.reads, st.reads);
  assert_int_equal(st2.read_timeouts, 6);
  assert_int_equal(lith_read_deadline(db, count_read, &ran, lith_clock_ms() + 100), LITH_CLOSED);
  assert_int_equal(lith_close(db), LITH_OK);
}

/* Many threads on two readers, each with a short deadline: every call ends
 * by its deadline or reads, the counts add up, no reader is left in use. */
typedef struct rush {
  lith *db;
  _Atomic int ok, full, other;
} rush;

static int slow_read(lith_rx *rx, void *arg) {
  (void)arg;
  int64_t n = 0;
  int rc = lith_rx_int64(rx, &n, "SELECT count(*) FROM accounts", NULL);
  usleep(2000);
  return rc;
}

static void *rush_main(void *arg) {
  rush *r = arg;
  for (int i = 0; i < 20; i++) {
    int rc = lith_read_deadline(r->db, slow_read, NULL, lith_clock_ms() + 3);
    atomic_fetch_add(rc == LITH_OK ? &r->ok : rc == LITH_QUEUE_FULL ? &r->full : &r->other, 1);
  }
  return NULL;
}

static void test_read_deadline_under_contention(void **state) {
  (void)state;
  enum { THREADS = 8 };
  rush r;
  memset(&r, 0, sizeof r);
  r.db = open_seeded(2);
  lith_stats st0, st;
  lith_stats_get(r.db, &st0);
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++)
    assert_int_equal(pthread_create(&th[i], NULL, rush_main, &r), 0);
  for (int i = 0; i < THREADS; i++)
    pthread_join(th[i], NULL);
  lith_stats_get(r.db, &st);
  print_message("%d read, %d gave up\n", atomic_load(&r.ok), atomic_load(&r.full));
  assert_int_equal(atomic_load(&r.other), 0);
  assert_int_equal(atomic_load(&r.ok) + atomic_load(&r.full), THREADS * 20);
  assert_true(atomic_load(&r.ok) > 0);
  assert_true(atomic_load(&r.full) > 0); /* 8 threads, 2 readers of 2 ms, 3 ms each */
  assert_int_equal(st.reads - st0.reads, (uint64_t)atomic_load(&r.ok));
  assert_int_equal(st.read_timeouts, (uint64_t)atomic_load(&r.full));
  assert_true(st.read_waits >= st.read_timeouts);
  assert_int_equal(st.readers_in_use, 0);
  assert_int_equal(lat_sum(st.read_wait_lat) - lat_sum(st0.read_wait_lat), THREADS * 20);
  assert_int_equal(lith_close(r.db), LITH_OK);
}

/* ---- the hold ------------------------------------------------------------ */

typedef struct held {
  lith__pool *p;
  int64_t deadline;
  _Atomic int64_t ran_at; /* lith_clock_ms when fn ran; 0: not yet */
  _Atomic int running;    /* lith__pool_running as fn saw it */
  _Atomic int release;    /* fn returns once set (blocking reads only) */
  int block;
  int rc;
} held;

static int held_fn(lith_rx *rx, void *arg) {
  held *h = arg;
  (void)rx;
  atomic_store(&h->ran_at, lith_clock_ms());
  atomic_store(&h->running, lith__pool_running(h->p));
  while (h->block && !atomic_load(&h->release))
    usleep(1000);
  return LITH_OK;
}

static void *held_thread(void *arg) {
  held *h = arg;
  h->rc = lith__pool_read(h->p, held_fn, h, h->deadline);
  return NULL;
}

static void test_hold(void **state) {
  (void)state;
  lith_options opt;
  t_bank_options(&opt);
  opt.readers = 2;
  lith *db = t_open_fresh(DB, &opt);
  assert_int_equal(lith_close(db), LITH_OK);
  lith__read_stats st;
  memset(&st, 0, sizeof st);
  lith__pool *p = NULL;
  assert_int_equal(lith__pool_open(DB, &opt, &st, &p), LITH_OK);

  /* a read already running goes on; a new one waits for the release */
  held run = {.p = p, .deadline = -1, .block = 1}, wait = {.p = p, .deadline = -1};
  pthread_t t1, t2;
  assert_int_equal(pthread_create(&t1, NULL, held_thread, &run), 0);
  while (atomic_load(&run.ran_at) == 0)
    usleep(1000);
  int64_t t0 = lith_clock_ms();
  lith__pool_hold(p, t0 + 10000);
  assert_int_equal(lith__pool_running(p), 1);
  assert_int_equal(pthread_create(&t2, NULL, held_thread, &wait), 0);
  usleep(200 * 1000);
  assert_int_equal(atomic_load(&wait.ran_at), 0); /* held, though a connection is free */
  assert_int_equal(atomic_load(&st.held), 1);
  assert_int_equal(lith__pool_running(p), 1); /* it holds no connection */
  atomic_store(&run.release, 1);
  pthread_join(t1, NULL);
  assert_int_equal(run.rc, LITH_OK);
  assert_int_equal(lith__pool_running(p), 0);
  usleep(50 * 1000);
  assert_int_equal(atomic_load(&wait.ran_at), 0); /* the running read ending is no release */
  lith__pool_release(p);
  pthread_join(t2, NULL);
  assert_int_equal(wait.rc, LITH_OK);
  assert_true(atomic_load(&wait.ran_at) - t0 >= 250);
  assert_true(atomic_load(&wait.ran_at) - t0 < 5000);
  assert_int_equal(atomic_load(&wait.running), 1);
  assert_true(atomic_load(&st.held_ns_total) >= 200 * 1000000ULL);

  /* never released: the hold's bound lets it go */
  held bound = {.p = p, .deadline = -1};
  t0 = lith_clock_ms();
  lith__pool_hold(p, t0 + 200);
  held_thread(&bound);
  assert_int_equal(bound.rc, LITH_OK);
  assert_true(atomic_load(&bound.ran_at) - t0 >= 190);
  assert_true(atomic_load(&bound.ran_at) - t0 < 3000);

  /* the read's own deadline, sooner than the hold's: it reads then */
  held soon = {.p = p};
  t0 = lith_clock_ms();
  soon.deadline = t0 + 150;
  lith__pool_hold(p, t0 + 10000);
  held_thread(&soon);
  assert_int_equal(soon.rc, LITH_OK);
  assert_true(atomic_load(&soon.ran_at) - t0 >= 140);
  assert_true(atomic_load(&soon.ran_at) - t0 < 3000);
  lith__pool_release(p);
  assert_int_equal(atomic_load(&st.held), 3);
  assert_int_equal(atomic_load(&st.timeouts), 0);

  /* the check that the reads are done moves the hold's end only then: with
   * one running, nothing changes (a read now waits for the short bound) */
  held run2 = {.p = p, .deadline = -1, .block = 1}, late = {.p = p, .deadline = -1};
  assert_int_equal(pthread_create(&t1, NULL, held_thread, &run2), 0);
  while (atomic_load(&run2.ran_at) == 0)
    usleep(1000);
  t0 = lith_clock_ms();
  lith__pool_hold(p, t0 + 150);
  assert_int_equal(lith__pool_hold_drained(p, t0 + 10000), 0);
  held_thread(&late);
  assert_true(atomic_load(&late.ran_at) - t0 >= 140);
  assert_true(atomic_load(&late.ran_at) - t0 < 3000);
  atomic_store(&run2.release, 1);
  pthread_join(t1, NULL);
  /* with none running it holds past the old bound, until the release */
  held after = {.p = p, .deadline = -1};
  t0 = lith_clock_ms();
  lith__pool_hold(p, t0 + 50);
  assert_int_equal(lith__pool_hold_drained(p, t0 + 10000), 1);
  assert_int_equal(pthread_create(&t2, NULL, held_thread, &after), 0);
  usleep(250 * 1000);
  assert_int_equal(atomic_load(&after.ran_at), 0);
  lith__pool_release(p);
  pthread_join(t2, NULL);
  assert_true(atomic_load(&after.ran_at) - t0 >= 240);
  assert_int_equal(atomic_load(&st.held), 5);

  /* no hold: at once, and not counted */
  held now = {.p = p, .deadline = -1};
  t0 = lith_clock_ms();
  held_thread(&now);
  assert_true(atomic_load(&now.ran_at) - t0 < 1000);
  assert_int_equal(atomic_load(&st.held), 5);
  lith__pool_close(p);
  t_remove_db(DB);
}

/* ---- too old, and backups ------------------------------------------------ */

typedef struct aged {
  lith__pool *p;
  _Atomic int started, release, saw_old, old_at_end;
  int rc;
} aged;

static int aged_fn(lith_rx *rx, void *arg) {
  aged *a = arg;
  atomic_store(&a->started, 1);
  while (!atomic_load(&a->release)) {
    if (lith_rx_too_old(rx))
      atomic_store(&a->saw_old, 1);
    usleep(1000);
  }
  atomic_store(&a->old_at_end, lith_rx_too_old(rx));
  return LITH_OK;
}

static void *aged_thread(void *arg) {
  aged *a = arg;
  a->rc = lith__pool_read(a->p, aged_fn, a, -1);
  return NULL;
}

typedef struct backup_wait {
  lith__pool *p;
  _Atomic int64_t began_at; /* lith_clock_ms once lith__pool_backup_begin returned */
} backup_wait;

static void *backup_wait_thread(void *arg) {
  backup_wait *b = arg;
  lith__pool_backup_begin(b->p);
  atomic_store(&b->began_at, lith_clock_ms());
  lith__pool_backup_end(b->p);
  return NULL;
}

static void test_too_old_and_backups(void **state) {
  (void)state;
  lith_options opt;
  t_bank_options(&opt);
  opt.readers = 3;
  lith *db = t_open_fresh(DB, &opt);
  assert_int_equal(lith_close(db), LITH_OK);
  lith__read_stats st;
  memset(&st, 0, sizeof st);
  lith__pool *p = NULL;
  assert_int_equal(lith__pool_open(DB, &opt, &st, &p), LITH_OK);

  /* an old read and a young one: only the old one is marked */
  aged old = {.p = p}, young = {.p = p};
  pthread_t t1, t2;
  assert_int_equal(pthread_create(&t1, NULL, aged_thread, &old), 0);
  while (!atomic_load(&old.started))
    usleep(1000);
  usleep(60 * 1000);
  int64_t cut = lith_clock_ms() - 20; /* after the old one began, before the young one */
  assert_int_equal(pthread_create(&t2, NULL, aged_thread, &young), 0);
  while (!atomic_load(&young.started))
    usleep(1000);
  assert_int_equal(lith__pool_too_old_running(p), 0);
  assert_int_equal(lith__pool_mark_too_old(p, cut), 1);
  assert_int_equal(lith__pool_too_old_running(p), 1);
  assert_int_equal(atomic_load(&st.too_old), 1);
  while (!atomic_load(&old.saw_old))
    usleep(1000);
  usleep(20 * 1000);
  assert_int_equal(atomic_load(&young.saw_old), 0);
  /* every one: the young one now, the old one not counted twice */
  assert_int_equal(lith__pool_mark_too_old(p, INT64_MAX), 1);
  assert_int_equal(lith__pool_mark_too_old(p, INT64_MAX), 0);
  assert_int_equal(lith__pool_too_old_running(p), 2);
  assert_int_equal(atomic_load(&st.too_old), 2);
  atomic_store(&old.release, 1);
  pthread_join(t1, NULL);
  assert_int_equal(old.rc, LITH_OK);
  assert_int_equal(atomic_load(&old.old_at_end), 1); /* it stays 1 to the end */
  assert_int_equal(lith__pool_too_old_running(p), 1);
  atomic_store(&young.release, 1);
  pthread_join(t2, NULL);
  assert_int_equal(atomic_load(&young.old_at_end), 1);
  assert_int_equal(lith__pool_too_old_running(p), 0);
  /* the connections' next reads are not too old; nothing runs to mark */
  for (int i = 0; i < 3; i++) {
    aged next = {.p = p};
    atomic_store(&next.release, 1);
    aged_thread(&next);
    assert_int_equal(atomic_load(&next.old_at_end), 0);
  }
  assert_int_equal(lith__pool_mark_too_old(p, INT64_MAX), 0);
  assert_int_equal(atomic_load(&st.too_old), 2);

  /* a backup running: no hold; once it ended, a hold again */
  lith__pool_backup_begin(p);
  assert_int_equal(lith__pool_hold(p, lith_clock_ms() + 10000), 0);
  held free_read = {.p = p, .deadline = -1}; /* the refused hold holds nothing */
  int64_t t0 = lith_clock_ms();
  held_thread(&free_read);
  assert_true(atomic_load(&free_read.ran_at) - t0 < 1000);
  lith__pool_backup_end(p);
  assert_int_equal(atomic_load(&st.held), 0);

  /* a backup begun during a hold waits for the release */
  t0 = lith_clock_ms();
  assert_int_equal(lith__pool_hold(p, t0 + 10000), 1);
  backup_wait bw = {.p = p};
  assert_int_equal(pthread_create(&t1, NULL, backup_wait_thread, &bw), 0);
  usleep(150 * 1000);
  assert_int_equal(atomic_load(&bw.began_at), 0);
  lith__pool_release(p);
  pthread_join(t1, NULL);
  assert_true(atomic_load(&bw.began_at) - t0 >= 140);
  assert_true(atomic_load(&bw.began_at) - t0 < 5000);
  /* or for the hold's bound */
  backup_wait bw2 = {.p = p};
  t0 = lith_clock_ms();
  assert_int_equal(lith__pool_hold(p, t0 + 150), 1);
  backup_wait_thread(&bw2);
  assert_true(atomic_load(&bw2.began_at) - t0 >= 140);
  assert_true(atomic_load(&bw2.began_at) - t0 < 5000);
  lith__pool_release(p);
  assert_int_equal(atomic_load(&st.held), 0); /* backups are not reads */
  lith__pool_close(p);
  t_remove_db(DB);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reads_see_whole_batches),
      cmocka_unit_test(test_reads_never_wait_for_the_writer),
      cmocka_unit_test(test_read_connections_are_read_only),
      cmocka_unit_test(test_rx_helpers),
      cmocka_unit_test(test_more_readers_than_connections_wait),
      cmocka_unit_test(test_interrupt_stops_a_read),
      cmocka_unit_test(test_read_deadline_and_pool_figures),
      cmocka_unit_test(test_read_deadline_under_contention),
      cmocka_unit_test(test_hold),
      cmocka_unit_test(test_too_old_and_backups),
  };
  return cmocka_run_group_tests_name("sqlite/read_pool", tests, NULL, NULL);
}
