/*
 * sqljson_int.h — what the three stages of sqljson share; not for the rest
 * of lithd, which uses sqljson.h.
 *
 * sqljson is one pipeline in three stages, one file each:
 *   sqljson_parse.c   JSON body -> lithd_batch (plain C values in one arena)
 *   sqljson_run.c     lithd_batch -> SQLite -> lithd_result (on the writer
 *                     or a reader)
 *   sqljson_encode.c  lithd_result / lithd_error -> JSON text
 * and sqljson.c holds what all of them use: errors, code names, HTTP
 * statuses, limits. The batch and the result are defined here, since one
 * stage fills what the next reads.
 *
 * Ownership: a batch owns its arena (`mem`), and every string and value
 * of its statements lives there. A result owns its arena (column names,
 * declared types, TEXT and BLOB bytes) and its `outs` and each out's `vals` (malloc'd:
 * they grow row by row).
 */
#ifndef LITHD_SQLJSON_INT_H
#define LITHD_SQLJSON_INT_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "arena.h"
#include "sqljson.h"

/* ---- Values ---------------------------------------------------------------- */

/* One SQLite value; `type` is SQLITE_INTEGER, _FLOAT, _TEXT, _BLOB or
 * _NULL. Text and blob bytes live in the owner's arena. */
typedef struct value {
  int type;
  size_t n;
  union {
    int64_t i;
    double d;
    const unsigned char *p;
  } u;
} value;

/* A statement's parameter: by name, or by position (its index + 1). */
typedef struct param {
  const char *name; /* NULL when bound by position */
  value v;
} param;

/* A step's condition (Hrana's BatchCond), evaluated just before the step
 * on the outcomes of the steps before it. Lives in the batch's arena. */
enum { COND_OK, COND_ERROR, COND_NOT, COND_AND, COND_OR, COND_AUTOCOMMIT };
typedef struct step_cond {
  int op;
  int step;                     /* COND_OK, COND_ERROR: an earlier step's index */
  int n;                        /* COND_NOT: 1; COND_AND, COND_OR: how many */
  const struct step_cond *kids; /* n of them */
} step_cond;

/* What a statement is to a stream's transaction (lithd__txctl). */
enum { TXC_NONE, TXC_BEGIN, TXC_COMMIT, TXC_ROLLBACK, TXC_SAVEPOINT };
/* A PRAGMA foreign_keys assignment (lithd__fk_pragma). */
enum { FK_NONE, FK_OFF, FK_ON };
/* A BEGIN's kind. */
enum { TXB_DEFERRED, TXB_IMMEDIATE, TXB_EXCLUSIVE, TXB_READONLY };

/* One statement of a request, parsed. */
typedef struct stmt_spec {
  const char *sql;
  int named;
  int nparams;
  param *params;
  /* Steps (a batch with steps set; 0 / NULL otherwise). */
  const step_cond *cond; /* NULL: the step always runs */
  int no_rows;           /* run it, keep no rows (Hrana's want_rows: false) */
  int txctl;             /* TXC_*: lithd__txctl of sql */
  int begin_kind;        /* TXB_*, for TXC_BEGIN */
  int fk_set;            /* FK_*: lithd__fk_pragma of sql */
  int chained;           /* a step between a BEGIN and its COMMIT whose failure
                            skips every step to that COMMIT, after which a
                            ROLLBACK runs (client.batch()'s pattern): it needs
                            no savepoint of its own, the ROLLBACK undoes it */
  int guess_prefix;      /* a name without its ':', '@' or '$' is tried with each */
  int describe;          /* only prepare it and describe it (Hrana's describe): its
                            columns, parameters, whether it reads only; never stepped */
} stmt_spec;

