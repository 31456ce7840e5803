/*
 * libFuzzer harness: a /v3/cursor body ({"baton": ..., "batch": {"steps":
 * [...]}}) through lithd_hrana_cursor_parse, then its one request through
 * lithd_hrana_batch as hrana_http.c runs it, with small limits so that the
 * limit checks are reached too. The same bytes go through
 * lithd_hrana_pipeline_parse and each request that runs SQL likewise (the
 * two parsers share their body's reading). Refusals are fine; crashes,
 * overreads and leaks are not (ASan + UBSan). `make fuzz` runs it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hrana.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Build (and free) the batch of request rq, as a pipeline would run it. */
static void build(const lj_value *rq, int kind, const lithd_limits *lim) {
  lithd_batch *b = NULL;
  lithd_hrana_plan plan;
  lithd_hrana_error e;
  if (kind == LITHD_HR_EXECUTE || kind == LITHD_HR_BATCH || kind == LITHD_HR_SEQUENCE ||
      kind == LITHD_HR_DESCRIBE) {
    if (lithd_hrana_batch(rq, kind, NULL, lim, &b, &plan, &e) == 0) {
      if (b == NULL)
        abort();
    } else if (b != NULL || e.code == NULL) {
      abort();
    }
    lithd_batch_free(b);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lithd_limits lim;
  lithd_limits_default(&lim);
  lim.max_statements = 8;
  lim.max_sql_bytes = 256;
  lithd_hrana_pipeline *p = NULL;
  lithd_hrana_error e;
  if (lithd_hrana_cursor_parse((const char *)data, size, &p, &e) == 0) {
    /* a cursor is a pipeline of one batch request */
    if (p == NULL || !p->cursor || p->n != 1 || lithd_hrana_kind(p->requests[0]) != LITHD_HR_BATCH)
      abort();
    if (p->baton != NULL && strlen(p->baton) > size)
      abort();
    build(p->requests[0], LITHD_HR_BATCH, &lim);
  } else if (p != NULL || e.code == NULL) {
    abort();
  }
  lithd_hrana_pipeline_free(p);
  p = NULL;
  if (lithd_hrana_pipeline_parse((const char *)data, size, lim.max_statements, &p, &e) == 0) {
    if (p == NULL || p->cursor || p->n < 0 || p->n > lim.max_statements)
      abort();
    for (int i = 0; i < p->n; i++)
      build(p->requests[i], lithd_hrana_kind(p->requests[i]), &lim);
  } else if (p != NULL || e.code == NULL) {
    abort();
  }
  lithd_hrana_pipeline_free(p);
  return 0;
}
