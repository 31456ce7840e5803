/*
 * auth_pw — password hashing for the kanban server: libsodium's argon2id
 * (crypto_pwhash_str, "interactive" limits: 64 MiB and ~0.1 s a hash), run
 * on libuv's thread pool through a gate that bounds how many run at once.
 *
 * Why a gate: an argon2id hash is meant to be expensive. Without a bound, a
 * burst of sign-ins would take every pool thread (the board reads wait
 * behind them) and 64 MiB each. The gate runs at most `running` hashes at a
 * time, queues up to `waiting` more in arrival order, and refuses beyond that
 * (the handler answers 503 with Retry-After) — a sign-in storm slows sign-ins
 * and nothing else.
 *
 * Threads: auth_pw_hash/verify on any thread (they block: pool or startup);
 * the gate on the loop thread only.
 */
#ifndef KANBAN_AUTH_PW_H
#define KANBAN_AUTH_PW_H

#include <stddef.h>

#include <uv.h>

#define AUTH_PW_HASH_MAX 128 /* crypto_pwhash_STRBYTES */
#define AUTH_PW_MIN 8        /* bytes */
#define AUTH_PW_MAX 1024     /* bytes: argon2 takes any length, a body does not */

/* sodium_init and the dummy hash below. 0 on success. Once, at startup. */
int auth_pw_init(void);

/* Hash `password` into out (a NUL-terminated "$argon2id$..." string).
 * 0 on success, -1 when out of memory. Blocks ~0.1 s. */
int auth_pw_hash(const char *password, char out[AUTH_PW_HASH_MAX]);

/* 1 if `password` matches `hash`, else 0. With hash NULL (no such user) it
 * verifies against a fixed dummy hash and returns 0, so that an unknown
 * name takes as long as a wrong password. */
int auth_pw_verify(const char *hash, const char *password);

/* ---- The gate --------------------------------------------------------------- */

typedef struct auth_gate auth_gate;
typedef struct auth_task auth_task;

struct auth_task {
  uv_work_t work;
  void (*run)(auth_task *t);              /* on a pool thread */
  void (*done)(auth_task *t, int status); /* on the loop: 0, or UV_ECANCELED when the
                                             gate stopped before it ran */
  /* private */
  auth_gate *gate;
  auth_task *next;
};

/* A gate on `loop` running at most `running` tasks at once, keeping at most
 * `waiting` in line. NULL when out of memory. */
auth_gate *auth_gate_new(uv_loop_t *loop, int running, int waiting);

/* Start `t` now or queue it. 0: t->done will run once; UV_EBUSY: the line is
 * full (t untouched, done will not run). */
int auth_gate_submit(auth_gate *g, auth_task *t);

/* Tasks running or waiting. */
int auth_gate_busy(const auth_gate *g);

/* Stop: waiting tasks get done(t, UV_ECANCELED) now; running ones finish.
 * Further submissions get UV_EBUSY. */
void auth_gate_stop(auth_gate *g);

/* Free the gate once nothing runs (after the loop ended). */
void auth_gate_free(auth_gate *g);

#endif
