/*
 * sqljson, stage 2 of 3: run a lithd_batch on SQLite into a lithd_result
 * (see sqljson.h, lithd_batch_run and lithd_batch_read).
 *
 * Design:
 *   - Running (lithd_batch_run on the writer, lithd_batch_read on a
 *     reader) shares one loop: fetch the cached statement, bind, step to the
 *     end while copying every cell into the result's arena, reset. Anything
 *     that could make the answer unsendable (too many rows or bytes, TEXT
 *     that is not UTF-8) is found here, while the command can still fail,
 *     never after a commit.
 *   - A command may run more than once, so a run always starts by freeing
 *     whatever result the previous run left in *out.
 *   - max_run_ms: a progress handler on a reader; on the writer lith's own
 *     (lith_options.command_timeout_ms, which lithd sets to max_run_ms:
 *     one handler per connection, and lith's also stops the command's
 *     lith_tx_* calls); and the guard (guard.h) on both for what one step
 *     can do without returning to the VM (bounded functions, the
 *     watchdog's interrupt).
 *   - The SQL authorizer of the write connection lives here too: it is the
 *     other half of what clients' SQL may do, with the messages that name
 *     its refusals.
 *   - The policy is one set of lithd__ calls (sqljson_int.h) that every
 *     store runs a statement under: what a prepare's failure answers, what
 *     /v1/query accepts, how parameters are numbered (SQLite's own, from a
 *     prepared statement), the columns, the limits on rows and bytes as
 *     each cell arrives. The local run below calls them on the statement it
 *     steps; the dqlite store on the statement it vetted on a local
 *     connection before sending the text to the cluster.
 */
#include "sqljson_int.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "guard.h"
#include "utf8.h"

/* ---- The policy every store runs a statement under ------------------------- */

int lithd__fail(lithd_result *r, int code, int stmt, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  lithd__error_vset(&r->err, code, stmt, fmt, ap);
  va_end(ap);
  return code;
}

int lithd__result_renew(lithd_result **out, const lithd_batch *b) {
  lithd_result *r;
  if (*out != NULL && (*out)->shared_bytes != NULL) /* a command run again: its first run's bytes */
    atomic_fetch_sub((*out)->shared_bytes, (*out)->bytes);
  lithd_result_free(*out);
  *out = NULL;
  if (!(r = calloc(1, sizeof *r)))
    return -1;
  r->outs = calloc(b->n ? (size_t)b->n : 1, sizeof *r->outs);
  if (!r->outs) {
    free(r);
    return -1;
  }
  r->nouts = b->n;
  r->fmt = b->fmt;
  r->max_bytes = b->lim.max_result_bytes;
  r->cell_frame = b->lim.cell_frame;
  r->shared_bytes = b->shared_bytes;
  lithd__error_clear(&r->err);
  *out = r;
  return 0;
}

/* SQLite's error of a prepare as lithd answers it: an authorizer said no,
 * 403 (a denied function is SQLITE_ERROR with "not authorized to use
 * function" rather than SQLITE_AUTH); anything else as the code given. */
int lithd__prepare_failed(lithd_result *r, int i, int code, sqlite3 *conn, const char *msg) {
  if (code == LITH_OK) /* refused by lith after a good prepare */
    code = LITH_MISUSE;
  if (sqlite3_errcode(conn) == SQLITE_AUTH || strncmp(sqlite3_errmsg(conn), "not authorized", 14) == 0)
    return lithd__fail(
        r, LITHD_FORBIDDEN, i,
        "%s: lithd refuses ATTACH, DETACH, PRAGMA settings but user_version, application_id, "
        "defer_foreign_keys and recursive_triggers, load_extension and fts3_tokenizer, the writer owns "
        "BEGIN, COMMIT, ROLLBACK and savepoints named lith_*, and lith owns every name beginning _lith_",
        msg);
  return lithd__fail(r, code, i, "%s", msg);
}

int lithd__check_failed(lithd_result *r, int i, int code, const char *msg) {
  if (strncmp(msg, "not authorized", 14) == 0)
    return lithd__fail(r, LITHD_FORBIDDEN, i, "%s", msg);
  return lithd__fail(r, code == LITH_OK ? LITH_ERROR : code, i, "%s", msg);
}

int lithd__vacuum_rule(lithd_result *r, const lithd_batch *b, int i, int can, int *now) {
  *now = 0;
  switch (lithd__vacuum(b->stmts[i].sql)) {
  case VAC_REFUSED:
    return lithd__fail(
        r, LITHD_FORBIDDEN, i,
        "VACUUM INTO writes a file wherever lithd may write, and lithd runs only a plain VACUUM "
        "of main: refused (a copy of the database: lithd's backup, docs/operations.md)");
  case VAC_MAIN:
    if (b->steps || b->n != 1)
      return LITH_OK; /* in a transaction: SQLite's own refusal */
    if (!can)
      return lithd__fail(r, LITH_ERROR, i,
                         "VACUUM is not run on --dqlite (it attaches a database, and dqlite's nodes allow "
                         "none): leave it out; later writes reuse the pages it would free");
    *now = 1;
    return LITH_OK;
  default: return LITH_OK;
  }
}

int lithd__batch_vacuums(const lithd_batch *b) {
  return b != NULL && !b->steps && b->n == 1 && lithd__vacuum(b->stmts[0].sql) == VAC_MAIN;
}

