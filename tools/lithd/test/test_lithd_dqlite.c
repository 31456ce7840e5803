/*
 * test_lithd_dqlite — lithd --dqlite (issue 14) end to end: three lith-node
 * processes on loopback (dqlite/test/nodes.h) and lithd in front of them.
 *   - the HTTP API round trip: --schema applied once through the cluster
 *     (a second lithd with the same file starts and applies nothing),
 *     /v1/do with every value type, /v1/batch (each command its own
 *     outcome), named commands, /v1/query (the leader; writes refused),
 *     what --dqlite refuses (--db, --litestream); a backup is served
 *     (test_lithd_dqlite_backup tests it);
 *   - 32 clients doing money transfers over HTTP (a named command writing
 *     a ledger row keyed by client and sequence number) while the leader
 *     is SIGKILLed: lithd answers 200 again within a few seconds of the
 *     kill; every 200 is in the ledger on the surviving nodes, every
 *     answer that says "not committed" (or 409) is not, money is
 *     conserved and each account's balance is what its ledger rows say,
 *     no ledger row twice; the killed node restarts and catches up (a
 *     write commits with it and the leader alone);
 *   - a follower SIGKILLed under the same load changes no answer (only
 *     200 and 409);
 *   - all nodes but one killed: every command is answered 503 "not
 *     committed" or 504 "outcome_unknown" (never 200), and none of the 503s
 *     is in the ledger once the nodes are back (a 504 may be: it was seen
 *     committed);
 *   - an interactive transaction (Hrana, across requests) when the leader
 *     is SIGKILLed: its next request fails SQLITE_BUSY, nothing of it is
 *     kept, and a new transaction commits on the next leader;
 *   - a measurement: 32 clients for LITHD_DQ_MEASURE_S seconds (default 3)
 *     on the healthy cluster, commands/s printed.
 * The ledger is read with the dqlite client on the leader (dqlite/client.h).
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

#include "child.h"
#include "client.h"
#include "nodes.h"

#define NCLIENT 32
#define NACC 16
#define START_BALANCE 1000
#define MAXSEQ 4096
#define FAILOVER_MS 3000

static t_node nodes[3];
static char all[256];
static struct tl_child lithd;

static const char *schema_sql =
    "CREATE TABLE accounts(id INTEGER PRIMARY KEY, balance INTEGER NOT NULL CHECK (balance >= 0));\n"
    "CREATE TABLE ledger(id INTEGER PRIMARY KEY, client INTEGER NOT NULL, seq INTEGER NOT NULL,\n"
    "  src INTEGER NOT NULL, dst INTEGER NOT NULL, amount INTEGER NOT NULL, UNIQUE (client, seq));\n"
    "-- step 2\n"
    "CREATE TABLE kv(k TEXT PRIMARY KEY, v);\n"
    "CREATE TABLE parent(id INTEGER PRIMARY KEY);\n"
    "CREATE TABLE child(pid INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED);\n";

static const char *commands_sql = "-- name: transfer\n"
                                  "-- Move :amount from :src to :dst, once per (client, seq).\n"
                                  "UPDATE accounts SET balance = balance - :amount WHERE id = :src;\n"
                                  "UPDATE accounts SET balance = balance + :amount WHERE id = :dst;\n"
                                  "INSERT INTO ledger(client, seq, src, dst, amount)\n"
                                  "  VALUES (:client, :seq, :src, :dst, :amount);\n";

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  assert_true(fputs(text, f) >= 0);
  assert_int_equal(fclose(f), 0);
}

/* ---- The cluster, read directly ---- */

/* A connection to the leader that answered a read (after a kill the first
 * leader found may still lose an election). */
static lith__dq_conn *leader_conn(uint32_t *db) {
  char err[512];
  lith__dq_conn *c = t_leader_conn(all, "main", "SELECT count(*) FROM accounts", 15000, db, err, sizeof err);
  if (c == NULL)
    fail_msg("no leader answering: %s", err);
  return c;
}

static int64_t q_int(lith__dq_conn *c, uint32_t db, const char *sql) {
  char err[512];
  int64_t v = 0;
  if (t_query_int(c, db, sql, &v, err, sizeof err) != 0)
    fail_msg("%s", err);
  return v;
}

static int leader_index(void) {
  int i = t_leader_index(nodes, 3, all);
  assert_true(i >= 0);
  return i;
}

