/*
 * lithd dq — lithd --dqlite (see dq.h).
 *
 * Design:
 *   - Writes: lith__dqw_submit with the request's own lith__dqw_req; the
 *     writer calls `done` on its thread, which turns the outcome into a
 *     lith code (lithd_dq_result_failed), pushes the request on `ready`
 *     (mutex) and wakes the loop (uv_async_send; several sends may wake it
 *     once, so the loop takes the whole list). `inflight` bounds the
 *     commands in the writer (the writer's own queue has no bound).
 *   - Reads: uv_queue_work; the pool thread takes an idle leader connection
 *     from `idle` (or makes one), runs, gives it back. A connection whose
 *     node stopped leading or that failed is dropped and the read tried
 *     once more on the leader found again: a read changes nothing, so
 *     running it twice is harmless.
 *   - Schema: apply_schema, one transaction (dq.h says why).
 */
#include "dq.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client.h"
#include "log.h"
#include "sqljson_dq.h"

#define DQ_IDLE_MAX 16
#define DQ_TIMEOUT_MS 2000

struct lithd_dq {
  lith__dqw *w;
  char *addresses, *database;
  int failover_ms, max_queue;
  uv_loop_t *loop;
  uv_async_t wake;
  int wake_open;
  pthread_mutex_t mu;
  lithd_dq_req *ready, *ready_tail; /* answered, for the loop */
  int inflight;                     /* loop thread only */
  lith__dq_conn *idle[DQ_IDLE_MAX]; /* reads' leader connections (mu) */
  uint32_t idle_db[DQ_IDLE_MAX];
  int n_idle;
};

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

/* ---- Schema ---------------------------------------------------------------- */

/* A connection to the leader with the database open, or an error. */
static int leader_open(const char *addresses, const char *database, int timeout_ms, lith__dq_conn *c,
                       uint32_t *db) {
  int rc = lith__dq_connect_leader(c, addresses, timeout_ms);
  if (rc == LITH_DQ_OK)
    rc = lith__dq_open(c, database, db);
  return rc;
}

/* One try: 0 applied (or nothing to do), 1 retry (lost leader, busy), -1
 * a failure in err. */
static int schema_try(lith__dq_conn *c, uint32_t db, const lithd_schema *s, char *err, size_t errsz) {
  lith__dq_rows rows;
  int64_t version = 0;
  int rc;
  char sql[96];

  if ((rc = lith__dq_exec_sql(c, db, "BEGIN IMMEDIATE", NULL, 0, NULL)) != LITH_DQ_OK)
    return 1; /* another lithd holds the write lock, or the leader moved */
  rc = lith__dq_exec_sql(c, db, "CREATE TABLE IF NOT EXISTS _lith_schema(version INTEGER NOT NULL)", NULL, 0,
                         NULL);
  lith__dq_rows_init(&rows);
  if (rc == LITH_DQ_OK)
    rc = lith__dq_query_sql(c, db, "SELECT coalesce(max(version), 0) FROM _lith_schema", NULL, 0, &rows);
  if (rc == LITH_DQ_OK && rows.nrows == 1 && rows.ncols == 1)
    version = lith__dq_rows_at(&rows, 0, 0)->i;
  lith__dq_rows_free(&rows);
  if (rc != LITH_DQ_OK)
    goto retry;
  if (version > s->n) {
    snprintf(err, errsz,
             "the cluster's schema is at step %" PRId64 " (_lith_schema), the --schema file has %d: "
             "written by a newer schema, lithd does not start",
             version, s->n);
    lith__dq_exec_sql(c, db, "ROLLBACK", NULL, 0, NULL);
    return -1;
  }
  for (int64_t k = version; k < s->n; k++) {
    rc = lith__dq_exec_sql(c, db, s->steps[k], NULL, 0, NULL);
    if (rc == LITH_DQ_FAILURE && lith__dq_errcode(c) != LITH_DQ_IOERR_NOT_LEADER &&
        lith__dq_errcode(c) != LITH_DQ_IOERR_LEADERSHIP_LOST) {
      snprintf(err, errsz, "--schema step %" PRId64 " failed on the cluster: %s", k + 1, lith__dq_errmsg(c));
      lith__dq_exec_sql(c, db, "ROLLBACK", NULL, 0, NULL);
      return -1;
    }
    if (rc != LITH_DQ_OK)
      goto retry;
  }
  snprintf(sql, sizeof sql, "DELETE FROM _lith_schema; INSERT INTO _lith_schema(version) VALUES (%d)", s->n);
  if (version < s->n && (rc = lith__dq_exec_sql(c, db, sql, NULL, 0, NULL)) != LITH_DQ_OK)
    goto retry;
  /* A COMMIT whose answer is lost is simply tried again: the next try
   * reads the record in its own transaction and applies nothing twice. */
  if ((rc = lith__dq_exec_sql(c, db, "COMMIT", NULL, 0, NULL)) != LITH_DQ_OK)
    goto retry;
  if (version < s->n)
    lithd_log(LITHD_LOG_INFO, "--schema: steps %" PRId64 "..%d applied on the cluster", version + 1, s->n);
  return 0;
retry:
  if (lith__dq_connected(c))
    lith__dq_exec_sql(c, db, "ROLLBACK", NULL, 0, NULL);
  return 1;
}

