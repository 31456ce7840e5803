/* Result code names and the per-thread error message: see error.h. */
#include "error.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A thread's message lives in a buffer allocated at its first error, not in
 * static thread-local storage: that would cost every thread of the host
 * program (which may have thousands and call lith from a few) its size,
 * message or not. Thread-local: a pointer and a flag. The buffer is freed
 * when the thread exits, by a key's destructor. */
#define LITH__ERRBUF 512
static _Thread_local char *lith__errbuf;
static _Thread_local unsigned char lith__errlost; /* a message was due, no room for it */
static pthread_key_t lith__errkey;
static pthread_once_t lith__errkey_once = PTHREAD_ONCE_INIT;
static int lith__errkey_ok;

static void errbuf_free(void *p) {
  free(p);
  lith__errbuf = NULL; /* a lith call from a later destructor allocates afresh */
}

static void errkey_create(void) { lith__errkey_ok = pthread_key_create(&lith__errkey, errbuf_free) == 0; }

/* This thread's buffer, allocated if need be; NULL when there is no room. */
static char *errbuf(void) {
  if (lith__errbuf)
    return lith__errbuf;
  pthread_once(&lith__errkey_once, errkey_create);
  if (!lith__errkey_ok)
    return NULL; /* no destructor to free it: do not leak one per thread */
  char *b = malloc(LITH__ERRBUF);
  if (!b)
    return NULL;
  if (pthread_setspecific(lith__errkey, b) != 0) {
    free(b);
    return NULL;
  }
  b[0] = '\0';
  return lith__errbuf = b;
}

const char *lith_errstr(int rc) {
  switch (rc) {
  case LITH_OK: return "ok";
  case LITH_ERROR: return "SQL error";
  case LITH_MISUSE: return "API misuse";
  case LITH_NOMEM: return "out of memory";
  case LITH_CLOSED: return "closed: not accepting commands";
  case LITH_QUEUE_FULL: return "queue full";
  case LITH_BUSY: return "database is locked by another connection";
  case LITH_CONSTRAINT: return "constraint failed";
  case LITH_IOERR: return "disk I/O error";
  case LITH_DISKFULL: return "disk full";
  case LITH_ABORTED: return "transaction aborted";
  case LITH_CANTOPEN: return "cannot open database file";
  case LITH_CORRUPT: return "database file is damaged or not a database";
  case LITH_READONLY: return "read-only";
  case LITH_SCHEMA: return "database schema is newer than this program";
  case LITH_INTERRUPTED: return "interrupted";
  default: return rc >= LITH_USER ? "command error" : "unknown error";
  }
}

void lith__strlcpy(char *dst, const char *src, size_t n) {
  if (n == 0)
    return;
  size_t len = src ? strlen(src) : 0;
  if (len >= n)
    len = n - 1;
  if (len)
    memcpy(dst, src, len);
  dst[len] = '\0';
}

int lith__failv(int rc, const char *fmt, va_list ap) {
  char *b = errbuf();
  lith__errlost = b == NULL;
  if (b)
    vsnprintf(b, LITH__ERRBUF, fmt, ap);
  return rc;
}

int lith__fail(int rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  lith__failv(rc, fmt, ap);
  va_end(ap);
  return rc;
}

int lith_set_error(int rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  lith__failv(rc, fmt, ap);
  va_end(ap);
  return rc;
}

void lith__clear_error(void) {
  lith__errlost = 0;
  if (lith__errbuf) /* a thread without a buffer has no message: nothing to do */
    lith__errbuf[0] = '\0';
}

void lith__set_errmsg(const char *msg) {
  if (!msg || !msg[0]) {
    lith__clear_error();
    return;
  }
  char *b = errbuf();
  lith__errlost = b == NULL;
  if (b)
    lith__strlcpy(b, msg, LITH__ERRBUF);
}

const char *lith_errmsg(lith *db) {
  (void)db;
  if (lith__errlost)
    return "out of memory (no room for the message)";
  return lith__errbuf ? lith__errbuf : "";
}
