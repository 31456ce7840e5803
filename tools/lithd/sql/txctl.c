/*
 * sql/txctl.c — which statements open or end a stream's transaction
 * (lithd__txctl, sqljson_int.h).
 *
 * Design: a scan of the first word only picks the candidates (BEGIN,
 * COMMIT, END, ROLLBACK, SAVEPOINT, RELEASE), so that the common statement
 * costs nothing; SQLite decides about each candidate. The text is prepared
 * (never stepped) on one in-memory connection of this file, whose
 * authorizer records SQLITE_TRANSACTION and SQLITE_SAVEPOINT: a statement
 * SQLite does not parse as transaction control (a syntax error, two
 * statements) is TXC_NONE and goes on to be prepared where it runs, with that
 * connection's errors and authorizer. So a text is never taken for a
 * COMMIT that SQLite would not run as one, whatever its comments or case.
 * The connection is opened on first use and kept for the process (one
 * mutex: a prepare of a short statement); the answers for the last few
 * short texts are kept beside it, since clients send the same BEGIN and
 * COMMIT with every batch.
 *
 * A VACUUM (lithd__vacuum) no authorizer sees: what it is is read off the
 * program SQLite makes of it (EXPLAIN on the same connection, never run),
 * its Vacuum instruction's database and INTO operand, so that no spelling
 * of VACUUM INTO passes for a plain one. One rule: only the plain VACUUM
 * of main runs; any other that SQLite prepares is refused (SQLite makes
 * no Vacuum instruction at all of VACUUM temp, so its INTO cannot be read
 * off the program: "VACUUM temp INTO 'file'" would have passed).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sqlite3.h>

#include "sqljson_int.h"

static pthread_mutex_t conn_mu = PTHREAD_MUTEX_INITIALIZER;
static sqlite3 *conn;

const char *lithd__sql_lead(const char *s) {
  for (;;) {
    while (lithd__sql_blank((unsigned char)*s))
      s++;
    if (s[0] == '-' && s[1] == '-') {
      s = strchr(s, '\n');
      if (!s)
        return "";
    } else if (s[0] == '/' && s[1] == '*') {
      const char *e = strstr(s + 2, "*/");
      if (!e)
        return "";
      s = e + 2;
    } else {
      return s;
    }
  }
}

/* The next word of *s past blanks and comments, into w (upper-cased, cut
 * at cap - 1); *s moves past it. "" at the end or before punctuation. */
static void next_word(const char **s, char *w, size_t cap) {
  const char *p = lithd__sql_lead(*s);
  size_t n = 0;
  while (lithd__sql_letter((unsigned char)*p) || *p == '_') {
    if (n + 1 < cap)
      w[n++] = (char)(*p & ~0x20);
    p++;
  }
  w[n] = '\0';
  *s = p;
}

/* SQLite's boolean words (its PRAGMA's: on, yes, true, a number). */
static int fk_value(const char *v) {
  if (v == NULL)
    return FK_NONE;
  if (strcasecmp(v, "on") == 0 || strcasecmp(v, "yes") == 0 || strcasecmp(v, "true") == 0)
    return FK_ON;
  if (strcasecmp(v, "off") == 0 || strcasecmp(v, "no") == 0 || strcasecmp(v, "false") == 0)
    return FK_OFF;
  char *end;
  long n = strtol(v, &end, 10);
  if (end != v && *end == '\0')
    return n != 0 ? FK_ON : FK_OFF;
  return FK_NONE;
}

/* What the authorizer saw. */
typedef struct seen_t {
  int tx; /* TXC_* */
  int fk; /* FK_*: a PRAGMA foreign_keys assignment */
} seen_t;

static int saw_transaction(void *ctx, int action, const char *a, const char *b, const char *c,
                           const char *d) {
  seen_t *seen = ctx;
  (void)c, (void)d;
  if (action == SQLITE_PRAGMA && a != NULL && strcasecmp(a, "foreign_keys") == 0)
    seen->fk = fk_value(b);
  if (action == SQLITE_TRANSACTION && a != NULL)
    seen->tx = a[0] == 'B' ? TXC_BEGIN : a[0] == 'C' ? TXC_COMMIT : TXC_ROLLBACK;
  else if (action == SQLITE_SAVEPOINT)
    seen->tx = TXC_SAVEPOINT;
  return SQLITE_OK;
}

/* The answers for the last short texts asked (conn_mu): a client sends
 * the same few ("BEGIN IMMEDIATE", "COMMIT", "ROLLBACK") with every batch,
 * and a prepare of each cost more than the rest of building its step. */
enum { SEEN_CACHE = 16, SEEN_TEXT_MAX = 64 };
static struct {
  char sql[SEEN_TEXT_MAX];
  seen_t seen;
} seen_cache[SEEN_CACHE];
static unsigned seen_next;

/* SQLite's word on sql: nothing seen unless it prepares as one statement
 * (nothing after it but blanks and comments). */