static int apply_schema(const lithd_dq *dq, const lithd_schema *s, char *err, size_t errsz) {
  int64_t deadline = lith_clock_ms() + dq->failover_ms;
  lith__dq_conn *c = lith__dq_new(DQ_TIMEOUT_MS);
  uint32_t db = 0;
  int rc = -1;
  if (c == NULL) {
    snprintf(err, errsz, "out of memory");
    return -1;
  }
  for (;;) {
    if (!lith__dq_connected(c) &&
        leader_open(dq->addresses, dq->database, dq->failover_ms, c, &db) != LITH_DQ_OK) {
      snprintf(err, errsz, "no dqlite leader among %s: %s", dq->addresses, lith__dq_errmsg(c));
      lith__dq_disconnect(c);
    } else if ((rc = schema_try(c, db, s, err, errsz)) <= 0) {
      break;
    } else {
      snprintf(err, errsz, "--schema: %s", lith__dq_errmsg(c));
    }
    rc = -1;
    if (lith_clock_ms() > deadline)
      break;
    sleep_ms(100);
  }
  lith__dq_close(c);
  return rc;
}

/* ---- Writes ---------------------------------------------------------------- */

static int run_cmd(lith__dqw_tx *tx, void *arg) {
  lithd_dq_req *r = arg;
  return lithd_batch_run_dq(tx, r->batch, r->result);
}

static void push_ready(lithd_dq *dq, lithd_dq_req *r) {
  r->next = NULL;
  pthread_mutex_lock(&dq->mu);
  if (dq->ready_tail)
    dq->ready_tail->next = r;
  else
    dq->ready = r;
  dq->ready_tail = r;
  pthread_mutex_unlock(&dq->mu);
  uv_async_send(&dq->wake);
}

static void cmd_done(lith__dqw_req *w) { /* the writer thread */
  lithd_dq_req *r = w->arg;
  r->rc = lithd_dq_result_failed(r->result ? *r->result : NULL, w->rc, &w->err, r->errmsg, sizeof r->errmsg);
  push_ready(r->dq, r);
}

/* The loop: answer everything ready. */
static void drain(lithd_dq *dq) {
  lithd_dq_req *r;
  pthread_mutex_lock(&dq->mu);
  r = dq->ready;
  dq->ready = dq->ready_tail = NULL;
  pthread_mutex_unlock(&dq->mu);
  while (r != NULL) {
    lithd_dq_req *next = r->next;
    dq->inflight--; /* only writes come this way */
    r->cb(r);
    r = next;
  }
}

static void on_wake(uv_async_t *h) { drain(h->data); }

int lithd_dq_submit(lithd_dq *dq, lithd_dq_req *r) {
  if (dq->inflight >= dq->max_queue)
    return LITHD_DQ_FULL;
  r->dq = dq;
  r->errmsg[0] = '\0';
  memset(&r->w, 0, sizeof r->w);
  r->w.fn = run_cmd;
  r->w.arg = r;
  r->w.done = cmd_done;
  dq->inflight++;
  lith__dqw_submit(dq->w, &r->w);
  return LITHD_DQ_OK;
}

/* ---- Reads ---------------------------------------------------------------- */

static lith__dq_conn *take_conn(lithd_dq *dq, uint32_t *db) {
  lith__dq_conn *c = NULL;
  pthread_mutex_lock(&dq->mu);
  if (dq->n_idle > 0) {
    dq->n_idle--;
    c = dq->idle[dq->n_idle];
    *db = dq->idle_db[dq->n_idle];
  }
  pthread_mutex_unlock(&dq->mu);
  return c != NULL ? c : lith__dq_new(DQ_TIMEOUT_MS);
}

static void give_conn(lithd_dq *dq, lith__dq_conn *c, uint32_t db) {
  pthread_mutex_lock(&dq->mu);
  if (dq->n_idle < DQ_IDLE_MAX && lith__dq_connected(c)) {
    dq->idle[dq->n_idle] = c;
    dq->idle_db[dq->n_idle++] = db;
    c = NULL;
  }
  pthread_mutex_unlock(&dq->mu);
  lith__dq_close(c);
}

