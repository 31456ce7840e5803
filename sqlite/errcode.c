/* SQLite's result codes as lith's: see errcode.h. */
#include "errcode.h"

#include <errno.h>

int lith_from_sqlite(int sqlite_rc) {
  /* The WAL index (-shm) could not grow: the disk is full (unixShmMap
   * writes the new region). The soak met it: after a restart a commit needs
   * a new region while the disk is full. */
  if (sqlite_rc == SQLITE_IOERR_SHMSIZE)
    return LITH_DISKFULL;
  switch (sqlite_rc & 0xff) {
  case SQLITE_OK:
  case SQLITE_ROW:
  case SQLITE_DONE: return LITH_OK;
  case SQLITE_BUSY:
  case SQLITE_LOCKED: return LITH_BUSY;
  case SQLITE_CONSTRAINT: return LITH_CONSTRAINT;
  case SQLITE_IOERR: return LITH_IOERR;
  case SQLITE_FULL: return LITH_DISKFULL;
  case SQLITE_NOMEM: return LITH_NOMEM;
  case SQLITE_CANTOPEN: return LITH_CANTOPEN;
  case SQLITE_CORRUPT:
  case SQLITE_NOTADB: return LITH_CORRUPT;
  case SQLITE_READONLY: return LITH_READONLY;
  case SQLITE_MISUSE: return LITH_MISUSE;
  case SQLITE_INTERRUPT: return LITH_INTERRUPTED;
  default: return LITH_ERROR;
  }
}

int lith__code_of(int sqlite_rc, sqlite3 *conn) {
  int rc = lith_from_sqlite(sqlite_rc);
  /* An I/O error whose cause was a full disk or quota is a full disk. */
  if (rc == LITH_IOERR && conn) {
    int e = sqlite3_system_errno(conn);
    if (e == ENOSPC || e == EDQUOT)
      return LITH_DISKFULL;
  }
  return rc;
}

int lith__fail_sqlite(int sqlite_rc, sqlite3 *conn, const char *what) {
  const char *msg = conn ? sqlite3_errmsg(conn) : sqlite3_errstr(sqlite_rc);
  return lith__fail(lith__code_of(sqlite_rc, conn), "%s: %s", what, msg);
}
