/* Parameter binding and simple stepping: see bind.h. */
#include "bind.h"

#include "errcode.h"
#include "stmt_cache.h"

int lith__bind_va(sqlite3_stmt *st, const char *types, va_list ap) {
  int rc = SQLITE_OK;
  int i = 1;
  for (const char *t = types ? types : ""; *t && rc == SQLITE_OK; t++, i++) {
    switch (*t) {
    case 'i': rc = sqlite3_bind_int(st, i, va_arg(ap, int)); break;
    case 'I': rc = sqlite3_bind_int64(st, i, (sqlite3_int64)va_arg(ap, int64_t)); break;
    case 'd': rc = sqlite3_bind_double(st, i, va_arg(ap, double)); break;
    case 's': {
      const char *s = va_arg(ap, const char *);
      rc = s ? sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, i);
      break;
    }
    case 't': {
      /* both arguments are taken whatever the pointer: the next letter's follow */
      const char *s = va_arg(ap, const char *);
      size_t n = va_arg(ap, size_t);
      rc = s ? sqlite3_bind_text64(st, i, s, (sqlite3_uint64)n, SQLITE_TRANSIENT, SQLITE_UTF8)
             : sqlite3_bind_null(st, i);
      break;
    }
    case 'b': {
      const void *p = va_arg(ap, const void *);
      size_t n = va_arg(ap, size_t);
      /* a non-NULL pointer of length 0 is the empty blob, as SQLite binds it */
      rc = p ? sqlite3_bind_blob64(st, i, p, (sqlite3_uint64)n, SQLITE_TRANSIENT) : sqlite3_bind_null(st, i);
      break;
    }
    case 'n': rc = sqlite3_bind_null(st, i); break;
    default: return lith__fail(LITH_MISUSE, "bind: unknown type '%c' at parameter %d", *t, i);
    }
  }
  if (rc != SQLITE_OK)
    return lith__fail_sqlite(rc, sqlite3_db_handle(st), "bind");
  return LITH_OK;
}

int lith__step_all(sqlite3_stmt *st) {
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW)
    ;
  if (rc != SQLITE_DONE)
    return lith__fail_sqlite(rc, sqlite3_db_handle(st), "step");
  return LITH_OK;
}

int lith__step_int64(sqlite3_stmt *st, int64_t *out) {
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    *out = sqlite3_column_int64(st, 0);
    return LITH_OK;
  }
  if (rc == SQLITE_DONE)
    return lith__fail(LITH_ERROR, "no row");
  return lith__fail_sqlite(rc, sqlite3_db_handle(st), "step");
}

int lith__run_va(lith__stmt_cache *c, const char *sql, const char *types, va_list ap, int64_t *out) {
  sqlite3_stmt *st = NULL;
  int rc = lith__stmt_cache_get(c, sql, &st);
  if (rc != LITH_OK)
    return rc;
  rc = lith__bind_va(st, types, ap);
  if (rc == LITH_OK)
    rc = out ? lith__step_int64(st, out) : lith__step_all(st);
  sqlite3_reset(st);
  return rc;
}
