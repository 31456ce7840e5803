/*
 * sqljson — what the three stages share (sqljson_int.h): setting errors,
 * the code names and HTTP statuses of the answers, the default limits.
 * The stages: sqljson_parse.c, sqljson_run.c, sqljson_encode.c.
 */
#include "sqljson_int.h"

#include <stdarg.h>
#include <stdio.h>

/* ---- Errors ---------------------------------------------------------------- */

int lithd__error_vset(lithd_error *err, int code, int statement, const char *fmt, va_list ap) {
  if (err) {
    err->code = code;
    err->statement = statement;
    vsnprintf(err->message, sizeof err->message, fmt, ap);
  }
  return code;
}

int lithd_error_set(lithd_error *err, int code, int statement, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  lithd__error_vset(err, code, statement, fmt, ap);
  va_end(ap);
  return code;
}

void lithd__error_clear(lithd_error *err) {
  err->code = LITH_OK;
  err->statement = -1;
  err->message[0] = '\0';
}

const char *lithd_code_name(int code) {
  switch (code) {
  case LITH_OK: return "ok";
  case LITH_ERROR: return "sql_error";
  case LITH_MISUSE: return "misuse";
  case LITH_NOMEM: return "nomem";
  case LITH_CLOSED: return "closed";
  case LITH_QUEUE_FULL: return "queue_full";
  case LITH_BUSY: return "busy";
  case LITH_CONSTRAINT: return "constraint";
  case LITH_IOERR: return "ioerr";
  case LITH_DISKFULL: return "disk_full";
  case LITH_ABORTED: return "aborted";
  case LITH_CANTOPEN: return "cantopen";
  case LITH_CORRUPT: return "corrupt";
  case LITH_READONLY: return "readonly";
  case LITH_SCHEMA: return "schema";
  case LITH_INTERRUPTED: return "interrupted";
  case LITHD_BAD_REQUEST: return "bad_request";
  case LITHD_TOO_LARGE: return "too_large";
  case LITHD_RESULT_TOO_LARGE: return "result_too_large";
  case LITHD_UNENCODABLE: return "unencodable";
  case LITHD_NOT_A_QUERY: return "not_a_query";
  case LITHD_TIMEOUT: return "timeout";
  case LITHD_NOT_FOUND: return "not_found";
  case LITHD_FORBIDDEN: return "forbidden";
  case LITHD_CONFLICT: return "conflict";
  case LITHD_OUTCOME_UNKNOWN: return "outcome_unknown";
  case LITHD_TX_TIMEOUT: return "transaction_timeout";
  case LITHD_TX_TOO_OLD: return "snapshot_too_old";
  default: return code >= LITH_USER ? "command_error" : "unknown";
  }
}

int lithd_http_status(int code) {
  switch (code) {
  case LITH_OK: return 200;
  case LITHD_BAD_REQUEST:
  case LITH_ERROR:
  case LITH_MISUSE: return 400;
  case LITHD_NOT_A_QUERY:
  case LITHD_FORBIDDEN: return 403;
  case LITHD_NOT_FOUND: return 404;
  case LITH_CONSTRAINT:
  case LITHD_CONFLICT: return 409;
  case LITHD_TOO_LARGE: return 413;
  case LITHD_RESULT_TOO_LARGE:
  case LITHD_UNENCODABLE:
  case LITHD_TIMEOUT: return 422;
  case LITH_BUSY:
  case LITH_QUEUE_FULL:
  case LITH_CLOSED:
  case LITH_INTERRUPTED:
  case LITH_ABORTED: return 503;
  case LITHD_OUTCOME_UNKNOWN: return 504;
  case LITHD_TX_TIMEOUT:
  case LITHD_TX_TOO_OLD: return 408;
  case LITH_DISKFULL: return 507;
  default: return 500; /* NOMEM, IOERR, CORRUPT, CANTOPEN, READONLY, SCHEMA, ... */
  }
}

/* ---- Limits ------------------------------------------------------------------ */

void lithd_limits_default(lithd_limits *lim) {
  lim->max_body_bytes = 8u * 1024 * 1024;
  lim->max_statements = 10000;
  lim->max_sql_bytes = 100000;
  lim->max_params = 1000;
  lim->max_rows = 10000;
  lim->max_result_bytes = 64u * 1024 * 1024;
  lim->max_run_ms = 5000;
  lim->cell_frame = 0;
}