int lithd__not_a_query(lithd_result *r, int i) {
  return lithd__fail(r, LITHD_NOT_A_QUERY, i,
                     "write statement on /v1/query: only SELECT, WITH, VALUES and EXPLAIN run here "
                     "(a PRAGMA reads through its function: SELECT * FROM pragma_table_info('t'))");
}

int lithd__check_read(lithd_result *r, int i, int first, sqlite3_stmt *st) {
  if (first != FIRST_QUERY) /* prepared, yet no query: refused all the same */
    return lithd__not_a_query(r, i);
  if (!sqlite3_stmt_readonly(st))
    return lithd__not_a_query(r, i);
  return LITH_OK;
}

int lithd__bind_plan(lithd_result *r, int i, const stmt_spec *spec, sqlite3_stmt *st, const value **vals) {
  int count = sqlite3_bind_parameter_count(st);
  if (!spec->named) {
    if (spec->nparams != count)
      return lithd__fail(r, LITHD_BAD_REQUEST, i, "the statement has %d parameter%s, %d given", count,
                         count == 1 ? "" : "s", spec->nparams);
    for (int k = 0; k < count; k++)
      vals[k] = &spec->params[k].v;
    return LITH_OK;
  }
  for (int k = 0; k < count; k++)
    vals[k] = NULL;
  for (int k = 0; k < spec->nparams; k++) {
    const char *name = spec->params[k].name;
    int idx = sqlite3_bind_parameter_index(st, name);
    if (idx == 0 && spec->guess_prefix && name[0] != ':' && name[0] != '@' && name[0] != '$' &&
        name[0] != '?') {
      /* Hrana's clients may leave the prefix out: try each, as libSQL does */
      char with[256];
      size_t len = strlen(name);
      for (const char *pre = ":@$"; *pre && idx == 0 && len + 2 <= sizeof with; pre++) {
        with[0] = *pre;
        memcpy(with + 1, name, len + 1);
        idx = sqlite3_bind_parameter_index(st, with);
      }
    }
    if (idx == 0)
      return lithd__fail(r, LITHD_BAD_REQUEST, i, "the statement has no parameter \"%.64s\"", name);
    if (vals[idx - 1] != NULL) /* two names for one index: SQLite gives each index one
                                  name, so this only guards the loop below */
      return lithd__fail(r, LITHD_BAD_REQUEST, i, "parameter \"%.64s\" is given twice", name);
    vals[idx - 1] = &spec->params[k].v;
  }
  for (int idx = 1; idx <= count; idx++) {
    if (vals[idx - 1] != NULL)
      continue;
    const char *name = sqlite3_bind_parameter_name(st, idx);
    if (name)
      return lithd__fail(r, LITHD_BAD_REQUEST, i, "parameter \"%.64s\" is not given", name);
    return lithd__fail(r, LITHD_BAD_REQUEST, i, "parameter %d has no name: give \"params\" as an array", idx);
  }
  return LITH_OK;
}

static int push_value(lithd_result *r, int i, stmt_out *o, const value *v) {
  if (o->nvals == o->capvals) {
    size_t ncap = o->capvals ? o->capvals * 2 : 16;
    value *nv = realloc(o->vals, ncap * sizeof *nv);
    if (!nv)
      return lithd__fail(r, LITH_NOMEM, i, "out of memory");
    o->vals = nv;
    o->capvals = ncap;
  }
  o->vals[o->nvals++] = *v;
  return LITH_OK;
}

/* ---- The answer budget (sqljson.h) ---- */

#define ANSWER_BUDGET_DEFAULT ((size_t)512 << 20)
static _Atomic size_t answer_used;
static size_t answer_cap = ANSWER_BUDGET_DEFAULT;

void lithd_answer_budget_set(size_t bytes) { answer_cap = bytes ? bytes : ANSWER_BUDGET_DEFAULT; }
size_t lithd_answer_budget_used(void) { return atomic_load(&answer_used); }
size_t lithd_answer_budget_cap(void) { return answer_cap; }

size_t lithd_result_take_budget(lithd_result *r) {
  if (r == NULL)
    return 0;
  size_t n = r->charged;
  r->charged = 0;
  return n;
}

void lithd_answer_budget_release(size_t bytes) {
  if (bytes)
    atomic_fetch_sub(&answer_used, bytes);
}

/* What v takes in the result and in its JSON, about. */
static size_t cell_cost(const value *v) {
  size_t c = sizeof *v + 24; /* the value, a number, a separator */
  if (v->type == SQLITE_TEXT) {
    c += 2 * v->n + 2; /* the copy, the JSON string */
    for (size_t k = 0; k < v->n; k++) {
      unsigned char ch = v->u.p[k];
      if (ch < 0x20)
        c += 5; /* \u00XX */
      else if (ch == '"' || ch == '\\')
        c += 1;
    }
  } else if (v->type == SQLITE_BLOB) {
    c += v->n + 4 * ((v->n + 2) / 3) + 14; /* the copy, {"base64":"..."} */
  }
  return c;
}

int lithd_answer_budget_charge(size_t bytes) {
  size_t before = atomic_fetch_add(&answer_used, bytes);
  if (before + bytes > answer_cap) {
    atomic_fetch_sub(&answer_used, bytes);
    return -1;
  }
  return 0;
}