static void start_missing(void) { assert_int_equal(t_nodes_start_missing(nodes, 3, all, 15000), 0); }

/* ---- Transfers over HTTP ---- */

enum { O_NONE, O_OK, O_REFUSED, O_NOT_COMMITTED, O_UNKNOWN, O_OTHER };

typedef struct client {
  int id;
  int nseq;
  unsigned char outcome[MAXSEQ];
  int64_t sent[MAXSEQ]; /* ms_now when sent */
  int64_t answered[MAXSEQ];
} client;

static client clients[NCLIENT];
static atomic_int stop_flag;
static atomic_int statuses[600];

static void *client_main(void *arg) {
  client *k = arg;
  struct tl_conn conn;
  unsigned seed = (unsigned)k->id * 7919u + 1;
  tl_conn_init(&conn, &lithd);
  while (!atomic_load(&stop_flag) && k->nseq < MAXSEQ) {
    int s = k->nseq++, src = (int)(rand_r(&seed) % NACC) + 1, dst = (int)(rand_r(&seed) % NACC) + 1;
    char body[256];
    struct tl_resp r;
    if (dst == src)
      dst = dst % NACC + 1;
    snprintf(body, sizeof body, "{\"params\":{\"client\":%d,\"seq\":%d,\"src\":%d,\"dst\":%d,\"amount\":%d}}",
             k->id, s, src, dst, (int)(rand_r(&seed) % 200) + 1);
    k->sent[s] = t_ms_now();
    int rc = tl_conn_request(&conn, "POST", "/v1/commands/transfer", NULL, body, &r, 30000);
    k->answered[s] = t_ms_now();
    if (rc != TL_OK) {
      k->outcome[s] = O_UNKNOWN; /* the answer was lost: either */
      t_sleep_ms(20);
      continue;
    }
    if (r.status > 0 && r.status < 600)
      atomic_fetch_add(&statuses[r.status], 1);
    if (r.status == 200)
      k->outcome[s] = O_OK;
    else if (r.status == 409)
      k->outcome[s] = O_REFUSED;
    else if (r.status == 503 && strstr(r.body, "not committed") != NULL)
      k->outcome[s] = O_NOT_COMMITTED;
    else if (r.status == 504 && strstr(r.body, "\"outcome_unknown\"") != NULL)
      k->outcome[s] = O_UNKNOWN; /* 503 always means "not committed" */
    else {
      k->outcome[s] = O_OTHER;
      print_message("client %d seq %d: %d %s\n", k->id, s, r.status, r.body);
    }
    tl_resp_free(&r);
    if (k->outcome[s] != O_OK && k->outcome[s] != O_REFUSED)
      t_sleep_ms(20);
  }
  tl_conn_close(&conn);
  return NULL;
}

static pthread_t threads[NCLIENT];

static void run_clients(void) {
  atomic_store(&stop_flag, 0);
  for (int i = 0; i < 600; i++)
    atomic_store(&statuses[i], 0);
  for (int i = 0; i < NCLIENT; i++) {
    memset(&clients[i], 0, sizeof clients[i]);
    clients[i].id = i;
    assert_int_equal(pthread_create(&threads[i], NULL, client_main, &clients[i]), 0);
  }
}

static void join_clients(void) {
  atomic_store(&stop_flag, 1);
  for (int i = 0; i < NCLIENT; i++)
    pthread_join(threads[i], NULL);
}

/* Fresh accounts and an empty ledger, through lithd. */
static void reset_accounts(void) {
  char body[2048];
  size_t n = (size_t)snprintf(
      body, sizeof body,
      "{\"statements\":[{\"sql\":\"DELETE FROM ledger\"},{\"sql\":\"DELETE FROM accounts\"}");
  for (int a = 1; a <= NACC; a++)
    n += (size_t)snprintf(body + n, sizeof body - n,
                          ",{\"sql\":\"INSERT INTO accounts(id, balance) VALUES (?, ?)\",\"params\":[%d,%d]}",
                          a, START_BALANCE);
  snprintf(body + n, sizeof body - n, "]}");
  tl_expect(&lithd, "POST", "/v1/do", NULL, body, 200, NULL);
}

/* The ledger on the leader against every client's answers. Returns the
 * number of OK answers. */
