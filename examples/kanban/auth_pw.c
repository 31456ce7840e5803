/*
 * auth_pw — argon2id hashes and the gate that bounds them (see auth_pw.h).
 *
 * Design: the hashing itself is libsodium's (crypto_pwhash_str: a random
 * salt, the algorithm and its limits stored in the string, so stronger
 * limits later still verify old hashes). The gate is a FIFO on the loop
 * thread: a task enters uv_queue_work only when fewer than `running` are in
 * the pool, and the completion of one starts the next. No lock is needed:
 * submit, completion and stop all run on the loop.
 */
#include "auth_pw.h"

#include <stdlib.h>
#include <string.h>

#include <sodium.h>

static char dummy_hash[AUTH_PW_HASH_MAX];

int auth_pw_init(void) {
  if (sodium_init() < 0)
    return -1;
  return auth_pw_hash("not a password anyone has", dummy_hash);
}

int auth_pw_hash(const char *password, char out[AUTH_PW_HASH_MAX]) {
  return crypto_pwhash_str(out, password, strlen(password), crypto_pwhash_OPSLIMIT_INTERACTIVE,
                           crypto_pwhash_MEMLIMIT_INTERACTIVE) == 0
             ? 0
             : -1;
}

int auth_pw_verify(const char *hash, const char *password) {
  /* an unknown user costs one verification too, against the dummy */
  int ok = crypto_pwhash_str_verify(hash != NULL ? hash : dummy_hash, password, strlen(password)) == 0;
  return hash != NULL && ok;
}

/* ---- The gate ------------------------------------------------------------------ */

struct auth_gate {
  uv_loop_t *loop;
  int running, max_running;
  int waiting, max_waiting;
  int stopped;
  auth_task *head, *tail;
};

auth_gate *auth_gate_new(uv_loop_t *loop, int running, int waiting) {
  auth_gate *g = calloc(1, sizeof *g);
  if (g == NULL)
    return NULL;
  g->loop = loop;
  g->max_running = running < 1 ? 1 : running;
  g->max_waiting = waiting < 0 ? 0 : waiting;
  return g;
}

static void start_next(auth_gate *g);

static void work_cb(uv_work_t *w) {
  auth_task *t = w->data;
  t->run(t);
}

static void after_cb(uv_work_t *w, int status) {
  auth_task *t = w->data;
  auth_gate *g = t->gate;
  g->running--;
  t->done(t, status); /* may free t */
  start_next(g);
}

static void start_next(auth_gate *g) {
  while (!g->stopped && g->head != NULL && g->running < g->max_running) {
    auth_task *t = g->head;
    g->head = t->next;
    if (g->head == NULL)
      g->tail = NULL;
    g->waiting--;
    t->work.data = t;
    if (uv_queue_work(g->loop, &t->work, work_cb, after_cb) != 0) {
      t->done(t, UV_ECANCELED);
      continue;
    }
    g->running++;
  }
}

int auth_gate_submit(auth_gate *g, auth_task *t) {
  if (g->stopped || (g->running >= g->max_running && g->waiting >= g->max_waiting))
    return UV_EBUSY;
  t->gate = g;
  t->next = NULL;
  if (g->tail != NULL)
    g->tail->next = t;
  else
    g->head = t;
  g->tail = t;
  g->waiting++;
  start_next(g);
  return 0;
}

int auth_gate_busy(const auth_gate *g) { return g->running + g->waiting; }

void auth_gate_stop(auth_gate *g) {
  auth_task *t;
  g->stopped = 1;
  while ((t = g->head) != NULL) {
    g->head = t->next;
    g->waiting--;
    t->done(t, UV_ECANCELED);
  }
  g->tail = NULL;
}

void auth_gate_free(auth_gate *g) { free(g); }
