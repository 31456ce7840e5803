/*
 * sql/txctl.c — which statements open or end a stream's transaction
 * (lithd__txctl, sqljson_int.h).
 *
 * Design: a scan of the first word only picks the candidates (BEGIN,
 * COMMIT, END, ROLLBACK), so that the common statement costs nothing;
 * SQLite decides about each candidate. The text is prepared (never
 * stepped) on one in-memory connection of this file, whose authorizer
 * records SQLITE_TRANSACTION: a statement SQLite does not parse as
 * transaction control (a syntax error, ROLLBACK TO, two statements) is
 * TXC_NONE and goes on to be prepared where it runs, with that
 * connection's errors and authorizer. So a text is never taken for a
 * COMMIT that SQLite would not run as one, whatever its comments or case.
 * The connection is opened on first use and kept for the process (one
 * mutex: a prepare of a short statement).
 */
#include <ctype.h>
#include <pthread.h>
#include <string.h>
#include <strings.h>

#include <sqlite3.h>

#include "sqljson_int.h"

static pthread_mutex_t conn_mu = PTHREAD_MUTEX_INITIALIZER;
static sqlite3 *conn;

/* The next word of *s past blanks and comments, into w (upper-cased, cut
 * at cap - 1); *s moves past it. "" at the end or before punctuation. */
static void next_word(const char **s, char *w, size_t cap) {
  const char *p = *s;
  size_t n = 0;
  for (;;) {
    while (isspace((unsigned char)*p))
      p++;
    if (p[0] == '-' && p[1] == '-') {
      p = strchr(p, '\n');
      if (!p) {
        p = "";
        break;
      }
    } else if (p[0] == '/' && p[1] == '*') {
      const char *e = strstr(p + 2, "*/");
      p = e ? e + 2 : "";
    } else {
      break;
    }
  }
  while (isalpha((unsigned char)*p) || *p == '_') {
    if (n + 1 < cap)
      w[n++] = (char)toupper((unsigned char)*p);
    p++;
  }
  w[n] = '\0';
  *s = p;
}

static int saw_transaction(void *ctx, int action, const char *a, const char *b, const char *c,
                           const char *d) {
  int *seen = ctx;
  (void)b, (void)c, (void)d;
  if (action == SQLITE_TRANSACTION && a != NULL)
    *seen = a[0] == 'B' ? TXC_BEGIN : a[0] == 'C' ? TXC_COMMIT : TXC_ROLLBACK;
  return SQLITE_OK;
}

/* SQLite's word on sql: TXC_NONE unless it prepares as one transaction
 * statement (nothing after it but blanks and comments). */
static int ask_sqlite(const char *sql) {
  int seen = TXC_NONE;
  sqlite3_stmt *st = NULL;
  const char *tail = NULL;
  pthread_mutex_lock(&conn_mu);
  if (conn == NULL &&
      sqlite3_open_v2(":memory:", &conn, SQLITE_OPEN_READWRITE | SQLITE_OPEN_MEMORY, NULL) != SQLITE_OK) {
    sqlite3_close(conn);
    conn = NULL;
  }
  if (conn != NULL) {
    sqlite3_set_authorizer(conn, saw_transaction, &seen);
    if (sqlite3_prepare_v2(conn, sql, -1, &st, &tail) != SQLITE_OK || st == NULL) {
      seen = TXC_NONE;
    } else {
      char w[2];
      next_word(&tail, w, sizeof w);
      if (*tail != '\0' && *tail != ';') /* a second statement: not ours to split */
        seen = TXC_NONE;
      else if (*tail == ';') {
        tail++;
        while (isspace((unsigned char)*tail))
          tail++;
        next_word(&tail, w, sizeof w);
        if (*tail != '\0')
          seen = TXC_NONE;
      }
    }
    sqlite3_finalize(st);
    sqlite3_set_authorizer(conn, NULL, NULL);
  }
  pthread_mutex_unlock(&conn_mu);
  return seen;
}

int lithd__txctl(const char *sql, int *begin_kind) {
  char w[16];
  const char *p = sql;
  int kind = TXB_DEFERRED;
  next_word(&p, w, sizeof w);
  if (strcmp(w, "BEGIN") != 0 && strcmp(w, "COMMIT") != 0 && strcmp(w, "END") != 0 &&
      strcmp(w, "ROLLBACK") != 0)
    return TXC_NONE;
  int t = ask_sqlite(sql);
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