static int64_t check_ledger(int allow_unknown) {
  uint32_t db;
  lith__dq_conn *c = leader_conn(&db);
  lith__dq_rows r;
  static unsigned char seen[NCLIENT][MAXSEQ];
  int64_t ok = 0, unknown = 0, n;
  char sql[512];

  memset(seen, 0, sizeof seen);
  lith__dq_rows_init(&r);
  assert_int_equal(lith__dq_query_sql(c, db, "SELECT client, seq FROM ledger", NULL, 0, &r), LITH_DQ_OK);
  for (size_t i = 0; i < r.nrows; i++) {
    int64_t cl = lith__dq_rows_at(&r, i, 0)->i, sq = lith__dq_rows_at(&r, i, 1)->i;
    assert_true(cl >= 0 && cl < NCLIENT && sq >= 0 && sq < clients[cl].nseq);
    assert_int_equal(seen[cl][sq], 0); /* no row twice */
    seen[cl][sq] = 1;
  }
  n = (int64_t)r.nrows;
  lith__dq_rows_free(&r);
  for (int k = 0; k < NCLIENT; k++)
    for (int s = 0; s < clients[k].nseq; s++) {
      int o = clients[k].outcome[s];
      if (o == O_OK) {
        ok++;
        if (!seen[k][s])
          fail_msg("client %d seq %d answered 200 but not in the ledger", k, s);
      } else if (o == O_UNKNOWN) {
        unknown++;
      } else if (seen[k][s]) {
        fail_msg("client %d seq %d answered %d (not committed) but in the ledger", k, s, o);
      }
    }
  if (!allow_unknown)
    assert_int_equal(unknown, 0);
  assert_int_equal(q_int(c, db, "SELECT sum(balance) FROM accounts"), (int64_t)NACC * START_BALANCE);
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM accounts a WHERE a.balance != %d"
           " - coalesce((SELECT sum(amount) FROM ledger WHERE src = a.id), 0)"
           " + coalesce((SELECT sum(amount) FROM ledger WHERE dst = a.id), 0)",
           START_BALANCE);
  assert_int_equal(q_int(c, db, sql), 0);
  lith__dq_close(c);
  print_message("transfers: %lld answered 200, %lld in the ledger, %lld unknown; 200: %d, 409: %d, 503: %d\n",
                (long long)ok, (long long)n, (long long)unknown, atomic_load(&statuses[200]),
                atomic_load(&statuses[409]), atomic_load(&statuses[503]));
  return ok;
}

/* ---- Tests ---- */