static int charge(lithd_result *r, int i, size_t n) {
  if (lithd_answer_budget_charge(n) != 0) {
    return lithd__fail(
        r, LITH_BUSY, i,
        "lithd holds %zu MiB of answers at most (--max-answer-mib) and has no room for this one "
        "now: retry later",
        answer_cap >> 20);
  }
  r->charged += n;
  return LITH_OK;
}

int lithd__row_room(lithd_result *r, const lithd_limits *lim, int i) {
  if (r->rows >= lim->max_rows)
    return lithd__fail(r, LITHD_RESULT_TOO_LARGE, i,
                       "the answer would hold more than %" PRId64 " rows (max_rows)", lim->max_rows);
  return LITH_OK;
}

/* What v counts in max_result_bytes (lithd_limits.cell_frame). */
static size_t cell_counted(const value *v, size_t frame) {
  int text = v->type == SQLITE_TEXT, blob = v->type == SQLITE_BLOB;
  if (frame == 0)
    return text || blob ? v->n : 0;
  if (v->type == SQLITE_INTEGER) {
    size_t digits = 1;
    for (uint64_t m = v->u.i < 0 ? -(uint64_t)v->u.i : (uint64_t)v->u.i; m >= 10; m /= 10)
      digits++;
    return frame + digits + (v->u.i < 0);
  }
  return frame + (v->type == SQLITE_FLOAT ? 24 : text ? v->n + 2 : blob ? 4 * ((v->n + 2) / 3) : 0);
}

int lithd__put_cell(lithd_result *r, const lithd_limits *lim, int i, stmt_out *o, value v) {
  int rc;
  size_t used = r->shared_bytes != NULL ? atomic_load(r->shared_bytes) : r->bytes;
  size_t n = cell_counted(&v, lim->cell_frame);
  if (n > 0 && (used > lim->max_result_bytes || n > lim->max_result_bytes - used))
    return lim->cell_frame ? lithd__fail(r, LITHD_RESULT_TOO_LARGE, i,
                                         "the answer would be larger than the %zu bytes left for it "
                                         "(max_result_bytes: --max-result-mib, every cell counted)",
                                         lim->max_result_bytes)
                           : lithd__fail(r, LITHD_RESULT_TOO_LARGE, i,
                                         "the answer would hold more than %zu bytes of text and blobs "
                                         "(max_result_bytes)",
                                         lim->max_result_bytes);
  if ((rc = charge(r, i, cell_cost(&v))) != LITH_OK)
    return rc;
  if (v.type == SQLITE_TEXT || v.type == SQLITE_BLOB) {
    const unsigned char *p = v.u.p;
    if (v.type == SQLITE_TEXT && !lithd_utf8_valid(p, v.n))
      return lithd__fail(r, LITHD_UNENCODABLE, i,
                         "text is not valid UTF-8 in row %" PRId64 " column %d; CAST(x AS BLOB) reads it",
                         o->nrows, o->ncols > 0 ? (int)(o->nvals % (size_t)o->ncols) : 0);
    v.u.p = lithd_arena_copy(&r->mem, p, v.n);
    if (!v.u.p)
      return lithd__fail(r, LITH_NOMEM, i, "out of memory");
  } else if (v.type != SQLITE_INTEGER && v.type != SQLITE_FLOAT) {
    v.type = SQLITE_NULL;
  }
  r->bytes += n;
  if (r->shared_bytes != NULL)
    atomic_fetch_add(r->shared_bytes, n);
  return push_value(r, i, o, &v);
}

void lithd__row_done(lithd_result *r, stmt_out *o) {
  o->nrows++;
  r->rows++;
}

/* ---- Running on SQLite here (the local store; lithd_batch_run/_read) ------- */

/* Where statements come from: the writer's command or a reader. */
typedef struct runner {
  lith_tx *tx;
  lith_rx *rx;
  sqlite3 *conn;
  lithd_batch *b;
  lithd_result *r;
  int64_t deadline;        /* on lith_clock_ms() */
  lithd_guard_slot *guard; /* NULL: the connection has no guard */
  int timed_out;           /* a LITHD_GUARD_ reason: why the run was cut */
} runner;

/* SQLite's progress handler: a non-zero return interrupts the statement. */
/* Why a run was cut besides lithd_guard's reasons: a snapshot too old. */
#define CUT_TOO_OLD 100

static int on_progress(void *arg) {
  runner *rn = arg;
  if (!rn->timed_out) {
    if (rn->guard != NULL) /* the same deadline, and whether lithd stops: one clock read */
      rn->timed_out = lithd_guard_cut(rn->guard);
    else if (lith_clock_ms() > rn->deadline)
      rn->timed_out = LITHD_GUARD_DEADLINE;
    if (!rn->timed_out && rn->b->too_old_cuts && lith_rx_too_old(rn->rx))
      rn->timed_out = CUT_TOO_OLD;
  }
  return rn->timed_out;
}

/* Whether the run was cut: by the progress handler, or inside one step by
 * the guard (a bounded function, the watchdog's interrupt). On the writer
 * every interrupt is the run limit: lith's command_timeout_ms (by the
 * millisecond its clock may be a little ahead of rn->deadline; a lith_tx_*
 * call past it fails with LITH_INTERRUPTED) or the watchdog's. */