static seen_t ask_sqlite(const char *sql) {
  seen_t seen = {TXC_NONE, FK_NONE}, none = {TXC_NONE, FK_NONE};
  sqlite3_stmt *st = NULL;
  const char *tail = NULL;
  size_t len = strlen(sql);
  pthread_mutex_lock(&conn_mu);
  if (len < SEEN_TEXT_MAX)
    for (int k = 0; k < SEEN_CACHE; k++)
      if (seen_cache[k].sql[0] != '\0' && strcmp(seen_cache[k].sql, sql) == 0) {
        seen = seen_cache[k].seen;
        pthread_mutex_unlock(&conn_mu);
        return seen;
      }
  if (conn == NULL &&
      sqlite3_open_v2(":memory:", &conn, SQLITE_OPEN_READWRITE | SQLITE_OPEN_MEMORY, NULL) != SQLITE_OK) {
    sqlite3_close(conn);
    conn = NULL;
  }
  if (conn != NULL) {
    sqlite3_set_authorizer(conn, saw_transaction, &seen);
    if (sqlite3_prepare_v2(conn, sql, -1, &st, &tail) != SQLITE_OK || st == NULL) {
      seen = none;
    } else {
      char w[2];
      next_word(&tail, w, sizeof w);
      if (*tail != '\0' && *tail != ';') /* a second statement: not ours to split */
        seen = none;
      else if (*tail == ';') {
        tail++;
        while (lithd__sql_blank((unsigned char)*tail))
          tail++;
        next_word(&tail, w, sizeof w);
        if (*tail != '\0')
          seen = none;
      }
    }
    sqlite3_finalize(st);
    sqlite3_set_authorizer(conn, NULL, NULL);
    if (len > 0 && len < SEEN_TEXT_MAX) { /* the same text: the same answer, SQLite's grammar being fixed */
      unsigned k = seen_next++ % SEEN_CACHE;
      memcpy(seen_cache[k].sql, sql, len + 1);
      seen_cache[k].seen = seen;
    }
  } else {
    seen = none;
  }
  pthread_mutex_unlock(&conn_mu);
  return seen;
}

int lithd__fk_pragma(const char *sql) {
  char w[16];
  const char *p = sql;
  next_word(&p, w, sizeof w);
  if (strcmp(w, "PRAGMA") != 0)
    return FK_NONE;
  return ask_sqlite(sql).fk;
}

int lithd__vacuum(const char *sql) {
  char w[8];
  const char *p = sql;
  next_word(&p, w, sizeof w);
  if (strcmp(w, "VACUUM") != 0)
    return VAC_NONE;
  int vac = VAC_NONE, one = 0;
  char *explain = sqlite3_mprintf("EXPLAIN %s", sql);
  if (explain == NULL)
    return VAC_NONE; /* runs as written: inside the writer's transaction SQLite refuses any VACUUM */
  pthread_mutex_lock(&conn_mu);
  if (conn == NULL &&
      sqlite3_open_v2(":memory:", &conn, SQLITE_OPEN_READWRITE | SQLITE_OPEN_MEMORY, NULL) != SQLITE_OK) {
    sqlite3_close(conn);
    conn = NULL;
  }
  sqlite3_stmt *st = NULL;
  const char *tail = NULL;
  if (conn != NULL && sqlite3_prepare_v2(conn, explain, -1, &st, &tail) == SQLITE_OK && st != NULL) {
    tail = lithd__sql_lead(tail);
    if (*tail == ';')
      tail = lithd__sql_lead(tail + 1);
    one = *tail == '\0';
    while (one && sqlite3_step(st) == SQLITE_ROW) { /* one statement only */
      const unsigned char *op = sqlite3_column_text(st, 1);
      if (op == NULL || strcmp((const char *)op, "Vacuum") != 0)
        continue;
      /* P1: the database (0: main); P2: the register of INTO's file name, 0 without INTO */
      vac = sqlite3_column_int(st, 3) == 0 && sqlite3_column_int(st, 2) == 0 ? VAC_MAIN : VAC_REFUSED;
      break;
    }
  }
  if (one && vac == VAC_NONE) /* a VACUUM SQLite prepares, of no Vacuum instruction: temp's, INTO or not */
    vac = VAC_REFUSED;
  sqlite3_finalize(st);
  pthread_mutex_unlock(&conn_mu);
  sqlite3_free(explain);
  return vac;
}

int lithd__txctl(const char *sql, int *begin_kind) {
  char w[16];
  const char *p = sql;
  int kind = TXB_DEFERRED;
  next_word(&p, w, sizeof w);
  if (strcmp(w, "BEGIN") != 0 && strcmp(w, "COMMIT") != 0 && strcmp(w, "END") != 0 &&
      strcmp(w, "ROLLBACK") != 0 && strcmp(w, "SAVEPOINT") != 0 && strcmp(w, "RELEASE") != 0)
    return TXC_NONE;
  int t = ask_sqlite(sql).tx;
  if (t == TXC_BEGIN) {
    next_word(&p, w, sizeof w);
    if (strcmp(w, "IMMEDIATE") == 0)
      kind = TXB_IMMEDIATE;
    else if (strcmp(w, "EXCLUSIVE") == 0)
      kind = TXB_EXCLUSIVE;
    else if (strcmp(w, "TRANSACTION") == 0) {
      next_word(&p, w, sizeof w);
      if (strcmp(w, "READONLY") == 0)
        kind = TXB_READONLY;
    }
  }
  if (begin_kind != NULL)
    *begin_kind = kind;
  return t;
}