static void read_work(uv_work_t *w) { /* a pool thread */
  lithd_dq_req *r = w->data;
  lithd_dq *dq = r->dq;
  uint32_t db = 0;
  lith__dq_conn *c = take_conn(dq, &db);
  int lost = 0;
  if (c == NULL) {
    r->rc = LITH_NOMEM;
    snprintf(r->errmsg, sizeof r->errmsg, "out of memory");
    return;
  }
  for (int attempt = 0; attempt < 2; attempt++) {
    if (!lith__dq_connected(c) &&
        leader_open(dq->addresses, dq->database, dq->failover_ms, c, &db) != LITH_DQ_OK) {
      r->rc = LITH_BUSY;
      snprintf(r->errmsg, sizeof r->errmsg, "no dqlite leader could be reached for the read: %s",
               lith__dq_errmsg(c));
      lith__dq_disconnect(c);
      break;
    }
    r->rc = lithd_batch_read_dq(c, db, r->batch, r->result, &lost);
    r->errmsg[0] = '\0';
    if (!lost)
      break;
    lith__dq_disconnect(c);
    if (attempt == 1) { /* the statement's message says what failed */
      r->rc = LITH_BUSY;
      snprintf(r->errmsg, sizeof r->errmsg, "the dqlite leader was lost during the read: retry");
    }
  }
  give_conn(dq, c, db);
}

static void read_after(uv_work_t *w, int status) { /* the loop */
  lithd_dq_req *r = w->data;
  if (status == UV_ECANCELED) {
    r->rc = LITH_CLOSED;
    snprintf(r->errmsg, sizeof r->errmsg, "lithd is shutting down");
  }
  r->cb(r);
}

int lithd_dq_read(lithd_dq *dq, lithd_dq_req *r) {
  r->dq = dq;
  r->rc = LITH_OK;
  r->errmsg[0] = '\0';
  r->work.data = r;
  return uv_queue_work(dq->loop, &r->work, read_work, read_after) == 0 ? LITHD_DQ_OK : LITHD_DQ_ERROR;
}

/* ---- Start, stop ------------------------------------------------------------ */

int lithd_dq_start(const lithd_dq_options *o, const lithd_schema *schema, uv_loop_t *loop, lithd_dq **out,
                   char *err, size_t errsz) {
  lithd_dq *dq = calloc(1, sizeof *dq);
  lith__dqw_options wo;
  *out = NULL;
  if (dq != NULL)
    pthread_mutex_init(&dq->mu, NULL);
  if (dq == NULL || (dq->addresses = strdup(o->addresses)) == NULL ||
      (dq->database = strdup(o->database)) == NULL) {
    snprintf(err, errsz, "out of memory");
    goto fail;
  }
  dq->failover_ms = o->failover_ms > 0 ? o->failover_ms : 10000;
  dq->max_queue = o->max_queue > 0 ? o->max_queue : 10000;
  dq->loop = loop;
  if (schema != NULL && schema->n > 0 && apply_schema(dq, schema, err, errsz) != 0)
    goto fail;
  memset(&wo, 0, sizeof wo);
  wo.addresses = dq->addresses;
  wo.database = dq->database;
  wo.failover_ms = dq->failover_ms;
  wo.max_batch = o->max_batch;
  if (lith__dqw_start(&wo, &dq->w) != LITH_DQW_OK) {
    snprintf(err, errsz, "cannot start the dqlite writer");
    goto fail;
  }
  if (uv_async_init(loop, &dq->wake, on_wake) != 0) {
    snprintf(err, errsz, "uv_async_init failed");
    goto fail;
  }
  dq->wake.data = dq;
  dq->wake_open = 1;
  *out = dq;
  return LITHD_DQ_OK;
fail:
  lithd_dq_free(dq);
  return LITHD_DQ_ERROR;
}

char *lithd_dq_stats_json(lithd_dq *dq) {
  lith__dqw_stats st;
  char *out = malloc(320);
  if (out == NULL)
    return NULL;
  lith__dqw_get_stats(dq->w, &st);
  snprintf(out, 320,
           "{\"commands\":%" PRIu64 ",\"batches\":%" PRIu64 ",\"failovers\":%" PRIu64 ",\"fenced\":%" PRIu64
           ",\"reruns\":%" PRIu64 ",\"inflight\":%d}",
           st.commands, st.batches, st.failovers, st.fenced, st.reruns, dq->inflight);
  return out;
}

void lithd_dq_stop(lithd_dq *dq) {
  if (dq == NULL || dq->w == NULL)
    return;
  lith__dqw_stop(dq->w); /* answers everything queued: their done ran */
  dq->w = NULL;
  drain(dq);
  if (dq->wake_open) {
    uv_close((uv_handle_t *)&dq->wake, NULL);
    dq->wake_open = 0;
  }
}

void lithd_dq_free(lithd_dq *dq) {
  if (dq == NULL)
    return;
  if (dq->w != NULL)
    lith__dqw_stop(dq->w);
  for (int i = 0; i < dq->n_idle; i++)
    lith__dq_close(dq->idle[i]);
  pthread_mutex_destroy(&dq->mu);
  free(dq->addresses);
  free(dq->database);
  free(dq);
}