static void test_round_trip(void **state) {
  (void)state;
  struct tl_resp r;
  char out[4096];

  /* --schema applied: both steps, recorded. */
  tl_expect(&lithd, "POST", "/v1/query", NULL,
            "{\"statements\":[{\"sql\":\"SELECT version FROM _lith_schema\"}]}", 200, "\"rows\":[[2]]");
  /* Every value type, both ways. */
  tl_expect(
      &lithd, "POST", "/v1/do", NULL,
      "{\"statements\":[{\"sql\":\"INSERT INTO kv(k, v) VALUES (?, ?), (?, ?), (?, ?), (?, ?), (?, ?)\","
      "\"params\":[\"i\",9223372036854775807,\"r\",1.5,\"t\",\"h\\u00e9llo\",\"b\",{\"base64\":\"AP8=\"},"
      "\"n\",null]}]}",
      200, "\"changes\":5");
  tl_expect(&lithd, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"SELECT v FROM kv ORDER BY k\"}]}",
            200, "\"rows\":[[{\"base64\":\"AP8=\"}],[9223372036854775807],[null],[1.5],[\"h\xc3\xa9llo\"]]");
  /* Named parameters, the rowid of an INSERT, 0 for an UPDATE's. */
  tl_expect(&lithd, "POST", "/v1/do", NULL,
            "{\"statements\":[{\"sql\":\"INSERT INTO accounts(id, balance) VALUES (:id, :b)\","
            "\"params\":{\":id\":41,\":b\":5}},{\"sql\":\"UPDATE accounts SET balance = 6 WHERE id = 41\"}]}",
            200,
            "\"last_insert_rowid\":41,\"columns\":[],\"rows\":[]},{\"changes\":1,\"last_insert_rowid\":0");
  /* A table-valued pragma changes nothing, as on a file (SQLite shows its
   * prepare an UPDATE on sqlite_master: the counts are not its). */
  tl_expect(&lithd, "POST", "/v1/query", NULL,
            "{\"statements\":[{\"sql\":\"SELECT * FROM pragma_table_info('kv')\"}]}", 200,
            "{\"results\":[{\"changes\":0,\"last_insert_rowid\":0,\"columns\":[\"cid\"");
  tl_expect(&lithd, "POST", "/v1/do", NULL,
            "{\"statements\":[{\"sql\":\"SELECT * FROM pragma_table_info('kv')\"}]}", 200,
            "{\"results\":[{\"changes\":0,\"last_insert_rowid\":0,\"columns\":[\"cid\"");
  /* A failing statement undoes its command alone: 409, nothing of it. */
  tl_expect(&lithd, "POST", "/v1/do", NULL,
            "{\"statements\":[{\"sql\":\"UPDATE accounts SET balance = 7 WHERE id = 41\"},"
            "{\"sql\":\"INSERT INTO accounts(id, balance) VALUES (41, 1)\"}]}",
            409, "\"statement\":1");
  tl_expect(&lithd, "POST", "/v1/query", NULL,
            "{\"statements\":[{\"sql\":\"SELECT balance FROM accounts WHERE id = 41\"}]}", 200,
            "\"rows\":[[6]]");
  /* Parameters found in the text as SQLite numbers them: none inside a
   * string or a comment, ?NNN by number, a name repeated is one. */
  tl_expect(&lithd, "POST", "/v1/do", NULL,
            "{\"statements\":[{\"sql\":\"SELECT '?', ?2, ?1 -- ?\\n\",\"params\":[1,2]}]}", 200,
            "\"rows\":[[\"?\",2,1]]");
  tl_expect(&lithd, "POST", "/v1/do", NULL,
            "{\"statements\":[{\"sql\":\"SELECT :a, '@b', :a /* :c */\",\"params\":{\":a\":3}}]}", 200,
            "\"rows\":[[3,\"@b\",3]]");
  tl_expect(&lithd, "POST", "/v1/do", NULL,
            "{\"statements\":[{\"sql\":\"SELECT :a, :b\",\"params\":{\":a\":1}}]}", 400,
            "parameter \\\":b\\\" is not given");
  /* A deferred foreign key left by a command: COMMIT refuses it, that
   * command fails alone (409), nothing of it stays. */
  tl_expect(&lithd, "POST", "/v1/do", NULL,
            "{\"statements\":[{\"sql\":\"INSERT INTO child(pid) VALUES (5)\"}]}", 409,
            "FOREIGN KEY constraint failed");
  tl_expect(&lithd, "POST", "/v1/query", NULL, "{\"statements\":[{\"sql\":\"SELECT count(*) FROM child\"}]}",
            200, "[[0]]");
  /* /v1/batch: each command its own outcome. */
  tl_expect(&lithd, "POST", "/v1/batch", NULL,
            "{\"commands\":[{\"statements\":[{\"sql\":\"INSERT INTO kv(k, v) VALUES ('x', 1)\"}]},"
            "{\"statements\":[{\"sql\":\"INSERT INTO kv(k, v) VALUES ('x', 2)\"}]},"
            "{\"statements\":[{\"sql\":\"INSERT INTO kv(k, v) VALUES ('y', 3) RETURNING v\"}]}]}",
            200, "\"code\":\"constraint\"");
  tl_expect(&lithd, "POST", "/v1/query", NULL,
            "{\"statements\":[{\"sql\":\"SELECT group_concat(k || v) FROM kv WHERE k IN ('x', 'y')\"}]}", 200,
            "[[\"x1,y3\"]]");
  /* A named command, and its refusal of a missing parameter. */
  reset_accounts();
  tl_expect(&lithd, "POST", "/v1/commands/transfer", NULL,
            "{\"params\":{\"client\":0,\"seq\":0,\"src\":1,\"dst\":2,\"amount\":10}}", 200, NULL);
  tl_expect(&lithd, "POST", "/v1/commands/transfer", NULL,
            "{\"params\":{\"client\":0,\"seq\":1,\"src\":1,\"dst\":2,\"amount\":100000}}", 409,
            "CHECK constraint");
  tl_expect(&lithd, "POST", "/v1/commands/transfer", NULL, "{\"params\":{\"client\":0}}", 400, "missing");
  tl_expect(&lithd, "GET", "/v1/commands", NULL, NULL, 200, "\"name\":\"transfer\"");
  tl_expect(&lithd, "POST", "/v1/query?rows=objects", NULL,
            "{\"statements\":[{\"sql\":\"SELECT id, balance FROM accounts WHERE id <= 2 ORDER BY id\"}]}",
            200, "[{\"id\":1,\"balance\":990},{\"id\":2,\"balance\":1010}]");
  /* The rules: reads only on /v1/query, one statement, no transaction
   * control, no PRAGMA assignment, exactly the parameters. A backup is
   * served (an SQLite file: test_lithd_dqlite_backup has the rest). */
  tl_expect(&lithd, "POST", "/v1/query", NULL, "{\"statements\":[{\"sql\":\"DELETE FROM kv\"}]}", 403,
            "write statement");
  tl_expect(&lithd, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"COMMIT\"}]}", 403,
            "the writer owns");
  tl_expect(&lithd, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"PRAGMA foreign_keys = OFF\"}]}", 403,
            NULL);
  tl_expect(&lithd, "POST", "/v1/do", NULL, "{\"statements\":[{\"sql\":\"SELECT ?\",\"params\":[1,2]}]}", 400,
            "1 parameter, 2 given");
  tl_expect(&lithd, "GET", "/v1/backup", NULL, NULL, 200, "SQLite format 3");
  tl_expect(&lithd, "GET", "/healthz", NULL, NULL, 200, NULL);
  tl_expect(&lithd, "GET", "/metrics", NULL, NULL, 200,
            "lithd_http_responses_total{route=\"/v1/do\",code=\"200\"}");
  tl_http(&lithd, "GET", "/v1/stats", NULL, NULL, &r);
  assert_int_equal(r.status, 200);
  assert_true(tl_json_u64(r.body, "batches") > 0);
  tl_resp_free(&r);

  /* A second lithd on the same cluster with the same schema: starts (the
   * steps are not applied again: CREATE TABLE would fail) and sees the
   * data. */
  {
    struct tl_child second;
    const char *extra[] = {"--dqlite", all, "--schema", "schema.sql", "--commands", "commands.sql", NULL};
    tl_start(&second, "second", TL_NO_DB, extra);
    tl_expect(&second, "POST", "/v1/query", NULL, "{\"statements\":[{\"sql\":\"SELECT count(*) FROM kv\"}]}",
              200, "[[7]]");
    assert_int_equal(tl_stop(&second, SIGTERM, 10000), 0);
  }
  /* What needs a local file is refused with --dqlite. */
  assert_int_equal(tl_run(TL_ARGS("--dqlite", all, "--db", "x.db"), out, sizeof out), 2);
  assert_non_null(strstr(out, "--dqlite cannot go with --db"));
  assert_int_equal(tl_run(TL_ARGS("--dqlite", all, "--litestream"), out, sizeof out), 2);
}