/* A parsed request: lithd_batch_parse fills it, lithd_batch_run reads it. */
struct lithd_batch {
  lithd_limits lim;
  _Atomic size_t *shared_bytes; /* NULL, or the request's count that max_result_bytes
                                   bounds for several batches (/v1/batch) */
  lithd_format fmt;             /* how the answer is written; the result copies it */
  int steps;                    /* 1: each statement is a step with an outcome of its own
                                   (below) */
  /* An interactive transaction's batch (steps; store.h, lithd_store_tx):
   * the command running it is alone in its transaction, so it plays the
   * stream's connection: a BEGIN commits what ran before it in the batch
   * (autocommit) and opens the stream's transaction, COMMIT and ROLLBACK
   * end it (lith_tx_commit, lith_tx_rollback) and the steps after them run
   * in autocommit again; the result's in_tx says whether it is open. On a
   * reader (a transaction on a snapshot) the same, with nothing to commit:
   * the snapshot is the transaction. */
  int held;
  int start_in_tx;  /* the stream's transaction is open when the batch starts */
  int readonly_tx;  /* BEGIN TRANSACTION READONLY: a statement that writes fails
                      (SQLITE_READONLY) */
  int no_writes;    /* the client's credentials grant reads only (a read-only
                      JWT): a statement that writes fails (LITHD_FORBIDDEN);
                      set by the store seam from lithd_store_req.may_write */
  int closing;      /* the stream closes right after this batch (Hrana: only
                      close follows it in the pipeline): a transaction it
                      leaves open is rolled back at its end, as the close
                      would, instead of failing the run (steps.c) */
  int stale_tx;     /* a deferred transaction on a snapshot another write has
                      since replaced (store.h): a statement that writes fails
                      (SQLITE_BUSY), the transaction goes on */
  int too_old_cuts; /* a transaction on a snapshot (a reader's run): a statement
                       still running once lith_rx_too_old says 1 is cut
                       (LITHD_TX_TOO_OLD): its snapshot keeps the WAL from
                       starting over */
  int n;
  stmt_spec *stmts;
  lithd_arena mem;
};

/* Steps. A batch with steps (Hrana's batch and sequence) runs differently
 * from /v1/do's all-or-nothing list, as SQLite runs statements on a
 * connection in autocommit:
 *   - each step runs only if its condition holds, and has an outcome of its
 *     own: skipped, ok (its rows), or failed (its error); a failed step is
 *     undone alone (a nested savepoint on the writer) and the steps after
 *     it run;
 *   - a step whose txctl is TXC_BEGIN opens the stream's transaction, which
 *     TXC_COMMIT ends keeping what ran since and TXC_ROLLBACK undoes (a
 *     nested savepoint around those steps: the clients' BEGIN, COMMIT and
 *     ROLLBACK never reach SQLite, whose transaction is the writer's); a
 *     condition's COND_AUTOCOMMIT is true outside it; BEGIN inside it,
 *     COMMIT or ROLLBACK outside it fail as SQLite fails them;
 *   - the run fails as a whole (nothing of it kept; the result's err says
 *     why) only when the transaction around it died (SQLite rolled it back:
 *     an interrupted write, a full disk), or when a transaction is still
 *     open after the last step (the stream's transaction would outlive the
 *     command).
 * The same rules on a reader (lithd_batch_read): every step a query, the
 * transaction steps only counted. */

/* How a store runs a batch with steps (sql/steps.c): the rules above, in
 * one place; the store gives the calls that differ. Each call that fails
 * leaves its error in r->err (a statement's, or -1's) and returns its
 * code; the private codes below pass through nest untouched. */
typedef struct lithd_steps lithd_steps;
typedef struct lithd_steps_ops {
  /* Statement i: LITH_OK, or its code. */
  int (*run)(lithd_steps *s, int i);
  /* fn(s) in a savepoint nested in the command's: kept when fn returns
   * LITH_OK, undone otherwise; returns fn's code (or the store's own
   * failure, blamed on statement `stmt`). NULL: nothing to undo (a
   * reader's snapshot). */
  int (*nest)(lithd_steps *s, int (*fn)(lithd_steps *s), int stmt);
  /* After statement i failed with rc: 1 if the run must end (the
   * transaction around it is gone, the store lost its connection). */
  int (*fatal)(lithd_steps *s, int i, int rc);
  /* A held batch (lithd_batch.held) on the writer: commit or roll back the
   * stream's connection's work so far (txctl TXC_COMMIT / TXC_ROLLBACK;
   * TXC_COMMIT too for what ran in autocommit before a BEGIN), and turn
   * foreign keys on or off between two transactions, blamed on statement
   * i. NULL: the store holds no transaction (or a snapshot: nothing to
   * keep). */
  int (*end)(lithd_steps *s, int txctl, int i);
  int (*foreign_keys)(lithd_steps *s, int on, int i);
  /* After end failed: 1 if the transaction is gone (SQLite ended it). */
  int (*ended)(lithd_steps *s);
} lithd_steps_ops;

