/*
 * Test helpers shared by the tests of the library (sqlite/test,
 * writer/test, uv/test), on lith's public API only: scratch database paths,
 * a bank schema (accounts, ledger) and the transfer command, small SQL
 * checks run on a separate connection, a gate that forces a batch, async
 * requests counted to completion, and commands whose outcome their index
 * decides. A neutral floor: no layer's tests include another's.
 */
#ifndef LITH_TEST_COMMON_H
#define LITH_TEST_COMMON_H

#include <stdatomic.h>
#include <stdint.h>

#include "lith.h"

/* The size of the file at path in bytes; -1 if there is none. */
long long t_file_size(const char *path);

/* Remove `path` and its -wal, -shm, -journal files. */
void t_remove_db(const char *path);

/* Schema: accounts(id INTEGER PRIMARY KEY, balance INTEGER NOT NULL CHECK
 * (balance >= 0)), ledger(id INTEGER PRIMARY KEY, producer, seq, src, dst,
 * amount, UNIQUE(producer, seq)), kv(k TEXT PRIMARY KEY, v). */
extern const char *const t_bank_migrations[];
extern const int t_bank_nmigrations;

/* Options with the bank migrations and small, test-friendly settings. */
void t_bank_options(lith_options *opt);

/* Open a fresh database at path (old files removed) with opt; asserts OK. */
lith *t_open_fresh(const char *path, const lith_options *opt);

/* Insert n accounts with `balance` each, ids 1..n (through lith_do). */
void t_seed_accounts(lith *db, int n, int64_t balance);

/* A transfer: moves `amount` from src to dst and writes a ledger row. */
typedef struct t_transfer {
  int64_t producer, seq, src, dst, amount;
  int64_t topic; /* touched if non-zero */
} t_transfer;
int t_transfer_cmd(lith_tx *tx, void *arg);

/* Run one integer query on a fresh read-write connection to path. */
int64_t t_query_int(const char *path, const char *sql);

/* "ok" if PRAGMA integrity_check passes on path; asserts otherwise. */
void t_assert_integrity(const char *path);

/* A command that inserts arg (a const char *) into kv as key with v = 1. */
int t_put_cmd(lith_tx *tx, void *arg);

/* Scale a count down when running under a sanitizer (env LITH_TEST_SCALE,
 * a divisor, default 1). */
int t_scaled(int n);

#endif

/* ---- Forcing a batch: a gate command holds the writer until opened, so
 * that everything submitted meanwhile lands in the next batch together. */
typedef struct t_gate {
  _Atomic int entered;
  _Atomic int open;
  lith_request req;
} t_gate;

/* Submit the gate and wait until the writer is inside it. */
void t_gate_close(lith *db, t_gate *g);
/* Let the writer go on. */
void t_gate_open(t_gate *g);

/* ---- Async requests counted to completion. */
typedef struct t_async {
  _Atomic int done;
} t_async;

/* Submit fn(arg) into req (req->data = counter); asserts accepted. */
void t_submit(lith *db, lith_request *req, lith_command fn, void *arg, t_async *counter);
/* The same through lith_submit_alone. */
void t_submit_alone(lith *db, lith_request *req, lith_command fn, void *arg, t_async *counter);
/* Wait (up to 30 s) until `n` requests counted by c are done; asserts. */
void t_async_wait(t_async *c, int n);

/* ---- Commands whose outcome their index decides (arg: (void *)(intptr_t)i):
 * LITH_USER + i % 5 when i % 7 == 3 (with the message "fail i"), a UNIQUE
 * violation (LITH_CONSTRAINT) when i % 11 == 5 (on a kv holding 'dup'),
 * else LITH_OK, inserting key "k<i>". */
int t_indexed_rc(int i);
int t_indexed_cmd(lith_tx *tx, void *arg);
/* How many of 0..n-1 succeed. */
int t_indexed_ok(int n);
/* t_open_fresh with t_bank_options, queue_capacity, and 'dup' in kv. */
lith *t_open_indexed(const char *path, int queue_capacity);