static int was_cut(runner *rn) {
  if (!rn->timed_out && (sqlite3_errcode(rn->conn) == SQLITE_INTERRUPT ||
                         (rn->tx != NULL && lith_tx_rc(rn->tx) == LITH_INTERRUPTED)))
    rn->timed_out =
        rn->tx != NULL || lith_clock_ms() > rn->deadline ? LITHD_GUARD_DEADLINE : lithd_guard_cut(rn->guard);
  /* a snapshot's read marked too old: lith interrupted it (lith_rx_cut_when_too_old) */
  if (!rn->timed_out && rn->tx == NULL && rn->b->too_old_cuts &&
      sqlite3_errcode(rn->conn) == SQLITE_INTERRUPT && lith_rx_too_old(rn->rx))
    rn->timed_out = CUT_TOO_OLD;
  return rn->timed_out;
}

static int timeout_fail(const runner *rn, int i) {
  if (rn->timed_out == CUT_TOO_OLD)
    return lithd__fail(rn->r, LITHD_TX_TOO_OLD, i,
                       "snapshot too old: it kept the WAL from starting over past --wal-hold-ms, so the "
                       "transaction was ended");
  if (rn->timed_out == LITHD_GUARD_STOPPING)
    return lithd__fail(rn->r, LITH_CLOSED, i, "lithd is shutting down: the query was interrupted");
  return lithd__fail(rn->r, LITHD_TIMEOUT, i, "the statements ran longer than %" PRId64 " ms (max_run_ms)",
                     rn->b->lim.max_run_ms);
}

static int bind_value(sqlite3_stmt *st, int idx, const value *v) {
  switch (v->type) {
  case SQLITE_INTEGER: return sqlite3_bind_int64(st, idx, v->u.i);
  case SQLITE_FLOAT: return sqlite3_bind_double(st, idx, v->u.d);
  case SQLITE_TEXT:
    return sqlite3_bind_text64(st, idx, (const char *)v->u.p, v->n, SQLITE_STATIC, SQLITE_UTF8);
  case SQLITE_BLOB:
    /* a NULL or empty pointer would bind NULL; the empty blob is a zeroblob */
    if (v->n == 0)
      return sqlite3_bind_zeroblob(st, idx, 0);
    return sqlite3_bind_blob64(st, idx, v->u.p, v->n, SQLITE_STATIC);
  default: return sqlite3_bind_null(st, idx);
  }
}

static int bind_all(const runner *rn, int i, sqlite3_stmt *st) {
  int count = sqlite3_bind_parameter_count(st), rc;
  const value **vals = malloc(((size_t)count + 1) * sizeof *vals);
  if (!vals)
    return lithd__fail(rn->r, LITH_NOMEM, i, "out of memory");
  rc = lithd__bind_plan(rn->r, i, &rn->b->stmts[i], st, vals);
  for (int k = 0; rc == LITH_OK && k < count; k++) {
    int src = bind_value(st, k + 1, vals[k]);
    if (src != SQLITE_OK) {
      const char *name = sqlite3_bind_parameter_name(st, k + 1);
      rc = name ? lithd__fail(rn->r, lith_from_sqlite(src), i, "parameter \"%.64s\": %s", name,
                              sqlite3_errmsg(rn->conn))
                : lithd__fail(rn->r, lith_from_sqlite(src), i, "parameter %d: %s", k + 1,
                              sqlite3_errmsg(rn->conn));
    }
  }
  free(vals);
  return rc;
}

static int collect_row(const runner *rn, int i, sqlite3_stmt *st, stmt_out *o) {
  lithd_result *r = rn->r;
  const lithd_limits *lim = &rn->b->lim;
  int rc = lithd__row_room(r, lim, i);
  for (int col = 0; rc == LITH_OK && col < o->ncols; col++) {
    value v = {.type = sqlite3_column_type(st, col)};
    switch (v.type) {
    case SQLITE_INTEGER: v.u.i = sqlite3_column_int64(st, col); break;
    case SQLITE_FLOAT: v.u.d = sqlite3_column_double(st, col); break;
    case SQLITE_TEXT:
    case SQLITE_BLOB:
      v.u.p = v.type == SQLITE_TEXT ? sqlite3_column_text(st, col) : sqlite3_column_blob(st, col);
      v.n = (size_t)sqlite3_column_bytes(st, col);
      if (!v.u.p && (v.n || sqlite3_errcode(rn->conn) == SQLITE_NOMEM))
        return lithd__fail(r, LITH_NOMEM, i, "out of memory reading row %" PRId64 " column %d", o->nrows,
                           col);
      break;
    default: break;
    }
    rc = lithd__put_cell(r, lim, i, o, v);
  }
  if (rc == LITH_OK)
    lithd__row_done(r, o);
  return rc;
}

/* What the first keyword of `s`, past blanks and comments, says of the
 * statement on /v1/query: QUERY (SELECT, WITH, VALUES, EXPLAIN: prepared,
 * then sqlite3_stmt_readonly decides), OTHER (a keyword that opens any other
 * SQLite statement: refused unprepared, 403), or UNKNOWN (no statement opens
 * so: a typo, which SQLite's prepare reports as the SQL error it is, 400). */
