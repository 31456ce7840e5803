/*
 * lithd store on a dqlite cluster (see dqlite.h, store.h).
 *
 * Design:
 *   - Vetting (struct vet): the policy's questions are asked of SQLite
 *     itself, on an in-memory connection holding the cluster's schema,
 *     never of a scanner of our own. Each statement is prepared there
 *     first, under the same authorizer lith gives the local write
 *     connection (lith_command_rule, then lithd's); a refusal, a syntax
 *     error, a second statement in one "sql" fail the statement before
 *     anything is sent. From that statement come the parameter positions
 *     (lithd__bind_plan), the read-only test (lithd__check_read), whether
 *     rows come back (its column count), the declared types, and which
 *     top-level INSERT/UPDATE/DELETE it is (seen by the authorizer: what
 *     dqlite's exec counts are about). A prepare that fails with an SQL
 *     error reads the cluster's schema_version; if it moved, the schema is
 *     read again (through the same connection: a command sees the
 *     uncommitted schema of its own batch) and the prepare tried once more.
 *     The writer thread has one vetting connection, each pooled read
 *     connection its own. What no authorizer sees — a foreign key whose
 *     parent is named _lith_* — is lith's rule too (lith_command_check): a
 *     command's statement that made or altered a table (as
 *     lith_command_needs_check says) is followed, once it ran, by a fresh
 *     copy of the schema as the command's own connection sees it, and the
 *     check on that copy (check_schema); a refusal fails the statement, and
 *     the command or the step's savepoint undoes it (#32: one such key made
 *     the writer's clean-up of _lith_batches fail, and every write).
 *   - Rows are taken through the policy's calls as they come
 *     (lithd__row_room, lithd__put_cell), so the local limits hold.
 *   - Writes: lith__dqw_submit; `done` on the writer thread turns the
 *     outcome into a lith code, pushes the request on `ready` (mutex) and
 *     wakes the loop. `inflight` bounds the commands in the writer.
 *   - Reads: uv_queue_work; a pool thread takes an idle leader connection
 *     (or makes one). A read is run again only if it failed before any of
 *     its statements was sent (the leader could not be reached, or BEGIN
 *     failed): a read that reached the leader is never run twice.
 *   - Schema: apply_schema, one transaction (dqlite.h says why).
 *   - Connection settings: the commands of a writer batch share the
 *     leader connection, so a flag pragma a command sets (vet_auth:
 *     defer_foreign_keys, recursive_triggers; never in a read) is put back
 *     right after its savepoint, whatever its outcome (FLAGS_BACK,
 *     lith__dqw_tx_after), and PRAGMA foreign_keys in a held batch's
 *     autocommit changes between two transactions of its alone command
 *     and is put back once it ended (dq_step_foreign_keys). What such a
 *     command commits passes PRAGMA foreign_key_check first (fk_settled):
 *     SQLite's own count of deferred violations is the leader's, out of
 *     reach.
 */
#include "dqlite.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client.h"
#include "dq_snapshot.h"
#include "log.h"
#include "sqljson_int.h"
#include "store_int.h"
#include "writer.h"

#define DQ_IDLE_MAX 16

/* A marker in r->err.code: a statement failed in the writer; the code and
 * message come with the writer's answer (result_failed). */
#define DQ_PENDING (-1)

/* ---- Vetting ---------------------------------------------------------------- */

/* Which top-level change a statement makes, as its authorizer saw it. */
enum { DML_NONE, DML_INSERT, DML_OTHER };

/* A statement vetted before: prepared on the vetting connection, kept for
 * the next time the same text comes (a workload repeats its statements:
 * preparing each anew cost the writer thread ~13% of its rate at 64
 * connections). The rules are decided at prepare time and do not change
 * while the connection lives; a new schema is a new connection. */
typedef struct vetted {
  char *sql;        /* the text, malloc'd; NULL: a free slot */
  uint64_t hash;    /* of sql */
  int write;        /* vetted as a command's (lith's rules too) or a read's */
  int dml;          /* DML_* */
  int check;        /* lith's rule on the schema must follow it (lith_command_needs_check) */
  unsigned flags;   /* FLAG_*: the connection flags it sets */
  sqlite3_stmt *st; /* never stepped: what the policy reads of it */
  uint64_t used;    /* the vet's tick when last used: the oldest goes first */
} vetted;

#define VET_CACHE 64

/* The flag pragmas a command may set (lith_command_sets_flag), each put
 * back when the command ends, whatever its outcome (lith__dqw_tx_after):
 * the commands of a batch share the leader's connection. dqlite's
 * connections start with SQLite's defaults, both off. */
enum { FLAG_DEFER = 1, FLAG_RECURSIVE = 2 };
static const char *const FLAGS_BACK[] = {"", "PRAGMA defer_foreign_keys = OFF",
                                         "PRAGMA recursive_triggers = OFF",
                                         "PRAGMA defer_foreign_keys = OFF; PRAGMA recursive_triggers = OFF"};

typedef struct vet {
  sqlite3 *conn; /* NULL until first used */
  vetted cache[VET_CACHE];
  uint64_t tick;
  int64_t schema_version; /* the cluster's, when the schema was read */
  int write;              /* vetting a command's statement: lith's rules too */
  int loading;            /* replaying the cluster's schema: no rules */
  int dml;                /* DML_* of the statement last prepared */
  int check;              /* ... and whether lith's rule on the schema must follow it */
  unsigned flags;         /* ... and the FLAG_* it sets */
  /* The writer's vet only: the command running (one at a time there). */
  unsigned flags_set; /* FLAG_* it set (FLAG_DEFER: since its last COMMIT) */
  int fk_changed;     /* it turned foreign_keys off or on (dq_step_foreign_keys) */
  char why[160];      /* lith's rule's refusal */
  const lithd_dq_options *o;
} vet;

/* Where statements go: a writer command or a leader connection. */
typedef struct dq_run {
  lith__dqw_tx *tx; /* the writer's command, or NULL */
  lith__dq_conn *c; /* a read: the leader connection, or NULL */
  uint32_t db;      /* a read: the open database */
  int lost;         /* a read: the connection failed */
  int sent;         /* a read: a statement of the client's reached the node */
  int retry;        /* a command: the writer lost its connection (LITH_DQW_RETRY) */
  int64_t deadline; /* a read: lith_clock_ms by which the whole read ends (max_run_ms) */
  vet *v;
  lithd_batch *b;
  lithd_result *r;
} dq_run;

static int vet_auth(void *ctx, int action, const char *a, const char *b, const char *c, const char *d) {
  vet *v = ctx;
  int rc;
  if (v->loading)
    return SQLITE_OK;
  if (v->write) {
    /* lith's rule, _lith_* tables included (the writer's and _lith_schema):
     * the same as on a local file, by construction */
    if (lith_command_rule(action, a, b, c, v->why, sizeof v->why) != SQLITE_OK)
      return SQLITE_DENY;
    if (lith_command_needs_check(action)) /* a table made or altered: check_schema after it */
      v->check = 1;
  }
  /* A flag pragma acts where the text is prepared: a command's is put back
   * when it ends (FLAGS_BACK); a read's EXPLAIN PRAGMA would change a
   * pooled leader connection that nothing puts back. */
  if (lith_command_sets_flag(action, a, b) && v->write)
    v->flags |= strcasecmp(a, "defer_foreign_keys") == 0 ? FLAG_DEFER : FLAG_RECURSIVE;
  else if (lith_command_sets_flag(action, a, b)) {
    snprintf(v->why, sizeof v->why,
             "PRAGMA %s = ... is not run in a read on --dqlite (nothing would put it back): send it in a "
             "write, where it lasts its command",
             a);
    return SQLITE_DENY;
  }
  if (v->o->authorizer != NULL &&
      (rc = v->o->authorizer(v->o->authorizer_ctx, action, a, b, c, d)) != SQLITE_OK)
    return rc;
  if (d == NULL && v->dml == DML_NONE) {
    if (action == SQLITE_INSERT)
      v->dml = DML_INSERT;
    else if (action == SQLITE_UPDATE || action == SQLITE_DELETE)
      v->dml = DML_OTHER;
  }
  return SQLITE_OK;
}

static void vet_close(vet *v) {
  for (int k = 0; k < VET_CACHE; k++) {
    sqlite3_finalize(v->cache[k].st);
    free(v->cache[k].sql);
  }
  memset(v->cache, 0, sizeof v->cache);
  sqlite3_close(v->conn);
  v->conn = NULL;
}