static void test_leader_killed(void **state) {
  (void)state;
  int64_t t_kill, first_ok = -1;
  start_missing();
  reset_accounts();
  run_clients();
  t_sleep_ms(1000);
  int li = leader_index();
  t_kill = t_ms_now();
  assert_int_equal(t_node_stop(&nodes[li], SIGKILL, 5000), 128 + SIGKILL);
  t_sleep_ms(FAILOVER_MS + 3000);
  join_clients();
  for (int k = 0; k < NCLIENT; k++)
    for (int s = 0; s < clients[k].nseq; s++)
      if (clients[k].outcome[s] == O_OK && clients[k].sent[s] > t_kill &&
          (first_ok < 0 || clients[k].answered[s] < first_ok))
        first_ok = clients[k].answered[s];
  assert_true(first_ok > 0);
  print_message("leader %d killed: first 200 of a command sent after the kill %lld ms later\n", li + 1,
                (long long)(first_ok - t_kill));
  assert_true(first_ok - t_kill < FAILOVER_MS + 3000);
  check_ledger(1);
  /* The killed node comes back and catches up: with the third node (not
   * the leader) killed, a write commits only if the restarted node stores
   * it, which Raft allows only once its log holds everything before. */
  start_missing();
  int l2 = leader_index(), other = 0;
  while (other == li || other == l2) /* neither the restarted node nor the leader */
    other++;
  assert_true(other < 3);
  assert_int_equal(t_node_stop(&nodes[other], SIGKILL, 5000), 128 + SIGKILL);
  {
    /* Catching up a log of thousands of entries takes a while: until then
     * the write may be answered 503 (the leader without a majority); it is
     * idempotent, so it is simply sent again. */
    int64_t t0 = t_ms_now(), status = 0;
    while (status != 200 && t_ms_now() - t0 < 30000) {
      struct tl_resp r;
      tl_http(&lithd, "POST", "/v1/do", NULL,
              "{\"statements\":[{\"sql\":\"INSERT OR REPLACE INTO kv(k, v) VALUES ('rejoined', 1)\"}]}", &r);
      status = r.status;
      assert_true(status == 200 || status == 503 || status == 504);
      tl_resp_free(&r);
    }
    assert_int_equal(status, 200);
    print_message("node %d restarted: a write needing it committed %lld ms after the third node's kill\n",
                  li + 1, (long long)(t_ms_now() - t0));
  }
  start_missing();
  reset_accounts();
}