int lithd__first_keyword(const char *s) {
  /* each word with its length: compared only against words as long */
#define KW(w) \
  { w, sizeof w - 1 }
  static const struct {
    const char *w;
    size_t n;
  } queries[] = {KW("SELECT"), KW("WITH"), KW("VALUES"), KW("EXPLAIN")},
    others[] = {KW("ALTER"),    KW("ANALYZE"),   KW("ATTACH"),  KW("BEGIN"),   KW("COMMIT"),
                KW("CREATE"),   KW("DELETE"),    KW("DETACH"),  KW("DROP"),    KW("END"),
                KW("INSERT"),   KW("PRAGMA"),    KW("REINDEX"), KW("RELEASE"), KW("REPLACE"),
                KW("ROLLBACK"), KW("SAVEPOINT"), KW("UPDATE"),  KW("VACUUM")};
#undef KW
  s = lithd__sql_lead(s);
  size_t n = 0;
  while (lithd__sql_letter((unsigned char)s[n]))
    n++;
  if (n == 0)
    return FIRST_OTHER; /* nothing, or punctuation: as before, not a query */
  /* the first letter before strncasecmp: most words differ there */
  char c0 = (char)(s[0] & ~0x20);
  for (size_t k = 0; k < sizeof queries / sizeof *queries; k++)
    if (queries[k].n == n && queries[k].w[0] == c0 && strncasecmp(s, queries[k].w, n) == 0)
      return FIRST_QUERY;
  for (size_t k = 0; k < sizeof others / sizeof *others; k++)
    if (others[k].n == n && others[k].w[0] == c0 && strncasecmp(s, others[k].w, n) == 0)
      return FIRST_OTHER;
  return FIRST_UNKNOWN;
}

/* Rows as objects need one key per column: refuse a statement two of
 * whose columns share a name (sqljson.h, "rows"), before it is stepped.
 * Sorted copies of the names, so a wide SELECT * costs n log n. */
static int by_name(const void *a, const void *b) {
  return strcmp(**(const char *const *const *)a, **(const char *const *const *)b);
}

int lithd__same_names(const stmt_out *o, int *a, int *b) {
  int rc = 0;
  const char ***sorted; /* pointers into o->cols */
  if (o->ncols < 2)
    return 0;
  sorted = malloc((size_t)o->ncols * sizeof *sorted);
  if (!sorted)
    return -1;
  for (int c = 0; c < o->ncols; c++)
    sorted[c] = &o->cols[c];
  qsort(sorted, (size_t)o->ncols, sizeof *sorted, by_name);
  for (int c = 1; c < o->ncols; c++)
    if (strcmp(*sorted[c - 1], *sorted[c]) == 0) {
      int x = (int)(sorted[c - 1] - o->cols), y = (int)(sorted[c] - o->cols);
      *a = x < y ? x : y;
      *b = x < y ? y : x;
      rc = 1;
      break;
    }
  free(sorted);
  return rc;
}

/* The names and declared types of a statement's columns, held and sent
 * as its cells are: counted in max_result_bytes and charged to the budget
 * (a type declared 90 KB long, in 20 tables joined, 200 steps of a batch:
 * 360 MB of answer without one cell). */
static int column_room(lithd_result *r, int i, int ncols, const char *const *names,
                       const char *const *decls) {
  size_t n = 0;
  for (int col = 0; col < ncols; col++) {
    n += (names[col] != NULL ? strlen(names[col]) : 0) + r->cell_frame;
    if (r->fmt.types && decls != NULL && decls[col] != NULL)
      n += strlen(decls[col]);
  }
  size_t used = r->shared_bytes != NULL ? atomic_load(r->shared_bytes) : r->bytes;
  if (r->max_bytes > 0 && (used > r->max_bytes || n > r->max_bytes - used))
    return lithd__fail(r, LITHD_RESULT_TOO_LARGE, i,
                       "the answer would hold more than %zu bytes of text, blobs and column names "
                       "(max_result_bytes)",
                       r->max_bytes);
  int rc = charge(r, i, 2 * n + 16 * (size_t)ncols); /* the copy, the JSON (escapes: at most 6x, rare) */
  if (rc != LITH_OK)
    return rc;
  r->bytes += n;
  if (r->shared_bytes != NULL)
    atomic_fetch_add(r->shared_bytes, n);
  return LITH_OK;
}