struct lithd_steps {
  const lithd_steps_ops *ops;
  void *ctx; /* the store's */
  lithd_batch *b;
  lithd_result *r;
  /* The run's own. */
  int next;  /* the step to run next */
  int cur;   /* the step running in its savepoint */
  int in_tx; /* inside the stream's transaction (a BEGIN step ran) */
};

/* What a store's nest hands its savepoint's callback: the callback returns
 * lithd__steps_nested(arg), which runs fn and keeps its code in rc, so the
 * store tells fn's code from its own savepoint's failure. */
typedef struct lithd_steps_nest {
  lithd_steps *s;
  int (*fn)(lithd_steps *s);
  int rc; /* fn's */
} lithd_steps_nest;
int lithd__steps_nested(void *arg);

/* Run s->b's steps into s->r (b->steps set; the result renewed). LITH_OK
 * (each step's outcome in its out), or the code that fails the whole run
 * (r->err says why). r->in_tx says whether the stream's transaction is
 * open after it. */
int lithd__steps_run(lithd_steps *s);

/* A step's outcome (a batch with steps). */
enum { STEP_SKIPPED, STEP_OK, STEP_FAILED };

/* What one statement gave back. */
typedef struct stmt_out {
  int state;          /* STEP_*; a batch without steps: STEP_OK for those that ran */
  lithd_error *error; /* STEP_FAILED: why (in the result's arena) */
  int64_t changes;
  int64_t last_rowid;
  int ncols;
  const char **cols;
  const char **decls; /* declared types (NULL: an expression), with fmt.types */
  int64_t nrows;
  value *vals; /* nrows * ncols, row by row */
  /* A described statement (stmt_spec.describe): each parameter's name
   * (NULL: nameless), in SQLite's numbering from 1 at [0]. */
  int nparam_names;
  const char **param_names;
  int is_explain, is_readonly;
  int64_t duration_ns; /* how long it ran */
  size_t nvals, capvals;
} stmt_out;

/* A run's outcome: lithd_batch_run fills it, lithd_result_json reads it. */
struct lithd_result {
  lithd_error err;
  int tx_end;       /* a held batch: TXC_COMMIT or TXC_ROLLBACK of the last step that
                      ended the stream's transaction, else TXC_NONE */
  int tx_end_step;  /* which step */
  int in_tx;        /* a batch with steps: the stream's transaction is open after it */
  lithd_format fmt; /* the batch's, when it ran */
  int n;            /* statements that ran (all of them on success) */
  int nouts;
  stmt_out *outs;               /* nouts: one per statement of the batch */
  int64_t rows;                 /* all statements together */
  size_t bytes;                 /* text, blob, column names and declared types held */
  size_t max_bytes;             /* the batch's max_result_bytes, when it ran */
  size_t cell_frame;            /* the batch's lim.cell_frame */
  _Atomic size_t *shared_bytes; /* the batch's */
  size_t charged;               /* what it holds of the process's answer budget (lithd_answer_budget) */
  lithd_arena mem;
};

/* ---- Shared by the stages (sqljson.c) ------------------------------------- */

/* lithd_error_set with a va_list. Returns code. */
int lithd__error_vset(lithd_error *err, int code, int statement, const char *fmt, va_list ap);

/* *err as "no error": LITH_OK, statement -1, empty message. */
void lithd__error_clear(lithd_error *err);

/* ---- Shared by the request formats (sqljson_parse.c, sqljson_encode.c) ---- */

/* An empty batch of n statements (zeroed, in its arena), its limits lim's
 * (NULL: the defaults) resolved: for a format that fills stmt_specs
 * itself (Hrana). NULL when out of memory. */
lithd_batch *lithd__batch_new(const lithd_limits *lim, int n);

/* Base64 (standard alphabet, strict) of s[0..n) into out, which has room
 * for (n + 3) / 4 * 3 bytes; *outn its length. unpadded_ok: the '=' padding
 * may be left out (Hrana accepts both). Returns 0, or -1 with why (64
 * bytes) saying what is wrong. */