static void test_follower_killed(void **state) {
  (void)state;
  start_missing();
  reset_accounts();
  int li = leader_index(), fi = (li + 1) % 3;
  run_clients();
  t_sleep_ms(700);
  assert_int_equal(t_node_stop(&nodes[fi], SIGKILL, 5000), 128 + SIGKILL);
  t_sleep_ms(1500);
  join_clients();
  /* No answer changed: only 200 and 409, nothing unknown. */
  assert_int_equal(atomic_load(&statuses[503]), 0);
  for (int k = 0; k < NCLIENT; k++)
    for (int s = 0; s < clients[k].nseq; s++)
      assert_true(clients[k].outcome[s] == O_OK || clients[k].outcome[s] == O_REFUSED);
  assert_true(check_ledger(0) > 0);
  start_missing();
}

/* A node that stopped answering (SIGSTOP: a process frozen, or a machine
 * gone without a reset) named first in --dqlite: lithd starts within
 * seconds, each ask of it costing a request's timeout (2 s); the check for
 * a partial --restore at start waited 30 s for it. */
static void test_frozen_node_first(void **state) {
  (void)state;
  start_missing();
  int li = leader_index(), fi = (li + 1) % 3;
  char list[256];
  snprintf(list, sizeof list, "%s,%s,%s", nodes[fi].address, nodes[li].address, nodes[(li + 2) % 3].address);
  assert_int_equal(kill(nodes[fi].pid, SIGSTOP), 0);
  struct tl_child c;
  const char *extra[] = {"--dqlite", list, NULL};
  int64_t t0 = t_ms_now();
  tl_start(&c, "frozen", TL_NO_DB, extra); /* fails past TL_TIMEOUT_MS */
  int64_t took = t_ms_now() - t0;
  print_message("lithd --dqlite, the first node frozen: serving after %lld ms\n", (long long)took);
  tl_expect(&c, "POST", "/v1/query", NULL, "{\"statements\":[{\"sql\":\"SELECT 1\"}]}", 200, "[[1]]");
  assert_int_equal(tl_stop(&c, SIGTERM, 10000), 0);
  assert_int_equal(kill(nodes[fi].pid, SIGCONT), 0);
  assert_true(took < 8000);
}

/* What a node sends reaches lithd's log in the dqlite client's messages
 * (here the address of a LEADER answer, refused: not HOST:PORT); a line
 * break or a terminal escape in it stays inside its line, as \xNN, as a
 * client's path does in the request log. */
static const char forged_addr[] = "x\n2026-01-01T00:00:00.000Z lithd[1] error: forged\x1b[2J";

static int forging_node(void *arg, const t_fake_call *call, lith__dq_buf *out) {
  (void)arg, (void)call;
  lith__dq_req_begin(out, LITH_DQ_RES_SERVER);
  lith__dq_put_u64(out, 1);
  lith__dq_put_text(out, forged_addr);
  lith__dq_req_end(out);
  return T_FAKE_NEXT;
}

static void test_node_text_in_log(void **state) {
  (void)state;
  t_fake *f = t_fake_script(forging_node, NULL, 1);
  assert_non_null(f);
  struct tl_child c;
  unlink("nodelog.log");
  tl_start(&c, "nodelog", TL_NO_DB,
           TL_ARGS("--dqlite", t_fake_address(f), "--dqlite-failover-ms", "300", "--log", "nodelog.log"));
  assert_int_equal(tl_stop(&c, SIGTERM, 10000), 0);
  t_fake_free(f);
  char buf[16384];
  FILE *in = fopen("nodelog.log", "r");
  assert_non_null(in);
  size_t n = fread(buf, 1, sizeof buf - 1, in);
  fclose(in);
  buf[n] = '\0';
  if (strstr(buf, "x\\x0a2026-01-01T00:00:00.000Z lithd[1] error: forged\\x1b[2J") == NULL)
    fail_msg("the node's text, escaped, not in:\n%s", buf);
  assert_null(strstr(buf, "\n2026-01-01T00:00:00.000Z"));
  assert_null(strchr(buf, 0x1b));
}