int lithd__columns(lithd_result *r, int i, int ncols, const char *const *names, const char *const *decls,
                   stmt_out *o) {
  int rc;
  o->ncols = ncols;
  if (o->ncols == 0)
    return LITH_OK;
  if ((rc = column_room(r, i, ncols, names, decls)) != LITH_OK)
    return rc;
  o->cols = lithd_arena_alloc(&r->mem, (size_t)o->ncols * sizeof *o->cols, _Alignof(max_align_t));
  if (!o->cols)
    return lithd__fail(r, LITH_NOMEM, i, "out of memory");
  for (int col = 0; col < o->ncols; col++) {
    const char *name = names[col];
    if (!name)
      return lithd__fail(r, LITH_NOMEM, i, "out of memory");
    size_t len = strlen(name);
    if (!lithd_utf8_valid((const unsigned char *)name, len))
      return lithd__fail(r, LITHD_UNENCODABLE, i, "the name of column %d is not valid UTF-8", col);
    o->cols[col] = lithd_arena_copy(&r->mem, name, len);
    if (!o->cols[col])
      return lithd__fail(r, LITH_NOMEM, i, "out of memory");
  }
  if (r->fmt.types) { /* each column's declared type, as CREATE TABLE spelt it (NULL: an expression) */
    o->decls = lithd_arena_alloc(&r->mem, (size_t)o->ncols * sizeof *o->decls, _Alignof(max_align_t));
    if (!o->decls)
      return lithd__fail(r, LITH_NOMEM, i, "out of memory");
    for (int col = 0; col < o->ncols; col++) {
      const char *decl = decls != NULL ? decls[col] : NULL;
      o->decls[col] = decl ? lithd_arena_copy(&r->mem, decl, strlen(decl)) : NULL;
      if (decl && !o->decls[col])
        return lithd__fail(r, LITH_NOMEM, i, "out of memory");
    }
  }
  if (r->fmt.rows_objects) {
    int a = 0, b = 0, dup = lithd__same_names(o, &a, &b);
    if (dup < 0)
      return lithd__fail(r, LITH_NOMEM, i, "out of memory");
    if (dup > 0)
      return lithd__fail(r, LITHD_BAD_REQUEST, i, LITHD_SAME_NAMES_MSG, a, b, o->cols[a]);
  }
  return LITH_OK;
}

int lithd__stmt_columns(lithd_result *r, int i, sqlite3_stmt *st, stmt_out *o) {
  int n = sqlite3_column_count(st), rc;
  const char **names, **decls;
  if (n == 0)
    return lithd__columns(r, i, 0, NULL, NULL, o);
  names = malloc(2 * (size_t)n * sizeof *names);
  if (!names)
    return lithd__fail(r, LITH_NOMEM, i, "out of memory");
  decls = names + n;
  for (int col = 0; col < n; col++) {
    names[col] = sqlite3_column_name(st, col);
    decls[col] = sqlite3_column_decltype(st, col);
  }
  rc = lithd__columns(r, i, n, names, decls, o);
  free(names);
  return rc;
}

int lithd__describe(lithd_result *r, int i, sqlite3_stmt *st, stmt_out *o) {
  int rc, n = sqlite3_bind_parameter_count(st);
  if ((rc = lithd__stmt_columns(r, i, st, o)) != LITH_OK)
    return rc;
  o->param_names =
      lithd_arena_alloc(&r->mem, ((size_t)n + 1) * sizeof *o->param_names, _Alignof(max_align_t));
  if (!o->param_names)
    return lithd__fail(r, LITH_NOMEM, i, "out of memory");
  for (int k = 0; k < n; k++) {
    const char *name = sqlite3_bind_parameter_name(st, k + 1);
    o->param_names[k] = name ? lithd_arena_copy(&r->mem, name, strlen(name) + 1) : NULL;
    if (name && !o->param_names[k])
      return lithd__fail(r, LITH_NOMEM, i, "out of memory");
  }
  o->nparam_names = n;
  o->is_explain = sqlite3_stmt_isexplain(st) != 0;
  o->is_readonly = sqlite3_stmt_readonly(st) != 0;
  return LITH_OK;
}

static int64_t run_clock_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#define READONLY_TX_MSG "attempt to write a readonly database (a READONLY transaction)"
#define STALE_TX_MSG                                                                                  \
  "database is locked: another write committed since this deferred transaction's snapshot began, so " \
  "it cannot write (SQLite's SQLITE_BUSY_SNAPSHOT): roll it back and run it again"

#define NO_WRITES_MSG \
  "Authorization forbidden: the token grants read-only access to this database, and the statement writes"

int lithd__write_refused(lithd_result *r, int i, const lithd_batch *b, sqlite3_stmt *st) {
  if (st != NULL && sqlite3_stmt_readonly(st))
    return LITH_OK;
  if (b->no_writes) /* first: whatever else holds, the client may not write */
    return lithd__fail(r, LITHD_FORBIDDEN, i, NO_WRITES_MSG);
  if (b->readonly_tx)
    return lithd__fail(r, LITH_READONLY, i, READONLY_TX_MSG);
  if (b->stale_tx)
    return lithd__fail(r, LITH_BUSY, i, STALE_TX_MSG);
  return LITH_OK;
}

/* A batch of one VACUUM, submitted alone (lithd__batch_vacuums): lith
 * runs it between two transactions. */
static int run_vacuum(runner *rn, int i, int64_t t0) {
  if (rn->b->no_writes) /* it rewrites the file: a write, as SQLite counts it */
    return lithd__fail(rn->r, LITHD_FORBIDDEN, i, NO_WRITES_MSG);
  int rc = lith_tx_vacuum(rn->tx);
  if (rc != LITH_OK)
    return was_cut(rn) ? timeout_fail(rn, i) : lithd__fail(rn->r, rc, i, "%s", lith_errmsg(NULL));
  rn->r->outs[i].duration_ns = run_clock_ns() - t0;
  return LITH_OK;
}