static uint64_t text_hash(const char *s) { /* FNV-1a */
  uint64_t h = 14695981039346656037ull;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static vetted *vet_find(vet *v, const char *sql, uint64_t h) {
  for (int k = 0; k < VET_CACHE; k++) {
    vetted *e = &v->cache[k];
    if (e->sql != NULL && e->hash == h && e->write == v->write && strcmp(e->sql, sql) == 0) {
      e->used = ++v->tick;
      return e;
    }
  }
  return NULL;
}

/* Keep st (taken: the cache finalizes it) in the oldest slot; 0, or -1
 * when out of memory (st finalized). */
static int vet_keep(vet *v, const char *sql, uint64_t h, sqlite3_stmt *st) {
  vetted *e = &v->cache[0];
  for (int k = 1; k < VET_CACHE && e->sql != NULL; k++)
    if (v->cache[k].sql == NULL || v->cache[k].used < e->used)
      e = &v->cache[k];
  char *copy = strdup(sql);
  if (copy == NULL) {
    sqlite3_finalize(st);
    return -1;
  }
  sqlite3_finalize(e->st);
  free(e->sql);
  *e = (vetted){copy, h, v->write, v->dml, v->check, v->flags, st, ++v->tick};
  return 0;
}

/* Run a query of our own (not a client's) on the run's connection. */
static int own_query(dq_run *rn, const char *sql, lith__dq_rows *rows) {
  lith__dq_rows_init(rows);
  if (rn->tx != NULL) {
    int rc = lith__dqw_query(rn->tx, sql, NULL, 0, rows);
    if (rc == LITH_DQW_RETRY)
      rn->retry = 1;
    return rc == LITH_DQW_OK ? 0 : -1;
  }
  return lith__dq_query_sql(rn->c, rn->db, sql, NULL, 0, rows) == LITH_DQ_OK ? 0 : -1;
}

static int cluster_schema_version(dq_run *rn, int64_t *out) {
  lith__dq_rows rows;
  int rc = own_query(rn, "PRAGMA schema_version", &rows);
  if (rc == 0 && rows.nrows == 1 && rows.ncols == 1)
    *out = lith__dq_rows_at(&rows, 0, 0)->i;
  else
    rc = -1;
  lith__dq_rows_free(&rows);
  return rc;
}

/* A fresh vetting connection with the cluster's schema, as the run's
 * connection sees it. 0, or -1 (the connection failed: nothing to vet
 * against; the statement fails with the reason in r). */
static int vet_load(dq_run *rn) {
  vet *v = rn->v;
  lith__dq_rows rows;
  int64_t version = 0;
  lith__dq_rows_init(&rows); /* freed below even when the first query fails and this one is never sent */
  vet_close(v);
  if (sqlite3_open_v2(":memory:", &v->conn, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK)
    goto fail;
  /* As lith sets its own connections (lith.h, authorizer). */
  sqlite3_db_config(v->conn, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
  sqlite3_db_config(v->conn, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, NULL);
  sqlite3_db_config(v->conn, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, NULL);
  if (v->o->on_connect != NULL && v->o->on_connect(v->o->on_connect_ctx, v->conn) != SQLITE_OK)
    goto fail;
  if (cluster_schema_version(rn, &version) != 0 ||
      own_query(
          rn,
          "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
          "ORDER BY rowid",
          &rows) != 0) {
    lith__dq_rows_free(&rows);
    goto fail;
  }
  v->loading = 1;
  for (size_t k = 0; k < rows.nrows; k++) {
    const lith__dq_value *sql = lith__dq_rows_at(&rows, k, 0);
    /* A virtual table makes its shadow tables itself: their own CREATE
     * then fails as "already exists", which is what should happen. */
    if (sql->type == LITH_DQ_TEXT)
      sqlite3_exec(v->conn, (const char *)sql->p, NULL, NULL, NULL);
  }
  v->loading = 0;
  lith__dq_rows_free(&rows);
  sqlite3_set_authorizer(v->conn, vet_auth, v);
  v->schema_version = version;
  return 0;
fail:
  vet_close(v);
  return -1;
}

/* Statements left after the first: only blanks, ';' and comments (as
 * lith's stmt_cache reads them). */
static int only_space(const char *s) {
  for (s = lithd__sql_lead(s); *s == ';'; s = lithd__sql_lead(s + 1))
    ;
  return *s == '\0';
}

/* Prepare statement i on the vetting connection (or find it vetted
 * before): *out, the vet's (never the caller's to finalize), v->dml its
 * kind; or the statement's error (the policy's answer to a failed prepare)
 * in rn->r. */
static int vet_prepare(dq_run *rn, int i, sqlite3_stmt **out) {
  vet *v = rn->v;
  const char *sql = rn->b->stmts[i].sql, *tail = NULL;
  int src = SQLITE_OK;
  uint64_t h = text_hash(sql);
  *out = NULL;
  v->write = rn->tx != NULL;
  vetted *seen = v->conn != NULL ? vet_find(v, sql, h) : NULL;
  if (seen != NULL) {
    v->dml = seen->dml;
    v->check = seen->check;
    v->flags = seen->flags;
    *out = seen->st;
    return LITH_OK;
  }
  for (int attempt = 0; attempt < 2; attempt++) {
    if (v->conn == NULL && vet_load(rn) != 0) {
      if (rn->c != NULL && !lith__dq_connected(rn->c))
        rn->lost = 1;
      return lithd__fail(rn->r, LITH_BUSY, i, "cannot read the cluster's schema to check the statement: %s",
                         rn->c != NULL ? lith__dq_errmsg(rn->c) : "the dqlite leader did not answer");
    }
    v->why[0] = '\0';
    v->dml = DML_NONE;
    v->check = 0;
    v->flags = 0;
    src = sqlite3_prepare_v2(v->conn, sql, -1, out, &tail);
    if (src == SQLITE_OK || (src & 0xff) != SQLITE_ERROR || attempt > 0)
      break;
    /* An SQL error may be a schema that moved since it was read. */
    int64_t version;
    if (strncmp(sqlite3_errmsg(v->conn), "not authorized", 14) == 0 ||
        cluster_schema_version(rn, &version) != 0 || version == v->schema_version)
      break;
    vet_close(v);
  }
  if (src != SQLITE_OK) {
    char msg[LITHD_ERRMSG_MAX];
    if (v->why[0])
      snprintf(msg, sizeof msg, "prepare: %s (%s)", sqlite3_errmsg(v->conn), v->why);
    else
      snprintf(msg, sizeof msg, "prepare: %s", sqlite3_errmsg(v->conn));
    return lithd__prepare_failed(rn->r, i, lith_from_sqlite(src), v->conn, msg);
  }
  if (*out == NULL)
    return lithd__fail(rn->r, LITH_MISUSE, i, "prepare: empty statement");
  if (tail != NULL && !only_space(tail)) {
    sqlite3_finalize(*out);
    *out = NULL;
    return lithd__fail(rn->r, LITH_MISUSE, i, "prepare: more than one statement in \"%.60s\"", sql);
  }
  /* SQLite tells the authorizer of an UPDATE on sqlite_master while it
   * prepares a table-valued pragma (SELECT * FROM pragma_table_info(...)):
   * a statement that writes nothing changed nothing, whatever it saw */
  if (sqlite3_stmt_readonly(*out))
    v->dml = DML_NONE;
  if (vet_keep(v, sql, h, *out) != 0) {
    *out = NULL;
    return lithd__fail(rn->r, LITH_NOMEM, i, "out of memory");
  }
  return LITH_OK;
}

/* ---- Running ---------------------------------------------------------------- */

/* The result's error; in a command it also fails the command on its own
 * (LITH_DQW_USER). Returns the code to return from the run. */
static int run_failed(dq_run *rn, int i, int code) {
  if (rn->tx)
    return lith__dqw_error(rn->tx, "statement %d: %s", i, rn->r->err.message);
  return code;
}

/* lith's rule on the schema, after a command's statement i that made or
 * altered a table ran on the cluster (inside the command: nothing is
 * committed yet). What no authorizer sees — a foreign key onto _lith_*
 * (lith_command_check) — is read off a fresh copy of the cluster's schema
 * as the command's own connection sees it now, its uncommitted changes
 * included (vet_load; the later statements are vetted against it too).
 * LITH_OK; or the statement's refusal in rn->r (403, as on a local file)
 * and a writer code that fails it (LITH_DQW_USER: the command, or its
 * step's savepoint, is undone), or LITH_DQW_RETRY. */
static int check_schema(dq_run *rn, int i) {
  vet *v = rn->v;
  char why[256], msg[LITHD_ERRMSG_MAX];
  if (vet_load(rn) != 0) { /* closes v first: the vetted statements are gone */
    if (rn->retry)
      return LITH_DQW_RETRY;
    lithd__fail(rn->r, LITH_BUSY, i,
                "cannot read the cluster's schema to check what the statement left: the dqlite leader did "
                "not answer");
    return run_failed(rn, i, LITH_BUSY);
  }
  v->loading = 1; /* lith's own statement: no rules */
  int src = lith_command_check(v->conn, why, sizeof why);
  v->loading = 0;
  if (src == SQLITE_OK)
    return LITH_OK;
  if (src == SQLITE_DENY)
    snprintf(msg, sizeof msg, "not authorized (%s)", why);
  else
    snprintf(msg, sizeof msg, "%s", why);
  lithd__check_failed(rn->r, i, lith_from_sqlite(src), msg);
  return run_failed(rn, i, rn->r->err.code);
}

static int to_dq(dq_run *rn, int i, const value *v, lith__dq_value *out) {
  switch (v->type) {
  case SQLITE_INTEGER: *out = lith__dq_int(v->u.i); break;
  case SQLITE_FLOAT: *out = lith__dq_float(v->u.d); break;
  case SQLITE_TEXT:
    if (memchr(v->u.p, '\0', v->n) != NULL)
      return lithd__fail(
          rn->r, LITHD_BAD_REQUEST, i,
          "a string holding U+0000 cannot travel through dqlite's protocol: send it as a blob");
    *out = lith__dq_text((const char *)v->u.p);
    break;
  case SQLITE_BLOB: *out = lith__dq_blob(v->u.p, v->n); break;
  default: *out = lith__dq_null(); break;
  }
  return LITH_OK;
}

/* Statement i's values in the positions SQLite gave them on the vetting
 * connection. */
static int bind_params(dq_run *rn, int i, sqlite3_stmt *st, lith__dq_value *pv, unsigned *n) {
  const value *vals[LITH_DQ_MAX_PARAMS];
  int count = sqlite3_bind_parameter_count(st), rc;
  if (count > LITH_DQ_MAX_PARAMS)
    return lithd__fail(rn->r, LITHD_BAD_REQUEST, i,
                       "the statement has %d parameters: dqlite binds at most %d", count, LITH_DQ_MAX_PARAMS);
  if ((rc = lithd__bind_plan(rn->r, i, &rn->b->stmts[i], st, vals)) != LITH_OK)
    return rc;
  for (int k = 0; k < count; k++)
    if ((rc = to_dq(rn, i, vals[k], &pv[k])) != LITH_OK)
      return rc;
  *n = (unsigned)count;
  return LITH_OK;
}

/* Rows as they came, through the policy's limits; the names are the
 * node's (what it ran), the declared types the vetting statement's. */
static int take_rows(dq_run *rn, int i, sqlite3_stmt *st, const lith__dq_rows *rows, stmt_out *o) {
  lithd_result *r = rn->r;
  const lithd_limits *lim = &rn->b->lim;
  int rc, ncols = (int)rows->ncols;
  if (o->cols == NULL && ncols > 0) {
    const char **decls = NULL;
    if (ncols == sqlite3_column_count(st) && (decls = malloc((size_t)ncols * sizeof *decls)) != NULL)
      for (int col = 0; col < ncols; col++)
        decls[col] = sqlite3_column_decltype(st, col);
    rc = lithd__columns(r, i, ncols, rows->names, decls, o);
    free(decls);
    if (rc != LITH_OK)
      return rc;
  }
  for (size_t row = 0; row < rows->nrows; row++) {
    if ((rc = lithd__row_room(r, lim, i)) != LITH_OK)
      return rc;
    for (int col = 0; col < ncols; col++) {
      const lith__dq_value *dv = lith__dq_rows_at(rows, row, (unsigned)col);
      value v = {.type = SQLITE_NULL};
      switch (dv->type) {
      case LITH_DQ_INTEGER:
      case LITH_DQ_UNIXTIME:
      case LITH_DQ_BOOLEAN:
        v.type = SQLITE_INTEGER;
        v.u.i = dv->i;
        break;
      case LITH_DQ_FLOAT:
        v.type = SQLITE_FLOAT;
        v.u.d = dv->f;
        break;
      case LITH_DQ_ISO8601:
        /* the node sends a NULL of a DATETIME, DATE or TIMESTAMP column
         * as an empty ISO8601 text: NULL again (a '' stored there reads
         * NULL too: the wire cannot tell them apart). Prisma's migrations
         * read their rolled_back_at so. */
        if (dv->n == 0)
          break;
        /* fall through */
      case LITH_DQ_TEXT:
      case LITH_DQ_BLOB:
        v.type = dv->type == LITH_DQ_BLOB ? SQLITE_BLOB : SQLITE_TEXT;
        v.n = dv->n;
        v.u.p = dv->p;
        break;
      default: break;
      }
      if ((rc = lithd__put_cell(r, lim, i, o, v)) != LITH_OK)
        return rc;
    }
    lithd__row_done(r, o);
  }
  return LITH_OK;
}

/* A read's failure on the connection: FAILURE is the statement's, anything
 * else lost the connection. */
static int read_failed(dq_run *rn, int i, int dqrc) {
  if (dqrc == LITH_DQ_FAILURE) {
    uint64_t code = lith__dq_errcode(rn->c);
    if (code == LITH_DQ_IOERR_NOT_LEADER || code == LITH_DQ_IOERR_LEADERSHIP_LOST) {
      rn->lost = 1;
      lith__dq_disconnect(rn->c);
      return lithd__fail(rn->r, LITH_BUSY, i, "the dqlite leader changed during the read: %s; retry",
                         lith__dq_errmsg(rn->c));
    }
    if ((code & 0xff) == SQLITE_INTERRUPT) /* the node's bound: ours (lith__dq_max_run), or its lower one */
      return lithd__fail(rn->r, LITHD_TIMEOUT, i,
                         "the statements ran longer than %" PRId64 " ms (max_run_ms; on the dqlite node)",
                         rn->b->lim.max_run_ms);
    int lrc = lith_from_sqlite((int)code);
    return lithd__fail(rn->r, lrc == LITH_OK ? LITH_ERROR : lrc, i, "%s", lith__dq_errmsg(rn->c));
  }
  rn->lost = 1;
  if (dqrc == LITH_DQ_TIMEOUT && rn->deadline != 0 && lith_clock_ms() >= rn->deadline)
    return lithd__fail(rn->r, LITHD_TIMEOUT, i, "the statements ran longer than %" PRId64 " ms (max_run_ms)",
                       rn->b->lim.max_run_ms);
  if (dqrc == LITH_DQ_TOOBIG)
    return lithd__fail(
        rn->r, LITHD_RESULT_TOO_LARGE, i,
        "the answer would hold more than dqlite's client takes in one frame (64 MiB): read fewer rows at a "
        "time");
  return lithd__fail(rn->r, dqrc == LITH_DQ_NOMEM ? LITH_NOMEM : LITH_BUSY, i,
                     "the dqlite leader was lost during the read (%s); retry", lith__dq_errmsg(rn->c));
}

/* One part of a query's rows (lith__dq_rows_cb): taken through the
 * policy; a refusal stops the query (its error is in the result; in a
 * command the writer is told too). */
struct part_ctx {
  dq_run *rn;
  int i;
  sqlite3_stmt *st;
  stmt_out *o;
  int rc;
};

static int take_part(const lith__dq_rows *part, void *arg) {
  struct part_ctx *pc = arg;
  pc->rc = take_rows(pc->rn, pc->i, pc->st, part, pc->o);
  if (pc->rc != LITH_OK && pc->rn->tx != NULL)
    lith__dqw_error(pc->rn->tx, "statement %d: %s", pc->i, pc->rn->r->err.message);
  return pc->rc != LITH_OK;
}

/* The statement failed in the writer: its code and message come with the
 * writer's answer. */
static int pending(dq_run *rn, int i, int rc) {
  rn->r->err.code = DQ_PENDING;
  rn->r->err.statement = i;
  return rc;
}

/* Statement i: vetted here, then sent. Returns LITH_OK; in a command a
 * writer code (LITH_DQW_USER after the policy refused it, the node's
 * failure pending for result_failed, LITH_DQW_RETRY); in a read a lith
 * code with the error in rn->r. */
static int run_one(dq_run *rn, int i) {
  const char *sql = rn->b->stmts[i].sql;
  stmt_out *o = &rn->r->outs[i];
  lith__dq_value pv[LITH_DQ_MAX_PARAMS];
  sqlite3_stmt *st = NULL;
  unsigned n = 0;
  const stmt_spec *spec = &rn->b->stmts[i];
  int rc, first = rn->c != NULL && !spec->describe ? lithd__first_keyword(sql) : FIRST_QUERY, dml;

  if (first == FIRST_OTHER) { /* the local read's order: refused unprepared */
    rc = lithd__not_a_query(rn->r, i);
    goto refused;
  }
  int vac_now; /* never set here: the cluster runs no VACUUM */
  if (rn->tx != NULL && !spec->describe && (rc = lithd__vacuum_rule(rn->r, rn->b, i, 0, &vac_now)) != LITH_OK)
    goto refused; /* VACUUM INTO; VACUUM alone, which the cluster cannot run */
  rc = vet_prepare(rn, i, &st);
  if (rn->retry) {
    rc = LITH_DQW_RETRY; /* the writer lost its connection reading the schema */
    goto out;
  }
  if (rc != LITH_OK)
    goto refused;
  if (spec->describe) { /* a read's: prepared on the vet, never sent */
    rc = lithd__describe(rn->r, i, st, o);
    goto out;
  }
  if ((rc = lithd__write_refused(rn->r, i, rn->b, st)) !=
      LITH_OK) /* before the read's own refusal: its code */
    goto refused;
  dml = rn->v->dml;
  if (rn->tx != NULL && rn->v->flags != 0) { /* put back when the command ends, whatever it does */
    rn->v->flags_set |= rn->v->flags;
    if ((rc = lith__dqw_tx_after(rn->tx, FLAGS_BACK[rn->v->flags_set & 3])) != LITH_DQW_OK) {
      rc = pending(rn, i, rc);
      goto out;
    }
  }
  if (rn->c != NULL && (rc = lithd__check_read(rn->r, i, first, st)) != LITH_OK)
    goto refused;
  if ((rc = bind_params(rn, i, st, pv, &n)) != LITH_OK)
    goto refused;

  if (sqlite3_column_count(st) > 0 || rn->c != NULL) {
    /* Rows through the policy as each part arrives: a limit stops the
     * query on the node (memory: one part, never the whole answer). */
    struct part_ctx pc = {rn, i, st, o, LITH_OK};
    if (rn->c != NULL)
      rn->sent = 1;
    rc = rn->tx ? lith__dqw_query_each(rn->tx, sql, pv, n, take_part, &pc)
                : lith__dq_query_each(rn->c, rn->db, sql, pv, n, take_part, &pc, rn->deadline);
    if (rc == LITH_OK) {
      if (o->cols == NULL && o->ncols == 0 && (rc = lithd__stmt_columns(rn->r, i, st, o)) != LITH_OK)
        goto refused;
      if (dml != DML_NONE)
        o->changes = o->nrows; /* RETURNING: a row for each row changed */
      goto out;
    }
    if (pc.rc != LITH_OK) { /* the policy stopped it: its error is in rn->r */
      rc = rn->tx ? LITH_DQW_USER : pc.rc;
      if (rn->c != NULL && !lith__dq_connected(rn->c))
        rn->lost = 1;
      goto out;
    }
    if (rn->tx && rc == LITH_DQW_TOOBIG) {
      lithd__fail(
          rn->r, LITHD_RESULT_TOO_LARGE, i,
          "the answer would hold more than dqlite's client takes in one frame (64 MiB): read fewer rows at a "
          "time");
      goto out;
    }
    if (rn->c != NULL) {
      rc = read_failed(rn, i, rc);
      goto out;
    }
    rc = pending(rn, i, rc);
    goto out;
  }
  lith__dq_result res = {0, 0};
  int check = rn->v->check; /* st and the vet's flags go with a reload */
  rc = lith__dqw_exec(rn->tx, sql, pv, n, &res);
  if (rc != LITH_DQW_OK) {
    rc = pending(rn, i, rc);
    goto out;
  }
  if (check && (rc = check_schema(rn, i)) != LITH_OK)
    goto out;
  /* dqlite sends the connection's counts (sqlite3_changes and
   * last_insert_rowid), which keep the last INSERT's, UPDATE's or DELETE's
   * (the writer's own _lith_batches row included): they are this
   * statement's only when it is one of those (its authorizer said so), and
   * the rowid only for an INSERT that inserted. */
  if (dml != DML_NONE)
    o->changes = (int64_t)res.rows_affected;
  if (dml == DML_INSERT)
    o->last_rowid = o->changes > 0 ? (int64_t)res.last_insert_id : 0;
  goto out;

refused: /* the policy's answer is in rn->r->err */
  rc = run_failed(rn, i, rc);
out: /* st is the vet's */
  return rc;
}

/* A fresh result for rn's batch into *out (the previous run's freed). */
static int new_result(dq_run *rn, lithd_result **out) {
  int rc = lithd__result_renew(out, rn->b);
  rn->r = *out;
  return rc;
}

static int result_failed(lithd_result *r, int rc, const lith__dqw_err *err, char *errmsg, size_t cap);

/* ---- Steps (the rules: sql/steps.c) ------------------------------------------
 * In a command each step runs in a savepoint of the writer's
 * (lith__dqw_savepoint), so a failed one is undone alone and the command
 * goes on; a read runs them on its one snapshot. The client's own
 * savepoints are not run: the writer refuses savepoint statements (its
 * savepoints are the command's and the steps'). */

#define DQ_NO_SAVEPOINT                                                                               \
  "SAVEPOINT, RELEASE and ROLLBACK TO are not run on --dqlite (lithd's own savepoints undo a failed " \
  "statement alone): send the statements without them"

/* What a command changed of foreign keys, checked before what it did
 * commits, as lith checks on a file (batch.c): after foreign_keys was off
 * (lith_tx_foreign_keys), or once defer_foreign_keys was set. SQLite's
 * count of deferred violations is the leader connection's, out of reach
 * here, and an OFF forgets it: PRAGMA foreign_key_check reads the database
 * itself. LITH_DQW_OK; LITH_DQW_USER with the violation in rn->r
 * (LITH_CONSTRAINT, 409 as on a file); or the writer's code. */
static int fk_settled(dq_run *rn) {
  vet *v = rn->v;
  int64_t n = 0;
  if (!(v->flags_set & FLAG_DEFER) && !v->fk_changed)
    return LITH_DQW_OK;
  int rc = lith__dqw_query_int(
      rn->tx, &n, "SELECT count(*) FROM (SELECT 1 FROM pragma_foreign_key_check LIMIT 1)", NULL, 0);
  if (rc == LITH_DQW_RETRY)
    rn->retry = 1;
  if (rc != LITH_DQW_OK)
    return rc == LITH_DQW_RETRY ? rc : pending(rn, -1, rc);
  if (n == 0)
    return LITH_DQW_OK;
  lithd__fail(rn->r, LITH_CONSTRAINT, -1,
              v->fk_changed ? "FOREIGN KEY constraint failed (PRAGMA foreign_key_check, after foreign keys "
                              "were off)"
                            : "FOREIGN KEY constraint failed (PRAGMA foreign_key_check: PRAGMA "
                              "defer_foreign_keys was set, and no violation may commit)");
  return lith__dqw_error(rn->tx, "%s", rn->r->err.message);
}

/* A command's statement failed with the writer's rc: its error, now (the
 * next statement would replace the writer's), as a lith code. */
static int step_error(dq_run *rn, int i, int rc) {
  lithd_result *r = rn->r;
  char why[LITH_ERRMSG_MAX];
  if (rc == LITH_DQW_RETRY) {
    rn->retry = 1; /* the run is abandoned: the batch runs again */
    return lithd__fail(r, LITH_BUSY, i, "the dqlite leader was lost");
  }
  int code = result_failed(r, rc, lith__dqw_tx_err(rn->tx), why, sizeof why);
  if (r->err.code == LITH_OK || r->err.code == DQ_PENDING)
    lithd__fail(r, code, i, "%s", why[0] ? why : lith_errstr(code));
  return r->err.code;
}

static int dq_step_run(lithd_steps *s, int i) {
  dq_run *rn = s->ctx;
  if (rn->b->stmts[i].txctl == TXC_SAVEPOINT)
    return lithd__fail(rn->r, LITHD_FORBIDDEN, i, DQ_NO_SAVEPOINT);
  int rc = run_one(rn, i);
  if (rn->tx == NULL || rc == LITH_DQW_OK) /* a read's codes are lith's */
    return rc;
  return step_error(rn, i, rc);
}

static int dq_nest_body(lith__dqw_tx *tx, void *arg) {
  (void)tx;
  return lithd__steps_nested(arg);
}

static int dq_step_nest(lithd_steps *s, int (*fn)(lithd_steps *s), int stmt) {
  dq_run *rn = s->ctx;
  lithd_steps_nest nc = {s, fn, LITH_OK};
  int rc = lith__dqw_savepoint(rn->tx, dq_nest_body, &nc);
  if (rc == nc.rc && lith__dqw_tx_state(rn->tx) == LITH_DQW_OK)
    return rc;
  if (rc == LITH_DQW_RETRY || lith__dqw_tx_state(rn->tx) == LITH_DQW_RETRY)
    return step_error(rn, stmt, LITH_DQW_RETRY);
  /* the undo was refused: the failure ended the transaction, and the
   * command fails with it */
  if (rn->r->err.code == LITH_OK && stmt >= 0)
    step_error(rn, stmt, lith__dqw_tx_state(rn->tx));
  return rn->r->err.code != LITH_OK ? rn->r->err.code : LITH_ABORTED;
}

static int dq_step_fatal(lithd_steps *s, int i, int rc) {
  dq_run *rn = s->ctx;
  (void)i, (void)rc;
  if (rn->tx == NULL)
    return rn->lost; /* the read's connection went: nothing after it can run */
  return rn->retry || lith__dqw_tx_state(rn->tx) != LITH_DQW_OK;
}

/* A held batch (an interactive transaction's run, in an alone command):
 * the stream's COMMIT or ROLLBACK ends the command's transaction here
 * (lith__dqw_tx_end), as lith_tx_commit / lith_tx_rollback on a file. */
static int dq_step_end(lithd_steps *s, int txctl, int i) {
  dq_run *rn = s->ctx;
  int rc = txctl == TXC_COMMIT ? fk_settled(rn) : LITH_DQW_OK;
  if (rc == LITH_DQW_USER)
    return rn->r->err.code; /* a violation: the transaction stays open, as SQLite's COMMIT leaves it */
  if (rc == LITH_DQW_OK)
    rc = lith__dqw_tx_end(rn->tx, txctl == TXC_COMMIT);
  if (rc == LITH_DQW_OK)
    rn->v->flags_set &= ~(unsigned)FLAG_DEFER; /* SQLite's COMMIT and ROLLBACK end it */
  return rc == LITH_DQW_OK ? LITH_OK : step_error(rn, i, rc);
}

/* PRAGMA foreign_keys in a held batch's autocommit (libSQL's migrate(),
 * Prisma's table redefinition): commit what ran so far (checked first),
 * change the setting between two transactions of the alone command, and
 * the writer puts it back once the command ended, before any other
 * command (lith__dqw_tx_setting): it lasts exactly this command, on this
 * connection. A new leader's connection starts with foreign keys on
 * (libdqlite's), so a leader lost meanwhile ends the command (an alone
 * command never runs again) with nothing changed elsewhere. */
static int dq_step_foreign_keys(lithd_steps *s, int on, int i) {
  dq_run *rn = s->ctx;
  int rc = fk_settled(rn);
  if (rc == LITH_DQW_USER)
    return rn->r->err.code;
  if (rc == LITH_DQW_OK)
    rc = lith__dqw_tx_setting(rn->tx, on ? "PRAGMA foreign_keys = ON" : "PRAGMA foreign_keys = OFF",
                              "PRAGMA foreign_keys = ON");
  if (rc != LITH_DQW_OK)
    return step_error(rn, i, rc);
  rn->v->flags_set &= ~(unsigned)FLAG_DEFER; /* committed */
  rn->v->fk_changed = 1;
  return LITH_OK;
}

static int dq_step_ended(lithd_steps *s) {
  dq_run *rn = s->ctx;
  return rn->retry || lith__dqw_tx_state(rn->tx) != LITH_DQW_OK;
}

static const lithd_steps_ops dq_write_steps = {dq_step_run, dq_step_nest,         dq_step_fatal,
                                               dq_step_end, dq_step_foreign_keys, dq_step_ended};
static const lithd_steps_ops dq_read_steps = {dq_step_run, NULL, dq_step_fatal, NULL, NULL, NULL};

static int run_cmd_steps(dq_run *rn) {
  lithd_steps st = {.ops = &dq_write_steps, .ctx = rn, .b = rn->b, .r = rn->r};
  int rc = lithd__steps_run(&st), state = lith__dqw_tx_state(rn->tx);
  if (rn->retry || state == LITH_DQW_RETRY)
    return LITH_DQW_RETRY;
  if (rc == LITH_OK && state == LITH_DQW_OK)
    return LITH_DQW_OK;
  if (rn->r->err.code == LITH_OK)
    lithd__fail(rn->r, rc != LITH_OK ? rc : LITH_ABORTED, -1, "the batch's transaction ended");
  /* the result's error is what the client is told (result_failed) */
  return lith__dqw_error(rn->tx, "%s", rn->r->err.message);
}

/* One run of b in the writer's command (a held batch: one run of its
 * transaction; the command's foreign keys are checked where it commits:
 * dq_step_end, dq_step_foreign_keys, tx_cmd). */
static int run_cmd_batch(lith__dqw_tx *tx, vet *v, lithd_batch *b, lithd_result **out) {
  dq_run rn = {.tx = tx, .v = v, .b = b};
  int rc = LITH_DQW_OK;
  if (!b->held) /* a command of its own: it starts as lithd left the connection */
    v->flags_set = 0, v->fk_changed = 0;
  if (new_result(&rn, out) != 0)
    return lith__dqw_error(tx, "out of memory");
  if (b->steps) {
    rc = run_cmd_steps(&rn);
  } else {
    for (int i = 0; i < b->n && rc == LITH_DQW_OK; i++)
      if ((rc = run_one(&rn, i)) == LITH_DQW_OK) /* RETRY included: the run is abandoned */
        rn.r->n = i + 1;
  }
  if (rc == LITH_DQW_OK && !b->held)
    rc = fk_settled(&rn);
  return rc;
}

/* The writer's answer as a lith code (and *errmsg when no statement of r
 * is to blame). */
static int result_failed(lithd_result *r, int rc, const lith__dqw_err *err, char *errmsg, size_t cap) {
  errmsg[0] = '\0';
  switch (rc) {
  case LITH_DQW_OK: return LITH_OK;
  case LITH_DQW_SQL:
  case LITH_DQW_MISUSE: {
    int code = rc == LITH_DQW_SQL ? lith_from_sqlite(err->code) : LITH_MISUSE;
    if (code == LITH_OK)
      code = LITH_ERROR;
    int cut = rc == LITH_DQW_SQL && (err->code & 0xff) == SQLITE_INTERRUPT; /* the node's bound */
    if (cut)
      code = LITHD_TIMEOUT;
    if (r != NULL && r->err.code == DQ_PENDING) { /* a statement of the run failed */
      if (cut)
        lithd_error_set(&r->err, code, r->err.statement,
                        "the statements ran longer than the bound (max_run_ms; cut on the dqlite node)");
      else
        lithd_error_set(&r->err, code, r->err.statement, "%s", err->errmsg);
      return code;
    }
    /* the COMMIT, blamed on this command (a deferred foreign key): no
     * statement to name */
    snprintf(errmsg, cap, "%.190s", err->errmsg);
    return code;
  }
  case LITH_DQW_USER:
    if (r != NULL && r->err.code != LITH_OK && r->err.code != DQ_PENDING)
      return r->err.code;
    if (r == NULL) { /* the run could not even begin its result */
      snprintf(errmsg, cap, "out of memory");
      return LITH_NOMEM;
    }
    break;
  case LITH_DQW_TOOBIG:
    if (r != NULL && r->err.code != LITH_OK && r->err.code != DQ_PENDING)
      return r->err.code;
    snprintf(errmsg, cap,
             "the answer would hold more than dqlite's client takes (64 MiB): read fewer rows at a time");
    return LITHD_RESULT_TOO_LARGE;
  case LITH_DQW_UNAVAILABLE:
    snprintf(errmsg, cap, "no dqlite leader could be reached: the command was not committed (%.100s)",
             err->errmsg);
    return LITH_BUSY;
  case LITH_DQW_UNKNOWN:
    snprintf(errmsg, cap,
             "the dqlite leader was lost after COMMIT was sent and no leader came back in time: the outcome "
             "is unknown (it may or may not have committed; read before retrying) (%.30s)",
             err->errmsg);
    return LITHD_OUTCOME_UNKNOWN;
  case LITH_DQW_CLOSED: snprintf(errmsg, cap, "lithd is shutting down"); return LITH_CLOSED;
  case LITH_DQW_NOMEM: snprintf(errmsg, cap, "out of memory"); return LITH_NOMEM;
  default: break;
  }
  snprintf(errmsg, cap, "%s: %.150s", lith__dqw_rc_str(rc), err->errmsg);
  return rc == LITH_DQW_MISUSE ? LITH_MISUSE : LITH_ERROR;
}

/* ---- The store ------------------------------------------------------------ */

typedef struct pooled {
  lith__dq_conn *c;
  uint32_t db;
  vet v;
} pooled;

typedef struct dq_store {
  lithd_store base; /* first */
  lithd_dq_options o;
  lith__dqw *w;
  char *addresses, *database;
  uv_loop_t *loop;
  uv_async_t wake;
  int wake_open, stopping;
  pthread_mutex_t mu;
  struct dq_req *ready, *ready_tail; /* answered, for the loop */
  int64_t inflight;                  /* loop thread only */
  vet wvet;                          /* the writer thread's */
  pooled *idle[DQ_IDLE_MAX];         /* reads' leader connections (mu) */
  int n_idle;
  struct dq_tx *txs;      /* interactive transactions whose command has not ended (loop) */
  atomic_int snap_cancel; /* set by the drain: snapshots in progress stop (dq_snapshot.h) */
} dq_store;

/* A request on its way (the store's part of it). */
typedef struct dq_req {
  lith__dqw_req w;
  uv_work_t work;
  lithd_store_req *r;
  dq_store *s;
  struct dq_req *next;
} dq_req;

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- Schema ---------------------------------------------------------------- */

/* A connection to the leader with the database open, or an error. */
static int leader_open(const char *addresses, const char *database, int timeout_ms, lith__dq_conn *c,
                       uint32_t *db) {
  int rc = lith__dq_connect_leader(c, addresses, timeout_ms);
  if (rc == LITH_DQ_OK)
    rc = lith__dq_open_writer(c, database, db); /* --schema's steps spill nothing (client.h) */
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
    /* The steps applied: _lith_schema says, else user_version, which is
     * where a local --db counts them (a file moved here by --restore). */
    rc = lith__dq_query_sql(
        c, db,
        "SELECT coalesce(max(version), (SELECT user_version FROM pragma_user_version)) FROM _lith_schema",
        NULL, 0, &rows);
  if (rc == LITH_DQ_OK && rows.nrows == 1 && rows.ncols == 1)
    version = lith__dq_rows_at(&rows, 0, 0)->i;
  lith__dq_rows_free(&rows);
  if (rc != LITH_DQ_OK)
    goto retry;
  if (version > s->n) {
    snprintf(err, errsz,
             "the cluster's schema is at step %" PRId64
             " (_lith_schema, else user_version), the --schema file has %d: "
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
  /* As lith_open's migrations on a file: what the steps left passes
   * PRAGMA foreign_key_check (an OFF of defer_foreign_keys forgets
   * SQLite's count), else nothing of them is kept. */
  if (version < s->n) {
    int64_t bad = 0;
    lith__dq_rows_init(&rows);
    rc = lith__dq_query_sql(c, db, "SELECT count(*) FROM (SELECT 1 FROM pragma_foreign_key_check LIMIT 1)",
                            NULL, 0, &rows);
    if (rc == LITH_DQ_OK && rows.nrows == 1 && rows.ncols == 1)
      bad = lith__dq_rows_at(&rows, 0, 0)->i;
    lith__dq_rows_free(&rows);
    if (rc != LITH_DQ_OK)
      goto retry;
    if (bad) {
      snprintf(err, errsz,
               "--schema steps %" PRId64 "..%d: FOREIGN KEY constraint failed (PRAGMA foreign_key_check: a "
               "row without its parent)",
               version + 1, s->n);
      lith__dq_exec_sql(c, db, "ROLLBACK", NULL, 0, NULL);
      return -1;
    }
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

static int apply_schema(const dq_store *ds, const lithd_schema *s, char *err, size_t errsz) {
  int64_t deadline = lith_clock_ms() + ds->o.failover_ms;
  lith__dq_conn *c = lith__dq_new(LITH_DQ_REQUEST_MS);
  uint32_t db = 0;
  int rc = -1;
  if (c == NULL) {
    snprintf(err, errsz, "out of memory");
    return -1;
  }
  for (;;) {
    if (!lith__dq_connected(c) &&
        leader_open(ds->addresses, ds->database, ds->o.failover_ms, c, &db) != LITH_DQ_OK) {
      snprintf(err, errsz, "no dqlite leader among %s: %s", ds->addresses, lith__dq_errmsg(c));
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

static int run_cmd(lith__dqw_tx *tx, void *arg) { /* the writer thread */
  dq_req *q = arg;
  return run_cmd_batch(tx, &q->s->wvet, q->r->batch, &q->r->result);
}

static void push_ready(dq_store *ds, dq_req *q) {
  q->next = NULL;
  pthread_mutex_lock(&ds->mu);
  if (ds->ready_tail)
    ds->ready_tail->next = q;
  else
    ds->ready = q;
  ds->ready_tail = q;
  pthread_mutex_unlock(&ds->mu);
  uv_async_send(&ds->wake);
}

static void cmd_done(lith__dqw_req *w) { /* the writer thread */
  dq_req *q = w->arg;
  q->r->rc = result_failed(q->r->result, w->rc, &w->err, q->r->errmsg, sizeof q->r->errmsg);
  push_ready(q->s, q);
}

/* The loop: answer everything ready. */
static void drain_ready(dq_store *ds) {
  dq_req *q;
  pthread_mutex_lock(&ds->mu);
  q = ds->ready;
  ds->ready = ds->ready_tail = NULL;
  pthread_mutex_unlock(&ds->mu);
  while (q != NULL) {
    dq_req *next = q->next;
    lithd_store_req *r = q->r;
    ds->inflight--; /* only writes come this way */
    free(q);
    r->cb(r);
    q = next;
  }
}

static void on_wake(uv_async_t *h) { drain_ready(h->data); }

static int dq_write(lithd_store *s, lithd_store_req *r) {
  dq_store *ds = (dq_store *)s;
  dq_req *q;
  if (ds->stopping || ds->w == NULL) {
    snprintf(r->errmsg, sizeof r->errmsg, "lithd is shutting down");
    return LITH_CLOSED;
  }
  if (ds->inflight >= ds->o.max_queue)
    return LITH_QUEUE_FULL;
  if ((q = calloc(1, sizeof *q)) == NULL)
    return LITH_NOMEM;
  q->r = r;
  q->s = ds;
  q->w.fn = run_cmd;
  q->w.arg = q;
  q->w.done = cmd_done;
  ds->inflight++;
  lith__dqw_submit(ds->w, &q->w);
  return LITH_OK;
}

/* ---- Reads ---------------------------------------------------------------- */

static pooled *take_conn(dq_store *ds) {
  pooled *p = NULL;
  pthread_mutex_lock(&ds->mu);
  if (ds->n_idle > 0)
    p = ds->idle[--ds->n_idle];
  pthread_mutex_unlock(&ds->mu);
  if (p != NULL)
    return p;
  if ((p = calloc(1, sizeof *p)) == NULL)
    return NULL;
  if ((p->c = lith__dq_new(LITH_DQ_REQUEST_MS)) == NULL) {
    free(p);
    return NULL;
  }
  p->v.o = &ds->o;
  return p;
}

static void pooled_free(pooled *p) {
  if (p == NULL)
    return;
  lith__dq_close(p->c);
  vet_close(&p->v);
  free(p);
}

static void give_conn(dq_store *ds, pooled *p) {
  pthread_mutex_lock(&ds->mu);
  if (ds->n_idle < DQ_IDLE_MAX && lith__dq_connected(p->c)) {
    ds->idle[ds->n_idle++] = p;
    p = NULL;
  }
  pthread_mutex_unlock(&ds->mu);
  pooled_free(p);
}

/* One read on p: its result into *out; *sent says whether any of the
 * client's statements reached the node. */
static int read_batch(pooled *p, lithd_batch *b, lithd_result **out, int *sent) {
  dq_run rn = {.c = p->c, .db = p->db, .v = &p->v, .b = b};
  int rc = LITH_OK, drc;
  int64_t now = lith_clock_ms();
  *sent = 0;
  /* One deadline for the whole read, every statement and frame together. */
  rn.deadline = b->lim.max_run_ms > INT64_MAX - now ? INT64_MAX : now + b->lim.max_run_ms;
  if (new_result(&rn, out) != 0)
    return LITH_NOMEM;
  if ((drc = lith__dq_exec_sql(p->c, p->db, "BEGIN", NULL, 0, NULL)) != LITH_DQ_OK) {
    rc = read_failed(&rn, -1, drc);
    return rc;
  }
  p->v.write = 0;
  if (b->steps) {
    lithd_steps st = {.ops = &dq_read_steps, .ctx = &rn, .b = b, .r = rn.r};
    rc = lithd__steps_run(&st);
  } else {
    for (int i = 0; i < b->n; i++) {
      if ((rc = run_one(&rn, i)) != LITH_OK)
        break;
      rn.r->n = i + 1;
    }
  }
  if (!rn.lost && (drc = lith__dq_exec_sql(p->c, p->db, "ROLLBACK", NULL, 0, NULL)) != LITH_DQ_OK &&
      drc != LITH_DQ_FAILURE)
    lith__dq_disconnect(p->c); /* an open transaction must not stay on a pooled connection */
  *sent = rn.sent;
  return rc;
}

static void read_work(uv_work_t *w) { /* a pool thread */
  dq_req *q = w->data;
  lithd_store_req *r = q->r;
  dq_store *ds = q->s;
  pooled *p = take_conn(ds);
  int sent = 0;
  r->t_start_ns = now_ns();
  if (p == NULL) {
    r->rc = LITH_NOMEM;
    snprintf(r->errmsg, sizeof r->errmsg, "out of memory");
    return;
  }
  /* Again only while nothing of the client's reached a node: a read that
   * ran on a leader is never run a second time. */
  for (int attempt = 0; attempt < 2; attempt++) {
    if (!lith__dq_connected(p->c)) {
      vet_close(&p->v); /* a new leader: read its schema afresh */
      int bound, orc = leader_open(ds->addresses, ds->database, ds->o.failover_ms, p->c, &p->db);
      /* the node cuts the read at --max-run-ms too (not a lith-node: FAILURE, lithd's deadline alone) */
      if (orc == LITH_DQ_OK && ds->o.max_run_ms > 0 &&
          lith__dq_max_run(p->c, p->db, ds->o.max_run_ms, &bound) != LITH_DQ_FAILURE &&
          !lith__dq_connected(p->c))
        orc = LITH_DQ_IO;
      if (orc != LITH_DQ_OK) {
        r->rc = LITH_BUSY;
        snprintf(r->errmsg, sizeof r->errmsg, "no dqlite leader could be reached for the read: %s",
                 lith__dq_errmsg(p->c));
        lith__dq_disconnect(p->c);
        break;
      }
    }
    r->rc = read_batch(p, r->batch, &r->result, &sent);
    r->errmsg[0] = '\0';
    if (lith__dq_connected(p->c) || sent)
      break;
  }
  r->t_end_ns = now_ns();
  give_conn(ds, p);
}

static void read_after(uv_work_t *w, int status) { /* the loop */
  dq_req *q = w->data;
  lithd_store_req *r = q->r;
  if (status == UV_ECANCELED) {
    r->rc = LITH_CLOSED;
    snprintf(r->errmsg, sizeof r->errmsg, "lithd is shutting down");
  }
  free(q);
  r->cb(r);
}

static int dq_read(lithd_store *s, lithd_store_req *r) {
  dq_store *ds = (dq_store *)s;
  dq_req *q = calloc(1, sizeof *q);
  if (q == NULL)
    return LITH_NOMEM;
  q->r = r;
  q->s = ds;
  q->work.data = q;
  if (uv_queue_work(ds->loop, &q->work, read_work, read_after) != 0) {
    free(q);
    return LITH_ERROR;
  }
  return LITH_OK;
}

/* ---- Interactive transactions (store.h; their states: tx_life.h) -------------
 *
 * As on a local file (local.c), one command is the transaction: an alone
 * command of the dqlite writer (writer.h), so the commands queued before
 * it commit first and those after it wait in the writer's queue until it
 * ends (bounded: store.h's rule, lithd__tx_bound; "another waits" here is
 * a command in the writer's queue, lith__dqw_waiting).
 * Its callback runs on the writer thread and waits there (a condition
 * variable) for the runs the loop hands it, one at a time; each runs
 * through run_cmd_batch on the writer's vetting connection, so every rule
 * of a command holds inside the transaction by construction. A run that
 * leaves the transaction open goes back to the loop through the
 * transaction's uv_async_t; one that ends it (its COMMIT or ROLLBACK step:
 * lith__dqw_tx_end, or a failure of the whole run) ends the callback, and
 * is answered when the writer answers the command (done), with its
 * outcome. A close (or the stop) makes the callback return a rollback.
 *
 * The writer runs an alone command once, never again: the leader lost
 * before COMMIT ends the transaction with LITH_BUSY (nothing of it
 * kept: dqlite replicates a transaction only at COMMIT); a COMMIT left
 * unanswered is fenced (writer.h): committed, lost (LITH_BUSY), or
 * LITHD_OUTCOME_UNKNOWN when no leader answers within failover_ms. The
 * run in flight gets that answer; a leader lost while the transaction
 * waits between runs is met by its next run.
 *
 * BEGIN DEFERRED and READONLY (LITHD_TX_SNAPSHOT) run on the writer too:
 * dqlite serves reads only on the leader, and a read transaction held
 * across requests would cost a leader connection each; READONLY still
 * refuses every write (SQLITE_READONLY: sql/'s lithd__write_refused).
 * PRAGMA foreign_keys in its autocommit changes the writer's connection
 * between two of its transactions, until the command ends
 * (dq_step_foreign_keys). */

/* The callback's private answer to the writer: roll back (the writer
 * rolls the command back to its savepoint for any code but OK). */
#define TX_ROLLBACK_ASKED 100

typedef struct dq_tx {
  lithd_store_tx base; /* first */
  lith__dqw_req w;     /* the command: the writer's until done */
  dq_store *ds;
  lith__dqw *writer;
  unsigned flags;
  int64_t idle_ms, max_ms;
  int64_t opened_ms; /* mono_ms at the open: max_ms counts from it */
  uv_async_t async;
  struct dq_tx *next, **pprev; /* ds->txs, until the command ended (loop) */
  /* Under mu: between the loop and the writer thread. */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  lithd_store_req *work;  /* handed to the writer, not taken yet */
  lithd_store_req *back;  /* run, the transaction open: for the loop */
  lithd_store_req *final; /* the run that ended it: answered with the command */
  int ending;             /* closed (or the stop): roll back */
  int bound;              /* a bound ended it: LITHD_TX_TIMEOUT */
  int finished;           /* the writer answered the command (done ran) */
  /* The loop's. */
  int cmd_done, closed, async_closed;
  int end_rc; /* what ended it (LITH_OK: committed or rolled back as asked) */
  char end_msg[LITH_ERRMSG_MAX];
} dq_tx;

static int64_t mono_ms(void) { return now_ns() / 1000000; }

/* Under t->mu: whether another waits for what it holds (lithd__tx_bound's
 * others_wait): a command in the writer's queue; for a snapshot's (its
 * stream holds one of the database's readers), a request for a reader. */
static int others_wait(dq_tx *t) {
  return lith__dqw_waiting(t->writer) ||
         ((t->flags & LITHD_TX_SNAPSHOT) && lithd__readers_wanted(&t->ds->base));
}

/* Under t->mu: wait for the next run and take it; NULL when the
 * transaction is closed (*why 0) or past a bound (*why: LITHD_TX_IDLE,
 * LITHD_TX_OPEN_TOO_LONG; store.h's rule, lithd__tx_bound). */
static lithd_store_req *tx_next(dq_tx *t, int64_t last, int *why) {
  *why = 0;
  while (t->work == NULL && !t->ending) {
    int64_t now = mono_ms(), wait = 0;
    if ((*why = lithd__tx_bound(now, last, t->opened_ms, t->idle_ms, t->max_ms, others_wait(t), &wait)) != 0)
      return NULL;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(wait / 1000);
    ts.tv_nsec += (long)(wait % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&t->cv, &t->mu, &ts);
  }
  if (t->ending)
    return NULL;
  lithd_store_req *r = t->work;
  t->work = NULL;
  return r;
}

static int tx_cmd(lith__dqw_tx *tx, void *arg) { /* the writer thread */
  dq_tx *t = arg;
  int64_t last = mono_ms();
  t->ds->wvet.flags_set = 0; /* the command starts as lithd left the connection */
  t->ds->wvet.fk_changed = 0;
  pthread_mutex_lock(&t->mu);
  for (;;) {
    int why;
    lithd_store_req *r = tx_next(t, last, &why);
    if (r == NULL && why == 0) {
      pthread_mutex_unlock(&t->mu);
      return TX_ROLLBACK_ASKED;
    }
    if (r != NULL && mono_ms() > t->opened_ms + t->max_ms) { /* it waited for the writer that long */
      t->work = r;                                           /* answered with the timeout */
      why = LITHD_TX_OPEN_TOO_LONG;
    }
    if (why != 0) {
      char msg[LITH_ERRMSG_MAX];
      t->bound = 1;
      pthread_mutex_unlock(&t->mu);
      lithd__tx_bound_msg(why, t->idle_ms, t->max_ms, msg, sizeof msg);
      return lith__dqw_error(tx, "%s", msg);
    }
    pthread_mutex_unlock(&t->mu);
    r->batch->readonly_tx = (t->flags & LITHD_TX_READONLY) != 0;
    int rc = run_cmd_batch(tx, &t->ds->wvet, r->batch, &r->result);
    if (rc == LITH_DQW_OK && r->result != NULL && !r->result->in_tx) {
      /* in autocommit again: the command commits now (its foreign keys checked first) */
      dq_run rn = {.tx = tx, .v = &t->ds->wvet, .b = r->batch, .r = r->result};
      rc = fk_settled(&rn);
    }
    pthread_mutex_lock(&t->mu);
    if (rc != LITH_DQW_OK || r->result == NULL || !r->result->in_tx) {
      t->final = r; /* in autocommit again, or failed: the transaction ends */
      pthread_mutex_unlock(&t->mu);
      return rc;
    }
    t->back = r;
    pthread_mutex_unlock(&t->mu);
    uv_async_send(&t->async);
    last = mono_ms();
    pthread_mutex_lock(&t->mu);
  }
}

static void tx_cmd_done(lith__dqw_req *w) { /* the writer thread (the loop's, when refused at once) */
  dq_tx *t = w->arg;
  pthread_mutex_lock(&t->mu);
  t->finished = 1;
  pthread_mutex_unlock(&t->mu);
  uv_async_send(&t->async);
}

static void tx_async_closed(uv_handle_t *h) {
  dq_tx *t = h->data;
  pthread_mutex_destroy(&t->mu);
  pthread_cond_destroy(&t->cv);
  free(t);
}

/* The loop: once the command ended and the caller closed it, nothing can
 * wake the handle: close it, and free it then. */
static void tx_settle(dq_tx *t) {
  if (t->cmd_done && t->closed && !t->async_closed) {
    t->async_closed = 1;
    uv_close((uv_handle_t *)&t->async, tx_async_closed);
  }
}

/* The loop: a run that left the transaction open, to its caller. */
static void hand_back(lithd_store_req *r) {
  if (r == NULL)
    return;
  r->rc = LITH_OK;
  r->errmsg[0] = '\0';
  r->tx_open = 1;
  r->cb(r);
}

/* The loop: the writer answered the command: answer the run it ended (or
 * the one handed in too late) with its outcome. */
static void tx_ended(dq_tx *t) {
  int wrc = t->w.rc;
  t->cmd_done = 1;
  t->ds->inflight--;
  *t->pprev = t->next;
  if (t->next != NULL)
    t->next->pprev = t->pprev;
  pthread_mutex_lock(&t->mu);
  lithd_store_req *r = t->final != NULL ? t->final : t->work;
  t->final = t->work = NULL;
  int bound = t->bound;
  pthread_mutex_unlock(&t->mu);
  if (wrc == LITH_DQW_OK || wrc == TX_ROLLBACK_ASKED) {
    t->end_rc = LITH_OK;
  } else if (bound) {
    t->end_rc = LITHD_TX_TIMEOUT;
    snprintf(t->end_msg, sizeof t->end_msg, "%.199s", t->w.err.errmsg);
  } else if (wrc == LITH_DQW_UNAVAILABLE || wrc == LITH_DQW_UNKNOWN) { /* the writer's own words */
    t->end_rc = wrc == LITH_DQW_UNKNOWN ? LITHD_OUTCOME_UNKNOWN : LITH_BUSY;
    snprintf(t->end_msg, sizeof t->end_msg, "%.199s", t->w.err.errmsg);
  } else {
    t->end_rc = result_failed(r != NULL ? r->result : NULL, wrc, &t->w.err, t->end_msg, sizeof t->end_msg);
  }
  if (r != NULL) {
    r->rc = t->end_rc; /* LITH_OK: the result stands, committed or the ROLLBACK asked for */
    snprintf(r->errmsg, sizeof r->errmsg, "%s", t->end_msg);
    r->tx_open = 0;
    r->cb(r);
  }
  tx_settle(t);
}

static void tx_back(uv_async_t *h) { /* the loop: a run that left it open, or the command's end */
  dq_tx *t = h->data;
  pthread_mutex_lock(&t->mu);
  lithd_store_req *r = t->back;
  t->back = NULL;
  int finished = t->finished;
  pthread_mutex_unlock(&t->mu);
  hand_back(r);
  if (finished && !t->cmd_done)
    tx_ended(t);
}

static int tx_run(lithd_store_tx *base, lithd_store_req *r) {
  dq_tx *t = (dq_tx *)base;
  if (t->cmd_done)
    return lithd__tx_ended_rc(t->end_rc, t->end_msg, r->errmsg, sizeof r->errmsg);
  r->rc = LITH_OK;
  r->tx_open = 0;
  pthread_mutex_lock(&t->mu);
  t->work = r;
  pthread_cond_signal(&t->cv);
  pthread_mutex_unlock(&t->mu);
  return LITH_OK;
}

/* Under nothing: make the callback return a rollback (the loop). */
static void tx_let_go(dq_tx *t) {
  pthread_mutex_lock(&t->mu);
  t->ending = 1;
  pthread_cond_signal(&t->cv);
  pthread_mutex_unlock(&t->mu);
}

static void tx_close(lithd_store_tx *base) {
  dq_tx *t = (dq_tx *)base;
  t->closed = 1;
  tx_let_go(t);
  tx_settle(t);
}

static int tx_is_ended(const lithd_store_tx *base) { return ((const dq_tx *)base)->cmd_done; }

static const lithd_store_tx_ops dq_tx_ops = {.run = tx_run, .close = tx_close, .ended = tx_is_ended};

static int dq_tx_open(lithd_store *s, unsigned flags, int64_t idle_ms, int64_t max_ms, lith_http_req *http,
                      lithd_store_tx **out, char *errmsg, size_t cap) {
  dq_store *ds = (dq_store *)s;
  dq_tx *t;
  (void)http; /* nothing waits for room here: the writer's queue takes it at once */
  *out = NULL;
  if (ds->stopping || ds->w == NULL) {
    snprintf(errmsg, cap, "lithd is shutting down");
    return LITH_CLOSED;
  }
  if (ds->inflight >= ds->o.max_queue) {
    snprintf(errmsg, cap, "the write queue is full; retry later");
    return LITH_QUEUE_FULL;
  }
  if ((t = calloc(1, sizeof *t)) == NULL) {
    snprintf(errmsg, cap, "out of memory");
    return LITH_NOMEM;
  }
  t->base.ops = &dq_tx_ops;
  t->ds = ds;
  t->writer = ds->w;
  t->flags = flags;
  t->idle_ms = idle_ms;
  t->max_ms = max_ms;
  t->opened_ms = mono_ms();
  pthread_mutex_init(&t->mu, NULL);
  pthread_cond_init(&t->cv, NULL);
  if (uv_async_init(ds->loop, &t->async, tx_back) != 0) {
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t);
    snprintf(errmsg, cap, "cannot make the transaction's wake-up");
    return LITH_NOMEM;
  }
  t->async.data = t;
  t->w.fn = tx_cmd;
  t->w.arg = t;
  t->w.done = tx_cmd_done;
  t->w.alone = 1;
  t->next = ds->txs;
  if (ds->txs != NULL)
    ds->txs->pprev = &t->next;
  t->pprev = &ds->txs;
  ds->txs = t;
  ds->inflight++;
  lith__dqw_submit(ds->w, &t->w);
  *out = &t->base;
  return LITH_OK;
}

/* ---- Who leads (issue 34) --------------------------------------------------
 * The writer keeps who leads and watches it while idle (writer.h, "Who
 * leads": LITHD_DQ_WATCH_MS); each change comes here once, on the writer
 * thread, and goes to the log. */

static void on_leader(void *arg, const lith__dqw_leader_event *e) {
  const dq_store *ds = arg;
  switch (e->kind) {
  case LITH_DQW_LEADER_FOUND:
    if (e->old_address[0] == '\0')
      lithd_log(LITHD_LOG_INFO, "dqlite leader: %s (id %" PRIu64 ")", e->address, e->id);
    else
      lithd_log(LITHD_LOG_WARN, "dqlite leader: %s (id %" PRIu64 "), was %s (id %" PRIu64 ")", e->address,
                e->id, e->old_address, e->old_id);
    break;
  case LITH_DQW_LEADER_LOST:
    lithd_log(LITHD_LOG_WARN, "dqlite leader %s (id %" PRIu64 ") lost: %s; looking for the new one",
              e->old_address, e->old_id, e->why);
    break;
  case LITH_DQW_LEADER_FAILOVER:
    if (e->writes_waited)
      lithd_log(LITHD_LOG_WARN,
                "dqlite failover: leader %s (id %" PRIu64 ") -> %s (id %" PRIu64 "); writes waited %" PRId64
                " ms",
                e->old_address, e->old_id, e->address, e->id, e->wait_ms);
    else
      lithd_log(LITHD_LOG_WARN,
                "dqlite failover: leader %s (id %" PRIu64 ") -> %s (id %" PRIu64
                "); no write waited (the new "
                "leader was ready %" PRId64 " ms after the loss)",
                e->old_address, e->old_id, e->address, e->id, e->wait_ms);
    break;
  case LITH_DQW_LEADER_NONE:
    if (e->old_address[0] != '\0')
      lithd_log(LITHD_LOG_ERROR,
                "no dqlite leader %" PRId64 " ms after %s (id %" PRIu64 ") was lost (--dqlite-failover-ms "
                "%d): writes are answered 503 until one is found",
                e->wait_ms, e->old_address, e->old_id, ds->o.failover_ms);
    else
      lithd_log(LITHD_LOG_ERROR,
                "no dqlite leader among %s for %" PRId64
                " ms (--dqlite-failover-ms %d): writes are answered 503 "
                "until one is found",
                ds->addresses, e->wait_ms, ds->o.failover_ms);
    break;
  default: break;
  }
}

static void dq_stats(lithd_store *s, lithd_store_stats *st) {
  dq_store *ds = (dq_store *)s;
  lith__dqw_stats w = {0};
  if (ds->w != NULL)
    lith__dqw_get_stats(ds->w, &w);
  st->commands = w.commands;
  st->batches = w.batches;
  st->failovers = w.failovers;
  st->reruns = w.reruns;
  st->inflight = ds->inflight;
  if (w.leader_known) { /* store.h: "" and 0 while no leader is known */
    snprintf(st->leader, sizeof st->leader, "%s", w.leader);
    st->leader_id = w.leader_id;
  }
  st->failover_wait_ms = w.failover_wait_ms;
}

/* ---- The rest -------------------------------------------------------------- */

/* ---- Backups (issue 34: lithd_store_snapshot) ------------------------------
 * The leader's DUMP folded into one file: dq_snapshot.h. */

static int dq_snapshot(lithd_store *s, const char *path, char *errmsg, size_t cap) {
  dq_store *ds = (dq_store *)s;
  return lithd__dq_snapshot(ds->addresses, ds->database, ds->o.failover_ms, &ds->snap_cancel, path, errmsg,
                            cap);
}

static lith *dq_lith(lithd_store *s) {
  (void)s;
  return NULL; /* every node keeps the file */
}

static void dq_stop(lithd_store *s) { ((dq_store *)s)->stopping = 1; }

static void dq_drain(lithd_store *s, void (*on_drained)(void *arg), void *arg) {
  dq_store *ds = (dq_store *)s;
  ds->stopping = 1;
  atomic_store(&ds->snap_cancel, 1); /* a backup's dump in progress ends */
  for (dq_tx *t = ds->txs; t != NULL; t = t->next)
    tx_let_go(t); /* their callbacks return (a rollback) rather than hold the stop */
  if (ds->w != NULL) {
    lith__dqw_stop(ds->w); /* answers everything queued: their done ran */
    ds->w = NULL;
  }
  drain_ready(ds);
  vet_close(&ds->wvet); /* the writer thread is gone */
  if (ds->wake_open) {
    uv_close((uv_handle_t *)&ds->wake, NULL);
    ds->wake_open = 0;
  }
  if (on_drained != NULL)
    on_drained(arg);
}

static void dq_free(dq_store *ds) {
  if (ds == NULL)
    return;
  if (ds->w != NULL)
    lith__dqw_stop(ds->w);
  for (int i = 0; i < ds->n_idle; i++)
    pooled_free(ds->idle[i]);
  vet_close(&ds->wvet);
  pthread_mutex_destroy(&ds->mu);
  free(ds->addresses);
  free(ds->database);
  free(ds);
}

static int dq_close(lithd_store *s, char *err, size_t errsz) {
  (void)err, (void)errsz;
  dq_free((dq_store *)s);
  return LITH_OK;
}

static const lithd_store_ops dq_ops = {
    .name = "dqlite",
    .write = dq_write,
    .read = dq_read,
    .stats = dq_stats,
    .lith = dq_lith,
    .snapshot = dq_snapshot,
    .stop = dq_stop,
    .drain = dq_drain,
    .close = dq_close,
    .tx_open = dq_tx_open,
};

int lithd_store_dqlite_open(const lithd_dq_options *o, const lithd_schema *schema, uv_loop_t *loop,
                            lithd_store **out, char *err, size_t errsz) {
  dq_store *ds = calloc(1, sizeof *ds);
  lith__dqw_options wo;
  *out = NULL;
  if (ds == NULL) {
    snprintf(err, errsz, "out of memory");
    return LITH_NOMEM;
  }
  pthread_mutex_init(&ds->mu, NULL);
  ds->base.ops = &dq_ops;
  ds->o = *o;
  if ((ds->addresses = strdup(o->addresses)) == NULL || (ds->database = strdup(o->database)) == NULL) {
    snprintf(err, errsz, "out of memory");
    goto fail;
  }
  ds->o.addresses = ds->addresses;
  ds->o.database = ds->database;
  ds->o.failover_ms = o->failover_ms > 0 ? o->failover_ms : LITHD_DQ_FAILOVER_MS;
  ds->o.max_queue = o->max_queue > 0 ? o->max_queue : 10000;
  ds->wvet.o = &ds->o;
  ds->loop = loop;
  if (schema != NULL && schema->n > 0 && apply_schema(ds, schema, err, errsz) != 0)
    goto fail;
  memset(&wo, 0, sizeof wo);
  wo.addresses = ds->addresses;
  wo.database = ds->database;
  wo.failover_ms = ds->o.failover_ms;
  wo.max_run_ms = o->max_run_ms;
  wo.max_batch = o->max_batch;
  wo.watch_ms = LITHD_DQ_WATCH_MS; /* who leads, known within about that (issue 34) */
  wo.on_leader = on_leader;
  wo.on_leader_arg = ds;
  if (lith__dqw_start(&wo, &ds->w) != LITH_DQW_OK) {
    snprintf(err, errsz, "cannot start the dqlite writer");
    goto fail;
  }
  if (uv_async_init(loop, &ds->wake, on_wake) != 0) {
    snprintf(err, errsz, "uv_async_init failed");
    goto fail;
  }
  ds->wake.data = ds;
  ds->wake_open = 1;
  *out = &ds->base;
  return LITH_OK;
fail:
  dq_free(ds);
  return LITH_ERROR;
}