static void test_majority_lost(void **state) {
  (void)state;
  start_missing();
  reset_accounts();
  int li = leader_index();
  /* Kill both followers, then the commands: no majority can store them. */
  for (int i = 0; i < 3; i++)
    if (i != li)
      assert_int_equal(t_node_stop(&nodes[i], SIGKILL, 5000), 128 + SIGKILL);
  run_clients();
  t_sleep_ms(FAILOVER_MS + 2 * 2000 + 2000);
  join_clients();
  int answered = 0;
  for (int k = 0; k < NCLIENT; k++)
    for (int s = 0; s < clients[k].nseq; s++) {
      int o = clients[k].outcome[s];
      if (o == O_OK)
        fail_msg("client %d seq %d answered 200 without a majority", k, s);
      answered += o == O_NOT_COMMITTED || o == O_UNKNOWN;
    }
  assert_true(atomic_load(&statuses[503]) > 0);
  assert_int_equal(atomic_load(&statuses[200]), 0);
  print_message("majority lost: %d commands answered 503, %d 504 (%d answers in all)\n",
                atomic_load(&statuses[503]), atomic_load(&statuses[504]), answered);
  /* Back to three: what was "not committed" is not there. */
  start_missing();
  check_ledger(1);
  tl_expect(&lithd, "POST", "/v1/commands/transfer", NULL,
            "{\"params\":{\"client\":0,\"seq\":4095,\"src\":1,\"dst\":2,\"amount\":1}}", 200, NULL);
}

/* 32 clients on the healthy cluster for LITHD_DQ_MEASURE_S seconds
 * (default 3): the transfers answered 200 per second, printed. */
static void test_measure(void **state) {
  (void)state;
  const char *env = getenv("LITHD_DQ_MEASURE_S");
  int seconds = env != NULL && atoi(env) > 0 ? atoi(env) : 3;
  start_missing();
  reset_accounts();
  leader_index(); /* a leader is there before the clock starts */
  int64_t t0 = t_ms_now();
  run_clients();
  t_sleep_ms(seconds * 1000);
  join_clients();
  int64_t t1 = t_ms_now();
  int ok = atomic_load(&statuses[200]), refused = atomic_load(&statuses[409]);
  print_message("measure: %d clients, %lld ms: %d answered 200, %d 409: %.0f commands/s (200 and 409)\n",
                NCLIENT, (long long)(t1 - t0), ok, refused,
                (double)(ok + refused) * 1000.0 / (double)(t1 - t0));
  assert_true(ok > 0);
  check_ledger(0);
}

/* ---- An interactive transaction when the leader dies ---- */

#define TX_EXEC(sql) "{\"type\":\"execute\",\"stmt\":{\"sql\":\"" sql "\"}}"

/* POST /v3/pipeline with baton (NULL: a new stream): the body, 200
 * asserted; *baton_out (cap 128) gets the answer's baton, "" if none. */
static char *tx_pipeline(const char *baton, const char *requests, char *baton_out) {
  char body[1024];
  struct tl_resp r;
  if (baton != NULL)
    snprintf(body, sizeof body, "{\"baton\":\"%s\",\"requests\":%s}", baton, requests);
  else
    snprintf(body, sizeof body, "{\"baton\":null,\"requests\":%s}", requests);
  tl_http(&lithd, "POST", "/v3/pipeline", NULL, body, &r);
  assert_int_equal(r.status, 200);
  char *out = strdup(r.body);
  assert_non_null(out);
  if (baton_out != NULL) {
    const char *b = strstr(out, "\"baton\":\"");
    baton_out[0] = '\0';
    if (b != NULL)
      snprintf(baton_out, 128, "%.*s", (int)strcspn(b + 9, "\""), b + 9);
  }
  tl_resp_free(&r);
  return out;
}

/* A stream's transaction holds the cluster's writer when the leader is
 * SIGKILLed: its next request fails SQLITE_BUSY ("leader was lost"),
 * nothing of it is kept, the stream is in autocommit after, and a new
 * transaction commits on the next leader. (The pipelines are JSON written
 * as concatenated literals, a request a line: not clang-formatted.) */