static int run_one(runner *rn, int i) {
  const char *sql = rn->b->stmts[i].sql;
  lithd_result *r = rn->r;
  stmt_out *o = &r->outs[i];
  sqlite3_stmt *st;
  sqlite3_int64 before = 0;
  const stmt_spec *spec = &rn->b->stmts[i];
  int rc, src, prepared, first = rn->rx && !spec->describe ? lithd__first_keyword(sql) : FIRST_QUERY;
  int64_t t0 = run_clock_ns();

  /* A statement known not to be a query is refused before it is prepared;
   * an unknown first word is prepared, so a typo gets SQLite's message. */
  if (first == FIRST_OTHER && (rc = lithd__write_refused(r, i, rn->b, NULL)) != LITH_OK)
    return rc;
  if (first == FIRST_OTHER)
    return lithd__not_a_query(r, i);
  if (rn->tx && !spec->describe) {
    int now;
    if ((rc = lithd__vacuum_rule(r, rn->b, i, 1, &now)) != LITH_OK || now)
      return rc != LITH_OK ? rc : run_vacuum(rn, i, t0);
  }
  st = rn->tx ? lith_tx_stmt(rn->tx, sql) : lith_rx_stmt(rn->rx, sql);
  if (!st) {
    /* lith's message says why (prepare: ..., more than one statement, ...). */
    if (was_cut(rn)) /* a long prepare can be interrupted too */
      return timeout_fail(rn, i);
    rc = rn->tx ? lith_tx_rc(rn->tx) : lith_from_sqlite(sqlite3_extended_errcode(rn->conn));
    return lithd__prepare_failed(r, i, rc, rn->conn, lith_errmsg(NULL));
  }
  if (spec->describe) {
    rc = lithd__describe(r, i, st, o);
    goto out;
  }
  if ((rc = lithd__write_refused(r, i, rn->b, st)) != LITH_OK) /* before the reader's own refusal: its code */
    goto out;
  if (rn->rx && (rc = lithd__check_read(r, i, first, st)) != LITH_OK)
    goto out;
  if ((rc = bind_all(rn, i, st)) != LITH_OK)
    goto out;
  if ((rc = lithd__stmt_columns(r, i, st, o)) != LITH_OK)
    goto out;

  if (rn->tx) {
    before = sqlite3_total_changes64(rn->conn);
    sqlite3_set_last_insert_rowid(rn->conn, 0);
  }
  /* A cached statement whose schema changed since (a migration, on this
   * connection or another) is prepared again by its first step: its
   * columns are those of then, not the ones read above. */
  prepared = sqlite3_stmt_status(st, SQLITE_STMTSTATUS_REPREPARE, 0);
  src = sqlite3_step(st);
  if (sqlite3_stmt_status(st, SQLITE_STMTSTATUS_REPREPARE, 0) != prepared &&
      (rc = lithd__stmt_columns(r, i, st, o)) != LITH_OK)
    goto out;
  for (; src == SQLITE_ROW; src = sqlite3_step(st))
    if (!rn->b->stmts[i].no_rows && (rc = collect_row(rn, i, st, o)) != LITH_OK)
      goto out;
  if (src != SQLITE_DONE) {
    if (was_cut(rn))
      rc = timeout_fail(rn, i);
    else
      rc = lithd__fail(r, lith_from_sqlite(src), i, "%s", sqlite3_errmsg(rn->conn));
    goto out;
  }
  /* lith's rule on what the statement left (a foreign key onto _lith_*):
   * this statement fails, not the whole command at its end */
  if (rn->tx && (rc = lith_tx_check(rn->tx)) != LITH_OK) {
    rc = lithd__check_failed(r, i, rc, lith_errmsg(NULL));
    goto out;
  }
  if (rn->tx) {
    /* sqlite3_changes64 keeps the count of the last INSERT, UPDATE or
       DELETE: it is this statement's only if the total moved. */
    o->changes = sqlite3_total_changes64(rn->conn) != before ? sqlite3_changes64(rn->conn) : 0;
    o->last_rowid = sqlite3_last_insert_rowid(rn->conn);
  }
  o->duration_ns = run_clock_ns() - t0;
  rc = LITH_OK;
out:
  /* Leave nothing running (a half-read SELECT would sit across the
     command's ROLLBACK TO) and nothing pointing into the batch. */
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  return rc;
}

/* ---- Steps (sqljson_int.h, "Steps"; the rules are sql/steps.c's) ---------- */

static int step_run(lithd_steps *s, int i) { return run_one(s->ctx, i); }

static int nest_body(lith_tx *tx, void *arg) {
  (void)tx;
  return lithd__steps_nested(arg);
}

/* A savepoint of lith's (lith_tx_savepoint): released on LITH_OK, undone
 * otherwise. */
static int step_nest(lithd_steps *s, int (*fn)(lithd_steps *s), int stmt) {
  runner *rn = s->ctx;
  lithd_steps_nest nc = {s, fn, LITH_OK};
  int rc = lith_tx_savepoint(rn->tx, nest_body, &nc);
  if (rc != LITH_OK && rc != nc.rc && s->r->err.code == LITH_OK) /* lith's own (its run limit) */
    lithd__fail(s->r, rc, stmt, "%s", lith_errmsg(NULL));
  return rc;
}

/* SQLite ended the transaction around the step (an interrupted write, a
 * full disk). */
static int step_fatal(lithd_steps *s, int i, int rc) {
  (void)i, (void)rc;
  return sqlite3_get_autocommit(((runner *)s->ctx)->conn);
}