int lithd__b64_decode(const char *s, size_t n, int unpadded_ok, unsigned char *out, size_t *outn, char *why);

/* p[0..n) in base64, padded, without quotes. */
void lithd__put_base64_text(lithd_buf *b, const unsigned char *p, size_t n);

/* A finite double in the fewest digits that read back as it, with ".0"
 * when it would read as an integer; null when not finite. */
void lithd__put_real(lithd_buf *b, double d);

/* ---- The policy every store runs a statement under (sql/sqljson_run.c) ----
 * Each call that can fail writes the error into r->err (statement i) and
 * returns its code; LITH_OK otherwise. */

/* r->err as code, statement stmt and the message. Returns code. */
int lithd__fail(lithd_result *r, int code, int stmt, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A fresh result for b (its format copied) into *out, after the one an
 * earlier run of the same command left there is freed (its bytes given
 * back to a shared count): 0, or -1 out of memory (*out NULL). */
int lithd__result_renew(lithd_result **out, const lithd_batch *b);

/* What the first keyword of s, past blanks and comments, says of the
 * statement on /v1/query: FIRST_QUERY (SELECT, WITH, VALUES, EXPLAIN),
 * FIRST_OTHER (a keyword that opens any other SQLite statement, or none),
 * FIRST_UNKNOWN (no statement opens so: a typo). */
enum { FIRST_QUERY, FIRST_OTHER, FIRST_UNKNOWN };
int lithd__first_keyword(const char *s);

/* s past blanks and comments (-- to the line's end, slash-star to its
 * close): where a statement's first word begins; "" when a comment never
 * ends. Blanks and letters as the C locale's isspace and isalpha (lithd
 * never calls setlocale), without their per-byte calls. */
const char *lithd__sql_lead(const char *s);
static inline int lithd__sql_blank(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
static inline int lithd__sql_letter(unsigned char c) { return (unsigned char)((c | 0x20) - 'a') < 26; }

/* A prepare on conn failed with `code` (a lith code) and `msg`: an
 * authorizer's refusal is LITHD_FORBIDDEN (403), the rest `code`. */
int lithd__prepare_failed(lithd_result *r, int i, int code, sqlite3 *conn, const char *msg);

/* A statement ran, then lith's rule on the schema it left refused it
 * (lith_tx_check, lith_command_check: a foreign key onto _lith_*): `msg`,
 * beginning "not authorized" for the rule, is LITHD_FORBIDDEN (403) as the
 * authorizer's refusals; anything else (the schema could not be read) is
 * `code`. The caller undoes what the statement did (it fails its command,
 * or its step's savepoint). */
int lithd__check_failed(lithd_result *r, int i, int code, const char *msg);

/* The one rule on a statement that writes where its batch may not (st
 * prepared; NULL: its first keyword says it is no query, on a reader): a
 * client without write access (no_writes: LITHD_FORBIDDEN, "Authorization
 * forbidden: ..."), a READONLY transaction (LITH_READONLY), a deferred
 * one on a stale snapshot (LITH_BUSY). LITH_OK when st only reads or the
 * batch may write. Every store runs its statements through it. */
int lithd__write_refused(lithd_result *r, int i, const lithd_batch *b, sqlite3_stmt *st);

/* The refusal of a statement that is not a query, on /v1/query. */
int lithd__not_a_query(lithd_result *r, int i);

/* A statement prepared for /v1/query (first: lithd__first_keyword of its
 * text) may run there: a query SQLite calls read-only. */
int lithd__check_read(lithd_result *r, int i, int first, sqlite3_stmt *st);

/* Statement i's values in st's parameter positions, as SQLite numbers
 * them: vals[k] is parameter k + 1's (vals has room for
 * sqlite3_bind_parameter_count(st)); the exact count by position, every
 * name given and none unknown by name. st may be a statement prepared only
 * to learn this (the dqlite store's vetting). */
int lithd__bind_plan(lithd_result *r, int i, const stmt_spec *spec, sqlite3_stmt *st, const value **vals);

/* Statement i's columns into o: names (valid UTF-8), declared types when
 * the answer carries them (decls may be NULL: none known), distinct names
 * when rows are objects. lithd__stmt_columns reads them off st. */
int lithd__columns(lithd_result *r, int i, int ncols, const char *const *names, const char *const *decls,
                   stmt_out *o);
int lithd__stmt_columns(lithd_result *r, int i, sqlite3_stmt *st, stmt_out *o);

/* Statement i, prepared and never stepped (Hrana's describe), into o:
 * its columns with their declared types, its parameters' names, whether
 * it is an EXPLAIN and whether it only reads. */
int lithd__describe(lithd_result *r, int i, sqlite3_stmt *st, stmt_out *o);

/* Rows, as they arrive: lithd__row_room before a row (max_rows), each
 * cell through lithd__put_cell (max_result_bytes, UTF-8 of TEXT; the bytes
 * are copied into r's arena), lithd__row_done after it. */
int lithd__row_room(lithd_result *r, const lithd_limits *lim, int i);
int lithd__put_cell(lithd_result *r, const lithd_limits *lim, int i, stmt_out *o, value v);
void lithd__row_done(lithd_result *r, stmt_out *o);

/* What sql (one statement) is to a stream's transaction: TXC_BEGIN (then
 * *begin_kind, may be NULL, is a TXB_), TXC_COMMIT (COMMIT, END), TXC_ROLLBACK
 * (ROLLBACK without TO), TXC_SAVEPOINT (SAVEPOINT, RELEASE, ROLLBACK TO:
 * they run as written, inside the command, but never inside a step's own
 * savepoint, whose RELEASE would release the client's too), or TXC_NONE
 * (anything else). SQLite
 * decides (sqlite3_prepare of the text on a connection of its own, whose
 * authorizer sees SQLITE_TRANSACTION or SQLITE_SAVEPOINT), not a scanner; the kind of a BEGIN
 * is read from its words (libSQL's BEGIN TRANSACTION READONLY is, to
 * SQLite, a BEGIN of a transaction named READONLY). Thread-safe. */
int lithd__txctl(const char *sql, int *begin_kind);

/* FK_OFF or FK_ON if sql is one PRAGMA foreign_keys assignment (SQLite's
 * word, as lithd__txctl's), else FK_NONE. In a held batch's autocommit it
 * is lith_tx_foreign_keys (libSQL's migrate() turns foreign keys off around
 * its migration), in a transaction a no-op, as SQLite has it. */
int lithd__fk_pragma(const char *sql);

/* What sql (one statement) is as a VACUUM: VAC_MAIN (of the main
 * database, no INTO: the one VACUUM lithd runs), VAC_REFUSED (any other
 * VACUUM SQLite prepares: INTO a file, of temp, of another schema),
 * VAC_NONE (anything else: another statement, text SQLite does not
 * prepare). SQLite's word (txctl.c), read only when the first word is
 * VACUUM. Thread-safe. */
enum { VAC_NONE, VAC_MAIN, VAC_REFUSED };
int lithd__vacuum(const char *sql);

/* The rule on statement i as a VACUUM, for a store that runs a command's
 * statements (can: it runs a batch of one VACUUM of main as a command
 * alone, lith_tx_vacuum, as SQLite runs it only outside a transaction).
 * LITH_OK with *now set: run it so; LITH_OK with *now clear: run it as any
 * statement (not a VACUUM, or one that fails as SQLite fails it inside a
 * transaction: with other statements, in a stream's transaction); else
 * the refusal in r: VACUUM INTO writes a file wherever lithd may
 * (docs/security.md), and a store that cannot says why. */
int lithd__vacuum_rule(lithd_result *r, const lithd_batch *b, int i, int can, int *now);

/* Non-zero when b is one VACUUM of main alone (no steps): the local store
 * submits it alone (lith_submit_alone), so that lith_tx_vacuum may run. */
int lithd__batch_vacuums(const lithd_batch *b);

/* Whether two of o's columns share a name (rows as objects need distinct
 * ones): 1 with *a < *b their indexes, 0 if none, -1 out of memory. */
int lithd__same_names(const stmt_out *o, int *a, int *b);
#define LITHD_SAME_NAMES_MSG                                                         \
  "columns %d and %d are both named \"%.64s\": rows as objects need distinct names " \
  "(name them apart with AS, or ask for rows as arrays)"

#endif /* LITHD_SQLJSON_INT_H */