/* clang-format off */
static void test_transaction_leader_killed(void **state) {
  (void)state;
  char baton[128], *body;
  start_missing();
  body = tx_pipeline(NULL, "[" TX_EXEC("BEGIN IMMEDIATE") ","
                           TX_EXEC("INSERT OR REPLACE INTO kv(k, v) VALUES ('tx1', 1)") "]", baton);
  assert_null(strstr(body, "\"type\":\"error\""));
  assert_true(baton[0] != '\0');
  free(body);
  int li = leader_index();
  assert_int_equal(t_node_stop(&nodes[li], SIGKILL, 5000), 128 + SIGKILL);
  body = tx_pipeline(baton, "[" TX_EXEC("INSERT OR REPLACE INTO kv(k, v) VALUES ('tx2', 2)") ","
                            TX_EXEC("COMMIT") ","
                            "{\"type\":\"get_autocommit\"},"
                            "{\"type\":\"close\"}]", NULL);
  assert_non_null(strstr(body, "leader was lost"));
  assert_non_null(strstr(body, "\"code\":\"SQLITE_BUSY\""));
  assert_non_null(strstr(body, "\"is_autocommit\":true"));
  free(body);
  /* a new transaction, once a leader is elected */
  int64_t t0 = t_ms_now();
  for (;;) {
    body = tx_pipeline(NULL, "[" TX_EXEC("BEGIN IMMEDIATE") ","
                             TX_EXEC("INSERT OR REPLACE INTO kv(k, v) VALUES ('tx3', 3)") ","
                             TX_EXEC("COMMIT") ","
                             "{\"type\":\"close\"}]", NULL);
    int ok = strstr(body, "\"type\":\"error\"") == NULL;
    free(body);
    if (ok)
      break;
    assert_true(t_ms_now() - t0 < FAILOVER_MS + 10000);
    t_sleep_ms(200);
  }
  print_message("leader %d killed mid-transaction: a new transaction committed %lld ms later\n", li + 1,
                (long long)(t_ms_now() - t0));
  tl_expect(&lithd, "POST", "/v1/query", NULL,
            "{\"statements\":[{\"sql\":\"SELECT group_concat(k) FROM kv WHERE k LIKE 'tx_'\"}]}", 200,
            "[[\"tx3\"]]");
  start_missing();
}
/* clang-format on */

/* ---- Setup ---- */

static int group_setup(void **state) {
  (void)state;
  char join2[160];
  signal(SIGPIPE, SIG_IGN);
  write_file("schema.sql", schema_sql);
  write_file("commands.sql", commands_sql);
  for (int i = 0; i < 3; i++)
    t_node_init(&nodes[i], i + 1);
  snprintf(all, sizeof all, "%s,%s,%s", nodes[0].address, nodes[1].address, nodes[2].address);
  snprintf(join2, sizeof join2, "%s,%s", nodes[0].address, nodes[1].address);
  if (t_node_start(&nodes[0], NULL, 10000) != 0 || t_node_start(&nodes[1], nodes[0].address, 15000) != 0 ||
      t_node_start(&nodes[2], join2, 15000) != 0)
    return -1;
  {
    char fo[16];
    snprintf(fo, sizeof fo, "%d", FAILOVER_MS);
    const char *extra[] = {
        "--dqlite", all, "--schema", "schema.sql", "--commands", "commands.sql", "--dqlite-failover-ms",
        fo,         NULL};
    tl_start(&lithd, "lithd", TL_NO_DB, extra);
  }
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  if (lithd.pid > 0)
    tl_stop(&lithd, SIGKILL, 5000);
  for (int i = 0; i < 3; i++)
    if (nodes[i].pid > 0)
      t_node_stop(&nodes[i], SIGKILL, 2000);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip),        cmocka_unit_test(test_leader_killed),
      cmocka_unit_test(test_follower_killed),   cmocka_unit_test(test_transaction_leader_killed),
      cmocka_unit_test(test_frozen_node_first), cmocka_unit_test(test_node_text_in_log),
      cmocka_unit_test(test_majority_lost),     cmocka_unit_test(test_measure),
  };
  if (getenv("TEST_FILTER") != NULL) /* one test by name: TEST_FILTER=test_x */
    cmocka_set_test_filter(getenv("TEST_FILTER"));
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