static int step_end(lithd_steps *s, int txctl, int i) {
  runner *rn = s->ctx;
  int rc = txctl == TXC_COMMIT ? lith_tx_commit(rn->tx) : lith_tx_rollback(rn->tx);
  if (rc != LITH_OK)
    lithd__fail(s->r, rc, i, "%s", lith_errmsg(NULL));
  return rc;
}

static int step_foreign_keys(lithd_steps *s, int on, int i) {
  int rc = lith_tx_foreign_keys(((runner *)s->ctx)->tx, on);
  if (rc != LITH_OK)
    lithd__fail(s->r, rc, i, "%s", lith_errmsg(NULL));
  return rc;
}

static int step_ended(lithd_steps *s) { return sqlite3_get_autocommit(((runner *)s->ctx)->conn); }

/* The writer's command (a savepoint per step; held: the command alone is
 * the stream's connection), and a reader (one snapshot, nothing to undo). */
static const lithd_steps_ops writer_steps = {step_run, step_nest,         step_fatal,
                                             step_end, step_foreign_keys, step_ended};
static const lithd_steps_ops reader_steps = {step_run, NULL, NULL, NULL, NULL, NULL};

static int run_steps(runner *rn) {
  lithd_steps s = {.ops = rn->tx ? &writer_steps : &reader_steps, .ctx = rn, .b = rn->b, .r = rn->r};
  return lithd__steps_run(&s);
}

static int run_batch(runner *rn, lithd_result **out) {
  lithd_batch *b = rn->b;
  int rc = LITH_OK;
  if (lithd__result_renew(out, b) != 0) {
    if (rn->tx)
      return lith_tx_error(rn->tx, LITH_NOMEM, "out of memory");
    return LITH_NOMEM;
  }
  lithd_result *r = rn->r = *out;

  int64_t now = lith_clock_ms();
  rn->deadline = b->lim.max_run_ms > INT64_MAX - now ? INT64_MAX : now + b->lim.max_run_ms;
  rn->guard = lithd_guard_begin(rn->conn, rn->deadline, rn->rx != NULL);
  if (rn->rx) /* the writer's is lith's (command_timeout_ms) */
    sqlite3_progress_handler(rn->conn, 1000, on_progress, rn);
  if (b->steps) {
    if ((rc = run_steps(rn)) != LITH_OK && rn->tx)
      lith_tx_error(rn->tx, rc, "%s", r->err.message);
  } else {
    for (int i = 0; i < b->n; i++) {
      if ((rc = run_one(rn, i)) != LITH_OK) {
        if (rn->tx) /* what lith_errmsg / req->errmsg will say */
          lith_tx_error(rn->tx, rc, "statement %d: %s", i, r->err.message);
        break;
      }
      r->outs[i].state = STEP_OK;
      r->n = i + 1;
    }
  }
  if (rn->rx)
    sqlite3_progress_handler(rn->conn, 0, NULL, NULL);
  lithd_guard_end(rn->guard);
  return rc;
}

int lithd_batch_run(lith_tx *tx, lithd_batch *b, lithd_result **out) {
  if (!tx || !b || !out)
    return LITH_MISUSE;
  runner rn = {.tx = tx, .conn = lith_tx_db(tx), .b = b};
  return run_batch(&rn, out);
}

int lithd_batch_read(lith_rx *rx, lithd_batch *b, lithd_result **out) {
  if (!rx || !b || !out)
    return LITH_MISUSE;
  runner rn = {.rx = rx, .conn = lith_rx_db(rx), .b = b};
  return run_batch(&rn, out);
}

int lithd_result_error(const lithd_result *r, lithd_error *err) {
  if (!r)
    return lithd_error_set(err, LITH_MISUSE, -1, "no result");
  if (err)
    *err = r->err;
  return r->err.code;
}

size_t lithd_result_size(const lithd_result *r) { return r != NULL ? r->charged : 0; }

void lithd_result_free(lithd_result *r) {
  if (!r)
    return;
  if (r->charged)
    atomic_fetch_sub(&answer_used, r->charged);
  for (int i = 0; i < r->nouts; i++)
    free(r->outs[i].vals);
  free(r->outs);
  lithd_arena_free(&r->mem);
  free(r);
}

/* ---- The write connection's authorizer ------------------------------------ */

int lithd_authorizer(void *ctx, int action, const char *a, const char *b, const char *c, const char *d) {
  (void)ctx, (void)d;
  switch (action) {
  case SQLITE_ATTACH:
  case SQLITE_DETACH: return SQLITE_DENY;
  case SQLITE_FUNCTION:
    /* load_extension loads code; fts3_tokenizer hands out (one argument)
     * and takes (two, when bound) a pointer to C functions. */
    return b != NULL && (strcasecmp(b, "load_extension") == 0 || strcasecmp(b, "fts3_tokenizer") == 0)
               ? SQLITE_DENY
               : SQLITE_OK;
  case SQLITE_PRAGMA:
    /* lith's rule, the one place it is (a command may read any, set only
     * what it can undo), for the readers too: the writer's authorizer ran
     * it already */
    return lith_command_rule(action, a, b, c, NULL, 0);
  default: return SQLITE_OK;
  }
}
